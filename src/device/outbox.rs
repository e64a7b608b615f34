//! Uploading a ledger's outbox to a collector (`geopriv-serve`,
//! docs/openapi.yaml), transport-agnostic.
//!
//! A report released with [`FileLedger::spend_to_outbox`](super::budget::FileLedger::spend_to_outbox)
//! waits in the ledger's outbox, written in the same atomic write as its
//! charge, so neither a crash nor an offline period loses it. This module
//! decides what to send and what the answer means; the HTTP call is the
//! app's ([`Transport`]; `HttpTransport` with the `http-upload` feature is a
//! small blocking one):
//!
//! * **batches** ([`next_batch`]): the oldest waiting reports, at most
//!   [`UploadConfig::max_reports`] and [`UploadConfig::max_bytes`], as JSON
//!   lines (`application/x-ndjson`), one report a line;
//! * **the answer** ([`classify`]): `200` lists accepted, duplicate and
//!   rejected records by record number; a report is **acknowledged** (removed
//!   from the outbox) only if the collector accepted it or answered it as a
//!   duplicate (it was stored before: a retry after a lost answer counts
//!   once); a **rejected** report is kept in the outbox but parked with its
//!   code and reason, out of the retry loop (sending it again would be
//!   rejected again); `408`, `429`, `5xx`, an unreadable `200` and no answer
//!   at all are retried with the same report ids; `413` and `400` halve the
//!   batch (a single report answered so is parked, but only once some batch
//!   of the run was answered per record: an endpoint refusing everything
//!   parks nothing and stops the run); `401`, `404`, `415` and
//!   other 4xx stop the run and keep everything (a configuration error);
//! * **retries** ([`Backoff`]): the i-th retry of a batch waits
//!   `d/2 + U·d/2` with `d = min(cap, base·2^i)` and U uniform in [0, 1)
//!   ("equal jitter": never less than half the exponential step, so a fleet
//!   of phones coming back online at once spreads out, and never zero), and
//!   at least the server's `Retry-After` (capped at `cap`);
//! * the **driver** ([`upload`]): batches until the outbox holds nothing
//!   but parked reports, or a batch failed [`UploadConfig::max_attempts`]
//!   times, or a fatal answer.
//!
//! Exactly once: a report leaves the outbox only after the collector said
//! it is stored (accepted now or before); until then it is sent again with
//! the same `report_id`, which the collector counts once.
//!
//! ```
//! use geopriv::device::outbox::{classify, next_batch, Verdict};
//! let pending = vec![(1, r#"{"report":1}"#.to_string()), (2, r#"{"report":2}"#.to_string())];
//! let batch = next_batch(&pending, &Default::default(), 100, 1 << 20).unwrap();
//! assert_eq!(batch.ids, [1, 2]);
//! let answer = br#"{"accepted":1,"duplicates":[2],"rejected":[],"period":0}"#;
//! let Verdict::Answered { acknowledge, rejected, .. } = classify(&batch, 200, answer, None) else {
//!     unreachable!()
//! };
//! assert_eq!((acknowledge, rejected.len()), (vec![1, 2], 0));
//! ```

use alloc::collections::BTreeSet;
use alloc::format;
use alloc::string::{String, ToString};
use alloc::vec::Vec;
use serde::Deserialize;

/// A report the collector refused (or that cannot be sent): kept in the
/// outbox, out of the retry loop, with why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RejectedReport {
    /// Its outbox id.
    pub id: u64,
    /// The collector's stable code (`task-mismatch`, `malformed`, ...), or
    /// `not-one-line` / `too-large` for a report this side cannot send.
    pub code: String,
    /// Why (the collector's escaped text).
    pub reason: String,
}

/// One upload: the outbox ids of its reports and the request body (their
/// JSON lines, record `i + 1` is `ids[i]`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Batch {
    /// Outbox ids, in the body's order.
    pub ids: Vec<u64>,
    /// `application/x-ndjson` body.
    pub body: String,
}

/// What one answer of the collector means for a batch.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    /// The collector answered per record.
    Answered {
        /// Remove these from the outbox: accepted now, or stored before
        /// (duplicates).
        acknowledge: Vec<u64>,
        /// How many of `acknowledge` were duplicates.
        duplicates: u64,
        /// Refused: park them.
        rejected: Vec<RejectedReport>,
    },
    /// Send the same batch again later (no answer, 408, 429, 5xx, an
    /// unreadable answer), after at least `after_ms` if the server said so.
    Retry {
        /// The server's `Retry-After`, in milliseconds.
        after_ms: Option<u64>,
        /// Why.
        reason: String,
    },
    /// The batch as a whole was refused (413, 400): send it in halves; a
    /// single report answered so is parked with `reason`.
    Split {
        /// The status.
        status: u16,
        /// Why.
        reason: String,
    },
    /// Stop: the request can never succeed as configured (401, 404, 415,
    /// other 4xx); everything stays in the outbox.
    Fatal {
        /// The status.
        status: u16,
        /// Why.
        reason: String,
    },
}

#[derive(Deserialize)]
struct Answer {
    accepted: u64,
    duplicates: Vec<u64>,
    rejected: Vec<AnswerRejected>,
}

#[derive(Deserialize)]
struct AnswerRejected {
    index: u64,
    code: String,
    reason: String,
}

#[derive(Deserialize)]
struct ErrorBody {
    code: Option<String>,
    reason: Option<String>,
}

/// Text of an error body: `code: reason` of the collector's JSON, else the
/// first 200 bytes, lossy.
fn error_text(status: u16, body: &[u8]) -> String {
    if let Ok(ErrorBody { code, reason }) = serde_json::from_slice::<ErrorBody>(body) {
        return format!(
            "HTTP {status} {}: {}",
            code.unwrap_or_default(),
            reason.unwrap_or_default()
        );
    }
    let head = &body[..body.len().min(200)];
    let text: String = String::from_utf8_lossy(head)
        .chars()
        .map(|c| if c.is_control() { ' ' } else { c })
        .collect();
    format!("HTTP {status}: {text}")
}

/// The next batch: the oldest reports of `pending` (outbox order) not in
/// `parked`, at most `max_reports` of them and at most `max_bytes` of body
/// (always at least one report). `None` if nothing is left to send.
///
/// A report that is not one non-blank, non-comment line (the collector skips
/// blank and `#` lines without answering for them) cannot be sent as a JSON line
/// (its record numbers would shift): it is returned alone, with an empty
/// body, and [`classify_local`] parks it.
pub fn next_batch(
    pending: &[(u64, String)],
    parked: &BTreeSet<u64>,
    max_reports: usize,
    max_bytes: usize,
) -> Option<Batch> {
    let mut batch = Batch {
        ids: Vec::new(),
        body: String::new(),
    };
    for (id, report) in pending.iter().filter(|(id, _)| !parked.contains(id)) {
        if !is_one_line(report) {
            if batch.ids.is_empty() {
                batch.ids.push(*id);
                return Some(batch);
            }
            break;
        }
        if !batch.ids.is_empty()
            && (batch.ids.len() >= max_reports.max(1)
                || batch.body.len() + report.len() + 1 > max_bytes)
        {
            break;
        }
        batch.ids.push(*id);
        batch.body.push_str(report);
        batch.body.push('\n');
    }
    (!batch.ids.is_empty()).then_some(batch)
}

/// Whether `report` can go as one record of a JSON-lines body: one line,
/// not blank, and not a line the collector skips without answering for it
/// (blank after a BOM and ASCII whitespace, or a `#` comment: such a
/// record would make every answer's counts disagree with the batch, which
/// would then be retried for ever and block the reports behind it).
fn is_one_line(report: &str) -> bool {
    let body = report
        .strip_prefix('\u{feff}')
        .unwrap_or(report)
        .trim_ascii();
    !report.contains(['\n', '\r'])
        && !report.trim().is_empty()
        && !body.is_empty()
        && !body.starts_with('#')
}

/// A batch [`next_batch`] built with an empty body (its one report is not
/// one line): the parked report.
pub fn classify_local(batch: &Batch) -> Option<RejectedReport> {
    (batch.body.is_empty() && batch.ids.len() == 1).then(|| RejectedReport {
        id: batch.ids[0],
        code: "not-one-line".into(),
        reason: "the outbox report is not one non-blank, non-comment line; it cannot be sent as a JSON line"
            .into(),
    })
}

/// What the collector's answer (`status`, `body`, its `Retry-After`
/// header) means for `batch`. A `200` whose counts do not add up to the
/// batch (accepted + duplicates + rejected), or that names a record the
/// batch does not have, acknowledges nothing and is retried: the report
/// ids make the retry safe.
pub fn classify(batch: &Batch, status: u16, body: &[u8], retry_after: Option<&str>) -> Verdict {
    let after_ms = retry_after
        .and_then(|v| v.trim().parse::<u64>().ok())
        .map(|s| s.saturating_mul(1000));
    match status {
        200 => match serde_json::from_slice::<Answer>(body) {
            Ok(a) => match per_record(batch, &a) {
                Some(v) => v,
                None => Verdict::Retry {
                    after_ms: None,
                    reason: "the collector's answer does not match the batch".into(),
                },
            },
            Err(e) => Verdict::Retry {
                after_ms: None,
                reason: format!("unreadable answer: {e}"),
            },
        },
        408 | 429 | 500..=599 => Verdict::Retry {
            after_ms,
            reason: error_text(status, body),
        },
        400 | 413 => Verdict::Split {
            status,
            reason: error_text(status, body),
        },
        _ => Verdict::Fatal {
            status,
            reason: error_text(status, body),
        },
    }
}

fn per_record(batch: &Batch, a: &Answer) -> Option<Verdict> {
    let n = batch.ids.len() as u64;
    let mut state: Vec<u8> = alloc::vec![0; batch.ids.len()]; // 0 accepted, 1 dup, 2 rejected
    let mut rejected = Vec::new();
    for &i in &a.duplicates {
        let s = state.get_mut(usize::try_from(i.checked_sub(1)?).ok()?)?;
        if *s != 0 {
            return None;
        }
        *s = 1;
    }
    for r in &a.rejected {
        let k = usize::try_from(r.index.checked_sub(1)?).ok()?;
        let s = state.get_mut(k)?;
        if *s != 0 {
            return None;
        }
        *s = 2;
        rejected.push(RejectedReport {
            id: batch.ids[k],
            code: r.code.clone(),
            reason: r.reason.clone(),
        });
    }
    let dups = a.duplicates.len() as u64;
    if a.accepted
        .checked_add(dups)?
        .checked_add(rejected.len() as u64)?
        != n
    {
        return None;
    }
    let acknowledge = batch
        .ids
        .iter()
        .zip(&state)
        .filter(|(_, s)| **s < 2)
        .map(|(id, _)| *id)
        .collect();
    Some(Verdict::Answered {
        acknowledge,
        duplicates: dups,
        rejected,
    })
}

/// Retry delays: the `i`-th retry (from 0) waits
/// `d/2 + U·d/2`, `d = min(cap_ms, base_ms·2^i)`, U uniform in [0, 1).
///
/// ```
/// use geopriv::device::outbox::Backoff;
/// let b = Backoff { base_ms: 1000, cap_ms: 60_000 };
/// let mut rng = geopriv::SecureRng::new();
/// let d = b.delay_ms(3, &mut rng);
/// assert!((4000..8000).contains(&d));
/// assert!(b.delay_ms(40, &mut rng) < 60_000);
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Backoff {
    /// First step in milliseconds.
    pub base_ms: u64,
    /// Largest step in milliseconds.
    pub cap_ms: u64,
}

impl Default for Backoff {
    /// 1 s doubling to 5 minutes.
    fn default() -> Self {
        Backoff {
            base_ms: 1000,
            cap_ms: 300_000,
        }
    }
}

impl Backoff {
    /// The delay before the `attempt`-th retry (0-based), with jitter from
    /// `rng`.
    pub fn delay_ms<R: rand::Rng + ?Sized>(&self, attempt: u32, rng: &mut R) -> u64 {
        let d = self
            .base_ms
            .saturating_mul(1u64 << attempt.min(62))
            .min(self.cap_ms)
            .max(1);
        let half = d / 2;
        half + rng.random_range(0..(d - half))
    }

    /// [`delay_ms`](Self::delay_ms), and at least the server's
    /// `Retry-After` (capped at `cap_ms`).
    pub fn delay_after_ms<R: rand::Rng + ?Sized>(
        &self,
        attempt: u32,
        retry_after_ms: Option<u64>,
        rng: &mut R,
    ) -> u64 {
        let d = self.delay_ms(attempt, rng);
        d.max(retry_after_ms.unwrap_or(0).min(self.cap_ms))
    }
}

/// Settings of [`upload`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct UploadConfig {
    /// Most reports per request (the collector's `--max-batch` is 1000 by
    /// default; 100 is its measured sweet spot).
    pub max_reports: usize,
    /// Most body bytes per request (the collector's default limit is
    /// 4 MiB).
    pub max_bytes: usize,
    /// Attempts of one batch before the run stops (the reports stay in the
    /// outbox for the next run).
    pub max_attempts: u32,
    /// Retry delays.
    pub backoff: Backoff,
}

impl Default for UploadConfig {
    fn default() -> Self {
        UploadConfig {
            max_reports: 100,
            max_bytes: 1 << 20,
            max_attempts: 6,
            backoff: Backoff::default(),
        }
    }
}

/// The collector's answer to one POST, as the transport got it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HttpAnswer {
    /// The status code.
    pub status: u16,
    /// The body (the uploader reads at most a few MB of it).
    pub body: Vec<u8>,
    /// The `Retry-After` header, if any.
    pub retry_after: Option<String>,
}

/// One POST of an `application/x-ndjson` body to the task's upload URL
/// (`POST /v1/tasks/{task}/reports`): the answer, or why there was none
/// (then the batch is retried).
pub trait Transport {
    /// Send `body`.
    fn post(&mut self, body: &[u8]) -> core::result::Result<HttpAnswer, String>;
}

/// Where the waiting reports are: a ledger's outbox.
pub trait OutboxStore {
    /// The waiting reports, oldest first, with their ids.
    fn pending(&mut self) -> crate::Result<Vec<(u64, String)>>;
    /// Remove these (durably) once the collector stored them.
    fn acknowledge(&mut self, ids: &[u64]) -> crate::Result<()>;
}

#[cfg(feature = "std")]
impl OutboxStore for super::budget::FileLedger {
    /// [`FileLedger::uploadable_reports`](super::budget::FileLedger::uploadable_reports):
    /// a counter left behind the file is advanced first (attack15 O1).
    fn pending(&mut self) -> crate::Result<Vec<(u64, String)>> {
        self.uploadable_reports()
    }
    fn acknowledge(&mut self, ids: &[u64]) -> crate::Result<()> {
        super::budget::FileLedger::acknowledge(self, ids)
    }
}

/// What one [`upload`] run did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct UploadSummary {
    /// Reports the collector stored now.
    pub accepted: u64,
    /// Reports it had stored before (a retry after a lost answer, or
    /// another uploader's copy): acknowledged, counted once.
    pub duplicates: u64,
    /// Reports parked this run (kept in the outbox, not retried).
    pub rejected: Vec<RejectedReport>,
    /// Requests sent (answered or not).
    pub requests: u64,
    /// Reports still waiting (parked ones included).
    pub remaining: usize,
    /// Why the run stopped before the outbox was empty, if it did.
    pub stopped: Option<String>,
}

/// Upload everything waiting in `store` through `transport`: batches,
/// retries with [`Backoff`] (`sleep` waits the given milliseconds),
/// acknowledging what the collector stored and parking what it refused
/// (added to `parked`, which also holds the ids parked by earlier runs).
/// Returns `Err` only if the store fails; every network or server
/// failure ends in [`UploadSummary::stopped`] with the reports kept.
///
/// A single report refused as a whole (`400`, `413`) is parked only if the
/// endpoint still answers per record (`200`): an endpoint that refuses
/// every request so (a proxy, a firewall, a wrong `--url` that reaches
/// another server) would otherwise park the whole outbox one report at a
/// time, and parked reports are never sent again. Such a refusal is
/// confirmed by a later per-record answer in the same run; the refusals
/// after the last one stand only if there is exactly one of them and some
/// batch of the run was answered (one bad report at the end of the
/// outbox). Otherwise (no batch answered, or two or more single reports
/// refused in a row at the end: the endpoint turned to refusing, attack11
/// O1) the run ends with `stopped` and those reports are not parked; they
/// are sent again next run.
pub fn upload<S, T, R>(
    store: &mut S,
    transport: &mut T,
    config: &UploadConfig,
    parked: &mut BTreeSet<u64>,
    sleep: &mut dyn FnMut(u64),
    rng: &mut R,
) -> crate::Result<UploadSummary>
where
    S: OutboxStore + ?Sized,
    T: Transport + ?Sized,
    R: rand::Rng + ?Sized,
{
    let mut run = UploadRun::default();
    upload_loop(store, transport, config, parked, sleep, rng, &mut run)?;
    let UploadRun {
        mut summary,
        split_parked,
        answered,
    } = run;
    if !split_parked.is_empty() && (!answered || split_parked.len() >= 2) {
        // No per-record answer came after these refusals: the endpoint, not
        // these reports, refused them. Keep them in the retry loop.
        for id in &split_parked {
            parked.remove(id);
        }
        summary.rejected.retain(|r| !split_parked.contains(&r.id));
        let why = summary
            .stopped
            .take()
            .map(|s| format!(" ({s})"))
            .unwrap_or_default();
        summary.stopped = Some(format!(
            "{} request(s) of a single report were refused as a whole (HTTP 400 or 413) with no \
             per-record answer after them: those reports are not parked; check the collector's URL \
             and any proxy{why}",
            split_parked.len()
        ));
        summary.remaining = store.pending()?.len();
    }
    Ok(summary)
}

/// The state of one [`upload`] run that its loop updates.
#[derive(Default)]
struct UploadRun {
    /// What the run returns.
    summary: UploadSummary,
    /// Reports parked because they were refused alone as a whole (400/413)
    /// since the last per-record answer.
    split_parked: Vec<u64>,
    /// Whether any batch of this run was answered per record.
    answered: bool,
}

/// [`upload`]'s loop; notes the reports it parks on a whole-request
/// refusal of a single report in `run.split_parked` (cleared by a
/// per-record answer, which confirms them), and sets `run.answered` on a
/// per-record answer.
fn upload_loop<S, T, R>(
    store: &mut S,
    transport: &mut T,
    config: &UploadConfig,
    parked: &mut BTreeSet<u64>,
    sleep: &mut dyn FnMut(u64),
    rng: &mut R,
    run: &mut UploadRun,
) -> crate::Result<()>
where
    S: OutboxStore + ?Sized,
    T: Transport + ?Sized,
    R: rand::Rng + ?Sized,
{
    let UploadRun {
        summary,
        split_parked,
        answered,
    } = run;
    let mut max_reports = config.max_reports.max(1);
    let mut attempt = 0u32;
    loop {
        let pending = store.pending()?;
        let Some(batch) = next_batch(&pending, parked, max_reports, config.max_bytes) else {
            summary.remaining = pending.len();
            return Ok(());
        };
        if let Some(r) = classify_local(&batch) {
            parked.insert(r.id);
            summary.rejected.push(r);
            continue;
        }
        summary.requests += 1;
        let verdict = match transport.post(batch.body.as_bytes()) {
            Ok(a) => classify(&batch, a.status, &a.body, a.retry_after.as_deref()),
            Err(e) => Verdict::Retry {
                after_ms: None,
                reason: format!("no answer: {e}"),
            },
        };
        match verdict {
            Verdict::Answered {
                acknowledge,
                duplicates,
                rejected,
            } => {
                *answered = true;
                split_parked.clear();
                store.acknowledge(&acknowledge)?;
                summary.duplicates += duplicates;
                summary.accepted += acknowledge.len() as u64 - duplicates;
                for r in rejected {
                    parked.insert(r.id);
                    summary.rejected.push(r);
                }
                attempt = 0;
            }
            Verdict::Retry { after_ms, reason } => {
                attempt += 1;
                if attempt >= config.max_attempts.max(1) {
                    summary.stopped = Some(format!(
                        "gave up after {attempt} attempts of one batch: {reason}"
                    ));
                    summary.remaining = store.pending()?.len();
                    return Ok(());
                }
                sleep(config.backoff.delay_after_ms(attempt - 1, after_ms, rng));
            }
            Verdict::Split { status, reason } => {
                if batch.ids.len() == 1 {
                    let r = RejectedReport {
                        id: batch.ids[0],
                        code: if status == 413 {
                            "too-large".into()
                        } else {
                            "bad-request".into()
                        },
                        reason,
                    };
                    parked.insert(r.id);
                    split_parked.push(r.id);
                    summary.rejected.push(r);
                } else {
                    max_reports = (batch.ids.len() / 2).max(1);
                }
            }
            Verdict::Fatal { reason, .. } => {
                summary.stopped = Some(reason.to_string());
                summary.remaining = pending.len();
                return Ok(());
            }
        }
    }
}

/// A blocking HTTP transport (ureq; feature `http-upload`, plain http;
/// `https-upload` adds TLS): POSTs JSON lines to a task's upload URL,
/// `{collector}/v1/tasks/{task}/reports`.
///
/// ```no_run
/// use geopriv::device::outbox::{upload, HttpTransport, UploadConfig};
/// # fn f(ledger: &mut geopriv::device::budget::FileLedger) -> geopriv::Result<()> {
/// let mut http = HttpTransport::new("http://127.0.0.1:8080", "income");
/// let mut parked = Default::default();
/// let s = upload(ledger, &mut http, &UploadConfig::default(), &mut parked,
///     &mut |ms| std::thread::sleep(std::time::Duration::from_millis(ms)),
///     &mut geopriv::SecureRng::new())?;
/// println!("{} accepted, {} duplicates, {} rejected", s.accepted, s.duplicates, s.rejected.len());
/// # Ok(()) }
/// ```
#[cfg(feature = "http-upload")]
pub struct HttpTransport {
    agent: ureq::Agent,
    url: String,
}

#[cfg(feature = "http-upload")]
impl HttpTransport {
    /// Most bytes of an answer read (an upload answer lists at most one
    /// rejection per record).
    pub const MAX_ANSWER_BYTES: u64 = 16 << 20;

    /// The transport for task `task` of the collector at `collector`
    /// (`http://host:port`), with a 10 s connect and 60 s request timeout.
    pub fn new(collector: &str, task: &str) -> Self {
        Self::with_url(&format!(
            "{}/v1/tasks/{task}/reports",
            collector.trim_end_matches('/')
        ))
    }

    /// The transport for an explicit upload URL.
    pub fn with_url(url: &str) -> Self {
        let agent: ureq::Agent = ureq::Agent::config_builder()
            .http_status_as_error(false)
            .timeout_connect(Some(std::time::Duration::from_secs(10)))
            .timeout_global(Some(std::time::Duration::from_secs(60)))
            .build()
            .into();
        HttpTransport {
            agent,
            url: url.to_string(),
        }
    }
}

#[cfg(feature = "http-upload")]
impl Transport for HttpTransport {
    fn post(&mut self, body: &[u8]) -> core::result::Result<HttpAnswer, String> {
        let mut resp = self
            .agent
            .post(&self.url)
            .header("content-type", "application/x-ndjson")
            .send(body)
            .map_err(|e| e.to_string())?;
        let status = resp.status().as_u16();
        let retry_after = resp
            .headers()
            .get("retry-after")
            .and_then(|v| v.to_str().ok())
            .map(str::to_string);
        let body = resp
            .body_mut()
            .with_config()
            .limit(Self::MAX_ANSWER_BYTES)
            .read_to_vec()
            .map_err(|e| e.to_string())?;
        Ok(HttpAnswer {
            status,
            body,
            retry_after,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use alloc::vec;
    use rand::SeedableRng;

    fn pending(n: u64) -> Vec<(u64, String)> {
        (1..=n).map(|i| (i, format!("{{\"r\":{i}}}"))).collect()
    }

    #[test]
    fn batches_respect_counts_bytes_and_parked_ids() {
        let p = pending(10);
        let parked: BTreeSet<u64> = [1, 2].into_iter().collect();
        let b = next_batch(&p, &parked, 3, 1 << 20).unwrap();
        assert_eq!(b.ids, [3, 4, 5]);
        assert_eq!(b.body, "{\"r\":3}\n{\"r\":4}\n{\"r\":5}\n");
        // 8 bytes a line: 20 bytes hold two, a tiny limit still sends one.
        assert_eq!(next_batch(&p, &parked, 100, 20).unwrap().ids, [3, 4]);
        assert_eq!(next_batch(&p, &parked, 100, 1).unwrap().ids, [3]);
        let all: BTreeSet<u64> = (1..=10).collect();
        assert!(next_batch(&p, &all, 3, 100).is_none());
        // A multi-line report goes alone and is parked locally.
        let odd = vec![(1, "{}\n{}".to_string()), (2, "{}".to_string())];
        let b = next_batch(&odd, &Default::default(), 10, 100).unwrap();
        assert_eq!(classify_local(&b).unwrap().code, "not-one-line");
        let odd = vec![(2, "{}".to_string()), (3, " ".to_string())];
        assert_eq!(
            next_batch(&odd, &Default::default(), 10, 100).unwrap().ids,
            [2]
        );
    }

    #[test]
    fn answers_acknowledge_only_what_the_collector_stored() {
        let b = next_batch(&pending(4), &Default::default(), 10, 1000).unwrap();
        let body = br#"{"accepted":2,"duplicates":[3],"rejected":[{"index":2,"code":"task-mismatch","reason":"x"}],"period":0}"#;
        assert_eq!(
            classify(&b, 200, body, None),
            Verdict::Answered {
                acknowledge: vec![1, 3, 4],
                duplicates: 1,
                rejected: vec![RejectedReport {
                    id: 2,
                    code: "task-mismatch".into(),
                    reason: "x".into()
                }],
            }
        );
        // Answers that do not fit the batch acknowledge nothing.
        for bad in [
            &br#"{"accepted":4,"duplicates":[3],"rejected":[],"period":0}"#[..],
            br#"{"accepted":3,"duplicates":[5],"rejected":[],"period":0}"#,
            br#"{"accepted":3,"duplicates":[0],"rejected":[],"period":0}"#,
            br#"{"accepted":2,"duplicates":[3,3],"rejected":[],"period":0}"#,
            br#"{"accepted":2,"duplicates":[1],"rejected":[{"index":1,"code":"a","reason":"b"}]}"#,
            b"<html>proxy</html>",
        ] {
            assert!(
                matches!(classify(&b, 200, bad, None), Verdict::Retry { .. }),
                "{}",
                String::from_utf8_lossy(bad)
            );
        }
        let e = br#"{"code":"unavailable","reason":"disk full"}"#;
        assert_eq!(
            classify(&b, 503, e, Some("7")),
            Verdict::Retry {
                after_ms: Some(7000),
                reason: "HTTP 503 unavailable: disk full".into()
            }
        );
        assert!(matches!(
            classify(&b, 429, b"", None),
            Verdict::Retry { .. }
        ));
        assert!(matches!(
            classify(&b, 413, b"", None),
            Verdict::Split { .. }
        ));
        assert!(matches!(
            classify(&b, 404, e, None),
            Verdict::Fatal { status: 404, .. }
        ));
        assert!(
            matches!(classify(&b, 401, b"\x1b[2J", None), Verdict::Fatal { reason, .. } if !reason.contains('\x1b'))
        );
    }

    #[test]
    fn backoff_doubles_with_jitter_and_honours_retry_after() {
        let b = Backoff {
            base_ms: 100,
            cap_ms: 10_000,
        };
        let mut rng = rand_chacha::ChaCha20Rng::seed_from_u64(1);
        for attempt in 0..70 {
            let d = (100u64 << attempt.min(40)).min(10_000);
            for _ in 0..50 {
                let x = b.delay_ms(attempt, &mut rng);
                assert!(x >= d / 2 && x < d.max(1), "{attempt}: {x}");
            }
        }
        // Jitter: not all equal.
        let xs: BTreeSet<u64> = (0..20).map(|_| b.delay_ms(5, &mut rng)).collect();
        assert!(xs.len() > 10);
        assert_eq!(b.delay_after_ms(0, Some(5000), &mut rng), 5000);
        assert_eq!(b.delay_after_ms(0, Some(u64::MAX), &mut rng), 10_000);
    }

    /// A collector in memory: stores ids once; `lose` drops the answer of
    /// that many requests after storing (a lost response); `down` fails
    /// that many requests before storing anything.
    struct FakeCollector {
        stored: BTreeSet<String>,
        lose: u32,
        down: u32,
        reject: String,
    }

    impl Transport for FakeCollector {
        fn post(&mut self, body: &[u8]) -> core::result::Result<HttpAnswer, String> {
            if self.down > 0 {
                self.down -= 1;
                return Err("connection refused".into());
            }
            let text = core::str::from_utf8(body).unwrap();
            let (mut acc, mut dups, mut rej) = (0, vec![], vec![]);
            for (i, line) in text.lines().enumerate() {
                if line == self.reject {
                    rej.push(format!(
                        "{{\"index\":{},\"code\":\"malformed\",\"reason\":\"no\"}}",
                        i + 1
                    ));
                } else if self.stored.insert(line.to_string()) {
                    acc += 1;
                } else {
                    dups.push(i + 1);
                }
            }
            if self.lose > 0 {
                self.lose -= 1;
                return Err("connection reset".into());
            }
            Ok(HttpAnswer {
                status: 200,
                body: format!(
                    "{{\"accepted\":{acc},\"duplicates\":{dups:?},\"rejected\":[{}],\"period\":0}}",
                    rej.join(",")
                )
                .into_bytes(),
                retry_after: None,
            })
        }
    }

    struct MemStore(Vec<(u64, String)>);
    impl OutboxStore for MemStore {
        fn pending(&mut self) -> crate::Result<Vec<(u64, String)>> {
            Ok(self.0.clone())
        }
        fn acknowledge(&mut self, ids: &[u64]) -> crate::Result<()> {
            self.0.retain(|(i, _)| !ids.contains(i));
            Ok(())
        }
    }

    #[test]
    fn offline_then_lost_answers_upload_everything_once_and_park_rejections() {
        let mut store = MemStore(pending(250));
        store.0[7].1 = "bad".into();
        let mut c = FakeCollector {
            stored: BTreeSet::new(),
            lose: 2,
            down: 3,
            reject: "bad".into(),
        };
        let mut slept = vec![];
        let mut parked = BTreeSet::new();
        let cfg = UploadConfig::default();
        let mut rng = rand_chacha::ChaCha20Rng::seed_from_u64(2);
        let s = upload(
            &mut store,
            &mut c,
            &cfg,
            &mut parked,
            &mut |ms| slept.push(ms),
            &mut rng,
        )
        .unwrap();
        assert_eq!(s.stopped, None);
        assert_eq!(c.stored.len(), 249);
        assert_eq!(s.accepted + s.duplicates, 249);
        // The first batch was stored twice over a lost answer: its last
        // retry is answered with 99 duplicates (and the rejected one).
        assert_eq!(s.duplicates, 99);
        assert_eq!(s.rejected.len(), 1);
        assert_eq!(s.rejected[0].id, 8);
        assert_eq!(store.0, vec![(8, "bad".to_string())]);
        assert_eq!(s.remaining, 1);
        assert_eq!(slept.len(), 5);
        // Five failures of one batch in a row: growing delays.
        assert!(slept[1] >= 1000 && slept[2] >= 2000);
        // A second run sends nothing (the rejected one stays parked).
        let s = upload(&mut store, &mut c, &cfg, &mut parked, &mut |_| {}, &mut rng).unwrap();
        assert_eq!((s.requests, s.remaining), (0, 1));
    }

    #[test]
    fn a_collector_that_stays_down_stops_the_run_and_keeps_everything() {
        let mut store = MemStore(pending(5));
        let mut c = FakeCollector {
            stored: BTreeSet::new(),
            lose: 0,
            down: 100,
            reject: String::new(),
        };
        let cfg = UploadConfig {
            max_attempts: 3,
            ..Default::default()
        };
        let mut rng = rand_chacha::ChaCha20Rng::seed_from_u64(3);
        let s = upload(
            &mut store,
            &mut c,
            &cfg,
            &mut BTreeSet::new(),
            &mut |_| {},
            &mut rng,
        )
        .unwrap();
        assert!(s.stopped.unwrap().contains("gave up after 3"));
        assert_eq!((s.requests, s.remaining, store.0.len()), (3, 5, 5));
    }

    /// attack9: an endpoint that refuses every request as a whole (a proxy
    /// answering 400 or 413 to everything, or a wrong URL that reaches
    /// another server) parked the whole outbox one report at a time (100
    /// of 100 after 106 requests), and parked reports are never sent
    /// again. Without a single per-record answer nothing is parked now;
    /// once the collector answers, the report it refuses alone is parked
    /// as before.
    #[test]
    fn an_endpoint_refusing_everything_parks_nothing() {
        struct Refuse(u16, u32);
        impl Transport for Refuse {
            fn post(&mut self, _: &[u8]) -> core::result::Result<HttpAnswer, String> {
                self.1 += 1;
                Ok(HttpAnswer {
                    status: self.0,
                    body: b"{\"code\":\"bad-request\",\"reason\":\"proxy says no\"}".to_vec(),
                    retry_after: None,
                })
            }
        }
        for status in [400, 413] {
            let mut store = MemStore(pending(100));
            let mut parked = BTreeSet::new();
            let mut t = Refuse(status, 0);
            let mut rng = rand_chacha::ChaCha20Rng::seed_from_u64(5);
            let cfg = UploadConfig::default();
            let s = upload(&mut store, &mut t, &cfg, &mut parked, &mut |_| {}, &mut rng).unwrap();
            assert!(parked.is_empty(), "{status}: {} parked", parked.len());
            assert!(s.rejected.is_empty(), "{status}");
            assert!(s.stopped.unwrap().contains("are not parked"), "{status}");
            assert_eq!((s.remaining, store.0.len()), (100, 100));
            // The next run (the URL fixed) sends them all.
            let mut c = FakeCollector {
                stored: BTreeSet::new(),
                lose: 0,
                down: 0,
                reject: String::new(),
            };
            let s = upload(&mut store, &mut c, &cfg, &mut parked, &mut |_| {}, &mut rng).unwrap();
            assert_eq!((s.accepted, s.remaining, s.stopped), (100, 0, None));
        }
        // A report the collector refuses alone, first in the outbox: parked
        // once the reports behind it are answered (the collector works).
        struct BigFirst;
        impl Transport for BigFirst {
            fn post(&mut self, body: &[u8]) -> core::result::Result<HttpAnswer, String> {
                let n = body.iter().filter(|&&b| b == b'\n').count();
                let (status, body) = if body.windows(3).any(|w| w == b"BIG") {
                    (413, b"{}".to_vec())
                } else {
                    let a = format!("{{\"accepted\":{n},\"duplicates\":[],\"rejected\":[]}}");
                    (200, a.into_bytes())
                };
                Ok(HttpAnswer {
                    status,
                    body,
                    retry_after: None,
                })
            }
        }
        let mut store = MemStore(pending(10));
        store.0[0].1 = "\"BIG\"".into();
        let mut parked = BTreeSet::new();
        let mut rng = rand_chacha::ChaCha20Rng::seed_from_u64(6);
        let cfg = UploadConfig::default();
        let s = upload(
            &mut store,
            &mut BigFirst,
            &cfg,
            &mut parked,
            &mut |_| {},
            &mut rng,
        )
        .unwrap();
        assert_eq!((s.accepted, s.remaining, s.stopped), (9, 1, None));
        assert_eq!((s.rejected.len(), parked.len()), (1, 1));
        assert_eq!(s.rejected[0].code, "too-large");
    }

    #[test]
    fn too_large_halves_the_batch_and_parks_a_single_report() {
        struct Limit(usize, u32);
        impl Transport for Limit {
            fn post(&mut self, body: &[u8]) -> core::result::Result<HttpAnswer, String> {
                self.1 += 1;
                let n = body.iter().filter(|&&b| b == b'\n').count();
                let big = body.windows(3).any(|w| w == b"BIG");
                if n > self.0 || big {
                    return Ok(HttpAnswer {
                        status: 413,
                        body: b"{\"code\":\"too-large\",\"reason\":\"split\"}".to_vec(),
                        retry_after: None,
                    });
                }
                Ok(HttpAnswer {
                    status: 200,
                    body: format!("{{\"accepted\":{n},\"duplicates\":[],\"rejected\":[]}}")
                        .into_bytes(),
                    retry_after: None,
                })
            }
        }
        let mut store = MemStore(pending(40));
        store.0.push((41, "\"BIG\"".into()));
        let mut t = Limit(12, 0);
        let mut rng = rand_chacha::ChaCha20Rng::seed_from_u64(4);
        let s = upload(
            &mut store,
            &mut t,
            &UploadConfig::default(),
            &mut BTreeSet::new(),
            &mut |_| {},
            &mut rng,
        )
        .unwrap();
        assert_eq!(s.accepted, 40);
        assert_eq!(s.rejected[0].code, "too-large");
        assert_eq!(store.0.len(), 1);
    }
}
