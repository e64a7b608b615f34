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
//! **Exactly once.** `UNIQUE(task, report_id)`: a report id already stored
//! is not inserted again (`INSERT OR IGNORE`, `changes() == 0`) and is
//! answered as a duplicate, also within one batch. A report is added to
//! the live aggregate only when its row was inserted; if the aggregate
//! refuses it, the row is deleted in the same transaction (rejected). If
//! the COMMIT fails (disk full, I/O error) the transaction is rolled back,
//! the live aggregates are rebuilt from the database, and every request in
//! the group is answered 503: nothing unacknowledged is counted, nothing
//! acknowledged is lost.

use crate::task::{Kind, PeriodAgg, Task};
use geopriv::map::MapReport;
use geopriv::{Report, ReportId};
use rusqlite::{params, Connection, OpenFlags};
use std::collections::BTreeMap;
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

/// Counters for `/metrics`.
#[derive(Debug, Default)]
pub struct Metrics {
    /// Per (task, outcome or rejection code).
    pub reports: Mutex<BTreeMap<(String, String), u64>>,
    /// Committed transactions.
    pub commits: AtomicU64,
    /// Failed transactions (answered 503).
    pub commit_failures: AtomicU64,
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
    sender: mpsc::Sender<Job>,
    /// Live aggregates.
    pub live: Arc<RwLock<Live>>,
    /// The tasks served.
    pub tasks: Arc<Vec<Task>>,
    /// Counters.
    pub metrics: Arc<Metrics>,
    path: PathBuf,
}

const SCHEMA: &str = "
CREATE TABLE IF NOT EXISTS tasks(id TEXT PRIMARY KEY, definition TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS reports(
  seq INTEGER PRIMARY KEY,
  task TEXT NOT NULL,
  report_id BLOB NOT NULL,
  period INTEGER NOT NULL,
  body TEXT NOT NULL,
  UNIQUE(task, report_id)
);
";

fn open(path: &Path) -> rusqlite::Result<Connection> {
    let conn = Connection::open(path)?;
    conn.busy_timeout(std::time::Duration::from_secs(10))?;
    conn.pragma_update(None, "journal_mode", "WAL")?;
    conn.pragma_update(None, "synchronous", "FULL")?;
    Ok(conn)
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

/// Rebuild every task's live aggregates from the database.
fn rebuild(conn: &Connection, tasks: &[Task]) -> Result<Live, String> {
    let mut live = Live {
        tasks: vec![TaskLive::default(); tasks.len()],
    };
    let index: BTreeMap<&str, usize> = tasks
        .iter()
        .enumerate()
        .map(|(i, t)| (t.def.id.as_str(), i))
        .collect();
    let mut stmt = conn
        .prepare("SELECT task, period, body FROM reports ORDER BY seq")
        .map_err(|e| e.to_string())?;
    let mut rows = stmt.query([]).map_err(|e| e.to_string())?;
    while let Some(row) = rows.next().map_err(|e| e.to_string())? {
        let task: String = row.get(0).map_err(|e| e.to_string())?;
        let Some(&i) = index.get(task.as_str()) else {
            continue; // a task no longer served: kept in the database, not aggregated
        };
        let period: i64 = row.get(1).map_err(|e| e.to_string())?;
        let body: String = row.get(2).map_err(|e| e.to_string())?;
        let report = decode_body(&tasks[i], &body)
            .map_err(|e| format!("stored report of task {task} does not decode: {e}"))?;
        add(&tasks[i], &mut live.tasks[i], period, report)
            .map_err(|(_, e)| format!("stored report of task {task} is refused: {e}"))?;
    }
    Ok(live)
}

impl Store {
    /// Open (or create) the database, check the task definitions against
    /// the stored ones (a changed definition is refused: its reports were
    /// validated and clipped under the old one), rebuild the live
    /// aggregates, and start the writer thread.
    pub fn open(path: &Path, tasks: Vec<Task>) -> Result<Store, String> {
        let conn = open(path).map_err(|e| format!("--db {}: {e}", path.display()))?;
        conn.execute_batch(SCHEMA)
            .map_err(|e| format!("--db {}: {e}", path.display()))?;
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
        let live = rebuild(&conn, &tasks)?;
        let live = Arc::new(RwLock::new(live));
        let tasks = Arc::new(tasks);
        let metrics = Arc::new(Metrics::default());
        let (sender, rx) = mpsc::channel::<Job>(4096);
        {
            let (live, tasks, metrics) = (live.clone(), tasks.clone(), metrics.clone());
            std::thread::Builder::new()
                .name("geopriv-writer".into())
                .spawn(move || writer(conn, rx, live, tasks, metrics))
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
            .send(Job {
                task,
                period,
                items,
                reply,
            })
            .await
            .map_err(|_| "the writer stopped".to_string())?;
        rx.await.map_err(|_| "the writer stopped".to_string())?
    }
}

/// Most reports in one transaction.
const GROUP_MAX: usize = 50_000;

fn writer(
    conn: Connection,
    mut rx: mpsc::Receiver<Job>,
    live: Arc<RwLock<Live>>,
    tasks: Arc<Vec<Task>>,
    metrics: Arc<Metrics>,
) {
    while let Some(first) = rx.blocking_recv() {
        let mut n = first.items.len();
        let mut jobs = vec![first];
        while n < GROUP_MAX {
            match rx.try_recv() {
                Ok(j) => {
                    n += j.items.len();
                    jobs.push(j);
                }
                Err(_) => break,
            }
        }
        let mut replies = Vec::with_capacity(jobs.len());
        let result = {
            let mut guard = match live.write() {
                Ok(g) => g,
                Err(p) => p.into_inner(),
            };
            let r = commit(&conn, &tasks, &mut guard, jobs, &mut replies);
            if r.is_err() {
                let _ = conn.execute_batch("ROLLBACK");
                match rebuild(&conn, &tasks) {
                    Ok(l) => *guard = l,
                    Err(e) => eprintln!("geopriv-serve: rebuilding after a failed commit: {e}"),
                }
            }
            r
        };
        match result {
            Ok(()) => {
                metrics.commits.fetch_add(1, Ordering::Relaxed);
                for (task, reply, outcomes) in replies {
                    let (mut acc, mut dup) = (0, 0);
                    for (_, o) in &outcomes {
                        match o {
                            Outcome::Accepted => acc += 1,
                            Outcome::Duplicate => dup += 1,
                            Outcome::Rejected { code, .. } => {
                                metrics.count(&tasks[task].def.id, code, 1)
                            }
                        }
                    }
                    metrics.count(&tasks[task].def.id, "accepted", acc);
                    metrics.count(&tasks[task].def.id, "duplicate", dup);
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
                    let _ = reply.send(Err(e.to_string()));
                }
            }
        }
    }
}

type Reply = (
    usize,
    oneshot::Sender<Result<Vec<(u64, Outcome)>, String>>,
    Vec<(u64, Outcome)>,
);

fn commit(
    conn: &Connection,
    tasks: &[Task],
    live: &mut Live,
    jobs: Vec<Job>,
    replies: &mut Vec<Reply>,
) -> rusqlite::Result<()> {
    // Collect the reply channels first so that they are answered whatever
    // happens below.
    let mut work = Vec::with_capacity(jobs.len());
    for j in jobs {
        replies.push((j.task, j.reply, Vec::new()));
        work.push((j.task, j.period, j.items));
    }
    conn.execute_batch("BEGIN IMMEDIATE")?;
    let mut ins = conn.prepare_cached(
        "INSERT OR IGNORE INTO reports(task, report_id, period, body) VALUES (?1, ?2, ?3, ?4)",
    )?;
    let mut del = conn.prepare_cached("DELETE FROM reports WHERE task = ?1 AND report_id = ?2")?;
    for (k, (task, period, items)) in work.into_iter().enumerate() {
        let t = &tasks[task];
        let out = &mut replies[k].2;
        out.reserve(items.len());
        for item in items {
            let id = &item.id.0[..];
            if ins.execute(params![t.def.id, id, period, item.body])? == 0 {
                out.push((item.index, Outcome::Duplicate));
                continue;
            }
            match add(t, &mut live.tasks[task], period, item.report) {
                Ok(()) => out.push((item.index, Outcome::Accepted)),
                Err((code, reason)) => {
                    del.execute(params![t.def.id, id])?;
                    out.push((item.index, Outcome::Rejected { code, reason }));
                }
            }
        }
    }
    conn.execute_batch("COMMIT")
}
