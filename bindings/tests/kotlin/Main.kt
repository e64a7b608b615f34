// Kotlin/JVM test of the geopriv bindings: the generated Kotlin source
// (bindings/kotlin) loads the cdylib through JNA, exactly as an Android or
// server app would. A plain program, no test framework: it prints one line
// per failure and closes with "kotlin: N passed, M failed"; the exit code is
// non-zero when anything failed.
//
// Run it with bindings/scripts/test-kotlin.sh (builds, compiles, runs).

import geopriv.GeoQuery
import geopriv.GeoprivException
import geopriv.Growth
import geopriv.QueryFamily
import geopriv.libraryVersion
import java.util.concurrent.Callable
import java.util.concurrent.Executors
import java.util.concurrent.TimeUnit
import kotlin.math.abs
import kotlin.math.exp
import kotlin.math.max
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
            expect(q.toString().contains("SoftThreshold")) { "toString '$q'" }
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

    test("kde: wired (numbers are checked in Rust)") {
        GeoQuery.kde(listOf(0.0, 0.0), 1.0).use { q ->
            expect(q.family() == QueryFamily.KDE) { "family ${q.family()}" }
            expect(q.dimension() == 2u) { "dimension ${q.dimension()}" }
            val v = q.value(listOf(0.5, -0.5))
            expect(v.isFinite() && v >= 0.0 && v <= 1.0) { "value $v" }
            val s = q.smoothSensitivity(listOf(0.5, -0.5), Growth.Exponential(1.0))
            expect(s.isFinite() && s >= 0.0) { "S* $s" }
            expect(q.pointwiseLipschitz(listOf(3.0, 4.0)).isFinite()) { "L" }
        }
        GeoQuery.kde(listOf(1.0, 2.0, 3.0), 0.5).use { q -> expect(q.dimension() == 3u) { "3-D" } }
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

    // ---- TODO when the core lands (see bindings/README.md, "Roadmap") ----
    // mechanisms: Mechanism.cauchy/studentT/polyPlace/laplace refuse NaN,
    //   ±Inf, negative or zero epsilon (InvalidParameter), delta outside
    //   (0, 1); privatize(query, x) returns a Report whose value is finite.
    // reports: Report.toJson()/toBytes() round-trip through fromJson/
    //   fromBytes; fromJson("") / fromJson("{") / fromBytes(empty) /
    //   fromBytes(truncated) / a wrong version throw InvalidReport.
    // budget: PrivacyBudget(total epsilon, delta) spends, refuses the release
    //   that would exceed it with BudgetExceeded, shared across threads.
    // aggregate: Aggregator.add/merge/estimate gives the mean, standard error
    //   and CI of known reports; merge of split halves equals the whole;
    //   adding a malformed report throws InvalidReport and leaves it intact.
    // geo: kde/twoWay from lat/lon with a projection; lat outside [-90, 90]
    //   or NaN throws InvalidInput.

    println("kotlin: $passed passed, $failed failed")
    if (failed != 0) exitProcess(1)
}
