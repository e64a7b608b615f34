//! `geopriv experiment threshold`: the share of households with income
//! above T (docs/MATH.md §7), estimated from soft-threshold reports.
//!
//! Per repetition a fresh population of n incomes is drawn from the
//! log-normal model; every household reports, for every threshold T, its
//! privatized soft-threshold value with ramp width θ = min(0.2 T, 2/ε); the
//! server's estimate is the mean report. The truth is the hard share
//! #{x > T}/n of that population; the MSE is averaged over repetitions.
//! The non-private row shows the bias of the soft query alone.

use super::data::IncomeModel;
use super::mechanisms::{build_all, MechParams};
use super::population::Job;
use super::{
    fmt_count, fmt_eps, parse_amount, run_cells, run_outcome, CommonArgs, Outcome, Record, Result,
    SweepArgs, SweepDefaults,
};
use clap::Args;
use geopriv::SoftThreshold;

/// Options of `geopriv experiment threshold`.
///
/// Defaults (10 s on 2 idle cores, 40 s on busy ones): n ∈ {10k, 20k, 40k} at ε = 1/12000,
/// ε ∈ {1/800, 1/3000, 1/12000, 1/48000} at n = 40k, 30 repetitions.
/// `--full` (docs/MATH.md §7; hours): n ∈ {0.4M, 0.8M, 1.6M, 3.2M, 6.4M},
/// ε ∈ {1/800, 1/1500, 1/3000, 1/6000, 1/12000, 1/24000, 1/48000}, n = 6.4M
/// for the ε sweep, 50 repetitions.
#[derive(Args, Debug, Clone)]
pub struct ThresholdArgs {
    #[command(flatten)]
    pub common: CommonArgs,
    #[command(flatten)]
    pub sweep: SweepArgs,
    /// Repetitions (fresh population and noise each).
    #[arg(long)]
    pub reps: Option<usize>,
    /// Income thresholds T in dollars.
    #[arg(long, value_delimiter = ',', value_parser = parse_amount,
          default_value = "10k,100k,500k,1M")]
    pub thresholds: Vec<f64>,
    /// LDP reference: ε_LDP = ε × this many dollars.
    #[arg(long, default_value_t = 12_000.0)]
    pub ldp_scale: f64,
}

/// The ramp width of docs/MATH.md §7: θ = min(0.2 T, 2/ε).
pub fn ramp_width(t: f64, eps: f64) -> f64 {
    (0.2 * t).min(2.0 / eps)
}

/// Run the experiment, write the outputs, print where they are.
pub fn run(args: ThresholdArgs) -> Result<()> {
    run_outcome("threshold", &args.common, || compute(&args))
}

/// Compute every cell of the sweep.
pub fn compute(args: &ThresholdArgs) -> Result<Outcome> {
    args.common.init_threads();
    let full = args.common.full;
    let sweep = args.sweep.resolve(
        full,
        SweepDefaults {
            ns: (
                &[10_000, 20_000, 40_000],
                &[400_000, 800_000, 1_600_000, 3_200_000, 6_400_000],
            ),
            epsilons: (
                &[1.0 / 800.0, 1.0 / 3000.0, 1.0 / 12000.0, 1.0 / 48000.0],
                &[
                    1.0 / 800.0,
                    1.0 / 1500.0,
                    1.0 / 3000.0,
                    1.0 / 6000.0,
                    1.0 / 12000.0,
                    1.0 / 24000.0,
                    1.0 / 48000.0,
                ],
            ),
            ref_eps: 1.0 / 12000.0,
        },
    );
    let reps = args.reps.unwrap_or(if full { 50 } else { 30 }).max(1);
    let mechs = args.common.mechanisms();
    let params = MechParams {
        delta: args.common.delta,
        ldp_scale: args.ldp_scale,
    };
    let ts = &args.thresholds;
    let model = IncomeModel::CENSUS_FIT;
    let seed = args.common.seed;
    let groups: Vec<String> = ts
        .iter()
        .map(|&t| format!("T = ${}", fmt_count(t)))
        .collect();

    let (records, seconds) = run_cells("threshold", &sweep, |n, eps| {
        let queries: Vec<SoftThreshold> = ts
            .iter()
            .map(|&t| SoftThreshold::new(t, ramp_width(t, eps)))
            .collect::<Result<_, _>>()?;
        let releases = build_all(&mechs, eps, params)?;
        let job = Job {
            family: &model,
            queries: &queries,
            releases: &releases,
            seed,
            n,
            eps,
        };
        let (nt, nm) = (ts.len(), mechs.len());
        // Per (T, mechanism): Σ (estimate - hard)² and Σ (estimate - soft)².
        let mut sq = vec![0.0; nt * nm];
        let mut sq_noise = vec![0.0; nt * nm];
        let mut expected = vec![f64::NAN; nt * nm];
        for rep in 0..reps {
            let total = job.totals(rep)?;
            for ti in 0..nt {
                let hard = total.hard(ti) / n as f64;
                let soft = total.soft(ti) / n as f64;
                for mi in 0..nm {
                    if rep == 0 {
                        expected[ti * nm + mi] = total.variance(ti, mi) / (n as f64 * n as f64);
                    }
                    let est = total.released(ti, mi) / n as f64;
                    sq[ti * nm + mi] += (est - hard).powi(2);
                    sq_noise[ti * nm + mi] += (est - soft).powi(2);
                }
            }
        }
        let mut records = Vec::new();
        for (ti, g) in groups.iter().enumerate() {
            for (mi, &m) in mechs.iter().enumerate() {
                records.push(Record {
                    group: g.clone(),
                    n,
                    epsilon: eps,
                    mech: m,
                    error: sq[ti * nm + mi] / reps as f64,
                    noise_error: sq_noise[ti * nm + mi] / reps as f64,
                    expected_noise: Some(expected[ti * nm + mi]).filter(|v| v.is_finite()),
                });
            }
        }
        Ok((records, format!("{reps} repetitions")))
    })?;

    let settings = vec![
        format!(
            "incomes: log-normal, μ = {}, σ = {} (log-dollars; mean ${:.0}k), a simulation from the fit to US household income of docs/MATH.md §7",
            model.mu,
            model.sigma,
            model.mean() / 1000.0
        ),
        format!(
            "thresholds T: {}; ramp width θ = min(0.2 T, 2/ε)",
            ts.iter().map(|&t| format!("${}", fmt_count(t))).collect::<Vec<_>>().join(", ")
        ),
        format!(
            "n sweep {} at ε = {} per dollar; ε sweep {} at n = {}",
            sweep.ns.iter().map(|&n| fmt_count(n as f64)).collect::<Vec<_>>().join(", "),
            fmt_eps(sweep.ref_eps),
            sweep.epsilons.iter().map(|&e| fmt_eps(e)).collect::<Vec<_>>().join(", "),
            fmt_count(sweep.ref_n as f64)
        ),
        format!("MSE of the estimated share (mean of the n reports) against the hard share #{{x > T}}/n, over {reps} repetitions (fresh population and noise each)"),
        format!(
            "approximate-GP Laplace: δ = {:e}; local DP: ε_LDP = ε × {} dollars",
            params.delta, params.ldp_scale
        ),
        "each household answers every threshold; each release is ε-GP on its own (composition across thresholds not accounted for, as in the paper)".into(),
        format!("seed {}", seed),
    ];
    Ok(Outcome {
        name: "Threshold: share of households with income above T".into(),
        metric: "MSE",
        eps_unit: "per dollar",
        settings,
        mechs,
        groups,
        sweep,
        records,
        seconds,
        per_device: None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ramp_width_follows_the_spec() {
        assert_eq!(ramp_width(10_000.0, 1.0 / 800.0), 1600.0);
        assert_eq!(ramp_width(10_000.0, 1.0 / 48000.0), 2000.0);
        assert_eq!(ramp_width(1e6, 1.0 / 12000.0), 24_000.0);
    }
}
