//! The K × K query grid of the KDE experiment, the demo and their heat maps
//! (shared by `kde.rs`, `maps.rs` and `plot.rs`, so that none of them
//! imports another).
//!
//! Cell order is the core's: index = i_y · K + i_x for the point
//! (x_{i_x}, y_{i_y}), as in `geopriv::GridAggregator::kde_grid`, so a
//! vector of per-cell values from the experiments can be handed to the
//! core's grid aggregator unchanged.
//!
//! Random numbers are drawn in *scan order* (x index major: (x_0, y_0),
//! (x_0, y_1), ...): the order the committed seeded outputs
//! (`scripts/digests/`) were produced in, and the order of
//! `geopriv::map::KdeGrid`'s cells. [`Grid::scan`] gives the core index of
//! each scan position; every loop that consumes random numbers or adds up
//! per-cell errors walks it, so seeded outputs are unchanged.

use super::error::{ExperimentError, Result};

/// The query grid over a bounding box.
#[derive(Clone, Debug)]
pub struct Grid {
    /// Points per axis.
    pub k: usize,
    /// [xmin, xmax, ymin, ymax], metres.
    pub bbox: [f64; 4],
    /// Grid points in the core's order: index i_y · k + i_x for (x_{i_x}, y_{i_y}).
    pub centers: Vec<[f64; 2]>,
    /// Cell sides (dx, dy).
    pub cell: [f64; 2],
}

impl Grid {
    /// K × K points spanning `bbox`, ends included.
    pub fn new(k: usize, bbox: [f64; 4]) -> Result<Self> {
        if k < 2 {
            return Err(ExperimentError::Grid(
                "the grid needs at least 2 points per axis".into(),
            ));
        }
        // Refused before any allocation: K² cells of exact aggregates.
        let limit = geopriv::server::aggregate::MAX_GRID_CELLS;
        if k.checked_mul(k).is_none_or(|cells| cells > limit) {
            return Err(ExperimentError::Grid(format!(
                "a grid of {k} x {k} points is above the limit of {limit} cells (at most 512 points per axis)"
            )));
        }
        let dx = (bbox[1] - bbox[0]) / (k - 1) as f64;
        let dy = (bbox[3] - bbox[2]) / (k - 1) as f64;
        if !(dx > 0.0 && dy > 0.0) {
            return Err(ExperimentError::Grid(
                "the data's bounding box is degenerate".into(),
            ));
        }
        let centers = (0..k)
            .flat_map(|iy| {
                (0..k).map(move |ix| [bbox[0] + dx * ix as f64, bbox[2] + dy * iy as f64])
            })
            .collect();
        Ok(Self {
            k,
            bbox,
            centers,
            cell: [dx, dy],
        })
    }

    /// Number of cells, K².
    pub fn len(&self) -> usize {
        self.centers.len()
    }

    /// The core index (i_y · K + i_x) of each scan position (x index
    /// major), i.e. of cell j of `geopriv::map::KdeGrid` over the same box.
    pub fn scan(&self) -> impl Iterator<Item = usize> + Clone + '_ {
        let k = self.k;
        (0..k).flat_map(move |ix| (0..k).map(move |iy| iy * k + ix))
    }

    /// Values given in scan order (e.g. a `geopriv::map` estimate),
    /// re-indexed into the core's order.
    pub fn reorder_scanned(&self, values: &[f64]) -> Vec<f64> {
        let mut out = vec![f64::NAN; self.len()];
        for (v, i) in values.iter().zip(self.scan()) {
            out[i] = *v;
        }
        out
    }

    /// One grid-cell diagonal.
    pub fn diagonal(&self) -> f64 {
        self.cell[0].hypot(self.cell[1])
    }

    /// Mean over the cells of (a - b)², added up in scan order.
    pub fn ase(&self, a: &[f64], b: &[f64]) -> f64 {
        self.scan().map(|i| (a[i] - b[i]).powi(2)).sum::<f64>() / self.len() as f64
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn grid_spans_the_box_in_the_core_order() {
        let g = Grid::new(3, [0.0, 4.0, 10.0, 13.0]).unwrap();
        assert_eq!(g.centers.len(), 9);
        assert_eq!(g.centers[0], [0.0, 10.0]);
        // index i_y · k + i_x: the second point moves along x.
        assert_eq!(g.centers[1], [2.0, 10.0]);
        assert_eq!(g.centers[3], [0.0, 11.5]);
        assert_eq!(g.centers[8], [4.0, 13.0]);
        assert!((g.diagonal() - 2.5).abs() < 1e-12);
        assert!(Grid::new(1, [0.0, 1.0, 0.0, 1.0]).is_err());
        assert!(Grid::new(5, [0.0, 0.0, 0.0, 1.0]).is_err());
    }

    #[test]
    fn core_order_matches_the_core_grid_aggregator() {
        let g = Grid::new(3, [0.0, 4.0, 10.0, 13.0]).unwrap();
        let xs: Vec<f64> = (0..3).map(|i| g.centers[i][0]).collect();
        let ys: Vec<f64> = (0..3).map(|i| g.centers[3 * i][1]).collect();
        let core = geopriv::GridAggregator::kde_grid(&xs, &ys, 1.0).unwrap();
        for (q, c) in core.queries().iter().zip(&g.centers) {
            match q {
                geopriv::QueryDescriptor::Kde { center, .. } => assert_eq!(&center[..], &c[..]),
                other => panic!("unexpected {other:?}"),
            }
        }
    }

    #[test]
    fn scan_order_is_the_map_grids_order() {
        let g = Grid::new(4, [0.0, 3.0, 0.0, 6.0]).unwrap();
        let map = geopriv::map::KdeGrid::new_2d(g.bbox, [4, 4], 1.0).unwrap();
        for (j, i) in g.scan().enumerate() {
            assert_eq!(map.center(j), g.centers[i]);
        }
        let vals: Vec<f64> = (0..16).map(|j| j as f64).collect();
        let core = g.reorder_scanned(&vals);
        for (j, i) in g.scan().enumerate() {
            assert_eq!(core[i], j as f64);
        }
    }
}
