#!/usr/bin/env python3
"""Picks and ranked ratios of two builds on the same seed-cells (branch
scope19): every cell whose pick, pick/best or ranked predictions differ.

    scripts/scope19/compare.py OLD_DIR NEW_DIR
"""
import glob
import os
import sys


def cells(d):
    out = {}
    for path in glob.glob(os.path.join(d, "*.txt")):
        pop_seed = os.path.basename(path).split("-n")[0]
        key = None
        for line in open(path, encoding="utf-8"):
            if line.startswith("# pred ") or line.startswith("# pick "):
                f = line.split()
                key = (pop_seed, int(f[2]), float(f[3]))
                out.setdefault(key, []).append(line.strip())
    return out


old, new = cells(sys.argv[1]), cells(sys.argv[2])
common = sorted(set(old) & set(new))
changed = [k for k in common if old[k] != new[k]]
print(f"{len(common)} seed-cells in both, {len(changed)} differ")
for k in changed:
    po = [l for l in old[k] if l.startswith("# pick")][0].split()
    pn = [l for l in new[k] if l.startswith("# pick")][0].split()
    print(f"{k[0]} n {k[1]} εh {k[2]:g}: pick {' '.join(po[4:6])} {po[-1]} -> {' '.join(pn[4:6])} {pn[-1]}")
