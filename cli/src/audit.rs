//! `geopriv audit <family>`: the numerical privacy certificate as JSON.

use crate::mechanism_args::MechanismArgs;
use clap::Args;

/// Flags of `audit` (besides the query's own).
#[derive(Args, Debug, Clone)]
pub struct AuditArgs {
    #[command(flatten)]
    pub mechanism: MechanismArgs,
    /// Number of input pairs (random, grid, near the query's landmarks,
    /// very close and far); 1 to 1,000,000.
    #[arg(long, value_name = "N", default_value_t = 10_000)]
    pub pairs: usize,
    /// Seed of the pair generator (the audit is deterministic given it).
    #[arg(long, value_name = "S", default_value_t = 1)]
    pub seed: u64,
    /// Run the black-box sampling tester instead (docs/MATH.md §8.2): seeded
    /// releases through the public path on pairs around the query's
    /// landmarks (ε d = 1), candidate sets chosen on a pilot sample,
    /// Clopper–Pearson lower bounds on ln(P_x(O)/P_x'(O)), Bonferroni
    /// corrected. Prints one JSON object; exit status 1 if a lower bound
    /// exceeds ε d.
    #[arg(long)]
    pub sampling: bool,
    /// Releases per input in the sampling tester's main sample.
    #[arg(
        long,
        value_name = "N",
        default_value_t = 200_000,
        requires = "sampling"
    )]
    pub samples: usize,
    /// Releases per input in the sampling tester's pilot sample.
    #[arg(
        long,
        value_name = "N",
        default_value_t = 50_000,
        requires = "sampling"
    )]
    pub pilot: usize,
    /// Family-wise false-failure probability per pair of the sampling tester.
    #[arg(long, value_name = "A", default_value_t = 1e-9, requires = "sampling")]
    pub alpha: f64,
}
