//! The mechanisms an experiment compares, by name, and how each is built
//! for a budget ε.

use super::error::{ExperimentError, Result};
use geopriv::{Mechanism, MechanismName, MechanismParams, Query};
use rand::Rng;

/// A contender in the comparison (the `--mechanisms` names): a core
/// mechanism, by its [`MechanismName`], or the non-private value.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Contender {
    /// A mechanism of the core (at its default calibration).
    Mechanism(MechanismName),
    /// The exact query value, no privacy (the soft query's own bias).
    NonPrivate,
}

/// Every contender, in table order: the mechanisms in wire order, then the
/// non-private value.
const ALL: [Contender; MechanismName::ALL.len() + 1] = {
    let mut out = [Contender::NonPrivate; MechanismName::ALL.len() + 1];
    let mut i = 0;
    while i < MechanismName::ALL.len() {
        out[i] = Contender::Mechanism(MechanismName::ALL[i]);
        i += 1;
    }
    out
};

impl Contender {
    /// PolyPlace (the ratio column compares it with Student's t).
    pub const POLYPLACE: Contender = Contender::Mechanism(MechanismName::Polyplace);
    /// Student's t.
    pub const STUDENT_T: Contender = Contender::Mechanism(MechanismName::StudentT);
    /// Noise a priori (no closed-form variance).
    pub const A_PRIORI: Contender = Contender::Mechanism(MechanismName::APriori);

    /// Every contender, in table order.
    pub fn all() -> Vec<Contender> {
        ALL.to_vec()
    }

    /// Stable short name (as on the command line).
    pub fn name(self) -> &'static str {
        match self {
            Contender::Mechanism(m) => m.as_str(),
            Contender::NonPrivate => "non-private",
        }
    }

    /// Human label for tables and legends.
    pub fn label(self) -> &'static str {
        match self {
            Contender::Mechanism(m) => m.label(),
            Contender::NonPrivate => "Non-private",
        }
    }

    /// A stable small integer for seed derivation: the position in
    /// table order.
    pub fn tag(self) -> u64 {
        ALL.iter().position(|&m| m == self).unwrap_or(0) as u64
    }
}

impl clap::ValueEnum for Contender {
    fn value_variants<'a>() -> &'a [Self] {
        &ALL
    }

    fn to_possible_value(&self) -> Option<clap::builder::PossibleValue> {
        Some(clap::builder::PossibleValue::new(self.name()).help(self.label()))
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
    pub kind: Contender,
    mechanism: Option<Mechanism>,
}

impl Release {
    /// Build `kind` at budget `epsilon` (per unit of the data).
    pub fn new(kind: Contender, epsilon: f64, params: MechParams) -> Result<Self> {
        let mechanism = match kind {
            Contender::NonPrivate => None,
            Contender::Mechanism(name) => {
                let epsilon = if name.is_geo_private() {
                    epsilon
                } else {
                    epsilon * params.ldp_scale
                };
                let delta = if name.is_pure() { 0.0 } else { params.delta };
                Some(
                    Mechanism::from_name(name, MechanismParams::new(epsilon, delta))
                        .map_err(ExperimentError::mechanism(kind.name()))?,
                )
            }
        };
        Ok(Self { kind, mechanism })
    }

    /// One device's report of f(x): the mechanism's release, or f(x).
    #[inline]
    pub fn release<Q: Query + ?Sized, R: Rng + ?Sized>(
        &self,
        query: &Q,
        x: &[f64],
        rng: &mut R,
    ) -> Result<f64> {
        match &self.mechanism {
            Some(m) => m.privatize_unmetered(query, x, rng),
            None => query.value(x),
        }
        .map_err(ExperimentError::mechanism(self.kind.name()))
    }
}

impl Release {
    /// The variance of this device's report around f(x), from the noise's
    /// closed-form variance at the device's own scale: 0 for the
    /// non-private value, `None` for noise a priori (no closed form).
    pub fn report_variance<Q: Query + ?Sized>(&self, query: &Q, x: &[f64]) -> Result<Option<f64>> {
        match &self.mechanism {
            None => Ok(Some(0.0)),
            Some(m) => Ok(m
                .output_density(query, x)
                .map_err(ExperimentError::mechanism(self.kind.name()))?
                .and_then(|d| d.variance())),
        }
    }
}

/// Build every mechanism in `kinds` at `epsilon`.
pub fn build_all(kinds: &[Contender], epsilon: f64, params: MechParams) -> Result<Vec<Release>> {
    kinds
        .iter()
        .map(|&k| Release::new(k, epsilon, params))
        .collect()
}
