//! `geopriv experiment threshold|two-way|kde` and `geopriv demo`: the
//! paper's experiments (docs/MATH.md §7) on all cores, with markdown tables and PNG
//! plots.
//!
//! Every experiment follows the same shape. Devices hold private values
//! (simulated incomes, airport or synthetic-city locations); each device
//! releases one report per query with each mechanism; the server averages
//! the reports; the error against the truth is averaged (MSE over
//! repetitions for the threshold, ASE over the query grid for the two-way
//! query and the KDE). Two sweeps are run: over n at a reference ε, and over
//! ε at a reference n, which give the "error against n" and "error against
//! ε" plots.
//!
//! Reproducibility: every random stream is a `StdRng` seeded from
//! `--seed` and the coordinates of the work unit (cell, repetition, chunk of
//! users, mechanism), and partial sums are added in chunk order, so a run's
//! numbers do not depend on the number of threads.
//!
//! Privacy accounting: every single release is ε-GP (or (ε, δ)-GP for the
//! Laplace mechanism) for the query it answers, as in the paper. A device
//! that answers many queries (all thresholds, every grid point of the KDE)
//! composes those budgets; this module does not account for that
//! composition, exactly as the paper's experiments do not.

pub mod data;
pub mod error;
mod grid;
mod kde;
mod longitudinal;
mod maps;
pub mod mechanisms;
mod plot;
mod population;
pub mod populations;
mod table;
mod threshold;
mod two_way;

use clap::{Args, Subcommand};
use mechanisms::Contender;
use rand::rngs::StdRng;
use rand::SeedableRng;
use std::path::{Path, PathBuf};
use std::time::Instant;

pub use kde::{run_demo, DemoArgs};

pub use error::{ExperimentError, Result};

/// The experiments.
#[derive(Subcommand, Debug, Clone)]
pub enum ExperimentCommand {
    /// One-dimensional soft threshold on simulated incomes: MSE of the
    /// estimated share of households above T, over repetitions.
    Threshold(threshold::ThresholdArgs),
    /// Two-way threshold on simulated (income, debt): ASE over a grid of
    /// (T1, T2).
    TwoWay(two_way::TwoWayArgs),
    /// Gaussian kernel density on a grid of query points: ASE against the
    /// non-private KDE, and heat maps.
    Kde(kde::KdeArgs),
    /// 365 daily periods at one lifetime budget per device: fresh daily
    /// releases, the planner's schedule, memoization with and without the
    /// instantaneous layer (docs/MATH.md §12).
    Longitudinal(longitudinal::LongitudinalArgs),
}

/// Run one experiment.
pub fn run(cmd: ExperimentCommand) -> Result<()> {
    match cmd {
        ExperimentCommand::Threshold(a) => threshold::run(a),
        ExperimentCommand::TwoWay(a) => two_way::run(a),
        ExperimentCommand::Kde(a) => kde::run(a),
        ExperimentCommand::Longitudinal(a) => longitudinal::run(a),
    }
}

/// Options every experiment takes.
#[derive(Args, Debug, Clone)]
pub struct CommonArgs {
    /// Output directory [default: out/<experiment>].
    #[arg(long)]
    pub out: Option<PathBuf>,
    /// Base seed of every random stream.
    #[arg(long, default_value_t = 20240601)]
    pub seed: u64,
    /// Mechanisms to compare, comma-separated [default: all].
    #[arg(long, value_enum, value_delimiter = ',')]
    pub mechanisms: Option<Vec<Contender>>,
    /// Use the full settings of docs/MATH.md §7 for every size not given explicitly
    /// (long: see the command's help for the sizes).
    #[arg(long)]
    pub full: bool,
    /// Worker threads [default: all cores].
    #[arg(long)]
    pub threads: Option<usize>,
    /// δ of the approximate-GP Laplace mechanism.
    #[arg(long, default_value_t = 1e-6)]
    pub delta: f64,
    /// Write the table only, no PNG plots.
    #[arg(long)]
    pub no_plots: bool,
    /// Write into an output directory that already holds files (they are
    /// overwritten); without it such a directory is refused (exit 2).
    #[arg(long)]
    pub force: bool,
}

impl CommonArgs {
    fn mechanisms(&self) -> Vec<Contender> {
        let mut m = self.mechanisms.clone().unwrap_or_else(Contender::all);
        m.sort();
        m.dedup();
        m
    }

    /// The output directory, refused up front (before any computing) if
    /// it holds files and `--force` is not given.
    fn out_dir(&self, experiment: &str) -> Result<PathBuf> {
        let dir = self
            .out
            .clone()
            .unwrap_or_else(|| Path::new("out").join(experiment));
        crate::output::check_dir(&dir, self.force)?;
        Ok(dir)
    }

    /// Configure the global rayon pool (once per process).
    fn init_threads(&self) {
        if let Some(t) = self.threads {
            // Fails only if already initialised (tests run several
            // experiments in one process); the existing pool is fine then.
            let _ = rayon::ThreadPoolBuilder::new()
                .num_threads(t.max(1))
                .build_global();
        }
    }
}

/// Parse a budget: `1/800`, `0.00125` or `1.25e-3`.
pub fn parse_epsilon(s: &str) -> Result<f64> {
    let num = |t: &str| {
        t.trim()
            .parse::<f64>()
            .map_err(|e| ExperimentError::parse(s, e))
    };
    let v = match s.split_once('/') {
        Some((a, b)) => num(a)? / num(b)?,
        None => num(s)?,
    };
    if v.is_finite() && v > 0.0 {
        Ok(v)
    } else {
        Err(ExperimentError::parse(s, "ε must be positive and finite"))
    }
}

/// Parse a size with an optional k/M suffix: `200k`, `1.6M`, `3000`.
pub fn parse_amount(s: &str) -> Result<f64> {
    let t = s.trim();
    let (num, mult) = match t.chars().last() {
        Some('k' | 'K') => (&t[..t.len() - 1], 1e3),
        Some('m' | 'M') => (&t[..t.len() - 1], 1e6),
        _ => (t, 1.0),
    };
    let v: f64 = num.parse().map_err(|e| ExperimentError::parse(s, e))?;
    if v.is_finite() && v > 0.0 {
        Ok(v * mult)
    } else {
        Err(ExperimentError::parse(s, "must be positive"))
    }
}

/// Parse a count (`200k`, `1.6M`, `3000`).
pub fn parse_count(s: &str) -> Result<usize> {
    let v = parse_amount(s)?;
    if v.fract() == 0.0 && v >= 1.0 {
        Ok(v as usize)
    } else {
        Err(ExperimentError::parse(s, "not a whole count"))
    }
}

/// `1/800` when 1/ε is (close to) a whole number, else `1.0e-5`.
pub fn fmt_eps(eps: f64) -> String {
    let inv = 1.0 / eps;
    if inv >= 2.0 && (inv - inv.round()).abs() < 1e-9 * inv {
        format!("1/{}", inv.round() as u64)
    } else {
        format!("{eps:.1e}")
    }
}

/// `400k`, `1.6M`, `3069`.
pub fn fmt_count(n: f64) -> String {
    if n >= 1e6 && (n / 1e5).fract() == 0.0 {
        format!("{}M", n / 1e6)
    } else if n >= 1e4 && (n / 1e3).fract() == 0.0 {
        format!("{}k", n / 1e3)
    } else {
        format!("{n}")
    }
}

/// SplitMix64 finaliser.
fn mix(mut z: u64) -> u64 {
    z = z.wrapping_add(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// A generator for one work unit: seeded from the base seed and the
/// unit's coordinates, so results do not depend on scheduling.
pub fn rng_for(seed: u64, tags: &[u64]) -> StdRng {
    let mut s = mix(seed);
    for &t in tags {
        s = mix(s ^ t);
    }
    StdRng::seed_from_u64(s)
}

/// The (n, ε) cells of a run: the sweep over n at the reference ε and the
/// sweep over ε at the reference n.
#[derive(Clone, Debug)]
pub struct Sweep {
    /// Sizes of the n sweep.
    pub ns: Vec<usize>,
    /// Budgets of the ε sweep.
    pub epsilons: Vec<f64>,
    /// n of the ε sweep.
    pub ref_n: usize,
    /// ε of the n sweep.
    pub ref_eps: f64,
}

/// The sweep flags every experiment takes (`--n`, `--epsilon`, `--ref-n`,
/// `--ref-epsilon`).
#[derive(Args, Debug, Clone)]
pub struct SweepArgs {
    /// Population sizes of the n sweep (e.g. 25k,50k,100k; KDE on the
    /// airports: random subsets).
    #[arg(long, value_delimiter = ',', value_parser = parse_count)]
    pub n: Option<Vec<usize>>,
    /// Budgets of the ε sweep, per unit of the data (per dollar, per
    /// metre), e.g. 1/800,1/12000.
    #[arg(long, value_delimiter = ',', value_parser = parse_epsilon)]
    pub epsilon: Option<Vec<f64>>,
    /// n of the ε sweep [default: the largest n].
    #[arg(long, value_parser = parse_count)]
    pub ref_n: Option<usize>,
    /// ε of the n sweep [default: the experiment's reference ε if listed,
    /// else the first ε].
    #[arg(long, value_parser = parse_epsilon)]
    pub ref_epsilon: Option<f64>,
}

/// An experiment's default sweep: (default, full) sizes and budgets, and
/// the reference ε of the n sweep.
pub struct SweepDefaults<'a> {
    /// Sizes of the n sweep: default and `--full`.
    pub ns: (&'a [usize], &'a [usize]),
    /// Budgets of the ε sweep: default and `--full`.
    pub epsilons: (&'a [f64], &'a [f64]),
    /// The preferred ε of the n sweep.
    pub ref_eps: f64,
}

impl SweepArgs {
    /// Resolve the sweep: explicit values, else the full or the default
    /// ones; the reference n defaults to the largest n, the reference ε to
    /// `defaults.ref_eps` if it is in the ε list, else the list's first.
    pub fn resolve(&self, full: bool, defaults: SweepDefaults<'_>) -> Sweep {
        let pick =
            |(default, full_set): (&[f64], &[f64])| if full { full_set } else { default }.to_vec();
        let ns = self.n.clone().unwrap_or_else(|| {
            let (default, full_set) = defaults.ns;
            if full { full_set } else { default }.to_vec()
        });
        let epsilons = self
            .epsilon
            .clone()
            .unwrap_or_else(|| pick(defaults.epsilons));
        let ref_n = self
            .ref_n
            .unwrap_or_else(|| ns.iter().copied().max().unwrap_or(1));
        let ref_eps = self.ref_epsilon.unwrap_or_else(|| {
            if epsilons
                .iter()
                .any(|&e| (e - defaults.ref_eps).abs() < 1e-12 * e)
            {
                defaults.ref_eps
            } else {
                epsilons[0]
            }
        });
        Sweep {
            ns,
            epsilons,
            ref_n,
            ref_eps,
        }
    }
}

impl Sweep {
    /// The distinct (n, ε) cells, n sweep first.
    pub fn cells(&self) -> Vec<(usize, f64)> {
        let mut out: Vec<(usize, f64)> = Vec::new();
        let mut push = |c: (usize, f64)| {
            if !out.iter().any(|o| o.0 == c.0 && o.1 == c.1) {
                out.push(c);
            }
        };
        for &n in &self.ns {
            push((n, self.ref_eps));
        }
        for &e in &self.epsilons {
            push((self.ref_n, e));
        }
        out
    }
}

/// One measured error.
#[derive(Clone, Debug)]
pub struct Record {
    /// Panel / table section (e.g. "T = $100k").
    pub group: String,
    /// Number of users.
    pub n: usize,
    /// Budget per unit of the data.
    pub epsilon: f64,
    /// Mechanism.
    pub mech: Contender,
    /// MSE or ASE against the true (hard) answer.
    pub error: f64,
    /// The same against the non-private value of the (soft) query: the
    /// error due to privacy alone.
    pub noise_error: f64,
    /// The expectation of `noise_error` given the first repetition's
    /// population, from the closed-form report variances:
    /// (1/n²) Σ_i Var(report_i), averaged over the queries. Free of
    /// sampling noise; `None` where there is no closed form (noise a priori)
    /// or it was not computed (KDE).
    pub expected_noise: Option<f64>,
}

/// Everything a run measured, ready for the table and the plots.
#[derive(Clone, Debug)]
pub struct Outcome {
    /// Experiment name (directory and title).
    pub name: String,
    /// "MSE" or "ASE".
    pub metric: &'static str,
    /// Unit of ε, e.g. "per dollar".
    pub eps_unit: &'static str,
    /// Markdown bullet lines describing the settings.
    pub settings: Vec<String>,
    /// Mechanisms in table order.
    pub mechs: Vec<Contender>,
    /// Panels in order.
    pub groups: Vec<String>,
    /// The sweep.
    pub sweep: Sweep,
    /// The measurements.
    pub records: Vec<Record>,
    /// Wall time of the computation, seconds.
    pub seconds: f64,
    /// When each device answered every query at ε each: the per-device
    /// column of the table (m·ε by sequential composition).
    pub per_device: Option<PerDevice>,
}

/// The per-device cost column of a per-query run.
#[derive(Clone, Debug)]
pub struct PerDevice {
    /// Queries every device answered, m.
    pub queries: usize,
    /// Column heading, naming the accounting.
    pub heading: &'static str,
}

impl Outcome {
    /// Look up a record.
    pub fn get(&self, group: &str, n: usize, eps: f64, mech: Contender) -> Option<&Record> {
        self.records
            .iter()
            .find(|r| r.group == group && r.n == n && r.epsilon == eps && r.mech == mech)
    }
}

/// Write results.md and the error plots into `dir`; return the paths.
fn write_outcome(outcome: &Outcome, dir: &Path, plots: bool) -> Result<Vec<PathBuf>> {
    std::fs::create_dir_all(dir).map_err(ExperimentError::io(dir))?;
    let mut paths = Vec::new();
    let md = dir.join("results.md");
    std::fs::write(&md, table::markdown(outcome)).map_err(ExperimentError::io(&md))?;
    paths.push(md);
    if plots {
        paths.extend(plot::error_plots(outcome, dir)?);
    }
    Ok(paths)
}

/// The generic runner of every sweep (threshold, two-way, kde): measures
/// each (n, ε) cell of `sweep` in order with `cell` (which returns the
/// cell's records and a progress note), reports each cell's wall time on
/// stderr, and returns all records with the total wall time in seconds.
fn run_cells(
    name: &str,
    sweep: &Sweep,
    mut cell: impl FnMut(usize, f64) -> Result<(Vec<Record>, String)>,
) -> Result<(Vec<Record>, f64)> {
    let start = Instant::now();
    let mut records = Vec::new();
    for (n, eps) in sweep.cells() {
        let cell_start = Instant::now();
        let (rs, note) = cell(n, eps)?;
        records.extend(rs);
        eprintln!(
            "{name}: n = {}, ε = {}: {note} in {:.1} s",
            fmt_count(n as f64),
            fmt_eps(eps),
            cell_start.elapsed().as_secs_f64()
        );
    }
    Ok((records, start.elapsed().as_secs_f64()))
}

/// Run an experiment whose `compute` returns its [`Outcome`]: write the
/// table and the plots into its directory and print the paths.
fn run_outcome(
    name: &str,
    common: &CommonArgs,
    compute: impl FnOnce() -> Result<Outcome>,
) -> Result<()> {
    let dir = common.out_dir(name)?;
    let outcome = compute()?;
    let paths = write_outcome(&outcome, &dir, !common.no_plots)?;
    print_paths(&paths);
    Ok(())
}

fn print_paths(paths: &[PathBuf]) {
    outln!("wrote:");
    for p in paths {
        outln!("  {}", p.display());
    }
}

/// Sum `parts` (each a vector of partial sums) in order.
fn add_in_order(parts: Vec<Vec<f64>>, len: usize) -> Vec<f64> {
    let mut total = vec![0.0; len];
    for p in parts {
        for (t, v) in total.iter_mut().zip(p) {
            *t += v;
        }
    }
    total
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parsers() {
        assert_eq!(parse_epsilon("1/800").unwrap(), 1.0 / 800.0);
        assert_eq!(parse_epsilon("1e-3").unwrap(), 1e-3);
        assert!(parse_epsilon("0").is_err());
        assert!(parse_epsilon("1/0").is_err());
        assert_eq!(parse_count("200k").unwrap(), 200_000);
        assert_eq!(parse_count("1.6M").unwrap(), 1_600_000);
        assert_eq!(parse_count("3069").unwrap(), 3069);
        assert!(parse_count("1.5").is_err());
        assert_eq!(fmt_eps(1.0 / 12000.0), "1/12000");
        assert_eq!(fmt_eps(3e-7), "3.0e-7");
        assert_eq!(fmt_count(1_600_000.0), "1.6M");
        assert_eq!(fmt_count(20_000.0), "20k");
        assert_eq!(fmt_count(3069.0), "3069");
    }

    #[test]
    fn sweep_cells_are_distinct_and_cover_both_sweeps() {
        let args = SweepArgs {
            n: None,
            epsilon: None,
            ref_n: None,
            ref_epsilon: None,
        };
        let s = args.resolve(
            false,
            SweepDefaults {
                ns: (&[10, 20], &[]),
                epsilons: (&[0.1, 0.2, 0.3], &[]),
                ref_eps: 0.2,
            },
        );
        assert_eq!(s.ref_n, 20);
        assert_eq!(s.ref_eps, 0.2);
        assert_eq!(s.cells(), vec![(10, 0.2), (20, 0.2), (20, 0.1), (20, 0.3)]);
    }

    #[test]
    fn seeds_differ_by_every_tag() {
        use rand::Rng;
        let a = rng_for(1, &[2, 3]).random::<u64>();
        assert_eq!(a, rng_for(1, &[2, 3]).random::<u64>());
        assert_ne!(a, rng_for(1, &[3, 2]).random::<u64>());
        assert_ne!(a, rng_for(2, &[2, 3]).random::<u64>());
    }
}
