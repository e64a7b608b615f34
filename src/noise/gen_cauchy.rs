//! `GeneralizedCauchy`: density ∝ 1/(1 + |z/σ|^k), the smooth-sensitivity
//! noise of Nissim, Raskhodnikova and Smith.

use super::special::beta_reg;
use crate::error::{positive_finite, Error, Result};
use crate::math::{cbrt, exp, ln, log1p, pow, sin};
use core::f64::consts::PI;
use rand::distr::Distribution;
use rand::Rng;

/// Generalized Cauchy distribution with tail exponent k > 2 and scale σ > 0,
/// centred at 0:
///
/// ```text
/// p(x) = c_k / (σ (1 + |x/σ|^k)),   c_k = k sin(π/k) / (2π)
/// ```
///
/// because ∫ 1/(1 + |z|^k) dz over R = 2π / (k sin(π/k)).
///
/// * k > 2 is required so that the mean exists (the reports must be
///   unbiased, docs/MATH.md §5); the density decays like |x|^-k.
/// * Variance σ² sin(π/k) / sin(3π/k) for k > 3, infinite for k <= 3.
/// * CDF: with z = |x|/σ, P(|X| <= x) = I_{z^k/(1+z^k)}(1/k, 1 - 1/k), the
///   regularized incomplete beta function (substitute u = z^k/(1+z^k) in the
///   integral of the density).
///
/// Sampling (exact): if B ~ Beta(1/k, 1 - 1/k) then (B/(1-B))^{1/k} with a
/// random sign has density ∝ 1/(1+|z|^k). B is drawn with Jöhnk's
/// rejection method, which yields the ratio B/(1-B) directly: with U, V
/// uniform in (0, 1) and W = V^{1/(k-1)}, accept when U^k + W^k <= 1 and
/// return U/W (then (U/W)^k = X/Y with X = U^k, Y = V^{k/(k-1)} as in
/// Jöhnk's theorem). It runs in logarithms (E = -ln U, -ln V with U, V
/// the full-resolution uniforms of [`crate::noise::uniform`], so the tail,
/// which comes from V near 0, is resolved to its ulp, docs/MATH.md §8.1)
/// with exact polynomial squeezes. The acceptance probability (1/k)(1 - 1/k) π / sin(π/k) is
/// at least π/4 (0.83 for k = 4), and no 1 - B is ever formed, so the far tail
/// keeps full precision. (About 2.5x faster than `rand_distr::Beta`
/// followed by (B/(1-B))^{1/k}, see `benches/noise.rs`.)
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct GeneralizedCauchy {
    k: f64,
    scale: f64,
    /// 1/(k - 1), the exponent turning V into W.
    inv_k_minus_1: f64,
    /// c_k / σ, the density at 0.
    peak: f64,
}

impl GeneralizedCauchy {
    /// Generalized Cauchy with tail exponent `k` (finite, > 2) and `scale`
    /// (finite, > 0).
    pub fn new(k: f64, scale: f64) -> Result<Self> {
        if !(k.is_finite() && k > 2.0) {
            return Err(Error::InvalidParameter {
                name: "k",
                value: k,
                requirement: "finite and > 2 (the mean must exist)",
            });
        }
        let scale = positive_finite("scale", scale)?;
        let c = k * sin(PI / k) / (2.0 * PI);
        Ok(Self {
            k,
            scale,
            inv_k_minus_1: 1.0 / (k - 1.0),
            peak: c / scale,
        })
    }

    /// The tail exponent k.
    pub fn k(&self) -> f64 {
        self.k
    }

    /// The scale σ.
    pub fn scale(&self) -> f64 {
        self.scale
    }

    /// Density c_k / (σ (1 + |x/σ|^k)).
    pub fn pdf(&self, x: f64) -> f64 {
        let z = x.abs() / self.scale;
        self.peak / (1.0 + pow(z, self.k))
    }

    /// Log-density ln(c_k/σ) - ln(1 + |x/σ|^k), evaluated as
    /// -k ln|x/σ| - ln(1 + |x/σ|^-k) in the tail so that it never overflows.
    pub fn ln_pdf(&self, x: f64) -> f64 {
        let z = x.abs() / self.scale;
        if z <= 1.0 {
            ln(self.peak) - log1p(pow(z, self.k))
        } else {
            ln(self.peak) - self.k * ln(z) - log1p(pow(z, -self.k))
        }
    }

    /// CDF via the regularized incomplete beta function:
    /// F(x) = 1/2 + sign(x) I_{u}(1/k, 1-1/k) / 2 with u = z^k/(1+z^k),
    /// z = |x|/σ; the tail probability I_{1-u}(1-1/k, 1/k) is computed
    /// directly, so F keeps relative precision far in the lower tail.
    pub fn cdf(&self, x: f64) -> f64 {
        if x.is_nan() {
            return f64::NAN;
        }
        let z = x.abs() / self.scale;
        // u = z^k/(1+z^k) and 1 - u, each without cancellation.
        let (u, one_minus_u) = if z <= 1.0 {
            let t = pow(z, self.k);
            (t / (1.0 + t), 1.0 / (1.0 + t))
        } else {
            let t = pow(z, -self.k);
            (1.0 / (1.0 + t), t / (1.0 + t))
        };
        let a = 1.0 / self.k;
        let (inside, tail) = beta_reg(a, 1.0 - a, u, one_minus_u);
        if x < 0.0 {
            0.5 * tail
        } else if inside < 0.5 {
            0.5 + 0.5 * inside
        } else {
            1.0 - 0.5 * tail
        }
    }

    /// Variance σ² sin(π/k) / sin(3π/k) for k > 3; `None` (infinite) for k <= 3.
    pub fn variance(&self) -> Option<f64> {
        if self.k > 3.0 {
            Some(self.scale * self.scale * sin(PI / self.k) / sin(3.0 * PI / self.k))
        } else {
            None
        }
    }
}

impl GeneralizedCauchy {
    /// Jöhnk's step at the uniforms (u, v) in (0, 1]²: the magnitude
    /// σ u / v^{1/(k-1)} if u^k + v^{k/(k-1)} <= 1, else `None` (rejected).
    /// For a fixed u it is a decreasing function of v, which is what the
    /// exact enumeration of docs/MATH.md §8.1 counts.
    ///
    /// ```
    /// let d = geopriv::noise::GeneralizedCauchy::new(4.0, 1.0)?;
    /// assert_eq!(d.magnitude_from(0.999, 0.999), None);
    /// let z = d.magnitude_from(0.5, 1e-9).unwrap();
    /// assert!((z - 0.5 * 1e3).abs() < 1e-9);
    /// # Ok::<(), geopriv::Error>(())
    /// ```
    #[inline]
    pub fn magnitude_from(&self, u: f64, v: f64) -> Option<f64> {
        let e1 = -ln(u);
        let shifted = -ln(v) * self.inv_k_minus_1;
        if Self::johnk_accepts(self.k * e1, self.k * shifted) {
            // u · v^{-1/(k-1)} with `pow` (about an ulp; exp(shifted - e1)
            // would carry the rounding error of its argument, |ln v|·2^-52).
            let root = if self.k == 4.0 {
                // The default k = 4: v^{-1/3} with `cbrt` (within an ulp,
                // several times cheaper than `pow`).
                1.0 / cbrt(v)
            } else {
                pow(v, -self.inv_k_minus_1)
            };
            Some(self.scale * u * root)
        } else {
            None
        }
    }

    /// Jöhnk's acceptance test U^k + W^k <= 1 written as
    /// e^{-a} + e^{-b} <= 1 (a = k E₁, b = k E₂/(k-1)), with exact
    /// polynomial squeezes so that ~95% of the decisions need no `exp`:
    /// e^{-x} <= 1/P(x) with P(x) = 1 + x + x²/2 + x³/6 (accept when
    /// 1/P(a) + 1/P(b) <= 1, i.e. P(a) + P(b) <= P(a)P(b)), and
    /// e^{-x} >= 1 - x + x²/2 - x³/6 (reject when those sum above 1).
    #[inline]
    fn johnk_accepts(a: f64, b: f64) -> bool {
        let upper = |x: f64| 1.0 + x * (1.0 + x * (0.5 + x * (1.0 / 6.0)));
        let (pa, pb) = (upper(a), upper(b));
        if pa + pb <= pa * pb {
            return true;
        }
        let lower = |x: f64| 1.0 - x * (1.0 - x * (0.5 - x * (1.0 / 6.0)));
        if lower(a) + lower(b) > 1.0 {
            return false;
        }
        exp(-a) + exp(-b) <= 1.0
    }
}

impl Distribution<f64> for GeneralizedCauchy {
    #[inline]
    fn sample<R: Rng + ?Sized>(&self, rng: &mut R) -> f64 {
        // Jöhnk in logarithms: E₁ = -ln U and E₂ = -ln V, U^k = e^{-k E₁},
        // W^k = V^{k/(k-1)} = e^{-k E₂/(k-1)}, and U/W = e^{E₂/(k-1) - E₁}.
        // U and V are full-resolution uniforms, so the far tail (V near 0)
        // is resolved to its ulp.
        loop {
            let (u, negative) = super::unit_and_sign(rng);
            let v = super::uniform::full_resolution_uniform(rng);
            if let Some(z) = self.magnitude_from(u, v) {
                return if negative { -z } else { z };
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::noise::quad::{integrate, integrate_to_inf};

    #[test]
    fn johnk_squeezes_agree_with_the_exact_test() {
        let grid: Vec<f64> = (0..400).map(|i| 0.0125 * i as f64).collect();
        for &a in &grid {
            for &b in &grid {
                let exact = libm::exp(-a) + libm::exp(-b) <= 1.0;
                assert_eq!(GeneralizedCauchy::johnk_accepts(a, b), exact, "a={a} b={b}");
            }
        }
        assert!(GeneralizedCauchy::johnk_accepts(800.0, 1e-3));
        assert!(!GeneralizedCauchy::johnk_accepts(1e-3, 3.0));
    }

    #[test]
    fn constructor_refuses_bad_parameters() {
        for bad_k in [
            2.0,
            1.5,
            0.0,
            -3.0,
            f64::NAN,
            f64::INFINITY,
            f64::NEG_INFINITY,
        ] {
            assert!(matches!(
                GeneralizedCauchy::new(bad_k, 1.0),
                Err(Error::InvalidParameter { name: "k", .. })
            ));
        }
        for bad_scale in [0.0, -1.0, f64::NAN, f64::INFINITY, f64::NEG_INFINITY] {
            assert!(matches!(
                GeneralizedCauchy::new(4.0, bad_scale),
                Err(Error::InvalidParameter { name: "scale", .. })
            ));
        }
        let d = GeneralizedCauchy::new(2.000_001, 3.0).unwrap();
        assert_eq!((d.k(), d.scale()), (2.000_001, 3.0));
    }

    #[test]
    fn pdf_integrates_to_one_and_cdf_is_its_integral() {
        for (k, s) in [(2.5, 1.0), (4.0, 2.0), (7.3, 0.5)] {
            let d = GeneralizedCauchy::new(k, s).unwrap();
            let half = integrate(|x| d.pdf(x), 0.0, s, 1e-13)
                + integrate_to_inf(|x| d.pdf(x), s, s, 1e-13);
            assert!((2.0 * half - 1.0).abs() < 1e-9, "k={k}: {half}");
            for (a, b) in [(-5.0 * s, -0.3 * s), (-0.3 * s, 0.8 * s), (s, 20.0 * s)] {
                let mass = integrate(|x| d.pdf(x), a, b, 1e-13);
                assert!(
                    (d.cdf(b) - d.cdf(a) - mass).abs() < 1e-11,
                    "k={k} [{a},{b}]"
                );
            }
            // Lower tail against the integral of the tail.
            let t = 50.0 * s;
            let tail = integrate_to_inf(|x| d.pdf(x), t, s, 1e-16);
            assert!((d.cdf(-t) - tail).abs() < 1e-9 * tail, "k={k}");
        }
    }

    /// Reference values from mpmath (numerical integration of the density).
    #[test]
    fn cdf_matches_reference_values() {
        let cases = [
            (4.0, 1.0, 0.890_274_963_084_795),
            (4.0, -3.0, 0.005_528_332_262_407_997),
            (2.5, 0.4, 0.647_230_243_429_315_8),
            (3.5, -100.0, 1.742_052_758_809_590_2e-6),
            (8.0, 1.2, 0.982_409_192_203_348),
        ];
        for (k, x, want) in cases {
            let got = GeneralizedCauchy::new(k, 1.0).unwrap().cdf(x);
            assert!((got - want).abs() < 1e-13 * want, "k={k} x={x}: {got}");
        }
    }

    #[test]
    fn symmetric_and_log_density_consistent() {
        let d = GeneralizedCauchy::new(3.3, 0.7).unwrap();
        assert_eq!(d.cdf(0.0), 0.5);
        assert!(d.cdf(f64::NAN).is_nan());
        assert_eq!(d.cdf(f64::INFINITY), 1.0);
        assert_eq!(d.cdf(f64::NEG_INFINITY), 0.0);
        for x in [0.0, 0.2, 0.7, 1.5, 40.0, 1e6] {
            assert_eq!(d.pdf(x), d.pdf(-x));
            assert!((d.cdf(-x) + d.cdf(x) - 1.0).abs() < 1e-15);
            assert!((d.ln_pdf(x) - ln(d.pdf(x))).abs() < 1e-12);
        }
        // ln_pdf stays finite where |x/σ|^k overflows.
        let far = d.ln_pdf(1e200);
        assert!(far.is_finite() && (far - (ln(d.peak) - 3.3 * ln(1e200 / 0.7))).abs() < 1e-9);
    }

    #[test]
    fn variance_closed_form_matches_quadrature() {
        for (k, s) in [(3.5, 1.0), (4.0, 2.0), (8.0, 0.5)] {
            let d = GeneralizedCauchy::new(k, s).unwrap();
            let v = d.variance().unwrap();
            let numeric = 2.0
                * (integrate(|x| x * x * d.pdf(x), 0.0, s, 1e-13)
                    + integrate_to_inf(|x| x * x * d.pdf(x), s, s, 1e-12));
            assert!((numeric - v).abs() < 1e-6 * v, "k={k}: {numeric} vs {v}");
        }
        assert_eq!(GeneralizedCauchy::new(3.0, 1.0).unwrap().variance(), None);
        assert_eq!(GeneralizedCauchy::new(2.5, 1.0).unwrap().variance(), None);
        // Large k: uniform on [-σ, σ], variance σ²/3.
        let v = GeneralizedCauchy::new(1e6, 1.0)
            .unwrap()
            .variance()
            .unwrap();
        assert!((v - 1.0 / 3.0).abs() < 1e-5);
    }
}
