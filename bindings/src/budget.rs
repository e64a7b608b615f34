//! The device's privacy-budget ledger, [`PrivacyBudget`] (core:
//! `geopriv::PrivacyBudget`), behind a `Mutex` so threads can share it.

use std::sync::{Arc, Mutex};

use crate::{guard, lock, GeoMechanism, GeoprivError};

/// A snapshot of a ledger, read under one lock (so its fields agree even
/// while other threads spend).
#[derive(Debug, Clone, PartialEq, uniffi::Record)]
pub struct BudgetStatus {
    /// The total ε allowed (per unit distance).
    pub total_epsilon: f64,
    /// The total δ allowed.
    pub total_delta: f64,
    /// ε charged so far (an upper bound of the exact sum of the charges).
    pub spent_epsilon: f64,
    /// δ charged so far.
    pub spent_delta: f64,
    /// ε still available (rounded down).
    pub remaining_epsilon: f64,
    /// δ still available (rounded down).
    pub remaining_delta: f64,
    /// Number of releases charged.
    pub releases: u64,
}

/// An (ε, δ) pair: one release's share of a budget.
#[derive(Debug, Clone, Copy, PartialEq, uniffi::Record)]
pub struct BudgetShare {
    /// ε per release.
    pub epsilon: f64,
    /// δ per release.
    pub delta: f64,
}

/// The privacy spent by one device about one secret (its location, its
/// income): a total ε (per unit distance) and δ, and what has been spent
/// by sequential composition. `GeoMechanism.privatize_with_budget` charges
/// it before releasing and refuses (`BudgetExceeded`) a release that would
/// exceed it, leaving the ledger unchanged.
///
/// Thread-safe (a `Mutex` inside). Persist it with `to_json` after each
/// release and restore it with `from_json` at start-up, or a restart would
/// reset the budget.
#[derive(Debug, uniffi::Object)]
pub struct PrivacyBudget {
    ledger: Mutex<geopriv::PrivacyBudget>,
}

impl PrivacyBudget {
    /// Run `f` on the ledger under its lock.
    pub(crate) fn with_ledger<T>(
        &self,
        f: impl FnOnce(&mut geopriv::PrivacyBudget) -> Result<T, GeoprivError>,
    ) -> Result<T, GeoprivError> {
        f(&mut *lock(&self.ledger, "privacy budget")?)
    }
}

#[uniffi::export]
impl PrivacyBudget {
    /// A fresh ledger allowing `total_epsilon` (finite, > 0; per unit
    /// distance, in the unit of the queries it will pay for) and
    /// `total_delta` (finite, in [0, 1)) in all.
    #[uniffi::constructor]
    pub fn new(total_epsilon: f64, total_delta: f64) -> Result<Arc<Self>, GeoprivError> {
        guard(|| {
            Ok(Arc::new(Self {
                ledger: Mutex::new(geopriv::PrivacyBudget::new(total_epsilon, total_delta)?),
            }))
        })
    }

    /// Restore a ledger saved with `to_json`. Refuses (`InvalidReport`, the
    /// kind for every encoded record) anything else: empty or malformed
    /// JSON, unknown fields, totals out of range, or more spent than the
    /// totals.
    #[uniffi::constructor]
    pub fn from_json(json: String) -> Result<Arc<Self>, GeoprivError> {
        guard(|| {
            let ledger: geopriv::PrivacyBudget = serde_json::from_str(json.trim())
                .map_err(|e| GeoprivError::InvalidReport(format!("invalid budget state: {e}")))?;
            Ok(Arc::new(Self {
                ledger: Mutex::new(ledger),
            }))
        })
    }

    /// The ledger as JSON (totals, amounts spent, number of releases).
    pub fn to_json(&self) -> Result<String, GeoprivError> {
        guard(|| {
            self.with_ledger(|l| {
                serde_json::to_string(&*l)
                    .map_err(|e| GeoprivError::Internal(format!("budget state: {e}")))
            })
        })
    }

    /// Totals, spent and remaining amounts and the number of releases, as
    /// one consistent snapshot.
    pub fn status(&self) -> Result<BudgetStatus, GeoprivError> {
        guard(|| {
            self.with_ledger(|l| {
                let (remaining_epsilon, remaining_delta) = l.remaining();
                Ok(BudgetStatus {
                    total_epsilon: l.total_epsilon(),
                    total_delta: l.total_delta(),
                    spent_epsilon: l.spent_epsilon(),
                    spent_delta: l.spent_delta(),
                    remaining_epsilon,
                    remaining_delta,
                    releases: l.releases(),
                })
            })
        })
    }

    /// ε still available (rounded down).
    pub fn remaining_epsilon(&self) -> Result<f64, GeoprivError> {
        guard(|| self.with_ledger(|l| Ok(l.remaining().0)))
    }

    /// δ still available (rounded down).
    pub fn remaining_delta(&self) -> Result<f64, GeoprivError> {
        guard(|| self.with_ledger(|l| Ok(l.remaining().1)))
    }

    /// Whether one release with `mechanism` fits the remaining budget now
    /// (another thread may spend before you release; the release itself
    /// checks again).
    pub fn can_afford(&self, mechanism: Arc<GeoMechanism>) -> Result<bool, GeoprivError> {
        guard(|| self.with_ledger(|l| Ok(l.can_afford(mechanism.epsilon(), mechanism.delta()))))
    }

    /// The largest (ε, δ) such that `releases` releases of it fit the
    /// remaining budget (checked with the ledger's own rounding: ten
    /// releases of 0.1 do *not* fit 1.0 in binary floating point, ten of
    /// `even_split(10)` do). `null` if `releases` is 0 or nothing is left.
    pub fn even_split(&self, releases: u64) -> Result<Option<BudgetShare>, GeoprivError> {
        guard(|| {
            self.with_ledger(|l| {
                Ok(l.even_split(releases)
                    .map(|(epsilon, delta)| BudgetShare { epsilon, delta }))
            })
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::GeoQuery;

    #[test]
    fn refusal_leaves_the_ledger_unchanged() {
        let budget = PrivacyBudget::new(0.25, 0.0).unwrap();
        let m = GeoMechanism::polyplace(0.1).unwrap();
        let q = GeoQuery::threshold(0.0, 1.0).unwrap();
        for _ in 0..2 {
            m.privatize_with_budget(budget.clone(), q.clone(), vec![0.3])
                .unwrap();
        }
        let before = budget.status().unwrap();
        assert_eq!(before.releases, 2);
        assert!((before.remaining_epsilon - 0.05).abs() < 1e-12);
        let e = m
            .privatize_with_budget(budget.clone(), q.clone(), vec![0.3])
            .unwrap_err();
        assert!(matches!(e, GeoprivError::BudgetExceeded(_)), "{e:?}");
        assert_eq!(budget.status().unwrap(), before);
        // A failed release (bad point) is not charged either.
        let big = PrivacyBudget::new(1.0, 0.0).unwrap();
        let e = m
            .privatize_with_budget(big.clone(), q, vec![f64::NAN])
            .unwrap_err();
        assert!(matches!(e, GeoprivError::InvalidInput(_)), "{e:?}");
        assert_eq!(big.status().unwrap().releases, 0);
        assert!(!budget.can_afford(m.clone()).unwrap());
        assert!(big.can_afford(m).unwrap());
    }

    #[test]
    fn json_round_trip_and_refusals() {
        let b = PrivacyBudget::new(1.0, 1e-6).unwrap();
        let share = b.even_split(10).unwrap().unwrap();
        let m = GeoMechanism::laplace(share.epsilon, share.delta).unwrap();
        let q = GeoQuery::interval(0.0, 10.0, 1.0).unwrap();
        for _ in 0..3 {
            m.privatize_with_budget(b.clone(), q.clone(), vec![5.0])
                .unwrap();
        }
        let json = b.to_json().unwrap();
        let back = PrivacyBudget::from_json(json.clone()).unwrap();
        assert_eq!(back.status().unwrap(), b.status().unwrap());
        assert_eq!(back.to_json().unwrap(), json);
        assert_eq!(b.even_split(0).unwrap(), None);
        for bad in [
            "",
            "{",
            "null",
            "[]",
            r#"{"total_epsilon":1.0}"#,
            r#"{"total_epsilon":1.0,"total_delta":0.0,"spent_epsilon":2.0,"spent_delta":0.0,"releases":1}"#,
            r#"{"total_epsilon":-1.0,"total_delta":0.0,"spent_epsilon":0.0,"spent_delta":0.0,"releases":0}"#,
            r#"{"total_epsilon":1.0,"total_delta":0.0,"spent_epsilon":0.0,"spent_delta":0.0,"releases":0,"x":1}"#,
        ] {
            let e = PrivacyBudget::from_json(bad.to_string()).unwrap_err();
            assert!(matches!(e, GeoprivError::InvalidReport(_)), "{bad}: {e:?}");
        }
    }

    #[test]
    fn bad_totals_are_invalid_parameter() {
        for (e, d) in [
            (0.0, 0.0),
            (-1.0, 0.0),
            (f64::NAN, 0.0),
            (f64::INFINITY, 0.0),
            (1.0, -0.1),
            (1.0, 1.0),
            (1.0, f64::NAN),
        ] {
            assert!(
                matches!(
                    PrivacyBudget::new(e, d),
                    Err(GeoprivError::InvalidParameter(_))
                ),
                "{e} {d}"
            );
        }
    }
}
