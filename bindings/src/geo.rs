//! Latitude/longitude to metres: the [`Projection`] enum and [`project`].
//!
//! Queries measure distance in the plane, so a GPS fix is projected to
//! `[east, north]` metres before a 2-D query sees it (core: `geopriv::geo`).
//! The guarantee ε holds per *projected* metre: with
//! `LocalEquirectangular` around a point of the region that is a ground
//! metre; with `WebMercator` one ground metre is 1/cos(latitude) projected
//! metres (2 at 60°), so ε per projected metre protects less on the ground.

use geopriv::geo::{LatLon, LocalEquirectangular, Projection as _, WebMercator};

use crate::{guard, GeoprivError};

/// How latitude/longitude (WGS84 degrees) become plane coordinates
/// `[x east, y north]` in metres.
///
/// Kotlin: `Projection.WebMercator`, `Projection.LocalEquirectangular(refLat, refLon)`;
/// Swift: `.webMercator`, `.localEquirectangular(refLat:refLon:)`;
/// Python: `Projection.WEB_MERCATOR()`, `Projection.LOCAL_EQUIRECTANGULAR(ref_lat, ref_lon)`.
#[derive(Debug, Clone, Copy, PartialEq, uniffi::Enum)]
pub enum Projection {
    /// Spherical Web Mercator (EPSG:3857), |latitude| <= 85.0511°. Distances
    /// are stretched by 1/cos(latitude): ε per projected metre is
    /// ε/cos(latitude) per ground metre.
    WebMercator,
    /// Local equirectangular projection around a reference point (WGS84
    /// radii at its latitude): projected metres are ground metres within a
    /// few kilometres of it (0.05% off at 3 km at 45°N). The reference is
    /// projected to (0, 0); it must not be a pole.
    LocalEquirectangular {
        /// Latitude of the reference point, degrees in (-90, 90).
        ref_lat: f64,
        /// Longitude of the reference point, degrees in [-180, 180].
        ref_lon: f64,
    },
}

/// A core projection built from the foreign enum (reference checked).
enum Projector {
    Mercator(WebMercator),
    Local(LocalEquirectangular),
}

impl Projection {
    /// The core projection (parameters validated), for the region
    /// constructors that project a whole geometry.
    pub(crate) fn core(&self) -> Result<Box<dyn geopriv::Projection>, GeoprivError> {
        Ok(match self.projector()? {
            Projector::Mercator(p) => Box::new(p),
            Projector::Local(p) => Box::new(p),
        })
    }

    /// Validate the projection's own parameters (InvalidParameter).
    fn projector(&self) -> Result<Projector, GeoprivError> {
        Ok(match *self {
            Projection::WebMercator => Projector::Mercator(WebMercator),
            Projection::LocalEquirectangular { ref_lat, ref_lon } => {
                let reference = LatLon::new(ref_lat, ref_lon).map_err(|e| {
                    GeoprivError::InvalidParameter(format!("projection reference: {e}"))
                })?;
                Projector::Local(LocalEquirectangular::new(reference)?)
            }
        })
    }

    /// Project a point given as latitude/longitude.
    ///
    /// `what` says whose coordinates these are. A bad *input* point (the
    /// user's location) is `InvalidInput`; a bad *parameter* point (a query
    /// centre or corner) is `InvalidParameter`. A bad projection is always
    /// `InvalidParameter`.
    pub(crate) fn forward(
        &self,
        lat: f64,
        lon: f64,
        what: PointRole,
    ) -> Result<[f64; 2], GeoprivError> {
        let projector = self.projector()?;
        let wrap = |e: geopriv::Error| match what {
            PointRole::Input => GeoprivError::InvalidInput(format!("location: {e}")),
            PointRole::Parameter(name) => GeoprivError::InvalidParameter(format!("{name}: {e}")),
        };
        let p = LatLon::new(lat, lon).map_err(wrap)?;
        match projector {
            Projector::Mercator(m) => m.forward(p),
            Projector::Local(l) => l.forward(p),
        }
        .map_err(wrap)
    }
}

/// Whose latitude/longitude is being projected (decides the error kind).
#[derive(Clone, Copy)]
pub(crate) enum PointRole {
    /// The private location of the user.
    Input,
    /// A public query parameter, named.
    Parameter(&'static str),
}

/// Project a location (WGS84 degrees) to `[x east, y north]` metres, the
/// 2-D point the two-way and KDE queries take. Latitude must be in
/// [-90, 90] (±85.05 for Web Mercator) and longitude in [-180, 180]; NaN or
/// infinite coordinates are `InvalidInput`, a bad projection reference is
/// `InvalidParameter`.
#[uniffi::export]
pub fn project(lat: f64, lon: f64, projection: Projection) -> Result<Vec<f64>, GeoprivError> {
    guard(|| Ok(projection.forward(lat, lon, PointRole::Input)?.to_vec()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn local_projection_is_metres_around_the_reference() {
        let p = Projection::LocalEquirectangular {
            ref_lat: 48.8566,
            ref_lon: 2.3522,
        };
        assert_eq!(project(48.8566, 2.3522, p).unwrap(), vec![0.0, 0.0]);
        let louvre = project(48.8606, 2.3376, p).unwrap();
        assert!(
            (louvre[0].hypot(louvre[1]) - 1170.0).abs() < 10.0,
            "{louvre:?}"
        );
        assert!(louvre[0] < 0.0 && louvre[1] > 0.0, "west and north");
    }

    #[test]
    fn mercator_matches_the_core() {
        let xy = project(0.0, 180.0, Projection::WebMercator).unwrap();
        assert!((xy[0] - std::f64::consts::PI * 6_378_137.0).abs() < 1e-6);
        assert_eq!(xy[1], 0.0);
    }

    #[test]
    fn bad_locations_are_invalid_input() {
        for (lat, lon) in [
            (f64::NAN, 0.0),
            (0.0, f64::NAN),
            (f64::INFINITY, 0.0),
            (0.0, f64::NEG_INFINITY),
            (90.5, 0.0),
            (-91.0, 0.0),
            (0.0, 180.5),
        ] {
            for p in [
                Projection::WebMercator,
                Projection::LocalEquirectangular {
                    ref_lat: 0.0,
                    ref_lon: 0.0,
                },
            ] {
                let e = project(lat, lon, p).unwrap_err();
                assert!(
                    matches!(e, GeoprivError::InvalidInput(_)),
                    "{lat} {lon}: {e:?}"
                );
            }
        }
        // Beyond the Web Mercator square: a bad location for this projection.
        let e = project(86.0, 0.0, Projection::WebMercator).unwrap_err();
        assert!(matches!(e, GeoprivError::InvalidInput(_)), "{e:?}");
        assert!(e.to_string().contains("latitude"), "{e}");
    }

    #[test]
    fn bad_references_are_invalid_parameter() {
        for (ref_lat, ref_lon) in [(90.0, 0.0), (-90.0, 0.0), (f64::NAN, 0.0), (0.0, 200.0)] {
            let p = Projection::LocalEquirectangular { ref_lat, ref_lon };
            let e = project(0.0, 0.0, p).unwrap_err();
            assert!(
                matches!(e, GeoprivError::InvalidParameter(_)),
                "{ref_lat} {ref_lon}: {e:?}"
            );
        }
    }
}
