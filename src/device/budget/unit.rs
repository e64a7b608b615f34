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
/// Written as `per-metre`, `per-mercator-metre`, `per-dollar`, `local-dp`
/// or `custom:NAME`.
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
    /// ε per ground metre (planar coordinates in metres, and lat/lon input
    /// through the local-equirectangular projection, whose metres are
    /// ground metres near its centre).
    PerMetre,
    /// ε per dollar (incomes and other amounts of money).
    PerDollar,
    /// A local-DP ε (every pair of inputs protected alike).
    LocalDp,
    /// ε per Web Mercator (projected) metre. A projected metre is
    /// cos(latitude) ground metres, so ε per projected metre is
    /// ε / cos(lat) per ground metre (4e-4 at latitude 70° is 1.17e-3 per
    /// ground metre): the two never share a ledger (`docs/MATH.md §8.3`).
    PerMercatorMetre,
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
            BudgetUnit::PerMercatorMetre => f.write_str("per-mercator-metre"),
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
            "per-mercator-metre" => Ok(BudgetUnit::PerMercatorMetre),
            "per-dollar" => Ok(BudgetUnit::PerDollar),
            "local-dp" => Ok(BudgetUnit::LocalDp),
            _ => match s.strip_prefix("custom:") {
                Some(name) => BudgetUnit::custom(name),
                None => Err(Error::Parse {
                    what: "budget unit",
                    reason: "expected per-metre, per-mercator-metre, per-dollar, local-dp or custom:NAME",
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

/// The budget an app pins for one ledger: its unit, a **lifetime cap**
/// (total ε and δ over the device's life) and optionally a **period**: a
/// length in seconds and the (ε, δ) allowed within each period
/// (`docs/MATH.md §8.3`, SPEC §12.1). Renewal per period is a rate limit,
/// not a privacy technique: what the device has spent over its life is the
/// lifetime sum, and that is what the cap bounds.
///
/// A stored ledger is only restored under the same policy
/// ([`PrivacyBudget::restore`](super::PrivacyBudget::restore)).
///
/// ```
/// use geopriv::device::budget::{BudgetPolicy, BudgetUnit};
/// // 1/5000 per dollar a day, at most 0.05 per dollar over the device's life.
/// let daily = BudgetPolicy::periodic(BudgetUnit::PerDollar, 2e-4, 0.0, 86_400, 0.05, 0.0)?;
/// assert_eq!(daily.period_seconds(), Some(86_400));
/// // Lifetime only (a single period that never ends).
/// let once = BudgetPolicy::new(BudgetUnit::PerMetre, 1e-3, 0.0)?;
/// assert_eq!(once.period_seconds(), None);
/// # Ok::<(), geopriv::Error>(())
/// ```
#[derive(Clone, Debug, PartialEq)]
pub struct BudgetPolicy {
    unit: BudgetUnit,
    total_epsilon: f64,
    total_delta: f64,
    period: Option<PeriodLimit>,
}

/// The per-period part of a [`BudgetPolicy`].
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) struct PeriodLimit {
    pub(crate) seconds: u64,
    pub(crate) epsilon: f64,
    pub(crate) delta: f64,
}

fn check_total_delta(name: &'static str, delta: f64) -> Result<f64> {
    if delta.is_finite() && (0.0..1.0).contains(&delta) {
        Ok(delta)
    } else {
        Err(Error::InvalidParameter {
            name,
            value: delta,
            requirement: "finite and in [0, 1)",
        })
    }
}

impl BudgetPolicy {
    /// A lifetime-only policy: `total_epsilon` (> 0, at most 1e300) in
    /// `unit` and `total_delta` (finite, in [0, 1)) over the ledger's
    /// whole life.
    pub fn new(unit: BudgetUnit, total_epsilon: f64, total_delta: f64) -> Result<Self> {
        let total_epsilon = positive_finite("total_epsilon", total_epsilon)?;
        if total_epsilon > 1e300 {
            return Err(Error::InvalidParameter {
                name: "total_epsilon",
                value: total_epsilon,
                requirement: "at most 1e300",
            });
        }
        Ok(Self {
            unit,
            total_epsilon,
            total_delta: check_total_delta("total_delta", total_delta)?,
            period: None,
        })
    }

    /// A periodic policy: at most `epsilon_per_period` and
    /// `delta_per_period` within each period of `period_seconds` seconds
    /// (periods are ⌊unix time / period_seconds⌋, so days start at 00:00
    /// UTC), and at most `lifetime_epsilon`, `lifetime_delta` in all.
    /// Refused unless ε per period is finite and > 0, the period is at
    /// least one second, δs are in [0, 1), and the per-period amounts do
    /// not exceed the lifetime cap.
    pub fn periodic(
        unit: BudgetUnit,
        epsilon_per_period: f64,
        delta_per_period: f64,
        period_seconds: u64,
        lifetime_epsilon: f64,
        lifetime_delta: f64,
    ) -> Result<Self> {
        let mut policy = Self::new(unit, lifetime_epsilon, lifetime_delta)?;
        let epsilon = positive_finite("epsilon_per_period", epsilon_per_period)?;
        let delta = check_total_delta("delta_per_period", delta_per_period)?;
        if period_seconds == 0 {
            return Err(Error::InvalidParameter {
                name: "period_seconds",
                value: 0.0,
                requirement: "at least 1",
            });
        }
        if epsilon > policy.total_epsilon {
            return Err(Error::InvalidParameter {
                name: "epsilon_per_period",
                value: epsilon,
                requirement: "at most the lifetime epsilon",
            });
        }
        if delta > policy.total_delta {
            return Err(Error::InvalidParameter {
                name: "delta_per_period",
                value: delta,
                requirement: "at most the lifetime delta",
            });
        }
        policy.period = Some(PeriodLimit {
            seconds: period_seconds,
            epsilon,
            delta,
        });
        Ok(policy)
    }

    /// The unit of ε.
    pub fn unit(&self) -> &BudgetUnit {
        &self.unit
    }

    /// The lifetime ε (the total over the ledger's life).
    pub fn total_epsilon(&self) -> f64 {
        self.total_epsilon
    }

    /// The lifetime δ.
    pub fn total_delta(&self) -> f64 {
        self.total_delta
    }

    /// The period length in seconds (`None`: lifetime only).
    pub fn period_seconds(&self) -> Option<u64> {
        self.period.map(|p| p.seconds)
    }

    /// ε allowed per period (the lifetime ε for a lifetime-only policy).
    pub fn period_epsilon(&self) -> f64 {
        self.period.map_or(self.total_epsilon, |p| p.epsilon)
    }

    /// δ allowed per period (the lifetime δ for a lifetime-only policy).
    pub fn period_delta(&self) -> f64 {
        self.period.map_or(self.total_delta, |p| p.delta)
    }

    /// The period of `unix_seconds` (0 for a lifetime-only policy).
    pub fn period_of(&self, unix_seconds: u64) -> u64 {
        self.period.map_or(0, |p| unix_seconds / p.seconds)
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
            BudgetUnit::PerMercatorMetre,
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
