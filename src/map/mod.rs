//! Maps and query sets under one per-device budget (docs/MATH.md §9).
//!
//! A device that answers a whole map (m kernel cells, a ladder of
//! thresholds) spends a *per-device total* ε, charged once to its ledger.
//! The module offers four ways to spend it ([`MapMechanism`]): per-query
//! composition at ε/m, vector global Laplace (scale L1/ε with a certified
//! ℓ1 constant), k sampled queries at ε/k, and one noisy location (noise a
//! priori) from which the server computes plain, partially or fully
//! debiased maps ([`DebiasKernel`]) by FFT over exact integer bin counts.
//! The [planner](plan) predicts each one's error and picks one.
//!
//! Device, three lines:
//!
//! ```
//! use geopriv::map::{KdeGrid, MapMechanism, MapRelease, QuerySet};
//! use geopriv::device::budget::{BudgetPolicy, BudgetUnit, PrivacyBudget};
//! # let mut budget = PrivacyBudget::new(BudgetPolicy::new(BudgetUnit::PerMetre, 1e-3, 0.0)?);
//! let map = MapRelease::new(QuerySet::Kde(KdeGrid::square(20_000.0, 61)?), MapMechanism::APriori, 1e-3)?
//!     .with_unit(BudgetUnit::PerMetre);
//! let report = map.release_secure(&mut budget, &[5_000.0, 7_500.0])?;   // charges 1e-3 once
//! let line = serde_json::to_string(&report).unwrap();                   // one JSON line to upload
//! # let _ = line;
//! # Ok::<(), geopriv::Error>(())
//! ```

mod bins;
#[cfg(feature = "std")]
mod deconv;
#[cfg(feature = "std")]
mod district_channel;
#[cfg(feature = "std")]
mod districts;
#[cfg(feature = "std")]
mod fft;
#[cfg(feature = "std")]
mod ingest;
#[cfg(feature = "std")]
mod intervals;
mod kernel;
mod ladder;
#[cfg(feature = "std")]
mod planner;
mod query_set;
mod release;
#[cfg(feature = "std")]
mod server;

pub use bins::{
    check_bin_moments, BinMoments, BinSpec, BinnedCounts, MomentRow, MOMENT_OFFSET_BITS,
};
#[cfg(feature = "std")]
pub use deconv::{EmDeconvolution, EmMap, EmOptions};
#[cfg(feature = "std")]
pub use district_channel::{
    DistrictChannel, CHANNEL_BETA, MAX_CHANNEL_DISTRICTS, PLANNER_CHANNEL_SEED,
};
#[cfg(feature = "std")]
pub use districts::{DistrictSet, MAX_DISTRICTS};
#[cfg(feature = "std")]
pub use fft::{
    direct_map, wrap_guard_radius, DiscretisationBound, FftMapper, MapEstimate, MomentRounding,
    WRAP_GUARD_SHARE,
};
#[cfg(feature = "std")]
pub use ingest::{
    ingest_map_reports, ingest_map_reports_once, ingest_map_reports_parallel,
    ingest_map_stream_once, MapClip, MapClipSummary, MapCounts, MAX_MAP_INGEST_THREADS,
};
#[cfg(feature = "std")]
pub use intervals::{
    bias_aware_critical_value, bias_aware_standard_error, effective_reports,
    em_spread_standard_errors, em_standard_errors, interval_coverage, kernel_standard_error,
    split_by_effective_reports, student_t_975, thin_cell_variance, EFFECTIVE_REPORTS_THRESHOLD,
    EM_BIAS_FACTOR, EM_PATH_BIAS_FACTOR, PLUG_IN_SHARE, VARIANCE_SMOOTHING,
};
pub use kernel::DebiasKernel;
pub use ladder::LadderDebias;
#[cfg(feature = "std")]
pub use planner::{
    plan, Plan, Prediction, EM_ESTIMATED_UP_TO_EPS_H, EM_ONLY_ABOVE_EPS_H,
    EM_ORDERED_AT_LOG_CENTRE, LAMBDAS,
};
pub use query_set::{KdeGrid, L1Bound, QuerySet, RampLadder, RampQuery};
pub use release::{
    set_tag, MapMechanism, MapRelease, MapReport, PerDeviceTotal, LOCATION_GRID_BITS,
};
#[cfg(feature = "std")]
pub use server::{MapAggregator, DEFAULT_MAX_BINS};
