//! Exact enumeration of the implemented release (docs/MATH.md §8.1).
//!
//! A release is a deterministic function of the random integers the
//! sampler draws. For the location–scale mechanisms the noise magnitude is
//! a monotone function of one uniform, and that uniform is a monotone
//! function of an integer key ([`KeyLaw`]): so the set of keys that land in
//! an output cell c is an interval, found by binary search, and P_x(c) is
//! the probability of that interval — a *count* of integers, weighted by
//! the key probabilities, with no sampling error. (The arithmetic may be
//! non-monotone by an ulp or so; the keys within [`WINDOW`] of each
//! boundary are counted one by one.)
//!
//! Over a pair (x, x') the tool compares P_x(c) with P_x'(c) cell by cell:
//!
//! ```text
//! η_measured = max_c ln(P_x(c)/P_x'(c)) - ε d                    (over the evaluated cells)
//! δ_eff      = Σ_c max(0, P_x(c) - e^{εd} P_x'(c))               (the δ the release really has)
//! δ_fp       = Σ_{c: ln(P_x(c)/P_x'(c)) > εd + η} P_x(c) + P(|Z| > z_max)
//! ```
//!
//! in both directions. The 2E+1 cells nearest f(x) are enumerated; the
//! others are importance-sampled with the proposal "sign fair, ln|z|
//! uniform on [z_E, z_reach]", whose mass Q(c) of every cell is known in
//! closed form, so Σ_c g(c) is estimated without bias by the mean of
//! g(c_i)/Q(c_i).
//!
//! Samplers of two uniforms (Student's t by Bailey's polar method, the
//! generalized Cauchy by Jöhnk's rejection) are monotone in one uniform
//! when the other is fixed. For them [`conditional_deviation`] compares the
//! implemented conditional cell masses with the exact conditional masses of
//! the ideal sampler: if |ln(P_impl(c | θ)/P_ideal(c | θ))| <= ρ for every θ,
//! the mixture satisfies the same bound, and since the ideal snapped
//! release meets ε d exactly, η <= 2ρ.

use crate::noise::uniform;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use serde::Serialize;
use std::vec::Vec;

/// Keys checked one by one on each side of a boundary found by bisection.
pub const WINDOW: u64 = 64;

/// An ordered set of integer keys [0, count) with a value map that
/// increases with the key and a probability per key.
pub trait KeyLaw: Sync {
    /// Number of keys.
    fn count(&self) -> u64;
    /// The uniform's value at `key`.
    fn value(&self, key: u64) -> f64;
    /// Probability of the keys in [lo, hi).
    fn mass(&self, lo: u64, hi: u64) -> f64;
}

/// The full-resolution uniform of [`crate::noise::uniform`].
#[derive(Clone, Copy, Debug, Default)]
pub struct FullResolution;

impl KeyLaw for FullResolution {
    fn count(&self) -> u64 {
        uniform::KEY_COUNT
    }
    fn value(&self, key: u64) -> f64 {
        uniform::uniform_from_key(key)
    }
    fn mass(&self, lo: u64, hi: u64) -> f64 {
        uniform::key_mass(lo, hi)
    }
}

/// What [`check_draw_law`] found about a drawn uniform.
#[derive(Clone, Debug, Default, Serialize)]
pub struct DrawLawReport {
    /// Draws examined.
    pub draws: usize,
    /// Draws that are not a value of [`uniform::uniform_from_key`].
    pub unattainable: usize,
    /// The largest |z-score| of the frequency of a mantissa bit of the key
    /// (expected 1/2 each, all 52 bits).
    pub worst_bit_z: f64,
    /// The largest |z-score| of the frequency of the binades e = 0..7
    /// (expected 2^-(e+1)).
    pub worst_binade_z: f64,
    /// Every draw attainable and both z-scores below 6.
    pub passed: bool,
}

/// Check that a draw (`draw()` called `n` times) has the law the exact
/// enumeration counts: every value is [`uniform::uniform_from_key`] of some
/// key, each of the 52 mantissa bits of the key is set half of the time
/// and the binades have probabilities 2^-(e+1). A uniform that loses its
/// low mantissa bits (issue 19 item 5) has those bits constant and fails;
/// the sampler's own draw ([`uniform::full_resolution_uniform_and_sign`],
/// `uniform_from_key(draw_key(rng))`) passes.
///
/// ```
/// use geopriv::audit::enumeration::check_draw_law;
/// use geopriv::noise::uniform::full_resolution_uniform;
/// use rand::SeedableRng;
/// let mut rng = rand::rngs::StdRng::seed_from_u64(1);
/// assert!(check_draw_law(&mut || full_resolution_uniform(&mut rng), 20_000).passed);
/// let mut rng = rand::rngs::StdRng::seed_from_u64(1);
/// let mut lossy = || f64::from_bits(full_resolution_uniform(&mut rng).to_bits() & !0xF_FFFF);
/// assert!(!check_draw_law(&mut lossy, 20_000).passed);
/// ```
pub fn check_draw_law(draw: &mut dyn FnMut() -> f64, n: usize) -> DrawLawReport {
    let mut bits = [0usize; 52];
    let mut binades = [0usize; 8];
    let mut report = DrawLawReport {
        draws: n,
        ..Default::default()
    };
    for _ in 0..n {
        let Some(key) = uniform::key_of_uniform(draw()) else {
            report.unattainable += 1;
            continue;
        };
        for (b, count) in bits.iter_mut().enumerate() {
            *count += ((key >> b) & 1) as usize;
        }
        let binade = uniform::MAX_BINADE - (key >> 52);
        if let Some(c) = binades.get_mut(binade as usize) {
            *c += 1;
        }
    }
    let nf = n.max(1) as f64;
    let z = |count: usize, p: f64| (count as f64 - nf * p).abs() / (nf * p * (1.0 - p)).sqrt();
    report.worst_bit_z = bits.iter().map(|&c| z(c, 0.5)).fold(0.0, f64::max);
    report.worst_binade_z = binades
        .iter()
        .enumerate()
        .map(|(e, &c)| z(c, libm::ldexp(1.0, -(e as i32) - 1)))
        .fold(0.0, f64::max);
    report.passed =
        report.unattainable == 0 && report.worst_bit_z < 6.0 && report.worst_binade_z < 6.0;
    report
}

/// The first key in [lo, hi) where the monotone predicate turns true (hi
/// if never).
fn first_true<P: Fn(u64) -> bool>(mut lo: u64, mut hi: u64, pred: P) -> u64 {
    while lo < hi {
        let mid = lo + (hi - lo) / 2;
        if pred(mid) {
            hi = mid;
        } else {
            lo = mid + 1;
        }
    }
    lo
}

/// The probability of the keys in [0, n) whose output `g(key)` equals
/// `cell`, for g monotone in the key (either direction, ulp-level wiggles
/// within [`WINDOW`] keys of a boundary allowed).
pub fn cell_mass<L: KeyLaw + ?Sized, G: Fn(u64) -> f64>(law: &L, n: u64, g: G, cell: f64) -> f64 {
    if n == 0 {
        return 0.0;
    }
    let increasing = g(0) <= g(n - 1);
    let (a, b) = if increasing {
        (
            first_true(0, n, |k| g(k) >= cell),
            first_true(0, n, |k| g(k) > cell),
        )
    } else {
        (
            first_true(0, n, |k| g(k) <= cell),
            first_true(0, n, |k| g(k) < cell),
        )
    };
    let one = |k: u64| {
        if g(k) == cell {
            law.mass(k, k + 1)
        } else {
            0.0
        }
    };
    let lo = a.saturating_sub(WINDOW);
    let hi = b.saturating_add(WINDOW).min(n);
    if hi - lo <= 4 * WINDOW {
        return (lo..hi).map(one).sum();
    }
    (lo..a + WINDOW).map(one).sum::<f64>()
        + law.mass(a + WINDOW, b - WINDOW)
        + (b - WINDOW..hi).map(one).sum::<f64>()
}

/// A sampler of the form y = release(u, negative) with u from `law` and a
/// fair sign, monotone in u for each sign: the exact cell probability is
/// ½ Σ_sign mass{u : release(u, sign) = c}.
pub struct MonotoneSampler<'a> {
    /// The uniform's key law.
    pub law: &'a (dyn KeyLaw + 'a),
    /// The release (snapped output) at uniform u and sign.
    pub release: &'a (dyn Fn(f64, bool) -> f64 + Sync + 'a),
}

impl MonotoneSampler<'_> {
    /// P(y = cell), exactly (up to one rounding per binade of keys).
    pub fn cell_probability(&self, cell: f64) -> f64 {
        let n = self.law.count();
        let plus = cell_mass(
            self.law,
            n,
            |k| (self.release)(self.law.value(k), false),
            cell,
        );
        let minus = cell_mass(
            self.law,
            n,
            |k| (self.release)(self.law.value(k), true),
            cell,
        );
        0.5 * (plus + minus)
    }
}

/// Where to look: the cells of width `grid` around `centre` (f(x)) in
/// units of `scale` (σ(x)).
#[derive(Clone, Copy, Debug, Serialize)]
pub struct CellPlan {
    /// f(x).
    pub centre: f64,
    /// σ(x).
    pub scale: f64,
    /// The release grid Λ.
    pub grid: f64,
    /// ε d(x, x').
    pub epsilon_d: f64,
    /// The η the mechanism states (cells above ε d + η count into δ_fp).
    pub eta: f64,
    /// The largest |z| covered by η; mass beyond it is added to δ_fp.
    pub z_max: f64,
    /// P(|Z| > z_max), added to δ_fp.
    pub tail_beyond_z_max: f64,
    /// Cells enumerated on each side of the centre.
    pub exact_cells: u64,
    /// Importance-sampled cells beyond them, out to z_max.
    pub samples: usize,
    /// Seed of the proposal.
    pub seed: u64,
    /// `Some(p)`: the cells are those of the relative grid
    /// ([`crate::release_grid::snap_relative`]) with smallest cell `grid`;
    /// `None`: multiples of `grid`.
    pub relative_bits: Option<u32>,
}

impl CellPlan {
    /// The cell (released value) of y.
    pub fn snap(&self, y: f64) -> f64 {
        match self.relative_bits {
            Some(p) => crate::release_grid::snap_relative(y, self.grid, p),
            None => crate::mechanism::snap(y, self.grid),
        }
    }

    /// The cell's bounds [lo, hi] and the next cells below and above.
    pub fn cell(&self, c: f64) -> ((f64, f64), (f64, f64)) {
        match self.relative_bits {
            Some(p) => crate::release_grid::relative_cell(c, self.grid, p),
            None => {
                let g = self.grid;
                ((c - 0.5 * g, c + 0.5 * g), (c - g, c + g))
            }
        }
    }

    /// The 2E+1 cells around f(x), ascending.
    fn exact(&self) -> Vec<f64> {
        let centre = self.snap(self.centre);
        let mut below = Vec::new();
        let mut above = Vec::new();
        let (mut lo, mut hi) = (centre, centre);
        for _ in 0..self.exact_cells {
            lo = self.cell(lo).1 .0;
            hi = self.cell(hi).1 .1;
            below.push(lo);
            above.push(hi);
        }
        below.reverse();
        below.push(centre);
        below.extend(above);
        below
    }

    /// The exact cells, and a proposal draw beyond them: `Some((cell, Q(c)))`
    /// with Q the closed-form mass of the cell under "sign fair, ln|z|
    /// uniform on [z_lo, z_hi]", `None` when it lands on an exact cell.
    fn layout(&self) -> (Vec<f64>, impl FnMut(&mut StdRng) -> Option<(f64, f64)> + '_) {
        let exact = self.exact();
        let first = exact.first().copied().unwrap_or(self.centre);
        let last = exact.last().copied().unwrap_or(self.centre);
        let (lo_edge, hi_edge) = (self.cell(first).0 .0, self.cell(last).0 .1);
        let z_lo = ((self.centre - lo_edge).min(hi_edge - self.centre) / self.scale)
            .max(f64::MIN_POSITIVE);
        let z_hi = self.z_max.max(2.0 * z_lo);
        let propose = move |rng: &mut StdRng| {
            let z = (z_lo.ln() + rng.random::<f64>() * (z_hi / z_lo).ln()).exp();
            let sign = if rng.random::<bool>() { -1.0 } else { 1.0 };
            let cell = self.snap(self.centre + sign * self.scale * z);
            if cell >= first && cell <= last {
                return None;
            }
            let (lo, hi) = self.cell(cell).0;
            let (a, b) = (
                (lo - self.centre) / self.scale,
                (hi - self.centre) / self.scale,
            );
            let q = 0.5 * log_uniform_mass(a, b, z_lo, z_hi)
                + 0.5 * log_uniform_mass(-b, -a, z_lo, z_hi);
            Some((cell, q))
        };
        (exact, propose)
    }
}

/// The enumeration's findings for one pair.
#[derive(Clone, Debug, Default, Serialize)]
pub struct PairFindings {
    /// ε d(x, x').
    pub epsilon_d: f64,
    /// max over evaluated cells (both directions) of |ln P_x/P_x'| - ε d
    /// (+∞ if a cell is possible under one input only).
    pub eta_measured: f64,
    /// Σ_c max(0, P_x - e^{εd} P_x'), the larger direction.
    pub delta_effective: f64,
    /// Mass of cells above ε d + η plus the tail beyond z_max, the larger
    /// direction.
    pub delta_fp: f64,
    /// Cells evaluated.
    pub cells: usize,
    /// Cells possible under one input and impossible under the other.
    pub one_sided_cells: usize,
}

#[derive(Default, Clone, Copy)]
struct Sums {
    excess: [f64; 2],
    failing: [f64; 2],
    eta: f64,
    one_sided: usize,
}

impl Sums {
    fn add(&mut self, p: f64, q: f64, weight: f64, plan: &CellPlan) {
        let bound = plan.epsilon_d.exp();
        for (dir, (a, b)) in [(p, q), (q, p)].into_iter().enumerate() {
            if a <= 0.0 {
                continue;
            }
            self.excess[dir] += weight * (a - bound * b).max(0.0);
            let excess = if b > 0.0 {
                (a / b).ln() - plan.epsilon_d
            } else {
                self.one_sided += 1;
                f64::INFINITY
            };
            if excess > plan.eta {
                self.failing[dir] += weight * a;
            }
            self.eta = self.eta.max(excess);
        }
    }
}

/// Mass of ln|z| uniform on [ln z_lo, ln z_hi] that falls in [a, b] (z > 0).
fn log_uniform_mass(a: f64, b: f64, z_lo: f64, z_hi: f64) -> f64 {
    let (a, b) = (a.max(z_lo), b.min(z_hi));
    if b <= a {
        0.0
    } else {
        (b / a).ln() / (z_hi / z_lo).ln()
    }
}

/// Compare two monotone samplers (the releases under x and x') cell by
/// cell: the exact cells near f(x), importance sampling beyond (module
/// docs). Cells are evaluated in parallel threads.
pub fn compare_pair(
    x: &MonotoneSampler,
    x_prime: &MonotoneSampler,
    plan: &CellPlan,
) -> PairFindings {
    let (exact, mut propose) = plan.layout();
    let mut rng = StdRng::seed_from_u64(plan.seed);
    let sampled: Vec<(f64, f64)> = (0..plan.samples)
        .map(|_| {
            // A cell enumerated exactly keeps proposal mass 0 (used for η only).
            propose(&mut rng).unwrap_or((f64::NAN, 0.0))
        })
        .collect();
    let evaluate = |cell: f64| (x.cell_probability(cell), x_prime.cell_probability(cell));
    let exact_probs: Vec<(f64, f64)> = parallel_map(&exact, |&c| evaluate(c));
    let sampled_probs: Vec<(f64, f64)> =
        parallel_map(
            &sampled,
            |&(c, _)| {
                if c.is_nan() {
                    (0.0, 0.0)
                } else {
                    evaluate(c)
                }
            },
        );
    let mut sums = Sums::default();
    for &(p, q) in &exact_probs {
        sums.add(p, q, 1.0, plan);
    }
    let n = plan.samples.max(1) as f64;
    for (&(_, q_mass), &(p, q)) in sampled.iter().zip(&sampled_probs) {
        if q_mass > 0.0 {
            sums.add(p, q, 1.0 / (n * q_mass), plan);
        } else {
            // Only the η maximum uses cells the proposal hit inside the
            // exact region.
            let mut s = Sums::default();
            s.add(p, q, 0.0, plan);
            sums.eta = sums.eta.max(s.eta);
        }
    }
    PairFindings {
        epsilon_d: plan.epsilon_d,
        eta_measured: sums.eta,
        delta_effective: sums.excess[0].max(sums.excess[1]),
        delta_fp: sums.failing[0].max(sums.failing[1]) + plan.tail_beyond_z_max,
        cells: exact.len() + sampled.len(),
        one_sided_cells: sums.one_sided,
    }
}

/// A sampler that is monotone in one uniform once another draw θ is
/// fixed: `release(u, negative)` for the fixed θ, defined on the keys
/// [0, accepted) (a rejection sampler accepts a prefix of the keys), and
/// `ideal(cell, negative)`, the exact conditional probability of the cell
/// for that sign under the ideal (real-arithmetic) sampler.
pub struct ConditionalSampler<'a> {
    /// The uniform's key law.
    pub law: &'a (dyn KeyLaw + 'a),
    /// Keys [0, accepted) are accepted for this θ.
    pub accepted: u64,
    /// Snapped output at uniform u and sign.
    pub release: &'a (dyn Fn(f64, bool) -> f64 + Sync + 'a),
    /// Ideal conditional probability of a cell, per sign.
    pub ideal: &'a (dyn Fn(f64, bool) -> f64 + Sync + 'a),
}

/// The implementation-vs-ideal comparison of one conditional sampler.
#[derive(Clone, Debug, Default, Serialize)]
pub struct Deviation {
    /// max over evaluated cells of |ln(P_impl(c | θ)/P_ideal(c | θ))|.
    pub rho: f64,
    /// Ideal mass of the evaluated cells with 2ρ(c) > η (importance
    /// weighted), plus the tail beyond z_max.
    pub delta_fp: f64,
    /// Cells evaluated.
    pub cells: usize,
}

impl PairFindings {
    /// Fold one conditional comparison into the pair's worst case: the
    /// pair's η is at most 2ρ (one ρ per input), δ_fp the larger of the two,
    /// and the cells add up.
    fn absorb_conditional(&mut self, dev: &Deviation) {
        self.eta_measured = self.eta_measured.max(2.0 * dev.rho);
        self.delta_fp = self.delta_fp.max(dev.delta_fp);
        self.cells += dev.cells;
    }
}

/// Compare a conditional sampler with its ideal counterpart on the cells
/// of `plan` (the centre, scale and grid of the release; ε d unused).
pub fn conditional_deviation(s: &ConditionalSampler, plan: &CellPlan) -> Deviation {
    let total = s.law.mass(0, s.accepted);
    let implemented = |cell: f64| {
        let n = s.accepted;
        let plus = cell_mass(s.law, n, |k| (s.release)(s.law.value(k), false), cell);
        let minus = cell_mass(s.law, n, |k| (s.release)(s.law.value(k), true), cell);
        0.5 * (plus + minus) / total
    };
    let ideal = |cell: f64| 0.5 * ((s.ideal)(cell, false) + (s.ideal)(cell, true));
    let (exact, mut propose) = plan.layout();
    let mut cells: Vec<(f64, f64)> = exact.into_iter().map(|c| (c, 1.0)).collect();
    let mut rng = StdRng::seed_from_u64(plan.seed);
    let n = plan.samples.max(1) as f64;
    for _ in 0..plan.samples {
        if let Some((cell, q)) = propose(&mut rng) {
            cells.push((cell, 1.0 / (n * q)));
        }
    }
    let results = parallel_map(&cells, |&(c, w)| (implemented(c), ideal(c), w));
    let mut out = Deviation {
        cells: cells.len(),
        delta_fp: plan.tail_beyond_z_max,
        ..Default::default()
    };
    for (p, q, w) in results {
        if q <= 0.0 && p <= 0.0 {
            continue;
        }
        let rho = if q > 0.0 && p > 0.0 {
            (p / q).ln().abs()
        } else {
            f64::INFINITY
        };
        if 2.0 * rho > plan.eta {
            out.delta_fp += w * q;
        }
        out.rho = out.rho.max(rho);
    }
    out
}

/// Map over a slice on all available cores (std threads).
pub(crate) fn parallel_map<T: Sync, U: Send, F: Fn(&T) -> U + Sync>(items: &[T], f: F) -> Vec<U> {
    let threads = std::thread::available_parallelism()
        .map(|n| n.get())
        .unwrap_or(1)
        .min(items.len().max(1));
    let chunk = items.len().div_ceil(threads).max(1);
    std::thread::scope(|scope| {
        let handles: Vec<_> = items
            .chunks(chunk)
            .map(|part| {
                let f = &f;
                scope.spawn(move || part.iter().map(f).collect::<Vec<U>>())
            })
            .collect();
        handles
            .into_iter()
            .flat_map(|h| h.join().unwrap_or_else(|e| std::panic::resume_unwind(e)))
            .collect()
    })
}

/// Options of [`enumerate_pair`].
#[derive(Clone, Copy, Debug, Serialize)]
pub struct EnumerationOptions {
    /// Cells enumerated exactly on each side of f(x).
    pub exact_cells: u64,
    /// Importance-sampled cells out to z_max.
    pub samples: usize,
    /// Values of the second draw θ for the two-uniform samplers (Student's
    /// t, generalized Cauchy).
    pub conditionals: usize,
    /// Seed of the proposal.
    pub seed: u64,
}

impl Default for EnumerationOptions {
    fn default() -> Self {
        Self {
            exact_cells: 64,
            samples: 2_000,
            conditionals: 3,
            seed: 1,
        }
    }
}

/// The enumeration of one mechanism on one pair (x, x').
#[derive(Clone, Debug, Serialize)]
pub struct EnumerationReport {
    /// Mechanism name.
    pub mechanism: String,
    /// x.
    pub x: Vec<f64>,
    /// x'.
    pub x_prime: Vec<f64>,
    /// `pair` (cell-by-cell P_x vs P_x') or `conditional` (implemented vs
    /// ideal conditional masses, η <= 2ρ).
    pub method: &'static str,
    /// What the mechanism states (docs/MATH.md §8.1).
    pub stated_eta: f64,
    /// What the mechanism states.
    pub stated_delta_fp: f64,
    /// The release grid Λ.
    pub grid: f64,
    /// The findings (for `conditional`: eta_measured = 2ρ, δ_eff unused).
    pub findings: PairFindings,
}

impl EnumerationReport {
    /// Measured η and δ_fp within what the mechanism states.
    pub fn passed(&self) -> bool {
        self.findings.eta_measured <= self.stated_eta
            && self.findings.delta_fp <= self.stated_delta_fp * (1.0 + 1e-9) + 1e-300
    }
}

use crate::error::{Error, Result};
use crate::mechanism::{Mechanism, NoiseShape};
use crate::noise::GeneralizedCauchy;
use crate::query::Query;
use std::string::String;

/// Enumerate the implemented release of `mechanism` on `query` at the
/// pair (x, x') (module docs). Laplace-noise and PolyPlace releases (and
/// noise a priori in 1-D) are compared cell by cell; Student's t and the
/// generalized Cauchy conditionally. Noise a priori in 2-D or more is not
/// enumerated (an error).
pub fn enumerate_pair<Q: Query + Sync + ?Sized>(
    mechanism: &Mechanism,
    query: &Q,
    x: &[f64],
    x_prime: &[f64],
    options: &EnumerationOptions,
) -> Result<EnumerationReport> {
    enumerate_pair_with_law(mechanism, query, x, x_prime, options, &FullResolution)
}

/// [`enumerate_pair`] with the uniform's key law `law` in place of the
/// full-resolution uniform the sampler draws ([`FullResolution`]): for
/// showing that the enumeration catches a faulty uniform (a law whose
/// `value` differs from what [`uniform::uniform_from_key`] gives). The
/// release at each key is the mechanism's own `release_at` (the function
/// the sampler calls after its draw), so the enumeration counts the code
/// that runs; the draw itself is `uniform_from_key(draw_key(rng))`
/// (`noise::uniform`), whose key law [`check_draw_law`] tests.
pub fn enumerate_pair_with_law<Q: Query + Sync + ?Sized>(
    mechanism: &Mechanism,
    query: &Q,
    x: &[f64],
    x_prime: &[f64],
    options: &EnumerationOptions,
    law: &dyn KeyLaw,
) -> Result<EnumerationReport> {
    let fp = mechanism.floating_point_guarantee_for(query);
    let grid = mechanism.release_grid(query);
    let d = x
        .iter()
        .zip(x_prime)
        .map(|(a, b)| (a - b) * (a - b))
        .sum::<f64>()
        .sqrt();
    let epsilon_d = mechanism.epsilon() * d;
    let mut report = EnumerationReport {
        mechanism: String::from(mechanism.name().as_str()),
        x: x.to_vec(),
        x_prime: x_prime.to_vec(),
        method: "pair",
        stated_eta: fp.eta,
        stated_delta_fp: fp.delta_fp,
        grid,
        findings: PairFindings::default(),
    };
    let plan_for = |centre: f64, scale: f64| CellPlan {
        centre,
        scale,
        grid,
        epsilon_d,
        eta: fp.eta,
        z_max: fp.z_max,
        tail_beyond_z_max: fp.delta_fp,
        exact_cells: options.exact_cells,
        samples: options.samples,
        seed: options.seed,
        relative_bits: None,
    };
    let Some(density) = mechanism.output_density(query, x)? else {
        // Noise a priori: 1-D only. The cells are those of the snapped
        // noisy point x̃ (the release f(x̃) is a function of it), computed
        // by the sampler's own `a_priori_point`.
        if query.dimension() != 1 {
            return Err(Error::InvalidParameter {
                name: "dimension",
                value: query.dimension() as f64,
                requirement: "1 for the enumeration of noise a priori",
            });
        }
        let release_at = |point: f64| {
            move |w: f64, negative: bool| {
                mechanism
                    .a_priori_point(point, grid, w, negative)
                    .unwrap_or(f64::NAN)
            }
        };
        let (rx, rx2) = (release_at(x[0]), release_at(x_prime[0]));
        let sx = MonotoneSampler { law, release: &rx };
        let sx2 = MonotoneSampler { law, release: &rx2 };
        report.findings = compare_pair(&sx, &sx2, &plan_for(x[0], 1.0 / mechanism.epsilon()));
        return Ok(report);
    };
    let density_prime = mechanism
        .output_density(query, x_prime)?
        .ok_or(Error::Numerical {
            routine: "enumeration: no density at x'",
        })?;
    let release = |centre: f64, sigma: f64, u: f64, neg: bool, second: f64| {
        mechanism.release_at(centre, sigma, grid, u, neg, second)
    };
    let (method, findings) = enumerate_location_scale(
        density.shape(),
        [
            (density.location(), density.scale()),
            (density_prime.location(), density_prime.scale()),
        ],
        &release,
        &plan_for,
        options,
        law,
    )?;
    report.method = method;
    report.findings = findings;
    Ok(report)
}

/// A release y = snap(centre ± σ m(u, second)) at one draw (the sampler's
/// own function: `Mechanism::release_at` or `MedianMechanism::release_at`).
type ReleaseAt<'a> = dyn Fn(f64, f64, f64, bool, f64) -> Option<f64> + Sync + 'a;

/// The enumeration of a location–scale release with noise `shape` at the
/// two (centre, σ) of a pair: cell by cell for Laplace and PolyPlace,
/// conditionally (η <= 2ρ) for Student's t and the Cauchy family.
fn enumerate_location_scale(
    shape: NoiseShape,
    pair: [(f64, f64); 2],
    release_at: &ReleaseAt,
    plan_for: &(dyn Fn(f64, f64) -> CellPlan + Sync),
    options: &EnumerationOptions,
    law: &dyn KeyLaw,
) -> Result<(&'static str, PairFindings)> {
    let [(loc, scale), (loc2, scale2)] = pair;
    let epsilon_d = plan_for(loc, scale).epsilon_d;
    // The z-interval of a cell for one sign: (m1, m2), magnitudes.
    let magnitudes = |plan: &CellPlan, cell: f64, neg: bool| {
        let (lo, hi) = plan.cell(cell).0;
        let (lo, hi) = (
            (lo - plan.centre) / plan.scale,
            (hi - plan.centre) / plan.scale,
        );
        if neg {
            (-hi, -lo)
        } else {
            (lo, hi)
        }
    };
    match shape {
        NoiseShape::Laplace | NoiseShape::PolyPlace { .. } => {
            let rx =
                move |w: f64, neg: bool| release_at(loc, scale, w, neg, 0.0).unwrap_or(f64::NAN);
            let rx2 =
                move |w: f64, neg: bool| release_at(loc2, scale2, w, neg, 0.0).unwrap_or(f64::NAN);
            let sx = MonotoneSampler { law, release: &rx };
            let sx2 = MonotoneSampler { law, release: &rx2 };
            Ok(("pair", compare_pair(&sx, &sx2, &plan_for(loc, scale))))
        }
        NoiseShape::StudentT { dof } => {
            let mut worst = PairFindings {
                epsilon_d,
                ..Default::default()
            };
            for (centre, sigma) in [(loc, scale), (loc2, scale2)] {
                let plan = plan_for(centre, sigma);
                for j in 0..options.conditionals {
                    // θ spread over [0, π/2), including θ = 0 (cos = 1).
                    let theta =
                        core::f64::consts::FRAC_PI_2 * j as f64 / options.conditionals as f64;
                    let cos = libm::cos(theta);
                    let release = move |w: f64, neg: bool| {
                        release_at(centre, sigma, w, neg, cos).unwrap_or(f64::NAN)
                    };
                    let a = libm::sqrt(dof) * cos;
                    let plan = &plan;
                    // Ideal: W(m) = (1 + (m/a)²)^{-ν/2} for magnitudes m.
                    let ideal = move |cell: f64, neg: bool| {
                        let (m1, m2) = magnitudes(plan, cell, neg);
                        let width = if m1 > 0.0 { m2 - m1 } else { m2 };
                        let m1 = m1.max(0.0);
                        if m2 <= 0.0 {
                            return 0.0;
                        }
                        let (s1, ds) = (m1 / a, width / a);
                        let s2 = s1 + ds;
                        let ln_w1 = -0.5 * dof * libm::log1p(s1 * s1);
                        let log_ratio = libm::log1p(ds * (s1 + s2) / (1.0 + s1 * s1));
                        libm::exp(ln_w1) * -libm::expm1(-0.5 * dof * log_ratio)
                    };
                    let s = ConditionalSampler {
                        law,
                        accepted: law.count(),
                        release: &release,
                        ideal: &ideal,
                    };
                    worst.absorb_conditional(&conditional_deviation(&s, plan));
                }
            }
            Ok(("conditional", worst))
        }
        NoiseShape::GeneralizedCauchy { k } => {
            let c = GeneralizedCauchy::new(k, 1.0)?;
            let mut worst = PairFindings {
                epsilon_d,
                ..Default::default()
            };
            for (centre, sigma) in [(loc, scale), (loc2, scale2)] {
                let plan = plan_for(centre, sigma);
                for j in 0..options.conditionals {
                    let u = (j as f64 + 0.5) / options.conditionals as f64;
                    let release = move |v: f64, neg: bool| {
                        release_at(centre, sigma, u, neg, v).unwrap_or(f64::NAN)
                    };
                    let accepted = first_true(0, law.count(), |key| {
                        c.magnitude_from(u, law.value(key)).is_none()
                    });
                    let v_acc = libm::pow(1.0 - libm::pow(u, k), (k - 1.0) / k);
                    let plan = &plan;
                    // Ideal: v(m) = (u/m)^{k-1}, v uniform on [0, v_acc].
                    let ideal = move |cell: f64, neg: bool| {
                        let (m1, m2) = magnitudes(plan, cell, neg);
                        if m2 <= 0.0 {
                            return 0.0;
                        }
                        let v_of = |m: f64| libm::pow(u / m, k - 1.0);
                        let v2 = v_of(m2).min(v_acc);
                        let mass = if m1 <= 0.0 || v_of(m1) >= v_acc {
                            v_acc - v2
                        } else {
                            v_of(m1) * -libm::expm1(-(k - 1.0) * libm::log1p((m2 - m1) / m1))
                        };
                        mass.max(0.0) / v_acc
                    };
                    let s = ConditionalSampler {
                        law,
                        accepted,
                        release: &release,
                        ideal: &ideal,
                    };
                    worst.absorb_conditional(&conditional_deviation(&s, plan));
                }
            }
            Ok(("conditional", worst))
        }
    }
}

/// Enumerate the central median / quantile release of `mechanism` on the
/// neighbouring datasets `data` and `data_prime` (the q-quantile; ε d = ε),
/// with the mechanism's own `release_at` on its relative grid
/// (docs/MATH.md §8.4, §11.5).
pub fn enumerate_median_pair(
    mechanism: &crate::central::median::MedianMechanism,
    data: &crate::central::median::SortedDataset,
    data_prime: &crate::central::median::SortedDataset,
    q: f64,
    options: &EnumerationOptions,
) -> Result<EnumerationReport> {
    let grid = mechanism.grid();
    let fp = grid.fp;
    let (loc, scale) = mechanism.location_and_scale(data, q)?;
    let (loc2, scale2) = mechanism.location_and_scale(data_prime, q)?;
    let plan_for = |centre: f64, scale: f64| CellPlan {
        centre,
        scale,
        grid: grid.grid,
        epsilon_d: mechanism.epsilon(),
        eta: fp.eta,
        z_max: fp.z_max,
        tail_beyond_z_max: fp.delta_fp,
        exact_cells: options.exact_cells,
        samples: options.samples,
        seed: options.seed,
        relative_bits: grid.relative.then_some(fp.grid_bits),
    };
    let release = |centre: f64, sigma: f64, u: f64, neg: bool, second: f64| {
        mechanism.release_at(centre, sigma, u, neg, second)
    };
    let (method, findings) = enumerate_location_scale(
        mechanism.unit_shape(),
        [(loc, scale), (loc2, scale2)],
        &release,
        &plan_for,
        options,
        &FullResolution,
    )?;
    Ok(EnumerationReport {
        mechanism: String::from(mechanism.kind().name()),
        x: data.values().to_vec(),
        x_prime: data_prime.values().to_vec(),
        method,
        stated_eta: fp.eta,
        stated_delta_fp: fp.delta_fp + mechanism.delta(),
        grid: grid.grid,
        findings,
    })
}
