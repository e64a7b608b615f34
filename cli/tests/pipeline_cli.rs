//! `geopriv privatize | geopriv aggregate` and `geopriv audit`, run as a
//! user would run them.

mod common;
use common::geopriv;

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
    "--unmetered",
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
        let agg = geopriv(&["aggregate", "--accept-seeded"], &released.stdout);
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
        [
            "delta",
            "epsilon",
            "mechanism",
            "query",
            "report_id",
            "seeded",
            "value",
            "version"
        ]
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
    let agg = geopriv(&["aggregate", "--accept-seeded"], &stream);
    assert_eq!(agg.status.code(), Some(1));
    let err = String::from_utf8(agg.stderr).unwrap();
    assert!(err.contains("line 4:") && err.contains("line 5:"), "{err}");
    assert!(String::from_utf8(agg.stdout).unwrap().contains("\"n\":3"));
}

#[test]
fn the_policy_rejects_reports_over_budget() {
    let released = geopriv(THRESHOLD, b"95\n");
    let agg = geopriv(
        &["aggregate", "--accept-seeded", "--max-epsilon", "0.01"],
        &released.stdout,
    );
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
            "--unmetered",
        ],
        b"48.85,2.35\n48.86,2.36\n95,0\n",
    );
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(String::from_utf8(out.stdout).unwrap().lines().count(), 2);
    assert!(String::from_utf8(out.stderr).unwrap().contains("line 3:"));
}

#[test]
fn seeded_reports_are_refused_by_default() {
    let released = geopriv(THRESHOLD, b"95\n");
    let agg = geopriv(&["aggregate"], &released.stdout);
    assert_eq!(agg.status.code(), Some(1));
    assert!(String::from_utf8(agg.stderr).unwrap().contains("seeded"));
}

#[test]
fn a_ledger_file_meters_privatize_across_runs() {
    let dir = std::env::temp_dir().join(format!("geopriv-cli-ledger-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let ledger = dir.join("device.json");
    let ledger = ledger.to_str().unwrap();
    let run = |budget: &str, unit: &str, input: &[u8]| {
        geopriv(
            &[
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
                "--unit",
                unit,
                "--ledger",
                ledger,
                "--budget-epsilon",
                budget,
            ],
            input,
        )
    };
    // Budget 0.16: two releases now, a third in a later run, then refusals.
    let first = run("0.16", "per-dollar", b"95\n96\n");
    assert!(first.status.success(), "{first:?}");
    assert_eq!(String::from_utf8(first.stdout).unwrap().lines().count(), 2);
    let second = run("0.16", "per-dollar", b"97\n98\n");
    // A ledger refusal has its own exit status, 3 (issue 19 item 14).
    assert_eq!(second.status.code(), Some(3));
    assert_eq!(String::from_utf8(second.stdout).unwrap().lines().count(), 1);
    assert!(String::from_utf8(second.stderr)
        .unwrap()
        .contains("budget exceeded"));
    // Another pinned total or unit is refused before anything is released,
    // with the ledger's exit status 3 as `geopriv --help` states (it was 2,
    // a usage error; attack6).
    for (budget, unit) in [("1", "per-dollar"), ("0.16", "per-metre")] {
        let out = run(budget, unit, b"95\n");
        assert_eq!(out.status.code(), Some(3), "{out:?}");
        assert!(out.stdout.is_empty());
        assert!(String::from_utf8(out.stderr)
            .unwrap()
            .contains("pinned policy"));
    }
    // Neither --ledger nor --unmetered: refused by the flag parser.
    let mut args = THRESHOLD.to_vec();
    args.retain(|a| *a != "--unmetered");
    assert_eq!(geopriv(&args, b"95\n").status.code(), Some(2));
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn latlon_help_states_the_unit_of_epsilon() {
    let out = geopriv(&["privatize", "kde", "--help"], b"");
    let help = String::from_utf8(out.stdout).unwrap();
    assert!(help.contains("per *projected* metre"), "{help}");
    assert!(help.contains("Web Mercator"), "{help}");
}

#[test]
fn bad_flags_exit_2() {
    for args in [
        vec![
            "privatize",
            "threshold",
            "--unmetered",
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
            "--unmetered",
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
            "--unmetered",
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
            "--unmetered",
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

/// Issue 12: a non-UTF-8 line, a BOM, a `#` header and a JSON array cost
/// only themselves, each reported with its line number.
#[test]
fn aggregate_keeps_every_good_record_around_bad_bytes() {
    let released = geopriv(THRESHOLD, b"95\n105\n");
    let lines: Vec<&[u8]> = released.stdout.split(|&b| b == b'\n').collect();
    let mut input = b"\xEF\xBB\xBF# header\n".to_vec();
    input.extend_from_slice(lines[0]);
    input.extend_from_slice(b"\n\xc3\x28 bad utf-8\n[1,2]\n");
    input.extend_from_slice(lines[1]);
    input.push(b'\n');
    // The test's reports are seeded (reproducible), so accept them.
    let agg = geopriv(&["aggregate", "--accept-seeded"], &input);
    assert_eq!(agg.status.code(), Some(1));
    let out = String::from_utf8(agg.stdout).unwrap();
    assert!(out.contains("\"n\":2") && out.contains("\"clip\""), "{out}");
    let err = String::from_utf8(agg.stderr).unwrap();
    assert!(
        err.contains("line 3:") && err.contains("[not-utf8]"),
        "{err}"
    );
    assert!(
        err.contains("line 4:") && err.contains("[json-array]"),
        "{err}"
    );
    // Garbage alone: `auto` decides each record by itself, so it is one
    // rejected record (exit 1), not a refused stream (issue 19 item 9).
    let agg = geopriv(&["aggregate"], b"\x07\x01garbage");
    assert_eq!(agg.status.code(), Some(1));
    assert!(agg.stdout.is_empty());
}

/// Issue 12: the allow-list and the limits are flags.
#[test]
fn aggregate_allow_list_and_limits() {
    let dir = tempfile::tempdir().unwrap();
    let list = dir.path().join("queries.txt");
    std::fs::write(&list, "# ids\nthreshold:T=100;w=20\n").unwrap();
    let released = geopriv(THRESHOLD, b"95\n");
    let mut other = String::from_utf8(released.stdout.clone())
        .unwrap()
        .replace("\"threshold\":100.0", "\"threshold\":101.0");
    // Another report (a new id): a repeated id now counts once.
    let at = other.find("\"report_id\":\"").unwrap() + 13;
    let flipped = if &other[at..at + 1] == "0" { "1" } else { "0" };
    other.replace_range(at..at + 1, flipped);
    let mut input = released.stdout.clone();
    input.extend_from_slice(other.as_bytes());
    let agg = geopriv(&["aggregate", "--queries", list.to_str().unwrap()], &input);
    assert_eq!(agg.status.code(), Some(1));
    assert!(String::from_utf8(agg.stderr)
        .unwrap()
        .contains("[unknown-query]"));
    let agg = geopriv(
        &["aggregate", "--accept-seeded", "--max-queries", "1"],
        &input,
    );
    assert!(String::from_utf8(agg.stderr)
        .unwrap()
        .contains("[too-many-groups]"));
    let agg = geopriv(&["aggregate", "--max-record-bytes", "10"], &input);
    assert!(String::from_utf8(agg.stderr)
        .unwrap()
        .contains("[too-long]"));
    for bad in [
        &["aggregate", "--max-queries", "0"][..],
        &["aggregate", "--no-clip", "--clip-z", "3"],
        &[
            "aggregate",
            "--estimator",
            "median-of-means",
            "--buckets",
            "1",
        ],
    ] {
        assert_eq!(geopriv(bad, b"").status.code(), Some(2), "{bad:?}");
    }
}

/// Issue 12: audits the tool cannot run are refused with exit 2 and a
/// message, never a panic, an abort or a vacuous pass.
#[test]
fn audit_refuses_unauditable_inputs() {
    for extra in [
        &[
            "--threshold",
            "1e20",
            "--width",
            "1e-10",
            "--epsilon",
            "0.01",
        ][..],
        &[
            "--threshold",
            "1e308",
            "--width",
            "1e307",
            "--epsilon",
            "0.01",
        ],
        &[
            "--threshold",
            "100",
            "--width",
            "20",
            "--epsilon",
            "0.05",
            "--pairs",
            "18446744073709551615",
        ],
        &[
            "--threshold",
            "100",
            "--width",
            "20",
            "--epsilon",
            "0.05",
            "--pairs",
            "1000000000000",
        ],
        &["--threshold", "100", "--width", "20", "--epsilon", "1e-200"],
    ] {
        let mut args = vec!["audit", "threshold", "--mechanism", "polyplace"];
        args.extend_from_slice(extra);
        let out = geopriv(&args, b"");
        assert_eq!(out.status.code(), Some(2), "{extra:?}: {out:?}");
        let err = String::from_utf8(out.stderr).unwrap();
        assert!(
            err.starts_with("error:") && !err.contains("panicked"),
            "{err}"
        );
    }
}

/// Issue 12: `demo --grid 100000000` is refused before allocating.
#[test]
fn demo_refuses_absurd_grids() {
    let out = geopriv(
        &["demo", "--grid", "100000000", "--out", "/nonexistent/x"],
        b"",
    );
    assert!(!out.status.success());
    assert!(String::from_utf8(out.stderr).unwrap().contains("limit"));
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

#[test]
fn map_bbox_takes_commas_or_spaces_and_refuses_other_counts() {
    let plan = |bbox: &[&str]| {
        let mut args = vec!["map", "plan", "--epsilon", "0.002", "--n", "1000", "--bbox"];
        args.extend_from_slice(bbox);
        geopriv(&args, b"")
    };
    let comma = plan(&["0,1000,0,1000"]);
    let spaces = plan(&["0", "1000", "0", "1000"]);
    assert!(
        comma.status.success(),
        "{}",
        String::from_utf8_lossy(&comma.stderr)
    );
    assert_eq!(comma.stdout, spaces.stdout);
    let three = plan(&["0,1000,0"]);
    assert!(!three.status.success());
    assert!(String::from_utf8_lossy(&three.stderr).contains("4 numbers"));
}

/// `geopriv sensitivity region` and `geopriv privatize region` on a GeoJSON
/// file (issue 24).
mod regions {
    use super::geopriv;
    use geo::polygon;
    use geopriv::{Growth, Query, RegionQuery};
    use std::io::Write;

    const DOC: &str = r#"{"type":"FeatureCollection","features":[
      {"type":"Feature","id":"park","properties":{"name":"Park"},
       "geometry":{"type":"Polygon","coordinates":[[[0,0],[100,0],[100,40],[40,40],[40,100],[0,100],[0,0]]]}},
      {"type":"Feature","id":"paris","properties":{"name":"Paris box"},
       "geometry":{"type":"Polygon","coordinates":[[[2.34,48.85],[2.36,48.85],[2.36,48.86],[2.34,48.86],[2.34,48.85]]]}},
      {"type":"Feature","id":"bad\u001b[2J","properties":{},
       "geometry":{"type":"Polygon","coordinates":[[[0,0],[1,1],[1,0],[0,1],[0,0]]]}}]}"#;

    fn file() -> tempfile::NamedTempFile {
        let mut f = tempfile::NamedTempFile::new().unwrap();
        f.write_all(DOC.as_bytes()).unwrap();
        f
    }

    /// `sensitivity region` on `path` with the feature chosen by `selector`
    /// (`--feature ID` or `--property K=V`), W = 10, exp growth γ = 0.05.
    fn sensitivity_args<'a>(path: &'a str, selector: [&'a str; 2]) -> Vec<&'a str> {
        let mut a = vec!["sensitivity", "region", "--geojson", path];
        a.extend(selector);
        a.extend(["--width", "10", "--growth", "exp", "--gamma", "0.05"]);
        a
    }

    #[test]
    fn sensitivity_region_prints_value_l_and_s_exactly() {
        let f = file();
        let path = f.path().to_str().unwrap();
        let args = sensitivity_args(path, ["--feature", "park"]);
        let out = geopriv(&args, b"50,20\n20,20\n-30,50\n45,45\n");
        assert_eq!(
            out.status.code(),
            Some(0),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let l_shape: geo::Polygon<f64> = polygon![
            (x: 0.0, y: 0.0), (x: 100.0, y: 0.0), (x: 100.0, y: 40.0),
            (x: 40.0, y: 40.0), (x: 40.0, y: 100.0), (x: 0.0, y: 100.0)
        ];
        let q = RegionQuery::new(l_shape, 10.0).unwrap();
        let g = Growth::exponential(0.05).unwrap();
        let pts = [[50.0, 20.0], [20.0, 20.0], [-30.0, 50.0], [45.0, 45.0]];
        let stdout = String::from_utf8(out.stdout).unwrap();
        for (line, x) in stdout.lines().zip(pts) {
            let got: Vec<f64> = line.split(',').map(|s| s.parse().unwrap()).collect();
            let want = [
                q.value(&x).unwrap(),
                q.pointwise_lipschitz(&x).unwrap(),
                q.smooth_sensitivity(&x, g).unwrap(),
            ];
            assert_eq!(got, want, "{line}");
        }
        // By property, same answers.
        let by_name = sensitivity_args(path, ["--property", "name=Park"]);
        let again = geopriv(&by_name, b"50,20\n20,20\n-30,50\n45,45\n");
        assert_eq!(String::from_utf8(again.stdout).unwrap(), stdout);
    }

    #[test]
    fn bad_features_are_named_escaped_and_exit_2() {
        let f = file();
        let path = f.path().to_str().unwrap();
        for (feature, needle) in [
            ("bad\u{1b}[2J", "bad\\u{1b}[2J"),
            ("nope", "no such feature"),
        ] {
            let out = geopriv(&sensitivity_args(path, ["--feature", feature]), b"");
            assert_eq!(out.status.code(), Some(2));
            let err = String::from_utf8(out.stderr).unwrap();
            assert!(err.contains(needle) && !err.contains('\u{1b}'), "{err}");
        }
    }

    #[test]
    fn privatize_region_latlon_metered_and_unmetered() {
        let f = file();
        let path = f.path().to_str().unwrap();
        let base = [
            "privatize",
            "region",
            "--geojson",
            path,
            "--feature",
            "paris",
            "--width",
            "200",
            "--mechanism",
            "polyplace",
            "--epsilon",
            "0.01",
            "--latlon",
            "--projection",
            "local:48.855,2.35",
            "--seed",
            "3",
        ];
        let mut args = base.to_vec();
        args.push("--unmetered");
        let out = geopriv(&args, b"48.855,2.35\n48.9,2.4\n");
        assert_eq!(
            out.status.code(),
            Some(0),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let stdout = String::from_utf8(out.stdout).unwrap();
        assert_eq!(stdout.lines().count(), 2);
        assert!(stdout.contains(r#""region":{"digest":""#), "{stdout}");
        // A ledger with room for exactly one release.
        let dir = tempfile::tempdir().unwrap();
        let ledger = dir.path().join("ledger");
        let mut args = base.to_vec();
        let l = ledger.to_str().unwrap();
        args.extend(["--ledger", l, "--budget-epsilon", "0.01"]);
        let out = geopriv(&args, b"48.855,2.35\n48.855,2.35\n");
        assert_eq!(out.status.code(), Some(3), "a ledger refusal exits 3");
        assert_eq!(String::from_utf8(out.stdout).unwrap().lines().count(), 1);
    }
}

#[test]
fn within_and_level_are_epsilon_stated_as_a_radius() {
    // --within 20 --level 1 is ε = 0.05: the same seeded releases.
    let by_radius: Vec<&str> = THRESHOLD
        .iter()
        .flat_map(|a| match *a {
            "--epsilon" => vec!["--within"],
            "0.05" => vec!["20", "--level", "1"],
            other => vec![other],
        })
        .collect();
    let (a, b) = (
        geopriv(THRESHOLD, b"95\n130\n"),
        geopriv(&by_radius, b"95\n130\n"),
    );
    assert!(a.status.success() && b.status.success());
    assert_eq!(a.stdout, b.stdout);
    for out in [&a, &b] {
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(
            err.contains("privacy: ε = 0.05 per unit, i.e. level 1 within 20"),
            "{err}"
        );
    }
    // Both forms at once, or a level without a radius: flag errors.
    let mut both = THRESHOLD.to_vec();
    both.extend(["--within", "20", "--level", "1"]);
    assert_eq!(geopriv(&both, b"95\n").status.code(), Some(2));
    let mut lone: Vec<&str> = THRESHOLD
        .iter()
        .copied()
        .filter(|a| *a != "--epsilon" && *a != "0.05")
        .collect();
    lone.extend(["--level", "1"]);
    assert_eq!(geopriv(&lone, b"95\n").status.code(), Some(2));
    let mut zero = by_radius.clone();
    let i = zero.iter().position(|a| *a == "--within").unwrap();
    zero[i + 1] = "0";
    assert!(!geopriv(&zero, b"95\n").status.success());
}

/// A repeated `report_id` counts once, as at the collector (a device that
/// retried an upload, a file concatenated twice): `aggregate` drops the
/// repeats and says how many. Before: the 500 reports given twice were
/// counted as n = 1000 with a different mean.
#[test]
fn aggregate_counts_a_repeated_report_id_once() {
    let (text, _) = incomes(500);
    let released = geopriv(THRESHOLD, text.as_bytes());
    assert!(released.status.success(), "{released:?}");
    let once = geopriv(&["aggregate", "--accept-seeded"], &released.stdout);
    let half: Vec<u8> = String::from_utf8_lossy(&released.stdout)
        .lines()
        .take(250)
        .flat_map(|l| format!("{l}\n").into_bytes())
        .collect();
    let mut twice = released.stdout.clone();
    twice.extend_from_slice(&half);
    let again = geopriv(&["aggregate", "--accept-seeded"], &twice);
    assert!(again.status.success(), "{again:?}");
    assert_eq!(
        once.stdout, again.stdout,
        "the repeats changed the estimate"
    );
    let err = String::from_utf8_lossy(&again.stderr);
    let repeats = 250;
    assert!(
        err.contains(&format!("{repeats} duplicate reports dropped")),
        "{err}"
    );
    assert!(!String::from_utf8_lossy(&once.stderr).contains("duplicate"));
    // Past --max-report-ids the repeats of unremembered ids count again,
    // and the summary says so.
    let capped = geopriv(
        &["aggregate", "--accept-seeded", "--max-report-ids", "100"],
        &twice,
    );
    let err = String::from_utf8_lossy(&capped.stderr);
    assert!(
        err.contains("550 reports accepted after --max-report-ids"),
        "{err}"
    );
    let n = |o: &std::process::Output| {
        serde_json::from_slice::<serde_json::Value>(&o.stdout).unwrap()["n"]
            .as_u64()
            .unwrap()
    };
    assert_eq!(n(&once), 500);
    assert_eq!(n(&capped), 500 + 250 - 100);
}

/// `privatize --outbox` keeps each report in the ledger (what it prints is
/// what `outbox list` shows); `outbox upload` with no collector listening
/// exits 4 and keeps everything (the collector side is tested in
/// scripts/test-collector.sh step 7 and server/tests/collector.rs).
#[test]
fn outbox_keeps_reports_until_a_collector_stores_them() {
    let dir = tempfile::tempdir().unwrap();
    let ledger = dir.path().join("device.json");
    let ledger = ledger.to_str().unwrap();
    let flags = [
        "--ledger",
        ledger,
        "--unit",
        "per-dollar",
        "--budget-epsilon",
        "1",
    ];
    // THRESHOLD without its --seed and --unmetered.
    let mut args = THRESHOLD[..THRESHOLD.len() - 3].to_vec();
    args.push("--outbox");
    args.extend(flags);
    let released = geopriv(&args, b"90\n95\n110\n");
    assert!(released.status.success(), "{released:?}");
    let mut list = vec!["outbox", "list"];
    list.extend(flags);
    let listed = geopriv(&list, b"");
    assert_eq!(listed.stdout, released.stdout);
    assert_eq!(String::from_utf8_lossy(&listed.stdout).lines().count(), 3);
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let url = format!("http://127.0.0.1:{port}");
    let mut up = vec![
        "outbox",
        "upload",
        "--task",
        "t",
        "--max-attempts",
        "2",
        "--backoff-ms",
        "1",
        "--url",
        &url,
    ];
    up.extend(flags);
    let out = geopriv(&up, b"");
    assert_eq!(out.status.code(), Some(4), "{out:?}");
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(
        (v["remaining"].as_u64(), v["requests"].as_u64()),
        (Some(3), Some(2)),
        "{v}"
    );
    assert!(v["stopped"].as_str().unwrap().contains("gave up"), "{v}");
    assert_eq!(geopriv(&list, b"").stdout, released.stdout);
    // `outbox list | head -0`: a reader that goes away ends the listing
    // quietly (a cold CI run printed a panic: `println!` on a closed pipe).
    let mut early = common::spawn(&list, Vec::new());
    drop(early.stdout.take());
    let out = early.wait_with_output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!err.contains("panicked"), "{err}");
    assert!(out.status.success(), "{out:?}");
}

/// Every table and result the CLI prints goes through `outln!`: a reader
/// that goes away (`geopriv central median | head -0`) ends the process
/// quietly with status 0. With `println!` the process panicked on the closed
/// pipe (exit 101, "failed printing to stdout").
#[test]
fn results_on_a_closed_stdout_end_quietly() {
    let values: Vec<u8> = (1..=200)
        .flat_map(|v| format!("{}\n", v % 10).into_bytes())
        .collect();
    let args = [
        "central",
        "median",
        "--lambda",
        "10",
        "--epsilon",
        "1",
        "--seed",
        "1",
    ];
    let mut child = common::spawn(&args, values);
    drop(child.stdout.take());
    let out = child.wait_with_output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!err.contains("panicked"), "{err}");
    assert!(out.status.success(), "{out:?}");
}
