//! What the CLI integration tests share: running the built `geopriv`
//! binary as a pipeline would.
#![allow(dead_code)] // each test file uses a part

use std::ffi::OsStr;
use std::io::Write;
use std::process::{Child, Command, Output, Stdio};

/// Starts `geopriv args...` with `stdin` fed from another thread (the child
/// may fill its stdout pipe before it has read all of its input, or exit
/// early on bad flags and close its stdin).
pub fn spawn(args: &[&str], stdin: Vec<u8>) -> Child {
    let mut child = Command::new(env!("CARGO_BIN_EXE_geopriv"))
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("the geopriv binary runs");
    let mut pipe = child.stdin.take().unwrap();
    std::thread::spawn(move || {
        let _ = pipe.write_all(&stdin);
    });
    child
}

/// Runs `geopriv args...` on `stdin` to completion.
pub fn geopriv(args: &[&str], stdin: &[u8]) -> Output {
    spawn(args, stdin.to_vec()).wait_with_output().unwrap()
}

/// The flags of a one-query threshold release every ledger test uses:
/// `privatize threshold --threshold 100000 --width 20000 --mechanism
/// polyplace --epsilon 1e-4` (more flags may be appended).
pub fn threshold_release_args() -> Vec<&'static str> {
    vec![
        "privatize",
        "threshold",
        "--threshold",
        "100000",
        "--width",
        "20000",
        "--mechanism",
        "polyplace",
        "--epsilon",
        "1e-4",
    ]
}

/// `map sweep --coverage` of `population` on an 11 × 11 grid, 2,000
/// devices, εh 1, one draw, with the environment `envs` (the sweep's
/// dump switches) and `extra` flags appended.
pub fn small_coverage_sweep(population: &str, extra: &[&str], envs: &[(&str, &OsStr)]) -> Output {
    let mut args = vec![
        "map",
        "sweep",
        "--coverage",
        "--population",
        population,
        "--grid",
        "11",
        "--n",
        "2000",
        "--eps-h",
        "1",
        "--reps",
        "1",
    ];
    args.extend_from_slice(extra);
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_geopriv"));
    cmd.args(&args);
    for (k, v) in envs {
        cmd.env(k, v);
    }
    cmd.output().unwrap()
}

/// `geopriv map release --grid 11 --epsilon EPS --seed SEED` of
/// `locations` (`x,y` lines over the default 20 km box), which must
/// succeed: its stdout, one report line per device.
pub fn map_release_11(locations: &str, epsilon: &str, seed: &str) -> Vec<u8> {
    let out = geopriv(
        &[
            "map",
            "release",
            "--grid",
            "11",
            "--epsilon",
            epsilon,
            "--seed",
            seed,
        ],
        locations.as_bytes(),
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    out.stdout
}
