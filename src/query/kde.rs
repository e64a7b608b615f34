//! `GaussianKde`: Gaussian kernel density at a query point (docs/MATH.md §3.4), and
//! the one-dimensional machinery behind its exact smooth sensitivity.
//!
//! # The analysis, in bandwidth units
//!
//! f is radial: with φ(u) = exp(-u²/2) and c = ||x - t||/h, f(x) = φ(c).
//! For a point y at scaled radius ρ the closest partner at radius r lies on
//! the same ray, so L(y) = ℓ(ρ)/h with
//!
//! ```text
//! ℓ(ρ) = sup_{r >= 0} |φ(r) - φ(ρ)| / |r - ρ|
//! ```
//!
//! and, since the closest y at radius ρ is at distance h|ρ - c| from x,
//!
//! ```text
//! S*(x) = (1/h) · sup_{ρ >= 0} ℓ(ρ) / g(h |ρ - c|).
//! ```
//!
//! **Inner problem (ℓ).** Let T(r) = φ(r) - φ(ρ) - φ'(r)(r - ρ); the secant
//! slope s(r) has s'(r) = -T(r)/(r - ρ)² and T'(r) = -(r² - 1)(r - ρ)φ(r).
//! Working through the signs shows: for ρ > 1, T > 0 on [0, r*) and T < 0 on
//! (r*, ∞) \ {ρ} with a unique r* in (0, 1); for ρ < 1 the same holds with
//! r* in (1, ∞). So |s| increases up to r* and decreases after it: the
//! supremum is attained at the *tangency partner* r*, where the tangent of
//! φ at r* passes through (ρ, φ(ρ)), and
//!
//! ```text
//! ℓ(ρ) = ψ(r*(ρ)),   ψ(u) = u φ(u) = |φ'(u)|,   r*(1) = 1.
//! ```
//!
//! (The candidates r = ρ and r = 0 of docs/MATH.md §3.4 never win except at
//! ρ = 1, where r* = ρ.) r* solves V(r) = 1 + r(r - ρ) - exp((r² - ρ²)/2) = 0
//! (V = T/φ(r)); we solve it by safeguarded Newton on the bracket [0, 1] or
//! [1, 1.6]. V also has a double root at r = ρ, which merges with r* as
//! ρ -> 1 and would cost a third of the digits there (r* off by 2e-6 and ℓ
//! by 4e-12 at ρ = 1 - 1e-6); for ρ <= 2 we therefore solve
//! W = V/(r - ρ)² = 1/2 - m² (e^x - 1 - x)/x² (m = (r + ρ)/2,
//! x = (r² - ρ²)/2), whose root is simple. At ρ = 0 the root is closed-form through Lambert W:
//! r*(0)² = 2u with 1 + 2u = e^u, u = -W₋₁(-e^{-1/2}/2) - 1/2.
//!
//! **A closed form for the slope of ln ℓ.** Differentiating along the
//! tangency curve gives
//!
//! ```text
//! ℓ'(ρ) = (ψ(r*) - ψ(ρ)) / (r* - ρ),   and with T(r*) = 0:
//! (ln ℓ)'(ρ) = 1/r*(ρ) - ρ.
//! ```
//!
//! **Outer problem (sup over ρ).** ℓ increases on [0, 1] and decreases after,
//! and g grows with |ρ - c|, so the supremum lies between c and 1. Write
//! F(ρ) = ln ℓ(ρ) - ln g(h|ρ - c|) and w(ρ) = |d/dρ ln g| (a = γh: w = a for
//! exponential growth, a/(1 + a|ρ - c|) for linear). Then
//! F'(ρ) = 1/r*(ρ) - ρ + σ w(ρ), σ = sign(c - ρ). A stationary point
//! therefore has r* = r̂(ρ) := 1/(ρ - σ w(ρ)), which turns the nested
//! problem into one equation in ρ: T(r̂(ρ), ρ) = 0, and the sign of F' at
//! any ρ is the sign of r̂ - r*, i.e. minus the sign of T(r̂, ρ). No nested
//! root finding is needed.
//!
//! Shape facts (checked numerically on dense grids in the tests, with the
//! asymptotics ℓ(ρ) ~ 1/ρ beyond them): ℓ is concave on [0, 1]; on
//! [1, ∞), 1/r* - ρ decreases up to ρ_J ≈ 2.5284703 and increases after;
//! ℓ' decreases up to ρ_I ≈ 2.0997297 and increases after. Consequences:
//! * c < 1: F is unimodal on [c, 1] (concavity of ℓ; for linear growth, the
//!   maximiser of ℓ(ρ)/(ρ - p) for a point p to the left is unique when ℓ
//!   is concave). Either F'(c) <= 0 and ρ = c wins, or a unique root in
//!   (c, 1) is bracketed.
//! * c > 1: F' is decreasing on [1, ρ_J] (exponential) or has the sign of a
//!   function decreasing on [1, ρ_I] (linear), and increasing after. If F'
//!   is still >= 0 at min(c, ρ_J or ρ_I), F increases on all of [1, c] and
//!   ρ = c wins; otherwise the first root (a local maximum) is bracketed in
//!   that interval, and the answer is the larger of it and ρ = c.
//!
//! The candidate values are then evaluated with the exact ℓ at the chosen
//! ρ (never with an approximate partner), so each is an attained value of
//! the supremum's argument; the result is multiplied by 1 + 2^-40 (covering
//! the rounding of the solvers, about 1e-15) and capped by the global
//! constant e^{-1/2}/h, which is itself a g-smooth upper bound. Both steps
//! keep S a g-smooth upper bound of L.
//!
//! A search that forgets the tangency partner of x itself under-estimates
//! S* by up to 17% (docs/MATH.md §3.4); `tests/brute_force_kde.rs` checks the
//! implementation against a direct evaluation of the definitions.

use super::Query;
use crate::error::{check_point, positive_finite, Error, Result};
use crate::growth::{Growth, GrowthKind};
use crate::math::{exp, sqrt};
use crate::roots::{brent, newton_in_bracket};
use alloc::vec::Vec;

/// ρ_J: the minimiser over ρ >= 1 of (ln ℓ)'(ρ) = 1/r*(ρ) - ρ.
pub const LOG_SLOPE_TURNING_POINT: f64 = 2.528_470_335_334_815_3;
/// ρ_I: the minimiser over ρ >= 1 of ℓ'(ρ) (the inflection point of ℓ).
pub const SLOPE_TURNING_POINT: f64 = 2.099_729_727_804_759;
/// ℓ(1) = e^{-1/2}: the maximum of ℓ, the global Lipschitz constant in
/// bandwidth units.
const ELL_MAX: f64 = 0.606_530_659_712_633_4;
/// Relative safety margin applied to the computed smooth sensitivity.
const SAFETY_FACTOR: f64 = 1.0 + 1.0 / (1u64 << 40) as f64;
/// Beyond this radius exp((r² - ρ²)/2) < 1e-300 at the tangency point, so
/// r* is the smaller root of 1 + r² - rρ to double precision.
const QUADRATIC_REGIME: f64 = 38.0;

/// Gaussian kernel at a query point t with bandwidth h > 0, in any
/// dimension d >= 1 (docs/MATH.md §3.4):
///
/// ```text
/// f(x) = exp( -||x - t||² / (2h²) )
/// ```
///
/// Global Lipschitz constant e^{-1/2}/h. With c = ||x - t||/h:
///
/// ```text
/// L(x)  = ℓ(c) / h
/// S*(x) = (1/h) · sup_{ρ >= 0} ℓ(ρ) / g(h |ρ - c|)
/// ```
///
/// where ℓ is [`radial_lipschitz`]. The module documentation derives the
/// exact, bracketed evaluation of the supremum and why it is the smooth
/// sensitivity.
#[derive(Clone, Debug, PartialEq)]
pub struct GaussianKde {
    center: Vec<f64>,
    bandwidth: f64,
}

impl GaussianKde {
    /// A kernel centred at `center` (d >= 1 finite coordinates) with
    /// bandwidth h (finite, > 0).
    pub fn new(center: &[f64], bandwidth: f64) -> Result<Self> {
        if center.is_empty() {
            return Err(Error::DimensionMismatch {
                expected: 1,
                found: 0,
            });
        }
        check_point(center, center.len())?;
        Ok(Self {
            center: center.to_vec(),
            bandwidth: positive_finite("bandwidth", bandwidth)?,
        })
    }

    /// The query point t.
    pub fn center(&self) -> &[f64] {
        &self.center
    }

    /// The bandwidth h.
    pub fn bandwidth(&self) -> f64 {
        self.bandwidth
    }

    /// c = ||x - t|| / h, computed without overflow for large offsets.
    fn scaled_distance(&self, x: &[f64]) -> Result<f64> {
        check_point(x, self.center.len())?;
        let inv_h = 1.0 / self.bandwidth;
        let mut largest = 0.0f64;
        for (xi, ti) in x.iter().zip(&self.center) {
            largest = largest.max(((xi - ti) * inv_h).abs());
        }
        if largest == 0.0 || !largest.is_finite() {
            return Ok(largest);
        }
        let mut sum = 0.0;
        for (xi, ti) in x.iter().zip(&self.center) {
            let d = (xi - ti) * inv_h / largest;
            sum += d * d;
        }
        Ok(largest * sqrt(sum))
    }
}

impl Query for GaussianKde {
    fn descriptor(&self) -> crate::report::QueryDescriptor {
        self.into()
    }

    fn dimension(&self) -> usize {
        self.center.len()
    }

    fn value(&self, x: &[f64]) -> Result<f64> {
        let c = self.scaled_distance(x)?;
        Ok(phi(c))
    }

    fn global_lipschitz(&self) -> f64 {
        ELL_MAX / self.bandwidth
    }

    fn pointwise_lipschitz(&self, x: &[f64]) -> Result<f64> {
        let c = self.scaled_distance(x)?;
        Ok(ell(c)? / self.bandwidth)
    }

    fn smooth_sensitivity(&self, x: &[f64], growth: Growth) -> Result<f64> {
        let c = self.scaled_distance(x)?;
        let scaled = growth.scaled(self.bandwidth);
        Ok(scaled_smooth_sensitivity(c, scaled)? / self.bandwidth)
    }
}

/// φ(u) = exp(-u²/2).
#[inline]
fn phi(u: f64) -> f64 {
    exp(-0.5 * u * u)
}

/// ℓ(ρ) = sup_{r >= 0} |φ(r) - φ(ρ)| / |r - ρ| with φ(u) = exp(-u²/2): the
/// pointwise Lipschitz constant of the Gaussian kernel at scaled radius ρ,
/// in units of 1/h. Equals ψ(r*(ρ)) = r* exp(-r*²/2) with r* the
/// [`tangent_partner`]. ℓ(0) ≈ 0.451256, ℓ(1) = e^{-1/2}, ℓ(ρ) ~ 1/ρ.
pub fn radial_lipschitz(rho: f64) -> Result<f64> {
    ell(check_radius(rho)?)
}

/// The tangency partner r*(ρ): the point where the tangent of
/// φ(u) = exp(-u²/2) passes through (ρ, φ(ρ)), i.e. the maximiser of the
/// secant slope in [`radial_lipschitz`]. r* is in (0, 1) for ρ > 1, in
/// (1, 1.6) for ρ < 1, and r*(1) = 1.
pub fn tangent_partner(rho: f64) -> Result<f64> {
    tangent(check_radius(rho)?)
}

fn check_radius(rho: f64) -> Result<f64> {
    if rho.is_nan() || rho < 0.0 {
        return Err(Error::InvalidParameter {
            name: "rho",
            value: rho,
            requirement: ">= 0",
        });
    }
    Ok(rho)
}

#[inline]
fn ell(rho: f64) -> Result<f64> {
    if rho.is_infinite() {
        return Ok(0.0);
    }
    let r = tangent(rho)?;
    Ok(r * phi(r))
}

/// r*(0) in closed form: r² = 2u with 1 + 2u = e^u, i.e. with
/// w = -(u + 1/2): w e^w = -e^{-1/2}/2, the W₋₁ branch.
fn tangent_at_centre() -> f64 {
    let w = lambert_w::lambert_wm1(-0.5 * exp(-0.5));
    sqrt(2.0 * (-w - 0.5))
}

/// V(r) = 1 + r(r - ρ) - exp((r - ρ)(r + ρ)/2) and V'(r). V = T/φ(r) has
/// the sign of T. Well conditioned for ρ > 2; near ρ = 1 it has a double
/// root at r = ρ next to r*, so [`reduced_tangency_residual`] is used there.
#[inline]
fn tangency_residual(r: f64, rho: f64) -> (f64, f64) {
    let e = exp(0.5 * (r - rho) * (r + rho));
    (1.0 + r * (r - rho) - e, 2.0 * r - rho - r * e)
}

/// E₂(x) = (e^x - 1 - x)/x² and E₂'(x): Taylor series Σ x^k/(k+2)! for
/// |x| < 0.2 (truncation below 1e-17), the closed form otherwise.
#[inline]
fn e2(x: f64) -> (f64, f64) {
    if x.abs() < 0.2 {
        // 1/(k+2)! for k = 0..=10.
        const C: [f64; 11] = [
            0.5,
            1.0 / 6.0,
            1.0 / 24.0,
            1.0 / 120.0,
            1.0 / 720.0,
            1.0 / 5040.0,
            1.0 / 40320.0,
            1.0 / 362_880.0,
            1.0 / 3_628_800.0,
            1.0 / 39_916_800.0,
            1.0 / 479_001_600.0,
        ];
        let mut value = C[10];
        let mut slope = 10.0 * C[10];
        for k in (1..10).rev() {
            value = value * x + C[k];
            slope = slope * x + k as f64 * C[k];
        }
        (value * x + C[0], slope)
    } else {
        let em1 = libm::expm1(x);
        let x2 = x * x;
        ((em1 - x) / x2, (em1 * (x - 2.0) + 2.0 * x) / (x2 * x))
    }
}

/// W(r) = V(r)/(r - ρ)² = 1/2 - m² E₂(x) with m = (r + ρ)/2 and
/// x = (r² - ρ²)/2, and W'(r). Dividing out the double root of V at r = ρ
/// leaves a simple root at r* (W' = -2/3 at ρ = r = 1) with the sign of T
/// everywhere off r = ρ, and W(ρ) = (1 - ρ²)/2 has the sign T has on the
/// side of r* where ρ lies. Accurate to a few ulps for ρ <= 2.6.
#[inline]
fn reduced_tangency_residual(r: f64, rho: f64) -> (f64, f64) {
    let m = 0.5 * (r + rho);
    let x = (r - rho) * m;
    let (e, de) = e2(x);
    (0.5 - m * m * e, -m * e - m * m * r * de)
}

/// The smaller root of 1 + r² - rρ (ρ > 2), 2/(ρ + sqrt(ρ² - 4)), without
/// overflow for huge ρ.
#[inline]
fn small_quadratic_root(rho: f64) -> f64 {
    let t = 2.0 / rho;
    2.0 / (rho + rho * sqrt((1.0 - t) * (1.0 + t)))
}

/// Initial guess for r*(ρ): quartic least-squares fits (max error 2e-6 on
/// [0, 2], 1e-4 on [2, 4]) and the quadratic root beyond (4e-4). Newton
/// then needs two or three steps; the guess never affects the result, only
/// the speed.
#[inline]
fn tangent_guess(rho: f64) -> f64 {
    let horner = |c: [f64; 5], x: f64| (((c[0] * x + c[1]) * x + c[2]) * x + c[3]) * x + c[4];
    if rho < 1.0 {
        horner(
            [
                -0.000_530_66,
                0.010_587_4,
                0.065_684_51,
                -0.660_938_1,
                1.585_199_07,
            ],
            rho,
        )
    } else if rho <= 2.0 {
        horner(
            [
                -0.003_983_29,
                0.008_391_84,
                0.093_279_05,
                -0.499_937,
                0.999_998_06,
            ],
            rho - 1.0,
        )
    } else if rho <= 4.0 {
        horner(
            [
                0.000_787_76,
                -0.016_589_23,
                0.100_424_1,
                -0.305_831_59,
                0.597_849_47,
            ],
            rho - 2.0,
        )
    } else {
        small_quadratic_root(rho)
    }
}

fn tangent(rho: f64) -> Result<f64> {
    if rho == 1.0 {
        return Ok(1.0);
    }
    if rho == 0.0 {
        return Ok(tangent_at_centre());
    }
    if rho >= QUADRATIC_REGIME {
        return Ok(small_quadratic_root(rho));
    }
    // Brackets (module docs): for ρ > 1, T > 0 at r = 0 and T < 0 at r = 1;
    // for ρ < 1, T > 0 at r = 1 and T < 0 at r = 1.6 (the latter checked on a
    // dense grid of ρ in the tests). W and V have the sign of T.
    let guess = tangent_guess(rho);
    if rho > 2.0 {
        newton_in_bracket(
            "kde tangent partner",
            |r| tangency_residual(r, rho),
            1.0,
            0.0,
            guess,
        )
    } else if rho > 1.0 {
        newton_in_bracket(
            "kde tangent partner",
            |r| reduced_tangency_residual(r, rho),
            1.0,
            0.0,
            guess,
        )
    } else {
        newton_in_bracket(
            "kde tangent partner",
            |r| reduced_tangency_residual(r, rho),
            1.6,
            1.0,
            guess,
        )
    }
}

/// h · S*(x) for x at scaled distance `c` from the centre, with the growth
/// already expressed per bandwidth (rate a = γh).
fn scaled_smooth_sensitivity(c: f64, growth: Growth) -> Result<f64> {
    if c.is_infinite() {
        // ℓ(ρ)/g(|ρ - c|) -> 0 for every ρ as c -> ∞.
        return Ok(0.0);
    }
    let a = growth.rate();
    let mut best = ell(c)?;
    if c != 1.0 && a.is_finite() {
        if let Some(rho) = interior_maximiser(c, growth)? {
            let value = ell(rho)? / growth.eval((rho - c).abs());
            if value > best {
                best = value;
            }
        }
    }
    Ok((best * SAFETY_FACTOR).min(ELL_MAX))
}

/// |d/dρ ln g(|ρ - c|)|.
#[inline]
fn log_growth_slope(growth: Growth, rho: f64, c: f64) -> f64 {
    let a = growth.rate();
    match growth.kind() {
        GrowthKind::Exponential => a,
        GrowthKind::Linear => a / (1.0 + a * (rho - c).abs()),
    }
}

/// A continuous function with the sign of F'(ρ) (module docs):
/// -W(r̂, ρ) with r̂ = 1/q, q = ρ - σ w(ρ), while r̂ is on the side of 1
/// where the tangency partner lives; beyond r̂ = 1 the sign is known and
/// the function is extended continuously from the boundary. `above` says
/// c > 1 (ρ in [1, c], σ = +1). W has the sign of T(r̂) and is free of the
/// cancellation near ρ = 1, so the root is located to full precision.
fn stationarity(c: f64, growth: Growth, above: bool, rho: f64) -> f64 {
    let w = log_growth_slope(growth, rho, c);
    let gap = |r: f64| reduced_tangency_residual(r, rho).0;
    if above {
        let q = rho - w;
        if q <= 1.0 {
            // r̂ >= 1 > r*: F' > 0 (and -W(1, ρ) > 0 for ρ > 1).
            return (-gap(1.0)).max(0.0) + (1.0 - q) + f64::MIN_POSITIVE;
        }
        -gap(1.0 / q)
    } else {
        let q = rho + w;
        if q >= 1.0 {
            // r̂ <= 1 < r*: F' < 0 (and W(1, ρ) > 0 for ρ < 1).
            return -(gap(1.0).max(0.0) + (q - 1.0) + f64::MIN_POSITIVE);
        }
        -gap(1.0 / q)
    }
}

/// The interior local maximiser of F between c and 1, if F has one there.
fn interior_maximiser(c: f64, growth: Growth) -> Result<Option<f64>> {
    let a = growth.rate();
    let z = |above: bool| move |rho: f64| stationarity(c, growth, above, rho);
    if c < 1.0 {
        // w(c) = a for both growths; F'(c) < 1 - c - a <= 0 when c + a >= 1.
        if c + a >= 1.0 || z(false)(c) <= 0.0 {
            return Ok(None);
        }
        return brent("kde outer maximiser", z(false), c, 1.0).map(Some);
    }
    let (lower, turning) = match growth.kind() {
        GrowthKind::Exponential => (1.0 + a, LOG_SLOPE_TURNING_POINT),
        GrowthKind::Linear => (1.0, SLOPE_TURNING_POINT),
    };
    let upper = c.min(turning);
    if upper <= lower || z(true)(upper) >= 0.0 {
        return Ok(None);
    }
    brent("kde outer maximiser", z(true), lower, upper).map(Some)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ell_reference_values() {
        assert!((radial_lipschitz(0.0).unwrap() - 0.451_256_234_078_308_2).abs() < 1e-15);
        assert_eq!(radial_lipschitz(1.0).unwrap(), ELL_MAX);
        assert!((radial_lipschitz(2.57).unwrap() - 0.408_923_442_489_072_7).abs() < 1e-15);
        assert!((radial_lipschitz(20.0).unwrap() - 0.050_062_696_179_761_14).abs() < 1e-16);
        assert!((radial_lipschitz(0.3).unwrap() - 0.527_904_428_665_225_9).abs() < 1e-15);
        assert!((radial_lipschitz(1.5).unwrap() - 0.573_702_608_434_627_1).abs() < 1e-15);
        assert_eq!(radial_lipschitz(f64::INFINITY).unwrap(), 0.0);
        assert!(radial_lipschitz(-1.0).is_err());
        assert!(radial_lipschitz(f64::NAN).is_err());
    }

    #[test]
    #[allow(clippy::excessive_precision)] // 20-digit references, rounded by the compiler
    fn ell_near_one_to_full_precision() {
        // 40-digit references (mpmath bisection on the tangency equation).
        // Near ρ = 1 the double root of V at r = ρ would cost a third of the
        // digits without the reduced residual W.
        for (rho, reference) in [
            (0.999_999, 0.606_530_659_712_481_790_91),
            (1.000_001, 0.606_530_659_712_481_790_97),
            (0.999_99, 0.606_530_659_697_470_125_52),
            (0.9999, 0.606_530_658_196_275_186_45),
            (1.0001, 0.606_530_658_196_338_366_72),
            (0.999, 0.606_530_508_048_400_991_71),
        ] {
            let v = radial_lipschitz(rho).unwrap();
            assert!(
                (v - reference).abs() <= 2e-16,
                "ρ={rho}: {v} vs {reference}"
            );
        }
    }

    #[test]
    fn lambert_w_centre_matches_newton() {
        let closed = tangent_at_centre();
        let newton = tangent(1e-300).unwrap();
        assert!((closed - newton).abs() < 1e-14, "{closed} {newton}");
    }

    #[test]
    fn spec_example_is_not_underestimated() {
        // c ≈ 2.57, γh ≈ 2.36: the secant to the centre gives 0.375 but
        // ℓ(c) ≈ 0.4087 (docs/MATH.md §3.4).
        let q = GaussianKde::new(&[0.0, 0.0], 1.0).unwrap();
        let s = q
            .smooth_sensitivity(&[2.57, 0.0], Growth::exponential(2.36).unwrap())
            .unwrap();
        assert!(s >= 0.4089, "{s}");
    }

    #[test]
    fn bad_input_is_refused() {
        assert!(GaussianKde::new(&[], 1.0).is_err());
        assert!(GaussianKde::new(&[0.0], 0.0).is_err());
        assert!(GaussianKde::new(&[f64::NAN], 1.0).is_err());
        let q = GaussianKde::new(&[0.0, 0.0], 1.0).unwrap();
        assert!(q.value(&[0.0]).is_err());
        assert!(q.value(&[0.0, f64::INFINITY]).is_err());
    }

    #[test]
    fn far_points_do_not_overflow() {
        let q = GaussianKde::new(&[0.0, 0.0], 1.0).unwrap();
        let g = Growth::exponential(1e-3).unwrap();
        let s = q.smooth_sensitivity(&[1e200, 1e200], g).unwrap();
        assert!(s > 0.0 && s.is_finite());
        assert_eq!(q.value(&[1e200, 1e200]).unwrap(), 0.0);
    }
}
