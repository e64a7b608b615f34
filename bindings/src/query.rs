//! The four query families behind one foreign object, [`GeoQuery`].
//!
//! One object rather than four keeps the foreign API small and lets
//! `GeoMechanism.privatize(query, x)` take any family. Points cross the
//! boundary as lists of coordinates and are checked here (length and
//! finiteness) before the core sees them.

use std::fmt;
use std::str::FromStr;
use std::sync::Arc;

use geopriv::{
    AnyQuery, GaussianKde, Query, QueryDescriptor, Report, SoftInterval, SoftThreshold,
    TwoWayThreshold,
};

use crate::geo::PointRole;
use crate::{guard, GeoprivError, Growth, Projection};

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
    /// 2-D soft membership of a region (GeoJSON polygon).
    Region,
}

/// A query f : R^d -> R with its sensitivities. Immutable and thread-safe.
///
/// Build one with `threshold`, `interval`, `two_way` or `kde`; evaluate it
/// on points given as lists of `dimension()` finite coordinates.
#[derive(Debug, uniffi::Object)]
#[uniffi::export(Display)]
pub struct GeoQuery {
    query: AnyQuery,
    /// The projection a lat/lon constructor used, so that
    /// `privatize_latlon` can refuse a point projected differently.
    projection: Option<Projection>,
}

/// The core region query for the bindings' constructors.
fn region(
    geojson: &str,
    feature_id: Option<String>,
    width: f64,
    projection: Option<&dyn geopriv::Projection>,
) -> Result<geopriv::RegionQuery, geopriv::Error> {
    use geopriv::query::region_geojson::{region_from_geojson, FeatureSelector};
    let selector = feature_id.map_or(FeatureSelector::Only, FeatureSelector::Id);
    region_from_geojson(geojson, &selector, width, projection)
}

impl GeoQuery {
    fn new(query: impl Into<AnyQuery>) -> Arc<Self> {
        Arc::new(Self {
            query: query.into(),
            projection: None,
        })
    }

    fn with_projection(query: impl Into<AnyQuery>, projection: Projection) -> Arc<Self> {
        Arc::new(Self {
            query: query.into(),
            projection: Some(projection),
        })
    }

    /// The public description a report carries (family and parameters).
    pub(crate) fn descriptor(&self) -> QueryDescriptor {
        self.query.descriptor()
    }

    /// The projection this query was built with, if any.
    pub(crate) fn projection(&self) -> Option<Projection> {
        self.projection
    }

    /// The core's device-side release: privatize f(x) with `mechanism` and
    /// wrap it in a report, charged to `budget` when given (refused with
    /// `BudgetExceeded` before anything is computed if it cannot afford it;
    /// nothing charged if the release fails). `x` is checked first.
    pub(crate) fn release(
        &self,
        mechanism: &geopriv::Mechanism,
        x: &[f64],
        rng: &mut dyn geopriv::device::budget::NoiseRng,
        ledger: Option<&mut dyn geopriv::Ledger>,
    ) -> Result<Report, GeoprivError> {
        self.check_point(x)?;
        Ok(match ledger {
            Some(l) => Report::release(l, mechanism, &self.query, x, rng),
            None => Report::release_unmetered(mechanism, &self.query, x, rng),
        }?)
    }

    /// The core query, for the modules that build on it (mechanisms).
    pub(crate) fn query(&self) -> &AnyQuery {
        &self.query
    }

    /// Check that `x` is a point this query accepts: exactly `dimension()`
    /// coordinates, all finite. Errors use the core crate's messages.
    pub(crate) fn check_point(&self, x: &[f64]) -> Result<(), GeoprivError> {
        Ok(self.query.check_point(x)?)
    }
}

#[uniffi::export]
impl GeoQuery {
    /// Soft threshold "x > threshold" (1-D) with a linear ramp of `width`
    /// (finite, > 0) centred on the threshold.
    #[uniffi::constructor]
    pub fn threshold(threshold: f64, width: f64) -> Result<Arc<Self>, GeoprivError> {
        guard(|| Ok(Self::new(SoftThreshold::new(threshold, width)?)))
    }

    /// Soft interval "lower <= x <= upper" (1-D), ramps of `width` centred
    /// on both ends; needs upper - lower >= width.
    #[uniffi::constructor]
    pub fn interval(lower: f64, upper: f64, width: f64) -> Result<Arc<Self>, GeoprivError> {
        guard(|| Ok(Self::new(SoftInterval::new(lower, upper, width)?)))
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
            Ok(Self::new(TwoWayThreshold::new(
                threshold1, threshold2, width,
            )?))
        })
    }

    /// Soft membership of a region read from GeoJSON text (RFC 7946): "share
    /// of users inside this area". f(x) = clamp(1/2 + sd(x)/W, 0, 1) with
    /// sd the signed distance to the boundary (positive inside) and
    /// W = `width_metres` (docs/MATH.md §13). `feature_id` picks the
    /// feature by id (a numeric id in decimal); without it the text must
    /// hold a single feature or geometry. Coordinates are metres
    /// `[x east, y north]`; use `region_geojson_latlon` for lon/lat. The
    /// query id is `region:g=<sha256 of the geometry>;w=W`.
    #[uniffi::constructor]
    pub fn region_geojson(
        geojson: String,
        feature_id: Option<String>,
        width_metres: f64,
    ) -> Result<Arc<Self>, GeoprivError> {
        guard(|| Ok(Self::new(region(&geojson, feature_id, width_metres, None)?)))
    }

    /// `region_geojson` for GeoJSON in longitude/latitude degrees (the RFC
    /// 7946 default): every vertex is projected with `projection`, and
    /// points go through `GeoMechanism.privatize_latlon` with the same
    /// projection.
    #[uniffi::constructor]
    pub fn region_geojson_latlon(
        geojson: String,
        feature_id: Option<String>,
        width_metres: f64,
        projection: Projection,
    ) -> Result<Arc<Self>, GeoprivError> {
        guard(|| {
            let p = projection.core()?;
            Ok(Self::with_projection(
                region(&geojson, feature_id, width_metres, Some(p.as_ref()))?,
                projection,
            ))
        })
    }

    /// Gaussian kernel exp(-||x - center||² / (2 bandwidth²)); the point
    /// dimension is the length of `center` (at least 1).
    #[uniffi::constructor]
    pub fn kde(center: Vec<f64>, bandwidth: f64) -> Result<Arc<Self>, GeoprivError> {
        guard(|| Ok(Self::new(GaussianKde::new(&center, bandwidth)?)))
    }

    /// Gaussian kernel centred at a location (WGS84 degrees), with
    /// `bandwidth_metres` in projected metres: f(x) = exp(-d²/(2 h²)) where d is
    /// the distance in metres between the projected centre and the
    /// projected location x. Used for density maps: the mean of f over the
    /// users is the kernel density at the centre (times 2πh²). Points are
    /// `[x east, y north]` metres (see `project`) or lat/lon through
    /// `GeoMechanism.privatize_latlon` with the same projection.
    #[uniffi::constructor]
    pub fn kde_latlon(
        lat: f64,
        lon: f64,
        bandwidth_metres: f64,
        projection: Projection,
    ) -> Result<Arc<Self>, GeoprivError> {
        guard(|| {
            let center = projection.forward(lat, lon, PointRole::Parameter("kde centre"))?;
            Ok(Self::with_projection(
                GaussianKde::new(&center, bandwidth_metres)?,
                projection,
            ))
        })
    }

    /// Two-way threshold from a corner location: "share of users east *and*
    /// north of (lat, lon)", i.e. projected x > x_corner and y > y_corner,
    /// with a ramp band `width_metres` wide. The quadrant is taken in the
    /// projected plane: with `LocalEquirectangular` it is bounded by the
    /// meridian and the parallel through the corner; with `WebMercator`,
    /// by the same lines (the projection keeps meridians and parallels
    /// straight). For other boxes (south-west, ...) build `two_way` on
    /// negated coordinates yourself.
    #[uniffi::constructor]
    pub fn two_way_latlon(
        corner_lat: f64,
        corner_lon: f64,
        width_metres: f64,
        projection: Projection,
    ) -> Result<Arc<Self>, GeoprivError> {
        guard(|| {
            let [x, y] = projection.forward(
                corner_lat,
                corner_lon,
                PointRole::Parameter("two-way corner"),
            )?;
            Ok(Self::with_projection(
                TwoWayThreshold::new(x, y, width_metres)?,
                projection,
            ))
        })
    }

    /// The query named by a canonical id (see `query_id`), e.g.
    /// `"threshold:T=100000;w=20000"`: lets a server rebuild the queries it
    /// collects from their ids. The parameters are checked.
    #[uniffi::constructor]
    pub fn from_id(id: String) -> Result<Arc<Self>, GeoprivError> {
        guard(|| {
            let d = QueryDescriptor::from_str(&id)?;
            Ok(Self::new(d.to_query()?))
        })
    }

    /// The stable canonical id of the query, equal for equal queries, e.g.
    /// `"threshold:T=100000;w=20000"` or `"kde:t=1200.5,-300;h=150"`. It is
    /// the `query_id` of the reports this query produces; a server groups
    /// reports by it.
    pub fn query_id(&self) -> String {
        self.descriptor().canonical_id()
    }

    /// Which family this query is.
    pub fn family(&self) -> QueryFamily {
        match self.query {
            AnyQuery::Threshold(_) => QueryFamily::Threshold,
            AnyQuery::Interval(_) => QueryFamily::Interval,
            AnyQuery::TwoWay(_) => QueryFamily::TwoWay,
            AnyQuery::Kde(_) => QueryFamily::Kde,
            AnyQuery::Region(_) => QueryFamily::Region,
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
        write!(f, "GeoQuery({})", self.query.descriptor())?;
        match self.projection {
            None => Ok(()),
            Some(Projection::WebMercator) => write!(f, " in WebMercator metres"),
            Some(Projection::LocalEquirectangular { ref_lat, ref_lon }) => write!(
                f,
                " in LocalEquirectangular(ref_lat={ref_lat}, ref_lon={ref_lon}) metres"
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
        assert_eq!(t.to_string(), "GeoQuery(threshold:T=100;w=10)");
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

    /// The reference values the Kotlin and Python tests also check (docs/MATH.md
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

    /// KDE reference values (the exact smooth sensitivity of the core), also
    /// checked by the Kotlin and Python tests: with c = ||x - t||/h,
    /// f = exp(-c²/2); L(t) = ℓ(0)/h = r* exp(-u)/h where r*² = 2u and
    /// 1 + 2u = e^u (the tangency partner of the centre); L = S* = e^{-1/2}/h
    /// (the global constant) at c = 1; and S*(t) = L(t) when the growth is
    /// so steep (γh = 1000) that no other point can raise it (the core adds
    /// a relative 2^-40 safety margin).
    #[test]
    fn kde_reference_values() {
        let close =
            |a: f64, b: f64, tol: f64| assert!((a - b).abs() <= tol * b.abs(), "{a} vs {b}");
        let h = 250.0;
        let k = GeoQuery::kde(vec![100.0, -50.0], h).unwrap();
        let global = (-0.5f64).exp() / h;
        close(k.global_lipschitz(), global, 1e-15);
        close(k.value(vec![100.0, -50.0]).unwrap(), 1.0, 0.0);
        close(
            k.value(vec![100.0 + 0.6 * h, -50.0 + 0.8 * h]).unwrap(),
            (-0.5f64).exp(),
            1e-15,
        );
        close(
            k.value(vec![100.0 + 3.0 * h, -50.0]).unwrap(),
            (-4.5f64).exp(),
            1e-14,
        );
        let mut u = 1.5f64;
        for _ in 0..60 {
            u -= (u.exp() - 1.0 - 2.0 * u) / (u.exp() - 2.0);
        }
        let ell0 = (2.0 * u).sqrt() * (-u).exp();
        assert!((ell0 - 0.451_256_234_078_308).abs() < 1e-14, "{ell0}");
        close(
            k.pointwise_lipschitz(vec![100.0, -50.0]).unwrap(),
            ell0 / h,
            1e-12,
        );
        let on_ring = vec![100.0, -50.0 + h];
        close(
            k.pointwise_lipschitz(on_ring.clone()).unwrap(),
            global,
            1e-12,
        );
        close(
            k.smooth_sensitivity(on_ring, exp(0.01)).unwrap(),
            global,
            1e-12,
        );
        close(
            k.smooth_sensitivity(vec![100.0, -50.0], exp(1000.0 / h))
                .unwrap(),
            ell0 / h,
            1e-11,
        );
        let s = k
            .smooth_sensitivity(vec![100.0, -50.0], exp(0.1 / h))
            .unwrap();
        assert!(s > ell0 / h && s <= global * (1.0 + 1e-12), "{s}");
        // Far away L decays only like 1/c (the tangency partner stays near
        // the centre's ring): L = ℓ(40)/h ≈ 1/(40 h), and L <= S* <= global.
        let far_x = vec![100.0 + 40.0 * h, -50.0];
        let far_l = k.pointwise_lipschitz(far_x.clone()).unwrap();
        close(far_l * 40.0 * h, 1.0, 1e-3);
        let far = k.smooth_sensitivity(far_x, exp(1.0 / h)).unwrap();
        assert!(far >= far_l && far < global, "{far}");
    }

    #[test]
    fn latlon_constructors_and_ids() {
        let paris = Projection::LocalEquirectangular {
            ref_lat: 48.85,
            ref_lon: 2.35,
        };
        let k = GeoQuery::kde_latlon(48.85, 2.35, 250.0, paris).unwrap();
        assert_eq!(k.query_id(), "kde:t=0,0;h=250");
        assert!(k.to_string().contains("LocalEquirectangular"), "{k}");
        let w = GeoQuery::two_way_latlon(48.86, 2.35, 100.0, paris).unwrap();
        assert_eq!(w.family(), QueryFamily::TwoWay);
        let [_, t2] = match &w.query {
            AnyQuery::TwoWay(q) => q.thresholds(),
            _ => unreachable!(),
        };
        assert!((t2 - 1112.0).abs() < 5.0, "{t2}"); // 0.01° of latitude
        let m = GeoQuery::kde_latlon(0.0, 0.0, 100.0, Projection::WebMercator).unwrap();
        assert_eq!(m.query_id(), "kde:t=0,0;h=100");
        for (lat, lon) in [(f64::NAN, 0.0), (91.0, 0.0), (0.0, f64::INFINITY)] {
            for r in [
                GeoQuery::kde_latlon(lat, lon, 100.0, paris),
                GeoQuery::two_way_latlon(lat, lon, 100.0, paris),
            ] {
                assert!(
                    matches!(r, Err(GeoprivError::InvalidParameter(_))),
                    "{lat} {lon}"
                );
            }
        }
        for bad in [0.0, -1.0, f64::NAN] {
            assert!(matches!(
                GeoQuery::kde_latlon(48.85, 2.35, bad, paris),
                Err(GeoprivError::InvalidParameter(_))
            ));
        }
        for id in [
            "threshold:T=100000;w=20000",
            "interval:a=0;b=10;w=1",
            "two-way:T1=1;T2=2;w=3",
            "kde:t=1200.5,-300;h=150",
        ] {
            assert_eq!(GeoQuery::from_id(id.into()).unwrap().query_id(), id);
        }
        for bad in [
            "",
            "threshold",
            "threshold:T=1;w=0",
            "circle:r=1",
            "kde:t=;h=1",
        ] {
            assert!(
                matches!(
                    GeoQuery::from_id(bad.into()),
                    Err(GeoprivError::InvalidParameter(_))
                ),
                "{bad}"
            );
        }
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
