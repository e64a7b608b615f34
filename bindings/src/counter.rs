//! The platform's monotonic counter, implemented by the app: a uniffi
//! callback interface ([`MonotonicCounter`]) over the core's
//! `geopriv::device::budget::MonotonicCounter`, and the ledger
//! constructors that take one (`PrivacyLedger.open_with_counter`,
//! `create_with_counter`, `open_or_create_with_counter`).
//!
//! Why the app implements it: the counters that survive a rollback of the
//! app's files live in the platform (an Android keystore or StrongBox
//! counter, the iOS Secure Enclave or DeviceCheck, a TPM NV counter, a
//! server the app trusts), reachable from Kotlin or Swift, not from Rust.
//! A ledger file opened with one is refused when its release count is
//! below the counter (deleted, restored from a backup, rolled back), and
//! the counter is advanced to the new count after every durable charge
//! (docs/MATH.md §8.3, docs/ATTACK-10.md O1).
//!
//! Failures of the app's counter never panic: what its methods throw (a
//! [`CounterError`] or any other exception) becomes a `LedgerIo` error of
//! the call that needed the counter, with the app's message escaped; a
//! counter that reads lower than a value it was read at or advanced to
//! within this ledger's life is refused (`LedgerRefused`).

use std::cell::Cell;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use geopriv::device::budget::FileLedger;
use geopriv::server::escape::Untrusted;

use crate::budget::BudgetPolicy;
use crate::{guard, GeoprivError, PrivacyLedger};

/// A failure of the app's monotonic counter (the keystore is locked, the
/// TPM is busy, the counter service is unreachable). Thrown by the app's
/// [`MonotonicCounter`] implementation; the ledger call that needed the
/// counter then fails with `GeoprivError.LedgerIo` carrying `detail`
/// (nothing is released).
///
/// ```kotlin
/// throw CounterException.Unavailable("StrongBox is locked")
/// ```
#[derive(Debug, Clone, PartialEq, Eq, uniffi::Error)]
pub enum CounterError {
    /// The counter could not be read or advanced now; `detail` says why.
    Unavailable {
        /// What went wrong, for the log (escaped before it is shown).
        detail: String,
    },
}

impl std::fmt::Display for CounterError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            CounterError::Unavailable { detail } => f.write_str(detail),
        }
    }
}

impl std::error::Error for CounterError {}

/// Any other exception the app's counter throws (a `RuntimeException`, a
/// Python `ValueError`) arrives here, as `Unavailable` with its text:
/// never a panic.
impl From<uniffi::UnexpectedUniFFICallbackError> for CounterError {
    fn from(e: uniffi::UnexpectedUniFFICallbackError) -> Self {
        CounterError::Unavailable { detail: e.reason }
    }
}

/// A platform monotonic counter, implemented by the app (Kotlin interface,
/// Swift protocol, Python class): a value that only grows and that is not
/// rolled back with the app's files. A `PrivacyLedger` opened with one
/// (`open_or_create_with_counter`) refuses a ledger file whose release
/// count is below `read()` and calls `advance_to(n)` with the file's new
/// release count `n` after every durable charge.
///
/// Contract: `read()` returns the value; `advance_to(v)` raises it to at
/// least `v` and never lowers it (a counter that moves in steps of one,
/// like a TPM NV counter, increments until it reaches `v`). Both are called
/// with the ledger's lock held: they must not call geopriv objects (such a
/// call raises `InvalidInput`, and the ledger call then fails with
/// `LedgerIo`). Throw `CounterError.Unavailable` (or any exception) when
/// the counter cannot be reached; the ledger call then fails with
/// `LedgerIo`. After `advance_to(v)` the ledger reads the counter back and
/// requires exactly `v` (a Python `KeyboardInterrupt` or a JVM `Error`
/// thrown in the callback reaches the library as a success).
///
/// ```kotlin
/// class KeystoreCounter : MonotonicCounter {
///     override fun read(): ULong = platformCounter.value()
///     override fun advanceTo(value: ULong) = platformCounter.raiseTo(value)
/// }
/// val ledger = PrivacyLedger.openOrCreateWithCounter(path, policy, KeystoreCounter())
/// ```
#[uniffi::export(callback_interface)]
pub trait MonotonicCounter: Send + Sync {
    /// The counter's current value.
    fn read(&self) -> Result<u64, CounterError>;
    /// Raise the counter to at least `value` (never lower it).
    fn advance_to(&self, value: u64) -> Result<(), CounterError>;
}

thread_local! {
    /// How many calls into the app's counter this thread is inside.
    static IN_COUNTER: Cell<u32> = const { Cell::new(0) };
}

/// Whether this thread is inside the app's `read` or `advance_to` (the
/// ledger's lock is then held by the caller: `crate::lock` refuses to wait
/// for it).
pub(crate) fn inside_counter() -> bool {
    IN_COUNTER.with(|c| c.get() > 0)
}

/// Run `f` (a call into the app's counter) marked as inside the counter.
fn in_counter<T>(f: impl FnOnce() -> T) -> T {
    struct Leave;
    impl Drop for Leave {
        fn drop(&mut self) {
            IN_COUNTER.with(|c| c.set(c.get().saturating_sub(1)));
        }
    }
    IN_COUNTER.with(|c| c.set(c.get().saturating_add(1)));
    let _leave = Leave;
    f()
}

/// The app's counter as the core's `MonotonicCounter`: its failures become
/// `LedgerIo` (escaped), and a value below one it reported or was raised to
/// earlier is refused (the counter itself went back).
///
/// `advance_to(v)` is checked by the core reading the counter back
/// (`FileLedger::advance_counter`, moved there in tidy14 from here, where
/// attack12 put it, docs/ATTACK-12.md): it must read exactly `v`. A
/// foreign exception the
/// binding cannot deliver (a Python `KeyboardInterrupt` or `SystemExit`,
/// which uniffi's `except Exception` does not catch; a JVM `Error`) reaches
/// Rust as *success* with a zeroed result: a `read` that "returned 0" and
/// an `advance_to` that did nothing. Python's uniffi also stores a returned
/// value of 2^64 + k as k. Below `v`: the counter did not move (`LedgerIo`,
/// nothing released). Above `v`: the counter counts more releases than the
/// file just written, i.e. the file was rolled back and an earlier read of
/// the counter was wrong (`LedgerRefused`, nothing released). Cost: one
/// more `read` per charge.
struct AppCounter {
    counter: Box<dyn MonotonicCounter>,
    /// The highest value this counter was read at or raised to.
    seen: AtomicU64,
}

impl AppCounter {
    fn new(counter: Box<dyn MonotonicCounter>) -> Self {
        Self {
            counter,
            seen: AtomicU64::new(0),
        }
    }
}

fn counter_failed(op: &str, e: &CounterError) -> geopriv::Error {
    let CounterError::Unavailable { detail } = e;
    geopriv::Error::LedgerIo {
        detail: format!(
            "the platform monotonic counter could not be {op}: {}",
            Untrusted(detail)
        ),
    }
}

impl geopriv::device::budget::MonotonicCounter for AppCounter {
    fn read(&self) -> geopriv::Result<u64> {
        let value = in_counter(|| self.counter.read()).map_err(|e| counter_failed("read", &e))?;
        let seen = self.seen.fetch_max(value, Ordering::SeqCst);
        if value < seen {
            return Err(geopriv::Error::InvalidLedgerState {
                reason: format!(
                    "the platform monotonic counter went back from {seen} to {value}: it is not monotonic"
                ),
            });
        }
        Ok(value)
    }

    /// The core reads the counter back after this and requires exactly
    /// `value` (`FileLedger::advance_counter`), through `read` above, which
    /// also records it as seen.
    fn advance_to(&mut self, value: u64) -> geopriv::Result<()> {
        in_counter(|| self.counter.advance_to(value)).map_err(|e| counter_failed("advanced", &e))
    }
}

#[uniffi::export]
impl PrivacyLedger {
    /// `open`, tied to the app's platform `counter`: `LedgerRefused` if the
    /// file counts fewer releases than the counter (rolled back, restored,
    /// replaced), `LedgerIo` if the counter fails. The file is then marked
    /// counter-bound: every process that charges it must hold the counter
    /// (the CLI and writers without it may read it, never charge it), and
    /// after every charge the counter is advanced to the file's release
    /// count (docs/MATH.md §8.3).
    ///
    /// ```python
    /// ledger = PrivacyLedger.open_with_counter(path, policy, KeystoreCounter())
    /// ```
    #[uniffi::constructor]
    pub fn open_with_counter(
        path: String,
        policy: BudgetPolicy,
        counter: Box<dyn MonotonicCounter>,
    ) -> Result<Arc<Self>, GeoprivError> {
        guard(|| {
            crate::outside_counter("ledger file constructor")?;
            let counter = Box::new(AppCounter::new(counter));
            Ok(PrivacyLedger::file(
                FileLedger::open(path, &policy.to_core()?)?.with_counter(counter)?,
            ))
        })
    }

    /// `create`, tied to `counter` (see `open_with_counter`). Refused
    /// (`LedgerRefused`) without creating anything if the counter is above
    /// 0: releases were made under it, so a ledger file existed and was
    /// deleted.
    ///
    /// ```python
    /// ledger = PrivacyLedger.create_with_counter(path, policy, KeystoreCounter())
    /// ```
    #[uniffi::constructor]
    pub fn create_with_counter(
        path: String,
        policy: BudgetPolicy,
        counter: Box<dyn MonotonicCounter>,
    ) -> Result<Arc<Self>, GeoprivError> {
        guard(|| {
            crate::outside_counter("ledger file constructor")?;
            let counter = Box::new(AppCounter::new(counter));
            Ok(PrivacyLedger::file(FileLedger::create_with_counter(
                path,
                &policy.to_core()?,
                counter,
            )?))
        })
    }

    /// `open_or_create`, tied to `counter`: what an app with a platform
    /// counter calls at start-up. A missing file while the counter is above
    /// 0 is refused (`LedgerRefused`) and no file is created; a file below
    /// the counter is refused as in `open_with_counter`.
    ///
    /// ```kotlin
    /// val ledger = PrivacyLedger.openOrCreateWithCounter(path, policy, KeystoreCounter())
    /// ```
    #[uniffi::constructor]
    pub fn open_or_create_with_counter(
        path: String,
        policy: BudgetPolicy,
        counter: Box<dyn MonotonicCounter>,
    ) -> Result<Arc<Self>, GeoprivError> {
        guard(|| {
            crate::outside_counter("ledger file constructor")?;
            let counter = Box::new(AppCounter::new(counter));
            Ok(PrivacyLedger::file(
                FileLedger::open_or_create_with_counter(path, &policy.to_core()?, counter)?,
            ))
        })
    }

    /// Whether the ledger's file is bound to a platform monotonic counter
    /// (opened with one, now or before): such a file is charged only by
    /// writers holding the counter. Always false for an in-memory ledger.
    ///
    /// ```python
    /// assert ledger.is_counter_bound()
    /// ```
    pub fn is_counter_bound(&self) -> Result<bool, GeoprivError> {
        guard(|| self.with_ledger(|l| Ok(l.state().is_counter_bound())))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::budget::BudgetUnit;
    use crate::{GeoMechanism, GeoQuery};
    use std::sync::Mutex;

    /// An app-side counter in memory; `fail` makes every call throw.
    #[derive(Clone, Default)]
    struct TestCounter {
        value: Arc<Mutex<u64>>,
        fail: Arc<Mutex<Option<String>>>,
    }

    impl MonotonicCounter for TestCounter {
        fn read(&self) -> Result<u64, CounterError> {
            if let Some(d) = self.fail.lock().unwrap().clone() {
                return Err(CounterError::Unavailable { detail: d });
            }
            Ok(*self.value.lock().unwrap())
        }
        fn advance_to(&self, value: u64) -> Result<(), CounterError> {
            if let Some(d) = self.fail.lock().unwrap().clone() {
                return Err(CounterError::Unavailable { detail: d });
            }
            let mut v = self.value.lock().unwrap();
            *v = (*v).max(value);
            Ok(())
        }
    }

    fn policy() -> BudgetPolicy {
        BudgetPolicy {
            unit: BudgetUnit::PerMetre,
            total_epsilon: 0.5,
            total_delta: 0.0,
            period: None,
        }
    }

    fn release(ledger: &Arc<PrivacyLedger>) -> Result<(), GeoprivError> {
        let m = GeoMechanism::polyplace(0.1)?.with_unit(BudgetUnit::PerMetre)?;
        let q = GeoQuery::threshold(0.0, 1.0)?;
        m.privatize(ledger.clone(), q, vec![0.3]).map(|_| ())
    }

    /// A fresh directory for test `name` (removed when the guard drops,
    /// also when the test fails) and the ledger path in it.
    fn scratch(name: &str) -> (TempDir, String) {
        let d =
            std::env::temp_dir().join(format!("geopriv-ffi-counter-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d).unwrap();
        let path = d.join("ledger.json").to_string_lossy().into_owned();
        (TempDir(d), path)
    }

    /// [`scratch`]'s directory and path, and that ledger created and
    /// bound to `counter` (the setup most tests here share).
    fn bound(
        name: &str,
        counter: &(impl MonotonicCounter + Clone + 'static),
    ) -> (TempDir, String, Arc<PrivacyLedger>) {
        let (d, path) = scratch(name);
        let app = PrivacyLedger::open_or_create_with_counter(
            path.clone(),
            policy(),
            Box::new(counter.clone()),
        )
        .unwrap();
        (d, path, app)
    }

    /// Removes its directory when dropped.
    struct TempDir(std::path::PathBuf);

    impl Drop for TempDir {
        fn drop(&mut self) {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }

    #[test]
    fn a_rolled_back_file_is_refused_and_cannot_be_refilled() {
        let counter = TestCounter::default();
        let (_d, path, app) = bound("rollback", &counter);
        assert!(app.is_counter_bound().unwrap());
        release(&app).unwrap();
        let backup = std::fs::read_to_string(&path).unwrap();
        release(&app).unwrap();
        release(&app).unwrap();
        drop(app);
        assert_eq!(*counter.value.lock().unwrap(), 3);
        std::fs::write(&path, &backup).unwrap();
        let job = PrivacyLedger::open(path.clone(), policy()).unwrap();
        assert_eq!(job.status().unwrap().releases, 1);
        let refused = release(&job).unwrap_err();
        assert!(
            matches!(refused, GeoprivError::LedgerRefused(_)),
            "{refused:?}"
        );
        drop(job);
        let again = PrivacyLedger::open_or_create_with_counter(path, policy(), Box::new(counter))
            .unwrap_err();
        assert!(matches!(again, GeoprivError::LedgerRefused(_)), "{again:?}");
    }

    #[test]
    fn a_deleted_file_is_not_recreated() {
        let (_d, path) = scratch("deleted");
        let counter = TestCounter::default();
        *counter.value.lock().unwrap() = 2;
        for make in [
            PrivacyLedger::open_or_create_with_counter,
            PrivacyLedger::create_with_counter,
        ] {
            let e = make(path.clone(), policy(), Box::new(counter.clone())).unwrap_err();
            assert!(matches!(e, GeoprivError::LedgerRefused(_)), "{e:?}");
            assert!(!std::path::Path::new(&path).exists());
        }
    }

    #[test]
    fn a_failing_counter_is_a_typed_error_with_an_escaped_message() {
        let (_d, path) = scratch("failing");
        let counter = TestCounter::default();
        *counter.fail.lock().unwrap() = Some("locked\n\x1b[2J".into());
        let e = PrivacyLedger::open_or_create_with_counter(
            path.clone(),
            policy(),
            Box::new(counter.clone()),
        )
        .unwrap_err();
        match &e {
            GeoprivError::LedgerIo(m) => {
                assert!(m.contains("locked\\n\\u{1b}[2J"), "{m}");
                assert!(!m.contains('\n'), "{m}");
            }
            other => panic!("expected LedgerIo, got {other:?}"),
        }
        *counter.fail.lock().unwrap() = None;
        let app =
            PrivacyLedger::open_or_create_with_counter(path, policy(), Box::new(counter.clone()))
                .unwrap();
        release(&app).unwrap();
        *counter.fail.lock().unwrap() = Some("gone".into());
        assert!(matches!(release(&app), Err(GeoprivError::LedgerIo(_))));
    }

    #[test]
    fn a_counter_that_goes_back_is_refused() {
        let counter = TestCounter::default();
        let (_d, _, app) = bound("back", &counter);
        release(&app).unwrap();
        *counter.value.lock().unwrap() = 0;
        let e = release(&app).unwrap_err();
        assert!(matches!(e, GeoprivError::LedgerRefused(_)), "{e:?}");
    }

    /// A counter whose `advance_to` "succeeds" without moving on chosen
    /// calls (0-based), as a Python `KeyboardInterrupt` or `SystemExit`
    /// raised in it reaches Rust (uniffi catches only `Exception`; ctypes
    /// prints the rest and returns success), and one that calls a ledger
    /// from inside `advance_to`.
    #[derive(Clone, Default)]
    struct SwallowingCounter {
        inner: TestCounter,
        calls: Arc<Mutex<u32>>,
        swallow: Arc<Mutex<Vec<u32>>>,
        reenter: Arc<Mutex<Option<Arc<PrivacyLedger>>>>,
        inner_result: Arc<Mutex<Option<String>>>,
    }

    impl MonotonicCounter for SwallowingCounter {
        fn read(&self) -> Result<u64, CounterError> {
            self.inner.read()
        }
        fn advance_to(&self, value: u64) -> Result<(), CounterError> {
            let call = {
                let mut c = self.calls.lock().unwrap();
                *c += 1;
                *c - 1
            };
            let ledger = self.reenter.lock().unwrap().clone();
            if let Some(ledger) = ledger {
                let r = ledger.status().map(|s| s.releases);
                *self.inner_result.lock().unwrap() = Some(format!("{r:?}"));
                // As a Python exception raised inside the callback would.
                r.map_err(|e| CounterError::Unavailable {
                    detail: e.to_string(),
                })?;
            }
            if self.swallow.lock().unwrap().contains(&call) {
                return Ok(());
            }
            self.inner.advance_to(value)
        }
    }

    #[test]
    fn an_advance_that_did_not_happen_is_not_taken_for_one() {
        // attack12 (docs/ATTACK-12.md): the second release's advance_to is
        // swallowed (Ctrl-C in the app's counter); the app exits; the file
        // is restored to the first release. Before the read-back, the
        // second release was returned, the counter stayed at 1 and the
        // restored file (1 release) was accepted: a charge lost, 3 values
        // released against a file that says 2.
        let counter = SwallowingCounter::default();
        *counter.swallow.lock().unwrap() = vec![2]; // bind = call 0, release 1 = call 1
        let (_d, path, app) = bound("swallowed", &counter);
        let mut released = 0;
        released += u32::from(release(&app).is_ok());
        let backup = std::fs::read_to_string(&path).unwrap();
        match release(&app) {
            Ok(()) => released += 1,
            Err(e) => assert!(
                matches!(e, GeoprivError::LedgerIo(ref m) if m.contains("did not advance")),
                "{e:?}"
            ),
        }
        drop(app);
        std::fs::write(&path, &backup).unwrap();
        if let Ok(app) = PrivacyLedger::open_or_create_with_counter(
            path.clone(),
            policy(),
            Box::new(counter.inner.clone()),
        ) {
            released += u32::from(release(&app).is_ok());
        }
        let recorded = PrivacyLedger::open(path, policy())
            .unwrap()
            .status()
            .unwrap()
            .releases;
        assert!(
            u64::from(released) <= recorded,
            "{released} values released, the ledger the app uses records {recorded}: a charge lost"
        );
    }

    #[test]
    fn a_counter_that_lies_after_advancing_is_refused_both_ways() {
        // advance_to that raises the counter past the file (a counter
        // shared with another ledger, or an earlier read that said 0 for a
        // rolled-back file): refused, nothing released.
        let counter = TestCounter::default();
        let (_d, _, app) = bound("past", &counter);
        release(&app).unwrap();
        *counter.value.lock().unwrap() = 5; // moved by someone else
        let e = release(&app).unwrap_err();
        assert!(matches!(e, GeoprivError::LedgerRefused(_)), "{e:?}");
    }

    #[test]
    fn a_counter_that_calls_the_ledger_gets_an_error_not_a_hang() {
        // attack12: advance_to calling ledger.status() waited for the
        // ledger's own lock, held by the release that called it: the host
        // hung for good. Run on a thread so that the old behaviour fails
        // the test instead of hanging it.
        let counter = SwallowingCounter::default();
        let (_d, _, app) = bound("reenter", &counter);
        *counter.reenter.lock().unwrap() = Some(app.clone());
        let (tx, rx) = std::sync::mpsc::channel();
        let worker = app.clone();
        std::thread::spawn(move || {
            let _ = tx.send(release(&worker));
        });
        let outcome = rx
            .recv_timeout(std::time::Duration::from_secs(20))
            .expect("a counter that calls the ledger hung the release (20 s)");
        assert!(
            matches!(outcome, Err(GeoprivError::LedgerIo(ref m)) if m.contains("inside a MonotonicCounter")),
            "{outcome:?}"
        );
        let inner = counter.inner_result.lock().unwrap().clone().unwrap();
        assert!(inner.contains("InvalidInput"), "{inner}");
        // Outside the callback the ledger works: the refused release was
        // charged (written before the counter was called), not released.
        *counter.reenter.lock().unwrap() = None;
        assert_eq!(app.status().unwrap().releases, 1);
        release(&app).unwrap();
    }

    #[test]
    fn a_counter_that_opens_a_ledger_file_is_refused_at_once() {
        // attack12 O4: a ledger constructor called from inside the counter
        // (whose caller holds the file's lock) waited the lock's 10 s and
        // then failed LedgerBusy; every file constructor now refuses at
        // once with InvalidInput. The counter below tries all six on the
        // file being charged, then advances.
        struct Opening {
            inner: TestCounter,
            path: String,
            results: Arc<Mutex<Vec<String>>>,
        }
        impl MonotonicCounter for Opening {
            fn read(&self) -> Result<u64, CounterError> {
                self.inner.read()
            }
            fn advance_to(&self, value: u64) -> Result<(), CounterError> {
                let p = || self.path.clone();
                let c = || Box::new(self.inner.clone()) as Box<dyn MonotonicCounter>;
                let tries = [
                    PrivacyLedger::open(p(), policy()),
                    PrivacyLedger::create(p(), policy()),
                    PrivacyLedger::open_or_create(p(), policy()),
                    PrivacyLedger::open_with_counter(p(), policy(), c()),
                    PrivacyLedger::create_with_counter(p(), policy(), c()),
                    PrivacyLedger::open_or_create_with_counter(p(), policy(), c()),
                ];
                let mut results = self.results.lock().unwrap();
                for t in tries {
                    results.push(match t {
                        Ok(_) => "opened".into(),
                        Err(e) => format!("{e:?}"),
                    });
                }
                self.inner.advance_to(value)
            }
        }
        let inner = TestCounter::default();
        let results = Arc::new(Mutex::new(Vec::new()));
        let (_d, path, app) = bound("reopen", &inner);
        drop(app);
        let counter = Opening {
            inner,
            path: path.clone(),
            results: results.clone(),
        };
        let app = PrivacyLedger::open_with_counter(path, policy(), Box::new(counter)).unwrap();
        release(&app).unwrap();
        let results = results.lock().unwrap().clone();
        assert!(!results.is_empty());
        for r in &results {
            assert!(
                r.starts_with("InvalidInput") && r.contains("inside a MonotonicCounter"),
                "{r}"
            );
        }
    }

    #[test]
    fn an_unexpected_foreign_exception_becomes_unavailable() {
        let e = CounterError::from(uniffi::UnexpectedUniFFICallbackError::new("boom"));
        assert_eq!(e.to_string(), "boom");
    }
}
