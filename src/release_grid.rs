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
//! for every cell within |z| <= z_max, using σ <= σ_max < 2Λ 2^k and
//! |f| <= F σ_max with F = [`VALUE_SPAN_BOUND`]. z_max is the point where the
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
        let shape = shape.unwrap_or(NoiseShape::Laplace);
        let (jitter, tail): (f64, &dyn Fn(f64) -> f64) = match shape {
            NoiseShape::Laplace => (2.0, &|z: f64| libm::exp(-z)),
            NoiseShape::PolyPlace { alpha } => match PolyPlace::new(1.0, alpha) {
                Ok(d) => (12.0, &move |z: f64| 2.0 * d.cdf(-z)),
                Err(_) => return Self::coarsest(),
            },
            NoiseShape::StudentT { dof } => match StudentT::new(dof, 1.0) {
                Ok(d) => (4.0, &move |z: f64| 2.0 * d.cdf(-z)),
                Err(_) => return Self::coarsest(),
            },
            NoiseShape::GeneralizedCauchy { k } => match GeneralizedCauchy::new(k, 1.0) {
                Ok(d) => (4.0, &move |z: f64| 2.0 * d.cdf(-z)),
                Err(_) => return Self::coarsest(),
            },
        };
        Self::from_tail(jitter, tail)
    }

    fn from_tail(jitter: f64, tail: &dyn Fn(f64) -> f64) -> Self {
        let z_max = quantile_of_tail(tail, DELTA_FP_TARGET);
        let budget = |z: f64| (jitter + 2.0) * z + VALUE_SPAN_BOUND;
        // 2^{k-50} budget <= η_target.
        let k = libm::floor(libm::log2(ETA_TARGET / budget(z_max)) + 50.0);
        if k >= 0.0 {
            let k = (k as i32).min(MAX_GRID_BITS);
            Self {
                grid_bits: k as u32,
                z_max,
                eta: libm::ldexp(budget(z_max), k - 50),
                delta_fp: tail(z_max),
            }
        } else {
            // k = 0: lower z_max until η = η_target.
            let z = (libm::ldexp(ETA_TARGET, 50) - VALUE_SPAN_BOUND) / (jitter + 2.0);
            Self {
                grid_bits: 0,
                z_max: z,
                eta: libm::ldexp(budget(z), -50),
                delta_fp: tail(z),
            }
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
        assert_eq!(g.grid_bits, 0);
        assert!(g.eta <= ETA_TARGET * 1.000_001);
        assert!(g.delta_fp > DELTA_FP_TARGET && g.delta_fp < 1e-11, "{g:?}");
    }
}
