# tab.py: main's vs moment24's plan per cell (results.jsonl of run.sh)
import json, re
def pred_of(line_res, name):
    return None
print("| cell (pop-n-εh) | λ=1 measured ASE | λ=1 predicted/measured main | moment24 | best measured (λ grid) | main pick (ratio to best) | moment24 pick (ratio to best) | aggregate wall/user/sys/RSS KB (moment24) | plan wall/user/sys/RSS KB |")
print("|---|---|---|---|---|---|---|---|---|")
for l in open('/tmp/moment24/results.jsonl'):
    d = json.loads(l); s = d['score']; m = d['main']
    lam = {k: v['ase'] for k, v in s['res'].items() if k.startswith('l')}
    best = min(lam.values())
    l1 = s['res']['l1']
    def pick(sc):
        line = sc['pick_line']
        name = re.match(r"pick ([^:]+):", line)
        name = name.group(1) if name else line
        if name.startswith('vector'):
            pv = float(re.search(r"predicted ASE ([0-9.e+-]+)", line).group(1))
            return f"vector-laplace (predicted {pv:.3g}: {pv/best:.2f}x)"
        a = sc['res'].get('plan', sc['res'].get('mainplan', {})).get('ase')
        if a is None:
            for k, v in sc['res'].items():
                if k in ('plan', 'mainplan'): a = v['ase']
        return f"{name} ({a/best:.2f}x)" if a else name
    print(f"| {d['t']} | {l1['ase']:.3g} | {m['res']['l1'].get('ratio', float('nan')):.3g} | {l1.get('ratio', float('nan')):.3g} | {best:.3g} | {pick(m)} | {pick(s)} | {d['time']} | {d['plantime']} |")
