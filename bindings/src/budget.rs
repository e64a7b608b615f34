//! The device's privacy ledger, [`PrivacyLedger`] (core:
//! `geopriv::device::budget`), behind a `Mutex` so threads can share it.
//!
//! Every release in the bindings goes through it: `GeoMechanism.privatize`
//! and `privatize_latlon` take a ledger and charge it before they return
//! (docs/MATH.md §8.3). The only way around it is a method whose name says
//! so (`privatize_unmetered`), for simulations and servers.

use std::sync::{Arc, Mutex};

use geopriv::device::budget::{FileLedger, Ledger};
use geopriv::device::memo::MemoLedger;

use crate::{guard, lock, GeoMechanism, GeoprivError};

/// What an ε is measured in (core `BudgetUnit`). Charges in different
/// units never add up: a per-metre ledger refuses a per-dollar or a
/// local-DP charge (`UnitMismatch`).
#[derive(Debug, Clone, PartialEq, Eq, Hash, uniffi::Enum)]
pub enum BudgetUnit {
    /// ε per ground metre (planar metres; lat/lon input through the
    /// local-equirectangular projection).
    PerMetre,
    /// ε per Web Mercator (projected) metre: ε/cos(lat) per ground metre,
    /// so never in the same ledger as `PerMetre`.
    PerMercatorMetre,
    /// ε per dollar.
    PerDollar,
    /// A local-DP ε (`GeoMechanism.local_dp`).
    LocalDp,
    /// Any other unit named by the app (1 to 64 printable ASCII characters).
    Custom {
        /// The unit's name, e.g. `per-km`.
        name: String,
    },
}

impl TryFrom<BudgetUnit> for geopriv::BudgetUnit {
    type Error = GeoprivError;
    fn try_from(u: BudgetUnit) -> Result<Self, GeoprivError> {
        Ok(match u {
            BudgetUnit::PerMetre => geopriv::BudgetUnit::PerMetre,
            BudgetUnit::PerMercatorMetre => geopriv::BudgetUnit::PerMercatorMetre,
            BudgetUnit::PerDollar => geopriv::BudgetUnit::PerDollar,
            BudgetUnit::LocalDp => geopriv::BudgetUnit::LocalDp,
            BudgetUnit::Custom { name } => geopriv::BudgetUnit::custom(&name)?,
        })
    }
}

impl From<&geopriv::BudgetUnit> for BudgetUnit {
    fn from(u: &geopriv::BudgetUnit) -> Self {
        match u {
            geopriv::BudgetUnit::PerMetre => BudgetUnit::PerMetre,
            geopriv::BudgetUnit::PerMercatorMetre => BudgetUnit::PerMercatorMetre,
            geopriv::BudgetUnit::PerDollar => BudgetUnit::PerDollar,
            geopriv::BudgetUnit::LocalDp => BudgetUnit::LocalDp,
            geopriv::BudgetUnit::Custom(name) => BudgetUnit::Custom { name: name.clone() },
        }
    }
}

/// A period of a periodic budget: its length and the (ε, δ) allowed
/// within each period (e.g. a day: `seconds = 86400`).
#[derive(Debug, Clone, PartialEq, uniffi::Record)]
pub struct BudgetPeriod {
    /// The period's length in seconds (periods are ⌊unix time / seconds⌋,
    /// so days start at 00:00 UTC).
    pub seconds: u64,
    /// ε allowed per period (finite, > 0, at most `total_epsilon`).
    pub epsilon: f64,
    /// δ allowed per period (in [0, 1), at most `total_delta`).
    pub delta: f64,
}

/// The budget an app pins for a ledger: its unit, the lifetime totals ε
/// and δ and, optionally, a `period` with its own limit (a daily budget
/// under a lifetime cap; docs/MATH.md §8.3). A stored ledger whose unit,
/// totals or period differ is refused (`LedgerRefused`), never adopted or
/// reset.
#[derive(Debug, Clone, PartialEq, uniffi::Record)]
pub struct BudgetPolicy {
    /// The unit of every ε charged.
    pub unit: BudgetUnit,
    /// The lifetime ε (finite, > 0).
    pub total_epsilon: f64,
    /// The lifetime δ (finite, in [0, 1)).
    pub total_delta: f64,
    /// The per-period limit; none: lifetime only.
    #[uniffi(default)]
    pub period: Option<BudgetPeriod>,
}

impl BudgetPolicy {
    pub(crate) fn to_core(&self) -> Result<geopriv::BudgetPolicy, GeoprivError> {
        let unit = self.unit.clone().try_into()?;
        Ok(match &self.period {
            None => geopriv::BudgetPolicy::new(unit, self.total_epsilon, self.total_delta)?,
            Some(p) => geopriv::BudgetPolicy::periodic(
                unit,
                p.epsilon,
                p.delta,
                p.seconds,
                self.total_epsilon,
                self.total_delta,
            )?,
        })
    }
}

/// A snapshot of a ledger, read under one lock (so its fields agree even
/// while other threads spend).
#[derive(Debug, Clone, PartialEq, uniffi::Record)]
pub struct BudgetStatus {
    /// The unit of ε.
    pub unit: BudgetUnit,
    /// The total ε allowed.
    pub total_epsilon: f64,
    /// The total δ allowed.
    pub total_delta: f64,
    /// ε charged so far (an upper bound of the exact sum of the charges).
    pub spent_epsilon: f64,
    /// δ charged so far.
    pub spent_delta: f64,
    /// ε a release may use now: the smaller of what is left this period
    /// and over the lifetime (rounded down).
    pub remaining_epsilon: f64,
    /// δ a release may use now (rounded down).
    pub remaining_delta: f64,
    /// Number of releases charged.
    pub releases: u64,
    /// The current period (0 for a lifetime-only policy).
    pub period: u64,
    /// ε left in this period.
    pub period_remaining_epsilon: f64,
    /// δ left in this period.
    pub period_remaining_delta: f64,
    /// ε left over the ledger's life.
    pub lifetime_remaining_epsilon: f64,
    /// δ left over the ledger's life.
    pub lifetime_remaining_delta: f64,
}

/// An (ε, δ) pair: one release's share of a budget.
#[derive(Debug, Clone, Copy, PartialEq, uniffi::Record)]
pub struct BudgetShare {
    /// ε per release.
    pub epsilon: f64,
    /// δ per release.
    pub delta: f64,
}

#[derive(Debug)]
enum Store {
    Memory(geopriv::PrivacyBudget),
    File(FileLedger),
}

impl Store {
    fn ledger(&mut self) -> &mut dyn Ledger {
        match self {
            Store::Memory(b) => b,
            Store::File(f) => f,
        }
    }

    fn memo_ledger(&mut self) -> &mut dyn MemoLedger {
        match self {
            Store::Memory(b) => b,
            Store::File(f) => f,
        }
    }

    fn state(&self) -> &geopriv::PrivacyBudget {
        match self {
            Store::Memory(b) => b,
            Store::File(f) => f.state(),
        }
    }
}

/// The privacy spent by one device about one secret (its location, its
/// income), in one unit, by sequential composition. `GeoMechanism.privatize`
/// charges it before returning a report and refuses (`BudgetExceeded`,
/// `UnitMismatch`) a release it cannot pay for, leaving it unchanged.
///
/// **Use a file-backed ledger in an app**: `open_or_create(path, policy)`
/// at start-up. Each charge is written to the file (temporary file, fsync,
/// rename, fsync of the directory) before the report is returned, so a
/// crash may lose a report but never a charge. `create` refuses an
/// existing file and `open` a missing one, so a restart cannot silently
/// start from a fresh budget. `in_memory` is explicitly a new budget for
/// one process lifetime (tests, a single session).
///
/// Thread-safe (a `Mutex` inside).
#[derive(Debug, uniffi::Object)]
pub struct PrivacyLedger {
    store: Mutex<Store>,
}

impl PrivacyLedger {
    /// Run `f` on the ledger under its lock.
    pub(crate) fn with_ledger<T>(
        &self,
        f: impl FnOnce(&mut dyn Ledger) -> Result<T, GeoprivError>,
    ) -> Result<T, GeoprivError> {
        f(lock(&self.store, "privacy ledger")?.ledger())
    }

    /// Run `f` on the ledger, with its device secret and memo table,
    /// under its lock (memoized releases).
    pub(crate) fn with_memo_ledger<T>(
        &self,
        f: impl FnOnce(&mut dyn MemoLedger) -> Result<T, GeoprivError>,
    ) -> Result<T, GeoprivError> {
        f(lock(&self.store, "privacy ledger")?.memo_ledger())
    }

    /// The device secret (report schedules); never returned to the app.
    pub(crate) fn device_secret(&self) -> Result<[u8; 32], GeoprivError> {
        self.with_state(|s| s.device_secret())
    }

    /// Run `f` on the file-backed ledger under its lock (`LedgerIo` for an
    /// in-memory one: the outbox lives in the file).
    pub(crate) fn with_file<T>(
        &self,
        f: impl FnOnce(&mut FileLedger) -> Result<T, GeoprivError>,
    ) -> Result<T, GeoprivError> {
        match &mut *lock(&self.store, "privacy ledger")? {
            Store::File(file) => f(file),
            Store::Memory(_) => Err(GeoprivError::LedgerIo(
                "the outbox needs a file-backed ledger (PrivacyLedger.open_or_create)".into(),
            )),
        }
    }

    fn with_state<T>(
        &self,
        f: impl FnOnce(&geopriv::PrivacyBudget) -> T,
    ) -> Result<T, GeoprivError> {
        Ok(f(lock(&self.store, "privacy ledger")?.state()))
    }

    /// A file-backed ledger (`counter.rs`: opened with the app's counter).
    pub(crate) fn file(ledger: FileLedger) -> Arc<Self> {
        Self::wrap(Store::File(ledger))
    }

    fn wrap(store: Store) -> Arc<Self> {
        Arc::new(Self {
            store: Mutex::new(store),
        })
    }
}

#[uniffi::export]
impl PrivacyLedger {
    /// Open the ledger file at `path` (it must exist) under the app's
    /// pinned `policy`. `LedgerIo` if missing or unreadable,
    /// `LedgerRefused` if its unit or totals differ from `policy` or its
    /// state is invalid (edited, reset).
    #[uniffi::constructor]
    pub fn open(path: String, policy: BudgetPolicy) -> Result<Arc<Self>, GeoprivError> {
        guard(|| {
            crate::outside_counter("ledger file constructor")?;
            Ok(Self::wrap(Store::File(FileLedger::open(
                path,
                &policy.to_core()?,
            )?)))
        })
    }

    /// Create a new, empty ledger file at `path` (`LedgerIo` if it already
    /// exists: no silent reset).
    #[uniffi::constructor]
    pub fn create(path: String, policy: BudgetPolicy) -> Result<Arc<Self>, GeoprivError> {
        guard(|| {
            crate::outside_counter("ledger file constructor")?;
            Ok(Self::wrap(Store::File(FileLedger::create(
                path,
                &policy.to_core()?,
            )?)))
        })
    }

    /// `open` if the file exists, else `create`: what an app calls at
    /// start-up.
    #[uniffi::constructor]
    pub fn open_or_create(path: String, policy: BudgetPolicy) -> Result<Arc<Self>, GeoprivError> {
        guard(|| {
            crate::outside_counter("ledger file constructor")?;
            Ok(Self::wrap(Store::File(FileLedger::open_or_create(
                path,
                &policy.to_core()?,
            )?)))
        })
    }

    /// A new ledger kept in memory only (lost when the process ends): for
    /// tests and single sessions. Apps use `open_or_create`.
    #[uniffi::constructor]
    pub fn in_memory(policy: BudgetPolicy) -> Result<Arc<Self>, GeoprivError> {
        guard(|| {
            Ok(Self::wrap(Store::Memory(geopriv::PrivacyBudget::new(
                policy.to_core()?,
            ))))
        })
    }

    /// An in-memory ledger restored from `to_json` under the pinned
    /// `policy`; `LedgerRefused` if the state is invalid or disagrees with
    /// the policy (raised totals, a reset, another unit).
    #[uniffi::constructor]
    pub fn restore(json: String, policy: BudgetPolicy) -> Result<Arc<Self>, GeoprivError> {
        guard(|| {
            Ok(Self::wrap(Store::Memory(geopriv::PrivacyBudget::restore(
                &json,
                &policy.to_core()?,
            )?)))
        })
    }

    /// The state as JSON (format, unit, totals, amounts spent, releases).
    pub fn to_json(&self) -> Result<String, GeoprivError> {
        guard(|| self.with_state(|s| s.to_json()))
    }

    /// Unit, totals, spent and remaining amounts and the number of
    /// releases, as one consistent snapshot.
    pub fn status(&self) -> Result<BudgetStatus, GeoprivError> {
        guard(|| {
            self.with_state(|l| {
                let r = l.remaining();
                BudgetStatus {
                    unit: l.unit().into(),
                    total_epsilon: l.total_epsilon(),
                    total_delta: l.total_delta(),
                    spent_epsilon: l.spent_epsilon(),
                    spent_delta: l.spent_delta(),
                    remaining_epsilon: r.epsilon,
                    remaining_delta: r.delta,
                    releases: l.releases(),
                    period: r.period,
                    period_remaining_epsilon: r.period_epsilon,
                    period_remaining_delta: r.period_delta,
                    lifetime_remaining_epsilon: r.lifetime_epsilon,
                    lifetime_remaining_delta: r.lifetime_delta,
                }
            })
        })
    }

    /// ε a release may use now: this period and lifetime (rounded down).
    pub fn remaining_epsilon(&self) -> Result<f64, GeoprivError> {
        guard(|| self.with_state(|l| l.remaining().epsilon))
    }

    /// Re-read a file-backed ledger (charges other processes made since);
    /// nothing to do for an in-memory one.
    pub fn refresh(&self) -> Result<(), GeoprivError> {
        guard(|| {
            let mut store = lock(&self.store, "privacy ledger")?;
            if let Store::File(f) = &mut *store {
                f.refresh()?;
            }
            Ok(())
        })
    }

    /// Whether one release with `mechanism` fits now (same unit, enough
    /// left); another thread may spend before you release, and the release
    /// checks again.
    pub fn can_afford(&self, mechanism: Arc<GeoMechanism>) -> Result<bool, GeoprivError> {
        guard(|| {
            self.with_state(|l| {
                mechanism
                    .core()
                    .charge_in(l.unit())
                    .is_ok_and(|c| l.can_afford(&c))
            })
        })
    }

    /// The largest (ε, δ) such that `releases` releases of it fit what is
    /// left now (this period and lifetime; checked by replaying them).
    /// `null` if `releases` is 0 or nothing is left.
    pub fn even_split(&self, releases: u64) -> Result<Option<BudgetShare>, GeoprivError> {
        guard(|| {
            self.with_state(|l| {
                l.even_split(releases)
                    .map(|(epsilon, delta)| BudgetShare { epsilon, delta })
            })
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::GeoQuery;

    /// Ledger errors reach the app escaped: a path and a ledger file
    /// carrying a newline and terminal escapes (before the core's fix the
    /// exception messages held them raw).
    #[test]
    fn ledger_errors_are_escaped() {
        let raw = |m: &str| {
            m.chars()
                .any(|c| c != ' ' && geopriv::server::escape::needs_escape(c))
        };
        let dir = std::env::temp_dir().join(format!("geopriv-ffi-escape-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let forged = dir.join("x\nline 2: ok\u{1b}[2J.json");
        let e = PrivacyLedger::open(forged.to_str().unwrap().to_string(), metres(1.0, 0.0))
            .unwrap_err();
        assert!(matches!(e, GeoprivError::LedgerIo(_)), "{e:?}");
        assert!(
            !raw(&e.to_string()) && e.to_string().contains("x\\nline 2"),
            "{e:?}"
        );
        let file = dir.join("ledger.json");
        std::fs::write(&file, "{\"format\":2,\"a\\nb\\u001b[2J\":1}").unwrap();
        let e =
            PrivacyLedger::open(file.to_str().unwrap().to_string(), metres(1.0, 0.0)).unwrap_err();
        assert!(matches!(e, GeoprivError::LedgerRefused(_)), "{e:?}");
        assert!(
            !raw(&e.to_string()) && e.to_string().contains("a\\nb"),
            "{e:?}"
        );
        std::fs::remove_dir_all(&dir).unwrap();
    }

    fn metres(total_epsilon: f64, total_delta: f64) -> BudgetPolicy {
        BudgetPolicy {
            unit: BudgetUnit::PerMetre,
            total_epsilon,
            total_delta,
            period: None,
        }
    }

    #[test]
    fn refusal_leaves_the_ledger_unchanged() {
        let ledger = PrivacyLedger::in_memory(metres(0.25, 0.0)).unwrap();
        let m = GeoMechanism::polyplace(0.1)
            .unwrap()
            .with_unit(BudgetUnit::PerMetre)
            .unwrap();
        let q = GeoQuery::threshold(0.0, 1.0).unwrap();
        for _ in 0..2 {
            m.privatize(ledger.clone(), q.clone(), vec![0.3]).unwrap();
        }
        let before = ledger.status().unwrap();
        assert_eq!(before.releases, 2);
        assert!((before.remaining_epsilon - 0.05).abs() < 1e-12);
        let e = m
            .privatize(ledger.clone(), q.clone(), vec![0.3])
            .unwrap_err();
        assert!(matches!(e, GeoprivError::BudgetExceeded(_)), "{e:?}");
        assert_eq!(ledger.status().unwrap(), before);
        // A failed release (bad point) is not charged either.
        let big = PrivacyLedger::in_memory(metres(1.0, 0.0)).unwrap();
        let e = m
            .privatize(big.clone(), q.clone(), vec![f64::NAN])
            .unwrap_err();
        assert!(matches!(e, GeoprivError::InvalidInput(_)), "{e:?}");
        assert_eq!(big.status().unwrap().releases, 0);
        assert!(!ledger.can_afford(m.clone()).unwrap());
        assert!(big.can_afford(m.clone()).unwrap());
        // Another unit is refused.
        let ldp = GeoMechanism::local_dp(0.1).unwrap();
        let e = ldp
            .privatize(big.clone(), q.clone(), vec![0.3])
            .unwrap_err();
        assert!(matches!(e, GeoprivError::UnitMismatch(_)), "{e:?}");
        let unstated = GeoMechanism::polyplace(0.1).unwrap();
        let e = unstated.privatize(big.clone(), q, vec![0.3]).unwrap_err();
        assert!(matches!(e, GeoprivError::UnitMismatch(_)), "{e:?}");
        assert!(!big.can_afford(ldp).unwrap());
        assert_eq!(big.status().unwrap().releases, 0);
    }

    #[test]
    fn restore_checks_the_pinned_policy() {
        let b = PrivacyLedger::in_memory(metres(1.0, 1e-6)).unwrap();
        let share = b.even_split(10).unwrap().unwrap();
        let m = GeoMechanism::laplace(share.epsilon, share.delta)
            .unwrap()
            .with_unit(BudgetUnit::PerMetre)
            .unwrap();
        let q = GeoQuery::interval(0.0, 10.0, 1.0).unwrap();
        for _ in 0..3 {
            m.privatize(b.clone(), q.clone(), vec![5.0]).unwrap();
        }
        let json = b.to_json().unwrap();
        let back = PrivacyLedger::restore(json.clone(), metres(1.0, 1e-6)).unwrap();
        assert_eq!(back.status().unwrap(), b.status().unwrap());
        assert_eq!(b.even_split(0).unwrap(), None);
        for (policy, bad) in [
            (metres(2.0, 1e-6), json.clone()),
            (
                BudgetPolicy {
                    unit: BudgetUnit::PerDollar,
                    total_epsilon: 1.0,
                    total_delta: 1e-6,
                    period: None,
                },
                json.clone(),
            ),
            (
                metres(1.0, 1e-6),
                json.replace("\"releases\":3", "\"releases\":0"),
            ),
            (metres(1.0, 1e-6), String::from("{")),
        ] {
            let e = PrivacyLedger::restore(bad.clone(), policy).unwrap_err();
            assert!(matches!(e, GeoprivError::LedgerRefused(_)), "{bad}: {e:?}");
        }
    }

    #[test]
    fn a_periodic_policy_limits_the_day_and_reports_both_remainders() {
        let daily = BudgetPolicy {
            unit: BudgetUnit::PerDollar,
            total_epsilon: 1e-3,
            total_delta: 0.0,
            period: Some(BudgetPeriod {
                seconds: 86_400,
                epsilon: 2.0 / 5000.0,
                delta: 0.0,
            }),
        };
        let dir = std::env::temp_dir().join(format!("geopriv-ffi-daily-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("ledger.json").to_str().unwrap().to_string();
        let ledger = PrivacyLedger::open_or_create(path.clone(), daily.clone()).unwrap();
        let m = GeoMechanism::polyplace(1.0 / 5000.0)
            .unwrap()
            .with_unit(BudgetUnit::PerDollar)
            .unwrap();
        let q = GeoQuery::threshold(100_000.0, 20_000.0).unwrap();
        for _ in 0..2 {
            m.privatize(ledger.clone(), q.clone(), vec![9e4]).unwrap();
        }
        let e = m
            .privatize(ledger.clone(), q.clone(), vec![9e4])
            .unwrap_err();
        assert!(matches!(e, GeoprivError::BudgetExceeded(_)), "{e:?}");
        let s = ledger.status().unwrap();
        assert_eq!(
            (s.releases, s.period_remaining_epsilon, s.remaining_epsilon),
            (2, 0.0, 0.0)
        );
        assert!((s.lifetime_remaining_epsilon - 6e-4).abs() < 1e-15, "{s:?}");
        // Another period length is another policy.
        let mut weekly = daily.clone();
        weekly.period.as_mut().unwrap().seconds = 7 * 86_400;
        let e = PrivacyLedger::open(path.clone(), weekly).unwrap_err();
        assert!(matches!(e, GeoprivError::LedgerRefused(_)), "{e:?}");
        ledger.refresh().unwrap();
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn latlon_charges_mercator_and_ground_metres_apart() {
        let q = GeoQuery::kde_latlon(48.86, 2.34, 1_000.0, crate::Projection::WebMercator).ok();
        let Some(q) = q else { return };
        let ledger = PrivacyLedger::in_memory(metres(1.0, 0.0)).unwrap();
        let m = GeoMechanism::polyplace(1e-3).unwrap();
        // Mercator metres into a ground-metre ledger: refused.
        let e = m
            .privatize_latlon(
                ledger.clone(),
                q.clone(),
                48.86,
                2.34,
                crate::Projection::WebMercator,
            )
            .unwrap_err();
        assert!(matches!(e, GeoprivError::UnitMismatch(_)), "{e:?}");
        let stated = m.with_unit(BudgetUnit::PerMetre).unwrap();
        let e = stated
            .privatize_latlon(
                ledger.clone(),
                q,
                48.86,
                2.34,
                crate::Projection::WebMercator,
            )
            .unwrap_err();
        assert!(matches!(e, GeoprivError::UnitMismatch(_)), "{e:?}");
        assert_eq!(ledger.status().unwrap().releases, 0);
    }

    #[test]
    fn bad_policies_are_invalid_parameter() {
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
                    PrivacyLedger::in_memory(metres(e, d)),
                    Err(GeoprivError::InvalidParameter(_))
                ),
                "{e} {d}"
            );
        }
    }
}
