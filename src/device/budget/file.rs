//! A ledger persisted in a file, written ahead of every release, under an
//! exclusive lock shared by every process that uses the file.

use super::{BudgetPolicy, Charge, Clock, Ledger, MonotonicCounter, PrivacyBudget};
use crate::error::{Error, Result};
use crate::server::escape::UntrustedPath;
use alloc::format;
use alloc::string::String;
use alloc::sync::Arc;
use std::fs::{self, File, OpenOptions};
use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

/// Ledger files larger than this are refused unread (bounded memory; a
/// full ledger of [`MAX_LEDGER_ENTRIES`](super::MAX_LEDGER_ENTRIES) entries
/// and as many memo keys is about 10 MB).
pub const MAX_LEDGER_FILE_BYTES: u64 = 32 << 20;

/// How long a writer waits for another process's lock by default.
pub const DEFAULT_LOCK_TIMEOUT: Duration = Duration::from_secs(10);

/// A [`PrivacyBudget`] kept in a file (JSON, [`PrivacyBudget::to_json`]),
/// updated **write-ahead**: every charge is on disk before the release it
/// pays for is returned (`docs/MATH.md §8.3`).
///
/// Every operation on the file runs under an **exclusive lock** (flock on
/// Unix, LockFileEx on Windows, on a lock file `.NAME.lock` beside the
/// ledger) held across: reading the current state (another process may
/// have charged since this one opened the file: its charges are adopted,
/// after checking they only *add* to what this process saw), checking the
/// charge against it, writing the new state to a temporary file with a
/// unique name, `fsync`, renaming it over the ledger (atomic on POSIX
/// filesystems), `fsync` of the directory, and reading the file back. A
/// second writer waits for the lock (at most
/// `DEFAULT_LOCK_TIMEOUT`, see [`with_lock_timeout`](Self::with_lock_timeout))
/// and is then refused ([`Error::LedgerBusy`]); it never overwrites. A
/// crash at any point leaves either the old state (and the release was
/// never returned) or the new one (and the release may be lost before
/// upload): a release is never out while its charge is not on disk.
///
/// A path that is a **symbolic link is followed**: it is resolved once when
/// the ledger is opened or created, and the ledger's real file (and its
/// lock) are used from then on, so the link stays a link and every path
/// to the file shares one state. A dangling link is refused. A ledger
/// file with a second **hard link** is refused (on Unix, checked at every
/// read under the lock): a charge through one name replaces that name's
/// file, and the other name would keep the old state.
///
/// ```
/// use geopriv::device::budget::{BudgetPolicy, BudgetUnit, Charge, FileLedger, Ledger};
/// # let dir = std::env::temp_dir().join(format!("geopriv-doc-{}", std::process::id()));
/// # std::fs::create_dir_all(&dir).unwrap();
/// let path = dir.join("ledger.json");
/// # let _ = std::fs::remove_file(&path);
/// // 2e-4 per dollar a day, 0.05 over the device's life.
/// let policy = BudgetPolicy::periodic(BudgetUnit::PerDollar, 2e-4, 0.0, 86_400, 0.05, 0.0)?;
/// let mut ledger = FileLedger::open_or_create(&path, &policy)?;
/// let charge = Charge::new(BudgetUnit::PerDollar, 1e-4, 0.0)?;
/// ledger.spend(&charge, || Ok(0.7 /* privatize here */))?;
/// drop(ledger); // the app restarts
/// let ledger = FileLedger::open(&path, &policy)?;
/// assert_eq!(ledger.state().releases(), 1);
/// assert_eq!(ledger.state().remaining().period_epsilon, 1e-4);
/// assert!(FileLedger::create(&path, &policy).is_err()); // no silent reset
/// # std::fs::remove_dir_all(&dir).unwrap();
/// # Ok::<(), geopriv::Error>(())
/// ```
pub struct FileLedger {
    path: PathBuf,
    budget: PrivacyBudget,
    counter: Option<Box<dyn MonotonicCounter>>,
    lock_timeout: Duration,
}

impl core::fmt::Debug for FileLedger {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("FileLedger")
            .field("path", &self.path)
            .field("budget", &self.budget)
            .field("counter", &self.counter.is_some())
            .field("lock_timeout", &self.lock_timeout)
            .finish()
    }
}

fn io_error(what: &str, path: &Path, e: std::io::Error) -> Error {
    Error::LedgerIo {
        detail: format!("{what} {}: {e}", UntrustedPath(path)),
    }
}

/// The real path of a ledger: symbolic links followed; for a file that
/// does not exist yet, its directory's real path and its name.
fn resolve(path: &Path) -> Result<PathBuf> {
    match fs::symlink_metadata(path) {
        Ok(_) => fs::canonicalize(path).map_err(|e| io_error("resolving", path, e)),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            let name = path
                .file_name()
                .ok_or_else(|| io_error("naming", path, std::io::ErrorKind::InvalidInput.into()))?;
            let dir = match path.parent() {
                Some(d) if !d.as_os_str().is_empty() => d,
                _ => Path::new("."),
            };
            let dir = fs::canonicalize(dir).map_err(|e| io_error("resolving", dir, e))?;
            Ok(dir.join(name))
        }
        Err(e) => Err(io_error("reading", path, e)),
    }
}

/// `dir/.NAME.SUFFIX` beside `path`.
fn sibling(path: &Path, suffix: &str) -> PathBuf {
    let mut name = std::ffi::OsString::from(".");
    name.push(path.file_name().unwrap_or_default());
    name.push(suffix);
    path.with_file_name(name)
}

/// The exclusive lock of one ledger, released when dropped.
struct LockGuard(File);

impl Drop for LockGuard {
    fn drop(&mut self) {
        let _ = fs4::FileExt::unlock(&self.0);
    }
}

fn lock(path: &Path, timeout: Duration) -> Result<LockGuard> {
    let lock_path = sibling(path, ".lock");
    let open = || -> Result<File> {
        // Only a regular file: a lock file that is a link to the ledger
        // (or to anything rename replaces) would give each new inode its
        // own lock, and two writers at once.
        match fs::symlink_metadata(&lock_path) {
            Ok(m) if !m.file_type().is_file() => {
                return Err(io_error(
                    "opening the lock (not a regular file)",
                    &lock_path,
                    std::io::ErrorKind::InvalidInput.into(),
                ))
            }
            _ => {}
        }
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(&lock_path)
            .map_err(|e| io_error("opening the lock", &lock_path, e))?;
        // A lock file is never written, so it is empty. A file with content
        // there is something else: another ledger named `.NAME.lock`, whose
        // charges rename new files over it, would let two writers of this
        // ledger hold "the" lock at once (attack10: 772 releases, 756
        // charges recorded).
        match file.metadata() {
            Ok(m) if m.len() == 0 => Ok(file),
            Ok(_) => Err(io_error(
                "opening the lock (not empty: another file, perhaps a ledger, has the lock's name)",
                &lock_path,
                std::io::ErrorKind::InvalidInput.into(),
            )),
            Err(e) => Err(io_error("opening the lock", &lock_path, e)),
        }
    };
    let mut file = open()?;
    let start = Instant::now();
    let mut pause = Duration::from_micros(200);
    loop {
        match fs4::FileExt::try_lock(&file) {
            Ok(()) if still_at(&file, &lock_path) => return Ok(LockGuard(file)),
            // The lock file was removed or replaced while this process
            // waited: the lock it got is on a file nobody else opens.
            Ok(()) => {
                drop(LockGuard(file));
                file = open()?;
                continue;
            }
            Err(fs4::TryLockError::WouldBlock) => {}
            Err(fs4::TryLockError::Error(e)) => return Err(io_error("locking", &lock_path, e)),
        }
        if start.elapsed() >= timeout {
            return Err(Error::LedgerBusy {
                path: path.display().to_string(),
                waited_ms: start.elapsed().as_millis() as u64,
            });
        }
        std::thread::sleep(pause);
        pause = (pause * 2).min(Duration::from_millis(20));
    }
}

/// Whether `file` is still the file at `path` (Unix: same device and
/// inode; elsewhere the lock file cannot be removed while open).
fn still_at(file: &File, path: &Path) -> bool {
    #[cfg(unix)]
    {
        use std::os::unix::fs::MetadataExt;
        match (file.metadata(), fs::symlink_metadata(path)) {
            (Ok(a), Ok(b)) => a.dev() == b.dev() && a.ino() == b.ino(),
            _ => false,
        }
    }
    #[cfg(not(unix))]
    {
        let _ = (file, path);
        true
    }
}

/// Read and check the ledger at `path` (at most [`MAX_LEDGER_FILE_BYTES`]).
fn read_state(path: &Path, policy: &BudgetPolicy) -> Result<(PrivacyBudget, String)> {
    // Only a regular file: opening a FIFO for reading blocks (with the
    // lock held) until a writer appears, and a device has no end.
    let meta = fs::metadata(path).map_err(|e| io_error("reading", path, e))?;
    if !meta.is_file() {
        return Err(Error::InvalidLedgerState {
            reason: format!("{} is not a regular file", UntrustedPath(path)),
        });
    }
    // One name only: a charge renames a new file over the path, so a
    // second hard link would keep the old inode with the old state (the
    // budget spent again through it) and take its own lock file (attack5,
    // docs/ATTACK-5.md). Checked on every read under the lock, so the
    // first charge after a link appears is refused, before the names split.
    #[cfg(unix)]
    {
        use std::os::unix::fs::MetadataExt;
        if meta.nlink() > 1 {
            return Err(Error::InvalidLedgerState {
                reason: format!(
                    "{} has {} hard links: a charge through one name would leave the others with the old state; \
                     remove the other links (a crash while the ledger was created can leave one named .NAME.PID.N.tmp beside it)",
                    UntrustedPath(path),
                    meta.nlink()
                ),
            });
        }
    }
    let read = || -> std::io::Result<Option<String>> {
        let mut text = String::new();
        File::open(path)?
            .take(MAX_LEDGER_FILE_BYTES + 1)
            .read_to_string(&mut text)?;
        Ok((text.len() as u64 <= MAX_LEDGER_FILE_BYTES).then_some(text))
    };
    let text = read()
        .map_err(|e| io_error("reading", path, e))?
        .ok_or_else(|| Error::InvalidLedgerState {
            reason: format!(
                "{} is larger than {MAX_LEDGER_FILE_BYTES} bytes",
                UntrustedPath(path)
            ),
        })?;
    Ok((PrivacyBudget::restore(&text, policy)?, text))
}

static TEMP_COUNTER: AtomicU64 = AtomicU64::new(0);

/// Write `contents` to a new temporary file with a unique name beside
/// `path` (never an existing file) and fsync it.
fn write_temp(path: &Path, contents: &str) -> Result<PathBuf> {
    for _ in 0..16 {
        let n = TEMP_COUNTER.fetch_add(1, Ordering::Relaxed);
        let tmp = sibling(path, &format!(".{}.{n}.tmp", std::process::id()));
        let mut f = match OpenOptions::new().write(true).create_new(true).open(&tmp) {
            Ok(f) => f,
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => continue,
            Err(e) => return Err(io_error("creating", &tmp, e)),
        };
        let written = f.write_all(contents.as_bytes()).and_then(|_| f.sync_all());
        if let Err(e) = written {
            let _ = fs::remove_file(&tmp);
            return Err(io_error("writing", &tmp, e));
        }
        return Ok(tmp);
    }
    Err(io_error(
        "naming a temporary file beside",
        path,
        std::io::ErrorKind::AlreadyExists.into(),
    ))
}

/// Remove the temporary files a writer killed between [`write_temp`] and
/// its rename left beside `path` (attack12 O5: 0–8 per storm of 100 killed
/// runs, never removed). Called with the ledger's lock held: every
/// temporary file of this ledger is written under that lock, so one that
/// exists while it is held belongs to a writer that died. Only names of
/// exactly the form `.NAME.<pid>.<n>.tmp` (two decimal numbers: another
/// ledger's `.NAME.x.<pid>.<n>.tmp` never matches) that are regular
/// files are removed; errors are ignored (litter, not state).
fn remove_stale_temps(path: &Path) {
    let (Some(dir), Some(name)) = (path.parent(), path.file_name()) else {
        return;
    };
    let dir = if dir.as_os_str().is_empty() {
        Path::new(".")
    } else {
        dir
    };
    let Some(name) = name.to_str() else {
        return;
    };
    let prefix = format!(".{name}.");
    let Ok(entries) = fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        let file_name = entry.file_name();
        let Some(rest) = file_name
            .to_str()
            .and_then(|f| f.strip_prefix(prefix.as_str()))
            .and_then(|r| r.strip_suffix(".tmp"))
        else {
            continue;
        };
        let numbers: Vec<&str> = rest.split('.').collect();
        let stale = numbers.len() == 2
            && numbers
                .iter()
                .all(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()));
        if stale && entry.file_type().is_ok_and(|t| t.is_file()) {
            let _ = fs::remove_file(entry.path());
        }
    }
}

/// Replace `path` by `contents` atomically and durably, then read it back.
fn replace(path: &Path, contents: &str) -> Result<()> {
    let tmp = write_temp(path, contents)?;
    if let Err(e) = fs::rename(&tmp, path) {
        let _ = fs::remove_file(&tmp);
        return Err(io_error("replacing", path, e));
    }
    sync_dir(path)?;
    let back = fs::read_to_string(path).map_err(|e| io_error("reading back", path, e))?;
    if back != contents {
        return Err(Error::LedgerIo {
            detail: format!("{} does not read back as written", UntrustedPath(path)),
        });
    }
    Ok(())
}

/// Refuse to create a ledger file at `path` while `counter` counts
/// releases: the bound file was deleted, and a fresh budget would not be
/// bound to the counter.
fn refuse_fresh_file(path: &Path, counter: &dyn MonotonicCounter) -> Result<()> {
    let floor = counter.read()?;
    if floor > 0 {
        return Err(Error::InvalidLedgerState {
            reason: format!(
                "no ledger file at {} but the platform monotonic counter says {floor} release(s) were made: \
                 the file was deleted; not creating a fresh budget",
                UntrustedPath(path)
            ),
        });
    }
    Ok(())
}

impl FileLedger {
    fn new(path: PathBuf, budget: PrivacyBudget) -> Self {
        Self {
            path,
            budget,
            counter: None,
            lock_timeout: DEFAULT_LOCK_TIMEOUT,
        }
    }

    /// Open an existing ledger file under the app's pinned `policy`.
    /// Errors: the file is missing or unreadable ([`Error::LedgerIo`]),
    /// locked by another process for too long ([`Error::LedgerBusy`]), its
    /// state is invalid ([`Error::InvalidLedgerState`]) or disagrees with
    /// `policy` ([`Error::LedgerPolicyMismatch`]). A version-1 file is
    /// migrated to the current format (rewritten under the lock).
    pub fn open(path: impl AsRef<Path>, policy: &BudgetPolicy) -> Result<Self> {
        let path = resolve(path.as_ref())?;
        let _lock = lock(&path, DEFAULT_LOCK_TIMEOUT)?;
        Self::open_locked(path, policy)
    }

    fn open_locked(path: PathBuf, policy: &BudgetPolicy) -> Result<Self> {
        remove_stale_temps(&path);
        let (budget, text) = read_state(&path, policy)?;
        let json = budget.to_json();
        if json != text.trim() {
            // A version-1 file: write it in the current format (with its
            // new device secret) before anything uses the secret.
            replace(&path, &json)?;
        }
        Ok(Self::new(path, budget))
    }

    /// Create a new, empty ledger file for `policy` (with a new device
    /// secret). Refused ([`Error::LedgerIo`]) if the file already exists: a
    /// restarted app cannot reset its budget by creating the ledger again.
    pub fn create(path: impl AsRef<Path>, policy: &BudgetPolicy) -> Result<Self> {
        let path = resolve(path.as_ref())?;
        let _lock = lock(&path, DEFAULT_LOCK_TIMEOUT)?;
        Self::create_locked(path, policy)
    }

    fn create_locked(path: PathBuf, policy: &BudgetPolicy) -> Result<Self> {
        remove_stale_temps(&path);
        let budget = PrivacyBudget::try_new(policy.clone())?;
        let json = budget.to_json();
        let tmp = write_temp(&path, &json)?;
        // hard_link never replaces an existing file: atomic "create new".
        let linked = fs::hard_link(&tmp, &path);
        let _ = fs::remove_file(&tmp);
        linked.map_err(|e| io_error("creating", &path, e))?;
        sync_dir(&path)?;
        Ok(Self::new(path, budget))
    }

    /// [`open`](Self::open) if the file exists, else
    /// [`create`](Self::create) (decided under the lock, so two processes
    /// starting at once share one new ledger).
    pub fn open_or_create(path: impl AsRef<Path>, policy: &BudgetPolicy) -> Result<Self> {
        Self::open_or_create_checked(path.as_ref(), policy, |_| Ok(()))
    }

    /// [`open_or_create`](Self::open_or_create), running `before_create`
    /// under the lock when the file is missing (a refusal creates nothing).
    fn open_or_create_checked(
        path: &Path,
        policy: &BudgetPolicy,
        before_create: impl FnOnce(&Path) -> Result<()>,
    ) -> Result<Self> {
        let path = resolve(path)?;
        let _lock = lock(&path, DEFAULT_LOCK_TIMEOUT)?;
        match fs::symlink_metadata(&path) {
            Ok(_) => Self::open_locked(path, policy),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                before_create(&path)?;
                Self::create_locked(path, policy)
            }
            Err(e) => Err(io_error("reading", &path, e)),
        }
    }

    /// [`open_or_create`](Self::open_or_create) tied to `counter`
    /// ([`with_counter`](Self::with_counter)): what an app or the CLI with a
    /// platform counter calls at start-up. A missing file while the counter
    /// is above 0 is refused ([`Error::InvalidLedgerState`]) **without
    /// creating one**: releases were made under the counter, so the file
    /// was deleted, and a fresh, unmarked file left behind could be charged
    /// by a writer without the counter. The file is created only when the
    /// counter reads 0.
    ///
    /// ```
    /// use geopriv::device::budget::{BudgetPolicy, BudgetUnit, FileLedger, Ledger, MemoryCounter, MonotonicCounter};
    /// # let dir = std::env::temp_dir().join(format!("geopriv-doc-cnt-{}", std::process::id()));
    /// # std::fs::create_dir_all(&dir).unwrap();
    /// let path = dir.join("ledger.json");
    /// # let _ = std::fs::remove_file(&path);
    /// let policy = BudgetPolicy::new(BudgetUnit::PerMetre, 0.5, 0.0)?;
    /// let mut counter = MemoryCounter::default();
    /// let ledger = FileLedger::open_or_create_with_counter(&path, &policy, Box::new(counter.clone()))?;
    /// assert!(ledger.state().is_counter_bound());
    /// drop(ledger);
    /// std::fs::remove_file(&path)?; // deleted after releases were made
    /// counter.advance_to(3)?;
    /// assert!(FileLedger::open_or_create_with_counter(&path, &policy, Box::new(counter)).is_err());
    /// assert!(!path.exists());
    /// # std::fs::remove_dir_all(&dir).unwrap();
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn open_or_create_with_counter(
        path: impl AsRef<Path>,
        policy: &BudgetPolicy,
        counter: Box<dyn MonotonicCounter>,
    ) -> Result<Self> {
        Self::open_or_create_checked(path.as_ref(), policy, |p| {
            refuse_fresh_file(p, counter.as_ref())
        })?
        .with_counter(counter)
    }

    /// [`create`](Self::create) tied to `counter`
    /// ([`with_counter`](Self::with_counter)); refused without creating
    /// anything ([`Error::InvalidLedgerState`]) while the counter is above 0,
    /// as in [`open_or_create_with_counter`](Self::open_or_create_with_counter).
    pub fn create_with_counter(
        path: impl AsRef<Path>,
        policy: &BudgetPolicy,
        counter: Box<dyn MonotonicCounter>,
    ) -> Result<Self> {
        let path = resolve(path.as_ref())?;
        let created = {
            let _lock = lock(&path, DEFAULT_LOCK_TIMEOUT)?;
            // A refusal while the file exists is `create`'s ("already
            // exists"), not "no ledger file ... deleted" (attack12,
            // docs/ATTACK-12.md). The counter is still checked first, so a
            // file removed by another program in between is not created.
            if let Err(refused) = refuse_fresh_file(&path, counter.as_ref()) {
                return Err(match fs::symlink_metadata(&path) {
                    Ok(_) => io_error("creating", &path, std::io::ErrorKind::AlreadyExists.into()),
                    Err(_) => refused,
                });
            }
            Self::create_locked(path, policy)?
        };
        created.with_counter(counter)
    }

    /// Read the time for periods from `clock` instead of the system clock.
    pub fn with_clock(mut self, clock: Arc<dyn Clock>) -> Self {
        self.budget = self.budget.with_clock(clock);
        self
    }

    /// Wait at most `timeout` for another process's lock before refusing
    /// with [`Error::LedgerBusy`].
    pub fn with_lock_timeout(mut self, timeout: Duration) -> Self {
        self.lock_timeout = timeout;
        self
    }

    /// Tie the ledger to a platform [`MonotonicCounter`]: refused
    /// ([`Error::InvalidLedgerState`]) if the file's release count is below
    /// the counter (the file was deleted and created again, restored from a
    /// backup or rolled back); otherwise the counter is advanced to the
    /// file's count, and after every charge to the new count.
    ///
    /// The file is marked as **bound to a counter** (written once, under
    /// the lock; [`PrivacyBudget::is_counter_bound`]): from then on a
    /// writer that does not hold the counter (a background job, the CLI)
    /// is refused every charge ([`Error::InvalidLedgerState`]), reading
    /// and acknowledging uploads stay allowed. Without that, such a writer
    /// could charge a rolled-back file back up to the counter's count and
    /// the app would accept it with charges lost (attack10 O1,
    /// docs/ATTACK-10.md). Every process that charges the file must
    /// therefore hold the counter (docs/MATH.md §8.3).
    ///
    /// The file is marked before the counter first moves, so a counter
    /// above 0 beside an unmarked file is refused too
    /// ([`Error::InvalidLedgerState`]): the bound file was deleted and
    /// created anew, or replaced by a copy from before the binding, and a
    /// writer without the counter may have charged it back up to the
    /// counter's count (attack11, docs/ATTACK-11.md). Bind a fresh counter
    /// (at 0) to an existing ledger only once.
    pub fn with_counter(mut self, counter: Box<dyn MonotonicCounter>) -> Result<Self> {
        self.counter = Some(counter);
        let _lock = lock(&self.path, self.lock_timeout)?;
        // The counter is read once: reload's floor check and the unmarked
        // file's check below see the same value.
        let (current, floor) = self.reload_with_floor()?;
        if current.is_counter_bound() {
            self.budget = current;
        } else {
            // Only a holder advances the counter, and it marks the file
            // first (below): a counter above 0 beside an unmarked file
            // means the bound file was replaced (deleted and created anew,
            // or restored from a backup made before the binding), and a
            // writer without the counter may have refilled its count
            // (attack11 finding 1, docs/ATTACK-11.md).
            if floor > 0 {
                return Err(Error::InvalidLedgerState {
                    reason: format!(
                        "{} is not marked as bound to a counter, but the platform counter says {floor}: \
                         the bound file was deleted or replaced by an older copy",
                        UntrustedPath(&self.path)
                    ),
                });
            }
            let bound = current.bound_to_counter();
            replace(&self.path, &bound.to_json())?;
            self.budget = bound;
        }
        // The floor just read is the counter's value. When it already
        // equals the file's count, the advance only probes the counter (a
        // counter that cannot advance is refused here, not at the first
        // charge) and cannot leave it below the file: no read-back, which
        // saves a CLI counter program one run per process.
        let releases = self.budget.releases();
        match &mut self.counter {
            Some(c) if floor == releases => c.advance_to(releases)?,
            _ => self.advance_counter(releases)?,
        }
        Ok(self)
    }

    /// The ledger's real file (symbolic links resolved).
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The device secret stored in the ledger (see
    /// [`PrivacyBudget::device_secret`]).
    pub fn device_secret(&self) -> [u8; 32] {
        self.budget.device_secret()
    }

    /// Re-read the file under the lock, adopting charges other processes
    /// made since (checked to only add to what this process saw).
    pub fn refresh(&mut self) -> Result<()> {
        let _lock = lock(&self.path, self.lock_timeout)?;
        self.budget = self.reload()?;
        Ok(())
    }

    /// Charge `charge` once per `memo_key`, durably (the key and the
    /// charge in the same atomic write): `Ok(true)` charged now, `Ok(false)`
    /// the key was already charged (by this or another process: nothing
    /// charged, nothing written). The same refusals as [`Ledger::commit`].
    /// See [`PrivacyBudget::commit_once`].
    pub fn commit_once(&mut self, memo_key: [u8; 32], charge: &Charge) -> Result<bool> {
        self.locked_update(|b| b.after_once(memo_key, charge))
    }

    /// Charge `charge`, run `release` (which builds the report to upload)
    /// and put the report in the ledger's **outbox**, in the same atomic
    /// write as the charge: a crash between the charge and the upload loses
    /// nothing, the report is still there after a restart
    /// ([`pending_uploads`](Self::pending_uploads)) until
    /// [`acknowledge`](Self::acknowledge)d. Refused like
    /// [`Ledger::spend`], and also when the outbox is full
    /// ([`MAX_OUTBOX`](super::MAX_OUTBOX) reports of at most
    /// [`MAX_UPLOAD_BYTES`](super::MAX_UPLOAD_BYTES)); a refusal releases
    /// and records nothing. Returns the report's id. When the charge and
    /// the report are written but the counter then fails to advance, the
    /// error is [`Error::CounterNotAdvanced`] (the report is queued and
    /// will be uploaded), not [`Error::LedgerIo`]'s "nothing released"
    /// (attack12 O3).
    pub fn spend_to_outbox(
        &mut self,
        charge: &Charge,
        release: impl FnOnce() -> Result<String>,
    ) -> Result<u64> {
        self.budget.check(charge)?;
        self.budget.outbox_room(0)?;
        let report = release()?;
        let id = core::cell::Cell::new(0);
        self.locked_update_or(
            |b| {
                let (next, new_id) = b.after_to_outbox(charge, report)?;
                id.set(new_id);
                Ok(Some(next))
            },
            // Every error of the counter's advance comes after the write
            // (the read-back's too: a counter read ahead of the file, or a
            // binding's "the counter went back"): the report is queued
            // whatever the kind (attack15 F1, docs/ATTACK-15.md).
            |e| Error::CounterNotAdvanced {
                id: id.get(),
                detail: match e {
                    Error::LedgerIo { detail } => detail,
                    other => other.to_string(),
                },
            },
        )?;
        Ok(id.get())
    }

    /// Reports charged and waiting for upload (oldest first) with their
    /// ids, as this process last read the file. For display: what may be
    /// uploaded is [`uploadable_reports`](Self::uploadable_reports), which
    /// first brings a counter left behind up to the file.
    pub fn pending_uploads(&self) -> Vec<(u64, String)> {
        self.budget.pending_uploads().to_vec()
    }

    /// The reports that may leave the device now, oldest first with their
    /// ids: the outbox as on disk, read under the lock (attack15 O1,
    /// docs/ATTACK-15.md). A report is queued in the same write as its
    /// charge and the counter is advanced after it; if that advance failed
    /// ([`Error::CounterNotAdvanced`]) or the process died before it, the
    /// counter is behind the file, and a report uploaded then could have its
    /// charge rolled back (an older copy of the file, accepted by a counter
    /// that never counted it). So for a file bound to a counter
    /// ([`PrivacyBudget::is_counter_bound`]) whose counter reads below its
    /// release count, the counter is first advanced to the count (and read
    /// back); if it cannot be, nothing is handed out (the error of the
    /// advance). A ledger without a counter cannot check a bound file's
    /// counter and is refused ([`Error::InvalidLedgerState`]): open it with
    /// [`with_counter`](Self::with_counter) to upload. Unbound files: the
    /// outbox as on disk. [`pending_uploads`](Self::pending_uploads) stays
    /// the in-memory view, for display only.
    ///
    /// ```
    /// use geopriv::device::budget::{BudgetPolicy, BudgetUnit, FileLedger};
    /// # let dir = std::env::temp_dir().join(format!("gp-uploadable-{}", std::process::id()));
    /// # std::fs::create_dir_all(&dir).unwrap();
    /// let path = dir.join("device.json");
    /// let policy = BudgetPolicy::new(BudgetUnit::PerDollar, 1e-3, 0.0)?;
    /// let mut ledger = FileLedger::open_or_create(&path, &policy)?;
    /// assert!(ledger.uploadable_reports()?.is_empty());
    /// # std::fs::remove_dir_all(&dir).unwrap();
    /// # Ok::<(), geopriv::Error>(())
    /// ```
    pub fn uploadable_reports(&mut self) -> Result<Vec<(u64, String)>> {
        // Nothing to write: the re-read under the lock, and the advance of
        // a counter behind the file that every answer the caller acts on
        // gets (`locked_update_or`'s no-write branch, attack15 F2).
        self.locked_update(|_| Ok(None))?;
        let releases = self.budget.releases();
        if self.counter.is_none() && self.budget.is_counter_bound() && releases > 0 {
            return Err(Error::InvalidLedgerState {
                reason: format!(
                    "{} is bound to a platform monotonic counter; its outbox is handed out only through a \
                     ledger holding the counter (FileLedger::with_counter, `--counter-command`), which first \
                     moves a counter left behind by a failed advance to the file's {releases} release(s)",
                    UntrustedPath(&self.path)
                ),
            });
        }
        Ok(self.budget.pending_uploads().to_vec())
    }

    /// Remove uploaded reports from the outbox (durably; unknown ids are
    /// ignored).
    pub fn acknowledge(&mut self, ids: &[u64]) -> Result<()> {
        self.locked_update(|b| Ok(Some(b.acknowledged(ids))))
            .map(|_| ())
    }

    /// The state on disk, read under the lock held by the caller, with
    /// this ledger's clock; refused if it does not extend what this
    /// process last saw or is below the monotonic counter.
    fn reload(&self) -> Result<PrivacyBudget> {
        self.reload_with_floor().map(|(current, _)| current)
    }

    /// [`reload`](Self::reload), with the counter's value it was checked
    /// against (0 without a counter).
    fn reload_with_floor(&self) -> Result<(PrivacyBudget, u64)> {
        let (current, _) = read_state(&self.path, self.budget.policy())?;
        let current = current.with_clock(self.budget.clock());
        if !self.budget.is_prefix_of(&current) {
            return Err(Error::InvalidLedgerState {
                reason: format!(
                    "{} lost charges this process saw (rolled back, restored from a backup or replaced); \
                     refusing to release through it",
                    UntrustedPath(&self.path)
                ),
            });
        }
        let floor = match &self.counter {
            Some(counter) => counter.read()?,
            None => 0,
        };
        if current.releases() < floor {
            return Err(Error::InvalidLedgerState {
                reason: format!(
                    "{} counts {} release(s) but the platform counter says {floor}: the file was rolled back or deleted",
                    UntrustedPath(&self.path),
                    current.releases()
                ),
            });
        }
        Ok((current, floor))
    }

    /// Advance the counter to the file's `releases` and read it back: it
    /// must read exactly `releases` (tidy14; attack12, docs/ATTACK-12.md,
    /// had this check only in the bindings' app counter). A counter whose
    /// `advance_to` returns `Ok` without moving (a CLI counter program
    /// that exits 0, a Rust counter that does nothing, a foreign exception
    /// the binding cannot deliver) would otherwise be believed, and a
    /// rollback of the file to a count at or above the unmoved counter
    /// later accepted: a charge lost. Below `releases`:
    /// [`Error::LedgerIo`] (the charge is on file, nothing is released).
    /// Above: the counter counts releases the file does not, i.e. the file
    /// was rolled back or deleted ([`Error::InvalidLedgerState`]). Cost:
    /// one more `read` per advance.
    fn advance_counter(&mut self, releases: u64) -> Result<()> {
        let Some(c) = &mut self.counter else {
            return Ok(());
        };
        c.advance_to(releases)?;
        let now = c.read()?;
        if now < releases {
            return Err(Error::LedgerIo {
                detail: format!(
                    "the platform monotonic counter did not advance: it reads {now} after advance_to({releases})"
                ),
            });
        }
        if now > releases {
            return Err(Error::InvalidLedgerState {
                reason: format!(
                    "the platform monotonic counter reads {now} after advance_to({releases}), the ledger file's \
                     release count: the file was rolled back or deleted"
                ),
            });
        }
        Ok(())
    }

    /// Under the lock: re-read, compute the next state with `step` (`None`:
    /// nothing to write), write it ahead, advance the counter.
    fn locked_update(
        &mut self,
        step: impl FnOnce(&PrivacyBudget) -> Result<Option<PrivacyBudget>>,
    ) -> Result<bool> {
        self.locked_update_or(step, |e| e)
    }

    /// [`locked_update`](Self::locked_update), with `counter_failed`
    /// applied to an error of the counter's advance (after the write).
    fn locked_update_or(
        &mut self,
        step: impl FnOnce(&PrivacyBudget) -> Result<Option<PrivacyBudget>>,
        counter_failed: impl FnOnce(Error) -> Error,
    ) -> Result<bool> {
        let _lock = lock(&self.path, self.lock_timeout)?;
        let (current, floor) = self.reload_with_floor()?;
        let next = step(&current);
        self.budget = current;
        let Some(next) = next? else {
            // Nothing to write, but the caller may release on this answer
            // (a memoized key already on file: `commit_once`'s `Ok(false)`).
            // A counter behind the file's count (an earlier advance failed
            // after its write) is advanced first, or the released value's
            // charge could be rolled back and accepted (attack15 F2,
            // docs/ATTACK-15.md). floor == releases: no counter call.
            if floor < self.budget.releases() {
                self.advance_counter(self.budget.releases())?;
            }
            return Ok(false);
        };
        if self.counter.is_none()
            && self.budget.is_counter_bound()
            && next.releases() > self.budget.releases()
        {
            return Err(Error::InvalidLedgerState {
                reason: format!(
                    "{} is bound to a platform monotonic counter; only a writer holding it may charge it \
                     (FileLedger::with_counter), so that a rolled-back file cannot be charged back up to the counter",
                    UntrustedPath(&self.path)
                ),
            });
        }
        replace(&self.path, &next.to_json())?;
        self.budget = next;
        self.advance_counter(self.budget.releases())
            .map_err(counter_failed)?;
        Ok(true)
    }
}

impl Ledger for FileLedger {
    fn state(&self) -> &PrivacyBudget {
        &self.budget
    }

    fn commit(&mut self, charge: &Charge) -> Result<()> {
        self.locked_update(|b| b.after(charge).map(Some))
            .map(|_| ())
    }

    /// The n charges checked against the file's current state and written
    /// in one write, under one lock (attack10, docs/ATTACK-10.md: charged
    /// one by one, a charge by another process in between left some
    /// recorded and the call refused, with nothing released).
    fn commit_n(&mut self, charge: &Charge, n: u64) -> Result<()> {
        if n == 0 {
            return Ok(());
        }
        // Checked in closed form (one exact product and compare, not n
        // checks under the lock: attack11 O3).
        self.locked_update(|b| {
            let plan = b.check_n(charge, n)?;
            let mut next = b.clone();
            next.apply(plan);
            Ok(Some(next))
        })
        .map(|_| ())
    }
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
