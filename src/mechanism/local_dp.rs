//! Reference: local differential privacy, f(x) + Laplace(range(f)/ε_LDP).
//!
//! # Privacy argument
//!
//! Any two values of f differ by at most range(f) = hi - lo, so the
//! Laplace(range/ε) release is ε-LDP: all pairs of inputs are protected
//! alike, whatever their distance (ε is an LDP ε, not per unit distance).

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
