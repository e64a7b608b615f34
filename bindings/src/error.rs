//! The one error type of the bindings: an exception in every foreign
//! language, whose message is the core crate's `Display` text.

use std::fmt;

/// Why a call failed. In Kotlin this is `GeoprivException` with one
/// subclass per variant, in Swift `GeoprivError`, in Python `GeoprivError`
/// with nested subclasses; the message says what to fix.
///
/// Flat on purpose: the variant says which kind of failure, the message
/// explains it; foreign code matches on the kind and logs the message.
#[derive(Debug, Clone, PartialEq, uniffi::Error)]
#[uniffi(flat_error)]
pub enum GeoprivError {
    /// A parameter (width, bandwidth, γ, ε, δ, ...) is NaN, infinite or out
    /// of range.
    InvalidParameter(String),
    /// A point is unusable: wrong number of coordinates, empty, or a NaN or
    /// infinite coordinate.
    InvalidInput(String),
    /// A release was refused because it would exceed the privacy budget.
    BudgetExceeded(String),
    /// A charge in one unit offered to a ledger of another (a local-DP ε
    /// to a per-metre ledger), or a geo-private mechanism released through
    /// a ledger without `with_unit`. Nothing was released or charged.
    UnitMismatch(String),
    /// A stored ledger was refused: its unit or totals differ from the
    /// app's pinned policy, or its state is invalid (edited, reset, changed
    /// by another writer).
    LedgerRefused(String),
    /// The ledger file could not be read or written; when raised by a
    /// release, nothing was released.
    LedgerIo(String),
    /// A report could not be decoded or failed validation.
    InvalidReport(String),
    /// A bug or an uncertified numerical result; the message says where.
    Internal(String),
}

impl fmt::Display for GeoprivError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let msg = match self {
            GeoprivError::InvalidParameter(m)
            | GeoprivError::InvalidInput(m)
            | GeoprivError::BudgetExceeded(m)
            | GeoprivError::UnitMismatch(m)
            | GeoprivError::LedgerRefused(m)
            | GeoprivError::LedgerIo(m)
            | GeoprivError::InvalidReport(m)
            | GeoprivError::Internal(m) => m,
        };
        f.write_str(msg)
    }
}

impl std::error::Error for GeoprivError {}

impl From<geopriv::Error> for GeoprivError {
    fn from(e: geopriv::Error) -> Self {
        use geopriv::Error as E;
        let msg = e.to_string();
        match e {
            E::InvalidParameter { .. } => GeoprivError::InvalidParameter(msg),
            E::NonFinitePoint { .. } | E::DimensionMismatch { .. } | E::InvalidData { .. } => {
                GeoprivError::InvalidInput(msg)
            }
            E::BudgetExceeded { .. } => GeoprivError::BudgetExceeded(msg),
            E::InvalidReport { .. } => GeoprivError::InvalidReport(msg),
            // A canonical id or mechanism name that does not parse: a bad
            // argument.
            E::Parse { .. } => GeoprivError::InvalidParameter(msg),
            E::Numerical { .. } => GeoprivError::Internal(msg),
            E::UnitMismatch { .. } => GeoprivError::UnitMismatch(msg),
            E::LedgerPolicyMismatch { .. } | E::InvalidLedgerState { .. } => {
                GeoprivError::LedgerRefused(msg)
            }
            // Charged and queued, the counter not advanced (attack12 O3):
            // LedgerIo's kind, with its own message.
            E::LedgerIo { .. } | E::LedgerBusy { .. } | E::CounterNotAdvanced { .. } => {
                GeoprivError::LedgerIo(msg)
            }
            // Parameters too extreme for a finite release.
            E::NonFiniteRelease { .. } => GeoprivError::InvalidParameter(msg),
            // A size above its limit (e.g. a 200k x 200k grid) or an input
            // the audit cannot judge: a bad argument, refused before any
            // allocation.
            E::LimitExceeded { .. } | E::Unauditable { .. } => GeoprivError::InvalidParameter(msg),
            // A count or exact sum that would overflow (restored or merged
            // states): the state is what is wrong.
            E::Overflow { .. } => GeoprivError::InvalidReport(msg),
            // Unusable region geometry or GeoJSON: a bad argument.
            E::InvalidRegion { .. } => GeoprivError::InvalidParameter(msg),
            // `geopriv::Error` is non-exhaustive: a new variant still
            // surfaces, with its own message, until it gets a mapping here.
            _ => GeoprivError::Internal(msg),
        }
    }
}

impl From<geopriv::Rejection> for GeoprivError {
    /// A report refused by a decoder or a validation policy. The message is
    /// the reason followed by the stable rejection code in brackets, e.g.
    /// `report format version 2 is not supported (...) [unsupported-version]`,
    /// so a server can count refusals by kind.
    fn from(r: geopriv::Rejection) -> Self {
        GeoprivError::InvalidReport(format!("{r} [{}]", r.code()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn core_errors_keep_their_message_and_kind() {
        let core = geopriv::SoftThreshold::new(0.0, -1.0).unwrap_err();
        let ffi = GeoprivError::from(core.clone());
        assert!(matches!(ffi, GeoprivError::InvalidParameter(_)));
        assert_eq!(ffi.to_string(), core.to_string());

        let dim = geopriv::Error::DimensionMismatch {
            expected: 2,
            found: 0,
        };
        assert!(matches!(
            GeoprivError::from(dim),
            GeoprivError::InvalidInput(_)
        ));
        let parse = geopriv::Error::Parse {
            what: "query id",
            reason: "x",
        };
        assert!(matches!(
            GeoprivError::from(parse),
            GeoprivError::InvalidParameter(_)
        ));
        let rejection = geopriv::Report::from_json("").unwrap_err();
        let ffi = GeoprivError::from(rejection);
        assert!(matches!(ffi, GeoprivError::InvalidReport(_)));
        assert_eq!(ffi.to_string(), "empty report [empty]");
        let num = geopriv::Error::Numerical { routine: "x" };
        assert!(matches!(GeoprivError::from(num), GeoprivError::Internal(_)));
    }
}
