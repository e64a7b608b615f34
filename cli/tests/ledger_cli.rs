//! `geopriv privatize --ledger` from several processes at once, and the
//! ledger's units under --latlon (issue 19 items 1 and 6).

mod common;
use common::spawn;
use std::process::Child;

fn temp_dir(name: &str) -> std::path::PathBuf {
    let dir = std::env::temp_dir().join(format!("geopriv-cli-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// The `releases` and `spent_epsilon` fields of a ledger file.
fn ledger_totals(path: &std::path::Path) -> (u64, f64) {
    let v: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    (
        v["releases"].as_u64().unwrap(),
        v["spent_epsilon"].as_f64().unwrap(),
    )
}

fn threshold_args<'a>(ledger: &'a str, epsilon: &'a str, budget: &'a str) -> Vec<&'a str> {
    vec![
        "privatize",
        "threshold",
        "--threshold",
        "100",
        "--width",
        "20",
        "--mechanism",
        "polyplace",
        "--epsilon",
        epsilon,
        "--unit",
        "per-dollar",
        "--ledger",
        ledger,
        "--budget-epsilon",
        budget,
    ]
}

#[test]
fn concurrent_cli_processes_release_exactly_what_the_ledger_records() {
    let dir = temp_dir("concurrent-ledger");
    let path = dir.join("device.json");
    let ledger = path.to_str().unwrap();
    // 6 processes x 50 lines at 1e-3 into 0.25: 250 fit, 50 are refused.
    let lines = "95\n".repeat(50).into_bytes();
    let children: Vec<Child> = (0..6)
        .map(|_| spawn(&threshold_args(ledger, "1e-3", "0.25"), lines.clone()))
        .collect();
    let mut released = 0u64;
    for c in children {
        let out = c.wait_with_output().unwrap();
        let stderr = String::from_utf8(out.stderr).unwrap();
        assert!(
            !stderr.contains("EOF") && !stderr.contains("changed under"),
            "{stderr}"
        );
        released += String::from_utf8(out.stdout).unwrap().lines().count() as u64;
    }
    let (recorded, spent) = ledger_totals(&path);
    assert_eq!(released, recorded);
    assert_eq!(
        released, 250,
        "the exact accounting fits 250 x 1e-3 into 0.25"
    );
    assert!(spent <= 0.25 * (1.0 + 1e-15), "{spent}");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn two_cli_processes_at_different_epsilons_release_only_what_is_charged() {
    let dir = temp_dir("two-eps-ledger");
    for trial in 0..6 {
        let path = dir.join(format!("device{trial}.json"));
        let ledger = path.to_str().unwrap();
        let big = spawn(&threshold_args(ledger, "0.1", "0.1"), b"95\n".to_vec());
        let small = spawn(&threshold_args(ledger, "1e-4", "0.1"), b"95\n".to_vec());
        let count = |c: Child| {
            let out = c.wait_with_output().unwrap();
            String::from_utf8(out.stdout).unwrap().lines().count() as u64
        };
        let (b, s) = (count(big), count(small));
        assert_eq!(b + s, 1, "trial {trial}");
        let (recorded, spent) = ledger_totals(&path);
        assert_eq!(recorded, 1);
        assert_eq!(spent, if b == 1 { 0.1 } else { 1e-4 }, "trial {trial}");
    }
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn latlon_units_keep_mercator_and_ground_metres_apart() {
    let dir = temp_dir("latlon-units");
    let path = dir.join("device.json");
    let ledger = path.to_str().unwrap();
    let run = |projection: &str, unit: Option<&str>| {
        let mut args = vec![
            "privatize",
            "kde",
            "--center",
            "0,0",
            "--bandwidth",
            "1000",
            "--mechanism",
            "polyplace",
            "--epsilon",
            "4e-4",
            "--latlon",
            "--projection",
            projection,
            "--ledger",
            ledger,
            "--budget-epsilon",
            "1e-2",
        ];
        if let Some(u) = unit {
            args.extend(["--unit", u]);
        }
        spawn(&args, b"70,0\n".to_vec()).wait_with_output().unwrap()
    };
    let first = run("mercator", None);
    assert!(first.status.success(), "{first:?}");
    let text = std::fs::read_to_string(&path).unwrap();
    assert!(text.contains("\"unit\":\"per-mercator-metre\""), "{text}");
    // Ground metres (local projection) cannot be charged to that ledger.
    let local = run("local:70,0", None);
    assert!(!local.status.success());
    assert!(local.stdout.is_empty());
    assert!(String::from_utf8(local.stderr).unwrap().contains("unit"));
    // Nor can Mercator metres be declared ground metres.
    let lie = run("mercator", Some("per-metre"));
    assert!(!lie.status.success());
    assert!(lie.stdout.is_empty());
    assert_eq!(ledger_totals(&path).0, 1);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_periodic_budget_from_the_command_line() {
    let dir = temp_dir("periodic-ledger");
    let path = dir.join("device.json");
    let ledger = path.to_str().unwrap();
    let mut args = threshold_args(ledger, "2e-4", "0.05");
    args.extend(["--period-seconds", "86400", "--period-epsilon", "4e-4"]);
    let out = spawn(&args, b"95\n96\n97\n".to_vec())
        .wait_with_output()
        .unwrap();
    // Two releases today; the third is refused by the day's limit.
    assert_eq!(String::from_utf8(out.stdout).unwrap().lines().count(), 2);
    assert!(String::from_utf8(out.stderr)
        .unwrap()
        .contains("budget exceeded"));
    let text = std::fs::read_to_string(&path).unwrap();
    assert!(text.contains("\"period_seconds\":86400"), "{text}");
    let _ = std::fs::remove_dir_all(&dir);
}

/// An executable script `name` in `dir`, holding `body`.
fn executable(dir: &std::path::Path, name: &str, body: &str) -> std::path::PathBuf {
    use std::os::unix::fs::PermissionsExt;
    let prog = dir.join(name);
    std::fs::write(&prog, body).unwrap();
    std::fs::set_permissions(&prog, std::fs::Permissions::from_mode(0o755)).unwrap();
    prog
}

/// A counter program's script (a stand-in for a TPM wrapper) whose value
/// lives in `count` beside it: `prelude` runs first, then `read` or
/// `advance` ([`READ_COUNT`], [`ADVANCE_COUNT`] for an honest counter).
fn counter_script(prelude: &str, read: &str, advance: &str) -> String {
    format!(
        "#!/bin/sh\nd=\"$(dirname \"$0\")\"\n{prelude}cur=\"$(cat \"$d/count\" 2>/dev/null || echo 0)\"\n\
         case \"$1\" in\n  read) {read} ;;\n  advance-to) {advance} ;;\n  *) exit 2 ;;\nesac\n"
    )
}

/// An honest counter's `read`: print the count.
const READ_COUNT: &str = r#"echo "$cur""#;
/// An honest counter's `advance-to N`: raise the count to N, never lower it.
const ADVANCE_COUNT: &str = r#"if [ "$2" -gt "$cur" ]; then echo "$2" > "$d/count"; fi"#;

/// The threshold release of [`threshold_args`] with `--counter-command
/// prog` and `extra` flags.
fn counter_args<'a>(ledger: &'a str, prog: &'a std::path::Path, extra: &[&'a str]) -> Vec<&'a str> {
    let mut args = threshold_args(ledger, "1e-3", "0.25");
    args.extend(["--counter-command", prog.to_str().unwrap()]);
    args.extend(extra);
    args
}

/// A counter program the test controls: the value lives in `count`
/// beside it; with a file `fail` there it fails.
fn counter_program(dir: &std::path::Path) -> std::path::PathBuf {
    let prelude = "if [ -e \"$d/fail\" ]; then echo \"tpm busy\" >&2; exit 1; fi\n";
    executable(
        dir,
        "counter.sh",
        &counter_script(prelude, READ_COUNT, ADVANCE_COUNT),
    )
}

/// The release of `args`, which must succeed (else its stderr is shown).
fn geopriv_ok(args: &[&str], stdin: &[u8]) {
    let out = common::geopriv(args, stdin);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// The value a test counter program keeps in `count` in `dir` ("" before
/// its first advance).
fn count_in(dir: &std::path::Path) -> String {
    let text = std::fs::read_to_string(dir.join("count")).unwrap_or_default();
    text.trim().to_string()
}

/// `--counter-command`: the rollback of tests/ledger_attacks.rs
/// `a_writer_without_the_counter_cannot_refill_a_rolled_back_count` through
/// the CLI: the counter advances with the charges, a rolled-back file is
/// refused with the counter and cannot be charged without it, a deleted
/// file is not recreated, and a failing counter is exit 3 with its message.
#[test]
fn counter_command_binds_the_ledger_to_the_counter() {
    let dir = temp_dir("counter-command");
    let path = dir.join("device.json");
    let ledger = path.to_str().unwrap();
    let prog = counter_program(&dir);
    let with_counter = counter_args(ledger, &prog, &[]);

    geopriv_ok(&with_counter, b"95\n");
    assert_eq!(count_in(&dir), "1");
    assert!(std::fs::read_to_string(&path)
        .unwrap()
        .contains("\"counter_bound\":true"));
    let backup = std::fs::read_to_string(&path).unwrap();
    geopriv_ok(&with_counter, b"95\n95\n");
    assert_eq!((ledger_totals(&path).0, count_in(&dir)), (3, "3".into()));

    std::fs::write(&path, &backup).unwrap(); // the rollback
    let without = threshold_args(ledger, "1e-3", "0.25");
    let out = common::geopriv(&without, b"95\n");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(3), "{stderr}");
    assert!(stderr.contains("monotonic counter"), "{stderr}");
    assert!(out.stdout.is_empty());
    let out = common::geopriv(&with_counter, b"95\n");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(3), "{stderr}");
    assert!(stderr.contains("counter says 3"), "{stderr}");
    assert_eq!(ledger_totals(&path).0, 1, "charged a rolled-back file");

    std::fs::remove_file(&path).unwrap(); // deleted
    let out = common::geopriv(&with_counter, b"95\n");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(3), "{stderr}");
    assert!(stderr.contains("deleted"), "{stderr}");
    assert!(!path.exists(), "a fresh budget was created");

    std::fs::write(dir.join("count"), "0\n").unwrap();
    std::fs::write(dir.join("fail"), "").unwrap();
    let out = common::geopriv(&with_counter, b"95\n");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(3), "{stderr}");
    assert!(stderr.contains("tpm busy"), "{stderr}");
    assert!(out.stdout.is_empty());
    let _ = std::fs::remove_dir_all(&dir);
}

/// tidy14: a counter program whose `advance-to` exits 0 without advancing
/// (here: once a file `stuck` is beside it) was believed by the CLI (only
/// the bindings read the counter back): the second release was printed,
/// the counter stayed at 1, and the file restored to its first charge was
/// then accepted and charged: a charge lost. The core reads every advance
/// back: the release fails (exit 3, nothing printed; the charge is on
/// file), so a rollback to before it loses no released value.
#[test]
fn a_counter_program_that_does_not_advance_is_caught() {
    let dir = temp_dir("counter-stuck");
    let path = dir.join("device.json");
    let ledger = path.to_str().unwrap();
    let advance = format!("if [ -e \"$d/stuck\" ]; then exit 0; fi; {ADVANCE_COUNT}");
    let prog = executable(
        &dir,
        "counter.sh",
        &counter_script("", READ_COUNT, &advance),
    );
    let with_counter = counter_args(ledger, &prog, &[]);

    geopriv_ok(&with_counter, b"95\n");
    assert_eq!(count_in(&dir), "1");
    let backup = std::fs::read_to_string(&path).unwrap();

    std::fs::write(dir.join("stuck"), "").unwrap();
    let out = common::geopriv(&with_counter, b"95\n");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(3), "{stderr}");
    assert!(stderr.contains("did not advance"), "{stderr}");
    assert!(out.stdout.is_empty(), "released with the counter unmoved");
    assert_eq!((ledger_totals(&path).0, count_in(&dir)), (2, "1".into()));

    std::fs::remove_file(dir.join("stuck")).unwrap();
    std::fs::write(&path, &backup).unwrap(); // the rollback
    let out = common::geopriv(&with_counter, b"95\n");
    let stderr = String::from_utf8_lossy(&out.stderr);
    // The counter (1) cannot tell the restored file (1) from the one it
    // replaced: it is accepted, but the charge it drops released nothing,
    // so the values released never exceed the charges the file records
    // (before the fix: 3 released, 2 recorded).
    let released = 1 + u64::from(!out.stdout.is_empty());
    assert!(
        released <= ledger_totals(&path).0,
        "{released} released, the file records {}: {stderr}",
        ledger_totals(&path).0
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// attack10 O2: with `--ledger`, a failing stdout stops the run after the
/// first report that could not be written: one release charged and lost,
/// not every line in the output buffer (5 of 5 to /dev/full before). (A
/// pipe whose reader quits also loses what its buffer held when it quit;
/// not tested here: how much that is depends on timing.)
#[test]
fn a_failing_output_stops_the_charges_at_the_first_lost_report() {
    use std::process::{Command, Stdio};
    let dir = temp_dir("failing-output");
    let path = dir.join("device.json");
    let ledger = path.to_str().unwrap();
    let args = threshold_args(ledger, "1e-3", "1");
    // A full device: the first report's write fails (skipped where there
    // is no /dev/full).
    if let Ok(full) = std::fs::OpenOptions::new().write(true).open("/dev/full") {
        let mut child = Command::new(env!("CARGO_BIN_EXE_geopriv"))
            .args(&args)
            .stdin(Stdio::piped())
            .stdout(full)
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let mut stdin = child.stdin.take().unwrap();
        std::io::Write::write_all(&mut stdin, "95\n".repeat(5).as_bytes()).unwrap();
        drop(stdin);
        let out = child.wait_with_output().unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{stderr}");
        assert_eq!(ledger_totals(&path).0, 1, "{stderr}");
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// `--counter-command` output is bounded (attack12, docs/ATTACK-12.md O1):
/// a `read` that prints more than 4096 bytes is refused without keeping it
/// (200 MB printed took 203 MB of memory before, refused only as "not a
/// count"); an `advance-to` that prints a lot is fine, its output dropped.
#[test]
fn counter_command_output_is_bounded() {
    let dir = temp_dir("counter-output");
    let path = dir.join("device.json");
    let ledger = path.to_str().unwrap();
    let read =
        r#"if [ -e "$d/flood" ]; then head -c 1000000 /dev/zero | tr '\0' 1; else echo "$cur"; fi"#;
    let advance = format!("head -c 1000000 /dev/zero; {ADVANCE_COUNT}");
    let prog = executable(&dir, "chatty.sh", &counter_script("", read, &advance));
    let args = counter_args(ledger, &prog, &[]);

    let out = common::geopriv(&args, b"95\n95\n");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    assert_eq!(ledger_totals(&path).0, 2);
    assert_eq!(
        std::fs::read_to_string(dir.join("count")).unwrap().trim(),
        "2"
    );

    std::fs::write(dir.join("flood"), "").unwrap();
    let out = common::geopriv(&args, b"95\n");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(3), "{stderr}");
    assert!(stderr.contains("more than 4096 bytes"), "{stderr}");
    assert!(out.stdout.is_empty());
    assert_eq!(ledger_totals(&path).0, 2);
    let _ = std::fs::remove_dir_all(&dir);
}

/// attack12 O1: a `--counter-command` program that hangs, or that exits
/// but leaves a background child holding its stdout, held the release
/// (and the ledger's lock) for as long as it hung. Now each run must
/// finish within `--counter-timeout` seconds: the program is killed and
/// nothing is released or charged. (Without the timeout this test does
/// not return for 30 s per case.)
#[test]
fn a_counter_program_that_hangs_is_killed_at_the_timeout() {
    let dir = temp_dir("counter-hang");
    let path = dir.join("device.json");
    let ledger = path.to_str().unwrap();
    for (name, body) in [
        ("hang.sh", "#!/bin/sh\nexec sleep 30\n"),
        ("leaves-a-child.sh", "#!/bin/sh\n(sleep 30 &)\necho 0\n"),
    ] {
        let prog = executable(&dir, name, body);
        let args = counter_args(ledger, &prog, &["--counter-timeout", "0.3"]);
        let out = common::geopriv(&args, b"95\n");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(3), "{name}: {stderr}");
        assert!(stderr.contains("did not finish within"), "{name}: {stderr}");
        assert!(out.stdout.is_empty(), "{name}");
        assert!(!path.exists() || ledger_totals(&path).0 == 0, "{name}");
    }
    // attack13 O4: a timeout below 1 ms is refused as a flag (it was
    // accepted and reported as "0 s").
    let prog = executable(
        &dir,
        "counter.sh",
        &counter_script("", READ_COUNT, ADVANCE_COUNT),
    );
    let out = common::geopriv(
        &counter_args(ledger, &prog, &["--counter-timeout", "1e-300"]),
        b"95\n",
    );
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("too short"), "{stderr}");
    let _ = std::fs::remove_dir_all(&dir);
}

/// attack13 F1 (docs/ATTACK-13.md): a `--counter-command` program that
/// works (exits 0, closes its stdout) but leaves a child holding its
/// stderr, as one that starts a daemon does. Its stderr was awaited until
/// the timeout on every run, success or not: each of the release's five
/// counter runs took the whole `--counter-timeout` (50 s for one report at
/// the default 10 s, the ledger locked meanwhile) and then succeeded. A
/// success does not need stderr: the release takes no longer than the
/// program does.
#[test]
fn a_counter_program_leaving_its_stderr_open_does_not_wait_for_the_timeout() {
    let dir = temp_dir("counter-stderr-open");
    let path = dir.join("device.json");
    let ledger = path.to_str().unwrap();
    let prelude = "(sleep 20) >/dev/null </dev/null &\n";
    let script = counter_script(prelude, READ_COUNT, ADVANCE_COUNT);
    let prog = executable(&dir, "daemon.sh", &script);
    let args = counter_args(ledger, &prog, &["--counter-timeout", "8"]);
    let start = std::time::Instant::now();
    let out = common::geopriv(&args, b"95\n");
    let took = start.elapsed();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    assert_eq!(ledger_totals(&path).0, 1);
    assert_eq!(
        std::fs::read_to_string(dir.join("count")).unwrap().trim(),
        "1"
    );
    assert!(
        took < std::time::Duration::from_secs(6),
        "one release took {took:?}: the counter's stderr, held by its child, was awaited until the timeout"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// docs/ATTACK-15.md O1 (fixed by the lead): a report queued by
/// `privatize --outbox` whose counter advance failed must not leave before
/// the counter counts it. `outbox list` (whose output may be sent on) and
/// `outbox upload` hand the outbox out only through the counter: without
/// `--counter-command` a bound ledger is refused; with a counter that still
/// fails, nothing is printed; once it works, it is first advanced to the
/// file, then the report is printed, and a rollback of the file to before
/// the charge is refused.
#[test]
fn a_queued_report_leaves_the_outbox_only_once_the_counter_counts_it() {
    let dir = temp_dir("outbox-counter-behind");
    let path = dir.join("device.json");
    let ledger = path.to_str().unwrap();
    // A counter whose advance beyond its value fails (after the write)
    // while `fail` exists (the binding's probe at the same value works).
    let advance = format!(
        "if [ -e \"$d/fail\" ] && [ \"$2\" -gt \"$cur\" ]; then echo \"tpm busy\" >&2; exit 1; fi; {ADVANCE_COUNT}"
    );
    let prog = executable(
        &dir,
        "counter.sh",
        &counter_script("", READ_COUNT, &advance),
    );
    geopriv_ok(&counter_args(ledger, &prog, &[]), b"95\n");
    let before = std::fs::read(&path).unwrap();
    std::fs::write(dir.join("fail"), "").unwrap();
    let out = common::geopriv(&counter_args(ledger, &prog, &["--outbox"]), b"96\n");
    assert_eq!(out.status.code(), Some(3));
    assert!(String::from_utf8_lossy(&out.stderr).contains("charged and queued"));
    assert_eq!(count_in(&dir), "1");
    let list = |counter: bool| {
        let mut args = vec![
            "outbox",
            "list",
            "--ledger",
            ledger,
            "--unit",
            "per-dollar",
            "--budget-epsilon",
            "0.25",
        ];
        if counter {
            args.extend(["--counter-command", prog.to_str().unwrap()]);
        }
        common::geopriv(&args, b"")
    };
    let counterless = list(false);
    assert_eq!(counterless.status.code(), Some(2));
    assert!(counterless.stdout.is_empty());
    assert!(String::from_utf8_lossy(&counterless.stderr)
        .contains("bound to a platform monotonic counter"));
    let failing = list(true);
    assert_eq!(failing.status.code(), Some(2));
    assert!(failing.stdout.is_empty());
    std::fs::remove_file(dir.join("fail")).unwrap();
    let listed = list(true);
    assert!(
        listed.status.success(),
        "{}",
        String::from_utf8_lossy(&listed.stderr)
    );
    assert_eq!(String::from_utf8(listed.stdout).unwrap().lines().count(), 1);
    assert_eq!(count_in(&dir), "2");
    // The file from before the queued report's charge is now refused.
    std::fs::write(&path, &before).unwrap();
    let rolled_back = common::geopriv(&counter_args(ledger, &prog, &[]), b"97\n");
    assert!(!rolled_back.status.success());
    assert!(rolled_back.stdout.is_empty());
    let _ = std::fs::remove_dir_all(&dir);
}
