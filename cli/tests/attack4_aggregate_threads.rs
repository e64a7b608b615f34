//! attack4: `geopriv aggregate --threads N` against `--threads 1`, byte
//! for byte (stdout, stderr, exit code), on streams built to hit the
//! parallel splitter's edges: binary frames holding 0x0a in `--format
//! auto`, frames whose 0x00 is just inside or just outside the probe
//! window, huge records at batch boundaries, 10^5 tiny records, duplicate
//! report ids and group exhaustion with distinct ε across batches, and a
//! `--queries` allow-list.

use geopriv::{MechanismName, QueryDescriptor, Report, ReportId};
mod common;
use common::geopriv;

fn report(q: u64, eps: f64, value: f64, id: Option<[u8; 16]>) -> Report {
    let query = QueryDescriptor::Threshold {
        threshold: 100_000.0 + 1_000.0 * q as f64,
        width: 20_000.0,
    };
    let r = Report::new(query, MechanismName::Polyplace, eps, 0.0, value);
    match id {
        Some(id) => r.with_report_id(ReportId(id)),
        None => r,
    }
}

/// Runs `args` with `--threads` 1, 2, 3 and 8; all must agree with 1.
fn same_for_every_thread_count(args: &[&str], input: &[u8]) -> std::process::Output {
    let run = |threads: &str| {
        let mut a = args.to_vec();
        a.extend_from_slice(&["--threads", threads]);
        geopriv(&a, input)
    };
    let one = run("1");
    for threads in ["2", "3", "8"] {
        let par = run(threads);
        assert_eq!(
            par.status.code(),
            one.status.code(),
            "{args:?} --threads {threads}"
        );
        if par.stderr != one.stderr {
            let (a, b) = (
                String::from_utf8_lossy(&one.stderr),
                String::from_utf8_lossy(&par.stderr),
            );
            let first = a.lines().zip(b.lines()).find(|(x, y)| x != y);
            panic!("{args:?} --threads {threads}: stderr differs, first: {first:?}");
        }
        assert!(
            par.stdout == one.stdout,
            "{args:?} --threads {threads}: stdout differs"
        );
    }
    one
}

/// Frames whose bytes hold 0x0a (report ids of newlines), mixed with JSON
/// lines, CRLF+BOM lines, NULs and invalid UTF-8, in `--format auto`, with
/// a small size limit so the frame probe window is short.
#[test]
fn attack4_auto_frames_holding_newlines_match_one_thread() {
    let mut input = Vec::new();
    for i in 0..30_000u64 {
        let q = i % 17;
        let id = [b'\n'; 16].map(|b| b ^ ((i % 7) as u8 * (i % 2) as u8));
        let r = report(q, 1e-4, (i % 23) as f64 - 11.0, Some(id));
        match i % 11 {
            0 | 1 => input.extend_from_slice(&r.to_frame()),
            2 => {
                // a frame then a newline right after its 0x00
                input.extend_from_slice(&r.to_frame());
                input.push(b'\n');
            }
            3 => input.extend_from_slice(b"\xEF\xBB\xBF{\"bad\": 1}\r\n"),
            4 => input.extend_from_slice(b"\x00\x00\n\x00"),
            5 => input.extend_from_slice(b"\xc3\x28 not utf8\n"),
            6 => {
                // a line, then a frame whose 0x00 is far: beyond the window
                input.extend_from_slice(b"plain garbage line\n");
                input.extend(std::iter::repeat_n(b'z', 200));
                input.push(0);
            }
            _ => {
                let r = report(q, 1e-4, (i % 5) as f64, Some([(i % 251) as u8; 16]));
                input.extend_from_slice(r.to_json_line().as_bytes());
                input.push(b'\n');
            }
        }
    }
    for limit in ["120", "300", "65536"] {
        let out = same_for_every_thread_count(
            &["aggregate", "--format", "auto", "--max-record-bytes", limit],
            &input,
        );
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains("accepted"), "{err}");
    }
}

/// 10^5 tiny records (blank lines, comments, one-byte garbage) across many
/// batches, then one huge record (near the size limit) at every offset
/// around the 256 KiB batch boundary and the 64 KiB read chunk.
#[test]
fn attack4_tiny_records_and_huge_records_at_batch_boundaries() {
    let mut input = Vec::new();
    for i in 0..100_000u64 {
        input.extend_from_slice(match i % 4 {
            0 => b"\n".as_slice(),
            1 => b"#\n",
            2 => b"x\n",
            _ => b"\x00",
        });
    }
    let line = report(1, 1e-4, 3.0, None).to_json_line();
    // a valid JSON report padded with spaces to 300 KB, and one over the
    // limit, after varying numbers of ordinary lines (so they land at
    // varying places in the batches and the 64 KiB reads)
    let mut big = line.clone().into_bytes();
    big.splice(1..1, std::iter::repeat_n(b' ', 300_000));
    for pad in 0..12usize {
        for _ in 0..(pad * 397 + pad * pad * 13) {
            input.extend_from_slice(line.as_bytes());
            input.push(b'\n');
        }
        input.extend(std::iter::repeat_n(b'\n', pad * 1_111));
        input.extend_from_slice(&big);
        input.push(b'\n');
        input.extend(std::iter::repeat_n(b'{', 400_001 + pad));
        input.push(if pad % 2 == 0 { b'\n' } else { 0 });
    }
    for format in ["auto", "json"] {
        let out = same_for_every_thread_count(
            &[
                "aggregate",
                "--format",
                format,
                "--max-record-bytes",
                "400000",
            ],
            &input,
        );
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains("[too-long]"), "{format}: {err}");
    }
}

/// Duplicate report ids far apart (other batches), and group exhaustion
/// where the groups that win depend on record order: each query gets
/// reports with distinct ε spread over the stream; an allow-list of tasks
/// and ids on top.
#[test]
fn attack4_duplicates_and_group_exhaustion_across_batches() {
    let mut input = Vec::new();
    for i in 0..60_000u64 {
        let q = i % 30;
        let eps = 1e-4 * (1.0 + ((i * 7919) % 13) as f64 * 1e-3);
        let id = if i % 3 == 0 {
            Some([
                (i % 4000 / 16) as u8,
                (i % 16) as u8,
                1,
                2,
                3,
                4,
                5,
                6,
                7,
                8,
                9,
                10,
                11,
                12,
                13,
                14,
            ])
        } else {
            None
        };
        let r = report(q, eps, ((i * 31) % 41) as f64 - 20.0, id);
        if i % 2 == 0 {
            input.extend_from_slice(r.to_json_line().as_bytes());
            input.push(b'\n');
        } else {
            input.extend_from_slice(&r.to_frame());
        }
    }
    let dir = std::env::temp_dir().join(format!("attack4-queries-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let qfile = dir.join("queries.txt");
    std::fs::write(
        &qfile,
        "threshold:T=100000;w=20000\nthreshold:T=101000;w=20000 polyplace 0.0001 0\n# c\nthreshold:T=102000;w=20000\n",
    )
    .unwrap();
    let q = qfile.to_str().unwrap();
    let configs: [&[&str]; 3] = [
        &[
            "aggregate",
            "--format",
            "auto",
            "--max-queries",
            "70",
            "--max-groups-per-query",
            "3",
        ],
        &[
            "aggregate",
            "--format",
            "auto",
            "--max-report-ids",
            "100",
            "--max-groups-per-query",
            "5",
        ],
        &[
            "aggregate",
            "--format",
            "auto",
            "--queries",
            q,
            "--max-groups-per-query",
            "2",
        ],
    ];
    for args in configs {
        let out = same_for_every_thread_count(args, &input);
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains("rejected"), "{args:?}: {err}");
    }
    std::fs::remove_dir_all(&dir).ok();
}

/// A huge `--threads` (more threads than the process can start) is not a
/// crash: the output is `--threads 1`'s. Before the fix, `--threads
/// 100000` aborted (SIGABRT: a worker could not set up its stack guard).
#[test]
fn attack4_absurd_thread_counts_do_not_abort() {
    let mut input = Vec::new();
    for i in 0..500u64 {
        input.extend_from_slice(report(i % 5, 1e-4, 1.0, None).to_json_line().as_bytes());
        input.push(b'\n');
    }
    input.extend_from_slice(b"garbage\n");
    let one = geopriv(&["aggregate", "--threads", "1"], &input);
    for threads in ["0", "100000", "18446744073709551615"] {
        let par = geopriv(&["aggregate", "--threads", threads], &input);
        assert_eq!(par.status.code(), one.status.code(), "--threads {threads}");
        assert!(
            par.stdout == one.stdout && par.stderr == one.stderr,
            "--threads {threads}"
        );
    }
}
