//! Attacks on the device ledger (docs/MATH.md §8.3) by a tester who did not
//! write it: odd file types at the ledger's path, a writer killed at random
//! times.

use geopriv::device::budget::{BudgetPolicy, BudgetUnit, Charge, FileLedger, Ledger};
use std::io::Write;
use std::path::Path;
use std::time::Duration;

mod common;
use common::TempDir;

fn policy(total_epsilon: f64) -> BudgetPolicy {
    BudgetPolicy::new(BudgetUnit::PerMetre, total_epsilon, 0.0).unwrap()
}

fn metres(epsilon: f64) -> Charge {
    Charge::new(BudgetUnit::PerMetre, epsilon, 0.0).unwrap()
}

/// Run `f` on a thread; `None` if it has not returned within `limit`.
fn within<T: Send + 'static>(limit: Duration, f: impl FnOnce() -> T + Send + 'static) -> Option<T> {
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(f());
    });
    rx.recv_timeout(limit).ok()
}

#[cfg(unix)]
#[test]
fn a_fifo_at_the_ledger_path_is_refused_without_hanging() {
    // Attack: the ledger path is a FIFO. Opening it for reading blocks
    // until a writer appears, with the ledger's lock held: every process
    // using the ledger hung (and the lock timeout never fired).
    let dir = TempDir::new("fifo");
    let path = dir.file("ledger.json");
    let made = std::process::Command::new("mkfifo")
        .arg(&path)
        .status()
        .map(|s| s.success());
    if !matches!(made, Ok(true)) {
        return; // no mkfifo here
    }
    for open_or_create in [false, true] {
        let p = path.clone();
        let outcome = within(Duration::from_secs(5), move || {
            let r = if open_or_create {
                FileLedger::open_or_create(&p, &policy(1.0))
            } else {
                FileLedger::open(&p, &policy(1.0))
            };
            r.map(|_| ()).map_err(|e| e.to_string())
        });
        if outcome.is_none() {
            // Unblock the stuck reader before failing.
            let _ = std::fs::OpenOptions::new().write(true).open(&path);
        }
        let outcome = outcome.expect("opening a FIFO ledger hung");
        assert!(outcome.is_err(), "a FIFO was accepted as a ledger");
    }
}

#[test]
fn a_directory_at_the_ledger_or_lock_path_is_refused() {
    let dir = TempDir::new("dirs");
    let path = dir.file("ledger.json");
    std::fs::create_dir(&path).unwrap();
    assert!(FileLedger::open_or_create(&path, &policy(1.0)).is_err());
    assert!(FileLedger::create(&path, &policy(1.0)).is_err());
    std::fs::remove_dir(&path).unwrap();
    // The lock file replaced by a directory: refused, nothing written.
    let mut ledger = FileLedger::create(&path, &policy(1.0)).unwrap();
    std::fs::remove_file(dir.file(".ledger.json.lock")).unwrap();
    std::fs::create_dir(dir.file(".ledger.json.lock")).unwrap();
    assert!(ledger.spend(&metres(0.1), || Ok(1.0)).is_err());
    std::fs::remove_dir(dir.file(".ledger.json.lock")).unwrap();
    assert_eq!(
        FileLedger::open(&path, &policy(1.0))
            .unwrap()
            .state()
            .releases(),
        0
    );
}

const CHILD: &str = "GEOPRIV_ATTACK_CHILD";

/// Child: spend until refused, printing (and flushing) `out` after every
/// release it got back, as an app would publish it.
#[test]
fn attack_child_writer() {
    let Ok(spec) = std::env::var(CHILD) else {
        return; // not a child
    };
    let (path, epsilon) = spec.split_once(';').unwrap();
    let epsilon: f64 = epsilon.parse().unwrap();
    let mut ledger = FileLedger::open_or_create(path, &policy(1.0)).unwrap();
    let mut out = std::io::stdout().lock();
    while ledger.spend(&metres(epsilon), || Ok(())).is_ok() {
        writeln!(out, "out").unwrap();
        out.flush().unwrap();
    }
}

fn spawn_child(path: &Path, epsilon: f64) -> std::process::Child {
    std::process::Command::new(std::env::current_exe().unwrap())
        .args([
            "--exact",
            "attack_child_writer",
            "--nocapture",
            "--test-threads",
            "1",
        ])
        .env(CHILD, format!("{};{epsilon:e}", path.display()))
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap()
}

#[test]
fn writers_killed_at_random_times_never_release_uncharged() {
    // Attack: kill -9 writers at random moments (mid-write, mid-rename),
    // then check the file still opens, its history adds up (restore checks
    // that) and no process published more values than the file charged.
    let dir = TempDir::new("kill");
    let path = dir.file("ledger.json");
    let mut seed = 0x9e37_79b9_7f4a_7c15u64;
    let mut published = 0u64;
    for round in 0..12 {
        let eps = if round % 2 == 0 { 1e-3 } else { 7e-4 };
        let mut kids: Vec<_> = (0..3).map(|_| spawn_child(&path, eps)).collect();
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        std::thread::sleep(Duration::from_millis(20 + seed % 180));
        for k in &mut kids {
            let _ = k.kill(); // SIGKILL on Unix
        }
        for k in kids {
            let out = k.wait_with_output().unwrap();
            published += String::from_utf8_lossy(&out.stdout)
                .lines()
                .filter(|l| l.ends_with("out")) // the first may follow "test … "
                .count() as u64;
        }
        if !path.exists() {
            continue; // killed before the ledger was created
        }
        let ledger = FileLedger::open(&path, &policy(1.0))
            .unwrap_or_else(|e| panic!("round {round}: the ledger no longer opens: {e}"));
        let s = ledger.state();
        assert!(
            published <= s.releases(),
            "round {round}: {published} values out, {} charged",
            s.releases()
        );
        let sum: f64 = s.history().map(|h| h.1 * h.3 as f64).sum();
        assert!((sum - s.spent_epsilon()).abs() <= 1e-12, "round {round}");
        assert!(s.spent_epsilon() <= 1.0 + 1e-12);
    }
    assert!(
        published > 0,
        "no writer got a release out before being killed"
    );
    // No temporary files pile up beyond the ones of killed writers.
    let left = std::fs::read_dir(&dir.0).unwrap().count();
    assert!(left < 64, "{left} files left beside the ledger");
}

#[test]
fn restoring_a_long_history_is_not_quadratic() {
    // Attack: a ledger with thousands of distinct (period, epsilon) entries
    // (an app using even_split, a daily policy over years). Restoring,
    // which a FileLedger does on every charge, checked every entry's period
    // by summing the whole history again: 2.5 s for 2000 entries, 43 s for
    // 8000, about 45 min for the 65536 allowed (2 loaded cores). Now about
    // 5 ms for 2000 and 8 ms for 8000.
    use geopriv::device::budget::PrivacyBudget;
    let n = 4_000u64;
    let mut b = PrivacyBudget::new(policy(1e6));
    for i in 0..n {
        b.try_charge(&metres(1.0 + i as f64 * 1e-6)).unwrap();
    }
    let json = b.to_json();
    let t = std::time::Instant::now();
    let back = PrivacyBudget::restore(&json, &policy(1e6)).unwrap();
    let took = t.elapsed();
    assert_eq!(back, b);
    assert!(
        took < Duration::from_secs(2),
        "{n} entries restored in {took:?}"
    );
}

#[test]
fn two_processes_with_disagreeing_clocks_share_one_period_limit() {
    // Attack: process B's clock is a day behind process A's (or goes back
    // after A charged). B must not charge "yesterday" again: charges never
    // go to a period before the latest one in the file, whoever wrote it.
    use geopriv::device::budget::ManualClock;
    use std::sync::Arc;
    let dir = TempDir::new("clocks");
    let path = dir.file("ledger.json");
    let day = 86_400;
    let p = BudgetPolicy::periodic(BudgetUnit::PerMetre, 0.1, 0.0, day, 1.0, 0.0).unwrap();
    let clock_a = Arc::new(ManualClock::new(10 * day + 5));
    let clock_b = Arc::new(ManualClock::new(9 * day + 5));
    let mut a = FileLedger::create(&path, &p)
        .unwrap()
        .with_clock(clock_a.clone());
    let mut b = FileLedger::open(&path, &p)
        .unwrap()
        .with_clock(clock_b.clone());
    // B charges day 9 fully, then A charges day 10 fully.
    b.spend(&metres(0.1), || Ok(())).unwrap();
    a.spend(&metres(0.1), || Ok(())).unwrap();
    // B, still on day 9 by its clock, is refused: the file is on day 10.
    assert!(b.spend(&metres(0.05), || Ok(())).is_err());
    // A's clock jumps back two days: still day 10, still refused.
    clock_a.set(8 * day);
    assert!(a.spend(&metres(0.05), || Ok(())).is_err());
    // Memo charges from both: one charge per key.
    clock_a.set(11 * day);
    clock_b.set(11 * day);
    assert!(a.commit_once([1; 32], &metres(0.05)).unwrap());
    assert!(!b.commit_once([1; 32], &metres(0.05)).unwrap());
    assert!(b.commit_once([2; 32], &metres(0.05)).unwrap());
    assert!(a.commit_once([3; 32], &metres(0.05)).is_err()); // day 11 full
    let s = FileLedger::open(&path, &p).unwrap();
    let per_period: Vec<(u64, f64, u64)> = s.state().history().map(|h| (h.0, h.1, h.3)).collect();
    assert_eq!(per_period, vec![(9, 0.1, 1), (10, 0.1, 1), (11, 0.05, 2)]);
}

#[test]
fn hand_edited_states_are_refused() {
    use geopriv::device::budget::PrivacyBudget;
    let p = policy(1.0);
    let mut b = PrivacyBudget::new(p.clone());
    b.try_charge(&metres(0.25)).unwrap();
    b.try_charge(&metres(0.25)).unwrap();
    let good = b.to_json();
    assert!(PrivacyBudget::restore(&good, &p).is_ok());
    let charges = |to: &str| good.replace("[0,0.25,0.0,2]", to);
    let edits: Vec<(&str, String)> = vec![
        (
            "spent lowered",
            good.replace("\"spent_epsilon\":0.5", "\"spent_epsilon\":0.25"),
        ),
        ("count lowered", charges("[0,0.25,0.0,1]")),
        (
            "history rewritten consistently but over the cap",
            charges("[0,0.25,0.0,5]")
                .replace("\"spent_epsilon\":0.5", "\"spent_epsilon\":1.25")
                .replace("\"releases\":2", "\"releases\":5"),
        ),
        ("negative epsilon", charges("[0,-0.25,0.0,2]")),
        ("zero count", charges("[0,0.25,0.0,0],[0,0.5,0.0,1]")),
        ("huge number", charges("[0,1e308,0.0,2]")),
        ("overflowing number", charges("[0,1e999,0.0,2]")),
        (
            "NaN",
            good.replace("\"spent_epsilon\":0.5", "\"spent_epsilon\":NaN"),
        ),
        ("a period in a lifetime ledger", charges("[3,0.25,0.0,2]")),
        (
            "duplicated key",
            good.replace("\"releases\":2", "\"releases\":2,\"releases\":2"),
        ),
        (
            "unknown field",
            good.replace("\"releases\":2", "\"releases\":2,\"x\":1"),
        ),
        (
            "u64 overflow of the count",
            charges("[0,1e-300,0.0,18446744073709551615],[0,2e-300,0.0,18446744073709551615]"),
        ),
        (
            "a memo key without a release",
            good.replace(
                "\"memo\":[]",
                &format!(
                    "\"memo\":[\"{}\",\"{}\",\"{}\"]",
                    "a".repeat(64),
                    "b".repeat(64),
                    "c".repeat(64)
                ),
            ),
        ),
        (
            "total raised",
            good.replace("\"total_epsilon\":1.0", "\"total_epsilon\":2.0"),
        ),
        (
            "unit changed",
            good.replace("per-metre", "per-mercator-metre"),
        ),
    ];
    for (what, json) in edits {
        assert_ne!(json, good, "{what}: the edit did not apply");
        assert!(
            PrivacyBudget::restore(&json, &p).is_err(),
            "{what} accepted"
        );
    }
    // A file over the size limit is refused unread.
    let dir = TempDir::new("huge");
    let path = dir.file("ledger.json");
    let f = std::fs::File::create(&path).unwrap();
    f.set_len(100 << 20).unwrap(); // sparse 100 MB
    assert!(FileLedger::open(&path, &p).is_err());
}

#[test]
fn extreme_totals_still_admit_k_shares_and_never_k_plus_one() {
    use geopriv::device::budget::PrivacyBudget;
    let tiny = f64::from_bits(7); // subnormal
    for total in [1e300, 0.3, 1e-300, tiny, f64::MIN_POSITIVE] {
        for k in [1u64, 3, 7, 9, 101] {
            let share = total / k as f64;
            if share == 0.0 {
                continue;
            }
            let mut b = PrivacyBudget::new(policy(total));
            let c = metres(share);
            let fitted = (0..k + 1).take_while(|_| b.try_charge(&c).is_ok()).count() as u64;
            // fl(T/k) may round down, leaving room for one more only if
            // k + 1 shares really fit under T.
            let exact_k1 = (k + 1) as f64 * share;
            assert!(
                fitted >= k || share * k as f64 > total,
                "T={total:e} k={k}: {fitted}"
            );
            assert!(
                fitted <= k || exact_k1 <= total,
                "T={total:e} k={k}: {fitted} fit"
            );
            assert!(b.spent_epsilon() <= total * (1.0 + 1e-15) || total < 1e-300);
            let back = PrivacyBudget::restore(&b.to_json(), &policy(total)).unwrap();
            assert_eq!(back.releases(), fitted);
        }
    }
}

#[cfg(unix)]
#[test]
fn a_lock_file_linked_to_the_ledger_is_refused() {
    // Attack: `.NAME.lock` is a symbolic link to the ledger itself. Every
    // rename gives the ledger a new inode, so each writer locked a
    // different file and two could write at once (a lost charge).
    let dir = TempDir::new("lock-link");
    let path = dir.file("ledger.json");
    let mut ledger = FileLedger::create(&path, &policy(1.0)).unwrap();
    let lock_path = dir.file(".ledger.json.lock");
    std::fs::remove_file(&lock_path).unwrap();
    std::os::unix::fs::symlink(&path, &lock_path).unwrap();
    assert!(ledger.spend(&metres(0.1), || Ok(1.0)).is_err());
    assert!(FileLedger::open(&path, &policy(1.0)).is_err());
    std::fs::remove_file(&lock_path).unwrap();
    ledger.spend(&metres(0.1), || Ok(1.0)).unwrap();
    assert_eq!(ledger.state().releases(), 1);
}

#[cfg(unix)]
#[test]
fn a_waiter_does_not_win_a_lock_file_removed_while_it_waited() {
    // Attack: writer A holds the lock, writer B waits on it, a "stale lock"
    // cleaner removes `.NAME.lock`, writer C creates a new one and locks
    // it. When A finished, B got the lock on the removed file and wrote
    // at the same time as C.
    use fs4::FileExt;
    let dir = TempDir::new("orphan-lock");
    let path = dir.file("ledger.json");
    let mut l = FileLedger::create(&path, &policy(1.0)).unwrap();
    let lock_path = dir.file(".ledger.json.lock");
    let a = std::fs::File::open(&lock_path).unwrap();
    FileExt::lock(&a).unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    let b = std::thread::spawn(move || {
        let r = l.commit(&metres(0.1)); // waits for A
        tx.send(()).unwrap();
        r.is_ok()
    });
    std::thread::sleep(Duration::from_millis(100)); // B is waiting on A
    std::fs::remove_file(&lock_path).unwrap();
    let c = std::fs::File::create(&lock_path).unwrap();
    FileExt::lock(&c).unwrap();
    FileExt::unlock(&a).unwrap();
    drop(a);
    assert!(
        rx.recv_timeout(Duration::from_millis(300)).is_err(),
        "B went ahead while C held the lock"
    );
    FileExt::unlock(&c).unwrap();
    rx.recv_timeout(Duration::from_secs(5)).unwrap();
    assert!(b.join().unwrap());
}

/// Whether `s` holds a raw control or format character (what escaping
/// removes).
fn has_raw_controls(s: &str) -> bool {
    s.chars()
        .any(|c| c != ' ' && geopriv::server::escape::needs_escape(c))
}

#[test]
fn ledger_errors_escape_paths_and_file_contents() {
    // Attack: a ledger path and a ledger file that carry a newline and
    // terminal escapes. Before the fix the refusals printed the path
    // (`path.display()`) and serde's message quoting the file (an unknown
    // field name) raw: an app logging the error got a forged line.
    let dir = TempDir::new("escape");
    let forged = "x\nline 2: ledger ok\u{1b}[2J\u{202e}";
    // A missing file under a forged name.
    let missing = dir.file(&format!("{forged}.json"));
    let e = FileLedger::open(&missing, &policy(1.0)).unwrap_err();
    let msg = e.to_string();
    assert!(!has_raw_controls(&msg), "{msg:?}");
    assert!(msg.contains("x\\nline 2"), "{msg:?}");
    // A file whose unknown field name is forged text.
    let path = dir.file("ledger.json");
    let key = "\"x\\nline 2: ledger ok\\u001b[2J\u{202e}\"";
    std::fs::write(&path, format!("{{\"format\":2,{key}:1}}")).unwrap();
    let e = FileLedger::open(&path, &policy(1.0)).unwrap_err();
    let msg = e.to_string();
    assert!(!has_raw_controls(&msg), "{msg:?}");
    assert!(msg.contains("stored ledger refused"), "{msg}");
    assert!(msg.contains("unknown field `x\\nline 2"), "{msg}");
    // A directory at a forged path: "is not a regular file".
    let sub = dir.file(&format!("d{forged}"));
    std::fs::create_dir(&sub).unwrap();
    let e = FileLedger::open(&sub, &policy(1.0)).unwrap_err();
    let msg = e.to_string();
    assert!(!has_raw_controls(&msg), "{msg:?}");
}

/// attack10 O1 (docs/ATTACK-10.md): the monotonic counter holds the release
/// count. After a rollback (a backup restored: 3 releases back to 1), a
/// writer without the counter (a background job, the CLI) made 2 more
/// releases; the count was back at 3, and the app holding the counter
/// accepted a file recording 3 of the 5 charges made. Now a file written
/// under a counter is bound to it: the counter-less writer is refused, and
/// the app sees the rollback.
#[test]
fn a_writer_without_the_counter_cannot_refill_a_rolled_back_count() {
    use geopriv::device::budget::{MemoryCounter, MonotonicCounter};
    let dir = TempDir::new("counter-refill");
    let path = dir.file("ledger.json");
    let p = policy(0.5);
    let c = metres(0.1);
    let counter = MemoryCounter::default();
    let mut app = FileLedger::create(&path, &p)
        .unwrap()
        .with_counter(Box::new(counter.clone()))
        .unwrap();
    assert!(app.state().is_counter_bound());
    app.commit(&c).unwrap();
    let backup = std::fs::read_to_string(&path).unwrap();
    app.commit(&c).unwrap();
    app.commit(&c).unwrap();
    drop(app);
    assert_eq!(counter.read().unwrap(), 3);
    std::fs::write(&path, &backup).unwrap(); // the rollback
    let mut job = FileLedger::open(&path, &p).unwrap(); // no counter: may read
    assert_eq!(job.state().releases(), 1);
    let refused = job.commit(&c).unwrap_err().to_string();
    assert!(refused.contains("monotonic counter"), "{refused}");
    assert!(job.commit_once([9; 32], &c).is_err());
    drop(job);
    assert_eq!(FileLedger::open(&path, &p).unwrap().state().releases(), 1);
    let reopened = FileLedger::open(&path, &p)
        .unwrap()
        .with_counter(Box::new(counter.clone()));
    assert!(
        reopened.is_err(),
        "the app accepted a rolled-back file (1 release on file, 3 made)"
    );
}

/// A ledger that was never tied to a counter is charged by any writer, and
/// its file does not carry the mark (files of ledgers without a counter
/// are byte for byte what they were).
#[test]
fn a_ledger_without_a_counter_stays_unbound() {
    let dir = TempDir::new("counter-unbound");
    let path = dir.file("ledger.json");
    let p = policy(0.5);
    let mut a = FileLedger::create(&path, &p).unwrap();
    a.commit(&metres(0.1)).unwrap();
    let mut b = FileLedger::open(&path, &p).unwrap();
    b.commit(&metres(0.1)).unwrap();
    assert!(!b.state().is_counter_bound());
    let text = std::fs::read_to_string(&path).unwrap();
    assert!(!text.contains("counter_bound"), "{text}");
}

/// The mark cannot be dropped by a writer: a file edited to remove it is
/// not accepted as the continuation of the bound state this process saw.
#[test]
fn a_file_that_drops_the_counter_mark_is_refused_by_its_holder() {
    use geopriv::device::budget::MemoryCounter;
    let dir = TempDir::new("counter-mark");
    let path = dir.file("ledger.json");
    let p = policy(0.5);
    let mut app = FileLedger::create(&path, &p)
        .unwrap()
        .with_counter(Box::new(MemoryCounter::default()))
        .unwrap();
    app.commit(&metres(0.1)).unwrap();
    let text = std::fs::read_to_string(&path).unwrap();
    assert!(text.contains("\"counter_bound\":true"), "{text}");
    std::fs::write(&path, text.replace(",\"counter_bound\":true", "")).unwrap();
    assert!(app.commit(&metres(0.1)).is_err());
}

/// attack12 O5: a writer killed between writing its temporary file and
/// renaming it left `.NAME.<pid>.<n>.tmp` beside the ledger for good (0–8
/// per storm of 100 killed runs). Opening the ledger (under its lock, under
/// which every temporary file of it is written) removes exactly those; a
/// name of another form, another ledger's, or a directory stays.
#[test]
fn opening_a_ledger_removes_the_temporary_files_of_killed_writers() {
    let dir = TempDir::new("stale-temps");
    let path = dir.file("ledger.json");
    let p = policy(1.0);
    FileLedger::create(&path, &p)
        .unwrap()
        .commit(&metres(0.1))
        .unwrap();
    let litter = [".ledger.json.4242.7.tmp", ".ledger.json.1.0.tmp"];
    let kept = [
        ".ledger.json.7.tmp",
        ".ledger.json.x.1.2.tmp",
        ".ledger.json.1.2.3.tmp",
        ".ledger.json.1.2.tmp.bak",
        ".other.json.1.2.tmp",
        "ledger.json.1.2.tmp",
    ];
    for name in litter.iter().chain(kept.iter()) {
        std::fs::write(dir.file(name), "{}").unwrap();
    }
    std::fs::create_dir(dir.file(".ledger.json.5.6.tmp")).unwrap();
    let ledger = FileLedger::open(&path, &p).unwrap();
    assert_eq!(ledger.state().releases(), 1);
    for name in litter {
        assert!(!dir.file(name).exists(), "{name} left behind");
    }
    for name in kept.iter().chain([".ledger.json.5.6.tmp"].iter()) {
        assert!(dir.file(name).exists(), "{name} removed");
    }
}
