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
//! * **Sampling check** (black box): draw releases under both datasets,
//!   choose candidate sets on one half of the draws, and on the other half
//!   bound ln((P_x(O) - δ)/P_x'(O)) from below with Clopper–Pearson
//!   intervals (Bonferroni over sets and directions). A lower bound above ε
//!   is a certified violation.
//!
//! TODO(after merge): the end-to-end privacy work is building a general
//! sampling tester in `src/audit/sampling.rs`; [`sampling_check`] is a
//! small one for the central releases and should be unified with it.

use super::instance_based::{InstanceBasedLaplace, LevelStructure};
use super::median::{MedianMechanism, ReleaseDensity, SortedDataset};
use super::noisy_max::SmoothNoisyMax;
use super::{integrate, Fault};
use crate::error::Result;
use crate::noise::special::beta_reg;
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
    let approximate = delta > 0.0;
    let mut report = CentralAuditReport {
        mechanism: format!("{} beta={}", mech.kind().name(), mech.beta()),
        epsilon: eps,
        delta,
        pairs: 0,
        max_log_ratio: f64::NEG_INFINITY,
        max_excess_mass: 0.0,
        worst: String::new(),
        passed: true,
    };
    for (x, xp) in pairs {
        let dx = SortedDataset::new(x, mech.lambda())?;
        let dxp = SortedDataset::new(xp, mech.lambda())?;
        let px = mech.density(&dx, q)?;
        let pxp = mech.density(&dxp, q)?;
        for (a, b, name) in [(&px, &pxp, (x, xp)), (&pxp, &px, (xp, x))] {
            report.pairs += 1;
            let (ratio, mass) = compare(a, b, eps, approximate);
            let bad = if approximate {
                mass > delta
            } else {
                ratio > eps * (1.0 + RATIO_TOLERANCE)
            };
            let key = if approximate { mass } else { ratio };
            let worst_key = if approximate {
                report.max_excess_mass
            } else {
                report.max_log_ratio
            };
            if key > worst_key || report.worst.is_empty() {
                report.worst = format!("{:?} vs {:?}", name.0, name.1);
            }
            report.max_log_ratio = report.max_log_ratio.max(ratio);
            report.max_excess_mass = report.max_excess_mass.max(mass);
            if bad {
                report.passed = false;
            }
        }
    }
    Ok(report)
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
        let (beta, factor) = match fault {
            Fault::None => (snm.beta(), 1.0),
            Fault::HalveSensitivity => (snm.beta(), 0.5),
            Fault::ShrinkSensitivity(f) => (snm.beta(), f),
            Fault::WrongBeta(f) => (snm.beta() * f, 1.0),
        };
        let s = factor * d.smooth_sensitivity(m, beta)?;
        let u: Vec<f64> = grid.iter().map(|c| -(v - c).abs()).collect();
        snm.probabilities(&u, s)
    };
    let mut report = CentralAuditReport {
        mechanism: format!("smooth-noisy-max beta={} fault={fault:?}", snm.beta()),
        epsilon: eps,
        delta,
        pairs: 0,
        max_log_ratio: f64::NEG_INFINITY,
        max_excess_mass: 0.0,
        worst: String::new(),
        passed: true,
    };
    for (x, xp) in pairs {
        let (p, pp) = (probs(x)?, probs(xp)?);
        for (a, b) in [(&p, &pp), (&pp, &p)] {
            report.pairs += 1;
            let mut ratio = f64::NEG_INFINITY;
            let mut mass = 0.0;
            for (pa, pb) in a.iter().zip(b.iter()) {
                // Probabilities below 1e-12 are quadrature noise.
                if *pa > 1e-12 {
                    ratio = ratio.max((pa / pb.max(1e-300)).ln());
                }
                mass += (pa - eps.exp() * pb).max(0.0);
            }
            let bad = if delta > 0.0 {
                mass > delta + 1e-10
            } else {
                ratio > eps * (1.0 + 1e-6)
            };
            if ratio > report.max_log_ratio {
                report.worst = format!("{x:?} vs {xp:?}");
            }
            report.max_log_ratio = report.max_log_ratio.max(ratio);
            report.max_excess_mass = report.max_excess_mass.max(mass);
            if bad {
                report.passed = false;
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
    let mut report = CentralAuditReport {
        mechanism: format!(
            "instance-based eps_A={} fault={fault:?}",
            mech.epsilon_algorithm()
        ),
        epsilon: eps,
        delta,
        pairs: 0,
        max_log_ratio: f64::NEG_INFINITY,
        max_excess_mass: 0.0,
        worst: String::new(),
        passed: true,
    };
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
                report.pairs += 1;
                let (ratio, mass) = compare(p, q, eps, true);
                if mass > report.max_excess_mass {
                    report.worst = format!("levels {k} and {l}");
                }
                report.max_log_ratio = report.max_log_ratio.max(ratio);
                report.max_excess_mass = report.max_excess_mass.max(mass);
                if mass > delta {
                    report.passed = false;
                }
            }
        }
    }
    Ok(report)
}

/// Clopper–Pearson one-sided bounds on a binomial proportion k/n at error
/// probability `alpha`: (lower, upper).
pub fn clopper_pearson(k: u64, n: u64, alpha: f64) -> (f64, f64) {
    // Beta quantile by bisection on the regularized incomplete beta.
    let quantile = |a: f64, b: f64, p: f64| {
        let (mut lo, mut hi) = (0.0f64, 1.0f64);
        for _ in 0..100 {
            let mid = 0.5 * (lo + hi);
            if beta_reg(a, b, mid, 1.0 - mid).0 < p {
                lo = mid;
            } else {
                hi = mid;
            }
        }
        0.5 * (lo + hi)
    };
    let (kf, nf) = (k as f64, n as f64);
    let lower = if k == 0 {
        0.0
    } else {
        quantile(kf, nf - kf + 1.0, alpha)
    };
    let upper = if k == n {
        1.0
    } else {
        quantile(kf + 1.0, nf - kf, 1.0 - alpha)
    };
    (lower, upper)
}

/// Result of a sampling check.
#[derive(Clone, Debug, PartialEq)]
pub struct SamplingReport {
    /// Draws per dataset.
    pub draws: usize,
    /// Largest certified lower bound on ln((P_x(O) - δ)/P_x'(O)).
    pub max_lower_log_ratio: f64,
    /// The set achieving it, as an interval.
    pub worst_set: (f64, f64),
    /// False if some lower bound exceeds ε (a certified violation).
    pub passed: bool,
}

/// Black-box sampling check of one pair of datasets: `sample_x` and
/// `sample_xp` draw one release each. Candidate sets are half-lines and
/// central intervals at empirical quantiles of the first half of the pooled
/// draws; the second half is tested, with Bonferroni-corrected
/// Clopper–Pearson bounds at overall error probability `alpha`.
pub fn sampling_check<F, G>(
    mut sample_x: F,
    mut sample_xp: G,
    draws: usize,
    epsilon: f64,
    delta: f64,
    alpha: f64,
) -> SamplingReport
where
    F: FnMut() -> f64,
    G: FnMut() -> f64,
{
    let half = draws / 2;
    let mut pool: Vec<f64> = (0..half).map(|_| sample_x()).collect();
    pool.extend((0..half).map(|_| sample_xp()));
    pool.sort_by(f64::total_cmp);
    let qs = [
        0.001, 0.005, 0.02, 0.1, 0.3, 0.5, 0.7, 0.9, 0.98, 0.995, 0.999,
    ];
    let at = |p: f64| pool[((p * pool.len() as f64) as usize).min(pool.len() - 1)];
    let mut sets: Vec<(f64, f64)> = Vec::new();
    for &p in &qs {
        sets.push((f64::NEG_INFINITY, at(p)));
        sets.push((at(p), f64::INFINITY));
    }
    for w in qs.windows(2) {
        sets.push((at(w[0]), at(w[1])));
    }
    let tx: Vec<f64> = (0..draws - half).map(|_| sample_x()).collect();
    let txp: Vec<f64> = (0..draws - half).map(|_| sample_xp()).collect();
    let n = tx.len() as u64;
    let tests = (2 * sets.len()) as f64;
    let a = alpha / (2.0 * tests);
    let mut report = SamplingReport {
        draws,
        max_lower_log_ratio: f64::NEG_INFINITY,
        worst_set: (0.0, 0.0),
        passed: true,
    };
    for &(lo, hi) in &sets {
        let inside = |v: &f64| *v > lo && *v <= hi;
        let kx = tx.iter().filter(|v| inside(v)).count() as u64;
        let kxp = txp.iter().filter(|v| inside(v)).count() as u64;
        for (k1, k2) in [(kx, kxp), (kxp, kx)] {
            let (p1_lo, _) = clopper_pearson(k1, n, a);
            let (_, p2_hi) = clopper_pearson(k2, n, a);
            let num = p1_lo - delta;
            if num <= 0.0 {
                continue;
            }
            let lr = (num / p2_hi).ln();
            if lr > report.max_lower_log_ratio {
                report.max_lower_log_ratio = lr;
                report.worst_set = (lo, hi);
            }
            if lr > epsilon {
                report.passed = false;
            }
        }
    }
    report
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn clopper_pearson_brackets_the_proportion() {
        let (lo, hi) = clopper_pearson(50, 100, 0.025);
        assert!(
            (lo - 0.398).abs() < 0.002 && (hi - 0.602).abs() < 0.002,
            "{lo} {hi}"
        );
        assert_eq!(clopper_pearson(0, 10, 0.05).0, 0.0);
        assert_eq!(clopper_pearson(10, 10, 0.05).1, 1.0);
    }
}
