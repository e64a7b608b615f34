"""Python test of the geopriv bindings.

The uniffi-generated module ``geopriv_ffi`` loads ``libgeopriv_ffi.so`` from
its own directory through ctypes; bindings/scripts/test-python.sh copies both
next to each other and runs this file with plain ``python3`` (no pytest). It
prints one line per failure and closes with ``python: N passed, M failed``;
the exit code is non-zero when anything failed.

The checks mirror bindings/tests/kotlin/Main.kt.
"""

import binascii
import contextlib
import math
import os
import random
import re
import struct
import sys
import threading
import time

from concurrent.futures import ThreadPoolExecutor

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))  # the shared harness, also under -I
from harness import expect, finish, test  # noqa: E402

from geopriv_ffi import (
    Aggregator,
    CentralNoiseKind,
    GeoMechanism,
    GeoprivError,
    GeoQuery,
    GridAggregator,
    Growth,
    MechanismName,
    MemoizedRelease,
    BudgetPeriod,
    BudgetPolicy,
    BudgetUnit,
    PrivacyLedger,
    Projection,
    QueryFamily,
    ReportPolicy,
    ReportSchedule,
    central_quantile,
    central_smooth_sensitivity,
    instance_based_chain_scales,
    library_version,
    plan_schedule,
    project,
    report_id_of_frame,
    schedule_noise_constant,
    smooth_noisy_max_beta,
    smooth_noisy_max_select,
)

TIMING = os.environ.get("GEOPRIV_TIMING") is not None

NON_FINITE = [math.nan, math.inf, -math.inf]
BAD_POSITIVE = NON_FINITE + [0.0, -1.0, -0.0, -5e-324]




def assert_close(actual, expected, what):
    tol = 1e-12 * max(1.0, abs(expected))
    expect(abs(actual - expected) <= tol, f"{what}: got {actual}, expected {expected}")


def assert_raises(kind, what, fn, needle=""):
    """fn() must raise exactly GeoprivError.<kind> with a message containing needle."""
    try:
        fn()
    except GeoprivError as e:
        expect(type(e) is kind, f"{what}: expected {kind.__name__}, got {e!r}")
        msg = str(e)
        expect(msg.strip() != "", f"{what}: exception without a message")
        expect(needle.lower() in msg.lower(), f"{what}: message {msg!r} does not mention {needle!r}")
        return
    raise AssertionError(f"{what}: no exception, expected {kind.__name__}")


InvalidParameter = GeoprivError.InvalidParameter
InvalidInput = GeoprivError.InvalidInput
InvalidReport = GeoprivError.InvalidReport
BudgetExceeded = GeoprivError.BudgetExceeded


@test("library version")
def _():
    expect(re.match(r"\d+\.\d+\.\d+", library_version()), f"version {library_version()!r}")


# ---- query values and sensitivities at known points (SPEC §3.1-3.3) ----


@test("soft threshold: values and sensitivities")
def _():
    q = GeoQuery.threshold(100.0, 10.0)
    expect(q.family() == QueryFamily.THRESHOLD, f"family {q.family()}")
    expect(q.dimension() == 1, f"dimension {q.dimension()}")
    for x, v in [(100.0, 0.5), (102.5, 0.75), (0.0, 0.0), (1000.0, 1.0)]:
        assert_close(q.value([x]), v, f"f({x})")
    assert_close(q.global_lipschitz(), 0.1, "global Lipschitz")
    assert_close(q.pointwise_lipschitz([0.0]), 1.0 / 105.0, "L(0)")
    assert_close(q.pointwise_lipschitz([100.0]), 0.1, "L(100)")
    # Off the ramp (e = 95): S* = max(1/(e + θ), 1/(θ g(e))).
    assert_close(q.smooth_sensitivity([0.0], Growth.EXPONENTIAL(0.01)), 1.0 / (10.0 * math.exp(0.95)), "S*exp(0)")
    assert_close(q.smooth_sensitivity([0.0], Growth.LINEAR(0.01)), 1.0 / 19.5, "S*lin(0)")
    assert_close(q.smooth_sensitivity([100.0], Growth.EXPONENTIAL(0.01)), 0.1, "S*(100)")
    expect(str(q) == "GeoQuery(threshold:T=100;w=10)", f"str {q}")
    # Integers are accepted where floats are expected (Python convenience).
    assert_close(q.value([100]), 0.5, "f(100) from an int")


@test("soft interval: values and sensitivities")
def _():
    q = GeoQuery.interval(0.0, 100.0, 10.0)
    expect(q.family() == QueryFamily.INTERVAL, f"family {q.family()}")
    expect(q.dimension() == 1, f"dimension {q.dimension()}")
    for x, v in [(50.0, 1.0), (0.0, 0.5), (2.5, 0.75), (-50.0, 0.0), (200.0, 0.0)]:
        assert_close(q.value([x]), v, f"f({x})")
    assert_close(q.global_lipschitz(), 0.1, "global Lipschitz")
    assert_close(q.pointwise_lipschitz([-50.0]), 1.0 / 55.0, "L(-50)")
    assert_close(q.smooth_sensitivity([-50.0], Growth.EXPONENTIAL(0.01)), 1.0 / (10.0 * math.exp(0.45)), "S*(-50)")


@test("two-way threshold: values and sensitivities")
def _():
    q = GeoQuery.two_way(0.0, 0.0, 1.0)
    expect(q.family() == QueryFamily.TWO_WAY, f"family {q.family()}")
    expect(q.dimension() == 2, f"dimension {q.dimension()}")
    for x, v in [([10.0, 10.0], 1.0), ([0.0, 10.0], 0.5), ([-10.0, 10.0], 0.0), ([10.0, -10.0], 0.0)]:
        assert_close(q.value(x), v, f"f({x})")
    assert_close(q.global_lipschitz(), 1.0, "global Lipschitz")
    assert_close(q.pointwise_lipschitz([-10.0, 10.0]), 1.0 / 10.5, "L")
    assert_close(q.smooth_sensitivity([-10.0, 10.0], Growth.EXPONENTIAL(0.1)), 1.0 / math.exp(0.95), "S*")


@test("kde: values and sensitivities (exact smooth sensitivity)")
def _():
    h = 250.0
    q = GeoQuery.kde([100.0, -50.0], h)
    expect(q.family() == QueryFamily.KDE, f"family {q.family()}")
    expect(q.dimension() == 2, f"dimension {q.dimension()}")
    glob = math.exp(-0.5) / h
    assert_close(q.global_lipschitz(), glob, "global Lipschitz")
    assert_close(q.value([100.0, -50.0]), 1.0, "f(centre)")
    assert_close(q.value([100.0 + 0.6 * h, -50.0 + 0.8 * h]), math.exp(-0.5), "f at distance h")
    assert_close(q.value([100.0 + 3 * h, -50.0]), math.exp(-4.5), "f at distance 3h")
    # L(centre) = ℓ(0)/h = r* exp(-u)/h with r*² = 2u, 1 + 2u = e^u (the
    # tangency partner of the centre); solved here by Newton.
    u = 1.5
    for _ in range(60):
        u -= (math.exp(u) - 1 - 2 * u) / (math.exp(u) - 2)
    ell0 = math.sqrt(2 * u) * math.exp(-u)
    assert_close(q.pointwise_lipschitz([100.0, -50.0]), ell0 / h, "L(centre)")
    # On the ring at distance h, L and S* are the global constant.
    assert_close(q.pointwise_lipschitz([100.0, -50.0 + h]), glob, "L(ring)")
    assert_close(q.smooth_sensitivity([100.0, -50.0 + h], Growth.EXPONENTIAL(0.01)), glob, "S*(ring)")
    # Growth so steep (γh = 1000) that S*(centre) = L(centre), up to the
    # core's relative 2^-40 safety margin.
    steep = q.smooth_sensitivity([100.0, -50.0], Growth.EXPONENTIAL(1000.0 / h))
    expect(abs(steep - ell0 / h) <= 1e-11 * ell0 / h, f"S* steep {steep} vs {ell0 / h}")
    s = q.smooth_sensitivity([100.0, -50.0], Growth.EXPONENTIAL(0.1 / h))
    expect(ell0 / h < s <= glob * (1 + 1e-12), f"L <= S* <= global: {s}")
    expect(GeoQuery.kde([1.0, 2.0, 3.0], 0.5).dimension() == 3, "3-D")


PARK_GEOJSON = """{"type": "FeatureCollection", "features": [
  {"type": "Feature", "id": "park", "properties": {"name": "Park"},
   "geometry": {"type": "Polygon", "coordinates": [[[0, 0], [100, 0], [100, 100], [0, 100], [0, 0]]]}},
  {"type": "Feature", "id": 7, "properties": {"name": "Lot"},
   "geometry": {"type": "Polygon", "coordinates": [[[200, 0], [300, 0], [250, 80], [200, 0]]]}}]}"""


@test("region from GeoJSON text: values, sensitivities, identity, refusals")
def _():
    q = GeoQuery.region_geojson(PARK_GEOJSON, "park", 20.0)
    expect(q.family() == QueryFamily.REGION, f"family {q.family()}")
    expect(q.dimension() == 2, f"dimension {q.dimension()}")
    for x, v in [([50.0, 50.0], 1.0), ([100.0, 50.0], 0.5), ([95.0, 50.0], 0.75), ([-30.0, 50.0], 0.0)]:
        assert_close(q.value(x), v, f"f({x})")
    assert_close(q.global_lipschitz(), 1 / 20, "global Lipschitz")
    # 20 m beyond the ramp: L = 1/(e + W), S* = max(1/(e + W), e^{-γe}/W).
    assert_close(q.pointwise_lipschitz([-30.0, 50.0]), 1 / 40, "L(-30, 50)")
    assert_close(q.smooth_sensitivity([-30.0, 50.0], Growth.EXPONENTIAL(0.1)), max(1 / 40, math.exp(-2) / 20), "S*")
    qid = q.query_id()
    expect(re.fullmatch(r"region:g=[0-9a-f]{64};w=20", qid) is not None, f"id {qid}")
    # The same square written clockwise from another vertex has the same identity.
    same = '{"type": "Polygon", "coordinates": [[[100, 100], [100, 0], [0, 0], [0, 100], [100, 100]]]}'
    expect(GeoQuery.region_geojson(same, None, 20.0).query_id() == qid, "normalised digest")
    # The id names the geometry by its digest only: devices and the server
    # build the query from the same GeoJSON and compare ids.
    assert_raises(InvalidParameter, "region from its id", lambda: GeoQuery.from_id(qid), "digest")
    lot = GeoQuery.region_geojson(PARK_GEOJSON, "7", 5.0)  # numeric ids in decimal
    assert_close(lot.value([250.0, 30.0]), 1.0, "lot inside")
    # A release through the region query: the report names it.
    r = GeoMechanism.polyplace(0.05).privatize_unmetered(q, [50.0, 50.0])
    expect(r.query_id == qid, f"report query {r.query_id}")
    # Refusals: unknown feature, self-intersecting ring, bad JSON, bad width.
    assert_raises(InvalidParameter, "missing feature", lambda: GeoQuery.region_geojson(PARK_GEOJSON, "pond", 20.0), "pond")
    bowtie = '{"type": "Polygon", "coordinates": [[[0, 0], [1, 1], [1, 0], [0, 1], [0, 0]]]}'
    assert_raises(InvalidParameter, "bow tie", lambda: GeoQuery.region_geojson(bowtie, None, 1.0))
    assert_raises(InvalidParameter, "not JSON", lambda: GeoQuery.region_geojson("{not json", None, 1.0))
    assert_raises(InvalidParameter, "width 0", lambda: GeoQuery.region_geojson(PARK_GEOJSON, "park", 0.0))
    # Lon/lat text through a projection.
    ll = GeoQuery.region_geojson_latlon(
        '{"type": "Polygon", "coordinates": [[[2.34, 48.85], [2.36, 48.85], [2.36, 48.86], [2.34, 48.86], [2.34, 48.85]]]}',
        None, 50.0, Projection.LOCAL_EQUIRECTANGULAR(48.855, 2.35))
    assert_close(ll.value([0.0, 0.0]), 1.0, "centre of the lon/lat box")


@test("query ids round-trip")
def _():
    for qid in ["threshold:T=100000;w=20000", "interval:a=0;b=10;w=1", "two-way:T1=1;T2=2;w=3", "kde:t=1200.5,-300;h=150"]:
        expect(GeoQuery.from_id(qid).query_id() == qid, qid)
    expect(GeoQuery.threshold(100_000.0, 20_000.0).query_id() == "threshold:T=100000;w=20000", "threshold id")
    for bad in ["", "threshold", "threshold:T=1;w=0", "circle:r=1", "kde:t=;h=1"]:
        assert_raises(InvalidParameter, f"from_id {bad!r}", lambda: GeoQuery.from_id(bad))


# ---- bad parameters: InvalidParameter with a message naming them ----


@test("bad widths are refused")
def _():
    for w in BAD_POSITIVE:
        assert_raises(InvalidParameter, f"threshold width {w}", lambda: GeoQuery.threshold(0.0, w), "width")
        assert_raises(InvalidParameter, f"interval width {w}", lambda: GeoQuery.interval(0.0, 10.0, w), "width")
        assert_raises(InvalidParameter, f"two-way width {w}", lambda: GeoQuery.two_way(0.0, 0.0, w), "width")
        assert_raises(InvalidParameter, f"kde bandwidth {w}", lambda: GeoQuery.kde([0.0], w), "bandwidth")


@test("non-finite thresholds are refused")
def _():
    for t in NON_FINITE:
        assert_raises(InvalidParameter, f"threshold {t}", lambda: GeoQuery.threshold(t, 1.0))
        assert_raises(InvalidParameter, f"interval lower {t}", lambda: GeoQuery.interval(t, 10.0, 1.0))
        assert_raises(InvalidParameter, f"interval upper {t}", lambda: GeoQuery.interval(0.0, t, 1.0))
        assert_raises(InvalidParameter, f"two-way T1 {t}", lambda: GeoQuery.two_way(t, 0.0, 1.0))
        assert_raises(InvalidParameter, f"two-way T2 {t}", lambda: GeoQuery.two_way(0.0, t, 1.0))


@test("an interval narrower than its ramps is refused")
def _():
    assert_raises(InvalidParameter, "b - a < width", lambda: GeoQuery.interval(0.0, 1.0, 2.0), "width")
    assert_raises(InvalidParameter, "b < a", lambda: GeoQuery.interval(10.0, 0.0, 1.0))


@test("bad growth rates are refused")
def _():
    q = GeoQuery.threshold(0.0, 1.0)
    for g in BAD_POSITIVE:
        assert_raises(InvalidParameter, f"exp rate {g}", lambda: q.smooth_sensitivity([0.0], Growth.EXPONENTIAL(g)), "gamma")
        assert_raises(InvalidParameter, f"linear rate {g}", lambda: q.smooth_sensitivity([0.0], Growth.LINEAR(g)), "gamma")


@test("bad kde centres are refused")
def _():
    assert_raises(InvalidInput, "empty centre", lambda: GeoQuery.kde([], 1.0))
    for c in NON_FINITE:
        assert_raises(InvalidInput, f"centre {c}", lambda: GeoQuery.kde([0.0, c], 1.0), "coordinate")


# ---- bad points: InvalidInput for every query and every method ----


@test("bad points are refused by every method")
def _():
    queries = [
        GeoQuery.threshold(0.0, 1.0),
        GeoQuery.interval(0.0, 10.0, 1.0),
        GeoQuery.two_way(0.0, 0.0, 1.0),
        GeoQuery.kde([0.0, 0.0], 1.0),
    ]
    for q in queries:
        d = q.dimension()
        good = [0.5] * d
        bad = [("empty", []), ("one too many", good + [1.0])]
        if d > 1:
            bad.append(("one too few", good[1:]))
        bad += [(f"coordinate {nf}", good[:-1] + [nf]) for nf in NON_FINITE]
        for name, x in bad:
            needle = "finite" if name.startswith("coordinate") else "coordinate"
            assert_raises(InvalidInput, f"{q} value {name}", lambda: q.value(x), needle)
            assert_raises(InvalidInput, f"{q} L {name}", lambda: q.pointwise_lipschitz(x), needle)
            assert_raises(
                InvalidInput, f"{q} S* {name}", lambda: q.smooth_sensitivity(x, Growth.EXPONENTIAL(1.0)), needle
            )


@test("wrong Python types fail before the FFI call")
def _():
    q = GeoQuery.threshold(0.0, 1.0)
    for bad in ["", "1.0", None, [None], ["x"], {"x": 1.0}]:
        try:
            q.value(bad)
        except (TypeError, ValueError):
            continue
        except GeoprivError:
            continue  # also acceptable: refused with a message
        raise AssertionError(f"value({bad!r}) was accepted")
    try:
        q.smooth_sensitivity([0.0], 0.5)
        raise AssertionError("a bare float was accepted as Growth")
    except (TypeError, ValueError, AttributeError):
        pass


# ---- objects: thread safety and lifetime ----


@test("one query shared by many threads")
def _():
    q = GeoQuery.threshold(100.0, 10.0)
    growth = Growth.EXPONENTIAL(0.01)

    def work(t):
        return sum(
            q.value([float(i % 200 + t)]) + q.smooth_sensitivity([float(i % 200 + t)], growth) for i in range(300)
        )

    results = {}
    threads = [threading.Thread(target=lambda t=t: results.__setitem__(t, work(t))) for t in range(4)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    for t in range(4):
        expect(results.get(t) == work(t), f"thread {t}: {results.get(t)} vs {work(t)}")


@test("many short-lived objects")
def _():
    for i in range(2000):
        GeoQuery.kde([float(i), 0.0], 1.0).dimension()


# ---- mechanisms ----


def all_mechanisms(eps):
    return [
        ("polyplace", lambda: GeoMechanism.polyplace(eps)),
        ("polyplace_with", lambda: GeoMechanism.polyplace_with(eps, 0.2)),
        ("student_t", lambda: GeoMechanism.student_t(eps)),
        ("student_t_with", lambda: GeoMechanism.student_t_with(eps, 4.0, 0.3)),
        ("cauchy", lambda: GeoMechanism.cauchy(eps)),
        ("cauchy_with", lambda: GeoMechanism.cauchy_with(eps, 5.0, 0.3)),
        ("laplace", lambda: GeoMechanism.laplace(eps, 1e-6)),
        ("laplace_with", lambda: GeoMechanism.laplace_with(eps, 1e-6, 0.4)),
        ("global_laplace", lambda: GeoMechanism.global_laplace(eps)),
        ("noise_a_priori", lambda: GeoMechanism.noise_a_priori(eps)),
        ("local_dp", lambda: GeoMechanism.local_dp(eps)),
    ]


@test("every mechanism refuses NaN, infinite, zero and negative epsilon")
def _():
    for eps in BAD_POSITIVE:
        for name, make in all_mechanisms(eps):
            assert_raises(InvalidParameter, f"{name}({eps})", make, "epsilon")


@test("mechanism parameters are checked")
def _():
    for d in [0.0, 1.0, -1e-9, math.nan, math.inf]:
        assert_raises(InvalidParameter, f"laplace delta {d}", lambda: GeoMechanism.laplace(1.0, d), "delta")
    for share in [0.0, 1.0, -0.5, 1.5, math.nan]:
        assert_raises(InvalidParameter, f"polyplace share {share}", lambda: GeoMechanism.polyplace_with(1.0, share), "share")
        assert_raises(InvalidParameter, f"t share {share}", lambda: GeoMechanism.student_t_with(1.0, 3.0, share), "share")
        assert_raises(InvalidParameter, f"cauchy share {share}", lambda: GeoMechanism.cauchy_with(1.0, 4.0, share), "share")
    for dof in [1.0, 0.5, -1.0, math.nan, math.inf]:
        assert_raises(InvalidParameter, f"dof {dof}", lambda: GeoMechanism.student_t_with(1.0, dof, 0.3), "dof")
    for k in [2.0, 1.0, math.nan, math.inf]:
        assert_raises(InvalidParameter, f"k {k}", lambda: GeoMechanism.cauchy_with(1.0, k, 0.3), "k")


@test("every mechanism releases a report without S or the scale")
def _():
    q = GeoQuery.threshold(100.0, 10.0)
    for name, make in all_mechanisms(0.05):
        m = make()
        r = m.privatize_unmetered(q, [42.0])
        expect(math.isfinite(r.value), f"{name} value {r.value}")
        expect(r.query_id == "threshold:T=100;w=10", f"{name} id {r.query_id}")
        expect(r.mechanism == m.name(), f"{name}: {r.mechanism} vs {m.name()}")
        expect(r.epsilon == 0.05 and r.delta == m.delta(), f"{name} eps/delta")
        expect(r.json.startswith('{"version":2,') and "\n" not in r.json, f"{name} json {r.json}")
        for leak in ["scale", "sensitivity", "sigma"]:
            expect(leak not in r.json, f"{name} leaks {leak}: {r.json}")
        expect(isinstance(r.bytes, bytes) and 30 <= len(r.bytes) <= 64, f"{name} bytes {r.bytes!r}")
    m = GeoMechanism.polyplace(0.001)
    expect(m.name() == MechanismName.POLYPLACE and m.epsilon() == 0.001 and m.delta() == 0.0, str(m))
    expect(abs(m.smoothness_share() - 1 / 9) < 1e-15, f"share {m.smoothness_share()}")
    g = m.growth()
    expect(g.is_EXPONENTIAL() and abs(g.rate - 0.001 / 9) < 1e-18, f"growth {g}")
    expect(not m.is_seeded() and "polyplace" in str(m), str(m))
    expect(GeoMechanism.laplace(1.0, 1e-6).growth().is_LINEAR(), "laplace growth")
    expect(GeoMechanism.global_laplace(1.0).growth() is None, "baseline growth")


@test("bad points are refused by privatize")
def _():
    m = GeoMechanism.cauchy(0.1)
    for q in [GeoQuery.threshold(0.0, 1.0), GeoQuery.two_way(0.0, 0.0, 1.0), GeoQuery.kde([0.0, 0.0, 0.0], 1.0)]:
        d = q.dimension()
        bad = [[], [0.5] * (d + 1)] + ([[0.5] * (d - 1)] if d > 1 else [])
        bad += [[0.5] * (d - 1) + [nf] for nf in NON_FINITE]
        for x in bad:
            assert_raises(InvalidInput, f"privatize {q} at {x}", lambda: m.privatize_unmetered(q, x))


@test("a seeded mechanism is reproducible and says it is not secure")
def _():
    q = GeoQuery.kde([0.0, 0.0], 100.0)
    m = GeoMechanism.polyplace(0.01)

    def run(seed):
        s = m.seeded(seed)
        return [s.privatize_unmetered(q, [float(i), 30.0]).value for i in range(5)]

    expect(run(7) == run(7), "same seed, same values")
    expect(run(7) != run(8), "different seeds")
    s = m.seeded(1)
    expect(s.is_seeded() and "NOT SECURE" in str(s), str(s))
    expect(m.privatize_unmetered(q, [1.0, 1.0]).value != m.privatize_unmetered(q, [1.0, 1.0]).value, "secure draws repeat")
    try:
        m.seeded(-1)
        raise AssertionError("a negative seed was accepted")
    except (TypeError, ValueError, OverflowError):
        pass


# ---- lat/lon ----

PARIS = Projection.LOCAL_EQUIRECTANGULAR(48.8566, 2.3522)


@test("project: metres around the reference, Web Mercator")
def _():
    expect(project(48.8566, 2.3522, PARIS) == [0.0, 0.0], "reference")
    louvre = project(48.8606, 2.3376, PARIS)
    expect(abs(math.hypot(*louvre) - 1170.0) < 10.0 and louvre[0] < 0 < louvre[1], f"louvre {louvre}")
    m = project(0.0, 180.0, Projection.WEB_MERCATOR())
    expect(abs(m[0] - math.pi * 6_378_137.0) < 1e-6 and m[1] == 0.0, f"mercator {m}")


@test("bad locations are InvalidInput, bad projections and query points InvalidParameter")
def _():
    bad_locations = [(math.nan, 2.0), (48.0, math.nan), (math.inf, 2.0), (48.0, -math.inf), (90.5, 0.0), (-91.0, 0.0), (0.0, 180.5)]
    q = GeoQuery.kde_latlon(48.86, 2.34, 250.0, PARIS)
    m = GeoMechanism.polyplace(1e-3)
    for lat, lon in bad_locations:
        assert_raises(InvalidInput, f"project {lat},{lon}", lambda: project(lat, lon, PARIS), "location")
        assert_raises(InvalidInput, f"privatize_latlon {lat},{lon}", lambda: m.privatize_latlon_unmetered(q, lat, lon, PARIS), "location")
        assert_raises(InvalidParameter, f"kde_latlon {lat},{lon}", lambda: GeoQuery.kde_latlon(lat, lon, 250.0, PARIS))
        assert_raises(InvalidParameter, f"two_way_latlon {lat},{lon}", lambda: GeoQuery.two_way_latlon(lat, lon, 100.0, PARIS))
    assert_raises(InvalidInput, "mercator beyond 85.05", lambda: project(86.0, 0.0, Projection.WEB_MERCATOR()), "latitude")
    for rlat, rlon in [(90.0, 0.0), (-90.0, 0.0), (math.nan, 0.0), (0.0, 200.0)]:
        p = Projection.LOCAL_EQUIRECTANGULAR(rlat, rlon)
        assert_raises(InvalidParameter, f"reference {rlat},{rlon}", lambda: project(0.0, 0.0, p), "reference")
    for h in BAD_POSITIVE:
        assert_raises(InvalidParameter, f"kde_latlon h {h}", lambda: GeoQuery.kde_latlon(48.86, 2.34, h, PARIS), "bandwidth")
        assert_raises(InvalidParameter, f"two_way_latlon w {h}", lambda: GeoQuery.two_way_latlon(48.86, 2.34, h, PARIS), "width")
    assert_raises(
        InvalidParameter, "projection mismatch", lambda: m.privatize_latlon_unmetered(q, 48.86, 2.34, Projection.WEB_MERCATOR()), "projection"
    )
    assert_raises(
        InvalidParameter, "1-D query from lat/lon", lambda: m.privatize_latlon_unmetered(GeoQuery.threshold(0.0, 1.0), 48.86, 2.34, PARIS), "2-D"
    )


@test("lat/lon queries: ids, values and the two-way quadrant")
def _():
    k = GeoQuery.kde_latlon(48.8566, 2.3522, 250.0, PARIS)
    expect(k.query_id() == "kde:t=0,0;h=250", k.query_id())
    expect("LocalEquirectangular" in str(k), str(k))
    north = project(48.8566 + 250.0 / 111_200.0, 2.3522, PARIS)
    expect(abs(k.value(north) - math.exp(-0.5)) < 0.01, f"f(250 m) {k.value(north)}")
    w = GeoQuery.two_way_latlon(48.8566, 2.3522, 100.0, PARIS)
    expect(w.value(project(48.87, 2.37, PARIS)) == 1.0, "north-east is in")
    expect(w.value(project(48.84, 2.37, PARIS)) == 0.0, "south-east is out")
    expect(w.value(project(48.87, 2.33, PARIS)) == 0.0, "north-west is out")
    r = GeoMechanism.polyplace(1e-3).privatize_latlon_unmetered(w, 48.87, 2.37, PARIS)
    expect(r.query_id == w.query_id() and math.isfinite(r.value), str(r))


# ---- reports and the server's policy ----


def report_code(e):
    return str(e).rsplit("[", 1)[-1].rstrip("]")


REPORT_Q = GeoQuery.threshold(100_000.0, 20_000.0)
REPORT_M = GeoMechanism.polyplace(1 / 8000)
POLICY = ReportPolicy(1 / 4000, 0.0)


@test("a device report is accepted from JSON and from bytes")
def _():
    r = REPORT_M.privatize_unmetered(REPORT_Q, [42_000.0])
    got = POLICY.accept_json(r.json)
    expect(got.value == r.value and got.query_id == REPORT_Q.query_id() and got.family == QueryFamily.THRESHOLD, str(got))
    expect(got.mechanism == MechanismName.POLYPLACE and got.epsilon == 1 / 8000 and got.delta == 0.0, str(got))
    expect(POLICY.accept_bytes(r.bytes) == got, "bytes decode to the same report")
    expect(POLICY.accept_json(f"  {r.json}\n") == got, "surrounding whitespace")
    expect(POLICY.max_epsilon() == 1 / 4000 and POLICY.max_delta() == 0.0, "policy getters")


@test("bad reports raise InvalidReport with the reason")
def _():
    r = REPORT_M.privatize_unmetered(REPORT_Q, [42_000.0])
    bad_json = [
        ("", "empty"),
        ("   \n", "empty"),
        ("{", "truncated"),
        ("not a report", "malformed"),
        ("{}", "malformed"),
        ("[1,2,3]", "malformed"),
        ("null", "malformed"),
        (r.json.replace('"value"', '"scale":0.5,"value"'), "malformed"),
        (r.json.replace('"version":2', '"version":3'), "unsupported-version"),
        (r.json.replace('"threshold":100000.0', '"threshold":"x"'), "malformed"),
        (r.json.replace('"width":20000.0', '"width":0.0'), "invalid-query"),
        (re.sub(r'"value":[^}]*', '"value":1e999', r.json), "malformed"),
        (r.json.replace('"epsilon":0.000125', '"epsilon":-1.0'), "epsilon-out-of-policy"),
        (r.json.replace('"delta":0.0', '"delta":0.5'), "delta-out-of-policy"),
    ]
    for line, code in bad_json:
        try:
            POLICY.accept_json(line)
            raise AssertionError(f"accepted {line!r}")
        except InvalidReport as e:
            expect(report_code(e) == code, f"{line!r}: code {report_code(e)}, expected {code} ({e})")
    v4 = bytes([4]) + r.bytes[1:]  # binary version 3 is current (mandatory seeded byte, check)
    bad_bytes = [
        (b"", "empty"),
        (b"\xff" * 7, "malformed"),
        (r.bytes[:-1], "truncated"),
        (r.bytes + b"\x00", "trailing-bytes"),
        (v4, "unsupported-version"),
        (b"garbage!", ""),
        (r.json.encode(), ""),
    ]
    for blob, code in bad_bytes:
        try:
            POLICY.accept_bytes(blob)
            raise AssertionError(f"accepted {blob!r}")
        except InvalidReport as e:
            expect(code == "" or report_code(e) == code, f"{blob!r}: code {report_code(e)}, expected {code}")
    for wrong in [None, 3, ["{}"]]:
        try:
            POLICY.accept_json(wrong)
            raise AssertionError(f"accept_json({wrong!r}) was accepted")
        except (TypeError, ValueError):
            pass


@test("the policy's limits: epsilon, queries, mechanisms, local DP")
def _():
    r = REPORT_M.privatize_unmetered(REPORT_Q, [42_000.0])

    def refused_with(code, policy, line):
        assert_raises(InvalidReport, f"refused {code}", lambda: policy.accept_json(line), code)

    refused_with("epsilon-out-of-policy", ReportPolicy(1 / 10_000, 0.0), r.json)
    refused_with("unknown-query", POLICY.only_queries([GeoQuery.threshold(50_000.0, 20_000.0)]), r.json)
    POLICY.only_queries([REPORT_Q]).accept_json(r.json)
    refused_with("mechanism-not-allowed", POLICY.only_mechanisms([MechanismName.STUDENT_T]), r.json)
    ldp = GeoMechanism.local_dp(1.0).privatize_unmetered(REPORT_Q, [1.0])
    refused_with("mechanism-not-allowed", POLICY, ldp.json)
    POLICY.allow_ldp(2.0).accept_json(ldp.json)
    lap = GeoMechanism.laplace(1 / 8000, 1e-6).privatize_unmetered(REPORT_Q, [1.0])
    refused_with("delta-out-of-policy", POLICY, lap.json)
    ReportPolicy(1 / 4000, 1e-5).accept_json(lap.json)
    for bad in BAD_POSITIVE:
        assert_raises(InvalidParameter, f"policy max epsilon {bad}", lambda: ReportPolicy(bad, 0.0))
        assert_raises(InvalidParameter, f"allow_ldp {bad}", lambda: POLICY.allow_ldp(bad))
    for bad in [-0.1, 1.0, math.nan]:
        assert_raises(InvalidParameter, f"policy max delta {bad}", lambda: ReportPolicy(1.0, bad))


# ---- the device ledger (docs/MATH.md §8.3) ----

Q01 = GeoQuery.threshold(0.0, 1.0)


def budget_policy(unit, total_epsilon, total_delta):
    return BudgetPolicy(unit=unit, total_epsilon=total_epsilon, total_delta=total_delta)

PER_METRE = budget_policy(BudgetUnit.PER_METRE(), 0.25, 0.0)
UnitMismatch = GeoprivError.UnitMismatch
LedgerRefused = GeoprivError.LedgerRefused
LedgerIo = GeoprivError.LedgerIo


@test("ledger: privatize is metered; a refused release raises BudgetExceeded and leaves the ledger unchanged")
def _():
    m = GeoMechanism.polyplace(0.1).with_unit(BudgetUnit.PER_METRE())
    ledger = PrivacyLedger.in_memory(PER_METRE)
    for _ in range(2):
        m.privatize(ledger, Q01, [0.3])
    before = ledger.status()
    expect(before.releases == 2 and abs(before.remaining_epsilon - 0.05) < 1e-12 and before.total_epsilon == 0.25, str(before))
    expect(not ledger.can_afford(m), "can_afford")
    assert_raises(BudgetExceeded, "third release", lambda: m.privatize(ledger, Q01, [0.3]), "budget")
    lap = GeoMechanism.laplace(0.01, 1e-6).with_unit(BudgetUnit.PER_METRE())
    assert_raises(BudgetExceeded, "delta on a pure budget", lambda: lap.privatize(ledger, Q01, [0.3]), "delta")
    kq = GeoQuery.kde_latlon(48.86, 2.35, 100.0, PARIS)
    plain = GeoMechanism.polyplace(0.1)  # lat/lon: per projected metre without with_unit
    assert_raises(BudgetExceeded, "lat/lon release", lambda: plain.privatize_latlon(ledger, kq, 48.86, 2.35, PARIS), "budget")
    fresh = PrivacyLedger.in_memory(PER_METRE)
    for x in [[math.nan], [], [1.0, 2.0]]:
        assert_raises(InvalidInput, f"bad point {x}", lambda: m.privatize(fresh, Q01, x))
    expect(ledger.status() == before and fresh.status().releases == 0, "changed by refusals")


@test("ledger: units must match (local DP, per dollar, unstated)")
def _():
    ledger = PrivacyLedger.in_memory(PER_METRE)
    assert_raises(UnitMismatch, "local DP into per metre", lambda: GeoMechanism.local_dp(0.1).privatize(ledger, Q01, [0.3]), "unit")
    dollars = GeoMechanism.polyplace(0.1).with_unit(BudgetUnit.PER_DOLLAR())
    assert_raises(UnitMismatch, "per dollar into per metre", lambda: dollars.privatize(ledger, Q01, [0.3]), "unit")
    assert_raises(UnitMismatch, "unit not stated", lambda: GeoMechanism.polyplace(0.1).privatize(ledger, Q01, [0.3]), "with_unit")
    assert_raises(UnitMismatch, "GP as local DP", lambda: GeoMechanism.polyplace(0.1).with_unit(BudgetUnit.LOCAL_DP()))
    expect(ledger.status().releases == 0, "charged by a refusal")
    ldp = PrivacyLedger.in_memory(budget_policy(BudgetUnit.LOCAL_DP(), 1.0, 0.0))
    GeoMechanism.local_dp(0.5).privatize(ldp, Q01, [0.3])
    km = BudgetUnit.CUSTOM("per-km")
    GeoMechanism.polyplace(0.1).with_unit(km).privatize(PrivacyLedger.in_memory(budget_policy(km, 1.0, 0.0)), Q01, [0.3])
    expect(ldp.status().releases == 1, str(ldp.status()))


@test("ledger: the pinned policy refuses edited, reset or foreign states")
def _():
    pinned = budget_policy(BudgetUnit.PER_METRE(), 1.0, 1e-6)
    ledger = PrivacyLedger.in_memory(pinned)
    share = ledger.even_split(10)
    expect(share.epsilon > 0.1 * (1 - 1e-12) and share.delta > 1e-7 * (1 - 1e-12), str(share))
    expect(ledger.even_split(0) is None, "even_split(0)")
    m = GeoMechanism.laplace(share.epsilon, share.delta).with_unit(BudgetUnit.PER_METRE())
    for _ in range(3):
        m.privatize(ledger, Q01, [0.5])
    state = ledger.to_json()
    expect(PrivacyLedger.restore(state, pinned).status() == ledger.status(), f"round trip {state}")
    refused = [
        (state, budget_policy(BudgetUnit.PER_METRE(), 2.0, 1e-6)),  # the app's total changed
        (state, budget_policy(BudgetUnit.PER_DOLLAR(), 1.0, 1e-6)),  # another unit
        (state.replace('"total_epsilon":1.0', '"total_epsilon":1e300'), pinned),  # raised total
        (state.replace('"releases":3', '"releases":0'), pinned),  # counter reset
        ("{", pinned),
    ]
    for s, policy in refused:
        assert_raises(LedgerRefused, f"restore {s!r}", lambda: PrivacyLedger.restore(s, policy), "ledger refused")
    for e, d in [(0.0, 0.0), (math.nan, 0.0), (1.0, 1.0)]:
        assert_raises(InvalidParameter, f"policy({e}, {d})", lambda: PrivacyLedger.in_memory(budget_policy(BudgetUnit.PER_METRE(), e, d)))


@test("ledger: file-backed, written before the report is returned; a crash loses the report, never the charge")
def _():
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "ledger.json")
        FILE_POLICY = budget_policy(BudgetUnit.PER_METRE(), 1.0, 0.0)
        assert_raises(LedgerIo, "open a missing file", lambda: PrivacyLedger.open(path, FILE_POLICY))
        m = GeoMechanism.polyplace(0.1).with_unit(BudgetUnit.PER_METRE())
        ledger = PrivacyLedger.open_or_create(path, FILE_POLICY)
        m.privatize(ledger, Q01, [0.3])  # the app dies before uploading: the report is lost
        del ledger
        ledger = PrivacyLedger.open(path, FILE_POLICY)  # restart: the charge is on disk
        expect(ledger.status().releases == 1 and ledger.status().spent_epsilon == 0.1, str(ledger.status()))
        assert_raises(LedgerIo, "create over an existing ledger", lambda: PrivacyLedger.create(path, FILE_POLICY))
        assert_raises(LedgerRefused, "another pinned total", lambda: PrivacyLedger.open(path, budget_policy(BudgetUnit.PER_METRE(), 2.0, 0.0)))
        with open(os.path.join(tmp, ".ledger.json.tmp"), "w") as f:
            f.write('{"partial')  # a crash in the middle of a write
        m.privatize(ledger, Q01, [0.3])
        expect(PrivacyLedger.open(path, FILE_POLICY).status().releases == 2, "second charge on disk")
        os.rename(tmp, tmp + ".moved")  # the ledger's directory disappears: no write possible
        try:
            assert_raises(LedgerIo, "unwritable ledger", lambda: m.privatize(ledger, Q01, [0.3]))
            expect(ledger.status().releases == 2, "charged without a write")
        finally:
            os.rename(tmp + ".moved", tmp)


# ---- the platform monotonic counter, implemented by the app (docs/MATH.md §8.3) ----


class AppCounter:
    """An app-side counter (MonotonicCounter): in memory here; a keystore,
    Secure Enclave or TPM counter in an app. ``fail_with``: raise it."""

    def __init__(self, start=0):
        self.value = start
        self.fail_with = None
        self.lock = threading.Lock()

    def read(self):
        if self.fail_with is not None:
            raise self.fail_with
        with self.lock:
            return self.value

    def advance_to(self, value):
        if self.fail_with is not None:
            raise self.fail_with
        with self.lock:
            self.value = max(self.value, value)


COUNTER_POLICY = budget_policy(BudgetUnit.PER_METRE(), 0.5, 0.0)
COUNTED = GeoMechanism.polyplace(0.1).with_unit(BudgetUnit.PER_METRE())


@contextlib.contextmanager
def bound_ledger():
    """A ledger file in a fresh directory bound to a new AppCounter: (path, counter, ledger)."""
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "ledger.json")
        counter = AppCounter()
        yield path, counter, PrivacyLedger.open_or_create_with_counter(path, COUNTER_POLICY, counter)


@test("counter: a rolled-back file is refused; a writer without the counter cannot refill it (attack10 O1)")
def _():
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "ledger.json")
        counter = AppCounter()
        app = PrivacyLedger.open_or_create_with_counter(path, COUNTER_POLICY, counter)
        expect(app.is_counter_bound(), "not bound")
        COUNTED.privatize(app, Q01, [0.3])
        with open(path) as f:
            backup = f.read()
        for _ in range(2):
            COUNTED.privatize(app, Q01, [0.3])
        del app
        expect(counter.value == 3, f"counter {counter.value}")
        with open(path, "w") as f:
            f.write(backup)  # the rollback
        # A writer without the counter (a background job) may read, not charge.
        job = PrivacyLedger.open(path, COUNTER_POLICY)
        expect(job.status().releases == 1 and job.is_counter_bound(), str(job.status()))
        assert_raises(LedgerRefused, "charge without the counter", lambda: COUNTED.privatize(job, Q01, [0.3]), "monotonic counter")
        del job
        expect(PrivacyLedger.open(path, COUNTER_POLICY).status().releases == 1, "refilled")
        # The app, with its counter, refuses the rolled-back file.
        assert_raises(LedgerRefused, "the app reopens the rolled-back file",
                      lambda: PrivacyLedger.open_or_create_with_counter(path, COUNTER_POLICY, counter), "platform counter says 3")
        assert_raises(LedgerRefused, "open_with_counter",
                      lambda: PrivacyLedger.open_with_counter(path, COUNTER_POLICY, counter), "rolled back")


@test("counter: a deleted ledger file is not recreated while the counter counts releases")
def _():
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "ledger.json")
        counter = AppCounter(start=2)
        assert_raises(LedgerRefused, "open_or_create", lambda: PrivacyLedger.open_or_create_with_counter(path, COUNTER_POLICY, counter), "deleted")
        assert_raises(LedgerRefused, "create", lambda: PrivacyLedger.create_with_counter(path, COUNTER_POLICY, counter), "deleted")
        expect(not os.path.exists(path), "a fresh file was left behind")
        fresh = PrivacyLedger.create_with_counter(path, COUNTER_POLICY, AppCounter())
        expect(fresh.is_counter_bound() and not PrivacyLedger.in_memory(COUNTER_POLICY).is_counter_bound(), "binding")


@test("counter: a counter that raises is a LedgerIo error, never a crash; nothing is released")
def _():
    import tempfile

    from geopriv_ffi import CounterError

    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "ledger.json")
        counter = AppCounter()
        counter.fail_with = CounterError.Unavailable("TPM busy\n\x1b[2J")
        assert_raises(LedgerIo, "open with a busy counter",
                      lambda: PrivacyLedger.open_or_create_with_counter(path, COUNTER_POLICY, counter), "TPM busy\\n")
        counter.fail_with = None
        app = PrivacyLedger.open_or_create_with_counter(path, COUNTER_POLICY, counter)
        COUNTED.privatize(app, Q01, [0.3])
        # Declared and undeclared exceptions alike.
        for e, needle in [(CounterError.Unavailable("keystore locked"), "keystore locked"), (ValueError("no counter"), "no counter")]:
            counter.fail_with = e
            assert_raises(LedgerIo, f"release with a failing counter ({e!r})", lambda: COUNTED.privatize(app, Q01, [0.3]), needle)
            assert_raises(LedgerIo, "refresh with a failing counter", app.refresh)
        counter.fail_with = None
        expect(app.status().releases == 1, str(app.status()))
        COUNTED.privatize(app, Q01, [0.3])
        expect(app.status().releases == 2 and counter.value == 2, f"{app.status()} {counter.value}")
        counter.value = 0  # a counter that goes back is not monotonic
        assert_raises(LedgerRefused, "counter went back", lambda: COUNTED.privatize(app, Q01, [0.3]), "went back")


@test("counter: an outbox release whose counter fails says it is charged and queued (attack12 O3)")
def _():
    from geopriv_ffi import CounterError

    with bound_ledger() as (_, counter, app):
        real_advance = counter.advance_to

        def busy(value):  # read works, the advance after the write fails
            raise CounterError.Unavailable("TPM busy")

        counter.advance_to = busy
        try:
            COUNTED.privatize_to_outbox(app, Q01, [0.3])
            raise AssertionError("released with a failing counter")
        except LedgerIo as e:
            message = str(e)
        expect("charged and queued in the outbox" in message and "TPM busy" in message, message)
        expect("nothing released" not in message, message)
        counter.advance_to = real_advance
        expect(len(app.pending_uploads()) == 1 and app.status().releases == 1, str(app.status()))


@test("counter: an outbox release whose read-back is interrupted says it is charged and queued (attack15 F1)")
def _():
    with bound_ledger() as (_, counter, app):
        COUNTED.privatize(app, Q01, [0.3])  # the binding has now seen 1
        real_read, real_advance = counter.read, counter.advance_to
        armed = []

        def advance(value):  # moves, then the read-back is interrupted
            real_advance(value)
            armed.append(value)

        def read():
            if armed:
                armed.clear()
                raise KeyboardInterrupt()  # reaches Rust as "read returned 0"
            return real_read()

        counter.advance_to, counter.read = advance, read
        try:
            # ctypes prints "Exception ignored on calling ctypes callback function" here.
            COUNTED.privatize_to_outbox(app, Q01, [0.3])
            raise AssertionError("released with an interrupted read-back")
        except LedgerIo as e:
            message = str(e)
        # Before attack15 F1: LedgerRefused "the platform monotonic counter
        # went back from 1 to 0", while the report waited in the outbox.
        expect("charged and queued in the outbox" in message and "went back" in message, message)
        counter.advance_to, counter.read = real_advance, real_read
        expect(len(app.pending_uploads()) == 1 and app.status().releases == 2, str(app.status()))


@test("counter: KeyboardInterrupt/SystemExit in advance_to (uniffi reports them as success) is caught by the read-back (attack12)")
def _():
    for exc in (KeyboardInterrupt, SystemExit):
        with bound_ledger() as (path, counter, app):
            COUNTED.privatize(app, Q01, [0.3])
            with open(path) as f:
                backup = f.read()
            real_advance = counter.advance_to

            def interrupted(value):
                raise exc()

            counter.advance_to = interrupted
            # ctypes prints "Exception ignored on calling ctypes callback function" here.
            assert_raises(LedgerIo, f"release whose advance_to raised {exc.__name__}",
                          lambda: COUNTED.privatize(app, Q01, [0.3]), "did not advance")
            counter.advance_to = real_advance
            del app
            with open(path, "w") as f:
                f.write(backup)  # the rollback the lagging counter would not see
            again = PrivacyLedger.open_or_create_with_counter(path, COUNTER_POLICY, counter)
            COUNTED.privatize(again, Q01, [0.3])
            # Two values released (the refused one was not), two recorded.
            expect(again.status().releases == 2 and counter.value == 2, f"{again.status()} {counter.value}")


@test("counter: a counter that calls its ledger gets an error, the host does not hang (attack12)")
def _():
    with bound_ledger() as (_, counter, app):
        real_advance = counter.advance_to

        def reentrant(value):
            app.status()
            real_advance(value)

        counter.advance_to = reentrant
        outcome = []

        def attempt():  # on a daemon thread: a hang fails the test instead of the suite
            try:
                COUNTED.privatize(app, Q01, [0.3])
                outcome.append(None)
            except GeoprivError as e:
                outcome.append(e)

        worker = threading.Thread(target=attempt, daemon=True)
        worker.start()
        worker.join(20)
        expect(not worker.is_alive(), "a counter that calls its ledger hung the release (20 s)")
        if worker.is_alive():
            return
        expect(type(outcome[0]) is LedgerIo and "inside a MonotonicCounter" in str(outcome[0]), repr(outcome[0]))
        counter.advance_to = real_advance
        expect(app.status().releases == 1, str(app.status()))  # charged, not released
        COUNTED.privatize(app, Q01, [0.3])


@test("ledger: seeded reports are marked and refused by servers unless accepted")
def _():
    r = GeoMechanism.polyplace(0.1).seeded(3).privatize_unmetered(Q01, [0.3])
    secure = GeoMechanism.polyplace(0.1).privatize_unmetered(Q01, [0.3])
    expect(r.seeded and not secure.seeded and '"seeded":true' in r.json, r.json)
    policy = ReportPolicy(1.0, 0.0)
    assert_raises(InvalidReport, "seeded JSON", lambda: policy.accept_json(r.json), "[seeded]")
    assert_raises(InvalidReport, "seeded bytes", lambda: policy.accept_bytes(r.bytes), "[seeded]")
    expect(policy.accept_seeded().accept_json(r.json).seeded, "accept_seeded")
    expect(not policy.accept_json(secure.json).seeded, "secure report")


def threshold_wire(version, value, report_id=None, seeded=False):
    """A polyplace threshold(100000, 20000) report at epsilon 1/8000 built by
    hand: binary version 2 (legacy: optional trailing 0x01 when seeded) or 3
    (mandatory seeded byte, then CRC-16/IBM-3740 big-endian), as README's
    report format section describes it."""
    b = bytes([version, 0]) + struct.pack("<dd", 100_000.0, 20_000.0) + bytes([0])
    b += struct.pack("<ddd", 1 / 8000, 0.0, value)
    b += b"\x00" if report_id is None else b"\x01" + report_id
    if version == 2:
        return b + (b"\x01" if seeded else b"")
    b += bytes([seeded])
    return b + binascii.crc_hqx(b, 0xFFFF).to_bytes(2, "big")


@test("binary reports: no proper prefix is a report, seeded stays refused, legacy version 2 still read (attack7 O3)")
def _():
    expect(binascii.crc_hqx(b"123456789", 0xFFFF) == 0x29B1, "CRC-16/IBM-3740 check value")
    queries = [
        (GeoQuery.threshold(100.0, 10.0), [42.0]),
        (GeoQuery.interval(10.0, 90.0, 10.0), [42.0]),
        (GeoQuery.two_way(30.0, 70.0, 10.0), [42.0, 42.0]),
        (GeoQuery.kde([1.0, 2.0], 5.0), [1.5, 2.5]),
    ]
    policy = ReportPolicy(1.0, 1e-5).allow_ldp(1.0)
    n = 0
    for name, make in all_mechanisms(0.05):
        for seed in [None, 5]:
            m = make() if seed is None else make().seeded(seed)
            for q, x in queries:
                try:
                    r = m.privatize_unmetered(q, x)
                except InvalidParameter:
                    continue  # a family this mechanism does not answer
                n += 1
                b = r.bytes
                expect(b[0] == 3 and b[-3] == (1 if seed is not None else 0), f"{name} {b!r}")
                expect(policy.accept_seeded().accept_bytes(b).value == r.value, f"{name} round trip")
                if seed is not None:
                    assert_raises(InvalidReport, f"{name} seeded", lambda: policy.accept_bytes(b), "[seeded]")
                for cut in range(len(b)):
                    try:
                        policy.accept_seeded().accept_bytes(b[:cut])
                        raise AssertionError(f"{name}: {cut} of {len(b)} bytes accepted")
                    except InvalidReport as e:
                        code = report_code(e)
                        expect(code == ("empty" if cut == 0 else "truncated"), f"{name} cut {cut}: {code}")
    expect(n >= 50, f"only {n} reports")
    # The library's bytes are the documented layout.
    r = REPORT_M.privatize_unmetered(REPORT_Q, [123_456.0])
    rid = r.bytes[44:60] if r.bytes[43] == 1 else None  # the report's id, if it has one
    expect(r.bytes == threshold_wire(3, r.value, rid), (r.bytes, threshold_wire(3, r.value, rid)))
    # Binary version 3 with an id: every cut refused, no id read from one.
    rid = bytes(range(16))
    v3 = threshold_wire(3, 0.25, rid, seeded=True)
    expect(report_id_of_frame(v3) == rid.hex(), report_id_of_frame(v3))
    strict = ReportPolicy(1e-3, 0.0)
    assert_raises(InvalidReport, "seeded v3", lambda: strict.accept_bytes(v3), "[seeded]")
    for cut in range(len(v3)):
        expect(report_id_of_frame(v3[:cut]) is None, f"id of a {cut}-byte cut")
        assert_raises(InvalidReport, f"v3 cut {cut}", lambda: strict.accept_bytes(v3[:cut]))
    # One damaged byte anywhere (the seeded byte 1 -> 0 included) is refused.
    for pos in range(len(v3)):
        for x in (0x01, 0x80, 0xFF):
            bad = bytearray(v3)
            bad[pos] ^= x
            assert_raises(InvalidReport, f"damage {pos}^{x}", lambda: strict.accept_seeded().accept_bytes(bytes(bad)))
    # Legacy binary version 2 (devices in the field) is still read, with the
    # documented hole: its seeded report cut by the last byte is unseeded.
    old = threshold_wire(2, 0.25, rid, seeded=True)
    expect(len(old) == 61 and report_id_of_frame(old) == rid.hex(), len(old))
    assert_raises(InvalidReport, "seeded v2", lambda: strict.accept_bytes(old), "[seeded]")
    got = strict.accept_bytes(old[:60])
    expect(not got.seeded and got.value == 0.25 and report_id_of_frame(old[:60]) == rid.hex(), got)


# ---- aggregation ----

Z95 = 1.959963984540054


@test("aggregator: textbook estimate, exact merge, state round trip")
def _():
    whole = Aggregator()
    expect(whole.estimate() is None and whole.count() == 0, "empty")
    whole.add_values([1.0, 2.0, 3.0, 4.0, 10.0])
    e = whole.estimate()
    expect((e.n, e.sum, e.mean, e.sample_variance) == (5, 20.0, 4.0, 12.5), str(e))
    se = math.sqrt(12.5 / 5)
    expect(abs(e.standard_error - se) < 1e-15, str(e))
    expect(abs(e.ci95_low - (4 - Z95 * se)) < 1e-12 and abs(e.ci95_high - (4 + Z95 * se)) < 1e-12, str(e))
    one = Aggregator()
    one.add_value(2.5)
    single = one.estimate()
    expect(single.standard_error is None and single.ci95_low is None and single.sample_variance is None, str(single))
    a, b = Aggregator(), Aggregator()
    a.add_values([1.0, 2.0])
    for v in [3.0, 4.0, 10.0]:
        b.add_value(v)
    a.merge(b)
    expect(a.to_json() == whole.to_json(), "merge of halves != whole")
    expect(b.count() == 3, "merge changed its argument")
    expect(Aggregator.from_json(whole.to_json()).estimate() == e, "from_json")
    a.merge(a)
    expect(a.count() == 10 and a.estimate().mean == 4.0, "self-merge")


@test("aggregator: bad values, reports and states leave it unchanged")
def _():
    a = Aggregator()
    a.add_value(1.0)
    before = a.to_json()
    for v in NON_FINITE:
        assert_raises(InvalidParameter, f"add_value {v}", lambda: a.add_value(v), "value")
        assert_raises(InvalidParameter, f"add_values with {v}", lambda: a.add_values([2.0, v]), "nothing was added")
    states = ["", "   ", "{", "garbage", '{"n":1}', '{"n":0,"sum":{"offset":0,"limbs":[5]},"sum_sq":{"offset":0,"limbs":[]}}']
    for s in states:
        assert_raises(InvalidReport, f"add_report_json {s!r}", lambda: a.add_report_json(s))
        assert_raises(InvalidReport, f"Aggregator.from_json {s!r}", lambda: Aggregator.from_json(s))
    for blob in [b"", b"\x01", b"\xde\xad\xbe\xef"]:
        assert_raises(InvalidReport, f"add_report_bytes {blob!r}", lambda: a.add_report_bytes(blob))
    expect(a.to_json() == before, "state changed")


@test("grid aggregator: routes reports to cells and refuses other queries")
def _():
    g = GridAggregator.kde_grid([0.0, 100.0], [0.0], 50.0)
    expect(g.size() == 2, "size")
    expect(g.per_device_total() is None, "no budget before any report")
    ids = g.query_ids()
    m = GeoMechanism.polyplace(0.01)
    r = m.privatize_unmetered(GeoQuery.from_id(ids[1]), [90.0, 5.0])
    expect(g.add_report_bytes(r.bytes).query_id == ids[1], "routed")
    g.add_report(ReportPolicy(1.0, 0.0).accept_json(r.json))
    expect(g.index_of(ids[1]) == 1 and g.index_of("kde:t=5,5;h=50") is None, "index_of")
    est = g.estimates()
    expect(est[0].estimate is None and est[1].estimate.n == 2 and est[1].query_id == ids[1], str(est))
    total = g.per_device_total()  # 2 cells at 0.01 each: 0.02 by sequential composition
    expect(total.cells == 2 and total.epsilon_per_query == 0.01 and total.epsilon == 0.02, str(total))
    stranger = m.privatize_unmetered(GeoQuery.kde([5.0, 5.0], 50.0), [0.0, 0.0])
    assert_raises(InvalidReport, "report for another query", lambda: g.add_report_json(stranger.json), "unknown-query")
    back = GridAggregator.from_json(g.to_json())
    expect(back.per_device_total() == total, "the budget survives the state")
    back.merge(g)
    expect(back.estimates()[1].estimate.n == 4, "merge")
    assert_raises(InvalidParameter, "merge other grid", lambda: back.merge(GridAggregator.kde_grid([0.0], [0.0], 50.0)))
    dup = GeoQuery.threshold(0.0, 1.0)
    assert_raises(InvalidParameter, "duplicate queries", lambda: GridAggregator([dup, GeoQuery.threshold(0.0, 1.0)]))
    assert_raises(InvalidParameter, "empty grid", lambda: GridAggregator([]))
    assert_raises(InvalidParameter, "kde grid bandwidth 0", lambda: GridAggregator.kde_grid([0.0], [0.0], 0.0))
    assert_raises(InvalidReport, "grid state", lambda: GridAggregator.from_json("{}"))


# ---- end to end: many devices, one server, estimates within their error bars ----


def ramp(t):
    return min(1.0, max(0.0, t + 0.5))


def threshold_f(t, w, x):
    return ramp((x - t) / w)


def interval_f(a, b, w, x):
    return ramp(min((x - a) / w, (b - x) / w))


def two_way_f(t1, t2, tau, x):
    r1 = tau / math.sqrt(2.0)
    d = math.hypot(max(0.0, t1 + tau / 2 + r1 - x[0]), max(0.0, t2 + tau / 2 + r1 - x[1]))
    return min(1.0, max(0.0, (r1 + tau - d) / tau))


USERS = int(os.environ.get("GEOPRIV_PYTHON_USERS", "5000"))


def check_unbiased(name, users, seed, policy, max_se, seeded, draw, truth_of, release):
    """users simulated devices draw x, privatize it and upload JSON (even) or
    bytes (odd); the server checks each report with the policy and aggregates.
    The true mean of f(x) (written out above, independent of the library) must
    lie in the 95% CI (seeded runs are deterministic) or, with the secure
    generator, within 5 standard errors (false alarm rate 6e-7)."""
    agg = Aggregator()
    rnd = random.Random(seed)
    truth = 0.0
    if seeded:
        policy = policy.accept_seeded()
    for i in range(users):
        x = draw(rnd)
        truth += truth_of(x)
        r = release(x)
        agg.add_report(policy.accept_json(r.json) if i % 2 == 0 else policy.accept_bytes(r.bytes))
    truth /= users
    e = agg.estimate()
    se = e.standard_error
    expect(e.n == users, f"{name}: n {e.n}")
    expect(abs(e.ci95_low - (e.mean - Z95 * se)) <= 1e-12 and abs(e.ci95_high - (e.mean + Z95 * se)) <= 1e-12, f"{name}: CI {e}")
    expect(0 < se < max_se, f"{name}: standard error {se} too large for a meaningful check (max {max_se})")
    if seeded:
        expect(e.ci95_low <= truth <= e.ci95_high, f"{name}: truth {truth} outside the 95% CI [{e.ci95_low}, {e.ci95_high}]")
    else:
        expect(abs(e.mean - truth) <= 5 * se, f"{name}: |mean {e.mean} - truth {truth}| > 5 se ({se})")
    if TIMING:
        print(f"     {name}: n={users} truth={truth:.4f} mean={e.mean:.4f} se={se:.4f} z={(e.mean - truth) / se:+.2f}")


@test("end to end: threshold, PolyPlace, incomes")
def _():
    q = GeoQuery.threshold(100_000.0, 20_000.0)
    m = GeoMechanism.polyplace(1 / 2000).seeded(11)
    check_unbiased(
        "threshold/polyplace", USERS, 11, ReportPolicy(1 / 1000, 0.0), 0.02, True,
        lambda r: [math.exp(math.log(60_000.0) + 0.6 * r.gauss(0.0, 1.0))],
        lambda x: threshold_f(100_000.0, 20_000.0, x[0]),
        lambda x: m.privatize_unmetered(q, x),
    )


@test("end to end: interval, Student's t, ages")
def _():
    q = GeoQuery.interval(20.0, 40.0, 5.0)
    m = GeoMechanism.student_t(0.5).seeded(12)
    check_unbiased(
        "interval/student-t", USERS, 12, ReportPolicy(1.0, 0.0), 0.03, True,
        lambda r: [80 * r.random()],
        lambda x: interval_f(20.0, 40.0, 5.0, x[0]),
        lambda x: m.privatize_unmetered(q, x),
    )


@test("end to end: two-way threshold, generalized Cauchy, 2-D metres")
def _():
    q = GeoQuery.two_way(0.0, 0.0, 500.0)
    m = GeoMechanism.cauchy(1 / 200).seeded(13)
    check_unbiased(
        "two-way/cauchy", USERS, 13, ReportPolicy(1 / 100, 0.0), 0.03, True,
        lambda r: [r.gauss(0.0, 2000.0), r.gauss(500.0, 2000.0)],
        lambda x: two_way_f(0.0, 0.0, 500.0, x),
        lambda x: m.privatize_unmetered(q, x),
    )


@test("end to end: KDE from GPS fixes, Laplace (epsilon, delta)")
def _():
    h = 250.0
    q = GeoQuery.kde_latlon(48.8606, 2.3376, h, PARIS)
    cx, cy = project(48.8606, 2.3376, PARIS)
    m = GeoMechanism.laplace(1 / 100, 1e-6).seeded(14)
    deg_lat = 1 / 111_200.0
    deg_lon = 1 / (111_320.0 * math.cos(math.radians(48.86)))

    def truth(ll):
        x, y = project(ll[0], ll[1], PARIS)
        return math.exp(-((x - cx) ** 2 + (y - cy) ** 2) / (2 * h * h))

    check_unbiased(
        "kde-latlon/laplace", USERS, 14, ReportPolicy(1 / 50, 1e-5), 0.02, True,
        lambda r: [48.8606 + r.gauss(0.0, 400.0) * deg_lat, 2.3376 + r.gauss(0.0, 400.0) * deg_lon],
        truth,
        lambda ll: m.privatize_latlon_unmetered(q, ll[0], ll[1], PARIS),
    )


@test("end to end: secure generator (unseeded) and the baselines")
def _():
    q = GeoQuery.threshold(50.0, 10.0)
    policy = ReportPolicy(1.0, 0.0).allow_ldp(2.0)

    def draw(r):
        return [100 * r.random()]

    def truth(x):
        return threshold_f(50.0, 10.0, x[0])

    secure = GeoMechanism.polyplace(0.5)
    check_unbiased("threshold/polyplace secure", USERS // 4, 15, policy, 0.05, False, draw, truth, lambda x: secure.privatize_unmetered(q, x))
    glob = GeoMechanism.global_laplace(0.5).seeded(16)
    check_unbiased("threshold/global-laplace", USERS // 4, 16, policy, 0.05, True, draw, truth, lambda x: glob.privatize_unmetered(q, x))
    ldp = GeoMechanism.local_dp(2.0).seeded(17)
    check_unbiased("threshold/ldp", USERS // 4, 17, policy, 0.05, True, draw, truth, lambda x: ldp.privatize_unmetered(q, x))


# ---- objects shared across threads ----


@test("threads share one Aggregator, one GeoMechanism and one PrivacyLedger")
def _():
    threads, per = 4, 150
    q = GeoQuery.two_way(0.0, 0.0, 100.0)
    m = GeoMechanism.polyplace(0.01)  # secure generator, shared
    agg = Aggregator()

    def work(t):
        values = []
        for i in range(per):
            r = m.privatize_unmetered(q, [i - 75.0, 10.0 * t])
            if i % 2 == 0:
                agg.add_report_json(r.json)
            else:
                agg.add_report_bytes(r.bytes)
            values.append(r.value)
        return values

    with ThreadPoolExecutor(threads) as pool:
        values = [v for vs in pool.map(work, range(threads), timeout=60) for v in vs]
    expect(agg.count() == threads * per, f"count {agg.count()}")
    serial = Aggregator()
    serial.add_values(values)
    # The state is exact, so the interleaving cannot matter.
    expect(agg.to_json() == serial.to_json(), "shared aggregate differs from the serial one")

    budget = PrivacyLedger.in_memory(budget_policy(BudgetUnit.PER_METRE(), 1.0, 0.0))
    bm = GeoMechanism.polyplace(budget.even_split(40).epsilon).with_unit(BudgetUnit.PER_METRE())

    def spend(_):
        ok = refused = 0
        for _ in range(20):
            try:
                bm.privatize(budget, q, [1.0, 1.0])
                ok += 1
            except BudgetExceeded:
                refused += 1
        return ok, refused

    with ThreadPoolExecutor(threads) as pool:
        outcomes = list(pool.map(spend, range(threads), timeout=60))
    expect(sum(o for o, _ in outcomes) == 40 and sum(r for _, r in outcomes) == 40, f"budget outcomes {outcomes}")
    expect(budget.status().releases == 40, str(budget.status()))

    a, b = Aggregator(), Aggregator()
    a.add_values([1.0, 2.0])
    b.add_value(3.0)

    def cross(k):
        # Repeated cross-merges double the counts; once they would overflow
        # the merge is refused with the state unchanged (server hardening),
        # which is the correct answer here, not a failure.
        for _ in range(50):
            try:
                (a.merge(b) if k % 2 == 0 else b.merge(a))
            except Exception as e:  # noqa: BLE001 - only the overflow refusal is expected
                if "overflow" not in str(e):
                    raise

    with ThreadPoolExecutor(threads) as pool:
        list(pool.map(cross, range(threads), timeout=30))
    expect(a.count() > 2 and b.count() > 1, "merges ran")


# ---- the server example of bindings/README.md, verbatim (test-python.sh checks it) ----

def density_map(lines, cells, bandwidth_metres=250.0, max_epsilon=1 / 1000):
    """Aggregates uploaded JSON lines into one estimate per density-map cell."""
    city = Projection.LOCAL_EQUIRECTANGULAR(48.8566, 2.3522)  # the devices' projection
    queries = [GeoQuery.kde_latlon(lat, lon, bandwidth_metres, city) for lat, lon in cells]
    policy = ReportPolicy(max_epsilon, 0.0).only_queries(queries)
    grid, rejected = GridAggregator(queries), {}
    for line in lines:
        try:
            grid.add_report(policy.accept_json(line))
        except GeoprivError.InvalidReport as e:  # e.code: the rejection code, e.g. "malformed"
            rejected[e.code] = rejected.get(e.code, 0) + 1
    return grid.estimates(), rejected  # per cell: query_id, estimate (n, mean, ci95_low, ...)


@test("README server example: a density map from uploaded JSON lines")
def _():
    cells = [(48.8606, 2.3376), (48.8530, 2.3499)]  # the Louvre, Notre-Dame
    rnd = random.Random(31)
    mechanism = GeoMechanism.polyplace(1 / 1000)
    one_report = budget_policy(BudgetUnit.PER_METRE(), 1 / 1000, 0.0)
    lines, truths = [], [[] for _ in cells]
    for i in range(USERS // 5):
        k = i % len(cells)  # the server assigns each device one cell
        lat = cells[k][0] + rnd.gauss(0.0, 300.0) / 111_200.0
        lon = cells[k][1] + rnd.gauss(0.0, 300.0) / 73_300.0
        query = GeoQuery.kde_latlon(cells[k][0], cells[k][1], 250.0, PARIS)
        lines.append(mechanism.privatize_latlon(PrivacyLedger.in_memory(one_report), query, lat, lon, PARIS).json)
        truths[k].append(query.value(project(lat, lon, PARIS)))
    stranger = mechanism.privatize_latlon_unmetered(GeoQuery.kde_latlon(48.80, 2.30, 250.0, PARIS), 48.8, 2.3, PARIS).json
    greedy = GeoMechanism.polyplace(1 / 100).privatize_latlon_unmetered(GeoQuery.kde_latlon(*cells[0], 250.0, PARIS), 48.86, 2.34, PARIS).json
    estimates, rejected = density_map(lines + ["", "{not json", stranger, greedy], cells)
    expect(rejected == {"empty": 1, "malformed": 1, "unknown-query": 1, "epsilon-out-of-policy": 1}, str(rejected))
    for k, cell in enumerate(estimates):
        e, truth = cell.estimate, sum(truths[k]) / len(truths[k])
        expect(e.n == len(truths[k]) and abs(e.mean - truth) <= 5 * e.standard_error, f"cell {k}: truth {truth}, {e}")


# ---- the central model (docs/MATH.md §11) ----


@test("central: quantile release, smooth sensitivity, Smooth Noisy Max, Algorithm 1")
def _():
    values = [1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0, 9.0]
    # x_i = i, Λ = 10, median x_5 = 5: S* = max_k e^{-kβ}(k + 1) (lecture example).
    beta = 0.2
    want = max(math.exp(-k * beta) * (k + 1) for k in range(10))
    got = central_smooth_sensitivity(values, 10.0, 0.5, beta)
    expect(abs(got - want) <= 1e-9 * want, f"S* {got} vs {want}")
    for kind in [CentralNoiseKind.POLY_PLACE(), CentralNoiseKind.STUDENT_T(), CentralNoiseKind.CAUCHY(),
                 CentralNoiseKind.LAPLACE(1e-6), CentralNoiseKind.LECTURE_CAUCHY(), CentralNoiseKind.LECTURE_LAPLACE(1e-6)]:
        y = central_quantile(values, 10.0, 0.5, 1.0, kind, 7)
        expect(math.isfinite(y), f"{kind}: {y}")
        expect(y == central_quantile(values, 10.0, 0.5, 1.0, kind, 7), "seeded releases repeat")
    assert_raises(InvalidInput, "empty dataset", lambda: central_quantile([], 10.0, 0.5, 1.0, CentralNoiseKind.POLY_PLACE(), 1), "empty")
    assert_raises(InvalidInput, "value above Λ", lambda: central_quantile([11.0], 10.0, 0.5, 1.0, CentralNoiseKind.POLY_PLACE(), 1))
    assert_raises(InvalidInput, "NaN value", lambda: central_quantile([math.nan], 10.0, 0.5, 1.0, CentralNoiseKind.POLY_PLACE(), 1))
    for bad in BAD_POSITIVE:
        assert_raises(InvalidParameter, f"epsilon {bad}", lambda: central_quantile(values, 10.0, 0.5, bad, CentralNoiseKind.POLY_PLACE(), 1), "epsilon")
        assert_raises(InvalidParameter, f"lambda {bad}", lambda: central_quantile(values, bad, 0.5, 1.0, CentralNoiseKind.POLY_PLACE(), 1), "lambda")
    b = smooth_noisy_max_beta(1.0, None)
    assert_close(b, 1.0 / 8.0, "SNM-t beta")
    r = smooth_noisy_max_select([0.0, -100.0, -100.0], 0.01, 1.0, 1e-6, 3)
    expect(r == 0, f"selected {r}")
    assert_raises(InvalidInput, "empty candidates", lambda: smooth_noisy_max_select([], 1.0, 1.0, None, 1), "candidate")
    scales = instance_based_chain_scales([1.0, 10.0, 100.0], 1.0, 1e-6)
    expect(len(scales) == 3 and scales[0] < scales[1] < scales[2], str(scales))
    expect(abs(scales[2] - 200.0 / 0.9639) < 5.0, f"top scale {scales[2]}")  # 2 LS_r / ε_A


# The README's "Years of daily reports" example (root README.md, checked by
# test-python.sh): a planned schedule and a memoized income.
def plan_for(devices):
    """App: a year of daily periods, ε = 3 per $20k over each device's life; the planner picks the days and ε per report."""
    query = GeoQuery.threshold(100_000.0, 20_000.0)
    c = schedule_noise_constant(GeoMechanism.polyplace(1.0), query)  # PolyPlace's noise variance is c / ε²
    assert c is not None  # None only for noise a priori
    plan = plan_schedule(devices, 365, 3 / 20_000, 0.25, c)  # also plan.variance_per_period, plan.fresh_variance_per_period
    mechanism = GeoMechanism.polyplace(plan.epsilon_per_report).with_unit(BudgetUnit.PER_DOLLAR)
    return ReportSchedule.fixed_slot(plan.every), MemoizedRelease(mechanism, 5_000.0, None)  # $5k cells


def daily_report(income, ledger, schedule, memo):
    """Device, once a day: the memoized income report on the days the schedule picks, else None."""
    if not schedule.reports_in(ledger, ledger.status().period):
        return None  # a day off: chosen from the ledger's secret, never from the income
    query = GeoQuery.threshold(100_000.0, 20_000.0)
    try:
        return memo.release(ledger, query, [income]).report.json  # an unchanged cell re-sends its report, free
    except GeoprivError.BudgetExceeded:  # a new cell that does not fit: nothing released or charged
        return None


@test("report schedules, the planner and memoized releases (README)")
def _():
    schedule, memo = plan_for(1_000_000)
    query = GeoQuery.threshold(100_000.0, 20_000.0)
    c = schedule_noise_constant(GeoMechanism.polyplace(1.0), query)
    expect(c is not None and c > 0, str(c))
    plan = plan_schedule(1_000_000, 365, 3 / 20_000, 0.25, c)
    expect(schedule.probability() == 1 / plan.every, f"{schedule.probability()} vs every {plan.every}")
    expect(plan.variance_per_period < plan.fresh_variance_per_period, str(plan))
    expect(abs(plan.epsilon_per_report * plan.reports_per_device - 3 / 20_000) <= 1e-12, str(plan))
    policy = BudgetPolicy(unit=BudgetUnit.PER_DOLLAR, total_epsilon=plan.epsilon_per_report, total_delta=0.0)
    ledger = PrivacyLedger.in_memory(policy)
    days = [t for t in range(365) if schedule.reports_in(ledger, t)]
    most = schedule.max_reports(365)
    expect(most - 1 <= len(days) <= most, f"reporting days {days}, at most {most}")
    # The schedule is a function of the ledger's secret: the same days again, other days for other devices.
    expect(days == [t for t in range(365) if schedule.reports_in(ledger, t)], "schedule repeats")
    if plan.every > 1:
        others = {tuple(t for t in range(365) if schedule.reports_in(PrivacyLedger.in_memory(policy), t)) for _ in range(20)}
        expect(len(others) > 1, "slots differ between devices")
    # Memoized: one report's ε buys a cell; the same cell again is free, a second cell does not fit.
    a = memo.release(ledger, query, [95_000.0])
    b = memo.release(ledger, query, [95_000.0])
    expect(a.charged and not b.charged and a.report.value == b.report.value, f"{a} {b}")
    expect(a.report.json != b.report.json, "a fresh report id per upload")
    expect(ledger.status().releases == 1, str(ledger.status()))
    assert_raises(BudgetExceeded, "a second cell", lambda: memo.release(ledger, query, [150_000.0]))
    assert_raises(InvalidInput, "NaN income", lambda: memo.release(ledger, query, [math.nan]))
    expect(ledger.status().releases == 1, "refusals charge nothing")
    # daily_report: an upload on a slot day or None, never an exception.
    daily = BudgetPeriod(seconds=86_400, epsilon=plan.epsilon_per_report, delta=0.0)
    ledger2 = PrivacyLedger.in_memory(BudgetPolicy(unit=BudgetUnit.PER_DOLLAR, total_epsilon=3 / 20_000, total_delta=0.0, period=daily))
    sent = daily_report(95_000.0, ledger2, schedule, memo)
    expect(sent is None or '"value"' in sent, str(sent))
    # The instantaneous layer: fresh values around one permanent report, one charge.
    layered = MemoizedRelease(GeoMechanism.polyplace(1e-4).with_unit(BudgetUnit.PER_DOLLAR), 5_000.0, 1.0)
    expect(layered.instantaneous_epsilon() == 1.0 and layered.width() == 5_000.0, "layer on")
    ledger3 = PrivacyLedger.in_memory(BudgetPolicy(unit=BudgetUnit.PER_DOLLAR, total_epsilon=1e-4, total_delta=0.0))
    values = {layered.release(ledger3, query, [95_000.0]).report.value for _ in range(5)}
    expect(len(values) > 1 and ledger3.status().releases == 1, f"{values}")
    assert_raises(InvalidParameter, "width 0", lambda: MemoizedRelease(GeoMechanism.polyplace(1e-4), 0.0, None))
    assert_raises(InvalidParameter, "p 0", lambda: ReportSchedule.bernoulli(0.0))
    assert_raises(InvalidParameter, "no devices", lambda: plan_schedule(0, 365, 1.0, 0.25, 9.0))


finish("python")
