//! Brute-force oracle for the pointwise Lipschitz constant and the smooth
//! sensitivity (docs/MATH.md §2), checked against the closed forms of docs/MATH.md §3.1-3.3.
//!
//! The oracle evaluates the *definitions*, not the implementation's formulas:
//!
//! ```text
//! L(x)  = sup_{y != x} |f(x) - f(y)| / d(x, y)
//! S*(x) = sup_y L(y) / g(d(x, y)) = sup_{y, z != y} |f(y) - f(z)| / (d(y, z) g(d(x, y)))
//! ```
//!
//! * f is re-implemented here from the formulas of docs/MATH.md (for the two-way threshold
//!   region by region: corner annulus, upper arm, right arm), in double-double
//!   arithmetic. Secants between very close points are then exact to ~1e-30
//!   relative instead of being dominated by the rounding of f, so the oracle
//!   may search partners down to 1e-6 widths without ever inventing a slope.
//! * L(x): dense search over the secant partner z. Candidates: a polar grid
//!   around x (1-D: both directions; 2-D: 48 directions) times log-spaced
//!   radii from 1e-6 widths out to far beyond the ramps, plus a window of
//!   points across the ramps/band. Refinement: (a) the direction profile:
//!   every grid direction's best radius is refined by golden section (along
//!   a ray the secant rises to a kink where f reaches its other extreme
//!   value, then decays), then the best directions by golden section over
//!   the angle; (b) Nelder-Mead (with restarts) over z from the best
//!   candidates in distinct directions.
//! * S*(x): dense search over y (24 directions x log-spaced radii around x,
//!   plus the window), each y scored by a coarser but definition-based L
//!   (12 directions, 2 radii per decade, window). The best y in distinct
//!   directions, and y = x with its fine L, start a local refinement of the
//!   pair (y, z): joint Nelder-Mead on (y, z - y); sliding the pair along
//!   the ray from x to where y meets the ramp (golden section, partner on
//!   either side); re-aiming the partner from y (direction profile); and in
//!   2-D a final "ridge" search that moves y along the ramp edge (golden
//!   over the angle of y seen from x, each angle valued by its best
//!   distance with the partner re-aimed). Simplex methods alone stall on
//!   these kinked objectives at ~1e-5; the profiles bring the witnesses to
//!   ~1e-9 of the supremum.
//!
//! Every number the oracle returns is an actual secant ratio at a concrete
//! (y, z), i.e. a lower bound of the true sup (up to ~1e-16 rounding of a
//! distance and of g). Hence:
//!
//! * oracle <= implementation · (1 + 1e-12) must hold always: otherwise S (or
//!   L) is below its definition, a privacy bug.
//! * implementation <= oracle · (1 + 1e-6): the oracle found a witness close
//!   to the implementation's value, so the closed form is tight (not just an
//!   upper bound).
//!
//! Every point is checked for both growth functions with γ·width
//! log-uniform in [1e-3, 1e2]; each test prints its worst ratios. Cost:
//! about 2·10^5 secant evaluations per 2-D point, ~40 s of CPU for the file
//! with the optimised test profile.

use geopriv::audit::golden_max;
use geopriv::{Growth, GrowthKind, Query, SoftInterval, SoftThreshold, TwoWayThreshold};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use std::f64::consts::{PI, SQRT_2};

/// A point; 1-D queries use only the first coordinate (the second is 0).
type P = [f64; 2];

// ---------------------------------------------------------------------------
// Double-double arithmetic (Dekker / Knuth error-free transformations).
// ---------------------------------------------------------------------------

#[derive(Clone, Copy, Debug)]
struct Dd {
    hi: f64,
    lo: f64,
}

#[inline]
fn two_sum(a: f64, b: f64) -> Dd {
    let s = a + b;
    let bb = s - a;
    Dd {
        hi: s,
        lo: (a - (s - bb)) + (b - bb),
    }
}

#[inline]
fn quick_two_sum(a: f64, b: f64) -> Dd {
    let s = a + b;
    Dd {
        hi: s,
        lo: b - (s - a),
    }
}

#[inline]
fn split(a: f64) -> (f64, f64) {
    let c = 134_217_729.0 * a; // 2^27 + 1
    let hi = c - (c - a);
    (hi, a - hi)
}

#[inline]
fn two_prod(a: f64, b: f64) -> Dd {
    let p = a * b;
    let (ah, al) = split(a);
    let (bh, bl) = split(b);
    Dd {
        hi: p,
        lo: ((ah * bh - p) + ah * bl + al * bh) + al * bl,
    }
}

impl Dd {
    const ONE: Dd = Dd { hi: 1.0, lo: 0.0 };
    const ZERO: Dd = Dd { hi: 0.0, lo: 0.0 };

    #[inline]
    fn new(a: f64) -> Dd {
        Dd { hi: a, lo: 0.0 }
    }
    #[inline]
    fn add(self, b: Dd) -> Dd {
        let s = two_sum(self.hi, b.hi);
        let t = two_sum(self.lo, b.lo);
        let r = quick_two_sum(s.hi, s.lo + t.hi);
        quick_two_sum(r.hi, r.lo + t.lo)
    }
    #[inline]
    fn neg(self) -> Dd {
        Dd {
            hi: -self.hi,
            lo: -self.lo,
        }
    }
    #[inline]
    fn sub(self, b: Dd) -> Dd {
        self.add(b.neg())
    }
    #[inline]
    fn mul(self, b: Dd) -> Dd {
        let p = two_prod(self.hi, b.hi);
        quick_two_sum(p.hi, p.lo + (self.hi * b.lo + self.lo * b.hi))
    }
    #[inline]
    fn div_f(self, b: f64) -> Dd {
        let q1 = self.hi / b;
        let p = two_prod(q1, b);
        let s = two_sum(self.hi, -p.hi);
        let e = s.lo - p.lo + self.lo;
        let q2 = (s.hi + e) / b;
        quick_two_sum(q1, q2)
    }
    #[inline]
    fn sqrt(self) -> Dd {
        if self.hi <= 0.0 {
            return Dd::ZERO;
        }
        let x = 1.0 / self.hi.sqrt();
        let ax = self.hi * x;
        let r = self.sub(two_prod(ax, ax));
        two_sum(ax, r.hi * (x * 0.5))
    }
    #[inline]
    fn lt(self, b: Dd) -> bool {
        self.hi < b.hi || (self.hi == b.hi && self.lo < b.lo)
    }
    #[inline]
    fn min(self, b: Dd) -> Dd {
        if b.lt(self) {
            b
        } else {
            self
        }
    }
    #[inline]
    fn clamp01(self) -> Dd {
        if self.lt(Dd::ZERO) {
            Dd::ZERO
        } else if Dd::ONE.lt(self) {
            Dd::ONE
        } else {
            self
        }
    }
    #[inline]
    fn abs(self) -> Dd {
        if self.lt(Dd::ZERO) {
            self.neg()
        } else {
            self
        }
    }
    #[inline]
    fn to_f64(self) -> f64 {
        self.hi + self.lo
    }
}

// ---------------------------------------------------------------------------
// The query functions, re-implemented from the formulas of docs/MATH.md.
// ---------------------------------------------------------------------------

trait Model {
    /// 1 or 2.
    fn dim(&self) -> usize;
    /// f(p), in double-double.
    fn f(&self, p: &P) -> Dd;
    /// The ramp width (the natural length unit).
    fn width(&self) -> f64;
    /// A length beyond which, seen from p, nothing of f changes any more
    /// (distance to the features plus their extent).
    fn reach(&self, p: &P) -> f64;
    /// Points across the ramps/band, near `around` where that matters.
    fn window(&self, around: &P, out: &mut Vec<P>);
}

fn uniform_1d(lo: f64, hi: f64, n: usize, out: &mut Vec<P>) {
    for k in 0..=n {
        out.push([lo + (hi - lo) * k as f64 / n as f64, 0.0]);
    }
}

/// docs/MATH.md §3.1.
struct ThresholdModel {
    t: f64,
    w: f64,
}

impl Model for ThresholdModel {
    fn dim(&self) -> usize {
        1
    }
    fn f(&self, p: &P) -> Dd {
        two_sum(p[0], -self.t)
            .div_f(self.w)
            .add(Dd::new(0.5))
            .clamp01()
    }
    fn width(&self) -> f64 {
        self.w
    }
    fn reach(&self, p: &P) -> f64 {
        (p[0] - self.t).abs() + self.w
    }
    fn window(&self, _around: &P, out: &mut Vec<P>) {
        uniform_1d(self.t - self.w, self.t + self.w, 32, out);
    }
}

/// docs/MATH.md §3.2: ramps of width θ centred at a and b, plateau 1 in between.
struct IntervalModel {
    a: f64,
    b: f64,
    w: f64,
}

impl Model for IntervalModel {
    fn dim(&self) -> usize {
        1
    }
    fn f(&self, p: &P) -> Dd {
        let half = Dd::new(0.5);
        let rising = two_sum(p[0], -self.a).div_f(self.w).add(half);
        let falling = two_sum(self.b, -p[0]).div_f(self.w).add(half);
        rising.min(falling).clamp01()
    }
    fn width(&self) -> f64 {
        self.w
    }
    fn reach(&self, p: &P) -> f64 {
        (p[0] - self.a).abs().max((p[0] - self.b).abs()) + self.w
    }
    fn window(&self, _around: &P, out: &mut Vec<P>) {
        uniform_1d(self.a - self.w, self.a + self.w, 24, out);
        uniform_1d(self.b - self.w, self.b + self.w, 24, out);
        uniform_1d(self.a, self.b, 16, out);
    }
}

/// docs/MATH.md §3.3, region by region. The arm formulas (x1 - T1 + τ/2)/τ are
/// written as (x1 - (c0.x - R2))/τ, which is the same number, so that f is
/// exactly continuous across the region boundaries even with c0 and R1
/// rounded to doubles (a rounding jump there would fake huge secants
/// between very close points).
struct TwoWayModel {
    t: [f64; 2],
    w: f64,
    c0: [f64; 2],
    r1: f64,
    r2: Dd,
    /// Lower edges of the two arms, c0 - R2 (= T - τ/2).
    edge: [Dd; 2],
}

impl TwoWayModel {
    fn new(t1: f64, t2: f64, w: f64) -> Self {
        let r1 = w / SQRT_2;
        let c0 = [t1 + w / 2.0 + r1, t2 + w / 2.0 + r1];
        let r2 = two_sum(r1, w);
        let edge = [Dd::new(c0[0]).sub(r2), Dd::new(c0[1]).sub(r2)];
        Self {
            t: [t1, t2],
            w,
            c0,
            r1,
            r2,
            edge,
        }
    }
}

impl Model for TwoWayModel {
    fn dim(&self) -> usize {
        2
    }
    fn f(&self, p: &P) -> Dd {
        // Points clearly off the band (by far more than the rounding error
        // of a double estimate) take the exact values 0 and 1 without the
        // double-double evaluation: a large speed-up, same numbers.
        let margin = 1e-9 * self.w;
        if p[1] > self.c0[1] {
            // Upper arm (and the quadrant beyond both arms, where this is 1).
            let u = p[0] - self.edge[0].hi;
            if u < -margin {
                return Dd::ZERO;
            } else if u > self.w + margin {
                return Dd::ONE;
            }
            Dd::new(p[0]).sub(self.edge[0]).div_f(self.w).clamp01()
        } else if p[0] > self.c0[0] {
            // Right arm.
            let u = p[1] - self.edge[1].hi;
            if u < -margin {
                return Dd::ZERO;
            } else if u > self.w + margin {
                return Dd::ONE;
            }
            Dd::new(p[1]).sub(self.edge[1]).div_f(self.w).clamp01()
        } else {
            // Corner: (R2 - ||x - c0||)/τ, i.e. 1 inside R1 and 0 beyond R2.
            let r = dist(p, &self.c0);
            if r > self.r2.hi + margin {
                return Dd::ZERO;
            } else if r < self.r1 - margin {
                return Dd::ONE;
            }
            let dx = two_sum(p[0], -self.c0[0]);
            let dy = two_sum(p[1], -self.c0[1]);
            let r = dx.mul(dx).add(dy.mul(dy)).sqrt();
            self.r2.sub(r).div_f(self.w).clamp01()
        }
    }
    fn width(&self) -> f64 {
        self.w
    }
    fn reach(&self, p: &P) -> f64 {
        dist(p, &self.c0) + self.r2.hi + self.w
    }
    fn window(&self, around: &P, out: &mut Vec<P>) {
        let w = self.w;
        // Across the upper arm at the height of `around` (or just above c0).
        let h = around[1].max(self.c0[1] + 0.25 * w);
        for k in 0..=16 {
            out.push([self.t[0] + w * (k as f64 / 8.0 - 1.0), h]);
        }
        // Across the right arm.
        let h = around[0].max(self.c0[0] + 0.25 * w);
        for k in 0..=16 {
            out.push([h, self.t[1] + w * (k as f64 / 8.0 - 1.0)]);
        }
        // Radially across the corner annulus, towards `around` if it lies
        // in the corner region, else along the diagonal.
        let (dx, dy) = (around[0] - self.c0[0], around[1] - self.c0[1]);
        let n = (dx * dx + dy * dy).sqrt();
        let u = if dx < 0.0 && dy < 0.0 && n > 0.0 {
            [dx / n, dy / n]
        } else {
            [-0.5f64.sqrt(), -0.5f64.sqrt()]
        };
        for k in 0..=16 {
            let rho = self.r1 - 0.5 * w + 2.0 * w * k as f64 / 16.0;
            out.push([self.c0[0] + rho * u[0], self.c0[1] + rho * u[1]]);
        }
    }
}

// ---------------------------------------------------------------------------
// The search.
// ---------------------------------------------------------------------------

#[inline]
fn dist(a: &P, b: &P) -> f64 {
    let dx = a[0] - b[0];
    let dy = a[1] - b[1];
    (dx * dx + dy * dy).sqrt()
}

/// g(t), written out from docs/MATH.md §2 (not through `Growth::eval`).
#[inline]
fn growth(kind: GrowthKind, gamma: f64, t: f64) -> f64 {
    match kind {
        GrowthKind::Exponential => (gamma * t).exp(),
        GrowthKind::Linear => 1.0 + gamma * t,
    }
}

/// |f(y) - f(z)| / d(y, z) with f(y) precomputed.
#[inline]
fn secant<M: Model>(m: &M, y: &P, fy: Dd, z: &P) -> f64 {
    let d = dist(y, z);
    if d <= 0.0 || d.is_nan() {
        return 0.0;
    }
    fy.sub(m.f(z)).abs().to_f64() / d
}

/// Resolution of a grid search.
#[derive(Clone, Copy)]
struct Grid {
    /// Number of directions (2-D only; 1-D always uses ±1).
    dirs: usize,
    /// Log-spaced radii per decade.
    per_decade: f64,
    /// Smallest radius, in widths.
    rmin: f64,
}

const FINE: Grid = Grid {
    dirs: 48,
    per_decade: 8.0,
    rmin: 1e-6,
};
const COARSE: Grid = Grid {
    dirs: 12,
    per_decade: 2.0,
    rmin: 1e-3,
};
const Y_GRID: Grid = Grid {
    dirs: 24,
    per_decade: 4.0,
    rmin: 1e-3,
};

fn directions(dim: usize, n: usize) -> Vec<P> {
    if dim == 1 {
        vec![[1.0, 0.0], [-1.0, 0.0]]
    } else {
        (0..n)
            .map(|k| {
                let a = 2.0 * PI * k as f64 / n as f64;
                [a.cos(), a.sin()]
            })
            .collect()
    }
}

/// Points around `c`: every direction times log-spaced radii from
/// `grid.rmin` widths out to 4 · reach, plus the model's window.
fn candidates<M: Model>(m: &M, c: &P, grid: Grid, dirs: &[P], out: &mut Vec<P>) {
    out.clear();
    let w = m.width();
    let rmax = 4.0 * m.reach(c);
    let step = 10f64.powf(1.0 / grid.per_decade);
    let mut r = grid.rmin * w;
    while r < rmax {
        for u in dirs {
            out.push([c[0] + r * u[0], c[1] + r * u[1]]);
        }
        r *= step;
    }
    m.window(c, out);
}

/// Keep the `k` best (value, payload) pairs, best first.
fn top_k<T: Copy>(best: &mut Vec<(f64, T)>, k: usize, v: f64, t: T) {
    if best.len() == k && v <= best[k - 1].0 {
        return;
    }
    let pos = best.iter().position(|b| v > b.0).unwrap_or(best.len());
    best.insert(pos, (v, t));
    best.truncate(k);
}

/// The best `k` candidates in distinct directions seen from `c` (the best
/// one of each angular sector, sectors ranked by it), plus the two best
/// overall. Several starts in one direction would waste the refinement
/// while another direction holds the true supremum.
fn diverse_top<T: Copy>(
    c: &P,
    sectors: usize,
    k: usize,
    cands: &[(f64, P, T)],
) -> Vec<(f64, P, T)> {
    let mut per: Vec<Option<(f64, P, T)>> = vec![None; sectors];
    let mut overall: Vec<(f64, (P, T))> = Vec::with_capacity(2);
    for &(v, p, t) in cands {
        let a = (p[1] - c[1]).atan2(p[0] - c[0]);
        let i = ((a + PI) / (2.0 * PI) * sectors as f64).floor() as usize % sectors;
        if per[i].is_none_or(|b| v > b.0) {
            per[i] = Some((v, p, t));
        }
        top_k(&mut overall, 2, v, (p, t));
    }
    let mut out: Vec<(f64, (P, T))> = Vec::with_capacity(k);
    for (v, p, t) in per.into_iter().flatten() {
        top_k(&mut out, k, v, (p, t));
    }
    out.extend(overall);
    out.into_iter().map(|(v, (p, t))| (v, p, t)).collect()
}

/// Nelder-Mead maximisation in `n <= 4` variables, with restarts from the
/// best point so far. The objectives have kinks (ramp edges), where a
/// simplex can collapse without progress; restarts alternate between
/// axis-aligned simplices and randomly oriented ones of decreasing size.
fn maximize(
    n: usize,
    f: &mut dyn FnMut(&[f64; 4]) -> f64,
    x0: [f64; 4],
    step: [f64; 4],
    max_evals: usize,
    rng: &mut StdRng,
) -> ([f64; 4], f64) {
    const SCALES: [f64; 8] = [1.0, 0.1, 1.0, 0.01, 0.1, 1e-3, 1e-2, 1e-4];
    let mut best = (x0, f(&x0));
    for (round, scale) in SCALES.into_iter().enumerate() {
        let mut basis = [[0.0; 4]; 4];
        for (i, row) in basis.iter_mut().enumerate().take(n) {
            for (j, v) in row.iter_mut().enumerate().take(n) {
                *v = if round % 2 == 0 {
                    if i == j {
                        step[j] * scale
                    } else {
                        0.0
                    }
                } else {
                    step[j] * scale * rng.random_range(-1.0..1.0)
                };
            }
        }
        let (x, v) = nelder_mead(n, f, best.0, best.1, &basis, max_evals);
        if v > best.1 {
            best = (x, v);
        }
    }
    best
}

fn nelder_mead(
    n: usize,
    f: &mut dyn FnMut(&[f64; 4]) -> f64,
    x0: [f64; 4],
    f0: f64,
    basis: &[[f64; 4]; 4],
    max_evals: usize,
) -> ([f64; 4], f64) {
    let mut s: [([f64; 4], f64); 5] = [(x0, f0); 5];
    for i in 0..n {
        let mut p = x0;
        for j in 0..n {
            p[j] += basis[i][j];
        }
        s[i + 1] = (p, f(&p));
    }
    let mut evals = n;
    loop {
        // Best first.
        s[..=n].sort_by(|a, b| b.1.total_cmp(&a.1));
        if evals >= max_evals {
            break;
        }
        let size = (1..=n)
            .flat_map(|i| (0..n).map(move |j| (i, j)))
            .map(|(i, j)| (s[i].0[j] - s[0].0[j]).abs() / (s[0].0[j].abs() + 1e-300))
            .fold(0.0, f64::max);
        if size < 1e-15 {
            break;
        }
        let mut c = [0.0; 4];
        for p in &s[..n] {
            for (cj, pj) in c.iter_mut().zip(p.0).take(n) {
                *cj += pj / n as f64;
            }
        }
        let worst = s[n];
        let along = |t: f64| {
            let mut p = c;
            for (pj, wj) in p.iter_mut().zip(worst.0).take(n) {
                *pj += t * (wj - *pj);
            }
            p
        };
        let xr = along(-1.0);
        let fr = f(&xr);
        evals += 1;
        if fr > s[0].1 {
            let xe = along(-2.0);
            let fe = f(&xe);
            evals += 1;
            s[n] = if fe > fr { (xe, fe) } else { (xr, fr) };
        } else if fr > s[n - 1].1 {
            s[n] = (xr, fr);
        } else {
            let (xc, fc) = if fr > worst.1 {
                let p = along(-0.5);
                (p, f(&p))
            } else {
                let p = along(0.5);
                (p, f(&p))
            };
            evals += 1;
            if fc > worst.1.max(fr) {
                s[n] = (xc, fc);
            } else {
                let best = s[0].0;
                for v in s[1..=n].iter_mut() {
                    let mut p = v.0;
                    for (pj, bj) in p.iter_mut().zip(best).take(n) {
                        *pj = bj + 0.5 * (*pj - bj);
                    }
                    *v = (p, f(&p));
                }
                evals += n;
            }
        }
    }
    (s[0].0, s[0].1)
}

/// L(y) restricted to the ray from y in direction ψ: the best radius in
/// [lo, hi] by golden section (along a ray the secant rises to a kink where
/// f reaches its other extreme value, then decays).
fn ray_best<M: Model>(m: &M, y: &P, fy: Dd, psi: f64, lo: f64, hi: f64, iters: usize) -> (f64, P) {
    let (c, s) = (psi.cos(), psi.sin());
    let along = |r: f64| [y[0] + r * c, y[1] + r * s];
    let (r, v) = golden_max(|r| secant(m, y, fy, &along(r)), lo, hi, iters);
    (v, along(r))
}

/// max over partners z' = y + r u(ψ) near z of the secant |f(y) - f(z')| / r:
/// golden section over ψ in ψ0 ± `half`, the value of each direction being
/// its best radius in [r0/2, 2 r0] (`ray_best`).
fn profile_partner<M: Model>(m: &M, y: &P, fy: Dd, z: &P, half: f64) -> (f64, P) {
    let (dx, dy) = (z[0] - y[0], z[1] - y[1]);
    let (psi0, r0) = (dy.atan2(dx), (dx * dx + dy * dy).sqrt());
    let (psi, _) = golden_max(
        |psi| ray_best(m, y, fy, psi, 0.5 * r0, 2.0 * r0, 40).0,
        psi0 - half,
        psi0 + half,
        30,
    );
    ray_best(m, y, fy, psi, 0.5 * r0, 2.0 * r0, 50)
}

/// Log-spaced radii from `grid.rmin` widths out to 4 · reach.
fn radii<M: Model>(m: &M, c: &P, grid: Grid) -> Vec<f64> {
    let rmax = 4.0 * m.reach(c);
    let step = 10f64.powf(1.0 / grid.per_decade);
    let mut out = vec![grid.rmin * m.width()];
    while *out.last().unwrap() < rmax {
        out.push(out.last().unwrap() * step);
    }
    out
}

/// L(y) as sup over directions of sup over radii: every grid direction
/// gets its best grid radius refined by golden section, then the three
/// best directions are refined by golden section over the angle (within
/// one grid step). In 1-D the two directions are all there is.
fn direction_profile<M: Model>(m: &M, y: &P, fy: Dd, ndirs: usize, grid: Grid) -> (f64, P) {
    let rs = radii(m, y, grid);
    let step = rs[1] / rs[0];
    let angles: Vec<f64> = if m.dim() == 1 {
        vec![0.0, PI]
    } else {
        (0..ndirs)
            .map(|k| 2.0 * PI * k as f64 / ndirs as f64)
            .collect()
    };
    let mut per_dir: Vec<(f64, (f64, f64))> = Vec::with_capacity(3);
    let mut best = (0.0, *y);
    for &psi in &angles {
        let (c, s) = (psi.cos(), psi.sin());
        let mut r_best = (0.0, rs[0]);
        for &r in &rs {
            let v = secant(m, y, fy, &[y[0] + r * c, y[1] + r * s]);
            if v > r_best.0 {
                r_best = (v, r);
            }
        }
        let r0 = r_best.1;
        let (v, z) = ray_best(m, y, fy, psi, r0 / step, r0 * step, 50);
        if v > best.0 {
            best = (v, z);
        }
        top_k(&mut per_dir, 3, v, (psi, r0));
    }
    if m.dim() == 2 {
        let half = 2.0 * PI / ndirs as f64;
        for &(_, (psi0, r0)) in &per_dir {
            let (lo, hi) = (r0 / (step * step), r0 * step * step);
            let (psi, _) = golden_max(
                |psi| ray_best(m, y, fy, psi, lo, hi, 40).0,
                psi0 - half,
                psi0 + half,
                30,
            );
            let (v, z) = ray_best(m, y, fy, psi, lo, hi, 60);
            if v > best.0 {
                best = (v, z);
            }
        }
    }
    best
}

struct Oracle<'m, M: Model> {
    m: &'m M,
    fine_dirs: Vec<P>,
    coarse_dirs: Vec<P>,
    y_dirs: Vec<P>,
    buf: Vec<P>,
    ybuf: Vec<P>,
    /// For the randomly oriented restarts of Nelder-Mead (fixed seed).
    rng: StdRng,
}

/// A secant pair realising an oracle value.
#[derive(Clone, Copy, Debug)]
struct Witness {
    value: f64,
    y: P,
    z: P,
}

/// The search variables of the joint (y, z) refinement: y and the offset
/// δ = z - y (1-D: [y, δ]; 2-D: [y1, y2, δ1, δ2]). With the offset as a
/// variable, translating the pair along a ramp edge is a single move.
fn pack(n: usize, y: &P, z: &P) -> [f64; 4] {
    if n == 2 {
        [y[0], y[1], z[0] - y[0], z[1] - y[1]]
    } else {
        [y[0], z[0] - y[0], 0.0, 0.0]
    }
}

fn unpack(n: usize, p: &[f64; 4]) -> (P, P) {
    if n == 2 {
        ([p[0], p[1]], [p[0] + p[2], p[1] + p[3]])
    } else {
        ([p[0], 0.0], [p[0] + p[1], 0.0])
    }
}

impl<'m, M: Model> Oracle<'m, M> {
    fn new(m: &'m M) -> Self {
        let d = m.dim();
        Self {
            m,
            fine_dirs: directions(d, FINE.dirs),
            coarse_dirs: directions(d, COARSE.dirs),
            y_dirs: directions(d, Y_GRID.dirs),
            buf: Vec::new(),
            ybuf: Vec::new(),
            rng: StdRng::seed_from_u64(0x6f72_6163_6c65),
        }
    }

    /// Coarse L(y): the best secant over the coarse partner grid.
    fn coarse_l(&mut self, y: &P) -> (f64, P) {
        let fy = self.m.f(y);
        candidates(self.m, y, COARSE, &self.coarse_dirs, &mut self.buf);
        let mut best = (0.0, *y);
        for z in &self.buf {
            let v = secant(self.m, y, fy, z);
            if v > best.0 {
                best = (v, *z);
            }
        }
        best
    }

    /// L(x): the direction profile (every grid direction, best radius
    /// refined, best directions refined), and Nelder-Mead from the best
    /// grid and window partners in distinct directions.
    fn lipschitz(&mut self, x: &P) -> Witness {
        let m = self.m;
        let n = m.dim();
        let fx = m.f(x);
        let (v, z) = direction_profile(m, x, fx, FINE.dirs, FINE);
        let mut out = Witness { value: v, y: *x, z };
        candidates(m, x, FINE, &self.fine_dirs, &mut self.buf);
        let scored: Vec<(f64, P, ())> = self
            .buf
            .iter()
            .map(|z| (secant(m, x, fx, z), *z, ()))
            .collect();
        for &(v, z, ()) in &diverse_top(x, FINE.dirs / 2, 4, &scored) {
            if v > out.value {
                out = Witness { value: v, y: *x, z };
            }
            let h = 0.2 * dist(x, &z);
            let mut obj = |p: &[f64; 4]| secant(m, x, fx, &[p[0], if n == 2 { p[1] } else { 0.0 }]);
            let (p, v) = maximize(
                n,
                &mut obj,
                [z[0], z[1], 0.0, 0.0],
                [h; 4],
                150,
                &mut self.rng,
            );
            if v > out.value {
                let z = [p[0], if n == 2 { p[1] } else { 0.0 }];
                out = Witness { value: v, y: *x, z };
            }
        }
        out
    }

    /// Local refinement of a pair (y, z) for S*(x): joint Nelder-Mead on
    /// (y, z - y), then twice: slide the pair along the ray from x (the
    /// direction in which g changes fastest) to where y meets the ramp,
    /// and re-aim the partner from y (2-D: direction/radius profile; 1-D:
    /// best offset length). Last, a Nelder-Mead with small steps.
    fn refine_pair(&mut self, x: &P, kind: GrowthKind, gamma: f64, start: Witness) -> Witness {
        let m = self.m;
        let n = m.dim();
        let score = |y: &P, z: &P| secant(m, y, m.f(y), z) / growth(kind, gamma, dist(x, y));
        let mut obj = |p: &[f64; 4]| {
            let (y, z) = unpack(n, p);
            score(&y, &z)
        };
        let steps = |w: &Witness, rel: f64| {
            let hy = rel * dist(x, &w.y).max(1e-3 * m.width());
            let hz = rel * dist(&w.y, &w.z);
            if n == 2 {
                [hy, hy, hz, hz]
            } else {
                [hy, hz, 0.0, 0.0]
            }
        };
        let mut w = start;
        let (p, v) = maximize(
            2 * n,
            &mut obj,
            pack(n, &w.y, &w.z),
            steps(&w, 0.2),
            300,
            &mut self.rng,
        );
        if v > w.value {
            let (y, z) = unpack(n, &p);
            w = Witness { value: v, y, z };
        }
        for _ in 0..2 {
            // The partner may sit on either side of y (e.g. y inside the
            // ramp, z between y and x): slide with both z - y and y - z.
            for side in [1.0, -1.0] {
                let slide = |s: f64, w: &Witness| {
                    let y = [x[0] + s * (w.y[0] - x[0]), x[1] + s * (w.y[1] - x[1])];
                    let z = [
                        y[0] + side * (w.z[0] - w.y[0]),
                        y[1] + side * (w.z[1] - w.y[1]),
                    ];
                    (y, z)
                };
                let (s, v) = golden_max(
                    |s| {
                        let (y, z) = slide(s, &w);
                        score(&y, &z)
                    },
                    0.5,
                    1.5,
                    80,
                );
                if v > w.value {
                    let (y, z) = slide(s, &w);
                    w = Witness { value: v, y, z };
                }
            }
            let fy = m.f(&w.y);
            let (l, z) = if n == 2 {
                profile_partner(m, &w.y, fy, &w.z, 0.05)
            } else {
                let psi = if w.z[0] >= w.y[0] { 0.0 } else { PI };
                let r0 = dist(&w.y, &w.z);
                ray_best(m, &w.y, fy, psi, 0.5 * r0, 2.0 * r0, 60)
            };
            let v = l / growth(kind, gamma, dist(x, &w.y));
            if v > w.value {
                w = Witness {
                    value: v,
                    y: w.y,
                    z,
                };
            }
        }
        let (p, v) = maximize(
            2 * n,
            &mut obj,
            pack(n, &w.y, &w.z),
            steps(&w, 1e-3),
            200,
            &mut self.rng,
        );
        if v > w.value {
            let (y, z) = unpack(n, &p);
            w = Witness { value: v, y, z };
        }
        w
    }

    /// 2-D: follow the ridge of a witness. With y = x + t u(φ) and the
    /// partner z = y + r u(ψ) (r kept), golden section over φ near the
    /// witness, each φ valued by the best t (golden: y meets the ramp at a
    /// kink) with the partner re-aimed (golden over ψ) at every t. This
    /// moves y *along* the ramp edge, where the joint simplex is slow
    /// because the gain (γ times a small change of distance) is tiny.
    fn ridge_polish(&self, x: &P, kind: GrowthKind, gamma: f64, w: Witness) -> Witness {
        let m = self.m;
        let (t0, r) = (dist(x, &w.y), dist(&w.y, &w.z));
        if m.dim() != 2 || t0 <= 0.0 || r <= 0.0 {
            return w;
        }
        let phi0 = (w.y[1] - x[1]).atan2(w.y[0] - x[0]);
        let psi0 = (w.z[1] - w.y[1]).atan2(w.z[0] - w.y[0]);
        let at = |phi: f64, t: f64| [x[0] + t * phi.cos(), x[1] + t * phi.sin()];
        // (value, ψ) at y(φ, t).
        let aim = |y: &P| {
            let fy = m.f(y);
            golden_max(
                |psi| secant(m, y, fy, &[y[0] + r * psi.cos(), y[1] + r * psi.sin()]),
                psi0 - 0.1,
                psi0 + 0.1,
                25,
            )
        };
        let best_t = |phi: f64| {
            golden_max(
                |t| aim(&at(phi, t)).1 / growth(kind, gamma, t),
                0.8 * t0,
                1.2 * t0,
                35,
            )
        };
        let (phi, _) = golden_max(|phi| best_t(phi).1, phi0 - 0.1, phi0 + 0.1, 30);
        let (t, _) = best_t(phi);
        let y = at(phi, t);
        let (psi, l) = aim(&y);
        let v = l / growth(kind, gamma, t);
        if v > w.value {
            Witness {
                value: v,
                y,
                z: [y[0] + r * psi.cos(), y[1] + r * psi.sin()],
            }
        } else {
            w
        }
    }

    /// S*(x) for each growth kind in `kinds` (same rate γ), sharing the
    /// search over y. Also returns the oracle's L(x) (the y = x candidate).
    fn smooth(&mut self, x: &P, gamma: f64, kinds: &[GrowthKind]) -> (Witness, Vec<Witness>) {
        let m = self.m;
        let at_x = self.lipschitz(x);
        // Coarse stage: y candidates with a coarse L each.
        let mut ys = std::mem::take(&mut self.ybuf);
        candidates(m, x, Y_GRID, &self.y_dirs, &mut ys);
        let scored: Vec<(P, f64, P)> = ys
            .iter()
            .map(|y| {
                let (l, z) = self.coarse_l(y);
                (*y, l, z)
            })
            .collect();
        self.ybuf = ys;
        let mut out = Vec::with_capacity(kinds.len());
        for &kind in kinds {
            let ranked: Vec<(f64, P, P)> = scored
                .iter()
                .map(|&(y, l, z)| (l / growth(kind, gamma, dist(x, &y)), y, z))
                .collect();
            let mut starts = diverse_top(x, Y_GRID.dirs / 2, 3, &ranked);
            starts.truncate(4);
            // The y = x witness too: the pair may move off x.
            starts.push((at_x.value, at_x.y, at_x.z));
            let mut w = at_x;
            for &(value, y, z) in &starts {
                let r = self.refine_pair(x, kind, gamma, Witness { value, y, z });
                if r.value > w.value {
                    w = r;
                }
            }
            out.push(self.ridge_polish(x, kind, gamma, w));
        }
        (at_x, out)
    }
}

// ---------------------------------------------------------------------------
// Comparison with the implementation.
// ---------------------------------------------------------------------------

/// Allowed excess of the oracle over the implementation (privacy).
const SAFETY_TOL: f64 = 1e-12;
/// Allowed excess of the implementation over the oracle (tightness).
const TIGHT_TOL: f64 = 1e-6;

#[derive(Default)]
struct Worst {
    /// max oracle / implementation (must stay <= 1 + SAFETY_TOL).
    above: f64,
    above_at: String,
    /// max implementation / oracle (must stay <= 1 + TIGHT_TOL).
    below: f64,
    below_at: String,
}

impl Worst {
    fn record(&mut self, oracle: f64, implementation: f64, at: impl Fn() -> String) {
        let above = oracle / implementation;
        let below = implementation / oracle;
        if above > self.above || self.above_at.is_empty() {
            self.above = above;
            self.above_at = at();
        }
        if below > self.below || self.below_at.is_empty() {
            self.below = below;
            self.below_at = at();
        }
    }
}

struct Report {
    family: &'static str,
    points: usize,
    lipschitz: Worst,
    exp: Worst,
    linear: Worst,
    failures: Vec<String>,
}

impl Report {
    fn new(family: &'static str) -> Self {
        Self {
            family,
            points: 0,
            lipschitz: Worst::default(),
            exp: Worst::default(),
            linear: Worst::default(),
            failures: Vec::new(),
        }
    }

    fn check(&mut self, what: &str, oracle: &Witness, implementation: f64, at: &str) {
        let bad_safety = oracle.value > implementation * (1.0 + SAFETY_TOL);
        let bad_tight = implementation > oracle.value * (1.0 + TIGHT_TOL);
        if (bad_safety || bad_tight) && self.failures.len() < 20 {
            self.failures.push(format!(
                "{}: {what} at {at}: implementation {implementation:e}, oracle {:e} \
                 (ratio oracle/impl {:e}) witness y = {:?}, z = {:?}{}",
                self.family,
                oracle.value,
                oracle.value / implementation,
                oracle.y,
                oracle.z,
                if bad_safety {
                    "  <-- BELOW THE DEFINITION (privacy bug)"
                } else {
                    "  <-- not tight"
                }
            ));
        }
    }

    fn print_and_assert(&self) {
        println!("{}: {} points, both growths", self.family, self.points);
        for (name, w) in [
            ("L", &self.lipschitz),
            ("S exp", &self.exp),
            ("S linear", &self.linear),
        ] {
            println!(
                "  {name:9} max oracle/impl - 1 = {:+.3e} at {}",
                w.above - 1.0,
                w.above_at
            );
            println!(
                "  {name:9} max impl/oracle - 1 = {:+.3e} at {}",
                w.below - 1.0,
                w.below_at
            );
        }
        assert!(
            self.failures.is_empty(),
            "{} disagreements, first ones:\n{}",
            self.failures.len(),
            self.failures.join("\n")
        );
    }
}

/// One test point: the query, the oracle model, x and γ (in absolute units).
fn check_point<Q: Query, M: Model>(
    report: &mut Report,
    q: &Q,
    oracle: &mut Oracle<'_, M>,
    x: P,
    gamma: f64,
    label: &str,
) {
    let m = oracle.m;
    let xs = &x[..m.dim()];
    let at = || {
        format!(
            "{label} x = {xs:?}, γ = {gamma:e} (γ·width = {:e})",
            gamma * m.width()
        )
    };
    // The value itself, against the formula of docs/MATH.md.
    let v = q.value(xs).unwrap();
    let v_ref = m.f(&x).to_f64();
    let tol = 64.0 * f64::EPSILON * (1.0 + m.reach(&x) / m.width());
    assert!(
        (v - v_ref).abs() <= tol && (0.0..=1.0).contains(&v),
        "{}: value {v} != reference value {v_ref} at {}",
        report.family,
        at()
    );
    let kinds = [GrowthKind::Exponential, GrowthKind::Linear];
    let (l_or, witnesses) = oracle.smooth(&x, gamma, &kinds);
    let l_impl = q.pointwise_lipschitz(xs).unwrap();
    report.check("L", &l_or, l_impl, &at());
    report.lipschitz.record(l_or.value, l_impl, at);
    for (kind, w) in kinds.iter().zip(&witnesses) {
        let g = Growth::new(*kind, gamma).unwrap();
        let s_impl = q.smooth_sensitivity(xs, g).unwrap();
        let name = match kind {
            GrowthKind::Exponential => "S exp",
            GrowthKind::Linear => "S linear",
        };
        report.check(name, w, s_impl, &at());
        let worst = match kind {
            GrowthKind::Exponential => &mut report.exp,
            GrowthKind::Linear => &mut report.linear,
        };
        worst.record(w.value, s_impl, at);
    }
    report.points += 1;
}

/// γ·width log-uniform in [1e-3, 1e2], with the end points now and then.
fn random_gamma_width(rng: &mut StdRng) -> f64 {
    match rng.random_range(0..10) {
        0 => 1e-3,
        1 => 1e2,
        _ => 10f64.powf(rng.random_range(-3.0..2.0)),
    }
}

/// Offsets (in widths) used around every edge: on it, a few ulps off and
/// log-spaced distances on both sides.
const OFFSETS: [f64; 13] = [
    0.0, 1e-12, -1e-12, 1e-6, -1e-6, 1e-3, -1e-3, 0.1, -0.1, 1.0, 3.0, 100.0, 1e4,
];

/// The next double above x (finite x; `f64::next_up` needs Rust 1.86).
fn next_up(x: f64) -> f64 {
    if x == 0.0 {
        return f64::from_bits(1);
    }
    let b = x.to_bits();
    f64::from_bits(if x > 0.0 { b + 1 } else { b - 1 })
}

fn next_down(x: f64) -> f64 {
    -next_up(-x)
}

/// x and its two neighbouring doubles.
fn ulps(x: f64) -> [f64; 3] {
    [next_down(x), x, next_up(x)]
}

/// A log-uniform distance in widths, in [1e-4, 1e4].
fn log_distance(rng: &mut StdRng) -> f64 {
    10f64.powf(rng.random_range(-4.0..4.0))
}

#[test]
fn threshold_matches_the_definition() {
    let mut rng = StdRng::seed_from_u64(0x7448_7265_7368);
    let mut report = Report::new("threshold");
    let mut configs: Vec<(f64, f64)> = vec![(0.0, 1.0), (100_000.0, 20_000.0), (-3.5, 0.25)];
    for _ in 0..17 {
        let w = 10f64.powf(rng.random_range(-2.0..4.0));
        configs.push((w * rng.random_range(-300.0..300.0), w));
    }
    for (t, w) in configs {
        let q = SoftThreshold::new(t, w).unwrap();
        let m = ThresholdModel { t, w };
        let mut oracle = Oracle::new(&m);
        let mut points: Vec<(f64, &str)> = Vec::new();
        for edge in [t - 0.5 * w, t + 0.5 * w] {
            for e in ulps(edge) {
                points.push((e, "ramp edge"));
            }
            for o in OFFSETS {
                points.push((edge + o * w, "near edge (outside)"));
                points.push((edge - o * w, "near edge (inside)"));
            }
        }
        points.push((t, "centre"));
        points.push((t + 1e6 * w, "far"));
        points.push((t - 1e6 * w, "far"));
        while points.len() < 100 {
            let side = if rng.random::<bool>() { 1.0 } else { -1.0 };
            let x = if rng.random::<bool>() {
                t + rng.random_range(-0.75..0.75) * w
            } else {
                t + side * (0.5 + log_distance(&mut rng)) * w
            };
            points.push((x, "random"));
        }
        for (x, label) in points {
            let gamma = random_gamma_width(&mut rng) / w;
            check_point(
                &mut report,
                &q,
                &mut oracle,
                [x, 0.0],
                gamma,
                &format!("{label} (T = {t:e}, θ = {w:e})"),
            );
        }
    }
    assert!(report.points >= 2000);
    report.print_and_assert();
}

#[test]
fn interval_matches_the_definition() {
    let mut rng = StdRng::seed_from_u64(0x696e_7465_7276);
    let mut report = Report::new("interval");
    // (a, b - a in widths, θ): tents (b - a = θ exactly), barely wider,
    // ordinary and very wide intervals.
    let mut configs: Vec<(f64, f64, f64)> = vec![
        (0.0, 1.0, 1.0),
        (0.0, 1.0 + 1e-9, 1.0),
        (10.0, 1.001, 2.0),
        (0.0, 2.0, 1.0),
        (50_000.0, 5.0, 10_000.0),
        (-7.0, 1000.0, 0.5),
    ];
    for _ in 0..10 {
        let w = 10f64.powf(rng.random_range(-2.0..4.0));
        let span = match rng.random_range(0..4) {
            0 => 1.0,
            1 => 1.0 + 10f64.powf(rng.random_range(-9.0..0.0)),
            _ => 1.0 + 10f64.powf(rng.random_range(-1.0..3.0)),
        };
        configs.push((w * rng.random_range(-300.0..300.0), span, w));
    }
    for (a, span, w) in configs {
        // b = a + span·θ, nudged up to the smallest double with b - a >= θ
        // when span = 1 (a tent: the plateau is a single point).
        let mut b = a + span * w;
        while b - a < w {
            b = next_up(b);
        }
        let q = SoftInterval::new(a, b, w).unwrap();
        let m = IntervalModel { a, b, w };
        let mut oracle = Oracle::new(&m);
        let mut points: Vec<(f64, &str)> = Vec::new();
        for edge in [a - 0.5 * w, a + 0.5 * w, b - 0.5 * w, b + 0.5 * w] {
            for e in ulps(edge) {
                points.push((e, "ramp edge"));
            }
            for o in OFFSETS {
                points.push((edge + o * w, "near edge"));
                points.push((edge - o * w, "near edge"));
            }
        }
        for e in ulps(0.5 * (a + b)) {
            points.push((e, "plateau midpoint"));
        }
        points.push((a + 0.5 * w + 0.25 * (b - a - w), "plateau quarter"));
        points.push((a, "centre of lower ramp"));
        points.push((b, "centre of upper ramp"));
        points.push((a - 1e6 * w, "far"));
        points.push((b + 1e6 * w, "far"));
        while points.len() < 126 {
            let x = match rng.random_range(0..4) {
                0 => rng.random_range(a - w..b + w),
                1 => a - (0.5 + log_distance(&mut rng)) * w,
                2 => b + (0.5 + log_distance(&mut rng)) * w,
                _ => a + rng.random_range(-0.75..0.75) * w,
            };
            points.push((x, "random"));
        }
        for (x, label) in points {
            let gamma = random_gamma_width(&mut rng) / w;
            check_point(
                &mut report,
                &q,
                &mut oracle,
                [x, 0.0],
                gamma,
                &format!("{label} (a = {a:e}, b = {b:e}, θ = {w:e})"),
            );
        }
    }
    assert!(report.points >= 2000);
    report.print_and_assert();
}

#[test]
fn two_way_matches_the_definition() {
    let mut rng = StdRng::seed_from_u64(0x7477_6f77_6179);
    let mut report = Report::new("two-way");
    let mut configs: Vec<(f64, f64, f64)> = vec![
        (0.0, 0.0, 1.0),
        (100_000.0, 180_000.0, 24_000.0),
        (10.0, 20.0, 2.0),
    ];
    for _ in 0..6 {
        let w = 10f64.powf(rng.random_range(-2.0..4.0));
        configs.push((
            w * rng.random_range(-100.0..100.0),
            w * rng.random_range(-100.0..100.0),
            w,
        ));
    }
    for (t1, t2, w) in configs {
        let q = TwoWayThreshold::new(t1, t2, w).unwrap();
        let m = TwoWayModel::new(t1, t2, w);
        let c0 = q.corner();
        for i in 0..2 {
            assert!(
                (c0[i] - m.c0[i]).abs() <= 4.0 * f64::EPSILON * m.c0[i].abs().max(w),
                "corner {c0:?} is not the reference {:?}",
                m.c0
            );
        }
        let (r1, r2) = (m.r1, m.r1 + w);
        let mut oracle = Oracle::new(&m);
        let mut points: Vec<(P, &str)> = Vec::new();
        // The corner annulus: on its circles, just inside/outside, mid-band,
        // at angles across the lower-left quadrant (including its ends).
        for k in 0..=4 {
            let a = PI + 0.5 * PI * k as f64 / 4.0;
            let u = [a.cos(), a.sin()];
            for rho in [
                0.0,
                0.5 * r1,
                r1 * (1.0 - 1e-9),
                r1,
                r1 * (1.0 + 1e-9),
                0.5 * (r1 + r2),
                r2 * (1.0 - 1e-9),
                r2,
                r2 * (1.0 + 1e-9),
                r2 + w,
                r2 + 30.0 * w,
            ] {
                points.push(([c0[0] + rho * u[0], c0[1] + rho * u[1]], "corner annulus"));
            }
        }
        // Region boundaries x1 = c0.x and x2 = c0.y, on both sides of c0.
        for s in [-3.0, -1.0, -0.5, 0.0, 2.0, 50.0] {
            for c in ulps(c0[0]) {
                points.push(([c, c0[1] + s * w], "boundary x1 = c0.x"));
            }
            for c in ulps(c0[1]) {
                points.push(([c0[0] + s * w, c], "boundary x2 = c0.y"));
            }
        }
        // Deep in the quadrant beyond both arms (nearer either arm, or on
        // the diagonal where they tie).
        for (a, b) in [
            (0.1, 0.1),
            (3.0, 1.0),
            (1.0, 3.0),
            (5.0, 5.0),
            (1e3, 2.0),
            (40.0, 1e4),
        ] {
            points.push(([c0[0] + a * w, c0[1] + b * w], "beyond both arms"));
        }
        // Across each arm far from the corner: edges, ulps, offsets.
        for along in [5.0 * w] {
            for edge in [t1 - 0.5 * w, t1 + 0.5 * w] {
                for o in OFFSETS {
                    points.push(([edge + o * w, c0[1] + along], "across upper arm"));
                    points.push(([edge - o * w, c0[1] + along], "across upper arm"));
                }
                for e in ulps(edge) {
                    points.push(([e, c0[1] + along], "upper arm edge"));
                }
            }
            for edge in [t2 - 0.5 * w, t2 + 0.5 * w] {
                for o in OFFSETS {
                    points.push(([c0[0] + along, edge + o * w], "across right arm"));
                    points.push(([c0[0] + along, edge - o * w], "across right arm"));
                }
            }
        }
        // Far away.
        points.push(([c0[0] - 1e5 * w, c0[1] - 1e5 * w], "far"));
        points.push(([c0[0] + 1e5 * w, c0[1] - 3e5 * w], "far"));
        points.push(([c0[0] - 2e5 * w, c0[1] + 1e5 * w], "far"));
        // Plus the same edges far along the arms.
        for edge in [t1 - 0.5 * w, t1 + 0.5 * w] {
            for e in ulps(edge) {
                points.push(([e, c0[1] + 1e3 * w], "upper arm edge, far along"));
            }
        }
        for edge in [t2 - 0.5 * w, t2 + 0.5 * w] {
            for e in ulps(edge) {
                points.push(([c0[0] + 1e3 * w, e], "right arm edge, far along"));
            }
        }
        assert!(points.len() < 230, "{}", points.len());
        while points.len() < 260 {
            let p = match rng.random_range(0..3) {
                0 => [
                    c0[0] + rng.random_range(-4.0..3.0) * w,
                    c0[1] + rng.random_range(-4.0..3.0) * w,
                ],
                1 => {
                    let a = rng.random_range(0.0..2.0 * PI);
                    let rho = r1 + (log_distance(&mut rng) - 0.5) * w;
                    [c0[0] + rho * a.cos(), c0[1] + rho * a.sin()]
                }
                _ => {
                    let a = rng.random_range(0.0..2.0 * PI);
                    let rho = log_distance(&mut rng) * w;
                    [c0[0] + rho * a.cos(), c0[1] + rho * a.sin()]
                }
            };
            points.push((p, "random"));
        }
        for (x, label) in points {
            let gamma = random_gamma_width(&mut rng) / w;
            check_point(
                &mut report,
                &q,
                &mut oracle,
                x,
                gamma,
                &format!("{label} (T = ({t1:e}, {t2:e}), τ = {w:e})"),
            );
        }
    }
    assert!(report.points >= 2000);
    report.print_and_assert();
}

/// The oracle has teeth: a sensitivity that forgets the ramp term (S = L,
/// the classic mistake) or is a hair too small is caught.
#[test]
fn oracle_catches_broken_sensitivities() {
    let (t, w) = (0.0, 1.0);
    let m = ThresholdModel { t, w };
    let mut oracle = Oracle::new(&m);
    // x three widths beyond the ramp, γθ = 0.01: S* = e^{-0.03}/θ, L = 1/(4θ).
    let x = [t + 0.5 * w + 3.0 * w, 0.0];
    let s = oracle.smooth(&x, 0.01 / w, &[GrowthKind::Exponential]).1[0].value;
    let exact = (-0.03f64).exp() / w;
    assert!(s > 0.25 / w * 3.0, "the oracle must find the ramp witness");
    assert!(s > exact * (1.0 - 1e-9) && s <= exact * (1.0 + 1e-12));
    assert!(
        exact * (1.0 - 1e-6) < s,
        "a 1e-6 deficit would go unnoticed"
    );
    // And in 2-D: a point below the right arm, two widths away.
    let m2 = TwoWayModel::new(0.0, 0.0, 1.0);
    let mut oracle2 = Oracle::new(&m2);
    let x = [m2.c0[0] + 10.0, -0.5 - 2.0];
    let s = oracle2.smooth(&x, 0.5, &[GrowthKind::Linear]).1[0].value;
    let exact = 1.0 / (1.0 + 0.5 * 2.0);
    assert!(
        s > exact * (1.0 - 1e-9) && s <= exact * (1.0 + 1e-12),
        "{s} vs {exact}"
    );
}
