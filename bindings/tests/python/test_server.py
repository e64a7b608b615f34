"""Python test of the hardened server in the bindings (``ReportServer``,
``ServerConfig``; issue 12): clipping with its public bound B and the
honest-bias bound, the batch calls, the byte-level reader with per-record
rejections, exact merging of partial states, the median of means.

Run like test_bindings.py (plain ``python3``, the generated module
``geopriv_ffi`` next to ``libgeopriv_ffi.so``; bindings/scripts/test-python.sh
and, against the installed wheel, test-wheel.sh). Closes with
``server: N passed, M failed``. The checks mirror bindings/tests/kotlin/Server.kt.
"""

import json
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))  # the shared harness, also under -I
from harness import expect, finish, test  # noqa: E402

from geopriv_ffi import (
    GeoMechanism,
    GeoprivError,
    GeoQuery,
    InputFormat,
    ReportPolicy,
    ReportServer,
    ServerConfig,
)





T0 = time.perf_counter()
QUERY = GeoQuery.threshold(100_000.0, 20_000.0)
MECHANISM = GeoMechanism.polyplace(1e-4).seeded(7)
HONEST = [MECHANISM.privatize_unmetered(QUERY, [50_000.0 + 97.0 * i]).json for i in range(2_000)]
POLICY = ReportPolicy(1e-3, 1e-6).accept_seeded()


def forged(value):
    report = json.loads(HONEST[0])
    report["value"] = value
    return json.dumps(report)


def only_estimate(server):
    estimates = server.estimates()
    expect(len(estimates) == 1, estimates)
    return estimates[0]


@test("clipping: a report of 1e4 among honest ones moves the clipped mean by at most B/n")
def _():
    clean, poisoned = ReportServer(POLICY, ServerConfig()), ReportServer(POLICY, ServerConfig())
    clean.add_json_batch(HONEST)
    r = poisoned.add_json_batch(HONEST + [forged(1e4)])
    expect(r.accepted == 2_001 and r.rejected == 0, r)
    a, b = only_estimate(clean), only_estimate(poisoned)
    clip = b.clip
    expect(clip.lower < 0.0 < 1.0 < clip.upper < 1e4, clip)
    expect(clip.bias_bound > 0.0 and clip.sigma_max > 0.0 and clip.clipped == 1, clip)
    expect(clip.influence_bound == (clip.upper - clip.lower) / 2_001, clip)
    expect(clip.bias_to_se_bound is not None and clip.bias_to_se_bound <= 0.1 * (2_001 / 1e6) ** 0.5 * 1.0001, clip)
    expect(abs(b.estimate.mean - a.estimate.mean) <= clip.influence_bound, (a.estimate.mean, b.estimate.mean))
    # The same public numbers before any report, from the configuration.
    bound = ServerConfig().clip_bound(POLICY.accept_json(HONEST[0]))
    expect((bound.lower, bound.upper, bound.bias_bound) == (clip.lower, clip.upper, clip.bias_bound), bound)
    # Off, the forged report moves the mean by about 1e4/n = 5.
    raw = ReportServer(POLICY, ServerConfig().without_clipping())
    raw.add_json_batch(HONEST + [forged(1e4)])
    e = only_estimate(raw)
    expect(e.clip is None and e.estimate.mean - a.estimate.mean > 4.0, e)
    expect('"clip"' not in e.json_line and '"clip"' in b.json_line, e.json_line)
    # A fixed z: a narrower B.
    fixed = ReportServer(POLICY, ServerConfig().with_clip_z(1.0))
    fixed.add_json(HONEST[0])
    expect(only_estimate(fixed).clip.z == 1.0, only_estimate(fixed).clip)
    for bad in (lambda: ServerConfig().with_clip_z(-1.0), lambda: ServerConfig().with_clip_z(float("nan")),
                lambda: ServerConfig().with_clip_target(0, 0.1), lambda: ServerConfig().with_clip_target(10, 0.0),
                lambda: ServerConfig().with_max_queries(0), lambda: ServerConfig().with_max_record_bytes(1 << 40),
                lambda: ServerConfig().with_median_of_means(1)):
        try:
            bad()
            raise AssertionError("a bad configuration was accepted")
        except GeoprivError.InvalidParameter:
            pass


@test("batch reader: a non-UTF-8, an overlong and a bad-version record each rejected alone with its number")
def _():
    server = ReportServer(POLICY, ServerConfig().with_max_record_bytes(1_000))
    stream = b"".join([
        HONEST[0].encode(), b"\n",
        b"\xff\xfe not utf-8\n",
        b"x" * 5_000, b"\n",
        HONEST[1].replace('"version":2', '"version":9').encode(), b"\n",
        b"\xef\xbb\xbf# a comment after a BOM\n",
        HONEST[2].encode(), b"\n",
    ])
    r = server.ingest(stream, InputFormat.JSON)
    expect((r.records, r.accepted, r.rejected, r.skipped) == (6, 2, 3, 1), r)
    got = [(x.record, x.code) for x in r.rejections]
    expect(got == [(2, "not-utf8"), (3, "too-long"), (4, "unsupported-version")], got)
    expect(all(x.reason.endswith(f"[{x.code}]") for x in r.rejections), r.rejections)
    expect(r.rejected_by_code == {"not-utf8": 1, "too-long": 1, "unsupported-version": 1}, r.rejected_by_code)
    expect(only_estimate(server).estimate.n == 2, "the good records are kept")
    c = server.counts()
    expect((c.records, c.accepted, c.rejected, c.skipped) == (6, 2, 3, 1), c)
    # `auto` decides each record by itself: a record neither JSON nor a
    # frame is rejected alone (issue 19 item 9), it never refuses the stream.
    g = server.ingest(b"\x01\x02 neither", InputFormat.AUTO)
    expect((g.accepted, g.rejected) == (0, 1), g)
    # The batch calls: same outcomes per record; attacker text escaped.
    attack = "\x1b[31m\nline 1: report accepted\n"
    r = server.add_json_batch([HONEST[3], None, "y" * 5_000, attack, HONEST[1].replace('"version":2', '"version":9')])
    got = [(x.record, x.code) for x in r.rejections]
    expect(got == [(2, "empty"), (3, "too-long"), (4, "malformed"), (5, "unsupported-version")], got)
    expect(not any(ch in r.rejections[2].reason for ch in "\n\x1b"), r.rejections[2].reason)
    binary = MECHANISM.privatize_unmetered(QUERY, [1.0]).bytes
    r = server.add_bytes_batch([binary, b"", None, b"\x07garbage", binary[:5]])
    expect(r.accepted == 1 and r.rejected == 4 and [x.record for x in r.rejections] == [2, 3, 4, 5], r)
    try:
        server.add_json("{not json")
        raise AssertionError("a malformed report was added")
    except GeoprivError.InvalidReport as e:
        expect(str(e).endswith("[malformed]"), str(e))


@test("partial states merge exactly; CLI output lines; median of means")
def _():
    whole, a, b = (ReportServer(POLICY, ServerConfig()) for _ in range(3))
    whole.add_json_batch(HONEST + [forged(1e4)])
    a.add_json_batch(HONEST[:700])
    b.add_json_batch(HONEST[700:] + [forged(1e4)])
    reducer = ReportServer(POLICY, ServerConfig())
    reducer.merge_json(b.to_json())
    reducer.merge(a)
    expect(reducer.to_json() == whole.to_json(), "merged state differs from the single server's")
    expect(reducer.to_json_lines() == whole.to_json_lines() == only_estimate(whole).json_line + "\n", "json lines")
    line = json.loads(whole.to_json_lines())
    expect(line["clip"]["clipped"] == 1 and line["n"] == 2_001, line)
    for other in (ServerConfig().with_clip_z(2.0), ServerConfig().without_clipping(), ServerConfig().with_median_of_means(4)):
        try:
            ReportServer(POLICY, other).merge_json(whole.to_json())
            raise AssertionError("an incompatible state was merged")
        except GeoprivError.InvalidReport as e:
            expect("incompatible-state" in str(e), str(e))
    try:
        reducer.merge_json('{"clip":null,"groups":[{"bad":1}]}')
        raise AssertionError("a malformed state was merged")
    except GeoprivError.InvalidReport:
        pass
    expect(reducer.to_json() == whole.to_json(), "a refused merge changed the state")
    strict = ReportServer(ReportPolicy(1e-5, 0.0), ServerConfig())
    try:
        strict.merge_json(whole.to_json())  # ε = 1e-4 is over this policy's limit
        raise AssertionError("a state out of policy was merged")
    except GeoprivError.InvalidReport as e:
        expect("epsilon-out-of-policy" in str(e), str(e))
    mom = ReportServer(POLICY, ServerConfig().with_median_of_means(8))
    mom.add_json_batch(HONEST + [forged(1e4)])
    m = only_estimate(mom).median_of_means
    expect(m.buckets == 8 and m.bias_bound == 2 * m.bucket_sd and m.standard_error > 0, m)


finish("server", f" ({time.perf_counter() - T0:.1f} s)")
