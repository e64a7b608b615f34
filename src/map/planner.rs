//! The planner (std only): predicts each mechanism's map error at a
//! per-device ε and picks one, explained in one line (docs/MATH.md §9.4).
//!
//! Error measure: ASE = mean over the m cells of E(estimate_j - F_j)²,
//! with F_j = (1/n) Σ_i f_j(x_i) the map of the same devices.
//!
//! * vector Laplace: 2 (L1/ε)² / n (exact);
//! * composition at ε/m with PolyPlace: PolyPlace's variance at the
//!   global sensitivity (an upper bound: S(x) <= L_global) over n;
//! * sampled k: each cell answered by n k/m devices: (m/(nk) - 1/n)·σ_f²
//!   plus v_k m/(n k), σ_f² <= mean f_j (f ∈ [0, 1]), v_k PolyPlace's
//!   variance at ε/k at the global sensitivity (an upper bound);
//! * noise a priori with kernel K_λ: variance given the devices from the
//!   reports (scaled to the planned n); bias² by the unbiased average over
//!   cells of b̂_j² − Var b̂_j, b̂ = map_λ − map_1, not clipped, with its
//!   standard error (from the correlation of the cells' noise,
//!   [`FftMapper::correlation_sums`]) and a floor from the EM map; ranked
//!   only where the ASE interval [var + L, var + U] ([`BIAS_BOUND_Z`] = 2.713 standard errors)
//!   spans at most 9x, predicted within 3x of every ASE in it; above
//!   εh = [`KERNEL_PLUG_IN_ABOVE_EPS_H`] the variance is the noise-law
//!   plug-in; ranked at every εh ([`EM_ONLY_ABOVE_EPS_H`] is ∞);
//! * every kernel map and EM: plus the rounding of coincident devices
//!   seen in the counts (`Atoms`, docs/MATH.md §9.4);
//! * EM: up to εh = [`EM_ESTIMATED_UP_TO_EPS_H`] the bootstrap
//!   conditioned on the devices, plus 2 × its bias²; above, the plain
//!   map's noise and rounding given the devices (× [`EM_HIGH_FACTOR`]) plus
//!   its bias² scaled by EM's extra blur (docs/MATH.md §9.4, §9.6); at
//!   every εh ranked only where its ASE interval from the reports
//!   (`em_interval`) spans at most 9x, clamped like the kernel maps'
//!   (elsewhere its number is the interval's upper end, `upper_bound`,
//!   and the pick reads its point estimate within it; branch rank15, and
//!   above εh 3 branch small19).
//!   Without reports only λ = 1 (unbiased) is predicted, from ∫K̃²/|D|/n
//!   (devices spread over the map's area |D|).

use super::deconv::{EmDeconvolution, EmMap, EmOptions};
use super::fft::FftMapper;
use super::kernel::DebiasKernel;
use super::query_set::QuerySet;
use crate::error::{positive_finite, Result};
use crate::mechanism::Mechanism;
use std::format;
use std::string::String;
use std::vec::Vec;

/// One mechanism's predicted error.
#[derive(Clone, Debug, PartialEq)]
pub struct Prediction {
    /// Mechanism name (`a-priori λ=0.6`, `vector-laplace`, `sampled-4`, ...).
    pub name: String,
    /// Predicted ASE; NaN where it is not predicted (the λ = 0 pick when
    /// no report lies inside the map's bins, see [`Plan::predictions`]).
    pub ase: f64,
    /// Its variance part (NaN with `ase`).
    pub variance: f64,
    /// Its squared-bias part (0 for unbiased mechanisms; NaN with `ase`).
    pub bias2: f64,
    /// Whether `ase` is an upper bound rather than an estimate (also EM
    /// where its error is not pinned by the reports: `ase` is then the top
    /// of its ASE interval, docs/MATH.md §9.4).
    pub upper_bound: bool,
    /// λ for noise a priori.
    pub lambda: Option<f64>,
    /// k for sampled queries.
    pub k: Option<usize>,
    /// For the EM deconvolution estimator: its held-out iteration count.
    pub em_iterations: Option<usize>,
    /// The number [`Plan::predictions`] is sorted by: `ase`, except EM
    /// where its ASE interval [lo, hi] is formed (every εh since branch
    /// small19; εh <= 3 before): there EM's point
    /// prediction clamped into [lo, hi], which a ranked EM's `ase` clamps
    /// further into [hi/3, 3 lo] and an unranked EM's `ase` replaces by hi
    /// (docs/MATH.md §9.4, attack13 O2); a ranked EM whose interval's
    /// log-centre √(lo·hi) is not below λ = 1's prediction is keyed at
    /// that prediction instead and goes after it (branch plan20, attack14
    /// O2); an unranked EM whose point the emlow floor raised is keyed at
    /// min(point, √(lo·hi)) (branch lead18). NaN with a NaN `ase`.
    pub order_key: f64,
}

/// The planner's predictions and its pick.
#[derive(Clone, Debug, PartialEq)]
pub struct Plan {
    /// Every prediction, best first: sorted by [`Prediction::order_key`]
    /// (`ase`, except an EM whose interval is formed). Where reports on a kernel grid were
    /// given and none lies inside the map's bins, the first is noise a
    /// priori at λ = 0 with NaN numbers (every kernel map is then 0, and
    /// the reports carry nothing to predict its error from; `line` says
    /// so), then the other mechanisms, best first.
    pub predictions: Vec<Prediction>,
    /// The one-line explanation.
    pub line: String,
    /// The EM deconvolution map computed for its prediction (noise a
    /// priori on a 2-D kernel grid with reports), reused when picked.
    pub em: Option<EmMap>,
}

impl Plan {
    /// The chosen mechanism (the first prediction).
    pub fn pick(&self) -> &Prediction {
        &self.predictions[0]
    }
}

/// What the plan's line says where an unranked EM whose point the emlow
/// floor raised above √(lo·hi) is ordered at √(lo·hi) instead (branch
/// lead18, docs/MATH.md §9.4 addendum "lead18"): key = min(point,
/// √(lo·hi)). Callers that explain the order (the CLI's `--verbose`) look
/// for it.
///
/// ```
/// assert_eq!(geopriv::map::EM_ORDERED_AT_LOG_CENTRE, "ordered at its interval's log-centre");
/// ```
pub const EM_ORDERED_AT_LOG_CENTRE: &str = "ordered at its interval's log-centre";

/// EM's prediction is its bootstrap up to this εh (docs/MATH.md §9.4).
/// Above it the bootstrap's bias (the pilot EM at 3t* against a fit of
/// t* = 1-4 iterations, its replicates new devices whose spread swamps so
/// small a bias) over-predicted up to 250x; the prediction there is the
/// plain map's noise, rounding and blurred bias (`EM_HIGH_FACTOR`,
/// measured/predicted 0.47-1.76 on the three populations).
pub const EM_ESTIMATED_UP_TO_EPS_H: f64 = 3.0;

/// Above this εh, with reports on a 2-D kernel grid, the planner would take
/// EM without ranking the kernel maps: ∞, the rule is no longer applied
/// (docs/MATH.md §9.4, branch planmodel). It was 50, set when the kernel
/// maps' error at εh >= 100 was under-predicted up to 330x; that error was
/// mostly the FFT's wrap-around (fixed by [`FftMapper::with_wrap_guard`])
/// and the rounding of coincident devices (now charged, `Atoms`), and
/// with EM taken the city at εh 100, n = 10⁴ was picked at 2.39x the best
/// measured map. Every map is ranked at every εh (kernel maps above
/// εh = `KERNEL_PLUG_IN_ABOVE_EPS_H` with the plug-in variance).
pub const EM_ONLY_ABOVE_EPS_H: f64 = f64::INFINITY;

/// EM's prediction above εh = [`EM_ESTIMATED_UP_TO_EPS_H`] charges this
/// factor times the plain map's noise and rounding given the devices
/// (EM's own map of the same counts measured 1.0-2.2x of that part plus
/// its blurred bias, docs/MATH.md §9.4).
pub const EM_HIGH_FACTOR: f64 = 1.5;

/// EM's noise-and-rounding prediction above εh = [`EM_ESTIMATED_UP_TO_EPS_H`]
/// holds where its held-out stop is at most this many iterations (one step
/// from a uniform start: the counts smoothed once more by the channel);
/// beyond (t* = 2 at n = 10⁶ on the city at εh = 10 already measured 190x
/// below it: the accelerated steps sharpen the map) the bootstrap is kept.
pub const EM_HIGH_MAX_ITERATIONS: usize = 1;

/// A kernel map's deterministic rounding error, charged at this many
/// times the mean squared size d² of the plain map's rounding correction
/// (the sinc division of [`FftMapper::spatial_kernel`]; docs/MATH.md §9.4):
/// 0. It was 4, fitted on the constructed population at εh = 30,
/// n = 10⁷, where the error it fitted was the FFT's wrap-around (the
/// bins' periodic images 1.9h–4h from the map); with the period of
/// [`FftMapper::with_wrap_guard`] that map's error is 3.5e-12 against
/// d² = 4.2e-11 (λ = 1), below its variance and bias alone (branch
/// kernelcov: kernel maps 0.35–1.39x measured/predicted on 9 cells at
/// εh 10–30, n 10³–10⁷, with 0).
pub const ROUNDING_FACTOR: f64 = 0.0;

/// Above this εh a kernel map's variance is predicted by the noise-law
/// plug-in ū/n of [`noise_and_rounding`] (the variance formula evaluated as
/// if each device sat at its noisy location, with the bins' rounding
/// spread), not by the conditional estimate of
/// [`FftMapper::conditional_variances`] (docs/MATH.md §9.4, branch
/// planmodel). There the noise's spread, about |∇K|²·3/ε² per device, is
/// a few 1e-4 of E K², and the conditional estimate, a difference of two
/// unbiased estimates of E K² and (K * p_N)² taken on the bins in two
/// different ways, is dominated by their discretisation: 0.09–0.15
/// measured/predicted on the airports at εh 100, n <= 10⁴, 0.34–0.36 at
/// εh 30. The plug-in takes both terms at the same rounded locations. At
/// εh <= 10 the conditional estimate holds (0.35–1.65, branch kernelcov).
pub const KERNEL_PLUG_IN_ABOVE_EPS_H: f64 = 20.0;

/// The kernel maps' variance above εh = [`KERNEL_PLUG_IN_ABOVE_EPS_H`]:
/// the plug-in ū/n for every λ (the debiasing kernels differ from the
/// Gaussian by O((εh)⁻²) there), `None` below (each λ's conditional
/// estimate is used).
fn kernel_variance_above(above: bool, plug_in: Option<f64>) -> Option<f64> {
    plug_in.filter(|v| above && v.is_finite())
}

/// λ values the planner considers.
pub const LAMBDAS: [f64; 6] = [0.0, 0.2, 0.4, 0.6, 0.8, 1.0];

/// Predict and pick, for `set` at per-device ε with `n` devices expected;
/// `reports` (the FFT of noise-a-priori bin counts at this ε, e.g. from
/// [`MapAggregator::mapper`](super::MapAggregator::mapper)) enable the bias
/// estimates of plain and partial debiasing.
///
/// ```
/// use geopriv::map::{plan, KdeGrid, QuerySet};
/// let set = QuerySet::Kde(KdeGrid::square(20_000.0, 31)?);
/// let p = plan(&set, 1e-3, 1_000_000, None)?;
/// assert!(p.pick().name.starts_with("a-priori"));
/// println!("{}", p.line);
/// # Ok::<(), geopriv::Error>(())
/// ```
pub fn plan(set: &QuerySet, epsilon: f64, n: u64, reports: Option<&FftMapper>) -> Result<Plan> {
    plan_with_em(
        set,
        epsilon,
        n,
        reports,
        None::<fn() -> Option<Result<EmFit>>>,
    )
}

/// [`plan`] with the counts' FFT made by `build` from `counts` (the
/// reports binned for `set`, a kernel grid, at per-device ε: what
/// [`MapAggregator::mapper`](super::MapAggregator::mapper) makes) and
/// returned beside the plan. On a 2-D grid EM reads only the counts, so
/// its thread starts before the FFT is made instead of after it (the FFT
/// ran on one core while the other waited; branch speed04): the same
/// calls on the same counts as [`plan`] with `build`'s mapper, the same
/// numbers.
pub(crate) fn plan_building_mapper(
    set: &QuerySet,
    epsilon: f64,
    n: u64,
    counts: &super::bins::BinnedCounts,
    build: impl FnOnce() -> Result<FftMapper>,
) -> Result<(Plan, FftMapper)> {
    let g = match set {
        // Nothing binned: no EM to start (the plan makes none).
        QuerySet::Kde(g) if g.dim() == 2 && counts.total() != counts.outside() => g,
        _ => {
            let mapper = build()?;
            return Ok((plan(set, epsilon, n, Some(&mapper))?, mapper));
        }
    };
    let slot = std::sync::OnceLock::new();
    let (tx, rx) = std::sync::mpsc::channel::<&FftMapper>();
    let p = std::thread::scope(|s| {
        let em = s.spawn(move || {
            em_finish(g, epsilon, em_on_counts(g, epsilon, counts)?, || {
                rx.recv().ok()
            })
        });
        // On an error the sender is dropped here: EM's thread stops at
        // its wait for the FFT instead of waiting forever.
        let tx = tx;
        let mapper: &FftMapper = match build() {
            Ok(m) => slot.get_or_init(|| m),
            Err(e) => {
                drop(tx);
                let _ = em.join();
                return Err(e);
            }
        };
        let _ = tx.send(mapper);
        drop(tx);
        let join = || {
            Some(em.join().unwrap_or(Err(crate::error::Error::Numerical {
                routine: "EM deconvolution thread",
            })))
        };
        plan_with_em(set, epsilon, n, Some(mapper), Some(join))
    })?;
    let mapper = slot.into_inner().ok_or(crate::error::Error::Numerical {
        routine: "FFT of the counts",
    })?;
    Ok((p, mapper))
}

/// Whether EM failed only because no accepted report lies inside its
/// observation window (`EmDeconvolution::new`'s refusal): then there is no
/// EM map to rank, not a failed plan.
fn em_saw_no_report<T>(r: &Result<T>) -> bool {
    matches!(
        r,
        Err(crate::error::Error::InvalidParameter {
            name: "reports",
            requirement: "at least one location inside the observation window",
            ..
        })
    )
}

/// [`plan`], with EM's fit joined by `early_em` where it was started
/// before the call ([`plan_building_mapper`]; None: EM's thread is
/// started here, beside the kernel maps).
fn plan_with_em(
    set: &QuerySet,
    epsilon: f64,
    n: u64,
    reports: Option<&FftMapper>,
    early_em: Option<impl FnOnce() -> Option<Result<EmFit>>>,
) -> Result<Plan> {
    let epsilon = positive_finite("epsilon", epsilon)?;
    let nf = positive_finite("n", n as f64)?;
    let m = set.len() as f64;
    let lg = set.max_global_lipschitz();
    let mut preds = Vec::new();

    // (b) vector Laplace (with reports on a kernel grid its certified ℓ1
    // bound is computed beside the kernel maps and inserted first below).
    let kde_reports = matches!((set, reports), (QuerySet::Kde(_), Some(_)));
    // No report inside the bins (attack8 O3: n = 1 at εh 0.001, its noisy
    // location beyond them): every kernel map is 0, with variance 0 and
    // bias estimate 0 ± 0, which read "predicted ASE 0". The reports carry
    // nothing to predict that map's error from: the kernel maps and EM are
    // not computed; λ = 0 (the map made before) is the pick, with NaN for
    // its numbers and the reason in the line; the other mechanisms are
    // ranked as without reports.
    let none_binned = match (set, reports) {
        (QuerySet::Kde(_), Some(mp)) => mp.counts().total() == mp.counts().outside(),
        _ => false,
    };
    if !kde_reports || none_binned {
        preds.push(vector_laplace(set.l1_bound(), epsilon, nf));
    }
    // (a) composition.
    if let Some(rv) = Mechanism::polyplace(epsilon / m)?.report_variance(lg) {
        preds.push(Prediction {
            name: "composition".into(),
            ase: rv / nf,
            variance: rv / nf,
            bias2: 0.0,
            upper_bound: true,
            lambda: None,
            k: None,
            em_iterations: None,
            order_key: f64::NAN,
        });
    }

    // (d') EM deconvolution (docs/MATH.md §9.6) runs on its own thread
    // while the kernel maps are computed (neither reads the other's
    // results until both are done; the numbers do not depend on it).
    let mut em: Option<EmMap> = None;
    let mut em_pred: Option<Prediction> = None;
    // Mean cell value (for the sampling variance of sampled queries).
    let mut mean_f = 1.0;
    let mut a_priori: Vec<Prediction> = Vec::new();
    // Kernel maps whose bias the reports do not resolve (not ranked).
    let mut unranked: Vec<f64> = Vec::new();
    let mut em_only = false;
    // EM not ranked (docs/MATH.md §9.4, branch rank15): its ASE interval
    // [lo, hi] (the key the pick reads is `em_key`).
    let mut em_unranked: Option<(f64, f64)> = None;
    // EM's key for the pick where its interval was formed: its point
    // prediction clamped into the interval.
    let mut em_key: Option<f64> = None;
    // An unranked EM's point where it is keyed at its interval's
    // log-centre instead (branch lead18): for the line.
    let mut em_point_above_centre: Option<f64> = None;
    // A ranked EM's ASE interval [lo, hi] (its tie with λ = 1: `em_key`
    // below).
    let mut em_ranked_ends: Option<(f64, f64)> = None;
    let mut atom_note = String::new();
    if none_binned {
        // Nothing binned: no kernel map or EM to rank (above).
    } else if let (QuerySet::Kde(g), Some(mapper)) = (set, reports) {
        let n_rep = mapper.counts().total() as f64;
        // The ℓ1 bound, the coincident devices and the unrounded plain map
        // read only the grid and the counts: one more thread beside EM and
        // the kernel maps, so that no core waits on them after both are
        // done (branch speed03; the same calls, the same numbers).
        let (mut em_out, kernels, side) = std::thread::scope(|s| {
            let handle = (g.dim() == 2 && early_em.is_none())
                .then(|| s.spawn(|| em_fit(g, epsilon, mapper)));
            let side = s.spawn(|| {
                let l1 = g.l1_bound();
                let atoms = coincident_devices(g, epsilon, mapper);
                (l1, atoms, unrounded_plain_map(g, mapper))
            });
            let kernels = kernel_maps(g, epsilon, nf, mapper);
            let em_out = match early_em {
                Some(join) => join(),
                None => handle.map(|h| {
                    h.join().unwrap_or(Err(crate::error::Error::Numerical {
                        routine: "EM deconvolution thread",
                    }))
                }),
            };
            (em_out, kernels, side.join())
        });
        let (l1, atoms, unrounded0) = side.map_err(|_| crate::error::Error::Numerical {
            routine: "l1 bound thread",
        })?;
        preds.insert(0, vector_laplace(l1, epsilon, nf));
        let (mf, kernels) = kernels?;
        // The size of the plain map's rounding correction, and its noise
        // and rounding given the devices (docs/MATH.md §9.4) where EM's
        // prediction uses it: above εh = 3 when EM stops within
        // EM_HIGH_MAX_ITERATIONS (the plug-in's FFTs are not spent below).
        let em_high = epsilon * g.bandwidth() > EM_ESTIMATED_UP_TO_EPS_H
            && matches!(&em_out, Some(Ok((e, _, _, _, _))) if e.iterations <= EM_HIGH_MAX_ITERATIONS);
        // EM's thread computed the plain map of the fine bins already
        // (the same calls on the same counts: the same bits).
        let plain0 = match &mut em_out {
            Some(Ok((_, _, _, plain0, _))) => plain0.take(),
            _ => None,
        };
        let kernel_plug_in = epsilon * g.bandwidth() > KERNEL_PLUG_IN_ABOVE_EPS_H;
        let (plug_in, rounding_size2) = noise_and_rounding(
            g,
            epsilon,
            nf,
            mapper,
            em_high || kernel_plug_in,
            plain0,
            &unrounded0,
        )?;
        // EM's one-step model only where it holds (t* <= 1, εh > 3).
        let noise_given_devices = plug_in.filter(|_| em_high);
        let kernel_var = kernel_variance_above(kernel_plug_in, plug_in);
        // Above εh = KERNEL_PLUG_IN_ABOVE_EPS_H the kernel maps' rounding
        // charge is the SE's own rounding share, per map point, averaged
        // (branch plan21, attack16 F2): the coincident devices' term read
        // at each location's bins plus the coherent pairs of sub-bin
        // lines along a bin axis, which the offset-averaged charge T of
        // `Atoms` reads as a ridge and charges nothing. At the reports' n
        // (a location's or a line's share of the devices does not change
        // with n), like T.
        let se_rounding = if kernel_plug_in && g.dim() == 2 {
            let k0 = DebiasKernel::new(g.dim(), g.bandwidth(), epsilon, 0.0)?;
            let n_rep = mapper.counts().total() as f64;
            mapper
                .rounding_share(&k0)
                .map(|r| r / n_rep)
                .filter(|t| t.is_finite() && n_rep > 0.0)
        } else {
            None
        };
        mean_f = mf;
        if let Some(at) = &atoms {
            atom_note = at.note(epsilon, mapper.counts().spec().delta());
        }
        // EM has nothing to fit where no accepted report lies in its
        // observation window (every report far outside the map); the
        // kernel maps are still made, so the plan ranks them without EM
        // instead of failing the whole map (attack6: the CLI exited 2 and
        // the collector's GET .../map answered 500 where `--lambda 1`
        // gave the map).
        let em_out = em_out.filter(|r| !em_saw_no_report(r));
        if let Some(e) = em_out {
            let (mut e, disc2, boxes, _, cell) = e?;
            // The bootstrap's spread is unconditional (its replicates are
            // new devices); the ASE is against the same devices: scaled by
            // the conditional share of the kernel map with the nearest
            // unconditional variance (docs/MATH.md §9.6).
            let share = conditional_share(&kernels, e.predicted_variance * n_rep / nf);
            e.condition(share);
            let mut pred = em_prediction(&e, disc2, n_rep / nf);
            // The lower end of EM's squared bias (docs/MATH.md §9.4, "EM
            // ranked only where the reports pin it", branch rank15): the
            // lattice term and the floor against the unbiased map. Not the
            // bootstrap's bias: its pilot (EM at 3t*) can carry more
            // structure than the truth, and its bias alone measured above
            // EM's whole ASE in 52 of 351 seed-cells (up to 2.77x).
            let mut em_lower_bias2 = disc2;
            // Whether the emlow floor raised EM's point (its premise B is
            // not tested by the reports: the order below reads an
            // unranked EM at most at its interval's log-centre then).
            let mut point_from_emlow = false;
            if noise_given_devices.is_none() {
                if let Some(floor) = em_unresolved_floor(&kernels, &e, nf, n_rep) {
                    // Low εh, few reports (docs/MATH.md §9.4, branch
                    // emlow): EM is at least as far from the truth as from
                    // the plain map.
                    if floor > pred.bias2 {
                        pred.bias2 = floor;
                        pred.ase = pred.variance + floor;
                        point_from_emlow = true;
                    }
                }
                if let Some(floor) = em_early_stop_floor(g, &kernels, &e, nf, n_rep) {
                    // EM stopped with no more structure than the devices'
                    // own sampling (docs/MATH.md §9.4, branch cells22): the
                    // log-centre of what the reports allow, less what EM
                    // moved.
                    if floor > pred.bias2 {
                        pred.bias2 = floor;
                        pred.ase = pred.variance + floor;
                    }
                }
                if !kernel_plug_in && epsilon * g.bandwidth() <= EM_ESTIMATED_UP_TO_EPS_H {
                    if let Some(floor) = em_against_unbiased_floor(&kernels, &e, nf, n_rep) {
                        // Large n (docs/MATH.md §9.4, branch cells16): the
                        // bootstrap's pilot misses structure the unbiased
                        // map resolves. At εh <= 3 only (branch plan20):
                        // above, its premise b₁ = 0 failed (the discs,
                        // grid 31, εh 10: L above EM's measured ASE).
                        em_lower_bias2 = em_lower_bias2.max(floor);
                        if floor > pred.bias2 {
                            pred.bias2 = floor;
                            pred.ase = pred.variance + floor;
                        }
                    }
                }
            }
            if let Some(nr) = noise_given_devices {
                // Above εh = 3 the bootstrap's bias is noise (its replicates
                // are new devices, whose spread swamps a bias this small):
                // EM's error is that of the plain map of the binned
                // locations, its noise and rounding given the devices plus
                // the plain map's bias² (docs/MATH.md §9.4).
                let b0 = kernels
                    .iter()
                    .find(|k| k.lambda == 0.0)
                    .and_then(|k| k.against_unbiased)
                    .map_or(0.0, |b| (b.avg - 2.0 * b.se).max(0.0));
                pred.variance = EM_HIGH_FACTOR * nr;
                // EM's extra blur: the noise once more (twice the plain
                // map's bias) and the step's spread beyond the noise plus
                // the lattice's rounding and cell average, in bins' boxes
                // (`boxes` times the rounding correction's size: 4 where
                // the noise spans cells, about 2 far below; branch
                // emhigh); biases of one shape add.
                pred.bias2 = (2.0 * b0.sqrt() + boxes * rounding_size2.sqrt()).powi(2);
                pred.ase = pred.variance + pred.bias2;
            }
            if let (None, Some(nr), true) = (noise_given_devices, plug_in, kernel_plug_in) {
                // t* >= 2 above εh = 20 (branch planmodel): the bootstrap,
                // capped by the one-step model (docs/MATH.md §9.4).
                let (v, b2) = em_one_step(nr, plain_bias2_lower(&kernels), boxes, rounding_size2);
                if v + b2 < pred.ase {
                    pred.variance = v;
                    pred.bias2 = b2;
                    pred.ase = v + b2;
                }
            }
            if epsilon * g.bandwidth() > EM_ESTIMATED_UP_TO_EPS_H {
                if let Some(floor) = em_far_from_plain_floor(&kernels, &e, nf, n_rep) {
                    // A lower end of EM's ASE too (the triangle
                    // inequality, not a premise): its interval's L below.
                    em_lower_bias2 = em_lower_bias2.max(floor - pred.variance);
                    // EM's map far from a plain map that is near the truth
                    // (docs/MATH.md §9.4, "EM far from the plain map",
                    // branch emzero): on grids of 3-5 points the bootstrap
                    // missed EM's error up to 41x.
                    if floor > pred.ase {
                        pred.bias2 = floor - pred.variance;
                        pred.ase = floor;
                    }
                }
            }
            let mut atoms_t = 0.0;
            // Where the counts carry their offsets' moments above the gate
            // (branch grid26, docs/MATH.md §9.4 addendum "grid26"): EM's
            // rounding is the plain map's read from them (EM at εh > 3
            // moves little mass beyond the plain map of the same counts),
            // in place of the coincident devices' term and the SE share,
            // which average a location's rounding over its offset in the
            // bin (two 600 m discs on a 3-point grid at εh 100: two atoms
            // at fixed offsets, charged 17x EM's measured ASE).
            // Like the SE share it replaces, a floor and not a sum (plan22:
            // EM's bias model and the charge read one rounding error; added,
            // it over-charged EM's one-step model on grids 7 and 11).
            let em_moments = moment_rounding_charge(g, epsilon, 0.0, mapper, n_rep / nf);
            // EM's bias² as read before grid26 (its coincident devices'
            // term, floored by the SE share) for the kernel maps' floor
            // against EM only (branch lead19, attack21 F2/F5): that floor
            // subtracts |b_EM|, so of the two readings of EM's rounding it
            // takes the larger; the moments' lower one over-charged every
            // kernel map (λ = 1 up to 15x its measured ASE).
            let em_bias2_for_kernel_floor = em_moments.map(|_| {
                let atoms_term = atoms.as_ref().map_or(0.0, |at| at.em_term(epsilon, cell));
                (pred.bias2 + atoms_term).max(se_rounding.unwrap_or(0.0))
            });
            if let (None, Some(at)) = (em_moments, &atoms) {
                // Coincident devices (docs/MATH.md §9.4, "Atoms"): their
                // rounding into EM's lattice cells, dithered by the noise.
                // EM keeps its own term only (branch plan22): the kernel
                // maps' SE rounding share over-charged EM 3.2x on grids
                // of 3 and 11 points at εh 100-300 (plan21, reverted).
                let t = at.em_term(epsilon, cell);
                pred.bias2 += t;
                pred.ase += t;
                atoms_t = t;
            }
            // EM's variance plus the kernel maps' SE rounding share (branch
            // plan22, attack16 F4; docs/MATH.md §9.4 "plan22"): EM's bias
            // model and the share read one rounding error of the bins, so
            // the larger is taken, not their sum (plan21's charge on top
            // over-predicted EM 3.2x on grids of 3 and 11 points). Where
            // the share is the larger reading it floors the point and both
            // ends of EM's interval; where EM's own prediction is larger
            // the point stays and only the interval's top is floored
            // (branch lead19).
            let em_rounding_floor = em_moments
                .map(|(t, _)| t)
                .or(se_rounding)
                .map(|share| pred.variance + share);
            let em_floor = em_rounding_floor.filter(|f| *f > pred.ase);
            if let Some(floor) = em_floor {
                pred.bias2 = floor - pred.variance;
                pred.ase = floor;
            }
            // The kernel maps' floor against EM reads EM's point
            // prediction (unchanged by the ranking below).
            em_pred = Some(pred.clone());
            if let (Some(q), Some(b2)) = (em_pred.as_mut(), em_bias2_for_kernel_floor) {
                q.bias2 = q.bias2.max(b2);
            }
            {
                let ends = em_interval(
                    &kernels,
                    &e,
                    nf,
                    n_rep,
                    pred.variance,
                    em_lower_bias2,
                    epsilon * g.bandwidth() > EM_ESTIMATED_UP_TO_EPS_H,
                );
                // Where EM's rounding floor raised the point it floors both
                // ends (plan22). Elsewhere it still bounds the interval's
                // top (branch lead19, docs/MATH.md §9.4 addendum "lead19"):
                // a top below the floor is a top the reports contradict
                // (sprawl, grid 7, εh 100: the point 7.8e-8 above an
                // interval [2.6e-9, 1.3e-8] whose top lay below the floor
                // 3.3e-8 and 3.7x below EM's measured ASE). Only the top:
                // the floor is an estimate, and raising lo as well ranked
                // EMs the reports had left unranked (attack22 G5: coast,
                // grid 5, εh 50, EM ranked at 0.28x its ASE).
                let floor = em_floor.unwrap_or(0.0);
                // At least `floor` (the same reading, unfiltered).
                let top_floor = em_rounding_floor.unwrap_or(0.0);
                if let Some((lo, hi)) =
                    ends.map(|(l, u)| ((l + atoms_t).max(floor), (u + atoms_t).max(top_floor)))
                {
                    // The pick orders EM by its point prediction within its
                    // interval, ranked or not (docs/MATH.md §9.4): the 3x
                    // clamp below is what the prediction promises, not a
                    // better guess of EM's ASE. One exception reads both
                    // the point and the interval (branch emin26,
                    // `em_order_key`): a ranked EM whose point lies above
                    // its interval.
                    // A NaN point (none seen; attack13 O3) is taken at the
                    // interval's upper end, not its lower one.
                    let point_in = em_order_key(pred.ase, lo, hi);
                    em_key = Some(point_in);
                    match em_ranked_prediction(pred.ase, lo, hi) {
                        Some(a) => {
                            em_ranked_ends = Some((lo, hi));
                            pred.ase = a;
                            pred.bias2 = a - pred.variance;
                        }
                        None => {
                            // Not ranked: the number is the interval's upper
                            // end (an upper bound); the pick reads the point
                            // estimate within the interval (docs/MATH.md
                            // §9.4).
                            em_unranked = Some((lo, hi));
                            // An unranked EM whose point the emlow floor
                            // raised above the log-centre of its interval
                            // is ordered at that centre (branch lead18,
                            // docs/MATH.md §9.4 addendum "lead18"): against
                            // a map predicted at a, EM ahead costs up to
                            // hi/a, behind up to a/lo, so the centre
                            // decides where the point rests on a premise
                            // (B: EM removes at most half the plain map's
                            // error) the reports do not test.
                            let centre = (lo * hi).sqrt();
                            if point_from_emlow && point_in > centre {
                                em_key = Some(centre);
                                em_point_above_centre = Some(point_in);
                            }
                            // The kernel maps' floor against EM reads EM's
                            // bias² at most 3x its prediction (`em_floor`):
                            // a premise only a ranked EM carries. Unranked,
                            // EM's bias² is known only up to its interval's
                            // top (branch lead17, attack17 F1: at εh 10 on
                            // heavy atoms EM's point read bias² 0 while EM
                            // measured 17x λ = 1, and the floor charged
                            // λ = 1 EM's own distance from it, 17x high).
                            if let Some(q) = em_pred.as_mut() {
                                q.bias2 = q.bias2.max(hi - q.variance);
                            }
                            pred.ase = hi;
                            pred.bias2 = hi - pred.variance;
                            pred.upper_bound = true;
                        }
                    }
                }
            }
            preds.push(pred);
            em = Some(e);
        }
        // The unbiased map's rounding field and charge where the moments
        // are read (branch grid26): a λ < 1 map's deterministic error is
        // R_1 + Δ_λ, so its square carries the cross term 2⟨R_1, Δ_λ⟩
        // (docs/MATH.md §9.4 addendum "grid26").
        let unbiased_rounding = kernels.iter().find(|k| k.lambda == 1.0).and_then(|k1| {
            let r1 = moment_rounding_field(g, epsilon, 1.0, mapper)?;
            let (t1, _) = charge_of_rounding_field(&r1, n_rep / nf)?;
            (r1.values.len() == k1.mean.len()).then(|| (t1, r1.values, k1.mean.clone()))
        });
        for km in kernels {
            let KernelMap {
                lambda: lam,
                var,
                against_unbiased,
                mean,
                ..
            } = km;
            let var = kernel_var.unwrap_or(var);
            // Against the EM map (low variance where the unbiased map has
            // too much to resolve a bias, and no rounding of point masses
            // into bins at large εh): mean (map_λ - map_EM)² less both
            // variances, a lower estimate of |b_λ - b_EM|² (b_λ here counts
            // the binning's error too, so also for λ = 1).
            // |b_λ| >= |b_λ - b_EM| - |b_EM|, with EM's own bias² from its
            // prediction (at the reports' n, like d).
            let against_em = match (&em, &em_pred) {
                (Some(e), Some(q)) => {
                    let d = mean
                        .iter()
                        .zip(&e.values)
                        .map(|(a, b)| (a - b) * (a - b))
                        .sum::<f64>()
                        / m;
                    let diff = (d - var * nf / n_rep - q.variance * nf / n_rep).max(0.0);
                    em_floor(diff, q.bias2 * nf / n_rep)
                }
                _ => 0.0,
            };
            if em_pred.is_some() && epsilon * g.bandwidth() > EM_ONLY_ABOVE_EPS_H {
                // Not applied (∞, branch planmodel): kept for the constant's
                // users; docs/MATH.md §9.4.
                em_only = true;
                continue;
            }
            let b = against_unbiased.unwrap_or(BiasEstimate {
                avg: 0.0,
                se: 0.0,
                se_ranked: 0.0,
                noise_se: 0.0,
            });
            let mut var = var;
            let (ase, bias2) = match kernel_prediction(var, b, against_em) {
                // The rounding correction's own error (near-exact
                // locations are not spread evenly over their bins),
                // charged at ROUNDING_FACTOR times the correction's size.
                Some((a, b2)) => {
                    // Where the noise does not dither the bins and the
                    // counts carry their offsets' moments: the rounding
                    // error those moments give (branch moment24,
                    // docs/MATH.md §9.4 addendum "moments"); else the SE's
                    // rounding share above εh = KERNEL_PLUG_IN_ABOVE_EPS_H
                    // (plan22), else the coincident devices' term.
                    match moment_rounding_charge(g, epsilon, lam, mapper, n_rep / nf) {
                        Some((t, spread)) => {
                            // The variance formula's independent-rounding
                            // spread is what the moments replace.
                            let s = spread.min(var);
                            var -= s;
                            match (&unbiased_rounding, lam < 1.0) {
                                (Some((t1, r1, mean1)), true) => {
                                    // Branch grid26: the rounding and the
                                    // bias against the unbiased map are one
                                    // error, |R_1 + Δ_λ|² = T_1 + B² + 2⟨R̂_1, Δ̂_λ⟩,
                                    // not the sum of their squares.
                                    let det = rounding_and_bias(*t1, b2, r1, &mean, mean1);
                                    (a - b2 - s + det, det)
                                }
                                _ => (a - s + t, b2 + t),
                            }
                        }
                        None => {
                            // Coincident devices: their rounding into bins,
                            // dithered by the noise (docs/MATH.md §9.4,
                            // "Atoms").
                            let t = se_rounding.unwrap_or_else(|| {
                                atoms.as_ref().map_or(0.0, |at| {
                                    at.kernel_term(epsilon, mapper.counts().spec().delta())
                                })
                            });
                            (
                                a + ROUNDING_FACTOR * rounding_size2 + t,
                                b2 + ROUNDING_FACTOR * rounding_size2 + t,
                            )
                        }
                    }
                }
                None => {
                    unranked.push(lam);
                    continue;
                }
            };
            a_priori.push(Prediction {
                name: format!("a-priori λ={lam:.1}"),
                ase,
                variance: var,
                bias2,
                upper_bound: false,
                lambda: Some(lam),
                k: None,
                em_iterations: None,
                order_key: f64::NAN,
            });
        }
    } else if let QuerySet::Kde(g) = set {
        let k1 = DebiasKernel::new(g.dim(), g.bandwidth(), epsilon, 1.0)?;
        let dom = g.domain();
        let area = if g.dim() == 2 {
            (dom[1] - dom[0]) * (dom[3] - dom[2])
        } else {
            dom[1] - dom[0]
        };
        let v = k1.squared_integral() / area.max(f64::MIN_POSITIVE) / nf;
        a_priori.push(Prediction {
            name: "a-priori λ=1.0".into(),
            ase: v,
            variance: v,
            bias2: 0.0,
            upper_bound: false,
            lambda: Some(1.0),
            k: None,
            em_iterations: None,
            order_key: f64::NAN,
        });
    }
    // Districts (docs/MATH.md §13.6, §13.8): noise a priori, plain
    // (f_j(x̃) averaged) and debiased through the district channel, both
    // predicted from the channel with devices spread like the districts'
    // areas (no reports). Round 3 charged plain a priori its worst-case
    // bias 2/(εW) and picked vector Laplace where a priori was 440x better.
    #[cfg(feature = "std")]
    if let QuerySet::Districts(d) = set {
        if d.len() <= super::district_channel::MAX_CHANNEL_DISTRICTS {
            let ch = super::district_channel::DistrictChannel::standard(d, epsilon)?;
            let (pv, pb2, dv) = ch.predict(nf, None)?;
            a_priori.push(Prediction {
                name: "a-priori λ=0.0".into(),
                ase: pv + pb2,
                variance: pv,
                bias2: pb2,
                upper_bound: false,
                lambda: Some(0.0),
                k: None,
                em_iterations: None,
                order_key: f64::NAN,
            });
            // A channel that cannot be inverted at this ε has no debiased
            // prediction.
            if dv.is_finite() {
                a_priori.push(Prediction {
                    name: "a-priori debiased".into(),
                    ase: dv,
                    variance: dv,
                    bias2: 0.0,
                    upper_bound: false,
                    lambda: None,
                    k: None,
                    em_iterations: None,
                    order_key: f64::NAN,
                });
            }
        } else {
            let b = (2.0 / (epsilon * d.width())).min(1.0);
            let v = 0.25 / nf;
            a_priori.push(Prediction {
                name: "a-priori λ=0.0".into(),
                ase: v + b * b,
                variance: v,
                bias2: b * b,
                upper_bound: true,
                lambda: Some(0.0),
                k: None,
                em_iterations: None,
                order_key: f64::NAN,
            });
        }
    }
    preds.extend(a_priori);

    // (c) sampled k, k = 1, 2, 4, ... < m.
    let mut k = 1usize;
    while (k as f64) < m {
        if let Some(vk) = Mechanism::polyplace(epsilon / k as f64)?.report_variance(lg) {
            let nj = nf * k as f64 / m;
            let v = (1.0 / nj - 1.0 / nf) * mean_f + vk / nj;
            preds.push(Prediction {
                name: format!("sampled-{k}"),
                ase: v,
                variance: v,
                bias2: 0.0,
                upper_bound: true,
                lambda: None,
                k: Some(k),
                em_iterations: None,
                order_key: f64::NAN,
            });
        }
        k *= 2;
    }

    // EM sorts at its point estimate within its interval, ranked or not
    // (a ranked EM that yields to λ = 1 at λ = 1's prediction, above):
    // the pick, not a prediction (docs/MATH.md §9.4). Sorting a ranked EM
    // at its clamped prediction made the pick worse on tests/maps.rs's
    // population at εh 0.3 (EM clamped up 1.3x to above λ = 0.8).
    // The key is kept in each prediction (`order_key`), so that what is
    // printed explains the order (attack13 O2).
    // A ranked EM against the unbiased map (docs/MATH.md §9.4, "A ranked
    // EM against λ = 1", branch plan20, attack14 O2): where λ = 1 comes
    // next after EM (no other prediction sorts between them) EM stays
    // ahead only where the log-centre of its interval is below λ = 1's
    // prediction; otherwise it is keyed at that prediction and the tie
    // (the sort below) goes to λ = 1. EM's order against every other
    // prediction is unchanged.
    let unbiased = preds
        .iter()
        .find(|p| p.lambda == Some(1.0) && !p.upper_bound)
        .map(|p| p.ase);
    // The same minimax rule for an EM that is not ranked whose point
    // estimate fell at or below its interval's lower end (branch lead17,
    // attack17 F1; docs/MATH.md §9.4 addendum "lead17"): such a point
    // says no more than the interval, so the two worst cases decide; its
    // interval spans more than 9x, so it stays ahead only where λ = 1 is
    // predicted above √(lo·hi) >= 3·lo. A point inside the interval still
    // orders an unranked EM (moving those made picks worse: jatoms n 10⁴
    // εh 1, EM 1.6–1.7x better than λ = 1; keying one lifted by emlow's
    // floor above √(lo·hi) there, branch emin26, picked EM at 4.8x on
    // the synthetic city, n 300, εh 1, grid 6).
    // (EM's key is its point clamped into [lo, hi]: at lo exactly where
    // the point fell there.)
    let at_low_end = |&(lo, _): &(f64, f64)| em_key.is_some_and(|k| k <= lo);
    if let (Some(k), Some((lo, hi)), Some(a1)) = (
        em_key,
        em_ranked_ends.or(em_unranked.filter(at_low_end)),
        unbiased,
    ) {
        let between = preds.iter().any(|p| {
            p.em_iterations.is_none() && p.lambda != Some(1.0) && p.ase >= k && p.ase < a1
        });
        if k < a1 && !between && em_yields_to_unbiased(lo, hi, a1) {
            em_key = Some(a1);
        }
    }
    for p in &mut preds {
        p.order_key = match em_key {
            Some(k) if p.em_iterations.is_some() => k,
            _ => p.ase,
        };
    }
    // On equal keys a kernel map goes before EM (EM's tie with λ = 1
    // above).
    preds.sort_by(|a, b| {
        a.order_key
            .total_cmp(&b.order_key)
            .then(a.em_iterations.is_some().cmp(&b.em_iterations.is_some()))
    });
    if none_binned {
        preds.insert(
            0,
            Prediction {
                name: "a-priori λ=0.0".into(),
                ase: f64::NAN,
                variance: f64::NAN,
                bias2: f64::NAN,
                upper_bound: false,
                lambda: Some(0.0),
                k: None,
                em_iterations: None,
                order_key: f64::NAN,
            },
        );
    }
    if em_only {
        if let Some(i) = preds.iter().position(|p| p.em_iterations.is_some()) {
            let p = preds.remove(i);
            preds.insert(0, p);
        }
    }
    let best = &preds[0];
    let runner = preds
        .iter()
        .find(|p| !p.name.starts_with("a-priori") || !best.name.starts_with("a-priori"))
        .filter(|p| p.name != best.name);
    let plain = preds.iter().find(|p| p.lambda == Some(0.0));
    // Where an unranked EM is keyed at its interval's log-centre (lead18).
    let centre_note = em_point_above_centre.zip(em_key).map(|(p, k)| {
        format!("{EM_ORDERED_AT_LOG_CENTRE} {k:.2e} (its point estimate {p:.2e} rests on the emlow floor)")
    });
    let mut line = match reports.filter(|_| none_binned) {
        Some(mp) => format!(
            "pick {}: no prediction (none of the {} reports lies inside the map's bins, {} beyond them: every kernel map is 0 and nothing in the reports predicts its error) at per-device ε = {} and n = {}",
            best.name,
            mp.counts().total(),
            mp.counts().outside(),
            epsilon,
            n
        ),
        None => match em_unranked
            .zip(em_key)
            .filter(|_| best.em_iterations.is_some())
        {
            Some(((lo, hi), k)) => format!(
                "pick {}: not ranked (its error is not pinned by {} reports: ASE in [{lo:.2e}, {hi:.2e}]), picked{} within it at per-device ε = {} and n = {}",
                best.name,
                reports.map_or(0, |r| r.counts().total()),
                centre_note.as_ref().map_or(format!(" at its point estimate {k:.2e}"), |note| format!(", {note},")),
                epsilon,
                n
            ),
            None => format!(
                "pick {}: predicted ASE {:.2e} (variance {:.2e} + bias² {:.2e}) at per-device ε = {} and n = {}",
                best.name, best.ase, best.variance, best.bias2, epsilon, n
            ),
        },
    };
    if let Some(p) = plain.filter(|p| p.name != best.name) {
        line.push_str(&format!("; plain a priori {:.2e}", p.ase));
    }
    if let Some((lo, hi)) = em_unranked.filter(|_| best.em_iterations.is_none()) {
        line.push_str(&format!(
            "; EM not ranked (its error is not pinned by {} reports): ASE in [{lo:.2e}, {hi:.2e}]",
            reports.map_or(0, |r| r.counts().total())
        ));
        if let Some(note) = &centre_note {
            line.push_str(&format!(", {note}"));
        }
    }
    if let Some(r) = runner {
        line.push_str(&format!(
            "; next other mechanism {} {}{:.2e}",
            r.name,
            if r.upper_bound { "<= " } else { "" },
            r.ase
        ));
    }
    if em_only {
        line.push_str(&format!(
            "; εh > {EM_ONLY_ABOVE_EPS_H}: EM taken, kernel maps not ranked (their error is the binning's)"
        ));
    }
    line.push_str(&atom_note);
    if !unranked.is_empty() {
        let l: Vec<String> = unranked.iter().map(|l| format!("{l:.1}")).collect();
        line.push_str(&format!(
            "; not ranked (bias not resolved by {} reports): λ = {}",
            reports.map_or(0, |r| r.counts().total()),
            l.join(", ")
        ));
    }
    if reports.is_none() && matches!(set, QuerySet::Kde(_)) {
        line.push_str(" (no reports: a priori bias not estimated, λ = 1 assumed)");
    }
    if let Some((cap, t)) = em
        .as_ref()
        .and_then(|e| e.work_cap.map(|c| (c, e.iterations)))
    {
        line.push_str(&format!(
            "; EM's held-out search ended at its work cap of {cap} steps, t* = {t} (docs/MATH.md §9.6)"
        ));
    }
    Ok(Plan {
        predictions: preds,
        line,
        em,
    })
}

/// Vector Laplace's prediction 2(L1/ε)²/n (exact), from the certified ℓ1
/// bound L1.
fn vector_laplace(l1: f64, epsilon: f64, nf: f64) -> Prediction {
    let b = l1 / epsilon;
    let v = 2.0 * b * b / nf;
    Prediction {
        name: "vector-laplace".into(),
        ase: v,
        variance: v,
        bias2: 0.0,
        upper_bound: false,
        lambda: None,
        k: None,
        em_iterations: None,
        order_key: f64::NAN,
    }
}

/// [`em_fit`]'s result: the EM map, the lattice term, EM's step in bins'
/// boxes, the plain map of the fine bins (if computed) and the lattice's
/// cell side per axis.
type EmFit = (EmMap, f64, f64, Option<Vec<f64>>, [f64; 2]);

/// The EM fit with its bootstrap and the lattice's discretisation term:
/// the mean squared difference of the plain map of the lattice counts and
/// of the fine bins (docs/MATH.md §9.6); and that plain map of the fine
/// bins when it was computed (for [`noise_and_rounding`]).
fn em_fit(g: &super::query_set::KdeGrid, epsilon: f64, mapper: &FftMapper) -> Result<EmFit> {
    em_finish(
        g,
        epsilon,
        em_on_counts(g, epsilon, mapper.counts())?,
        || Some(mapper),
    )
}

/// The part of [`em_fit`] that reads only the bin counts: the EM map with
/// its bootstrap, EM's step in bins' boxes, the lattice's cell side, and
/// the plain map of the lattice counts where the lattice is coarser than
/// the bins (None where it is the bins). It can start before the counts'
/// FFT is made ([`plan_building_mapper`]).
type EmOnCounts = (EmMap, f64, [f64; 2], Option<Vec<f64>>);

/// [`EmOnCounts`] of `counts`.
fn em_on_counts(
    g: &super::query_set::KdeGrid,
    epsilon: f64,
    counts: &super::bins::BinnedCounts,
) -> Result<EmOnCounts> {
    let engine = EmDeconvolution::new(g, epsilon, counts, EmOptions::default())?;
    let e = engine.estimate()?;
    let boxes = em_step_boxes(&engine, epsilon, counts.spec().delta());
    let cell = engine.cell_size();
    // Where the lattice is the bins themselves there is nothing to lose
    // (the fine map's difference would be its own rounding correction).
    let lattice = (engine.bins_per_cell() != 1).then(|| engine.plain_lattice_map());
    Ok((e, boxes, cell, lattice))
}

/// [`em_fit`] from [`em_on_counts`]: the lattice term against the plain
/// map of the fine bins, made with the counts' FFT `mapper()` gives (asked
/// only where the lattice is coarser than the bins; None: refused).
fn em_finish<'a>(
    g: &super::query_set::KdeGrid,
    epsilon: f64,
    (e, boxes, cell, lattice): EmOnCounts,
    mapper: impl FnOnce() -> Option<&'a FftMapper>,
) -> Result<EmFit> {
    let m = g.len() as f64;
    let Some(lattice) = lattice else {
        return Ok((e, 0.0, boxes, None, cell));
    };
    let mapper = mapper().ok_or(crate::error::Error::Numerical {
        routine: "EM deconvolution thread (no FFT of the counts)",
    })?;
    let k0 = DebiasKernel::new(g.dim(), g.bandwidth(), epsilon, 0.0)?;
    let fine = mapper.apply_spatial(&mapper.spatial_kernel(&k0));
    let disc2 = lattice
        .iter()
        .zip(&fine)
        .map(|(a, b)| (a - b) * (a - b))
        .sum::<f64>()
        / m;
    Ok((e, disc2, boxes, Some(fine), cell))
}

/// How much one EM step blurs beyond the plain map's noise, in units of
/// the bins' box (variance Δ²/12 per axis, whose bias is the size d of
/// the plain map's rounding correction; docs/MATH.md §9.4): the
/// channel's spread on the lattice beyond the noise's 3/ε² per axis
/// ([`EmDeconvolution::channel_variance`]), plus the rounding of the
/// counts to the lattice's cells and the map's average over a cell
/// (δ²/12 each; the plain map's own rounding is undone by its sinc
/// correction). Averaged over the two axes:
///
///   m = mean_a 12·(max(σ_k,a² − 3/ε², 0) + δ_a²/6)/Δ_a².
///
/// 4 where the noise spans several cells (the channel adds the two
/// uniforms of the cells' boxes, δ²/6: the model of branch emmodel), about
/// 2 where it is far below a cell (εh >= 100: the channel hardly moves
/// mass between cells).
fn em_step_boxes(engine: &EmDeconvolution, epsilon: f64, delta: [f64; 2]) -> f64 {
    let var = engine.channel_variance();
    let cell = engine.cell_size();
    let noise = 3.0 / (epsilon * epsilon);
    (0..2)
        .map(|a| {
            12.0 * ((var[a] - noise).max(0.0) + cell[a] * cell[a] / 6.0) / (delta[a] * delta[a])
        })
        .sum::<f64>()
        / 2.0
}

/// The noise-and-rounding error of a map of the binned reports, for EM
/// above εh = [`EM_ESTIMATED_UP_TO_EPS_H`] (docs/MATH.md §9.4): there EM
/// stops after 1-4 iterations and its spread given the devices is that of
/// the plain map of near-exact locations rounded into bins. At the planned
/// n:
///
///   P = ū/n,  ū = mean_j (1/n)Σ_i [(K² * p_N) − (K * p_N)²](t_j − x̃_i),
///
/// K the plain (λ = 0) Gaussian, the noise-law plug-in of
/// [`FftMapper::variances_with_plug_in`] evaluated on the rounded counts:
/// its K² term is applied to counts at bin centres, so ū holds the
/// rounding's spread Σ_a (Δ_a²/12)(∂_a K)² as well as the noise's
/// (measured on two cells at εh 100 and 1000, n = 10³: ū was 0.93x and
/// 1.48x the error of the noise plus the rounding of the true locations).
/// Returned (P only `with_noise`, else `None`) with d² = mean_j (map₀_j −
/// map₀'_j)², map₀' the plain map without the rounding correction (the
/// Gaussian itself at the bin offsets): the size of that correction,
/// O(Δ²∇²F), which does not shrink with n. `plain0` is map₀ if the
/// caller has it (EM's lattice term computes the same map, [`em_fit`]);
/// `unrounded0` is map₀' ([`unrounded_plain_map`], computed beside the
/// kernel maps: it reads only the counts).
fn noise_and_rounding(
    g: &super::query_set::KdeGrid,
    epsilon: f64,
    nf: f64,
    mapper: &FftMapper,
    with_noise: bool,
    plain0: Option<Vec<f64>>,
    unrounded0: &[f64],
) -> Result<(Option<f64>, f64)> {
    let m = g.len() as f64;
    let k0 = DebiasKernel::new(g.dim(), g.bandwidth(), epsilon, 0.0)?;
    // The kernel only where it is needed (the map given, or the plug-in).
    let s0 = (plain0.is_none() || with_noise).then(|| mapper.spatial_kernel(&k0));
    let mean0 = match (plain0, &s0) {
        (Some(p), _) => p,
        (None, Some(s0)) => mapper.apply_spatial(s0),
        (None, None) => Vec::new(),
    };
    let noise = if let (true, Some(s0)) = (with_noise, &s0) {
        let (_, u) = mapper.variances_with_plug_in(&k0, s0)?;
        Some((u.iter().sum::<f64>() / m).max(0.0) / nf)
    } else {
        None
    };
    let d2 = unrounded0
        .iter()
        .zip(&mean0)
        .map(|(a, b)| (a - b) * (a - b))
        .sum::<f64>()
        / m;
    Ok((noise, d2))
}

/// The signed offset of FFT index `i` on a periodic axis of `len` points
/// `d` apart: i·d for 2i <= len, (i − len)·d beyond (the wrapped half).
fn wrapped_offset(i: usize, len: usize, d: f64) -> f64 {
    if 2 * i > len {
        (i as f64 - len as f64) * d
    } else {
        i as f64 * d
    }
}

/// map₀' of [`noise_and_rounding`]: the plain (λ = 0) map without the
/// rounding correction, (1/n) Σ_bins count · K_h(t_j − c) with
/// K_h(z) = exp(−|z|²/(2h²)) sampled at the wrapped bin offsets (no sinc
/// division), at every map point. It reads only the counts, so [`plan`]
/// computes it on a thread beside the kernel maps and EM instead of after
/// them (branch speed03: the same calls, the same bits).
fn unrounded_plain_map(g: &super::query_set::KdeGrid, mapper: &FftMapper) -> Vec<f64> {
    let h2 = g.bandwidth() * g.bandwidth();
    let plain = on_wrapped_lattice(g, mapper, |z0, z1| {
        libm::exp(-(z0 * z0 + z1 * z1) / (2.0 * h2))
    });
    mapper.apply_spatial(&plain)
}

/// `f(z0, z1)` at every point of the mapper's periodic FFT lattice, z the
/// signed [`wrapped_offset`] of the point along each axis (z1 = 0 on a
/// one-dimensional grid), row-major: a spatial kernel for
/// [`FftMapper::apply_spatial`].
fn on_wrapped_lattice(
    g: &super::query_set::KdeGrid,
    mapper: &FftMapper,
    f: impl Fn(f64, f64) -> f64,
) -> Vec<f64> {
    let delta = mapper.counts().spec().delta();
    let [n0, n1] = mapper.fft_len();
    let dim2 = g.dim() == 2;
    let mut field = Vec::with_capacity(n0 * n1);
    for i in 0..n0 {
        let z0 = wrapped_offset(i, n0, delta[0]);
        for k in 0..n1 {
            let z1 = if dim2 {
                wrapped_offset(k, n1, delta[1])
            } else {
                0.0
            };
            field.push(f(z0, z1));
        }
    }
    field
}

/// The EM deconvolution estimator's prediction (docs/MATH.md §9.6): its
/// bootstrap error model (conditioned on the devices, [`EmMap::condition`])
/// at the reports' n, scaled like a variance to the planned n by `scale`
/// (reports / planned n), plus the lattice's discretisation term `disc2`.
fn em_prediction(e: &EmMap, disc2: f64, scale: f64) -> Prediction {
    // The bootstrap's truth (an EM pilot) is smoother than the devices,
    // so its bias is too small: charged twice (calibrated on the sweep's
    // populations, docs/MATH.md §9.6).
    let boot_bias2 = (e.predicted_ase - e.predicted_variance).max(0.0);
    Prediction {
        name: "a-priori em".into(),
        ase: (e.predicted_variance + EM_BIAS2_FACTOR * boot_bias2) * scale + disc2,
        variance: e.predicted_variance * scale,
        bias2: EM_BIAS2_FACTOR * boot_bias2 * scale + disc2,
        upper_bound: false,
        lambda: None,
        k: None,
        em_iterations: Some(e.iterations),
        order_key: f64::NAN,
    }
}

/// A lower bound on EM's ASE above εh = [`EM_ESTIMATED_UP_TO_EPS_H`] from
/// its distance to the plain (λ = 0) map of the same reports (docs/MATH.md
/// §9.4, "EM far from the plain map", branch emzero). By the triangle
/// inequality on the cells' root mean square,
///
///   √ASE_EM >= √D − √ASE₀,  D = mean_j (EM_j − map₀_j)²,
///
/// and ASE₀ <= v₀ + U₀, v₀ the plain map's variance at the reports' n and
/// U₀ = max(avg, 0) + 2 se its bias²'s upper end ([`PLAIN_RESOLVED_Z`] = 2
/// standard errors, EM's side of the model, as in `em_interval`), so
///
///   floor = (√D − √(v₀ + U₀))₊².
///
/// (The mirror bound √ASE_EM >= √(v₀ + L₀) − √D, EM near a plain map far
/// from the truth, was tried and dropped: it raised the predictions more
/// than 3x above EM's measured ASE from 7-28 to 22-34 of 60 per grid on
/// grids 7-61 and fixed no miss.)
///
/// Where EM's map is where the plain map is the floor is 0; where it moved
/// far (long held-out stops on grids of 3-5 points, t* up to 326) it is
/// what the bootstrap, whose replicates move the same way, cannot see.
/// Not rescaled with n (a distance between two maps of these reports).
/// `None` without a plain map or its bias estimate.
fn em_far_from_plain_floor(kernels: &[KernelMap], e: &EmMap, nf: f64, n_rep: f64) -> Option<f64> {
    let k0 = kernels.iter().find(|k| k.lambda == 0.0)?;
    let b0 = k0.against_unbiased?;
    if k0.mean.len() != e.values.len() {
        return None;
    }
    let d = mean_squared_distance(&k0.mean, &e.values);
    let a0 = k0.var * nf / n_rep + b0.avg.max(0.0) + PLAIN_RESOLVED_Z * b0.se;
    let gap = d.sqrt() - a0.max(0.0).sqrt();
    (gap.is_finite() && gap > 0.0).then_some(gap * gap)
}

/// EM's squared bias where the reports do not resolve the plain map's
/// bias (docs/MATH.md §9.4, branch emlow): there EM deconvolves little of
/// the noise's blur, its held-out stop comes early and its bootstrap pilot
/// (EM run 3t* steps) is as smooth as the map, so the bootstrap's bias
/// misses the structure neither resolves (10.6x under-predicted on the
/// constructed population at εh 0.1, n = 10^4). EM's map lies between the
/// plain map and the truth with its error about orthogonal to the blur it
/// removed, and it removes at most half of the plain map's error there, so
/// its squared distance to the truth is at least its squared distance to
/// the plain map:
///
///   floor = mean_j (map₀_j − EM_j)² − v₀ − v_EM,
///
/// v₀ and v_EM the two maps' variances at the reports' n (the same
/// difference as the kernel maps' EM floor). A bias of structure below
/// the noise: not rescaled with n. `None` where the plain map's bias is
/// resolved (its prediction ranked without EM's floor) or without a plain
/// map.
fn em_unresolved_floor(kernels: &[KernelMap], e: &EmMap, nf: f64, n_rep: f64) -> Option<f64> {
    let k0 = kernels.iter().find(|k| k.lambda == 0.0)?;
    let b0 = k0.against_unbiased?;
    if plain_bias_resolved(k0.var, b0) || k0.mean.len() != e.values.len() {
        return None;
    }
    let d = mean_squared_distance(&k0.mean, &e.values);
    let floor = d - k0.var * nf / n_rep - e.predicted_variance;
    (floor.is_finite() && floor > 0.0).then_some(floor)
}

/// EM's squared bias where its held-out stop leaves its map with no more
/// structure than the devices' own sampling (docs/MATH.md §9.4, "EM at
/// an early stop", branch cells22). The truth is the map of the n
/// devices, F_j = (1/n)Σ_i K(t_j − x_i) with K unnormalised (peak 1), and
/// where the reports do not resolve the plain map's bias they bound the
/// structure EM leaves only between two truth-free ends: below, the
/// structure n devices carry whatever their law,
///
///   L = (π h² / (Δ₀ Δ₁ m) − mean_j map₀_j²) / n
///
/// (∫K² = π h², m grid points of spacing Δ₀ × Δ₁; the variance of a
/// cell's mean of n kernel values), and above, the most a map with values
/// in [0, 1] and mean F̄ (EM's map's mean) can carry, U = F̄(1 − F̄). Their
/// log-centre G = √(L·U) is within √(U/L) of every value between; under
/// premise A EM's bias² is the plain map's less the distance D it moved
/// from it, so
///
///   floor = G − D,  D = mean_j (map₀_j − EM_j)²,
///
/// used only where EM's map spreads over the grid by no more than L
/// (mean_j (EM_j − F̄)² <= L: EM resolved nothing beyond what n devices
/// drawn from a flat law show by chance), the plain map's bias is not
/// resolved (λ = 0 not ranked), and on a 2-D grid. Measured: the city at
/// εh 0.1, n = 10³ under-predicted beyond 3x at 13 of seeds 1–20, 7
/// after; the constructed population there 9 of 20, 0 after (BENCHMARKS.md
/// "Branch cells22"). `None` where it does not apply.
fn em_early_stop_floor(
    g: &super::query_set::KdeGrid,
    kernels: &[KernelMap],
    e: &EmMap,
    nf: f64,
    n_rep: f64,
) -> Option<f64> {
    let k0 = kernels.iter().find(|k| k.lambda == 0.0)?;
    let b0 = k0.against_unbiased?;
    let m = e.values.len();
    if g.dim() != 2 || m == 0 || k0.mean.len() != m || plain_bias_resolved(k0.var, b0) {
        return None;
    }
    let mf = m as f64;
    let [d0, d1] = g.step();
    let h = g.bandwidth();
    let kernel2 = core::f64::consts::PI * h * h / (d0 * d1 * mf);
    let plain2 = k0.mean.iter().map(|v| v * v).sum::<f64>() / mf;
    let mean_em = e.values.iter().sum::<f64>() / mf;
    let spread_em = e.values.iter().map(|v| (v - mean_em).powi(2)).sum::<f64>() / mf;
    // The gate reads the reports (EM's map at n_rep), the floor the
    // planned n devices' map.
    let chance = (kernel2 - plain2) / n_rep;
    // Refused also for NaN.
    if spread_em.is_nan() || chance.is_nan() || spread_em > chance {
        return None;
    }
    let lower = (kernel2 - plain2) / nf;
    let upper = mean_em.clamp(0.0, 1.0) * (1.0 - mean_em.clamp(0.0, 1.0));
    let floor = (lower * upper).sqrt() - mean_squared_distance(&k0.mean, &e.values);
    (floor.is_finite() && floor > 0.0).then_some(floor)
}

/// EM's ASE interval [lo, hi] at the planned n, from the reports alone
/// (docs/MATH.md §9.4, "EM ranked only where the reports pin it", branch
/// rank15): lo = var + L, hi = var + U with `var` EM's conditioned
/// bootstrap variance at the planned n and
///
///   L = max(disc², floor₁)   (`lower_bias2`),
///   U = max(min(v₀ + U₀ − D, (√s_EM + √(F̄(1 − F̄)))²) − v_EM, L),
///
/// disc² the lattice term, floor₁ the floor against the unbiased map
/// (|b_EM| >= |b_EM − b₁| − |b₁|, b₁ = 0; the bootstrap's bias is not a
/// lower end: its pilot can carry more structure than the truth); U₀ = avg₀₊ + 2 se₀
/// the top of the plain map's bias², v₀ and v_EM the plain map's and EM's
/// variances and D = mean_j (map₀_j − EM_j)² at the reports' n (premise A:
/// EM's error is the plain map's less the distance it moved), and the box
/// bound: EM's map and the truth lie in [0, 1], the truth's spread over
/// the grid is at most F̄(1 − F̄) (F̄ EM's map's mean) and EM's is s_EM,
/// so their distance is at most the sum of the two roots. `None` where an
/// end is not finite (the rule is then not applied).
///
/// Above εh 3 (`above_eps_h_3`; docs/MATH.md §9.4, "EM's interval above
/// εh 3", branch small19) the caller's `lower_bias2` also carries the
/// far-from-plain floor (√D − √(v₀ + U₀))₊² less `var`, U also takes the
/// triangle's top (√D + √(v₀ + U₀))² − v_EM (no premise beyond U₀), and
/// premise A's top is read only where it is not below L (where EM moved
/// farther from the plain map than the plain map's error it is refuted:
/// measured, EM's ASE is then about D + ASE₀, not ASE₀ − D).
///
/// ```text
/// v₀ + U₀ = 3e-4, D = 1e-4, v_EM = var = 1e-5, L = 2e-5:
/// [3e-5, 2e-4]: ranked (2e-4 <= 9 · 3e-5), clamped into [6.7e-5, 9e-5]
/// ```
fn em_interval(
    kernels: &[KernelMap],
    e: &EmMap,
    nf: f64,
    n_rep: f64,
    var: f64,
    lower_bias2: f64,
    above_eps_h_3: bool,
) -> Option<(f64, f64)> {
    let m = e.values.len();
    if m == 0 {
        return None;
    }
    let mf = m as f64;
    let v_em = e.predicted_variance;
    let mean_em = e.values.iter().sum::<f64>() / mf;
    let spread_em = e.values.iter().map(|v| (v - mean_em).powi(2)).sum::<f64>() / mf;
    let fbar = mean_em.clamp(0.0, 1.0);
    let boxed = (spread_em.max(0.0).sqrt() + (fbar * (1.0 - fbar)).sqrt()).powi(2);
    let mut upper = boxed - v_em;
    let lower = lower_bias2.max(0.0);
    if let Some(k0) = kernels.iter().find(|k| k.lambda == 0.0) {
        if let (Some(b0), true) = (k0.against_unbiased, k0.mean.len() == m) {
            let u0 = b0.avg.max(0.0) + PLAIN_RESOLVED_Z * b0.se;
            let a0 = k0.var * nf / n_rep + u0;
            let d = mean_squared_distance(&k0.mean, &e.values);
            let premise_a = a0 - d - v_em;
            if above_eps_h_3 {
                // The triangle's top (no premise): √ASE_EM <= √D + √ASE₀.
                let tri = (d.max(0.0).sqrt() + a0.max(0.0).sqrt()).powi(2) - v_em;
                upper = upper.min(tri);
                // Premise A refuted by the reports (its top below a lower
                // end that holds without it: EM moved farther from the
                // plain map than the plain map's own error): not read.
                if premise_a >= lower {
                    upper = upper.min(premise_a);
                }
            } else {
                // f64::min keeps the box where this is NaN.
                upper = upper.min(premise_a);
            }
        }
    }
    let upper = upper.max(lower);
    let (lo, hi) = (var + lower, var + upper);
    (lo.is_finite() && hi.is_finite()).then_some((lo, hi))
}

/// EM's ranked prediction from its point prediction `point` and its ASE
/// interval [lo, hi] ([`em_interval`]): ranked only where hi <= 9 lo, the
/// point clamped into [lo, hi] and then into [hi/3, 3 lo], within 3x of
/// every ASE in the interval (the kernel maps' rule, [`kernel_prediction`];
/// docs/MATH.md §9.4). `None`: not ranked.
///
/// ```text
/// point 3e-4 in [3e-5, 2e-4]: 9e-5;  point 1e-5 in [1e-5, 1e-3]: None
/// ```
fn em_ranked_prediction(point: f64, lo: f64, hi: f64) -> Option<f64> {
    use core::cmp::Ordering::{Equal, Less};
    // Refused also for NaN (the point's too: attack13 O3, a NaN point
    // was ranked with ASE NaN) and for lo > hi (f64::clamp would panic).
    if point.is_nan()
        || !matches!(hi.partial_cmp(&(9.0 * lo)), Some(Less | Equal))
        || !matches!(lo.partial_cmp(&hi), Some(Less | Equal))
    {
        return None;
    }
    Some(point.clamp(lo, hi).clamp(hi / 3.0, 3.0 * lo))
}

/// EM's key for the pick (docs/MATH.md §9.4, addendum "emin26"): its point
/// estimate `point` clamped into its ASE interval [lo, hi] (rank15),
/// except for a ranked EM (hi <= 9 lo) whose point lies above hi: the
/// reports then read EM's ASE anywhere in [lo, point] (the interval's
/// premises say at most hi, the bootstrap says point; one failed), and
/// against a map predicted at a the smaller worst case (point/a for EM,
/// a/lo for the map) goes, so the key is max(hi, √(lo·point)) (never
/// below the clamped point). A NaN point is keyed at hi (attack13 O3).
/// No constant is chosen.
///
/// ```text
/// ranked   [3.13e-7, 4.35e-7], point 1.04e-6: √(lo·point) = 5.71e-7
/// unranked [7.72e-5, 1.58e-2], point 4.82e-3: 4.82e-3 (the clamp)
/// ```
fn em_order_key(point: f64, lo: f64, hi: f64) -> f64 {
    if point.is_nan() {
        return hi;
    }
    match em_ranked_prediction(point, lo, hi) {
        Some(_) if point > hi => hi.max((lo * point).sqrt()),
        _ => point.max(lo).min(hi),
    }
}

/// Whether a ranked EM, its ASE in [lo, hi] (hi <= 9 lo), yields to the
/// unbiased map (λ = 1) predicted at `a1` (docs/MATH.md §9.4, "A ranked EM
/// against λ = 1", branch plan20, attack14 O2): where √(lo·hi) >= a1.
/// The caller asks only where λ = 1 comes right after EM's point.
/// Picking EM can cost up to hi/a1 times the better of the two, picking
/// λ = 1 up to a1/lo; the smaller worst case goes. λ = 1's prediction is
/// its variance (no bias to bound), so its ASE is taken as known; EM's
/// point estimate inside [lo, hi] is not a bound and does not enter.
/// False for NaN.
///
/// ```text
/// [1.016e-9, 3.352e-9], λ = 1 at 1.114e-9: √ = 1.845e-9 >= 1.114e-9, yields
/// [1e-9, 3e-9], λ = 1 at 2e-9: √ = 1.73e-9, EM kept ahead
/// ```
fn em_yields_to_unbiased(lo: f64, hi: f64, a1: f64) -> bool {
    (lo * hi).sqrt() >= a1
}

/// The mean squared distance of two maps of the same cells,
/// (1/m) Σ_j (a_j − b_j)² over the m = len(b) cells (m taken as 1 when
/// empty, so the result is 0).
fn mean_squared_distance(a: &[f64], b: &[f64]) -> f64 {
    let m = b.len().max(1) as f64;
    a.iter().zip(b).map(|(x, y)| (x - y) * (x - y)).sum::<f64>() / m
}

/// The kernel maps' floor against the EM map (docs/MATH.md §9.4):
/// |b_λ| >= |b_λ − b_EM| − |b_EM|, with |b_λ − b_EM|² estimated by `diff`
/// (mean (map_λ − map_EM)² less both variances) and |b_EM|² taken at
/// [`EM_FLOOR_BIAS2_MARGIN`] times EM's predicted bias² `em_bias2`, the
/// top of the 3x within which that prediction holds (branch cells16):
///
///   floor = (√diff − √(3·b²_EM))₊².
///
/// With EM's bias² as predicted, a map far better than EM got the
/// difference of two nearly equal roots: on the airports at εh 3,
/// n = 10⁷, EM 375x worse than λ = 1 and its bias² predicted 1.31x low,
/// λ = 1 (whole error 2.5e-10) was charged 1.27e-9 (measured/predicted
/// 0.16, branch cells15).
fn em_floor(diff: f64, em_bias2: f64) -> f64 {
    (diff.max(0.0).sqrt() - (EM_FLOOR_BIAS2_MARGIN * em_bias2).max(0.0).sqrt())
        .max(0.0)
        .powi(2)
}

/// The margin on EM's predicted bias² in [`em_floor`]: 3, the factor
/// the planner's predictions are held to.
const EM_FLOOR_BIAS2_MARGIN: f64 = 3.0;

/// EM's squared bias against the unbiased map (docs/MATH.md §9.4, branch
/// cells16): |b_EM| >= |b_EM − b_1| − |b_1| with b_1 = 0 (λ = 1, up to the
/// binning, which at εh <= 20 the noise dithers away), so
///
///   floor = mean_j (map₁_j − EM_j)² − v₁ − v_EM,
///
/// v₁, v_EM the two maps' variances at the reports' n (both maps read the
/// same counts; their positive correlation only lowers the floor). Where
/// that is negative and EM's variance is at least v₁/2 (EM does not
/// remove the unbiased map's noise, it carries it), the covariance's
/// Cauchy–Schwarz top instead: d − (√v₁ − √v_EM)². Used
/// where it is resolved: floor >= [`EM_UNBIASED_FLOOR_RESOLVED`]·v₁ (the
/// mean of m cells' squared noise of variance v₁, correlated over a few
/// cells, scatters by about 0.1·v₁ on 31 × 31 maps). Where the held-out
/// stop comes late (n = 10⁷: t* = 130–1675) the bootstrap's pilot, EM run
/// 3t* steps, is itself smoother than the devices and its bias misses
/// what the unbiased map already shows: EM measured 5.25x its prediction
/// on the city at εh 0.3 and 2.27x on the constructed population at
/// εh 3, where it was picked at 2.47x and 1.91x the best measured map
/// (branch cells15). `None` without a λ = 1 map.
fn em_against_unbiased_floor(kernels: &[KernelMap], e: &EmMap, nf: f64, n_rep: f64) -> Option<f64> {
    let k1 = kernels.iter().find(|k| k.lambda == 1.0)?;
    if k1.mean.len() != e.values.len() || !k1.var.is_finite() {
        return None;
    }
    let d = mean_squared_distance(&k1.mean, &e.values);
    let v1 = k1.var * nf / n_rep;
    let v_em = e.predicted_variance;
    let mut floor = d - v1 - v_em;
    if floor < 0.0 && 2.0 * v_em >= v1 {
        // EM carries the unbiased map's noise (its variance at least half
        // of v₁) and sits closer to that map than the two noises would put
        // independent maps: their covariance c is large, and
        // |b_EM − b₁|² = d − v₁ − v_EM + 2c with c <= √(v₁·v_EM)
        // (Cauchy–Schwarz) gives d − (√v₁ − √v_EM)². On the constructed
        // population at εh 3, n = 10⁷ (t* = 130): d = 1.99e-10 against
        // v₁ + v_EM = 5.17e-10, EM measured 5.59e-10 against its
        // variance 2.47e-10 (branch cells16).
        floor = d - (v1.sqrt() - v_em.max(0.0).sqrt()).powi(2);
    }
    // Less z standard errors of the unbiased map's mean squared noise,
    // which the difference carries (branch lead18): read from the plain
    // map's bias estimate against the same unbiased map, its noise term
    // alone (the cells' uneven variance included; its bias term, the plain
    // map's own blur, is no part of EM's difference: with it the floor
    // vanished at n 10⁶, εh 0.3 and EM was picked at up to 12.9x,
    // docs/ATTACK-21.md F1). On a 6 × 6 grid at εh 0.3, n = 10³ the unbiased map's
    // noise drew 1.9x its variance and the floor without it ranked EM at
    // 36x its measured ASE.
    let scatter = kernels
        .iter()
        .find(|k| k.lambda == 0.0)
        .and_then(|k| k.against_unbiased)
        .map_or(0.0, |b| BIAS_BOUND_Z * b.noise_se);
    // Resolved as before (the raw floor at least half the unbiased map's
    // variance); the value used is the floor less that scatter (a lower
    // confidence end), where still positive.
    (floor.is_finite() && floor >= EM_UNBIASED_FLOOR_RESOLVED * v1 && floor > scatter)
        .then_some(floor - scatter)
}

/// [`em_against_unbiased_floor`] is used where it is at least this many
/// times the unbiased map's variance.
const EM_UNBIASED_FLOOR_RESOLVED: f64 = 0.5;

/// How much the planner charges the bootstrap's squared bias of the EM map
/// ([`EM_BIAS_FACTOR`](super::intervals::EM_BIAS_FACTOR) squared).
const EM_BIAS2_FACTOR: f64 = super::intervals::EM_BIAS_FACTOR * super::intervals::EM_BIAS_FACTOR;

/// The share of a map's unconditional variance (new devices each time)
/// that remains given the devices (the noise's share): v_λ/u_λ of the
/// kernel map whose unconditional variance u_λ is nearest (in ratio) to
/// `unconditional`, in [0, 1] (1 without kernel maps).
fn conditional_share(kernels: &[KernelMap], unconditional: f64) -> f64 {
    kernels
        .iter()
        .filter(|k| k.unconditional > 0.0 && k.var.is_finite())
        .min_by(|a, b| {
            let da = (a.unconditional / unconditional).ln().abs();
            let db = (b.unconditional / unconditional).ln().abs();
            da.total_cmp(&db)
        })
        .map_or(1.0, |k| (k.var / k.unconditional).clamp(0.0, 1.0))
}

/// One kernel map of the planner: λ, its predicted variance, its
/// squared-bias estimate against the unbiased map (None for λ = 1), and
/// the map itself (for the bias against the EM map).
struct KernelMap {
    lambda: f64,
    var: f64,
    against_unbiased: Option<BiasEstimate>,
    mean: Vec<f64>,
    /// Its unconditional variance at the planned n: the mean over cells
    /// of ((1/n)Σ_i K_λ²(t_j − x̃_i) − map_j²)/n (new devices each time).
    unconditional: f64,
}

/// How many standard errors the ends of a kernel map's bias² interval
/// lie from the estimate (branch plan19; docs/MATH.md §9.4, "The bounds'
/// confidence"): z = Φ⁻¹(1 − α/3) for a miss probability α = 1% per
/// ranked prediction, a union over the three one-sided bounds a kernel
/// map's prediction reads (avg − z·se, avg₊ + z·se and its EM floor).
/// Before: 2 (Φ(−2) = 2.3% per bound, 6.8% for three). EM's reading of
/// the plain map's interval stays at [`PLAIN_RESOLVED_Z`]: its top U₀ is
/// also the clamp of EM's pick key, and at z it picked λ = 0.8 over a
/// better EM (measured; docs/MATH.md §9.4).
///
/// ```text
/// Φ(−2.7131) = 0.00333 = 1% / 3
/// ```
pub const BIAS_BOUND_Z: f64 = 2.713_051_888_472_720_4;

/// The standard errors of the plain map's (λ = 0) bias² interval as EM
/// reads it: the gate "the plain map's bias is resolved"
/// ([`plain_bias_resolved`]) where EM's point prediction switches to its
/// floors (branches emlow, cells22), and the top U₀ = avg₀₊ + 2 se₀ of
/// EM's interval (branch rank15), which also clamps EM's pick key. Both
/// choose EM's model and order, so [`BIAS_BOUND_Z`] (branch plan19) does
/// not move them (measured: at z the pick got worse in three seed-cells
/// and in `experiment.kde-equal`; docs/MATH.md §9.4).
///
/// ```text
/// λ = 0: var + avg₊ + 2 se <= 9 (var + (avg − 2 se)₊): resolved
/// ```
pub const PLAIN_RESOLVED_Z: f64 = 2.0;

/// Whether the plain map's (λ = 0) ASE interval at [`PLAIN_RESOLVED_Z`]
/// standard errors spans at most 9x: the gate of EM's floors
/// ([`em_unresolved_floor`], [`em_early_stop_floor`]).
///
/// ```text
/// var 2.2e-8, avg −3.4e-2 ± 1.4e-2: not resolved
/// ```
fn plain_bias_resolved(var: f64, b: BiasEstimate) -> bool {
    kernel_prediction_at(var, b, 0.0, PLAIN_RESOLVED_Z).is_some()
}

/// The unbiased estimate of a kernel map's mean squared bias B² (the
/// average over the cells of b̂_j² − Var b̂_j, not clipped) and its
/// standard error (docs/MATH.md §9.4): `se` with the cells' mean
/// variance v̄ (EM's reading of the plain map's interval and a ranked
/// kernel map's number, unchanged), and `se_ranked` with the mean of v_j²
/// in its second term (whether a kernel map is ranked, branch small23;
/// docs/MATH.md §9.4, "Uneven variance"). se_ranked >= se, equal where
/// every cell's variance is v̄.
///
/// ```text
/// v = (1, 0, 0, 0) · 4v̄: mean v² = 4v̄², se_ranked² − se² = 2·3v̄²S2/m
/// ```
#[derive(Clone, Copy, Debug)]
struct BiasEstimate {
    avg: f64,
    se: f64,
    se_ranked: f64,
    /// The noise part of `se_ranked` alone, √(2·mean(v_j²)·S2/m): the
    /// scatter of the unbiased map's mean squared noise (branch lead18).
    noise_se: f64,
}

/// A kernel map's predicted ASE from its variance `var`, the unbiased
/// bias² estimate `b` and a lower estimate `floor` of its bias² (against
/// the EM map): the ASE lies in [var + L, var + U] with L = max(avg − z se,
/// floor, 0) and U = max(avg₊ + z se, L), avg₊ = max(avg, 0) (z =
/// [`BIAS_BOUND_Z`] = 2.713 standard errors each side of the estimate
/// clipped to B² >= 0, a 1% miss probability per ranked prediction; 2
/// before branch plan19).
/// Ranked only where U + var <= 9 (L + var), i.e. where the reports pin the
/// ASE within a factor 9: the prediction, var + avg clamped into
/// [(var + U)/3, 3 (var + L)], is then within 3x of every ASE in the
/// interval. None where the bias is not resolved (docs/MATH.md §9.4).
///
/// U is never below z se (branch cells21, at z = 2): with U = max(avg + 2 se, L) an
/// estimate that fell more than two standard errors below 0 (a chance-low
/// draw of the unbiased map's noise, which every λ shares) closed the
/// interval to the single point L = 0 and read "bias² resolved at 0". On
/// the airports at εh 0.1, n = 10⁵, seed 4, avg = −3.4e-2 ± 1.39e-2 for
/// every λ < 1 ranked λ = 0 at its variance 2.2e-8 against a measured ASE
/// of 3.0e-4 (13,520x) and picked it at 5.8x the best map.
fn kernel_prediction(var: f64, b: BiasEstimate, floor: f64) -> Option<(f64, f64)> {
    // Ranked only where the interval at `se_ranked` (the cells' uneven
    // variance, branch small23) spans at most 9x; the number is then the
    // v̄² interval's, nested in it (moving the point to the wider
    // interval's clamp made picks worse: docs/MATH.md §9.4, "Uneven
    // variance").
    let uneven = BiasEstimate {
        se: b.se_ranked,
        ..b
    };
    kernel_prediction_at(var, uneven, floor, BIAS_BOUND_Z)?;
    kernel_prediction_at(var, b, floor, BIAS_BOUND_Z)
}

/// [`kernel_prediction`] with the interval's ends `z` standard errors
/// from the estimate: [`BIAS_BOUND_Z`] for a prediction, [`PLAIN_RESOLVED_Z`]
/// for the gate "the plain map's bias is resolved" that EM's floors read.
///
/// ```text
/// var 1e-8, avg 1e-9 ± 1e-9, z = 2: [1e-8, 1.3e-8], 1.1e-8
/// ```
fn kernel_prediction_at(var: f64, b: BiasEstimate, floor: f64, z: f64) -> Option<(f64, f64)> {
    let lower = (b.avg - z * b.se).max(floor).max(0.0);
    let upper = (b.avg.max(0.0) + z * b.se).max(lower);
    let (lo, hi) = (var + lower, var + upper);
    // Refused also for NaN.
    if !matches!(
        hi.partial_cmp(&(9.0 * lo)),
        Some(core::cmp::Ordering::Less | core::cmp::Ordering::Equal)
    ) {
        return None;
    }
    let ase = (var + b.avg.clamp(lower, upper)).clamp(hi / 3.0, 3.0 * lo);
    Some((ase, ase - var))
}

/// The kernel maps K_λ, λ in [`LAMBDAS`], of the reports with their
/// variances and bias estimates against the unbiased map (docs/MATH.md
/// §9.4), and the mean cell value of the unbiased map.
fn kernel_maps(
    g: &super::query_set::KdeGrid,
    epsilon: f64,
    nf: f64,
    mapper: &FftMapper,
) -> Result<(f64, Vec<KernelMap>)> {
    let m = g.len() as f64;
    let n_rep = mapper.counts().total() as f64;
    let k1 = DebiasKernel::new(g.dim(), g.bandwidth(), epsilon, 1.0)?;
    // F[K_λ] once per λ for its spatial kernel, its variances and (against
    // F[K_1], kept) its bias's correlation sums: the same calls on the same
    // |ω| as evaluating it in each (branch speed04; exp was 5.6% of the
    // samples at εh 0.3).
    let ft1 = mapper.kernel_transform(&k1);
    let s1 = mapper.spatial_kernel_of(&ft1);
    // The unbiased map from F[K_1] directly (branch speed05: the forward
    // transform of s_1 is N·F[K_1]·corr/vol up to rounding).
    let mean1 = mapper.map_of_transform(&ft1);
    let mean_f = (mean1.iter().map(|v| v.clamp(0.0, 1.0)).sum::<f64>() / m).max(1e-12);
    // One λ's map and variance, with the correlation sums of its bias
    // estimate (λ < 1) and the map of (K_λ − K_1)² for the bias part:
    // `FftMapper::planner_map_of`, 4 transforms of the lattice and 2 read
    // on the map's columns where the map, the map of K_λ², the variances
    // and (in the bias part) the map of (K_λ − K_1)² took 7 and 4 (branch
    // speed05; the same quantities up to rounding).
    let map_part = |lam: f64| -> Result<MapPart> {
        let k = DebiasKernel::new(g.dim(), g.bandwidth(), epsilon, lam)?;
        let own = (lam != 1.0).then(|| mapper.kernel_transform(&k));
        let ft = own.as_ref().unwrap_or(&ft1);
        let pm = mapper.planner_map_of(&k, ft, (lam != 1.0).then_some(&s1[..]));
        let var: f64 = pm.variances.iter().sum::<f64>() / m / nf;
        // The correlation sums of K_λ − K_1 (for the bias part) while
        // F[K_λ] is held.
        let sums = (lam != 1.0).then(|| mapper.correlation_sums_at(|ik| ft.minus_at(&ft1, ik)));
        drop(own);
        // The mean over cells of (map of K_λ² − map²) ∨ 0.
        let unconditional = pm.spread.iter().sum::<f64>() / m / nf;
        let km = KernelMap {
            lambda: lam,
            var,
            against_unbiased: None,
            mean: pm.mean,
            unconditional,
        };
        Ok((km, sums.map(|c| (pm.diff_map.unwrap_or_default(), c))))
    };
    // The bias estimate of a λ < 1 against the unbiased map, from its map
    // part (`d2` the map of (K_λ − K_1)²).
    let bias_part = |d2: &[f64], mean: &[f64], (s1c, s2c): (f64, f64)| -> BiasEstimate {
        // Per cell, b̂² - Var b̂ is unbiased for b²; their average
        // over the cells estimates the mean squared bias B². Its
        // noise, (2/m)Σ b_j e_j + (1/m)Σ (e_j² - Var e_j), has
        // variance about 4 B² v̄ S1/m + 2 v̄² S2/m, with v̄ the mean
        // Var b̂ and S1, S2 the correlation sums of the per-device
        // terms of K_λ - K_1 between cells (docs/MATH.md §9.4).
        // Charged: the average less two such standard errors,
        // clipped at 0 (a bias the reports cannot resolve is not
        // charged).
        //
        // The second term reads the mean of v_j², not v̄² (branch small23,
        // attack16 O4): Σ_jk v_j v_k ρ_jk² <= Σ_j v_j² Σ_k ρ_jk², so where
        // the variance is concentrated (devices in one corner) v̄² under-
        // stated it by mean(v²)/v̄² (docs/MATH.md §9.4, "Uneven variance").
        let mut avg = 0.0;
        let mut vbar = 0.0;
        let mut v2bar = 0.0;
        for ((a, b), q) in mean.iter().zip(&mean1).zip(d2) {
            let bh = a - b;
            let vb = (q - bh * bh).max(0.0) / n_rep;
            avg += bh * bh - vb;
            vbar += vb;
            v2bar += vb * vb;
        }
        avg /= m;
        vbar /= m;
        v2bar /= m;
        let b2 = avg.max(0.0);
        let se = ((4.0 * b2 * vbar * s1c + 2.0 * vbar * vbar * s2c) / m).sqrt();
        let noise2 = 2.0 * v2bar.max(vbar * vbar) * s2c / m;
        let se_ranked = (4.0 * b2 * vbar * s1c / m + noise2).sqrt();
        BiasEstimate {
            avg,
            se,
            se_ranked,
            noise_se: noise2.sqrt(),
        }
    };
    // Two threads take the parts in `kernel_parts` order, each the first
    // whose map part is done (branch speed04: with a λ's map, variance and
    // bias as one task, one thread ran the last λ alone while the other
    // core waited; the bias parts are small and come last). The same
    // numbers in the same order as one task per λ.
    let queue = PartQueue::new(&LAMBDAS);
    let work = || {
        while let Some(task) = queue.take() {
            match task {
                Part::Map(i) => {
                    let r = map_part(LAMBDAS[i]);
                    queue.map_done(i, r);
                }
                Part::Bias(i, d2, mean, sums) => {
                    let b = bias_part(&d2, &mean, sums);
                    drop(d2);
                    queue.bias_done(i, b);
                }
            }
        }
    };
    let helper_ok = std::thread::scope(|sc| {
        let helper = sc.spawn(|| {
            let _stop = queue.stop_on_unwind();
            work()
        });
        {
            let _stop = queue.stop_on_unwind();
            work();
        }
        helper.join().is_ok()
    });
    if !helper_ok {
        return Err(crate::error::Error::Numerical {
            routine: "kernel map thread",
        });
    }
    let out = queue.into_maps()?;
    Ok((mean_f, out))
}

/// A λ's map part: its [`KernelMap`] without the bias estimate, and for
/// λ < 1 the map of (K_λ − K_1)² and the correlation sums (the bias
/// part's inputs).
type MapPart = (KernelMap, Option<BiasInputs>);

/// A bias part's inputs from its map part: the map of (K_λ − K_1)² and
/// the correlation sums of K_λ − K_1.
type BiasInputs = (Vec<f64>, (f64, f64));

/// A part of [`kernel_maps`]: the map of λ index i, or its bias (with the
/// map part's map of (K_λ − K_1)², map and correlation sums).
enum Part {
    Map(usize),
    Bias(usize, Vec<f64>, Vec<f64>, (f64, f64)),
}

/// The order the parts of [`kernel_maps`] are taken in, `(is_bias, λ index)`:
/// λ i's map part, then the bias part of λ i − 1 (so that about two
/// spatial kernels wait at a time), the last λ's bias part at the end; the
/// unbiased map (λ = 1) has no bias part. For [`LAMBDAS`]: map 0, map 1,
/// bias 0, map 2, bias 1, …, map 5, bias 4 (the small bias parts last).
fn kernel_parts(lambdas: &[f64]) -> Vec<(bool, usize)> {
    let biased = |i: usize| lambdas[i] != 1.0;
    let mut parts = Vec::with_capacity(2 * lambdas.len());
    for i in 0..lambdas.len() {
        parts.push((false, i));
        if i >= 1 && biased(i - 1) {
            parts.push((true, i - 1));
        }
    }
    if let Some(last) = lambdas.len().checked_sub(1).filter(|&i| biased(i)) {
        parts.push((true, last));
    }
    parts
}

/// The shared state of [`kernel_maps`]' threads.
struct PartQueue {
    state: std::sync::Mutex<PartState>,
    ready: std::sync::Condvar,
}

#[derive(Default)]
struct PartState {
    /// The parts of [`kernel_parts`], in the order they are taken.
    parts: Vec<(bool, usize)>,
    /// Which of `parts` are taken.
    taken: Vec<bool>,
    /// Per λ: the map part's result (its bias filled in later).
    maps: Vec<Option<Result<KernelMap>>>,
    /// Per λ: the bias part's inputs, from the map part until taken.
    inputs: Vec<Option<BiasInputs>>,
    /// A thread unwound: the others stop instead of waiting.
    stopped: bool,
}

/// Sets `stopped` if its thread unwinds.
struct StopOnUnwind<'a>(&'a PartQueue);

impl Drop for StopOnUnwind<'_> {
    fn drop(&mut self) {
        if std::thread::panicking() {
            if let Ok(mut st) = self.0.state.lock() {
                st.stopped = true;
            }
            self.0.ready.notify_all();
        }
    }
}

impl PartQueue {
    fn new(lambdas: &[f64]) -> Self {
        let parts = kernel_parts(lambdas);
        let lambdas = lambdas.len();
        Self {
            state: std::sync::Mutex::new(PartState {
                taken: vec![false; parts.len()],
                parts,
                maps: (0..lambdas).map(|_| None).collect(),
                inputs: (0..lambdas).map(|_| None).collect(),
                stopped: false,
            }),
            ready: std::sync::Condvar::new(),
        }
    }

    fn stop_on_unwind(&self) -> StopOnUnwind<'_> {
        StopOnUnwind(self)
    }

    /// The next part to run: the first not taken whose map part (for a
    /// bias part) is done, waiting while every remaining one waits on a
    /// map part; None when all are taken (or a thread unwound).
    fn take(&self) -> Option<Part> {
        let mut st = self.state.lock().ok()?;
        loop {
            if st.stopped {
                return None;
            }
            let mut pending = false;
            for p in 0..st.parts.len() {
                let (bias, i) = st.parts[p];
                if st.taken[p] {
                    continue;
                }
                if !bias {
                    st.taken[p] = true;
                    return Some(Part::Map(i));
                }
                if st.maps[i].is_none() {
                    pending = true;
                    continue;
                }
                st.taken[p] = true;
                // A failed map part has no bias part (the error is kept).
                let Some((s, sums)) = st.inputs[i].take() else {
                    continue;
                };
                let mean = match &st.maps[i] {
                    Some(Ok(km)) => km.mean.clone(),
                    _ => continue,
                };
                return Some(Part::Bias(i, s, mean, sums));
            }
            if !pending {
                return None;
            }
            st = self.ready.wait(st).ok()?;
        }
    }

    fn map_done(&self, i: usize, r: Result<MapPart>) {
        if let Ok(mut st) = self.state.lock() {
            match r {
                Ok((km, inputs)) => {
                    st.maps[i] = Some(Ok(km));
                    st.inputs[i] = inputs;
                }
                Err(e) => st.maps[i] = Some(Err(e)),
            }
        }
        self.ready.notify_all();
    }

    fn bias_done(&self, i: usize, b: BiasEstimate) {
        if let Ok(mut st) = self.state.lock() {
            if let Some(Ok(km)) = st.maps[i].as_mut() {
                km.against_unbiased = Some(b);
            }
        }
    }

    /// The kernel maps in λ order (the first error if any part failed or
    /// did not run).
    fn into_maps(self) -> Result<Vec<KernelMap>> {
        let st = self
            .state
            .into_inner()
            .map_err(|_| crate::error::Error::Numerical {
                routine: "kernel map thread",
            })?;
        if st.stopped || st.taken.iter().any(|t| !t) {
            return Err(crate::error::Error::Numerical {
                routine: "kernel map thread",
            });
        }
        st.maps
            .into_iter()
            .map(|m| {
                m.unwrap_or(Err(crate::error::Error::Numerical {
                    routine: "kernel map thread",
                }))
            })
            .collect()
    }
}

/// The coincident devices the bin counts show (docs/MATH.md §9.4, "Atoms";
/// branch planmodel): per axis a,
///
///   A_a = (Σ_b D_b² − Σ_b (c_{b−e} + 4c_b + c_{b+e})) / (n·q_a),
///   D_b = c_{b−e} − 2c_b + c_{b+e}   (e the unit step along a),
///   q_a = 6 q(0) − 8 q(e) + 2 q(2e),
///
/// c the counts of the n reports, q(k) the law of the bin offset k
/// between two reports of one location (two noises and a uniform position
/// in its bin: [`same_location_lag_law`]). Under Poisson counts of a smooth
/// density E D_b² = (λ_{b−e} + 4λ_b + λ_{b+e}) + (Δ²∂²λ)², the second
/// difference removing constants and slopes; reports of one location
/// (n_l of them) add n_l(n_l − 1)·q_a. So A_a estimates Σ_l n_l(n_l − 1)/n,
/// how many other devices share a device's location beyond chance: 0 for
/// a continuous population, about n/L − 1 for L equally weighted
/// locations. 0 where q_a < [`ATOM_MIN_CONTRAST`] (the noise spreads a
/// location over many bins: the counts cannot show it, and the noise
/// dithers its rounding away) or the estimate is negative.
fn atom_excess(mapper: &FftMapper, epsilon: f64) -> [f64; 2] {
    let counts = mapper.counts();
    let spec = counts.spec();
    let c: Vec<f64> = counts.counts().iter().map(|&v| v as f64).collect();
    second_difference_excess(
        &c,
        spec.bins(),
        spec.dim(),
        counts.total() as f64,
        same_location_lag_law(epsilon, spec.delta()),
    )
}

/// [`atom_excess`]'s A_a on counts `c` (row-major, `bins`) of `n` reports,
/// given the lag law `q` of their bins.
fn second_difference_excess(
    c: &[f64],
    bins: [usize; 2],
    dim: usize,
    n: f64,
    q: [[f64; 3]; 2],
) -> [f64; 2] {
    let [b0, b1] = bins;
    let mut out = [0.0; 2];
    for (a, o) in out.iter_mut().enumerate().take(dim) {
        let qa = 6.0 * q[a][0] - 8.0 * q[a][1] + 2.0 * q[a][2];
        if qa.is_nan() || qa < ATOM_MIN_CONTRAST || n <= 0.0 {
            continue;
        }
        let (len, stride) = if a == 0 { (b0, b1) } else { (b1, 1) };
        if len < 3 {
            continue;
        }
        let (mut d2, mut pois) = (0.0f64, 0.0f64);
        for flat in 0..c.len().min(b0 * b1) {
            let pos = if a == 0 { flat / b1 } else { flat % b1 };
            if pos == 0 || pos + 1 >= len {
                continue;
            }
            let (l, m, r) = (c[flat - stride], c[flat], c[flat + stride]);
            if l == 0.0 && m == 0.0 && r == 0.0 {
                continue;
            }
            let d = l - 2.0 * m + r;
            d2 += d * d;
            pois += l + 4.0 * m + r;
        }
        let v = (d2 - pois) / (n * qa);
        *o = if v.is_finite() { v.max(0.0) } else { 0.0 };
    }
    out
}

/// The coincident devices at two resolutions (docs/MATH.md §9.4, "Atoms",
/// branch cells16): [`atom_excess`] on the bins (A_a(Δ)) and on the bins
/// merged 2 × 2 (A_a(2Δ), with the lag law of bins of side 2Δ), and the
/// share charged,
///
///   Â_a = min(A_a(Δ), max(2·A_a(Δ) − A_a(2Δ), 0)).
///
/// A location shared by n_l devices adds the same n_l(n_l − 1)/n at
/// every bin size (it stays in one bin, whose count's second difference
/// is counted in units of n·q_a): A(2Δ) = A(Δ). Structure of the density
/// narrower than a bin but not a point (a ridge of width w ≪ Δ and linear
/// density ρ: each bin on it holds nρΔ, over L/Δ bins) adds Σ D² ∝ n²ρ²Δ·L,
/// i.e. A ∝ Δ, doubling with the bins; structure about a bin wide adds
/// the curvature term (Δ²∂²λ)², A ∝ Δ⁶. The extrapolation 2A(Δ) − A(2Δ)
/// removes the ridges' share exactly and over-removes the curvature's
/// (clipped at 0, and never above A(Δ)). Returns [Â, A(Δ), A(2Δ)].
fn atom_share_two_resolutions(mapper: &FftMapper, epsilon: f64) -> [[f64; 2]; 3] {
    let counts = mapper.counts();
    let spec = counts.spec();
    let fine = atom_excess(mapper, epsilon);
    let [b0, b1] = spec.bins();
    let dim = spec.dim();
    // Merged 2 × 2 (2 × 1 on a one-dimensional grid); a last odd row or
    // column is left out.
    let (m0, m1) = if dim == 2 {
        (b0 / 2, b1 / 2)
    } else {
        (b0 / 2, b1)
    };
    if m0 < 3 || (dim == 2 && m1 < 3) {
        return [fine, fine, fine];
    }
    let c = counts.counts();
    let mut merged = std::vec![0.0f64; m0 * m1];
    let mut total = 0.0f64;
    // The columns read (2·m1 <= b1 in 2-D) and the merged column of each.
    let (cols, col_step) = if dim == 2 { (2 * m1, 2) } else { (b1, 1) };
    for i in 0..2 * m0 {
        for k in 0..cols {
            let v = c[i * b1 + k] as f64;
            merged[(i / 2) * m1 + k / col_step] += v;
            total += v;
        }
    }
    let d = spec.delta();
    let d2 = if dim == 2 {
        [2.0 * d[0], 2.0 * d[1]]
    } else {
        [2.0 * d[0], d[1]]
    };
    let coarse = second_difference_excess(
        &merged,
        [m0, m1],
        dim,
        total,
        same_location_lag_law(epsilon, d2),
    );
    let mut share = [0.0; 2];
    for a in 0..dim {
        share[a] = (2.0 * fine[a] - coarse[a]).max(0.0).min(fine[a]);
    }
    [share, fine, coarse]
}

/// The coincident devices' rounding field of a published kernel map's
/// standard error (docs/MATH.md §9.7 "Coincident devices", branch
/// round16): per axis a and bin b (row-major over the bins),
///
///   E_a(b) = V_a · (Â_a / A_a(Δ)) · (D_b² − (c_{b−e} + 4c_b + c_{b+e})) / q_a,
///
/// the per-bin terms of [`atom_excess`]'s sum (whose total over the bins
/// is n·A_a(Δ), an estimate of Σ_l n_l(n_l − 1) localised at each
/// location's bins), scaled to the point share Â_a of
/// [`atom_share_two_resolutions`] and by V_a, the dithered rounding
/// variance of one location's mean offset ([`dithered_rounding_variance`]).
/// The map adds (1/n)Σ_b Σ_a E_a(b) (∂_a K_λ(t_j − x_b))² to the per-device
/// variance of each map point: the planner's charge T with the slope
/// energy and the atoms' sizes read per map point instead of averaged.
/// `None` on a one-dimensional grid and wherever the counts show no point
/// mass (every Â_a = 0: every population whose noise spans a bin,
/// q_a < [`ATOM_MIN_CONTRAST`]), so those maps are unchanged.
pub(super) fn atom_rounding_field(mapper: &FftMapper, epsilon: f64) -> Option<[Vec<f64>; 2]> {
    let counts = mapper.counts();
    let spec = counts.spec();
    if spec.dim() != 2 {
        return None;
    }
    let [share, fine, _] = atom_share_two_resolutions(mapper, epsilon);
    if share.iter().all(|&s| s <= 0.0) {
        return None;
    }
    let [b0, b1] = spec.bins();
    let d = spec.delta();
    let q = same_location_lag_law(epsilon, d);
    let c = counts.counts();
    let mut out = [std::vec![0.0f64; b0 * b1], std::vec![0.0f64; b0 * b1]];
    for (a, field) in out.iter_mut().enumerate() {
        let qa = 6.0 * q[a][0] - 8.0 * q[a][1] + 2.0 * q[a][2];
        let readable = share[a] > 0.0 && fine[a] > 0.0 && qa >= ATOM_MIN_CONTRAST;
        if !readable {
            continue;
        }
        let scale = dithered_rounding_variance(epsilon, d[a]) * share[a] / fine[a] / qa;
        if !scale.is_finite() {
            continue;
        }
        let (len, stride) = if a == 0 { (b0, b1) } else { (b1, 1) };
        for (flat, e) in field.iter_mut().enumerate() {
            let pos = if a == 0 { flat / b1 } else { flat % b1 };
            if pos == 0 || pos + 1 >= len {
                continue;
            }
            let (l, m, r) = (
                c[flat - stride] as f64,
                c[flat] as f64,
                c[flat + stride] as f64,
            );
            let dd = l - 2.0 * m + r;
            *e = scale * (dd * dd - (l + 4.0 * m + r));
        }
    }
    Some(out)
}

/// The rounding variance of sub-bin lines along a bin axis, per map
/// point (docs/MATH.md §9.7 "Lines along a bin axis", branch round16;
/// attack16 F2). Devices on a line along axis b, narrower than a bin,
/// share one offset along the other axis a in every bin row they cross,
/// so their rounding errors along a add coherently over the rows within
/// the kernel's reach: V_a (Σ_r m_r ∂_a K(t − x_r))², not Σ_r m_r² V_a
/// (∂_a K)². The products of second differences along a of two bins of
/// one line of bins along b (no count in common, so no Poisson term)
/// estimate those pairs: with D_a(x) = c_{x−e_a} − 2c_x + c_{x+e_a} and
/// w(x) = ∂_a K(t_j − x) (the plain Gaussian of bandwidth h),
///
///   s_j = (V_a / (n q_a)) Σ_lines [ (Σ_x D_a(x) w(x))² − Σ_x D_a(x)² w(x)²
///          − 2 Σ_x D_a(x) D_a(x + e_b) w(x) w(x + e_b) ]  ∨ 0,
///
/// summed over a: the pairs of bins two or more apart along b (the
/// same bin and neighbours are the coincident devices' term,
/// [`atom_rounding_field`]), over the lines and bins within 4h of t_j.
/// Returns one value per map point (in the per-device variance's unit,
/// like [`atom_rounding_field`]'s map), or `None` on a one-dimensional
/// grid and where every q_a < [`ATOM_MIN_CONTRAST`] (the noise spans a
/// bin and dithers the rounding: nothing computed or added).
pub(super) fn coherent_line_variance(
    mapper: &FftMapper,
    epsilon: f64,
    bandwidth: f64,
) -> Option<Vec<f64>> {
    let counts = mapper.counts();
    let spec = counts.spec();
    let n = counts.total() as f64;
    if spec.dim() != 2 || !(bandwidth > 0.0 && n > 0.0) {
        return None;
    }
    let [b0, b1] = spec.bins();
    let d = spec.delta();
    let q = same_location_lag_law(epsilon, d);
    let c = counts.counts();
    let mp = spec.map_points();
    let h2 = bandwidth * bandwidth;
    let reach = |a: usize| -> isize { libm::ceil((4.0 * bandwidth / d[a]).min(4096.0)) as isize };
    let (r0, r1) = (reach(0), reach(1));
    let mut out: Option<Vec<f64>> = None;
    for a in 0..2 {
        let qa = 6.0 * q[a][0] - 8.0 * q[a][1] + 2.0 * q[a][2];
        if qa.is_nan() || qa < ATOM_MIN_CONTRAST {
            continue;
        }
        let scale = dithered_rounding_variance(epsilon, d[a]) / (n * qa);
        if !scale.is_finite() {
            continue;
        }
        let (len, stride) = if a == 0 { (b0, b1) } else { (b1, 1) };
        let dfield: Vec<f64> = (0..b0 * b1)
            .map(|flat| {
                let pos = if a == 0 { flat / b1 } else { flat % b1 };
                if pos == 0 || pos + 1 >= len {
                    return 0.0;
                }
                let (l, m, r) = (
                    c[flat - stride] as f64,
                    c[flat] as f64,
                    c[flat + stride] as f64,
                );
                l - 2.0 * m + r
            })
            .collect();
        // ∂_a K at the bin offsets (di, dk) within the reach.
        let w1 = (2 * r1 + 1) as usize;
        let table: Vec<f64> = (-r0..=r0)
            .flat_map(|di| (-r1..=r1).map(move |dk| (di, dk)))
            .map(|(di, dk)| {
                let z = [di as f64 * d[0], dk as f64 * d[1]];
                z[a] / h2 * libm::exp(-(z[0] * z[0] + z[1] * z[1]) / (2.0 * h2))
            })
            .collect();
        let o = out.get_or_insert_with(|| std::vec![0.0; mp[0] * mp[1]]);
        for (j, oj) in o.iter_mut().enumerate() {
            let flat = spec.map_bin(j);
            let (ti, tk) = ((flat / b1) as isize, (flat % b1) as isize);
            let lo0 = (ti - r0).max(0);
            let hi0 = (ti + r0).min(b0 as isize - 1);
            let lo1 = (tk - r1).max(0);
            let hi1 = (tk + r1).min(b1 as isize - 1);
            // Lines of bins along the other axis b: fixed index along a.
            let (lines, along) = if a == 0 {
                ((lo0, hi0), (lo1, hi1))
            } else {
                ((lo1, hi1), (lo0, hi0))
            };
            let mut total = 0.0;
            for g in lines.0..=lines.1 {
                let (mut sum, mut sq, mut adj, mut prev) = (0.0f64, 0.0f64, 0.0f64, 0.0f64);
                for e in along.0..=along.1 {
                    let (i, k) = if a == 0 { (g, e) } else { (e, g) };
                    let dv = dfield[i as usize * b1 + k as usize];
                    if dv == 0.0 {
                        prev = 0.0;
                        continue;
                    }
                    let wv = table[(ti - i + r0) as usize * w1 + (tk - k + r1) as usize];
                    let x = dv * wv;
                    sum += x;
                    sq += x * x;
                    adj += x * prev;
                    prev = x;
                }
                total += sum * sum - sq - 2.0 * adj;
            }
            let v = scale * total;
            if v > 0.0 && v.is_finite() {
                *oj += v;
            }
        }
    }
    out
}

/// Below this contrast q_a of [`atom_excess`] (6 for locations far from
/// the bins' edges with no noise; falling like (Δ·ε)⁵ as the noise spans
/// many bins) the counts are not read for coincident devices.
const ATOM_MIN_CONTRAST: f64 = 0.05;

/// The law of the bin offset between two reports of one location, per
/// axis a: [q(0), q(e_a), q(2e_a)] (2-D offsets, the other axis' offset 0).
/// The location is uniform in its bin, so along an axis with the two
/// noises' difference Z the offset is k with probability
/// E tri(k − Z_a/Δ_a) (tri the triangle of half-width 1). The difference of
/// two planar-Laplace noises has the transform (1 + |ω|²/ε²)⁻³, a Gaussian
/// scale mixture: Z | t ~ N(0, (2t/ε²) I) with t ~ Gamma(3, 1). Given t,
/// E tri(k − X) for X ~ N(0, σ²) is Ψ(1−k) − 2Ψ(−k) + Ψ(−1−k) with
/// Ψ(y) = E(y − X)₊ = yΦ(y/σ) + σφ(y/σ); t is integrated numerically
/// (midpoints, density t²e^{−t}/2 on (0, 60]).
fn same_location_lag_law(epsilon: f64, delta: [f64; 2]) -> [[f64; 3]; 2] {
    let psi = |y: f64, s: f64| -> f64 {
        if s <= 0.0 {
            return y.max(0.0);
        }
        let z = y / s;
        y * 0.5 * libm::erfc(-z * core::f64::consts::FRAC_1_SQRT_2)
            + s * libm::exp(-0.5 * z * z) / (2.0 * core::f64::consts::PI).sqrt()
    };
    let tri = |k: f64, s: f64| psi(1.0 - k, s) - 2.0 * psi(-k, s) + psi(-1.0 - k, s);
    let steps = 6000;
    let dt = 60.0 / steps as f64;
    let mut q = [[0.0; 3]; 2];
    for i in 0..steps {
        let t = (i as f64 + 0.5) * dt;
        let w = 0.5 * t * t * libm::exp(-t) * dt;
        let sd = (2.0 * t).sqrt() / epsilon;
        let s = [sd / delta[0], sd / delta[1]];
        let p0 = [tri(0.0, s[0]), tri(0.0, s[1])];
        for a in 0..2 {
            let other = p0[1 - a];
            for (k, qk) in q[a].iter_mut().enumerate() {
                *qk += w * tri(k as f64, s[a]) * other;
            }
        }
    }
    q
}

/// The device-weighted mean over the map points of the squared slope of
/// the plain Gaussian along each axis,
///
///   G_a = mean_j (1/n) Σ_b c_b (∂_a K(t_j − x_b))²,  ∂_a K(z) = −(z_a/h²) e^{−|z|²/2h²},
///
/// from the bin counts (their centres x_b): what a shift of one device
/// along a moves the map, squared, on average.
fn gradient_energy(g: &super::query_set::KdeGrid, mapper: &FftMapper) -> [f64; 2] {
    let m = g.len() as f64;
    let h2 = g.bandwidth() * g.bandwidth();
    let mut out = [0.0; 2];
    for (a, o) in out.iter_mut().enumerate().take(g.dim()) {
        let s = on_wrapped_lattice(g, mapper, |z0, z1| {
            let za = if a == 0 { z0 } else { z1 };
            let e = libm::exp(-(z0 * z0 + z1 * z1) / (2.0 * h2));
            (za / h2 * e).powi(2)
        });
        *o = mapper.apply_spatial(&s).iter().sum::<f64>() / m;
    }
    out
}

/// The rounding variance per axis of one location's reports rounded into
/// bins of side Δ under the planar-Laplace noise (per-axis transform
/// φ(ω) = (1 + ω²/ε²)^{−3/2}): the mean offset of the rounded reports from
/// the location, over its uniform position in the bin, is the sawtooth
/// smoothed by the noise, whose variance is
///
///   V(Δ) = (Δ²/2π²) Σ_{k>=1} φ(2πk/Δ)²/k²
///
/// (Δ²/12 without noise; the noise dithers it away as it spans the bin).
fn dithered_rounding_variance(epsilon: f64, delta: f64) -> f64 {
    let mut s = 0.0;
    for k in 1..=200 {
        let w = 2.0 * core::f64::consts::PI * k as f64 / delta / epsilon;
        let phi2 = (1.0 + w * w).powi(-3);
        s += phi2 / (k * k) as f64;
    }
    delta * delta / (2.0 * core::f64::consts::PI * core::f64::consts::PI) * s
}

/// Coincident devices seen in the counts ([`atom_excess`]) and the map's
/// slope energy ([`gradient_energy`]) at the reports' n.
struct Atoms {
    share: [f64; 2],
    grad: [f64; 2],
    n_rep: f64,
    /// A_a(Δ) and A_a(2Δ) of [`atom_share_two_resolutions`] (for the note).
    resolutions: [[f64; 2]; 2],
}

impl Atoms {
    /// The squared error of rounding each location's mass, with per-axis
    /// variance `var_a` of its offset, into bins:
    ///
    ///   T = Σ_a A_a · var_a · G_a / n
    ///
    /// (Σ_l (n_l/n)² var_a |∂_a K|² beyond the one device per location of
    /// the per-device terms; at the reports' n: a location's share of the
    /// devices does not change with n).
    fn term(&self, var: [f64; 2]) -> f64 {
        (0..2)
            .map(|a| self.share[a] * var[a] * self.grad[a])
            .sum::<f64>()
            / self.n_rep
    }

    /// EM's: the same dithered rounding into its lattice cells of side
    /// δ_a (EM at εh > 3 moves little mass beyond the plain map of the
    /// counts; it does not put a location back at its place in the cell).
    fn em_term(&self, epsilon: f64, cell: [f64; 2]) -> f64 {
        self.kernel_term(epsilon, cell)
    }

    /// A kernel map's: the bins' rounding dithered by the noise
    /// ([`dithered_rounding_variance`]).
    fn kernel_term(&self, epsilon: f64, delta: [f64; 2]) -> f64 {
        self.term([
            dithered_rounding_variance(epsilon, delta[0]),
            dithered_rounding_variance(epsilon, delta[1]),
        ])
    }

    fn note(&self, epsilon: f64, delta: [f64; 2]) -> String {
        let [f, c] = self.resolutions;
        format!(
            "; coincident devices A = {:.3}/{:.3} (bins {:.3}/{:.3}, 2x bins {:.3}/{:.3}; kernel-map rounding {:.2e})",
            self.share[0],
            self.share[1],
            f[0],
            f[1],
            c[0],
            c[1],
            self.kernel_term(epsilon, delta)
        )
    }
}

/// Whether [`moment_rounding_charge`] reads the offsets' moments at
/// per-device ε and bins Δ: two axes and some axis's contrast
/// q_a = 6 q(0) − 8 q(e) + 2 q(2e) >= [`ATOM_MIN_CONTRAST`]
/// ([`atom_excess`]: the noise does not dither the bins). The map server
/// keeps no moments where this is false (branch moment24).
pub(super) fn moments_read_at(epsilon: f64, delta: [f64; 2], dim: usize) -> bool {
    if dim != 2 {
        return false;
    }
    same_location_lag_law(epsilon, delta).iter().any(|q| {
        let qa = 6.0 * q[0] - 8.0 * q[1] + 2.0 * q[2];
        qa >= ATOM_MIN_CONTRAST
    })
}

/// The kernel map's rounding charge from the per-bin moments of the
/// reports' offsets (branch moment24, docs/MATH.md §9.4 addendum
/// "moments"): where the noise does not dither the bins (some axis's
/// contrast q_a >= [`ATOM_MIN_CONTRAST`], [`atom_excess`]) and the counts
/// carry their moments ([`super::BinnedCounts::moments`]),
///
///   T = ((1/m) Σ_j R̂(t_j)² − (1/m) Σ_j ν_j·n_rep/n) ∨ 0,
///   S = (1/m) Σ_j s_j·n_rep/n,
///
/// R̂ the map's rounding error per map point, ν its noise part and s the
/// independent-rounding spread the variance formula adds
/// ([`FftMapper::rounding_from_moments`]; ν and s at the reports' n_rep,
/// scaled to the planned n like the variance). The prediction is
/// (var − S) + T: the noise's variance plus the binned map's
/// deterministic rounding, less the part of R̂² that is the reports' own
/// noise (it enters R̂ and, with the opposite sign, the exact map's
/// error). It replaces the rounding correction's charge and the
/// coincident devices' term: the moments see the atoms, on or off the bin
/// centres, and sub-bin lines at any angle. `None` (the charges as before)
/// below the gate, on a one-dimensional grid, or without moments (counts
/// restored from a partial state). Returns (T, S).
fn moment_rounding_charge(
    g: &super::query_set::KdeGrid,
    epsilon: f64,
    lambda: f64,
    mapper: &FftMapper,
    to_planned_n: f64,
) -> Option<(f64, f64)> {
    charge_of_rounding_field(
        &moment_rounding_field(g, epsilon, lambda, mapper)?,
        to_planned_n,
    )
}

/// [`moment_rounding_charge`] from the field R̂ itself: (mean R̂² less
/// the field's own noise at the planned n, clipped at 0; the variance
/// formula's spread at the planned n), `None` unless both are finite.
fn charge_of_rounding_field(
    r: &super::fft::MomentRounding,
    to_planned_n: f64,
) -> Option<(f64, f64)> {
    let m = r.values.len().max(1) as f64;
    let mean = |v: &[f64]| v.iter().sum::<f64>() / m;
    let r2 = r.values.iter().map(|v| v * v).sum::<f64>() / m;
    let (nu, s) = (mean(&r.noise), mean(&r.spread) * to_planned_n);
    let t = (r2 - nu * to_planned_n).max(0.0);
    (t.is_finite() && s.is_finite()).then_some((t, s))
}

/// The moments' rounding field R̂ of the map K_λ
/// ([`FftMapper::rounding_from_moments`]) where [`moment_rounding_charge`]
/// reads it: two axes, counts with moments, above the gate
/// ([`moments_read_at`]); `None` elsewhere.
fn moment_rounding_field(
    g: &super::query_set::KdeGrid,
    epsilon: f64,
    lambda: f64,
    mapper: &FftMapper,
) -> Option<super::fft::MomentRounding> {
    if g.dim() != 2 {
        return None;
    }
    mapper.counts().moments()?;
    if !moments_read_at(epsilon, mapper.counts().spec().delta(), 2) {
        return None;
    }
    let k = DebiasKernel::new(2, g.bandwidth(), epsilon, lambda).ok()?;
    mapper.rounding_from_moments(&k)
}

/// A λ < 1 kernel map's deterministic squared error where the moments
/// are read (branch grid26, docs/MATH.md §9.4 addendum "grid26"): the map
/// minus the truth is (map_1 − truth) + (map_λ − map_1), whose
/// deterministic parts are R_1 (the unbiased map's rounding) and
/// Δ_λ = b_λ + R_λ − R_1 (what the bias estimate against the unbiased
/// map reads), so
///
///   |R_1 + Δ_λ|² = T_1 + B²_λ + 2·mean_j R̂_1,j (map_λ,j − map_1,j),
///
/// with T_1 the unbiased map's moment charge, B²_λ the bias² the ranking
/// settled on (`b2`) and R̂_1 the moments' rounding field; at least 0.
/// Where R_1 and Δ_λ are orthogonal and R_λ ≈ R_1 this is main's
/// T_λ + B²_λ; atoms on the bin centres (the rounding and the residual
/// noise's blur of opposite signs) read a negative cross term.
///
/// ```text
/// T_1 9e-11, B² 4e-12, cross −4e-11: 5.4e-11 (main 9.4e-11)
/// ```
fn rounding_and_bias(t1: f64, b2: f64, r1: &[f64], map: &[f64], map1: &[f64]) -> f64 {
    if r1.len() != map.len() || map.len() != map1.len() || r1.is_empty() {
        return t1 + b2;
    }
    let cross = r1
        .iter()
        .zip(map.iter().zip(map1))
        .map(|(r, (a, b))| r * (a - b))
        .sum::<f64>()
        / r1.len() as f64;
    let det = t1 + b2 + 2.0 * cross;
    if det.is_finite() {
        det.max(0.0)
    } else {
        t1 + b2
    }
}

/// [`Atoms`] where the counts show coincident devices (some A_a > 0).
fn coincident_devices(
    g: &super::query_set::KdeGrid,
    epsilon: f64,
    mapper: &FftMapper,
) -> Option<Atoms> {
    if g.dim() != 2 {
        return None;
    }
    let [share, fine, coarse] = atom_share_two_resolutions(mapper, epsilon);
    // Where the bins show an excess (noted, even when none of it is a
    // point's: then the charge is 0).
    if fine.iter().all(|&s| s <= 0.0) {
        return None;
    }
    Some(Atoms {
        share,
        grad: gradient_energy(g, mapper),
        n_rep: mapper.counts().total() as f64,
        resolutions: [fine, coarse],
    })
}

/// The plain map's squared bias charged in EM's one-step model: its
/// estimate less two standard errors, at least 0 (0 without it).
fn plain_bias2_lower(kernels: &[KernelMap]) -> f64 {
    kernels
        .iter()
        .find(|k| k.lambda == 0.0)
        .and_then(|k| k.against_unbiased)
        .map_or(0.0, |b| (b.avg - 2.0 * b.se).max(0.0))
}

/// EM's one-step model (docs/MATH.md §9.4): (variance, bias²) =
/// (1.5·ū/n, (2·B₀ + m·d)²) from the plug-in ū/n (`nr`), the plain map's
/// bias² B₀², EM's step in bins' boxes m and the rounding correction's
/// size d². Above εh = [`KERNEL_PLUG_IN_ABOVE_EPS_H`] with t* >= 2 it caps
/// the bootstrap's prediction (branch planmodel): there the bootstrap's
/// bias is replicate noise (its replicates are new devices), and a held-out
/// stop past the first step means the later steps fitted the other half
/// better than the first, so EM is charged no more than its first step.
/// On the airports at εh 100, n = 10⁵ (t* >= 2) the bootstrap predicted
/// 4.8x EM's measured ASE.
fn em_one_step(nr: f64, b0: f64, boxes: f64, rounding_size2: f64) -> (f64, f64) {
    (
        EM_HIGH_FACTOR * nr,
        (2.0 * b0.sqrt() + boxes * rounding_size2.sqrt()).powi(2),
    )
}

#[cfg(test)]
mod coincident_tests {
    use super::*;
    use crate::map::{KdeGrid, MapAggregator, MapMechanism, MapRelease};
    use rand::rngs::StdRng;
    use rand::{Rng, SeedableRng};

    /// `locations` spots (uniform in a 20 km square, seeded) with `per`
    /// devices each, released at εh: (devices, grid, ε, mapper).
    fn spots(
        locations: usize,
        per: usize,
        eps_h: f64,
    ) -> (Vec<[f64; 2]>, KdeGrid, f64, FftMapper, MapAggregator) {
        let grid = KdeGrid::square(20_000.0, 21).unwrap();
        let mut rng = StdRng::seed_from_u64(19_15);
        let locs: Vec<[f64; 2]> = (0..locations)
            .map(|_| {
                [
                    rng.random_range(2_000.0..18_000.0),
                    rng.random_range(2_000.0..18_000.0),
                ]
            })
            .collect();
        let xs: Vec<[f64; 2]> = locs
            .iter()
            .flat_map(|l| std::iter::repeat_n(*l, per))
            .collect();
        released(xs, grid, eps_h, &mut rng)
    }

    /// The devices `xs` on a 21 × 21 grid of a 20 km square released at εh:
    /// (devices, grid, ε, mapper, aggregator).
    fn released(
        xs: Vec<[f64; 2]>,
        grid: KdeGrid,
        eps_h: f64,
        rng: &mut StdRng,
    ) -> (Vec<[f64; 2]>, KdeGrid, f64, FftMapper, MapAggregator) {
        let eps = eps_h / grid.bandwidth();
        let set = QuerySet::Kde(grid.clone());
        let dev = MapRelease::new(set.clone(), MapMechanism::APriori, eps).unwrap();
        let mut agg = MapAggregator::with_max_bins(set, MapMechanism::APriori, eps, 512).unwrap();
        for x in &xs {
            agg.add(&dev.release_unmetered(x, rng).unwrap()).unwrap();
        }
        let m = agg.mapper().unwrap().unwrap();
        (xs, grid, eps, m, agg)
    }

    #[test]
    fn atom_excess_counts_the_devices_that_share_a_location() {
        // 40 spots of 500 devices: A = Σ n_l(n_l − 1)/n = 499.
        let (_, _, eps, m, _) = spots(40, 500, 100.0);
        let a = atom_excess(&m, eps);
        for v in a {
            assert!((350.0..650.0).contains(&v), "{a:?}");
        }
        // 20,000 distinct locations: nothing beyond chance.
        let (_, _, eps, m, _) = spots(20_000, 1, 100.0);
        let a = atom_excess(&m, eps);
        for v in a {
            assert!(v < 0.5, "{a:?}");
        }
        // εh = 1: the noise spans many bins, the counts are not read.
        let (_, _, eps, m, _) = spots(40, 500, 1.0);
        assert_eq!(atom_excess(&m, eps), [0.0, 0.0]);
    }

    /// Branch cells16: a tilted ridge narrower than a bin is read by the
    /// bins' second differences (A(Δ) > 0) but doubles at 2Δ, so no point
    /// mass is charged; spots read the same at both sizes and are charged.
    #[test]
    fn two_resolutions_tell_points_from_thin_ridges() {
        let (_, _, eps, m, _) = spots(40, 500, 1000.0);
        let [share, fine, coarse] = atom_share_two_resolutions(&m, eps);
        for a in 0..2 {
            assert!(
                (350.0..650.0).contains(&share[a]),
                "{share:?} {fine:?} {coarse:?}"
            );
            assert!(
                (coarse[a] / fine[a] - 1.0).abs() < 0.3,
                "{fine:?} {coarse:?}"
            );
        }
        // 200,000 devices on three tilted segments 8 km long, 20 m wide
        // (the bins are about 120 m): continuous, no location shared.
        let grid = KdeGrid::square(20_000.0, 21).unwrap();
        let mut rng = StdRng::seed_from_u64(7);
        let xs: Vec<[f64; 2]> = (0..200_000)
            .map(|i| {
                let angle = [0.5f64, 1.1, 2.3][i % 3];
                let c = [
                    [6_000.0, 6_000.0],
                    [10_000.0, 12_000.0],
                    [14_000.0, 7_000.0],
                ][i % 3];
                let t = rng.random_range(-4_000.0..4_000.0);
                let w = rng.random_range(-10.0..10.0);
                let (s, co) = angle.sin_cos();
                [c[0] + t * co - w * s, c[1] + t * s + w * co]
            })
            .collect();
        let (_, _, eps, m, _) = released(xs, grid, 1000.0, &mut rng);
        let [share, fine, coarse] = atom_share_two_resolutions(&m, eps);
        assert!(fine.iter().all(|&v| v > 1.0), "{fine:?}");
        assert!(
            share.iter().all(|&v| v < 0.2 * fine[0].min(fine[1])),
            "{share:?} {fine:?} {coarse:?}"
        );
    }

    /// Branch round16: the atoms' rounding field sums to n·Â_a·V_a per axis
    /// (its per-bin terms are those of `atom_excess`), and is absent where
    /// the noise spans a bin or no location is shared.
    #[test]
    fn atom_rounding_field_sums_to_the_charged_share() {
        let (xs, _, eps, m, _) = spots(40, 500, 100.0);
        let field = atom_rounding_field(&m, eps).unwrap();
        let [share, _, _] = atom_share_two_resolutions(&m, eps);
        let d = m.counts().spec().delta();
        for a in 0..2 {
            let want = xs.len() as f64 * share[a] * dithered_rounding_variance(eps, d[a]);
            let got: f64 = field[a].iter().sum();
            assert!((got / want - 1.0).abs() < 1e-6, "axis {a}: {got} vs {want}");
        }
        let (_, _, eps, m, _) = spots(40, 500, 1.0);
        assert!(atom_rounding_field(&m, eps).is_none());
        // Distinct locations: no point share, hence no field (or, if the
        // counts show a chance excess, its share's, which is small).
        let (_, _, eps, m, _) = spots(20_000, 1, 100.0);
        let [share, _, _] = atom_share_two_resolutions(&m, eps);
        assert!(share.iter().all(|&v| v < 0.5), "{share:?}");
        if share.iter().all(|&v| v == 0.0) {
            assert!(atom_rounding_field(&m, eps).is_none());
        }
    }

    /// Branch round16: a 1 m street along the second axis is charged its
    /// coherent rounding near it (far more than away from it); at εh = 1
    /// the noise spans the bins and nothing is computed.
    #[test]
    fn coherent_lines_are_charged_near_an_axis_aligned_street() {
        let grid = KdeGrid::square(20_000.0, 21).unwrap();
        let mut rng = StdRng::seed_from_u64(5);
        let xs: Vec<[f64; 2]> = (0..20_000)
            .map(|_| {
                [
                    8_013.0 + rng.random::<f64>(),
                    rng.random_range(3_000.0..17_000.0),
                ]
            })
            .collect();
        let (_, g, eps, m, _) = released(xs.clone(), grid.clone(), 100.0, &mut rng);
        let v = coherent_line_variance(&m, eps, g.bandwidth()).unwrap();
        let (mut near, mut far) = (0.0f64, 0.0f64);
        for (j, x) in v.iter().enumerate() {
            let c = g.center(j);
            if (c[0] - 8_000.0).abs() < 1_000.0 && (6_000.0..14_000.0).contains(&c[1]) {
                near = near.max(*x);
            } else if (c[0] - 8_000.0).abs() > 5_000.0 {
                far = far.max(*x);
            }
        }
        assert!(near > 0.0 && far < 1e-3 * near, "near {near}, far {far}");
        let (_, g, eps, m, _) = released(xs, grid, 1.0, &mut rng);
        assert!(coherent_line_variance(&m, eps, g.bandwidth()).is_none());
    }

    /// The derived part order is the one branch speed04 measured (its
    /// table for [`LAMBDAS`]); a λ = 1 elsewhere gets no bias part.
    #[test]
    fn kernel_parts_interleave_each_bias_after_the_next_map() {
        let (m, b) = (false, true);
        assert_eq!(
            kernel_parts(&LAMBDAS),
            [
                (m, 0),
                (m, 1),
                (b, 0),
                (m, 2),
                (b, 1),
                (m, 3),
                (b, 2),
                (m, 4),
                (b, 3),
                (m, 5),
                (b, 4)
            ]
        );
        assert_eq!(kernel_parts(&[1.0, 0.5]), [(m, 0), (m, 1), (b, 1)]);
        assert!(kernel_parts(&[]).is_empty());
    }

    #[test]
    fn em_early_stop_floor_is_the_log_centre_less_the_move_and_only_without_structure() {
        // A 31 x 31 grid over 20 km: h is the diagonal spacing, so
        // π h²/(Δ₀Δ₁ m) = 2π/961.
        let g = super::super::query_set::KdeGrid::square(20_000.0, 31).unwrap();
        let m = g.len();
        let unresolved = BiasEstimate {
            avg: 0.0,
            se: 1.0,
            se_ranked: 1.0,
            noise_se: 1.0,
        };
        let plain = vec![4e-3; m];
        let kernels = |b: BiasEstimate| {
            vec![KernelMap {
                lambda: 0.0,
                var: 1e-7,
                against_unbiased: Some(b),
                mean: plain.clone(),
                unconditional: 1e-7,
            }]
        };
        let em_map = |values: Vec<f64>| EmMap {
            standard_errors: vec![0.0; values.len()],
            bias: vec![0.0; values.len()],
            pilot_values: Vec::new(),
            values,
            predicted_ase: 1e-6,
            predicted_variance: 1e-7,
            iterations: 2,
            held_out_steps: 2,
            work_cap: None,
            n: 1_000,
        };
        // EM flat at 1e-2: spread 0 <= L, D = (6e-3)².
        let e = em_map(vec![1e-2; m]);
        let n = 1_000.0;
        let h = g.bandwidth();
        let [d0, d1] = g.step();
        let lower = (core::f64::consts::PI * h * h / (d0 * d1 * m as f64) - 16e-6) / n;
        assert!(
            (core::f64::consts::PI * h * h / (d0 * d1 * m as f64)
                - 2.0 * core::f64::consts::PI / 961.0)
                .abs()
                < 1e-12
        );
        let want = (lower * 1e-2 * (1.0 - 1e-2)).sqrt() - 36e-6;
        let f = em_early_stop_floor(&g, &kernels(unresolved), &e, n, n).unwrap();
        assert!((f - want).abs() < 1e-15, "{f} {want}");
        // EM with structure beyond the devices' own sampling: not used.
        let ridged: Vec<f64> = (0..m)
            .map(|j| if j % 2 == 0 { 2e-2 } else { 0.0 })
            .collect();
        assert_eq!(
            em_early_stop_floor(&g, &kernels(unresolved), &em_map(ridged), n, n),
            None
        );
        // The plain map's bias resolved (λ = 0 ranked): not used.
        let resolved = BiasEstimate {
            avg: 1e-9,
            se: 1e-12,
            se_ranked: 1e-12,
            noise_se: 1e-12,
        };
        assert_eq!(em_early_stop_floor(&g, &kernels(resolved), &e, n, n), None);
        // EM moved further than the centre: no floor.
        let far = vec![4e-3 + 5e-2; m];
        assert_eq!(
            em_early_stop_floor(&g, &kernels(unresolved), &em_map(far), n, n),
            None
        );
    }

    /// attack14 O2 (branch plan20): on the river town at εh 10 (n 49,892,
    /// grid 61) a ranked EM sorted at its point, the lower end of its
    /// interval, 2–9% below λ = 1's prediction and measured 1.65x and
    /// 1.62x λ = 1's ASE (seeds 4, 5). Its interval's log-centre lies above
    /// λ = 1's prediction: it yields. Where the centre is below, EM stays
    /// ahead; NaN never yields.
    #[test]
    fn a_ranked_em_goes_ahead_of_lambda_1_only_below_its_interval_centre() {
        // Seed 4: [1.016e-9, 3.352e-9], λ = 1 1.114e-9; seed 5:
        // [1.090e-9, 3.310e-9], λ = 1 1.11e-9.
        assert!(em_yields_to_unbiased(1.016e-9, 3.352e-9, 1.114e-9));
        assert!(em_yields_to_unbiased(1.090e-9, 3.310e-9, 1.11e-9));
        // Worst cases: EM picked costs up to hi/a1, λ = 1 up to a1/lo.
        assert!(!em_yields_to_unbiased(1e-9, 3e-9, 2e-9));
        assert!(em_yields_to_unbiased(1e-9, 4e-9, 2e-9));
        assert!(!em_yields_to_unbiased(f64::NAN, 3e-9, 2e-9));
        assert!(!em_yields_to_unbiased(1e-9, 3e-9, f64::NAN));
    }

    /// Branch rank15 (docs/MATH.md §9.4, "EM ranked only where the
    /// reports pin it"): EM's interval from premise A and the box bound,
    /// and its ranking by the kernel maps' rule.
    #[test]
    fn em_is_ranked_only_where_its_interval_spans_at_most_9x() {
        let m = 961;
        let kernels = |avg: f64, se: f64, plain: f64| {
            vec![KernelMap {
                lambda: 0.0,
                var: 2e-5,
                against_unbiased: Some(BiasEstimate {
                    avg,
                    se,
                    se_ranked: se,
                    noise_se: se,
                }),
                mean: vec![plain; m],
                unconditional: 2e-5,
            }]
        };
        let e = EmMap {
            standard_errors: vec![0.0; m],
            bias: vec![0.0; m],
            pilot_values: Vec::new(),
            values: vec![1e-2; m],
            predicted_ase: 3e-5,
            predicted_variance: 1e-5,
            iterations: 9,
            held_out_steps: 9,
            work_cap: None,
            n: 1_000,
        };
        // Premise A: v₀ + U₀ − D = 2e-5 + (1e-4 + 2·5e-5) − (1e-2 − 9e-3)²
        // = 2.19e-4, less v_EM: U = 2.09e-4; L = 2e-5 (the bootstrap once).
        // U₀ reads PLAIN_RESOLVED_Z = 2 standard errors, not BIAS_BOUND_Z.
        let (lo, hi) =
            em_interval(&kernels(1e-4, 5e-5, 9e-3), &e, 1e3, 1e3, 1e-5, 2e-5, false).unwrap();
        assert!(
            (lo - 3e-5).abs() < 1e-15 && (hi - 2.19e-4).abs() < 1e-12,
            "{lo} {hi}"
        );
        // Ranked (2.19e-4 <= 2.7e-4): a point above 3 lo is clamped to it,
        // one below hi/3 up to it, one between kept.
        assert_eq!(em_ranked_prediction(5e-4, lo, hi), Some(3.0 * lo));
        assert!((em_ranked_prediction(1e-5, lo, hi).unwrap() - hi / 3.0).abs() < 1e-18);
        assert_eq!(em_ranked_prediction(8e-5, lo, hi), Some(8e-5));
        // A plain map's bias the reports do not resolve (se₀ = 1): the box
        // bound, (0 + √(1e-2 · 0.99))² − v_EM, far above 9 lo: not ranked.
        let (lo, hi) =
            em_interval(&kernels(0.5, 1.0, 9e-3), &e, 1e3, 1e3, 1e-5, 2e-5, false).unwrap();
        assert!((hi - (1e-2 * 0.99)).abs() < 1e-12, "{hi}");
        assert_eq!(em_ranked_prediction(5e-5, lo, hi), None);
        // An upper end below the lower is raised to it; NaN is refused.
        let (lo, hi) =
            em_interval(&kernels(0.0, 0.0, 9e-3), &e, 1e3, 1e3, 1e-5, 2e-5, false).unwrap();
        assert_eq!(lo, hi);
        assert_eq!(em_ranked_prediction(f64::NAN, lo, hi), None);
        assert_eq!(em_ranked_prediction(1e-5, f64::NAN, hi), None);
    }

    #[test]
    fn em_order_key_reads_the_point_and_the_interval_where_the_clamp_hides_them() {
        // Ranked, point inside: the point (rank15's order).
        assert_eq!(em_order_key(4e-7, 3e-7, 5e-7), 4e-7);
        // Ranked, point above hi (lead17's tiny clusters, n 10³, εh 3):
        // √(lo·point), never below hi.
        let k = em_order_key(1.036e-6, 3.129e-7, 4.351e-7);
        assert!((k - (3.129e-7f64 * 1.036e-6).sqrt()).abs() < 1e-18, "{k}");
        assert_eq!(em_order_key(4.4e-7, 4e-7, 4.35e-7), 4.35e-7);
        // Ranked, point below lo: lo (the clamp; plan20's tie decides).
        assert_eq!(em_order_key(1e-7, 3e-7, 5e-7), 3e-7);
        // Unranked: the point clamped (small24's probe, seed 0, kept).
        assert_eq!(em_order_key(4.82e-3, 7.725e-5, 1.576e-2), 4.82e-3);
        assert_eq!(em_order_key(1e-9, 6.8e-7, 1.4e-5), 6.8e-7);
        assert_eq!(em_order_key(1.0, 6.8e-7, 1.4e-5), 1.4e-5);
        // NaN point: hi; NaN ends never panic.
        assert_eq!(em_order_key(f64::NAN, 1e-7, 1e-5), 1e-5);
        assert_eq!(em_order_key(1e-6, f64::NAN, 1e-5), 1e-6);
    }

    #[test]
    fn em_floor_ignores_a_difference_within_ems_own_margin() {
        // EM 375x worse than the map, its bias² predicted 1.31x low: no floor.
        assert_eq!(em_floor(9.46e-8, 7.2e-8), 0.0);
        // A map far from EM where EM is close to the truth keeps its floor.
        let f = em_floor(1e-6, 1e-9);
        assert!((f - (1e-3 - (3e-9f64).sqrt()).powi(2)).abs() < 1e-15, "{f}");
    }

    #[test]
    fn a_chance_low_bias_estimate_does_not_resolve_the_bias() {
        // The airports at εh 0.1, n = 10⁵, seed 4 (branch cells21): every
        // λ < 1 read avg ≈ −2.45 se. The interval [avg − 2se, avg + 2se]
        // lies below 0; it used to close to the point 0 and rank λ = 0 at
        // its variance (13,520x under the measured ASE).
        let low = BiasEstimate {
            avg: -3.404e-2,
            se: 1.391e-2,
            se_ranked: 1.391e-2,
            noise_se: 1.391e-2,
        };
        assert_eq!(kernel_prediction(2.219e-8, low, 0.0), None);
        // λ = 0.8 there: its variance alone is large enough to pin the
        // ASE; the prediction is at least (var + z·se)/3.
        let low8 = BiasEstimate {
            avg: -2.370e-2,
            se: 9.484e-3,
            se_ranked: 9.484e-3,
            noise_se: 9.484e-3,
        };
        let (a, b2) = kernel_prediction(5.220e-3, low8, 0.0).unwrap();
        assert!(
            (a - (5.220e-3 + BIAS_BOUND_Z * 9.484e-3) / 3.0).abs() < 1e-12,
            "{a}"
        );
        assert!((b2 - (a - 5.220e-3)).abs() < 1e-15);
        // An estimate at or above 0 keeps the interval avg ± z·se.
        let pos = BiasEstimate {
            avg: 1e-9,
            se: 1e-9,
            se_ranked: 1e-9,
            noise_se: 1e-9,
        };
        let (a, _) = kernel_prediction(1e-8, pos, 0.0).unwrap();
        assert!((a - 1.1e-8).abs() < 1e-20, "{a}");
        // Whatever the draw, U >= z·se: a bias the noise can hide is never
        // read as resolved below the noise (var + z·se <= 9 var needed,
        // var >= 3.39e-7 here).
        for avg in [-1.0, -1e-3, -2e-6, -1e-9, 0.0] {
            let b = BiasEstimate {
                avg,
                se: 1e-6,
                se_ranked: 1e-6,
                noise_se: 1e-6,
            };
            assert_eq!(kernel_prediction(3e-7, b, 0.0), None, "avg {avg}");
            assert!(kernel_prediction(3.5e-7, b, 0.0).is_some(), "avg {avg}");
        }
    }

    /// Branch plan19 (docs/MATH.md §9.4, "The bounds' confidence"): the
    /// three kernel maps ranked beyond 3x of their measured ASE at 2
    /// standard errors in branch rank15's seed-cells, with the numbers
    /// the planner read there (var, avg, se; EM floor 0). At z = 2 each
    /// was ranked and predicted more than 3x its measured ASE; at
    /// BIAS_BOUND_Z its interval spans more than 9x: not ranked.
    #[test]
    fn bias_intervals_at_one_percent_unrank_the_chance_draws() {
        // (var, avg, se, measured ASE): the airports at εh 0.1, n = 10⁵,
        // seed 36, λ = 0.8; the city at εh 0.1, n = 10³, seed 2, λ = 0.8;
        // the constructed population at εh 0.5, n = 10³, seed 4, λ = 0.6.
        for (var, avg, se, measured) in [
            (5.2300e-3, 1.0209e-2, 1.2253e-2, 5.091e-3),
            (4.7646e-1, 1.0628e0, 1.0627e0, 4.637e-1),
            (1.5111e-4, 6.6778e-4, 2.9331e-4, 2.113e-4),
        ] {
            let b = BiasEstimate {
                avg,
                se,
                se_ranked: se,
                noise_se: se,
            };
            let (at2, _) = kernel_prediction_at(var, b, 0.0, 2.0).unwrap();
            assert!(at2 > 3.0 * measured, "{var} {at2} {measured}");
            assert_eq!(kernel_prediction(var, b, 0.0), None, "{var}");
        }
        // The gate EM's floors read keeps 2 standard errors: the plain
        // map resolved at avg 1e-4 ± 1e-5, var 1e-4 at both z.
        let b = BiasEstimate {
            avg: 1e-4,
            se: 1e-5,
            se_ranked: 1e-5,
            noise_se: 1e-5,
        };
        assert!(plain_bias_resolved(1e-4, b));
        let tight = BiasEstimate {
            avg: 0.0,
            se: 3.5e-7,
            se_ranked: 3.5e-7,
            noise_se: 3.5e-7,
        };
        // var + 2 se <= 9 var at var = 1e-7 (resolved at 0), while
        // var + z·se > 9 var: not ranked as a prediction.
        assert!(plain_bias_resolved(1e-7, tight));
        assert_eq!(kernel_prediction(1e-7, tight, 0.0), None);
    }

    #[test]
    fn same_location_lag_law_is_a_law_and_has_the_noiseless_limit() {
        let q = same_location_lag_law(1e9, [1.0, 1.0]);
        assert!(
            (q[0][0] - 1.0).abs() < 1e-6 && q[0][1].abs() < 1e-6,
            "{q:?}"
        );
        // With noise the offset spreads; q(0) + 2q(1) + 2q(2) <= 1.
        let q = same_location_lag_law(1.0, [1.0, 1.0]);
        assert!(q[1][0] < 1.0 && q[1][1] > 0.0 && q[1][0] + 2.0 * (q[1][1] + q[1][2]) <= 1.0);
        // The dithered rounding variance: Δ²/12 without noise, → 0 with.
        let v = dithered_rounding_variance(1e9, 1.0);
        assert!((v - 1.0 / 12.0).abs() < 1e-3, "{v}");
        assert!(dithered_rounding_variance(1.0, 0.1) < 1e-8);
    }

    /// EM started on the counts while their FFT is made (branch speed04):
    /// the plan and the map have the bits of the plan made after the FFT.
    #[test]
    fn plan_beside_the_fft_is_the_plan_after_it() {
        for (eps_h, per) in [(0.3, 3), (3.0, 1), (30.0, 2)] {
            let (_, grid, eps, mapper, agg) = spots(300, per, eps_h);
            let set = QuerySet::Kde(grid);
            let n = agg.accepted();
            let after = plan(&set, eps, n, Some(&mapper)).unwrap();
            let (beside, m2) = plan_building_mapper(&set, eps, n, agg.counts().unwrap(), || {
                Ok(agg.mapper()?.unwrap())
            })
            .unwrap();
            assert_eq!(m2.fft_len(), mapper.fft_len());
            assert_eq!(format!("{after:?}"), format!("{beside:?}"), "εh {eps_h}");
            let (e1, p1) = agg.planned_estimate_with(&mapper).unwrap();
            let (e2, p2, m3) = agg.planned_estimate_and_mapper().unwrap();
            assert!(m3.is_some());
            assert_eq!(
                format!("{e1:?} {p1:?}"),
                format!("{e2:?} {p2:?}"),
                "εh {eps_h}"
            );
        }
        // A failing FFT: the error, and EM's thread does not wait forever.
        let (_, grid, eps, _, agg) = spots(20, 1, 0.3);
        let set = QuerySet::Kde(grid);
        let r = plan_building_mapper(&set, eps, 20, agg.counts().unwrap(), || {
            Err(crate::error::Error::Numerical { routine: "test" })
        });
        assert!(r.is_err());
    }

    /// attack6: reports that all lie far outside the map (no location in
    /// EM's observation window) failed the whole plan with EM's refusal:
    /// `geopriv map aggregate` exited 2 and the collector's GET .../map
    /// answered 500, while the kernel maps (`--lambda 1`) are defined. The
    /// plan now ranks the kernel maps without EM; where EM saw any report,
    /// nothing changes.
    /// A 21 x 21 kernel grid on the 20 km square at εh `eh`, and an
    /// aggregator (512 bins per axis) of `n` noise-a-priori reports whose
    /// locations are replaced by `at(i)` (seed `seed`).
    fn moved_reports(
        eh: f64,
        n: u64,
        seed: u64,
        at: impl Fn(u64) -> Vec<f64>,
    ) -> (QuerySet, f64, MapAggregator) {
        let grid = KdeGrid::square(20_000.0, 21).unwrap();
        let eps = eh / grid.bandwidth();
        let set = QuerySet::Kde(grid);
        let dev = MapRelease::new(set.clone(), MapMechanism::APriori, eps).unwrap();
        let mut agg =
            MapAggregator::with_max_bins(set.clone(), MapMechanism::APriori, eps, 512).unwrap();
        let mut rng = StdRng::seed_from_u64(seed);
        for i in 0..n {
            let mut r = dev
                .release_unmetered(&[10_000.0, 10_000.0], &mut rng)
                .unwrap();
            r.location = Some(at(i));
            agg.add(&r).unwrap();
        }
        (set, eps, agg)
    }

    #[test]
    fn reports_all_outside_the_window_are_planned_without_em() {
        let (set, eps, agg) = moved_reports(0.3, 600, 6, |i| vec![1e9 + i as f64, -1e9]);
        let (est, p, _) = agg.planned_estimate_and_mapper().unwrap();
        let p = p.unwrap();
        assert!(
            p.em.is_none() && p.pick().em_iterations.is_none(),
            "{}",
            p.line
        );
        assert_eq!(est.n, 600);
        assert!(
            est.values.iter().all(|v| *v == 0.0),
            "{:?}",
            &est.values[..3]
        );
        let m = agg.mapper().unwrap().unwrap();
        assert!(plan(&set, eps, 600, Some(&m)).is_ok());
    }

    /// attack8 O3: with no report inside the bins (n = 1 at εh 0.001, its
    /// noisy location beyond them) every kernel map is 0 with variance 0
    /// and bias estimate 0 ± 0, and the plan read "predicted ASE 0.00e0".
    /// The reports carry nothing to predict that map's error from: the
    /// pick (λ = 0, the same map as before) states why it has no
    /// prediction (NaN), and the other mechanisms are still ranked.
    #[test]
    fn no_report_inside_the_bins_gives_no_prediction() {
        for (n, far) in [(1u64, 1e9), (2, -5e8)] {
            let (set, eps, agg) = moved_reports(0.001, n, 8, |_| vec![far, far]);
            let (est, p, m) = agg.planned_estimate_and_mapper().unwrap();
            let (p, m) = (p.unwrap(), m.unwrap());
            assert_eq!(m.counts().outside(), n);
            let pick = p.pick();
            assert_eq!(pick.name, "a-priori λ=0.0", "{}", p.line);
            assert!(
                pick.ase.is_nan() && pick.variance.is_nan() && pick.bias2.is_nan(),
                "{pick:?}"
            );
            assert!(!p.line.contains("predicted ASE 0.00e0"), "{}", p.line);
            assert!(
                p.line.contains(&format!(
                    "no prediction (none of the {n} reports lies inside the map's bins"
                )),
                "{}",
                p.line
            );
            assert!(
                p.line.contains("next other mechanism vector-laplace"),
                "{}",
                p.line
            );
            // The map is the λ = 0 kernel map of no binned report, as
            // before; its interval the λ = 1 map's (branch pubint).
            assert_eq!(est.lambda, 0.0);
            assert!(est.values.iter().all(|v| *v == 0.0));
            let k0 = m.estimate(&agg.kernel(0.0).unwrap()).unwrap();
            let k1 = m.estimate(&agg.kernel(1.0).unwrap()).unwrap();
            assert_eq!(format!("{:?}", k0.values), format!("{:?}", est.values));
            assert_eq!(
                format!("{:?}", k1.standard_errors),
                format!("{:?}", est.standard_errors)
            );
            assert_eq!(est.interval_centres.as_ref(), Some(&k1.values));
            // Every other prediction is a number, best first.
            let rest: Vec<f64> = p.predictions[1..].iter().map(|q| q.ase).collect();
            assert!(rest.iter().all(|a| a.is_finite()), "{rest:?}");
            assert!(rest.windows(2).all(|w| w[0] <= w[1]), "{rest:?}");
            assert_eq!(
                format!("{p:?}"),
                format!("{:?}", plan(&set, eps, n, Some(&m)).unwrap())
            );
        }
    }

    /// Issue 19 item 15 (airports at εh 100, n = 10^7: 64x under): devices
    /// piled on a few locations round into bins by a whole location at a
    /// time, an error no per-device term sees. Before the coincident
    /// devices were charged the λ = 1 map was predicted hundreds of times
    /// under its measured ASE here.
    #[test]
    fn plan_charges_the_rounding_of_coincident_devices() {
        let (xs, grid, eps, m, agg) = spots(40, 500, 100.0);
        let set = QuerySet::Kde(grid.clone());
        let truth = grid.exact_map(&xs);
        let p = plan(&set, eps, xs.len() as u64, Some(&m)).unwrap();
        let ase = |v: &[f64]| {
            v.iter()
                .zip(&truth)
                .map(|(a, b)| (a - b) * (a - b))
                .sum::<f64>()
                / v.len() as f64
        };
        let k1 = p
            .predictions
            .iter()
            .find(|q| q.name == "a-priori λ=1.0")
            .expect("λ = 1 ranked");
        let got = ase(&m.estimate(&agg.kernel(1.0).unwrap()).unwrap().values);
        let r = got / k1.ase;
        assert!(
            (1.0 / 3.0..3.0).contains(&r),
            "λ = 1: measured/predicted {r}"
        );
        // Without the charge for coincident devices the prediction is more
        // than 3x under.
        let at = coincident_devices(&grid, eps, &m).expect("coincident devices seen");
        let without = k1.ase - at.kernel_term(eps, m.counts().spec().delta());
        assert!(got / without > 3.0, "{} {without}", got);
        let em = p.em.as_ref().unwrap();
        let q = p
            .predictions
            .iter()
            .find(|q| q.em_iterations.is_some())
            .unwrap();
        let r = ase(&em.values) / q.ase;
        assert!((1.0 / 3.0..3.0).contains(&r), "EM: measured/predicted {r}");
    }
}
