# f1tab.py: n 1e6 rows of sw3/ (and sw/ seed 41 vs old where present): merged pick and planner/best vs pre-session-18 main's
import glob, os
def rows(f):
    out = {}
    if not os.path.exists(f): return out
    for l in open(f):
        c = [x.strip() for x in l.split("|")[1:-1]]
        if len(c) >= 13 and c[0] == "1000000": out[c[1]] = (c[8], c[11], c[6].split(" ")[0], c[4])
    return out
print("| population | grid | seed | εh | merged pick | merged planner/best | old pick | old planner/best | EM measured | λ=1 measured |")
print("|---|---|---|---|---|---|---|---|---|---|")
for f in sorted(glob.glob("sw3/*.md")):
    b = os.path.basename(f)
    if b.startswith("old-"): continue
    p, g, s = b[:-3].rsplit("-", 2)
    A = rows(f); B = rows("sw3/old-" + b)
    for e in A:
        o = B.get(e, ("–", "–"))
        print(f"| {p} | {g[1:]} | {s[1:]} | {e} | {A[e][0]} | {A[e][1]} | {o[0]} | {o[1]} | {A[e][2]} | {A[e][3]} |")
