//! Baseline: Laplace noise scaled to the global Lipschitz constant.
//!
//! # Privacy argument
//!
//! |f(x) - f(x')| <= L_global d(x, x'), so shifting the centre of a
//! Laplace(L_global/ε) release costs at most ε d(x, x'): ε-GP for every
//! input, at the price of the worst-case noise for every user.

//!
//! # Floating-point guarantee (docs/MATH.md §8.1)
//!
//! (ε, δ, η, δ_fp) = (ε, 0, 6.0e-9, 1e-15): every output cell within
//! z_max = 34.5 noise scales has ln(P_x(c)/P_x'(c)) <= ε d + η, the rest has
//! mass δ_fp; release grid 2^⌊log2 σ_max⌋ · 2^-15
//! ([`Mechanism::floating_point_guarantee`], measured by `audit::enumeration`).

use super::{Kind, Mechanism};
use crate::error::Result;
use crate::MechanismName;

impl Mechanism {
    /// Baseline: f(x) + Laplace(L_global/ε). ε-GP because
    /// |f(x) - f(x')| <= L_global d(x, x'); adds the worst-case noise to
    /// every user.
    pub fn global_laplace(epsilon: f64) -> Result<Self> {
        Self::baseline(MechanismName::GlobalLaplace, Kind::GlobalLaplace, epsilon)
    }
}

#[cfg(test)]
mod tests {
    use super::super::test_support::{self, refuses_bad_epsilon};
    use super::*;

    #[test]
    fn refuses_parameters_that_void_the_guarantee() {
        refuses_bad_epsilon(Mechanism::global_laplace);
    }

    #[test]
    fn releases_are_on_the_public_grid_and_unbiased() {
        test_support::releases_are_on_the_public_grid_and_unbiased(
            &Mechanism::global_laplace(0.05).unwrap(),
        );
    }
}
