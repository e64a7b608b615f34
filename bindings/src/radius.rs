//! Privacy stated as a radius (core: `geopriv::PrivacyRadius`): "protected
//! within r metres (or dollars) at level ℓ" sets ε = ℓ / r per unit
//! distance; any two places within r give odds within a factor e^ℓ
//! (docs/MATH.md §14).

use std::sync::Arc;

use crate::{guard, GeoMechanism, GeoprivError};

/// A privacy level stated as a radius, with the ε per unit distance it
/// sets and both forms in one sentence.
#[derive(Debug, Clone, PartialEq, uniffi::Record)]
pub struct PrivacyRadius {
    /// The radius r, in the query's unit (metres, dollars).
    pub radius: f64,
    /// The level ℓ: the odds ratio between any two inputs within r is at
    /// most e^ℓ.
    pub level: f64,
    /// ε = ℓ / r per unit distance.
    pub epsilon: f64,
    /// e^ℓ.
    pub odds_ratio: f64,
    /// Both forms, e.g. `ε = 0.002 per unit, i.e. level 1 within 500`.
    pub description: String,
}

impl From<geopriv::PrivacyRadius> for PrivacyRadius {
    fn from(r: geopriv::PrivacyRadius) -> Self {
        PrivacyRadius {
            radius: r.radius(),
            level: r.level(),
            epsilon: r.epsilon(),
            odds_ratio: r.odds_ratio(),
            description: r.to_string(),
        }
    }
}

/// "Protected within `radius` at `level`": ε = level / radius (both finite
/// and > 0; `InvalidParameter` otherwise). Pass `.epsilon` to any
/// constructor that takes ε (`MapRelease`, `GeoMechanism.student_t`, ...).
#[uniffi::export]
pub fn privacy_radius(radius: f64, level: f64) -> Result<PrivacyRadius, GeoprivError> {
    guard(|| Ok(geopriv::PrivacyRadius::new(radius, level)?.into()))
}

/// The radius form of `epsilon`: the level it gives within `radius`
/// (ε · radius).
#[uniffi::export]
pub fn privacy_radius_of(epsilon: f64, radius: f64) -> Result<PrivacyRadius, GeoprivError> {
    guard(|| Ok(geopriv::PrivacyRadius::from_epsilon(epsilon, radius)?.into()))
}

#[uniffi::export]
impl GeoMechanism {
    /// PolyPlace protecting any two inputs within `radius` (metres or
    /// dollars) at `level`: `polyplace(level / radius)`.
    #[uniffi::constructor]
    pub fn polyplace_within(radius: f64, level: f64) -> Result<Arc<Self>, GeoprivError> {
        guard(|| Self::wrap(geopriv::Mechanism::polyplace_within(radius, level)))
    }

    /// This mechanism's ε as a level within `radius`.
    pub fn within(&self, radius: f64) -> Result<PrivacyRadius, GeoprivError> {
        privacy_radius_of(self.epsilon(), radius)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn radius_constructors_set_epsilon_level_over_radius() {
        let m = GeoMechanism::polyplace_within(500.0, 1.0).unwrap();
        assert_eq!(m.epsilon(), 2e-3);
        let r = m.within(500.0).unwrap();
        assert_eq!(r.level, 1.0);
        assert_eq!(r.description, "ε = 0.002 per unit, i.e. level 1 within 500");
        assert_eq!(privacy_radius(500.0, 1.0).unwrap(), r);
        for bad in [0.0, -1.0, f64::NAN, f64::INFINITY] {
            assert!(matches!(
                GeoMechanism::polyplace_within(bad, 1.0),
                Err(GeoprivError::InvalidParameter(_))
            ));
            assert!(privacy_radius(500.0, bad).is_err());
        }
    }
}
