// Kotlin/JVM test of the map API of the bindings (issue 11 item 5): a device
// releases its location for a whole map at a per-device ε, metered by its
// ledger; MapServer turns reports into a map with per-cell standard errors,
// mergeable bit for bit across shards and equal to `geopriv map aggregate`
// on the same reports (GEOPRIV_CLI: the binary; skipped, and said so,
// without it). Run by bindings/scripts/test-kotlin.sh; closes with
// "kotlin-map: N passed, M failed". GEOPRIV_MAP_DEVICES: devices (2000).
package maptest

import geopriv.*
import java.util.Random
import kotlin.math.abs
import kotlin.math.exp
import kotlin.math.hypot
import kotlin.system.exitProcess

private var passed = 0
private var failed = 0

private fun test(name: String, body: () -> Unit) {
    val t0 = System.nanoTime()
    try {
        body()
        passed++
        if (System.getenv("GEOPRIV_TIMING") != null) println("  ${(System.nanoTime() - t0) / 1_000_000} ms  $name")
    } catch (t: Throwable) {
        failed++
        println("FAIL $name: $t")
    }
}

private fun expect(condition: Boolean, message: () -> String) {
    if (!condition) throw AssertionError(message())
}

private inline fun <reified E : Throwable> refused(body: () -> Unit) {
    try {
        body()
    } catch (e: Throwable) {
        if (e is E) return
        throw AssertionError("expected ${E::class.simpleName}, got $e")
    }
    throw AssertionError("expected ${E::class.simpleName}, nothing raised")
}

private const val SIDE = 10_000.0
private const val K = 11
private const val EPS = 2e-3
private val GRID = MapGrid(0.0, SIDE, 0.0, SIDE, K.toUInt(), K.toUInt(), null)

private fun ledger(total: Double = EPS) =
    PrivacyLedger.inMemory(BudgetPolicy(BudgetUnit.PerMetre, totalEpsilon = total, totalDelta = 0.0))

/** The numbers of a JSON array field `"name":[...]` (the CLI's output). */
private fun jsonArray(json: String, name: String): List<Double> {
    val start = json.indexOf("\"$name\":[") + name.length + 4
    return json.substring(start, json.indexOf(']', start)).split(',').map { it.toDouble() }
}

fun main() {
    val devices = System.getenv("GEOPRIV_MAP_DEVICES")?.toInt() ?: 2000
    val rnd = Random(11)
    val points = generateSequence {
        if (rnd.nextDouble() < 0.6) listOf(3_000.0 + 900 * rnd.nextGaussian(), 6_500.0 + 900 * rnd.nextGaussian())
        else listOf(SIDE * rnd.nextDouble(), SIDE * rnd.nextDouble())
    }.filter { p -> p.all { it in 0.0..SIDE } }.take(devices).toList()
    val release = MapRelease(GRID, MapMechanism.APriori, EPS)
    val lines = points.map { release.release(ledger(), it).json }  // one ledger per device, charged once
    val axis = List(K) { it * SIDE / (K - 1) }
    val h = hypot(SIDE / (K - 1), SIDE / (K - 1))
    val truth = axis.flatMap { tx -> axis.map { ty ->
        points.sumOf { (x, y) -> exp(-0.5 * (((x - tx) / h) * ((x - tx) / h) + ((y - ty) / h) * ((y - ty) / h))) } / points.size
    } }

    test("device: one release charges ε once; refusals charge nothing") {
        val l = ledger(1.5 * EPS)
        val up = release.release(l, listOf(2_500.0, 4_000.0))
        val s = l.status()
        expect(s.releases == 1uL && s.spentEpsilon == EPS && up.epsilon == EPS && up.mechanism == "a-priori") { "$s" }
        refused<GeoprivException.BudgetExceeded> { release.release(l, listOf(2_500.0, 4_000.0)) }
        refused<GeoprivException.InvalidInput> { release.release(l, listOf(-1.0, 5.0)) }
        refused<GeoprivException.InvalidInput> { release.release(l, listOf(Double.NaN, 5.0)) }
        val dollars = PrivacyLedger.inMemory(BudgetPolicy(BudgetUnit.PerDollar, totalEpsilon = 1.0, totalDelta = 0.0))
        refused<GeoprivException.UnitMismatch> { release.release(dollars, listOf(5.0, 5.0)) }
        expect(l.status() == s && dollars.status().releases == 0uL) { "a refusal was charged" }
        val paris = Projection.LocalEquirectangular(48.8566, 2.3522)
        val local = MapGrid(-5_000.0, 5_000.0, -5_000.0, 5_000.0, 11u, 11u, null)
        val l2 = ledger()
        MapRelease(local, MapMechanism.APriori, EPS).releaseLatlon(l2, 48.8606, 2.3376, paris)
        expect(l2.status().releases == 1uL) { "lat/lon release charged" }
    }

    test("server: the debiased map of $devices devices is within its standard errors of the truth") {
        val server = MapServer(GRID, MapMechanism.APriori, EPS)
        val batch = server.addAllJson(lines)
        expect(batch.accepted == devices.toULong() && batch.rejected == 0uL) { "$batch" }
        val m = server.estimate(1.0)
        expect(m.xs == axis && m.ys == axis && m.values.size == K * K && m.perDeviceEpsilon == EPS) { "${m.xs}" }
        // No discretisation bound is stated any more (NaN; docs/MATH.md
        // §9.3): the rounding's spread is in the standard errors.
        expect(m.discretisationBound.isNaN()) { "${m.discretisationBound}" }
        val z = m.values.indices.map { abs(m.values[it] - truth[it]) / m.standardErrors[it] }
        val within = z.count { it < 3 }.toDouble() / z.size
        expect(within >= 0.9 && z.max() < 6) { "$within of cells within 3 SE, max |z| ${z.max()}" }
    }

    test("server: bad reports are refused one by one with a reason and counted") {
        val otherEps = MapRelease(GRID, MapMechanism.APriori, 1e-3).releaseUnmetered(listOf(5.0, 5.0)).json
        val bad = listOf("garbage", "", otherEps, lines[0].replace(Regex("\"report_id\":\"[0-9a-f]{32}\""), "\"report_id\":\"" + "ab".repeat(16) + "\"").replace("location", "values"))
        val server = MapServer(GRID, MapMechanism.APriori, EPS)
        val batch = server.addAllJson(lines.take(20) + bad)
        expect(batch.accepted == 20uL && batch.rejected == 4uL) { "$batch" }
        expect(batch.rejections.map { it.code } == listOf("malformed", "empty", "other-epsilon", "invalid-report")) {
            "${batch.rejections}"
        }
        expect(batch.rejections.map { it.index } == listOf(20uL, 21uL, 22uL, 23uL)) { "${batch.rejections}" }
        refused<GeoprivException.InvalidReport> { server.addJson("{}") }
        expect(server.status().rejected == 5uL && server.status().rejections["malformed"] == 2uL) { "${server.status()}" }
        refused<GeoprivException.InvalidParameter> {
            MapServer(MapGrid(0.0, 1.0, 0.0, 1.0, 200_000u, 200_000u, null), MapMechanism.APriori, EPS)
        }
    }

    test("server: shards merged through JSON equal one server, bit for bit") {
        val one = MapServer(GRID, MapMechanism.APriori, EPS)
        one.addAllJson(lines)
        val shards = List(3) { MapServer(GRID, MapMechanism.APriori, EPS) }
        lines.forEachIndexed { i, line -> shards[(i * 7) % 3].addBytes(line.toByteArray()) }
        val reducer = MapServer.fromJson(shards[1].toJson())
        reducer.merge(MapServer.fromJson(shards[2].toJson()))
        reducer.merge(MapServer.fromJson(shards[0].toJson()))
        expect(reducer.toJson() == one.toJson()) { "states differ" }
        val (a, b) = reducer.estimate(1.0) to one.estimate(1.0)
        expect(a.values.map { it.toRawBits() } == b.values.map { it.toRawBits() }) { "values differ" }
        expect(a.standardErrors.map { it.toRawBits() } == b.standardErrors.map { it.toRawBits() }) { "SEs differ" }
        refused<GeoprivException.InvalidReport> { MapServer.fromJson("{") }
    }

    test("server: the map equals `geopriv map aggregate --lambda 1` on the same reports, bit for bit") {
        val cli = System.getenv("GEOPRIV_CLI")
        if (cli == null) {
            println("  (skipped: GEOPRIV_CLI not set)")
            return@test
        }
        val file = java.io.File.createTempFile("geopriv-map", ".jsonl")
        file.writeText(lines.joinToString("\n", postfix = "\n"))
        val p = ProcessBuilder(cli, "map", "aggregate", "--bbox", "0", "$SIDE", "0", "$SIDE", "--grid", "$K",
            "--epsilon", "$EPS", "--lambda", "1").redirectInput(file).redirectError(ProcessBuilder.Redirect.DISCARD).start()
        val out = p.inputStream.bufferedReader().readText()
        val status = p.waitFor()
        file.delete()
        expect(status == 0) { "CLI exit $status: $out" }
        val m = MapServer(GRID, MapMechanism.APriori, EPS).also { it.addAllJson(lines) }.estimate(1.0)
        expect(jsonArray(out, "values").map { it.toRawBits() } == m.values.map { it.toRawBits() }) { "values differ" }
        expect(jsonArray(out, "standard_errors").map { it.toRawBits() } == m.standardErrors.map { it.toRawBits() }) {
            "standard errors differ"
        }
        expect(out.contains("\"n\":${m.n}") && out.contains("\"mechanism\":\"a-priori\"")) { out.take(200) }
    }

    test("server: an EM map (εh 0.3) publishes the λ = 1 map's interval; a kernel map none") {
        val eps = 0.3 / h
        val rel = MapRelease(GRID, MapMechanism.APriori, eps)
        // The releases use the secure generator (no seed here), so the
        // planner picks EM on most draws, not all: draw again, up to 8 times.
        var srv = MapServer(GRID, MapMechanism.APriori, eps)
        for (attempt in 1..8) {
            srv = MapServer(GRID, MapMechanism.APriori, eps).also { s ->
                s.addAllJson(points.map { rel.release(ledger(eps), it).json })
            }
            if (srv.estimate(null).planner!!.startsWith("pick a-priori em")) break
        }
        val (m, k1) = srv.estimate(null) to srv.estimate(1.0)
        expect(m.kernelLambda.isNaN() && m.planner!!.startsWith("pick a-priori em")) { "${m.planner}" }
        // Point map: EM's values; interval: map1 ± 1.96·SE1 (docs/MATH.md §9.7).
        expect(m.intervalCentres!!.map { it.toRawBits() } == k1.values.map { it.toRawBits() }) { "centres" }
        expect(m.standardErrors.map { it.toRawBits() } == k1.standardErrors.map { it.toRawBits() }) { "SEs" }
        expect(m.values != k1.values && k1.intervalCentres == null) { "EM's values, kernel centres" }
    }

    test("planner: a pick and its reason in one line; sampled reports round-trip") {
        val plan = planMap(GRID, EPS, 100_000uL)
        expect(plan.pick.mechanism == MapMechanism.APriori && plan.line.startsWith("pick a-priori")) { plan.line }
        val sampled = MapMechanism.Sampled(5u)
        val rel = MapRelease(GRID, sampled, EPS)
        val srv = MapServer(GRID, sampled, EPS)
        points.take(200).forEach { srv.addJson(rel.release(ledger(), it).json) }
        val m = MapServer.fromJson(srv.toJson()).estimate(null)
        expect(m.n == 200uL && m.values.size == K * K && m.mechanism == "sampled-5") { "${m.n} ${m.mechanism}" }
    }

    test("server clipping: a forged composition report moves no cell past B; Off, Z(z) and forged states") {
        val mech = MapMechanism.Composition
        val rel = MapRelease(GRID, mech, EPS)
        val honest = points.take(120).map { rel.releaseUnmetered(it).json }
        // Another report_id: with honest[0]'s the forged copy is a replay and dropped.
        val forged = honest[0].replace(Regex("\"values\":\\[[^\\]]*\\]"),
            "\"values\":" + List(K * K) { "1e300" }.joinToString(",", "[", "]"))
            .replace(Regex("\"report_id\":\"[0-9a-f]{32}\""), "\"report_id\":\"" + "ef".repeat(16) + "\"")
        val clipped = MapServer(GRID, mech, EPS)
        val raw = MapServer.withClipping(GRID, mech, EPS, 1024u, MapClipping.Off)
        expect(clipped.addAllJson(honest + forged).accepted == 121uL && raw.addAllJson(honest + forged).accepted == 121uL) {
            "accepted"
        }
        val m = clipped.estimate(null)
        val c = m.clip ?: throw AssertionError("no clip stated")
        expect(raw.estimate(null).clip == null && raw.estimate(null).values.max() > 1e290) { "raw" }
        expect(m.values.all { abs(it) <= c.upper } && c.clipped >= (K * K).toULong()) { "$c" }
        expect(c.influenceBound == c.maxWidth / m.n.toDouble()) { "$c" }
        expect(MapServer.withClipping(GRID, mech, EPS, 1024u, MapClipping.Z(3.0)).also { it.addAllJson(honest) }
            .estimate(null).clip?.z == 3.0) { "z" }
        refused<GeoprivException.InvalidParameter> { MapServer.withClipping(GRID, mech, EPS, 1024u, MapClipping.Z(-1.0)) }
        // The unclipped state relabelled as clipped: its 1e300 sums are refused.
        val forgedState = raw.toJson().replace("\"max_bins\":1024", "\"max_bins\":1024,\"clip_z\":${c.z}")
        refused<GeoprivException.InvalidReport> { MapServer.fromJson(forgedState) }
        expect(MapServer.fromJson(clipped.toJson()).toJson() == clipped.toJson()) { "round trip" }
    }

    println("kotlin-map: $passed passed, $failed failed")
    if (failed > 0) exitProcess(1)
}
