"""Helpers shared by em_interval_rules.py and em_split_rules.py (the
offline scorers of EM's interval rules on the sweep's per-cell dumps)."""
import numpy as np


def cov(m, se, t):
    """Coverage averaged over cells: the share of |m - t| <= 1.96 se."""
    return np.mean(np.abs(m - t) <= 1.96 * se)


def solve_m(f, lo=0.05, hi=20.0, target=0.95):
    """The multiplier m in [lo, hi] with f(m) = target, f increasing in m
    (bisection on the log scale, 40 steps; lo or hi where out of range)."""
    if f(lo) >= target:
        return lo
    if f(hi) < target:
        return hi
    for _ in range(40):
        mid = np.sqrt(lo * hi)
        if f(mid) < target:
            lo = mid
        else:
            hi = mid
    return np.sqrt(lo * hi)
