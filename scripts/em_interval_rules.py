#!/usr/bin/env python3
"""Score EM interval rules offline on the per-cell dumps of
`GEOPRIV_SWEEP_EM_DUMP=dir geopriv map sweep --coverage ...` (branch emcov3,
BENCHMARKS.md "Branch emcov3"; docs/MATH.md §9.7). Usage: em_interval_rules.py DIR
Prints one markdown row per (population, n, εh): picks, t*, main's coverage
(all cells and cells with truth >= 1e-12 of its peak), the oracle multiplier m*,
rho = median se1/SE, rule 8 (K1-referenced multiplier) and rule 9 (rho-gated
path bound). Needs numpy and scipy."""
import sys, glob, re, collections
import numpy as np
from scipy.stats import norm
def crit(t):
    # c with Phi(c-t)-Phi(-c-t)=0.95, vectorised bisection
    t=np.abs(t); lo=np.full_like(t,1.9); hi=t+2
    for _ in range(60):
        mid=(lo+hi)/2; c=norm.cdf(mid-t)-norm.cdf(-mid-t)<0.95
        lo=np.where(c,mid,lo); hi=np.where(c,hi,mid)
    return (lo+hi)/2
def basr(B,s):
    with np.errstate(divide='ignore',invalid='ignore'):
        r=np.where(s>0, crit(np.where(s>0,B/s,0))*s/1.959964, B/1.959964)
    return r
K=2.366025403784438; W=3.182/1.959964
def load(f):
    head=open(f).readline()
    d=np.genfromtxt(f,delimiter=',',skip_header=2)
    return head,{k:d[:,i] for i,k in enumerate('truth,m,pilot,s,b,se,k1,se1,k0,se0'.split(','))}
sys.path.insert(0, __import__('os').path.dirname(__file__))
from em_rules_common import cov, solve_m
import glob, re, collections
rows=collections.OrderedDict()
for f in sorted(glob.glob(sys.argv[1] + '/*.csv')):
    head,d=load(f)
    hw=head.split()
    pop,n,eh,r,tt,pick=hw[2],int(hw[4]),float(hw[6]),int(hw[8]),int(hw[10]),hw[12]+' '+hw[13]
    k1ase=float(re.search(r'a-priori λ=1\.0 ([0-9.e+-]+)',head).group(1))
    t=d['truth']; m=d['m']; se=d['se']; k1=d['k1']; se1=d['se1']; s=d['s']*W
    path=K*np.abs(m-d['pilot']); fl=64*2.22e-16*np.abs(m).max()
    live=t>=1e-12*t.max()
    mstar=solve_m(lambda a: cov(m,a*se,t))
    prox=lambda a: np.mean(np.abs(m-k1)<=1.96*np.sqrt((a*se)**2+se1**2))
    mh=solve_m(prox)
    rho=np.median(se1/se); rho2=np.sqrt(k1ase/np.mean(se**2))
    ska=np.maximum(basr(path,s),fl)
    g=ska if rho<=3 else se
    key=(pop,n,eh)
    rows.setdefault(key,[]).append(dict(c0=cov(m,se,t),live=cov(m[live],se[live],t[live]),t=tt,pick=pick.replace('a-priori ',''),mstar=mstar,mh=mh,c8=cov(m,mh*se,t),rho=rho,rho2=rho2,c9=cov(m,g,t),rmse=np.sqrt(np.mean(((m-t)/se)**2))))
print('| population | n | εh | picks | t* | EM cover (live cells) | m* | RMS (M−F)/SE | ρ = med se₁/SE | rule 8: K1-referenced m̂ → cover | rule 9: ρ-gated κ alone |')
print('|---|---|---|---|---|---|---|---|---|---|---|')
for (pop,n,eh),L in rows.items():
    a=lambda k: np.mean([x[k] for x in L])
    rng=lambda k,fmt: '–'.join(sorted(set(fmt%x[k] for x in L)))
    print('| %s | 10^%d | %g | %s | %s | %.3f (%.3f) | %s | %s | %s | %s → %.3f | %.3f |'%(pop,round(np.log10(n)),eh,', '.join(x['pick'] for x in L),rng('t','%d'),a('c0'),a('live'),rng('mstar','%.2f'),rng('rmse','%.2f'),rng('rho','%.1f'),rng('mh','%.2f'),a('c8'),a('c9')))
