//! The device outbox in the bindings (core: `geopriv::device::outbox`):
//! a release kept in the ledger file until a collector stored it, and the
//! transport-agnostic upload logic, so an app sends the batches with its
//! own HTTP stack (OkHttp, URLSession, requests) and its own scheduler
//! (WorkManager, BGTaskScheduler).

use std::collections::BTreeSet;
use std::sync::Arc;

use geopriv::device::outbox as core;
use geopriv::Ledger as _;

use crate::{guard, GeoMechanism, GeoQuery, GeoprivError, PrivacyLedger, PrivateReport};

/// A report waiting in the outbox.
#[derive(Debug, Clone, PartialEq, Eq, uniffi::Record)]
pub struct PendingUpload {
    /// Its outbox id (acknowledge with it).
    pub id: u64,
    /// The report, one JSON line.
    pub report: String,
}

/// One upload: POST `body` (`application/x-ndjson`) to
/// `{collector}/v1/tasks/{task}/reports`.
#[derive(Debug, Clone, PartialEq, Eq, uniffi::Record)]
pub struct UploadBatch {
    /// Outbox ids of its reports, in the body's order.
    pub ids: Vec<u64>,
    /// The request body.
    pub body: String,
}

/// A report the collector rejected: keep it out of the retry loop.
#[derive(Debug, Clone, PartialEq, Eq, uniffi::Record)]
pub struct RejectedUpload {
    /// Its outbox id.
    pub id: u64,
    /// The collector's stable code.
    pub code: String,
    /// Why (escaped).
    pub reason: String,
}

/// What the collector's answer means (see `OutboxUploader.classify`).
#[derive(Debug, Clone, PartialEq, Eq, uniffi::Enum)]
pub enum UploadVerdict {
    /// Acknowledge `acknowledge` (accepted now or stored before), park
    /// `rejected`.
    Answered {
        /// Remove these from the outbox (`PrivacyLedger.acknowledge`).
        acknowledge: Vec<u64>,
        /// How many of them were duplicates.
        duplicates: u64,
        /// Rejected: park them, do not send again.
        rejected: Vec<RejectedUpload>,
    },
    /// Send the same batch again after `OutboxUploader.retry_delay_ms`.
    Retry {
        /// The server's Retry-After in milliseconds.
        after_ms: Option<u64>,
        /// Why.
        reason: String,
    },
    /// Send the batch in halves (a single report: park it only once a
    /// later batch of this run is answered per record, or if it is the one
    /// such refusal after the run's last per-record answer; otherwise stop
    /// and park none of them, the rule of the core's `upload` driver: an
    /// endpoint that refuses everything, e.g. a proxy, or turns to refusing
    /// mid-run, would otherwise park the whole outbox).
    Split {
        /// The status.
        status: u16,
        /// Why.
        reason: String,
    },
    /// Stop: a configuration error (401, 404, 415, ...); keep everything.
    Fatal {
        /// The status.
        status: u16,
        /// Why.
        reason: String,
    },
}

impl From<core::Verdict> for UploadVerdict {
    fn from(v: core::Verdict) -> Self {
        match v {
            core::Verdict::Answered {
                acknowledge,
                duplicates,
                rejected,
            } => UploadVerdict::Answered {
                acknowledge,
                duplicates,
                rejected: rejected
                    .into_iter()
                    .map(|r| RejectedUpload {
                        id: r.id,
                        code: r.code,
                        reason: r.reason,
                    })
                    .collect(),
            },
            core::Verdict::Retry { after_ms, reason } => UploadVerdict::Retry { after_ms, reason },
            core::Verdict::Split { status, reason } => UploadVerdict::Split { status, reason },
            core::Verdict::Fatal { status, reason } => UploadVerdict::Fatal { status, reason },
        }
    }
}

/// The upload logic without the HTTP: which reports to send next, what the
/// collector's answer means, how long to wait before a retry (exponential
/// backoff with jitter, at least the server's Retry-After). Acknowledge
/// only what `classify` says was stored: a retry after a lost answer is
/// answered as duplicates and counts once.
#[derive(Debug, uniffi::Object)]
pub struct OutboxUploader {
    max_reports: u32,
    max_bytes: u32,
    backoff: core::Backoff,
}

#[uniffi::export]
impl OutboxUploader {
    /// Batches of at most `max_reports` reports and `max_bytes` bytes;
    /// retries wait from `base_ms` doubling to `cap_ms` (with jitter).
    #[uniffi::constructor]
    pub fn new(max_reports: u32, max_bytes: u32, base_ms: u64, cap_ms: u64) -> Arc<Self> {
        Arc::new(OutboxUploader {
            max_reports: max_reports.max(1),
            max_bytes: max_bytes.max(1),
            backoff: core::Backoff {
                base_ms: base_ms.max(1),
                cap_ms: cap_ms.max(base_ms.max(1)),
            },
        })
    }

    /// The next batch of `pending` (oldest first) without the `parked`
    /// ids, or nothing left to send.
    pub fn next_batch(&self, pending: Vec<PendingUpload>, parked: Vec<u64>) -> Option<UploadBatch> {
        let pending: Vec<(u64, String)> = pending.into_iter().map(|p| (p.id, p.report)).collect();
        let parked: BTreeSet<u64> = parked.into_iter().collect();
        core::next_batch(
            &pending,
            &parked,
            self.max_reports as usize,
            self.max_bytes as usize,
        )
        .map(|b| UploadBatch {
            ids: b.ids,
            body: b.body,
        })
    }

    /// What the answer (`status`, `body`, its `Retry-After` header) means
    /// for `batch`; `status` 0 for no answer at all (a network error):
    /// retry.
    pub fn classify(
        &self,
        batch: UploadBatch,
        status: u16,
        body: Vec<u8>,
        retry_after: Option<String>,
    ) -> UploadVerdict {
        if status == 0 {
            return UploadVerdict::Retry {
                after_ms: None,
                reason: "no answer".into(),
            };
        }
        let b = core::Batch {
            ids: batch.ids,
            body: batch.body,
        };
        if let Some(r) = core::classify_local(&b) {
            return UploadVerdict::Answered {
                acknowledge: vec![],
                duplicates: 0,
                rejected: vec![RejectedUpload {
                    id: r.id,
                    code: r.code,
                    reason: r.reason,
                }],
            };
        }
        core::classify(&b, status, &body, retry_after.as_deref()).into()
    }

    /// Milliseconds to wait before the `attempt`-th retry (0-based) of a
    /// batch: `d/2 + U·d/2`, `d = min(cap, base·2^attempt)`, and at least
    /// `retry_after_ms`.
    pub fn retry_delay_ms(&self, attempt: u32, retry_after_ms: Option<u64>) -> u64 {
        self.backoff
            .delay_after_ms(attempt, retry_after_ms, &mut geopriv::SecureRng::new())
    }
}

#[uniffi::export]
impl GeoMechanism {
    /// `privatize`, and keep the report in the ledger file's outbox in the
    /// same atomic write as its charge (a file-backed ledger only): it
    /// waits there, through crashes and offline periods, until
    /// `PrivacyLedger.acknowledge` after a collector stored it.
    pub fn privatize_to_outbox(
        &self,
        ledger: Arc<PrivacyLedger>,
        query: Arc<GeoQuery>,
        x: Vec<f64>,
    ) -> Result<PrivateReport, GeoprivError> {
        guard(|| {
            query.check_point(&x)?;
            let inner = self.core();
            ledger.with_file(|file| {
                self.with_rng(|rng| {
                    let charge = inner.charge_in(file.state().unit())?;
                    let mut out = None;
                    file.spend_to_outbox(&charge, || {
                        let r = geopriv::Report::release_unmetered(inner, query.query(), &x, rng)?;
                        let line = r.to_json_line();
                        out = Some(r);
                        Ok(line)
                    })?;
                    out.map(|r| PrivateReport::from_core(&r)).ok_or_else(|| {
                        GeoprivError::Internal("the outbox release returned no report".into())
                    })
                })
            })
        })
    }
}

#[uniffi::export]
impl PrivacyLedger {
    /// The reports waiting in the outbox that may be uploaded now, oldest
    /// first, read from the file under its lock. A ledger bound to a
    /// monotonic counter first moves a counter left behind by a failed
    /// advance (`CounterNotAdvanced`, a crash) to the file's count and
    /// reads it back; if it cannot, nothing is returned (`LedgerIo`), so no
    /// report leaves whose charge a rolled-back file could drop (attack15
    /// O1). A ledger opened without its counter on a bound file is refused
    /// (`LedgerRefused`): open it with the counter to upload.
    pub fn pending_uploads(&self) -> Result<Vec<PendingUpload>, GeoprivError> {
        guard(|| {
            self.with_file(|f| {
                Ok(f.uploadable_reports()?
                    .into_iter()
                    .map(|(id, report)| PendingUpload { id, report })
                    .collect())
            })
        })
    }

    /// Remove reports a collector stored (accepted or duplicate) from the
    /// outbox, durably; unknown ids are ignored.
    pub fn acknowledge(&self, ids: Vec<u64>) -> Result<(), GeoprivError> {
        guard(|| self.with_file(|f| Ok(f.acknowledge(&ids)?)))
    }
}
