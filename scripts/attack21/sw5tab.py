# sw5tab.py: n 1e6 εh 30-300 sweeps (chain5.sh), merged vs 05b497d: pick and planner/best
import glob, os
def rows(f):
    out = {}
    if not os.path.exists(f): return out
    for l in open(f):
        c = [x.strip() for x in l.split("|")[1:-1]]
        if len(c) >= 13 and c[0] == "1000000": out[c[1]] = (c[8], c[11])
    return out
print("| population | grid | seed | εh | merged pick | ×best | 05b497d pick | ×best |"); print("|---|---|---|---|---|---|---|---|")
n = f = 0
for fn in sorted(glob.glob("sw5/*.md")):
    b = os.path.basename(fn)
    if b.startswith("base-"): continue
    p, g, s = b[:-3].rsplit("-", 2); A = rows(fn); B = rows("sw5/base-" + b)
    for e in A:
        if e not in B: continue
        n += 1; f += float(A[e][1]) > 1.5
        print(f"| {p} | {g[1:]} | {s[1:]} | {e} | {A[e][0]} | {A[e][1]} | {B[e][0]} | {B[e][1]} |")
print(f"\n{n} cells, {f} beyond 1.5x on merged main")
