# md.py: markdown table of every run (results.jsonl)
import json
rows=[json.loads(l) for l in open('/tmp/attack16/results.jsonl')]
def key(r):
    p,n,eh,s=r['t'].split('-'); return (p,int(n),float(eh),int(s))
print("| population | n | εh | seed | pick | coverage all / F ≥ 1e-12·max | hot 1% | pick / best measured | pick / plain (λ=0) | ranked pred/meas (min–max) | CPU of `map aggregate` (s) |")
print("|---|---|---|---|---|---|---|---|---|---|---|")
for r in sorted(rows,key=key):
    p,n,eh,s=key(r); R=r['score']['res']; P=R['plan']; best=min(v['ase'] for v in R.values())
    rk=[v['ratio'] for v in R.values() if v.get('ranked')]
    rr=f"{min(rk):.3g}–{max(rk):.3g}" if rk else "–"
    tm=r['time'].split(); cpu=float(tm[1])+float(tm[2])
    print(f"| {p} | {n:.0e} | {eh:g} | {s} | {P['est'][9:]}{'' if P.get('ranked',True) else ' (unranked)'} | {P['cov']:.3f} / {P['cov_mask']:.3f} | {P['cov_hot']:.2f} | {P['ase']/best:.2f} | {P['ase']/R['l0']['ase']:.3f} | {rr} | {cpu:.2f} |")
