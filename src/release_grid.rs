//! The public release grid Λ and the floating-point guarantee (η, δ_fp)
//! of every mechanism (docs/MATH.md §8.1).
//!
//! A release is y = snap(f(x) + σ(x) Z) with snap to the nearest multiple
//! of the power of two Λ = 2^⌊log2 σ_max⌋ · 2^-k, where σ_max is the largest
//! noise scale the public parameters allow (S <= L_global). The snapped
//! *ideal* release is post-processing of the continuous one, so its cell
//! probabilities satisfy P_x(c) <= e^{εd} P_x'(c) exactly. The implemented
//! sampler differs from the ideal one only by where its arithmetic puts
//! the cell boundaries:
//!
//! * Z is computed from a full-resolution uniform ([`crate::noise::uniform`])
//!   with a rounding jitter of at most `c` units of 2^-53 relative to |Z|
//!   (c per noise below: a few ulp of `ln`, `pow`, `exp` and products);
//! * σZ and f + σZ add 2^-53 |σZ| and 2^-53 |y|.
//!
//! So the computed y is within e_y <= 2^-53 ((c + 2) σ |z| + |f|) of the
//! exact value, and the implemented mass of a cell lies between the ideal
//! masses of the cell shrunk and widened by e_y at both ends: its log
//! differs from the ideal one by at most 2 e_y / Λ (the density is
//! constant to 1 + O(Λ/σ) over a cell). For a pair x, x' the two errors
//! add:
//!
//! ```text
//! ln(P_x(c)/P_x'(c)) <= ε d + η,   η = 4 e_y/Λ <= 2^{k-50} ((c + 2) z_max + F)
//! ```
//!
//! for every cell within |z| <= z_max, using σ <= σ_ref < 2Λ 2^k and
//! |f| <= F σ_ref with F = [`VALUE_SPAN_BOUND`]. The reference scale is
//! σ_ref = max(σ_max, sup|f|/F), so the bound |f| <= F σ_ref holds by
//! construction at every ε (docs/MATH.md §8.4; at huge ε, σ_max alone
//! would make the grid finer than the rounding of f).
//!
//! Where σ(x) is small against Λ the density is not constant across a
//! cell; with ln p K-Lipschitz in z (K per noise below) a boundary moved
//! by e changes the log mass of a cell of width w by at most
//! 2 (e/w + K e/σ) per input. Every release floors its scale at
//! σ_ref 2^-[`SCALE_FLOOR_BITS`] (a constant: max(S, c) is still a
//! smooth bound, and a constant scale is still private), which bounds
//! the second term:
//!
//! ```text
//! η <= 2^{k-50} ((c + 2) z_max + F) + 4 K 2^-53 ((c + 2) z_max + F 2^b)
//! ```
//!
//! with b = [`SCALE_FLOOR_BITS`]. z_max is the point where the
//! two-sided tail P(|Z| > z_max) reaches δ_fp = 1e-15, and k is the finest
//! grid with η <= 1e-8. Heavy tails (Student's t, generalized Cauchy) need
//! a large z_max and hence a coarse grid; PolyPlace with a large γ share
//! too. Where no k >= 0 reaches η <= 1e-8 at δ_fp = 1e-15, k = 0 and z_max
//! is lowered until η = 1e-8, and δ_fp = P(|Z| > z_max) is what is stated.
//! The exact enumeration (`audit::enumeration`) measures both figures.
//!
//! The grid costs utility only through rounding: at most Λ/2 per report,
//! variance about Λ²/12, and a bias bounded by the Fourier coefficients of
//! the noise at 2π/Λ (negligible once σ(x) is a few Λ; symmetric noise and
//! the symmetric rounding `round` keep E\[y\] = f(x) whenever f(x) is on the
//! grid or σ(x) >> Λ).

use crate::mechanism::NoiseShape;
use crate::noise::{GeneralizedCauchy, PolyPlace, StudentT};

/// The η goal: per-cell excess of the log probability ratio over ε d.
pub const ETA_TARGET: f64 = 1e-8;
/// The δ_fp goal: mass of the outputs that may exceed ε d + η.
pub const DELTA_FP_TARGET: f64 = 1e-15;
/// Assumed bound F on |f(x)| / σ_max in the η formula (the bundled queries
/// have |f| <= 1; σ_max >= 1/64 holds at every setting of docs/MATH.md §7).
pub const VALUE_SPAN_BOUND: f64 = 64.0;
/// The finest grid used (k <= 32, round 1's grid).
const MAX_GRID_BITS: i32 = 32;
/// b: every release floors its noise scale at σ_ref · 2^-b (module docs).
pub const SCALE_FLOOR_BITS: i32 = 12;

/// σ_ref = max(σ_max, sup|f| / F): the scale the grid and the floor are
/// set from (module docs). `None` unless both inputs and the result are
/// finite and the result is a positive normal number.
///
/// ```
/// use geopriv::release_grid::reference_scale;
/// assert_eq!(reference_scale(9e-8, 1.0), Some(1.0 / 64.0));
/// assert_eq!(reference_scale(9.0, 1.0), Some(9.0));
/// ```
pub fn reference_scale(sigma_max: f64, value_bound: f64) -> Option<f64> {
    let r = sigma_max.max(value_bound.abs() / VALUE_SPAN_BOUND);
    (r.is_normal() && r > 0.0 && sigma_max.is_finite() && value_bound.is_finite()).then_some(r)
}

/// The smallest noise scale a release uses: σ_ref · 2^-[`SCALE_FLOOR_BITS`].
#[inline]
pub fn scale_floor(reference_scale: f64) -> f64 {
    libm::ldexp(reference_scale, -SCALE_FLOOR_BITS)
}

/// The floating-point guarantee of a mechanism's implemented release.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct FloatingPointGuarantee {
    /// k: the release grid is Λ = 2^⌊log2 σ_max⌋ · 2^-k.
    pub grid_bits: u32,
    /// Cells within |z| <= z_max noise scales of f(x) are covered by η.
    pub z_max: f64,
    /// Per-cell excess: ln(P_x(c)/P_x'(c)) <= ε d + η within z_max.
    pub eta: f64,
    /// Mass beyond z_max (where η is not claimed), two-sided.
    pub delta_fp: f64,
}

impl FloatingPointGuarantee {
    /// Λ / 2^⌊log2 σ_max⌋ = 2^-k.
    pub fn grid_fraction(&self) -> f64 {
        libm::ldexp(1.0, -(self.grid_bits as i32))
    }

    /// The guarantee for a location–scale release with noise `shape`
    /// (`None`: noise a priori, whose 1-D form is Laplace).
    ///
    /// ```
    /// use geopriv::release_grid::FloatingPointGuarantee;
    /// use geopriv::NoiseShape;
    /// let g = FloatingPointGuarantee::for_shape(Some(NoiseShape::Laplace));
    /// assert!(g.eta <= 1e-8 && g.delta_fp <= 1e-15);
    /// ```
    pub fn for_shape(shape: Option<NoiseShape>) -> Self {
        with_constants(shape.unwrap_or(NoiseShape::Laplace), Self::from_tail)
            .unwrap_or_else(Self::coarsest)
    }

    /// The guarantee on the *relative* grid of [`snap_relative`]: cells of
    /// width max(Λ_min, 2^⌊log2|y|⌋ 2^-p) with Λ_min = 2^⌊log2 F⌋ 2^-p (F
    /// the public bound on |f|); `grid_bits` is p. Cells grow with |y|, so
    /// the boundary error e <= 2^-53 ((c + 2)|y - f| + |f|) stays a fixed
    /// fraction of the cell at every |y|, and the grid need not be coarse
    /// for heavy tails (docs/MATH.md §8.4):
    ///
    /// ```text
    /// η <= 4 (2^{p-52} (2c + 5) + K 2^-53 ((c + 2) z_max + 64 · 2^b))
    /// ```
    ///
    /// with K the Lipschitz constant of ln p and b = [`SCALE_FLOOR_BITS`];
    /// p is the largest with η <= 1e-8 and δ_fp = P(|Z| > z_max) = 1e-15.
    ///
    /// ```
    /// use geopriv::release_grid::FloatingPointGuarantee;
    /// use geopriv::NoiseShape;
    /// let g = FloatingPointGuarantee::relative_for_shape(NoiseShape::StudentT { dof: 3.0 });
    /// assert_eq!(g.grid_bits, 19);
    /// assert!(g.eta <= 1e-8 && g.delta_fp <= 1.000_001e-15);
    /// ```
    pub fn relative_for_shape(shape: NoiseShape) -> Self {
        with_constants(shape, |jitter, lipschitz, tail| {
            let z_max = quantile_of_tail(tail, DELTA_FP_TARGET);
            let floor_term = 4.0
                * lipschitz
                * libm::ldexp(
                    (jitter + 2.0) * z_max + libm::ldexp(VALUE_SPAN_BOUND, SCALE_FLOOR_BITS),
                    -53,
                );
            let eta = |p: i32| 4.0 * libm::ldexp(2.0 * jitter + 5.0, p - 52) + floor_term;
            let mut p = MAX_GRID_BITS;
            while p > 0 && eta(p) > ETA_TARGET {
                p -= 1;
            }
            Self {
                grid_bits: p as u32,
                z_max,
                eta: eta(p),
                delta_fp: tail(z_max),
            }
        })
        .unwrap_or_else(Self::coarsest)
    }

    /// The guarantee of a vector of m coordinates f_j(x) + b Z_j, Z_j
    /// independent Laplace(1), each snapped to 2^⌊log2 σ_ref⌋ 2^-k with
    /// σ_ref = max(b, sup|f_j|/64) (vector Laplace of a map, docs/MATH.md
    /// §8.4). A vector cell's log mass is the sum of its coordinates', so
    /// the pair's excess is at most m times a coordinate's, and δ_fp is at
    /// most m times a coordinate's tail: each coordinate is given η/m and
    /// δ_fp/m, and η, δ_fp below are the vector's.
    ///
    /// ```
    /// use geopriv::release_grid::FloatingPointGuarantee;
    /// let g = FloatingPointGuarantee::for_laplace_vector(961);
    /// assert!(g.eta <= 1e-8 && g.delta_fp <= 1.000_001e-15);
    /// assert!(g.grid_bits >= 4);
    /// ```
    pub fn for_laplace_vector(m: usize) -> Self {
        let m = m.max(1) as f64;
        let tail = |z: f64| libm::exp(-z);
        // The scale is floored at σ_ref itself (b >= 1/64), so |f| <= 64 σ.
        let one = Self::from_tail_with(2.0, 1.0, &tail, ETA_TARGET / m, DELTA_FP_TARGET / m, 0);
        Self {
            eta: one.eta * m,
            delta_fp: one.delta_fp * m,
            ..one
        }
    }

    fn from_tail(jitter: f64, lipschitz: f64, tail: &dyn Fn(f64) -> f64) -> Self {
        Self::from_tail_with(
            jitter,
            lipschitz,
            tail,
            ETA_TARGET,
            DELTA_FP_TARGET,
            SCALE_FLOOR_BITS,
        )
    }

    fn from_tail_with(
        jitter: f64,
        lipschitz: f64,
        tail: &dyn Fn(f64) -> f64,
        eta_target: f64,
        delta_fp_target: f64,
        floor_bits: i32,
    ) -> Self {
        let z_max = quantile_of_tail(tail, delta_fp_target);
        let budget = |z: f64| (jitter + 2.0) * z + VALUE_SPAN_BOUND;
        // The K e/σ term of the module docs, against the scale floor.
        let floor_term = |z: f64| {
            4.0 * lipschitz
                * libm::ldexp(
                    (jitter + 2.0) * z + libm::ldexp(VALUE_SPAN_BOUND, floor_bits),
                    -53,
                )
        };
        // 2^{k-50} budget + floor_term <= η_target.
        let room = eta_target - floor_term(z_max);
        let k = if room > 0.0 {
            libm::floor(libm::log2(room / budget(z_max)) + 50.0)
        } else {
            -1.0
        };
        if k >= 0.0 {
            let k = (k as i32).min(MAX_GRID_BITS);
            Self {
                grid_bits: k as u32,
                z_max,
                eta: libm::ldexp(budget(z_max), k - 50) + floor_term(z_max),
                delta_fp: tail(z_max),
            }
        } else {
            // k = 0: lower z_max until η = η_target (η is linear in z).
            let at = |z: f64| libm::ldexp(budget(z), -50) + floor_term(z);
            let slope = at(1.0) - at(0.0);
            let z = ((eta_target - at(0.0)) / slope).max(0.0);
            Self {
                grid_bits: 0,
                z_max: z,
                eta: at(z),
                delta_fp: tail(z),
            }
        }
    }

    /// The guarantee of a noisy point x̃ = x + N in R^d (noise a priori,
    /// density ∝ e^{-ε|z|}), snapped per coordinate to 2^⌊log2(1/ε)⌋ 2^-k
    /// by the exact-offset sum of docs/MATH.md §8.4: the rounding of each
    /// coordinate is at most e = 2^-53 ((c + 1)|N| + Λ/2) whatever |x|, so
    ///
    /// ```text
    /// η <= 4d (e/Λ + ε e) <= d 2^{k-50} (c + 1) z_max (1 + 2^-k) + d 2^-50
    /// ```
    ///
    /// within radius z_max/ε (c = 2 in 1-D, 6 in the plane, 8 above), and
    /// k is the largest grid exponent with η <= 1e-8.
    ///
    /// ```
    /// use geopriv::release_grid::FloatingPointGuarantee;
    /// let g = FloatingPointGuarantee::for_noisy_point(1);
    /// assert_eq!(g.grid_bits, 16);
    /// assert!(g.eta <= 1e-8 && g.delta_fp <= 1e-15);
    /// ```
    pub fn for_noisy_point(d: usize) -> Self {
        let d = d.max(1);
        let c = match d {
            1 => 2.0,
            2 => 6.0,
            _ => 8.0,
        };
        let z_max = radius_quantile(d);
        let df = d as f64;
        let eta = |k: i32| {
            df * libm::ldexp((c + 1.0) * z_max * (1.0 + libm::ldexp(1.0, -k)), k - 50)
                + df * libm::ldexp(1.0, -50)
        };
        let mut k = MAX_GRID_BITS;
        while k > 0 && eta(k) > ETA_TARGET {
            k -= 1;
        }
        Self {
            grid_bits: k as u32,
            z_max,
            eta: eta(k),
            delta_fp: DELTA_FP_TARGET,
        }
    }

    fn coarsest() -> Self {
        Self {
            grid_bits: 0,
            z_max: 0.0,
            eta: f64::INFINITY,
            delta_fp: 1.0,
        }
    }
}

/// Call `f(c, K, tail)` with the constants of noise `shape`: the jitter c
/// of its sampler in units of 2^-53 |z|, the Lipschitz constant K of
/// ln p(z), and the two-sided tail P(|Z| > z). `None` if the shape is
/// invalid.
fn with_constants<T>(
    shape: NoiseShape,
    f: impl FnOnce(f64, f64, &dyn Fn(f64) -> f64) -> T,
) -> Option<T> {
    Some(match shape {
        NoiseShape::Laplace => f(2.0, 1.0, &|z: f64| libm::exp(-z)),
        NoiseShape::PolyPlace { alpha } => {
            let d = PolyPlace::new(1.0, alpha).ok()?;
            f(12.0, alpha + 1.0, &move |z: f64| 2.0 * d.cdf(-z))
        }
        NoiseShape::StudentT { dof } => {
            let d = StudentT::new(dof, 1.0).ok()?;
            // |d ln p/dz| = (ν+1)|z|/(ν+z²) <= (ν+1)/(2√ν).
            f(
                4.0,
                (dof + 1.0) / (2.0 * libm::sqrt(dof)),
                &move |z: f64| 2.0 * d.cdf(-z),
            )
        }
        NoiseShape::GeneralizedCauchy { k } => {
            let d = GeneralizedCauchy::new(k, 1.0).ok()?;
            // |d ln p/dz| = k|z|^{k-1}/(1+|z|^k) <= (k-1)^{(k-1)/k}.
            f(4.0, libm::pow(k - 1.0, (k - 1.0) / k), &move |z: f64| {
                2.0 * d.cdf(-z)
            })
        }
    })
}

/// The width of the relative grid's cells at magnitude a >= 0:
/// max(Λ_min, 2^⌊log2 a⌋ 2^-p).
#[inline]
fn relative_width(a: f64, floor: f64, bits: u32) -> f64 {
    let binade = if a.is_normal() {
        f64::from_bits(a.to_bits() & 0x7FF0_0000_0000_0000)
    } else {
        0.0
    };
    libm::ldexp(binade, -(bits as i32)).max(floor)
}

/// Snap y to the relative grid: the nearest multiple of
/// w = max(`floor`, 2^⌊log2|y|⌋ 2^-`bits`), ties away from zero; odd
/// (snap(-y) = -snap(y)) and monotone in y. A power of two 2^j above the
/// floor's range is the common end point of two binades; its cell is
/// [2^j - w/4, 2^j + w/2) (see [`relative_cell`]).
///
/// ```
/// use geopriv::release_grid::snap_relative;
/// assert_eq!(snap_relative(1000.3, 1.0 / 1024.0, 10), 1000.5);
/// assert_eq!(snap_relative(0.0001, 1.0 / 1024.0, 10), 0.0);
/// assert_eq!(snap_relative(-1000.3, 1.0 / 1024.0, 10), -1000.5);
/// ```
#[inline]
pub fn snap_relative(y: f64, floor: f64, bits: u32) -> f64 {
    let w = relative_width(y.abs(), floor, bits);
    libm::round(y / w) * w
}

/// The cell [lo, hi] of the value v of [`snap_relative`] and the values
/// of the next cells below and above it (for the exact enumeration).
pub fn relative_cell(v: f64, floor: f64, bits: u32) -> ((f64, f64), (f64, f64)) {
    let a = v.abs();
    let w = relative_width(a, floor, bits);
    // Just below a power of two of the relative range, the width halves.
    let below = if a > 0.0 && relative_width(a * (1.0 - f64::EPSILON), floor, bits) < w {
        0.5 * w
    } else {
        w
    };
    let (lo, hi, down, up) = if a == 0.0 {
        (-0.5 * w, 0.5 * w, -w, w)
    } else {
        (a - 0.5 * below, a + 0.5 * w, a - below, a + w)
    };
    if v < 0.0 {
        ((-hi, -lo), (-up, -down))
    } else {
        ((lo, hi), (down, up))
    }
}

/// z with P(radius of N > z/ε) = 1e-15 for the d-dimensional noise of
/// density ∝ e^{-ε|z|} (radius Gamma(d, 1/ε): tail e^{-z} Σ_{i<d} z^i/i!),
/// by [`quantile_of_tail`].
pub(crate) fn radius_quantile(d: usize) -> f64 {
    let tail = |z: f64| {
        let mut term = 1.0;
        let mut sum = 1.0;
        for i in 1..d {
            term *= z / i as f64;
            sum += term;
        }
        libm::exp(-z) * sum
    };
    quantile_of_tail(&tail, DELTA_FP_TARGET)
}

/// The smallest z (to 1e-12 relative) with tail(z) <= p, by bisection on
/// ln z over [2^-10, 2^200] (tail is decreasing).
fn quantile_of_tail(tail: &dyn Fn(f64) -> f64, p: f64) -> f64 {
    let (mut lo, mut hi) = (-10.0f64, 200.0f64);
    for _ in 0..64 {
        let mid = 0.5 * (lo + hi);
        if tail(libm::exp2(mid)) <= p {
            hi = mid;
        } else {
            lo = mid;
        }
    }
    libm::exp2(hi)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_reach_the_goals() {
        for shape in [
            NoiseShape::Laplace,
            NoiseShape::PolyPlace { alpha: 9.0 },
            NoiseShape::StudentT { dof: 3.0 },
            NoiseShape::GeneralizedCauchy { k: 4.0 },
        ] {
            let g = FloatingPointGuarantee::for_shape(Some(shape));
            assert!(g.eta <= ETA_TARGET, "{shape:?}: {g:?}");
            assert!(
                g.delta_fp <= DELTA_FP_TARGET * 1.000_001,
                "{shape:?}: {g:?}"
            );
            std::println!("{shape:?}: {g:?}");
        }
        let laplace = FloatingPointGuarantee::for_shape(None);
        assert!((laplace.z_max - (1e15f64).ln()).abs() < 1e-9);
    }

    #[test]
    fn heavy_polyplace_states_what_it_reaches() {
        // γ share 1/2: α = 2, tail ~ z^-2: no grid reaches both goals.
        let g = FloatingPointGuarantee::for_shape(Some(NoiseShape::PolyPlace { alpha: 2.0 }));
        std::println!("{g:?}");
        assert_eq!(g.grid_bits, 0, "{g:?}");
        assert!(g.eta <= ETA_TARGET * 1.000_001, "{g:?}");
        assert!(g.delta_fp > DELTA_FP_TARGET && g.delta_fp < 1e-10, "{g:?}");
    }
}
