//! Query sets answered by one device under one budget, and their ℓ1
//! Lipschitz constant (docs/MATH.md §9.1).
//!
//! A device answering m queries f_1..f_m with releases calibrated to one
//! global scale b (vector Laplace) loses at most L1/b per unit distance,
//! with
//!
//! ```text
//! L1 = sup_x sup_{|u|=1} Σ_j |∇f_j(x)·u|,
//! ```
//!
//! the Lipschitz constant of x ↦ (f_j(x))_j from the Euclidean metric to
//! the ℓ1 norm. [`QuerySet::l1`] returns a *certified upper bound* of L1
//! together with a numerical maximum (a lower bound) and their gap.

use crate::error::{check_point, positive_finite, Error, Result};
use crate::math::exp;
use crate::query::{GaussianKde, Query, SoftInterval, SoftThreshold};
use alloc::collections::BinaryHeap;
use alloc::format;
use alloc::string::String;
use alloc::vec::Vec;
use core::cmp::Ordering;
use core::f64::consts::PI;

/// ψ(ρ) = ρ e^{-ρ²/2}: the gradient norm of the Gaussian kernel
/// exp(-|x - t|²/(2h²)) at scaled radius ρ = |x - t|/h, in units of 1/h.
/// Increasing on [0, 1], decreasing after.
#[inline]
fn psi(rho: f64) -> f64 {
    rho * exp(-0.5 * rho * rho)
}

/// A regular grid of Gaussian-kernel queries (the cells of a density map),
/// in one dimension (a ladder of income levels) or two (a map):
///
/// ```text
/// f_j(x) = exp(-|x - t_j|² / (2h²)),   t_j = origin + (i·step_x, k·step_y)
/// ```
///
/// for i < points_x, k < points_y (index j = i·points_y + k). The *domain*
/// is the public region devices may be in (a location outside it is
/// refused); by default the grid's bounding box.
///
/// ```
/// use geopriv::map::KdeGrid;
/// // 31 × 31 cells over a 20 km square, h = one cell diagonal.
/// let grid = KdeGrid::square(20_000.0, 31)?;
/// assert_eq!(grid.len(), 961);
/// let l1 = grid.l1();
/// assert!(l1.bound >= l1.numerical && l1.gap < 0.012);
/// assert!(l1.bound * grid.bandwidth() > 10.2 && l1.bound * grid.bandwidth() < 10.45);
/// # Ok::<(), geopriv::Error>(())
/// ```
#[derive(Clone, Debug, PartialEq)]
pub struct KdeGrid {
    dim: usize,
    origin: [f64; 2],
    step: [f64; 2],
    points: [usize; 2],
    bandwidth: f64,
    domain: [f64; 4],
}

impl KdeGrid {
    /// A two-dimensional grid of `points[0] × points[1]` cells spanning
    /// `bbox = [xmin, xmax, ymin, ymax]` (ends included), bandwidth h.
    pub fn new_2d(bbox: [f64; 4], points: [usize; 2], bandwidth: f64) -> Result<Self> {
        for (name, v) in [
            ("bbox xmin", bbox[0]),
            ("bbox xmax", bbox[1]),
            ("bbox ymin", bbox[2]),
            ("bbox ymax", bbox[3]),
        ] {
            crate::error::finite(name, v)?;
        }
        let bandwidth = positive_finite("bandwidth", bandwidth)?;
        let mut step = [0.0; 2];
        for a in 0..2 {
            if points[a] < 2 {
                return Err(Error::InvalidParameter {
                    name: "points",
                    value: points[a] as f64,
                    requirement: "at least 2 per axis",
                });
            }
            step[a] = positive_finite("bbox side", bbox[2 * a + 1] - bbox[2 * a])?
                / (points[a] - 1) as f64;
        }
        // Bounded memory, and `len` = points[0]·points[1] must not overflow
        // (`--grid 18446744073709551615` panicked in `len`): at most 2^26
        // queries, the binned path's own cap on bins (bins ≥ queries).
        if points[0].saturating_mul(points[1]) > MAX_QUERIES {
            return Err(Error::InvalidParameter {
                name: "points",
                value: points[0] as f64 * points[1] as f64,
                requirement: "at most 2^26 grid points in all",
            });
        }
        Ok(Self {
            dim: 2,
            origin: [bbox[0], bbox[2]],
            step,
            points,
            bandwidth,
            domain: bbox,
        })
    }

    /// A two-dimensional grid ([`new_2d`](Self::new_2d)) whose bandwidth is
    /// one cell diagonal, h = hypot(Δx, Δy) with Δx = (xmax − xmin) /
    /// (points\[0\] − 1) and Δy likewise: the CLI's `map` default (20 km
    /// square, 61 × 61: h = hypot(20000/60, 20000/60) ≈ 471.4 m), built
    /// here once for the CLI, the benches, the examples and the tests.
    /// Refused like [`new_2d`](Self::new_2d) (fewer than 2 points per axis,
    /// a box that is not finite or has no area).
    ///
    /// ```
    /// use geopriv::map::KdeGrid;
    /// let g = KdeGrid::with_cell_diagonal([0.0, 20_000.0, 0.0, 20_000.0], [61, 61])?;
    /// assert_eq!(g.bandwidth(), f64::hypot(20_000.0 / 60.0, 20_000.0 / 60.0));
    /// assert!(KdeGrid::with_cell_diagonal([0.0, 1.0, 0.0, 1.0], [1, 61]).is_err());
    /// # Ok::<(), geopriv::Error>(())
    /// ```
    pub fn with_cell_diagonal(bbox: [f64; 4], points: [usize; 2]) -> Result<Self> {
        // max(2): fewer points are refused by new_2d, by name.
        let cell = |a: usize| (bbox[2 * a + 1] - bbox[2 * a]) / (points[a].max(2) - 1) as f64;
        // std's hypot (the platform's) where std is there: the CLI's
        // default grid always used it, so its bandwidth keeps its bits;
        // libm's without std.
        #[cfg(feature = "std")]
        let diagonal = cell(0).hypot(cell(1));
        #[cfg(not(feature = "std"))]
        let diagonal = libm::hypot(cell(0), cell(1));
        Self::new_2d(bbox, points, diagonal)
    }

    /// A square map of `side` metres (origin at 0) with `points × points`
    /// cells and h = one cell diagonal (the demo's convention).
    pub fn square(side: f64, points: usize) -> Result<Self> {
        let side = positive_finite("side", side)?;
        let cell = side / (points.max(2) - 1) as f64;
        Self::new_2d(
            [0.0, side, 0.0, side],
            [points, points],
            cell * core::f64::consts::SQRT_2,
        )
    }

    /// A one-dimensional ladder of `points` kernel queries spanning
    /// [lo, hi] (ends included), bandwidth h: the density of incomes.
    pub fn new_1d(lo: f64, hi: f64, points: usize, bandwidth: f64) -> Result<Self> {
        let mut g = Self::new_2d([lo, hi, 0.0, 1.0], [points, 2], bandwidth)?;
        g.dim = 1;
        g.points[1] = 1;
        g.step[1] = 1.0;
        g.domain[2] = 0.0;
        g.domain[3] = 0.0;
        Ok(g)
    }

    /// The same grid with another public domain (a box containing every
    /// location a device may report from; for d = 1, [lo, hi, 0, 0]).
    pub fn with_domain(mut self, domain: [f64; 4]) -> Result<Self> {
        for v in domain {
            crate::error::finite("domain", v)?;
        }
        if domain[1] < domain[0] || domain[3] < domain[2] {
            return Err(Error::InvalidParameter {
                name: "domain",
                value: domain[1] - domain[0],
                requirement: "an ordered box [xmin, xmax, ymin, ymax]",
            });
        }
        self.domain = domain;
        Ok(self)
    }

    /// Dimension d (1 or 2).
    pub fn dim(&self) -> usize {
        self.dim
    }
    /// Number of queries m.
    pub fn len(&self) -> usize {
        self.points[0] * self.points[1]
    }
    /// Never empty (at least two points per axis).
    pub fn is_empty(&self) -> bool {
        false
    }
    /// Bandwidth h.
    pub fn bandwidth(&self) -> f64 {
        self.bandwidth
    }
    /// First grid point.
    pub fn origin(&self) -> [f64; 2] {
        self.origin
    }
    /// Grid spacing per axis (1 on the unused axis of a 1-D ladder).
    pub fn step(&self) -> [f64; 2] {
        self.step
    }
    /// Points per axis (1 on the unused axis of a 1-D ladder).
    pub fn points(&self) -> [usize; 2] {
        self.points
    }
    /// The public domain [xmin, xmax, ymin, ymax].
    pub fn domain(&self) -> [f64; 4] {
        self.domain
    }

    /// Query point t_j (second coordinate 0 for d = 1).
    pub fn center(&self, j: usize) -> [f64; 2] {
        let (i, k) = (j / self.points[1], j % self.points[1]);
        [
            self.origin[0] + i as f64 * self.step[0],
            if self.dim == 1 {
                0.0
            } else {
                self.origin[1] + k as f64 * self.step[1]
            },
        ]
    }

    /// Kernel value exp(-|z|²/(2h²)) at offset z.
    #[inline]
    pub fn kernel(&self, z: [f64; 2]) -> f64 {
        let s = (z[0] * z[0] + z[1] * z[1]) / (self.bandwidth * self.bandwidth);
        exp(-0.5 * s)
    }

    /// The exact map of the true locations, F_j = (1/n) Σ_i K_h(t_j − x_i)
    /// with K_h(z) = exp(−|z|²/(2h²)) = exp(−z₀²/(2h²))·exp(−z₁²/(2h²)),
    /// the target every map estimate is measured against (docs/MATH.md
    /// §9.4). Computed separably: per location one exponential per grid
    /// line, then the products, O(n·(m₀ + m₁) + n·m) work. The locations
    /// are summed in blocks of 4,096 in order, each block's partial sum
    /// then added in block order, so the bits do not depend on the number
    /// of threads (with `std` the blocks run on all cores). A 1-D grid
    /// reads only x\[0\]. An empty slice gives zeros.
    ///
    /// ```
    /// use geopriv::map::KdeGrid;
    /// let g = KdeGrid::square(1_000.0, 11)?;
    /// let f = g.exact_map(&[[0.0, 0.0], [500.0, 500.0]]);
    /// assert_eq!(f.len(), g.len());
    /// // At t_0 = (0, 0): (1 + exp(−|(500, 500)|²/(2h²)))/2.
    /// let h = g.bandwidth();
    /// let want = (1.0 + (-(500.0f64 * 500.0 * 2.0) / (2.0 * h * h)).exp()) / 2.0;
    /// assert!((f[0] - want).abs() < 1e-12);
    /// # Ok::<(), geopriv::Error>(())
    /// ```
    pub fn exact_map(&self, xs: &[[f64; 2]]) -> Vec<f64> {
        const BLOCK: usize = 4096;
        let m = self.points;
        let (h, o, st) = (self.bandwidth, self.origin, self.step);
        let dim2 = self.dim == 2;
        let block = |chunk: &[[f64; 2]]| -> Vec<f64> {
            let mut acc = alloc::vec![0.0; m[0] * m[1]];
            let mut fx = alloc::vec![0.0; m[0]];
            let mut fy = alloc::vec![1.0; m[1]];
            for x in chunk {
                for (i, f) in fx.iter_mut().enumerate() {
                    let d = (x[0] - (o[0] + i as f64 * st[0])) / h;
                    *f = exp(-0.5 * d * d);
                }
                if dim2 {
                    for (k, f) in fy.iter_mut().enumerate() {
                        let d = (x[1] - (o[1] + k as f64 * st[1])) / h;
                        *f = exp(-0.5 * d * d);
                    }
                }
                for (row, &wx) in acc.chunks_mut(m[1]).zip(&fx) {
                    for (a, &wy) in row.iter_mut().zip(&fy) {
                        *a += wx * wy;
                    }
                }
            }
            acc
        };
        let chunks: Vec<&[[f64; 2]]> = xs.chunks(BLOCK).collect();
        // Contiguous runs of blocks, one per core; the parts come back in
        // block order whatever the number of threads.
        #[cfg(feature = "std")]
        let parts: Vec<Vec<f64>> = {
            let threads = std::thread::available_parallelism().map_or(1, |t| t.get());
            let per = chunks.len().div_ceil(threads).max(1);
            let block = &block;
            let run = |blocks: &[&[[f64; 2]]]| blocks.iter().map(|c| block(c)).collect::<Vec<_>>();
            std::thread::scope(|sc| {
                let handles: Vec<_> = chunks
                    .chunks(per)
                    .map(|r| (r, sc.spawn(move || run(r))))
                    .collect();
                handles
                    .into_iter()
                    // A thread that panicked: its run is computed here
                    // instead (same bits).
                    .flat_map(|(r, h)| h.join().unwrap_or_else(|_| run(r)))
                    .collect()
            })
        };
        #[cfg(not(feature = "std"))]
        let parts: Vec<Vec<f64>> = chunks.iter().map(|c| block(c)).collect();
        let mut total = alloc::vec![0.0; m[0] * m[1]];
        for p in parts {
            for (t, v) in total.iter_mut().zip(p) {
                *t += v;
            }
        }
        let n = xs.len().max(1) as f64;
        total.iter().map(|v| v / n).collect()
    }

    /// One query as a [`GaussianKde`] (for per-query mechanisms).
    pub fn query(&self, j: usize) -> Result<GaussianKde> {
        let c = self.center(j);
        GaussianKde::new(&c[..self.dim], self.bandwidth)
    }

    /// The canonical id of the set (exact decimal floats): reports name it
    /// and a server refuses reports for another set.
    pub fn id(&self) -> String {
        let [xmin, xmax, ymin, ymax] = self.domain;
        format!(
            "kde{}:{},{}:{},{}:{}x{}:{}:{},{},{},{}",
            self.dim,
            self.origin[0],
            self.origin[1],
            self.step[0],
            self.step[1],
            self.points[0],
            self.points[1],
            self.bandwidth,
            xmin,
            xmax,
            ymin,
            ymax
        )
    }

    /// ℓ1 constant: certified bound and numerical maximum (see [`L1Bound`]).
    ///
    /// The bound is the supremum for the *infinite* lattice t ∈ origin +
    /// step·Z^d (every term of Σ_j |∇f_j·u| is non-negative, so adding
    /// lattice points only increases it; the lattice sum is periodic, so
    /// one unit cell suffices). For fixed x the sup over u is computed
    /// exactly (a sweep over sign patterns); a branch-and-bound over boxes
    /// of x bounds it on each box by its value at the centre plus the
    /// half-diagonal times a Lipschitz constant (Σ_j of the largest Hessian
    /// norm of f_j on the box). Lattice
    /// points farther than R0 = 7 bandwidths are bounded in closed form
    /// (the tail integral in docs/MATH.md §9.1). It stops when the best
    /// box bound is within 1e-2 (relative) of the best point value.
    pub fn l1(&self) -> L1Bound {
        let bound = self.l1_bound();
        let numerical = self.dense_l1_max();
        L1Bound {
            bound,
            numerical,
            gap: bound / numerical - 1.0,
        }
    }

    /// The certified bound of [`l1`](Self::l1) alone (sup over x of
    /// Σ_j |∇f_j(x)·u| for the infinite lattice), without the numerical
    /// maximum over the finite grid, which costs several times more (the
    /// planner's vector-Laplace prediction 2(L1/ε)²/n needs only this).
    pub fn l1_bound(&self) -> f64 {
        let h = self.bandwidth;
        (if self.dim == 1 {
            lattice_l1_1d(self.step[0] / h)
        } else {
            lattice_l1_2d_known(self.step[0] / h, self.step[1] / h)
        }) / h
    }

    /// Σ_j |∇f_j(x)·u| for the finite grid.
    pub fn gradient_l1(&self, x: [f64; 2], u: [f64; 2]) -> f64 {
        let h2 = self.bandwidth * self.bandwidth;
        (0..self.len())
            .map(|j| {
                let t = self.center(j);
                let z = [x[0] - t[0], x[1] - t[1]];
                let dot = z[0] * u[0] + if self.dim == 2 { z[1] * u[1] } else { 0.0 };
                self.kernel(z) * dot.abs() / h2
            })
            .sum()
    }

    /// G(x) = sup_u Σ_j |∇f_j(x)·u| for the finite grid, exactly.
    pub fn gradient_l1_sup(&self, x: [f64; 2]) -> f64 {
        let h = self.bandwidth;
        let mut g: Vec<[f64; 2]> = (0..self.len())
            .map(|j| {
                let t = self.center(j);
                let z = [x[0] - t[0], if self.dim == 2 { x[1] - t[1] } else { 0.0 }];
                let k = self.kernel(z) / (h * h);
                [z[0] * k, z[1] * k]
            })
            .collect();
        if self.dim == 1 {
            g.iter().map(|v| v[0].abs()).sum()
        } else {
            sup_abs_projection(&mut g)
        }
    }

    /// Dense numerical maximum of G over x in the central cell of the
    /// finite grid (17 × 17 points; exact in the direction u).
    fn dense_l1_max(&self) -> f64 {
        let ci = (self.points[0] - 1) / 2;
        let ck = (self.points[1] - 1) / 2;
        let base = self.center(ci * self.points[1] + ck);
        let steps = 16;
        let mut best = 0.0f64;
        for a in 0..=steps {
            for b in 0..=(if self.dim == 2 { steps } else { 0 }) {
                let x = [
                    base[0] + self.step[0] * a as f64 / steps as f64,
                    base[1] + self.step[1] * b as f64 / steps as f64,
                ];
                best = best.max(self.gradient_l1_sup(x));
            }
        }
        best
    }

    /// Whether x is a finite point of the public domain (d coordinates).
    pub fn check_location(&self, x: &[f64]) -> Result<()> {
        check_point(x, self.dim)?;
        let inside = x[0] >= self.domain[0]
            && x[0] <= self.domain[1]
            && (self.dim == 1 || (x[1] >= self.domain[2] && x[1] <= self.domain[3]));
        if inside {
            Ok(())
        } else {
            Err(Error::InvalidParameter {
                name: "location",
                value: x[0],
                requirement: "inside the map's public domain",
            })
        }
    }
}

/// The ℓ1 Lipschitz constant of a query set: `bound` is a certified upper
/// bound (privacy uses it), `numerical` the largest value found by a dense
/// evaluation (a lower bound of the true L1), `gap = bound/numerical - 1`.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct L1Bound {
    /// Certified upper bound of L1.
    pub bound: f64,
    /// Dense numerical maximum (a lower bound of L1).
    pub numerical: f64,
    /// Relative gap bound/numerical - 1.
    pub gap: f64,
}

/// Lattice points farther than R0 bandwidths are bounded in closed form.
/// Most queries of one grid (2^26, as many as the binned path's bins).
const MAX_QUERIES: usize = 1 << 26;

const R0: f64 = 7.0;
/// Relative stopping tolerance of the branch-and-bound.
const BNB_TOL: f64 = 1e-2;
/// Box budget of the branch-and-bound (the bound stays certified if hit).
const BNB_MAX_BOXES: usize = 60_000;
/// Relative margin for the rounding of the interval sums.
const ROUNDING: f64 = 1e-12;

/// Closed-form bound of Σ over lattice points at scaled distance > R0
/// (cells of area `area` (in h² units), diagonal `diag`): each such term is
/// at most the cell average of ψ((|z| - diag/2)) (ψ decreasing there), so
/// the sum is at most (2π/area) ∫_{s0}^∞ ψ(s) (s + diag/2) ds with
/// s0 = R0 - diag; in d = 1 (cells of length `area`) (2/area) ∫ ψ(s) ds.
fn lattice_tail(area: f64, diag: f64, dim: usize) -> f64 {
    let s0 = (R0 - diag).max(1.0);
    let e = exp(-0.5 * s0 * s0);
    if dim == 1 {
        2.0 * e / area
    } else {
        // ∫ s² e^{-s²/2} = s0 e^{-s0²/2} + √(π/2) erfc(s0/√2) <= (s0 + 1/s0) e^{-s0²/2}.
        2.0 * PI / area * ((s0 + 1.0 / s0) * e + 0.5 * diag * e)
    }
}

#[derive(Clone, Copy, Debug)]
struct Cand {
    upper: f64,
    lo: [f64; 3],
    hi: [f64; 3],
}
impl PartialEq for Cand {
    fn eq(&self, o: &Self) -> bool {
        self.upper.total_cmp(&o.upper) == Ordering::Equal
    }
}
impl Eq for Cand {}
impl PartialOrd for Cand {
    fn partial_cmp(&self, o: &Self) -> Option<Ordering> {
        Some(self.cmp(o))
    }
}
impl Ord for Cand {
    fn cmp(&self, o: &Self) -> Ordering {
        self.upper.total_cmp(&o.upper)
    }
}

/// Generic branch-and-bound maximisation of a function on a box of up to
/// three dimensions, given an interval upper bound and a point evaluation.
/// Returns the certified bound (the largest remaining box bound).
fn branch_and_bound<U, P>(
    lo: [f64; 3],
    hi: [f64; 3],
    dims: usize,
    scale: [f64; 3],
    upper: U,
    point: P,
) -> f64
where
    U: Fn(&[f64; 3], &[f64; 3]) -> f64,
    P: Fn(&[f64; 3]) -> f64,
{
    let mut heap = BinaryHeap::new();
    let mut best = 0.0f64;
    // Initial partition: 4 pieces per dimension.
    let pieces = 4usize;
    let total = pieces.pow(dims as u32);
    for idx in 0..total {
        let mut l = lo;
        let mut h = hi;
        let mut r = idx;
        for d in 0..dims {
            let p = r % pieces;
            r /= pieces;
            let w = (hi[d] - lo[d]) / pieces as f64;
            l[d] = lo[d] + w * p as f64;
            h[d] = if p + 1 == pieces {
                hi[d]
            } else {
                lo[d] + w * (p + 1) as f64
            };
        }
        let mid = mid3(&l, &h);
        best = best.max(point(&mid));
        heap.push(Cand {
            upper: certified(upper(&l, &h)),
            lo: l,
            hi: h,
        });
    }
    let mut boxes = total;
    while let Some(c) = heap.pop() {
        if c.upper <= best * (1.0 + BNB_TOL) || boxes >= BNB_MAX_BOXES {
            return c.upper.max(best);
        }
        // Split the widest dimension (relative to its scale).
        let mut d = 0;
        for k in 1..dims {
            if (c.hi[k] - c.lo[k]) / scale[k] > (c.hi[d] - c.lo[d]) / scale[d] {
                d = k;
            }
        }
        let m = 0.5 * (c.lo[d] + c.hi[d]);
        for half in 0..2 {
            let mut l = c.lo;
            let mut h = c.hi;
            if half == 0 {
                h[d] = m;
            } else {
                l[d] = m;
            }
            best = best.max(point(&mid3(&l, &h)));
            heap.push(Cand {
                upper: certified(upper(&l, &h)),
                lo: l,
                hi: h,
            });
            boxes += 1;
        }
    }
    best
}

/// A box bound as an upper bound: NaN (an overflow inside it) is +∞, never
/// a value that `f64::max` would drop in favour of the point values (a NaN
/// bound made the "certified" L1 of a far lattice 0: attack10).
fn certified(upper: f64) -> f64 {
    if upper.is_nan() {
        f64::INFINITY
    } else {
        upper
    }
}

fn mid3(l: &[f64; 3], h: &[f64; 3]) -> [f64; 3] {
    [
        0.5 * (l[0] + h[0]),
        0.5 * (l[1] + h[1]),
        0.5 * (l[2] + h[2]),
    ]
}

/// sup over ρ in [a, b] of the Hessian norm of exp(-ρ²/2) (units of h):
/// H(ρ) = max(1, |ρ² - 1|) e^{-ρ²/2}, decreasing on [0, √2], increasing
/// on [√2, √3], decreasing after.
fn hessian_sup(a: f64, b: f64) -> f64 {
    // Beyond r ≈ 1.34e154, r² overflows and (∞)·exp(−∞) would be NaN: the
    // value there is 0 (it already is 0 in floating point from r ≈ 40), so
    // say so; a NaN box bound made a far lattice's "certified" L1 0
    // (attack10, docs/ATTACK-10.md).
    let hf = |r: f64| {
        let r2 = r * r;
        if r2 == f64::INFINITY {
            return 0.0;
        }
        (r2 - 1.0).abs().max(1.0) * exp(-0.5 * r2)
    };
    hf(a).max(hf(libm::sqrt(3.0).clamp(a, b)))
}

/// G(x) = sup_{|u|=1} Σ_j |g_j·u| for vectors g_j in the plane, exactly:
/// G is the largest |Σ_j σ_j g_j| over the sign patterns σ_j = sign(g_j·u)
/// realised by some u (any σ gives |S_σ| <= G, and the optimal u's
/// pattern attains it). The patterns are swept in angle order.
fn sup_abs_projection(g: &mut [[f64; 2]]) -> f64 {
    // Put every vector in the upper half-plane (|g·u| is unchanged).
    let mut events: Vec<(f64, usize)> = Vec::with_capacity(g.len());
    let mut s = [0.0f64; 2];
    for (j, v) in g.iter_mut().enumerate() {
        if v[1] < 0.0 || (v[1] == 0.0 && v[0] < 0.0) {
            *v = [-v[0], -v[1]];
        }
        let beta = libm::atan2(v[1], v[0]); // in [0, π]
                                            // At θ = 0 the sign is + for β < π/2; it flips when θ passes |β - π/2|'s partner.
        if beta < 0.5 * PI {
            s[0] += v[0];
            s[1] += v[1];
            events.push((beta + 0.5 * PI, j));
        } else {
            s[0] -= v[0];
            s[1] -= v[1];
            events.push((beta - 0.5 * PI, j));
        }
    }
    events.sort_by(|a, b| a.0.total_cmp(&b.0));
    let mut best = libm::hypot(s[0], s[1]);
    for (beta_event, j) in events {
        let v = g[j];
        // Vectors with β < π/2 go + -> -, the others - -> +.
        let sign = if beta_event >= 0.5 * PI { -2.0 } else { 2.0 };
        s[0] += sign * v[0];
        s[1] += sign * v[1];
        best = best.max(libm::hypot(s[0], s[1]));
    }
    best
}

/// Certified sup of Σ_j ψ(|x - t_j|) over x for the 1-D lattice step·Z
/// (units of h): branch-and-bound over x with the first-order bound
/// G(c) + (half-width)·Σ_j sup|f_j''| on each interval.
fn lattice_l1_1d(step: f64) -> f64 {
    let reach = libm::ceil((R0 + step) / step) as i64 + 1;
    let pts: Vec<f64> = (-reach..=reach).map(|a| a as f64 * step).collect();
    let tail = lattice_tail(step, step, 1);
    let point = |x: &[f64; 3]| pts.iter().map(|&t| psi((x[0] - t).abs())).sum::<f64>();
    let upper = |l: &[f64; 3], h: &[f64; 3]| {
        let c = 0.5 * (l[0] + h[0]);
        let half = 0.5 * (h[0] - l[0]);
        let lip: f64 = pts
            .iter()
            .map(|&t| {
                let (a, b) = if t < l[0] {
                    (l[0] - t, h[0] - t)
                } else if t > h[0] {
                    (t - h[0], t - l[0])
                } else {
                    (0.0, (t - l[0]).max(h[0] - t))
                };
                hessian_sup(a, b)
            })
            .sum();
        (point(&[c, 0.0, 0.0]) + half * lip + tail) * (1.0 + ROUNDING)
    };
    branch_and_bound([0.0; 3], [0.5 * step, 0.0, 0.0], 1, [1.0; 3], upper, point)
}

/// Certified sup over x of G(x) = sup_u Σ_j |∇f_j(x)·u| for the lattice
/// (sx Z) × (sy Z) (units of h): G is computed exactly at box centres
/// ([`sup_abs_projection`]) and is Lipschitz with constant Σ_j sup_box
/// ||Hess f_j||, so each box is bounded by G(c) + (half-diagonal)·Σ_j.
/// [`lattice_l1_2d`] of the ratios step/h that the maps' default (h one
/// cell diagonal on a square grid) produces, as (sx, sy, value) bits: the
/// branch-and-bound is a pure function of (sx, sy) and cost about a
/// tenth of the CPU of `geopriv map aggregate`'s whole planner default at
/// εh >= 10 (BENCHMARKS.md, "Branch mapspeed2"). Every square grid of
/// 2..=201 points on sides of 1, 5, 10, 20, 30, 50 and 100 km (h the cell
/// diagonal) gives one of these two bit patterns of 1/√2; the test
/// `known_lattice_l1_values_are_the_computed_ones` recomputes both, bit
/// for bit.
const KNOWN_LATTICE_L1_2D: [(u64, u64, u64); 2] = [
    (0x3fe6a09e667f3bcc, 0x3fe6a09e667f3bcc, 0x4024b1f13e13b7f4),
    (0x3fe6a09e667f3bcd, 0x3fe6a09e667f3bcd, 0x4024b1e8b011bd13),
];

/// [`lattice_l1_2d`], from [`KNOWN_LATTICE_L1_2D`] where (sx, sy) is in it
/// (the same bits: a stored result, not an approximation).
fn lattice_l1_2d_known(sx: f64, sy: f64) -> f64 {
    KNOWN_LATTICE_L1_2D
        .iter()
        .find(|(a, b, _)| *a == sx.to_bits() && *b == sy.to_bits())
        .map_or_else(|| lattice_l1_2d(sx, sy), |e| f64::from_bits(e.2))
}

/// Most lattice points (in the bounding box, (2r_x + 1)(2r_y + 1)) that
/// [`lattice_l1_2d`] sums: 2^21, a step of about h/103 on a square grid.
/// Its branch and bound revisits every point, so its time and memory grow
/// as (h/step)² and more: 7.4 s and 91 MB at h/step = 100 on the default
/// grid, 13.4 GB and an allocation abort at h/step = 3·10⁶ (attack6,
/// docs/ATTACK-6.md O3). Beyond the cap the bound is +∞, an upper bound
/// that always holds: vector Laplace is then refused (no finite scale) and
/// the planner ranks the other maps.
const MAX_LATTICE_L1_POINTS: f64 = (1u64 << 21) as f64;

fn lattice_l1_2d(sx: f64, sy: f64) -> f64 {
    let diag = libm::hypot(sx, sy);
    let (bx, by) = (
        libm::ceil((R0 + diag) / sx) + 1.0,
        libm::ceil((R0 + diag) / sy) + 1.0,
    );
    let points = (2.0 * bx + 1.0) * (2.0 * by + 1.0);
    if points.is_nan() || points > MAX_LATTICE_L1_POINTS {
        return f64::INFINITY;
    }
    let (rx, ry) = (bx as i64, by as i64);
    let mut pts = Vec::new();
    for a in -rx..=rx {
        for b in -ry..=ry {
            let t = [a as f64 * sx, b as f64 * sy];
            if libm::hypot(t[0], t[1]) <= R0 + diag {
                pts.push(t);
            }
        }
    }
    let tail = lattice_tail(sx * sy, diag, 2);
    let point = |x: &[f64; 3]| {
        let mut g: Vec<[f64; 2]> = pts
            .iter()
            .map(|t| {
                let z = [x[0] - t[0], x[1] - t[1]];
                let e = exp(-0.5 * (z[0] * z[0] + z[1] * z[1]));
                [z[0] * e, z[1] * e]
            })
            .collect();
        sup_abs_projection(&mut g)
    };
    let upper = |l: &[f64; 3], h: &[f64; 3]| {
        let c = [0.5 * (l[0] + h[0]), 0.5 * (l[1] + h[1]), 0.0];
        let half = 0.5 * libm::hypot(h[0] - l[0], h[1] - l[1]);
        let mut lip = 0.0;
        for t in &pts {
            let dx = (l[0] - t[0]).max(t[0] - h[0]).max(0.0);
            let dy = (l[1] - t[1]).max(t[1] - h[1]).max(0.0);
            let fx = (t[0] - l[0]).abs().max((h[0] - t[0]).abs());
            let fy = (t[1] - l[1]).abs().max((h[1] - t[1]).abs());
            lip += hessian_sup(libm::hypot(dx, dy), libm::hypot(fx, fy));
        }
        (point(&c) + half * lip + tail) * (1.0 + ROUNDING)
    };
    // The lattice sum is invariant under x -> -x and under reflections of
    // an axis through a lattice point (the sup over u absorbs the
    // reflected direction), so a quarter cell covers everything.
    branch_and_bound(
        [0.0; 3],
        [0.5 * sx, 0.5 * sy, 0.0],
        2,
        [1.0; 3],
        upper,
        point,
    )
}

/// A soft step query of a ladder: a threshold or an interval (1-D).
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum RampQuery {
    /// "share with x > T".
    Threshold(SoftThreshold),
    /// "share with a <= x <= b".
    Interval(SoftInterval),
}

impl RampQuery {
    /// f(x).
    pub fn value(&self, x: f64) -> Result<f64> {
        match self {
            RampQuery::Threshold(q) => q.value(&[x]),
            RampQuery::Interval(q) => q.value(&[x]),
        }
    }
    /// The ramps (intervals where |f'| = 1/θ), as (start, end, 1/θ).
    fn ramps(&self) -> Vec<(f64, f64, f64)> {
        match self {
            RampQuery::Threshold(q) => {
                let (t, w) = (q.threshold(), q.width());
                alloc::vec![(t - 0.5 * w, t + 0.5 * w, 1.0 / w)]
            }
            RampQuery::Interval(q) => {
                let w = q.width();
                alloc::vec![
                    (q.lower() - 0.5 * w, q.lower() + 0.5 * w, 1.0 / w),
                    (q.upper() - 0.5 * w, q.upper() + 0.5 * w, 1.0 / w),
                ]
            }
        }
    }
    fn id(&self) -> String {
        match self {
            RampQuery::Threshold(q) => format!("t{},{}", q.threshold(), q.width()),
            RampQuery::Interval(q) => format!("i{},{},{}", q.lower(), q.upper(), q.width()),
        }
    }
}

/// A ladder of soft thresholds or intervals over one public domain
/// [lo, hi] (e.g. incomes in dollars).
///
/// L1 is exact: Σ_j |f_j'(x)| is piecewise constant, the sum of 1/θ over
/// the ramps that contain x, so L1 is the largest such sum over the open
/// overlaps of ramps (a sweep over the sorted ramp ends). For disjoint
/// ramps of width θ, L1 = 1/θ.
///
/// ```
/// use geopriv::map::{RampLadder, RampQuery};
/// use geopriv::SoftThreshold;
/// let ladder = RampLadder::new(
///     [10e3, 100e3, 500e3].iter()
///         .map(|&t| Ok(RampQuery::Threshold(SoftThreshold::new(t, 2e3)?)))
///         .collect::<geopriv::Result<Vec<_>>>()?,
///     [0.0, 2e6],
/// )?;
/// assert_eq!(ladder.l1().bound, 1.0 / 2e3);
/// # Ok::<(), geopriv::Error>(())
/// ```
#[derive(Clone, Debug, PartialEq)]
pub struct RampLadder {
    queries: Vec<RampQuery>,
    domain: [f64; 2],
}

impl RampLadder {
    /// A ladder of at least one query over the public domain [lo, hi].
    pub fn new(queries: Vec<RampQuery>, domain: [f64; 2]) -> Result<Self> {
        if queries.is_empty() {
            return Err(Error::InvalidParameter {
                name: "queries",
                value: 0.0,
                requirement: "at least one query",
            });
        }
        crate::error::finite("domain lo", domain[0])?;
        crate::error::finite("domain hi", domain[1])?;
        if domain[1] < domain[0] {
            return Err(Error::InvalidParameter {
                name: "domain hi",
                value: domain[1],
                requirement: ">= domain lo",
            });
        }
        Ok(Self { queries, domain })
    }
    /// The queries.
    pub fn queries(&self) -> &[RampQuery] {
        &self.queries
    }
    /// Number of queries.
    pub fn len(&self) -> usize {
        self.queries.len()
    }
    /// Never empty.
    pub fn is_empty(&self) -> bool {
        false
    }
    /// Public domain [lo, hi].
    pub fn domain(&self) -> [f64; 2] {
        self.domain
    }
    /// Exact L1 (bound = numerical, gap 0).
    pub fn l1(&self) -> L1Bound {
        let mut events: Vec<(f64, bool, f64)> = Vec::new();
        for q in &self.queries {
            for (a, b, s) in q.ramps() {
                events.push((a, true, s));
                events.push((b, false, s));
            }
        }
        // Ends before starts at equal positions: touching ramps do not overlap.
        events.sort_by(|x, y| x.0.total_cmp(&y.0).then(x.1.cmp(&y.1)));
        let (mut cur, mut best) = (0.0f64, 0.0f64);
        for (_, start, s) in events {
            if start {
                cur += s;
                best = best.max(cur);
            } else {
                cur -= s;
            }
        }
        L1Bound {
            bound: best,
            numerical: best,
            gap: 0.0,
        }
    }
    /// Canonical id.
    pub fn id(&self) -> String {
        let mut s = format!("ramps:{},{}", self.domain[0], self.domain[1]);
        for q in &self.queries {
            s.push(':');
            s.push_str(&q.id());
        }
        s
    }
    /// Check x is a finite point of the domain.
    pub fn check_location(&self, x: &[f64]) -> Result<()> {
        check_point(x, 1)?;
        if x[0] >= self.domain[0] && x[0] <= self.domain[1] {
            Ok(())
        } else {
            Err(Error::InvalidParameter {
                name: "location",
                value: x[0],
                requirement: "inside the ladder's public domain",
            })
        }
    }
}

/// A set of queries a device answers under one per-device budget.
#[derive(Clone, Debug, PartialEq)]
pub enum QuerySet {
    /// Gaussian kernel cells on a regular grid (maps, 1-D or 2-D).
    Kde(KdeGrid),
    /// Soft thresholds / intervals (1-D ladders).
    Ramps(RampLadder),
    /// Soft memberships of districts (2-D regions, docs/MATH.md §13.6).
    #[cfg(feature = "std")]
    Districts(super::districts::DistrictSet),
}

impl QuerySet {
    /// Dimension of a location.
    pub fn dim(&self) -> usize {
        match self {
            QuerySet::Kde(g) => g.dim(),
            QuerySet::Ramps(_) => 1,
            #[cfg(feature = "std")]
            QuerySet::Districts(_) => 2,
        }
    }
    /// Number of queries m.
    pub fn len(&self) -> usize {
        match self {
            QuerySet::Kde(g) => g.len(),
            QuerySet::Ramps(r) => r.len(),
            #[cfg(feature = "std")]
            QuerySet::Districts(d) => d.len(),
        }
    }
    /// Never empty.
    pub fn is_empty(&self) -> bool {
        false
    }
    /// Canonical id of the set.
    pub fn id(&self) -> String {
        match self {
            QuerySet::Kde(g) => g.id(),
            QuerySet::Ramps(r) => r.id(),
            #[cfg(feature = "std")]
            QuerySet::Districts(d) => d.id(),
        }
    }
    /// Certified ℓ1 Lipschitz constant.
    pub fn l1(&self) -> L1Bound {
        match self {
            QuerySet::Kde(g) => g.l1(),
            QuerySet::Ramps(r) => r.l1(),
            #[cfg(feature = "std")]
            QuerySet::Districts(d) => d.l1(),
        }
    }
    /// The certified ℓ1 bound alone: `l1().bound`, without a kernel
    /// grid's numerical maximum (see [`KdeGrid::l1_bound`]).
    pub fn l1_bound(&self) -> f64 {
        match self {
            QuerySet::Kde(g) => g.l1_bound(),
            _ => self.l1().bound,
        }
    }
    /// Largest single-query global Lipschitz constant.
    pub fn max_global_lipschitz(&self) -> f64 {
        match self {
            QuerySet::Kde(g) => exp(-0.5) / g.bandwidth(),
            QuerySet::Ramps(r) => r
                .queries()
                .iter()
                .map(|q| match q {
                    RampQuery::Threshold(t) => 1.0 / t.width(),
                    RampQuery::Interval(i) => 1.0 / i.width(),
                })
                .fold(0.0, f64::max),
            #[cfg(feature = "std")]
            QuerySet::Districts(d) => 1.0 / d.width(),
        }
    }
    /// f_j(x) (x checked: d finite coordinates).
    pub fn value(&self, j: usize, x: &[f64]) -> Result<f64> {
        check_point(x, self.dim())?;
        match self {
            QuerySet::Kde(g) => {
                let t = g.center(j);
                let y = if g.dim() == 2 { x[1] } else { 0.0 };
                Ok(g.kernel([x[0] - t[0], y - t[1]]))
            }
            QuerySet::Ramps(r) => r.queries()[j].value(x[0]),
            #[cfg(feature = "std")]
            QuerySet::Districts(d) => d.value(j, x),
        }
    }
    /// All values f_1(x)..f_m(x).
    pub fn values(&self, x: &[f64]) -> Result<Vec<f64>> {
        (0..self.len()).map(|j| self.value(j, x)).collect()
    }
    /// Refuse a location that is not finite, has the wrong dimension or is
    /// outside the public domain.
    pub fn check_location(&self, x: &[f64]) -> Result<()> {
        match self {
            QuerySet::Kde(g) => g.check_location(x),
            QuerySet::Ramps(r) => r.check_location(x),
            #[cfg(feature = "std")]
            QuerySet::Districts(d) => d.check_location(x),
        }
    }
    /// Run `f` with query j as a [`Query`] trait object.
    pub fn with_query<T>(&self, j: usize, f: impl FnOnce(&dyn Query) -> Result<T>) -> Result<T> {
        match self {
            QuerySet::Kde(g) => f(&g.query(j)?),
            QuerySet::Ramps(r) => match &r.queries()[j] {
                RampQuery::Threshold(q) => f(q),
                RampQuery::Interval(q) => f(q),
            },
            #[cfg(feature = "std")]
            QuerySet::Districts(d) => f(d.regions().get(j).ok_or(Error::InvalidParameter {
                name: "district index",
                value: j as f64,
                requirement: "below the number of districts",
            })?),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// attack6 (docs/ATTACK-6.md O3): a step far below the bandwidth made
    /// the lattice sum allocate without bound (13.4 GB at h = 10^9 m on the
    /// default grid, then an allocation abort). Beyond the cap the bound is
    /// +∞ (still an upper bound) and returned at once; the planner still
    /// plans, and vector Laplace is refused at construction.
    #[test]
    fn a_step_far_below_the_bandwidth_has_an_infinite_bound_at_once() {
        let g = KdeGrid::new_2d([0.0, 20e3, 0.0, 20e3], [61, 61], 1e9).unwrap();
        assert_eq!(g.l1_bound(), f64::INFINITY);
        let set = QuerySet::Kde(g);
        let p = crate::map::plan(&set, 1e-9, 1000, None).unwrap();
        assert!(!p.pick().name.starts_with("vector"), "{}", p.line);
        assert!(
            crate::map::MapRelease::new(set, crate::map::MapMechanism::VectorLaplace, 1e-9)
                .is_err()
        );
        // Under the cap (h/step = 30) the bound is finite as before.
        let step = 20_000.0 / 60.0;
        let g = KdeGrid::new_2d([0.0, 20e3, 0.0, 20e3], [61, 61], 30.0 * step).unwrap();
        assert!(g.l1_bound().is_finite());
    }

    /// attack10 (docs/ATTACK-10.md, finding 1): with the step beyond about
    /// 1.34e154 bandwidths, r² overflowed in the Hessian bound, every box
    /// bound near a lattice point was NaN, and `f64::max` dropped it in
    /// favour of the point values (all 0 that far out): a "certified" L1 of
    /// 0, so vector Laplace added no noise and a device at a grid point
    /// sent that cell as 1. Every grid's bound must be at least the
    /// gradient of one kernel, e^{-1/2}/h (or +∞, still an upper bound).
    #[test]
    fn a_step_far_above_the_bandwidth_keeps_an_upper_bound() {
        for h in [1e-10, 1e-153, 1e-154, 1e-160, 1e-200, 1e-300] {
            let one_kernel = 0.6 / h;
            let g = KdeGrid::new_2d([0.0, 1.0, 0.0, 1.0], [2, 2], h).unwrap();
            let b = g.l1_bound();
            assert!(b >= one_kernel, "2-D, h = {h:e}: bound {b}");
            assert_eq!(g.l1().bound.to_bits(), b.to_bits());
            let g = KdeGrid::new_1d(0.0, 1.0, 2, h).unwrap();
            let b = g.l1_bound();
            assert!(b >= one_kernel, "1-D, h = {h:e}: bound {b}");
        }
    }

    #[test]
    fn known_lattice_l1_values_are_the_computed_ones() {
        for (a, b, v) in KNOWN_LATTICE_L1_2D {
            let (sx, sy) = (f64::from_bits(a), f64::from_bits(b));
            assert_eq!(lattice_l1_2d(sx, sy).to_bits(), v, "{sx} {sy}");
        }
        // The CLI's default grid (20 km, 61 x 61, h one cell diagonal) is in
        // the table, and a ratio outside it is computed.
        let g = KdeGrid::with_cell_diagonal([0.0, 20e3, 0.0, 20e3], [61, 61]).unwrap();
        let (sx, sy) = (g.step[0] / g.bandwidth, g.step[1] / g.bandwidth);
        assert!(KNOWN_LATTICE_L1_2D
            .iter()
            .any(|e| (e.0, e.1) == (sx.to_bits(), sy.to_bits())));
        assert_eq!(lattice_l1_2d_known(0.5, 0.5), lattice_l1_2d(0.5, 0.5));
    }

    /// Attack: huge grids (`geopriv map aggregate --grid 18446744073709551615`
    /// panicked with a multiply overflow in `len`). Refused with a typed
    /// error; the largest allowed grid still builds.
    #[test]
    fn huge_grids_are_refused_not_overflowed() {
        for p in [usize::MAX, 1 << 32, (1 << 13) + 1] {
            assert!(matches!(
                KdeGrid::new_2d([0.0, 1.0, 0.0, 1.0], [p, p], 0.1),
                Err(Error::InvalidParameter { name: "points", .. })
            ));
            assert!(KdeGrid::square(1.0, p).is_err());
        }
        assert!(KdeGrid::new_2d([0.0, 1.0, 0.0, 1.0], [usize::MAX, 2], 0.1).is_err());
        assert!(KdeGrid::new_1d(0.0, 1.0, usize::MAX, 0.1).is_err());
        let g = KdeGrid::new_2d([0.0, 1.0, 0.0, 1.0], [1 << 13, 1 << 13], 0.1).unwrap();
        assert_eq!(g.len(), 1 << 26);
    }

    #[test]
    fn demo_grid_l1_matches_spec_and_is_tight() {
        // Square cells, h = diagonal: the continuum value is
        // 4·√(π/2)·h²/A ≈ 10.03 per h; the lattice adds about 2%.
        let g = KdeGrid::square(20_000.0, 31).unwrap();
        let l = g.l1();
        let h = g.bandwidth();
        // The bound alone (the planner's) is the same number.
        assert_eq!(g.l1_bound().to_bits(), l.bound.to_bits());
        assert_eq!(
            QuerySet::Kde(g.clone()).l1_bound().to_bits(),
            l.bound.to_bits()
        );
        assert!(l.bound >= l.numerical);
        assert!(l.bound * h > 10.2 && l.bound * h < 10.45, "{l:?}");
        assert!(l.gap < 1.2e-2, "{l:?}");
        // The airports' box (about 1.9 : 1 in Web Mercator metres): the
        // spec's 12.4 per h.
        let (w, ht) = (6.46e6, 3.39e6);
        let g =
            KdeGrid::new_2d([0.0, w, 0.0, ht], [31, 31], (w / 30.0f64).hypot(ht / 30.0)).unwrap();
        let l = g.l1();
        assert!(
            l.bound * g.bandwidth() > 12.3 && l.bound * g.bandwidth() < 12.9,
            "{l:?}"
        );
    }

    #[test]
    fn one_dimensional_kde_ladder_l1() {
        let g = KdeGrid::new_1d(0.0, 100.0, 11, 10.0).unwrap();
        let l = g.l1();
        assert!(l.bound >= l.numerical && l.gap < 1.2e-2, "{l:?}");
        // A single far-apart kernel would give e^{-1/2}/h.
        let wide = KdeGrid::new_1d(0.0, 1000.0, 2, 1.0).unwrap().l1();
        assert!(
            wide.bound >= (-0.5f64).exp() && wide.bound < 1.011 * (-0.5f64).exp(),
            "{wide:?}"
        );
    }

    #[test]
    fn coarse_bandwidth_grid_l1_bounded_by_sum_of_gradients() {
        // h well below the spacing: the first-order bound needs many boxes
        // and stops at its box budget; it stays an upper bound.
        let g = KdeGrid::new_2d([0.0, 10.0, 0.0, 10.0], [11, 11], 0.3).unwrap();
        let l = g.l1();
        assert!(l.bound >= l.numerical && l.gap < 0.5, "{l:?}");
    }

    #[test]
    fn ramp_ladder_l1_is_exact() {
        let th = |t: f64, w: f64| RampQuery::Threshold(SoftThreshold::new(t, w).unwrap());
        let disjoint = RampLadder::new(vec![th(0.0, 1.0), th(5.0, 1.0)], [-10.0, 10.0]).unwrap();
        assert_eq!(disjoint.l1().bound, 1.0);
        let overlapping = RampLadder::new(vec![th(0.0, 2.0), th(0.5, 1.0)], [-10.0, 10.0]).unwrap();
        assert_eq!(overlapping.l1().bound, 1.5);
        let touching = RampLadder::new(vec![th(0.0, 1.0), th(1.0, 1.0)], [-10.0, 10.0]).unwrap();
        assert_eq!(touching.l1().bound, 1.0);
    }

    #[test]
    fn locations_are_checked() {
        let g = KdeGrid::square(1000.0, 5).unwrap();
        assert!(g.check_location(&[10.0, 10.0]).is_ok());
        assert!(g.check_location(&[-1.0, 10.0]).is_err());
        assert!(g.check_location(&[f64::NAN, 10.0]).is_err());
        assert!(g.check_location(&[1.0]).is_err());
    }
}
