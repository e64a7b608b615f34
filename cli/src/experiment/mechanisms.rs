//! The mechanisms an experiment compares, by name, and how each is built
//! for a budget ε.

use geopriv::{Mechanism, Query};
use rand::Rng;

/// A mechanism in the comparison (the `--mechanisms` names).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, clap::ValueEnum)]
pub enum MechKind {
    /// Smooth sensitivity with PolyPlace noise (γ = ε/9).
    Polyplace,
    /// Smooth sensitivity with Student's t, ν = 3 (the paper's choice).
    StudentT,
    /// Smooth sensitivity with the generalized Cauchy, k = 4.
    Cauchy,
    /// Smooth sensitivity (linear growth) with Laplace noise, (ε, δ)-GP.
    Laplace,
    /// Baseline: Laplace scaled to the global Lipschitz constant.
    GlobalLaplace,
    /// Baseline: privatize the input itself, then evaluate the query.
    APriori,
    /// Reference: local DP with ε_LDP = ε × the LDP distance scale.
    Ldp,
    /// The exact query value, no privacy (the soft query's own bias).
    NonPrivate,
}

impl MechKind {
    /// Every mechanism, in table order.
    pub const ALL: [MechKind; 8] = [
        MechKind::Polyplace,
        MechKind::StudentT,
        MechKind::Cauchy,
        MechKind::Laplace,
        MechKind::GlobalLaplace,
        MechKind::APriori,
        MechKind::Ldp,
        MechKind::NonPrivate,
    ];

    /// Stable short name (as on the command line).
    pub fn name(self) -> &'static str {
        match self {
            MechKind::Polyplace => "polyplace",
            MechKind::StudentT => "student-t",
            MechKind::Cauchy => "cauchy",
            MechKind::Laplace => "laplace",
            MechKind::GlobalLaplace => "global-laplace",
            MechKind::APriori => "a-priori",
            MechKind::Ldp => "ldp",
            MechKind::NonPrivate => "non-private",
        }
    }

    /// Human label for tables and legends.
    pub fn label(self) -> &'static str {
        match self {
            MechKind::Polyplace => "PolyPlace",
            MechKind::StudentT => "Student's t (ν=3)",
            MechKind::Cauchy => "Gen Cauchy (k=4)",
            MechKind::Laplace => "Laplace (ε,δ)-GP",
            MechKind::GlobalLaplace => "Global Laplace",
            MechKind::APriori => "Noise a priori",
            MechKind::Ldp => "Local DP",
            MechKind::NonPrivate => "Non-private",
        }
    }

    /// A stable small integer for seed derivation.
    pub fn tag(self) -> u64 {
        MechKind::ALL.iter().position(|&m| m == self).unwrap_or(0) as u64
    }

    /// Plot colour (RGB).
    pub fn rgb(self) -> (u8, u8, u8) {
        match self {
            MechKind::Polyplace => (214, 39, 40),
            MechKind::StudentT => (31, 119, 180),
            MechKind::Cauchy => (44, 160, 44),
            MechKind::Laplace => (148, 103, 189),
            MechKind::GlobalLaplace => (140, 86, 75),
            MechKind::APriori => (255, 127, 14),
            MechKind::Ldp => (127, 127, 127),
            MechKind::NonPrivate => (0, 0, 0),
        }
    }
}

/// Parameters shared by all mechanisms of a run.
#[derive(Clone, Copy, Debug)]
pub struct MechParams {
    /// δ of the approximate-GP Laplace mechanism.
    pub delta: f64,
    /// ε_LDP = ε × `ldp_scale` (a distance in the data's unit).
    pub ldp_scale: f64,
}

/// A built mechanism: a [`Mechanism`] or the non-private value.
#[derive(Clone, Debug)]
pub struct Release {
    /// Which one.
    pub kind: MechKind,
    mechanism: Option<Mechanism>,
}

impl Release {
    /// Build `kind` at budget `epsilon` (per unit of the data).
    pub fn new(kind: MechKind, epsilon: f64, params: MechParams) -> Result<Self, String> {
        let m = match kind {
            MechKind::Polyplace => Some(Mechanism::polyplace(epsilon)),
            MechKind::StudentT => Some(Mechanism::student_t(epsilon)),
            MechKind::Cauchy => Some(Mechanism::cauchy(epsilon)),
            MechKind::Laplace => Some(Mechanism::laplace(epsilon, params.delta)),
            MechKind::GlobalLaplace => Some(Mechanism::global_laplace(epsilon)),
            MechKind::APriori => Some(Mechanism::noise_a_priori(epsilon)),
            MechKind::Ldp => Some(Mechanism::local_dp(epsilon * params.ldp_scale)),
            MechKind::NonPrivate => None,
        };
        let mechanism = m.transpose().map_err(|e| format!("{}: {e}", kind.name()))?;
        Ok(Self { kind, mechanism })
    }

    /// One device's report of f(x): the mechanism's release, or f(x).
    #[inline]
    pub fn release<Q: Query + ?Sized, R: Rng + ?Sized>(
        &self,
        query: &Q,
        x: &[f64],
        rng: &mut R,
    ) -> Result<f64, String> {
        match &self.mechanism {
            Some(m) => m.privatize_unmetered(query, x, rng),
            None => query.value(x),
        }
        .map_err(|e| format!("{}: {e}", self.kind.name()))
    }
}

impl Release {
    /// The variance of this device's report around f(x), from the noise's
    /// closed-form variance at the device's own scale: 0 for the
    /// non-private value, `None` for noise a priori (no closed form).
    pub fn report_variance<Q: Query + ?Sized>(
        &self,
        query: &Q,
        x: &[f64],
    ) -> Result<Option<f64>, String> {
        match &self.mechanism {
            None => Ok(Some(0.0)),
            Some(m) => Ok(m
                .output_density(query, x)
                .map_err(|e| format!("{}: {e}", self.kind.name()))?
                .and_then(|d| d.variance())),
        }
    }
}

/// Build every mechanism in `kinds` at `epsilon`.
pub fn build_all(
    kinds: &[MechKind],
    epsilon: f64,
    params: MechParams,
) -> Result<Vec<Release>, String> {
    kinds
        .iter()
        .map(|&k| Release::new(k, epsilon, params))
        .collect()
}
