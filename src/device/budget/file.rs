//! A ledger persisted in a file, written ahead of every release.

use super::{BudgetPolicy, Charge, Ledger, PrivacyBudget};
use crate::error::{Error, Result};
use alloc::format;
use alloc::string::String;
use std::fs::{self, File};
use std::io::Write;
use std::path::{Path, PathBuf};

/// A [`PrivacyBudget`] kept in a file (JSON, [`PrivacyBudget::to_json`]),
/// updated **write-ahead**: every charge is on disk before the release it
/// pays for is returned (`docs/MATH.md §8.3`).
///
/// Each charge writes the new state to a temporary file next to the
/// ledger, `fsync`s it, renames it over the ledger (atomic on POSIX
/// filesystems) and `fsync`s the directory. A crash at any point leaves
/// either the old state (and the release was never returned) or the new
/// one (and the release may be lost before upload): a release is never
/// out while its charge is not on disk. Before each write the file is read
/// back and compared with what this process last wrote, so a second
/// writer, a restored backup or an edit during the run is refused
/// ([`Error::InvalidLedgerState`]) instead of overwritten.
///
/// ```
/// use geopriv::device::budget::{BudgetPolicy, BudgetUnit, Charge, FileLedger, Ledger};
/// # let dir = std::env::temp_dir().join(format!("geopriv-doc-{}", std::process::id()));
/// # std::fs::create_dir_all(&dir).unwrap();
/// let path = dir.join("ledger.json");
/// # let _ = std::fs::remove_file(&path);
/// let policy = BudgetPolicy::new(BudgetUnit::PerMetre, 0.01, 0.0)?;
/// let mut ledger = FileLedger::open_or_create(&path, &policy)?;
/// let charge = Charge::new(BudgetUnit::PerMetre, 0.004, 0.0)?;
/// ledger.spend(&charge, || Ok(0.7 /* privatize here */))?;
/// drop(ledger); // the app restarts
/// let ledger = FileLedger::open(&path, &policy)?;
/// assert_eq!(ledger.state().releases(), 1);
/// assert!(FileLedger::create(&path, &policy).is_err()); // no silent reset
/// # std::fs::remove_dir_all(&dir).unwrap();
/// # Ok::<(), geopriv::Error>(())
/// ```
#[derive(Debug)]
pub struct FileLedger {
    path: PathBuf,
    budget: PrivacyBudget,
    /// The file's contents as this process last wrote or read them.
    on_disk: String,
}

fn io_error(what: &str, path: &Path, e: std::io::Error) -> Error {
    Error::LedgerIo {
        detail: format!("{what} {}: {e}", path.display()),
    }
}

impl FileLedger {
    /// Open an existing ledger file under the app's pinned `policy`.
    /// Errors: the file is missing or unreadable ([`Error::LedgerIo`]), its
    /// state is invalid ([`Error::InvalidLedgerState`]) or disagrees with
    /// `policy` ([`Error::LedgerPolicyMismatch`]).
    pub fn open(path: impl AsRef<Path>, policy: &BudgetPolicy) -> Result<Self> {
        let path = path.as_ref().to_path_buf();
        let on_disk = fs::read_to_string(&path).map_err(|e| io_error("reading", &path, e))?;
        let budget = PrivacyBudget::restore(&on_disk, policy)?;
        Ok(Self {
            path,
            budget,
            on_disk,
        })
    }

    /// Create a new, empty ledger file for `policy`. Refused
    /// ([`Error::LedgerIo`]) if the file already exists: a restarted app
    /// cannot reset its budget by creating the ledger again.
    pub fn create(path: impl AsRef<Path>, policy: &BudgetPolicy) -> Result<Self> {
        let path = path.as_ref().to_path_buf();
        let budget = PrivacyBudget::new(policy.clone());
        let json = budget.to_json();
        let tmp = write_temp(&path, &json)?;
        // hard_link never replaces an existing file: atomic "create new".
        let linked = fs::hard_link(&tmp, &path);
        let _ = fs::remove_file(&tmp);
        linked.map_err(|e| io_error("creating", &path, e))?;
        sync_dir(&path)?;
        Ok(Self {
            path,
            budget,
            on_disk: json,
        })
    }

    /// [`open`](Self::open) if the file exists, else
    /// [`create`](Self::create).
    pub fn open_or_create(path: impl AsRef<Path>, policy: &BudgetPolicy) -> Result<Self> {
        let path = path.as_ref();
        match fs::metadata(path) {
            Ok(_) => Self::open(path, policy),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Self::create(path, policy),
            Err(e) => Err(io_error("reading", path, e)),
        }
    }

    /// The ledger file.
    pub fn path(&self) -> &Path {
        &self.path
    }
}

impl Ledger for FileLedger {
    fn state(&self) -> &PrivacyBudget {
        &self.budget
    }

    fn commit(&mut self, charge: &Charge) -> Result<()> {
        let next = self.budget.after(charge)?;
        let current =
            fs::read_to_string(&self.path).map_err(|e| io_error("reading", &self.path, e))?;
        if current != self.on_disk {
            return Err(Error::InvalidLedgerState {
                reason: format!(
                    "{} changed under this process (another writer, a restored backup or an edit); reopen it",
                    self.path.display()
                ),
            });
        }
        let json = next.to_json();
        let tmp = write_temp(&self.path, &json)?;
        if let Err(e) = fs::rename(&tmp, &self.path) {
            let _ = fs::remove_file(&tmp);
            return Err(io_error("replacing", &self.path, e));
        }
        sync_dir(&self.path)?;
        self.budget = next;
        self.on_disk = json;
        Ok(())
    }
}

/// Write `contents` to a temporary file beside `path` and fsync it.
fn write_temp(path: &Path, contents: &str) -> Result<PathBuf> {
    let name = path
        .file_name()
        .ok_or_else(|| io_error("naming", path, std::io::ErrorKind::InvalidInput.into()))?;
    let mut tmp_name = std::ffi::OsString::from(".");
    tmp_name.push(name);
    tmp_name.push(".tmp");
    let tmp = path.with_file_name(tmp_name);
    let write = || -> std::io::Result<()> {
        let mut f = File::create(&tmp)?;
        f.write_all(contents.as_bytes())?;
        f.sync_all()
    };
    write().map_err(|e| {
        let _ = fs::remove_file(&tmp);
        io_error("writing", &tmp, e)
    })?;
    Ok(tmp)
}

/// fsync the directory holding `path`, so a rename or link in it is
/// durable (POSIX; elsewhere directories cannot be opened and this is a
/// no-op).
fn sync_dir(path: &Path) -> Result<()> {
    #[cfg(unix)]
    {
        let dir = match path.parent() {
            Some(d) if !d.as_os_str().is_empty() => d,
            _ => Path::new("."),
        };
        File::open(dir)
            .and_then(|d| d.sync_all())
            .map_err(|e| io_error("syncing directory", dir, e))?;
    }
    #[cfg(not(unix))]
    let _ = path;
    Ok(())
}
