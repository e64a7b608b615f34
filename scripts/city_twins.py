#!/usr/bin/env python3
"""Twins of the synthetic city (branch twins19, docs/MATH.md §9.4 "What the
reports cannot tell", BENCHMARKS.md "Branch twins19"): the test's `c<w>`
population (tests/planner_model.rs, `Pop::CityTwin`), every city device
moved by a Gaussian of sd w per axis and redrawn until it lies in the
city's 20 km square, against the city (`Pop::City`: 12 Gaussian
neighbourhoods clamped to the square, 15% uniform). Prints the per-report
KL both ways and χ²/2 between the two report laws (device law convolved
with the planar Laplace (ε²/2π)e^{−εr}, ε = εh/h, h = one cell diagonal
of the 31 × 31 grid) and n·KL at the given n. Needs numpy and scipy. Run
from the repo root.

  city_twins.py EH N W[,W..] [D] [PAD]   the blob twins' KL, and the
                               signed-twin bound S on the city's box
  city_twins.py path EH T [OUT] population EM on the city's exact report
                               law from the uniform square, T steps (each
                               iterate a twin; with OUT, written to
                               OUT-<t>.txt for the test's `pc` cells)
  city_twins.py maps N SPEC..  mean (F_T − F_A)² on the test's grid and
                               the device map's own noise at n; SPEC a
                               blob width in km or a `path` file
  city_twins.py atoms EH N K   the signed-twin bound for the atoms `m<K>`

D: lattice side in metres (default 200; it must divide 20 km), PAD: the
lattice reaches PAD/ε beyond the square (default 8). Both laws are exact
on the lattice: the device laws are product laws per component (a
neighbourhood clamped per axis, the uniform part, and the per-device
truncated blob are separable), so each is a sum of outer products of 1-D
cell masses; the noise's cell masses are 4 × 4 midpoint sums. A device
clamped to an edge sits at its edge cell's centre (D/2 inside).
"""
import math
import sys

import numpy as np
from scipy.signal import fftconvolve
from scipy.special import ndtr

SIDE = 20_000.0
KQ = 31
H = math.hypot(SIDE / (KQ - 1), SIDE / (KQ - 1))
# (centre x, centre y, sd, weight), seed 0xC17: tests/planner_model.rs
# checks this copy against its `city_hoods()` (and prints it on a mismatch).
HOODS = [
    (13155.367323567481, 12273.944170869425, 900.0, 3.0),
    (7433.950553871929, 15173.308283055143, 360.0326161442879, 1.4635882372218505),
    (6852.652129509105, 15194.391203057425, 949.9410529437548, 0.9349199529175434),
    (3106.9266922567294, 10469.115521629717, 705.348607600273, 1.3869664617335187),
    (3492.889517729872, 4909.827324019881, 763.6562666713585, 1.3908536612207434),
    (16182.77911682015, 12688.124313146398, 1214.0921794363185, 1.2554920098487448),
    (5758.710815074403, 10305.689138798207, 928.1898084859229, 1.478828053414877),
    (10061.124741767564, 11222.178768204594, 666.5420279828115, 0.850389502064028),
    (13309.841882620693, 4978.022457059368, 364.60876016340836, 0.7794544159804826),
    (3707.733805672335, 3481.448960795461, 795.0940673970249, 1.4938194793863984),
    (5960.461537133976, 4617.738942299292, 1151.8660586064993, 0.6003512255567023),
    (15184.580008540664, 13880.314226917813, 606.3809911699085, 0.5584814530508904),
]


class Lattice:
    def __init__(self, eh, d, pad):
        self.eps = eh / H
        self.d = d
        m = int(round(SIDE / d))
        assert abs(m * d - SIDE) < 1e-6, "D must divide the side"
        self.m = m
        self.p = int(math.ceil(pad / self.eps / d))
        self.nx = m + 2 * self.p
        # Edges of the in-square cells, and their centres.
        self.e = d * np.arange(m + 1)
        self.c = d * (np.arange(m) + 0.5)
        px = np.arange(-self.nx + 1, self.nx)
        o = (np.arange(4) + 0.5) / 4 - 0.5
        k = np.zeros((len(px), len(px)))
        for a in o:
            for b in o:
                k += np.exp(-self.eps * np.hypot((px[:, None] + a) * d, (px[None, :] + b) * d))
        self.k = k * self.eps ** 2 / (2 * math.pi) * d ** 2 / 16

    def clamped(self, mu, s):
        """1-D cell masses of clamp(N(mu, s²), 0, SIDE)."""
        cdf = ndtr((self.e - mu) / s)
        g = np.diff(cdf)
        g[0] += cdf[0]
        g[-1] += 1 - cdf[-1]
        return g

    def blur(self, w):
        """Row k: cell masses of a device at cell k's centre moved by
        N(0, w²) and redrawn until inside the square."""
        cdf = ndtr((self.e[None, :] - self.c[:, None]) / w)
        t = np.diff(cdf, axis=1)
        return t / t.sum(axis=1, keepdims=True)

    def parts(self):
        """The city as (weight, x masses, y masses) products."""
        u = np.full(self.m, 1.0 / self.m)
        tot = sum(h[3] for h in HOODS)
        out = [(0.15, u, u)]
        for cx, cy, s, w in HOODS:
            out.append((0.85 * w / tot, self.clamped(cx, s), self.clamped(cy, s)))
        return out

    def law(self, parts):
        inner = sum(wt * np.outer(gx, gy) for wt, gx, gy in parts)
        full = np.zeros((self.nx, self.nx))
        full[self.p:self.p + self.m, self.p:self.p + self.m] = inner
        return full

    def conv(self, mass):
        return fftconvolve(mass, self.k, mode="full")[self.nx - 1:2 * self.nx - 1,
                                                       self.nx - 1:2 * self.nx - 1]


def kl_pair(qa, qb):
    """(KL(A||B), KL(B||A)) of two lattice laws (mass off the lattice
    ignored; the forms Σ p log(p/q) − p + q are nonnegative term by term)."""
    dq = qb - qa
    ok = (qa > 1e-300) & (qb > 1e-300)
    k_ba = float(np.sum(qb[ok] * np.log1p(dq[ok] / qa[ok]) - dq[ok]))
    k_ab = float(np.sum(-qa[ok] * np.log1p(dq[ok] / qa[ok]) + dq[ok]))
    return k_ab, k_ba


def path(eh, tmax, out, d, pad):
    """Population EM on the city's exact report law from the uniform
    square: every iterate is a positive device law on the square (a twin);
    written to OUT-<t>.txt ("x y mass" per lattice cell, first line the
    cell side) for the test's `pc` population."""
    lat = Lattice(eh, d, pad)
    ma = lat.law(lat.parts())
    qa = lat.conv(ma)
    mask = np.zeros_like(ma)
    mask[lat.p:lat.p + lat.m, lat.p:lat.p + lat.m] = 1.0
    p = mask / mask.sum()
    marks = {0, 1, 2, 3, 5, 7, 10, 15, 20, 30, 50, 70, 100, 150, 200, 250, 300, 350, 400, 500,
             700, 1000}
    for t in range(tmax + 1):
        q = lat.conv(p)
        if t in marks or t == tmax:
            k_ab, k_ba = kl_pair(qa, q)
            print(f"t {t:5d}: KL(A||T) {k_ab:.3e} KL(T||A) {k_ba:.3e}", flush=True)
            if out:
                with open(f"{out}-{t}.txt", "w") as f:
                    f.write(f"{float(lat.d)!r}\n")
                    for i, j in zip(*np.nonzero(p)):
                        x = float((i - lat.p + 0.5) * lat.d)
                        y = float((j - lat.p + 0.5) * lat.d)
                        f.write(f"{x!r} {y!r} {float(p[i, j])!r}\n")
        r = lat.conv(qa / np.maximum(q, 1e-300))
        p = p * r * mask
        p /= p.sum()


def grid_maps(lat, mass):
    """The population's true map F_j = E exp(−|t_j − X|²/2h²) on the test's
    31 × 31 grid (KdeGrid::exact_map's kernel) and E exp(−|t_j − X|²/h²),
    from the in-square lattice masses."""
    g = SIDE / (KQ - 1) * np.arange(KQ)
    inner = mass[lat.p:lat.p + lat.m, lat.p:lat.p + lat.m]
    e1 = np.exp(-0.5 * ((g[None, :] - lat.c[:, None]) / H) ** 2)
    e2 = e1 ** 2
    return e1.T @ inner @ e1, e2.T @ inner @ e2


def maps(n, specs):
    """mean_j (F_T − F_A)² for each twin (a blob width in km, or a file
    of `path`), and each population's device-map noise at n devices,
    mean_j Var(exp(−|t_j − X|²/2h²))/n (the truth's own sampling error)."""
    lat = Lattice(0.1, 200.0, 0.0)
    parts = lat.parts()
    ma = lat.law(parts)
    fa, sa = grid_maps(lat, ma)
    print(f"city: mean F² {np.mean(fa ** 2):.3e}, device-map noise at n = {n:.0f}: "
          f"{np.mean(sa - fa ** 2) / n:.3e}")
    for spec in specs:
        if spec.endswith(".txt"):
            mb = np.zeros_like(ma)
            rows = open(spec).read().split("\n")[1:]
            for row in filter(None, rows):
                x, y, v = map(float, row.split())
                mb[lat.p + int(x // lat.d), lat.p + int(y // lat.d)] += v
            mb /= mb.sum()
        else:
            t = lat.blur(float(spec) * 1e3)
            mb = lat.law([(wt, gx @ t, gy @ t) for wt, gx, gy in parts])
        fb, sb = grid_maps(lat, mb)
        print(f"{spec}: mean (F_T − F_A)² {np.mean((fb - fa) ** 2):.3e}, device-map noise "
              f"{np.mean(sb - fb ** 2) / n:.3e}", flush=True)


def sup_ratio(eh, h):
    """sup_ω |K̂/L̂|², K̂ = 2πh²e^{−h²|ω|²/2}, L̂ = (1 + |ω|²/ε²)^{−3/2},
    ε = εh/h, and the hω where it is attained."""
    u = np.linspace(0, 8, 80001)
    g = (2 * math.pi * h * h) ** 2 * np.exp(-u * u) * (1 + (u / eh) ** 2) ** 3
    i = int(g.argmax())
    return g[i], u[i]


def atoms_bound(eh, n, k, draws):
    """The signed-twin bound (docs/MATH.md §9.4, branch cells18) for the
    test's atoms population `m<k>` (30 km square, h = 1414 m): mean_j ΔF_j²
    <= S·χ², S = q_max sup|K̂/L̂|²/A_grid, at n·KL <= 0.1 (χ² <= 0.2/n).
    q_max of the report law from the smooth density and `draws` sets of k
    atoms drawn from it (the test's atoms come from its own seed; the
    largest q_max over the draws is used)."""
    side = 30_000.0
    h = math.hypot(side / (KQ - 1), side / (KQ - 1))
    eps = eh / h
    d = 200.0
    m = int(side / d)
    pad = int(math.ceil(8 / eps / d))
    nx = m + 2 * pad
    c = d * (np.arange(m) + 0.5)
    blobs = [((0.3 * side, 0.3 * side), 3000.0, 1.0), ((0.7 * side, 0.35 * side), 6000.0, 1.5),
             ((0.45 * side, 0.6 * side), 4000.0, 1.0)]
    dens = np.zeros((m, m))
    for (bx, by), sd, w in blobs:
        dens += w * np.outer(np.exp(-0.5 * ((c - bx) / sd) ** 2),
                             np.exp(-0.5 * ((c - by) / sd) ** 2)) / sd ** 2
    dens[:, c >= side * 2 / 3] = 0.0
    dens /= dens.sum()
    px = np.arange(-nx + 1, nx)
    o = (np.arange(4) + 0.5) / 4 - 0.5
    ker = np.zeros((len(px), len(px)))
    for a in o:
        for b in o:
            ker += np.exp(-eps * np.hypot((px[:, None] + a) * d, (px[None, :] + b) * d))
    ker *= eps ** 2 / (2 * math.pi) * d ** 2 / 16
    rng = np.random.default_rng(7)
    qmax = 0.0
    for _ in range(draws):
        at = rng.choice(m * m, size=k, p=dens.ravel())
        mass = 0.3 * dens.ravel().copy()
        np.add.at(mass, at, 0.7 / k)
        full = np.zeros((nx, nx))
        full[pad:pad + m, pad:pad + m] = mass.reshape(m, m)
        q = fftconvolve(full, ker, mode="full")[nx - 1:2 * nx - 1, nx - 1:2 * nx - 1]
        qmax = max(qmax, float(q.max()) / d ** 2)
    g, u = sup_ratio(eh, h)
    s = g * qmax / (KQ * KQ * (side / (KQ - 1)) ** 2)
    print(f"atoms m{k}, εh {eh}: h {h:.0f} m, 1/ε {1 / eps:.0f} m, q_max {qmax:.3e}/m² "
          f"(ε²/2π = {eps ** 2 / (2 * math.pi):.3e}), sup at hω {u:.3f}: S = {s:.4g}; "
          f"n·KL <= 0.1 at n = {n:.0f}: mean ΔF² <= {0.2 * s / n:.3e}")


def main():
    if len(sys.argv) < 4:
        sys.exit(__doc__)
    if sys.argv[1] == "atoms":
        return atoms_bound(float(sys.argv[2]), float(sys.argv[3]), int(sys.argv[4]), 5)
    if sys.argv[1] == "maps":
        return maps(float(sys.argv[2]), sys.argv[3:])
    if sys.argv[1] == "path":
        out = sys.argv[4] if len(sys.argv) > 4 else None
        return path(float(sys.argv[2]), int(sys.argv[3]), out, 200.0, 8.0)
    eh, n = float(sys.argv[1]), float(sys.argv[2])
    ws = [float(v) * 1e3 for v in sys.argv[3].split(",")]
    d = float(sys.argv[4]) if len(sys.argv) > 4 else 200.0
    pad = float(sys.argv[5]) if len(sys.argv) > 5 else 8.0
    lat = Lattice(eh, d, pad)
    parts = lat.parts()
    ma = lat.law(parts)
    qa = lat.conv(ma)
    print(f"εh {eh}: h {H:.1f} m, 1/ε {1 / lat.eps:.0f} m, lattice {d:.0f} m "
          f"({lat.nx} x {lat.nx}, pad {pad}/ε), report mass on the lattice {qa.sum():.6f}")
    g, u = sup_ratio(eh, H)
    qmax = float(qa.max()) / d ** 2
    s_b = g * qmax / (KQ * KQ * (SIDE / (KQ - 1)) ** 2)
    print(f"signed-twin bound: q_max {qmax:.3e}/m², sup at hω {u:.3f}: S = {s_b:.4g}; "
          f"n·KL <= 0.1 at n = {n:.0f}: mean ΔF² <= {0.2 * s_b / n:.3e}")
    for w in ws:
        t = lat.blur(w)
        mb = lat.law([(wt, gx @ t, gy @ t) for wt, gx, gy in parts])
        # The difference convolved directly (no cancellation between laws).
        dq = lat.conv(mb - ma)
        qb = qa + dq
        ok = (qa > 1e-300) & (qb > 1e-300)
        k_ab, k_ba = kl_pair(qa, qb)
        c2 = float(np.sum(dq[ok] ** 2 / qa[ok])) / 2
        k = max(k_ab, k_ba)
        tv = math.sqrt(n * k / 2)
        print(f"w {w / 1e3:6.2f} km: KL(B||A) {k_ba:.3e} KL(A||B) {k_ab:.3e} χ²/2 {c2:.3e}; "
              f"n = {n:.0f}: n·KL {n * k:.3g}, Pinsker TV <= {tv:.3f}", flush=True)


if __name__ == "__main__":
    main()
