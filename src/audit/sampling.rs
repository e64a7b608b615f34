//! Black-box (sampling) privacy tester (docs/MATH.md §8.2).
//!
//! The density audit of [`crate::audit`] checks formulas; it cannot see a
//! sampler that disagrees with its density. This tester only looks at
//! releases. For a pair (x, x') with budget ε d:
//!
//! 1. **Pilot.** Draw `pilot` releases under each input. From the pooled
//!    pilot values build `bins` bins with edges at the pooled quantiles;
//!    values that the pilot hits often (atoms, e.g. snapped outputs of a
//!    tiny noise scale, or a clamped f of noise a priori) get a bin each.
//! 2. **Candidate sets** (fixed before the main sample): each bin, every
//!    cumulative tail (bins below / above each edge), and the unions of
//!    the top-j bins ranked by the pilot likelihood ratio, in both
//!    directions; and four **tail sets** (attack10 O3): the values beyond
//!    each input's largest pilot release and below its smallest. A noise
//!    whose tail is cut (or piled onto one value) a few scales out has no
//!    mass beyond its own pilot's extreme and a positive mass there under
//!    the other input; the outer quantile bin, which holds the whole
//!    tail, barely moves.
//! 3. **Main sample.** Draw `samples` fresh releases under each input and
//!    count, per set O, k_x(O) and k_x'(O).
//! 4. **Bound.** With one-sided Clopper–Pearson bounds p_lo(O) <= P_x(O) and
//!    P_x'(O) <= q_hi(O), each at level α/(2M) (Bonferroni over the M
//!    set-direction tests), ln(p_lo/q_hi) <= ln(P_x(O)/P_x'(O)) for all O
//!    with probability >= 1 - α. The pair **fails** when some lower bound
//!    exceeds ε d: a geo-private mechanism fails with probability <= α
//!    (the tail sets are 4 of the sets, 8 of the M tests: alone they fail
//!    a geo-private mechanism with probability <= 4α/M).
//!
//! The Clopper–Pearson bounds are beta quantiles: p_lo = B⁻¹(α'; k, n-k+1),
//! q_hi = B⁻¹(1-α'; k+1, n-k), computed by bisection (64 halvings of
//! [0, 1], 2^-64 absolute) on the regularized incomplete beta function of
//! `noise::special` (relative error about 1e-10 for n <= 1e7, from the
//! ln Γ prefactor). To keep the bounds conservative despite that error the
//! lower bound is shrunk and the upper bound widened by a relative 1e-6.

use crate::error::{Error, Result};
use crate::noise::special::beta_reg;
use rand::rngs::StdRng;
use rand::SeedableRng;
use serde::Serialize;
use std::string::String;
use std::vec::Vec;

/// A release under test: input point and seeded generator in, value out
/// (e.g. `|x, rng| mechanism.privatize(&query, x, rng)`).
pub type Release<'a> = dyn Fn(&[f64], &mut StdRng) -> Result<f64> + Sync + 'a;

/// Sizes and levels of the tester.
#[derive(Clone, Copy, Debug, Serialize)]
pub struct SamplingOptions {
    /// Releases per input in the main sample.
    pub samples: usize,
    /// Releases per input in the pilot sample.
    pub pilot: usize,
    /// Quantile bins built on the pilot.
    pub bins: usize,
    /// Family-wise false-failure probability per pair.
    pub alpha: f64,
    /// Seed of all draws (pilot and main use different streams).
    pub seed: u64,
}

impl Default for SamplingOptions {
    fn default() -> Self {
        Self {
            samples: 200_000,
            pilot: 50_000,
            bins: 48,
            alpha: 1e-9,
            seed: 1,
        }
    }
}

/// The tester's verdict on one pair.
#[derive(Clone, Debug, Serialize)]
pub struct PairVerdict {
    /// x.
    pub x: Vec<f64>,
    /// x'.
    pub x_prime: Vec<f64>,
    /// ε d(x, x').
    pub epsilon_d: f64,
    /// The largest Clopper–Pearson lower bound of ln(P(O)/P'(O)) over the
    /// candidate sets and both directions.
    pub lower_bound: f64,
    /// lower_bound / (ε d).
    pub ratio: f64,
    /// The set attaining it, e.g. `[0.12, 0.5) under x vs x'`.
    pub set: String,
    /// Number of set-direction tests (the Bonferroni factor).
    pub tests: usize,
    /// lower_bound <= ε d.
    pub passed: bool,
}

/// The tester over many pairs.
#[derive(Clone, Debug, Serialize)]
pub struct SamplingReport {
    /// Options used.
    pub options: SamplingOptions,
    /// Pairs tested.
    pub pairs: usize,
    /// The pair with the largest lower_bound / (ε d).
    pub worst: Option<PairVerdict>,
    /// Every pair passed.
    pub passed: bool,
}

/// Sample `n` releases at x from the stream `seed`.
fn draw(release: &Release, x: &[f64], n: usize, seed: u64) -> Result<Vec<f64>> {
    let mut rng = StdRng::seed_from_u64(seed);
    (0..n).map(|_| release(x, &mut rng)).collect()
}

/// A candidate set: a union of bins (indices into the bin list).
struct Candidate {
    bins: Vec<usize>,
    name: String,
}

/// Bins: sorted disjoint intervals [lo, hi) (or a single atom value).
#[derive(Clone, Copy, Debug)]
struct Bin {
    lo: f64,
    hi: f64,
    atom: bool,
}

fn build_bins(pooled: &mut [f64], bins: usize) -> Vec<Bin> {
    pooled.sort_by(f64::total_cmp);
    let n = pooled.len();
    // Atoms: values hit by at least n/(2 bins) pilot draws.
    let mut atoms: Vec<f64> = Vec::new();
    let mut i = 0;
    while i < n {
        let mut j = i;
        while j < n && pooled[j] == pooled[i] {
            j += 1;
        }
        if (j - i) * 2 * bins >= n {
            atoms.push(pooled[i]);
        }
        i = j;
    }
    let mut edges: Vec<f64> = (1..bins)
        .map(|b| pooled[(b * n / bins).min(n - 1)])
        .collect();
    edges.extend(atoms.iter().copied());
    // An atom's bin is [a, a]; the interval bins around it exclude a.
    edges.sort_by(f64::total_cmp);
    edges.dedup();
    let mut out = Vec::new();
    let mut lo = f64::NEG_INFINITY;
    for &e in &edges {
        if e > lo {
            out.push(Bin {
                lo,
                hi: e,
                atom: false,
            });
        }
        if atoms.contains(&e) {
            out.push(Bin {
                lo: e,
                hi: e,
                atom: true,
            });
        }
        lo = e;
    }
    out.push(Bin {
        lo,
        hi: f64::INFINITY,
        atom: false,
    });
    out
}

/// The bin of y (bins sorted; intervals are [lo, hi), atoms [a, a]; an
/// interval that starts at an atom excludes it).
fn bin_of(bins: &[Bin], y: f64) -> usize {
    // First bin whose upper end is above y (or the atom equal to y).
    let mut lo = 0;
    let mut hi = bins.len();
    while lo < hi {
        let mid = (lo + hi) / 2;
        let b = bins[mid];
        let below = if b.atom { b.hi < y } else { b.hi <= y };
        if below {
            lo = mid + 1;
        } else {
            hi = mid;
        }
    }
    let k = lo.min(bins.len() - 1);
    // An interval bin [a, hi) right after the atom a: y = a belongs to the atom.
    if k > 0 && bins[k - 1].atom && bins[k - 1].lo == y {
        return k - 1;
    }
    k
}

fn counts(bins: &[Bin], ys: &[f64]) -> Vec<u64> {
    let mut c = std::vec![0u64; bins.len()];
    for &y in ys {
        c[bin_of(bins, y)] += 1;
    }
    c
}

fn describe(bins: &[Bin], set: &[usize]) -> String {
    if set.len() == 1 {
        let b = bins[set[0]];
        return if b.atom {
            std::format!("{{{}}}", b.lo)
        } else {
            std::format!("[{}, {})", b.lo, b.hi)
        };
    }
    let (first, last) = (set.iter().min().copied(), set.iter().max().copied());
    match (first, last) {
        (Some(f), Some(l)) if l - f + 1 == set.len() => {
            std::format!("[{}, {})", bins[f].lo, bins[l].hi)
        }
        _ => std::format!("union of {} bins", set.len()),
    }
}

fn candidates(bins: &[Bin], pilot_x: &[u64], pilot_y: &[u64]) -> Vec<Candidate> {
    let nb = bins.len();
    let mut out = Vec::new();
    let mut push = |set: Vec<usize>| {
        let name = describe(bins, &set);
        out.push(Candidate { bins: set, name });
    };
    for b in 0..nb {
        push(std::vec![b]);
    }
    for b in 1..nb {
        push((0..b).collect());
        push((b..nb).collect());
    }
    // Unions ranked by the pilot likelihood ratio (both directions).
    let mut order: Vec<usize> = (0..nb).collect();
    let ratio = |b: usize| (pilot_x[b] as f64 + 0.5).ln() - (pilot_y[b] as f64 + 0.5).ln();
    order.sort_by(|&a, &b| ratio(b).total_cmp(&ratio(a)));
    for j in 2..nb {
        push(order[..j].to_vec());
        push(order[nb - j..].to_vec());
    }
    out
}

/// One-sided Clopper–Pearson lower bound for k successes in n at level a.
pub fn clopper_pearson_lower(k: u64, n: u64, a: f64) -> f64 {
    if k == 0 {
        return 0.0;
    }
    // P(Bin(n, p) >= k) = I_p(k, n - k + 1), increasing in p: find = a.
    let (kk, rest) = (k as f64, (n - k + 1) as f64);
    let p = bisect(|p| beta_reg(kk, rest, p, 1.0 - p).0 >= a);
    p * (1.0 - 1e-6)
}

/// One-sided Clopper–Pearson upper bound for k successes in n at level a.
pub fn clopper_pearson_upper(k: u64, n: u64, a: f64) -> f64 {
    if k >= n {
        return 1.0;
    }
    // P(Bin(n, p) <= k) = 1 - I_p(k + 1, n - k), decreasing in p: find = a.
    let (kk, rest) = ((k + 1) as f64, (n - k) as f64);
    let p = bisect(|p| beta_reg(kk, rest, p, 1.0 - p).1 <= a);
    (p * (1.0 + 1e-6)).min(1.0)
}

/// The smallest p in [0, 1] (to 2^-64 absolute) where the monotone
/// predicate holds.
fn bisect<F: Fn(f64) -> bool>(pred: F) -> f64 {
    let (mut lo, mut hi) = (0.0f64, 1.0f64);
    for _ in 0..64 {
        let mid = 0.5 * (lo + hi);
        if pred(mid) {
            hi = mid;
        } else {
            lo = mid;
        }
    }
    hi
}

/// The largest Clopper–Pearson lower bound of ln((P(O) − δ)/P'(O)) over
/// `sets` (counts `main_x`, `main_y` of `n` draws each, both directions,
/// each bound at level `level`) folded into `best` (value, description
/// prefixed with `prefix`).
#[allow(clippy::too_many_arguments)]
fn absorb_sets(
    sets: &[Candidate],
    main_x: &[u64],
    main_y: &[u64],
    n: u64,
    level: f64,
    delta: f64,
    prefix: &str,
    best: &mut (f64, String),
) {
    for set in sets {
        let kx: u64 = set.bins.iter().map(|&b| main_x[b]).sum();
        let ky: u64 = set.bins.iter().map(|&b| main_y[b]).sum();
        absorb_counts(kx, ky, &set.name, n, level, delta, prefix, best);
    }
}

/// [`absorb_sets`] for one set O with counts `kx` = k_x(O), `ky` = k_x'(O).
#[allow(clippy::too_many_arguments)]
fn absorb_counts(
    kx: u64,
    ky: u64,
    name: &str,
    n: u64,
    level: f64,
    delta: f64,
    prefix: &str,
    best: &mut (f64, String),
) {
    for (a, b, dir) in [(kx, ky, "x vs x'"), (ky, kx, "x' vs x")] {
        // p_lo <= a/n and q_hi >= b/n, so the bound is at most
        // ln(a/b): skip sets that cannot beat the best so far.
        if a == 0 || (b > 0 && (a as f64 / b as f64).ln() <= best.0) {
            continue;
        }
        let lo = clopper_pearson_lower(a, n, level) - delta;
        if lo <= 0.0 {
            continue;
        }
        let hi = clopper_pearson_upper(b, n, level);
        let bound = (lo / hi).ln();
        if bound > best.0 {
            *best = (bound, std::format!("{prefix}{name} under {dir}"));
        }
    }
}

/// The tail sets of a pair (attack10 O3), fixed by the pilot: beyond each
/// input's largest pilot release, (max pilot_x, ∞) and (max pilot_x', ∞),
/// and below each one's smallest, (−∞, min pilot_x) and (−∞, min pilot_x').
/// The quantile bins put a whole tail in one outer bin whose mass barely
/// moves when the tail beyond a few scales is cut (or piled onto one
/// value); these sets isolate what lies beyond what one input ever showed
/// in the pilot, where a cut tail has mass 0 under that input and a
/// positive mass under the other. As (threshold, above, name).
fn tail_sets(pilot_x: &[f64], pilot_y: &[f64]) -> Vec<(f64, bool, String)> {
    let mut out = Vec::with_capacity(4);
    for (pilot, who) in [(pilot_x, "x"), (pilot_y, "x'")] {
        let max = pilot.iter().copied().fold(f64::NEG_INFINITY, f64::max);
        let min = pilot.iter().copied().fold(f64::INFINITY, f64::min);
        out.push((max, true, std::format!("({max}, ∞) (beyond {who}'s pilot)")));
        out.push((
            min,
            false,
            std::format!("(−∞, {min}) (below {who}'s pilot)"),
        ));
    }
    out
}

/// How many of `ys` lie in the tail set (threshold, above).
fn tail_count(ys: &[f64], threshold: f64, above: bool) -> u64 {
    ys.iter()
        .filter(|&&y| if above { y > threshold } else { y < threshold })
        .count() as u64
}

/// Check δ and the sizes of a tester run; the base of its seed streams.
fn stream_seed(delta: f64, options: &SamplingOptions) -> Result<u64> {
    if !(0.0..1.0).contains(&delta) {
        return Err(Error::InvalidParameter {
            name: "delta",
            value: delta,
            requirement: "in [0, 1)",
        });
    }
    if options.samples == 0 || options.pilot == 0 || options.bins < 2 {
        return Err(Error::InvalidParameter {
            name: "samples",
            value: options.samples as f64,
            requirement: "samples, pilot >= 1 and bins >= 2",
        });
    }
    Ok(options.seed.wrapping_mul(0x9E37_79B9_7F4A_7C15))
}

/// A release of a whole report sequence (`docs/MATH.md §12.4`): a
/// trajectory (one point per period) and a seeded generator in, one
/// output per period out (`None`: no report that period). Everything the
/// device holds (its secret, its ledger) is drawn from the generator, so
/// the tester averages over devices as well as over noise.
pub type SequenceRelease<'a> =
    dyn Fn(&[Vec<f64>], &mut StdRng) -> Result<Vec<Option<f64>>> + Sync + 'a;

/// The statistics of a report sequence on which the sequence tester builds
/// its candidate events: the events are unions of pooled-quantile bins of
/// one statistic, as for single releases.
pub const SEQUENCE_STATISTICS: [&str; 8] = [
    "reports sent",
    "distinct reports",
    "first report",
    "period of the first report",
    "largest report",
    "smallest report",
    "mean report",
    "last report",
];

/// Stand-in for "no report" in a value statistic (finite, below any report).
const NO_REPORT: f64 = -1e300;

fn sequence_statistics(y: &[Option<f64>]) -> [f64; 8] {
    let sent: Vec<f64> = y.iter().flatten().copied().collect();
    let mut sorted = sent.clone();
    sorted.sort_by(f64::total_cmp);
    sorted.dedup();
    let first_period = y.iter().position(|v| v.is_some()).unwrap_or(y.len());
    let or_none = |v: Option<f64>| v.unwrap_or(NO_REPORT);
    [
        sent.len() as f64,
        sorted.len() as f64,
        or_none(sent.first().copied()),
        first_period as f64,
        or_none(sorted.last().copied()),
        or_none(sorted.first().copied()),
        if sent.is_empty() {
            NO_REPORT
        } else {
            sent.iter().sum::<f64>() / sent.len() as f64
        },
        or_none(sent.last().copied()),
    ]
}

fn draw_statistics(
    release: &SequenceRelease,
    x: &[Vec<f64>],
    n: usize,
    seed: u64,
) -> Result<Vec<Vec<f64>>> {
    let mut rng = StdRng::seed_from_u64(seed);
    let mut columns = std::vec![Vec::with_capacity(n); SEQUENCE_STATISTICS.len()];
    for _ in 0..n {
        let y = release(x, &mut rng)?;
        if y.iter().flatten().any(|v| !v.is_finite()) {
            return Err(Error::Numerical {
                routine: "sequence tester: a report is not finite",
            });
        }
        for (c, v) in columns.iter_mut().zip(sequence_statistics(&y)) {
            c.push(v);
        }
    }
    Ok(columns)
}

/// The sequence tester of `docs/MATH.md §12.4`: the T outputs of two
/// trajectories X, X' tested as one output against the stated
/// (ε_life·D, δ_life). Candidate events are chosen on a pilot sample per
/// statistic of [`SEQUENCE_STATISTICS`] (bins, tails, likelihood-ranked
/// unions), then tested on a fresh main sample with one-sided
/// Clopper–Pearson bounds, Bonferroni-corrected over every event and
/// direction; the pair fails when some lower bound of
/// ln((P_X(A) − δ)/P_X'(A)) exceeds `epsilon_d`.
///
/// ```
/// use geopriv::audit::sampling::{test_sequence_pair, SamplingOptions};
/// use geopriv::{Mechanism, SoftThreshold};
/// use rand::rngs::StdRng;
/// let q = SoftThreshold::new(0.0, 1.0)?;
/// let m = Mechanism::global_laplace(0.5)?;
/// // Fresh releases every period: ε_life = T·ε.
/// let fresh = |x: &[Vec<f64>], rng: &mut StdRng| {
///     x.iter().map(|p| m.privatize_unmetered(&q, p, rng).map(Some)).collect()
/// };
/// let x = vec![vec![0.2]; 3];
/// let x2 = vec![vec![0.6]; 3];
/// let options = SamplingOptions { samples: 4_000, pilot: 1_000, ..Default::default() };
/// let v = test_sequence_pair(&fresh, &x, &x2, 3.0 * 0.5 * 0.4, 0.0, &options)?;
/// assert!(v.passed);
/// # Ok::<(), geopriv::Error>(())
/// ```
pub fn test_sequence_pair(
    release: &SequenceRelease,
    x: &[Vec<f64>],
    x_prime: &[Vec<f64>],
    epsilon_d: f64,
    delta: f64,
    options: &SamplingOptions,
) -> Result<PairVerdict> {
    let s = stream_seed(delta, options)?;
    let pilot_x = draw_statistics(release, x, options.pilot, s ^ 1)?;
    let pilot_y = draw_statistics(release, x_prime, options.pilot, s ^ 2)?;
    let main_x = draw_statistics(release, x, options.samples, s ^ 3)?;
    let main_y = draw_statistics(release, x_prime, options.samples, s ^ 4)?;
    let mut per_statistic = Vec::new();
    for k in 0..SEQUENCE_STATISTICS.len() {
        let mut pooled: Vec<f64> = pilot_x[k].iter().chain(&pilot_y[k]).copied().collect();
        let bins = build_bins(&mut pooled, options.bins);
        let sets = candidates(
            &bins,
            &counts(&bins, &pilot_x[k]),
            &counts(&bins, &pilot_y[k]),
        );
        let mx = counts(&bins, &main_x[k]);
        let my = counts(&bins, &main_y[k]);
        per_statistic.push((sets, mx, my));
    }
    let tests: usize = per_statistic.iter().map(|p| 2 * p.0.len()).sum();
    let level = options.alpha / (2.0 * tests as f64);
    let mut best = (f64::NEG_INFINITY, String::new());
    for (k, (sets, mx, my)) in per_statistic.iter().enumerate() {
        let prefix = std::format!("{} in ", SEQUENCE_STATISTICS[k]);
        absorb_sets(
            sets,
            mx,
            my,
            options.samples as u64,
            level,
            delta,
            &prefix,
            &mut best,
        );
    }
    let flat = |t: &[Vec<f64>]| t.iter().flatten().copied().collect::<Vec<f64>>();
    let ratio = if epsilon_d > 0.0 {
        best.0 / epsilon_d
    } else if best.0 <= 0.0 {
        0.0
    } else {
        f64::INFINITY
    };
    Ok(PairVerdict {
        x: flat(x),
        x_prime: flat(x_prime),
        epsilon_d,
        lower_bound: best.0,
        ratio,
        set: best.1,
        tests,
        passed: best.0 <= epsilon_d,
    })
}

/// Test one pair (module docs). `epsilon_d` is ε d(x, x').
pub fn test_pair(
    release: &Release,
    x: &[f64],
    x_prime: &[f64],
    epsilon_d: f64,
    options: &SamplingOptions,
) -> Result<PairVerdict> {
    test_pair_approx(release, x, x_prime, epsilon_d, 0.0, options)
}

/// [`test_pair`] for an (ε, δ) guarantee: the bound tested is
/// ln((p_lo(O) - δ)/q_hi(O)) <= ε d, since P_x(O) <= e^{εd} P_x'(O) + δ
/// (sets with p_lo <= δ cannot show a violation and are skipped). With
/// δ = 0 this is [`test_pair`]. The inputs may be any vectors, e.g. two
/// neighbouring datasets of the central model (`central::audit`).
pub fn test_pair_approx(
    release: &Release,
    x: &[f64],
    x_prime: &[f64],
    epsilon_d: f64,
    delta: f64,
    options: &SamplingOptions,
) -> Result<PairVerdict> {
    let s = stream_seed(delta, options)?;
    let pilot_x = draw(release, x, options.pilot, s ^ 1)?;
    let pilot_y = draw(release, x_prime, options.pilot, s ^ 2)?;
    let mut pooled: Vec<f64> = pilot_x.iter().chain(&pilot_y).copied().collect();
    if pooled.iter().any(|v| !v.is_finite()) {
        return Err(Error::Numerical {
            routine: "sampling tester: a release is not finite",
        });
    }
    let bins = build_bins(&mut pooled, options.bins);
    let sets = candidates(&bins, &counts(&bins, &pilot_x), &counts(&bins, &pilot_y));
    let tails = tail_sets(&pilot_x, &pilot_y);
    let draws_x = draw(release, x, options.samples, s ^ 3)?;
    let draws_y = draw(release, x_prime, options.samples, s ^ 4)?;
    let (main_x, main_y) = (counts(&bins, &draws_x), counts(&bins, &draws_y));
    // One Bonferroni union over the bin sets and the tail sets, both
    // directions: every test at level α/(2M), so the pair still fails
    // falsely with probability <= α (the tail tests' share: 4α/M).
    let tests = 2 * (sets.len() + tails.len());
    let level = options.alpha / (2.0 * tests as f64);
    let n = options.samples as u64;
    let mut best = (f64::NEG_INFINITY, String::new());
    absorb_sets(&sets, &main_x, &main_y, n, level, delta, "", &mut best);
    for (threshold, above, name) in &tails {
        let kx = tail_count(&draws_x, *threshold, *above);
        let ky = tail_count(&draws_y, *threshold, *above);
        absorb_counts(kx, ky, name, n, level, delta, "", &mut best);
    }
    let ratio = if epsilon_d > 0.0 {
        best.0 / epsilon_d
    } else {
        f64::INFINITY
    };
    Ok(PairVerdict {
        x: x.to_vec(),
        x_prime: x_prime.to_vec(),
        epsilon_d,
        lower_bound: best.0,
        ratio,
        set: best.1,
        tests,
        passed: best.0 <= epsilon_d,
    })
}

/// Test many pairs (each with its own seed stream) on all cores; the
/// report keeps the pair with the largest lower_bound / (ε d).
pub fn test_pairs(
    release: &Release,
    pairs: &[(Vec<f64>, Vec<f64>, f64)],
    options: &SamplingOptions,
) -> Result<SamplingReport> {
    let verdicts = super::enumeration::parallel_map(
        &pairs.iter().enumerate().collect::<Vec<_>>(),
        |(i, (x, y, ed))| {
            let opts = SamplingOptions {
                seed: options.seed.wrapping_add(1000 * *i as u64),
                ..*options
            };
            test_pair(release, x, y, *ed, &opts)
        },
    );
    let mut worst: Option<PairVerdict> = None;
    let mut passed = true;
    for v in verdicts {
        let v = v?;
        passed &= v.passed;
        if worst.as_ref().is_none_or(|w| v.ratio > w.ratio) {
            worst = Some(v);
        }
    }
    Ok(SamplingReport {
        options: *options,
        pairs: pairs.len(),
        worst,
        passed,
    })
}

/// Pairs around a query's landmarks (ramp edges and centre, the two-way
/// corner, the kernel centre, c ≈ 1 and the tangency radius): for each
/// landmark p, (p, p + d e₁) and (p, p - d e₁·0.5) with ε d = 1 (d also
/// capped at the query's length scale), so each pair spends a unit of
/// budget where the query changes.
pub fn landmark_pairs<Q: super::AuditTarget + ?Sized>(
    query: &Q,
    epsilon: f64,
) -> Vec<(Vec<f64>, Vec<f64>, f64)> {
    let d = (1.0 / epsilon).min(query.length_scale());
    let mut out = Vec::new();
    for p in query.landmarks() {
        for step in [d, -0.5 * d] {
            let mut q = p.clone();
            q[0] += step;
            out.push((p.clone(), q, epsilon * step.abs()));
        }
    }
    out
}

/// The sampling tester of a mechanism on a query: releases through the
/// public path [`crate::Mechanism::privatize`] with seeded generators, on
/// [`landmark_pairs`].
///
/// ```
/// use geopriv::audit::sampling::{sampling_audit, SamplingOptions};
/// use geopriv::{Mechanism, SoftThreshold};
/// let q = SoftThreshold::new(0.0, 1.0)?;
/// let m = Mechanism::global_laplace(2.0)?;
/// let options = SamplingOptions { samples: 4_000, pilot: 1_000, ..Default::default() };
/// let report = sampling_audit(&m, &q, &options)?;
/// assert!(report.passed);
/// # Ok::<(), geopriv::Error>(())
/// ```
pub fn sampling_audit<Q: super::AuditTarget + Sync + ?Sized>(
    mechanism: &crate::Mechanism,
    query: &Q,
    options: &SamplingOptions,
) -> Result<SamplingReport> {
    let pairs = landmark_pairs(query, mechanism.epsilon());
    let release = |x: &[f64], rng: &mut StdRng| mechanism.privatize_unmetered(query, x, rng);
    test_pairs(&release, &pairs, options)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn clopper_pearson_matches_reference_values() {
        // Beta quantiles B⁻¹(0.025; 5, 96) and B⁻¹(0.975; 6, 95) (mpmath,
        // 30 digits); the bounds are shaded outward by a relative 1e-6.
        let lo = clopper_pearson_lower(5, 100, 0.025);
        let hi = clopper_pearson_upper(5, 100, 0.025);
        assert!((lo - 0.016_431_879_182).abs() < 3e-8, "{lo}");
        assert!((hi - 0.112_834_911_105).abs() < 3e-7, "{hi}");
        assert_eq!(clopper_pearson_lower(0, 10, 0.05), 0.0);
        assert_eq!(clopper_pearson_upper(10, 10, 0.05), 1.0);
        // k = n: lower bound a^{1/n}.
        let l = clopper_pearson_lower(10, 10, 0.05);
        assert!((l - 0.05f64.powf(0.1)).abs() < 1e-6, "{l}");
    }

    #[test]
    fn bins_put_atoms_apart() {
        let mut v: Vec<f64> = (0..1000)
            .map(|i| if i % 2 == 0 { 0.0 } else { i as f64 })
            .collect();
        let bins = build_bins(&mut v, 10);
        let zero = bin_of(&bins, 0.0);
        assert!(bins[zero].atom && bins[zero].lo == 0.0);
        assert_ne!(bin_of(&bins, 1.0), zero);
        assert_eq!(bin_of(&bins, -5.0), 0);
        assert_eq!(bin_of(&bins, 1e9), bins.len() - 1);
    }
}
