// Kotlin/JVM test of the hardened server in the bindings (ReportServer,
// ServerConfig; issue 12): clipping with its public bound B and the
// honest-bias bound, the batch calls, the byte-level reader with per-record
// rejections, exact merging of partial states. Mirrors
// bindings/tests/python/test_server.py. Compiled with Main.kt by
// bindings/scripts/test-kotlin.sh and run as its own program
// (servertests.ServerKt); closes with "kotlin server: N passed, M failed".

package servertests

import geopriv.*
import kotlin.math.abs
import kotlin.system.exitProcess

private var passed = 0
private var failed = 0

private fun test(name: String, body: () -> Unit) {
    try {
        body()
        passed++
    } catch (t: Throwable) {
        failed++
        println("FAIL $name: $t")
    }
}

private fun expect(condition: Boolean, message: () -> String) {
    if (!condition) throw AssertionError(message())
}

private inline fun <reified E : GeoprivException> refused(what: String, block: () -> Unit) {
    try {
        block()
    } catch (e: GeoprivException) {
        expect(e is E) { "$what: got ${e::class.simpleName}: ${e.message}" }
        return
    }
    throw AssertionError("$what: nothing was thrown")
}

/** `json` with its value replaced by [value] and another report_id (with the honest report's it would be dropped as a replay). */
private fun forged(json: String, value: Double): String =
    json.replace(Regex("\"value\":[^,}]+"), "\"value\":$value")
        .replace(Regex("\"report_id\":\"[0-9a-f]{32}\""), "\"report_id\":\"" + "cd".repeat(16) + "\"")

fun main() {
    val t0 = System.nanoTime()
    val query = GeoQuery.threshold(100_000.0, 20_000.0)
    val mechanism = GeoMechanism.polyplace(1e-4).seeded(7uL)
    val honest = (0 until 2_000).map { mechanism.privatizeUnmetered(query, listOf(50_000.0 + 97.0 * it)).json }
    val policy = ReportPolicy(1e-3, 1e-6).acceptSeeded()

    test("clipping: a report of 1e4 among honest ones moves the clipped mean by at most B/n") {
        val clean = ReportServer(policy, ServerConfig())
        val poisoned = ReportServer(policy, ServerConfig())
        clean.addJsonBatch(honest)
        val r = poisoned.addJsonBatch(honest + forged(honest[0], 1e4))
        expect(r.accepted == 2_001uL && r.rejected == 0uL) { "$r" }
        val a = clean.estimates().single()
        val b = poisoned.estimates().single()
        val clip = b.clip ?: throw AssertionError("no clipping numbers")
        expect(clip.lower < 0.0 && clip.upper > 1.0 && clip.upper < 1e4) { "$clip" }
        expect(clip.biasBound > 0.0 && clip.clipped == 1uL) { "$clip" }
        expect(clip.influenceBound == (clip.upper - clip.lower) / 2_001) { "$clip" }
        expect(abs(b.estimate.mean - a.estimate.mean) <= clip.influenceBound) { "${a.estimate} vs ${b.estimate}" }
        val raw = ReportServer(policy, ServerConfig().withoutClipping())
        raw.addJsonBatch(honest + forged(honest[0], 1e4))
        val e = raw.estimates().single()
        expect(e.clip == null && e.estimate.mean - a.estimate.mean > 4.0) { "$e" }
        refused<GeoprivException.InvalidParameter>("z < 0") { ServerConfig().withClipZ(-1.0) }
        refused<GeoprivException.InvalidParameter>("no reports") { ServerConfig().withClipTarget(0uL, 0.1) }
    }

    test("batch reader: non-UTF-8, overlong and bad-version records each rejected alone with its number") {
        val server = ReportServer(policy, ServerConfig().withMaxRecordBytes(1_000uL))
        val stream = honest[0].toByteArray() + "\n".toByteArray() +
            byteArrayOf(0xff.toByte(), 0xfe.toByte(), 'a'.code.toByte(), '\n'.code.toByte()) +
            ByteArray(5_000) { 'x'.code.toByte() } + "\n".toByteArray() +
            (honest[1].replace("\"version\":2", "\"version\":9") + "\n# a comment\n" + honest[2] + "\n").toByteArray()
        val r = server.ingest(stream, InputFormat.JSON)
        expect(r.records == 6uL && r.accepted == 2uL && r.rejected == 3uL && r.skipped == 1uL) { "$r" }
        val got = r.rejections.map { it.record to it.code }
        expect(got == listOf(2uL to "not-utf8", 3uL to "too-long", 4uL to "unsupported-version")) { "$got" }
        expect(r.rejections.all { it.reason.endsWith("[${it.code}]") }) { "${r.rejections}" }
        expect(server.estimates().single().estimate.n == 2uL) { "the good records are kept" }
        // `auto` decides each record by itself: bytes that are neither JSON
        // nor a frame are one rejected record, never a refused stream.
        val g = server.ingest(byteArrayOf(1, 2, 3), InputFormat.AUTO)
        expect(g.accepted == 0uL && g.rejected == 1uL) { "$g" }
        val batch = server.addJsonBatch(listOf(honest[3], null, "y".repeat(5_000), "\u001b[31m\nline 1: ok\n"))
        val codes = batch.rejections.map { it.record to it.code }
        expect(codes == listOf(2uL to "empty", 3uL to "too-long", 4uL to "malformed")) { "$codes" }
        expect(!batch.rejections[2].reason.contains('\n') && !batch.rejections[2].reason.contains('\u001b')) {
            batch.rejections[2].reason
        }
    }

    test("partial states merge exactly and print the CLI's lines") {
        val whole = ReportServer(policy, ServerConfig())
        whole.addJsonBatch(honest)
        val left = ReportServer(policy, ServerConfig())
        val right = ReportServer(policy, ServerConfig())
        left.addJsonBatch(honest.subList(0, 777))
        right.addJsonBatch(honest.subList(777, honest.size))
        val reducer = ReportServer(policy, ServerConfig())
        reducer.mergeJson(left.toJson())
        reducer.merge(right)
        expect(reducer.toJson() == whole.toJson()) { "merged state differs" }
        expect(reducer.toJsonLines() == whole.estimates().single().jsonLine + "\n") { reducer.toJsonLines() }
        refused<GeoprivException.InvalidReport>("another clipping level") {
            ReportServer(policy, ServerConfig().withClipZ(2.0)).mergeJson(whole.toJson())
        }
    }

    test("task files: a server validates reports against the CLI's --queries task set") {
        val qid = policy.acceptJson(honest[0]).queryId
        val other = GeoMechanism.polyplace(2e-4).seeded(8uL).privatizeUnmetered(query, listOf(60_000.0)).json
        val unknown = mechanism.privatizeUnmetered(GeoQuery.threshold(5.0, 1.0), listOf(4.0)).json
        val tasks = policy.withQueryFile("# this collection\n$qid polyplace 0.0001 0 2.5\nthreshold:T=7;w=1\n")
        val server = ReportServer(tasks, ServerConfig())
        val r = server.addJsonBatch(honest.subList(0, 50) + other + unknown)
        expect(r.accepted == 50uL && r.rejectedByCode == mapOf("not-a-task" to 1uL, "unknown-query" to 1uL)) { "$r" }
        expect(server.estimates().single().clip?.z == 2.5) { "${server.estimates()}" }
        refused<GeoprivException.InvalidInput>("a task line without δ") { policy.withQueryFile("$qid polyplace 0.0001") }
        refused<GeoprivException.InvalidInput>("a task above the policy's ε") { policy.withQueryFile("$qid polyplace 5 0") }
    }

    println("kotlin server: $passed passed, $failed failed (${(System.nanoTime() - t0) / 1_000_000} ms)")
    exitProcess(if (failed == 0) 0 else 1)
}
