//! `PolyPlace`: the smooth-sensitivity noise of Hladík and Tětek,
//! "Smooth Sensitivity Revisited: Towards Optimality" (CC-BY 4.0).

use super::{probability, unit_and_sign};
use crate::error::{positive_finite, Error, Result};
use crate::math::{exp, expm1, ln, log1p};
use rand::distr::Distribution;
use rand::Rng;

/// PolyPlace(s, α) with scale s > 0 and shape α > 1, centred at 0. With
/// t = |x|/s:
///
/// ```text
/// p(x) = N (α - 1) (1 - t)^(α - 1)                 for t < 1/α   (polynomial core)
/// p(x) = N (α + 1) (1 - 1/α²)^α (1 + t)^(-α - 1)   for t >= 1/α  (power-law tail)
/// N    = α / (2 s D),   D = α - 1 + 2q,   q = ((α - 1)/α)^α
/// ```
///
/// The density is continuous at t = 1/α. Used as
/// `PolyPlace(s = S/γ, α = ε/γ)` with an exp(γt)-smooth bound S it is ε-GP
/// (docs/MATH.md §4): the shift and log-scale parts of the infinitesimal privacy
/// loss add up to exactly ε, so the budget is not split. As γ/ε -> 0 it
/// tends to Laplace(S/ε).
///
/// **CDF** (closed form). Integrating each branch (`(1 - 1/α²)^α (1 + 1/α)^-α = q`):
///
/// ```text
/// P(|X| <= ts) = (α - 1)/D · (1 - (1 - t)^α)                 for t <= 1/α
/// P(|X| >  ts) = (α + 1) q / D · (α(1 + t)/(α + 1))^(-α)     for t >= 1/α
/// ```
///
/// so the core holds mass (α - 1)(1 - q)/D and the tail (α + 1)q/D; they
/// add to 1. Both invert with powers, which gives the exact sampler
/// (inverse CDF of |X| with an independent random sign) and
/// [`PolyPlace::inverse_cdf`].
///
/// **Variance** (finite iff α > 2; derivation). By symmetry
/// Var = 2 ∫_0^∞ x² p(x) dx = s² (α/D) (J₁ + J₂) with
///
/// * J₁ = ∫_0^{1/α} t² (α-1)(1-t)^(α-1) dt. Since
///   d/dt[-(1-t)^α P(t)] = (α+2) t² (1-t)^(α-1) for
///   P(t) = t² + 2t/(α+1) + 2/(α(α+1)), and P(1/α) = (5α+1)/(α²(α+1)),
///   J₁ = (α-1)/(α(α+1)(α+2)) · (2 - q (5α+1)/α).
/// * J₂ = ∫_{1/α}^∞ t² (α+1)(1-1/α²)^α (1+t)^(-α-1) dt. With u = 1 + t,
///   ∫_{u₀}^∞ (u-1)² u^(-α-1) du = u₀^-α (u₀²/(α-2) - 2u₀/(α-1) + 1/α) and
///   u₀ = (α+1)/α the bracket simplifies to (5α-1)/(α²(α-1)(α-2)), so
///   J₂ = q (α+1)(5α-1)/(α²(α-1)(α-2)).
///
/// Hence
///
/// ```text
/// Var = s²/D · [ (α-1)(2 - q(5α+1)/α) / ((α+1)(α+2))
///              + q (α+1)(5α-1) / (α(α-1)(α-2)) ]          (α > 2)
/// ```
///
/// (equal to Lemma 13 of the paper, in a form without cancellation). For
/// s = α b and α -> ∞ the bracket is 2/α² + O(α⁻³) and D ~ α, so
/// Var -> 2b², the Laplace(b) variance. With ε = S = 1, γ = 1/9 (s = α = 9)
/// it is 2.97359…
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct PolyPlace {
    s: f64,
    alpha: f64,
    /// q = ((α - 1)/α)^α.
    q: f64,
    /// D = α - 1 + 2q.
    d: f64,
    /// P(|X| > s/α) = (α + 1) q / D, the mass of the two tails.
    tail_mass: f64,
}

impl PolyPlace {
    /// PolyPlace with scale `s` (finite, > 0) and shape `alpha` (finite, > 1).
    pub fn new(s: f64, alpha: f64) -> Result<Self> {
        let s = positive_finite("s", s)?;
        if !(alpha.is_finite() && alpha > 1.0) {
            return Err(Error::InvalidParameter {
                name: "alpha",
                value: alpha,
                requirement: "finite and > 1",
            });
        }
        let q = exp(alpha * log1p(-1.0 / alpha));
        let d = alpha - 1.0 + 2.0 * q;
        Ok(Self {
            s,
            alpha,
            q,
            d,
            tail_mass: (alpha + 1.0) * q / d,
        })
    }

    /// The scale s.
    pub fn s(&self) -> f64 {
        self.s
    }

    /// The shape α.
    pub fn alpha(&self) -> f64 {
        self.alpha
    }

    /// ln(1 + (αt - 1)/(α + 1)) = ln(α(1 + t)/(α + 1)), the log of the tail
    /// base, accurate near the junction t = 1/α and free of overflow.
    #[inline]
    fn ln_tail_base(&self, t: f64) -> f64 {
        let a = self.alpha;
        log1p(t * (a / (a + 1.0)) - 1.0 / (a + 1.0))
    }

    /// Density (see the type documentation).
    pub fn pdf(&self, x: f64) -> f64 {
        let a = self.alpha;
        let t = x.abs() / self.s;
        // N = α / (2 s D).
        let n = a / (2.0 * self.s * self.d);
        if t < 1.0 / a {
            n * (a - 1.0) * exp((a - 1.0) * log1p(-t))
        } else {
            // (1 - 1/α²)^α (1 + t)^(-α-1) = q (α(1 + t)/(α + 1))^-α / (1 + t).
            n * (a + 1.0) * self.q * exp(-a * self.ln_tail_base(t)) / (1.0 + t)
        }
    }

    /// Log-density, computed in logs (finite wherever x is).
    pub fn ln_pdf(&self, x: f64) -> f64 {
        let a = self.alpha;
        let t = x.abs() / self.s;
        let ln_n = ln(a / (2.0 * self.s * self.d));
        if t < 1.0 / a {
            ln_n + ln(a - 1.0) + (a - 1.0) * log1p(-t)
        } else {
            ln_n + ln((a + 1.0) * self.q) - a * self.ln_tail_base(t) - log1p(t)
        }
    }

    /// P(|X| <= t s) for t < 1/α (the core).
    #[inline]
    fn core_mass(&self, t: f64) -> f64 {
        let a = self.alpha;
        (a - 1.0) / self.d * -expm1(a * log1p(-t))
    }

    /// P(|X| > t s) for t >= 1/α (the two tails).
    #[inline]
    fn tail_prob(&self, t: f64) -> f64 {
        self.tail_mass * exp(-self.alpha * self.ln_tail_base(t))
    }

    /// CDF in closed form (see the type documentation); the lower tail is
    /// computed directly.
    pub fn cdf(&self, x: f64) -> f64 {
        if x.is_nan() {
            return f64::NAN;
        }
        let t = x.abs() / self.s;
        if t < 1.0 / self.alpha {
            let half = 0.5 * self.core_mass(t);
            if x < 0.0 {
                0.5 - half
            } else {
                0.5 + half
            }
        } else {
            let half_tail = 0.5 * self.tail_prob(t);
            if x < 0.0 {
                half_tail
            } else {
                1.0 - half_tail
            }
        }
    }

    /// The magnitude m with P(|X| > m) = `tail` (= 1 - `inside`); both are
    /// passed so that each branch works on the one that is accurate.
    #[inline]
    fn magnitude(&self, tail: f64, inside: f64) -> f64 {
        let a = self.alpha;
        if tail <= self.tail_mass {
            // (α(1+t)/(α+1))^α = tail_mass / tail.
            let l = ln(self.tail_mass / tail) / a;
            self.s * (expm1(l) + exp(l) / a)
        } else {
            // (1 - t)^α = 1 - inside · D/(α - 1).
            self.s * -expm1(log1p(-inside * self.d / (a - 1.0)) / a)
        }
    }

    /// The magnitude |X| whose tail probability P(|X| > m) is `w` in (0, 1]
    /// (closed form, the sampler's transform). The sampler evaluates it at a
    /// full-resolution uniform w (docs/MATH.md §8.1).
    ///
    /// ```
    /// let d = geopriv::noise::PolyPlace::new(1.0, 9.0)?;
    /// assert_eq!(d.magnitude_at(1.0), 0.0);
    /// let m = d.magnitude_at(1e-6);
    /// assert!((d.cdf(-m) - 0.5e-6).abs() < 1e-18);
    /// # Ok::<(), geopriv::Error>(())
    /// ```
    #[inline]
    pub fn magnitude_at(&self, w: f64) -> f64 {
        self.magnitude(w, 1.0 - w)
    }

    /// Inverse CDF (quantile) in closed form; ±∞ at p = 0 and p = 1.
    /// Errors unless p is in [0, 1].
    pub fn inverse_cdf(&self, p: f64) -> Result<f64> {
        let p = probability("p", p)?;
        let inside = (2.0 * p - 1.0).abs();
        if p < 0.5 {
            Ok(-self.magnitude(2.0 * p, inside))
        } else {
            Ok(self.magnitude(2.0 * (1.0 - p), inside))
        }
    }

    /// Variance in closed form for α > 2 (derivation in the type
    /// documentation); `None` (infinite) for α <= 2.
    pub fn variance(&self) -> Option<f64> {
        let a = self.alpha;
        if a <= 2.0 {
            return None;
        }
        let q = self.q;
        let core = (a - 1.0) * (2.0 - q * (5.0 + 1.0 / a)) / ((a + 1.0) * (a + 2.0));
        let tail = q * ((a + 1.0) / a) * ((5.0 * a - 1.0) / (a - 1.0)) / (a - 2.0);
        Some(self.s * self.s * (core + tail) / self.d)
    }
}

impl Distribution<f64> for PolyPlace {
    #[inline]
    fn sample<R: Rng + ?Sized>(&self, rng: &mut R) -> f64 {
        // W = P(|X| > m) is the full-resolution uniform in (0, 1]; 1 - W is
        // exact in floating point where the core branch uses it (W >= 1/2).
        let (w, negative) = unit_and_sign(rng);
        let m = self.magnitude_at(w);
        if negative {
            -m
        } else {
            m
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::noise::quad::{integrate, integrate_to_inf};

    fn second_moment_by_quadrature(d: &PolyPlace) -> f64 {
        let junction = d.s() / d.alpha();
        2.0 * (integrate(|x| x * x * d.pdf(x), 0.0, junction, 1e-16)
            + integrate_to_inf(|x| x * x * d.pdf(x), junction, d.s(), 1e-14 * d.s() * d.s()))
    }

    #[test]
    fn constructor_refuses_bad_parameters() {
        for bad in [0.0, -1.0, f64::NAN, f64::INFINITY, f64::NEG_INFINITY] {
            assert!(matches!(
                PolyPlace::new(bad, 3.0),
                Err(Error::InvalidParameter { name: "s", .. })
            ));
        }
        for bad in [
            1.0,
            0.5,
            0.0,
            -2.0,
            f64::NAN,
            f64::INFINITY,
            f64::NEG_INFINITY,
        ] {
            assert!(matches!(
                PolyPlace::new(1.0, bad),
                Err(Error::InvalidParameter { name: "alpha", .. })
            ));
        }
        let d = PolyPlace::new(9.0, 1.000_001).unwrap();
        assert_eq!((d.s(), d.alpha()), (9.0, 1.000_001));
    }

    #[test]
    fn density_is_continuous_at_the_junction() {
        for (s, a) in [(1.0, 1.5), (9.0, 9.0), (3.0, 200.0)] {
            let d = PolyPlace::new(s, a).unwrap();
            let j = s / a;
            let below = d.pdf(j * (1.0 - 1e-12));
            let above = d.pdf(j);
            assert!((below - above).abs() < 1e-9 * above, "s={s} a={a}");
            // The literal formula of docs/MATH.md §4 at the junction.
            let n = a / (2.0 * s * (a - 1.0 + 2.0 * libm::pow((a - 1.0) / a, a)));
            let lit = n
                * (a + 1.0)
                * libm::pow(1.0 - 1.0 / (a * a), a)
                * libm::pow(1.0 + 1.0 / a, -a - 1.0);
            assert!((above - lit).abs() < 1e-12 * lit);
        }
    }

    #[test]
    fn pdf_integrates_to_one_and_cdf_is_its_integral() {
        for (s, a) in [(1.0, 1.5), (9.0, 9.0), (2.0, 3.0), (50.0, 100.0)] {
            let d = PolyPlace::new(s, a).unwrap();
            let j = s / a;
            let half = integrate(|x| d.pdf(x), 0.0, j, 1e-15)
                + integrate_to_inf(|x| d.pdf(x), j, s, 1e-14);
            let tol = if a < 2.0 { 1e-7 } else { 1e-10 };
            assert!((2.0 * half - 1.0).abs() < tol, "s={s} a={a}: {half}");
            for (lo, hi) in [
                (-3.0 * j, -0.5 * j),
                (-0.5 * j, 0.7 * j),
                (0.7 * j, 2.0 * j),
                (j, 30.0 * j),
            ] {
                let mass = integrate(|x| d.pdf(x), lo, hi, 1e-15);
                assert!(
                    (d.cdf(hi) - d.cdf(lo) - mass).abs() < 1e-11,
                    "s={s} a={a} [{lo},{hi}]"
                );
            }
            assert!((d.cdf(-j) - (d.tail_mass / 2.0)).abs() < 1e-15);
            assert_eq!(d.cdf(0.0), 0.5);
            assert_eq!(d.cdf(f64::INFINITY), 1.0);
            assert_eq!(d.cdf(f64::NEG_INFINITY), 0.0);
        }
    }

    #[test]
    fn symmetric_and_log_density_consistent() {
        let d = PolyPlace::new(9.0, 9.0).unwrap();
        for x in [0.0, 0.3, 0.999_999, 1.0, 1.000_001, 4.0, 100.0, 1e5] {
            assert_eq!(d.pdf(x), d.pdf(-x));
            assert!((d.cdf(-x) + d.cdf(x) - 1.0).abs() < 1e-15);
            assert!((d.ln_pdf(x) - ln(d.pdf(x))).abs() < 1e-12, "{x}");
        }
        assert!(d.ln_pdf(1e300).is_finite());
    }

    #[test]
    fn inverse_cdf_round_trips() {
        for (s, a) in [(1.0, 1.5), (9.0, 9.0), (0.1, 1000.0)] {
            let d = PolyPlace::new(s, a).unwrap();
            for p in [
                1e-300,
                1e-12,
                0.001,
                0.2,
                0.4,
                0.49,
                0.5,
                0.51,
                0.77,
                0.999,
                1.0 - 1e-12,
            ] {
                let x = d.inverse_cdf(p).unwrap();
                let back = d.cdf(x);
                let scale = p.min(1.0 - p).max(1e-3);
                assert!(
                    (back - p).abs() <= 1e-13 * scale,
                    "s={s} a={a} p={p}: {back}"
                );
            }
            // Junction quantile.
            let x = d.inverse_cdf(d.tail_mass / 2.0).unwrap();
            assert!((x + s / a).abs() < 1e-12 * s / a);
            assert_eq!(d.inverse_cdf(0.5).unwrap(), 0.0);
            assert_eq!(d.inverse_cdf(0.0).unwrap(), f64::NEG_INFINITY);
            assert_eq!(d.inverse_cdf(1.0).unwrap(), f64::INFINITY);
            assert!(d.inverse_cdf(-0.1).is_err());
        }
    }

    #[test]
    fn variance_closed_form_matches_quadrature() {
        for (s, a) in [
            (1.0, 2.5),
            (1.0, 3.0),
            (9.0, 9.0),
            (2.0, 50.0),
            (1.0, 1000.0),
        ] {
            let d = PolyPlace::new(s, a).unwrap();
            let v = d.variance().unwrap();
            let numeric = second_moment_by_quadrature(&d);
            assert!(
                (numeric - v).abs() < 1e-6 * v,
                "s={s} a={a}: {numeric} vs {v}"
            );
        }
        assert_eq!(PolyPlace::new(1.0, 2.0).unwrap().variance(), None);
        assert_eq!(PolyPlace::new(1.0, 1.5).unwrap().variance(), None);
    }

    /// mpmath (30 digits, numerical integration of x² p(x)).
    #[test]
    #[allow(clippy::excessive_precision)] // reference digits as printed by mpmath
    fn variance_reference_values() {
        let cases = [
            (9.0, 9.0, 2.973_590_068_403_308_8),
            (1.0, 2.5, 2.931_972_618_712_657_4),
            (1.0, 3.0, 1.082_857_142_857_142_9),
            (2.0, 50.0, 0.003_418_597_584_061_574_4),
            (1.0, 1000.0, 2.006_523_400_224_813_5e-6),
        ];
        for (s, a, want) in cases {
            let got = PolyPlace::new(s, a).unwrap().variance().unwrap();
            assert!((got - want).abs() < 1e-12 * want, "s={s} a={a}: {got}");
        }
    }

    #[test]
    fn tends_to_laplace_as_alpha_grows() {
        // s = α b: variance -> 2b², and the CDF -> the Laplace(b) CDF.
        let b = 1.5;
        let mut previous_gap = f64::INFINITY;
        for a in [10.0, 100.0, 1e3, 1e4, 1e6] {
            let d = PolyPlace::new(a * b, a).unwrap();
            let gap = (d.variance().unwrap() / (2.0 * b * b) - 1.0).abs();
            assert!(gap < previous_gap, "a={a}");
            previous_gap = gap;
        }
        assert!(previous_gap < 1e-5, "{previous_gap}");
        let d = PolyPlace::new(1e6 * b, 1e6).unwrap();
        let lap = crate::noise::Laplace::new(b).unwrap();
        for x in [-10.0, -1.0, 0.0, 0.5, 4.0] {
            assert!((d.cdf(x) - lap.cdf(x)).abs() < 1e-5, "{x}");
        }
    }
}
