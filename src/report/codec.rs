//! The two encodings of one report: JSON lines and postcard bytes (see the
//! [module docs](super) for the layouts).

use super::{MechanismName, QueryDescriptor, Report, FORMAT_VERSION};
use crate::server::Rejection;
use alloc::string::{String, ToString};
use alloc::vec::Vec;
use serde::{Deserialize, Serialize};

/// The binary body of a report: every field but `seeded`, in wire order.
#[derive(Serialize)]
struct WireRef<'a> {
    version: u16,
    query: &'a QueryDescriptor,
    mechanism: MechanismName,
    epsilon: f64,
    delta: f64,
    value: f64,
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
        let wire = WireRef {
            version: self.version,
            query: &self.query,
            mechanism: self.mechanism,
            epsilon: self.epsilon,
            delta: self.delta,
            value: self.value,
        };
        // Cannot fail for this type when writing to a growable vector.
        let mut bytes = postcard::to_allocvec(&wire).unwrap_or_default();
        if self.seeded {
            bytes.push(1);
        }
        bytes
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
        let (w, rest) = postcard::take_from_bytes::<Wire>(bytes).map_err(postcard_rejection)?;
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
