import sys, glob, os
# changed sweep rows where lead19's planner/best is worse than base's (regressions), and a tally
d = sys.argv[1]
def parse(fn):
    out = {}
    for l in open(fn):
        if l.startswith("| ") and not l.startswith("| n ") and "---" not in l:
            c = [x.strip() for x in l.split("|")]
            try: out[(c[1], c[2])] = (c[9], float(c[12]))
            except Exception: pass
    return out
tot = ch = better = worse = 0
for f in sorted(glob.glob(f"{d}/new-*.md")):
    b = f.replace("/new-", "/base-")
    if not os.path.exists(b): continue
    pn, pb = parse(f), parse(b)
    for k in pn:
        if k not in pb: continue
        tot += 1
        if pn[k] != pb[k]:
            ch += 1
            if pn[k][1] > pb[k][1] + 0.005: worse += 1; print("WORSE", os.path.basename(f)[4:-3], k, pb[k], "->", pn[k])
            elif pn[k][1] < pb[k][1] - 0.005: better += 1
print(f"rows {tot} changed {ch} better {better} worse {worse}")
