# an.py results.jsonl...: per cell, the pick's ASE / the best kernel map's ASE (EM picks: vs the best kernel map),
# and every RANKED prediction whose ratio pred/measured is beyond 3x either way. Flags: P = pick > 1.5x, R = ranked miss.
import sys, json
rows = []
for f in sys.argv[1:]:
    for l in open(f):
        try: d = json.loads(l)
        except Exception: continue
        r = d["score"]["res"]; t = d["t"]
        ker = {k: v for k, v in r.items() if k.startswith("l")}
        if not ker or "plan" not in r: continue
        best = min(v["ase"] for v in ker.values()); bk = min(ker, key=lambda k: ker[k]["ase"])
        p = r["plan"]; pr = p["ase"]/best if best > 0 else float("inf")
        flags = []
        if pr > 1.5: flags.append("P")
        miss = []
        for k, v in r.items():
            if v.get("ranked") and "ratio" in v and (v["ratio"] > 3 or v["ratio"] < 1/3):
                miss.append(f"{k}:{v['est']} pred/meas {v['ratio']:.2f}")
        if miss: flags.append("R")
        rows.append((t, p["est"], pr, bk, best, flags, miss, p.get("ratio"), p.get("ranked")))
nf = 0
for t, est, pr, bk, best, flags, miss, prat, rk in rows:
    if flags or "-v" in sys.argv[0:1]:
        nf += 1
        print(f"{t:34s} pick {est:16s} {pr:6.2f}x best({bk}) {best:.3e} pick pred/meas {prat if prat is None else round(prat,2)} ranked={rk} {''.join(flags)} {'; '.join(miss)}")
print(f"cells {len(rows)}; flagged {nf}; picks>1.5x {sum('P' in r[5] for r in rows)}; ranked misses {sum('R' in r[5] for r in rows)}; EM picks {sum(r[1]=='a-priori em' for r in rows)}")
