//! Issue 22 item 4: `geopriv aggregate --threads N` prints byte for byte
//! what `--threads 1` prints (estimates, per-record messages with their
//! numbers, summary lines, exit code) on hostile mixed input.

use geopriv::{MechanismName, QueryDescriptor, Report, ReportId};
use rand::{Rng, SeedableRng};
mod common;
use common::geopriv;

/// Good reports over 40 queries (some with repeated report ids, some
/// seeded, some with budgets that open too many groups for their query or
/// in all), garbage, blank, comment and over-long lines, JSON arrays,
/// non-UTF-8, stray and truncated binary frames, NULs, a CRLF line with a
/// BOM, and an unterminated last line.
fn mixed(seed: u64, records: usize) -> Vec<u8> {
    let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
    let mut out = Vec::new();
    for i in 0..records {
        let query = QueryDescriptor::Threshold {
            threshold: 100_000.0 + 1_000.0 * rng.random_range(0..40u64) as f64,
            width: 20_000.0,
        };
        let eps = if rng.random_range(0..25) == 0 {
            1e-4 * (1.0 + (i % 10) as f64 * 0.1)
        } else {
            1e-4
        };
        let mut r = Report::new(
            query,
            MechanismName::Polyplace,
            eps,
            0.0,
            rng.random_range(-20.0..20.0),
        );
        if rng.random_range(0..2) == 0 {
            r = r.with_report_id(ReportId([rng.random_range(0..200u8); 16]));
        }
        r.seeded = rng.random_range(0..100) == 0;
        match rng.random_range(0..50) {
            0 => out.extend_from_slice(b"garbage\n"),
            1 => out.extend_from_slice(b"\n"),
            2 => out.extend_from_slice(b"# comment\n"),
            3 => out.extend_from_slice(b"[1,2]\n"),
            4 => out.extend_from_slice(b"\xff\xfe\n"),
            5 => out.push(0),
            6 => {
                out.extend(std::iter::repeat_n(b'x', 700));
                out.push(b'\n');
            }
            7 => out.extend_from_slice(&r.to_frame()),
            8 => {
                let f = r.to_frame();
                out.extend_from_slice(&f[..f.len() / 2]);
                out.push(b'\n');
            }
            9 => {
                out.extend_from_slice(b"\xEF\xBB\xBF");
                out.extend_from_slice(r.to_json_line().as_bytes());
                out.extend_from_slice(b"\r\n");
            }
            _ => {
                out.extend_from_slice(r.to_json_line().as_bytes());
                out.push(b'\n');
            }
        }
    }
    out.extend_from_slice(b"{\"unterminated");
    out
}

#[test]
fn every_thread_count_prints_the_same_bytes() {
    let input = mixed(22, 20_000);
    // The default id set (2^20) has room for every record: ids are
    // deduplicated in shards on the workers throughout; with 5,000 the
    // shards hand over to the calling thread mid-stream (record 5,001),
    // and with 50 almost at once.
    let flags: [&[&str]; 5] = [
        &["--format", "auto"],
        &["--format", "json", "--estimator", "median-of-means"],
        &["--format", "auto", "--max-report-ids", "50"],
        &["--format", "auto", "--max-report-ids", "5000"],
        &["--format", "json", "--max-report-ids", "9000"],
    ];
    for extra in flags {
        let mut args = vec![
            "aggregate",
            "--max-queries",
            "60",
            "--max-groups-per-query",
            "2",
            "--max-record-bytes",
            "600",
        ];
        args.extend_from_slice(extra);
        let run = |threads: &str| {
            let mut a = args.clone();
            a.extend_from_slice(&["--threads", threads]);
            geopriv(&a, &input)
        };
        let one = run("1");
        let stderr = String::from_utf8_lossy(&one.stderr);
        for must in [
            "duplicate reports dropped",
            "[too-many-groups]",
            "[too-many-groups-for-query]",
            "[too-long]",
            "[seeded]",
            "[not-utf8]",
            "[json-array]",
        ] {
            assert!(stderr.contains(must), "{extra:?}: no {must} in\n{stderr}");
        }
        assert_eq!(one.status.code(), Some(1));
        assert!(one.stdout.len() > 1_000);
        assert_threads_agree(&run, &one, &["2", "3", "7"], &format!("{extra:?}"));
    }
}

#[test]
fn binary_frames_on_any_thread_count() {
    let mut input = Vec::new();
    for i in 0..10_000u64 {
        let q = QueryDescriptor::Threshold {
            threshold: 100_000.0 + 1_000.0 * (i % 25) as f64,
            width: 20_000.0,
        };
        let eps = if i % 97 == 0 {
            2e-4 + i as f64 * 1e-12
        } else {
            1e-4
        };
        let r = Report::new(
            q,
            MechanismName::Polyplace,
            eps,
            0.0,
            (i % 41) as f64 - 20.0,
        )
        .with_report_id(ReportId([
            (i % 3_000) as u8,
            (i % 3_000 / 256) as u8,
            0,
            0,
            0,
            0,
            0,
            0,
            0,
            0,
            0,
            0,
            0,
            0,
            0,
            0,
        ]));
        input.extend_from_slice(&r.to_frame());
        if i % 500 == 0 {
            input.extend_from_slice(b"\x05junk\x00");
        }
    }
    input.extend_from_slice(b"\x03ab");
    let run = |threads: &str| {
        geopriv(
            &[
                "aggregate",
                "--format",
                "binary",
                "--max-queries",
                "40",
                "--threads",
                threads,
            ],
            &input,
        )
    };
    let one = run("1");
    let stderr = String::from_utf8_lossy(&one.stderr);
    assert!(stderr.contains("duplicate reports dropped"), "{stderr}");
    assert!(stderr.contains("record 10021:"), "{stderr}");
    assert_threads_agree(&run, &one, &["2", "5"], "binary frames");
}

/// Runs `run` at each thread count and asserts the same exit code, stdout
/// and stderr as the one-thread run `one` (`label` names the case).
fn assert_threads_agree(
    run: &dyn Fn(&str) -> std::process::Output,
    one: &std::process::Output,
    threads: &[&str],
    label: &str,
) {
    for threads in threads {
        let par = run(threads);
        assert_eq!(par.status.code(), one.status.code(), "{label} {threads}");
        assert!(
            par.stdout == one.stdout,
            "{label}, --threads {threads}: stdout differs"
        );
        assert!(
            par.stderr == one.stderr,
            "{label}, --threads {threads}: stderr differs"
        );
    }
}

/// Reports that carry a `report_id`, as JSON lines with no 0x00 byte (so
/// `auto` reads them in blocks split by the workers, branch aggthreads2):
/// ids repeated from 1 to 20,000 lines back (across blocks), repeats of
/// rejected reports (a refused report's id is not remembered, so its
/// repeat is counted), groups opened late, over-long and blank lines; with
/// the id set large enough and with it full after 1,000 ids.
#[test]
fn report_ids_in_blocks_on_any_thread_count() {
    let mut rng = rand::rngs::StdRng::seed_from_u64(2202);
    let mut ids: Vec<[u8; 16]> = Vec::new();
    let mut input = Vec::new();
    for i in 0..60_000u64 {
        let late = i > 30_000 && i % 1_000 == 0;
        let query = QueryDescriptor::Threshold {
            threshold: 100_000.0 + 1_000.0 * (i % if late { 45 } else { 30 }) as f64,
            width: 20_000.0,
        };
        // Every 97th report asks for more budget than allowed: refused.
        let eps = if i % 97 == 0 { 0.5 } else { 1e-4 };
        let id = match rng.random_range(0..20) {
            0 if !ids.is_empty() => ids[ids.len() - rng.random_range(1..=ids.len().min(20_000))],
            _ => rng.random(),
        };
        ids.push(id);
        let r = Report::new(
            query,
            MechanismName::Polyplace,
            eps,
            0.0,
            rng.random_range(-20.0..20.0),
        )
        .with_report_id(ReportId(id));
        match i % 5_003 {
            0 => input.extend(std::iter::repeat_n(b'y', 900)),
            1 => input.push(b'\n'),
            _ => input.extend_from_slice(r.to_json_line().as_bytes()),
        }
        input.push(b'\n');
    }
    assert!(!input.contains(&0));
    // 2^20: every record below the shards' room; 30,000: the shards hand
    // over at record 30,001 and the set fills a little later; 1,000.
    for cap in ["1048576", "30000", "1000"] {
        let run = |threads: &str| {
            geopriv(
                &[
                    "aggregate",
                    "--max-record-bytes",
                    "600",
                    "--max-report-ids",
                    cap,
                    "--threads",
                    threads,
                ],
                &input,
            )
        };
        let one = run("1");
        let stderr = String::from_utf8_lossy(&one.stderr);
        assert!(stderr.contains("duplicate reports dropped"), "{stderr}");
        assert!(stderr.contains("[too-long]"), "{stderr}");
        assert_eq!(
            cap != "1048576",
            stderr.contains("--max-report-ids"),
            "{stderr}"
        );
        assert_threads_agree(&run, &one, &["2", "3"], &format!("--max-report-ids {cap}"));
    }
}

/// Ids whose fate the workers' shards cannot settle (docs/MATH.md §10.11
/// step 6): a pool of 3,000 ids repeated all over the stream (so repeats
/// fall in every shard and across batches), a new group every 1,000
/// records (reports in it arrive before the workers know it is open),
/// groups beyond `--max-queries` that never open (their ids stay with the
/// calling thread, then reappear in open groups), and refused reports
/// repeating accepted ids (duplicates, not rejections); with the id set
/// large enough, full mid-stream, and handed over by the shards before
/// it fills.
#[test]
fn undecided_ids_on_any_thread_count() {
    let mut rng = rand::rngs::StdRng::seed_from_u64(4422);
    let pool: Vec<[u8; 16]> = (0..3_000).map(|_| rng.random()).collect();
    let mut input = Vec::new();
    for i in 0..40_000u64 {
        let group = if rng.random_range(0..3) == 0 {
            i / 1_000
        } else {
            rng.random_range(0..=i / 1_000)
        };
        let query = QueryDescriptor::Threshold {
            threshold: 100_000.0 + 1_000.0 * group as f64,
            width: 20_000.0,
        };
        let eps = if i % 13 == 0 { 0.5 } else { 1e-4 };
        let r = Report::new(
            query,
            MechanismName::Polyplace,
            eps,
            0.0,
            rng.random_range(-20.0..20.0),
        )
        .with_report_id(ReportId(pool[rng.random_range(0..pool.len())]));
        input.extend_from_slice(r.to_json_line().as_bytes());
        input.push(b'\n');
    }
    for cap in ["1048576", "2000", "20000"] {
        let run = |threads: &str| {
            geopriv(
                &[
                    "aggregate",
                    "--max-queries",
                    "30",
                    "--max-report-ids",
                    cap,
                    "--threads",
                    threads,
                ],
                &input,
            )
        };
        let one = run("1");
        let stderr = String::from_utf8_lossy(&one.stderr);
        assert!(stderr.contains("duplicate reports dropped"), "{stderr}");
        assert!(stderr.contains("[too-many-groups"), "{stderr}");
        assert_eq!(
            cap == "2000",
            stderr.contains("--max-report-ids"),
            "{stderr}"
        );
        assert_threads_agree(&run, &one, &["2", "3"], &format!("--max-report-ids {cap}"));
    }
}
