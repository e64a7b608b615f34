//! Hardened ingestion of map reports (issue 19 item 10, docs/MATH.md
//! §10.9): the byte-level reader of `geopriv aggregate`
//! ([`RecordReader`]: records as bytes, a size limit, one rejection per bad
//! record with its number, escaped messages) and public clipping of the
//! released values of composition, sampled and vector-Laplace reports.
//!
//! Each value of such a report is f_j(x) + σ Z with f_j in [f_min, f_max]
//! and σ <= σ_max (PolyPlace at ε/m or ε/k with σ_max = L_global·scale,
//! or Laplace with the vector scale b): it is clipped to
//! B_j = [f_min − zσ_max, f_max + zσ_max] ([`ClipPolicy`]), so one report
//! moves a cell by at most width(B_j)/n and the honest bias of a cell is
//! at most σ_max E[(|Z| − z)+]. Noise-a-priori reports are locations: the
//! map of n of them moves by at most max f / n per report already.
//!
//! ```
//! use geopriv::map::{ingest_map_reports, KdeGrid, MapAggregator, MapClip, MapMechanism, MapRelease, QuerySet};
//! use geopriv::server::clip::ClipLevel;
//! use geopriv::server::ingest::{FormatChoice, RecordReader};
//! # use rand::SeedableRng;
//! # let mut rng = rand::rngs::StdRng::seed_from_u64(1);
//! let set = QuerySet::Kde(KdeGrid::square(10_000.0, 3)?);
//! let device = MapRelease::new(set.clone(), MapMechanism::Composition, 1e-3)?;
//! let good = serde_json::to_string(&device.release_unmetered(&[5_000.0, 5_000.0], &mut rng)?).unwrap();
//! let mut forged: geopriv::map::MapReport = serde_json::from_str(&good).unwrap();
//! forged.values = Some(vec![1e300; 9]);
//! let input = format!("{good}\n\u{ff}\n{}\n", serde_json::to_string(&forged).unwrap());
//! let mut input = input.into_bytes();
//! input[good.len() + 1] = 0xff; // not UTF-8
//! let clip = MapClip::new(&set, MapMechanism::Composition, 1e-3, ClipLevel::default())?;
//! let mut server = MapAggregator::new(set, MapMechanism::Composition, 1e-3)?;
//! let mut reader = RecordReader::new(&input[..], FormatChoice::Json, 1 << 16).unwrap();
//! let mut rejected = Vec::new();
//! let counts = ingest_map_reports(&mut server, clip.as_ref(), &mut reader, |n, code, _| rejected.push((n, code))).unwrap();
//! assert_eq!((counts.accepted, counts.rejected, counts.clipped), (2, 1, 9));
//! assert_eq!(rejected, [(2, "not-utf8")]);
//! let upper = clip.unwrap().summary().upper;
//! assert!(server.estimate(None)?.values.iter().all(|v| *v <= upper));
//! # Ok::<(), geopriv::Error>(())
//! ```

use super::query_set::QuerySet;
use super::release::{MapMechanism, MapRelease, MapReport};
use super::server::MapAggregator;
use crate::error::Result;
use crate::mechanism::{Mechanism, NoiseShape};
use crate::server::clip::{default_z, ClipLevel, ClipPolicy};
use crate::server::escape::Untrusted;
use crate::server::ingest::{Dedup, IdShards, RecordReader, RecordRejection};
use serde::Serialize;
use std::io::{self, Read};
use std::string::{String, ToString};
use std::vec::Vec;

/// The public clipping bounds of every cell of a map (module docs).
#[derive(Clone, Debug)]
pub struct MapClip {
    cells: Vec<ClipPolicy>,
}

/// What the clipping of a map states, over all its cells.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct MapClipSummary {
    /// z, in units of σ_max.
    pub z: f64,
    /// σ_max of a value.
    pub sigma_max: f64,
    /// The smallest lower bound of a cell.
    pub lower: f64,
    /// The largest upper bound of a cell.
    pub upper: f64,
    /// The largest honest bias bound of a cell, σ_max E[(|Z| − z)+].
    pub bias_bound: f64,
    /// The largest width(B_j): one report moves a cell by at most this / n.
    pub max_width: f64,
}

impl MapClip {
    /// The bounds for reports of `set` made with `mechanism` at per-device
    /// total `epsilon`, at `level` (an automatic level is resolved once for
    /// the noise shape). `None` for noise a priori (nothing to clip).
    pub fn new(
        set: &QuerySet,
        mechanism: MapMechanism,
        epsilon: f64,
        level: ClipLevel,
    ) -> Result<Option<Self>> {
        let m = set.len();
        let (mech, shape, scale): (Option<Mechanism>, NoiseShape, f64) = match mechanism {
            MapMechanism::APriori => return Ok(None),
            MapMechanism::Composition => {
                let mech = Mechanism::polyplace(epsilon / m as f64)?;
                let shape = mech.noise_shape().unwrap_or(NoiseShape::Laplace);
                (Some(mech), shape, 0.0)
            }
            MapMechanism::Sampled { k } => {
                let mech = Mechanism::polyplace(epsilon / k.max(1) as f64)?;
                let shape = mech.noise_shape().unwrap_or(NoiseShape::Laplace);
                (Some(mech), shape, 0.0)
            }
            MapMechanism::VectorLaplace => {
                let rel = MapRelease::new(set.clone(), mechanism, epsilon)?;
                let b = rel.vector_laplace_scale().unwrap_or(f64::INFINITY);
                (None, NoiseShape::Laplace, b)
            }
        };
        let level = match level {
            ClipLevel::Auto {
                deployment_n,
                bias_to_se,
            } => ClipLevel::Fixed(default_z(shape, deployment_n, bias_to_se)?),
            l => l,
        };
        let cells = (0..m)
            .map(|j| {
                set.with_query(j, |q| match &mech {
                    Some(mech) => ClipPolicy::for_mechanism(mech, q, level),
                    None => {
                        let (lo, hi) = q.value_bounds();
                        ClipPolicy::new(lo, hi, scale, Some(shape), level)
                    }
                })
            })
            .collect::<Result<Vec<_>>>()?;
        Ok(Some(Self { cells }))
    }

    /// Clip the values of `r` in place; returns how many were changed.
    /// Values of unknown cells are left for the aggregator to refuse.
    pub fn clip(&self, r: &mut MapReport) -> u64 {
        let Some(values) = r.values.as_mut() else {
            return 0;
        };
        let mut changed = 0;
        for (i, v) in values.iter_mut().enumerate() {
            let j = match &r.queries {
                Some(q) => match q.get(i) {
                    Some(&j) => j as usize,
                    None => continue,
                },
                None => i,
            };
            if let Some(c) = self.cells.get(j) {
                let w = c.clip(*v);
                // NaN stays NaN (refused by the aggregator).
                changed += (w != *v && !v.is_nan()) as u64;
                *v = w;
            }
        }
        changed
    }

    /// The public bounds B_j = [lower, upper] of cell `j` (`None` past the
    /// last cell), for checking a partial state against them.
    pub fn cell_bounds(&self, j: usize) -> Option<[f64; 2]> {
        self.cells.get(j).map(|c| c.bounds())
    }

    /// The bounds stated over all cells.
    pub fn summary(&self) -> MapClipSummary {
        let mut s = MapClipSummary {
            z: self.cells.first().map_or(0.0, |c| c.z()),
            sigma_max: 0.0,
            lower: f64::INFINITY,
            upper: f64::NEG_INFINITY,
            bias_bound: 0.0,
            max_width: 0.0,
        };
        for c in &self.cells {
            let [lo, hi] = c.bounds();
            s.sigma_max = s.sigma_max.max(c.sigma_max());
            s.lower = s.lower.min(lo);
            s.upper = s.upper.max(hi);
            s.bias_bound = s.bias_bound.max(c.bias_bound());
            s.max_width = s.max_width.max(c.width());
        }
        s
    }
}

/// Counts of a map stream: records = accepted + rejected + skipped +
/// duplicates.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct MapCounts {
    /// Records read.
    pub records: u64,
    /// Reports aggregated.
    pub accepted: u64,
    /// Records refused.
    pub rejected: u64,
    /// Blank and `#` lines.
    pub skipped: u64,
    /// Values clipped (over all accepted reports).
    pub clipped: u64,
    /// Reports dropped because a report with their `report_id` was
    /// accepted before ([`ingest_map_reports_once`] only).
    pub duplicates: u64,
}

/// Read JSON map reports from `reader` into `agg`, each bad record
/// rejected by itself: `on_reject(record number, code, escaped message)`
/// (codes: those of [`RecordRejection`] for the reader, `not-utf8`,
/// `malformed`, `refused` for a report the aggregator refuses). Values are
/// clipped with `clip` first. A blank line, a `#` line and a BOM are
/// skipped. `Err` only for I/O errors.
pub fn ingest_map_reports<R: Read>(
    agg: &mut MapAggregator,
    clip: Option<&MapClip>,
    reader: &mut RecordReader<R>,
    mut on_reject: impl FnMut(u64, &'static str, &str),
) -> io::Result<MapCounts> {
    ingest_seq(agg, clip, reader, None, &mut on_reject)
}

/// [`ingest_map_reports`], with `dedup` (if any) deciding the reports
/// that carry a `report_id`.
fn ingest_seq<R: Read>(
    agg: &mut MapAggregator,
    clip: Option<&MapClip>,
    reader: &mut RecordReader<R>,
    mut dedup: Option<&mut Dedup>,
    mut on_reject: impl FnMut(u64, &'static str, &str),
) -> io::Result<MapCounts> {
    let mut counts = MapCounts::default();
    let mut header = APrioriHeader::default();
    while let Some((n, raw)) = reader.next_bytes()? {
        let raw = raw.map_err(|why: RecordRejection| (why.code(), why.to_string()));
        let held = one_record(
            agg,
            clip,
            &mut header,
            raw,
            dedup.is_some(),
            &mut counts,
            |code, m| on_reject(n, code, m),
        );
        if let (Some((r, clipped)), Some(d)) = (held, dedup.as_deref_mut()) {
            decide_once(agg, d, &r, clipped, &mut counts, |code, m| {
                on_reject(n, code, m)
            });
        }
    }
    Ok(counts)
}

/// The once-per-`report_id` rule (docs/MATH.md §10.11, the one of
/// `geopriv aggregate`) for a decoded, clipped report `r` carrying an id,
/// applied in record order: a duplicate if `dedup` remembers its id; else
/// added to `agg`, and its id remembered if `agg` accepts it (a refused
/// record does not censor a later valid one with its id).
fn decide_once(
    agg: &mut MapAggregator,
    dedup: &mut Dedup,
    r: &MapReport,
    clipped: u64,
    counts: &mut MapCounts,
    on_reject: impl FnOnce(&'static str, &str),
) {
    match dedup.offer(r.report_id.as_ref(), || agg.add(r)) {
        None => counts.duplicates += 1,
        Some(Ok(())) => {
            counts.accepted += 1;
            counts.clipped += clipped;
        }
        Some(Err(e)) => {
            counts.rejected += 1;
            on_reject("refused", &Untrusted(&e.to_string()).to_string());
        }
    }
}

/// [`ingest_map_reports_parallel`] counting each `report_id` once with
/// `dedup` (as `geopriv aggregate` and the collector, docs/MATH.md
/// §10.11): a report whose id a report accepted before carried is dropped
/// and counted in [`MapCounts::duplicates`] (and `dedup.duplicates`); an
/// id is remembered only once its report is accepted, at most `dedup`'s
/// cap of them (past it, `dedup.unchecked`). Reports without an id are
/// counted as by [`ingest_map_reports_parallel`]. The workers decode and
/// clip every record and add those without an id. With a fresh `dedup`,
/// the reports with one numbered up to `dedup.cap()` are decided on the
/// workers by id shard, in record order within each shard (docs/MATH.md
/// §10.11, "Deciding the map's ids on the workers"), and their ids moved
/// into `dedup` at the end (or at the first record past the cap); the
/// others come back to the calling thread, which decides them in record
/// order. So the map, the counts and the rejections are the same for any
/// `threads`, and on return `dedup` remembers the ids as the sequential
/// path leaves them.
///
/// ```
/// use geopriv::map::{ingest_map_reports_once, KdeGrid, MapAggregator, MapMechanism, MapRelease, QuerySet};
/// use geopriv::server::ingest::{Dedup, FormatChoice, RecordReader};
/// # use rand::SeedableRng;
/// # let mut rng = rand::rngs::StdRng::seed_from_u64(1);
/// let set = QuerySet::Kde(KdeGrid::square(10_000.0, 11)?);
/// let device = MapRelease::new(set.clone(), MapMechanism::APriori, 1e-3)?;
/// let mut r = device.release_unmetered(&[5_000.0, 5_000.0], &mut rng)?;
/// r.report_id = Some(geopriv::ReportId([7; 16]));
/// let line = serde_json::to_string(&r).unwrap() + "\n";
/// let text = line.repeat(3);
/// let mut agg = MapAggregator::new(set, MapMechanism::APriori, 1e-3)?;
/// let mut reader = RecordReader::new(text.as_bytes(), FormatChoice::Json, 1 << 16).unwrap();
/// let mut dedup = Dedup::new(1 << 10);
/// let c = ingest_map_reports_once(&mut agg, None, &mut reader, 2, &mut dedup, |_, _, _| {}).unwrap();
/// assert_eq!((c.records, c.accepted, c.duplicates), (3, 1, 2));
/// # Ok::<(), geopriv::Error>(())
/// ```
pub fn ingest_map_reports_once<R: Read>(
    agg: &mut MapAggregator,
    clip: Option<&MapClip>,
    reader: &mut RecordReader<R>,
    threads: usize,
    dedup: &mut Dedup,
    on_reject: impl FnMut(u64, &'static str, &str),
) -> io::Result<MapCounts> {
    ingest_once(agg, clip, reader, threads, dedup, true, on_reject)
}

/// [`ingest_map_reports_once`] for a whole stream read once (`geopriv map
/// aggregate`, `geopriv map plan --reports`): the same map, counts,
/// duplicates and messages, and the same `dedup.duplicates` and
/// `dedup.unchecked`, but the ids accepted on the workers are dropped on
/// return instead of being moved into `dedup` (that move would be 10^6
/// inserts into one set on one thread for 10^6 ids, the work the shards
/// spread over the workers; docs/MATH.md §10.11, "Deciding the map's ids
/// on the workers"). So `dedup` must not be used for a later stream.
///
/// With a fresh `dedup` and `threads` >= 2, the records numbered up to
/// `dedup.cap()` have their ids decided on the workers by id shard
/// ([`IdShards`], as `geopriv aggregate --threads`): a report whose id was
/// accepted before is a duplicate, else it is added if the aggregator
/// accepts it (a pure function of the report and the public parameters)
/// and its id marked. Later records go to the calling thread as in
/// [`ingest_map_reports_once`].
///
/// ```
/// use geopriv::map::{ingest_map_stream_once, KdeGrid, MapAggregator, MapMechanism, MapRelease, QuerySet};
/// use geopriv::server::ingest::{Dedup, FormatChoice, RecordReader};
/// # use rand::SeedableRng;
/// # let mut rng = rand::rngs::StdRng::seed_from_u64(1);
/// let set = QuerySet::Kde(KdeGrid::square(10_000.0, 11)?);
/// let device = MapRelease::new(set.clone(), MapMechanism::APriori, 1e-3)?;
/// let mut r = device.release_unmetered(&[5_000.0, 5_000.0], &mut rng)?;
/// r.report_id = Some(geopriv::ReportId([7; 16]));
/// let text = (serde_json::to_string(&r).unwrap() + "\n").repeat(3);
/// let mut agg = MapAggregator::new(set, MapMechanism::APriori, 1e-3)?;
/// let mut reader = RecordReader::new(text.as_bytes(), FormatChoice::Json, 1 << 16).unwrap();
/// let mut dedup = Dedup::new(1 << 10);
/// let c = ingest_map_stream_once(&mut agg, None, &mut reader, 2, &mut dedup, |_, _, _| {}).unwrap();
/// assert_eq!((c.records, c.accepted, c.duplicates, dedup.duplicates), (3, 1, 2, 2));
/// # Ok::<(), geopriv::Error>(())
/// ```
pub fn ingest_map_stream_once<R: Read>(
    agg: &mut MapAggregator,
    clip: Option<&MapClip>,
    reader: &mut RecordReader<R>,
    threads: usize,
    dedup: &mut Dedup,
    on_reject: impl FnMut(u64, &'static str, &str),
) -> io::Result<MapCounts> {
    ingest_once(agg, clip, reader, threads, dedup, false, on_reject)
}

/// [`ingest_map_reports_once`] (`keep`: the ids accepted on the workers
/// move into `dedup` at the end) and [`ingest_map_stream_once`] (they are
/// dropped): ids decided by shard, batches of [`BATCH_BYTES`].
fn ingest_once<R: Read>(
    agg: &mut MapAggregator,
    clip: Option<&MapClip>,
    reader: &mut RecordReader<R>,
    threads: usize,
    dedup: &mut Dedup,
    keep: bool,
    on_reject: impl FnMut(u64, &'static str, &str),
) -> io::Result<MapCounts> {
    let ids = Ids {
        dedup,
        keep,
        shard: true,
    };
    ingest_sharded(
        agg,
        clip,
        reader,
        threads,
        BATCH_BYTES,
        Some(ids),
        on_reject,
    )
}

/// How [`ingest_sharded`] decides report ids.
struct Ids<'a> {
    dedup: &'a mut Dedup,
    /// Move the ids accepted on the workers into `dedup` at the end.
    keep: bool,
    /// Decide ids on the workers by shard where that is the sequential
    /// rule (a fresh `dedup`); else every id on the calling thread.
    /// Always true outside the tests; it stays (tidy13 review) because
    /// `false` is the tests' oracle: it runs the calling-thread path (the
    /// one a non-fresh `dedup` takes in production) on the same fresh
    /// input, so the workers' decisions are compared with the sequential
    /// rule record for record, ids remembered included.
    shard: bool,
}

/// The noise-a-priori report in `line` if it is in the exact layout
/// `serde_json::to_string(&MapReport)` writes for one
/// (`{"set":"…","mechanism":"a_priori","epsilon":E,"location":[X,Y]}`,
/// with an optional `,"report_id":"<32 hex digits>"` before the closing
/// brace; a tag of ASCII letters and digits), else `None`, and the caller
/// falls back to the serde decoder, which also produces every rejection.
/// On the lines it accepts it gives the same report as serde: the numbers
/// follow the JSON grammar and are parsed with correct rounding, like
/// serde_json's `float_roundtrip` (`server::fast_json`, which leaves the
/// one spelling where the two differ, an integer `-0`, to serde). Noise a
/// priori has nothing to clip (clipping leaves it as it is).
/// Reading 10^6 reports this way costs about a third of the serde decoder
/// (BENCHMARKS.md, "Branch mapspeed2"). `cache` holds the last header
/// read ([`APrioriHeader`]): the same report with or without it.
fn canonical_a_priori(line: &[u8], cache: &mut APrioriHeader) -> Option<MapReport> {
    use crate::server::fast_json::Cursor;
    let mut c = Cursor { s: line, i: 0 };
    let epsilon = match cache.hit(line) {
        Some(epsilon) => {
            c.i = cache.bytes.len();
            epsilon
        }
        None => {
            c.lit(b"{\"set\":\"")?;
            let rest = line.get(c.i..)?;
            let end = rest.iter().position(|&b| b == b'"')?;
            let tag = &rest[..end];
            if !tag.iter().all(|b| b.is_ascii_alphanumeric()) {
                return None;
            }
            c.i += end;
            c.lit(b"\",\"mechanism\":\"a_priori\",\"epsilon\":")?;
            let epsilon = c.number()?;
            c.lit(b",\"location\":[")?;
            // ASCII alphanumerics: valid UTF-8.
            let set = core::str::from_utf8(tag).ok()?;
            cache.keep(&line[..c.i], set, epsilon);
            epsilon
        }
    };
    let x = c.number()?;
    c.lit(b",")?;
    let y = c.number()?;
    c.lit(b"]")?;
    let report_id = if c.lit(b",\"report_id\":\"").is_some() {
        let hex = line.get(c.i..c.i + 32)?;
        c.i += 32;
        c.lit(b"\"")?;
        Some(crate::ReportId::from_hex_bytes(hex)?)
    } else {
        None
    };
    c.lit(b"}")?;
    if c.i != line.len() {
        return None;
    }
    Some(cache.report(epsilon, [x, y], report_id))
}

/// The header of the last line [`canonical_a_priori`] read, up to and
/// including `"location":[` (its set tag and ε): the reports of one stream
/// share it, and a line that starts with these bytes has this tag and
/// this ε (the header's parse reads nothing past its own bytes: the number
/// ends at the `,` of the literal after it), so only the rest is parsed.
/// ε's 16 to 17 significant digits took the correctly rounded slow path
/// on every line (a fifth of the workers' parse; BENCHMARKS.md, "Branch
/// speed07").
///
/// It also keeps one spent report ([`recycle`](Self::recycle)) whose
/// `String` and `Vec` the next report reuses: two allocations and two
/// frees fewer per report.
#[derive(Debug, Default)]
struct APrioriHeader {
    bytes: Vec<u8>,
    set: String,
    epsilon: f64,
    spare: Option<MapReport>,
}

impl APrioriHeader {
    /// ε if `line` starts with the kept header (its tag is `self.set`).
    fn hit(&self, line: &[u8]) -> Option<f64> {
        (!self.bytes.is_empty() && line.starts_with(&self.bytes)).then_some(self.epsilon)
    }

    /// The noise-a-priori report of the kept header's tag with `epsilon`,
    /// `location` and `report_id`, on the spare report's buffers if there
    /// is one (every field set: equal to a fresh report).
    fn report(
        &mut self,
        epsilon: f64,
        location: [f64; 2],
        report_id: Option<crate::ReportId>,
    ) -> MapReport {
        let Some(mut r) = self.spare.take() else {
            return MapReport {
                set: self.set.clone(),
                mechanism: MapMechanism::APriori,
                epsilon,
                location: Some(location.to_vec()),
                queries: None,
                values: None,
                report_id,
            };
        };
        r.set.clear();
        r.set.push_str(&self.set);
        r.mechanism = MapMechanism::APriori;
        r.epsilon = epsilon;
        match r.location.as_mut() {
            Some(l) => {
                l.clear();
                l.extend_from_slice(&location);
            }
            None => r.location = Some(location.to_vec()),
        }
        r.queries = None;
        r.values = None;
        r.report_id = report_id;
        r
    }

    /// Keep a report that is no longer needed, for [`report`](Self::report).
    fn recycle(&mut self, r: MapReport) {
        self.spare = Some(r);
    }

    /// Keep a header just parsed (its bytes, tag and ε).
    fn keep(&mut self, bytes: &[u8], set: &str, epsilon: f64) {
        self.bytes.clear();
        self.bytes.extend_from_slice(bytes);
        self.set.clear();
        self.set.push_str(set);
        self.epsilon = epsilon;
    }
}

/// A decoded, clipped report with a `report_id` and its clipped values,
/// held for [`decide_once`].
type Held = (MapReport, u64);

/// Decode, clip and add one record's bytes (or pass on its reader
/// rejection), updating `counts`. With `hold_ids`, a decoded report that
/// carries a `report_id` is not added but returned (counted only in
/// `records`), for [`decide_once`].
fn one_record(
    agg: &mut MapAggregator,
    clip: Option<&MapClip>,
    header: &mut APrioriHeader,
    raw: core::result::Result<&[u8], (&'static str, String)>,
    hold_ids: bool,
    counts: &mut MapCounts,
    mut on_reject: impl FnMut(&'static str, &str),
) -> Option<Held> {
    counts.records += 1;
    let mut held = None;
    let outcome: core::result::Result<Option<u64>, (&'static str, String)> = (|| {
        let bytes = raw?;
        let b = bytes
            .strip_prefix(b"\xEF\xBB\xBF")
            .unwrap_or(bytes)
            .trim_ascii();
        if b.is_empty() || b[0] == b'#' {
            return Ok(None);
        }
        if let Some(mut r) = canonical_a_priori(b, header) {
            let clipped = clip.map_or(0, |c| c.clip(&mut r));
            if hold_ids && r.report_id.is_some() {
                held = Some((r, clipped));
                return Ok(None);
            }
            let added = agg.add(&r);
            header.recycle(r);
            added.map_err(|e| ("refused", Untrusted(&e.to_string()).to_string()))?;
            return Ok(Some(clipped));
        }
        let s = core::str::from_utf8(b).map_err(|e| {
            let why = RecordRejection::NotUtf8 {
                valid_up_to: e.valid_up_to(),
            };
            (why.code(), why.to_string())
        })?;
        let mut r: MapReport = serde_json::from_str(s).map_err(|e| {
            (
                "malformed",
                std::format!("malformed map report: {}", Untrusted(&e.to_string())),
            )
        })?;
        let clipped = clip.map_or(0, |c| c.clip(&mut r));
        if hold_ids && r.report_id.is_some() {
            held = Some((r, clipped));
            return Ok(None);
        }
        agg.add(&r)
            .map_err(|e| ("refused", Untrusted(&e.to_string()).to_string()))?;
        Ok(Some(clipped))
    })();
    match outcome {
        Ok(None) if held.is_some() => {}
        Ok(None) => counts.skipped += 1,
        Ok(Some(c)) => {
            counts.accepted += 1;
            counts.clipped += c;
        }
        Err((code, message)) => {
            counts.rejected += 1;
            on_reject(code, &message);
        }
    }
    held
}

/// One batch of records handed to a worker: their bytes back to back,
/// and per record its number and its byte range (or the reader's
/// rejection).
type Batch = (
    Vec<u8>,
    Vec<(u64, core::result::Result<(usize, usize), RecordRejection>)>,
);

/// Bytes per batch (records are never split; a batch closes after the
/// record that reaches this size).
const BATCH_BYTES: usize = 1 << 20;

/// Ids the shards of [`ingest_map_stream_once`] make room for (2^20, the
/// default `--max-report-ids`, or the cap if smaller), once a shard holds
/// [`SHARD_RESERVE_AFTER`](crate::server::ingest::SHARD_RESERVE_AFTER)
/// ids: the tables then hold up to that many without being rehashed
/// again. At 2 workers (8 shards) that is 1.4 · 2^20 slots of 8 bytes,
/// 11 MB (where a `HashMap` per shard took 2^21 slots of 18 bytes, 38 MB),
/// and the ids themselves, 16 bytes each, are stored as they come (16 MB
/// for 10^6); a stream of fewer than about 30,000 ids keeps small tables.
const SHARD_RESERVE: usize = 1 << 20;

/// Most workers [`ingest_map_reports_parallel`] starts; a larger count is
/// taken as this one (the result does not depend on it). Each worker holds
/// one aggregator (at most 1023² bin counts, 8.4 MB, for noise a priori)
/// and up to 3 batches of about 1 MiB are in flight per worker, so 32
/// workers bound that memory to about 0.4 GB. Unbounded, `--threads
/// 100000` took 21 GB before it was killed and `--threads 2^64 − 1`
/// panicked on a capacity overflow (attack6).
pub const MAX_MAP_INGEST_THREADS: usize = 32;

/// [`ingest_map_reports`] on `threads` workers: the calling thread splits
/// the stream into records (the same reader, so the same record numbers,
/// size limits and rejections) and hands batches of them to workers, each
/// adding into its own empty copy of `agg`; the copies are then merged
/// into `agg`. Every state merges exactly (integer bin counts, exact
/// sums), so the result is bit-identical to the sequential path for any
/// number of threads and any batching (docs/MATH.md §9.8); rejections are
/// reported in record order while the stream is read, at most 3·`threads`
/// batches behind the reader. `threads` <= 1 is the sequential path; at
/// most [`MAX_MAP_INGEST_THREADS`] workers are started.
/// Memory: at most 3·`threads` batches between reading and reporting, each
/// about 1 MiB of records (at most 16,384) and the messages of its
/// rejected ones, plus one aggregator per worker. (The messages were held
/// to the end of the stream: memory grew with every bad record; attack5.)
///
/// ```
/// use geopriv::map::{ingest_map_reports, ingest_map_reports_parallel, KdeGrid, MapAggregator, MapMechanism, MapRelease, QuerySet};
/// use geopriv::server::ingest::{FormatChoice, RecordReader};
/// # use rand::SeedableRng;
/// # let mut rng = rand::rngs::StdRng::seed_from_u64(1);
/// let set = QuerySet::Kde(KdeGrid::square(10_000.0, 11)?);
/// let device = MapRelease::new(set.clone(), MapMechanism::APriori, 1e-3)?;
/// let mut text = String::new();
/// for i in 0..500 {
///     let r = device.release_unmetered(&[20.0 * i as f64, 5_000.0], &mut rng)?;
///     text += &serde_json::to_string(&r).unwrap();
///     text += "\n";
/// }
/// let run = |threads: usize| {
///     let mut agg = MapAggregator::new(set.clone(), MapMechanism::APriori, 1e-3).unwrap();
///     let mut reader = RecordReader::new(text.as_bytes(), FormatChoice::Json, 1 << 16).unwrap();
///     ingest_map_reports_parallel(&mut agg, None, &mut reader, threads, |_, _, _| {}).unwrap();
///     agg.counts().unwrap().clone()
/// };
/// assert_eq!(run(1), run(2));
/// # Ok::<(), geopriv::Error>(())
/// ```
pub fn ingest_map_reports_parallel<R: Read>(
    agg: &mut MapAggregator,
    clip: Option<&MapClip>,
    reader: &mut RecordReader<R>,
    threads: usize,
    on_reject: impl FnMut(u64, &'static str, &str),
) -> io::Result<MapCounts> {
    ingest_sharded(agg, clip, reader, threads, BATCH_BYTES, None, on_reject)
}

/// One record's outcome a worker hands back to the calling thread.
enum Back {
    /// Rejected: its number, code and escaped message.
    Rejected(u64, &'static str, String),
    /// Carries a `report_id`: its number and the report, for
    /// [`decide_once`] in record order.
    Held(u64, Box<Held>),
    /// Carries a `report_id` to be decided on the worker by its shard
    /// (never handed back: decided into `Settled` or `Rejected`).
    Pending(u64, Pend),
    /// Decided on the worker (added or a duplicate): nothing to report.
    Settled,
}

/// A report waiting on a worker for its id's turn.
enum Pend {
    /// A noise-a-priori report on binned counts, already judged
    /// ([`MapAggregator::binned_slot`]; the report itself dropped): its
    /// bin, or the message of its refusal, and its clipped values.
    Binned(core::result::Result<Option<super::bins::Slot>, String>, u64),
    /// Any other report, whole.
    Report(Box<Held>),
}

/// Decide on a worker, in each id shard's batch order, the reports of
/// batch `seq` that carry a `report_id` and are numbered below the room
/// (`todo`: (index in `out`, key, id) in record order, each
/// `out[index]` a [`Back::Pending`]): the rule of [`decide_once`] with the
/// shards' marks as the set, since every such record finds room (docs/MATH.md
/// §10.11, "map aggregate"). An id is marked only when its report is
/// accepted, so a mark means a duplicate; an unmarked id's report is added
/// to the worker's own `mine` (whose acceptance is a pure function of the
/// report and the public parameters) and marked if accepted, or rejected
/// with the message [`decide_once`] gives. False if a turn failed.
fn decide_by_shard(
    shards: &IdShards,
    seq: u64,
    todo: &mut [(usize, u64, [u8; 16])],
    out: &mut [Back],
    mine: &mut MapAggregator,
    counts: &mut MapCounts,
) -> bool {
    let message = |e: crate::Error| Untrusted(&e.to_string()).to_string();
    shards.decide_in_turn(seq, todo, |i, mark| {
        let slot = out.get_mut(i)?;
        let Back::Pending(n, pend) = core::mem::replace(slot, Back::Settled) else {
            return None;
        };
        if mark.is_some() {
            counts.duplicates += 1;
            return None;
        }
        let (added, clipped) = match pend {
            Pend::Binned(Ok(bin), clipped) => (mine.add_binned(bin).map_err(message), clipped),
            Pend::Binned(Err(m), clipped) => (Err(m), clipped),
            Pend::Report(h) => (mine.add(&h.0).map_err(message), h.1),
        };
        match added {
            Ok(()) => {
                counts.accepted += 1;
                counts.clipped += clipped;
                Some(true)
            }
            Err(m) => {
                counts.rejected += 1;
                *slot = Back::Rejected(n, "refused", m);
                None
            }
        }
    })
}

/// [`ingest_map_reports_parallel`] with batches of `batch_bytes`, and with
/// `ids` (if any) deciding the reports with a `report_id`: by id shard on
/// the workers for the records numbered up to the set's cap when `ids`
/// allows it, the rest on the calling thread in record order
/// ([`ingest_map_reports_once`]).
fn ingest_sharded<R: Read>(
    agg: &mut MapAggregator,
    clip: Option<&MapClip>,
    reader: &mut RecordReader<R>,
    threads: usize,
    batch_bytes: usize,
    ids: Option<Ids<'_>>,
    mut on_reject: impl FnMut(u64, &'static str, &str),
) -> io::Result<MapCounts> {
    let (mut dedup, keep, shard) = match ids {
        Some(Ids { dedup, keep, shard }) => (Some(dedup), keep, shard),
        None => (None, true, false),
    };
    if threads <= 1 {
        return ingest_seq(agg, clip, reader, dedup, on_reject);
    }
    let threads = threads.min(MAX_MAP_INGEST_THREADS);
    let hold_ids = dedup.is_some();
    // Records numbered below the room find room in a fresh set of at most
    // `cap` ids (records are numbered from 1, at most one id each): their
    // ids are decided on the workers by shard.
    let shards = dedup.as_deref().filter(|d| shard && d.is_empty()).map(|d| {
        let sh = IdShards::new((d.cap() as u64).saturating_add(1), threads);
        // Tables grown once to SHARD_RESERVE ids in all: no rehashing
        // while they fill (the ids' hashing was a tenth of the CPU).
        sh.reserve(d.cap().min(SHARD_RESERVE));
        sh
    });
    let shards = shards.as_ref();
    // The ids accepted on the workers have been moved into `dedup`.
    let mut handed_over = false;
    // The reports with an id, decided here in record order.
    let mut here = MapCounts::default();
    type Rejected = Vec<Back>;
    let (tx, rx) = std::sync::mpsc::sync_channel::<(u64, Batch)>(2 * threads);
    let rx = std::sync::Mutex::new(rx);
    // Each batch's rejections, back to the calling thread, which reports
    // them in batch order while it reads (they were all held until the end
    // of the stream: one message per bad record, unbounded; attack5).
    let (done_tx, done_rx) = std::sync::mpsc::channel::<(u64, Rejected)>();
    // Each batch's buffers, emptied, back to the reader for a later batch:
    // a fresh megabyte per batch was a fresh set of pages to fault in.
    let (spent_tx, spent_rx) = std::sync::mpsc::channel::<Batch>();
    let template = agg.empty_like();
    let (results, read) = std::thread::scope(|s| {
        let workers: Vec<_> = (0..threads)
            .map(|_| {
                let (rx, done_tx, spent_tx) = (&rx, done_tx.clone(), spent_tx.clone());
                let mut mine = template.clone();
                s.spawn(move || {
                    let _fail = shards.map(IdShards::fail_on_unwind);
                    let mut counts = MapCounts::default();
                    let mut header = APrioriHeader::default();
                    let mut todo = Vec::new();
                    loop {
                        let batch = match rx.lock() {
                            Ok(r) => r.recv(),
                            Err(_) => break,
                        };
                        let Ok((seq, (bytes, mut recs))) = batch else {
                            break;
                        };
                        // The batches holding a record below the room are
                        // a prefix of the batch numbers; each of them takes
                        // its turn in every shard.
                        let first = recs.first().map_or(u64::MAX, |r| r.0);
                        let room = shards.filter(|sh| first < sh.room()).map(IdShards::room);
                        let mut rejected: Rejected = Vec::new();
                        todo.clear();
                        for (n, raw) in recs.drain(..) {
                            let raw = raw
                                .map(|(a, b)| &bytes[a..b])
                                .map_err(|why| (why.code(), why.to_string()));
                            let held = one_record(
                                &mut mine,
                                clip,
                                &mut header,
                                raw,
                                hold_ids,
                                &mut counts,
                                |code, m| rejected.push(Back::Rejected(n, code, m.to_string())),
                            );
                            if let Some(h) = held {
                                match (room, shards, h.0.report_id) {
                                    (Some(room), Some(sh), Some(id)) if n < room => {
                                        todo.push((rejected.len(), sh.key_of(&id.0), id.0));
                                        // Judged now, so that only its bin
                                        // waits for the id's turn.
                                        let pend = match mine.binned_slot(&h.0) {
                                            Some(bin) => {
                                                let (r, clipped) = h;
                                                // Its buffers serve the next report.
                                                header.recycle(r);
                                                Pend::Binned(
                                                    bin.map_err(|e| {
                                                        Untrusted(&e.to_string()).to_string()
                                                    }),
                                                    clipped,
                                                )
                                            }
                                            None => Pend::Report(Box::new(h)),
                                        };
                                        rejected.push(Back::Pending(n, pend));
                                    }
                                    _ => rejected.push(Back::Held(n, Box::new(h))),
                                }
                            }
                        }
                        // The reader's next batch reuses these buffers.
                        let _ = spent_tx.send((bytes, recs));
                        if let (Some(_), Some(sh)) = (room, shards) {
                            if let Some(c) = mine.counts() {
                                // The bins' cache lines fetched together
                                // ahead of the decisions in id order (each
                                // an increment in megabytes of counts).
                                let c = c.counts();
                                let lines = rejected.iter().fold(0u64, |a, b| match b {
                                    Back::Pending(_, Pend::Binned(Ok(Some(bin)), _)) => {
                                        a.wrapping_add(c.get(bin.bin()).copied().unwrap_or(0))
                                    }
                                    _ => a,
                                });
                                std::hint::black_box(lines);
                            }
                            if !decide_by_shard(
                                sh,
                                seq,
                                &mut todo,
                                &mut rejected,
                                &mut mine,
                                &mut counts,
                            ) {
                                return Err(());
                            }
                            rejected.retain(|b| !matches!(b, Back::Settled));
                        }
                        if done_tx.send((seq, rejected)).is_err() {
                            break;
                        }
                    }
                    Ok((mine, counts))
                })
            })
            .collect();
        drop(done_tx);
        // Batches sent, batches whose rejections were reported, and the
        // ones back out of order. At most `limit` batches are between
        // reading and reporting, so the rejections held are at most those
        // of `limit` batches.
        let limit = 3 * threads as u64;
        let (mut sent, mut next) = (0u64, 0u64);
        let mut pending: std::collections::BTreeMap<u64, Rejected> = Default::default();
        let mut report = |pending: &mut std::collections::BTreeMap<u64, Rejected>,
                          next: &mut u64| {
            while let Some(rj) = pending.remove(next) {
                *next += 1;
                for b in rj {
                    match b {
                        Back::Rejected(n, code, m) => on_reject(n, code, &m),
                        Back::Held(n, held) => {
                            let (r, clipped) = *held;
                            if let Some(d) = dedup.as_deref_mut() {
                                // The first record at or past the room:
                                // every record below it has been decided
                                // (its batch and all before were handed
                                // back) and no later batch touches the
                                // shards, so their marks are the ids the
                                // sequential set holds now.
                                if let (false, Some(sh)) = (handed_over, shards) {
                                    d.remember(sh.take_accepted());
                                    handed_over = true;
                                }
                                decide_once(agg, d, &r, clipped, &mut here, |code, m| {
                                    on_reject(n, code, m)
                                });
                            }
                        }
                        Back::Pending(..) | Back::Settled => {}
                    }
                }
            }
        };
        // Wait for one batch back; false if the workers stopped.
        let wait = |pending: &mut std::collections::BTreeMap<u64, Rejected>| loop {
            match done_rx.recv_timeout(std::time::Duration::from_millis(100)) {
                Ok((seq, rj)) => {
                    pending.insert(seq, rj);
                    return true;
                }
                // A worker that ended while work remains has failed.
                Err(std::sync::mpsc::RecvTimeoutError::Timeout)
                    if !workers.iter().any(|w| w.is_finished()) => {}
                Err(_) => return false,
            }
        };
        let read = (|| -> io::Result<()> {
            let mut bytes = Vec::with_capacity(batch_bytes + 4096);
            let mut recs = Vec::new();
            let mut send = |full: Batch,
                            pending: &mut std::collections::BTreeMap<u64, Rejected>,
                            next: &mut u64,
                            sent: &mut u64|
             -> io::Result<()> {
                while *sent - *next >= limit {
                    if !wait(pending) {
                        return Err(io::Error::other("map ingest worker panicked"));
                    }
                    report(pending, next);
                }
                tx.send((*sent, full))
                    .map_err(|_| io::Error::other("map ingest worker panicked"))?;
                *sent += 1;
                while let Ok((seq, rj)) = done_rx.try_recv() {
                    pending.insert(seq, rj);
                }
                report(pending, next);
                Ok(())
            };
            while let Some((n, raw)) = reader.next_bytes()? {
                match raw {
                    Ok(b) => {
                        let a = bytes.len();
                        bytes.extend_from_slice(b);
                        recs.push((n, Ok((a, bytes.len()))));
                    }
                    Err(why) => recs.push((n, Err(why))),
                }
                if bytes.len() >= batch_bytes || recs.len() >= 16_384 {
                    let full = (core::mem::take(&mut bytes), core::mem::take(&mut recs));
                    send(full, &mut pending, &mut next, &mut sent)?;
                    // A spent batch's buffers if one is back (at most one
                    // more than the batches in flight are ever made).
                    (bytes, recs) = match spent_rx.try_recv() {
                        Ok((mut b, mut r)) => {
                            b.clear();
                            r.clear();
                            (b, r)
                        }
                        Err(_) => (Vec::with_capacity(batch_bytes + 4096), Vec::new()),
                    };
                }
            }
            if !recs.is_empty() {
                send((bytes, recs), &mut pending, &mut next, &mut sent)?;
            }
            // The last batches' rejections.
            while next < sent {
                if !wait(&mut pending) {
                    return Err(io::Error::other("map ingest worker panicked"));
                }
                report(&mut pending, &mut next);
            }
            Ok(())
        })();
        drop(tx);
        let results: Vec<_> = workers.into_iter().map(|w| w.join()).collect();
        (results, read)
    });
    read?;
    let mut counts = here;
    for r in results {
        let (mine, c) = r
            .map_err(|_| io::Error::other("map ingest worker panicked"))?
            .map_err(|()| io::Error::other("map ingest worker failed"))?;
        agg.merge(&mine)
            .map_err(|e| io::Error::other(e.to_string()))?;
        counts.records += c.records;
        counts.accepted += c.accepted;
        counts.rejected += c.rejected;
        counts.skipped += c.skipped;
        counts.clipped += c.clipped;
        counts.duplicates += c.duplicates;
        if let Some(d) = dedup.as_deref_mut() {
            // The duplicates found on the workers (`here`'s are counted
            // by decide_once).
            d.duplicates += c.duplicates;
        }
    }
    if let (Some(d), Some(sh), true, false) = (dedup, shards, keep, handed_over) {
        d.remember(sh.take_accepted());
    }
    Ok(counts)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::map::KdeGrid;
    use crate::server::ingest::FormatChoice;
    use rand::SeedableRng;

    /// Reports of `mech` with bad records interleaved (not UTF-8,
    /// malformed, too long, another ε, a comment).
    fn stream(set: &QuerySet, mech: MapMechanism) -> Vec<u8> {
        let mut rng = rand::rngs::StdRng::seed_from_u64(5);
        let dev = MapRelease::new(set.clone(), mech, 1e-3).unwrap();
        let other = MapRelease::new(set.clone(), mech, 2e-3).unwrap();
        let mut out = Vec::new();
        for i in 0..3_000u32 {
            let x = [(i * 37 % 10_000) as f64, (i * 91 % 10_000) as f64];
            let r = if i % 997 == 5 {
                other.release_unmetered(&x, &mut rng).unwrap()
            } else {
                dev.release_unmetered(&x, &mut rng).unwrap()
            };
            out.extend_from_slice(serde_json::to_string(&r).unwrap().as_bytes());
            out.push(b'\n');
            match i % 401 {
                3 => out.extend_from_slice(b"\xff\xfe\n"),
                4 => out.extend_from_slice(b"{\"set\": 1}\n"),
                5 => out.extend_from_slice(&[b'x'; 5_000]),
                6 => out.extend_from_slice(b"\n# comment\n"),
                _ => {}
            }
        }
        out
    }

    type Run = (
        MapCounts,
        Vec<(u64, &'static str, String)>,
        Vec<u64>,
        Vec<u64>,
    );

    fn run(set: &QuerySet, mech: MapMechanism, input: &[u8], threads: usize, batch: usize) -> Run {
        run_ids(set, mech, input, threads, batch, None)
    }

    fn run_ids(
        set: &QuerySet,
        mech: MapMechanism,
        input: &[u8],
        threads: usize,
        batch: usize,
        cap: Option<usize>,
    ) -> Run {
        run_ids_by(set, mech, input, threads, batch, cap, true).0
    }

    /// [`run_ids`] deciding ids by shard on the workers (`shard`) or all on
    /// the calling thread; also the ids `dedup` remembers at the end
    /// (moved in from the shards), among those of `ids_of(input)`.
    fn run_ids_by(
        set: &QuerySet,
        mech: MapMechanism,
        input: &[u8],
        threads: usize,
        batch: usize,
        cap: Option<usize>,
        shard: bool,
    ) -> (Run, Vec<[u8; 16]>) {
        let mut dedup = cap.map(Dedup::new);
        let mut agg = MapAggregator::new(set.clone(), mech, 1e-3).unwrap();
        let clip =
            MapClip::new(set, mech, 1e-3, crate::server::clip::ClipLevel::default()).unwrap();
        let mut reader = RecordReader::new(input, FormatChoice::Json, 4_096).unwrap();
        let mut rejected = Vec::new();
        let counts = ingest_sharded(
            &mut agg,
            clip.as_ref(),
            &mut reader,
            threads,
            batch,
            dedup.as_mut().map(|dedup| Ids {
                dedup,
                keep: true,
                shard,
            }),
            |n, c, m| rejected.push((n, c, m.to_string())),
        )
        .unwrap();
        if let Some(d) = &dedup {
            assert_eq!(d.duplicates, counts.duplicates);
        }
        let remembered = match &dedup {
            Some(d) => {
                let mut v: Vec<[u8; 16]> = ids_of(input)
                    .into_iter()
                    .filter(|id| d.seen(Some(&crate::ReportId(*id))))
                    .collect();
                v.sort_unstable();
                v.dedup();
                v
            }
            None => Vec::new(),
        };
        let bins = agg
            .counts()
            .map(|c| c.counts().to_vec())
            .unwrap_or_default();
        let est = agg.estimate(Some(1.0)).unwrap();
        let bits = est
            .values
            .iter()
            .chain(&est.standard_errors)
            .map(|v| v.to_bits())
            .collect();
        ((counts, rejected, bins, bits), remembered)
    }

    /// The report ids of the lines of `input` that serde decodes.
    fn ids_of(input: &[u8]) -> Vec<[u8; 16]> {
        input
            .split(|&b| b == b'\n')
            .filter_map(|l| serde_json::from_slice::<MapReport>(l).ok())
            .filter_map(|r| r.report_id.map(|id| id.0))
            .collect()
    }

    /// attack6: `--threads` is an operator's number, not a worker count to
    /// start as given: 2^64 − 1 panicked (capacity overflow of the batch
    /// channel) and 100,000 took 21 GB. Capped at MAX_MAP_INGEST_THREADS,
    /// with the sequential path's result.
    #[test]
    fn a_huge_thread_count_is_capped_not_a_panic() {
        let set = QuerySet::Kde(KdeGrid::square(10_000.0, 9).unwrap());
        let input = stream(&set, MapMechanism::APriori);
        let seq = run(&set, MapMechanism::APriori, &input, 1, 1 << 20);
        for threads in [usize::MAX, 1 << 40, MAX_MAP_INGEST_THREADS + 1] {
            let par = run(&set, MapMechanism::APriori, &input, threads, 1 << 20);
            assert_eq!(par, seq, "{threads} threads");
        }
    }

    #[test]
    fn sharded_ingest_is_bit_identical_to_the_sequential_path() {
        let set = QuerySet::Kde(KdeGrid::square(10_000.0, 9).unwrap());
        for mech in [
            MapMechanism::APriori,
            MapMechanism::Composition,
            MapMechanism::Sampled { k: 2 },
        ] {
            let input = stream(&set, mech);
            let seq = run(&set, mech, &input, 1, 1 << 20);
            assert!(
                seq.0.accepted > 2_900 && seq.0.rejected >= 20,
                "{:?}",
                seq.0
            );
            assert!(seq.1.windows(2).all(|w| w[0].0 < w[1].0));
            for (threads, batch) in [(2, 1 << 20), (2, 300), (3, 1), (4, 7_000)] {
                let par = run(&set, mech, &input, threads, batch);
                assert_eq!(
                    par, seq,
                    "{mech:?}, {threads} threads, batches of {batch} bytes"
                );
            }
        }
    }

    /// Each `report_id` counts once, decided in record order: replays are
    /// dropped, a refused record carrying a valid report's id before it
    /// does not censor it, ids past the cap are counted unchecked; the
    /// same for any threads and batching (ids straddle batch boundaries).
    #[test]
    fn report_ids_count_once_for_any_threads() {
        trait WithId {
            fn with_id(self, id: crate::ReportId) -> Self;
        }
        impl WithId for MapReport {
            fn with_id(mut self, id: crate::ReportId) -> Self {
                self.report_id = Some(id);
                self
            }
        }
        let set = QuerySet::Kde(KdeGrid::square(10_000.0, 9).unwrap());
        for mech in [MapMechanism::APriori, MapMechanism::Composition] {
            let mut rng = rand::rngs::StdRng::seed_from_u64(6);
            let dev = MapRelease::new(set.clone(), mech, 1e-3).unwrap();
            let other = MapRelease::new(set.clone(), mech, 2e-3).unwrap();
            let mut out = Vec::new();
            let mut line = |r: &MapReport| {
                out.extend_from_slice(serde_json::to_string(r).unwrap().as_bytes());
                out.push(b'\n');
            };
            let mut valid = Vec::new();
            for i in 0..600u32 {
                let x = [(i * 37 % 10_000) as f64, (i * 91 % 10_000) as f64];
                let id = crate::ReportId([
                    (i % 256) as u8,
                    (i / 256) as u8,
                    1,
                    2,
                    3,
                    4,
                    5,
                    6,
                    7,
                    8,
                    9,
                    10,
                    11,
                    12,
                    13,
                    14,
                ]);
                // A refused record (another ε) with the id first.
                if i % 7 == 0 {
                    line(&other.release_unmetered(&x, &mut rng).unwrap().with_id(id));
                }
                let r = dev.release_unmetered(&x, &mut rng).unwrap();
                let r = if i % 5 == 0 { r } else { r.with_id(id) };
                line(&r);
                valid.push(r);
            }
            // Replays of every valid report, in another order.
            for r in valid.iter().rev() {
                line(r);
            }
            let n_refused = (0..600).filter(|i| i % 7 == 0).count() as u64;
            let n_no_id = (0..600).filter(|i| i % 5 == 0).count() as u64;
            let seq = run_ids(&set, mech, &out, 1, 1 << 20, Some(1 << 10));
            assert_eq!(
                (seq.0.accepted, seq.0.rejected, seq.0.duplicates),
                (600 + n_no_id, n_refused, 600 - n_no_id),
                "{mech:?}"
            );
            for (threads, batch) in [(2, 1 << 20), (2, 300), (3, 1), (3, 5_000)] {
                for shard in [true, false] {
                    let par = run_ids_by(&set, mech, &out, threads, batch, Some(1 << 10), shard);
                    assert_eq!(
                        par.0, seq,
                        "{mech:?}, {threads} threads, batches of {batch}"
                    );
                }
            }
            // A cap of 100 ids: the later replays are counted again.
            let capped = run_ids(&set, mech, &out, 1, 1 << 20, Some(100));
            assert_eq!(capped.0.duplicates, 100, "{mech:?}");
            for threads in [2, 3] {
                let par = run_ids(&set, mech, &out, threads, 700, Some(100));
                assert_eq!(par, capped, "{mech:?}, {threads} threads, cap 100");
            }
        }
    }

    /// The once-per-id rule by a tiny reference: in record order, a report
    /// whose id is in the set is a duplicate; else it is accepted if the
    /// aggregator takes it (its id remembered while the set has fewer than
    /// `cap`), else refused. Returns the accepted reports, the duplicates,
    /// the refused record numbers (from 1) and the ids remembered.
    fn reference(
        set: &QuerySet,
        mech: MapMechanism,
        input: &[u8],
        cap: usize,
    ) -> (Vec<MapReport>, u64, Vec<u64>, Vec<[u8; 16]>) {
        let fresh = MapAggregator::new(set.clone(), mech, 1e-3).unwrap();
        let clip =
            MapClip::new(set, mech, 1e-3, crate::server::clip::ClipLevel::default()).unwrap();
        let mut seen = std::collections::HashSet::new();
        let (mut accepted, mut dups, mut refused) = (Vec::new(), 0, Vec::new());
        let lines = input.strip_suffix(b"\n").unwrap_or(input);
        for (i, line) in lines.split(|&b| b == b'\n').enumerate() {
            let n = i as u64 + 1;
            let Ok(mut r) = serde_json::from_slice::<MapReport>(line) else {
                refused.push(n);
                continue;
            };
            if let Some(c) = &clip {
                c.clip(&mut r);
            }
            let id = r.report_id.map(|id| id.0);
            if id.is_some_and(|id| seen.contains(&id)) {
                dups += 1;
            } else if fresh.clone().add(&r).is_ok() {
                if let (Some(id), true) = (id, seen.len() < cap) {
                    seen.insert(id);
                }
                accepted.push(r);
            } else {
                refused.push(n);
            }
        }
        let mut seen: Vec<_> = seen.into_iter().collect();
        seen.sort_unstable();
        (accepted, dups, refused, seen)
    }

    /// Many duplicates spread over every shard and batch: ids drawn from a
    /// pool of 150 (each replayed ~30 times at other locations), refused
    /// records (another ε) carrying pool ids before and after their valid
    /// ones, reports without an id, malformed lines. For every thread
    /// count, batch size, set cap (the workers' room handed over to the
    /// calling thread mid-stream, a set that fills, none at all) and both
    /// ways of deciding ids, the map, the counts, the messages and the ids
    /// remembered are the sequential ones, and those of the reference:
    /// the report counted for an id is its first accepted one.
    #[test]
    fn many_duplicates_by_shard_are_the_reference_rule() {
        let set = QuerySet::Kde(KdeGrid::square(10_000.0, 9).unwrap());
        for mech in [MapMechanism::APriori, MapMechanism::Composition] {
            let mut rng = rand::rngs::StdRng::seed_from_u64(11);
            let dev = MapRelease::new(set.clone(), mech, 1e-3).unwrap();
            let other = MapRelease::new(set.clone(), mech, 2e-3).unwrap();
            let mut out = Vec::new();
            for i in 0..4_500u64 {
                use rand::Rng;
                let x = [
                    rng.random_range(0.0..10_000.0),
                    rng.random_range(0.0..10_000.0),
                ];
                let k = rng.random_range(0..150u64);
                let mut id = [0u8; 16];
                id[..8].copy_from_slice(&k.wrapping_mul(0x9e37_79b9_7f4a_7c15).to_le_bytes());
                let mut r = match i % 9 {
                    0 | 4 => other.release_unmetered(&x, &mut rng).unwrap(),
                    _ => dev.release_unmetered(&x, &mut rng).unwrap(),
                };
                if i % 11 != 3 {
                    r.report_id = Some(crate::ReportId(id));
                }
                if i % 401 == 7 {
                    out.extend_from_slice(b"{\"set\": 1}\n");
                }
                out.extend_from_slice(serde_json::to_string(&r).unwrap().as_bytes());
                out.push(b'\n');
            }
            for cap in [1 << 20, 1_000, 60, 0] {
                let (acc, dups, refused, seen) = reference(&set, mech, &out, cap);
                let mut want = MapAggregator::new(set.clone(), mech, 1e-3).unwrap();
                for r in &acc {
                    want.add(r).unwrap();
                }
                let bins = want
                    .counts()
                    .map(|c| c.counts().to_vec())
                    .unwrap_or_default();
                let est = want.estimate(Some(1.0)).unwrap();
                let bits: Vec<u64> = est
                    .values
                    .iter()
                    .chain(&est.standard_errors)
                    .map(|v| v.to_bits())
                    .collect();
                let (seq, remembered) = run_ids_by(&set, mech, &out, 1, 1 << 20, Some(cap), true);
                assert!(dups > 500 || cap < 100, "{cap}: {dups} duplicates");
                assert_eq!(
                    (seq.0.accepted, seq.0.duplicates),
                    (acc.len() as u64, dups),
                    "{mech:?}, cap {cap}"
                );
                let numbers: Vec<u64> = seq.1.iter().map(|r| r.0).collect();
                assert_eq!(numbers, refused, "{mech:?}, cap {cap}");
                assert_eq!((&seq.2, &seq.3), (&bins, &bits), "{mech:?}, cap {cap}");
                assert_eq!(remembered, seen, "{mech:?}, cap {cap}");
                for (threads, batch) in [(2, 1 << 20), (2, 2_000), (3, 1), (4, 700)] {
                    for shard in [true, false] {
                        let par = run_ids_by(&set, mech, &out, threads, batch, Some(cap), shard);
                        assert_eq!(
                            (&par.0, &par.1),
                            (&seq, &seen),
                            "{mech:?}, cap {cap}, {threads} threads, batches of {batch}, shard {shard}"
                        );
                    }
                }
            }
        }
    }

    /// The fast path of noise-a-priori lines gives serde's report on every
    /// line it accepts, and declines (leaving the line to serde, which
    /// also produces every rejection) whatever is not in the exact layout.
    #[test]
    fn canonical_a_priori_agrees_with_serde_and_declines_the_rest() {
        let set = QuerySet::Kde(KdeGrid::square(10_000.0, 9).unwrap());
        let mut rng = rand::rngs::StdRng::seed_from_u64(9);
        let (mut lines, mut canonical) = (Vec::new(), Vec::new());
        for eps in [1e-3, 0.1 + 0.2, 1e-9, 1e6] {
            let dev = MapRelease::new(set.clone(), MapMechanism::APriori, eps).unwrap();
            for x in [[0.0, 0.0], [1234.5678, 9_999.999], [10_000.0, 3.0]] {
                let r = dev.release_unmetered(&x, &mut rng).unwrap();
                let line = serde_json::to_string(&r).unwrap();
                let with_id = serde_json::to_string(&r.clone().with_random_id(&mut rng)).unwrap();
                lines.push(line.clone());
                lines.push(with_id.clone());
                canonical.push(line.clone());
                canonical.push(with_id.clone());
                // Spellings serde reads (or refuses) that the fast path must
                // leave to it, and forged numbers.
                for (from, to) in [
                    ("\"location\":[", "\"location\":[-0,"),
                    ("\"location\":[", "\"location\":[1e999,"),
                    ("\"location\":[", "\"location\":[01,"),
                    ("\"location\":[", "\"location\":[-0.0,"),
                    ("\"location\":[", "\"location\":[7,"),
                    ("\"location\":[", "\"location\":[1.,"),
                    ("\"location\":[", "\"location\": ["),
                    ("]", ",5]"),
                    ("]", "]}"),
                    ("a_priori", "vector_laplace"),
                    ("\"set\":\"", "\"set\":\"\\u0030"),
                    ("\"set\":\"", "\"set\":\"-"),
                    ("\"epsilon\"", "\"epsilon\":1,\"epsilon\""),
                    ("}", ",\"values\":[1.5]}"),
                    ("}", " }"),
                ] {
                    lines.push(line.replacen(from, to, 1));
                    lines.push(with_id.replacen(from, to, 1));
                }
                let id_at = with_id.find("report_id\":\"").unwrap() + 12;
                for forged in ["g", "A", "\""] {
                    let mut l = with_id.clone();
                    l.replace_range(id_at..id_at + 1, forged);
                    lines.push(l);
                }
                lines.push(with_id.replacen("\"}", "0\"}", 1));
            }
        }
        let mut accepted = 0;
        // One header cache over all lines (hits, misses, and forged lines
        // after a good one with the same header) gives what a fresh one
        // gives on each line.
        let mut shared = APrioriHeader::default();
        let fresh = |l: &str| canonical_a_priori(l.as_bytes(), &mut APrioriHeader::default());
        for line in &lines {
            let slow: Option<MapReport> = serde_json::from_str(line).ok();
            let cached = canonical_a_priori(line.as_bytes(), &mut shared);
            assert_eq!(cached, fresh(line), "{line}");
            assert_eq!(
                cached.as_ref().map(|r| r.epsilon.to_bits()),
                fresh(line).map(|r| r.epsilon.to_bits())
            );
            // Declining is always safe (serde decides); taking a line
            // must give serde's report.
            // The next line's report is built on this one's buffers.
            if let Some(r) = cached.clone() {
                shared.recycle(r);
            }
            if let Some(fast) = cached {
                accepted += 1;
                let slow = slow.unwrap_or_else(|| panic!("serde refuses {line}"));
                assert_eq!(fast, slow, "{line}");
                let bits = |r: &MapReport| {
                    let mut v = std::vec![r.epsilon.to_bits()];
                    v.extend(r.location.iter().flatten().map(|x| x.to_bits()));
                    v
                };
                assert_eq!(bits(&fast), bits(&slow), "{line}");
            }
        }
        // The lines the devices write are all taken by the fast path.
        for line in lines.iter().filter(|l| canonical.contains(l)) {
            assert!(fresh(line).is_some(), "{line}");
        }
        assert!(accepted > canonical.len(), "{accepted}");
    }
}
