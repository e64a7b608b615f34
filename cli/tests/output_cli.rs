//! Outputs are never overwritten without `--force` (issue 19 item 14):
//! `central ... --out`, `map sweep --dump`, the experiments' and the
//! demo's output directories. Before the fix every one of them replaced
//! an existing file (or wrote into a full directory) silently.

mod common;
use common::{geopriv, small_coverage_sweep};

/// The refusal: exit 2, the path named (escaped), `--force` said, and the
/// existing output untouched.
fn assert_refused(out: &std::process::Output, shown_path: &str) {
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("--force"), "{stderr}");
    assert!(stderr.contains(shown_path), "{stderr}");
    assert!(!stderr.contains('\u{1b}'), "raw escape in {stderr:?}");
}

#[test]
fn central_out_is_not_overwritten_without_force() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("table\u{1b}[2J.md");
    std::fs::write(&file, "keep").unwrap();
    let path = file.to_str().unwrap();
    let args = ["central", "chain-experiment", "--reps", "3", "--out", path];
    assert_refused(&geopriv(&args, b""), "table\\u{1b}[2J.md");
    assert_eq!(std::fs::read_to_string(&file).unwrap(), "keep");
    // --force replaces it; a new path needs no flag.
    let forced = geopriv(&[&args[..], &["--force"]].concat(), b"");
    assert!(forced.status.success(), "{forced:?}");
    assert_ne!(std::fs::read_to_string(&file).unwrap(), "keep");
    let fresh = dir.path().join("new.md");
    let args = [
        "central",
        "chain-experiment",
        "--reps",
        "3",
        "--out",
        fresh.to_str().unwrap(),
    ];
    assert!(geopriv(&args, b"").status.success());
}

#[test]
fn map_sweep_dump_is_not_overwritten_without_force() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("reports.ndjson");
    std::fs::write(&file, "keep").unwrap();
    let dump = format!("200:1:{}", file.to_str().unwrap());
    let args = [
        "map", "sweep", "--grid", "3", "--n", "200", "--eps-h", "1", "--dump", &dump,
    ];
    assert_refused(&geopriv(&args, b""), "reports.ndjson");
    assert_eq!(std::fs::read_to_string(&file).unwrap(), "keep");
    let forced = geopriv(&[&args[..], &["--force"]].concat(), b"");
    assert!(forced.status.success(), "{forced:?}");
    assert_eq!(
        std::fs::read_to_string(&file).unwrap().lines().count(),
        200,
        "the dump replaced the file"
    );
}

#[test]
fn experiment_and_demo_directories_are_not_overwritten_without_force() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("threshold");
    std::fs::create_dir(&out).unwrap();
    // An empty directory loses nothing: accepted.
    let args = [
        "experiment",
        "threshold",
        "--no-plots",
        "--threads",
        "1",
        "--n",
        "200",
        "--epsilon",
        "1/800",
        "--reps",
        "1",
        "--thresholds",
        "100k",
        "--out",
        out.to_str().unwrap(),
    ];
    let first = geopriv(&args, b"");
    assert!(first.status.success(), "{first:?}");
    // Now it holds results.md: refused up front, nothing rewritten.
    std::fs::write(out.join("results.md"), "keep").unwrap();
    assert_refused(&geopriv(&args, b""), "threshold");
    assert_eq!(
        std::fs::read_to_string(out.join("results.md")).unwrap(),
        "keep"
    );
    let forced = geopriv(&[&args[..], &["--force"]].concat(), b"");
    assert!(forced.status.success(), "{forced:?}");
    assert_ne!(
        std::fs::read_to_string(out.join("results.md")).unwrap(),
        "keep"
    );
    // The longitudinal experiment and the demo check their directory
    // before computing anything.
    for cmd in [
        &["experiment", "longitudinal", "--out"][..],
        &["demo", "--out"][..],
    ] {
        let args = [cmd, &[out.to_str().unwrap()]].concat();
        assert_refused(&geopriv(&args, b""), "threshold");
    }
    // A file where the directory should be is refused too.
    let file = dir.path().join("a-file");
    std::fs::write(&file, "keep").unwrap();
    let args = ["experiment", "two-way", "--out", file.to_str().unwrap()];
    assert_refused(&geopriv(&args, b""), "a-file");
}

/// `map sweep --coverage` with GEOPRIV_SWEEP_EM_DUMP (branch emcov3): one
/// CSV of per-cell values per draw, on the airports-like population, and
/// an existing file is not replaced without --force.
#[test]
fn map_sweep_em_dump_writes_cells_and_is_not_overwritten_without_force() {
    let dir = tempfile::tempdir().unwrap();
    let run = |force: bool| {
        // The dump, not the λ < 1 targets, is under test: keep them at
        // 2x (8x on atoms costs 10x here; branch kcovair).
        small_coverage_sweep(
            "airports-like",
            if force { &["--force"] } else { &[] },
            &[
                ("GEOPRIV_SWEEP_EM_DUMP", dir.path().as_os_str()),
                ("GEOPRIV_SWEEP_TARGET_FINE", "2".as_ref()),
            ],
        )
    };
    let out = run(false);
    assert!(out.status.success(), "{out:?}");
    let file = dir.path().join("AirportsLike-2000-1-0.csv");
    let text = std::fs::read_to_string(&file).unwrap();
    let mut lines = text.lines();
    assert!(lines
        .next()
        .unwrap()
        .starts_with("# pop AirportsLike n 2000 eh 1 r 0 t "));
    assert_eq!(lines.next(), Some("truth,m,pilot,s,b,se,k1,se1,k0,se0"));
    let rows: Vec<&str> = lines.collect();
    assert_eq!(rows.len(), 121);
    assert!(rows.iter().all(|r| r.split(',').count() == 10));
    std::fs::write(&file, "keep").unwrap();
    assert_refused(&run(false), "AirportsLike-2000-1-0.csv");
    assert_eq!(std::fs::read_to_string(&file).unwrap(), "keep");
    assert!(run(true).status.success());
    assert_ne!(std::fs::read_to_string(&file).unwrap(), "keep");
}

/// `GEOPRIV_SWEEP_EM_SPLIT=1` (branch emcov4) adds the split-sample
/// columns: per half (a hash of the report order) its true map, EM map and
/// stated SE, λ = 1 map and SE. The halves partition the devices, so the
/// full true map is their device-weighted mean.
#[test]
fn map_sweep_em_split_dump_writes_both_halves() {
    let dir = tempfile::tempdir().unwrap();
    let out = small_coverage_sweep(
        "city",
        &[],
        &[
            ("GEOPRIV_SWEEP_EM_DUMP", dir.path().as_os_str()),
            ("GEOPRIV_SWEEP_EM_SPLIT", "1".as_ref()),
        ],
    );
    assert!(out.status.success(), "{out:?}");
    let text = std::fs::read_to_string(dir.path().join("City-2000-1-0.csv")).unwrap();
    let mut lines = text.lines();
    let head = lines.next().unwrap();
    let halves: Vec<u64> = head
        .split(" | half t ")
        .skip(1)
        .map(|h| h.split_whitespace().nth(2).unwrap().parse().unwrap())
        .collect();
    assert_eq!(halves.len(), 2, "{head}");
    assert_eq!(halves[0] + halves[1], 2000);
    assert!(halves.iter().all(|&h| h > 800), "{halves:?}");
    assert_eq!(
        lines.next(),
        Some("truth,m,pilot,s,b,se,k1,se1,k0,se0,tA,mA,seA,k1A,se1A,tB,mB,seB,k1B,se1B")
    );
    let rows: Vec<Vec<f64>> = lines
        .map(|r| r.split(',').map(|v| v.parse().unwrap()).collect())
        .collect();
    assert_eq!(rows.len(), 121);
    let (na, nb) = (halves[0] as f64, halves[1] as f64);
    for r in &rows {
        assert_eq!(r.len(), 20);
        let mean = (na * r[10] + nb * r[15]) / (na + nb);
        assert!((mean - r[0]).abs() <= 1e-6 * r[0].abs() + 1e-15, "{r:?}");
        assert!(r[12] > 0.0 && r[17] > 0.0 && r[14] > 0.0 && r[19] > 0.0);
    }
}

/// `map sweep --coverage` (branch cover22, issue 22 item 2): after the
/// existing columns, each λ's and EM cover's live-cell coverage and the
/// published interval's (the pick's λ, λ = 1's for an EM pick), all cells
/// and live cells, then a tally of rows in [0.93, 0.97] per column. The
/// published all-cells number is the picked λ's own column.
#[test]
fn map_sweep_coverage_prints_live_cells_and_the_published_interval() {
    let out = small_coverage_sweep("coast", &[], &[]);
    assert!(out.status.success(), "{out:?}");
    let text = String::from_utf8(out.stdout).unwrap();
    let cells = |l: &str| -> Vec<String> {
        l.trim()
            .trim_matches('|')
            .split('|')
            .map(|c| c.trim().to_string())
            .collect()
    };
    let head = cells(text.lines().find(|l| l.starts_with("| n |")).unwrap());
    // Four more columns at the end since branch band22 (the published
    // interval over cells with m >= m* effective reports, the live cells
    // below m*, and the shares kept).
    // Three more since branch sparse24 (the split by m̂, the effective
    // reports read from the reports).
    assert_eq!(head.len(), 35, "{head:?}");
    assert_eq!(head[20], "λ=0.0 live");
    assert_eq!(head[27], "published (live)");
    assert_eq!(head[28], "published m>=m*");
    assert_eq!(head[33], "published m̂>=m* (cells)");
    assert_eq!(head[34], "live m̂<m* (cells)");
    let row = cells(text.lines().find(|l| l.starts_with("| 2000 |")).unwrap());
    assert_eq!(row.len(), 35, "{row:?}");
    let num = |c: &str| -> f64 { c.split_whitespace().next().unwrap().parse().unwrap() };
    let pick = &row[19];
    let col = if pick == "a-priori em" {
        5
    } else {
        let lam: f64 = pick.trim_start_matches("a-priori λ=").parse().unwrap();
        (lam * 5.0).round() as usize
    };
    // The published interval is the picked λ's (λ = 1's for EM): the
    // same all-cells and live-cells coverage as that λ's columns.
    assert_eq!(num(&row[27]), num(&row[2 + 2 * col]), "{row:?}");
    let live: f64 = row[27].split(['(', ')']).nth(1).unwrap().parse().unwrap();
    assert_eq!(live, num(&row[20 + col]), "{row:?}");
    let tally: Vec<&str> = text.lines().filter(|l| l.starts_with("# tally")).collect();
    assert_eq!(tally.len(), 10, "{tally:?}");
    assert!(tally[7].starts_with("# tally published: rows in [0.93, 0.97]: all cells "));
    assert!(tally[8].starts_with("# tally published, cells with m >= m* = ln 20"));
    assert!(tally[9].starts_with("# tally published, cells with m̂ >= m*"));
    assert!(tally[..9].iter().all(|l| l.ends_with(" of 1")), "{tally:?}");
    assert!(tally[9].contains(" of 1;"), "{tally:?}");
    assert_eq!(
        text.lines()
            .filter(|l| l.starts_with("#   n 2000 εh 1 r 0 pick "))
            .count(),
        1
    );
}
