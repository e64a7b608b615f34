//! Growth functions g for g-smooth upper bounds (docs/MATH.md §2).
//!
//! A growth function is increasing, has g(0) = 1 and is submultiplicative,
//! g(a + b) <= g(a) g(b). A g-smooth upper bound S of the local Lipschitz
//! constant satisfies S(x) <= g(d(x, y)) S(y) for all x, y.
//!
//! * [`GrowthKind::Exponential`]: g(t) = exp(γ t), used by the pure-GP
//!   mechanisms (generalized Cauchy, Student's t, PolyPlace).
//! * [`GrowthKind::Linear`]: g(t) = 1 + γ t, used by the approximate-GP
//!   Laplace mechanism.
//!
//! Mechanisms choose the growth their calibration needs; users normally do
//! not build one by hand except to probe sensitivities.

use crate::error::{positive_finite, Result};
use serde::{Deserialize, Serialize};

/// Which family a [`Growth`] belongs to.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum GrowthKind {
    /// g(t) = exp(γ t).
    Exponential,
    /// g(t) = 1 + γ t.
    Linear,
}

/// A validated growth function: a kind and a rate γ > 0 (per unit distance).
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct Growth {
    kind: GrowthKind,
    rate: f64,
}

impl Growth {
    /// g(t) = exp(γ t); γ must be finite and > 0.
    pub fn exponential(rate: f64) -> Result<Self> {
        Self::new(GrowthKind::Exponential, rate)
    }

    /// g(t) = 1 + γ t; γ must be finite and > 0.
    pub fn linear(rate: f64) -> Result<Self> {
        Self::new(GrowthKind::Linear, rate)
    }

    /// A growth of the given kind with rate γ (finite and > 0).
    pub fn new(kind: GrowthKind, rate: f64) -> Result<Self> {
        let rate = positive_finite("gamma", rate)?;
        Ok(Self { kind, rate })
    }

    /// The family of this growth function.
    pub fn kind(&self) -> GrowthKind {
        self.kind
    }

    /// The rate γ (per unit distance).
    pub fn rate(&self) -> f64 {
        self.rate
    }

    /// g(t) for a distance t >= 0.
    pub fn eval(&self, t: f64) -> f64 {
        match self.kind {
            GrowthKind::Exponential => libm::exp(self.rate * t),
            GrowthKind::Linear => 1.0 + self.rate * t,
        }
    }

    /// The same family with the rate multiplied by `factor` (> 0): g(t) of
    /// the result equals g(factor · t) of `self`. Used to change units,
    /// e.g. to work in multiples of a bandwidth.
    pub(crate) fn scaled(&self, factor: f64) -> Self {
        Self {
            kind: self.kind,
            rate: self.rate * factor,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn growth_values() {
        let e = Growth::exponential(0.5).unwrap();
        assert_eq!(e.eval(0.0), 1.0);
        assert!((e.eval(2.0) - libm::exp(1.0)).abs() < 1e-15);
        let l = Growth::linear(0.5).unwrap();
        assert_eq!(l.eval(0.0), 1.0);
        assert_eq!(l.eval(2.0), 2.0);
    }

    #[test]
    fn growth_is_submultiplicative() {
        for g in [
            Growth::exponential(0.7).unwrap(),
            Growth::linear(0.7).unwrap(),
        ] {
            for &(a, b) in &[(0.0, 1.0), (0.3, 2.0), (5.0, 7.0), (1e-3, 1e3)] {
                assert!(g.eval(a + b) <= g.eval(a) * g.eval(b) * (1.0 + 1e-15));
            }
        }
    }

    #[test]
    fn bad_rates_are_refused() {
        for bad in [0.0, -1.0, f64::NAN, f64::INFINITY] {
            assert!(Growth::exponential(bad).is_err());
            assert!(Growth::linear(bad).is_err());
        }
    }
}
