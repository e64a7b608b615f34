//! Apps that report every period for years (core `geopriv::device::schedule`
//! and `geopriv::device::memo`; docs/MATH.md §12): data-independent report
//! schedules with their planner, and memoized releases that re-send the
//! same report while the value stays in its cell.
//!
//! Both take the device secret from the ledger (it is stored with the
//! ledger and never leaves it: neither API returns it), so a schedule
//! cannot be re-rolled by the app and a memoized report cannot be drawn
//! again for the same cell.

use std::sync::{Arc, Mutex};

use geopriv::device::memo::{InstantaneousLayer, Memoized};
use geopriv::device::schedule::{self, PlanInput, Schedule};

use crate::{guard, lock, GeoMechanism, GeoQuery, GeoprivError, PrivacyLedger, PrivateReport};

/// A data-independent report schedule: whether a device reports in period
/// t is a function of the ledger's device secret and t only, never of the
/// value (docs/MATH.md §12.2). Lifetime ε = ε per report × reports sent.
/// Immutable and thread-safe.
///
/// ```text
/// let schedule = ReportSchedule.fixed_slot(7)       // one day in 7, at a secret slot
/// if schedule.reports_in(ledger, status.period) { mechanism.privatize(ledger, q, x) }
/// ```
#[derive(Debug, uniffi::Object)]
pub struct ReportSchedule {
    inner: Schedule,
}

#[uniffi::export]
impl ReportSchedule {
    /// Each period independently with probability `p` ∈ (0, 1]:
    /// b_t = [U(PRF_k("schedule", t)) < p].
    #[uniffi::constructor]
    pub fn bernoulli(p: f64) -> Result<Arc<Self>, GeoprivError> {
        guard(|| {
            Ok(Arc::new(Self {
                inner: Schedule::bernoulli(p)?,
            }))
        })
    }

    /// One period in `every` (>= 1) at the device's secret slot
    /// σ = PRF_k("slot", every) mod every: b_t = [t mod every = σ].
    #[uniffi::constructor]
    pub fn fixed_slot(every: u64) -> Result<Arc<Self>, GeoprivError> {
        guard(|| {
            Ok(Arc::new(Self {
                inner: Schedule::fixed_slot(every)?,
            }))
        })
    }

    /// Whether the device of `ledger` reports in period `period` (e.g.
    /// `ledger.status().period` for a daily policy): a function of the
    /// ledger's device secret and `period` only.
    pub fn reports_in(
        &self,
        ledger: Arc<PrivacyLedger>,
        period: u64,
    ) -> Result<bool, GeoprivError> {
        guard(|| Ok(self.inner.reports_in(&ledger.device_secret()?, period)))
    }

    /// The reporting probability per period: p, or 1/every.
    pub fn probability(&self) -> f64 {
        self.inner.probability()
    }

    /// The most reports one device can send in `periods` periods: `periods`
    /// for Bernoulli (the ledger's cap bounds it), ⌈periods/every⌉ for a
    /// slot.
    pub fn max_reports(&self, periods: u64) -> u64 {
        self.inner.max_reports(periods)
    }
}

/// The planner's choice for N devices, T periods and a lifetime budget C
/// (docs/MATH.md §12.2): one period in `every` at ε = `epsilon_per_report`,
/// with the predicted variance of one period's estimate against fresh
/// releases every period at C/T.
#[derive(Debug, Clone, PartialEq, uniffi::Record)]
pub struct SchedulePlan {
    /// p* = (C/T)·sqrt(Var f / c), capped to [1/T, 1].
    pub p: f64,
    /// The slot length s (`ReportSchedule.fixed_slot(every)`), round(1/p*).
    pub every: u64,
    /// ε per report = C / ⌈T/s⌉ (the lifetime budget spread exactly).
    pub epsilon_per_report: f64,
    /// Reports per device, ⌈T/s⌉.
    pub reports_per_device: u64,
    /// Predicted variance of one period's estimate: (Var f + c/ε²)/(N/s).
    pub variance_per_period: f64,
    /// The same for fresh releases every period at ε = C/T: c (T/C)²/N.
    pub fresh_variance_per_period: f64,
}

/// Plan a report schedule (docs/MATH.md §12.2): for `devices` N, `periods`
/// T, a `lifetime_epsilon` C per device, the population's `value_variance`
/// Var f (from public information, e.g. 0.25 for a share, never from the
/// devices' raw values) and the mechanism's `noise_constant` c (the noise
/// variance is c/ε²; `schedule_noise_constant`), the slot length that
/// minimises the per-period variance s·Var f/N + c T²/(C² s N).
#[uniffi::export]
pub fn plan_schedule(
    devices: u64,
    periods: u64,
    lifetime_epsilon: f64,
    value_variance: f64,
    noise_constant: f64,
) -> Result<SchedulePlan, GeoprivError> {
    guard(|| {
        let p = schedule::plan(&PlanInput {
            devices,
            periods,
            lifetime_epsilon,
            value_variance,
            noise_constant,
        })?;
        Ok(SchedulePlan {
            p: p.p,
            every: match p.schedule {
                Schedule::FixedSlot { every } => every,
                // The planner always picks a slot; a Bernoulli p maps to
                // its expected spacing.
                Schedule::Bernoulli { p } => (1.0 / p).round().max(1.0) as u64,
            },
            epsilon_per_report: p.epsilon_per_report,
            reports_per_device: p.reports_per_device,
            variance_per_period: p.variance_per_period,
            fresh_variance_per_period: p.fresh_variance_per_period,
        })
    })
}

/// c of the planner's noise model (variance c/ε²) for `mechanism`'s family
/// on `query`: one report's variance at ε = 1 and the global sensitivity;
/// none for noise a priori and noises of infinite variance.
#[uniffi::export]
pub fn schedule_noise_constant(
    mechanism: Arc<GeoMechanism>,
    query: Arc<GeoQuery>,
) -> Result<Option<f64>, GeoprivError> {
    guard(|| Ok(schedule::noise_constant(mechanism.core(), query.query())))
}

/// What a memoized release returns: the report to upload and whether this
/// call charged the ledger (a new cell).
#[derive(Debug, Clone, PartialEq, uniffi::Record)]
pub struct MemoizedReport {
    /// The report (a fresh report id on every call; the value repeats
    /// while the input stays in its cell, unless the instantaneous layer
    /// is on).
    pub report: PrivateReport,
    /// Whether this call charged the ledger (the cell's first release).
    pub charged: bool,
}

/// A memoized release (docs/MATH.md §12.3) for values that rarely change
/// (an income, a home area): the input is snapped to a public grid of
/// `width` with a secret per-device offset, and the report of a cell is
/// derived from the ledger's device secret, so an unchanged cell re-sends
/// the same report and is charged once; the lifetime charge counts
/// distinct cells. Equal reports reveal *which periods were spent in the
/// same cell*; the optional instantaneous layer (`instantaneous_epsilon`)
/// adds fresh Laplace(range/ε_I) noise to every upload to hide that
/// pattern, at an extra variance 2·(range/ε_I)² per report. The estimate
/// targets f smoothed by the cell (a bias of at most the query's Lipschitz
/// constant × width/2 per coordinate). Thread-safe.
#[derive(uniffi::Object)]
pub struct MemoizedRelease {
    mechanism: Arc<GeoMechanism>,
    inner: Mutex<Memoized>,
}

impl std::fmt::Debug for MemoizedRelease {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // `Memoized` prints its mechanism and width, never the cached
        // device state.
        f.debug_struct("MemoizedRelease")
            .field("inner", &self.inner)
            .finish()
    }
}

#[uniffi::export]
impl MemoizedRelease {
    /// `mechanism` (with its unit, `with_unit`) memoized on a public grid
    /// of `width` (in the query's unit, 0 < width <= f64::MAX/2^54), with
    /// the instantaneous layer at `instantaneous_epsilon` if given.
    #[uniffi::constructor]
    pub fn new(
        mechanism: Arc<GeoMechanism>,
        width: f64,
        instantaneous_epsilon: Option<f64>,
    ) -> Result<Arc<Self>, GeoprivError> {
        guard(|| {
            let mut memo = Memoized::new(mechanism.core().clone(), width)?;
            if let Some(e) = instantaneous_epsilon {
                memo = memo.with_instantaneous(InstantaneousLayer::new(e)?);
            }
            Ok(Arc::new(Self {
                mechanism,
                inner: Mutex::new(memo),
            }))
        })
    }

    /// The snapping width.
    pub fn width(&self) -> Result<f64, GeoprivError> {
        guard(|| Ok(lock(&self.inner, "memoized release")?.width()))
    }

    /// ε_I of the instantaneous layer, if on.
    pub fn instantaneous_epsilon(&self) -> Result<Option<f64>, GeoprivError> {
        guard(|| {
            Ok(lock(&self.inner, "memoized release")?
                .instantaneous()
                .map(|l| l.epsilon()))
        })
    }

    /// The report of x's cell, charged to `ledger` once per cell (in the
    /// same atomic write as the memo key for a file-backed ledger) before
    /// it is returned. Refused with nothing charged or released:
    /// `UnitMismatch`, `BudgetExceeded` (a new cell that does not fit),
    /// `InvalidInput` (a bad point), `InvalidParameter` (a point beyond
    /// 2^52 cells); `LedgerIo` if the charge cannot be written.
    pub fn release(
        &self,
        ledger: Arc<PrivacyLedger>,
        query: Arc<GeoQuery>,
        x: Vec<f64>,
    ) -> Result<MemoizedReport, GeoprivError> {
        guard(|| {
            query.check_point(&x)?;
            // Lock order: ledger, memo, generator (nothing locks them the
            // other way round).
            ledger.with_memo_ledger(|l| {
                let mut memo = lock(&self.inner, "memoized release")?;
                self.mechanism.with_rng(|rng| {
                    let (report, charged) = memo.release_report(l, query.query(), &x, rng)?;
                    Ok(MemoizedReport {
                        report: PrivateReport::from_core(&report),
                        charged,
                    })
                })
            })
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{BudgetPolicy, BudgetUnit};

    fn dollars(total: f64) -> Arc<PrivacyLedger> {
        PrivacyLedger::in_memory(BudgetPolicy {
            unit: BudgetUnit::PerDollar,
            total_epsilon: total,
            total_delta: 0.0,
            period: None,
        })
        .unwrap()
    }

    #[test]
    fn memoized_resends_and_charges_once() {
        let q = GeoQuery::threshold(100_000.0, 20_000.0).unwrap();
        let m = GeoMechanism::polyplace(1e-4)
            .unwrap()
            .with_unit(BudgetUnit::PerDollar)
            .unwrap();
        let memo = MemoizedRelease::new(m, 5_000.0, None).unwrap();
        let ledger = dollars(1.5e-4);
        let a = memo
            .release(ledger.clone(), q.clone(), vec![95_000.0])
            .unwrap();
        let b = memo
            .release(ledger.clone(), q.clone(), vec![95_000.0])
            .unwrap();
        assert!(a.charged && !b.charged);
        assert_eq!(a.report.value, b.report.value);
        assert_ne!(a.report.json, b.report.json, "a fresh report id per upload");
        // A second cell does not fit 1.5e-4.
        let e = memo
            .release(ledger.clone(), q, vec![150_000.0])
            .unwrap_err();
        assert!(matches!(e, GeoprivError::BudgetExceeded(_)), "{e}");
        assert_eq!(ledger.status().unwrap().releases, 1);
    }

    #[test]
    fn schedules_and_the_planner() {
        let plan = plan_schedule(1_000_000, 365, 3.0, 0.25, 9.0).unwrap();
        assert_eq!(plan.every, 365);
        let s = ReportSchedule::fixed_slot(plan.every).unwrap();
        let ledger = dollars(1.0);
        let days = (0..365)
            .filter(|&t| s.reports_in(ledger.clone(), t).unwrap())
            .count();
        assert_eq!(days, 1);
        assert!(ReportSchedule::bernoulli(0.0).is_err());
        assert!(ReportSchedule::fixed_slot(0).is_err());
        assert!(plan_schedule(0, 365, 3.0, 0.25, 9.0).is_err());
    }
}
