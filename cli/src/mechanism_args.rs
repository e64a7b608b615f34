//! Mechanism flags shared by `privatize` and `audit`.

use clap::builder::PossibleValue;
use clap::{Args, ValueEnum};
use geopriv::{Mechanism, MechanismName, MechanismParams};

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
    /// `ldp` a local-DP ε.
    #[arg(long, value_name = "E", value_parser = crate::query_args::positive, allow_negative_numbers = true)]
    pub epsilon: f64,
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
        Mechanism::from_name(name, MechanismParams::new(self.epsilon, delta))
            .map_err(|e| e.to_string())
    }
}
