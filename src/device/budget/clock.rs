//! Time for periodic budgets, and a platform counter that makes rollback
//! of a ledger file detectable (`docs/MATH.md §8.3`).

use crate::error::{Error, Result};
#[cfg(feature = "std")]
use alloc::format;
use alloc::sync::Arc;
use core::sync::atomic::{AtomicU64, Ordering};

/// Where a ledger reads the time (seconds since the Unix epoch), to tell
/// which period a charge falls in. Injectable so tests (and apps with a
/// trusted time source) control it. A clock that goes back never refunds:
/// the ledger charges the latest period it has seen.
///
/// ```
/// use geopriv::device::budget::{Clock, ManualClock};
/// let clock = ManualClock::new(86_400 * 3);
/// assert_eq!(clock.now_unix_seconds()?, 259_200);
/// clock.advance(60);
/// assert_eq!(clock.now_unix_seconds()?, 259_260);
/// # Ok::<(), geopriv::Error>(())
/// ```
pub trait Clock: Send + Sync {
    /// Seconds since 1970-01-01T00:00:00Z, or an error if unknown.
    fn now_unix_seconds(&self) -> Result<u64>;
}

/// The operating system's wall clock (`std` only).
#[cfg(feature = "std")]
#[derive(Clone, Copy, Debug, Default)]
pub struct SystemClock;

#[cfg(feature = "std")]
impl Clock for SystemClock {
    fn now_unix_seconds(&self) -> Result<u64> {
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_secs())
            .map_err(|e| Error::LedgerIo {
                detail: format!("reading the system clock: {e}"),
            })
    }
}

/// A clock set by hand (tests, simulations, an app's trusted time). Clones
/// share the same time.
#[derive(Clone, Debug, Default)]
pub struct ManualClock(Arc<AtomicU64>);

impl ManualClock {
    /// A clock at `unix_seconds`.
    pub fn new(unix_seconds: u64) -> Self {
        Self(Arc::new(AtomicU64::new(unix_seconds)))
    }

    /// Set the time (it may go back: the ledger does not refund).
    pub fn set(&self, unix_seconds: u64) {
        self.0.store(unix_seconds, Ordering::SeqCst);
    }

    /// Move the time forward by `seconds` (saturating).
    pub fn advance(&self, seconds: u64) {
        let now = self.0.load(Ordering::SeqCst);
        self.0.store(now.saturating_add(seconds), Ordering::SeqCst);
    }
}

impl Clock for ManualClock {
    fn now_unix_seconds(&self) -> Result<u64> {
        Ok(self.0.load(Ordering::SeqCst))
    }
}

/// The clock of a ledger built without `std` and without
/// [`with_clock`](super::PrivacyBudget::with_clock): a periodic policy
/// then refuses to charge (no silent period).
#[cfg(not(feature = "std"))]
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct NoClock;

#[cfg(not(feature = "std"))]
impl Clock for NoClock {
    fn now_unix_seconds(&self) -> Result<u64> {
        Err(Error::LedgerIo {
            detail: "a periodic budget needs a clock (PrivacyBudget::with_clock)".into(),
        })
    }
}

/// The default clock: the system clock with `std`, none without.
pub(crate) fn default_clock() -> Arc<dyn Clock> {
    #[cfg(feature = "std")]
    {
        Arc::new(SystemClock)
    }
    #[cfg(not(feature = "std"))]
    {
        Arc::new(NoClock)
    }
}

/// A platform's monotonic counter (a TPM NV counter, a secure-element or
/// keystore counter, a server-side counter): a value that can only grow
/// and that the app cannot roll back together with its files. A
/// [`FileLedger`](super::FileLedger) given one
/// ([`with_counter`](super::FileLedger::with_counter)) advances it to the
/// ledger's release count after every durable charge, and refuses a
/// ledger file whose count is below the counter (a deleted, restored or
/// rolled-back file). After every `advance_to(v)` it reads the counter
/// back and requires exactly `v` (an `advance_to` that returns `Ok`
/// without moving is caught: `LedgerIo`, nothing released).
///
/// ```
/// use geopriv::device::budget::{MonotonicCounter, MemoryCounter};
/// let mut c = MemoryCounter::default();
/// c.advance_to(3)?;
/// c.advance_to(2)?; // never goes back
/// assert_eq!(c.read()?, 3);
/// # Ok::<(), geopriv::Error>(())
/// ```
pub trait MonotonicCounter: Send {
    /// The counter's value.
    fn read(&self) -> Result<u64>;
    /// Raise the counter to at least `value` (never lowers it).
    fn advance_to(&mut self, value: u64) -> Result<()>;
}

/// A [`MonotonicCounter`] in memory (tests; clones share the value). It
/// does not survive the process, so it protects nothing on its own.
#[derive(Clone, Debug, Default)]
pub struct MemoryCounter(Arc<AtomicU64>);

impl MonotonicCounter for MemoryCounter {
    fn read(&self) -> Result<u64> {
        Ok(self.0.load(Ordering::SeqCst))
    }
    fn advance_to(&mut self, value: u64) -> Result<()> {
        self.0.fetch_max(value, Ordering::SeqCst);
        Ok(())
    }
}
