//! The four query families behind one foreign object, [`GeoQuery`].
//!
//! One object rather than four keeps the foreign API small and lets the
//! coming `Mechanism.privatize(query, x)` take any family. Points cross the
//! boundary as lists of coordinates and are checked here (length and
//! finiteness) before the core sees them.

use std::fmt;
use std::sync::Arc;

use geopriv::{GaussianKde, Query, SoftInterval, SoftThreshold, TwoWayThreshold};

use crate::{guard, GeoprivError, Growth};

/// Which family a [`GeoQuery`] belongs to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, uniffi::Enum)]
pub enum QueryFamily {
    /// 1-D soft threshold, "share with x > T".
    Threshold,
    /// 1-D soft interval, "share with a <= x <= b".
    Interval,
    /// 2-D two-way threshold, "share with x1 > T1 and x2 > T2".
    TwoWay,
    /// Gaussian kernel density at a query point, any dimension.
    Kde,
}

#[derive(Debug)]
enum Family {
    Threshold(SoftThreshold),
    Interval(SoftInterval),
    TwoWay(TwoWayThreshold),
    Kde(GaussianKde),
}

/// A query f : R^d -> R with its sensitivities. Immutable and thread-safe.
///
/// Build one with `threshold`, `interval`, `two_way` or `kde`; evaluate it
/// on points given as lists of `dimension()` finite coordinates.
#[derive(Debug, uniffi::Object)]
#[uniffi::export(Display)]
pub struct GeoQuery {
    family: Family,
}

impl GeoQuery {
    fn new(family: Family) -> Arc<Self> {
        Arc::new(Self { family })
    }

    /// The core query, for the modules that build on it (mechanisms).
    pub(crate) fn query(&self) -> &dyn Query {
        match &self.family {
            Family::Threshold(q) => q,
            Family::Interval(q) => q,
            Family::TwoWay(q) => q,
            Family::Kde(q) => q,
        }
    }

    /// Check that `x` is a point this query accepts: exactly `dimension()`
    /// coordinates, all finite. Errors use the core crate's messages.
    pub(crate) fn check_point(&self, x: &[f64]) -> Result<(), GeoprivError> {
        let expected = self.query().dimension();
        if x.len() != expected {
            return Err(geopriv::Error::DimensionMismatch {
                expected,
                found: x.len(),
            }
            .into());
        }
        if let Some((coordinate, &value)) = x.iter().enumerate().find(|(_, v)| !v.is_finite()) {
            return Err(geopriv::Error::NonFinitePoint { coordinate, value }.into());
        }
        Ok(())
    }
}

#[uniffi::export]
impl GeoQuery {
    /// Soft threshold "x > threshold" (1-D) with a linear ramp of `width`
    /// (finite, > 0) centred on the threshold.
    #[uniffi::constructor]
    pub fn threshold(threshold: f64, width: f64) -> Result<Arc<Self>, GeoprivError> {
        guard(|| {
            Ok(Self::new(Family::Threshold(SoftThreshold::new(
                threshold, width,
            )?)))
        })
    }

    /// Soft interval "lower <= x <= upper" (1-D), ramps of `width` centred
    /// on both ends; needs upper - lower >= width.
    #[uniffi::constructor]
    pub fn interval(lower: f64, upper: f64, width: f64) -> Result<Arc<Self>, GeoprivError> {
        guard(|| {
            Ok(Self::new(Family::Interval(SoftInterval::new(
                lower, upper, width,
            )?)))
        })
    }

    /// Two-way threshold "x1 > threshold1 and x2 > threshold2" (2-D) with a
    /// ramp band of `width`.
    #[uniffi::constructor]
    pub fn two_way(
        threshold1: f64,
        threshold2: f64,
        width: f64,
    ) -> Result<Arc<Self>, GeoprivError> {
        guard(|| {
            Ok(Self::new(Family::TwoWay(TwoWayThreshold::new(
                threshold1, threshold2, width,
            )?)))
        })
    }

    /// Gaussian kernel exp(-||x - center||² / (2 bandwidth²)); the point
    /// dimension is the length of `center` (at least 1).
    #[uniffi::constructor]
    pub fn kde(center: Vec<f64>, bandwidth: f64) -> Result<Arc<Self>, GeoprivError> {
        guard(|| {
            Ok(Self::new(Family::Kde(GaussianKde::new(
                &center, bandwidth,
            )?)))
        })
    }

    /// Which family this query is.
    pub fn family(&self) -> QueryFamily {
        match self.family {
            Family::Threshold(_) => QueryFamily::Threshold,
            Family::Interval(_) => QueryFamily::Interval,
            Family::TwoWay(_) => QueryFamily::TwoWay,
            Family::Kde(_) => QueryFamily::Kde,
        }
    }

    /// Number of coordinates a point must have.
    pub fn dimension(&self) -> u32 {
        // Dimensions come from constructors: 1, 2 or a list length, which
        // cannot exceed u32 in practice; saturate rather than wrap.
        u32::try_from(self.query().dimension()).unwrap_or(u32::MAX)
    }

    /// f(x).
    pub fn value(&self, x: Vec<f64>) -> Result<f64, GeoprivError> {
        guard(|| {
            self.check_point(&x)?;
            Ok(self.query().value(&x)?)
        })
    }

    /// sup over x != y of |f(x) - f(y)| / d(x, y).
    pub fn global_lipschitz(&self) -> f64 {
        self.query().global_lipschitz()
    }

    /// L_f(x) = sup over y != x of |f(x) - f(y)| / d(x, y).
    pub fn pointwise_lipschitz(&self, x: Vec<f64>) -> Result<f64, GeoprivError> {
        guard(|| {
            self.check_point(&x)?;
            Ok(self.query().pointwise_lipschitz(&x)?)
        })
    }

    /// The smooth sensitivity S*(x) = sup_y L_f(y) / g(d(x, y)).
    ///
    /// For probing and tests: a device must never release it, since S(x)
    /// itself leaks x.
    pub fn smooth_sensitivity(&self, x: Vec<f64>, growth: Growth) -> Result<f64, GeoprivError> {
        guard(|| {
            let growth = geopriv::Growth::try_from(growth)?;
            self.check_point(&x)?;
            Ok(self.query().smooth_sensitivity(&x, growth)?)
        })
    }
}

impl fmt::Display for GeoQuery {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.family {
            Family::Threshold(q) => write!(
                f,
                "SoftThreshold(threshold={}, width={})",
                q.threshold(),
                q.width()
            ),
            Family::Interval(q) => write!(
                f,
                "SoftInterval(lower={}, upper={}, width={})",
                q.lower(),
                q.upper(),
                q.width()
            ),
            Family::TwoWay(q) => {
                let [t1, t2] = q.thresholds();
                write!(
                    f,
                    "TwoWayThreshold(threshold1={t1}, threshold2={t2}, width={})",
                    q.width()
                )
            }
            Family::Kde(q) => write!(
                f,
                "GaussianKde(center={:?}, bandwidth={})",
                q.center(),
                q.bandwidth()
            ),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn exp(rate: f64) -> Growth {
        Growth::Exponential { rate }
    }

    #[test]
    fn families_and_dimensions() {
        let t = GeoQuery::threshold(100.0, 10.0).unwrap();
        assert_eq!((t.family(), t.dimension()), (QueryFamily::Threshold, 1));
        let i = GeoQuery::interval(0.0, 10.0, 2.0).unwrap();
        assert_eq!((i.family(), i.dimension()), (QueryFamily::Interval, 1));
        let w = GeoQuery::two_way(0.0, 0.0, 1.0).unwrap();
        assert_eq!((w.family(), w.dimension()), (QueryFamily::TwoWay, 2));
        let k = GeoQuery::kde(vec![0.0, 0.0, 0.0], 1.0).unwrap();
        assert_eq!((k.family(), k.dimension()), (QueryFamily::Kde, 3));
        assert_eq!(t.to_string(), "SoftThreshold(threshold=100, width=10)");
    }

    #[test]
    fn values_match_the_core() {
        let t = GeoQuery::threshold(100.0, 10.0).unwrap();
        assert_eq!(t.value(vec![100.0]).unwrap(), 0.5);
        assert_eq!(t.value(vec![0.0]).unwrap(), 0.0);
        assert_eq!(t.global_lipschitz(), 0.1);
        // Far from the ramp: S* = max(1/(e + θ), 1/(θ g(e))), e = 95.
        let s = t.smooth_sensitivity(vec![0.0], exp(0.01)).unwrap();
        let want = f64::max(1.0 / 105.0, 1.0 / (10.0 * (0.95f64).exp()));
        assert!((s - want).abs() < 1e-15, "{s} vs {want}");
    }

    /// The reference values the Kotlin and Python tests also check (SPEC
    /// §3.1-3.3 closed forms), so all three languages agree with the core.
    #[test]
    fn reference_values_of_the_foreign_tests() {
        let close =
            |a: f64, b: f64| assert!((a - b).abs() <= 1e-12 * b.abs().max(1.0), "{a} vs {b}");
        let t = GeoQuery::threshold(100.0, 10.0).unwrap();
        for (x, v) in [(100.0, 0.5), (102.5, 0.75), (0.0, 0.0), (1000.0, 1.0)] {
            close(t.value(vec![x]).unwrap(), v);
        }
        close(t.pointwise_lipschitz(vec![0.0]).unwrap(), 1.0 / 105.0);
        close(t.pointwise_lipschitz(vec![100.0]).unwrap(), 0.1);
        close(
            t.smooth_sensitivity(vec![0.0], exp(0.01)).unwrap(),
            1.0 / (10.0 * 0.95f64.exp()),
        );
        close(
            t.smooth_sensitivity(vec![0.0], Growth::Linear { rate: 0.01 })
                .unwrap(),
            1.0 / 19.5,
        );
        close(t.smooth_sensitivity(vec![100.0], exp(0.01)).unwrap(), 0.1);

        let i = GeoQuery::interval(0.0, 100.0, 10.0).unwrap();
        for (x, v) in [
            (50.0, 1.0),
            (0.0, 0.5),
            (2.5, 0.75),
            (-50.0, 0.0),
            (200.0, 0.0),
        ] {
            close(i.value(vec![x]).unwrap(), v);
        }
        close(i.global_lipschitz(), 0.1);
        close(i.pointwise_lipschitz(vec![-50.0]).unwrap(), 1.0 / 55.0);
        close(
            i.smooth_sensitivity(vec![-50.0], exp(0.01)).unwrap(),
            1.0 / (10.0 * 0.45f64.exp()),
        );

        let w = GeoQuery::two_way(0.0, 0.0, 1.0).unwrap();
        for (x, v) in [
            ([10.0, 10.0], 1.0),
            ([0.0, 10.0], 0.5),
            ([-10.0, 10.0], 0.0),
            ([10.0, -10.0], 0.0),
        ] {
            close(w.value(x.to_vec()).unwrap(), v);
        }
        close(w.global_lipschitz(), 1.0);
        close(
            w.pointwise_lipschitz(vec![-10.0, 10.0]).unwrap(),
            1.0 / 10.5,
        );
        close(
            w.smooth_sensitivity(vec![-10.0, 10.0], exp(0.1)).unwrap(),
            1.0 / 0.95f64.exp(),
        );
    }

    #[test]
    fn bad_points_are_invalid_input() {
        let w = GeoQuery::two_way(0.0, 0.0, 1.0).unwrap();
        for x in [
            vec![],
            vec![1.0],
            vec![1.0, 2.0, 3.0],
            vec![f64::NAN, 0.0],
            vec![0.0, f64::INFINITY],
            vec![f64::NEG_INFINITY, 0.0],
        ] {
            for r in [
                w.value(x.clone()),
                w.pointwise_lipschitz(x.clone()),
                w.smooth_sensitivity(x.clone(), exp(1.0)),
            ] {
                assert!(
                    matches!(r, Err(GeoprivError::InvalidInput(_))),
                    "{x:?}: {r:?}"
                );
            }
        }
        // The placeholder KDE must still refuse bad points.
        let k = GeoQuery::kde(vec![0.0, 0.0], 1.0).unwrap();
        assert!(matches!(
            k.value(vec![0.0]),
            Err(GeoprivError::InvalidInput(_))
        ));
    }

    #[test]
    fn bad_parameters_are_invalid_parameter() {
        for bad in [0.0, -1.0, f64::NAN, f64::INFINITY] {
            for r in [
                GeoQuery::threshold(0.0, bad),
                GeoQuery::interval(0.0, 10.0, bad),
                GeoQuery::two_way(0.0, 0.0, bad),
                GeoQuery::kde(vec![0.0], bad),
            ] {
                assert!(matches!(r, Err(GeoprivError::InvalidParameter(_))), "{bad}");
            }
        }
        assert!(GeoQuery::threshold(f64::NAN, 1.0).is_err());
        assert!(matches!(
            GeoQuery::kde(vec![], 1.0),
            Err(GeoprivError::InvalidInput(_))
        ));
        let t = GeoQuery::threshold(0.0, 1.0).unwrap();
        assert!(matches!(
            t.smooth_sensitivity(vec![0.0], exp(-1.0)),
            Err(GeoprivError::InvalidParameter(_))
        ));
    }
}
