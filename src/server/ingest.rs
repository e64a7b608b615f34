//! Hardened server ingestion (docs/MATH.md §10): a byte-level record
//! reader in which no byte sequence costs a good record, and an aggregator
//! that groups reports, clips them and keeps its memory bounded.
//!
//! # Records
//!
//! [`RecordReader`] reads a stream as **bytes**, split on `\n` (JSON lines)
//! or `0x00` (binary COBS frames), with its own fixed buffer of
//! `max_record_bytes` + 64 KiB. A record longer than `max_record_bytes` is
//! skipped up to its delimiter without being buffered and rejected as
//! [`RecordRejection::TooLong`]. Every record gets a number (1-based; for
//! JSON the line number) and exactly one outcome: a report, a skip (blank
//! line, `#` comment line, empty frame) or a [`RecordRejection`]: not
//! UTF-8, too long, a JSON array, malformed, truncated, an unsupported
//! version, ... A UTF-8 byte-order mark at the start of any JSON record is
//! ignored; a JSON array (`[...]`) is refused per record (write one object
//! per line).
//!
//! The format is explicit ([`FormatChoice::Json`], [`FormatChoice::Binary`])
//! or decided **per record** ([`FormatChoice::Auto`], docs/MATH.md §10.7):
//! a record ends at the first `\n` or `0x00`; it is a JSON line if it
//! decodes as one, else a binary frame if the bytes up to the next `0x00`
//! decode as a report, else rejected by itself. A stray binary frame in a
//! JSON stream, a garbage first line, a leading NUL or a truncated first
//! frame costs only itself (before round 3 the first record decided the
//! whole stream). [`IngestError::UndetectableFormat`] is no longer
//! produced.
//!
//! # Grouping
//!
//! [`ReportAggregator`] **groups reports by (query, mechanism, ε, δ)**: the
//! reports of different mechanisms or budgets for the same query have
//! different noise (and noise a priori is biased), so they are never
//! averaged together; each group is one output estimate. It keeps at most
//! `max_groups` groups (a report that would open one more is rejected as
//! [`RecordRejection::TooManyGroups`]), optionally only the queries of an
//! allow-list ([`ValidationPolicy::only_queries`]), and clips every
//! value with the group's [`ClipPolicy`].
//!
//! For sharded aggregation (Spark, several servers) an aggregator's exact
//! partial state ([`ReportAggregator::state`], serde) merges into another
//! with the same configuration ([`ReportAggregator::merge_state`]), bit for
//! bit the result of one aggregator fed every report.
//!
//! ```
//! use geopriv::server::ingest::{AggregationConfig, FormatChoice, RecordReader, ReportAggregator};
//! use geopriv::{MechanismName, QueryDescriptor, Report, ValidationPolicy};
//!
//! let q = QueryDescriptor::Threshold { threshold: 100.0, width: 20.0 };
//! let mut input = Report::new(q, MechanismName::Polyplace, 0.05, 0.0, 0.7).to_json_line().into_bytes();
//! input.extend_from_slice(b"\n\xEF\xBB\xBF# a comment\n\xff not utf-8\n[1, 2]\n");
//! let mut reader = RecordReader::new(&input[..], FormatChoice::Auto, 1 << 16)?;
//! let mut agg = ReportAggregator::new(ValidationPolicy::new(1.0, 0.0)?, AggregationConfig::default());
//! let mut rejected = Vec::new();
//! let counts = agg.ingest(&mut reader, |n, why| rejected.push((n, why.code())))?;
//! assert_eq!((counts.accepted, counts.skipped, counts.rejected), (1, 1, 2));
//! assert_eq!(rejected, [(3, "not-utf8"), (4, "json-array")]);
//! let est = &agg.estimates()[0];
//! assert_eq!(est.estimate.n, 1);
//! assert!(est.clip.is_some());
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

use crate::error::{Error, Result};
use crate::mechanism::NoiseShape;
use crate::report::{decode_frame, MechanismName, QueryDescriptor, QueryKey, Report};
use crate::server::aggregate::{Aggregator, Estimate};
use crate::server::clip::{default_mechanism, default_z, ClipLevel, ClipPolicy};
use crate::server::escape::Untrusted;
use crate::server::robust::{MedianOfMeans, RobustEstimate};
use crate::server::{Rejection, Task, ValidationPolicy};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::fmt;
use std::io::{self, Read};
use std::string::String;
use std::vec::Vec;

/// Default largest record: 64 KiB (a report is a few hundred bytes).
pub const DEFAULT_MAX_RECORD_BYTES: usize = 64 * 1024;
/// The largest `max_record_bytes` a reader accepts: 64 MiB.
pub const MAX_RECORD_BYTES_LIMIT: usize = 64 << 20;
/// Default largest number of groups (query, mechanism, ε, δ): 4096, at
/// most 4096 · [`GROUP_BYTES_BOUND`] = 13 MB of state with the mean.
pub const DEFAULT_MAX_GROUPS: usize = 4096;
/// Bytes of memory per group with the mean estimator, worst case (a KDE
/// centre of [`crate::server::MAX_KDE_DIMENSION`] coordinates; the exact
/// sums are 1.6 KB of it): 3,200 bytes; 2,797 measured as resident memory over
/// 100,000 groups in `tests/group_memory.rs` (issue 19 item 12). The
/// median of means adds 24 · K bytes per group for K buckets.
pub const GROUP_BYTES_BOUND: usize = 3_200;
/// Default largest number of groups of one query without tasks: 16
/// (mechanisms × budgets a deployment plausibly runs side by side).
pub const DEFAULT_MAX_GROUPS_PER_QUERY: usize = 16;
/// The largest `max_groups` allowed: 2^20 (at most 2^20 ·
/// [`GROUP_BYTES_BOUND`] = 3.4 GB with the mean; round 2 measured 2.32 GB
/// for 10^6 threshold groups against 1.7 GB then documented).
pub const MAX_GROUPS_LIMIT: usize = 1 << 20;
/// `auto`: the longest binary frame looked for behind a line that is not
/// JSON (1 KiB; a report frame is at most a few hundred bytes with KDE
/// centres of at most [`crate::server::MAX_KDE_DIMENSION`] coordinates).
/// Bounds the work a stream of short bad lines can cause.
pub const MAX_FRAME_PROBE: usize = 1024;
/// Bytes read from the input at a time.
const CHUNK: usize = 64 * 1024;
const BOM: &[u8] = b"\xEF\xBB\xBF";

/// A stream encoding.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Format {
    /// One JSON report per line.
    Json,
    /// COBS-framed postcard reports, each followed by `0x00`.
    Binary,
}

/// The encoding to read: explicit, or detected from the first record.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FormatChoice {
    /// Decide from the first record, or refuse the stream up front.
    Auto,
    /// [`Format::Json`].
    Json,
    /// [`Format::Binary`].
    Binary,
}

/// Why a stream could not be read at all.
#[derive(Debug)]
#[non_exhaustive]
pub enum IngestError {
    /// The input failed (the records counted so far stand).
    Io(io::Error),
    /// No longer produced: `auto` decides each record by itself.
    UndetectableFormat {
        /// The first bytes of the stream (at most 8).
        head: Vec<u8>,
    },
    /// A configuration value out of range.
    Config(Error),
}

impl fmt::Display for IngestError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            IngestError::Io(e) => write!(f, "input error: {e}"),
            IngestError::UndetectableFormat { head } => write!(
                f,
                "cannot tell the input format from its first record (it starts with bytes {head:02x?}, \
                 neither a JSON object, array or comment nor a binary report frame); \
                 nothing was read: pass --format json or --format binary"
            ),
            IngestError::Config(e) => write!(f, "{e}"),
        }
    }
}

impl std::error::Error for IngestError {}

impl From<io::Error> for IngestError {
    fn from(e: io::Error) -> Self {
        IngestError::Io(e)
    }
}

/// Why one record was refused. `Display` escapes control characters and
/// cuts long attacker-supplied text ([`crate::server::escape`]).
#[derive(Clone, Debug, PartialEq)]
#[non_exhaustive]
pub enum RecordRejection {
    /// Decoding or validation refused the report.
    Report(Rejection),
    /// A JSON record that is not UTF-8.
    NotUtf8 {
        /// Bytes of valid UTF-8 before the first bad one.
        valid_up_to: usize,
    },
    /// Longer than the configured maximum (skipped without buffering).
    TooLong {
        /// Its length in bytes (without the delimiter).
        length: u64,
        /// The maximum.
        limit: usize,
    },
    /// A JSON array: reports go one object per line.
    JsonArray,
    /// The report would open a group beyond the configured maximum.
    TooManyGroups {
        /// The maximum number of groups.
        limit: usize,
    },
    /// The report would open one more group for its query than
    /// [`AggregationConfig::max_groups_per_query`] (a query without tasks).
    TooManyGroupsForQuery {
        /// The maximum number of groups per query.
        limit: usize,
    },
    /// A partial state that no honest aggregator makes: an empty group,
    /// more clipped reports than reports, or sums beyond what n values
    /// inside the group's clipping bounds can make.
    ForgedState {
        /// Why.
        reason: &'static str,
    },
    /// The group's clipping policy cannot be built (e.g. σ_max overflows).
    Unclippable {
        /// Why.
        error: Error,
    },
    /// Adding the value would overflow the group's counters.
    Overflow {
        /// The error.
        error: Error,
    },
    /// A partial state ([`AggregatorState`]) that cannot be merged into
    /// this aggregator (other clipping level, order-dependent estimator).
    IncompatibleState {
        /// Why.
        reason: &'static str,
    },
}

impl RecordRejection {
    /// A stable kebab-case code for counters (the report's own code for
    /// [`RecordRejection::Report`]).
    pub fn code(&self) -> &'static str {
        match self {
            RecordRejection::Report(r) => r.code(),
            RecordRejection::NotUtf8 { .. } => "not-utf8",
            RecordRejection::TooLong { .. } => "too-long",
            RecordRejection::JsonArray => "json-array",
            RecordRejection::TooManyGroups { .. } => "too-many-groups",
            RecordRejection::TooManyGroupsForQuery { .. } => "too-many-groups-for-query",
            RecordRejection::ForgedState { .. } => "forged-state",
            RecordRejection::Unclippable { .. } => "unclippable",
            RecordRejection::Overflow { .. } => "overflow",
            RecordRejection::IncompatibleState { .. } => "incompatible-state",
        }
    }
}

impl fmt::Display for RecordRejection {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            // Escaped and cut by `Rejection`'s own Display.
            RecordRejection::Report(r) => write!(f, "{r}"),
            RecordRejection::NotUtf8 { valid_up_to } => write!(
                f,
                "record is not UTF-8 (invalid byte after {valid_up_to} valid bytes)"
            ),
            RecordRejection::TooLong { length, limit } => write!(
                f,
                "record of {length} bytes is longer than the limit of {limit} bytes (skipped unread)"
            ),
            RecordRejection::JsonArray => write!(
                f,
                "a JSON array is not a report: write one report object per line"
            ),
            RecordRejection::TooManyGroups { limit } => write!(
                f,
                "report would open a new (query, mechanism, epsilon, delta) group beyond the limit of {limit}"
            ),
            RecordRejection::TooManyGroupsForQuery { limit } => write!(
                f,
                "report would open a new (mechanism, epsilon, delta) group for its query beyond the limit of {limit} per query (configure the query's tasks to admit exactly its groups)"
            ),
            RecordRejection::ForgedState { reason } => {
                write!(f, "partial state refused: {reason}")
            }
            RecordRejection::Unclippable { error } => {
                write!(f, "no clipping bound for this report's group: {error}")
            }
            RecordRejection::Overflow { error } => write!(f, "{error}"),
            RecordRejection::IncompatibleState { reason } => {
                write!(f, "partial state cannot be merged: {reason}")
            }
        }
    }
}

impl std::error::Error for RecordRejection {}

impl From<Rejection> for RecordRejection {
    fn from(r: Rejection) -> Self {
        RecordRejection::Report(r)
    }
}

/// What one record turned out to be.
#[derive(Clone, Debug, PartialEq)]
pub enum Decoded {
    /// A decoded (not yet validated) report.
    Report(Report),
    /// A blank line, a `#` comment line or an empty frame.
    Skipped,
    /// Refused.
    Rejected(RecordRejection),
}

/// Splits a byte stream into records (module docs). Memory: one buffer of
/// `max_record_bytes` + 64 KiB, whatever the input.
#[derive(Debug)]
pub struct RecordReader<R> {
    inner: R,
    format: Format,
    max: usize,
    buf: Vec<u8>,
    start: usize,
    end: usize,
    scan: usize,
    skipped_bytes: Option<u64>,
    eof: bool,
    number: u64,
    scratch: Vec<u8>,
    /// JSON records of a stream mostly share their header: reuse its parse.
    json: JsonColumnDecoder,
    /// [`FormatChoice::Auto`]: each record's format is decided by itself.
    auto: bool,
    /// Auto: whether a report has fixed [`format`](Self::format) yet.
    seen_report: bool,
    /// Auto: no 0x00 byte in `buf[start.max(..)..zero_free]`.
    zero_free: usize,
}

/// A record's number and its bytes, or its rejection if too long.
pub type RawRecord<'a> = (u64, core::result::Result<&'a [u8], RecordRejection>);

/// The raw body of one record.
enum Raw {
    /// `buf[start..end]`, terminated or not (the stream's last record).
    Bytes(usize, usize, bool),
    TooLong(u64),
}

impl<R: Read> RecordReader<R> {
    /// A reader of `inner` with records of at most `max_record_bytes`
    /// (1 ..= [`MAX_RECORD_BYTES_LIMIT`]). With [`FormatChoice::Auto`] the
    /// first record is read here and the format decided, or the stream
    /// refused with [`IngestError::UndetectableFormat`].
    pub fn new(
        inner: R,
        format: FormatChoice,
        max_record_bytes: usize,
    ) -> core::result::Result<Self, IngestError> {
        if !(1..=MAX_RECORD_BYTES_LIMIT).contains(&max_record_bytes) {
            return Err(IngestError::Config(Error::LimitExceeded {
                what: "record bytes (max_record_bytes)",
                requested: max_record_bytes as u64,
                limit: MAX_RECORD_BYTES_LIMIT as u64,
            }));
        }
        let mut r = Self {
            inner,
            format: Format::Json,
            max: max_record_bytes,
            buf: std::vec![0; max_record_bytes + 1 + CHUNK],
            start: 0,
            end: 0,
            scan: 0,
            skipped_bytes: None,
            eof: false,
            number: 0,
            scratch: Vec::new(),
            json: JsonColumnDecoder::default(),
            auto: format == FormatChoice::Auto,
            seen_report: false,
            zero_free: 0,
        };
        r.format = match format {
            FormatChoice::Binary => Format::Binary,
            FormatChoice::Json | FormatChoice::Auto => Format::Json,
        };
        Ok(r)
    }

    /// The format being read ([`FormatChoice::Auto`]: the format of the
    /// first report, JSON before one; each record is decided by itself).
    pub fn format(&self) -> Format {
        self.format
    }

    /// Records read so far (the number of the last one).
    pub fn records(&self) -> u64 {
        self.number
    }

    fn fill(&mut self) -> io::Result<usize> {
        if self.start > 0 {
            self.buf.copy_within(self.start..self.end, 0);
            self.end -= self.start;
            self.scan -= self.start;
            self.zero_free = self.zero_free.saturating_sub(self.start);
            self.start = 0;
        }
        loop {
            match self.inner.read(&mut self.buf[self.end..]) {
                Ok(n) => {
                    self.end += n;
                    if n == 0 {
                        self.eof = true;
                    }
                    return Ok(n);
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(e),
            }
        }
    }

    fn delimiter(&self) -> u8 {
        match self.format {
            Format::Json => b'\n',
            Format::Binary => 0,
        }
    }

    fn next_raw(&mut self) -> io::Result<Option<Raw>> {
        let delim = self.delimiter();
        loop {
            if let Some(i) = memchr::memchr(delim, &self.buf[self.scan..self.end]) {
                let pos = self.scan + i;
                let rec = self.start;
                self.start = pos + 1;
                self.scan = self.start;
                self.number += 1;
                let len = (pos - rec) as u64;
                if let Some(skipped) = self.skipped_bytes.take() {
                    return Ok(Some(Raw::TooLong(skipped + len)));
                }
                if pos - rec > self.max {
                    return Ok(Some(Raw::TooLong(len)));
                }
                return Ok(Some(Raw::Bytes(rec, pos, true)));
            }
            self.scan = self.end;
            if self.end - self.start > self.max {
                // Too long already: drop it and remember how much.
                let dropped = (self.end - self.start) as u64;
                self.skipped_bytes = Some(self.skipped_bytes.unwrap_or(0) + dropped);
                self.start = self.end;
            }
            if self.eof {
                let rec = self.start;
                self.start = self.end;
                self.scan = self.end;
                if let Some(skipped) = self.skipped_bytes.take() {
                    self.number += 1;
                    return Ok(Some(Raw::TooLong(skipped + (self.end - rec) as u64)));
                }
                if rec < self.end {
                    self.number += 1;
                    return Ok(Some(Raw::Bytes(rec, self.end, false)));
                }
                return Ok(None);
            }
            self.fill()?;
        }
    }

    /// The next record's raw bytes (without its delimiter), or its
    /// rejection if it is too long. `Ok(None)` at the end of the input.
    pub fn next_bytes(&mut self) -> io::Result<Option<RawRecord<'_>>> {
        Ok(self.next_raw()?.map(|raw| match raw {
            Raw::TooLong(length) => (
                self.number,
                Err(RecordRejection::TooLong {
                    length,
                    limit: self.max,
                }),
            ),
            Raw::Bytes(a, b, _) => (self.number, Ok(&self.buf[a..b])),
        }))
    }

    /// Offset (from `start`) of the first 0x00 at or after offset `from`
    /// within [`MAX_FRAME_PROBE`] (at most `max`) + 1 bytes of the record's
    /// start, reading more input as
    /// needed; None if there is none there. Every byte is searched once
    /// (`zero_free`), whatever the number of records that ask.
    fn zero_after(&mut self, from: usize) -> io::Result<Option<usize>> {
        let mut from = from.max(self.zero_free.saturating_sub(self.start));
        let within = self.max.min(MAX_FRAME_PROBE);
        loop {
            let lim = (self.start + within + 1).min(self.end);
            if self.start + from < lim {
                if let Some(i) = memchr::memchr(0, &self.buf[self.start + from..lim]) {
                    return Ok(Some(from + i));
                }
                from = lim - self.start;
                self.zero_free = lim;
            }
            if self.end > self.start + within || self.eof {
                return Ok(None);
            }
            self.fill()?;
        }
    }

    /// Consume the record's bytes and its delimiter (`len` + 1 bytes).
    fn consume(&mut self, len: usize) -> usize {
        let rec = self.start;
        self.start = (rec + len + 1).min(self.end);
        self.scan = self.start;
        self.number += 1;
        rec
    }

    /// [`FormatChoice::Auto`]: the next record, its format decided by
    /// itself (docs/MATH.md §10.7). A record ends at the first `\n` or
    /// 0x00. Ended by 0x00, it is a binary frame unless it starts like
    /// JSON (`{`, `[`, `#` after a BOM and whitespace) and decodes as JSON.
    /// Ended by `\n`, it is a JSON line if it decodes as one; otherwise, if
    /// the bytes up to the next 0x00 (within the size limit) decode as a
    /// binary report (a frame may hold 0x0a bytes), that frame; otherwise
    /// the line, rejected by itself. So a stray frame, a garbage line, a
    /// leading NUL or a truncated frame costs only itself.
    fn next_auto(&mut self) -> io::Result<Option<Decoded>> {
        loop {
            if let Some(i) = memchr::memchr2(b'\n', 0, &self.buf[self.scan..self.end]) {
                let pos = self.scan + i;
                let len = pos - self.start;
                if let Some(skipped) = self.skipped_bytes.take() {
                    self.consume(len);
                    return Ok(Some(self.too_long(skipped + len as u64)));
                }
                if len > self.max {
                    self.consume(len);
                    return Ok(Some(self.too_long(len as u64)));
                }
                return self.decide(len, self.buf[pos]).map(Some);
            }
            self.scan = self.end;
            if self.end - self.start > self.max {
                let dropped = (self.end - self.start) as u64;
                self.skipped_bytes = Some(self.skipped_bytes.unwrap_or(0) + dropped);
                self.start = self.end;
                self.zero_free = self.zero_free.max(self.end);
            }
            if self.eof {
                let len = self.end - self.start;
                if let Some(skipped) = self.skipped_bytes.take() {
                    self.consume(len);
                    return Ok(Some(self.too_long(skipped + len as u64)));
                }
                if len == 0 {
                    return Ok(None);
                }
                let rec = self.consume(len);
                let bytes = &self.buf[rec..rec + len];
                let d = decode_json_record(bytes);
                return Ok(Some(match d {
                    Decoded::Report(_) => d,
                    _ if looks_like_json(bytes) => d,
                    _ => decode_binary_record(bytes, false, &mut self.scratch),
                }));
            }
            self.fill()?;
        }
    }

    fn too_long(&self, length: u64) -> Decoded {
        Decoded::Rejected(RecordRejection::TooLong {
            length,
            limit: self.max,
        })
    }

    /// Decide a record of `len` bytes at `start` ended by `delim` (auto).
    fn decide(&mut self, len: usize, delim: u8) -> io::Result<Decoded> {
        let bytes = &self.buf[self.start..self.start + len];
        let json_like = looks_like_json(bytes);
        if delim == 0 {
            let rec = self.consume(len);
            let bytes = &self.buf[rec..rec + len];
            if json_like && !bytes.is_empty() {
                let d = decode_json_record(bytes);
                if matches!(d, Decoded::Report(_)) {
                    return Ok(d);
                }
                let b = decode_binary_record(bytes, true, &mut self.scratch);
                return Ok(if matches!(b, Decoded::Report(_)) {
                    b
                } else {
                    d
                });
            }
            return Ok(decode_binary_record(bytes, true, &mut self.scratch));
        }
        // Ended by a newline: a JSON line, or a binary frame holding 0x0a.
        let json = if json_like {
            let d = decode_json_record(bytes);
            if matches!(d, Decoded::Report(_)) {
                self.consume(len);
                return Ok(d);
            }
            Some(d)
        } else {
            None
        };
        if let Some(z) = self.zero_after(len + 1)? {
            let frame = &self.buf[self.start..self.start + z];
            if let Ok(r) = decode_frame(frame, &mut self.scratch, true) {
                self.consume(z);
                return Ok(Decoded::Report(r));
            }
        }
        let rec = self.consume(len);
        Ok(match json {
            Some(d) => d,
            None => decode_json_record(&self.buf[rec..rec + len]),
        })
    }

    /// The next record: its number and what it is. `Ok(None)` at the end
    /// of the input; `Err` only for I/O errors.
    pub fn next_record(&mut self) -> io::Result<Option<(u64, Decoded)>> {
        if self.auto {
            let Some(d) = self.next_auto()? else {
                return Ok(None);
            };
            if let (Decoded::Report(_), false) = (&d, self.seen_report) {
                self.seen_report = true;
                // The first report fixes what `format` says.
                self.format = if self.buf.get(self.start.wrapping_sub(1)) == Some(&0) {
                    Format::Binary
                } else {
                    Format::Json
                };
            }
            return Ok(Some((self.number, d)));
        }
        let Some(raw) = self.next_raw()? else {
            return Ok(None);
        };
        let decoded = match raw {
            Raw::TooLong(length) => Decoded::Rejected(RecordRejection::TooLong {
                length,
                limit: self.max,
            }),
            Raw::Bytes(a, b, terminated) => match self.format {
                Format::Json => self.json.decode(&self.buf[a..b]),
                Format::Binary => {
                    decode_binary_record(&self.buf[a..b], terminated, &mut self.scratch)
                }
            },
        };
        Ok(Some((self.number, decoded)))
    }
}

/// Whether a record starts like JSON: after a BOM and ASCII whitespace,
/// `{`, `[`, `#` or nothing.
fn looks_like_json(bytes: &[u8]) -> bool {
    let b = bytes.strip_prefix(BOM).unwrap_or(bytes).trim_ascii_start();
    matches!(b.first(), None | Some(b'{' | b'[' | b'#'))
}

/// Decode one JSON record (a line without its `\n`): BOM, `\r` and
/// surrounding whitespace are ignored; blank and `#` lines are skipped.
pub fn decode_json_record(bytes: &[u8]) -> Decoded {
    let b = match json_body(bytes) {
        Ok(b) => b,
        Err(d) => return d,
    };
    // The layout this crate writes, without serde (same result, ~5x faster).
    if let Some(r) = crate::server::fast_json::parse_canonical(b) {
        return Decoded::Report(r);
    }
    decode_json_slow(b)
}

/// A JSON record without its BOM and surrounding whitespace, or what a
/// blank, `#` or array record decodes to.
fn json_body(bytes: &[u8]) -> core::result::Result<&[u8], Decoded> {
    let b = bytes.strip_prefix(BOM).unwrap_or(bytes).trim_ascii();
    match b.first() {
        None | Some(b'#') => Err(Decoded::Skipped),
        Some(b'[') => Err(Decoded::Rejected(RecordRejection::JsonArray)),
        _ => Ok(b),
    }
}

/// [`decode_json_record`] for a column (or stream) of records: the same
/// result record by record, faster when consecutive records share their
/// header (query, mechanism, ε, δ in the layout this crate writes; only
/// the value and id differ), whose parse it then reuses. Memory: one
/// header (at most one record).
///
/// ```
/// use geopriv::server::ingest::{decode_json_record, Decoded, JsonColumnDecoder};
/// let q = geopriv::QueryDescriptor::Threshold { threshold: 1.0, width: 1.0 };
/// let mut d = JsonColumnDecoder::default();
/// for v in [0.25, 0.5] {
///     let line = geopriv::Report::new(q.clone(), geopriv::MechanismName::Polyplace, 1.0, 0.0, v)
///         .to_json_line();
///     assert_eq!(d.decode(line.as_bytes()), decode_json_record(line.as_bytes()));
/// }
/// ```
#[derive(Clone, Debug, Default)]
pub struct JsonColumnDecoder {
    cache: crate::server::fast_json::HeaderCache,
}

impl JsonColumnDecoder {
    /// Decode one record exactly as [`decode_json_record`] does.
    pub fn decode(&mut self, bytes: &[u8]) -> Decoded {
        let b = match json_body(bytes) {
            Ok(b) => b,
            Err(d) => return d,
        };
        if let Some(r) = crate::server::fast_json::parse_canonical_cached(b, &mut self.cache) {
            return Decoded::Report(r);
        }
        decode_json_slow(b)
    }
}

/// The serde decoder and its rejections (`b` trimmed, not blank).
fn decode_json_slow(b: &[u8]) -> Decoded {
    match core::str::from_utf8(b) {
        Err(e) => Decoded::Rejected(RecordRejection::NotUtf8 {
            valid_up_to: e.valid_up_to(),
        }),
        Ok(s) => match Report::from_json(s) {
            Ok(r) => Decoded::Report(r),
            Err(why) => Decoded::Rejected(why.into()),
        },
    }
}

/// Decode one binary record (a COBS frame without its `0x00`); empty
/// frames are skipped, an unterminated last frame is truncated.
pub fn decode_binary_record(bytes: &[u8], terminated: bool, scratch: &mut Vec<u8>) -> Decoded {
    if bytes.is_empty() {
        return Decoded::Skipped;
    }
    if !terminated {
        return Decoded::Rejected(RecordRejection::Report(Rejection::Truncated {
            detail: "stream ends inside a frame (no 0x00 terminator)".into(),
        }));
    }
    match decode_frame(bytes, scratch, true) {
        Ok(r) => Decoded::Report(r),
        Err(why) => Decoded::Rejected(why.into()),
    }
}

/// Which estimator a group reports besides the (clipped) mean.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum Estimator {
    /// The mean (always computed).
    #[default]
    Mean,
    /// Also the median of means over this many buckets
    /// ([`crate::server::robust`]).
    MedianOfMeans {
        /// K.
        buckets: u32,
    },
}

/// How a [`ReportAggregator`] treats accepted reports.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct AggregationConfig {
    /// Clipping level; `None` turns clipping off (unbounded influence).
    pub clip: Option<ClipLevel>,
    /// Extra robust estimator.
    pub estimator: Estimator,
    /// Largest number of (query, mechanism, ε, δ) groups.
    pub max_groups: usize,
    /// Largest number of groups of one query that has no configured tasks
    /// ([`ValidationPolicy::only_tasks`]); the groups of a task are not
    /// counted. Keeps one query's clients from taking the whole table.
    pub max_groups_per_query: usize,
}

impl Default for AggregationConfig {
    /// Clipping at the default level, mean only, 4096 groups, 16 per query
    /// without tasks.
    fn default() -> Self {
        Self {
            clip: Some(ClipLevel::default()),
            estimator: Estimator::Mean,
            max_groups: DEFAULT_MAX_GROUPS,
            max_groups_per_query: DEFAULT_MAX_GROUPS_PER_QUERY,
        }
    }
}

/// Ordered (not hashed): lookups stay O(log groups) whatever keys a client
/// sends, with no hash flooding.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
struct GroupKey {
    query: QueryKey,
    mechanism: MechanismName,
    epsilon: u64,
    delta: u64,
}

impl GroupKey {
    /// A cheap mix of the key's words for the look-up cache (not for
    /// security: a cache miss falls back to the ordered map).
    #[inline]
    fn slot(&self) -> usize {
        let mut h =
            (self.mechanism as u64) ^ self.epsilon.rotate_left(17) ^ self.delta.rotate_left(41);
        let mut mix = |w: u64| h = (h ^ w).wrapping_mul(0x9E37_79B9_7F4A_7C15).rotate_left(27);
        match &self.query {
            QueryKey::Threshold(a) => a.iter().for_each(|&w| mix(w)),
            QueryKey::Interval(a) | QueryKey::TwoWay(a) => a.iter().for_each(|&w| mix(w)),
            QueryKey::Kde(v) => v.iter().for_each(|&w| mix(w)),
            QueryKey::Region(g, w) => {
                g.chunks_exact(8)
                    .for_each(|c| mix(u64::from_le_bytes(c.try_into().unwrap_or([0; 8]))));
                mix(*w)
            }
        }
        (h.wrapping_mul(0x9E37_79B9_7F4A_7C15) >> (64 - CACHE_BITS)) as usize
    }
}

/// log2 of the direct-mapped cache in front of the group map.
const CACHE_BITS: u32 = 12;

#[derive(Clone, Debug)]
struct Group {
    key: GroupKey,
    query: QueryDescriptor,
    mechanism: MechanismName,
    epsilon: f64,
    delta: f64,
    clip: Option<ClipPolicy>,
    clipped: u64,
    aggregate: Aggregator,
    robust: Option<MedianOfMeans>,
}

/// The public clipping numbers that come with an estimate.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct ClipSummary {
    /// B = [lower, upper].
    pub bounds: [f64; 2],
    /// z, in units of σ_max.
    pub z: f64,
    /// σ_max.
    pub sigma_max: f64,
    /// σ_max · E[(|Z| − z)+]: bound on the honest bias of the mean.
    pub bias_bound: f64,
    /// width(B)/n: the most one report moves the mean.
    pub influence_bound: f64,
    /// sqrt(n) E[(|Z| − z)+]/sd(Z): bound on bias / standard error.
    pub bias_to_se_bound: Option<f64>,
    /// How many reports of the group were clipped.
    pub clipped: u64,
}

/// The estimate of one group.
#[derive(Clone, Debug, PartialEq)]
pub struct GroupEstimate {
    /// The query.
    pub query: QueryDescriptor,
    /// The mechanism.
    pub mechanism: MechanismName,
    /// ε.
    pub epsilon: f64,
    /// δ.
    pub delta: f64,
    /// The mean of the (clipped) reports.
    pub estimate: Estimate,
    /// The clipping numbers (None with clipping off).
    pub clip: Option<ClipSummary>,
    /// The median of means, if asked for and n >= K.
    pub robust: Option<RobustEstimate>,
}

impl GroupEstimate {
    /// The estimate as one line of `geopriv aggregate`'s output (compact
    /// JSON, no newline): query (canonical id), mechanism, epsilon, delta,
    /// n, mean, sum, standard_error, ci95, then `clip` and
    /// `median_of_means` when present. The CLI and the bindings print
    /// through here, so their lines agree byte for byte.
    pub fn to_json_line(&self) -> String {
        #[derive(Serialize)]
        struct Line<'a> {
            query: &'a str,
            mechanism: &'a str,
            epsilon: f64,
            delta: f64,
            n: u64,
            mean: f64,
            sum: f64,
            standard_error: Option<f64>,
            ci95: Option<[f64; 2]>,
            #[serde(skip_serializing_if = "Option::is_none")]
            clip: Option<ClipSummary>,
            #[serde(skip_serializing_if = "Option::is_none")]
            median_of_means: Option<RobustEstimate>,
        }
        let id = self.query.canonical_id();
        let e = &self.estimate;
        let line = Line {
            query: &id,
            mechanism: self.mechanism.as_str(),
            epsilon: self.epsilon,
            delta: self.delta,
            n: e.n,
            mean: e.mean,
            sum: e.sum,
            standard_error: e.standard_error,
            ci95: e.ci95,
            clip: self.clip,
            median_of_means: self.robust,
        };
        // Serializing plain numbers and strings cannot fail; non-finite
        // numbers become null.
        serde_json::to_string(&line).unwrap_or_default()
    }
}

/// The exact partial state of a [`ReportAggregator`]
/// ([`ReportAggregator::state`]), serializable (serde) to ship between
/// machines and merged with [`ReportAggregator::merge_state`].
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AggregatorState {
    /// The clipping level the values were clipped at (None: not clipped).
    pub clip: Option<ClipLevel>,
    /// One entry per group, in key order.
    pub groups: Vec<GroupState>,
}

/// One group of an [`AggregatorState`].
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct GroupState {
    /// The query.
    pub query: QueryDescriptor,
    /// The mechanism.
    pub mechanism: MechanismName,
    /// ε.
    pub epsilon: f64,
    /// δ.
    pub delta: f64,
    /// The exact aggregate of the group's (clipped) values.
    pub aggregate: Aggregator,
    /// How many of them were clipped.
    pub clipped: u64,
}

/// Counts of a stream: every record is exactly one of accepted, rejected
/// or skipped.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Counts {
    /// Records read.
    pub records: u64,
    /// Reports aggregated.
    pub accepted: u64,
    /// Records refused.
    pub rejected: u64,
    /// Blank lines, comment lines, empty frames.
    pub skipped: u64,
}

/// Validates, groups, clips and aggregates reports (module docs).
#[derive(Clone, Debug)]
pub struct ReportAggregator {
    policy: ValidationPolicy,
    config: AggregationConfig,
    index: BTreeMap<GroupKey, usize>,
    groups: Vec<Group>,
    levels: Vec<(NoiseShape, f64)>,
    /// Groups opened per query (queries without tasks).
    per_query: BTreeMap<QueryKey, usize>,
    /// Groups of configured tasks (not counted against `max_groups`).
    task_groups: usize,
    /// Direct-mapped cache: slot -> group index + 1 (0: empty). A hit is
    /// verified against the group's full key; a miss searches the ordered
    /// map, so a crafted key costs O(log groups), never more.
    cache: Vec<u32>,
}

impl ReportAggregator {
    /// An empty aggregator. `config.max_groups` is capped at
    /// [`MAX_GROUPS_LIMIT`].
    pub fn new(policy: ValidationPolicy, config: AggregationConfig) -> Self {
        let mut config = config;
        config.max_groups = config.max_groups.min(MAX_GROUPS_LIMIT);
        Self {
            policy,
            config,
            index: BTreeMap::new(),
            groups: Vec::new(),
            levels: Vec::new(),
            per_query: BTreeMap::new(),
            task_groups: 0,
            cache: std::vec![0; 1 << CACHE_BITS],
        }
    }

    /// Number of groups so far.
    pub fn groups(&self) -> usize {
        self.groups.len()
    }

    fn clip_for(
        &mut self,
        query: &QueryDescriptor,
        mechanism: MechanismName,
        epsilon: f64,
        delta: f64,
    ) -> Result<Option<ClipPolicy>> {
        let Some(level) = self.config.clip else {
            return Ok(None);
        };
        // A task may set its own level.
        let level = match self.policy.task(query, mechanism, epsilon, delta) {
            Some(Some(Some(z))) => ClipLevel::Fixed(z),
            _ => level,
        };
        let m = default_mechanism(mechanism, epsilon, delta)?;
        let level = match (level, m.noise_shape()) {
            (
                ClipLevel::Auto {
                    deployment_n,
                    bias_to_se,
                },
                Some(shape),
            ) => {
                let cached = self.levels.iter().find(|(s, _)| *s == shape);
                let z = match cached {
                    Some(&(_, z)) => z,
                    None => {
                        let z = default_z(shape, deployment_n, bias_to_se)?;
                        self.levels.push((shape, z));
                        z
                    }
                };
                ClipLevel::Fixed(z)
            }
            (level, _) => level,
        };
        let q = query.bounds_query()?;
        ClipPolicy::for_mechanism(&m, &q, level).map(Some)
    }

    /// The index of the group of (`query`, `mechanism`, `epsilon`,
    /// `delta`), opened (with its clipping policy) if new and within
    /// `max_groups`.
    fn group_index(
        &mut self,
        query: &QueryDescriptor,
        mechanism: MechanismName,
        epsilon: f64,
        delta: f64,
    ) -> core::result::Result<usize, RecordRejection> {
        let key = GroupKey {
            query: query.key(),
            mechanism,
            // -0 and +0 are the same budget.
            epsilon: (epsilon + 0.0).to_bits(),
            delta: (delta + 0.0).to_bits(),
        };
        let slot = key.slot();
        let cached = self.cache[slot] as usize;
        let hit = cached
            .checked_sub(1)
            .filter(|&i| self.groups.get(i).is_some_and(|g| g.key == key));
        let i = match hit.or_else(|| self.index.get(&key).copied()) {
            Some(i) => i,
            None => {
                // A configured task always opens (the tasks are a bounded,
                // configured set); any other group counts against both
                // limits, so other clients never crowd out a task.
                let is_task = matches!(
                    self.policy.task(query, mechanism, epsilon, delta),
                    Some(Some(_))
                );
                let per_query = if is_task {
                    None
                } else {
                    let others = self.groups.len() - self.task_groups;
                    if others >= self.config.max_groups {
                        return Err(RecordRejection::TooManyGroups {
                            limit: self.config.max_groups,
                        });
                    }
                    let n = self.per_query.get(&key.query).copied().unwrap_or(0);
                    if n >= self.config.max_groups_per_query {
                        return Err(RecordRejection::TooManyGroupsForQuery {
                            limit: self.config.max_groups_per_query,
                        });
                    }
                    Some(n)
                };
                let clip = self
                    .clip_for(query, mechanism, epsilon, delta)
                    .map_err(|error| RecordRejection::Unclippable { error })?;
                let robust = match self.config.estimator {
                    Estimator::Mean => None,
                    Estimator::MedianOfMeans { buckets } => Some(
                        MedianOfMeans::new(buckets)
                            .map_err(|error| RecordRejection::Unclippable { error })?,
                    ),
                };
                self.groups.push(Group {
                    key: key.clone(),
                    mechanism,
                    epsilon,
                    delta,
                    query: query.clone(),
                    clip,
                    clipped: 0,
                    aggregate: Aggregator::new(),
                    robust,
                });
                match per_query {
                    Some(n) => {
                        self.per_query.insert(key.query.clone(), n + 1);
                    }
                    None => self.task_groups += 1,
                }
                self.index.insert(key, self.groups.len() - 1);
                self.groups.len() - 1
            }
        };
        self.cache[slot] = (i + 1) as u32;
        Ok(i)
    }

    /// Validate a report and add its (clipped) value to its group.
    pub fn offer(&mut self, report: Report) -> core::result::Result<(), RecordRejection> {
        self.policy.validate(&report)?;
        let i = self.group_index(
            &report.query,
            report.mechanism,
            report.epsilon,
            report.delta,
        )?;
        let g = &mut self.groups[i];
        let value = match &g.clip {
            Some(c) => {
                let v = c.clip(report.value);
                g.clipped += (v != report.value) as u64;
                v
            }
            None => report.value,
        };
        g.aggregate
            .add(value)
            .map_err(|error| RecordRejection::Overflow { error })?;
        if let Some(r) = g.robust.as_mut() {
            r.add(value)
                .map_err(|error| RecordRejection::Overflow { error })?;
        }
        Ok(())
    }

    /// The exact partial state: per group its key, the exact aggregate of
    /// its (clipped) values and how many were clipped, in the order of the
    /// group keys, so equal contents give equal states whatever the order
    /// the reports came in. For sharded aggregation: each shard ships its
    /// state, a reducer [`merge_state`](Self::merge_state)s them, and the
    /// result is bit for bit the one of a single aggregator fed every
    /// report (the sums are exact, docs/MATH.md §5).
    pub fn state(&self) -> AggregatorState {
        AggregatorState {
            clip: self.config.clip,
            groups: self
                .index
                .values()
                .map(|&i| {
                    let g = &self.groups[i];
                    GroupState {
                        query: g.query.clone(),
                        mechanism: g.mechanism,
                        epsilon: g.epsilon,
                        delta: g.delta,
                        aggregate: g.aggregate.clone(),
                        clipped: g.clipped,
                    }
                })
                .collect(),
        }
    }

    /// Fold a partial state (from [`state`](Self::state) of an aggregator
    /// with the same configuration) into this one. All or nothing: on a
    /// refusal `self` is unchanged. Refused: another clipping level, a
    /// median-of-means aggregator (its buckets depend on the order of the
    /// reports, so it does not merge exactly), a group this aggregator's
    /// policy refuses or cannot open (limit, no clipping bound), counters
    /// that would overflow.
    pub fn merge_state(
        &mut self,
        state: &AggregatorState,
    ) -> core::result::Result<(), RecordRejection> {
        if self.config.estimator != Estimator::Mean {
            return Err(RecordRejection::IncompatibleState {
                reason: "median-of-means buckets depend on the report order, so they do not merge exactly",
            });
        }
        if state.clip != self.config.clip {
            return Err(RecordRejection::IncompatibleState {
                reason: "the state was clipped at another level",
            });
        }
        let mut merged = self.clone();
        for g in &state.groups {
            // No honest aggregator ships an empty group (it opens a group
            // for a report) or more clipped reports than reports.
            if g.aggregate.n() == 0 {
                return Err(RecordRejection::ForgedState {
                    reason: "an empty group (no aggregator ships one)",
                });
            }
            if g.clipped > g.aggregate.n() {
                return Err(RecordRejection::ForgedState {
                    reason: "more clipped reports than reports in a group",
                });
            }
            // The key must be one this policy accepts (the value is a
            // placeholder: only the query, mechanism, ε and δ are checked).
            merged.policy.validate(&Report::new(
                g.query.clone(),
                g.mechanism,
                g.epsilon,
                g.delta,
                0.0,
            ))?;
            let i = merged.group_index(&g.query, g.mechanism, g.epsilon, g.delta)?;
            let mine = &mut merged.groups[i];
            // Clipped groups: the sums must be those of n values inside
            // the group's public bounds (|Σ| <= B·n, Σx² <= B²·n), or one
            // forged state would move the estimate beyond what clipping
            // allows (issue 19 item 11).
            if let Some(c) = &mine.clip {
                let [lo, hi] = c.bounds();
                if !g.aggregate.within(lo, hi) {
                    return Err(RecordRejection::ForgedState {
                        reason: "sums beyond what n values inside the group's clipping bounds make",
                    });
                }
            }
            mine.aggregate
                .merge(&g.aggregate)
                .map_err(|error| RecordRejection::Overflow { error })?;
            mine.clipped =
                mine.clipped
                    .checked_add(g.clipped)
                    .ok_or(RecordRejection::Overflow {
                        error: Error::Overflow {
                            what: "merged clipped count",
                        },
                    })?;
        }
        *self = merged;
        Ok(())
    }

    /// Read every record of `reader`, offer the reports, and call
    /// `on_reject(record number, reason)` for each refused record. Returns
    /// the counts; `records == accepted + rejected + skipped`.
    pub fn ingest<R: Read>(
        &mut self,
        reader: &mut RecordReader<R>,
        mut on_reject: impl FnMut(u64, &RecordRejection),
    ) -> io::Result<Counts> {
        let mut counts = Counts::default();
        while let Some((number, decoded)) = reader.next_record()? {
            counts.records += 1;
            let outcome = match decoded {
                Decoded::Skipped => {
                    counts.skipped += 1;
                    continue;
                }
                Decoded::Rejected(why) => Err(why),
                Decoded::Report(r) => self.offer(r),
            };
            match outcome {
                Ok(()) => counts.accepted += 1,
                Err(why) => {
                    counts.rejected += 1;
                    on_reject(number, &why);
                }
            }
        }
        Ok(counts)
    }

    /// One estimate per group, sorted by (canonical id, mechanism, ε, δ).
    pub fn estimates(&self) -> Vec<GroupEstimate> {
        let mut out: Vec<(String, GroupEstimate)> = self
            .groups
            .iter()
            .filter_map(|g| {
                let estimate = g.aggregate.estimate()?;
                let clip = g.clip.map(|c| ClipSummary {
                    bounds: c.bounds(),
                    z: c.z(),
                    sigma_max: c.sigma_max(),
                    bias_bound: c.bias_bound(),
                    influence_bound: c.influence_bound(estimate.n).unwrap_or(f64::INFINITY),
                    bias_to_se_bound: c.bias_to_se_bound(estimate.n),
                    clipped: g.clipped,
                });
                Some((
                    g.query.canonical_id(),
                    GroupEstimate {
                        query: g.query.clone(),
                        mechanism: g.mechanism,
                        epsilon: g.epsilon,
                        delta: g.delta,
                        estimate,
                        clip,
                        robust: g.robust.as_ref().and_then(MedianOfMeans::estimate),
                    },
                ))
            })
            .collect();
        out.sort_by(|(a, x), (b, y)| {
            a.cmp(b)
                .then(x.mechanism.cmp(&y.mechanism))
                .then(x.epsilon.total_cmp(&y.epsilon))
                .then(x.delta.total_cmp(&y.delta))
        });
        out.into_iter().map(|(_, e)| e).collect()
    }
}

/// Largest query file ([`read_query_file`]): 64 MiB. A longer input
/// (e.g. `/dev/zero`) is an error, not an endless read.
pub const MAX_QUERY_FILE_BYTES: u64 = 64 << 20;

/// A server's configured queries and tasks ([`read_query_file`]).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct QueryFile {
    /// Every query named (bare or by a task), in file order, each once.
    pub queries: Vec<QueryDescriptor>,
    /// The tasks.
    pub tasks: Vec<Task>,
}

impl QueryFile {
    /// `policy` narrowed to these queries and tasks
    /// ([`ValidationPolicy::only_queries`], [`ValidationPolicy::only_tasks`]).
    pub fn apply(
        &self,
        policy: ValidationPolicy,
    ) -> core::result::Result<ValidationPolicy, String> {
        policy
            .only_queries(&self.queries)
            .only_tasks(&self.tasks)
            .map_err(|e| std::format!("a task is refused by the policy: {e}"))
    }
}

/// Read a query file: one query per line, either a bare canonical id (any
/// mechanism and budget the policy accepts, at most
/// [`AggregationConfig::max_groups_per_query`] groups) or a task
/// `<id> <mechanism> <epsilon> <delta> [<clip z>]` separated by spaces
/// (only these groups for the query; docs/MATH.md §10.6). Blank and `#`
/// lines are ignored; at most `max_queries` distinct queries, lines of at
/// most 4 KiB, at most [`MAX_QUERY_FILE_BYTES`] in all. A bad line is an
/// error naming its line number (escaped, cut).
///
/// ```
/// use geopriv::server::ingest::read_query_file;
/// let f = read_query_file(&b"threshold:T=3;w=1\nthreshold:T=7;w=1 polyplace 0.5 0 4\n"[..], 10)?;
/// assert_eq!((f.queries.len(), f.tasks.len()), (2, 1));
/// assert_eq!(f.tasks[0].clip_z, Some(4.0));
/// # Ok::<(), String>(())
/// ```
pub fn read_query_file<R: Read>(
    input: R,
    max_queries: usize,
) -> core::result::Result<QueryFile, String> {
    let mut limited = input.take(MAX_QUERY_FILE_BYTES + 1);
    let mut reader =
        RecordReader::new(&mut limited, FormatChoice::Json, 4096).map_err(|e| e.to_string())?;
    let mut out = QueryFile::default();
    let mut seen = std::collections::BTreeSet::new();
    while let Some((n, raw)) = reader.next_bytes().map_err(|e| e.to_string())? {
        let bytes = raw.map_err(|why| std::format!("line {n}: {why}"))?;
        let b = bytes.strip_prefix(BOM).unwrap_or(bytes).trim_ascii();
        if b.is_empty() || b[0] == b'#' {
            continue;
        }
        let s = core::str::from_utf8(b).map_err(|_| std::format!("line {n}: not UTF-8"))?;
        let bad = |what: &str, e: &dyn fmt::Display| {
            std::format!("line {n}: {what} {}: {e}", Untrusted(s))
        };
        let mut fields = s.split_ascii_whitespace();
        let id = fields.next().unwrap_or_default();
        let q: QueryDescriptor = id.parse().map_err(|e| bad("query", &e))?;
        let rest: Vec<&str> = fields.collect();
        match rest[..] {
            [] => {}
            [m, e, d] | [m, e, d, _] => {
                let mechanism: MechanismName = m.parse().map_err(|e| bad("mechanism of", &e))?;
                let num = |t: &str, what: &str| {
                    t.parse::<f64>().map_err(|e| bad(what, &e)).and_then(|v| {
                        if v.is_finite() {
                            Ok(v)
                        } else {
                            Err(bad(what, &"not finite"))
                        }
                    })
                };
                let epsilon = num(e, "epsilon of")?;
                let delta = num(d, "delta of")?;
                let clip_z = match rest.get(3) {
                    Some(z) => Some(num(z, "clip z of")?),
                    None => None,
                };
                out.tasks.push(Task {
                    query: q.clone(),
                    mechanism,
                    epsilon,
                    delta,
                    clip_z,
                });
            }
            _ => {
                return Err(bad(
                    "task",
                    &"expected `<id>` or `<id> <mechanism> <epsilon> <delta> [<clip z>]`",
                ))
            }
        }
        if seen.insert(q.key()) {
            if out.queries.len() >= max_queries {
                return Err(std::format!(
                    "line {n}: more than {max_queries} queries in the allow-list"
                ));
            }
            out.queries.push(q);
        }
    }
    if limited.limit() == 0 {
        return Err(std::format!(
            "the query file is longer than {MAX_QUERY_FILE_BYTES} bytes"
        ));
    }
    Ok(out)
}

/// Read an allow-list of queries: one canonical id per line (blank and `#`
/// lines ignored), at most `max_queries` of them, lines of at most 4 KiB
/// (a [`read_query_file`] without tasks: a task line is refused).
/// A bad line is an error naming its line number (escaped, cut).
pub fn read_allow_list<R: Read>(
    input: R,
    max_queries: usize,
) -> core::result::Result<Vec<QueryDescriptor>, String> {
    let f = read_query_file(input, max_queries)?;
    if !f.tasks.is_empty() {
        return Err("the allow-list names tasks: read it with read_query_file".into());
    }
    Ok(f.queries)
}
