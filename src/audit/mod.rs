//! Numerical privacy audit: the executable form of the privacy arguments
//! in [`crate::mechanism`] (docs/MATH.md §6).
//!
//! For a mechanism, a query and ε, the audit draws pairs of inputs (x, x')
//! — random ones, on a grid, and adversarial ones near the places where the
//! query changes (ramp edges, the two-way corner, the kernel centre and the
//! radius where the kernel is steepest), very close pairs and far pairs —
//! evaluates the log density ratio ln p_x(y) - ln p_x'(y) of the releases on
//! dense output grids around both centres and far into the tails, refines
//! the worst output by golden-section search, and reports
//!
//! ```text
//! max_loss_ratio = max over pairs and y of |ln p_x(y) - ln p_x'(y)| / (ε d(x, x')).
//! ```
//!
//! Pure GP passes when max_loss_ratio <= 1 + 1e-9. For approximate GP the
//! ratio is taken over the outputs within ln(1/δ) noise scales of the centre
//! (the event of probability 1 - δ in the proof), and the excess mass
//! ∫ max(0, p_x - e^{εd} p_x') dy, computed in closed form for Laplace
//! noise, must be at most δ.
//!
//! The audit evaluates the ideal (continuous) release densities; the
//! snapping of releases to the public grid is post-processing.

pub mod enumeration;
pub mod sampling;

use crate::error::Result;
use crate::mechanism::{Mechanism, NoiseShape, OutputDensity};
use crate::query::{GaussianKde, Query, SoftInterval, SoftThreshold, TwoWayThreshold};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use serde::Serialize;
use std::format;
use std::string::String;
use std::vec;
use std::vec::Vec;

/// Tolerance of the pure-GP check: max_loss_ratio <= 1 + 1e-9.
pub const LOSS_RATIO_TOLERANCE: f64 = 1e-9;
/// The most input pairs an audit takes (each pair costs a few hundred
/// density evaluations and two small vectors): 10^6.
pub const MAX_AUDIT_PAIRS: usize = 1_000_000;
/// Largest standardised offset probed for Laplace noise (see
/// `audit_densities`).
const LAPLACE_REACH: f64 = 60.0;

/// A query the audit knows where to attack: the places where f changes.
pub trait AuditTarget: Query {
    /// Points where the query's behaviour changes (ramp edges and centres,
    /// the two-way corner, the kernel centre and its steepest radius).
    fn landmarks(&self) -> Vec<Vec<f64>>;
    /// The natural length of the query (ramp width or bandwidth).
    fn length_scale(&self) -> f64;
    /// A short description with the public parameters, e.g.
    /// `threshold(T=100, w=20)`.
    fn describe(&self) -> String;
}

impl AuditTarget for crate::AnyQuery {
    fn landmarks(&self) -> Vec<Vec<f64>> {
        self.as_audit_target().landmarks()
    }
    fn length_scale(&self) -> f64 {
        self.as_audit_target().length_scale()
    }
    fn describe(&self) -> String {
        self.as_audit_target().describe()
    }
}

impl crate::AnyQuery {
    /// The family's own audit target (the audit's one family dispatch).
    pub fn as_audit_target(&self) -> &dyn AuditTarget {
        match self {
            crate::AnyQuery::Threshold(q) => q,
            crate::AnyQuery::Interval(q) => q,
            crate::AnyQuery::TwoWay(q) => q,
            crate::AnyQuery::Kde(q) => q,
            crate::AnyQuery::Region(q) => q,
        }
    }
}

impl AuditTarget for crate::query::RegionQuery {
    fn landmarks(&self) -> Vec<Vec<f64>> {
        self.landmark_points()
    }
    fn length_scale(&self) -> f64 {
        self.width()
    }
    fn describe(&self) -> String {
        format!("region(g={}, w={})", &self.digest_hex()[..12], self.width())
    }
}

impl AuditTarget for SoftThreshold {
    fn landmarks(&self) -> Vec<Vec<f64>> {
        let (t, w) = (self.threshold(), self.width());
        vec![vec![t - w / 2.0], vec![t], vec![t + w / 2.0]]
    }
    fn length_scale(&self) -> f64 {
        self.width()
    }
    fn describe(&self) -> String {
        format!("threshold(T={}, w={})", self.threshold(), self.width())
    }
}

impl AuditTarget for SoftInterval {
    fn landmarks(&self) -> Vec<Vec<f64>> {
        let (a, b, w) = (self.lower(), self.upper(), self.width());
        vec![
            vec![a - w / 2.0],
            vec![a],
            vec![a + w / 2.0],
            vec![(a + b) / 2.0],
            vec![b - w / 2.0],
            vec![b],
            vec![b + w / 2.0],
        ]
    }
    fn length_scale(&self) -> f64 {
        self.width()
    }
    fn describe(&self) -> String {
        format!(
            "interval(a={}, b={}, w={})",
            self.lower(),
            self.upper(),
            self.width()
        )
    }
}

impl AuditTarget for TwoWayThreshold {
    fn landmarks(&self) -> Vec<Vec<f64>> {
        let [t1, t2] = self.thresholds();
        let w = self.width();
        let c = self.corner();
        let r1 = w * core::f64::consts::FRAC_1_SQRT_2;
        let diag = core::f64::consts::FRAC_1_SQRT_2;
        vec![
            c.to_vec(),
            vec![t1, t2],
            vec![c[0] - r1 * diag, c[1] - r1 * diag],
            vec![c[0] - (r1 + w) * diag, c[1] - (r1 + w) * diag],
            vec![t1, c[1] + 2.0 * w],
            vec![c[0] + 2.0 * w, t2],
            vec![c[0] + w, c[1] + w],
        ]
    }
    fn length_scale(&self) -> f64 {
        self.width()
    }
    fn describe(&self) -> String {
        let [t1, t2] = self.thresholds();
        format!("two-way(T1={t1}, T2={t2}, w={})", self.width())
    }
}

impl AuditTarget for GaussianKde {
    fn landmarks(&self) -> Vec<Vec<f64>> {
        let t = self.center();
        let h = self.bandwidth();
        let mut out = vec![t.to_vec()];
        for radius in [0.5, 1.0, 1.6, 2.1, 2.53, 4.0] {
            let mut p = t.to_vec();
            p[0] += radius * h;
            out.push(p);
        }
        out
    }
    fn length_scale(&self) -> f64 {
        self.bandwidth()
    }
    fn describe(&self) -> String {
        format!("kde(center={:?}, h={})", self.center(), self.bandwidth())
    }
}

/// A pair of inputs (x, x') to compare.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct InputPair {
    /// x.
    pub x: Vec<f64>,
    /// x'.
    pub x_prime: Vec<f64>,
}

fn random_direction(rng: &mut StdRng, dim: usize) -> Vec<f64> {
    if dim == 1 {
        return vec![if rng.random::<bool>() { 1.0 } else { -1.0 }];
    }
    loop {
        let v: Vec<f64> = (0..dim).map(|_| rng.random_range(-1.0..1.0)).collect();
        let n = v.iter().map(|a| a * a).sum::<f64>().sqrt();
        if n > 1e-3 && n <= 1.0 {
            return v.into_iter().map(|a| a / n).collect();
        }
    }
}

fn log_uniform(rng: &mut StdRng, lo: f64, hi: f64) -> f64 {
    (lo.ln() + rng.random::<f64>() * (hi.ln() - lo.ln())).exp()
}

fn offset(p: &[f64], dir: &[f64], dist: f64) -> Vec<f64> {
    p.iter().zip(dir).map(|(a, b)| a + b * dist).collect()
}

/// Refuse inputs the audit cannot judge, before anything is allocated
/// (docs/MATH.md §10): a pair count of 0 or above [`MAX_AUDIT_PAIRS`], a
/// non-finite or non-positive ε, and queries whose pairs would leave the
/// finite doubles (|landmark| + 1000 length scales overflows) or whose
/// smallest audited distance is below a million floating-point spacings
/// at the landmarks' magnitude (the pairs would collapse onto each other,
/// e.g. a ramp 1e-10 wide at 1e20).
pub fn check_audit_inputs<Q: AuditTarget + ?Sized>(
    query: &Q,
    epsilon: f64,
    n: usize,
) -> Result<()> {
    use crate::Error;
    if n == 0 || n > MAX_AUDIT_PAIRS {
        return Err(Error::LimitExceeded {
            what: "audit pairs (at least 1)",
            requested: n as u64,
            limit: MAX_AUDIT_PAIRS as u64,
        });
    }
    crate::error::positive_finite("epsilon", epsilon)?;
    let ell = query.length_scale();
    if !(ell.is_finite() && ell > 0.0) {
        return Err(Error::Unauditable {
            reason: "the query's length scale is not finite and positive",
        });
    }
    let min_d = (1e-4 * ell).max(1e-3 / epsilon);
    let mut largest = 0.0f64;
    for m in query.landmarks() {
        for &c in &m {
            let reach = c.abs() + 1100.0 * ell + 10.0 * min_d;
            if !reach.is_finite() {
                return Err(Error::Unauditable {
                    reason:
                        "input pairs would overflow: |landmark| + 1000 length scales is not finite",
                });
            }
            largest = largest.max(reach);
        }
    }
    let spacing = libm::nextafter(largest, f64::INFINITY) - largest;
    if !(min_d.is_finite() && spacing * 1e6 <= min_d) {
        return Err(Error::Unauditable {
            reason: "the audited distances are below a million floating-point spacings at the query's location (or overflow)",
        });
    }
    Ok(())
}

/// `n` input pairs for the audit of `query` under budget `epsilon`, drawn
/// with a fixed `seed`: a fifth each of random pairs in a box around the
/// landmarks, grid pairs, pairs near the landmarks, very close pairs and
/// far pairs. Distances are at least 1e-4 length scales and at least 1e-3/ε:
/// the audit compares ln p values of up to about 200 in magnitude (far
/// tails), whose rounding (about 1e-13) must stay well below 1e-9 · εd.
pub fn audit_pairs<Q: AuditTarget + ?Sized>(
    query: &Q,
    epsilon: f64,
    n: usize,
    seed: u64,
) -> Vec<InputPair> {
    let mut rng = StdRng::seed_from_u64(seed);
    let dim = query.dimension();
    let ell = query.length_scale();
    let marks = query.landmarks();
    let min_d = (1e-4 * ell).max(1e-3 / epsilon);
    let mut lo = vec![f64::INFINITY; dim];
    let mut hi = vec![f64::NEG_INFINITY; dim];
    for m in &marks {
        for k in 0..dim {
            lo[k] = lo[k].min(m[k] - 20.0 * ell);
            hi[k] = hi[k].max(m[k] + 20.0 * ell);
        }
    }
    let grid_side = ((n / 5) as f64).powf(1.0 / dim as f64).ceil().max(2.0) as usize;
    // Inputs are checked by `check_audit_inputs`; never panic on an empty
    // or non-finite box anyway.
    for k in 0..dim {
        if !(lo[k].is_finite() && hi[k].is_finite() && lo[k] < hi[k]) {
            return Vec::new();
        }
    }
    let n = n.min(MAX_AUDIT_PAIRS);
    let mut pairs = Vec::with_capacity(n);
    let mut i = 0usize;
    while pairs.len() < n {
        let kind = i % 5;
        let dir = random_direction(&mut rng, dim);
        let (x, d) = match kind {
            0 => {
                let x: Vec<f64> = (0..dim).map(|k| rng.random_range(lo[k]..hi[k])).collect();
                (x, log_uniform(&mut rng, min_d, 10.0 * ell))
            }
            1 => {
                let mut idx = i / 5;
                let x: Vec<f64> = (0..dim)
                    .map(|k| {
                        let j = idx % grid_side;
                        idx /= grid_side;
                        lo[k] + (hi[k] - lo[k]) * (j as f64 + 0.5) / grid_side as f64
                    })
                    .collect();
                (x, ell * [0.01, 0.1, 0.5, 1.0, 3.0][(i / 5) % 5])
            }
            2 => {
                let m = &marks[rng.random_range(0..marks.len())];
                let r = if rng.random::<f64>() < 0.2 {
                    0.0
                } else {
                    log_uniform(&mut rng, 1e-6 * ell, 30.0 * ell)
                };
                let away = random_direction(&mut rng, dim);
                (offset(m, &away, r), log_uniform(&mut rng, min_d, 3.0 * ell))
            }
            3 => {
                let m = &marks[rng.random_range(0..marks.len())];
                let away = random_direction(&mut rng, dim);
                let r = log_uniform(&mut rng, 1e-3 * ell, 10.0 * ell);
                (
                    offset(m, &away, r),
                    min_d * (1.0 + 9.0 * rng.random::<f64>()),
                )
            }
            _ => {
                let x: Vec<f64> = (0..dim).map(|k| rng.random_range(lo[k]..hi[k])).collect();
                (x, log_uniform(&mut rng, 10.0 * ell, 1000.0 * ell))
            }
        };
        let x_prime = offset(&x, &dir, d);
        pairs.push(InputPair { x, x_prime });
        i += 1;
    }
    pairs
}

/// The worst pair found by an audit.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct WorstCase {
    /// x.
    pub x: Vec<f64>,
    /// x'.
    pub x_prime: Vec<f64>,
    /// d(x, x').
    pub distance: f64,
    /// The output y where the loss ratio is largest.
    pub output: f64,
    /// |ln p_x(y) - ln p_x'(y)| / (ε d) there.
    pub loss_ratio: f64,
}

/// The result of an audit (serialised as the JSON of `geopriv audit`).
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct AuditReport {
    /// Mechanism name.
    pub mechanism: String,
    /// Query description.
    pub query: String,
    /// ε per unit distance.
    pub epsilon: f64,
    /// δ (0 for pure mechanisms).
    pub delta: f64,
    /// Number of input pairs.
    pub pairs: usize,
    /// max |ln p_x(y) - ln p_x'(y)| / (ε d).
    pub max_loss_ratio: f64,
    /// Where that maximum was found.
    pub worst_pair: Option<WorstCase>,
    /// max over pairs of ∫ max(0, p_x - e^{εd} p_x') dy (approximate GP).
    pub excess_mass: Option<f64>,
    /// Whether the mechanism passed.
    pub passed: bool,
}

/// Standardised output offsets t (y = centre + scale · t): dense near the
/// centre, log-spaced far into both tails.
fn output_offsets() -> Vec<f64> {
    let mut t: Vec<f64> = (-60..=60).map(|i| i as f64 * 0.05).collect();
    for k in 0..48 {
        let v = 3.0 * 10f64.powf(k as f64 / 6.0);
        t.push(v);
        t.push(-v);
    }
    for v in [1e-9, 1e-6, 1e-3] {
        t.push(v);
        t.push(-v);
    }
    t
}

/// Golden-section search for the maximum of a unimodal `f` on [lo, hi]:
/// at most `iterations` steps (each shrinks the bracket by 0.618), stopping
/// early once it is below 1e-15 (1 + |a|); returns the best point evaluated
/// and its value (so a non-unimodal f still gets a lower bound on its max).
/// One implementation for the audits and the brute-force tests.
///
/// ```
/// use geopriv::audit::golden_max;
/// let (x, v) = golden_max(|x| -(x - 0.3) * (x - 0.3), 0.0, 1.0, 80);
/// assert!((x - 0.3).abs() < 1e-7 && v <= 0.0);
/// ```
pub fn golden_max(
    mut f: impl FnMut(f64) -> f64,
    lo: f64,
    hi: f64,
    iterations: usize,
) -> (f64, f64) {
    let r = 0.5 * (libm::sqrt(5.0) - 1.0);
    let (mut a, mut b) = (lo, hi);
    let mut c = b - r * (b - a);
    let mut d = a + r * (b - a);
    let (mut fc, mut fd) = (f(c), f(d));
    let mut best = if fc > fd { (c, fc) } else { (d, fd) };
    for _ in 0..iterations {
        if fc >= fd {
            b = d;
            d = c;
            fd = fc;
            c = b - r * (b - a);
            fc = f(c);
            if fc > best.1 {
                best = (c, fc);
            }
        } else {
            a = c;
            c = d;
            fc = fd;
            d = a + r * (b - a);
            fd = f(d);
            if fd > best.1 {
                best = (d, fd);
            }
        }
        if (b - a).abs() < 1e-15 * (1.0 + a.abs()) {
            break;
        }
    }
    best
}

/// ∫_u^v of a Laplace(a, b) density restricted to one side of a, where
/// `side` = +1 for y >= a and -1 for y <= a.
fn laplace_piece(a: f64, b: f64, side: f64, u: f64, v: f64) -> f64 {
    if side > 0.0 {
        0.5 * ((-(u - a) / b).exp() - (-(v - a) / b).exp())
    } else {
        0.5 * (((v - a) / b).exp() - ((u - a) / b).exp())
    }
}

/// ∫ max(0, p_A - e^{c} p_B) dy for Laplace densities A = Lap(a, b1),
/// B = Lap(m, b2), in closed form: ln p_A - ln p_B - c is linear between
/// the break points a and m.
pub fn laplace_excess_mass(a: f64, b1: f64, m: f64, b2: f64, c: f64) -> f64 {
    let (p1, p2) = if a < m { (a, m) } else { (m, a) };
    let pieces = [(f64::NEG_INFINITY, p1), (p1, p2), (p2, f64::INFINITY)];
    let mut total = 0.0;
    for (lo, hi) in pieces {
        if hi <= lo {
            continue;
        }
        let probe = if lo.is_finite() && hi.is_finite() {
            0.5 * (lo + hi)
        } else if lo.is_finite() {
            lo + 1.0
        } else {
            hi - 1.0
        };
        let sa = if probe >= a { 1.0 } else { -1.0 };
        let sb = if probe >= m { 1.0 } else { -1.0 };
        // D(y) = -sa (y - a)/b1 + sb (y - m)/b2 + ln(b2/b1) - c = slope y + icpt.
        let slope = -sa / b1 + sb / b2;
        let at = |y: f64| -sa * (y - a) / b1 + sb * (y - m) / b2 + (b2 / b1).ln() - c;
        let (u, v) = if slope == 0.0 {
            if at(probe) > 0.0 {
                (lo, hi)
            } else {
                continue;
            }
        } else {
            let root = probe - at(probe) / slope;
            if slope > 0.0 {
                (root.max(lo), hi)
            } else {
                (lo, root.min(hi))
            }
        };
        if v > u {
            let mass = laplace_piece(a, b1, sa, u, v) - c.exp() * laplace_piece(m, b2, sb, u, v);
            total += mass.max(0.0);
        }
    }
    total
}

/// The audit proper, on any family of release densities: `density_of(x)`
/// gives the release density at x (for a correct mechanism,
/// [`Mechanism::output_density`]; tests pass deliberately broken ones).
/// `delta` > 0 switches to the approximate-GP criteria, which need Laplace
/// noise for the closed-form excess mass.
pub fn audit_densities<F>(
    density_of: F,
    epsilon: f64,
    delta: f64,
    pairs: &[InputPair],
) -> Result<(f64, Option<WorstCase>, Option<f64>)>
where
    F: Fn(&[f64]) -> Result<OutputDensity>,
{
    let offsets = output_offsets();
    let tail = if delta > 0.0 {
        (1.0 / delta).ln()
    } else {
        f64::INFINITY
    };
    let mut worst_ratio = 0.0f64;
    let mut worst: Option<WorstCase> = None;
    let mut worst_excess = if delta > 0.0 { Some(0.0f64) } else { None };
    // Pairs whose two densities differ somewhere in floating point: an
    // audit in which none do has compared nothing and must not pass.
    let mut informative = 0usize;
    for pair in pairs {
        let d = pair
            .x
            .iter()
            .zip(&pair.x_prime)
            .map(|(a, b)| (a - b) * (a - b))
            .sum::<f64>()
            .sqrt();
        if d == 0.0 {
            continue;
        }
        let p = density_of(&pair.x)?;
        let q = density_of(&pair.x_prime)?;
        let budget = epsilon * d;
        for (from, to) in [(&p, &q), (&q, &p)] {
            // Loss of outputs around `from`'s centre, within the central
            // region for approximate GP.
            let loss = |y: f64| (from.ln_pdf(y) - to.ln_pdf(y)).abs() / budget;
            let (mut best_y, mut best) = (from.location(), f64::MIN);
            // Laplace log densities are linear in y beyond both centres, so
            // the loss there is constant or monotone up to the central
            // region; far-tail points would only add rounding (ln p = -|z|
            // loses eps·|z| absolutely).
            let reach = if from.shape() == NoiseShape::Laplace {
                LAPLACE_REACH
            } else {
                f64::INFINITY
            };
            for centre in [from, to] {
                for &t in offsets.iter().filter(|t| t.abs() <= reach) {
                    let y = centre.location() + centre.scale() * t;
                    if ((y - from.location()) / from.scale()).abs() > tail {
                        continue;
                    }
                    let v = loss(y);
                    if v > best {
                        best = v;
                        best_y = y;
                    }
                }
            }
            // Refine around the best grid output.
            let step = 0.05 * from.scale().min(to.scale());
            let (y, v) = golden_max(&loss, best_y - step, best_y + step, 60);
            if v > best && ((y - from.location()) / from.scale()).abs() <= tail {
                best = v;
                best_y = y;
            }
            if best > 0.0 {
                informative += 1;
            }
            if best > worst_ratio {
                worst_ratio = best;
                worst = Some(WorstCase {
                    x: pair.x.clone(),
                    x_prime: pair.x_prime.clone(),
                    distance: d,
                    output: best_y,
                    loss_ratio: best,
                });
            }
            if let Some(excess) = worst_excess.as_mut() {
                let mass = laplace_excess_mass(
                    from.location(),
                    from.scale(),
                    to.location(),
                    to.scale(),
                    budget,
                );
                *excess = excess.max(mass);
            }
        }
    }
    if informative == 0 {
        return Err(crate::Error::Unauditable {
            reason: "no pair's release densities differ in floating point (e.g. an epsilon so small that every loss rounds to 0): the audit would compare nothing",
        });
    }
    Ok((worst_ratio, worst, worst_excess))
}

/// Audit a mechanism on a query with `pairs` input pairs drawn with `seed`.
/// Noise a priori and local DP are not location–scale geo-private
/// releases of f and are refused (their guarantees are about x or about
/// all inputs alike).
pub fn audit_mechanism<Q: AuditTarget + ?Sized>(
    mechanism: &Mechanism,
    query: &Q,
    pairs: usize,
    seed: u64,
) -> Result<AuditReport> {
    if matches!(
        mechanism.name(),
        crate::MechanismName::APriori | crate::MechanismName::Ldp
    ) {
        return Err(crate::Error::InvalidParameter {
            name: "mechanism",
            value: f64::NAN,
            requirement:
                "a geo-private release of f (polyplace, student-t, cauchy, laplace, global-laplace)",
        });
    }
    let epsilon = mechanism.epsilon();
    let delta = mechanism.delta();
    check_audit_inputs(query, epsilon, pairs)?;
    let input_pairs = audit_pairs(query, epsilon, pairs, seed);
    let density_of = |x: &[f64]| {
        mechanism
            .output_density(query, x)?
            .ok_or(crate::Error::Numerical {
                routine: "mechanism has no output density",
            })
    };
    let (max_loss_ratio, worst_pair, excess_mass) =
        audit_densities(density_of, epsilon, delta, &input_pairs)?;
    let passed =
        max_loss_ratio <= 1.0 + LOSS_RATIO_TOLERANCE && excess_mass.is_none_or(|m| m <= delta);
    Ok(AuditReport {
        mechanism: mechanism.name().as_str().into(),
        query: query.describe(),
        epsilon,
        delta,
        pairs: input_pairs.len(),
        max_loss_ratio,
        worst_pair,
        excess_mass,
        passed,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn laplace_excess_mass_matches_quadrature() {
        let (a, b1, m, b2, c) = (0.0, 1.0, 0.7, 1.3, 0.4);
        let exact = laplace_excess_mass(a, b1, m, b2, c);
        let pa = |y: f64| (-(y - a).abs() / b1).exp() / (2.0 * b1);
        let pb = |y: f64| (-(y - m).abs() / b2).exp() / (2.0 * b2);
        let n = 400_000;
        let (lo, hi) = (-60.0, 60.0);
        let h = (hi - lo) / n as f64;
        let numeric: f64 = (0..n)
            .map(|i| {
                let y = lo + (i as f64 + 0.5) * h;
                (pa(y) - c.exp() * pb(y)).max(0.0) * h
            })
            .sum();
        assert!((exact - numeric).abs() < 1e-8, "{exact} vs {numeric}");
        assert_eq!(laplace_excess_mass(0.0, 1.0, 0.0, 1.0, 0.1), 0.0);
    }

    #[test]
    fn pairs_are_reproducible_and_sized() {
        let q = SoftThreshold::new(0.0, 1.0).unwrap();
        let a = audit_pairs(&q, 1.0, 1000, 7);
        assert_eq!(a.len(), 1000);
        assert_eq!(a, audit_pairs(&q, 1.0, 1000, 7));
    }
}
