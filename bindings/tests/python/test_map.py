"""Python test of the map API of the bindings (issue 11 item 5): the device
releases its location for a whole map at a per-device ε, metered by its
ledger; the server (``MapServer``) turns reports into a map with per-cell
standard errors, exactly mergeable across shards, equal bit for bit to
``geopriv map aggregate`` on the same reports.

Run by bindings/scripts/test-python.sh (``GEOPRIV_CLI``: the ``geopriv``
binary; without it the CLI comparison is skipped and says so) and by the
wheel test through run_installed.py. Plain ``python3``, no pytest; closes
with ``python-map: N passed, M failed``. ``GEOPRIV_MAP_DEVICES`` changes
the number of simulated devices (default 3000).
"""

import json
import math
import os
import random
import re
import struct
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))  # the shared harness, also under -I
from harness import expect, finish, test  # noqa: E402

from geopriv_ffi import (
    BudgetPolicy,
    MapClipping,
    BudgetUnit,
    GeoprivError,
    MapGrid,
    MapMechanism,
    MapRelease,
    MapServer,
    PrivacyLedger,
    Projection,
    plan_map,
)

DEVICES = int(os.environ.get("GEOPRIV_MAP_DEVICES", "3000"))
CLI = os.environ.get("GEOPRIV_CLI")

# An 11 x 11 map over 10 km, h = one cell diagonal (1414 m), ε h ≈ 2.8.
SIDE, K, EPS = 10_000.0, 11, 2e-3
GRID = MapGrid(x_min=0.0, x_max=SIDE, y_min=0.0, y_max=SIDE, points_x=K, points_y=K, bandwidth=None)
A_PRIORI = MapMechanism.A_PRIORI()




def bits(x):
    return struct.pack("<d", x)


def same_lambda(cli_lambda, kernel_lambda):
    """The picked λ, CLI against binding: an EM pick has no λ, which the
    CLI's JSON writes as null and the binding as NaN."""
    if cli_lambda is None:
        return math.isnan(kernel_lambda)
    return bits(cli_lambda) == bits(kernel_lambda)


def ledger(total=EPS):
    return PrivacyLedger.in_memory(BudgetPolicy(unit=BudgetUnit.PER_METRE(), total_epsilon=total, total_delta=0.0))


def devices(n, seed=11):
    """Two districts and a uniform background, inside the map."""
    rnd = random.Random(seed)
    out = []
    while len(out) < n:
        u = rnd.random()
        if u < 0.45:
            p = (rnd.gauss(3_000, 900), rnd.gauss(6_500, 900))
        elif u < 0.8:
            p = (rnd.gauss(7_000, 1_200), rnd.gauss(3_000, 700))
        else:
            p = (rnd.uniform(0, SIDE), rnd.uniform(0, SIDE))
        if 0 <= p[0] <= SIDE and 0 <= p[1] <= SIDE:
            out.append(p)
    return out


def true_map(points, xs, ys, h):
    """Mean over devices of exp(-|x - t|^2 / (2 h^2)), cell i*len(ys)+k at (xs[i], ys[k])."""
    n = len(points)
    fx = [[math.exp(-0.5 * ((x - t) / h) ** 2) for t in xs] for x, _ in points]
    fy = [[math.exp(-0.5 * ((y - t) / h) ** 2) for t in ys] for _, y in points]
    return [sum(fx[d][i] * fy[d][k] for d in range(n)) / n for i in range(len(xs)) for k in range(len(ys))]


POINTS = devices(DEVICES)
RELEASE = MapRelease(GRID, A_PRIORI, EPS)
# Every device with its own ledger of exactly ε per metre, charged once.
UPLOADS = [RELEASE.release(ledger(), list(p)) for p in POINTS]
LINES = [u.json for u in UPLOADS]
AXIS = [i * SIDE / (K - 1) for i in range(K)]
TRUTH = true_map(POINTS, AXIS, AXIS, math.hypot(SIDE / (K - 1), SIDE / (K - 1)))


@test("device: one release charges the ledger ε once; refusals charge nothing")
def _():
    l = ledger(1.5 * EPS)
    up = RELEASE.release(l, [2_500.0, 4_000.0])
    s = l.status()
    expect(s.releases == 1 and s.spent_epsilon == EPS and up.epsilon == EPS, s)
    expect(up.mechanism == "a-priori" and up.bytes == up.json.encode(), up)
    expect(json.loads(up.json)["epsilon"] == EPS and len(json.loads(up.json)["location"]) == 2, up.json)
    for bad, kind in [
        (lambda: RELEASE.release(l, [2_500.0, 4_000.0]), GeoprivError.BudgetExceeded),
        (lambda: RELEASE.release(l, [-1.0, 5.0]), GeoprivError.InvalidInput),
        (lambda: RELEASE.release(l, [math.nan, 5.0]), GeoprivError.InvalidInput),
        (lambda: RELEASE.release(l, [5.0]), GeoprivError.InvalidInput),
        (lambda: RELEASE.release(
            PrivacyLedger.in_memory(BudgetPolicy(unit=BudgetUnit.PER_DOLLAR(), total_epsilon=1.0, total_delta=0.0)),
            [5.0, 5.0]), GeoprivError.UnitMismatch),
    ]:
        try:
            bad()
            raise AssertionError(f"accepted, expected {kind.__name__}")
        except kind:
            pass
    expect(l.status() == s, (l.status(), s))
    expect(RELEASE.per_device_epsilon() == EPS and "post-processing" in RELEASE.accounting(), RELEASE.accounting())
    # lat/lon entry: the grid in metres of a local projection around Paris.
    paris = Projection.LOCAL_EQUIRECTANGULAR(48.8566, 2.3522)
    local = MapGrid(x_min=-5_000.0, x_max=5_000.0, y_min=-5_000.0, y_max=5_000.0, points_x=K, points_y=K, bandwidth=None)
    l2 = ledger()
    MapRelease(local, A_PRIORI, EPS).release_latlon(l2, 48.8606, 2.3376, paris)
    expect(l2.status().releases == 1, l2.status())
    try:
        MapRelease(local, A_PRIORI, EPS).release_latlon(ledger(), 49.5, 2.3376, paris)  # 70 km north
        raise AssertionError("a location outside the map was released")
    except GeoprivError.InvalidInput:
        pass


@test(f"server: the debiased map of {DEVICES} devices is within its standard errors of the truth")
def _():
    server = MapServer(GRID, A_PRIORI, EPS)
    batch = server.add_all_json(LINES)
    expect(batch.accepted == DEVICES and batch.rejected == 0, batch)
    m = server.estimate(1.0)
    expect(len(m.xs) == K and len(m.ys) == K and len(m.values) == K * K == len(m.standard_errors), m.xs)
    expect(m.xs[1] == 1_000.0 and m.ys[-1] == SIDE and m.n == DEVICES and m.kernel_lambda == 1.0, (m.xs, m.n))
    expect(m.per_device_epsilon == EPS and m.mechanism == "a-priori", m)
    # No discretisation bound is stated any more (NaN; docs/MATH.md §9.3):
    # the rounding's spread is in the standard errors.
    expect(math.isnan(m.discretisation_bound), m.discretisation_bound)
    z = [abs(v - t) / s for v, t, s in zip(m.values, TRUTH, m.standard_errors)]
    within = sum(1 for x in z if x < 3) / len(z)
    expect(within >= 0.9 and max(z) < 6, f"{within:.2f} of cells within 3 SE, max |z| {max(z):.1f}")
    plain = server.estimate(0.0)
    expect(plain.kernel_lambda == 0.0 and plain.standard_errors != m.standard_errors, "plain map")


@test("server: an EM map (εh 0.3) publishes the λ = 1 map's interval; a kernel map none")
def _():
    eps = 0.3 / math.hypot(SIDE / (K - 1), SIDE / (K - 1))
    release = MapRelease(GRID, A_PRIORI, eps)
    # The releases use the secure generator (no seed here), so the planner
    # picks EM on most draws, not all (λ = 0.8 on one wheel run): draw
    # again, up to 8 times, until it does.
    for _attempt in range(8):
        server = MapServer(GRID, A_PRIORI, eps)
        server.add_all_json([release.release(ledger(eps), list(p)).json for p in POINTS])
        m, k1 = server.estimate(None), server.estimate(1.0)
        if m.planner.startswith("pick a-priori em"):
            break
    expect(math.isnan(m.kernel_lambda) and m.planner.startswith("pick a-priori em"), m.planner)
    # Point map: EM's values; interval: map1 ± 1.96·SE1 (docs/MATH.md §9.7).
    expect([bits(v) for v in m.interval_centres] == [bits(v) for v in k1.values], "centres are not the λ = 1 map")
    expect([bits(v) for v in m.standard_errors] == [bits(v) for v in k1.standard_errors], "SEs are not the λ = 1 map's")
    expect(m.values != k1.values, "EM's values")
    expect(k1.interval_centres is None and server.estimate(0.0).interval_centres is None, "kernel maps state no centres")


@test("server: bad reports are refused one by one with a reason and counted")
def _():
    other_eps = MapRelease(GRID, A_PRIORI, 1e-3).release_unmetered([5.0, 5.0]).json
    other_grid = MapRelease(MapGrid(x_min=0.0, x_max=SIDE, y_min=0.0, y_max=SIDE, points_x=K + 1, points_y=K,
                                    bandwidth=None), A_PRIORI, EPS).release_unmetered([5.0, 5.0]).json
    other_mech = MapRelease(GRID, MapMechanism.SAMPLED(3), EPS).release_unmetered([5.0, 5.0]).json
    nan = LINES[0].replace('"location":[', '"location":[1e999,')
    bad = ["garbage", "", other_eps, other_grid, other_mech, nan, re.sub(r'"report_id":"[0-9a-f]{32}"', '"report_id":"' + "ab" * 16 + '"', LINES[0]).replace("location", "values"),
           "x" * 10_000_000]
    server = MapServer(GRID, A_PRIORI, EPS)
    batch = server.add_all_json(LINES[:50] + bad)
    codes = [r.code for r in batch.rejections]
    expect(batch.accepted == 50 and batch.rejected == len(bad), batch.rejected)
    expect(codes == ["malformed", "empty", "other-epsilon", "other-map", "other-mechanism", "malformed",
                     "invalid-report", "too-large"], codes)
    expect([r.index for r in batch.rejections] == list(range(50, 50 + len(bad))), batch.rejections)
    expect(all(r.reason.endswith(f"[{r.code}]") for r in batch.rejections), batch.rejections)
    try:
        server.add_bytes(b"\xff\xfe")
        raise AssertionError("non-UTF-8 bytes accepted")
    except GeoprivError.InvalidReport as e:
        expect(str(e).endswith("[malformed]"), str(e))
    server.add_bytes(UPLOADS[60].bytes)
    st = server.status()
    expect(st.accepted == 51 and st.rejected == len(bad) + 1 and st.rejections["malformed"] == 3, st)
    # Absurd grids are refused before anything is allocated.
    for px, py in [(200_000, 200_000), (1, 5), (513, 512)]:
        try:
            MapServer(MapGrid(x_min=0.0, x_max=1.0, y_min=0.0, y_max=1.0, points_x=px, points_y=py, bandwidth=None),
                      A_PRIORI, EPS)
            raise AssertionError(f"{px} x {py} accepted")
        except GeoprivError.InvalidParameter:
            pass


@test("server: shards merged through JSON equal one server, bit for bit")
def _():
    one = MapServer(GRID, A_PRIORI, EPS)
    one.add_all_json(LINES + ["{}"])
    shards = [MapServer(GRID, A_PRIORI, EPS) for _ in range(4)]
    rnd = random.Random(3)
    for line in LINES:
        shards[rnd.randrange(4)].add_json(line)
    shards[0].add_all_json(["{}"])
    states = [s.to_json() for s in shards]
    reducer = MapServer.from_json(states[3])
    for s in reversed(states[:3]):
        reducer.merge(MapServer.from_json(s))
    expect(reducer.to_json() == one.to_json(), "states differ")
    a, b = reducer.estimate(1.0), one.estimate(1.0)
    expect([bits(v) for v in a.values] == [bits(v) for v in b.values], "values differ")
    expect([bits(v) for v in a.standard_errors] == [bits(v) for v in b.standard_errors], "standard errors differ")
    for bad in ["", "{", '{"format":"x"}', one.to_json().replace(f'"accepted":{DEVICES}', f'"accepted":{DEVICES + 1}')]:
        try:
            MapServer.from_json(bad)
            raise AssertionError(f"state {bad[:40]!r} accepted")
        except GeoprivError.InvalidReport:
            pass
    try:
        reducer.merge(MapServer(GRID, A_PRIORI, 1e-3))
        raise AssertionError("merged a map of another ε")
    except GeoprivError.InvalidParameter:
        pass


@test("server: the map equals `geopriv map aggregate` on the same reports, bit for bit")
def _():
    if not CLI:
        print("  (skipped: GEOPRIV_CLI not set)")
        return
    server = MapServer(GRID, A_PRIORI, EPS)
    lines = LINES + ["{not json"]
    server.add_all_json(lines)
    with tempfile.NamedTemporaryFile("w", suffix=".jsonl", delete=False) as f:
        f.write("\n".join(lines) + "\n")
        path = f.name
    try:
        with open(path) as stdin:
            p = subprocess.run([CLI, "map", "aggregate", "--bbox", "0", repr(SIDE), "0", repr(SIDE), "--grid", str(K),
                                "--epsilon", repr(EPS)], stdin=stdin, capture_output=True, text=True, timeout=600)
    finally:
        os.unlink(path)
    expect(p.returncode == 1 and f"line {len(lines)}:" in p.stderr, (p.returncode, p.stderr))
    cli = json.loads(p.stdout)
    m = server.estimate(None)  # λ from the planner, as the CLI without --lambda
    expect(cli["n"] == m.n == DEVICES and same_lambda(cli["lambda"], m.kernel_lambda),
           (cli["n"], cli["lambda"], m.kernel_lambda))
    expect([bits(v) for v in cli["values"]] == [bits(v) for v in m.values], "values differ from the CLI")
    expect([bits(v) for v in cli["standard_errors"]] == [bits(v) for v in m.standard_errors],
           "standard errors differ from the CLI")
    expect(cli["per_device_epsilon"] == m.per_device_epsilon and cli["accounting"] == m.accounting, cli)
    # The intervals' centres (EM: the λ = 1 map's values; absent for a kernel map).
    expect((cli.get("interval_centres") is None) == (m.interval_centres is None), "interval centres")
    if m.interval_centres is not None:
        expect([bits(v) for v in cli["interval_centres"]] == [bits(v) for v in m.interval_centres],
               "interval centres differ from the CLI")
    expect(m.planner is not None and m.planner in p.stderr, (m.planner, p.stderr))
    # The planner's pick is no worse than plain noise a priori here.
    ase = lambda values: sum((v - t) ** 2 for v, t in zip(values, TRUTH)) / len(TRUTH)  # noqa: E731
    expect(m.planner.startswith("pick a-priori") and ase(m.values) <= 1.5 * ase(server.estimate(0.0).values),
           m.planner)


@test("planner: a pick and its reason in one line; other mechanisms round-trip")
def _():
    p = plan_map(GRID, EPS, 100_000)
    expect(p.pick.mechanism == A_PRIORI and p.line.startswith("pick a-priori") and p.predictions[0] == p.pick, p.line)
    expect(any(q.mechanism == MapMechanism.VECTOR_LAPLACE() for q in p.predictions), p.predictions)
    expect(p.pick.kernel_lambda == 1.0 and "(no reports" in p.line, p.line)
    # Sorted by the key each carries (without reports: the ASE; attack13 O2).
    expect(all(q.order_key == q.ase for q in p.predictions), p.predictions)
    keys = [q.order_key for q in p.predictions]
    expect(keys == sorted(keys), keys)
    # (vector Laplace works alike; its certified L1 takes seconds in a debug build)
    for mech in [MapMechanism.COMPOSITION(), MapMechanism.SAMPLED(5)]:
        rel, srv = MapRelease(GRID, mech, EPS), MapServer(GRID, mech, EPS)
        for x, y in POINTS[:200]:
            srv.add_bytes(rel.release(ledger(), [x, y]).bytes)
        back = MapServer.from_json(srv.to_json())
        m = back.estimate(None)
        expect(m.n == 200 and len(m.values) == K * K and back.to_json() == srv.to_json(), m.n)
    try:
        MapServer(GRID, A_PRIORI, EPS).estimate(None)
        raise AssertionError("an empty map was estimated")
    except GeoprivError.InvalidInput:
        pass


@test("server clipping: as `geopriv map aggregate` (same map, same stated bound); forged states refused")
def _():
    mech = MapMechanism.COMPOSITION()
    rel = MapRelease(GRID, mech, EPS)
    honest = [rel.release_unmetered([x, y]).json for x, y in POINTS[:150]]
    forged = json.loads(honest[0])
    forged["values"] = [1e300] * len(forged["values"])  # issue 19 item 10: one report moved every cell
    # Not a replay of honest[0]: `geopriv map aggregate` counts a report_id
    # once (attack6 O2), and the comparison below is about clipping.
    forged.pop("report_id", None)
    lines = honest + [json.dumps(forged)]
    clipped, raw = MapServer(GRID, mech, EPS), MapServer.with_clipping(GRID, mech, EPS, 1024, MapClipping.OFF())
    expect(clipped.add_all_json(lines).accepted == raw.add_all_json(lines).accepted == len(lines), "accepted")
    m, r = clipped.estimate(None), raw.estimate(None)
    c = m.clip
    expect(r.clip is None and c is not None and c.clipped >= len(forged["values"]), (r.clip, c))
    expect(max(r.values) > 1e290 and max(abs(v) for v in m.values) <= c.upper, max(m.values))
    expect(c.influence_bound == c.max_width / m.n and c.lower < 0 < 1 < c.upper, c)
    # Noise a priori has nothing to clip: no clip stated.
    expect(MapServer(GRID, A_PRIORI, EPS).to_json() == MapServer.with_clipping(
        GRID, A_PRIORI, EPS, 1024, MapClipping.OFF()).to_json(), "a priori")
    # A fixed z; out of range refused.
    z3 = MapServer.with_clipping(GRID, mech, EPS, 1024, MapClipping.Z(3.0))
    z3.add_all_json(lines)
    expect(z3.estimate(None).clip.z == 3.0, z3.estimate(None).clip)
    for z in [-1.0, float("nan"), 2e6]:
        try:
            MapServer.with_clipping(GRID, mech, EPS, 1024, MapClipping.Z(z))
            raise AssertionError(f"z = {z} accepted")
        except GeoprivError.InvalidParameter:
            pass
    # Shards: states carry the clipped count and merge exactly.
    a, b = MapServer(GRID, mech, EPS), MapServer(GRID, mech, EPS)
    a.add_all_json(lines[:70])
    b.add_all_json(lines[70:])
    reducer = MapServer.from_json(a.to_json())
    reducer.merge(MapServer.from_json(b.to_json()))
    expect(reducer.to_json() == clipped.to_json(), "sharded clipped state differs")
    # A forged state (a cell sum beyond n values inside B) is refused.
    unclipped_state = json.loads(raw.to_json())
    unclipped_state["params"]["clip_z"] = json.loads(a.to_json())["params"]["clip_z"]
    unclipped_state["clipped"] = 0
    try:
        MapServer.from_json(json.dumps(unclipped_state))
        raise AssertionError("a state beyond the clipping bounds was restored")
    except GeoprivError.InvalidReport as e:
        expect("clipping bounds" in str(e), str(e))
    if CLI:
        with tempfile.NamedTemporaryFile("w", suffix=".jsonl", delete=False) as f:
            f.write("\n".join(lines) + "\n")
            path = f.name
        try:
            with open(path) as stdin:
                p = subprocess.run([CLI, "map", "aggregate", "--bbox", "0", repr(SIDE), "0", repr(SIDE), "--grid",
                                    str(K), "--epsilon", repr(EPS), "--mechanism", "composition"],
                                   stdin=stdin, capture_output=True, text=True, timeout=600)
        finally:
            os.unlink(path)
        expect(p.returncode == 0, p.stderr)
        cli = json.loads(p.stdout)
        expect([bits(v) for v in cli["values"]] == [bits(v) for v in m.values], "clipped values differ from the CLI")
        expect([bits(v) for v in cli["standard_errors"]] == [bits(v) for v in m.standard_errors], "SEs differ")
        for k in ["z", "sigma_max", "lower", "upper", "bias_bound", "max_width", "influence_bound", "clipped"]:
            expect(cli["clip"][k] == getattr(c, k), (k, cli["clip"][k], getattr(c, k)))
    else:
        print("  (CLI comparison skipped: GEOPRIV_CLI not set)")


finish("python-map")
