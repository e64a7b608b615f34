//! Per-period estimates of a longitudinal deployment (`docs/MATH.md §12.5`).
//!
//! Devices report in a data-independent subset of periods (schedules,
//! `crate::device::schedule`), so period t has its own number of reports
//! n_t. The estimate of the population mean in period t is the mean of
//! that period's reports, unbiased because the reporting devices are a
//! sample chosen independently of the data; its standard error uses the
//! period's own n_t: se_t = sqrt(var̂_t / n_t). A population total is N
//! times the mean (se times N): [`PeriodEstimate::total`].
//!
//! **Which standard error.** se_t is the *marginal* error of one period.
//! With memoization a device re-sends the same report while it stays in
//! a cell, so two periods' estimates share most of their noise: the
//! difference of two periods has a smaller variance than se_s² + se_t²,
//! which is an upper bound for it (and exact only for independent
//! periods). [`PeriodEstimate::kind`] says which one a caller holds.
//!
//! ```
//! use geopriv::server::periods::PeriodAggregator;
//! let mut a = PeriodAggregator::new();
//! for (t, v) in [(0, 0.2), (0, 0.4), (1, 1.0), (1, 0.0), (1, 0.5)] {
//!     a.add(t, v)?;
//! }
//! let est = a.estimates();
//! assert_eq!(est[0].n, 2);
//! assert!((est[1].mean - 0.5).abs() < 1e-15);
//! assert!(est[1].standard_error.is_some());
//! assert_eq!(est[1].total(1000.0).0, 500.0);
//! # Ok::<(), geopriv::Error>(())
//! ```

use crate::error::{Error, Result};
use crate::server::aggregate::Aggregator;
use alloc::collections::BTreeMap;
use alloc::vec::Vec;

/// The most periods one aggregator holds (bounded memory).
pub const MAX_PERIODS: usize = 1 << 20;

/// Which standard error a [`PeriodEstimate`] states.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum StandardErrorKind {
    /// The marginal error of one period from its own n_t (an upper bound
    /// for differences only when periods share devices' reports).
    Marginal,
}

/// One period's estimate.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct PeriodEstimate {
    /// The period t.
    pub period: u64,
    /// n_t, the reports of this period.
    pub n: u64,
    /// Mean of the period's reports: unbiased for the population mean.
    pub mean: f64,
    /// sqrt(var̂_t / n_t); None for n_t < 2.
    pub standard_error: Option<f64>,
    /// What the standard error is.
    pub kind: StandardErrorKind,
}

impl PeriodEstimate {
    /// The population total for N devices: (N·mean, N·se).
    pub fn total(&self, devices: f64) -> (f64, Option<f64>) {
        (
            devices * self.mean,
            self.standard_error.map(|s| s * devices),
        )
    }
}

/// Exactly mergeable per-period sums (one [`Aggregator`] per period).
#[derive(Clone, Debug, Default)]
pub struct PeriodAggregator {
    periods: BTreeMap<u64, Aggregator>,
}

impl PeriodAggregator {
    /// An empty aggregator.
    pub fn new() -> Self {
        Self::default()
    }

    /// Add one report of period `period`. Refused for a non-finite value
    /// or beyond [`MAX_PERIODS`] distinct periods.
    pub fn add(&mut self, period: u64, value: f64) -> Result<()> {
        if !self.periods.contains_key(&period) && self.periods.len() >= MAX_PERIODS {
            return Err(Error::LimitExceeded {
                what: "periods",
                requested: self.periods.len() as u64 + 1,
                limit: MAX_PERIODS as u64,
            });
        }
        self.periods.entry(period).or_default().add(value)
    }

    /// Merge another aggregator (exact, any order).
    pub fn merge(&mut self, other: &PeriodAggregator) -> Result<()> {
        for (t, a) in &other.periods {
            if !self.periods.contains_key(t) && self.periods.len() >= MAX_PERIODS {
                return Err(Error::LimitExceeded {
                    what: "periods",
                    requested: self.periods.len() as u64 + 1,
                    limit: MAX_PERIODS as u64,
                });
            }
            self.periods.entry(*t).or_default().merge(a)?;
        }
        Ok(())
    }

    /// The estimate of every period that has a report, in period order.
    pub fn estimates(&self) -> Vec<PeriodEstimate> {
        self.periods
            .iter()
            .filter_map(|(&period, a)| {
                a.estimate().map(|e| PeriodEstimate {
                    period,
                    n: e.n,
                    mean: e.mean,
                    standard_error: e.standard_error,
                    kind: StandardErrorKind::Marginal,
                })
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::device::schedule::Schedule;
    use rand::rngs::StdRng;
    use rand::{Rng, SeedableRng};

    #[test]
    fn sampled_periods_are_unbiased_with_honest_errors() {
        // 4000 devices, f = 1 for 30% of them, Bernoulli(0.25) schedule:
        // each period's mean is within 4.5 se of 0.3.
        let mut rng = StdRng::seed_from_u64(1);
        let devices: Vec<([u8; 32], f64)> = (0..4000)
            .map(|i| {
                let mut s = [0u8; 32];
                rng.fill(&mut s);
                (s, if i % 10 < 3 { 1.0 } else { 0.0 })
            })
            .collect();
        let sched = Schedule::bernoulli(0.25).unwrap();
        let mut agg = PeriodAggregator::new();
        for t in 0..20 {
            for (s, f) in &devices {
                if sched.reports_in(s, t) {
                    agg.add(t, *f).unwrap();
                }
            }
        }
        let est = agg.estimates();
        assert_eq!(est.len(), 20);
        for e in est {
            assert!((800..1200).contains(&e.n), "{}", e.n);
            let se = e.standard_error.unwrap();
            assert!((e.mean - 0.3).abs() < 4.5 * se, "{e:?}");
        }
        assert!(agg.add(0, f64::NAN).is_err());
    }
}
