import json,sys
R={}
for l in open('/tmp/plan21/results.jsonl'):
    r=json.loads(l); R[(r['tag'],r['t'])]=r
def row(r):
    res=r['score']['res']; p=res['plan']
    best=min((v['ase'],k) for k,v in res.items() if k!='plan' and v.get('ase')==v.get('ase'))
    lam=[res[k] for k in sorted(res) if k.startswith('l')]
    ratios=[v['pred']/v['ase'] for v in lam if v.get('pred') and v.get('ase')]
    return p['est'], p['pred'], p['ase'], p['pred']/p['ase'] if p.get('pred') else float('nan'), p['ase']/best[0], min(ratios) if ratios else float('nan'), max(ratios) if ratios else float('nan'), p['cov']
print("| cell | before: pick, pred/meas (pick), pick/best, λ-maps pred/meas range | after: pick, pred/meas (pick), pick/best, λ-maps pred/meas range | plan CPU before/after (s) |")
print("|---|---|---|---|")
for eh in (30,100,1000):
  for p in "road2 ring ring20 atoms atomsc shops diag".split():
    t=f"{p}-100000-{eh}-1"
    b=R.get(('before',t)); a=R.get((sys.argv[1] if len(sys.argv)>1 else 'after',t))
    if not b or not a: continue
    rb=row(b); ra=row(a)
    cpu=lambda r: sum(map(float,r['plantime'].split()[1:3]))
    f=lambda x: f"{x[0].replace('a-priori ','')}, {x[3]:.3g}, {x[4]:.2f}, {x[5]:.3g}–{x[6]:.3g}"
    print(f"| {p} εh {eh} | {f(rb)} | {f(ra)} | {cpu(b):.2f} / {cpu(a):.2f} |")
