//! `geopriv privatize <family>`: one report per input point.

use crate::mechanism_args::MechanismArgs;
use crate::sensitivity::for_each_point;
use clap::{Args, ValueEnum};
use geopriv::device::budget::{BudgetPolicy, BudgetUnit, FileLedger, Ledger, NoiseRng};
use geopriv::geo::{LatLon, LocalEquirectangular, Projection, WebMercator};
use geopriv::{AnyQuery, Mechanism, Query, QueryDescriptor, Report};
use std::io::{self, BufRead, Write};

/// Output encodings.
#[derive(ValueEnum, Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    /// One JSON object per line.
    Json,
    /// postcard frames, COBS-encoded, each followed by a 0x00 byte.
    Binary,
}

/// How lat/lon input is turned into metres.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum ProjectionChoice {
    /// Web Mercator (EPSG:3857) metres, as in the paper.
    Mercator,
    /// Local equirectangular metres around a reference point.
    Local(f64, f64),
}

fn projection(s: &str) -> Result<ProjectionChoice, String> {
    if s == "mercator" {
        return Ok(ProjectionChoice::Mercator);
    }
    let rest = s.strip_prefix("local:").ok_or_else(|| {
        format!(
            "`{}`: expected `mercator` or `local:LAT,LON`",
            geopriv::server::escape::Untrusted(s)
        )
    })?;
    let p = crate::query_args::pair(rest)?;
    Ok(ProjectionChoice::Local(p.0[0], p.0[1]))
}

fn unit(s: &str) -> Result<BudgetUnit, String> {
    s.parse().map_err(|e: geopriv::Error| e.to_string())
}

/// Flags of `privatize` (besides the query's own).
#[derive(Args, Debug, Clone)]
#[command(group(clap::ArgGroup::new("metering").required(true).args(["ledger", "unmetered"])))]
pub struct PrivatizeArgs {
    #[command(flatten)]
    pub mechanism: MechanismArgs,
    /// Seed a reproducible (NOT secure) generator; without it the noise
    /// comes from a cryptographically secure generator keyed by the OS.
    #[arg(long, value_name = "N")]
    pub seed: Option<u64>,
    /// Output encoding.
    #[arg(long, value_enum, default_value = "json")]
    pub format: Format,
    /// Input lines are `lat,lon` in WGS84 degrees, projected to metres
    /// (2-D queries only). --epsilon is then per *projected* metre: under
    /// Web Mercator (the default projection) one ground metre is 1/cos(lat)
    /// projected metres, so ε per projected metre is ε/cos(lat) per ground
    /// metre (twice as much at 60°); `local:LAT,LON` gives ground metres
    /// near its reference point.
    #[arg(long)]
    pub latlon: bool,
    /// Device ledger file (created if missing): every report is charged to
    /// it, durably, before it is written (docs/MATH.md §8.3). Needs
    /// --budget-epsilon; a ledger whose unit or totals differ from the
    /// flags is refused.
    #[arg(long, value_name = "PATH")]
    pub ledger: Option<std::path::PathBuf>,
    /// No ledger: for simulations where each input line is a different
    /// device. Either this or --ledger is required.
    #[arg(long)]
    pub unmetered: bool,
    /// Unit of --epsilon, charged to the ledger: per-metre (ground
    /// metres), per-mercator-metre, per-dollar, local-dp or custom:NAME.
    /// Default: local-dp for `ldp`; with --latlon, per-mercator-metre under
    /// the Mercator projection and per-metre under `local:` (any other unit
    /// is refused there); otherwise required with --ledger.
    #[arg(long, value_name = "UNIT", value_parser = unit)]
    pub unit: Option<BudgetUnit>,
    /// The ledger's pinned total ε (in --unit).
    #[arg(long, value_name = "E", value_parser = crate::query_args::positive, requires = "ledger")]
    pub budget_epsilon: Option<f64>,
    /// The ledger's pinned total δ.
    #[arg(long, value_name = "D", default_value = "0", requires = "ledger")]
    pub budget_delta: f64,
    /// A periodic budget: the period's length in seconds (86400 for a
    /// day); --budget-epsilon is then the lifetime cap and
    /// --period-epsilon the ε allowed within each period.
    #[arg(long, value_name = "SECONDS", requires_all = ["ledger", "period_epsilon"])]
    pub period_seconds: Option<u64>,
    /// ε allowed per period (with --period-seconds).
    #[arg(long, value_name = "E", value_parser = crate::query_args::positive, requires = "period_seconds")]
    pub period_epsilon: Option<f64>,
    /// δ allowed per period (with --period-seconds).
    #[arg(long, value_name = "D", default_value = "0", requires = "ledger")]
    pub period_delta: f64,
    /// A program holding the platform's monotonic counter (a wrapper
    /// around a TPM NV counter, a counter service): `PROG read` prints it,
    /// `PROG advance-to N` raises it to at least N (then `PROG read` must
    /// print exactly N, else nothing is released). The ledger file is then
    /// bound to the counter (refused if it counts fewer releases: rolled
    /// back, restored, deleted) and every writer must hold it. Not a file
    /// beside the ledger: it would roll back with it (docs/MATH.md §8.3).
    #[arg(long, value_name = "PROG", requires = "ledger")]
    pub counter_command: Option<std::path::PathBuf>,
    /// Seconds a run of the --counter-command program may take (exit and
    /// close its stdout); a program still running then is killed and
    /// nothing is released.
    #[arg(long, value_name = "SECONDS", default_value = "10", value_parser = counter_timeout_seconds, requires = "counter_command")]
    pub counter_timeout: f64,
    /// Also keep each report in the ledger's outbox, in the same atomic
    /// write as its charge, until `geopriv outbox upload` has it stored by
    /// a collector (a report charged while offline is never lost).
    #[arg(long, requires = "ledger")]
    pub outbox: bool,
    /// Projection for --latlon: `mercator` or `local:LAT,LON`.
    #[arg(long, value_name = "mercator|local:LAT,LON", value_parser = projection, default_value = "mercator", allow_hyphen_values = true)]
    pub projection: ProjectionChoice,
}

/// Why `--ledger` could not be opened: the flags (a usage error, exit
/// status 2) or the ledger itself (another unit or policy, a corrupt,
/// busy or unreadable file: the ledger refused, exit status 3 as
/// documented; it was 2 with a usage hint, attack6).
#[derive(Debug)]
pub enum LedgerOpenError {
    /// The flags do not make a policy.
    Flags(String),
    /// The ledger file refused (nothing released).
    Refused(String),
}

/// The pinned ledger policy of the flags: `total` ε (and δ) for life, and
/// with `period = Some((seconds, ε))` at most that ε (and `period_delta`)
/// per period.
pub fn policy(
    unit: BudgetUnit,
    total: f64,
    delta: f64,
    period: Option<(u64, f64)>,
    period_delta: f64,
) -> Result<BudgetPolicy, String> {
    match period {
        Some((seconds, per_period)) => {
            BudgetPolicy::periodic(unit, per_period, period_delta, seconds, total, delta)
        }
        None => BudgetPolicy::new(unit, total, delta),
    }
    .map_err(|e| e.to_string())
}

/// What a run saw.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Summary {
    /// Reports written.
    pub released: u64,
    /// Malformed lines (reported on the error stream).
    pub malformed: u64,
    /// Releases the ledger refused (budget exhausted, unit or policy
    /// mismatch, unreadable ledger): exit status 3.
    pub ledger_refused: u64,
}

/// Everything a run needs besides the streams.
pub struct Plan {
    pub query: AnyQuery,
    pub descriptor: QueryDescriptor,
    pub mechanism: Mechanism,
    pub format: Format,
    pub projection: Option<Box<dyn Projection>>,
    /// The device's ledger; `None` only for `--unmetered`.
    pub ledger: Option<FileLedger>,
    /// Keep each report in the ledger's outbox too (`--outbox`).
    pub outbox: bool,
}

impl PrivatizeArgs {
    /// The mechanism with the unit of its ε (from --unit, or implied).
    pub fn mechanism(&self) -> Result<Mechanism, String> {
        let m = self.mechanism.build()?;
        if m.name() != geopriv::MechanismName::Ldp {
            // Both forms of the privacy level (docs/MATH.md §14).
            let (word, short) = match (&self.unit, self.latlon) {
                (Some(BudgetUnit::PerDollar), _) => ("dollar", " dollars"),
                (Some(BudgetUnit::PerMetre), _) | (None, true) => ("metre", " m"),
                _ => ("unit", ""),
            };
            eprintln!(
                "{}",
                crate::mechanism_args::describe(
                    m.epsilon(),
                    self.mechanism.within,
                    self.mechanism.level,
                    word,
                    short
                )
            );
        }
        if m.unit().is_some() && self.unit.is_none() {
            return Ok(m); // local DP: unit implied
        }
        let latlon_unit = match self.projection {
            ProjectionChoice::Mercator => BudgetUnit::PerMercatorMetre,
            ProjectionChoice::Local(..) => BudgetUnit::PerMetre,
        };
        let unit = match (&self.unit, self.latlon) {
            (Some(u), true) if *u != latlon_unit => {
                return Err(format!(
                    "--latlon with this projection releases epsilon {latlon_unit}, not {u} (docs/MATH.md §8.3)"
                ))
            }
            (Some(u), _) => u.clone(),
            (None, true) => latlon_unit,
            (None, false) if self.ledger.is_some() => {
                return Err("--ledger needs --unit (the unit of --epsilon: per-metre, per-dollar, local-dp or custom:NAME)".into())
            }
            (None, false) => return Ok(m),
        };
        m.with_unit(unit).map_err(|e| e.to_string())
    }

    /// The ledger named by --ledger, opened (or created) under the pinned
    /// policy of the flags.
    pub fn ledger(&self, mechanism: &Mechanism) -> Result<Option<FileLedger>, LedgerOpenError> {
        let Some(path) = &self.ledger else {
            return Ok(None);
        };
        let total = self
            .budget_epsilon
            .ok_or("--ledger needs --budget-epsilon (the pinned total)")
            .map_err(|e| LedgerOpenError::Flags(e.into()))?;
        let unit = mechanism
            .unit()
            .cloned()
            .ok_or_else(|| LedgerOpenError::Flags("--ledger needs --unit".into()))?;
        let policy = policy(
            unit,
            total,
            self.budget_delta,
            self.period_seconds.zip(self.period_epsilon),
            self.period_delta,
        )
        .map_err(LedgerOpenError::Flags)?;
        let refused = |e: geopriv::Error| LedgerOpenError::Refused(e.to_string());
        let Some(program) = &self.counter_command else {
            return FileLedger::open_or_create(path, &policy)
                .map(Some)
                .map_err(refused);
        };
        // A missing file while the counter counts releases was deleted: it
        // is refused, not created afresh (unbound).
        let timeout = std::time::Duration::try_from_secs_f64(self.counter_timeout)
            .unwrap_or(std::time::Duration::MAX);
        let counter = crate::counter::CommandCounter::new(program.clone(), timeout);
        FileLedger::open_or_create_with_counter(path, &policy, Box::new(counter))
            .map(Some)
            .map_err(refused)
    }

    /// The projection for --latlon (None without it).
    pub fn projection(&self, dimension: usize) -> Result<Option<Box<dyn Projection>>, String> {
        if !self.latlon {
            return Ok(None);
        }
        if dimension != 2 {
            return Err(format!(
                "--latlon needs a 2-D query (this one has {dimension} coordinate(s))"
            ));
        }
        Ok(Some(match self.projection {
            ProjectionChoice::Mercator => Box::new(WebMercator),
            ProjectionChoice::Local(lat, lon) => Box::new(
                LocalEquirectangular::new(LatLon::new(lat, lon).map_err(|e| e.to_string())?)
                    .map_err(|e| e.to_string())?,
            ),
        }))
    }
}

/// Reads points (or lat/lon pairs), writes one report per good line and
/// `line N: <reason>` on `err` for each bad one; later lines go on.
pub fn run<R: BufRead, W: Write, E: Write>(
    plan: &mut Plan,
    rng: &mut dyn NoiseRng,
    input: R,
    mut out: W,
    err: E,
) -> io::Result<Summary> {
    let dim = if plan.projection.is_some() {
        2
    } else {
        plan.query.dimension()
    };
    let name = plan.mechanism.name();
    let (epsilon, delta) = (plan.mechanism.epsilon(), plan.mechanism.delta());
    let seeded = rng.is_seeded();
    let mut ledger_refused = 0u64;
    let mut pending_line: Option<Report> = None;
    let (released, malformed) = for_each_point(input, dim, err, |point| {
        pending_line = None;
        let value = (|| {
            if let Some(p) = &plan.projection {
                let ll = LatLon::new(point[0], point[1]).map_err(|e| e.to_string())?;
                let xy = p.forward(ll).map_err(|e| e.to_string())?;
                point.clear();
                point.extend_from_slice(&xy);
            }
            match &mut plan.ledger {
                Some(ledger) if plan.outbox => {
                    // Charge, release and keep the report (the JSON line)
                    // in the outbox in one write.
                    let charge = plan.mechanism.charge_in(ledger.state().unit());
                    let (mechanism, query, desc) = (&plan.mechanism, &plan.query, &plan.descriptor);
                    let mut value = f64::NAN;
                    charge
                        .and_then(|charge| {
                            ledger.spend_to_outbox(&charge, || {
                                value = mechanism.privatize_unmetered(query, point, rng)?;
                                let report = Report::new(desc.clone(), name, epsilon, delta, value)
                                    .with_seeded(seeded)
                                    .with_random_id(rng);
                                pending_line = Some(report.clone());
                                Ok(report.to_json_line())
                            })
                        })
                        .map(|_| value)
                }
                Some(ledger) => {
                    plan.mechanism
                        .privatize(ledger as &mut dyn Ledger, &plan.query, point, rng)
                }
                None => plan.mechanism.privatize_unmetered(&plan.query, point, rng),
            }
            .map_err(|e| {
                if matches!(
                    e,
                    geopriv::Error::BudgetExceeded { .. }
                        | geopriv::Error::UnitMismatch { .. }
                        | geopriv::Error::LedgerPolicyMismatch { .. }
                        | geopriv::Error::InvalidLedgerState { .. }
                        | geopriv::Error::LedgerIo { .. }
                        | geopriv::Error::CounterNotAdvanced { .. }
                ) {
                    ledger_refused += 1;
                }
                e.to_string()
            })
        })();
        Ok(match value {
            Ok(value) => {
                // The report id comes from the noise's generator, after the
                // noise (seeded runs stay reproducible); an outbox report
                // is printed as it was kept.
                let report = match pending_line.take() {
                    Some(r) => r,
                    None => Report::new(plan.descriptor.clone(), name, epsilon, delta, value)
                        .with_seeded(seeded)
                        .with_random_id(rng),
                };
                match plan.format {
                    Format::Json => report.write_json_line(&mut out)?,
                    Format::Binary => report.write_frame(&mut out)?,
                }
                // With a ledger, each report leaves before the next line is
                // charged (attack10 O2): a failing output (a full disk, a
                // reader that quit) stops the run with at most this one
                // report charged and lost, not a buffer of them. The flush
                // is one write(2) next to the ledger's fsync'd write.
                if plan.ledger.is_some() {
                    out.flush()?;
                }
                Ok(())
            }
            Err(reason) => Err(reason),
        })
    })?;
    out.flush()?;
    Ok(Summary {
        released,
        malformed,
        ledger_refused,
    })
}

/// `--counter-timeout`: a finite number of seconds, at least 1 ms (below
/// that no program can answer, and the message rounded it to "0 s":
/// attack13 O4).
pub(crate) fn counter_timeout_seconds(s: &str) -> Result<f64, String> {
    let v = crate::query_args::positive(s)?;
    if v >= 1e-3 {
        Ok(v)
    } else {
        Err(format!("{v} s is too short: at least 0.001 s"))
    }
}
