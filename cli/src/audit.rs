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
}
