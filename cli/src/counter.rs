//! `--counter-command PROG`: the platform's monotonic counter held by a
//! program the CLI runs (docs/MATH.md §8.3, "A counter for the CLI").
//!
//! Protocol: `PROG read` prints the counter as a decimal integer on stdout;
//! `PROG advance-to N` raises it to at least N (never lowers it). Both exit
//! 0; any other exit, or an unreadable value, is a failure of the counter
//! (`LedgerIo`, nothing released), with the program's stderr (escaped) in
//! the message. PROG is run directly, not through a shell, with no stdin.
//! A wrapper around `tpm2_nvread` / `tpm2_nvincrement` (a TPM NV counter
//! increments by one: `advance-to N` increments until it reads N) or a
//! client of a counter service the device trusts is what this is for; a
//! counter kept in a file beside the ledger is not (MATH §8.3: it rolls
//! back with the ledger).

use std::path::PathBuf;
use std::process::{Command, Stdio};

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
}

impl CommandCounter {
    /// The counter held by `program`.
    pub fn new(program: PathBuf) -> Self {
        Self { program }
    }

    /// Run `program args...`; its stdout, or `LedgerIo`.
    fn run(&self, args: &[&str]) -> Result<String> {
        let what = || format!("{} {}", self.program.display(), args.join(" "));
        let failed = |why: String| Error::LedgerIo {
            detail: format!(
                "the monotonic counter (--counter-command {}) failed: {why}",
                Untrusted(&what())
            ),
        };
        let out = Command::new(&self.program)
            .args(args)
            .stdin(Stdio::null())
            .output()
            .map_err(|e| failed(e.to_string()))?;
        if !out.status.success() {
            let stderr = String::from_utf8_lossy(&out.stderr);
            return Err(failed(format!(
                "{}: {}",
                out.status,
                Untrusted(stderr.trim())
            )));
        }
        String::from_utf8(out.stdout).map_err(|_| failed("its output is not UTF-8".into()))
    }
}

impl MonotonicCounter for CommandCounter {
    fn read(&self) -> Result<u64> {
        let text = self.run(&["read"])?;
        text.trim().parse::<u64>().map_err(|_| Error::LedgerIo {
            detail: format!(
                "the monotonic counter (--counter-command {} read) printed {:?}, not a count",
                self.program.display(),
                Untrusted(text.trim()).to_string()
            ),
        })
    }

    fn advance_to(&mut self, value: u64) -> Result<()> {
        self.run(&["advance-to", &value.to_string()]).map(|_| ())
    }
}
