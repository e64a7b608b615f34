//! Reference: local differential privacy, f(x) + Laplace(range(f)/ε_LDP).
//!
//! # Privacy argument
//!
//! Any two values of f differ by at most range(f) = hi - lo, so the
//! Laplace(range/ε) release is ε-LDP: all pairs of inputs are protected
//! alike, whatever their distance (ε is an LDP ε, not per unit distance).

//!
//! # Floating-point guarantee (docs/MATH.md §8.1)
//!
//! (ε, δ, η, δ_fp) = (ε_LDP, 0, 6.0e-9, 1e-15): every output cell within
//! z_max = 34.5 noise scales has ln(P_x(c)/P_x'(c)) <= ε d + η, the rest has
//! mass δ_fp; release grid 2^⌊log2 σ_max⌋ · 2^-15
//! ([`Mechanism::floating_point_guarantee`], measured by `audit::enumeration`).

use super::{Kind, Mechanism};
use crate::error::Result;
use crate::MechanismName;

impl Mechanism {
    /// Reference: local differential privacy, f(x) + Laplace(range(f)/ε_LDP).
    /// `epsilon` here is an LDP ε (all inputs protected equally), not a
    /// budget per unit distance.
    pub fn local_dp(epsilon: f64) -> Result<Self> {
        Self::baseline(MechanismName::Ldp, Kind::LocalDp, epsilon)
    }
}

#[cfg(test)]
mod tests {
    use super::super::test_support::{self, refuses_bad_epsilon};
    use super::*;

    #[test]
    fn refuses_parameters_that_void_the_guarantee() {
        refuses_bad_epsilon(Mechanism::local_dp);
    }

    #[test]
    fn releases_are_on_the_public_grid_and_unbiased() {
        test_support::releases_are_on_the_public_grid_and_unbiased(
            &Mechanism::local_dp(1.0).unwrap(),
        );
    }
}
