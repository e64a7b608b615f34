//! The server's side of reports: [`ReportPolicy`] decodes and validates an
//! uploaded report (JSON line or bytes) into a [`ReceivedReport`], or
//! raises `InvalidReport` with the reason (core: `geopriv::ValidationPolicy`).

use std::sync::Arc;

use crate::{guard, GeoQuery, GeoprivError, MechanismName, QueryFamily};

/// A decoded, validated report, as the server sees it.
#[derive(Debug, Clone, PartialEq, uniffi::Record)]
pub struct ReceivedReport {
    /// Canonical id of the query answered; group reports by it (one
    /// `Aggregator` per id, or a `GridAggregator`).
    pub query_id: String,
    /// The query's family.
    pub family: QueryFamily,
    /// The mechanism that produced the value.
    pub mechanism: MechanismName,
    /// ε of the release.
    pub epsilon: f64,
    /// δ of the release.
    pub delta: f64,
    /// The released value (finite; unbiased for the user's f(x)).
    pub value: f64,
    /// Made with a seeded (NOT secure) generator; only accepted by a
    /// policy with `accept_seeded`.
    pub seeded: bool,
}

impl ReceivedReport {
    pub(crate) fn from_core(r: &geopriv::Report) -> Self {
        ReceivedReport {
            query_id: r.query.canonical_id(),
            family: match r.query {
                geopriv::QueryDescriptor::Threshold { .. } => QueryFamily::Threshold,
                geopriv::QueryDescriptor::Interval { .. } => QueryFamily::Interval,
                geopriv::QueryDescriptor::TwoWay { .. } => QueryFamily::TwoWay,
                geopriv::QueryDescriptor::Kde { .. } => QueryFamily::Kde,
                geopriv::QueryDescriptor::Region { .. } => QueryFamily::Region,
            },
            mechanism: r.mechanism,
            epsilon: r.epsilon,
            delta: r.delta,
            value: r.value,
            seeded: r.seeded,
        }
    }
}

/// The structural checks every report must pass even without a policy:
/// known version, finite value, valid query parameters, ε finite and > 0,
/// δ finite in [0, 1) and consistent with the mechanism. Used by the
/// aggregators' `add_report_*`, which leave ε limits to a `ReportPolicy`.
pub(crate) fn structural_policy() -> geopriv::ValidationPolicy {
    geopriv::ValidationPolicy::structural()
}

/// Decode a JSON report and check it against `policy`.
pub(crate) fn accept_json(
    policy: &geopriv::ValidationPolicy,
    line: &str,
) -> Result<geopriv::Report, GeoprivError> {
    Ok(policy.accept_json(line)?)
}

/// Decode a binary report and check it against `policy`.
pub(crate) fn accept_bytes(
    policy: &geopriv::ValidationPolicy,
    bytes: &[u8],
) -> Result<geopriv::Report, GeoprivError> {
    Ok(policy.accept_bytes(bytes)?)
}

/// What a server accepts: reports with ε (per unit distance) at most
/// `max_epsilon` and δ at most `max_delta`, of a known format version, with
/// a finite value and valid query parameters; optionally only some
/// mechanisms and some queries. Local-DP reports are refused unless
/// `allow_ldp` gives their own maximum. Immutable and thread-safe; the
/// `allow_*`/`only_*` methods return a narrowed copy.
///
/// A refused report raises `InvalidReport`; its message gives the reason
/// and ends with a stable code in brackets (`[empty]`, `[truncated]`,
/// `[malformed]`, `[trailing-bytes]`, `[unsupported-version]`,
/// `[non-finite-value]`, `[invalid-query]`, `[unknown-query]`,
/// `[mechanism-not-allowed]`, `[epsilon-out-of-policy]`, `[seeded]`,
/// `[delta-out-of-policy]`, `[delta-mismatch]`).
#[derive(Debug, uniffi::Object)]
pub struct ReportPolicy {
    inner: geopriv::ValidationPolicy,
}

impl ReportPolicy {
    /// The core policy.
    pub(crate) fn core(&self) -> &geopriv::ValidationPolicy {
        &self.inner
    }
}

#[uniffi::export]
impl ReportPolicy {
    /// Accept any valid query from any geo-private mechanism with
    /// ε <= `max_epsilon` (finite, > 0) and δ <= `max_delta` (in [0, 1)).
    #[uniffi::constructor]
    pub fn new(max_epsilon: f64, max_delta: f64) -> Result<Arc<Self>, GeoprivError> {
        guard(|| {
            Ok(Arc::new(Self {
                inner: geopriv::ValidationPolicy::new(max_epsilon, max_delta)?,
            }))
        })
    }

    /// A copy that also accepts local-DP reports with local-DP ε at most
    /// `max_ldp_epsilon` (finite, > 0).
    pub fn allow_ldp(&self, max_ldp_epsilon: f64) -> Result<Arc<ReportPolicy>, GeoprivError> {
        guard(|| {
            Ok(Arc::new(Self {
                inner: self.inner.clone().allow_ldp(max_ldp_epsilon)?,
            }))
        })
    }

    /// A copy that accepts only these mechanisms.
    pub fn only_mechanisms(&self, mechanisms: Vec<MechanismName>) -> Arc<ReportPolicy> {
        Arc::new(Self {
            inner: self.inner.clone().only_mechanisms(&mechanisms),
        })
    }

    /// A copy that also accepts reports marked `seeded` (from a
    /// `GeoMechanism.seeded` copy: reproducible, NOT secure). For tests
    /// and simulations only; by default they are refused (`[seeded]`).
    pub fn accept_seeded(&self) -> Arc<ReportPolicy> {
        Arc::new(Self {
            inner: self.inner.clone().accept_seeded(),
        })
    }

    /// A copy that accepts only reports for these queries (matched exactly
    /// on their parameters); others raise `InvalidReport` `[unknown-query]`.
    pub fn only_queries(&self, queries: Vec<Arc<GeoQuery>>) -> Arc<ReportPolicy> {
        let descriptors: Vec<geopriv::QueryDescriptor> =
            queries.iter().map(|q| q.descriptor()).collect();
        Arc::new(Self {
            inner: self.inner.clone().only_queries(&descriptors),
        })
    }

    /// A copy narrowed to a task set, as `geopriv aggregate --queries FILE`
    /// (and the collector's task set): `text` holds one line per query,
    /// `<id>` (allow-list only) or `<id> <mechanism> <ε> <δ> [<clip z>]`
    /// (a task; blank and `#` lines ignored). Reports of a query outside
    /// the list raise `[unknown-query]`; reports of a query with tasks
    /// but another (mechanism, ε, δ), bit for bit, raise `[not-a-task]`, so
    /// a client cannot open groups of its own (issue 19 item 8); a task's z
    /// clips its group. `InvalidInput` naming the first bad line (or a
    /// task the policy refuses: ε or δ above its limits, ...).
    ///
    /// ```python
    /// policy = ReportPolicy(1e-3, 1e-6).with_query_file(
    ///     "threshold:100000:20000 polyplace 0.0002 0\n")
    /// ```
    pub fn with_query_file(&self, text: String) -> Result<Arc<ReportPolicy>, GeoprivError> {
        guard(|| {
            let file = geopriv::server::ingest::read_query_file(
                text.as_bytes(),
                geopriv::server::ingest::MAX_GROUPS_LIMIT,
            )
            .map_err(|e| GeoprivError::InvalidInput(format!("query file: {e}")))?;
            let inner = file
                .apply(self.inner.clone())
                .map_err(|e| GeoprivError::InvalidInput(format!("query file: {e}")))?;
            Ok(Arc::new(Self { inner }))
        })
    }

    /// The largest ε per unit distance accepted.
    pub fn max_epsilon(&self) -> f64 {
        self.inner.max_epsilon()
    }

    /// The largest δ accepted.
    pub fn max_delta(&self) -> f64 {
        self.inner.max_delta()
    }

    /// Decode one JSON report (surrounding whitespace and the newline are
    /// ignored) and validate it; `InvalidReport` with the reason otherwise.
    pub fn accept_json(&self, line: String) -> Result<ReceivedReport, GeoprivError> {
        guard(|| Ok(ReceivedReport::from_core(&accept_json(&self.inner, &line)?)))
    }

    /// Decode one binary report (every byte must be used) and validate it;
    /// `InvalidReport` with the reason otherwise.
    pub fn accept_bytes(&self, bytes: Vec<u8>) -> Result<ReceivedReport, GeoprivError> {
        guard(|| {
            Ok(ReceivedReport::from_core(&accept_bytes(
                &self.inner,
                &bytes,
            )?))
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::GeoMechanism;

    fn code_of(e: GeoprivError) -> String {
        match e {
            GeoprivError::InvalidReport(m) => {
                let start = m.rfind('[').expect("code");
                m[start + 1..m.len() - 1].to_string()
            }
            other => panic!("expected InvalidReport, got {other:?}"),
        }
    }

    #[test]
    fn a_device_report_is_accepted_and_garbage_is_refused_with_a_code() {
        let q = GeoQuery::threshold(100_000.0, 20_000.0).unwrap();
        let m = GeoMechanism::polyplace(1.0 / 8000.0).unwrap();
        let r = m.privatize_unmetered(q.clone(), vec![42_000.0]).unwrap();
        let policy = ReportPolicy::new(1.0 / 4000.0, 0.0).unwrap();
        let got = policy.accept_json(r.json.clone()).unwrap();
        assert_eq!(got.value, r.value);
        assert_eq!(got.query_id, q.query_id());
        assert_eq!(got.family, QueryFamily::Threshold);
        assert_eq!(got.mechanism, MechanismName::Polyplace);
        assert_eq!(policy.accept_bytes(r.bytes.clone()).unwrap(), got);
        assert_eq!(policy.accept_json(format!("  {}\n", r.json)).unwrap(), got);

        let wrong_version = r.json.replace("\"version\":2", "\"version\":3");
        let mut bytes_v4 = r.bytes.clone();
        bytes_v4[0] = 4; // binary version 3 is current (mandatory seeded byte, check)
        let mut truncated = r.bytes.clone();
        truncated.pop();
        let mut trailing = r.bytes.clone();
        trailing.push(0);
        let with_scale = r.json.replace("\"value\"", "\"scale\":1.0,\"value\"");
        for (json, code) in [
            ("", "empty"),
            ("   \n", "empty"),
            ("{", "truncated"),
            ("not a report", "malformed"),
            ("{}", "malformed"),
            (with_scale.as_str(), "malformed"),
            (wrong_version.as_str(), "unsupported-version"),
        ] {
            assert_eq!(
                code_of(policy.accept_json(json.into()).unwrap_err()),
                code,
                "{json}"
            );
        }
        for (bytes, code) in [
            (vec![], "empty"),
            (vec![0xff; 7], "malformed"),
            (truncated, "truncated"),
            (trailing, "trailing-bytes"),
            (bytes_v4, "unsupported-version"),
        ] {
            assert_eq!(
                code_of(policy.accept_bytes(bytes.clone()).unwrap_err()),
                code,
                "{bytes:?}"
            );
        }

        let strict = ReportPolicy::new(1.0 / 10_000.0, 0.0).unwrap();
        assert_eq!(
            code_of(strict.accept_json(r.json.clone()).unwrap_err()),
            "epsilon-out-of-policy"
        );
        let other = GeoQuery::threshold(50_000.0, 20_000.0).unwrap();
        let only = policy.only_queries(vec![other]);
        assert_eq!(
            code_of(only.accept_json(r.json.clone()).unwrap_err()),
            "unknown-query"
        );
        let only = policy.only_mechanisms(vec![MechanismName::StudentT]);
        assert_eq!(
            code_of(only.accept_json(r.json.clone()).unwrap_err()),
            "mechanism-not-allowed"
        );
        let ldp = GeoMechanism::local_dp(1.0)
            .unwrap()
            .privatize_unmetered(q, vec![1.0])
            .unwrap();
        assert_eq!(
            code_of(policy.accept_json(ldp.json.clone()).unwrap_err()),
            "mechanism-not-allowed"
        );
        policy
            .allow_ldp(2.0)
            .unwrap()
            .accept_json(ldp.json)
            .unwrap();
        assert!(matches!(
            policy.allow_ldp(f64::NAN),
            Err(GeoprivError::InvalidParameter(_))
        ));
        assert!(matches!(
            ReportPolicy::new(0.0, 0.0),
            Err(GeoprivError::InvalidParameter(_))
        ));
    }
}
