//! Generalized Cauchy noise, density ∝ 1/(1 + |z|^k), scaled to the smooth
//! sensitivity (exponential growth); pure ε-GP (docs/MATH.md §4).
//!
//! # Privacy argument
//!
//! Generalized Cauchy, density ∝ 1/(1+|z|^k): a dilation by λ changes
//! ln(λ p(λz)/p(z)) by at most (k - 1)|ln λ| = ν γ d, because
//! (1 + |z|^k)/(1 + λ^k |z|^k) lies between λ^{-k} and 1. The shift costs
//! sup |d/dz ln p| · η d = ν^{ν/(ν+1)} η d (attained at |z|^k = k - 1).
//! Sum: (νγ + ν^{ν/(ν+1)} η) d = ε d.

//!
//! # Floating-point guarantee (docs/MATH.md §8.1)
//!
//! (ε, δ, η, δ_fp) = (ε, 0, 6.4e-9, 1e-15) at the default k = 4 (heavy tail, coarse grid): every output cell within
//! z_max = 6.70e4 noise scales has ln(P_x(c)/P_x'(c)) <= ε d + η, the rest has
//! mass δ_fp; release grid 2^⌊log2 σ_max⌋ · 2^-4
//! ([`Mechanism::floating_point_guarantee`], measured by `audit::enumeration`).

use super::{share, Mechanism, NoiseShape};
use crate::error::{positive_finite, Error, Result};
use crate::growth::Growth;
use crate::MechanismName;

/// Default share of ε spent on smoothness for the generalized Cauchy
/// (γ = 0.2 ε/ν).
pub const CAUCHY_SMOOTHNESS_SHARE: f64 = 0.2;

impl Mechanism {
    /// Generalized Cauchy with the paper's defaults: k = 4 (ν = 3),
    /// γ = 0.2 ε/ν.
    pub fn cauchy(epsilon: f64) -> Result<Self> {
        Self::cauchy_with(epsilon, 4.0, CAUCHY_SMOOTHNESS_SHARE)
    }

    /// Generalized Cauchy with exponent k > 2 (ν = k - 1) and
    /// νγ = `smoothness_share` · ε: ε = νγ + ν^{ν/(ν+1)} η, release
    /// f(x) + S(x)/η · Z with density ∝ 1/(1 + |z|^k). k <= 2 is refused: the
    /// noise would have no mean and reports would not be unbiased.
    pub fn cauchy_with(epsilon: f64, k: f64, smoothness_share: f64) -> Result<Self> {
        let epsilon = positive_finite("epsilon", epsilon)?;
        if !(k.is_finite() && k > 2.0) {
            return Err(Error::InvalidParameter {
                name: "k",
                value: k,
                requirement: "finite and > 2 (the noise needs a mean)",
            });
        }
        let s = share("smoothness_share", smoothness_share)?;
        let nu = k - 1.0;
        let gamma = s * epsilon / nu;
        let eta = (1.0 - s) * epsilon / crate::math::pow(nu, nu / (nu + 1.0));
        Self::smooth(
            MechanismName::Cauchy,
            epsilon,
            0.0,
            s,
            Growth::exponential(gamma)?,
            1.0 / eta,
            NoiseShape::GeneralizedCauchy { k },
        )
    }
}

#[cfg(test)]
mod tests {
    use super::super::test_support::{self, refuses_bad_epsilon};
    use super::*;

    #[test]
    fn calibration_matches_the_spec() {
        let eps = 0.01;
        let m = Mechanism::cauchy(eps).unwrap();
        let eta = 1.0 / m.scale_for(1.0).unwrap();
        let g = m.growth().unwrap();
        // ε = νγ + ν^{ν/(ν+1)} η with ν = 3.
        assert!((3.0 * g.rate() + 3f64.powf(0.75) * eta - eps).abs() < 1e-15);
    }

    #[test]
    fn refuses_parameters_that_void_the_guarantee() {
        assert!(Mechanism::cauchy_with(1.0, 2.0, 0.2).is_err());
        assert!(Mechanism::cauchy_with(1.0, f64::NAN, 0.2).is_err());
        refuses_bad_epsilon(Mechanism::cauchy);
    }

    #[test]
    fn releases_are_on_the_public_grid_and_unbiased() {
        test_support::releases_are_on_the_public_grid_and_unbiased(
            &Mechanism::cauchy(0.05).unwrap(),
        );
    }
}
