//! Baseline: Laplace noise scaled to the global Lipschitz constant.
//!
//! # Privacy argument
//!
//! |f(x) - f(x')| <= L_global d(x, x'), so shifting the centre of a
//! Laplace(L_global/ε) release costs at most ε d(x, x'): ε-GP for every
//! input, at the price of the worst-case noise for every user.

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
