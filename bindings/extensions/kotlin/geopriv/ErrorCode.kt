// Hand-written (not generated): compiled with bindings/kotlin/geopriv/geopriv_ffi.kt
// into the jar (build-jar.sh) and the Kotlin tests (test-kotlin.sh); Android apps copy
// it beside the generated file. The codes are the table of bindings/README.md
// ("Error codes"), the same in Python (`GeoprivError.code`) and Swift (`code`).
package geopriv

private val REJECTION_CODE = Regex("""\[([a-z0-9-]+)\]\s*$""")

/**
 * The stable, machine-readable code of this error: the kind
 * (`"invalid-parameter"`, `"budget-exceeded"`, ...) or, for
 * [GeoprivException.InvalidReport], the report's rejection code
 * (`"malformed"`, `"unsupported-version"`, ...; `"invalid-report"` for an
 * invalid state). Example: `catch (e: GeoprivException) { count(e.code) }`.
 */
val GeoprivException.code: String
    get() = when (this) {
        is GeoprivException.InvalidParameter -> "invalid-parameter"
        is GeoprivException.InvalidInput -> "invalid-input"
        is GeoprivException.BudgetExceeded -> "budget-exceeded"
        is GeoprivException.UnitMismatch -> "unit-mismatch"
        is GeoprivException.LedgerRefused -> "ledger-refused"
        is GeoprivException.LedgerIo -> "ledger-io"
        is GeoprivException.InvalidReport ->
            REJECTION_CODE.find(message ?: "")?.groupValues?.get(1) ?: "invalid-report"
        is GeoprivException.Internal -> "internal"
    }
