//! Tasks: what a collector collects. A task is either a value task (one
//! query descriptor, mechanism, ε, δ, clipping policy) or a map task (a
//! kernel grid under one per-device ε), with a minimum batch size and a
//! period (time precision), as a DAP task has.
//!
//! Read from JSON (`{"tasks":[...]}`) or TOML (`[[tasks]]`). The flags mirror
//! `geopriv aggregate` and `geopriv map aggregate`, so the collector's
//! estimates are those commands' output on the same reports.

use geopriv::map::{KdeGrid, MapAggregator, MapMechanism, MapRelease, QuerySet};
use geopriv::server::clip::{ClipLevel, DEFAULT_BIAS_TO_SE, DEFAULT_DEPLOYMENT_N};
use geopriv::server::ingest::{AggregationConfig, Estimator, ReportAggregator, DEFAULT_MAX_GROUPS};
use geopriv::{MechanismName, QueryDescriptor, Report, ValidationPolicy};
use serde::{Deserialize, Serialize};

/// The file: a list of tasks.
#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TaskFile {
    /// The tasks, by id.
    pub tasks: Vec<TaskDef>,
}

/// One task, as written in the tasks file (the stored definition is its
/// canonical JSON: a change of any field is refused on restart).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TaskDef {
    /// Identifier in URLs: 1..=64 of `[A-Za-z0-9_.-]`.
    pub id: String,
    /// The query (value task); exactly one of `query` and `map`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub query: Option<QueryDescriptor>,
    /// The map grid (map task).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub map: Option<MapDef>,
    /// The mechanism of a value task (`polyplace`, `laplace`, ...).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mechanism: Option<MechanismName>,
    /// ε (value task: the mechanism's ε; map task: the per-device total).
    pub epsilon: f64,
    /// δ of a value task (0 for pure mechanisms).
    #[serde(default)]
    pub delta: f64,
    /// Clipping: `z` as `geopriv aggregate --clip-z` (fixed level).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub clip_z: Option<f64>,
    /// Clipping off (`--no-clip`).
    #[serde(default)]
    pub no_clip: bool,
    /// Deployment size of the default clipping level (`--clip-n`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub clip_n: Option<u64>,
    /// Largest honest bias in standard errors (`--clip-bias-se`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub clip_bias_se: Option<f64>,
    /// Accept reports marked seeded (tests only).
    #[serde(default)]
    pub accept_seeded: bool,
    /// An estimate of a period is published only from this many reports.
    pub min_batch: u64,
    /// Time precision in seconds: a report counts in the period
    /// `floor(arrival / period) * period` (server time; reports carry no
    /// timestamp of their own, so no device clock is trusted or leaked).
    pub period: u64,
}

/// The map of a map task, as `geopriv map aggregate`'s flags.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MapDef {
    /// xmin, xmax, ymin, ymax in metres.
    pub bbox: [f64; 4],
    /// Grid points per axis.
    pub grid: usize,
    /// Bandwidth in metres (default: one grid-cell diagonal).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bandwidth: Option<f64>,
    /// `a-priori`, `vector-laplace`, `sampled`, `composition`.
    pub mechanism: String,
    /// Queries per device for `sampled`.
    #[serde(default = "one")]
    pub k: usize,
    /// λ of the noise-a-priori kernel (default: the planner's choice).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lambda: Option<f64>,
}

fn one() -> usize {
    1
}

/// A task ready to serve: its definition and what it is built from.
#[derive(Clone, Debug)]
pub struct Task {
    /// The definition.
    pub def: TaskDef,
    /// Canonical JSON of the definition (stored in the database).
    pub canonical: String,
    /// What kind.
    pub kind: Kind,
}

/// Value or map.
#[derive(Clone, Debug)]
pub enum Kind {
    /// One query.
    Value {
        /// The query.
        query: QueryDescriptor,
        /// Its canonical id.
        query_id: String,
        /// The mechanism.
        mechanism: MechanismName,
        /// The policy reports are validated against.
        policy: ValidationPolicy,
        /// Clipping and estimator (as `geopriv aggregate`).
        config: AggregationConfig,
    },
    /// A kernel-grid map.
    Map {
        /// The query set.
        set: QuerySet,
        /// The mechanism.
        mechanism: MapMechanism,
        /// The set's tag (what reports carry).
        tag: String,
    },
}

/// Per-period aggregate of one task.
#[derive(Clone, Debug)]
pub enum PeriodAgg {
    /// Value task.
    Value(Box<ReportAggregator>),
    /// Map task.
    Map(Box<MapAggregator>),
}

fn valid_id(id: &str) -> bool {
    (1..=64).contains(&id.len())
        && id
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'.' | b'-'))
}

impl MapDef {
    /// The query set, as `geopriv map --bbox --grid --bandwidth` builds it.
    pub fn set(&self) -> Result<QuerySet, String> {
        let b = self.bbox;
        let k = self.grid.max(2);
        let diag = ((b[1] - b[0]) / (k - 1) as f64).hypot((b[3] - b[2]) / (k - 1) as f64);
        let g = KdeGrid::new_2d(b, [k, k], self.bandwidth.unwrap_or(diag))
            .map_err(|e| e.to_string())?;
        Ok(QuerySet::Kde(g))
    }

    /// The mechanism named.
    pub fn mechanism(&self) -> Result<MapMechanism, String> {
        Ok(match self.mechanism.as_str() {
            "a-priori" => MapMechanism::APriori,
            "vector-laplace" => MapMechanism::VectorLaplace,
            "sampled" => MapMechanism::Sampled { k: self.k },
            "composition" => MapMechanism::Composition,
            m => return Err(format!("unknown map mechanism {m:?}")),
        })
    }
}

impl Task {
    /// Check a definition and build the task.
    pub fn new(def: TaskDef) -> Result<Task, String> {
        let id = &def.id;
        if !valid_id(id) {
            return Err(format!("task id {id:?}: use 1 to 64 of A-Z a-z 0-9 _ . -"));
        }
        if def.min_batch == 0 {
            return Err(format!("task {id}: min_batch must be at least 1"));
        }
        if def.period == 0 {
            return Err(format!("task {id}: period must be at least 1 second"));
        }
        // Period starts and ends are i64 unix seconds (the store's column,
        // the API's `start`/`end`): a longer period would wrap negative.
        if i64::try_from(def.period).is_err() {
            return Err(format!(
                "task {id}: period must be at most {} seconds",
                i64::MAX
            ));
        }
        let kind = match (&def.query, &def.map) {
            (Some(q), None) => {
                let mechanism = def
                    .mechanism
                    .ok_or_else(|| format!("task {id}: a value task needs a mechanism"))?;
                q.check().map_err(|e| format!("task {id}: {e}"))?;
                let mut policy = ValidationPolicy::new(def.epsilon, def.delta)
                    .map_err(|e| format!("task {id}: {e}"))?;
                if !mechanism.is_geo_private() {
                    policy = policy
                        .allow_ldp(def.epsilon)
                        .map_err(|e| format!("task {id}: {e}"))?;
                }
                if def.accept_seeded {
                    policy = policy.accept_seeded();
                }
                let policy = policy
                    .only_mechanisms(&[mechanism])
                    .only_queries(core::iter::once(q));
                let clip = match (def.no_clip, def.clip_z) {
                    (true, Some(_)) => {
                        return Err(format!("task {id}: no_clip and clip_z contradict"))
                    }
                    (true, None) => None,
                    (false, Some(z)) if z.is_finite() && z >= 0.0 => Some(ClipLevel::Fixed(z)),
                    (false, Some(_)) => {
                        return Err(format!("task {id}: clip_z must be finite and >= 0"))
                    }
                    (false, None) => Some(ClipLevel::Auto {
                        deployment_n: def.clip_n.unwrap_or(DEFAULT_DEPLOYMENT_N),
                        bias_to_se: def.clip_bias_se.unwrap_or(DEFAULT_BIAS_TO_SE),
                    }),
                };
                let config = AggregationConfig {
                    clip,
                    estimator: Estimator::Mean,
                    max_groups: DEFAULT_MAX_GROUPS,
                    // A task is one group: reports of any other (query,
                    // mechanism, ε, δ) are rejected before they reach it.
                    max_groups_per_query: 1,
                };
                // The task's own (query, mechanism, ε, δ) must pass the
                // policy (`offer` validates first) and have a clipping
                // bound (a mechanism without a public bound cannot be
                // clipped).
                let mut probe = ReportAggregator::new(policy.clone(), config);
                probe
                    .offer(Report::new(
                        q.clone(),
                        mechanism,
                        def.epsilon,
                        def.delta,
                        0.0,
                    ))
                    .map_err(|e| format!("task {id}: {e}"))?;
                Kind::Value {
                    query: q.clone(),
                    query_id: q.canonical_id(),
                    mechanism,
                    policy,
                    config,
                }
            }
            (None, Some(m)) => {
                let set = m.set().map_err(|e| format!("task {id}: {e}"))?;
                let mechanism = m.mechanism().map_err(|e| format!("task {id}: {e}"))?;
                MapRelease::new(set.clone(), mechanism, def.epsilon)
                    .map_err(|e| format!("task {id}: {e}"))?;
                MapAggregator::new(set.clone(), mechanism, def.epsilon)
                    .map_err(|e| format!("task {id}: {e}"))?;
                let tag = geopriv::map::set_tag(&set.id());
                Kind::Map {
                    set,
                    mechanism,
                    tag,
                }
            }
            _ => return Err(format!("task {id}: give exactly one of query and map")),
        };
        let canonical = serde_json::to_string(&def).map_err(|e| e.to_string())?;
        Ok(Task {
            def,
            canonical,
            kind,
        })
    }

    /// A fresh aggregate for one period.
    pub fn new_agg(&self) -> PeriodAgg {
        match &self.kind {
            Kind::Value { policy, config, .. } => {
                PeriodAgg::Value(Box::new(ReportAggregator::new(policy.clone(), *config)))
            }
            // Checked in `new`.
            Kind::Map { set, mechanism, .. } => PeriodAgg::Map(Box::new(
                MapAggregator::new(set.clone(), *mechanism, self.def.epsilon)
                    .expect("checked when the task was built"),
            )),
        }
    }

    /// The period a report arriving at `unix_seconds` counts in.
    pub fn period_of(&self, unix_seconds: u64) -> i64 {
        (unix_seconds / self.def.period * self.def.period) as i64
    }
}

/// Read a tasks file (JSON if it starts with `{`, else TOML).
pub fn load(path: &std::path::Path) -> Result<Vec<Task>, String> {
    let text =
        std::fs::read_to_string(path).map_err(|e| format!("--tasks {}: {e}", path.display()))?;
    let file: TaskFile = if text.trim_start().starts_with('{') {
        serde_json::from_str(&text).map_err(|e| format!("--tasks {}: {e}", path.display()))?
    } else {
        toml::from_str(&text).map_err(|e| format!("--tasks {}: {e}", path.display()))?
    };
    let mut tasks = Vec::new();
    for def in file.tasks {
        if tasks.iter().any(|t: &Task| t.def.id == def.id) {
            return Err(format!("task {} is defined twice", def.id));
        }
        tasks.push(Task::new(def)?);
    }
    if tasks.is_empty() {
        return Err(format!("--tasks {}: no task", path.display()));
    }
    Ok(tasks)
}
