# hostile17.py HONEST.jsonl OUTDIR: forged a-priori report lines aimed at the binning (bins of D = 20000/360 m at eh >= 100)
import sys, json, numpy as np
src, out = sys.argv[1], sys.argv[2]
t = json.loads(open(src).readline()); D = 20000/360
def line(x, y, i): return '{"set":"%s","mechanism":"a_priori","epsilon":%r,"location":[%s,%s],"report_id":"f%031x"}' % (t["set"], t["epsilon"], x, y, i)
def w(name, pts):
    with open(f"{out}/{name}.jsonl", "w") as f:
        for i, (x, y) in enumerate(pts): f.write(line(x, y, 10**6 + i) + "\n")
rng = np.random.default_rng(17)
k = rng.integers(0, 360, (300, 2))
w("edge", [(repr(float((a+0.5)*D)), repr(float((b+0.5)*D))) for a, b in k])                                   # exactly on bin edges (as f64 rounds them)
w("edgeulp", [(repr(float(np.nextafter((a+0.5)*D, s))), repr(float(np.nextafter((b+0.5)*D, -s)))) for (a, b), s in zip(k, rng.choice([-1e9, 1e9], 300))])
w("max", [("1.7976931348623157e308", "-1.7976931348623157e308"), ("-1.7976931348623157e308", "1.7976931348623157e308"), ("1.7976931348623157e308", "1.7976931348623157e308")]*10)
w("subnormal", [("5e-324", "5e-324"), ("-5e-324", "2.2250738585072014e-308"), ("4.9e-324", "-0.0"), (repr(100*D + 5e-324), repr(200*D))]*25)
c = 180*D + 1e-9                                                                                   # a hair off the bin centre at 10 km
w("flood2000", [(repr(c), repr(c))]*2000)
w("flood200", [(repr(c), repr(c))]*200)
w("floodedge", [(repr(float(np.nextafter(180.5*D, 0))), repr(180.5*D))]*2000)                     # one ulp inside a bin edge
w("lattice5000", [(repr(float(a*D)), repr(float(b*D))) for a, b in rng.integers(20, 340, (5000, 2))])            # every forged report on a bin centre (charge tiny)
# attack18 additions: aimed at the moments (offsets within a bin) and at i128 sums
w("huge", [(repr(s1*x), repr(s2*x)) for x in (1e15, 1e18, 9.3e18, 1.8e19, 1e30, 1e300) for s1 in (1, -1) for s2 in (1, -1)]*20)
w("edge10k", [(repr(float(np.nextafter((a+0.5)*D, 0))), repr(float(np.nextafter((b+0.5)*D, 0)))) for a, b in rng.integers(20, 340, (10000, 2))])   # max |offset|: rounding charge huge
w("centre10k", [(repr(float(a*D)), repr(float(b*D))) for a, b in rng.integers(20, 340, (10000, 2))])                                            # zero offset: charge tiny
w("mixsub", [(repr(float(a*D + 5e-324)), repr(float(b*D - 5e-324))) for a, b in rng.integers(20, 340, (3000, 2))])
