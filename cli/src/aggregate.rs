//! `geopriv aggregate`: validate reports from stdin and print one estimate
//! per query id. Memory grows with the number of distinct queries, not
//! with the number of reports.

use clap::{Args, ValueEnum};
use geopriv::report::read_frames;
use geopriv::{Aggregator, Report, ValidationPolicy};
use serde::Serialize;
use std::collections::BTreeMap;
use std::io::{self, BufRead, Write};

/// Input encodings.
#[derive(ValueEnum, Debug, Clone, Copy, PartialEq, Eq)]
pub enum InputFormat {
    /// JSON lines if the input starts with `{` (after whitespace), else binary frames.
    Auto,
    /// One JSON object per line.
    Json,
    /// COBS-framed postcard reports, each followed by 0x00.
    Binary,
}

/// Flags of `aggregate`: the server's validation policy.
#[derive(Args, Debug, Clone)]
pub struct AggregateArgs {
    /// Input encoding.
    #[arg(long, value_enum, default_value = "auto")]
    pub format: InputFormat,
    /// Largest geo-privacy ε per unit distance the server accepts.
    #[arg(long, value_name = "E", default_value = "1", value_parser = crate::query_args::positive)]
    pub max_epsilon: f64,
    /// Largest δ the server accepts (approximate-GP reports).
    #[arg(long, value_name = "D", default_value = "1e-4")]
    pub max_delta: f64,
    /// Also accept local-DP reports with LDP ε up to this value.
    #[arg(long, value_name = "E", value_parser = crate::query_args::positive)]
    pub allow_ldp: Option<f64>,
    /// Also accept reports marked `seeded` (made with a reproducible, NOT
    /// secure generator, e.g. `privatize --seed`). For tests only.
    #[arg(long)]
    pub accept_seeded: bool,
}

impl AggregateArgs {
    /// The policy described by the flags.
    pub fn policy(&self) -> Result<ValidationPolicy, String> {
        let mut p =
            ValidationPolicy::new(self.max_epsilon, self.max_delta).map_err(|e| e.to_string())?;
        if self.accept_seeded {
            p = p.accept_seeded();
        }
        match self.allow_ldp {
            Some(e) => p.allow_ldp(e).map_err(|e| e.to_string()),
            None => Ok(p),
        }
    }
}

/// One output line.
#[derive(Serialize)]
struct EstimateLine<'a> {
    query: &'a str,
    n: u64,
    mean: f64,
    sum: f64,
    standard_error: Option<f64>,
    ci95: Option<[f64; 2]>,
}

/// What a run saw.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Summary {
    /// Reports aggregated.
    pub accepted: u64,
    /// Records rejected (each reported on the error stream).
    pub rejected: u64,
}

/// Aggregates the reports on `input` and writes one JSON estimate per
/// query id (sorted by id) to `out`. Each rejected record gets
/// `line N: <reason>` (JSON) or `record N: <reason>` (binary) on `err`.
pub fn run<R: BufRead, W: Write, E: Write>(
    policy: &ValidationPolicy,
    format: InputFormat,
    mut input: R,
    mut out: W,
    mut err: E,
) -> io::Result<Summary> {
    let format = match format {
        InputFormat::Auto => {
            let head = input.fill_buf()?;
            match head.iter().find(|b| !b.is_ascii_whitespace()) {
                Some(b'{') | None => InputFormat::Json,
                Some(_) => InputFormat::Binary,
            }
        }
        f => f,
    };
    let mut cells: BTreeMap<String, Aggregator> = BTreeMap::new();
    let mut summary = Summary::default();
    let mut add = |report: Report, summary: &mut Summary| {
        let id = report.query.canonical_id();
        // Values were validated as finite, so adding cannot fail.
        let _ = cells.entry(id).or_default().add(report.value);
        summary.accepted += 1;
    };
    match format {
        InputFormat::Json | InputFormat::Auto => {
            let mut line = String::with_capacity(256);
            let mut number = 0u64;
            loop {
                line.clear();
                if input.read_line(&mut line)? == 0 {
                    break;
                }
                number += 1;
                match policy.accept_json(line.trim_end_matches(['\n', '\r'])) {
                    Ok(report) => add(report, &mut summary),
                    Err(reason) => {
                        writeln!(err, "line {number}: {reason}")?;
                        summary.rejected += 1;
                    }
                }
            }
        }
        InputFormat::Binary => {
            // Empty frames (repeated zeros) are skipped, so N counts reports.
            for (index, item) in read_frames(input).enumerate() {
                match item?.and_then(|r| policy.validate(&r).map(|()| r)) {
                    Ok(report) => add(report, &mut summary),
                    Err(reason) => {
                        writeln!(err, "record {}: {reason}", index + 1)?;
                        summary.rejected += 1;
                    }
                }
            }
        }
    }
    for (id, agg) in &cells {
        if let Some(e) = agg.estimate() {
            let line = EstimateLine {
                query: id,
                n: e.n,
                mean: e.mean,
                sum: e.sum,
                standard_error: e.standard_error,
                ci95: e.ci95,
            };
            serde_json::to_writer(&mut out, &line)?;
            out.write_all(b"\n")?;
        }
    }
    out.flush()?;
    err.flush()?;
    Ok(summary)
}
