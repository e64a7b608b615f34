"""Type stubs of the ``geopriv`` package: the generated module's API
(annotated inline in ``geopriv._native.geopriv_ffi``) plus what the Python
layer of ``__init__.py`` adds or changes: enum members, ``GeoprivError.code``
and the array paths. Checked with mypy on the README's Python and the
examples (bindings/scripts/test-python.sh)."""

import typing
from typing import Any, ClassVar, Dict, Optional, Sequence, Union, overload

from ._native import geopriv_ffi as _ffi
from ._native.geopriv_ffi import (
    InternalError as InternalError,
    MechanismName as MechanismName,
    QueryFamily as QueryFamily,
    Growth as Growth,
    InputFormat as InputFormat,
    RejectedRecord as RejectedRecord,
    BatchResult as BatchResult,
    BudgetPeriod as BudgetPeriod,
    BudgetPolicy as BudgetPolicy,
    BudgetShare as BudgetShare,
    BudgetStatus as BudgetStatus,
    Estimate as Estimate,
    CellEstimate as CellEstimate,
    ClipBound as ClipBound,
    ClipSummary as ClipSummary,
    GridPerDeviceTotal as GridPerDeviceTotal,
    MedianOfMeansEstimate as MedianOfMeansEstimate,
    GroupEstimate as GroupEstimate,
    IngestCounts as IngestCounts,
    MapRejection as MapRejection,
    MapBatch as MapBatch,
    MapEstimate as MapEstimate,
    MapClipInfo as MapClipInfo,
    MapGrid as MapGrid,
    MapPrediction as MapPrediction,
    MapPlan as MapPlan,
    MapServerStatus as MapServerStatus,
    MapUpload as MapUpload,
    MemoizedReport as MemoizedReport,
    SchedulePlan as SchedulePlan,
    PrivacyRadius as PrivacyRadius,
    PrivateReport as PrivateReport,
    PendingUpload as PendingUpload,
    RejectedUpload as RejectedUpload,
    UploadBatch as UploadBatch,
    UploadVerdict as UploadVerdict,
    OutboxUploader as OutboxUploader,
    OutboxUploaderProtocol as OutboxUploaderProtocol,
    ReceivedReport as ReceivedReport,
    central_quantile as central_quantile,
    central_smooth_sensitivity as central_smooth_sensitivity,
    instance_based_chain_scales as instance_based_chain_scales,
    library_version as library_version,
    plan_map as plan_map,
    report_id_of_frame as report_id_of_frame,
    report_id_of_json as report_id_of_json,
    plan_schedule as plan_schedule,
    schedule_noise_constant as schedule_noise_constant,
    privacy_radius as privacy_radius,
    privacy_radius_of as privacy_radius_of,
    project as project,
    project_packed as project_packed,
    smooth_noisy_max_beta as smooth_noisy_max_beta,
    smooth_noisy_max_select as smooth_noisy_max_select,
    Aggregator as Aggregator,
    AggregatorProtocol as AggregatorProtocol,
    PrivacyLedger as PrivacyLedger,
    PrivacyLedgerProtocol as PrivacyLedgerProtocol,
    MonotonicCounter as MonotonicCounter,
    GeoQuery as GeoQuery,
    GeoQueryProtocol as GeoQueryProtocol,
    ReleaseArrayProtocol as ReleaseArrayProtocol,
    GeoMechanismProtocol as GeoMechanismProtocol,
    GridAggregator as GridAggregator,
    GridAggregatorProtocol as GridAggregatorProtocol,
    MapRelease as MapRelease,
    MapReleaseProtocol as MapReleaseProtocol,
    MapServer as MapServer,
    MapServerProtocol as MapServerProtocol,
    MemoizedRelease as MemoizedRelease,
    MemoizedReleaseProtocol as MemoizedReleaseProtocol,
    ReportSchedule as ReportSchedule,
    ReportScheduleProtocol as ReportScheduleProtocol,
    ReportPolicy as ReportPolicy,
    ReportPolicyProtocol as ReportPolicyProtocol,
    ReportServerProtocol as ReportServerProtocol,
    ServerConfig as ServerConfig,
    ServerConfigProtocol as ServerConfigProtocol,
)

__version__: str
#: The code of each error kind (bindings/README.md, "Error codes").
ERROR_CODES: Dict[str, str]

class BudgetUnit(_ffi.BudgetUnit):
    PER_METRE: ClassVar[BudgetUnit]  # type: ignore[assignment]  # a member, not the variant class
    PER_DOLLAR: ClassVar[BudgetUnit]  # type: ignore[assignment]  # a member, not the variant class
    LOCAL_DP: ClassVar[BudgetUnit]  # type: ignore[assignment]  # a member, not the variant class

class MapMechanism(_ffi.MapMechanism):
    A_PRIORI: ClassVar[MapMechanism]  # type: ignore[assignment]  # a member, not the variant class
    VECTOR_LAPLACE: ClassVar[MapMechanism]  # type: ignore[assignment]  # a member, not the variant class
    COMPOSITION: ClassVar[MapMechanism]  # type: ignore[assignment]  # a member, not the variant class

class MapClipping(_ffi.MapClipping):
    DEFAULT: ClassVar[MapClipping]  # type: ignore[assignment]  # a member, not the variant class
    OFF: ClassVar[MapClipping]  # type: ignore[assignment]  # a member, not the variant class

class CentralNoiseKind(_ffi.CentralNoiseKind):
    POLY_PLACE: ClassVar[CentralNoiseKind]  # type: ignore[assignment]  # a member, not the variant class
    STUDENT_T: ClassVar[CentralNoiseKind]  # type: ignore[assignment]  # a member, not the variant class
    CAUCHY: ClassVar[CentralNoiseKind]  # type: ignore[assignment]  # a member, not the variant class

class Projection(_ffi.Projection):
    WEB_MERCATOR: ClassVar[Projection]  # type: ignore[assignment]  # a member, not the variant class

class _GeoprivErrorBase(Exception):
    @property
    def code(self) -> str:
        """Stable code: the kind (``budget-exceeded``, ...) or, for
        InvalidReport, the rejection code (``malformed``, ...)."""

class _InvalidParameter(_GeoprivErrorBase): ...
class _InvalidInput(_GeoprivErrorBase): ...
class _BudgetExceeded(_GeoprivErrorBase): ...
class _UnitMismatch(_GeoprivErrorBase): ...
class _LedgerRefused(_GeoprivErrorBase): ...
class _LedgerIo(_GeoprivErrorBase): ...
class _InvalidReport(_GeoprivErrorBase): ...
class _Internal(_GeoprivErrorBase): ...

class GeoprivError(_GeoprivErrorBase):
    InvalidParameter: ClassVar[type[_InvalidParameter]]
    InvalidInput: ClassVar[type[_InvalidInput]]
    BudgetExceeded: ClassVar[type[_BudgetExceeded]]
    UnitMismatch: ClassVar[type[_UnitMismatch]]
    LedgerRefused: ClassVar[type[_LedgerRefused]]
    LedgerIo: ClassVar[type[_LedgerIo]]
    InvalidReport: ClassVar[type[_InvalidReport]]
    Internal: ClassVar[type[_Internal]]

class CounterError(Exception):
    """What an app's MonotonicCounter raises when its counter cannot be
    read or advanced (the ledger call then raises GeoprivError.LedgerIo)."""
    Unavailable: ClassVar[type[_CounterUnavailable]]

class _CounterUnavailable(CounterError):
    detail: str
    def __init__(self, detail: str) -> None: ...

class ReleaseArray(_ffi.ReleaseArray):
    @property
    def values(self) -> Any:
        """The released values, a numpy float64 array."""
    def __len__(self) -> int: ...

class GeoMechanism(_ffi.GeoMechanism):
    @overload
    def privatize(self, ledger: PrivacyLedger, query: GeoQuery, x: Sequence[float]) -> PrivateReport: ...
    @overload
    def privatize(self, ledger: PrivacyLedger, query: GeoQuery, x: Any) -> ReleaseArray: ...
    @overload
    def privatize_unmetered(self, query: GeoQuery, x: Sequence[float]) -> PrivateReport: ...
    @overload
    def privatize_unmetered(self, query: GeoQuery, x: Any) -> ReleaseArray: ...
    @staticmethod
    def polyplace(epsilon: float) -> GeoMechanism: ...
    @staticmethod
    def polyplace_within(radius: float, level: float) -> GeoMechanism: ...
    @staticmethod
    def polyplace_with(epsilon: float, gamma_share: float) -> GeoMechanism: ...
    @staticmethod
    def student_t(epsilon: float) -> GeoMechanism: ...
    @staticmethod
    def student_t_with(epsilon: float, dof: float, smoothness_share: float) -> GeoMechanism: ...
    @staticmethod
    def cauchy(epsilon: float) -> GeoMechanism: ...
    @staticmethod
    def cauchy_with(epsilon: float, k: float, smoothness_share: float) -> GeoMechanism: ...
    @staticmethod
    def laplace(epsilon: float, delta: float) -> GeoMechanism: ...
    @staticmethod
    def laplace_with(epsilon: float, delta: float, smoothness_share: float) -> GeoMechanism: ...
    @staticmethod
    def global_laplace(epsilon: float) -> GeoMechanism: ...
    @staticmethod
    def noise_a_priori(epsilon: float) -> GeoMechanism: ...
    @staticmethod
    def local_dp(epsilon: float) -> GeoMechanism: ...
    def with_unit(self, unit: _ffi.BudgetUnit) -> GeoMechanism: ...
    def seeded(self, seed: int) -> GeoMechanism: ...

class ReportServer(_ffi.ReportServer):
    def add_reports(self, reports: Any) -> BatchResult:
        """A ReleaseArray, or a column (pandas/Polars Series, numpy array,
        list) of JSON lines or binary reports, in one call."""

def project_array(latlon: Any, projection: _ffi.Projection) -> Any:
    """(n, 2) lat/lon degrees to (n, 2) metres, in one call."""
