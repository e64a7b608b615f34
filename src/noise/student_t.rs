//! `StudentT`: Student's t distribution with ν degrees of freedom, scaled.

use super::special::beta_reg;
use crate::error::{positive_finite, Result};
use crate::math::{cbrt, cos, exp, expm1, ln, ln_gamma, log1p, pow, sqrt};
use core::f64::consts::{FRAC_PI_2, PI};
use rand::distr::Distribution;
use rand::Rng;

/// Student's t distribution with ν > 0 degrees of freedom and scale σ > 0,
/// centred at 0:
///
/// ```text
/// p(x) = Γ((ν+1)/2) / (Γ(ν/2) √(νπ) σ) · (1 + (x/σ)²/ν)^(-(ν+1)/2)
/// ```
///
/// * CDF: with z = |x|/σ, P(|X| > x) = I_{ν/(ν+z²)}(ν/2, 1/2) (regularized
///   incomplete beta function).
/// * Variance σ² ν/(ν - 2) for ν > 2; infinite for 1 < ν <= 2 and
///   undefined for ν <= 1 (both `None`). The mean exists only for ν > 1, so
///   a mechanism that needs unbiased reports must ask for ν > 1.
///
/// Sampling (exact, Bailey's polar method, Math. Comp. 62 (1994)): with
/// (A, B) uniform in the unit disc and W = A² + B², A √(ν (W^{-2/ν} - 1)/W)
/// is t_ν. In polar form W is uniform on (0, 1) and A/√W = cos θ with θ
/// uniform and independent, so
///
/// ```text
/// T = σ √ν · cos θ · √(expm1(-(2/ν) ln W)).
/// ```
///
/// W is the full-resolution uniform of [`crate::noise::uniform`] (the tail
/// comes from W near 0 and is resolved to its ulp, docs/MATH.md §8.1) and
/// θ is uniform on [0, π/2) with a random sign. (Round 1 used
/// `rand_distr::StudentT`, whose χ² draw near 0 is limited by the
/// absolute resolution of its uniforms.)
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct StudentT {
    dof: f64,
    scale: f64,
    /// ln of the density at 0.
    ln_peak: f64,
    /// √ν σ.
    sqrt_dof_scale: f64,
}

impl StudentT {
    /// Student's t with `dof` ν (finite, > 0) degrees of freedom and `scale`
    /// σ (finite, > 0).
    pub fn new(dof: f64, scale: f64) -> Result<Self> {
        let dof = positive_finite("dof", dof)?;
        let scale = positive_finite("scale", scale)?;
        let ln_peak =
            ln_gamma(0.5 * (dof + 1.0)) - ln_gamma(0.5 * dof) - 0.5 * ln(dof * PI) - ln(scale);
        Ok(Self {
            dof,
            scale,
            ln_peak,
            sqrt_dof_scale: sqrt(dof) * scale,
        })
    }

    /// Degrees of freedom ν.
    pub fn dof(&self) -> f64 {
        self.dof
    }

    /// The scale σ.
    pub fn scale(&self) -> f64 {
        self.scale
    }

    /// Density Γ((ν+1)/2) / (Γ(ν/2) √(νπ) σ) · (1 + (x/σ)²/ν)^(-(ν+1)/2).
    pub fn pdf(&self, x: f64) -> f64 {
        exp(self.ln_pdf(x))
    }

    /// Log-density ln p(0) - (ν+1)/2 · ln(1 + (x/σ)²/ν), evaluated without
    /// overflow for huge |x|.
    pub fn ln_pdf(&self, x: f64) -> f64 {
        let t = (x / self.scale).abs() / sqrt(self.dof);
        let l = if t < 1e100 { log1p(t * t) } else { 2.0 * ln(t) };
        self.ln_peak - 0.5 * (self.dof + 1.0) * l
    }

    /// CDF: F(x) = 1 - I_{ν/(ν+z²)}(ν/2, 1/2)/2 for x >= 0 and
    /// I_{ν/(ν+z²)}(ν/2, 1/2)/2 for x < 0, z = |x|/σ; both tails are
    /// computed directly.
    pub fn cdf(&self, x: f64) -> f64 {
        if x.is_nan() {
            return f64::NAN;
        }
        let z = x.abs() / self.scale;
        // u = ν/(ν+z²) and 1 - u = z²/(ν+z²), each without cancellation
        // (and without overflowing z²).
        let (u, one_minus_u) = if z * z <= self.dof {
            let r = z * z / self.dof;
            (1.0 / (1.0 + r), r / (1.0 + r))
        } else {
            let r = (self.dof / z) / z;
            (r / (1.0 + r), 1.0 / (1.0 + r))
        };
        let (tail, inside) = beta_reg(0.5 * self.dof, 0.5, u, one_minus_u);
        if x < 0.0 {
            0.5 * tail
        } else if inside < 0.5 {
            0.5 + 0.5 * inside
        } else {
            1.0 - 0.5 * tail
        }
    }

    /// Bailey's transform: σ √ν · `cos` · √(W^{-2/ν} - 1) at the uniform
    /// `w` in (0, 1] and `cos` = cos θ. For a fixed θ it is a decreasing
    /// function of w, which is what the exact enumeration of
    /// docs/MATH.md §8.1 counts.
    ///
    /// ```
    /// let d = geopriv::noise::StudentT::new(2.0, 1.0)?;
    /// // ν = 2: √2 · √(1/w - 1); at w = 1/2 that is √2.
    /// assert!((d.value_from(0.5, 1.0) - 2f64.sqrt()).abs() < 1e-15);
    /// # Ok::<(), geopriv::Error>(())
    /// ```
    #[inline]
    pub fn value_from(&self, w: f64, cos: f64) -> f64 {
        // Near w = 1 expm1 avoids cancellation; in the tail `pow` keeps the
        // error of W^{-2/ν} within about an ulp (exp(-(2/ν) ln w) would
        // carry the rounding error of its large argument, |ln w|·2^-52).
        let inner = if w > 0.5 {
            expm1(-2.0 * ln(w) / self.dof)
        } else if self.dof == 3.0 {
            // The default ν = 3: w^{-2/3} with `cbrt` (within an ulp, and
            // several times cheaper than `pow`).
            let c = cbrt(w);
            1.0 / (c * c) - 1.0
        } else {
            pow(w, -2.0 / self.dof) - 1.0
        };
        self.sqrt_dof_scale * cos * sqrt(inner)
    }

    /// Variance σ² ν/(ν - 2) for ν > 2, `None` otherwise.
    pub fn variance(&self) -> Option<f64> {
        if self.dof > 2.0 {
            Some(self.scale * self.scale * self.dof / (self.dof - 2.0))
        } else {
            None
        }
    }
}

impl Distribution<f64> for StudentT {
    #[inline]
    fn sample<R: Rng + ?Sized>(&self, rng: &mut R) -> f64 {
        let (w, negative) = super::unit_and_sign(rng);
        let cos = cos(FRAC_PI_2 * super::unit_53(rng));
        let t = self.value_from(w, cos);
        if negative {
            -t
        } else {
            t
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::Error;
    use crate::noise::quad::{integrate, integrate_to_inf};

    #[test]
    fn constructor_refuses_bad_parameters() {
        for bad in [0.0, -1.0, f64::NAN, f64::INFINITY, f64::NEG_INFINITY] {
            assert!(matches!(
                StudentT::new(bad, 1.0),
                Err(Error::InvalidParameter { name: "dof", .. })
            ));
            assert!(matches!(
                StudentT::new(3.0, bad),
                Err(Error::InvalidParameter { name: "scale", .. })
            ));
        }
        let d = StudentT::new(0.5, 2.0).unwrap();
        assert_eq!((d.dof(), d.scale()), (0.5, 2.0));
    }

    #[test]
    fn pdf_integrates_to_one_and_cdf_is_its_integral() {
        for (nu, s) in [(0.7, 1.0), (3.0, 2.0), (30.0, 0.5)] {
            let d = StudentT::new(nu, s).unwrap();
            let half = integrate(|x| d.pdf(x), 0.0, s, 1e-13)
                + integrate_to_inf(|x| d.pdf(x), s, s, 1e-13);
            // ν = 0.7 has a tail ~ x^-1.7: the quadrature is less accurate there.
            let tol = if nu < 1.0 { 1e-6 } else { 1e-9 };
            assert!((2.0 * half - 1.0).abs() < tol, "nu={nu}: {half}");
            for (a, b) in [(-5.0 * s, -0.3 * s), (-0.3 * s, 0.8 * s), (s, 20.0 * s)] {
                let mass = integrate(|x| d.pdf(x), a, b, 1e-13);
                assert!((d.cdf(b) - d.cdf(a) - mass).abs() < 1e-11, "nu={nu}");
            }
        }
    }

    #[test]
    fn cdf_matches_closed_forms_and_reference_values() {
        // ν = 1 is Cauchy: F = 1/2 + atan(x)/π. ν = 2: F = 1/2 + x/(2√(2+x²)).
        let cauchy = StudentT::new(1.0, 1.0).unwrap();
        let two = StudentT::new(2.0, 1.0).unwrap();
        for x in [-1e6, -30.0, -2.0, -0.1, 0.0, 0.3, 1.0, 7.0, 1e3] {
            // F(-y) = atan(1/y)/π for y > 0, free of cancellation.
            let want = if x < 0.0 {
                libm::atan(-1.0 / x) / PI
            } else {
                0.5 + libm::atan(x) / PI
            };
            assert!((cauchy.cdf(x) - want).abs() < 1e-14 * want, "{x}");
            let want = 0.5 + x / (2.0 * libm::sqrt(2.0 + x * x));
            assert!((two.cdf(x) - want).abs() < 1e-14, "{x}");
        }
        // mpmath, numerical integration of the density.
        let cases = [
            (3.0, 2.0, 0.930_337_015_720_578_4),
            (3.0, -10.0, 0.001_064_199_529_207_075),
            (0.7, 1.3, 0.760_837_348_960_410_1),
            (10.0, 0.5, 0.686_053_197_128_513_5),
            (2.5, -40.0, 7.097_817_145_246_691e-5),
        ];
        for (nu, x, want) in cases {
            let got = StudentT::new(nu, 1.0).unwrap().cdf(x);
            assert!((got - want).abs() < 1e-13 * want, "nu={nu} x={x}: {got}");
        }
        // Scale: F_σ(x) = F_1(x/σ).
        let scaled = StudentT::new(3.0, 4.0).unwrap();
        assert!((scaled.cdf(8.0) - 0.930_337_015_720_578_4).abs() < 1e-14);
    }

    #[test]
    fn symmetric_and_log_density_consistent() {
        let d = StudentT::new(4.5, 1.3).unwrap();
        assert_eq!(d.cdf(0.0), 0.5);
        assert_eq!(d.cdf(f64::INFINITY), 1.0);
        assert_eq!(d.cdf(f64::NEG_INFINITY), 0.0);
        for x in [0.0, 0.2, 1.3, 5.0, 300.0] {
            assert_eq!(d.pdf(x), d.pdf(-x));
            assert!((d.cdf(-x) + d.cdf(x) - 1.0).abs() < 1e-15);
            assert!((d.ln_pdf(x) - ln(d.pdf(x))).abs() < 1e-12);
        }
        assert!(d.ln_pdf(1e300).is_finite());
    }

    #[test]
    fn variance_closed_form_matches_quadrature() {
        let d = StudentT::new(5.0, 2.0).unwrap();
        let v = d.variance().unwrap();
        assert!((v - 4.0 * 5.0 / 3.0).abs() < 1e-14);
        let numeric = 2.0
            * (integrate(|x| x * x * d.pdf(x), 0.0, 2.0, 1e-13)
                + integrate_to_inf(|x| x * x * d.pdf(x), 2.0, 2.0, 1e-12));
        assert!((numeric - v).abs() < 1e-6 * v, "{numeric} vs {v}");
        assert_eq!(StudentT::new(2.0, 1.0).unwrap().variance(), None);
        assert_eq!(StudentT::new(0.5, 1.0).unwrap().variance(), None);
    }
}
