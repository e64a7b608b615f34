import sys, glob, os, re
# compare sweep outputs new-* vs base-* in a dir: pick and planner/best per row
d = sys.argv[1]
rows = []
for f in sorted(glob.glob(f"{d}/new-*.md")):
    b = f.replace("/new-", "/base-")
    if not os.path.exists(b): continue
    def parse(fn):
        out = {}
        for l in open(fn):
            if l.startswith("| ") and not l.startswith("| n ") and "---" not in l:
                c = [x.strip() for x in l.split("|")]
                try: out[(c[1], c[2])] = (c[9], float(c[12]))
                except Exception: pass
        return out
    pn, pb = parse(f), parse(b)
    for k in pn:
        if k in pb:
            rows.append((os.path.basename(f)[4:-3], k, pb[k], pn[k]))
nb = sum(1 for r in rows if r[2][1] > 1.5); nn = sum(1 for r in rows if r[3][1] > 1.5)
for name, k, ob, nw in rows:
    if ob != nw or ob[1] > 1.5 or nw[1] > 1.5:
        print(f"{name:28s} n {k[0]} εh {k[1]:5s}: base {ob[0]:16s} {ob[1]:6.2f}x  new {nw[0]:16s} {nw[1]:6.2f}x")
print(f"rows {len(rows)}; beyond 1.5x base {nb}, new {nn}; changed {sum(1 for r in rows if r[2]!=r[3])}")
