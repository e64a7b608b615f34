//! The one error type of the crate. Every fallible public function returns
//! [`Result<T>`]; each variant names what was wrong so a caller (or a user
//! reading a log line) can fix it.

use core::fmt;

/// Result alias used throughout the crate.
pub type Result<T> = core::result::Result<T, Error>;

/// What went wrong. Variants carry the parameter name and the offending
/// value; the `Display` text is meant for end users and log lines.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum Error {
    /// A parameter is NaN, infinite or outside its allowed range.
    InvalidParameter {
        /// Name of the parameter, e.g. `"width"` or `"epsilon"`.
        name: &'static str,
        /// The value that was passed.
        value: f64,
        /// What the parameter must satisfy, e.g. `"finite and > 0"`.
        requirement: &'static str,
    },
    /// A coordinate of a point is NaN or infinite.
    NonFinitePoint {
        /// Index of the offending coordinate.
        coordinate: usize,
        /// The value found there.
        value: f64,
    },
    /// A point has the wrong number of coordinates for the query.
    DimensionMismatch {
        /// Dimension the query works in.
        expected: usize,
        /// Number of coordinates supplied.
        found: usize,
    },
    /// A release was refused because it would exceed the privacy budget.
    BudgetExceeded {
        /// ε that the release needs.
        requested_epsilon: f64,
        /// ε still available.
        remaining_epsilon: f64,
        /// δ that the release needs.
        requested_delta: f64,
        /// δ still available.
        remaining_delta: f64,
    },
    /// A report or other encoded record could not be decoded or is invalid.
    InvalidReport {
        /// Why it was rejected.
        reason: &'static str,
    },
    /// A textual name or id (a query's canonical id, a mechanism name)
    /// could not be parsed.
    Parse {
        /// What was being parsed, e.g. `"query id"`.
        what: &'static str,
        /// What was expected.
        reason: &'static str,
    },
    /// A dataset (central model) is empty or holds a record outside the
    /// public domain (a NaN, a value below 0 or above Λ), or a candidate set
    /// is empty.
    InvalidData {
        /// Index of the offending record (0 for an empty dataset).
        index: usize,
        /// The offending value (NaN for an empty dataset).
        value: f64,
        /// What the data must satisfy.
        reason: &'static str,
    },
    /// A numerical routine could not certify its result (never expected;
    /// reported instead of returning an unverified number).
    Numerical {
        /// Which routine failed.
        routine: &'static str,
    },
    /// A charge in one unit was offered to a ledger of another (a local-DP
    /// ε to a per-metre ledger, a per-dollar ε to a per-metre ledger), or a
    /// geo-private mechanism was released through a metered path without
    /// saying the unit of its ε (`charge` is then `None`). Nothing was
    /// released or charged. See `docs/MATH.md §8.3`.
    UnitMismatch {
        /// The ledger's unit.
        ledger: crate::device::budget::BudgetUnit,
        /// The unit of the charge, if stated.
        charge: Option<crate::device::budget::BudgetUnit>,
    },
    /// A stored ledger disagrees with the policy the app pinned (another
    /// unit, other totals): it was edited, or belongs to another policy.
    /// Refused rather than silently adopted or reset.
    LedgerPolicyMismatch {
        /// Which part of the policy differs: `"unit"`, `"total_epsilon"` or
        /// `"total_delta"`.
        field: &'static str,
        /// The pinned value, as text.
        pinned: alloc::string::String,
        /// The stored value, as text.
        stored: alloc::string::String,
    },
    /// A stored ledger state is not a state this crate can have written:
    /// unreadable, a NaN, spent above the total, spent reset while the
    /// release counter says releases happened, or spent below what this
    /// process already charged.
    InvalidLedgerState {
        /// What is wrong.
        reason: alloc::string::String,
    },
    /// The ledger could not be read or written durably (a file-backed
    /// ledger). When this is the answer to a release, nothing was released.
    LedgerIo {
        /// The operation and the operating system's message.
        detail: alloc::string::String,
    },
    /// [`FileLedger::spend_to_outbox`](crate::device::budget::FileLedger::spend_to_outbox)
    /// charged the release and queued its report in the outbox (one
    /// durable write), then the platform monotonic counter could not be
    /// advanced (attack12 O3): the report **will be uploaded** with the
    /// outbox; releasing again releases (and charges) a second report.
    CounterNotAdvanced {
        /// The queued report's outbox id.
        id: u64,
        /// Why the counter did not advance.
        detail: alloc::string::String,
    },
    /// Another process held the ledger file's lock longer than the
    /// ledger's timeout: nothing was charged or released; try again later.
    LedgerBusy {
        /// The ledger file.
        path: alloc::string::String,
        /// How long this process waited, in milliseconds.
        waited_ms: u64,
    },
    /// A release whose value, noise scale or release grid would not be a
    /// finite normal number (e.g. ε = 1e-300 makes the scale overflow).
    /// Refused before anything is charged.
    NonFiniteRelease {
        /// `"value"`, `"scale"` or `"grid"`.
        what: &'static str,
        /// The offending number.
        value: f64,
    },
    /// A size that depends on the input (grid cells, distinct queries,
    /// record bytes, audit pairs) is above its configured limit; refused
    /// before anything is allocated (docs/MATH.md §10).
    LimitExceeded {
        /// What was being sized, e.g. `"grid cells"`.
        what: &'static str,
        /// The size asked for (saturated at `u64::MAX`).
        requested: u64,
        /// The largest size allowed.
        limit: u64,
    },
    /// A counter or an exact sum would leave its range (e.g. a report
    /// count at `u64::MAX`, or a merge beyond the exact sum's capacity);
    /// the state is left unchanged.
    Overflow {
        /// Which counter or sum.
        what: &'static str,
    },
    /// The privacy audit cannot give a meaningful answer for these inputs
    /// (distances that overflow or that floating point cannot resolve,
    /// densities that underflow so nothing would be compared).
    Unauditable {
        /// Why.
        reason: &'static str,
    },
    /// A region's geometry (or the GeoJSON it came from) is unusable:
    /// not found, not a polygon, not closed, self-intersecting, with a
    /// non-finite coordinate or too many vertices. `feature` names it (a
    /// GeoJSON feature id or property, untrusted: displayed escaped).
    InvalidRegion {
        /// The feature's id or name as given (untrusted text).
        feature: alloc::string::String,
        /// What is wrong.
        reason: alloc::string::String,
    },
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::InvalidParameter {
                name,
                value,
                requirement,
            } => write!(
                f,
                "invalid parameter `{name}` = {}: must be {requirement}",
                ShortNumber(*value)
            ),
            Error::NonFinitePoint { coordinate, value } => write!(
                f,
                "point coordinate {coordinate} is {}: coordinates must be finite",
                ShortNumber(*value)
            ),
            Error::DimensionMismatch { expected, found } => write!(
                f,
                "point has {found} coordinate(s) but the query needs {expected}"
            ),
            Error::BudgetExceeded {
                requested_epsilon,
                remaining_epsilon,
                requested_delta,
                remaining_delta,
            } => write!(
                f,
                "privacy budget exceeded: release needs epsilon {requested_epsilon:e} and delta {requested_delta:e}, \
                 but only epsilon {remaining_epsilon:e} and delta {remaining_delta:e} remain"
            ),
            Error::InvalidReport { reason } => write!(f, "invalid report: {reason}"),
            Error::Parse { what, reason } => write!(f, "cannot parse {what}: {reason}"),
            Error::InvalidData {
                index,
                value,
                reason,
            } => write!(
                f,
                "invalid data: record {index} = {}: {reason}",
                ShortNumber(*value)
            ),
            Error::Numerical { routine } => {
                write!(f, "numerical routine `{routine}` could not certify its result")
            }
            Error::UnitMismatch {
                ledger,
                charge: Some(charge),
            } => write!(
                f,
                "unit mismatch: a charge of epsilon {charge} cannot be paid from a ledger {ledger}; \
                 keep one ledger per unit"
            ),
            Error::UnitMismatch {
                ledger,
                charge: None,
            } => write!(
                f,
                "the unit of the mechanism's epsilon is not stated (use with_unit); the ledger counts epsilon {ledger}"
            ),
            Error::LedgerPolicyMismatch {
                field,
                pinned,
                stored,
            } => write!(
                f,
                "stored ledger refused: its {field} is {stored} but the app's pinned policy says {pinned}"
            ),
            Error::InvalidLedgerState { reason } => {
                write!(f, "stored ledger refused: {reason}")
            }
            Error::LedgerIo { detail } => {
                write!(f, "ledger I/O failed, nothing released: {detail}")
            }
            Error::CounterNotAdvanced { id, detail } => write!(
                f,
                "charged and queued in the outbox as report {id} (it is uploaded once the counter has been \
                 advanced to the file, by the next call through the counter), but the platform monotonic counter was \
                 not advanced: {detail}"
            ),
            Error::LedgerBusy { path, waited_ms } => write!(
                f,
                "ledger {} is locked by another process (waited {waited_ms} ms), nothing released",
                crate::server::escape::Untrusted(path)
            ),
            Error::NonFiniteRelease { what, value } => write!(
                f,
                "release refused (nothing charged): its {what} would be {}, not a finite normal number; \
                 use a larger epsilon or narrower query parameters",
                ShortNumber(*value)
            ),
            Error::LimitExceeded {
                what,
                requested,
                limit,
            } => write!(
                f,
                "too many {what}: {requested} requested, the limit is {limit}"
            ),
            Error::Overflow { what } => {
                write!(f, "{what} would overflow; the state is unchanged")
            }
            Error::Unauditable { reason } => write!(f, "cannot audit: {reason}"),
            Error::InvalidRegion { feature, reason } => write!(
                f,
                "invalid region `{}`: {}",
                crate::server::escape::Untrusted(feature),
                crate::server::escape::Untrusted(reason)
            ),
        }
    }
}

impl core::error::Error for Error {}

/// A number in a message, short and exact: `{}` for 0 and for
/// magnitudes in [1e-6, 1e6], `{:e}` outside (and `inf`, `-inf`, `NaN`
/// as they are). Both forms are Rust's shortest round-trip digits, so
/// `"{}".parse::<f64>()` of the text gives the number back bit for bit;
/// only the decimal point's place differs. Every message that prints an
/// ε, a radius, a level or a budget (this crate's [`Error`] and
/// [`crate::Rejection`] texts, the CLI's and the server's lines) goes
/// through it, so ε = 1e-300 prints as `1e-300`, not as 300 digits
/// (attack15 O2). Numbers a machine reads (JSON, ledger files, report
/// fields) are not formatted with it.
///
/// ```
/// use geopriv::ShortNumber;
/// assert_eq!(ShortNumber(0.002).to_string(), "0.002");
/// assert_eq!(ShortNumber(500.0).to_string(), "500");
/// assert_eq!(ShortNumber(1e-300).to_string(), "1e-300");
/// assert_eq!(ShortNumber(1e300).to_string(), "1e300");
/// assert_eq!(ShortNumber(5e-324).to_string(), "5e-324");
/// assert_eq!(ShortNumber(f64::INFINITY).to_string(), "inf");
/// assert_eq!(ShortNumber(1e-300).to_string().parse::<f64>(), Ok(1e-300));
/// ```
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct ShortNumber(pub f64);

impl fmt::Display for ShortNumber {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let x = self.0;
        if !x.is_finite() || x == 0.0 || (1e-6..=1e6).contains(&x.abs()) {
            write!(f, "{x}")
        } else {
            write!(f, "{x:e}")
        }
    }
}

/// Check that `value` is finite and strictly positive.
pub(crate) fn positive_finite(name: &'static str, value: f64) -> Result<f64> {
    if value.is_finite() && value > 0.0 {
        Ok(value)
    } else {
        Err(Error::InvalidParameter {
            name,
            value,
            requirement: "finite and > 0",
        })
    }
}

/// Check that `value` is finite.
pub(crate) fn finite(name: &'static str, value: f64) -> Result<f64> {
    if value.is_finite() {
        Ok(value)
    } else {
        Err(Error::InvalidParameter {
            name,
            value,
            requirement: "finite",
        })
    }
}

/// Check that a number a release depends on (its value, noise scale or
/// grid) is finite and normal (`value` may also be 0): the release is
/// refused otherwise, before anything is charged.
pub(crate) fn release_number(what: &'static str, value: f64, may_be_zero: bool) -> Result<f64> {
    if value.is_normal() || (may_be_zero && value == 0.0) {
        Ok(value)
    } else {
        Err(Error::NonFiniteRelease { what, value })
    }
}

/// Largest magnitude accepted for a query parameter (a threshold, a bound,
/// a centre coordinate): 1e300, so that differences and sums of two
/// parameters and a width stay finite.
pub(crate) const MAX_PARAMETER: f64 = 1e300;

/// Check that a query parameter is finite with |value| <= [`MAX_PARAMETER`].
pub(crate) fn query_parameter(name: &'static str, value: f64) -> Result<f64> {
    if value.is_finite() && value.abs() <= MAX_PARAMETER {
        Ok(value)
    } else {
        Err(Error::InvalidParameter {
            name,
            value,
            requirement: "finite with magnitude at most 1e300",
        })
    }
}

/// Check that a ramp width or bandwidth is in [1e-300, 1e300]: its
/// reciprocal (the Lipschitz constant) and the query's derived points stay
/// finite and normal.
pub(crate) fn query_width(name: &'static str, value: f64) -> Result<f64> {
    if value.is_finite() && (1.0 / MAX_PARAMETER..=MAX_PARAMETER).contains(&value) {
        Ok(value)
    } else {
        Err(Error::InvalidParameter {
            name,
            value,
            requirement: "finite and in [1e-300, 1e300]",
        })
    }
}

/// Check that a point has `dim` finite coordinates.
pub(crate) fn check_point(x: &[f64], dim: usize) -> Result<()> {
    if x.len() != dim {
        return Err(Error::DimensionMismatch {
            expected: dim,
            found: x.len(),
        });
    }
    for (coordinate, &value) in x.iter().enumerate() {
        if !value.is_finite() {
            return Err(Error::NonFinitePoint { coordinate, value });
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn validators_name_the_parameter() {
        let e = positive_finite("width", 0.0).unwrap_err();
        assert!(matches!(e, Error::InvalidParameter { name: "width", .. }));
        assert!(positive_finite("width", f64::NAN).is_err());
        assert!(positive_finite("width", f64::INFINITY).is_err());
        assert!(finite("threshold", f64::NEG_INFINITY).is_err());
        assert_eq!(positive_finite("width", 2.0), Ok(2.0));
    }

    /// attack15 O2: numbers in messages are short and read back exactly.
    #[test]
    fn extreme_numbers_in_messages_are_short() {
        let e = query_parameter("threshold", 1e301).unwrap_err().to_string();
        assert!(e.contains("`threshold` = 1e301:"), "{e}");
        let e = positive_finite("epsilon", -1e-300).unwrap_err().to_string();
        assert!(e.contains("`epsilon` = -1e-300:"), "{e}");
        let e = release_number("scale", 5e-324, false)
            .unwrap_err()
            .to_string();
        assert!(e.contains("would be 5e-324,"), "{e}");
        for x in [
            1e-300,
            5e-324,
            1e300,
            f64::MAX,
            1e-6,
            1e6,
            0.5,
            123.25,
            -7.0,
        ] {
            let t = alloc::format!("{}", ShortNumber(x));
            assert!(t.len() <= 24, "{t}");
            assert_eq!(t.parse::<f64>().map(f64::to_bits), Ok(x.to_bits()), "{t}");
        }
        assert_eq!(alloc::format!("{}", ShortNumber(1e6)), "1000000");
        assert_eq!(alloc::format!("{}", ShortNumber(1.5e6)), "1.5e6");
        assert_eq!(alloc::format!("{}", ShortNumber(-0.0)), "-0");
    }

    #[test]
    fn points_are_checked() {
        assert_eq!(
            check_point(&[1.0], 2),
            Err(Error::DimensionMismatch {
                expected: 2,
                found: 1
            })
        );
        assert!(matches!(
            check_point(&[1.0, f64::NAN], 2),
            Err(Error::NonFinitePoint { coordinate: 1, .. })
        ));
        assert!(check_point(&[1.0, 2.0], 2).is_ok());
    }
}
