#!/usr/bin/env python3
"""Score the intervals the product could publish when the planner picks EM,
offline on the per-cell dumps of `GEOPRIV_SWEEP_EM_DUMP=dir geopriv map sweep
--coverage ...` (branch emcov5, BENCHMARKS.md "Branch emcov5"; docs/MATH.md
§9.7). Usage: em_published_intervals.py DIR
One markdown row per (population, n, εh): the planner's picks, the coverage
of EM's own interval (main), and of
  K1:    the λ = 1 map's interval K1 ± 1.96 se1 (published beside EM's value),
  wide:  EM ± (|EM − K1| + 1.96 se1) (contains K1's interval),
  hull:  the hull of EM's interval and K1's (covers where either does),
  EMse1: EM ± 1.96 se1 (EM's centre, K1's half-width),
each over all cells (live cells: truth >= 1e-12 of its peak), main's and
K1's over the draws where the planner picked EM only, and the width
cost: the median over cells of the half-width over EM's own.
Needs numpy."""
import sys, glob, collections
import numpy as np


def load(f):
    head = open(f).readline()
    d = np.genfromtxt(f, delimiter=',', skip_header=2)
    return head, {k: d[:, i] for i, k in enumerate('truth,m,pilot,s,b,se,k1,se1,k0,se0'.split(','))}


def main(dirname):
    rows = collections.OrderedDict()
    files = sorted(glob.glob(dirname + '/*.csv'),
                   key=lambda f: (f.split('/')[-1].split('-')[0],
                                  int(f.split('-')[-4]) if False else 0))
    for f in files:
        head, d = load(f)
        hw = head.split()
        pop, n, eh, pick = hw[2], int(hw[4]), float(hw[6]), hw[13]
        t, m, se, k1, se1 = d['truth'], d['m'], d['se'], d['k1'], d['se1']
        z = 1.96
        lo_h = np.minimum(m - z * se, k1 - z * se1)
        hi_h = np.maximum(m + z * se, k1 + z * se1)
        cands = {
            'main': (np.abs(m - t) <= z * se, z * se),
            'K1': (np.abs(k1 - t) <= z * se1, z * se1),
            'wide': (np.abs(m - t) <= np.abs(m - k1) + z * se1, np.abs(m - k1) + z * se1),
            'hull': ((lo_h <= t) & (t <= hi_h), (hi_h - lo_h) / 2),
            'EMse1': (np.abs(m - t) <= z * se1, z * se1),
        }
        live = t >= 1e-12 * t.max()
        r = dict(pick=pick, em=pick == 'em')
        for k, (hit, hw_) in cands.items():
            r[k] = hit.mean()
            r[k + '_live'] = hit[live].mean()
            r[k + '_w'] = np.median(hw_ / (z * se))
        rows.setdefault((pop, n, eh), []).append(r)
    order = ['Neighbourhoods', 'Coast', 'Sprawl', 'City', 'AirportsLike']
    keys = sorted(rows, key=lambda k: (order.index(k[0]) if k[0] in order else 9, k[1], k[2]))
    names = ['main', 'K1', 'wide', 'hull', 'EMse1']
    print('| population | n | εh | picks | ' + ' | '.join(names) + ' | main, EM-picked draws | K1, EM-picked draws | width ×EM: ' + ', '.join(names[1:]) + ' |')
    print('|---|---|---|---|' + '---|' * (len(names) + 2) + '---|')
    picked = []
    for key in keys:
        L = rows[key]
        a = lambda k: np.mean([x[k] for x in L])
        fmt = lambda c: ('**%.3f**' if 0.93 <= c <= 0.97 else '%.3f') % c
        cells = ' | '.join('%s (%.3f)' % (fmt(a(k)), a(k + '_live')) for k in names)
        E = [x for x in L if x['em']]
        pe = lambda k: (fmt(np.mean([x[k] for x in E])) if E else '–')
        cells += ' | %s | %s' % (pe('main'), pe('K1'))
        if E:
            picked.append('| %s | 10^%d | %g | %d | %s | %s |' % (
                key[0], round(np.log10(key[1])), key[2], len(E),
                ' | '.join(fmt(np.mean([x[k] for x in E])) for k in names),
                ', '.join('%.2g' % np.mean([x[k + '_w'] for x in E]) for k in names[1:])))
        w = ', '.join('%.2g' % a(k + '_w') for k in names[1:])
        print('| %s | 10^%d | %g | %s | %s | %s |' % (key[0], round(np.log10(key[1])), key[2],
                                                     ', '.join(x['pick'] for x in L), cells, w))

    print()
    print('Draws where the planner picked EM only:')
    print()
    print('| population | n | εh | draws | ' + ' | '.join(names) + ' | width ×EM: ' + ', '.join(names[1:]) + ' |')
    print('|---|---|---|---|' + '---|' * len(names) + '---|')
    for line in picked:
        print(line)
    print()
    for i, k in enumerate(names):
        cols = [line.split(' | ')[4 + i] for line in picked]
        print('%s: %d of %d EM rows in [0.93, 0.97]' % (k, sum(c.startswith('**') for c in cols), len(cols)))


if __name__ == '__main__':
    main(sys.argv[1])
