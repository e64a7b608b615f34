//! Report schedules and their planner (`docs/MATH.md §12.2`).
//!
//! A device reports in period t iff b_t = 1, where b_t is a function of the
//! device secret k and t **only**, never of x:
//!
//! * [`Schedule::Bernoulli`]: b_t = [U(PRF_k("schedule", t)) < p], each
//!   period independently with probability p;
//! * [`Schedule::FixedSlot`]: one period in s, at the slot
//!   σ = PRF_k("slot", s) mod s: b_t = [t mod s = σ]; exactly ⌈(T − σ)/s⌉
//!   reports in T periods, the same count for every device up to one.
//!
//! The set of reporting periods is independent of the data, so it reveals
//! nothing; the lifetime charge is ε per report × reports sent
//! (`ε_life = ε · Σ_t b_t`, metered by the ledger as usual).
//!
//! [`plan`] picks p and ε per report for N devices, T periods and a
//! lifetime budget C under the model Var(report) = Var f + c/ε²
//! (`docs/MATH.md §12.2`): p* = (C/T)·sqrt(Var f / c) capped to [1/T, 1].
//!
//! ```
//! use geopriv::device::schedule::{plan, PlanInput, Schedule};
//! let input = PlanInput { devices: 1_000_000, periods: 365, lifetime_epsilon: 3.0,
//!                         value_variance: 0.25, noise_constant: 9.0 };
//! let p = plan(&input)?;
//! assert_eq!(p.schedule, Schedule::FixedSlot { every: 365 }); // one report a year at ε = C
//! assert!(p.variance_per_period < p.fresh_variance_per_period / 100.0);
//! let secret = [5u8; 32];
//! let days = (0..365).filter(|&t| p.schedule.reports_in(&secret, t)).count();
//! assert_eq!(days, 1);
//! # Ok::<(), geopriv::Error>(())
//! ```

use crate::device::memo::{prf, unit_uniform};
use crate::error::{positive_finite, Error, Result};
use crate::mechanism::Mechanism;
use crate::query::Query;

/// A data-independent report schedule (module docs).
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Schedule {
    /// Each period independently with probability `p` ∈ (0, 1].
    Bernoulli {
        /// p.
        p: f64,
    },
    /// One period in `every` (>= 1), at a secret slot.
    FixedSlot {
        /// s.
        every: u64,
    },
}

impl Schedule {
    /// [`Schedule::Bernoulli`], p ∈ (0, 1].
    pub fn bernoulli(p: f64) -> Result<Self> {
        if p > 0.0 && p <= 1.0 {
            Ok(Schedule::Bernoulli { p })
        } else {
            Err(Error::InvalidParameter {
                name: "p",
                value: p,
                requirement: "in (0, 1]",
            })
        }
    }

    /// [`Schedule::FixedSlot`], s >= 1.
    pub fn fixed_slot(every: u64) -> Result<Self> {
        if every >= 1 {
            Ok(Schedule::FixedSlot { every })
        } else {
            Err(Error::InvalidParameter {
                name: "every",
                value: 0.0,
                requirement: "at least 1",
            })
        }
    }

    /// Whether the device with secret `secret` reports in period `t`: a
    /// function of (secret, t) only.
    pub fn reports_in(&self, secret: &[u8; 32], t: u64) -> bool {
        match *self {
            Schedule::Bernoulli { p } => {
                p >= 1.0 || unit_uniform(&prf(secret, &[b"schedule", &t.to_le_bytes()])) < p
            }
            Schedule::FixedSlot { every } => t % every == self.slot(secret),
        }
    }

    /// The secret slot σ of a fixed-slot schedule (0 for Bernoulli).
    pub fn slot(&self, secret: &[u8; 32]) -> u64 {
        match *self {
            Schedule::FixedSlot { every } => {
                let b = prf(secret, &[b"slot", &every.to_le_bytes()]);
                let mut first = [0u8; 8];
                first.copy_from_slice(&b[..8]);
                // Bias at most every/2^64.
                u64::from_le_bytes(first) % every
            }
            Schedule::Bernoulli { .. } => 0,
        }
    }

    /// The reporting probability per period (p, or 1/s).
    pub fn probability(&self) -> f64 {
        match *self {
            Schedule::Bernoulli { p } => p,
            Schedule::FixedSlot { every } => 1.0 / every as f64,
        }
    }

    /// The most reports one device can send in `periods` periods: T for
    /// Bernoulli (the ledger's cap is what bounds it), ⌈T/s⌉ for a slot.
    pub fn max_reports(&self, periods: u64) -> u64 {
        match *self {
            Schedule::Bernoulli { .. } => periods,
            Schedule::FixedSlot { every } => periods.div_ceil(every),
        }
    }
}

/// What the planner needs.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct PlanInput {
    /// N devices.
    pub devices: u64,
    /// T periods.
    pub periods: u64,
    /// C, the lifetime budget per device (per unit of the query).
    pub lifetime_epsilon: f64,
    /// Var f over the population (<= 1/4 for a share). Must come from
    /// public information (the bound 1/4, a prior, an earlier *private*
    /// estimate), never from the devices' raw values: the plan fixes every
    /// device's reporting periods and ε per report, which must not depend
    /// on x (`docs/MATH.md §12.2`).
    pub value_variance: f64,
    /// c in the model noise variance = c/ε² (see [`noise_constant`]).
    pub noise_constant: f64,
}

/// The planner's choice.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Plan {
    /// p* = (C/T)·sqrt(Var f / c) capped to [1/T, 1].
    pub p: f64,
    /// The schedule used: one period in s = round(1/p*).
    pub schedule: Schedule,
    /// ε per report = C / ⌈T/s⌉ (the lifetime budget spread exactly).
    pub epsilon_per_report: f64,
    /// Reports per device, ⌈T/s⌉.
    pub reports_per_device: u64,
    /// Predicted variance of one period's estimate:
    /// (Var f + c/ε²) / (N/s).
    pub variance_per_period: f64,
    /// The same for fresh releases every period at ε = C/T: (Var f·0 +
    /// c (T/C)²)/N (every device reports, so the population spread does
    /// not enter the error against the population mean).
    pub fresh_variance_per_period: f64,
}

/// The planner of `docs/MATH.md §12.2`. With the fixed-slot schedule of
/// period s the per-period variance is s·Var f/N + c T²/(C² s N),
/// minimised at s* = (T/C)·sqrt(c/Var f), i.e. p* = (C/T)·sqrt(Var f/c),
/// capped to [1/T, 1]; s is rounded to the better of ⌊1/p*⌋ and ⌈1/p*⌉.
pub fn plan(input: &PlanInput) -> Result<Plan> {
    let c_life = positive_finite("lifetime_epsilon", input.lifetime_epsilon)?;
    let c = positive_finite("noise_constant", input.noise_constant)?;
    let var_f = input.value_variance;
    if !(var_f.is_finite() && var_f >= 0.0) {
        return Err(Error::InvalidParameter {
            name: "value_variance",
            value: var_f,
            requirement: "finite and >= 0",
        });
    }
    if input.devices == 0 || input.periods == 0 {
        return Err(Error::InvalidParameter {
            name: "devices",
            value: 0.0,
            requirement: "devices and periods >= 1",
        });
    }
    let (n, t) = (input.devices as f64, input.periods as f64);
    let p = ((c_life / t) * libm::sqrt(var_f / c)).clamp(1.0 / t, 1.0);
    let predict = |s: u64| {
        let k = input.periods.div_ceil(s);
        let eps = c_life / k as f64;
        let reporters = (n / s as f64).max(1.0);
        (eps, k, (var_f + c / (eps * eps)) / reporters)
    };
    let lo = (libm::floor(1.0 / p) as u64).clamp(1, input.periods);
    let hi = (libm::ceil(1.0 / p) as u64).clamp(1, input.periods);
    let s = if predict(hi).2 < predict(lo).2 {
        hi
    } else {
        lo
    };
    let (epsilon_per_report, reports_per_device, variance_per_period) = predict(s);
    let eps_fresh = c_life / t;
    Ok(Plan {
        p,
        schedule: Schedule::FixedSlot { every: s },
        epsilon_per_report,
        reports_per_device,
        variance_per_period,
        fresh_variance_per_period: c / (eps_fresh * eps_fresh) / n,
    })
}

/// c of the model noise variance c/ε² for `mechanism`'s family on `query`:
/// the variance of one report at ε = 1 and the *global* sensitivity (an
/// upper bound for the smooth mechanisms, whose S(x) <= L_global: their
/// noise shrinks away from where f changes, so c overstates it there; the
/// scale is 1/ε times a constant for every mechanism, so variance·ε² is
/// constant). `None` for noise a priori and infinite-variance noises.
pub fn noise_constant<Q: Query + ?Sized>(mechanism: &Mechanism, query: &Q) -> Option<f64> {
    let at_one = Mechanism::from_name(
        mechanism.name(),
        crate::mechanism::MechanismParams::new(1.0, mechanism.delta()),
    )
    .ok()?;
    let sensitivity = if mechanism.name() == crate::MechanismName::Ldp {
        let (lo, hi) = query.value_bounds();
        hi - lo
    } else {
        query.global_lipschitz()
    };
    at_one.report_variance(sensitivity)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::query::SoftThreshold;

    #[test]
    fn schedules_are_functions_of_the_secret_and_period() {
        let s1 = [1u8; 32];
        let s2 = [2u8; 32];
        let b = Schedule::bernoulli(0.3).unwrap();
        let days: Vec<bool> = (0..1000).map(|t| b.reports_in(&s1, t)).collect();
        let again: Vec<bool> = (0..1000).map(|t| b.reports_in(&s1, t)).collect();
        assert_eq!(days, again);
        let k = days.iter().filter(|&&d| d).count();
        assert!((240..360).contains(&k), "{k}");
        let other: Vec<bool> = (0..1000).map(|t| b.reports_in(&s2, t)).collect();
        assert_ne!(days, other);
        let f = Schedule::fixed_slot(7).unwrap();
        let slot_days: Vec<u64> = (0..70).filter(|&t| f.reports_in(&s1, t)).collect();
        assert_eq!(slot_days.len(), 10);
        assert!(slot_days.windows(2).all(|w| w[1] - w[0] == 7));
        assert_eq!(f.max_reports(70), 10);
        assert!(Schedule::bernoulli(0.0).is_err() && Schedule::fixed_slot(0).is_err());
        assert!(Schedule::bernoulli(1.0).unwrap().reports_in(&s1, 5));
    }

    #[test]
    fn planner_matches_the_closed_form_and_caps() {
        let q = SoftThreshold::new(0.0, 1.0).unwrap();
        let m = Mechanism::global_laplace(1.0).unwrap();
        // Global Laplace, L = 1: Var = 2/ε².
        assert!((noise_constant(&m, &q).unwrap() - 2.0).abs() < 1e-12);
        let base = PlanInput {
            devices: 10_000,
            periods: 100,
            lifetime_epsilon: 50.0,
            value_variance: 0.08,
            noise_constant: 2.0,
        };
        // p* = 0.5 · 0.2 = 0.1: one period in 10, 10 reports at ε = 5.
        let p = plan(&base).unwrap();
        assert!((p.p - 0.1).abs() < 1e-12);
        assert_eq!(p.schedule, Schedule::FixedSlot { every: 10 });
        assert_eq!(p.reports_per_device, 10);
        assert!((p.epsilon_per_report - 5.0).abs() < 1e-12);
        // The prediction is the minimum over every slot period.
        for s in 1..=100u64 {
            let k = 100u64.div_ceil(s) as f64;
            let eps = 50.0 / k;
            let v = (0.08 + 2.0 / (eps * eps)) / (10_000.0 / s as f64);
            assert!(p.variance_per_period <= v * (1.0 + 1e-12), "s = {s}");
        }
        // Caps: a tiny budget → one report; a huge one → every period.
        let tiny = plan(&PlanInput {
            lifetime_epsilon: 0.01,
            ..base
        })
        .unwrap();
        assert_eq!(tiny.schedule, Schedule::FixedSlot { every: 100 });
        let huge = plan(&PlanInput {
            lifetime_epsilon: 1e6,
            ..base
        })
        .unwrap();
        assert_eq!(huge.schedule, Schedule::FixedSlot { every: 1 });
        assert!(plan(&PlanInput { devices: 0, ..base }).is_err());
        assert!(plan(&PlanInput {
            value_variance: f64::NAN,
            ..base
        })
        .is_err());
    }
}
