//! The two encodings of one report: JSON lines and postcard bytes (see the
//! [module docs](super) for the layouts).

use super::{
    MechanismName, QueryDescriptor, Report, ReportId, BINARY_VERSION, FORMAT_VERSION,
    MIN_FORMAT_VERSION,
};
use crate::server::Rejection;
use alloc::string::{String, ToString};
use alloc::vec::Vec;
use serde::{Deserialize, Serialize};

/// The body of a legacy binary version 1 report: every field but
/// `seeded` and `report_id`, in wire order (decoding only).
#[derive(Deserialize)]
struct Wire {
    version: u16,
    query: QueryDescriptor,
    mechanism: MechanismName,
    epsilon: f64,
    delta: f64,
    value: f64,
}

/// The body of a legacy binary version 2 report: version 1's, then the
/// optional id (decoding only).
#[derive(Deserialize)]
struct Wire2 {
    version: u16,
    query: QueryDescriptor,
    mechanism: MechanismName,
    epsilon: f64,
    delta: f64,
    value: f64,
    report_id: Option<ReportId>,
}

/// The body of a binary version 3 report: version 2's fields, then the
/// **mandatory** seeded marker (postcard `bool`: one byte, `0x00` or
/// `0x01`). The [`crc16`] of the body follows it on the wire.
#[derive(Serialize)]
struct WireRef3<'a> {
    version: u16,
    query: &'a QueryDescriptor,
    mechanism: MechanismName,
    epsilon: f64,
    delta: f64,
    value: f64,
    report_id: Option<ReportId>,
    seeded: bool,
}

impl<'a> WireRef3<'a> {
    /// The body of `report` under binary `version`: what
    /// [`Report::to_bytes`] writes before the check, and the length a
    /// decoded body must have to be canonical.
    fn of(report: &'a Report, version: u16) -> Self {
        WireRef3 {
            version,
            query: &report.query,
            mechanism: report.mechanism,
            epsilon: report.epsilon,
            delta: report.delta,
            value: report.value,
            report_id: report.report_id,
            seeded: report.seeded,
        }
    }
}

/// [`WireRef3`], owned, for decoding.
#[derive(Deserialize)]
struct Wire3 {
    #[allow(dead_code)] // read and checked before the body
    version: u16,
    query: QueryDescriptor,
    mechanism: MechanismName,
    epsilon: f64,
    delta: f64,
    value: f64,
    report_id: Option<ReportId>,
    seeded: bool,
}

/// Bytes of the check that ends a binary version 3 report.
const CHECK_BYTES: usize = 2;

/// CRC-16/IBM-3740 ("CCITT-FALSE": polynomial 0x1021, initial value
/// 0xFFFF, not reflected, no final xor). Its generator has degree 16 and a
/// constant term, so it detects every error burst of at most 16 bits (in
/// particular any damage to one byte, the check included) and all but
/// 2⁻¹⁶ of other damage.
///
/// Slicing by 8: with `T_k[x]` the register after the byte `x` and `k`
/// zero bytes (from 0), eight bytes `b_0..b_7` (the register xored into
/// `b_0 b_1`) give `T_7[b_0] ^ T_6[b_1] ^ ... ^ T_0[b_7]`: eight
/// independent table loads instead of a chain of eight, which is what
/// decoding a report mostly waits on. The rest is byte by byte (`T_0`).
///
/// Not the `crc` crate (`crc::CRC_16_IBM_3740`): its fast table is sliced
/// by 16 and leaves up to 15 bytes of a 45–61-byte body to its byte-wise
/// chain, and `Report::from_bytes` of 10⁶ reports took 56–64 ms with it
/// against 46–48 ms with this (criterion, branch tidy12, BENCHMARKS.md);
/// its slice-by-1 table is the byte-wise chain this replaced.
///
/// `crc16(b"123456789") == 0x29B1` (the catalogue's check value).
fn crc16(bytes: &[u8]) -> u16 {
    let t = &CRC16_TABLES;
    let mut chunks = bytes.chunks_exact(8);
    let mut crc: u16 = 0xFFFF;
    for c in &mut chunks {
        let [hi, lo] = crc.to_be_bytes();
        crc = t[7][(c[0] ^ hi) as usize]
            ^ t[6][(c[1] ^ lo) as usize]
            ^ t[5][c[2] as usize]
            ^ t[4][c[3] as usize]
            ^ t[3][c[4] as usize]
            ^ t[2][c[5] as usize]
            ^ t[1][c[6] as usize]
            ^ t[0][c[7] as usize];
    }
    chunks.remainder().iter().fold(crc, |crc, &b| {
        (crc << 8) ^ t[0][((crc >> 8) as u8 ^ b) as usize]
    })
}

/// `CRC16_TABLES[k][x]`: the CRC register (from 0) after the byte `x`
/// followed by `k` zero bytes, polynomial 0x1021 (computed at compile
/// time; 4 KiB).
const CRC16_TABLES: [[u16; 256]; 8] = {
    let mut t = [[0u16; 256]; 8];
    let mut i = 0;
    while i < 256 {
        let mut crc = (i as u16) << 8;
        let mut bit = 0;
        while bit < 8 {
            crc = if crc & 0x8000 != 0 {
                (crc << 1) ^ 0x1021
            } else {
                crc << 1
            };
            bit += 1;
        }
        t[0][i] = crc;
        i += 1;
    }
    let mut k = 1;
    while k < 8 {
        let mut i = 0;
        while i < 256 {
            let prev = t[k - 1][i];
            t[k][i] = (prev << 8) ^ t[0][(prev >> 8) as usize];
            i += 1;
        }
        k += 1;
    }
    t
};

/// Whether this crate reads format `version` (a report's, or a JSON line's).
fn readable(version: u16) -> bool {
    (MIN_FORMAT_VERSION..=FORMAT_VERSION).contains(&version)
}

/// Whether this crate reads binary version `version`: the legacy layouts
/// 1 and 2 (optional trailing seeded byte, no check) and the checked
/// layout [`BINARY_VERSION`].
fn readable_binary(version: u16) -> bool {
    (MIN_FORMAT_VERSION..=BINARY_VERSION).contains(&version)
}

/// Just the version, to tell "newer format" from "malformed".
#[derive(Deserialize)]
struct VersionProbe {
    version: u16,
}

impl Report {
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
    /// truncation, missing or unknown fields, and versions outside
    /// [`MIN_FORMAT_VERSION`]..=[`FORMAT_VERSION`]. The content is not validated (see
    /// [`ValidationPolicy`](crate::ValidationPolicy)).
    pub fn from_json(line: &str) -> core::result::Result<Report, Rejection> {
        let line = line.trim();
        if line.is_empty() {
            return Err(Rejection::Empty);
        }
        match serde_json::from_str::<Report>(line) {
            Ok(r) if !readable(r.version) => {
                Err(Rejection::UnsupportedVersion { found: r.version })
            }
            Ok(r) => Ok(r),
            Err(e) => {
                if let Ok(p) = serde_json::from_str::<VersionProbe>(line) {
                    if !readable(p.version) {
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

    /// The compact binary (postcard) encoding, binary version
    /// [`BINARY_VERSION`] (3): the varint `3`, the version 2 fields (query,
    /// mechanism, ε, δ, value, optional report id), the **mandatory**
    /// seeded byte (`0x00` or `0x01`), then the CRC-16 of all of that (2
    /// bytes, big-endian). Every field has its place and the check comes
    /// last, so no proper prefix of an encoding is an encoding (a cut is
    /// refused as [`Rejection::Truncated`]), and any damaged byte is caught
    /// by the check. Reports of format version 1 and 2 are both written
    /// this way (a version 1 report has no id, and reads back as version 2
    /// without one: the same report). A report whose `version` this crate
    /// does not read is written under a binary version above 3, so every
    /// decoder refuses it as unsupported.
    ///
    /// ```
    /// use geopriv::{MechanismName, QueryDescriptor, Report};
    /// let q = QueryDescriptor::Threshold { threshold: 1e5, width: 2e4 };
    /// let r = Report::new(q, MechanismName::Polyplace, 1e-3, 0.0, 0.73).with_seeded(true);
    /// let bytes = r.to_bytes();
    /// assert_eq!((bytes[0], bytes.len()), (3, 47));
    /// assert_eq!(Report::from_bytes(&bytes).unwrap(), r);
    /// // Cut anywhere, it is refused (the 46-byte prefix is not an unseeded report).
    /// assert!((0..bytes.len()).all(|n| Report::from_bytes(&bytes[..n]).is_err()));
    /// ```
    pub fn to_bytes(&self) -> Vec<u8> {
        let version = if readable(self.version) {
            BINARY_VERSION
        } else {
            self.version.saturating_add(1).max(BINARY_VERSION + 1)
        };
        // Cannot fail for these types when writing to a growable vector.
        let mut bytes = postcard::to_allocvec(&WireRef3::of(self, version)).unwrap_or_default();
        let check = crc16(&bytes);
        bytes.extend_from_slice(&check.to_be_bytes());
        bytes
    }

    /// Decode one binary report; every byte must be used. Refuses with a
    /// reason: empty input, truncation (every proper prefix of a version 3
    /// encoding), garbage, a failed check (a damaged byte: `malformed`),
    /// trailing bytes, and binary versions this crate does not read
    /// (checked before the rest is read; [`Rejection::UnsupportedVersion`]
    /// then carries the binary version). The content is not validated (see
    /// [`ValidationPolicy`](crate::ValidationPolicy)).
    ///
    /// **Legacy binary versions 1 and 2** (written by geopriv before binary
    /// version 3, by devices still in the field) are read as before:
    /// the body, then an optional `0x01` seeded byte. For them alone a
    /// seeded report cut by its last byte still reads as an unseeded one
    /// (README, "Report format"): refusing them would drop every report of
    /// the devices that write them.
    pub fn from_bytes(bytes: &[u8]) -> core::result::Result<Report, Rejection> {
        if bytes.is_empty() {
            return Err(Rejection::Empty);
        }
        let (version, _) = postcard::take_from_bytes::<u16>(bytes).map_err(postcard_rejection)?;
        if !readable_binary(version) {
            return Err(Rejection::UnsupportedVersion { found: version });
        }
        if version == BINARY_VERSION {
            return from_checked_bytes(bytes);
        }
        let (w, rest) = if version == 1 {
            let (w, rest) = postcard::take_from_bytes::<Wire>(bytes).map_err(postcard_rejection)?;
            let w = Wire2 {
                version: w.version,
                query: w.query,
                mechanism: w.mechanism,
                epsilon: w.epsilon,
                delta: w.delta,
                value: w.value,
                report_id: None,
            };
            (w, rest)
        } else {
            postcard::take_from_bytes::<Wire2>(bytes).map_err(postcard_rejection)?
        };
        let seeded = match rest {
            [] => false,
            [1] => true,
            _ => return Err(Rejection::TrailingBytes { count: rest.len() }),
        };
        Ok(Report {
            version: w.version,
            query: w.query,
            mechanism: w.mechanism,
            epsilon: w.epsilon,
            delta: w.delta,
            value: w.value,
            report_id: w.report_id,
            seeded,
        })
    }

    /// Write the JSON line and a newline.
    #[cfg(feature = "std")]
    pub fn write_json_line<W: std::io::Write>(&self, mut w: W) -> std::io::Result<()> {
        serde_json::to_writer(&mut w, self).map_err(std::io::Error::other)?;
        w.write_all(b"\n")
    }
}

/// Decode a binary version 3 report (`bytes` starts with the varint 3):
/// the body, then exactly [`CHECK_BYTES`] bytes that must be its CRC-16.
/// The body's fields all have their place, so a proper prefix either ends
/// inside the body or inside the check: [`Rejection::Truncated`] either way.
fn from_checked_bytes(bytes: &[u8]) -> core::result::Result<Report, Rejection> {
    let (w, rest) = postcard::take_from_bytes::<Wire3>(bytes).map_err(postcard_rejection)?;
    if rest.len() < CHECK_BYTES {
        return Err(Rejection::Truncated {
            detail: "the report ends inside its check bytes".to_string(),
        });
    }
    if rest.len() > CHECK_BYTES {
        return Err(Rejection::TrailingBytes {
            count: rest.len() - CHECK_BYTES,
        });
    }
    let body = &bytes[..bytes.len() - CHECK_BYTES];
    if crc16(body).to_be_bytes() != rest {
        return Err(Rejection::Malformed {
            detail: "check bytes do not match (a damaged report)".to_string(),
        });
    }
    // One byte form per report: postcard also reads padded varints (the
    // version as `0x83 0x00`), which are longer than the shortest form
    // `to_bytes` writes, so a body of another length is not canonical
    // (docs/ATTACK-8.md O1).
    let report = Report {
        version: FORMAT_VERSION,
        query: w.query,
        mechanism: w.mechanism,
        epsilon: w.epsilon,
        delta: w.delta,
        value: w.value,
        report_id: w.report_id,
        seeded: w.seeded,
    };
    let canonical = postcard::experimental::serialized_size(&WireRef3::of(&report, BINARY_VERSION));
    if canonical != Ok(body.len()) {
        return Err(Rejection::Malformed {
            detail: "not the canonical encoding (a padded number)".to_string(),
        });
    }
    Ok(report)
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

/// The binary report oracles shared with the integration tests.
#[cfg(test)]
#[path = "../../tests/common/wire.rs"]
pub(super) mod wire_oracles;

#[cfg(test)]
mod tests {
    use super::*;

    /// A padded varint (the version `3` as `0x83 0x00`, or the query's
    /// tag padded) with its check recomputed decodes to the same report in
    /// postcard, and is refused: one byte form per report (attack8 O1).
    #[test]
    fn padded_encodings_are_refused() {
        let r = crate::report::tests::threshold_report().with_report_id(crate::ReportId([7; 16]));
        let bytes = r.to_bytes();
        assert_eq!(Report::from_bytes(&bytes).unwrap(), r);
        let body = &bytes[..bytes.len() - CHECK_BYTES];
        for at in [0usize, 1] {
            let mut padded = body.to_vec();
            padded[at] |= 0x80;
            padded.insert(at + 1, 0x00);
            let check = crc16(&padded);
            padded.extend_from_slice(&check.to_be_bytes());
            let err = Report::from_bytes(&padded).unwrap_err();
            assert_eq!(err.code(), "malformed", "padded at {at}: {err}");
        }
    }

    #[test]
    fn crc16_is_ibm_3740() {
        // The catalogue's check value, and the bit-by-bit definition.
        assert_eq!(crc16(b"123456789"), 0x29B1);
        assert_eq!(crc16(b""), 0xFFFF);
        let slow = super::wire_oracles::crc16_bitwise;
        let data: Vec<u8> = (0..300u32).map(|i| (i * 37 % 251) as u8).collect();
        for n in 0..data.len() {
            assert_eq!(crc16(&data[..n]), slow(&data[..n]), "{n}");
        }
    }

    #[test]
    fn every_single_damaged_byte_of_a_checked_report_is_refused() {
        let r = crate::report::tests::threshold_report()
            .with_report_id(ReportId([0xA5; 16]))
            .with_seeded(true);
        let good = r.to_bytes();
        assert!(Report::from_bytes(&good).is_ok());
        for pos in 0..good.len() {
            for x in 1..=255u8 {
                let mut b = good.clone();
                b[pos] ^= x;
                assert!(Report::from_bytes(&b).is_err(), "byte {pos} ^ {x:#x}");
            }
        }
    }
}

#[cfg(test)]
mod legacy_tests {
    use super::*;
    use crate::report::tests::threshold_report;

    /// The shared oracle (tests/common/wire.rs).
    use super::wire_oracles::legacy_v2_bytes as legacy_v2;

    #[test]
    fn legacy_versions_are_read_with_their_known_hole() {
        let r = threshold_report().with_report_id(ReportId([7; 16]));
        let seeded = r.clone().with_seeded(true);
        let (plain_b, seeded_b) = (legacy_v2(&r), legacy_v2(&seeded));
        assert_eq!((plain_b.len(), seeded_b.len()), (60, 61));
        assert_eq!(Report::from_bytes(&plain_b).unwrap(), r);
        assert_eq!(Report::from_bytes(&seeded_b).unwrap(), seeded);
        // attack7 O3, kept for legacy frames by choice (README): the
        // seeded legacy report cut by its last byte is the unseeded one.
        assert_eq!(Report::from_bytes(&seeded_b[..60]).unwrap(), r);
        // Version 1 (no id field at all).
        let v1 = postcard::to_allocvec(&(1u16, &r.query, r.mechanism, r.epsilon, r.delta, r.value))
            .unwrap();
        let old = Report::from_bytes(&v1).unwrap();
        assert_eq!((old.version, old.report_id, old.seeded), (1, None, false));
        // Writers never write a legacy version.
        assert_eq!(r.to_bytes()[0] as u16, BINARY_VERSION);
        assert_eq!(old.to_bytes()[0] as u16, BINARY_VERSION);
    }
}
