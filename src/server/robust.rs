//! A robust alternative to the mean: the median of means
//! (docs/MATH.md §10).
//!
//! Reports are dealt round-robin into K buckets; the estimate is the median
//! of the K bucket means. Up to ⌈K/2⌉ − 1 buckets can be poisoned
//! arbitrarily without moving it outside the range of the honest bucket
//! means. Its stated bias: if med > μ, at least half of the bucket means
//! are >= med, so |med − μ| <= (2/K) Σ_j |M_j − μ| and
//!
//! ```text
//! |E[med] − μ| <= 2 E|M_j − μ| <= 2 sd(M_j),
//! ```
//!
//! distribution-free; [`RobustEstimate::bias_bound`] is 2 × a robust
//! estimate of sd(M_j): 1.4826 × the median absolute deviation of the bucket
//! means (consistent for near-normal means, and not blown up by the
//! poisoned buckets the median is there to ignore). (For bucket means close to
//! normal the bias is far smaller, of order skewness × sd(M_j)/√m.)
//!
//! Bucket sums are f64 with Neumaier compensation: meant for clipped values
//! ([`crate::server::clip`]), whose sums are bounded and well conditioned.
//!
//! ```
//! use geopriv::server::robust::MedianOfMeans;
//!
//! let mut mom = MedianOfMeans::new(4)?;
//! for v in [1.0, 2.0, 3.0, 4.0, 1.0, 2.0, 3.0, 1e12] {
//!     mom.add(v)?;
//! }
//! let e = mom.estimate().unwrap();
//! assert!(e.median_of_means < 10.0); // the 1e12 poisons one bucket only
//! # Ok::<(), geopriv::Error>(())
//! ```

use crate::error::{Error, Result};
use alloc::vec;
use alloc::vec::Vec;
use serde::{Deserialize, Serialize};

/// The largest number of buckets.
pub const MAX_BUCKETS: u32 = 1024;
/// The default number of buckets: 16.
pub const DEFAULT_BUCKETS: u32 = 16;

/// Median-of-means accumulator (module docs).
#[derive(Clone, Debug, PartialEq)]
pub struct MedianOfMeans {
    counts: Vec<u64>,
    sums: Vec<f64>,
    compensation: Vec<f64>,
    next: usize,
}

/// The median-of-means estimate and its error statements.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct RobustEstimate {
    /// Number of buckets K.
    pub buckets: u32,
    /// The median of the K bucket means.
    pub median_of_means: f64,
    /// Robust standard deviation of the bucket means: 1.4826 × their
    /// median absolute deviation.
    pub bucket_sd: f64,
    /// sqrt(π/2) · bucket_sd / sqrt(K): the standard error of a median of
    /// K near-normal means.
    pub standard_error: f64,
    /// 2 · bucket_sd: the distribution-free bound on |bias| (module docs).
    pub bias_bound: f64,
}

impl MedianOfMeans {
    /// K buckets, 2 <= K <= [`MAX_BUCKETS`].
    pub fn new(buckets: u32) -> Result<Self> {
        if !(2..=MAX_BUCKETS).contains(&buckets) {
            return Err(Error::InvalidParameter {
                name: "buckets",
                value: buckets as f64,
                requirement: "between 2 and 1024",
            });
        }
        let k = buckets as usize;
        Ok(Self {
            counts: vec![0; k],
            sums: vec![0.0; k],
            compensation: vec![0.0; k],
            next: 0,
        })
    }

    /// Add a finite value to the next bucket (round robin).
    pub fn add(&mut self, value: f64) -> Result<()> {
        crate::error::finite("value", value)?;
        let b = self.next;
        self.counts[b] = self.counts[b].checked_add(1).ok_or(Error::Overflow {
            what: "median-of-means bucket count",
        })?;
        let s = self.sums[b];
        let t = s + value;
        self.compensation[b] += if s.abs() >= value.abs() {
            (s - t) + value
        } else {
            (value - t) + s
        };
        self.sums[b] = t;
        self.next = (b + 1) % self.counts.len();
        Ok(())
    }

    /// The estimate once every bucket holds a value (n >= K), else None.
    pub fn estimate(&self) -> Option<RobustEstimate> {
        if self.counts.contains(&0) {
            return None;
        }
        let mut means: Vec<f64> = self
            .counts
            .iter()
            .zip(self.sums.iter().zip(&self.compensation))
            .map(|(&n, (&s, &c))| (s + c) / n as f64)
            .collect();
        let k = means.len();
        let median_of = |v: &mut Vec<f64>| {
            v.sort_by(f64::total_cmp);
            if k % 2 == 1 {
                v[k / 2]
            } else {
                0.5 * (v[k / 2 - 1] + v[k / 2])
            }
        };
        let median = median_of(&mut means);
        let mut deviations: Vec<f64> = means.iter().map(|m| (m - median).abs()).collect();
        let sd = 1.4826 * median_of(&mut deviations);
        Some(RobustEstimate {
            buckets: k as u32,
            median_of_means: median,
            bucket_sd: sd,
            standard_error: libm::sqrt(core::f64::consts::FRAC_PI_2) * sd / libm::sqrt(k as f64),
            bias_bound: 2.0 * sd,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn resists_a_minority_of_poisoned_buckets() {
        let mut m = MedianOfMeans::new(5).unwrap();
        for i in 0..1000 {
            let v = if i % 5 == 0 {
                1e300
            } else {
                (i % 7) as f64 / 7.0
            };
            m.add(v).unwrap();
        }
        let e = m.estimate().unwrap();
        assert!(e.median_of_means.abs() < 1.0, "{e:?}");
        assert!(MedianOfMeans::new(1).is_err());
        assert!(MedianOfMeans::new(MAX_BUCKETS + 1).is_err());
        assert!(MedianOfMeans::new(3).unwrap().estimate().is_none());
        assert!(m.add(f64::NAN).is_err());
    }
}
