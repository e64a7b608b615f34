# tab.py results.jsonl [BIN]: per cell, main against BIN (default v22): the pick's ratio to the
# best measured map, measured/predicted over the kernel rows, EM's row.
import json, sys
B = sys.argv[2] if len(sys.argv) > 2 else 'v22'
R = {}
for l in open(sys.argv[1]):
    d = json.loads(l); b, rest = d['t'].split('-', 1); R.setdefault(rest, {})[b] = d
print("| cell | main pick (x best) | main kernels meas/pred | main EM pred/meas | plan22 pick (x best) | plan22 kernels meas/pred | plan22 EM pred/meas |")
print("|---|---|---|---|---|---|---|")
for k, v in R.items():
    if not {'main', B} <= set(v): continue
    row = [k]
    for b in ['main', B]:
        res = v[b]['score']['res']; best = min(r['ase'] for r in res.values()); pk = res['plan']
        m = [1 / r['ratio'] for t, r in res.items() if t != 'plan' and 'ratio' in r]
        em = f"{pk['ratio']:.2f}" if pk['est'] == 'a-priori em' and 'ratio' in pk else "–"
        row += [f"{pk['est'].replace('a-priori ', '')} {pk['ase'] / best:.2f}", f"{min(m):.2f}–{max(m):.2f}", em]
    print("| " + " | ".join(row) + " |")
