import json, sys, numpy as np
F = np.load(sys.argv[1]); Fm = F.max()
for f in sys.argv[2:]:
    d = json.load(open(f)); v = np.array(d["values"], float); se = np.array(d["standard_errors"], float)
    c = np.array(d.get("interval_centres") or d["values"], float); n = d["n"]
    cov = np.mean(np.abs(c-F) <= 1.96*se); mask = F >= 1e-12*Fm
    print(f"{f:28s} n={n:6d} est={d['estimator']}{'' if d['lambda'] is None else d['lambda']} ase={np.mean((v-F)**2):.3e} cov(honest F)={cov:.3f} covM={np.mean((np.abs(c-F) <= 1.96*se)[mask]):.3f} mean half-width={1.96*se.mean():.3e} max|c-F|={np.abs(c-F).max():.3e} bins={d['binning']}")
