//! [`QueryDescriptor`]: the public identity of a query (family and
//! parameters). It drives construction ([`QueryDescriptor::to_query`]),
//! the wire format (serde), display and parsing (the canonical id), the
//! server's grouping ([`QueryKey`]) and, through [`Query::descriptor`], the
//! device's reports.

use crate::error::{Error, Result};
use crate::query::{AnyQuery, GaussianKde, SoftInterval, SoftThreshold, TwoWayThreshold};
use alloc::format;
use alloc::string::{String, ToString};
use alloc::vec::Vec;
use core::fmt;
use core::str::FromStr;
use serde::{Deserialize, Serialize};

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
    /// `RegionQuery` (std): soft membership of a region, ramp `width`.
    /// The geometry is not on the wire: `digest` (64 lowercase hex digits,
    /// SHA-256 of the normalised geometry, docs/MATH.md §13.5) names it, so
    /// a server checks that reports answered its task. Build the query
    /// itself from the geometry (`RegionQuery::new`, GeoJSON).
    Region {
        /// SHA-256 of the normalised geometry, lowercase hex.
        digest: String,
        /// W.
        width: f64,
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
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) enum QueryKey {
    Threshold([u64; 2]),
    Interval([u64; 3]),
    TwoWay([u64; 3]),
    Kde(Vec<u64>),
    Region([u8; 32], u64),
}

/// The 32 bytes of a 64-digit lowercase hex digest.
fn parse_digest(hex: &str) -> Result<[u8; 32]> {
    const BAD: Error = Error::Parse {
        what: "region digest",
        reason: "expected 64 lowercase hex digits (SHA-256 of the normalised geometry)",
    };
    let b = hex.as_bytes();
    if b.len() != 64 {
        return Err(BAD);
    }
    let nib = |c: u8| match c {
        b'0'..=b'9' => Ok(c - b'0'),
        b'a'..=b'f' => Ok(c - b'a' + 10),
        _ => Err(BAD),
    };
    let mut out = [0u8; 32];
    for (i, o) in out.iter_mut().enumerate() {
        *o = (nib(b[2 * i])? << 4) | nib(b[2 * i + 1])?;
    }
    Ok(out)
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
            QueryDescriptor::Region { .. } => "region",
        }
    }

    /// A stable, human-readable id, equal for equal queries:
    ///
    /// * `threshold:T=100000;w=20000`
    /// * `interval:a=10000;b=50000;w=5000`
    /// * `two-way:T1=40000;T2=70000;w=8000`
    /// * `kde:t=1200.5,-300;h=150`
    /// * `region:g=<64 hex digits>;w=50`
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
            QueryDescriptor::Region { digest, width } => {
                format!("region:g={digest};w={}", canon(*width))
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
            // A malformed digest keys as zeros; `check` refuses it first.
            QueryDescriptor::Region { digest, width } => {
                QueryKey::Region(parse_digest(digest).unwrap_or([0; 32]), b(*width))
            }
        }
    }

    /// Check the parameters with the query's own constructor (the same
    /// rules as building the query on the device).
    pub fn check(&self) -> Result<()> {
        if let QueryDescriptor::Region { digest, width } = self {
            parse_digest(digest)?;
            return crate::error::query_width("width", *width).map(drop);
        }
        self.to_query().map(drop)
    }

    /// A query with the same global Lipschitz constant and value bounds as
    /// the one this descriptor names, for the server's clipping policy
    /// (which needs nothing else): the query itself, or for a region (whose
    /// geometry is not on the wire) the soft threshold of the same width W
    /// (global Lipschitz 1/W, values in [0, 1], docs/MATH.md §13).
    pub(crate) fn bounds_query(&self) -> Result<AnyQuery> {
        match self {
            QueryDescriptor::Region { width, .. } => {
                self.check()?;
                Ok(SoftThreshold::new(0.0, *width)?.into())
            }
            _ => self.to_query(),
        }
    }

    /// Build the query this descriptor names (its parameters checked by
    /// the family's constructor). A region descriptor names its geometry
    /// only by digest, so it cannot be built from it: that is an
    /// [`Error::InvalidRegion`] telling to build it from the geometry.
    pub fn to_query(&self) -> Result<AnyQuery> {
        Ok(match self {
            QueryDescriptor::Threshold { threshold, width } => {
                SoftThreshold::new(*threshold, *width)?.into()
            }
            QueryDescriptor::Interval {
                lower,
                upper,
                width,
            } => SoftInterval::new(*lower, *upper, *width)?.into(),
            QueryDescriptor::TwoWay { thresholds, width } => {
                TwoWayThreshold::new(thresholds[0], thresholds[1], *width)?.into()
            }
            QueryDescriptor::Kde { center, bandwidth } => {
                GaussianKde::new(center, *bandwidth)?.into()
            }
            QueryDescriptor::Region { .. } => {
                self.check()?;
                return Err(Error::InvalidRegion {
                    feature: self.canonical_id(),
                    reason: "the descriptor names the geometry only by its digest; build the query from the geometry (RegionQuery::new, or GeoJSON)".into(),
                });
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
            "region" => QueryDescriptor::Region {
                digest: next("g")?.to_string(),
                width: num(next("w")?)?,
            },
            _ => {
                return Err(Error::Parse {
                    what: "query id",
                    reason: "unknown query family (threshold, interval, two-way, kde, region)",
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
            QueryDescriptor::Threshold { .. }
            | QueryDescriptor::Kde { .. }
            | QueryDescriptor::Region { .. } => 2,
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

#[cfg(test)]
mod tests {
    use super::*;
    use alloc::vec;

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
            QueryDescriptor::Region {
                digest: "0123456789abcdef".repeat(4),
                width: 50.0,
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
            "region:g=abc;w=1",
            "region:g=00000000000000000000000000000000000000000000000000000000000000GG;w=1",
            "region:w=1;g=0000000000000000000000000000000000000000000000000000000000000000",
        ] {
            assert!(bad.parse::<QueryDescriptor>().is_err(), "{bad}");
        }
    }
}
