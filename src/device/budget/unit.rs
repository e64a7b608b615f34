//! Units of ε, the app's pinned budget policy and one release's charge.

use super::check_delta;
use crate::error::{positive_finite, Error, Result};
use alloc::string::{String, ToString};
use core::fmt;
use core::str::FromStr;
use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// What an ε is measured in. Geo-private ε is a budget *per unit
/// distance* of the query's coordinates; local-DP ε is unit-less. Charges
/// in different units cannot be added (`docs/MATH.md §8.3`), so every
/// ledger and every charge carries one.
///
/// Written as `per-metre`, `per-dollar`, `local-dp` or `custom:NAME`.
///
/// ```
/// use geopriv::device::budget::BudgetUnit;
/// let u: BudgetUnit = "custom:per-km".parse()?;
/// assert_eq!(u, BudgetUnit::custom("per-km")?);
/// assert_eq!(BudgetUnit::PerMetre.to_string(), "per-metre");
/// # Ok::<(), geopriv::Error>(())
/// ```
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum BudgetUnit {
    /// ε per metre (projected metres for lat/lon input: per Web Mercator
    /// metre or per local-equirectangular metre).
    PerMetre,
    /// ε per dollar (incomes and other amounts of money).
    PerDollar,
    /// A local-DP ε (every pair of inputs protected alike).
    LocalDp,
    /// Any other unit, named by the app (1 to 64 printable ASCII
    /// characters, e.g. `per-km`). Build with [`BudgetUnit::custom`].
    Custom(String),
}

impl BudgetUnit {
    /// A custom unit; the name must be 1 to 64 printable ASCII characters.
    pub fn custom(name: &str) -> Result<Self> {
        if name.is_empty() || name.len() > 64 || !name.bytes().all(|b| b.is_ascii_graphic()) {
            return Err(Error::Parse {
                what: "budget unit",
                reason: "a custom unit name is 1 to 64 printable ASCII characters",
            });
        }
        Ok(BudgetUnit::Custom(name.to_string()))
    }
}

impl fmt::Display for BudgetUnit {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            BudgetUnit::PerMetre => f.write_str("per-metre"),
            BudgetUnit::PerDollar => f.write_str("per-dollar"),
            BudgetUnit::LocalDp => f.write_str("local-dp"),
            BudgetUnit::Custom(name) => write!(f, "custom:{name}"),
        }
    }
}

impl FromStr for BudgetUnit {
    type Err = Error;
    fn from_str(s: &str) -> Result<Self> {
        match s {
            "per-metre" => Ok(BudgetUnit::PerMetre),
            "per-dollar" => Ok(BudgetUnit::PerDollar),
            "local-dp" => Ok(BudgetUnit::LocalDp),
            _ => match s.strip_prefix("custom:") {
                Some(name) => BudgetUnit::custom(name),
                None => Err(Error::Parse {
                    what: "budget unit",
                    reason: "expected per-metre, per-dollar, local-dp or custom:NAME",
                }),
            },
        }
    }
}

impl Serialize for BudgetUnit {
    fn serialize<S: Serializer>(&self, s: S) -> core::result::Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for BudgetUnit {
    fn deserialize<D: Deserializer<'de>>(d: D) -> core::result::Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        s.parse().map_err(serde::de::Error::custom)
    }
}

/// The budget an app pins for one ledger: its unit, total ε and total δ.
/// A stored ledger is only restored under the same policy
/// ([`PrivacyBudget::restore`](super::PrivacyBudget::restore)).
#[derive(Clone, Debug, PartialEq)]
pub struct BudgetPolicy {
    unit: BudgetUnit,
    total_epsilon: f64,
    total_delta: f64,
}

impl BudgetPolicy {
    /// `total_epsilon` (finite, > 0) in `unit` and `total_delta` (finite,
    /// in [0, 1)) in all.
    pub fn new(unit: BudgetUnit, total_epsilon: f64, total_delta: f64) -> Result<Self> {
        let total_epsilon = positive_finite("total_epsilon", total_epsilon)?;
        if !(total_delta.is_finite() && (0.0..1.0).contains(&total_delta)) {
            return Err(Error::InvalidParameter {
                name: "total_delta",
                value: total_delta,
                requirement: "finite and in [0, 1)",
            });
        }
        Ok(Self {
            unit,
            total_epsilon,
            total_delta,
        })
    }

    /// The unit of ε.
    pub fn unit(&self) -> &BudgetUnit {
        &self.unit
    }

    /// The total ε.
    pub fn total_epsilon(&self) -> f64 {
        self.total_epsilon
    }

    /// The total δ.
    pub fn total_delta(&self) -> f64 {
        self.total_delta
    }
}

/// What one release costs: (ε, δ) in a unit.
#[derive(Clone, Debug, PartialEq)]
pub struct Charge {
    unit: BudgetUnit,
    epsilon: f64,
    delta: f64,
}

impl Charge {
    /// ε finite and > 0 in `unit`, δ finite in [0, 1].
    pub fn new(unit: BudgetUnit, epsilon: f64, delta: f64) -> Result<Self> {
        Ok(Self {
            unit,
            epsilon: positive_finite("epsilon", epsilon)?,
            delta: check_delta("delta", delta, 1.0)?,
        })
    }

    /// The unit of ε.
    pub fn unit(&self) -> &BudgetUnit {
        &self.unit
    }

    /// ε.
    pub fn epsilon(&self) -> f64 {
        self.epsilon
    }

    /// δ.
    pub fn delta(&self) -> f64 {
        self.delta
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn units_round_trip_as_text() {
        for u in [
            BudgetUnit::PerMetre,
            BudgetUnit::PerDollar,
            BudgetUnit::LocalDp,
            BudgetUnit::custom("per-km").unwrap(),
        ] {
            assert_eq!(u.to_string().parse::<BudgetUnit>().unwrap(), u);
            let json = serde_json::to_string(&u).unwrap();
            assert_eq!(serde_json::from_str::<BudgetUnit>(&json).unwrap(), u);
        }
        for bad in ["", "metre", "custom:", "custom:a b", "PER-METRE"] {
            assert!(bad.parse::<BudgetUnit>().is_err(), "{bad}");
        }
    }

    #[test]
    fn bad_policies_and_charges_are_refused() {
        for (e, d) in [(0.0, 0.0), (f64::NAN, 0.0), (1.0, 1.0), (1.0, f64::NAN)] {
            assert!(BudgetPolicy::new(BudgetUnit::PerMetre, e, d).is_err());
        }
        for (e, d) in [(0.0, 0.0), (-1.0, 0.0), (f64::INFINITY, 0.0), (1.0, -0.1)] {
            assert!(Charge::new(BudgetUnit::PerMetre, e, d).is_err());
        }
    }
}
