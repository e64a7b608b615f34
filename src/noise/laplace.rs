//! `Laplace`: the two-sided exponential distribution centred at 0.

use super::{probability, unit_and_sign};
use crate::error::{positive_finite, Result};
use crate::math::{exp, ln};
use rand::distr::Distribution;
use rand::Rng;

/// Laplace distribution with location 0 and scale b > 0:
///
/// ```text
/// p(x) = exp(-|x| / b) / (2b)
/// F(x) = exp(x / b) / 2          for x < 0
///        1 - exp(-x / b) / 2     for x >= 0
/// Var  = 2 b²
/// ```
///
/// Sampling is by inverse CDF: |X| = -b ln W with W the full-resolution
/// uniform in (0, 1] of [`crate::noise::uniform`] and an independent fair
/// sign, so |X| is resolved to its ulp however far out (docs/MATH.md §8.1).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Laplace {
    scale: f64,
}

impl Laplace {
    /// Laplace(0, `scale`); `scale` must be finite and > 0.
    pub fn new(scale: f64) -> Result<Self> {
        Ok(Self {
            scale: positive_finite("scale", scale)?,
        })
    }

    /// The scale b.
    pub fn scale(&self) -> f64 {
        self.scale
    }

    /// Density exp(-|x|/b) / (2b).
    pub fn pdf(&self, x: f64) -> f64 {
        exp(-x.abs() / self.scale) / (2.0 * self.scale)
    }

    /// Log-density -|x|/b - ln(2b).
    pub fn ln_pdf(&self, x: f64) -> f64 {
        -x.abs() / self.scale - ln(2.0 * self.scale)
    }

    /// CDF: e^{x/b}/2 for x < 0, 1 - e^{-x/b}/2 for x >= 0 (the lower tail is
    /// computed directly, so it keeps relative precision far out).
    pub fn cdf(&self, x: f64) -> f64 {
        if x < 0.0 {
            0.5 * exp(x / self.scale)
        } else {
            1.0 - 0.5 * exp(-x / self.scale)
        }
    }

    /// Inverse CDF (quantile): b ln(2p) for p < 1/2, -b ln(2(1 - p)) otherwise;
    /// ±∞ at p = 0 and p = 1. Errors unless p is in [0, 1].
    pub fn inverse_cdf(&self, p: f64) -> Result<f64> {
        let p = probability("p", p)?;
        Ok(if p < 0.5 {
            self.scale * ln(2.0 * p)
        } else {
            -self.scale * ln(2.0 * (1.0 - p))
        })
    }

    /// The magnitude |X| whose tail probability P(|X| > m) is `w` in (0, 1]:
    /// m = -b ln w. The sampler evaluates it at a full-resolution uniform w;
    /// the exact enumeration of docs/MATH.md §8.1 evaluates it at every key.
    ///
    /// ```
    /// let d = geopriv::noise::Laplace::new(2.0)?;
    /// assert_eq!(d.magnitude_at(1.0), 0.0);
    /// assert!((d.magnitude_at(0.5) - 2.0 * 2f64.ln()).abs() < 1e-15);
    /// # Ok::<(), geopriv::Error>(())
    /// ```
    #[inline]
    pub fn magnitude_at(&self, w: f64) -> f64 {
        -self.scale * ln(w)
    }

    /// Variance 2b² (always finite).
    pub fn variance(&self) -> Option<f64> {
        Some(2.0 * self.scale * self.scale)
    }
}

impl Distribution<f64> for Laplace {
    #[inline]
    fn sample<R: Rng + ?Sized>(&self, rng: &mut R) -> f64 {
        let (w, negative) = unit_and_sign(rng);
        let magnitude = self.magnitude_at(w);
        if negative {
            -magnitude
        } else {
            magnitude
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::Error;
    use crate::noise::quad::{integrate, integrate_to_inf};

    #[test]
    fn constructor_refuses_bad_scale() {
        for bad in [0.0, -1.0, f64::NAN, f64::INFINITY, f64::NEG_INFINITY] {
            assert!(matches!(
                Laplace::new(bad),
                Err(Error::InvalidParameter { name: "scale", .. })
            ));
        }
        assert_eq!(Laplace::new(2.5).unwrap().scale(), 2.5);
    }

    #[test]
    fn pdf_integrates_to_one_and_cdf_is_its_integral() {
        let d = Laplace::new(1.7).unwrap();
        let half = integrate_to_inf(|x| d.pdf(x), 0.0, 1.7, 1e-12);
        assert!((2.0 * half - 1.0).abs() < 1e-9, "{half}");
        for (a, b) in [(-3.0, -0.5), (-0.5, 2.0), (1.0, 9.0)] {
            let mass = integrate(|x| d.pdf(x), a, b, 1e-13);
            assert!((d.cdf(b) - d.cdf(a) - mass).abs() < 1e-11);
        }
        assert_eq!(d.cdf(0.0), 0.5);
        assert_eq!(d.cdf(f64::NEG_INFINITY), 0.0);
        assert_eq!(d.cdf(f64::INFINITY), 1.0);
    }

    #[test]
    fn symmetric_and_log_density_consistent() {
        let d = Laplace::new(0.3).unwrap();
        for x in [0.0, 0.01, 0.4, 2.0, 11.0] {
            assert_eq!(d.pdf(x), d.pdf(-x));
            assert!((d.cdf(-x) - (1.0 - d.cdf(x))).abs() < 1e-15);
            assert!((d.ln_pdf(x) - ln(d.pdf(x))).abs() < 1e-12);
        }
        // Far tail: ln_pdf stays finite where pdf underflows.
        assert_eq!(d.pdf(1e4), 0.0);
        assert!((d.ln_pdf(1e4) - (-1e4 / 0.3 - ln(0.6))).abs() < 1e-9);
    }

    #[test]
    fn inverse_cdf_round_trips() {
        let d = Laplace::new(4.0).unwrap();
        for p in [1e-300, 1e-10, 0.01, 0.3, 0.5, 0.7, 0.99, 1.0 - 1e-12] {
            let x = d.inverse_cdf(p).unwrap();
            assert!((d.cdf(x) - p).abs() <= 1e-14 * p.max(1e-2), "{p}");
        }
        assert_eq!(d.inverse_cdf(0.0).unwrap(), f64::NEG_INFINITY);
        assert_eq!(d.inverse_cdf(1.0).unwrap(), f64::INFINITY);
        assert!(d.inverse_cdf(1.5).is_err());
        assert!(d.inverse_cdf(f64::NAN).is_err());
    }

    #[test]
    fn variance_is_two_b_squared() {
        let d = Laplace::new(3.0).unwrap();
        assert_eq!(d.variance(), Some(18.0));
        let numeric = 2.0 * integrate_to_inf(|x| x * x * d.pdf(x), 0.0, 3.0, 1e-11);
        assert!((numeric - 18.0).abs() < 1e-8 * 18.0, "{numeric}");
    }
}
