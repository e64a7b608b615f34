//! The interval `geopriv map aggregate` publishes for the true map when the
//! planner picks EM (issue 22 item 2, branch emk1, docs/MATH.md §9.7): the
//! λ = 1 map's, its centres in `interval_centres` beside EM's values and
//! its standard errors in `standard_errors`; a kernel map's output has no
//! `interval_centres` (its intervals are centred on its values).

mod common;
use common::geopriv;

/// 3,000 devices in two clusters on the 11 × 11 grid over 20 km (h one
/// cell diagonal, 2,828 m) at εh = `eh`, released with a fixed seed.
fn reports(eh: f64) -> (String, Vec<u8>) {
    let h = (2_000.0f64).hypot(2_000.0);
    let eps = format!("{:?}", eh / h);
    let locations: String = (0..3_000u64)
        .map(|i| {
            let (cx, cy) = if i % 3 == 0 {
                (5_000, 6_000)
            } else {
                (14_000, 12_000)
            };
            format!("{},{}\n", cx + (i * 37) % 1_500, cy + (i * 91) % 1_500)
        })
        .collect();
    let stdout = common::map_release_11(&locations, &eps, "7");
    (eps, stdout)
}

fn aggregate(eps: &str, lambda: Option<&str>, reports: &[u8]) -> serde_json::Value {
    let mut args = vec!["map", "aggregate", "--grid", "11", "--epsilon", eps];
    if let Some(l) = lambda {
        args.extend(["--lambda", l]);
    }
    let out = geopriv(&args, reports);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

fn bits(v: &serde_json::Value) -> Vec<u64> {
    v.as_array()
        .unwrap()
        .iter()
        .map(|x| x.as_f64().unwrap().to_bits())
        .collect()
}

/// At εh 0.3 the planner picks EM: its values are EM's, its intervals the
/// `--lambda 1` map's (centres and standard errors, bit for bit).
#[test]
fn an_em_map_publishes_the_unbiased_maps_interval() {
    let (eps, reps) = reports(0.3);
    let em = aggregate(&eps, None, &reps);
    let k1 = aggregate(&eps, Some("1"), &reps);
    assert_eq!(em["estimator"], "em", "{em}");
    assert_eq!(bits(&em["interval_centres"]), bits(&k1["values"]));
    assert_eq!(bits(&em["standard_errors"]), bits(&k1["standard_errors"]));
    assert_ne!(bits(&em["values"]), bits(&k1["values"]));
    // A kernel map states no centres.
    assert_eq!(k1["estimator"], "kernel");
    assert!(k1.get("interval_centres").is_none(), "{k1}");
}

/// A fixed kernel map (`--lambda 0.6`, any εh) states no centres: its
/// output is main's.
#[test]
fn a_kernel_map_has_no_interval_centres() {
    let (eps, reps) = reports(10.0);
    let m = aggregate(&eps, Some("0.6"), &reps);
    assert_eq!(m["estimator"], "kernel", "{m}");
    assert!(m.get("interval_centres").is_none());
}

/// docs/ATTACK-15.md O2: a box of no width (`--bbox 0 0 20000 20000`,
/// xmin = xmax) or a reversed one is refused as a box (exit 2), not as a
/// bandwidth of 0.
#[test]
fn a_degenerate_box_is_refused_as_a_box() {
    for bbox in ["0,0,0,20000", "0,20000,5,5", "20000,0,0,20000"] {
        let out = geopriv(
            &[
                "map",
                "aggregate",
                "--grid",
                "11",
                "--epsilon",
                "0.001",
                "--bbox",
                bbox,
            ],
            b"",
        );
        assert_eq!(out.status.code(), Some(2), "{bbox}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains("xmin < xmax and ymin < ymax"), "{bbox}: {err}");
    }
}

/// Branch sparse24 (docs/MATH.md §9.7 "sparse24"): every binned map
/// states per cell the effective reports m̂ read from the reports, the
/// threshold m* = ln 20 and how many cells fall below it. Two clusters on
/// 20 km: the clusters' cells read more than 50, at εh 10 the cells far from
/// both fewer than 10; the planner's map (EM at εh 0.3) states the λ = 1
/// map's m̂.
#[test]
fn map_aggregate_states_the_effective_reports_per_cell() {
    for eh in [10.0, 0.3] {
        let (eps, reps) = reports(eh);
        let out = aggregate(&eps, None, &reps);
        let m: Vec<f64> = out["effective_reports"]
            .as_array()
            .unwrap()
            .iter()
            .map(|x| x.as_f64().unwrap())
            .collect();
        let star = out["effective_reports_threshold"].as_f64().unwrap();
        assert!((star - 20f64.ln()).abs() < 1e-12);
        assert_eq!(m.len(), 121);
        let thin = m.iter().filter(|&&x| x < star).count();
        assert_eq!(out["thin_cells"].as_u64().unwrap() as usize, thin, "{out}");
        assert!(
            m.iter().fold(0.0f64, |a, b| a.max(*b)) > 50.0,
            "εh {eh}: {m:?}"
        );
        // At εh 10 the cells far from both clusters read few reports.
        let low = m.iter().fold(f64::INFINITY, |a, b| a.min(*b));
        if eh == 10.0 {
            assert!(low < 10.0, "εh {eh}: {m:?}");
        }
        let k1 = aggregate(&eps, Some("1"), &reps);
        assert_eq!(
            bits(&out["effective_reports"]),
            bits(&k1["effective_reports"])
        );
    }
}
