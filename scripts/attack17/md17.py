# md17.py: the every-cell table for docs/ATTACK-17.md
import json
print("| cell (pop-n-εh-seed[-grid]) | pick | pick/best | coverage all / live / top 1% | worst ranked pred/meas | pick CPU s, MB |")
print("|---|---|---|---|---|---|")
for l in open("/tmp/attack17/results.jsonl"):
    r = json.loads(l); R = r["score"]["res"]; P = R["plan"]; best = min(min(v["ase"] for v in R.values()), P["ase"])
    rk = [(v["ratio"], v["est"][9:]) for v in R.values() if v.get("ranked")]
    w = max(rk, key=lambda x: max(x[0], 1/x[0])) if rk else (float("nan"), "-")
    t = r["time"].split()
    print(f"| {r['t']} | {P['est'][9:]} | {P['ase']/best:.2f} | {P['cov']:.3f} / {P['cov_mask']:.3f} / {P['cov_hot']:.2f} | {w[0]:.3g} ({w[1]}) | {float(t[1])+float(t[2]):.2f}, {int(t[3])//1024} |")
