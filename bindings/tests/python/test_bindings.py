"""Python test of the geopriv bindings.

The uniffi-generated module ``geopriv_ffi`` loads ``libgeopriv_ffi.so`` from
its own directory through ctypes; bindings/scripts/test-python.sh copies both
next to each other and runs this file with plain ``python3`` (no pytest). It
prints one line per failure and closes with ``python: N passed, M failed``;
the exit code is non-zero when anything failed.

The checks mirror bindings/tests/kotlin/Main.kt.
"""

import math
import os
import re
import sys
import threading
import time
import traceback

from geopriv_ffi import (
    GeoprivError,
    GeoQuery,
    Growth,
    QueryFamily,
    library_version,
)

PASSED = 0
FAILED = 0
TIMING = os.environ.get("GEOPRIV_TIMING") is not None

NON_FINITE = [math.nan, math.inf, -math.inf]
BAD_POSITIVE = NON_FINITE + [0.0, -1.0, -0.0, -5e-324]


def test(name):
    """Decorator: run the function now and count it."""

    def run(body):
        global PASSED, FAILED
        t0 = time.perf_counter()
        try:
            body()
            PASSED += 1
        except Exception:  # noqa: BLE001 - a test harness reports everything
            FAILED += 1
            print(f"FAIL {name}: {traceback.format_exc(limit=3).strip()}")
        if TIMING:
            print(f"  {1000 * (time.perf_counter() - t0):.0f} ms  {name}")
        return body

    return run


def expect(condition, message):
    if not condition:
        raise AssertionError(message)


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
    expect("SoftThreshold" in str(q), f"str {q}")
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


@test("kde: wired (numbers are checked in Rust)")
def _():
    q = GeoQuery.kde([0.0, 0.0], 1.0)
    expect(q.family() == QueryFamily.KDE, f"family {q.family()}")
    expect(q.dimension() == 2, f"dimension {q.dimension()}")
    v = q.value([0.5, -0.5])
    expect(math.isfinite(v) and 0.0 <= v <= 1.0, f"value {v}")
    s = q.smooth_sensitivity([0.5, -0.5], Growth.EXPONENTIAL(1.0))
    expect(math.isfinite(s) and s >= 0.0, f"S* {s}")
    expect(math.isfinite(q.pointwise_lipschitz([3.0, 4.0])), "L")
    expect(GeoQuery.kde([1.0, 2.0, 3.0], 0.5).dimension() == 3, "3-D")


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


# ---- TODO when the core lands (see bindings/README.md, "Roadmap") ----
# mechanisms: Mechanism.cauchy/student_t/polyplace/laplace refuse NaN, ±inf,
#   negative or zero epsilon (InvalidParameter), delta outside (0, 1);
#   privatize(query, x) returns a Report whose value is finite.
# reports: Report.to_json()/to_bytes() round-trip through from_json/
#   from_bytes; from_json("") / from_json("{") / from_bytes(b"") /
#   truncated bytes / a wrong version raise InvalidReport.
# budget: PrivacyBudget(total epsilon, delta) spends, refuses the release that
#   would exceed it with BudgetExceeded, shared across threads.
# aggregate: Aggregator.add/merge/estimate gives the mean, standard error and
#   CI of known reports; merge of split halves equals the whole; adding a
#   malformed report raises InvalidReport and leaves it intact.
# geo: kde/two_way from lat/lon with a projection; lat outside [-90, 90] or
#   NaN raises InvalidInput.

print(f"python: {PASSED} passed, {FAILED} failed")
sys.exit(1 if FAILED else 0)
