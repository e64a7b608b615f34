//! Privacy stated as a radius: "protected within r metres (or dollars) at
//! level ℓ", the form people understand, beside ε per unit distance, the
//! form the mathematics uses (docs/MATH.md §14).
//!
//! Geo-privacy with ε per unit distance bounds the odds ratio of any output
//! between two inputs x, x' by exp(ε · d(x, x')). Stated as a radius r and
//! a level ℓ = ε · r: **any two places within r of each other give odds
//! within a factor e^ℓ** (ℓ = 1: at most 2.72 times likelier; ℓ = 0.1: at
//! most 10% likelier), and places further apart proportionally less so
//! (2r: e^(2ℓ)). So `PrivacyRadius::new(500.0, 1.0)` is ε = 1/500 = 2e-3 per
//! metre, printed as `ε = 0.002 per unit, i.e. level 1 within 500`.
//!
//! ```
//! use geopriv::{Mechanism, PrivacyRadius};
//!
//! let r = PrivacyRadius::new(500.0, 1.0)?;          // level 1 within 500 m
//! assert_eq!(r.epsilon(), 2e-3);                    // ε = ℓ / r per metre
//! assert!((r.odds_ratio() - core::f64::consts::E).abs() < 1e-12);
//! let m = Mechanism::polyplace_within(500.0, 1.0)?;
//! assert_eq!(m.epsilon(), 2e-3);
//! assert_eq!(PrivacyRadius::from_epsilon(2e-3, 500.0)?.level(), 1.0);
//! # Ok::<(), geopriv::Error>(())
//! ```

use core::fmt;

use crate::error::positive_finite as positive;
use crate::{Error, Mechanism, Result};

/// "Protected within `radius` at `level`": ε = level / radius per unit
/// distance (module docs). Both finite and > 0, and ε must be a normal
/// positive number (neither 0 nor infinite after the division).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct PrivacyRadius {
    radius: f64,
    level: f64,
}

impl PrivacyRadius {
    /// Odds within a factor e^`level` between any two inputs at most
    /// `radius` apart: ε = level / radius.
    pub fn new(radius: f64, level: f64) -> Result<Self> {
        let r = PrivacyRadius {
            radius: positive("radius", radius)?,
            level: positive("level", level)?,
        };
        let eps = r.epsilon();
        if !eps.is_normal() {
            return Err(Error::InvalidParameter {
                name: "epsilon",
                value: eps,
                requirement: "a normal positive number (level / radius underflowed or overflowed)",
            });
        }
        Ok(r)
    }

    /// The radius form of an ε: the level ε · `radius` it gives within
    /// `radius`.
    pub fn from_epsilon(epsilon: f64, radius: f64) -> Result<Self> {
        let epsilon = positive("epsilon", epsilon)?;
        let radius = positive("radius", radius)?;
        Self::new(radius, epsilon * radius)
    }

    /// The radius r.
    pub fn radius(&self) -> f64 {
        self.radius
    }

    /// The level ℓ (the odds ratio within r is at most e^ℓ).
    pub fn level(&self) -> f64 {
        self.level
    }

    /// ε = ℓ / r per unit distance.
    pub fn epsilon(&self) -> f64 {
        self.level / self.radius
    }

    /// e^ℓ: the largest odds ratio between two inputs r apart.
    pub fn odds_ratio(&self) -> f64 {
        libm::exp(self.level)
    }
}

impl fmt::Display for PrivacyRadius {
    /// `ε = 0.002 per unit, i.e. level 1 within 500`; callers that know
    /// the unit (metres, dollars) say it next to the numbers.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "ε = {} per unit, i.e. level {} within {}",
            crate::ShortNumber(self.epsilon()),
            crate::ShortNumber(self.level),
            crate::ShortNumber(self.radius)
        )
    }
}

impl Mechanism {
    /// PolyPlace (the recommended mechanism) protecting any two inputs
    /// within `radius` at `level`: `Mechanism::polyplace(level / radius)`.
    pub fn polyplace_within(radius: f64, level: f64) -> Result<Mechanism> {
        Mechanism::polyplace(PrivacyRadius::new(radius, level)?.epsilon())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn epsilon_is_level_over_radius_and_back() {
        let r = PrivacyRadius::new(500.0, 1.0).unwrap();
        assert_eq!(r.epsilon(), 2e-3);
        let back = PrivacyRadius::from_epsilon(r.epsilon(), 500.0).unwrap();
        assert_eq!(back.level(), 1.0);
        assert_eq!(
            alloc::format!("{r}"),
            "ε = 0.002 per unit, i.e. level 1 within 500"
        );
        assert_eq!(
            Mechanism::polyplace_within(250.0, 0.5).unwrap().epsilon(),
            2e-3
        );
    }

    #[test]
    fn bad_radii_and_levels_are_refused() {
        for bad in [0.0, -1.0, f64::NAN, f64::INFINITY, f64::NEG_INFINITY] {
            assert!(PrivacyRadius::new(bad, 1.0).is_err(), "{bad}");
            assert!(PrivacyRadius::new(1.0, bad).is_err(), "{bad}");
            assert!(PrivacyRadius::from_epsilon(bad, 1.0).is_err(), "{bad}");
            assert!(Mechanism::polyplace_within(bad, 1.0).is_err(), "{bad}");
        }
        // ε would underflow to a subnormal or overflow.
        assert!(PrivacyRadius::new(1e308, 1e-308).is_err());
        assert!(PrivacyRadius::new(1e-308, 1e308).is_err());
    }

    #[test]
    fn the_level_bounds_the_odds_between_places_r_apart() {
        // The GP bound exp(ε d) at d = r is exactly e^level.
        let r = PrivacyRadius::new(300.0, 0.7).unwrap();
        let bound_at_r = libm::exp(r.epsilon() * r.radius());
        assert!((bound_at_r - r.odds_ratio()).abs() < 1e-12);
    }
}
