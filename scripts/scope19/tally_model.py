#!/usr/bin/env python3
"""Tally of tests/planner_model.rs's table (scripts/scope19/airports61.sh
output): per cell the pick/best and the ranked ratios; misses (a ranked
prediction outside [1/3, 3], an upper estimate exceeded more than 3x, a
pick beyond 1.5x the best measured map).

    scripts/scope19/tally_model.py /tmp/scope19/a61/*.txt
"""
import re
import sys
from collections import defaultdict

cells = defaultdict(lambda: {"preds": []})
for path in sys.argv[1:]:
    seed = re.search(r"seed (\d+)", open(path, encoding="utf-8").readline())
    seed = seed.group(1) if seed else "?"
    for line in open(path, encoding="utf-8"):
        if not line.startswith("| ") or line.startswith("| population") or line.startswith("|---"):
            continue
        f = [c.strip() for c in line.strip().strip("|").split("|")]
        key = (f[0], seed, int(f[2]), float(f[1]))
        if f[3].startswith("pick "):
            cells[key].update(pick=f[3][5:], pick_ase=float(f[4]), best=f[5][5:], ratio=float(f[6]))
        else:
            upper = f[4].startswith("<=")
            cells[key]["preds"].append((f[3], float(f[4].lstrip("<= ")), float(f[5]), float(f[6]), upper))

bad = []
ranked = upper = 0
for key in sorted(cells):
    c = cells[key]
    if "ratio" not in c:
        continue
    r = [p for p in c["preds"] if not p[4]]
    u = [p for p in c["preds"] if p[4]]
    ranked += len(r)
    upper += len(u)
    miss = [f"{p[0]} {p[3]:.2f}" for p in r if p[3] > 3 or p[3] < 1 / 3]
    miss += [f"{p[0]} <= {p[3]:.2f}" for p in u if p[3] > 3]
    if c["ratio"] > 1.5:
        miss.append(f"pick {c['pick']} {c['ratio']:.2f}x (best {c['best']})")
    if miss:
        bad.append((key, miss))
done = [k for k in cells if "ratio" in cells[k]]
print(f"{len(done)} seed-cells, {ranked} ranked predictions, {upper} upper estimates, {len(bad)} cells with a miss")
for key, miss in bad:
    print(f"  {key}: {'; '.join(miss)}")
print()
print("| εh | n | seed | pick | pick/best | ranked measured/predicted (min–max, count) |")
print("|---:|---:|---:|---|---:|---|")
for key in sorted(done, key=lambda k: (k[3], k[2], k[1])):
    c = cells[key]
    r = [p[3] for p in c["preds"] if not p[4]]
    rr = f"{min(r):.2f}–{max(r):.2f} ({len(r)})" if r else "–"
    print(f"| {key[3]:g} | {key[2]:.0e} | {key[1]} | {c['pick'].replace('a-priori ', '')} | {c['ratio']:.2f} | {rr} |")
