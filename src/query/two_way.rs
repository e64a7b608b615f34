//! `TwoWayThreshold`: "share of users with x1 > T1 and x2 > T2" (docs/MATH.md §3.3).

use super::{ramp_smooth_sensitivity, Query};
use crate::error::{check_point, finite, positive_finite, Result};
use crate::growth::Growth;
use crate::math::hypot;

/// Soft two-way threshold in the plane with ramp width τ > 0.
///
/// With R1 = τ/√2, R2 = R1 + τ and the corner centre
/// c0 = (T1 + τ/2 + R1, T2 + τ/2 + R1), let Q = [c0.x, ∞) × [c0.y, ∞) and
/// D(x) = dist(x, Q) = ||(max(0, c0.x - x1), max(0, c0.y - x2))||. Then
///
/// ```text
/// f(x) = clamp( (R2 - D(x)) / τ, 0, 1 )
/// ```
///
/// which is docs/MATH.md §3.3 written in one line: 1 where D < R1, 0 where D > R2,
/// and on the band R1 <= D <= R2 the interpolation (R2 - ||x - c0||)/τ on
/// the corner annulus, (x1 - T1 + τ/2)/τ on the upper arm and
/// (x2 - T2 + τ/2)/τ on the right arm. Global Lipschitz constant 1/τ
/// (D is 1-Lipschitz).
///
/// Let e be the distance from x to the band {R1 <= D <= R2}:
/// e = D - R2 outside, R1 - D inside with D > 0, and
/// R1 + min(x1 - c0.x, x2 - c0.y) for x in Q (beyond both arms: the
/// nearer arm wins, which is the max of the two arm formulas). On the band
/// L = S* = 1/τ; off it
///
/// ```text
/// L(x)  = 1/(e + τ)
/// S*(x) = max( 1/(e + τ), 1/(τ · g(e)) ).
/// ```
///
/// Why L: for x with f(x) = 1 and any z, the segment from x to z leaves
/// {D < R1} at a point w with |x - w| >= e, and |w - z| >= D(z) - R1 because
/// D is 1-Lipschitz; so |x - z| >= e + τ (1 - f(z)) and the secant slope is
/// at most u/(e + τu) <= 1/(e + τ) with u = 1 - f(z). Equality is attained
/// along the normal to the band. The outside case is symmetric.
///
/// Why S*: e(·) is 1-Lipschitz, so a point y at distance t from x has
/// e(y) >= max(0, e - t) and L(y)/g(t) <= 1/((max(0, e - t) + τ) g(t)). For
/// t >= e this is at most 1/(τ g(e)); for t in [0, e] it is the one-way
/// expression of `SoftThreshold`, maximal at t = 0 or t = e. Both values are
/// attained (y = x and the nearest band point), so S* is exact.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct TwoWayThreshold {
    thresholds: [f64; 2],
    width: f64,
    inner_radius: f64,
    corner: [f64; 2],
}

impl TwoWayThreshold {
    /// A two-way threshold at (`t1`, `t2`) (finite) with ramp `width` (finite, > 0).
    pub fn new(t1: f64, t2: f64, width: f64) -> Result<Self> {
        let t1 = finite("threshold_1", t1)?;
        let t2 = finite("threshold_2", t2)?;
        let width = positive_finite("width", width)?;
        let inner_radius = width * core::f64::consts::FRAC_1_SQRT_2;
        let offset = 0.5 * width + inner_radius;
        Ok(Self {
            thresholds: [t1, t2],
            width,
            inner_radius,
            corner: [t1 + offset, t2 + offset],
        })
    }

    /// The thresholds (T1, T2).
    pub fn thresholds(&self) -> [f64; 2] {
        self.thresholds
    }

    /// The ramp width τ.
    pub fn width(&self) -> f64 {
        self.width
    }

    /// The corner centre c0 = (T1 + τ/2 + R1, T2 + τ/2 + R1).
    pub fn corner(&self) -> [f64; 2] {
        self.corner
    }

    /// D(x), the distance from x to the quadrant Q beyond the corner centre.
    #[inline]
    fn quadrant_distance(&self, x: &[f64]) -> f64 {
        let dx = (self.corner[0] - x[0]).max(0.0);
        let dy = (self.corner[1] - x[1]).max(0.0);
        if dx == 0.0 {
            dy
        } else if dy == 0.0 {
            dx
        } else {
            hypot(dx, dy)
        }
    }

    /// Distance from x to the band (0 on the band).
    #[inline]
    fn band_distance(&self, x: &[f64]) -> f64 {
        let d = self.quadrant_distance(x);
        let r1 = self.inner_radius;
        let r2 = r1 + self.width;
        if d >= r2 {
            d - r2
        } else if d >= r1 {
            0.0
        } else if d > 0.0 {
            r1 - d
        } else {
            r1 + (x[0] - self.corner[0]).min(x[1] - self.corner[1])
        }
    }
}

impl Query for TwoWayThreshold {
    fn descriptor(&self) -> crate::report::QueryDescriptor {
        self.into()
    }

    fn dimension(&self) -> usize {
        2
    }

    fn value(&self, x: &[f64]) -> Result<f64> {
        check_point(x, 2)?;
        let r2 = self.inner_radius + self.width;
        Ok(((r2 - self.quadrant_distance(x)) / self.width).clamp(0.0, 1.0))
    }

    fn global_lipschitz(&self) -> f64 {
        1.0 / self.width
    }

    fn pointwise_lipschitz(&self, x: &[f64]) -> Result<f64> {
        check_point(x, 2)?;
        Ok(1.0 / (self.band_distance(x) + self.width))
    }

    fn smooth_sensitivity(&self, x: &[f64], growth: Growth) -> Result<f64> {
        check_point(x, 2)?;
        Ok(ramp_smooth_sensitivity(
            self.band_distance(x),
            self.width,
            growth,
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_match_the_spec_regions() {
        let tau = 2.0;
        let q = TwoWayThreshold::new(10.0, 20.0, tau).unwrap();
        let c0 = q.corner();
        // Upper arm (x2 > c0.y): (x1 - T1 + τ/2)/τ.
        assert!((q.value(&[10.5, c0[1] + 5.0]).unwrap() - 0.75).abs() < 1e-15);
        // Right arm (x1 > c0.x): (x2 - T2 + τ/2)/τ.
        assert!((q.value(&[c0[0] + 3.0, 19.5]).unwrap() - 0.25).abs() < 1e-15);
        // Corner annulus: (R2 - ||x - c0||)/τ.
        let r1 = tau / 2f64.sqrt();
        let r = r1 + 0.5;
        let p = [c0[0] - r / 2f64.sqrt(), c0[1] - r / 2f64.sqrt()];
        assert!((q.value(&p).unwrap() - 0.75).abs() < 1e-12);
        assert_eq!(q.value(&[0.0, 0.0]).unwrap(), 0.0);
        assert_eq!(q.value(&[100.0, 100.0]).unwrap(), 1.0);
    }

    #[test]
    fn beyond_both_arms_the_nearer_arm_wins() {
        let q = TwoWayThreshold::new(0.0, 0.0, 1.0).unwrap();
        let c0 = q.corner();
        let r1 = 1.0 / 2f64.sqrt();
        let x = [c0[0] + 3.0, c0[1] + 1.0];
        assert!((q.pointwise_lipschitz(&x).unwrap() - 1.0 / (1.0 + r1 + 1.0)).abs() < 1e-15);
    }

    #[test]
    fn bad_input_is_refused() {
        assert!(TwoWayThreshold::new(0.0, f64::NAN, 1.0).is_err());
        assert!(TwoWayThreshold::new(0.0, 0.0, 0.0).is_err());
        let q = TwoWayThreshold::new(0.0, 0.0, 1.0).unwrap();
        assert!(q.value(&[1.0]).is_err());
        assert!(q.value(&[1.0, f64::NEG_INFINITY]).is_err());
    }
}
