"""Aggregate geopriv reports stored in a Spark DataFrame.

A DataFrame with one column of reports (JSON lines as strings, or the
binary form ``PrivateReport.bytes`` as binary) becomes one estimate per
(query, mechanism, ε, δ) group, as ``geopriv aggregate`` groups them
(:func:`aggregate`), one estimate per cell of a map of per-query
reports (:func:`aggregate_map`), or the map of device map reports
(:func:`aggregate_device_map`: one noisy location per device, exact bin
counts per partition)::

    from pyspark.sql import SparkSession
    from geopriv.spark import aggregate

    spark = SparkSession.builder.getOrCreate()
    result = aggregate(spark.read.option("lineSep", "\\n").text("reports/*.jsonl"), max_epsilon=1e-3)
    for e in result.estimates:
        print(e.query, e.n, e.mean, e.ci95)
    print(result.rejections)  # {"malformed": 3, "epsilon-out-of-policy": 1}

Reports are clipped like ``geopriv aggregate`` clips them (docs/MATH.md
§10): every value is clamped to its group's public bound B, so one report
moves a mean of n by at most width(B)/n, and each estimate carries B and
the honest-bias bound (``QueryEstimate.clip``). The default level is the
CLI's (honest bias below 0.1 standard error at 10^6 reports per group);
``clip=False`` turns clipping off (``--no-clip``), ``clip=<z>`` fixes z
(``--clip-z``).

How it runs (docs/MATH.md §5 for the exact sums):

1. ``mapPartitionsWithIndex``: every partition builds a ``ReportServer``
   (the CLI's validation, grouping and clipping) on the executor and hands
   it its rows in chunks of ``CHUNK`` reports, one call across the FFI per
   chunk (JSON: the chunk joined into one byte stream for ``ingest``, the
   CLI's reader; binary: ``add_bytes_batch``), then emits its exact
   partial state (``ReportServer.to_json()``: per group the exact integer
   sums of the clipped values) with its rejection counts. A bad row
   (malformed, truncated, wrong version, too long, out of policy, null)
   is rejected with its reason and counted; it never fails the job.
2. The driver merges the partial states into one ``ReportServer``
   (``merge_json``). The sums are exact, so the result is bit-for-bit the
   one of a single process (``geopriv aggregate`` with the same flags on
   the same reports) under any partitioning.

Report ids: like ``geopriv aggregate``, ``geopriv map aggregate`` and the
collector, every entry point counts each ``report_id`` once (docs/MATH.md
§10.11): a report whose id a report *accepted* before carried is dropped
and counted in ``duplicates``; an id is remembered only once its report is
accepted, so a refused row never censors a later valid one. "Before" is
the input order of the rows: partition by partition of the DataFrame as
given, row by row within a partition (``RDD.zipWithIndex``'s order, the
order ``geopriv aggregate`` would read the rows written out in that
order). The servers' partial states carry no ids, so before the
per-partition servers run, the rows are exchanged by a hash of their
``report_id`` (``report_id_of_json``/``report_id_of_frame``: the servers'
own parser of ids; rows without one stay spread by position) and sorted
within each partition by their input position: every copy of an id is
then in one partition, in input order, and the per-partition rule is the
global one. Each partition remembers at most 2^20 ids (the CLI's
``--max-report-ids`` default; past it new ids count unremembered, as in
the CLI). That bound is per partition, so P partitions remember up to
P·2^20 ids in all: the counts equal the CLI's with its default bound only
while at most 2^20 reports with ids are accepted; beyond that they equal
``geopriv aggregate --max-report-ids M`` with M at least the number of
distinct ids (when no partition reaches 2^20), where the CLI's default would
count a repeat of a late id again (attack9: 1,070,010 rows with 10,710
repeats, 2 partitions: 1,059,300 accepted, as the CLI with
``--max-report-ids 4000000``; the CLI's default accepts 1,059,418). The
exchange shuffles the rows once; the partition numbers of ``examples`` are
those after it.

Read files with ``spark.read.option("lineSep", "\\n").text(...)``: the CLI
ends a record at ``\\n`` only, while Spark's default also splits at a lone
``\\r``, so a line ``A\\rB`` would be one (rejected) record for the CLI and
two rows for Spark, and the counts would differ.

Like the CLI, blank JSON rows (after a BOM and ASCII whitespace) and rows
starting with ``#`` are skipped (counted in ``skipped``, not rejected), and
reports marked ``"seeded":true`` are rejected unless ``accept_seeded=True``
(tests only). :func:`aggregate_map` pools a cell's reports like
``GridAggregator`` and does not clip unless ``clip`` is given.

Executors need the ``geopriv`` wheel installed in the Python that Spark
runs (``PYSPARK_PYTHON`` or ``spark.pyspark.python``): every entry point
first checks it once per SparkContext (:func:`check_executors`) and raises
a ``RuntimeError`` naming the fix; see bindings/README.md ("Spark").
"""

from __future__ import annotations

import dataclasses
import json
import re
import struct
import zlib
from typing import Any, Callable, Dict, Iterable, Iterator, List, Optional, Sequence, Tuple

__all__ = [
    "PolicySpec",
    "QueryEstimate",
    "Rejection",
    "ServerSpec",
    "SparkAggregate",
    "SparkDeviceMap",
    "SparkMap",
    "aggregate",
    "aggregate_device_map",
    "aggregate_map",
    "check_executors",
    "executor_python_fix",
    "mechanism_str",
    "merge_partials",
]

#: Rejected rows kept with their reason per partition (all are counted).
EXAMPLES_PER_PARTITION = 5
#: Reports handed to the native ``ReportServer`` per call.
CHUNK = 8192
#: Values buffered per query before they cross into Rust in one call.
_FLUSH = 65536
_CODE = re.compile(r"\[([a-z0-9-]+)\]\s*$")
#: Report ids remembered per partition by :func:`aggregate_map` (the
#: CLI's ``--max-report-ids`` default; the servers use the same bound).
MAX_REPORT_IDS = 1 << 20


def _record(row: Any) -> Any:
    """The report cell of a row (a Row/tuple of one column, or the value)."""
    return row[0] if isinstance(row, (tuple, list)) else row


def _report_id(record: Any, frames: bool) -> Optional[str]:
    """The ``report_id`` of a row as the servers read it (``None``: none,
    or the row does not decode). ``frames``: binary report frames, else
    JSON (text, or the UTF-8 bytes of ``MapUpload.bytes``)."""
    import geopriv

    if record is None:
        return None
    try:
        data = record.encode("utf-8", "surrogatepass") if isinstance(record, str) else bytes(record)
    except (TypeError, ValueError, UnicodeError):
        return None
    return geopriv.report_id_of_frame(data) if frames else geopriv.report_id_of_json(data)


def _by_report_id(rdd: Any, frames: bool, with_ids: bool = False) -> Any:
    """The rows of ``rdd`` exchanged so that every copy of a ``report_id``
    is in one partition (partition crc32(id) mod P; a row without an id
    goes to partition position mod P), each partition in input order
    (sorted by the row's position, ``zipWithIndex``). Same number of
    partitions. ``with_ids``: each row comes out as ``(row, report_id)``,
    the id read here for the exchange (``None``: none, or the row does
    not decode), so that a partition function that keeps its own id rule
    (:func:`_partition`) does not parse it a second time; the native
    servers read the id themselves, so the others take the rows alone."""
    n = max(1, rdd.getNumPartitions())

    def keyed(pair: Any) -> Any:
        row, position = pair
        rid = _report_id(_record(row), frames)
        part = position % n if rid is None else zlib.crc32(rid.encode("ascii")) % n
        return ((part, position), (row, rid) if with_ids else row)

    return (
        rdd.zipWithIndex()
        .map(keyed)
        .repartitionAndSortWithinPartitions(n, partitionFunc=lambda k: k[0], keyfunc=lambda k: k)
        .map(lambda kv: kv[1])
    )


@dataclasses.dataclass(frozen=True)
class PolicySpec:
    """What the server accepts, as plain data (picklable, so it can be
    shipped to the executors, which build their own ``ReportPolicy``).

    The defaults are those of ``geopriv aggregate``: ε ≤ 1, δ ≤ 1e-4, no
    local-DP reports. ``only_queries`` (canonical query ids) refuses
    reports of any other query (``[unknown-query]``).
    """

    max_epsilon: float = 1.0
    max_delta: float = 1e-4
    allow_ldp: Optional[float] = None
    only_queries: Optional[Tuple[str, ...]] = None
    #: Accept reports marked ``seeded`` (reproducible, NOT secure noise),
    #: like ``geopriv aggregate --accept-seeded``. For tests only.
    accept_seeded: bool = False

    def build(self) -> Any:
        """The ``geopriv.ReportPolicy`` this spec describes."""
        import geopriv

        policy = geopriv.ReportPolicy(self.max_epsilon, self.max_delta)
        if self.accept_seeded:
            policy = policy.accept_seeded()
        if self.allow_ldp is not None:
            policy = policy.allow_ldp(self.allow_ldp)
        if self.only_queries is not None:
            policy = policy.only_queries([geopriv.GeoQuery.from_id(q) for q in self.only_queries])
        return policy


@dataclasses.dataclass(frozen=True)
class ServerSpec:
    """Clipping and limits of ``geopriv aggregate`` as plain data (shipped
    to the executors, which build their own ``ServerConfig``).

    ``clip``: ``True`` (default) clips at the smallest z whose honest bias
    is at most ``clip_bias_se`` standard errors at ``clip_n`` reports per
    group (``--clip-n``, ``--clip-bias-se``); a number is a fixed z
    (``--clip-z``); ``False`` or ``None`` does not clip (``--no-clip``).
    ``max_queries`` and ``max_record_bytes`` are the CLI's limits."""

    clip: Any = True
    clip_n: int = 1_000_000
    clip_bias_se: float = 0.1
    max_queries: int = 4096
    max_record_bytes: int = 65536

    def build(self) -> Any:
        """The ``geopriv.ServerConfig`` this spec describes."""
        import geopriv

        config = geopriv.ServerConfig()
        if self.clip is None or self.clip is False:
            config = config.without_clipping()
        elif self.clip is True:
            config = config.with_clip_target(self.clip_n, self.clip_bias_se)
        elif isinstance(self.clip, (int, float)):
            config = config.with_clip_z(float(self.clip))
        else:
            raise ValueError(f"clip must be True, False, None or a level z, not {self.clip!r}")
        return config.with_max_queries(self.max_queries).with_max_record_bytes(self.max_record_bytes)


@dataclasses.dataclass(frozen=True)
class QueryEstimate:
    """The estimate for one (query, mechanism, ε, δ) group: the fields of
    ``geopriv aggregate``'s output lines (``ci95`` is ``None`` below 2
    reports). ``clip`` is the CLI's ``clip`` object (``bounds`` = B,
    ``z``, ``sigma_max``, ``bias_bound``, ``influence_bound`` = width(B)/n,
    ``bias_to_se_bound``, ``clipped``), ``None`` without clipping."""

    query: str
    mechanism: str
    epsilon: float
    delta: float
    n: int
    mean: float
    sum: float
    standard_error: Optional[float]
    ci95: Optional[Tuple[float, float]]
    clip: Optional[Dict[str, Any]] = None

    def to_dict(self) -> Dict[str, Any]:
        """The CLI's JSON object for this estimate."""
        d = {
            "query": self.query,
            "mechanism": self.mechanism,
            "epsilon": self.epsilon,
            "delta": self.delta,
            "n": self.n,
            "mean": self.mean,
            "sum": self.sum,
            "standard_error": self.standard_error,
            "ci95": None if self.ci95 is None else list(self.ci95),
        }
        if self.clip is not None:
            d["clip"] = self.clip
        return d


@dataclasses.dataclass(frozen=True)
class Rejection:
    """One rejected row: its partition, its position in the partition, the
    stable rejection code (e.g. ``malformed``) and the full reason."""

    partition: int
    row: int
    code: str
    reason: str


@dataclasses.dataclass(frozen=True)
class SparkAggregate:
    """Result of :func:`aggregate`."""

    #: One estimate per (query, mechanism, ε, δ) group with at least one
    #: accepted report, sorted like the CLI (query id, mechanism, ε, δ).
    estimates: List[QueryEstimate]
    accepted: int
    rejected: int
    #: Blank and ``#`` JSON rows (skipped like the CLI does, not rejected).
    skipped: int
    #: Rejections by code.
    rejections: Dict[str, int]
    #: The first rejected rows of each partition, with their reasons.
    examples: List[Rejection]
    partitions: int
    #: The merged exact state (``ReportServer.to_json()``: canonical, the
    #: same string under any partitioning), to merge with other runs
    #: (``ReportServer.merge_json``).
    state: str
    #: The estimates exactly as ``geopriv aggregate`` prints them.
    json_lines: str = ""
    #: Reports dropped because a report with their ``report_id`` was
    #: accepted before (``geopriv aggregate``'s "duplicate reports
    #: dropped"; module docs).
    duplicates: int = 0

    def to_json_lines(self) -> str:
        """The estimates in the format of ``geopriv aggregate``, byte for
        byte (one JSON object per line, sorted like the CLI)."""
        return self.json_lines

    def to_dataframe(self, spark: Any) -> Any:
        """The estimates as a Spark DataFrame (one row per group)."""
        from pyspark.sql.types import (
            ArrayType,
            DoubleType,
            LongType,
            StringType,
            StructField,
            StructType,
        )

        schema = StructType(
            [
                StructField("query", StringType(), False),
                StructField("mechanism", StringType(), False),
                StructField("epsilon", DoubleType(), False),
                StructField("delta", DoubleType(), False),
                StructField("n", LongType(), False),
                StructField("mean", DoubleType(), False),
                StructField("sum", DoubleType(), False),
                StructField("standard_error", DoubleType(), True),
                StructField("ci95", ArrayType(DoubleType(), False), True),
                StructField("clip_bounds", ArrayType(DoubleType(), False), True),
                StructField("bias_bound", DoubleType(), True),
                StructField("influence_bound", DoubleType(), True),
            ]
        )
        rows = [
            (e.query, e.mechanism, e.epsilon, e.delta, e.n, e.mean, e.sum, e.standard_error,
             None if e.ci95 is None else list(e.ci95),
             None if e.clip is None else list(e.clip["bounds"]),
             None if e.clip is None else e.clip["bias_bound"],
             None if e.clip is None else e.clip["influence_bound"])
            for e in self.estimates
        ]
        return spark.createDataFrame(rows, schema)


@dataclasses.dataclass(frozen=True)
class SparkMap:
    """Result of :func:`aggregate_map`: one cell per query, in the order
    the queries were given (``estimate`` is ``None`` for a cell without
    reports); a density map over ``GridAggregator.kde_grid``'s queries is
    row-major in y, then x. Cells are per query id (all mechanisms, ε and
    δ pooled, as ``GridAggregator`` does)."""

    cells: List[Tuple[str, Optional[QueryEstimate]]]
    accepted: int
    rejected: int
    skipped: int
    rejections: Dict[str, int]
    examples: List[Rejection]
    partitions: int
    #: Per-device total ε of the map when every device answers every cell
    #: once: Σ over the cells of the cell's (largest) ε, by sequential
    #: composition (961 cells at ε each cost a device 961 ε); ``nan``
    #: without reports.
    per_device_epsilon: float = float("nan")
    #: How ``per_device_epsilon`` is accounted, in words.
    accounting: str = ""
    #: Reports dropped as replays of an accepted ``report_id`` (module
    #: docs; here a row decoding to a JSON object with an accepted id is a
    #: duplicate even if it would not decode as a report).
    duplicates: int = 0

    def means(self) -> List[Optional[float]]:
        """The estimated mean of each cell (``None`` without reports)."""
        return [None if e is None else e.mean for _, e in self.cells]


def rejection_code(error: BaseException) -> str:
    """The stable code at the end of a geopriv rejection message
    (``... [malformed]`` gives ``malformed``); the exception's class name
    for other errors."""
    m = _CODE.search(str(error))
    return m.group(1) if m else type(error).__name__


def _clip_hook(clip: Optional["ServerSpec"]) -> Optional[Callable[[Any], float]]:
    """The value transform of :func:`aggregate_map` for a clipping spec:
    each accepted report is clamped to its group's public bound B (the
    bindings' ``ServerConfig.clip_bound``, cached per (query, mechanism, ε,
    δ)), as ``ReportServer`` and ``geopriv aggregate`` clamp it."""
    if clip is None or clip.clip is None or clip.clip is False:
        return None
    config = clip.build()
    bounds: Dict[Any, Tuple[float, float]] = {}

    def transform(report: Any) -> float:
        key = (report.query_id, report.mechanism, _bits(report.epsilon), _bits(report.delta))
        b = bounds.get(key)
        if b is None:
            bound = config.clip_bound(report)
            b = bounds[key] = (bound.lower, bound.upper)
        v = report.value
        return b[1] if v >= b[1] else (v if v >= b[0] else b[0])

    return transform


def mechanism_str(name: Any) -> str:
    """The CLI's name of a ``MechanismName`` (``STUDENT_T`` gives ``student-t``)."""
    return name.name.lower().replace("_", "-")


def _bits(x: float) -> bytes:
    return struct.pack("<d", x)


def _skippable(record: str) -> bool:
    """A blank or ``#`` JSON row, which ``geopriv aggregate`` skips: a BOM
    and ASCII whitespace around the row are ignored."""
    text = record[1:] if record.startswith("\ufeff") else record
    text = text.strip(" \t\n\r\x0c")
    return not text or text.startswith("#")


def _partition(
    spec: PolicySpec, binary: bool, clip: Any, by_query: bool
) -> Callable[[int, Iterable[Any]], Iterator[Tuple[int, Dict[Any, str], int, int, Dict[str, int], List[Rejection]]]]:
    """The function run on every partition (module-level, so it pickles),
    on the ``(row, report_id)`` pairs of :func:`_by_report_id` with
    ``with_ids``."""

    def run(index: int, rows: Iterable[Any]) -> Iterator[Any]:
        import geopriv

        policy = spec.build()
        accept = policy.accept_bytes if binary else policy.accept_json
        transform = _clip_hook(clip)
        aggregators: Dict[Any, Any] = {}
        pending: Dict[Any, List[float]] = {}
        rejections: Dict[str, int] = {}
        examples: List[Rejection] = []
        accepted = 0
        skipped = 0
        seen: set = set()  # ids of accepted reports, at most MAX_REPORT_IDS
        duplicates = 0

        def reject(row: int, code: str, reason: str) -> None:
            rejections[code] = rejections.get(code, 0) + 1
            if len(examples) < EXAMPLES_PER_PARTITION:
                examples.append(Rejection(index, row, code, reason))

        def flush(key: Any, values: List[float]) -> None:
            agg = aggregators.get(key)
            if agg is None:
                agg = aggregators[key] = geopriv.Aggregator()
            agg.add_values(values)  # finite: the policy checked every value
            values.clear()

        # Each row comes with its report_id, read once by the exchange
        # (:func:`_by_report_id` with ``with_ids``).
        for row_number, (row, rid) in enumerate(rows):
            record = _record(row)
            if record is None:
                reject(row_number, "empty", "null report [empty]")
                continue
            if not binary and isinstance(record, str) and _skippable(record):
                skipped += 1
                continue
            if rid is not None and rid in seen:
                duplicates += 1
                continue
            try:
                report = accept(bytes(record) if binary else record)
                value = report.value if transform is None else transform(report)
            except geopriv.GeoprivError as e:  # every subtype: reject, never fail the job
                reject(row_number, rejection_code(e), str(e))
                continue
            except (TypeError, ValueError, UnicodeError) as e:  # a cell of the wrong type
                reject(row_number, "wrong-type", f"{type(e).__name__}: {e} [wrong-type]")
                continue
            # The CLI's group key: ε and δ by their bits.
            key = (
                report.query_id
                if by_query
                else (report.query_id, mechanism_str(report.mechanism), _bits(report.epsilon), _bits(report.delta))
            )
            values = pending.get(key)
            if values is None:
                values = pending[key] = []
            values.append(value)
            accepted += 1
            if rid is not None and len(seen) < MAX_REPORT_IDS:
                seen.add(rid)
            if len(values) >= _FLUSH:
                flush(key, values)
        for key, values in pending.items():
            if values:
                flush(key, values)
        states = {k: a.to_json() for k, a in aggregators.items()}
        yield (index, states, accepted, skipped, rejections, examples, duplicates)

    return run


def _server_partition(
    spec: PolicySpec, server: ServerSpec, binary: bool
) -> Callable[[int, Iterable[Any]], Iterator[Tuple[int, str, int, int, Dict[str, int], List[Rejection]]]]:
    """The function run on every partition by :func:`aggregate`: the rows go
    to a native ``ReportServer`` in chunks of ``CHUNK`` (one FFI call each)."""

    def run(index: int, rows: Iterable[Any]) -> Iterator[Any]:
        import geopriv

        native = geopriv.ReportServer(spec.build(), server.build())
        add = native.add_bytes_batch if binary else native.add_json_batch
        json_format = geopriv.InputFormat.JSON
        rejections: Dict[str, int] = {}
        examples: List[Rejection] = []
        totals = [0, 0, 0]  # accepted, skipped, duplicates
        first = 0  # row number (in the partition) of chunk[0]

        def flush(chunk: List[Any]) -> None:
            r = None
            if not binary and None not in chunk:
                # One byte stream for the CLI's reader: encoding and joining
                # run in C, where lowering a list costs Python work per row.
                # Lone surrogates become invalid UTF-8 (rejected as not-utf8,
                # as the CLI rejects those bytes); a row holding a newline
                # would split, so such a chunk goes row by row.
                blob = ("\n".join(chunk) + "\n").encode("utf-8", "surrogatepass")
                if blob.count(b"\n") == len(chunk):
                    r = native.ingest(blob, json_format)
            if r is None:
                r = add(chunk)
            totals[0] += r.accepted
            totals[1] += r.skipped
            totals[2] += r.duplicates
            for code, count in r.rejected_by_code.items():
                rejections[code] = rejections.get(code, 0) + count
            for x in r.rejections[: max(0, EXAMPLES_PER_PARTITION - len(examples))]:
                examples.append(Rejection(index, first + x.record - 1, x.code, x.reason))

        chunk: List[Any] = []
        for row in rows:
            record = row[0]
            if binary and record is not None:
                record = bytes(record)
            chunk.append(record)
            if len(chunk) >= CHUNK:
                flush(chunk)
                first += len(chunk)
                chunk = []
        if chunk:
            flush(chunk)
        yield (index, native.to_json(), totals[0], totals[1], rejections, examples, totals[2])

    return run


def merge_partials(states: Sequence[str]) -> str:
    """Merges exact aggregator states (``Aggregator.to_json()``) in a fixed
    balanced binary tree over their order. The sums are exact, so the
    result does not depend on the order or the grouping; the fixed tree
    just makes every run do the same work."""
    import geopriv

    if not states:
        return geopriv.Aggregator().to_json()
    level = list(states)
    while len(level) > 1:
        merged = []
        for i in range(0, len(level) - 1, 2):
            a = geopriv.Aggregator.from_json(level[i])
            a.merge(geopriv.Aggregator.from_json(level[i + 1]))
            merged.append(a.to_json())
        if len(level) % 2:
            merged.append(level[-1])
        level = merged
    return level[0]


#: SparkContexts whose executors were found to import geopriv.
_CHECKED_CONTEXTS: set = set()


def _probe(_: Any) -> str:
    """Runs on an executor: importing this module there needs geopriv."""
    import geopriv

    return geopriv.__version__


def executor_python_fix() -> str:
    """How to make Spark's executors run a Python that has geopriv: the
    message of :func:`check_executors` errors.

    PySpark's driver fixes the executors' Python when its SparkContext is
    created: ``PYSPARK_PYTHON`` from the driver's environment, else
    ``python3`` on each worker's PATH (``SparkContext.pythonExec``).
    ``spark-submit --conf spark.pyspark.python=...`` works because
    spark-submit exports it as ``PYSPARK_PYTHON`` to the driver; set on a
    ``SparkSession.builder`` of a driver started with plain ``python`` it
    is not read (measured with PySpark 4.3: tests/python/test_spark.py)."""
    import sys

    return (
        "the Spark executors' Python cannot import geopriv. Run them with a Python that has the wheel: "
        f"export PYSPARK_PYTHON={sys.executable} (or os.environ['PYSPARK_PYTHON'] = sys.executable) in the "
        "driver's environment before the first SparkSession is built, or "
        "spark-submit --conf spark.pyspark.python=/path/to/venv/bin/python (the venv must exist on every node: "
        "pip install the wheel there, or ship a venv-pack archive; see bindings/README.md, \"Spark\")"
    )


def check_executors(spark: Any) -> None:
    """Check once per SparkContext that the executors' Python imports
    geopriv (one tiny job), raising ``RuntimeError`` with the fix
    (:func:`executor_python_fix`: ``PYSPARK_PYTHON`` /
    ``spark.pyspark.python``) instead of a ``ModuleNotFoundError`` deep in a
    task's traceback. ``aggregate``, ``aggregate_map`` and
    ``aggregate_device_map`` call it first; ``spark`` is a SparkSession,
    a SparkContext or a DataFrame."""
    session = getattr(spark, "sparkSession", spark)
    sc = getattr(session, "sparkContext", session)
    # The application id, not id(sc): a new SparkContext can reuse a stopped
    # one's id() and would skip its check.
    key = getattr(sc, "applicationId", None) or id(sc)
    if key in _CHECKED_CONTEXTS:
        return
    try:
        versions = sc.parallelize([0], 1).map(_probe).collect()
    except Exception as e:  # noqa: BLE001 - Py4J wraps the executor's error
        # The probe only imports geopriv on an executor: whatever stops it
        # (no geopriv there, a Python that cannot run Spark's worker, a
        # version mismatch) is the executors' Python, so name the fix and
        # keep the executor's own last line for the details.
        text = str(e).strip().splitlines()
        detail = text[-1] if text else type(e).__name__
        python = getattr(sc, "pythonExec", None) or "python3"
        raise RuntimeError(
            f"{executor_python_fix()} (the executors run {python!r}; executor error: {detail[:500]})"
        ) from None
    import geopriv

    if versions and versions[0] != geopriv.__version__:
        raise RuntimeError(
            f"the executors run geopriv {versions[0]} but the driver {geopriv.__version__}: "
            "install the same wheel everywhere"
        )
    _CHECKED_CONTEXTS.add(key)


def _report_column(df: Any, column: Optional[str]) -> Tuple[str, bool]:
    """The column holding the reports and whether it is binary."""
    from pyspark.sql.types import BinaryType, StringType

    check_executors(df)

    if column is None:
        if len(df.columns) != 1:
            raise ValueError(f"the DataFrame has columns {df.columns}: pass column= to name the reports")
        column = df.columns[0]
    if column not in df.columns:
        raise ValueError(f"no column {column!r} in {df.columns}")
    kind = df.schema[column].dataType
    if isinstance(kind, StringType):
        return column, False
    if isinstance(kind, BinaryType):
        return column, True
    raise ValueError(f"column {column!r} is {kind.simpleString()}: reports are strings (JSON) or binary")


def _sort_key(key: Any) -> Any:
    """The CLI's order: query id, mechanism (declaration order), ε, δ."""
    import geopriv

    if isinstance(key, str):
        return key
    query, mechanism, epsilon, delta = key
    rank = geopriv.MechanismName[mechanism.upper().replace("-", "_")].value
    return (query, rank, struct.unpack("<d", epsilon)[0], struct.unpack("<d", delta)[0])


def _run(
    df: Any, column: Optional[str], spec: PolicySpec, clip: Any, by_query: bool = False
) -> Tuple[Dict[Any, str], int, int, Dict[str, int], List[Rejection], int, int]:
    _clip_hook(clip)  # refuse an unsupported clip on the driver, before any job
    name, binary = _report_column(df, column)
    rdd = _by_report_id(df.select(name).rdd, binary, with_ids=True)
    partials = sorted(rdd.mapPartitionsWithIndex(_partition(spec, binary, clip, by_query)).collect(), key=lambda p: p[0])
    by_group: Dict[Any, List[str]] = {}
    rejections: Dict[str, int] = {}
    examples: List[Rejection] = []
    accepted = 0
    skipped = 0
    duplicates = 0
    for _, states, n, blank, rejected, some, dups in partials:
        duplicates += dups
        for q, s in states.items():
            by_group.setdefault(q, []).append(s)
        accepted += n
        skipped += blank
        for code, count in rejected.items():
            rejections[code] = rejections.get(code, 0) + count
        examples.extend(some)
    merged = {q: merge_partials(by_group[q]) for q in sorted(by_group, key=_sort_key)}
    return merged, accepted, skipped, dict(sorted(rejections.items())), examples, len(partials), duplicates


def _estimate(key: Any, state: str) -> Optional[QueryEstimate]:
    import geopriv

    e = geopriv.Aggregator.from_json(state).estimate()
    if e is None:
        return None
    ci = None if e.ci95_low is None or e.ci95_high is None else (e.ci95_low, e.ci95_high)
    if isinstance(key, str):  # a map cell: every mechanism, ε and δ pooled
        return QueryEstimate(key, "", float("nan"), float("nan"), e.n, e.mean, e.sum, e.standard_error, ci)
    query, mechanism, epsilon, delta = key
    eps, dlt = struct.unpack("<d", epsilon)[0], struct.unpack("<d", delta)[0]
    return QueryEstimate(query, mechanism, eps, dlt, e.n, e.mean, e.sum, e.standard_error, ci)


def aggregate(
    df: Any,
    column: Optional[str] = None,
    *,
    max_epsilon: float = 1.0,
    max_delta: float = 1e-4,
    allow_ldp: Optional[float] = None,
    only_queries: Optional[Sequence[str]] = None,
    accept_seeded: bool = False,
    clip: Any = True,
    clip_n: int = 1_000_000,
    clip_bias_se: float = 0.1,
    max_queries: int = 4096,
    max_record_bytes: int = 65536,
) -> SparkAggregate:
    """One estimate per (query, mechanism, ε, δ) group from a DataFrame of
    reports, bit for bit as ``geopriv aggregate`` prints them with the same
    flags.

    ``column`` (default: the only column) holds JSON reports (string) or
    binary reports (binary). The policy flags are those of ``geopriv
    aggregate`` (same defaults); ``only_queries`` lists the canonical ids
    to accept; ``accept_seeded=True`` accepts reports marked ``seeded``
    (``--accept-seeded``, for tests only). Clipping (:class:`ServerSpec`):
    ``clip=True`` (default, the CLI's level), ``clip=False`` (``--no-clip``)
    or ``clip=z`` (``--clip-z``); ``clip_n``/``clip_bias_se``,
    ``max_queries`` and ``max_record_bytes`` are the CLI's flags of those
    names. Rows that fail validation are counted by code in
    ``rejections`` (the first few of each partition with their reason in
    ``examples``). The median-of-means estimator is not offered here: its
    buckets depend on the order of the reports, so it cannot be the same
    under every partitioning.
    """
    import geopriv

    spec = PolicySpec(
        max_epsilon, max_delta, allow_ldp, None if only_queries is None else tuple(only_queries), accept_seeded
    )
    server = ServerSpec(clip, clip_n, clip_bias_se, max_queries, max_record_bytes)
    policy, config = spec.build(), server.build()  # refuse bad limits on the driver, before any job
    name, binary = _report_column(df, column)
    partials = sorted(
        _by_report_id(df.select(name).rdd, binary)
        .mapPartitionsWithIndex(_server_partition(spec, server, binary))
        .collect(),
        key=lambda p: p[0],
    )
    reducer = geopriv.ReportServer(policy, config)
    rejections: Dict[str, int] = {}
    examples: List[Rejection] = []
    accepted = skipped = duplicates = 0
    for _, state, n, blank, rejected, some, dups in partials:
        reducer.merge_json(state)  # exact: the order does not matter
        duplicates += dups
        accepted += n
        skipped += blank
        for code, count in rejected.items():
            rejections[code] = rejections.get(code, 0) + count
        examples.extend(some)
    estimates = []
    for g in reducer.estimates():
        line = json.loads(g.json_line)
        e = g.estimate
        ci = None if e.ci95_low is None or e.ci95_high is None else (e.ci95_low, e.ci95_high)
        estimates.append(
            QueryEstimate(g.query_id, line["mechanism"], g.epsilon, g.delta, e.n, e.mean, e.sum, e.standard_error,
                          ci, line.get("clip"))
        )
    rejections = dict(sorted(rejections.items()))
    return SparkAggregate(
        estimates=estimates,
        accepted=accepted,
        rejected=sum(rejections.values()),
        skipped=skipped,
        rejections=rejections,
        examples=examples,
        partitions=len(partials),
        state=reducer.to_json(),
        json_lines=reducer.to_json_lines(),
        duplicates=duplicates,
    )


def aggregate_map(
    df: Any,
    queries: Sequence[Any],
    column: Optional[str] = None,
    *,
    max_epsilon: float = 1.0,
    max_delta: float = 1e-4,
    allow_ldp: Optional[float] = None,
    accept_seeded: bool = False,
    clip: Any = None,
) -> SparkMap:
    """One estimate per cell of a map: ``queries`` are ``GeoQuery`` objects
    or canonical ids (e.g. ``GridAggregator.kde_grid(xs, ys, h).query_ids()``);
    reports of other queries are rejected (``[unknown-query]``). The cells
    equal those of a ``GridAggregator`` over the same queries fed the same
    reports, bit for bit (every mechanism, ε and δ of a cell pooled).
    ``clip`` (off by default, like ``GridAggregator``): ``True`` or a level
    z clamps each report to the public bound B of its (query, mechanism, ε,
    δ), as :func:`aggregate` does.

    Each cell's estimate names its reports' mechanism (several joined by
    ``+``) and their ε and δ (the largest, if they differ); the map's
    per-device total (``per_device_epsilon``, sequential composition over
    the cells) says what a device that answered every cell spent. For one
    noisy location per device (the cheaper map at the same per-device ε) see
    :func:`aggregate_device_map`."""
    import geopriv

    ids = tuple(q if isinstance(q, str) else q.query_id() for q in queries)
    spec = PolicySpec(max_epsilon, max_delta, allow_ldp, ids, accept_seeded)
    spec.build()  # refuse bad limits on the driver
    clipping = None if clip is None or clip is False else ServerSpec(clip)
    groups, accepted, skipped, rejections, examples, partitions, duplicates = _run(df, column, spec, clipping)
    by_id: Dict[str, List[Tuple[str, float, float, str]]] = {}
    for (query, mechanism, epsilon, delta), state in groups.items():  # in the CLI's order
        eps, dlt = struct.unpack("<d", epsilon)[0], struct.unpack("<d", delta)[0]
        by_id.setdefault(query, []).append((mechanism, eps, dlt, state))
    cells: List[Tuple[str, Optional[QueryEstimate]]] = []
    total = 0.0
    for q in ids:
        parts = by_id.get(q)
        if not parts:
            cells.append((q, None))
            continue
        pooled = geopriv.Aggregator.from_json(merge_partials([p[3] for p in parts]))
        e = pooled.estimate()
        mechanisms = "+".join(dict.fromkeys(p[0] for p in parts))
        eps, dlt = max(p[1] for p in parts), max(p[2] for p in parts)
        total += eps
        ci = None if e.ci95_low is None or e.ci95_high is None else (e.ci95_low, e.ci95_high)
        cells.append((q, QueryEstimate(q, mechanisms, eps, dlt, e.n, e.mean, e.sum, e.standard_error, ci)))
    answered = sum(1 for _, e in cells if e is not None)
    return SparkMap(
        cells=cells,
        accepted=accepted,
        rejected=sum(rejections.values()),
        skipped=skipped,
        rejections=rejections,
        examples=examples,
        partitions=partitions,
        per_device_epsilon=total if answered else float("nan"),
        accounting=f"sequential composition of {answered} cell releases (each cell's largest ε), "
        "for a device that answered every cell once",
        duplicates=duplicates,
    )


# ------------------------------------------------------------ device maps
# One noisy location per device for the whole map (geopriv.MapRelease):
# every partition feeds its rows to a MapServer restored from the driver's
# empty state and ships back its exact partial state (integer bin counts);
# the driver merges them. Integer counts: bit for bit the single-process
# map, i.e. `geopriv map aggregate` on the same reports.


@dataclasses.dataclass(frozen=True)
class SparkDeviceMap:
    """Result of :func:`aggregate_device_map`."""

    #: The map: ``values`` and ``standard_errors`` per cell (cell
    #: i·len(ys) + k at (xs[i], ys[k])), ``mechanism``,
    #: ``per_device_epsilon``, ``accounting``, ``kernel_lambda``, ``n``;
    #: ``interval_centres`` for an EM map (the λ = 1 map's values: its 95%
    #: intervals are centres ± 1.96·SE), else ``None``.
    #: ``None`` when no report was accepted.
    estimate: Any
    accepted: int
    rejected: int
    #: Rejections by code (``malformed``, ``empty``, ``other-map``,
    #: ``other-mechanism``, ``other-epsilon``, ``invalid-report``,
    #: ``too-large``).
    rejections: Dict[str, int]
    #: The first rejected rows of each partition, with their reasons.
    examples: List[Rejection]
    partitions: int
    #: The merged exact state (``MapServer.to_json()``), to merge with
    #: other runs (``MapServer.from_json``/``merge``). It carries no ids.
    state: str
    #: Reports dropped as replays of an accepted ``report_id`` (``geopriv
    #: map aggregate``'s "duplicate reports dropped"; module docs).
    duplicates: int = 0


def _device_map_partition(empty: str, binary: bool) -> Callable[[int, Iterable[Any]], Iterator[Any]]:
    """The function run on every partition (module-level, so it pickles)."""

    def run(index: int, rows: Iterable[Any]) -> Iterator[Any]:
        import geopriv

        server = geopriv.MapServer.from_json(empty)
        examples: List[Rejection] = []
        batch: List[Any] = []
        first = 0

        def flush() -> None:
            nonlocal first
            result = server.add_all_bytes(batch) if binary else server.add_all_json(batch)
            for r in result.rejections:
                if len(examples) < EXAMPLES_PER_PARTITION:
                    examples.append(Rejection(index, first + r.index, r.code, r.reason))
            first += len(batch)
            batch.clear()

        for row in rows:
            record = _record(row)
            if record is None:  # a null row: rejected by the server as empty
                record = b"" if binary else ""
            # The column is string or binary (checked on the driver).
            batch.append(bytes(record) if binary else record)
            if len(batch) >= _FLUSH:
                flush()
        flush()
        yield (index, server.to_json(), examples, server.status().duplicates)

    return run


def aggregate_device_map(
    df: Any,
    grid: Any,
    mechanism: Any,
    epsilon: float,
    column: Optional[str] = None,
    *,
    max_bins: Optional[int] = None,
    kernel_lambda: Optional[float] = None,
) -> SparkDeviceMap:
    """The map of a DataFrame of device map reports (``MapUpload.json`` as
    strings or ``MapUpload.bytes`` as binary, e.g. from ``geopriv map
    release``) made for ``grid`` (a ``geopriv.MapGrid``) with ``mechanism``
    (a ``geopriv.MapMechanism``) at per-device ``epsilon`` per metre.

    Every partition bins its reports into exact integer counts (a
    ``MapServer`` partial state); the driver merges them, so the map is
    bit-for-bit ``MapServer.estimate(kernel_lambda)`` of one process — and
    ``geopriv map aggregate`` on the same reports — under any
    partitioning. ``kernel_lambda`` ``None`` lets the planner pick the
    debiasing (as the CLI without ``--lambda``). Bad rows (malformed,
    for another grid, mechanism or ε, null) are counted by code in
    ``rejections``; the job does not fail.
    """
    import geopriv

    if max_bins is None:
        server = geopriv.MapServer(grid, mechanism, epsilon)
    else:
        server = geopriv.MapServer.with_max_bins(grid, mechanism, epsilon, max_bins)
    name, binary = _report_column(df, column)
    empty = server.to_json()
    partials = sorted(
        _by_report_id(df.select(name).rdd, False)  # map reports are JSON, also as bytes
        .mapPartitionsWithIndex(_device_map_partition(empty, binary))
        .collect(),
        key=lambda p: p[0],
    )
    examples: List[Rejection] = []
    duplicates = 0
    for _, state, some, dups in partials:
        server.merge(geopriv.MapServer.from_json(state))
        examples.extend(some)
        duplicates += dups
    status = server.status()
    return SparkDeviceMap(
        estimate=server.estimate(kernel_lambda) if status.accepted else None,
        accepted=status.accepted,
        rejected=status.rejected,
        rejections=dict(sorted(status.rejections.items())),
        examples=examples,
        partitions=len(partials),
        state=server.to_json(),
        duplicates=duplicates,
    )
