//! Laplace noise scaled to the smooth sensitivity under linear growth;
//! approximate (ε, δ)-GP (docs/MATH.md §4).
//!
//! # Privacy argument
//!
//! Laplace with g = 1 + γt (approximate): with z the Laplace draw under x,
//! ln(p_x/p_x') <= ln(S'/S) + (S/S' - 1)|z| + η d. If S' >= S this is at
//! most (γ + η) d; if S' < S it is at most (γ|z| + η) d, which is <= ε d
//! whenever |z| <= ln(1/δ), an event of probability 1 - δ.

//!
//! # Floating-point guarantee (docs/MATH.md §8.1)
//!
//! (ε, δ, η, δ_fp) = (ε, δ + δ_fp, 6.0e-9, 1e-15); δ_fp adds to the δ asked for: every output cell within
//! z_max = 34.5 noise scales has ln(P_x(c)/P_x'(c)) <= ε d + η, the rest has
//! mass δ_fp; release grid 2^⌊log2 σ_max⌋ · 2^-15
//! ([`Mechanism::floating_point_guarantee`], measured by `audit::enumeration`).

use super::{share, Mechanism, NoiseShape};
use crate::error::{positive_finite, Error, Result};
use crate::growth::Growth;
use crate::MechanismName;

/// Default share of ε spent on smoothness (γ max(1, ln 1/δ)) for the
/// approximate-GP Laplace mechanism.
pub const LAPLACE_SMOOTHNESS_SHARE: f64 = 0.5;

impl Mechanism {
    /// Approximate-GP Laplace with the default split (half of ε on
    /// smoothness).
    pub fn laplace(epsilon: f64, delta: f64) -> Result<Self> {
        Self::laplace_with(epsilon, delta, LAPLACE_SMOOTHNESS_SHARE)
    }

    /// Approximate-GP Laplace: growth 1 + γt with
    /// γ max(1, ln(1/δ)) = `smoothness_share` · ε, η = ε - that, release
    /// f(x) + S(x)/η · Laplace(1). (ε, δ)-GP with 0 < δ < 1.
    pub fn laplace_with(epsilon: f64, delta: f64, smoothness_share: f64) -> Result<Self> {
        let epsilon = positive_finite("epsilon", epsilon)?;
        if !(delta > 0.0 && delta < 1.0) {
            return Err(Error::InvalidParameter {
                name: "delta",
                value: delta,
                requirement: "strictly between 0 and 1",
            });
        }
        let s = share("smoothness_share", smoothness_share)?;
        let tail = crate::math::ln(1.0 / delta).max(1.0);
        let gamma = s * epsilon / tail;
        let eta = (1.0 - s) * epsilon;
        Self::smooth(
            MechanismName::Laplace,
            epsilon,
            delta,
            s,
            Growth::linear(gamma)?,
            1.0 / eta,
            NoiseShape::Laplace,
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
        let m = Mechanism::laplace(eps, 1e-6).unwrap();
        let eta = 1.0 / m.scale_for(1.0).unwrap();
        let g = m.growth().unwrap();
        // ε = η + γ max(1, ln(1/δ)).
        assert!((eta + g.rate() * (1e6f64).ln() - eps).abs() < 1e-15);
    }

    #[test]
    fn refuses_parameters_that_void_the_guarantee() {
        assert!(Mechanism::laplace(1.0, 0.0).is_err());
        assert!(Mechanism::laplace(1.0, 1.0).is_err());
        assert!(Mechanism::laplace_with(1.0, 1e-6, -0.1).is_err());
        refuses_bad_epsilon(|e| Mechanism::laplace(e, 1e-6));
    }

    #[test]
    fn releases_are_on_the_public_grid_and_unbiased() {
        test_support::releases_are_on_the_public_grid_and_unbiased(
            &Mechanism::laplace(0.05, 1e-6).unwrap(),
        );
    }
}
