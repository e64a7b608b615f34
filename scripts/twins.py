#!/usr/bin/env python3
"""Twins of the bundled airports (branch cells18, docs/MATH.md §9.4 "What
the reports cannot tell", BENCHMARKS.md "Branch cells18"): populations whose
planar-Laplace reports at per-device ε = εh/h are close in law to the
airports' but whose true map (31 × 31 grid, h = one cell diagonal, as in
tests/planner_model.rs) differs. Needs numpy and scipy. Run from the repo
root.

  twins.py bound EH            the spectral bound on any signed twin:
                               mean_j ΔF_j² <= S·χ², S = q_max sup_ω
                               |K̂/L̂|²/A_grid
  twins.py blobs EH W[,W..] [D] every airport a Gaussian blob of sd W km
                               per axis, truncated to the box (the test's
                               `t<W>` population): per-report KL both ways,
                               χ²/2, mean (F_T − F_A)² (exact, closed form)
  twins.py reweight EH [D]     every airport's weight times
                               1 + cos(ω·x + φ) (hω, angle, phase on a grid)
  twins.py path EH [D] T [ALPHA] [OUT] [START]
                               population EM on the airports' exact report
                               law from a uniform start, or from the file
                               START (step exponent ALPHA, halved when a
                               step raises KL(A||T), and from START grown
                               1.2x a step up to 64): every iterate is a
                               positive twin;
                               with OUT, each printed iterate is written to
                               OUT-<t>.txt (lines "x y mass", cell centres,
                               first line the cell side) for the test's `p`
                               population (GEOPRIV_PLANNER_TWIN_FILE)

D is the lattice side in units of 1/ε (default 0.02); the lattice covers the
box ± 10/ε (mass outside 1e-4). Report laws are the latent masses (airports
at their cell's centre) convolved with the planar-Laplace cell masses
(ε²/2π)e^{−εr}, 4 × 4 midpoint points per cell.
"""
import math
import os
import sys

import numpy as np
from scipy.signal import fftconvolve
from scipy.special import ndtr

R = 6378137.0
HERE = os.path.dirname(os.path.abspath(__file__))


def airports():
    out = []
    path = os.path.join(HERE, "..", "examples", "data", "airports.csv")
    for line in open(path).read().splitlines()[1:]:
        f = line.split(",")
        try:
            lat, lon = float(f[-2]), float(f[-1])
        except (ValueError, IndexError):
            continue
        if 24 <= lat <= 50 and -125 <= lon <= -66:
            out.append([R * math.radians(lon),
                        R * math.log(math.tan(math.pi / 4 + math.radians(lat) / 2))])
    return np.array(out)


A = airports()
X0, X1 = A[:, 0].min(), A[:, 0].max()
Y0, Y1 = A[:, 1].min(), A[:, 1].max()
KQ = 31
SX, SY = (X1 - X0) / (KQ - 1), (Y1 - Y0) / (KQ - 1)
H = math.hypot(SX, SY)
GX, GY = X0 + SX * np.arange(KQ), Y0 + SY * np.arange(KQ)
A_GRID = KQ * KQ * SX * SY


def map_atoms(xs, wts=None):
    """F_j = Σ_i w_i exp(−|t_j − x_i|²/2h²), Σ w = 1."""
    w = np.full(len(xs), 1.0 / len(xs)) if wts is None else wts / wts.sum()
    fx = np.exp(-0.5 * ((GX[None, :] - xs[:, 0:1]) / H) ** 2)
    fy = np.exp(-0.5 * ((GY[None, :] - xs[:, 1:2]) / H) ** 2)
    return (fx * w[:, None]).T @ fy


def trunc_conv(t, a, w, lo, hi):
    """∫ exp(−(t−u)²/2h²) N(u; a, w²) 1[lo, hi](u) du / P(lo <= u <= hi)."""
    t, a = t[None, :], a[:, None]
    s2 = H * H + w * w
    m, s = (a * H * H + t * w * w) / s2, H * w / math.sqrt(s2)
    pre = H / math.sqrt(s2) * np.exp(-((t - a) ** 2) / (2 * s2))
    z = ndtr((hi - a) / w) - ndtr((lo - a) / w)
    return pre * (ndtr((hi - m) / s) - ndtr((lo - m) / s)) / z


def map_blobs(w):
    fx = trunc_conv(GX, A[:, 0], w, X0, X1)
    fy = trunc_conv(GY, A[:, 1], w, Y0, Y1)
    return fx.T @ fy / len(A)


class Lattice:
    def __init__(self, eh, dfac):
        self.eps = eh / H
        self.d = dfac / self.eps
        rwin = 10 / self.eps
        self.nx = int(math.ceil((X1 - X0 + 2 * rwin) / self.d))
        self.ny = int(math.ceil((Y1 - Y0 + 2 * rwin) / self.d))
        self.ox, self.oy = X0 - rwin, Y0 - rwin
        px, py = np.arange(-self.nx + 1, self.nx), np.arange(-self.ny + 1, self.ny)
        o = (np.arange(4) + 0.5) / 4 - 0.5
        k = np.zeros((len(px), len(py)))
        for a in o:
            for b in o:
                k += np.exp(-self.eps * np.hypot((px[:, None] + a) * self.d,
                                                 (py[None, :] + b) * self.d))
        self.k = k * self.eps ** 2 / (2 * math.pi) * self.d ** 2 / 16
        self.ix = np.floor((A[:, 0] - self.ox) / self.d).astype(int)
        self.iy = np.floor((A[:, 1] - self.oy) / self.d).astype(int)
        self.cx = self.ox + (np.arange(self.nx) + 0.5) * self.d
        self.cy = self.oy + (np.arange(self.ny) + 0.5) * self.d

    def law(self, m):
        q = fftconvolve(m, self.k, mode="full")[self.nx - 1:2 * self.nx - 1,
                                                 self.ny - 1:2 * self.ny - 1]
        q = np.maximum(q, 1e-300)
        return q / q.sum()

    def atoms(self, wts=None):
        m = np.zeros((self.nx, self.ny))
        w = np.ones(len(A)) if wts is None else wts
        np.add.at(m, (self.ix, self.iy), w / w.sum())
        return m

    def blobs(self, w):
        def axis(e, a, lo, hi):
            g = np.diff(ndtr((np.clip(e, lo, hi)[None, :] - a[:, None]) / w), axis=1)
            return g / g.sum(axis=1, keepdims=True)
        ex = self.ox + self.d * np.arange(self.nx + 1)
        ey = self.oy + self.d * np.arange(self.ny + 1)
        return axis(ex, self.cx[self.ix], X0, X1).T @ axis(ey, self.cy[self.iy], Y0, Y1) / len(A)


def kl(p, q):
    return float(np.sum(p * np.log(p / q)))


def bound(eh, lat=None, qa=None):
    lat = lat or Lattice(eh, 0.02)
    qa = lat.law(lat.atoms()) if qa is None else qa
    qmax = qa.max() / lat.d ** 2
    u = np.linspace(0, 8, 80001)
    g = (2 * math.pi * H * H) ** 2 * np.exp(-u * u) * (1 + (u / (lat.eps * H)) ** 2) ** 3
    i = int(g.argmax())
    s = g[i] * qmax / A_GRID
    print(f"εh {eh}: h {H:.0f} m, 1/ε {1 / lat.eps:.0f} m, q_max {qmax:.3e}/m², "
          f"sup at hω {u[i]:.3f}: S = {s:.4g}; n·KL <= 0.1 (χ² <= 0.2/n): "
          f"mean ΔF² <= {0.2 * s:.4g}/n")
    return s


def main():
    cmd, eh = sys.argv[1], float(sys.argv[2])
    fa = map_atoms(A)
    if cmd == "bound":
        bound(eh)
    elif cmd == "blobs":
        ws = [float(v) * 1e3 for v in sys.argv[3].split(",")]
        lat = Lattice(eh, float(sys.argv[4]) if len(sys.argv) > 4 else 0.02)
        qa = lat.law(lat.atoms())
        bound(eh, lat, qa)
        print(f"lattice side {lat.d:.0f} m ({lat.nx} x {lat.ny})")
        for w in ws:
            qt = lat.law(lat.blobs(w))
            d = float(np.mean((map_blobs(w) - fa) ** 2))
            k1, k2, c2 = kl(qt, qa), kl(qa, qt), float(np.sum((qt - qa) ** 2 / qa)) / 2
            print(f"w {w / 1e3:7.1f} km: KL(T||A) {k1:.3e} KL(A||T) {k2:.3e} χ²/2 {c2:.3e} "
                  f"mean(F_T−F_A)² {d:.3e}; n·KL at 1e5/1e6/1e7 "
                  f"{k1 * 1e5:.3g}/{k1 * 1e6:.3g}/{k1 * 1e7:.3g}")
    elif cmd == "reweight":
        lat = Lattice(eh, float(sys.argv[3]) if len(sys.argv) > 3 else 0.02)
        qa = lat.law(lat.atoms())
        best = (0.0, None)
        for u in [0.25, 0.5, 0.75, 1.0, 1.25, 1.5, 1.75, 2.0, 2.5]:
            for ang in [0, 45, 90, 135]:
                for ph in [0, 90]:
                    om = u / H * np.array([math.cos(math.radians(ang)), math.sin(math.radians(ang))])
                    wts = 1 + np.cos(A @ om + math.radians(ph))
                    k1 = kl(lat.law(lat.atoms(wts)), qa)
                    d = float(np.mean((map_atoms(A, wts) - fa) ** 2))
                    print(f"hω {u:4.2f} angle {ang:3d} phase {ph:2d}: KL {k1:.3e} "
                          f"mean ΔF² {d:.3e} ratio {d / k1:.3e}", flush=True)
                    if d / k1 > best[0]:
                        best = (d / k1, (u, ang, ph, k1, d))
        print("largest mean ΔF²/KL", best)
    elif cmd == "path":
        lat = Lattice(eh, float(sys.argv[3]))
        tmax = int(sys.argv[4])
        alpha = float(sys.argv[5]) if len(sys.argv) > 5 else 1.0
        out = sys.argv[6] if len(sys.argv) > 6 else None
        ma = lat.atoms()
        qa = lat.law(ma)
        fxc = np.exp(-0.5 * ((GX[None, :] - lat.cx[:, None]) / H) ** 2)
        fyc = np.exp(-0.5 * ((GY[None, :] - lat.cy[:, None]) / H) ** 2)
        fa_lat = fxc.T @ ma @ fyc
        mask = np.zeros((lat.nx, lat.ny))
        mask[np.ix_((lat.cx >= X0) & (lat.cx <= X1), (lat.cy >= Y0) & (lat.cy <= Y1))] = 1.0
        p = mask / mask.sum()
        if len(sys.argv) > 7:
            rows = open(sys.argv[7]).read().split("\n")[1:]
            for row in filter(None, rows):
                x, y, v = map(float, row.split())
                p[int((x - lat.ox) // lat.d), int((y - lat.oy) // lat.d)] = v
            p = p * mask / (p * mask).sum()
        prev, prev_p = math.inf, p
        marks = {0, 10, 30, 100, 200, 300, 400, 500, 600, 700, 800, 1000, 1200, 1500,
                 2000, 3000, 5000}
        for t in range(tmax + 1):
            raw = fftconvolve(p, lat.k, mode="full")[lat.nx - 1:2 * lat.nx - 1,
                                                       lat.ny - 1:2 * lat.ny - 1]
            raw = np.maximum(raw, 1e-300)
            obj = kl(qa, raw / raw.sum())
            if obj > prev:
                p, alpha = prev_p, alpha / 2
                raw = np.maximum(fftconvolve(p, lat.k, mode="full")[
                    lat.nx - 1:2 * lat.nx - 1, lat.ny - 1:2 * lat.ny - 1], 1e-300)
            else:
                grow = len(sys.argv) > 7 and t > 0
                prev, prev_p, alpha = obj, p, min(alpha * 1.2, 64.0) if grow else alpha
            if t in marks or t == tmax:
                qt = raw / raw.sum()
                d = float(np.mean((fxc.T @ p @ fyc - fa_lat) ** 2))
                print(f"t {t:5d}: KL(T||A) {kl(qt, qa):.3e} KL(A||T) {kl(qa, qt):.3e} "
                      f"mean(F_T−F_A)² {d:.3e} (step exponent {alpha:.3g})", flush=True)
                if out:
                    with open(f"{out}-{t}.txt", "w") as f:
                        f.write(f"{float(lat.d)!r}\n")
                        for i, j in zip(*np.nonzero(p)):
                            f.write(f"{float(lat.cx[i])!r} {float(lat.cy[j])!r} {float(p[i, j])!r}\n")
            r = fftconvolve(qa / raw, lat.k, mode="full")[lat.nx - 1:2 * lat.nx - 1,
                                                          lat.ny - 1:2 * lat.ny - 1]
            p = p * r ** alpha * mask
            p /= p.sum()
    else:
        sys.exit(__doc__)


if __name__ == "__main__":
    main()
