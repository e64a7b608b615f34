//! `--counter-command PROG`: the platform's monotonic counter held by a
//! program the CLI runs (docs/MATH.md §8.3, "A counter for the CLI").
//!
//! Protocol: `PROG read` prints the counter as a decimal integer on stdout;
//! `PROG advance-to N` raises it to at least N (never lowers it; the ledger
//! then runs `PROG read` and requires exactly N, tidy14). Both exit
//! 0; any other exit, or an unreadable value, is a failure of the counter
//! (`LedgerIo`, nothing released), with the program's stderr (escaped) in
//! the message. PROG is run directly, not through a shell, with no stdin;
//! at most 4096 bytes of its output are kept (a `read` printing more is a
//! failure; what `advance-to` prints is dropped). Each run must finish
//! (exit and close its stdout) within a timeout (`--counter-timeout`,
//! default 10 s, the ledger lock's own wait): a program that hangs, or
//! that exits but leaves a background child holding its stdout, is killed
//! (the program itself, not its children) and is a failure of the counter
//! (attack12 O1: it held the ledger's lock for as long as it hung).
//! Its stderr is read only for a failure's message: a child left holding
//! only stderr does not delay a run that exited 0 (attack13 F1).
//! A wrapper around `tpm2_nvread` / `tpm2_nvincrement` (a TPM NV counter
//! increments by one: `advance-to N` increments until it reads N) or a
//! client of a counter service the device trusts is what this is for; a
//! counter kept in a file beside the ledger is not (MATH §8.3: it rolls
//! back with the ledger).

use std::io::Read;
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use geopriv::device::budget::MonotonicCounter;
use geopriv::server::escape::Untrusted;
use geopriv::{Error, Result};

/// A [`MonotonicCounter`] behind a program (module docs).
///
/// ```text
/// geopriv privatize ... --ledger device.json --counter-command /usr/local/bin/tpm-counter
/// ```
#[derive(Debug, Clone)]
pub struct CommandCounter {
    program: PathBuf,
    timeout: Duration,
}

impl CommandCounter {
    /// The counter held by `program`; each run must finish within
    /// `timeout` (exit and close its stdout; at most a year, so the
    /// deadline is a time), else it is killed and the counter has failed.
    pub fn new(program: PathBuf, timeout: Duration) -> Self {
        let timeout = timeout.min(Duration::from_secs(365 * 86_400));
        Self { program, timeout }
    }

    /// Run `program args...`; its stdout, or `LedgerIo`. Only the first
    /// [`MAX_OUTPUT`] bytes of stdout are kept: more is a failure when
    /// `output_needed` (a `read`), dropped otherwise (`advance-to`).
    fn run(&self, args: &[&str], output_needed: bool) -> Result<String> {
        let what = || format!("{} {}", self.program.display(), args.join(" "));
        let failed = |why: String| Error::LedgerIo {
            detail: format!(
                "the monotonic counter (--counter-command {}) failed: {why}",
                Untrusted(&what())
            ),
        };
        let deadline = Instant::now() + self.timeout;
        let mut child = Command::new(&self.program)
            .args(args)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .map_err(|e| failed(e.to_string()))?;
        let late = || {
            failed(format!(
                "it did not finish within {} s (--counter-timeout)",
                self.timeout.as_secs_f64()
            ))
        };
        // stdout and stderr on their own threads (a program blocked
        // writing a full stderr pipe would never close stdout), both kept
        // to MAX_OUTPUT bytes; the answers wait at most until the deadline
        // (a reader left behind by a timeout ends with the process).
        let (err_tx, err_rx) = mpsc::channel();
        if let Some(e) = child.stderr.take() {
            std::thread::spawn(move || err_tx.send(bounded(e, true)));
        }
        let (out_tx, out_rx) = mpsc::channel();
        if let Some(o) = child.stdout.take() {
            std::thread::spawn(move || out_tx.send(bounded(o, !output_needed)));
        }
        let left = || deadline.saturating_duration_since(Instant::now());
        let mut stdout = match out_rx.recv_timeout(left()) {
            Ok(out) => out,
            Err(mpsc::RecvTimeoutError::Disconnected) => Vec::new(),
            Err(mpsc::RecvTimeoutError::Timeout) => {
                stop(&mut child);
                return Err(late());
            }
        };
        if stdout.len() as u64 > MAX_OUTPUT && output_needed {
            stop(&mut child);
            return Err(failed(format!("it printed more than {MAX_OUTPUT} bytes")));
        }
        stdout.truncate(MAX_OUTPUT as usize);
        // stdout is closed; the program must also exit in time.
        let status = loop {
            match child.try_wait().map_err(|e| failed(e.to_string()))? {
                Some(status) => break status,
                None if left().is_zero() => {
                    stop(&mut child);
                    return Err(late());
                }
                None => std::thread::sleep(left().min(Duration::from_millis(2))),
            }
        };
        if !status.success() {
            // Only a failure's message reads stderr: a program that exits 0
            // but leaves a child holding its stderr (a daemon it started)
            // made every run wait out the whole timeout and then succeed,
            // with the ledger's lock held (attack13, docs/ATTACK-13.md F1).
            let stderr = err_rx.recv_timeout(left()).unwrap_or_default();
            let stderr = String::from_utf8_lossy(&stderr);
            return Err(failed(format!("{status}: {}", Untrusted(stderr.trim()))));
        }
        String::from_utf8(stdout).map_err(|_| failed("its output is not UTF-8".into()))
    }
}

/// Kill a counter program that failed its protocol (too slow, too much
/// output) and reap it; its own children are left alone.
fn stop(child: &mut std::process::Child) {
    let _ = child.kill();
    let _ = child.wait();
}

/// The most a counter program's stdout (and the part of its stderr kept)
/// may hold: a count is at most 20 digits. Its output was read whole:
/// 200 MB printed took 203 MB of memory (attack12, docs/ATTACK-12.md O1).
const MAX_OUTPUT: u64 = 4096;

/// The first `MAX_OUTPUT + 1` bytes of `pipe`; the rest is read and
/// dropped (so the program is not blocked on a full pipe) if `drain` or
/// there was no more, else left for the caller to kill the program.
fn bounded(mut pipe: impl Read, drain: bool) -> Vec<u8> {
    let mut kept = Vec::new();
    let _ = (&mut pipe).take(MAX_OUTPUT + 1).read_to_end(&mut kept);
    if drain || kept.len() as u64 <= MAX_OUTPUT {
        let _ = std::io::copy(&mut pipe, &mut std::io::sink());
    }
    kept
}

impl MonotonicCounter for CommandCounter {
    fn read(&self) -> Result<u64> {
        let text = self.run(&["read"], true)?;
        text.trim().parse::<u64>().map_err(|_| Error::LedgerIo {
            detail: format!(
                "the monotonic counter (--counter-command {} read) printed {:?}, not a count",
                Untrusted(&self.program.display().to_string()),
                Untrusted(text.trim()).to_string()
            ),
        })
    }

    fn advance_to(&mut self, value: u64) -> Result<()> {
        self.run(&["advance-to", &value.to_string()], false)
            .map(|_| ())
    }
}
