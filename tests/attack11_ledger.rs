//! attack11 (docs/ATTACK-11.md): the counter-bound ledger (d2f636b,
//! docs/MATH.md §8.3) and `Ledger::commit_n` attacked by a tester who did
//! not write them.

use geopriv::device::budget::{
    BudgetPolicy, BudgetUnit, Charge, FileLedger, Ledger, MemoryCounter, MonotonicCounter,
};

mod common;
use common::TempDir;

fn policy(total_epsilon: f64) -> BudgetPolicy {
    BudgetPolicy::new(BudgetUnit::PerMetre, total_epsilon, 0.0).unwrap()
}

fn metres(epsilon: f64) -> Charge {
    Charge::new(BudgetUnit::PerMetre, epsilon, 0.0).unwrap()
}

/// Bind the ledger at `path` to `counter` and charge `n` more releases.
fn bound_with(path: &std::path::Path, p: &BudgetPolicy, counter: &MemoryCounter, n: u64) {
    let mut app = FileLedger::open_or_create(path, p)
        .unwrap()
        .with_counter(Box::new(counter.clone()))
        .unwrap();
    app.commit_n(&metres(0.1), n).unwrap();
    assert_eq!(counter.read().unwrap(), app.state().releases());
}

/// Finding 1: the file is deleted and a writer without the counter (the
/// CLI's `privatize --ledger`, which opens or creates) creates it anew and
/// charges it up to the counter's count. The new file carries no mark, so
/// before the fix the app's `with_counter` accepted it (3 releases on file,
/// 3 on the counter) and bound it: the 3 charges made before the deletion
/// were lost. A counter above 0 means some holder bound a file: an
/// unbound file under it is refused.
#[test]
fn a_deleted_bound_file_refilled_by_a_counterless_writer_is_refused() {
    let dir = TempDir::new("a11-delete-refill");
    let path = dir.file("ledger.json");
    let p = policy(1.0);
    let counter = MemoryCounter::default();
    bound_with(&path, &p, &counter, 3);
    std::fs::remove_file(&path).unwrap();
    let mut job = FileLedger::open_or_create(&path, &p).unwrap(); // no counter
    job.commit_n(&metres(0.1), 3).unwrap();
    drop(job);
    let app = FileLedger::open(&path, &p)
        .unwrap()
        .with_counter(Box::new(counter.clone()));
    let e =
        app.expect_err("a re-created file refilled to the counter was accepted: 3 charges lost");
    assert!(e.to_string().contains("counter"), "{e}");
}

/// Finding 1, second door: a backup taken before the file was first bound
/// (an app that adopts a counter in an update) is restored and refilled by
/// a writer without the counter.
#[test]
fn a_pre_binding_backup_refilled_by_a_counterless_writer_is_refused() {
    let dir = TempDir::new("a11-prebind-refill");
    let path = dir.file("ledger.json");
    let p = policy(1.0);
    let mut old_app = FileLedger::create(&path, &p).unwrap();
    old_app.commit(&metres(0.1)).unwrap();
    drop(old_app);
    let backup = std::fs::read_to_string(&path).unwrap(); // unbound, 1 release
    let counter = MemoryCounter::default();
    bound_with(&path, &p, &counter, 3); // binds at 1, then 3 more: counter 4
    assert_eq!(counter.read().unwrap(), 4);
    std::fs::write(&path, &backup).unwrap();
    let mut job = FileLedger::open(&path, &p).unwrap();
    job.commit_n(&metres(0.1), 3).unwrap(); // back to 4, no mark
    drop(job);
    let app = FileLedger::open(&path, &p)
        .unwrap()
        .with_counter(Box::new(counter.clone()));
    assert!(
        app.is_err(),
        "a pre-binding backup refilled to the counter was accepted: 3 charges lost"
    );
}

/// What held: every charging entry point of a counter-less writer is
/// refused on a bound file, whatever it charges; reading, acknowledging
/// and a memo key already charged stay allowed; the mark survives them.
#[test]
fn every_counterless_charge_is_refused_and_the_mark_survives() {
    let dir = TempDir::new("a11-paths");
    let path = dir.file("ledger.json");
    let p = policy(1.0);
    let counter = MemoryCounter::default();
    {
        let mut app = FileLedger::create(&path, &p)
            .unwrap()
            .with_counter(Box::new(counter.clone()))
            .unwrap();
        assert!(app.commit_once([1; 32], &metres(0.1)).unwrap());
        app.spend_to_outbox(&metres(0.1), || Ok("r".into()))
            .unwrap();
    }
    let before = std::fs::read_to_string(&path).unwrap();
    let mut job = FileLedger::open(&path, &p).unwrap();
    assert!(job.commit(&metres(0.1)).is_err());
    assert!(job.commit_n(&metres(0.1), 1).is_err());
    assert!(job.commit_n(&metres(0.1), 2).is_err());
    assert!(job.commit_once([2; 32], &metres(0.1)).is_err());
    assert!(job
        .spend_to_outbox(&metres(0.1), || Ok("s".into()))
        .is_err());
    assert!(job.spend(&metres(0.1), || Ok(1)).is_err());
    assert_eq!(std::fs::read_to_string(&path).unwrap(), before);
    // Allowed: nothing charged.
    job.commit_n(&metres(0.1), 0).unwrap();
    assert!(!job.commit_once([1; 32], &metres(0.1)).unwrap());
    let ids: Vec<u64> = job.pending_uploads().iter().map(|(id, _)| *id).collect();
    assert_eq!(ids.len(), 1);
    job.acknowledge(&ids).unwrap();
    job.refresh().unwrap();
    assert!(job.state().is_counter_bound());
    assert_eq!(job.state().releases(), 2);
    let text = std::fs::read_to_string(&path).unwrap();
    assert!(text.contains("\"counter_bound\":true"), "{text}");
    // And the app goes on.
    let mut app = FileLedger::open(&path, &p)
        .unwrap()
        .with_counter(Box::new(counter.clone()))
        .unwrap();
    app.commit(&metres(0.1)).unwrap();
    assert_eq!(counter.read().unwrap(), 3);
}

/// A writer without the counter that opened the file before it was bound
/// is refused once it is: the gate reads the state under the lock.
#[test]
fn a_handle_opened_before_the_binding_is_refused_after_it() {
    let dir = TempDir::new("a11-race");
    let path = dir.file("ledger.json");
    let p = policy(1.0);
    let mut job = FileLedger::create(&path, &p).unwrap();
    job.commit(&metres(0.1)).unwrap();
    let counter = MemoryCounter::default();
    let mut app = FileLedger::open(&path, &p)
        .unwrap()
        .with_counter(Box::new(counter.clone()))
        .unwrap();
    assert!(!job.state().is_counter_bound()); // its stale view
    assert!(job.commit(&metres(0.1)).is_err());
    assert!(job.commit_n(&metres(0.1), 3).is_err());
    app.commit(&metres(0.1)).unwrap();
    assert_eq!(counter.read().unwrap(), 2);
}

/// A counter whose `advance_to` fails, and one that reads an error: the
/// ledger is refused, never charged without the counter's knowledge.
#[test]
fn a_failing_counter_refuses_and_a_backward_counter_only_weakens_itself() {
    struct Broken {
        read_fails: bool,
    }
    impl MonotonicCounter for Broken {
        fn read(&self) -> geopriv::Result<u64> {
            if self.read_fails {
                Err(geopriv::Error::LedgerIo {
                    detail: "counter unreadable".into(),
                })
            } else {
                Ok(0)
            }
        }
        fn advance_to(&mut self, _: u64) -> geopriv::Result<()> {
            Err(geopriv::Error::LedgerIo {
                detail: "counter stuck".into(),
            })
        }
    }
    let dir = TempDir::new("a11-broken-counter");
    let path = dir.file("ledger.json");
    let p = policy(1.0);
    for read_fails in [true, false] {
        let _ = std::fs::remove_file(&path);
        let l = FileLedger::create(&path, &p).unwrap();
        assert!(l.with_counter(Box::new(Broken { read_fails })).is_err());
        // Nothing charged (a failed advance may leave the file marked:
        // the mark is written before the counter first moves).
        let l = FileLedger::open(&path, &p).unwrap();
        assert_eq!(l.state().releases(), 0);
    }
}

/// commit_n on a shared file at the budget's edge: exactly the charges
/// that fit, all or nothing (the ledger's slack, MATH §8.3: k charges of
/// fl(T/k) fit, k + 1 never do), and a huge n refused at the first charge
/// that does not fit, not after n steps.
#[test]
fn commit_n_at_the_edge_is_all_or_nothing() {
    let dir = TempDir::new("a11-commit-n");
    let path = dir.file("ledger.json");
    let p = policy(1.0);
    let mut a = FileLedger::create(&path, &p).unwrap();
    assert!(a.commit_n(&metres(0.1), 11).is_err());
    assert_eq!(a.state().releases(), 0);
    a.commit_n(&metres(0.1), 10).unwrap();
    assert!(a.commit_n(&metres(0.1), 1).is_err());
    assert!(a.commit_n(&metres(0.1), u64::MAX).is_err());
    let mut b = FileLedger::open(&path, &p).unwrap();
    assert!(b.commit_n(&metres(1e-3), 2).is_err());
    assert_eq!(b.state().releases(), 10);
    let text = std::fs::read_to_string(&path).unwrap();
    assert!(text.contains("\"releases\":10"), "{text}");
}

/// attack11 O3 (fixed in tidy13): a huge n that fits is checked in closed
/// form, not one charge at a time under the file's lock (about 82 ns a
/// charge: u64::MAX charges held the lock for ~48,000 years and every
/// other writer got `LedgerBusy`). One entry with count n is written, and
/// another handle charges the file right after.
#[test]
fn commit_n_of_a_huge_n_that_fits_is_immediate() {
    let dir = TempDir::new("a11-commit-n-huge");
    let path = dir.file("ledger.json");
    let p = policy(1.0);
    let mut a = FileLedger::create(&path, &p).unwrap();
    let tiny = metres(2f64.powi(-70)); // u64::MAX of them sum below 2^-6
    a.commit_n(&tiny, u64::MAX - 1).unwrap();
    assert_eq!(a.state().releases(), u64::MAX - 1);
    let mut b = FileLedger::open(&path, &p).unwrap();
    b.commit(&metres(0.5)).unwrap();
    assert_eq!(b.state().releases(), u64::MAX);
    assert!(b.commit_n(&tiny, 1).is_err()); // the release counter is full
    let history: Vec<_> = b.state().history().collect();
    assert_eq!(
        history,
        [(0, 2f64.powi(-70), 0.0, u64::MAX - 1), (0, 0.5, 0.0, 1)]
    );
}

/// Review leftover (tidy13): binding an unmarked file reads the counter
/// once (reload's floor check and the unmarked-file check used to read it
/// once each; a counter that moved between the two reads was judged on
/// two values). The refusals are those of the tests above.
///
/// tidy14: every advance is read back (`FileLedger::advance_counter`), so
/// the count is: one read to bind (the floor both checks use), plus one
/// read after each advance. Binding this file (1 release, counter at 0)
/// advances the counter to 1: 2 reads; each charge then adds 1 (advance
/// and read back). Binding a file whose count the counter already reads
/// advances nothing: 1 read.
#[test]
fn binding_a_file_reads_the_counter_once() {
    use std::sync::atomic::{AtomicU64, Ordering};
    use std::sync::Arc;
    struct Counting {
        inner: MemoryCounter,
        reads: Arc<AtomicU64>,
    }
    impl MonotonicCounter for Counting {
        fn read(&self) -> geopriv::Result<u64> {
            self.reads.fetch_add(1, Ordering::SeqCst);
            self.inner.read()
        }
        fn advance_to(&mut self, value: u64) -> geopriv::Result<()> {
            self.inner.advance_to(value)
        }
    }
    let dir = TempDir::new("a11-counter-reads");
    let path = dir.file("ledger.json");
    let p = policy(1.0);
    let mut job = FileLedger::create(&path, &p).unwrap();
    job.commit(&metres(0.1)).unwrap();
    let reads = Arc::new(AtomicU64::new(0));
    let counter = Counting {
        inner: MemoryCounter::default(),
        reads: reads.clone(),
    };
    let app = FileLedger::open(&path, &p)
        .unwrap()
        .with_counter(Box::new(counter))
        .unwrap();
    assert!(app.state().is_counter_bound());
    // The floor, then the read-back of the advance to 1.
    assert_eq!(reads.load(Ordering::SeqCst), 2);
    let mut app = app;
    app.commit(&metres(0.1)).unwrap();
    assert_eq!(reads.load(Ordering::SeqCst), 4); // reload's floor, read-back
    drop(app);
    let counter = Counting {
        inner: MemoryCounter::default(),
        reads: reads.clone(),
    };
    let mut at_two = counter.inner.clone();
    at_two.advance_to(2).unwrap();
    reads.store(0, Ordering::SeqCst);
    let _app = FileLedger::open(&path, &p)
        .unwrap()
        .with_counter(Box::new(counter))
        .unwrap();
    assert_eq!(reads.load(Ordering::SeqCst), 1); // at the file's count: no advance
}

/// tidy14: a Rust counter whose `advance_to` returns `Ok` without moving
/// (on the second charge) was believed: the bindings' app counter read it
/// back (attack12), the core did not. The app released the second value,
/// the counter stayed at 1, the file was restored to its first charge and
/// accepted: two values released, one recorded. The core now reads every
/// advance back: the release that would lose the charge fails `LedgerIo`
/// ("did not advance"), nothing released, and the restored copy is refused.
#[test]
fn a_counter_that_says_it_advanced_without_advancing_is_caught() {
    struct Lying {
        inner: MemoryCounter,
        advances: u32,
        skip: u32,
    }
    impl MonotonicCounter for Lying {
        fn read(&self) -> geopriv::Result<u64> {
            self.inner.read()
        }
        fn advance_to(&mut self, value: u64) -> geopriv::Result<()> {
            self.advances += 1;
            if self.advances == self.skip {
                return Ok(()); // "advanced"
            }
            self.inner.advance_to(value)
        }
    }
    let dir = TempDir::new("t14-lying-counter");
    let path = dir.file("ledger.json");
    let p = policy(1.0);
    let inner = MemoryCounter::default();
    FileLedger::create(&path, &p).unwrap();
    let mut app = FileLedger::open(&path, &p)
        .unwrap()
        .with_counter(Box::new(Lying {
            inner: inner.clone(),
            advances: 0,
            skip: 3, // the second charge's (the binding at 0 probes advance_to(0))
        }))
        .unwrap();
    let mut released = 0u64;
    app.commit(&metres(0.1)).unwrap();
    released += 1;
    let backup = std::fs::read(&path).unwrap();
    match app.commit(&metres(0.1)) {
        Ok(()) => released += 1,
        Err(e) => assert!(
            matches!(e, geopriv::Error::LedgerIo { ref detail } if detail.contains("did not advance")),
            "{e:?}"
        ),
    }
    drop(app);
    std::fs::write(&path, &backup).unwrap();
    if let Ok(mut again) = FileLedger::open(&path, &p)
        .unwrap()
        .with_counter(Box::new(inner.clone()))
    {
        if again.commit(&metres(0.1)).is_ok() {
            released += 1;
        }
    }
    let recorded = FileLedger::open(&path, &p).unwrap().state().releases();
    assert!(
        released <= recorded,
        "{released} values released, the file the app uses records {recorded}: a charge lost"
    );
}

/// tidy14: an `advance_to` that moves the counter past the file's count
/// (someone else advanced it) is refused by the core's read-back as the
/// bindings refused it: `InvalidLedgerState`, nothing released.
#[test]
fn a_counter_ahead_of_the_file_after_advancing_is_refused() {
    struct Ahead(MemoryCounter);
    impl MonotonicCounter for Ahead {
        fn read(&self) -> geopriv::Result<u64> {
            self.0.read()
        }
        fn advance_to(&mut self, value: u64) -> geopriv::Result<()> {
            // The binding's advance_to(0) is honest; the first charge's
            // lands past the file.
            self.0.advance_to(if value == 0 { 0 } else { value + 4 })
        }
    }
    let dir = TempDir::new("t14-ahead-counter");
    let path = dir.file("ledger.json");
    let p = policy(1.0);
    let mut app = FileLedger::create(&path, &p)
        .unwrap()
        .with_counter(Box::new(Ahead(MemoryCounter::default())))
        .unwrap();
    let e = app.commit(&metres(0.1)).unwrap_err();
    assert!(
        matches!(e, geopriv::Error::InvalidLedgerState { ref reason } if reason.contains("after advance_to(1)")),
        "{e:?}"
    );
}

/// attack12 (docs/ATTACK-12.md): `create_with_counter` on a file that
/// exists was refused with "no ledger file at ... the platform monotonic
/// counter says 1 ...: the file was deleted" (false, and another error
/// kind than `create`'s). It is `create`'s refusal now (`LedgerIo`, "already
/// exists"), the file untouched; the deleted case keeps its message.
#[test]
fn create_with_counter_on_an_existing_file_says_it_exists() {
    let dir = TempDir::new("a12-create-existing");
    let path = dir.file("ledger.json");
    let p = policy(1.0);
    let counter = MemoryCounter::default();
    let mut app = FileLedger::create_with_counter(&path, &p, Box::new(counter.clone())).unwrap();
    app.commit(&metres(0.1)).unwrap();
    drop(app);
    let before = std::fs::read(&path).unwrap();
    for c in [counter.clone(), MemoryCounter::default()] {
        let e = FileLedger::create_with_counter(&path, &p, Box::new(c)).unwrap_err();
        assert!(matches!(e, geopriv::Error::LedgerIo { .. }), "{e:?}");
        assert!(e.to_string().contains("exists"), "{e}");
        assert!(!e.to_string().contains("deleted"), "{e}");
    }
    assert_eq!(std::fs::read(&path).unwrap(), before);
    std::fs::remove_file(&path).unwrap();
    let e = FileLedger::create_with_counter(&path, &p, Box::new(counter)).unwrap_err();
    assert!(e.to_string().contains("deleted"), "{e}");
    assert!(!path.exists());
}

/// attack12 O3 (docs/ATTACK-12.md), tidy14: `spend_to_outbox` whose
/// counter then fails said "ledger I/O failed, nothing released" while
/// the report was charged and queued (it is uploaded with the outbox). It
/// says so now: `CounterNotAdvanced` with the queued report's id.
#[test]
fn an_outbox_release_whose_counter_fails_says_it_is_queued() {
    struct Busy {
        inner: MemoryCounter,
        busy: std::sync::Arc<std::sync::atomic::AtomicBool>,
    }
    impl MonotonicCounter for Busy {
        fn read(&self) -> geopriv::Result<u64> {
            self.inner.read()
        }
        fn advance_to(&mut self, value: u64) -> geopriv::Result<()> {
            if self.busy.load(std::sync::atomic::Ordering::SeqCst) {
                return Err(geopriv::Error::LedgerIo {
                    detail: "TPM busy".into(),
                });
            }
            self.inner.advance_to(value)
        }
    }
    let dir = TempDir::new("t14-outbox-counter");
    let path = dir.file("ledger.json");
    let p = policy(1.0);
    let busy = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let mut app = FileLedger::create(&path, &p)
        .unwrap()
        .with_counter(Box::new(Busy {
            inner: MemoryCounter::default(),
            busy: busy.clone(),
        }))
        .unwrap();
    busy.store(true, std::sync::atomic::Ordering::SeqCst);
    let e = app
        .spend_to_outbox(&metres(0.1), || Ok("r".into()))
        .unwrap_err();
    let id = app.pending_uploads()[0].0;
    assert!(
        matches!(e, geopriv::Error::CounterNotAdvanced { id: i, ref detail } if i == id && detail == "TPM busy"),
        "{e:?}"
    );
    let message = e.to_string();
    assert!(
        message.starts_with("charged and queued in the outbox"),
        "{message}"
    );
    assert!(message.contains("TPM busy"), "{message}");
    assert!(!message.contains("nothing released"), "{message}");
    assert_eq!(app.pending_uploads().len(), 1);
    assert_eq!(app.state().releases(), 1);
    // Any other charge keeps LedgerIo's message (nothing was released).
    let e = app.commit(&metres(0.1)).unwrap_err();
    assert!(matches!(e, geopriv::Error::LedgerIo { .. }), "{e:?}");
}
