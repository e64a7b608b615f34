//! The two encodings of one report: JSON lines and postcard bytes (see the
//! [module docs](super) for the layouts).

use super::{MechanismName, QueryDescriptor, Report, ReportId, FORMAT_VERSION, MIN_FORMAT_VERSION};
use crate::server::Rejection;
use alloc::string::{String, ToString};
use alloc::vec::Vec;
use serde::{Deserialize, Serialize};

/// The binary body of a version 1 report: every field but `seeded` and
/// `report_id`, in wire order.
#[derive(Serialize)]
struct WireRef<'a> {
    version: u16,
    query: &'a QueryDescriptor,
    mechanism: MechanismName,
    epsilon: f64,
    delta: f64,
    value: f64,
}

/// The binary body of a version 2 report: version 1's, then the optional id.
#[derive(Serialize)]
struct WireRef2<'a> {
    version: u16,
    query: &'a QueryDescriptor,
    mechanism: MechanismName,
    epsilon: f64,
    delta: f64,
    value: f64,
    report_id: Option<ReportId>,
}

/// [`WireRef`], owned, for decoding.
#[derive(Deserialize)]
struct Wire {
    version: u16,
    query: QueryDescriptor,
    mechanism: MechanismName,
    epsilon: f64,
    delta: f64,
    value: f64,
}

/// [`WireRef2`], owned, for decoding.
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

/// Whether this crate reads format `version`.
fn readable(version: u16) -> bool {
    (MIN_FORMAT_VERSION..=FORMAT_VERSION).contains(&version)
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
    /// [`ValidationPolicy`]).
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

    /// The compact binary (postcard) encoding, in the layout of the
    /// report's `version`: a version 1 report without an id is written as
    /// version 1 wrote it; any other report in the version 2 layout (with
    /// its version field, so a decoder refuses versions it does not read).
    pub fn to_bytes(&self) -> Vec<u8> {
        // Neither can fail for these types when writing to a growable vector.
        let mut bytes = if self.version == 1 && self.report_id.is_none() {
            postcard::to_allocvec(&WireRef {
                version: 1,
                query: &self.query,
                mechanism: self.mechanism,
                epsilon: self.epsilon,
                delta: self.delta,
                value: self.value,
            })
        } else {
            postcard::to_allocvec(&WireRef2 {
                version: self.version.max(2),
                query: &self.query,
                mechanism: self.mechanism,
                epsilon: self.epsilon,
                delta: self.delta,
                value: self.value,
                report_id: self.report_id,
            })
        }
        .unwrap_or_default();
        if self.seeded {
            bytes.push(1);
        }
        bytes
    }

    /// Decode one binary report; every byte must be used. Refuses with a
    /// reason: empty input, truncation, garbage, trailing bytes, and
    /// versions this crate does not read (checked before the rest is
    /// read). The content is not validated (see [`ValidationPolicy`]).
    pub fn from_bytes(bytes: &[u8]) -> core::result::Result<Report, Rejection> {
        if bytes.is_empty() {
            return Err(Rejection::Empty);
        }
        let (version, _) = postcard::take_from_bytes::<u16>(bytes).map_err(postcard_rejection)?;
        if !readable(version) {
            return Err(Rejection::UnsupportedVersion { found: version });
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
