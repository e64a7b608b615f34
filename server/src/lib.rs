//! `geopriv-serve`: an HTTP collector for geopriv reports.
//!
//! Devices upload reports (JSON lines or binary frames, each with a random
//! `report_id`) to a task; the collector validates each record against the
//! task, stores the accepted ones durably in SQLite (a report id is counted
//! once, however often it is uploaded), and answers each upload only after
//! its reports are durable. Analysts read per-period estimates (published
//! from the task's minimum batch on), maps, exports and partial states with
//! a bearer token; a web page at `/` shows them. Estimates are computed by
//! the core's server side (`geopriv::server`, `geopriv::map`), bit for bit
//! those of `geopriv aggregate` / `geopriv map aggregate` on the same
//! reports.
//!
//! | module | what it does |
//! |---|---|
//! | [`task`] | task definitions (JSON or TOML), checked and canonical |
//! | [`store`] | SQLite in WAL mode, one writer with group commit, live aggregates |
//! | [`http`] | the routes (docs/openapi.yaml) |
//! | [`bench`] | the load generator used by scripts/test-collector.sh |

#![forbid(unsafe_code)]
// Handlers answer early with a ready `Response` as the error; boxing it
// would only add an allocation on the error path.
#![allow(clippy::result_large_err)]

pub mod bench;
pub mod http;
pub mod store;
pub mod task;

use geopriv::server::ingest::ReportAggregator;
use http::TaskState;

/// Merge partial states of one task from several collectors, period by
/// period; returns per period (start, n, the estimate line as
/// `geopriv aggregate` prints it). Refused: states of another definition
/// (their reports were validated or clipped differently).
pub fn merge_states(
    task: &task::Task,
    states: &[TaskState],
) -> Result<Vec<(i64, u64, String)>, String> {
    let mut periods: std::collections::BTreeMap<i64, (u64, ReportAggregator)> = Default::default();
    for s in states {
        if s.definition != task.canonical {
            return Err(format!(
                "a state of another definition of task {} ({}; this one is {})",
                task.def.id, s.definition, task.canonical
            ));
        }
        for p in &s.periods {
            let entry = periods
                .entry(p.start)
                .or_insert_with(|| match task.new_agg() {
                    task::PeriodAgg::Value(a) => (0, *a),
                    task::PeriodAgg::Map(_) => unreachable!("checked below"),
                });
            entry.1.merge_state(&p.state).map_err(|e| e.to_string())?;
            entry.0 += p.n;
        }
    }
    Ok(periods
        .into_iter()
        .map(|(start, (n, a))| {
            (
                start,
                n,
                http::value_lines(&a).into_iter().next().unwrap_or_default(),
            )
        })
        .collect())
}
