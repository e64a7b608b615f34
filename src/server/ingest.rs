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

    /// The next record split off but not yet decoded, for decoding
    /// elsewhere (another thread): its number and a [`Split`] whose
    /// [`Split::decode`] is exactly what [`next_record`](Self::next_record)
    /// would have returned for it. JSON and binary: every record is
    /// [`Split::Json`] or [`Split::Binary`] (or decided here if too long).
    /// `auto`: a record ended by `\n` with no 0x00 byte within
    /// [`MAX_FRAME_PROBE`] (at most `max_record_bytes`) + 1 bytes of its
    /// start is [`Split::Json`], because auto then decodes it as a JSON line
    /// whatever it holds (docs/MATH.md §10.7: a binary frame is only looked
    /// for up to a 0x00 in that window); any other record (a 0x00 near it,
    /// the stream's last unterminated record, a too-long record) is
    /// decided here by the sequential rule and comes as
    /// [`Split::Decoded`]. (Unlike `next_record`, a JSON line handed out
    /// undecoded does not fix what [`format`](Self::format) says.)
    pub fn next_split(&mut self) -> io::Result<Option<(u64, Split<'_>)>> {
        if self.auto {
            if let Some(len) = self.plain_json_line()? {
                let rec = self.consume(len);
                return Ok(Some((self.number, Split::Json(&self.buf[rec..rec + len]))));
            }
            return Ok(self.next_record()?.map(|(n, d)| (n, Split::Decoded(d))));
        }
        let Some(raw) = self.next_raw()? else {
            return Ok(None);
        };
        let split = match raw {
            Raw::TooLong(length) => Split::Decoded(Decoded::Rejected(RecordRejection::TooLong {
                length,
                limit: self.max,
            })),
            Raw::Bytes(a, b, terminated) => match self.format {
                Format::Json => Split::Json(&self.buf[a..b]),
                Format::Binary => Split::Binary(&self.buf[a..b], terminated),
            },
        };
        Ok(Some((self.number, split)))
    }

    /// The delimiter, whether records are binary frames, and the size
    /// limit, as [`next_block`](Self::next_block)'s records are split:
    /// JSON and `auto` by `\n` (auto hands out only zero-free blocks, whose
    /// records are JSON lines, §10.11), binary by 0x00.
    fn block_kind(&self) -> (u8, bool, usize) {
        match (self.auto, self.format) {
            (false, Format::Binary) => (0, true, self.max),
            _ => (b'\n', false, self.max),
        }
    }

    /// Hand out whole records as one block of bytes, read straight into
    /// `out` (about `want` bytes, at most `max_records` records), for
    /// splitting elsewhere (docs/MATH.md §10.11 step 1): the records are
    /// `out[..len]` cut at each delimiter ([`block_kind`](Self::block_kind)),
    /// each ended by it, numbered from `first`; a record longer than the
    /// limit is rejected as too long with its length, as the sequential
    /// reader does. Only when that is exactly what the sequential reader
    /// would return: not in the middle of a too-long record, and with
    /// `auto` only if the bytes read hold no 0x00 and every record's frame
    /// probe window ends within them (or at the end of the input), so each
    /// record is a JSON line (§10.7). Otherwise the bytes go back into the
    /// reader and [`Block::Records`] says how many records to take one by
    /// one ([`next_split`](Self::next_split)) before asking again.
    /// `out`'s length only grows (its tail beyond `len` is scratch).
    fn next_block(
        &mut self,
        out: &mut Vec<u8>,
        want: usize,
        max_records: usize,
    ) -> io::Result<Block> {
        let (delim, _, _) = self.block_kind();
        if self.skipped_bytes.is_some() {
            return Ok(Block::Records(1));
        }
        let left = self.end - self.start;
        let target = want.max(left + 1024);
        if out.len() < target {
            out.resize(target, 0);
        }
        out[..left].copy_from_slice(&self.buf[self.start..self.end]);
        let mut filled = left;
        (self.start, self.end, self.scan, self.zero_free) = (0, 0, 0, 0);
        while filled < target && !self.eof {
            match self.inner.read(&mut out[filled..target]) {
                Ok(0) => self.eof = true,
                Ok(n) => filled += n,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => {
                    self.put_back(&out[..filled]);
                    return Err(e);
                }
            }
        }
        if filled == 0 && self.eof {
            return Ok(Block::End);
        }
        let data = &out[..filled];
        let region = if self.auto && !self.eof {
            // Every record handed out starts at least a probe window
            // before the end of what was read.
            &data[..filled.saturating_sub(self.max.min(MAX_FRAME_PROBE) + 1)]
        } else {
            data
        };
        let cut = if self.auto && memchr::memchr(0, data).is_some() {
            None
        } else {
            cut_records(region, delim, max_records.max(1))
        };
        let Some((cut, count)) = cut else {
            // A 0x00 (auto), or no whole record yet: one by one, at least
            // as many records as delimiters were read.
            let records = 1 + memchr::memchr2_iter(b'\n', 0, data).count() as u64;
            self.put_back(data);
            return Ok(Block::Records(records));
        };
        self.put_back(&data[cut + 1..]);
        let first = self.number + 1;
        self.number += count as u64;
        Ok(Block::Bytes {
            first,
            len: cut + 1,
        })
    }

    /// Make `bytes` the reader's buffered input (the buffer grows if
    /// needed, to at most a block and a chunk more).
    fn put_back(&mut self, bytes: &[u8]) {
        if self.buf.len() < bytes.len() + CHUNK {
            self.buf.resize(bytes.len() + CHUNK, 0);
        }
        self.buf[..bytes.len()].copy_from_slice(bytes);
        (self.start, self.end, self.scan, self.zero_free) = (0, bytes.len(), 0, 0);
    }

    /// Auto: the length of the next record if it is already buffered,
    /// ended by `\n`, not too long and has no 0x00 within the frame probe
    /// window of its start (so auto decodes it as a JSON line); `None`
    /// otherwise (nothing consumed).
    fn plain_json_line(&mut self) -> io::Result<Option<usize>> {
        if self.skipped_bytes.is_some() {
            return Ok(None);
        }
        let Some(i) = memchr::memchr2(b'\n', 0, &self.buf[self.scan..self.end]) else {
            return Ok(None);
        };
        let pos = self.scan + i;
        let len = pos - self.start;
        if self.buf[pos] != b'\n' || len > self.max {
            return Ok(None);
        }
        // zero_after may read more input (moving the buffer); `len` is
        // relative to `start` and stays valid.
        Ok(match self.zero_after(len + 1)? {
            None => Some(len),
            Some(_) => None,
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

/// What [`RecordReader::next_block`] handed out.
#[derive(Debug, PartialEq)]
enum Block {
    /// Records `first..` are `out[..len]`, each ended by the delimiter.
    Bytes { first: u64, len: usize },
    /// Take this many records one by one first (or until the input ends).
    Records(u64),
    /// The input has ended and nothing is buffered.
    End,
}

/// Decode the records of a block ([`RecordReader::next_block`]) numbered
/// from `first`, as the sequential reader does (docs/MATH.md §10.11 step 1):
/// each record ends at `kind.0`; one longer than `kind.2` is too long; the
/// others are binary frames (`kind.1`) or JSON lines.
fn split_block(
    block: &[u8],
    first: u64,
    kind: (u8, bool, usize),
    json: &mut JsonColumnDecoder,
    scratch: &mut Vec<u8>,
    mut each: impl FnMut(u64, Decoded),
) {
    let (delim, binary, max) = kind;
    let (mut a, mut n) = (0, first);
    for p in memchr::memchr_iter(delim, block) {
        let rec = &block[a..p];
        a = p + 1;
        let d = if rec.len() > max {
            Decoded::Rejected(RecordRejection::TooLong {
                length: rec.len() as u64,
                limit: max,
            })
        } else if binary {
            decode_binary_record(rec, true, scratch)
        } else {
            json.decode(rec)
        };
        each(n, d);
        n += 1;
    }
}

/// How many bytes of `bytes` are `b`: byte-wide counters over 224-byte
/// runs (at most 224 < 256 per counter), which the compiler turns into
/// vector compares and subtractions, 16 or 32 bytes at a time.
fn count_byte(bytes: &[u8], b: u8) -> usize {
    let mut runs = bytes.chunks_exact(224);
    let mut total = 0;
    for run in &mut runs {
        let mut k = 0u8;
        for &x in run {
            k = k.wrapping_add((x == b) as u8);
        }
        total += k as usize;
    }
    total + runs.remainder().iter().filter(|&&x| x == b).count()
}

/// The end (index of the delimiter) of the last whole record of `region`,
/// at most `max_records` of them, and how many records that is.
fn cut_records(region: &[u8], delim: u8, max_records: usize) -> Option<(usize, usize)> {
    let mut count = 0;
    let mut at = 0;
    // Counting is a vectorised pass; only the chunk where the record limit
    // falls is walked delimiter by delimiter.
    for chunk in region.chunks(4096) {
        let c = count_byte(chunk, delim);
        if count + c >= max_records {
            let k = max_records - count;
            let i = memchr::memchr_iter(delim, chunk).nth(k - 1)?;
            return Some((at + i, max_records));
        }
        count += c;
        at += chunk.len();
    }
    Some((memchr::memrchr(delim, region)?, count))
}

/// A record split off by [`RecordReader::next_split`], to be decoded
/// (possibly on another thread) with [`Split::decode`].
#[derive(Debug)]
pub enum Split<'a> {
    /// A JSON line (without its `\n`).
    Json(&'a [u8]),
    /// A binary frame (without its 0x00) and whether it was terminated.
    Binary(&'a [u8], bool),
    /// Decided by the reader.
    Decoded(Decoded),
}

impl Split<'_> {
    /// What [`RecordReader::next_record`] returns for this record
    /// (`json`: any column decoder, `scratch`: any buffer; neither changes
    /// the result).
    pub fn decode(self, json: &mut JsonColumnDecoder, scratch: &mut Vec<u8>) -> Decoded {
        match self {
            Split::Json(b) => json.decode(b),
            Split::Binary(b, terminated) => decode_binary_record(b, terminated, scratch),
            Split::Decoded(d) => d,
        }
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
    fn of(query: &QueryDescriptor, mechanism: MechanismName, epsilon: f64, delta: f64) -> Self {
        GroupKey {
            query: query.key(),
            mechanism,
            // -0 and +0 are the same budget.
            epsilon: (epsilon + 0.0).to_bits(),
            delta: (delta + 0.0).to_bits(),
        }
    }

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
    /// Which policy the verdicts of [`CheckedReport`]s it made were
    /// reached under (an id shared only by its clones, same policy).
    checker: u64,
}

/// Source of [`ReportAggregator`] policy ids.
static NEXT_CHECKER: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(1);

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
            checker: NEXT_CHECKER.fetch_add(1, std::sync::atomic::Ordering::Relaxed),
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
    /// `hint`: where the group may be (used only if the group there has
    /// exactly this key, i.e. is the group the look-up would find).
    fn group_index(
        &mut self,
        query: &QueryDescriptor,
        mechanism: MechanismName,
        epsilon: f64,
        delta: f64,
        hint: Option<usize>,
    ) -> core::result::Result<usize, RecordRejection> {
        let key = GroupKey::of(query, mechanism, epsilon, delta);
        if let Some(i) = hint.filter(|&i| self.groups.get(i).is_some_and(|g| g.key == key)) {
            return Ok(i);
        }
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
        self.offer_valid(&report, None)
    }

    /// [`offer`](Self::offer) of a report checked by
    /// [`ingest_ordered`](Self::ingest_ordered): its verdict is reused if this
    /// aggregator (or a clone) reached it, else the report is validated
    /// again. The same result as `offer(checked.into_report())`.
    pub fn offer_checked(
        &mut self,
        checked: CheckedReport,
    ) -> core::result::Result<(), RecordRejection> {
        let hint = if checked.checker == self.checker {
            checked.verdict?;
            checked.group.map(|i| i as usize)
        } else {
            self.policy.validate(&checked.report)?;
            None
        };
        self.offer_valid(&checked.report, hint)
    }

    /// Group, clip and add a report that passed `self.policy`.
    fn offer_valid(
        &mut self,
        report: &Report,
        hint: Option<usize>,
    ) -> core::result::Result<(), RecordRejection> {
        let i = self.group_index(
            &report.query,
            report.mechanism,
            report.epsilon,
            report.delta,
            hint,
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
            let i = merged.group_index(&g.query, g.mechanism, g.epsilon, g.delta, None)?;
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

    /// [`ingest`](Self::ingest) on `threads` threads (at most
    /// [`MAX_INGEST_THREADS`]), bit for bit the same
    /// (the same estimates, counts and rejections in the same order, for
    /// any `threads`; docs/MATH.md §10.11): records are decoded and
    /// validated in parallel and offered in record order
    /// ([`ingest_ordered`](Self::ingest_ordered)).
    ///
    /// ```
    /// use geopriv::server::ingest::{AggregationConfig, FormatChoice, RecordReader, ReportAggregator};
    /// use geopriv::{MechanismName, QueryDescriptor, Report, ValidationPolicy};
    /// let mut input = Vec::new();
    /// for i in 0..2_000 {
    ///     let q = QueryDescriptor::Threshold { threshold: (i % 40) as f64, width: 20.0 };
    ///     let eps = if i % 7 == 0 { 0.01 * (i % 30) as f64 } else { 0.05 };
    ///     input.extend(Report::new(q, MechanismName::Polyplace, eps, 0.0, 0.1 * i as f64).to_json_line().bytes());
    ///     input.extend(if i % 13 == 0 { &b"\nnot a report\n"[..] } else { b"\n" });
    /// }
    /// let run = |threads| {
    ///     let mut reader = RecordReader::new(&input[..], FormatChoice::Auto, 1 << 16).unwrap();
    ///     let mut agg = ReportAggregator::new(ValidationPolicy::new(1.0, 0.0).unwrap(), AggregationConfig::default());
    ///     let mut rejected = Vec::new();
    ///     let counts = agg.ingest_parallel(&mut reader, threads, |n, why| rejected.push((n, why.to_string()))).unwrap();
    ///     let lines: Vec<String> = agg.estimates().iter().map(|e| e.to_json_line()).collect();
    ///     (counts, rejected, lines)
    /// };
    /// let one = run(1);
    /// assert!(!one.1.is_empty());
    /// assert_eq!(run(2), one);
    /// assert_eq!(run(5), one);
    /// ```
    pub fn ingest_parallel<R: Read>(
        &mut self,
        reader: &mut RecordReader<R>,
        threads: usize,
        mut on_reject: impl FnMut(u64, &RecordRejection),
    ) -> io::Result<Counts> {
        let mut counts = Counts::default();
        self.ingest_ordered_absorbing(reader, threads, |agg, number, checked| {
            counts.records += 1;
            let outcome = match checked {
                Checked::Skipped => {
                    counts.skipped += 1;
                    return Ok::<(), io::Error>(());
                }
                Checked::Absorbed(k)
                | Checked::AbsorbedWithIds(k)
                | Checked::AcceptedIdsRemembered(k) => {
                    counts.records += k - 1;
                    counts.accepted += k;
                    return Ok(());
                }
                // Not made here (no id set is published).
                Checked::Duplicate => {
                    counts.skipped += 1;
                    return Ok(());
                }
                Checked::Rejected(why) => Err(why),
                Checked::Report(r) => agg.offer_checked(r),
            };
            match outcome {
                Ok(()) => counts.accepted += 1,
                Err(why) => {
                    counts.rejected += 1;
                    on_reject(number, &why);
                }
            }
            Ok(())
        })?;
        Ok(counts)
    }

    /// Read every record of `reader` on `threads` threads and hand each,
    /// decoded and checked against this aggregator's policy, to
    /// `each(self, record number, checked)` **in record order**, on the
    /// calling thread. `each` decides what to do with it (usually
    /// [`offer_checked`](Self::offer_checked)); an `Err` from it stops the
    /// read. With `threads` <= 1 the records are read, decoded and checked
    /// one after the other on the calling thread.
    ///
    /// Every record gets exactly what the sequential path gives it: the
    /// calling thread reads blocks of whole records of about 256 KiB or
    /// 4,096 records (`RecordReader::next_block`, private), which the workers cut
    /// into records themselves, and splits records one by one
    /// ([`RecordReader::next_split`]) only where a block would not be
    /// exactly the sequential reader's records (an `auto` stream with a
    /// 0x00, a too-long record); either way the same record numbers, size
    /// limits and `auto` decisions. The workers decode
    /// ([`Split::decode`]) and validate (a pure function of the report and
    /// the policy); everything that depends on
    /// the records before (a group's admission, report-id deduplication in
    /// the caller, the sums) stays on the calling thread, in order
    /// (docs/MATH.md §10.11). Memory: at most 3·`threads` batches in
    /// flight (each its bytes, at most 256 KiB + one record, and 4,096
    /// decoded reports), besides the reader's buffer.
    pub fn ingest_ordered<R: Read, E: From<io::Error>>(
        &mut self,
        reader: &mut RecordReader<R>,
        threads: usize,
        each: impl FnMut(&mut Self, u64, Checked) -> core::result::Result<(), E>,
    ) -> core::result::Result<(), E> {
        self.ingest_batched(
            reader,
            threads,
            (ORDERED_BATCH_BYTES, ORDERED_BATCH_RECORDS),
            (false, None, None),
            each,
        )
    }

    /// [`ingest_ordered`](Self::ingest_ordered), except that a report
    /// without a `report_id` that passes the policy and whose group is
    /// already open is aggregated (clipped and added) on the worker that
    /// decoded it, into that worker's own partial state, and reaches `each`
    /// only counted: runs of such reports come as one
    /// [`Checked::Absorbed`]`(k)` (with the number of the last of them),
    /// in record order among the other records. The workers' partial
    /// states are merged into `self` when the read ends; the sums are
    /// exact, so the result is bit for bit the sequential one
    /// (docs/MATH.md §10.11): an absorbed report only goes to a group that
    /// is open, so no group admission depends on it, and it cannot
    /// overflow a count (absorbing is off unless every group holds fewer
    /// than 2^63 reports at the start). Only for a median-of-means
    /// aggregator (its buckets depend on the order) nothing is absorbed.
    /// If `each` or the reader fails, the read stops and the aggregator
    /// holds the reports applied so far but not the absorbed ones.
    pub fn ingest_ordered_absorbing<R: Read, E: From<io::Error>>(
        &mut self,
        reader: &mut RecordReader<R>,
        threads: usize,
        each: impl FnMut(&mut Self, u64, Checked) -> core::result::Result<(), E>,
    ) -> core::result::Result<(), E> {
        self.ingest_batched(
            reader,
            threads,
            (ORDERED_BATCH_BYTES, ORDERED_BATCH_RECORDS),
            (true, None, None),
            each,
        )
    }

    /// [`ingest_ordered_absorbing`](Self::ingest_ordered_absorbing) for a
    /// caller that counts each `report_id` once with a set of at most a
    /// fixed number of ids (the CLI's `--max-report-ids`, as the collector).
    /// Once the caller has [`FullIdSet::publish`]ed the set as full (no id
    /// is ever added again), a worker decides such reports itself when
    /// their fate no longer depends on the records before: a report that
    /// is valid and whose group is open comes as [`Checked::Duplicate`] if
    /// its id is in the set, else it is aggregated on the worker and
    /// counted in a [`Checked::AbsorbedWithIds`] run (accepted, its id not
    /// remembered). The caller must publish the set while handling the
    /// record that fills it (or before the read); every batch a worker
    /// takes after that lies wholly after that record (docs/MATH.md
    /// §10.11), so each such decision is the one the caller would make.
    pub fn ingest_ordered_absorbing_ids<R: Read, E: From<io::Error>>(
        &mut self,
        reader: &mut RecordReader<R>,
        threads: usize,
        full: &FullIdSet,
        each: impl FnMut(&mut Self, u64, Checked) -> core::result::Result<(), E>,
    ) -> core::result::Result<(), E> {
        self.ingest_batched(
            reader,
            threads,
            (ORDERED_BATCH_BYTES, ORDERED_BATCH_RECORDS),
            (true, Some(full), None),
            each,
        )
    }

    /// [`ingest_ordered_absorbing_ids`](Self::ingest_ordered_absorbing_ids)
    /// with the ids of the records numbered below `shards.room()` (those
    /// for which the caller's set surely has room) deduplicated on the
    /// workers: such a report comes as [`Checked::Duplicate`] if an earlier
    /// report with its id was accepted on a worker; else, if it is valid
    /// and its group open, it is aggregated on the worker, its id
    /// remembered in `shards`, and counted in a
    /// [`Checked::AcceptedIdsRemembered`] run; else it reaches `each` as
    /// [`Checked::Report`], and `each` decides it with its own set, which
    /// then must hold exactly the ids `each` accepted. Before handling the
    /// first record numbered `shards.room()` or later, `each` must move
    /// [`IdShards::take_accepted`] into its set (docs/MATH.md §10.11 step
    /// 6). With `threads` <= 1 or a median-of-means aggregator the shards
    /// stay empty and `each` sees every report.
    pub fn ingest_ordered_sharded_ids<R: Read, E: From<io::Error>>(
        &mut self,
        reader: &mut RecordReader<R>,
        threads: usize,
        full: &FullIdSet,
        shards: &IdShards,
        each: impl FnMut(&mut Self, u64, Checked) -> core::result::Result<(), E>,
    ) -> core::result::Result<(), E> {
        self.ingest_batched(
            reader,
            threads,
            (ORDERED_BATCH_BYTES, ORDERED_BATCH_RECORDS),
            (true, Some(full), Some(shards)),
            each,
        )
    }

    /// [`ingest_ordered`](Self::ingest_ordered) with batches of `batch` =
    /// (bytes, records).
    fn ingest_batched<R: Read, E: From<io::Error>>(
        &mut self,
        reader: &mut RecordReader<R>,
        threads: usize,
        batch: (usize, usize),
        (absorb, full, shards): (bool, Option<&FullIdSet>, Option<&IdShards>),
        mut each: impl FnMut(&mut Self, u64, Checked) -> core::result::Result<(), E>,
    ) -> core::result::Result<(), E> {
        let (batch_bytes, batch_records) = (batch.0.max(1), batch.1.max(1));
        let checker = self.checker;
        // More threads than this only cost memory (the output is the same
        // for any count), and past what the system can start a worker
        // aborts the process: `--threads 100000` did.
        let threads = threads.min(MAX_INGEST_THREADS);
        if threads <= 1 {
            while let Some((n, d)) = reader.next_record()? {
                let c = check_decoded(&self.policy, checker, d, None);
                each(self, n, c)?;
            }
            return Ok(());
        }
        let policy = self.policy.clone();
        let (delim, binary, max) = reader.block_kind();
        let absorb = absorb
            && self.config.estimator == Estimator::Mean
            && self.groups.iter().all(|g| g.aggregate.n() < 1 << 63);
        // Ids are decided on the workers only where they can be absorbed.
        let shards = shards.filter(|_| absorb);
        let (work_tx, work_rx) = std::sync::mpsc::channel::<WorkBatch>();
        let work_rx = std::sync::Mutex::new(work_rx);
        let (done_tx, done_rx) = std::sync::mpsc::channel::<CheckedBatch>();
        // Emptied result vectors, back from the calling thread.
        let outs: std::sync::Mutex<Vec<Vec<(u64, Checked)>>> = std::sync::Mutex::new(Vec::new());
        // Keys of the groups opened so far, for the workers' hints.
        let published: std::sync::Mutex<Vec<(GroupKey, Option<ClipPolicy>)>> =
            std::sync::Mutex::new(Vec::new());
        let published_len = std::sync::atomic::AtomicUsize::new(0);
        std::thread::scope(|s| {
            let workers: Vec<_> = (0..threads)
                .map(|_| {
                    let (work_rx, policy, done_tx) = (&work_rx, &policy, done_tx.clone());
                    let (outs, published, published_len) = (&outs, &published, &published_len);
                    s.spawn(move || {
                        let _fail = FailOnUnwind(shards.map(|s| &s.failed));
                        // Id-carrying reports below the room: (index in
                        // `out`, shard, id).
                        let mut todo: Vec<(usize, u64, [u8; 16])> = Vec::new();
                        let mut json = JsonColumnDecoder::default();
                        let mut scratch = Vec::new();
                        let mut hints = GroupHints::default();
                        // Per group: this worker's partial sum and clipped count.
                        let mut partial: Vec<Option<(Aggregator, u64)>> = Vec::new();
                        loop {
                            let batch = match work_rx.lock() {
                                Ok(rx) => rx.recv(),
                                Err(_) => break,
                            };
                            let Ok(WorkBatch {
                                seq,
                                bytes,
                                mut recs,
                                block,
                            }) = batch
                            else {
                                break;
                            };
                            if published_len.load(std::sync::atomic::Ordering::Acquire)
                                > hints.keys.len()
                            {
                                hints.sync(published);
                            }
                            let mut out = outs
                                .lock()
                                .ok()
                                .and_then(|mut o| o.pop())
                                .unwrap_or_default();
                            // A run of absorbed reports: how many, the last
                            // number, and whether they carry ids.
                            let mut run = (0u64, 0u64, false);
                            let flush = |run: &mut (u64, u64, bool), out: &mut Vec<_>| {
                                if run.0 > 0 {
                                    let k = match run.2 {
                                        false => Checked::Absorbed(run.0),
                                        true => Checked::AbsorbedWithIds(run.0),
                                    };
                                    out.push((run.1, k));
                                }
                                *run = (0, 0, false);
                            };
                            let first = match block {
                                Some((first, _)) => first,
                                None => recs.first().map_or(u64::MAX, |r| r.0),
                            };
                            let room = shards.filter(|sh| first < sh.room);
                            let mut each_record = |n: u64, d: Decoded| {
                                let c = check_decoded(policy, checker, d, Some(&mut hints));
                                if let (Some(sh), Checked::Report(r)) = (room, &c) {
                                    if let (true, Some(id)) = (n < sh.room, &r.report.report_id) {
                                        // Decided below, in the shard's order.
                                        flush(&mut run, &mut out);
                                        todo.push((out.len(), sh.key_of(&id.0), id.0));
                                        out.push((n, c));
                                        return;
                                    }
                                }
                                let set = full.and_then(FullIdSet::get);
                                let id = keyed_id(&c);
                                // Without an id (absorb_into takes only
                                // valid reports in open groups).
                                if absorb && id.is_none() && absorb_into(&mut partial, &hints, &c) {
                                    if run.2 {
                                        flush(&mut run, &mut out);
                                    }
                                    run = (run.0 + 1, n, false);
                                    return;
                                }
                                if let (true, Some(set), Some(id)) = (absorb, set, id) {
                                    // The set is full: it no longer changes.
                                    if set.contains(&id) {
                                        flush(&mut run, &mut out);
                                        out.push((n, Checked::Duplicate));
                                        return;
                                    }
                                    if absorb_into(&mut partial, &hints, &c) {
                                        if !run.2 {
                                            flush(&mut run, &mut out);
                                        }
                                        run = (run.0 + 1, n, true);
                                        return;
                                    }
                                }
                                flush(&mut run, &mut out);
                                out.push((n, c));
                            };
                            if let Some((first, len)) = block {
                                let block = bytes.get(..len).unwrap_or_default();
                                let kind = (delim, binary, max);
                                let (json, scratch) = (&mut json, &mut scratch);
                                split_block(block, first, kind, json, scratch, &mut each_record);
                            }
                            for (n, piece) in recs.drain(..) {
                                let split = match piece {
                                    Piece::Json(a, b) => Split::Json(&bytes[a..b]),
                                    Piece::Binary(a, b, t) => Split::Binary(&bytes[a..b], t),
                                    Piece::Decoded(d) => Split::Decoded(d),
                                };
                                each_record(n, split.decode(&mut json, &mut scratch));
                            }
                            flush(&mut run, &mut out);
                            if let Some(sh) = room {
                                let add = |c: &Checked| absorb_into(&mut partial, &hints, c);
                                if !decide_ids(sh, seq, &mut todo, &mut out, add) {
                                    break;
                                }
                                if !todo.is_empty() {
                                    merge_runs(&mut out);
                                }
                                todo.clear();
                            }
                            if done_tx.send((seq, out, (bytes, recs))).is_err() {
                                break;
                            }
                        }
                        partial
                    })
                })
                .collect();
            drop(done_tx);
            let (outs, published, published_len) = (&outs, &published, &published_len);
            let workers_ref = &workers;
            // Owns `work_tx`: dropped on any return, which stops the workers.
            let mut run = move |agg: &mut Self| -> core::result::Result<(), E> {
                let limit = 3 * threads as u64;
                let (mut sent, mut next, mut eof) = (0u64, 0u64, false);
                let mut pending: BTreeMap<u64, Vec<(u64, Checked)>> = BTreeMap::new();
                let mut buffers: Vec<BatchBuffers> = Vec::new();
                // Records to take one by one before the next block: up to
                // this record number.
                let mut one_by_one = 0u64;
                loop {
                    if !eof && sent - next < limit {
                        let (mut bytes, mut recs) = buffers.pop().unwrap_or_default();
                        let mut block = None;
                        if reader.records() >= one_by_one {
                            match reader.next_block(&mut bytes, batch_bytes, batch_records)? {
                                Block::Bytes { first, len } => block = Some((first, len)),
                                Block::Records(k) => one_by_one = reader.records() + k,
                                Block::End => eof = true,
                            }
                        }
                        if block.is_none() {
                            bytes.clear();
                        }
                        while block.is_none()
                            && !eof
                            && bytes.len() < batch_bytes
                            && recs.len() < batch_records
                            && reader.records() < one_by_one
                        {
                            let Some((n, split)) = reader.next_split()? else {
                                eof = true;
                                break;
                            };
                            let a = bytes.len();
                            let piece = match split {
                                Split::Json(b) => {
                                    bytes.extend_from_slice(b);
                                    Piece::Json(a, bytes.len())
                                }
                                Split::Binary(b, t) => {
                                    bytes.extend_from_slice(b);
                                    Piece::Binary(a, bytes.len(), t)
                                }
                                Split::Decoded(d) => Piece::Decoded(d),
                            };
                            recs.push((n, piece));
                        }
                        if !recs.is_empty() || block.is_some() {
                            let batch = WorkBatch {
                                seq: sent,
                                bytes,
                                recs,
                                block,
                            };
                            if work_tx.send(batch).is_err() {
                                return Err(io::Error::other("record workers stopped").into());
                            }
                            sent += 1;
                        }
                        while let Ok((seq, out, buf)) = done_rx.try_recv() {
                            pending.insert(seq, out);
                            buffers.push(buf);
                        }
                    } else if next == sent {
                        return Ok(());
                    } else {
                        // Wait for the next batch in order (a worker that
                        // ended while work remains has failed).
                        loop {
                            match done_rx.recv_timeout(std::time::Duration::from_millis(100)) {
                                Ok((seq, out, buf)) => {
                                    pending.insert(seq, out);
                                    buffers.push(buf);
                                    break;
                                }
                                Err(std::sync::mpsc::RecvTimeoutError::Timeout)
                                    if !workers_ref.iter().any(|w| w.is_finished()) => {}
                                Err(_) => {
                                    return Err(io::Error::other("a record worker failed").into())
                                }
                            }
                        }
                    }
                    while let Some(mut out) = pending.remove(&next) {
                        next += 1;
                        for (n, c) in out.drain(..) {
                            each(agg, n, c)?;
                        }
                        if let Ok(mut o) = outs.lock() {
                            o.push(out);
                        }
                    }
                    let opened = agg.groups.len();
                    if opened > published_len.load(std::sync::atomic::Ordering::Relaxed) {
                        if let Ok(mut p) = published.lock() {
                            let from = p.len();
                            p.extend(
                                agg.groups
                                    .get(from..)
                                    .unwrap_or_default()
                                    .iter()
                                    .map(|g| (g.key.clone(), g.clip)),
                            );
                        }
                        published_len.store(opened, std::sync::atomic::Ordering::Release);
                    }
                }
            };
            let result = run(self);
            // Stops the workers (drops the work channel).
            drop(run);
            let partials: Vec<_> = workers.into_iter().map(|w| w.join()).collect();
            result?;
            for p in partials {
                let p = p.map_err(|_| io::Error::other("a record worker failed"))?;
                for (i, part) in p.into_iter().enumerate() {
                    let (Some((sum, clipped)), Some(g)) = (part, self.groups.get_mut(i)) else {
                        continue;
                    };
                    g.aggregate.merge(&sum).map_err(io::Error::other)?;
                    g.clipped += clipped;
                }
            }
            Ok(())
        })
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

/// Most worker threads [`ReportAggregator::ingest_ordered`] starts; a
/// larger count is taken as this one (the output does not depend on it).
pub const MAX_INGEST_THREADS: usize = 256;

/// Bytes of records per batch of [`ReportAggregator::ingest_ordered`].
const ORDERED_BATCH_BYTES: usize = 256 << 10;
/// Records per batch of [`ReportAggregator::ingest_ordered`].
const ORDERED_BATCH_RECORDS: usize = 4096;

/// A record of a batch: its range in the batch's bytes, or decided.
enum Piece {
    Json(usize, usize),
    Binary(usize, usize, bool),
    Decoded(Decoded),
}

/// Records for a worker: the batch's place in the stream, the records'
/// bytes back to back, and per record its number and piece; or a block
/// of whole records the worker splits itself.
struct WorkBatch {
    seq: u64,
    bytes: Vec<u8>,
    recs: Vec<(u64, Piece)>,
    /// A block ([`RecordReader::next_block`]): the first record's number
    /// and the length of its bytes; `recs` is then empty.
    block: Option<(u64, usize)>,
}

/// A worker's result: the batch's place and its checked records.
/// A worker's result: the batch's place, its checked records, and the
/// batch's emptied buffers (reused, so the pipeline allocates only while
/// it fills up).
type CheckedBatch = (u64, Vec<(u64, Checked)>, BatchBuffers);

/// A batch's byte and record buffers.
type BatchBuffers = (Vec<u8>, Vec<(u64, Piece)>);

/// A record as [`ReportAggregator::ingest_ordered`] hands it over.
#[derive(Clone, Debug, PartialEq)]
pub enum Checked {
    /// A blank line, a `#` comment line or an empty frame.
    Skipped,
    /// Refused by the reader or the decoder.
    Rejected(RecordRejection),
    /// A decoded report with the policy's verdict on it.
    Report(CheckedReport),
    /// This many reports (the number handed with it is the last one's),
    /// each valid, without a `report_id`, in an open group, and aggregated
    /// on a worker ([`ReportAggregator::ingest_ordered_absorbing`] only).
    Absorbed(u64),
    /// This many reports, each valid, in an open group, with a `report_id`
    /// not in the published full set, aggregated on a worker: accepted,
    /// their ids not remembered
    /// ([`ReportAggregator::ingest_ordered_absorbing_ids`] only).
    AbsorbedWithIds(u64),
    /// A report whose `report_id` an earlier accepted report had: a
    /// duplicate (the published full set,
    /// [`ReportAggregator::ingest_ordered_absorbing_ids`], or the shards,
    /// [`ReportAggregator::ingest_ordered_sharded_ids`]).
    Duplicate,
    /// This many reports, each valid, in an open group, with a `report_id`
    /// that no earlier accepted report had, numbered below the shards'
    /// room, aggregated on a worker: accepted, their ids remembered in the
    /// [`IdShards`] ([`ReportAggregator::ingest_ordered_sharded_ids`] only).
    AcceptedIdsRemembered(u64),
}

/// A decoded report and its aggregator's policy verdict
/// ([`ReportAggregator::offer_checked`]).
#[derive(Clone, Debug, PartialEq)]
pub struct CheckedReport {
    report: Report,
    verdict: core::result::Result<(), Rejection>,
    checker: u64,
    /// Where its group was when it was checked, if open then.
    group: Option<u32>,
}

impl CheckedReport {
    /// The report.
    pub fn report(&self) -> &Report {
        &self.report
    }

    /// The report, without its verdict.
    pub fn into_report(self) -> Report {
        self.report
    }
}

/// A decoded record checked against `policy`, with where its group was
/// (in `hints`, if given).
fn check_decoded(
    policy: &ValidationPolicy,
    checker: u64,
    d: Decoded,
    hints: Option<&mut GroupHints>,
) -> Checked {
    match d {
        Decoded::Skipped => Checked::Skipped,
        Decoded::Rejected(why) => Checked::Rejected(why),
        Decoded::Report(report) => {
            let verdict = policy.validate(&report);
            let group = match (hints, &verdict) {
                (Some(h), Ok(())) => h.find(&GroupKey::of(
                    &report.query,
                    report.mechanism,
                    report.epsilon,
                    report.delta,
                )),
                _ => None,
            };
            Checked::Report(CheckedReport {
                report,
                verdict,
                checker,
                group,
            })
        }
    }
}

/// A worker's copy of the keys of the groups opened so far (in group
/// order; groups are never closed or moved), to tell the calling thread
/// where a report's group is. Only a hint: the aggregator uses it only if
/// the group there has the report's key. Looked up like the aggregator's
/// own index: a direct-mapped cache, then an ordered map.
#[derive(Default)]
struct GroupHints {
    keys: Vec<GroupKey>,
    clips: Vec<Option<ClipPolicy>>,
    index: BTreeMap<GroupKey, u32>,
    cache: Vec<u32>,
}

impl GroupHints {
    /// Copy the keys published since the last sync.
    fn sync(&mut self, published: &std::sync::Mutex<Vec<(GroupKey, Option<ClipPolicy>)>>) {
        let Ok(all) = published.lock() else { return };
        for (k, clip) in all.get(self.keys.len()..).unwrap_or_default() {
            self.index.insert(k.clone(), self.keys.len() as u32);
            self.keys.push(k.clone());
            self.clips.push(*clip);
        }
    }

    fn find(&mut self, key: &GroupKey) -> Option<u32> {
        if self.cache.is_empty() {
            self.cache = std::vec![0; 1 << CACHE_BITS];
        }
        let slot = key.slot();
        let c = self.cache[slot] as usize;
        if c.checked_sub(1)
            .is_some_and(|i| self.keys.get(i) == Some(key))
        {
            return Some(c as u32 - 1);
        }
        let i = *self.index.get(key)?;
        self.cache[slot] = i + 1;
        Some(i)
    }
}

/// The id of a valid report with a `report_id` whose group is open.
fn keyed_id(c: &Checked) -> Option<[u8; 16]> {
    let Checked::Report(r) = c else { return None };
    match (&r.verdict, r.group, &r.report.report_id) {
        (Ok(()), Some(_), Some(id)) => Some(id.0),
        _ => None,
    }
}

/// Aggregate `c` into a worker's `partial` state if it is a valid report
/// whose group is open (`hints` knows it) and whose clipped value is
/// finite; `true` if it was. The caller has ruled out a `report_id` whose
/// fate is undecided.
fn absorb_into(
    partial: &mut Vec<Option<(Aggregator, u64)>>,
    hints: &GroupHints,
    c: &Checked,
) -> bool {
    let Checked::Report(r) = c else { return false };
    let (Ok(()), Some(i)) = (&r.verdict, r.group) else {
        return false;
    };
    let i = i as usize;
    let Some(clip) = hints.clips.get(i) else {
        return false;
    };
    let value = match clip {
        Some(c) => c.clip(r.report.value),
        None => r.report.value,
    };
    if !value.is_finite() {
        return false;
    }
    if partial.len() <= i {
        partial.resize_with(i + 1, || None);
    }
    let (sum, clipped) = partial[i].get_or_insert_with(|| (Aggregator::new(), 0));
    if sum.add(value).is_err() {
        return false;
    }
    *clipped += (value != r.report.value) as u64;
    true
}

/// Counting each `report_id` once, in bounded memory (the CLI's
/// `aggregate` and `map aggregate`, docs/MATH.md §10.11): an id is
/// remembered only once its report is accepted, so a garbage record
/// carrying an id cannot censor a later valid one; a report whose id was
/// remembered is dropped as a duplicate. At most `cap` ids are remembered
/// (about 34 bytes each once full; while the set doubles, its old and new
/// tables at once: 17 bytes per slot over at most 3·2^⌈log2(8·cap/7)⌉/2
/// slots, up to about 58 bytes per id of `cap`, 54 MB for 2^20, measured
/// in docs/ATTACK-8.md); past that new ids are accepted
/// without being remembered and counted in [`Dedup::unchecked`].
#[derive(Debug, Default)]
pub struct Dedup {
    seen: std::collections::HashSet<[u8; 16]>,
    /// The set once full: it never changes again (published to the
    /// workers, [`ReportAggregator::ingest_ordered_absorbing_ids`]).
    frozen: Option<std::sync::Arc<std::collections::HashSet<[u8; 16]>>>,
    cap: usize,
    /// Reports dropped because their id was accepted before.
    pub duplicates: u64,
    /// Reports accepted after the set was full (their ids not remembered).
    pub unchecked: u64,
}

impl Dedup {
    /// Remember at most `cap` ids.
    pub fn new(cap: usize) -> Self {
        Dedup {
            cap,
            ..Default::default()
        }
    }

    /// The most ids remembered (`cap` of [`new`](Self::new)).
    pub fn cap(&self) -> usize {
        self.cap
    }

    /// No id remembered yet (and the set not published as full).
    pub fn is_empty(&self) -> bool {
        self.seen.is_empty() && self.frozen.is_none()
    }

    /// Was this id accepted before? (A report without an id never is.)
    pub fn seen(&self, id: Option<&crate::ReportId>) -> bool {
        let set = self.frozen.as_deref().unwrap_or(&self.seen);
        id.is_some_and(|id| set.contains(&id.0))
    }

    /// The once-per-id rule (docs/MATH.md §10.11) for one report carrying
    /// `id`: `None` if a report with this id was accepted before (counted
    /// in [`duplicates`](Self::duplicates); `add` is not called), else
    /// `Some(add())`, the id remembered ([`accepted`](Self::accepted)) only
    /// if `add` accepted the report, so a refused record never censors a
    /// later valid one with its id.
    ///
    /// ```
    /// use geopriv::server::ingest::Dedup;
    /// let mut d = Dedup::new(8);
    /// let id = geopriv::ReportId([1; 16]);
    /// assert_eq!(d.offer(Some(&id), || Err::<(), _>("refused")), Some(Err("refused")));
    /// assert_eq!(d.offer(Some(&id), || Ok::<(), ()>(())), Some(Ok(())));
    /// assert_eq!(d.offer(Some(&id), || Ok::<(), ()>(())), None);
    /// assert_eq!(d.duplicates, 1);
    /// ```
    pub fn offer<E>(
        &mut self,
        id: Option<&crate::ReportId>,
        add: impl FnOnce() -> core::result::Result<(), E>,
    ) -> Option<core::result::Result<(), E>> {
        if self.seen(id) {
            self.duplicates += 1;
            return None;
        }
        let outcome = add();
        if outcome.is_ok() {
            self.accepted(id);
        }
        Some(outcome)
    }

    /// Remember an accepted report's id (if there is room).
    pub fn accepted(&mut self, id: Option<&crate::ReportId>) {
        if let Some(id) = id {
            if self.frozen.is_none() && self.seen.len() < self.cap {
                self.seen.insert(id.0);
            } else {
                self.unchecked += 1;
            }
        }
    }

    /// Add ids accepted elsewhere (the workers' shards,
    /// [`IdShards::take_accepted`]), at most as many as there is room for.
    pub fn remember(&mut self, ids: Vec<[u8; 16]>) {
        if self.frozen.is_some() {
            return;
        }
        let room = self.cap.saturating_sub(self.seen.len());
        self.seen.reserve(ids.len().min(room));
        self.seen.extend(ids.into_iter().take(room));
    }

    /// The set, once it is full (moved out of the working set, once).
    pub fn full(&mut self) -> Option<std::sync::Arc<std::collections::HashSet<[u8; 16]>>> {
        if self.frozen.is_none() && self.seen.len() >= self.cap {
            self.frozen = Some(std::sync::Arc::new(std::mem::take(&mut self.seen)));
        }
        self.frozen.clone()
    }
}

/// A caller's set of remembered report ids, published once it is full
/// and never changes again, so the workers of
/// [`ReportAggregator::ingest_ordered_absorbing_ids`] can look ids up.
#[derive(Debug, Default)]
pub struct FullIdSet(std::sync::OnceLock<std::sync::Arc<std::collections::HashSet<[u8; 16]>>>);

impl FullIdSet {
    /// Publish the full set (once; a later call is ignored).
    pub fn publish(&self, set: std::sync::Arc<std::collections::HashSet<[u8; 16]>>) {
        let _ = self.0.set(set);
    }

    /// The set, if published.
    pub fn get(&self) -> Option<&std::collections::HashSet<[u8; 16]>> {
        self.0.get().map(|s| &**s)
    }
}

/// A caller's report ids while the set still has room, split by a keyed
/// hash into shards the workers of
/// [`ReportAggregator::ingest_ordered_sharded_ids`] read and write
/// themselves (docs/MATH.md §10.11 step 6).
///
/// Every record numbered below `room` finds room in the caller's set (the
/// set holds at most one id per record before it), so the sequential rule
/// for such a record is: a duplicate iff an earlier report with its id was
/// accepted. Shard s = ⌊(h(id) div 2^32) · S / 2^32⌋ holds, per id seen so
/// far, whether a report with it was accepted on a worker (`true`) or
/// whether one went to the caller undecided (`false`: the caller remembers
/// the ids it accepts itself, in its own set). Each shard is applied in
/// batch order (a turn counter per shard), so the state a worker sees for
/// a record is the state after exactly the records before it. At most one
/// entry per id-carrying record below `room`.
///
/// h is SipHash-1-3 under a key drawn per process
/// ([`std::hash::RandomState`], std's HashDoS-resistant default):
/// clients choose their ids, so an unkeyed hash would let them pile ids
/// into one shard or one probe run. It is computed once per id
/// ([`key_of`](Self::key_of)): its high half picks the shard, its low half
/// the id's place in the shard's table (an open-addressing table of
/// 8-byte slots beside the 16-byte ids, which are compared in full on a
/// hash match; about 27-37 bytes per id, src/server/id_table.rs).
#[derive(Debug)]
pub struct IdShards {
    room: u64,
    hasher: std::hash::RandomState,
    shards: Vec<IdShard>,
    /// Set when a worker stops abnormally: nobody waits for its turn.
    failed: std::sync::atomic::AtomicBool,
    /// Ids a shard makes room for once it holds SHARD_RESERVE_AFTER
    /// ([`IdShards::reserve`]; 0: grow as needed).
    reserve_each: std::sync::atomic::AtomicUsize,
}

/// Ids a shard holds before it grows to its reserved size
/// ([`IdShards::reserve`]).
pub const SHARD_RESERVE_AFTER: usize = 4_096;

/// Ids a shard holds before [`IdShards::decide_in_turn`] reads a batch's
/// home slots ahead of its probes (a smaller table stays in the cache).
const TOUCH_AFTER: usize = 16_384;

/// One shard: the next batch allowed in, and per id whether a worker
/// accepted it.
#[derive(Debug, Default)]
struct IdShard {
    state: std::sync::Mutex<(u64, super::id_table::IdTable)>,
    turn: std::sync::Condvar,
}

impl IdShards {
    /// Shards for records numbered below `room` (records are numbered from
    /// 1: with an empty set of at most `cap` ids, `room` = `cap` + 1), for
    /// `threads` workers (4 shards per worker).
    pub fn new(room: u64, threads: usize) -> Self {
        let n = threads.clamp(1, MAX_INGEST_THREADS) * 4;
        IdShards {
            room,
            hasher: std::hash::RandomState::new(),
            shards: (0..n).map(|_| IdShard::default()).collect(),
            failed: std::sync::atomic::AtomicBool::new(false),
            reserve_each: std::sync::atomic::AtomicUsize::new(0),
        }
    }

    /// Make room for `ids` ids in all, spread evenly over the shards, so
    /// that a large stream's ids are not rehashed as the tables grow: a
    /// shard that reaches [`SHARD_RESERVE_AFTER`] ids grows at once to
    /// ⌈ids / S⌉ (a small stream keeps small tables: each id in a large
    /// one touches its own page).
    pub fn reserve(&self, ids: usize) {
        self.reserve_each.store(
            ids.div_ceil(self.shards.len()),
            std::sync::atomic::Ordering::Relaxed,
        );
    }

    /// Records numbered below this are deduplicated in the shards.
    pub fn room(&self) -> u64 {
        self.room
    }

    /// The ids accepted on the workers, moved out (call once every record
    /// below [`room`](Self::room) has been handed over).
    pub fn take_accepted(&self) -> Vec<[u8; 16]> {
        let mut out = Vec::new();
        for s in &self.shards {
            if let Ok(mut st) = s.state.lock() {
                out.extend(st.1.take_marked());
            }
        }
        out
    }

    /// The id's key h(id): SipHash-1-3 keyed per run (the one hash of the
    /// id; [`shard_of_key`](Self::shard_of_key) and the shard's table
    /// both read it).
    ///
    /// ```
    /// use geopriv::server::ingest::IdShards;
    /// let sh = IdShards::new(100, 2);
    /// let k = sh.key_of(&[7; 16]);
    /// assert_eq!(k, sh.key_of(&[7; 16]));
    /// assert!(sh.shard_of_key(k) < 8);
    /// ```
    pub fn key_of(&self, id: &[u8; 16]) -> u64 {
        use std::hash::BuildHasher;
        self.hasher.hash_one(u128::from_le_bytes(*id))
    }

    /// The shard of a key from [`key_of`](Self::key_of): ⌊(h div 2^32) ·
    /// S / 2^32⌋, S the number of shards (4 per worker).
    ///
    /// ```
    /// use geopriv::server::ingest::IdShards;
    /// let sh = IdShards::new(100, 2); // 8 shards
    /// assert_eq!(sh.shard_of_key(0), 0);
    /// assert_eq!(sh.shard_of_key(1 << 63), 4);
    /// assert_eq!(sh.shard_of_key(u64::MAX), 7);
    /// ```
    pub fn shard_of_key(&self, key: u64) -> usize {
        (((key >> 32) * self.shards.len() as u64) >> 32) as usize
    }

    /// Apply batch `seq`'s ids in each shard's turn: `todo` holds (index,
    /// key from [`key_of`](Self::key_of), id) in record order. Every
    /// shard is visited (its turn moves from `seq` to `seq` + 1 even if the
    /// batch has none of its ids), after waiting until the batches before
    /// `seq` have passed it; within a shard the ids are applied in record
    /// order, `decide(index, mark)` getting the id's mark so far (`None`:
    /// never marked) and returning the mark to set (`None`: leave it). So
    /// the mark an id finds is the one left by exactly the records before
    /// it (docs/MATH.md §10.11 step 6), provided every batch numbered
    /// below the first one holding no record below the room calls this
    /// once, in any order across threads. False if a shard's lock or turn
    /// failed, or a shard would hold more than 2^31 − 2 ids (then every
    /// waiting caller returns false too).
    pub fn decide_in_turn(
        &self,
        seq: u64,
        todo: &mut [(usize, u64, [u8; 16])],
        mut decide: impl FnMut(usize, Option<bool>) -> Option<bool>,
    ) -> bool {
        use super::id_table::Probe;
        let count = self.shards.len();
        // Record order within each shard: the entries in index order
        // (as the callers push them; sorted if not, the indices being
        // distinct), then grouped by shard keeping that order (a counting
        // sort: `order[from[s]..from[s + 1]]` are shard s's positions).
        if !todo.is_sorted_by_key(|t| t.0) {
            todo.sort_unstable_by_key(|t| t.0);
        }
        let mut from = std::vec![0usize; count + 1];
        for &(_, k, _) in todo.iter() {
            from[self.shard_of_key(k) + 1] += 1;
        }
        for s in 0..count {
            from[s + 1] += from[s];
        }
        let mut order = std::vec![0usize; todo.len()];
        let mut next = from.clone();
        for (j, &(_, k, _)) in todo.iter().enumerate() {
            let s = self.shard_of_key(k);
            order[next[s]] = j;
            next[s] += 1;
        }
        let fail = || {
            self.failed
                .store(true, std::sync::atomic::Ordering::Release);
            false
        };
        for k in 0..count {
            let s = (k + seq as usize) % count;
            let shard = &self.shards[s];
            let Ok(mut st) = shard.state.lock() else {
                return fail();
            };
            while st.0 != seq {
                if self.failed.load(std::sync::atomic::Ordering::Acquire) {
                    return false;
                }
                st = match shard
                    .turn
                    .wait_timeout(st, std::time::Duration::from_millis(100))
                {
                    Ok((g, _)) => g,
                    Err(_) => return fail(),
                };
            }
            let mine = order.get(from[s]..from[s + 1]).unwrap_or_default();
            let want = self.reserve_each.load(std::sync::atomic::Ordering::Relaxed);
            let table = &mut st.1;
            let more = if table.len() + mine.len() >= SHARD_RESERVE_AFTER {
                // One rehash now instead of one per doubling.
                want.saturating_sub(table.len()).max(mine.len())
            } else {
                mine.len()
            };
            if !table.reserve(more) {
                return fail();
            }
            if table.len() > TOUCH_AFTER {
                // The home slots' lines fetched together, before the
                // probes (each probe's branches wait on its own load).
                let lines = mine.iter().fold(0u64, |a, &j| {
                    a.wrapping_add(todo.get(j).map_or(0, |t| table.touch(t.1)))
                });
                std::hint::black_box(lines);
            }
            for &(i, key, id) in mine.iter().filter_map(|&j| todo.get(j)) {
                // One probe per id (the table has room for all of them).
                match table.probe(key, &id) {
                    Probe::Found(p) => {
                        if let Some(mark) = decide(i, Some(table.mark(p))) {
                            table.set_mark(p, mark);
                        }
                    }
                    Probe::Vacant(p) => {
                        if let Some(mark) = decide(i, None) {
                            if !table.insert(p, key, id, mark) {
                                return fail();
                            }
                        }
                    }
                }
            }
            st.0 += 1;
            drop(st);
            shard.turn.notify_all();
        }
        true
    }

    /// A guard that ends every wait for a turn (the callers of
    /// [`decide_in_turn`](Self::decide_in_turn) return false) if the
    /// thread holding it unwinds.
    pub(crate) fn fail_on_unwind(&self) -> FailOnUnwind<'_> {
        FailOnUnwind(Some(&self.failed))
    }
}

/// Sets [`IdShards::failed`] if the worker holding it unwinds.
pub(crate) struct FailOnUnwind<'a>(Option<&'a std::sync::atomic::AtomicBool>);

impl Drop for FailOnUnwind<'_> {
    fn drop(&mut self) {
        if let (true, Some(f)) = (std::thread::panicking(), self.0) {
            f.store(true, std::sync::atomic::Ordering::Release);
        }
    }
}

/// Decide, in each shard's batch order, the id-carrying reports of batch
/// `seq` numbered below the room: `todo` holds (index in `out`, key, id)
/// in record order. False if a shard's lock or turn failed.
fn decide_ids(
    shards: &IdShards,
    seq: u64,
    todo: &mut [(usize, u64, [u8; 16])],
    out: &mut [(u64, Checked)],
    mut absorb: impl FnMut(&Checked) -> bool,
) -> bool {
    shards.decide_in_turn(seq, todo, |i, mark| {
        let (_, c) = out.get_mut(i)?;
        match mark {
            Some(true) => {
                *c = Checked::Duplicate;
                None
            }
            Some(false) => None, // the caller decides, with its own set
            None => {
                if absorb(c) {
                    *c = Checked::AcceptedIdsRemembered(1);
                    Some(true)
                } else if matches!(c, Checked::Report(r) if r.verdict.is_ok()) {
                    // Its admission is decided by the caller.
                    Some(false)
                } else {
                    None
                }
            }
        }
    })
}

/// Merge neighbouring runs of the same kind of absorbed reports (the
/// number kept is the last one's).
fn merge_runs(out: &mut Vec<(u64, Checked)>) {
    let mut w = 0;
    for r in 0..out.len() {
        if w > 0 {
            let (prev, cur) = out.split_at_mut(r);
            let (pn, pc) = &mut prev[w - 1];
            let merged = match (&mut *pc, &cur[0].1) {
                (Checked::Absorbed(a), Checked::Absorbed(b))
                | (Checked::AbsorbedWithIds(a), Checked::AbsorbedWithIds(b))
                | (Checked::AcceptedIdsRemembered(a), Checked::AcceptedIdsRemembered(b)) => {
                    *a += *b;
                    true
                }
                _ => false,
            };
            if merged {
                *pn = cur[0].0;
                continue;
            }
        }
        out.swap(w, r);
        w += 1;
    }
    out.truncate(w);
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::ReportId;
    use rand::{Rng, SeedableRng};

    fn q(i: u64) -> QueryDescriptor {
        QueryDescriptor::Threshold {
            threshold: 100.0 + i as f64,
            width: 20.0,
        }
    }

    /// A hostile mixed stream: JSON lines and binary frames (some holding
    /// 0x0a bytes), garbage, blank and comment lines, BOMs, arrays, NULs,
    /// long records, repeated report ids, too many groups for one query
    /// and in all, seeded reports; optionally ending inside a record.
    fn mixed(seed: u64, records: usize) -> Vec<u8> {
        mixed_with(seed, records, true)
    }

    /// [`mixed`], or without any 0x00 byte (no frames, no NULs): JSON lines
    /// that `auto` hands out in blocks.
    fn mixed_with(seed: u64, records: usize, zeros: bool) -> Vec<u8> {
        let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
        let mut out = Vec::new();
        for i in 0..records {
            let query = q(rng.random_range(0..12u64));
            let eps = [0.05, 0.05, 0.05, 0.01, 0.02][rng.random_range(0..5)]
                * if rng.random_range(0..20) == 0 {
                    1.0 + i as f64 * 1e-9
                } else {
                    1.0
                };
            let mut r = Report::new(
                query,
                MechanismName::Polyplace,
                eps,
                0.0,
                rng.random_range(-50.0..250.0),
            );
            if rng.random_range(0..3) > 0 {
                r = r.with_report_id(ReportId([rng.random_range(0..40u8); 16]));
            }
            r.seeded = rng.random_range(0..50) == 0;
            let mut case = rng.random_range(0..40);
            if !zeros && (5..=9).contains(&case) {
                case = if case == 6 { 6 } else { 40 };
            }
            match case {
                0 => out.extend_from_slice(b"garbage\n"),
                1 => out.extend_from_slice(b"\n"),
                2 => out.extend_from_slice(b"# comment\n"),
                3 => out.extend_from_slice(b"[1,2]\n"),
                4 => out.extend_from_slice(b"\xff\xfe\n"),
                5 => out.push(0),
                6 => out.extend(std::iter::repeat_n(b'x', 300)),
                7 | 8 => out.extend_from_slice(&r.to_frame()),
                9 => {
                    let mut f = r.to_frame();
                    f.truncate(f.len() / 2);
                    out.extend_from_slice(&f);
                    out.push(b'\n');
                }
                10 => {
                    out.extend_from_slice(b"\xEF\xBB\xBF");
                    out.extend_from_slice(r.to_json_line().as_bytes());
                    out.extend_from_slice(b"\r\n");
                }
                _ => {
                    out.extend_from_slice(r.to_json_line().as_bytes());
                    out.push(b'\n');
                }
            }
        }
        if seed % 2 == 0 {
            out.extend_from_slice(b"{\"trailing");
        }
        out
    }

    #[test]
    fn split_then_decode_is_the_sequential_record() {
        for seed in 0..40 {
            let input = mixed(seed, 600);
            for format in [FormatChoice::Auto, FormatChoice::Json, FormatChoice::Binary] {
                for max in [64, 200, 1 << 16] {
                    let mut a = RecordReader::new(&input[..], format, max).unwrap();
                    // A reader that hands out few bytes at a time, so records
                    // and probe windows straddle its refills.
                    let mut b =
                        RecordReader::new(io::BufReader::with_capacity(7, &input[..]), format, max)
                            .unwrap();
                    let (mut json, mut scratch) = (JsonColumnDecoder::default(), Vec::new());
                    let mut n = 0;
                    loop {
                        let x = a.next_record().unwrap();
                        let y = b
                            .next_split()
                            .unwrap()
                            .map(|(k, s)| (k, s.decode(&mut json, &mut scratch)));
                        assert_eq!(x, y, "seed {seed}, {format:?}, max {max}, record {n}");
                        if x.is_none() {
                            break;
                        }
                        n += 1;
                    }
                }
            }
        }
    }

    #[test]
    fn count_byte_counts() {
        let mut rng = rand::rngs::StdRng::seed_from_u64(3);
        for len in [0, 1, 223, 224, 225, 447, 448, 4096, 5_000] {
            let bytes: Vec<u8> = (0..len).map(|_| rng.random_range(0..4u8)).collect();
            for b in 0..5 {
                let want = bytes.iter().filter(|&&x| x == b).count();
                assert_eq!(count_byte(&bytes, b), want, "len {len}, byte {b}");
            }
        }
        assert_eq!(count_byte(&[7; 224], 7), 224);
    }

    /// Blocks ([`RecordReader::next_block`]) split by the workers' rule,
    /// alternating with records taken one by one as the reader asks, are
    /// exactly the sequential records, for any block size and record cap.
    #[test]
    fn blocks_then_records_are_the_sequential_records() {
        let mut blocks = 0;
        for seed in 0..40 {
            let input = mixed_with(seed, 600, seed % 3 != 0);
            for format in [FormatChoice::Auto, FormatChoice::Json, FormatChoice::Binary] {
                for max in [64, 200, 1 << 16] {
                    for (want, cap) in [(1, 1), (100, 3), (5_000, 1_000), (1 << 18, 4096)] {
                        let mut a = RecordReader::new(&input[..], format, max).unwrap();
                        let mut seq = Vec::new();
                        while let Some(r) = a.next_record().unwrap() {
                            seq.push(r);
                        }
                        let mut b = RecordReader::new(
                            io::BufReader::with_capacity(7, &input[..]),
                            format,
                            max,
                        )
                        .unwrap();
                        let kind = b.block_kind();
                        let (mut json, mut scratch) = (JsonColumnDecoder::default(), Vec::new());
                        let (mut got, mut out, mut until) = (Vec::new(), Vec::new(), 0);
                        loop {
                            if b.records() >= until {
                                match b.next_block(&mut out, want, cap).unwrap() {
                                    Block::Bytes { first, len } => {
                                        blocks += 1;
                                        let (j, s) = (&mut json, &mut scratch);
                                        split_block(&out[..len], first, kind, j, s, |n, d| {
                                            got.push((n, d))
                                        });
                                        continue;
                                    }
                                    Block::Records(k) => until = b.records() + k,
                                    Block::End => break,
                                }
                            }
                            let Some((n, s)) = b.next_split().unwrap() else {
                                break;
                            };
                            got.push((n, s.decode(&mut json, &mut scratch)));
                        }
                        assert!(
                            got == seq,
                            "seed {seed}, {format:?}, max {max}, block {want} / {cap}"
                        );
                    }
                }
            }
        }
        assert!(blocks > 1_000, "{blocks} blocks");
    }

    #[test]
    fn ordered_ingest_is_bit_identical_for_any_threads_and_batches() {
        let policy = ValidationPolicy::new(1.0, 0.0).unwrap();
        let mut absorbed_any = false;
        let (mut ids_absorbed, mut ids_sharded) = (0, 0);
        for seed in 0..8 {
            // Odd seeds: no 0x00 bytes, so `auto` reads in blocks too.
            let input = mixed_with(100 + seed, 3_000, seed % 2 == 0);
            for (format, estimator) in [
                (FormatChoice::Auto, Estimator::Mean),
                (FormatChoice::Json, Estimator::MedianOfMeans { buckets: 7 }),
                (FormatChoice::Binary, Estimator::Mean),
            ] {
                if seed % 2 == 1 && format == FormatChoice::Binary {
                    continue; // no frames to read
                }
                let config = AggregationConfig {
                    estimator,
                    max_groups: 20,
                    max_groups_per_query: 2,
                    ..AggregationConfig::default()
                };
                // (log of the records not accepted, accepted count, reports
                // absorbed on the workers, estimates)
                // At most `cap` ids are remembered (the set is published
                // to the workers once full, as the CLI does); the ids of
                // records 1..=cap are deduplicated in shards on the
                // workers and moved into `seen` after them.
                let run = |threads: usize, batch: (usize, usize), absorb: bool, cap: usize| {
                    let mut reader = RecordReader::new(&input[..], format, 256).unwrap();
                    let mut agg = ReportAggregator::new(policy.clone(), config);
                    let mut seen = std::collections::HashSet::new();
                    let full = FullIdSet::default();
                    let shards = IdShards::new((cap as u64).saturating_add(1), threads);
                    let mut sharded = true;
                    let mut log = Vec::new();
                    let (mut ok, mut absorbed, mut with_ids) = (0u64, 0u64, 0u64);
                    let mut in_shards = 0u64;
                    let both = (absorb, Some(&full), Some(&shards));
                    agg.ingest_batched(&mut reader, threads, batch, both, |agg, n, c| {
                        if sharded && n >= shards.room() {
                            sharded = false;
                            let ids = shards.take_accepted();
                            let room = cap - seen.len();
                            seen.extend(ids.into_iter().take(room));
                            if seen.len() == cap {
                                full.publish(std::sync::Arc::new(seen.clone()));
                            }
                        }
                        let what = match c {
                            Checked::AcceptedIdsRemembered(k) => {
                                ok += k;
                                absorbed += k;
                                in_shards += k;
                                return Ok::<(), io::Error>(());
                            }
                            Checked::Absorbed(k) => {
                                ok += k;
                                absorbed += k;
                                return Ok::<(), io::Error>(());
                            }
                            Checked::AbsorbedWithIds(k) => {
                                ok += k;
                                absorbed += k;
                                with_ids += k;
                                return Ok(());
                            }
                            Checked::Duplicate => "duplicate".to_string(),
                            Checked::Skipped => "skipped".to_string(),
                            Checked::Rejected(why) => why.to_string(),
                            Checked::Report(r)
                                if r.report().report_id.is_some_and(|id| seen.contains(&id.0)) =>
                            {
                                "duplicate".to_string()
                            }
                            Checked::Report(r) => {
                                let id = r.report().report_id;
                                match agg.offer_checked(r) {
                                    Ok(()) => {
                                        if let Some(id) = id.filter(|_| seen.len() < cap) {
                                            seen.insert(id.0);
                                            if seen.len() == cap {
                                                full.publish(std::sync::Arc::new(seen.clone()));
                                            }
                                        }
                                        "ok".to_string()
                                    }
                                    Err(why) => why.to_string(),
                                }
                            }
                        };
                        if what == "ok" {
                            ok += 1;
                        } else {
                            log.push((n, what));
                        }
                        Ok(())
                    })
                    .unwrap();
                    let lines: Vec<String> = agg
                        .estimates()
                        .iter()
                        .map(GroupEstimate::to_json_line)
                        .collect();
                    ((log, ok, lines), absorbed, with_ids + (in_shards << 32))
                };
                for cap in [usize::MAX, 25, 700] {
                    let (one, none, _) = run(1, (1, 1), true, cap);
                    assert_eq!(none, 0);
                    if format != FormatChoice::Binary {
                        assert!(one.0.iter().any(|(_, w)| w == "duplicate"));
                        assert!(one.0.iter().any(|(_, w)| w.contains("per query")));
                        assert!(
                            one.0
                                .iter()
                                .any(|(_, w)| w.contains("beyond the limit of 20")),
                            "{:?}",
                            one.0
                                .iter()
                                .map(|(_, w)| w.chars().take(60).collect::<String>())
                                .collect::<std::collections::BTreeSet<_>>()
                        );
                    }
                    assert!(one.1 > 0);
                    for (threads, batch) in [
                        (2, (1 << 18, 4096)),
                        (2, (1, 1)),
                        (3, (500, 7)),
                        (7, (3_000, 64)),
                    ] {
                        for absorb in [false, true] {
                            let (got, absorbed, with_ids) = run(threads, batch, absorb, cap);
                            ids_absorbed += with_ids & 0xffff_ffff;
                            ids_sharded += with_ids >> 32;
                            assert!(
                            got == one,
                            "seed {seed}, {format:?}, {threads} threads, batch {batch:?}, absorb {absorb}, cap {cap}"
                        );
                            // Workers absorb only once groups are open (never for
                            // median-of-means, whose buckets depend on the order).
                            absorbed_any |= absorbed > 0;
                            let allowed = absorb && estimator == Estimator::Mean;
                            assert!(
                                absorbed == 0 || allowed,
                                "seed {seed}, {format:?}, {threads} threads, batch {batch:?}"
                            );
                        }
                    }
                }
            }
        }
        assert!(absorbed_any, "no report was ever absorbed on a worker");
        assert!(ids_absorbed > 0, "no report with an id was absorbed");
        assert!(ids_sharded > 0, "no id was decided in the shards");
    }

    #[test]
    fn a_verdict_from_another_aggregator_is_not_trusted() {
        let strict = ValidationPolicy::new(0.01, 0.0).unwrap();
        let lax = ValidationPolicy::new(1.0, 0.0).unwrap();
        let line = Report::new(q(1), MechanismName::Polyplace, 0.5, 0.0, 1.0).to_json_line();
        let mut reader = RecordReader::new(line.as_bytes(), FormatChoice::Json, 1 << 10).unwrap();
        let mut laxer = ReportAggregator::new(lax, AggregationConfig::default());
        let mut strict = ReportAggregator::new(strict, AggregationConfig::default());
        let mut outcomes = Vec::new();
        laxer
            .ingest_ordered(&mut reader, 2, |_, _, c| {
                if let Checked::Report(r) = c {
                    outcomes.push(strict.offer_checked(r).map_err(|w| w.code()));
                }
                Ok::<(), io::Error>(())
            })
            .unwrap();
        assert_eq!(outcomes, [Err("epsilon-out-of-policy")]);
    }

    /// `IdShards::decide_in_turn` against a tiny reference (one HashMap,
    /// the records in order), on batches decided by two threads in any
    /// order, with the callers' keys forged: all in one shard with one
    /// hash (what a flooding client would want), one shard with distinct
    /// hashes, and the real keyed hash. Marks: accept an unmarked id's
    /// record if its number is not a multiple of 3 (else hand it to the
    /// caller, mark false), a marked-false id's record re-marks it true
    /// every 5th record.
    #[test]
    fn id_shards_follow_the_reference_rule_under_colliding_keys() {
        let mut rng = rand::rngs::StdRng::seed_from_u64(22);
        let ids: Vec<[u8; 16]> = (0..40_000)
            .map(|_| {
                let mut id = [0u8; 16];
                // Few distinct ids: many repeats.
                id[0] = rng.random_range(0..200u8);
                id[1] = rng.random_range(0..60u8);
                id
            })
            .collect();
        let rule = |n: usize, mark: Option<bool>| match mark {
            None => Some(n % 3 != 0),
            Some(false) if n % 5 == 0 => Some(true),
            Some(_) => None,
        };
        // The reference: per record, the mark it finds.
        let mut seen: std::collections::HashMap<[u8; 16], bool> = Default::default();
        let want: Vec<Option<bool>> = ids
            .iter()
            .enumerate()
            .map(|(n, id)| {
                let m = seen.get(id).copied();
                if let Some(new) = rule(n, m) {
                    seen.insert(*id, new);
                }
                m
            })
            .collect();
        for forge in 0..3 {
            let sh = IdShards::new(u64::MAX, 2);
            if forge == 1 {
                sh.reserve(1 << 16);
            }
            let key = |id: &[u8; 16]| match forge {
                0 => 0x1234_5678_9abc_def0,
                1 => 7 << 32 | (id[0] as u64) << 8 | id[1] as u64,
                _ => sh.key_of(id),
            };
            let batches: Vec<(u64, Vec<usize>)> = (0..ids.len())
                .collect::<Vec<_>>()
                .chunks(997)
                .enumerate()
                .map(|(b, c)| (b as u64, c.to_vec()))
                .collect();
            let got = std::sync::Mutex::new(std::vec![None; ids.len()]);
            let next = std::sync::atomic::AtomicUsize::new(0);
            std::thread::scope(|s| {
                for _ in 0..2 {
                    s.spawn(|| loop {
                        let b = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                        let Some((seq, recs)) = batches.get(b) else {
                            break;
                        };
                        let mut todo: Vec<(usize, u64, [u8; 16])> =
                            recs.iter().map(|&n| (n, key(&ids[n]), ids[n])).collect();
                        let mut marks = std::vec![];
                        assert!(sh.decide_in_turn(*seq, &mut todo, |n, m| {
                            marks.push((n, m));
                            rule(n, m)
                        }));
                        let mut g = got.lock().unwrap();
                        for (n, m) in marks {
                            g[n] = m;
                        }
                    });
                }
            });
            assert_eq!(got.into_inner().unwrap(), want, "forge {forge}");
            let mut accepted = sh.take_accepted();
            accepted.sort();
            let mut reference: Vec<[u8; 16]> = seen.iter().filter(|e| *e.1).map(|e| *e.0).collect();
            reference.sort();
            assert_eq!(accepted, reference, "forge {forge}");
        }
    }
}
