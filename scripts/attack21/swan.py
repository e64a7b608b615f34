# swan.py sw/*.md: map sweep rows whose planner/best is beyond 1.5x (best includes EM), (the sweep's EM 'predicted' column is not the planner's ranked prediction: not scored)
import sys, re
nt = nf = 0
for f in sys.argv[1:]:
    for l in open(f):
        c = [x.strip() for x in l.split("|")[1:-1]]
        if len(c) < 13 or not c[0].isdigit(): continue
        nt += 1
        try: pb = float(c[11])
        except ValueError: continue
        flag = pb > 1.5
        em = re.match(r"([-0-9.e+]+) \(([-0-9.e+]+)", c[6])
        if flag:
            nf += 1; print(f.split("/")[-1][:-3], "n", c[0], "eh", c[1], "pick", c[8], "planner/best", c[11], "| EM (meas, (pred?, t))", c[6], "planner", c[7], "best λ", c[5], "debiased", c[4])
print("rows", nt, "flagged", nf)
