# moment23 experiment: see BENCHMARKS.md "Branch moment23"; paths under /tmp/moment23
import json, numpy as np, sys
p = sys.argv[1]
Y = np.array([json.loads(l)["location"] for l in open(f"reps/{p}.jsonl")])
D = 20000/360; h = np.hypot(20000/60, 20000/60)
C = np.round(Y/D)*D; U = Y - C
K = lambda z: np.exp(-(z**2).sum(-1)/(2*h*h))
rng = np.random.default_rng(0)
A=[];B=[];B2=[]
pts = [np.array([i*20000/60, j*20000/60]) for i in range(0,61,3) for j in range(0,61,3)]
for t in pts:
    zc = t - C
    a = (K(zc) - K(t - Y)).sum()
    g = -zc/(h*h) * K(zc)[:, None]   # grad K at zc
    b = (U*g).sum()
    # second order: 0.5 u^T H u, H = (zz^T/h^4 - I/h^2) K
    kk = K(zc); uz = (U*zc).sum(1)
    b2 = b - 0.5*((uz**2)/h**4 - (U**2).sum(1)/h**2) @ kk
    A.append(a); B.append(b); B2.append(b2)
A=np.array(A)/len(Y); B=np.array(B)/len(Y); B2=np.array(B2)/len(Y)
print(p, "mean A^2", np.mean(A**2), "mean B^2", np.mean(B**2), "mean B2^2", np.mean(B2**2), "corr", np.corrcoef(A,B)[0,1])
