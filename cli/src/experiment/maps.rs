//! Density maps at the SAME per-device ε (docs/MATH.md §9): every
//! mechanism of issue 11 item 2 spends exactly the per-device total ε on
//! the whole K × K map, so their errors can be compared honestly.
//!
//! The rows of one (n, ε) cell, in table order ([`ROWS`]):
//!
//! * PolyPlace at ε/m per cell and global Laplace at ε/m per cell: every
//!   device answers all m cells, per-device total m · ε/m = ε by sequential
//!   composition (PolyPlace through the library's
//!   `geopriv::map::MapMechanism::Composition`; the library composes
//!   PolyPlace only, so global Laplace runs the core mechanism at ε/m per
//!   cell here);
//! * vector global Laplace: f(x) + Laplace(L1/ε) per coordinate, ε for the
//!   whole vector by the certified ℓ1 constant L1 of the query set;
//! * sampled k of m: k cells chosen independently of x, PolyPlace at ε/k
//!   each (k = the planner's best k), total ε by sequential composition;
//!   cells nobody answered are estimated as 0 (run up to `max_releases`
//!   n·k releases, else the planner's upper bound);
//! * noise a priori: one noisy location per device (ε for every map of it),
//!   mapped by the server with the plain kernel (λ = 0), the fully
//!   debiased deconvolution kernel (λ = 1) and a partial one (the
//!   planner's λ if it picked a partial one, else its best partial λ);
//! * noise a priori, EM deconvolution of the binned counts (docs/MATH.md
//!   §9.6), as the planner computed it.
//!
//! Errors are ASE against the non-private map of the same devices. Rows
//! that would need more than `max_releases` noisy per-cell releases (n · m
//! for the two per-cell compositions and vector Laplace) are not run but
//! predicted by the planner's error model (docs/MATH.md §9.4): exact
//! expectations for the Laplace rows, an upper bound for PolyPlace; the
//! table marks them. The planner (`geopriv::map::plan`, given the noise a
//! priori reports) picks one row, marked in every output.

use super::error::Result;
use super::grid::Grid;
use super::mechanisms::{Contender, MechParams, Release};
use super::{add_in_order, rng_for};
use geopriv::map::{plan, KdeGrid, MapAggregator, MapMechanism, MapRelease, QuerySet};
use geopriv::noise::PlanarLaplace;
use geopriv::{GaussianKde, Mechanism, MechanismName, Query};
use rand::distr::Distribution;
use rayon::prelude::*;
use std::time::Instant;

/// Devices per work unit of the per-cell releases.
const CHUNK: usize = 128;
/// Work units per wave (partial sums are added in order after each wave).
const WAVE: usize = 64;
/// Shards of a library map release (each its own aggregator, merged in
/// order; exact sums, so the shard count changes nothing but memory).
const SHARDS: usize = 16;
/// Default bins per axis of the noise-a-priori server map (its
/// discretisation error is bounded by the library and far below the ASEs
/// reported); `--map-bins` lowers it for quick runs.
pub const MAX_BINS: usize = 1024;

/// The rows of a cell, in table order (short names for tables).
pub const ROWS: [&str; 8] = [
    "PolyPlace at ε/m",
    "global Laplace at ε/m",
    "vector Laplace",
    "sampled k of m",
    "a priori, plain",
    "a priori, debiased",
    "a priori, partial",
    "a priori, EM",
];

/// How a row's ASE was obtained.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Obtained {
    /// Run and measured against the true map.
    Measured,
    /// The planner's exact expectation (not run: too many releases).
    Predicted,
    /// The planner's upper bound (not run: too many releases).
    UpperBound,
}

/// One mechanism's map at the per-device ε.
#[derive(Clone, Debug)]
pub struct MapRow {
    /// Row label with its parameter (k, λ).
    pub label: String,
    /// ASE against the true map.
    pub ase: f64,
    /// Measured or predicted.
    pub obtained: Obtained,
    /// The per-device total, with the argument that gives it.
    pub accounting: String,
    /// The estimated map in the grid's (core) order, when measured and
    /// asked for.
    pub estimate: Option<Vec<f64>>,
}

/// All rows of one (n, ε) cell.
#[derive(Clone, Debug)]
pub struct MapCell {
    /// Per-device total ε (per metre).
    pub epsilon: f64,
    /// The rows, in [`ROWS`] order.
    pub rows: Vec<MapRow>,
    /// Index of the planner's pick in `rows`.
    pub pick: usize,
    /// The planner's one-line explanation.
    pub plan_line: String,
}

/// What a cell is measured on.
pub struct Setting<'a> {
    /// The query grid.
    pub grid: &'a Grid,
    /// Kernel bandwidth h, metres.
    pub bandwidth: f64,
    /// The devices' locations (inside the grid's box).
    pub users: &'a [[f64; 2]],
    /// The true map of these devices, core order.
    pub truth: &'a [f64],
    /// Base seed.
    pub seed: u64,
    /// Run the per-cell mechanisms only up to this many releases (n · m).
    pub max_releases: u64,
    /// Keep the estimated maps (for heat maps).
    pub keep_maps: bool,
    /// Bins per axis (at most) of the noise-a-priori server map.
    pub max_bins: usize,
}

impl Setting<'_> {
    /// The library's query set for this grid (cells in scan order).
    pub fn query_set(&self) -> Result<QuerySet> {
        let k = self.grid.k;
        Ok(QuerySet::Kde(KdeGrid::new_2d(
            self.grid.bbox,
            [k, k],
            self.bandwidth,
        )?))
    }
}

/// The true map (1/n) Σ_i exp(-||x_i - t||²/2h²) of `users` at the grid
/// points (core order): [`KdeGrid::exact_map`] (separable, blocks of 4,096
/// added in order), transposed to the core order.
pub fn true_map(grid: &Grid, h: f64, users: &[[f64; 2]]) -> Result<Vec<f64>> {
    let k = grid.k;
    // The library's map is in its scan order (x index major); the core
    // order here is y index major.
    let f = KdeGrid::new_2d(grid.bbox, [k, k], h)?.exact_map(users);
    Ok((0..k * k).map(|j| f[(j % k) * k + j / k]).collect())
}

/// Run a library map release on every device (in shards), aggregated by
/// the library's server.
fn library_map(
    s: &Setting<'_>,
    set: &QuerySet,
    mech: MapMechanism,
    eps: f64,
    tag: u64,
) -> Result<MapAggregator> {
    let (users, seed, bins) = (s.users, s.seed, s.max_bins);
    let rel = MapRelease::new(set.clone(), mech, eps)?;
    let per = users.len().div_ceil(SHARDS).max(1);
    let parts: Vec<MapAggregator> = users
        .par_chunks(per)
        .enumerate()
        .map(|(c, chunk)| {
            let mut rng = rng_for(
                seed,
                &[41, tag, users.len() as u64, eps.to_bits(), c as u64],
            );
            let mut agg = MapAggregator::with_max_bins(set.clone(), mech, eps, bins)?;
            for x in chunk {
                agg.add(&rel.release_unmetered(x, &mut rng)?)?;
            }
            Ok(agg)
        })
        .collect::<Result<_>>()?;
    let mut total = MapAggregator::with_max_bins(set.clone(), mech, eps, bins)?;
    for p in &parts {
        total.merge(p)?;
    }
    Ok(total)
}

/// Measure (or predict) every row of one cell at per-device total `eps`.
pub fn measure(s: &Setting<'_>, eps: f64) -> Result<MapCell> {
    let grid = s.grid;
    let set = s.query_set()?;
    let m = grid.len();
    let n = s.users.len();
    let releases = n as u64 * m as u64;
    let run_all = releases <= s.max_releases;
    let keep = |v: Vec<f64>| s.keep_maps.then_some(v);
    let seq = |what: &str| format!("ε by sequential composition of {m} {what} releases at ε/{m}");

    // Noise a priori first: the planner reads its reports.
    let apriori = library_map(s, &set, MapMechanism::APriori, eps, 4)?;
    let mapper = apriori.mapper()?.ok_or(geopriv::Error::InvalidReport {
        reason: "no reports",
    })?;
    let p = plan(&set, eps, n as u64, Some(&mapper))?;
    let predicted = |name: &str| p.predictions.iter().find(|q| q.name == name);
    let a_priori_row = |lambda: f64, label: String| -> Result<MapRow> {
        let est = grid.reorder_scanned(&mapper.estimate(&apriori.kernel(lambda)?)?.values);
        Ok(MapRow {
            label,
            ase: grid.ase(&est, s.truth),
            obtained: Obtained::Measured,
            accounting: "ε: one noisy location per device, every map of it is post-processing"
                .into(),
            estimate: keep(est),
        })
    };

    let mut rows = Vec::with_capacity(ROWS.len());
    // (a) PolyPlace at ε/m per cell (the library's composition).
    rows.push(if run_all {
        let agg = library_map(s, &set, MapMechanism::Composition, eps, 1)?;
        let est = grid.reorder_scanned(&agg.estimate(None)?.values);
        MapRow {
            label: ROWS[0].into(),
            ase: grid.ase(&est, s.truth),
            obtained: Obtained::Measured,
            accounting: seq("PolyPlace"),
            estimate: keep(est),
        }
    } else {
        let q = predicted("composition");
        MapRow {
            label: ROWS[0].into(),
            ase: q.map_or(f64::NAN, |q| q.ase),
            obtained: Obtained::UpperBound,
            accounting: seq("PolyPlace"),
            estimate: None,
        }
    });
    // (a) global Laplace at ε/m per cell (the core mechanism per cell).
    rows.push(if run_all {
        let queries: Vec<GaussianKde> = grid
            .centers
            .iter()
            .map(|c| GaussianKde::new(c, s.bandwidth))
            .collect::<Result<_, _>>()?;
        let r = Release::new(
            Contender::Mechanism(MechanismName::GlobalLaplace),
            eps / m as f64,
            MechParams {
                delta: 0.0,
                ldp_scale: 1.0,
            },
        )?;
        let sums = device_sums(&r, grid, &queries, s.users, s.seed, n, eps / m as f64)?;
        let est: Vec<f64> = sums.iter().map(|v| v / n as f64).collect();
        MapRow {
            label: ROWS[1].into(),
            ase: grid.ase(&est, s.truth),
            obtained: Obtained::Measured,
            accounting: seq("global-Laplace"),
            estimate: keep(est),
        }
    } else {
        let v = Mechanism::global_laplace(eps / m as f64)?
            .report_variance(set.max_global_lipschitz())
            .map_or(f64::NAN, |v| v / n as f64);
        MapRow {
            label: ROWS[1].into(),
            ase: v,
            obtained: Obtained::Predicted,
            accounting: seq("global-Laplace"),
            estimate: None,
        }
    });
    // (b) vector global Laplace.
    let l1 = match &set {
        QuerySet::Kde(g) => g.l1(),
        QuerySet::Ramps(r) => r.l1(),
        QuerySet::Districts(d) => d.l1(),
    };
    let vector_accounting = format!(
        "ε for the whole vector: Laplace(L1/ε) per cell, certified L1·h = {:.3} (gap {:.1e})",
        l1.bound * s.bandwidth,
        l1.gap
    );
    rows.push(if run_all {
        let agg = library_map(s, &set, MapMechanism::VectorLaplace, eps, 2)?;
        let est = grid.reorder_scanned(&agg.estimate(None)?.values);
        MapRow {
            label: ROWS[2].into(),
            ase: grid.ase(&est, s.truth),
            obtained: Obtained::Measured,
            accounting: vector_accounting,
            estimate: keep(est),
        }
    } else {
        MapRow {
            label: ROWS[2].into(),
            ase: predicted("vector-laplace").map_or(f64::NAN, |q| q.ase),
            obtained: Obtained::Predicted,
            accounting: vector_accounting,
            estimate: None,
        }
    });
    // (c) sampled k of m, k = the planner's best k (run up to the release
    // budget, n · k releases; else the planner's upper bound).
    let best_sampled = p.predictions.iter().find(|q| q.k.is_some());
    let k = best_sampled.and_then(|q| q.k).unwrap_or(1);
    let sampled_accounting = format!(
        "ε by sequential composition of {k} PolyPlace releases at ε/{k} (cells chosen independently of x)"
    );
    if n as u64 * k as u64 <= s.max_releases {
        let agg = library_map(s, &set, MapMechanism::Sampled { k }, eps, 3)?;
        let raw = agg.estimate(None)?.values;
        let filled: Vec<f64> = raw
            .iter()
            .map(|v| if v.is_finite() { *v } else { 0.0 })
            .collect();
        let est = grid.reorder_scanned(&filled);
        rows.push(MapRow {
            label: format!("sampled {k} of m"),
            ase: grid.ase(&est, s.truth),
            obtained: Obtained::Measured,
            accounting: sampled_accounting,
            estimate: keep(est),
        });
    } else {
        rows.push(MapRow {
            label: format!("sampled {k} of m"),
            ase: best_sampled.map_or(f64::NAN, |q| q.ase),
            obtained: Obtained::UpperBound,
            accounting: sampled_accounting,
            estimate: None,
        });
    }
    // (d) noise a priori: plain, debiased, partial.
    rows.push(a_priori_row(0.0, ROWS[4].into())?);
    rows.push(a_priori_row(1.0, ROWS[5].into())?);
    let pick = p.pick();
    let partial = match pick.lambda {
        Some(l) if l > 0.0 && l < 1.0 => l,
        _ => p
            .predictions
            .iter()
            .find(|q| q.lambda.is_some_and(|l| l > 0.0 && l < 1.0))
            .and_then(|q| q.lambda)
            .unwrap_or(0.6),
    };
    rows.push(a_priori_row(
        partial,
        format!("a priori, partial λ={partial:.1}"),
    )?);

    // (d') the EM deconvolution map the planner computed (docs/MATH.md §9.6).
    if let Some(em) = &p.em {
        let est = grid.reorder_scanned(&em.values);
        rows.push(MapRow {
            label: format!("a priori, EM ({} it.)", em.iterations),
            ase: grid.ase(&est, s.truth),
            obtained: Obtained::Measured,
            accounting: "ε: one noisy location per device, every map of it is post-processing"
                .into(),
            estimate: keep(est),
        });
    }
    let pick_row = match pick.lambda {
        _ if pick.em_iterations.is_some() => 7,
        Some(l) if l <= 0.0 => 4,
        Some(l) if l >= 1.0 => 5,
        Some(_) => 6,
        None if pick.k.is_some() => 3,
        None if pick.name == "vector-laplace" => 2,
        None => 0,
    };
    if pick.k.is_some_and(|pk| pk != k) {
        // The planner's pick is always the best prediction, and `k` is
        // the best sampled prediction, so they agree; say so if not.
        rows[3].label.push_str(" (planner's k differs)");
    }
    Ok(MapCell {
        epsilon: eps,
        rows,
        pick: pick_row,
        plan_line: p.line.clone(),
    })
}

/// Σ over devices of each device's report at each grid point, for a
/// per-query mechanism `r` (every device answers every cell) or noise a
/// priori (one planar-Laplace location per device at `eps`, reused for
/// every cell). Reports are drawn cell by cell in the grid's scan order
/// (see [`Grid::scan`]) and stored in the core's order; the random
/// streams are seeded from (n, eps, mechanism, chunk).
pub fn device_sums(
    r: &Release,
    grid: &Grid,
    queries: &[GaussianKde],
    users: &[[f64; 2]],
    seed: u64,
    n: usize,
    eps: f64,
) -> Result<Vec<f64>> {
    let g = queries.len();
    let chunks = users.len().div_ceil(CHUNK);
    let mut total = vec![0.0; g];
    let a_priori = PlanarLaplace::new(eps)?;
    let start = Instant::now();
    for wave in (0..chunks).step_by(WAVE) {
        // Progress of long (full-scale) runs, about every 10% of the devices.
        let step = (chunks / 10).max(WAVE).div_ceil(WAVE) * WAVE;
        if users.len() >= 50_000 && wave > 0 && wave % step == 0 {
            eprintln!(
                "    {}: {:.0}% of the devices in {:.0} s",
                r.kind.name(),
                100.0 * wave as f64 / chunks as f64,
                start.elapsed().as_secs_f64()
            );
        }
        let parts: Vec<Vec<f64>> = (wave..(wave + WAVE).min(chunks))
            .into_par_iter()
            .map(|c| {
                let mut rng = rng_for(seed, &[21, n as u64, eps.to_bits(), r.kind.tag(), c as u64]);
                let mut part = vec![0.0; g];
                for x in &users[c * CHUNK..((c + 1) * CHUNK).min(users.len())] {
                    if r.kind == Contender::A_PRIORI {
                        // One noisy location per device, for every grid point.
                        let z = a_priori.sample(&mut rng);
                        let noisy = [x[0] + z[0], x[1] + z[1]];
                        for i in grid.scan() {
                            part[i] += queries[i].value(&noisy)?;
                        }
                    } else {
                        for i in grid.scan() {
                            part[i] += r.release(&queries[i], x, &mut rng)?;
                        }
                    }
                }
                Ok(part)
            })
            .collect::<Result<_>>()?;
        let sum = add_in_order(parts, g);
        for (t, s) in total.iter_mut().zip(sum) {
            *t += s;
        }
    }
    Ok(total)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_row_at_the_same_per_device_total_and_a_priori_wins_at_large_eps_h() {
        let grid = Grid::new(6, [0.0, 10_000.0, 0.0, 10_000.0]).unwrap();
        let h = grid.diagonal();
        let mut rng = rng_for(3, &[1]);
        let users: Vec<[f64; 2]> = (0..400)
            .map(|_| {
                use rand::Rng;
                [
                    rng.random_range(2_000.0..6_000.0),
                    rng.random_range(3_000.0..8_000.0),
                ]
            })
            .collect();
        let queries: Vec<GaussianKde> = grid
            .centers
            .iter()
            .map(|c| GaussianKde::new(c, h).unwrap())
            .collect();
        let truth = true_map(&grid, h, &users).unwrap();
        // The separable true map is the per-query one.
        for (t, q) in truth.iter().zip(&queries) {
            let direct = users.iter().map(|x| q.value(x).unwrap()).sum::<f64>() / 400.0;
            assert!((t - direct).abs() < 1e-12, "{t} {direct}");
        }
        let s = Setting {
            grid: &grid,
            bandwidth: h,
            users: &users,
            truth: &truth,
            seed: 5,
            max_releases: u64::MAX,
            keep_maps: true,
            max_bins: 128,
        };
        let cell = measure(&s, 3.0 / h).unwrap();
        assert_eq!(cell.rows.len(), ROWS.len());
        for r in &cell.rows {
            assert!(r.ase.is_finite() && r.ase >= 0.0, "{r:?}");
            assert!(r.accounting.starts_with('ε'), "{}", r.accounting);
            assert_eq!(r.estimate.as_ref().map(Vec::len), Some(36));
        }
        let best_a_priori = cell.rows[4..]
            .iter()
            .map(|r| r.ase)
            .fold(f64::MAX, f64::min);
        // Per-cell releases at ε/36 are far noisier than one location at ε.
        assert!(best_a_priori < cell.rows[0].ase && best_a_priori < cell.rows[1].ase);
        assert!(cell.pick < ROWS.len());
        // Predicted instead of run when over the release budget.
        let cheap = Setting {
            max_releases: 1,
            ..s
        };
        let c2 = measure(&cheap, 3.0 / h).unwrap();
        assert_eq!(c2.rows[0].obtained, Obtained::UpperBound);
        assert_eq!(c2.rows[1].obtained, Obtained::Predicted);
        assert_eq!(c2.rows[2].obtained, Obtained::Predicted);
        assert_eq!(c2.rows[3].obtained, Obtained::UpperBound);
        assert_eq!(c2.rows[4].ase, cell.rows[4].ase);
    }
}
