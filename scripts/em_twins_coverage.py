#!/usr/bin/env python3
"""Twins of a constructed population for EM's interval coverage (branch
emcov5; docs/MATH.md §9.7 "What the reports cannot tell about EM's error
scale"; BENCHMARKS.md "Branch emcov5"). Needs numpy.

Usage:
  em_twins_coverage.py PARTS EPS_H N W DUMP...

PARTS: the population's structure, one part a line (`SIDE metres`
(default 30000), `BG share`,
`C cx cy long short angle weight`, `R ax ay bx by spread weight`), as
printed by the temporary test of branch emcov5 (the sweep's `sprawl`
preset: Structured::preset(Preset::Sprawl), 30 km square; the city:
SyntheticCity::standard(), 20 km, its edge clamp ignored). The twin B
blurs every cluster by an isotropic Gaussian of sd W metres (Σ → Σ + W²I;
corridors and background unchanged), or, with W = cos:K:A, reweights the
whole population by 1 + A·cos(ω0·x), |ω0| = K/h at 30° (positive for
A <= 1; the direction of cells18's "what the reports cannot tell").

Everything is computed in the Fourier domain, exactly for these mixture
laws (truncation at the square ignored: every cluster centre is >= 3 km
inside and its sd <= 700 m):
  report law  q = μ * p_N,  q̂ = μ̂ · (1 + |ω|²/ε²)^(-3/2)  (planar Laplace)
  true map    f = K_h * μ,  K(x) = exp(-|x|²/2h²) (the map's kernel, peak 1)
KL(q_A || q_B) per report on a padded lattice, n·KL, TV <= sqrt(n·KL/2)
(Pinsker, reports i.i.d.). Then, on each of A's sweep dumps at (N, EPS_H)
(the draws R of population A: EM's map M and stated SE per cell), the
coverage of f_A and of f_B by M ± 1.96·m·SE as a function of the factor m,
and the windows W_A, W_B of m that put each in [0.93, 0.97]. If W_A and
W_B are disjoint on every draw, no rule of the form "EM's centre, EM's
shape, one data-chosen factor" has both maps in band with probability
above (1 + TV)/2 (the lemma of §9.7)."""
import sys
import numpy as np

SIDE = 30000.0


def parts(path):
    global SIDE
    bg, cl, co = 0.0, [], []
    for line in open(path):
        w = line.split()
        if not w:
            continue
        if w[0] == 'SIDE':
            SIDE = float(w[1])
        elif w[0] == 'BG':
            bg = float(w[1])
        elif w[0] == 'C':
            cl.append([float(x) for x in w[1:]])
        elif w[0] == 'R':
            co.append([float(x) for x in w[1:]])
    return bg, cl, co


def mu_hat(wx, wy, bg, cl, co, blur):
    """Fourier transform E e^{-iω·x} of the mixture, blur^2 added to every cluster's covariance."""
    total = sum(c[5] for c in cl) + sum(c[5] for c in co)
    out = np.zeros(wx.shape, complex)
    for cx, cy, a, b, t, w in cl:
        # covariance R diag(a², b²) Rᵀ, plus blur² I
        ct, st = np.cos(t), np.sin(t)
        u = wx * ct + wy * st
        v = -wx * st + wy * ct
        q = (a * a) * u * u + (b * b) * v * v + blur * blur * (wx * wx + wy * wy)
        out += (w / total) * np.exp(-0.5 * q - 1j * (wx * cx + wy * cy))
    for ax, ay, bx, by, sp, w in co:
        dx, dy = bx - ax, by - ay
        ln = np.hypot(dx, dy)
        nx, ny = -dy / ln, dx / ln
        s = wx * dx + wy * dy
        with np.errstate(invalid='ignore', divide='ignore'):
            seg = np.where(np.abs(s) > 1e-12, (np.exp(-1j * s) - 1) / (-1j * s), 1.0)
        out += (w / total) * np.exp(-1j * (wx * ax + wy * ay)) * seg * np.exp(-0.5 * sp * sp * (wx * nx + wy * ny) ** 2)
    out *= (1 - bg)

    def box(w_):
        s = w_ * SIDE
        with np.errstate(invalid='ignore', divide='ignore'):
            return np.where(np.abs(s) > 1e-12, (np.exp(-1j * s) - 1) / (-1j * s), 1.0)
    out += bg * box(wx) * box(wy)
    return out


def lattice(pad, d):
    """Lattice covering [-pad, SIDE + pad]², spacing d, FFT length a power of 2."""
    m = int(2 ** np.ceil(np.log2((SIDE + 2 * pad) / d)))
    x0 = -np.ceil(pad / d) * d
    w = 2 * np.pi * np.fft.fftfreq(m, d)
    return m, x0, w


def density(hat_fn, m, x0, w, d):
    """Sample the density whose transform is hat_fn(ωx, ωy) on the lattice x0 + d·k."""
    wx, wy = np.meshgrid(w, w, indexing='ij')
    h = hat_fn(wx, wy) * np.exp(1j * (wx + wy) * x0)  # shift origin to x0
    return np.real(np.fft.ifft2(h)) / (d * d)


def main():
    partsf, eh, n, tw = sys.argv[1], float(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
    dumps = sys.argv[5:]
    bg, cl, co = parts(partsf)
    h = SIDE / 60 * np.sqrt(2.0)  # one cell diagonal of the 61 x 61 grid
    eps = eh / h
    # report law on a padded lattice (tails e^{-ε r}: pad 12/ε)
    pad = 12.0 / eps
    # a lattice step that divides the grid's spacing (the em: twins read
    # their map at the grid points off this lattice)
    spacing = SIDE / 60
    d = spacing / np.ceil(spacing / min(100.0, 0.1 / eps))
    m, x0, w = lattice(pad, d)
    L = lambda wx, wy: (1 + (wx * wx + wy * wy) / eps ** 2) ** -1.5
    h_ = h
    if tw.startswith('em:'):
        return em_twins(tw, bg, cl, co, h, eps, n, m, x0, w, d, dumps)
    if tw.startswith('cos:'):
        # B = A reweighted by 1 + amp·cos(ω0·x), ω0 = (k/h)(cos 30°, sin 30°)
        _, k, amp = tw.split(':')
        k, amp = float(k), float(amp)
        o0 = (k / h_ * np.cos(np.pi / 6), k / h_ * np.sin(np.pi / 6))
        blur = 0.0

        def twin(a, b):
            base = lambda u, v: mu_hat(u, v, bg, cl, co, 0.0)
            return base(a, b) + 0.5 * amp * (base(a - o0[0], b - o0[1]) + base(a + o0[0], b + o0[1]))
    else:
        blur = float(tw)
        twin = lambda a, b: mu_hat(a, b, bg, cl, co, blur)
    qa = density(lambda a, b: mu_hat(a, b, bg, cl, co, 0.0) * L(a, b), m, x0, w, d)
    qb = density(lambda a, b: twin(a, b) * L(a, b), m, x0, w, d)
    floor = 1e-14 * qa.max()
    qa, qb = np.maximum(qa, floor), np.maximum(qb, floor)
    qa /= qa.sum() * d * d
    qb /= qb.sum() * d * d
    kl = np.sum(qa * np.log(qa / qb)) * d * d
    klr = np.sum(qb * np.log(qb / qa)) * d * d
    chi = np.sum((qa - qb) ** 2 / qa) * d * d
    print('# εh %g n %d twin %s: KL(A||B) %.3e KL(B||A) %.3e chi2/2 %.3e per report; n·KL %.3f; TV <= %.3f (lattice %d^2, d %.1f m)'
          % (eh, n, tw, kl, klr, chi / 2, n * kl, np.sqrt(n * max(kl, klr) / 2), m, d))
    # true maps at the grid points (61 x 61, x-major), exact transform on a fine lattice
    pts = np.linspace(0.0, SIDE, 61)
    dk = SIDE / 600
    mk, xk, wk = lattice(4 * h, dk)
    Kh = lambda a, b: 2 * np.pi * h * h * np.exp(-0.5 * h * h * (a * a + b * b))
    fa = density(lambda a, b: mu_hat(a, b, bg, cl, co, 0.0) * Kh(a, b), mk, xk, wk, dk)
    fb = density(lambda a, b: twin(a, b) * Kh(a, b), mk, xk, wk, dk)
    idx = np.round((pts - xk) / dk).astype(int)
    assert np.allclose(xk + idx * dk, pts)
    fa = fa[np.ix_(idx, idx)].ravel()
    fb = fb[np.ix_(idx, idx)].ravel()
    print('# true maps: max f_A %.4e, max f_B %.4e, RMS(f_B - f_A) %.3e' % (fa.max(), fb.max(), np.sqrt(np.mean((fb - fa) ** 2))))
    windows_table(fa, fb, dumps)


def windows_table(fa, fb, dumps):
    print('| draw | RMS(F_dev − f_A)/SE | RMS(f_B − f_A)/SE | m*_A | window A | m*_B | window B | disjoint | cover f_A, f_B at m = 1 | cover F_dev, F_dev + Δf at m = 1 |')
    print('|---|---|---|---|---|---|---|---|---|---|')
    for f in dumps:
        D = np.genfromtxt(f, delimiter=',', skip_header=2)
        t, M, se = D[:, 0], D[:, 1], D[:, 5]
        ms = np.exp(np.linspace(np.log(0.05), np.log(20), 2000))

        def curve(target):
            return np.array([np.mean(np.abs(M - target) <= 1.96 * k * se) for k in ms])

        def window(c):
            ok = (c >= 0.93) & (c <= 0.97)
            if not ok.any():
                return (np.nan, np.nan)
            return (ms[ok].min(), ms[ok].max())

        def mstar(c):
            return ms[np.argmax(c >= 0.95)] if (c >= 0.95).any() else np.inf
        ca, cb = curve(fa), curve(fb)
        wa, wb = window(ca), window(cb)
        disj = wa[1] < wb[0] or wb[1] < wa[0]
        one = lambda tg: np.mean(np.abs(M - tg) <= 1.96 * se)
        print('| %s | %.2f | %.2f | %.2f | %.2f–%.2f | %.2f | %.2f–%.2f | %s | %.3f, %.3f | %.3f, %.3f |' % (
            f.split('/')[-1], np.sqrt(np.mean(((t - fa) / se) ** 2)), np.sqrt(np.mean(((fb - fa) / se) ** 2)),
            mstar(ca), wa[0], wa[1], mstar(cb), wb[0], wb[1], 'yes' if disj else 'no',
            one(fa), one(fb), one(t), one(t + fb - fa)))



def em_twins(tw, bg, cl, co, h, eps, n, m, x0, w, d, dumps):
    """Twins B_t = population EM on A's exact report law: t multiplicative
    EM steps of the planar-Laplace deconvolution from the uniform law on the
    square (support kept), i.e. the population EM "believes in" after t
    steps with infinitely many reports. Prints n·KL(q_A || q_{B_t}) and the
    windows at each checkpoint t in `em:T1,T2,...`."""
    checks = sorted(int(t) for t in tw[3:].split(','))
    wx, wy = np.meshgrid(w, w, indexing='ij')
    Lh = (1 + (wx * wx + wy * wy) / eps ** 2) ** -1.5
    conv = lambda a: np.real(np.fft.ifft2(np.fft.fft2(a) * Lh))
    qa = density(lambda a, b: mu_hat(a, b, bg, cl, co, 0.0) * (1 + (a * a + b * b) / eps ** 2) ** -1.5, m, x0, w, d)
    floor = 1e-14 * qa.max()
    qa = np.maximum(qa, floor)
    qa /= qa.sum()
    xs = x0 + d * np.arange(m)
    inside = ((xs >= 0) & (xs <= SIDE))
    mask = np.outer(inside, inside).astype(float)
    mu = mask / mask.sum()  # masses per lattice point
    # true map of a lattice law: f(t) = Σ_k mu_k K(t - x_k), K peak 1, by FFT
    Kh = np.exp(-0.5 * h * h * (wx * wx + wy * wy))  # transform of the normalised Gaussian ...
    Knorm = 2 * np.pi * h * h / (d * d)  # ... times ∫K / d² gives K sampled per unit mass
    pts = np.linspace(0.0, SIDE, 61)
    idx = np.round((pts - x0) / d).astype(int)
    fa = density(lambda a, b: mu_hat(a, b, bg, cl, co, 0.0) * 2 * np.pi * h * h * np.exp(-0.5 * h * h * (a * a + b * b)), m, x0, w, d)
    fa_g = fa[np.ix_(idx, idx)].ravel()
    ok = np.allclose(x0 + idx * d, pts)
    print('# population EM twins at εh %g, n %d (lattice %d², d %.1f m, grid on lattice: %s)' % (eps * h, n, m, d, ok))
    t = 0
    for T in checks:
        while t < T:
            qm = np.maximum(conv(mu), floor)
            mu = mu * conv(qa / qm) * mask
            mu /= mu.sum()
            t += 1
        qb = np.maximum(conv(mu), floor)
        qb /= qb.sum()
        kl = np.sum(qa * np.log(qa / qb))
        klr = np.sum(qb * np.log(qb / qa))
        fb = np.real(np.fft.ifft2(np.fft.fft2(mu) * Kh)) * Knorm
        fb_g = fb[np.ix_(idx, idx)].ravel()
        print('# t %d: KL(A||B) %.3e KL(B||A) %.3e per report; n·KL %.3f; TV <= %.3f; max f_B %.4e (f_A %.4e); RMS(f_B - f_A) %.3e'
              % (t, kl, klr, n * kl, np.sqrt(n * max(kl, klr) / 2), fb_g.max(), fa_g.max(), np.sqrt(np.mean((fb_g - fa_g) ** 2))))
        windows_table(fa_g, fb_g, dumps)


if __name__ == '__main__':
    main()
