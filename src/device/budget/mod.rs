//! The device's privacy-budget ledger (`docs/MATH.md §8.3`).
//!
//! # Sequential composition, per unit
//!
//! If a device makes releases M_1, …, M_k about the same private x, each
//! (ε_i, δ_i)-GP, the whole sequence is (Σ ε_i, Σ δ_i)-GP: for any x, x'
//! the i-th release is (ε_i·d(x, x'), δ_i)-indistinguishable, and basic
//! composition of indistinguishability adds the exponents (the pure
//! density ratios multiply: Π exp(ε_i d) = exp(d Σ ε_i)) and the δs.
//! The sum only means something when every ε_i is in the same unit: a
//! per-metre ε and a per-dollar ε measure different distances, and a
//! local-DP ε is unit-less. So a ledger carries its [`BudgetUnit`] and
//! refuses a [`Charge`] in any other ([`Error::UnitMismatch`]).
//!
//! # The metered release paths
//!
//! Every device-side release (`Report::release`, `Mechanism::privatize`,
//! the CLI's `privatize`, the bindings' `privatize`) takes a [`Ledger`] and
//! charges it *before the value is returned*: the unit is checked, the
//! charge is checked against the remaining budget, the value is computed
//! and checked to be finite, the charge is committed (for a
//! [`FileLedger`], durably written to disk), and only then is the value
//! handed back. Experiments and servers that simulate many devices use the
//! paths named `*_unmetered`.
//!
//! **Forgetting to load is loud, by construction.** There is no global or
//! default ledger: the metered paths need a ledger object, and the only
//! ways to get one are [`PrivacyBudget::new`] (explicitly a *new*
//! in-memory budget, for one process lifetime), [`PrivacyBudget::restore`]
//! (a saved state, checked against the app's pinned [`BudgetPolicy`]), and
//! with `std` [`FileLedger::open`] (the file must exist),
//! [`FileLedger::create`] (the file must *not* exist) and
//! [`FileLedger::open_or_create`]. A restarted app that calls `create`
//! again gets an error instead of a fresh budget; one that wants the file
//! to exist calls `open` and gets an error if it is missing.
//!
//! # Rounding never overspends
//!
//! The spent totals are kept as floating-point *upper bounds* of the exact
//! sums of the charges: each addition is rounded up (detected with an
//! error-free two-sum) whenever it is inexact. A charge is refused iff that
//! upper bound would exceed the total, so the exact sum of everything
//! released never exceeds the total; the slack (an ulp per inexact
//! addition) only ever refuses, never allows. Note that binary fractions
//! decide: 10 × 0.1 is *more* than 1 in binary64 (0.1 rounds up), so ten
//! charges of `0.1` do not fit a total of `1.0`. Use
//! [`PrivacyBudget::even_split`] to plan k equal releases.
//!
//! ```
//! use geopriv::device::budget::{BudgetPolicy, BudgetUnit, Charge, Ledger, PrivacyBudget};
//!
//! // ε = 0.01 per metre in all.
//! let policy = BudgetPolicy::new(BudgetUnit::PerMetre, 1.0 / 100.0, 0.0)?;
//! let mut budget = PrivacyBudget::new(policy);
//! let (eps, _) = budget.even_split(4).unwrap();
//! let charge = Charge::new(BudgetUnit::PerMetre, eps, 0.0)?;
//! for _ in 0..4 {
//!     let release = budget.spend(&charge, || Ok(42.0 /* privatize here */))?;
//!     # let _ = release;
//! }
//! assert!(budget.try_charge(&charge).is_err()); // a fifth release is refused
//! // A local-DP charge is refused by a per-metre ledger.
//! let ldp = Charge::new(BudgetUnit::LocalDp, 1e-6, 0.0)?;
//! assert!(matches!(budget.try_charge(&ldp), Err(geopriv::Error::UnitMismatch { .. })));
//! # Ok::<(), geopriv::Error>(())
//! ```

#[cfg(feature = "std")]
mod file;
mod noise_rng;
mod unit;

#[cfg(feature = "std")]
pub use file::FileLedger;
pub use noise_rng::{DeclaredSecure, NoiseRng, Seeded};
pub use unit::{BudgetPolicy, BudgetUnit, Charge};

use crate::error::{Error, Result};
use alloc::format;
use alloc::string::{String, ToString};
use serde::{Deserialize, Serialize};

/// Version of the persisted ledger state ([`PrivacyBudget::to_json`]).
/// Version 1 (this one) carries the unit; the unit-less states of earlier
/// releases are refused (their unit cannot be known).
pub const LEDGER_FORMAT_VERSION: u16 = 1;

/// Smallest double above a positive finite `x`.
fn next_up(x: f64) -> f64 {
    if x.is_finite() && x >= 0.0 {
        f64::from_bits(x.to_bits() + 1)
    } else {
        x
    }
}

/// Smallest double at least the exact sum a + b (a, b >= 0).
fn add_up(a: f64, b: f64) -> f64 {
    let s = a + b;
    if !s.is_finite() {
        return s;
    }
    // Knuth's two-sum: s + err == a + b exactly.
    let bb = s - a;
    let err = (a - (s - bb)) + (b - bb);
    if err > 0.0 {
        next_up(s)
    } else {
        s
    }
}

/// Largest double at most the exact difference a − b.
fn sub_down(a: f64, b: f64) -> f64 {
    let d = a - b;
    let bb = d - a;
    let err = (a - (d - bb)) + (-b - bb);
    if err < 0.0 {
        f64::from_bits(if d > 0.0 {
            d.to_bits() - 1
        } else if d == 0.0 {
            (-f64::MIN_POSITIVE * f64::EPSILON).to_bits()
        } else {
            d.to_bits() + 1
        })
    } else {
        d
    }
}

pub(crate) fn check_delta(name: &'static str, delta: f64, max: f64) -> Result<f64> {
    if delta.is_finite() && (0.0..=max).contains(&delta) {
        Ok(delta)
    } else {
        Err(Error::InvalidParameter {
            name,
            value: delta,
            requirement: if max < 1.0 {
                "finite and in [0, 1)"
            } else {
                "finite and in [0, 1]"
            },
        })
    }
}

/// Where charges go: an in-memory [`PrivacyBudget`] or, with `std`, a
/// [`FileLedger`] that writes every charge to disk before the release is
/// returned. The metered release paths take `&mut dyn Ledger`.
///
/// Contract of an implementation: [`commit`](Ledger::commit) either
/// records the charge (durably, for a persistent ledger) and returns `Ok`,
/// or records nothing and returns the error; [`state`](Ledger::state) is
/// the budget after every committed charge.
pub trait Ledger {
    /// The current state (policy, amounts spent, releases).
    fn state(&self) -> &PrivacyBudget;

    /// Record `charge`. Refused, with nothing recorded, if its unit is not
    /// the ledger's ([`Error::UnitMismatch`]), if it would exceed the
    /// totals ([`Error::BudgetExceeded`]) or, for a persistent ledger, if
    /// it cannot be written durably ([`Error::LedgerIo`]).
    fn commit(&mut self, charge: &Charge) -> Result<()>;

    /// Run `release` under `charge` (the write-ahead protocol of the
    /// [module docs](self)):
    ///
    /// * a charge in another unit, or one the budget cannot afford, is
    ///   refused and `release` is **not run**: nothing is released;
    /// * if `release` fails, nothing was released, so nothing is charged;
    /// * otherwise the charge is committed (durably, for a persistent
    ///   ledger) and only then is the value returned; if the commit fails
    ///   the value is dropped and the error returned: never a release
    ///   without a charge.
    ///
    /// `release` must only *compute* the privatized value; publish the
    /// returned value afterwards.
    fn spend<T>(&mut self, charge: &Charge, release: impl FnOnce() -> Result<T>) -> Result<T>
    where
        Self: Sized,
    {
        spend_dyn(self, charge, release)
    }
}

/// [`Ledger::spend`] for a `dyn Ledger` (what the metered paths call).
pub fn spend_dyn<L: Ledger + ?Sized, T>(
    ledger: &mut L,
    charge: &Charge,
    release: impl FnOnce() -> Result<T>,
) -> Result<T> {
    ledger.state().after(charge)?;
    let value = release()?;
    ledger.commit(charge)?;
    Ok(value)
}

/// A ledger of the privacy spent by one device about one secret, in one
/// unit: the app's pinned [`BudgetPolicy`] (unit, total ε, total δ) and
/// what has been charged so far by sequential composition (see the
/// [module docs](self)).
///
/// In memory only; persist it with [`to_json`](Self::to_json) and
/// [`restore`](Self::restore), or use a [`FileLedger`] (with `std`), which
/// does so durably on every charge.
#[derive(Clone, Debug, PartialEq)]
pub struct PrivacyBudget {
    policy: BudgetPolicy,
    spent_epsilon: f64,
    spent_delta: f64,
    releases: u64,
}

/// Persisted form of a [`PrivacyBudget`] (format version
/// [`LEDGER_FORMAT_VERSION`]).
#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct BudgetState {
    format: u16,
    unit: BudgetUnit,
    total_epsilon: f64,
    total_delta: f64,
    spent_epsilon: f64,
    spent_delta: f64,
    releases: u64,
}

fn invalid(reason: impl Into<String>) -> Error {
    Error::InvalidLedgerState {
        reason: reason.into(),
    }
}

impl PrivacyBudget {
    /// A fresh, empty ledger for `policy`. This is explicitly a *new*
    /// budget: an app that persists its ledger restores it with
    /// [`restore`](Self::restore) or uses a [`FileLedger`].
    pub fn new(policy: BudgetPolicy) -> Self {
        Self {
            policy,
            spent_epsilon: 0.0,
            spent_delta: 0.0,
            releases: 0,
        }
    }

    /// The state as one JSON object (format version, unit, totals, amounts
    /// spent, number of releases), e.g.
    /// `{"format":1,"unit":"per-metre","total_epsilon":0.01,"total_delta":0.0,"spent_epsilon":0.0025,"spent_delta":0.0,"releases":1}`.
    pub fn to_json(&self) -> String {
        let state = BudgetState {
            format: LEDGER_FORMAT_VERSION,
            unit: self.policy.unit().clone(),
            total_epsilon: self.policy.total_epsilon(),
            total_delta: self.policy.total_delta(),
            spent_epsilon: self.spent_epsilon,
            spent_delta: self.spent_delta,
            releases: self.releases,
        };
        // Cannot fail: plain fields, no maps; the numbers are finite.
        serde_json::to_string(&state).unwrap_or_default()
    }

    /// Restore a state saved with [`to_json`](Self::to_json) under the
    /// app's pinned `policy`. Refused with a typed error, never adopted or
    /// silently reset:
    ///
    /// * [`Error::InvalidLedgerState`]: not JSON of this shape, another
    ///   format version, a NaN or infinity, spent below 0 or above the
    ///   totals, a release counter that contradicts the amounts spent (ε
    ///   spent with no release counted, or releases counted with nothing
    ///   spent: a reset);
    /// * [`Error::LedgerPolicyMismatch`]: another unit or other totals
    ///   than the pinned policy (an edited file, or another policy's).
    pub fn restore(json: &str, policy: &BudgetPolicy) -> Result<Self> {
        let s: BudgetState = serde_json::from_str(json.trim())
            .map_err(|e| invalid(format!("not a ledger state: {e}")))?;
        if s.format != LEDGER_FORMAT_VERSION {
            return Err(invalid(format!(
                "format version {} (this library reads {LEDGER_FORMAT_VERSION})",
                s.format
            )));
        }
        if &s.unit != policy.unit() {
            return Err(Error::LedgerPolicyMismatch {
                field: "unit",
                pinned: policy.unit().to_string(),
                stored: s.unit.to_string(),
            });
        }
        for (field, pinned, stored) in [
            ("total_epsilon", policy.total_epsilon(), s.total_epsilon),
            ("total_delta", policy.total_delta(), s.total_delta),
        ] {
            // Bitwise: a total edited by one ulp is still an edit.
            if pinned.to_bits() != stored.to_bits() {
                return Err(Error::LedgerPolicyMismatch {
                    field,
                    pinned: format!("{pinned:e}"),
                    stored: format!("{stored:e}"),
                });
            }
        }
        for (name, spent, total) in [
            ("spent_epsilon", s.spent_epsilon, s.total_epsilon),
            ("spent_delta", s.spent_delta, s.total_delta),
        ] {
            if !(spent.is_finite() && spent >= 0.0 && spent <= total) {
                return Err(invalid(format!(
                    "{name} = {spent:e} is not in [0, {total:e}]"
                )));
            }
        }
        // Every charge has ε > 0, so ε spent and the counter agree on
        // whether anything was released.
        if (s.releases == 0) != (s.spent_epsilon == 0.0) {
            return Err(invalid(format!(
                "{} release(s) counted but epsilon spent is {:e} (a reset or an edit)",
                s.releases, s.spent_epsilon
            )));
        }
        Ok(Self {
            policy: policy.clone(),
            spent_epsilon: s.spent_epsilon,
            spent_delta: s.spent_delta,
            releases: s.releases,
        })
    }

    /// The pinned policy (unit and totals).
    pub fn policy(&self) -> &BudgetPolicy {
        &self.policy
    }

    /// The unit of every ε this ledger counts.
    pub fn unit(&self) -> &BudgetUnit {
        self.policy.unit()
    }

    /// The total ε.
    pub fn total_epsilon(&self) -> f64 {
        self.policy.total_epsilon()
    }

    /// The total δ.
    pub fn total_delta(&self) -> f64 {
        self.policy.total_delta()
    }

    /// ε charged so far (an upper bound of the exact sum of the charges).
    pub fn spent_epsilon(&self) -> f64 {
        self.spent_epsilon
    }

    /// δ charged so far (an upper bound of the exact sum of the charges).
    pub fn spent_delta(&self) -> f64 {
        self.spent_delta
    }

    /// Number of releases charged.
    pub fn releases(&self) -> u64 {
        self.releases
    }

    /// (ε, δ) still available, rounded down.
    pub fn remaining(&self) -> (f64, f64) {
        (
            sub_down(self.total_epsilon(), self.spent_epsilon).max(0.0),
            sub_down(self.total_delta(), self.spent_delta).max(0.0),
        )
    }

    /// The state after charging `charge`, or the refusal (unit first, then
    /// the totals, then the release counter).
    pub(crate) fn after(&self, charge: &Charge) -> Result<Self> {
        if charge.unit() != self.unit() {
            return Err(Error::UnitMismatch {
                ledger: self.unit().clone(),
                charge: Some(charge.unit().clone()),
            });
        }
        let (epsilon, delta) = (charge.epsilon(), charge.delta());
        let e = add_up(self.spent_epsilon, epsilon);
        let d = add_up(self.spent_delta, delta);
        if e > self.total_epsilon() || d > self.total_delta() {
            let (remaining_epsilon, remaining_delta) = self.remaining();
            return Err(Error::BudgetExceeded {
                requested_epsilon: epsilon,
                remaining_epsilon,
                requested_delta: delta,
                remaining_delta,
            });
        }
        let releases = self
            .releases
            .checked_add(1)
            .ok_or_else(|| invalid("the release counter would overflow"))?;
        Ok(Self {
            policy: self.policy.clone(),
            spent_epsilon: e,
            spent_delta: d,
            releases,
        })
    }

    /// Whether `charge` would be accepted now.
    pub fn can_afford(&self, charge: &Charge) -> bool {
        self.after(charge).is_ok()
    }

    /// Charge a release. Refused with [`Error::UnitMismatch`] or
    /// [`Error::BudgetExceeded`] if it is in another unit or would exceed
    /// the totals; a refused charge leaves the ledger unchanged.
    ///
    /// Charge *before* releasing. Prefer [`Ledger::spend`], which ties the
    /// charge to the release.
    pub fn try_charge(&mut self, charge: &Charge) -> Result<()> {
        *self = self.after(charge)?;
        Ok(())
    }

    /// The largest (ε, δ) share (up to a relative 2^-40 or so) such that
    /// `releases` charges of it fit the remaining budget, checked by
    /// replaying the charges with this ledger's rounding. `None` if
    /// `releases` is 0 or nothing is left.
    pub fn even_split(&self, releases: u64) -> Option<(f64, f64)> {
        if releases == 0 {
            return None;
        }
        let (re, rd) = self.remaining();
        let n = releases as f64;
        let mut shrink = 0.0;
        for _ in 0..16 {
            let e = re / n * (1.0 - shrink);
            let d = rd / n * (1.0 - shrink);
            let charge = Charge::new(self.unit().clone(), e, d).ok()?;
            let mut probe = self.clone();
            if (0..releases).all(|_| probe.try_charge(&charge).is_ok()) {
                return Some((e, d));
            }
            shrink = if shrink == 0.0 {
                f64::EPSILON
            } else {
                shrink * 4.0
            };
        }
        None
    }
}

impl Ledger for PrivacyBudget {
    fn state(&self) -> &PrivacyBudget {
        self
    }

    fn commit(&mut self, charge: &Charge) -> Result<()> {
        self.try_charge(charge)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn budget(total_epsilon: f64, total_delta: f64) -> PrivacyBudget {
        PrivacyBudget::new(
            BudgetPolicy::new(BudgetUnit::PerMetre, total_epsilon, total_delta).unwrap(),
        )
    }

    fn charge(epsilon: f64, delta: f64) -> Charge {
        Charge::new(BudgetUnit::PerMetre, epsilon, delta).unwrap()
    }

    #[test]
    fn rounding_helpers_bound_the_exact_result() {
        // 0.1 + 0.2 rounds up to 0.30000000000000004, already above the
        // exact sum: add_up keeps it.
        let s = add_up(0.1, 0.2);
        assert_eq!(s, 0.1 + 0.2);
        // 1 + 2^-60 rounds to 1; the upper bound is the next double.
        assert_eq!(add_up(1.0, 2f64.powi(-60)), 1.0 + f64::EPSILON);
        assert_eq!(sub_down(1.0, 2f64.powi(-60)), 1.0 - f64::EPSILON / 2.0);
        assert_eq!(sub_down(1.0, 0.25), 0.75);
    }

    #[test]
    fn ten_tenths_do_not_fit_one_but_even_split_does() {
        let mut b = budget(1.0, 0.0);
        let mut ok = 0;
        while b.try_charge(&charge(0.1, 0.0)).is_ok() {
            ok += 1;
        }
        assert_eq!(ok, 9);
        let mut b = budget(1.0, 1e-6);
        let (e, d) = b.even_split(10).unwrap();
        assert!(e > 0.1 * (1.0 - 1e-12) && d > 1e-7 * (1.0 - 1e-12));
        for _ in 0..10 {
            b.try_charge(&charge(e, d)).unwrap();
        }
        assert!(b.try_charge(&charge(e, 0.0)).is_err());
        assert!(b.spent_epsilon() <= 1.0);
    }

    #[test]
    fn other_units_are_refused_and_nothing_changes() {
        let mut b = budget(1.0, 0.0);
        let before = b.clone();
        for unit in [
            BudgetUnit::LocalDp,
            BudgetUnit::PerDollar,
            BudgetUnit::custom("per-km").unwrap(),
        ] {
            let e = b.try_charge(&Charge::new(unit, 0.1, 0.0).unwrap());
            assert!(matches!(e, Err(Error::UnitMismatch { .. })), "{e:?}");
        }
        assert_eq!(b, before);
    }

    #[test]
    fn restore_checks_the_pinned_policy_and_the_state() {
        let mut b = budget(0.01, 1e-6);
        b.try_charge(&charge(0.003, 1e-7)).unwrap();
        let json = b.to_json();
        assert_eq!(PrivacyBudget::restore(&json, b.policy()).unwrap(), b);
        let other = |u, e, d| BudgetPolicy::new(u, e, d).unwrap();
        for (policy, field) in [
            (other(BudgetUnit::PerDollar, 0.01, 1e-6), "unit"),
            (other(BudgetUnit::PerMetre, 0.02, 1e-6), "total_epsilon"),
            (other(BudgetUnit::PerMetre, 0.01, 0.0), "total_delta"),
        ] {
            match PrivacyBudget::restore(&json, &policy) {
                Err(Error::LedgerPolicyMismatch { field: f, .. }) => assert_eq!(f, field),
                other => panic!("{field}: {other:?}"),
            }
        }
        for bad in [
            json.replace("\"spent_epsilon\":0.003", "\"spent_epsilon\":0.5"),
            json.replace("\"spent_epsilon\":0.003", "\"spent_epsilon\":-0.1"),
            json.replace("\"spent_epsilon\":0.003", "\"spent_epsilon\":0.0"),
            json.replace("\"releases\":1", "\"releases\":0"),
            json.replace("\"spent_delta\":1e-7", "\"spent_delta\":1e-5"),
            json.replace("\"format\":1", "\"format\":2"),
            json.replace("\"releases\":1", "\"releases\":1,\"x\":1"),
            json.replace("0.003", "NaN"),
            String::new(),
            "{}".to_string(),
        ] {
            assert_ne!(bad, json, "test case did not apply");
            assert!(
                matches!(
                    PrivacyBudget::restore(&bad, b.policy()),
                    Err(Error::InvalidLedgerState { .. })
                ),
                "{bad}"
            );
        }
        // A counter at its maximum cannot overflow.
        let full = json.replace("\"releases\":1", &format!("\"releases\":{}", u64::MAX));
        let mut b = PrivacyBudget::restore(&full, b.policy()).unwrap();
        assert!(matches!(
            b.try_charge(&charge(1e-6, 0.0)),
            Err(Error::InvalidLedgerState { .. })
        ));
    }
}
