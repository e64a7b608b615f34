//! Server-side aggregation of reports (docs/MATH.md §5): exactly mergeable partial
//! aggregates and estimates with error bars.
//!
//! Every report is an unbiased estimate of one user's f(x_i), so the server
//! estimates the population mean by the mean of the reports, with a standard
//! error from their sample variance.
//!
//! ```
//! use geopriv::server::aggregate::Aggregator;
//!
//! let mut agg = Aggregator::new();
//! for v in [0.2, 1.4, -0.3, 0.9] {
//!     agg.add(v)?;
//! }
//! let est = agg.estimate().unwrap();
//! assert_eq!(est.n, 4);
//! assert!((est.mean - 0.55).abs() < 1e-15);
//! # Ok::<(), geopriv::Error>(())
//! ```
//!
//! # Why the state is exact
//!
//! A distributed engine computes partial aggregates per shard and merges
//! them in whatever order the shards finish. With a floating-point state
//! (Welford's mean and M2, or plain Σx and Σx²), the result depends on that
//! order in the last bits, so two runs over the same data can print
//! different numbers, and catastrophic cancellation in Σx² − (Σx)²/n can
//! even make a small variance negative.
//!
//! [`Aggregator`] instead keeps n, Σx and Σx² as **exact integers**: every
//! finite double is an integer multiple of 2^-1074 and its square one of
//! 2^-2148, so both sums are integers in those units. They are held in a
//! fixed-point *superaccumulator* of 32-bit limbs stored in `i64` with spare
//! carry bits (2176 bits for Σx, 4288 for Σx², 1.6 KB in all). Adding a
//! value touches 3 limbs of Σx and 6 of Σx² with no carry propagation and no
//! rounding; a carry pass runs every 2^28 additions and on merge. Integer
//! addition is associative and commutative, and the carried ("balanced")
//! form is unique, so **any split of the reports into shards, merged in any
//! order, gives bit-for-bit the same state and the same [`Estimate`]**.
//! There is no range restriction (unlike a scaled i128 fixed point): any
//! finite doubles, up to 2^64 of them, are summed exactly.
//!
//! The estimate is computed from the exact integers: the sum is correctly
//! rounded, and the sample variance uses the exact integer n·Σx² − (Σx)²
//! (never negative, no cancellation), rounded once at the end. Results in
//! the subnormal range may be rounded twice; results beyond `f64::MAX` are
//! infinite.

use crate::error::{finite, Error, Result};
use crate::exact::{
    self, Limbs, MAX_PENDING, SQ_EXP, SQ_LIMBS, SQ_VALUE_BITS, SUM_EXP, SUM_LIMBS, SUM_VALUE_BITS,
};
use crate::report::{QueryDescriptor, QueryKey, Report};
use crate::server::Rejection;
use alloc::collections::BTreeMap;
use alloc::vec::Vec;
use serde::{Deserialize, Serialize};

/// The 97.5% quantile of the standard normal: a 95% two-sided interval is
/// mean ± 1.96 standard errors.
pub const Z_95: f64 = 1.959_963_984_540_054;

/// The estimate of a population mean from the reports aggregated so far.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct Estimate {
    /// Number of reports.
    pub n: u64,
    /// Σ reports, correctly rounded from the exact sum.
    pub sum: f64,
    /// Σ reports / n: the unbiased estimate of the mean of f(x_i).
    pub mean: f64,
    /// Sample variance of the reports, Σ(r − mean)² / (n − 1); `None` when
    /// n < 2 (no spread can be measured from one report).
    pub sample_variance: Option<f64>,
    /// Standard error of the mean, sqrt(sample variance / n); `None` when
    /// n < 2.
    pub standard_error: Option<f64>,
    /// Normal-approximation 95% confidence interval for the mean,
    /// `[mean − 1.96 se, mean + 1.96 se]`; `None` when n < 2. It covers the
    /// true mean ≈ 95% of the time when n is large enough for the central
    /// limit theorem to apply to the noise (heavy-tailed noise such as the
    /// generalized Cauchy with small k needs many reports).
    pub ci95: Option<[f64; 2]>,
}

/// Exactly mergeable partial aggregate of the reports for one query: n, Σx
/// and Σx² held as exact integers (see the [module docs](self)).
///
/// `add` costs a few nanoseconds; `merge` is associative and commutative
/// and bit-exact; the state serializes (serde) compactly and canonically so
/// shards can ship partials to a reducer.
#[derive(Clone, Debug)]
pub struct Aggregator {
    n: u64,
    pending: u32,
    sum: Limbs<SUM_LIMBS>,
    sum_sq: Limbs<SQ_LIMBS>,
}

impl Default for Aggregator {
    fn default() -> Self {
        Self::new()
    }
}

impl Aggregator {
    /// An empty aggregate.
    pub fn new() -> Self {
        Self {
            n: 0,
            pending: 0,
            sum: Limbs::default(),
            sum_sq: Limbs::default(),
        }
    }

    /// Number of values added.
    pub fn n(&self) -> u64 {
        self.n
    }

    /// Add one released value. A NaN or infinite value is refused with
    /// [`Error::InvalidParameter`], and a count already at `u64::MAX` (only
    /// reachable through a restored state) with [`Error::Overflow`]; the
    /// state is then unchanged.
    #[inline]
    pub fn add(&mut self, value: f64) -> Result<()> {
        finite("value", value)?;
        let n = self.n.checked_add(1).ok_or(Error::Overflow {
            what: "aggregate report count",
        })?;
        let (negative, m, pos) = exact::decompose(value);
        self.sum.add_mantissa(negative, m, pos);
        self.sum_sq.add_square(m, pos);
        self.n = n;
        self.pending += 1;
        if self.pending >= MAX_PENDING {
            self.carry();
        }
        Ok(())
    }

    /// Add every value of a slice; stops at (and reports) the first
    /// non-finite one, keeping those before it.
    pub fn extend_from_slice(&mut self, values: &[f64]) -> Result<()> {
        values.iter().try_for_each(|&v| self.add(v))
    }

    /// Add every value of a slice, all or nothing: if any value is NaN or
    /// infinite, none is added and the error names the first such value.
    ///
    /// ```
    /// let mut a = geopriv::Aggregator::new();
    /// assert!(a.add_all(&[1.0, f64::NAN]).is_err());
    /// a.add_all(&[1.0, 3.0])?;
    /// assert_eq!(a.estimate().unwrap().n, 2);
    /// # Ok::<(), geopriv::Error>(())
    /// ```
    pub fn add_all(&mut self, values: &[f64]) -> Result<()> {
        if let Some(&value) = values.iter().find(|v| !v.is_finite()) {
            return Err(Error::InvalidParameter {
                name: "value",
                value,
                requirement: "finite (nothing was added)",
            });
        }
        self.extend_from_slice(values)
    }

    /// Add the value of a report. The caller is responsible for having
    /// validated it (see [`ValidationPolicy`](crate::server::ValidationPolicy))
    /// and for routing it to the aggregate of its query.
    pub fn add_report(&mut self, report: &Report) -> Result<()> {
        self.add(report.value)
    }

    fn carry(&mut self) {
        self.sum.normalize();
        self.sum_sq.normalize();
        self.pending = 0;
    }

    /// Fold another partial aggregate into this one. Exact: the result is the
    /// aggregate of the union of both sets of values, bit for bit,
    /// whatever the order and grouping of merges.
    ///
    /// Refused with [`Error::Overflow`], leaving `self` unchanged, when the
    /// merged count would pass `u64::MAX` or the merged sums would leave
    /// the capacity of the exact state (2^64 terms of at most `f64::MAX`):
    /// never a wrapped count or a truncated top limb.
    pub fn merge(&mut self, other: &Aggregator) -> Result<()> {
        let n = self.n.checked_add(other.n).ok_or(Error::Overflow {
            what: "merged report count",
        })?;
        let mut sum = self.sum.clone();
        let mut sum_sq = self.sum_sq.clone();
        sum.merge(&other.sum);
        sum_sq.merge(&other.sum_sq);
        if !state_fits(&sum, &sum_sq, n) {
            return Err(Error::Overflow {
                what: "merged exact sum",
            });
        }
        self.n = n;
        self.sum = sum;
        self.sum_sq = sum_sq;
        self.pending = 0;
        Ok(())
    }

    /// Whether the state could hold `n` values in [`lower`, `upper`]:
    /// n·lower <= Σx <= n·upper and Σx² <= n·max(lower², upper²), compared
    /// exactly (no rounding). A partial state shipped for a clipped group
    /// must pass this for the group's clipping bounds, or it was not made
    /// of clipped values (issue 19 item 11, docs/MATH.md §10). Non-finite
    /// or reversed bounds give `false`.
    ///
    /// ```
    /// use geopriv::server::aggregate::Aggregator;
    /// let mut a = Aggregator::new();
    /// a.add_all(&[0.5, -1.0, 2.0])?;
    /// assert!(a.within(-1.0, 2.0));
    /// assert!(!a.within(-1.0, 0.4)); // Σx = 1.5 > 3 · 0.4
    /// # Ok::<(), geopriv::Error>(())
    /// ```
    pub fn within(&self, lower: f64, upper: f64) -> bool {
        if !(lower.is_finite() && upper.is_finite() && lower <= upper) {
            return false;
        }
        if self.n == 0 {
            return true;
        }
        let (sum, sum_sq) = self.canonical();
        let n = exact::from_u64(self.n);
        let signed = |l: &Limbs<SUM_LIMBS>| {
            let (neg, mag) = l.to_magnitude();
            let is_zero = mag.iter().all(|&w| w == 0);
            (neg && !is_zero, mag)
        };
        // a <= b for signed magnitudes.
        let le = |(na, a): &(bool, Vec<u32>), (nb, b): &(bool, Vec<u32>)| match (na, nb) {
            (false, false) => exact::cmp(a, b) != core::cmp::Ordering::Greater,
            (true, true) => exact::cmp(a, b) != core::cmp::Ordering::Less,
            (true, false) => true,
            (false, true) => false,
        };
        let scaled = |x: f64| {
            let mut one = Aggregator::new();
            // x is finite: `add` cannot fail.
            let _ = one.add(x);
            let (s, q) = one.canonical();
            let (neg, mag) = signed(&s);
            let (_, q) = q.to_magnitude();
            ((neg, exact::mul(&mag, &n)), exact::mul(&q, &n))
        };
        let (lo, lo_sq) = scaled(lower);
        let (hi, hi_sq) = scaled(upper);
        let s = signed(&sum);
        let (_, q) = sum_sq.to_magnitude();
        let max_sq = if exact::cmp(&lo_sq, &hi_sq) == core::cmp::Ordering::Greater {
            lo_sq
        } else {
            hi_sq
        };
        le(&lo, &s) && le(&s, &hi) && exact::cmp(&q, &max_sq) != core::cmp::Ordering::Greater
    }

    /// The carried (canonical) form of the state.
    fn canonical(&self) -> (Limbs<SUM_LIMBS>, Limbs<SQ_LIMBS>) {
        let mut sum = self.sum.clone();
        let mut sum_sq = self.sum_sq.clone();
        if self.pending > 0 {
            sum.normalize();
            sum_sq.normalize();
        }
        (sum, sum_sq)
    }

    /// The estimate, or `None` before the first value. A deterministic
    /// function of the exact state: equal states give identical estimates.
    pub fn estimate(&self) -> Option<Estimate> {
        if self.n == 0 {
            return None;
        }
        let (sum, sum_sq) = self.canonical();
        let n = self.n as f64;
        let (negative, s_mag) = sum.to_magnitude();
        let (s_m, s_e) = exact::to_f64_parts(&s_mag);
        let sign = if negative { -1.0 } else { 1.0 };
        let total = sign * libm::scalbn(s_m, s_e + SUM_EXP);
        // One rounding of the exact Σx / n (rounding Σx first and then
        // dividing could leave a mean 1 ulp outside its summands' range:
        // docs/ATTACK-8.md O2).
        let mean = sign * exact::quotient_to_f64(&s_mag, self.n);
        let (sample_variance, standard_error, ci95) = if self.n < 2 {
            (None, None, None)
        } else {
            // D = n Σx² − (Σx)², an exact non-negative integer in units of
            // 2^-2148 (Cauchy–Schwarz); var = D / (n (n − 1)).
            let (_, q_mag) = sum_sq.to_magnitude();
            let nq = exact::mul(&q_mag, &exact::from_u64(self.n));
            let s2 = exact::mul(&s_mag, &s_mag);
            let d = exact::sub(&nq, &s2);
            let (mut d_m, mut d_e) = exact::to_f64_parts(&d);
            let var = libm::scalbn(d_m / (n * (n - 1.0)), d_e + SQ_EXP);
            // se = sqrt(D / (n² (n − 1))) · 2^-1074, without overflow.
            if d_e % 2 != 0 {
                d_m *= 2.0;
                d_e -= 1;
            }
            let se = libm::scalbn(libm::sqrt(d_m / (n * n * (n - 1.0))), d_e / 2 + SQ_EXP / 2);
            (
                Some(var),
                Some(se),
                Some([mean - Z_95 * se, mean + Z_95 * se]),
            )
        };
        Some(Estimate {
            n: self.n,
            sum: total,
            mean,
            sample_variance,
            standard_error,
            ci95,
        })
    }
}

/// Whether balanced exact sums are those of `n` finite doubles as far as
/// their size goes: |Σx| < n · 2^1024 and Σx² < n · 2^2048 (checked in bits).
fn state_fits(sum: &Limbs<SUM_LIMBS>, sum_sq: &Limbs<SQ_LIMBS>, n: u64) -> bool {
    exact::sum_fits(sum.magnitude_bits(), SUM_VALUE_BITS, n)
        && exact::sum_fits(sum_sq.magnitude_bits(), SQ_VALUE_BITS, n)
}

impl PartialEq for Aggregator {
    /// Equal when they hold the same exact n, Σx and Σx².
    fn eq(&self, other: &Self) -> bool {
        self.n == other.n && self.canonical() == other.canonical()
    }
}

impl Eq for Aggregator {}

/// Sparse, canonical serialized form of an exact sum: balanced 32-bit limbs
/// from `offset` on.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
struct ExactSumRepr {
    offset: u16,
    limbs: Vec<i64>,
}

/// Serialized form of an [`Aggregator`]. `sum` is Σx in units of 2^-1074,
/// `sum_sq` is Σx² in units of 2^-2148, each as limbs of 2^32.
#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct AggregatorRepr {
    n: u64,
    sum: ExactSumRepr,
    sum_sq: ExactSumRepr,
}

impl From<Aggregator> for AggregatorRepr {
    fn from(a: Aggregator) -> Self {
        let (sum, sum_sq) = a.canonical();
        let (so, sl) = sum.to_sparse();
        let (qo, ql) = sum_sq.to_sparse();
        AggregatorRepr {
            n: a.n,
            sum: ExactSumRepr {
                offset: so,
                limbs: sl,
            },
            sum_sq: ExactSumRepr {
                offset: qo,
                limbs: ql,
            },
        }
    }
}

impl TryFrom<AggregatorRepr> for Aggregator {
    type Error = Error;
    fn try_from(r: AggregatorRepr) -> Result<Self> {
        const BAD: Error = Error::InvalidReport {
            reason: "aggregate state: limbs out of range or inconsistent with n",
        };
        let sum = Limbs::<SUM_LIMBS>::from_sparse(r.sum.offset, &r.sum.limbs).ok_or(BAD)?;
        let sum_sq = Limbs::<SQ_LIMBS>::from_sparse(r.sum_sq.offset, &r.sum_sq.limbs).ok_or(BAD)?;
        if sum_sq.is_negative() || (r.n == 0 && !(sum.is_zero() && sum_sq.is_zero())) {
            return Err(BAD);
        }
        if !state_fits(&sum, &sum_sq, r.n) {
            return Err(Error::InvalidReport {
                reason: "aggregate state: sums larger than n finite values can make",
            });
        }
        // Any real state satisfies n Σx² >= (Σx)²; refuse one that does not
        // (the estimate relies on it).
        let (_, s) = sum.to_magnitude();
        let (_, q) = sum_sq.to_magnitude();
        let nq = exact::mul(&q, &exact::from_u64(r.n));
        if exact::cmp(&nq, &exact::mul(&s, &s)) == core::cmp::Ordering::Less {
            return Err(BAD);
        }
        Ok(Aggregator {
            n: r.n,
            pending: 0,
            sum,
            sum_sq,
        })
    }
}

impl Serialize for Aggregator {
    fn serialize<S: serde::Serializer>(&self, s: S) -> core::result::Result<S::Ok, S::Error> {
        AggregatorRepr::from(self.clone()).serialize(s)
    }
}

impl<'de> Deserialize<'de> for Aggregator {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> core::result::Result<Self, D::Error> {
        let repr = AggregatorRepr::deserialize(d)?;
        Aggregator::try_from(repr).map_err(serde::de::Error::custom)
    }
}

/// Aggregates for a fixed family of queries: a KDE map over a grid of
/// centres, a grid of two-way thresholds, or any list of queries. Each
/// query has a cell (an [`Aggregator`]) found by position or by the
/// query's [canonical id](QueryDescriptor::canonical_id).
///
/// Serializable, and exactly mergeable with another grid over the same
/// queries in the same order. Each cell holds an exact [`Aggregator`]
/// (about 1.6 KB in memory, a few dozen bytes serialized when it holds
/// values of similar magnitude), so a 60 × 60 KDE map takes about 6 MB.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(try_from = "GridRepr", into = "GridRepr")]
pub struct GridAggregator {
    queries: Vec<QueryDescriptor>,
    cells: Vec<Aggregator>,
    /// The largest (ε, δ) among the reports added with
    /// [`add_report`](Self::add_report) (and merged grids); `None` until one is.
    largest_budget: Option<[f64; 2]>,
    index: BTreeMap<QueryKey, usize>,
}

/// A device's total spend on a whole grid by sequential composition
/// (see [`GridAggregator::per_device_total`]): ε = m·ε_max, δ = m·δ_max.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct PerDeviceTotal {
    /// m, the number of cells (queries) a device answered.
    pub cells: u64,
    /// ε_max: the largest ε among the reports.
    pub epsilon_per_query: f64,
    /// δ_max: the largest δ among the reports.
    pub delta_per_query: f64,
    /// m·ε_max, per unit distance.
    pub epsilon: f64,
    /// m·δ_max.
    pub delta: f64,
}

/// The componentwise maximum of two (ε, δ) pairs.
fn larger_budget(a: Option<[f64; 2]>, b: [f64; 2]) -> [f64; 2] {
    match a {
        Some([e, d]) => [e.max(b[0]), d.max(b[1])],
        None => b,
    }
}

/// The largest number of cells (queries) a [`GridAggregator`] holds:
/// 2^18 = 262,144 cells, about 420 MB of exact state (a 512 × 512 map).
pub const MAX_GRID_CELLS: usize = 1 << 18;

fn grid_limit(requested: u64) -> Error {
    Error::LimitExceeded {
        what: "grid cells",
        requested,
        limit: MAX_GRID_CELLS as u64,
    }
}

/// |axis 1| · |axis 2|, refused above [`MAX_GRID_CELLS`] (or on overflow).
fn grid_cells(a: usize, b: usize) -> Result<usize> {
    match a.checked_mul(b) {
        Some(c) if c <= MAX_GRID_CELLS => Ok(c),
        _ => Err(grid_limit((a as u64).saturating_mul(b as u64))),
    }
}

#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct GridRepr {
    queries: Vec<QueryDescriptor>,
    cells: Vec<Aggregator>,
    /// Absent in states without reports (and in states written before it
    /// existed), so those serialize exactly as before.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    largest_budget: Option<[f64; 2]>,
}

impl From<GridAggregator> for GridRepr {
    fn from(g: GridAggregator) -> Self {
        GridRepr {
            queries: g.queries,
            cells: g.cells,
            largest_budget: g.largest_budget,
        }
    }
}

impl TryFrom<GridRepr> for GridAggregator {
    type Error = Error;
    fn try_from(r: GridRepr) -> Result<Self> {
        if r.queries.len() != r.cells.len() {
            return Err(Error::InvalidReport {
                reason: "grid state: number of cells differs from number of queries",
            });
        }
        if let Some([epsilon, delta]) = r.largest_budget {
            if !(epsilon.is_finite() && epsilon > 0.0 && delta.is_finite() && delta >= 0.0) {
                return Err(Error::InvalidReport {
                    reason: "grid state: the largest (epsilon, delta) must be finite, epsilon > 0, delta >= 0",
                });
            }
        }
        let mut g = GridAggregator::new(r.queries)?;
        g.cells = r.cells;
        g.largest_budget = r.largest_budget;
        Ok(g)
    }
}

impl GridAggregator {
    /// A grid over `queries`, in this order. Refuses invalid query
    /// parameters and duplicate queries (same canonical id).
    ///
    /// At most [`MAX_GRID_CELLS`] queries (each cell holds about 1.6 KB);
    /// more are refused with [`Error::LimitExceeded`] before the cells are
    /// allocated.
    pub fn new(queries: impl IntoIterator<Item = QueryDescriptor>) -> Result<Self> {
        let mut list: Vec<QueryDescriptor> = Vec::new();
        for q in queries {
            if list.len() >= MAX_GRID_CELLS {
                return Err(grid_limit(list.len() as u64 + 1));
            }
            list.push(q);
        }
        let queries = list;
        let mut index = BTreeMap::new();
        for (i, q) in queries.iter().enumerate() {
            q.check()?;
            if index.insert(q.key(), i).is_some() {
                return Err(Error::InvalidReport {
                    reason: "grid: the same query appears twice",
                });
            }
        }
        let mut cells = Vec::new();
        cells
            .try_reserve_exact(queries.len())
            .map_err(|_| grid_limit(queries.len() as u64))?;
        cells.resize(queries.len(), Aggregator::new());
        Ok(Self {
            queries,
            cells,
            index,
            largest_budget: None,
        })
    }

    /// A KDE map: one 2-D Gaussian kernel of bandwidth `bandwidth` centred
    /// at each (x, y) with x in `xs` and y in `ys`, in row-major order
    /// (index = i_y · xs.len() + i_x).
    pub fn kde_grid(xs: &[f64], ys: &[f64], bandwidth: f64) -> Result<Self> {
        let mut qs = Vec::new();
        qs.try_reserve_exact(grid_cells(xs.len(), ys.len())?)
            .map_err(|_| grid_limit((xs.len() as u64).saturating_mul(ys.len() as u64)))?;
        for &y in ys {
            for &x in xs {
                qs.push(QueryDescriptor::Kde {
                    center: alloc::vec![x, y],
                    bandwidth,
                });
            }
        }
        Self::new(qs)
    }

    /// A grid of two-way thresholds (T1, T2) for T1 in `t1s` and T2 in
    /// `t2s`, ramp width `width`, row-major (index = i_2 · t1s.len() + i_1).
    pub fn two_way_grid(t1s: &[f64], t2s: &[f64], width: f64) -> Result<Self> {
        let mut qs = Vec::new();
        qs.try_reserve_exact(grid_cells(t1s.len(), t2s.len())?)
            .map_err(|_| grid_limit((t1s.len() as u64).saturating_mul(t2s.len() as u64)))?;
        for &t2 in t2s {
            for &t1 in t1s {
                qs.push(QueryDescriptor::TwoWay {
                    thresholds: [t1, t2],
                    width,
                });
            }
        }
        Self::new(qs)
    }

    /// Number of queries (cells).
    pub fn len(&self) -> usize {
        self.queries.len()
    }

    /// Whether the grid has no queries.
    pub fn is_empty(&self) -> bool {
        self.queries.is_empty()
    }

    /// The queries, in cell order.
    pub fn queries(&self) -> &[QueryDescriptor] {
        &self.queries
    }

    /// Position of a query in the grid.
    pub fn index_of(&self, query: &QueryDescriptor) -> Option<usize> {
        self.index.get(&query.key()).copied()
    }

    /// Position of the query with this canonical id.
    pub fn index_of_id(&self, canonical_id: &str) -> Option<usize> {
        let q: QueryDescriptor = canonical_id.parse().ok()?;
        self.index_of(&q)
    }

    /// The aggregate of one cell.
    pub fn cell(&self, index: usize) -> Option<&Aggregator> {
        self.cells.get(index)
    }

    /// Add a value to the cell at `index`.
    pub fn add(&mut self, index: usize, value: f64) -> Result<()> {
        let cell = self.cells.get_mut(index).ok_or(Error::InvalidParameter {
            name: "index",
            value: index as f64,
            requirement: "less than the number of queries in the grid",
        })?;
        cell.add(value)
    }

    /// Add `value`, the release of a report made at (`epsilon`, `delta`), to
    /// the cell at `index`, and count its budget in
    /// [`per_device_total`](Self::per_device_total). For callers that hold
    /// the report's fields rather than a [`Report`] (the bindings).
    pub fn add_with_budget(
        &mut self,
        index: usize,
        value: f64,
        epsilon: f64,
        delta: f64,
    ) -> Result<()> {
        let epsilon = finite("epsilon", epsilon)?;
        let delta = finite("delta", delta)?;
        if epsilon <= 0.0 || delta < 0.0 {
            return Err(Error::InvalidParameter {
                name: "epsilon",
                value: epsilon,
                requirement: "epsilon > 0 and delta >= 0",
            });
        }
        self.add(index, value)?;
        self.largest_budget = Some(larger_budget(self.largest_budget, [epsilon, delta]));
        Ok(())
    }

    /// Route a report to the cell of its query. A report whose query is not
    /// in the grid is refused with [`Rejection::UnknownQuery`], one with a
    /// non-finite value with [`Rejection::NonFiniteValue`]. Validate it
    /// against a policy first (ε, δ, mechanism).
    pub fn add_report(&mut self, report: &Report) -> core::result::Result<(), Rejection> {
        let i = self
            .index_of(&report.query)
            .ok_or_else(|| Rejection::UnknownQuery {
                id: report.query.canonical_id(),
            })?;
        self.cells[i]
            .add(report.value)
            .map_err(|_| Rejection::NonFiniteValue {
                value: report.value,
            })?;
        if report.epsilon.is_finite() && report.delta.is_finite() {
            self.largest_budget = Some(larger_budget(
                self.largest_budget,
                [report.epsilon, report.delta],
            ));
        }
        Ok(())
    }

    /// What one device spent if it answered every cell of this grid, as
    /// far as the reports show: m·ε_max and m·δ_max by sequential
    /// composition over the m cells, where (ε_max, δ_max) are the largest ε
    /// and δ among the reports added ([`add_report`](Self::add_report)) and
    /// merged. An upper bound; for a KDE map the tight joint loss of the
    /// query set is smaller (docs/MATH.md §9.1), and one noisy location per
    /// device spends ε once (`geopriv::map`). `None` when no report was
    /// added (values added with [`add`](Self::add) carry no budget).
    ///
    /// ```
    /// # use geopriv::GridAggregator;
    /// let g = GridAggregator::kde_grid(&[0.0, 100.0], &[0.0], 50.0).unwrap();
    /// assert!(g.per_device_total().is_none());
    /// ```
    pub fn per_device_total(&self) -> Option<PerDeviceTotal> {
        let [epsilon, delta] = self.largest_budget?;
        let m = self.queries.len() as f64;
        Some(PerDeviceTotal {
            cells: self.queries.len() as u64,
            epsilon_per_query: epsilon,
            delta_per_query: delta,
            epsilon: m * epsilon,
            delta: m * delta,
        })
    }

    /// Fold another grid over the same queries into this one (exact, as
    /// [`Aggregator::merge`]). Refused if the query lists differ.
    pub fn merge(&mut self, other: &GridAggregator) -> Result<()> {
        if self.queries != other.queries {
            return Err(Error::InvalidReport {
                reason: "grid merge: the two grids hold different queries",
            });
        }
        // Merge into a copy so that a refused cell leaves the grid unchanged.
        let mut cells = self.cells.clone();
        for (a, b) in cells.iter_mut().zip(other.cells.iter()) {
            a.merge(b)?;
        }
        self.cells = cells;
        if let Some(b) = other.largest_budget {
            self.largest_budget = Some(larger_budget(self.largest_budget, b));
        }
        Ok(())
    }

    /// Estimates of every cell, in cell order (`None` for a cell without
    /// reports).
    pub fn estimates(&self) -> Vec<(&QueryDescriptor, Option<Estimate>)> {
        self.queries
            .iter()
            .zip(self.cells.iter())
            .map(|(q, c)| (q, c.estimate()))
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn agg(xs: &[f64]) -> Aggregator {
        let mut a = Aggregator::new();
        a.extend_from_slice(xs).unwrap();
        a
    }

    #[test]
    fn empty_and_single() {
        assert_eq!(Aggregator::new().estimate(), None);
        let e = agg(&[2.5]).estimate().unwrap();
        assert_eq!((e.n, e.sum, e.mean), (1, 2.5, 2.5));
        assert_eq!(e.standard_error, None);
        assert_eq!(e.ci95, None);
    }

    #[test]
    fn matches_textbook_formulas() {
        let xs = [1.0, 2.0, 3.0, 4.0, 10.0];
        let e = agg(&xs).estimate().unwrap();
        assert_eq!(e.sum, 20.0);
        assert_eq!(e.mean, 4.0);
        // Σ(x − 4)² = 9 + 4 + 1 + 0 + 36 = 50; var = 12.5.
        assert_eq!(e.sample_variance, Some(12.5));
        let se = (12.5f64 / 5.0).sqrt();
        assert!((e.standard_error.unwrap() - se).abs() <= 1e-15 * se);
        let [lo, hi] = e.ci95.unwrap();
        assert!((lo - (4.0 - Z_95 * se)).abs() < 1e-12);
        assert!((hi - (4.0 + Z_95 * se)).abs() < 1e-12);
    }

    #[test]
    fn variance_survives_a_huge_offset() {
        // Values 1e9 + {0, 1, 2}: naive Σx² − (Σx)²/n loses everything;
        // the exact state gives variance 1 exactly.
        let e = agg(&[1e9, 1e9 + 1.0, 1e9 + 2.0]).estimate().unwrap();
        assert_eq!(e.sample_variance, Some(1.0));
        assert_eq!(e.mean, 1e9 + 1.0);
        // Constant values: variance exactly 0, never negative.
        let e = agg(&[0.1; 1000]).estimate().unwrap();
        assert_eq!(e.sample_variance, Some(0.0));
    }

    #[test]
    fn extreme_values_do_not_overflow_the_error_bar() {
        let e = agg(&[f64::MAX, -f64::MAX, f64::MAX, -f64::MAX])
            .estimate()
            .unwrap();
        assert_eq!(e.sum, 0.0);
        assert_eq!(e.sample_variance, Some(f64::INFINITY));
        // se = sqrt(var / n) = MAX · sqrt(4/3) / 2 is finite.
        let se = e.standard_error.unwrap();
        assert!((se / f64::MAX - (4.0f64 / 3.0).sqrt() / 2.0).abs() < 1e-15);
    }

    #[test]
    fn sums_beyond_f64_keep_a_finite_mean() {
        // 100 × MAX overflows f64 but not the exact state (many carry
        // passes happen on the way in unit tests).
        let a = agg(&[f64::MAX; 100]);
        let e = a.estimate().unwrap();
        assert_eq!(e.sum, f64::INFINITY);
        assert!((e.mean / f64::MAX - 1.0).abs() < 1e-15);
        assert_eq!(e.sample_variance, Some(0.0));
        let mut b = agg(&[-f64::MAX; 100]);
        b.merge(&a).unwrap();
        assert_eq!(b.estimate().unwrap().sum, 0.0);
    }

    #[test]
    fn refuses_non_finite() {
        let mut a = agg(&[1.0]);
        assert!(a.add(f64::NAN).is_err());
        assert!(a.add(f64::INFINITY).is_err());
        assert_eq!(a, agg(&[1.0]));
    }

    #[test]
    fn merge_is_exact_and_serde_canonical() {
        let xs: Vec<f64> = (0..1000).map(|i| (i as f64 * 0.37).sin() * 1e3).collect();
        let whole = agg(&xs);
        let mut a = agg(&xs[..333]);
        let b = agg(&xs[333..]);
        a.merge(&b).unwrap();
        assert_eq!(a, whole);
        assert_eq!(a.estimate(), whole.estimate());
        let ja = serde_json::to_string(&a).unwrap();
        assert_eq!(ja, serde_json::to_string(&whole).unwrap());
        let back: Aggregator = serde_json::from_str(&ja).unwrap();
        assert_eq!(back, whole);
        let bytes = postcard::to_allocvec(&whole).unwrap();
        let back: Aggregator = postcard::from_bytes(&bytes).unwrap();
        assert_eq!(back.estimate(), whole.estimate());
    }

    #[test]
    fn corrupt_states_are_refused() {
        for bad in [
            r#"{"n":0,"sum":{"offset":33,"limbs":[1]},"sum_sq":{"offset":0,"limbs":[]}}"#,
            r#"{"n":1,"sum":{"offset":0,"limbs":[]},"sum_sq":{"offset":0,"limbs":[-1]}}"#,
            r#"{"n":1,"sum":{"offset":0,"limbs":[4294967296]},"sum_sq":{"offset":0,"limbs":[]}}"#,
            r#"{"n":1,"sum":{"offset":200,"limbs":[1]},"sum_sq":{"offset":0,"limbs":[]}}"#,
            // Σx = 2^14, Σx² = 2^-4 with n = 1 violates Cauchy–Schwarz.
            r#"{"n":1,"sum":{"offset":34,"limbs":[1]},"sum_sq":{"offset":67,"limbs":[1]}}"#,
        ] {
            assert!(serde_json::from_str::<Aggregator>(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn grid_routes_and_merges() {
        let mut g = GridAggregator::kde_grid(&[0.0, 100.0], &[0.0, 50.0, 100.0], 70.0).unwrap();
        assert_eq!(g.len(), 6);
        let q = g.queries()[4].clone();
        assert_eq!(
            q,
            QueryDescriptor::Kde {
                center: alloc::vec![0.0, 100.0],
                bandwidth: 70.0
            }
        );
        assert_eq!(g.index_of(&q), Some(4));
        assert_eq!(g.index_of_id("kde:t=0,100;h=70"), Some(4));
        let r = Report::new(q, crate::report::MechanismName::Polyplace, 1e-3, 0.0, 0.25);
        g.add_report(&r).unwrap();
        let mut h = g.clone();
        h.add(4, 0.75).unwrap();
        g.merge(&h).unwrap();
        let est = g.estimates();
        assert_eq!(est[4].1.unwrap().n, 3);
        assert_eq!(est[0].1, None);
        let stranger = Report::new(
            QueryDescriptor::Threshold {
                threshold: 1.0,
                width: 1.0,
            },
            crate::report::MechanismName::Polyplace,
            1e-3,
            0.0,
            0.5,
        );
        assert!(matches!(
            g.add_report(&stranger),
            Err(Rejection::UnknownQuery { .. })
        ));
        let other = GridAggregator::two_way_grid(&[1.0], &[2.0], 1.0).unwrap();
        assert!(g.merge(&other).is_err());
        let json = serde_json::to_string(&g).unwrap();
        let back: GridAggregator = serde_json::from_str(&json).unwrap();
        assert_eq!(back, g);
        assert!(GridAggregator::kde_grid(&[0.0, 0.0], &[0.0], 1.0).is_err());
    }

    #[test]
    fn grid_states_the_per_device_total_by_sequential_composition() {
        let mut g = GridAggregator::kde_grid(&[0.0, 50.0, 100.0], &[0.0, 100.0], 70.0).unwrap();
        let values_only = serde_json::to_string(&g).unwrap();
        assert!(!values_only.contains("largest_budget"), "{values_only}");
        g.add(0, 0.5).unwrap();
        assert_eq!(g.per_device_total(), None);
        let q = g.queries()[1].clone();
        let polyplace = crate::report::MechanismName::Polyplace;
        let laplace = crate::report::MechanismName::Laplace;
        g.add_report(&Report::new(q.clone(), polyplace, 1e-3, 0.0, 0.25))
            .unwrap();
        let mut h = GridAggregator::kde_grid(&[0.0, 50.0, 100.0], &[0.0, 100.0], 70.0).unwrap();
        h.add_report(&Report::new(q, laplace, 5e-4, 1e-9, 0.5))
            .unwrap();
        g.merge(&h).unwrap();
        let total = g.per_device_total().unwrap();
        assert_eq!(total.cells, 6);
        assert_eq!(total.epsilon_per_query, 1e-3);
        assert_eq!(total.delta_per_query, 1e-9);
        assert_eq!(total.epsilon, 6.0 * 1e-3);
        assert_eq!(total.delta, 6.0 * 1e-9);
        let json = serde_json::to_string(&g).unwrap();
        let back: GridAggregator = serde_json::from_str(&json).unwrap();
        assert_eq!(back.per_device_total(), Some(total));
        let forged = json.replace("0.001", "-1.0");
        assert!(serde_json::from_str::<GridAggregator>(&forged).is_err());
    }
}
