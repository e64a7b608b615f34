//! Geo-private mechanisms: release f(x) + scale(x) · Z (docs/MATH.md §4).
//!
//! A [`Mechanism`] bundles a noise family, the budget ε (per unit distance)
//! and the split of ε into a smoothness part γ (growth rate of the smooth
//! bound) and a shift part η. It chooses the growth function its
//! calibration needs, so a user cannot pair them wrongly:
//!
//! | constructor | growth g(t) | noise Z | calibration | guarantee |
//! |---|---|---|---|---|
//! | [`Mechanism::polyplace`] | exp(γt), γ < ε | PolyPlace(s = S/γ, α = ε/γ) | no split | ε-GP |
//! | [`Mechanism::student_t`] | exp(γt) | Student's t, ν > 1 dof | ε = νγ + ((ν+1)/(2√ν)) η, scale S/η | ε-GP |
//! | [`Mechanism::cauchy`] | exp(γt) | ∝ 1/(1+\|z\|^k), ν = k-1 | ε = νγ + ν^{ν/(ν+1)} η, scale S/η | ε-GP |
//! | [`Mechanism::laplace`] | 1 + γt | Laplace(1) | ε = η + γ max(1, ln(1/δ)), scale S/η | (ε, δ)-GP |
//! | [`Mechanism::global_laplace`] | none | Laplace(1) | scale L_global/ε | ε-GP |
//! | [`Mechanism::noise_a_priori`] | none | Laplace on x itself | x̃ = x + ε-GP noise, release f(x̃) | ε-GP, biased |
//! | [`Mechanism::local_dp`] | none | Laplace(1) | scale range(f)/ε_LDP | ε_LDP-LDP |
//!
//! # Why the smooth-sensitivity releases are geo-private
//!
//! Write the release density for input x as p_x(y) = p((y - f(x))/σ(x))/σ(x)
//! with σ(x) = S(x)/η. For two inputs at distance d, the smooth bound and
//! the Lipschitz property give |ln(S(x')/S(x))| <= γd (exponential growth)
//! and |f(x) - f(x')| <= min(S(x), S(x')) d. The log density ratio splits
//! into a *dilation* part (same centre, scale changed by a factor e^{±γd})
//! and a *shift* part (same scale, centre moved by at most d · S, i.e. by at
//! most η d in units of the scale):
//!
//! Each mechanism's file finishes the argument for its own density:
//! `polyplace`, `student_t`, `cauchy`, `laplace`; the baselines
//! `global_laplace`, `noise_a_priori` and `local_dp` are private by
//! simpler arguments stated there.
//!
//! [`crate::audit`] is the executable form of these arguments: it
//! evaluates the log density ratio on pairs of inputs and dense output
//! grids and checks it against ε d.
//!
//! # Floating-point safety (docs/MATH.md §8.1)
//!
//! A released float can betray x through its low-order bits (Mironov, CCS
//! 2012), and a noise drawn from too coarse a uniform reaches different
//! output cells from different inputs. Every tail is therefore drawn from
//! a full-resolution uniform ([`crate::noise::uniform`]) and every release
//! is snapped to the nearest multiple of a power of two
//! Λ = 2^⌊log2(σ_max)⌋ · 2^-k set by public parameters only (σ_max =
//! L_global/η, or range/ε), with k chosen per noise by
//! [`crate::release_grid`]. The implemented release then satisfies, for
//! every output cell within z_max noise scales, ln(P_x(c)/P_x'(c)) <= ε d + η,
//! and the rest has mass at most δ_fp ([`Mechanism::floating_point_guarantee`]).
//! At the defaults (ε, δ, η, δ_fp) are:
//!
//! | constructor | ε | δ | η | δ_fp | grid k |
//! |---|---|---|---|---|---|
//! | [`Mechanism::polyplace`] | ε | 0 | 6.3e-9 | 1e-15 | 13 |
//! | [`Mechanism::student_t`] | ε | 0 | 6.1e-9 | 1e-15 | 3 |
//! | [`Mechanism::cauchy`] | ε | 0 | 6.4e-9 | 1e-15 | 4 |
//! | [`Mechanism::laplace`] | ε | δ (+ δ_fp) | 6.0e-9 | 1e-15 | 15 |
//! | [`Mechanism::global_laplace`], [`Mechanism::local_dp`] | ε | 0 | 6.0e-9 | 1e-15 | 15 |
//! | [`Mechanism::noise_a_priori`] (1-D point; 2-D: 7.8e-9, k = 14) | ε | 0 | 6.0e-9 | 1e-15 | 16 |
//!
//! These hold at every accepted ε: the grid and a scale floor σ_ref 2^-12
//! follow σ_ref = max(σ_max, sup|f|/64), and noise a priori snaps its
//! noisy point, not f (docs/MATH.md §8.4).
//! (η bounds the arithmetic; the exact enumeration of
//! `audit::enumeration` measures at most 9.8e-10.) Cost: at most Λ/2 per
//! report, variance Λ²/12; symmetric noise and odd rounding keep reports
//! unbiased. The test `tests/floating_point.rs` shows a naive release
//! leaking through its low bits and this one not;
//! `tests/exact_enumeration.rs` measures η and δ_fp.

use crate::device::budget::BudgetUnit;
use crate::error::{positive_finite, Error, Result};
use crate::growth::Growth;
use crate::noise::{
    GeneralizedCauchy, Laplace, PolyPlace, SphericalLaplace, StudentT, UnitDensity,
};
use crate::query::Query;
use alloc::vec::Vec;
use rand::Rng;

mod cauchy;
mod global_laplace;
mod laplace;
mod local_dp;
mod name;
mod noise_a_priori;
mod polyplace;
mod student_t;

pub use cauchy::CAUCHY_SMOOTHNESS_SHARE;
pub use laplace::LAPLACE_SMOOTHNESS_SHARE;
pub use name::MechanismName;
pub use polyplace::POLYPLACE_GAMMA_SHARE;
pub use student_t::STUDENT_T_SMOOTHNESS_SHARE;

/// The shape of the standardised noise of a location–scale release.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum NoiseShape {
    /// PolyPlace(1, α).
    PolyPlace {
        /// Shape α = ε/γ > 1.
        alpha: f64,
    },
    /// Student's t with ν degrees of freedom.
    StudentT {
        /// Degrees of freedom ν > 0.
        dof: f64,
    },
    /// Density ∝ 1/(1 + |z|^k), k > 2.
    GeneralizedCauchy {
        /// Exponent k = ν + 1 > 2.
        k: f64,
    },
    /// Laplace(1): density exp(-|z|)/2.
    Laplace,
}

/// A standardised (unit-scale) noise distribution.
#[derive(Clone, Copy, Debug, PartialEq)]
enum UnitNoise {
    PolyPlace(PolyPlace),
    StudentT(StudentT),
    Cauchy(GeneralizedCauchy),
    Laplace(Laplace),
}

impl UnitNoise {
    fn new(shape: NoiseShape) -> Result<Self> {
        Ok(match shape {
            NoiseShape::PolyPlace { alpha } => UnitNoise::PolyPlace(PolyPlace::new(1.0, alpha)?),
            NoiseShape::StudentT { dof } => UnitNoise::StudentT(StudentT::new(dof, 1.0)?),
            NoiseShape::GeneralizedCauchy { k } => {
                UnitNoise::Cauchy(GeneralizedCauchy::new(k, 1.0)?)
            }
            NoiseShape::Laplace => UnitNoise::Laplace(Laplace::new(1.0)?),
        })
    }

    fn shape(&self) -> NoiseShape {
        match self {
            UnitNoise::PolyPlace(n) => NoiseShape::PolyPlace { alpha: n.alpha() },
            UnitNoise::StudentT(n) => NoiseShape::StudentT { dof: n.dof() },
            UnitNoise::Cauchy(n) => NoiseShape::GeneralizedCauchy { k: n.k() },
            UnitNoise::Laplace(_) => NoiseShape::Laplace,
        }
    }

    /// The one place the shape picks its density; everything else goes
    /// through [`UnitDensity`].
    #[inline]
    fn density(&self) -> &dyn UnitDensity {
        match self {
            UnitNoise::PolyPlace(n) => n,
            UnitNoise::StudentT(n) => n,
            UnitNoise::Cauchy(n) => n,
            UnitNoise::Laplace(n) => n,
        }
    }
}

/// The density of a location–scale release y = location + scale · Z.
/// Used by the privacy audit; also lets a caller compute likelihoods.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct OutputDensity {
    location: f64,
    scale: f64,
    noise: UnitNoise,
}

impl OutputDensity {
    /// y = `location` + `scale` · Z with Z of the given shape.
    pub fn new(location: f64, scale: f64, shape: NoiseShape) -> Result<Self> {
        Ok(Self {
            location: crate::error::finite("location", location)?,
            scale: positive_finite("scale", scale)?,
            noise: UnitNoise::new(shape)?,
        })
    }

    /// The centre f(x).
    pub fn location(&self) -> f64 {
        self.location
    }

    /// The scale σ(x).
    pub fn scale(&self) -> f64 {
        self.scale
    }

    /// ln p(y) = ln p_Z((y - location)/scale) - ln scale.
    #[inline]
    pub fn ln_pdf(&self, y: f64) -> f64 {
        self.noise
            .density()
            .ln_pdf((y - self.location) / self.scale)
            - crate::math::ln(self.scale)
    }

    /// The shape of the standardised noise.
    pub fn shape(&self) -> NoiseShape {
        self.noise.shape()
    }

    /// The variance of the release (None if infinite).
    pub fn variance(&self) -> Option<f64> {
        self.noise
            .density()
            .variance()
            .map(|v| v * self.scale * self.scale)
    }
}

/// The budget a mechanism is built with by [`Mechanism::from_name`].
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct MechanismParams {
    /// ε: per unit distance, or a local-DP ε for [`MechanismName::Ldp`].
    pub epsilon: f64,
    /// δ: 0 for the pure mechanisms, in (0, 1) for
    /// [`MechanismName::Laplace`].
    pub delta: f64,
}

impl MechanismParams {
    /// ε and δ.
    pub fn new(epsilon: f64, delta: f64) -> Self {
        Self { epsilon, delta }
    }

    /// ε with δ = 0.
    pub fn pure(epsilon: f64) -> Self {
        Self::new(epsilon, 0.0)
    }
}

/// How a [`Mechanism`] calibrates its noise (its identity is its
/// [`MechanismName`]).
#[derive(Clone, Debug, PartialEq)]
enum Kind {
    /// f(x) + S(x)/η · Z (or PolyPlace(S/γ, α)).
    Smooth {
        growth: Growth,
        /// σ(x) = S(x) · scale_per_sensitivity.
        scale_per_sensitivity: f64,
    },
    /// f(x) + L_global/ε · Laplace(1).
    GlobalLaplace,
    /// f(x + ε-GP noise).
    APriori,
    /// f(x) + range/ε · Laplace(1).
    LocalDp,
}

/// A geo-private (or baseline) release mechanism. See the module docs for
/// the calibration table and the privacy argument of each.
#[derive(Clone, Debug, PartialEq)]
pub struct Mechanism {
    /// Which mechanism this is (the name reports carry).
    name: MechanismName,
    /// How the noise scale is calibrated.
    kind: Kind,
    epsilon: f64,
    delta: f64,
    /// The share of ε spent on smoothness (γ/ε for PolyPlace), if any.
    smoothness_share: Option<f64>,
    /// The standardised noise Z of the location–scale release (Laplace(1)
    /// for the baselines; noise a priori perturbs x instead).
    noise: UnitNoise,
    /// Release grid and (η, δ_fp), docs/MATH.md §8.1.
    fp: crate::release_grid::FloatingPointGuarantee,
    /// The unit of ε, charged by the metered release paths
    /// (`docs/MATH.md §8.3`): always `LocalDp` for `local_dp`, stated with
    /// [`with_unit`](Mechanism::with_unit) for the geo-private ones.
    unit: Option<BudgetUnit>,
}

fn share(name: &'static str, value: f64) -> Result<f64> {
    if value > 0.0 && value < 1.0 {
        Ok(value)
    } else {
        Err(Error::InvalidParameter {
            name,
            value,
            requirement: "strictly between 0 and 1",
        })
    }
}

impl Mechanism {
    fn smooth(
        name: MechanismName,
        epsilon: f64,
        delta: f64,
        share: f64,
        growth: Growth,
        scale_per_sensitivity: f64,
        shape: NoiseShape,
    ) -> Result<Self> {
        let scale_per_sensitivity = scale_factor(scale_per_sensitivity)?;
        Ok(Self {
            name,
            kind: Kind::Smooth {
                growth,
                scale_per_sensitivity,
            },
            epsilon,
            delta,
            smoothness_share: Some(share),
            noise: UnitNoise::new(shape)?,
            fp: crate::release_grid::FloatingPointGuarantee::for_shape(Some(shape)),
            unit: None,
        })
    }

    /// A baseline with budget `epsilon` and Laplace(1) noise.
    fn baseline(name: MechanismName, kind: Kind, epsilon: f64) -> Result<Self> {
        let epsilon = positive_finite("epsilon", epsilon)?;
        // 1/ε must be a finite normal number (ε >= about 5.6e-309).
        scale_factor(1.0 / epsilon)?;
        let a_priori = kind == Kind::APriori;
        Ok(Self {
            unit: (name == MechanismName::Ldp).then_some(BudgetUnit::LocalDp),
            name,
            kind,
            epsilon,
            delta: 0.0,
            smoothness_share: None,
            noise: UnitNoise::new(NoiseShape::Laplace)?,
            fp: if a_priori {
                crate::release_grid::FloatingPointGuarantee::for_noisy_point(1)
            } else {
                crate::release_grid::FloatingPointGuarantee::for_shape(None)
            },
        })
    }

    /// This mechanism with its ε stated in `unit` (per metre, per dollar…),
    /// which the metered release paths charge (`docs/MATH.md §8.3`).
    /// Refused ([`Error::UnitMismatch`]) if `unit` contradicts the
    /// mechanism: a local-DP ε is always [`BudgetUnit::LocalDp`], a
    /// geo-private ε never is.
    ///
    /// ```
    /// use geopriv::{BudgetUnit, Mechanism};
    /// let m = Mechanism::polyplace(1e-3)?.with_unit(BudgetUnit::PerMetre)?;
    /// assert_eq!(m.unit(), Some(&BudgetUnit::PerMetre));
    /// assert!(Mechanism::local_dp(1.0)?.with_unit(BudgetUnit::PerMetre).is_err());
    /// # Ok::<(), geopriv::Error>(())
    /// ```
    pub fn with_unit(mut self, unit: BudgetUnit) -> Result<Self> {
        let ldp = self.name == MechanismName::Ldp;
        if ldp != (unit == BudgetUnit::LocalDp) {
            return Err(Error::UnitMismatch {
                ledger: if ldp {
                    BudgetUnit::LocalDp
                } else {
                    unit.clone()
                },
                charge: Some(if ldp { unit } else { BudgetUnit::LocalDp }),
            });
        }
        self.unit = Some(unit);
        Ok(self)
    }

    /// The unit of ε, if stated (always [`BudgetUnit::LocalDp`] for
    /// [`Mechanism::local_dp`]).
    pub fn unit(&self) -> Option<&BudgetUnit> {
        self.unit.as_ref()
    }

    /// Which mechanism this is: the name its reports carry.
    pub fn name(&self) -> MechanismName {
        self.name
    }

    /// The one factory from a name: the mechanism `name` with the default
    /// calibration of its constructor (e.g. [`Mechanism::polyplace`]) at
    /// `params.epsilon`. `params.delta` must be 0 for the pure mechanisms
    /// and in (0, 1) for [`MechanismName::Laplace`].
    ///
    /// ```
    /// use geopriv::{Mechanism, MechanismName, MechanismParams};
    /// let m = Mechanism::from_name(MechanismName::StudentT, MechanismParams::pure(1e-3))?;
    /// assert_eq!(m, Mechanism::student_t(1e-3)?);
    /// assert!(Mechanism::from_name(MechanismName::Cauchy, MechanismParams::new(1e-3, 1e-6)).is_err());
    /// # Ok::<(), geopriv::Error>(())
    /// ```
    pub fn from_name(name: MechanismName, params: MechanismParams) -> Result<Self> {
        let MechanismParams { epsilon, delta } = params;
        if name.is_pure() && delta != 0.0 {
            return Err(Error::InvalidParameter {
                name: "delta",
                value: delta,
                requirement: "0 for a pure mechanism (only laplace takes a delta)",
            });
        }
        match name {
            MechanismName::Polyplace => Self::polyplace(epsilon),
            MechanismName::StudentT => Self::student_t(epsilon),
            MechanismName::Cauchy => Self::cauchy(epsilon),
            MechanismName::Laplace => Self::laplace(epsilon, delta),
            MechanismName::GlobalLaplace => Self::global_laplace(epsilon),
            MechanismName::APriori => Self::noise_a_priori(epsilon),
            MechanismName::Ldp => Self::local_dp(epsilon),
        }
    }

    /// The budget ε (per unit distance; an LDP ε for [`Mechanism::local_dp`]).
    pub fn epsilon(&self) -> f64 {
        self.epsilon
    }

    /// δ (0 for the pure mechanisms).
    pub fn delta(&self) -> f64 {
        self.delta
    }

    /// The share of ε spent on smoothness, for the smooth-sensitivity
    /// mechanisms (γ/ε for PolyPlace).
    pub fn smoothness_share(&self) -> Option<f64> {
        self.smoothness_share
    }

    /// The growth function the calibration uses (smooth-sensitivity
    /// mechanisms only).
    pub fn growth(&self) -> Option<Growth> {
        match &self.kind {
            Kind::Smooth { growth, .. } => Some(*growth),
            _ => None,
        }
    }

    /// The noise shape of a location–scale release (None for noise a priori).
    pub fn noise_shape(&self) -> Option<NoiseShape> {
        match &self.kind {
            Kind::APriori => None,
            _ => Some(self.noise.shape()),
        }
    }

    /// The noise scale σ for a release whose sensitivity (S(x) for the
    /// smooth mechanisms, L_global or the range for the baselines) is
    /// `sensitivity`. None for noise a priori.
    pub fn scale_for(&self, sensitivity: f64) -> Option<f64> {
        match &self.kind {
            Kind::APriori => None,
            _ => Some(self.raw_scale(sensitivity)),
        }
    }

    /// σ for a sensitivity: S/η (S/γ for PolyPlace) for the smooth
    /// mechanisms, sensitivity/ε for the baselines (for noise a priori the
    /// scale of the 1-D Laplace on x, range/ε, which sets its release grid).
    #[inline]
    fn raw_scale(&self, sensitivity: f64) -> f64 {
        match &self.kind {
            Kind::Smooth {
                scale_per_sensitivity,
                ..
            } => sensitivity * scale_per_sensitivity,
            _ => sensitivity / self.epsilon,
        }
    }

    /// The sensitivity this mechanism scales its noise to at x: S(x) for
    /// the smooth mechanisms, the global Lipschitz constant for
    /// global-Laplace, the range of f (1 for the bundled queries) for LDP.
    fn sensitivity<Q: Query + ?Sized>(&self, query: &Q, x: &[f64]) -> Result<Option<f64>> {
        Ok(match &self.kind {
            Kind::Smooth { growth, .. } => Some(query.smooth_sensitivity(x, *growth)?),
            Kind::GlobalLaplace => Some(query.global_lipschitz()),
            Kind::LocalDp => {
                let (lo, hi) = query.value_bounds();
                Some(hi - lo)
            }
            Kind::APriori => None,
        })
    }

    /// The density of the release at input x (None for noise a priori,
    /// whose release is f of a noisy point).
    pub fn output_density<Q: Query + ?Sized>(
        &self,
        query: &Q,
        x: &[f64],
    ) -> Result<Option<OutputDensity>> {
        let value = query.value(x)?;
        let Some(sensitivity) = self.sensitivity(query, x)? else {
            return Ok(None);
        };
        let scale = self.floored_scale(query, sensitivity);
        let shape = self.noise_shape().unwrap_or(NoiseShape::Laplace);
        if scale > 0.0 {
            Ok(Some(OutputDensity::new(value, scale, shape)?))
        } else {
            Err(Error::Numerical {
                routine: "noise scale underflowed to zero",
            })
        }
    }

    /// The release grid Λ: a power of two set by public parameters only
    /// (module docs, "Floating-point safety"): 2^⌊log2 σ_ref⌋ · 2^-k with
    /// σ_ref = max(σ_max, sup|f|/64) ([`crate::release_grid::reference_scale`]).
    /// For noise a priori, the grid of the noisy point x̃ instead,
    /// 2^⌊log2(1/ε)⌋ · 2^-k (docs/MATH.md §8.4); its release f(x̃) is a
    /// function of the snapped point. A non-finite σ_ref gives 1.
    pub fn release_grid<Q: Query + ?Sized>(&self, query: &Q) -> f64 {
        let reference = match &self.kind {
            Kind::APriori => 1.0 / self.epsilon,
            _ => self.reference_scale(query).unwrap_or(f64::NAN),
        };
        power_of_two_below(reference) * self.floating_point_guarantee_for(query).grid_fraction()
    }

    /// The guarantee of the release of `query`: [`Mechanism::floating_point_guarantee`],
    /// except for noise a priori, whose grid and η depend on the dimension
    /// of the noisy point ([`crate::release_grid::FloatingPointGuarantee::for_noisy_point`]).
    pub fn floating_point_guarantee_for<Q: Query + ?Sized>(
        &self,
        query: &Q,
    ) -> crate::release_grid::FloatingPointGuarantee {
        match &self.kind {
            Kind::APriori => {
                crate::release_grid::FloatingPointGuarantee::for_noisy_point(query.dimension())
            }
            _ => self.fp,
        }
    }

    /// σ_max: the noise scale at the largest sensitivity the query can
    /// have (its global Lipschitz constant, or its range for LDP and noise
    /// a priori).
    fn largest_scale<Q: Query + ?Sized>(&self, query: &Q) -> f64 {
        let largest_sensitivity = match &self.kind {
            Kind::Smooth { .. } | Kind::GlobalLaplace => query.global_lipschitz(),
            Kind::LocalDp | Kind::APriori => {
                let (lo, hi) = query.value_bounds();
                hi - lo
            }
        };
        self.raw_scale(largest_sensitivity)
    }

    /// σ_ref = max(σ_max, sup|f|/64) (docs/MATH.md §8.4): the grid and the
    /// scale floor are set from it, so that |f| <= 64 σ_ref at every ε.
    fn reference_scale<Q: Query + ?Sized>(&self, query: &Q) -> Option<f64> {
        let (lo, hi) = query.value_bounds();
        crate::release_grid::reference_scale(self.largest_scale(query), lo.abs().max(hi.abs()))
    }

    /// The noise scale of the release at sensitivity `sensitivity`:
    /// max(σ, σ_ref 2^-12), the floor of [`crate::release_grid`] (a
    /// constant, so still private; docs/MATH.md §8.4).
    fn floored_scale<Q: Query + ?Sized>(&self, query: &Q, sensitivity: f64) -> f64 {
        let floor = self
            .reference_scale(query)
            .map_or(0.0, crate::release_grid::scale_floor);
        self.raw_scale(sensitivity).max(floor)
    }

    /// The floating-point guarantee of the implemented release: grid
    /// exponent k, z_max, η and δ_fp (docs/MATH.md §8.1). It holds at
    /// every accepted ε (the grid and the scale floor follow σ_ref,
    /// docs/MATH.md §8.4).
    pub fn floating_point_guarantee(&self) -> crate::release_grid::FloatingPointGuarantee {
        self.fp
    }

    /// Privatize f(x) **without charging any ledger**: draw the noise with
    /// `rng` and return the released value, snapped to the public release
    /// grid. For experiments and simulations of many devices; a device
    /// releases through the metered [`Mechanism::privatize`] (or
    /// [`crate::Report::release`]), which charges its ledger first.
    ///
    /// Refused with [`Error::NonFiniteRelease`] if the largest noise scale,
    /// the release grid, this release's scale or its value is not a finite
    /// normal number (e.g. ε = 1e-300 with a narrow ramp).
    pub fn privatize_unmetered<Q: Query + ?Sized, R: Rng + ?Sized>(
        &self,
        query: &Q,
        x: &[f64],
        rng: &mut R,
    ) -> Result<f64> {
        let grid = self.checked_release_grid(query)?;
        let value = match self.sensitivity(query, x)? {
            Some(sensitivity) => {
                let value = query.value(x)?;
                let scale = crate::error::release_number(
                    "scale",
                    self.floored_scale(query, sensitivity),
                    false,
                )?;
                self.draw_release(value, scale, grid, rng)
            }
            None => {
                crate::error::check_point(x, query.dimension())?;
                let noisy = self.draw_noisy_point(x, grid, rng)?;
                query.value(&noisy)?
            }
        };
        crate::error::release_number("value", value, true)
    }

    /// The release grid, refused if it or the largest noise scale it comes
    /// from is not a finite normal number.
    pub fn checked_release_grid<Q: Query + ?Sized>(&self, query: &Q) -> Result<f64> {
        crate::error::release_number("scale", self.largest_scale(query), false)?;
        crate::error::release_number("grid", self.release_grid(query), false)
    }

    /// The one function from a draw to a released value, shared by the
    /// sampler ([`Mechanism::privatize_unmetered`]) and the exact
    /// enumeration (`audit::enumeration`), so that the enumeration counts
    /// the code that runs (docs/MATH.md §8.1): snap(value ± scale · m) with
    /// m the noise magnitude at the full-resolution uniform `u` and, for
    /// Student's t and the Cauchy family, the second draw `second` (cos θ,
    /// resp. Jöhnk's V). `None` when Jöhnk rejects the pair.
    #[inline]
    pub(crate) fn release_at(
        &self,
        value: f64,
        scale: f64,
        grid: f64,
        u: f64,
        negative: bool,
        second: f64,
    ) -> Option<f64> {
        let m = match &self.noise {
            UnitNoise::Laplace(l) => l.magnitude_at(u),
            UnitNoise::PolyPlace(p) => p.magnitude_at(u),
            UnitNoise::StudentT(t) => t.value_from(u, second),
            UnitNoise::Cauchy(c) => c.magnitude_from(u, second)?,
        };
        Some(snap(value + scale * if negative { -m } else { m }, grid))
    }

    /// One release: uniform keys from `rng` ([`crate::noise::uniform::draw_key`]),
    /// mapped by [`Mechanism::release_at`]; the Cauchy family redraws on
    /// rejection.
    fn draw_release<R: Rng + ?Sized>(&self, value: f64, scale: f64, grid: f64, rng: &mut R) -> f64 {
        loop {
            let (u, negative) = crate::noise::unit_and_sign(rng);
            let second = match &self.noise {
                UnitNoise::StudentT(_) => {
                    libm::cos(core::f64::consts::FRAC_PI_2 * crate::noise::unit_53(rng))
                }
                UnitNoise::Cauchy(_) => crate::noise::uniform::full_resolution_uniform(rng),
                _ => 0.0,
            };
            if let Some(y) = self.release_at(value, scale, grid, u, negative, second) {
                return y;
            }
        }
    }

    /// Noise a priori: x̃ = x + N snapped per coordinate to `grid`, computed
    /// as a + snap(r + N) with a = snap(x) and r = x - a (both exact), so
    /// that the rounding error does not grow with |x| (docs/MATH.md §8.4).
    /// Refused if a coordinate is so large that a + snap(r + N) is not
    /// exact (|x_i| >= 2^52 grid, i.e. about 2^37/ε: outside any domain).
    fn draw_noisy_point<R: Rng + ?Sized>(
        &self,
        x: &[f64],
        grid: f64,
        rng: &mut R,
    ) -> Result<Vec<f64>> {
        let d = x.len();
        if d == 1 {
            let (u, negative) = crate::noise::unit_and_sign(rng);
            return Ok(alloc::vec![self.a_priori_point(x[0], grid, u, negative)?]);
        }
        let mut noise: Vec<f64> = alloc::vec![0.0; d];
        SphericalLaplace::new(d, self.epsilon)?.sample_into(rng, &mut noise)?;
        x.iter()
            .zip(&noise)
            .map(|(&xi, &n)| snapped_sum(xi, n, grid))
            .collect()
    }

    /// The 1-D noisy point at uniform `u` and sign: snapped_sum(x, ±(-ln u)/ε)
    /// (shared with the exact enumeration).
    #[inline]
    pub(crate) fn a_priori_point(&self, x: f64, grid: f64, u: f64, negative: bool) -> Result<f64> {
        let m = -crate::math::ln(u) / self.epsilon;
        snapped_sum(x, if negative { -m } else { m }, grid)
    }

    /// Variance of one report at sensitivity `sensitivity` (smooth and
    /// global/LDP mechanisms), from the closed-form noise variance.
    pub fn report_variance(&self, sensitivity: f64) -> Option<f64> {
        let scale = self.scale_for(sensitivity)?;
        Some(self.noise.density().variance()? * scale * scale)
    }
}

/// Check a noise scale per unit of sensitivity (1/η, 1/γ or 1/ε).
fn scale_factor(v: f64) -> Result<f64> {
    if v.is_normal() && v > 0.0 {
        Ok(v)
    } else {
        Err(Error::InvalidParameter {
            name: "epsilon",
            value: 1.0 / v,
            requirement:
                "large enough that the noise scale per unit sensitivity is a finite normal number",
        })
    }
}

/// The largest power of two <= v (v > 0 finite and normal), or 1
/// otherwise: v with its mantissa bits cleared.
#[inline]
fn power_of_two_below(v: f64) -> f64 {
    if v.is_normal() && v > 0.0 {
        f64::from_bits(v.to_bits() & 0xFFF0_0000_0000_0000)
    } else {
        1.0
    }
}

/// snap(x + n) for the power of two `grid`, computed as a + snap(r + n)
/// with a = snap(x) and r = x - a: r is exact (|r| <= grid/2 and x, a are
/// multiples of ulp(x) when grid >= ulp(x)), and a + k·grid is exact while
/// |result| < 2^53 grid, so the only rounding is that of r + n, at most
/// 2^-53 (|n| + grid/2) (docs/MATH.md §8.4). Refused when |x| >= 2^52 grid
/// or the sum leaves that range.
fn snapped_sum(x: f64, n: f64, grid: f64) -> Result<f64> {
    let limit = libm::ldexp(grid, 52);
    let a = snap(x, grid);
    let y = a + snap((x - a) + n, grid);
    if x.abs() < limit && y.abs() < limit && y.is_finite() {
        Ok(y)
    } else {
        Err(Error::InvalidParameter {
            name: "x",
            value: x,
            requirement:
                "|x_i| and the noisy point below 2^52 times the location grid (about 2^37/ε)",
        })
    }
}

/// Round y to the nearest multiple of the power of two `grid` (ties away
/// from zero, so snap(-y) = -snap(y)).
#[inline]
pub(crate) fn snap(y: f64, grid: f64) -> f64 {
    libm::round(y / grid) * grid
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn power_of_two_below_is_exact() {
        assert_eq!(power_of_two_below(1.0), 1.0);
        assert_eq!(power_of_two_below(1.999), 1.0);
        assert_eq!(power_of_two_below(1000.0), 512.0);
        assert_eq!(power_of_two_below(3e-5), 2f64.powi(-16));
        assert_eq!(power_of_two_below(0.0), 1.0);
        assert_eq!(power_of_two_below(f64::INFINITY), 1.0);
    }

    /// The draw that runs is `release_at(uniform_from_key(draw_key(rng)))`,
    /// the map the exact enumeration counts (issue 19 item 5).
    #[test]
    fn the_sampler_is_release_at_of_the_drawn_key() {
        use crate::noise::uniform::{draw_key, uniform_from_key};
        use crate::query::SoftThreshold;
        use rand::rngs::StdRng;
        use rand::SeedableRng;
        let q = SoftThreshold::new(0.0, 1.0).unwrap();
        let x = [-0.1];
        for m in [
            Mechanism::polyplace(2.0).unwrap(),
            Mechanism::student_t(2.0).unwrap(),
            Mechanism::laplace(2.0, 1e-9).unwrap(),
            Mechanism::global_laplace(2.0).unwrap(),
            Mechanism::local_dp(2.0).unwrap(),
            Mechanism::noise_a_priori(2.0).unwrap(),
        ] {
            let grid = m.release_grid(&q);
            let mut a = StdRng::seed_from_u64(5);
            let mut b = a.clone();
            for _ in 0..2000 {
                let y = m.privatize_unmetered(&q, &x, &mut a).unwrap();
                let (key, negative) = draw_key(&mut b);
                let u = uniform_from_key(key);
                let expected = match m.output_density(&q, &x).unwrap() {
                    Some(d) => {
                        let second = match m.noise_shape() {
                            Some(NoiseShape::StudentT { .. }) => libm::cos(
                                core::f64::consts::FRAC_PI_2 * crate::noise::unit_53(&mut b),
                            ),
                            _ => 0.0,
                        };
                        m.release_at(d.location(), d.scale(), grid, u, negative, second)
                            .unwrap()
                    }
                    None => q
                        .value(&[m.a_priori_point(x[0], grid, u, negative).unwrap()])
                        .unwrap(),
                };
                assert_eq!(y.to_bits(), expected.to_bits(), "{}", m.name());
            }
        }
    }

    /// Issue 19 item 4(a): at huge ε the grid follows σ_ref = max(σ_max,
    /// sup|f|/64), so |f| <= 64 σ_ref holds, and the scale is floored at
    /// σ_ref 2^-12: the release is never f(x) itself.
    #[test]
    fn huge_epsilon_keeps_the_value_bound_and_the_floor() {
        use crate::query::SoftThreshold;
        use rand::rngs::StdRng;
        use rand::SeedableRng;
        let q = SoftThreshold::new(0.0, 1.0).unwrap();
        for eps in [1e8, 1e14, 1e30] {
            let m = Mechanism::polyplace(eps).unwrap();
            let grid = m.release_grid(&q);
            assert_eq!(grid, 2f64.powi(-6 - 13), "ε = {eps}");
            let d = m.output_density(&q, &[0.1]).unwrap().unwrap();
            assert_eq!(d.scale(), 2f64.powi(-6 - 12), "ε = {eps}");
            let mut rng = StdRng::seed_from_u64(1);
            let ys: Vec<f64> = (0..1000)
                .map(|_| m.privatize_unmetered(&q, &[0.1], &mut rng).unwrap())
                .collect();
            let distinct = {
                let mut v = ys.clone();
                v.sort_by(f64::total_cmp);
                v.dedup();
                v.len()
            };
            assert!(distinct >= 3, "ε = {eps}: {distinct} distinct releases");
        }
    }
}

/// Checks shared by the mechanisms' own tests (each file tests its own
/// calibration and refusals, and calls these).
#[cfg(test)]
pub(crate) mod test_support {
    use super::*;
    use crate::query::SoftThreshold;
    use rand::rngs::StdRng;
    use rand::SeedableRng;

    /// 200,000 releases of a soft threshold at inputs 80..119: every report
    /// is on the public grid and their mean error is within 6 standard
    /// errors of 0 (S <= L_global bounds the smooth mechanisms' spread; LDP
    /// scales with the range of f instead).
    pub(crate) fn releases_are_on_the_public_grid_and_unbiased(m: &Mechanism) {
        let q = SoftThreshold::new(100.0, 20.0).unwrap();
        let mut rng = StdRng::seed_from_u64(1);
        let grid = m.release_grid(&q);
        let n = 200_000;
        let mut sum = 0.0;
        for i in 0..n {
            let x = [80.0 + (i % 40) as f64];
            let y = m.privatize_unmetered(&q, &x, &mut rng).unwrap();
            assert_eq!(y, (y / grid).round() * grid);
            sum += y - q.value(&x).unwrap();
        }
        let mean = sum / n as f64;
        let sensitivity = if m.name() == MechanismName::Ldp {
            1.0
        } else {
            q.global_lipschitz()
        };
        let sd = m.report_variance(sensitivity).unwrap().sqrt();
        assert!(
            mean.abs() < 6.0 * sd / (n as f64).sqrt(),
            "{}: {mean}",
            m.name()
        );
    }

    /// NaN, a wrong dimension and an empty point are errors, not panics.
    pub(crate) fn bad_points_are_errors_not_panics(m: &Mechanism) {
        let q = SoftThreshold::new(0.0, 1.0).unwrap();
        let mut rng = StdRng::seed_from_u64(2);
        assert!(m.privatize_unmetered(&q, &[f64::NAN], &mut rng).is_err());
        assert!(m.privatize_unmetered(&q, &[1.0, 2.0], &mut rng).is_err());
        assert!(m.privatize_unmetered(&q, &[], &mut rng).is_err());
    }

    /// Non-positive or non-finite ε is refused.
    pub(crate) fn refuses_bad_epsilon(make: fn(f64) -> Result<Mechanism>) {
        for bad in [0.0, -1.0, f64::NAN, f64::INFINITY] {
            assert!(make(bad).is_err(), "{bad}");
        }
    }
}
