//! `GaussianKde`: Gaussian kernel density at a query point (SPEC §3.4).
//! (Smooth sensitivity being implemented; API surface is final.)
use super::Query;
use crate::error::{check_point, positive_finite, Error, Result};
use crate::growth::Growth;
use alloc::vec::Vec;

/// Gaussian kernel at a query point t with bandwidth h > 0, in any dimension
/// d >= 1: f(x) = exp(-||x - t||² / (2h²)).
#[derive(Clone, Debug, PartialEq)]
pub struct GaussianKde {
    center: Vec<f64>,
    bandwidth: f64,
}

impl GaussianKde {
    /// A kernel centred at `center` (d >= 1 finite coordinates) with
    /// bandwidth h (finite, > 0).
    pub fn new(center: &[f64], bandwidth: f64) -> Result<Self> {
        if center.is_empty() {
            return Err(Error::DimensionMismatch {
                expected: 1,
                found: 0,
            });
        }
        check_point(center, center.len())?;
        Ok(Self {
            center: center.to_vec(),
            bandwidth: positive_finite("bandwidth", bandwidth)?,
        })
    }

    /// The query point t.
    pub fn center(&self) -> &[f64] {
        &self.center
    }

    /// The bandwidth h.
    pub fn bandwidth(&self) -> f64 {
        self.bandwidth
    }
}

impl Query for GaussianKde {
    fn dimension(&self) -> usize {
        self.center.len()
    }
    fn value(&self, _x: &[f64]) -> Result<f64> {
        Ok(0.0)
    }
    fn global_lipschitz(&self) -> f64 {
        0.0
    }
    fn pointwise_lipschitz(&self, _x: &[f64]) -> Result<f64> {
        Ok(0.0)
    }
    fn smooth_sensitivity(&self, _x: &[f64], _g: Growth) -> Result<f64> {
        Ok(0.0)
    }
}
