//! `geopriv outbox`: upload the reports waiting in a ledger's outbox to a
//! collector, and list them (core: `geopriv::device::outbox`).

use clap::{Args, Subcommand};
use geopriv::device::budget::{BudgetUnit, FileLedger};
use geopriv::device::outbox::{self, Backoff, HttpTransport, UploadConfig};
use geopriv::server::escape::Untrusted;
use std::collections::BTreeSet;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

/// Exit status of `outbox upload` when the collector could not be reached
/// or kept failing (everything unsent stays in the outbox).
const EXIT_UNSENT: u8 = 4;

/// `geopriv outbox ...`
#[derive(Subcommand, Debug)]
pub enum OutboxCommand {
    /// Upload every waiting report to a collector's task, in batches, with
    /// retries (exponential backoff with jitter, at least the server's
    /// Retry-After). A report leaves the outbox only once the collector
    /// answered it accepted or duplicate (stored before: a retry after a
    /// lost answer counts once). A report the collector rejects stays in
    /// the outbox but is parked, with its code and reason, in --parked and
    /// not sent again.
    ///
    /// Prints one JSON line: accepted, duplicates, rejected, requests,
    /// remaining, stopped. Exit status: 0 all sent; 1 some reports were
    /// rejected (listed on stderr); 2 bad flags or an unusable ledger; 4
    /// the collector could not be reached or kept failing (nothing unsent
    /// is lost: run again later).
    ///
    /// `geopriv outbox upload --ledger device.json --unit per-dollar
    /// --budget-epsilon 1e-3 --url http://127.0.0.1:8080 --task income`
    Upload(UploadArgs),
    /// Print the waiting reports (JSON lines, oldest first).
    List(LedgerArgs),
}

/// The ledger and its pinned policy (as given to `privatize --ledger`).
#[derive(Args, Debug)]
pub struct LedgerArgs {
    /// Device ledger file.
    #[arg(long, value_name = "PATH")]
    ledger: PathBuf,
    /// The ledger's unit.
    #[arg(long, value_name = "UNIT", value_parser = |s: &str| s.parse::<BudgetUnit>().map_err(|e| e.to_string()))]
    unit: BudgetUnit,
    /// The ledger's pinned total ε.
    #[arg(long, value_name = "E", value_parser = crate::query_args::positive)]
    budget_epsilon: f64,
    /// The ledger's pinned total δ.
    #[arg(long, value_name = "D", default_value = "0")]
    budget_delta: f64,
    /// A periodic ledger's period in seconds.
    #[arg(long, value_name = "SECONDS", requires = "period_epsilon")]
    period_seconds: Option<u64>,
    /// A periodic ledger's ε per period.
    #[arg(long, value_name = "E", requires = "period_seconds")]
    period_epsilon: Option<f64>,
    /// A periodic ledger's δ per period.
    #[arg(long, value_name = "D", default_value = "0")]
    period_delta: f64,
    /// The program holding the ledger's platform monotonic counter, as
    /// given to `privatize --counter-command`. Needed for a ledger bound to
    /// a counter: its reports leave only once the counter counts them
    /// (a counter left behind by a failed advance is moved first).
    #[arg(long, value_name = "PROGRAM")]
    counter_command: Option<PathBuf>,
    /// Seconds the counter program may take per call (as `privatize`'s).
    #[arg(long, value_name = "SECONDS", default_value = "10", value_parser = crate::privatize::counter_timeout_seconds, requires = "counter_command")]
    counter_timeout: f64,
}

impl LedgerArgs {
    fn open(&self) -> Result<FileLedger, String> {
        let policy = crate::privatize::policy(
            self.unit.clone(),
            self.budget_epsilon,
            self.budget_delta,
            self.period_seconds.zip(self.period_epsilon),
            self.period_delta,
        )?;
        let Some(program) = &self.counter_command else {
            return FileLedger::open(&self.ledger, &policy).map_err(|e| e.to_string());
        };
        let timeout = std::time::Duration::try_from_secs_f64(self.counter_timeout)
            .unwrap_or(std::time::Duration::MAX);
        let counter = crate::counter::CommandCounter::new(program.clone(), timeout);
        FileLedger::open(&self.ledger, &policy)
            .and_then(|l| l.with_counter(Box::new(counter)))
            .map_err(|e| e.to_string())
    }
}

/// Flags of `outbox upload`.
#[derive(Args, Debug)]
pub struct UploadArgs {
    #[command(flatten)]
    ledger: LedgerArgs,
    /// The collector, `http://HOST:PORT`.
    #[arg(long)]
    url: String,
    /// The collector's task id.
    #[arg(long)]
    task: String,
    /// Most reports per request.
    #[arg(long, default_value_t = 100)]
    max_batch: usize,
    /// Attempts of one batch before giving up for this run.
    #[arg(long, default_value_t = 6)]
    max_attempts: u32,
    /// First retry delay in milliseconds (doubling, with jitter).
    #[arg(long, default_value_t = 1000)]
    backoff_ms: u64,
    /// Largest retry delay in milliseconds.
    #[arg(long, default_value_t = 300_000)]
    max_backoff_ms: u64,
    /// Parked (rejected) reports: JSON lines {id, code, reason}; default
    /// `LEDGER.parked` beside the ledger.
    #[arg(long, value_name = "PATH")]
    parked: Option<PathBuf>,
}

#[derive(serde::Serialize, serde::Deserialize)]
struct ParkedLine {
    id: u64,
    code: String,
    reason: String,
}

/// Parked reports of earlier runs (a missing file: none).
fn read_parked(path: &Path) -> Result<Vec<ParkedLine>, String> {
    let text = match std::fs::read_to_string(path) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(format!("{}: {e}", Untrusted(&path.display().to_string()))),
    };
    text.lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| {
            serde_json::from_str(l)
                .map_err(|e| format!("{}: {e}", Untrusted(&path.display().to_string())))
        })
        .collect()
}

/// JSON in printable ASCII: every character of a string outside U+0020 to
/// U+007E is written as a `\uXXXX` escape (UTF-16 units, a surrogate pair
/// above U+FFFF). Lossless (any JSON reader gets the same text back), and
/// the file holds no terminal control, bidi or format character (attack9
/// O3: the collector's codes and reasons were stored raw, so `cat
/// LEDGER.parked` reordered or drove the terminal).
///
/// ```text
/// {"reason":"a\u202eb"}  for the reason "a", U+202E, "b"
/// ```
struct AsciiJson;

impl serde_json::ser::Formatter for AsciiJson {
    fn write_string_fragment<W: ?Sized + Write>(
        &mut self,
        writer: &mut W,
        fragment: &str,
    ) -> std::io::Result<()> {
        for c in fragment.chars() {
            if (' '..='~').contains(&c) {
                writer.write_all(&[c as u8])?;
            } else {
                let mut units = [0u16; 2];
                for u in c.encode_utf16(&mut units) {
                    write!(writer, "\\u{u:04x}")?;
                }
            }
        }
        Ok(())
    }
}

/// One parked line in [`AsciiJson`].
fn parked_json(line: &ParkedLine) -> Result<String, String> {
    use serde::Serialize;
    let mut out = Vec::new();
    line.serialize(&mut serde_json::Serializer::with_formatter(
        &mut out, AsciiJson,
    ))
    .map_err(|e| e.to_string())?;
    String::from_utf8(out).map_err(|e| e.to_string())
}

/// Keep the parked reports still in the outbox (temporary file + rename).
/// The collector's codes and reasons are kept exactly, written as ASCII
/// JSON ([`AsciiJson`]): a program that shows the decoded text to a
/// person must still escape it (as `geopriv` does with `Untrusted`).
fn write_parked(path: &Path, lines: &[ParkedLine]) -> Result<(), String> {
    let mut text = String::new();
    for l in lines {
        text.push_str(&parked_json(l)?);
        text.push('\n');
    }
    let tmp = path.with_extension(format!("tmp{}", std::process::id()));
    std::fs::write(&tmp, text)
        .and_then(|()| std::fs::rename(&tmp, path))
        .map_err(|e| format!("{}: {e}", Untrusted(&path.display().to_string())))
}

pub fn run(cmd: OutboxCommand) -> ExitCode {
    let res = match cmd {
        OutboxCommand::List(a) => a.open().and_then(|mut l| {
            // What is printed may be sent on: the same check as an upload
            // (a counter left behind is moved first; attack15 O1).
            let reports = l.uploadable_reports().map_err(|e| e.to_string())?;
            // A reader that stops early (`| head`) ends the listing quietly;
            // `println!` would panic on the closed pipe.
            let mut out = std::io::BufWriter::new(std::io::stdout().lock());
            for (_, report) in reports {
                match writeln!(out, "{report}") {
                    Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => {
                        return Ok(ExitCode::SUCCESS)
                    }
                    Err(e) => return Err(format!("stdout: {e}")),
                    Ok(()) => {}
                }
            }
            match out.flush() {
                Err(e) if e.kind() != std::io::ErrorKind::BrokenPipe => Err(format!("stdout: {e}")),
                _ => Ok(ExitCode::SUCCESS),
            }
        }),
        OutboxCommand::Upload(a) => upload(&a),
    };
    res.unwrap_or_else(|e| {
        eprintln!("error: {e}");
        ExitCode::from(2)
    })
}

fn upload(a: &UploadArgs) -> Result<ExitCode, String> {
    let mut ledger = a.ledger.open()?;
    let parked_path = a.parked.clone().unwrap_or_else(|| {
        let mut p = a.ledger.ledger.clone().into_os_string();
        p.push(".parked");
        PathBuf::from(p)
    });
    let pending: BTreeSet<u64> = ledger
        .uploadable_reports()
        .map_err(|e| e.to_string())?
        .iter()
        .map(|(i, _)| *i)
        .collect();
    let mut lines: Vec<ParkedLine> = read_parked(&parked_path)?
        .into_iter()
        .filter(|l| pending.contains(&l.id))
        .collect();
    let mut parked: BTreeSet<u64> = lines.iter().map(|l| l.id).collect();
    let config = UploadConfig {
        max_reports: a.max_batch.max(1),
        max_attempts: a.max_attempts.max(1),
        backoff: Backoff {
            base_ms: a.backoff_ms,
            cap_ms: a.max_backoff_ms.max(a.backoff_ms),
        },
        ..UploadConfig::default()
    };
    let mut http = HttpTransport::new(&a.url, &a.task);
    let summary = outbox::upload(
        &mut ledger,
        &mut http,
        &config,
        &mut parked,
        &mut |ms| std::thread::sleep(std::time::Duration::from_millis(ms)),
        &mut geopriv::SecureRng::new(),
    )
    .map_err(|e| e.to_string())?;
    for r in &summary.rejected {
        eprintln!(
            "report {}: rejected ({}): {}",
            r.id,
            Untrusted(&r.code),
            Untrusted(&r.reason)
        );
        lines.push(ParkedLine {
            id: r.id,
            code: r.code.clone(),
            reason: r.reason.clone(),
        });
    }
    if !summary.rejected.is_empty() {
        write_parked(&parked_path, &lines)?;
    }
    outln!(
        "{}",
        serde_json::json!({
            "accepted": summary.accepted,
            "duplicates": summary.duplicates,
            "rejected": summary.rejected.len(),
            "requests": summary.requests,
            "remaining": summary.remaining,
            "parked": parked.len(),
            "stopped": summary.stopped.as_deref().map(|s| Untrusted(s).to_string()),
        })
    );
    Ok(if summary.stopped.is_some() {
        ExitCode::from(EXIT_UNSENT)
    } else if !summary.rejected.is_empty() {
        ExitCode::from(1)
    } else {
        ExitCode::SUCCESS
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// attack9 O3: codes and reasons from a hostile collector (bidi,
    /// format, C0/C1 controls, DEL, a character above U+FFFF) are written
    /// as printable ASCII and read back exactly.
    #[test]
    fn the_parked_file_is_ascii_and_keeps_the_collectors_text() {
        let d = std::env::temp_dir().join(format!("geopriv-parked-{}", std::process::id()));
        std::fs::create_dir_all(&d).unwrap();
        let path = d.join("ledger.parked");
        let reason = "a\u{202e}b\u{2066}c\u{200b}\u{1b}[2J\u{7f}\u{9b}31m\u{1F600}\"\\\u{e9}\n";
        let lines = [
            ParkedLine {
                id: 7,
                code: "evil\u{202e}code".into(),
                reason: reason.into(),
            },
            ParkedLine {
                id: u64::MAX,
                code: "malformed".into(),
                reason: "plain".into(),
            },
        ];
        write_parked(&path, &lines).unwrap();
        let bytes = std::fs::read(&path).unwrap();
        assert!(
            bytes
                .iter()
                .all(|&b| b == b'\n' || (0x20..0x7f).contains(&b)),
            "{}",
            String::from_utf8_lossy(&bytes)
        );
        let text = String::from_utf8(bytes).unwrap();
        assert!(
            text.contains("\\u202e") && text.contains("\\ud83d\\ude00"),
            "{text}"
        );
        assert!(
            text.ends_with(
                "{\"id\":18446744073709551615,\"code\":\"malformed\",\"reason\":\"plain\"}\n"
            ),
            "{text}"
        );
        let back = read_parked(&path).unwrap();
        assert_eq!(back.len(), 2);
        assert_eq!((back[0].id, back[0].code.as_str()), (7, "evil\u{202e}code"));
        assert_eq!(back[0].reason, reason);
        assert_eq!(
            serde_json::from_str::<serde_json::Value>(text.lines().next().unwrap()).unwrap()
                ["reason"],
            reason
        );
        let _ = std::fs::remove_dir_all(&d);
    }
}
