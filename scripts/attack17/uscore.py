# uscore.py HONEST_F.npy n_honest: coverage of the map of honest + forged points taken as devices (truth of the union)
import sys, json, glob, numpy as np, subprocess
Fh = np.load(sys.argv[1]); nh = int(sys.argv[2])
for f in sorted(glob.glob("h/agg-*.json")):
    name = f[6:-5]
    if name == "none": Fu = Fh
    else:
        P = [json.loads(l)["location"] for l in open(f"h/{name}.jsonl")]
        P = np.array([p for p in P if abs(p[0]) < 1e9 and abs(p[1]) < 1e9]) if P else np.zeros((0, 2))
        if len(P):
            np.savetxt("h/u.csv", P, fmt="%.17g", delimiter=","); subprocess.run(["python3", "s/truth.py", "h/u.csv", "h/u.npy"], check=True)
            Ff = np.load("h/u.npy"); Fu = (nh*Fh + len(P)*Ff)/(nh + len(json.load(open(f))["values"]) and nh + len(open(f"h/{name}.jsonl").readlines()))
        else: Fu = Fh*nh/(nh + len(open(f"h/{name}.jsonl").readlines()))
    d = json.load(open(f)); v = np.array(d["values"], float); se = np.array(d["standard_errors"], float)
    c = np.array(d.get("interval_centres") or d["values"], float); m = Fu >= 1e-12*Fu.max(); cov = np.abs(c-Fu) <= 1.96*se
    z = (c-Fu)/se
    print(f"{name:12s} n={d['n']} est={d['estimator']}{d['lambda']} ase(union)={np.mean((v-Fu)**2):.3e} cov(union)={cov.mean():.3f} covM={cov[m].mean():.3f} worst|z|={np.abs(z).max():.1f}")
