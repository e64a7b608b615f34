//! # geopriv-ffi: geopriv for Kotlin/JVM (Android), Swift (iOS) and Python
//!
//! A thin [uniffi](https://mozilla.github.io/uniffi-rs) layer over the core
//! crate `geopriv`. It adds no mathematics: every object here wraps a core
//! type, validates what crosses the boundary and turns every failure into a
//! [`GeoprivError`] (an exception in the foreign language, with the core
//! crate's `Display` text as its message).
//!
//! The generated Kotlin, Swift and Python sources are committed under
//! `bindings/kotlin`, `bindings/swift` and `bindings/python`;
//! `bindings/scripts/generate.sh` regenerates them from the built library.
//!
//! ## Nothing panics across the boundary
//!
//! * Inputs are validated before any arithmetic: parameters by the core
//!   constructors, points (length and finiteness) here in `query`, so a
//!   NaN, an infinity, a negative width or an empty list is an
//!   `InvalidParameter`/`InvalidInput` exception, not a number.
//! * Every exported function runs inside `guard`, which catches a panic
//!   (a bug) and reports it as `GeoprivError::Internal`. uniffi's own
//!   scaffolding catches panics too (as a generic internal exception);
//!   `guard` makes the failure typed and its message clear.
//! * Both rely on unwinding, so building this crate with `panic = "abort"`
//!   is refused at compile time.
//!
//! ## Thread safety
//!
//! Queries, mechanisms and policies are immutable. Objects with state (the
//! budget ledger, the aggregators, a seeded mechanism's generator) keep it
//! behind a `Mutex`, so foreign threads can share them; a method never
//! holds two of these locks except ledger-then-generator in
//! `privatize` (ledger, memo table, generator in
//! `MemoizedRelease.release`), and `merge` copies its argument before locking
//! itself, so there is no lock-order deadlock. A lock poisoned by an
//! earlier internal error makes later calls on that object raise
//! `Internal` rather than use a possibly half-updated state. `Send + Sync`
//! of every exported type is asserted at compile time.

#![forbid(unsafe_code)]
#![warn(missing_docs)]

#[cfg(panic = "abort")]
compile_error!(
    "geopriv-ffi must be built with panic = \"unwind\": panics are caught and \
     reported as exceptions, which `abort` would turn into a crash of the host app"
);

use std::sync::{Mutex, MutexGuard};

uniffi::setup_scaffolding!();

mod aggregate;
mod arrays;
mod budget;
mod central;
mod counter;
mod error;
mod geo;
mod growth;
mod longitudinal;
mod map;
mod mechanism;
mod outbox;
mod query;
mod radius;
mod report;
mod server;

pub use aggregate::{Aggregator, CellEstimate, Estimate, GridAggregator, GridPerDeviceTotal};
pub use arrays::{project_packed, ReleaseArray, MAX_PACKED_ELEMENTS};
pub use budget::{BudgetPolicy, BudgetShare, BudgetStatus, BudgetUnit, PrivacyLedger};
pub use central::CentralNoiseKind;
pub use counter::{CounterError, MonotonicCounter};
pub use error::GeoprivError;
pub use geo::{project, Projection};
pub use growth::Growth;
pub use longitudinal::{
    plan_schedule, schedule_noise_constant, MemoizedRelease, MemoizedReport, ReportSchedule,
    SchedulePlan,
};
pub use map::{
    plan_map, MapBatch, MapEstimate, MapGrid, MapMechanism, MapPlan, MapPrediction, MapRejection,
    MapRelease, MapServer, MapServerStatus, MapUpload,
};
pub use mechanism::{GeoMechanism, MechanismName, PrivateReport};
pub use outbox::{OutboxUploader, PendingUpload, RejectedUpload, UploadBatch, UploadVerdict};
pub use query::{GeoQuery, QueryFamily};
pub use radius::{privacy_radius, privacy_radius_of, PrivacyRadius};
pub use report::{ReceivedReport, ReportPolicy};
pub use server::{
    BatchResult, ClipBound, ClipSummary, GroupEstimate, IngestCounts, InputFormat,
    MedianOfMeansEstimate, RejectedRecord, ReportServer, ServerConfig,
};

/// The version of the geopriv-ffi library, e.g. `"0.1.0"`. Lets an app
/// check at run time that the loaded native library matches its bindings.
#[uniffi::export]
pub fn library_version() -> String {
    env!("CARGO_PKG_VERSION").to_string()
}

/// Run `f`, turning a panic into [`GeoprivError::Internal`].
///
/// Every exported function goes through here. A panic means a bug in
/// geopriv (inputs are validated first); it must surface as an exception
/// with a message, never unwind into foreign frames or abort the app.
///
/// Why a closure per export and not nothing: uniffi's scaffolding does catch
/// panics, but it reports them as its own untyped error (`InternalException`
/// in Kotlin, `InternalError` in Python), outside `GeoprivException`, so an
/// app that handles our one error type would crash on it. The closures are
/// the one place where that mapping happens; the error *conversion* from the
/// core (`From<geopriv::Error> for GeoprivError`, in `error.rs`) is the one
/// mapping of error kinds. Decision recorded for issue 9.
pub(crate) fn guard<T>(f: impl FnOnce() -> Result<T, GeoprivError>) -> Result<T, GeoprivError> {
    // AssertUnwindSafe: immutable objects cannot be broken by a panic, and
    // stateful ones keep their state in a Mutex, which a panic poisons;
    // `lock` then reports Internal instead of reading it.
    match std::panic::catch_unwind(std::panic::AssertUnwindSafe(f)) {
        Ok(result) => result,
        Err(payload) => {
            let what = payload
                .downcast_ref::<&str>()
                .map(|s| (*s).to_string())
                .or_else(|| payload.downcast_ref::<String>().cloned())
                .unwrap_or_else(|| "unknown panic".to_string());
            Err(GeoprivError::Internal(format!(
                "internal error in geopriv (please report it): {what}"
            )))
        }
    }
}

/// Lock `m`, reporting a poisoned lock (a panic, i.e. a bug, happened while
/// it was held, caught by [`guard`]) as [`GeoprivError::Internal`] instead
/// of using a state that may be half-updated.
///
/// Refused (`InvalidInput`) on a thread that is inside the app's
/// [`counter::MonotonicCounter`] callback: the ledger's lock (and perhaps a
/// generator's) is held by the call that invoked the counter, so taking a
/// lock there would wait for itself forever (attack12, docs/ATTACK-12.md:
/// a counter whose `advance_to` called `ledger.status()` hung the Python
/// host).
pub(crate) fn lock<'a, T>(m: &'a Mutex<T>, what: &str) -> Result<MutexGuard<'a, T>, GeoprivError> {
    outside_counter(what)?;
    m.lock().map_err(|_| {
        GeoprivError::Internal(format!(
            "the {what} is unusable after an earlier internal error (please report it)"
        ))
    })
}

/// `InvalidInput` on a thread that is inside the app's
/// [`counter::MonotonicCounter`] callback, where the ledger's file lock (and
/// the calling object's own lock) is held: [`lock`] and the file ledgers'
/// constructors ask first. A constructor there waited the file lock's 10 s
/// and then failed `LedgerBusy` (attack12 O4).
pub(crate) fn outside_counter(what: &str) -> Result<(), GeoprivError> {
    if counter::inside_counter() {
        return Err(GeoprivError::InvalidInput(format!(
            "the {what} was called from inside a MonotonicCounter's read or advance_to, \
             which run while the ledger is locked: a counter must not call geopriv objects"
        )));
    }
    Ok(())
}

/// Compile-time check that every exported object can be shared between
/// threads (uniffi requires it too; this names the types in one place).
#[allow(dead_code)]
fn assert_thread_safe() {
    fn is_send_sync<T: Send + Sync>() {}
    is_send_sync::<GeoQuery>();
    is_send_sync::<GeoMechanism>();
    is_send_sync::<PrivacyLedger>();
    is_send_sync::<Aggregator>();
    is_send_sync::<GridAggregator>();
    is_send_sync::<ReportPolicy>();
    is_send_sync::<ReportServer>();
    is_send_sync::<ServerConfig>();
    is_send_sync::<GeoprivError>();
    is_send_sync::<CounterError>();
    is_send_sync::<Growth>();
    is_send_sync::<Projection>();
    is_send_sync::<MapRelease>();
    is_send_sync::<MapServer>();
    is_send_sync::<ReleaseArray>();
    is_send_sync::<ReportSchedule>();
    is_send_sync::<MemoizedRelease>();
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn guard_turns_a_panic_into_an_internal_error() {
        let r: Result<f64, _> = guard(|| panic!("boom"));
        match r {
            Err(GeoprivError::Internal(msg)) => assert!(msg.contains("boom"), "{msg}"),
            other => panic!("expected Internal, got {other:?}"),
        }
        let formatted: Result<f64, _> = guard(|| panic!("x = {}", 3));
        assert!(formatted.unwrap_err().to_string().contains("x = 3"));
    }

    #[test]
    fn guard_passes_results_through() {
        assert_eq!(guard(|| Ok(2.0)).unwrap(), 2.0);
        assert!(matches!(
            guard::<f64>(|| Err(GeoprivError::InvalidInput("bad".into()))),
            Err(GeoprivError::InvalidInput(_))
        ));
    }

    #[test]
    fn version_is_the_crate_version() {
        assert_eq!(library_version(), env!("CARGO_PKG_VERSION"));
    }
}
