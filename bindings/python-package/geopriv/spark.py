"""Aggregate geopriv reports stored in a Spark DataFrame.

A DataFrame with one column of reports (JSON lines as strings, or the
binary form ``PrivateReport.bytes`` as binary) becomes one estimate per
query id (:func:`aggregate`) or one estimate per cell of a map
(:func:`aggregate_map`)::

    from pyspark.sql import SparkSession
    from geopriv.spark import aggregate

    spark = SparkSession.builder.getOrCreate()
    result = aggregate(spark.read.text("reports/*.jsonl"), max_epsilon=1e-3)
    for e in result.estimates:
        print(e.query, e.n, e.mean, e.ci95)
    print(result.rejections)  # {"malformed": 3, "epsilon-out-of-policy": 1}

How it runs (docs/MATH.md §5 for the exact sums):

1. ``mapPartitionsWithIndex``: every partition validates its rows with a
   ``ReportPolicy`` built on the executor, routes the accepted values by
   query id into the core's exact ``Aggregator`` and emits its partial
   state (``Aggregator.to_json()``: count, sum and sum of squares as exact
   integers) together with its rejection counts. A bad row (malformed,
   truncated, wrong version, out of policy, null) is rejected with its
   reason and counted; it never fails the job.
2. The driver collects the partials and merges them in a fixed order
   (a balanced binary tree over the partition indices). The sums are
   exact, so the result is bit-for-bit the one of a single process
   (``geopriv aggregate`` on the same reports) under any partitioning.

Executors need the ``geopriv`` wheel installed in the Python that Spark
runs (``spark.pyspark.python``); see bindings/README.md ("Spark").
"""

from __future__ import annotations

import dataclasses
import re
from typing import Any, Callable, Dict, Iterable, Iterator, List, Optional, Sequence, Tuple

__all__ = [
    "PolicySpec",
    "QueryEstimate",
    "Rejection",
    "SparkAggregate",
    "SparkMap",
    "aggregate",
    "aggregate_map",
    "merge_partials",
]

#: Rejected rows kept with their reason per partition (all are counted).
EXAMPLES_PER_PARTITION = 5
#: Values buffered per query before they cross into Rust in one call.
_FLUSH = 65536
_CODE = re.compile(r"\[([a-z0-9-]+)\]\s*$")


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

    def build(self) -> Any:
        """The ``geopriv.ReportPolicy`` this spec describes."""
        import geopriv

        policy = geopriv.ReportPolicy(self.max_epsilon, self.max_delta)
        if self.allow_ldp is not None:
            policy = policy.allow_ldp(self.allow_ldp)
        if self.only_queries is not None:
            policy = policy.only_queries([geopriv.GeoQuery.from_id(q) for q in self.only_queries])
        return policy


@dataclasses.dataclass(frozen=True)
class QueryEstimate:
    """The estimate for one query id: the fields of ``geopriv aggregate``'s
    output lines (``ci95`` is ``None`` below 2 reports)."""

    query: str
    n: int
    mean: float
    sum: float
    standard_error: Optional[float]
    ci95: Optional[Tuple[float, float]]

    def to_dict(self) -> Dict[str, Any]:
        """The CLI's JSON object for this estimate."""
        return {
            "query": self.query,
            "n": self.n,
            "mean": self.mean,
            "sum": self.sum,
            "standard_error": self.standard_error,
            "ci95": None if self.ci95 is None else list(self.ci95),
        }


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

    #: One estimate per query id with at least one accepted report, sorted by id.
    estimates: List[QueryEstimate]
    accepted: int
    rejected: int
    #: Rejections by code.
    rejections: Dict[str, int]
    #: The first rejected rows of each partition, with their reasons.
    examples: List[Rejection]
    partitions: int
    #: The merged exact state per query id (``Aggregator.to_json()``), to
    #: merge with other runs (``Aggregator.from_json``/``merge``).
    states: Dict[str, str]

    def to_json_lines(self) -> str:
        """The estimates in the format of ``geopriv aggregate`` (one JSON
        object per line, sorted by query id)."""
        import json

        return "".join(json.dumps(e.to_dict(), separators=(",", ":")) + "\n" for e in self.estimates)

    def to_dataframe(self, spark: Any) -> Any:
        """The estimates as a Spark DataFrame (one row per query id)."""
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
                StructField("n", LongType(), False),
                StructField("mean", DoubleType(), False),
                StructField("sum", DoubleType(), False),
                StructField("standard_error", DoubleType(), True),
                StructField("ci95", ArrayType(DoubleType(), False), True),
            ]
        )
        rows = [tuple(e.to_dict().values()) for e in self.estimates]
        return spark.createDataFrame(rows, schema)


@dataclasses.dataclass(frozen=True)
class SparkMap:
    """Result of :func:`aggregate_map`: one cell per query, in the order
    the queries were given (``estimate`` is ``None`` for a cell without
    reports); a density map over ``GridAggregator.kde_grid``'s queries is
    row-major in y, then x."""

    cells: List[Tuple[str, Optional[QueryEstimate]]]
    accepted: int
    rejected: int
    rejections: Dict[str, int]
    examples: List[Rejection]
    partitions: int

    def means(self) -> List[Optional[float]]:
        """The estimated mean of each cell (``None`` without reports)."""
        return [None if e is None else e.mean for _, e in self.cells]


def rejection_code(error: BaseException) -> str:
    """The stable code at the end of a geopriv rejection message
    (``... [malformed]`` gives ``malformed``); the exception's class name
    for other errors."""
    m = _CODE.search(str(error))
    return m.group(1) if m else type(error).__name__


# TODO(issue 12, clipping): the server-hardening work adds a per-query
# clipping policy (bounded influence) to the core and the CLI. When the
# bindings expose it, build it in `PolicySpec.build` (or next to it) and
# apply it here, to every accepted report before it is aggregated, so that
# Spark and `geopriv aggregate` keep giving the same bits. Until then
# passing `clip=` raises NotImplementedError rather than silently
# aggregating unclipped values.
def _clip_hook(clip: Any) -> Optional[Callable[[Any], float]]:
    """The value transform for the clipping policy ``clip`` (none yet)."""
    if clip is None:
        return None
    raise NotImplementedError(
        "clipping (bounded influence) is not available in the bindings yet; "
        "aggregate without `clip` (see the TODO in geopriv/spark.py)"
    )


def _partition(
    spec: PolicySpec, binary: bool, clip: Any
) -> Callable[[int, Iterable[Any]], Iterator[Tuple[int, Dict[str, str], int, Dict[str, int], List[Rejection]]]]:
    """The function run on every partition (module-level, so it pickles)."""

    def run(index: int, rows: Iterable[Any]) -> Iterator[Any]:
        import geopriv

        policy = spec.build()
        accept = policy.accept_bytes if binary else policy.accept_json
        transform = _clip_hook(clip)
        aggregators: Dict[str, Any] = {}
        pending: Dict[str, List[float]] = {}
        rejections: Dict[str, int] = {}
        examples: List[Rejection] = []
        accepted = 0

        def reject(row: int, code: str, reason: str) -> None:
            rejections[code] = rejections.get(code, 0) + 1
            if len(examples) < EXAMPLES_PER_PARTITION:
                examples.append(Rejection(index, row, code, reason))

        def flush(query_id: str, values: List[float]) -> None:
            agg = aggregators.get(query_id)
            if agg is None:
                agg = aggregators[query_id] = geopriv.Aggregator()
            agg.add_values(values)  # finite: the policy checked every value
            values.clear()

        for row_number, row in enumerate(rows):
            record = row[0] if isinstance(row, (tuple, list)) else row
            if record is None:
                reject(row_number, "empty", "null report [empty]")
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
            values = pending.get(report.query_id)
            if values is None:
                values = pending[report.query_id] = []
            values.append(value)
            accepted += 1
            if len(values) >= _FLUSH:
                flush(report.query_id, values)
        for query_id, values in pending.items():
            if values:
                flush(query_id, values)
        states = {q: a.to_json() for q, a in aggregators.items()}
        yield (index, states, accepted, rejections, examples)

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


def _report_column(df: Any, column: Optional[str]) -> Tuple[str, bool]:
    """The column holding the reports and whether it is binary."""
    from pyspark.sql.types import BinaryType, StringType

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


def _run(df: Any, column: Optional[str], spec: PolicySpec, clip: Any) -> Tuple[Dict[str, str], int, Dict[str, int], List[Rejection], int]:
    _clip_hook(clip)  # refuse an unsupported clip on the driver, before any job
    name, binary = _report_column(df, column)
    rdd = df.select(name).rdd
    partials = sorted(rdd.mapPartitionsWithIndex(_partition(spec, binary, clip)).collect(), key=lambda p: p[0])
    by_query: Dict[str, List[str]] = {}
    rejections: Dict[str, int] = {}
    examples: List[Rejection] = []
    accepted = 0
    for _, states, n, rejected, some in partials:
        for q, s in states.items():
            by_query.setdefault(q, []).append(s)
        accepted += n
        for code, count in rejected.items():
            rejections[code] = rejections.get(code, 0) + count
        examples.extend(some)
    merged = {q: merge_partials(s) for q, s in sorted(by_query.items())}
    return merged, accepted, dict(sorted(rejections.items())), examples, len(partials)


def _estimate(query_id: str, state: str) -> Optional[QueryEstimate]:
    import geopriv

    e = geopriv.Aggregator.from_json(state).estimate()
    if e is None:
        return None
    ci = None if e.ci95_low is None or e.ci95_high is None else (e.ci95_low, e.ci95_high)
    return QueryEstimate(query_id, e.n, e.mean, e.sum, e.standard_error, ci)


def aggregate(
    df: Any,
    column: Optional[str] = None,
    *,
    max_epsilon: float = 1.0,
    max_delta: float = 1e-4,
    allow_ldp: Optional[float] = None,
    only_queries: Optional[Sequence[str]] = None,
    clip: Any = None,
) -> SparkAggregate:
    """One estimate per query id from a DataFrame of reports.

    ``column`` (default: the only column) holds JSON reports (string) or
    binary reports (binary). The policy flags are those of ``geopriv
    aggregate`` (same defaults); ``only_queries`` lists the canonical ids
    to accept. ``clip`` is reserved for the clipping policy of the
    server-hardening work and raises ``NotImplementedError`` for now.
    Rows that fail validation are counted by code in ``rejections`` (the
    first few of each partition with their reason in ``examples``).
    """
    spec = PolicySpec(max_epsilon, max_delta, allow_ldp, None if only_queries is None else tuple(only_queries))
    spec.build()  # refuse bad limits on the driver
    states, accepted, rejections, examples, partitions = _run(df, column, spec, clip)
    estimates = [e for e in (_estimate(q, s) for q, s in states.items()) if e is not None]
    return SparkAggregate(
        estimates=estimates,
        accepted=accepted,
        rejected=sum(rejections.values()),
        rejections=rejections,
        examples=examples,
        partitions=partitions,
        states=states,
    )


def aggregate_map(
    df: Any,
    queries: Sequence[Any],
    column: Optional[str] = None,
    *,
    max_epsilon: float = 1.0,
    max_delta: float = 1e-4,
    allow_ldp: Optional[float] = None,
    clip: Any = None,
) -> SparkMap:
    """One estimate per cell of a map: ``queries`` are ``GeoQuery`` objects
    or canonical ids (e.g. ``GridAggregator.kde_grid(xs, ys, h).query_ids()``);
    reports of other queries are rejected (``[unknown-query]``). The cells
    equal those of a ``GridAggregator`` over the same queries fed the same
    reports, bit for bit."""
    ids = tuple(q if isinstance(q, str) else q.query_id() for q in queries)
    result = aggregate(
        df,
        column,
        max_epsilon=max_epsilon,
        max_delta=max_delta,
        allow_ldp=allow_ldp,
        only_queries=ids,
        clip=clip,
    )
    by_id = {e.query: e for e in result.estimates}
    return SparkMap(
        cells=[(q, by_id.get(q)) for q in ids],
        accepted=result.accepted,
        rejected=result.rejected,
        rejections=result.rejections,
        examples=result.examples,
        partitions=result.partitions,
    )
