//! `SoftInterval`: "share of users with a <= x <= b" (docs/MATH.md §3.2).

use super::{ramp_smooth_sensitivity, Query};
use crate::error::{check_point, finite, positive_finite, Error, Result};
use crate::growth::Growth;

/// Soft indicator of [a, b] with ramps of width θ centred at a and at b
/// (one dimension; requires b - a >= θ):
///
/// ```text
/// f(x) = clamp( min( (x - a)/θ + 1/2, (b - x)/θ + 1/2 ), 0, 1 )
/// ```
///
/// so f = 1 on the plateau [a + θ/2, b - θ/2] and 0 outside
/// [a - θ/2, b + θ/2]. Global Lipschitz constant 1/θ.
///
/// Let e = min(|x - a|, |x - b|) - θ/2 be the distance to the nearest ramp.
/// On a ramp (e <= 0) L = S* = 1/θ. Off the ramps
///
/// ```text
/// L(x)  = 1/(e + θ)
/// S*(x) = max( 1/(e + θ), 1/(θ · g(e)) )
/// ```
///
/// Why: off the ramps the nearest point where f takes the opposite extreme
/// value is the far end of the nearest ramp, at distance e + θ, and secants
/// into the ramp are flatter. For S* the outside case is that of
/// `SoftThreshold`. The plateau case, where both ramps compete: let x be at
/// distances e_a <= e_b from the two ramps. Points y on the plateau nearer
/// the same ramp reduce to the one-ramp argument. Points y with
/// min(e_a', e_b') >= e_a have L(y) <= L(x). The remaining points are nearer
/// the far ramp, with e_b' <= e_a, at distance e_b - e_b' from x; they give
/// 1/((e_b' + θ) g(e_b - e_b')), maximal at an end point: e_b' = e_a gives
/// at most L(x), e_b' = 0 gives 1/(θ g(e_b)) <= 1/(θ g(e_a)). So only the
/// nearest ramp matters, and the formula holds with e = min(e_a, e_b).
/// `tests/brute_force_sensitivity.rs` checks this against the definition.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct SoftInterval {
    lower: f64,
    upper: f64,
    width: f64,
}

impl SoftInterval {
    /// A soft interval [lower, upper] with ramp `width`; all finite,
    /// width > 0 and upper - lower >= width.
    pub fn new(lower: f64, upper: f64, width: f64) -> Result<Self> {
        let lower = finite("lower", lower)?;
        let upper = finite("upper", upper)?;
        let width = positive_finite("width", width)?;
        if upper - lower < width {
            return Err(Error::InvalidParameter {
                name: "upper",
                value: upper,
                requirement: "at least lower + width (the interval must be wider than its ramps)",
            });
        }
        Ok(Self {
            lower,
            upper,
            width,
        })
    }

    /// The lower end a.
    pub fn lower(&self) -> f64 {
        self.lower
    }

    /// The upper end b.
    pub fn upper(&self) -> f64 {
        self.upper
    }

    /// The ramp width θ.
    pub fn width(&self) -> f64 {
        self.width
    }

    /// Distance to the nearest ramp, e (<= 0 on a ramp).
    #[inline]
    fn ramp_distance(&self, x: f64) -> f64 {
        (x - self.lower).abs().min((x - self.upper).abs()) - 0.5 * self.width
    }

    fn point(&self, x: &[f64]) -> Result<f64> {
        check_point(x, 1)?;
        Ok(x[0])
    }
}

impl Query for SoftInterval {
    fn descriptor(&self) -> crate::report::QueryDescriptor {
        self.into()
    }

    fn dimension(&self) -> usize {
        1
    }

    fn value(&self, x: &[f64]) -> Result<f64> {
        let x = self.point(x)?;
        let rising = (x - self.lower) / self.width + 0.5;
        let falling = (self.upper - x) / self.width + 0.5;
        Ok(rising.min(falling).clamp(0.0, 1.0))
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
        let q = SoftInterval::new(0.0, 10.0, 2.0).unwrap();
        assert_eq!(q.value(&[-2.0]).unwrap(), 0.0);
        assert_eq!(q.value(&[0.0]).unwrap(), 0.5);
        assert_eq!(q.value(&[5.0]).unwrap(), 1.0);
        assert_eq!(q.value(&[10.5]).unwrap(), 0.25);
        // Plateau point 4: e = min(4, 6) - 1 = 3.
        assert_eq!(q.pointwise_lipschitz(&[4.0]).unwrap(), 0.2);
        let g = Growth::linear(0.5).unwrap();
        let s = q.smooth_sensitivity(&[4.0], g).unwrap();
        assert_eq!(s, f64::max(1.0 / (2.0 * 2.5), 0.2));
    }

    #[test]
    fn narrow_intervals_are_refused() {
        assert!(SoftInterval::new(0.0, 1.0, 2.0).is_err());
        assert!(SoftInterval::new(1.0, 0.0, 0.5).is_err());
        assert!(SoftInterval::new(0.0, f64::NAN, 0.5).is_err());
        assert!(SoftInterval::new(0.0, 2.0, 2.0).is_ok());
    }
}
