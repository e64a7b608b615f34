//! Mechanism flags shared by `privatize` and `audit`.

use clap::builder::PossibleValue;
use clap::{Args, ValueEnum};
use geopriv::{Mechanism, MechanismName, MechanismParams, ShortNumber};

/// clap's `ValueEnum` over the core's [`MechanismName`]: the flag values
/// are the wire names (`polyplace`, `student-t`, ...), the help the labels.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MechanismArg(pub MechanismName);

/// Every mechanism as a flag value, in wire order.
const MECHANISM_ARGS: [MechanismArg; MechanismName::ALL.len()] = {
    let mut out = [MechanismArg(MechanismName::ALL[0]); MechanismName::ALL.len()];
    let mut i = 0;
    while i < out.len() {
        out[i] = MechanismArg(MechanismName::ALL[i]);
        i += 1;
    }
    out
};

impl ValueEnum for MechanismArg {
    fn value_variants<'a>() -> &'a [Self] {
        &MECHANISM_ARGS
    }

    fn to_possible_value(&self) -> Option<PossibleValue> {
        Some(PossibleValue::new(self.0.as_str()).help(self.0.label()))
    }
}

/// `--mechanism`, `--epsilon`, `--delta`.
#[derive(Args, Debug, Clone)]
pub struct MechanismArgs {
    /// The release mechanism (`laplace` is (ε, δ)-GP and needs --delta;
    /// `ldp` takes a local-DP ε).
    #[arg(long, value_enum)]
    pub mechanism: MechanismArg,
    /// Privacy budget ε per unit distance (per dollar, per metre); for
    /// `ldp` a local-DP ε. Or give `--within R --level L` instead.
    #[arg(long, value_name = "E", value_parser = crate::query_args::positive, allow_negative_numbers = true,
          required_unless_present = "within", conflicts_with = "within")]
    pub epsilon: Option<f64>,
    /// Privacy stated as a radius: any two inputs within R (metres,
    /// dollars) give odds within a factor e^L (--level); sets ε = L / R
    /// (docs/MATH.md §14). Instead of --epsilon.
    #[arg(
        long,
        value_name = "R",
        requires = "level",
        allow_negative_numbers = true
    )]
    pub within: Option<f64>,
    /// The level L of --within (e.g. 1: odds within a factor e = 2.72).
    #[arg(
        long,
        value_name = "L",
        requires = "within",
        allow_negative_numbers = true
    )]
    pub level: Option<f64>,
    /// δ of the approximate-GP `laplace` mechanism, in (0, 1).
    #[arg(long, value_name = "D", allow_negative_numbers = true)]
    pub delta: Option<f64>,
}

impl MechanismArgs {
    /// The mechanism described by the flags.
    pub fn build(&self) -> Result<Mechanism, String> {
        let name = self.mechanism.0;
        let delta = match self.delta {
            Some(d) if d != 0.0 && name.is_pure() => {
                return Err(format!(
                    "--delta {d} given for a pure mechanism (only `laplace` takes a δ)"
                ))
            }
            None if !name.is_pure() => {
                return Err(format!("the `{name}` mechanism needs --delta (in (0, 1))"))
            }
            d => d.unwrap_or(0.0),
        };
        let epsilon = resolve_epsilon(self.epsilon, self.within, self.level)?;
        Mechanism::from_name(name, MechanismParams::new(epsilon, delta)).map_err(|e| e.to_string())
    }
}

/// ε from `--epsilon E`, or from `--within R --level L` as ε = L / R
/// (`geopriv::PrivacyRadius`, docs/MATH.md §14); clap makes them
/// exclusive and one of them required.
pub fn resolve_epsilon(
    epsilon: Option<f64>,
    within: Option<f64>,
    level: Option<f64>,
) -> Result<f64, String> {
    match (epsilon, within, level) {
        (Some(e), None, None) => Ok(e),
        (None, Some(r), Some(l)) => geopriv::PrivacyRadius::new(r, l)
            .map(|p| p.epsilon())
            .map_err(|e| e.to_string()),
        _ => Err("give either --epsilon E or --within R --level L".into()),
    }
}

/// Both forms of a privacy level, for stderr: `privacy: ε = 0.002 per
/// metre, i.e. level 1 within 500 m` (`unit` the word after "per",
/// `short` the radius' unit). With `--within R --level L` the radius and
/// level given; with `--epsilon` alone, level 1 within 1/ε. Numbers go
/// through [`geopriv::ShortNumber`] (`1e-300`, not 300 digits); a radius
/// 1/ε beyond f64 (ε below 1/f64::MAX ≈ 5.6e-309) is "more than 1.8e308".
pub fn describe(
    epsilon: f64,
    within: Option<f64>,
    level: Option<f64>,
    unit: &str,
    short: &str,
) -> String {
    let (radius, level) = match (within, level) {
        (Some(r), Some(l)) => (r, l),
        _ => (1.0 / epsilon, 1.0),
    };
    let radius = if radius.is_finite() {
        ShortNumber(radius).to_string()
    } else {
        "more than 1.8e308".to_string()
    };
    format!(
        "privacy: ε = {} per {unit}, i.e. level {} within {radius}{short}",
        ShortNumber(epsilon),
        ShortNumber(level)
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn within_and_level_set_epsilon_level_over_radius() {
        assert_eq!(resolve_epsilon(None, Some(500.0), Some(1.0)), Ok(2e-3));
        assert_eq!(resolve_epsilon(Some(1e-3), None, None), Ok(1e-3));
        assert!(resolve_epsilon(None, Some(0.0), Some(1.0)).is_err());
        assert!(resolve_epsilon(None, Some(500.0), Some(f64::NAN)).is_err());
        assert_eq!(
            describe(2e-3, Some(500.0), Some(1.0), "metre", " m"),
            "privacy: ε = 0.002 per metre, i.e. level 1 within 500 m"
        );
        assert_eq!(
            describe(2e-3, None, None, "metre", " m"),
            "privacy: ε = 0.002 per metre, i.e. level 1 within 500 m"
        );
    }

    /// attack15 O2: extreme ε printed short (it printed 300 digits at
    /// 1e-300 and "within inf m" at 5e-324).
    #[test]
    fn extreme_epsilons_are_printed_short() {
        assert_eq!(
            describe(1e-300, None, None, "metre", " m"),
            "privacy: ε = 1e-300 per metre, i.e. level 1 within 9.999999999999999e299 m"
        );
        assert_eq!(
            describe(5e-324, None, None, "metre", " m"),
            "privacy: ε = 5e-324 per metre, i.e. level 1 within more than 1.8e308 m"
        );
        assert_eq!(
            describe(1e300, None, None, "metre", " m"),
            "privacy: ε = 1e300 per metre, i.e. level 1 within 1e-300 m"
        );
    }
}
