//! Fresh-eyes attack (attack5, docs/ATTACK-5.md): `geopriv aggregate
//! --threads N` with report ids split over the workers' hash shards
//! (docs/MATH.md §10.11 step 6), each case with the sequential rule's own
//! count (an oracle independent of `--threads 1`); the map reader's
//! rejections held to the end of the stream; a ledger with a second hard
//! link.

use geopriv::{MechanismName, QueryDescriptor, Report, ReportId};
mod common;
use common::geopriv;

fn line(i: u64, id: [u8; 16]) -> Vec<u8> {
    let q = QueryDescriptor::Threshold {
        threshold: 100_000.0,
        width: 20_000.0,
    };
    let r = Report::new(
        q,
        MechanismName::Polyplace,
        1e-4,
        0.0,
        (i % 41) as f64 - 20.0,
    )
    .with_report_id(ReportId(id));
    let mut l = r.to_json_line().into_bytes();
    l.push(b'\n');
    l
}

fn id(k: u64) -> [u8; 16] {
    let mut b = [0u8; 16];
    b[..8].copy_from_slice(&k.to_le_bytes());
    b[8..].copy_from_slice(&(k.wrapping_mul(0x9E37_79B9_7F4A_7C15)).to_le_bytes());
    b
}

fn counts(stderr: &str) -> (u64, u64, u64) {
    let num = |pat: &str| {
        stderr
            .lines()
            .find_map(|l| {
                l.split_once(pat)
                    .map(|(a, _)| a.rsplit(' ').next().unwrap_or(a).to_string())
            })
            .and_then(|s| s.trim().parse().ok())
            .unwrap_or(0)
    };
    (
        num(" accepted,"),
        num(" duplicate reports dropped"),
        stderr
            .lines()
            .find_map(|l| l.strip_prefix("warning: "))
            .and_then(|l| l.split(' ').next())
            .and_then(|s| s.parse().ok())
            .unwrap_or(0),
    )
}

/// Runs `geopriv aggregate --max-report-ids cap --threads threads` on
/// `input`: its (accepted, duplicates, accepted-unremembered) counts, its
/// stderr and its exit code.
fn aggregate_with_id_cap(
    cap: u64,
    threads: &str,
    input: &[u8],
) -> ((u64, u64, u64), String, Option<i32>) {
    let out = geopriv(
        &[
            "aggregate",
            "--max-report-ids",
            &cap.to_string(),
            "--threads",
            threads,
        ],
        input,
    );
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    (counts(&stderr), stderr, out.status.code())
}

/// The record numbered exactly `--max-report-ids` + 1 (the shards' room,
/// where the calling thread takes over the ids the workers accepted)
/// repeats an id a worker accepted, and later records repeat ids from both
/// sides of the hand-over. Mutation check: handing over one record late
/// (`n > room` instead of `n >= room`) lets the repeat at the room through
/// while every other test of the shards still passed.
#[test]
fn the_record_at_the_hand_over_repeats_a_worker_accepted_id() {
    for cap in [3_000u64, 6_000, 6_001] {
        let mut input = Vec::new();
        // Records 1..=cap: distinct ids, one group (open from record 1:
        // the workers know it from their second batch on and accept there).
        for i in 1..=cap {
            input.extend(line(i, id(i)));
        }
        // Record cap + 1 (the room): the id of record cap, accepted on a
        // worker. Then repeats of records cap - 1, 1 (accepted on the
        // calling thread, first batch) and cap / 2, and 50 new ids.
        let repeats = [cap, cap - 1, 1, cap / 2];
        for (j, &k) in repeats.iter().enumerate() {
            input.extend(line(cap + 1 + j as u64, id(k)));
        }
        for k in 0..50 {
            input.extend(line(cap + 10 + k, id(1_000_000 + k)));
        }
        let total = cap + repeats.len() as u64 + 50;
        for threads in ["1", "2", "3", "7"] {
            let (got, stderr, code) = aggregate_with_id_cap(cap, threads, &input);
            // The sequential rule: the set fills at record cap with every
            // id before; the 4 repeats are duplicates, the 50 new ids are
            // accepted unremembered.
            assert_eq!(
                got,
                (total - repeats.len() as u64, repeats.len() as u64, 50),
                "cap {cap}, --threads {threads}: {stderr}"
            );
            assert_eq!(code, Some(0), "{stderr}");
        }
    }
}

/// The record at the room carries a new id while the set is full: the
/// sequential rule accepts it without remembering it (the run's warning
/// counts it), so its repeat right after counts again. Mutation check:
/// shards one record too wide (room = limit + 2) remembered it on a worker,
/// and every other test of the shards still passed.
#[test]
fn a_new_id_at_the_room_is_not_remembered() {
    for cap in [3_000u64, 6_000] {
        let mut input = Vec::new();
        for i in 1..=cap {
            input.extend(line(i, id(i)));
        }
        input.extend(line(cap + 1, id(u64::MAX)));
        input.extend(line(cap + 2, id(u64::MAX)));
        input.extend(line(cap + 3, id(1)));
        for threads in ["1", "2", "3", "7"] {
            let (got, stderr, _) = aggregate_with_id_cap(cap, threads, &input);
            assert_eq!(
                got,
                (cap + 2, 1, 2),
                "cap {cap}, --threads {threads}: {stderr}"
            );
        }
    }
}

/// One id repeated by every record (all in one shard), with the id set's
/// room ending inside a batch: exactly one report counts, at any thread
/// count, whether the repeats fall below the room or after it.
#[test]
fn one_id_everywhere_counts_once() {
    for cap in [1u64, 2, 4_095, 4_096, 10_000] {
        let mut input = Vec::new();
        for i in 1..=9_000u64 {
            input.extend(line(i, id(7)));
        }
        for threads in ["1", "2", "3"] {
            let (got, stderr, _) = aggregate_with_id_cap(cap, threads, &input);
            assert_eq!(
                got,
                (1, 8_999, 0),
                "cap {cap}, --threads {threads}: {stderr}"
            );
        }
    }
}

/// Attack: `geopriv map aggregate --threads N` (N >= 2) kept every
/// rejection message until the end of the stream and reported them all
/// after the last byte was read: memory grew with every bad record (2·10^6
/// lines `{}`: 313 MB at 2 threads against 62 MB at 1). Now each batch's
/// rejections are reported in record order while reading, at most 3·N
/// batches behind the reader. Checked through the library: a reader that
/// counts the bytes it served sees the first rejection long before the
/// end of the stream.
#[test]
fn map_rejections_are_reported_while_reading() {
    use geopriv::map::{
        ingest_map_reports_parallel, KdeGrid, MapAggregator, MapMechanism, QuerySet,
    };
    use geopriv::server::ingest::{FormatChoice, RecordReader};
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::Arc;
    struct Counting(std::io::Cursor<Vec<u8>>, Arc<AtomicUsize>);
    impl std::io::Read for Counting {
        fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
            let n = self.0.read(buf)?;
            self.1.fetch_add(n, Ordering::Relaxed);
            Ok(n)
        }
    }
    // One bad record, then 2·10^6 comment lines (skipped: 122 batches of
    // 16,384 records), then another bad record.
    let mut input = b"{}\n".to_vec();
    input.extend(b"#\n".repeat(2_000_000));
    input.extend(b"{}\n");
    let total = input.len();
    let served = Arc::new(AtomicUsize::new(0));
    let set = QuerySet::Kde(KdeGrid::square(10_000.0, 11).unwrap());
    let mut agg = MapAggregator::new(set, MapMechanism::APriori, 1e-3).unwrap();
    let mut reader = RecordReader::new(
        Counting(std::io::Cursor::new(input), served.clone()),
        FormatChoice::Json,
        1 << 16,
    )
    .unwrap();
    let mut seen = Vec::new();
    let counts = ingest_map_reports_parallel(&mut agg, None, &mut reader, 4, |n, _, _| {
        seen.push((n, served.load(Ordering::Relaxed)))
    })
    .unwrap();
    assert_eq!((counts.rejected, counts.skipped), (2, 2_000_000));
    assert_eq!(seen.len(), 2);
    assert_eq!((seen[0].0, seen[1].0), (1, 2_000_002));
    assert!(
        seen[0].1 < total / 4,
        "the first rejection came after {} of {total} bytes were read",
        seen[0].1
    );
}

#[cfg(unix)]
#[test]
fn a_ledger_with_a_second_hard_link_is_refused() {
    // Attack: a second hard link to the ledger (a backup tool, or an app
    // that links its ledger into a second directory). A charge through one
    // name renamed a new file over that name; the other name kept the old
    // inode with the old state, and each name took its own lock file.
    // Before the fix a budget of 3 releases gave 3 through each name.
    use geopriv::device::budget::{BudgetPolicy, BudgetUnit, Charge, FileLedger, Ledger};
    let dir = std::env::temp_dir().join(format!("geopriv-attack5-link-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let (path, other) = (dir.join("ledger.json"), dir.join("other.json"));
    let policy = BudgetPolicy::new(BudgetUnit::PerMetre, 0.3, 0.0).unwrap();
    let charge = Charge::new(BudgetUnit::PerMetre, 0.1, 0.0).unwrap();
    let mut ledger = FileLedger::create(&path, &policy).unwrap();
    std::fs::hard_link(&path, &other).unwrap();
    let mut released = 0;
    for name in [&path, &other] {
        if let Ok(mut l) = FileLedger::open(name, &policy) {
            while l.spend(&charge, || Ok(1.0)).is_ok() {
                released += 1;
            }
        }
    }
    assert_eq!(released, 0, "released through a hard-linked ledger");
    // The ledger opened before the link was made is refused too.
    let e = ledger.spend(&charge, || Ok(1.0)).unwrap_err();
    assert!(e.to_string().contains("hard link"), "{e}");
    for name in [&path, &other] {
        let e = FileLedger::open(name, &policy).unwrap_err();
        assert!(e.to_string().contains("hard link"), "{e}");
    }
    // Removing the extra link restores the ledger, its state intact.
    std::fs::remove_file(&other).unwrap();
    let mut l = FileLedger::open(&path, &policy).unwrap();
    while l.spend(&charge, || Ok(1.0)).is_ok() {
        released += 1;
    }
    assert_eq!(released, 3);
    let _ = std::fs::remove_dir_all(&dir);
}
