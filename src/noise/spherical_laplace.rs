//! `SphericalLaplace`: the d-dimensional Laplace distribution
//! (density ∝ exp(-ε||z||)), "noise a priori" for points in R^d.

use super::special::gamma_reg;
use crate::error::{positive_finite, Error, Result};
use crate::math::{exp, ln, ln_gamma, sqrt};
use alloc::vec;
use alloc::vec::Vec;
use core::f64::consts::PI;
use rand::distr::Distribution;
use rand::Rng;
use rand_distr::StandardNormal;

/// Laplace distribution on R^d (d >= 1), centred at the origin, with rate
/// ε > 0 (per unit distance):
///
/// ```text
/// p(z) = c_d exp(-ε ||z||),   c_d = ε^d Γ(d/2) / (2 π^{d/2} Γ(d))
/// P(||Z|| <= r) = P(d, εr)     (regularized lower incomplete gamma)
/// ```
///
/// (polar coordinates: the surface of the unit sphere is 2π^{d/2}/Γ(d/2)
/// and ∫ r^{d-1} e^{-εr} dr = Γ(d)/ε^d). The radius ||Z|| is Gamma(d, 1/ε),
/// the direction is uniform on the sphere and independent of it; each
/// coordinate has mean 0 and variance (d + 1)/ε² (E||Z||² = d(d+1)/ε²).
/// d = 1 is Laplace(1/ε); d = 2 is [`PlanarLaplace`](super::PlanarLaplace).
///
/// Sampling (exact): d = 1 is ±(-ln W)/ε; otherwise the radius is the
/// Gamma(d, 1) variable Σ_{i<d} -ln W_i divided by ε (each W_i the
/// full-resolution uniform of [`crate::noise::uniform`], so the tail is
/// resolved to its ulp, docs/MATH.md §8.1), direction = d standard normals
/// divided by their norm (redrawn in the probability-zero event that all
/// are 0).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct SphericalLaplace {
    dimension: usize,
    epsilon: f64,
    /// ln c_d.
    ln_norm: f64,
}

impl SphericalLaplace {
    /// Spherical Laplace in `dimension` (>= 1) dimensions with rate
    /// `epsilon` (finite, > 0).
    pub fn new(dimension: usize, epsilon: f64) -> Result<Self> {
        if dimension == 0 {
            return Err(Error::InvalidParameter {
                name: "dimension",
                value: 0.0,
                requirement: ">= 1",
            });
        }
        let epsilon = positive_finite("epsilon", epsilon)?;
        let d = dimension as f64;
        let ln_norm =
            d * ln(epsilon) + ln_gamma(0.5 * d) - ln(2.0) - 0.5 * d * ln(PI) - ln_gamma(d);
        Ok(Self {
            dimension,
            epsilon,
            ln_norm,
        })
    }

    /// The dimension d.
    pub fn dimension(&self) -> usize {
        self.dimension
    }

    /// The rate ε.
    pub fn epsilon(&self) -> f64 {
        self.epsilon
    }

    fn check(&self, len: usize) -> Result<()> {
        if len == self.dimension {
            Ok(())
        } else {
            Err(Error::DimensionMismatch {
                expected: self.dimension,
                found: len,
            })
        }
    }

    /// Log-density ln c_d - ε ||z||; errors if `z` does not have d coordinates.
    pub fn ln_pdf(&self, z: &[f64]) -> Result<f64> {
        self.check(z.len())?;
        Ok(self.ln_norm - self.epsilon * norm(z))
    }

    /// Density c_d exp(-ε ||z||); errors if `z` does not have d coordinates.
    pub fn pdf(&self, z: &[f64]) -> Result<f64> {
        self.ln_pdf(z).map(exp)
    }

    /// CDF of the radius, P(||Z|| <= r) = P(d, εr) (0 for r < 0); for
    /// integer d this is 1 - e^{-εr} Σ_{k<d} (εr)^k / k!.
    pub fn radius_cdf(&self, r: f64) -> f64 {
        if r.is_nan() {
            return f64::NAN;
        }
        if r <= 0.0 {
            return 0.0;
        }
        gamma_reg(self.dimension as f64, self.epsilon * r).0
    }

    /// Variance of each coordinate, (d + 1)/ε² (the covariance matrix is
    /// (d + 1)/ε² · I). Always finite.
    pub fn variance(&self) -> Option<f64> {
        Some((self.dimension as f64 + 1.0) / (self.epsilon * self.epsilon))
    }

    /// Draw one point into `out` without allocating; errors if `out` does
    /// not have d coordinates.
    pub fn sample_into<R: Rng + ?Sized>(&self, rng: &mut R, out: &mut [f64]) -> Result<()> {
        self.check(out.len())?;
        self.fill(rng, out);
        Ok(())
    }

    fn fill<R: Rng + ?Sized>(&self, rng: &mut R, out: &mut [f64]) {
        if let [only] = out {
            // d = 1: Laplace(1/ε), |Z| = -ln W with the full-resolution W.
            let (w, negative) = super::unit_and_sign(rng);
            let z = -ln(w) / self.epsilon;
            *only = if negative { -z } else { z };
            return;
        }
        let squared_norm = loop {
            let mut sum = 0.0;
            for x in out.iter_mut() {
                *x = rng.sample(StandardNormal);
                sum += *x * *x;
            }
            if sum > 0.0 {
                break sum;
            }
        };
        // Gamma(d, 1) for integer d: a sum of d Exp(1) = -ln W draws, each
        // W full-resolution, so the far tail is resolved (docs/MATH.md §8.1).
        let radius: f64 = (0..self.dimension)
            .map(|_| -ln(super::uniform::full_resolution_uniform(rng)))
            .sum();
        let r = radius / self.epsilon;
        let factor = r / sqrt(squared_norm);
        for x in out.iter_mut() {
            *x *= factor;
        }
    }
}

/// Euclidean norm, scaled so that huge coordinates do not overflow.
fn norm(z: &[f64]) -> f64 {
    let m = z.iter().fold(0.0f64, |m, x| m.max(x.abs()));
    if m == 0.0 || !m.is_finite() {
        return if z.iter().any(|x| x.is_nan()) {
            f64::NAN
        } else {
            m
        };
    }
    m * sqrt(z.iter().map(|x| (x / m) * (x / m)).sum::<f64>())
}

impl Distribution<Vec<f64>> for SphericalLaplace {
    fn sample<R: Rng + ?Sized>(&self, rng: &mut R) -> Vec<f64> {
        let mut out = vec![0.0; self.dimension];
        self.fill(rng, &mut out);
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::noise::quad::{integrate, integrate_to_inf};
    use crate::noise::{Laplace, PlanarLaplace};
    use rand::rngs::StdRng;
    use rand::SeedableRng;

    /// Surface area of the unit sphere in R^d.
    fn sphere_area(d: usize) -> f64 {
        2.0 * libm::pow(PI, d as f64 / 2.0) / libm::tgamma(d as f64 / 2.0)
    }

    #[test]
    fn constructor_refuses_bad_parameters() {
        assert!(matches!(
            SphericalLaplace::new(0, 1.0),
            Err(Error::InvalidParameter {
                name: "dimension",
                ..
            })
        ));
        for bad in [0.0, -1.0, f64::NAN, f64::INFINITY, f64::NEG_INFINITY] {
            assert!(matches!(
                SphericalLaplace::new(3, bad),
                Err(Error::InvalidParameter {
                    name: "epsilon",
                    ..
                })
            ));
        }
        let d = SphericalLaplace::new(4, 0.5).unwrap();
        assert_eq!((d.dimension(), d.epsilon()), (4, 0.5));
    }

    #[test]
    fn density_integrates_to_one_and_matches_radius_cdf() {
        for dim in [1, 2, 3, 5] {
            let d = SphericalLaplace::new(dim, 0.7).unwrap();
            let mut point = vec![0.0; dim];
            let radial = |r: f64| {
                let mut p = point.clone();
                p[0] = r;
                d.pdf(&p).unwrap() * sphere_area(dim) * libm::pow(r, dim as f64 - 1.0)
            };
            let total = integrate_to_inf(radial, 0.0, 2.0, 1e-13);
            assert!((total - 1.0).abs() < 1e-9, "d={dim}: {total}");
            for r in [0.1, 1.0, 4.0, 20.0] {
                let mass = integrate(radial, 0.0, r, 1e-15);
                assert!((d.radius_cdf(r) - mass).abs() < 1e-10, "d={dim} r={r}");
            }
            point[0] = 1.0;
            assert!((d.ln_pdf(&point).unwrap() - ln(d.pdf(&point).unwrap())).abs() < 1e-12);
        }
    }

    #[test]
    fn low_dimensions_match_laplace_and_planar_laplace() {
        let eps = 1.7;
        let one = SphericalLaplace::new(1, eps).unwrap();
        let lap = Laplace::new(1.0 / eps).unwrap();
        for x in [-3.0, -0.2, 0.0, 1.1] {
            assert!((one.pdf(&[x]).unwrap() - lap.pdf(x)).abs() < 1e-14);
        }
        let two = SphericalLaplace::new(2, eps).unwrap();
        let planar = PlanarLaplace::new(eps).unwrap();
        for z in [[0.0, 0.0], [0.3, -1.2], [4.0, 2.0]] {
            assert!((two.pdf(&z).unwrap() - planar.pdf(&z)).abs() < 1e-14);
        }
        for r in [0.01, 0.5, 2.0, 9.0] {
            assert!((two.radius_cdf(r) - planar.radius_cdf(r)).abs() < 1e-14);
        }
        assert_eq!(two.variance(), planar.variance());
        assert_eq!(one.variance(), lap.variance());
    }

    #[test]
    fn dimension_is_checked() {
        let d = SphericalLaplace::new(3, 1.0).unwrap();
        assert_eq!(
            d.pdf(&[1.0, 2.0]),
            Err(Error::DimensionMismatch {
                expected: 3,
                found: 2
            })
        );
        let mut rng = StdRng::seed_from_u64(1);
        let mut out = [0.0; 4];
        assert!(d.sample_into(&mut rng, &mut out).is_err());
        let mut out = [0.0; 3];
        d.sample_into(&mut rng, &mut out).unwrap();
        assert!(out.iter().all(|x| x.is_finite()) && out.iter().any(|&x| x != 0.0));
        let v: Vec<f64> = d.sample(&mut rng);
        assert_eq!(v.len(), 3);
    }

    #[test]
    fn norm_is_robust() {
        assert_eq!(norm(&[3.0, 4.0]), 5.0);
        assert_eq!(norm(&[0.0, 0.0, 0.0]), 0.0);
        assert!((norm(&[3e200, 4e200]) - 5e200).abs() < 1e186);
        assert_eq!(norm(&[f64::INFINITY, 1.0]), f64::INFINITY);
        assert!(norm(&[f64::NAN, 1.0]).is_nan());
    }
}
