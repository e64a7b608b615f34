//! Server maps by FFT (std only): binned counts convolved with K_λ in the
//! Fourier domain (docs/MATH.md §9.2 (e)).
//!
//! The counts c (zero-padded to a fast FFT length N per axis) are
//! transformed once; a kernel is applied by multiplying with its Fourier
//! transform F[K_λ] sampled at the DFT frequencies ω_k = 2πk/(NΔ) and
//! transforming back. By Poisson summation this is the circular
//! convolution with the periodised kernel Σ_m K_λ(z + mP), P = NΔ, up to
//! the frequencies beyond Nyquist. [`FftMapper::estimate`] returns the map
//! with per-cell standard errors; [`FftMapper::discretisation`] gives a
//! certified bound of the discretisation error (not stated with the map:
//! about 30x the observed error):
//!
//! * binning: a location moved to its bin centre (at most |Δ|/2 away)
//!   changes K_λ(t - x̃) by at most Lip(K_λ)·|Δ|/2;
//! * the sinc correction (dividing out the average smoothing of nearest-bin
//!   rounding, which removes the leading O(Δ²) bias for smooth densities)
//!   changes every kernel sample by at most Σ_band |F||1/Πsinc - 1|/P^d;
//! * truncation: a location beyond the bins is at least (margin + 1/2)Δ
//!   from every map point and is dropped: at most T((margin + ½)Δ) each;
//! * wrap-around: the periodic images are at least qP - D away (D the
//!   largest map-to-bin offset), bounded by T with the number of images;
//! * aliasing: the in-band sum misses Σ_{|ω_k| > π/Δ} |F[K_λ](ω_k)|/P^d,
//!   bounded by an integral of the (decreasing) transform.

use super::bins::BinnedCounts;
use super::kernel::{simpson, DebiasKernel};
use crate::error::{Error, Result};
use rustfft::num_complex::Complex64;
use rustfft::{Fft, FftPlanner};
use std::f64::consts::PI;
use std::sync::Arc;
use std::vec::Vec;

/// A kernel map's rounding error read from the per-bin moments of the
/// reports' offsets ([`FftMapper::rounding_from_moments`], branch
/// moment24), per map point (row-major like the grid):
///
/// ```text
/// values_j = R̂(t_j),  noise_j = (1/n²) Σ_b n_b Σ_a σ_a² (∂_a K)²(t_j − c_b),
/// spread_j = (1/n²) Σ_b n_b Σ_a (Δ_a²/12) (∂_a K)²(t_j − c_b).
/// ```
///
/// ```
/// let r = geopriv::map::MomentRounding { values: vec![1e-6], noise: vec![0.0], spread: vec![0.0] };
/// assert_eq!(r.values.len(), r.noise.len());
/// ```
#[derive(Clone, Debug, PartialEq)]
pub struct MomentRounding {
    /// R̂ per map point: the binned map minus the exact locations' map.
    pub values: Vec<f64>,
    /// The part of R̂² the reports' own noise adds, per map point.
    pub noise: Vec<f64>,
    /// The independent-rounding spread the variance formula charges, per
    /// map point (over n: a variance of the map).
    pub spread: Vec<f64>,
}

/// How far (in bandwidths, along each axis) [`FftMapper::observed_effective_reports`]
/// reads the reports: a report 5h away weighs e^{−25} of one at the cell
/// in Σ g², e^{−50} in Σ g⁴.
const OBSERVED_REACH: f64 = 5.0;

/// A map estimate: one value per map point (row-major like the grid) and
/// its standard error.
#[derive(Clone, Debug, PartialEq)]
pub struct MapEstimate {
    /// Estimated mean of f_j over the devices, per map point j.
    pub values: Vec<f64>,
    /// Standard error of each interval (docs/MATH.md §9.7): centre ±
    /// 1.96·SE is a 95% interval for the true map (λ = 1) or for the map
    /// smoothed by the residual noise (λ < 1), centred on the value; for
    /// the EM map it is the λ = 1 map's standard error, its interval for
    /// the true map centred on [`interval_centres`](Self::interval_centres)
    /// (branch emk1: EM's bias is not pinned by the reports, the unbiased
    /// map's interval is what they support about the true map).
    pub standard_errors: Vec<f64>,
    /// The centres of the 95% intervals where they are not the values:
    /// for the EM map the λ = 1 map's values (its interval for the true
    /// map is interval_centres ± 1.96·standard_errors, docs/MATH.md §9.7),
    /// and likewise for a λ < 1 map the planner picked (branch pubint,
    /// `MapAggregator::blurred_estimate`); None for a kernel map asked for
    /// by its λ (the interval is values ± 1.96·SE, for the true map at
    /// λ = 1, for the residual-noise-smoothed map at λ < 1).
    ///
    /// ```
    /// # fn demo(m: &geopriv::map::MapEstimate) {
    /// let centres = m.interval_centres.as_deref().unwrap_or(&m.values);
    /// let lower: Vec<f64> =
    ///     centres.iter().zip(&m.standard_errors).map(|(c, s)| c - 1.96 * s).collect();
    /// # let _ = lower;
    /// # }
    /// ```
    pub interval_centres: Option<Vec<f64>>,
    /// Devices (reports) used.
    pub n: u64,
    /// λ of the kernel (0 plain, 1 fully debiased).
    pub lambda: f64,
    /// Bound on |value - exact estimator| from binning, truncation,
    /// wrap-around and aliasing, or NaN: not stated. The maps of this
    /// crate state none (the certified bound,
    /// [`FftMapper::discretisation`], is about 30x the observed error,
    /// docs/MATH.md §9.3); 0 for maps without binning.
    pub discretisation_bound: f64,
    /// The EM deconvolution map (docs/MATH.md §9.6): its held-out
    /// iteration count (`lambda` is then NaN); None for the kernel maps.
    pub em_iterations: Option<usize>,
    /// Per map point, the effective number of reports read from the
    /// reports alone, m̂_j = (Σ_i Y_ij²)² / Σ_i Y_ij⁴ with Y_ij the
    /// Gaussian kernel of bandwidth h at t_j − x̃_i
    /// ([`FftMapper::observed_effective_reports`], docs/MATH.md §9.7
    /// addendum "sparse24"): cells with m̂_j < m* =
    /// [`EFFECTIVE_REPORTS_THRESHOLD`](super::EFFECTIVE_REPORTS_THRESHOLD)
    /// (ln 20) are carried by a handful of reports, and their standard
    /// error is widened by ln 20 reports' worth of kernel weight
    /// ([`thin_cell_variance`](super::thin_cell_variance)). None for maps
    /// without bins (districts, ladders); [`thin_cells`](Self::thin_cells)
    /// counts the cells below m*.
    pub effective_reports: Option<Vec<f64>>,
}

impl MapEstimate {
    /// The number of thin cells (docs/MATH.md §9.7 addendum "sparse24"):
    /// #{ j : m̂_j < m* } over [`effective_reports`](Self::effective_reports),
    /// m* = [`EFFECTIVE_REPORTS_THRESHOLD`](super::EFFECTIVE_REPORTS_THRESHOLD)
    /// = ln 20, the cells whose standard error carries ln 20 reports' worth
    /// of kernel weight. None for maps without bins.
    ///
    /// ```
    /// # fn demo(m: &geopriv::map::MapEstimate) {
    /// if let Some(thin) = m.thin_cells() {
    ///     println!("{thin} cells are carried by fewer than ln 20 reports");
    /// }
    /// # }
    /// ```
    pub fn thin_cells(&self) -> Option<usize> {
        self.effective_reports
            .as_ref()
            .map(|m| m.iter().filter(|&&x| is_thin_cell(x)).count())
    }
}

/// A cell carried by fewer than m* = ln 20 effective reports (NaN is not).
fn is_thin_cell(m_hat: f64) -> bool {
    m_hat < super::intervals::EFFECTIVE_REPORTS_THRESHOLD
}

/// The error-bound parts of an FFT map (see the module docs).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct DiscretisationBound {
    /// Lip(K_λ)·|Δ|/2.
    pub binning: f64,
    /// sup of the change made by the sinc correction:
    /// Σ_band |F(ω_k)| |1/Π sinc - 1| / P^d.
    pub sinc_correction: f64,
    /// Fraction outside × T(truncation radius).
    pub truncation: f64,
    /// Periodic images.
    pub wrap: f64,
    /// Frequencies beyond Nyquist.
    pub aliasing: f64,
}

impl DiscretisationBound {
    /// Sum of the parts.
    pub fn total(&self) -> f64 {
        self.binning + self.sinc_correction + self.truncation + self.wrap + self.aliasing
    }
}

/// Lattice-sized complex fields kept per thread for reuse (at most this
/// many).
const MAX_SPARE_FIELDS: usize = 3;

std::thread_local! {
    static SPARE_FIELDS: core::cell::RefCell<Vec<Vec<Complex64>>> =
        const { core::cell::RefCell::new(Vec::new()) };
}

/// A complex field on the FFT lattice whose buffer goes back to its
/// thread's spares when dropped ([`MAX_SPARE_FIELDS`] of them), for the
/// next [`lattice_field`](FftMapper::lattice_field): the planner makes
/// about 6 fields of 12 MB per λ at εh 0.3 (864² lattice), and each fresh
/// one was 2,900 pages to fault in (a tenth of the process's CPU was page
/// faults; BENCHMARKS.md, "Branch speed07"). Every element is written
/// before it is read (a spare is cleared and filled by pushes), so the
/// numbers are those of a fresh vector.
pub(crate) struct Field(Vec<Complex64>);

impl Field {
    /// An empty field, on a spare buffer if this thread has one.
    fn spare() -> Field {
        let v = SPARE_FIELDS
            .try_with(|s| s.try_borrow_mut().ok().and_then(|mut s| s.pop()))
            .ok()
            .flatten()
            .unwrap_or_default();
        let mut f = Field(v);
        f.0.clear();
        f
    }
}

impl core::ops::Deref for Field {
    type Target = Vec<Complex64>;
    fn deref(&self) -> &Vec<Complex64> {
        &self.0
    }
}

impl core::ops::DerefMut for Field {
    fn deref_mut(&mut self) -> &mut Vec<Complex64> {
        &mut self.0
    }
}

impl Drop for Field {
    fn drop(&mut self) {
        let v = core::mem::take(&mut self.0);
        if v.capacity() == 0 {
            return;
        }
        // During the thread's teardown the buffer is simply freed.
        let _ = SPARE_FIELDS.try_with(|s| {
            if let Ok(mut s) = s.try_borrow_mut() {
                if s.len() < MAX_SPARE_FIELDS {
                    s.push(v);
                }
            }
        });
    }
}

/// 2-D discrete Fourier transform, in place, of a row-major n[0] × n[1]
/// array: X[k0, k1] = Σ_{j0, j1} x[j0, j1] e^{∓2πi (j0 k0 / n0 + j1 k1 / n1)}
/// (unnormalised; the sign is the plans'), rows along axis 1, then the
/// columns along axis 0; axes of length 1 are skipped. Shared by the
/// kernel maps ([`FftMapper`]) and EM's convolutions (`deconv.rs`).
///
/// The columns are transformed in strips of [`COLUMN_STRIP`]: a strip is
/// gathered into a small contiguous buffer (one column a row, in the
/// cache), transformed there and scattered back. The same 1-D transforms
/// of the same columns as transposing the whole array, transforming its
/// rows and transposing back (the same bits), without the second n0·n1
/// buffer and with one pass over the array instead of four.
pub(crate) fn fft2_in_place(plans: &[Arc<dyn Fft<f64>>; 2], n: [usize; 2], data: &mut [Complex64]) {
    let [n0, n1] = n;
    if n1 > 1 {
        plans[1].process(data);
    }
    if n0 > 1 {
        if n1 == 1 {
            plans[0].process(data);
        } else {
            let zero = Complex64::new(0.0, 0.0);
            let mut scratch = vec![zero; plans[0].get_inplace_scratch_len()];
            let mut strip = vec![zero; COLUMN_STRIP.min(n1) * n0];
            for c0 in (0..n1).step_by(COLUMN_STRIP) {
                let w = COLUMN_STRIP.min(n1 - c0);
                let strip = &mut strip[..w * n0];
                for (r, row) in data.chunks_exact(n1).enumerate() {
                    for (c, &v) in row[c0..c0 + w].iter().enumerate() {
                        strip[c * n0 + r] = v;
                    }
                }
                plans[0].process_with_scratch(strip, &mut scratch);
                for (r, row) in data.chunks_exact_mut(n1).enumerate() {
                    for (c, v) in row[c0..c0 + w].iter_mut().enumerate() {
                        *v = strip[c * n0 + r];
                    }
                }
            }
        }
    }
}

/// [`fft2_in_place`] read only on the columns `cols` (ascending, each
/// < n[1]): every row along axis 1, then only the listed columns along
/// axis 0, in strips of [`COLUMN_STRIP`] as there. A column's 1-D
/// transform does not depend on the others, so the listed columns hold the
/// bits of the full transform; the other columns are left after the row
/// pass (not the transform: the caller must not read them). The kernel
/// maps read an inverse transform only on the 61 map columns of an 864²
/// lattice at εh 0.3, so the column pass shrinks 14-fold (branch speed05,
/// as EM's `convolve_masked` does for its window).
pub(crate) fn fft2_in_place_columns(
    plans: &[Arc<dyn Fft<f64>>; 2],
    n: [usize; 2],
    data: &mut [Complex64],
    cols: &[usize],
) {
    let [n0, n1] = n;
    if n1 == 1 || n0 == 1 {
        // One axis: the full transform is one pass.
        fft2_in_place(plans, n, data);
        return;
    }
    plans[1].process(data);
    let zero = Complex64::new(0.0, 0.0);
    let mut scratch = vec![zero; plans[0].get_inplace_scratch_len()];
    let mut strip = vec![zero; COLUMN_STRIP.min(cols.len()) * n0];
    for group in cols.chunks(COLUMN_STRIP) {
        let strip = &mut strip[..group.len() * n0];
        for (r, row) in data.chunks_exact(n1).enumerate() {
            for (c, &col) in group.iter().enumerate() {
                strip[c * n0 + r] = row[col];
            }
        }
        plans[0].process_with_scratch(strip, &mut scratch);
        for (r, row) in data.chunks_exact_mut(n1).enumerate() {
            for (c, &col) in group.iter().enumerate() {
                row[col] = strip[c * n0 + r];
            }
        }
    }
}

/// Columns per strip in [`fft2_in_place`]: 16 complex numbers (256 bytes,
/// four cache lines) of each row at a time; a strip of 16 columns of 864
/// is 221 kB.
const COLUMN_STRIP: usize = 16;

/// Two real fields as one complex field a + i b: a convolution with a real
/// kernel c then gives a ∗ c and b ∗ c as its real and imaginary parts.
pub(crate) fn complex_pair(a: &[f64], b: &[f64]) -> Vec<Complex64> {
    a.iter()
        .zip(b)
        .map(|(&x, &y)| Complex64::new(x, y))
        .collect()
}

/// Smallest 2^a 3^b 5^c >= n.
pub(crate) fn fast_len(n: usize) -> usize {
    let mut m = n.max(1);
    loop {
        let mut r = m;
        for p in [2, 3, 5] {
            while r % p == 0 {
                r /= p;
            }
        }
        if r == 1 {
            return m;
        }
        m += 1;
    }
}

/// The share of a kernel's peak that the periodic images of the bins may
/// add to a map point (docs/MATH.md §9.3): 1e-14, below the FFT's
/// round-off floor 64·ε_mach·log2(N)·max|K| of the standard errors
/// (>= 1.4e-14 of the peak), so the wrap-around cannot show as a miss.
pub const WRAP_GUARD_SHARE: f64 = 1e-14;

/// R_w = max over λ ∈ {0, ¼, ½, ¾, 1} of the radius beyond which the
/// Gaussian part of K_λ is below [`WRAP_GUARD_SHARE`] of its peak
/// ([`DebiasKernel::gaussian_part_radius`]; docs/MATH.md §9.3).
pub fn wrap_guard_radius(dim: usize, bandwidth: f64, epsilon: f64) -> Result<f64> {
    let mut r: f64 = 0.0;
    for i in 0..=4 {
        let k = DebiasKernel::new(dim, bandwidth, epsilon, i as f64 / 4.0)?;
        r = r.max(k.gaussian_part_radius(WRAP_GUARD_SHARE));
    }
    Ok(r)
}

/// One Hermitian pair of DFT indices ([`FftMapper::hermitian_pairs`]):
/// flat indices `f` <= `c`, their (i0, i1) indices and the sinc
/// corrections at each.
struct HermitianPair {
    f: usize,
    c: usize,
    at_f: [usize; 2],
    at_c: [usize; 2],
    corr_f: f64,
    corr_c: f64,
}

/// The two real fields A, B of a transform packed as A + iB, at a
/// frequency whose value is `a` and whose partner's is `p`:
/// F[A] = (a + p̄)/2, F[B] = (a − p̄)/(2i).
fn hermitian_split(a: Complex64, p: Complex64) -> (Complex64, Complex64) {
    (
        (a + p.conj()) * 0.5,
        (a - p.conj()) * Complex64::new(0.0, -0.5),
    )
}

/// One kernel map as the planner reads it ([`FftMapper::planner_map_of`]),
/// one value per map point.
pub(crate) struct PlannerMap {
    /// The map (1/n)Σ_i K_λ(t_j − x̃_i).
    pub(crate) mean: Vec<f64>,
    /// The conditional variances v̂_j of
    /// [`FftMapper::conditional_variances`], with its 1% floor.
    pub(crate) variances: Vec<f64>,
    /// The unconditional spread ((1/n)Σ_i K_λ²(t_j − x̃_i) − map_j²) ∨ 0.
    pub(crate) spread: Vec<f64>,
    /// With K_1's samples given: (1/n)Σ_i (K_λ − K_1)²(t_j − x̃_i).
    pub(crate) diff_map: Option<Vec<f64>>,
}

/// The sub-bin lines' rounding variance per map point (or none) and the
/// bits of the (ε, h) it was computed for.
type KeyedLines = ((u64, u64), Option<Vec<f64>>);

/// The FFT of one set of binned counts, ready to apply kernels.
pub struct FftMapper {
    counts: BinnedCounts,
    n: [usize; 2],
    hat: Vec<Complex64>,
    /// Per used axis: the period N_a Δ_a, and per DFT index the signed
    /// frequency ω_a and the rounding correction (ω_aΔ_a/2)/sin(ω_aΔ_a/2).
    axes: Vec<(f64, Vec<f64>, Vec<f64>)>,
    fwd: [Arc<dyn Fft<f64>>; 2],
    inv: [Arc<dyn Fft<f64>>; 2],
    /// φ_N at every flat DFT index for the first (ε, d) a variance asked
    /// for, keyed by their bits ([`noise_transfer`](Self::noise_transfer)).
    phi_n: std::sync::OnceLock<((u64, u64), Vec<f64>)>,
    /// The sub-bin lines' rounding variance per map point for the first
    /// (ε, h) asked (`planner::coherent_line_variance`: the same for every
    /// λ, so the maps of one mapper share it; branch round16).
    lines: std::sync::OnceLock<KeyedLines>,
    /// The five moment fields' transforms summed with their derivative
    /// factors (`rounding_from_moments`): kernel-free, so made once per
    /// mapper and reused for every λ (the planner asks for six).
    moment_spectrum: std::sync::OnceLock<Vec<Complex64>>,
}

impl core::fmt::Debug for FftMapper {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        write!(f, "FftMapper({}x{})", self.n[0], self.n[1])
    }
}

/// F[K_λ](|ω|) on an [`FftMapper`]'s DFT lattice, kept as its quarter
/// 0 <= i_a <= N_a/2: |ω| is the same at (±i0, ±i1) (the sign mirrors of
/// [`FftMapper::radial`]), so the quarter holds every value, in a quarter
/// of the memory (the planner holds several at once; branch speed04).
pub(crate) struct KernelTransform {
    q: Vec<f64>,
    n: [usize; 2],
}

impl KernelTransform {
    /// The value at DFT index (i0, i1): the quarter's at (min(i_a, N_a − i_a)).
    fn at(&self, [i, k]: [usize; 2]) -> f64 {
        let [n0, n1] = self.n;
        self.q[i.min(n0 - i) * (n1 / 2 + 1) + k.min(n1 - k)]
    }

    /// F[K_λ] − F[K_μ] at DFT index (i0, i1), `other` of the same lattice.
    pub(crate) fn minus_at(&self, other: &Self, ik: [usize; 2]) -> f64 {
        self.at(ik) - other.at(ik)
    }
}

impl FftMapper {
    /// Transform the counts (at least one location needed).
    ///
    /// The FFT length is the smallest fast length at least the bins per
    /// axis: the periodic images of the bins may then be as close as
    /// (margin + 1)·Δ to the map. For kernel maps use
    /// [`with_wrap_guard`](Self::with_wrap_guard) (what
    /// [`MapAggregator::mapper`](super::MapAggregator::mapper) does).
    pub fn new(counts: BinnedCounts) -> Result<Self> {
        let b = counts.spec().bins();
        Self::with_len(counts, [fast_len(b[0]), fast_len(b[1])])
    }

    /// [`new`](Self::new) with a period long enough that no map point is
    /// within R_w of a periodic image of any bin (docs/MATH.md §9.3, the
    /// wrap-around): per axis
    ///
    /// ```text
    /// N_a = fast_len( max( B_a, B_a − 1 − M + ⌈R_w/Δ_a⌉ ) ),
    /// R_w = max_{λ ∈ {0, ¼, ½, ¾, 1}} R_P(WRAP_GUARD_SHARE),
    /// ```
    ///
    /// B_a the bins, M the margin, R_P the radius of the Gaussian part of
    /// K_λ ([`DebiasKernel::gaussian_part_radius`]) for the grid's
    /// bandwidth h and per-device ε. The nearest image of a bin is
    /// (N − B + 1 + M)Δ >= R_w from every map point, so what the images add
    /// to a map is below [`WRAP_GUARD_SHARE`] of the kernel's peak, under
    /// the FFT's round-off floor of the standard errors. If the guarded
    /// lengths would pass 2^26 points in all, the FFT is as long as the
    /// bins (as [`new`](Self::new)). Before, with
    /// N = fast_len(B), the images of a coast's land were 4.2h from the far
    /// edge of its sea at εh = 10 and put 1e-6 of the map's peak there.
    pub fn with_wrap_guard(counts: BinnedCounts, bandwidth: f64, epsilon: f64) -> Result<Self> {
        let spec = counts.spec();
        let guard = wrap_guard_radius(spec.dim(), bandwidth, epsilon)?;
        let b = spec.bins();
        let m = spec.margin();
        let mut n = [1usize; 2];
        for (a, na) in n.iter_mut().enumerate().take(spec.dim()) {
            let reach = libm::ceil(guard / spec.delta()[a]).min(1e9) as usize;
            let need = (b[a] - 1).saturating_sub(m).saturating_add(reach);
            *na = b[a].max(need);
        }
        // Beyond 2^26 points (the bins' own limit, `BinSpec::new`) the
        // guard is dropped rather than the memory spent: an FFT as long as
        // the bins, as [`new`](Self::new).
        if n[0].saturating_mul(n[1]) > 1 << 26 {
            n = b;
        }
        Self::with_len(counts, [fast_len(n[0]), fast_len(n[1])])
    }

    fn with_len(counts: BinnedCounts, n: [usize; 2]) -> Result<Self> {
        if counts.total() == 0 {
            return Err(Error::InvalidParameter {
                name: "reports",
                value: 0.0,
                requirement: "at least one accepted report",
            });
        }
        let spec = counts.spec();
        let b = spec.bins();
        let n = [
            n[0].max(b[0]),
            if spec.dim() == 1 { 1 } else { n[1].max(b[1]) },
        ];
        let mut planner = FftPlanner::new();
        let fwd = [
            planner.plan_fft_forward(n[0]),
            planner.plan_fft_forward(n[1]),
        ];
        let inv = [
            planner.plan_fft_inverse(n[0]),
            planner.plan_fft_inverse(n[1]),
        ];
        let mut hat = vec![Complex64::new(0.0, 0.0); n[0] * n[1]];
        for i in 0..b[0] {
            for k in 0..b[1] {
                hat[i * n[1] + k].re = counts.counts()[i * b[1] + k] as f64;
            }
        }
        let axes = (0..spec.dim())
            .map(|a| {
                let pa = n[a] as f64 * spec.delta()[a];
                let len = n[a] as i64;
                let (mut ws, mut cs) = (Vec::new(), Vec::new());
                for k in 0..len {
                    let ks = if k > len / 2 { k - len } else { k };
                    let w = 2.0 * PI * ks as f64 / pa;
                    let x = 0.5 * w * spec.delta()[a];
                    ws.push(w);
                    cs.push(if x != 0.0 { x / x.sin() } else { 1.0 });
                }
                (pa, ws, cs)
            })
            .collect();
        let mut me = Self {
            counts,
            n,
            hat: Vec::new(),
            axes,
            fwd,
            inv,
            phi_n: std::sync::OnceLock::new(),
            lines: std::sync::OnceLock::new(),
            moment_spectrum: std::sync::OnceLock::new(),
        };
        me.fft2(&mut hat, true);
        me.hat = hat;
        Ok(me)
    }

    /// FFT lengths per axis.
    pub fn fft_len(&self) -> [usize; 2] {
        self.n
    }

    /// The binned counts.
    pub fn counts(&self) -> &BinnedCounts {
        &self.counts
    }

    fn fft2(&self, data: &mut [Complex64], forward: bool) {
        fft2_in_place(if forward { &self.fwd } else { &self.inv }, self.n, data);
    }

    /// The inverse [`fft2`](Self::fft2) valid only on the lattice columns
    /// `cols` ([`fft2_in_place_columns`]: the same bits there).
    fn inverse_on_columns(&self, data: &mut [Complex64], cols: &[usize]) {
        fft2_in_place_columns(&self.inv, self.n, data, cols);
    }

    /// The lattice columns of the map points (ascending): the only ones
    /// [`at_map_points`](Self::at_map_points) reads.
    fn map_columns(&self) -> Vec<usize> {
        let spec = self.counts.spec();
        let b1 = spec.bins()[1];
        let mut cols: Vec<usize> = (0..spec.map_points()[1])
            .map(|j| spec.map_bin(j) % b1)
            .collect();
        cols.sort_unstable();
        cols.dedup();
        cols
    }

    /// Physical periods P_a = N_a Δ_a of the used axes.
    fn periods(&self) -> Vec<f64> {
        self.axes.iter().map(|a| a.0).collect()
    }

    /// (|ω|, 1/Π_a sinc(ω_a Δ_a/2)) at flat DFT index: the frequency and
    /// the correction for the smoothing by nearest-bin rounding.
    fn omega(&self, flat: usize) -> (f64, f64) {
        let idx = [flat / self.n[1], flat % self.n[1]];
        let mut w2 = 0.0;
        let mut corr = 1.0;
        for (a, (_, ws, cs)) in self.axes.iter().enumerate() {
            let w = ws[idx[a]];
            w2 += w * w;
            corr *= cs[idx[a]];
        }
        (w2.sqrt(), corr)
    }

    /// g(|ω|) at every flat DFT index, with g evaluated once per four
    /// indices: |ω| depends on the per-axis ω_a only through ω_a², and
    /// ω_a(N_a − k) = −ω_a(k) exactly (2π·(−k)/P is the negation of
    /// 2π·k/P in floating point), so the sign mirrors (i, k), (−i, k),
    /// (i, −k), (−i, −k) have bit-identical |ω| and g(|ω|). The same
    /// numbers as `g(self.omega(f).0)` at each f, at a quarter of the
    /// evaluations (exp, log1p and pow of the kernel transforms and of
    /// φ_N were 17% of the CPU of a planned map at εh = 0.3).
    fn radial<G: Fn(f64) -> f64>(&self, g: G) -> Vec<f64> {
        let [n0, n1] = self.n;
        let mut out = vec![0.0; n0 * n1];
        for i in 0..=n0 / 2 {
            for k in 0..=n1 / 2 {
                let v = g(self.omega(i * n1 + k).0);
                for ii in [i, (n0 - i) % n0] {
                    for kk in [k, (n1 - k) % n1] {
                        out[ii * n1 + kk] = v;
                    }
                }
            }
        }
        out
    }

    /// `f(flat, [i0, i1], c, ω_0, ω_1)` at every DFT index in order, c the
    /// correction 1/Π_a sinc(ω_aΔ_a/2) of [`omega`](Self::omega) (the
    /// same product, 1·c_0·c_1) and ω_a the signed frequencies of
    /// [`omega_axis`](Self::omega_axis) (ω_1 = 0 on one axis), row by row
    /// without a division per index (`omega` was 3.4% of the samples at
    /// εh 0.3; branch speed04).
    fn lattice_field(&self, f: impl Fn(usize, [usize; 2], f64, f64, f64) -> Complex64) -> Field {
        let [n0, n1] = self.n;
        let (_, w0, c0) = &self.axes[0];
        let mut out = Field::spare();
        out.reserve(n0 * n1);
        match self.axes.get(1) {
            Some((_, w1, c1)) => {
                for i in 0..n0 {
                    let row = i * n1;
                    for k in 0..n1 {
                        out.push(f(row + k, [i, k], 1.0 * c0[i] * c1[k], w0[i], w1[k]));
                    }
                }
            }
            None => {
                for i in 0..n0 * n1 {
                    out.push(f(i, [i, 0], 1.0 * c0[i], w0[i], 0.0));
                }
            }
        }
        out
    }

    /// ω_a (signed) of axis `a` at flat DFT index.
    fn omega_axis(&self, flat: usize, a: usize) -> f64 {
        let idx = [flat / self.n[1], flat % self.n[1]];
        self.axes[a].1[idx[a]]
    }

    /// Samples of the periodised kernel Σ_m K_λ(z + mP) on the bin lattice
    /// (band-limited), z = (i0 Δ0, i1 Δ1) with wrapped indices, with the
    /// nearest-bin smoothing divided out (F multiplied by 1/Π sinc(ω_aΔ_a/2):
    /// rounding to the nearest bin averages a smooth density over a box of
    /// side Δ, whose transform is that product of sincs).
    pub fn spatial_kernel(&self, kernel: &DebiasKernel) -> Vec<f64> {
        self.spatial_kernel_of(&self.kernel_transform(kernel))
    }

    /// F[K_λ](|ω|) at every flat DFT index ([`radial`](Self::radial)): the
    /// transform that [`spatial_kernel`](Self::spatial_kernel), the
    /// variances and [`correlation_sums`](Self::correlation_sums) each
    /// evaluated afresh; a caller that needs several of them for one
    /// kernel computes it once and passes it to the `_of` forms (the same
    /// numbers: the same calls on the same |ω|; branch speed04).
    pub(crate) fn kernel_transform(&self, kernel: &DebiasKernel) -> KernelTransform {
        let [n0, n1] = self.n;
        let h1 = n1 / 2 + 1;
        let mut q = Vec::with_capacity((n0 / 2 + 1) * h1);
        for i in 0..=n0 / 2 {
            for k in 0..=n1 / 2 {
                q.push(kernel.fourier(self.omega(i * n1 + k).0));
            }
        }
        KernelTransform { q, n: self.n }
    }

    /// [`spatial_kernel`](Self::spatial_kernel) from the kernel's
    /// transform `ft` ([`kernel_transform`](Self::kernel_transform)).
    pub(crate) fn spatial_kernel_of(&self, ft: &KernelTransform) -> Vec<f64> {
        let vol: f64 = self.periods().iter().product();
        let mut g =
            self.lattice_field(|_, ik, corr, _, _| Complex64::new(ft.at(ik) * corr / vol, 0.0));
        self.fft2(&mut g, false);
        g.iter().map(|c| c.re).collect()
    }

    /// (1/n) Σ_bins count · s(t_j - c) at every map point, for a spatial
    /// kernel s on the bin lattice (as from [`spatial_kernel`](Self::spatial_kernel)).
    pub fn apply_spatial(&self, s: &[f64]) -> Vec<f64> {
        let mut g = Field::spare();
        g.extend(s.iter().map(|&v| Complex64::new(v, 0.0)));
        self.fft2(&mut g, true);
        for (a, b) in g.iter_mut().zip(&self.hat) {
            *a *= b;
        }
        self.inverse_on_columns(&mut g, &self.map_columns());
        let norm = 1.0 / (self.n[0] * self.n[1]) as f64 / self.counts.total() as f64;
        self.at_map_points(&g, norm)
    }

    /// [`apply_spatial`](Self::apply_spatial) of two real kernels in one
    /// complex transform: the counts are real, so (a + i b) ∗ c has the two
    /// maps a ∗ c and b ∗ c as its real and imaginary parts (4 FFTs instead
    /// of 6 for the planner's kernel maps; rounding differs from two
    /// separate calls by a few ulps).
    pub fn apply_spatial_pair(&self, a: &[f64], b: &[f64]) -> (Vec<f64>, Vec<f64>) {
        let mut g = complex_pair(a, b);
        self.fft2(&mut g, true);
        for (a, b) in g.iter_mut().zip(&self.hat) {
            *a *= b;
        }
        self.inverse_on_columns(&mut g, &self.map_columns());
        let norm = 1.0 / (self.n[0] * self.n[1]) as f64 / self.counts.total() as f64;
        let re = self.at_map_points(&g, norm);
        for v in &mut g {
            *v = Complex64::new(v.im, 0.0);
        }
        (re, self.at_map_points(&g, norm))
    }

    /// The kernel map's rounding error per map point from the per-bin
    /// moments of the reports' offsets ([`BinnedCounts::moments`]; branch
    /// moment24, docs/MATH.md §9.4 addendum "moments"), and the part of
    /// its square the reports' own noise adds ([`MomentRounding`]): `None`
    /// without moments.
    ///
    /// Per report, K(p − c − u) to second order in the offset u = y − c
    /// from its bin centre c, against the FFT's kernel K − Σ_a (Δ_a²/24)
    /// ∂²_a K (the sinc correction), give the binned map minus the kernel
    /// map of the exact report locations:
    ///
    /// ```text
    /// R̂(p) = (1/n) Σ_b [ M_b·∇K − ½ Σ_a W_b,a ∂²_a K − S_b,01 ∂_0∂_1 K ](p − c_b),
    /// W_b,a = S_b,aa + n_b Δ_a²/12,
    /// ```
    ///
    /// M_b = Σ u, S_b = Σ u uᵀ over the bin's reports; one forward FFT per
    /// moment field and one inverse (transforms i ω_a F, −ω_a ω_b F of
    /// F = F[K_λ]·corr). The noise part per point is
    /// (1/n²) Σ_b n_b Σ_a σ_a² (∂_a K)²(p − c_b), σ_a² = min(3/ε², Δ_a²/12)
    /// (the noise's share of an offset's variance: the reports' noise
    /// enters R̂ and, with the opposite sign, the exact map's own error),
    /// and the spread (1/n²) Σ_b n_b Σ_a (Δ_a²/12)(∂_a K)² that the
    /// variance formula adds for rounding taken as independent per report
    /// ([`conditional_variances`](Self::conditional_variances)): the
    /// moments replace it.
    ///
    /// ```
    /// use geopriv::map::{BinSpec, BinnedCounts, DebiasKernel, FftMapper, KdeGrid};
    /// let grid = KdeGrid::square(2000.0, 11)?;
    /// let eps = 1.0; // 1 per metre: the noise is below a bin
    /// let spec = BinSpec::for_estimation(&grid, eps, 1 << 20)?;
    /// let mut c = BinnedCounts::new(spec.clone());
    /// for _ in 0..50 {
    ///     let b = spec.bin_centre(spec.bin_of(&[1000.0, 1000.0]).unwrap());
    ///     c.add(&[b[0] + 0.3 * spec.delta()[0], b[1]])?; // 50 devices 0.3 bin off
    /// }
    /// let m = FftMapper::with_wrap_guard(c, grid.bandwidth(), eps)?;
    /// let k = DebiasKernel::new(2, grid.bandwidth(), eps, 1.0)?;
    /// let r = m.rounding_from_moments(&k).unwrap();
    /// assert_eq!(r.values.len(), grid.len());
    /// assert!(r.values.iter().any(|v| v.abs() > 0.0) && r.noise.iter().all(|v| *v >= 0.0));
    /// # Ok::<(), geopriv::Error>(())
    /// ```
    pub fn rounding_from_moments(&self, kernel: &DebiasKernel) -> Option<MomentRounding> {
        let moments = self.counts.moments()?;
        let spec = self.counts.spec();
        let b = spec.bins();
        let delta = spec.delta();
        let two_axes = self.axes.len() > 1;
        let d1 = if two_axes { delta[1] } else { 0.0 };
        let unit = 1.0 / (1u64 << super::bins::MOMENT_OFFSET_BITS) as f64;
        let n1 = self.n[1];
        let vol: f64 = self.periods().iter().product();
        let cells = (self.n[0] * self.n[1]) as f64;
        let ft = self.kernel_transform(kernel);
        let zero = Complex64::new(0.0, 0.0);
        // The five moment fields in physical units (M_0, M_1, W_0, W_1,
        // S_01), each transformed and added with its derivative's factor;
        // no kernel in it, so once per mapper.
        let w = [delta[0] * delta[0] / 12.0, d1 * d1 / 12.0];
        let spectrum = self.moment_spectrum.get_or_init(|| {
            let mut acc = self.lattice_field(|_, _, _, _, _| zero);
            for field in 0..5 {
                let mut g = self.lattice_field(|_, _, _, _, _| zero);
                for i in 0..b[0] {
                    for k in 0..b[1] {
                        let at = i * b[1] + k;
                        let (m, c) = (&moments[at], self.counts.counts()[at] as f64);
                        let v = match field {
                            0 => m[0] as f64 * unit * delta[0],
                            1 => m[1] as f64 * unit * d1,
                            2 => m[2] as f64 * unit * unit * delta[0] * delta[0] + c * w[0],
                            3 => m[3] as f64 * unit * unit * d1 * d1 + c * w[1],
                            _ => m[4] as f64 * unit * unit * delta[0] * d1,
                        };
                        g[i * n1 + k] = Complex64::new(v, 0.0);
                    }
                }
                self.fft2(&mut g, true);
                let factor = self.lattice_field(|_, _, _, w0, w1| match field {
                    0 => Complex64::new(0.0, w0),
                    1 => Complex64::new(0.0, w1),
                    2 => Complex64::new(0.5 * w0 * w0, 0.0),
                    3 => Complex64::new(0.5 * w1 * w1, 0.0),
                    _ => Complex64::new(w0 * w1, 0.0),
                });
                for ((a, x), f) in acc.iter_mut().zip(g.iter()).zip(factor.iter()) {
                    *a += f * x;
                }
            }
            acc.to_vec()
        });
        let mut acc = Field::spare();
        acc.extend(spectrum.iter().copied());
        let scale = self
            .lattice_field(|_, ik, corr, _, _| Complex64::new(ft.at(ik) * corr / vol * cells, 0.0));
        for (a, x) in acc.iter_mut().zip(scale.iter()) {
            *a *= x.re;
        }
        drop(scale);
        let cols = self.map_columns();
        self.inverse_on_columns(&mut acc, &cols);
        let n = self.counts.total() as f64;
        let r = self.at_map_points(&acc, 1.0 / cells / n);
        drop(acc);
        // The noise part: the counts convolved with Σ_a σ_a² (∂_a K)².
        let eps = kernel.epsilon();
        let s2 = [(3.0 / (eps * eps)).min(w[0]), (3.0 / (eps * eps)).min(w[1])];
        // The noise part (real) and the independent-rounding spread of the
        // variance formula (imaginary) in one transform: the counts are
        // real, so the two convolutions are the parts of one.
        let (grad, _, _) = self.rounding_gradients(&ft, vol);
        let mut g = Field::spare();
        g.extend(grad.iter().map(|q| {
            let (a, b) = (q.re * q.re, q.im * q.im);
            Complex64::new(s2[0] * a + s2[1] * b, w[0] * a + w[1] * b)
        }));
        drop(grad);
        self.fft2(&mut g, true);
        for (a, h) in g.iter_mut().zip(&self.hat) {
            *a *= h;
        }
        self.inverse_on_columns(&mut g, &cols);
        let norm = 1.0 / cells / n / n;
        let noise = self
            .at_map_points(&g, norm)
            .into_iter()
            .map(|v| v.max(0.0))
            .collect();
        for v in g.iter_mut() {
            *v = Complex64::new(v.im, 0.0);
        }
        let spread = self
            .at_map_points(&g, norm)
            .into_iter()
            .map(|v| v.max(0.0))
            .collect();
        Some(MomentRounding {
            values: r,
            noise,
            spread,
        })
    }

    /// Correlation sums of the per-device terms g(t_j - x̃) of a radial
    /// kernel g given by its transform `fourier` (of |ω|), for devices
    /// spread locally uniformly: Cov(g(t_j - x̃), g(t_k - x̃)) is then
    /// proportional to the autocorrelation A = g ⋆ g at t_j - t_k, so the
    /// correlation is ρ(t_j - t_k) = A(t_j - t_k)/A(0). Returns
    /// ((1/m) Σ_jk |ρ|, (1/m) Σ_jk ρ²) over the m map points: 1 for
    /// independent cells, m for fully correlated ones (docs/MATH.md §9.4).
    /// A is computed on the bin lattice by FFT (F\[A\] = F\[g\]², with the
    /// same sinc correction as [`spatial_kernel`](Self::spatial_kernel)).
    pub fn correlation_sums<F: Fn(f64) -> f64>(&self, fourier: F) -> (f64, f64) {
        let ft = self.radial(fourier);
        let n1 = self.n[1];
        self.correlation_sums_at(|[i, k]| ft[i * n1 + k])
    }

    /// [`correlation_sums`](Self::correlation_sums) with g's transform
    /// given at each flat DFT index by `ft_at` (e.g. the difference of two
    /// [`kernel_transform`](Self::kernel_transform)s: the same numbers as
    /// the difference of the two `fourier` calls at the same |ω|).
    pub(crate) fn correlation_sums_at(&self, ft_at: impl Fn([usize; 2]) -> f64) -> (f64, f64) {
        let mut g = self.lattice_field(|_, ik, corr, _, _| {
            let v = ft_at(ik) * corr;
            Complex64::new(v * v, 0.0)
        });
        let spec = self.counts.spec();
        let mp = spec.map_points();
        let r = spec.refine();
        // Read at the lags (a·r, b·r) only (and at 0): their columns.
        let mut cols: Vec<usize> = (0..mp[1]).map(|b| (b * r) % self.n[1]).collect();
        cols.push(0);
        cols.sort_unstable();
        cols.dedup();
        self.inverse_on_columns(&mut g, &cols);
        let a0 = g[0].re;
        if a0.is_nan() || a0 <= 0.0 {
            return (1.0, 1.0);
        }
        let (mut s1, mut s2) = (0.0, 0.0);
        for a in 0..mp[0] {
            for b in 0..mp[1] {
                // A is even in each axis (radial g): ρ(±a, ±b) = ρ(a, b).
                let (i, k) = ((a * r) % self.n[0], (b * r) % self.n[1]);
                let rho = (g[i * self.n[1] + k].re / a0).clamp(-1.0, 1.0);
                let ways = |off: usize, len: usize| {
                    if off == 0 {
                        len as f64
                    } else {
                        2.0 * (len - off) as f64
                    }
                };
                let w = ways(a, mp[0]) * ways(b, mp[1]);
                s1 += w * rho.abs();
                s2 += w * rho * rho;
            }
        }
        let m = (mp[0] * mp[1]) as f64;
        (s1 / m, s2 / m)
    }

    /// The round-off of a map by FFT (docs/MATH.md §9.7): 64·ε_mach·log2(N)
    /// times the kernel's largest sample, N the FFT size. Where no location
    /// is near (an empty sea) the map and the truth are both 0 up to this,
    /// and a standard error below it would state an interval narrower than
    /// the arithmetic.
    fn round_off(&self, s: &[f64]) -> f64 {
        let big = s.iter().fold(0.0f64, |a, v| a.max(v.abs()));
        let len = (self.n[0] * self.n[1]) as f64;
        64.0 * f64::EPSILON * len.log2().max(1.0) * big
    }

    /// (1/n) Σ_bins count · B_λ(t_j - c), B_λ = E[K_λ(t - x̃) | x] (transform
    /// F\[K_λ\]·φ_N, φ_N(ω) = (1 + |ω|²/ε²)^{-(d+1)/2}): for counts of the
    /// true locations, the mean of the λ map given the devices, i.e. the
    /// target of its interval (the true map at λ = 1, the map smoothed by
    /// the residual noise φ_N^{1-λ} below; docs/MATH.md §9.7).
    pub fn smoothed_target(&self, kernel: &DebiasKernel) -> Vec<f64> {
        let d = kernel.dim() as f64;
        let eps = kernel.epsilon();
        let vol: f64 = self.periods().iter().product();
        let ft = self.radial(|w| {
            let phi = libm::pow(1.0 + (w / eps) * (w / eps), -(d + 1.0) / 2.0);
            kernel.fourier(w) * phi
        });
        let mut g: Vec<Complex64> = (0..self.hat.len())
            .map(|f| {
                let (_, corr) = self.omega(f);
                Complex64::new(ft[f] * corr / vol, 0.0)
            })
            .collect();
        drop(ft);
        self.fft2(&mut g, false);
        let s: Vec<f64> = g.into_iter().map(|c| c.re).collect();
        self.apply_spatial(&s)
    }

    /// Values of an inverse-transformed field at the map points.
    fn at_map_points(&self, field: &[Complex64], norm: f64) -> Vec<f64> {
        let spec = self.counts.spec();
        let b1 = spec.bins()[1];
        let m = spec.map_points();
        (0..m[0] * m[1])
            .map(|j| {
                let flat = spec.map_bin(j);
                let (i, k) = (flat / b1, flat % b1);
                field[i * self.n[1] + k].re * norm
            })
            .collect()
    }

    /// The map for K_λ (λ from `kernel`), with standard errors given the
    /// devices: SE_j = max(√(max(v̂_j, u_j/4)/n), round-off), v̂ the
    /// sample variance of [`conditional_variances`](Self::conditional_variances)
    /// smoothed by a Gaussian of sd `VARIANCE_SMOOTHING`/ε (branch cover23,
    /// [`super::intervals::VARIANCE_SMOOTHING`]) and u the noise-law plug-in
    /// ([`variances_with_plug_in`](Self::variances_with_plug_in),
    /// [`super::intervals::kernel_standard_error`]):
    /// ±1.96 SE is a 95% interval for the true map at λ = 1 and for the
    /// map smoothed by the residual noise at λ < 1
    /// ([`smoothed_target`](Self::smoothed_target)). Where the noise does
    /// not dither the binning, v̂ also carries the rounding of coincident
    /// devices and of sub-bin lines along a bin axis (docs/MATH.md §9.7,
    /// branch round16; nothing is added elsewhere). Where fewer than
    /// m* = ln 20 reports carry a cell (m̂_j of
    /// [`observed_effective_reports`](Self::observed_effective_reports),
    /// stated in `effective_reports`), SE_j² gains m*·(max|K_λ|/n)²
    /// ([`super::intervals::thin_cell_variance`], docs/MATH.md §9.7
    /// "sparse24"). No discretisation bound
    /// is stated (NaN); [`discretisation`](Self::discretisation) gives the
    /// certified one, about 30x the observed error.
    pub fn estimate(&self, kernel: &DebiasKernel) -> Result<MapEstimate> {
        let s = self.spatial_kernel(kernel);
        // The map on a second thread beside the variances (neither reads
        // the other; the numbers do not depend on it): this runs after the
        // planner, when both cores are free.
        let (mean, vu) = std::thread::scope(|sc| {
            let m = sc.spawn(|| {
                (
                    self.apply_spatial(&s),
                    self.observed_effective_reports(kernel.bandwidth()),
                )
            });
            let vu = self.variances_with_plug_in(kernel, &s);
            (m.join(), vu)
        });
        let (mean, m_hat) = mean.map_err(|_| Error::Numerical {
            routine: "map thread",
        })?;
        let n = self.counts.total() as f64;
        let floor = self.round_off(&s);
        // The sample variance floored by a quarter of the noise-law
        // plug-in (docs/MATH.md §9.7, `intervals::kernel_standard_error`),
        // and where fewer than m* = ln 20 reports carry the cell (m̂ from
        // the reports), ln 20 reports' worth of the kernel's peak weight
        // added to the variance (docs/MATH.md §9.7 "sparse24").
        let (v, u) = vu?;
        let peak = s.iter().fold(0.0f64, |a, x| a.max(x.abs()));
        let thin = super::intervals::thin_cell_variance(peak, n);
        let standard_errors = v
            .iter()
            .zip(&u)
            .zip(&m_hat)
            .map(|((&v, &u), &m)| {
                let se = super::intervals::kernel_standard_error(v, u, n, floor);
                if is_thin_cell(m) {
                    (se * se + thin).sqrt()
                } else {
                    se
                }
            })
            .collect();
        Ok(MapEstimate {
            values: mean,
            standard_errors,
            interval_centres: None,
            n: self.counts.total(),
            lambda: kernel.lambda(),
            // Not stated (docs/MATH.md §9.3): the certified bound of
            // [`discretisation`](Self::discretisation) was 31-36x the
            // observed error; issue 22 accepts a bound within 3x or none.
            discretisation_bound: f64::NAN,
            em_iterations: None,
            effective_reports: Some(m_hat),
        })
    }

    /// The effective number of reports per map point, read from the binned
    /// reports alone (docs/MATH.md §9.7 addendum "sparse24"): with
    /// g(r) = e^{−r²/(2h²)} the Gaussian kernel of bandwidth h (up to its
    /// constant, which cancels) and c_b the reports in bin b (at its
    /// centre x_b),
    ///
    /// ```text
    /// S2_j = Σ_b c_b g(t_j − x_b)²,   S4_j = Σ_b c_b g(t_j − x_b)⁴,
    /// m̂_j = S2_j² / S4_j   (0 where S4_j = 0),
    /// ```
    ///
    /// the participation number of the observed reports in the cell, the
    /// sample counterpart of the devices' m_j of
    /// [`effective_reports`](super::effective_reports) (Σ_i g² and Σ_i g⁴
    /// of the reports are unbiased for Σ_i E[Y_i²] and Σ_i E[Y_i⁴]): N
    /// reports of equal weight give N, a cell reached by a few rare
    /// reports gives about their number. Post-processing of the reports (no
    /// device location, no privacy cost). Reports further than 5h along an
    /// axis are not read (a weight below e^{−25}); the Gaussian is separable,
    /// so the sums run along the bins' columns then rows, direct (no FFT:
    /// no round-off where S4 is tiny). NaN for every point if h is not
    /// positive and finite.
    ///
    /// ```
    /// use geopriv::map::{BinSpec, BinnedCounts, FftMapper, KdeGrid};
    /// let grid = KdeGrid::square(10_000.0, 11)?;
    /// let spec = BinSpec::for_estimation(&grid, 1e-2, 1 << 20)?;
    /// let mut c = BinnedCounts::new(spec.clone());
    /// for _ in 0..400 {
    ///     c.add(&[5_000.0, 5_000.0])?; // 400 reports at the centre
    /// }
    /// c.add(&[0.0, 0.0])?; // and one at a corner
    /// let m = FftMapper::new(c)?;
    /// let m_hat = m.observed_effective_reports(grid.bandwidth());
    /// assert!((m_hat[60] - 400.0).abs() < 1e-6); // the centre: 400 alike
    /// assert!((m_hat[0] - 1.0).abs() < 1e-6); // the corner: one report
    /// assert!(m_hat[0] < geopriv::map::EFFECTIVE_REPORTS_THRESHOLD);
    /// # Ok::<(), geopriv::Error>(())
    /// ```
    pub fn observed_effective_reports(&self, h: f64) -> Vec<f64> {
        let spec = self.counts.spec();
        let mp = spec.map_points();
        let cells = mp[0] * mp[1];
        if !(h.is_finite() && h > 0.0) {
            return vec![f64::NAN; cells];
        }
        let b = spec.bins();
        let delta = spec.delta();
        let two_axes = spec.dim() > 1;
        // Per axis, the reach in bins and the weights g_a(d) = e^{−(dΔ_a)²/(2h²)}
        // squared (the field of g², whose square is g⁴'s).
        let reach = |a: usize| -> usize {
            if a == 1 && !two_axes {
                0
            } else {
                libm::ceil(OBSERVED_REACH * h / delta[a]).min((b[a] + 1) as f64) as usize
            }
        };
        let (w0, w1) = (reach(0), reach(1));
        let weights = |a: usize, w: usize| -> Vec<f64> {
            (0..=w)
                .map(|d| {
                    let x = d as f64 * delta[a] / h;
                    libm::exp(-x * x)
                })
                .collect()
        };
        let (g0, g1) = (weights(0, w0), weights(1, w1));
        let rows: Vec<usize> = (0..mp[0]).map(|i| spec.map_bin(i * mp[1]) / b[1]).collect();
        let cols: Vec<usize> = (0..mp[1]).map(|k| spec.map_bin(k) % b[1]).collect();
        let (lo, hi) = match (rows.first(), rows.last()) {
            (Some(&f), Some(&l)) => (f.saturating_sub(w0), (l + w0).min(b[0] - 1)),
            _ => return Vec::new(),
        };
        // Pass 1: along axis 1, per bin row within reach and map column:
        // Σ_k c_ik g1² and Σ_k c_ik g1⁴.
        let counts = self.counts.counts();
        let span = hi - lo + 1;
        let mut p2 = vec![0.0f64; span * mp[1]];
        let mut p4 = vec![0.0f64; span * mp[1]];
        for i in lo..=hi {
            let row = &counts[i * b[1]..(i + 1) * b[1]];
            if row.iter().all(|&c| c == 0) {
                continue;
            }
            for (kc, &col) in cols.iter().enumerate() {
                let (k0, k1) = (col.saturating_sub(w1), (col + w1).min(b[1] - 1));
                let (mut s2, mut s4) = (0.0, 0.0);
                for (k, &c) in row.iter().enumerate().take(k1 + 1).skip(k0) {
                    if c != 0 {
                        let g = g1[k.abs_diff(col)];
                        let c = c as f64;
                        s2 += c * g;
                        s4 += c * g * g;
                    }
                }
                p2[(i - lo) * mp[1] + kc] = s2;
                p4[(i - lo) * mp[1] + kc] = s4;
            }
        }
        // Pass 2: along axis 0, per map point.
        let mut out = Vec::with_capacity(cells);
        for &row in &rows {
            let (i0, i1) = (row.saturating_sub(w0).max(lo), (row + w0).min(hi));
            for kc in 0..mp[1] {
                let (mut s2, mut s4) = (0.0, 0.0);
                for i in i0..=i1 {
                    let g = g0[i.abs_diff(row)];
                    s2 += g * p2[(i - lo) * mp[1] + kc];
                    s4 += g * g * p4[(i - lo) * mp[1] + kc];
                }
                out.push(if s4 > 0.0 { s2 * s2 / s4 } else { 0.0 });
            }
        }
        out
    }

    /// Per map point, the per-device variance of the terms K_λ(t_j - x̃_i)
    /// given the devices (docs/MATH.md §9.7): the error of a map is
    /// measured against the devices themselves, so only the noise's
    /// spread counts,
    ///
    /// ```text
    /// v_j = (1/n)Σ_i Var(K_λ(t_j - x̃_i) | x_i)
    ///     = (1/n)Σ_i E[K_λ²(t_j - x̃_i) | x_i] - (1/n)Σ_i B_λ(t_j - x_i)²,
    /// ```
    ///
    /// B_λ = E[K_λ(t - x̃) | x] = K_λ * p_N (transform F\[K_λ\]·φ_N). Both sums
    /// are estimated without bias from the noisy locations: the first by
    /// (1/n)Σ K_λ²(t_j - x̃_i), the second by (1/n)Σ D_λ(t_j - x̃_i) with
    /// F\[D_λ\] = F\[B_λ²\]/φ_N (deconvolving B_λ², exact for every λ ∈ [0, 1];
    /// B_λ² is computed on the bin lattice, its transform by FFT). So
    /// v̂_j = (1/n)Σ_i (K_λ² - D_λ)(t_j - x̃_i) has E v̂_j = v_j, and
    /// SE_j = √(v̂_j/n) is the standard error of the map about its mean
    /// given the devices: the true map for λ = 1, the map smoothed by the
    /// residual noise (transform φ_N^{1-λ}) for λ < 1. An estimate below
    /// 1% of the unconditional spread (1/n)Σ K_λ² - mean² (cells with
    /// almost no device) is raised to it. `s`, `mean`: the kernel's
    /// spatial samples and map.
    pub fn conditional_variances(
        &self,
        kernel: &DebiasKernel,
        s: &[f64],
        mean: &[f64],
    ) -> Result<Vec<f64>> {
        Ok(self.variances(kernel, s, Some(mean))?.0)
    }

    /// [`conditional_variances`](Self::conditional_variances) without its
    /// 1% floor and smoothed by a Gaussian of sd
    /// [`super::intervals::VARIANCE_SMOOTHING`]/ε (its mean is v * G_σ;
    /// branch cover23), and beside it the noise-law plug-in
    /// u_j = (1/n)Σ_i [(K_λ² * p_N) − B_λ²](t_j − x̃_i): the variance
    /// formula evaluated as if each device sat at its noisy location (a sum
    /// of per-device variances, so >= 0 up to round-off; docs/MATH.md §9.7,
    /// [`super::intervals::kernel_standard_error`]). Same FFT count; needs
    /// no map, so it can run beside [`apply_spatial`](Self::apply_spatial).
    /// The first field also carries the coincident devices' rounding,
    /// (1/n)Σ_b Σ_a E_a(b) (∂_a K_λ(t_j − x_b))² with E_a of
    /// `planner::atom_rounding_field` (≈ Σ_l n_l(n_l − 1)·V_a at each
    /// location's bins; docs/MATH.md §9.7 "Coincident devices", branch
    /// round16): nothing is added where the counts show no point mass,
    /// e.g. wherever the noise spans a bin.
    pub fn variances_with_plug_in(
        &self,
        kernel: &DebiasKernel,
        s: &[f64],
    ) -> Result<(Vec<f64>, Vec<f64>)> {
        let atoms = super::planner::atom_rounding_field(self, kernel.epsilon());
        let (mut v, u) = self.variances_of(
            kernel,
            &self.kernel_transform(kernel),
            s,
            None,
            atoms.as_ref(),
        )?;
        // Sub-bin lines along a bin axis (docs/MATH.md §9.7 "Lines along
        // a bin axis"): nothing computed where the noise spans a bin.
        let lines = self.line_variance(kernel.epsilon(), kernel.bandwidth());
        if let Some(lines) = lines.as_ref() {
            for (x, l) in v.iter_mut().zip(lines) {
                *x += l;
            }
        }
        Ok((v, u))
    }

    /// The coherent sub-bin lines' variance field at ε and bandwidth h
    /// (`planner::coherent_line_variance`), computed once per mapper and
    /// reused while (ε, h) match the cached key; recomputed otherwise.
    fn line_variance(&self, eps: f64, h: f64) -> std::borrow::Cow<'_, Option<Vec<f64>>> {
        let key = (eps.to_bits(), h.to_bits());
        let compute = || super::planner::coherent_line_variance(self, eps, h);
        let (k, cached) = self.lines.get_or_init(|| (key, compute()));
        if *k == key {
            std::borrow::Cow::Borrowed(cached)
        } else {
            std::borrow::Cow::Owned(compute())
        }
    }

    /// The rounding share of [`variances_with_plug_in`](Self::variances_with_plug_in)'s
    /// first field alone, averaged over the map points (branch plan21,
    /// attack16 F2): the coincident devices' term
    /// (1/n)Σ_b Σ_a E_a(b) (∂_a K_λ(t_j − x_b))² plus the coherent pairs of
    /// sub-bin lines along a bin axis (`planner::coherent_line_variance`),
    ///
    ///   r̄ = mean_j (atoms_j + lines_j),
    ///
    /// in the per-device variance's unit (the map's SE carries r̄/n of it on
    /// average). `None` where neither is computed (the noise spans a bin,
    /// or the counts show no point mass and no line). For the planner.
    pub(crate) fn rounding_share(&self, kernel: &DebiasKernel) -> Option<f64> {
        let eps = kernel.epsilon();
        let atoms = super::planner::atom_rounding_field(self, eps);
        let atom_var = atoms.as_ref().map(|e| {
            let ft = self.kernel_transform(kernel);
            let vol: f64 = self.periods().iter().product();
            let (grad, _, _) = self.rounding_gradients(&ft, vol);
            let mut slopes = Field::spare();
            slopes.extend(
                grad.iter()
                    .map(|q| Complex64::new(q.re * q.re, q.im * q.im)),
            );
            self.atom_rounding_at_map_points(slopes, e)
        });
        let lines = self.line_variance(eps, kernel.bandwidth());
        let mean = |v: &[f64]| {
            if v.is_empty() {
                0.0
            } else {
                v.iter().sum::<f64>() / v.len() as f64
            }
        };
        match (atom_var.as_deref(), Option::as_deref(&*lines)) {
            (None, None) => None,
            (a, l) => Some(a.map_or(0.0, mean) + l.map_or(0.0, mean)),
        }
    }

    /// φ_N(|ω|) = (1 + |ω|²/ε²)^{-(d+1)/2}, the planar-Laplace noise's
    /// transfer function, at every flat DFT index ([`radial`](Self::radial)).
    /// It depends on the mapper's lattice and (ε, d) only, not on the
    /// kernel: computed once for the first (ε, d) asked and kept (the
    /// planner's six kernel maps and its plug-in share it; branch speed03),
    /// computed afresh for any other (ε, d). The same numbers either way.
    fn noise_transfer(&self, eps: f64, d: f64) -> std::borrow::Cow<'_, [f64]> {
        let phi = |w: f64| libm::pow(1.0 + (w / eps) * (w / eps), -(d + 1.0) / 2.0);
        let key = (eps.to_bits(), d.to_bits());
        let (k, v) = self.phi_n.get_or_init(|| (key, self.radial(phi)));
        if *k == key {
            std::borrow::Cow::Borrowed(v.as_slice())
        } else {
            std::borrow::Cow::Owned(self.radial(phi))
        }
    }

    /// Both variance fields, one value per map point. With the map
    /// (`mean`) the first is floored and the second is NaN (the caller
    /// reads only the first); without it (the plug-in) the second inverse
    /// channel carries u_j instead of the unconditional spread (no floor
    /// applied).
    fn variances(
        &self,
        kernel: &DebiasKernel,
        s: &[f64],
        mean: Option<&[f64]>,
    ) -> Result<(Vec<f64>, Vec<f64>)> {
        self.variances_of(kernel, &self.kernel_transform(kernel), s, mean, None)
    }

    /// [`conditional_variances`](Self::conditional_variances) with the
    /// kernel's transform `ft` given ([`kernel_transform`](Self::kernel_transform)).
    /// The planner reads [`planner_map_of`](Self::planner_map_of) instead
    /// (branch speed05); the tests compare the two.
    #[cfg(test)]
    pub(crate) fn conditional_variances_of(
        &self,
        kernel: &DebiasKernel,
        ft: &KernelTransform,
        s: &[f64],
        mean: &[f64],
    ) -> Result<Vec<f64>> {
        Ok(self.variances_of(kernel, ft, s, Some(mean), None)?.0)
    }

    /// [`variances`](Self::variances) with F[K_λ] given as `ft`, and
    /// `atoms` the coincident devices' rounding field E_a(b) per axis on
    /// the bins ([`super::planner::atom_rounding_field`], docs/MATH.md §9.7
    /// "Coincident devices"; only without `mean`): the first field then
    /// gains (1/n)Σ_b Σ_a E_a(b) (∂_a K_λ(t_j − x_b))², floored at 0 per
    /// map point ([`atom_rounding_at_map_points`](Self::atom_rounding_at_map_points)).
    fn variances_of(
        &self,
        kernel: &DebiasKernel,
        ft: &KernelTransform,
        s: &[f64],
        mean: Option<&[f64]>,
        atoms: Option<&[Vec<f64>; 2]>,
    ) -> Result<(Vec<f64>, Vec<f64>)> {
        let plug_in = mean.is_none();
        let d = kernel.dim() as f64;
        let eps = kernel.epsilon();
        let vol: f64 = self.periods().iter().product();
        let cells = (self.n[0] * self.n[1]) as f64;
        // B_λ on the lattice (the function itself: no rounding correction).
        // F[K_λ] (given) and φ_N at every frequency (each evaluated once
        // per four indices, [`radial`](Self::radial); φ_N once per mapper).
        let ph = self.noise_transfer(eps, d);
        // The published SE's sample variance is smoothed by a Gaussian of
        // sd VARIANCE_SMOOTHING/ε (transform e^{−σ²|ω|²/2}; docs/MATH.md
        // §9.7 "A smoothed sample variance", branch cover23): a cell whose
        // counts fell low by chance no longer gets a small SE with its low
        // value. Only the plug-in path (the published SE); the planner's
        // and `conditional_variances`' fields are unchanged.
        let sigma = super::intervals::VARIANCE_SMOOTHING / eps;
        let smooth = (plug_in && sigma.is_finite() && sigma > 0.0)
            .then(|| self.radial(|w| libm::exp(-0.5 * (sigma * w) * (sigma * w))));
        let mut b =
            self.lattice_field(|f, ik, _, _, _| Complex64::new(ft.at(ik) * ph[f] / vol, 0.0));
        self.fft2(&mut b, false);
        // B_λ² in B_λ's buffer (one field fewer at the peak).
        let mut b2 = b;
        for c in b2.iter_mut() {
            *c = Complex64::new(c.re * c.re, 0.0);
        }
        self.fft2(&mut b2, true);
        // Rounding to the nearest bin moves x̃ by u, uniform on the bin's
        // box: after the sinc correction its mean effect is removed, its
        // spread Σ_a (Δ_a²/12)(∂_a K_λ)² per location is not; it is added
        // (the rounding offsets of different locations act as independent,
        // docs/MATH.md §9.7; it matters at large εh, where 1/ε < Δ).
        let spec = self.counts.spec();
        let (grad, c0, c1) = self.rounding_gradients(ft, vol);
        // Coincident devices round as a whole (docs/MATH.md §9.7,
        // "Coincident devices"): their share per map point, from the
        // squared slopes (∂_0 K_λ)² + i (∂_1 K_λ)² (only where the counts
        // show point masses; otherwise nothing is computed or added).
        let atom_var = atoms.map(|e| {
            let mut slopes = Field::spare();
            slopes.extend(
                grad.iter()
                    .map(|q| Complex64::new(q.re * q.re, q.im * q.im)),
            );
            self.atom_rounding_at_map_points(slopes, e)
        });
        // K_λ² + i R in the gradients' buffer (one field fewer at the peak).
        let mut g = grad;
        for (q, &v) in g.iter_mut().zip(s) {
            *q = Complex64::new(v * v, c0 * q.re * q.re + c1 * q.im * q.im);
        }
        self.fft2(&mut g, true);
        // g now holds fwd(K_λ²) + i fwd(R), R the rounding spread: split
        // them (both real fields, so their transforms are Hermitian).
        // Transform of K_λ² - D_λ on the lattice: the forward FFT of K_λ²
        // less that of D_λ. D_λ's samples are the inverse FFT of
        // F[D_λ]/vol = F[B_λ²]·corr/(φ_N vol), and F[B_λ²] ≈ fwd(B_λ²)·vol/cells,
        // so fwd(D_λ) = fwd(B_λ²)·corr/φ_N. Both fields (K_λ² - D_λ, and K_λ²
        // for the floor) are real, so one inverse FFT of
        // (F1 + i F2)·hat gives them as its real and imaginary parts.
        let finish = |f: usize, corr: f64, a: Complex64, rounding: Complex64| {
            let q = b2[f];
            let p = ph[f];
            let dq = if p > 0.0 {
                q * (corr / p)
            } else {
                Complex64::new(0.0, 0.0)
            };
            // The imaginary channel: K_λ² (the unconditional spread, for
            // the floor) or the plug-in F[K_λ²]·φ_N − F[B_λ²]·corr.
            let second = if plug_in { a * p - q * corr } else { a };
            let g = smooth.as_ref().map_or(1.0, |sm| sm[f]);
            let both = (a - dq + rounding) * g + Complex64::new(0.0, 1.0) * second;
            both * self.hat[f]
        };
        // In place, a frequency and its partner at once (the same
        // arithmetic as from a copy of g and a field of the rounding
        // parts, without either: less memory at large FFTs).
        self.hermitian_pairs(|pair| {
            let (a, p) = (g[pair.f], g[pair.c]);
            let (k2, rounding) = hermitian_split(a, p);
            g[pair.f] = finish(pair.f, pair.corr_f, k2, rounding);
            if pair.c != pair.f {
                let (k2, rounding) = hermitian_split(p, a);
                g[pair.c] = finish(pair.c, pair.corr_c, k2, rounding);
            }
        });
        drop(b2);
        drop(ph);
        self.inverse_on_columns(&mut g, &self.map_columns());
        let norm = 1.0 / cells / self.counts.total() as f64;
        let b1 = spec.bins()[1];
        let mp = spec.map_points();
        let at = |j: usize| {
            let flat = spec.map_bin(j);
            g[(flat / b1) * self.n[1] + flat % b1] * norm
        };
        Ok(match mean {
            // The plug-in needs no map (computed beside it in `estimate`).
            None => (0..mp[0] * mp[1])
                .map(|j| {
                    let c = at(j);
                    let atom = atom_var.as_ref().map_or(0.0, |a| a[j]);
                    (c.re + atom, c.im.max(0.0))
                })
                .unzip(),
            Some(mean) => (0..mp[0] * mp[1])
                .zip(mean)
                .map(|(j, m)| {
                    let c = at(j);
                    let total = (c.im - m * m).max(0.0);
                    (c.re.max(0.01 * total), f64::NAN)
                })
                .unzip(),
        })
    }

    /// The coincident devices' rounding variance per map point
    /// (docs/MATH.md §9.7 "Coincident devices", branch round16):
    ///
    ///   r_j = (1/n) Σ_b Σ_a E_a(b) (∂_a K_λ(t_j − x_b))²,  r_j ∨ 0,
    ///
    /// `slopes` the spatial field (∂_0 K_λ)² + i (∂_1 K_λ)² on the lattice,
    /// `e` = [E_0, E_1] on the bins (row-major,
    /// [`super::planner::atom_rounding_field`]). Two real fields packed in
    /// each of two forward transforms, split pairwise
    /// ([`hermitian_pairs`](Self::hermitian_pairs)), multiplied and summed
    /// over the axes, one inverse transform on the map's columns.
    fn atom_rounding_at_map_points(&self, slopes: Field, e: &[Vec<f64>; 2]) -> Vec<f64> {
        let mut p = slopes;
        self.fft2(&mut p, true);
        let b = self.counts.spec().bins();
        let n1 = self.n[1];
        let zero = Complex64::new(0.0, 0.0);
        let mut y = self.lattice_field(|_, _, _, _, _| zero);
        for i in 0..b[0] {
            for k in 0..b[1] {
                let at = i * b[1] + k;
                let (e0, e1) = (e[0].get(at), e[1].get(at));
                y[i * n1 + k] = Complex64::new(*e0.unwrap_or(&0.0), *e1.unwrap_or(&0.0));
            }
        }
        self.fft2(&mut y, true);
        let product = |g: (Complex64, Complex64), v: (Complex64, Complex64)| g.0 * v.0 + g.1 * v.1;
        self.hermitian_pairs(|pair| {
            let (gf, gc) = (p[pair.f], p[pair.c]);
            let (yf, yc) = (y[pair.f], y[pair.c]);
            p[pair.f] = product(hermitian_split(gf, gc), hermitian_split(yf, yc));
            if pair.c != pair.f {
                p[pair.c] = product(hermitian_split(gc, gf), hermitian_split(yc, yf));
            }
        });
        drop(y);
        self.inverse_on_columns(&mut p, &self.map_columns());
        let norm = 1.0 / (self.n[0] * self.n[1]) as f64 / self.counts.total() as f64;
        self.at_map_points(&p, norm)
            .into_iter()
            .map(|v| if v > 0.0 { v } else { 0.0 })
            .collect()
    }

    /// Every pair of a DFT index f = (i0, i1) and its Hermitian partner
    /// c = (−i0, −i1) mod N once, from the member with the smaller flat
    /// index, in the order of the flat index, with the sinc correction of
    /// [`omega`](Self::omega) at both (the same product 1·c_0·c_1, read by
    /// row and column instead of a division and a modulo per index, branch
    /// speed05). A real field's transform X satisfies X(c) = conj X(f), so
    /// two real fields packed as A + iB in one transform are split pairwise
    /// ([`hermitian_split`]); shared by [`variances_of`](Self::variances_of)
    /// and [`planner_map_of`](Self::planner_map_of).
    fn hermitian_pairs(&self, mut visit: impl FnMut(HermitianPair)) {
        let [n0, n1] = self.n;
        let (_, _, cs0) = &self.axes[0];
        let cs1 = self.axes.get(1).map(|a| &a.2);
        let corr_at = |i: usize, k: usize| match cs1 {
            Some(cs1) => 1.0 * cs0[i] * cs1[k],
            None => 1.0 * cs0[i],
        };
        for i in 0..n0 {
            let ic = (n0 - i) % n0;
            for k in 0..n1 {
                let kc = (n1 - k) % n1;
                let (f, c) = (i * n1 + k, ic * n1 + kc);
                if c < f {
                    continue;
                }
                visit(HermitianPair {
                    f,
                    c,
                    at_f: [i, k],
                    at_c: [ic, kc],
                    corr_f: corr_at(i, k),
                    corr_c: corr_at(ic, kc),
                });
            }
        }
    }

    /// The kernel's two spatial gradients in one field, ∂_0 K + i ∂_1 K
    /// (the inverse transform of i ω_0 F + i (i ω_1 F), F = F[K]·corr/vol),
    /// and the rounding weights Δ_a²/12 of the two axes (0 for a missing
    /// second axis): the parts of the rounding spread Σ_a (Δ_a²/12)(∂_a K)²
    /// shared by [`variances_of`](Self::variances_of) and
    /// [`planner_map_of`](Self::planner_map_of).
    fn rounding_gradients(&self, ft: &KernelTransform, vol: f64) -> (Field, f64, f64) {
        let delta = self.counts.spec().delta();
        let mut grad = self.lattice_field(|_, ik, corr, w0, w1| {
            let k = ft.at(ik) * corr / vol;
            Complex64::new(-w1 * k, w0 * k)
        });
        self.fft2(&mut grad, false);
        let c0 = delta[0] * delta[0] / 12.0;
        let c1 = if self.axes.len() > 1 {
            delta[1] * delta[1] / 12.0
        } else {
            0.0
        };
        (grad, c0, c1)
    }

    /// The map of a kernel from its transform `ft`
    /// ([`kernel_transform`](Self::kernel_transform)) without its spatial
    /// samples: the forward transform of s = F⁻¹[X], X = F[K_λ]·corr/vol,
    /// is N·X (N the lattice size) up to rounding, so
    /// (1/n)Σ_bins count·s(t_j − c) = F⁻¹[N·X·ĉ]/(N n) at the map points,
    /// one inverse transform read on the map's columns instead of a forward
    /// and an inverse one ([`apply_spatial`](Self::apply_spatial) of
    /// [`spatial_kernel_of`](Self::spatial_kernel_of): the same map up to
    /// rounding; branch speed05, for the planner's kernel maps).
    pub(crate) fn map_of_transform(&self, ft: &KernelTransform) -> Vec<f64> {
        let vol: f64 = self.periods().iter().product();
        let cells = (self.n[0] * self.n[1]) as f64;
        let mut g = self.lattice_field(|f, ik, corr, _, _| {
            Complex64::new(ft.at(ik) * corr / vol * cells, 0.0) * self.hat[f]
        });
        self.inverse_on_columns(&mut g, &self.map_columns());
        let norm = 1.0 / cells / self.counts.total() as f64;
        self.at_map_points(&g, norm)
    }

    /// Everything the planner reads of one kernel map (docs/MATH.md §9.4,
    /// branch speed05), in 4 transforms of the whole lattice and 2 read on
    /// the map's columns only, where the map, the map of K_λ², the
    /// variances and the map of (K_λ − K_1)² took 7 and 4 (the same
    /// quantities up to rounding; the planner compares them at 1e-3 and
    /// wider, the map it prints is made by [`estimate`](Self::estimate)):
    ///
    /// * s_λ + i B_λ in one inverse transform (both transforms real and
    ///   even: F[K_λ]·corr/vol and F[K_λ]·φ_N/vol);
    /// * B_λ² + i (s_λ − s_1)² in one forward transform (s_1 = `unbiased`,
    ///   the spatial samples of K_1; B_λ² alone without it);
    /// * the gradients of K_λ, then K_λ² + i R (the rounding spread) in one
    ///   forward transform, as [`conditional_variances`](Self::conditional_variances);
    /// * the two Hermitian pairs split, and then one inverse transform of
    ///   (F[K_λ² − D_λ + R] + i F[K_λ²])·ĉ for the variances and the map
    ///   of K_λ², one of (N·X + i F[(s_λ − s_1)²])·ĉ for the map
    ///   ([`map_of_transform`](Self::map_of_transform)) and the map of
    ///   (K_λ − K_1)².
    ///
    /// The variances are those of `conditional_variances` with its 1%
    /// floor; `spread` is (map of K_λ² − map²) ∨ 0 per map point.
    pub(crate) fn planner_map_of(
        &self,
        kernel: &DebiasKernel,
        ft: &KernelTransform,
        unbiased: Option<&[f64]>,
    ) -> PlannerMap {
        let d = kernel.dim() as f64;
        let eps = kernel.epsilon();
        let vol: f64 = self.periods().iter().product();
        let [n0, n1] = self.n;
        let cells = (n0 * n1) as f64;
        let zero = Complex64::new(0.0, 0.0);
        let ph = self.noise_transfer(eps, d);
        // s_λ + i B_λ.
        let mut sb = self.lattice_field(|f, ik, corr, _, _| {
            let k = ft.at(ik);
            Complex64::new(k * corr / vol, k * ph[f] / vol)
        });
        self.fft2(&mut sb, false);
        let s: Vec<f64> = sb.iter().map(|c| c.re).collect();
        // B_λ² + i (s_λ − s_1)² in place.
        match unbiased {
            Some(s1) => {
                for ((c, &v), &w) in sb.iter_mut().zip(&s).zip(s1) {
                    *c = Complex64::new(c.im * c.im, (v - w) * (v - w));
                }
            }
            None => {
                for c in sb.iter_mut() {
                    *c = Complex64::new(c.im * c.im, 0.0);
                }
            }
        }
        self.fft2(&mut sb, true);
        // The rounding spread Σ_a (Δ_a²/12)(∂_a K_λ)², as in `variances_of`.
        let (mut g, c0, c1) = self.rounding_gradients(ft, vol);
        for (q, &v) in g.iter_mut().zip(&s) {
            *q = Complex64::new(v * v, c0 * q.re * q.re + c1 * q.im * q.im);
        }
        drop(s);
        self.fft2(&mut g, true);
        let split = hermitian_split;
        let with_diff = unbiased.is_some();
        // (F[K_λ² − D_λ + R] + i F[K_λ²])·ĉ and (N·X + i F[diff])·ĉ at f.
        let finish = |f: usize,
                      ik: [usize; 2],
                      corr: f64,
                      g_pair: (Complex64, Complex64),
                      b_pair: (Complex64, Complex64)| {
            let (a, rounding) = g_pair;
            let (q, e) = b_pair;
            let p = ph[f];
            let dq = if p > 0.0 { q * (corr / p) } else { zero };
            let both = (a - dq + rounding) + Complex64::new(0.0, 1.0) * a;
            let x = ft.at(ik) * corr / vol * cells;
            let m = if with_diff {
                Complex64::new(x - e.im, e.re)
            } else {
                Complex64::new(x, 0.0)
            };
            (both * self.hat[f], m * self.hat[f])
        };
        self.hermitian_pairs(|pair| {
            let (f, c) = (pair.f, pair.c);
            let (a, p) = (g[f], g[c]);
            let (u, v) = (sb[f], sb[c]);
            (g[f], sb[f]) = finish(f, pair.at_f, pair.corr_f, split(a, p), split(u, v));
            if c != f {
                (g[c], sb[c]) = finish(c, pair.at_c, pair.corr_c, split(p, a), split(v, u));
            }
        });
        drop(ph);
        let cols = self.map_columns();
        self.inverse_on_columns(&mut g, &cols);
        self.inverse_on_columns(&mut sb, &cols);
        let norm = 1.0 / cells / self.counts.total() as f64;
        let spec = self.counts.spec();
        let b1 = spec.bins()[1];
        let mp = spec.map_points();
        let len = mp[0] * mp[1];
        let mut out = PlannerMap {
            mean: Vec::with_capacity(len),
            variances: Vec::with_capacity(len),
            spread: Vec::with_capacity(len),
            diff_map: with_diff.then(|| Vec::with_capacity(len)),
        };
        for j in 0..len {
            let flat = spec.map_bin(j);
            let at = (flat / b1) * n1 + flat % b1;
            let (c, mc) = (g[at] * norm, sb[at]);
            let m = mc.re * norm;
            let total = (c.im - m * m).max(0.0);
            out.mean.push(m);
            out.variances.push(c.re.max(0.01 * total));
            out.spread.push(total);
            if let Some(dm) = out.diff_map.as_mut() {
                dm.push(mc.im * norm);
            }
        }
        out
    }

    /// The parts of the discretisation-error bound for `kernel`.
    pub fn discretisation(&self, kernel: &DebiasKernel) -> DiscretisationBound {
        let spec = self.counts.spec();
        let d = spec.dim();
        let delta = spec.delta();
        let dnorm = (0..d).map(|a| delta[a] * delta[a]).sum::<f64>().sqrt();
        let total = self.counts.total() as f64;
        let outside = self.counts.outside() as f64 / total;
        let inside = 1.0 - outside;
        let truncation = outside * kernel.tail_bound(spec.truncation_radius());
        // Wrap-around: images with |m|_∞ = q are at least min_a(q P_a - D_a) away.
        let p = self.periods();
        let mp = spec.map_points();
        let dmax: Vec<f64> = (0..d)
            .map(|a| ((mp[a] - 1) * spec.refine() + spec.margin()) as f64 * delta[a])
            .collect();
        let mut wrap = 0.0;
        for q in 1..200 {
            let dist = (0..d)
                .map(|a| q as f64 * p[a] - dmax[a])
                .fold(f64::INFINITY, f64::min);
            let count = ((2 * q + 1) as f64).powi(d as i32) - ((2 * q - 1) as f64).powi(d as i32);
            let term = count * kernel.tail_bound(dist.max(0.0));
            wrap += term;
            if term < 1e-300 || term < wrap * 1e-17 {
                break;
            }
        }
        // Aliasing: (2π)^{-d} ∫_{|ω| >= W - D} F(|ω| - D) dω, W = π/Δ_max.
        let dmaxd = (0..d).map(|a| delta[a]).fold(0.0, f64::max);
        let w0 = PI / dmaxd;
        let dcell = 2.0 * PI * p.iter().map(|pa| 1.0 / (pa * pa)).sum::<f64>().sqrt();
        let lo = (w0 - dcell).max(0.0);
        let surface = if d == 1 { 2.0 } else { 2.0 * PI };
        let aliasing = simpson(
            |w| surface * w.powi(d as i32 - 1) * kernel.fourier((w - dcell).max(0.0)),
            lo,
            lo + 80.0 / kernel.bandwidth(),
            4000,
        ) / (2.0 * PI).powi(d as i32);
        let vol: f64 = p.iter().product();
        // Binning, from the data (docs/MATH.md §9.3): moving x̃ to its bin
        // centre c changes K(t - ·) by at most (|Δ|/2) sup |∇K| over the
        // ball of radius |Δ|/2 around t - c, which is at most
        // |∇K(t - c)| + H |Δ|/2 (H >= sup ‖Hess K‖). |∇K| on the bin
        // lattice comes from spectral differentiation of the band-limited
        // kernel, off by at most the gradient's out-of-band part A1 (the
        // aliasing integral with an extra |ω|). Averaged over the binned
        // locations (a convolution with the counts) and maximised over the
        // map points; never above the global Lip(K)·|Δ|/2.
        let aliasing1 = simpson(
            |w| surface * w.powi(d as i32) * kernel.fourier((w - dcell).max(0.0)),
            lo,
            lo + 80.0 / kernel.bandwidth(),
            4000,
        ) / (2.0 * PI).powi(d as i32);
        let grads: Vec<Vec<Complex64>> = (0..d)
            .map(|a| {
                let mut g: Vec<Complex64> = (0..self.hat.len())
                    .map(|f| {
                        let (w, _) = self.omega(f);
                        let wa = self.omega_axis(f, a);
                        let mag = if w > 0.0 {
                            kernel.fourier(w) * wa / vol
                        } else {
                            0.0
                        };
                        // i ω_a F: the transform of ∂_a K.
                        Complex64::new(0.0, mag)
                    })
                    .collect();
                self.fft2(&mut g, false);
                g
            })
            .collect();
        let gnorm: Vec<f64> = (0..self.hat.len())
            .map(|f| grads.iter().map(|g| g[f].re * g[f].re).sum::<f64>().sqrt())
            .collect();
        let local = self.apply_spatial(&gnorm).into_iter().fold(0.0, f64::max);
        let slack = aliasing1 + kernel.hessian_bound() * 0.5 * dnorm;
        let binning =
            (0.5 * dnorm * (local + inside * slack)).min(kernel.lipschitz_bound() * 0.5 * dnorm);
        let sinc_correction = (0..self.hat.len())
            .map(|f| {
                let (w, corr) = self.omega(f);
                kernel.fourier(w).abs() * (corr - 1.0).abs()
            })
            .sum::<f64>()
            / vol;
        DiscretisationBound {
            binning,
            sinc_correction,
            truncation,
            wrap: inside * wrap,
            aliasing: inside * aliasing,
        }
    }
}

/// Direct evaluation of (1/n) Σ_i K_λ(t_j - x_i) at every map point (for
/// tests and small n; O(n·m) kernel evaluations).
pub fn direct_map(
    grid: &super::KdeGrid,
    kernel: &DebiasKernel,
    locations: &[[f64; 2]],
) -> Result<Vec<f64>> {
    let n = locations.len() as f64;
    (0..grid.len())
        .map(|j| {
            let t = grid.center(j);
            let mut s = 0.0;
            for x in locations {
                s += kernel.value(libm::hypot(t[0] - x[0], t[1] - x[1]))?;
            }
            Ok(s / n)
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The two axes' plans of an `n` lattice, forward or inverse.
    fn test_plans(n: [usize; 2], forward: bool) -> [Arc<dyn Fft<f64>>; 2] {
        let mut planner = FftPlanner::new();
        if forward {
            [
                planner.plan_fft_forward(n[0]),
                planner.plan_fft_forward(n[1]),
            ]
        } else {
            [
                planner.plan_fft_inverse(n[0]),
                planner.plan_fft_inverse(n[1]),
            ]
        }
    }

    /// A deterministic complex field on an `n` lattice:
    /// sin(0.37 v) + i cos(1.3 v) at flat index v.
    fn test_field(n: [usize; 2]) -> Vec<Complex64> {
        (0..n[0] * n[1])
            .map(|v| Complex64::new(libm::sin(v as f64 * 0.37), libm::cos(v as f64 * 1.3)))
            .collect()
    }

    /// Lattice shapes for the column-pass tests: square and not, one strip
    /// and several with a partial last one, a single row and a single column.
    const STRIP_TEST_SHAPES: [[usize; 2]; 7] = [
        [5, 5],
        [36, 36],
        [45, 45],
        [20, 33],
        [33, 7],
        [1, 9],
        [9, 1],
    ];

    /// The strip-wise column pass of `fft2_in_place` gives the same bits as
    /// transposing the whole array, transforming its rows and transposing
    /// back (what it replaces), forward and inverse, square and not, with
    /// a partial last strip.
    #[test]
    fn fft2_by_column_strips_matches_the_transposed_path() {
        for n in std::iter::once([1usize, 1]).chain(STRIP_TEST_SHAPES) {
            for forward in [true, false] {
                let plans = test_plans(n, forward);
                let a = test_field(n);
                let mut fast = a.clone();
                fft2_in_place(&plans, n, &mut fast);
                let mut slow = a;
                if n[1] > 1 {
                    plans[1].process(&mut slow);
                }
                if n[0] > 1 {
                    let mut t = vec![Complex64::new(0.0, 0.0); n[0] * n[1]];
                    transpose::transpose(&slow, &mut t, n[1], n[0]);
                    plans[0].process(&mut t);
                    transpose::transpose(&t, &mut slow, n[0], n[1]);
                }
                assert_eq!(fast, slow, "n = {n:?}, forward {forward}");
            }
        }
    }

    /// The column-restricted transform gives the full transform's bits on
    /// the listed columns, forward and inverse, square and not, with
    /// columns spread over several strips and a partial last strip, and
    /// with no columns at all (branch speed05).
    #[test]
    fn fft2_on_listed_columns_has_the_full_transforms_bits_there() {
        for n in STRIP_TEST_SHAPES {
            let all: Vec<usize> = (0..n[1]).collect();
            let spread: Vec<usize> = (0..n[1]).step_by(2).collect();
            let last: Vec<usize> = vec![n[1] - 1];
            for cols in [&all[..], &spread[..], &last[..], &[][..]] {
                for forward in [true, false] {
                    let plans = test_plans(n, forward);
                    let a = test_field(n);
                    let mut full = a.clone();
                    fft2_in_place(&plans, n, &mut full);
                    let mut part = a;
                    fft2_in_place_columns(&plans, n, &mut part, cols);
                    let one_axis = n[0] == 1 || n[1] == 1;
                    for r in 0..n[0] {
                        for (c, _) in all.iter().enumerate() {
                            if one_axis || cols.contains(&c) {
                                let f = r * n[1] + c;
                                assert_eq!(
                                    full[f].re.to_bits(),
                                    part[f].re.to_bits(),
                                    "n = {n:?}, cols {cols:?}, forward {forward}"
                                );
                                assert_eq!(full[f].im.to_bits(), part[f].im.to_bits());
                            }
                        }
                    }
                }
            }
        }
    }

    /// φ_N kept for the first (ε, d) is the same numbers as a fresh
    /// evaluation; another (ε, d) is computed afresh, not served the kept
    /// one; and the variances read through it are the same bits on a
    /// second call (branch speed03).
    #[test]
    fn kernel_transform_holds_the_radial_values_at_every_index() {
        use crate::map::{BinSpec, KdeGrid};
        // Odd and even FFT lengths, 2-D and 1-D (branch speed04).
        for (pts, refine, margin) in [(5, 4, 8), (6, 3, 5)] {
            let grid = KdeGrid::square(1000.0, pts).unwrap();
            let spec = BinSpec::new(&grid, refine, margin).unwrap();
            let mut counts = BinnedCounts::new(spec);
            counts.add(&[100.0, 200.0]).unwrap();
            let mapper = FftMapper::new(counts).unwrap();
            let [n0, n1] = mapper.fft_len();
            let eps = 2.0 / grid.bandwidth();
            let k = DebiasKernel::new(2, grid.bandwidth(), eps, 0.4).unwrap();
            let k1 = DebiasKernel::new(2, grid.bandwidth(), eps, 1.0).unwrap();
            let (ft, ft1) = (mapper.kernel_transform(&k), mapper.kernel_transform(&k1));
            let full = mapper.radial(|w| k.fourier(w));
            let diff = mapper.radial(|w| k.fourier(w) - k1.fourier(w));
            for i in 0..n0 {
                for j in 0..n1 {
                    assert_eq!(ft.at([i, j]).to_bits(), full[i * n1 + j].to_bits());
                    let d = ft.minus_at(&ft1, [i, j]);
                    assert_eq!(d.to_bits(), diff[i * n1 + j].to_bits());
                }
            }
            // The `_of`/`_at` forms give the bits of the plain ones.
            let s = mapper.spatial_kernel(&k);
            let s_of = mapper.spatial_kernel_of(&ft);
            assert!(s.iter().zip(&s_of).all(|(a, b)| a.to_bits() == b.to_bits()));
            let mean = mapper.apply_spatial(&s);
            let v = mapper.conditional_variances(&k, &s, &mean).unwrap();
            let v_of = mapper.conditional_variances_of(&k, &ft, &s, &mean).unwrap();
            assert!(v.iter().zip(&v_of).all(|(a, b)| a.to_bits() == b.to_bits()));
            let c = mapper.correlation_sums(|w| k.fourier(w) - k1.fourier(w));
            let c_at = mapper.correlation_sums_at(|ik| ft.minus_at(&ft1, ik));
            assert_eq!(
                (c.0.to_bits(), c.1.to_bits()),
                (c_at.0.to_bits(), c_at.1.to_bits())
            );
        }
        let grid = KdeGrid::new_1d(0.0, 1000.0, 7, 150.0).unwrap();
        let spec = BinSpec::new(&grid, 4, 8).unwrap();
        let mut counts = BinnedCounts::new(spec);
        counts.add(&[300.0]).unwrap();
        let mapper = FftMapper::new(counts).unwrap();
        let k = DebiasKernel::new(1, grid.bandwidth(), 1.0 / grid.bandwidth(), 0.6).unwrap();
        let ft = mapper.kernel_transform(&k);
        let full = mapper.radial(|w| k.fourier(w));
        for (i, v) in full.iter().enumerate() {
            assert_eq!(ft.at([i, 0]).to_bits(), v.to_bits());
        }
    }

    /// `planner_map_of` and `map_of_transform` (fewer transforms, branch
    /// speed05) give the quantities of the separate calls they replace up
    /// to rounding: the map (`apply_spatial` of `spatial_kernel_of`), the
    /// floored conditional variances, the unconditional spread from the
    /// map of K_λ², and the map of (K_λ − K_1)²; 2-D with odd and even
    /// FFT lengths and 1-D, at λ = 0, 0.4 and 1.
    #[test]
    fn planner_map_is_the_separate_calls_up_to_rounding() {
        use crate::map::{BinSpec, KdeGrid};
        let close = |a: &[f64], b: &[f64], what: &str| {
            assert_eq!(a.len(), b.len());
            let big = b.iter().fold(0.0f64, |m, v| m.max(v.abs()));
            for (x, y) in a.iter().zip(b) {
                assert!(
                    (x - y).abs() <= 1e-9 * big,
                    "{what}: {x} vs {y} (max {big})"
                );
            }
        };
        let mut cases = Vec::new();
        for (pts, refine, margin) in [(5, 4, 8), (6, 3, 5)] {
            let grid = KdeGrid::square(1000.0, pts).unwrap();
            let mut counts = BinnedCounts::new(BinSpec::new(&grid, refine, margin).unwrap());
            for i in 0..200 {
                let t = i as f64;
                let x = 500.0 + 400.0 * libm::sin(t * 0.7) + 30.0 * libm::cos(t * 3.1);
                let y = 500.0 + 300.0 * libm::cos(t * 1.3);
                counts.add(&[x, y]).unwrap();
            }
            cases.push((grid, counts));
        }
        let grid = KdeGrid::new_1d(0.0, 1000.0, 7, 150.0).unwrap();
        let mut counts = BinnedCounts::new(BinSpec::new(&grid, 4, 8).unwrap());
        for i in 0..50 {
            counts.add(&[500.0 + 450.0 * libm::sin(i as f64)]).unwrap();
        }
        cases.push((grid, counts));
        for (grid, counts) in cases {
            let d = grid.dim();
            let mapper = FftMapper::new(counts).unwrap();
            let eps = 2.0 / grid.bandwidth();
            let k1 = DebiasKernel::new(d, grid.bandwidth(), eps, 1.0).unwrap();
            let ft1 = mapper.kernel_transform(&k1);
            let s1 = mapper.spatial_kernel_of(&ft1);
            close(
                &mapper.map_of_transform(&ft1),
                &mapper.apply_spatial(&s1),
                "unbiased map",
            );
            for lam in [0.0, 0.4, 1.0] {
                let k = DebiasKernel::new(d, grid.bandwidth(), eps, lam).unwrap();
                let ft = mapper.kernel_transform(&k);
                let unbiased = (lam != 1.0).then_some(&s1[..]);
                let pm = mapper.planner_map_of(&k, &ft, unbiased);
                let s = mapper.spatial_kernel_of(&ft);
                let mean = mapper.apply_spatial(&s);
                close(&pm.mean, &mean, "map");
                let v = mapper.conditional_variances_of(&k, &ft, &s, &mean).unwrap();
                close(&pm.variances, &v, "variances");
                let sq: Vec<f64> = s.iter().map(|v| v * v).collect();
                let spread: Vec<f64> = mapper
                    .apply_spatial(&sq)
                    .iter()
                    .zip(&mean)
                    .map(|(a, b)| (a - b * b).max(0.0))
                    .collect();
                close(&pm.spread, &spread, "spread");
                match unbiased {
                    Some(s1) => {
                        let diff: Vec<f64> =
                            s.iter().zip(s1).map(|(a, b)| (a - b) * (a - b)).collect();
                        close(
                            pm.diff_map.as_deref().unwrap(),
                            &mapper.apply_spatial(&diff),
                            "map of (K_λ − K_1)²",
                        );
                    }
                    None => assert!(pm.diff_map.is_none()),
                }
            }
        }
    }

    #[test]
    fn noise_transfer_is_kept_for_its_own_epsilon_only() {
        use crate::map::{BinSpec, KdeGrid};
        let grid = KdeGrid::square(1000.0, 5).unwrap();
        let spec = BinSpec::new(&grid, 4, 8).unwrap();
        let mut counts = BinnedCounts::new(spec);
        for (x, y) in [(100.0, 200.0), (500.0, 500.0), (900.0, 10.0)] {
            counts.add(&[x, y]).unwrap();
        }
        let mapper = FftMapper::new(counts).unwrap();
        let fresh = |eps: f64, d: f64| {
            mapper.radial(|w| libm::pow(1.0 + (w / eps) * (w / eps), -(d + 1.0) / 2.0))
        };
        let eps = 1.0 / grid.bandwidth();
        assert_eq!(*mapper.noise_transfer(eps, 2.0), fresh(eps, 2.0)[..]);
        assert_eq!(*mapper.noise_transfer(eps, 2.0), fresh(eps, 2.0)[..]);
        assert_eq!(
            *mapper.noise_transfer(3.0 * eps, 2.0),
            fresh(3.0 * eps, 2.0)[..]
        );
        assert_eq!(*mapper.noise_transfer(eps, 1.0), fresh(eps, 1.0)[..]);
        let k = DebiasKernel::new(2, grid.bandwidth(), eps, 0.5).unwrap();
        let s = mapper.spatial_kernel(&k);
        let a = mapper.variances_with_plug_in(&k, &s).unwrap();
        let b = mapper.variances_with_plug_in(&k, &s).unwrap();
        assert_eq!(a.0.len(), b.0.len());
        for (x, y) in a.0.iter().zip(&b.0).chain(a.1.iter().zip(&b.1)) {
            assert_eq!(x.to_bits(), y.to_bits());
        }
    }
}
