# cmpc6.py: chain7 cells, merged (results-c7) vs 05b497d (results-c7b): pick, pick/best kernel map, the pick's pred/meas
import json
def load(f):
    d = {}
    try: L = open(f).readlines()
    except OSError: return d
    for l in L:
        r = json.loads(l); res = r["score"]["res"]; ker = {k: v for k, v in res.items() if k.startswith("l")}
        best = min(v["ase"] for v in ker.values()); p = res["plan"]
        d[r["t"]] = (p["est"], p["ase"]/best, p.get("ratio"), p.get("ranked"))
    return d
A = load("results-c7.jsonl"); B = load("results-c7b.jsonl")
print("| cell | merged pick | ×best kernel map | pred/meas (ranked) | 05b497d pick | ×best | pred/meas (ranked) |"); print("|---|---|---|---|---|---|---|")
f = lambda x: "–" if x is None else f"{x:.2f}"
for t in A:
    if t not in B: continue
    a, b = A[t], B[t]
    print(f"| {t} | {a[0]} | {a[1]:.2f} | {f(a[2])} ({a[3]}) | {b[0]} | {b[1]:.2f} | {f(b[2])} ({b[3]}) |")
