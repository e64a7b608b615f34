//! The server's side: [`ValidationPolicy`] decides which decoded reports it
//! accepts, and every refusal is a [`Rejection`] that says why.

use crate::error::{Error, Result};
use crate::report::{QueryDescriptor, QueryKey, Report, FORMAT_VERSION, MIN_FORMAT_VERSION};
use crate::server::escape::Untrusted;
use crate::MechanismName;
use alloc::collections::BTreeSet;
use alloc::string::String;
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
        /// The version in the report.
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
                "report format version {found} is not supported (this server reads versions {MIN_FORMAT_VERSION} to {FORMAT_VERSION})"
            ),
            Rejection::NonFiniteValue { value } => {
                write!(f, "released value {value} is not a finite number")
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
                "epsilon {epsilon} is outside the policy: must be finite, > 0 and <= {max}"
            ),
            Rejection::DeltaOutOfPolicy { delta, max } => write!(
                f,
                "delta {delta} is outside the policy: must be finite, >= 0 and <= {max}"
            ),
            Rejection::DeltaMismatch { mechanism, delta } => {
                if mechanism.is_pure() {
                    write!(f, "mechanism {mechanism} is pure but the report claims delta {delta}")
                } else {
                    write!(f, "mechanism {mechanism} needs delta > 0 but the report has delta {delta}")
                }
            }
            Rejection::Seeded => write!(
                f,
                "the report was made with a seeded (reproducible, not secure) generator; \
                 accept it only in tests (accept_seeded, --accept-seeded)"
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
            },
        }
    }
}

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
    accept_seeded: bool,
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

    /// The largest ε per unit distance accepted.
    pub fn max_epsilon(&self) -> f64 {
        self.max_epsilon
    }

    /// The largest δ accepted.
    pub fn max_delta(&self) -> f64 {
        self.max_delta
    }

    /// Check a decoded report. The first failing check is reported, in this
    /// order: version, value, query parameters, known query, mechanism, ε, δ.
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
        report
            .query
            .check()
            .map_err(|error| Rejection::InvalidQuery { error })?;
        if let Some(known) = &self.queries {
            if !known.contains(&report.query.key()) {
                return Err(Rejection::UnknownQuery {
                    id: report.query.canonical_id(),
                });
            }
        }
        let mechanism = report.mechanism;
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
        let epsilon = report.epsilon;
        if !(epsilon.is_finite() && epsilon > 0.0 && epsilon <= max_epsilon) {
            return Err(Rejection::EpsilonOutOfPolicy {
                epsilon,
                max: max_epsilon,
            });
        }
        let delta = report.delta;
        if !(delta.is_finite() && delta >= 0.0 && delta <= self.max_delta) {
            return Err(Rejection::DeltaOutOfPolicy {
                delta,
                max: self.max_delta,
            });
        }
        if mechanism.is_pure() != (delta == 0.0) {
            return Err(Rejection::DeltaMismatch { mechanism, delta });
        }
        if report.seeded && !self.accept_seeded {
            return Err(Rejection::Seeded);
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
