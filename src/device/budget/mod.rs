//! The device's privacy-budget ledger (`docs/MATH.md §8.3`).
//!
//! # Sequential composition, per unit
//!
//! If a device makes releases M_1, …, M_k about the same private x, each
//! (ε_i, δ_i)-GP, the whole sequence is (Σ ε_i, Σ δ_i)-GP: for any x, x'
//! the i-th release is (ε_i·d(x, x'), δ_i)-indistinguishable, and basic
//! composition of indistinguishability adds the exponents (the pure
//! density ratios multiply: Π exp(ε_i d) = exp(d Σ ε_i)) and the δs.
//! The sum only means something when every ε_i is in the same unit: a
//! per-metre ε and a per-dollar ε measure different distances, and a
//! local-DP ε is unit-less. So a ledger carries its [`BudgetUnit`] and
//! refuses a [`Charge`] in any other ([`Error::UnitMismatch`]).
//!
//! # The metered release paths
//!
//! Every device-side release (`Report::release`, `Mechanism::privatize`,
//! the CLI's `privatize`, the bindings' `privatize`) takes a [`Ledger`] and
//! charges it *before the value is returned*: the unit is checked, the
//! charge is checked against the remaining budget, the value is computed
//! and checked to be finite, the charge is committed (for a
//! [`FileLedger`], durably written to disk), and only then is the value
//! handed back. Experiments and servers that simulate many devices use the
//! paths named `*_unmetered`.
//!
//! **Forgetting to load is loud, by construction.** There is no global or
//! default ledger: the metered paths need a ledger object, and the only
//! ways to get one are [`PrivacyBudget::new`] (explicitly a *new*
//! in-memory budget, for one process lifetime), [`PrivacyBudget::restore`]
//! (a saved state, checked against the app's pinned [`BudgetPolicy`]), and
//! with `std` [`FileLedger::open`] (the file must exist),
//! [`FileLedger::create`] (the file must *not* exist) and
//! [`FileLedger::open_or_create`]. A restarted app that calls `create`
//! again gets an error instead of a fresh budget; one that wants the file
//! to exist calls `open` and gets an error if it is missing.
//!
//! # Exact accounting
//!
//! Every finite double is an integer multiple of 2^-1074, so the ledger
//! sums the charges **exactly** (a big integer in that unit) and admits a
//! charge iff the exact sum, this charge included, is at most
//! T·(1 + 2^-50) for the lifetime total T and for the period's T. The
//! relative slack 2^-50 (below 9e-16) absorbs the rounding of a share
//! computed as T/k: k charges of fl(T/k) always fit, and k + 1 never do
//! for any k < 2^49 (10 × 1e-4 fit 1e-3; 1500 × (1/5000) fit
//! 1500 × (1/5000); `docs/MATH.md §8.3`). The totals the ledger reports
//! are the exact sums rounded up.
//!
//! # Periods, memo charges, the device secret
//!
//! A [`BudgetPolicy::periodic`] policy caps ε per period *and* over the
//! ledger's life; every charge is recorded with its period (from an
//! injectable [`Clock`]; a clock that goes back charges the latest period
//! seen, never refunds). A ledger holds a 256-bit device secret (from the
//! operating system's generator when the ledger is created; never printed
//! by `Debug`, never part of a report) and a memo table of keys charged
//! once ([`PrivacyBudget::commit_once`]).
//!
//! ```
//! use geopriv::device::budget::{BudgetPolicy, BudgetUnit, Charge, Ledger, PrivacyBudget};
//!
//! // ε = 0.01 per metre in all.
//! let policy = BudgetPolicy::new(BudgetUnit::PerMetre, 1.0 / 100.0, 0.0)?;
//! let mut budget = PrivacyBudget::new(policy);
//! let charge = Charge::new(BudgetUnit::PerMetre, 1.0 / 100.0 / 4.0, 0.0)?;
//! for _ in 0..4 {
//!     let release = budget.spend(&charge, || Ok(42.0 /* privatize here */))?;
//!     # let _ = release;
//! }
//! assert!(budget.try_charge(&charge).is_err()); // a fifth release is refused
//! // A local-DP charge is refused by a per-metre ledger.
//! let ldp = Charge::new(BudgetUnit::LocalDp, 1e-6, 0.0)?;
//! assert!(matches!(budget.try_charge(&ldp), Err(geopriv::Error::UnitMismatch { .. })));
//! # Ok::<(), geopriv::Error>(())
//! ```

mod clock;
mod exact_eps;
#[cfg(feature = "std")]
mod file;
mod noise_rng;
mod unit;

#[cfg(feature = "std")]
pub use clock::SystemClock;
pub use clock::{Clock, ManualClock, MemoryCounter, MonotonicCounter};
#[cfg(feature = "std")]
pub use file::FileLedger;
pub use noise_rng::{DeclaredSecure, NoiseRng, Seeded};
pub use unit::{BudgetPolicy, BudgetUnit, Charge};

use crate::error::{Error, Result};
use alloc::collections::{BTreeMap, BTreeSet};
use alloc::format;
use alloc::string::{String, ToString};
use alloc::sync::Arc;
use alloc::vec::Vec;
use exact_eps::{ExactSum, Window};
use serde::{Deserialize, Serialize};

/// Version of the persisted ledger state ([`PrivacyBudget::to_json`]).
/// Version 2 (this one) records every charge with its period, the device
/// secret and the memo table. Version 1 states (totals and a release
/// count, no history) are still read and migrated (their spending is
/// carried over as one lifetime entry, `carried`); unit-less states of
/// earlier releases are refused.
pub const LEDGER_FORMAT_VERSION: u16 = 2;

/// At most this many distinct (period, ε, δ) entries in a ledger's charge
/// history; a charge that would need one more is refused
/// ([`Error::LimitExceeded`]). Equal charges in one period share an entry.
pub const MAX_LEDGER_ENTRIES: usize = 1 << 16;

/// At most this many keys in a ledger's memo table.
pub const MAX_MEMO_KEYS: usize = 1 << 16;

/// At most this many reports wait in a ledger's outbox.
pub const MAX_OUTBOX: usize = 1024;

/// At most this many bytes per report in the outbox.
pub const MAX_UPLOAD_BYTES: usize = 64 << 10;

fn is_false(b: &bool) -> bool {
    !*b
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

pub(crate) fn check_delta(name: &'static str, delta: f64, max: f64) -> Result<f64> {
    if delta.is_finite() && (0.0..=max).contains(&delta) {
        Ok(delta)
    } else {
        Err(Error::InvalidParameter {
            name,
            value: delta,
            requirement: if max < 1.0 {
                "finite and in [0, 1)"
            } else {
                "finite and in [0, 1]"
            },
        })
    }
}

/// Where charges go: an in-memory [`PrivacyBudget`] or, with `std`, a
/// [`FileLedger`] that writes every charge to disk before the release is
/// returned. The metered release paths take `&mut dyn Ledger`.
///
/// Contract of an implementation: [`commit`](Ledger::commit) either
/// records the charge (durably, for a persistent ledger) and returns `Ok`,
/// or records nothing and returns the error; [`state`](Ledger::state) is
/// the budget after every committed charge.
pub trait Ledger {
    /// The current state (policy, amounts spent, releases).
    fn state(&self) -> &PrivacyBudget;

    /// Record `charge`. Refused, with nothing recorded, if its unit is not
    /// the ledger's ([`Error::UnitMismatch`]), if it would exceed the
    /// period's or the lifetime totals ([`Error::BudgetExceeded`]) or, for
    /// a persistent ledger, if it cannot be written durably
    /// ([`Error::LedgerIo`], [`Error::LedgerBusy`]).
    fn commit(&mut self, charge: &Charge) -> Result<()>;

    /// Record `charge` `n` times, **all or nothing**: refused with nothing
    /// recorded unless all n fit (Σ = n·ε, n·δ by sequential composition).
    /// A persistent ledger writes the n charges in one durable write (the
    /// check and the write under one lock), so another process charging
    /// at the same time cannot leave some of them recorded and the call
    /// refused. The default checks the n charges on a copy, then commits
    /// them one by one (enough for a ledger owned by one caller).
    /// [`PrivacyBudget`] and [`FileLedger`] check and record the n charges
    /// in closed form, at a cost that does not depend on n (one history
    /// entry gains n; attack11 O3).
    ///
    /// ```
    /// use geopriv::device::budget::{BudgetPolicy, BudgetUnit, Charge, Ledger};
    /// use geopriv::PrivacyBudget;
    /// let policy = BudgetPolicy::new(BudgetUnit::PerDollar, 1e-3, 0.0)?;
    /// let mut ledger = PrivacyBudget::new(policy);
    /// let c = Charge::new(BudgetUnit::PerDollar, 1e-4, 0.0)?;
    /// ledger.commit_n(&c, 7)?;
    /// assert!(ledger.commit_n(&c, 4).is_err()); // 11 > 10: nothing recorded
    /// assert_eq!(ledger.state().releases(), 7);
    /// # Ok::<(), geopriv::Error>(())
    /// ```
    fn commit_n(&mut self, charge: &Charge, n: u64) -> Result<()> {
        if n == 0 {
            return Ok(());
        }
        // The n charges checked in closed form (cost independent of n).
        self.state().check_n(charge, n)?;
        for _ in 0..n {
            self.commit(charge)?;
        }
        Ok(())
    }

    /// Run `release` under `charge` (the write-ahead protocol of the
    /// [module docs](self)):
    ///
    /// * a charge in another unit, or one the budget cannot afford, is
    ///   refused and `release` is **not run**: nothing is released;
    /// * if `release` fails, nothing was released, so nothing is charged;
    /// * otherwise the charge is committed (durably, for a persistent
    ///   ledger) and only then is the value returned; if the commit fails
    ///   the value is dropped and the error returned: never a release
    ///   without a charge.
    ///
    /// `release` must only *compute* the privatized value; publish the
    /// returned value afterwards.
    fn spend<T>(&mut self, charge: &Charge, release: impl FnOnce() -> Result<T>) -> Result<T>
    where
        Self: Sized,
    {
        spend_dyn(self, charge, release)
    }
}

/// [`Ledger::spend`] for a `dyn Ledger` (what the metered paths call).
pub fn spend_dyn<L: Ledger + ?Sized, T>(
    ledger: &mut L,
    charge: &Charge,
    release: impl FnOnce() -> Result<T>,
) -> Result<T> {
    ledger.state().check(charge)?;
    let value = release()?;
    ledger.commit(charge)?;
    Ok(value)
}

/// One entry of the charge history: `count` charges of (ε, δ) in `period`.
#[derive(Clone, Copy, Debug, PartialEq)]
struct Entry {
    period: u64,
    epsilon: f64,
    delta: f64,
    count: u64,
}

/// What a version-1 ledger had spent when it was migrated (no history:
/// counted towards the lifetime only).
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct Carried {
    epsilon: f64,
    delta: f64,
    releases: u64,
}

/// What is left of a budget, now: in this period, over the lifetime, and
/// what one charge may use (the smaller of the two). Amounts are rounded
/// down.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Remaining {
    /// The period these figures are for (0 for a lifetime-only policy).
    pub period: u64,
    /// ε left in this period.
    pub period_epsilon: f64,
    /// δ left in this period.
    pub period_delta: f64,
    /// ε left over the ledger's life.
    pub lifetime_epsilon: f64,
    /// δ left over the ledger's life.
    pub lifetime_delta: f64,
    /// ε a charge may use now: min(period, lifetime).
    pub epsilon: f64,
    /// δ a charge may use now: min(period, lifetime).
    pub delta: f64,
}

/// A ledger of the privacy spent by one device about one secret, in one
/// unit: the app's pinned [`BudgetPolicy`] (unit, lifetime totals,
/// optional period limit), every charge made with its period, the device
/// secret and the memo table (see the [module docs](self)).
///
/// In memory only; persist it with [`to_json`](Self::to_json) and
/// [`restore`](Self::restore), or use a [`FileLedger`] (with `std`), which
/// does so durably on every charge.
#[derive(Clone)]
pub struct PrivacyBudget {
    policy: BudgetPolicy,
    secret: [u8; 32],
    entries: Vec<Entry>,
    /// The memo table: a B-tree (insert and look-up O(log n), no shift of
    /// the whole table per new key as a sorted `Vec` had), iterated in
    /// byte order, the order it is written in.
    memo: BTreeSet<MemoKey>,
    last_period: u64,
    carried: Option<Carried>,
    /// Reports charged but not yet acknowledged as uploaded: (id, report).
    outbox: Vec<(u64, String)>,
    /// The id of the next report put in the outbox.
    next_upload: u64,
    /// Set once a [`FileLedger`] tied to a platform monotonic counter
    /// wrote the file (`FileLedger::with_counter`); never cleared. A writer
    /// without the counter is refused a charge on such a file (attack10
    /// O1: it could refill a rolled-back release count to the counter's).
    counter_bound: bool,
    // Derived from the above (checked on restore).
    lifetime_epsilon: ExactSum,
    lifetime_delta: ExactSum,
    /// Exact (ε, δ) charged in `last_period` (no entry is in a later one),
    /// kept so that a charge adds once instead of summing the history.
    period_epsilon: ExactSum,
    period_delta: ExactSum,
    releases: u64,
    clock: Arc<dyn Clock>,
}

impl PartialEq for PrivacyBudget {
    /// Equal states (the clock is not part of the state).
    fn eq(&self, other: &Self) -> bool {
        self.policy == other.policy
            && self.secret == other.secret
            && self.entries == other.entries
            && self.memo == other.memo
            && self.last_period == other.last_period
            && self.carried == other.carried
            && self.outbox == other.outbox
            && self.next_upload == other.next_upload
            && self.counter_bound == other.counter_bound
    }
}

impl core::fmt::Debug for PrivacyBudget {
    /// Everything but the device secret.
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("PrivacyBudget")
            .field("policy", &self.policy)
            .field("device_secret", &"<redacted>")
            .field("entries", &self.entries)
            .field("memo_keys", &self.memo.len())
            .field("last_period", &self.last_period)
            .field("carried", &self.carried)
            .field("releases", &self.releases)
            .finish()
    }
}

/// A memo key in the ledger's table as four big-endian 64-bit words: their
/// order is the order of the bytes, and a comparison is a few integer
/// compares instead of a `memcmp` call.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
struct MemoKey([u64; 4]);

impl MemoKey {
    fn new(bytes: &[u8; 32]) -> Self {
        let mut words = [0u64; 4];
        for (w, chunk) in words.iter_mut().zip(bytes.chunks_exact(8)) {
            let mut b = [0u8; 8];
            b.copy_from_slice(chunk);
            *w = u64::from_be_bytes(b);
        }
        Self(words)
    }

    fn bytes(&self) -> [u8; 32] {
        let mut out = [0u8; 32];
        for (chunk, w) in out.chunks_exact_mut(8).zip(self.0) {
            chunk.copy_from_slice(&w.to_be_bytes());
        }
        out
    }
}

/// Persisted form of a [`PrivacyBudget`] (format version 2).
#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct StateV2 {
    format: u16,
    unit: BudgetUnit,
    total_epsilon: f64,
    total_delta: f64,
    period_seconds: Option<u64>,
    period_epsilon: f64,
    period_delta: f64,
    spent_epsilon: f64,
    spent_delta: f64,
    releases: u64,
    last_period: u64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    carried: Option<Carried>,
    /// (period, ε, δ, count) per entry.
    charges: Vec<(u64, f64, f64, u64)>,
    memo: Vec<String>,
    device_secret: String,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    outbox: Vec<(u64, String)>,
    #[serde(default, skip_serializing_if = "is_zero")]
    next_upload: u64,
    /// Written only when true, so files of ledgers without a counter are
    /// unchanged.
    #[serde(default, skip_serializing_if = "is_false")]
    counter_bound: bool,
}

/// Persisted form of a version-1 ledger.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct StateV1 {
    #[allow(dead_code)]
    format: u16,
    unit: BudgetUnit,
    total_epsilon: f64,
    total_delta: f64,
    spent_epsilon: f64,
    spent_delta: f64,
    releases: u64,
}

#[derive(Deserialize)]
struct FormatOnly {
    format: u16,
}

/// A persisted state of type `T`, or [`Error::InvalidLedgerState`].
fn parse_state<T: serde::de::DeserializeOwned>(json: &str) -> Result<T> {
    // serde's message quotes the file (unknown field names, strings): escaped.
    serde_json::from_str(json).map_err(|e| {
        invalid(format!(
            "not a ledger state: {}",
            crate::server::escape::Untrusted(&e.to_string())
        ))
    })
}

fn invalid(reason: impl Into<String>) -> Error {
    Error::InvalidLedgerState {
        reason: reason.into(),
    }
}

fn to_hex(bytes: &[u8; 32]) -> String {
    const HEX: &[u8; 16] = b"0123456789abcdef";
    let mut s = String::with_capacity(64);
    for b in bytes {
        s.push(HEX[(b >> 4) as usize] as char);
        s.push(HEX[(b & 15) as usize] as char);
    }
    s
}

fn from_hex(what: &str, s: &str) -> Result<[u8; 32]> {
    let b = s.as_bytes();
    if b.len() != 64 {
        return Err(invalid(format!("{what} is not 64 hexadecimal digits")));
    }
    let digit = |c: u8| match c {
        b'0'..=b'9' => Some(c - b'0'),
        b'a'..=b'f' => Some(c - b'a' + 10),
        _ => None,
    };
    let mut out = [0u8; 32];
    for (i, o) in out.iter_mut().enumerate() {
        match (digit(b[2 * i]), digit(b[2 * i + 1])) {
            (Some(h), Some(l)) => *o = h << 4 | l,
            _ => return Err(invalid(format!("{what} is not lowercase hexadecimal"))),
        }
    }
    Ok(out)
}

/// 32 bytes from the operating system's generator.
#[cfg(feature = "std")]
fn os_secret() -> Result<[u8; 32]> {
    use rand::TryRngCore;
    let mut s = [0u8; 32];
    rand::rngs::OsRng
        .try_fill_bytes(&mut s)
        .map_err(|e| Error::LedgerIo {
            detail: format!("reading the operating system's random generator: {e}"),
        })?;
    Ok(s)
}

fn policy_mismatch(field: &'static str, pinned: String, stored: String) -> Error {
    Error::LedgerPolicyMismatch {
        field,
        pinned,
        // What the file says: escaped.
        stored: crate::server::escape::Untrusted(&stored).to_string(),
    }
}

fn check_policy(
    policy: &BudgetPolicy,
    unit: &BudgetUnit,
    fields: &[(&'static str, f64, f64)],
) -> Result<()> {
    if unit != policy.unit() {
        return Err(policy_mismatch(
            "unit",
            policy.unit().to_string(),
            unit.to_string(),
        ));
    }
    for &(field, pinned, stored) in fields {
        // Bitwise: a total edited by one ulp is still an edit.
        if pinned.to_bits() != stored.to_bits() {
            return Err(policy_mismatch(
                field,
                format!("{pinned:e}"),
                format!("{stored:e}"),
            ));
        }
    }
    Ok(())
}

impl PrivacyBudget {
    /// A fresh, empty ledger for `policy`, with a new device secret from
    /// the operating system's generator (`std`; see
    /// [`with_secret`](Self::with_secret) without it) and the system clock.
    /// This is explicitly a *new* budget: an app that persists its ledger
    /// restores it with [`restore`](Self::restore) or uses a
    /// [`FileLedger`].
    ///
    /// Panics only if the operating system has no random generator (use
    /// [`try_new`](Self::try_new) to get the error instead).
    #[cfg(feature = "std")]
    pub fn new(policy: BudgetPolicy) -> Self {
        match Self::try_new(policy) {
            Ok(b) => b,
            Err(e) => panic!("no operating-system randomness for the device secret: {e}"),
        }
    }

    /// [`new`](Self::new), with the generator's failure as an error.
    #[cfg(feature = "std")]
    pub fn try_new(policy: BudgetPolicy) -> Result<Self> {
        Ok(Self::with_secret(policy, os_secret()?))
    }

    /// A fresh, empty ledger with a device secret the caller supplies (a
    /// `no_std` device with its own hardware generator). The secret must be
    /// 32 bytes of fresh, uniform randomness kept on the device.
    pub fn with_secret(policy: BudgetPolicy, secret: [u8; 32]) -> Self {
        Self {
            policy,
            secret,
            entries: Vec::new(),
            memo: BTreeSet::new(),
            last_period: 0,
            carried: None,
            outbox: Vec::new(),
            next_upload: 0,
            counter_bound: false,
            lifetime_epsilon: ExactSum::default(),
            lifetime_delta: ExactSum::default(),
            period_epsilon: ExactSum::default(),
            period_delta: ExactSum::default(),
            releases: 0,
            clock: clock::default_clock(),
        }
    }

    /// Read the time from `clock` (periods of a periodic policy).
    pub fn with_clock(mut self, clock: Arc<dyn Clock>) -> Self {
        self.clock = clock;
        self
    }

    /// The state as one JSON object (format version 2): the policy, the
    /// amounts spent (exact sums rounded up) and the release count, the
    /// latest period seen, the charge history as `[period, ε, δ, count]`
    /// entries, the memo keys and the device secret (hexadecimal), e.g.
    /// `{"format":2,"unit":"per-metre","total_epsilon":0.01,…,"charges":[[0,0.0025,0.0,1]],"memo":[],"device_secret":"…"}`.
    /// It holds the device secret: keep it on the device.
    pub fn to_json(&self) -> String {
        let state = StateV2 {
            format: LEDGER_FORMAT_VERSION,
            unit: self.policy.unit().clone(),
            total_epsilon: self.policy.total_epsilon(),
            total_delta: self.policy.total_delta(),
            period_seconds: self.policy.period_seconds(),
            period_epsilon: self.policy.period_epsilon(),
            period_delta: self.policy.period_delta(),
            spent_epsilon: self.lifetime_epsilon.round_up(),
            spent_delta: self.lifetime_delta.round_up(),
            releases: self.releases,
            last_period: self.last_period,
            carried: self.carried,
            charges: self
                .entries
                .iter()
                .map(|e| (e.period, e.epsilon, e.delta, e.count))
                .collect(),
            memo: self.memo.iter().map(|k| to_hex(&k.bytes())).collect(),
            device_secret: to_hex(&self.secret),
            outbox: self.outbox.clone(),
            next_upload: self.next_upload,
            counter_bound: self.counter_bound,
        };
        // Cannot fail: plain fields, no maps; the numbers are finite.
        serde_json::to_string(&state).unwrap_or_default()
    }

    /// Restore a state saved with [`to_json`](Self::to_json) under the
    /// app's pinned `policy` (with the default clock; see
    /// [`with_clock`](Self::with_clock)). Refused with a typed error, never
    /// adopted or silently reset:
    ///
    /// * [`Error::InvalidLedgerState`]: not JSON of this shape, an unknown
    ///   format version, a NaN or infinity, a charge history that does not
    ///   add up to the amounts and release count stated (an edited
    ///   `spent_epsilon`), a period over its limit or the lifetime over
    ///   its cap, a charge in a period after the latest one, duplicate or
    ///   malformed memo keys, more memo keys than releases;
    /// * [`Error::LedgerPolicyMismatch`]: another unit, other totals or
    ///   another period limit than the pinned policy.
    ///
    /// A version-1 state (totals, amounts, count; no history) is migrated:
    /// checked as before and carried over as one lifetime entry, with a
    /// new device secret (`std` only; refused without it).
    pub fn restore(json: &str, policy: &BudgetPolicy) -> Result<Self> {
        let json = json.trim();
        let version: FormatOnly = parse_state(json)?;
        match version.format {
            1 => Self::restore_v1(json, policy),
            LEDGER_FORMAT_VERSION => Self::restore_v2(json, policy),
            v => Err(invalid(format!(
                "format version {v} (this library reads 1 and {LEDGER_FORMAT_VERSION})"
            ))),
        }
    }

    fn restore_v1(json: &str, policy: &BudgetPolicy) -> Result<Self> {
        let s: StateV1 = parse_state(json)?;
        check_policy(
            policy,
            &s.unit,
            &[
                ("total_epsilon", policy.total_epsilon(), s.total_epsilon),
                ("total_delta", policy.total_delta(), s.total_delta),
            ],
        )?;
        for (name, spent, total) in [
            ("spent_epsilon", s.spent_epsilon, s.total_epsilon),
            ("spent_delta", s.spent_delta, s.total_delta),
        ] {
            if !(spent.is_finite() && spent >= 0.0 && spent <= total) {
                return Err(invalid(format!(
                    "{name} = {spent:e} is not in [0, {total:e}]"
                )));
            }
        }
        if (s.releases == 0) != (s.spent_epsilon == 0.0) {
            return Err(invalid(format!(
                "{} release(s) counted but epsilon spent is {:e} (a reset or an edit)",
                s.releases, s.spent_epsilon
            )));
        }
        #[cfg(feature = "std")]
        {
            let mut b = Self::try_new(policy.clone())?;
            if s.releases > 0 {
                b.carried = Some(Carried {
                    epsilon: s.spent_epsilon,
                    delta: s.spent_delta,
                    releases: s.releases,
                });
            }
            b.recompute();
            Ok(b)
        }
        #[cfg(not(feature = "std"))]
        {
            Err(invalid(
                "a version-1 ledger needs a new device secret; migrate it with the std build",
            ))
        }
    }

    fn restore_v2(json: &str, policy: &BudgetPolicy) -> Result<Self> {
        let s: StateV2 = parse_state(json)?;
        check_policy(
            policy,
            &s.unit,
            &[
                ("total_epsilon", policy.total_epsilon(), s.total_epsilon),
                ("total_delta", policy.total_delta(), s.total_delta),
                ("period_epsilon", policy.period_epsilon(), s.period_epsilon),
                ("period_delta", policy.period_delta(), s.period_delta),
            ],
        )?;
        if s.period_seconds != policy.period_seconds() {
            let show = |p: Option<u64>| p.map_or("none".to_string(), |p| p.to_string());
            return Err(policy_mismatch(
                "period_seconds",
                show(policy.period_seconds()),
                show(s.period_seconds),
            ));
        }
        if s.charges.len() > MAX_LEDGER_ENTRIES || s.memo.len() > MAX_MEMO_KEYS {
            return Err(invalid(
                "more history entries or memo keys than a ledger holds",
            ));
        }
        let secret = from_hex("device_secret", &s.device_secret)?;
        if policy.period_seconds().is_none() && s.last_period != 0 {
            return Err(invalid("a period in a lifetime-only ledger"));
        }
        let mut entries = Vec::with_capacity(s.charges.len());
        let mut keys = BTreeSet::new();
        for &(period, epsilon, delta, count) in &s.charges {
            let ok = epsilon.is_finite()
                && epsilon > 0.0
                && delta.is_finite()
                && (0.0..=1.0).contains(&delta)
                && count > 0
                && period <= s.last_period;
            if !ok {
                return Err(invalid(format!(
                    "charge entry [{period}, {epsilon:e}, {delta:e}, {count}] is not one this library writes"
                )));
            }
            // O(n log n): a scan per entry made restoring (done on every
            // charge of a FileLedger) quadratic in the history.
            if !keys.insert((period, epsilon.to_bits(), delta.to_bits())) {
                return Err(invalid("duplicate charge entries"));
            }
            entries.push(Entry {
                period,
                epsilon,
                delta,
                count,
            });
        }
        let mut memo = BTreeSet::new();
        let mut last: Option<MemoKey> = None;
        for k in &s.memo {
            let key = MemoKey::new(&from_hex("memo key", k)?);
            if last.is_some_and(|l| l >= key) {
                return Err(invalid("memo keys not sorted or repeated"));
            }
            last = Some(key);
            memo.insert(key);
        }
        if let Some(c) = s.carried {
            let ok = c.epsilon.is_finite()
                && c.epsilon > 0.0
                && c.delta.is_finite()
                && c.delta >= 0.0
                && c.releases > 0;
            if !ok {
                return Err(invalid("invalid carried-over spending"));
            }
        }
        let mut b = Self::with_secret(policy.clone(), secret);
        b.entries = entries;
        b.memo = memo;
        b.last_period = s.last_period;
        b.carried = s.carried;
        let outbox_ok = s.outbox.len() <= MAX_OUTBOX
            && s.outbox
                .iter()
                .all(|(id, r)| *id < s.next_upload && r.len() <= MAX_UPLOAD_BYTES)
            && s.outbox.windows(2).all(|w| w[0].0 < w[1].0)
            && s.outbox.len() as u64 <= s.releases;
        if !outbox_ok {
            return Err(invalid("the outbox is not one this library writes"));
        }
        b.outbox = s.outbox;
        b.next_upload = s.next_upload;
        b.counter_bound = s.counter_bound;
        b.recompute()
            .ok_or_else(|| invalid("the release count overflows"))?;
        // The history must add up to what the state says it spent.
        let (se, sd) = (b.lifetime_epsilon.round_up(), b.lifetime_delta.round_up());
        if se.to_bits() != s.spent_epsilon.to_bits()
            || sd.to_bits() != s.spent_delta.to_bits()
            || b.releases != s.releases
        {
            return Err(invalid(format!(
                "the charge history adds up to epsilon {se:e}, delta {sd:e} in {} release(s), \
                 but the state says epsilon {:e}, delta {:e} in {} (an edit)",
                b.releases, s.spent_epsilon, s.spent_delta, s.releases
            )));
        }
        if b.memo.len() as u64 > b.releases {
            return Err(invalid("more memo keys than releases"));
        }
        if !(b.lifetime_epsilon.fits(policy.total_epsilon())
            && b.lifetime_delta.fits(policy.total_delta()))
        {
            return Err(invalid(format!(
                "spent epsilon {se:e}, delta {sd:e} exceed the lifetime totals"
            )));
        }
        // Every period's sums in one pass (not one pass per entry).
        let mut periods: BTreeMap<u64, (ExactSum, ExactSum)> = BTreeMap::new();
        for e in &b.entries {
            let sums = periods.entry(e.period).or_default();
            sums.0.add(e.epsilon, e.count);
            sums.1.add(e.delta, e.count);
        }
        for (period, (pe, pd)) in &periods {
            if !(pe.fits(policy.period_epsilon()) && pd.fits(policy.period_delta())) {
                return Err(invalid(format!("period {period} exceeds its limit")));
            }
        }
        Ok(b)
    }

    /// Recompute the derived sums and the release count; `None` on
    /// overflow of the count (checked before each addition, so the sums
    /// never hold more than 2^64 charges: `exact_eps`'s capacity).
    fn recompute(&mut self) -> Option<()> {
        let mut eps = ExactSum::default();
        let mut del = ExactSum::default();
        let mut releases = 0u64;
        if let Some(c) = self.carried {
            eps.add(c.epsilon, 1);
            del.add(c.delta, 1);
            releases = c.releases;
        }
        for e in &self.entries {
            releases = releases.checked_add(e.count)?;
            eps.add(e.epsilon, e.count);
            del.add(e.delta, e.count);
        }
        self.lifetime_epsilon = eps;
        self.lifetime_delta = del;
        self.releases = releases;
        (self.period_epsilon, self.period_delta) = self.scan_period(self.last_period);
        Some(())
    }

    /// Exact (ε, δ) of the history entries in `period`.
    fn scan_period(&self, period: u64) -> (ExactSum, ExactSum) {
        let mut eps = ExactSum::default();
        let mut del = ExactSum::default();
        for e in self.entries.iter().filter(|e| e.period == period) {
            eps.add(e.epsilon, e.count);
            del.add(e.delta, e.count);
        }
        (eps, del)
    }

    /// Exact (ε, δ) charged in `period`: the kept sums for the latest
    /// period, else a scan of the history (empty for a later period).
    fn period_sums(&self, period: u64) -> (ExactSum, ExactSum) {
        if period == self.last_period {
            (self.period_epsilon, self.period_delta)
        } else {
            self.scan_period(period)
        }
    }

    /// The pinned policy (unit, totals, period limit).
    pub fn policy(&self) -> &BudgetPolicy {
        &self.policy
    }

    /// The unit of every ε this ledger counts.
    pub fn unit(&self) -> &BudgetUnit {
        self.policy.unit()
    }

    /// The lifetime ε.
    pub fn total_epsilon(&self) -> f64 {
        self.policy.total_epsilon()
    }

    /// The lifetime δ.
    pub fn total_delta(&self) -> f64 {
        self.policy.total_delta()
    }

    /// ε charged over the ledger's life (the exact sum, rounded up).
    pub fn spent_epsilon(&self) -> f64 {
        self.lifetime_epsilon.round_up()
    }

    /// δ charged over the ledger's life (the exact sum, rounded up).
    pub fn spent_delta(&self) -> f64 {
        self.lifetime_delta.round_up()
    }

    /// Number of releases charged.
    pub fn releases(&self) -> u64 {
        self.releases
    }

    /// The latest period a charge was made in (or seen); charges never go
    /// to an earlier one.
    pub fn last_period(&self) -> u64 {
        self.last_period
    }

    /// The charge history: (period, ε, δ, number of charges) per entry.
    pub fn history(&self) -> impl Iterator<Item = (u64, f64, f64, u64)> + '_ {
        self.entries
            .iter()
            .map(|e| (e.period, e.epsilon, e.delta, e.count))
    }

    /// The device secret: 32 bytes from the operating system's generator,
    /// created with the ledger and stored with it; never uploaded (the
    /// seed of memoized releases and report schedules, SPEC §12).
    pub fn device_secret(&self) -> [u8; 32] {
        self.secret
    }

    /// How many distinct memo keys (memoized cells) have been charged.
    pub fn memo_key_count(&self) -> usize {
        self.memo.len()
    }

    /// Whether `memo_key` was already charged ([`commit_once`](Self::commit_once)).
    pub fn is_memoized(&self, memo_key: &[u8; 32]) -> bool {
        self.memo.contains(&MemoKey::new(memo_key))
    }

    /// The period a charge made now goes to: the clock's period, or the
    /// latest period already seen if the clock is behind it (no refund).
    fn current_period(&self) -> Result<u64> {
        if self.policy.period_seconds().is_none() {
            return Ok(0);
        }
        let now = self.clock.now_unix_seconds()?;
        Ok(self.policy.period_of(now).max(self.last_period))
    }

    /// What is left now, this period and over the lifetime (rounded down).
    /// If the clock cannot be read, the figures are for the latest period
    /// seen.
    pub fn remaining(&self) -> Remaining {
        let period = self.current_period().unwrap_or(self.last_period);
        let (pe, pd) = self.period_sums(period);
        let p = &self.policy;
        let period_epsilon = pe.remaining_in(p.period_epsilon());
        let period_delta = pd.remaining_in(p.period_delta());
        let lifetime_epsilon = self.lifetime_epsilon.remaining_in(p.total_epsilon());
        let lifetime_delta = self.lifetime_delta.remaining_in(p.total_delta());
        Remaining {
            period,
            period_epsilon,
            period_delta,
            lifetime_epsilon,
            lifetime_delta,
            epsilon: period_epsilon.min(lifetime_epsilon),
            delta: period_delta.min(lifetime_delta),
        }
    }

    /// Whether `charge` can be made now, and how: the refusal (unit first,
    /// then the clock, then the period's and the lifetime totals, then the
    /// release counter and the history's size), or what
    /// [`apply`](Self::apply) changes. Nothing is copied or allocated: the
    /// period's and the lifetime's running sums each take one exact
    /// addition and one compare against the total's exact bound.
    pub(crate) fn check(&self, charge: &Charge) -> Result<Plan> {
        self.check_n(charge, 1)
    }

    /// Whether `n ≥ 1` equal charges can be made now, in closed form
    /// (attack11 O3): the exact sum of n charges of ε is the integer
    /// n·m·2^p for ε = m·2^p (m < 2^53, n < 2^64: one product below 2^117,
    /// [`Window::of`]), compared once with each total's exact bound. The
    /// charges are non-negative, so n fit iff every prefix does, and the
    /// answer (and the refusal's kind) is the one of [`check`](Self::check)
    /// and [`apply`](Self::apply) repeated n times on one clock reading:
    ///
    /// * the first charge is checked as [`check`](Self::check) does (unit,
    ///   clock, budget, release counter, history size);
    /// * with `room` = u64::MAX − releases, the repetition stops at charge
    ///   min(n, room + 1): a budget refusal if that many charges do not fit
    ///   (some charge up to it is the first that does not), otherwise the
    ///   release counter's overflow if n > room, otherwise all n fit.
    ///
    /// A refusal reports the budget left before the call (nothing is
    /// charged). The cost does not depend on n. All n charges go to the
    /// period read once from the clock (a repeated check reads the clock
    /// per charge; a period that ends mid-loop could only have admitted
    /// more, never fewer).
    pub(crate) fn check_n(&self, charge: &Charge, n: u64) -> Result<Plan> {
        if n == 0 {
            // Callers return early; a plan must record at least one charge.
            return Err(invalid("a plan of zero charges"));
        }
        if charge.unit() != self.unit() {
            return Err(Error::UnitMismatch {
                ledger: self.unit().clone(),
                charge: Some(charge.unit().clone()),
            });
        }
        let period = self.current_period()?;
        let (epsilon, delta) = (charge.epsilon(), charge.delta());
        // The sums already in `period`: the kept ones for the latest
        // period; none in a later one (no entry is after `last_period`).
        let (pe, pd) = if period == self.last_period {
            (&self.period_epsilon, &self.period_delta)
        } else {
            (&ZERO, &ZERO)
        };
        let p = &self.policy;
        let fit = |count: u64| {
            let (ce, cd) = (Window::of(epsilon, count), Window::of(delta, count));
            pe.window_fits(&ce, &Window::cap(p.period_epsilon()))
                && pd.window_fits(&cd, &Window::cap(p.period_delta()))
                && self
                    .lifetime_epsilon
                    .window_fits(&ce, &Window::cap(p.total_epsilon()))
                && self
                    .lifetime_delta
                    .window_fits(&cd, &Window::cap(p.total_delta()))
        };
        let over = || {
            let left = self.remaining();
            Error::BudgetExceeded {
                requested_epsilon: epsilon,
                remaining_epsilon: left.epsilon,
                requested_delta: delta,
                remaining_delta: left.delta,
            }
        };
        if !fit(1) {
            return Err(over());
        }
        let overflow = || invalid("the release counter would overflow");
        let room = u64::MAX - self.releases;
        if room == 0 {
            return Err(overflow());
        }
        let entry = Entry {
            period,
            epsilon,
            delta,
            count: n,
        };
        // Keys are unique, so searching from the end finds the same entry
        // (the current period's entries are the latest ones).
        let slot = match self.entries.iter().rposition(|e| same_key(e, &entry)) {
            Some(i) => Some(i),
            None if self.entries.len() >= MAX_LEDGER_ENTRIES => {
                return Err(Error::LimitExceeded {
                    what: "distinct (period, epsilon, delta) entries in a ledger",
                    requested: self.entries.len() as u64 + 1,
                    limit: MAX_LEDGER_ENTRIES as u64,
                })
            }
            None => None,
        };
        if n > 1 {
            // room + 1 <= n <= u64::MAX when n > room.
            let last = if n > room { room + 1 } else { n };
            if !fit(last) {
                return Err(over());
            }
            if n > room {
                return Err(overflow());
            }
        }
        Ok(Plan {
            entry,
            slot,
            releases: self.releases + n,
        })
    }

    /// Make a charge [`check`](Self::check)ed on this same state.
    fn apply(&mut self, plan: Plan) {
        let Plan {
            entry,
            slot,
            releases,
        } = plan;
        match slot.and_then(|i| self.entries.get_mut(i)) {
            // Cannot overflow: count + entry.count <= releases (checked).
            Some(e) => e.count += entry.count,
            None => self.entries.push(entry),
        }
        if entry.period != self.last_period {
            self.period_epsilon = ZERO;
            self.period_delta = ZERO;
        }
        let (ce, cd) = (
            Window::of(entry.epsilon, entry.count),
            Window::of(entry.delta, entry.count),
        );
        self.period_epsilon.add_window(&ce);
        self.period_delta.add_window(&cd);
        self.lifetime_epsilon.add_window(&ce);
        self.lifetime_delta.add_window(&cd);
        self.last_period = entry.period;
        self.releases = releases;
    }

    /// The state after charging `charge` now, or the refusal (see
    /// [`check`](Self::check)). (`FileLedger`'s locked update.)
    #[cfg(feature = "std")]
    pub(crate) fn after(&self, charge: &Charge) -> Result<Self> {
        let plan = self.check(charge)?;
        let mut next = self.clone();
        next.apply(plan);
        Ok(next)
    }

    /// The state after charging `charge` once for `memo_key`: `None` if the
    /// key was already charged (nothing to do; the unit is still checked).
    /// (`FileLedger`'s locked update; the in-memory ledger commits in place.)
    #[cfg(feature = "std")]
    pub(crate) fn after_once(&self, memo_key: [u8; 32], charge: &Charge) -> Result<Option<Self>> {
        if !self.memo_new(&memo_key, charge)? {
            return Ok(None);
        }
        let mut next = self.after(charge)?;
        next.memo.insert(MemoKey::new(&memo_key));
        Ok(Some(next))
    }

    /// Whether `memo_key` is new to the memo table (`false`: it is there
    /// already); refused for another unit or a full table.
    #[cfg(feature = "std")]
    fn memo_new(&self, memo_key: &[u8; 32], charge: &Charge) -> Result<bool> {
        self.same_unit(charge)?;
        if self.memo.contains(&MemoKey::new(memo_key)) {
            return Ok(false);
        }
        self.memo_room()?;
        Ok(true)
    }

    /// Refused if the memo table is full.
    fn memo_room(&self) -> Result<()> {
        if self.memo.len() >= MAX_MEMO_KEYS {
            return Err(Error::LimitExceeded {
                what: "memo keys in a ledger",
                requested: self.memo.len() as u64 + 1,
                limit: MAX_MEMO_KEYS as u64,
            });
        }
        Ok(())
    }

    /// Refused if `charge` is in another unit than the ledger.
    fn same_unit(&self, charge: &Charge) -> Result<()> {
        if charge.unit() != self.unit() {
            return Err(Error::UnitMismatch {
                ledger: self.unit().clone(),
                charge: Some(charge.unit().clone()),
            });
        }
        Ok(())
    }

    /// Reports charged but not yet acknowledged (oldest first), each with
    /// its id (`FileLedger::spend_to_outbox`).
    pub fn pending_uploads(&self) -> &[(u64, String)] {
        &self.outbox
    }

    /// Refused if the outbox cannot take one more report of `bytes` bytes.
    #[cfg(feature = "std")]
    pub(crate) fn outbox_room(&self, bytes: usize) -> Result<()> {
        if self.outbox.len() >= MAX_OUTBOX {
            return Err(Error::LimitExceeded {
                what: "reports waiting in the ledger's outbox",
                requested: self.outbox.len() as u64 + 1,
                limit: MAX_OUTBOX as u64,
            });
        }
        if bytes > MAX_UPLOAD_BYTES {
            return Err(Error::LimitExceeded {
                what: "bytes of a report in the ledger's outbox",
                requested: bytes as u64,
                limit: MAX_UPLOAD_BYTES as u64,
            });
        }
        Ok(())
    }

    /// The state after charging `charge` and putting `report` in the
    /// outbox (same write), with the report's id.
    #[cfg(feature = "std")]
    pub(crate) fn after_to_outbox(&self, charge: &Charge, report: String) -> Result<(Self, u64)> {
        self.outbox_room(report.len())?;
        let mut next = self.after(charge)?;
        let id = next.next_upload;
        next.next_upload = id
            .checked_add(1)
            .ok_or_else(|| invalid("the outbox id would overflow"))?;
        next.outbox.push((id, report));
        Ok((next, id))
    }

    /// The state without the acknowledged reports.
    #[cfg(feature = "std")]
    pub(crate) fn acknowledged(&self, ids: &[u64]) -> Self {
        let mut next = self.clone();
        next.outbox.retain(|(id, _)| !ids.contains(id));
        next
    }

    /// Whether `charge` would be accepted now.
    pub fn can_afford(&self, charge: &Charge) -> bool {
        self.check(charge).is_ok()
    }

    /// Charge a release. Refused with [`Error::UnitMismatch`] or
    /// [`Error::BudgetExceeded`] if it is in another unit or would exceed
    /// the period's or the lifetime totals; a refused charge leaves the
    /// ledger unchanged.
    ///
    /// Charge *before* releasing. Prefer [`Ledger::spend`], which ties the
    /// charge to the release.
    pub fn try_charge(&mut self, charge: &Charge) -> Result<()> {
        let plan = self.check(charge)?;
        self.apply(plan);
        Ok(())
    }

    /// Charge `charge` once per `memo_key` (a memoized answer, SPEC §12.3):
    /// `Ok(true)` if it was charged now and the key recorded (in the same
    /// state change), `Ok(false)` if the key was already charged (nothing
    /// charged). The same refusals as [`Ledger::commit`], including the
    /// period's and the lifetime limits; a refusal changes nothing.
    ///
    /// ```
    /// use geopriv::device::budget::{BudgetPolicy, BudgetUnit, Charge, PrivacyBudget};
    /// let mut b = PrivacyBudget::new(BudgetPolicy::new(BudgetUnit::PerDollar, 1e-3, 0.0)?);
    /// let c = Charge::new(BudgetUnit::PerDollar, 1e-3, 0.0)?;
    /// assert!(b.commit_once([7; 32], &c)?);
    /// assert!(!b.commit_once([7; 32], &c)?); // the same answer again: free
    /// assert!(b.commit_once([8; 32], &c).is_err()); // a new answer: over budget
    /// # Ok::<(), geopriv::Error>(())
    /// ```
    pub fn commit_once(&mut self, memo_key: [u8; 32], charge: &Charge) -> Result<bool> {
        // `after_once` in place with one search of the table: the key is
        // inserted first (an insert finds a known key and changes nothing),
        // then the charge is checked and applied, or the key taken out
        // again (a refusal changes nothing).
        self.same_unit(charge)?;
        let key = MemoKey::new(&memo_key);
        if self.memo.len() >= MAX_MEMO_KEYS {
            if self.memo.contains(&key) {
                return Ok(false);
            }
            self.memo_room()?;
        }
        if !self.memo.insert(key) {
            return Ok(false);
        }
        match self.check(charge) {
            Ok(plan) => {
                self.apply(plan);
                Ok(true)
            }
            Err(e) => {
                self.memo.remove(&key);
                Err(e)
            }
        }
    }

    /// The largest (ε, δ) share such that `releases` charges of it fit
    /// what is left now (this period and the lifetime), checked exactly as
    /// `releases` charges one after the other would be (in closed form, at
    /// a cost independent of `releases`). `None` if `releases` is 0 or
    /// nothing is left.
    pub fn even_split(&self, releases: u64) -> Option<(f64, f64)> {
        if releases == 0 {
            return None;
        }
        let left = self.remaining();
        let n = releases as f64;
        let mut shrink = 0.0;
        for _ in 0..16 {
            let e = left.epsilon / n * (1.0 - shrink);
            let d = left.delta / n * (1.0 - shrink);
            let charge = Charge::new(self.unit().clone(), e, d).ok()?;
            // The replay in closed form (attack11 O3): cost independent of
            // `releases`.
            if self.check_n(&charge, releases).is_ok() {
                return Some((e, d));
            }
            shrink = if shrink == 0.0 {
                f64::EPSILON
            } else {
                shrink * 4.0
            };
        }
        None
    }

    /// Whether `newer` can follow `self`: the same secret, at least the
    /// same releases, every entry and memo key of `self` still there with
    /// at least its count (another writer may only have added charges).
    #[cfg(feature = "std")]
    pub(crate) fn is_prefix_of(&self, newer: &Self) -> bool {
        self.secret == newer.secret
            && self.carried == newer.carried
            && newer.releases >= self.releases
            && newer.last_period >= self.last_period
            && {
                // O(n log n), not a scan of `newer` per entry.
                let key = |e: &Entry| (e.period, e.epsilon.to_bits(), e.delta.to_bits());
                let counts: BTreeMap<_, u64> =
                    newer.entries.iter().map(|n| (key(n), n.count)).collect();
                self.entries
                    .iter()
                    .all(|e| counts.get(&key(e)).is_some_and(|&c| c >= e.count))
            }
            && self.memo.iter().all(|k| newer.memo.contains(k))
            && (newer.counter_bound || !self.counter_bound)
    }

    /// Whether a writer tied to a platform monotonic counter has written
    /// this state (see `FileLedger::with_counter`): such a ledger is
    /// charged only by writers that hold the counter. A fresh state is not
    /// bound, and a bound one stays bound (a state that drops the mark is
    /// not accepted as the continuation of one that had it).
    ///
    /// ```
    /// use geopriv::device::budget::{BudgetPolicy, BudgetUnit, PrivacyBudget};
    /// let policy = BudgetPolicy::new(BudgetUnit::PerMetre, 0.5, 0.0)?;
    /// assert!(!PrivacyBudget::with_secret(policy, [7; 32]).is_counter_bound());
    /// # Ok::<(), geopriv::Error>(())
    /// ```
    pub fn is_counter_bound(&self) -> bool {
        self.counter_bound
    }

    /// This state, marked as written under a monotonic counter.
    #[cfg(feature = "std")]
    pub(crate) fn bound_to_counter(&self) -> Self {
        let mut next = self.clone();
        next.counter_bound = true;
        next
    }

    /// This ledger's clock (given to a state read from disk).
    #[cfg(feature = "std")]
    pub(crate) fn clock(&self) -> Arc<dyn Clock> {
        self.clock.clone()
    }
}

/// Checked charges: their history entry (count n, the number of equal
/// charges), the index of the entry with the same key if there is one,
/// and the release count after them.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Plan {
    entry: Entry,
    slot: Option<usize>,
    releases: u64,
}

/// The empty sum.
const ZERO: ExactSum = ExactSum::ZERO;

fn same_key(a: &Entry, b: &Entry) -> bool {
    a.period == b.period
        && a.epsilon.to_bits() == b.epsilon.to_bits()
        && a.delta.to_bits() == b.delta.to_bits()
}

impl Ledger for PrivacyBudget {
    fn state(&self) -> &PrivacyBudget {
        self
    }

    fn commit(&mut self, charge: &Charge) -> Result<()> {
        self.try_charge(charge)
    }

    /// The n charges in closed form (see [`Ledger::commit_n`]).
    fn commit_n(&mut self, charge: &Charge, n: u64) -> Result<()> {
        if n == 0 {
            return Ok(());
        }
        let plan = self.check_n(charge, n)?;
        self.apply(plan);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn budget(total_epsilon: f64, total_delta: f64) -> PrivacyBudget {
        PrivacyBudget::new(
            BudgetPolicy::new(BudgetUnit::PerMetre, total_epsilon, total_delta).unwrap(),
        )
    }

    fn charge(epsilon: f64, delta: f64) -> Charge {
        Charge::new(BudgetUnit::PerMetre, epsilon, delta).unwrap()
    }

    /// How many charges of `each` fit `total`.
    fn fits(total: f64, each: f64) -> u64 {
        let mut b = budget(total, 0.0);
        let mut n = 0;
        while b.try_charge(&charge(each, 0.0)).is_ok() {
            n += 1;
        }
        n
    }

    #[test]
    fn k_shares_always_fit_and_one_more_never_does() {
        // The issue's cases (issue 19 item 2): 9 and 1,499 before.
        assert_eq!(fits(1e-3, 1e-4), 10);
        assert_eq!(fits(1500.0 * (1.0 / 5000.0), 1.0 / 5000.0), 1500);
        assert_eq!(fits(1.0, 0.1), 10);
        // 11 × fl(1/11) is above 1 exactly: the slack admits it.
        assert_eq!(fits(1.0, 1.0 / 11.0), 11);
        // k shares of T/k for many T and k, computed two ways.
        let mut rng = 0x9e37_79b9_7f4a_7c15u64;
        for k in [1u64, 2, 3, 7, 10, 11, 49, 100, 997, 1000] {
            for _ in 0..5 {
                rng ^= rng << 13;
                rng ^= rng >> 7;
                rng ^= rng << 17;
                let t = f64::from_bits(0x3e00_0000_0000_0000 | (rng >> 12)) * 1e3;
                for share in [t / k as f64, t * (1.0 / k as f64)] {
                    let mut b = budget(t, 0.0);
                    for _ in 0..k {
                        b.try_charge(&charge(share, 0.0)).unwrap();
                    }
                    assert!(b.try_charge(&charge(share, 0.0)).is_err(), "k={k} t={t:e}");
                }
            }
        }
    }

    #[test]
    fn other_units_are_refused_and_nothing_changes() {
        let mut b = budget(1.0, 0.0);
        let before = b.clone();
        for unit in [
            BudgetUnit::LocalDp,
            BudgetUnit::PerDollar,
            BudgetUnit::PerMercatorMetre,
            BudgetUnit::custom("per-km").unwrap(),
        ] {
            let e = b.try_charge(&Charge::new(unit, 0.1, 0.0).unwrap());
            assert!(matches!(e, Err(Error::UnitMismatch { .. })), "{e:?}");
        }
        assert_eq!(b, before);
    }

    #[test]
    fn budget_messages_print_short_scientific_numbers() {
        let mut b = budget(1500.0 * (1.0 / 5000.0), 0.0);
        for _ in 0..1499 {
            b.try_charge(&charge(1.0 / 5000.0, 0.0)).unwrap();
        }
        b.try_charge(&charge(1.0 / 5000.0, 0.0)).unwrap();
        let msg = b
            .try_charge(&charge(1.0 / 5000.0, 0.0))
            .unwrap_err()
            .to_string();
        assert!(msg.contains("epsilon 2e-4 "), "{msg}");
    }

    #[test]
    fn periods_limit_each_period_and_the_lifetime_and_never_refund() {
        let clock = ManualClock::new(10 * 86_400 + 5);
        let policy =
            BudgetPolicy::periodic(BudgetUnit::PerDollar, 2e-4, 0.0, 86_400, 1e-3, 0.0).unwrap();
        let mut b = PrivacyBudget::new(policy).with_clock(Arc::new(clock.clone()));
        let c = Charge::new(BudgetUnit::PerDollar, 1e-4, 0.0).unwrap();
        let mut per_day = Vec::new();
        for _day in 0..7 {
            let mut n = 0;
            while b.try_charge(&c).is_ok() {
                n += 1;
            }
            per_day.push(n);
            assert_eq!(b.remaining().epsilon, 0.0);
            clock.advance(86_400);
        }
        // Two a day for five days, then the lifetime cap.
        assert_eq!(per_day, [2, 2, 2, 2, 2, 0, 0]);
        assert_eq!(b.releases(), 10);
        assert_eq!(b.remaining().lifetime_epsilon, 0.0);
        // Every charge carries its period.
        let periods: Vec<u64> = b.history().map(|h| h.0).collect();
        assert_eq!(periods, [10, 11, 12, 13, 14]);

        // A clock that goes back charges the latest period: no refund.
        let clock = ManualClock::new(20 * 86_400);
        let policy =
            BudgetPolicy::periodic(BudgetUnit::PerDollar, 2e-4, 0.0, 86_400, 1.0, 0.0).unwrap();
        let mut b = PrivacyBudget::new(policy).with_clock(Arc::new(clock.clone()));
        b.try_charge(&c).unwrap();
        b.try_charge(&c).unwrap();
        clock.set(3 * 86_400);
        assert!(b.try_charge(&c).is_err());
        let r = b.remaining();
        assert_eq!((r.period, r.period_epsilon), (20, 0.0));
        clock.set(21 * 86_400);
        b.try_charge(&c).unwrap();
        let json = b.to_json();
        let again = PrivacyBudget::restore(&json, b.policy()).unwrap();
        assert_eq!(again, b);
        assert_eq!(again.last_period(), 21);
    }

    #[test]
    fn memo_charges_are_idempotent_and_limited() {
        let policy =
            BudgetPolicy::periodic(BudgetUnit::PerDollar, 1e-3, 0.0, 86_400, 2e-3, 0.0).unwrap();
        let clock = ManualClock::new(0);
        let mut b = PrivacyBudget::new(policy).with_clock(Arc::new(clock.clone()));
        let c = Charge::new(BudgetUnit::PerDollar, 1e-3, 0.0).unwrap();
        assert!(b.commit_once([1; 32], &c).unwrap());
        for _ in 0..3 {
            assert!(!b.commit_once([1; 32], &c).unwrap());
        }
        assert_eq!(b.releases(), 1);
        // A new key today: over the period's limit, nothing recorded.
        let before = b.clone();
        assert!(matches!(
            b.commit_once([2; 32], &c),
            Err(Error::BudgetExceeded { .. })
        ));
        assert_eq!(b, before);
        assert!(!b.is_memoized(&[2; 32]));
        clock.advance(86_400);
        assert!(b.commit_once([2; 32], &c).unwrap());
        clock.advance(86_400);
        // Lifetime spent: a third key is refused, old keys stay free.
        assert!(b.commit_once([3; 32], &c).is_err());
        assert!(!b.commit_once([2; 32], &c).unwrap());
        // The unit is checked even for a known key.
        let ldp = Charge::new(BudgetUnit::LocalDp, 1e-3, 0.0).unwrap();
        assert!(b.commit_once([1; 32], &ldp).is_err());
        let again = PrivacyBudget::restore(&b.to_json(), b.policy()).unwrap();
        assert_eq!(again, b);
        assert!(again.is_memoized(&[1; 32]) && again.is_memoized(&[2; 32]));
    }

    /// The B-tree memo table is written in byte order, as the sorted `Vec`
    /// it replaced was (the file format is unchanged): keys that differ
    /// first in the last byte, the 16th (the word boundary) or the first,
    /// inserted out of order, come back sorted, and the state reads back.
    #[test]
    fn memo_table_is_written_in_byte_order() {
        let policy = BudgetPolicy::new(BudgetUnit::PerDollar, 1.0, 0.0).unwrap();
        let mut b = PrivacyBudget::with_secret(policy, [3; 32]);
        let c = Charge::new(BudgetUnit::PerDollar, 1e-3, 0.0).unwrap();
        let key = |i: usize, v: u8| {
            let mut k = [0x80u8; 32];
            k[i] = v;
            k
        };
        let mut keys = alloc::vec![
            key(31, 0xff),
            key(15, 0x01),
            key(16, 0x7f),
            key(0, 0xfe),
            key(0, 0x00),
            key(31, 0x00),
            key(16, 0x81),
            [0xff; 32],
            [0; 32],
        ];
        for k in &keys {
            assert!(b.commit_once(*k, &c).unwrap());
        }
        keys.sort();
        let json = b.to_json();
        let written: Vec<String> = keys.iter().map(to_hex).collect();
        assert!(
            json.contains(&format!(
                "\"memo\":{}",
                serde_json::to_string(&written).unwrap()
            )),
            "{json}"
        );
        let again = PrivacyBudget::restore(&json, b.policy()).unwrap();
        assert_eq!(again, b);
        assert!(keys.iter().all(|k| again.is_memoized(k)));
        assert!(!again.is_memoized(&key(31, 0x01)));
    }

    #[test]
    fn the_device_secret_is_random_kept_and_never_debug_printed() {
        let a = budget(1.0, 0.0);
        let b = budget(1.0, 0.0);
        assert_ne!(a.device_secret(), b.device_secret());
        assert_ne!(a.device_secret(), [0; 32]);
        let hex = to_hex(&a.device_secret());
        assert!(!format!("{a:?}").contains(&hex));
        assert!(a.to_json().contains(&hex));
        let back = PrivacyBudget::restore(&a.to_json(), a.policy()).unwrap();
        assert_eq!(back.device_secret(), a.device_secret());
    }

    #[test]
    fn restore_checks_the_pinned_policy_and_the_history() {
        let mut b = budget(0.01, 1e-6);
        b.try_charge(&charge(0.003, 1e-7)).unwrap();
        b.try_charge(&charge(0.003, 1e-7)).unwrap();
        let json = b.to_json();
        assert_eq!(PrivacyBudget::restore(&json, b.policy()).unwrap(), b);
        let other = |u, e, d| BudgetPolicy::new(u, e, d).unwrap();
        let daily =
            BudgetPolicy::periodic(BudgetUnit::PerMetre, 0.01, 1e-6, 86_400, 0.01, 1e-6).unwrap();
        for (policy, field) in [
            (other(BudgetUnit::PerDollar, 0.01, 1e-6), "unit"),
            (other(BudgetUnit::PerMercatorMetre, 0.01, 1e-6), "unit"),
            (other(BudgetUnit::PerMetre, 0.02, 1e-6), "total_epsilon"),
            (other(BudgetUnit::PerMetre, 0.01, 0.0), "total_delta"),
            (daily, "period_seconds"),
        ] {
            match PrivacyBudget::restore(&json, &policy) {
                Err(Error::LedgerPolicyMismatch { field: f, .. }) => assert_eq!(f, field),
                other => panic!("{field}: {other:?}"),
            }
        }
        assert!(json.contains("\"spent_epsilon\":0.006,"), "{json}");
        for bad in [
            // Spent edited down with the release count kept (issue 19 item 6).
            json.replace("\"spent_epsilon\":0.006", "\"spent_epsilon\":1e-300"),
            json.replace("\"spent_epsilon\":0.006", "\"spent_epsilon\":0.0"),
            json.replace("\"spent_epsilon\":0.006", "\"spent_epsilon\":0.5"),
            json.replace("\"releases\":2", "\"releases\":1"),
            json.replace("\"spent_delta\":2e-7", "\"spent_delta\":1e-5"),
            // The history edited: amounts no longer add up.
            json.replace("[0,0.003,1e-7,2]", "[0,0.003,1e-7,1]"),
            json.replace("[0,0.003,1e-7,2]", "[0,0.003,1e-7,0]"),
            json.replace("[0,0.003,1e-7,2]", "[0,-0.003,1e-7,2]"),
            json.replace("[0,0.003,1e-7,2]", "[5,0.003,1e-7,2]"),
            json.replace("\"memo\":[]", &format!("\"memo\":[\"{}\"]", "0".repeat(63))),
            json.replace("\"format\":2", "\"format\":3"),
            json.replace("\"releases\":2", "\"releases\":2,\"x\":1"),
            json.replace("0.003", "NaN"),
            json.replace("\"device_secret\":\"", "\"device_secret\":\"zz"),
            String::new(),
            "{}".to_string(),
        ] {
            assert_ne!(bad, json, "test case did not apply");
            assert!(
                matches!(
                    PrivacyBudget::restore(&bad, b.policy()),
                    Err(Error::InvalidLedgerState { .. })
                ),
                "{bad}"
            );
        }
        // Over budget by history (the totals edited consistently).
        let over = json
            .replace("[0,0.003,1e-7,2]", "[0,0.003,1e-7,4]")
            .replace("\"spent_epsilon\":0.006", "\"spent_epsilon\":0.012")
            .replace("\"spent_delta\":2e-7", "\"spent_delta\":4e-7")
            .replace("\"releases\":2", "\"releases\":4");
        let e = PrivacyBudget::restore(&over, b.policy()).unwrap_err();
        assert!(e.to_string().contains("exceed"), "{e}");
    }

    /// The decision of the ledger before the running sums: the period's
    /// and the lifetime's sums summed afresh from the history with the
    /// `Vec<u32>` oracle, the charge added, each compared with its total.
    fn oracle_admits(b: &PrivacyBudget, period: u64, c: &Charge) -> bool {
        use exact_eps::oracle::ExactSum as O;
        let (mut pe, mut pd, mut le, mut ld) =
            (O::default(), O::default(), O::default(), O::default());
        if let Some(k) = b.carried {
            le = le.plus(&O::of(k.epsilon, 1));
            ld = ld.plus(&O::of(k.delta, 1));
        }
        for e in &b.entries {
            if e.period == period {
                pe = pe.plus(&O::of(e.epsilon, e.count));
                pd = pd.plus(&O::of(e.delta, e.count));
            }
            le = le.plus(&O::of(e.epsilon, e.count));
            ld = ld.plus(&O::of(e.delta, e.count));
        }
        let (ce, cd) = (O::of(c.epsilon(), 1), O::of(c.delta(), 1));
        let p = b.policy();
        pe.plus(&ce).fits(p.period_epsilon())
            && pd.plus(&cd).fits(p.period_delta())
            && le.plus(&ce).fits(p.total_epsilon())
            && ld.plus(&cd).fits(p.total_delta())
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(300))]

        /// Random charge sequences on a daily ledger whose clock moves
        /// forwards and back: every decision is the oracle's, the kept
        /// period sums are the history's, the spent and remaining amounts
        /// are the oracle's, and a saved state restores to the same
        /// ledger.
        #[test]
        fn decisions_match_the_vec_oracle(
            total in 1e-300f64..1e3,
            per_period in 0.05f64..1.0,
            k in 1u64..40,
            steps in proptest::collection::vec((-2i64..3, 0usize..6, proptest::bool::ANY), 1..80),
        ) {
            use exact_eps::oracle::ExactSum as O;
            let period_total = total * per_period;
            let policy = BudgetPolicy::periodic(
                BudgetUnit::PerDollar, period_total, 1e-6, 86_400, total, 1e-5,
            ).unwrap();
            let day0 = 1_000u64;
            let clock = ManualClock::new(day0 * 86_400);
            let mut b = PrivacyBudget::with_secret(policy.clone(), [3; 32])
                .with_clock(Arc::new(clock.clone()));
            let mut day = day0 as i64;
            for (i, &(move_days, kind, memo)) in steps.iter().enumerate() {
                day = (day + move_days).max(0);
                clock.set(day as u64 * 86_400 + 7);
                let epsilon = match kind {
                    0 => period_total / k as f64,
                    1 => total / k as f64,
                    2 => f64::from_bits(1 + i as u64), // subnormal
                    3 => period_total * (1.0 / k as f64),
                    4 => period_total,
                    _ => total / 3.0,
                };
                let c = Charge::new(BudgetUnit::PerDollar, epsilon, 1e-7 * (kind % 2) as f64)
                    .unwrap();
                let period = (day as u64).max(b.last_period());
                let expected = oracle_admits(&b, period, &c);
                let got = if memo {
                    b.commit_once([i as u8; 32], &c).is_ok()
                } else {
                    b.try_charge(&c).is_ok()
                };
                proptest::prop_assert_eq!(got, expected, "step {}", i);
                proptest::prop_assert_eq!(b.can_afford(&c), oracle_admits(&b, period, &c));
                let (pe, pd) = b.scan_period(b.last_period);
                proptest::prop_assert_eq!((b.period_epsilon, b.period_delta), (pe, pd));
                let mut le = O::default();
                for e in &b.entries {
                    le = le.plus(&O::of(e.epsilon, e.count));
                }
                proptest::prop_assert_eq!(b.spent_epsilon().to_bits(), le.round_up().to_bits());
                proptest::prop_assert_eq!(
                    b.remaining().lifetime_epsilon.to_bits(),
                    le.remaining_in(total).to_bits()
                );
            }
            let again = PrivacyBudget::restore(&b.to_json(), &policy).unwrap();
            proptest::prop_assert_eq!(&again, &b);
            proptest::prop_assert_eq!(
                (again.period_epsilon, again.lifetime_epsilon),
                (b.period_epsilon, b.lifetime_epsilon)
            );
        }
    }

    #[test]
    fn version_1_states_are_migrated_or_refused() {
        let p = BudgetPolicy::new(BudgetUnit::PerMetre, 0.01, 1e-6).unwrap();
        let v1 = r#"{"format":1,"unit":"per-metre","total_epsilon":0.01,"total_delta":1e-6,"spent_epsilon":0.004,"spent_delta":0.0,"releases":2}"#;
        let mut b = PrivacyBudget::restore(v1, &p).unwrap();
        assert_eq!((b.releases(), b.spent_epsilon()), (2, 0.004));
        b.try_charge(&charge(0.006, 0.0)).unwrap();
        assert!(b.try_charge(&charge(1e-4, 0.0)).is_err());
        let again = PrivacyBudget::restore(&b.to_json(), &p).unwrap();
        assert_eq!(again, b);
        for bad in [
            v1.replace("\"releases\":2", "\"releases\":0"),
            v1.replace("0.004", "0.02"),
        ] {
            assert!(PrivacyBudget::restore(&bad, &p).is_err(), "{bad}");
        }
        let other = BudgetPolicy::new(BudgetUnit::PerMetre, 0.02, 1e-6).unwrap();
        assert!(matches!(
            PrivacyBudget::restore(v1, &other),
            Err(Error::LedgerPolicyMismatch { .. })
        ));
    }

    /// The check of n equal charges as it was before attack11 O3 (kept as
    /// the oracle of `check_n`): `check` and `apply` of one charge,
    /// verbatim, repeated on a copy until one is refused. `None` if that
    /// takes more than `cap` charges.
    fn commit_n_by_loop(
        b: &PrivacyBudget,
        c: &Charge,
        n: u64,
        cap: u64,
    ) -> Option<Result<PrivacyBudget>> {
        fn old_check(b: &PrivacyBudget, charge: &Charge) -> Result<Plan> {
            if charge.unit() != b.unit() {
                return Err(Error::UnitMismatch {
                    ledger: b.unit().clone(),
                    charge: Some(charge.unit().clone()),
                });
            }
            let period = b.current_period()?;
            let (epsilon, delta) = (charge.epsilon(), charge.delta());
            let (pe, pd) = if period == b.last_period {
                (&b.period_epsilon, &b.period_delta)
            } else {
                (&ZERO, &ZERO)
            };
            let p = &b.policy;
            let (ce, cd) = (Window::of(epsilon, 1), Window::of(delta, 1));
            if !(pe.window_fits(&ce, &Window::cap(p.period_epsilon()))
                && pd.window_fits(&cd, &Window::cap(p.period_delta()))
                && b.lifetime_epsilon
                    .window_fits(&ce, &Window::cap(p.total_epsilon()))
                && b.lifetime_delta
                    .window_fits(&cd, &Window::cap(p.total_delta())))
            {
                let left = b.remaining();
                return Err(Error::BudgetExceeded {
                    requested_epsilon: epsilon,
                    remaining_epsilon: left.epsilon,
                    requested_delta: delta,
                    remaining_delta: left.delta,
                });
            }
            let releases = b
                .releases
                .checked_add(1)
                .ok_or_else(|| invalid("the release counter would overflow"))?;
            let entry = Entry {
                period,
                epsilon,
                delta,
                count: 1,
            };
            let slot = match b.entries.iter().rposition(|e| same_key(e, &entry)) {
                Some(i) => Some(i),
                None if b.entries.len() >= MAX_LEDGER_ENTRIES => {
                    return Err(Error::LimitExceeded {
                        what: "distinct (period, epsilon, delta) entries in a ledger",
                        requested: b.entries.len() as u64 + 1,
                        limit: MAX_LEDGER_ENTRIES as u64,
                    })
                }
                None => None,
            };
            Ok(Plan {
                entry,
                slot,
                releases,
            })
        }
        fn old_apply(b: &mut PrivacyBudget, plan: Plan) {
            let Plan {
                entry,
                slot,
                releases,
            } = plan;
            match slot.and_then(|i| b.entries.get_mut(i)) {
                Some(e) => e.count += 1,
                None => b.entries.push(entry),
            }
            if entry.period != b.last_period {
                b.period_epsilon = ZERO;
                b.period_delta = ZERO;
            }
            let (ce, cd) = (Window::of(entry.epsilon, 1), Window::of(entry.delta, 1));
            b.period_epsilon.add_window(&ce);
            b.period_delta.add_window(&cd);
            b.lifetime_epsilon.add_window(&ce);
            b.lifetime_delta.add_window(&cd);
            b.last_period = entry.period;
            b.releases = releases;
        }
        let mut dry = b.clone();
        for i in 0..n {
            if i >= cap {
                return None;
            }
            match old_check(&dry, c) {
                Ok(plan) => old_apply(&mut dry, plan),
                Err(e) => return Some(Err(e)),
            }
        }
        Some(Ok(dry))
    }

    /// `check_n` + `apply` against the loop: the same (n, charge, state)
    /// accepted, the same refusal kind, the same state after (history,
    /// exact sums, count); a refusal reports the budget left before the
    /// call.
    fn same_as_the_loop(
        b: &PrivacyBudget,
        c: &Charge,
        n: u64,
    ) -> core::result::Result<bool, String> {
        let Some(expected) = commit_n_by_loop(b, c, n, 300_000) else {
            return Ok(false); // too long for the oracle: not compared
        };
        let mut got = b.clone();
        let outcome = got.commit_n(c, n);
        match (outcome, expected) {
            (Ok(()), Ok(want)) => {
                if got != want
                    || (got.releases, got.lifetime_epsilon, got.lifetime_delta)
                        != (want.releases, want.lifetime_epsilon, want.lifetime_delta)
                    || (got.period_epsilon, got.period_delta)
                        != (want.period_epsilon, want.period_delta)
                {
                    return Err(format!("states differ: {got:?} vs {want:?}"));
                }
            }
            (Err(g), Err(w)) => {
                if core::mem::discriminant(&g) != core::mem::discriminant(&w) {
                    return Err(format!("refusals differ: {g:?} vs {w:?}"));
                }
                if got != *b {
                    return Err("a refusal changed the state".into());
                }
                if let Error::BudgetExceeded {
                    remaining_epsilon, ..
                } = g
                {
                    if remaining_epsilon.to_bits() != b.remaining().epsilon.to_bits() {
                        return Err(format!(
                            "remaining {remaining_epsilon:e} is not the budget left"
                        ));
                    }
                }
            }
            (g, w) => {
                return Err(format!(
                    "closed form {g:?}, loop {:?}",
                    w.map(|s| s.releases)
                ))
            }
        }
        Ok(true)
    }

    /// attack11 O3: `commit_n` of n equal charges in closed form accepts
    /// and refuses exactly what n charges one at a time did: the k-th
    /// share of a total (and a few ulps and slack steps either side of
    /// it), the 2^-50 slack's exact edge, n·ε past f64::MAX, the release
    /// counter's overflow, a period change before the call, δ limits.
    #[test]
    fn commit_n_in_closed_form_is_the_loop() {
        use proptest::prelude::*;
        let total = prop_oneof![
            Just(1.0),
            Just(1e-3),
            Just(1e300), // the largest total a policy takes
            Just(f64::from_bits(1)),
            (1e-300f64..1e300),
        ];
        let cfg = ProptestConfig::with_cases(3_000);
        proptest::test_runner::TestRunner::new(cfg)
            .run(
                &(
                    total,
                    0u8..8,            // how ε is made
                    1u64..3000,        // k: ε near T/k
                    -3i64..=3,         // ulps / slack steps / n offset
                    0u8..6,            // how n is made
                    (0u8..4, 0u64..6), // preload: kind, count
                    any::<bool>(),     // periodic (period total T/2)
                    any::<bool>(),     // next period before the call
                    0u8..3,            // δ: none, within, over
                ),
                |(
                    t,
                    eps_kind,
                    k,
                    d,
                    n_kind,
                    (pre_kind, pre),
                    periodic,
                    next_period,
                    delta_kind,
                )| {
                    let policy = if periodic {
                        BudgetPolicy::periodic(BudgetUnit::PerMetre, t / 2.0, 1e-6, 100, t, 1e-5)
                    } else {
                        BudgetPolicy::new(BudgetUnit::PerMetre, t, 1e-5)
                    };
                    let Ok(policy) = policy else { return Ok(()) };
                    let clock = ManualClock::new(1_000);
                    let mut b = PrivacyBudget::with_secret(policy, [9; 32])
                        .with_clock(Arc::new(clock.clone()));
                    let cap = if periodic { t / 2.0 } else { t };
                    let ulps =
                        |x: f64, d: i64| f64::from_bits((x.to_bits() as i64 + d).max(1) as u64);
                    // A state: nothing, a few shares, or a release count
                    // near u64::MAX of tiny charges.
                    let pre_charge = match pre_kind {
                        0 => None,
                        1 => Some((cap / k as f64, pre.min(k))),
                        2 => Some((cap * 2f64.powi(-80), u64::MAX - pre)),
                        _ => Some((cap / 3.0, pre % 3)),
                    };
                    if let Some((e, count)) = pre_charge {
                        if let (Ok(c), true) =
                            (Charge::new(BudgetUnit::PerMetre, e, 0.0), count > 0)
                        {
                            if let Ok(plan) = b.check_n(&c, count) {
                                b.apply(plan);
                            }
                        }
                    }
                    if next_period {
                        clock.advance(100);
                    }
                    let slack = 1.0 + 2f64.powi(-50);
                    let eps = match eps_kind {
                        0 => cap / k as f64,
                        1 => ulps(cap / k as f64, d),
                        2 => ulps(cap * slack / k as f64, d),
                        3 => ulps(cap * slack * 2f64.powi(-((k % 12) as i32)), d),
                        4 => cap * (1.0 + d as f64 * 2f64.powi(-52)),
                        5 => ulps(f64::MAX / (k % 4 + 1) as f64, d),
                        6 => cap * 2f64.powi(-70),
                        _ => f64::from_bits(k),
                    };
                    let delta = [0.0, 1e-9, 4e-6][delta_kind as usize];
                    let Ok(c) = Charge::new(BudgetUnit::PerMetre, eps, delta) else {
                        return Ok(());
                    };
                    let room = u64::MAX - b.releases();
                    let n = match n_kind {
                        0 => (k as i64 + d).max(0) as u64,
                        1 => u64::MAX,
                        2 => u64::MAX - d.unsigned_abs(),
                        3 => room.saturating_add_signed(d),
                        4 => (1u64 << (k % 12)).saturating_add_signed(d),
                        _ => ((k % 4) as i64 + d).max(0) as u64,
                    };
                    same_as_the_loop(&b, &c, n).map_err(TestCaseError::fail)?;
                    Ok(())
                },
            )
            .unwrap();
    }

    /// The edges named, each compared with the loop (not left to chance).
    #[test]
    fn commit_n_edges_are_the_loops() {
        let one = |e: f64| charge(e, 0.0);
        // The 2^-50 slack exactly: 2^j charges of (1 + 2^-50)·2^-j sum to
        // 1 + 2^-50 = the cap of a total 1; one ulp more does not fit.
        for j in [0, 1, 5, 11] {
            let e = (1.0 + 2f64.powi(-50)) * 2f64.powi(-j);
            let n = 1u64 << j;
            for (eps, fits) in [(e, true), (f64::from_bits(e.to_bits() + 1), false)] {
                let b = budget(1.0, 0.0);
                assert_eq!(same_as_the_loop(&b, &one(eps), n), Ok(true));
                assert_eq!(b.clone().commit_n(&one(eps), n).is_ok(), fits, "j {j}");
            }
        }
        // n·ε past f64::MAX (and n·m past 2^64) against the largest total
        // (1e300) and charges up to f64::MAX.
        for (eps, n) in [
            (f64::MAX, 2),
            (f64::MAX, u64::MAX),
            (1e300 / 2.0, 2),
            (1e300 / 2.0, 3),
            (1e300 / 3.0, u64::MAX),
            (1e300 / 7.0, u64::MAX - 1),
        ] {
            let b = budget(1e300, 0.0);
            assert_eq!(
                same_as_the_loop(&b, &one(eps), n),
                Ok(true),
                "{eps:e} × {n}"
            );
        }
        let mut b = budget(1e300, 0.0);
        assert!(b.commit_n(&one(f64::MAX), u64::MAX).is_err());
        b.commit_n(&one(1e300 / 2.0), 2).unwrap();
        assert!(b.commit_n(&one(f64::from_bits(1)), u64::MAX).is_err());
        // The release counter's overflow, with the budget room to spare.
        let mut b = budget(1.0, 0.0);
        b.commit_n(&one(2f64.powi(-80)), u64::MAX - 2).unwrap();
        for n in [1, 2, 3, 4, u64::MAX] {
            assert_eq!(
                same_as_the_loop(&b, &one(2f64.powi(-80)), n),
                Ok(true),
                "n {n}"
            );
        }
        assert!(b.clone().commit_n(&one(2f64.powi(-80)), 2).is_ok());
        assert!(b.clone().commit_n(&one(2f64.powi(-80)), 3).is_err());
    }

    /// attack11 O3: a huge n that fits is checked (and recorded) at once:
    /// one history entry gains n (the loop took about 82 ns a charge,
    /// 48,000 years for u64::MAX; this test would not end).
    #[test]
    fn commit_n_of_u64_max_tiny_charges_is_immediate() {
        let mut b = budget(1.0, 0.0);
        let c = charge(2f64.powi(-70), 0.0);
        b.commit_n(&c, u64::MAX).unwrap();
        assert_eq!(b.releases(), u64::MAX);
        assert_eq!(
            b.history().collect::<Vec<_>>(),
            [(0, 2f64.powi(-70), 0.0, u64::MAX)]
        );
        // u64::MAX·2^-70 < 2^-6, rounded up.
        assert!(b.spent_epsilon() <= 2f64.powi(-6));
        assert!(b.commit_n(&c, 1).is_err()); // the counter is full
                                             // even_split replayed its share `releases` times too.
        let (e, _) = budget(1.0, 0.0).even_split(u64::MAX).unwrap();
        assert!(e > 0.0 && e <= 1.0 / u64::MAX as f64);
    }
}
