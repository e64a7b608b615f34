//! `geopriv sensitivity region` and `geopriv privatize region` on a
//! GeoJSON file, run as a user would run them.

use geo::polygon;
use geopriv::{Growth, Query, RegionQuery};
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
    let mut pipe = child.stdin.take().unwrap();
    let data = stdin.to_vec();
    let feeder = std::thread::spawn(move || pipe.write_all(&data));
    let output = child.wait_with_output().unwrap();
    let _ = feeder.join();
    output
}

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
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(String::from_utf8(out.stdout).unwrap().lines().count(), 1);
}
