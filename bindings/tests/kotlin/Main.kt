// Kotlin/JVM test of the geopriv bindings: the generated Kotlin source
// (bindings/kotlin) loads the cdylib through JNA, exactly as an Android or
// server app would. A plain program, no test framework: it prints one line
// per failure and closes with "kotlin: N passed, M failed"; the exit code is
// non-zero when anything failed.
//
// Run it with bindings/scripts/test-kotlin.sh (builds, compiles, runs).

import geopriv.*
import java.util.Random
import java.util.concurrent.Callable
import java.util.concurrent.Executors
import java.util.concurrent.TimeUnit
import kotlin.math.abs
import kotlin.math.cos
import kotlin.math.exp
import kotlin.math.hypot
import kotlin.math.max
import kotlin.math.min
import kotlin.math.sqrt
import kotlin.system.exitProcess

private var passed = 0
private var failed = 0

private fun test(name: String, body: () -> Unit) {
    try {
        val t0 = System.nanoTime()
        body()
        if (System.getenv("GEOPRIV_TIMING") != null) println("  ${(System.nanoTime() - t0) / 1_000_000} ms  $name")
        passed++
    } catch (t: Throwable) {
        failed++
        println("FAIL $name: $t")
    }
}

private fun expect(condition: Boolean, message: () -> String) {
    if (!condition) throw AssertionError(message())
}

private fun assertClose(actual: Double, expected: Double, what: String) {
    val tol = 1e-12 * max(1.0, abs(expected))
    expect(abs(actual - expected) <= tol) { "$what: got $actual, expected $expected" }
}

/** Runs [block], which must throw exactly [E] with a message containing [needle]. */
private inline fun <reified E : GeoprivException> assertThrows(
    what: String,
    needle: String = "",
    block: () -> Unit,
) {
    try {
        block()
    } catch (e: GeoprivException) {
        expect(e is E) { "$what: expected ${E::class.simpleName}, got ${e::class.simpleName}: ${e.message}" }
        val msg = e.message ?: ""
        expect(msg.isNotBlank()) { "$what: exception without a message" }
        expect(msg.contains(needle, ignoreCase = true)) { "$what: message '$msg' does not mention '$needle'" }
        return
    }
    throw AssertionError("$what: no exception, expected ${E::class.simpleName}")
}

private val nonFinite = listOf(Double.NaN, Double.POSITIVE_INFINITY, Double.NEGATIVE_INFINITY)
private val badPositive = nonFinite + listOf(0.0, -1.0, -0.0, Double.MIN_VALUE * -1)

fun main() {
    test("every error kind has its code; InvalidReport the rejection code (extensions/kotlin)") {
        val policy = ReportPolicy(1.0, 0.0)
        val bad = try { policy.acceptJson("{not json"); null } catch (e: GeoprivException) { e }
        expect(bad?.code == "malformed") { "code ${bad?.code}" }
        val param = try { GeoMechanism.polyplace(-1.0); null } catch (e: GeoprivException) { e }
        expect(param?.code == "invalid-parameter") { "code ${param?.code}" }
        val m = GeoMechanism.polyplaceWithin(radius = 500.0, level = 1.0)
        expect(m.epsilon() == 2e-3) { "epsilon ${m.epsilon()}" }
        expect(m.within(500.0).description == "ε = 0.002 per unit, i.e. level 1 within 500") { m.within(500.0).description }
    }

    test("library version") {
        expect(libraryVersion().matches(Regex("""\d+\.\d+\.\d+.*"""))) { "version '${libraryVersion()}'" }
    }

    // ---- query values and sensitivities at known points (SPEC §3.1-3.3) ----

    test("soft threshold: values and sensitivities") {
        GeoQuery.threshold(100.0, 10.0).use { q ->
            expect(q.family() == QueryFamily.THRESHOLD) { "family ${q.family()}" }
            expect(q.dimension() == 1u) { "dimension ${q.dimension()}" }
            for ((x, v) in listOf(100.0 to 0.5, 102.5 to 0.75, 0.0 to 0.0, 1000.0 to 1.0)) {
                assertClose(q.value(listOf(x)), v, "f($x)")
            }
            assertClose(q.globalLipschitz(), 0.1, "global Lipschitz")
            assertClose(q.pointwiseLipschitz(listOf(0.0)), 1.0 / 105.0, "L(0)")
            assertClose(q.pointwiseLipschitz(listOf(100.0)), 0.1, "L(100)")
            // Off the ramp (e = 95): S* = max(1/(e + θ), 1/(θ g(e))).
            assertClose(q.smoothSensitivity(listOf(0.0), Growth.Exponential(0.01)), 1.0 / (10.0 * exp(0.95)), "S*exp(0)")
            assertClose(q.smoothSensitivity(listOf(0.0), Growth.Linear(0.01)), 1.0 / 19.5, "S*lin(0)")
            assertClose(q.smoothSensitivity(listOf(100.0), Growth.Exponential(0.01)), 0.1, "S*(100)")
            expect(q.toString() == "GeoQuery(threshold:T=100;w=10)") { "toString '$q'" }
        }
    }

    test("soft interval: values and sensitivities") {
        GeoQuery.interval(0.0, 100.0, 10.0).use { q ->
            expect(q.family() == QueryFamily.INTERVAL) { "family ${q.family()}" }
            expect(q.dimension() == 1u) { "dimension ${q.dimension()}" }
            for ((x, v) in listOf(50.0 to 1.0, 0.0 to 0.5, 2.5 to 0.75, -50.0 to 0.0, 200.0 to 0.0)) {
                assertClose(q.value(listOf(x)), v, "f($x)")
            }
            assertClose(q.globalLipschitz(), 0.1, "global Lipschitz")
            assertClose(q.pointwiseLipschitz(listOf(-50.0)), 1.0 / 55.0, "L(-50)")
            assertClose(q.smoothSensitivity(listOf(-50.0), Growth.Exponential(0.01)), 1.0 / (10.0 * exp(0.45)), "S*(-50)")
        }
    }

    test("two-way threshold: values and sensitivities") {
        GeoQuery.twoWay(0.0, 0.0, 1.0).use { q ->
            expect(q.family() == QueryFamily.TWO_WAY) { "family ${q.family()}" }
            expect(q.dimension() == 2u) { "dimension ${q.dimension()}" }
            val cases = listOf(
                listOf(10.0, 10.0) to 1.0,
                listOf(0.0, 10.0) to 0.5,
                listOf(-10.0, 10.0) to 0.0,
                listOf(10.0, -10.0) to 0.0,
            )
            for ((x, v) in cases) assertClose(q.value(x), v, "f($x)")
            assertClose(q.globalLipschitz(), 1.0, "global Lipschitz")
            assertClose(q.pointwiseLipschitz(listOf(-10.0, 10.0)), 1.0 / 10.5, "L")
            assertClose(q.smoothSensitivity(listOf(-10.0, 10.0), Growth.Exponential(0.1)), 1.0 / exp(0.95), "S*")
        }
    }

    test("kde: values and sensitivities (exact smooth sensitivity)") {
        val h = 250.0
        GeoQuery.kde(listOf(100.0, -50.0), h).use { q ->
            expect(q.family() == QueryFamily.KDE) { "family ${q.family()}" }
            expect(q.dimension() == 2u) { "dimension ${q.dimension()}" }
            val global = exp(-0.5) / h
            assertClose(q.globalLipschitz(), global, "global Lipschitz")
            assertClose(q.value(listOf(100.0, -50.0)), 1.0, "f(centre)")
            assertClose(q.value(listOf(100.0 + 0.6 * h, -50.0 + 0.8 * h)), exp(-0.5), "f at distance h")
            assertClose(q.value(listOf(100.0 + 3 * h, -50.0)), exp(-4.5), "f at distance 3h")
            // L(centre) = ℓ(0)/h = r* exp(-u)/h with r*² = 2u, 1 + 2u = e^u
            // (the tangency partner of the centre); solved here by Newton.
            var u = 1.5
            repeat(60) { u -= (exp(u) - 1 - 2 * u) / (exp(u) - 2) }
            val ell0 = sqrt(2 * u) * exp(-u)
            assertClose(q.pointwiseLipschitz(listOf(100.0, -50.0)), ell0 / h, "L(centre)")
            // On the ring at distance h, L and S* are the global constant.
            assertClose(q.pointwiseLipschitz(listOf(100.0, -50.0 + h)), global, "L(ring)")
            assertClose(q.smoothSensitivity(listOf(100.0, -50.0 + h), Growth.Exponential(0.01)), global, "S*(ring)")
            // Growth so steep (γh = 1000) that S*(centre) = L(centre), up to
            // the core's relative 2^-40 safety margin.
            val steep = q.smoothSensitivity(listOf(100.0, -50.0), Growth.Exponential(1000.0 / h))
            expect(abs(steep - ell0 / h) <= 1e-11 * ell0 / h) { "S* steep $steep vs ${ell0 / h}" }
            val s = q.smoothSensitivity(listOf(100.0, -50.0), Growth.Exponential(0.1 / h))
            expect(s > ell0 / h && s <= global * (1 + 1e-12)) { "L <= S* <= global: $s" }
        }
        GeoQuery.kde(listOf(1.0, 2.0, 3.0), 0.5).use { q -> expect(q.dimension() == 3u) { "3-D" } }
    }

    test("region from GeoJSON text: values, sensitivities, identity, refusals") {
        val park = """{"type": "FeatureCollection", "features": [
            {"type": "Feature", "id": "park", "properties": {"name": "Park"},
             "geometry": {"type": "Polygon", "coordinates": [[[0, 0], [100, 0], [100, 100], [0, 100], [0, 0]]]}},
            {"type": "Feature", "id": 7, "properties": {"name": "Lot"},
             "geometry": {"type": "Polygon", "coordinates": [[[200, 0], [300, 0], [250, 80], [200, 0]]]}}]}"""
        GeoQuery.regionGeojson(park, "park", 20.0).use { q ->
            expect(q.family() == QueryFamily.REGION) { "family ${q.family()}" }
            expect(q.dimension() == 2u) { "dimension ${q.dimension()}" }
            for ((x, v) in listOf(listOf(50.0, 50.0) to 1.0, listOf(100.0, 50.0) to 0.5, listOf(95.0, 50.0) to 0.75, listOf(-30.0, 50.0) to 0.0)) {
                assertClose(q.value(x), v, "f($x)")
            }
            assertClose(q.globalLipschitz(), 1.0 / 20, "global Lipschitz")
            // 20 m beyond the ramp: L = 1/(e + W), S* = max(1/(e + W), e^{-γe}/W).
            assertClose(q.pointwiseLipschitz(listOf(-30.0, 50.0)), 1.0 / 40, "L(-30, 50)")
            assertClose(q.smoothSensitivity(listOf(-30.0, 50.0), Growth.Exponential(0.1)), maxOf(1.0 / 40, exp(-2.0) / 20), "S*")
            val id = q.queryId()
            expect(Regex("region:g=[0-9a-f]{64};w=20").matches(id)) { "id $id" }
            // The same square written clockwise from another vertex has the same identity.
            val same = """{"type": "Polygon", "coordinates": [[[100, 100], [100, 0], [0, 0], [0, 100], [100, 100]]]}"""
            GeoQuery.regionGeojson(same, null, 20.0).use { s -> expect(s.queryId() == id) { "normalised digest" } }
            // The id names the geometry by its digest only.
            assertThrows<GeoprivException.InvalidParameter>("region from its id", "digest") { GeoQuery.fromId(id) }
            GeoMechanism.polyplace(0.05).use { m ->
                val r = m.privatizeUnmetered(q, listOf(50.0, 50.0))
                expect(r.queryId == id) { "report query ${r.queryId}" }
            }
        }
        GeoQuery.regionGeojson(park, "7", 5.0).use { lot -> assertClose(lot.value(listOf(250.0, 30.0)), 1.0, "lot inside") }
        assertThrows<GeoprivException.InvalidParameter>("missing feature", "pond") { GeoQuery.regionGeojson(park, "pond", 20.0) }
        val bowtie = """{"type": "Polygon", "coordinates": [[[0, 0], [1, 1], [1, 0], [0, 1], [0, 0]]]}"""
        assertThrows<GeoprivException.InvalidParameter>("bow tie") { GeoQuery.regionGeojson(bowtie, null, 1.0) }
        assertThrows<GeoprivException.InvalidParameter>("not JSON") { GeoQuery.regionGeojson("{not json", null, 1.0) }
        assertThrows<GeoprivException.InvalidParameter>("width 0") { GeoQuery.regionGeojson(park, "park", 0.0) }
        val box = """{"type": "Polygon", "coordinates": [[[2.34, 48.85], [2.36, 48.85], [2.36, 48.86], [2.34, 48.86], [2.34, 48.85]]]}"""
        GeoQuery.regionGeojsonLatlon(box, null, 50.0, Projection.LocalEquirectangular(48.855, 2.35)).use { ll ->
            assertClose(ll.value(listOf(0.0, 0.0)), 1.0, "centre of the lon/lat box")
        }
    }

    test("query ids round-trip") {
        for (id in listOf("threshold:T=100000;w=20000", "interval:a=0;b=10;w=1", "two-way:T1=1;T2=2;w=3", "kde:t=1200.5,-300;h=150")) {
            GeoQuery.fromId(id).use { q -> expect(q.queryId() == id) { "${q.queryId()} vs $id" } }
        }
        expect(GeoQuery.threshold(100_000.0, 20_000.0).queryId() == "threshold:T=100000;w=20000") { "threshold id" }
        for (bad in listOf("", "threshold", "threshold:T=1;w=0", "circle:r=1", "kde:t=;h=1")) {
            assertThrows<GeoprivException.InvalidParameter>("fromId '$bad'") { GeoQuery.fromId(bad) }
        }
    }

    // ---- bad parameters: InvalidParameter with a message naming them ----

    test("bad widths are refused") {
        for (w in badPositive) {
            assertThrows<GeoprivException.InvalidParameter>("threshold width $w", "width") { GeoQuery.threshold(0.0, w) }
            assertThrows<GeoprivException.InvalidParameter>("interval width $w", "width") { GeoQuery.interval(0.0, 10.0, w) }
            assertThrows<GeoprivException.InvalidParameter>("two-way width $w", "width") { GeoQuery.twoWay(0.0, 0.0, w) }
            assertThrows<GeoprivException.InvalidParameter>("kde bandwidth $w", "bandwidth") { GeoQuery.kde(listOf(0.0), w) }
        }
    }

    test("non-finite thresholds are refused") {
        for (t in nonFinite) {
            assertThrows<GeoprivException.InvalidParameter>("threshold $t") { GeoQuery.threshold(t, 1.0) }
            assertThrows<GeoprivException.InvalidParameter>("interval lower $t") { GeoQuery.interval(t, 10.0, 1.0) }
            assertThrows<GeoprivException.InvalidParameter>("interval upper $t") { GeoQuery.interval(0.0, t, 1.0) }
            assertThrows<GeoprivException.InvalidParameter>("two-way T1 $t") { GeoQuery.twoWay(t, 0.0, 1.0) }
            assertThrows<GeoprivException.InvalidParameter>("two-way T2 $t") { GeoQuery.twoWay(0.0, t, 1.0) }
        }
    }

    test("an interval narrower than its ramps is refused") {
        assertThrows<GeoprivException.InvalidParameter>("b - a < width", "width") { GeoQuery.interval(0.0, 1.0, 2.0) }
        assertThrows<GeoprivException.InvalidParameter>("b < a") { GeoQuery.interval(10.0, 0.0, 1.0) }
    }

    test("bad growth rates are refused") {
        GeoQuery.threshold(0.0, 1.0).use { q ->
            for (g in badPositive) {
                assertThrows<GeoprivException.InvalidParameter>("exp rate $g", "gamma") {
                    q.smoothSensitivity(listOf(0.0), Growth.Exponential(g))
                }
                assertThrows<GeoprivException.InvalidParameter>("linear rate $g", "gamma") {
                    q.smoothSensitivity(listOf(0.0), Growth.Linear(g))
                }
            }
        }
    }

    test("bad kde centres are refused") {
        assertThrows<GeoprivException.InvalidInput>("empty centre") { GeoQuery.kde(emptyList(), 1.0) }
        for (c in nonFinite) {
            assertThrows<GeoprivException.InvalidInput>("centre $c", "coordinate") { GeoQuery.kde(listOf(0.0, c), 1.0) }
        }
    }

    // ---- bad points: InvalidInput for every query and every method ----

    test("bad points are refused by every method") {
        val queries = listOf(
            GeoQuery.threshold(0.0, 1.0),
            GeoQuery.interval(0.0, 10.0, 1.0),
            GeoQuery.twoWay(0.0, 0.0, 1.0),
            GeoQuery.kde(listOf(0.0, 0.0), 1.0),
        )
        for (q in queries) {
            val d = q.dimension().toInt()
            val good = List(d) { 0.5 }
            val bad = mutableListOf<Pair<String, List<Double>>>(
                "empty" to emptyList(),
                "one too many" to good + 1.0,
            )
            if (d > 1) bad += "one too few" to good.drop(1)
            for (nf in nonFinite) bad += "coordinate $nf" to good.dropLast(1) + nf
            for ((name, x) in bad) {
                val needle = if (name.startsWith("coordinate")) "finite" else "coordinate"
                assertThrows<GeoprivException.InvalidInput>("$q value $name", needle) { q.value(x) }
                assertThrows<GeoprivException.InvalidInput>("$q L $name", needle) { q.pointwiseLipschitz(x) }
                assertThrows<GeoprivException.InvalidInput>("$q S* $name", needle) {
                    q.smoothSensitivity(x, Growth.Exponential(1.0))
                }
            }
            q.close()
        }
    }

    // ---- objects: thread safety and lifetime ----

    test("one query shared by many threads") {
        GeoQuery.threshold(100.0, 10.0).use { q ->
            val pool = Executors.newFixedThreadPool(4)
            try {
                val tasks = (0 until 4).map { t ->
                    Callable {
                        var sum = 0.0
                        for (i in 0 until 200) {
                            val x = (i % 200).toDouble() + t
                            sum += q.value(listOf(x)) + q.smoothSensitivity(listOf(x), Growth.Exponential(0.01))
                        }
                        sum
                    }
                }
                val sums = pool.invokeAll(tasks).map { it.get() }
                // Recompute serially; the threads must agree exactly.
                for ((t, s) in sums.withIndex()) {
                    var want = 0.0
                    for (i in 0 until 200) {
                        val x = (i % 200).toDouble() + t
                        want += q.value(listOf(x)) + q.smoothSensitivity(listOf(x), Growth.Exponential(0.01))
                    }
                    expect(s == want) { "thread $t: $s vs $want" }
                }
            } finally {
                pool.shutdown()
                pool.awaitTermination(10, TimeUnit.SECONDS)
            }
        }
    }

    test("using a closed object throws instead of crashing") {
        val q = GeoQuery.threshold(0.0, 1.0)
        q.close()
        try {
            q.value(listOf(0.0))
            throw AssertionError("no exception after close()")
        } catch (e: IllegalStateException) {
            // uniffi refuses calls on destroyed objects.
        }
    }

    test("many short-lived objects") {
        repeat(2000) { i -> GeoQuery.kde(listOf(i.toDouble(), 0.0), 1.0).use { it.dimension() } }
    }

    mechanismTests()
    locationTests()
    reportTests()
    budgetTests()
    counterTests()
    aggregateTests()
    unbiasednessTests()
    concurrencyTests()
    readmeExampleTests()

    println("kotlin: $passed passed, $failed failed")
    if (failed != 0) exitProcess(1)
}

// ---- mechanisms ----

private fun allMechanisms(eps: Double): List<Pair<String, () -> GeoMechanism>> = listOf(
    "polyplace" to { GeoMechanism.polyplace(eps) },
    "polyplaceWith" to { GeoMechanism.polyplaceWith(eps, 0.2) },
    "studentT" to { GeoMechanism.studentT(eps) },
    "studentTWith" to { GeoMechanism.studentTWith(eps, 4.0, 0.3) },
    "cauchy" to { GeoMechanism.cauchy(eps) },
    "cauchyWith" to { GeoMechanism.cauchyWith(eps, 5.0, 0.3) },
    "laplace" to { GeoMechanism.laplace(eps, 1e-6) },
    "laplaceWith" to { GeoMechanism.laplaceWith(eps, 1e-6, 0.4) },
    "globalLaplace" to { GeoMechanism.globalLaplace(eps) },
    "noiseAPriori" to { GeoMechanism.noiseAPriori(eps) },
    "localDp" to { GeoMechanism.localDp(eps) },
)

private fun mechanismTests() {
    test("every mechanism refuses NaN, infinite, zero and negative epsilon") {
        for (eps in badPositive) {
            for ((name, make) in allMechanisms(eps)) {
                assertThrows<GeoprivException.InvalidParameter>("$name($eps)", "epsilon") { make() }
            }
        }
    }

    test("mechanism parameters are checked") {
        for (d in listOf(0.0, 1.0, -1e-9, Double.NaN, Double.POSITIVE_INFINITY)) {
            assertThrows<GeoprivException.InvalidParameter>("laplace delta $d", "delta") { GeoMechanism.laplace(1.0, d) }
        }
        for (share in listOf(0.0, 1.0, -0.5, 1.5, Double.NaN)) {
            assertThrows<GeoprivException.InvalidParameter>("polyplace share $share", "share") { GeoMechanism.polyplaceWith(1.0, share) }
            assertThrows<GeoprivException.InvalidParameter>("student-t share $share", "share") { GeoMechanism.studentTWith(1.0, 3.0, share) }
            assertThrows<GeoprivException.InvalidParameter>("cauchy share $share", "share") { GeoMechanism.cauchyWith(1.0, 4.0, share) }
        }
        for (dof in listOf(1.0, 0.5, -1.0, Double.NaN, Double.POSITIVE_INFINITY)) {
            assertThrows<GeoprivException.InvalidParameter>("dof $dof", "dof") { GeoMechanism.studentTWith(1.0, dof, 0.3) }
        }
        for (k in listOf(2.0, 1.0, Double.NaN, Double.POSITIVE_INFINITY)) {
            assertThrows<GeoprivException.InvalidParameter>("k $k", "k") { GeoMechanism.cauchyWith(1.0, k, 0.3) }
        }
    }

    test("every mechanism releases a report without S or the scale") {
        val q = GeoQuery.threshold(100.0, 10.0)
        for ((name, make) in allMechanisms(0.05)) {
            make().use { m ->
                val r = m.privatizeUnmetered(q, listOf(42.0))
                expect(r.value.isFinite()) { "$name value ${r.value}" }
                expect(r.queryId == "threshold:T=100;w=10") { "$name id ${r.queryId}" }
                expect(r.mechanism == m.name()) { "$name: ${r.mechanism} vs ${m.name()}" }
                expect(r.epsilon == 0.05 && r.delta == m.delta()) { "$name eps/delta" }
                expect(r.json.startsWith("{\"version\":2,") && '\n' !in r.json) { "$name json ${r.json}" }
                for (leak in listOf("scale", "sensitivity", "sigma")) expect(leak !in r.json) { "$name leaks $leak: ${r.json}" }
                expect(r.bytes.size in 30..64) { "$name bytes ${r.bytes.size}" }
            }
        }
        GeoMechanism.polyplace(0.001).use { m ->
            expect(m.name() == MechanismName.POLYPLACE && m.epsilon() == 0.001 && m.delta() == 0.0) { "$m" }
            expect(abs(m.smoothnessShare()!! - 1.0 / 9) < 1e-15) { "share ${m.smoothnessShare()}" }
            val g = m.growth()
            expect(g is Growth.Exponential && abs(g.rate - 0.001 / 9) < 1e-18) { "growth $g" }
            expect(!m.isSeeded() && "polyplace" in m.toString()) { "$m" }
        }
        expect(GeoMechanism.laplace(1.0, 1e-6).growth() is Growth.Linear) { "laplace growth" }
        expect(GeoMechanism.globalLaplace(1.0).growth() == null) { "baseline growth" }
    }

    test("bad points are refused by privatize") {
        val m = GeoMechanism.cauchy(0.1)
        for (q in listOf(GeoQuery.threshold(0.0, 1.0), GeoQuery.twoWay(0.0, 0.0, 1.0), GeoQuery.kde(listOf(0.0, 0.0, 0.0), 1.0))) {
            val d = q.dimension().toInt()
            val bad = mutableListOf(emptyList<Double>(), List(d + 1) { 0.5 })
            if (d > 1) bad += List(d - 1) { 0.5 }
            for (nf in nonFinite) bad += List(d - 1) { 0.5 } + nf
            for (x in bad) assertThrows<GeoprivException.InvalidInput>("privatize $q at $x") { m.privatizeUnmetered(q, x) }
        }
    }

    test("a seeded mechanism is reproducible and says it is not secure") {
        val q = GeoQuery.kde(listOf(0.0, 0.0), 100.0)
        val m = GeoMechanism.polyplace(0.01)
        fun run(seed: ULong) = m.seeded(seed).let { s -> List(5) { i -> s.privatizeUnmetered(q, listOf(i.toDouble(), 30.0)).value } }
        expect(run(7uL) == run(7uL)) { "same seed, same values" }
        expect(run(7uL) != run(8uL)) { "different seeds" }
        val s = m.seeded(1uL)
        expect(s.isSeeded() && "NOT SECURE" in s.toString()) { "$s" }
        // The secure default never repeats.
        expect(m.privatizeUnmetered(q, listOf(1.0, 1.0)).value != m.privatizeUnmetered(q, listOf(1.0, 1.0)).value) { "secure draws repeat" }
    }
}

// ---- lat/lon ----

private val paris = Projection.LocalEquirectangular(refLat = 48.8566, refLon = 2.3522)

private fun locationTests() {
    test("project: metres around the reference, Web Mercator") {
        val o = project(48.8566, 2.3522, paris)
        expect(o == listOf(0.0, 0.0)) { "reference -> $o" }
        val louvre = project(48.8606, 2.3376, paris)
        expect(abs(hypot(louvre[0], louvre[1]) - 1170.0) < 10.0 && louvre[0] < 0 && louvre[1] > 0) { "louvre $louvre" }
        val m = project(0.0, 180.0, Projection.WebMercator)
        expect(abs(m[0] - Math.PI * 6_378_137.0) < 1e-6 && m[1] == 0.0) { "mercator $m" }
    }

    test("bad locations are InvalidInput, bad projections and query points InvalidParameter") {
        val badLocations = listOf(Double.NaN to 2.0, 48.0 to Double.NaN, Double.POSITIVE_INFINITY to 2.0, 48.0 to Double.NEGATIVE_INFINITY, 90.5 to 0.0, -91.0 to 0.0, 0.0 to 180.5)
        val q = GeoQuery.kdeLatlon(48.86, 2.34, 250.0, paris)
        val m = GeoMechanism.polyplace(1e-3)
        for ((lat, lon) in badLocations) {
            assertThrows<GeoprivException.InvalidInput>("project $lat,$lon", "location") { project(lat, lon, paris) }
            assertThrows<GeoprivException.InvalidInput>("privatizeLatlon $lat,$lon", "location") { m.privatizeLatlonUnmetered(q, lat, lon, paris) }
            assertThrows<GeoprivException.InvalidParameter>("kdeLatlon centre $lat,$lon") { GeoQuery.kdeLatlon(lat, lon, 250.0, paris) }
            assertThrows<GeoprivException.InvalidParameter>("twoWayLatlon corner $lat,$lon") { GeoQuery.twoWayLatlon(lat, lon, 100.0, paris) }
        }
        assertThrows<GeoprivException.InvalidInput>("mercator beyond 85.05", "latitude") { project(86.0, 0.0, Projection.WebMercator) }
        for ((rlat, rlon) in listOf(90.0 to 0.0, -90.0 to 0.0, Double.NaN to 0.0, 0.0 to 200.0)) {
            assertThrows<GeoprivException.InvalidParameter>("reference $rlat,$rlon", "reference") {
                project(0.0, 0.0, Projection.LocalEquirectangular(rlat, rlon))
            }
        }
        for (h in badPositive) {
            assertThrows<GeoprivException.InvalidParameter>("kdeLatlon bandwidth $h", "bandwidth") { GeoQuery.kdeLatlon(48.86, 2.34, h, paris) }
            assertThrows<GeoprivException.InvalidParameter>("twoWayLatlon width $h", "width") { GeoQuery.twoWayLatlon(48.86, 2.34, h, paris) }
        }
        assertThrows<GeoprivException.InvalidParameter>("projection mismatch", "projection") {
            m.privatizeLatlonUnmetered(q, 48.86, 2.34, Projection.WebMercator)
        }
        assertThrows<GeoprivException.InvalidParameter>("1-D query from lat/lon", "2-D") {
            m.privatizeLatlonUnmetered(GeoQuery.threshold(0.0, 1.0), 48.86, 2.34, paris)
        }
    }

    test("lat/lon queries: ids, values and the two-way quadrant") {
        val k = GeoQuery.kdeLatlon(48.8566, 2.3522, 250.0, paris)
        expect(k.queryId() == "kde:t=0,0;h=250") { k.queryId() }
        expect("LocalEquirectangular" in k.toString()) { "$k" }
        // 250 m north of the centre: f = exp(-1/2).
        val north = project(48.8566 + 250.0 / 111_200.0, 2.3522, paris)
        expect(abs(k.value(north) - exp(-0.5)) < 0.01) { "f(250 m) ${k.value(north)}" }
        val w = GeoQuery.twoWayLatlon(48.8566, 2.3522, 100.0, paris)
        expect(w.value(project(48.87, 2.37, paris)) == 1.0) { "north-east is in" }
        expect(w.value(project(48.84, 2.37, paris)) == 0.0) { "south-east is out" }
        expect(w.value(project(48.87, 2.33, paris)) == 0.0) { "north-west is out" }
        val r = GeoMechanism.polyplace(1e-3).privatizeLatlonUnmetered(w, 48.87, 2.37, paris)
        expect(r.queryId == w.queryId() && r.value.isFinite()) { "$r" }
    }
}

// ---- reports and the server's policy ----

/** CRC-16/IBM-3740 (poly 0x1021, init 0xFFFF), the check of binary version 3. */
private fun crc16(bytes: ByteArray): Int {
    var crc = 0xffff
    for (b in bytes) {
        crc = crc xor ((b.toInt() and 0xff) shl 8)
        repeat(8) { crc = if (crc and 0x8000 != 0) ((crc shl 1) xor 0x1021) and 0xffff else (crc shl 1) and 0xffff }
    }
    return crc
}

/**
 * A polyplace threshold(100000, 20000) report at epsilon 1/8000 built by hand:
 * binary version 2 (legacy: optional trailing 0x01 when seeded) or 3 (mandatory
 * seeded byte, then the CRC-16 big-endian), as README's report format section says.
 */
private fun thresholdWire(version: Int, value: Double, reportId: ByteArray?, seeded: Boolean): ByteArray {
    val buf = java.nio.ByteBuffer.allocate(80).order(java.nio.ByteOrder.LITTLE_ENDIAN)
    buf.put(version.toByte()).put(0).putDouble(100_000.0).putDouble(20_000.0).put(0)
    buf.putDouble(1.0 / 8000).putDouble(0.0).putDouble(value)
    if (reportId == null) buf.put(0) else buf.put(1).put(reportId)
    if (version == 2) {
        if (seeded) buf.put(1)
        return buf.array().copyOf(buf.position())
    }
    buf.put(if (seeded) 1 else 0)
    val body = buf.array().copyOf(buf.position())
    val c = crc16(body)
    return body + byteArrayOf((c shr 8).toByte(), c.toByte())
}

private fun reportCode(e: GeoprivException): String = (e.message ?: "").substringAfterLast('[').substringBefore(']')

private fun reportTests() {
    val q = GeoQuery.threshold(100_000.0, 20_000.0)
    val m = GeoMechanism.polyplace(1.0 / 8000)
    val policy = ReportPolicy(1.0 / 4000, 0.0)

    test("a device report is accepted from JSON and from bytes") {
        val r = m.privatizeUnmetered(q, listOf(42_000.0))
        val got = policy.acceptJson(r.json)
        expect(got.value == r.value && got.queryId == q.queryId() && got.family == QueryFamily.THRESHOLD) { "$got" }
        expect(got.mechanism == MechanismName.POLYPLACE && got.epsilon == 1.0 / 8000 && got.delta == 0.0) { "$got" }
        expect(policy.acceptBytes(r.bytes) == got) { "bytes decode to the same report" }
        expect(policy.acceptJson("  ${r.json}\n") == got) { "surrounding whitespace" }
        expect(policy.maxEpsilon() == 1.0 / 4000 && policy.maxDelta() == 0.0) { "policy getters" }
    }

    test("bad reports raise InvalidReport with the reason") {
        val r = m.privatizeUnmetered(q, listOf(42_000.0))
        val badJson = listOf(
            "" to "empty", "   \n" to "empty", "{" to "truncated", "not a report" to "malformed", "{}" to "malformed",
            "[1,2,3]" to "malformed", "null" to "malformed",
            r.json.replace("\"value\"", "\"scale\":0.5,\"value\"") to "malformed",
            r.json.replace("\"version\":2", "\"version\":3") to "unsupported-version",
            r.json.replace("\"threshold\":100000.0", "\"threshold\":\"x\"") to "malformed",
            r.json.replace("\"width\":20000.0", "\"width\":0.0") to "invalid-query",
            r.json.replace(Regex("\"value\":[^}]*"), "\"value\":1e999") to "malformed",
            r.json.replace("\"epsilon\":0.000125", "\"epsilon\":-1.0") to "epsilon-out-of-policy",
            r.json.replace("\"delta\":0.0", "\"delta\":0.5") to "delta-out-of-policy",
        )
        for ((json, code) in badJson) {
            try {
                policy.acceptJson(json)
                throw AssertionError("accepted '$json'")
            } catch (e: GeoprivException.InvalidReport) {
                expect(reportCode(e) == code) { "'$json': code ${reportCode(e)}, expected $code (${e.message})" }
            }
        }
        val v4 = r.bytes.copyOf().also { it[0] = 4 } // binary version 3 is current (mandatory seeded byte, check)
        val badBytes = listOf(
            ByteArray(0) to "empty", ByteArray(7) { 0xff.toByte() } to "malformed",
            r.bytes.copyOf(r.bytes.size - 1) to "truncated", r.bytes + byteArrayOf(0) to "trailing-bytes",
            v4 to "unsupported-version", "garbage!".toByteArray() to "",
            r.json.toByteArray() to "",
        )
        for ((bytes, code) in badBytes) {
            try {
                policy.acceptBytes(bytes)
                throw AssertionError("accepted ${bytes.toList()}")
            } catch (e: GeoprivException.InvalidReport) {
                expect(code == "" || reportCode(e) == code) { "${bytes.size} bytes: code ${reportCode(e)}, expected $code" }
            }
        }
    }

    test("the policy's limits: epsilon, queries, mechanisms, local DP") {
        val r = m.privatizeUnmetered(q, listOf(42_000.0))
        fun refusedWith(code: String, p: ReportPolicy, json: String) =
            assertThrows<GeoprivException.InvalidReport>("refused $code", code) { p.acceptJson(json) }
        refusedWith("epsilon-out-of-policy", ReportPolicy(1.0 / 10_000, 0.0), r.json)
        refusedWith("unknown-query", policy.onlyQueries(listOf(GeoQuery.threshold(50_000.0, 20_000.0))), r.json)
        policy.onlyQueries(listOf(q)).acceptJson(r.json)
        refusedWith("mechanism-not-allowed", policy.onlyMechanisms(listOf(MechanismName.STUDENT_T)), r.json)
        val ldp = GeoMechanism.localDp(1.0).privatizeUnmetered(q, listOf(1.0))
        refusedWith("mechanism-not-allowed", policy, ldp.json)
        policy.allowLdp(2.0).acceptJson(ldp.json)
        val lap = GeoMechanism.laplace(1.0 / 8000, 1e-6).privatizeUnmetered(q, listOf(1.0))
        refusedWith("delta-out-of-policy", policy, lap.json)
        ReportPolicy(1.0 / 4000, 1e-5).acceptJson(lap.json)
        for (bad in badPositive) {
            assertThrows<GeoprivException.InvalidParameter>("policy max epsilon $bad") { ReportPolicy(bad, 0.0) }
            assertThrows<GeoprivException.InvalidParameter>("allowLdp $bad") { policy.allowLdp(bad) }
        }
        for (bad in listOf(-0.1, 1.0, Double.NaN)) {
            assertThrows<GeoprivException.InvalidParameter>("policy max delta $bad") { ReportPolicy(1.0, bad) }
        }
    }
}

// ---- the device ledger (docs/MATH.md §8.3) ----

private val perMetre = BudgetPolicy(BudgetUnit.PerMetre, 0.25, 0.0)

private fun tempLedgerPath(name: String): String {
    val dir = java.nio.file.Files.createTempDirectory("geopriv-ledger-")
    return dir.resolve(name).toString()
}

private fun budgetTests() {
    val q = GeoQuery.threshold(0.0, 1.0)

    test("ledger: privatize is metered; a refused release raises BudgetExceeded and leaves the ledger unchanged") {
        val m = GeoMechanism.polyplace(0.1).withUnit(BudgetUnit.PerMetre)
        val ledger = PrivacyLedger.inMemory(perMetre)
        repeat(2) { m.privatize(ledger, q, listOf(0.3)) }
        val before = ledger.status()
        expect(before.releases == 2uL && abs(before.remainingEpsilon - 0.05) < 1e-12 && before.totalEpsilon == 0.25 && before.unit == BudgetUnit.PerMetre) { "$before" }
        expect(!ledger.canAfford(m)) { "canAfford" }
        assertThrows<GeoprivException.BudgetExceeded>("third release", "budget") { m.privatize(ledger, q, listOf(0.3)) }
        // δ counts too: an approximate release on a pure budget.
        assertThrows<GeoprivException.BudgetExceeded>("delta on a pure budget", "delta") {
            GeoMechanism.laplace(0.01, 1e-6).withUnit(BudgetUnit.PerMetre).privatize(ledger, q, listOf(0.3))
        }
        // lat/lon input is per projected metre without withUnit.
        assertThrows<GeoprivException.BudgetExceeded>("lat/lon release", "budget") {
            GeoMechanism.polyplace(0.1).privatizeLatlon(ledger, GeoQuery.kdeLatlon(48.86, 2.35, 100.0, paris), 48.86, 2.35, paris)
        }
        // A failed release (bad point) is not charged.
        val fresh = PrivacyLedger.inMemory(perMetre)
        for (x in listOf(listOf(Double.NaN), emptyList(), listOf(1.0, 2.0))) {
            assertThrows<GeoprivException.InvalidInput>("bad point $x") { m.privatize(fresh, q, x) }
        }
        expect(ledger.status() == before && fresh.status().releases == 0uL) { "changed by refusals" }
    }

    test("ledger: units must match (local DP, per dollar, unstated)") {
        val ledger = PrivacyLedger.inMemory(perMetre)
        assertThrows<GeoprivException.UnitMismatch>("local DP into per metre", "unit") {
            GeoMechanism.localDp(0.1).privatize(ledger, q, listOf(0.3))
        }
        assertThrows<GeoprivException.UnitMismatch>("per dollar into per metre", "unit") {
            GeoMechanism.polyplace(0.1).withUnit(BudgetUnit.PerDollar).privatize(ledger, q, listOf(0.3))
        }
        assertThrows<GeoprivException.UnitMismatch>("unit not stated", "with_unit") {
            GeoMechanism.polyplace(0.1).privatize(ledger, q, listOf(0.3))
        }
        assertThrows<GeoprivException.UnitMismatch>("a GP mechanism cannot be local DP") {
            GeoMechanism.polyplace(0.1).withUnit(BudgetUnit.LocalDp)
        }
        expect(ledger.status().releases == 0uL) { "charged by a refusal" }
        val ldp = PrivacyLedger.inMemory(BudgetPolicy(BudgetUnit.LocalDp, 1.0, 0.0))
        GeoMechanism.localDp(0.5).privatize(ldp, q, listOf(0.3))
        val km = BudgetUnit.Custom("per-km")
        GeoMechanism.polyplace(0.1).withUnit(km).privatize(PrivacyLedger.inMemory(BudgetPolicy(km, 1.0, 0.0)), q, listOf(0.3))
        expect(ldp.status().releases == 1uL) { "${ldp.status()}" }
    }

    test("ledger: the pinned policy refuses edited, reset or foreign states") {
        val ledger = PrivacyLedger.inMemory(BudgetPolicy(BudgetUnit.PerMetre, 1.0, 1e-6))
        val share = ledger.evenSplit(10uL)!!
        expect(share.epsilon > 0.1 * (1 - 1e-12) && share.delta > 1e-7 * (1 - 1e-12)) { "$share" }
        val m = GeoMechanism.laplace(share.epsilon, share.delta).withUnit(BudgetUnit.PerMetre)
        repeat(3) { m.privatize(ledger, q, listOf(0.5)) }
        val json = ledger.toJson()
        val pinned = BudgetPolicy(BudgetUnit.PerMetre, 1.0, 1e-6)
        expect(PrivacyLedger.restore(json, pinned).status() == ledger.status()) { "round trip $json" }
        val refused = listOf(
            json to BudgetPolicy(BudgetUnit.PerMetre, 2.0, 1e-6),           // the app's total changed
            json to BudgetPolicy(BudgetUnit.PerDollar, 1.0, 1e-6),          // another unit
            json.replace("\"total_epsilon\":1.0", "\"total_epsilon\":1e300") to pinned, // raised total
            json.replace("\"releases\":3", "\"releases\":0") to pinned,    // counter reset
            "{" to pinned,
        )
        for ((state, policy) in refused) {
            assertThrows<GeoprivException.LedgerRefused>("restore '$state'", "ledger refused") { PrivacyLedger.restore(state, policy) }
        }
        for ((e, d) in listOf(0.0 to 0.0, Double.NaN to 0.0, 1.0 to 1.0)) {
            assertThrows<GeoprivException.InvalidParameter>("policy($e, $d)") { PrivacyLedger.inMemory(BudgetPolicy(BudgetUnit.PerMetre, e, d)) }
        }
    }

    test("ledger: file-backed, written before the report is returned; a crash loses the report, never the charge") {
        val path = tempLedgerPath("ledger.json")
        val filePolicy = BudgetPolicy(BudgetUnit.PerMetre, 1.0, 0.0)
        assertThrows<GeoprivException.LedgerIo>("open a missing file") { PrivacyLedger.open(path, filePolicy) }
        val m = GeoMechanism.polyplace(0.1).withUnit(BudgetUnit.PerMetre)
        var ledger = PrivacyLedger.openOrCreate(path, filePolicy)
        m.privatize(ledger, q, listOf(0.3)) // the app dies before uploading: the report is lost
        ledger.close()
        // Restart: the charge is on disk.
        ledger = PrivacyLedger.open(path, filePolicy)
        expect(ledger.status().releases == 1uL && ledger.status().spentEpsilon == 0.1) { "${ledger.status()}" }
        assertThrows<GeoprivException.LedgerIo>("create over an existing ledger") { PrivacyLedger.create(path, filePolicy) }
        assertThrows<GeoprivException.LedgerRefused>("another pinned total") {
            PrivacyLedger.open(path, BudgetPolicy(BudgetUnit.PerMetre, 2.0, 0.0))
        }
        // A stale temporary file from a crash mid-write is harmless.
        java.io.File(java.io.File(path).parent, ".ledger.json.tmp").writeText("{\"partial")
        m.privatize(ledger, q, listOf(0.3))
        expect(PrivacyLedger.open(path, filePolicy).status().releases == 2uL) { "second charge on disk" }
        // If the charge cannot be written, no report comes back.
        val dir = java.io.File(path).parentFile
        dir.deleteRecursively()
        dir.writeText("not a directory")
        assertThrows<GeoprivException.LedgerIo>("unwritable ledger") { m.privatize(ledger, q, listOf(0.3)) }
        expect(ledger.status().releases == 2uL) { "charged without a write" }
        dir.delete()
    }

    test("ledger: seeded reports are marked and refused by servers unless accepted") {
        val r = GeoMechanism.polyplace(0.1).seeded(3uL).privatizeUnmetered(q, listOf(0.3))
        val secure = GeoMechanism.polyplace(0.1).privatizeUnmetered(q, listOf(0.3))
        expect(r.seeded && !secure.seeded && r.json.contains("\"seeded\":true")) { r.json }
        val policy = ReportPolicy(1.0, 0.0)
        assertThrows<GeoprivException.InvalidReport>("seeded JSON", "[seeded]") { policy.acceptJson(r.json) }
        assertThrows<GeoprivException.InvalidReport>("seeded bytes", "[seeded]") { policy.acceptBytes(r.bytes) }
        expect(policy.acceptSeeded().acceptJson(r.json).seeded) { "acceptSeeded" }
        expect(!policy.acceptJson(secure.json).seeded) { "secure report" }
    }

    test("binary reports: no proper prefix is a report, seeded stays refused, legacy version 2 still read (attack7 O3)") {
        expect(crc16(byteArrayOf(0x31, 0x32, 0x33, 0x34, 0x35, 0x36, 0x37, 0x38, 0x39)) == 0x29B1) { "CRC-16/IBM-3740" }
        val queries = listOf(
            GeoQuery.threshold(100.0, 10.0) to listOf(42.0),
            GeoQuery.interval(10.0, 90.0, 10.0) to listOf(42.0),
            GeoQuery.twoWay(30.0, 70.0, 10.0) to listOf(42.0, 42.0),
            GeoQuery.kde(listOf(1.0, 2.0), 5.0) to listOf(1.5, 2.5),
        )
        val lax = ReportPolicy(1.0, 1e-5).allowLdp(1.0)
        var n = 0
        for ((name, make) in allMechanisms(0.05)) {
            for (seed in listOf<ULong?>(null, 5uL)) {
                val m0 = make()
                val mech = if (seed == null) m0 else m0.seeded(seed)
                for ((query, x) in queries) {
                    val r = try {
                        mech.privatizeUnmetered(query, x)
                    } catch (e: GeoprivException.InvalidParameter) {
                        continue // a family this mechanism does not answer
                    }
                    n++
                    val b = r.bytes
                    expect(b[0] == 3.toByte() && b[b.size - 3] == (if (seed == null) 0 else 1).toByte()) { "$name ${b.toList()}" }
                    expect(lax.acceptSeeded().acceptBytes(b).value == r.value) { "$name round trip" }
                    if (seed != null) assertThrows<GeoprivException.InvalidReport>("$name seeded", "[seeded]") { lax.acceptBytes(b) }
                    for (cut in 0 until b.size) {
                        try {
                            lax.acceptSeeded().acceptBytes(b.copyOf(cut))
                            throw AssertionError("$name: $cut of ${b.size} bytes accepted")
                        } catch (e: GeoprivException.InvalidReport) {
                            val want = if (cut == 0) "empty" else "truncated"
                            expect(reportCode(e) == want) { "$name cut $cut: ${reportCode(e)}" }
                        }
                    }
                }
            }
        }
        expect(n >= 50) { "only $n reports" }
        // The library's bytes are the documented layout.
        val plain = GeoMechanism.polyplace(1.0 / 8000).privatizeUnmetered(GeoQuery.threshold(100_000.0, 20_000.0), listOf(123_456.0))
        val plainId = if (plain.bytes[43] == 1.toByte()) plain.bytes.copyOfRange(44, 60) else null
        expect(plain.bytes.contentEquals(thresholdWire(3, plain.value, plainId, false))) { "layout ${plain.bytes.toList()}" }
        // Binary version 3 with an id: every cut refused, no id read from one.
        val rid = ByteArray(16) { it.toByte() }
        val ridHex = rid.joinToString("") { "%02x".format(it) }
        val v3 = thresholdWire(3, 0.25, rid, true)
        expect(reportIdOfFrame(v3) == ridHex) { "${reportIdOfFrame(v3)}" }
        val strict = ReportPolicy(1e-3, 0.0)
        assertThrows<GeoprivException.InvalidReport>("seeded v3", "[seeded]") { strict.acceptBytes(v3) }
        for (cut in 0 until v3.size) {
            expect(reportIdOfFrame(v3.copyOf(cut)) == null) { "id of a $cut-byte cut" }
            assertThrows<GeoprivException.InvalidReport>("v3 cut $cut") { strict.acceptBytes(v3.copyOf(cut)) }
        }
        // One damaged byte anywhere (the seeded byte 1 -> 0 included) is refused.
        for (pos in v3.indices) {
            for (x in listOf(0x01, 0x80, 0xff)) {
                val bad = v3.copyOf().also { it[pos] = (it[pos].toInt() xor x).toByte() }
                assertThrows<GeoprivException.InvalidReport>("damage $pos^$x") { strict.acceptSeeded().acceptBytes(bad) }
            }
        }
        // Legacy binary version 2 (devices in the field) is still read, with
        // the documented hole: its seeded report cut by the last byte is unseeded.
        val old = thresholdWire(2, 0.25, rid, true)
        expect(old.size == 61 && reportIdOfFrame(old) == ridHex) { "${old.size}" }
        assertThrows<GeoprivException.InvalidReport>("seeded v2", "[seeded]") { strict.acceptBytes(old) }
        val got = strict.acceptBytes(old.copyOf(60))
        expect(!got.seeded && got.value == 0.25 && reportIdOfFrame(old.copyOf(60)) == ridHex) { "$got" }
    }
}

// ---- the platform monotonic counter, implemented by the app (docs/MATH.md §8.3) ----

/** An app-side counter: in memory here; a keystore or TPM counter in an app. */
private class AppCounter(start: Long = 0) : MonotonicCounter {
    val value = java.util.concurrent.atomic.AtomicLong(start)
    var failWith: Throwable? = null
    override fun read(): ULong {
        failWith?.let { throw it }
        return value.get().toULong()
    }
    override fun advanceTo(value: ULong) {
        failWith?.let { throw it }
        this.value.accumulateAndGet(value.toLong()) { a, b -> max(a, b) }
    }
}

private fun counterTests() {
    val q = GeoQuery.threshold(0.0, 1.0)
    val m = GeoMechanism.polyplace(0.1).withUnit(BudgetUnit.PerMetre)
    val policy = BudgetPolicy(BudgetUnit.PerMetre, 0.5, 0.0)

    test("counter: a rolled-back file is refused; a writer without the counter cannot refill it (attack10 O1)") {
        val path = tempLedgerPath("ledger.json")
        val counter = AppCounter()
        val app = PrivacyLedger.openOrCreateWithCounter(path, policy, counter)
        expect(app.isCounterBound()) { "not bound" }
        m.privatize(app, q, listOf(0.3))
        val backup = java.io.File(path).readText()
        repeat(2) { m.privatize(app, q, listOf(0.3)) }
        app.close()
        expect(counter.value.get() == 3L) { "counter ${counter.value.get()}" }
        expect(java.io.File(path).readText().contains("\"counter_bound\":true")) { "mark" }
        java.io.File(path).writeText(backup) // the rollback
        // A writer without the counter (a background job) may read, not charge.
        val job = PrivacyLedger.open(path, policy)
        expect(job.status().releases == 1uL && job.isCounterBound()) { "${job.status()}" }
        assertThrows<GeoprivException.LedgerRefused>("charge without the counter", "monotonic counter") {
            m.privatize(job, q, listOf(0.3))
        }
        job.close()
        expect(PrivacyLedger.open(path, policy).status().releases == 1uL) { "refilled" }
        // The app, with its counter, refuses the rolled-back file.
        assertThrows<GeoprivException.LedgerRefused>("the app reopens the rolled-back file", "platform counter says 3") {
            PrivacyLedger.openOrCreateWithCounter(path, policy, counter)
        }
        assertThrows<GeoprivException.LedgerRefused>("openWithCounter", "rolled back") {
            PrivacyLedger.openWithCounter(path, policy, counter)
        }
    }

    test("counter: a deleted ledger file is not recreated while the counter counts releases") {
        val path = tempLedgerPath("ledger.json")
        val counter = AppCounter(start = 2)
        assertThrows<GeoprivException.LedgerRefused>("openOrCreate", "deleted") { PrivacyLedger.openOrCreateWithCounter(path, policy, counter) }
        assertThrows<GeoprivException.LedgerRefused>("create", "deleted") { PrivacyLedger.createWithCounter(path, policy, counter) }
        expect(!java.io.File(path).exists()) { "a fresh file was left behind" }
        // A fresh device (counter 0) creates and binds it.
        val fresh = PrivacyLedger.createWithCounter(path, policy, AppCounter())
        expect(fresh.isCounterBound() && !PrivacyLedger.inMemory(policy).isCounterBound()) { "binding" }
    }

    test("counter: a counter that throws is a LedgerIo exception, never a crash; nothing is released") {
        val path = tempLedgerPath("ledger.json")
        val counter = AppCounter()
        counter.failWith = CounterException.Unavailable("StrongBox is locked\n\u001b[2J")
        assertThrows<GeoprivException.LedgerIo>("open with a locked counter", "StrongBox is locked\\n") {
            PrivacyLedger.openOrCreateWithCounter(path, policy, counter)
        }
        counter.failWith = null
        val app = PrivacyLedger.openOrCreateWithCounter(path, policy, counter)
        m.privatize(app, q, listOf(0.3))
        // Declared and undeclared exceptions alike.
        for (e in listOf(CounterException.Unavailable("TPM busy"), IllegalStateException("keystore gone"))) {
            counter.failWith = e
            val needle = if (e is CounterException) "TPM busy" else "keystore gone"
            assertThrows<GeoprivException.LedgerIo>("release with a failing counter ($e)", needle) { m.privatize(app, q, listOf(0.3)) }
            assertThrows<GeoprivException.LedgerIo>("refresh with a failing counter") { app.refresh() }
        }
        counter.failWith = null
        expect(app.status().releases == 1uL) { "${app.status()}" }
        m.privatize(app, q, listOf(0.3))
        expect(app.status().releases == 2uL && counter.value.get() == 2L) { "${app.status()} ${counter.value.get()}" }
        // A counter that goes back is not monotonic: refused.
        counter.value.set(0)
        assertThrows<GeoprivException.LedgerRefused>("counter went back", "went back") { m.privatize(app, q, listOf(0.3)) }
    }

    test("counter: an Error thrown in advanceTo (uniffi catches only Exception) is caught by the read-back (attack12)") {
        // TODO() throws NotImplementedError, a kotlin.Error: JNA prints it
        // and the call reached Rust as a success, the counter unmoved.
        val path = tempLedgerPath("ledger.json")
        val counter = object : MonotonicCounter {
            val inner = AppCounter()
            var broken = false
            override fun read(): ULong = inner.read()
            override fun advanceTo(value: ULong) = if (broken) TODO("keystore counter") else inner.advanceTo(value)
        }
        val app = PrivacyLedger.openOrCreateWithCounter(path, policy, counter)
        m.privatize(app, q, listOf(0.3))
        counter.broken = true
        assertThrows<GeoprivException.LedgerIo>("release whose advanceTo threw an Error", "did not advance") {
            m.privatize(app, q, listOf(0.3))
        }
        expect(counter.inner.value.get() == 1L) { "counter ${counter.inner.value.get()}" }
    }

    test("counter: a counter that calls its ledger gets an exception, the app does not hang (attack12)") {
        val path = tempLedgerPath("ledger.json")
        val inner = AppCounter()
        var ledger: PrivacyLedger? = null
        val counter = object : MonotonicCounter {
            override fun read(): ULong = inner.read()
            override fun advanceTo(value: ULong) {
                ledger?.status()
                inner.advanceTo(value)
            }
        }
        val app = PrivacyLedger.openOrCreateWithCounter(path, policy, counter)
        ledger = app
        val outcome = java.util.concurrent.Executors.newSingleThreadExecutor { r -> Thread(r).apply { isDaemon = true } }
            .submit<Throwable?> { try { m.privatize(app, q, listOf(0.3)); null } catch (e: Throwable) { e } }
        val e = outcome.get(20, java.util.concurrent.TimeUnit.SECONDS)
        expect(e is GeoprivException.LedgerIo && e.message!!.contains("inside a MonotonicCounter")) { "$e" }
        ledger = null
        expect(app.status().releases == 1uL) { "${app.status()}" }
    }
}

// ---- aggregation ----

private fun aggregateTests() {
    test("aggregator: textbook estimate, exact merge, state round trip") {
        val all = Aggregator()
        expect(all.estimate() == null && all.count() == 0uL) { "empty" }
        all.addValues(listOf(1.0, 2.0, 3.0, 4.0, 10.0))
        val e = all.estimate()!!
        expect(e.n == 5uL && e.sum == 20.0 && e.mean == 4.0 && e.sampleVariance == 12.5) { "$e" }
        val se = sqrt(12.5 / 5)
        expect(abs(e.standardError!! - se) < 1e-15 && abs(e.ci95Low!! - (4 - 1.959963984540054 * se)) < 1e-12 && abs(e.ci95High!! - (4 + 1.959963984540054 * se)) < 1e-12) { "$e" }
        val single = Aggregator().also { it.addValue(2.5) }.estimate()!!
        expect(single.standardError == null && single.ci95Low == null && single.sampleVariance == null) { "n = 1: $single" }
        val a = Aggregator().also { it.addValues(listOf(1.0, 2.0)) }
        val b = Aggregator().also { it.addValue(3.0); it.addValue(4.0); it.addValue(10.0) }
        a.merge(b)
        expect(a.toJson() == all.toJson()) { "merge of halves != whole: ${a.toJson()} vs ${all.toJson()}" }
        expect(b.count() == 3uL) { "merge changed its argument" }
        val back = Aggregator.fromJson(all.toJson())
        expect(back.estimate() == e) { "from_json" }
        a.merge(a)
        expect(a.count() == 10uL && a.estimate()!!.mean == 4.0) { "self-merge" }
    }

    test("aggregator: bad values, reports and states leave it unchanged") {
        val a = Aggregator().also { it.addValue(1.0) }
        val before = a.toJson()
        for (v in nonFinite) {
            assertThrows<GeoprivException.InvalidParameter>("addValue $v", "value") { a.addValue(v) }
            assertThrows<GeoprivException.InvalidParameter>("addValues with $v", "nothing was added") { a.addValues(listOf(2.0, v)) }
        }
        for (s in listOf("", "   ", "{", "garbage", "{\"n\":1}", "{\"n\":0,\"sum\":{\"offset\":0,\"limbs\":[5]},\"sum_sq\":{\"offset\":0,\"limbs\":[]}}")) {
            assertThrows<GeoprivException.InvalidReport>("addReportJson '$s'") { a.addReportJson(s) }
            assertThrows<GeoprivException.InvalidReport>("Aggregator.fromJson '$s'") { Aggregator.fromJson(s) }
        }
        for (bytes in listOf(ByteArray(0), byteArrayOf(1), byteArrayOf(0xde.toByte(), 0xad.toByte(), 0xbe.toByte(), 0xef.toByte()))) {
            assertThrows<GeoprivException.InvalidReport>("addReportBytes ${bytes.size}") { a.addReportBytes(bytes) }
        }
        expect(a.toJson() == before) { "state changed" }
    }

    test("grid aggregator: routes reports to cells and refuses other queries") {
        val g = GridAggregator.kdeGrid(listOf(0.0, 100.0), listOf(0.0), 50.0)
        expect(g.size() == 2uL) { "size" }
        val ids = g.queryIds()
        val m = GeoMechanism.polyplace(0.01)
        val r = m.privatizeUnmetered(GeoQuery.fromId(ids[1]), listOf(90.0, 5.0))
        expect(g.addReportBytes(r.bytes).queryId == ids[1]) { "routed" }
        g.addReport(ReportPolicy(1.0, 0.0).acceptJson(r.json))
        expect(g.indexOf(ids[1]) == 1uL && g.indexOf("kde:t=5,5;h=50") == null) { "indexOf" }
        val est = g.estimates()
        expect(est[0].estimate == null && est[1].estimate!!.n == 2uL && est[1].queryId == ids[1]) { "$est" }
        // 2 cells at ε = 0.01 each: a device spent 0.02 by sequential composition.
        val total = g.perDeviceTotal()!!
        expect(total.cells == 2uL && total.epsilonPerQuery == 0.01 && total.epsilon == 0.02) { "$total" }
        val stranger = m.privatizeUnmetered(GeoQuery.kde(listOf(5.0, 5.0), 50.0), listOf(0.0, 0.0))
        assertThrows<GeoprivException.InvalidReport>("report for another query", "unknown-query") { g.addReportJson(stranger.json) }
        val back = GridAggregator.fromJson(g.toJson())
        back.merge(g)
        expect(back.estimates()[1].estimate!!.n == 4uL) { "merge" }
        assertThrows<GeoprivException.InvalidParameter>("merge other grid") { back.merge(GridAggregator.kdeGrid(listOf(0.0), listOf(0.0), 50.0)) }
        assertThrows<GeoprivException.InvalidParameter>("duplicate queries") { GridAggregator(listOf(GeoQuery.threshold(0.0, 1.0), GeoQuery.threshold(0.0, 1.0))) }
        assertThrows<GeoprivException.InvalidParameter>("empty grid") { GridAggregator(emptyList()) }
        assertThrows<GeoprivException.InvalidParameter>("kde grid bandwidth 0") { GridAggregator.kdeGrid(listOf(0.0), listOf(0.0), 0.0) }
        assertThrows<GeoprivException.InvalidReport>("grid state") { GridAggregator.fromJson("{}") }
    }
}

// ---- end to end: many devices, one server, estimates within their error bars ----

private const val Z95 = 1.959963984540054

/** f for the soft threshold, interval and two-way threshold, and the KDE, written out here
 *  (SPEC §3) so the aggregate is checked against an independent truth. */
private fun ramp(t: Double) = min(1.0, max(0.0, t + 0.5))
private fun thresholdF(t: Double, w: Double, x: Double) = ramp((x - t) / w)
private fun intervalF(a: Double, b: Double, w: Double, x: Double) = ramp(min((x - a) / w, (b - x) / w))
private fun twoWayF(t1: Double, t2: Double, tau: Double, x: List<Double>): Double {
    val r1 = tau / sqrt(2.0)
    val d = hypot(max(0.0, t1 + tau / 2 + r1 - x[0]), max(0.0, t2 + tau / 2 + r1 - x[1]))
    return min(1.0, max(0.0, (r1 + tau - d) / tau))
}

/**
 * [users] simulated devices draw x, privatize it with [release] and upload JSON (even
 * users) or bytes (odd users); the server checks each report with [policy] and
 * aggregates. The estimate must cover the true mean of f(x): with a seeded mechanism
 * and seeded users the run is deterministic, so the 95% interval is checked; with the
 * secure generator, 5 standard errors (false alarm rate 6e-7).
 */
private fun checkUnbiased(
    name: String, users: Int, seed: Long, policy: ReportPolicy, maxSe: Double, seeded: Boolean,
    draw: (Random) -> List<Double>, truthOf: (List<Double>) -> Double, release: (List<Double>) -> PrivateReport,
) {
    val agg = Aggregator()
    val rnd = Random(seed)
    var truth = 0.0
    val policy = if (seeded) policy.acceptSeeded() else policy
    for (i in 0 until users) {
        val x = draw(rnd)
        truth += truthOf(x)
        val r = release(x)
        agg.addReport(if (i % 2 == 0) policy.acceptJson(r.json) else policy.acceptBytes(r.bytes))
    }
    truth /= users
    val e = agg.estimate()!!
    val se = e.standardError!!
    expect(e.n == users.toULong()) { "$name: n ${e.n}" }
    expect(abs(e.ci95Low!! - (e.mean - Z95 * se)) <= 1e-12 && abs(e.ci95High!! - (e.mean + Z95 * se)) <= 1e-12) { "$name: CI $e" }
    expect(se > 0 && se < maxSe) { "$name: standard error $se too large for a meaningful check (max $maxSe)" }
    if (seeded) {
        expect(truth >= e.ci95Low!! && truth <= e.ci95High!!) { "$name: truth $truth outside the 95% CI [${e.ci95Low}, ${e.ci95High}]" }
    } else {
        expect(abs(e.mean - truth) <= 5 * se) { "$name: |mean ${e.mean} - truth $truth| > 5 se ($se)" }
    }
    if (System.getenv("GEOPRIV_TIMING") != null) {
        println("     $name: n=$users truth=${"%.4f".format(truth)} mean=${"%.4f".format(e.mean)} se=${"%.4f".format(se)} z=${"%+.2f".format((e.mean - truth) / se)}")
    }
}

/** Users per family: JNA calls cost 50-300 µs each here (debug build), 2-3 per user. */
private val USERS = (System.getenv("GEOPRIV_KOTLIN_USERS") ?: "5000").toInt()

private fun unbiasednessTests() {
    test("end to end: threshold, PolyPlace, incomes") {
        val q = GeoQuery.threshold(100_000.0, 20_000.0)
        val m = GeoMechanism.polyplace(1.0 / 2000).seeded(11uL)
        checkUnbiased("threshold/polyplace", USERS, 11, ReportPolicy(1.0 / 1000, 0.0), 0.02, true,
            { r -> listOf(exp(kotlin.math.ln(60_000.0) + 0.6 * r.nextGaussian())) },
            { x -> thresholdF(100_000.0, 20_000.0, x[0]) }, { x -> m.privatizeUnmetered(q, x) })
    }
    test("end to end: interval, Student's t, ages") {
        val q = GeoQuery.interval(20.0, 40.0, 5.0)
        val m = GeoMechanism.studentT(0.5).seeded(12uL)
        checkUnbiased("interval/student-t", USERS, 12, ReportPolicy(1.0, 0.0), 0.03, true,
            { r -> listOf(80 * r.nextDouble()) }, { x -> intervalF(20.0, 40.0, 5.0, x[0]) }, { x -> m.privatizeUnmetered(q, x) })
    }
    test("end to end: two-way threshold, generalized Cauchy, 2-D metres") {
        val q = GeoQuery.twoWay(0.0, 0.0, 500.0)
        val m = GeoMechanism.cauchy(1.0 / 200).seeded(13uL)
        checkUnbiased("two-way/cauchy", USERS, 13, ReportPolicy(1.0 / 100, 0.0), 0.03, true,
            { r -> listOf(2000 * r.nextGaussian(), 500 + 2000 * r.nextGaussian()) },
            { x -> twoWayF(0.0, 0.0, 500.0, x) }, { x -> m.privatizeUnmetered(q, x) })
    }
    test("end to end: KDE from GPS fixes, Laplace (epsilon, delta)") {
        val h = 250.0
        val q = GeoQuery.kdeLatlon(48.8606, 2.3376, h, paris)
        val c = project(48.8606, 2.3376, paris)
        val m = GeoMechanism.laplace(1.0 / 100, 1e-6).seeded(14uL)
        val degLat = 1.0 / 111_200.0
        val degLon = 1.0 / (111_320.0 * cos(Math.toRadians(48.86)))
        checkUnbiased("kde-latlon/laplace", USERS, 14, ReportPolicy(1.0 / 50, 1e-5), 0.02, true,
            { r -> listOf(48.8606 + 400 * r.nextGaussian() * degLat, 2.3376 + 400 * r.nextGaussian() * degLon) },
            { ll -> project(ll[0], ll[1], paris).let { p -> exp(-((p[0] - c[0]) * (p[0] - c[0]) + (p[1] - c[1]) * (p[1] - c[1])) / (2 * h * h)) } },
            { ll -> m.privatizeLatlonUnmetered(q, ll[0], ll[1], paris) })
    }
    test("end to end: secure generator (unseeded) and the baselines") {
        val q = GeoQuery.threshold(50.0, 10.0)
        val policy = ReportPolicy(1.0, 0.0).allowLdp(2.0)
        val draw = { r: Random -> listOf(100 * r.nextDouble()) }
        val truth = { x: List<Double> -> thresholdF(50.0, 10.0, x[0]) }
        val secure = GeoMechanism.polyplace(0.5)
        checkUnbiased("threshold/polyplace secure", USERS / 4, 15, policy, 0.05, false, draw, truth) { x -> secure.privatizeUnmetered(q, x) }
        val global = GeoMechanism.globalLaplace(0.5).seeded(16uL)
        checkUnbiased("threshold/global-laplace", USERS / 4, 16, policy, 0.05, true, draw, truth) { x -> global.privatizeUnmetered(q, x) }
        val ldp = GeoMechanism.localDp(2.0).seeded(17uL)
        checkUnbiased("threshold/ldp", USERS / 4, 17, policy, 0.05, true, draw, truth) { x -> ldp.privatizeUnmetered(q, x) }
    }
}

// ---- objects shared across threads ----

private fun concurrencyTests() {
    test("threads share one Aggregator, one GeoMechanism and one PrivacyLedger") {
        val threads = 4
        val pool = Executors.newFixedThreadPool(threads)
        try {
            val q = GeoQuery.twoWay(0.0, 0.0, 100.0)
            val m = GeoMechanism.polyplace(0.01) // secure generator, shared
            val agg = Aggregator()
            val per = 150
            val tasks = (0 until threads).map { t ->
                Callable {
                    List(per) { i ->
                        val r = m.privatizeUnmetered(q, listOf(i - 75.0, 10.0 * t))
                        if (i % 2 == 0) agg.addReportJson(r.json) else agg.addReportBytes(r.bytes)
                        r.value
                    }
                }
            }
            val values = pool.invokeAll(tasks).flatMap { it.get(60, TimeUnit.SECONDS) }
            expect(agg.count() == (threads * per).toULong()) { "count ${agg.count()}" }
            // The state is exact, so the interleaving cannot matter: the shared
            // aggregate equals a serial one bit for bit.
            val serial = Aggregator().also { it.addValues(values) }
            expect(agg.toJson() == serial.toJson()) { "shared aggregate differs from the serial one" }

            // One ledger for exactly 40 releases; 80 attempts from 4 threads.
            val budget = PrivacyLedger.inMemory(BudgetPolicy(BudgetUnit.PerMetre, 1.0, 0.0))
            val bm = GeoMechanism.polyplace(budget.evenSplit(40uL)!!.epsilon).withUnit(BudgetUnit.PerMetre)
            val outcomes = pool.invokeAll((0 until threads).map {
                Callable {
                    var ok = 0
                    var refused = 0
                    repeat(20) {
                        try { bm.privatize(budget, q, listOf(1.0, 1.0)); ok++ }
                        catch (e: GeoprivException.BudgetExceeded) { refused++ }
                    }
                    ok to refused
                }
            }).map { it.get(60, TimeUnit.SECONDS) }
            expect(outcomes.sumOf { it.first } == 40 && outcomes.sumOf { it.second } == 40) { "budget outcomes $outcomes" }
            expect(budget.status().releases == 40uL) { "${budget.status()}" }

            // Crossed merges (a into b while b into a) must not deadlock. They
            // double the counts; once a merge would overflow it is refused
            // with the state unchanged (server hardening): the correct answer
            // here, not a failure, and the only exception tolerated.
            val a = Aggregator().also { it.addValues(listOf(1.0, 2.0)) }
            val b = Aggregator().also { it.addValues(listOf(3.0)) }
            val merges = pool.invokeAll(List(threads) { k ->
                Callable {
                    repeat(50) {
                        try {
                            if (k % 2 == 0) a.merge(b) else b.merge(a)
                        } catch (e: GeoprivException.InvalidReport) {
                            if (e.message?.contains("overflow") != true) throw e
                        }
                    }
                }
            })
            merges.forEach { it.get(30, TimeUnit.SECONDS) }
            expect(a.count() > 2uL && b.count() > 1uL) { "merges ran" }
        } finally {
            pool.shutdown()
            pool.awaitTermination(10, TimeUnit.SECONDS)
        }
    }
}

// ---- the Android example of bindings/README.md, verbatim (test-kotlin.sh checks it) ----

/** Privatizes a GPS fix for one density-map cell (assigned by the server) and uploads it. */
fun reportForDensityMap(lat: Double, lon: Double, cellLat: Double, cellLon: Double,
                        ledger: PrivacyLedger, upload: (String) -> Unit): Boolean {
    val city = Projection.LocalEquirectangular(refLat = 48.8566, refLon = 2.3522) // metres around Paris
    GeoQuery.kdeLatlon(cellLat, cellLon, bandwidthMetres = 250.0, projection = city).use { query ->
        GeoMechanism.polyplace(epsilon = 1.0 / 1000).use { mechanism ->          // ε per projected metre
            try {
                // Charged to the ledger (on disk, for a file-backed one) before it returns.
                val report = mechanism.privatizeLatlon(ledger, query, lat, lon, city)
                upload(report.json)          // or report.bytes
                return true
            } catch (e: GeoprivException) {  // BudgetExceeded, InvalidInput (bad GPS fix), LedgerIo, ...
                return false
            }
        }
    }
}

private fun readmeExampleTests() {
    test("README Android example: privatize GPS fixes for a density map, aggregate on the server") {
        val uploads = mutableListOf<String>()
        val policy1 = BudgetPolicy(BudgetUnit.PerMetre, totalEpsilon = 1.0 / 1000, totalDelta = 0.0) // one report per device
        val budget = PrivacyLedger.openOrCreate(tempLedgerPath("device.json"), policy1)
        expect(reportForDensityMap(48.8610, 2.3380, 48.8606, 2.3376, budget) { uploads += it }) { "first report" }
        expect(!reportForDensityMap(48.8610, 2.3380, 48.8606, 2.3376, budget) { uploads += it }) { "over budget" }
        val fresh = PrivacyLedger.inMemory(policy1)
        expect(!reportForDensityMap(Double.NaN, 2.3380, 48.8606, 2.3376, fresh) { uploads += it }) { "bad fix" }
        expect(fresh.status().releases == 0uL && uploads.size == 1) { "nothing charged or uploaded" }
        // Many devices around the cell; the server's estimate covers the truth.
        val rnd = Random(21)
        val city = Projection.LocalEquirectangular(48.8566, 2.3522)
        val c = project(48.8606, 2.3376, city)
        var truth = 0.0
        val n = USERS / 5
        repeat(n) {
            val lat = 48.8606 + 300 * rnd.nextGaussian() / 111_200.0
            val lon = 2.3376 + 300 * rnd.nextGaussian() / 73_300.0
            val p = project(lat, lon, city)
            truth += exp(-((p[0] - c[0]) * (p[0] - c[0]) + (p[1] - c[1]) * (p[1] - c[1])) / (2 * 250.0 * 250.0))
            expect(reportForDensityMap(lat, lon, 48.8606, 2.3376, PrivacyLedger.inMemory(policy1)) { uploads += it }) { "device $it" }
        }
        truth /= n
        val policy = ReportPolicy(1.0 / 1000, 0.0).onlyQueries(listOf(GeoQuery.kdeLatlon(48.8606, 2.3376, 250.0, city)))
        val agg = Aggregator()
        for (line in uploads.drop(1)) agg.addReport(policy.acceptJson(line))
        val e = agg.estimate()!!
        expect(e.n == n.toULong() && abs(e.mean - truth) <= 5 * e.standardError!!) { "truth $truth, estimate $e" }
    }
    test("report schedules, the planner and memoized releases") {
        val query = GeoQuery.threshold(100_000.0, 20_000.0)
        val c = scheduleNoiseConstant(GeoMechanism.polyplace(1.0), query)!!
        val plan = planSchedule(1_000_000uL, 365uL, 3.0 / 20_000, 0.25, c)
        val schedule = ReportSchedule.fixedSlot(plan.every)
        expect(schedule.probability() == 1.0 / plan.every.toDouble()) { "plan $plan" }
        val policy = BudgetPolicy(BudgetUnit.PerDollar, totalEpsilon = plan.epsilonPerReport, totalDelta = 0.0)
        val ledger = PrivacyLedger.inMemory(policy)
        val days = (0uL until 365uL).filter { schedule.reportsIn(ledger, it) }
        val most = schedule.maxReports(365uL).toInt()
        expect(days.size in (most - 1)..most && days == (0uL until 365uL).filter { schedule.reportsIn(ledger, it) }) { "days $days" }
        val memo = MemoizedRelease(
            GeoMechanism.polyplace(plan.epsilonPerReport).withUnit(BudgetUnit.PerDollar), 5_000.0, null)
        val a = memo.release(ledger, query, listOf(95_000.0))
        val b = memo.release(ledger, query, listOf(95_000.0))
        expect(a.charged && !b.charged && a.report.value == b.report.value) { "$a $b" }
        expect(a.report.json != b.report.json) { "a fresh report id per upload" }
        val over = try { memo.release(ledger, query, listOf(150_000.0)); null } catch (e: GeoprivException.BudgetExceeded) { e }
        expect(over != null && ledger.status().releases == 1uL) { "a second cell is refused, nothing charged" }
        val bad = try { MemoizedRelease(GeoMechanism.polyplace(1e-4), 0.0, null); null } catch (e: GeoprivException) { e }
        expect(bad?.code == "invalid-parameter") { "width 0: ${bad?.code}" }
        val layered = MemoizedRelease(GeoMechanism.polyplace(1e-4).withUnit(BudgetUnit.PerDollar), 5_000.0, 1.0)
        val l3 = PrivacyLedger.inMemory(BudgetPolicy(BudgetUnit.PerDollar, totalEpsilon = 1e-4, totalDelta = 0.0))
        val values = (1..5).map { layered.release(l3, query, listOf(95_000.0)).report.value }.toSet()
        expect(values.size > 1 && l3.status().releases == 1uL) { "layer $values" }
    }
}
