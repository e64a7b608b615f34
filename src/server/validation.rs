//! The server's side: [`ValidationPolicy`] decides which decoded reports it
//! accepts, and every refusal is a [`Rejection`] that says why.

use crate::error::{Error, Result, ShortNumber as S};
use crate::report::{
    QueryDescriptor, QueryKey, Report, BINARY_VERSION, FORMAT_VERSION, MIN_FORMAT_VERSION,
};
use crate::server::escape::Untrusted;
use crate::MechanismName;
use alloc::collections::{BTreeMap, BTreeSet};
use alloc::string::String;
use alloc::vec::Vec;
use core::fmt;

/// Why the server refused a report. `Display` gives a sentence for logs;
/// [`code`](Rejection::code) a stable identifier for counters.
#[derive(Clone, Debug, PartialEq)]
#[non_exhaustive]
pub enum Rejection {
    /// Nothing to decode (empty line or frame).
    Empty,
    /// The input ends before the report does.
    Truncated {
        /// What the decoder saw.
        detail: String,
    },
    /// Not a report: bad syntax, wrong types, missing or unknown fields,
    /// unknown family or mechanism.
    Malformed {
        /// What the decoder saw.
        detail: String,
    },
    /// A binary report followed by extra bytes.
    TrailingBytes {
        /// How many bytes were left over.
        count: usize,
    },
    /// A format version this server does not read.
    UnsupportedVersion {
        /// The version in the report (for binary input, its binary
        /// version, [`BINARY_VERSION`](crate::report::BINARY_VERSION)).
        found: u16,
    },
    /// The value is NaN or infinite.
    NonFiniteValue {
        /// The value.
        value: f64,
    },
    /// The query's parameters are invalid (e.g. a width <= 0).
    InvalidQuery {
        /// What the query constructor said.
        error: Error,
    },
    /// The query is valid but not one the server collects.
    UnknownQuery {
        /// Its canonical id.
        id: String,
    },
    /// The mechanism is not allowed by the policy.
    MechanismNotAllowed {
        /// The mechanism named in the report.
        mechanism: MechanismName,
    },
    /// ε is not finite and positive, or above the policy's maximum (per
    /// unit distance; for LDP reports, the local-DP maximum).
    EpsilonOutOfPolicy {
        /// ε in the report.
        epsilon: f64,
        /// The policy's maximum for this mechanism.
        max: f64,
    },
    /// δ is not finite, negative, or above the policy's maximum.
    DeltaOutOfPolicy {
        /// δ in the report.
        delta: f64,
        /// The policy's maximum.
        max: f64,
    },
    /// δ contradicts the mechanism: non-zero for a pure mechanism, or zero
    /// for the approximate Laplace mechanism (whose calibration needs
    /// ln(1/δ)).
    DeltaMismatch {
        /// The mechanism named in the report.
        mechanism: MechanismName,
        /// δ in the report.
        delta: f64,
    },
    /// The report's noise came from a seeded (reproducible, not secure)
    /// generator and the policy does not
    /// [`accept_seeded`](ValidationPolicy::accept_seeded).
    Seeded,
    /// The query has a configured task set ([`ValidationPolicy::only_tasks`])
    /// and the report's (mechanism, ε, δ) is none of its tasks.
    NotATask {
        /// The query's canonical id.
        id: String,
        /// The mechanism named in the report.
        mechanism: MechanismName,
        /// ε in the report.
        epsilon: f64,
        /// δ in the report.
        delta: f64,
    },
}

impl Rejection {
    /// A stable kebab-case identifier of the reason, e.g.
    /// `"unsupported-version"`.
    pub fn code(&self) -> &'static str {
        match self {
            Rejection::Empty => "empty",
            Rejection::Truncated { .. } => "truncated",
            Rejection::Malformed { .. } => "malformed",
            Rejection::TrailingBytes { .. } => "trailing-bytes",
            Rejection::UnsupportedVersion { .. } => "unsupported-version",
            Rejection::NonFiniteValue { .. } => "non-finite-value",
            Rejection::InvalidQuery { .. } => "invalid-query",
            Rejection::UnknownQuery { .. } => "unknown-query",
            Rejection::MechanismNotAllowed { .. } => "mechanism-not-allowed",
            Rejection::EpsilonOutOfPolicy { .. } => "epsilon-out-of-policy",
            Rejection::DeltaOutOfPolicy { .. } => "delta-out-of-policy",
            Rejection::DeltaMismatch { .. } => "delta-mismatch",
            Rejection::Seeded => "seeded",
            Rejection::NotATask { .. } => "not-a-task",
        }
    }
}

impl fmt::Display for Rejection {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Rejection::Empty => write!(f, "empty report"),
            // Decoder details and ids quote client text: escaped and cut
            // (docs/MATH.md §10).
            Rejection::Truncated { detail } => {
                write!(f, "truncated report: {}", Untrusted(detail))
            }
            Rejection::Malformed { detail } => {
                write!(f, "malformed report: {}", Untrusted(detail))
            }
            Rejection::TrailingBytes { count } => {
                write!(f, "{count} unexpected byte(s) after the report")
            }
            Rejection::UnsupportedVersion { found } => write!(
                f,
                "report format version {found} is not supported (this server reads versions {MIN_FORMAT_VERSION} to {FORMAT_VERSION}, binary versions {MIN_FORMAT_VERSION} to {BINARY_VERSION})"
            ),
            Rejection::NonFiniteValue { value } => {
                write!(f, "released value {} is not a finite number", S(*value))
            }
            Rejection::InvalidQuery { error } => write!(f, "invalid query: {error}"),
            Rejection::UnknownQuery { id } => {
                write!(f, "query {} is not one this server collects", Untrusted(id))
            }
            Rejection::MechanismNotAllowed { mechanism } => {
                write!(f, "mechanism {mechanism} is not allowed by the policy")
            }
            Rejection::EpsilonOutOfPolicy { epsilon, max } => write!(
                f,
                "epsilon {} is outside the policy: must be finite, > 0 and <= {}",
                S(*epsilon),
                S(*max)
            ),
            Rejection::DeltaOutOfPolicy { delta, max } => write!(
                f,
                "delta {} is outside the policy: must be finite, >= 0 and <= {}",
                S(*delta),
                S(*max)
            ),
            Rejection::DeltaMismatch { mechanism, delta } => {
                if mechanism.is_pure() {
                    write!(f, "mechanism {mechanism} is pure but the report claims delta {}", S(*delta))
                } else {
                    write!(f, "mechanism {mechanism} needs delta > 0 but the report has delta {}", S(*delta))
                }
            }
            Rejection::Seeded => write!(
                f,
                "the report was made with a seeded (reproducible, not secure) generator; \
                 accept it only in tests (accept_seeded, --accept-seeded)"
            ),
            Rejection::NotATask {
                id,
                mechanism,
                epsilon,
                delta,
            } => write!(
                f,
                "({mechanism}, epsilon {}, delta {}) is not a configured task of query {}",
                S(*epsilon),
                S(*delta),
                Untrusted(id)
            ),
        }
    }
}

#[cfg(feature = "std")]
impl std::error::Error for Rejection {}

impl From<Rejection> for Error {
    /// Keeps the reason category, drops the details.
    fn from(r: Rejection) -> Self {
        Error::InvalidReport {
            reason: match r {
                Rejection::Empty => "empty report",
                Rejection::Truncated { .. } => "truncated report",
                Rejection::Malformed { .. } => "malformed report",
                Rejection::TrailingBytes { .. } => "unexpected bytes after the report",
                Rejection::UnsupportedVersion { .. } => "unsupported format version",
                Rejection::NonFiniteValue { .. } => "released value is not finite",
                Rejection::InvalidQuery { .. } => "invalid query parameters",
                Rejection::UnknownQuery { .. } => "query not collected by this server",
                Rejection::MechanismNotAllowed { .. } => "mechanism not allowed",
                Rejection::EpsilonOutOfPolicy { .. } => "epsilon outside the policy",
                Rejection::DeltaOutOfPolicy { .. } => "delta outside the policy",
                Rejection::DeltaMismatch { .. } => "delta does not match the mechanism",
                Rejection::Seeded => "seeded report refused",
                Rejection::NotATask { .. } => "not a configured task",
            },
        }
    }
}

/// The largest dimension of a KDE centre a server accepts: 16 (a location
/// has 2 or 3). Bounds the bytes of state per group (issue 19 item 12,
/// docs/MATH.md §10.8): a report with a longer centre is refused as an
/// invalid query before it can open a group.
pub const MAX_KDE_DIMENSION: usize = 16;

/// What a server accepts. Build with [`new`](Self::new) and narrow with the
/// `allow_*`/`only_*` methods.
///
/// * ε (per unit distance) must be finite, > 0 and <= `max_epsilon`. The
///   unit is the query's: per dollar for incomes, per metre for locations;
///   a server collecting queries in different units uses one policy per
///   unit.
/// * δ must be finite, >= 0 and <= `max_delta`; pure mechanisms must say
///   δ = 0 and the approximate Laplace mechanism δ > 0.
/// * [`MechanismName::Ldp`] reports carry a local-DP ε on a different scale
///   (e.g. 1 .. 12 rather than 1/1000 per metre), so they are refused unless
///   [`allow_ldp`](Self::allow_ldp) sets their own maximum.
/// * Optionally only some mechanisms and some queries are accepted.
#[derive(Clone, Debug, PartialEq)]
pub struct ValidationPolicy {
    max_epsilon: f64,
    max_delta: f64,
    max_ldp_epsilon: Option<f64>,
    mechanisms: Option<BTreeSet<MechanismName>>,
    queries: Option<BTreeSet<QueryKey>>,
    tasks: BTreeMap<QueryKey, Vec<TaskKey>>,
    accept_seeded: bool,
}

/// One collection task of a server (issue 19 item 8, docs/MATH.md §10.6):
/// the reports of `query` made with `mechanism` at exactly this `epsilon`
/// and `delta`, clipped at `clip_z` (None: the aggregator's level).
///
/// A query with tasks ([`ValidationPolicy::only_tasks`]) accepts only
/// reports of its tasks, so a client cannot open groups of its own for it
/// (e.g. 4,096 budgets one ulp apart) and the table of groups is exactly
/// the configured one.
#[derive(Clone, Debug, PartialEq)]
pub struct Task {
    /// The query.
    pub query: QueryDescriptor,
    /// The mechanism.
    pub mechanism: MechanismName,
    /// ε per unit distance (matched bit for bit, -0 = +0).
    pub epsilon: f64,
    /// δ.
    pub delta: f64,
    /// The clipping level z for this task's group (None: the aggregator's).
    pub clip_z: Option<f64>,
}

impl Task {
    /// A task with the aggregator's clipping level.
    pub fn new(query: QueryDescriptor, mechanism: MechanismName, epsilon: f64, delta: f64) -> Self {
        Self {
            query,
            mechanism,
            epsilon,
            delta,
            clip_z: None,
        }
    }
}

/// (mechanism, ε bits, δ bits, clip z) of a task.
#[derive(Clone, Copy, Debug, PartialEq)]
struct TaskKey {
    mechanism: MechanismName,
    epsilon: u64,
    delta: u64,
    clip_z: Option<f64>,
}

impl TaskKey {
    fn matches(&self, mechanism: MechanismName, epsilon: f64, delta: f64) -> bool {
        self.mechanism == mechanism
            && self.epsilon == (epsilon + 0.0).to_bits()
            && self.delta == (delta + 0.0).to_bits()
    }
}

impl ValidationPolicy {
    /// Accept any valid query from any GP mechanism with ε <= `max_epsilon`
    /// (finite, > 0) and δ <= `max_delta` (finite, in [0, 1)).
    pub fn new(max_epsilon: f64, max_delta: f64) -> Result<Self> {
        crate::error::positive_finite("max_epsilon", max_epsilon)?;
        if !(0.0..1.0).contains(&max_delta) {
            return Err(Error::InvalidParameter {
                name: "max_delta",
                value: max_delta,
                requirement: "finite and in [0, 1)",
            });
        }
        Ok(Self {
            max_epsilon,
            max_delta,
            max_ldp_epsilon: None,
            mechanisms: None,
            queries: None,
            tasks: BTreeMap::new(),
            accept_seeded: false,
        })
    }

    /// The structural checks only, with no limit on ε: known version,
    /// finite value, valid query parameters, ε finite and > 0 (local-DP
    /// reports too), δ finite in [0, 1) and consistent with the mechanism.
    /// For callers that leave the ε limits to another, earlier policy
    /// (e.g. an aggregator fed with reports checked elsewhere).
    ///
    /// ```
    /// use geopriv::{MechanismName, QueryDescriptor, Report, ValidationPolicy};
    /// let q = QueryDescriptor::Threshold { threshold: 1.0, width: 1.0 };
    /// let r = Report::new(q, MechanismName::Ldp, 40.0, 0.0, 0.5);
    /// assert!(ValidationPolicy::structural().validate(&r).is_ok());
    /// ```
    pub fn structural() -> Self {
        Self {
            max_epsilon: f64::MAX,
            max_delta: 1.0 - f64::EPSILON / 2.0,
            max_ldp_epsilon: Some(f64::MAX),
            mechanisms: None,
            queries: None,
            tasks: BTreeMap::new(),
            accept_seeded: false,
        }
    }

    /// Also accept reports marked `seeded` (made with a reproducible, not
    /// secure generator). For tests and simulations only: by default they
    /// are refused ([`Rejection::Seeded`]), also by [`structural`](Self::structural).
    pub fn accept_seeded(mut self) -> Self {
        self.accept_seeded = true;
        self
    }

    /// Also accept [`MechanismName::Ldp`] reports with local-DP
    /// ε <= `max_ldp_epsilon` (finite, > 0).
    pub fn allow_ldp(mut self, max_ldp_epsilon: f64) -> Result<Self> {
        crate::error::positive_finite("max_ldp_epsilon", max_ldp_epsilon)?;
        self.max_ldp_epsilon = Some(max_ldp_epsilon);
        Ok(self)
    }

    /// Accept only these mechanisms (LDP still needs
    /// [`allow_ldp`](Self::allow_ldp)).
    pub fn only_mechanisms(mut self, mechanisms: &[MechanismName]) -> Self {
        self.mechanisms = Some(mechanisms.iter().copied().collect());
        self
    }

    /// Accept only these queries (matched exactly on their parameters, as
    /// the canonical id does).
    pub fn only_queries<'a>(
        mut self,
        queries: impl IntoIterator<Item = &'a QueryDescriptor>,
    ) -> Self {
        self.queries = Some(queries.into_iter().map(QueryDescriptor::key).collect());
        self
    }

    /// Accept, for each query named by a task, only the reports of its
    /// tasks (same mechanism, ε and δ, bit for bit); the queries of the
    /// tasks are added to the allow-list if there is one. Each task must
    /// pass the policy's own checks (valid query, ε and δ within the limits
    /// and consistent with the mechanism; `clip_z` finite and >= 0), or the
    /// call is refused with the first failing task's reason.
    ///
    /// ```
    /// use geopriv::server::Task;
    /// use geopriv::{MechanismName, QueryDescriptor, Report, ValidationPolicy};
    /// let q = QueryDescriptor::Threshold { threshold: 100.0, width: 20.0 };
    /// let task = Task::new(q.clone(), MechanismName::Polyplace, 0.05, 0.0);
    /// let p = ValidationPolicy::new(1.0, 0.0)?.only_tasks(&[task]).unwrap();
    /// assert!(p.validate(&Report::new(q.clone(), MechanismName::Polyplace, 0.05, 0.0, 0.5)).is_ok());
    /// let other = Report::new(q, MechanismName::Polyplace, 0.05000000000000001, 0.0, 0.5);
    /// assert_eq!(p.validate(&other).unwrap_err().code(), "not-a-task");
    /// # Ok::<(), geopriv::Error>(())
    /// ```
    pub fn only_tasks(mut self, tasks: &[Task]) -> core::result::Result<Self, Rejection> {
        for t in tasks {
            self.validate_key(&t.query, t.mechanism, t.epsilon, t.delta)?;
            if let Some(z) = t.clip_z {
                if !(z.is_finite() && z >= 0.0) {
                    return Err(Rejection::InvalidQuery {
                        error: Error::InvalidParameter {
                            name: "clip_z",
                            value: z,
                            requirement: "finite and >= 0",
                        },
                    });
                }
            }
        }
        for t in tasks {
            let key = t.query.key();
            if let Some(q) = self.queries.as_mut() {
                q.insert(key.clone());
            }
            let list = self.tasks.entry(key).or_default();
            let k = TaskKey {
                mechanism: t.mechanism,
                epsilon: (t.epsilon + 0.0).to_bits(),
                delta: (t.delta + 0.0).to_bits(),
                clip_z: t.clip_z,
            };
            match list
                .iter_mut()
                .find(|o| o.matches(t.mechanism, t.epsilon, t.delta))
            {
                Some(old) => *old = k,
                None => list.push(k),
            }
        }
        Ok(self)
    }

    /// Whether a query has configured tasks, and if so the task matching
    /// (mechanism, ε, δ): `None` without tasks for this query,
    /// `Some(None)` if it has tasks but none matches, `Some(Some(z))` for a
    /// match (z: the task's clipping level, if it sets one).
    pub fn task(
        &self,
        query: &QueryDescriptor,
        mechanism: MechanismName,
        epsilon: f64,
        delta: f64,
    ) -> Option<Option<Option<f64>>> {
        let list = self.tasks.get(&query.key())?;
        Some(
            list.iter()
                .find(|t| t.matches(mechanism, epsilon, delta))
                .map(|t| t.clip_z),
        )
    }

    /// Whether any task is configured.
    pub fn has_tasks(&self) -> bool {
        !self.tasks.is_empty()
    }

    /// The largest ε per unit distance accepted.
    pub fn max_epsilon(&self) -> f64 {
        self.max_epsilon
    }

    /// The largest δ accepted.
    pub fn max_delta(&self) -> f64 {
        self.max_delta
    }

    /// Check a decoded report. The first failing check is reported, in this
    /// order: version, value, query parameters, known query, mechanism, ε, δ,
    /// task, seeded.
    pub fn validate(&self, report: &Report) -> core::result::Result<(), Rejection> {
        if !(MIN_FORMAT_VERSION..=FORMAT_VERSION).contains(&report.version) {
            return Err(Rejection::UnsupportedVersion {
                found: report.version,
            });
        }
        if !report.value.is_finite() {
            return Err(Rejection::NonFiniteValue {
                value: report.value,
            });
        }
        self.validate_key(
            &report.query,
            report.mechanism,
            report.epsilon,
            report.delta,
        )?;
        if let Some(None) = self.task(
            &report.query,
            report.mechanism,
            report.epsilon,
            report.delta,
        ) {
            return Err(Rejection::NotATask {
                id: report.query.canonical_id(),
                mechanism: report.mechanism,
                epsilon: report.epsilon,
                delta: report.delta,
            });
        }
        if report.seeded && !self.accept_seeded {
            return Err(Rejection::Seeded);
        }
        Ok(())
    }

    /// The checks of a group key: query parameters, known query, mechanism,
    /// ε, δ (not the task set).
    fn validate_key(
        &self,
        query: &QueryDescriptor,
        mechanism: MechanismName,
        epsilon: f64,
        delta: f64,
    ) -> core::result::Result<(), Rejection> {
        if let QueryDescriptor::Kde { center, .. } = query {
            if center.len() > MAX_KDE_DIMENSION {
                return Err(Rejection::InvalidQuery {
                    error: Error::LimitExceeded {
                        what: "dimension of a KDE centre",
                        requested: center.len() as u64,
                        limit: MAX_KDE_DIMENSION as u64,
                    },
                });
            }
        }
        query
            .check()
            .map_err(|error| Rejection::InvalidQuery { error })?;
        if let Some(known) = &self.queries {
            if !known.contains(&query.key()) {
                return Err(Rejection::UnknownQuery {
                    id: query.canonical_id(),
                });
            }
        }
        let not_allowed = Rejection::MechanismNotAllowed { mechanism };
        if let Some(allowed) = &self.mechanisms {
            if !allowed.contains(&mechanism) {
                return Err(not_allowed);
            }
        }
        let max_epsilon = if mechanism.is_geo_private() {
            self.max_epsilon
        } else {
            self.max_ldp_epsilon.ok_or(not_allowed)?
        };
        if !(epsilon.is_finite() && epsilon > 0.0 && epsilon <= max_epsilon) {
            return Err(Rejection::EpsilonOutOfPolicy {
                epsilon,
                max: max_epsilon,
            });
        }
        if !(delta.is_finite() && delta >= 0.0 && delta <= self.max_delta) {
            return Err(Rejection::DeltaOutOfPolicy {
                delta,
                max: self.max_delta,
            });
        }
        if mechanism.is_pure() != (delta == 0.0) {
            return Err(Rejection::DeltaMismatch { mechanism, delta });
        }
        Ok(())
    }

    /// Decode a JSON line and validate it.
    pub fn accept_json(&self, line: &str) -> core::result::Result<Report, Rejection> {
        let r = Report::from_json(line)?;
        self.validate(&r)?;
        Ok(r)
    }

    /// Decode a binary report and validate it.
    pub fn accept_bytes(&self, bytes: &[u8]) -> core::result::Result<Report, Rejection> {
        let r = Report::from_bytes(bytes)?;
        self.validate(&r)?;
        Ok(r)
    }
}
