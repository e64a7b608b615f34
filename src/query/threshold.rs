//! `SoftThreshold`: "share of users with x > T" (docs/MATH.md §3.1).

use super::{ramp_smooth_sensitivity, Query};
use crate::error::{check_point, finite, positive_finite, Result};
use crate::growth::Growth;

/// Soft threshold at `T` with ramp width θ > 0 (one dimension):
///
/// ```text
/// f(x) = 0                      for x < T - θ/2
///        (x - T)/θ + 1/2        for |x - T| <= θ/2   (the ramp)
///        1                      for x > T + θ/2
/// ```
///
/// Global Lipschitz constant 1/θ. With e = |x - T| - θ/2 the distance to
/// the ramp: on the ramp (e <= 0) L = S* = 1/θ; off it L(x) = 1/(e + θ)
/// (the secant to the far end of the ramp, where f takes the other extreme
/// value) and
///
/// ```text
/// S*(x) = max( 1/(e + θ), 1/(θ · g(e)) ).
/// ```
///
/// Why S* is exact: S*(x) = sup_y L(y)/g(|x - y|). Points y beyond x (farther
/// from the ramp) have smaller L and larger g; points on the far side have
/// L <= 1/θ at a distance larger than the ramp edge; points on the ramp give
/// at most 1/(θ g(e)) (the nearest edge). The points between x and the ramp
/// give 1/((e' + θ) g(e - e')), maximal at an end point for both growth
/// families (see `ramp_smooth_sensitivity`). The value at y = x is L(x).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct SoftThreshold {
    threshold: f64,
    width: f64,
}

impl SoftThreshold {
    /// A soft threshold at `threshold` (finite) with ramp `width` (finite, > 0).
    pub fn new(threshold: f64, width: f64) -> Result<Self> {
        Ok(Self {
            threshold: finite("threshold", threshold)?,
            width: positive_finite("width", width)?,
        })
    }

    /// The threshold T.
    pub fn threshold(&self) -> f64 {
        self.threshold
    }

    /// The ramp width θ.
    pub fn width(&self) -> f64 {
        self.width
    }

    /// Signed distance from x to the ramp, e = |x - T| - θ/2 (<= 0 on it).
    #[inline]
    fn ramp_distance(&self, x: f64) -> f64 {
        (x - self.threshold).abs() - 0.5 * self.width
    }

    fn point(&self, x: &[f64]) -> Result<f64> {
        check_point(x, 1)?;
        Ok(x[0])
    }
}

impl Query for SoftThreshold {
    fn descriptor(&self) -> crate::report::QueryDescriptor {
        self.into()
    }

    fn dimension(&self) -> usize {
        1
    }

    fn value(&self, x: &[f64]) -> Result<f64> {
        let x = self.point(x)?;
        Ok(((x - self.threshold) / self.width + 0.5).clamp(0.0, 1.0))
    }

    fn global_lipschitz(&self) -> f64 {
        1.0 / self.width
    }

    fn pointwise_lipschitz(&self, x: &[f64]) -> Result<f64> {
        let e = self.ramp_distance(self.point(x)?);
        Ok(1.0 / (e.max(0.0) + self.width))
    }

    fn smooth_sensitivity(&self, x: &[f64], growth: Growth) -> Result<f64> {
        let e = self.ramp_distance(self.point(x)?);
        Ok(ramp_smooth_sensitivity(e.max(0.0), self.width, growth))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_and_sensitivities() {
        let q = SoftThreshold::new(10.0, 2.0).unwrap();
        assert_eq!(q.value(&[8.0]).unwrap(), 0.0);
        assert_eq!(q.value(&[10.0]).unwrap(), 0.5);
        assert_eq!(q.value(&[10.5]).unwrap(), 0.75);
        assert_eq!(q.value(&[20.0]).unwrap(), 1.0);
        assert_eq!(q.global_lipschitz(), 0.5);
        assert_eq!(q.pointwise_lipschitz(&[10.2]).unwrap(), 0.5);
        // x = 14: e = 3, L = 1/(3 + 2).
        assert_eq!(q.pointwise_lipschitz(&[14.0]).unwrap(), 0.2);
        let g = Growth::exponential(0.1).unwrap();
        let s = q.smooth_sensitivity(&[14.0], g).unwrap();
        assert!((s - (0.5 * libm::exp(-0.3)).max(0.2)).abs() < 1e-16);
        assert_eq!(q.smooth_sensitivity(&[9.5], g).unwrap(), 0.5);
    }

    #[test]
    fn bad_input_is_refused() {
        assert!(SoftThreshold::new(f64::NAN, 1.0).is_err());
        assert!(SoftThreshold::new(0.0, 0.0).is_err());
        assert!(SoftThreshold::new(0.0, -1.0).is_err());
        assert!(SoftThreshold::new(0.0, f64::INFINITY).is_err());
        let q = SoftThreshold::new(0.0, 1.0).unwrap();
        assert!(q.value(&[f64::NAN]).is_err());
        assert!(q.value(&[1.0, 2.0]).is_err());
        assert!(q
            .smooth_sensitivity(&[f64::INFINITY], Growth::linear(1.0).unwrap())
            .is_err());
    }
}
