// Hand-written (not generated): add it to the Xcode target beside
// bindings/swift/geopriv_ffi.swift. The codes are the table of
// bindings/README.md ("Error codes"), the same in Kotlin and Python.
// Not compiled here (no Swift toolchain on Linux).
import Foundation

extension GeoprivError {
    /// The stable, machine-readable code of this error: the kind
    /// (`"invalid-parameter"`, `"budget-exceeded"`, ...) or, for
    /// `.InvalidReport`, the report's rejection code (`"malformed"`, ...;
    /// `"invalid-report"` for an invalid state).
    public var code: String {
        switch self {
        case .InvalidParameter: return "invalid-parameter"
        case .InvalidInput: return "invalid-input"
        case .BudgetExceeded: return "budget-exceeded"
        case .UnitMismatch: return "unit-mismatch"
        case .LedgerRefused: return "ledger-refused"
        case .LedgerIo: return "ledger-io"
        case .InvalidReport(let message):
            if let open = message.lastIndex(of: "["), message.hasSuffix("]") {
                let code = message[message.index(after: open)..<message.index(before: message.endIndex)]
                if !code.isEmpty, code.allSatisfy({ $0.isLowercase || $0.isNumber || $0 == "-" }) {
                    return String(code)
                }
            }
            return "invalid-report"
        case .Internal: return "internal"
        }
    }
}
