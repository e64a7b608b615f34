//! `geopriv privatize | geopriv aggregate` and `geopriv audit`, run as a
//! user would run them.

use std::io::Write;
use std::process::{Command, Output, Stdio};

fn geopriv(args: &[&str], stdin: &[u8]) -> Output {
    let mut child = Command::new(env!("CARGO_BIN_EXE_geopriv"))
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // Feed stdin from another thread: the child may fill its stdout pipe
    // before it has read all of its input.
    let mut pipe = child.stdin.take().unwrap();
    let data = stdin.to_vec();
    let feeder = std::thread::spawn(move || pipe.write_all(&data));
    let output = child.wait_with_output().unwrap();
    let _ = feeder.join();
    output
}

const THRESHOLD: &[&str] = &[
    "privatize",
    "threshold",
    "--threshold",
    "100",
    "--width",
    "20",
    "--mechanism",
    "polyplace",
    "--epsilon",
    "0.05",
    "--seed",
    "1",
];

fn incomes(n: usize) -> (String, f64) {
    let mut text = String::new();
    let mut truth = 0.0;
    for i in 0..n {
        let x = 200.0 * (i as f64 + 0.5) / n as f64;
        text.push_str(&format!("{x}\n"));
        truth += ((x - 100.0) / 20.0 + 0.5).clamp(0.0, 1.0);
    }
    (text, truth / n as f64)
}

#[test]
fn privatize_then_aggregate_recovers_the_share() {
    let (text, truth) = incomes(20_000);
    for format in ["json", "binary"] {
        let mut args = THRESHOLD.to_vec();
        args.extend(["--format", format]);
        let released = geopriv(&args, text.as_bytes());
        assert!(released.status.success(), "{released:?}");
        let agg = geopriv(&["aggregate"], &released.stdout);
        assert!(agg.status.success(), "{agg:?}");
        let line = String::from_utf8(agg.stdout).unwrap();
        let v: serde_json::Value = serde_json::from_str(line.trim()).unwrap();
        assert_eq!(v["query"], "threshold:T=100;w=20");
        assert_eq!(v["n"], 20_000);
        // Within 4 standard errors (a 95% interval misses 1 time in 20).
        let mean = v["mean"].as_f64().unwrap();
        let se = v["standard_error"].as_f64().unwrap();
        assert!(
            (mean - truth).abs() <= 4.0 * se,
            "{format}: {line} vs {truth}"
        );
    }
}

#[test]
fn reports_never_carry_the_sensitivity_or_the_scale() {
    let out = geopriv(THRESHOLD, b"95\n");
    let line = String::from_utf8(out.stdout).unwrap();
    let v: serde_json::Value = serde_json::from_str(line.trim()).unwrap();
    let keys: Vec<&String> = v.as_object().unwrap().keys().collect();
    assert_eq!(
        keys,
        ["delta", "epsilon", "mechanism", "query", "value", "version"]
    );
}

#[test]
fn bad_lines_are_reported_and_good_ones_kept() {
    let out = geopriv(THRESHOLD, b"10\nabc\n\n50\nNaN\n150\n");
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(
        String::from_utf8(out.stdout.clone())
            .unwrap()
            .lines()
            .count(),
        3
    );
    let err = String::from_utf8(out.stderr).unwrap();
    assert!(
        err.contains("line 2:") && err.contains("line 3:") && err.contains("line 5:"),
        "{err}"
    );
    // The aggregator keeps good reports and names the bad records.
    let mut stream = out.stdout.clone();
    stream.extend_from_slice(b"not json\n{\"version\":7}\n");
    let agg = geopriv(&["aggregate"], &stream);
    assert_eq!(agg.status.code(), Some(1));
    let err = String::from_utf8(agg.stderr).unwrap();
    assert!(err.contains("line 4:") && err.contains("line 5:"), "{err}");
    assert!(String::from_utf8(agg.stdout).unwrap().contains("\"n\":3"));
}

#[test]
fn the_policy_rejects_reports_over_budget() {
    let released = geopriv(THRESHOLD, b"95\n");
    let agg = geopriv(&["aggregate", "--max-epsilon", "0.01"], &released.stdout);
    assert_eq!(agg.status.code(), Some(1));
    assert!(String::from_utf8(agg.stderr).unwrap().contains("line 1:"));
}

#[test]
fn latlon_input_is_projected() {
    let out = geopriv(
        &[
            "privatize",
            "kde",
            "--center",
            "0,0",
            "--bandwidth",
            "1000",
            "--mechanism",
            "student-t",
            "--epsilon",
            "0.001",
            "--latlon",
            "--projection",
            "local:48.85,2.35",
            "--seed",
            "2",
        ],
        b"48.85,2.35\n48.86,2.36\n95,0\n",
    );
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(String::from_utf8(out.stdout).unwrap().lines().count(), 2);
    assert!(String::from_utf8(out.stderr).unwrap().contains("line 3:"));
}

#[test]
fn bad_flags_exit_2() {
    for args in [
        vec![
            "privatize",
            "threshold",
            "--threshold",
            "0",
            "--width",
            "1",
            "--mechanism",
            "laplace",
            "--epsilon",
            "1",
        ],
        vec![
            "privatize",
            "threshold",
            "--threshold",
            "0",
            "--width",
            "1",
            "--mechanism",
            "polyplace",
            "--epsilon",
            "-1",
        ],
        vec![
            "privatize",
            "threshold",
            "--threshold",
            "0",
            "--width",
            "1",
            "--mechanism",
            "polyplace",
            "--epsilon",
            "1",
            "--delta",
            "0.1",
        ],
        vec![
            "privatize",
            "threshold",
            "--threshold",
            "0",
            "--width",
            "1",
            "--mechanism",
            "polyplace",
            "--epsilon",
            "1",
            "--latlon",
        ],
        vec![
            "audit",
            "threshold",
            "--threshold",
            "0",
            "--width",
            "0",
            "--mechanism",
            "polyplace",
            "--epsilon",
            "1",
        ],
        vec!["aggregate", "--max-delta", "2"],
    ] {
        let out = geopriv(&args, b"");
        assert_eq!(out.status.code(), Some(2), "{args:?}: {out:?}");
    }
}

#[test]
fn audit_prints_json_and_its_verdict() {
    for (mechanism, extra) in [("polyplace", vec![]), ("laplace", vec!["--delta", "1e-6"])] {
        let mut args = vec![
            "audit",
            "two-way",
            "--threshold",
            "0,10",
            "--width",
            "10",
            "--mechanism",
            mechanism,
            "--epsilon",
            "0.1",
            "--pairs",
            "2000",
        ];
        args.extend(extra);
        let out = geopriv(&args, b"");
        assert!(out.status.success(), "{out:?}");
        let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        assert_eq!(v["pairs"], 2000);
        assert!(v["max_loss_ratio"].as_f64().unwrap() <= 1.0 + 1e-9);
        assert_eq!(v["passed"], true);
        if mechanism == "laplace" {
            assert!(v["excess_mass"].as_f64().unwrap() <= 1e-6);
        }
    }
}

#[test]
fn audit_sampling_prints_the_tester_report() {
    let out = geopriv(
        &[
            "audit",
            "threshold",
            "--threshold",
            "0",
            "--width",
            "1",
            "--mechanism",
            "polyplace",
            "--epsilon",
            "2",
            "--sampling",
            "--samples",
            "20000",
            "--pilot",
            "5000",
        ],
        b"",
    );
    assert!(out.status.success(), "{out:?}");
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["passed"], true);
    assert_eq!(v["pairs"], 6);
    let ratio = v["worst"]["ratio"].as_f64().unwrap();
    assert!(ratio > 0.0 && ratio <= 1.0, "{ratio}");
    // --samples without --sampling is a flag error.
    let out = geopriv(
        &[
            "audit",
            "threshold",
            "--threshold",
            "0",
            "--width",
            "1",
            "--mechanism",
            "polyplace",
            "--epsilon",
            "2",
            "--samples",
            "10",
        ],
        b"",
    );
    assert_eq!(out.status.code(), Some(2), "{out:?}");
}
