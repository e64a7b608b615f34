//! Instance-based Laplace noise without smooth sensitivity: Algorithm 1 of
//! Canard and Olivier (`docs/MATH.md §11.3`).
//!
//! **Setting.** The datasets are partitioned into *levels* 1..r by their
//! (upper bounds on) local sensitivity, LS_1 <= … <= LS_r = GS; two levels
//! k ~ l are neighbours when some pair of neighbouring datasets lies in
//! them. A dataset x in level k is released as f(x) + Lap(1/λ_k): the rate
//! λ_k depends only on the level.
//!
//! **Their Theorem 14** (in our words). Let every level carry a rate λ_k
//! and a share α_k ∈ (0, 1) with
//! (1) λ_k LS_k <= α_k ε, and
//! (2) |1 - λ_k/λ_l| <= (1 - α_k) ε/ln(1/δ) for all neighbouring levels k ~ l.
//! Take neighbours x (level k) and x' (level l) and an output y. Then
//! λ_l |f(x') - y| - λ_k |f(x) - y| <= λ_k |f(x) - f(x')| + |λ_l - λ_k| |f(x') - y|
//! by the triangle inequality; the first term is at most α_k ε by (1), the
//! second at most (1 - α_k) ε unless |f(x') - y| λ_l exceeds
//! (1 - α_k) ε / |1 - λ_k/λ_l| >= ln(1/δ), which under x' happens with
//! probability at most δ (Laplace tail e^{-t}). So outside a set of
//! x'-probability δ, the *exponents* of the two densities differ by at most
//! ε. **The densities also differ by the normalising factor λ_l/λ_k**,
//! which the published proof omits: its logarithm is at most
//! -ln(1 - c) with c = |1 - λ_k/λ_l|. In Algorithm 1 the rates of
//! neighbouring levels differ by at most the factor ρ = 1 + t/2,
//! t = ε_A/ln(1/δ), so the true guarantee of the algorithm run at ε_A is
//! (ε_A + ln ρ, δ). We therefore run it at the ε_A that solves
//! ε_A + ln(1 + ε_A/(2 ln(1/δ))) = ε ([`Calibration::Corrected`], the
//! default); [`Calibration::AsPublished`] uses ε_A = ε, for comparison in
//! the audit.
//!
//! **Algorithm 1 (descending induction).** With α_k <= 1/2 for all k, (2)
//! holds as soon as neighbouring rates are within the factor ρ. Start with
//! λ_r = ε_A/(2 LS_r). For k = r-1 down to 1 let τ_l be the lowest level
//! neighbouring l and l_k = max{l > k : τ_l <= k} (the highest level that
//! reaches down to k or below; it exists when the levels are connected) and
//! set λ_k = min(ε_A/(2 LS_k), ρ λ_{l_k}). Then (by induction) λ is
//! non-increasing in k, and for neighbours k < l we have l <= l_k, so
//! λ_l <= λ_k <= ρ λ_{l_k} <= ρ λ_l: the rates are within ρ, and
//! λ_k LS_k <= ε_A/2 gives (1) with α = 1/2.
//!
//! ```
//! use geopriv::central::instance_based::{LevelStructure, InstanceBasedLaplace};
//! // A chain of 1000 levels, local sensitivity k at level k (global: 1000).
//! let levels = LevelStructure::chain((1..=1000).map(f64::from).collect())?;
//! let mech = InstanceBasedLaplace::new(&levels, 1.0, 1e-6)?;
//! assert!(mech.scale(0) < mech.scale(999)); // the low levels get less noise than the top one
//! // (On a short chain such as [1, 4, 16, 64] the rates of neighbouring
//! // levels must stay within a factor ρ close to 1, so level 0 gets about
//! // the noise of level 3: the gain needs many levels, docs/MATH.md §11.)
//! # Ok::<(), geopriv::Error>(())
//! ```

use super::{check_delta, check_epsilon, CentralGrid, Fault, SCALE_FLOOR_FRACTION};
use crate::error::{finite, Error, Result};
use crate::math::{ln, log1p};
use crate::noise::Laplace;
use alloc::vec;
use alloc::vec::Vec;
use rand::distr::Distribution;
use rand::Rng;

/// Sorted local sensitivities and the neighbour relation between levels.
#[derive(Clone, Debug, PartialEq)]
pub struct LevelStructure {
    ls: Vec<f64>,
    /// τ_l: the lowest level neighbouring l (l itself if none is lower).
    lowest_neighbour: Vec<usize>,
}

impl LevelStructure {
    /// Levels 0..r-1 (0-based) with local sensitivities `ls` (finite, >= 0,
    /// non-decreasing, the last > 0) and the neighbouring level pairs.
    pub fn new(ls: Vec<f64>, neighbour_pairs: &[(usize, usize)]) -> Result<Self> {
        if ls.is_empty() {
            return Err(Error::InvalidData {
                index: 0,
                value: f64::NAN,
                reason: "there must be at least one level",
            });
        }
        for (index, &v) in ls.iter().enumerate() {
            if !(v >= 0.0 && v.is_finite()) {
                return Err(Error::InvalidData {
                    index,
                    value: v,
                    reason: "local sensitivities must be finite and >= 0",
                });
            }
        }
        for (index, w) in ls.windows(2).enumerate() {
            if w[1] < w[0] {
                return Err(Error::InvalidData {
                    index: index + 1,
                    value: w[1],
                    reason: "local sensitivities must be sorted non-decreasing",
                });
            }
        }
        let r = ls.len();
        if ls[r - 1] <= 0.0 {
            return Err(Error::InvalidData {
                index: r - 1,
                value: ls[r - 1],
                reason: "the top level (global sensitivity) must be > 0",
            });
        }
        let mut lowest: Vec<usize> = (0..r).collect();
        for &(a, b) in neighbour_pairs {
            if a >= r || b >= r {
                return Err(Error::InvalidData {
                    index: a.max(b),
                    value: a.max(b) as f64,
                    reason: "a neighbour pair names a level that does not exist",
                });
            }
            let (lo, hi) = (a.min(b), a.max(b));
            lowest[hi] = lowest[hi].min(lo);
        }
        Ok(Self {
            ls,
            lowest_neighbour: lowest,
        })
    }

    /// A chain: level k neighbours only k - 1 and k + 1 (their Example 22,
    /// and the edge-count layers of a graph, Example 23).
    pub fn chain(ls: Vec<f64>) -> Result<Self> {
        let pairs: Vec<(usize, usize)> = (1..ls.len()).map(|k| (k - 1, k)).collect();
        Self::new(ls, &pairs)
    }

    /// Number of levels r.
    pub fn len(&self) -> usize {
        self.ls.len()
    }

    /// Never true (at least one level).
    pub fn is_empty(&self) -> bool {
        self.ls.is_empty()
    }

    /// LS of level k.
    pub fn local_sensitivity(&self, k: usize) -> Option<f64> {
        self.ls.get(k).copied()
    }
}

/// Which ε Algorithm 1 is run at.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum Calibration {
    /// ε_A + ln(1 + ε_A/(2 ln 1/δ)) = ε: (ε, δ)-DP including the
    /// normalising factor (module docs).
    #[default]
    Corrected,
    /// ε_A = ε as in the paper (misses the normalising factor).
    AsPublished,
}

/// Laplace noise with a rate per level, by Algorithm 1, released on a
/// public grid (`docs/MATH.md §11.3`, §11.5).
///
/// **Stated guarantee:** (ε, δ)-DP for the ideal release (Theorem 14 with
/// the normalising factor, [`Calibration::Corrected`]); the implemented,
/// snapped release adds η = 6.0e-9 per cell within z_max = 34.5 scales
/// and δ_fp = 1e-15 (grid k = 15 below σ_ref = max(2 LS_r/ε_A, F/64), F
/// the public bound on |f|, default 64 · 2 LS_r/ε_A). The rates are capped
/// at 2^16/σ_ref (scales floored at 2^-16 σ_ref): capping every rate at one
/// constant keeps both conditions of the theorem (module docs).
#[derive(Clone, Debug, PartialEq)]
pub struct InstanceBasedLaplace {
    epsilon: f64,
    delta: f64,
    epsilon_algorithm: f64,
    rates: Vec<f64>,
    value_bound: f64,
    grid: CentralGrid,
}

impl InstanceBasedLaplace {
    /// Algorithm 1 at (ε, δ), corrected calibration.
    pub fn new(levels: &LevelStructure, epsilon: f64, delta: f64) -> Result<Self> {
        Self::with_calibration(levels, epsilon, delta, Calibration::Corrected)
    }

    /// Algorithm 1 with an explicit calibration.
    pub fn with_calibration(
        levels: &LevelStructure,
        epsilon: f64,
        delta: f64,
        calibration: Calibration,
    ) -> Result<Self> {
        let epsilon = check_epsilon(epsilon)?;
        let delta = check_delta(delta)?;
        let l = ln(1.0 / delta);
        let eps_a = match calibration {
            Calibration::AsPublished => epsilon,
            Calibration::Corrected => {
                // Bisection on the increasing map e -> e + ln(1 + e/(2L)) on [0, ε].
                let (mut lo, mut hi) = (0.0f64, epsilon);
                for _ in 0..200 {
                    let mid = 0.5 * (lo + hi);
                    if mid + log1p(mid / (2.0 * l)) > epsilon {
                        hi = mid;
                    } else {
                        lo = mid;
                    }
                }
                lo
            }
        };
        let rho = 1.0 + 0.5 * eps_a / l;
        let r = levels.len();
        let cap = |k: usize| {
            let s = levels.ls[k];
            if s > 0.0 {
                eps_a / (2.0 * s)
            } else {
                f64::INFINITY
            }
        };
        let mut rates = vec![0.0; r];
        rates[r - 1] = cap(r - 1);
        for k in (0..r - 1).rev() {
            // l_k = max{l > k : τ_l <= k}.
            let lk = (k + 1..r).rev().find(|&l| levels.lowest_neighbour[l] <= k);
            rates[k] = match lk {
                Some(l) => cap(k).min(rho * rates[l]),
                None => cap(k),
            };
            if !rates[k].is_finite() {
                return Err(Error::InvalidData {
                    index: k,
                    value: levels.ls[k],
                    reason: "a level with zero local sensitivity has no higher neighbour",
                });
            }
        }
        Self::on_grid(epsilon, delta, eps_a, rates, None)
    }

    /// Fix the grid for the public bound `value_bound` on |f| (default
    /// 64 σ_max) and cap the rates at 1/(2^-16 σ_ref). λ_l <= λ_k <= ρ λ_l
    /// for neighbours k < l survives min(·, c): if λ_l >= c both become c;
    /// if λ_l < c <= λ_k then λ_l < c <= λ_k <= ρ λ_l; otherwise nothing
    /// changes. λ_k LS_k <= ε_A/2 only improves.
    fn on_grid(
        epsilon: f64,
        delta: f64,
        epsilon_algorithm: f64,
        mut rates: Vec<f64>,
        value_bound: Option<f64>,
    ) -> Result<Self> {
        // λ is non-increasing: the top level has the largest scale.
        let sigma_max = 1.0 / rates[rates.len() - 1];
        let value_bound = match value_bound {
            Some(b) => crate::error::positive_finite("value_bound", b)?,
            None => crate::release_grid::VALUE_SPAN_BOUND * sigma_max,
        };
        let grid = CentralGrid::new(
            crate::mechanism::NoiseShape::Laplace,
            sigma_max,
            value_bound,
        )?;
        let cap = 1.0 / (grid.reference_scale * SCALE_FLOOR_FRACTION);
        for r in rates.iter_mut() {
            *r = r.min(cap);
        }
        Ok(Self {
            epsilon,
            delta,
            epsilon_algorithm,
            rates,
            value_bound,
            grid,
        })
    }

    /// The same mechanism for a public bound |f(x)| <= `value_bound` (the
    /// grid widens when it exceeds 64 σ_max; releases of larger values are
    /// refused with a typed error).
    pub fn with_value_bound(self, value_bound: f64) -> Result<Self> {
        // Recapping already capped rates keeps both conditions (on_grid);
        // a smaller bound than before keeps the old, lower cap (more noise,
        // never less privacy).
        Self::on_grid(
            self.epsilon,
            self.delta,
            self.epsilon_algorithm,
            self.rates,
            Some(value_bound),
        )
    }

    /// The public bound on |f(x)|.
    pub fn value_bound(&self) -> f64 {
        self.value_bound
    }

    /// The public release grid and (η, δ_fp) (docs/MATH.md §11.5).
    pub fn grid(&self) -> CentralGrid {
        self.grid
    }

    /// ε of the guarantee.
    pub fn epsilon(&self) -> f64 {
        self.epsilon
    }

    /// δ of the guarantee.
    pub fn delta(&self) -> f64 {
        self.delta
    }

    /// The ε_A Algorithm 1 was run at.
    pub fn epsilon_algorithm(&self) -> f64 {
        self.epsilon_algorithm
    }

    /// The rates λ_k.
    pub fn rates(&self) -> &[f64] {
        &self.rates
    }

    /// The Laplace scale 1/λ_k of level k (= its expected absolute error);
    /// +∞ for a level that does not exist.
    pub fn scale(&self, k: usize) -> f64 {
        self.rates.get(k).map_or(f64::INFINITY, |r| 1.0 / r)
    }

    /// Scale of level k under a deliberate fault (for audits).
    pub fn scale_with_fault(&self, k: usize, fault: Fault) -> f64 {
        match fault {
            Fault::HalveSensitivity => 0.5 * self.scale(k),
            Fault::ShrinkSensitivity(f) => f * self.scale(k),
            _ => self.scale(k),
        }
    }

    /// Release snap(f(x) + (1/λ_k) Z₁) for a dataset in level k, Z₁ the
    /// exact unit Laplace draw; |f(x)| above [`Self::value_bound`] is refused.
    pub fn release<R: Rng + ?Sized>(&self, value: f64, level: usize, rng: &mut R) -> Result<f64> {
        let value = finite("value", value)?;
        if value.abs() > self.value_bound {
            return Err(Error::InvalidParameter {
                name: "value",
                value,
                requirement: "|f(x)| at most the public value_bound",
            });
        }
        let rate = *self.rates.get(level).ok_or(Error::InvalidParameter {
            name: "level",
            value: level as f64,
            requirement: "an existing level",
        })?;
        let sigma = 1.0 / rate;
        self.grid
            .snap(value + sigma * Laplace::new(1.0)?.sample(rng))
    }
}

/// Example 22: mean expected absolute error over one dataset per level,
/// Algorithm 1 against Laplace(GS/ε), for a chain of levels.
pub fn chain_mean_errors(
    ls: Vec<f64>,
    epsilon: f64,
    delta: f64,
    calibration: Calibration,
) -> Result<(f64, f64)> {
    let levels = LevelStructure::chain(ls)?;
    let m = InstanceBasedLaplace::with_calibration(&levels, epsilon, delta, calibration)?;
    let r = levels.len();
    let alg: f64 = (0..r).map(|k| m.scale(k)).sum::<f64>() / r as f64;
    let lap = levels.ls[r - 1] / epsilon;
    Ok((alg, lap))
}

/// Number of 2-triangles (pairs of triangles sharing an edge),
/// Σ_edges C(a_e, 2) with a_e the number of triangles on edge e, of a simple
/// undirected graph on `vertices` vertices.
pub fn two_triangles(vertices: usize, edges: &[(usize, usize)]) -> Result<u64> {
    let adj = adjacency(vertices, edges)?;
    let mut total = 0u64;
    for &(i, j) in edges {
        let a = common_neighbours(&adj, i, j) as u64;
        total += a * a.saturating_sub(1) / 2;
    }
    Ok(total)
}

/// Upper bound on the local sensitivity of the 2-triangle count over all
/// graphs with `k` edges on N vertices (their Example 23 with a tighter
/// constant): adding edge ij to H changes the count by
/// C(a_ij, 2) + Σ_{l ∈ N_ij} (a_il + a_jl) <= a(a-1)/2 + 2a², where
/// a = min(N - 2, ⌊k/2⌋) bounds the triangles on any edge of a graph with
/// k + 1 edges; removing an edge is adding it to a graph with k - 1 edges.
pub fn two_triangle_layer_sensitivity(vertices: usize, k: usize) -> f64 {
    let a = (vertices.saturating_sub(2)).min(k / 2) as f64;
    a * (a - 1.0).max(0.0) / 2.0 + 2.0 * a * a
}

/// At least 3 vertices (a triangle needs them).
fn check_vertices(vertices: usize) -> Result<()> {
    if vertices < 3 {
        return Err(Error::InvalidParameter {
            name: "vertices",
            value: vertices as f64,
            requirement: "at least 3",
        });
    }
    Ok(())
}

/// The layered level structure of Example 23: level k = graphs with k
/// edges, k = 0..=N(N-1)/2, a chain.
pub fn two_triangle_levels(vertices: usize) -> Result<LevelStructure> {
    check_vertices(vertices)?;
    let max_edges = vertices * (vertices - 1) / 2;
    LevelStructure::chain(
        (0..=max_edges)
            .map(|k| two_triangle_layer_sensitivity(vertices, k))
            .collect(),
    )
}

/// A(H) = max over vertex pairs {i, j} (joined or not) of the number of
/// common neighbours |N_i ∩ N_j|. Changing one edge (u, v) changes each
/// common-neighbour count by at most 1, so A moves by at most one between
/// neighbouring graphs: the levels "A(H) = a" form a chain.
pub fn max_common_neighbours(vertices: usize, edges: &[(usize, usize)]) -> Result<usize> {
    let adj = adjacency(vertices, edges)?;
    let mut best = 0;
    for i in 0..vertices {
        for j in i + 1..vertices {
            best = best.max(common_neighbours(&adj, i, j));
        }
    }
    Ok(best)
}

/// Local-sensitivity bound of the 2-triangle count on the level A(H) = a:
/// adding or removing edge ij changes the count by
/// C(a_ij, 2) + Σ_{l ∈ N_ij} (a_il + a_jl) with every common-neighbour
/// count at most a (in the graph without the edge), so at most
/// a(a-1)/2 + 2a².
pub fn two_triangle_common_neighbour_sensitivity(a: usize) -> f64 {
    let a = a as f64;
    a * (a - 1.0).max(0.0) / 2.0 + 2.0 * a * a
}

/// Levels by A(H) = 0..=N-2 (a chain): our variant of Example 23, far
/// tighter than the edge-count layers on sparse graphs such as co-location
/// graphs, where A is small while the edge count is not.
pub fn two_triangle_common_neighbour_levels(vertices: usize) -> Result<LevelStructure> {
    check_vertices(vertices)?;
    LevelStructure::chain(
        (0..=vertices - 2)
            .map(two_triangle_common_neighbour_sensitivity)
            .collect(),
    )
}

fn adjacency(vertices: usize, edges: &[(usize, usize)]) -> Result<Vec<Vec<bool>>> {
    let mut adj = vec![vec![false; vertices]; vertices];
    for (index, &(i, j)) in edges.iter().enumerate() {
        if i >= vertices || j >= vertices || i == j || adj[i][j] {
            return Err(Error::InvalidData {
                index,
                value: i.max(j) as f64,
                reason: "edges must join two distinct existing vertices, once",
            });
        }
        adj[i][j] = true;
        adj[j][i] = true;
    }
    Ok(adj)
}

fn common_neighbours(adj: &[Vec<bool>], i: usize, j: usize) -> usize {
    (0..adj.len()).filter(|&l| adj[i][l] && adj[j][l]).count()
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::rngs::StdRng;
    use rand::SeedableRng;

    #[test]
    fn releases_are_snapped_bounded_and_rates_capped() {
        // A chain whose bottom level has LS = 0: its rate is capped.
        let levels = LevelStructure::chain(vec![0.0, 1e-12, 1.0, 2.0, 4.0]).unwrap();
        let m = InstanceBasedLaplace::new(&levels, 1.0, 1e-6).unwrap();
        let g = m.grid();
        assert!(g.fp.eta <= 1e-8 && g.fp.delta_fp <= 1.000_001e-15, "{g:?}");
        assert_eq!(g.grid.to_bits() & 0x000F_FFFF_FFFF_FFFF, 0);
        for k in 0..levels.len() {
            assert!(m.scale(k) >= g.min_scale() * (1.0 - 1e-15), "{k}");
        }
        // Neighbouring rates still within ρ after the cap.
        let rho = 1.0 + 0.5 * m.epsilon_algorithm() / ln(1e6);
        for w in m.rates().windows(2) {
            assert!(w[1] <= w[0] && w[0] <= rho * w[1] * (1.0 + 1e-12), "{w:?}");
        }
        let mut rng = StdRng::seed_from_u64(4);
        for _ in 0..100 {
            let y = m.release(3.0, 1, &mut rng).unwrap();
            assert_eq!(y, (y / g.grid).round() * g.grid);
        }
        assert!(m.release(m.value_bound() * 2.0, 1, &mut rng).is_err());
        let wide = m.clone().with_value_bound(1e9).unwrap();
        assert!(wide.grid().grid > g.grid);
        assert!(wide.release(1e8, 1, &mut rng).is_ok());
        assert!(m.clone().with_value_bound(f64::NAN).is_err());
    }

    #[test]
    fn neighbouring_rates_are_within_rho_and_capped() {
        // Random non-chain structures.
        let ls = vec![0.5, 1.0, 1.0, 3.0, 9.0, 9.5, 40.0];
        let pairs = [(0, 3), (1, 2), (2, 6), (3, 4), (4, 5), (5, 6), (0, 1)];
        let levels = LevelStructure::new(ls.clone(), &pairs).unwrap();
        let (eps, delta) = (1.0, 1e-5);
        let m = InstanceBasedLaplace::new(&levels, eps, delta).unwrap();
        let ea = m.epsilon_algorithm();
        assert!(ea < eps && ea + log1p(ea / (2.0 * ln(1.0 / delta))) <= eps * (1.0 + 1e-12));
        let rho = 1.0 + 0.5 * ea / ln(1.0 / delta);
        for &(a, b) in &pairs {
            let (x, y) = (m.rates()[a], m.rates()[b]);
            assert!(x.max(y) <= rho * x.min(y) * (1.0 + 1e-12), "{a} {b}");
        }
        for (rate, l) in m.rates().iter().zip(&ls) {
            assert!(rate * l <= ea / 2.0 * (1.0 + 1e-12));
        }
        for w in m.rates().windows(2) {
            assert!(w[0] >= w[1]);
        }
    }

    #[test]
    fn chain_beats_laplace_when_levels_are_many() {
        // Example 22 shape: geometric LS, t = 1/ln r.
        let r = 1000;
        let ls: Vec<f64> = (0..r).map(|k| 1.1f64.powi(k).min(1e300)).collect();
        let (alg, lap) =
            chain_mean_errors(ls, 1.0, 1.0 / r as f64, Calibration::AsPublished).unwrap();
        assert!(alg < 0.05 * lap, "{alg} {lap}");
    }

    #[test]
    fn two_triangle_bound_holds_on_every_graph_with_five_vertices() {
        let n = 5;
        let all: Vec<(usize, usize)> = (0..n)
            .flat_map(|i| (i + 1..n).map(move |j| (i, j)))
            .collect();
        let edges_of = |mask: u32| -> Vec<(usize, usize)> {
            all.iter()
                .enumerate()
                .filter(|(b, _)| mask >> b & 1 == 1)
                .map(|(_, &e)| e)
                .collect()
        };
        let count = |mask: u32| two_triangles(n, &edges_of(mask)).unwrap();
        for mask in 0u32..(1 << all.len()) {
            let f = count(mask) as i64;
            let mut ls = 0i64;
            for b in 0..all.len() {
                ls = ls.max((count(mask ^ (1 << b)) as i64 - f).abs());
            }
            let k = mask.count_ones() as usize;
            assert!(
                ls as f64 <= two_triangle_layer_sensitivity(n, k),
                "mask {mask}"
            );
        }
    }

    #[test]
    fn bad_input_is_a_typed_error() {
        assert!(LevelStructure::chain(vec![]).is_err());
        assert!(LevelStructure::chain(vec![2.0, 1.0]).is_err());
        assert!(LevelStructure::chain(vec![0.0, 0.0]).is_err());
        assert!(LevelStructure::chain(vec![f64::NAN, 1.0]).is_err());
        assert!(LevelStructure::new(vec![1.0, 2.0], &[(0, 2)]).is_err());
        let l = LevelStructure::chain(vec![1.0, 2.0]).unwrap();
        assert!(InstanceBasedLaplace::new(&l, 0.0, 1e-6).is_err());
        assert!(InstanceBasedLaplace::new(&l, 1.0, 1.0).is_err());
        // A zero-sensitivity level with no higher neighbour.
        let iso = LevelStructure::new(vec![0.0, 1.0], &[]).unwrap();
        assert!(InstanceBasedLaplace::new(&iso, 1.0, 1e-6).is_err());
        assert!(two_triangles(3, &[(0, 0)]).is_err());
        assert!(two_triangles(3, &[(0, 1), (1, 0)]).is_err());
    }
}
