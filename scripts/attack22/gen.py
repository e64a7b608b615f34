# gen.py POP N SEED OUT.csv : populations nobody designed, 20 km box
import sys, numpy as np
pop, n, seed, out = sys.argv[1], int(float(sys.argv[2])), int(sys.argv[3]), sys.argv[4]
rng = np.random.default_rng(1000*seed + sum(map(ord, pop)))
S = 20000.0
if pop == "shops":   # 500 shops on a 500 m street grid (Zipf weights); 60% of devices exactly at a shop's door (duplicates), 40% within 5 m
    srng = np.random.default_rng(7)  # the town is fixed across seeds
    ix = srng.choice(39*39, 500, replace=False); sx = 500.0 + 500.0*(ix % 39); sy = 500.0 + 500.0*(ix // 39)
    w = 1.0/np.arange(1, 501)**1.1; w /= w.sum()
    s = rng.choice(500, n, p=w); P = np.c_[sx[s], sy[s]]
    jit = rng.random(n) >= 0.6; P[jit] += rng.normal(0, 5.0, (jit.sum(), 2))
elif pop == "gradient":  # density ∝ (x/S)^3 across the box, uniform in y: smooth, no structure
    P = np.c_[S*rng.random(n)**(1/4), S*rng.random(n)]
elif pop == "ring":  # a ring of radius 6 km, 1 m thick, centred at (10.3 km, 9.7 km)
    a = rng.random(n)*2*np.pi; r = 6000 + rng.random(n)
    P = np.c_[10300 + r*np.cos(a), 9700 + r*np.sin(a)]
elif pop == "corner":  # a city centred 2 km outside the box's (0,0) corner, exponential profile 3 km; only the devices inside report
    P = np.empty((0, 2))
    while len(P) < n:
        r = rng.exponential(3000, 4*n); a = rng.random(4*n)*2*np.pi
        Q = np.c_[-2000 + r*np.cos(a), -2000 + r*np.sin(a)]
        P = np.r_[P, Q[(Q[:, 0] >= 0) & (Q[:, 1] >= 0) & (Q[:, 0] <= S) & (Q[:, 1] <= S)]]
    P = P[:n]
elif pop == "atoms":  # 500 random sites (Zipf weights), every device exactly at its site
    srng = np.random.default_rng(8); sx, sy = 1000 + 18000*srng.random(500), 1000 + 18000*srng.random(500)
    w = 1.0/np.arange(1, 501)**1.1; w /= w.sum(); s = rng.choice(500, n, p=w); P = np.c_[sx[s], sy[s]]
elif pop == "atomsc":  # the atoms moved to the nearest multiple of 20000/360 m (bin centres at εh >= 100)
    srng = np.random.default_rng(8); sx, sy = 1000 + 18000*srng.random(500), 1000 + 18000*srng.random(500)
    D = 20000/360; sx, sy = np.round(sx/D)*D, np.round(sy/D)*D
    w = 1.0/np.arange(1, 501)**1.1; w /= w.sum(); s = rng.choice(500, n, p=w); P = np.c_[sx[s], sy[s]]
elif pop == "ring20":  # the ring, 20 m thick
    a = rng.random(n)*2*np.pi; r = 6000 + 20*rng.random(n)
    P = np.c_[10300 + r*np.cos(a), 9700 + r*np.sin(a)]
elif pop == "ring200":  # the ring, 200 m thick
    a = rng.random(n)*2*np.pi; r = 6000 + 200*rng.random(n)
    P = np.c_[10300 + r*np.cos(a), 9700 + r*np.sin(a)]
elif pop == "road":  # half the devices on a 1 m wide north-south street at x = 7,777 m, half uniform
    m = n//2; P = np.r_[np.c_[7777 + rng.random(m), 2000 + 16000*rng.random(m)], S*rng.random((n-m, 2))]
elif pop == "road2":  # the street moved to x = 7,791 m (a quarter bin off the bin centres at εh >= 100)
    m = n//2; P = np.r_[np.c_[7791 + rng.random(m), 2000 + 16000*rng.random(m)], S*rng.random((n-m, 2))]
elif pop == "diag":  # the same street turned 30 degrees
    m = n//2; t = 16000*rng.random(m); w = rng.random(m)
    P = np.r_[np.c_[4000 + t*np.cos(0.5236) - w*np.sin(0.5236), 4000 + t*np.sin(0.5236) + w*np.cos(0.5236)], S*rng.random((n-m, 2))]
elif pop == "jatoms":  # 400 new random sites (Zipf), each device 1-10 m from its site in a random direction (geocoding jitter)
    srng = np.random.default_rng(11); sx, sy = 1000 + 18000*srng.random(400), 1000 + 18000*srng.random(400)
    w = 1.0/np.arange(1, 401)**1.1; w /= w.sum(); s = rng.choice(400, n, p=w)
    r = 1 + 9*rng.random(n); a = 2*np.pi*rng.random(n); P = np.c_[sx[s] + r*np.cos(a), sy[s] + r*np.sin(a)]
elif pop == "jatoms0":  # control: jatoms' sites and weights, no jitter (every device exactly at its site)
    srng = np.random.default_rng(11); sx, sy = 1000 + 18000*srng.random(400), 1000 + 18000*srng.random(400)
    w = 1.0/np.arange(1, 401)**1.1; w /= w.sum(); s = rng.choice(400, n, p=w); P = np.c_[sx[s], sy[s]]
elif pop == "streets":  # 80% on 1 m wide streets: 3 north-south, 3 east-west, 4 at 45 degrees (random offsets); 20% uniform
    srng = np.random.default_rng(12); m = int(0.8*n); k = rng.integers(0, 10, m); t = rng.random(m); w = rng.random(m)
    off = 2000 + 16000*srng.random(10); Q = np.zeros((m, 2))
    ax = k < 3; Q[ax] = np.c_[off[k[ax]] + w[ax], 1000 + 18000*t[ax]]
    ay = (k >= 3) & (k < 6); Q[ay] = np.c_[1000 + 18000*t[ay], off[k[ay]] + w[ay]]
    dg = k >= 6; c = off[k[dg]] - 10000; L = 26000*t[dg] - 13000
    Q[dg] = np.c_[10000 + c/np.sqrt(2) + (L + w[dg])/np.sqrt(2), 10000 - c/np.sqrt(2) + (L - w[dg])/np.sqrt(2)]
    Q = Q[(Q[:, 0] >= 0) & (Q[:, 0] <= S) & (Q[:, 1] >= 0) & (Q[:, 1] <= S)]
    P = np.r_[Q, S*rng.random((n - len(Q), 2))]
elif pop == "edges":  # 70% exactly on 4 vertical and 2 horizontal bin edges ((k+1/2)*20000/360, the bins at eh >= 100), 30% uniform
    D = 20000/360; ex = (np.array([80, 151, 222, 290]) + 0.5)*D; ey = (np.array([100, 250]) + 0.5)*D
    m = int(0.7*n); k = rng.integers(0, 6, m); t = 1000 + 18000*rng.random(m); Q = np.zeros((m, 2))
    v = k < 4; Q[v] = np.c_[ex[k[v]], t[v]]; Q[~v] = np.c_[t[~v], ey[k[~v]-4]]
    P = np.r_[Q, S*rng.random((n - m, 2))]
elif pop == "tiny":  # n/4 tiny clusters of 3-5 devices each (sd 3 m), centres uniform
    sizes = rng.integers(3, 6, n); cs = np.cumsum(sizes); nc = int(np.searchsorted(cs, n)) + 1
    sizes = sizes[:nc]; sizes[-1] -= cs[nc-1] - n; C = S*rng.random((nc, 2))
    P = np.repeat(C, sizes, axis=0) + rng.normal(0, 3.0, (n, 2))
elif pop == "hole":  # a Gaussian city (sd 4 km) at (9.1 km, 10.7 km) with an empty 5 km x 3 km rectangular lake north-east of its centre
    P = np.empty((0, 2))
    while len(P) < n:
        Q = rng.normal([9100, 10700], 4000, (2*n, 2))
        Q = Q[(Q[:, 0] >= 0) & (Q[:, 0] <= S) & (Q[:, 1] >= 0) & (Q[:, 1] <= S)]
        Q = Q[~((Q[:, 0] > 9500) & (Q[:, 0] < 14500) & (Q[:, 1] > 11000) & (Q[:, 1] < 14000))]
        P = np.r_[P, Q]
    P = P[:n]
elif pop == "twocity":  # attack21: a big Gaussian city (sd 2.5 km, 85%) and a small dense town (sd 300 m, 15%) 
    m = int(0.85*n); P = np.r_[rng.normal([7000, 8000], 2500, (m, 2)), rng.normal([15500, 14200], 300, (n-m, 2))]
elif pop == "mixat":  # attack21: 30 sites (equal weight) with 60% of devices exactly there, 40% uniform
    srng = np.random.default_rng(21); sx, sy = 1000 + 18000*srng.random(30), 1000 + 18000*srng.random(30)
    m = int(0.6*n); s = rng.integers(0, 30, m); P = np.r_[np.c_[sx[s], sy[s]], S*rng.random((n-m, 2))]
elif pop == "onept":  # attack21: 90% of devices at one point, 10% uniform
    m = int(0.9*n); P = np.r_[np.tile([12345.6, 6543.2], (m, 1)), S*rng.random((n-m, 2))]
elif pop == "stripe":  # attack21: a 2 km wide east-west band (uniform within), 95%; 5% uniform
    m = int(0.95*n); P = np.r_[np.c_[S*rng.random(m), 9000 + 2000*rng.random(m)], S*rng.random((n-m, 2))]
elif pop == "uniform":  # attack21: uniform over the box
    P = S*rng.random((n, 2))
elif pop == "border":  # attack21: 80% within 50 m of the box's four sides, 20% uniform
    m = int(0.8*n); side = rng.integers(0, 4, m); t = S*rng.random(m); d = 50*rng.random(m)
    Q = np.c_[np.where(side == 0, d, np.where(side == 1, S - d, t)), np.where(side == 2, d, np.where(side == 3, S - d, t))]
    P = np.r_[Q, S*rng.random((n-m, 2))]
elif pop == "qatoms":  # attack22: 200 sites at a quarter-bin offset ((k+1/4)*20000/360), 50% exactly there; 50% Gaussian city sd 4 km
    srng = np.random.default_rng(22); b = 20000/360; sx = (srng.integers(20, 340, 200) + 0.25)*b; sy = (srng.integers(20, 340, 200) + 0.25)*b
    m = int(0.5*n); s = rng.integers(0, 200, m); P = np.r_[np.c_[sx[s], sy[s]], rng.normal([10000, 10000], 4000, (n-m, 2))]
elif pop == "halfe":  # attack22: uniform on the west half only, east half empty, plus 20% at 3 points in the west
    m = int(0.2*n); pts = np.array([[3000.0, 5000.0], [6000.0, 14000.0], [8000.0, 9000.0]]); s = rng.integers(0, 3, m)
    P = np.r_[pts[s], np.c_[10000*rng.random(n-m), S*rng.random(n-m)]]
elif pop == "xline":  # attack22: 70% on 5 east-west lines exactly on map rows (y = j*20000/12 for a 13-grid), 30% Gaussian sd 3 km
    m = int(0.7*n); ys = np.array([3, 5, 6, 7, 9])*20000/12; s = rng.integers(0, 5, m)
    P = np.r_[np.c_[S*rng.random(m), ys[s]], rng.normal([10000, 10000], 3000, (n-m, 2))]
elif pop == "bigatom":  # attack22: 50% at one point on a bin corner-ish offset, 50% twocity-like smooth city
    m = int(0.5*n); P = np.r_[np.tile([10000.0 + 0.5*20000/360, 10000.0 + 0.5*20000/360], (m, 1)), rng.normal([7000, 8000], 2500, (n-m, 2))]
P = np.clip(P, 0, S)
np.savetxt(out, P, fmt="%.17g", delimiter=",")
