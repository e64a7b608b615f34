//! Server-side debiasing of district shares from one noisy location per
//! device (std only; docs/MATH.md §13.8), and the error model the planner
//! ranks it by.
//!
//! A device at x sends x̃ = x + N (planar Laplace at the per-device ε);
//! the server's plain estimate is o_j = mean over reports of f_j(x̃), whose
//! expectation is the membership smoothed by the noise, not the truth
//! F_j = mean f_j(x). Model: the devices of district i are spread uniformly
//! over it (t_i the share of devices in district i, Σ t_i = 1). Then
//!
//! ```text
//! E o_j = Σ_i t_i A_ij,   A_ij = E[f_j(x + N)], x uniform on P_i,
//! F_j   = Σ_i t_i B_ij,   B_ij = E[f_j(x)],     x uniform on P_i,
//! ```
//!
//! and the debiased estimate is F̂ = Bᵀ t̂ with Aᵀ t̂ = o (linear, unbiased
//! under the model; post-processing of the reports, so the per-device
//! total stays ε). A and B are integrals over the district geometry,
//! computed by seeded Monte Carlo (public: geometry, ε and the seed only):
//! M pairs (x, N) per district, each entry an average of M values in
//! [0, 1], so by Hoeffding and a union bound over the 2m² entries every
//! entry is within sqrt(ln(4m²/β)/(2M)) of its integral with probability
//! at least 1 − β over the seed ([`DistrictChannel::entry_error_bound`],
//! β = 1e-6).

use super::districts::DistrictSet;
use crate::error::{positive_finite, Error, Result};
use crate::noise::PlanarLaplace;
use crate::query::Query;
use rand::distr::Distribution;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha20Rng;
use std::vec::Vec;

/// The most districts the channel is computed for (its matrices are m x m
/// and the solve is O(m³)): 512.
pub const MAX_CHANNEL_DISTRICTS: usize = 512;

/// Public seed of the standard channel ([`DistrictChannel::standard`]).
pub const PLANNER_CHANNEL_SEED: u64 = 0x6469_7374_7269_6374;

/// Failure probability of the stated entry error bound.
pub const CHANNEL_BETA: f64 = 1e-6;

/// The channel of noise a priori through a district set (module docs).
#[derive(Clone, Debug, PartialEq)]
pub struct DistrictChannel {
    m: usize,
    samples: usize,
    /// A_ij, row-major (i = true district, j = reported membership).
    a: Vec<f64>,
    /// B_ij, row-major.
    b: Vec<f64>,
    /// E_x Var_N f_j(x + N) for x uniform on P_i, row-major (the noise's
    /// variance of one report, estimated from two draws per location).
    a2: Vec<f64>,
    /// Area shares of the districts (the prior when no reports are known).
    area_share: Vec<f64>,
}

impl DistrictChannel {
    /// A and B by Monte Carlo with `samples` pairs per district (at least
    /// 100), seeded by `seed`.
    ///
    /// ```
    /// use geo::polygon;
    /// use geopriv::map::{DistrictChannel, DistrictSet};
    /// let a = polygon![(x: 0.0, y: 0.0), (x: 100.0, y: 0.0), (x: 100.0, y: 100.0), (x: 0.0, y: 100.0)];
    /// let b = polygon![(x: 100.0, y: 0.0), (x: 200.0, y: 0.0), (x: 200.0, y: 100.0), (x: 100.0, y: 100.0)];
    /// let set = DistrictSet::new(vec![("a".into(), a.into()), ("b".into(), b.into())], 10.0)?;
    /// let ch = DistrictChannel::new(&set, 0.05, 2_000, 1)?;
    /// // Noise of scale 20 m leaks some of district a's devices into b.
    /// assert!(ch.a(0, 1) > 0.05 && ch.a(0, 0) < 0.95);
    /// // Every entry within 0.065 of its integral (probability 1 - 1e-6).
    /// assert!(ch.entry_error_bound() < 0.065);
    /// # Ok::<(), geopriv::Error>(())
    /// ```
    pub fn new(set: &DistrictSet, epsilon: f64, samples: usize, seed: u64) -> Result<Self> {
        let epsilon = positive_finite("epsilon", epsilon)?;
        let m = set.len();
        if m > MAX_CHANNEL_DISTRICTS {
            return Err(Error::LimitExceeded {
                what: "districts for the debiasing channel",
                requested: m as u64,
                limit: MAX_CHANNEL_DISTRICTS as u64,
            });
        }
        if !(100..=10_000_000).contains(&samples) {
            return Err(Error::InvalidParameter {
                name: "samples",
                value: samples as f64,
                requirement: "between 100 and 10^7",
            });
        }
        let noise = PlanarLaplace::new(epsilon)?;
        let mut rng = ChaCha20Rng::seed_from_u64(seed);
        let (mut a, mut b, mut a2) = (vec![0.0; m * m], vec![0.0; m * m], vec![0.0; m * m]);
        let mut area = vec![0.0; m];
        let inv = 1.0 / samples as f64;
        for (i, region) in set.regions().iter().enumerate() {
            let bb = super::districts::region_bbox(region);
            let (mut drawn, mut accepted) = (0u64, 0usize);
            while accepted < samples {
                drawn += 1;
                if drawn > 1_000 * samples as u64 {
                    return Err(Error::InvalidParameter {
                        name: "district",
                        value: i as f64,
                        requirement: "covering at least 1/1000 of its bounding box",
                    });
                }
                let x = [
                    rng.random_range(bb[0]..=bb[1]),
                    rng.random_range(bb[2]..=bb[3]),
                ];
                if region.signed_distance(&x)? <= 0.0 {
                    continue;
                }
                accepted += 1;
                // Two noise draws per location: their product estimates
                // E_x[(E_N f_j(x + N))²], so a2 - a12 is the noise's own
                // variance E_x Var_N f_j(x + N) (the spread of f_j(x) over
                // the devices is not an error: the truth is of the same
                // devices).
                let (z1, z2) = (noise.sample(&mut rng), noise.sample(&mut rng));
                let y1 = [x[0] + z1[0], x[1] + z1[1]];
                let y2 = [x[0] + z2[0], x[1] + z2[1]];
                for (j, r) in set.regions().iter().enumerate() {
                    let (f1, f2) = (r.value(&y1)?, r.value(&y2)?);
                    a[i * m + j] += 0.5 * (f1 + f2) * inv;
                    a2[i * m + j] += (0.5 * (f1 * f1 + f2 * f2) - f1 * f2) * inv;
                    b[i * m + j] += r.value(&x)? * inv;
                }
            }
            area[i] = (bb[1] - bb[0]) * (bb[3] - bb[2]) * samples as f64 / drawn as f64;
        }
        let total: f64 = area.iter().sum();
        let area_share = area.iter().map(|v| v / total).collect();
        Ok(Self {
            m,
            samples,
            a,
            b,
            a2,
            area_share,
        })
    }

    /// The channel the planner ranks with and the server debiases with:
    /// M = clamp(2·10⁷/m², 100, 4000) samples per district and the public
    /// seed [`PLANNER_CHANNEL_SEED`].
    pub fn standard(set: &DistrictSet, epsilon: f64) -> Result<Self> {
        let m = set.len() as f64;
        let samples = (2e7 / (m * m)).clamp(100.0, 4_000.0) as usize;
        Self::new(set, epsilon, samples, PLANNER_CHANNEL_SEED)
    }

    /// A_ij: the expected reported membership in district j of a device
    /// uniform on district i.
    pub fn a(&self, i: usize, j: usize) -> f64 {
        self.a[i * self.m + j]
    }

    /// B_ij: the expected true membership in district j of a device uniform
    /// on district i.
    pub fn b(&self, i: usize, j: usize) -> f64 {
        self.b[i * self.m + j]
    }

    /// The districts' shares of the total area (Monte Carlo).
    pub fn area_shares(&self) -> &[f64] {
        &self.area_share
    }

    /// Every entry of A and B is within this of its integral with
    /// probability at least 1 − [`CHANNEL_BETA`] over the seed:
    /// sqrt(ln(4m²/β)/(2M)) (Hoeffding, union bound over 2m² entries).
    pub fn entry_error_bound(&self) -> f64 {
        let m = self.m as f64;
        ((4.0 * m * m / CHANNEL_BETA).ln() / (2.0 * self.samples as f64)).sqrt()
    }

    /// t̂ with Aᵀ t̂ = o: the district shares of the devices (may be
    /// negative by noise; sums to about 1).
    pub fn shares(&self, observed: &[f64]) -> Result<Vec<f64>> {
        self.check(observed)?;
        let mut at = vec![0.0; self.m * self.m];
        for i in 0..self.m {
            for j in 0..self.m {
                at[j * self.m + i] = self.a[i * self.m + j];
            }
        }
        solve(self.m, at, observed.to_vec())
    }

    /// The debiased memberships F̂ = Bᵀ t̂ from the plain a-priori estimate
    /// o (mean f_j(x̃) over the reports).
    pub fn debias(&self, observed: &[f64]) -> Result<Vec<f64>> {
        let t = self.shares(observed)?;
        Ok(self.through(&self.b, &t))
    }

    /// [`debias`](Self::debias) with standard errors: the plain estimate's
    /// per-district standard errors propagated through M = Bᵀ A⁻ᵀ with
    /// the cross-covariances left out (as in [`predict`](Self::predict)):
    /// se_k = sqrt(Σ_j M_kj² se_j²). Model error (non-uniform devices
    /// within a district) is not included.
    pub fn debias_with_errors(
        &self,
        observed: &[f64],
        standard_errors: &[f64],
    ) -> Result<(Vec<f64>, Vec<f64>)> {
        self.check(standard_errors)?;
        let values = self.debias(observed)?;
        let mut var = vec![0.0; self.m];
        for (j, se) in standard_errors.iter().enumerate() {
            let mut e = vec![0.0; self.m];
            e[j] = 1.0;
            let col = self.through(&self.b, &self.shares(&e)?);
            for (v, c) in var.iter_mut().zip(&col) {
                *v += c * c * se * se;
            }
        }
        Ok((values, var.iter().map(|v| v.sqrt()).collect()))
    }

    /// Whether the debiased shares are predicted better than the plain ones
    /// for these reports: [`predict`](Self::predict) at n with the shares
    /// t̂ estimated from the reports themselves ([`shares`](Self::shares)
    /// of the plain estimate, clamped at 0 and renormalised) instead of the
    /// area shares (the devices' spread over the districts drives the plain
    /// estimate's bias).
    pub fn prefer_debiased(&self, observed: &[f64], n: f64) -> Result<bool> {
        let t = self
            .shares(observed)
            .unwrap_or_else(|_| self.area_share.clone());
        let (pv, pb2, dv) = self.predict(n, Some(&t))?;
        Ok(dv < pv + pb2)
    }

    /// Predicted ASE (mean over districts of the squared error) at n
    /// devices with district shares t (the area shares when `None`),
    /// against the truth of the same devices: for the plain estimate o
    /// (the noise's variance E_x Var_N f_j(x + N)/n under the model plus its squared
    /// bias Σ_i t_i (A_ij − B_ij)) and for the debiased one (its variance,
    /// the per-district variances of o propagated through Bᵀ A⁻ᵀ with the
    /// cross-covariances left out; no bias under the model). Returns
    /// (plain variance, plain bias², debiased variance); the last is
    /// infinite when the channel cannot be inverted at this ε.
    pub fn predict(&self, n: f64, shares: Option<&[f64]>) -> Result<(f64, f64, f64)> {
        let n = positive_finite("n", n)?;
        let t: Vec<f64> = match shares {
            Some(s) => {
                self.check(s)?;
                let c: Vec<f64> = s.iter().map(|v| v.max(0.0)).collect();
                let sum: f64 = c.iter().sum();
                if sum > 0.0 {
                    c.iter().map(|v| v / sum).collect()
                } else {
                    self.area_share.clone()
                }
            }
            None => self.area_share.clone(),
        };
        let m = self.m as f64;
        let mean_a = self.through(&self.a, &t);
        let mean_b = self.through(&self.b, &t);
        let var_o: Vec<f64> = self
            .through(&self.a2, &t)
            .iter()
            .map(|v| v.max(0.0) / n)
            .collect();
        let plain_var = var_o.iter().sum::<f64>() / m;
        let plain_bias2 = mean_a
            .iter()
            .zip(&mean_b)
            .map(|(a, b)| (a - b) * (a - b))
            .sum::<f64>()
            / m;
        // Rows of M = Bᵀ A⁻ᵀ: F̂_k = Σ_j M_kj o_j. Column j of A⁻ᵀ is the
        // solve of Aᵀ y = e_j.
        let mut debiased = 0.0;
        for (j, vj) in var_o.iter().enumerate() {
            let mut e = vec![0.0; self.m];
            e[j] = 1.0;
            let Ok(col) = self.shares(&e) else {
                // Not invertible at this ε: no debiased estimate.
                return Ok((plain_var, plain_bias2, f64::INFINITY));
            }; // A⁻ᵀ e_j
            let mcol = self.through(&self.b, &col); // M e_j
            debiased += vj * mcol.iter().map(|v| v * v).sum::<f64>();
        }
        Ok((plain_var, plain_bias2, debiased / m))
    }

    /// Σ_i t_i X_ij for each j.
    fn through(&self, x: &[f64], t: &[f64]) -> Vec<f64> {
        let mut out = vec![0.0; self.m];
        for (i, ti) in t.iter().enumerate() {
            for (j, o) in out.iter_mut().enumerate() {
                *o += ti * x[i * self.m + j];
            }
        }
        out
    }

    fn check(&self, v: &[f64]) -> Result<()> {
        if v.len() != self.m || v.iter().any(|x| !x.is_finite()) {
            return Err(Error::InvalidParameter {
                name: "district values",
                value: v.len() as f64,
                requirement: "one finite value per district",
            });
        }
        Ok(())
    }
}

/// Solve the m x m system `a` x = `rhs` (row-major) by Gaussian elimination
/// with partial pivoting; a pivot below 1e-12 of the largest entry is a
/// typed error (the channel is not invertible at this ε: districts much
/// smaller than 1/ε).
fn solve(m: usize, mut a: Vec<f64>, mut rhs: Vec<f64>) -> Result<Vec<f64>> {
    let scale = a.iter().fold(0.0f64, |s, v| s.max(v.abs()));
    for col in 0..m {
        let piv = (col..m)
            .max_by(|&r, &s| a[r * m + col].abs().total_cmp(&a[s * m + col].abs()))
            .unwrap_or(col);
        let pivot = a[piv * m + col].abs();
        if pivot.is_nan() || pivot <= 1e-12 * scale {
            return Err(Error::InvalidParameter {
                name: "epsilon",
                value: f64::NAN,
                requirement: "large enough for the district channel to be invertible",
            });
        }
        if piv != col {
            for k in 0..m {
                a.swap(col * m + k, piv * m + k);
            }
            rhs.swap(col, piv);
        }
        for r in col + 1..m {
            let f = a[r * m + col] / a[col * m + col];
            if f != 0.0 {
                for k in col..m {
                    a[r * m + k] -= f * a[col * m + k];
                }
                rhs[r] -= f * rhs[col];
            }
        }
    }
    let mut x = vec![0.0; m];
    for r in (0..m).rev() {
        let s: f64 = (r + 1..m).map(|k| a[r * m + k] * x[k]).sum();
        x[r] = (rhs[r] - s) / a[r * m + r];
    }
    Ok(x)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::map::{MapAggregator, MapMechanism, MapRelease, QuerySet};
    use rand::rngs::StdRng;

    use crate::map::districts::tests::grid;

    /// Mean squared difference of an estimate from the truth.
    fn ase_of(e: &[f64], truth: &[f64]) -> f64 {
        let d = e.iter().zip(truth).map(|(a, b)| (a - b) * (a - b));
        d.sum::<f64>() / truth.len() as f64
    }

    /// F_j = mean f_j(x) over the devices.
    fn truth_of(set: &DistrictSet, devices: &[[f64; 2]]) -> Vec<f64> {
        let mut truth = vec![0.0; set.len()];
        for x in devices {
            for (t, v) in truth.iter_mut().zip(set.values(x).unwrap()) {
                *t += v / devices.len() as f64;
            }
        }
        truth
    }

    #[test]
    fn solve_inverts() {
        let a = vec![2.0, 1.0, 0.0, 1.0, 3.0, 1.0, 0.0, 1.0, 4.0];
        let x = solve(3, a, vec![3.0, 5.0, 5.0]).unwrap();
        for (v, e) in x.iter().zip([1.0, 1.0, 1.0]) {
            assert!((v - e).abs() < 1e-12, "{x:?}");
        }
        assert!(solve(2, vec![1.0, 2.0, 2.0, 4.0], vec![1.0, 1.0]).is_err());
    }

    /// Devices uniform over a 3 x 3 grid with a skewed share per district:
    /// the plain a-priori estimate is biased (devices leak into their
    /// neighbours), the debiased one is not: its error is within noise
    /// and several times below the plain one's, and the channel's
    /// predictions match the measured errors within 2x.
    #[test]
    fn debiasing_removes_the_leak_into_neighbours() {
        let (side, w, eps) = (100.0, 20.0, 0.05);
        let set = DistrictSet::new(grid(3, 3, side), w).unwrap();
        let ch = DistrictChannel::new(&set, eps, 20_000, 7).unwrap();
        let weights = [8.0, 1.0, 1.0, 1.0, 4.0, 1.0, 1.0, 1.0, 1.0];
        let total: f64 = weights.iter().sum();
        let mut rng = StdRng::seed_from_u64(3);
        let mut devices = Vec::new();
        for (k, wk) in weights.iter().enumerate() {
            let (i, j) = ((k / 3) as f64, (k % 3) as f64);
            for _ in 0..(*wk as usize * 4_000) {
                devices.push([
                    side * (i + rng.random::<f64>()),
                    side * (j + rng.random::<f64>()),
                ]);
            }
        }
        let n = devices.len() as f64;
        let truth = truth_of(&set, &devices);
        let qs = QuerySet::Districts(set.clone());
        let release = MapRelease::new(qs.clone(), MapMechanism::APriori, eps).unwrap();
        let mut agg = MapAggregator::new(qs, MapMechanism::APriori, eps).unwrap();
        for x in &devices {
            agg.add(&release.release_unmetered(x, &mut rng).unwrap())
                .unwrap();
        }
        let plain = agg.estimate(Some(0.0)).unwrap().values;
        let debiased = ch.debias(&plain).unwrap();
        // The server's default map (`planned_estimate`, what `geopriv map
        // aggregate` and the bindings return) is the planner's pick, here
        // the shares debiased through the standard channel, with errors.
        let (planned, p) = agg.planned_estimate().unwrap();
        assert_eq!(p.unwrap().pick().name, "a-priori debiased");
        let standard = DistrictChannel::standard(&set, eps).unwrap();
        let plain_est = agg.estimate(None).unwrap();
        let (v, se) = standard
            .debias_with_errors(&plain_est.values, &plain_est.standard_errors)
            .unwrap();
        assert_eq!(planned.values, v);
        assert_eq!(planned.standard_errors, se);
        for ((a, t), s) in v.iter().zip(&truth).zip(&se) {
            assert!((a - t).abs() <= 5.0 * s, "{a} vs {t} ± {s}");
        }
        let ase = |e: &[f64]| ase_of(e, &truth);
        let (pv, pb2, dv) = ch.predict(n, Some(&weights.map(|w| w / total))).unwrap();
        let (ap, ad) = (ase(&plain), ase(&debiased));
        assert!(ad < ap / 4.0, "plain {ap:e}, debiased {ad:e}");
        assert!(
            ap > 0.5 * (pv + pb2) && ap < 2.0 * (pv + pb2),
            "plain {ap:e} vs {:e}",
            pv + pb2
        );
        // The debiased error is noise plus the Monte Carlo error of the
        // channel; it stays within a few times its predicted variance.
        assert!(ad < 5.0 * dv + 1e-5, "debiased {ad:e} vs predicted {dv:e}");
        assert!(ch.entry_error_bound() < 0.04);
    }

    /// The planner's pick for districts (and, for noise a priori, the
    /// server's plain-or-debiased map) is within 1.5x of the best measured
    /// ASE over the mechanisms at one per-device ε (issue 24 item 4), at
    /// n = 600 and 6,000, from noise much smaller than the ramp (ε = 1) to
    /// noise twice a district's width (ε = 0.005); measured worst 1.36x.
    /// Round 3's planner charged plain a priori 2/(εW) and picked vector
    /// Laplace at every ε here.
    #[test]
    fn district_planner_pick_is_within_1_5x_of_the_best_measured() {
        for n in [600usize, 6_000] {
            sweep(n);
        }
    }

    fn sweep(n: usize) {
        use crate::map::plan;
        let (side, w) = (100.0, 20.0);
        let set = DistrictSet::new(grid(3, 3, side), w).unwrap();
        let qs = QuerySet::Districts(set.clone());
        let mut rng = StdRng::seed_from_u64(11);
        // A skewed population: a dense corner district, the rest sparse.
        let devices: Vec<[f64; 2]> = (0..n)
            .map(|k| {
                let s = if k % 3 == 0 { 100.0 } else { 300.0 };
                [s * rng.random::<f64>(), s * rng.random::<f64>()]
            })
            .collect();
        let truth = truth_of(&set, &devices);
        let ase = |e: &[f64]| ase_of(e, &truth);
        for eps in [0.005, 0.02, 0.1, 1.0] {
            let p = plan(&qs, eps, n as u64, None).unwrap();
            let mut measured: Vec<(String, f64)> = Vec::new();
            let mut server_map = f64::NAN;
            for mech in [
                MapMechanism::VectorLaplace,
                MapMechanism::Composition,
                MapMechanism::APriori,
            ] {
                let release = MapRelease::new(qs.clone(), mech, eps).unwrap();
                let mut agg = MapAggregator::new(qs.clone(), mech, eps).unwrap();
                for x in &devices {
                    agg.add(&release.release_unmetered(x, &mut rng).unwrap())
                        .unwrap();
                }
                let est = agg.estimate(Some(0.0)).unwrap().values;
                if mech == MapMechanism::APriori {
                    let ch = DistrictChannel::standard(&set, eps).unwrap();
                    measured.push(("a-priori debiased".into(), ase(&ch.debias(&est).unwrap())));
                    measured.push(("a-priori λ=0.0".into(), ase(&est)));
                    // What the server returns for the a-priori reports.
                    server_map = ase(&agg.planned_estimate().unwrap().0.values);
                } else {
                    measured.push((mech.name(), ase(&est)));
                }
            }
            let best = measured.iter().map(|m| m.1).fold(f64::INFINITY, f64::min);
            // The planner picks the mechanism before any report; for noise
            // a priori the server then picks plain or debiased from the
            // reports (`planned_estimate`): that map is what is measured.
            let pick = &p.pick().name;
            let got = if pick.starts_with("a-priori") {
                server_map
            } else {
                measured
                    .iter()
                    .find(|m| &m.0 == pick)
                    .unwrap_or_else(|| panic!("pick {pick} not measured: {}", p.line))
                    .1
            };
            assert!(
                got <= 1.5 * best,
                "ε {eps}: pick {pick} {got:e}, best {best:e}: {measured:?}; {}",
                p.line
            );
        }
    }
}
