//! The device's privacy-budget ledger.
//!
//! # Sequential composition
//!
//! If a device makes releases M_1, …, M_k about the same private x, each
//! (ε_i, δ_i)-GP, the whole sequence is (Σ ε_i, Σ δ_i)-GP: for any x, x'
//! the i-th release is (ε_i·d(x, x'), δ_i)-indistinguishable, and basic
//! composition of indistinguishability adds the exponents (the pure
//! density ratios multiply: Π exp(ε_i d) = exp(d Σ ε_i)) and the δs. So an
//! observer who sees all k releases can change their odds between two
//! places d apart by at most exp(d Σ ε_i) (plus Σ δ_i). [`PrivacyBudget`]
//! enforces a cap on both sums: every release is charged before it leaves
//! the device, and one that would exceed the cap is refused and nothing is
//! released.
//!
//! The ledger counts one kind of ε: per unit distance, in one metric (per
//! projected metre, per dollar…). Local-DP releases
//! ([`MechanismName::Ldp`](crate::report::MechanismName::Ldp)) and queries
//! in other units need their own ledger.
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
//! use geopriv::budget::PrivacyBudget;
//!
//! let mut budget = PrivacyBudget::new(1.0 / 100.0, 0.0)?; // ε = 0.01 per metre in all
//! let (eps, _) = budget.even_split(4).unwrap();
//! for _ in 0..4 {
//!     let release = budget.spend(eps, 0.0, || Ok(42.0 /* privatize here */))?;
//!     # let _ = release;
//! }
//! assert!(budget.try_charge(eps, 0.0).is_err()); // a fifth release is refused
//! # Ok::<(), geopriv::Error>(())
//! ```

use crate::error::{positive_finite, Error, Result};
use serde::{Deserialize, Serialize};

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

fn check_delta(name: &'static str, delta: f64, max: f64) -> Result<f64> {
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

/// A ledger of the privacy spent by one device about one secret: a total
/// ε (per unit distance) and δ, and what has been charged so far by
/// sequential composition (see the [module docs](self)).
///
/// Serializable (serde) so an app can persist it across restarts; a
/// deserialized ledger is checked (spent within the totals).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(try_from = "BudgetState", into = "BudgetState")]
pub struct PrivacyBudget {
    total_epsilon: f64,
    total_delta: f64,
    spent_epsilon: f64,
    spent_delta: f64,
    releases: u64,
}

/// Persisted form of a [`PrivacyBudget`].
#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct BudgetState {
    total_epsilon: f64,
    total_delta: f64,
    spent_epsilon: f64,
    spent_delta: f64,
    releases: u64,
}

impl From<PrivacyBudget> for BudgetState {
    fn from(b: PrivacyBudget) -> Self {
        BudgetState {
            total_epsilon: b.total_epsilon,
            total_delta: b.total_delta,
            spent_epsilon: b.spent_epsilon,
            spent_delta: b.spent_delta,
            releases: b.releases,
        }
    }
}

impl TryFrom<BudgetState> for PrivacyBudget {
    type Error = Error;
    fn try_from(s: BudgetState) -> Result<Self> {
        let mut b = PrivacyBudget::new(s.total_epsilon, s.total_delta)?;
        if !(s.spent_epsilon.is_finite() && (0.0..=b.total_epsilon).contains(&s.spent_epsilon)) {
            return Err(Error::InvalidParameter {
                name: "spent_epsilon",
                value: s.spent_epsilon,
                requirement: "finite and in [0, total_epsilon]",
            });
        }
        check_delta("spent_delta", s.spent_delta, b.total_delta)?;
        b.spent_epsilon = s.spent_epsilon;
        b.spent_delta = s.spent_delta;
        b.releases = s.releases;
        Ok(b)
    }
}

impl PrivacyBudget {
    /// A fresh ledger allowing `total_epsilon` (finite, > 0) and
    /// `total_delta` (finite, in [0, 1)) in all.
    pub fn new(total_epsilon: f64, total_delta: f64) -> Result<Self> {
        let total_epsilon = positive_finite("total_epsilon", total_epsilon)?;
        if !(total_delta.is_finite() && (0.0..1.0).contains(&total_delta)) {
            return Err(Error::InvalidParameter {
                name: "total_delta",
                value: total_delta,
                requirement: "finite and in [0, 1)",
            });
        }
        Ok(Self {
            total_epsilon,
            total_delta,
            spent_epsilon: 0.0,
            spent_delta: 0.0,
            releases: 0,
        })
    }

    /// The total ε.
    pub fn total_epsilon(&self) -> f64 {
        self.total_epsilon
    }

    /// The total δ.
    pub fn total_delta(&self) -> f64 {
        self.total_delta
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
            sub_down(self.total_epsilon, self.spent_epsilon).max(0.0),
            sub_down(self.total_delta, self.spent_delta).max(0.0),
        )
    }

    /// The totals after charging (ε, δ), or the refusal.
    fn after(&self, epsilon: f64, delta: f64) -> Result<(f64, f64)> {
        positive_finite("epsilon", epsilon)?;
        check_delta("delta", delta, 1.0)?;
        let e = add_up(self.spent_epsilon, epsilon);
        let d = add_up(self.spent_delta, delta);
        if e > self.total_epsilon || d > self.total_delta {
            let (remaining_epsilon, remaining_delta) = self.remaining();
            return Err(Error::BudgetExceeded {
                requested_epsilon: epsilon,
                remaining_epsilon,
                requested_delta: delta,
                remaining_delta,
            });
        }
        Ok((e, d))
    }

    /// Whether a release with (ε, δ) would be allowed now.
    pub fn can_afford(&self, epsilon: f64, delta: f64) -> bool {
        self.after(epsilon, delta).is_ok()
    }

    /// Charge a release of (ε, δ): ε finite and > 0, δ finite in [0, 1].
    /// Refused with [`Error::BudgetExceeded`] (or
    /// [`Error::InvalidParameter`]) if it would exceed the totals; a refused
    /// charge leaves the ledger unchanged.
    ///
    /// Charge *before* releasing. Prefer [`spend`](Self::spend), which ties
    /// the charge to the release.
    pub fn try_charge(&mut self, epsilon: f64, delta: f64) -> Result<()> {
        let (e, d) = self.after(epsilon, delta)?;
        self.spent_epsilon = e;
        self.spent_delta = d;
        self.releases += 1;
        Ok(())
    }

    /// Run `release` under a charge of (ε, δ):
    ///
    /// * if the budget cannot afford it, `release` is **not run** and the
    ///   refusal is returned: nothing is released;
    /// * if `release` succeeds, the charge is recorded and its value
    ///   returned: no release without a charge;
    /// * if `release` fails, nothing was released, so nothing is charged.
    ///
    /// `release` must only *compute* the privatized value; publish the
    /// returned value afterwards. (If it published something and then
    /// failed, that release would be uncharged.)
    pub fn spend<T>(
        &mut self,
        epsilon: f64,
        delta: f64,
        release: impl FnOnce() -> Result<T>,
    ) -> Result<T> {
        let (e, d) = self.after(epsilon, delta)?;
        let value = release()?;
        self.spent_epsilon = e;
        self.spent_delta = d;
        self.releases += 1;
        Ok(value)
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
            if e.is_nan() || e <= 0.0 {
                return None;
            }
            let mut probe = self.clone();
            if (0..releases).all(|_| probe.try_charge(e, d).is_ok()) {
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

#[cfg(test)]
mod tests {
    use super::*;

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
        let mut b = PrivacyBudget::new(1.0, 0.0).unwrap();
        let mut ok = 0;
        while b.try_charge(0.1, 0.0).is_ok() {
            ok += 1;
        }
        assert_eq!(ok, 9);
        let mut b = PrivacyBudget::new(1.0, 1e-6).unwrap();
        let (e, d) = b.even_split(10).unwrap();
        assert!(e > 0.1 * (1.0 - 1e-12) && d > 1e-7 * (1.0 - 1e-12));
        for _ in 0..10 {
            b.try_charge(e, d).unwrap();
        }
        assert!(b.try_charge(e, 0.0).is_err());
        assert!(b.spent_epsilon() <= 1.0);
    }
}
