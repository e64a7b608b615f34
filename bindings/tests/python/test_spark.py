"""Spark test of ``geopriv.spark`` against ``geopriv aggregate``.

Run by bindings/scripts/test-spark.sh in a virtual environment holding
pyspark and the built wheel (nothing from the source tree). Environment:

* ``GEOPRIV_CLI``: the release ``geopriv`` binary (the reference);
* ``GEOPRIV_SPARK_REPORTS``: how many reports the big runs use (10^6);
* ``GEOPRIV_SPARK_WORK``: a scratch directory.

Checks: JSON and binary reports; bad rows rejected with their reason and
counted, the job never failing; estimates bit-for-bit those of the CLI
with its default flags (clipping on) and, with ``clip=False``, those of
``--no-clip``, under 1, 3, 8 and randomly shuffled partitions; a forged
report moving the clipped mean by at most B/n; maps equal to a
``GridAggregator`` (clipped or not); the full 10^6 reports in local mode (throughput
printed) and on a standalone cluster on 127.0.0.1 (a master and two
workers started and stopped here), where an application whose executors
run a Python without geopriv is refused with the fix (issue 23 item 4).
Closes with ``spark: N passed, M failed``.
"""

import json
import os
import random
import socket
import struct
import subprocess
import sys
import time
import urllib.request

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))  # the shared harness, also under -I
from harness import configure, expect, finish, test  # noqa: E402

import geopriv
from geopriv.spark import aggregate, aggregate_device_map, aggregate_map

configure(progress=True, traceback_limit=4)

CLI = os.environ["GEOPRIV_CLI"]
N = int(os.environ.get("GEOPRIV_SPARK_REPORTS", "1000000"))
WORK = os.environ["GEOPRIV_SPARK_WORK"]
# The reference is `geopriv aggregate` with its default flags (clipping
# on) and, for `clip=False`, with `--no-clip`; the big set is seeded
# (reproducible), so both accept seeded reports (tests only).
POLICY = ["--max-epsilon", "0.001", "--max-delta", "1e-6", "--accept-seeded"]
NO_CLIP = POLICY + ["--no-clip"]
LIMITS = dict(max_epsilon=0.001, max_delta=1e-6, accept_seeded=True)





def bits(x):
    return None if x is None else struct.pack("<d", x).hex()


# ---------------------------------------------------------------- reports
# Four query families, each with its own mechanism, released by the CLI
# (`--unmetered`: simulated devices; seeded, so the run is reproducible,
# except the small set, made with secure noise so that the README quick
# start runs with the default policy), and a few bad records at random
# places (so they land in different partitions). The blank line is
# skipped (not rejected) by the CLI and by Spark alike.
FAMILIES = [
    (["threshold", "--threshold", "100000", "--width", "20000"], ["--mechanism", "polyplace", "--epsilon", "0.0005"],
     lambda r: f"{r.gauss(80_000, 30_000)}"),
    (["interval", "--lower", "40000", "--upper", "90000", "--width", "10000"],
     ["--mechanism", "student-t", "--epsilon", "0.001"], lambda r: f"{r.gauss(60_000, 25_000)}"),
    (["two-way", "--threshold", "60000,20000", "--width", "15000"], ["--mechanism", "cauchy", "--epsilon", "0.001"],
     lambda r: f"{r.gauss(60_000, 20_000)},{r.gauss(20_000, 8_000)}"),
    (["kde", "--center", "1200,-300", "--bandwidth", "150"],
     ["--mechanism", "laplace", "--epsilon", "0.001", "--delta", "1e-7"],
     lambda r: f"{r.gauss(1_000, 300)},{r.gauss(-200, 300)}"),
]
BAD = [
    ("", None),
    ("{not json", "malformed"),
    ('{"version":1,"query":', None),
    ('{"version":99,"query":{"threshold":{"threshold":1.0,"width":1.0}},"mechanism":"polyplace","epsilon":0.001,'
     '"delta":0.0,"value":0.5}', None),
    ("\x00\x01 garbage", None),
]


def privatize(query, mechanism, points, seed):
    seeding = [] if seed is None else ["--seed", str(seed)]
    out = subprocess.run(
        [CLI, "privatize", *query, *mechanism, "--unmetered", *seeding],
        input="\n".join(points) + "\n", capture_output=True, text=True, check=True,
    )
    return out.stdout.splitlines()


def make_reports(n, seed, seeded=True):
    """n valid reports of the four families plus the bad records; returns
    the lines and the number of bad ones (the blank line, skipped, aside)."""
    rnd = random.Random(seed)
    lines = []
    per = n // len(FAMILIES)
    for k, (query, mechanism, draw) in enumerate(FAMILIES):
        count = per if k < len(FAMILIES) - 1 else n - per * (len(FAMILIES) - 1)
        lines += privatize(query, mechanism, [draw(rnd) for _ in range(count)], seed + k if seeded else None)
    # An honest-looking report over the server's ε limit.
    # Its own seed: a seeded run's report ids follow its seed, and `geopriv aggregate` counts an id once.
    greedy = privatize(FAMILIES[0][0], ["--mechanism", "polyplace", "--epsilon", "0.01"], ["1"],
                       seed + len(FAMILIES) if seeded else None)
    bad = [b for b, _ in BAD] + greedy
    rnd.shuffle(lines)
    for b in bad:
        lines.insert(rnd.randrange(len(lines) + 1), b)
    return lines, len([b for b in bad if b.strip()])


def write(name, lines):
    path = os.path.join(WORK, name)
    with open(path, "w") as f:
        f.write("\n".join(lines) + "\n")
    return path


def group(e):
    """The CLI's group key of an estimate line: (query, mechanism, ε, δ)."""
    return (e["query"], e["mechanism"], bits(e["epsilon"]), bits(e["delta"]))


def cli_aggregate(path, policy=POLICY):
    """The CLI's estimates ({group: line}) and its rejection reasons (one per
    bad line, "reason [code]" as the bindings give them)."""
    with open(path, "rb") as f:
        out = subprocess.run([CLI, "aggregate", "--format", "json", *policy], stdin=f, capture_output=True)
    # Exit status 1: some records were rejected (their reasons on stderr).
    if out.returncode not in (0, 1) or (out.returncode == 1) != (b"\nline " in b"\n" + out.stderr):
        raise RuntimeError(f"geopriv aggregate failed ({out.returncode}): {out.stderr[-2000:]!r}")
    estimates = {group(e): e for e in map(json.loads, out.stdout.decode().splitlines())}
    lines = out.stderr.decode().splitlines()
    reasons = [line.split(": ", 1)[1] for line in lines if line.startswith("line ")]
    expect(any(" records: " in line for line in lines[-3:]), f"the CLI's record counts: {lines[-3:]}")
    STDOUT[path, tuple(policy)] = out.stdout.decode()
    return estimates, reasons


#: The CLI's raw output per (file, flags), to compare `to_json_lines()` byte for byte.
STDOUT = {}


def same_as_cli(result, expected, reasons, what):
    """Every estimate line equals the CLI's, field for field and bit for bit,
    in the CLI's order; the same number of rows is rejected, each shown
    reason being one the CLI gave ("... [malformed]")."""
    got = [group(e.to_dict()) for e in result.estimates]
    expect(got == list(expected), f"{what}: groups {got} != CLI {list(expected)}")
    for e in result.estimates:
        g, c = e.to_dict(), expected[group(e.to_dict())]
        expect(sorted(g) == sorted(c), f"{what}: fields {sorted(g)} != CLI {sorted(c)}")
        for field, x in c.items():
            same = (bits(g[field]) == bits(x) if isinstance(x, float)
                    else all(bits(g[field][k]) == bits(v) if isinstance(v, float) else g[field][k] == v
                             for k, v in x.items()) and sorted(g[field]) == sorted(x) if isinstance(x, dict)
                    else [bits(v) for v in g[field]] == [bits(v) for v in x] if isinstance(x, list) else g[field] == x)
            expect(same, f"{what} {e.query}: {field} {g[field]!r} != CLI {x!r}")
    expect(result.rejected == len(reasons) == sum(result.rejections.values()),
           f"{what}: {result.rejections} against the CLI's {reasons}")
    for x in result.examples:
        expect(x.reason.endswith(f" [{x.code}]") and x.reason in reasons, f"{what}: {x} not in {reasons}")
    expect(len(result.examples) >= min(len(reasons), 5), f"{what}: examples {result.examples}")


# ---------------------------------------------------------------- Spark

def spark_estimates(spark, path):
    """Estimates per query id from a folder (or file) of uploaded JSON lines."""
    result = aggregate(spark.read.option("lineSep", "\n").text(path), max_epsilon=1e-3, max_delta=1e-6)
    for e in result.estimates:  # one per (query, mechanism, ε, δ), as `geopriv aggregate` prints them
        print(e.query, e.n, e.mean, e.standard_error, e.ci95, e.clip["bounds"], e.clip["bias_bound"])
    print("rejected:", result.rejections)  # by code, e.g. {"malformed": 1, "truncated": 1}
    return result


def session(master, **conf):
    from pyspark.sql import SparkSession

    builder = (
        SparkSession.builder.master(master)
        .appName("geopriv-test")
        .config("spark.driver.host", "127.0.0.1")
        .config("spark.driver.bindAddress", "127.0.0.1")
        .config("spark.ui.enabled", "false")
        .config("spark.pyspark.python", sys.executable)
        .config("spark.pyspark.driver.python", sys.executable)
        .config("spark.driver.memory", "1g")
        .config("spark.python.worker.reuse", "true")
        .config("spark.ui.showConsoleProgress", "false")
    )
    for k, v in conf.items():
        builder = builder.config(k, v)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    return spark


print(f"generating {N} reports with {CLI}", flush=True)
t0 = time.perf_counter()
BIG, BIG_BAD = make_reports(N, 20261122)
BIG_PATH = write("reports.jsonl", BIG)
SMALL, SMALL_BAD = make_reports(20_000, 7, seeded=False)
# A forged report of 1e4 (a threshold is in [0, 1]): accepted, clipped to B.
POISON = json.loads(next(line for line in SMALL if '"polyplace"' in line))
POISON["value"] = 1e4
# A report id of its own: the copied one would be a replay, which `geopriv aggregate` counts once.
POISON["report_id"] = os.urandom(16).hex()
SMALL.insert(len(SMALL) // 2, json.dumps(POISON, separators=(",", ":")))
SMALL_PATH = write("small.jsonl", SMALL)
BIG_CLI, BIG_REASONS = cli_aggregate(BIG_PATH)
SMALL_CLI, SMALL_REASONS = cli_aggregate(SMALL_PATH)
SMALL_RAW, SMALL_RAW_REASONS = cli_aggregate(SMALL_PATH, NO_CLIP)
print(f"  reports and CLI reference in {time.perf_counter() - t0:.0f} s", flush=True)


@test("the CLI reference rejects exactly the bad records")
def _():
    expect(len(BIG_REASONS) == BIG_BAD and len(SMALL_REASONS) == SMALL_BAD, (BIG_REASONS, SMALL_REASONS))
    expect(all(e["clip"]["bias_to_se_bound"] <= 0.1 for e in BIG_CLI.values()), "default clipping numbers")
    expect(all(e.get("clip") is None for e in SMALL_RAW.values()), "--no-clip printed clipping numbers")
    expect(sum(e["n"] for e in BIG_CLI.values()) == N and len(BIG_CLI) == 4, {q: e["n"] for q, e in BIG_CLI.items()})


spark = session("local[2]", **{"spark.sql.shuffle.partitions": "4"})


@test("local mode: equal to the CLI bit for bit under 1, 3, 8 and shuffled partitions; bad rows counted")
def _():
    from pyspark.sql.functions import rand

    df = spark.read.text(SMALL_PATH)
    runs = [df.coalesce(1), df.repartition(3), df.repartition(8), df.repartition(5, rand(seed=3)).repartition(7)]
    states = None
    for k, d in enumerate(runs):
        r = aggregate(d, **LIMITS)
        same_as_cli(r, SMALL_CLI, SMALL_REASONS, f"partitioning {k} ({r.partitions} partitions)")
        expect(r.accepted == 20_001 and r.rejected == SMALL_BAD and r.skipped == 1, (r.accepted, r.rejected, r.skipped))
        expect(states is None or r.state == states, "exact states differ between partitionings")
        states = r.state
        raw = aggregate(d, clip=False, **LIMITS)
        same_as_cli(raw, SMALL_RAW, SMALL_RAW_REASONS, f"--no-clip, partitioning {k}")
        expect(raw.to_json_lines() == STDOUT[SMALL_PATH, tuple(NO_CLIP)], "--no-clip json lines")
    r = aggregate(df, **LIMITS)
    expect(r.to_json_lines() == STDOUT[SMALL_PATH, tuple(POLICY)], "json lines differ from the CLI's output")
    rows = {row["query"]: row for row in r.to_dataframe(spark).collect()}
    expect(all(bits(rows[e.query]["mean"]) == bits(e.mean) and rows[e.query]["n"] == e.n for e in r.estimates), rows)


@test("clipping: the forged report of 1e4 moves the clipped mean by at most B/n; B and the bias bound reported")
def _():
    df = spark.read.text(SMALL_PATH)
    clipped, raw = aggregate(df, **LIMITS), aggregate(df, clip=False, **LIMITS)
    key = next(e for e in clipped.estimates if e.mechanism == "polyplace")
    unclipped = next(e for e in raw.estimates if e.query == key.query and e.mechanism == "polyplace")
    lo, hi = key.clip["bounds"]
    expect(lo < 0 < 1 < hi < 1e4 and key.clip["bias_bound"] > 0 and key.clip["clipped"] >= 1, key.clip)
    expect(key.clip["influence_bound"] == (hi - lo) / key.n, key.clip)
    # Without the forged report, the clipped mean moves by at most B/n.
    honest = [line for line in SMALL if line != json.dumps(POISON, separators=(",", ":"))]
    clean = aggregate(spark.createDataFrame([(x,) for x in honest], "report string"), **LIMITS)
    base = next(e for e in clean.estimates if e.query == key.query and e.mechanism == "polyplace")
    expect(abs(key.mean - base.mean) <= key.clip["influence_bound"], (key.mean, base.mean, key.clip))
    expect(unclipped.mean - base.mean > 10 * key.clip["influence_bound"], (unclipped.mean, base.mean))
    for bad in ("clip", -1.0):
        try:
            aggregate(df, clip=bad, **LIMITS)
            raise AssertionError(f"clip={bad!r} was accepted")
        except (ValueError, geopriv.GeoprivError):
            pass


@test("binary reports: the same estimates as their JSON form; null and garbage rows rejected")
def _():
    from pyspark.sql.types import BinaryType, StringType, StructField, StructType

    mechanism = geopriv.GeoMechanism.student_t(1e-3).seeded(11)
    query = geopriv.GeoQuery.interval(40_000.0, 90_000.0, 10_000.0)
    rnd = random.Random(5)
    reports = [mechanism.privatize_unmetered(query, [rnd.gauss(60_000, 25_000)]) for _ in range(5_000)]
    as_bytes = [(bytes(r.bytes),) for r in reports] + [(None,), (b"\x07garbage",), (b"",)]
    as_json = [(r.json,) for r in reports]
    b = aggregate(spark.createDataFrame(as_bytes, StructType([StructField("report", BinaryType())])).repartition(3), **LIMITS)
    j = aggregate(spark.createDataFrame(as_json, StructType([StructField("report", StringType())])), **LIMITS)
    expect(b.state == j.state and b.accepted == j.accepted == 5_000, (b.accepted, j.accepted))
    # A row holding a newline (never produced by spark.read.text) is one
    # record: rejected by itself, its chunk still counted row by row.
    joined = aggregate(spark.createDataFrame(as_json + [(as_json[0][0] + "\n" + as_json[1][0],)], "report string"),
                       **LIMITS)
    expect(joined.accepted == 5_000 and joined.rejected == 1, joined.rejections)
    expect(b.rejected == 3 and set(b.rejections) <= {"empty", "malformed", "truncated", "unsupported-version"}, b.rejections)
    cli, reasons = cli_aggregate(write("binary.jsonl", [r.json for r in reports]))
    same_as_cli(j, cli, reasons, "json of the binary set")
    # Seeded reports are refused unless the caller says so, as by the CLI.
    strict = aggregate(spark.createDataFrame(as_json, StructType([StructField("report", StringType())])),
                       max_epsilon=1e-3, max_delta=1e-6)
    cli, reasons = cli_aggregate(write("binary.jsonl", [r.json for r in reports]),
                                 ["--max-epsilon", "0.001", "--max-delta", "1e-6", "--no-clip"])
    expect(strict.accepted == 0 and strict.rejected == 5_000 == len(reasons) and len(strict.rejections) == 1
           and not cli, (strict.rejections, len(reasons), cli))
    try:
        aggregate(spark.createDataFrame([(1,)], "x int"), **LIMITS)
        raise AssertionError("an int column was accepted")
    except ValueError as e:
        expect("strings (JSON) or binary" in str(e), str(e))


def cobs_frames(stream):
    """The raw reports of a `--format binary` stream (COBS frames, each
    ended by 0x00)."""
    out = []
    for frame in stream.split(b"\x00")[:-1]:
        raw, i = bytearray(), 0
        while i < len(frame):
            code = frame[i]
            raw += frame[i + 1 : i + code]
            i += code
            if code != 0xFF and i < len(frame):
                raw.append(0)
        out.append(bytes(raw))
    return out


@test("binary reports cut by their last byte are never counted (attack7 O3); legacy version 2 still read")
def _():
    from pyspark.sql.types import BinaryType, StructField, StructType

    schema = StructType([StructField("report", BinaryType())])
    rnd = random.Random(3)
    reports = []
    for k, (query, mechanism, draw) in enumerate(FAMILIES):
        out = subprocess.run(
            [CLI, "privatize", *query, *mechanism, "--unmetered", "--seed", str(40 + k), "--format", "binary"],
            input=("\n".join(draw(rnd) for _ in range(375)) + "\n").encode(), capture_output=True, check=True,
        ).stdout
        reports += cobs_frames(out)
    expect(len(reports) == 1_500 and all(r[0] == 3 and r[-3] == 1 for r in reports), len(reports))
    expect(all(geopriv.report_id_of_frame(r) is not None for r in reports), "ids")
    cut = [r[:-1] for r in reports[::30]]  # 50 reports that lost their last byte
    expect(all(geopriv.report_id_of_frame(c) is None for c in cut), "an id read from a cut report")
    df = spark.createDataFrame([(x,) for x in reports + cut], schema).repartition(3)
    strict = aggregate(df, max_epsilon=1e-3, max_delta=1e-6)
    expect(strict.accepted == 0 and strict.rejections == {"seeded": 1_500, "truncated": 50}, strict.rejections)
    lax = aggregate(df, **LIMITS)
    expect(lax.accepted == 1_500 and lax.rejections == {"truncated": 50} and lax.duplicates == 0,
           (lax.accepted, lax.rejections, lax.duplicates))
    # Legacy binary version 2 (the same reports as devices in the field wrote
    # them): read, with the documented hole: cut by the seeded byte, a
    # seeded report is the unseeded one, counted by the default policy.
    legacy = [bytes([2]) + r[1:-3] + b"\x01" for r in reports]
    legacy_cut = [r[:-1] for r in legacy[::30]]
    old = aggregate(spark.createDataFrame([(x,) for x in legacy + legacy_cut], schema).repartition(3), **LIMITS)
    expect(old.state == lax.state and old.accepted == 1_500 and old.duplicates == 50, (old.accepted, old.duplicates))
    hole = aggregate(spark.createDataFrame([(x,) for x in legacy + legacy_cut], schema),
                     max_epsilon=1e-3, max_delta=1e-6)
    expect(hole.accepted == 50 and hole.rejections == {"seeded": 1_500}, (hole.accepted, hole.rejections))


@test("maps: aggregate_map equals a GridAggregator over the same reports; other queries rejected")
def _():
    xs, ys = [0.0, 200.0, 400.0], [0.0, 300.0]
    grid = geopriv.GridAggregator.kde_grid(xs, ys, 150.0)
    ids = grid.query_ids()
    mechanism = geopriv.GeoMechanism.polyplace(1e-3).seeded(3)
    rnd = random.Random(9)
    lines = []
    for i in range(6_000):
        q = geopriv.GeoQuery.from_id(ids[i % len(ids)])
        lines.append(mechanism.privatize_unmetered(q, [rnd.gauss(200, 150), rnd.gauss(150, 150)]).json)
    stranger = mechanism.privatize_unmetered(geopriv.GeoQuery.kde([5_000.0, 5_000.0], 150.0), [0.0, 0.0]).json
    policy = geopriv.ReportPolicy(1e-3, 1e-6).accept_seeded()
    for line in lines:
        grid.add_report(policy.accept_json(line))
    m = aggregate_map(spark.createDataFrame([(x,) for x in lines + [stranger]], "report string").repartition(4),
                      ids, **LIMITS)
    expect(m.rejections == {"unknown-query": 1} and m.accepted == len(lines), m.rejections)
    for (qid, got), cell in zip(m.cells, grid.estimates()):
        e = cell.estimate
        expect(qid == cell.query_id and got.n == e.n, qid)
        expect(bits(got.mean) == bits(e.mean) and bits(got.standard_error) == bits(e.standard_error), qid)
        expect(got.mechanism == "polyplace" and got.epsilon == 1e-3 and got.delta == 0.0, got)
    expect(len(m.means()) == len(xs) * len(ys), m.means())
    # clip=True: each report clamped to its group's B, as ReportServer does.
    clipped_grid, config = geopriv.GridAggregator.kde_grid(xs, ys, 150.0), geopriv.ServerConfig()
    for line in lines:
        report = policy.accept_json(line)
        bound = config.clip_bound(report)
        report.value = min(max(report.value, bound.lower), bound.upper)
        clipped_grid.add_report(report)
    mc = aggregate_map(spark.createDataFrame([(x,) for x in lines], "report string").repartition(3), ids, clip=True,
                       **LIMITS)
    for (qid, got), cell in zip(mc.cells, clipped_grid.estimates()):
        expect(bits(got.mean) == bits(cell.estimate.mean) and got.n == cell.estimate.n, qid)
    # Every device answering all six cells at ε = 1e-3 spends 6e-3 (sequential composition).
    expect(m.per_device_epsilon == sum([1e-3] * len(ids)) and "sequential composition" in m.accounting,
           (m.per_device_epsilon, m.accounting))


@test("device maps: aggregate_device_map equals `geopriv map aggregate` bit for bit under 1, 3, 7 partitions")
def _():
    grid = geopriv.MapGrid(x_min=0.0, x_max=10_000.0, y_min=0.0, y_max=10_000.0, points_x=11, points_y=11,
                           bandwidth=None)
    a_priori = geopriv.MapMechanism.A_PRIORI()
    device = geopriv.MapRelease(grid, a_priori, 2e-3)
    rnd = random.Random(21)
    lines = [device.release_unmetered([rnd.uniform(2_000, 8_000), rnd.uniform(1_000, 9_000)]).json
             for _ in range(5_000)]
    other = geopriv.MapRelease(grid, a_priori, 1e-3).release_unmetered([5.0, 5.0]).json
    rows = lines[:1_000] + ["garbage"] + lines[1_000:] + [other]
    path = write("device-map.jsonl", rows)
    with open(path) as stdin:
        p = subprocess.run([CLI, "map", "aggregate", "--bbox", "0", "10000", "0", "10000", "--grid", "11",
                            "--epsilon", "0.002"], stdin=stdin, capture_output=True, text=True, timeout=600)
    cli = json.loads(p.stdout)
    expect(p.returncode == 1 and sum(1 for e in p.stderr.splitlines() if e.startswith("line ")) == 2, p.stderr)
    for parts, binary in [(1, False), (3, True), (7, False)]:
        df = (spark.createDataFrame([(bytearray(x.encode()),) for x in rows], "report binary") if binary
              else spark.createDataFrame([(x,) for x in rows], "report string"))
        m = aggregate_device_map(df.repartition(parts), grid, a_priori, 2e-3)
        expect(m.accepted == 5_000 and m.rejections == {"malformed": 1, "other-epsilon": 1}, m.rejections)
        est = m.estimate
        expect(est.mechanism == "a-priori" and est.per_device_epsilon == 2e-3 and cli["n"] == est.n, est.mechanism)
        expect([bits(v) for v in cli["values"]] == [bits(v) for v in est.values], f"values differ ({parts})")
        expect([bits(v) for v in cli["standard_errors"]] == [bits(v) for v in est.standard_errors],
               f"standard errors differ ({parts})")
        # The CLI writes null when the planner picked EM (no kernel λ); the
        # binding's kernel_lambda is NaN then.
        same_lambda = (est.kernel_lambda != est.kernel_lambda if cli["lambda"] is None
                       else bits(cli["lambda"]) == bits(est.kernel_lambda))
        expect(same_lambda, (cli["lambda"], est.kernel_lambda))


@test("report ids (attack7 O1): 2,000 reports + 500 replays over 1, 3 and 7 partitions give the CLI's output")
def _():
    good = [line for line in SMALL if '"report_id"' in line and '"version":99' not in line][:2_000]
    rows = good + good[:500]
    path = write("replays.jsonl", rows)
    cli, reasons = cli_aggregate(path)
    expect(sum(e["n"] for e in cli.values()) + len(reasons) == 2_000, {q: e["n"] for q, e in cli.items()})
    for parts in (1, 3, 7):
        df = spark.sparkContext.parallelize([(x,) for x in rows], parts).toDF(["report"])
        r = aggregate(df, **LIMITS)
        same_as_cli(r, cli, reasons, f"replays, {parts} partitions")
        expect(r.accepted + r.rejected == 2_000 and r.duplicates == 500, (r.accepted, r.rejected, r.duplicates))
        expect(r.to_json_lines() == STDOUT[path, tuple(POLICY)], f"replays, {parts} partitions: json lines")
    # A refused copy (over the ε limit) first does not censor the valid
    # report with its id, in whatever partition the rows started.
    forged = json.loads(good[0])
    forged["epsilon"] = 0.01
    rows = [json.dumps(forged, separators=(",", ":"))] + good[:10] + good[:3]
    path = write("censor.jsonl", rows)
    cli, reasons = cli_aggregate(path)
    r = aggregate(spark.sparkContext.parallelize([(x,) for x in rows], 4).toDF(["report"]), **LIMITS)
    same_as_cli(r, cli, reasons, "a refused copy first")
    expect((r.accepted, r.rejected, r.duplicates) == (10, 1, 3), (r.accepted, r.rejected, r.duplicates))
    # Device maps: the CLI's map, n and duplicate count.
    grid = geopriv.MapGrid(x_min=0.0, x_max=10_000.0, y_min=0.0, y_max=10_000.0, points_x=11, points_y=11,
                           bandwidth=None)
    a_priori = geopriv.MapMechanism.A_PRIORI()
    device = geopriv.MapRelease(grid, a_priori, 2e-3)
    rnd = random.Random(22)
    lines = [device.release_unmetered([rnd.uniform(2_000, 8_000), rnd.uniform(1_000, 9_000)]).json
             for _ in range(3_005)]
    rows = lines + lines[:300]
    path = write("device-replays.jsonl", rows)
    with open(path) as stdin:
        p = subprocess.run([CLI, "map", "aggregate", "--bbox", "0", "10000", "0", "10000", "--grid", "11",
                            "--epsilon", "0.002"], stdin=stdin, capture_output=True, text=True, timeout=600)
    cli = json.loads(p.stdout)
    expect(cli["n"] == 3_005 and "300 duplicate reports dropped" in p.stderr, (cli["n"], p.stderr[-300:]))
    for parts in (1, 3, 7):
        m = aggregate_device_map(spark.sparkContext.parallelize([(x,) for x in rows], parts).toDF(["report"]),
                                 grid, a_priori, 2e-3)
        expect((m.accepted, m.duplicates, m.estimate.n) == (3_005, 300, 3_005), (m.accepted, m.duplicates))
        expect([bits(v) for v in cli["values"]] == [bits(v) for v in m.estimate.values], f"map values ({parts})")
    # aggregate_map: the replays count once (the cells of the distinct rows).
    ids = geopriv.GridAggregator.kde_grid([0.0, 200.0], [0.0, 300.0], 150.0).query_ids()
    mechanism = geopriv.GeoMechanism.polyplace(1e-3)
    cells = [mechanism.privatize_unmetered(geopriv.GeoQuery.from_id(ids[i % 4]), [float(i % 300), 100.0]).json
             for i in range(400)]
    once = aggregate_map(spark.createDataFrame([(x,) for x in cells], "report string"), ids, max_epsilon=1e-3)
    again = aggregate_map(spark.sparkContext.parallelize([(x,) for x in cells + cells[:100]], 3).toDF(["report"]),
                          ids, max_epsilon=1e-3)
    expect((again.accepted, again.duplicates) == (400, 100), (again.accepted, again.duplicates))
    expect([e and bits(e.mean) for _, e in once.cells] == [e and bits(e.mean) for _, e in again.cells],
           "aggregate_map with replays")
    expect(geopriv.report_id_of_json(cells[0].encode()) == json.loads(cells[0])["report_id"], "report_id_of_json")


@test("README Spark quick start: the same estimates as the CLI")
def _():
    r = spark_estimates(spark, SMALL_PATH)
    same_as_cli(r, SMALL_CLI, SMALL_REASONS, "quick start")


@test(f"local mode, {N} reports: equal to the CLI bit for bit (throughput printed)")
def _():
    df = spark.read.text(BIG_PATH)
    df.count()  # read once, so the timing below is the aggregation
    t0 = time.perf_counter()
    r = aggregate(df, **LIMITS)
    seconds = time.perf_counter() - t0
    same_as_cli(r, BIG_CLI, BIG_REASONS, "local")
    print(f"  local[2]: {N + BIG_BAD} reports in {seconds:.1f} s = {(N + BIG_BAD) / seconds:,.0f} reports/s "
          f"({r.partitions} partitions)", flush=True)


spark.stop()


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def spark_class(*args, log):
    from pyspark.find_spark_home import _find_spark_home

    env = dict(os.environ, SPARK_LOCAL_IP="127.0.0.1", SPARK_LOCAL_DIRS=WORK, SPARK_WORKER_DIR=os.path.join(WORK, "w"))
    return subprocess.Popen([os.path.join(_find_spark_home(), "bin", "spark-class"), *args],
                            stdout=open(os.path.join(WORK, log), "w"), stderr=subprocess.STDOUT, env=env)


def bare_python():
    """A Python with pyspark's worker (the executors put pyspark.zip on its
    path) but without geopriv: a venv without site packages."""
    bare = os.path.join(WORK, "bare-venv")
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", bare], check=True)
    python = os.path.join(bare, "bin", "python")
    probe = subprocess.run([python, "-I", "-c", "import geopriv"], capture_output=True, text=True)
    expect(probe.returncode != 0 and "geopriv" in probe.stderr, f"{python} imports geopriv: {probe}")
    return python


def executors_without_geopriv(url):
    """Issue 23 item 4 on the cluster: executors whose Python lacks geopriv
    make every geopriv.spark entry point raise the fix (PYSPARK_PYTHON,
    spark.pyspark.python), not a ModuleNotFoundError deep in a task. PySpark
    takes the executors' Python from the driver's PYSPARK_PYTHON when the
    SparkContext is created (spark-submit exports spark.pyspark.python as
    it); a builder's spark.pyspark.python is not read, so it is set here to
    the good Python to show that it does not mask the bad one."""
    python, saved = bare_python(), os.environ["PYSPARK_PYTHON"]
    os.environ["PYSPARK_PYTHON"] = python
    try:
        bad = session(url, **{"spark.executor.memory": "512m", "spark.executor.cores": "1", "spark.cores.max": "1"})
    finally:
        os.environ["PYSPARK_PYTHON"] = saved
    try:
        expect(bad.sparkContext.pythonExec == python, bad.sparkContext.pythonExec)
        df = bad.createDataFrame([("{}",)], ["value"])
        for name, call in [("check_executors", lambda: geopriv.spark.check_executors(bad)),
                           ("aggregate", lambda: aggregate(df, **LIMITS))]:
            try:
                call()
                expect(False, f"{name} ran on executors without geopriv")
            except RuntimeError as e:
                text = str(e)
                expect("PYSPARK_PYTHON" in text and "spark.pyspark.python" in text and python in text
                       and "geopriv" in text, f"{name}: {text}")
                print(f"  {name} on executors without geopriv: {text[:160]}...", flush=True)
    finally:
        bad.stop()


@test(f"standalone cluster on 127.0.0.1 (a master, two workers), {N} reports: equal to the CLI bit for bit; "
      "executors without geopriv refused with the fix")
def _():
    port, ui = free_port(), free_port()
    procs = [spark_class("org.apache.spark.deploy.master.Master", "--host", "127.0.0.1", "--port", str(port),
                         "--webui-port", str(ui), log="master.log")]
    try:
        url = f"spark://127.0.0.1:{port}"
        for k in range(2):
            procs.append(spark_class("org.apache.spark.deploy.worker.Worker", url, "--host", "127.0.0.1",
                                     "--cores", "1", "--memory", "1g", "--webui-port", str(free_port()),
                                     log=f"worker{k}.log"))
        alive, deadline = 0, time.time() + 120
        while alive < 2 and time.time() < deadline:
            time.sleep(1)
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{ui}/json/", timeout=5) as page:
                    alive = sum(w["state"] == "ALIVE" for w in json.load(page)["workers"])
            except OSError:
                pass
        expect(alive == 2, f"{alive} workers registered within 120 s (see {WORK}/*.log)")
        split = max(1 << 20, os.path.getsize(BIG_PATH) // 6)  # about 6 partitions, 3 per executor
        cluster = session(url, **{"spark.executor.memory": "1g", "spark.executor.cores": "1", "spark.cores.max": "2",
                                  "spark.sql.files.maxPartitionBytes": str(split)})
        try:
            def executors():  # registered executors (the driver's own entry excluded)
                return cluster.sparkContext._jsc.sc().getExecutorMemoryStatus().size() - 1

            deadline = time.time() + 120
            while executors() < 2 and time.time() < deadline:
                time.sleep(1)
            expect(executors() == 2, f"{executors()} executors registered within 120 s")
            t0 = time.perf_counter()
            r = aggregate(cluster.read.text(BIG_PATH), **LIMITS)
            seconds = time.perf_counter() - t0
            same_as_cli(r, BIG_CLI, BIG_REASONS, "cluster")
            expect(r.partitions >= 2, f"{r.partitions} partitions")
            print(f"  cluster: {N + BIG_BAD} reports in {seconds:.1f} s = {(N + BIG_BAD) / seconds:,.0f} reports/s "
                  f"({r.partitions} partitions on {executors()} executors)", flush=True)
            # With the right Python the executor check passed (aggregate runs it first).
            expect(cluster.sparkContext.pythonExec == sys.executable, cluster.sparkContext.pythonExec)
            expect(cluster.sparkContext.applicationId in geopriv.spark._CHECKED_CONTEXTS, "check_executors ran")
        finally:
            cluster.stop()
        executors_without_geopriv(url)
    finally:
        for p in reversed(procs):
            p.terminate()
        for p in procs:
            try:
                p.wait(timeout=30)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()


finish("spark")
