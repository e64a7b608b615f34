//! Non-negative deconvolution of the binned noisy locations (std only;
//! docs/MATH.md §9.6): the expectation-maximisation (Richardson–Lucy)
//! estimate of the devices' density through the planar-Laplace channel,
//! stopped by held-out likelihood, then mapped with the Gaussian kernel.
//!
//! Model. The bin counts are coarsened to a lattice of spacing δ = one map
//! step / g (g a divisor of the bins' refinement, the finest with
//! δ >= 0.25/ε whose FFT fits, or at εh <= 0.318 c = ⌊0.45/(ε·step)⌋ map
//! steps, the noise lattice; cells aligned with the map points; exact
//! integer sums). Devices lie
//! in the query set's domain, so the latent density p lives on the lattice
//! cells of the domain (non-negative, total mass = the counted devices);
//! a device in latent cell a lands in observed cell w with probability
//! k(w - a) = ∫∫ tri_δ(u) ε²/(2π) e^{-ε|(w-a)δ + u|} du (the planar-Laplace
//! density averaged over the two cells' boxes, tri_δ the triangular law of
//! the difference of two uniforms), truncated at R cells (R δ >= 8/ε where
//! the FFT size allows) and normalised. The counts in the observed window
//! are then Poisson with means μ = n k * p, and EM's update
//!
//! ```text
//! p_a <- p_a · Σ_w k(w - a) c_w / μ_w          (Σ_w k = 1)
//! ```
//!
//! keeps p non-negative and its mass equal to the counts in the window;
//! each step raises the likelihood. Early stopping is the regulariser: the
//! counts are split into two halves by a public, seeded binomial thinning
//! (post-processing of the counts only, so any sharding gives the same
//! halves), EM runs on each half, and the iteration count t* maximises the
//! other half's log-likelihood (two-fold cross-validation; the truth is
//! never used). The map is EM on all counts stopped at t*, convolved with
//! K_h averaged over a lattice cell (separable: erf differences).
//!
//! Error model (what the planner ranks, and the error bars): a parametric
//! bootstrap. Counts c* ~ Poisson(n k * p̂) are drawn (seeded) from the
//! fitted density, EM is rerun with the same t*, and each replicate's map
//! is compared with the map of p̂ (the replicate's truth): the mean over
//! replicates and cells of the squared difference is the predicted ASE
//! (the truth is a pilot: EM run [`EmOptions::pilot`] times longer);
//! per cell, the replicates' spread and mean offset, with the map's
//! distance to the pilot, give the interval (docs/MATH.md §9.6, §9.7).

use super::bins::BinnedCounts;
use super::fft::{complex_pair, fast_len, fft2_in_place};
use super::query_set::KdeGrid;
use crate::error::{positive_finite, Error, Result};
use rand::SeedableRng;
use rand_distr::{Distribution, Poisson};
use rustfft::num_complex::Complex64;
use rustfft::{Fft, FftPlanner};
use std::f64::consts::PI;
use std::sync::Arc;
use std::vec;
use std::vec::Vec;

/// The default κ of [`EmOptions::noise_lattice`]: lattice cells of
/// c = ⌊κ/(ε·step)⌋ map steps where c >= 2 (εh <= 0.318 with h the cell
/// diagonal): c = 2 at εh = 0.3, 6 at εh = 0.1, so the noise scale 1/ε
/// spans 2.2–2.4 cells (docs/MATH.md §9.8, branch emlow: EM 4.70 → 3.25 s
/// and 19.8 → 2.1 s of the process's CPU at εh 0.3 and 0.1 on 10^6
/// reports, EM's ASE −5% to +26% on the sweep's populations).
pub const NOISE_LATTICE: f64 = 0.45;

/// Tuning of [`EmDeconvolution`] (public parameters; defaults in
/// [`EmOptions::default`]).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct EmOptions {
    /// Most EM iterations (also the cap of the held-out search).
    pub max_iterations: usize,
    /// Observation window beyond the map, in units of 1/ε (8: all but
    /// 9·e^{-8} ≈ 0.3% of a device's noise mass).
    pub window: f64,
    /// Largest FFT length per axis (bounds time and memory; the window
    /// shrinks to fit).
    pub max_fft: usize,
    /// Bootstrap replicates of the error model (0: no error model).
    pub replicates: usize,
    /// Seed of the thinning and of the bootstrap (public).
    pub seed: u64,
    /// The bootstrap's truth is EM run this many times longer than the
    /// estimate (an undersmoothed pilot: a truth as smooth as the
    /// estimate itself would hide most of its bias).
    pub pilot: f64,
    /// Branch mapspeed's opt-in coarse lattice: cells of c map steps, c the
    /// largest with c·step <= 0.2/ε where that is at least 2 (docs/MATH.md
    /// §9.8). Overrides [`noise_lattice`](Self::noise_lattice) with κ = 0.2
    /// (a finer lattice than the default κ).
    pub coarse_lattice: bool,
    /// The noise lattice at low εh (docs/MATH.md §9.8): where the finest
    /// lattice is one map step and κ/ε spans at least two map steps
    /// (κ = this value), lattice cells of c map steps, c = ⌊κ/(ε·step)⌋,
    /// so the channel's scale 1/ε spans about 1/κ cells whatever ε: the
    /// window's cells and the iterations EM needs stay bounded as εh
    /// falls. 0 turns it off; [`coarse_lattice`](Self::coarse_lattice)
    /// is κ = 0.2.
    pub noise_lattice: f64,
    /// EM's work budget C (docs/MATH.md §9.6, §9.8, branch emcost): the
    /// held-out search, the fit, the pilot and the replicates together do
    /// at most the work of about C EM steps on a window of the fine bins'
    /// size plus D cell-steps per counted report
    /// ([`work_per_report`](Self::work_per_report)), i.e. the search is
    /// capped at T_c = ⌊max(C·B0·B1 + D·n, W_0) / ((1 + pilot +
    /// ⌈replicates/2⌉)·N0·N1)⌋ steps (B the bins, N the EM window's FFT
    /// per axis, W_0 = `EM_WORK_FLOOR`; [`EmDeconvolution::work_cap`]).
    /// 0 (or not finite) turns the cap off. Default `EM_WORK_BUDGET`.
    pub work_budget: f64,
    /// D of [`work_budget`](Self::work_budget): EM cell-steps allowed per
    /// counted report. Default `EM_WORK_PER_REPORT`.
    pub work_per_report: f64,
}

impl Default for EmOptions {
    /// 2000 iterations, window 8/ε, FFT at most 400 per axis, 4
    /// replicates, pilot 3, the noise lattice at κ = `NOISE_LATTICE`
    /// (a map step where the noise is under 2.2 map steps).
    fn default() -> Self {
        Self {
            max_iterations: 2000,
            window: 8.0,
            max_fft: 400,
            replicates: 4,
            seed: 0x0067_656f_7072_6976,
            pilot: 3.0,
            coarse_lattice: false,
            noise_lattice: NOISE_LATTICE,
            work_budget: EM_WORK_BUDGET,
            work_per_report: EM_WORK_PER_REPORT,
        }
    }
}

/// The default [`EmOptions::work_budget`] C: EM's total work (held-out
/// search, fit, pilot, replicates) at most that of about 100 EM steps on
/// a window the size of the fine bins (each step two convolutions, four
/// transforms: about 10x the transforms of the six kernel maps). With the
/// default 4 replicates and pilot 3 the held-out search is capped at
/// T_c = ⌊(100/6)·B0·B1/(N0·N1)⌋ steps by this term alone (the reports'
/// term and the floor: [`EmDeconvolution::work_cap`]). On the CLI's
/// default 61 × 61 map:
/// 18 at εh = 10 (bins 393², EM FFT 375²), where 1,000 reports of one
/// point ran to t* = 164 (10.5 s of CPU idle); 73 at εh 3, 193 at εh 1;
/// 2,263 at εh 0.3 and 2,038 at εh 0.1 (EM FFT 72², 50²), above
/// [`EmOptions::max_iterations`]. Where the uncapped t* is at most T_c
/// the cap changes nothing (docs/MATH.md §9.6, §9.8, branch emcost).
pub const EM_WORK_BUDGET: f64 = 100.0;

/// The default [`EmOptions::work_per_report`] D: 50 EM cell-steps per
/// counted report (about 3.6 µs of CPU, some 7x what reading and binning
/// a report costs), so that EM's work grows with n like the rest of the
/// pipeline and a large population keeps its held-out t*: the sweep's
/// airports-like population at n = 10^6 (31 × 31, εh 3 and 10: t* 142
/// and 147 against T_c 21 and 18 from C alone) is uncapped (T_c 166 and
/// 227); 1,000 or 20,000 reports of one point add 0 and 1 step to T_c.
pub const EM_WORK_PER_REPORT: f64 = 50.0;

/// The floor of EM's work budget, in cell-steps: 10^7 (about 0.7 s of
/// CPU), so that a small map's EM, whose steps are cheap, is never capped
/// below what costs nothing worth bounding (the digests' 6 × 6 map with 64
/// bins kept its t* = 44; docs/MATH.md §9.8).
pub const EM_WORK_FLOOR: f64 = 1e7;

/// The EM map of one set of binned counts.
#[derive(Clone, Debug, PartialEq)]
pub struct EmMap {
    /// Estimated mean of f_j over the devices, per map point (row-major).
    pub values: Vec<f64>,
    /// Per-cell standard error (bootstrap spread; NaN without replicates).
    pub standard_errors: Vec<f64>,
    /// Per-cell bias estimate (bootstrap mean offset; 0 without replicates).
    pub bias: Vec<f64>,
    /// The bootstrap's truth: the map of the pilot (EM run
    /// [`EmOptions::pilot`] times longer; empty without replicates).
    pub pilot_values: Vec<f64>,
    /// Predicted ASE (bootstrap; NaN without replicates).
    pub predicted_ase: f64,
    /// Its variance part.
    pub predicted_variance: f64,
    /// The iteration count chosen by held-out likelihood.
    pub iterations: usize,
    /// Steps the held-out search ran (each one step of both folds).
    pub held_out_steps: usize,
    /// The work cap T_c of [`EmOptions::work_budget`] where it ended the
    /// held-out search (None: the held-out rule ended it, or no search).
    pub work_cap: Option<usize>,
    /// Devices counted.
    pub n: u64,
}

/// EM deconvolution of binned noisy locations (see the module docs).
///
/// ```
/// use geopriv::map::{BinSpec, BinnedCounts, EmDeconvolution, EmOptions, KdeGrid};
/// let grid = KdeGrid::square(10_000.0, 21)?;
/// let eps = 1.0 / grid.bandwidth();
/// let mut c = BinnedCounts::new(BinSpec::for_estimation(&grid, eps, 512)?);
/// for i in 0..2_000 {
///     c.add(&[3_000.0 + (i % 40) as f64 * 100.0, 5_000.0])?;
/// }
/// let em = EmDeconvolution::new(&grid, eps, &c, EmOptions::default())?;
/// let map = em.estimate()?;
/// assert_eq!(map.values.len(), 21 * 21);
/// assert!(map.values.iter().all(|v| *v >= 0.0));
/// # Ok::<(), geopriv::Error>(())
/// ```
pub struct EmDeconvolution {
    opts: EmOptions,
    n_fft: [usize; 2],
    /// Observed window: cells [0, win) per axis of the FFT arrays.
    win: [usize; 2],
    /// Latent cells: [lat0, lat1) per axis.
    lat: [[usize; 2]; 2],
    /// Map point (0, 0) at array index (off, off).
    off: [usize; 2],
    map_points: [usize; 2],
    /// Lattice cells per map step (fine lattices).
    stride: usize,
    /// Fine bins per lattice cell and axis.
    bins_per_cell: usize,
    /// The fine bins' cells B0·B1 (the work budget's unit).
    bin_cells: f64,
    /// Map steps per lattice cell (coarse lattices at low εh; 1 otherwise):
    /// offsets between map points and cells are in units of δ/sup.
    sup: usize,
    /// Window counts, row-major N0 × N1.
    counts: Vec<f64>,
    /// F[k] on the DFT grid (real: k is symmetric).
    khat: Vec<f64>,
    /// `khat` transposed (column-major, N1 × N0): what
    /// [`convolve_masked`](Self::convolve_masked) multiplies its
    /// transposed spectrum by, read in order instead of N1 apart (the
    /// same numbers; branch speed04).
    khat_t: Vec<f64>,
    /// The channel's taps k(d0, d1), |d_a| <= radius[a], row-major
    /// (2R0+1) × (2R1+1), for the direct convolution.
    taps: Vec<f64>,
    /// The channel's radius R per axis, in cells.
    radius: [usize; 2],
    /// The lattice's cell side δ per axis.
    cell: [f64; 2],
    /// Convolve directly with the taps instead of by FFT (a narrow
    /// channel: [`DIRECT_MAX_TAPS`]).
    direct: bool,
    /// K_h averaged over a cell, per axis and offset (separable).
    smooth: [Vec<f64>; 2],
    fwd: [Arc<dyn Fft<f64>>; 2],
    inv: [Arc<dyn Fft<f64>>; 2],
    total: f64,
    /// Every counted location (inside the window or not).
    all: u64,
    /// Per flat index: inside the observed window.
    window: Vec<bool>,
}

/// A rectangle of array cells, [lo, hi) per axis.
type Region = [[usize; 2]; 2];

/// Reused buffers of [`EmDeconvolution::convolve_masked`] (per thread).
#[derive(Default)]
struct ConvWork {
    data: Vec<Complex64>,
    t: Vec<Complex64>,
    scratch: Vec<Complex64>,
}

std::thread_local! {
    static CONV_WORK: std::cell::RefCell<ConvWork> = std::cell::RefCell::new(ConvWork::default());
}

/// The state of accelerated EM: the extrapolated point y (where the next
/// step starts and whose means are scored), the last EM output x, and the
/// last step g = EM(y) - y.
struct EmState {
    y: Vec<f64>,
    x: Vec<f64>,
    g: Vec<f64>,
}

impl core::fmt::Debug for EmDeconvolution {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        write!(
            f,
            "EmDeconvolution(window {:?}, fft {:?})",
            self.win, self.n_fft
        )
    }
}

/// Channels with at most this many taps ((2R0+1)(2R1+1), R <= 3 cells)
/// are convolved directly instead of by FFT (docs/MATH.md §9.8): a direct
/// sum costs 2 flops per tap and cell, a pair of real fields through one
/// complex FFT and back about 5·log2(N0·N1) ≈ 85 per cell and field at
/// 375², so the crossover is near 40 taps. Measured on 10⁶ reports, 61 × 61
/// (`geopriv map aggregate`): at εh = 1000 (R = 1, 9 taps) 1.35 → 0.92 s
/// user for the whole process; at εh = 10 (R = 7, 225 taps) the direct
/// sum was slower, 1.21 → 1.72 s, and stays on the FFT.
pub const DIRECT_MAX_TAPS: usize = 49;

/// The held-out search stops a fold whose best is its first step and
/// whose likelihood has then fallen at each of this many steps, instead
/// of waiting 20 steps (docs/MATH.md §9.6, §9.8).
pub const HELD_OUT_CLEAR_FALL: usize = 5;

/// splitmix64: the thinning's public pseudo-random stream.
fn splitmix(state: &mut u64) -> u64 {
    *state = state.wrapping_add(0x9E37_79B9_7F4A_7C15);
    let mut z = *state;
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// Counts up to this are split exactly by [`half`] (c/64 draws, at most
/// 2^18 = 262,144 per bin); above it, from Binomial(c, 1/2)'s normal
/// approximation. 2^24 is beyond any honest bin of 10⁷ reports; a forged
/// partial state's count of 2^38 took 7.3 s and 2^63 would have taken
/// years in the exact loop (docs/ATTACK-20.md F3).
const HALF_EXACT_UP_TO: u64 = 1 << 24;

/// Binomial(c, 1/2) from the stream: popcounts of c fair bits, for
/// c <= [`HALF_EXACT_UP_TO`]; above, round(c/2 + (√c/2)·Z) clamped to
/// [0, c] with Z standard normal by Box–Muller from two 53-bit uniforms
/// (the normal approximation's Kolmogorov distance is below 0.4/√c <
/// 10⁻⁴ there, Berry–Esseen; the split is public post-processing for the
/// held-out stop, so only its spread matters).
///
/// ```text
/// half(0) = 0; half(64) = popcount of one 64-bit draw; half(2^40) ≈ 2^39 ± 2^19
/// ```
fn half(c: u64, state: &mut u64) -> u64 {
    if c > HALF_EXACT_UP_TO {
        let unit = |s: &mut u64| (splitmix(s) >> 11) as f64 * (1.0 / (1u64 << 53) as f64);
        let u1 = unit(state) + 0.5 / (1u64 << 53) as f64;
        let u2 = unit(state);
        let z = libm::sqrt(-2.0 * libm::log(u1)) * libm::cos(2.0 * core::f64::consts::PI * u2);
        let cf = c as f64;
        let k = libm::round(0.5 * cf + 0.5 * libm::sqrt(cf) * z);
        return if k <= 0.0 {
            0
        } else if k >= cf {
            c
        } else {
            k as u64
        };
    }
    let mut left = c;
    let mut k = 0u64;
    while left >= 64 {
        k += splitmix(state).count_ones() as u64;
        left -= 64;
    }
    if left > 0 {
        k += (splitmix(state) & ((1u64 << left) - 1)).count_ones() as u64;
    }
    k
}

impl EmMap {
    /// Condition the bootstrap's error model on the devices: its replicates
    /// are new devices (counts drawn from the fit), so their spread holds
    /// the devices' own sampling spread, while the ASE and the intervals
    /// are against the map of the same devices. `share` in [0, 1] is the
    /// part of the variance that remains given the devices (the noise's,
    /// docs/MATH.md §9.6): standard errors × √share, variance × share,
    /// predicted ASE = variance + bias² (bias² unchanged).
    pub fn condition(&mut self, share: f64) {
        let share = if share.is_finite() {
            share.clamp(0.0, 1.0)
        } else {
            1.0
        };
        let bias2 = self.predicted_ase - self.predicted_variance;
        self.predicted_variance *= share;
        self.predicted_ase = self.predicted_variance + bias2;
        for s in &mut self.standard_errors {
            *s *= share.sqrt();
        }
    }
}

impl EmDeconvolution {
    /// Prepare EM for `counts` (binned for `grid` at per-device ε, e.g.
    /// [`MapAggregator::counts`](super::MapAggregator::counts)); 2-D grids
    /// only, at least one counted location.
    pub fn new(
        grid: &KdeGrid,
        epsilon: f64,
        counts: &BinnedCounts,
        opts: EmOptions,
    ) -> Result<Self> {
        let epsilon = positive_finite("epsilon", epsilon)?;
        let spec = counts.spec();
        if grid.dim() != 2 || spec.dim() != 2 || spec.grid_id() != grid.id() {
            return Err(Error::InvalidParameter {
                name: "dimension",
                value: grid.dim() as f64,
                requirement: "EM deconvolution needs 2-D counts binned for this grid",
            });
        }
        if counts.total() == 0 {
            return Err(Error::InvalidParameter {
                name: "reports",
                value: 0.0,
                requirement: "at least one accepted report",
            });
        }
        if opts.max_iterations == 0
            || opts.max_fft < 8
            || opts.window.partial_cmp(&0.0) != Some(core::cmp::Ordering::Greater)
        {
            return Err(Error::InvalidParameter {
                name: "em options",
                value: opts.max_iterations as f64,
                requirement: "max_iterations >= 1, max_fft >= 8, window > 0",
            });
        }
        let refine = spec.refine();
        let mp = spec.map_points();
        let step = grid.step();
        let dom = grid.domain();
        let origin = grid.origin();
        // Lattice: δ = step/gl with gl a divisor of the bins' refinement,
        // the finest whose FFT fits (fine lattices matter at large εh,
        // where the channel is narrow and the counts already show the
        // devices' structure below a map step).
        // At least one cell (branch emzero: at ε = f64::MAX, ε·δ is
        // infinite and the window's R was 0 cells, dropping the edge bins).
        let radius_for = |gl: usize, a: usize| -> usize {
            let delta = step[a] / gl as f64;
            let want = libm::ceil(opts.window / (epsilon * delta)).clamp(1.0, 1e6) as usize;
            want.min(spec.margin() / (refine / gl))
        };
        let fits = |gl: usize| {
            (0..2).all(|a| fast_len((mp[a] - 1) * gl + 1 + 2 * radius_for(gl, a)) <= opts.max_fft)
        };
        let coarse_enough =
            |gl: usize| (0..2).all(|a| step[a] / gl as f64 >= 0.25 / epsilon) || gl == 1;
        let gl = (1..=refine)
            .rev()
            .find(|&gl| refine % gl == 0 && fits(gl) && coarse_enough(gl))
            .unwrap_or(1);
        // At low εh even one map step is far below the noise's resolution:
        // cells of c = ⌊κ/(ε·step)⌋ map steps where that is at least 2
        // (docs/MATH.md §9.8, the noise lattice: the noise scale spans
        // about 1/κ cells at any ε, so the window's cells and EM's
        // iterations stay bounded as εh falls).
        let kappa = if opts.coarse_lattice {
            0.2
        } else {
            opts.noise_lattice
        };
        let sup = if gl == 1 && kappa > 0.0 && kappa.is_finite() {
            let c = (0..2)
                .map(|a| libm::floor(kappa / (epsilon * step[a])))
                .fold(f64::INFINITY, f64::min);
            if c >= 2.0 {
                (c.min(16.0) as usize).min(mp[0].max(mp[1]).max(2) - 1)
            } else {
                1
            }
        } else {
            1
        };
        // Bins per lattice cell.
        let g = refine / gl * sup;
        let mut n_fft = [1usize; 2];
        let mut win = [0usize; 2];
        let mut lat = [[0usize; 2]; 2];
        let mut off = [0usize; 2];
        let mut radius = [0usize; 2];
        let mut cell_len = [0.0; 2];
        for a in 0..2 {
            let delta = step[a] / gl as f64 * sup as f64;
            cell_len[a] = delta;
            let inner = ((mp[a] - 1) * gl).div_ceil(sup) + 1;
            let fit = opts.max_fft.saturating_sub(inner) / 2;
            let r = if sup == 1 {
                radius_for(gl, a)
            } else {
                let want = libm::ceil(opts.window / (epsilon * delta)).clamp(1.0, 1e6) as usize;
                want.min(spec.margin() / g)
            }
            .min(fit);
            radius[a] = r;
            win[a] = inner + 2 * r;
            n_fft[a] = fast_len(win[a]);
            off[a] = r;
            // Latent cells: centres within the domain (±δ/2), inside the window.
            let lo = libm::ceil((dom[2 * a] - origin[a]) / delta - 0.5);
            let hi = libm::floor((dom[2 * a + 1] - origin[a]) / delta + 0.5);
            let lo = (lo + r as f64).clamp(0.0, win[a] as f64 - 1.0) as usize;
            let hi = (hi + r as f64).clamp(lo as f64, win[a] as f64 - 1.0) as usize;
            lat[a] = [lo, hi + 1];
        }
        // Coarsen the bins: bin i -> cell floor((i - margin + g/2)/g) + R.
        let [n0, n1] = n_fft;
        let mut cw = vec![0.0; n0 * n1];
        let bins = spec.bins();
        let cell = |i: usize, a: usize| -> Option<usize> {
            let j = (i as i64 - spec.margin() as i64 + (g / 2) as i64).div_euclid(g as i64)
                + radius[a] as i64;
            (j >= 0 && (j as usize) < win[a]).then_some(j as usize)
        };
        let map0: Vec<Option<usize>> = (0..bins[0]).map(|i| cell(i, 0)).collect();
        let map1: Vec<Option<usize>> = (0..bins[1]).map(|i| cell(i, 1)).collect();
        let raw = counts.counts();
        for (i, c0) in map0.iter().enumerate() {
            let Some(c0) = c0 else { continue };
            let row = &raw[i * bins[1]..(i + 1) * bins[1]];
            for (&c, c1) in row.iter().zip(&map1) {
                if let (true, Some(c1)) = (c > 0, c1) {
                    cw[c0 * n1 + c1] += c as f64;
                }
            }
        }
        let total: f64 = cw.iter().sum();
        if total <= 0.0 {
            return Err(Error::InvalidParameter {
                name: "reports",
                value: 0.0,
                requirement: "at least one location inside the observation window",
            });
        }
        let step = cell_len;
        let mut planner = FftPlanner::new();
        let fwd = [planner.plan_fft_forward(n0), planner.plan_fft_forward(n1)];
        let inv = [planner.plan_fft_inverse(n0), planner.plan_fft_inverse(n1)];
        // Channel k(d), |d_a| <= R_a cells, normalised.
        //
        // The density is ε²/(2π)·e^{-ε r}; its constant cancels in the
        // normalisation. Where it would underflow (ε r_0 > 600, r_0 the
        // nearest quadrature point to the centre, |v| = 1/(2·48) cell per
        // axis: εh ≳ 10^6 on small grids, or ε² not finite) it is
        // e^{-ε(r - r_0)} instead, 1 at the nearest point, so the channel
        // tends to the identity (a delta) and never to 0/0 (branch emzero:
        // before, every tap was 0, k = 0/0 and EM's map all zeros). Below
        // that the unshifted form is kept bit for bit.
        let v_near = -1.0 + (47.0 + 0.5) / 48.0;
        let r_near = (v_near * step[0]).hypot(v_near * step[1]);
        // ε² below the normal range (ε < 1.5e-154: the density's constant
        // is 0 or subnormal) is shifted too: unshifted, every tap was 0
        // (or a few subnormal bits) and EM's map all zeros with a
        // predicted ASE of 0 (attack15 F3, docs/ATTACK-15.md).
        let shifted = !(epsilon * epsilon).is_finite()
            || epsilon * epsilon < f64::MIN_POSITIVE
            || epsilon * r_near > 600.0;
        let pdf = |x: f64, y: f64| {
            if shifted {
                // ε·(r - r_0) with r >= r_0 up to rounding: clamp at 0.
                (-(epsilon * (x.hypot(y) - r_near)).max(0.0)).exp()
            } else {
                epsilon * epsilon / (2.0 * PI) * (-epsilon * x.hypot(y)).exp()
            }
        };
        let mut k = vec![Complex64::new(0.0, 0.0); n0 * n1];
        let mut ksum = 0.0;
        let r = radius;
        for d0 in -(r[0] as i64)..=r[0] as i64 {
            for d1 in -(r[1] as i64)..=r[1] as i64 {
                let near = d0.abs() <= 1 && d1.abs() <= 1;
                let q = if near {
                    48
                } else if d0.abs().max(d1.abs()) <= 4 {
                    8
                } else {
                    3
                };
                // Midpoint rule on the triangular weights of each axis.
                let mut s = 0.0;
                for i in 0..2 * q {
                    let v0 = -1.0 + (i as f64 + 0.5) / q as f64;
                    let w0 = 1.0 - v0.abs();
                    for j in 0..2 * q {
                        let v1 = -1.0 + (j as f64 + 0.5) / q as f64;
                        let w1 = 1.0 - v1.abs();
                        s += w0 * w1 * pdf((d0 as f64 + v0) * step[0], (d1 as f64 + v1) * step[1]);
                    }
                }
                let v = s * step[0] * step[1] / (q * q) as f64;
                ksum += v;
                let i0 = d0.rem_euclid(n0 as i64) as usize;
                let i1 = d1.rem_euclid(n1 as i64) as usize;
                k[i0 * n1 + i1].re = v;
            }
        }
        for v in &mut k {
            v.re /= ksum;
        }
        let taps: Vec<f64> = (-(r[0] as i64)..=r[0] as i64)
            .flat_map(|d0| (-(r[1] as i64)..=r[1] as i64).map(move |d1| (d0, d1)))
            .map(|(d0, d1)| {
                k[d0.rem_euclid(n0 as i64) as usize * n1 + d1.rem_euclid(n1 as i64) as usize].re
            })
            .collect();
        let direct = taps.len() <= DIRECT_MAX_TAPS;
        let mut me = Self {
            opts,
            n_fft,
            win,
            lat,
            off,
            map_points: mp,
            stride: gl,
            bins_per_cell: g,
            bin_cells: (spec.bins()[0] * spec.bins()[1]) as f64,
            sup,
            counts: cw,
            khat: Vec::new(),
            khat_t: Vec::new(),
            taps,
            radius: r,
            cell: cell_len,
            direct,
            smooth: [Vec::new(), Vec::new()],
            fwd,
            inv,
            total,
            all: counts.total(),
            window: (0..n0 * n1)
                .map(|f| f / n1 < win[0] && f % n1 < win[1])
                .collect(),
        };
        me.fft2(&mut k, true);
        me.khat = k.iter().map(|c| c.re).collect();
        me.khat_t = (0..n0 * n1)
            .map(|f| me.khat[(f % n0) * n1 + f / n0])
            .collect();
        // K_h averaged over a cell: per axis ∫_{-1/2}^{1/2} e^{-(d+u)²δ²/(2h²)} du,
        // d in steps of 1/sup cells.
        let h = grid.bandwidth();
        for a in 0..2 {
            let s = step[a] / (h * 2f64.sqrt());
            let len = (mp[a] * gl + win[a]) * sup;
            me.smooth[a] = (0..len)
                .map(|d| {
                    let d = d as f64 / sup as f64;
                    (libm::erf((d + 0.5) * s) - libm::erf((d - 0.5) * s)) * PI.sqrt() / (2.0 * s)
                })
                .collect();
        }
        Ok(me)
    }

    /// Fine bins per lattice cell and axis (1: the lattice is the bins).
    pub fn bins_per_cell(&self) -> usize {
        self.bins_per_cell
    }

    /// The lattice's cell side δ per axis (map units).
    pub fn cell_size(&self) -> [f64; 2] {
        self.cell
    }

    /// The channel's variance per axis on the lattice,
    /// σ_k,a² = Σ_d k(d)·(d_a δ_a)² (map units²): how far one EM step
    /// spreads a cell's mass. About 3/ε² + δ²/6 where the noise spans
    /// cells (the noise and the two uniforms of the cells' boxes), about
    /// E|N_a|·δ where it is far below a cell (only devices within the
    /// noise of a cell's edge cross it).
    pub fn channel_variance(&self) -> [f64; 2] {
        let [r0, r1] = self.radius;
        let w1 = 2 * r1 + 1;
        let mut v = [0.0; 2];
        for (t0, d0) in (-(r0 as i64)..=r0 as i64).enumerate() {
            for (t1, d1) in (-(r1 as i64)..=r1 as i64).enumerate() {
                let k = self.taps[t0 * w1 + t1];
                v[0] += k * (d0 as f64 * self.cell[0]).powi(2);
                v[1] += k * (d1 as f64 * self.cell[1]).powi(2);
            }
        }
        v
    }

    /// 2-D transform: the rows along axis 1, then (transposed) along
    /// axis 0. (Splitting the rows between two threads was tried and
    /// dropped: at εh = 0.3 it ran beside the planner's two kernel-map
    /// threads and cost 3.4 s -> 5.0 s wall; above it gained nothing.)
    fn fft2(&self, data: &mut [Complex64], forward: bool) {
        fft2_in_place(
            if forward { &self.fwd } else { &self.inv },
            self.n_fft,
            data,
        );
    }

    /// [`convolve_in`](Self::convolve_in) by FFT: F⁻¹[F[field]·F[k]].
    fn convolve_fft(&self, field: &[f64]) -> Vec<f64> {
        let mut g: Vec<Complex64> = field.iter().map(|&v| Complex64::new(v, 0.0)).collect();
        self.fft2(&mut g, true);
        for (a, k) in g.iter_mut().zip(&self.khat) {
            *a *= *k;
        }
        self.fft2(&mut g, false);
        let norm = 1.0 / (self.n_fft[0] * self.n_fft[1]) as f64;
        g.iter().map(|c| c.re * norm).collect()
    }

    /// Circular convolutions of two real fields with k in one complex
    /// transform (k is real and even, so (a + ib) * k = a * k + i b * k).
    fn convolve_pair(&self, a: &[f64], b: &[f64]) -> (Vec<f64>, Vec<f64>) {
        if self.direct {
            return (self.convolve_direct(a), self.convolve_direct(b));
        }
        let mut g = complex_pair(a, b);
        self.fft2(&mut g, true);
        for (a, k) in g.iter_mut().zip(&self.khat) {
            *a *= *k;
        }
        self.fft2(&mut g, false);
        let norm = 1.0 / (self.n_fft[0] * self.n_fft[1]) as f64;
        (
            g.iter().map(|c| c.re * norm).collect(),
            g.iter().map(|c| c.im * norm).collect(),
        )
    }

    /// The observed window [0, win) per axis (where the means μ are read).
    fn window_region(&self) -> Region {
        [[0, self.win[0]], [0, self.win[1]]]
    }

    /// Circular convolution of a real field with k (directly with the
    /// taps where the channel is narrow, else by FFT), valid only inside
    /// `out` (zero elsewhere on the FFT path): the numbers of the full
    /// convolution there, bit for bit (branch emspeed).
    fn convolve_in(&self, field: &[f64], out: Region) -> Vec<f64> {
        if self.direct {
            return self.convolve_direct(field);
        }
        self.convolve_masked(field, None, out).0
    }

    /// [`convolve_pair`](Self::convolve_pair), valid only inside `out`
    /// (zero elsewhere): the same numbers there, bit for bit.
    fn convolve_pair_in(&self, a: &[f64], b: &[f64], out: Region) -> (Vec<f64>, Vec<f64>) {
        if self.direct {
            return (self.convolve_direct(a), self.convolve_direct(b));
        }
        let (x, y) = self.convolve_masked(a, Some(b), out);
        (x, y.unwrap_or_default())
    }

    /// The FFT convolution of [`convolve_fft`](Self::convolve_fft) /
    /// [`convolve_pair`](Self::convolve_pair) with the work the caller
    /// does not read left out (branch emspeed, docs/MATH.md §9.6):
    ///
    /// * the forward row transforms (axis 1) run only over the rows from
    ///   the first to the last non-zero one (a zero row's transform is
    ///   zero; the latent density fills about a third of the rows);
    /// * the spectrum is multiplied by F[k] in the transposed layout (one
    ///   transpose fewer than two calls of `fft2`: 3 instead of 4);
    /// * the inverse column transforms (axis 0) run only over the columns
    ///   of `out`, and only `out` is read back.
    ///
    /// Every transform that runs is the same transform of the same numbers
    /// as in `fft2`, in the same order (rows, then columns, both ways), so
    /// the values inside `out` are those of `convolve_fft` bit for bit
    /// (up to the sign of an exact zero). Scratch buffers are reused per
    /// thread.
    fn convolve_masked(
        &self,
        a: &[f64],
        b: Option<&[f64]>,
        out: Region,
    ) -> (Vec<f64>, Option<Vec<f64>>) {
        let [n0, n1] = self.n_fft;
        let len = n0 * n1;
        if n0 < 2 || n1 < 2 || a.len() != len || b.is_some_and(|b| b.len() != len) {
            // Degenerate shapes: the plain path.
            return match b {
                Some(b) => {
                    let (x, y) = self.convolve_pair(a, b);
                    (x, Some(y))
                }
                None => (self.convolve_fft(a), None),
            };
        }
        let live = |i: usize| {
            a[i * n1..(i + 1) * n1].iter().any(|v| *v != 0.0)
                || b.is_some_and(|b| b[i * n1..(i + 1) * n1].iter().any(|v| *v != 0.0))
        };
        let first = (0..n0).find(|&i| live(i));
        let [[r0, r1], [c0, c1]] = [
            [out[0][0].min(n0), out[0][1].min(n0)],
            [out[1][0].min(n1), out[1][1].min(n1)],
        ];
        let mut x = vec![0.0; len];
        let mut y = b.map(|_| vec![0.0; len]);
        let Some(first) = first else {
            // A zero field convolves to zero.
            return (x, y);
        };
        let last = (first..n0).rev().find(|&i| live(i)).unwrap_or(first);
        CONV_WORK.with(|w| {
            let mut w = w.borrow_mut();
            let ConvWork { data, t, scratch } = &mut *w;
            data.clear();
            match b {
                Some(b) => data.extend(a.iter().zip(b).map(|(&x, &y)| Complex64::new(x, y))),
                None => data.extend(a.iter().map(|&v| Complex64::new(v, 0.0))),
            }
            t.resize(len, Complex64::new(0.0, 0.0));
            let need = [&self.fwd[0], &self.fwd[1], &self.inv[0], &self.inv[1]]
                .iter()
                .map(|f| f.get_inplace_scratch_len())
                .max()
                .unwrap_or(0);
            if scratch.len() < need {
                scratch.resize(need, Complex64::new(0.0, 0.0));
            }
            // Forward: the live rows along axis 1, then every column.
            self.fwd[1].process_with_scratch(&mut data[first * n1..(last + 1) * n1], scratch);
            transpose::transpose(data, t, n1, n0);
            self.fwd[0].process_with_scratch(t, scratch);
            for (v, k) in t.iter_mut().zip(&self.khat_t) {
                *v *= *k;
            }
            // Inverse: every row along axis 1, then the columns of `out`.
            transpose::transpose(t, data, n0, n1);
            self.inv[1].process_with_scratch(data, scratch);
            transpose::transpose(data, t, n1, n0);
            if c1 > c0 {
                self.inv[0].process_with_scratch(&mut t[c0 * n0..c1 * n0], scratch);
            }
            let norm = 1.0 / (n0 * n1) as f64;
            for j in c0..c1 {
                let col = &t[j * n0..(j + 1) * n0];
                for i in r0..r1 {
                    x[i * n1 + j] = col[i].re * norm;
                    if let Some(y) = y.as_mut() {
                        y[i * n1 + j] = col[i].im * norm;
                    }
                }
            }
        });
        (x, y)
    }

    /// The circular convolution of [`convolve_in`](Self::convolve_in) summed
    /// directly over the (2R0+1)(2R1+1) taps, on the same N0 × N1 period:
    /// out(i, j) = Σ_{d0,d1} k(d0, d1)·field((i + d0) mod N0, (j + d1) mod N1)
    /// (k is even in each axis, so this is k * field). The same sum as the
    /// FFT's up to rounding; cheaper where the channel is narrow (εh >= 10
    /// with the default window: R of 1–7 cells against a 375² FFT).
    fn convolve_direct(&self, field: &[f64]) -> Vec<f64> {
        let [n0, n1] = self.n_fft;
        let [r0, r1] = self.radius;
        let w1 = 2 * r1 + 1;
        let mut out = vec![0.0; n0 * n1];
        let live: Vec<bool> = field
            .chunks_exact(n1)
            .map(|row| row.iter().any(|v| *v != 0.0))
            .collect();
        for i in 0..n0 {
            let dst = &mut out[i * n1..(i + 1) * n1];
            for (t0, d0) in (-(r0 as i64)..=r0 as i64).enumerate() {
                let src_row = (i as i64 + d0).rem_euclid(n0 as i64) as usize;
                if !live[src_row] {
                    continue;
                }
                let src = &field[src_row * n1..(src_row + 1) * n1];
                for (t1, d1) in (-(r1 as i64)..=r1 as i64).enumerate() {
                    let w = self.taps[t0 * w1 + t1];
                    if w == 0.0 {
                        continue;
                    }
                    // dst[j] += w·src[(j + d1) mod N1], in two runs.
                    let s = d1.rem_euclid(n1 as i64) as usize;
                    let (head, tail) = dst.split_at_mut(n1 - s);
                    for (o, v) in head.iter_mut().zip(&src[s..]) {
                        *o += w * v;
                    }
                    for (o, v) in tail.iter_mut().zip(&src[..s]) {
                        *o += w * v;
                    }
                }
            }
        }
        out
    }

    fn in_window(&self, flat: usize) -> bool {
        self.window[flat]
    }

    fn is_latent(&self, flat: usize) -> bool {
        let n1 = self.n_fft[1];
        let (i, j) = (flat / n1, flat % n1);
        (self.lat[0][0]..self.lat[0][1]).contains(&i)
            && (self.lat[1][0]..self.lat[1][1]).contains(&j)
    }

    /// The uniform start: the window's mass spread over the latent cells.
    fn start(&self, mass: f64) -> Vec<f64> {
        let cells = ((self.lat[0][1] - self.lat[0][0]) * (self.lat[1][1] - self.lat[1][0])) as f64;
        (0..self.counts.len())
            .map(|f| if self.is_latent(f) { mass / cells } else { 0.0 })
            .collect()
    }

    /// One EM step on counts `c` from `p`; returns the new p and the means
    /// μ = k * p of the old one.
    fn step(&self, p: &[f64], c: &[f64]) -> (Vec<f64>, Vec<f64>) {
        let mu = self.convolve_in(p, self.window_region());
        let back = self.convolve_in(&self.ratio(c, &mu), self.lat);
        (Self::update(p, &back), mu)
    }

    /// c / μ inside the window (0 elsewhere).
    fn ratio(&self, c: &[f64], mu: &[f64]) -> Vec<f64> {
        c.iter()
            .zip(mu)
            .enumerate()
            .map(|(f, (&c, &m))| {
                if c > 0.0 && self.in_window(f) && m > 0.0 {
                    c / m
                } else {
                    0.0
                }
            })
            .collect()
    }

    /// The multiplicative update p · (k ⋆ ratio).
    fn update(p: &[f64], back: &[f64]) -> Vec<f64> {
        p.iter()
            .zip(back)
            .map(|(&p, &b)| if p > 0.0 { p * b.max(0.0) } else { 0.0 })
            .collect()
    }

    /// Two independent accelerated EM chains (counts `ca`, `cb`) for
    /// `iters` steps each, sharing every transform (the bootstrap pairs).
    fn run_pair(&self, ca: &[f64], cb: &[f64], iters: usize) -> (EmState, EmState) {
        let mut sa = self.start_state(ca);
        let mut sb = self.start_state(cb);
        for _ in 0..iters {
            let (ma, mb) = self.convolve_pair_in(&sa.y, &sb.y, self.window_region());
            let (ba, bb) =
                self.convolve_pair_in(&self.ratio(ca, &ma), &self.ratio(cb, &mb), self.lat);
            let na = Self::update(&sa.y, &ba);
            let nb = Self::update(&sb.y, &bb);
            Self::extrapolate(&mut sa, na);
            Self::extrapolate(&mut sb, nb);
        }
        (sa, sb)
    }

    /// Held-out log-likelihood of counts `c` under means μ (normalised
    /// over the window).
    fn held_out(&self, mu: &[f64], c: &[f64]) -> f64 {
        let total: f64 = mu
            .iter()
            .enumerate()
            .filter(|(f, _)| self.in_window(*f))
            .map(|(_, m)| m.max(0.0))
            .sum();
        let mut ll = 0.0;
        for (f, (&c, &m)) in c.iter().zip(mu).enumerate() {
            if c > 0.0 && self.in_window(f) {
                ll += c * (m.max(1e-300) / total).ln();
            }
        }
        ll
    }

    /// The uniform start of accelerated EM on counts `c`.
    fn start_state(&self, c: &[f64]) -> EmState {
        let p = self.start(c.iter().sum());
        EmState {
            y: p.clone(),
            x: p,
            g: Vec::new(),
        }
    }

    /// One accelerated EM step (Biggs & Andrews 1997, docs/MATH.md §9.6):
    /// x' = EM(y), g' = x' - y, α = <g', g>/<g, g> in [0, 0.95] (lowered
    /// so that y stays positive where x' is), y' = x' + α(x' - x). Each
    /// EM output keeps the window's mass, so y' does too. Returns the
    /// means μ = k * y of the point it started from.
    fn advance(&self, s: &mut EmState, c: &[f64]) -> Vec<f64> {
        let (next, mu) = self.step(&s.y, c);
        Self::extrapolate(s, next);
        mu
    }

    /// The extrapolation of [`advance`](Self::advance) from the EM output `next`.
    fn extrapolate(s: &mut EmState, next: Vec<f64>) {
        let g: Vec<f64> = next.iter().zip(&s.y).map(|(a, b)| a - b).collect();
        let mut alpha = if s.g.is_empty() {
            0.0
        } else {
            let num: f64 = g.iter().zip(&s.g).map(|(a, b)| a * b).sum();
            let den: f64 = s.g.iter().map(|a| a * a).sum();
            let a = num / den;
            if a.is_finite() {
                a.clamp(0.0, 0.95)
            } else {
                0.0
            }
        };
        for (&xn, &xo) in next.iter().zip(&s.x) {
            let d = xn - xo;
            if d < 0.0 && xn > 0.0 {
                alpha = alpha.min(0.9 * xn / -d);
            }
        }
        let y = next
            .iter()
            .zip(&s.x)
            .map(|(&xn, &xo)| (xn + alpha * (xn - xo)).max(0.0))
            .collect();
        s.x = next;
        s.g = g;
        s.y = y;
    }

    /// Accelerated EM on counts `c` for `iters` steps from the uniform start.
    fn run(&self, c: &[f64], iters: usize) -> EmState {
        let mut s = self.start_state(c);
        for _ in 0..iters {
            self.advance(&mut s, c);
        }
        s
    }

    /// The two halves of the counts by the public binomial thinning.
    fn halves(&self) -> (Vec<f64>, Vec<f64>) {
        let mut state = self.opts.seed;
        let mut a = vec![0.0; self.counts.len()];
        let mut b = vec![0.0; self.counts.len()];
        for ((c, x), y) in self.counts.iter().zip(&mut a).zip(&mut b) {
            let k = half(*c as u64, &mut state);
            *x = k as f64;
            *y = *c - k as f64;
        }
        (a, b)
    }

    /// The iteration count maximising the held-out likelihood, by two-fold
    /// cross-validation over a public binomial thinning of the counts.
    pub fn stopping_iteration(&self) -> usize {
        self.held_out_search().0
    }

    /// The cap T_c of [`EmOptions::work_budget`] on the held-out search
    /// (None: no budget), C the budget, D the work per report, n the
    /// counted reports:
    ///
    /// T_c = max(⌊max(C·B0·B1 + D·n, W_0) / ((1 + pilot + ⌈replicates/2⌉)·N0·N1)⌋, 1),
    ///
    /// W_0 = `EM_WORK_FLOOR`.
    ///
    /// The search runs at most T_c + 1 steps of the two folds (they share
    /// one transform pair per step), so t* <= T_c; the fit and the pilot
    /// then run pilot·t* steps and the replicates ⌈R/2⌉·t* (in pairs), and
    /// EM's whole work is at most about C steps on a window of B0·B1 cells
    /// plus D cell-steps per report (docs/MATH.md §9.6, §9.8).
    pub fn work_cap(&self) -> Option<usize> {
        let c = self.opts.work_budget;
        if !(c.is_finite() && c > 0.0) {
            return None;
        }
        let per_t = 1.0 + self.opts.pilot.max(1.0) + self.opts.replicates.div_ceil(2) as f64;
        let cells = (self.n_fft[0] * self.n_fft[1]) as f64;
        let d = self.opts.work_per_report;
        let per_report = if d.is_finite() && d > 0.0 { d } else { 0.0 };
        let work = (c * self.bin_cells + per_report * self.all as f64).max(EM_WORK_FLOOR);
        let t = (work / (per_t * cells)).floor();
        Some(if t.is_finite() && t >= 1.0 {
            t.min(1e15) as usize
        } else {
            1
        })
    }

    /// [`stopping_iteration`](Self::stopping_iteration), the steps the
    /// search ran and the work cap where it ended the search.
    fn held_out_search(&self) -> (usize, usize, Option<usize>) {
        let (a, b) = self.halves();
        // The two folds (train on a, test on b; train on b, test on a)
        // share every transform (one complex FFT for two real chains); each
        // fold keeps its own stopping
        // rule and stops recording once its held-out likelihood has fallen
        // for a while.
        let cap = self.work_cap().filter(|&c| c < self.opts.max_iterations);
        let max = cap.unwrap_or(self.opts.max_iterations);
        let (mut pa, mut pb) = (self.start_state(&a), self.start_state(&b));
        let (mut la, mut lb) = (Vec::new(), Vec::new());
        let (mut best_a, mut best_b) = ((f64::NEG_INFINITY, 0usize), (f64::NEG_INFINITY, 0usize));
        let (mut on_a, mut on_b) = (true, true);
        // Steps in a row each lower than the one before (per fold).
        let (mut fall_a, mut fall_b) = (0usize, 0usize);
        for t in 0..=max {
            // t* is the best of la + lb over the steps both folds scored:
            // once one fold has stopped, the other's further steps cannot
            // change it (branch emspeed: the loop ran on while either was
            // on; same t*).
            if !(on_a && on_b) {
                break;
            }
            let (ma, mb) = self.convolve_pair_in(&pa.y, &pb.y, self.window_region());
            let (ba, bb) =
                self.convolve_pair_in(&self.ratio(&a, &ma), &self.ratio(&b, &mb), self.lat);
            let (na, nb) = (Self::update(&pa.y, &ba), Self::update(&pb.y, &bb));
            Self::extrapolate(&mut pa, na);
            Self::extrapolate(&mut pb, nb);
            for (on, mu, test, lls, best, fall) in [
                (&mut on_a, &ma, &b, &mut la, &mut best_a, &mut fall_a),
                (&mut on_b, &mb, &a, &mut lb, &mut best_b, &mut fall_b),
            ] {
                if !*on {
                    continue;
                }
                let ll = self.held_out(mu, test);
                *fall = match lls.last() {
                    Some(&prev) if ll < prev => *fall + 1,
                    _ => 0,
                };
                lls.push(ll);
                if ll > best.0 {
                    *best = (ll, t);
                }
                // Stop once the held-out likelihood has fallen for a while:
                // 20 + t/4 steps; or, where the best is the first step (the
                // counts smoothed once by the channel: εh >= 10), after
                // HELD_OUT_CLEAR_FALL steps that each fell.
                let since = t - best.1;
                if since > 20 + best.1 / 4
                    || (best.1 <= 1 && *fall >= since && since >= HELD_OUT_CLEAR_FALL)
                {
                    *on = false;
                }
            }
        }
        let len = la.len().min(lb.len());
        let mut best = (f64::NEG_INFINITY, 0usize);
        for t in 0..len {
            let v = la[t] + lb[t];
            if v > best.0 {
                best = (v, t);
            }
        }
        // The cap ended the search where both folds were still on after
        // its last step.
        let capped = cap.filter(|_| on_a && on_b);
        (best.1.max(1), len, capped)
    }

    /// The map of a latent density: Σ_a p_a K̄_h(t_j - x_a) / Σ p, with
    /// K̄_h the Gaussian kernel averaged over a lattice cell (separable).
    fn map_of(&self, p: &[f64]) -> Vec<f64> {
        let mass: f64 = p.iter().sum();
        self.map_over(p, self.lat, if mass > 0.0 { mass } else { 1.0 })
    }

    /// The plain map (λ = 0) of the coarsened counts themselves: its
    /// difference to the plain map of the fine bins measures what the
    /// lattice loses (the EM prediction's discretisation term).
    pub fn plain_lattice_map(&self) -> Vec<f64> {
        self.map_over(
            &self.counts,
            [[0, self.win[0]], [0, self.win[1]]],
            self.all as f64,
        )
    }

    fn map_over(&self, p: &[f64], lat: [[usize; 2]; 2], mass: f64) -> Vec<f64> {
        let [_, n1] = self.n_fft;
        let mp = self.map_points;
        // First along axis 1: rows of latent i, map columns k.
        let rows = lat[0][1] - lat[0][0];
        let mut half = vec![0.0; rows * mp[1]];
        for (ri, i) in (lat[0][0]..lat[0][1]).enumerate() {
            for j in lat[1][0]..lat[1][1] {
                let v = p[i * n1 + j];
                if v == 0.0 {
                    continue;
                }
                for k in 0..mp[1] {
                    let d = ((j * self.sup) as i64
                        - (k * self.stride + self.off[1] * self.sup) as i64)
                        .unsigned_abs() as usize;
                    half[ri * mp[1] + k] += v * self.smooth[1][d];
                }
            }
        }
        let mut out = vec![0.0; mp[0] * mp[1]];
        for (ri, i) in (lat[0][0]..lat[0][1]).enumerate() {
            for r in 0..mp[0] {
                let d = ((i * self.sup) as i64 - (r * self.stride + self.off[0] * self.sup) as i64)
                    .unsigned_abs() as usize;
                let w = self.smooth[0][d];
                for k in 0..mp[1] {
                    out[r * mp[1] + k] += w * half[ri * mp[1] + k];
                }
            }
        }
        for v in &mut out {
            *v /= mass;
        }
        out
    }

    /// The EM map with its held-out stopping rule and, with replicates,
    /// the bootstrap error model (module docs).
    pub fn estimate(&self) -> Result<EmMap> {
        let (t, steps, cap) = self.held_out_search();
        let mut e = self.estimate_at(t)?;
        e.held_out_steps = steps;
        e.work_cap = cap;
        Ok(e)
    }

    /// As [`estimate`](Self::estimate) with a given iteration count.
    pub fn estimate_at(&self, iterations: usize) -> Result<EmMap> {
        let mut state = self.run(&self.counts, iterations);
        let p = state.y.clone();
        let values = self.map_of(&p);
        let m = values.len();
        let reps = self.opts.replicates;
        if reps == 0 {
            return Ok(EmMap {
                values,
                standard_errors: vec![f64::NAN; m],
                bias: vec![0.0; m],
                pilot_values: Vec::new(),
                predicted_ase: f64::NAN,
                predicted_variance: f64::NAN,
                iterations,
                held_out_steps: 0,
                work_cap: None,
                n: self.total as u64,
            });
        }
        let pilot_iters = (iterations as f64 * self.opts.pilot.max(1.0)).ceil() as usize;
        // The pilot continues the fit (the same path, not rerun).
        for _ in iterations..pilot_iters {
            self.advance(&mut state, &self.counts);
        }
        let pilot = state.y;
        let truth = self.map_of(&pilot);
        let mu = self.convolve_in(&pilot, self.window_region());
        let draw = |r: usize| -> Result<Vec<f64>> {
            let mut rng = rand::rngs::StdRng::seed_from_u64(
                self.opts.seed ^ (r as u64 + 1).wrapping_mul(0xD134_2543_DE82_EF95),
            );
            let mut c = vec![0.0; mu.len()];
            for (f, (x, &m)) in c.iter_mut().zip(&mu).enumerate() {
                if self.in_window(f) && m > 0.0 {
                    let d = Poisson::new(m).map_err(|_| Error::Numerical {
                        routine: "bootstrap Poisson draw",
                    })?;
                    *x = d.sample(&mut rng);
                }
            }
            Ok(c)
        };
        // Replicates 2q and 2q + 1 share their transforms (one complex FFT
        // for two real chains); the pairs run on separate threads. The
        // pairing depends on the index only, so the result does not depend
        // on the threads.
        let pair = |q: usize| -> Result<Vec<Vec<f64>>> {
            let a = draw(2 * q)?;
            if 2 * q + 1 < reps {
                let b = draw(2 * q + 1)?;
                let (sa, sb) = self.run_pair(&a, &b, iterations);
                Ok(vec![self.map_of(&sa.y), self.map_of(&sb.y)])
            } else {
                Ok(vec![self.map_of(&self.run(&a, iterations).y)])
            }
        };
        let pairs = reps.div_ceil(2);
        let maps: Vec<Result<Vec<Vec<f64>>>> = std::thread::scope(|s| {
            let handles: Vec<_> = (0..pairs)
                .filter(|q| q % 2 == 1)
                .map(|q| {
                    let f = &pair;
                    s.spawn(move || (q, f(q)))
                })
                .collect();
            let mut out: Vec<(usize, Result<Vec<Vec<f64>>>)> = (0..pairs)
                .filter(|q| q % 2 == 0)
                .map(|q| (q, pair(q)))
                .collect();
            for h in handles {
                out.push(h.join().unwrap_or((
                    usize::MAX,
                    Err(Error::Numerical {
                        routine: "bootstrap thread",
                    }),
                )));
            }
            out.sort_by_key(|x| x.0);
            out.into_iter().map(|x| x.1).collect()
        });
        let maps: Vec<Vec<f64>> = maps
            .into_iter()
            .collect::<Result<Vec<_>>>()?
            .into_iter()
            .flatten()
            .collect();
        let rf = reps as f64;
        let mut bias = vec![0.0; m];
        let mut se = vec![0.0; m];
        let (mut ase, mut var) = (0.0, 0.0);
        for j in 0..m {
            let mean = maps.iter().map(|x| x[j]).sum::<f64>() / rf;
            let sq = maps.iter().map(|x| (x[j] - truth[j]).powi(2)).sum::<f64>() / rf;
            let v = if reps > 1 {
                maps.iter().map(|x| (x[j] - mean).powi(2)).sum::<f64>() / (rf - 1.0)
            } else {
                sq
            };
            // The mean offset of R replicates carries their spread/√R:
            // its square less v/R is unbiased for the cell's squared bias.
            let off = mean - truth[j];
            let b2 = (off * off - if reps > 1 { v / rf } else { 0.0 }).max(0.0);
            bias[j] = b2.sqrt().copysign(off);
            se[j] = v.sqrt();
            ase += sq;
            var += v;
        }
        Ok(EmMap {
            values,
            standard_errors: se,
            bias,
            pilot_values: truth,
            predicted_ase: ase / m as f64,
            predicted_variance: var / m as f64,
            iterations,
            held_out_steps: 0,
            work_cap: None,
            n: self.total as u64,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::map::{BinSpec, BinnedCounts, KdeGrid};

    /// A forged count costs O(1) above [`HALF_EXACT_UP_TO`] (attack20 F3:
    /// 2^63 would have taken years), stays in [0, c] and near c/2 within
    /// a few √c/2; at and below the threshold the exact split is kept.
    #[test]
    fn half_of_a_huge_count_is_immediate_and_in_range() {
        let mut state = 7u64;
        for c in [HALF_EXACT_UP_TO + 1, 1 << 40, 1 << 63, u64::MAX] {
            for _ in 0..100 {
                let k = half(c, &mut state);
                let cf = c as f64;
                assert!(k <= c, "{k} > {c}");
                assert!(
                    (k as f64 - cf / 2.0).abs() <= 6.0 * cf.sqrt() / 2.0 + 1.0,
                    "{c}: {k}"
                );
            }
        }
        let mut a = 3u64;
        let k = half(HALF_EXACT_UP_TO, &mut a);
        assert!(k <= HALF_EXACT_UP_TO);
        // The exact split consumed c/64 draws: the stream moved by 2^18.
        let mut b = 3u64;
        for _ in 0..(HALF_EXACT_UP_TO / 64) {
            splitmix(&mut b);
        }
        assert_eq!(a, b);
    }

    fn engine(eps_h: f64) -> EmDeconvolution {
        let grid = KdeGrid::square(10_000.0, 21).unwrap();
        let eps = eps_h / grid.bandwidth();
        let mut c = BinnedCounts::new(BinSpec::for_estimation(&grid, eps, 512).unwrap());
        for i in 0..3_000u64 {
            let x = 2_000.0 + (i % 53) as f64 * 110.0;
            let y = 3_000.0 + (i % 29) as f64 * 170.0 + (i % 7) as f64 * 13.0;
            c.add(&[x, y]).unwrap();
        }
        EmDeconvolution::new(&grid, eps, &c, EmOptions::default()).unwrap()
    }

    #[test]
    fn direct_convolution_equals_the_fft_one_up_to_rounding() {
        for eps_h in [1.0, 10.0, 100.0, 1000.0] {
            let em = engine(eps_h);
            assert_eq!(em.direct, em.taps.len() <= DIRECT_MAX_TAPS);
            // A field with structure everywhere, including the wrap rows.
            let f: Vec<f64> = (0..em.counts.len())
                .map(|i| ((i * 7919) % 101) as f64 / 101.0 + em.counts[i])
                .collect();
            let a = em.convolve_direct(&f);
            let b = em.convolve_fft(&f);
            let peak = b.iter().fold(0.0f64, |m, v| m.max(v.abs()));
            let err = a
                .iter()
                .zip(&b)
                .fold(0.0f64, |m, (x, y)| m.max((x - y).abs()));
            assert!(err <= 1e-12 * peak, "εh {eps_h}: {err} vs peak {peak}");
            // Mass is kept (Σ k = 1 on the circle).
            let (sa, sf): (f64, f64) = (a.iter().sum(), f.iter().sum());
            assert!((sa - sf).abs() <= 1e-9 * sf);
        }
        // A narrow channel is summed directly, a wide one stays on the FFT.
        assert!(engine(1000.0).direct);
        assert!(!engine(0.3).direct);
    }

    #[test]
    fn masked_convolution_is_the_full_one_bit_for_bit_inside_its_region() {
        for eps_h in [0.1, 0.3, 1.0, 3.0] {
            let em = engine(eps_h);
            let [n0, n1] = em.n_fft;
            // A latent-like field (zero rows outside) and a window-wide one.
            let p: Vec<f64> = (0..em.counts.len())
                .map(|f| {
                    if em.is_latent(f) {
                        1.0 + ((f * 7919) % 101) as f64 / 101.0
                    } else {
                        0.0
                    }
                })
                .collect();
            let q: Vec<f64> = em.counts.iter().map(|c| c * 0.37).collect();
            for region in [em.window_region(), em.lat, [[0, n0], [0, n1]]] {
                let inside = |f: usize| {
                    (region[0][0]..region[0][1]).contains(&(f / n1))
                        && (region[1][0]..region[1][1]).contains(&(f % n1))
                };
                let full = em.convolve_fft(&p);
                let part = em.convolve_masked(&p, None, region).0;
                let (fa, fb) = em.convolve_pair(&p, &q);
                let (pa, pb) = em.convolve_masked(&p, Some(&q), region);
                let pb = pb.unwrap();
                for f in 0..full.len() {
                    if inside(f) {
                        assert_eq!(full[f], part[f], "εh {eps_h} single at {f}");
                        assert_eq!(fa[f], pa[f], "εh {eps_h} pair a at {f}");
                        assert_eq!(fb[f], pb[f], "εh {eps_h} pair b at {f}");
                    } else {
                        assert_eq!((part[f], pa[f], pb[f]), (0.0, 0.0, 0.0));
                    }
                }
            }
        }
    }
}
