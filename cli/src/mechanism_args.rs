//! Mechanism flags shared by `privatize` and `audit`.

use clap::{Args, ValueEnum};
use geopriv::{Error, Mechanism};

/// The mechanisms a command can use.
#[derive(ValueEnum, Debug, Clone, Copy, PartialEq, Eq)]
pub enum MechanismChoice {
    /// Smooth sensitivity with PolyPlace noise (pure GP, γ = ε/9).
    Polyplace,
    /// Smooth sensitivity with Student's t noise (pure GP, ν = 3).
    StudentT,
    /// Smooth sensitivity with generalized Cauchy noise (pure GP, k = 4).
    Cauchy,
    /// Smooth sensitivity with Laplace noise and linear growth ((ε, δ)-GP;
    /// needs --delta).
    Laplace,
    /// Laplace noise scaled to the global Lipschitz constant (baseline).
    GlobalLaplace,
    /// Noise added to the point itself, f of the noisy point (baseline).
    APriori,
    /// Local differential privacy reference; --epsilon is then an LDP ε.
    Ldp,
}

/// `--mechanism`, `--epsilon`, `--delta`.
#[derive(Args, Debug, Clone)]
pub struct MechanismArgs {
    /// The release mechanism.
    #[arg(long, value_enum)]
    pub mechanism: MechanismChoice,
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
        let e = self.epsilon;
        let pure = |m: Result<Mechanism, Error>| -> Result<Mechanism, String> {
            match self.delta {
                Some(d) if d != 0.0 => Err(format!(
                    "--delta {d} given for a pure mechanism (only `laplace` takes a δ)"
                )),
                _ => m.map_err(|e| e.to_string()),
            }
        };
        match self.mechanism {
            MechanismChoice::Polyplace => pure(Mechanism::polyplace(e)),
            MechanismChoice::StudentT => pure(Mechanism::student_t(e)),
            MechanismChoice::Cauchy => pure(Mechanism::cauchy(e)),
            MechanismChoice::GlobalLaplace => pure(Mechanism::global_laplace(e)),
            MechanismChoice::APriori => pure(Mechanism::noise_a_priori(e)),
            MechanismChoice::Ldp => pure(Mechanism::local_dp(e)),
            MechanismChoice::Laplace => {
                let d = self
                    .delta
                    .ok_or("the `laplace` mechanism needs --delta (in (0, 1))")?;
                Mechanism::laplace(e, d).map_err(|e| e.to_string())
            }
        }
    }
}
