//! `PlanarLaplace`: the two-dimensional Laplace distribution used for
//! geo-indistinguishability ("noise a priori" on a location).

use crate::error::{positive_finite, Result};
use crate::math::{exp, expm1, hypot, ln, sin_cos, sqrt};
use core::f64::consts::PI;
use rand::distr::Distribution;
use rand::Rng;

/// Planar Laplace distribution on R², centred at the origin, with rate
/// ε > 0 (per unit distance):
///
/// ```text
/// p(z) = ε² / (2π) · exp(-ε ||z||)
/// P(||Z|| <= r) = 1 - (1 + εr) e^{-εr}        (the radius is Gamma(2, 1/ε))
/// ```
///
/// Each coordinate has mean 0 and variance 3/ε² (E||Z||² = 6/ε²).
///
/// Sampling (exact inverse CDF): the angle θ is uniform in [0, 2π) and the
/// radius is r = -(W₋₁((u - 1)/e) + 1)/ε with u uniform in [0, 1), where
/// W₋₁ is the lower branch of Lambert's W (solve (1 + εr)e^{-εr} = 1 - u for
/// w = -(1 + εr): w e^w = (u - 1)/e, w <= -1). The argument stays in
/// [-1/e, 0): u = 0 gives the branch point (W = -1, r = 0).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct PlanarLaplace {
    epsilon: f64,
}

impl PlanarLaplace {
    /// Planar Laplace with rate `epsilon` (finite, > 0).
    pub fn new(epsilon: f64) -> Result<Self> {
        Ok(Self {
            epsilon: positive_finite("epsilon", epsilon)?,
        })
    }

    /// The rate ε.
    pub fn epsilon(&self) -> f64 {
        self.epsilon
    }

    /// Density ε²/(2π) · exp(-ε ||z||).
    pub fn pdf(&self, z: &[f64; 2]) -> f64 {
        let e = self.epsilon;
        e * e / (2.0 * PI) * exp(-e * hypot(z[0], z[1]))
    }

    /// Log-density 2 ln ε - ln(2π) - ε ||z||.
    pub fn ln_pdf(&self, z: &[f64; 2]) -> f64 {
        let e = self.epsilon;
        2.0 * ln(e) - ln(2.0 * PI) - e * hypot(z[0], z[1])
    }

    /// CDF of the radius, P(||Z|| <= r) = 1 - (1 + εr) e^{-εr} (0 for r < 0),
    /// evaluated as e^{-εr}(e^{εr} - 1 - εr) with a series for small εr so
    /// that it keeps relative precision near 0.
    pub fn radius_cdf(&self, r: f64) -> f64 {
        if r.is_nan() {
            return f64::NAN;
        }
        if r <= 0.0 {
            return 0.0;
        }
        if r == f64::INFINITY {
            return 1.0;
        }
        let x = self.epsilon * r;
        if x < 0.5 {
            // e^x - 1 - x = Σ_{n>=2} x^n / n!.
            let mut term = 0.5 * x * x;
            let mut sum = term;
            let mut n = 2.0;
            while term > 1e-17 * sum {
                n += 1.0;
                term *= x / n;
                sum += term;
            }
            exp(-x) * sum
        } else if x < 700.0 {
            exp(-x) * (expm1(x) - x)
        } else {
            1.0 - (1.0 + x) * exp(-x)
        }
    }

    /// The radius at CDF value `u` (tests; the sampler passes 1 - u too).
    #[cfg(test)]
    #[inline]
    fn radius_at(&self, u: f64) -> f64 {
        self.radius_from(u, 1.0 - u)
    }

    /// The radius r with P(||Z|| <= r) = u, for u in [0, 1) (u = 0 gives
    /// r = 0): r = -(W₋₁((u - 1)/e) + 1)/ε.
    ///
    /// Near the branch point the argument (u - 1)/e cannot carry the
    /// relative precision of a small u (and the float nearest -1/e lies
    /// outside the domain of W₋₁), so for u < 1e-4 the branch-point series
    /// of W₋₁ in P = √(2u) = √(2(1 + e z)) is used instead (relative
    /// truncation error < 1e-17 there):
    ///
    /// ```text
    /// -(W₋₁ + 1) = P + P²/3 + 11P³/72 + 43P⁴/540 + 769P⁵/17280
    ///              + 221P⁶/8505 + 680863P⁷/43545600 + 1963P⁸/204120 + O(P⁹)
    /// ```
    ///
    /// `tail` = 1 - u is passed separately: the W₋₁ branch uses it, and the
    /// sampler draws it from the full-resolution uniform so that the far
    /// tail is resolved (docs/MATH.md §8.1); the series branch uses u.
    #[inline]
    fn radius_from(&self, u: f64, tail: f64) -> f64 {
        let x = if u < 1e-4 {
            const C: [f64; 8] = [
                1.0,
                1.0 / 3.0,
                11.0 / 72.0,
                43.0 / 540.0,
                769.0 / 17280.0,
                221.0 / 8505.0,
                680_863.0 / 43_545_600.0,
                1963.0 / 204_120.0,
            ];
            let p = sqrt(2.0 * u);
            p * C.iter().rev().fold(0.0, |acc, &c| acc * p + c)
        } else {
            // Keep the argument inside [-1/e, 0) as represented by lambert_w.
            let arg = (tail * lambert_w::NEG_INV_E).max(lambert_w::SMALLEST_F64_IN_DOMAIN);
            -(lambert_w::lambert_wm1(arg) + 1.0)
        };
        x.max(0.0) / self.epsilon
    }

    /// Variance of each coordinate, 3/ε² (the covariance matrix is
    /// 3/ε² · I). Always finite.
    pub fn variance(&self) -> Option<f64> {
        Some(3.0 / (self.epsilon * self.epsilon))
    }
}

impl Distribution<[f64; 2]> for PlanarLaplace {
    #[inline]
    fn sample<R: Rng + ?Sized>(&self, rng: &mut R) -> [f64; 2] {
        // The radius tail probability is the full-resolution uniform; its
        // complement 1 - w is exact where the series branch needs it.
        let (w, _) = super::unit_and_sign(rng);
        let r = self.radius_from(1.0 - w, w);
        let turn = super::unit_53(rng);
        let theta = 2.0 * PI * turn;
        let (sin, cos) = sin_cos(theta);
        [r * cos, r * sin]
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::Error;
    use crate::noise::quad::{integrate, integrate_to_inf};

    #[test]
    fn constructor_refuses_bad_epsilon() {
        for bad in [0.0, -1.0, f64::NAN, f64::INFINITY, f64::NEG_INFINITY] {
            assert!(matches!(
                PlanarLaplace::new(bad),
                Err(Error::InvalidParameter {
                    name: "epsilon",
                    ..
                })
            ));
        }
        assert_eq!(PlanarLaplace::new(0.25).unwrap().epsilon(), 0.25);
    }

    #[test]
    fn density_integrates_to_one_and_matches_radius_cdf() {
        let d = PlanarLaplace::new(0.8).unwrap();
        // Polar coordinates: ∫ p(r) 2π r dr.
        let radial = |r: f64| d.pdf(&[r, 0.0]) * 2.0 * PI * r;
        let total = integrate_to_inf(radial, 0.0, 1.0, 1e-13);
        assert!((total - 1.0).abs() < 1e-10, "{total}");
        for r in [1e-6, 0.01, 0.5, 2.0, 7.0, 30.0] {
            let mass = integrate(radial, 0.0, r, 1e-16);
            let cdf = d.radius_cdf(r);
            assert!(
                (cdf - mass).abs() < 1e-10 * mass.max(1e-3),
                "{r}: {cdf} vs {mass}"
            );
        }
        // Closed form where it has no cancellation.
        let x = 0.8 * 3.0;
        assert!((d.radius_cdf(3.0) - (1.0 - (1.0 + x) * libm::exp(-x))).abs() < 1e-15);
        assert_eq!(d.radius_cdf(-1.0), 0.0);
        assert_eq!(d.radius_cdf(f64::INFINITY), 1.0);
        // Small radius: 1 - (1+x)e^{-x} = x²/2 - x³/3 + x⁴/8 - ...
        let r = 1e-9 / 0.8;
        let x = 0.8 * r;
        let want = x * x / 2.0 - x * x * x / 3.0;
        assert!((d.radius_cdf(r) - want).abs() < 1e-15 * want);
    }

    #[test]
    fn density_is_radial_and_log_consistent() {
        let d = PlanarLaplace::new(2.0).unwrap();
        let a = d.pdf(&[3.0, 4.0]);
        assert!((a - d.pdf(&[5.0, 0.0])).abs() < 1e-18);
        assert!((a - d.pdf(&[0.0, -5.0])).abs() < 1e-18);
        for z in [[0.0, 0.0], [0.1, -0.2], [3.0, 4.0]] {
            assert!((d.ln_pdf(&z) - ln(d.pdf(&z))).abs() < 1e-12);
        }
        assert!((d.pdf(&[0.0, 0.0]) - 4.0 / (2.0 * PI)).abs() < 1e-15);
    }

    #[test]
    fn radius_inverse_round_trips_including_the_branch_point() {
        let d = PlanarLaplace::new(1.3).unwrap();
        assert_eq!(d.radius_at(0.0), 0.0);
        let smallest = (0.5f64).powi(53);
        for u in [
            smallest,
            1e-12,
            1e-6,
            0.999_999e-4,
            1e-4,
            0.01,
            0.5,
            0.9,
            1.0 - 1e-9,
            1.0 - smallest,
        ] {
            let r = d.radius_at(u);
            assert!(r.is_finite() && r > 0.0, "{u}");
            let back = d.radius_cdf(r);
            assert!(
                (back - u).abs() < 1e-12 * u.min(1.0 - u).max(1e-3),
                "{u}: {back}"
            );
        }
        // Both sides of the switch to the series agree.
        let below = d.radius_at(1e-4 * (1.0 - 1e-15));
        let above = d.radius_at(1e-4);
        assert!((below - above).abs() < 1e-12 * above);
    }

    #[test]
    fn variance_per_coordinate() {
        let d = PlanarLaplace::new(0.5).unwrap();
        // E r² / 2 with r ~ Gamma(2, 1/ε).
        let radial = |r: f64| r * r * d.pdf(&[r, 0.0]) * 2.0 * PI * r;
        let second = integrate_to_inf(radial, 0.0, 2.0, 1e-12);
        assert!((second / 2.0 - d.variance().unwrap()).abs() < 1e-8);
        assert_eq!(d.variance(), Some(12.0));
    }
}
