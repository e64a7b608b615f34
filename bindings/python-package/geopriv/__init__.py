"""geopriv: local geo-privacy with smooth sensitivity.

Devices privatize f(x) (a soft threshold, an interval, a two-way threshold,
a kernel density at a map cell) with a budget ε per unit distance (or
"protected within r metres at level ℓ", ε = ℓ/r: :func:`privacy_radius`,
``GeoMechanism.polyplace_within``) and upload only the release; servers
validate the uploads with a ``ReportPolicy`` and aggregate them exactly
(``ReportServer``, ``Aggregator``, ``GridAggregator``: bit-identical under
any split and merge order).

The API is the uniffi-generated module of the Rust crate ``geopriv-ffi``
(``geopriv._native.geopriv_ffi``) plus this thin layer, which makes it read
like Python (bindings/README.md, "Python"):

* enum values are members, not calls: ``BudgetUnit.PER_DOLLAR``,
  ``MapMechanism.A_PRIORI``, ``Projection.WEB_MERCATOR`` (variants with
  data stay calls: ``BudgetUnit.CUSTOM("per-km")``,
  ``Projection.LOCAL_EQUIRECTANGULAR(lat, lon)``); the old call form
  ``BudgetUnit.PER_DOLLAR()`` still works and returns the same member;
* every ``GeoprivError`` has a ``code`` (``"budget-exceeded"``, or for
  ``InvalidReport`` the rejection code such as ``"malformed"``);
* arrays: ``GeoMechanism.privatize_unmetered(query, ndarray)`` (n simulated
  devices) and ``privatize(ledger, query, ndarray)`` (n releases of one
  device, each charged) return a :class:`ReleaseArray` whose ``values`` is
  a numpy array; ``ReportServer.add_reports(column)`` ingests a release
  array, or a numpy/pandas/Polars column (or list) of JSON or binary
  reports, in one call across the FFI.

Type stubs: ``__init__.pyi`` (checked with mypy in CI). ``geopriv.spark``
aggregates a Spark DataFrame of reports (install the ``spark`` extra).
"""

from __future__ import annotations

import inspect as _inspect
import re as _re
from array import array as _array
from typing import Any, Iterable, Optional

from ._native import geopriv_ffi as _ffi
from ._native.geopriv_ffi import *  # noqa: F401,F403 - the public API
from ._native.geopriv_ffi import __all__ as _ffi_all
from ._native.geopriv_ffi import (
    BatchResult,
    GeoMechanism,
    GeoprivError,
    GeoQuery,
    PrivacyLedger,
    ReleaseArray,
    ReportServer,
)

#: The crate version (the wheel is versioned from bindings/Cargo.toml).
__version__: str = _ffi.library_version()

# ---------------------------------------------------------------------------
# Enums: members, not calls.


def _memberize(enum_cls: Any) -> None:
    """Replace each data-less variant class of a uniffi enum by one member
    (an instance of it). Calling the member returns itself, so code
    written for the generated call form (``BudgetUnit.PER_DOLLAR()``) and
    the generated converters (which call the variant to build a value read
    from Rust) keep working, and values read from Rust *are* the members.
    """
    for name, variant in list(vars(enum_cls).items()):
        if not (isinstance(variant, type) and issubclass(variant, enum_cls)):
            continue
        if len(_inspect.signature(variant.__init__).parameters) != 1:
            continue  # a variant with data stays a class (a call)
        label = f"{enum_cls.__name__}.{name}"
        member_cls = type(
            label,
            (variant,),
            {
                "__call__": lambda self: self,
                "__hash__": lambda self, _l=label: hash(_l),
                "__repr__": lambda self, _l=label: _l,
                "__str__": lambda self, _l=label: _l,
                # Pickles as the attribute lookup (Spark ships it by value).
                "__reduce__": lambda self, _c=enum_cls, _n=name: (getattr, (_c, _n)),
            },
        )
        setattr(enum_cls, name, member_cls())
        # The generated is_NAME/is_name looked the variant class up by name.
        check = lambda self, _v=variant: isinstance(self, _v)  # noqa: E731
        setattr(enum_cls, f"is_{name}", check)
        setattr(enum_cls, f"is_{name.lower()}", check)


for _enum in (_ffi.BudgetUnit, _ffi.MapMechanism, _ffi.MapClipping, _ffi.CentralNoiseKind, _ffi.Projection, _ffi.Growth):
    _memberize(_enum)

# ---------------------------------------------------------------------------
# Errors: a stable `code` on every GeoprivError.

#: The code of each error kind (bindings/README.md, "Error codes").
ERROR_CODES = {
    "InvalidParameter": "invalid-parameter",
    "InvalidInput": "invalid-input",
    "BudgetExceeded": "budget-exceeded",
    "UnitMismatch": "unit-mismatch",
    "LedgerRefused": "ledger-refused",
    "LedgerIo": "ledger-io",
    "InvalidReport": "invalid-report",
    "Internal": "internal",
}
_REJECTION = _re.compile(r"\[([a-z0-9-]+)\]\s*$")


def _error_code(self: BaseException) -> str:
    kind = type(self).__name__
    if kind == "InvalidReport":
        m = _REJECTION.search(str(self))
        if m:
            return m.group(1)
    return ERROR_CODES.get(kind, "internal")


GeoprivError.code = property(  # type: ignore[attr-defined]
    _error_code,
    doc="Stable machine-readable code: the kind (`budget-exceeded`, ...) or, "
    "for InvalidReport, the report's rejection code (`malformed`, ...).",
)

# ---------------------------------------------------------------------------
# Arrays: one call across the FFI per array (packed little-endian f64).


def _numpy() -> Any:
    try:
        import numpy
    except ImportError as e:  # pragma: no cover - depends on the environment
        raise ImportError("geopriv's array functions need numpy: pip install numpy (or 'geopriv[numpy]')") from e
    return numpy


def _is_array(x: Any) -> bool:
    return type(x).__module__ == "numpy" and type(x).__name__ == "ndarray"


def _pack_points(query: Any, xs: Any) -> bytes:
    np = _numpy()
    a = np.ascontiguousarray(xs, dtype="<f8")
    d = query.dimension()
    if a.ndim == 1 and d == 1:
        return a.tobytes()
    if a.ndim == 2 and a.shape[1] == d:
        return a.tobytes()
    raise ValueError(
        f"points must be a 1-D array of values (1-D queries) or an (n, {d}) array, "
        f"not shape {a.shape}; pass a list for one point"
    )


_privatize = GeoMechanism.privatize
_privatize_unmetered = GeoMechanism.privatize_unmetered


def _mech_privatize(self: Any, ledger: Any, query: Any, x: Any) -> Any:
    if _is_array(x):
        return self.privatize_packed(ledger, query, _pack_points(query, x))
    return _privatize(self, ledger, query, x)


def _mech_privatize_unmetered(self: Any, query: Any, x: Any) -> Any:
    if _is_array(x):
        return self.privatize_packed_unmetered(query, _pack_points(query, x))
    return _privatize_unmetered(self, query, x)


_mech_privatize.__doc__ = (
    "Privatize f(x) charged to `ledger` (see the generated docs). With a numpy "
    "array of points (1-D values, or (n, d) rows) this is n releases by ONE device, "
    "each charged (all or nothing), returned as a ReleaseArray."
)
_mech_privatize_unmetered.__doc__ = (
    "`privatize` without a ledger (simulations only). With a numpy array of points "
    "(1-D values or (n, d) rows): n simulated devices, one release each, in one call; "
    "returns a ReleaseArray."
)
GeoMechanism.privatize = _mech_privatize  # type: ignore[method-assign]
GeoMechanism.privatize_unmetered = _mech_privatize_unmetered  # type: ignore[method-assign]


def _release_values(self: Any) -> Any:
    return _numpy().frombuffer(self.values_packed(), dtype="<f8")


ReleaseArray.values = property(_release_values, doc="The released values as a numpy float64 array.")  # type: ignore[attr-defined]
ReleaseArray.__len__ = lambda self: int(self.len())  # type: ignore[method-assign]


def _column_records(column: Any) -> list:
    """A column (pandas/Polars Series, numpy array, any iterable) as a list
    of str/bytes/None, without copying through pandas' object machinery
    more than once."""
    if hasattr(column, "to_list"):  # pandas, Polars
        records = column.to_list()
    elif hasattr(column, "tolist"):  # numpy
        records = column.tolist()
    else:
        records = list(column)
    return records


def _pack_text(records: list) -> "tuple[str, bytes]":
    """(text, lengths) of a column of str: the records back to back as one
    str (it crosses the FFI as one copy) and their UTF-8 byte lengths as
    little-endian i64."""
    joined = "".join(records)
    sizes = _array("q", map(len, records) if joined.isascii() else map(len, map(str.encode, records)))
    if _array("q", [1]).tobytes()[0] != 1:  # pragma: no cover - big-endian host
        sizes.byteswap()
    return joined, sizes.tobytes()


def _pack_records(records: list) -> "tuple[bytes, bytes, bool]":
    """(data, lengths, binary): records back to back and their lengths as
    little-endian i64 (-1 for a missing record, NaN counts as missing)."""
    kinds = set(map(type, records))
    if kinds == {str}:  # fast path: C loops only
        joined = "".join(records)
        data = joined.encode()
        sizes = map(len, records) if len(data) == len(joined) else map(len, map(str.encode, records))
        fast = _array("q", sizes)
    elif kinds == {bytes}:
        data, fast = b"".join(records), _array("q", map(len, records))
    else:
        fast = None
    if fast is not None:
        if _array("q", [1]).tobytes()[0] != 1:  # pragma: no cover - big-endian host
            fast.byteswap()
        return data, fast.tobytes(), kinds == {bytes}
    binary = False
    for r in records:
        if r is not None and not (isinstance(r, float) and r != r):
            binary = isinstance(r, (bytes, bytearray, memoryview))
            break
    parts = []
    lengths = _array("q")
    for i, r in enumerate(records):
        if r is None or (isinstance(r, float) and r != r):
            lengths.append(-1)
            continue
        if binary and not isinstance(r, (bytes, bytearray, memoryview)):
            # bytes(n) of an int n is n zero bytes: a column [b"..", 10**9]
            # allocated a gigabyte before any size check (attack12).
            raise TypeError(
                f"record {i}: a column of binary reports holds a {type(r).__name__}; "
                "only bytes, bytearray, memoryview, None or NaN"
            )
        b = r if isinstance(r, bytes) else (bytes(r) if binary else str(r).encode())
        parts.append(b)
        lengths.append(len(b))
    if lengths.itemsize != 8:  # pragma: no cover - 'q' is 8 bytes on every CPython platform
        raise RuntimeError("array('q') is not 64-bit here")
    if _array("q", [1]).tobytes()[0] != 1:  # pragma: no cover - big-endian host
        lengths.byteswap()
    return b"".join(parts), lengths.tobytes(), binary


def _add_reports(self: Any, reports: Any) -> BatchResult:
    if isinstance(reports, ReleaseArray):
        return self.add_release_array(reports)
    if type(reports).__module__.startswith("polars") and str(getattr(reports, "dtype", "")) in ("String", "Utf8"):
        # Polars string column: lengths and bytes from Polars' own kernels.
        lengths = reports.str.len_bytes().cast(int).fill_null(-1).to_numpy().astype("<i8").tobytes()
        return self.add_json_column(reports.fill_null("").str.join("").item(), lengths)
    records = _column_records(reports)
    if set(map(type, records)) == {str}:  # JSON lines: one str across the FFI
        return self.add_json_column(*_pack_text(records))
    data, lengths, binary = _pack_records(records)
    if binary:
        return self.add_bytes_packed(data, lengths)
    return self.add_json_packed(data, lengths)


_add_reports.__doc__ = (
    "Ingest many reports in one call across the FFI: a ReleaseArray, or a column "
    "(pandas or Polars Series, numpy array, list) of JSON lines (str) or binary "
    "reports (bytes); None/NaN entries are rejected as [empty]. Same outcome as "
    "add_json_batch / add_bytes_batch."
)
ReportServer.add_reports = _add_reports  # type: ignore[attr-defined]


def project_array(latlon: Any, projection: Any) -> Any:
    """Project an (n, 2) array of (lat, lon) degrees to an (n, 2) array of
    [x east, y north] metres in one call (any bad location refuses the
    whole array, naming it)."""
    np = _numpy()
    a = np.ascontiguousarray(latlon, dtype="<f8")
    if a.ndim != 2 or a.shape[1] != 2:
        raise ValueError(f"locations must be an (n, 2) array of (lat, lon), not shape {a.shape}")
    return np.frombuffer(_ffi.project_packed(a.tobytes(), projection), dtype="<f8").reshape(-1, 2)


__all__ = list(_ffi_all) + ["__version__", "ERROR_CODES", "project_array"]
