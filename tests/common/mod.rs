//! Helpers shared by the ledger's integration tests.
// Each test crate uses some of these helpers.
#![allow(dead_code)]

use std::path::PathBuf;

/// A fresh directory for one test (removed at the end of the test).
pub struct TempDir(pub PathBuf);

impl TempDir {
    pub fn new(name: &str) -> Self {
        let dir =
            std::env::temp_dir().join(format!("geopriv-ledger-{}-{name}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        TempDir(dir)
    }
    pub fn file(&self, name: &str) -> PathBuf {
        self.0.join(name)
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// The kernel maps of a server's reports, each beside the target of its
/// interval (docs/MATH.md §9.7): the true map `truth` for λ = 1, the map
/// smoothed by the residual noise for λ < 1, computed from the devices'
/// own locations `xs` binned 3x finer than the reports. Shared by the
/// coverage tests of tests/maps.rs.
pub fn kernel_maps_against_targets(
    grid: &geopriv::map::KdeGrid,
    agg: &geopriv::map::MapAggregator,
    xs: &[[f64; 2]],
    truth: &[f64],
    lambdas: &[f64],
) -> Vec<(geopriv::map::MapEstimate, Vec<f64>)> {
    use geopriv::map::{BinSpec, BinnedCounts, FftMapper};
    let m = agg.mapper().unwrap().unwrap();
    let sp = agg.counts().unwrap().spec();
    let mut tc = BinnedCounts::new(BinSpec::new(grid, 3 * sp.refine(), 3 * sp.margin()).unwrap());
    for x in xs {
        tc.add(x).unwrap();
    }
    let tm = FftMapper::with_wrap_guard(tc, grid.bandwidth(), agg.kernel(1.0).unwrap().epsilon())
        .unwrap();
    lambdas
        .iter()
        .map(|&lam| {
            let k = agg.kernel(lam).unwrap();
            let est = m.estimate(&k).unwrap();
            let target = if lam == 1.0 {
                truth.to_vec()
            } else {
                tm.smoothed_target(&k)
            };
            (est, target)
        })
        .collect()
}

/// The cells with something to estimate (docs/MATH.md §9.7, "Cells with
/// nothing to estimate"): true map F_j >= 1e-12 · max_k F_k.
pub fn live_cells(truth: &[f64]) -> Vec<usize> {
    let tmax = truth.iter().fold(0.0f64, |a, b| a.max(*b));
    (0..truth.len())
        .filter(|&j| truth[j] >= 1e-12 * tmax)
        .collect()
}

/// The coverage of the interval the server publishes for the planner's
/// pick (`MapAggregator::planned_estimate`) against the true map, over all
/// cells and over the cells in `live`, with the pick's name: a λ = 1
/// pick's map ± 1.96 SE; an EM or λ < 1 pick's `interval_centres` (the
/// λ = 1 map) ± 1.96 SE (branch pubint: every published interval is for
/// the true map).
pub fn published_coverage(
    agg: &geopriv::map::MapAggregator,
    truth: &[f64],
    live: &[usize],
) -> (f64, f64, String) {
    let (est, plan) = agg.planned_estimate().unwrap();
    let pick = plan.unwrap().pick().clone();
    let target = truth.to_vec();
    let centres = est.interval_centres.as_deref().unwrap_or(&est.values);
    let all = geopriv::map::interval_coverage(centres, &est.standard_errors, &target);
    let sub = |v: &[f64]| live.iter().map(|&j| v[j]).collect::<Vec<_>>();
    let live =
        geopriv::map::interval_coverage(&sub(centres), &sub(&est.standard_errors), &sub(&target));
    (all, live, pick.name)
}
