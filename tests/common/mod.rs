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
