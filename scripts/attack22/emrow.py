import sys, json, re
t = sys.argv[1]
row = [l for l in open(f"em/{t}.md") if l.startswith("| ") and l[2].isdigit()][0]
c = [x.strip() for x in row.split("|")]
meas = {"plain": float(c[4]), "debiased": float(c[5]), "bestλ": float(c[6]), "em": float(c[7].split()[0]), "planner": float(c[8])}
def plan(fn):
    L = open(fn).read().splitlines()
    pick = L[1].split(":")[0].replace("pick ", "")
    pr = {}
    for l in L[2:]:
        m = re.match(r"\s+(a-priori (?:em|λ=[0-9.]+)|vector-laplace)\s+ASE (<= |in \[)?([-0-9.e+]+)", l)
        if m: pr[m.group(1)] = (float(m.group(3)), m.group(2) is None, l.strip())
    return pick, pr
out = {"t": t, "meas": meas, "sweep_pick": c[9], "sweep_ratio": float(c[12])}
for k in ("new", "base"):
    out[k] = plan(f"em/{t}.{k}.txt")
print(json.dumps(out, ensure_ascii=False))
