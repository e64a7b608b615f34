# held.py results.jsonl: per population, cells, EM picks, worst pick/best, range of every RANKED pred/meas (all rows)
import json, collections
D = collections.defaultdict(lambda: [0, 0, 0.0, 9e9, 0.0, 0])
for l in open(__import__("sys").argv[1]):
    r = json.loads(l); p = r["t"].split("-")[0]; res = r["score"]["res"]
    ker = {k: v for k, v in res.items() if k.startswith("l")}; best = min(v["ase"] for v in ker.values())
    d = D[p]; d[0] += 1; d[1] += res["plan"]["est"] == "a-priori em"; d[2] = max(d[2], res["plan"]["ase"]/best)
    for k, v in res.items():
        if v.get("ranked") and "ratio" in v: d[3] = min(d[3], v["ratio"]); d[4] = max(d[4], v["ratio"]); d[5] += 1
print("| population | cells | EM picks | worst pick/best kernel map | ranked pred/meas range (rows) |")
print("|---|---|---|---|---|")
for p, d in sorted(D.items()):
    print(f"| {p} | {d[0]} | {d[1]} | {d[2]:.2f} | {d[3]:.2f}–{d[4]:.2f} ({d[5]}) |")
