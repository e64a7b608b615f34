import json, sys, numpy as np
F = np.load(sys.argv[1]); Fm = F.max(); r = F/Fm
d = json.load(open(sys.argv[2])); v = np.array(d["values"], float); se = np.array(d["standard_errors"], float)
c = np.array(d.get("interval_centres") or d["values"], float); z = (c-F)/se
edges = [0, 1e-300, 1e-12, 1e-9, 1e-6, 1e-3, 1e-2, 1e-1, 1.01]
print(sys.argv[2], d["estimator"], d["lambda"])
for a, b in zip(edges[:-1], edges[1:]):
    m = (r >= a) & (r < b)
    if m.any(): print(f"  F/Fmax in [{a:.0e},{b:.0e}): {m.sum():5d} cells, cov {np.mean(np.abs(z[m]) <= 1.96):.3f}, sd(z) {np.std(z[m]):.2f}, mean z {np.mean(z[m]):+.2f}")
