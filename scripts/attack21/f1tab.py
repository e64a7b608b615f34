# f1tab.py: n 1e6 rows of sw3/: merged pick and planner/best vs the base's (05b497d = /tmp/attack20/geopriv where sw3/base-* exists, else /tmp/lead17/geopriv, a main before lead17's rule)
import glob, os
def rows(f):
    out = {}
    if not os.path.exists(f): return out
    for l in open(f):
        c = [x.strip() for x in l.split("|")[1:-1]]
        if len(c) >= 13 and c[0] == "1000000": out[c[1]] = (c[8], c[11], c[6].split(" ")[0], c[4])
    return out
print("| population | grid | seed | εh | merged pick | merged planner/best | base pick | base planner/best | EM measured | λ=1 measured | base |")
print("|---|---|---|---|---|---|---|---|---|---|---|")
for f in sorted(glob.glob("sw3/*.md")):
    b = os.path.basename(f)
    if b.startswith("old-") or b.startswith("base-"): continue
    p, g, s = b[:-3].rsplit("-", 2)
    A = rows(f); B = rows("sw3/base-" + b) or rows("sw3/old-" + b); src = "05b497d" if rows("sw3/base-" + b) else "pre-lead17"
    for e in A:
        o = B.get(e, ("–", "–"))
        print(f"| {p} | {g[1:]} | {s[1:]} | {e} | {A[e][0]} | {A[e][1]} | {o[0]} | {o[1]} | {A[e][2]} | {A[e][3]} | {src} |")
