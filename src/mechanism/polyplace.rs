//! PolyPlace noise scaled to the smooth sensitivity (exponential growth);
//! pure ε-GP with no split of ε between shift and scale (docs/MATH.md §4).
//!
//! # Privacy argument
//!
//! PolyPlace(s = S/γ, α = ε/γ) (Hladík and Tětek, Lemma 9, moved to GP):
//! interpolate from (f(x), S(x)) to (f(x'), S(x')), the log-scale and the
//! centre linearly, and integrate the derivative of ln p along the path.
//! The log-scale moves by λ_r = ln(S'/S)/γ in units of γ, with |λ_r| <= d
//! because S is exp(γt)-smooth; the centre moves by |f(x) - f(x')|/S_t in
//! units of the current scale S_t, which lies between S and S', so by at
//! most |f(x) - f(x')|/min(S, S') <= d. Their Lemma 12 shows that the
//! absolute derivatives of ln p in these two units add to exactly ε at
//! every output. Both rates being at most d, the loss is at most ε d:
//! the budget is not split between shift and scale, which is why
//! PolyPlace has about a third of the variance of Student's t at the same
//! ε and γ (docs/MATH.md §4).

//!
//! # Floating-point guarantee (docs/MATH.md §8.1)
//!
//! (ε, δ, η, δ_fp) = (ε, 0, 6.3e-9, 1e-15) at the default γ = ε/9 (α = 9); a larger γ share has a heavier tail and a coarser grid, e.g. γ = ε/2: k = 0, η = 1e-8, δ_fp = 1.7e-12: every output cell within
//! z_max = 45.6 noise scales has ln(P_x(c)/P_x'(c)) <= ε d + η, the rest has
//! mass δ_fp; release grid 2^⌊log2 σ_max⌋ · 2^-13
//! ([`Mechanism::floating_point_guarantee`], measured by `audit::enumeration`).

use super::{share, Mechanism, NoiseShape};
use crate::error::{positive_finite, Result};
use crate::growth::Growth;
use crate::MechanismName;

/// Default γ/ε for PolyPlace (γ = ε/9).
pub const POLYPLACE_GAMMA_SHARE: f64 = 1.0 / 9.0;

impl Mechanism {
    /// PolyPlace with the default γ = ε/9.
    pub fn polyplace(epsilon: f64) -> Result<Self> {
        Self::polyplace_with(epsilon, POLYPLACE_GAMMA_SHARE)
    }

    /// PolyPlace with γ = `gamma_share` · ε, 0 < gamma_share < 1 (the
    /// variance is finite only for gamma_share < 1/2). Growth exp(γt);
    /// release f(x) + PolyPlace(s = S(x)/γ, α = ε/γ).
    pub fn polyplace_with(epsilon: f64, gamma_share: f64) -> Result<Self> {
        let epsilon = positive_finite("epsilon", epsilon)?;
        let gamma_share = share("gamma_share", gamma_share)?;
        let gamma = gamma_share * epsilon;
        Self::smooth(
            MechanismName::Polyplace,
            epsilon,
            0.0,
            gamma_share,
            Growth::exponential(gamma)?,
            1.0 / gamma,
            NoiseShape::PolyPlace {
                alpha: 1.0 / gamma_share,
            },
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
        let m = Mechanism::polyplace(eps).unwrap();
        assert!((m.growth().unwrap().rate() - eps / 9.0).abs() < 1e-18);
        assert!((m.scale_for(2.0).unwrap() - 2.0 / (eps / 9.0)).abs() < 1e-9);
    }

    #[test]
    fn refuses_parameters_that_void_the_guarantee() {
        assert!(Mechanism::polyplace_with(1.0, 1.0).is_err());
        assert!(Mechanism::polyplace_with(1.0, 0.0).is_err());
        refuses_bad_epsilon(Mechanism::polyplace);
    }

    #[test]
    fn releases_are_on_the_public_grid_and_unbiased() {
        test_support::releases_are_on_the_public_grid_and_unbiased(
            &Mechanism::polyplace(0.05).unwrap(),
        );
    }

    #[test]
    fn bad_points_are_errors_not_panics() {
        test_support::bad_points_are_errors_not_panics(&Mechanism::polyplace(1.0).unwrap());
    }
}
