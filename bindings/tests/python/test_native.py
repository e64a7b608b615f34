"""The Python layer of the ``geopriv`` package (python-package/geopriv/
__init__.py, issue 23): enums as members, ``GeoprivError.code``, arrays
(numpy, pandas, Polars) and privacy stated as a radius. Needs numpy
(pandas and Polars tests run when installed). Run by
bindings/scripts/test-python.sh against the package built from the
checkout and by test-wheel.sh against the installed wheel. CI asserts a
structural 5 µs per element (one FFI call per column, not one per element);
``GEOPRIV_ASSERT_SPEED=1`` adds issue 23 item 2's 1 µs, for a run of the
release library on an idle machine (no timed tests in CI). Closes with
``python-native: N passed, M failed``."""

import os
import pickle
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))  # the shared harness, also under -I
from harness import expect, finish, test  # noqa: E402

import numpy as np

import geopriv
from geopriv import (
    BudgetPolicy,
    BudgetUnit,
    CentralNoiseKind,
    GeoMechanism,
    GeoprivError,
    GeoQuery,
    MapMechanism,
    PrivacyLedger,
    Projection,
    ReleaseArray,
    ReportPolicy,
    ReportServer,
    ServerConfig,
)

try:
    import pandas as pd
except ImportError:  # optional
    pd = None
try:
    import polars as pl
except ImportError:  # optional
    pl = None


def raises(kind, f):
    try:
        f()
    except kind as e:
        return e
    raise AssertionError(f"expected {kind.__name__}")


@test("every data-less enum variant is a member; the call form returns the same member")
def _():
    members = {
        BudgetUnit: ["PER_METRE", "PER_DOLLAR", "LOCAL_DP"],
        MapMechanism: ["A_PRIORI", "VECTOR_LAPLACE", "COMPOSITION"],
        Projection: ["WEB_MERCATOR"],
        CentralNoiseKind: ["POLY_PLACE", "STUDENT_T", "CAUCHY"],
    }
    for enum, names in members.items():
        for name in names:
            m = getattr(enum, name)
            expect(isinstance(m, enum), (enum, name, type(m)))
            expect(m() is m and m == m and hash(m) == hash(getattr(enum, name)), name)
            expect(repr(m) == str(m) == f"{enum.__name__}.{name}", repr(m))
            expect(getattr(m, f"is_{name.lower()}")() and getattr(m, f"is_{name}")(), name)
            expect(pickle.loads(pickle.dumps(m)) is m, name)
        a, b = getattr(enum, names[0]), getattr(enum, names[1] if len(names) > 1 else names[0])
        expect((a == b) == (names[0] == (names[1] if len(names) > 1 else names[0])), (a, b))
    # Variants with data stay calls; flat enums were members already.
    expect(BudgetUnit.CUSTOM("per-km").name == "per-km", "custom")
    expect(Projection.LOCAL_EQUIRECTANGULAR(48.8, 2.3).is_local_equirectangular(), "local")
    expect(MapMechanism.SAMPLED(4).k == 4, "sampled")
    expect(not BudgetUnit.PER_METRE.is_per_dollar() and BudgetUnit.PER_METRE != BudgetUnit.CUSTOM("x"), "ne")


@test("values read back from Rust are the members themselves")
def _():
    ledger = PrivacyLedger.in_memory(BudgetPolicy(unit=BudgetUnit.PER_DOLLAR, total_epsilon=1.0, total_delta=0.0))
    expect(ledger.status().unit is BudgetUnit.PER_DOLLAR, ledger.status().unit)
    m = GeoMechanism.polyplace(0.1).with_unit(BudgetUnit.PER_METRE)
    expect(m.unit() is BudgetUnit.PER_METRE, m.unit())
    expect({BudgetUnit.PER_METRE: 1}[m.unit()] == 1, "hashable")


@test("every GeoprivError kind carries its code; InvalidReport the rejection code")
def _():
    cases = [
        (GeoprivError.InvalidParameter, "invalid-parameter", lambda: GeoMechanism.polyplace(-1.0)),
        (GeoprivError.InvalidInput, "invalid-input", lambda: GeoQuery.threshold(0.0, 1.0).value([float("nan")])),
        (GeoprivError.InvalidReport, "malformed", lambda: ReportPolicy(1.0, 0.0).accept_json("{not json")),
        (GeoprivError.InvalidReport, "empty", lambda: ReportPolicy(1.0, 0.0).accept_json("")),
        (GeoprivError.UnitMismatch, "unit-mismatch", lambda: GeoMechanism.local_dp(1.0).privatize(
            PrivacyLedger.in_memory(BudgetPolicy(unit=BudgetUnit.PER_METRE, total_epsilon=1.0, total_delta=0.0)),
            GeoQuery.threshold(0.0, 1.0), [0.0])),
        (GeoprivError.LedgerRefused, "ledger-refused", lambda: PrivacyLedger.restore(
            "{", BudgetPolicy(unit=BudgetUnit.PER_METRE, total_epsilon=1.0, total_delta=0.0))),
        (GeoprivError.LedgerIo, "ledger-io", lambda: PrivacyLedger.open(
            "/nonexistent/geopriv/ledger", BudgetPolicy(unit=BudgetUnit.PER_METRE, total_epsilon=1.0, total_delta=0.0))),
    ]
    for kind, code, f in cases:
        e = raises(kind, f)
        expect(e.code == code, (kind.__name__, e.code, str(e)))
        expect(isinstance(e, GeoprivError), kind)
    expect(set(geopriv.ERROR_CODES) == {
        "InvalidParameter", "InvalidInput", "BudgetExceeded", "UnitMismatch", "LedgerRefused",
        "LedgerIo", "InvalidReport", "Internal"}, geopriv.ERROR_CODES)


@test("an array privatize equals the releases one by one (1-D values and (n, 2) points)")
def _():
    q1 = GeoQuery.threshold(100.0, 10.0)
    m = GeoMechanism.cauchy(0.05)
    xs = np.linspace(80.0, 120.0, 41)
    arr = m.seeded(5).privatize_unmetered(q1, xs)
    one = m.seeded(5)
    singles = [one.privatize_unmetered(q1, [float(x)]).value for x in xs]
    expect(isinstance(arr, ReleaseArray) and len(arr) == 41, arr)
    expect(arr.values.dtype == np.float64 and list(arr.values) == singles, "values")
    q2 = GeoQuery.kde([0.0, 0.0], 100.0)
    pts = np.column_stack([np.linspace(-50, 50, 9), np.zeros(9)])
    arr2 = m.seeded(6).privatize_unmetered(q2, pts)
    one = m.seeded(6)
    expect(list(arr2.values) == [one.privatize_unmetered(q2, list(p)).value for p in pts], "2-D")
    # Lists still mean one point; bad shapes are refused before anything runs.
    expect(m.privatize_unmetered(q2, [1.0, 2.0]).query_id == q2.query_id(), "list")
    raises(ValueError, lambda: m.privatize_unmetered(q2, np.zeros(4)))
    raises(ValueError, lambda: m.privatize_unmetered(q1, np.zeros((3, 2))))
    e = raises(GeoprivError.InvalidInput, lambda: m.privatize_unmetered(q1, np.array([1.0, np.nan])))
    expect("point 2" in str(e), str(e))
    expect(len(m.privatize_unmetered(q1, np.zeros(0))) == 0, "empty")


@test("a device's array is charged once per release, all or nothing")
def _():
    ledger = PrivacyLedger.in_memory(BudgetPolicy(unit=BudgetUnit.PER_METRE, total_epsilon=0.35, total_delta=0.0))
    m = GeoMechanism.polyplace(0.1).with_unit(BudgetUnit.PER_METRE)
    q = GeoQuery.threshold(0.0, 1.0)
    expect(len(m.privatize(ledger, q, np.array([0.1, 0.2, 0.3]))) == 3, "three")
    expect(ledger.status().releases == 3, ledger.status())
    e = raises(GeoprivError.BudgetExceeded, lambda: m.privatize(ledger, q, np.array([0.1, 0.2])))
    expect(e.code == "budget-exceeded" and ledger.status().releases == 3, ledger.status())


def json_column(n, seed=3):
    m = GeoMechanism.laplace(0.05, 1e-6).seeded(seed)
    arr = m.privatize_unmetered(GeoQuery.threshold(100.0, 10.0), np.linspace(50, 150, n))
    return arr, arr.to_json_lines().splitlines()


def server():
    return ReportServer(ReportPolicy(1.0, 1e-4).accept_seeded(), ServerConfig())


def server_state(lines):
    s = server()
    s.add_json_batch(lines)
    return s.to_json()


@test("add_reports: a release array, lists, numpy, pandas and Polars columns give add_json_batch's state")
def _():
    arr, lines = json_column(200)
    reference = server()
    ref = reference.add_json_batch(lines + [None, "{bad", ""])
    by_array = server()
    expect(by_array.add_reports(arr).accepted == 200, "array")
    expect(by_array.to_json() == server_state(lines), "array state")
    columns = [lines + [None, "{bad", ""], np.array(lines + [None, "{bad", ""], dtype=object)]
    if pd is not None:
        columns.append(pd.Series(lines + [None, "{bad", ""]))
    if pl is not None:
        columns.append(pl.Series(lines + [None, "{bad", ""]))
    for col in columns:
        s = server()
        r = s.add_reports(col)
        expect(r == ref, (type(col), r, ref))
        expect(s.to_json() == reference.to_json(), type(col))
    # Binary reports: bytes columns.
    m = GeoMechanism.laplace(0.05, 1e-6).seeded(4)
    blobs = [m.privatize_unmetered(GeoQuery.threshold(100.0, 10.0), [float(x)]).bytes for x in range(90, 110)]
    a, b = server(), server()
    ra = a.add_reports(blobs + [None, b"\x00\x01"])
    rb = b.add_bytes_batch(blobs + [None, b"\x00\x01"])
    expect(ra == rb and a.to_json() == b.to_json(), (ra, rb))
    if pd is not None:
        nan = server().add_reports(pd.Series([lines[0], float("nan")]))
        expect(nan.accepted == 1 and nan.rejected_by_code == {"empty": 1}, nan)
    # attack12: an int in a bytes column was bytes(n), n zero bytes (10**9:
    # a gigabyte allocated, then copied across the FFI); now a TypeError
    # before anything is allocated or ingested.
    for bad in (10**9, True, [1, 2], 3.5, "text"):
        s = server()
        try:
            s.add_reports(blobs[:2] + [bad])
            expect(False, f"a binary column with a {type(bad).__name__} was ingested")
        except TypeError as e:
            expect("binary reports" in str(e), str(e))
        expect(s.to_json() == server().to_json(), f"{type(bad).__name__}: ingested before the refusal")


@test("privacy stated as a radius: ε = level / radius, both forms described")
def _():
    m = GeoMechanism.polyplace_within(radius=500.0, level=1.0)
    expect(m.epsilon() == 2e-3, m.epsilon())
    r = geopriv.privacy_radius(radius=500.0, level=1.0)
    expect(r.epsilon == 2e-3 and abs(r.odds_ratio - 2.718281828459045) < 1e-12, r)
    expect(r.description == "ε = 0.002 per unit, i.e. level 1 within 500", r.description)
    expect(m.within(250.0).level == 0.5, m.within(250.0))
    expect(geopriv.privacy_radius_of(epsilon=1e-3, radius=1000.0).level == 1.0, "of")
    raises(GeoprivError.InvalidParameter, lambda: GeoMechanism.polyplace_within(0.0, 1.0))
    raises(GeoprivError.InvalidParameter, lambda: geopriv.privacy_radius(500.0, float("nan")))


@test("project_array equals project, one bad location refuses the array")
def _():
    city = Projection.LOCAL_EQUIRECTANGULAR(48.85, 2.35)
    ll = np.array([[48.86, 2.34], [48.85, 2.35], [48.80, 2.40]])
    xy = geopriv.project_array(ll, city)
    expect(xy.shape == (3, 2), xy.shape)
    expect(all(list(xy[i]) == geopriv.project(*ll[i], city) for i in range(3)), xy)
    raises(GeoprivError.InvalidInput, lambda: geopriv.project_array(np.array([[95.0, 0.0]]), city))


@test("arrays and JSON columns are lowered in one FFI call, not element by element (at most 5 µs of CPU per element; 1 µs with GEOPRIV_ASSERT_SPEED=1 on an idle machine)")
def _():
    n = 200_000
    q = GeoQuery.threshold(100_000.0, 20_000.0)
    m = GeoMechanism.polyplace(2e-4).seeded(1)
    xs = np.random.default_rng(2).lognormal(11.2, 0.5, n)
    t = time.process_time()
    arr = m.privatize_unmetered(q, xs)
    privatize = (time.process_time() - t) / n
    s = server()
    t = time.process_time()
    s.add_reports(arr)
    ingest_array = (time.process_time() - t) / n
    lines = arr.to_json_lines().splitlines()
    columns = {"JSON list": lines}
    if pd is not None:
        columns["pandas"] = pd.Series(lines)
    if pl is not None:
        columns["Polars"] = pl.Series(lines)
    json_costs = {}
    for name, column in columns.items():
        t = time.process_time()
        r = server().add_reports(column)
        json_costs[name] = (time.process_time() - t) / n
        expect(r.accepted == n, (name, r))
    print(f"  per element (CPU): privatize {privatize * 1e6:.2f} µs, add_reports(ReleaseArray) "
          f"{ingest_array * 1e6:.2f} µs, add_reports(JSON column): "
          + ", ".join(f"{k} {v * 1e6:.2f} µs" for k, v in json_costs.items()))
    # Always (CI included): a structural bound, 5 µs per element. A column
    # lowered element by element in Python costs about 11 µs a row
    # (BENCHMARKS.md, "Arrays through the bindings"), so this catches that
    # regression without timing the machine: this shared VM's speed varies
    # up to 2x between hours (privatize measured 0.18 and 0.37 µs on the
    # same wheel), and a 1 µs bound failed a cold CI run at 1.05 µs.
    expect(max(privatize, ingest_array) <= 5e-6, (privatize, ingest_array))
    expect(max(json_costs.values()) <= 5e-6, json_costs)
    if os.environ.get("GEOPRIV_ASSERT_SPEED"):
        # Issue 23's figure, for a run on an idle machine (not in CI: no
        # timed tests there). CPU time of this process; a JSON column
        # crosses the FFI as one string and is decoded reusing the header
        # parse. The measurement of record is criterion,
        # bindings/benches/arrays.rs.
        expect(max(privatize, ingest_array) <= 1e-6, (privatize, ingest_array))
        expect(max(json_costs.values()) <= 1e-6, json_costs)


finish("python-native")
