//! End-to-end tests of `geopriv sensitivity`: the built binary is run on
//! stdin/stdout like a pipeline would.

use geopriv::{Growth, Query, SoftInterval, SoftThreshold, TwoWayThreshold};
mod common;

/// `geopriv args...` with text on stdin.
fn geopriv(args: &[&str], input: &str) -> std::process::Output {
    common::geopriv(args, input.as_bytes())
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8(bytes.to_vec()).unwrap()
}

/// Deterministic pseudo-random numbers in [0, 1) (xorshift64*).
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> f64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        (self.0.wrapping_mul(0x2545_f491_4f6c_dd1d) >> 11) as f64 / (1u64 << 53) as f64
    }
}

/// Every output line must be `value,L,S` with each number parsing back to
/// exactly the library's f64 at the same point.
fn assert_exact(query: &dyn Query, growth: Growth, points: &[Vec<f64>], stdout: &str) {
    let lines: Vec<&str> = stdout.lines().collect();
    assert_eq!(lines.len(), points.len());
    for (line, x) in lines.iter().zip(points) {
        let got: Vec<f64> = line.split(',').map(|s| s.parse().unwrap()).collect();
        let want = [
            query.value(x).unwrap(),
            query.pointwise_lipschitz(x).unwrap(),
            query.smooth_sensitivity(x, growth).unwrap(),
        ];
        assert_eq!(got.len(), 3, "{line}");
        for (g, w) in got.iter().zip(want) {
            assert_eq!(g.to_bits(), w.to_bits(), "{line} at {x:?}: {g} != {w}");
        }
    }
}

#[test]
fn printed_numbers_round_trip_exactly() {
    let mut rng = Rng(0x5eed_1234_abcd_0001);
    // Threshold, exponential growth: points across the ramp and far away,
    // written in several notations (and with surrounding whitespace).
    let q = SoftThreshold::new(100_000.0, 20_000.0).unwrap();
    let g = Growth::exponential(3e-5).unwrap();
    let points: Vec<Vec<f64>> = (0..2000)
        .map(|i| {
            let u = rng.next();
            vec![match i % 3 {
                0 => 80_000.0 + 40_000.0 * u,
                1 => 1e7 * (u - 0.5),
                _ => 100_000.0 + 1e-3 * (u - 0.5),
            }]
        })
        .collect();
    let input: String = points
        .iter()
        .enumerate()
        .map(|(i, x)| match i % 3 {
            0 => format!("{}\n", x[0]),
            1 => format!("  {:e}\t\n", x[0]),
            _ => format!("{:?}\r\n", x[0]),
        })
        .collect();
    let out = geopriv(
        &[
            "sensitivity",
            "threshold",
            "--threshold",
            "100000",
            "--width",
            "20000",
            "--growth",
            "exp",
            "--gamma",
            "3e-5",
        ],
        &input,
    );
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert_eq!(text(&out.stderr), "");
    assert_exact(&q, g, &points, &text(&out.stdout));

    // Two-way threshold, linear growth, negative thresholds.
    let q = TwoWayThreshold::new(-3.5, 2.25, 0.75).unwrap();
    let g = Growth::linear(0.4).unwrap();
    let c0 = q.corner();
    let points: Vec<Vec<f64>> = (0..2000)
        .map(|_| {
            vec![
                c0[0] + 6.0 * (rng.next() - 0.7),
                c0[1] + 6.0 * (rng.next() - 0.7),
            ]
        })
        .collect();
    let input: String = points
        .iter()
        .map(|x| format!("{} , {}\n", x[0], x[1]))
        .collect();
    let out = geopriv(
        &[
            "sensitivity",
            "two-way",
            "--threshold",
            "-3.5,2.25",
            "--width",
            "0.75",
            "--growth",
            "linear",
            "--gamma",
            "0.4",
        ],
        &input,
    );
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert_exact(&q, g, &points, &text(&out.stdout));

    // Interval, no final newline.
    let q = SoftInterval::new(-1.0, 4.0, 2.0).unwrap();
    let g = Growth::exponential(0.3).unwrap();
    let points: Vec<Vec<f64>> = (0..500).map(|_| vec![12.0 * rng.next() - 4.5]).collect();
    let input: Vec<String> = points.iter().map(|x| x[0].to_string()).collect();
    let out = geopriv(
        &[
            "sensitivity",
            "interval",
            "--lower",
            "-1",
            "--upper",
            "4",
            "--width",
            "2",
            "--growth",
            "exp",
            "--gamma",
            "0.3",
        ],
        &input.join("\n"),
    );
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert_exact(&q, g, &points, &text(&out.stdout));
}

#[test]
fn malformed_lines_are_reported_and_the_rest_answered() {
    let input = "0.5\n1,2\n\n  \nabc\nnan\ninf\n-1e999\n3\n4\n";
    let out = geopriv(
        &[
            "sensitivity",
            "threshold",
            "--threshold",
            "0",
            "--width",
            "1",
            "--growth",
            "linear",
            "--gamma",
            "2",
        ],
        input,
    );
    assert_eq!(out.status.code(), Some(1));
    let stdout = text(&out.stdout);
    let stderr = text(&out.stderr);
    // Lines 1, 9 and 10 are good.
    let q = SoftThreshold::new(0.0, 1.0).unwrap();
    let g = Growth::linear(2.0).unwrap();
    assert_exact(&q, g, &[vec![0.5], vec![3.0], vec![4.0]], &stdout);
    let reported: Vec<&str> = stderr
        .lines()
        .map(|l| l.split(':').next().unwrap())
        .collect();
    assert_eq!(
        reported,
        ["line 2", "line 3", "line 4", "line 5", "line 6", "line 7", "line 8"],
        "{stderr}"
    );
    assert!(stderr.contains("line 2: expected 1"), "{stderr}");
    assert!(stderr.contains("line 3: empty line"), "{stderr}");
    assert!(stderr.contains("`abc` is not a number"), "{stderr}");
    assert!(stderr.contains("line 6: coordinate 1 is NaN"), "{stderr}");
    assert!(stderr.contains("line 8: coordinate 1 is -inf"), "{stderr}");
    assert!(!stderr.contains("panicked"));

    // Wrong dimension for the plane, in the middle of good lines.
    let out = geopriv(
        &[
            "sensitivity",
            "two-way",
            "--threshold",
            "0,0",
            "--width",
            "1",
            "--growth",
            "exp",
            "--gamma",
            "1",
        ],
        "1,1\n2\n3,3,3\n4,4\n",
    );
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(text(&out.stdout).lines().count(), 2);
    let stderr = text(&out.stderr);
    assert!(stderr.starts_with("line 2: expected 2"), "{stderr}");
    assert!(stderr.contains("line 3: expected 2"), "{stderr}");
}

#[test]
fn bad_flags_exit_with_status_2() {
    let cases: &[&[&str]] = &[
        &["threshold", "--threshold", "0", "--width", "0"],
        &["threshold", "--threshold", "0", "--width", "-1"],
        &["threshold", "--threshold", "NaN", "--width", "1"],
        &["threshold", "--threshold", "inf", "--width", "1"],
        &["threshold", "--threshold", "zero", "--width", "1"],
        &["threshold", "--width", "1"],
        &["interval", "--lower", "0", "--upper", "1", "--width", "2"],
        &["interval", "--lower", "1", "--upper", "0", "--width", "0.5"],
        &["two-way", "--threshold", "1", "--width", "1"],
        &["two-way", "--threshold", "1,2,3", "--width", "1"],
        &["two-way", "--threshold", "1,NaN", "--width", "1"],
        &["kde", "--center", "", "--bandwidth", "1"],
        &["kde", "--center", "0,0", "--bandwidth", "0"],
    ];
    let growth = ["--growth", "exp", "--gamma", "0.1"];
    for case in cases {
        let args: Vec<&str> = ["sensitivity"]
            .iter()
            .chain(case.iter())
            .chain(growth.iter())
            .copied()
            .collect();
        let out = geopriv(&args, "0\n");
        assert_eq!(out.status.code(), Some(2), "{args:?}");
        let stderr = text(&out.stderr);
        assert!(stderr.starts_with("error: "), "{args:?}: {stderr}");
        assert!(!stderr.contains("panicked"), "{args:?}: {stderr}");
        assert_eq!(text(&out.stdout), "", "{args:?}");
    }
    let base = [
        "sensitivity",
        "threshold",
        "--threshold",
        "0",
        "--width",
        "1",
    ];
    for growth in [
        &["--growth", "exp", "--gamma", "0"][..],
        &["--growth", "exp", "--gamma", "-0.5"],
        &["--growth", "exp", "--gamma", "NaN"],
        &["--growth", "linear", "--gamma", "inf"],
        &["--growth", "quadratic", "--gamma", "1"],
        &["--growth", "exp"],
        &["--gamma", "1"],
    ] {
        let args: Vec<&str> = base.iter().chain(growth.iter()).copied().collect();
        let out = geopriv(&args, "0\n");
        assert_eq!(out.status.code(), Some(2), "{args:?}");
        assert!(text(&out.stderr).starts_with("error: "), "{args:?}");
    }
    // No subcommand at all.
    assert_eq!(geopriv(&[], "").status.code(), Some(2));
    assert_eq!(geopriv(&["sensitivity"], "").status.code(), Some(2));
}

#[test]
fn help_explains_the_flags() {
    let out = geopriv(&["--help"], "");
    assert!(out.status.success());
    let help = text(&out.stdout);
    assert!(help.contains("sensitivity"), "{help}");
    assert!(help.contains("per unit distance"), "{help}");

    let out = geopriv(&["sensitivity", "--help"], "");
    assert!(out.status.success());
    let help = text(&out.stdout);
    for family in ["threshold", "interval", "two-way", "kde"] {
        assert!(help.contains(family), "{help}");
    }
    assert!(help.contains("value,pointwise_lipschitz,smooth_sensitivity"));

    for (family, flags) in [
        ("threshold", &["--threshold", "--width"][..]),
        ("interval", &["--lower", "--upper", "--width"]),
        ("two-way", &["--threshold <T1,T2>", "--width"]),
        ("kde", &["--center", "--bandwidth"]),
    ] {
        let out = geopriv(&["sensitivity", family, "--help"], "");
        assert!(out.status.success(), "{family}");
        let help = text(&out.stdout);
        for flag in flags
            .iter()
            .chain(&["--growth", "--gamma", "exp", "linear"])
        {
            assert!(help.contains(flag), "{family} --help lacks {flag}:\n{help}");
        }
        assert!(help.contains("γ"), "{family}: {help}");
    }
}

#[test]
fn kde_is_wired() {
    // Only the plumbing: the dimension comes from --center and every good
    // line gets three numbers. (The KDE's sensitivities are tested with
    // the KDE itself.)
    let out = geopriv(
        &[
            "sensitivity",
            "kde",
            "--center",
            "1,-2,3",
            "--bandwidth",
            "0.5",
            "--growth",
            "linear",
            "--gamma",
            "0.2",
        ],
        "0,0,0\n1,2\n1,-2,3\n",
    );
    assert_eq!(out.status.code(), Some(1));
    let stdout = text(&out.stdout);
    assert_eq!(stdout.lines().count(), 2);
    for line in stdout.lines() {
        let fields: Vec<f64> = line.split(',').map(|s| s.parse().unwrap()).collect();
        assert_eq!(fields.len(), 3, "{line}");
    }
    assert!(text(&out.stderr).starts_with("line 2: expected 3"));
}
