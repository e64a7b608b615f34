//! The simulated-population experiments' inner loop, shared by the
//! threshold and the two-way experiments: draw a chunk of households,
//! answer every query with every mechanism, and add the sums up in chunk
//! order (so a run's numbers do not depend on the number of threads).
//!
//! A [`Family`] says how a household is drawn and what the hard (true)
//! answer of a query is; a [`Job`] is one (n, ε) cell with its queries and
//! built mechanisms; [`Job::totals`] is one repetition.

use super::data::{IncomeDebtModel, IncomeModel};
use super::error::{ExperimentError, Result};
use super::mechanisms::Release;
use super::{add_in_order, rng_for};
use geopriv::{Query, SoftThreshold, TwoWayThreshold};
use rand::rngs::StdRng;
use rayon::prelude::*;

/// How the noise streams of a chunk are derived from the run's seed.
#[derive(Clone, Copy, Debug)]
pub enum Streams {
    /// A fresh stream per (query, mechanism), tagged with this number.
    PerQuery(u64),
    /// One stream per mechanism, shared by the queries in order.
    PerMechanism(u64),
}

/// A simulated population answering one family of queries.
pub trait Family: Sync {
    /// The query answered.
    type Query: Query + Sync;
    /// One household's private value.
    type Point: AsRef<[f64]> + Send + Sync;
    /// Households per work unit (part of the seeded stream layout).
    const CHUNK: usize;
    /// Stream tag of the population draws.
    const POPULATION_TAG: u64;
    /// How the noise streams are derived.
    const STREAMS: Streams;
    /// Draw one household.
    fn sample(&self, rng: &mut StdRng) -> Self::Point;
    /// The hard (true) answer: does the household count for this query?
    fn counts(query: &Self::Query, x: &Self::Point) -> bool;
}

impl Family for IncomeModel {
    type Query = SoftThreshold;
    type Point = [f64; 1];
    const CHUNK: usize = 8192;
    const POPULATION_TAG: u64 = 1;
    const STREAMS: Streams = Streams::PerQuery(2);
    fn sample(&self, rng: &mut StdRng) -> [f64; 1] {
        [IncomeModel::sample(self, rng)]
    }
    fn counts(q: &SoftThreshold, x: &[f64; 1]) -> bool {
        x[0] > q.threshold()
    }
}

impl Family for IncomeDebtModel {
    type Query = TwoWayThreshold;
    type Point = [f64; 2];
    const CHUNK: usize = 4096;
    const POPULATION_TAG: u64 = 11;
    const STREAMS: Streams = Streams::PerMechanism(12);
    fn sample(&self, rng: &mut StdRng) -> [f64; 2] {
        IncomeDebtModel::sample(self, rng)
    }
    fn counts(q: &TwoWayThreshold, x: &[f64; 2]) -> bool {
        let [t1, t2] = q.thresholds();
        x[0] > t1 && x[1] > t2
    }
}

/// One (n, ε) cell: the population, its queries and the built mechanisms.
pub struct Job<'a, F: Family> {
    /// The population model.
    pub family: &'a F,
    /// The queries, in table order.
    pub queries: &'a [F::Query],
    /// The mechanisms, in table order.
    pub releases: &'a [Release],
    /// Base seed of the run.
    pub seed: u64,
    /// Households.
    pub n: usize,
    /// Budget per unit of the data.
    pub eps: f64,
}

/// The sums of one repetition over all households.
pub struct Totals {
    nq: usize,
    nm: usize,
    /// [hard counts (nq), soft sums (nq), release sums (nq × nm), report
    /// variance sums (nq × nm, first repetition only)].
    data: Vec<f64>,
}

impl Totals {
    /// #{households counted by query q}.
    pub fn hard(&self, q: usize) -> f64 {
        self.data[q]
    }
    /// Σ of the soft (non-private) query values.
    pub fn soft(&self, q: usize) -> f64 {
        self.data[self.nq + q]
    }
    /// Σ of mechanism m's reports for query q.
    pub fn released(&self, q: usize, m: usize) -> f64 {
        self.data[2 * self.nq + q * self.nm + m]
    }
    /// Σ of the closed-form report variances (first repetition; NaN where
    /// there is no closed form).
    pub fn variance(&self, q: usize, m: usize) -> f64 {
        self.data[2 * self.nq + self.nq * self.nm + q * self.nm + m]
    }
}

impl<F: Family> Job<'_, F> {
    /// Repetition `rep`: every chunk in parallel, added in chunk order.
    pub fn totals(&self, rep: usize) -> Result<Totals> {
        let (n, chunk) = (self.n, F::CHUNK);
        let parts: Vec<Vec<f64>> = (0..n.div_ceil(chunk))
            .into_par_iter()
            .map(|c| self.chunk_sums(rep, c, chunk.min(n - c * chunk)))
            .collect::<Result<_>>()?;
        let (nq, nm) = (self.queries.len(), self.releases.len());
        Ok(Totals {
            nq,
            nm,
            data: add_in_order(parts, 2 * nq + 2 * nq * nm),
        })
    }

    /// One chunk of `len` households: draw them, then every report.
    fn chunk_sums(&self, rep: usize, chunk: usize, len: usize) -> Result<Vec<f64>> {
        let (seed, n, eps) = (self.seed, self.n as u64, self.eps.to_bits());
        let (nq, nm) = (self.queries.len(), self.releases.len());
        // The population depends on (n, rep) only: every ε and mechanism
        // sees the same households.
        let mut pop_rng = rng_for(seed, &[F::POPULATION_TAG, n, rep as u64, chunk as u64]);
        let people: Vec<F::Point> = (0..len).map(|_| self.family.sample(&mut pop_rng)).collect();
        let mut shared: Vec<StdRng> = match F::STREAMS {
            Streams::PerMechanism(tag) => self
                .releases
                .iter()
                .map(|r| rng_for(seed, &[tag, n, rep as u64, chunk as u64, eps, r.kind.tag()]))
                .collect(),
            Streams::PerQuery(_) => Vec::new(),
        };
        let mut out = vec![0.0; 2 * nq + 2 * nq * nm];
        for (qi, q) in self.queries.iter().enumerate() {
            for x in &people {
                if F::counts(q, x) {
                    out[qi] += 1.0;
                }
                out[nq + qi] += q.value(x.as_ref()).map_err(ExperimentError::Core)?;
            }
            for (mi, r) in self.releases.iter().enumerate() {
                let mut fresh;
                let rng = match F::STREAMS {
                    Streams::PerQuery(tag) => {
                        fresh = rng_for(
                            seed,
                            &[
                                tag,
                                n,
                                rep as u64,
                                chunk as u64,
                                eps,
                                qi as u64,
                                r.kind.tag(),
                            ],
                        );
                        &mut fresh
                    }
                    Streams::PerMechanism(_) => &mut shared[mi],
                };
                let mut s = 0.0;
                for x in &people {
                    s += r.release(q, x.as_ref(), rng)?;
                }
                out[2 * nq + qi * nm + mi] = s;
                if rep == 0 {
                    let mut v = 0.0;
                    for x in &people {
                        v += r.report_variance(q, x.as_ref())?.unwrap_or(f64::NAN);
                    }
                    out[2 * nq + nq * nm + qi * nm + mi] = v;
                }
            }
        }
        Ok(out)
    }
}
