//! The server side of a map (std only): reports in, a map with per-cell
//! standard errors out. Mergeable across shards.

use super::bins::{BinSpec, BinnedCounts};
use super::fft::{FftMapper, MapEstimate};
use super::kernel::DebiasKernel;
use super::ladder::LadderDebias;
use super::query_set::QuerySet;
use super::release::{set_tag, MapMechanism, MapReport};
use crate::error::{Error, Result};
use crate::server::aggregate::Aggregator;
use std::string::String;
use std::vec::Vec;

/// Largest number of bins per axis the server uses by default (1024: at
/// most 2^20 bins, 8 MiB of counts and 16 MiB per FFT array; below
/// εh ≈ 0.5 on a 61 × 61 grid the bins coarsen from h/8 towards h/4, where
/// the noise, 1/ε >= 2h, is far wider than a bin; issue 22 item 4).
pub const DEFAULT_MAX_BINS: usize = 1024;

/// Aggregates [`MapReport`]s of one query set, mechanism and per-device ε.
///
/// ```
/// use geopriv::map::{KdeGrid, MapAggregator, MapMechanism, MapRelease, QuerySet};
/// # use rand::SeedableRng;
/// # let mut rng = rand::rngs::StdRng::seed_from_u64(1);
/// let set = QuerySet::Kde(KdeGrid::square(10_000.0, 11)?);
/// let device = MapRelease::new(set.clone(), MapMechanism::APriori, 1e-3)?;
/// let mut server = MapAggregator::new(set, MapMechanism::APriori, 1e-3)?;
/// for i in 0..200 {
///     let x = [2_000.0 + 30.0 * i as f64, 5_000.0];
///     server.add(&device.release_unmetered(&x, &mut rng)?)?;
/// }
/// let map = server.estimate(Some(1.0))?;   // fully debiased
/// assert_eq!(map.values.len(), 121);
/// assert!(map.standard_errors.iter().all(|s| s.is_finite()));
/// # Ok::<(), geopriv::Error>(())
/// ```
#[derive(Clone, Debug)]
pub struct MapAggregator {
    set: QuerySet,
    mechanism: MapMechanism,
    epsilon: f64,
    tag: String,
    counts: Option<BinnedCounts>,
    cells: Vec<Aggregator>,
    /// Noise a priori on a ladder: the debiased terms g(x̃) per query
    /// (docs/MATH.md §9.2, "Ladders"), beside the plain f(x̃) in `cells`.
    ladder: Option<(LadderDebias, Vec<Aggregator>)>,
    accepted: u64,
}

impl MapAggregator {
    /// A server for reports of `set` made with `mechanism` at per-device
    /// total `epsilon`, with the default binning.
    pub fn new(set: QuerySet, mechanism: MapMechanism, epsilon: f64) -> Result<Self> {
        Self::with_max_bins(set, mechanism, epsilon, DEFAULT_MAX_BINS)
    }

    /// As [`new`](Self::new) with at most `max_bins` bins per axis.
    pub fn with_max_bins(
        set: QuerySet,
        mechanism: MapMechanism,
        epsilon: f64,
        max_bins: usize,
    ) -> Result<Self> {
        let epsilon = crate::error::positive_finite("epsilon", epsilon)?;
        let counts = match (&set, mechanism) {
            (QuerySet::Kde(g), MapMechanism::APriori) => {
                let spec = BinSpec::for_estimation(g, epsilon, max_bins)?;
                // The offsets' moments only where the planner reads them
                // (the noise does not dither the bins; branch moment24):
                // below, 80 bytes a bin and the sums are not spent.
                let read = super::planner::moments_read_at(epsilon, spec.delta(), spec.dim());
                // Not even allocated below (branch state25).
                Some(BinnedCounts::with_moments(spec, read))
            }
            _ => None,
        };
        let cells = if counts.is_some() {
            Vec::new()
        } else {
            vec![Aggregator::new(); set.len()]
        };
        let ladder = match (&set, mechanism) {
            (QuerySet::Ramps(r), MapMechanism::APriori) => Some((
                LadderDebias::for_n(r.queries(), epsilon, 1)?,
                vec![Aggregator::new(); set.len()],
            )),
            _ => None,
        };
        Ok(Self {
            tag: set_tag(&set.id()),
            set,
            mechanism,
            epsilon,
            counts,
            cells,
            ladder,
            accepted: 0,
        })
    }

    /// For noise a priori on a ladder: the smoothing bandwidth h of the
    /// debiased estimate (public; default θ_min/4, see
    /// [`LadderDebias::for_n`] for a choice by the expected n). Refused once
    /// reports were added (they were debiased with the old h).
    pub fn with_ladder_smoothing(mut self, h: f64) -> Result<Self> {
        if self.accepted > 0 || self.ladder.is_none() {
            return Err(Error::InvalidParameter {
                name: "smoothing",
                value: h,
                requirement: "set before any report, for noise a priori on a ladder",
            });
        }
        if let Some((d, _)) = self.ladder.as_mut() {
            *d = LadderDebias::new(self.epsilon, h)?;
        }
        Ok(self)
    }

    /// The ladder debiasing in use (noise a priori on a ladder).
    pub fn ladder_debias(&self) -> Option<LadderDebias> {
        self.ladder.as_ref().map(|(d, _)| *d)
    }

    /// An empty aggregator with the same public parameters and binning
    /// (a shard to [`merge`](Self::merge) back).
    pub(crate) fn empty_like(&self) -> Self {
        Self {
            set: self.set.clone(),
            mechanism: self.mechanism,
            epsilon: self.epsilon,
            tag: self.tag.clone(),
            counts: self
                .counts
                .as_ref()
                .map(|c| BinnedCounts::with_moments(c.spec().clone(), c.moments().is_some())),
            cells: vec![Aggregator::new(); self.cells.len()],
            ladder: self
                .ladder
                .as_ref()
                .map(|(d, c)| (*d, vec![Aggregator::new(); c.len()])),
            accepted: 0,
        }
    }

    /// Reports accepted so far.
    pub fn accepted(&self) -> u64 {
        self.accepted
    }

    /// The per-cell exact aggregates (every mechanism but noise a priori
    /// on a kernel grid; empty otherwise).
    pub fn cells(&self) -> &[Aggregator] {
        &self.cells
    }

    /// A server restored from a partial state shipped from another shard:
    /// the same public parameters as [`with_max_bins`](Self::with_max_bins),
    /// the bin counts (noise a priori on a kernel grid: one per bin, and
    /// the locations beyond the bins) or the per-cell aggregates (the
    /// others), and the number of reports accepted (not yet for noise a
    /// priori on a ladder: refused). Refused with a typed
    /// error if the parts do not fit the parameters or disagree with
    /// `accepted` (each report adds one location, m values, or k values).
    ///
    /// ```
    /// use geopriv::map::{KdeGrid, MapAggregator, MapMechanism, QuerySet};
    /// let set = QuerySet::Kde(KdeGrid::square(10_000.0, 11)?);
    /// let a = MapAggregator::with_max_bins(set.clone(), MapMechanism::APriori, 1e-3, 512)?;
    /// let c = a.counts().unwrap();
    /// let back = MapAggregator::restore(set, MapMechanism::APriori, 1e-3, 512,
    ///     Some((c.counts().to_vec(), c.outside())), Vec::new(), 0)?;
    /// assert_eq!(back.accepted(), 0);
    /// # Ok::<(), geopriv::Error>(())
    /// ```
    pub fn restore(
        set: QuerySet,
        mechanism: MapMechanism,
        epsilon: f64,
        max_bins: usize,
        counts: Option<(Vec<u64>, u64)>,
        cells: Vec<Aggregator>,
        accepted: u64,
    ) -> Result<Self> {
        let fresh = Self::with_max_bins(set, mechanism, epsilon, max_bins)?;
        let counts = match (counts, fresh.counts.as_ref()) {
            (Some((c, outside)), Some(empty)) => {
                Some(BinnedCounts::from_counts(empty.spec().clone(), c, outside)?)
            }
            (None, _) => None,
            (Some(_), None) => {
                return Err(Error::InvalidReport {
                    reason: "partial map with another state",
                })
            }
        };
        fresh.restored(counts, cells, accepted)
    }

    /// [`restore`](Self::restore) with the bin counts already restored,
    /// with or without the offsets' moments (for instance by
    /// [`BinnedCounts::from_sparse`] from a partial state's JSON; branch
    /// state25). Refused as `restore`, and also: counts of another
    /// binning, and moments where this server keeps none (the planner
    /// does not read them at this ε and binning: a state that carries
    /// them there was not made by a map server). Counts without moments
    /// above that gate (an older state) are restored without them: the
    /// planner then charges the kernel maps' rounding as before moments.
    ///
    /// ```
    /// use geopriv::map::{BinnedCounts, KdeGrid, MapAggregator, MapMechanism, QuerySet};
    /// let set = QuerySet::Kde(KdeGrid::square(10_000.0, 11)?);
    /// let a = MapAggregator::with_max_bins(set.clone(), MapMechanism::APriori, 1e-3, 512)?;
    /// let c = a.counts().unwrap();
    /// let parts = BinnedCounts::from_sparse(c.spec().clone(), &c.sparse_counts(),
    ///     c.outside(), c.sparse_moments().as_deref())?;
    /// let back = MapAggregator::restore_binned(set, MapMechanism::APriori, 1e-3, 512,
    ///     Some(parts), Vec::new(), 0)?;
    /// assert_eq!(back.accepted(), 0);
    /// # Ok::<(), geopriv::Error>(())
    /// ```
    pub fn restore_binned(
        set: QuerySet,
        mechanism: MapMechanism,
        epsilon: f64,
        max_bins: usize,
        counts: Option<BinnedCounts>,
        cells: Vec<Aggregator>,
        accepted: u64,
    ) -> Result<Self> {
        Self::with_max_bins(set, mechanism, epsilon, max_bins)?.restored(counts, cells, accepted)
    }

    /// This fresh server holding the restored parts (checked).
    fn restored(
        self,
        counts: Option<BinnedCounts>,
        cells: Vec<Aggregator>,
        accepted: u64,
    ) -> Result<Self> {
        let mut fresh = self;
        let mechanism = fresh.mechanism;
        let bad = |reason| Err(Error::InvalidReport { reason });
        if fresh.ladder.is_some() {
            // A ladder's debiased terms are not among the parts.
            return bad("partial states of noise a priori on a ladder are not restorable yet");
        }
        match (fresh.counts.take(), counts) {
            (Some(empty), Some(c)) => {
                if c.spec() != empty.spec() {
                    return bad("partial map with another binning");
                }
                if c.moments().is_some() && empty.moments().is_none() {
                    return bad(
                        "partial state refused: moments where the planner does not read them",
                    );
                }
                if c.total() != accepted {
                    return bad("partial map whose counts disagree with its report count");
                }
                fresh.counts = Some(c);
            }
            (None, None) => {
                if cells.len() != fresh.cells.len() {
                    return bad("partial map with another number of cells");
                }
                let per_report = match mechanism {
                    MapMechanism::Sampled { k } => k as u64,
                    _ => fresh.set.len() as u64,
                };
                let answers = cells
                    .iter()
                    .try_fold(0u64, |t, c| t.checked_add(c.n()))
                    .ok_or(Error::Overflow { what: "map count" })?;
                let consistent = match mechanism {
                    MapMechanism::Sampled { .. } => true,
                    _ => cells.iter().all(|c| c.n() == accepted),
                };
                if !consistent || accepted.checked_mul(per_report) != Some(answers) {
                    return bad("partial map whose cells disagree with its report count");
                }
                fresh.cells = cells;
            }
            _ => return bad("partial map with another state"),
        }
        fresh.accepted = accepted;
        Ok(fresh)
    }

    /// The binned counts (noise a priori on a kernel grid).
    pub fn counts(&self) -> Option<&BinnedCounts> {
        self.counts.as_ref()
    }

    /// Add one report. A report for another set, mechanism or ε, with
    /// the wrong shape or non-finite numbers is rejected with a typed
    /// error and changes nothing.
    pub fn add(&mut self, r: &MapReport) -> Result<()> {
        let bad = |reason| Err(Error::InvalidReport { reason });
        if let Some(reason) = self.foreign_report(r) {
            return bad(reason);
        }
        let m = self.set.len();
        match self.mechanism {
            MapMechanism::APriori => {
                let x = self.a_priori_location(r)?;
                if let Some(c) = self.counts.as_mut() {
                    c.add(x)?;
                } else {
                    let vals = self.set.values(x)?;
                    // Compute everything first so a refusal changes nothing.
                    let deb = match (&self.ladder, &self.set) {
                        (Some((d, _)), QuerySet::Ramps(r)) => Some(
                            r.queries()
                                .iter()
                                .map(|q| d.value(q, x[0]))
                                .collect::<Result<Vec<f64>>>()?,
                        ),
                        _ => None,
                    };
                    let mut cells = self.cells.clone();
                    for (a, v) in cells.iter_mut().zip(vals) {
                        a.add(v)?;
                    }
                    if let (Some((_, dc)), Some(g)) = (self.ladder.as_mut(), deb) {
                        let mut next = dc.clone();
                        for (a, v) in next.iter_mut().zip(g) {
                            a.add(v)?;
                        }
                        *dc = next;
                    }
                    self.cells = cells;
                }
            }
            MapMechanism::VectorLaplace | MapMechanism::Composition => {
                let Some(v) = &r.values else {
                    return bad("report without values");
                };
                if v.len() != m || r.location.is_some() || r.queries.is_some() {
                    return bad("report with the wrong number of values");
                }
                if v.iter().any(|x| !x.is_finite()) {
                    return bad("report with a non-finite value");
                }
                for (a, &x) in self.cells.iter_mut().zip(v) {
                    a.add(x)?;
                }
            }
            MapMechanism::Sampled { k } => {
                let (Some(q), Some(v)) = (&r.queries, &r.values) else {
                    return bad("sampled report without queries and values");
                };
                if q.len() != k || v.len() != k || r.location.is_some() {
                    return bad("sampled report with the wrong number of answers");
                }
                if v.iter().any(|x| !x.is_finite()) {
                    return bad("report with a non-finite value");
                }
                let mut seen = q.clone();
                seen.sort_unstable();
                seen.dedup();
                if seen.len() != k || seen.iter().any(|&j| j as usize >= m) {
                    return bad("sampled report with repeated or unknown queries");
                }
                for (&j, &x) in q.iter().zip(v) {
                    self.cells[j as usize].add(x)?;
                }
            }
        }
        self.accepted += 1;
        Ok(())
    }

    /// For a noise-a-priori report on binned counts, what [`add`](Self::add)
    /// would do, without doing it: the bin it counts the location in
    /// (`Ok(None)`: beyond the bins) or the error it refuses the report
    /// with, by the same checks in the same order. `None` if this aggregator
    /// does not bin locations (another mechanism or query set). Pure, so a
    /// report can be judged, and dropped, before its `report_id` is decided
    /// (docs/MATH.md §10.11, "Deciding the map's ids on the workers");
    /// [`add_binned`](Self::add_binned) then counts it.
    pub(crate) fn binned_slot(&self, r: &MapReport) -> Option<Result<Option<super::bins::Slot>>> {
        let c = self.counts.as_ref()?;
        if self.mechanism != MapMechanism::APriori {
            return None;
        }
        if let Some(reason) = self.foreign_report(r) {
            return Some(Err(Error::InvalidReport { reason }));
        }
        Some(self.a_priori_location(r).and_then(|x| c.slot_of(x)))
    }

    /// Why a report made for another query set, mechanism or per-device ε
    /// is refused (the first checks of [`add`](Self::add) and
    /// [`binned_slot`](Self::binned_slot), in this order), or `None`.
    fn foreign_report(&self, r: &MapReport) -> Option<&'static str> {
        if r.set != self.tag {
            Some("report for another query set")
        } else if r.mechanism != self.mechanism {
            Some("report made with another mechanism")
        } else if r.epsilon.to_bits() != self.epsilon.to_bits() {
            Some("report made at another per-device epsilon")
        } else {
            None
        }
    }

    /// A noise-a-priori report's location: present, alone (no values or
    /// queries) and a finite point of the set's dimension, or the error
    /// [`add`](Self::add) and [`binned_slot`](Self::binned_slot) refuse
    /// it with.
    fn a_priori_location<'r>(&self, r: &'r MapReport) -> Result<&'r [f64]> {
        let bad = |reason| Err(Error::InvalidReport { reason });
        let Some(x) = &r.location else {
            return bad("noise-a-priori report without a location");
        };
        if r.values.is_some() || r.queries.is_some() {
            return bad("noise-a-priori report with values");
        }
        crate::error::check_point(x, self.set.dim())?;
        Ok(x)
    }

    /// Count a report judged by [`binned_slot`](Self::binned_slot) to go
    /// in `slot`: the state [`add`](Self::add) of that report leaves.
    pub(crate) fn add_binned(&mut self, slot: Option<super::bins::Slot>) -> Result<()> {
        let Some(c) = self.counts.as_mut() else {
            return Err(Error::InvalidReport {
                reason: "no binned counts",
            });
        };
        c.add_slot(slot)?;
        self.accepted += 1;
        Ok(())
    }

    /// Merge another shard (same set, mechanism, ε and binning).
    pub fn merge(&mut self, other: &MapAggregator) -> Result<()> {
        if other.tag != self.tag
            || other.mechanism != self.mechanism
            || other.epsilon.to_bits() != self.epsilon.to_bits()
        {
            return Err(Error::InvalidReport {
                reason: "partial map for another set, mechanism or epsilon",
            });
        }
        let accepted = self
            .accepted
            .checked_add(other.accepted)
            .ok_or(Error::Overflow { what: "map count" })?;
        match (self.counts.as_mut(), other.counts.as_ref()) {
            (Some(a), Some(b)) => a.merge(b)?,
            (None, None) => {
                // Merge into a copy so that an overflow leaves the state unchanged.
                let mut merged = self.cells.clone();
                for (a, b) in merged.iter_mut().zip(&other.cells) {
                    a.merge(b)?;
                }
                let ladder = match (&self.ladder, &other.ladder) {
                    (Some((d, a)), Some((e, b))) => {
                        if d != e {
                            return Err(Error::InvalidReport {
                                reason: "partial ladder map with another smoothing",
                            });
                        }
                        let mut m = a.clone();
                        for (x, y) in m.iter_mut().zip(b) {
                            x.merge(y)?;
                        }
                        Some((*d, m))
                    }
                    (None, None) => None,
                    _ => {
                        return Err(Error::InvalidReport {
                            reason: "partial map with another state",
                        })
                    }
                };
                self.cells = merged;
                self.ladder = ladder;
            }
            _ => {
                return Err(Error::InvalidReport {
                    reason: "partial map with another state",
                })
            }
        }
        self.accepted = accepted;
        Ok(())
    }

    /// The FFT of the counts (noise a priori on a kernel grid), to apply
    /// several kernels (the planner) without re-transforming. Its period
    /// keeps the bins' periodic images [`wrap_guard_radius`](super::wrap_guard_radius)
    /// from every map point ([`FftMapper::with_wrap_guard`], docs/MATH.md §9.3).
    pub fn mapper(&self) -> Result<Option<FftMapper>> {
        match (&self.counts, &self.set) {
            (Some(c), QuerySet::Kde(g)) => Ok(Some(FftMapper::with_wrap_guard(
                c.clone(),
                g.bandwidth(),
                self.epsilon,
            )?)),
            (Some(c), _) => Ok(Some(FftMapper::new(c.clone())?)),
            (None, _) => Ok(None),
        }
    }

    /// The kernel K_λ for this set (noise a priori on a kernel grid).
    pub fn kernel(&self, lambda: f64) -> Result<DebiasKernel> {
        match &self.set {
            QuerySet::Kde(g) => DebiasKernel::new(g.dim(), g.bandwidth(), self.epsilon, lambda),
            QuerySet::Ramps(_) | QuerySet::Districts(_) => Err(Error::InvalidParameter {
                name: "lambda",
                value: lambda,
                requirement: "only for kernel grids",
            }),
        }
    }

    /// The planner's map (the default of `geopriv map aggregate` and of the
    /// bindings): for noise a priori on a kernel grid, [`plan`](crate::map::plan) with these
    /// reports at their n picks the estimator (a kernel K_λ, or the EM
    /// deconvolution map of docs/MATH.md §9.6) and its map is returned with
    /// the plan; for noise a priori on districts, the plain shares or the
    /// shares debiased through the district channel, whichever the
    /// channel's error model predicts better with the district shares
    /// estimated from these reports (docs/MATH.md §13.8), with the plan;
    /// otherwise
    /// [`estimate`](Self::estimate)`(None)` and no plan.
    ///
    /// ```
    /// use geopriv::map::{KdeGrid, MapAggregator, MapMechanism, MapRelease, QuerySet};
    /// # use rand::SeedableRng;
    /// # let mut rng = rand::rngs::StdRng::seed_from_u64(1);
    /// let set = QuerySet::Kde(KdeGrid::square(10_000.0, 11)?);
    /// let device = MapRelease::new(set.clone(), MapMechanism::APriori, 1e-3)?;
    /// let mut server = MapAggregator::with_max_bins(set, MapMechanism::APriori, 1e-3, 256)?;
    /// for i in 0..500 {
    ///     server.add(&device.release_unmetered(&[2_000.0 + 10.0 * i as f64, 5_000.0], &mut rng)?)?;
    /// }
    /// let (map, plan) = server.planned_estimate()?;
    /// assert_eq!(map.values.len(), 121);
    /// println!("{}", plan.unwrap().line);
    /// # Ok::<(), geopriv::Error>(())
    /// ```
    pub fn planned_estimate(&self) -> Result<(MapEstimate, Option<super::planner::Plan>)> {
        let (est, plan, _) = self.planned_estimate_and_mapper()?;
        Ok((est, plan))
    }

    /// [`planned_estimate`](Self::planned_estimate) with, for noise a
    /// priori on a kernel grid, the FFT of the counts it made
    /// ([`mapper`](Self::mapper)) returned beside (for the binning's
    /// parts; None otherwise). EM's thread starts on the counts while their
    /// FFT is made (it waited for it before; branch speed04): the same map
    /// and plan as [`planned_estimate_with`](Self::planned_estimate_with)
    /// of [`mapper`](Self::mapper).
    pub fn planned_estimate_and_mapper(
        &self,
    ) -> Result<(MapEstimate, Option<super::planner::Plan>, Option<FftMapper>)> {
        let (Some(counts), QuerySet::Kde(_)) = (&self.counts, &self.set) else {
            let (est, plan) = self.planned_estimate_without_counts()?;
            return Ok((est, plan, None));
        };
        let (p, mapper) = super::planner::plan_building_mapper(
            &self.set,
            self.epsilon,
            self.accepted,
            counts,
            || {
                self.mapper()?.ok_or(Error::Numerical {
                    routine: "FFT of the counts",
                })
            },
        )?;
        let est = self.picked_estimate(&p, &mapper)?;
        Ok((est, Some(p), Some(mapper)))
    }

    /// [`planned_estimate`](Self::planned_estimate) where there are no bin
    /// counts (districts, ladders, the other mechanisms).
    fn planned_estimate_without_counts(
        &self,
    ) -> Result<(MapEstimate, Option<super::planner::Plan>)> {
        #[cfg(feature = "std")]
        if let (QuerySet::Districts(d), MapMechanism::APriori) = (&self.set, self.mechanism) {
            if self.accepted > 0 && d.len() <= super::district_channel::MAX_CHANNEL_DISTRICTS {
                let p = super::planner::plan(&self.set, self.epsilon, self.accepted, None)?;
                let mut est = self.estimate(None)?;
                let ch = super::district_channel::DistrictChannel::standard(d, self.epsilon)?;
                if ch.prefer_debiased(&est.values, self.accepted as f64)? {
                    let (v, se) = ch.debias_with_errors(&est.values, &est.standard_errors)?;
                    est.values = v;
                    est.standard_errors = se;
                    est.lambda = 1.0;
                }
                return Ok((est, Some(p)));
            }
        }
        if let Some(mapper) = self.mapper()? {
            // Counts on a set that is not a kernel grid (not made).
            return self.planned_estimate_with(&mapper);
        }
        Ok((self.estimate(None)?, None))
    }

    /// As [`planned_estimate`](Self::planned_estimate) for noise a priori
    /// on a kernel grid, with the FFT of these counts already made by
    /// [`mapper`](Self::mapper) (a caller that also wants the
    /// discretisation parts of the picked kernel transforms the counts
    /// once). Refused if `mapper` holds other counts than this server's.
    pub fn planned_estimate_with(
        &self,
        mapper: &FftMapper,
    ) -> Result<(MapEstimate, Option<super::planner::Plan>)> {
        self.require_own_mapper(mapper)?;
        let p = super::planner::plan(&self.set, self.epsilon, self.accepted, Some(mapper))?;
        let est = self.picked_estimate(&p, mapper)?;
        Ok((est, Some(p)))
    }

    /// The map of the plan's pick: EM's (made by the plan, with the λ = 1
    /// map's interval, [`em_estimate`](Self::em_estimate)), or the picked
    /// kernel's.
    ///
    /// Where the pick is another device mechanism (composition, vector
    /// Laplace, sampled: reports it cannot map), the map is λ = 1's, not
    /// the plan's first noise-a-priori prediction (attack13 O5, measured
    /// and not adopted, docs/ATTACK-13.md): wherever that rule changed the
    /// map it was worse, EM at 1.4–11x λ = 1's measured ASE where the
    /// planner's EM prediction at εh >= 1000 was 1.6–28x low, and an
    /// all-zero EM map at εh 1.4·10⁷ before branch emzero (tests/maps.rs,
    /// `another_mechanisms_pick_serves_the_lambda_1_map_…`).
    ///
    /// Every published interval is for the true map (branch pubint,
    /// attack17 F2): a λ < 1 pick's own interval is for the map smoothed by
    /// the residual noise and covered the true map 0.72–0.90 on small
    /// clusters and holes, so a picked λ < 1 map, like EM's, publishes the
    /// λ = 1 map's interval ([`blurred_estimate`](Self::blurred_estimate));
    /// [`estimate`](Self::estimate) with an explicit λ keeps that λ's own.
    fn picked_estimate(&self, p: &super::planner::Plan, mapper: &FftMapper) -> Result<MapEstimate> {
        let pick = p.pick();
        match (&p.em, pick.em_iterations) {
            (Some(em), Some(_)) => self.em_estimate(em, mapper),
            _ => match pick.lambda {
                Some(l) if l != 1.0 => self.blurred_estimate(l, mapper),
                _ => mapper.estimate(&self.kernel(1.0)?),
            },
        }
    }

    /// The published map of the kernel map of `lambda` < 1 on these counts
    /// (docs/MATH.md §9.7, branch pubint): its values as the point map,
    /// and per cell the λ = 1 map's 95% interval for the true map,
    ///
    /// ```text
    /// interval_j = map₁_j ± 1.96·SE₁_j   (interval_centres = map₁, standard_errors = SE₁)
    /// ```
    ///
    /// as [`em_estimate`](Self::em_estimate) does for EM: a λ < 1 map is
    /// biased toward the map blurred by the residual noise, and its own
    /// interval (for that blurred map) is not an interval for the true
    /// map. `lambda` is kept in the estimate; `lambda` = 1 gives the λ = 1
    /// map itself. Refused if `mapper` holds other counts than this
    /// server's.
    ///
    /// ```
    /// use geopriv::map::{KdeGrid, MapAggregator, MapMechanism, MapRelease, QuerySet};
    /// # use rand::SeedableRng;
    /// # let mut rng = rand::rngs::StdRng::seed_from_u64(1);
    /// let set = QuerySet::Kde(KdeGrid::square(10_000.0, 11)?);
    /// let device = MapRelease::new(set.clone(), MapMechanism::APriori, 3e-4)?;
    /// let mut server = MapAggregator::with_max_bins(set.clone(), MapMechanism::APriori, 3e-4, 256)?;
    /// for i in 0..500 {
    ///     server.add(&device.release_unmetered(&[2_000.0 + 10.0 * i as f64, 5_000.0], &mut rng)?)?;
    /// }
    /// let mapper = server.mapper()?.unwrap();
    /// let m = server.blurred_estimate(0.4, &mapper)?;
    /// let (k04, k1) = (server.estimate(Some(0.4))?, server.estimate(Some(1.0))?);
    /// assert_eq!(m.values, k04.values);
    /// assert_eq!(m.interval_centres, Some(k1.values));
    /// assert_eq!(m.standard_errors, k1.standard_errors);
    /// # Ok::<(), geopriv::Error>(())
    /// ```
    pub fn blurred_estimate(&self, lambda: f64, mapper: &FftMapper) -> Result<MapEstimate> {
        self.require_own_mapper(mapper)?;
        let k1 = mapper.estimate(&self.kernel(1.0)?)?;
        if lambda == 1.0 {
            return Ok(k1);
        }
        let kl = mapper.estimate(&self.kernel(lambda)?)?;
        Ok(MapEstimate {
            values: kl.values,
            standard_errors: k1.standard_errors,
            interval_centres: Some(k1.values),
            ..kl
        })
    }

    /// `Ok` only if `mapper` is the FFT of this server's own counts; an
    /// `InvalidParameter` naming "mapper" otherwise.
    fn require_own_mapper(&self, mapper: &FftMapper) -> Result<()> {
        if self.counts.as_ref() != Some(mapper.counts()) {
            return Err(Error::InvalidParameter {
                name: "mapper",
                value: mapper.counts().total() as f64,
                requirement: "the FFT of this server's own counts",
            });
        }
        Ok(())
    }

    /// The published map of an EM fit `em` of these counts (docs/MATH.md
    /// §9.7, branch emk1): EM's values as the point map, and per cell the
    /// λ = 1 map's 95% interval for the true map,
    ///
    /// ```text
    /// interval_j = map₁_j ± 1.96·SE₁_j   (interval_centres = map₁, standard_errors = SE₁)
    /// ```
    ///
    /// with map₁, SE₁ exactly [`FftMapper::estimate`] of K_1 on `mapper`
    /// (no second pass over the reports: the FFT of the counts is
    /// reused). EM's bias is not pinned by the reports (its own bias-aware
    /// interval, [`em_standard_errors`](super::em_standard_errors), covered
    /// 0.83–0.99 where it was picked, branch emcov5); the unbiased map's
    /// interval is what they support about the true map. Refused if
    /// `mapper` holds other counts than this server's or the set is not a
    /// kernel grid.
    ///
    /// ```
    /// use geopriv::map::{KdeGrid, MapAggregator, MapMechanism, MapRelease, QuerySet};
    /// # use rand::SeedableRng;
    /// # let mut rng = rand::rngs::StdRng::seed_from_u64(1);
    /// let set = QuerySet::Kde(KdeGrid::square(10_000.0, 11)?);
    /// let device = MapRelease::new(set.clone(), MapMechanism::APriori, 3e-4)?;
    /// let mut server = MapAggregator::with_max_bins(set.clone(), MapMechanism::APriori, 3e-4, 256)?;
    /// for i in 0..500 {
    ///     server.add(&device.release_unmetered(&[2_000.0 + 10.0 * i as f64, 5_000.0], &mut rng)?)?;
    /// }
    /// let mapper = server.mapper()?.unwrap();
    /// let plan = geopriv::map::plan(&set, 3e-4, 500, Some(&mapper))?;
    /// let em = server.em_estimate(plan.em.as_ref().unwrap(), &mapper)?;
    /// let k1 = server.estimate(Some(1.0))?;
    /// assert_eq!(em.interval_centres, Some(k1.values));
    /// assert_eq!(em.standard_errors, k1.standard_errors);
    /// # Ok::<(), geopriv::Error>(())
    /// ```
    pub fn em_estimate(
        &self,
        em: &super::deconv::EmMap,
        mapper: &FftMapper,
    ) -> Result<MapEstimate> {
        self.require_own_mapper(mapper)?;
        let k1 = mapper.estimate(&self.kernel(1.0)?)?;
        Ok(MapEstimate {
            values: em.values.clone(),
            standard_errors: k1.standard_errors,
            interval_centres: Some(k1.values),
            n: self.accepted,
            lambda: f64::NAN,
            discretisation_bound: f64::NAN,
            em_iterations: Some(em.iterations),
            effective_reports: k1.effective_reports,
        })
    }

    /// The map. For noise a priori on a kernel grid, `lambda` chooses the
    /// kernel (None: 1, fully debiased). For noise a priori on a ladder,
    /// `Some(1.0)` gives the debiased estimate (unbiased for the ladder
    /// smoothed by N(0, h²), bias at most [`LadderDebias::bias_bound`]),
    /// anything else the plain average of f(x̃). Ignored otherwise. Cells
    /// nobody answered (sampled) are NaN with an infinite standard error.
    pub fn estimate(&self, lambda: Option<f64>) -> Result<MapEstimate> {
        if let Some(mapper) = self.mapper()? {
            return mapper.estimate(&self.kernel(lambda.unwrap_or(1.0))?);
        }
        let (cells, lam) = match (&self.ladder, lambda) {
            (Some((_, dc)), Some(1.0)) => (dc, 1.0),
            _ => (&self.cells, 0.0),
        };
        let mut values = Vec::with_capacity(cells.len());
        let mut standard_errors = Vec::with_capacity(cells.len());
        for c in cells {
            match c.estimate() {
                Some(e) => {
                    values.push(e.mean);
                    standard_errors.push(e.standard_error.unwrap_or(f64::INFINITY));
                }
                None => {
                    values.push(f64::NAN);
                    standard_errors.push(f64::INFINITY);
                }
            }
        }
        Ok(MapEstimate {
            values,
            standard_errors,
            interval_centres: None,
            n: self.accepted,
            lambda: lam,
            discretisation_bound: 0.0,
            em_iterations: None,
            effective_reports: None,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::map::{KdeGrid, MapRelease};
    use rand::SeedableRng;

    /// `binned_slot` then `add_binned` is `add`: the same verdict, the
    /// same error text and the same state, on valid reports, reports
    /// beyond the bins and every kind of refusal; `None` where nothing is
    /// binned.
    #[test]
    fn binned_slot_then_add_binned_is_add() {
        let set = QuerySet::Kde(KdeGrid::square(10_000.0, 9).unwrap());
        let dev = MapRelease::new(set.clone(), MapMechanism::APriori, 1e-3).unwrap();
        let mut rng = rand::rngs::StdRng::seed_from_u64(3);
        let mut reports = Vec::new();
        for i in 0..200 {
            let x = [(i * 97 % 10_000) as f64, (i * 31 % 10_000) as f64];
            reports.push(dev.release_unmetered(&x, &mut rng).unwrap());
        }
        let base = reports[0].clone();
        let mut variant = |f: &dyn Fn(&mut MapReport)| {
            let mut r = base.clone();
            f(&mut r);
            reports.push(r);
        };
        variant(&|r| r.location = Some(vec![1e9, 0.0]));
        variant(&|r| r.location = Some(vec![-3e7, 5e7]));
        variant(&|r| r.location = Some(vec![f64::NAN, 0.0]));
        variant(&|r| r.location = Some(vec![f64::INFINITY, 0.0]));
        variant(&|r| r.location = Some(vec![1.0]));
        variant(&|r| r.location = Some(vec![1.0, 2.0, 3.0]));
        variant(&|r| r.location = None);
        variant(&|r| r.values = Some(vec![1.0]));
        variant(&|r| r.queries = Some(vec![0]));
        variant(&|r| r.set = "0".into());
        variant(&|r| r.mechanism = MapMechanism::Composition);
        variant(&|r| r.epsilon = 2e-3);
        variant(&|r| r.epsilon = f64::from_bits(1e-3f64.to_bits() + 1));
        let mut by_add = MapAggregator::new(set.clone(), MapMechanism::APriori, 1e-3).unwrap();
        let mut by_slot = by_add.clone();
        let (mut ok, mut refused) = (0, 0);
        for r in &reports {
            let want = by_add.add(r).map_err(|e| e.to_string());
            let got = match by_slot.binned_slot(r).unwrap() {
                Ok(slot) => by_slot.add_binned(slot).map_err(|e| e.to_string()),
                Err(e) => Err(e.to_string()),
            };
            assert_eq!(got, want, "{r:?}");
            ok += want.is_ok() as u32;
            refused += want.is_err() as u32;
        }
        assert!(ok >= 202 && refused >= 9, "{ok} {refused}");
        assert_eq!(by_slot.counts(), by_add.counts());
        assert_eq!(by_slot.accepted(), by_add.accepted());
        assert!(by_add.counts().unwrap().outside() >= 2);
        let comp = MapAggregator::new(set, MapMechanism::Composition, 1e-3).unwrap();
        assert!(comp.binned_slot(&reports[0]).is_none());
    }
}
