//! The hardened server of the CLI's `geopriv aggregate`, for back-ends that
//! call the library (core: `geopriv::server::ingest`, `geopriv::server::clip`,
//! `geopriv::server::robust`; docs/MATH.md §10).
//!
//! * [`ServerConfig`]: the clipping level (bounded influence), the robust
//!   estimator and the memory limits, with the CLI's defaults.
//! * [`ReportServer`]: validates reports with a `ReportPolicy`, groups them
//!   by (query, mechanism, ε, δ), clips each value to its group's public
//!   bound B and aggregates it exactly. Reports come one at a time, in
//!   batches (one call across the boundary per batch: `add_json_batch`,
//!   `add_bytes_batch`) or as a byte stream (`ingest`, the CLI's reader).
//!   Each bad record is rejected by itself with its number and an escaped,
//!   cut reason; it never fails the batch. Estimates carry B, the honest
//!   bias bound and the influence bound width(B)/n. Partial states
//!   (`to_json`) merge exactly (`merge_json`), bit for bit the result of one
//!   server fed every report.
//! * Report ids: a server counts each `report_id` once, with the rule and
//!   the code of `geopriv aggregate` (core `Dedup`, docs/MATH.md §10.11):
//!   in the order the server receives its records, a report whose id a
//!   report *accepted* before carried is dropped as a duplicate (counted in
//!   `duplicates`, neither accepted nor rejected); an id is remembered only
//!   once its report is accepted, so a refused record never censors a
//!   later valid one. At most `ServerConfig.max_report_ids` ids are
//!   remembered (2^20 by default, about 36 MB once full and at most about
//!   54 MB while the set doubles, the CLI's
//!   `--max-report-ids`); past that, as in the CLI, new ids are accepted
//!   without being remembered and counted in `unchecked` (a later repeat
//!   of one of them is counted again). The ids live in one server only: a
//!   partial state (`to_json`) carries none, so merging the states of two
//!   servers counts an id both saw twice (as for two collectors). To count
//!   ids once across shards, send every copy of an id to the same server
//!   (what `geopriv.spark` does).

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use geopriv::server::clip::{ClipLevel, ClipPolicy};
use geopriv::server::ingest::{
    AggregationConfig, AggregatorState, Counts, Decoded, Dedup, Estimator, FormatChoice,
    IngestError, JsonColumnDecoder, RecordReader, RecordRejection, ReportAggregator,
    DEFAULT_MAX_RECORD_BYTES, MAX_GROUPS_LIMIT, MAX_RECORD_BYTES_LIMIT,
};
use geopriv::{QueryDescriptor, Report};

use crate::aggregate::Estimate;
use crate::report::{ReceivedReport, ReportPolicy};
use crate::{guard, lock, GeoprivError, MechanismName};

/// Rejections listed one by one per batch (all are counted by code).
pub const MAX_LISTED_REJECTIONS: usize = 1000;

/// Default of `ServerConfig.max_report_ids` (and of `MapServer`): 2^20
/// ids, about 36 MB once full, at most about 54 MB while the set doubles
/// (`geopriv aggregate --max-report-ids`).
pub const DEFAULT_MAX_REPORT_IDS: u64 = 1 << 20;

/// Largest `max_report_ids` (2^26 ids, about 2.3 GB once full, at most
/// about 3.4 GB while the set doubles; the CLI's
/// limit).
pub const MAX_REPORT_IDS_LIMIT: u64 = 1 << 26;

/// Check a `max_report_ids` setting (0..=2^26, as the CLI).
pub(crate) fn report_ids_cap(max_report_ids: u64) -> Result<usize, GeoprivError> {
    if max_report_ids > MAX_REPORT_IDS_LIMIT {
        return Err(GeoprivError::InvalidParameter(format!(
            "max_report_ids must be at most {MAX_REPORT_IDS_LIMIT}, got {max_report_ids}"
        )));
    }
    Ok(max_report_ids as usize)
}

/// The message of a dropped duplicate (single-report calls raise it as
/// `InvalidReport`; batches count it in `duplicates`).
pub(crate) const DUPLICATE_MESSAGE: &str =
    "a report with this report_id was accepted before: counted once [duplicate]";

/// How [`ReportServer::ingest`] reads a byte stream.
#[derive(Debug, Clone, Copy, PartialEq, Eq, uniffi::Enum)]
pub enum InputFormat {
    /// Decided per record: a record ends at the first newline or 0x00 and
    /// is a JSON line if it decodes as one, else a binary frame if the
    /// bytes up to the next 0x00 decode as a report, else rejected by
    /// itself (a stray frame or garbage line costs only itself).
    Auto,
    /// One JSON report per line.
    Json,
    /// COBS-framed binary reports, each followed by a 0x00 byte.
    Binary,
}

/// Clipping, estimator and limits of a [`ReportServer`], immutable; the
/// `with_*` methods return a changed copy. The defaults are those of
/// `geopriv aggregate`: clipping at the smallest z whose honest bias is at
/// most 0.1 standard error at 10^6 reports per group (`--clip-n 1000000
/// --clip-bias-se 0.1`), the mean only, at most 4096 (query, mechanism, ε,
/// δ) groups and records of at most 65536 bytes.
#[derive(Debug, Clone, uniffi::Object)]
pub struct ServerConfig {
    config: AggregationConfig,
    max_record_bytes: usize,
    max_report_ids: usize,
}

impl ServerConfig {
    fn with(&self, f: impl FnOnce(&mut Self)) -> Arc<Self> {
        let mut c = self.clone();
        f(&mut c);
        Arc::new(c)
    }
}

#[uniffi::export]
impl ServerConfig {
    /// The CLI's defaults (type docs).
    #[uniffi::constructor]
    pub fn new() -> Arc<Self> {
        Arc::new(Self {
            config: AggregationConfig::default(),
            max_record_bytes: DEFAULT_MAX_RECORD_BYTES,
            max_report_ids: DEFAULT_MAX_REPORT_IDS as usize,
        })
    }

    /// Remember at most this many report ids (0..=2^26; default 2^20, the
    /// CLI's `--max-report-ids`): each id costs at most about 34 bytes.
    /// Past the bound new ids are accepted without being remembered and
    /// counted in `IngestCounts.unchecked` (module docs).
    pub fn with_max_report_ids(
        &self,
        max_report_ids: u64,
    ) -> Result<Arc<ServerConfig>, GeoprivError> {
        guard(|| {
            let cap = report_ids_cap(max_report_ids)?;
            Ok(self.with(|c| c.max_report_ids = cap))
        })
    }

    /// The largest number of report ids remembered.
    pub fn max_report_ids(&self) -> u64 {
        self.max_report_ids as u64
    }

    /// Clip at the smallest z whose honest bias is at most `bias_to_se`
    /// standard errors at `deployment_n` reports per group (`--clip-n`,
    /// `--clip-bias-se`); `deployment_n` >= 1, `bias_to_se` finite > 0.
    pub fn with_clip_target(
        &self,
        deployment_n: u64,
        bias_to_se: f64,
    ) -> Result<Arc<ServerConfig>, GeoprivError> {
        guard(|| {
            if deployment_n == 0 {
                return Err(GeoprivError::InvalidParameter(
                    "deployment_n must be at least 1".into(),
                ));
            }
            if !(bias_to_se.is_finite() && bias_to_se > 0.0) {
                return Err(GeoprivError::InvalidParameter(format!(
                    "bias_to_se must be finite and > 0, got {bias_to_se}"
                )));
            }
            // As `geopriv aggregate --clip-n/--clip-bias-se` (issue 19 item
            // 14): a target no level reaches would reject every report.
            if let Some((name, e)) =
                geopriv::server::clip::unreachable_clip_target(deployment_n, bias_to_se)
            {
                return Err(GeoprivError::InvalidParameter(format!(
                    "bias_to_se {bias_to_se:e} at deployment_n {deployment_n}: no clipping level reaches it for {name} reports ({e}); every report would be rejected"
                )));
            }
            Ok(self.with(|c| {
                c.config.clip = Some(ClipLevel::Auto {
                    deployment_n,
                    bias_to_se,
                })
            }))
        })
    }

    /// Clip each report to B = [f_min − z·σ_max, f_max + z·σ_max] with this
    /// z (finite, >= 0; `--clip-z`).
    pub fn with_clip_z(&self, z: f64) -> Result<Arc<ServerConfig>, GeoprivError> {
        guard(|| {
            // As `geopriv aggregate --clip-z` and the map server: beyond
            // MAX_CLIP_Z the bound z·σ_max overflows or bounds nothing.
            if !(z.is_finite() && (0.0..=crate::map::MAX_CLIP_Z).contains(&z)) {
                return Err(GeoprivError::InvalidParameter(format!(
                    "the clipping level z must be finite and in [0, {}], got {z}",
                    crate::map::MAX_CLIP_Z
                )));
            }
            Ok(self.with(|c| c.config.clip = Some(ClipLevel::Fixed(z))))
        })
    }

    /// No clipping (`--no-clip`): one report can then move a mean
    /// arbitrarily far.
    pub fn without_clipping(&self) -> Arc<ServerConfig> {
        self.with(|c| c.config.clip = None)
    }

    /// Also estimate the median of the means of `buckets` buckets
    /// (2..=1024; `--estimator median-of-means --buckets K`). Its state
    /// depends on the order of the reports, so such a server's states do
    /// not merge (`merge_json` refuses them).
    pub fn with_median_of_means(&self, buckets: u32) -> Result<Arc<ServerConfig>, GeoprivError> {
        guard(|| {
            geopriv::server::robust::MedianOfMeans::new(buckets)?;
            Ok(self.with(|c| c.config.estimator = Estimator::MedianOfMeans { buckets }))
        })
    }

    /// At most this many (query, mechanism, ε, δ) groups (1..=1048576;
    /// `--max-queries`); a report that would open one more is rejected
    /// (`[too-many-groups]`).
    pub fn with_max_queries(&self, max_queries: u64) -> Result<Arc<ServerConfig>, GeoprivError> {
        guard(|| {
            if max_queries == 0 || max_queries > MAX_GROUPS_LIMIT as u64 {
                return Err(GeoprivError::InvalidParameter(format!(
                    "max_queries must be between 1 and {MAX_GROUPS_LIMIT}, got {max_queries}"
                )));
            }
            Ok(self.with(|c| c.config.max_groups = max_queries as usize))
        })
    }

    /// Records of at most this many bytes (1..=67108864;
    /// `--max-record-bytes`); longer ones are rejected (`[too-long]`).
    pub fn with_max_record_bytes(&self, bytes: u64) -> Result<Arc<ServerConfig>, GeoprivError> {
        guard(|| {
            if bytes == 0 || bytes > MAX_RECORD_BYTES_LIMIT as u64 {
                return Err(GeoprivError::InvalidParameter(format!(
                    "max_record_bytes must be between 1 and {MAX_RECORD_BYTES_LIMIT}, got {bytes}"
                )));
            }
            Ok(self.with(|c| c.max_record_bytes = bytes as usize))
        })
    }

    /// Whether reports are clipped.
    pub fn clips(&self) -> bool {
        self.config.clip.is_some()
    }

    /// The largest number of groups.
    pub fn max_queries(&self) -> u64 {
        self.config.max_groups as u64
    }

    /// The largest record in bytes.
    pub fn max_record_bytes(&self) -> u64 {
        self.max_record_bytes as u64
    }

    /// The clipping bound of the group of `report` (its query, mechanism,
    /// ε and δ; the mechanism's default calibration), or `null` without
    /// clipping: the interval B every value of the group is clamped to.
    pub fn clip_bound(&self, report: ReceivedReport) -> Result<Option<ClipBound>, GeoprivError> {
        guard(|| {
            let Some(level) = self.config.clip else {
                return Ok(None);
            };
            let query: QueryDescriptor = report.query_id.parse()?;
            let p = ClipPolicy::for_reports(
                &query,
                report.mechanism,
                report.epsilon,
                report.delta,
                level,
            )?;
            let [lower, upper] = p.bounds();
            Ok(Some(ClipBound {
                lower,
                upper,
                z: p.z(),
                sigma_max: p.sigma_max(),
                bias_bound: p.bias_bound(),
            }))
        })
    }
}

/// The public clipping interval B = [lower, upper] of one group.
#[derive(Debug, Clone, PartialEq, uniffi::Record)]
pub struct ClipBound {
    /// f_min − z·σ_max.
    pub lower: f64,
    /// f_max + z·σ_max.
    pub upper: f64,
    /// The level z, in units of σ_max.
    pub z: f64,
    /// σ_max, the largest honest noise scale of the group.
    pub sigma_max: f64,
    /// σ_max · E[(|Z| − z)+]: the largest bias clipping can cause in the
    /// mean of honest reports.
    pub bias_bound: f64,
}

/// The public clipping numbers that come with an estimate.
#[derive(Debug, Clone, PartialEq, uniffi::Record)]
pub struct ClipSummary {
    /// Lower end of B.
    pub lower: f64,
    /// Upper end of B.
    pub upper: f64,
    /// The level z, in units of σ_max.
    pub z: f64,
    /// σ_max.
    pub sigma_max: f64,
    /// Bound on the honest bias of the mean, σ_max · E[(|Z| − z)+].
    pub bias_bound: f64,
    /// width(B)/n: the most one report can move the mean.
    pub influence_bound: f64,
    /// sqrt(n) E[(|Z| − z)+]/sd(Z): bound on bias / standard error; `null`
    /// for noise of infinite variance.
    pub bias_to_se_bound: Option<f64>,
    /// How many reports of the group were clipped.
    pub clipped: u64,
}

/// The median-of-means estimate of a group and its stated bias.
#[derive(Debug, Clone, PartialEq, uniffi::Record)]
pub struct MedianOfMeansEstimate {
    /// Number of buckets K.
    pub buckets: u32,
    /// The median of the K bucket means.
    pub median_of_means: f64,
    /// Robust standard deviation of the bucket means (1.4826 × MAD).
    pub bucket_sd: f64,
    /// Its standard error, sqrt(π/2) · bucket_sd / sqrt(K).
    pub standard_error: f64,
    /// 2 · bucket_sd: the distribution-free bound on its bias.
    pub bias_bound: f64,
}

/// The estimate of one (query, mechanism, ε, δ) group.
#[derive(Debug, Clone, PartialEq, uniffi::Record)]
pub struct GroupEstimate {
    /// Canonical id of the query.
    pub query_id: String,
    /// The mechanism.
    pub mechanism: MechanismName,
    /// ε.
    pub epsilon: f64,
    /// δ.
    pub delta: f64,
    /// The mean of the (clipped) reports and its error bar.
    pub estimate: Estimate,
    /// B, the bias bound and the influence bound; `null` without clipping.
    pub clip: Option<ClipSummary>,
    /// The median of means, when configured and n >= K.
    pub median_of_means: Option<MedianOfMeansEstimate>,
    /// This estimate as `geopriv aggregate` prints it (one JSON line, no
    /// newline), byte for byte.
    pub json_line: String,
}

/// One rejected record: its number (1-based, within the call), the stable
/// code and the reason (control characters escaped, long text cut).
#[derive(Debug, Clone, PartialEq, uniffi::Record)]
pub struct RejectedRecord {
    /// The record's number in the batch or stream (1-based; the line
    /// number for JSON streams).
    pub record: u64,
    /// Stable code, e.g. `malformed`, `not-utf8`, `too-long`.
    pub code: String,
    /// Why, ending with ` [code]`.
    pub reason: String,
}

/// What one batch or stream did: every record is exactly one of accepted,
/// rejected, skipped (blank line, `#` comment line, empty frame) or a
/// duplicate (its `report_id` accepted before, module docs):
/// records = accepted + rejected + skipped + duplicates.
#[derive(Debug, Clone, PartialEq, uniffi::Record)]
pub struct BatchResult {
    /// Records seen.
    pub records: u64,
    /// Reports aggregated.
    pub accepted: u64,
    /// Records rejected.
    pub rejected: u64,
    /// Blank, comment or empty records.
    pub skipped: u64,
    /// Reports dropped because a report with their `report_id` was
    /// accepted before (by this server, in any call).
    pub duplicates: u64,
    /// Rejections counted by code.
    pub rejected_by_code: HashMap<String, u64>,
    /// The first rejections (at most 1000 per call), in record order.
    pub rejections: Vec<RejectedRecord>,
}

/// Totals of a [`ReportServer`] over all its calls.
#[derive(Debug, Clone, PartialEq, uniffi::Record)]
pub struct IngestCounts {
    /// Records seen.
    pub records: u64,
    /// Reports aggregated.
    pub accepted: u64,
    /// Records rejected.
    pub rejected: u64,
    /// Blank, comment or empty records.
    pub skipped: u64,
    /// Reports dropped as duplicates of an accepted `report_id`.
    pub duplicates: u64,
    /// Reports with an id accepted after `max_report_ids` ids were
    /// remembered (their ids not remembered: a later repeat counts again).
    pub unchecked: u64,
}

struct Tally {
    result: BatchResult,
}

impl Tally {
    fn new() -> Self {
        Tally {
            result: BatchResult {
                records: 0,
                accepted: 0,
                rejected: 0,
                skipped: 0,
                duplicates: 0,
                rejected_by_code: HashMap::new(),
                rejections: Vec::new(),
            },
        }
    }

    fn reject(&mut self, record: u64, why: &RecordRejection) {
        let r = &mut self.result;
        r.rejected += 1;
        *r.rejected_by_code
            .entry(why.code().to_string())
            .or_insert(0) += 1;
        if r.rejections.len() < MAX_LISTED_REJECTIONS {
            r.rejections.push(RejectedRecord {
                record,
                code: why.code().to_string(),
                reason: message(why),
            });
        }
    }
}

fn message(why: &RecordRejection) -> String {
    format!("{why} [{}]", why.code())
}

fn refused(why: RecordRejection) -> GeoprivError {
    GeoprivError::InvalidReport(message(&why))
}

struct Inner {
    aggregator: ReportAggregator,
    counts: Counts,
    /// The ids of the accepted reports (the CLI's rule, module docs).
    dedup: Dedup,
}

/// What became of a record that was not rejected.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Offered {
    Accepted,
    Skipped,
    Duplicate,
}

impl Inner {
    fn new(aggregator: ReportAggregator, max_report_ids: usize) -> Self {
        Inner {
            aggregator,
            counts: Counts::default(),
            dedup: Dedup::new(max_report_ids),
        }
    }

    /// Count and offer one record, with the once-per-`report_id` rule of
    /// `geopriv aggregate` (docs/MATH.md §10.11): a decoded report whose id
    /// was accepted before is a duplicate; an id is remembered once its
    /// report is accepted.
    fn offer(&mut self, decoded: Decoded) -> Result<Offered, RecordRejection> {
        self.counts.records += 1;
        let outcome = match decoded {
            Decoded::Skipped => {
                self.counts.skipped += 1;
                return Ok(Offered::Skipped);
            }
            Decoded::Rejected(why) => Err(why),
            Decoded::Report(r) => {
                let id = r.report_id;
                let aggregator = &mut self.aggregator;
                match self.dedup.offer(id.as_ref(), || aggregator.offer(r)) {
                    Some(outcome) => outcome,
                    None => return Ok(Offered::Duplicate),
                }
            }
        };
        match outcome {
            Ok(()) => {
                self.counts.accepted += 1;
                Ok(Offered::Accepted)
            }
            Err(why) => {
                self.counts.rejected += 1;
                Err(why)
            }
        }
    }

    /// Offer `(number, record)` pairs in order.
    fn offer_all(&mut self, tally: &mut Tally, records: impl Iterator<Item = (u64, Decoded)>) {
        for (n, decoded) in records {
            tally.result.records += 1;
            match self.offer(decoded) {
                Ok(Offered::Accepted) => tally.result.accepted += 1,
                Ok(Offered::Skipped) => tally.result.skipped += 1,
                Ok(Offered::Duplicate) => tally.result.duplicates += 1,
                Err(why) => tally.reject(n, &why),
            }
        }
    }

    fn batch<T>(&mut self, records: Vec<T>, mut decode: impl FnMut(T) -> Decoded) -> BatchResult {
        let mut tally = Tally::new();
        self.offer_all(
            &mut tally,
            records
                .into_iter()
                .enumerate()
                .map(|(i, r)| (i as u64 + 1, decode(r))),
        );
        tally.result
    }
}

/// The `report_id` (32 lowercase hex digits) of a JSON report record
/// (a scalar report or a map report, as text or `MapUpload.bytes`), or
/// `null` when it has none or is not a JSON object with a well-formed
/// `report_id` (BOM and surrounding whitespace ignored). Every record a
/// server decodes into a report with id X gives X here (the same parser of
/// ids, the core's `ReportId`), so keying records by it sends every copy
/// of an id to one server (`geopriv.spark`'s exchange).
#[uniffi::export]
pub fn report_id_of_json(record: Vec<u8>) -> Option<String> {
    #[derive(serde::Deserialize)]
    struct IdOnly {
        #[serde(default)]
        report_id: Option<geopriv::ReportId>,
    }
    let text = std::str::from_utf8(&record).ok()?;
    let text = text.trim_start_matches('\u{feff}').trim();
    serde_json::from_str::<IdOnly>(text)
        .ok()?
        .report_id
        .map(|id| id.to_string())
}

/// The `report_id` of a binary report frame (`PrivateReport.bytes`), or
/// `null` when it has none or does not decode (as [`report_id_of_json`]).
#[uniffi::export]
pub fn report_id_of_frame(record: Vec<u8>) -> Option<String> {
    Report::from_bytes(&record)
        .ok()?
        .report_id
        .map(|id| id.to_string())
}

/// Validates, groups, clips and aggregates reports as `geopriv aggregate`
/// does (module docs); thread-safe (a `Mutex` inside).
#[derive(uniffi::Object)]
pub struct ReportServer {
    inner: Mutex<Inner>,
    max_record_bytes: usize,
}

impl std::fmt::Debug for ReportServer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ReportServer").finish_non_exhaustive()
    }
}

impl ReportServer {
    fn with_inner<T>(
        &self,
        f: impl FnOnce(&mut Inner) -> Result<T, GeoprivError>,
    ) -> Result<T, GeoprivError> {
        f(&mut *lock(&self.inner, "report server")?)
    }

    fn too_long(&self, length: usize) -> Option<RecordRejection> {
        (length > self.max_record_bytes).then_some(RecordRejection::TooLong {
            length: length as u64,
            limit: self.max_record_bytes,
        })
    }

    fn decode_json(&self, line: Option<&str>) -> Decoded {
        // A fresh decoder allocates nothing and decodes as decode_json_record.
        self.decode_json_in_column(line.map(str::as_bytes), &mut JsonColumnDecoder::default())
    }

    /// [`decode_json`](Self::decode_json) for one record of a column:
    /// the same result, reusing the previous record's header parse
    /// (`JsonColumnDecoder`).
    pub(crate) fn decode_json_in_column(
        &self,
        record: Option<&[u8]>,
        decoder: &mut JsonColumnDecoder,
    ) -> Decoded {
        match record {
            None => Decoded::Rejected(geopriv::Rejection::Empty.into()),
            Some(b) => match self.too_long(b.len()) {
                Some(why) => Decoded::Rejected(why),
                None => decoder.decode(b),
            },
        }
    }

    pub(crate) fn decode_bytes(&self, bytes: Option<&[u8]>) -> Decoded {
        match bytes {
            None => Decoded::Rejected(geopriv::Rejection::Empty.into()),
            Some(b) => match self.too_long(b.len()) {
                Some(why) => Decoded::Rejected(why),
                None => match Report::from_bytes(b) {
                    Ok(r) => Decoded::Report(r),
                    Err(why) => Decoded::Rejected(why.into()),
                },
            },
        }
    }

    /// Offer `records`, each decoded by `decode`, as one batch (the packed
    /// and array entry points of `arrays.rs`).
    pub(crate) fn add_decoded_batch<T>(
        &self,
        records: Vec<T>,
        decode: impl FnMut(T) -> Decoded,
    ) -> Result<BatchResult, GeoprivError> {
        self.with_inner(|s| Ok(s.batch(records, decode)))
    }

    fn add_one(&self, decoded: Decoded) -> Result<ReceivedReport, GeoprivError> {
        let received = match &decoded {
            Decoded::Report(r) => Some(ReceivedReport::from_core(r)),
            _ => None,
        };
        self.with_inner(|s| match (s.offer(decoded), received) {
            (Ok(Offered::Accepted), Some(r)) => Ok(r),
            (Ok(Offered::Duplicate), _) => {
                Err(GeoprivError::InvalidReport(DUPLICATE_MESSAGE.into()))
            }
            (Ok(_), _) => Err(GeoprivError::InvalidReport(
                "a blank or comment record holds no report [empty]".into(),
            )),
            (Err(why), _) => Err(refused(why)),
        })
    }
}

#[uniffi::export]
impl ReportServer {
    /// An empty server accepting what `policy` accepts, configured by
    /// `config` (`ServerConfig()` for the CLI's defaults).
    #[uniffi::constructor]
    pub fn new(policy: Arc<ReportPolicy>, config: Arc<ServerConfig>) -> Arc<Self> {
        Arc::new(Self {
            inner: Mutex::new(Inner::new(
                ReportAggregator::new(policy.core().clone(), config.config),
                config.max_report_ids,
            )),
            max_record_bytes: config.max_record_bytes,
        })
    }

    /// Decode, validate, clip and add one JSON report (BOM, `\r` and
    /// surrounding whitespace ignored); returns it as received (the value
    /// before clipping). `InvalidReport` with the reason and code when
    /// refused (a blank or `#` line: `[empty]`; a report whose `report_id`
    /// was accepted before: `[duplicate]`, counted in `duplicates`); the
    /// state is then unchanged.
    pub fn add_json(&self, line: String) -> Result<ReceivedReport, GeoprivError> {
        guard(|| self.add_one(self.decode_json(Some(&line))))
    }

    /// Decode, validate, clip and add one binary report
    /// (`PrivateReport.bytes`).
    pub fn add_bytes(&self, bytes: Vec<u8>) -> Result<ReceivedReport, GeoprivError> {
        guard(|| self.add_one(self.decode_bytes(Some(&bytes))))
    }

    /// Add many JSON reports in one call (`null` entries are rejected as
    /// `[empty]`, blank and `#` lines skipped). Never fails on a bad
    /// record: each is rejected by itself with its 1-based position in
    /// `lines`. The same outcome as `add_json` on each line in turn.
    pub fn add_json_batch(&self, lines: Vec<Option<String>>) -> Result<BatchResult, GeoprivError> {
        guard(|| {
            let mut decoder = JsonColumnDecoder::default();
            self.with_inner(|s| {
                Ok(s.batch(lines, |l| {
                    self.decode_json_in_column(l.as_deref().map(str::as_bytes), &mut decoder)
                }))
            })
        })
    }

    /// Add many binary reports (`PrivateReport.bytes` each) in one call,
    /// like `add_json_batch` (`null` and empty entries are rejected).
    pub fn add_bytes_batch(
        &self,
        records: Vec<Option<Vec<u8>>>,
    ) -> Result<BatchResult, GeoprivError> {
        guard(|| self.with_inner(|s| Ok(s.batch(records, |b| self.decode_bytes(b.as_deref())))))
    }

    /// Read a byte stream as `geopriv aggregate` reads stdin: JSON lines or
    /// 0x00-terminated binary frames, records numbered from 1 (JSON: the
    /// line number), each bad record (not UTF-8, too long, a JSON array,
    /// malformed, wrong version, out of policy, ...) rejected by itself.
    /// `Auto` decides each record by itself (no stream is refused as a
    /// whole).
    pub fn ingest(&self, data: Vec<u8>, format: InputFormat) -> Result<BatchResult, GeoprivError> {
        guard(|| {
            let choice = match format {
                InputFormat::Auto => FormatChoice::Auto,
                InputFormat::Json => FormatChoice::Json,
                InputFormat::Binary => FormatChoice::Binary,
            };
            let mut reader = RecordReader::new(&data[..], choice, self.max_record_bytes).map_err(
                |e| match e {
                    IngestError::Config(e) => GeoprivError::from(e),
                    other => GeoprivError::InvalidInput(other.to_string()),
                },
            )?;
            self.with_inner(|s| {
                let mut tally = Tally::new();
                let mut error = None;
                let records = std::iter::from_fn(|| match reader.next_record() {
                    Ok(r) => r,
                    Err(e) => {
                        error = Some(e);
                        None
                    }
                });
                s.offer_all(&mut tally, records);
                match error {
                    Some(e) => Err(GeoprivError::Internal(format!("reading a byte slice: {e}"))),
                    None => Ok(tally.result),
                }
            })
        })
    }

    /// Totals over every call so far.
    pub fn counts(&self) -> Result<IngestCounts, GeoprivError> {
        guard(|| {
            self.with_inner(|s| {
                let c = s.counts;
                Ok(IngestCounts {
                    records: c.records,
                    accepted: c.accepted,
                    rejected: c.rejected,
                    skipped: c.skipped,
                    duplicates: s.dedup.duplicates,
                    unchecked: s.dedup.unchecked,
                })
            })
        })
    }

    /// One estimate per group with reports, sorted as the CLI prints them
    /// (query id, mechanism, ε, δ).
    pub fn estimates(&self) -> Result<Vec<GroupEstimate>, GeoprivError> {
        guard(|| {
            self.with_inner(|s| {
                Ok(s.aggregator
                    .estimates()
                    .into_iter()
                    .map(|g| GroupEstimate {
                        query_id: g.query.canonical_id(),
                        mechanism: g.mechanism,
                        epsilon: g.epsilon,
                        delta: g.delta,
                        estimate: g.estimate.into(),
                        clip: g.clip.map(|c| ClipSummary {
                            lower: c.bounds[0],
                            upper: c.bounds[1],
                            z: c.z,
                            sigma_max: c.sigma_max,
                            bias_bound: c.bias_bound,
                            influence_bound: c.influence_bound,
                            bias_to_se_bound: c.bias_to_se_bound,
                            clipped: c.clipped,
                        }),
                        median_of_means: g.robust.map(|r| MedianOfMeansEstimate {
                            buckets: r.buckets,
                            median_of_means: r.median_of_means,
                            bucket_sd: r.bucket_sd,
                            standard_error: r.standard_error,
                            bias_bound: r.bias_bound,
                        }),
                        json_line: g.to_json_line(),
                    })
                    .collect())
            })
        })
    }

    /// The estimates exactly as `geopriv aggregate` prints them: one JSON
    /// line per group, each ending with a newline.
    pub fn to_json_lines(&self) -> Result<String, GeoprivError> {
        guard(|| {
            self.with_inner(|s| {
                let mut out = String::new();
                for g in s.aggregator.estimates() {
                    out.push_str(&g.to_json_line());
                    out.push('\n');
                }
                Ok(out)
            })
        })
    }

    /// The exact partial state (per group: key, exact sums, clipped count)
    /// as canonical JSON: equal contents give equal strings, whatever the
    /// order the reports came in. Ship it to a reducer's `merge_json`.
    /// It carries no report ids (nor the counts): merging the states of
    /// two servers counts an id both accepted twice.
    pub fn to_json(&self) -> Result<String, GeoprivError> {
        guard(|| {
            self.with_inner(|s| {
                serde_json::to_string(&s.aggregator.state())
                    .map_err(|e| GeoprivError::Internal(format!("server state: {e}")))
            })
        })
    }

    /// Fold a partial state from `to_json` of a server with the same policy
    /// and configuration into this one (exact). All or nothing:
    /// `InvalidReport` (state unchanged) for a malformed state, another
    /// clipping level, a median-of-means server, a group this policy
    /// refuses, or counters that would overflow. A state carries no report
    /// ids: an id accepted by both servers is counted twice.
    pub fn merge_json(&self, state: String) -> Result<(), GeoprivError> {
        guard(|| {
            let state: AggregatorState = serde_json::from_str(state.trim()).map_err(|e| {
                GeoprivError::InvalidReport(format!("invalid server state: {e} [malformed]"))
            })?;
            self.with_inner(|s| s.aggregator.merge_state(&state).map_err(refused))
        })
    }

    /// Fold another server's state into this one (`merge_json` of its
    /// `to_json`); `other` is unchanged. Report ids are not merged (module
    /// docs): an id accepted by both servers is counted twice.
    pub fn merge(&self, other: Arc<ReportServer>) -> Result<(), GeoprivError> {
        guard(|| {
            // Copy `other` first: never two locks at once (no deadlock,
            // and merging a server into itself doubles it).
            let theirs = other.with_inner(|o| Ok(o.aggregator.state()))?;
            self.with_inner(|s| s.aggregator.merge_state(&theirs).map_err(refused))
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{GeoMechanism, GeoQuery};

    fn reports(n: usize, seed: u64) -> Vec<String> {
        let q = GeoQuery::threshold(100_000.0, 20_000.0).unwrap();
        let m = GeoMechanism::laplace(1e-4, 1e-6).unwrap().seeded(seed);
        (0..n)
            .map(|i| {
                m.privatize_unmetered(q.clone(), vec![60_000.0 + (i % 97) as f64 * 1000.0])
                    .unwrap()
                    .json
            })
            .collect()
    }

    fn server(config: Arc<ServerConfig>) -> Arc<ReportServer> {
        let policy = ReportPolicy::new(1.0, 1e-4).unwrap().accept_seeded();
        ReportServer::new(policy, config)
    }

    #[test]
    fn report_ids_are_read_as_the_servers_read_them() {
        let line = with_id(&reports(1, 3)[0], 0xabc);
        let id = format!("{:032x}", 0xabc);
        assert_eq!(
            report_id_of_json(line.clone().into_bytes()),
            Some(id.clone())
        );
        let padded = format!("\u{feff} {} \r\n", line.replace(&id, &id.to_uppercase()));
        assert_eq!(report_id_of_json(padded.into_bytes()), Some(id));
        for bad in ["", "[]", "{\"report_id\":\"xyz\"}", "{", "{\"value\":1}"] {
            assert_eq!(report_id_of_json(bad.as_bytes().to_vec()), None, "{bad}");
        }
        let frame = serde_json::from_str::<Report>(&line).unwrap().to_bytes();
        assert_eq!(
            report_id_of_frame(frame.clone()),
            report_id_of_json(line.into_bytes())
        );
        assert_eq!(report_id_of_frame(vec![1, 2, 3]), None);
        // No proper prefix of a binary report (version 3) is one, so none
        // carries the id (attack7 O3: Spark keys rows by it).
        for n in 0..frame.len() {
            assert_eq!(report_id_of_frame(frame[..n].to_vec()), None, "{n}");
        }
    }

    /// `line` with `report_id` set to the 32 hex digits of `k`.
    fn with_id(line: &str, k: u64) -> String {
        let mut v: serde_json::Value = serde_json::from_str(line).unwrap();
        v["report_id"] = format!("{k:032x}").into();
        v.to_string()
    }

    fn some(lines: &[String]) -> Vec<Option<String>> {
        lines.iter().cloned().map(Some).collect()
    }

    /// attack7 O1: a replayed report (same `report_id`) counts once, in
    /// a batch, across calls and through `ingest`, as `geopriv aggregate`
    /// counts it; the estimates are those of the distinct reports.
    #[test]
    fn a_replayed_report_id_counts_once() {
        let distinct: Vec<String> = reports(300, 5)
            .iter()
            .enumerate()
            .map(|(i, l)| with_id(l, i as u64 + 1))
            .collect();
        let reference = server(ServerConfig::new());
        reference.add_json_batch(some(&distinct)).unwrap();
        let mut replayed = distinct.clone();
        replayed.extend(distinct[..120].iter().cloned());
        let s = server(ServerConfig::new());
        let r = s.add_json_batch(some(&replayed)).unwrap();
        assert_eq!(
            (r.records, r.accepted, r.rejected, r.skipped, r.duplicates),
            (420, 300, 0, 0, 120)
        );
        // A later call remembers the earlier ones; one report raises.
        let r = s.add_json_batch(some(&distinct[200..])).unwrap();
        assert_eq!((r.accepted, r.duplicates), (0, 100));
        let e = s.add_json(distinct[0].clone()).unwrap_err();
        assert!(e.to_string().ends_with("[duplicate]"), "{e}");
        let c = s.counts().unwrap();
        assert_eq!(
            (c.records, c.accepted, c.duplicates, c.unchecked),
            (521, 300, 221, 0)
        );
        assert_eq!(
            s.to_json_lines().unwrap(),
            reference.to_json_lines().unwrap()
        );
        assert_eq!(s.to_json().unwrap(), reference.to_json().unwrap());
        // The byte stream (the CLI's reader, as Spark feeds it).
        let t = server(ServerConfig::new());
        let blob = replayed.join("\n") + "\n";
        let r = t.ingest(blob.into_bytes(), InputFormat::Json).unwrap();
        assert_eq!((r.records, r.accepted, r.duplicates), (420, 300, 120));
        assert_eq!(
            t.to_json_lines().unwrap(),
            reference.to_json_lines().unwrap()
        );
        // Reports without an id are each counted.
        let u = server(ServerConfig::new());
        let plain = reports(10, 6);
        let mut twice = plain.clone();
        twice.extend(plain);
        let r = u.add_json_batch(some(&twice)).unwrap();
        assert!(!twice[0].contains("report_id") || r.duplicates > 0);
        // States carry no ids: merging two servers' states counts an id
        // both accepted twice (module docs).
        let (a, b) = (server(ServerConfig::new()), server(ServerConfig::new()));
        a.add_json(distinct[0].clone()).unwrap();
        b.add_json(distinct[0].clone()).unwrap();
        a.merge(b).unwrap();
        assert_eq!(a.estimates().unwrap()[0].estimate.n, 2);
    }

    /// An id is remembered only once its report is accepted: a refused
    /// record (out of policy, or undecodable) carrying an id never censors
    /// a later valid report with that id.
    #[test]
    fn a_refused_record_does_not_censor_a_later_valid_one() {
        let good = with_id(&reports(1, 7)[0], 42);
        let mut v: serde_json::Value = serde_json::from_str(&good).unwrap();
        v["epsilon"] = 5.0.into(); // out of policy (ε <= 1)
        let refused = v.to_string();
        let truncated = good[..good.len() - 3].to_string();
        let s = server(ServerConfig::new());
        let r = s
            .add_json_batch(some(&[
                refused.clone(),
                truncated,
                good.clone(),
                good.clone(),
                refused,
            ]))
            .unwrap();
        assert_eq!((r.accepted, r.rejected, r.duplicates), (1, 2, 2), "{r:?}");
        assert_eq!(r.rejections[0].record, 1);
        // As the CLI: once the id was accepted, a later record decoding to
        // a report with it is a duplicate, whatever its contents.
        let c = s.counts().unwrap();
        assert_eq!(
            (c.records, c.accepted, c.rejected, c.duplicates),
            (5, 1, 2, 2)
        );
    }

    /// At most `max_report_ids` ids are remembered; past the bound, as the
    /// CLI, new ids are accepted unremembered (`unchecked`) and their
    /// repeats counted again; repeats of remembered ids still drop.
    #[test]
    fn the_id_memory_is_bounded_as_in_the_cli() {
        assert_eq!(ServerConfig::new().max_report_ids(), 1 << 20);
        assert!(matches!(
            ServerConfig::new().with_max_report_ids((1 << 26) + 1),
            Err(GeoprivError::InvalidParameter(_))
        ));
        let config = ServerConfig::new().with_max_report_ids(10).unwrap();
        assert_eq!(config.max_report_ids(), 10);
        let distinct: Vec<String> = reports(20, 8)
            .iter()
            .enumerate()
            .map(|(i, l)| with_id(l, i as u64 + 1))
            .collect();
        let mut all = distinct.clone();
        all.extend(distinct.iter().cloned());
        let s = server(config);
        let r = s.add_json_batch(some(&all)).unwrap();
        assert_eq!((r.accepted, r.duplicates), (30, 10));
        let c = s.counts().unwrap();
        assert_eq!((c.accepted, c.duplicates, c.unchecked), (30, 10, 20));
        // 0: nothing remembered, every report counted (unchecked).
        let z = server(ServerConfig::new().with_max_report_ids(0).unwrap());
        let r = z.add_json_batch(some(&all)).unwrap();
        assert_eq!((r.accepted, r.duplicates), (40, 0));
        assert_eq!(z.counts().unwrap().unchecked, 40);
    }

    /// attack7: `geopriv aggregate --clip-z 1e300` and `--clip-n 1
    /// --clip-bias-se 1e-300` are refused up front (issue 19 item 14); the
    /// bindings (and Spark's `ServerSpec`, which builds this config) took
    /// them, then bounded nothing (z = 1e308: influence bound +inf) or
    /// rejected every report as `unclippable`.
    #[test]
    fn clip_settings_the_cli_refuses_are_refused_here() {
        for z in [1e6 * (1.0 + 1e-15), 1e300, 1e308] {
            let r = ServerConfig::new().with_clip_z(z);
            assert!(
                matches!(r, Err(GeoprivError::InvalidParameter(_))),
                "z = {z}"
            );
        }
        assert!(ServerConfig::new().with_clip_z(1e6).is_ok());
        for (n, b) in [(1, 1e-300), (1_000_000, 5e-324)] {
            let r = ServerConfig::new().with_clip_target(n, b);
            assert!(
                matches!(r, Err(GeoprivError::InvalidParameter(_))),
                "{n} {b}"
            );
        }
        // Reachable targets are unchanged: every honest report is accepted.
        for (n, b) in [(1_000_000, 0.1), (1, 1e300)] {
            let s = server(ServerConfig::new().with_clip_target(n, b).unwrap());
            let r = s
                .add_json_batch(reports(50, 3).into_iter().map(Some).collect())
                .unwrap();
            assert_eq!(r.accepted, 50, "{n} {b}");
        }
    }

    #[test]
    fn a_poisoned_report_moves_the_clipped_mean_by_at_most_width_over_n() {
        let honest = reports(2000, 1);
        let clean = server(ServerConfig::new());
        let poisoned = server(ServerConfig::new());
        clean
            .add_json_batch(honest.iter().cloned().map(Some).collect())
            .unwrap();
        let mut bad: Vec<Option<String>> = honest.iter().cloned().map(Some).collect();
        let mut forged: serde_json::Value = serde_json::from_str(&honest[0]).unwrap();
        forged["value"] = serde_json::json!(1e4);
        // Another id (with honest[0]'s it would be dropped as a replay).
        forged["report_id"] = format!("{:032x}", 7u64).into();
        bad.push(Some(forged.to_string()));
        let bad_copy = bad.clone();
        let r = poisoned.add_json_batch(bad).unwrap();
        assert_eq!((r.accepted, r.rejected), (2001, 0));
        let (a, b) = (
            &clean.estimates().unwrap()[0],
            &poisoned.estimates().unwrap()[0],
        );
        let clip = b.clip.clone().unwrap();
        assert!(clip.upper < 10_000.0 && clip.bias_bound > 0.0 && clip.clipped >= 1);
        assert_eq!(clip.influence_bound, (clip.upper - clip.lower) / 2001.0);
        assert!((b.estimate.mean - a.estimate.mean).abs() <= clip.influence_bound);
        // Without clipping the same report moves the mean by about 5.
        let raw = server(ServerConfig::new().without_clipping());
        raw.add_json_batch(bad_copy).unwrap();
        let moved = raw.estimates().unwrap()[0].estimate.mean - a.estimate.mean;
        assert!(
            raw.estimates().unwrap()[0].clip.is_none() && moved > 4.0,
            "{moved}"
        );
    }

    #[test]
    fn each_bad_record_is_rejected_alone_with_its_number() {
        let good = reports(3, 2);
        let s = server(ServerConfig::new().with_max_record_bytes(1000).unwrap());
        let mut stream = Vec::new();
        stream.extend_from_slice(good[0].as_bytes());
        stream.extend_from_slice(b"\n\xff\xfe not utf-8\n");
        stream.extend_from_slice(&[b'x'; 2000]);
        stream.extend_from_slice(b"\n");
        stream.extend_from_slice(good[1].replace("\"version\":2", "\"version\":7").as_bytes());
        stream.extend_from_slice(b"\n# comment\n");
        stream.extend_from_slice(good[2].as_bytes());
        stream.extend_from_slice(b"\n");
        let r = s.ingest(stream, InputFormat::Json).unwrap();
        assert_eq!((r.records, r.accepted, r.rejected, r.skipped), (6, 2, 3, 1));
        let got: Vec<(u64, &str)> = r
            .rejections
            .iter()
            .map(|x| (x.record, x.code.as_str()))
            .collect();
        assert_eq!(
            got,
            [(2, "not-utf8"), (3, "too-long"), (4, "unsupported-version")]
        );
        assert!(r
            .rejections
            .iter()
            .all(|x| x.reason.ends_with(&format!("[{}]", x.code))));
        assert_eq!(s.estimates().unwrap()[0].estimate.n, 2);
        // The batch call gives the same outcomes.
        let b = server(ServerConfig::new().with_max_record_bytes(1000).unwrap());
        let r = b
            .add_json_batch(vec![
                Some(good[0].clone()),
                None,
                Some("x".repeat(2000)),
                Some("\u{1b}[31m\nline 1: report accepted".into()),
                Some(good[2].clone()),
            ])
            .unwrap();
        let got: Vec<(u64, &str)> = r
            .rejections
            .iter()
            .map(|x| (x.record, x.code.as_str()))
            .collect();
        assert_eq!(got, [(2, "empty"), (3, "too-long"), (4, "malformed")]);
        assert!(
            !r.rejections[2].reason.contains('\n') && !r.rejections[2].reason.contains('\u{1b}')
        );
        assert_eq!(r.rejected_by_code["too-long"], 1);
        // `Auto` decides each record by itself (issue 19 item 9): garbage is
        // one rejected record, not a refused stream.
        let g = b
            .ingest(b"\x01\x02garbage".to_vec(), InputFormat::Auto)
            .unwrap();
        assert_eq!((g.accepted, g.rejected), (0, 1));
    }

    #[test]
    fn partial_states_merge_to_the_single_server_result() {
        let all = reports(500, 3);
        let whole = server(ServerConfig::new());
        whole
            .add_json_batch(all.iter().cloned().map(Some).collect())
            .unwrap();
        let (a, b) = (server(ServerConfig::new()), server(ServerConfig::new()));
        a.add_json_batch(all[..123].iter().cloned().map(Some).collect())
            .unwrap();
        b.add_json_batch(all[123..].iter().cloned().map(Some).collect())
            .unwrap();
        let reducer = server(ServerConfig::new());
        reducer.merge_json(b.to_json().unwrap()).unwrap();
        reducer.merge(a).unwrap();
        assert_eq!(reducer.to_json().unwrap(), whole.to_json().unwrap());
        assert_eq!(
            reducer.to_json_lines().unwrap(),
            whole.to_json_lines().unwrap()
        );
        let e = &whole.estimates().unwrap()[0];
        assert_eq!(format!("{}\n", e.json_line), whole.to_json_lines().unwrap());
        // Another clipping level, a robust server, garbage: refused, unchanged.
        let other = server(ServerConfig::new().with_clip_z(3.0).unwrap());
        assert!(other.merge_json(whole.to_json().unwrap()).is_err());
        let mom = server(ServerConfig::new().with_median_of_means(4).unwrap());
        assert!(mom.merge_json(whole.to_json().unwrap()).is_err());
        assert!(reducer.merge_json("{".into()).is_err());
        assert_eq!(reducer.to_json().unwrap(), whole.to_json().unwrap());
        mom.add_json_batch(all.iter().cloned().map(Some).collect())
            .unwrap();
        let m = mom.estimates().unwrap()[0].median_of_means.clone().unwrap();
        assert_eq!(m.buckets, 4);
        assert!(m.bias_bound >= 0.0);
    }
}
