//! Server-side aggregation: [`Aggregator`] for one query and
//! [`GridAggregator`] for a family of queries (a density map), both exact
//! and mergeable (core: `geopriv::Aggregator`, `geopriv::GridAggregator`),
//! behind a `Mutex` so request threads can share them.

use std::sync::{Arc, Mutex};

use crate::report::{accept_bytes, accept_json, structural_policy, ReceivedReport};
use crate::{guard, lock, GeoQuery, GeoprivError};

/// The estimate of the population mean of f(x) from the reports so far.
#[derive(Debug, Clone, PartialEq, uniffi::Record)]
pub struct Estimate {
    /// Number of reports.
    pub n: u64,
    /// Sum of the reports (correctly rounded from the exact sum).
    pub sum: f64,
    /// Mean of the reports: the unbiased estimate of the mean of f(x).
    pub mean: f64,
    /// Sample variance of the reports; `null` when n < 2.
    pub sample_variance: Option<f64>,
    /// Standard error of the mean; `null` when n < 2.
    pub standard_error: Option<f64>,
    /// Lower end of the normal-approximation 95% confidence interval,
    /// mean − 1.96 standard errors; `null` when n < 2.
    pub ci95_low: Option<f64>,
    /// Upper end of the 95% confidence interval; `null` when n < 2.
    pub ci95_high: Option<f64>,
}

impl From<geopriv::Estimate> for Estimate {
    fn from(e: geopriv::Estimate) -> Self {
        Estimate {
            n: e.n,
            sum: e.sum,
            mean: e.mean,
            sample_variance: e.sample_variance,
            standard_error: e.standard_error,
            ci95_low: e.ci95.map(|c| c[0]),
            ci95_high: e.ci95.map(|c| c[1]),
        }
    }
}

/// Serialize a core aggregate state as JSON.
fn state_to_json<T: serde::Serialize>(state: &T, what: &str) -> Result<String, GeoprivError> {
    serde_json::to_string(state).map_err(|e| GeoprivError::Internal(format!("{what}: {e}")))
}

/// Parse a core aggregate state from JSON; anything invalid is
/// `InvalidReport` (it is data from another machine).
fn state_from_json<T: serde::de::DeserializeOwned>(
    json: &str,
    what: &str,
) -> Result<T, GeoprivError> {
    serde_json::from_str(json.trim())
        .map_err(|e| GeoprivError::InvalidReport(format!("invalid {what}: {e}")))
}

/// Exact, mergeable aggregate of the reports for **one** query: count, sum
/// and sum of squares held as exact integers, so any split into shards
/// merged in any order gives bit-for-bit the same estimate.
///
/// Thread-safe (a `Mutex` inside). `add_report_json`/`add_report_bytes`
/// check a report's structure (version, finite value, valid query, ε and δ
/// well-formed) but neither its ε against a limit nor which query it
/// answers: for untrusted input run `ReportPolicy.accept_*` first and
/// `add_report` its result, route reports by `query_id`, or use a
/// `GridAggregator` (which refuses queries it does not hold).
#[derive(Debug, uniffi::Object)]
pub struct Aggregator {
    state: Mutex<geopriv::Aggregator>,
}

impl Aggregator {
    fn with_state<T>(
        &self,
        f: impl FnOnce(&mut geopriv::Aggregator) -> Result<T, GeoprivError>,
    ) -> Result<T, GeoprivError> {
        f(&mut *lock(&self.state, "aggregator")?)
    }

    fn add_decoded(&self, report: geopriv::Report) -> Result<ReceivedReport, GeoprivError> {
        self.with_state(|a| Ok(a.add_report(&report)?))?;
        Ok(ReceivedReport::from_core(&report))
    }
}

#[uniffi::export]
impl Aggregator {
    /// An empty aggregate.
    #[uniffi::constructor]
    pub fn new() -> Arc<Self> {
        Arc::new(Self {
            state: Mutex::new(geopriv::Aggregator::new()),
        })
    }

    /// Restore a state written by `to_json` (e.g. a partial aggregate from
    /// another shard). Refuses (`InvalidReport`) malformed or inconsistent
    /// states.
    #[uniffi::constructor]
    pub fn from_json(state: String) -> Result<Arc<Self>, GeoprivError> {
        guard(|| {
            Ok(Arc::new(Self {
                state: Mutex::new(state_from_json(&state, "aggregate state")?),
            }))
        })
    }

    /// The exact state as compact, canonical JSON, to ship a partial
    /// aggregate to a reducer (`from_json` then `merge`). Equal states give
    /// equal strings.
    pub fn to_json(&self) -> Result<String, GeoprivError> {
        guard(|| self.with_state(|a| state_to_json(&*a, "aggregate state")))
    }

    /// Add one released value (finite; else `InvalidParameter` and the
    /// state is unchanged).
    pub fn add_value(&self, value: f64) -> Result<(), GeoprivError> {
        guard(|| self.with_state(|a| Ok(a.add(value)?)))
    }

    /// Add many values at once (one call across the boundary). All or
    /// nothing: if any value is NaN or infinite, none is added.
    pub fn add_values(&self, values: Vec<f64>) -> Result<(), GeoprivError> {
        guard(|| self.with_state(|a| Ok(a.add_all(&values)?)))
    }

    /// Add a report returned by `ReportPolicy.accept_*`.
    pub fn add_report(&self, report: ReceivedReport) -> Result<(), GeoprivError> {
        guard(|| self.with_state(|a| Ok(a.add(report.value)?)))
    }

    /// Decode a JSON report, check its structure and add its value; returns
    /// what was added. `InvalidReport` (with the reason) leaves the state
    /// unchanged.
    pub fn add_report_json(&self, line: String) -> Result<ReceivedReport, GeoprivError> {
        guard(|| self.add_decoded(accept_json(&structural_policy(), &line)?))
    }

    /// Decode a binary report, check its structure and add its value.
    pub fn add_report_bytes(&self, bytes: Vec<u8>) -> Result<ReceivedReport, GeoprivError> {
        guard(|| self.add_decoded(accept_bytes(&structural_policy(), &bytes)?))
    }

    /// Fold another aggregate into this one (exact; `other` is unchanged).
    /// Merging an aggregate into itself doubles it.
    pub fn merge(&self, other: Arc<Aggregator>) -> Result<(), GeoprivError> {
        guard(|| {
            // Copy `other` first, so two threads merging a into b and b
            // into a never hold both locks (no deadlock), and a.merge(a)
            // does not lock twice.
            let theirs = other.with_state(|o| Ok(o.clone()))?;
            self.with_state(|a| a.merge(&theirs).map_err(GeoprivError::from))
        })
    }

    /// Number of values added.
    pub fn count(&self) -> Result<u64, GeoprivError> {
        guard(|| self.with_state(|a| Ok(a.n())))
    }

    /// The estimate of the mean with its error bar; `null` before the
    /// first value.
    pub fn estimate(&self) -> Result<Option<Estimate>, GeoprivError> {
        guard(|| self.with_state(|a| Ok(a.estimate().map(Into::into))))
    }
}

/// A device's total spend on a whole grid by sequential composition:
/// ε = m·ε_max, δ = m·δ_max (see `GridAggregator.perDeviceTotal`).
#[derive(Debug, Clone, PartialEq, uniffi::Record)]
pub struct GridPerDeviceTotal {
    /// m, the number of cells a device answered.
    pub cells: u64,
    /// ε_max, the largest ε among the reports.
    pub epsilon_per_query: f64,
    /// δ_max, the largest δ among the reports.
    pub delta_per_query: f64,
    /// m·ε_max (per unit distance).
    pub epsilon: f64,
    /// m·δ_max.
    pub delta: f64,
}

/// The estimate of one cell of a [`GridAggregator`].
#[derive(Debug, Clone, PartialEq, uniffi::Record)]
pub struct CellEstimate {
    /// Canonical id of the cell's query.
    pub query_id: String,
    /// Its estimate; `null` for a cell without reports.
    pub estimate: Option<Estimate>,
}

/// Aggregates for a fixed list of queries, e.g. a density map (one KDE per
/// grid centre): a report is routed to its query's cell, and a report for
/// a query not in the list is refused (`InvalidReport` `[unknown-query]`).
/// Exact and mergeable like `Aggregator`; thread-safe.
#[derive(Debug, uniffi::Object)]
pub struct GridAggregator {
    state: Mutex<geopriv::GridAggregator>,
}

impl GridAggregator {
    fn with_state<T>(
        &self,
        f: impl FnOnce(&mut geopriv::GridAggregator) -> Result<T, GeoprivError>,
    ) -> Result<T, GeoprivError> {
        f(&mut *lock(&self.state, "grid aggregator")?)
    }

    fn wrap(g: geopriv::Result<geopriv::GridAggregator>) -> Result<Arc<Self>, GeoprivError> {
        // The core reports a duplicate query as an invalid record; here it
        // is a bad argument.
        let g = g.map_err(|e| match GeoprivError::from(e) {
            GeoprivError::InvalidReport(m) => GeoprivError::InvalidParameter(m),
            other => other,
        })?;
        Ok(Arc::new(Self {
            state: Mutex::new(g),
        }))
    }

    fn add_decoded(&self, report: geopriv::Report) -> Result<ReceivedReport, GeoprivError> {
        self.with_state(|g| Ok(g.add_report(&report)?))?;
        Ok(ReceivedReport::from_core(&report))
    }
}

#[uniffi::export]
impl GridAggregator {
    /// A grid over `queries`, in this order (at least one; no duplicates).
    #[uniffi::constructor]
    pub fn new(queries: Vec<Arc<GeoQuery>>) -> Result<Arc<Self>, GeoprivError> {
        guard(|| {
            if queries.is_empty() {
                return Err(GeoprivError::InvalidParameter(
                    "a grid needs at least one query".into(),
                ));
            }
            Self::wrap(geopriv::GridAggregator::new(
                queries.iter().map(|q| q.descriptor()),
            ))
        })
    }

    /// A density map: a 2-D KDE of `bandwidth` centred at every (x, y) with
    /// x in `xs` and y in `ys` (metres), row-major: cell index =
    /// i_y · xs.len() + i_x.
    #[uniffi::constructor]
    pub fn kde_grid(xs: Vec<f64>, ys: Vec<f64>, bandwidth: f64) -> Result<Arc<Self>, GeoprivError> {
        guard(|| {
            if xs.is_empty() || ys.is_empty() {
                return Err(GeoprivError::InvalidParameter(
                    "a KDE grid needs at least one x and one y".into(),
                ));
            }
            Self::wrap(geopriv::GridAggregator::kde_grid(&xs, &ys, bandwidth))
        })
    }

    /// Restore a state written by `to_json`; `InvalidReport` if invalid.
    #[uniffi::constructor]
    pub fn from_json(state: String) -> Result<Arc<Self>, GeoprivError> {
        guard(|| {
            Ok(Arc::new(Self {
                state: Mutex::new(state_from_json(&state, "grid state")?),
            }))
        })
    }

    /// The state (queries and exact cells) as JSON.
    pub fn to_json(&self) -> Result<String, GeoprivError> {
        guard(|| self.with_state(|g| state_to_json(&*g, "grid state")))
    }

    /// Number of cells.
    pub fn size(&self) -> Result<u64, GeoprivError> {
        guard(|| self.with_state(|g| Ok(g.len() as u64)))
    }

    /// The canonical ids of the queries, in cell order.
    pub fn query_ids(&self) -> Result<Vec<String>, GeoprivError> {
        guard(|| self.with_state(|g| Ok(g.queries().iter().map(|q| q.canonical_id()).collect())))
    }

    /// Index of the cell of the query with this canonical id, or `null`.
    pub fn index_of(&self, query_id: String) -> Result<Option<u64>, GeoprivError> {
        guard(|| self.with_state(|g| Ok(g.index_of_id(&query_id).map(|i| i as u64))))
    }

    /// Decode a JSON report, check its structure and add it to its query's
    /// cell; `InvalidReport` (state unchanged) if malformed or for a query
    /// not in the grid.
    pub fn add_report_json(&self, line: String) -> Result<ReceivedReport, GeoprivError> {
        guard(|| self.add_decoded(accept_json(&structural_policy(), &line)?))
    }

    /// Decode a binary report, check its structure and add it to its cell.
    pub fn add_report_bytes(&self, bytes: Vec<u8>) -> Result<ReceivedReport, GeoprivError> {
        guard(|| self.add_decoded(accept_bytes(&structural_policy(), &bytes)?))
    }

    /// Add a report returned by `ReportPolicy.accept_*` to its cell.
    pub fn add_report(&self, report: ReceivedReport) -> Result<(), GeoprivError> {
        guard(|| {
            self.with_state(|g| {
                let i = g.index_of_id(&report.query_id).ok_or_else(|| {
                    GeoprivError::InvalidReport(format!(
                        "query {} is not in this grid [unknown-query]",
                        report.query_id
                    ))
                })?;
                Ok(g.add_with_budget(i, report.value, report.epsilon, report.delta)?)
            })
        })
    }

    /// What one device spent if it answered every cell, as far as the
    /// reports show: m·ε_max and m·δ_max by sequential composition over the
    /// m cells (ε_max, δ_max: the largest among the reports added or merged;
    /// core `GridAggregator::per_device_total`). `null` before any report.
    /// For a map, one noisy location per device (`MapRelease`) spends ε once.
    pub fn per_device_total(&self) -> Result<Option<GridPerDeviceTotal>, GeoprivError> {
        guard(|| {
            self.with_state(|g| {
                Ok(g.per_device_total().map(|t| GridPerDeviceTotal {
                    cells: t.cells,
                    epsilon_per_query: t.epsilon_per_query,
                    delta_per_query: t.delta_per_query,
                    epsilon: t.epsilon,
                    delta: t.delta,
                }))
            })
        })
    }

    /// Fold another grid over the same queries (same order) into this one.
    pub fn merge(&self, other: Arc<GridAggregator>) -> Result<(), GeoprivError> {
        guard(|| {
            let theirs = other.with_state(|o| Ok(o.clone()))?;
            self.with_state(|g| {
                g.merge(&theirs).map_err(|e| match GeoprivError::from(e) {
                    GeoprivError::InvalidReport(m) => GeoprivError::InvalidParameter(m),
                    other => other,
                })
            })
        })
    }

    /// The estimate of every cell, in cell order.
    pub fn estimates(&self) -> Result<Vec<CellEstimate>, GeoprivError> {
        guard(|| {
            self.with_state(|g| {
                Ok(g.estimates()
                    .into_iter()
                    .map(|(q, e)| CellEstimate {
                        query_id: q.canonical_id(),
                        estimate: e.map(Into::into),
                    })
                    .collect())
            })
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::GeoMechanism;

    #[test]
    fn estimate_matches_the_core_and_merge_is_exact() {
        let a = Aggregator::new();
        assert_eq!(a.estimate().unwrap(), None);
        a.add_values(vec![1.0, 2.0, 3.0, 4.0, 10.0]).unwrap();
        let e = a.estimate().unwrap().unwrap();
        assert_eq!((e.n, e.sum, e.mean), (5, 20.0, 4.0));
        assert_eq!(e.sample_variance, Some(12.5));
        let se = e.standard_error.unwrap();
        assert!((e.ci95_low.unwrap() - (4.0 - 1.959_963_984_540_054 * se)).abs() < 1e-12);

        let (b, c) = (Aggregator::new(), Aggregator::new());
        for v in [1.0, 2.0] {
            b.add_value(v).unwrap();
        }
        for v in [3.0, 4.0, 10.0] {
            c.add_value(v).unwrap();
        }
        b.merge(c.clone()).unwrap();
        assert_eq!(b.to_json().unwrap(), a.to_json().unwrap());
        let back = Aggregator::from_json(a.to_json().unwrap()).unwrap();
        assert_eq!(back.estimate().unwrap(), a.estimate().unwrap());
        b.merge(b.clone()).unwrap(); // self-merge: doubles, no deadlock
        assert_eq!(b.count().unwrap(), 10);
    }

    #[test]
    fn bad_values_and_states_leave_the_aggregate_unchanged() {
        let a = Aggregator::new();
        a.add_value(1.0).unwrap();
        for v in [f64::NAN, f64::INFINITY, f64::NEG_INFINITY] {
            assert!(matches!(
                a.add_value(v),
                Err(GeoprivError::InvalidParameter(_))
            ));
            assert!(matches!(
                a.add_values(vec![2.0, v]),
                Err(GeoprivError::InvalidParameter(_))
            ));
        }
        for bad in [
            "",
            "{",
            "garbage",
            "{\"n\":1}",
            "{\"n\":0,\"sum\":{\"offset\":0,\"limbs\":[5]},\"sum_sq\":{\"offset\":0,\"limbs\":[]}}",
        ] {
            assert!(
                matches!(
                    Aggregator::from_json(bad.into()),
                    Err(GeoprivError::InvalidReport(_))
                ),
                "{bad}"
            );
            assert!(
                matches!(
                    a.add_report_json(bad.into()),
                    Err(GeoprivError::InvalidReport(_))
                ),
                "{bad}"
            );
        }
        for bytes in [vec![], vec![1u8], vec![0xde, 0xad, 0xbe, 0xef]] {
            assert!(matches!(
                a.add_report_bytes(bytes),
                Err(GeoprivError::InvalidReport(_))
            ));
        }
        assert_eq!(a.count().unwrap(), 1);
    }

    #[test]
    fn huge_grids_are_refused_not_aborted() {
        // Issue 12: 200k x 200k axes used to abort the process on
        // allocation; now a typed error before anything is allocated.
        let axis: Vec<f64> = (0..200_000).map(f64::from).collect();
        let e = GridAggregator::kde_grid(axis.clone(), axis, 1.0).unwrap_err();
        assert!(matches!(e, GeoprivError::InvalidParameter(_)), "{e:?}");
    }

    #[test]
    fn grid_routes_reports_and_refuses_strangers() {
        let g = GridAggregator::kde_grid(vec![0.0, 100.0], vec![0.0], 50.0).unwrap();
        assert_eq!(g.size().unwrap(), 2);
        let ids = g.query_ids().unwrap();
        let q = GeoQuery::from_id(ids[1].clone()).unwrap();
        assert_eq!(q.query_id(), ids[1]);
        let m = GeoMechanism::polyplace(0.01).unwrap();
        let r = m.privatize_unmetered(q, vec![90.0, 5.0]).unwrap();
        let got = g.add_report_bytes(r.bytes).unwrap();
        assert_eq!(got.query_id, ids[1]);
        assert_eq!(g.index_of(ids[1].clone()).unwrap(), Some(1));
        let est = g.estimates().unwrap();
        assert_eq!(est[0].estimate, None);
        assert_eq!(est[1].estimate.as_ref().unwrap().n, 1);
        let stranger = GeoQuery::kde(vec![5.0, 5.0], 50.0).unwrap();
        let r = m.privatize_unmetered(stranger, vec![0.0, 0.0]).unwrap();
        let e = g.add_report_json(r.json).unwrap_err();
        assert!(e.to_string().ends_with("[unknown-query]"), "{e}");
        let back = GridAggregator::from_json(g.to_json().unwrap()).unwrap();
        back.merge(g.clone()).unwrap();
        assert_eq!(back.estimates().unwrap()[1].estimate.as_ref().unwrap().n, 2);
        let other = GridAggregator::kde_grid(vec![0.0], vec![0.0], 50.0).unwrap();
        assert!(matches!(
            back.merge(other),
            Err(GeoprivError::InvalidParameter(_))
        ));
        let dup = GeoQuery::threshold(0.0, 1.0).unwrap();
        assert!(matches!(
            GridAggregator::new(vec![dup.clone(), dup]),
            Err(GeoprivError::InvalidParameter(_))
        ));
        assert!(matches!(
            GridAggregator::new(vec![]),
            Err(GeoprivError::InvalidParameter(_))
        ));
    }
}
