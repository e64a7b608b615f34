//! Reports: what a device uploads, in a versioned wire format, and the
//! server's validation of it.
//!
//! A [`Report`] carries the format version, the query (family and public
//! parameters, [`QueryDescriptor`]), the mechanism name,
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
//! [postcard](https://docs.rs/postcard) encoding of the same serde model,
//! binary version [`BINARY_VERSION`] (3): varint binary version, varint
//! query family index, its f64 parameters as 8 little-endian bytes each
//! (the KDE centre is prefixed by a varint length), varint mechanism
//! index, ε, δ and the value as 8-byte floats, the report id as an option
//! (`0x00`, or `0x01` and 16 bytes), the **mandatory** seeded byte (`0x00`
//! or `0x01`), then the CRC-16/IBM-3740 of all of those, 2 bytes
//! big-endian. A threshold report without id is 47 bytes, with one 63. The
//! version comes first so that a decoder can refuse a newer version before
//! reading the rest. Enum variant indices are part of the format: new
//! families and mechanisms are only ever appended.
//!
//! *No proper prefix of a binary report is a binary report*: every field
//! has its fixed place (postcard decodes a field's length from the bytes
//! before it), the seeded byte is always there, and the check comes last,
//! so a cut report runs out inside the body or inside the check and is
//! refused as [`Rejection::Truncated`](crate::server::Rejection::Truncated).
//! The check catches every single damaged byte (any burst of up to 16 bits)
//! and all but 2⁻¹⁶ of other damage, as `malformed`.
//!
//! *Legacy binary versions 1 and 2* (written before binary version 3: the
//! body without the seeded byte and check, then one optional `0x01` byte
//! for seeded reports) are still read, so devices in the field keep
//! working. For those frames alone a seeded report cut by its last byte
//! reads as the unseeded report with the same value and id; the default
//! policy, which refuses seeded reports, would count it. Writers only
//! write version 3.
//!
//! **Binary streams** ([`Report::to_frame`], [`frames`], and with `std`
//! `read_frames`/`write_frame`): each report's postcard bytes are
//! COBS-encoded (consistent overhead byte stuffing, as postcard's
//! `to_allocvec_cobs`) and followed by a single `0x00` byte. COBS output
//! never contains `0x00`, so the zero byte delimits frames unambiguously: a
//! reader splits on it, and after a corrupted or truncated frame it
//! resynchronizes at the next zero instead of losing the rest of the
//! stream (which a length prefix would). A cut frame decodes to a cut
//! report (COBS decodes a prefix to a prefix), so it is refused as well;
//! the stream readers also refuse bytes after the last `0x00`.
//!
//! **The seeded flag.** A report whose noise came from a seeded
//! (reproducible, not secure) generator says so: `"seeded": true` at the
//! end of the JSON object, the seeded byte in binary. In JSON an unseeded
//! report is written exactly as before the flag existed (the field is
//! absent, which means false), and the flag cannot be lost by a cut: a
//! JSON object ends with its closing brace, so a cut line is refused as
//! truncated, and the field is named, so no damage to one byte turns
//! `"seeded":true` into a valid unseeded report. A server that predates
//! the flag refuses seeded reports (unknown field, trailing byte; binary
//! version 3 as an unsupported version), which is the safe answer.
//!
//! # Validation
//!
//! A server decodes each report, then checks it against its
//! [`ValidationPolicy`](crate::ValidationPolicy): known version, finite value, valid and known query,
//! allowed mechanism, ε and δ within the policy. Every refusal is a
//! [`Rejection`](crate::Rejection) that says why (with a stable [`code`](crate::Rejection::code) for
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

use serde::{Deserialize, Serialize};

mod codec;
mod descriptor;
mod framing;
mod id;

pub use crate::mechanism::MechanismName;
pub use descriptor::QueryDescriptor;
pub(crate) use descriptor::QueryKey;
#[cfg(feature = "std")]
pub(crate) use framing::decode_frame;
pub use framing::{frames, Frames};
#[cfg(feature = "std")]
pub use framing::{read_frames, read_json_lines};
pub use id::ReportId;

/// The binary version this crate writes ([`Report::to_bytes`]): the varint
/// that starts every binary report. Binary version 3 carries a format
/// version 2 report ([`FORMAT_VERSION`], the `version` field and JSON's
/// `"version"` stay 2) in the checked layout: the seeded marker is a
/// mandatory byte and a CRC-16 ends the report, so no proper prefix of a
/// binary report is one, and a damaged byte is detected. Binary versions 1
/// and 2 (the report versions themselves, an optional trailing seeded
/// byte, no check) are still read.
///
/// ```
/// use geopriv::{report::BINARY_VERSION, MechanismName, QueryDescriptor, Report};
/// let q = QueryDescriptor::Threshold { threshold: 1e5, width: 2e4 };
/// let r = Report::new(q, MechanismName::Polyplace, 1e-3, 0.0, 0.73);
/// assert_eq!(r.to_bytes()[0] as u16, BINARY_VERSION);
/// assert_eq!(Report::from_bytes(&r.to_bytes()).unwrap().version, 2);
/// ```
pub const BINARY_VERSION: u16 = 3;

/// The version of the report format this crate writes. Version 2 added
/// the optional `report_id` (16 random bytes): in JSON a field, in the
/// binary form an option after the value (`0x00`, or `0x01` and the 16
/// bytes). Version 1 reports (no id) are still read ([`MIN_FORMAT_VERSION`]).
/// The binary form has its own version number ([`BINARY_VERSION`]).
pub const FORMAT_VERSION: u16 = 2;

/// The oldest report format version this crate reads.
pub const MIN_FORMAT_VERSION: u16 = 1;

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
    /// The report's random identity ([`ReportId`]), which a collector
    /// uses to count it once however often it is uploaded (format
    /// version 2; absent in version 1 reports). Written only when present.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub report_id: Option<ReportId>,
    /// The noise came from a seeded (reproducible, NOT secure) generator.
    /// In JSON written only when true (`"seeded":true`; absent means
    /// false, so reports written before the flag existed read as not
    /// seeded, and servers that predate it refuse seeded reports as an
    /// unknown field); in binary version 3 a mandatory byte (legacy binary
    /// versions: one optional trailing `0x01` byte).
    #[serde(default, skip_serializing_if = "is_false")]
    pub seeded: bool,
}

fn is_false(b: &bool) -> bool {
    !*b
}

impl Report {
    /// A report in the current format version. Nothing is checked here; the
    /// server checks with [`ValidationPolicy::validate`](crate::ValidationPolicy::validate).
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
            report_id: None,
            seeded: false,
        }
    }

    /// This report with `id` as its [`ReportId`].
    pub fn with_report_id(mut self, id: ReportId) -> Self {
        self.report_id = Some(id);
        self
    }

    /// This report with a fresh random [`ReportId`] drawn from `rng` (the
    /// noise's generator: secure by default, seeded in seeded runs).
    pub fn with_random_id<R: rand::RngCore + ?Sized>(self, rng: &mut R) -> Self {
        self.with_report_id(ReportId::random(rng))
    }

    /// This report with its `seeded` flag set to `seeded`.
    pub fn with_seeded(mut self, seeded: bool) -> Self {
        self.seeded = seeded;
        self
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::server::{Rejection, ValidationPolicy};

    pub(crate) fn threshold_report() -> Report {
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
            r#"{"version":2,"query":{"threshold":{"threshold":100000.0,"width":20000.0}},"mechanism":"polyplace","epsilon":0.001,"delta":0.0,"value":0.7315}"#
        );
        // Binary version 3: 44 bytes of body (the id option included), the
        // seeded byte and 2 check bytes.
        assert_eq!(threshold_report().to_bytes().len(), 47);
    }

    #[test]
    fn report_ids_travel_in_both_encodings_and_version_1_still_reads() {
        let id = ReportId([7; 16]);
        let r = threshold_report().with_report_id(id);
        let json = r.to_json_line();
        assert!(
            json.ends_with(r#","value":0.7315,"report_id":"07070707070707070707070707070707"}"#),
            "{json}"
        );
        assert_eq!(Report::from_json(&json).unwrap(), r);
        let bytes = r.to_bytes();
        assert_eq!(bytes.len(), 47 + 16);
        assert_eq!(Report::from_bytes(&bytes).unwrap(), r);
        let seeded = r.clone().with_seeded(true);
        assert_eq!(Report::from_bytes(&seeded.to_bytes()).unwrap(), seeded);
        assert_eq!(Report::from_frame(&seeded.to_frame()).unwrap(), seeded);
        // A version 1 report (written before ids existed) reads as one
        // without an id, in both encodings, and is still valid. Through
        // binary version 3 it comes back as version 2 without an id (the
        // same content; the JSON `version` is the only difference).
        let v1_json = r#"{"version":1,"query":{"threshold":{"threshold":100000.0,"width":20000.0}},"mechanism":"polyplace","epsilon":0.001,"delta":0.0,"value":0.7315}"#;
        let old = Report::from_json(v1_json).unwrap();
        assert_eq!((old.version, old.report_id), (1, None));
        assert_eq!(old.to_json_line(), v1_json);
        let old_bytes = old.to_bytes();
        assert_eq!((old_bytes[0], old_bytes.len()), (3, 47));
        assert_eq!(Report::from_bytes(&old_bytes).unwrap(), threshold_report());
        let policy = ValidationPolicy::new(1.0, 0.0).unwrap();
        assert_eq!(policy.validate(&old), Ok(()));
        assert_eq!(policy.validate(&r), Ok(()));
        // Bad ids are malformed reports.
        let bad = json.replace("07070707070707070707070707070707", "0707");
        assert!(matches!(
            Report::from_json(&bad),
            Err(Rejection::Malformed { .. })
        ));
        // A report version this crate does not read goes out under a
        // binary version it does not read either.
        let mut v3 = r.clone();
        v3.version = 3;
        assert_eq!(
            policy.validate(&v3),
            Err(Rejection::UnsupportedVersion { found: 3 })
        );
        assert!(matches!(
            Report::from_bytes(&v3.to_bytes()),
            Err(Rejection::UnsupportedVersion { found: 4 })
        ));
        v3.version = 0;
        assert!(matches!(
            Report::from_bytes(&v3.to_bytes()),
            Err(Rejection::UnsupportedVersion { found: 4 })
        ));
    }

    #[test]
    fn the_seeded_flag_is_optional_in_json_and_mandatory_in_binary() {
        let plain = threshold_report();
        let seeded = threshold_report().with_seeded(true);
        let json = seeded.to_json_line();
        assert!(
            json.ends_with(r#","value":0.7315,"seeded":true}"#),
            "{json}"
        );
        assert_eq!(Report::from_json(&json).unwrap(), seeded);
        // Absent = false (reports written before the flag existed).
        assert!(!Report::from_json(&plain.to_json_line()).unwrap().seeded);
        // A cut JSON line never loses the flag: it is refused.
        for n in 0..json.len() {
            assert!(Report::from_json(&json[..n]).is_err(), "{n}");
        }
        // Binary: the seeded byte is always there, before the check.
        let (b, p) = (seeded.to_bytes(), plain.to_bytes());
        assert_eq!(b.len(), 47);
        assert_eq!(b.len(), p.len());
        assert_eq!((b[44], p[44]), (1, 0));
        assert_eq!(b[..44], p[..44]);
        assert_eq!(Report::from_bytes(&b).unwrap(), seeded);
        assert_eq!(Report::from_frame(&seeded.to_frame()).unwrap(), seeded);
        let mut odd = plain.to_bytes();
        odd.push(0);
        assert!(matches!(
            Report::from_bytes(&odd),
            Err(Rejection::TrailingBytes { count: 1 })
        ));
        // Refused by default, accepted when told.
        let policy = ValidationPolicy::new(1.0, 0.0).unwrap();
        assert_eq!(policy.validate(&seeded), Err(Rejection::Seeded));
        assert_eq!(policy.validate(&plain), Ok(()));
        assert_eq!(
            ValidationPolicy::structural().validate(&seeded),
            Err(Rejection::Seeded)
        );
        assert_eq!(policy.accept_seeded().validate(&seeded), Ok(()));
    }
}
