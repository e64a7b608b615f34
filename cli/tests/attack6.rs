//! Fresh-eyes attack (attack6, docs/ATTACK-6.md): `geopriv map aggregate
//! --threads` with an operator's huge count, the documented exit status of
//! a ledger that refuses at open, and the map sweep's arguments and
//! environment checked up front.

mod common;
use common::{geopriv, threshold_release_args};

/// A few map reports of the default set at εh 1 (one cell diagonal h).
fn map_reports() -> (String, Vec<u8>) {
    let h = (20_000.0f64 / 60.0).hypot(20_000.0 / 60.0);
    let eps = format!("{:?}", 1.0 / h);
    let out = geopriv(
        &["map", "release", "--epsilon", &eps, "--seed", "3"],
        b"5000,5000\n5000,5000\n12000,3000\n19999,0\n0,20000\n",
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    (eps, out.stdout)
}

/// `--threads 2^64 − 1` panicked (capacity overflow, exit 101) and
/// `--threads 100000` took 21 GB before it was killed: the workers are
/// capped (MAX_MAP_INGEST_THREADS) and the map is the one of `--threads 1`.
#[test]
fn map_aggregate_with_a_huge_thread_count_is_the_one_thread_map() {
    let (eps, reports) = map_reports();
    let run = |t: &str| {
        geopriv(
            &[
                "map",
                "aggregate",
                "--epsilon",
                &eps,
                "--lambda",
                "1",
                "--threads",
                t,
            ],
            &reports,
        )
    };
    let one = run("1");
    assert!(
        one.status.success(),
        "{}",
        String::from_utf8_lossy(&one.stderr)
    );
    for t in ["18446744073709551615", "100000"] {
        let out = run(t);
        assert_eq!(
            out.status.code(),
            Some(0),
            "--threads {t}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        assert_eq!(out.stdout, one.stdout, "--threads {t}");
    }
}

fn privatize(ledger: &std::path::Path, extra: &[&str]) -> std::process::Output {
    let mut args = threshold_release_args();
    args.extend_from_slice(&["--ledger", ledger.to_str().unwrap()]);
    args.extend_from_slice(extra);
    geopriv(&args, b"95000\n")
}

/// `geopriv --help`: "3 if the privacy ledger refused a release (budget
/// exhausted, or a ledger of another unit or policy)". A ledger of another
/// unit or total, or a corrupt one, exited 2 with "try '--help'" (a usage
/// error) because it is opened while the flags are read.
#[test]
fn a_ledger_refused_at_open_exits_3_not_2() {
    let dir = tempfile::tempdir().unwrap();
    let ledger = dir.path().join("device.json");
    let ok = privatize(
        &ledger,
        &["--unit", "per-dollar", "--budget-epsilon", "1e-3"],
    );
    assert_eq!(
        ok.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&ok.stderr)
    );
    for (what, extra) in [
        (
            "another total",
            &["--unit", "per-dollar", "--budget-epsilon", "2e-3"][..],
        ),
        (
            "another unit",
            &["--unit", "per-metre", "--budget-epsilon", "1e-3"][..],
        ),
    ] {
        let out = privatize(&ledger, extra);
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(3), "{what}: {err}");
        assert!(out.stdout.is_empty(), "{what}");
        assert!(!err.contains("--help"), "{what}: {err}");
    }
    std::fs::write(&ledger, b"").unwrap();
    let out = privatize(
        &ledger,
        &["--unit", "per-dollar", "--budget-epsilon", "1e-3"],
    );
    assert_eq!(
        out.status.code(),
        Some(3),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(out.stdout.is_empty());
    // The file stays as it was: refused, not reset.
    assert_eq!(std::fs::read(&ledger).unwrap(), b"");
    // A flag error is still 2.
    let out = privatize(&ledger, &["--unit", "per-dollar"]);
    assert_eq!(out.status.code(), Some(2));
}

/// The sweep's arguments were checked late or not at all: `--grid 0`
/// with --coverage ran a silent 2 x 2 grid, a malformed `--dump` (or one
/// naming an (n, εh) not swept) was never written without a word, an
/// out-of-range GEOPRIV_SWEEP_TARGET_FINE was ignored, and an empty
/// GEOPRIV_SWEEP_EM_DUMP wrote into the current directory. Each is now
/// refused before anything runs (exit 2, nothing on stdout).
#[test]
fn map_sweep_refuses_bad_arguments_up_front() {
    let base = ["map", "sweep", "--n", "1000", "--eps-h", "1"];
    let run = |extra: &[&str], env: &[(&str, &str)]| {
        let mut args: Vec<&str> = base.to_vec();
        if !extra.contains(&"--grid") {
            args.extend_from_slice(&["--grid", "11"]);
        }
        args.extend_from_slice(extra);
        let mut c = std::process::Command::new(env!("CARGO_BIN_EXE_geopriv"));
        c.args(&args)
            .stdin(std::process::Stdio::null())
            .env_remove("GEOPRIV_SWEEP_TARGET_FINE")
            .env_remove("GEOPRIV_SWEEP_EM_DUMP");
        for (k, v) in env {
            c.env(k, v);
        }
        c.output().unwrap()
    };
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("f");
    std::fs::write(&file, b"x").unwrap();
    let dump = format!("999:1:{}", dir.path().join("d.jsonl").display());
    type Case<'a> = (&'a str, Vec<&'a str>, Vec<(&'a str, &'a str)>);
    let cases: Vec<Case> = vec![
        ("grid 0", vec!["--coverage", "--grid", "0"], vec![]),
        ("grid 1", vec!["--coverage", "--grid", "1"], vec![]),
        ("dump spec", vec!["--dump", "x"], vec![]),
        ("dump n", vec!["--dump", &dump], vec![]),
        (
            "fine 0",
            vec!["--coverage"],
            vec![("GEOPRIV_SWEEP_TARGET_FINE", "0")],
        ),
        (
            "fine 65",
            vec!["--coverage"],
            vec![("GEOPRIV_SWEEP_TARGET_FINE", "65")],
        ),
        (
            "fine abc",
            vec!["--coverage"],
            vec![("GEOPRIV_SWEEP_TARGET_FINE", "abc")],
        ),
        (
            "dump empty",
            vec!["--coverage"],
            vec![("GEOPRIV_SWEEP_EM_DUMP", "")],
        ),
        (
            "dump file",
            vec!["--coverage"],
            vec![("GEOPRIV_SWEEP_EM_DUMP", file.to_str().unwrap())],
        ),
    ];
    for (what, extra, env) in cases {
        let out = run(&extra, &env);
        assert_eq!(
            out.status.code(),
            Some(2),
            "{what}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        assert!(out.stdout.is_empty(), "{what}");
    }
}
