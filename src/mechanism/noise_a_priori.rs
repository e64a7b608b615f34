//! Baseline "noise a priori": perturb the point, release f of the noisy point.
//!
//! # Privacy argument
//!
//! The noisy point x̃ = x + Z with the ε-GP Laplace mechanism of the
//! point's dimension is ε-GP; f(x̃) is post-processing of it, hence ε-GP
//! too. Biased for nonlinear f.

//!
//! # Floating-point guarantee (docs/MATH.md §8.1)
//!
//! (ε, δ, η, δ_fp) = (ε, 0, 5.9e-9, 1e-15) (for the 1-D Laplace on x; the grid is set by range/ε): every output cell within
//! z_max = 34.5 noise scales has ln(P_x(c)/P_x'(c)) <= ε d + η, the rest has
//! mass δ_fp; release grid 2^⌊log2 σ_max⌋ · 2^-15
//! ([`Mechanism::floating_point_guarantee`], measured by `audit::enumeration`).
//! That is the release f(x̃) on f's grid. A map device sends the noisy
//! location x̃ itself, snapped per coordinate to 2^⌊log2(1/ε)⌋ · 2^-20:
//! its own (η, δ_fp) table is
//! [`MapRelease::location_floating_point_guarantee`](crate::map::MapRelease::location_floating_point_guarantee)
//! (docs/MATH.md §9.5).

use super::{Kind, Mechanism};
use crate::error::Result;
use crate::MechanismName;

impl Mechanism {
    /// Baseline "noise a priori": privatize x itself with the ε-GP Laplace
    /// mechanism of its dimension (Laplace(1/ε) in 1-D, planar Laplace in
    /// 2-D, Gamma(d, 1/ε) radius with a uniform direction in d-D), then
    /// release f(x̃). ε-GP by post-processing; biased for nonlinear f.
    pub fn noise_a_priori(epsilon: f64) -> Result<Self> {
        Self::baseline(MechanismName::APriori, Kind::APriori, epsilon)
    }
}

#[cfg(test)]
mod tests {
    use super::super::test_support::{self, refuses_bad_epsilon};
    use super::*;

    #[test]
    fn refuses_parameters_that_void_the_guarantee() {
        refuses_bad_epsilon(Mechanism::noise_a_priori);
    }

    #[test]
    fn bad_points_are_errors_not_panics() {
        test_support::bad_points_are_errors_not_panics(&Mechanism::noise_a_priori(1.0).unwrap());
    }
}
