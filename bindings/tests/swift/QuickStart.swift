// The Swift quick start of README.md. Not compiled here (no Swift toolchain
// on Linux): bindings/scripts/test-packages.sh checks that the README block
// is this file's copy and that every call below matches a signature in the
// generated bindings/swift/geopriv_ffi.swift (name and argument labels).
import Foundation  // + bindings/swift/geopriv_ffi.swift and GeoprivFFI.xcframework

/// Device: privatize "income above $100k" (ε = 1/5000 per dollar), within the user's budget.
func deviceUpload(income: Double, budget: PrivacyBudget) -> Data? {
    do {
        let query = try GeoQuery.threshold(threshold: 100_000, width: 20_000)
        let mechanism = try GeoMechanism.polyplace(epsilon: 1.0 / 5000)
        return try mechanism.privatizeWithBudget(budget: budget, query: query, x: [income]).bytes
    } catch {  // GeoprivError.BudgetExceeded: nothing was released or charged
        return nil
    }
}
