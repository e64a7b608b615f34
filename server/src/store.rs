//! The durable store: one SQLite database in WAL mode, written by one
//! thread with group commit, and the live per-period aggregates kept beside
//! it (rebuilt from the database on start and after a failed commit).
//!
//! **Durability.** `synchronous=FULL`: every commit fsyncs the WAL, so an
//! acknowledged report survives a crash of the process *and* of the
//! machine (NORMAL would survive `kill -9` but not a power loss, and an
//! acknowledgement promises the latter). The cost of the fsync is shared:
//! the writer takes every job waiting in its queue into one transaction
//! (group commit), so under load one fsync covers many requests, and each
//! request is answered only after the COMMIT that holds its reports
//! returned.
//!
//! **Exactly once.** The writer keeps the ids of the stored reports in
//! memory, one hash set of `u128` per served task, filled from the
//! `reports` table on start. A report whose id is in its task's set (stored
//! before, or earlier in the same group) is not inserted and is answered as
//! a duplicate. Otherwise it is offered to the live aggregate; if the
//! aggregate refuses it, it is rejected and nothing is written; if not, its
//! row is inserted and its id added to the set. If the COMMIT fails (disk
//! full, I/O error) the transaction is rolled back, the live aggregates and
//! the id sets are rebuilt from the database, and every request in the
//! group is answered 503: nothing unacknowledged is counted, nothing
//! acknowledged is lost. After `kill -9` the sets are rebuilt from exactly
//! the committed rows, so a retried report that was acknowledged (or
//! committed without its answer arriving) is a duplicate.
//!
//! **Why in memory and not a `UNIQUE(task, report_id)` index** (schema
//! version 1 had one). Report ids are random, so each report of a group
//! commit lands in its own leaf page of a random-key B-tree, and SQLite's
//! WAL logs whole 4 KiB pages: about 4 KiB of WAL (plus its checkpoint
//! into the database file) per 220-byte report, the bulk of the collector's
//! disk writes, growing with the index (7.0 kB written per report in the
//! measurement in BENCHMARKS.md). The `reports` table itself is appended to
//! in `seq` order, so a group of reports fills a few consecutive pages. Of
//! the ways out, this one was chosen because:
//! - the start already reads every stored report (to rebuild the
//!   aggregates), so filling the sets costs one hash insert per row and no
//!   extra pass (0.5 µs of CPU per stored report, measured);
//! - the write per report is then its row (≈ 0.5 kB written, measured),
//!   whatever the database's size, and no background work ever runs;
//! - an LSM-style pair of tables (new ids in a small indexed table, merged
//!   in sorted order into the big index every K reports) keeps memory flat
//!   but still rewrites up to every leaf of the big index per merge (the
//!   cost per report grows with the database) and adds merge pauses to the
//!   latency;
//! - Divvi Up Janus (the DAP aggregator) keeps the same random-key unique
//!   index `client_reports(task_id, report_id)`, in PostgreSQL, whose WAL
//!   logs the inserted index tuple rather than the page (a full page only
//!   at the first change after a checkpoint), and bounds it by expiring old
//!   reports; SQLite has no tuple-level log.
//!
//! **Memory bound.** A set holds an id in 16 bytes plus one control byte,
//! in a table of 2^k slots at most 7/8 full, so between 19.4 and 38.9
//! bytes per stored report (the upper end just after the table doubled),
//! and for the instant of a doubling the old and new tables together take
//! up to 58.3 bytes per report. The collector holds at most `max_reports`
//! reports over its served tasks (`--max-reports`, default 10^8: under
//! 3.9 GB of sets, 5.9 GB during a doubling; the database is then about
//! 33 GB, at the 325 bytes per report measured). The sets hash with std's
//! SipHash under a per-process random key: ids are chosen by the clients,
//! and a keyed hash keeps crafted ids from colliding. A request that would take it past the limit is answered 503 like
//! a full disk (nothing of it stored, counted as `store-full` in
//! `/metrics`); a request of ids all stored before is still answered as
//! duplicates, so device outboxes drain. A database holding more reports
//! than the limit opens (they are counted) and takes no new report.
//!
//! **One writer.** The sets are those of this process's connection. If
//! another connection commits to the same file (a second collector started
//! on it by mistake), `PRAGMA data_version` changes; the writer reads it
//! under its write lock (`BEGIN IMMEDIATE`) before every group and, if it
//! changed, rebuilds the sets and aggregates from the database first
//! (counted as `geopriv_store_reloads_total`). The analyst reads
//! (`estimate`, `map`, `state`, `/v1/tasks`) ask the writer to make the
//! same check first ([`Store::sync`]), so a read after another collector's
//! acknowledged write counts it (attack9 O1: reads used to show what this
//! collector saw at its own last write). Exactly once and fresh reads
//! hold; speed does not (each collector rebuilds from the whole table after
//! the other's commits): run one collector per database.
//!
//! **Schema versions** (`PRAGMA user_version`). 2: `reports` without an
//! index on the id. A version-1 database (user_version 0 and a `reports`
//! table with `UNIQUE(task, report_id)`) is migrated on open, in one
//! transaction (a crash leaves it at version 1, migrated again on the next
//! start): the rows are copied in `seq` order into a new table, the old
//! table and its index are dropped (their pages go to SQLite's freelist;
//! the file does not shrink). A version above 2 (a newer collector) is
//! refused with a clear error; user_version 1 (or any other value below 2
//! but 0, which no collector writes) is refused as not written by
//! `geopriv-serve`, and the file is left untouched.

use crate::task::{Kind, PeriodAgg, Task};
use geopriv::map::MapReport;
use geopriv::{Report, ReportId};
use rusqlite::{params, Connection, OpenFlags};
use std::collections::{BTreeMap, HashSet};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, RwLock};
use tokio::sync::{mpsc, oneshot};

/// The live aggregate of one period.
#[derive(Clone, Debug)]
pub struct PeriodState {
    /// The exact aggregate.
    pub agg: PeriodAgg,
    /// Reports in it.
    pub n: u64,
}

/// Live aggregates of one task.
#[derive(Clone, Debug, Default)]
pub struct TaskLive {
    /// By period start (unix seconds).
    pub periods: BTreeMap<i64, PeriodState>,
}

/// Live aggregates of every task (index = task index).
#[derive(Debug, Default)]
pub struct Live {
    /// Per task.
    pub tasks: Vec<TaskLive>,
}

/// A decoded report waiting to be stored.
#[derive(Debug)]
pub enum Decoded {
    /// A value report.
    Value(Report),
    /// A map report.
    Map(MapReport),
}

/// One record of an upload that passed the request-side checks.
#[derive(Debug)]
pub struct Item {
    /// Its record number in the request (1-based).
    pub index: u64,
    /// Its id.
    pub id: ReportId,
    /// The canonical JSON line stored (and exported).
    pub body: String,
    /// The report.
    pub report: Decoded,
}

/// What became of one stored item.
#[derive(Clone, Debug, PartialEq)]
pub enum Outcome {
    /// Stored now (durable once the reply arrives).
    Accepted,
    /// Its id was stored before: counted once.
    Duplicate,
    /// Refused by the aggregate.
    Rejected {
        /// Stable code.
        code: &'static str,
        /// Why (to be escaped).
        reason: String,
    },
}

struct Job {
    task: usize,
    period: i64,
    items: Vec<Item>,
    reply: oneshot::Sender<Result<Vec<(u64, Outcome)>, String>>,
}

/// What the writer thread is asked to do.
enum Msg {
    /// Store reports.
    Store(Job),
    /// Before an analyst read: take in what another connection committed
    /// (answered once the live aggregates hold every commit made before
    /// the request was sent).
    Sync(oneshot::Sender<Result<(), String>>),
}

/// Counters for `/metrics`.
#[derive(Debug, Default)]
pub struct Metrics {
    /// Per (task, outcome or rejection code).
    pub reports: Mutex<BTreeMap<(String, String), u64>>,
    /// Committed transactions.
    pub commits: AtomicU64,
    /// Failed transactions (answered 503).
    pub commit_failures: AtomicU64,
    /// Rebuilds of the id sets and aggregates because another connection
    /// wrote to the database (0 when one collector runs per database).
    pub reloads: AtomicU64,
    /// Per HTTP status.
    pub responses: Mutex<BTreeMap<u16, u64>>,
}

impl Metrics {
    /// Add `n` to the counter of (task, what).
    pub fn count(&self, task: &str, what: &str, n: u64) {
        if n == 0 {
            return;
        }
        if let Ok(mut m) = self.reports.lock() {
            *m.entry((task.to_string(), what.to_string())).or_default() += n;
        }
    }
}

/// The store (cheap to clone).
#[derive(Clone)]
pub struct Store {
    sender: mpsc::Sender<Msg>,
    /// Live aggregates.
    pub live: Arc<RwLock<Live>>,
    /// The tasks served.
    pub tasks: Arc<Vec<Task>>,
    /// Counters.
    pub metrics: Arc<Metrics>,
    path: PathBuf,
}

/// The schema version this collector writes (`PRAGMA user_version`).
pub const SCHEMA_VERSION: i64 = 2;

const SCHEMA: &str = "
CREATE TABLE IF NOT EXISTS tasks(id TEXT PRIMARY KEY, definition TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS reports(
  seq INTEGER PRIMARY KEY,
  task TEXT NOT NULL,
  report_id BLOB NOT NULL,
  period INTEGER NOT NULL,
  body TEXT NOT NULL
);
";

/// Version 1 to 2: the same rows, in `seq` order, without the
/// `UNIQUE(task, report_id)` index (the ids are checked in memory).
const MIGRATE_1_TO_2: &str = "
CREATE TABLE reports_v2(
  seq INTEGER PRIMARY KEY,
  task TEXT NOT NULL,
  report_id BLOB NOT NULL,
  period INTEGER NOT NULL,
  body TEXT NOT NULL
);
INSERT INTO reports_v2(seq, task, report_id, period, body)
  SELECT seq, task, report_id, period, body FROM reports ORDER BY seq;
DROP TABLE reports;
ALTER TABLE reports_v2 RENAME TO reports;
";

/// Default of `--max-reports`: the most reports one collector holds.
pub const DEFAULT_MAX_REPORTS: u64 = 100_000_000;

fn open(path: &Path) -> rusqlite::Result<Connection> {
    let conn = Connection::open(path)?;
    conn.busy_timeout(std::time::Duration::from_secs(10))?;
    conn.pragma_update(None, "journal_mode", "WAL")?;
    conn.pragma_update(None, "synchronous", "FULL")?;
    Ok(conn)
}

/// Create the schema, migrate version 1, or refuse a newer version; one
/// transaction under the write lock. `Some(n)` when a version-1 database of
/// `n` reports was migrated.
fn prepare_schema(conn: &Connection) -> Result<Option<u64>, String> {
    conn.execute_batch("BEGIN IMMEDIATE")
        .map_err(|e| e.to_string())?;
    let r = (|| -> Result<Option<u64>, String> {
        let version: i64 = conn
            .query_row("PRAGMA user_version", [], |r| r.get(0))
            .map_err(|e| e.to_string())?;
        let has_reports: bool = conn
            .query_row(
                "SELECT count(*) > 0 FROM sqlite_master WHERE type = 'table' AND name = 'reports'",
                [],
                |r| r.get(0),
            )
            .map_err(|e| e.to_string())?;
        let migrated = match version {
            // Nothing written (another connection's data_version stays).
            SCHEMA_VERSION => return Ok(None),
            0 if has_reports => {
                let n: u64 = conn
                    .query_row("SELECT count(*) FROM reports", [], |r| r.get(0))
                    .map_err(|e| e.to_string())?;
                conn.execute_batch(MIGRATE_1_TO_2).map_err(|e| {
                    format!("migrating its reports from schema version 1 to {SCHEMA_VERSION}: {e}")
                })?;
                Some(n)
            }
            0 => None,
            v if v < SCHEMA_VERSION => {
                // No collector writes these (version 1 databases carry
                // user_version 0): not ours to migrate.
                return Err(format!(
                    "schema version {v}: not written by geopriv-serve (it writes version \
                     {SCHEMA_VERSION}; version-1 databases carry user_version 0); refused untouched"
                ));
            }
            v => {
                return Err(format!(
                    "schema version {v}: written by a newer geopriv-serve (this one writes \
                     version {SCHEMA_VERSION} and migrates version 1); run that version on it"
                ))
            }
        };
        conn.execute_batch(SCHEMA).map_err(|e| e.to_string())?;
        conn.pragma_update(None, "user_version", SCHEMA_VERSION)
            .map_err(|e| e.to_string())?;
        Ok(migrated)
    })();
    match r {
        Ok(m) => {
            conn.execute_batch("COMMIT").map_err(|e| e.to_string())?;
            Ok(m)
        }
        Err(e) => {
            let _ = conn.execute_batch("ROLLBACK");
            Err(e)
        }
    }
}

/// A read-only connection (WAL readers do not block the writer).
pub fn reader(path: &Path) -> rusqlite::Result<Connection> {
    let conn = Connection::open_with_flags(
        path,
        OpenFlags::SQLITE_OPEN_READ_ONLY | OpenFlags::SQLITE_OPEN_NO_MUTEX,
    )?;
    conn.busy_timeout(std::time::Duration::from_secs(10))?;
    Ok(conn)
}

/// Parse a stored body for `task`.
fn decode_body(task: &Task, body: &str) -> Result<Decoded, String> {
    match task.kind {
        Kind::Value { .. } => Report::from_json(body)
            .map(Decoded::Value)
            .map_err(|e| e.to_string()),
        Kind::Map { .. } => serde_json::from_str::<MapReport>(body)
            .map(Decoded::Map)
            .map_err(|e| e.to_string()),
    }
}

/// Add a report to a period's aggregate.
fn add(
    task: &Task,
    live: &mut TaskLive,
    period: i64,
    report: Decoded,
) -> Result<(), (&'static str, String)> {
    let ps = live.periods.entry(period).or_insert_with(|| PeriodState {
        agg: task.new_agg(),
        n: 0,
    });
    match (&mut ps.agg, report) {
        (PeriodAgg::Value(a), Decoded::Value(r)) => {
            a.offer(r).map_err(|e| (e.code(), e.to_string()))?
        }
        (PeriodAgg::Map(m), Decoded::Map(r)) => m
            .add(&r)
            .map_err(|e| ("invalid-map-report", e.to_string()))?,
        _ => return Err(("task-mismatch", "report of another kind of task".into())),
    }
    ps.n += 1;
    Ok(())
}

/// The ids of the stored reports, per served task (index = task index):
/// the duplicate check.
#[derive(Debug, Default)]
struct Seen {
    /// Per task.
    ids: Vec<HashSet<u128>>,
    /// Reports in `ids`.
    total: u64,
    /// `PRAGMA data_version` of the snapshot the sets (and aggregates)
    /// describe: another connection's commit changes it.
    data_version: i64,
}

/// The key of a report id in [`Seen`].
fn key(id: &ReportId) -> u128 {
    u128::from_be_bytes(id.0)
}

fn data_version(conn: &Connection) -> rusqlite::Result<i64> {
    conn.query_row("PRAGMA data_version", [], |r| r.get(0))
}

/// Rebuild every task's live aggregates and id sets from the database
/// (inside the caller's transaction). The sets are cleared and refilled in
/// place (their memory is reused, not doubled).
fn rebuild(conn: &Connection, tasks: &[Task], seen: &mut Seen) -> Result<Live, String> {
    let mut live = Live {
        tasks: vec![TaskLive::default(); tasks.len()],
    };
    seen.ids.resize_with(tasks.len(), HashSet::new);
    for s in &mut seen.ids {
        s.clear();
    }
    seen.total = 0;
    let index: BTreeMap<&str, usize> = tasks
        .iter()
        .enumerate()
        .map(|(i, t)| (t.def.id.as_str(), i))
        .collect();
    let mut stmt = conn
        .prepare("SELECT task, report_id, period, body FROM reports ORDER BY seq")
        .map_err(|e| e.to_string())?;
    let mut rows = stmt.query([]).map_err(|e| e.to_string())?;
    while let Some(row) = rows.next().map_err(|e| e.to_string())? {
        let task: String = row.get(0).map_err(|e| e.to_string())?;
        let Some(&i) = index.get(task.as_str()) else {
            continue; // a task no longer served: kept in the database, not aggregated
        };
        let id = row
            .get_ref(1)
            .and_then(|v| Ok(v.as_blob()?))
            .map_err(|e| e.to_string())?;
        let id: [u8; 16] = id.try_into().map_err(|_| {
            format!(
                "stored report of task {task} has a report_id of {} bytes, not 16",
                id.len()
            )
        })?;
        if !seen.ids[i].insert(key(&ReportId(id))) {
            // Not written by this collector (it never stores an id twice):
            // counted once, as the upload would have been.
            eprintln!(
                "geopriv-serve: the database holds report id {} of task {task} twice; counted once",
                ReportId(id)
            );
            continue;
        }
        seen.total += 1;
        let period: i64 = row.get(2).map_err(|e| e.to_string())?;
        let body: String = row.get(3).map_err(|e| e.to_string())?;
        let report = decode_body(&tasks[i], &body)
            .map_err(|e| format!("stored report of task {task} does not decode: {e}"))?;
        add(&tasks[i], &mut live.tasks[i], period, report)
            .map_err(|(_, e)| format!("stored report of task {task} is refused: {e}"))?;
    }
    Ok(live)
}

/// [`rebuild`] in a read transaction of its own, noting its snapshot's
/// `data_version`.
fn reload(conn: &Connection, tasks: &[Task], seen: &mut Seen) -> Result<Live, String> {
    conn.execute_batch("BEGIN").map_err(|e| e.to_string())?;
    let r = (|| {
        // The first read starts the snapshot; data_version is then its own.
        conn.query_row("SELECT count(*) FROM tasks", [], |r| r.get::<_, i64>(0))
            .map_err(|e| e.to_string())?;
        let dv = data_version(conn).map_err(|e| e.to_string())?;
        let live = rebuild(conn, tasks, seen)?;
        seen.data_version = dv;
        Ok(live)
    })();
    let _ = conn.execute_batch("COMMIT");
    r
}

impl Store {
    /// Open (or create) the database, check the task definitions against
    /// the stored ones (a changed definition is refused: its reports were
    /// validated and clipped under the old one), rebuild the live
    /// aggregates and the id sets, and start the writer thread. A
    /// version-1 database is migrated first; a newer one is refused. At
    /// most `max_reports` reports are held (see the module doc).
    pub fn open(path: &Path, tasks: Vec<Task>, max_reports: u64) -> Result<Store, String> {
        let conn = open(path).map_err(|e| format!("--db {}: {e}", path.display()))?;
        if let Some(n) =
            prepare_schema(&conn).map_err(|e| format!("--db {}: {e}", path.display()))?
        {
            eprintln!(
                "geopriv-serve: --db {}: migrated {n} reports from schema version 1 to {SCHEMA_VERSION} \
                 (report ids checked in memory, no index)",
                path.display()
            );
        }
        for t in &tasks {
            let stored: Option<String> = conn
                .query_row(
                    "SELECT definition FROM tasks WHERE id = ?1",
                    [&t.def.id],
                    |r| r.get(0),
                )
                .map(Some)
                .or_else(|e| match e {
                    rusqlite::Error::QueryReturnedNoRows => Ok(None),
                    e => Err(e),
                })
                .map_err(|e| e.to_string())?;
            match stored {
                Some(s) if s != t.canonical => {
                    return Err(format!(
                        "task {} changed since its reports were stored (stored {s}, now {}); \
                         its reports were validated and clipped under the stored definition: \
                         keep it, or give the new definition a new task id",
                        t.def.id, t.canonical
                    ))
                }
                Some(_) => {}
                None => {
                    conn.execute(
                        "INSERT INTO tasks(id, definition) VALUES (?1, ?2)",
                        params![t.def.id, t.canonical],
                    )
                    .map_err(|e| e.to_string())?;
                }
            }
        }
        let mut seen = Seen::default();
        let live = reload(&conn, &tasks, &mut seen)?;
        let live = Arc::new(RwLock::new(live));
        let tasks = Arc::new(tasks);
        let metrics = Arc::new(Metrics::default());
        let (sender, rx) = mpsc::channel::<Msg>(4096);
        {
            let (live, tasks, metrics) = (live.clone(), tasks.clone(), metrics.clone());
            let writer = Writer {
                conn,
                live,
                tasks,
                metrics,
                seen,
                max_reports,
            };
            std::thread::Builder::new()
                .name("geopriv-writer".into())
                .spawn(move || writer.run(rx))
                .map_err(|e| e.to_string())?;
        }
        Ok(Store {
            sender,
            live,
            tasks,
            metrics,
            path: path.to_path_buf(),
        })
    }

    /// The database file.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Store `items` of task `task` in `period`; the answer comes after
    /// the commit that made them durable (or with the reason it failed).
    pub async fn submit(
        &self,
        task: usize,
        period: i64,
        items: Vec<Item>,
    ) -> Result<Vec<(u64, Outcome)>, String> {
        if items.is_empty() {
            return Ok(Vec::new());
        }
        let (reply, rx) = oneshot::channel();
        self.sender
            .send(Msg::Store(Job {
                task,
                period,
                items,
                reply,
            }))
            .await
            .map_err(|_| "the writer stopped".to_string())?;
        rx.await.map_err(|_| "the writer stopped".to_string())?
    }

    /// Bring the live aggregates up to date with the database before an
    /// analyst read: if another connection (a second collector on the same
    /// file) committed since the writer last looked (`PRAGMA
    /// data_version` of the writer's connection changed), the writer
    /// rebuilds the aggregates and id sets first. A read that follows
    /// another collector's acknowledged write so counts it.
    ///
    /// Cost: a round trip to the writer thread and one `PRAGMA
    /// data_version` (a read transaction on the WAL index, no page read);
    /// reads waiting together share one check, and a read arriving while
    /// a group commits is answered after it (as before: the group holds
    /// the aggregates' write lock). A rebuild (only after another
    /// connection wrote) reads every stored report.
    ///
    /// ```text
    /// store.sync().await?;            // then read store.live
    /// ```
    pub async fn sync(&self) -> Result<(), String> {
        let (reply, rx) = oneshot::channel();
        self.sender
            .send(Msg::Sync(reply))
            .await
            .map_err(|_| "the writer stopped".to_string())?;
        rx.await.map_err(|_| "the writer stopped".to_string())?
    }
}

/// Most reports in one transaction.
const GROUP_MAX: usize = 50_000;

/// The writer thread's state.
struct Writer {
    conn: Connection,
    live: Arc<RwLock<Live>>,
    tasks: Arc<Vec<Task>>,
    metrics: Arc<Metrics>,
    seen: Seen,
    max_reports: u64,
}

/// A request's answer: its outcomes, or (its record count, why) when it
/// was refused whole (503) although the group committed.
type Answer = Result<Vec<(u64, Outcome)>, (u64, String)>;

type Reply = (
    usize,
    oneshot::Sender<Result<Vec<(u64, Outcome)>, String>>,
    Answer,
);

impl Writer {
    fn run(mut self, mut rx: mpsc::Receiver<Msg>) {
        while let Some(first) = rx.blocking_recv() {
            let (mut n, mut jobs, mut syncs) = (0, Vec::new(), Vec::new());
            let mut next = Some(first);
            while let Some(m) = next {
                match m {
                    Msg::Store(j) => {
                        n += j.items.len();
                        jobs.push(j);
                    }
                    Msg::Sync(s) => syncs.push(s),
                }
                next = if n < GROUP_MAX {
                    rx.try_recv().ok()
                } else {
                    None
                };
            }
            if !jobs.is_empty() {
                self.group(jobs);
            }
            if !syncs.is_empty() {
                let r = self.sync();
                for s in syncs {
                    let _ = s.send(r.clone());
                }
            }
        }
    }

    /// Reload the aggregates and id sets if another connection committed
    /// since they were read (the writer's connection's `data_version`
    /// changed). After a group this finds nothing new unless another
    /// connection committed in between.
    fn sync(&mut self) -> Result<(), String> {
        let dv = data_version(&self.conn).map_err(|e| e.to_string())?;
        if dv == self.seen.data_version {
            return Ok(());
        }
        let live = self.live.clone();
        let mut guard = match live.write() {
            Ok(g) => g,
            Err(p) => p.into_inner(),
        };
        match reload(&self.conn, &self.tasks, &mut self.seen) {
            Ok(l) => {
                *guard = l;
                self.metrics.reloads.fetch_add(1, Ordering::Relaxed);
                eprintln!(
                    "geopriv-serve: another connection wrote to the database; \
                     report ids and aggregates reloaded for a read (run one collector per database)"
                );
                Ok(())
            }
            Err(e) => {
                // The sets were cleared in place: rebuilt again under the
                // write lock before the next group.
                self.seen.data_version = i64::MIN;
                Err(format!("reloading after another connection's commit: {e}"))
            }
        }
    }

    /// Store one group in one transaction and answer its requests.
    fn group(&mut self, jobs: Vec<Job>) {
        let mut replies = Vec::with_capacity(jobs.len());
        let result = {
            let live = self.live.clone();
            let mut guard = match live.write() {
                Ok(g) => g,
                Err(p) => p.into_inner(),
            };
            let r = self.commit(&mut guard, jobs, &mut replies);
            if r.is_err() {
                let _ = self.conn.execute_batch("ROLLBACK");
                match reload(&self.conn, &self.tasks, &mut self.seen) {
                    Ok(l) => *guard = l,
                    Err(e) => {
                        // Unknown state: rebuilt again under the write lock
                        // before the next group.
                        self.seen.data_version = i64::MIN;
                        eprintln!("geopriv-serve: rebuilding after a failed commit: {e}")
                    }
                }
            }
            r
        };
        let metrics = &self.metrics;
        match result {
            Ok(()) => {
                metrics.commits.fetch_add(1, Ordering::Relaxed);
                for (task, reply, answer) in replies {
                    let id = &self.tasks[task].def.id;
                    let outcomes = match answer {
                        Ok(o) => o,
                        Err((n, e)) => {
                            metrics.count(id, "store-full", n);
                            let _ = reply.send(Err(e));
                            continue;
                        }
                    };
                    let (mut acc, mut dup) = (0, 0);
                    for (_, o) in &outcomes {
                        match o {
                            Outcome::Accepted => acc += 1,
                            Outcome::Duplicate => dup += 1,
                            Outcome::Rejected { code, .. } => metrics.count(id, code, 1),
                        }
                    }
                    metrics.count(id, "accepted", acc);
                    metrics.count(id, "duplicate", dup);
                    let _ = reply.send(Ok(outcomes));
                }
            }
            Err(e) => {
                metrics.commit_failures.fetch_add(1, Ordering::Relaxed);
                eprintln!(
                    "geopriv-serve: commit failed, {} request(s) answered 503: {e}",
                    replies.len()
                );
                for (_, reply, _) in replies {
                    let _ = reply.send(Err(e.clone()));
                }
            }
        }
    }

    fn commit(
        &mut self,
        live: &mut Live,
        jobs: Vec<Job>,
        replies: &mut Vec<Reply>,
    ) -> Result<(), String> {
        // Collect the reply channels first so that they are answered
        // whatever happens below.
        let mut work = Vec::with_capacity(jobs.len());
        for j in jobs {
            replies.push((j.task, j.reply, Ok(Vec::new())));
            work.push((j.task, j.period, j.items));
        }
        let conn = &self.conn;
        let tasks = &self.tasks;
        let seen = &mut self.seen;
        let e = |e: rusqlite::Error| e.to_string();
        conn.execute_batch("BEGIN IMMEDIATE").map_err(e)?;
        // Under the write lock: did another connection commit since the
        // sets were read? Then they (and the aggregates) are stale.
        let dv = data_version(conn).map_err(e)?;
        if dv != seen.data_version {
            *live = rebuild(conn, tasks, seen)?;
            seen.data_version = dv;
            self.metrics.reloads.fetch_add(1, Ordering::Relaxed);
            eprintln!(
                "geopriv-serve: another connection wrote to the database; \
                 report ids and aggregates reloaded (run one collector per database)"
            );
        }
        let mut ins = conn
            .prepare_cached(
                "INSERT INTO reports(task, report_id, period, body) VALUES (?1, ?2, ?3, ?4)",
            )
            .map_err(e)?;
        for (k, (task, period, items)) in work.into_iter().enumerate() {
            let t = &tasks[task];
            let set = &mut seen.ids[task];
            // Over the limit? Counted before anything of the request is
            // stored: its distinct new ids (an id repeated within the
            // request is stored once, so it is counted once; otherwise a
            // request [a, a] with room for one report would be refused on
            // every retry). The distinct count is only taken when the plain
            // count would not fit.
            let mut fresh = items.iter().filter(|i| !set.contains(&key(&i.id))).count() as u64;
            if fresh > 0 && seen.total.saturating_add(fresh) > self.max_reports {
                let distinct: HashSet<u128> = items
                    .iter()
                    .map(|i| key(&i.id))
                    .filter(|k| !set.contains(k))
                    .collect();
                fresh = distinct.len() as u64;
            }
            if fresh > 0 && seen.total.saturating_add(fresh) > self.max_reports {
                replies[k].2 = Err((
                    items.len() as u64,
                    format!(
                        "the collector holds its limit of {} reports (--max-reports)",
                        self.max_reports
                    ),
                ));
                continue;
            }
            let Ok(out) = &mut replies[k].2 else {
                continue;
            };
            out.reserve(items.len());
            for item in items {
                let id = key(&item.id);
                if set.contains(&id) {
                    out.push((item.index, Outcome::Duplicate));
                    continue;
                }
                match add(t, &mut live.tasks[task], period, item.report) {
                    Ok(()) => {
                        ins.execute(params![t.def.id, &item.id.0[..], period, item.body])
                            .map_err(e)?;
                        set.insert(id);
                        seen.total += 1;
                        out.push((item.index, Outcome::Accepted));
                    }
                    Err((code, reason)) => {
                        out.push((item.index, Outcome::Rejected { code, reason }))
                    }
                }
            }
        }
        conn.execute_batch("COMMIT").map_err(e)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const TASKS: &str = "[[tasks]]\nid = \"income\"\nquery = { threshold = { threshold = 100000.0, width = 20000.0 } }\nmechanism = \"polyplace\"\nepsilon = 0.0001\ndelta = 0.0\nmin_batch = 1\nperiod = 86400\n";

    /// A fresh directory per call (the tests run in parallel).
    fn dir() -> PathBuf {
        static CALLS: AtomicU64 = AtomicU64::new(0);
        let k = CALLS.fetch_add(1, Ordering::Relaxed);
        let d = std::env::temp_dir().join(format!("geopriv-store-{}-{k}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d).unwrap();
        d
    }

    fn tasks(d: &Path) -> Vec<Task> {
        let p = d.join("tasks.toml");
        std::fs::write(&p, TASKS).unwrap();
        crate::task::load(&p).unwrap()
    }

    fn body(id: u8) -> String {
        format!(
            r#"{{"version":2,"query":{{"threshold":{{"threshold":100000.0,"width":20000.0}}}},"mechanism":"polyplace","epsilon":0.0001,"delta":0.0,"value":0.5,"report_id":"{id:02x}a883eba9fabe8ca388c62af4dc50de"}}"#
        )
    }

    fn item(index: u64, id: u8) -> Item {
        let b = body(id);
        let r = Report::from_json(&b).unwrap();
        Item {
            index,
            id: r.report_id.unwrap(),
            body: b,
            report: Decoded::Value(r),
        }
    }

    fn rt() -> tokio::runtime::Runtime {
        tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap()
    }

    fn submit(rt: &tokio::runtime::Runtime, s: &Store, ids: &[u8]) -> Result<Vec<Outcome>, String> {
        let items = ids
            .iter()
            .enumerate()
            .map(|(k, &i)| item(k as u64 + 1, i))
            .collect();
        rt.block_on(s.submit(0, 86400, items))
            .map(|o| o.into_iter().map(|(_, o)| o).collect())
    }

    fn n(s: &Store) -> u64 {
        s.live.read().unwrap().tasks[0]
            .periods
            .values()
            .map(|p| p.n)
            .sum()
    }

    fn stored(path: &Path) -> i64 {
        reader(path)
            .unwrap()
            .query_row("SELECT count(*) FROM reports", [], |r| r.get(0))
            .unwrap()
    }

    use Outcome::{Accepted as A, Duplicate as D};

    /// Ids stored before, and repeated within a batch, are duplicates;
    /// after a restart (the sets rebuilt from the table) too.
    #[test]
    fn an_id_is_stored_once_also_after_a_restart() {
        let (d, rt) = (dir(), rt());
        let db = d.join("c.db");
        let s = Store::open(&db, tasks(&d), 100).unwrap();
        assert_eq!(submit(&rt, &s, &[1, 2, 1]).unwrap(), [A, A, D]);
        assert_eq!(submit(&rt, &s, &[2, 3]).unwrap(), [D, A]);
        assert_eq!((n(&s), stored(&db)), (3, 3));
        drop(s);
        let s = Store::open(&db, tasks(&d), 100).unwrap();
        assert_eq!(n(&s), 3);
        assert_eq!(submit(&rt, &s, &[3, 1, 4]).unwrap(), [D, D, A]);
        assert_eq!((n(&s), stored(&db)), (4, 4));
        // One collector per database: its own commits never look like
        // another connection's, for the writer or for a read's sync.
        rt.block_on(s.sync()).unwrap();
        assert_eq!(s.metrics.reloads.load(Ordering::Relaxed), 0);
        let _ = std::fs::remove_dir_all(&d);
    }

    /// Past `max_reports` a request with a new id is refused whole (503,
    /// nothing stored); one of ids all stored before is still answered.
    #[test]
    fn past_the_limit_new_reports_are_refused_and_duplicates_answered() {
        let (d, rt) = (dir(), rt());
        let db = d.join("c.db");
        let s = Store::open(&db, tasks(&d), 3).unwrap();
        assert_eq!(submit(&rt, &s, &[1, 2]).unwrap(), [A, A]);
        let e = submit(&rt, &s, &[3, 4]).unwrap_err();
        assert!(e.contains("--max-reports"), "{e}");
        assert_eq!((n(&s), stored(&db)), (2, 2));
        assert_eq!(submit(&rt, &s, &[2, 1]).unwrap(), [D, D]);
        assert_eq!(submit(&rt, &s, &[1, 3]).unwrap(), [D, A]);
        assert!(submit(&rt, &s, &[9]).is_err());
        assert_eq!((n(&s), stored(&db)), (3, 3));
        let m = s.metrics.reports.lock().unwrap().clone();
        assert_eq!(m.get(&("income".into(), "store-full".into())), Some(&3));
        let _ = std::fs::remove_dir_all(&d);
    }

    /// Two stores on one file (a second collector started by mistake):
    /// each sees the other's commits before its own, so an id is still
    /// stored once and the aggregates count every stored report.
    #[test]
    fn a_second_writer_on_the_same_file_is_noticed() {
        let (d, rt) = (dir(), rt());
        let db = d.join("c.db");
        let a = Store::open(&db, tasks(&d), 100).unwrap();
        let b = Store::open(&db, tasks(&d), 100).unwrap();
        assert_eq!(submit(&rt, &a, &[1, 2]).unwrap(), [A, A]);
        assert_eq!(submit(&rt, &b, &[2, 3]).unwrap(), [D, A]);
        assert_eq!(n(&b), 3);
        // A read's sync takes in b's commit without a write of a's
        // (attack9 O1), once: a second sync finds nothing new.
        assert_eq!(n(&a), 2);
        rt.block_on(a.sync()).unwrap();
        rt.block_on(a.sync()).unwrap();
        assert_eq!(n(&a), 3);
        assert_eq!(a.metrics.reloads.load(Ordering::Relaxed), 1);
        assert_eq!(submit(&rt, &a, &[3, 4]).unwrap(), [D, A]);
        assert_eq!(n(&a), 4);
        assert_eq!(stored(&db), 4);
        assert_eq!(a.metrics.reloads.load(Ordering::Relaxed), 1);
        rt.block_on(b.sync()).unwrap();
        assert_eq!(n(&b), 4);
        assert_eq!(b.metrics.reloads.load(Ordering::Relaxed), 2);
        let _ = std::fs::remove_dir_all(&d);
    }

    /// A schema-version-1 database at `db` (user_version 0) holding task
    /// `t[0]` as 'income' and the reports (seq, id of [`item`]`(0, id)`);
    /// `constraint` is the reports table's last clause (version 1 had
    /// `UNIQUE(task, report_id)`; "" builds a hand-made one without it).
    fn version_1_database(db: &Path, t: &[Task], constraint: &str, rows: &[(i64, u8)]) {
        let c = Connection::open(db).unwrap();
        let sep = if constraint.is_empty() { "" } else { ", " };
        c.execute_batch(&format!(
            "CREATE TABLE tasks(id TEXT PRIMARY KEY, definition TEXT NOT NULL);
             CREATE TABLE reports(seq INTEGER PRIMARY KEY, task TEXT NOT NULL,
               report_id BLOB NOT NULL, period INTEGER NOT NULL, body TEXT NOT NULL{sep}{constraint});"
        ))
        .unwrap();
        c.execute("INSERT INTO tasks VALUES ('income', ?1)", [&t[0].canonical])
            .unwrap();
        for &(seq, id) in rows {
            let it = item(0, id);
            c.execute(
                "INSERT INTO reports VALUES (?1, 'income', ?2, 86400, ?3)",
                params![seq, &it.id.0[..], it.body],
            )
            .unwrap();
        }
    }

    /// A schema-version-1 database (`UNIQUE(task, report_id)`, user_version
    /// 0) is migrated on open: same rows in the same order, no index on the
    /// id, duplicates still found; a newer version is refused.
    #[test]
    fn a_version_1_database_is_migrated_and_a_newer_one_refused() {
        let (d, rt) = (dir(), rt());
        let db = d.join("old.db");
        let t = tasks(&d);
        version_1_database(&db, &t, "UNIQUE(task, report_id)", &[(5, 7), (9, 8)]);
        let s = Store::open(&db, t, 100).unwrap();
        assert_eq!(n(&s), 2);
        assert_eq!(submit(&rt, &s, &[8, 1]).unwrap(), [D, A]);
        let c = reader(&db).unwrap();
        let v: i64 = c
            .query_row("PRAGMA user_version", [], |r| r.get(0))
            .unwrap();
        let idx: i64 = c
            .query_row(
                "SELECT count(*) FROM sqlite_master WHERE type = 'index' AND tbl_name = 'reports'",
                [],
                |r| r.get(0),
            )
            .unwrap();
        let seqs: Vec<i64> = c
            .prepare("SELECT seq FROM reports ORDER BY seq")
            .unwrap()
            .query_map([], |r| r.get(0))
            .unwrap()
            .collect::<Result<_, _>>()
            .unwrap();
        assert_eq!((v, idx), (SCHEMA_VERSION, 0));
        assert_eq!(seqs, [5, 9, 10]);
        drop((s, c));
        // Opened again: already version 2, nothing migrated, same state.
        let s = Store::open(&db, tasks(&d), 100).unwrap();
        assert_eq!(n(&s), 3);
        drop(s);
        Connection::open(&db)
            .unwrap()
            .pragma_update(None, "user_version", 3)
            .unwrap();
        let e = Store::open(&db, tasks(&d), 100).err().unwrap();
        assert!(e.contains("schema version 3") && e.contains("newer"), "{e}");
        let _ = std::fs::remove_dir_all(&d);
    }
    /// Attack: a request repeating one new id, at a limit with room for
    /// exactly that one report, is stored once (the repeat is a
    /// duplicate), not refused forever: a device outbox holding such a
    /// batch must drain.
    #[test]
    fn attack_a_repeated_id_at_the_limit_is_stored_once() {
        let (d, rt) = (dir(), rt());
        let db = d.join("c.db");
        let s = Store::open(&db, tasks(&d), 1).unwrap();
        assert_eq!(submit(&rt, &s, &[5, 5]).unwrap(), [A, D]);
        assert_eq!(submit(&rt, &s, &[5, 5]).unwrap(), [D, D]);
        assert!(submit(&rt, &s, &[6]).is_err());
        assert_eq!((n(&s), stored(&db)), (1, 1));
        let _ = std::fs::remove_dir_all(&d);
    }

    /// Attack: limit 0 stores nothing and answers nothing but 503 for new
    /// ids; ids stored before (by a collector with a higher limit) are
    /// still answered as duplicates.
    #[test]
    fn attack_limit_zero_still_answers_stored_ids() {
        let (d, rt) = (dir(), rt());
        let db = d.join("c.db");
        let s = Store::open(&db, tasks(&d), 10).unwrap();
        assert_eq!(submit(&rt, &s, &[1, 2]).unwrap(), [A, A]);
        drop(s);
        let s = Store::open(&db, tasks(&d), 0).unwrap();
        assert_eq!(n(&s), 2);
        assert_eq!(submit(&rt, &s, &[2, 1, 2]).unwrap(), [D, D, D]);
        assert!(submit(&rt, &s, &[1, 3]).is_err());
        assert_eq!((n(&s), stored(&db)), (2, 2));
        let _ = std::fs::remove_dir_all(&d);
    }

    /// Attack: a hand-made version-1 database without the UNIQUE index and
    /// with one id stored twice is migrated; the id is counted once and a
    /// retry of it is a duplicate, before and after a restart.
    #[test]
    fn attack_a_version_1_database_with_duplicate_rows_counts_them_once() {
        let (d, rt) = (dir(), rt());
        let db = d.join("odd.db");
        let t = tasks(&d);
        version_1_database(&db, &t, "", &[(1, 7), (2, 7), (3, 8)]);
        let s = Store::open(&db, t, 100).unwrap();
        assert_eq!(n(&s), 2);
        assert_eq!(submit(&rt, &s, &[7, 8, 9]).unwrap(), [D, D, A]);
        drop(s);
        let s = Store::open(&db, tasks(&d), 100).unwrap();
        assert_eq!(n(&s), 3);
        assert_eq!(submit(&rt, &s, &[7, 9]).unwrap(), [D, D]);
        let _ = std::fs::remove_dir_all(&d);
    }

    /// Attack: user_version 1 was never written by any collector (version 1
    /// databases carry user_version 0); it is refused, not migrated, and
    /// the database is left as it was.
    #[test]
    fn attack_user_version_1_is_refused_untouched() {
        let d = dir();
        let db = d.join("v1.db");
        {
            let c = Connection::open(&db).unwrap();
            c.execute_batch("CREATE TABLE reports(x); PRAGMA user_version = 1;")
                .unwrap();
        }
        let e = Store::open(&db, tasks(&d), 100).err().unwrap();
        assert!(e.contains("not written by") && !e.contains("newer"), "{e}");
        let v: i64 = reader(&db)
            .unwrap()
            .query_row("PRAGMA user_version", [], |r| r.get(0))
            .unwrap();
        assert_eq!(v, 1);
        let _ = std::fs::remove_dir_all(&d);
    }
}
