//! Baseline "noise a priori": perturb the point, release f of the noisy point.
//!
//! # Privacy argument
//!
//! The noisy point x̃ = x + Z with the ε-GP Laplace mechanism of the
//! point's dimension is ε-GP; f(x̃) is post-processing of it, hence ε-GP
//! too. Biased for nonlinear f.

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
