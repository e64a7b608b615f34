# check17.py [results.jsonl]: issue 19 item 15 (ranked pred within 3x; pick within 1.5x of best) and issue 22 item 2 (coverage in [0.93,0.97], eh 0.3/1/10, n >= 1e4)
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1] if len(sys.argv) > 1 else "/tmp/attack17/results.jsonl")]
nr = nb = 0; bad = []; pk = []; cv = []; nc = okc = okm = 0
for r in rows:
    R = r['score']['res']; f = r['t'].split('-'); p, n, eh = f[0], int(f[1]), f[2]
    for k, v in R.items():
        if k == 'plan' or not v.get('ranked'): continue
        nr += 1
        if max(v['ratio'], 1/v['ratio']) > 3: nb += 1; bad.append(f"  {r['t']} {v['est'][9:]} pred/meas {v['ratio']:.3g}")
    P = R['plan']; best = min(min(v['ase'] for v in R.values()), P['ase'])
    if P['ase']/best > 1.5: pk.append(f"  {r['t']} pick {P['est'][9:]} {P['ase']/best:.2f}x best")
    if eh in ('0.3', '1', '10') and n >= 10000:
        nc += 1; a = 0.93 <= P['cov'] <= 0.97; b = 0.93 <= P['cov_mask'] <= 0.97; okc += a; okm += b
        if not b: cv.append(f"  {r['t']} ({P['est'][9:]}): all {P['cov']:.3f} live {P['cov_mask']:.3f} hot {P['cov_hot']:.2f}")
print(f"cells {len(rows)}; ranked predictions {nr}; beyond 3x {nb}"); print("\n".join(bad))
print(f"picks beyond 1.5x best: {len(pk)}"); print("\n".join(pk))
print(f"item-2 rows {nc}; all-cells in band {okc}; live cells in band {okm}; live misses:"); print("\n".join(cv))
