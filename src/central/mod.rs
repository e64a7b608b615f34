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

use crate::mechanism::NoiseShape;
use crate::noise::{GeneralizedCauchy, Laplace, PolyPlace, StudentT};
use crate::release_grid::FloatingPointGuarantee;
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

    /// The shape (the same family at unit scale) and the scale: Z = scale · Z₁.
    pub fn shape_and_scale(&self) -> (NoiseShape, f64) {
        match self {
            Noise::PolyPlace(n) => (NoiseShape::PolyPlace { alpha: n.alpha() }, n.s()),
            Noise::StudentT(n) => (NoiseShape::StudentT { dof: n.dof() }, n.scale()),
            Noise::Cauchy(n) => (NoiseShape::GeneralizedCauchy { k: n.k() }, n.scale()),
            Noise::Laplace(n) => (NoiseShape::Laplace, n.scale()),
        }
    }

    /// The same family at unit scale (what the release samples, so the
    /// floating-point analysis of docs/MATH.md §8.1 applies as it is).
    pub fn unit(&self) -> Result<Noise> {
        Ok(match self {
            Noise::PolyPlace(n) => Noise::PolyPlace(PolyPlace::new(1.0, n.alpha())?),
            Noise::StudentT(n) => Noise::StudentT(StudentT::new(n.dof(), 1.0)?),
            Noise::Cauchy(n) => Noise::Cauchy(GeneralizedCauchy::new(n.k(), 1.0)?),
            Noise::Laplace(_) => Noise::Laplace(Laplace::new(1.0)?),
        })
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

/// Smallest noise scale of a central release as a fraction of the grid's
/// reference scale σ_ref (2^-12, [`crate::release_grid::SCALE_FLOOR_BITS`],
/// the floor the local releases use too): below it, rounding f(x)
/// (|f| <= 64 σ_ref) could move a cell boundary by more than η allows
/// (`docs/MATH.md §11.5`, §8.4). The scales are floored there; a constant
/// floor keeps a smooth bound β-smooth and keeps Algorithm 1's rate
/// conditions (§11.5).
pub const SCALE_FLOOR_FRACTION: f64 = 1.0 / 4096.0;

/// The public release grid of a central release and the floating-point
/// guarantee of its implementation (`docs/MATH.md §11.5`, after §8.1).
///
/// A release is y = snap(f(x) + σ(x) Z₁) with Z₁ the unit-scale noise
/// drawn by the exact samplers of [`crate::noise`], σ(x) computed once, and
/// snap to the nearest multiple of Λ_grid = 2^⌊log2 σ_ref⌋ 2^-k, where
/// σ_ref = max(σ_max, F/64), σ_max the largest scale the public parameters
/// allow and F the public bound on |f| (Λ for a quantile). The implemented
/// release satisfies ln(P_x(c)/P_x'(c)) <= ε + η for every cell c within
/// z_max noise scales of f(x), and the rest has mass at most δ + δ_fp.
///
/// ```
/// use geopriv::central::median::{CentralNoise, MedianMechanism};
/// let m = MedianMechanism::new(CentralNoise::PolyPlace, 1.0, 50.0)?;
/// let g = m.grid();
/// assert!(g.fp.eta <= 1e-8 && g.fp.delta_fp <= 1.000_001e-15);
/// assert_eq!(g.grid, 2f64.powi(g.grid.log2() as i32)); // a power of two
/// # Ok::<(), geopriv::Error>(())
/// ```
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct CentralGrid {
    /// Λ_grid, a power of two.
    pub grid: f64,
    /// σ_ref = max(σ_max, F/64).
    pub reference_scale: f64,
    /// k, z_max, η, δ_fp of the noise shape (docs/MATH.md §8.1; for a
    /// relative grid k is the p of [`FloatingPointGuarantee::relative_for_shape`]).
    pub fp: FloatingPointGuarantee,
    /// The grid is relative ([`crate::release_grid::snap_relative`]):
    /// cells of width max(`grid`, 2^⌊log2|y|⌋ 2^-p), so `grid` is the
    /// smallest cell, 2^⌊log2 F⌋ 2^-p (docs/MATH.md §8.4).
    pub relative: bool,
}

impl CentralGrid {
    /// The grid for noise `shape` with largest scale `sigma_max` and public
    /// bound `value_bound` on |f(x)|; refused when either is not a finite
    /// positive normal number or the grid underflows.
    pub(crate) fn new(shape: NoiseShape, sigma_max: f64, value_bound: f64) -> Result<Self> {
        let reference_scale = sigma_max.max(value_bound / crate::release_grid::VALUE_SPAN_BOUND);
        crate::error::release_number("largest noise scale", reference_scale, false)?;
        let fp = FloatingPointGuarantee::for_shape(Some(shape));
        // 2^⌊log2 σ_ref⌋: σ_ref with its mantissa bits cleared.
        let power = f64::from_bits(reference_scale.to_bits() & 0xFFF0_0000_0000_0000);
        let grid = crate::error::release_number("grid", power * fp.grid_fraction(), false)?;
        Ok(Self {
            grid,
            reference_scale,
            fp,
            relative: false,
        })
    }

    /// The relative grid for noise `shape` (docs/MATH.md §8.4): cells of
    /// width max(Λ_min, 2^⌊log2|y|⌋ 2^-p), Λ_min = 2^⌊log2 F⌋ 2^-p with F =
    /// `value_bound`; the scale floor still follows σ_ref = max(σ_max, F/64).
    /// Unlike the uniform grid it does not coarsen with the tail of the
    /// noise, so heavy tails (Student's t, Cauchy) keep cells of about
    /// 2^-20 of the value.
    pub(crate) fn new_relative(
        shape: NoiseShape,
        sigma_max: f64,
        value_bound: f64,
    ) -> Result<Self> {
        let reference_scale = sigma_max.max(value_bound / crate::release_grid::VALUE_SPAN_BOUND);
        crate::error::release_number("largest noise scale", reference_scale, false)?;
        crate::error::release_number("value bound", value_bound, false)?;
        let fp = FloatingPointGuarantee::relative_for_shape(shape);
        let power = |v: f64| f64::from_bits(v.to_bits() & 0x7FF0_0000_0000_0000);
        let mut smallest = power(value_bound) * fp.grid_fraction();
        if let NoiseShape::StudentT { .. } = shape {
            // Bailey's transform is quadratic at the centre (1 - W ≈ z²/2
            // for cos θ = 1), and W near 1 has resolution 2^-53: a cell
            // [0, Δz] holds about Δz² 2^52 keys. Cells of at least
            // 2^-10 σ_ref >= 2^-10 σ(x) hold >= 2^32 keys, so the key
            // rounding stays below 1e-9 of a cell (docs/MATH.md §8.4).
            smallest = smallest.max(power(reference_scale) * (1.0 / 1024.0));
        }
        let grid = crate::error::release_number("grid", smallest, false)?;
        Ok(Self {
            grid,
            reference_scale,
            fp,
            relative: true,
        })
    }

    /// The released value of a raw value (no checks): the cell it falls in.
    #[inline]
    pub(crate) fn snap_value(&self, raw: f64) -> f64 {
        if self.relative {
            crate::release_grid::snap_relative(raw, self.grid, self.fp.grid_bits)
        } else {
            crate::mechanism::snap(raw, self.grid)
        }
    }

    /// The smallest noise scale a release uses: σ_ref · 2^-16.
    pub fn min_scale(&self) -> f64 {
        self.reference_scale * SCALE_FLOOR_FRACTION
    }

    /// Snap a raw release to the grid; refused if either is not finite.
    pub(crate) fn snap(&self, raw: f64) -> Result<f64> {
        crate::error::release_number("value", raw, true)?;
        crate::error::release_number("value", self.snap_value(raw), true)
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
