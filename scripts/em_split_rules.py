#!/usr/bin/env python3
"""Score the split-sample (cross-fitted) calibration of EM's intervals
(branch emcov4, docs/MATH.md §9.7, BENCHMARKS.md "Branch emcov4") on the
per-cell dumps of

  GEOPRIV_SWEEP_EM_SPLIT=1 GEOPRIV_SWEEP_EM_DUMP=dir geopriv map sweep --coverage ...

Each dump holds the full-data EM map M with its stated SE, the λ = 1 map,
and per half (A, B: a hash of the report order) the half's true map, EM
map with its stated SE and λ = 1 map U with its SE. Usage:
em_split_rules.py DIR [block] [--compact]. Needs numpy and scipy.

Estimates (per cell j, w_j = 1/SE_A,j², over the cells where both half EM
maps are >= 1e-6 of their peak; SE from 6 x 6-cell block means):
  S1: q_A = (M_A − U_B)² − (U_A − U_B)² + se1_A², E q_A = E(M_A − F_A)²
      + 2·D·β_A + (se1_A² − Var U_A), D = F_A − F_B; r̂² = mean q/SE_A² over
      cells and both halves, the half-map's calibration factor² transferred
      to the full map; factor √r̂² where r̂² > 2 SE(r̂²), else 1.
  S2: S1 resolved only where r̂² > 2 SE + 2√(D̂² r̂²) (Cauchy–Schwarz bound of
      the device term; D̂² from (U_A − U_B)² − se1_A² − se1_B²).
  S3: ((M_A − U_B)² + (M_B − U_A)² − (U_A − U_B)²)/2 (no se1), factor
      √(r̂² + D̂²/2) where r̂² − D̂²/2 > 2 SE.
Prints per row the oracle m* (full), RMS (M−F)/SE (full), RMS (M_A−F_A)/SE_A
(the half's), the estimates, the coverage now and with each rule, and with
the truth the error of r̂² split into device, se1 and noise terms (diagnosis);
--compact prints the table of BENCHMARKS.md "Branch emcov4"."""
import sys, glob, re, collections
import numpy as np

sys.path.insert(0, __import__('os').path.dirname(__file__))
from em_rules_common import cov, solve_m

COLS = 'truth,m,pilot,s,b,se,k1,se1,k0,se0,tA,mA,seA,k1A,se1A,tB,mB,seB,k1B,se1B'.split(',')

def load(f):
    head = open(f).readline()
    d = np.genfromtxt(f, delimiter=',', skip_header=2)
    return head, {k: d[:, i] for i, k in enumerate(COLS)}

def live_cells(d):
    """Truth-free "something to estimate": both half EM maps >= 1e-6 of
    their peak (an empty sea's EM SE is the round-off floor while the λ = 1
    map's is its plug-in floor: their ratio there is 1e15 and more)."""
    return (d['mA'] >= 1e-6 * d['mA'].max()) & (d['mB'] >= 1e-6 * d['mB'].max())

def block_mean_se(z, k, block, live):
    """Mean of z over the live cells of the k x k grid and its SE from the
    spread of block means (block x block cells, live ones only)."""
    g = z.reshape(k, k)
    lv = live.reshape(k, k)
    nb = k // block
    means, sizes = [], []
    for a in range(nb):
        for b in range(nb):
            sl = (slice(a*block, (a+1)*block), slice(b*block, (b+1)*block))
            if lv[sl].sum() > 0:
                means.append(g[sl][lv[sl]].mean())
                sizes.append(lv[sl].sum())
    means, sizes = np.array(means), np.array(sizes, dtype=float)
    mu = z[live].mean()
    w = sizes / sizes.sum()
    var = np.sum(w**2 * (means - mu)**2) * len(means) / max(len(means) - 1, 1)
    return mu, np.sqrt(var)

def estimate(d, k, block):
    zA = ((d['mA'] - d['k1B'])**2 - (d['k1A'] - d['k1B'])**2 + d['se1A']**2) / d['seA']**2
    zB = ((d['mB'] - d['k1A'])**2 - (d['k1B'] - d['k1A'])**2 + d['se1B']**2) / d['seB']**2
    return block_mean_se(0.5 * (zA + zB), k, block, live_cells(d))

def decompose(d):
    """With the truth (diagnosis only): r̂² − half RMS² = device + se₁ + noise,
    per half q − e_A² = 2·D·e_A + (se1_A² − u_A²) + (−2 e_A u_B + 2 u_A u_B − 2 u_A D),
    e = M − F, u = U − F of each half, D = F_A − F_B; each averaged over the
    cells in units of SE_half² and over the two halves."""
    out = np.zeros(3)
    lv = live_cells(d)
    for a, b in (('A', 'B'), ('B', 'A')):
        w = 1 / d['se' + a]**2
        e = d['m' + a] - d['t' + a]
        ua = d['k1' + a] - d['t' + a]
        ub = d['k1' + b] - d['t' + b]
        D = d['t' + a] - d['t' + b]
        out += 0.5 * np.array([np.mean((2 * D * e * w)[lv]), np.mean(((d['se1' + a]**2 - ua**2) * w)[lv]),
                               np.mean(((-2 * e * ub + 2 * ua * ub - 2 * ua * D) * w)[lv])])
    return out

def estimate_sym(d, k, block):
    """S3: ((M_A − U_B)² + (M_B − U_A)² − (U_A − U_B)²)/2 per cell over
    SE_half² (the mean of the two halves' SE²): the λ = 1 maps' variances
    cancel, no stated se₁ enters; E = (E e_A² + E e_B²)/2 + D²/2 + D·(β_A − β_B),
    the last two in [−D²/2, D²/2] if EM passes the device split's
    difference D with a gain in [0, 1] (β_A − β_B = (S − I)·D)."""
    w = 2 / (d['seA']**2 + d['seB']**2)
    X = (d['mA'] - d['k1B'])**2
    Y = (d['mB'] - d['k1A'])**2
    Z = (d['k1A'] - d['k1B'])**2
    return block_mean_se(0.5 * (X + Y - Z) * w, k, block, live_cells(d))

def split_term(d):
    """D̂² = mean over cells of ((U_A − U_B)² − se1_A² − se1_B²)/SE_half²: the
    device split's own squared difference D = F_A − F_B, truth-free."""
    w = 2 / (d['seA']**2 + d['seB']**2)
    lv = live_cells(d)
    return np.mean((((d['k1A'] - d['k1B'])**2 - d['se1A']**2 - d['se1B']**2) * w)[lv])

def main():
    args = [x for x in sys.argv[1:] if not x.startswith('--')]
    block = int(args[1]) if len(args) > 1 else 6
    rows = collections.OrderedDict()
    for f in sorted(glob.glob(sys.argv[1] + '/*.csv')):
        head, d = load(f)
        hw = head.split()
        pop, n, eh, tt = hw[2], int(hw[4]), float(hw[6]), int(hw[10])
        pick = hw[13]
        th = re.findall(r'half t (\d+)', head)
        k = int(round(np.sqrt(len(d['m']))))
        t, m, se = d['truth'], d['m'], d['se']
        mstar = solve_m(lambda a: cov(m, a * se, t))
        rms = np.sqrt(np.mean(((m - t) / se)**2))
        lv = live_cells(d)
        rmsA = np.sqrt(0.5 * (np.mean((((d['mA'] - d['tA']) / d['seA'])**2)[lv]) + np.mean((((d['mB'] - d['tB']) / d['seB'])**2)[lv])))
        r2, r2se = estimate(d, k, block)
        resolved = r2 > 2 * r2se
        fac = np.sqrt(r2) if resolved else 1.0
        c0 = cov(m, se, t)
        c1 = cov(m, fac * se, t)
        # S2: the gate also charges the split's device term, whose part in
        # E r̂² is mean 2·D·β_A, at most 2·√(mean D² · mean β_A²) <= 2·√(D̂²·r̂²)
        # (Cauchy–Schwarz, β_A² <= E e_A²).
        d2 = max(split_term(d), 0.0)
        cs = 2 * np.sqrt(d2 * max(r2, 0.0))
        res2 = r2 > 2 * r2se + cs
        fac2 = np.sqrt(r2) if res2 else 1.0
        c2 = cov(m, fac2 * se, t)
        z = (r2 - rmsA**2) / r2se
        # S3: the symmetric estimate, resolved if its lower end (less the
        # device term's D̂²/2 and 2 SE) is above 0; factor from its upper
        # end sqrt(r3 + D̂²/2) (EM's gain on D in [0, 1]).
        r3, r3se = estimate_sym(d, k, block)
        res3 = r3 - d2 / 2 > 2 * r3se
        fac3 = np.sqrt(r3 + d2 / 2) if res3 else 1.0
        c3 = cov(m, fac3 * se, t)
        # Diagnosis only: S3 with the true device term D²/2 (the truth's
        # F_A − F_B) in place of D̂²/2.
        w = 2 / (d['seA']**2 + d['seB']**2)
        d2o = np.mean(((d['tA'] - d['tB'])**2 * w)[lv])
        res3o = r3 - d2o / 2 > 2 * r3se
        fac3o = np.sqrt(r3 + d2o / 2) if res3o else 1.0
        c3o = cov(m, fac3o * se, t)

        dec = decompose(d)
        key = (pop, n, eh)
        rows.setdefault(key, []).append(dict(c0=c0, c1=c1, mstar=mstar, rms=rms, rmsA=rmsA, r2=r2, r2se=r2se,
                                             res=resolved, fac=fac, c2=c2, c3=c3, c3o=c3o, fac3o=fac3o if res3o else np.nan, d2o=d2o, r3=r3, r3se=r3se, res3=res3, fac3=fac3, dec=dec, res2=res2, d2=d2, z=z, t=tt, th='/'.join(th), pick=pick))
    print('| population | n | εh | EM picked | t* (halves) | m* | RMS (M−F)/SE | half RMS (M_A−F_A)/SE_A | r̂² ± SE | (r̂² − half RMS²)/SE | D̂² | S1 factor | cover now → S1 → S2 | error of r̂²: device, se₁, noise | S3 r̂² ± SE | S3 factor | S3 cover | true D² (oracle) | S3 with true D²: factor → cover |')
    print('|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|')
    inb0 = inb1 = inb2 = inb3 = inb3o = 0
    zs = []
    for (pop, n, eh), L in rows.items():
        a = lambda kk: np.mean([x[kk] for x in L])
        j = lambda fmt, kk: ', '.join(fmt % x[kk] for x in L)
        c0, c1 = a('c0'), a('c1')
        inb0 += 0.93 <= round(c0, 3) <= 0.97
        inb1 += 0.93 <= round(c1, 3) <= 0.97
        inb2 += 0.93 <= round(a('c2'), 3) <= 0.97
        inb3 += 0.93 <= round(a('c3'), 3) <= 0.97
        inb3o += 0.93 <= round(a('c3o'), 3) <= 0.97
        zs += [x['z'] for x in L]
        print('| %s | 10^%d | %g | %s | %s | %s | %s | %s | %s | %s | %s | %s | %.3f → %.3f → %.3f | %s | %s | %s | %.3f | %s | %s → %.3f |' % (
            pop, round(np.log10(n)), eh, ', '.join(x['pick'] for x in L),
            ', '.join('%d (%s)' % (x['t'], x['th']) for x in L), j('%.2f', 'mstar'), j('%.2f', 'rms'), j('%.2f', 'rmsA'),
            ', '.join('%.2f ± %.2f' % (x['r2'], x['r2se']) for x in L), j('%.1f', 'z'), j('%.2f', 'd2'),
            ', '.join(('%.2f' % x['fac']) if x['res'] else '1' for x in L), c0, c1, a('c2'),
            '; '.join('%.2f, %.2f, %.2f' % tuple(x['dec']) for x in L),
            ', '.join('%.2f ± %.2f' % (x['r3'], x['r3se']) for x in L),
            ', '.join(('%.2f' % x['fac3']) if x['res3'] else '1' for x in L), a('c3'),
            j('%.2f', 'd2o'), ', '.join('1' if np.isnan(x['fac3o']) else '%.2f' % x['fac3o'] for x in L), a('c3o')))
    zs = np.array(zs)
    if '--compact' in sys.argv:
        print('\n| population | n | εh | m* | RMS (M−F)/SE full → half | S1 r̂² ± SE (half RMS²) | now | S1 | S2 | S3 | S3, true D² (oracle) |')
        print('|---|---|---|---|---|---|---|---|---|---|---|')
        for (pop, n, eh), L in rows.items():
            a = lambda kk: np.mean([x[kk] for x in L])
            j = lambda fmt, kk: '–'.join(sorted(set(fmt % x[kk] for x in L)))
            b = lambda v: ('**%.3f**' if 0.93 <= round(v, 3) <= 0.97 else '%.3f') % v
            print('| %s | 10^%d | %g | %s | %s → %s | %s | %s | %s | %s | %s | %s |' % (
                pop, round(np.log10(n)), eh, j('%.2f', 'mstar'), j('%.2f', 'rms'), j('%.2f', 'rmsA'),
                ', '.join('%.3g ± %.2g (%.2f)' % (x['r2'], x['r2se'], x['rmsA']**2) for x in L),
                b(a('c0')), b(a('c1')), b(a('c2')), b(a('c3')), b(a('c3o'))))
    print('\nrows in [0.93, 0.97]: now %d, S1 %d, S2 %d, S3 %d (S3 with the true D², oracle: %d) of %d' % (inb0, inb1, inb2, inb3, inb3o, len(rows)))
    print('draws: %d; |z| > 2 in %d; S2 resolved in %d' % (len(zs), np.sum(np.abs(zs) > 2),
          sum(x['res2'] for L in rows.values() for x in L)))

if __name__ == '__main__':
    main()
