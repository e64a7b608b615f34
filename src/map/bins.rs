//! Exact integer bin counts of noisy locations (docs/MATH.md §9.2 (e)).
//!
//! The server never keeps the n noisy locations: it adds one to the count
//! of the fine-grid bin nearest to each. Counts are integers, so partial
//! counts from any number of shards merge by addition into exactly the same
//! state in any order (bit-identical maps under any sharding).

use super::query_set::KdeGrid;
use crate::error::{Error, Result};
use alloc::format;
use alloc::string::String;
use alloc::vec;
use alloc::vec::Vec;

/// The fine binning grid of a map: bin spacing Δ = step / `refine` per
/// axis, bin centres aligned with the map's query points, and `margin`
/// bins beyond the map on every side (noisy locations fall outside the
/// map; those beyond the margin are only counted, see
/// [`BinnedCounts::outside`]).
#[derive(Clone, Debug, PartialEq)]
pub struct BinSpec {
    dim: usize,
    /// Centre of bin (0, 0).
    first: [f64; 2],
    delta: [f64; 2],
    bins: [usize; 2],
    refine: usize,
    margin: usize,
    map_points: [usize; 2],
    grid_id: String,
}

impl BinSpec {
    /// Bins for `grid` with `refine` bins per map step and `margin` bins on
    /// each side of the map.
    pub fn new(grid: &KdeGrid, refine: usize, margin: usize) -> Result<Self> {
        if refine == 0 || refine > 64 {
            return Err(Error::InvalidParameter {
                name: "refine",
                value: refine as f64,
                requirement: "between 1 and 64",
            });
        }
        let pts = grid.points();
        let step = grid.step();
        let o = grid.origin();
        let mut first = [0.0; 2];
        let mut delta = [1.0; 2];
        let mut bins = [1usize; 2];
        for a in 0..grid.dim() {
            delta[a] = step[a] / refine as f64;
            first[a] = o[a] - margin as f64 * delta[a];
            bins[a] = (pts[a] - 1)
                .saturating_mul(refine)
                .saturating_add(1)
                .saturating_add(margin.saturating_mul(2));
        }
        if bins[0].saturating_mul(bins[1]) > 1 << 26 {
            return Err(Error::InvalidParameter {
                name: "margin",
                value: margin as f64,
                requirement: "small enough for at most 2^26 bins",
            });
        }
        Ok(Self {
            dim: grid.dim(),
            first,
            delta,
            bins,
            refine,
            margin,
            map_points: pts,
            grid_id: grid.id(),
        })
    }

    /// Dimension.
    pub fn dim(&self) -> usize {
        self.dim
    }
    /// Bins per axis (1 on the unused axis in 1-D).
    pub fn bins(&self) -> [usize; 2] {
        self.bins
    }
    /// Bin spacing Δ per axis.
    pub fn delta(&self) -> [f64; 2] {
        self.delta
    }
    /// Bins per map step.
    pub fn refine(&self) -> usize {
        self.refine
    }
    /// Bins beyond the map on each side.
    pub fn margin(&self) -> usize {
        self.margin
    }
    /// Map points per axis.
    pub fn map_points(&self) -> [usize; 2] {
        self.map_points
    }
    /// Total number of bins.
    pub fn len(&self) -> usize {
        self.bins[0] * self.bins[1]
    }
    /// Never empty.
    pub fn is_empty(&self) -> bool {
        false
    }
    /// Identity of the binning (grid id, refine, margin): counts with
    /// another identity refuse to merge.
    pub fn id(&self) -> String {
        format!("{}|bins:{}:{}", self.grid_id, self.refine, self.margin)
    }
    /// The id of the map grid these bins belong to.
    pub fn grid_id(&self) -> &str {
        &self.grid_id
    }
    /// Flat index (i0·bins1 + i1) of the bin holding map point j.
    pub fn map_bin(&self, j: usize) -> usize {
        let (i, k) = (j / self.map_points[1], j % self.map_points[1]);
        let b0 = self.margin + i * self.refine;
        let b1 = if self.dim == 1 {
            0
        } else {
            self.margin + k * self.refine
        };
        b0 * self.bins[1] + b1
    }
    /// Flat index of the bin nearest to x, or `None` beyond the bins.
    /// x must be finite with `dim` coordinates (checked by the caller).
    pub fn bin_of(&self, x: &[f64]) -> Option<usize> {
        self.bin_and_offset(x).map(|(bin, _)| bin)
    }
    /// [`bin_of`](Self::bin_of) with x's offset from the bin's centre per
    /// axis in fixed point: u_a/Δ_a ∈ [−½, ½) rounded to a multiple of
    /// 2^−[`MOMENT_OFFSET_BITS`] (0 on a missing second axis). A function of
    /// x alone, so moment sums of these integers are the same under any
    /// sharding (branch moment24).
    pub(crate) fn bin_and_offset(&self, x: &[f64]) -> Option<(usize, [i64; 2])> {
        let mut idx = [0usize; 2];
        let mut off = [0i64; 2];
        let scale = (1u64 << MOMENT_OFFSET_BITS) as f64;
        for a in 0..self.dim {
            // ⌊v⌋ ∈ [0, bins) iff v ∈ [0, bins) (bins an integer; NaN in
            // neither), and there ⌊v⌋ is v truncated: the bin of
            // floor(v) without the call (libm's floor was 1.4 % of
            // `map aggregate`'s samples at εh 1; branch speed07).
            let v = (x[a] - self.first[a]) / self.delta[a] + 0.5;
            if !(v >= 0.0 && v < self.bins[a] as f64) {
                return None;
            }
            idx[a] = v as usize;
            let frac = v - idx[a] as f64 - 0.5;
            off[a] = libm::round(frac * scale) as i64;
        }
        Some((idx[0] * self.bins[1] + idx[1], off))
    }
    /// Centre of bin `flat`.
    pub fn bin_centre(&self, flat: usize) -> [f64; 2] {
        let (i, k) = (flat / self.bins[1], flat % self.bins[1]);
        [
            self.first[0] + i as f64 * self.delta[0],
            if self.dim == 1 {
                0.0
            } else {
                self.first[1] + k as f64 * self.delta[1]
            },
        ]
    }
    /// Distance from the map's bounding box to the nearest point that is
    /// not in any bin: (margin + 1/2)·Δ (smallest axis).
    pub fn truncation_radius(&self) -> f64 {
        let mut r = f64::INFINITY;
        for a in 0..self.dim {
            r = r.min((self.margin as f64 + 0.5) * self.delta[a]);
        }
        r
    }
}

/// Fixed-point bits of a location's within-bin offset u_a/Δ_a in the
/// per-bin moments of [`BinnedCounts::moments`]: 2^−32 of a bin (1.3e-8 m
/// for 55.6 m bins), so the moments are exact integer sums (i128: n up to
/// 2^64 reports of |offset| <= 2^31 and squares <= 2^62 cannot overflow)
/// and merge bit-identically, like the counts.
///
/// ```
/// assert_eq!(geopriv::map::MOMENT_OFFSET_BITS, 32);
/// ```
pub const MOMENT_OFFSET_BITS: u32 = 32;

/// Where [`BinnedCounts::add`] counts one location: its bin and its
/// fixed-point offset from the bin's centre
/// ([`BinSpec::bin_and_offset`]).
#[cfg(feature = "std")]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Slot {
    bin: usize,
    offset: [i64; 2],
}

/// The per-bin moments of the locations' fixed-point offsets q = round(u/Δ
/// · 2^32) from their bin centres: [Σ q_0, Σ q_1, Σ q_0², Σ q_1², Σ q_0 q_1].
pub type BinMoments = [i128; 5];

#[cfg(feature = "std")]
impl Slot {
    /// The bin's flat index.
    pub(crate) fn bin(&self) -> usize {
        self.bin
    }
}

fn add_moment(m: &mut BinMoments, q: [i64; 2]) {
    let (a, b) = (q[0] as i128, q[1] as i128);
    m[0] += a;
    m[1] += b;
    m[2] += a * a;
    m[3] += b * b;
    m[4] += a * b;
}

/// a·b exactly as (high, low) 128-bit halves (the moment checks compare
/// products up to 2^254).
fn mul_wide(a: u128, b: u128) -> (u128, u128) {
    const M: u128 = u64::MAX as u128;
    let (a1, a0, b1, b0) = (a >> 64, a & M, b >> 64, b & M);
    let (ll, lh, hl, hh) = (a0 * b0, a0 * b1, a1 * b0, a1 * b1);
    let mid = (ll >> 64) + (lh & M) + (hl & M);
    let low = (ll & M) | (mid << 64);
    let high = hh + (lh >> 64) + (hl >> 64) + (mid >> 64);
    (high, low)
}

/// Whether `m` are moments ([`BinMoments`]) that `count` locations of a
/// `dim`-axis binning can make: each offset q_a is an integer with |q_a|
/// <= 2^31 ([`MOMENT_OFFSET_BITS`]), so |Σq_a| <= c·2^31, Σq_a² <=
/// c·2^62, c·Σq_a² >= (Σq_a)² and (Σq_0q_1)² <= Σq_0²·Σq_1² (Cauchy–Schwarz),
/// everything 0 where c = 0 and the second axis's sums 0 in one dimension.
/// Exact integer comparisons (256-bit products), so no genuine state is
/// refused and a forged one cannot overflow the planner's sums. Refused
/// with [`Error::InvalidReport`] ("partial state refused: …"; branch
/// state25).
///
/// ```
/// use geopriv::map::check_bin_moments;
/// let q: [i128; 2] = [1 << 30, -(1 << 31)];   // one location
/// let m = [q[0], q[1], q[0] * q[0], q[1] * q[1], q[0] * q[1]];
/// assert!(check_bin_moments(&m, 1, 2).is_ok());
/// assert!(check_bin_moments(&m, 0, 2).is_err());   // no location
/// assert!(check_bin_moments(&[q[0], 0, 0, 0, 0], 1, 2).is_err()); // Σq² < (Σq)²
/// # Ok::<(), geopriv::Error>(())
/// ```
pub fn check_bin_moments(m: &BinMoments, count: u64, dim: usize) -> Result<()> {
    let refuse = |reason| Err(Error::InvalidReport { reason });
    if count == 0 {
        return if m.iter().all(|&v| v == 0) {
            Ok(())
        } else {
            refuse("partial state refused: moments on a bin with count 0")
        };
    }
    if dim < 2 && (m[1] != 0 || m[3] != 0 || m[4] != 0) {
        return refuse("partial state refused: second-axis moments of a 1-D binning");
    }
    let c = count as u128;
    let half = 1u128 << (MOMENT_OFFSET_BITS - 1);
    for a in 0..2 {
        let (s, s2) = (m[a], m[2 + a]);
        // c <= 2^64, so c·2^31 and c·2^62 fit in a u128.
        if s.unsigned_abs() > c * half || s2 < 0 || s2.unsigned_abs() > c * half * half {
            return refuse("partial state refused: moments beyond what the bin's count allows");
        }
        if mul_wide(c, s2 as u128) < mul_wide(s.unsigned_abs(), s.unsigned_abs()) {
            return refuse("partial state refused: moments with a negative variance");
        }
    }
    let x = m[4].unsigned_abs();
    if mul_wide(x, x) > mul_wide(m[2] as u128, m[3] as u128) {
        return refuse("partial state refused: a cross moment beyond Cauchy-Schwarz");
    }
    Ok(())
}

/// One bin's moments in a partial state's JSON (collector `GET .../state`,
/// the bindings' map server `to_json`): [bin index, "Σq_0", "Σq_1",
/// "Σq_0²", "Σq_1²", "Σq_0q_1"], the i128 sums as canonical decimal
/// strings (JSON numbers lose them past 2^53; branch state25).
pub type MomentRow = (u64, String, String, String, String, String);

/// Parse a canonical decimal i128 (no sign but `-`, no leading zeros,
/// at most 40 characters).
fn parse_moment(s: &str) -> Result<i128> {
    let v = if s.len() <= 40 {
        s.parse::<i128>().ok()
    } else {
        None
    };
    match v {
        Some(v) if format!("{v}") == s => Ok(v),
        _ => Err(Error::InvalidReport {
            reason: "partial state refused: a moment that is not a canonical decimal i128",
        }),
    }
}

/// Exact integer counts of noisy locations per bin; mergeable.
///
/// ```
/// use geopriv::map::{BinSpec, BinnedCounts, KdeGrid};
/// let grid = KdeGrid::square(1000.0, 5)?;
/// let spec = BinSpec::new(&grid, 4, 8)?;
/// let mut a = BinnedCounts::new(spec.clone());
/// let mut b = BinnedCounts::new(spec);
/// a.add(&[100.0, 200.0])?;
/// b.add(&[5e6, 0.0])?;           // far outside: counted as outside
/// a.merge(&b)?;
/// assert_eq!((a.total(), a.outside()), (2, 1));
/// # Ok::<(), geopriv::Error>(())
/// ```
#[derive(Clone, Debug, PartialEq)]
pub struct BinnedCounts {
    spec: BinSpec,
    counts: Vec<u64>,
    /// Per bin the moments of the offsets (branch moment24); `None` where
    /// they are not known (counts restored by
    /// [`from_counts`](Self::from_counts), or merged with such counts).
    moments: Option<Vec<BinMoments>>,
    outside: u64,
    total: u64,
}

impl BinnedCounts {
    /// Empty counts for `spec`, keeping the offsets' moments
    /// ([`with_moments`](Self::with_moments) with `true`).
    pub fn new(spec: BinSpec) -> Self {
        Self::with_moments(spec, true)
    }
    /// Empty counts for `spec`; the offsets' moments
    /// ([`moments`](Self::moments)) are kept, and their 80 bytes a bin
    /// allocated, only if `keep` (the map server keeps them only where the
    /// planner reads them; branch moment24, state25).
    ///
    /// ```
    /// use geopriv::map::{BinSpec, BinnedCounts, KdeGrid};
    /// let spec = BinSpec::new(&KdeGrid::square(1000.0, 5)?, 4, 8)?;
    /// let mut a = BinnedCounts::with_moments(spec, false);
    /// a.add(&[100.0, 200.0])?;
    /// assert!(a.moments().is_none());
    /// # Ok::<(), geopriv::Error>(())
    /// ```
    pub fn with_moments(spec: BinSpec, keep: bool) -> Self {
        let counts = vec![0; spec.len()];
        let moments = keep.then(|| vec![[0; 5]; spec.len()]);
        Self {
            spec,
            counts,
            moments,
            outside: 0,
            total: 0,
        }
    }
    /// The binning.
    pub fn spec(&self) -> &BinSpec {
        &self.spec
    }
    /// Count one noisy location (finite, `dim` coordinates; otherwise a
    /// typed error and nothing is counted).
    pub fn add(&mut self, x: &[f64]) -> Result<()> {
        crate::error::check_point(x, self.spec.dim)?;
        match self.spec.bin_and_offset(x) {
            Some((b, q)) => {
                self.counts[b] += 1;
                if let Some(m) = self.moments.as_mut() {
                    add_moment(&mut m[b], q);
                }
            }
            None => self.outside += 1,
        }
        self.total += 1;
        Ok(())
    }
    /// The bin [`add`](Self::add) counts `x` in (`None`: beyond the
    /// bins), or the error it refuses `x` with; nothing is counted
    /// ([`add_slot`](Self::add_slot) does it). `add(x)` is `slot_of(x)`
    /// then `add_slot` of the result. Only the std reader
    /// (`map::ingest`) judges a report before counting it.
    #[cfg(feature = "std")]
    pub(crate) fn slot_of(&self, x: &[f64]) -> Result<Option<Slot>> {
        crate::error::check_point(x, self.spec.dim)?;
        Ok(self
            .spec
            .bin_and_offset(x)
            .map(|(bin, offset)| Slot { bin, offset }))
    }
    /// Count one location in the bin `slot` from [`slot_of`](Self::slot_of)
    /// (`None`: beyond the bins). A slot past the bins is refused.
    #[cfg(feature = "std")]
    pub(crate) fn add_slot(&mut self, slot: Option<Slot>) -> Result<()> {
        match slot {
            Some(Slot { bin: b, offset }) => match self.counts.get_mut(b) {
                Some(c) => {
                    *c += 1;
                    if let Some(m) = self.moments.as_mut().and_then(|m| m.get_mut(b)) {
                        add_moment(m, offset);
                    }
                }
                None => {
                    return Err(Error::InvalidReport {
                        reason: "bin past the binning",
                    })
                }
            },
            None => self.outside += 1,
        }
        self.total += 1;
        Ok(())
    }
    /// Counts restored from their parts (a partial state shipped from
    /// another shard): one count per bin of `spec` and the locations
    /// beyond the bins. Refused (typed error) if the length differs or the
    /// total would overflow. The offsets' moments are not among these
    /// parts: the result has none ([`moments`](Self::moments) is `None`,
    /// and the planner charges the kernel maps' rounding as before;
    /// [`from_parts`](Self::from_parts) restores them too).
    ///
    /// ```
    /// use geopriv::map::{BinSpec, BinnedCounts, KdeGrid};
    /// let spec = BinSpec::new(&KdeGrid::square(1000.0, 5)?, 4, 8)?;
    /// let mut a = BinnedCounts::new(spec.clone());
    /// a.add(&[100.0, 200.0])?;
    /// let back = BinnedCounts::from_counts(spec, a.counts().to_vec(), a.outside())?;
    /// assert_eq!((back.counts(), back.total()), (a.counts(), a.total()));
    /// assert!(back.moments().is_none()); // not among the parts
    /// # Ok::<(), geopriv::Error>(())
    /// ```
    pub fn from_counts(spec: BinSpec, counts: Vec<u64>, outside: u64) -> Result<Self> {
        if counts.len() != spec.len() {
            return Err(Error::InvalidReport {
                reason: "counts with another number of bins",
            });
        }
        let total = counts
            .iter()
            .try_fold(outside, |t, &c| t.checked_add(c))
            .ok_or(Error::Overflow { what: "map count" })?;
        Ok(Self {
            spec,
            counts,
            moments: None,
            outside,
            total,
        })
    }

    /// [`from_counts`](Self::from_counts) with the per-bin moments of the
    /// offsets ([`moments`](Self::moments)) as well, one per bin (else a
    /// typed error). Moments no locations of the bin's count c can make
    /// are refused ([`check_bin_moments`]: |Σq_a| <= c·2^31,
    /// (Σq_a)²/c <= Σq_a² <= c·2^62, (Σq_0q_1)² <= Σq_0²·Σq_1², all 0
    /// where c = 0 and on a missing second axis; branch state25).
    ///
    /// ```
    /// use geopriv::map::{BinSpec, BinnedCounts, KdeGrid};
    /// let spec = BinSpec::new(&KdeGrid::square(1000.0, 5)?, 4, 8)?;
    /// let mut a = BinnedCounts::new(spec.clone());
    /// a.add(&[100.0, 200.0])?;
    /// let m = a.moments().unwrap().to_vec();
    /// let back = BinnedCounts::from_parts(spec, a.counts().to_vec(), m, a.outside())?;
    /// assert_eq!(back, a);
    /// # Ok::<(), geopriv::Error>(())
    /// ```
    pub fn from_parts(
        spec: BinSpec,
        counts: Vec<u64>,
        moments: Vec<BinMoments>,
        outside: u64,
    ) -> Result<Self> {
        if moments.len() != spec.len() {
            return Err(Error::InvalidReport {
                reason: "moments with another number of bins",
            });
        }
        let mut c = Self::from_counts(spec, counts, outside)?;
        for (m, &n) in moments.iter().zip(&c.counts) {
            check_bin_moments(m, n, c.spec.dim)?;
        }
        c.moments = Some(moments);
        Ok(c)
    }

    /// The counts as a partial state ships them: (bin index, count) for
    /// every bin with a count, increasing index
    /// ([`from_sparse`](Self::from_sparse) reads them back).
    ///
    /// ```
    /// use geopriv::map::{BinSpec, BinnedCounts, KdeGrid};
    /// let spec = BinSpec::new(&KdeGrid::square(1000.0, 5)?, 4, 8)?;
    /// let mut a = BinnedCounts::new(spec.clone());
    /// a.add(&[100.0, 200.0])?;
    /// assert_eq!(a.sparse_counts(), vec![(spec.bin_of(&[100.0, 200.0]).unwrap() as u64, 1)]);
    /// # Ok::<(), geopriv::Error>(())
    /// ```
    pub fn sparse_counts(&self) -> Vec<(u64, u64)> {
        self.counts
            .iter()
            .enumerate()
            .filter(|(_, &n)| n > 0)
            .map(|(i, &n)| (i as u64, n))
            .collect()
    }
    /// The offsets' moments as a partial state ships them (`None` if
    /// these counts have none): a [`MomentRow`] for every bin whose
    /// moments are not all 0, increasing index (a bin without a count
    /// has none; branch state25).
    ///
    /// ```
    /// use geopriv::map::{BinSpec, BinnedCounts, KdeGrid};
    /// let spec = BinSpec::new(&KdeGrid::square(1000.0, 5)?, 4, 8)?;
    /// let mut a = BinnedCounts::new(spec.clone());
    /// a.add(&[100.0, 200.0])?;
    /// let back = BinnedCounts::from_sparse(spec, &a.sparse_counts(), a.outside(),
    ///     a.sparse_moments().as_deref())?;
    /// assert_eq!(back, a);
    /// # Ok::<(), geopriv::Error>(())
    /// ```
    pub fn sparse_moments(&self) -> Option<Vec<MomentRow>> {
        let m = self.moments.as_ref()?;
        Some(
            m.iter()
                .enumerate()
                .filter(|(_, v)| v.iter().any(|&x| x != 0))
                .map(|(i, v)| {
                    (
                        i as u64,
                        format!("{}", v[0]),
                        format!("{}", v[1]),
                        format!("{}", v[2]),
                        format!("{}", v[3]),
                        format!("{}", v[4]),
                    )
                })
                .collect(),
        )
    }
    /// Counts restored from a partial state's sparse parts
    /// ([`sparse_counts`](Self::sparse_counts),
    /// [`sparse_moments`](Self::sparse_moments); `moments` `None`: counts
    /// only, as [`from_counts`](Self::from_counts)). Refused with a typed
    /// error: bins out of the binning, out of order, repeated or with
    /// count 0; moment rows likewise, on a bin without a count, with a
    /// string that is not a canonical decimal i128, or impossible for
    /// their bin's count ([`check_bin_moments`]). Never allocates more
    /// than the binning's own arrays.
    pub fn from_sparse(
        spec: BinSpec,
        bins: &[(u64, u64)],
        outside: u64,
        moments: Option<&[MomentRow]>,
    ) -> Result<Self> {
        let len = spec.len();
        let mut dense = vec![0u64; len];
        let mut last = None;
        for &(i, n) in bins {
            if i >= len as u64 || last.is_some_and(|l| i <= l) || n == 0 {
                return Err(Error::InvalidReport {
                    reason: "bins must be (index, count > 0) in increasing index within the grid",
                });
            }
            dense[i as usize] = n;
            last = Some(i);
        }
        let Some(rows) = moments else {
            return Self::from_counts(spec, dense, outside);
        };
        let mut m = vec![[0i128; 5]; len];
        let mut last = None;
        for (i, a, b, aa, bb, ab) in rows {
            let i = *i;
            if i >= len as u64 || last.is_some_and(|l| i <= l) {
                return Err(Error::InvalidReport {
                    reason: "partial state refused: moment rows must be in increasing bin index within the grid",
                });
            }
            if dense[i as usize] == 0 {
                return Err(Error::InvalidReport {
                    reason: "partial state refused: moments on a bin with count 0",
                });
            }
            m[i as usize] = [
                parse_moment(a)?,
                parse_moment(b)?,
                parse_moment(aa)?,
                parse_moment(bb)?,
                parse_moment(ab)?,
            ];
            last = Some(i);
        }
        Self::from_parts(spec, dense, m, outside)
    }

    /// Add another shard's counts (same binning, else an error and no
    /// change). Integer addition: any sharding and merge order gives the
    /// same counts. A total that would overflow is refused
    /// ([`Error::Overflow`]) and nothing changes.
    pub fn merge(&mut self, other: &BinnedCounts) -> Result<()> {
        if other.spec != self.spec {
            return Err(Error::InvalidReport {
                reason: "counts for another map grid or binning",
            });
        }
        // Every bin is at most the total, so a total that fits means every
        // bin sum fits too.
        let total = self
            .total
            .checked_add(other.total)
            .ok_or(Error::Overflow { what: "map count" })?;
        for (a, b) in self.counts.iter_mut().zip(&other.counts) {
            *a += b;
        }
        // Moments only where both shards have them (integer sums: any
        // order gives the same bits; |Σ| stays below 2^127 as the total
        // fits in a u64).
        self.moments = match (self.moments.take(), &other.moments) {
            (Some(mut m), Some(o)) => {
                for (a, b) in m.iter_mut().zip(o) {
                    for (x, y) in a.iter_mut().zip(b) {
                        *x += y;
                    }
                }
                Some(m)
            }
            _ => None,
        };
        self.outside += other.outside;
        self.total = total;
        Ok(())
    }
    /// Count per bin (row-major, index i0·bins1 + i1).
    pub fn counts(&self) -> &[u64] {
        &self.counts
    }
    /// Per bin (row-major, as [`counts`](Self::counts)) the moments of
    /// the locations' fixed-point offsets q_a = round(2^32 u_a/Δ_a) from
    /// the bin's centre, [Σ q_0, Σ q_1, Σ q_0², Σ q_1², Σ q_0 q_1]
    /// ([`MOMENT_OFFSET_BITS`]); `None` for counts restored without them
    /// ([`from_counts`](Self::from_counts)) or merged with such counts.
    /// They give the kernel maps' rounding error
    /// ([`FftMapper::rounding_from_moments`](super::FftMapper::rounding_from_moments)).
    ///
    /// ```
    /// use geopriv::map::{BinSpec, BinnedCounts, KdeGrid};
    /// let spec = BinSpec::new(&KdeGrid::square(1000.0, 5)?, 4, 8)?;
    /// let mut a = BinnedCounts::new(spec.clone());
    /// let c = spec.bin_centre(spec.bin_of(&[100.0, 200.0]).unwrap());
    /// let d = spec.delta();
    /// a.add(&[c[0] + 0.25 * d[0], c[1]])?;
    /// let b = spec.bin_of(&[100.0, 200.0]).unwrap();
    /// assert_eq!(a.moments().unwrap()[b][0], 1 << 30); // ¼ bin = 2^30 / 2^32
    /// # Ok::<(), geopriv::Error>(())
    /// ```
    pub fn moments(&self) -> Option<&[BinMoments]> {
        self.moments.as_deref()
    }
    /// Locations beyond the bins.
    pub fn outside(&self) -> u64 {
        self.outside
    }
    /// All locations counted.
    pub fn total(&self) -> u64 {
        self.total
    }
}

impl BinSpec {
    /// The binning a server uses for noise-a-priori maps of `grid` at
    /// per-device ε: bins of at most h/8 (so the binning error is small
    /// next to the statistical one), and a margin R wide enough that for
    /// every kernel K_λ, λ ∈ [0, 1], P(|N| >= R)·T_λ(R) <= 1e-7, with
    /// P(|N| >= R) <= (1 + εR)e^{-εR} the chance that a device's noise
    /// carries it past the margin and T_λ the certified tail bound (a
    /// location beyond the margin is counted as outside; the
    /// discretisation bound's truncation part states the observed
    /// effect); both capped so that the bins stay below `max_bins` per axis
    /// (the discretisation bound of the estimate then says what was lost).
    /// Public parameters only, so every shard derives the same binning.
    pub fn for_estimation(grid: &KdeGrid, epsilon: f64, max_bins: usize) -> Result<Self> {
        let epsilon = crate::error::positive_finite("epsilon", epsilon)?;
        let h = grid.bandwidth();
        let mut radius: f64 = 0.0;
        for i in 0..=4 {
            let k = super::kernel::DebiasKernel::new(grid.dim(), h, epsilon, i as f64 / 4.0)?;
            // Smallest R (on a doubling-then-bisection search) with
            // P(|N| >= R)·T(R) <= 1e-7: a location lands beyond the margin
            // only if its noise N (planar Laplace, or Laplace in 1-D) is at
            // least R long, which happens with probability at most
            // (1 + εR)e^{-εR}, and then its term is at most T(R) (the
            // truncation part of the discretisation bound states the
            // observed effect).
            // (ε r infinite, at ε near f64::MAX: the probability is 0, not
            // inf·0 = NaN, which read as 1 and took the bins to refine 1
            // with a 254-bin margin; branch emzero.)
            let tail = |r: f64| {
                let x = epsilon * r;
                let p = if x.is_finite() {
                    ((1.0 + x) * libm::exp(-x)).min(1.0)
                } else {
                    0.0
                };
                k.tail_bound(r) * p
            };
            let mut hi = h;
            while tail(hi) > 1e-7 && hi < 1e4 * h.max(1.0 / epsilon) {
                hi *= 2.0;
            }
            let mut lo = 0.0;
            for _ in 0..40 {
                let mid = 0.5 * (lo + hi);
                if tail(mid) > 1e-7 {
                    lo = mid;
                } else {
                    hi = mid;
                }
            }
            radius = radius.max(hi);
        }
        let step = grid.step()[0].max(if grid.dim() == 2 { grid.step()[1] } else { 0.0 });
        let pts = grid.points()[0].max(grid.points()[1]);
        let mut refine = (libm::ceil(8.0 * step / h) as usize).clamp(1, 64);
        loop {
            let delta = step / refine as f64;
            // Saturating: an extreme ε·h asks for an absurd margin, which
            // the cap below brings back to `max_bins` (the discretisation
            // bound then says what was lost).
            let margin = libm::ceil(radius / delta).min(usize::MAX as f64 / 4.0) as usize;
            let inner = (pts - 1).saturating_mul(refine).saturating_add(1);
            let bins = inner.saturating_add(margin.saturating_mul(2));
            if bins <= max_bins || refine == 1 {
                let margin = if bins <= max_bins {
                    margin
                } else {
                    max_bins.saturating_sub(inner) / 2
                };
                return Self::new(grid, refine, margin);
            }
            refine -= 1;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `bin_of` is the bin of ⌊(x − first)/Δ + 1/2⌋ per axis, as computed
    /// with libm's floor before branch speed07, on bin edges (± an ulp),
    /// centres, points beyond the bins on both sides, and non-finite
    /// coordinates.
    #[test]
    fn bin_of_is_the_floor_rule() {
        let spec = BinSpec::new(&KdeGrid::square(10_000.0, 7).unwrap(), 3, 4).unwrap();
        let reference = |x: &[f64]| -> Option<usize> {
            let mut idx = [0usize; 2];
            for a in 0..spec.dim {
                let f = libm::floor((x[a] - spec.first[a]) / spec.delta[a] + 0.5);
                if !(f >= 0.0 && f < spec.bins[a] as f64) {
                    return None;
                }
                idx[a] = f as usize;
            }
            Some(idx[0] * spec.bins[1] + idx[1])
        };
        let mut vals = std::vec![f64::NAN, f64::INFINITY, f64::NEG_INFINITY, -0.0, 0.0];
        let b = spec.bins()[0] as i64;
        for k in -3..=b + 3 {
            for off in [-0.5, 0.0, 0.25, 0.5] {
                let c = spec.first[0] + (k as f64 + off) * spec.delta[0];
                let bits = c.to_bits();
                vals.extend([
                    c,
                    f64::from_bits(bits + 1),
                    f64::from_bits(bits.wrapping_sub(1)),
                ]);
            }
        }
        for &u in &vals {
            for &v in vals.iter().step_by(7) {
                assert_eq!(spec.bin_of(&[u, v]), reference(&[u, v]), "{u} {v}");
                assert_eq!(spec.bin_of(&[v, u]), reference(&[v, u]), "{v} {u}");
            }
        }
    }
}
