//! Issue 19 items 8, 9, 10, 14 through the command line: group exhaustion
//! with a task file, per-record format detection, a hardened
//! `map aggregate`, flags refused up front and the exit codes.

use geopriv::{MechanismName, QueryDescriptor, Report};
mod common;
use common::{geopriv, threshold_release_args};

const EPS: f64 = 5e-5;

fn threshold() -> QueryDescriptor {
    QueryDescriptor::Threshold {
        threshold: 100_000.0,
        width: 20_000.0,
    }
}

fn line(epsilon: f64, value: f64) -> String {
    let mut s =
        Report::new(threshold(), MechanismName::Polyplace, epsilon, 0.0, value).to_json_line();
    s.push('\n');
    s
}

#[test]
fn a_task_file_admits_the_honest_group_after_a_flood() {
    // Item 8: 4,096 budgets one ulp apart, then 100,000 honest reports.
    let mut input = String::new();
    let mut eps = EPS;
    for _ in 0..4_096 {
        eps = f64::from_bits(eps.to_bits() + 1);
        input.push_str(&line(eps, 0.5));
    }
    for i in 0..100_000 {
        input.push_str(&line(EPS, (i % 7) as f64 / 7.0));
    }
    let dir = tempfile::tempdir().unwrap();
    let tasks = dir.path().join("tasks.txt");
    std::fs::write(
        &tasks,
        format!(
            "# the one task\n{} polyplace {EPS:e} 0\n",
            threshold().canonical_id()
        ),
    )
    .unwrap();
    let out = geopriv(
        &[
            "aggregate",
            "--format",
            "json",
            "--queries",
            tasks.to_str().unwrap(),
        ],
        input.as_bytes(),
    );
    assert_eq!(out.status.code(), Some(1));
    let stdout = String::from_utf8(out.stdout).unwrap();
    assert!(stdout.contains("\"n\":100000"), "{stdout}");
    assert_eq!(stdout.lines().count(), 1);
    let stderr = String::from_utf8(out.stderr).unwrap();
    assert!(
        stderr.contains("100000 accepted, 4096 rejected"),
        "{stderr}"
    );
    assert!(stderr.contains("[not-a-task]"));
}

#[test]
fn auto_costs_only_the_bad_records() {
    // Item 9: a stray frame first, then JSON lines.
    let frame = Report::new(threshold(), MechanismName::Polyplace, EPS, 0.0, 0.5).to_frame();
    let mut input = frame.clone();
    input.extend_from_slice(b"garbage\n");
    for _ in 0..1_000 {
        input.extend_from_slice(line(EPS, 0.5).as_bytes());
    }
    let out = geopriv(&["aggregate", "--accept-seeded"], &input);
    let stdout = String::from_utf8(out.stdout).unwrap();
    assert!(stdout.contains("\"n\":1001"), "{stdout}");
    assert_eq!(out.status.code(), Some(1));
}

fn composition_reports(n: usize) -> Vec<String> {
    let out = geopriv(
        &[
            "map",
            "release",
            "--grid",
            "3",
            "--epsilon",
            "0.01",
            "--mechanism",
            "composition",
            "--seed",
            "1",
        ],
        "10000,10000\n".repeat(n).as_bytes(),
    );
    assert!(out.status.success());
    String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .map(String::from)
        .collect()
}

#[test]
fn map_aggregate_rejects_records_one_by_one_and_clips() {
    // Item 10. Before: one invalid UTF-8 line aborted the run with no
    // map; one report of 1e300 values moved every cell to ~1e297; raw
    // ESC bytes reached the terminal.
    let good = composition_reports(50);
    let mut forged: serde_json::Value = serde_json::from_str(&good[0]).unwrap();
    forged["values"] = serde_json::json!(vec![1e300; 9]);
    // Not a replay of good[0]'s report_id (a duplicate is now dropped
    // before clipping: attack6 O2).
    forged.as_object_mut().unwrap().remove("report_id");
    let mut input = Vec::new();
    for (i, g) in good.iter().enumerate() {
        input.extend_from_slice(g.as_bytes());
        input.push(b'\n');
        if i == 10 {
            input.extend_from_slice(b"\xff\xfe not utf-8\n");
            input.extend_from_slice(b"{\"set\":\"\x1b]0;owned\x07\x1b[2J\"}\n");
            input.extend_from_slice(forged.to_string().as_bytes());
            input.push(b'\n');
            input.extend_from_slice(&vec![b'x'; 200_000]);
            input.push(b'\n');
        }
    }
    let args = [
        "map",
        "aggregate",
        "--grid",
        "3",
        "--epsilon",
        "0.01",
        "--mechanism",
        "composition",
    ];
    let out = geopriv(&args, &input);
    assert_eq!(out.status.code(), Some(1));
    let map: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(map["n"], 51);
    let upper = map["clip"]["upper"].as_f64().unwrap();
    assert!(upper < 10.0);
    assert!(map["clip"]["clipped"].as_u64().unwrap() >= 9);
    let lower = map["clip"]["lower"].as_f64().unwrap();
    for v in map["values"].as_array().unwrap() {
        let v = v.as_f64().unwrap();
        assert!(v >= lower && v <= upper, "{v}");
    }
    let stderr = String::from_utf8(out.stderr).unwrap();
    assert!(
        !stderr.contains('\u{1b}') && !stderr.contains('\u{7}'),
        "{stderr:?}"
    );
    for code in ["[not-utf8]", "[malformed]", "[too-long]"] {
        assert!(stderr.contains(code), "{code}: {stderr}");
    }
}

#[test]
fn map_flags_and_empty_maps_behave_alike() {
    // Item 14: --grid 0 and 1 are errors; zero accepted reports give the
    // same outcome (exit 1, no map) for every mechanism.
    for g in ["0", "1"] {
        let out = geopriv(&["map", "aggregate", "--grid", g, "--epsilon", "0.01"], b"");
        assert_eq!(out.status.code(), Some(2), "--grid {g}");
    }
    for m in ["a-priori", "vector-laplace", "sampled", "composition"] {
        let out = geopriv(
            &[
                "map",
                "aggregate",
                "--grid",
                "3",
                "--epsilon",
                "0.01",
                "--mechanism",
                m,
            ],
            b"garbage\n",
        );
        assert_eq!(out.status.code(), Some(1), "{m}");
        assert!(out.stdout.is_empty(), "{m}");
    }
}

#[test]
fn hopeless_flags_are_refused_up_front() {
    // Item 14: flags that would make every record fail, and an endless
    // allow-list.
    for args in [
        &["aggregate", "--clip-z", "1e308"][..],
        &["aggregate", "--clip-bias-se", "1e-300"],
        &["aggregate", "--queries", "/dev/zero"],
    ] {
        let out = geopriv(args, line(EPS, 0.5).as_bytes());
        assert_eq!(out.status.code(), Some(2), "{args:?}");
        assert!(out.stdout.is_empty());
    }
}

#[test]
fn a_ledger_refusal_has_its_own_exit_code() {
    let dir = tempfile::tempdir().unwrap();
    let ledger = dir.path().join("device.json");
    let mut args = threshold_release_args();
    args.extend_from_slice(&["--unit", "per-dollar"]);
    let without_ledger = args.clone();
    args.extend_from_slice(&[
        "--ledger",
        ledger.to_str().unwrap(),
        "--budget-epsilon",
        "1e-4",
    ]);
    let out = geopriv(&args, b"95000\n95000\n");
    assert_eq!(
        out.status.code(),
        Some(3),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(String::from_utf8(out.stdout).unwrap().lines().count(), 1);
    // A malformed line alone is still 1, a usage error 2.
    let out = geopriv(&without_ledger, b"x\n");
    assert_eq!(out.status.code(), Some(2));
}

/// attack15 O2: every stderr line of `privatize` and `map release` at
/// ε = 1e-300, 5e-324 and 1e300 prints ε short (it printed 300-digit
/// decimals and "within inf m"); the numbers still read back exactly.
#[test]
fn extreme_epsilons_are_printed_short_on_stderr() {
    for (eps, radius) in [
        ("1e-300", "9.999999999999999e299 m"),
        ("5e-324", "more than 1.8e308 m"),
        ("1e300", "1e-300 m"),
    ] {
        // The ledger tests' release with this ε, unmetered.
        let mut privatize = threshold_release_args();
        *privatize.last_mut().unwrap() = eps;
        privatize.push("--unmetered");
        let runs = [
            geopriv(&privatize, b"95\n"),
            geopriv(
                &[
                    "map",
                    "release",
                    "--bbox",
                    "0",
                    "20000",
                    "0",
                    "20000",
                    "--grid",
                    "3",
                    "--epsilon",
                    eps,
                ],
                b"",
            ),
        ];
        for out in runs {
            let err = String::from_utf8_lossy(&out.stderr);
            assert!(
                err.lines().all(|l| l.len() < 200) && !err.contains("within inf"),
                "ε {eps}: {err}"
            );
            // 5e-324 is refused by privatize (its γ underflows) before the
            // privacy line; map release states it.
            if err.contains("privacy:") {
                assert!(
                    err.contains(&format!(
                        "privacy: ε = {eps} per metre, i.e. level 1 within {radius}"
                    )) || err.contains(&format!("privacy: ε = {eps} per unit")),
                    "ε {eps}: {err}"
                );
            }
        }
    }
}
