//! Privacy audits over neighbouring datasets (`docs/MATH.md §11.4`).
//!
//! * **Density audit** (exact): for adversarial pairs of neighbouring
//!   datasets (one record moved across the median, to 0 or to Λ, out of a
//!   tie block, ...) compute both output densities of a central mechanism
//!   and check, in both directions, max_y ln(p_x(y)/p_x'(y)) <= ε
//!   (pure mechanisms; dense output grid around both centres and far into
//!   the tails) or the excess mass ∫ max(0, p_x - e^ε p_x') <= δ
//!   (approximate ones; adaptive quadrature). Selection mechanisms have
//!   finite outputs, so their probabilities are compared directly.
//! * **Sampling check** (black box): the library's one sampling tester
//!   ([`crate::audit::sampling`], pilot-chosen sets, Clopper–Pearson bounds
//!   with Bonferroni) run on dataset pairs: a dataset is the tester's input
//!   vector and the release is the mechanism's *implemented* (snapped)
//!   output, with δ subtracted for the approximate mechanisms
//!   ([`sampling_check_median`]).

use super::instance_based::{InstanceBasedLaplace, LevelStructure};
use super::median::{MedianMechanism, ReleaseDensity, SortedDataset};
use super::noisy_max::SmoothNoisyMax;
use super::{integrate, Fault};
use crate::audit::sampling::{test_pair_approx, PairVerdict, SamplingOptions};
use crate::error::Result;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use std::string::String;
use std::vec::Vec;
use std::{format, vec};

/// Relative tolerance on ε for the pure audits (rounding of ln-densities).
pub const RATIO_TOLERANCE: f64 = 1e-9;

/// Result of an audit.
#[derive(Clone, Debug, PartialEq)]
pub struct CentralAuditReport {
    /// What was audited.
    pub mechanism: String,
    /// ε of the guarantee.
    pub epsilon: f64,
    /// δ of the guarantee.
    pub delta: f64,
    /// Number of ordered pairs checked.
    pub pairs: usize,
    /// Largest ln ratio seen (pure) — for approximate mechanisms the largest
    /// ln ratio outside the tails is informative only.
    pub max_log_ratio: f64,
    /// Largest excess mass ∫ max(0, p_x - e^ε p_x') (approximate).
    pub max_excess_mass: f64,
    /// Description of the worst pair.
    pub worst: String,
    /// Whether the guarantee held on every pair.
    pub passed: bool,
}

impl CentralAuditReport {
    fn new(mechanism: String, epsilon: f64, delta: f64) -> Self {
        Self {
            mechanism,
            epsilon,
            delta,
            pairs: 0,
            max_log_ratio: f64::NEG_INFINITY,
            max_excess_mass: 0.0,
            worst: String::new(),
            passed: true,
        }
    }

    /// Record one ordered pair: its worst ln ratio and excess mass; the
    /// pair fails on excess mass above δ (approximate mechanisms) or a
    /// ratio above ε (1 + `tolerance`) (pure ones). The worst pair is the
    /// one with the largest mass (approximate) or ratio (pure).
    fn record(&mut self, ratio: f64, mass: f64, tolerance: f64, describe: impl FnOnce() -> String) {
        self.pairs += 1;
        let approximate = self.delta > 0.0;
        let (key, worst_key) = if approximate {
            (mass, self.max_excess_mass)
        } else {
            (ratio, self.max_log_ratio)
        };
        if key > worst_key || self.worst.is_empty() {
            self.worst = describe();
        }
        self.max_log_ratio = self.max_log_ratio.max(ratio);
        self.max_excess_mass = self.max_excess_mass.max(mass);
        let bad = if approximate {
            mass > self.delta * (1.0 + tolerance)
        } else {
            ratio > self.epsilon * (1.0 + tolerance)
        };
        if bad {
            self.passed = false;
        }
    }
}

/// Adversarial and random pairs of neighbouring datasets of size n (odd and
/// even n both occur) over [0, Λ], for the q-quantile.
pub fn neighbouring_pairs(lambda: f64, q: f64, seed: u64) -> Vec<(Vec<f64>, Vec<f64>)> {
    let mut rng = StdRng::seed_from_u64(seed);
    let mut bases: Vec<Vec<f64>> = Vec::new();
    for &n in &[1usize, 2, 5, 8, 21] {
        bases.push(vec![0.5 * lambda; n]); // all equal
        bases.push((0..n).map(|_| rng.random::<f64>() * lambda).collect());
        bases.push(
            (0..n)
                .map(|i| if i % 2 == 0 { 0.0 } else { lambda })
                .collect(),
        ); // the two ends
        bases.push(
            (0..n)
                .map(|i| lambda * (0.45 + 0.1 * (i as f64) / n as f64))
                .collect(),
        ); // a tight cluster
        bases.push(
            (0..n)
                .map(|i| {
                    if i < n / 2 {
                        0.1 * lambda
                    } else {
                        0.9 * lambda
                    }
                })
                .collect(),
        ); // a gap at the median
    }
    let mut pairs = Vec::new();
    for base in bases {
        let mut sorted = base.clone();
        sorted.sort_by(f64::total_cmp);
        let n = sorted.len();
        let m = super::median::quantile_rank(n, q).unwrap_or(1);
        let mut targets = vec![0.0, lambda, 0.5 * lambda, rng.random::<f64>() * lambda];
        if m < n {
            targets.push(sorted[m]); // just above the quantile
        }
        if m >= 2 {
            targets.push(sorted[m - 2]); // just below
        }
        let movers = [0, m - 1, n - 1, n / 2];
        for &i in &movers {
            for &t in &targets {
                let mut other = sorted.clone();
                other[i] = t;
                if other != sorted {
                    pairs.push((sorted.clone(), other));
                }
            }
        }
    }
    pairs
}

/// Output points: dense around the centres and far into the tails.
fn output_grid(centres: &[(f64, f64)]) -> Vec<f64> {
    let mut zs: Vec<f64> = (-1000..=1000).map(|i| i as f64 * 0.01).collect();
    for i in 0..=200 {
        let z = 10f64.powf(-4.0 + 16.0 * i as f64 / 200.0);
        zs.push(z);
        zs.push(-z);
    }
    let mut ys = Vec::with_capacity(zs.len() * centres.len());
    for &(c, s) in centres {
        ys.extend(zs.iter().map(|z| c + s * z));
    }
    ys
}

/// ∫ max(0, p(y) - e^ε q(y)) dy for two location–scale densities.
fn excess_mass(p: &ReleaseDensity, q: &ReleaseDensity, epsilon: f64) -> f64 {
    let bound = epsilon;
    let f = |t: f64| {
        let om = 1.0 - t * t;
        if om <= 0.0 {
            return 0.0;
        }
        let y = p.location + p.scale * t / om;
        let dy = p.scale * (1.0 + t * t) / (om * om);
        let lp = p.ln_pdf(y);
        let lq = q.ln_pdf(y) + bound;
        if lp <= lq {
            0.0
        } else {
            let v = (lp.exp() - lq.exp()) * dy;
            if v.is_finite() {
                v
            } else {
                0.0
            }
        }
    };
    integrate(&f, -1.0, 1.0, 1e-11)
}

/// Worst ln ratio and excess mass between two release densities.
fn compare(p: &ReleaseDensity, q: &ReleaseDensity, epsilon: f64, approximate: bool) -> (f64, f64) {
    let grid = output_grid(&[(p.location, p.scale), (q.location, q.scale)]);
    let mut worst = f64::NEG_INFINITY;
    for y in grid {
        let r = p.ln_pdf(y) - q.ln_pdf(y);
        if r.is_finite() {
            worst = worst.max(r);
        }
    }
    let mass = if approximate {
        excess_mass(p, q, epsilon)
    } else {
        0.0
    };
    (worst, mass)
}

/// Density audit of a median / quantile mechanism over the given pairs.
pub fn audit_median(
    mech: &MedianMechanism,
    q: f64,
    pairs: &[(Vec<f64>, Vec<f64>)],
) -> Result<CentralAuditReport> {
    let eps = mech.epsilon();
    let delta = mech.delta();
    let mut report = CentralAuditReport::new(
        format!("{} beta={}", mech.kind().name(), mech.beta()),
        eps,
        delta,
    );
    for (x, xp) in pairs {
        let dx = SortedDataset::new(x, mech.lambda())?;
        let dxp = SortedDataset::new(xp, mech.lambda())?;
        let px = mech.density(&dx, q)?;
        let pxp = mech.density(&dxp, q)?;
        for (a, b, name) in [(&px, &pxp, (x, xp)), (&pxp, &px, (xp, x))] {
            let (ratio, mass) = compare(a, b, eps, delta > 0.0);
            report.record(ratio, mass, RATIO_TOLERANCE, || {
                format!("{:?} vs {:?}", name.0, name.1)
            });
        }
    }
    Ok(report)
}

/// Worst ln ratio (over outputs of probability above 1e-12, below that is
/// quadrature noise) and excess mass Σ max(0, p_a - e^ε p_b) of two
/// selection distributions.
fn compare_discrete(a: &[f64], b: &[f64], epsilon: f64) -> (f64, f64) {
    let mut ratio = f64::NEG_INFINITY;
    let mut mass = 0.0;
    for (pa, pb) in a.iter().zip(b.iter()) {
        if *pa > 1e-12 {
            ratio = ratio.max((pa / pb.max(1e-300)).ln());
        }
        mass += (pa - epsilon.exp() * pb).max(0.0);
    }
    (ratio, mass)
}

/// The β and the factor on S that a fault makes a mechanism use.
fn faulty(beta: f64, fault: Fault) -> (f64, f64) {
    match fault {
        Fault::None => (beta, 1.0),
        Fault::HalveSensitivity => (beta, 0.5),
        Fault::ShrinkSensitivity(f) => (beta, f),
        Fault::WrongBeta(f) => (beta * f, 1.0),
    }
}

/// Density audit of Smooth Noisy Max for percentile selection: candidates
/// on a grid over [0, Λ], utility u(x, c) = -|x_(m) - c| (its local
/// sensitivity is at most that of x_(m)), S = S*_β of the quantile
/// (with an optional fault).
pub fn audit_noisy_max(
    snm: &SmoothNoisyMax,
    fault: Fault,
    lambda: f64,
    candidates: usize,
    q: f64,
    pairs: &[(Vec<f64>, Vec<f64>)],
) -> Result<CentralAuditReport> {
    let eps = snm.epsilon();
    let delta = snm.delta();
    let grid: Vec<f64> = (0..candidates)
        .map(|i| lambda * i as f64 / (candidates.max(2) - 1) as f64)
        .collect();
    let probs = |x: &[f64]| -> Result<Vec<f64>> {
        let d = SortedDataset::new(x, lambda)?;
        let m = d.quantile_rank(q)?;
        let v = d.order_statistic(m)?;
        let (beta, factor) = faulty(snm.beta(), fault);
        let s = factor * d.smooth_sensitivity(m, beta)?;
        let u: Vec<f64> = grid.iter().map(|c| -(v - c).abs()).collect();
        snm.probabilities(&u, s)
    };
    let mut report = CentralAuditReport::new(
        format!("smooth-noisy-max beta={} fault={fault:?}", snm.beta()),
        eps,
        delta,
    );
    for (x, xp) in pairs {
        let (p, pp) = (probs(x)?, probs(xp)?);
        for (a, b) in [(&p, &pp), (&pp, &p)] {
            let (ratio, mass) = compare_discrete(a, b, eps);
            report.record(ratio, mass, 1e-4, || format!("{x:?} vs {xp:?}"));
        }
    }
    Ok(report)
}

/// Density audit of Smooth Noisy Max on the instances where the dilation
/// touches every candidate (`docs/MATH.md §11.2`): candidate 0 at utility
/// 0 and the other |R| - 1 at one margin -g·S, for |R| in `sizes` and
/// g from 0 to 300. The neighbour moves candidate 0 by ±S (or not) and
/// has smooth bound S' = e^{±β} S (the two premises of the guarantee:
/// |u - u'|∞ <= S, S'/S ∈ [e^-β, e^β]); a fault shrinks the scale used
/// or dilates by e^{±fβ}.
pub fn audit_noisy_max_margins(
    snm: &SmoothNoisyMax,
    fault: Fault,
    sizes: &[usize],
) -> Result<CentralAuditReport> {
    let eps = snm.epsilon();
    let (beta, factor) = faulty(snm.beta(), fault);
    let mut report = CentralAuditReport::new(
        format!(
            "smooth-noisy-max margins beta={} fault={fault:?}",
            snm.beta()
        ),
        eps,
        snm.delta(),
    );
    for &r in sizes {
        for gap in [0.0, 1.0, 3.0, 10.0, 30.0, 100.0, 300.0] {
            for (dilate, shift) in [
                (1.0, 1.0),
                (-1.0, 1.0),
                (1.0, -1.0),
                (-1.0, -1.0),
                (1.0, 0.0),
                (-1.0, 0.0),
            ] {
                let s2 = (dilate * beta).exp();
                let mut u = vec![-gap; r];
                u[0] = 0.0;
                let mut u2 = u.clone();
                u2[0] += shift * s2.min(1.0);
                let p = snm.probabilities(&u, factor)?;
                let q = snm.probabilities(&u2, factor * s2)?;
                for (a, b) in [(&p, &q), (&q, &p)] {
                    let (ratio, mass) = compare_discrete(a, b, eps);
                    report.record(ratio, mass, 1e-4, || {
                        format!("|R| = {r}, margin {gap} S, S'/S = {s2}, shift {shift} S")
                    });
                }
            }
        }
    }
    Ok(report)
}

/// Density audit of Algorithm 1 over a level structure: for every pair of
/// neighbouring levels (and each level with itself), the two Laplace
/// releases with centres |f(x) - f(x')| = min(LS_k, LS_l) apart.
pub fn audit_instance_based(
    mech: &InstanceBasedLaplace,
    levels: &LevelStructure,
    neighbour_pairs: &[(usize, usize)],
    fault: Fault,
) -> Result<CentralAuditReport> {
    use super::Noise;
    use crate::noise::Laplace;
    let eps = mech.epsilon();
    let delta = mech.delta();
    let mut report = CentralAuditReport::new(
        format!(
            "instance-based eps_A={} fault={fault:?}",
            mech.epsilon_algorithm()
        ),
        eps,
        delta,
    );
    let mut all: Vec<(usize, usize)> = neighbour_pairs.to_vec();
    all.extend((0..levels.len()).map(|k| (k, k)));
    for (k, l) in all {
        let shift = levels
            .local_sensitivity(k)
            .unwrap_or(0.0)
            .min(levels.local_sensitivity(l).unwrap_or(0.0));
        let unit = Noise::Laplace(Laplace::new(1.0)?);
        let a = ReleaseDensity {
            location: 0.0,
            scale: mech.scale_with_fault(k, fault),
            noise: unit,
        };
        for sign in [1.0, -1.0] {
            let b = ReleaseDensity {
                location: sign * shift,
                scale: mech.scale_with_fault(l, fault),
                noise: unit,
            };
            for (p, q) in [(&a, &b), (&b, &a)] {
                let (ratio, mass) = compare(p, q, eps, true);
                report.record(ratio, mass, 0.0, || format!("levels {k} and {l}"));
            }
        }
    }
    Ok(report)
}

/// Black-box check of one pair of datasets with the library's sampling
/// tester ([`crate::audit::sampling::test_pair_approx`]): the release is
/// the mechanism's implemented q-quantile release (snapped to its grid),
/// the bound tested is ln((P_x(O) - δ)/P_x'(O)) <= ε. A failing verdict
/// is a certified violation (false alarm probability `options.alpha`).
pub fn sampling_check_median(
    mech: &MedianMechanism,
    q: f64,
    x: &[f64],
    x_prime: &[f64],
    options: &SamplingOptions,
) -> Result<PairVerdict> {
    let release = |data: &[f64], rng: &mut StdRng| mech.release_quantile(data, q, rng);
    test_pair_approx(&release, x, x_prime, mech.epsilon(), mech.delta(), options)
}
