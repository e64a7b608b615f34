# cmpold.py: every seed-41 sweep row swan.py flagged (merged main) beside /tmp/attack20/geopriv's (05b497d) pick on the same row
import glob, os, re
def row(f, n, e):
    for l in open(f):
        c = [x.strip() for x in l.split("|")[1:-1]]
        if len(c) >= 13 and c[0] == n and c[1] == e: return c
print("| population | grid | n | εh | merged pick | merged planner/best | 05b497d pick | 05b497d planner/best | session 18 made it |")
print("|---|---|---|---|---|---|---|---|---|")
for f in sorted(glob.glob("swbase/*.md")):
    m = re.match(r"(.+)-g(\d+)-s(\d+)-n(\d+)-e([0-9.]+)\.md", os.path.basename(f))
    p, g, s, n, e = m.groups()
    a = row(f"sw/{p}-g{g}-s{s}.md", n, e); b = row(f, n, e)
    if not a or not b: continue
    new = "**yes**" if float(b[11]) <= 1.5 < float(a[11]) else ("worse" if float(a[11]) > 1.05*float(b[11]) else "no")
    print(f"| {p} | {g} | {n} | {e} | {a[8]} | {a[11]} | {b[8]} | {b[11]} | {new} |")
