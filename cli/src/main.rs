//! `geopriv`: command-line front end of the geopriv SDK.

#![forbid(unsafe_code)]

/// `println!` for the CLI's tables and results: the same formatting, but a
/// reader that goes away (`geopriv map sweep | head`) ends the process
/// quietly with status 0, where `println!` panics on the closed pipe; any
/// other write error is reported on stderr with status 2.
///
/// ```ignore
/// outln!("{name}\t{value}");
/// ```
macro_rules! outln {
    () => {
        $crate::write_stdout_line(format_args!(""))
    };
    ($($arg:tt)*) => {
        $crate::write_stdout_line(format_args!($($arg)*))
    };
}

/// The body of [`outln!`]: writes `args` and a newline to stdout and exits
/// (0 on a closed pipe, 2 on another error) if the write fails.
fn write_stdout_line(args: std::fmt::Arguments<'_>) {
    use std::io::Write;
    let mut out = io::stdout().lock();
    if let Err(e) = out.write_fmt(args).and_then(|()| out.write_all(b"\n")) {
        if e.kind() == io::ErrorKind::BrokenPipe {
            std::process::exit(0);
        }
        eprintln!("error: stdout: {e}");
        std::process::exit(2);
    }
}

mod aggregate;
mod audit;
mod central;
mod counter;
mod experiment;
mod map;
mod mechanism_args;
mod outbox;
mod output;
mod privatize;
mod query_args;
mod sensitivity;

use clap::{Parser, Subcommand};
use geopriv::Query;
use query_args::{GrowthArgs, QueryCommand};
use std::io::{self, BufReader, BufWriter};
use std::process::ExitCode;

/// Local geo-privacy with smooth sensitivity.
///
/// A device holds a private point x (an income in dollars, a location in
/// metres) and releases f(x) plus noise; a server sums the releases.
/// Geo-privacy with budget ε per unit distance (per dollar, per metre)
/// keeps the releases of two points d apart indistinguishable up to a
/// factor exp(ε d). The noise is scaled to the smooth sensitivity S(x), a
/// bound on how fast f changes near x that itself changes by at most a
/// factor g(d) over a distance d; g grows at rate γ per unit distance,
/// part of ε.
///
/// Exit status: 0 on success; 1 if some input records were malformed or
/// rejected (each is reported on stderr, the others still processed); 2
/// for invalid flags or an unusable configuration (nothing processed); 3 if
/// the privacy ledger refused a release (budget exhausted, a ledger of
/// another unit or policy, or a corrupt, busy or unreadable ledger file):
/// distinct from 1 and 2 so scripts can stop releasing; 4 if `outbox upload` could not reach the collector (nothing
/// unsent is lost).
#[derive(Parser, Debug)]
#[command(name = "geopriv", version)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Print f(x), the pointwise Lipschitz constant L(x) and the smooth
    /// sensitivity S(x) of a query for points read from stdin.
    ///
    /// Input: one point per line, coordinates separated by commas
    /// (whitespace around them is allowed), e.g. `52000` or `41000, 73500`.
    ///
    /// Output: one line `value,pointwise_lipschitz,smooth_sensitivity` per
    /// input line, each number printed so that it parses back to exactly
    /// the same double. L(x) = sup |f(x) - f(y)| / d(x, y) over all y;
    /// S(x) = sup over y of L(y) / g(d(x, y)), the smallest bound above L
    /// that changes by at most a factor g(d) over a distance d.
    ///
    /// A malformed line (empty, wrong number of coordinates, not a number,
    /// NaN or infinite) gets a message `line N: <reason>` on stderr and no
    /// output line; all other lines are still answered, and the exit status
    /// is then 1.
    ///
    /// Example: `echo 95000 | geopriv sensitivity threshold --threshold
    /// 100000 --width 20000 --growth exp --gamma 1e-5` prints
    /// `0.25,0.00005,0.00005`.
    #[command(subcommand)]
    Sensitivity(QueryCommand<GrowthArgs>),

    /// Privatize f(x) for points read from stdin: one report per point.
    ///
    /// Input: one point per line as for `sensitivity`, or with --latlon
    /// `lat,lon` in WGS84 degrees (2-D queries), projected to metres.
    ///
    /// Output: one report per good line, as a JSON object per line
    /// (default) or binary frames (--format binary). A report holds the
    /// format version, the query's public parameters, the mechanism, its ε
    /// and δ, and the released value; never S(x) or the noise scale.
    /// Releases use a cryptographically secure generator unless --seed is
    /// given (the reports are then marked `"seeded":true`, which servers
    /// refuse unless run with --accept-seeded). Every report is charged to
    /// the --ledger file before it is written, or the run says --unmetered
    /// (simulations). Malformed lines and refused releases get `line N:
    /// <reason>` on stderr, the rest are still released, and the exit
    /// status is then 1.
    ///
    /// With --latlon, ε is per projected metre (per Web Mercator metre by
    /// default: ε/cos(lat) per ground metre).
    ///
    /// Example: `echo 95000 | geopriv privatize threshold --threshold
    /// 100000 --width 20000 --mechanism polyplace --epsilon 1e-4 --unit
    /// per-dollar --ledger device.json --budget-epsilon 1e-3`.
    #[command(subcommand)]
    Privatize(QueryCommand<privatize::PrivatizeArgs>),

    /// Aggregate reports from stdin (JSON lines or binary frames) into one
    /// JSON estimate per query id: n, mean, sum, standard error, 95% CI.
    ///
    /// Records are read as bytes, one per line (JSON) or per 0x00-ended
    /// frame (binary). Each report is validated against the server's policy
    /// (known version, finite value, valid query, ε and δ within the
    /// limits), grouped by (query, mechanism, ε, δ) -- reports of different
    /// mechanisms or budgets are never averaged together -- and clipped to
    /// the public bound B = [f_min - zσ_max, f_max + zσ_max] of its group;
    /// each estimate carries B, the honest bias bound and the influence
    /// bound width(B)/n. Rejected records (not UTF-8, too long, malformed,
    /// unknown version, over the policy, ...) get `line N: <reason> [code]`
    /// (or `record N` for binary) on stderr, escaped, and are not counted;
    /// the exit status is then 1. Blank lines, `#` comment lines and a
    /// byte-order mark are skipped. Memory is bounded by --max-record-bytes
    /// and --max-queries, whatever the input.
    Aggregate(aggregate::AggregateArgs),

    /// Numerical privacy audit of a mechanism on a query (docs/MATH.md §6).
    ///
    /// Prints one JSON object: mechanism, query, epsilon, delta, pairs,
    /// max_loss_ratio (max of |ln p_x(y) - ln p_x'(y)| / (ε d) over input
    /// pairs and outputs), the worst pair, and excess_mass for the
    /// approximate-GP `laplace`. Exit status 1 if max_loss_ratio > 1 + 1e-9
    /// or the excess mass exceeds δ. With `--sampling`, the black-box
    /// tester of actual releases instead (docs/MATH.md §8.2).
    #[command(subcommand)]
    Audit(QueryCommand<audit::AuditArgs>),

    /// Reproduce the paper's experiments (tables and PNG plots under out/).
    #[command(subcommand)]
    Experiment(experiment::ExperimentCommand),

    /// End-to-end demo: a geo-private KDE of the bundled airports.
    Demo(experiment::DemoArgs),

    /// The central model: private medians/quantiles of a whole dataset,
    /// Smooth Noisy Max, instance-based noise, their audits and experiments.
    #[command(subcommand)]
    Central(central::CentralCommand),
    /// Density maps under one per-device budget: device release, server
    /// aggregation (map and per-cell standard errors), the planner, and a
    /// measurement sweep on the synthetic city (docs/MATH.md §9).
    #[command(subcommand)]
    Map(map::MapCommand),
    /// The device outbox: reports kept in the ledger (`privatize --ledger
    /// ... --outbox`) until a collector (`geopriv-serve`) stored them.
    #[command(subcommand)]
    Outbox(outbox::OutboxCommand),
}

fn main() -> ExitCode {
    match Cli::parse().command {
        Command::Sensitivity(cmd) => sensitivity_main(&cmd),
        Command::Privatize(cmd) => privatize_main(&cmd),
        Command::Aggregate(args) => aggregate_main(&args),
        Command::Audit(cmd) => audit_main(&cmd),
        Command::Experiment(cmd) => experiment_exit(experiment::run(cmd).map_err(Into::into)),
        Command::Demo(args) => experiment_exit(experiment::run_demo(args).map_err(Into::into)),
        Command::Central(cmd) => experiment_exit(central::run(cmd)),
        Command::Outbox(cmd) => outbox::run(cmd),
        Command::Map(cmd) => match map::run(cmd) {
            Ok(true) => ExitCode::SUCCESS,
            Ok(false) => ExitCode::from(1),
            Err(e) => {
                eprintln!("error: {e}");
                ExitCode::from(2)
            }
        },
    }
}

/// Exit status of `privatize` when the ledger refused at least one release.
const EXIT_LEDGER_REFUSED: u8 = 3;

fn experiment_exit(result: Result<(), Box<dyn std::error::Error + Send + Sync>>) -> ExitCode {
    match result {
        Ok(()) => ExitCode::SUCCESS,
        // An existing output without --force: a usage error, nothing run.
        Err(e) if output::is_output_exists(e.as_ref()) => {
            eprintln!("error: {e}");
            ExitCode::from(2)
        }
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::FAILURE
        }
    }
}

fn exit_for(malformed: u64, result: io::Result<()>) -> ExitCode {
    match result {
        Ok(()) if malformed == 0 => ExitCode::SUCCESS,
        Ok(()) => ExitCode::from(1),
        Err(e) if e.kind() == io::ErrorKind::BrokenPipe => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::from(2)
        }
    }
}

fn privatize_main(cmd: &QueryCommand<privatize::PrivatizeArgs>) -> ExitCode {
    let args = cmd.common();
    // A region's GeoJSON is lon/lat under --latlon, projected like the points.
    let geometry_projection = match cmd {
        QueryCommand::Region { .. } => args.projection(2).unwrap_or_else(|e| flag_error(e)),
        _ => None,
    };
    let query = cmd
        .build_with(geometry_projection.as_deref())
        .unwrap_or_else(|e| flag_error(e));
    let mechanism = args.mechanism().unwrap_or_else(|e| flag_error(e));
    let ledger = match args.ledger(&mechanism) {
        Ok(l) => l,
        Err(privatize::LedgerOpenError::Flags(e)) => flag_error(e),
        // The ledger itself refused (another unit or policy, corrupt,
        // busy): exit status 3 as documented, not a usage error.
        Err(privatize::LedgerOpenError::Refused(e)) => {
            eprintln!("error: {e}");
            return ExitCode::from(EXIT_LEDGER_REFUSED);
        }
    };
    let mut plan = privatize::Plan {
        descriptor: query.descriptor(),
        mechanism,
        format: args.format,
        projection: args
            .projection(query.dimension())
            .unwrap_or_else(|e| flag_error(e)),
        ledger,
        outbox: args.outbox,
        query,
    };
    let mut rng: Box<dyn geopriv::device::budget::NoiseRng> = match args.seed {
        Some(seed) => Box::new(<rand::rngs::StdRng as rand::SeedableRng>::seed_from_u64(
            seed,
        )),
        None => Box::new(geopriv::SecureRng::new()),
    };
    let input = BufReader::with_capacity(1 << 16, io::stdin().lock());
    let output = BufWriter::with_capacity(1 << 16, io::stdout().lock());
    let errors = BufWriter::new(io::stderr().lock());
    let result = privatize::run(&mut plan, rng.as_mut(), input, output, errors);
    if matches!(&result, Ok(s) if s.ledger_refused > 0) {
        return ExitCode::from(EXIT_LEDGER_REFUSED);
    }
    let malformed = result.as_ref().map_or(0, |s| s.malformed);
    exit_for(malformed, result.map(|_| ()))
}

fn aggregate_main(args: &aggregate::AggregateArgs) -> ExitCode {
    let policy = args.policy().unwrap_or_else(|e| flag_error(e));
    let config = args.config().unwrap_or_else(|e| flag_error(e));
    let output = BufWriter::new(io::stdout().lock());
    let errors = BufWriter::new(io::stderr().lock());
    if args.max_report_ids > aggregate::MAX_REPORT_IDS_LIMIT {
        flag_error(format!(
            "--max-report-ids at most {}",
            aggregate::MAX_REPORT_IDS_LIMIT
        ));
    }
    let result = aggregate::run(
        &policy,
        config,
        args.format_choice(),
        args.max_record_bytes,
        args.max_report_ids,
        args.threads(),
        io::stdin().lock(),
        output,
        errors,
    );
    match result {
        Ok(summary) if summary.rejected == 0 => ExitCode::SUCCESS,
        Ok(_) => ExitCode::from(1),
        Err(geopriv::server::ingest::IngestError::Io(e)) => exit_for(0, Err(e)),
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::from(2)
        }
    }
}

fn audit_main(cmd: &QueryCommand<audit::AuditArgs>) -> ExitCode {
    let args = cmd.common();
    let query = cmd.build().unwrap_or_else(|e| flag_error(e));
    let mechanism = args.mechanism.build().unwrap_or_else(|e| flag_error(e));
    if args.pairs == 0 {
        flag_error("--pairs must be at least 1");
    }
    if args.sampling {
        if args.samples == 0 || args.pilot == 0 {
            flag_error("--samples and --pilot must be at least 1");
        }
        if !(args.alpha > 0.0 && args.alpha < 1.0) {
            flag_error("--alpha must be strictly between 0 and 1");
        }
        let options = geopriv::audit::sampling::SamplingOptions {
            samples: args.samples,
            pilot: args.pilot,
            alpha: args.alpha,
            seed: args.seed,
            ..Default::default()
        };
        return print_verdict(
            geopriv::audit::sampling::sampling_audit(&mechanism, &query, &options),
            |r| r.passed,
        );
    }
    print_verdict(
        geopriv::audit::audit_mechanism(&mechanism, &query, args.pairs, args.seed),
        |r| r.passed,
    )
}

/// Print an audit report as one JSON line; exit 0 if it passed, 1 if not,
/// 2 (through `flag_error`) if the audit was refused.
fn print_verdict<T: serde::Serialize>(
    outcome: geopriv::Result<T>,
    passed: impl Fn(&T) -> bool,
) -> ExitCode {
    match outcome {
        Ok(report) => {
            outln!(
                "{}",
                serde_json::to_string(&report).unwrap_or_else(|e| flag_error(e))
            );
            if passed(&report) {
                ExitCode::SUCCESS
            } else {
                ExitCode::from(1)
            }
        }
        Err(e) => flag_error(e),
    }
}

/// Invalid flag combinations found after parsing (e.g. an interval narrower
/// than its ramps): reported like clap's own errors, exit status 2.
fn flag_error(message: impl std::fmt::Display) -> ! {
    eprintln!("error: {message}\n\nFor more information, try '--help'.");
    std::process::exit(2)
}

fn sensitivity_main(cmd: &QueryCommand<GrowthArgs>) -> ExitCode {
    let query = cmd.build().unwrap_or_else(|e| flag_error(e));
    let growth = cmd.common().growth().unwrap_or_else(|e| flag_error(e));
    let input = BufReader::with_capacity(1 << 16, io::stdin().lock());
    let output = BufWriter::with_capacity(1 << 16, io::stdout().lock());
    let errors = BufWriter::new(io::stderr().lock());
    match sensitivity::run(&query, growth, input, output, errors) {
        Ok(summary) if summary.malformed == 0 => ExitCode::SUCCESS,
        Ok(_) => ExitCode::from(1),
        // The reader of our output went away (e.g. `| head`): stop quietly.
        Err(e) if e.kind() == io::ErrorKind::BrokenPipe => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::from(1)
        }
    }
}
