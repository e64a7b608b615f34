//! The central model: a trusted curator holds a whole dataset and publishes
//! statistics of it with differential privacy (`docs/MATH.md §11`).
//!
//! With the Hamming metric on datasets (two datasets are neighbours when they
//! differ in one record), geo-privacy is ε-DP, and the smooth-sensitivity
//! calibrations of the local model hold with distance d = 1 between
//! neighbours and growth exp(β k) over k record changes.
//!
//! | module | what | guarantee |
//! |---|---|---|
//! | [`median`] | median and quantiles of values in [0, Λ], exact β-smooth sensitivity in O(n log n), PolyPlace / Student's t / generalized Cauchy / Laplace releases | ε-DP or (ε, δ)-DP |
//! | [`noisy_max`] | Smooth Noisy Max selection (Chaves et al.), exponential mechanism, permute-and-flip | (ε, δ)-DP (Laplace) or ε-DP |
//! | [`instance_based`] | Canard–Olivier Algorithm 1: Laplace noise with a rate per sensitivity level | (ε, δ)-DP |
//! | [`audit`] (std) | exact output densities over neighbouring datasets, and a sampling tester | checks the above |
//!
//! ```
//! use geopriv::central::median::{MedianMechanism, CentralNoise};
//! use rand::SeedableRng;
//!
//! let trips_km = [1.2, 3.4, 2.2, 8.9, 4.1, 2.7, 3.3, 5.0, 2.9];
//! let mech = MedianMechanism::new(CentralNoise::PolyPlace, 1.0, 50.0)?; // ε = 1, Λ = 50 km
//! let mut rng = rand::rngs::StdRng::seed_from_u64(7);
//! let released = mech.release_quantile(&trips_km, 0.5, &mut rng)?;
//! assert!(released.is_finite());
//! # Ok::<(), geopriv::Error>(())
//! ```

#[cfg(feature = "std")]
pub mod audit;
pub mod instance_based;
pub mod median;
pub mod noisy_max;

use crate::error::{Error, Result};

/// Check ε: finite and > 0.
pub(crate) fn check_epsilon(epsilon: f64) -> Result<f64> {
    crate::error::positive_finite("epsilon", epsilon)
}

/// Check δ: strictly between 0 and 1.
pub(crate) fn check_delta(delta: f64) -> Result<f64> {
    if delta > 0.0 && delta < 1.0 {
        Ok(delta)
    } else {
        Err(Error::InvalidParameter {
            name: "delta",
            value: delta,
            requirement: "strictly between 0 and 1",
        })
    }
}

use crate::noise::{GeneralizedCauchy, Laplace, PolyPlace, StudentT};
use rand::distr::Distribution;
use rand::Rng;

/// A centred, symmetric noise distribution from [`crate::noise`], used by
/// the central releases as `value + S · Z` (the distribution already holds
/// the calibration's 1/η, so its scale is in units of the sensitivity S).
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Noise {
    /// PolyPlace(s, α).
    PolyPlace(PolyPlace),
    /// Student's t.
    StudentT(StudentT),
    /// Density ∝ 1/(1 + |z/σ|^k).
    Cauchy(GeneralizedCauchy),
    /// Laplace(b).
    Laplace(Laplace),
}

impl Noise {
    /// ln of the density at `z`.
    pub fn ln_pdf(&self, z: f64) -> f64 {
        match self {
            Noise::PolyPlace(n) => n.ln_pdf(z),
            Noise::StudentT(n) => n.ln_pdf(z),
            Noise::Cauchy(n) => n.ln_pdf(z),
            Noise::Laplace(n) => n.ln_pdf(z),
        }
    }

    /// The CDF at `z`.
    pub fn cdf(&self, z: f64) -> f64 {
        match self {
            Noise::PolyPlace(n) => n.cdf(z),
            Noise::StudentT(n) => n.cdf(z),
            Noise::Cauchy(n) => n.cdf(z),
            Noise::Laplace(n) => n.cdf(z),
        }
    }

    /// The variance (`None` when infinite).
    pub fn variance(&self) -> Option<f64> {
        match self {
            Noise::PolyPlace(n) => n.variance(),
            Noise::StudentT(n) => n.variance(),
            Noise::Cauchy(n) => n.variance(),
            Noise::Laplace(n) => n.variance(),
        }
    }

    /// One exact draw.
    pub fn sample<R: Rng + ?Sized>(&self, rng: &mut R) -> f64 {
        match self {
            Noise::PolyPlace(n) => n.sample(rng),
            Noise::StudentT(n) => n.sample(rng),
            Noise::Cauchy(n) => n.sample(rng),
            Noise::Laplace(n) => n.sample(rng),
        }
    }
}

/// Deliberate calibration faults, for showing that the audits catch a
/// broken mechanism. Never use anything but [`Fault::None`] in a release.
#[derive(Clone, Copy, Debug, PartialEq, Default)]
pub enum Fault {
    /// The correct mechanism.
    #[default]
    None,
    /// Scale the noise to half the smooth sensitivity.
    HalveSensitivity,
    /// Scale the noise to `factor` × the smooth sensitivity.
    ShrinkSensitivity(f64),
    /// Compute the smooth sensitivity at `factor` × the β the calibration
    /// assumes (a less smooth bound than the noise can absorb).
    WrongBeta(f64),
}

/// ∫_a^b f by adaptive Simpson quadrature on 64 starting panels, absolute
/// tolerance `tol` (used for exact selection probabilities and audits).
pub(crate) fn integrate<F: Fn(f64) -> f64>(f: &F, a: f64, b: f64, tol: f64) -> f64 {
    crate::noise::quad::integrate_panels(f, a, b, tol, 30, 0.0)
}
