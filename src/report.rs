//! Reports: what a device uploads, in a versioned wire format, and the
//! server's validation of it.
//!
//! A [`Report`] carries exactly six things: the format version, the query
//! (family and public parameters, [`QueryDescriptor`]), the mechanism name,
//! its ε and δ, and the released value f(x) + noise. **It has no field for
//! the smooth sensitivity S(x), the noise scale or anything else computed
//! from x**: those leak x (docs/MATH.md §2), so the type cannot carry them and the
//! decoders refuse JSON with unknown fields (a buggy client that adds, say,
//! `"scale"` gets its reports rejected rather than silently stored).
//!
//! # Encodings
//!
//! **JSON lines**, one object per line ([`Report::to_json_line`],
//! [`Report::from_json`]); floats are written in shortest round-trip form
//! and parsed exactly:
//!
//! ```text
//! {"version":1,"query":{"threshold":{"threshold":100000.0,"width":20000.0}},"mechanism":"polyplace","epsilon":0.001,"delta":0.0,"value":0.7315}
//! ```
//!
//! The query is externally tagged by family: `{"threshold":{threshold,
//! width}}`, `{"interval":{lower,upper,width}}`, `{"two-way":{thresholds:
//! [t1,t2],width}}`, `{"kde":{center:[..],bandwidth}}`. Mechanisms are
//! `polyplace`, `student-t`, `cauchy`, `laplace`, `global-laplace`,
//! `a-priori`, `ldp`.
//!
//! **Binary** ([`Report::to_bytes`], [`Report::from_bytes`]): the
//! [postcard](https://docs.rs/postcard) encoding of the same serde model:
//! varint version, varint query family index, its f64 parameters as 8
//! little-endian bytes each (the KDE centre is prefixed by a varint length),
//! varint mechanism index, then ε, δ and the value as 8-byte floats. A
//! threshold report is 43 bytes. The version comes first so that a decoder
//! can refuse a newer version before reading the rest. Enum variant indices
//! are part of the format: new families and mechanisms are only ever
//! appended.
//!
//! **Binary streams** ([`Report::to_frame`], [`frames`], and with `std`
//! `read_frames`/`write_frame`): each report's postcard bytes are
//! COBS-encoded (consistent overhead byte stuffing, as postcard's
//! `to_allocvec_cobs`) and followed by a single `0x00` byte. COBS output
//! never contains `0x00`, so the zero byte delimits frames unambiguously: a
//! reader splits on it, and after a corrupted or truncated frame it
//! resynchronizes at the next zero instead of losing the rest of the
//! stream (which a length prefix would).
//!
//! # Validation
//!
//! A server decodes each report, then checks it against its
//! [`ValidationPolicy`]: known version, finite value, valid and known query,
//! allowed mechanism, ε and δ within the policy. Every refusal is a
//! [`Rejection`] that says why (with a stable [`code`](Rejection::code) for
//! counters), and no input, however malformed, makes the decoders panic.
//!
//! ```
//! use geopriv::{Aggregator, MechanismName, QueryDescriptor, Report, ValidationPolicy};
//!
//! // Device side (normally done by a mechanism): one JSON line.
//! let q = QueryDescriptor::Threshold { threshold: 100_000.0, width: 20_000.0 };
//! let line = Report::new(q, MechanismName::Polyplace, 1.0 / 20_000.0, 0.0, 0.83).to_json_line();
//!
//! // Server side: decode, validate, aggregate.
//! let policy = ValidationPolicy::new(1.0 / 800.0, 0.0)?;
//! let mut agg = Aggregator::new();
//! for line in [line.as_str(), "not a report"] {
//!     match policy.accept_json(line) {
//!         Ok(report) => agg.add(report.value)?,
//!         Err(why) => eprintln!("rejected ({}): {why}", why.code()),
//!     }
//! }
//! assert_eq!(agg.estimate().unwrap().n, 1);
//! # Ok::<(), geopriv::Error>(())
//! ```

use crate::budget::PrivacyBudget;
use crate::error::{Error, Result};
use crate::escape::Untrusted;
use crate::mechanism::Mechanism;
use crate::query::{GaussianKde, Query, SoftInterval, SoftThreshold, TwoWayThreshold};
use alloc::boxed::Box;
use alloc::collections::BTreeSet;
use alloc::format;
use alloc::string::{String, ToString};
use alloc::vec::Vec;
use core::fmt;
use core::str::FromStr;
use serde::{Deserialize, Serialize};

/// The version of the report format this crate writes and accepts.
pub const FORMAT_VERSION: u16 = 1;

// ---------------------------------------------------------------------------
// Query descriptors

/// The public description of a query: its family and parameters. This is
/// what a report says it answered; the server groups reports by it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum QueryDescriptor {
    /// [`SoftThreshold`]: "share with x > threshold", ramp `width`.
    Threshold {
        /// T.
        threshold: f64,
        /// θ.
        width: f64,
    },
    /// [`SoftInterval`]: "share with lower <= x <= upper", ramps `width`.
    Interval {
        /// a.
        lower: f64,
        /// b.
        upper: f64,
        /// θ.
        width: f64,
    },
    /// [`TwoWayThreshold`]: "share with x1 > T1 and x2 > T2", ramp `width`.
    TwoWay {
        /// (T1, T2).
        thresholds: [f64; 2],
        /// τ.
        width: f64,
    },
    /// [`GaussianKde`]: Gaussian kernel at `center` with `bandwidth`.
    Kde {
        /// The query point t (d >= 1 coordinates).
        center: Vec<f64>,
        /// h.
        bandwidth: f64,
    },
}

/// `-0.0` and `0.0` are the same parameter; ids and keys use `0.0`.
#[inline]
fn canon(x: f64) -> f64 {
    if x == 0.0 {
        0.0
    } else {
        x
    }
}

/// Order-able exact identity of a descriptor (bit patterns, -0 folded to 0),
/// for map look-ups without formatting the canonical id.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub(crate) enum QueryKey {
    Threshold([u64; 2]),
    Interval([u64; 3]),
    TwoWay([u64; 3]),
    Kde(Vec<u64>),
}

impl QueryDescriptor {
    /// The family name used in ids and JSON: `threshold`, `interval`,
    /// `two-way` or `kde`.
    pub fn family(&self) -> &'static str {
        match self {
            QueryDescriptor::Threshold { .. } => "threshold",
            QueryDescriptor::Interval { .. } => "interval",
            QueryDescriptor::TwoWay { .. } => "two-way",
            QueryDescriptor::Kde { .. } => "kde",
        }
    }

    /// A stable, human-readable id, equal for equal queries:
    ///
    /// * `threshold:T=100000;w=20000`
    /// * `interval:a=10000;b=50000;w=5000`
    /// * `two-way:T1=40000;T2=70000;w=8000`
    /// * `kde:t=1200.5,-300;h=150`
    ///
    /// Numbers use Rust's shortest round-trip decimal form (no exponent),
    /// with `-0` written as `0`, so [`FromStr`] gives the descriptor back
    /// exactly.
    pub fn canonical_id(&self) -> String {
        match self {
            QueryDescriptor::Threshold { threshold, width } => {
                format!("threshold:T={};w={}", canon(*threshold), canon(*width))
            }
            QueryDescriptor::Interval {
                lower,
                upper,
                width,
            } => format!(
                "interval:a={};b={};w={}",
                canon(*lower),
                canon(*upper),
                canon(*width)
            ),
            QueryDescriptor::TwoWay { thresholds, width } => format!(
                "two-way:T1={};T2={};w={}",
                canon(thresholds[0]),
                canon(thresholds[1]),
                canon(*width)
            ),
            QueryDescriptor::Kde { center, bandwidth } => {
                let mut s = String::from("kde:t=");
                for (i, c) in center.iter().enumerate() {
                    if i > 0 {
                        s.push(',');
                    }
                    s.push_str(&canon(*c).to_string());
                }
                s.push_str(&format!(";h={}", canon(*bandwidth)));
                s
            }
        }
    }

    pub(crate) fn key(&self) -> QueryKey {
        let b = |x: f64| canon(x).to_bits();
        match self {
            QueryDescriptor::Threshold { threshold, width } => {
                QueryKey::Threshold([b(*threshold), b(*width)])
            }
            QueryDescriptor::Interval {
                lower,
                upper,
                width,
            } => QueryKey::Interval([b(*lower), b(*upper), b(*width)]),
            QueryDescriptor::TwoWay { thresholds, width } => {
                QueryKey::TwoWay([b(thresholds[0]), b(thresholds[1]), b(*width)])
            }
            QueryDescriptor::Kde { center, bandwidth } => {
                let mut k: Vec<u64> = center.iter().map(|&c| b(c)).collect();
                k.push(b(*bandwidth));
                QueryKey::Kde(k)
            }
        }
    }

    /// Check the parameters with the query's own constructor (the same
    /// rules as building the query on the device).
    pub fn check(&self) -> Result<()> {
        match self {
            QueryDescriptor::Threshold { threshold, width } => {
                SoftThreshold::new(*threshold, *width).map(drop)
            }
            QueryDescriptor::Interval {
                lower,
                upper,
                width,
            } => SoftInterval::new(*lower, *upper, *width).map(drop),
            QueryDescriptor::TwoWay { thresholds, width } => {
                TwoWayThreshold::new(thresholds[0], thresholds[1], *width).map(drop)
            }
            QueryDescriptor::Kde { center, bandwidth } => {
                GaussianKde::new(center, *bandwidth).map(drop)
            }
        }
    }

    /// Build the query this descriptor names.
    pub fn to_query(&self) -> Result<Box<dyn Query + Send + Sync>> {
        Ok(match self {
            QueryDescriptor::Threshold { threshold, width } => {
                Box::new(SoftThreshold::new(*threshold, *width)?)
            }
            QueryDescriptor::Interval {
                lower,
                upper,
                width,
            } => Box::new(SoftInterval::new(*lower, *upper, *width)?),
            QueryDescriptor::TwoWay { thresholds, width } => {
                Box::new(TwoWayThreshold::new(thresholds[0], thresholds[1], *width)?)
            }
            QueryDescriptor::Kde { center, bandwidth } => {
                Box::new(GaussianKde::new(center, *bandwidth)?)
            }
        })
    }
}

impl fmt::Display for QueryDescriptor {
    /// The canonical id.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.canonical_id())
    }
}

impl FromStr for QueryDescriptor {
    type Err = Error;

    /// Parse a canonical id (see [`canonical_id`](Self::canonical_id)); the
    /// keys must appear in the canonical order, any float syntax Rust
    /// parses is accepted for the numbers. The parameters are checked.
    fn from_str(id: &str) -> Result<Self> {
        const BAD: Error = Error::Parse {
            what: "query id",
            reason: "expected family:key=value;... as written by canonical_id",
        };
        let (family, params) = id.split_once(':').ok_or(BAD)?;
        let groups = params.split(';').count();
        let mut parts = params.split(';');
        let mut next = |key: &str| -> Result<&str> {
            let (k, v) = parts.next().ok_or(BAD)?.split_once('=').ok_or(BAD)?;
            if k == key {
                Ok(v)
            } else {
                Err(BAD)
            }
        };
        let num = |s: &str| -> Result<f64> {
            s.trim().parse::<f64>().map_err(|_| Error::Parse {
                what: "query id",
                reason: "a parameter is not a number",
            })
        };
        let q = match family {
            "threshold" => QueryDescriptor::Threshold {
                threshold: num(next("T")?)?,
                width: num(next("w")?)?,
            },
            "interval" => QueryDescriptor::Interval {
                lower: num(next("a")?)?,
                upper: num(next("b")?)?,
                width: num(next("w")?)?,
            },
            "two-way" => QueryDescriptor::TwoWay {
                thresholds: [num(next("T1")?)?, num(next("T2")?)?],
                width: num(next("w")?)?,
            },
            "kde" => QueryDescriptor::Kde {
                center: next("t")?
                    .split(',')
                    .map(num)
                    .collect::<Result<Vec<f64>>>()?,
                bandwidth: num(next("h")?)?,
            },
            _ => {
                return Err(Error::Parse {
                    what: "query id",
                    reason: "unknown query family (threshold, interval, two-way, kde)",
                })
            }
        };
        if groups != q.param_groups() {
            return Err(BAD);
        }
        q.check()?;
        Ok(q)
    }
}

impl QueryDescriptor {
    fn param_groups(&self) -> usize {
        match self {
            QueryDescriptor::Threshold { .. } | QueryDescriptor::Kde { .. } => 2,
            QueryDescriptor::Interval { .. } | QueryDescriptor::TwoWay { .. } => 3,
        }
    }
}

impl From<&SoftThreshold> for QueryDescriptor {
    fn from(q: &SoftThreshold) -> Self {
        QueryDescriptor::Threshold {
            threshold: q.threshold(),
            width: q.width(),
        }
    }
}

impl From<&SoftInterval> for QueryDescriptor {
    fn from(q: &SoftInterval) -> Self {
        QueryDescriptor::Interval {
            lower: q.lower(),
            upper: q.upper(),
            width: q.width(),
        }
    }
}

impl From<&TwoWayThreshold> for QueryDescriptor {
    fn from(q: &TwoWayThreshold) -> Self {
        QueryDescriptor::TwoWay {
            thresholds: q.thresholds(),
            width: q.width(),
        }
    }
}

impl From<&GaussianKde> for QueryDescriptor {
    fn from(q: &GaussianKde) -> Self {
        QueryDescriptor::Kde {
            center: q.center().to_vec(),
            bandwidth: q.bandwidth(),
        }
    }
}

// ---------------------------------------------------------------------------
// Mechanisms

/// Which mechanism produced a report (docs/MATH.md §4). Its ε is per unit distance
/// (geo-privacy) for every mechanism except [`Ldp`](MechanismName::Ldp).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum MechanismName {
    /// PolyPlace noise with smooth sensitivity; pure GP (δ = 0).
    Polyplace,
    /// Student's t noise with smooth sensitivity; pure GP (δ = 0).
    StudentT,
    /// Generalized Cauchy noise with smooth sensitivity; pure GP (δ = 0).
    Cauchy,
    /// Laplace noise with smooth sensitivity under linear growth;
    /// approximate GP, δ > 0.
    Laplace,
    /// Laplace noise scaled to the global Lipschitz constant (baseline);
    /// pure GP (δ = 0).
    GlobalLaplace,
    /// Noise added to the point itself, f evaluated on the noisy point
    /// (baseline); pure GP (δ = 0).
    APriori,
    /// Local differential privacy reference: f(x) + Laplace(range/ε). Its ε
    /// is a **local-DP ε** (any two inputs, whatever their distance), not a
    /// budget per unit distance, so it is policed separately
    /// ([`ValidationPolicy::allow_ldp`]); δ = 0.
    Ldp,
}

impl MechanismName {
    /// Every mechanism, in wire order.
    pub const ALL: [MechanismName; 7] = [
        MechanismName::Polyplace,
        MechanismName::StudentT,
        MechanismName::Cauchy,
        MechanismName::Laplace,
        MechanismName::GlobalLaplace,
        MechanismName::APriori,
        MechanismName::Ldp,
    ];

    /// The name used in JSON (kebab-case).
    pub fn as_str(self) -> &'static str {
        match self {
            MechanismName::Polyplace => "polyplace",
            MechanismName::StudentT => "student-t",
            MechanismName::Cauchy => "cauchy",
            MechanismName::Laplace => "laplace",
            MechanismName::GlobalLaplace => "global-laplace",
            MechanismName::APriori => "a-priori",
            MechanismName::Ldp => "ldp",
        }
    }

    /// Pure (δ = 0) mechanisms; only [`Laplace`](MechanismName::Laplace)
    /// is approximate.
    pub fn is_pure(self) -> bool {
        self != MechanismName::Laplace
    }

    /// Whether ε is a geo-privacy budget per unit distance (all but
    /// [`Ldp`](MechanismName::Ldp)).
    pub fn is_geo_private(self) -> bool {
        self != MechanismName::Ldp
    }
}

impl From<&Mechanism> for MechanismName {
    fn from(mechanism: &Mechanism) -> Self {
        match mechanism.name() {
            "polyplace" => MechanismName::Polyplace,
            "student-t" => MechanismName::StudentT,
            "cauchy" => MechanismName::Cauchy,
            "laplace" => MechanismName::Laplace,
            "global-laplace" => MechanismName::GlobalLaplace,
            "a-priori" => MechanismName::APriori,
            _ => MechanismName::Ldp,
        }
    }
}

impl fmt::Display for MechanismName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for MechanismName {
    type Err = Error;
    fn from_str(s: &str) -> Result<Self> {
        MechanismName::ALL
            .into_iter()
            .find(|m| m.as_str() == s)
            .ok_or(Error::Parse {
            what: "mechanism name",
            reason:
                "expected polyplace, student-t, cauchy, laplace, global-laplace, a-priori or ldp",
        })
    }
}

// ---------------------------------------------------------------------------
// Reports

/// One device's release for one query. See the [module docs](self) for the
/// encodings. There is deliberately no field for S(x) or the noise scale.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
#[non_exhaustive]
pub struct Report {
    /// Format version; [`FORMAT_VERSION`] for reports this crate writes.
    pub version: u16,
    /// The query answered.
    pub query: QueryDescriptor,
    /// The mechanism that produced `value`.
    pub mechanism: MechanismName,
    /// The mechanism's ε: per unit distance, or a local-DP ε for
    /// [`MechanismName::Ldp`].
    pub epsilon: f64,
    /// The mechanism's δ (0 for pure mechanisms).
    pub delta: f64,
    /// The released value f(x) + noise: unbiased for f(x).
    pub value: f64,
}

/// Just the version, to tell "newer format" from "malformed".
#[derive(Deserialize)]
struct VersionProbe {
    version: u16,
}

impl Report {
    /// A report in the current format version. Nothing is checked here; the
    /// server checks with [`ValidationPolicy::validate`].
    pub fn new(
        query: QueryDescriptor,
        mechanism: MechanismName,
        epsilon: f64,
        delta: f64,
        value: f64,
    ) -> Self {
        Report {
            version: FORMAT_VERSION,
            query,
            mechanism,
            epsilon,
            delta,
            value,
        }
    }

    /// What a device uploads: privatize f(x) with `mechanism` and wrap the
    /// released value with the query's public parameters and the
    /// mechanism's name, ε and δ. Nothing derived from x other than the
    /// release enters the report.
    pub fn release<Q, R>(mechanism: &Mechanism, query: &Q, x: &[f64], rng: &mut R) -> Result<Self>
    where
        Q: Query,
        for<'q> QueryDescriptor: From<&'q Q>,
        R: rand::Rng + ?Sized,
    {
        let value = mechanism.privatize(query, x, rng)?;
        Ok(Report::new(
            QueryDescriptor::from(query),
            MechanismName::from(mechanism),
            mechanism.epsilon(),
            mechanism.delta(),
            value,
        ))
    }

    /// [`Report::release`] charged to a device's privacy budget by
    /// sequential composition: if the budget cannot afford the mechanism's
    /// ε and δ, the release is refused with [`crate::Error::BudgetExceeded`]
    /// and nothing is computed; if the release fails nothing is charged.
    /// (Local-DP releases are charged in their own ε, which is on a
    /// different scale; keep a separate ledger for them.)
    pub fn release_within_budget<Q, R>(
        budget: &mut PrivacyBudget,
        mechanism: &Mechanism,
        query: &Q,
        x: &[f64],
        rng: &mut R,
    ) -> Result<Self>
    where
        Q: Query,
        for<'q> QueryDescriptor: From<&'q Q>,
        R: rand::Rng + ?Sized,
    {
        budget.spend(mechanism.epsilon(), mechanism.delta(), || {
            Report::release(mechanism, query, x, rng)
        })
    }

    /// One line of JSON, without the trailing newline. Non-finite numbers
    /// (which a valid report never holds) are written as `null`, which the
    /// decoder refuses.
    pub fn to_json_line(&self) -> String {
        // Cannot fail: no maps, no custom serializers; serde_json writes
        // non-finite floats as null.
        serde_json::to_string(self).unwrap_or_default()
    }

    /// Decode one JSON report (surrounding whitespace, e.g. the newline, is
    /// ignored). Refuses with a reason: empty input, syntax errors,
    /// truncation, missing or unknown fields, and versions other than
    /// [`FORMAT_VERSION`]. The content is not validated (see
    /// [`ValidationPolicy`]).
    pub fn from_json(line: &str) -> core::result::Result<Report, Rejection> {
        let line = line.trim();
        if line.is_empty() {
            return Err(Rejection::Empty);
        }
        match serde_json::from_str::<Report>(line) {
            Ok(r) if r.version != FORMAT_VERSION => {
                Err(Rejection::UnsupportedVersion { found: r.version })
            }
            Ok(r) => Ok(r),
            Err(e) => {
                if let Ok(p) = serde_json::from_str::<VersionProbe>(line) {
                    if p.version != FORMAT_VERSION {
                        return Err(Rejection::UnsupportedVersion { found: p.version });
                    }
                }
                Err(match e.classify() {
                    serde_json::error::Category::Eof => Rejection::Truncated {
                        detail: e.to_string(),
                    },
                    _ => Rejection::Malformed {
                        detail: e.to_string(),
                    },
                })
            }
        }
    }

    /// The compact binary (postcard) encoding.
    pub fn to_bytes(&self) -> Vec<u8> {
        // Cannot fail for this type when writing to a growable vector.
        postcard::to_allocvec(self).unwrap_or_default()
    }

    /// Decode one binary report; every byte must be used. Refuses with a
    /// reason: empty input, truncation, garbage, trailing bytes, and
    /// versions other than [`FORMAT_VERSION`] (checked before the rest is
    /// read). The content is not validated (see [`ValidationPolicy`]).
    pub fn from_bytes(bytes: &[u8]) -> core::result::Result<Report, Rejection> {
        if bytes.is_empty() {
            return Err(Rejection::Empty);
        }
        let (version, _) = postcard::take_from_bytes::<u16>(bytes).map_err(postcard_rejection)?;
        if version != FORMAT_VERSION {
            return Err(Rejection::UnsupportedVersion { found: version });
        }
        let (report, rest) =
            postcard::take_from_bytes::<Report>(bytes).map_err(postcard_rejection)?;
        if !rest.is_empty() {
            return Err(Rejection::TrailingBytes { count: rest.len() });
        }
        Ok(report)
    }

    /// One frame of a binary stream: COBS(postcard bytes) followed by `0x00`.
    pub fn to_frame(&self) -> Vec<u8> {
        let raw = self.to_bytes();
        let mut out = Vec::with_capacity(raw.len() + raw.len() / 254 + 2);
        cobs_encode(&raw, &mut out);
        out.push(0);
        out
    }

    /// Decode one frame (with or without its final `0x00`).
    pub fn from_frame(frame: &[u8]) -> core::result::Result<Report, Rejection> {
        let frame = frame.strip_suffix(&[0]).unwrap_or(frame);
        let mut scratch = Vec::new();
        decode_frame(frame, &mut scratch, false)
    }

    /// Write the JSON line and a newline.
    #[cfg(feature = "std")]
    pub fn write_json_line<W: std::io::Write>(&self, mut w: W) -> std::io::Result<()> {
        serde_json::to_writer(&mut w, self).map_err(std::io::Error::other)?;
        w.write_all(b"\n")
    }

    /// Write one binary frame.
    #[cfg(feature = "std")]
    pub fn write_frame<W: std::io::Write>(&self, mut w: W) -> std::io::Result<()> {
        w.write_all(&self.to_frame())
    }
}

fn postcard_rejection(e: postcard::Error) -> Rejection {
    match e {
        postcard::Error::DeserializeUnexpectedEnd => Rejection::Truncated {
            detail: e.to_string(),
        },
        _ => Rejection::Malformed {
            detail: e.to_string(),
        },
    }
}

/// COBS-encode `src` (no terminator) onto `out`.
fn cobs_encode(src: &[u8], out: &mut Vec<u8>) {
    let mut code_at = out.len();
    out.push(0);
    let mut code: u8 = 1;
    for &b in src {
        if b == 0 {
            out[code_at] = code;
            code_at = out.len();
            out.push(0);
            code = 1;
        } else {
            out.push(b);
            code += 1;
            if code == 0xff {
                out[code_at] = code;
                code_at = out.len();
                out.push(0);
                code = 1;
            }
        }
    }
    out[code_at] = code;
}

/// Decode one COBS frame given without its terminator and the report in
/// it. `zero_free` says the caller already knows the frame has no `0x00`.
///
/// In-place COBS decoding: the frame is copied once into `scratch`; each
/// block's code byte (after the first) sits exactly where the zero it
/// encodes belongs, so it is overwritten with 0 and the decoded bytes are
/// `scratch[1..w]`. Only blocks after a full 254-byte block (code `0xff`,
/// no implied zero) need their data moved.
pub(crate) fn decode_frame(
    frame: &[u8],
    scratch: &mut Vec<u8>,
    zero_free: bool,
) -> core::result::Result<Report, Rejection> {
    if frame.is_empty() {
        return Err(Rejection::Empty);
    }
    Report::from_bytes(cobs_decode(frame, scratch, zero_free)?)
}

/// The COBS layer of [`decode_frame`]: the decoded bytes, in `scratch`.
fn cobs_decode<'s>(
    frame: &[u8],
    scratch: &'s mut Vec<u8>,
    zero_free: bool,
) -> core::result::Result<&'s [u8], Rejection> {
    if !zero_free && frame.contains(&0) {
        return Err(Rejection::Malformed {
            detail: "zero byte inside a COBS frame".to_string(),
        });
    }
    scratch.clear();
    scratch.extend_from_slice(frame);
    let len = scratch.len();
    let (mut r, mut w) = (0usize, 1usize);
    let mut implied_zero = false;
    while r < len {
        let code = scratch[r] as usize;
        let end = r + code;
        if end > len {
            return Err(Rejection::Truncated {
                detail: "COBS block runs past the end of the frame".to_string(),
            });
        }
        if implied_zero {
            scratch[w] = 0;
            w += 1;
        }
        if w != r + 1 {
            scratch.copy_within(r + 1..end, w);
        }
        w += code - 1;
        implied_zero = code != 0xff;
        r = end;
    }
    Ok(&scratch[1..w])
}

/// Iterator over the frames of an in-memory binary stream (see [`frames`]).
#[derive(Debug)]
pub struct Frames<'a> {
    rest: &'a [u8],
    scratch: Vec<u8>,
}

/// Decode a binary stream held in memory: one item per `0x00`-terminated
/// frame, each a report or the rejection of that frame (the next frame is
/// read normally). Empty frames (repeated zeros) are skipped; bytes after the
/// last zero are one frame refused as [`Rejection::Truncated`].
pub fn frames(stream: &[u8]) -> Frames<'_> {
    Frames {
        rest: stream,
        scratch: Vec::new(),
    }
}

/// Index of the `0x00` that ends the frame at the start of `stream`.
/// Follows the COBS code bytes (a few jumps per frame), then confirms with a
/// fast zero search that no zero hides inside the blocks; if one does (a
/// corrupted frame), that zero is the end, so the reader resynchronizes.
fn frame_end(stream: &[u8]) -> Option<usize> {
    let mut r = 0;
    while let Some(&code) = stream.get(r) {
        if code == 0 {
            if !stream[..r].contains(&0) {
                return Some(r);
            }
            break;
        }
        r += code as usize;
    }
    stream.iter().position(|&b| b == 0)
}

impl Iterator for Frames<'_> {
    type Item = core::result::Result<Report, Rejection>;

    fn next(&mut self) -> Option<Self::Item> {
        loop {
            match self.rest.first() {
                None => return None,
                Some(0) => self.rest = &self.rest[1..],
                Some(_) => match frame_end(self.rest) {
                    Some(end) => {
                        let frame = &self.rest[..end];
                        self.rest = &self.rest[end + 1..];
                        return Some(decode_frame(frame, &mut self.scratch, true));
                    }
                    None => {
                        self.rest = &[];
                        return Some(Err(Rejection::Truncated {
                            detail: "stream ends inside a frame (no 0x00 terminator)".to_string(),
                        }));
                    }
                },
            }
        }
    }
}

/// Read a binary stream of frames: one item per frame; an I/O error is the
/// outer error, a bad frame the inner one (reading goes on after it).
#[cfg(feature = "std")]
pub fn read_frames<R: std::io::BufRead>(
    mut reader: R,
) -> impl Iterator<Item = std::io::Result<core::result::Result<Report, Rejection>>> {
    let mut buf = Vec::new();
    let mut scratch = Vec::new();
    core::iter::from_fn(move || loop {
        buf.clear();
        match reader.read_until(0, &mut buf) {
            Err(e) => return Some(Err(e)),
            Ok(0) => return None,
            Ok(_) => {
                let Some(frame) = buf.strip_suffix(&[0]) else {
                    return Some(Ok(Err(Rejection::Truncated {
                        detail: "stream ends inside a frame (no 0x00 terminator)".to_string(),
                    })));
                };
                if frame.is_empty() {
                    continue;
                }
                return Some(Ok(decode_frame(frame, &mut scratch, true)));
            }
        }
    })
}

/// Read JSON lines: one item per non-blank line; an I/O error is the outer
/// error, a bad line the inner one (reading goes on after it).
#[cfg(feature = "std")]
pub fn read_json_lines<R: std::io::BufRead>(
    reader: R,
) -> impl Iterator<Item = std::io::Result<core::result::Result<Report, Rejection>>> {
    reader.lines().filter_map(|line| match line {
        Err(e) => Some(Err(e)),
        Ok(l) if l.trim().is_empty() => None,
        Ok(l) => Some(Ok(Report::from_json(&l))),
    })
}

// ---------------------------------------------------------------------------
// Validation

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
        }
    }
}

impl fmt::Display for Rejection {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Rejection::Empty => write!(f, "empty report"),
            // Decoder details and ids quote client text: escaped and cut
            // (docs/MATH.md §10).
            Rejection::Truncated { detail } => write!(f, "truncated report: {}", Untrusted(detail)),
            Rejection::Malformed { detail } => write!(f, "malformed report: {}", Untrusted(detail)),
            Rejection::TrailingBytes { count } => {
                write!(f, "{count} unexpected byte(s) after the report")
            }
            Rejection::UnsupportedVersion { found } => write!(
                f,
                "report format version {found} is not supported (this server reads version {FORMAT_VERSION})"
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
        })
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
        if report.version != FORMAT_VERSION {
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

/// [`ValidationPolicy::validate`] as a free function.
pub fn validate(report: &Report, policy: &ValidationPolicy) -> core::result::Result<(), Rejection> {
    policy.validate(report)
}

#[cfg(test)]
mod tests {
    use super::*;
    use alloc::vec;

    fn threshold_report() -> Report {
        Report::new(
            QueryDescriptor::Threshold {
                threshold: 100_000.0,
                width: 20_000.0,
            },
            MechanismName::Polyplace,
            0.001,
            0.0,
            0.7315,
        )
    }

    #[test]
    fn json_shape_is_documented() {
        assert_eq!(
            threshold_report().to_json_line(),
            r#"{"version":1,"query":{"threshold":{"threshold":100000.0,"width":20000.0}},"mechanism":"polyplace","epsilon":0.001,"delta":0.0,"value":0.7315}"#
        );
        assert_eq!(threshold_report().to_bytes().len(), 43);
    }

    #[test]
    fn canonical_ids_round_trip() {
        let qs = [
            QueryDescriptor::Threshold {
                threshold: 100_000.0,
                width: 20_000.0,
            },
            QueryDescriptor::Interval {
                lower: -0.0,
                upper: 0.1 + 0.2,
                width: 1e-7,
            },
            QueryDescriptor::TwoWay {
                thresholds: [40_000.0, 1e22],
                width: 8000.5,
            },
            QueryDescriptor::Kde {
                center: vec![1200.5, -300.0, 7.0],
                bandwidth: 150.0,
            },
        ];
        assert_eq!(qs[0].canonical_id(), "threshold:T=100000;w=20000");
        assert_eq!(qs[3].canonical_id(), "kde:t=1200.5,-300,7;h=150");
        assert!(qs[1]
            .canonical_id()
            .starts_with("interval:a=0;b=0.30000000000000004;"));
        for q in &qs {
            let back: QueryDescriptor = q.canonical_id().parse().unwrap();
            assert_eq!(&back, q);
            assert_eq!(back.canonical_id(), q.canonical_id());
            assert_eq!(back.key(), q.key());
        }
        for bad in [
            "",
            "threshold",
            "threshold:T=1",
            "threshold:w=1;T=1",
            "threshold:T=1;w=1;x=2",
            "threshold:T=1;w=0",
            "circle:r=1",
            "kde:t=;h=1",
            "threshold:T=abc;w=1",
        ] {
            assert!(bad.parse::<QueryDescriptor>().is_err(), "{bad}");
        }
    }

    #[test]
    fn cobs_matches_postcard() {
        // Byte strings of every interesting length, with and without zeros
        // (runs of 254+ non-zero bytes exercise the 0xff blocks), wrapped as
        // postcard byte strings: encoding matches postcard, decoding inverts it.
        for len in [0usize, 1, 5, 252, 253, 254, 255, 300, 508, 600] {
            let data: Vec<u8> = (0..len).map(|i| (i % 7) as u8).collect();
            let data2: Vec<u8> = (0..len).map(|i| (i % 250) as u8 + 1).collect();
            for d in [data, data2] {
                let raw = postcard::to_allocvec(&d.as_slice()).unwrap();
                let mut mine = Vec::new();
                cobs_encode(&raw, &mut mine);
                let theirs = postcard::to_allocvec_cobs(&d.as_slice()).unwrap();
                assert_eq!(&theirs[..theirs.len() - 1], &mine[..], "len {len}");
                let mut scratch = Vec::new();
                assert_eq!(cobs_decode(&mine, &mut scratch, false).unwrap(), &raw[..]);
            }
        }
    }

    #[test]
    fn frames_match_postcard_cobs() {
        let r = threshold_report();
        let mut theirs = postcard::to_allocvec_cobs(&r).unwrap();
        assert_eq!(r.to_frame(), theirs);
        assert_eq!(postcard::from_bytes_cobs::<Report>(&mut theirs).unwrap(), r);
    }
}
