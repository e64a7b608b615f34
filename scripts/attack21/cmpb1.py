# cmpb1.py: runner cells flagged on merged main (results-a1) beside 05b497d (results-b1): pick, pick/best, the pick's pred/meas
import json
def load(f):
    d = {}
    for l in open(f):
        r = json.loads(l); res = r["score"]["res"]; ker = {k: v for k, v in res.items() if k.startswith("l")}
        best = min(v["ase"] for v in ker.values()); p = res["plan"]
        l1 = res.get("l1", {})
        d[r["t"]] = (p["est"], p["ase"]/best, p.get("ratio"), p.get("ranked"), l1.get("ratio"))
    return d
A = load("results-a1.jsonl"); B = load("results-b1.jsonl")
print("| cell | merged pick | ×best | pick pred/meas (ranked) | λ=1 pred/meas | 05b497d pick | ×best | pick pred/meas (ranked) | λ=1 pred/meas |")
print("|---|---|---|---|---|---|---|---|---|")
f = lambda x: "–" if x is None else f"{x:.2f}"
for t in B:
    a = A[t]; b = B[t]
    print(f"| {t} | {a[0]} | {a[1]:.2f} | {f(a[2])} ({a[3]}) | {f(a[4])} | {b[0]} | {b[1]:.2f} | {f(b[2])} ({b[3]}) | {f(b[4])} |")
