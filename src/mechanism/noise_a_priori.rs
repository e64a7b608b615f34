//! Baseline "noise a priori": perturb the point, release f of the noisy point.
//!
//! # Privacy argument
//!
//! The noisy point x̃ = x + Z with the ε-GP Laplace mechanism of the
//! point's dimension is ε-GP; f(x̃) is post-processing of it, hence ε-GP
//! too. Biased for nonlinear f.

//!
//! # Floating-point guarantee (docs/MATH.md §8.4)
//!
//! The noisy point is snapped per coordinate to 2^⌊log2(1/ε)⌋ · 2^-k and
//! computed as a + snap(r + N) with a = snap(x), r = x - a (both exact),
//! so its rounding does not grow with |x|; the release f(x̃) is a function
//! of the snapped point, so the slope of f does not matter.
//! (ε, δ, η, δ_fp) = (ε, 0, 6.0e-9, 1e-15) in 1-D (k = 16, z_max = 34.5),
//! (ε, 0, 7.8e-9, 1e-15) in 2-D (k = 14)
//! ([`Mechanism::floating_point_guarantee_for`], measured in 1-D by
//! `audit::enumeration`). A map device sends the noisy location x̃ itself:
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
