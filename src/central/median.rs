//! Median and quantiles of values in a public range [0, Λ] with the exact
//! β-smooth sensitivity (`docs/MATH.md §11.1`).
//!
//! **Rank convention.** For a dataset of n values sorted as
//! x_1 <= … <= x_n, the q-quantile is x_m with m = max(1, ⌈q n⌉). The
//! median (q = 1/2) is x_{(n+1)/2} for odd n and the *lower* median x_{n/2}
//! for even n. Padding x_i := 0 for i < 1 and x_i := Λ for i > n:
//!
//! ```text
//! LS(x)      = max(x_{m+1} - x_m, x_m - x_{m-1})
//! A^(k)(x)   = max_{0 <= t <= k+1} (x_{m+t} - x_{m+t-k-1})
//! S*_β(x)    = max_{k=0..n} e^{-kβ} A^(k)(x)
//!            = max_{0 <= i <= m <= j <= n+1, i < j} (x_j - x_i) e^{-β (j-i-1)}
//! ```
//!
//! **O(n log n).** Write g(i, j) = (x_j - x_i) e^{-β(j-i-1)} on the
//! rectangle i ∈ [0, m], j ∈ [m, n+1]. For i1 < i2 and j1 < j2 the values
//! a = x_{i1} <= b = x_{i2} <= c = x_{j1} <= d = x_{j2} satisfy
//! (d - a)(c - b) <= (c - a)(d - b) (the difference is (a - b)(d - c) <= 0),
//! and the weights e^{β(i+1)} e^{-βj} factor, so
//! g(i1, j2) g(i2, j1) <= g(i1, j1) g(i2, j2): g is *totally monotone*.
//! Hence if j* maximises row i, rows above i have a maximiser <= j* and rows
//! below one >= j* (the degenerate case of an all-zero row is handled in
//! [`SortedDataset::smooth_sensitivity`]'s comment). Divide and conquer on
//! the middle row (NRS07, §3.1) visits O((n + m) log m) cells after the
//! O(n log n) sort.
//!
//! ```
//! use geopriv::central::median::SortedDataset;
//! let d = SortedDataset::new(&[0.1, 0.2, 0.3, 0.9, 0.95], 1.0)?;
//! let m = d.quantile_rank(0.5)?;                  // 3 (1-based)
//! let fast = d.smooth_sensitivity(m, 0.1)?;
//! let naive = d.smooth_sensitivity_naive(m, 0.1)?;
//! assert!(fast >= naive && fast <= naive * (1.0 + 1e-11));
//! # Ok::<(), geopriv::Error>(())
//! ```

use super::{check_delta, check_epsilon, CentralGrid, Fault, Noise};
use crate::error::{positive_finite, Error, Result};
use crate::math::{exp, expm1, ln, log1p, pow, sqrt};
use crate::noise::{GeneralizedCauchy, Laplace, PolyPlace, StudentT};
use alloc::vec::Vec;
use rand::Rng;

/// Relative inflation of the computed smooth sensitivity: it absorbs the
/// rounding of the products (x_j - x_i) e^{-β(j-i-1)} (a few ulps) so the
/// returned value is never below the definition evaluated in exact
/// arithmetic on the same floats.
const ROUNDING_INFLATION: f64 = 1e-12;
/// Floor of the smooth sensitivity, as a fraction of Λ. max(S*, c) with a
/// constant c is still a β-smooth upper bound (a constant is 0-smooth), and
/// the floor keeps the noise scale positive when e^{-βk} underflows.
const FLOOR_FRACTION: f64 = 1e-300;

/// A validated dataset of values in [0, Λ], sorted ascending.
#[derive(Clone, Debug, PartialEq)]
pub struct SortedDataset {
    values: Vec<f64>,
    lambda: f64,
}

impl SortedDataset {
    /// Validate (non-empty, every value finite and in [0, Λ], Λ finite and
    /// > 0) and sort.
    pub fn new(values: &[f64], lambda: f64) -> Result<Self> {
        let lambda = positive_finite("lambda", lambda)?;
        if values.is_empty() {
            return Err(Error::InvalidData {
                index: 0,
                value: f64::NAN,
                reason: "the dataset is empty",
            });
        }
        for (index, &value) in values.iter().enumerate() {
            if !(value >= 0.0 && value <= lambda) {
                return Err(Error::InvalidData {
                    index,
                    value,
                    reason: "values must be numbers in [0, Λ]",
                });
            }
        }
        let mut v = values.to_vec();
        v.sort_unstable_by(f64::total_cmp);
        Ok(Self { values: v, lambda })
    }

    /// The sorted values.
    pub fn values(&self) -> &[f64] {
        &self.values
    }

    /// The public upper end Λ of the range.
    pub fn lambda(&self) -> f64 {
        self.lambda
    }

    /// Number of records n.
    pub fn len(&self) -> usize {
        self.values.len()
    }

    /// Always false (an empty dataset is refused by [`SortedDataset::new`]).
    pub fn is_empty(&self) -> bool {
        self.values.is_empty()
    }

    /// The 1-based rank m = max(1, ⌈q n⌉) of the q-quantile, q ∈ [0, 1].
    pub fn quantile_rank(&self, q: f64) -> Result<usize> {
        quantile_rank(self.len(), q)
    }

    /// x_i with the padding x_i = 0 for i < 1 and Λ for i > n (1-based).
    #[inline]
    fn padded(&self, i: usize) -> f64 {
        if i == 0 {
            0.0
        } else if i > self.values.len() {
            self.lambda
        } else {
            self.values[i - 1]
        }
    }

    fn check_rank(&self, m: usize) -> Result<()> {
        if m >= 1 && m <= self.len() {
            Ok(())
        } else {
            Err(Error::InvalidParameter {
                name: "rank",
                value: m as f64,
                requirement: "between 1 and the number of records",
            })
        }
    }

    /// The order statistic x_m (1-based).
    pub fn order_statistic(&self, m: usize) -> Result<f64> {
        self.check_rank(m)?;
        Ok(self.values[m - 1])
    }

    /// Local sensitivity of x_m: max(x_{m+1} - x_m, x_m - x_{m-1}).
    pub fn local_sensitivity(&self, m: usize) -> Result<f64> {
        self.check_rank(m)?;
        let xm = self.padded(m);
        Ok((self.padded(m + 1) - xm).max(xm - self.padded(m - 1)))
    }

    /// The definition in O(n²): max over k = 0..n of e^{-kβ} A^(k)(x).
    /// The reference for tests; no inflation, no floor.
    pub fn smooth_sensitivity_naive(&self, m: usize, beta: f64) -> Result<f64> {
        self.check_rank(m)?;
        let beta = positive_finite("beta", beta)?;
        let n = self.len();
        let mut best = 0.0f64;
        for k in 0..=n {
            let w = exp(-(k as f64) * beta);
            for t in 0..=k + 1 {
                // x_{m+t} - x_{m+t-k-1}; indices below 1 are padded with 0.
                let hi = self.padded(m + t);
                let lo = if m + t < k + 1 {
                    0.0
                } else {
                    self.padded(m + t - k - 1)
                };
                best = best.max((hi - lo) * w);
            }
        }
        Ok(best)
    }

    /// The exact β-smooth sensitivity S*_β(x) of the order statistic x_m,
    /// in O(n log n) (module docs), inflated by 1e-12 relative against
    /// rounding and floored at 1e-300 Λ; both keep it a β-smooth upper
    /// bound on the local sensitivity.
    pub fn smooth_sensitivity(&self, m: usize, beta: f64) -> Result<f64> {
        self.check_rank(m)?;
        let beta = positive_finite("beta", beta)?;
        let n = self.len();
        // w[k] = e^{-βk}, k = 0..=n.
        let mut w = Vec::with_capacity(n + 1);
        for k in 0..=n {
            w.push(exp(-(k as f64) * beta));
        }
        let mut best = 0.0f64;
        // Explicit stack of (row range, column range); rows i ∈ [0, m],
        // columns j ∈ [m, n+1].
        let mut stack: Vec<(usize, usize, usize, usize)> = Vec::with_capacity(64);
        stack.push((0, m, m, n + 1));
        while let Some((ilo, ihi, jlo, jhi)) = stack.pop() {
            if ilo > ihi {
                continue;
            }
            let mid = ilo + (ihi - ilo) / 2;
            let xi = self.padded(mid);
            let mut arg = jlo;
            let mut row_best = -1.0f64;
            for j in jlo..=jhi {
                // j >= m >= mid, so j - mid - 1 underflows only at j = mid = m,
                // where x_j - x_i = 0.
                let g = if j > mid {
                    (self.padded(j) - xi) * w[j - mid - 1]
                } else {
                    0.0
                };
                if g > row_best {
                    row_best = g;
                    arg = j;
                }
            }
            best = best.max(row_best);
            // Rows above mid keep columns [jlo, arg], rows below [arg, jhi].
            // If row mid is all zero, x_j = x_mid on [jlo, jhi]: rows above
            // then decrease in j (so their maximum is at or left of arg = jlo)
            // and rows below are zero, so the split stays exact.
            if mid > ilo {
                stack.push((ilo, mid - 1, jlo, arg));
            }
            if mid < ihi {
                stack.push((mid + 1, ihi, arg, jhi));
            }
        }
        Ok((best * (1.0 + ROUNDING_INFLATION)).max(self.lambda * FLOOR_FRACTION))
    }
}

/// The 1-based rank m = max(1, ⌈q n⌉) of the q-quantile of n values
/// (the lower median for q = 1/2 and even n).
///
/// ```
/// use geopriv::central::median::quantile_rank;
/// assert_eq!(quantile_rank(5, 0.5)?, 3);
/// assert_eq!(quantile_rank(4, 0.5)?, 2);
/// assert_eq!(quantile_rank(4, 0.0)?, 1);
/// # Ok::<(), geopriv::Error>(())
/// ```
pub fn quantile_rank(n: usize, q: f64) -> Result<usize> {
    if n == 0 {
        return Err(Error::InvalidData {
            index: 0,
            value: f64::NAN,
            reason: "the dataset is empty",
        });
    }
    if !(0.0..=1.0).contains(&q) {
        return Err(Error::InvalidParameter {
            name: "q",
            value: q,
            requirement: "a quantile level in [0, 1]",
        });
    }
    let m = libm::ceil(q * n as f64) as usize;
    Ok(m.clamp(1, n))
}

/// Which noise and which constants a central median/quantile release uses.
/// With `Fault`-free calibrations each is ε-DP (or (ε, δ)-DP) for the
/// Hamming metric (`docs/MATH.md §11.1`).
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum CentralNoise {
    /// PolyPlace(S/β, ε/β), no budget split; default β = ε/9.
    PolyPlace,
    /// Student's t with `dof` ν > 0: ε = νβ + ((ν+1)/(2√ν)) η, scale S/η;
    /// default β = ε/(3ν).
    StudentT {
        /// Degrees of freedom ν.
        dof: f64,
    },
    /// Density ∝ 1/(1+|z|^k), ν = k - 1: ε = νβ + ν^{ν/(ν+1)} η, scale S/η;
    /// default β = 0.2 ε/ν.
    Cauchy {
        /// Tail exponent k > 2.
        k: f64,
    },
    /// Laplace, (ε, δ): ε = η + max(β, (e^β - 1) ln(1/δ)), scale S/η;
    /// default (e^β - 1) max(1, ln 1/δ) = ε/2.
    Laplace {
        /// δ ∈ (0, 1).
        delta: f64,
    },
    /// Lecture notes (NRS07) reference: density ∝ 1/(1+|z|^k),
    /// β <= ε/(2(k+1)), scale 2(k+1)S/ε.
    LectureCauchy {
        /// Exponent k > 2.
        k: f64,
    },
    /// Lecture notes reference: Laplace, β <= ε/(2 ln(2/δ')), scale 2S/ε,
    /// (ε, δ'(e^{ε/2} + 1)/2)-DP; δ' is chosen so that this total is `delta`.
    LectureLaplace {
        /// Total δ ∈ (0, 1).
        delta: f64,
    },
}

impl CentralNoise {
    /// Student's t with ν = 3.
    pub const STUDENT_T: CentralNoise = CentralNoise::StudentT { dof: 3.0 };
    /// Generalized Cauchy with k = 4 (ν = 3).
    pub const CAUCHY: CentralNoise = CentralNoise::Cauchy { k: 4.0 };
    /// Every calibration at its default shape, δ = 1e-6 for the (ε, δ)
    /// ones: what the audits and the CLI table run.
    pub const ALL: [CentralNoise; 6] = [
        CentralNoise::PolyPlace,
        CentralNoise::STUDENT_T,
        CentralNoise::CAUCHY,
        CentralNoise::Laplace { delta: 1e-6 },
        CentralNoise::LectureCauchy { k: 4.0 },
        CentralNoise::LectureLaplace { delta: 1e-6 },
    ];

    /// The δ of the guarantee (0 for the pure ones).
    pub fn delta(&self) -> f64 {
        match *self {
            CentralNoise::Laplace { delta } | CentralNoise::LectureLaplace { delta } => delta,
            _ => 0.0,
        }
    }

    /// A short name: `polyplace`, `student-t`, `cauchy`, `laplace`,
    /// `lecture-cauchy`, `lecture-laplace`.
    pub fn name(&self) -> &'static str {
        match self {
            CentralNoise::PolyPlace => "polyplace",
            CentralNoise::StudentT { .. } => "student-t",
            CentralNoise::Cauchy { .. } => "cauchy",
            CentralNoise::Laplace { .. } => "laplace",
            CentralNoise::LectureCauchy { .. } => "lecture-cauchy",
            CentralNoise::LectureLaplace { .. } => "lecture-laplace",
        }
    }

    /// The default smoothness β for budget ε.
    pub fn default_beta(&self, epsilon: f64) -> Result<f64> {
        let epsilon = check_epsilon(epsilon)?;
        Ok(match *self {
            CentralNoise::PolyPlace => epsilon / 9.0,
            CentralNoise::StudentT { dof } => epsilon / (3.0 * positive_finite("dof", dof)?),
            CentralNoise::Cauchy { k } => 0.2 * epsilon / (check_k(k)? - 1.0),
            CentralNoise::Laplace { delta } => {
                let l = ln(1.0 / check_delta(delta)?).max(1.0);
                log1p(epsilon / (2.0 * l))
            }
            CentralNoise::LectureCauchy { k } => epsilon / (2.0 * (check_k(k)? + 1.0)),
            CentralNoise::LectureLaplace { delta } => {
                epsilon / (2.0 * ln(2.0 / lecture_delta(epsilon, check_delta(delta)?)))
            }
        })
    }

    /// The noise Z in units of S for budget ε and smoothness β, or a typed
    /// error if β is out of range for this calibration.
    pub fn unit_noise(&self, epsilon: f64, beta: f64) -> Result<Noise> {
        let epsilon = check_epsilon(epsilon)?;
        let beta = positive_finite("beta", beta)?;
        let out_of_range = |requirement| Error::InvalidParameter {
            name: "beta",
            value: beta,
            requirement,
        };
        Ok(match *self {
            CentralNoise::PolyPlace => {
                if beta >= epsilon {
                    return Err(out_of_range("< epsilon for PolyPlace"));
                }
                Noise::PolyPlace(PolyPlace::new(1.0 / beta, epsilon / beta)?)
            }
            CentralNoise::StudentT { dof } => {
                let nu = positive_finite("dof", dof)?;
                let rest = epsilon - nu * beta;
                if rest <= 0.0 {
                    return Err(out_of_range("< epsilon / dof for Student's t"));
                }
                let eta = rest * 2.0 * sqrt(nu) / (nu + 1.0);
                Noise::StudentT(StudentT::new(nu, 1.0 / eta)?)
            }
            CentralNoise::Cauchy { k } => {
                let nu = check_k(k)? - 1.0;
                let rest = epsilon - nu * beta;
                if rest <= 0.0 {
                    return Err(out_of_range("< epsilon / (k - 1) for the Cauchy family"));
                }
                let eta = rest / pow(nu, nu / (nu + 1.0));
                Noise::Cauchy(GeneralizedCauchy::new(k, 1.0 / eta)?)
            }
            CentralNoise::Laplace { delta } => {
                let l = ln(1.0 / check_delta(delta)?);
                let eta = epsilon - beta.max(expm1(beta) * l);
                if eta <= 0.0 {
                    return Err(out_of_range(
                        "such that max(beta, (e^beta - 1) ln(1/delta)) < epsilon",
                    ));
                }
                Noise::Laplace(Laplace::new(1.0 / eta)?)
            }
            CentralNoise::LectureCauchy { k } => {
                let k = check_k(k)?;
                if beta > epsilon / (2.0 * (k + 1.0)) {
                    return Err(out_of_range("<= epsilon / (2 (k + 1)) (lecture notes)"));
                }
                Noise::Cauchy(GeneralizedCauchy::new(k, 2.0 * (k + 1.0) / epsilon)?)
            }
            CentralNoise::LectureLaplace { delta } => {
                let d = lecture_delta(epsilon, check_delta(delta)?);
                if beta > epsilon / (2.0 * ln(2.0 / d)) {
                    return Err(out_of_range(
                        "<= epsilon / (2 ln(2/delta')) (lecture notes)",
                    ));
                }
                Noise::Laplace(Laplace::new(2.0 / epsilon)?)
            }
        })
    }
}

fn check_k(k: f64) -> Result<f64> {
    if k.is_finite() && k > 2.0 {
        Ok(k)
    } else {
        Err(Error::InvalidParameter {
            name: "k",
            value: k,
            requirement: "finite and > 2",
        })
    }
}

/// δ' with δ'(e^{ε/2} + 1)/2 = δ.
fn lecture_delta(epsilon: f64, delta: f64) -> f64 {
    2.0 * delta / (exp(0.5 * epsilon) + 1.0)
}

/// The density of one release y = location + scale · Z.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct ReleaseDensity {
    /// The true statistic x_m.
    pub location: f64,
    /// The smooth sensitivity S used as scale.
    pub scale: f64,
    /// Z (in units of S).
    pub noise: Noise,
}

impl ReleaseDensity {
    /// ln p(y) = ln p_Z((y - location)/scale) - ln scale.
    pub fn ln_pdf(&self, y: f64) -> f64 {
        self.noise.ln_pdf((y - self.location) / self.scale) - ln(self.scale)
    }

    /// P(release <= y).
    pub fn cdf(&self, y: f64) -> f64 {
        self.noise.cdf((y - self.location) / self.scale)
    }
}

/// A differentially private median / quantile release over [0, Λ]:
/// y = snap(x_m + S(x) · Z) with S(x) = max(S*_β(x), S_floor)
/// (`docs/MATH.md §11.1`, §11.5).
///
/// **Stated guarantee** (defaults, ε = 1, any Λ; numbers from
/// [`MedianMechanism::grid`], docs/MATH.md §8.4, §11.5): the ideal release
/// is (ε, δ)-DP for the Hamming metric; the implemented release is snapped
/// to a *relative* grid (cells of width max(Λ_min, 2^⌊log2|y|⌋ 2^-p),
/// Λ_min = 2^⌊log2 Λ⌋ 2^-p; for t also >= 2^-10 σ_ref), with per-cell
/// excess η over ε within z_max noise scales and δ_fp outside, measured
/// by `audit::enumeration::enumerate_median_pair`:
///
/// | kind | ε | δ | η | δ_fp | p |
/// |---|---|---|---|---|---|
/// | PolyPlace (α = 9) | 1 | 0 | 7.9e-9 | 1e-15 | 18 |
/// | Student's t (ν = 3) | 1 | 0 | 6.6e-9 | 1e-15 | 19 |
/// | generalized Cauchy (k = 4) | 1 | 0 | 6.7e-9 | 1e-15 | 19 |
/// | Laplace | 1 | δ | 8.5e-9 | 1e-15 | 20 |
///
/// Unlike a uniform grid the relative one does not coarsen with the tail:
/// the RMSE of every noise is within 1.07x of the unsnapped release on the
/// airports (`tests/central.rs`). S_floor = 2^-12 σ_ref / scale(Z): a
/// constant, so max(S*, S_floor) is still β-smooth (§11.5).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct MedianMechanism {
    kind: CentralNoise,
    epsilon: f64,
    lambda: f64,
    beta: f64,
    noise: Noise,
    /// Z at unit scale (what is sampled) and its scale.
    unit: Noise,
    unit_scale: f64,
    grid: CentralGrid,
    sensitivity_floor: f64,
    fault: Fault,
}

impl MedianMechanism {
    /// The mechanism with the default β of `kind` for budget ε on [0, Λ].
    pub fn new(kind: CentralNoise, epsilon: f64, lambda: f64) -> Result<Self> {
        let beta = kind.default_beta(epsilon)?;
        Self::with_beta(kind, epsilon, lambda, beta)
    }

    /// The mechanism with an explicit smoothness β (typed error when out of
    /// range for the calibration).
    pub fn with_beta(kind: CentralNoise, epsilon: f64, lambda: f64, beta: f64) -> Result<Self> {
        let lambda = positive_finite("lambda", lambda)?;
        let noise = kind.unit_noise(epsilon, beta)?;
        let (shape, unit_scale) = noise.shape_and_scale();
        // S*_β <= Λ (every difference is at most Λ, every weight at most 1),
        // inflated by ROUNDING_INFLATION; |x_m| <= Λ.
        let sigma_max = lambda * (1.0 + ROUNDING_INFLATION) * unit_scale;
        let grid = CentralGrid::new_relative(shape, sigma_max, lambda)?;
        let sensitivity_floor = grid.min_scale() / unit_scale;
        Ok(Self {
            kind,
            epsilon,
            lambda,
            beta,
            noise,
            unit: noise.unit()?,
            unit_scale,
            grid,
            sensitivity_floor,
            fault: Fault::None,
        })
    }

    /// The public release grid and the floating-point guarantee
    /// (η, δ_fp) of the implemented release (docs/MATH.md §11.5).
    pub fn grid(&self) -> CentralGrid {
        self.grid
    }

    /// The same mechanism with a deliberate calibration fault (for audits).
    pub fn with_fault(mut self, fault: Fault) -> Self {
        self.fault = fault;
        self
    }

    /// The noise family and constants.
    pub fn kind(&self) -> CentralNoise {
        self.kind
    }

    /// ε.
    pub fn epsilon(&self) -> f64 {
        self.epsilon
    }

    /// δ (0 for the pure mechanisms).
    pub fn delta(&self) -> f64 {
        self.kind.delta()
    }

    /// The smoothness β.
    pub fn beta(&self) -> f64 {
        self.beta
    }

    /// Λ.
    pub fn lambda(&self) -> f64 {
        self.lambda
    }

    /// The density of the release of the q-quantile of `data`.
    pub fn density(&self, data: &SortedDataset, q: f64) -> Result<ReleaseDensity> {
        if data.lambda() != self.lambda {
            return Err(Error::InvalidParameter {
                name: "lambda",
                value: data.lambda(),
                requirement: "equal to the mechanism's Λ",
            });
        }
        let m = data.quantile_rank(q)?;
        let (beta, factor) = match self.fault {
            Fault::None => (self.beta, 1.0),
            Fault::HalveSensitivity => (self.beta, 0.5),
            Fault::ShrinkSensitivity(f) => (self.beta, positive_finite("fault factor", f)?),
            Fault::WrongBeta(f) => (self.beta * positive_finite("fault factor", f)?, 1.0),
        };
        let s = data
            .smooth_sensitivity(m, beta)?
            .max(self.sensitivity_floor);
        Ok(ReleaseDensity {
            location: data.order_statistic(m)?,
            scale: factor * s,
            noise: self.noise,
        })
    }

    /// Release the q-quantile of raw values (validated, sorted here).
    pub fn release_quantile<R: Rng + ?Sized>(
        &self,
        values: &[f64],
        q: f64,
        rng: &mut R,
    ) -> Result<f64> {
        let data = SortedDataset::new(values, self.lambda)?;
        self.release(&data, q, rng)
    }

    /// Release the q-quantile of a validated dataset: x_m + σ Z₁ with
    /// σ = S · scale(Z) computed once and Z₁ the exact unit-scale draw,
    /// snapped to [`MedianMechanism::grid`].
    pub fn release<R: Rng + ?Sized>(
        &self,
        data: &SortedDataset,
        q: f64,
        rng: &mut R,
    ) -> Result<f64> {
        let (location, sigma) = self.location_and_scale(data, q)?;
        loop {
            let (u, negative) = crate::noise::unit_and_sign(rng);
            let second = match &self.unit {
                Noise::StudentT(_) => {
                    libm::cos(core::f64::consts::FRAC_PI_2 * crate::noise::unit_53(rng))
                }
                Noise::Cauchy(_) => crate::noise::uniform::full_resolution_uniform(rng),
                _ => 0.0,
            };
            if let Some(y) = self.release_at(location, sigma, u, negative, second) {
                return crate::error::release_number("value", y, true);
            }
        }
    }

    /// The centre x_m and the scale σ = S · scale(Z) of the release of the
    /// q-quantile (what the sampler and the exact enumeration use).
    pub fn location_and_scale(&self, data: &SortedDataset, q: f64) -> Result<(f64, f64)> {
        let d = self.density(data, q)?;
        Ok((d.location, d.scale * self.unit_scale))
    }

    /// The shape of the unit-scale noise Z₁ the release samples.
    pub fn unit_shape(&self) -> crate::mechanism::NoiseShape {
        self.unit.shape_and_scale().0
    }

    /// The one function from a draw to a released value, shared by
    /// [`MedianMechanism::release`] and the exact enumeration
    /// (`audit::enumeration::enumerate_median_pair`): the grid's cell of
    /// location ± σ m, m the unit noise magnitude at the full-resolution
    /// uniform `u` (and the second draw of t and Cauchy); `None` when
    /// Jöhnk rejects.
    #[inline]
    pub(crate) fn release_at(
        &self,
        location: f64,
        sigma: f64,
        u: f64,
        negative: bool,
        second: f64,
    ) -> Option<f64> {
        let m = match &self.unit {
            Noise::Laplace(l) => l.magnitude_at(u),
            Noise::PolyPlace(p) => p.magnitude_at(u),
            Noise::StudentT(t) => t.value_from(u, second),
            Noise::Cauchy(c) => c.magnitude_from(u, second)?,
        };
        Some(
            self.grid
                .snap_value(location + sigma * if negative { -m } else { m }),
        )
    }

    /// Standard deviation of the release noise for `data` (None if the
    /// variance is infinite): the error bar of the release.
    pub fn noise_std(&self, data: &SortedDataset, q: f64) -> Result<Option<f64>> {
        let d = self.density(data, q)?;
        Ok(self.noise.variance().map(|v| d.scale * sqrt(v)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::rngs::StdRng;
    use rand::{Rng, SeedableRng};

    fn check(values: &[f64], lambda: f64, q: f64, beta: f64) {
        let d = SortedDataset::new(values, lambda).unwrap();
        let m = d.quantile_rank(q).unwrap();
        let fast = d.smooth_sensitivity(m, beta).unwrap();
        let naive = d.smooth_sensitivity_naive(m, beta).unwrap();
        assert!(
            fast >= naive && fast <= naive.max(lambda * FLOOR_FRACTION) * (1.0 + 1e-11),
            "fast {fast} naive {naive} for {values:?} q {q} beta {beta}"
        );
        assert!(fast >= d.local_sensitivity(m).unwrap());
    }

    #[test]
    fn fast_matches_definition_on_random_and_adversarial_data() {
        let mut rng = StdRng::seed_from_u64(1);
        for trial in 0..3000 {
            let n = rng.random_range(1..60);
            let lambda = [1.0, 10.0, 1e6][trial % 3];
            let style = trial % 5;
            let values: Vec<f64> = (0..n)
                .map(|_| match style {
                    0 => rng.random::<f64>() * lambda,
                    // ties on a coarse grid, including 0 and Λ
                    1 => (rng.random_range(0..4) as f64) / 3.0 * lambda,
                    // all equal
                    2 => 0.37 * lambda,
                    // clustered with outliers at the ends
                    3 => {
                        if rng.random::<f64>() < 0.2 {
                            if rng.random::<bool>() {
                                0.0
                            } else {
                                lambda
                            }
                        } else {
                            lambda * (0.5 + 0.01 * rng.random::<f64>())
                        }
                    }
                    _ => (rng.random::<f64>().powi(8)) * lambda,
                })
                .collect();
            let q = [0.5, 0.0, 1.0, 0.1, 0.9, rng.random::<f64>()][trial % 6];
            let beta = [1e-3, 0.05, 0.5, 3.0][trial % 4];
            check(&values, lambda, q, beta);
        }
        check(&[0.3], 1.0, 0.5, 0.1);
        check(&[0.0, 1.0], 1.0, 0.5, 0.1);
        check(&[1.0; 7], 1.0, 0.5, 0.01);
        check(&[0.0; 8], 1.0, 0.5, 0.01);
    }

    #[test]
    fn evenly_spread_matches_the_lecture_formula() {
        // x_i = i/n: S* = max_k e^{-kβ}(k+1)/n.
        let n = 1001;
        let values: Vec<f64> = (1..=n).map(|i| i as f64 / n as f64).collect();
        let beta = 0.01;
        let d = SortedDataset::new(&values, 1.0).unwrap();
        let s = d
            .smooth_sensitivity(d.quantile_rank(0.5).unwrap(), beta)
            .unwrap();
        let want = (0..n)
            .map(|k| exp(-(k as f64) * beta) * (k + 1) as f64 / n as f64)
            .fold(0.0, f64::max);
        assert!((s - want).abs() <= 1e-9 * want, "{s} vs {want}");
    }

    #[test]
    fn bad_input_is_a_typed_error() {
        assert!(matches!(
            SortedDataset::new(&[], 1.0),
            Err(Error::InvalidData { .. })
        ));
        for bad in [f64::NAN, -0.1, 1.5, f64::INFINITY] {
            assert!(matches!(
                SortedDataset::new(&[0.2, bad], 1.0),
                Err(Error::InvalidData { index: 1, .. })
            ));
        }
        for lambda in [0.0, -1.0, f64::NAN, f64::INFINITY] {
            assert!(SortedDataset::new(&[0.0], lambda).is_err());
        }
        let d = SortedDataset::new(&[0.5], 1.0).unwrap();
        assert!(d.smooth_sensitivity(1, 0.0).is_err());
        assert!(d.smooth_sensitivity(1, f64::NAN).is_err());
        assert!(d.smooth_sensitivity(2, 0.1).is_err());
        assert!(d.quantile_rank(1.5).is_err());
        for eps in [0.0, -1.0, f64::NAN] {
            assert!(MedianMechanism::new(CentralNoise::PolyPlace, eps, 1.0).is_err());
        }
        assert!(MedianMechanism::with_beta(CentralNoise::PolyPlace, 1.0, 1.0, 1.0).is_err());
        assert!(MedianMechanism::with_beta(CentralNoise::STUDENT_T, 1.0, 1.0, 0.34).is_err());
        assert!(MedianMechanism::with_beta(CentralNoise::CAUCHY, 1.0, 1.0, 0.34).is_err());
        assert!(
            MedianMechanism::with_beta(CentralNoise::Laplace { delta: 1e-6 }, 1.0, 1.0, 0.1)
                .is_err()
        );
        assert!(MedianMechanism::new(CentralNoise::Laplace { delta: 0.0 }, 1.0, 1.0).is_err());
        assert!(MedianMechanism::new(CentralNoise::Laplace { delta: 1.0 }, 1.0, 1.0).is_err());
        assert!(MedianMechanism::new(CentralNoise::Cauchy { k: 2.0 }, 1.0, 1.0).is_err());
        let m = MedianMechanism::new(CentralNoise::PolyPlace, 1.0, 1.0).unwrap();
        let mut rng = StdRng::seed_from_u64(0);
        assert!(m.release_quantile(&[0.5, 2.0], 0.5, &mut rng).is_err());
    }

    #[test]
    fn releases_are_snapped_and_the_guarantees_are_stated() {
        let mut rng = StdRng::seed_from_u64(9);
        for kind in [
            CentralNoise::PolyPlace,
            CentralNoise::STUDENT_T,
            CentralNoise::CAUCHY,
            CentralNoise::Laplace { delta: 1e-6 },
        ] {
            let m = MedianMechanism::new(kind, 1.0, 50.0).unwrap();
            let g = m.grid();
            std::println!("{}: {g:?}", kind.name());
            // The numbers stated in the table of MedianMechanism.
            assert!(g.fp.eta <= 1.000_001e-8, "{g:?}");
            assert!(g.fp.delta_fp <= 2e-13, "{g:?}");
            assert_eq!(g.grid.to_bits() & 0x000F_FFFF_FFFF_FFFF, 0, "power of two");
            assert!(g.reference_scale >= 50.0 / 64.0);
            for _ in 0..200 {
                let y = m
                    .release_quantile(&[1.0, 2.0, 3.0, 40.0], 0.5, &mut rng)
                    .unwrap();
                assert_eq!(y, (y / g.grid).round() * g.grid);
            }
            // The floor: all-equal data has S* = 0 but the scale stays put.
            let d = SortedDataset::new(&[7.0; 1000], 50.0).unwrap();
            let dens = m.density(&d, 0.5).unwrap();
            assert!(dens.scale * m.unit_scale >= g.min_scale() * (1.0 - 1e-15));
        }
    }

    #[test]
    fn default_betas_are_in_range_for_every_noise() {
        for kind in CentralNoise::ALL {
            for eps in [0.01, 0.5, 1.0, 5.0] {
                let m = MedianMechanism::new(kind, eps, 10.0).unwrap();
                let mut rng = StdRng::seed_from_u64(3);
                let y = m.release_quantile(&[1.0, 2.0, 3.0], 0.5, &mut rng).unwrap();
                assert!(y.is_finite());
            }
        }
    }
}
