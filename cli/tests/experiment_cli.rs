//! End-to-end: `geopriv experiment ...` with tiny settings writes its table
//! and plots.
use std::process::Command;

fn geopriv(args: &[&str]) -> String {
    let out = Command::new(env!("CARGO_BIN_EXE_geopriv"))
        .args(args)
        .output()
        .expect("run geopriv");
    assert!(
        out.status.success(),
        "geopriv {args:?} failed:\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

fn is_png(path: &std::path::Path) -> bool {
    let bytes = std::fs::read(path).unwrap();
    bytes.len() > 1000 && bytes.starts_with(b"\x89PNG\r\n\x1a\n")
}

#[test]
fn threshold_writes_table_and_plots() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("threshold");
    let stdout = geopriv(&[
        "experiment",
        "threshold",
        "--n",
        "500,1000",
        "--epsilon",
        "1/800,1/12000",
        "--reps",
        "2",
        "--thresholds",
        "100k,1M",
        "--threads",
        "2",
        "--out",
        out.to_str().unwrap(),
    ]);
    let table = std::fs::read_to_string(out.join("results.md")).unwrap();
    for label in [
        "PolyPlace",
        "Student's t (ν=3)",
        "Gen Cauchy (k=4)",
        "Laplace (ε,δ)-GP",
        "Global Laplace",
        "Noise a priori",
        "Local DP",
        "Non-private",
        "PolyPlace / t",
        "T = $100k",
        "T = $1M",
        "| 1000 | 1/800 |",
    ] {
        assert!(table.contains(label), "{label} missing from\n{table}");
    }
    for png in ["error_vs_n.png", "error_vs_epsilon.png"] {
        let p = out.join(png);
        assert!(is_png(&p), "{}", p.display());
        assert!(stdout.contains(png), "{stdout}");
    }
}

#[test]
fn same_seed_same_table_whatever_the_thread_count() {
    let dir = tempfile::tempdir().unwrap();
    let run = |threads: &str, name: &str| {
        let out = dir.path().join(name);
        geopriv(&[
            "experiment",
            "two-way",
            "--n",
            "300",
            "--epsilon",
            "1/12000",
            "--grid",
            "3",
            "--reps",
            "1",
            "--mechanisms",
            "polyplace,a-priori",
            "--threads",
            threads,
            "--no-plots",
            "--out",
            out.to_str().unwrap(),
        ]);
        let t = std::fs::read_to_string(out.join("results.md")).unwrap();
        // Drop the timing line.
        t.lines()
            .filter(|l| !l.contains("computed in"))
            .collect::<Vec<_>>()
            .join("\n")
    };
    // Each test binary process sets its pool once, so compare two processes.
    assert_eq!(run("1", "a"), run("2", "b"));
}

#[test]
fn kde_on_the_bundled_airports_writes_heat_maps() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("kde");
    geopriv(&[
        "experiment",
        "kde",
        "--per-query-paper",
        "--n",
        "300",
        "--epsilon",
        "1e-5,1e-4",
        "--grid",
        "6",
        "--mechanisms",
        "polyplace,global-laplace,a-priori",
        "--out",
        out.to_str().unwrap(),
    ]);
    let table = std::fs::read_to_string(out.join("results.md")).unwrap();
    assert!(table.contains("airports") && table.contains("PolyPlace"));
    // Labelled with its true per-device cost: 36 cells at ε each.
    assert!(table.contains("36ε = 3.600e-4"), "{table}");
    for png in [
        "error_vs_epsilon.png",
        "heatmap_eps_1_100000.png",
        "heatmap_eps_1_10000.png",
    ] {
        assert!(is_png(&out.join(png)), "{png}");
    }
}

#[test]
fn kde_at_equal_per_device_epsilon_prints_the_total_and_the_pick() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("kde-equal");
    geopriv(&[
        "experiment",
        "kde",
        "--dataset",
        "airports",
        "--n",
        "200",
        "--eps-h",
        "10",
        "--grid",
        "5",
        "--map-bins",
        "64",
        "--threads",
        "2",
        "--out",
        out.to_str().unwrap(),
    ]);
    let table = std::fs::read_to_string(out.join("results.md")).unwrap();
    assert!(table.contains("per-device total ε"), "{table}");
    assert!(
        table.contains("**"),
        "the planner's pick is marked: {table}"
    );
    for row in ["PolyPlace at ε/m", "vector Laplace", "a priori, debiased"] {
        assert!(table.contains(row), "{row}");
    }
    let pngs: Vec<_> = std::fs::read_dir(&out)
        .unwrap()
        .filter_map(|e| e.ok())
        .filter(|e| {
            e.file_name()
                .to_string_lossy()
                .starts_with("heatmap_airports_eps_")
        })
        .collect();
    assert_eq!(pngs.len(), 1);
    assert!(is_png(&pngs[0].path()));
}

#[test]
fn longitudinal_writes_csv_table_and_plots() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("longitudinal");
    geopriv(&[
        "experiment",
        "longitudinal",
        "--n",
        "3000",
        "--periods",
        "60",
        "--threads",
        "2",
        "--out",
        out.to_str().unwrap(),
    ]);
    let csv = std::fs::read_to_string(out.join("results.csv")).unwrap();
    let mut lines = csv.lines();
    assert_eq!(
        lines.next(),
        Some("strategy,population,lifetime_epsilon_mean,lifetime_epsilon_max,daily_rmse")
    );
    let rows: Vec<Vec<&str>> = lines.map(|l| l.split(',').collect()).collect();
    assert_eq!(rows.len(), 16);
    for r in &rows {
        // Every strategy stays within the lifetime budget: ε·W = 3 with
        // W = 20k (incomes) or h = 1 km.
        let scale = if r[1] == "incomes" { 20_000.0 } else { 1_000.0 };
        let max: f64 = r[3].parse().unwrap();
        assert!(max * scale <= 3.0 * (1.0 + 1e-9), "{r:?}");
        assert!(r[4].parse::<f64>().unwrap().is_finite());
    }
    let table = std::fs::read_to_string(out.join("results.md")).unwrap();
    assert!(table.contains("Must hold") && table.contains("memo+instantaneous"));
    for pop in ["incomes", "static", "commuters", "movers"] {
        assert!(is_png(&out.join(format!("burn_{pop}.png"))));
        assert!(is_png(&out.join(format!("daily_{pop}.png"))));
    }
}
