"""geopriv: local geo-privacy with smooth sensitivity.

Devices privatize f(x) (a soft threshold, an interval, a two-way threshold,
a kernel density at a map cell) with a budget ε per unit distance and
upload only the release; servers validate the uploads with a
``ReportPolicy`` and aggregate them exactly (``Aggregator``,
``GridAggregator``: bit-identical under any split and merge order).

Everything here comes from the uniffi-generated module of the Rust crate
``geopriv-ffi`` (``geopriv._native.geopriv_ffi``, annotated inline; see
``py.typed``). ``geopriv.spark`` aggregates a Spark DataFrame of reports
(install the ``spark`` extra).
"""

from ._native.geopriv_ffi import *  # noqa: F401,F403 - the public API
from ._native.geopriv_ffi import __all__ as _ffi_all
from ._native.geopriv_ffi import library_version as _library_version

#: The crate version (the wheel is versioned from bindings/Cargo.toml).
__version__: str = _library_version()

__all__ = list(_ffi_all) + ["__version__"]
