//! `geopriv`: command-line front end of the geopriv SDK.

mod query_args;
mod sensitivity;

use clap::{Parser, Subcommand};
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
/// Exit status: 0 on success, 1 if some input lines were malformed (each
/// is reported on stderr), 2 for invalid flags.
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
}

fn main() -> ExitCode {
    match Cli::parse().command {
        Command::Sensitivity(cmd) => sensitivity_main(&cmd),
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
    match sensitivity::run(query.as_ref(), growth, input, output, errors) {
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
