import json, sys
rows = [json.loads(l) for l in open(sys.argv[1] if len(sys.argv) > 1 else "results.jsonl")]
print(f"{'run':28s} {'pick':14s} {'cov':>6s} {'covM':>6s} {'edge':>5s} {'hot':>5s} {'low':>5s} | {'pickASE':>9s} {'best':>9s} {'pk/best':>7s} {'pk/l0':>6s} {'pk/l1':>6s} | worst ranked pred/meas  | l1cov l1covM | t(s) MB")
for r in rows:
    R = r["score"]["res"]; p = R["plan"]
    kern = {k: v for k, v in R.items() if k != "plan"}
    best = min(min(v["ase"] for v in kern.values()), p["ase"])
    rk = [(v["ratio"], v["est"]) for v in R.values() if v.get("ranked")]
    w = max(rk, key=lambda x: max(x[0], 1/x[0])) if rk else (float("nan"), "-")
    low = "  -  " if p["cov_low"] is None else f"{p['cov_low']:.3f}"
    tm = r["time"].split()
    print(f"{r['t']:28s} {p['est'][9:]:14s} {p['cov']:.3f} {p['cov_mask']:.3f} {p['cov_edge']:.2f} {p['cov_hot']:.2f} {low} | {p['ase']:9.3e} {best:9.3e} {p['ase']/best:7.2f} {p['ase']/R['l0']['ase']:6.3f} {p['ase']/R['l1']['ase']:6.3f} | {w[0]:6.2f} {w[1][9:]:8s} {'!' if max(w[0],1/w[0])>3 else ' '} | {R['l1']['cov']:.3f} {R['l1']['cov_mask']:.3f} | {tm[1]}+{tm[2]} {int(tm[3])//1024}")
