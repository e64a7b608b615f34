//! `geopriv`: command-line front end of the geopriv SDK.
use clap::{Parser, Subcommand};

mod experiment;

#[derive(Parser)]
#[command(
    name = "geopriv",
    version,
    about = "Local geo-privacy with smooth sensitivity"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Reproduce the paper's experiments (tables and PNG plots under out/).
    #[command(subcommand)]
    Experiment(experiment::ExperimentCommand),
    /// End-to-end demo: a geo-private KDE of the bundled airports.
    Demo(experiment::DemoArgs),
}

fn main() -> std::process::ExitCode {
    let result = match Cli::parse().command {
        Command::Experiment(cmd) => experiment::run(cmd),
        Command::Demo(args) => experiment::run_demo(args),
    };
    match result {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e}");
            std::process::ExitCode::FAILURE
        }
    }
}
