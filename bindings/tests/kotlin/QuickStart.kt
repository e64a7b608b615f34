// The JVM quick start (README.md "Kotlin / Android"), compiled against the
// packaged jar alone (bindings/scripts/test-jar.sh): geopriv-<v>.jar with
// JNA and kotlin-stdlib on the class path, no -Djna.library.path (JNA finds
// linux-x86-64/libgeopriv_ffi.so inside the jar).
import geopriv.*
import kotlin.random.Random
import kotlin.system.exitProcess

/** Device: ε = 1/2500 per dollar a day, at most 1/10 per dollar over the device's life, in a file created on first use. */
fun openLedger(path: String): PrivacyLedger =
    PrivacyLedger.openOrCreate(
        path,
        BudgetPolicy(
            BudgetUnit.PerDollar, totalEpsilon = 0.1, totalDelta = 0.0,
            period = BudgetPeriod(seconds = 86_400uL, epsilon = 1.0 / 2500, delta = 0.0),
        ),
    )

/** Device: privatize "income above $100k" (ε = 1/5000 per dollar), charged to the ledger first. */
fun deviceUpload(income: Double, ledger: PrivacyLedger): String? =
    GeoQuery.threshold(100_000.0, 20_000.0).use { query ->
        GeoMechanism.polyplace(epsilon = 1.0 / 5000).use { it.withUnit(BudgetUnit.PerDollar) }.use { mechanism ->
            try {
                mechanism.privatize(ledger, query, listOf(income)).json  // upload this
            } catch (e: GeoprivException.BudgetExceeded) {  // nothing was released or charged
                null
            }
        }
    }

/** Server: validate every upload against a policy and aggregate exactly. */
fun serverEstimate(uploads: List<String>): Estimate? =
    ReportPolicy(maxEpsilon = 1.0 / 1000, maxDelta = 0.0).use { policy ->
        Aggregator().use { total ->
            for (line in uploads) {
                try {
                    total.addReport(policy.acceptJson(line))
                } catch (e: GeoprivException.InvalidReport) {
                    System.err.println("rejected (${e.code}): ${e.message}")  // e.code: "malformed", ...
                }
            }
            total.estimate()  // n, mean, standardError, ci95Low, ci95High
        }
    }

/** The city map: 21 x 21 cells over 20 km (metres), bandwidth one cell diagonal. */
val CITY = MapGrid(0.0, 20_000.0, 0.0, 20_000.0, 21u, 21u, null)

/** Device: release my location for the whole map at ε = 1/1000 per metre, charged to the ledger once. */
fun mapUpload(location: List<Double>, ledger: PrivacyLedger): String? =
    MapRelease(CITY, MapMechanism.APriori, epsilon = 1e-3).use { map ->
        try {
            map.release(ledger, location).json  // upload this (or .bytes)
        } catch (e: GeoprivException.BudgetExceeded) {  // nothing was released or charged
            null
        }
    }

/** Server: the map with per-cell standard errors; bad uploads are counted with their reason, never thrown. */
fun serverMap(uploads: List<String>): MapEstimate =
    MapServer(CITY, MapMechanism.APriori, epsilon = 1e-3).use { server ->
        server.addAllJson(uploads).rejections.forEach { System.err.println("rejected #${it.index}: ${it.reason}") }
        server.estimate(kernelLambda = null)  // values, standardErrors, xs, ys, perDeviceEpsilon; λ by the planner
    }

/** The map quick start: 2000 devices around one district, each with its own ledger. */
fun mapChecks(check: (Boolean, String) -> Unit) {
    val rnd = java.util.Random(5)
    val perDevice = BudgetPolicy(BudgetUnit.PerMetre, totalEpsilon = 1e-3, totalDelta = 0.0)
    val homes = List(2000) { listOf(8_000.0 + 1_500 * rnd.nextGaussian(), 12_000.0 + 1_500 * rnd.nextGaussian()) }
    var secondRefused = 0
    val uploads = homes.map { home -> PrivacyLedger.inMemory(perDevice).use { ledger ->
        mapUpload(home, ledger).also { if (mapUpload(home, ledger) == null) secondRefused++ }
    } }
    check(uploads.all { it != null } && secondRefused == homes.size, "every device released once; a second release is refused")
    val map = serverMap(uploads.filterNotNull() + "{not json")
    check(map.n == 2000uL && map.perDeviceEpsilon == 1e-3 && map.values.size == 21 * 21, "the map of 2000 devices")
    val cell = map.xs.indexOf(8_000.0) * map.ys.size + map.ys.indexOf(12_000.0)
    val h = Math.hypot(1_000.0, 1_000.0)
    val truth = homes.map { (x, y) -> Math.exp(-((x - 8_000.0) * (x - 8_000.0) + (y - 12_000.0) * (y - 12_000.0)) / (2 * h * h)) }.average()
    // A kernel map states an interval (5 SE + its discretisation bound). When the planner picks the EM
    // map its SE counts the noise only and no discretisation bound is stated (NaN): its intervals are
    // not calibrated yet (issue 22 item 2; -15 SE seen at n = 2000), so only closeness is checked.
    val allowed = if (map.discretisationBound.isNaN()) 0.1 else 5 * map.standardErrors[cell] + map.discretisationBound
    check(Math.abs(map.values[cell] - truth) <= allowed,
        "the district's cell ${map.values[cell]} ± ${map.standardErrors[cell]} covers the truth $truth")
}

/** Device: "am I in the park?" (a GeoJSON feature in metres, ramp 10 m) at ε = 1/100 per metre, charged first. */
fun regionUpload(geojson: String, location: List<Double>, ledger: PrivacyLedger): String? =
    GeoQuery.regionGeojson(geojson, "park", 10.0).use { query ->  // regionGeojsonLatlon for lon/lat
        GeoMechanism.polyplace(epsilon = 1.0 / 100).use { it.withUnit(BudgetUnit.PerMetre) }.use { mechanism ->
            try {
                mechanism.privatize(ledger, query, location).json  // upload this; its query id is region:g=<digest>;w=10
            } catch (e: GeoprivException.BudgetExceeded) {  // nothing was released or charged
                null
            }
        }
    }

/** The region quick start: 1000 devices in and around a 200 m park, each with its own ledger. */
fun regionChecks(check: (Boolean, String) -> Unit) {
    val park = """{"type": "Feature", "id": "park", "properties": {}, "geometry": {"type": "Polygon", "coordinates": [[[0, 0], [200, 0], [200, 200], [0, 200], [0, 0]]]}}"""
    val rnd = java.util.Random(24)
    val perDevice = BudgetPolicy(BudgetUnit.PerMetre, totalEpsilon = 1.0 / 100, totalDelta = 0.0)
    val spots = List(1000) { listOf(-300.0 + 800 * rnd.nextDouble(), -300.0 + 800 * rnd.nextDouble()) }
    val uploads = spots.map { xy -> PrivacyLedger.inMemory(perDevice).use { ledger -> regionUpload(park, xy, ledger) } }
    GeoQuery.regionGeojson(park, "park", 10.0).use { query ->
        val digest = query.queryId().substringAfter("g=").substringBefore(";")  // the report carries the region's digest
        check(uploads.all { it != null && it.contains(digest) }, "every device released its region report")
        val truth = spots.map { query.value(it) }.average()
        ReportPolicy(maxEpsilon = 1.0 / 100, maxDelta = 0.0).use { policy ->
            Aggregator().use { total ->
                uploads.filterNotNull().forEach { total.addReport(policy.acceptJson(it)) }
                val e = total.estimate()
                check(e != null && e.n == 1000uL && Math.abs(e.mean - truth) <= 5 * e.standardError!!,
                    "the park's share ${e?.mean} ± ${e?.standardError} covers the truth $truth")
            }
        }
    }
}

/** Device: release and keep the report in the ledger file's outbox (same write as its charge). */
fun deviceToOutbox(income: Double, ledger: PrivacyLedger) {
    GeoMechanism.polyplace(1.0 / 5000).withUnit(BudgetUnit.PerDollar).use { mechanism ->
        GeoQuery.threshold(100_000.0, 20_000.0).use { query -> mechanism.privatizeToOutbox(ledger, query, listOf(income)) }
    }
}

/** Batches of 100 reports, retries after 1 s doubling to 5 minutes, with jitter. */
val UPLOADER = OutboxUploader(maxReports = 100u, maxBytes = 1u shl 20, baseMs = 1000uL, capMs = 300_000uL)

/** Device (a WorkManager job): send the outbox with the app's own HTTP; post(body) returns
 *  (status, body, Retry-After) of POST {collector}/v1/tasks/{task}/reports, status 0 if no answer. */
fun uploadOutbox(ledger: PrivacyLedger, post: (String) -> Triple<Int, ByteArray, String?>, uploader: OutboxUploader = UPLOADER): Boolean {
    val parked = mutableListOf<ULong>()
    var attempt = 0u
    while (true) {
        val batch = uploader.nextBatch(ledger.pendingUploads(), parked) ?: return true
        val (status, body, retryAfter) = post(batch.body)
        when (val v = uploader.classify(batch, status.toUShort(), body, retryAfter)) {
            is UploadVerdict.Answered -> {  // stored: accepted now or before (a retry counts once)
                ledger.acknowledge(v.acknowledge)
                parked += v.rejected.map { it.id }  // refused: out of the retry loop
                attempt = 0u
            }
            is UploadVerdict.Retry -> if (attempt < 5u) Thread.sleep(uploader.retryDelayMs(attempt++, v.afterMs).toLong()) else return false
            else -> return false  // Fatal or Split: everything stays in the outbox for the next run
        }
    }
}

/** The outbox quick start: 250 reports charged offline, then uploaded with one lost answer: each stored once. */
fun outboxChecks(check: (Boolean, String) -> Unit) {
    val dir = java.nio.file.Files.createTempDirectory("geopriv-outbox")
    val policy = BudgetPolicy(BudgetUnit.PerDollar, totalEpsilon = 1.0, totalDelta = 0.0)
    PrivacyLedger.openOrCreate(dir.resolve("ledger").toString(), policy).use { ledger ->
        repeat(250) { deviceToOutbox(50_000.0 + it, ledger) }
        val stored = HashSet<String>()
        var requests = 0
        val fast = OutboxUploader(100u, 1u shl 20, 1uL, 2uL)  // the test does not wait
        val offline = uploadOutbox(ledger, { requests++; Triple(0, ByteArray(0), null) }, fast)
        check(!offline && ledger.pendingUploads().size == 250 && requests == 6, "offline: kept all 250")
        requests = 0
        val done = uploadOutbox(ledger, { body ->
            requests++
            val ids = body.lines().filter { it.isNotBlank() }.map { Regex("\"report_id\":\"([0-9a-f]+)\"").find(it)!!.groupValues[1] }
            val dups = ids.withIndex().filter { !stored.add(it.value) }.map { it.index + 1 }
            if (requests == 1) Triple(0, ByteArray(0), null)  // stored, answer lost
            else Triple(200, """{"accepted":${ids.size - dups.size},"duplicates":$dups,"rejected":[],"period":0}""".toByteArray(), null)
        }, fast)
        check(done && ledger.pendingUploads().isEmpty() && stored.size == 250 && requests == 4, "outbox: each report stored once")
    }
    dir.toFile().deleteRecursively()
}

fun main() {
    var passed = 0
    var failed = 0
    fun check(ok: Boolean, what: String) {
        if (ok) passed++ else { failed++; println("FAIL $what") }
    }
    val rnd = Random(14)
    val incomes = List(4000) { 60_000.0 + 50_000.0 * rnd.nextDouble() * rnd.nextDouble() * 2.0 }
    val perDevice = BudgetPolicy(BudgetUnit.PerDollar, totalEpsilon = 1.0 / 2500, totalDelta = 0.0)
    val uploads = incomes.mapNotNull { income ->
        PrivacyLedger.inMemory(perDevice).use { ledger -> deviceUpload(income, ledger) }
    }
    check(uploads.size == incomes.size, "every device released once")
    val dir = java.nio.file.Files.createTempDirectory("geopriv-quickstart")
    val path = dir.resolve("ledger").toString()
    val first = openLedger(path).use { ledger -> listOf(deviceUpload(1.0, ledger), deviceUpload(1.0, ledger)) }
    val third = openLedger(path).use { ledger -> deviceUpload(1.0, ledger) }  // reopened from the file
    check(first.all { it != null } && third == null, "the file ledger refuses a third release after reopening")
    dir.toFile().deleteRecursively()
    val estimate = serverEstimate(uploads + listOf("{not json", ""))
    val truth = incomes.map { ((it - 100_000.0) / 20_000.0 + 0.5).coerceIn(0.0, 1.0) }.average()
    check(estimate != null && estimate.n == incomes.size.toULong(), "two bad uploads rejected, the rest counted")
    check(estimate != null && Math.abs(estimate.mean - truth) <= 5 * estimate.standardError!!,
        "estimate ${estimate?.mean} ± ${estimate?.standardError} covers the truth $truth")
    check(libraryVersion() == System.getProperty("geopriv.expectedVersion", libraryVersion()), "library version")
    mapChecks(::check)
    regionChecks(::check)
    outboxChecks(::check)
    println("jar: $passed passed, $failed failed")
    if (failed > 0) exitProcess(1)
}
