// The Swift quick start of README.md. Not compiled here (no Swift toolchain
// on Linux): bindings/scripts/test-packages.sh checks that the README block
// is this file's copy and that every call below matches a signature in the
// generated bindings/swift/geopriv_ffi.swift (name and argument labels).
import Foundation  // + bindings/swift/geopriv_ffi.swift and GeoprivFFI.xcframework

/// Device: ε = 1/2500 per dollar a day, at most 1/10 per dollar over the device's life, in a file created on first use.
func openLedger(path: String) throws -> PrivacyLedger {
    let daily = BudgetPeriod(seconds: 86_400, epsilon: 1.0 / 2500, delta: 0)
    let policy = BudgetPolicy(unit: .perDollar, totalEpsilon: 0.1, totalDelta: 0, period: daily)
    return try PrivacyLedger.openOrCreate(path: path, policy: policy)
}

/// Device: privatize "income above $100k" (ε = 1/5000 per dollar), charged to the ledger first.
func deviceUpload(income: Double, ledger: PrivacyLedger) -> Data? {
    do {
        let query = try GeoQuery.threshold(threshold: 100_000, width: 20_000)
        let mechanism = try GeoMechanism.polyplace(epsilon: 1.0 / 5000).withUnit(unit: .perDollar)
        return try mechanism.privatize(ledger: ledger, query: query, x: [income]).bytes
    } catch {  // GeoprivError.BudgetExceeded: nothing was released or charged
        return nil
    }
}

/// Device: release my location (metres on the city grid) for the whole map at ε = 1/1000 per metre, charged once.
func mapUpload(location: [Double], ledger: PrivacyLedger) -> Data? {
    let city = MapGrid(xMin: 0, xMax: 20_000, yMin: 0, yMax: 20_000, pointsX: 21, pointsY: 21, bandwidth: nil)
    do {
        let map = try MapRelease(grid: city, mechanism: .aPriori, epsilon: 1e-3)
        return try map.release(ledger: ledger, location: location).bytes
    } catch {  // GeoprivError.BudgetExceeded: nothing was released or charged
        return nil
    }
}

/// Device: "am I in the park?" (a GeoJSON feature in metres, ramp 10 m) at ε = 1/100 per metre, charged first.
func regionUpload(geojson: String, location: [Double], ledger: PrivacyLedger) -> Data? {
    do {
        let query = try GeoQuery.regionGeojson(geojson: geojson, featureId: "park", widthMetres: 10)  // regionGeojsonLatlon for lon/lat
        let mechanism = try GeoMechanism.polyplace(epsilon: 1.0 / 100).withUnit(unit: .perMetre)
        return try mechanism.privatize(ledger: ledger, query: query, x: location).bytes
    } catch {  // GeoprivError.BudgetExceeded: nothing was released or charged
        return nil
    }
}

/// Device (a BGProcessingTask): send the outbox with URLSession (or any HTTP); post returns the status
/// (0: no answer), body and Retry-After of POST {collector}/v1/tasks/{task}/reports.
func uploadOutbox(ledger: PrivacyLedger, post: (String) -> (UInt16, Data, String?)) throws -> Bool {
    let uploader = OutboxUploader(maxReports: 100, maxBytes: 1 << 20, baseMs: 1000, capMs: 300_000)  // 1 s doubling to 5 min
    var parked: [UInt64] = []
    var attempt: UInt32 = 0
    while let batch = try uploader.nextBatch(pending: ledger.pendingUploads(), parked: parked) {
        let (status, body, retryAfter) = post(batch.body)
        switch uploader.classify(batch: batch, status: status, body: body, retryAfter: retryAfter) {
        case let .answered(acknowledge, _, rejected):  // stored: accepted now or before (a retry counts once)
            try ledger.acknowledge(ids: acknowledge)
            parked += rejected.map { $0.id }  // refused: out of the retry loop
            attempt = 0
        case let .retry(afterMs, _) where attempt < 5:
            Thread.sleep(forTimeInterval: Double(uploader.retryDelayMs(attempt: attempt, retryAfterMs: afterMs)) / 1000)
            attempt += 1
        default:  // fatal, split, or still failing: everything stays in the outbox for the next run
            return false
        }
    }
    return true
}
