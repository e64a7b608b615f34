# score.py F.npy plan.txt agg-*.json...: measured ASE, coverage (all / F>=1e-12 max / regions), vs plan predictions
import sys, json, re, numpy as np
F = np.load(sys.argv[1]); k = int(round(len(F)**.5)); Fm = F.max()
plan = open(sys.argv[2]).read().splitlines()
pred = {}
for l in plan[1:]:
    m = re.match(r"\s+(a-priori (?:em|λ=[0-9.]+)|vector-laplace)\s+ASE (<= |in \[)?([-0-9.e+]+)", l)
    if m: pred[m.group(1)] = (float(m.group(3)), m.group(2) is None, l.strip())
pick = re.match(r"pick ([^:]+):", plan[1]).group(1) if plan[1].startswith("pick") else plan[1]
ii, jj = np.meshgrid(np.arange(k), np.arange(k), indexing="ij")
edge = (np.minimum.reduce([ii, jj, k-1-ii, k-1-jj]) <= 1).reshape(-1)
mask = F >= 1e-12*Fm
hot = F >= np.quantile(F, 0.99)
low = F < 1e-3*Fm
out = {"pick_line": plan[1][:60], "Fmax": Fm, "n_mask": int(mask.sum())}
res = {}
for f in sys.argv[3:]:
    d = json.load(open(f))
    v = np.array([np.nan if x is None else x for x in d["values"]], float)
    se = np.array([np.nan if x is None else x for x in d["standard_errors"]], float)
    c = d.get("interval_centres"); c = v if c is None else np.array([np.nan if x is None else x for x in c], float)
    cov = np.abs(c-F) <= 1.96*se
    name = "a-priori em" if d["estimator"] == "em" else f"a-priori λ={d['lambda']:.1f}"
    tag = f.split("agg-")[-1][:-5]
    ase = float(np.mean((v-F)**2))
    r = {"est": name, "ase": ase, "cov": float(cov.mean()), "cov_mask": float(cov[mask].mean()),
         "cov_edge": float(cov[edge].mean()), "cov_hot": float(cov[hot].mean()), "cov_low": float(cov[low].mean()) if low.any() else None,
         "nan": int(np.isnan(v).sum()+np.isnan(se).sum())}
    if name in pred: r["pred"] = pred[name][0]; r["ranked"] = pred[name][1]; r["ratio"] = pred[name][0]/ase
    res[tag] = r
out["res"] = res
print(json.dumps(out))
