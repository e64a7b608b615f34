//! Latitude/longitude (WGS84 degrees) to metres and back, so locations can
//! be fed to queries whose distance is Euclidean in metres.
//!
//! # In which metric the guarantee holds
//!
//! Geo-privacy (docs/MATH.md §1) is stated for the Euclidean distance between the
//! points the query sees, i.e. **between projected points, in projected
//! metres**. What a user cares about is distance on the ground, so the
//! projection decides what the guarantee means:
//!
//! * [`LocalEquirectangular`] around a reference point gives true ground
//!   metres near it (WGS84 radii of curvature at the reference latitude):
//!   north–south distances are exact to second order, east–west ones are
//!   scaled by cos φ / cos φ0 ≈ 1 − tan φ0 · Δφ, e.g. 0.05% off 3 km north
//!   or south of a reference at 45°N, 0.15% at 10 km. For a city-sized
//!   region, ε per projected metre is ε per ground metre.
//! * [`WebMercator`] (EPSG:3857, used by web maps and in the paper) stretches
//!   every distance by the scale factor k = 1/cos φ: one ground metre is
//!   k projected metres (1 at the equator, 1.41 at 45°, **2 at 60°**). The
//!   projected distance between two places d ground metres apart is about
//!   k·d, so a mechanism with ε per projected metre gives them the
//!   guarantee exp(ε k d): **ε per projected metre is k·ε per ground
//!   metre**, a weaker protection than the number suggests (at 60°, ε =
//!   1/1000 per projected metre is 1/500 per ground metre). To guarantee
//!   ε_g per ground metre over a region, use
//!   ε = ε_g · cos(φ_max) per projected metre with φ_max the region's
//!   poleward latitude ([`WebMercator::projected_epsilon`]).
//!
//! # What ε per metre means for a user
//!
//! With ε = 1/1000 per metre, an observer who sees one release cannot
//! change their odds between "the user is at A" and "the user is at B" by
//! more than a factor exp(ε · d(A, B)):
//!
//! | d(A, B) | bound on the likelihood ratio |
//! |---|---|
//! | 100 m | e^0.1 ≈ 1.105 |
//! | 1 km  | e^1 ≈ 2.72 |
//! | 3 km  | e^3 ≈ 20.1 |
//! | 10 km | e^10 ≈ 22 000 |
//!
//! So the street and the neighbourhood stay hidden, a place a few kilometres
//! away can be told apart with odds up to about 20:1 from one release, and
//! the town is not protected at all. Releases compose: k releases about the
//! same location multiply the exponent by k (see
//! [`PrivacyBudget`](crate::device::budget::PrivacyBudget)).
//!
//! # geo-types
//!
//! [`LatLon`] converts from and to [`geo_types::Coord`] and
//! [`geo_types::Point`] with the geo convention x = longitude,
//! y = latitude; the [`Projection`] trait has `Coord`/`Point` adapters
//! returning projected coordinates (x east, y north, metres).
//!
//! ```
//! use geopriv::geo::{LatLon, LocalEquirectangular, Projection};
//!
//! let paris = LatLon::new(48.8566, 2.3522)?;
//! let proj = LocalEquirectangular::new(paris)?;
//! let louvre = proj.forward(LatLon::new(48.8606, 2.3376)?)?; // [east, north] metres
//! assert!((louvre[0].hypot(louvre[1]) - 1170.0).abs() < 10.0);
//! # Ok::<(), geopriv::Error>(())
//! ```

use crate::error::{Error, Result};
use core::f64::consts::PI;
use geo_types::{Coord, Point};

/// WGS84 semi-major axis, also the sphere radius of EPSG:3857 (metres).
pub const WGS84_A: f64 = 6_378_137.0;
/// WGS84 flattening.
pub const WGS84_F: f64 = 1.0 / 298.257_223_563;
/// IUGG mean Earth radius R1 (metres), the usual haversine radius.
pub const MEAN_EARTH_RADIUS: f64 = 6_371_008.8;
/// The latitude where Web Mercator's y reaches ±π R, the edge of the
/// square web map: atan(sinh π) in degrees.
pub const MAX_MERCATOR_LATITUDE: f64 = 85.051_128_779_806_59;

/// A WGS84 position in degrees: latitude in [-90, 90], longitude in
/// [-180, 180].
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct LatLon {
    lat: f64,
    lon: f64,
}

impl LatLon {
    /// A position; refuses NaN, infinities and out-of-range degrees.
    pub fn new(lat: f64, lon: f64) -> Result<Self> {
        if !(lat.is_finite() && (-90.0..=90.0).contains(&lat)) {
            return Err(Error::InvalidParameter {
                name: "latitude",
                value: lat,
                requirement: "finite degrees in [-90, 90]",
            });
        }
        if !(lon.is_finite() && (-180.0..=180.0).contains(&lon)) {
            return Err(Error::InvalidParameter {
                name: "longitude",
                value: lon,
                requirement: "finite degrees in [-180, 180]",
            });
        }
        Ok(Self { lat, lon })
    }

    /// Latitude in degrees.
    pub fn lat(&self) -> f64 {
        self.lat
    }

    /// Longitude in degrees.
    pub fn lon(&self) -> f64 {
        self.lon
    }
}

impl TryFrom<Coord<f64>> for LatLon {
    type Error = Error;
    /// x = longitude, y = latitude (the geo convention).
    fn try_from(c: Coord<f64>) -> Result<Self> {
        LatLon::new(c.y, c.x)
    }
}

impl TryFrom<Point<f64>> for LatLon {
    type Error = Error;
    /// x = longitude, y = latitude (the geo convention).
    fn try_from(p: Point<f64>) -> Result<Self> {
        LatLon::try_from(p.0)
    }
}

impl From<LatLon> for Coord<f64> {
    fn from(p: LatLon) -> Self {
        Coord { x: p.lon, y: p.lat }
    }
}

impl From<LatLon> for Point<f64> {
    fn from(p: LatLon) -> Self {
        Point(p.into())
    }
}

/// A map from WGS84 degrees to plane coordinates in metres,
/// `[x (east), y (north)]`, and back. The projected pair is what queries
/// take as a 2-D point.
pub trait Projection {
    /// Degrees to metres.
    fn forward(&self, p: LatLon) -> Result<[f64; 2]>;

    /// Metres to degrees.
    fn inverse(&self, xy: [f64; 2]) -> Result<LatLon>;

    /// [`forward`](Self::forward) on a geo-types coordinate
    /// (x = lon, y = lat in; x = east, y = north metres out).
    fn forward_coord(&self, c: Coord<f64>) -> Result<Coord<f64>> {
        let [x, y] = self.forward(LatLon::try_from(c)?)?;
        Ok(Coord { x, y })
    }

    /// [`inverse`](Self::inverse) on a geo-types coordinate.
    fn inverse_coord(&self, c: Coord<f64>) -> Result<Coord<f64>> {
        Ok(self.inverse([c.x, c.y])?.into())
    }

    /// [`forward`](Self::forward) on a geo-types point.
    fn forward_point(&self, p: Point<f64>) -> Result<Point<f64>> {
        self.forward_coord(p.0).map(Point)
    }

    /// [`inverse`](Self::inverse) on a geo-types point.
    fn inverse_point(&self, p: Point<f64>) -> Result<Point<f64>> {
        self.inverse_coord(p.0).map(Point)
    }
}

fn finite_xy(xy: [f64; 2]) -> Result<()> {
    crate::error::check_point(&xy, 2)
}

/// Spherical Web Mercator, EPSG:3857 (sphere of radius [`WGS84_A`]):
/// x = R λ, y = R ln tan(π/4 + φ/2), λ and φ in radians.
///
/// Conformal but not equal-distance: the scale factor is
/// k = 1/cos φ (see the [module docs](self) for what this does to ε).
/// Latitudes beyond ±[`MAX_MERCATOR_LATITUDE`] are refused.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct WebMercator;

impl WebMercator {
    /// Projected metres per ground metre at latitude `lat` (degrees):
    /// 1/cos φ.
    pub fn scale_factor(lat: f64) -> f64 {
        1.0 / libm::cos(lat.to_radians())
    }

    /// The ε per ground metre that ε per projected metre gives at latitude
    /// `lat`: k·ε.
    pub fn ground_epsilon(projected_epsilon: f64, lat: f64) -> f64 {
        projected_epsilon * Self::scale_factor(lat)
    }

    /// The ε per projected metre to use for ε per ground metre at
    /// latitude `lat` (for a region, its poleward latitude): ε·cos φ.
    pub fn projected_epsilon(ground_epsilon: f64, lat: f64) -> f64 {
        ground_epsilon * libm::cos(lat.to_radians())
    }
}

impl Projection for WebMercator {
    fn forward(&self, p: LatLon) -> Result<[f64; 2]> {
        if p.lat.abs() > MAX_MERCATOR_LATITUDE {
            return Err(Error::InvalidParameter {
                name: "latitude",
                value: p.lat,
                requirement: "within ±85.0511287798 degrees for Web Mercator",
            });
        }
        let phi = p.lat.to_radians();
        Ok([
            WGS84_A * p.lon.to_radians(),
            WGS84_A * libm::asinh(libm::tan(phi)),
        ])
    }

    fn inverse(&self, xy: [f64; 2]) -> Result<LatLon> {
        finite_xy(xy)?;
        let limit = PI * WGS84_A * (1.0 + 1e-12);
        if xy[0].abs() > limit {
            return Err(Error::InvalidParameter {
                name: "x",
                value: xy[0],
                requirement: "within ±π·6378137 m (±180°) for Web Mercator",
            });
        }
        if xy[1].abs() > limit {
            return Err(Error::InvalidParameter {
                name: "y",
                value: xy[1],
                requirement: "within ±π·6378137 m (±85.05°) for Web Mercator",
            });
        }
        let lon = (xy[0] / WGS84_A).to_degrees().clamp(-180.0, 180.0);
        let lat = libm::atan(libm::sinh(xy[1] / WGS84_A)).to_degrees();
        LatLon::new(lat, lon)
    }
}

/// A local equirectangular (plate carrée) projection around a reference
/// point: x = k_x (λ − λ0), y = k_y (φ − φ0) with λ, φ in degrees.
///
/// [`new`](Self::new) uses the WGS84 radii of curvature at φ0 (meridional
/// M for k_y, prime vertical N·cos φ0 for k_x), so projected metres are
/// ground metres near the reference point; [`spherical`](Self::spherical)
/// uses a sphere of a given radius. Longitude differences wrap across the
/// antimeridian. Accurate to about tan φ0 · Δφ relative (0.05% at 3 km
/// from a reference at 45°); use Web Mercator or a proper projection for
/// regions of hundreds of kilometres.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct LocalEquirectangular {
    reference: LatLon,
    /// metres per degree of longitude
    kx: f64,
    /// metres per degree of latitude
    ky: f64,
}

impl LocalEquirectangular {
    /// Around `reference` on the WGS84 ellipsoid; |latitude| must be < 90.
    pub fn new(reference: LatLon) -> Result<Self> {
        Self::check_reference(reference)?;
        let phi = reference.lat.to_radians();
        let e2 = WGS84_F * (2.0 - WGS84_F);
        let s = libm::sin(phi);
        let w = libm::sqrt(1.0 - e2 * s * s);
        let n = WGS84_A / w;
        let m = WGS84_A * (1.0 - e2) / (w * w * w);
        Ok(Self {
            reference,
            kx: n * libm::cos(phi) * PI / 180.0,
            ky: m * PI / 180.0,
        })
    }

    /// Around `reference` on a sphere of `radius` metres (finite, > 0), e.g.
    /// [`MEAN_EARTH_RADIUS`] to match haversine distances.
    pub fn spherical(reference: LatLon, radius: f64) -> Result<Self> {
        Self::check_reference(reference)?;
        let r = crate::error::positive_finite("radius", radius)?;
        let phi = reference.lat.to_radians();
        Ok(Self {
            reference,
            kx: r * libm::cos(phi) * PI / 180.0,
            ky: r * PI / 180.0,
        })
    }

    fn check_reference(reference: LatLon) -> Result<()> {
        if reference.lat.abs() >= 90.0 - 1e-9 {
            return Err(Error::InvalidParameter {
                name: "reference latitude",
                value: reference.lat,
                requirement: "strictly between -90 and 90 (not a pole)",
            });
        }
        Ok(())
    }

    /// The reference point (projected to (0, 0)).
    pub fn reference(&self) -> LatLon {
        self.reference
    }
}

/// Bring a longitude difference or longitude into [-180, 180].
fn wrap_degrees(d: f64) -> f64 {
    if (-180.0..=180.0).contains(&d) {
        return d;
    }
    let r = libm::fmod(d + 180.0, 360.0);
    let r = if r < 0.0 { r + 360.0 } else { r };
    r - 180.0
}

impl Projection for LocalEquirectangular {
    fn forward(&self, p: LatLon) -> Result<[f64; 2]> {
        let dlon = wrap_degrees(p.lon - self.reference.lon);
        Ok([self.kx * dlon, self.ky * (p.lat - self.reference.lat)])
    }

    fn inverse(&self, xy: [f64; 2]) -> Result<LatLon> {
        finite_xy(xy)?;
        let lat = self.reference.lat + xy[1] / self.ky;
        if !(-90.0..=90.0).contains(&lat) {
            return Err(Error::InvalidParameter {
                name: "y",
                value: xy[1],
                requirement: "within the distance from the reference to the poles",
            });
        }
        let lon = wrap_degrees(self.reference.lon + xy[0] / self.kx);
        LatLon::new(lat, lon)
    }
}

/// Great-circle distance in metres on a sphere of `radius` (haversine).
pub fn haversine(a: LatLon, b: LatLon, radius: f64) -> f64 {
    let (p1, p2) = (a.lat.to_radians(), b.lat.to_radians());
    let dphi = p2 - p1;
    let dlambda = (b.lon - a.lon).to_radians();
    let s1 = libm::sin(dphi / 2.0);
    let s2 = libm::sin(dlambda / 2.0);
    let h = s1 * s1 + libm::cos(p1) * libm::cos(p2) * s2 * s2;
    2.0 * radius * libm::asin(libm::sqrt(h.min(1.0)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mercator_known_values() {
        let m = WebMercator;
        assert_eq!(
            m.forward(LatLon::new(0.0, 0.0).unwrap()).unwrap(),
            [0.0, 0.0]
        );
        let [x, _] = m.forward(LatLon::new(0.0, 180.0).unwrap()).unwrap();
        assert!((x - PI * WGS84_A).abs() < 1e-6);
        let [_, y] = m
            .forward(LatLon::new(MAX_MERCATOR_LATITUDE, 0.0).unwrap())
            .unwrap();
        assert!((y - PI * WGS84_A).abs() < 1e-3);
        assert!(m.forward(LatLon::new(86.0, 0.0).unwrap()).is_err());
        assert!((WebMercator::scale_factor(60.0) - 2.0).abs() < 1e-12);
        assert!((WebMercator::ground_epsilon(1e-3, 60.0) - 2e-3).abs() < 1e-15);
        assert!((WebMercator::projected_epsilon(1e-3, 60.0) - 5e-4).abs() < 1e-15);
    }

    #[test]
    fn latlon_validation() {
        assert!(LatLon::new(f64::NAN, 0.0).is_err());
        assert!(LatLon::new(91.0, 0.0).is_err());
        assert!(LatLon::new(0.0, 180.5).is_err());
        assert!(LatLon::new(-90.0, -180.0).is_ok());
    }

    #[test]
    fn wrapping() {
        assert_eq!(wrap_degrees(190.0), -170.0);
        assert_eq!(wrap_degrees(-190.0), 170.0);
        assert_eq!(wrap_degrees(540.0).abs(), 180.0);
        assert_eq!(wrap_degrees(12.5), 12.5);
    }
}
