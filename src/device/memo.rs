//! Memoized releases for values that rarely change (`docs/MATH.md §12.3`).
//!
//! A device keeps a 256-bit secret k (from the OS generator, stored with
//! its ledger, never uploaded). For a query with a public snapping width w
//! the device has a secret offset u ∈ [0, w)^d derived from k, and
//!
//! ```text
//! cell            c(x) = floor((x − u) / w)            (per coordinate)
//! representative  r(x) = u + w (c(x) + 1/2)
//! query key       K_q  = BLAKE3_k("geopriv-memo-v2", "query", query, mechanism
//!                                 and its calibration, ε, δ, w, dimension)
//! cell stream     S    = BLAKE3-XOF_{K_q}("cell", c(x))     (keyed mode)
//! memo key        K    = S[0..32]
//! report          y    = M(r(x)) with all of M's randomness read from S[32..]
//! ```
//!
//! so an unchanged cell re-sends the same report, and the ledger charges
//! each memo key once ([`MemoLedger::commit_once`]): the lifetime charge
//! counts **distinct cells**. Keyed BLAKE3 is a PRF under the 256-bit
//! device secret, and so is the two-level cascade (`docs/MATH.md §12.3`);
//! the secret offset u (and the report schedules of
//! [`crate::device::schedule`]) use HMAC-SHA256 ([`prf`]). The report still goes
//! through [`Mechanism::privatize_unmetered`], i.e. through the public
//! release grid (`src/release_grid.rs`), and every memoized release is
//! metered: the ledger sees every call.
//!
//! **What repeats reveal.** Reports from the same cell are equal, reports
//! from different cells differ (almost surely): an observer of all reports
//! learns the *equality pattern* of the cell sequence (which periods were
//! spent in the same cell). The guarantee over a whole trajectory is
//! `docs/MATH.md §12.3`: Σ over distinct cells of ε·d(r_i, r'_i) when the
//! patterns agree, and δ = P_u(patterns differ) over the secret offset.
//! The optional [`InstantaneousLayer`] (RAPPOR's IRR) adds fresh
//! Laplace(range(f)/ε_I) noise to every sent report: two sent reports no
//! longer show whether they came from the same permanent report beyond
//! ε_I·|y − y'|/range(f) each, at an extra variance 2 (range/ε_I)² per
//! report; being a function of the permanent report and fresh noise only,
//! it costs nothing against x.
//!
//! ```
//! use geopriv::device::budget::{BudgetPolicy, BudgetUnit, Ledger};
//! use geopriv::device::memo::Memoized;
//! use geopriv::{Mechanism, SoftThreshold};
//!
//! let q = SoftThreshold::new(100_000.0, 20_000.0)?;
//! let m = Mechanism::polyplace(1e-4)?.with_unit(BudgetUnit::PerDollar)?;
//! let mut memo = Memoized::new(m, 5_000.0)?; // public snapping width: $5k
//! let policy = BudgetPolicy::new(BudgetUnit::PerDollar, 2e-4, 0.0)?;
//! let mut ledger = PrivacyBudget::with_secret(policy, [7u8; 32]);
//! # use geopriv::PrivacyBudget;
//! let mut rng = geopriv::SecureRng::new();
//! let day1 = memo.release(&mut ledger, &q, &[95_000.0], &mut rng)?;
//! let day2 = memo.release(&mut ledger, &q, &[95_000.0], &mut rng)?;
//! assert_eq!(day1.value, day2.value); // the same report again...
//! assert!(day1.charged && !day2.charged); // ...charged once
//! assert_eq!(ledger.state().releases(), 1);
//! # Ok::<(), geopriv::Error>(())
//! ```

use crate::device::budget::{Charge, Ledger, PrivacyBudget};
use crate::error::{positive_finite, Error, Result};
use crate::mechanism::Mechanism;
use crate::query::Query;
use alloc::vec::Vec;
use hmac::{Hmac, Mac};
use rand::{Rng, RngCore};
use sha2::Sha256;

/// Domain-separation tag of the HMAC-SHA256 inputs ([`prf`]: the secret
/// offset and the report schedules of [`crate::device::schedule`]).
pub const MEMO_FORMAT: &[u8] = b"geopriv-memo-v1";

/// Domain-separation tag of the memo key and noise stream (keyed BLAKE3).
/// Changing that derivation changes this tag, so every memo key changes
/// with it and cells are charged anew instead of silently re-sending a
/// re-rolled report under a charged key. Version 1 derived the memo key
/// and a ChaCha20 seed with HMAC-SHA256: keys a v1 release recorded in a
/// ledger are never produced again (they only count towards the table's
/// size limit), so the first v2 release of a cell is charged.
pub const MEMO_STREAM_FORMAT: &[u8] = b"geopriv-memo-v2";

/// The seam between memoized releases and a ledger that stores the device
/// secret and the memo table (implemented by [`PrivacyBudget`] in memory; a
/// file-backed ledger implements it with the same contract).
pub trait MemoLedger: Ledger {
    /// The device secret k (256 bits from the OS generator, never
    /// uploaded).
    fn device_secret(&self) -> [u8; 32];

    /// Charge `charge` under `memo_key` unless that key was charged before:
    /// `Ok(true)` charged now and the key recorded (durably, for a
    /// persistent ledger); `Ok(false)` the key was already charged and
    /// nothing is charged; the refusals of [`Ledger::commit`] otherwise
    /// (with nothing recorded).
    fn commit_once(&mut self, memo_key: [u8; 32], charge: &Charge) -> Result<bool>;
}

// The two ledgers keep the device secret and the memo keys themselves
// (written in the same atomic write as the charge for a `FileLedger`).
impl MemoLedger for PrivacyBudget {
    fn device_secret(&self) -> [u8; 32] {
        PrivacyBudget::device_secret(self)
    }

    fn commit_once(&mut self, memo_key: [u8; 32], charge: &Charge) -> Result<bool> {
        PrivacyBudget::commit_once(self, memo_key, charge)
    }
}

#[cfg(feature = "std")]
impl MemoLedger for crate::device::budget::FileLedger {
    fn device_secret(&self) -> [u8; 32] {
        crate::device::budget::FileLedger::device_secret(self)
    }

    fn commit_once(&mut self, memo_key: [u8; 32], charge: &Charge) -> Result<bool> {
        crate::device::budget::FileLedger::commit_once(self, memo_key, charge)
    }
}

/// HMAC-SHA256, the PRF of the secret offset and of
/// [`crate::device::schedule`].
type HmacSha256 = Hmac<Sha256>;

/// HMAC-SHA256 keyed by `secret` over the length-prefixed `parts` (after
/// [`MEMO_FORMAT`]): an unambiguous encoding, so distinct inputs are
/// distinct messages.
pub fn prf(secret: &[u8; 32], parts: &[&[u8]]) -> [u8; 32] {
    let mut mac = keyed(secret);
    for p in parts {
        absorb(&mut mac, p);
    }
    mac.finalize().into_bytes().into()
}

/// The PRF keyed by `secret` with [`MEMO_FORMAT`] absorbed: the common
/// prefix of every [`prf`] message.
fn keyed(secret: &[u8; 32]) -> HmacSha256 {
    // A 32-byte key is always accepted by HMAC.
    let mut mac = match <HmacSha256 as Mac>::new_from_slice(secret) {
        Ok(m) => m,
        Err(_) => unreachable_hmac(),
    };
    absorb(&mut mac, MEMO_FORMAT);
    mac
}

/// One length-prefixed part of a PRF message.
fn absorb(mac: &mut HmacSha256, part: &[u8]) {
    mac.update(&(part.len() as u64).to_le_bytes());
    mac.update(part);
}

/// One length-prefixed part of a keyed-BLAKE3 message (the same encoding
/// as [`absorb`]).
fn absorb3(hasher: &mut blake3::Hasher, part: &[u8]) {
    hasher.update(&(part.len() as u64).to_le_bytes());
    hasher.update(part);
}

/// The cell stream S = BLAKE3-XOF_{K_q}(enc("cell", c)) from `hasher`,
/// keyed by K_q (reset here, so it can be kept and reused); its memo key
/// S[0..32] is [`MemoStream::key`]. One BLAKE3 compression for a cell of up
/// to 5 coordinates (the message is 20 + 8d bytes) and one per further 64
/// bytes read.
fn cell_stream(hasher: &mut blake3::Hasher, cell: &[i64]) -> MemoStream {
    hasher.reset();
    // enc("cell", c): assembled on the stack and absorbed in one call when
    // it fits a block (d <= 5), part by part otherwise (the same bytes).
    let mut msg = [0u8; 64];
    let len = 20 + 8 * cell.len();
    if len <= msg.len() {
        msg[..8].copy_from_slice(&4u64.to_le_bytes());
        msg[8..12].copy_from_slice(b"cell");
        msg[12..20].copy_from_slice(&((cell.len() * 8) as u64).to_le_bytes());
        for (chunk, c) in msg[20..len].chunks_exact_mut(8).zip(cell) {
            chunk.copy_from_slice(&c.to_le_bytes());
        }
        hasher.update(&msg[..len]);
    } else {
        absorb3(hasher, b"cell");
        hasher.update(&((cell.len() * 8) as u64).to_le_bytes());
        for c in cell {
            hasher.update(&c.to_le_bytes());
        }
    }
    MemoStream::new(hasher.finalize_xof())
}

/// The noise stream of a memoized release: the keyed BLAKE3 output S of
/// its cell after the memo key S[0..32], read in order (`next_u32` and
/// `next_u64` take the next 4 and 8 bytes, little-endian; `fill_bytes` the
/// next `dest.len()`). Never printed (it is secret).
struct MemoStream {
    reader: blake3::OutputReader,
    block: [u8; 64],
    used: usize,
}

impl MemoStream {
    /// The stream after its first 32 bytes (the memo key).
    fn new(mut reader: blake3::OutputReader) -> Self {
        let mut block = [0u8; 64];
        reader.fill(&mut block);
        Self {
            reader,
            block,
            used: 32,
        }
    }

    /// The memo key S[0..32] (before anything is read: the first block is
    /// still the one holding it).
    fn key(&self) -> [u8; 32] {
        let mut key = [0u8; 32];
        key.copy_from_slice(&self.block[..32]);
        key
    }

    /// The next `out.len()` bytes of S.
    fn take(&mut self, out: &mut [u8]) {
        let mut at = 0;
        while at < out.len() {
            if self.used == self.block.len() {
                self.reader.fill(&mut self.block);
                self.used = 0;
            }
            let n = (out.len() - at).min(self.block.len() - self.used);
            out[at..at + n].copy_from_slice(&self.block[self.used..self.used + n]);
            self.used += n;
            at += n;
        }
    }
}

impl RngCore for MemoStream {
    fn next_u32(&mut self) -> u32 {
        let mut b = [0u8; 4];
        self.take(&mut b);
        u32::from_le_bytes(b)
    }

    fn next_u64(&mut self) -> u64 {
        let mut b = [0u8; 8];
        self.take(&mut b);
        u64::from_le_bytes(b)
    }

    fn fill_bytes(&mut self, dest: &mut [u8]) {
        self.take(dest);
    }
}

#[cold]
fn unreachable_hmac() -> ! {
    // HMAC accepts keys of any length; kept as a function so no `unwrap`
    // sits on a release path.
    panic!("HMAC-SHA256 refused a 32-byte key")
}

/// A uniform in [0, 1) from the first 53 bits of a PRF output.
pub(crate) fn unit_uniform(bytes: &[u8; 32]) -> f64 {
    let mut first = [0u8; 8];
    first.copy_from_slice(&bytes[..8]);
    (u64::from_le_bytes(first) >> 11) as f64 / (1u64 << 53) as f64
}

/// Largest |(x − u)/w| accepted: cell indices stay exact integers.
const MAX_CELL_INDEX: f64 = 4_503_599_627_370_496.0; // 2^52

/// Probability slack per coordinate and unit of |x|/w that a computed
/// cell differs from the exact one (`trajectory_bound`): 2^-50, above the
/// 2^-51 + 2^-53 of two roundings and u's 2^-53 grid.
const FP_CELL_SLACK: f64 = 1.0 / 1_125_899_906_842_624.0; // 2^-50

/// Largest snapping width: with |c| < 2^52 and u < w, every representative
/// |u + w(c + 1/2)| < w(2^52 + 2) stays finite.
pub const MAX_WIDTH: f64 = f64::MAX / 18_014_398_509_481_984.0; // 2^54

/// The instantaneous second layer (`docs/MATH.md §12.3`): every sent report
/// is the permanent report plus fresh Laplace(range(f)/ε_I) noise, snapped
/// to the local-DP release grid at ε_I. A function of the permanent report
/// and fresh randomness only.
#[derive(Clone, Debug, PartialEq)]
pub struct InstantaneousLayer {
    epsilon: f64,
    /// 1 for the layer; a seeded fault in tests uses 0.5.
    noise_factor: f64,
}

impl InstantaneousLayer {
    /// A layer at ε_I (a local-DP ε on the permanent report, per range of f).
    pub fn new(epsilon: f64) -> Result<Self> {
        Ok(Self {
            epsilon: positive_finite("instantaneous epsilon", epsilon)?,
            noise_factor: 1.0,
        })
    }

    /// ε_I.
    pub fn epsilon(&self) -> f64 {
        self.epsilon
    }

    /// A **faulty** layer with `factor` times its noise (seeded faults of
    /// the sequence tester only).
    #[doc(hidden)]
    pub fn with_noise_factor_for_testing(mut self, factor: f64) -> Self {
        self.noise_factor = factor;
        self
    }

    /// The extra variance per sent report: 2 (range/ε_I)².
    pub fn extra_variance<Q: Query + ?Sized>(&self, query: &Q) -> f64 {
        let (lo, hi) = query.value_bounds();
        let b = (hi - lo) / self.epsilon;
        2.0 * b * b
    }

    /// ỹ = snap(y + (range/ε_I)·Laplace(1)) with fresh noise from `rng`.
    pub fn apply<Q: Query + ?Sized, R: Rng + ?Sized>(
        &self,
        query: &Q,
        permanent: f64,
        rng: &mut R,
    ) -> Result<f64> {
        let ldp = Mechanism::local_dp(self.epsilon)?;
        let grid = ldp.checked_release_grid(query)?;
        let (lo, hi) = query.value_bounds();
        let b = (hi - lo) / self.epsilon * self.noise_factor;
        let z: f64 = rand::distr::Distribution::sample(&crate::noise::Laplace::new(1.0)?, rng);
        let y = crate::error::release_number("value", permanent + b * z, true)?;
        crate::error::release_number("value", crate::mechanism::snap(y, grid), true)
    }
}

/// What a memoized release returns.
#[derive(Clone, Debug, PartialEq)]
pub struct MemoRelease {
    /// The value to upload (the permanent report, or the instantaneous
    /// report when the layer is on).
    pub value: f64,
    /// Whether this call charged the ledger (a new cell).
    pub charged: bool,
}

/// A memoized release: a mechanism, a public snapping width and an
/// optional instantaneous layer (module docs).
///
/// It keeps, for the device secret and query it last saw, the secret
/// offset and the query key K_q, so the first release of a new cell costs
/// one BLAKE3 compression (memo key and 32 bytes of noise) and the
/// release; and it
/// keeps the last [`CACHE_ENTRIES`] cells it released (of up to
/// [`CACHE_MAX_DIM`] coordinates: cell, memo key, permanent report) so that re-sending an unchanged cell costs a cell
/// computation and the ledger's look-up (`BENCHMARKS.md`). Both only ever
/// produce what [`permanent`](Self::permanent) would.
#[derive(Clone, Debug, PartialEq)]
pub struct Memoized {
    mechanism: Mechanism,
    width: f64,
    instantaneous: Option<InstantaneousLayer>,
    /// Seeded fault for the tester: a memo key of the raw input.
    key_ignores_snapping: bool,
    cache: Cache,
}

/// Cells a [`Memoized`] remembers (a commuter alternates between two).
pub const CACHE_ENTRIES: usize = 4;

/// What one (device secret, query, dimension) fixes: the secret offset and
/// a BLAKE3 hasher keyed by the query key K_q of the cell streams (boxed:
/// it is about 2 KB, and the cache moves `Prepared` on every call).
#[derive(Clone)]
struct Prepared {
    secret: [u8; 32],
    query: crate::report::QueryDescriptor,
    offset: Vec<f64>,
    cells: alloc::boxed::Box<blake3::Hasher>,
}

/// Cells of up to this many coordinates are cached (inline, compared
/// without a `memcmp` call); a release of a higher-dimensional cell always
/// derives its report (the same report, at the new-cell cost).
pub const CACHE_MAX_DIM: usize = 4;

#[derive(Clone)]
struct CacheEntry {
    /// The cell, zero-padded to [`CACHE_MAX_DIM`] coordinates.
    cell: [i64; CACHE_MAX_DIM],
    dim: usize,
    key: [u8; 32],
    value: f64,
}

/// `cell` zero-padded, if it has at most [`CACHE_MAX_DIM`] coordinates.
fn padded(cell: &[i64]) -> Option<[i64; CACHE_MAX_DIM]> {
    let mut out = [0i64; CACHE_MAX_DIM];
    out.get_mut(..cell.len())?.copy_from_slice(cell);
    Some(out)
}

/// The cache: excluded from equality and never printed (it holds the
/// secret). Its entries belong to `prepared`'s secret and query.
#[derive(Clone, Default)]
struct Cache {
    prepared: Option<Prepared>,
    entries: Vec<CacheEntry>,
    next: usize,
    /// Scratch cell and representative of the current call (kept so that
    /// a release allocates nothing once warm).
    cell: Vec<i64>,
    rep: Vec<f64>,
}

impl PartialEq for Cache {
    fn eq(&self, _: &Self) -> bool {
        true
    }
}

impl core::fmt::Debug for Cache {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        write!(f, "<{} cached cells>", self.entries.len())
    }
}

impl Cache {
    fn find(&self, cell: &[i64]) -> Option<([u8; 32], f64)> {
        let c = padded(cell)?;
        self.entries
            .iter()
            .find(|e| e.dim == cell.len() && e.cell == c)
            .map(|e| (e.key, e.value))
    }

    fn insert(&mut self, cell: &[i64], key: [u8; 32], value: f64) {
        let Some(c) = padded(cell) else {
            return;
        };
        let entry = CacheEntry {
            cell: c,
            dim: cell.len(),
            key,
            value,
        };
        if self.entries.len() < CACHE_ENTRIES {
            self.entries.push(entry);
        } else {
            self.entries[self.next % CACHE_ENTRIES] = entry;
        }
        self.next = self.next.wrapping_add(1);
    }
}

impl Memoized {
    /// `mechanism` memoized on a snapping grid of public width `width` (in
    /// the query's unit, from public parameters only).
    ///
    /// Refused unless 0 < width <= [`MAX_WIDTH`] (so every representative
    /// of an accepted cell is finite: an overflow would make the release
    /// fail for some x only).
    pub fn new(mechanism: Mechanism, width: f64) -> Result<Self> {
        let width = positive_finite("snapping width", width)?;
        if width > MAX_WIDTH {
            return Err(Error::InvalidParameter {
                name: "snapping width",
                value: width,
                requirement: "at most f64::MAX / 2^54",
            });
        }
        Ok(Self {
            mechanism,
            width,
            instantaneous: None,
            key_ignores_snapping: false,
            cache: Cache::default(),
        })
    }

    /// With the instantaneous second layer.
    pub fn with_instantaneous(mut self, layer: InstantaneousLayer) -> Self {
        self.instantaneous = Some(layer);
        self
    }

    /// A **faulty** memoization whose key and representative are the raw
    /// input (seeded fault of the sequence tester only).
    #[doc(hidden)]
    pub fn with_key_ignoring_snapping_for_testing(mut self) -> Self {
        self.key_ignores_snapping = true;
        self
    }

    /// The mechanism.
    pub fn mechanism(&self) -> &Mechanism {
        &self.mechanism
    }

    /// The snapping width w.
    pub fn width(&self) -> f64 {
        self.width
    }

    /// The instantaneous layer, if any.
    pub fn instantaneous(&self) -> Option<&InstantaneousLayer> {
        self.instantaneous.as_ref()
    }

    /// The device's secret offset u ∈ [0, w)^dim:
    /// u_j = w · U(PRF_k("offset", w, j)).
    pub fn offset(&self, secret: &[u8; 32], dim: usize) -> Vec<f64> {
        (0..dim)
            .map(|j| {
                let b = prf(
                    secret,
                    &[
                        b"offset",
                        &self.width.to_bits().to_le_bytes(),
                        &(j as u64).to_le_bytes(),
                    ],
                );
                self.width * unit_uniform(&b)
            })
            .collect()
    }

    /// The cell c(x) = floor((x − u)/w) and representative
    /// r = u + w(c + 1/2). Refused if a coordinate is not finite or its
    /// cell index is beyond 2^52.
    pub fn snap<Q: Query + ?Sized>(
        &self,
        query: &Q,
        secret: &[u8; 32],
        x: &[f64],
    ) -> Result<(Vec<i64>, Vec<f64>)> {
        query.check_point(x)?;
        self.snap_with(&self.offset(secret, x.len()), x)
    }

    fn snap_with(&self, u: &[f64], x: &[f64]) -> Result<(Vec<i64>, Vec<f64>)> {
        let mut cell = Vec::with_capacity(x.len());
        let mut rep = Vec::with_capacity(x.len());
        self.snap_into(u, x, &mut cell, &mut rep)?;
        Ok((cell, rep))
    }

    /// [`snap_with`](Self::snap_with) into `cell` and `rep` (cleared first).
    fn snap_into(
        &self,
        u: &[f64],
        x: &[f64],
        cell: &mut Vec<i64>,
        rep: &mut Vec<f64>,
    ) -> Result<()> {
        cell.clear();
        rep.clear();
        for (xi, ui) in x.iter().zip(u) {
            let z = libm::floor((xi - ui) / self.width);
            if z.is_nan() || libm::fabs(z) >= MAX_CELL_INDEX {
                return Err(Error::InvalidParameter {
                    name: "x",
                    value: *xi,
                    requirement: "within 2^52 snapping cells of the origin",
                });
            }
            cell.push(z as i64);
            rep.push(ui + self.width * (z + 0.5));
        }
        Ok(())
    }

    /// The memo key of a cell: K = S[0..32] of the cell stream
    /// S = BLAKE3-XOF_{K_q}(enc("cell", c)) under the query key
    /// `K_q` (`query_key`).
    pub fn memo_key<Q: Query + ?Sized>(
        &self,
        query: &Q,
        secret: &[u8; 32],
        cell: &[i64],
    ) -> [u8; 32] {
        let mut hasher = blake3::Hasher::new_keyed(&self.query_key(query, secret, cell.len()));
        cell_stream(&mut hasher, cell).key()
    }

    /// The query key K_q = BLAKE3_k(enc("geopriv-memo-v2", "query", query
    /// id, mechanism name, ε, δ, calibration, w, dimension)), keyed BLAKE3
    /// under the device secret k over length-prefixed parts (u64
    /// little-endian length, then the bytes; ε, δ, w as the little-endian
    /// bits of the double, the dimension as a u64), computed once per
    /// (secret, query, dimension).
    fn query_key<Q: Query + ?Sized>(&self, query: &Q, secret: &[u8; 32], dim: usize) -> [u8; 32] {
        let id = query.descriptor().canonical_id();
        // The whole calibration, not only (name, ε, δ): two mechanisms of
        // one name and ε with another smoothness share, degrees of freedom
        // or growth release different reports of a cell and must not share
        // a key (one charge for two reports).
        let calibration = alloc::format!(
            "{:?}",
            (
                self.mechanism.smoothness_share().map(f64::to_bits),
                self.mechanism.growth(),
                self.mechanism.noise_shape(),
                self.mechanism.scale_for(1.0).map(f64::to_bits),
            )
        );
        let mut hasher = blake3::Hasher::new_keyed(secret);
        for part in [
            MEMO_STREAM_FORMAT,
            &b"query"[..],
            id.as_bytes(),
            self.mechanism.name().as_str().as_bytes(),
            &self.mechanism.epsilon().to_bits().to_le_bytes(),
            &self.mechanism.delta().to_bits().to_le_bytes(),
            calibration.as_bytes(),
            &self.width.to_bits().to_le_bytes(),
            &(dim as u64).to_le_bytes(),
        ] {
            absorb3(&mut hasher, part);
        }
        *hasher.finalize().as_bytes()
    }

    /// The fixed parts for (secret, query, dim), computed once.
    fn prepare<Q: Query + ?Sized>(
        &self,
        query: &Q,
        descriptor: crate::report::QueryDescriptor,
        secret: &[u8; 32],
        dim: usize,
    ) -> Prepared {
        Prepared {
            secret: *secret,
            query: descriptor,
            offset: self.offset(secret, dim),
            cells: alloc::boxed::Box::new(blake3::Hasher::new_keyed(
                &self.query_key(query, secret, dim),
            )),
        }
    }

    /// The permanent report of the cell `cell` with representative `rep`
    /// (all of M's randomness read from the cell stream after the memo
    /// key), and the memo key.
    fn permanent_of<Q: Query + ?Sized>(
        &self,
        query: &Q,
        cells: &mut blake3::Hasher,
        cell: &[i64],
        rep: &[f64],
    ) -> Result<(f64, [u8; 32])> {
        let mut stream = cell_stream(cells, cell);
        let key = stream.key();
        let value = self
            .mechanism
            .privatize_unmetered(query, rep, &mut stream)?;
        Ok((value, key))
    }

    /// The permanent report of x for this device, and its memo key (no
    /// ledger involved: used by [`release`](Self::release) and by
    /// simulations).
    pub fn permanent<Q: Query + ?Sized>(
        &self,
        query: &Q,
        secret: &[u8; 32],
        x: &[f64],
    ) -> Result<(f64, [u8; 32])> {
        self.permanent_parts(query, secret, x).map(|p| (p.0, p.1))
    }

    /// [`permanent`](Self::permanent) with the offset and the cell: the
    /// reference path, from nothing cached.
    #[allow(clippy::type_complexity)]
    fn permanent_parts<Q: Query + ?Sized>(
        &self,
        query: &Q,
        secret: &[u8; 32],
        x: &[f64],
    ) -> Result<(f64, [u8; 32], Vec<f64>, Vec<i64>)> {
        query.check_point(x)?;
        let u = self.offset(secret, x.len());
        let (mut cell, mut rep) = self.snap_with(&u, x)?;
        let true_cell = cell.clone();
        if self.key_ignores_snapping {
            // The fault: key and input are the raw point.
            cell = x.iter().map(|v| v.to_bits() as i64).collect();
            rep = x.to_vec();
        }
        let mut cells = blake3::Hasher::new_keyed(&self.query_key(query, secret, cell.len()));
        let (value, key) = self.permanent_of(query, &mut cells, &cell, &rep)?;
        Ok((value, key, u, true_cell))
    }

    /// The guarantee of `docs/MATH.md §12.3` for two trajectories X, X'
    /// (one point per period, same length): (ε_life·D-like exponent, δ)
    /// with
    ///
    /// ```text
    /// exponent = ε · Σ over distinct pairs (x_t, x'_t) of w·||⌈|x_t − x'_t|/w⌉||
    /// δ        = Σ over pairs {s, t} of distinct pairs of
    ///            min(1, Σ_j (|x_sj − x'_sj| + |x_tj − x'_tj|)/w)
    ///            + δ_M · #(distinct pairs with x_t ≠ x'_t)
    ///            + 2^-50 Σ over distinct pairs, coordinates (|x_tj| + |x'_tj|)/w + 4
    ///              (floating point; only with two or more distinct pairs)
    /// ```
    ///
    /// (ceilings per coordinate; a pair {s, t} adds nothing to δ when
    /// x_s = x_t and x'_s = x'_t, or when some coordinate j has
    /// |x_sj − x_tj| >= w and |x'_sj − x'_tj| >= w: both sequences then
    /// always change cell between s and t; up to the floating-point term).
    /// The instantaneous layer is
    /// post-processing and does not change it. Refused for trajectories of
    /// different lengths or dimensions.
    pub fn trajectory_bound(&self, x: &[Vec<f64>], x_prime: &[Vec<f64>]) -> Result<(f64, f64)> {
        if x.len() != x_prime.len() || x.iter().zip(x_prime).any(|(a, b)| a.len() != b.len()) {
            return Err(Error::InvalidParameter {
                name: "trajectory",
                value: x_prime.len() as f64,
                requirement: "two trajectories of the same length and dimension",
            });
        }
        let w = self.width;
        let mut pairs: Vec<(&[f64], &[f64])> = Vec::new();
        for (a, b) in x.iter().zip(x_prime) {
            if !pairs
                .iter()
                .any(|(p, q)| *p == a.as_slice() && *q == b.as_slice())
            {
                pairs.push((a, b));
            }
        }
        let mut exponent = 0.0;
        for (a, b) in &pairs {
            let sq: f64 = a
                .iter()
                .zip(*b)
                .map(|(u, v)| {
                    let c = w * libm::ceil(libm::fabs(u - v) / w);
                    c * c
                })
                .sum();
            exponent += self.mechanism.epsilon() * libm::sqrt(sq);
        }
        let mut delta = 0.0;
        for (i, (a, b)) in pairs.iter().enumerate() {
            for (c, d) in &pairs[i + 1..] {
                let always_apart = (0..a.len())
                    .any(|j| libm::fabs(a[j] - c[j]) >= w && libm::fabs(b[j] - d[j]) >= w);
                if always_apart {
                    continue;
                }
                let moved: f64 = (0..a.len())
                    .map(|j| libm::fabs(a[j] - b[j]) + libm::fabs(c[j] - d[j]))
                    .sum();
                delta += (moved / w).min(1.0);
            }
        }
        // Floating point: the computed cell floor(fl(fl(x − u)/w)) can
        // differ from the exact one when (x − u)/w is within 2^-52·|z| of an
        // integer (z = (x − u)/w, |z| <= |x|/w + 1), an event of probability
        // at most (|x_j|/w + 1)·2^-51 over u (plus 2^-53 for u's grid):
        // points at least w apart can share a computed cell. Only patterns
        // of two or more distinct points can change (a single point has
        // the same pattern whatever its cell).
        if pairs.len() >= 2 {
            let per_point = |p: &[f64]| -> f64 {
                p.iter()
                    .map(|v| (libm::fabs(*v) / w + 2.0) * FP_CELL_SLACK)
                    .sum()
            };
            delta += pairs
                .iter()
                .map(|(a, b)| per_point(a) + per_point(b))
                .sum::<f64>();
        }
        // Each class's report is (ε·d, δ_M)-GP: δ_M once per distinct pair
        // that moved (an unmoved pair has r = r', the same law).
        let moved_pairs = pairs.iter().filter(|(a, b)| a != b).count() as f64;
        Ok((
            exponent,
            (delta + moved_pairs * self.mechanism.delta()).min(1.0),
        ))
    }

    /// [`permanent`](Self::permanent) through the prepared offset and query
    /// key and the cell cache (x already checked).
    fn permanent_cached<Q: Query + ?Sized>(
        &mut self,
        query: &Q,
        secret: &[u8; 32],
        x: &[f64],
    ) -> Result<(f64, [u8; 32])> {
        let descriptor = query.descriptor();
        let mut prepared = match self.cache.prepared.take() {
            Some(p)
                if p.secret == *secret && p.offset.len() == x.len() && p.query == descriptor =>
            {
                p
            }
            _ => {
                self.cache.entries.clear();
                self.prepare(query, descriptor, secret, x.len())
            }
        };
        let mut cell = core::mem::take(&mut self.cache.cell);
        let mut rep = core::mem::take(&mut self.cache.rep);
        let found = self
            .snap_into(&prepared.offset, x, &mut cell, &mut rep)
            .and_then(|()| {
                if let Some((key, value)) = self.cache.find(&cell) {
                    return Ok((value, key, false));
                }
                let (value, key) = self.permanent_of(query, &mut prepared.cells, &cell, &rep)?;
                Ok((value, key, true))
            });
        self.cache.prepared = Some(prepared);
        let result = found.map(|(value, key, new_cell)| {
            if new_cell {
                self.cache.insert(&cell, key, value);
            }
            (value, key)
        });
        self.cache.cell = cell;
        self.cache.rep = rep;
        result
    }

    /// The metered memoized release: the permanent report of x's cell,
    /// charged to `ledger` once per memo key ([`MemoLedger::commit_once`])
    /// before the value is returned, then the instantaneous layer (fresh
    /// noise from `rng`) if on. Refused, with nothing charged or
    /// released, for another unit, a budget that cannot afford a new cell,
    /// a bad point or a non-finite value.
    pub fn release<Q: Query + ?Sized, R: Rng + ?Sized>(
        &mut self,
        ledger: &mut dyn MemoLedger,
        query: &Q,
        x: &[f64],
        rng: &mut R,
    ) -> Result<MemoRelease> {
        let charge = self.mechanism.charge_in(ledger.state().unit())?;
        let secret = ledger.device_secret();
        query.check_point(x)?;
        let (permanent, key) = if self.key_ignores_snapping {
            let (value, key, _, _) = self.permanent_parts(query, &secret, x)?;
            (value, key)
        } else {
            self.permanent_cached(query, &secret, x)?
        };
        let value = match &self.instantaneous {
            Some(layer) => layer.apply(query, permanent, rng)?,
            None => permanent,
        };
        let charged = ledger.commit_once(key, &charge)?;
        Ok(MemoRelease { value, charged })
    }

    /// [`release`](Self::release) wrapped as the [`Report`](crate::Report)
    /// to upload, with whether it charged: the query's public parameters,
    /// the mechanism's name, ε and δ, the memoized value, `seeded` if
    /// `rng` is seeded, and a fresh random report id from `rng` (drawn
    /// after the release, independent of x: a re-sent cell is a new upload
    /// for the collector's period, never deduplicated against the last).
    pub fn release_report<Q, R>(
        &mut self,
        ledger: &mut dyn MemoLedger,
        query: &Q,
        x: &[f64],
        rng: &mut R,
    ) -> Result<(crate::Report, bool)>
    where
        Q: Query + ?Sized,
        R: crate::device::budget::NoiseRng + ?Sized,
    {
        let seeded = rng.is_seeded();
        let r = self.release(ledger, query, x, rng)?;
        let m = &self.mechanism;
        let report = crate::Report::new(
            query.descriptor(),
            m.name(),
            m.epsilon(),
            m.delta(),
            r.value,
        )
        .with_seeded(seeded)
        .with_random_id(rng);
        Ok((report, r.charged))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::device::budget::{BudgetPolicy, BudgetUnit};
    use crate::query::{GaussianKde, SoftThreshold};
    use rand::rngs::StdRng;
    use rand::SeedableRng;

    fn ledger(total: f64) -> PrivacyBudget {
        let p = BudgetPolicy::new(BudgetUnit::PerDollar, total, 0.0).unwrap();
        PrivacyBudget::with_secret(p, [3u8; 32])
    }

    fn memo(eps: f64, w: f64) -> Memoized {
        let m = Mechanism::polyplace(eps)
            .unwrap()
            .with_unit(BudgetUnit::PerDollar)
            .unwrap();
        Memoized::new(m, w).unwrap()
    }

    #[test]
    fn same_cell_same_report_charged_once_new_cell_charged() {
        let q = SoftThreshold::new(100.0, 20.0).unwrap();
        let mut m = memo(0.1, 10.0);
        let mut l = ledger(0.25);
        let mut rng = StdRng::seed_from_u64(1);
        let (cell, rep) = m.snap(&q, &l.device_secret(), &[95.0]).unwrap();
        let u = m.offset(&l.device_secret(), 1)[0];
        assert!((0.0..10.0).contains(&u));
        assert!((rep[0] - 95.0).abs() <= 5.0 + 1e-9);
        // Another point of the same cell: same report, no charge.
        let other = u + 10.0 * (cell[0] as f64 + 0.9);
        let a = m.release(&mut l, &q, &[95.0], &mut rng).unwrap();
        let b = m.release(&mut l, &q, &[other], &mut rng).unwrap();
        assert_eq!(a.value, b.value);
        assert!(a.charged && !b.charged);
        assert_eq!(l.memo_key_count(), 1);
        // Two new cells: the second does not fit 0.25.
        let c = m.release(&mut l, &q, &[200.0], &mut rng).unwrap();
        assert!(c.charged && c.value != a.value);
        let e = m.release(&mut l, &q, &[400.0], &mut rng).unwrap_err();
        assert!(matches!(e, Error::BudgetExceeded { .. }), "{e}");
        assert_eq!(l.state().releases(), 2);
        // Old cells are still free.
        let again = m.release(&mut l, &q, &[95.0], &mut rng).unwrap();
        assert!(again.value == a.value && !again.charged);
        // The cache answers what `permanent` would, per secret.
        let mut other = PrivacyBudget::with_secret(
            BudgetPolicy::new(BudgetUnit::PerDollar, 1.0, 0.0).unwrap(),
            [4u8; 32],
        );
        let o = m.release(&mut other, &q, &[95.0], &mut rng).unwrap();
        assert_eq!(o.value, m.permanent(&q, &[4u8; 32], &[95.0]).unwrap().0);
        assert_eq!(
            a.value,
            m.permanent(&q, &l.device_secret(), &[95.0]).unwrap().0
        );
        assert_ne!(o.value, a.value);
        // Reports are on the mechanism's public grid.
        let grid = m.mechanism().release_grid(&q);
        assert_eq!(a.value, (a.value / grid).round() * grid);
    }

    /// Attack: two mechanisms of the same name, ε and δ but different
    /// calibrations (smoothness share, degrees of freedom) under one memo
    /// key. Before the fix the key held only (name, ε, δ): the second
    /// release reused the first key (not charged) and the same seed, and
    /// sent a *different* report of the same cell, i.e. two reports for
    /// one charge (with shared noise: for a location-scale release two
    /// scales of one Z let an observer solve for f(r)).
    #[test]
    fn attack_two_calibrations_under_one_key_are_charged_apart() {
        let q = SoftThreshold::new(100.0, 20.0).unwrap();
        let mut rng = StdRng::seed_from_u64(5);
        let pairs = [
            (
                Mechanism::polyplace_with(0.1, 0.2).unwrap(),
                Mechanism::polyplace_with(0.1, 0.6).unwrap(),
            ),
            (
                Mechanism::student_t_with(0.1, 3.0, 0.3).unwrap(),
                Mechanism::student_t_with(0.1, 5.0, 0.3).unwrap(),
            ),
            (
                Mechanism::cauchy_with(0.1, 3.0, 0.3).unwrap(),
                Mechanism::cauchy_with(0.1, 4.0, 0.3).unwrap(),
            ),
        ];
        for (a, b) in pairs {
            let mut l = ledger(10.0);
            let unit = BudgetUnit::PerDollar;
            let mut ma = Memoized::new(a.with_unit(unit.clone()).unwrap(), 10.0).unwrap();
            let mut mb = Memoized::new(b.with_unit(unit).unwrap(), 10.0).unwrap();
            let ra = ma.release(&mut l, &q, &[95.0], &mut rng).unwrap();
            let rb = mb.release(&mut l, &q, &[95.0], &mut rng).unwrap();
            assert!(ra.charged);
            assert!(
                rb.charged || rb.value == ra.value,
                "a second, different report ({} vs {}) was not charged",
                rb.value,
                ra.value
            );
            assert_eq!(l.state().releases(), 2);
        }
    }

    /// Attack: a huge (accepted) snapping width. r = u + w(c + 1/2)
    /// overflowed to +inf for x >= u when u > MAX/2, so the release failed
    /// for those x and succeeded for x < u: an error (a skipped period)
    /// that depends on x. Now such widths are refused up front.
    #[test]
    fn attack_huge_width_cannot_make_the_error_depend_on_x() {
        let m = || {
            Mechanism::polyplace(0.1)
                .unwrap()
                .with_unit(BudgetUnit::PerDollar)
                .unwrap()
        };
        for w in [f64::MAX, f64::MAX / 4.0, 1e300] {
            let Ok(mut memo) = Memoized::new(m(), w) else {
                continue;
            };
            let q = SoftThreshold::new(100.0, 20.0).unwrap();
            // A device whose offset is in the upper half of [0, w).
            let secret = (0..=255u8)
                .map(|b| [b; 32])
                .find(|s| memo.offset(s, 1)[0] > w * 0.75)
                .unwrap();
            let policy = BudgetPolicy::new(BudgetUnit::PerDollar, 10.0, 0.0).unwrap();
            let mut l = PrivacyBudget::with_secret(policy, secret);
            let u = memo.offset(&secret, 1)[0];
            let mut rng = StdRng::seed_from_u64(6);
            let low = memo.release(&mut l, &q, &[0.0], &mut rng).is_ok();
            let x_high = u + (f64::MAX - u) / 2.0;
            let high = memo.release(&mut l, &q, &[x_high], &mut rng).is_ok();
            assert_eq!(low, high, "w = {w:e}: accepted x, error depends on x");
            assert!(low, "w = {w:e}");
        }
    }

    /// Attack: a memoized (ε, δ) mechanism. Each distinct cell's report
    /// is (ε·d, δ_M)-GP, so the sequence bound carries δ_M once per class
    /// on top of the offset's δ; before the fix the bound dropped it (δ = 0
    /// for a static user of a δ_M = 1e-3 mechanism).
    #[test]
    fn attack_trajectory_bound_keeps_the_mechanism_delta() {
        let m = Mechanism::laplace(0.1, 1e-3).unwrap();
        let memo = Memoized::new(m, 1.0).unwrap();
        let v = |xs: &[f64]| xs.iter().map(|&x| vec![x]).collect::<Vec<_>>();
        // Static user: one class.
        let (_, d) = memo
            .trajectory_bound(&v(&[0.3; 4]), &v(&[0.55; 4]))
            .unwrap();
        assert!(d >= 1e-3, "{d}");
        // A commuter: two classes, no offset δ.
        let (_, d) = memo
            .trajectory_bound(&v(&[0.0, 10.0, 0.0]), &v(&[0.2, 10.2, 0.2]))
            .unwrap();
        assert!((2e-3..2e-3 * (1.0 + 1e-9)).contains(&d), "{d}");
    }

    /// Attack: two processes on one ledger file, one with a clock that
    /// went back a period, a period limit of one new cell. Held: the
    /// second process sees the first one's memo key (same cell: same
    /// report, free), its new cell goes to the latest period (no refund by
    /// the late clock) and is refused there; a day later it fits.
    #[cfg(feature = "std")]
    #[test]
    fn attack_two_processes_and_a_clock_back_share_memo_keys_and_periods() {
        use crate::device::budget::{FileLedger, ManualClock};
        use alloc::sync::Arc;
        let dir = std::env::temp_dir().join(format!("geopriv-memo-attack-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("ledger.json");
        let _ = std::fs::remove_file(&path);
        let policy =
            BudgetPolicy::periodic(BudgetUnit::PerDollar, 0.1, 0.0, 86_400, 1.0, 0.0).unwrap();
        let day = 86_400;
        let (ca, cb) = (ManualClock::new(10 * day), ManualClock::new(9 * day));
        let mut a = FileLedger::open_or_create(&path, &policy)
            .unwrap()
            .with_clock(Arc::new(ca.clone()));
        let mut b = FileLedger::open(&path, &policy)
            .unwrap()
            .with_clock(Arc::new(cb.clone()));
        let q = SoftThreshold::new(100.0, 20.0).unwrap();
        let mut m = memo(0.1, 10.0);
        let mut m2 = memo(0.1, 10.0);
        let mut rng = StdRng::seed_from_u64(8);
        let ra = m.release(&mut a, &q, &[95.0], &mut rng).unwrap();
        let rb = m2.release(&mut b, &q, &[95.0], &mut rng).unwrap();
        assert!(ra.charged && !rb.charged && ra.value == rb.value);
        // B's clock says day 9; the file says day 10 was charged.
        let e = m2.release(&mut b, &q, &[300.0], &mut rng).unwrap_err();
        assert!(matches!(e, Error::BudgetExceeded { .. }), "{e}");
        cb.set(11 * day);
        assert!(m2.release(&mut b, &q, &[300.0], &mut rng).unwrap().charged);
        a.refresh().unwrap();
        assert_eq!(a.state().releases(), 2);
        assert_eq!(a.state().memo_key_count(), 2);
        std::fs::remove_dir_all(&dir).unwrap();
    }

    /// Attack: the "always apart" rule in floating point. a and b = a + w
    /// are at least w apart as computed, yet for this offset u the computed
    /// cells floor(fl(fl(x − u)/w)) coincide; before the fix the pair added
    /// nothing to δ (a claim of "always", false in floating point).
    #[test]
    fn attack_points_w_apart_can_share_a_computed_cell() {
        let m = memo(0.1, 0.1);
        let (a, b) = (-64.0236546443509_f64, -63.9236546443509_f64);
        let u = 0.07634535564911006;
        assert!(b - a >= 0.1);
        let (ca, _) = m.snap_with(&[u], &[a]).unwrap();
        let (cb, _) = m.snap_with(&[u], &[b]).unwrap();
        assert_eq!(ca, cb, "the counterexample");
        let x = vec![vec![a], vec![b]];
        let x2 = vec![vec![a + 0.01], vec![b + 0.3]];
        let (_, d) = m.trajectory_bound(&x, &x2).unwrap();
        assert!(d > 0.0 && d < 1e-10, "{d}");
        // A single distinct pair (a static user) still has δ = 0.
        let (_, d) = m
            .trajectory_bound(&[vec![a], vec![a]], &[vec![b], vec![b]])
            .unwrap();
        assert_eq!(d, 0.0);
    }

    /// Attack: the cache against `permanent` and the ledger. Six cells
    /// cycled (more than the cache holds, so entries are evicted and
    /// revisited), negative coordinates, points exactly on cell
    /// boundaries u + k·w and just below them, two devices interleaved.
    /// Held: every release equals `permanent`, is charged iff its key is
    /// new, and the ledger's charges equal the distinct cells.
    #[test]
    fn attack_cache_eviction_boundaries_and_negative_points() {
        let q = GaussianKde::new(&[0.0, 0.0], 30.0).unwrap();
        let m = Mechanism::polyplace(0.01)
            .unwrap()
            .with_unit(BudgetUnit::PerMetre)
            .unwrap();
        let w = 7.0;
        let mut memo = Memoized::new(m, w).unwrap();
        let p = BudgetPolicy::new(BudgetUnit::PerMetre, 10.0, 0.0).unwrap();
        let mut ledgers = [
            PrivacyBudget::with_secret(p.clone(), [11u8; 32]),
            PrivacyBudget::with_secret(p, [12u8; 32]),
        ];
        let mut rng = StdRng::seed_from_u64(9);
        let mut seen: Vec<Vec<[u8; 32]>> = vec![Vec::new(), Vec::new()];
        for round in 0..5 {
            for k in -3i32..3 {
                for (d, l) in ledgers.iter_mut().enumerate() {
                    let s = l.device_secret();
                    let u = memo.offset(&s, 2);
                    let edge = [u[0] + w * f64::from(k), u[1] - w * f64::from(k)];
                    let x = match round % 3 {
                        0 => edge,
                        1 => [edge[0].next_down(), edge[1].next_down()],
                        _ => [edge[0] + 0.5 * w, -edge[1] - 1e3],
                    };
                    let (perm, key) = memo.permanent(&q, &s, &x).unwrap();
                    let r = memo.release(l, &q, &x, &mut rng).unwrap();
                    assert_eq!(r.value, perm, "round {round}, k {k}, device {d}");
                    let new = !seen[d].contains(&key);
                    assert_eq!(r.charged, new);
                    if new {
                        seen[d].push(key);
                    }
                }
            }
        }
        for (d, l) in ledgers.iter().enumerate() {
            assert_eq!(l.state().releases(), seen[d].len() as u64);
            assert_eq!(l.memo_key_count(), seen[d].len());
        }
    }

    #[test]
    fn trajectory_bounds() {
        let m = memo(0.5, 1.0);
        let v = |xs: &[f64]| xs.iter().map(|&x| vec![x]).collect::<Vec<_>>();
        // Static: one pair, 0.25 apart: ε·w, no δ.
        let (e, d) = m.trajectory_bound(&v(&[0.3; 4]), &v(&[0.55; 4])).unwrap();
        assert_eq!((e, d), (0.5, 0.0));
        // A jitter inside a cell: δ = 0.05/w.
        let (e, d) = m
            .trajectory_bound(&v(&[0.3, 0.3, 0.3]), &v(&[0.3, 0.35, 0.3]))
            .unwrap();
        assert!(
            (e - 0.5).abs() < 1e-12 && (d - 0.05).abs() < 1e-12,
            "{e} {d}"
        );
        // A commute between places 10 w apart: no δ but floating point's.
        let (_, d) = m
            .trajectory_bound(&v(&[0.0, 10.0, 0.0]), &v(&[0.2, 10.2, 0.2]))
            .unwrap();
        assert!(d < 1e-13, "{d}");
        assert!(m.trajectory_bound(&v(&[0.0]), &v(&[0.0, 1.0])).is_err());
    }

    /// Bytes read in order from a buffer: the reference reading of S.
    struct Bytes(Vec<u8>, usize);

    impl RngCore for Bytes {
        fn next_u32(&mut self) -> u32 {
            let mut b = [0u8; 4];
            self.fill_bytes(&mut b);
            u32::from_le_bytes(b)
        }
        fn next_u64(&mut self) -> u64 {
            let mut b = [0u8; 8];
            self.fill_bytes(&mut b);
            u64::from_le_bytes(b)
        }
        fn fill_bytes(&mut self, dest: &mut [u8]) {
            dest.copy_from_slice(&self.0[self.1..self.1 + dest.len()]);
            self.1 += dest.len();
        }
    }

    /// The documented construction, written out with one-shot BLAKE3
    /// calls: K_q = BLAKE3_k(enc("geopriv-memo-v2", "query", id, name, ε,
    /// δ, calibration, w, d)), S = BLAKE3-XOF_{K_q}(enc("cell", c)), the
    /// memo key S[0..32] and the release's randomness read from S[32..];
    /// the kept query key and the cache give the same bytes.
    #[test]
    fn memo_key_and_noise_are_the_documented_keyed_blake3() {
        let q = GaussianKde::new(&[1.0, 2.0], 30.0).unwrap();
        let m = Mechanism::polyplace(0.01)
            .unwrap()
            .with_unit(BudgetUnit::PerMetre)
            .unwrap();
        let mut memo = Memoized::new(m.clone(), 7.0).unwrap();
        let s = [5u8; 32];
        let calibration = alloc::format!(
            "{:?}",
            (
                m.smoothness_share().map(f64::to_bits),
                m.growth(),
                m.noise_shape(),
                m.scale_for(1.0).map(f64::to_bits),
            )
        );
        let enc = |parts: &[&[u8]]| -> Vec<u8> {
            let mut v = Vec::new();
            for p in parts {
                v.extend_from_slice(&(p.len() as u64).to_le_bytes());
                v.extend_from_slice(p);
            }
            v
        };
        let query_key = *blake3::keyed_hash(
            &s,
            &enc(&[
                b"geopriv-memo-v2",
                b"query",
                q.descriptor().canonical_id().as_bytes(),
                m.name().as_str().as_bytes(),
                &m.epsilon().to_bits().to_le_bytes(),
                &m.delta().to_bits().to_le_bytes(),
                calibration.as_bytes(),
                &7.0f64.to_bits().to_le_bytes(),
                &2u64.to_le_bytes(),
            ]),
        )
        .as_bytes();
        let x = [1_000.0, -2_000.0];
        let (cell, rep) = memo.snap(&q, &s, &x).unwrap();
        let cells: Vec<u8> = cell.iter().flat_map(|c| c.to_le_bytes()).collect();
        let mut stream = alloc::vec![0u8; 4096];
        blake3::Hasher::new_keyed(&query_key)
            .update(&enc(&[b"cell", &cells]))
            .finalize_xof()
            .fill(&mut stream);
        let key: [u8; 32] = stream[..32].try_into().unwrap();
        assert_eq!(memo.memo_key(&q, &s, &cell), key);
        let value = m
            .privatize_unmetered(&q, &rep, &mut Bytes(stream, 32))
            .unwrap();
        assert_eq!(memo.permanent(&q, &s, &x).unwrap(), (value, key));
        let policy = BudgetPolicy::new(BudgetUnit::PerMetre, 1.0, 0.0).unwrap();
        let mut l = PrivacyBudget::with_secret(policy, s);
        let mut rng = StdRng::seed_from_u64(3);
        for _ in 0..2 {
            let r = memo.release(&mut l, &q, &x, &mut rng).unwrap();
            assert_eq!(r.value, value);
        }
        assert!(l.is_memoized(&key));
    }

    /// The stream reads S in order across its 64-byte blocks, whatever the
    /// mix of 4-, 8- and n-byte reads.
    #[test]
    fn memo_stream_reads_the_xof_in_order() {
        let qk = [9u8; 32];
        let cell = [4i64, -1];
        let mut want = alloc::vec![0u8; 1024];
        let mut h = blake3::Hasher::new_keyed(&qk);
        absorb3(&mut h, b"cell");
        absorb3(
            &mut h,
            &[
                4u8, 0, 0, 0, 0, 0, 0, 0, 255, 255, 255, 255, 255, 255, 255, 255,
            ],
        );
        h.finalize_xof().fill(&mut want);
        let mut st = cell_stream(&mut blake3::Hasher::new_keyed(&qk), &cell);
        assert_eq!(st.key()[..], want[..32]);
        let mut at = 32;
        let mut got = Vec::new();
        for i in 0..60usize {
            match i % 4 {
                0 => got.extend_from_slice(&st.next_u32().to_le_bytes()),
                1 => got.extend_from_slice(&st.next_u64().to_le_bytes()),
                2 => {
                    let mut b = alloc::vec![0u8; i % 70];
                    st.fill_bytes(&mut b);
                    got.extend_from_slice(&b);
                }
                _ => got.extend_from_slice(&st.next_u64().to_le_bytes()),
            }
            assert_eq!(got[..], want[at..at + got.len()], "read {i}");
        }
        at += got.len();
        assert!(at > 128, "the reads crossed blocks");
    }

    /// Cells of 5 and 6 coordinates: the cell message fits one block at
    /// d = 5 and not at d = 6 (absorbed part by part, the same bytes);
    /// neither is cached (d > CACHE_MAX_DIM). Held: each release equals
    /// `permanent`, the key equals the documented one-shot BLAKE3, and a
    /// cell is charged once.
    #[test]
    fn high_dimensional_cells_are_derived_and_charged_once() {
        for d in [5usize, 6] {
            let center = alloc::vec![0.0; d];
            let q = GaussianKde::new(&center, 30.0).unwrap();
            let m = Mechanism::polyplace(0.01)
                .unwrap()
                .with_unit(BudgetUnit::PerMetre)
                .unwrap();
            let mut memo = Memoized::new(m, 5.0).unwrap();
            let s = [6u8; 32];
            let x: Vec<f64> = (0..d).map(|i| 3.0 * i as f64 - 7.0).collect();
            let (cell, _) = memo.snap(&q, &s, &x).unwrap();
            let mut msg = Vec::new();
            msg.extend_from_slice(&4u64.to_le_bytes());
            msg.extend_from_slice(b"cell");
            msg.extend_from_slice(&((8 * d) as u64).to_le_bytes());
            for c in &cell {
                msg.extend_from_slice(&c.to_le_bytes());
            }
            let mut hasher = blake3::Hasher::new_keyed(&memo.query_key(&q, &s, d));
            hasher.update(&msg);
            let mut key = [0u8; 32];
            hasher.finalize_xof().fill(&mut key);
            assert_eq!(memo.memo_key(&q, &s, &cell), key, "d = {d}");
            let (perm, pk) = memo.permanent(&q, &s, &x).unwrap();
            assert_eq!(pk, key);
            let p = BudgetPolicy::new(BudgetUnit::PerMetre, 1.0, 0.0).unwrap();
            let mut l = PrivacyBudget::with_secret(p, s);
            let mut rng = StdRng::seed_from_u64(4);
            for i in 0..3 {
                let r = memo.release(&mut l, &q, &x, &mut rng).unwrap();
                assert_eq!((r.value, r.charged), (perm, i == 0), "d = {d}");
            }
            assert_eq!(l.state().releases(), 1);
        }
    }

    /// Known answer (pins the v2 construction across versions of this
    /// library and of the blake3 crate): the memo key and the permanent
    /// report of one device, query and income.
    #[test]
    fn memo_known_answer() {
        let q = SoftThreshold::new(100_000.0, 20_000.0).unwrap();
        let m = Mechanism::polyplace(1e-4)
            .unwrap()
            .with_unit(BudgetUnit::PerDollar)
            .unwrap();
        let memo = Memoized::new(m, 5_000.0).unwrap();
        let (value, key) = memo.permanent(&q, &[7u8; 32], &[95_000.0]).unwrap();
        let hex: alloc::string::String = key.iter().map(|b| alloc::format!("{b:02x}")).collect();
        assert_eq!((value, hex.as_str()), (KNOWN_VALUE, KNOWN_KEY));
    }

    const KNOWN_VALUE: f64 = 0.3828125;
    const KNOWN_KEY: &str = "6eaf8784c03d82e9b6007a9ff4d9aab1bd715767503415ee70fe241fc5de1af0";

    #[test]
    fn keys_depend_on_secret_query_mechanism_and_cell() {
        let q = SoftThreshold::new(100.0, 20.0).unwrap();
        let q2 = SoftThreshold::new(100.0, 21.0).unwrap();
        let s = [1u8; 32];
        let m = memo(0.1, 10.0);
        let k = m.memo_key(&q, &s, &[3]);
        assert_ne!(k, m.memo_key(&q, &[2u8; 32], &[3]));
        assert_ne!(k, m.memo_key(&q2, &s, &[3]));
        assert_ne!(k, m.memo_key(&q, &s, &[4]));
        assert_ne!(k, memo(0.2, 10.0).memo_key(&q, &s, &[3]));
        assert_ne!(k, memo(0.1, 11.0).memo_key(&q, &s, &[3]));
        assert_eq!(k, m.memo_key(&q, &s, &[3]));
    }

    #[test]
    fn units_bad_points_and_the_instantaneous_layer() {
        let q = GaussianKde::new(&[0.0, 0.0], 100.0).unwrap();
        let m = Mechanism::polyplace(0.01)
            .unwrap()
            .with_unit(BudgetUnit::PerMetre)
            .unwrap();
        let mut memo = Memoized::new(m, 50.0)
            .unwrap()
            .with_instantaneous(InstantaneousLayer::new(1.0).unwrap());
        let mut rng = StdRng::seed_from_u64(2);
        // A per-dollar ledger refuses a per-metre charge.
        let mut dollars = ledger(1.0);
        assert!(memo
            .release(&mut dollars, &q, &[1.0, 2.0], &mut rng)
            .is_err());
        let p = BudgetPolicy::new(BudgetUnit::PerMetre, 1.0, 0.0).unwrap();
        let mut l = PrivacyBudget::with_secret(p, [9u8; 32]);
        assert!(memo
            .release(&mut l, &q, &[f64::NAN, 0.0], &mut rng)
            .is_err());
        assert!(memo.release(&mut l, &q, &[1e300, 0.0], &mut rng).is_err());
        assert!(memo.release(&mut l, &q, &[1.0], &mut rng).is_err());
        assert_eq!(l.state().releases(), 0);
        // The layer: fresh values around one permanent report, one charge.
        let (perm, _) = memo.permanent(&q, &l.device_secret(), &[1.0, 2.0]).unwrap();
        let n = 20_000;
        let mut sum = 0.0;
        for _ in 0..n {
            let r = memo.release(&mut l, &q, &[1.0, 2.0], &mut rng).unwrap();
            sum += r.value - perm;
        }
        assert_eq!(l.state().releases(), 1);
        let sd = (InstantaneousLayer::new(1.0).unwrap().extra_variance(&q) / n as f64).sqrt();
        assert!((sum / n as f64).abs() < 6.0 * sd);
        assert!(!format!("{l:?}").contains("9, 9"));
    }
    /// Attack: the memo key S[0..32] and the noise S[32..] are disjoint
    /// parts of one XOF output (the key never reveals a noise byte), and
    /// the cell message is the same on the one-block path (d <= 5) and the
    /// part-by-part path (d > 5): enc("cell", c) = le64(4) "cell" le64(8d)
    /// le64(c_1) … le64(c_d).
    #[test]
    fn attack_memo_key_and_noise_are_disjoint_and_cells_encode_alike() {
        let k = [9u8; 32];
        for d in 0..9usize {
            let cell: Vec<i64> = (0..d as i64).map(|j| j * 7 - 3).collect();
            let mut h = blake3::Hasher::new_keyed(&k);
            let mut s = cell_stream(&mut h, &cell);
            let key = s.key();
            let mut noise = [0u8; 100];
            s.fill_bytes(&mut noise);
            let mut reference = blake3::Hasher::new_keyed(&k);
            reference.update(&4u64.to_le_bytes());
            reference.update(b"cell");
            reference.update(&((8 * d) as u64).to_le_bytes());
            for c in &cell {
                reference.update(&c.to_le_bytes());
            }
            let mut out = [0u8; 132];
            reference.finalize_xof().fill(&mut out);
            assert_eq!(key[..], out[..32], "d = {d}");
            assert_eq!(noise[..], out[32..], "d = {d}");
        }
    }

    /// Attack: distinct (secret, query, dimension, cell) never share a memo
    /// key: cells that differ only by a trailing zero or a sign, the empty
    /// cell, queries of one kind with another width, two secrets.
    #[test]
    fn attack_distinct_inputs_never_share_a_memo_key() {
        let m = memo(0.1, 10.0);
        let qs = [
            SoftThreshold::new(100.0, 20.0).unwrap(),
            SoftThreshold::new(100.0, 2.0).unwrap(),
            SoftThreshold::new(10.0, 20.0).unwrap(),
        ];
        let cells: [&[i64]; 9] = [
            &[],
            &[0],
            &[1],
            &[-1],
            &[0, 0],
            &[1, 0],
            &[0, 1],
            &[i64::MIN],
            &[0, 0, 0, 0, 0, 0],
        ];
        let mut keys = alloc::collections::BTreeSet::new();
        for secret in [[1u8; 32], [2u8; 32]] {
            for q in &qs {
                for c in cells {
                    assert!(keys.insert(m.memo_key(q, &secret, c)));
                }
            }
        }
        // Another width or ε: another key for the same cell.
        let s = [1u8; 32];
        assert!(keys.insert(memo(0.1, 11.0).memo_key(&qs[0], &s, &[0])));
        assert!(keys.insert(memo(0.2, 10.0).memo_key(&qs[0], &s, &[0])));
    }

    /// Attack: cells of more than CACHE_MAX_DIM coordinates (not cached)
    /// are still memoized: the same cell re-sends the same report, charged
    /// once, as `permanent` computes it.
    #[test]
    fn attack_five_coordinate_cells_are_memoized_without_the_cache() {
        let q = GaussianKde::new(&[0.0; 5], 3.0).unwrap();
        let mut m = memo(0.1, 10.0);
        let mut l = ledger(1.0);
        let mut rng = StdRng::seed_from_u64(3);
        let x = [1.0, 2.0, 3.0, 4.0, 5.0];
        let a = m.release(&mut l, &q, &x, &mut rng).unwrap();
        let b = m.release(&mut l, &q, &x, &mut rng).unwrap();
        assert!(a.charged && !b.charged);
        assert_eq!(a.value, b.value);
        assert_eq!(a.value, m.permanent(&q, &l.device_secret(), &x).unwrap().0);
        assert_eq!(l.memo_key_count(), 1);
    }

    /// Attack: NaN and ±inf are refused with nothing charged; -0.0 is the
    /// cell of 0.0 (same report, charged once).
    #[test]
    fn attack_non_finite_points_refused_and_negative_zero_is_zero() {
        let q = SoftThreshold::new(100.0, 20.0).unwrap();
        let mut m = memo(0.1, 10.0);
        let mut l = ledger(1.0);
        let mut rng = StdRng::seed_from_u64(4);
        for x in [f64::NAN, f64::INFINITY, f64::NEG_INFINITY] {
            assert!(m.release(&mut l, &q, &[x], &mut rng).is_err());
            assert!(m.permanent(&q, &[1u8; 32], &[x]).is_err());
        }
        assert_eq!((l.state().releases(), l.memo_key_count()), (0, 0));
        let a = m.release(&mut l, &q, &[0.0], &mut rng).unwrap();
        let b = m.release(&mut l, &q, &[-0.0], &mut rng).unwrap();
        assert!(a.charged && !b.charged && a.value == b.value);
    }
    /// Attack: a tampered memo table (keys out of order, a key repeated,
    /// upper-case or short hex) is refused on restore; the untouched one
    /// restores with every key still charged.
    #[test]
    fn attack_a_tampered_memo_table_is_refused() {
        let q = SoftThreshold::new(100.0, 20.0).unwrap();
        let mut m = memo(0.1, 10.0);
        let mut l = ledger(1.0);
        let mut rng = StdRng::seed_from_u64(6);
        for x in [5.0, 50.0, 500.0] {
            assert!(m.release(&mut l, &q, &[x], &mut rng).unwrap().charged);
        }
        let policy = BudgetPolicy::new(BudgetUnit::PerDollar, 1.0, 0.0).unwrap();
        let json = l.to_json();
        let back = PrivacyBudget::restore(&json, &policy).unwrap();
        assert_eq!(back.memo_key_count(), 3);
        let v: serde_json::Value = serde_json::from_str(&json).unwrap();
        let keys: Vec<String> = v["memo"]
            .as_array()
            .unwrap()
            .iter()
            .map(|k| k.as_str().unwrap().to_string())
            .collect();
        let tampered = [
            vec![keys[1].clone(), keys[0].clone(), keys[2].clone()],
            vec![keys[0].clone(), keys[0].clone(), keys[2].clone()],
            vec![keys[0].to_uppercase(), keys[1].clone(), keys[2].clone()],
            vec![keys[0][..62].to_string(), keys[1].clone(), keys[2].clone()],
        ];
        for t in tampered {
            let mut w = v.clone();
            w["memo"] = serde_json::json!(t);
            assert!(
                PrivacyBudget::restore(&w.to_string(), &policy).is_err(),
                "{t:?}"
            );
        }
    }
}
