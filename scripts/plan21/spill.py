# spill.py REP.jsonl EPS : at the heavy bins (count >= 200) of side D = 20000/360 (centres at k·D), the share of the
# location's reports in the two neighbours along x, against the share expected for offsets uniform in the bin
import sys, json, numpy as np
D = 20000/360; eps = float(sys.argv[2])
P = np.array([json.loads(l)["location"] for l in open(sys.argv[1])])
ix = np.round(P[:,0]/D).astype(int); iy = np.round(P[:,1]/D).astype(int)
ix -= ix.min()-2; iy -= iy.min()-2
C = np.zeros((ix.max()+3, iy.max()+3)); np.add.at(C, (ix, iy), 1)
H = np.argwhere(C >= 200)
num = den = 0.0
for i, k in H:
    c, l, r = C[i,k], C[i-1,k], C[i+1,k]
    if l >= 200 or r >= 200: continue
    num += l + r; den += c + l + r
# expected for a location uniform in its bin under the planar Laplace noise (Monte Carlo, per-axis marginal)
rng = np.random.default_rng(1); m = 400000
u = (rng.random(m)-0.5)*D
r = rng.gamma(2, 1/eps, m); a = rng.random(m)*2*np.pi; x = u + r*np.cos(a)
unif = np.mean(np.abs(np.round(x/D)) >= 1)
x0 = r*np.cos(a); cen = np.mean(np.abs(np.round(x0/D)) >= 1)
print(f"{sys.argv[1].split('/')[-2]}: heavy bins {len(H)}, neighbour share {num/den:.4f}; expected uniform offsets {unif:.4f}, at bin centres {cen:.4f}")
