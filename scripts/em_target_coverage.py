#!/usr/bin/env python3
"""Coverage of EM's spread-only interval for its own mean given the devices
(branch emtarget, docs/MATH.md §9.7 "EM's interval for its own mean given
the devices", measured and not adopted).

Reads the per-draw dumps of `geopriv map sweep --coverage --reps K` with
GEOPRIV_SWEEP_EM_DUMP=dir (the same devices for every draw r, noise seed
seed + 1000 r; columns truth,m,pilot,s,b,se,...; `s` the conditioned
bootstrap spread, `se` the stated, bias-aware SE for the true map F).

Target T_j = E[M_j | devices], estimated for draw k by the leave-one-out
mean of the other K - 1 draws' maps. M_k - mean_{-k} has variance
σ_j²·K/(K − 1) when the draws are independent (σ_j² the per-draw
variance), so the interval is scored at half-width 1.96·√(K/(K−1))·SE:
for Gaussian errors that is exactly the probability that M_k ± 1.96·SE
covers T_j, whatever SE is.

Columns: K draws; how many the planner picked EM in; t* range; coverage of
T by M ± 1.96·s' (s' = s·t_{0.975,3}/1.96, floored by the round-off) over
all cells and over the live cells (true map >= 1e-12 of its peak); the
same without the t-widening; m*_T, the factor on s' that gives 0.95 over
the live cells and draws; the coverage of F by the stated (bias-aware)
interval, all and live; of F by the spread-only interval (live).

With --detail, per row after the table: the coverage of T by cells binned
by T's level (the mean map over the peak), and the draws' variance over
the bootstrap's E[s²] over the live cells (1 is right), before and after a
regression of the draws on log t*.

usage: em_target_coverage.py [--detail] DUMPDIR [POP ...]
"""
import collections
import glob
import math
import os
import re
import sys

import numpy as np

T3 = 3.182446305284263 / 1.959963984540054  # t_{0.975,3}/z, R = 4 replicates
EPS = np.finfo(float).eps


def load(path):
    with open(path) as f:
        head = f.readline()
        cols = f.readline().strip().split(",")
        a = np.loadtxt(f, delimiter=",")
    m = re.search(r" t (\d+) pick (.*?)( \||$)", head)
    return head, dict(zip(cols, a.T)), int(m.group(1)), m.group(2).strip()


def cover(v, se, tgt):
    return float(np.mean(np.abs(v - tgt) <= 1.96 * se))


def main():
    args = sys.argv[1:]
    detail = "--detail" in args
    args = [a for a in args if a != "--detail"]
    d = args[0]
    want = set(p.lower() for p in args[1:])
    notes = []
    groups = collections.defaultdict(list)
    for p in glob.glob(os.path.join(d, "*.csv")):
        m = re.match(r"(\w+)-(\d+)-([\d.]+)-(\d+)\.csv", os.path.basename(p))
        if not m or (want and m.group(1).lower() not in want):
            continue
        groups[(m.group(1), int(m.group(2)), float(m.group(3)))].append((int(m.group(4)), p))
    print("| population | n | εh | K | EM picked | t* | T: all | T: live | T, no t-widening: live | m*_T live | F, bias-aware (today): all | F: live | F by spread-only: live | live cells |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    band = collections.Counter()
    order = ["Neighbourhoods", "Coast", "Sprawl", "City", "AirportsLike"]
    for key in sorted(groups, key=lambda k: (order.index(k[0]) if k[0] in order else 9, k[1], k[2])):
        runs = sorted(groups[key])
        data = [load(p) for _, p in runs]
        K = len(data)
        if K < 2:
            continue
        F = data[0][1]["truth"]
        live = F >= 1e-12 * F.max()
        M = np.array([x[1]["m"] for x in data])
        S = np.array([x[1]["s"] for x in data])
        SEF = np.array([x[1]["se"] for x in data])
        ts = [x[2] for x in data]
        picks = sum(1 for x in data if x[3] == "a-priori em")
        tot = M.sum(axis=0)
        infl = math.sqrt(K / (K - 1))
        cT, cTl, cTn, cF, cFl, cFs, z2 = [], [], [], [], [], [], []
        for k in range(K):
            loo = (tot - M[k]) / (K - 1)
            floor = 64 * EPS * np.abs(M[k]).max()
            se_t = np.maximum(S[k] * T3, floor)
            se_n = np.maximum(S[k], floor)
            cT.append(cover(M[k], infl * se_t, loo))
            cTl.append(cover(M[k][live], infl * se_t[live], loo[live]))
            cTn.append(cover(M[k][live], infl * se_n[live], loo[live]))
            cF.append(cover(M[k], SEF[k], F))
            cFl.append(cover(M[k][live], SEF[k][live], F[live]))
            cFs.append(cover(M[k][live], se_t[live], F[live]))
            z = (M[k] - loo)[live] / (infl * se_t[live])
            z2.append(np.mean(z[np.isfinite(z)] ** 2))
        # m*_T: the factor on SE giving 0.95 over live cells and draws
        zs = np.concatenate([np.abs((M[k] - (tot - M[k]) / (K - 1))[live]) / (infl * np.maximum(S[k] * T3, 64 * EPS * np.abs(M[k]).max())[live]) for k in range(K)])
        mstar = float(np.quantile(zs[np.isfinite(zs)], 0.95) / 1.96)
        for name, xs in [("T all", cT), ("T live", cTl), ("F all", cF), ("F live", cFl)]:
            band[name] += 0.93 <= round(float(np.mean(xs)), 3) <= 0.97
        band["rows"] += 1
        if detail:
            mean = tot / K
            rel = mean / mean.max()
            parts = []
            for lo, hi in [(1e-1, 2), (1e-3, 1e-1), (1e-6, 1e-3), (1e-12, 1e-6), (-1, 1e-12)]:
                idx = (rel >= lo) & (rel < hi)
                if idx.sum() == 0:
                    continue
                c = []
                for k in range(K):
                    loo = (tot - M[k]) / (K - 1)
                    se = np.maximum(S[k] * T3, 64 * EPS * np.abs(M[k]).max())
                    c.append(np.mean(np.abs(M[k] - loo)[idx] <= 1.96 * infl * se[idx]))
                parts.append(f"[{lo:.0e}, {hi:.0e}) {int(idx.sum())} {np.mean(c):.3f}")
            v = M.var(axis=0, ddof=1)
            s2 = (S**2).mean(axis=0)
            t = np.log(np.array(ts, float))
            vr = v
            if np.ptp(t) > 0 and K > 2:
                X = np.c_[np.ones(K), t]
                beta = np.linalg.lstsq(X, M, rcond=None)[0]
                vr = ((M - X @ beta) ** 2).sum(axis=0) / (K - 2)
            notes.append(f"{key[0]} {key[1]:.0e} εh {key[2]:g}: " + "; ".join(parts)
                         + f"; var/E[s²] {v[live].sum() / s2[live].sum():.2f}, after log t* {vr[live].sum() / s2[live].sum():.2f}")
        f = lambda xs: f"{np.mean(xs):.3f}"
        print(f"| {key[0]} | {key[1]:.0e} | {key[2]:g} | {K} | {picks}/{K} | {min(ts)}–{max(ts)} | {f(cT)} | {f(cTl)} | {f(cTn)} | {mstar:.2f} | {f(cF)} | {f(cFl)} | {f(cFs)} | {int(live.sum())} |")
    for n in notes:
        print(n)
    print()
    print(f"rows in [0.93, 0.97] of {band['rows']}: " + ", ".join(f"{k} {band[k]}" for k in ["T all", "T live", "F all", "F live"]))


if __name__ == "__main__":
    main()
