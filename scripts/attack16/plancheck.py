import json
rows=[json.loads(l) for l in open('/tmp/attack16/results.jsonl')]
nr=nb=0; bad=[]; pk=[]; must=[]
for r in rows:
    R=r['score']['res']; p,n,eh,s=r['t'].split('-')
    for k,v in R.items():
        if k=='plan' or not v.get('ranked'): continue
        nr+=1
        if max(v['ratio'],1/v['ratio'])>3: nb+=1; bad.append(f"{r['t']} {v['est'][9:]} pred/meas {v['ratio']:.3g}")
    P=R['plan']; best=min(min(v['ase'] for v in R.values()),P['ase'])
    if P['ase']/best>1.5: pk.append(f"{r['t']} pick {P['est'][9:]} {P['ase']/best:.2f}x best")
    if n=='1000000':
        lim=1/3 if eh=='0.3' else (0.1 if float(eh)>=1 else None)
        q=P['ase']/R['l0']['ase']
        if lim and q>lim: must.append(f"{r['t']} pick/plain {q:.3f} > {lim:.3f}")
print(f"runs {len(rows)}; ranked predictions measured {nr}; beyond 3x {nb}"); print("\n".join(bad)); print("picks beyond 1.5x best:"); print("\n".join(pk)); print("n=1e6 must-hold misses (eh>=1 incl. 100,1000):"); print("\n".join(must))
