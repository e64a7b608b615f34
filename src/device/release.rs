//! The metered release paths (`docs/MATH.md §8.3`): every device-side
//! release charges a [`Ledger`] before its value is returned.
//!
//! | path | charges | for |
//! |---|---|---|
//! | [`Report::release`], [`Mechanism::privatize`] | the ledger passed | devices |
//! | [`Report::release_unmetered`], [`Mechanism::privatize_unmetered`] | nothing | experiments, simulations, servers |
//!
//! A metered release, in order: the mechanism's [`Charge`] is formed (its
//! ε in the mechanism's unit: [`BudgetUnit::LocalDp`] for
//! [`Mechanism::local_dp`], the unit stated with
//! [`Mechanism::with_unit`] otherwise, and [`Error::UnitMismatch`] if none
//! was stated); the ledger refuses a charge in another unit or one it
//! cannot afford; the value is computed and refused if it is not finite
//! ([`Error::NonFiniteRelease`]); the charge is committed (written to disk
//! for a [`FileLedger`](crate::device::budget::FileLedger)); the value is returned.
//! Any refusal leaves the ledger unchanged and releases nothing.

use crate::device::budget::{spend_dyn, BudgetUnit, Charge, Ledger, NoiseRng};
use crate::error::{Error, Result};
use crate::mechanism::Mechanism;
use crate::query::Query;
use crate::report::Report;
use rand::Rng;

impl Mechanism {
    /// What one release with this mechanism costs: (ε, δ) in its unit.
    /// [`Error::UnitMismatch`] (with `charge: None`) for a geo-private
    /// mechanism whose unit was not stated with
    /// [`with_unit`](Mechanism::with_unit); `ledger_unit` is only used in
    /// that error message.
    pub fn charge_in(&self, ledger_unit: &BudgetUnit) -> Result<Charge> {
        let unit = self.unit().ok_or_else(|| Error::UnitMismatch {
            ledger: ledger_unit.clone(),
            charge: None,
        })?;
        Charge::new(unit.clone(), self.epsilon(), self.delta())
    }

    /// Privatize f(x), **charged to `ledger`** before the value is
    /// returned (the metered path of the [module docs](crate::device::release)):
    /// refused with nothing released and nothing charged if the units
    /// differ, the budget cannot afford it, the input is bad or the release
    /// would not be finite; if the ledger cannot record the charge (a
    /// file that cannot be written), the value is dropped.
    ///
    /// ```
    /// use geopriv::device::budget::{BudgetPolicy, BudgetUnit, PrivacyBudget};
    /// use geopriv::{Mechanism, SoftThreshold};
    ///
    /// let q = SoftThreshold::new(100_000.0, 20_000.0)?;
    /// let m = Mechanism::polyplace(1e-4)?.with_unit(BudgetUnit::PerDollar)?;
    /// let mut ledger = PrivacyBudget::new(BudgetPolicy::new(BudgetUnit::PerDollar, 2e-4, 0.0)?);
    /// let mut rng = geopriv::SecureRng::new();
    /// m.privatize(&mut ledger, &q, &[95_000.0], &mut rng)?;
    /// m.privatize(&mut ledger, &q, &[95_000.0], &mut rng)?;
    /// assert!(m.privatize(&mut ledger, &q, &[95_000.0], &mut rng).is_err()); // spent
    /// # Ok::<(), geopriv::Error>(())
    /// ```
    pub fn privatize<Q: Query + ?Sized, R: Rng + ?Sized>(
        &self,
        ledger: &mut dyn Ledger,
        query: &Q,
        x: &[f64],
        rng: &mut R,
    ) -> Result<f64> {
        let charge = self.charge_in(ledger.state().unit())?;
        spend_dyn(ledger, &charge, || self.privatize_unmetered(query, x, rng))
    }

    /// [`privatize`](Mechanism::privatize) with a fresh generator seeded
    /// from the operating system (the secure default).
    #[cfg(feature = "std")]
    pub fn privatize_secure<Q: Query + ?Sized>(
        &self,
        ledger: &mut dyn Ledger,
        query: &Q,
        x: &[f64],
    ) -> Result<f64> {
        self.privatize(ledger, query, x, &mut crate::SecureRng::new())
    }
}

impl Report {
    /// What a device uploads, **charged to `ledger`** first (see
    /// [`Mechanism::privatize`]): privatize f(x) with `mechanism` and wrap
    /// the released value with the query's public parameters, the
    /// mechanism's name, ε and δ, `seeded` if `rng` is seeded, and a
    /// random [`ReportId`](crate::ReportId) drawn from `rng` after the
    /// noise (independent of x: it lets a collector count the report once
    /// however often it is uploaded). Nothing derived from x other than the
    /// release enters the report.
    pub fn release<Q, R>(
        ledger: &mut dyn Ledger,
        mechanism: &Mechanism,
        query: &Q,
        x: &[f64],
        rng: &mut R,
    ) -> Result<Self>
    where
        Q: Query + ?Sized,
        R: NoiseRng + ?Sized,
    {
        let seeded = rng.is_seeded();
        let value = mechanism.privatize(ledger, query, x, rng)?;
        Ok(Self::wrap(mechanism, query, value, seeded).with_random_id(rng))
    }

    /// [`Report::release`] **without charging any ledger**: for
    /// experiments and simulations of many devices, never for a device's
    /// own uploads.
    pub fn release_unmetered<Q, R>(
        mechanism: &Mechanism,
        query: &Q,
        x: &[f64],
        rng: &mut R,
    ) -> Result<Self>
    where
        Q: Query + ?Sized,
        R: NoiseRng + ?Sized,
    {
        let seeded = rng.is_seeded();
        let value = mechanism.privatize_unmetered(query, x, rng)?;
        Ok(Self::wrap(mechanism, query, value, seeded).with_random_id(rng))
    }

    fn wrap<Q: Query + ?Sized>(mechanism: &Mechanism, query: &Q, value: f64, seeded: bool) -> Self {
        Report::new(
            query.descriptor(),
            mechanism.name(),
            mechanism.epsilon(),
            mechanism.delta(),
            value,
        )
        .with_seeded(seeded)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::device::budget::{BudgetPolicy, PrivacyBudget};
    use crate::query::{SoftInterval, SoftThreshold, TwoWayThreshold};
    use rand::rngs::StdRng;
    use rand::SeedableRng;

    fn ledger(unit: BudgetUnit, total: f64) -> PrivacyBudget {
        PrivacyBudget::new(BudgetPolicy::new(unit, total, 0.0).unwrap())
    }

    #[test]
    fn units_are_checked_before_anything_is_released() {
        let q = SoftThreshold::new(0.0, 1.0).unwrap();
        let mut rng = StdRng::seed_from_u64(1);
        let mut metres = ledger(BudgetUnit::PerMetre, 10.0);
        // A geo-private mechanism without a stated unit.
        let m = Mechanism::polyplace(1.0).unwrap();
        let e = m.privatize(&mut metres, &q, &[0.0], &mut rng).unwrap_err();
        assert!(matches!(e, Error::UnitMismatch { charge: None, .. }), "{e}");
        // Local DP into a per-metre ledger; per-dollar into per-metre.
        let ldp = Mechanism::local_dp(1.0).unwrap();
        let e = ldp
            .privatize(&mut metres, &q, &[0.0], &mut rng)
            .unwrap_err();
        assert!(matches!(
            e,
            Error::UnitMismatch {
                charge: Some(BudgetUnit::LocalDp),
                ..
            }
        ));
        let dollars = m.clone().with_unit(BudgetUnit::PerDollar).unwrap();
        assert!(dollars
            .privatize(&mut metres, &q, &[0.0], &mut rng)
            .is_err());
        assert_eq!(metres.releases(), 0);
        let ok = m.with_unit(BudgetUnit::PerMetre).unwrap();
        let r = Report::release(&mut metres, &ok, &q, &[0.0], &mut rng).unwrap();
        assert!(r.seeded);
        assert_eq!(metres.releases(), 1);
        let mut local = ledger(BudgetUnit::LocalDp, 10.0);
        ldp.privatize(&mut local, &q, &[0.0], &mut rng).unwrap();
        assert_eq!(local.releases(), 1);
        let r = Report::release_unmetered(&ok, &q, &[0.0], &mut crate::SecureRng::new()).unwrap();
        assert!(!r.seeded);
    }

    #[test]
    fn non_finite_releases_are_refused_and_not_charged() {
        let mut rng = StdRng::seed_from_u64(2);
        let mut b = ledger(BudgetUnit::PerMetre, 1.0);
        // ε = 1e-300 with a narrow ramp: the scale overflows.
        let m = Mechanism::global_laplace(1e-300)
            .unwrap()
            .with_unit(BudgetUnit::PerMetre)
            .unwrap();
        let q = SoftThreshold::new(0.0, 1e-9).unwrap();
        let e = m.privatize(&mut b, &q, &[0.0], &mut rng).unwrap_err();
        assert!(matches!(e, Error::NonFiniteRelease { .. }), "{e}");
        assert_eq!(b.releases(), 0);
        // Constructors refuse what they can see on their own.
        assert!(Mechanism::global_laplace(1e-310).is_err());
        assert!(Mechanism::polyplace(1e-308).is_err());
        assert!(SoftInterval::new(-1e308, 1e308, 1.0).is_err());
        assert!(TwoWayThreshold::new(0.0, 0.0, 1.7e308).is_err());
        assert!(SoftThreshold::new(0.0, 1e-310).is_err());
        // The widest interval accepted still releases finite values.
        let wide = SoftInterval::new(-1e300, 1e300, 1e300).unwrap();
        for m in [
            Mechanism::polyplace(1e-3).unwrap(),
            Mechanism::global_laplace(1e-3).unwrap(),
        ] {
            let m = m.with_unit(BudgetUnit::PerMetre).unwrap();
            let y = m.privatize(&mut b, &wide, &[0.0], &mut rng).unwrap();
            assert!(y.is_finite());
        }
    }
}
