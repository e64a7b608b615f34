//! Placeholder: filled in below.
use super::Query;
use crate::error::Result;
use crate::growth::Growth;

/// Gaussian kernel density at a query point (SPEC §3.4). Placeholder.
#[derive(Clone, Debug, PartialEq)]
pub struct GaussianKde {}

impl Query for GaussianKde {
    fn dimension(&self) -> usize {
        0
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
