//! Noise distributions, one per file (docs/MATH.md §4), in the style of `rand_distr`:
//! a small struct with a validating constructor `new(..) -> Result<Self>`,
//! closed-form density, CDF and variance, and an exact sampler through
//! [`rand::distr::Distribution`].
//!
//! | type | density | used by |
//! |---|---|---|
//! | [`Laplace`] | exp(-\|x\|/b) / (2b) | linear-growth Laplace mechanism, baselines |
//! | [`GeneralizedCauchy`] | ∝ 1 / (1 + \|x/σ\|^k), k > 2 | pure-GP smooth sensitivity |
//! | [`StudentT`] | ∝ (1 + (x/σ)²/ν)^(-(ν+1)/2) | pure-GP smooth sensitivity |
//! | [`PolyPlace`] | polynomial core, power-law tail (see the type) | pure-GP smooth sensitivity |
//! | [`PlanarLaplace`] | (ε²/2π) exp(-ε\|\|z\|\|) on R² | noise a priori on locations |
//! | [`SphericalLaplace`] | ∝ exp(-ε\|\|z\|\|) on R^d | noise a priori in d dimensions |
//!
//! The one-dimensional distributions are centred at 0 and symmetric; each
//! has `pdf`, `ln_pdf`, `cdf` and `variance` (`None` when infinite). The
//! multi-dimensional ones expose the density and the CDF of the radius
//! ||Z||. Samplers are exact: inverse CDFs in closed form, or exact
//! representations (Bailey's polar form, Jöhnk's beta construction, normalised
//! Gaussians); none uses an approximate root finder. Every uniform that a
//! tail is drawn from is the full-resolution uniform of [`uniform`], so
//! the far tail is resolved to the ulp of the value (docs/MATH.md §8.1).

mod gen_cauchy;
mod laplace;
mod planar_laplace;
mod polyplace;
pub(crate) mod special;
mod spherical_laplace;
mod student_t;
pub mod uniform;

pub use gen_cauchy::GeneralizedCauchy;
pub use laplace::Laplace;
pub use planar_laplace::PlanarLaplace;
pub use polyplace::PolyPlace;
pub use spherical_laplace::SphericalLaplace;
pub use student_t::StudentT;

use crate::error::{Error, Result};
use rand::Rng;

/// A uniform `w` in (0, 1] with full floating-point resolution near 0
/// (never 0, so `ln w` is finite) and an independent fair sign bit
/// (`true` = negative); see [`uniform`] and docs/MATH.md §8.1.
#[inline]
pub(crate) fn unit_and_sign<R: Rng + ?Sized>(rng: &mut R) -> (f64, bool) {
    uniform::full_resolution_uniform_and_sign(rng)
}

/// A uniform in [0, 1) on the grid k 2^-53 (for angles, where absolute
/// resolution is what matters).
#[inline]
pub(crate) fn unit_53<R: Rng + ?Sized>(rng: &mut R) -> f64 {
    (rng.next_u64() >> 11) as f64 * (1.0 / (1u64 << 53) as f64)
}

/// Check a probability argument of an inverse CDF: p must lie in [0, 1].
pub(crate) fn probability(name: &'static str, p: f64) -> Result<f64> {
    if (0.0..=1.0).contains(&p) {
        Ok(p)
    } else {
        Err(Error::InvalidParameter {
            name,
            value: p,
            requirement: "a probability in [0, 1]",
        })
    }
}

/// Adaptive Simpson quadrature on finite intervals and on [a, ∞): used by
/// the unit tests of the distributions and by the central model's exact
/// selection probabilities and audits.
pub(crate) mod quad {
    #[allow(clippy::too_many_arguments)]
    fn simpson<F: Fn(f64) -> f64>(
        f: &F,
        a: f64,
        b: f64,
        fa: f64,
        fm: f64,
        fb: f64,
        whole: f64,
        tol: f64,
        depth: u32,
        relative_floor: f64,
    ) -> f64 {
        let m = 0.5 * (a + b);
        let lm = 0.5 * (a + m);
        let rm = 0.5 * (m + b);
        let flm = f(lm);
        let frm = f(rm);
        let left = (m - a) / 6.0 * (fa + 4.0 * flm + fm);
        let right = (b - m) / 6.0 * (fm + 4.0 * frm + fb);
        let delta = left + right - whole;
        // Stop at the tolerance, or when the difference is rounding noise.
        if depth == 0 || delta.abs() <= 15.0 * tol.max(relative_floor * (left + right).abs()) {
            left + right + delta / 15.0
        } else {
            simpson(
                f,
                a,
                m,
                fa,
                flm,
                fm,
                left,
                0.5 * tol,
                depth - 1,
                relative_floor,
            ) + simpson(
                f,
                m,
                b,
                fm,
                frm,
                fb,
                right,
                0.5 * tol,
                depth - 1,
                relative_floor,
            )
        }
    }

    /// ∫_a^b f by adaptive Simpson on 64 starting panels (so that narrow
    /// features are not missed), absolute tolerance `tol`, at most
    /// `max_depth` halvings per panel; a panel also stops once its
    /// correction is below `relative_floor` times its value (rounding
    /// noise; 0 for a purely absolute tolerance).
    pub(crate) fn integrate_panels<F: Fn(f64) -> f64>(
        f: &F,
        a: f64,
        b: f64,
        tol: f64,
        max_depth: u32,
        relative_floor: f64,
    ) -> f64 {
        let n = 64;
        let h = (b - a) / n as f64;
        (0..n)
            .map(|i| {
                let (lo, hi) = (a + i as f64 * h, a + (i + 1) as f64 * h);
                let (flo, fmid, fhi) = (f(lo), f(0.5 * (lo + hi)), f(hi));
                let whole = (hi - lo) / 6.0 * (flo + 4.0 * fmid + fhi);
                simpson(
                    f,
                    lo,
                    hi,
                    flo,
                    fmid,
                    fhi,
                    whole,
                    tol / n as f64,
                    max_depth,
                    relative_floor,
                )
            })
            .sum()
    }

    /// ∫_a^b f with absolute tolerance `tol` (adaptive Simpson, stopping at
    /// rounding noise).
    #[cfg(test)]
    pub(crate) fn integrate<F: Fn(f64) -> f64>(f: F, a: f64, b: f64, tol: f64) -> f64 {
        integrate_panels(&f, a, b, tol, 40, 1e-15)
    }

    /// ∫_a^∞ f with the substitution x = a + L (t/(1-t))^3, which turns
    /// power-law tails as heavy as x^-1.4 into integrable, bounded ones.
    #[cfg(test)]
    pub(crate) fn integrate_to_inf<F: Fn(f64) -> f64>(f: F, a: f64, length: f64, tol: f64) -> f64 {
        let g = |t: f64| {
            if t >= 1.0 {
                return 0.0;
            }
            let r = t / (1.0 - t);
            let x = a + length * r * r * r;
            let dx = length * 3.0 * r * r / ((1.0 - t) * (1.0 - t));
            let v = f(x) * dx;
            if v.is_finite() {
                v
            } else {
                0.0
            }
        };
        integrate(g, 0.0, 1.0, tol)
    }
}

/// A standardised (unit-scale) noise density Z of a location–scale release
/// y = f(x) + σ Z: its log density, a draw and its variance. The mechanisms
/// use their noise only through this trait.
///
/// ```
/// use geopriv::noise::{Laplace, UnitDensity};
/// let z = Laplace::new(1.0)?;
/// // ln p(0) = ln(1/2) for the standard Laplace density exp(-|z|)/2.
/// assert!((UnitDensity::ln_pdf(&z, 0.0) - 0.5f64.ln()).abs() < 1e-15);
/// assert_eq!(UnitDensity::variance(&z), Some(2.0));
/// # Ok::<(), geopriv::Error>(())
/// ```
pub trait UnitDensity {
    /// ln p(z).
    fn ln_pdf(&self, z: f64) -> f64;
    /// One draw of Z (the same draw as the distribution's own `sample`
    /// with the same generator).
    fn sample(&self, rng: &mut dyn rand::RngCore) -> f64;
    /// Var Z, or None if infinite.
    fn variance(&self) -> Option<f64>;
}

/// Each density forwards to its own `ln_pdf`, `Distribution::sample` and
/// `variance`.
macro_rules! unit_density {
    ($($t:ty),*) => {$(
        impl UnitDensity for $t {
            #[inline]
            fn ln_pdf(&self, z: f64) -> f64 {
                <$t>::ln_pdf(self, z)
            }
            #[inline]
            fn sample(&self, rng: &mut dyn rand::RngCore) -> f64 {
                rand::distr::Distribution::sample(self, rng)
            }
            fn variance(&self) -> Option<f64> {
                <$t>::variance(self)
            }
        }
    )*};
}
unit_density!(PolyPlace, StudentT, GeneralizedCauchy, Laplace);
