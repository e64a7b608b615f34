//! Interval formation for the maps (std only; docs/MATH.md §9.7).
//!
//! Every map states one standard error per cell, and centre ± 1.96·SE is
//! its 95% interval (the centre the value; for the EM map the λ = 1 map's
//! value, whose interval it publishes, branch emk1). For an estimator with an estimated bias b̂ and standard
//! error s, the interval is the bias-aware one (Armstrong & Kolesár): the
//! half-width c·s with c = [`bias_aware_critical_value`]`(|b̂|/s)`, the
//! 95% quantile of |N(t, 1)| at t = |b̂|/s, so that an estimate with
//! bias exactly b̂ and Gaussian error of sd s is covered with probability
//! 0.95; the stated SE is c·s/1.96.

use super::deconv::EmMap;
use crate::server::aggregate::Z_95;
use std::vec::Vec;

/// The share of the noise-law plug-in variance that floors a kernel map's
/// sample variance (docs/MATH.md §9.7): 1/4, i.e. half its standard error.
/// Measured on the coast population at n = 10^4 (cell-averaged coverage at
/// εh = 0.3 / 1 / 10): share 1 gave 0.98 at εh = 1 (over 0.97: every sea
/// cell covered and the land widened), 1/16 gave 0.90-0.93 at εh = 0.3,
/// 1/4 gave 0.94-0.97 at all three.
pub const PLUG_IN_SHARE: f64 = 0.25;

/// The sample variance behind a kernel map's published SE is smoothed by a
/// Gaussian of sd `VARIANCE_SMOOTHING / ε` (docs/MATH.md §9.7, "A smoothed
/// sample variance", branch cover23):
///
/// ```text
/// v̂^σ_j = (1/n) Σ_i ((K_λ² − D_λ) * G_σ)(t_j − x̃_i),   σ = VARIANCE_SMOOTHING / ε,
/// ```
///
/// whose mean is v * G_σ. The raw v̂_j rises and falls with the counts
/// near t_j, as the map's own error does (their correlation was 0.44 at
/// n = 10^4, εh = 0.3 on the city), so cells whose counts fell low were
/// given small SEs and missed below; the smoothed variance reads counts
/// from farther away. σ scales with the noise (1/ε), so it acts where
/// the noise is wide against the kernel (low εh) and vanishes at high εh
/// (σ = 0.04·h at εh = 10).
///
/// ```
/// let eps = 0.3 / 471.4;
/// let sigma = geopriv::map::VARIANCE_SMOOTHING / eps;
/// assert!(sigma > 471.4 && sigma < 2.0 * 471.4);
/// ```
pub const VARIANCE_SMOOTHING: f64 = 0.4;

/// A kernel map's standard error at one cell (docs/MATH.md §9.7):
///
/// ```text
/// SE_j = max( √( max(v̂_j, PLUG_IN_SHARE · u_j) / n ), floor )
/// ```
///
/// with v̂_j the unbiased sample estimate of the per-device conditional
/// variance ([`FftMapper::conditional_variances`](super::FftMapper::conditional_variances)
/// without its 1% floor), u_j the noise-law plug-in (the same variance
/// evaluated as if every device sat at its noisy location,
/// [`FftMapper::variances_with_plug_in`](super::FftMapper::variances_with_plug_in)),
/// n the reports and `floor` the FFT's round-off. Where many reports
/// reach the cell, v̂_j ≈ v_j and u_j (a once more blurred population's
/// variance) is near it, so the quarter rarely binds; beyond a
/// population's edge (a coastline) v_j is made of rare reports landing
/// near the cell, a typical draw holds none of them and v̂_j is far below
/// v_j, while u_j spreads every report over the noise law and is not.
/// NaN inputs other than the floor are ignored by `max` (a NaN v̂ falls
/// back to the plug-in); a non-positive n gives +∞.
///
/// ```
/// use geopriv::map::kernel_standard_error;
/// // Land: the sample variance governs.
/// assert_eq!(kernel_standard_error(4.0, 8.0, 100.0, 0.0), 0.2);
/// // Sea: half the plug-in's standard error.
/// assert_eq!(kernel_standard_error(0.0, 16.0, 100.0, 0.0), 0.2);
/// ```
pub fn kernel_standard_error(sample_variance: f64, plug_in: f64, n: f64, floor: f64) -> f64 {
    if n.is_nan() || n <= 0.0 {
        return f64::INFINITY;
    }
    let v = sample_variance.max(PLUG_IN_SHARE * plug_in).max(0.0);
    (v / n).sqrt().max(floor)
}

/// Standard normal cdf.
fn phi(x: f64) -> f64 {
    0.5 * (1.0 + libm::erf(x / core::f64::consts::SQRT_2))
}

/// The share of cells whose 95% interval covers its target:
/// (1/m)·#{j : |value_j − target_j| <= 1.96·SE_j} over the m cells (the
/// coverage measured by `geopriv map sweep --coverage` and the map tests;
/// cells beyond the shortest of the three slices are not counted; 0 for no
/// cell).
///
/// ```
/// let c = geopriv::map::interval_coverage(&[0.0, 1.0], &[1.0, 0.1], &[1.0, 2.0]);
/// assert_eq!(c, 0.5);
/// ```
pub fn interval_coverage(values: &[f64], standard_errors: &[f64], targets: &[f64]) -> f64 {
    let m = values.len().min(standard_errors.len()).min(targets.len());
    if m == 0 {
        return 0.0;
    }
    let hit = values
        .iter()
        .zip(standard_errors)
        .zip(targets)
        .filter(|((v, s), t)| (*v - *t).abs() <= 1.96 * **s)
        .count();
    hit as f64 / m as f64
}

/// The c >= 1.96 with P(|N(t, 1)| <= c) = Φ(c - t) - Φ(-c - t) = 0.95
/// (t >= 0; c = 1.95996 at t = 0, c ≈ t + 1.645 for large t). Bisection
/// on [1.9, t + 2]; NaN for a non-finite t.
pub fn bias_aware_critical_value(t: f64) -> f64 {
    let t = t.abs();
    if !t.is_finite() {
        return f64::NAN;
    }
    let cover = |c: f64| phi(c - t) - phi(-c - t);
    let (mut lo, mut hi) = (1.9, t + 2.0);
    for _ in 0..100 {
        let mid = 0.5 * (lo + hi);
        // lo and hi adjacent (or equal) doubles: mid is one of them and
        // every later step leaves both unchanged (cover(lo) < 0.95 <=
        // cover(hi) throughout), so stopping here gives the same bits as
        // the 100 steps, at about half the erf calls (3721 cells of the
        // EM map's intervals; branch speed03).
        if mid == lo || mid == hi {
            break;
        }
        if cover(mid) < 0.95 {
            lo = mid;
        } else {
            hi = mid;
        }
    }
    0.5 * (lo + hi)
}

/// The stated standard error of a cell with bias estimate `bias` and
/// standard error `se`: value ± 1.96 × this is the bias-aware 95% interval
/// (module docs). `se` = 0 with a bias gives |bias|/1.96 (the interval
/// reaches the bias); NaN stays NaN.
pub fn bias_aware_standard_error(bias: f64, se: f64) -> f64 {
    if se.is_nan() || bias.is_nan() {
        return f64::NAN;
    }
    if se <= 0.0 {
        return bias.abs() / Z_95;
    }
    bias_aware_critical_value(bias / se) * se / Z_95
}

/// The 97.5% quantile of Student's t with `df` degrees of freedom (exact
/// table to 10, the Cornish–Fisher series beyond, 1.96 in the limit).
pub fn student_t_975(df: usize) -> f64 {
    const T: [f64; 10] = [
        12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228,
    ];
    match df {
        0 => f64::INFINITY,
        1..=10 => T[df - 1],
        _ => {
            let z: f64 = Z_95;
            let v = df as f64;
            z + (z.powi(3) + z) / (4.0 * v)
                + (5.0 * z.powi(5) + 16.0 * z.powi(3) + 3.0 * z) / (96.0 * v * v)
        }
    }
}

/// How much the planner scales the bootstrap's bias of the EM map: √2
/// (the planner charges 2 x its square, docs/MATH.md §9.6: the
/// bootstrap's truth, an EM pilot, is smoother than the devices, and
/// measured/predicted was 2.0-2.9 before the factor); one of the two
/// bias bounds of the intervals ([`em_standard_errors`]).
pub const EM_BIAS_FACTOR: f64 = core::f64::consts::SQRT_2;

/// The EM map's bias bound per unit of its distance to the pilot:
/// κ = 1/(1 − 3^{−1/2}) ≈ 2.366 (docs/MATH.md §9.7). If EM's bias along
/// its path decays at least like t^{−1/2} (|β(3t)| <= |β(t)|/√3), then
/// |β(t)| <= |M_t − M_3t|/(1 − 3^{−1/2}) in expectation, M_3t the pilot.
pub const EM_PATH_BIAS_FACTOR: f64 = 2.366_025_403_784_438;

/// EM's own bias-aware standard errors (docs/MATH.md §9.7; the EM map's
/// stated SE until branch emk1, now measured beside the published one,
/// the λ = 1 map's: [`MapAggregator::em_estimate`](super::MapAggregator::em_estimate)):
/// per cell the bias-aware interval (Armstrong & Kolesár) of a bias bound
/// and a spread,
///
/// ```text
/// B_j = max( κ·|M_t,j − M_3t,j| , √2·|b̂_j| ),   s'_j = s_j · t_{0.975, R−1}/1.96,
/// SE_j = max( c(B_j/s'_j)·s'_j/1.96 , 64·ε_mach·max_k |M_t,k| )
/// ```
///
/// with M_t the map (EM stopped at the held-out t), M_3t the bootstrap's
/// pilot ([`EmMap::pilot_values`]), κ = [`EM_PATH_BIAS_FACTOR`], b̂_j the
/// bootstrap's bias ([`EmMap::bias`], times [`EM_BIAS_FACTOR`]), s_j the
/// bootstrap spread of `replicates` replicates conditioned on the devices
/// (widened by t_{0.975, R−1}/1.96: a spread from 4 replicates has 3
/// degrees of freedom) and c the [`bias_aware_critical_value`]. The
/// floor is the round-off of the map (beyond a population's edge the EM
/// map and the truth are both 0 up to it). NaN spreads stay NaN (no
/// replicates); a map without a pilot falls back to the spread alone.
pub fn em_standard_errors(em: &EmMap, replicates: usize) -> Vec<f64> {
    let (widen, floor) = em_widening_and_floor(em, replicates);
    em.standard_errors
        .iter()
        .enumerate()
        .map(|(j, &s)| {
            let path = match (em.values.get(j), em.pilot_values.get(j)) {
                (Some(v), Some(p)) => EM_PATH_BIAS_FACTOR * (v - p).abs(),
                _ => 0.0,
            };
            let boot = em.bias.get(j).map_or(0.0, |b| EM_BIAS_FACTOR * b.abs());
            let b = path.max(boot);
            let se = bias_aware_standard_error(b, s * widen);
            if se.is_nan() {
                se
            } else {
                se.max(floor)
            }
        })
        .collect()
}

/// The t-widening t_{0.975, R−1}/1.96 of a spread from `replicates`
/// replicates and the map's round-off 64·ε_mach·max_k |M_k|: what both EM
/// intervals ([`em_standard_errors`], [`em_spread_standard_errors`]) share.
fn em_widening_and_floor(em: &EmMap, replicates: usize) -> (f64, f64) {
    let widen = student_t_975(replicates.saturating_sub(1)) / Z_95;
    let peak = em
        .values
        .iter()
        .filter(|v| v.is_finite())
        .fold(0.0f64, |a, v| a.max(v.abs()));
    (widen, 64.0 * f64::EPSILON * peak)
}

/// EM's spread-only standard errors, an interval for EM's own mean given
/// the devices (docs/MATH.md §9.7, branch emtarget: measured and **not
/// adopted**; the sweep's `--coverage` scores it beside the stated
/// interval):
///
/// ```text
/// SE_j = max( s_j · t_{0.975, R−1}/1.96 , 64·ε_mach·max_k |M_k| )
/// ```
///
/// with s_j the conditioned bootstrap spread of `replicates` replicates
/// and no bias term. NaN spreads (no replicates) stay NaN.
///
/// ```
/// # fn demo(em: &geopriv::map::EmMap) {
/// let se = geopriv::map::em_spread_standard_errors(em, 4);
/// assert_eq!(se.len(), em.standard_errors.len());
/// # }
/// ```
pub fn em_spread_standard_errors(em: &EmMap, replicates: usize) -> Vec<f64> {
    let (widen, floor) = em_widening_and_floor(em, replicates);
    em.standard_errors
        .iter()
        .map(|s| {
            let se = s * widen;
            if se.is_nan() {
                se
            } else {
                se.max(floor)
            }
        })
        .collect()
}

/// Poisson threshold on the effective number of reports of a cell (branch
/// band22, docs/MATH.md §9.7 "band22"): m* = ln 20 ≈ 3.0, where the chance
/// that no report carries weight in the cell, e^{−m}, is 5%.
///
/// ```
/// assert!((geopriv::map::EFFECTIVE_REPORTS_THRESHOLD.exp() - 20.0).abs() < 1e-9);
/// ```
pub const EFFECTIVE_REPORTS_THRESHOLD: f64 = 2.995_732_273_553_991;

/// The variance added to the standard error of a cell carried by fewer
/// than m* effective reports (m̂_j < m* = [`EFFECTIVE_REPORTS_THRESHOLD`],
/// m̂ from the reports, [`FftMapper::observed_effective_reports`](super::FftMapper::observed_effective_reports);
/// docs/MATH.md §9.7 addendum "sparse24"): ln 20 reports' worth of the
/// kernel's peak weight,
///
/// ```text
/// w = m* · (max_x |K_λ(x)| / n)²,    SE_j ← √(SE_j² + w)   where m̂_j < m*,
/// ```
///
/// one report moves the map by at most max|K_λ|/n; where hits are rare
/// (H ~ Poisson(m), m < m*), the map misses its mean by (H − m)·a/n
/// with a <= max|K_λ|, and 1.96·√(m*)·a = 3.39a covers H = 0 for every
/// m <= m* (the map 0, the truth m·a/n) and H <= m + 3.39 above. 0 for a
/// non-positive n or peak; NaN stays NaN.
///
/// ```
/// use geopriv::map::{thin_cell_variance, EFFECTIVE_REPORTS_THRESHOLD};
/// let w = thin_cell_variance(2.0, 100.0);
/// assert!((w - EFFECTIVE_REPORTS_THRESHOLD * 4e-4).abs() < 1e-15);
/// // The half-width it adds reaches m* reports' weight: 1.96·√w >= m*·2/100.
/// assert!(1.96 * w.sqrt() >= EFFECTIVE_REPORTS_THRESHOLD * 0.02);
/// ```
pub fn thin_cell_variance(peak: f64, n: f64) -> f64 {
    if peak.is_nan() || n.is_nan() {
        return f64::NAN;
    }
    if n <= 0.0 || peak <= 0.0 {
        return 0.0;
    }
    let a = peak / n;
    EFFECTIVE_REPORTS_THRESHOLD * a * a
}

/// Splits cells by the effective number of reports (branch band22,
/// docs/MATH.md §9.7 "band22"; one helper for the sweep and the tests,
/// branch band23): with m_j from [`effective_reports`] and
/// m* = [`EFFECTIVE_REPORTS_THRESHOLD`] = ln 20,
///
/// ```text
/// kept = { j : m_j >= m* },        thin = { j in live : m_j < m* },
/// ```
///
/// the cells where a calibrated Gaussian interval is possible (every cell
/// of the grid, in order) and the live cells (`live`, e.g. truth >= 10⁻¹²
/// of its peak) where it is not. A NaN m_j is in neither; an index of
/// `live` beyond `m_eff` is skipped.
///
/// ```
/// use geopriv::map::split_by_effective_reports;
/// let m = [10.0, 3.5, 2.0, 0.1, f64::NAN];
/// let (kept, thin) = split_by_effective_reports(&m, &[0, 2, 4, 9]);
/// assert_eq!(kept, vec![0, 1]);
/// assert_eq!(thin, vec![2]);
/// ```
pub fn split_by_effective_reports(m_eff: &[f64], live: &[usize]) -> (Vec<usize>, Vec<usize>) {
    let kept = (0..m_eff.len())
        .filter(|&j| m_eff[j] >= EFFECTIVE_REPORTS_THRESHOLD)
        .collect();
    let thin = live
        .iter()
        .copied()
        .filter(|&j| {
            m_eff
                .get(j)
                .is_some_and(|&m| m < EFFECTIVE_REPORTS_THRESHOLD)
        })
        .collect();
    (kept, thin)
}

/// ln I0e(x) = ln(e^{−x} I0(x)) for x >= 0 (Abramowitz & Stegun 9.8.1–2,
/// relative error below 2e-7).
fn ln_i0e(x: f64) -> f64 {
    let x = x.abs();
    if x <= 3.75 {
        let t = (x / 3.75) * (x / 3.75);
        let p = 1.0
            + t * (3.515_622_9
                + t * (3.089_942_4
                    + t * (1.206_749_2 + t * (0.265_973_2 + t * (0.036_076_8 + t * 0.004_581_3)))));
        p.ln() - x
    } else {
        let t = 3.75 / x;
        let p = 0.398_942_28
            + t * (0.013_285_92
                + t * (0.002_253_19
                    + t * (-0.001_575_65
                        + t * (0.009_162_81
                            + t * (-0.020_577_06
                                + t * (0.026_355_37 + t * (-0.016_476_33 + t * 0.003_923_77)))))));
        p.ln() - 0.5 * x.ln()
    }
}

/// ln E[e^{−k|d·e − N|²/(2h²)}] for N planar Laplace of scale 1/ε (radial
/// density ε² s e^{−εs}): the angular average is e^{−k(d−s)²/2h²}·I0e(kds/h²),
/// the radial integral a midpoint sum (step min(1/(16ε), h/32) up to 60/ε,
/// h/32 beyond, to d + 12h), in logs.
fn ln_kernel_power_moment(d: f64, k: f64, h: f64, eps: f64, buf: &mut Vec<f64>) -> f64 {
    buf.clear();
    let smax = d + 12.0 * h;
    let near = (60.0 / eps).min(smax);
    let push = |lo: f64, hi: f64, step: f64, buf: &mut Vec<f64>| {
        if hi <= lo || step <= 0.0 {
            return;
        }
        let nodes = ((hi - lo) / step).ceil().min(1.0e6) as usize;
        let step = (hi - lo) / nodes.max(1) as f64;
        for i in 0..nodes {
            let s = lo + (i as f64 + 0.5) * step;
            let v = s.ln() - eps * s - k * (d - s) * (d - s) / (2.0 * h * h)
                + ln_i0e(k * d * s / (h * h))
                + step.ln();
            buf.push(v);
        }
    };
    push(0.0, near, (1.0 / (16.0 * eps)).min(h / 32.0), buf);
    push(near, smax, h / 32.0, buf);
    let top = buf.iter().fold(f64::NEG_INFINITY, |a, &b| a.max(b));
    if !top.is_finite() {
        return f64::NEG_INFINITY;
    }
    2.0 * eps.ln() + top + buf.iter().map(|v| (v - top).exp()).sum::<f64>().ln()
}

/// The effective number of reports that carry weight in each cell's
/// estimate (branch band22; docs/MATH.md §9.7 "band22"): with
/// Y_i = K_h(t_j − x_i − N_i) the report of device i seen through the
/// Gaussian kernel of bandwidth h (the λ = 1 map's kernel up to its
/// deconvolution factor, 1 + O(1/(εh)²)) and N_i planar Laplace of scale
/// 1/ε,
///
/// ```text
/// m_j = ( Σ_i E[Y_i²] )² / Σ_i E[Y_i⁴],
/// ```
///
/// the participation number of the reports in the cell's second moment:
/// N reports of equal weight give N; rare hits (each report lands where it
/// counts with a small chance p_i) give Σ_i p_i, the Poisson mean of the
/// hits, so the chance that no report carries weight is about e^{−m_j}.
/// Computed from the devices' locations (the truth, which only a sweep
/// or a test has) and public quantities (h, ε); the devices are grouped
/// into cells of side h/8 at their mean location. Cells are the grid's
/// points; NaN for every cell when h or ε is not positive and finite.
///
/// ```
/// use geopriv::map::{effective_reports, KdeGrid};
/// let grid = KdeGrid::square(10_000.0, 11).unwrap();
/// let h = grid.bandwidth();
/// // 1,000 devices at the centre; εh = 10.
/// let xs = vec![[5_000.0, 5_000.0]; 1_000];
/// let m = effective_reports(&grid, &xs, 10.0 / h);
/// assert!(m[60] > 900.0 && m[60] <= 1_000.0 + 1e-6);
/// // A corner, 5h away: no report reaches it in a typical draw.
/// assert!(m[0] < 1.0);
/// ```
pub fn effective_reports(grid: &super::KdeGrid, xs: &[[f64; 2]], eps: f64) -> Vec<f64> {
    let h = grid.bandwidth();
    let cells = grid.len();
    if !(h.is_finite() && h > 0.0 && eps.is_finite() && eps > 0.0) {
        return std::vec![f64::NAN; cells];
    }
    // Devices grouped on a lattice of side h/8: (count, Σx, Σy).
    let side = h / 8.0;
    let mut groups: std::collections::BTreeMap<(i64, i64), (f64, f64, f64)> = Default::default();
    for x in xs {
        if !(x[0].is_finite() && x[1].is_finite()) {
            continue;
        }
        let key = ((x[0] / side).floor() as i64, (x[1] / side).floor() as i64);
        let g = groups.entry(key).or_insert((0.0, 0.0, 0.0));
        g.0 += 1.0;
        g.1 += x[0];
        g.2 += x[1];
    }
    let sites: Vec<(f64, [f64; 2])> = groups
        .values()
        .map(|g| (g.0.ln(), [g.1 / g.0, g.2 / g.0]))
        .collect();
    if sites.is_empty() {
        return std::vec![0.0; cells];
    }
    let centres: Vec<[f64; 2]> = (0..cells).map(|j| grid.center(j)).collect();
    // The largest distance needed, for the tables.
    let (mut lo, mut hi) = ([f64::MAX; 2], [f64::MIN; 2]);
    for p in centres.iter().chain(sites.iter().map(|s| &s.1)) {
        for a in 0..2 {
            lo[a] = lo[a].min(p[a]);
            hi[a] = hi[a].max(p[a]);
        }
    }
    let dmax = ((hi[0] - lo[0]).powi(2) + (hi[1] - lo[1]).powi(2)).sqrt() + h;
    let dd = h / 16.0;
    let len = ((dmax / dd).ceil() as usize).clamp(2, 1 << 20) + 1;
    let mut buf = Vec::new();
    let table = |k: f64, buf: &mut Vec<f64>| -> Vec<f64> {
        (0..len)
            .map(|i| ln_kernel_power_moment(i as f64 * dd, k, h, eps, buf))
            .collect()
    };
    let (t2, t4) = (table(2.0, &mut buf), table(4.0, &mut buf));
    let interp = |t: &[f64], d: f64| {
        let x = (d / dd).max(0.0);
        let i = (x.floor() as usize).min(len - 2);
        let f = (x - i as f64).min(1.0);
        t[i] * (1.0 - f) + t[i + 1] * f
    };
    let mut l2 = Vec::with_capacity(sites.len());
    let mut l4 = Vec::with_capacity(sites.len());
    centres
        .iter()
        .map(|c| {
            l2.clear();
            l4.clear();
            for (lc, p) in &sites {
                let d = ((c[0] - p[0]).powi(2) + (c[1] - p[1]).powi(2)).sqrt();
                l2.push(lc + interp(&t2, d));
                l4.push(lc + interp(&t4, d));
            }
            let lse = |v: &[f64]| {
                let top = v.iter().fold(f64::NEG_INFINITY, |a, &b| a.max(b));
                if top.is_finite() {
                    top + v.iter().map(|x| (x - top).exp()).sum::<f64>().ln()
                } else {
                    f64::NEG_INFINITY
                }
            };
            let (a, b) = (lse(&l2), lse(&l4));
            if a.is_finite() && b.is_finite() {
                (2.0 * a - b).exp()
            } else {
                0.0
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn critical_value_covers_a_shifted_normal_at_95_percent() {
        assert!((bias_aware_critical_value(0.0) - 1.959_964).abs() < 1e-5);
        for t in [0.0, 0.5, 1.0, 3.0, 10.0] {
            let c = bias_aware_critical_value(t);
            assert!((phi(c - t) - phi(-c - t) - 0.95).abs() < 1e-9, "t = {t}");
        }
        assert!((bias_aware_critical_value(10.0) - (10.0 + 1.644_854)).abs() < 1e-4);
        assert!(bias_aware_critical_value(f64::INFINITY).is_nan());
        assert!((student_t_975(3) - 3.182).abs() < 1e-3);
        assert!((student_t_975(30) - 2.042).abs() < 2e-3);
        assert!((student_t_975(1000) - 1.962).abs() < 1e-3);
        assert!((bias_aware_standard_error(0.0, 2.0) - 2.0).abs() < 1e-6);
        assert!((bias_aware_standard_error(3.0, 0.0) - 3.0 / Z_95).abs() < 1e-12);
    }

    #[test]
    fn em_standard_errors_fold_the_path_bias_into_a_bias_aware_interval() {
        let em = EmMap {
            values: vec![1.0, 0.5, 0.0],
            standard_errors: vec![0.1, 0.0, f64::NAN],
            bias: vec![0.0; 3],
            pilot_values: vec![1.0, 0.6, 0.0],
            predicted_ase: 0.0,
            predicted_variance: 0.0,
            iterations: 1,
            held_out_steps: 0,
            work_cap: None,
            n: 10,
        };
        let se = em_standard_errors(&em, 4);
        // No path difference: the widened spread.
        assert!((se[0] - 0.1 * 3.182 / Z_95).abs() < 1e-9);
        // No spread: the interval reaches the bound κ·|0.5 − 0.6|.
        assert!((Z_95 * se[1] - EM_PATH_BIAS_FACTOR * 0.1).abs() < 1e-12);
        assert!(se[2].is_nan());
        assert!((EM_PATH_BIAS_FACTOR * (1.0 - 1.0 / 3f64.sqrt()) - 1.0).abs() < 1e-15);
        // A zero spread and no difference: the round-off floor.
        let flat = EmMap {
            standard_errors: vec![0.0; 3],
            pilot_values: em.values.clone(),
            ..em
        };
        assert!(em_standard_errors(&flat, 4).iter().all(|s| *s > 0.0));
    }

    #[test]
    fn kernel_standard_error_floors_the_sample_variance_by_a_quarter_plug_in() {
        assert_eq!(kernel_standard_error(4.0, 8.0, 100.0, 0.0), 0.2);
        assert_eq!(kernel_standard_error(1.0, 16.0, 100.0, 0.0), 0.2);
        assert_eq!(kernel_standard_error(-1.0, 0.0, 100.0, 0.5), 0.5);
        assert_eq!(kernel_standard_error(f64::NAN, 16.0, 100.0, 0.0), 0.2);
        assert_eq!(kernel_standard_error(1.0, 1.0, 0.0, 0.0), f64::INFINITY);
    }

    /// The bisection stopped at its fixed point gives the bits of the
    /// full 100 steps it replaces (branch speed03).
    #[test]
    fn critical_value_stops_at_the_same_bits_as_100_steps() {
        let full = |t: f64| {
            let t = t.abs();
            let cover = |c: f64| phi(c - t) - phi(-c - t);
            let (mut lo, mut hi) = (1.9, t + 2.0);
            for _ in 0..100 {
                let mid = 0.5 * (lo + hi);
                if cover(mid) < 0.95 {
                    lo = mid;
                } else {
                    hi = mid;
                }
            }
            0.5 * (lo + hi)
        };
        for i in 0..2000 {
            let t = libm::pow(10.0, -6.0 + 8.0 * i as f64 / 2000.0)
                * if i % 2 == 0 { 1.0 } else { -1.0 };
            assert_eq!(
                bias_aware_critical_value(t).to_bits(),
                full(t).to_bits(),
                "t = {t}"
            );
        }
        for t in [0.0, 1e-300, 1e30, 1e300] {
            assert_eq!(
                bias_aware_critical_value(t).to_bits(),
                full(t).to_bits(),
                "t = {t}"
            );
        }
    }
}
