//! The central model (core: `geopriv::central`): private medians and
//! quantiles of a whole dataset, Smooth Noisy Max selection, and the
//! instance-based rates of Canard–Olivier's Algorithm 1. Thin functions;
//! the mathematics is in the core crate (docs/MATH.md §11).

use crate::{guard, GeoprivError};
use geopriv::central::instance_based::{InstanceBasedLaplace, LevelStructure};
use geopriv::central::median::{CentralNoise, MedianMechanism, SortedDataset};
use geopriv::central::noisy_max::{SmoothNoisyMax, SnmNoise};
use rand::rngs::StdRng;
use rand::{RngCore, SeedableRng};

/// Noise and constants of a central median/quantile release.
///
/// Python: `CentralNoiseKind.POLY_PLACE()`, `CentralNoiseKind.LAPLACE(delta)`.
#[derive(Debug, Clone, Copy, PartialEq, uniffi::Enum)]
pub enum CentralNoiseKind {
    /// PolyPlace, no budget split (ε-DP).
    PolyPlace,
    /// Student's t with 3 degrees of freedom (ε-DP).
    StudentT,
    /// Generalized Cauchy, k = 4 (ε-DP).
    Cauchy,
    /// Laplace, (ε, δ)-DP.
    Laplace {
        /// δ in (0, 1).
        delta: f64,
    },
    /// The lecture notes' Cauchy constants (reference).
    LectureCauchy,
    /// The lecture notes' Laplace constants (reference), total δ.
    LectureLaplace {
        /// δ in (0, 1).
        delta: f64,
    },
}

impl From<CentralNoiseKind> for CentralNoise {
    fn from(k: CentralNoiseKind) -> Self {
        match k {
            CentralNoiseKind::PolyPlace => CentralNoise::PolyPlace,
            CentralNoiseKind::StudentT => CentralNoise::STUDENT_T,
            CentralNoiseKind::Cauchy => CentralNoise::CAUCHY,
            CentralNoiseKind::Laplace { delta } => CentralNoise::Laplace { delta },
            CentralNoiseKind::LectureCauchy => CentralNoise::LectureCauchy { k: 4.0 },
            CentralNoiseKind::LectureLaplace { delta } => CentralNoise::LectureLaplace { delta },
        }
    }
}

fn rng(seed: Option<u64>) -> Box<dyn RngCore> {
    match seed {
        Some(s) => Box::new(StdRng::seed_from_u64(s)),
        None => Box::new(geopriv::SecureRng::new()),
    }
}

/// Release the `quantile`-quantile (rank max(1, ⌈q n⌉)) of `values`, each
/// in [0, `lambda`], with budget ε: x_m + S*_β(x) · Z. Secure randomness
/// unless `seed` is given.
#[uniffi::export]
pub fn central_quantile(
    values: Vec<f64>,
    lambda: f64,
    quantile: f64,
    epsilon: f64,
    noise: CentralNoiseKind,
    seed: Option<u64>,
) -> Result<f64, GeoprivError> {
    guard(|| {
        let mech = MedianMechanism::new(noise.into(), epsilon, lambda)?;
        Ok(mech.release_quantile(&values, quantile, rng(seed).as_mut())?)
    })
}

/// The exact β-smooth sensitivity of the `quantile`-quantile of `values`
/// in [0, `lambda`] (data-dependent: not private by itself).
#[uniffi::export]
pub fn central_smooth_sensitivity(
    values: Vec<f64>,
    lambda: f64,
    quantile: f64,
    beta: f64,
) -> Result<f64, GeoprivError> {
    guard(|| {
        let d = SortedDataset::new(&values, lambda)?;
        let m = d.quantile_rank(quantile)?;
        Ok(d.smooth_sensitivity(m, beta)?)
    })
}

/// The β at which Smooth Noisy Max needs its smooth bound: the Laplace
/// variant when `laplace_delta` is given, else Student's t.
#[uniffi::export]
pub fn smooth_noisy_max_beta(
    epsilon: f64,
    laplace_delta: Option<f64>,
) -> Result<f64, GeoprivError> {
    guard(|| Ok(snm(epsilon, laplace_delta)?.beta()))
}

fn snm(epsilon: f64, laplace_delta: Option<f64>) -> Result<SmoothNoisyMax, GeoprivError> {
    let v = match laplace_delta {
        Some(delta) => SnmNoise::Laplace { delta },
        None => SnmNoise::StudentT,
    };
    Ok(SmoothNoisyMax::new(v, epsilon)?)
}

/// Smooth Noisy Max: the index of the selected candidate, given the
/// utilities and a smooth upper bound on their local sensitivity computed
/// at `smooth_noisy_max_beta(epsilon, laplace_delta)`.
#[uniffi::export]
pub fn smooth_noisy_max_select(
    utilities: Vec<f64>,
    smooth_sensitivity: f64,
    epsilon: f64,
    laplace_delta: Option<f64>,
    seed: Option<u64>,
) -> Result<u64, GeoprivError> {
    guard(|| {
        let s = snm(epsilon, laplace_delta)?;
        Ok(s.select(&utilities, smooth_sensitivity, rng(seed).as_mut())? as u64)
    })
}

/// Canard–Olivier Algorithm 1 on a chain of levels with the given sorted
/// local sensitivities: the Laplace scale 1/λ_k of every level.
#[uniffi::export]
pub fn instance_based_chain_scales(
    local_sensitivities: Vec<f64>,
    epsilon: f64,
    delta: f64,
) -> Result<Vec<f64>, GeoprivError> {
    guard(|| {
        let levels = LevelStructure::chain(local_sensitivities)?;
        let m = InstanceBasedLaplace::new(&levels, epsilon, delta)?;
        Ok((0..levels.len()).map(|k| m.scale(k)).collect())
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bad_input_raises() {
        assert!(
            central_quantile(vec![], 1.0, 0.5, 1.0, CentralNoiseKind::PolyPlace, Some(1)).is_err()
        );
        assert!(central_quantile(
            vec![2.0],
            1.0,
            0.5,
            1.0,
            CentralNoiseKind::PolyPlace,
            Some(1)
        )
        .is_err());
        assert!(central_quantile(
            vec![0.5],
            1.0,
            0.5,
            0.0,
            CentralNoiseKind::PolyPlace,
            Some(1)
        )
        .is_err());
        assert!(smooth_noisy_max_select(vec![], 1.0, 1.0, None, Some(1)).is_err());
        let y = central_quantile(
            vec![0.2, 0.5, 0.6],
            1.0,
            0.5,
            1.0,
            CentralNoiseKind::StudentT,
            Some(1),
        )
        .unwrap();
        assert!(y.is_finite());
    }
}
