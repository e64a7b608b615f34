import json
rows=[json.loads(l) for l in open('/tmp/attack16/results.jsonl')]
ok=tot=okm=0; miss=[]
for r in rows:
    p,n,eh,s=r['t'].split('-'); 
    if eh not in ('0.3','1','10') or n=='1000' or p not in ('shops','gradient','ring','corner'): continue
    P=r['score']['res']['plan']; tot+=1
    a=0.93<=P['cov']<=0.97; b=0.93<=P['cov_mask']<=0.97; ok+=a; okm+=b
    if not (a and b): miss.append(f"{r['t']}({P['est'][9:]}): {P['cov']:.3f}/{P['cov_mask']:.3f}")
print(f"item-2 range rows: {tot}; all-cells in band {ok}; masked in band {okm}"); print("\n".join(miss))
