//! `geopriv experiment two-way`: the share of households with income > T1
//! and debt > T2 (docs/MATH.md §7), on a grid of (T1, T2).
//!
//! Every household answers every grid query with a privatized two-way soft
//! threshold of width τ = min(0.2 ||T||, 2/ε); the estimate at each (T1, T2)
//! is the mean report. ASE = the average over the grid of the squared error
//! against the hard share #{x1 > T1, x2 > T2}/n, then averaged over
//! repetitions.

use super::data::IncomeDebtModel;
use super::mechanisms::{build_all, MechParams};
use super::population::Job;
use super::{
    fmt_count, fmt_eps, run_cells, run_outcome, CommonArgs, Outcome, Record, Result, SweepArgs,
    SweepDefaults,
};
use clap::Args;
use geopriv::TwoWayThreshold;

/// Options of `geopriv experiment two-way`.
///
/// Defaults (about half a minute on 2 free cores): a 10 × 10 grid
/// T = 10k + 110k j, n ∈ {2.5k, 5k, 10k} at ε = 1/12000, ε ∈ {1/3000,
/// 1/12000, 1/48000} at n = 10k, 8 repetitions (one small-width query can
/// dominate the ASE, so repetitions beat users here). `--full` (docs/MATH.md §7; hours):
/// the 34 × 34 grid T = 10k + 30k j, n ∈ {0.4M, 0.8M, 1.6M} at ε = 1/12000,
/// ε ∈ {1/3000, 1/6000, 1/12000, 1/24000, 1/48000} at n = 1.6M, 1 repetition.
#[derive(Args, Debug, Clone)]
pub struct TwoWayArgs {
    #[command(flatten)]
    pub common: CommonArgs,
    #[command(flatten)]
    pub sweep: SweepArgs,
    /// Repetitions.
    #[arg(long)]
    pub reps: Option<usize>,
    /// Grid points per axis: T = 10k + (990k/(K-1)) j, j = 0..K-1
    /// (K = 34 is the paper's step of 30k) [default: 10, full: 34].
    #[arg(long)]
    pub grid: Option<usize>,
    /// LDP reference: ε_LDP = ε × this many dollars.
    #[arg(long, default_value_t = 12_000.0)]
    pub ldp_scale: f64,
}

/// The grid of thresholds per axis: 10k .. 1M in K steps.
pub fn threshold_axis(k: usize) -> Vec<f64> {
    if k <= 1 {
        return vec![10_000.0];
    }
    let step = 990_000.0 / (k - 1) as f64;
    (0..k).map(|j| 10_000.0 + step * j as f64).collect()
}

/// τ = min(0.2 ||T||, 2/ε).
pub fn band_width(t: [f64; 2], eps: f64) -> f64 {
    (0.2 * t[0].hypot(t[1])).min(2.0 / eps)
}

/// Run, write, print paths.
pub fn run(args: TwoWayArgs) -> Result<()> {
    run_outcome("two-way", &args.common, || compute(&args))
}

/// Compute every cell of the sweep.
pub fn compute(args: &TwoWayArgs) -> Result<Outcome> {
    args.common.init_threads();
    let full = args.common.full;
    let sweep = args.sweep.resolve(
        full,
        SweepDefaults {
            ns: (&[2_500, 5_000, 10_000], &[400_000, 800_000, 1_600_000]),
            epsilons: (
                &[1.0 / 3000.0, 1.0 / 12000.0, 1.0 / 48000.0],
                &[
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
    let reps = args.reps.unwrap_or(if full { 1 } else { 8 }).max(1);
    let k = args.grid.unwrap_or(if full { 34 } else { 10 }).max(1);
    let axis = threshold_axis(k);
    let grid: Vec<[f64; 2]> = axis
        .iter()
        .flat_map(|&t1| axis.iter().map(move |&t2| [t1, t2]))
        .collect();
    let mechs = args.common.mechanisms();
    let params = MechParams {
        delta: args.common.delta,
        ldp_scale: args.ldp_scale,
    };
    let model = IncomeDebtModel::CENSUS_FIT;
    let seed = args.common.seed;
    let group = format!("{k} × {k} grid of (T1, T2)");
    let (records, seconds) = run_cells("two-way", &sweep, |n, eps| {
        let queries: Vec<TwoWayThreshold> = grid
            .iter()
            .map(|&t| TwoWayThreshold::new(t[0], t[1], band_width(t, eps)))
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
        let (nq, nm) = (queries.len(), mechs.len());
        let mut ase = vec![0.0; nm];
        let mut ase_noise = vec![0.0; nm];
        let mut expected = vec![0.0; nm];
        for rep in 0..reps {
            let total = job.totals(rep)?;
            if rep == 0 {
                for qi in 0..nq {
                    for (mi, e) in expected.iter_mut().enumerate() {
                        *e += total.variance(qi, mi) / (n as f64 * n as f64) / nq as f64;
                    }
                }
            }
            for qi in 0..nq {
                let hard = total.hard(qi) / n as f64;
                let soft = total.soft(qi) / n as f64;
                for mi in 0..nm {
                    let est = total.released(qi, mi) / n as f64;
                    ase[mi] += (est - hard).powi(2) / nq as f64;
                    ase_noise[mi] += (est - soft).powi(2) / nq as f64;
                }
            }
        }
        let records = mechs
            .iter()
            .enumerate()
            .map(|(mi, &m)| Record {
                group: group.clone(),
                n,
                epsilon: eps,
                mech: m,
                error: ase[mi] / reps as f64,
                noise_error: ase_noise[mi] / reps as f64,
                expected_noise: Some(expected[mi]).filter(|v| v.is_finite()),
            })
            .collect();
        Ok((records, format!("{nq} queries × {reps} repetitions")))
    })?;
    let settings = vec![
        format!(
            "(income, debt): log-normal with σ = {} for both, correlation {} of the logs, mean debt = {} × mean income (a simulation from the fit of docs/MATH.md §7)",
            model.income.sigma, model.log_correlation, model.debt_mean_ratio
        ),
        format!(
            "grid: T1, T2 ∈ {{{}}} ({} queries); width τ = min(0.2 ||T||, 2/ε)",
            axis.iter().map(|&t| fmt_count(t)).collect::<Vec<_>>().join(", "),
            grid.len()
        ),
        format!(
            "n sweep {} at ε = {} per dollar; ε sweep {} at n = {}",
            sweep.ns.iter().map(|&n| fmt_count(n as f64)).collect::<Vec<_>>().join(", "),
            fmt_eps(sweep.ref_eps),
            sweep.epsilons.iter().map(|&e| fmt_eps(e)).collect::<Vec<_>>().join(", "),
            fmt_count(sweep.ref_n as f64)
        ),
        format!("ASE: squared error against the hard share #{{x1 > T1, x2 > T2}}/n averaged over the grid, then over {reps} repetitions"),
        format!(
            "approximate-GP Laplace: δ = {:e}; local DP: ε_LDP = ε × {} dollars",
            params.delta, params.ldp_scale
        ),
        "each household answers every grid query; each release is ε-GP on its own (composition across queries not accounted for, as in the paper)".into(),
        format!("seed {seed}"),
    ];
    Ok(Outcome {
        name: "Two-way threshold: share with income > T1 and debt > T2".into(),
        metric: "ASE",
        eps_unit: "per dollar",
        settings,
        mechs,
        groups: vec![group],
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
    fn full_axis_is_the_papers_grid() {
        let a = threshold_axis(34);
        assert_eq!(a.len(), 34);
        for (j, t) in a.iter().enumerate() {
            assert!((t - (10_000.0 + 30_000.0 * j as f64)).abs() < 1e-6);
        }
        assert_eq!(band_width([30_000.0, 40_000.0], 1.0 / 12000.0), 10_000.0);
        assert_eq!(band_width([1e6, 1e6], 1.0 / 12000.0), 24_000.0);
    }
}
