//! Server-side hand-over: report encodings and validation, exact aggregation
//! (including a sharded 1M-report run), the privacy-budget ledger and the
//! lat/lon projections.

use geopriv::geo::{self, LatLon, LocalEquirectangular, Projection, WebMercator};
use geopriv::report::{self, MechanismName, QueryDescriptor, Report};
use geopriv::server::aggregate::{Aggregator, GridAggregator};
use geopriv::{Error, SoftThreshold};
use geopriv::{Rejection, ValidationPolicy};
use proptest::prelude::*;
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use rayon::prelude::*;

fn queries() -> Vec<QueryDescriptor> {
    vec![
        QueryDescriptor::Threshold {
            threshold: 100_000.0,
            width: 20_000.0,
        },
        QueryDescriptor::Interval {
            lower: 10_000.0,
            upper: 50_000.0,
            width: 5_000.0,
        },
        QueryDescriptor::TwoWay {
            thresholds: [40_000.0, 70_000.0],
            width: 8_000.0,
        },
        QueryDescriptor::Kde {
            center: vec![1200.5, -300.25],
            bandwidth: 150.0,
        },
    ]
}

fn sample_reports() -> Vec<Report> {
    let mut out = Vec::new();
    for q in queries() {
        for m in MechanismName::ALL {
            let delta = if m.is_pure() { 0.0 } else { 1e-6 };
            let eps = if m.is_geo_private() {
                1.0 / 1000.0
            } else {
                4.0
            };
            out.push(Report::new(
                q.clone(),
                m,
                eps,
                delta,
                -0.123_456_789_012_345_67,
            ));
        }
    }
    out
}

fn policy() -> ValidationPolicy {
    ValidationPolicy::new(1.0 / 100.0, 1e-5)
        .unwrap()
        .allow_ldp(8.0)
        .unwrap()
}

// ---------------------------------------------------------------------------
// Encodings

#[test]
fn json_and_binary_round_trip() {
    for r in sample_reports() {
        let line = r.to_json_line();
        assert!(!line.contains('\n'));
        assert_eq!(Report::from_json(&line).unwrap(), r);
        assert_eq!(Report::from_json(&format!("  {line}\r\n")).unwrap(), r);
        let bytes = r.to_bytes();
        assert_eq!(Report::from_bytes(&bytes).unwrap(), r);
        assert_eq!(Report::from_frame(&r.to_frame()).unwrap(), r);
        policy().validate(&r).unwrap();
    }
}

#[test]
fn floats_survive_exactly() {
    let mut rng = SmallRng::seed_from_u64(7);
    let q = queries()[0].clone();
    for _ in 0..2000 {
        let v = f64::from_bits(rng.random::<u64>());
        if !v.is_finite() {
            continue;
        }
        let r = Report::new(q.clone(), MechanismName::StudentT, 1e-3, 0.0, v);
        assert_eq!(
            Report::from_json(&r.to_json_line())
                .unwrap()
                .value
                .to_bits(),
            v.to_bits()
        );
        assert_eq!(
            Report::from_bytes(&r.to_bytes()).unwrap().value.to_bits(),
            v.to_bits()
        );
    }
}

#[test]
fn streams_of_frames_and_lines() {
    let reports = sample_reports();
    let mut stream = Vec::new();
    let mut lines = Vec::new();
    for r in &reports {
        r.write_frame(&mut stream).unwrap();
        r.write_json_line(&mut lines).unwrap();
    }
    let decoded: Vec<Report> = report::frames(&stream).map(Result::unwrap).collect();
    assert_eq!(decoded, reports);
    let read: Vec<Report> = report::read_frames(&stream[..])
        .map(|r| r.unwrap().unwrap())
        .collect();
    assert_eq!(read, reports);
    let read: Vec<Report> = report::read_json_lines(&lines[..])
        .map(|r| r.unwrap().unwrap())
        .collect();
    assert_eq!(read, reports);

    // A corrupted frame is refused and the reader resynchronizes on the
    // next zero byte.
    let first_len = reports[0].to_frame().len();
    let mut bad = stream.clone();
    bad[2] ^= 0x5a;
    bad[first_len - 2] = 0; // split the first frame in two broken halves
    let items: Vec<_> = report::frames(&bad).collect();
    assert!(items.len() >= reports.len());
    assert_eq!(
        items[items.len() - 1].as_ref().unwrap(),
        reports.last().unwrap()
    );
    assert!(items[0].is_err());
    // A stream cut in the middle of a frame: the tail is refused as truncated.
    let cut = &stream[..stream.len() - 3];
    let last = report::frames(cut).last().unwrap();
    assert_eq!(last.unwrap_err().code(), "truncated");
    let last = report::read_frames(cut).last().unwrap().unwrap();
    assert_eq!(last.unwrap_err().code(), "truncated");
}

#[test]
fn report_never_carries_sensitivity_or_scale() {
    let r = &sample_reports()[0];
    let json = r.to_json_line();
    let keys: serde_json::Value = serde_json::from_str(&json).unwrap();
    let fields: Vec<&String> = keys.as_object().unwrap().keys().collect();
    assert_eq!(
        fields,
        ["delta", "epsilon", "mechanism", "query", "value", "version"]
    );
    // A client that leaks S or the scale is refused, not silently stored.
    for leak in [",\"sensitivity\":0.5}", ",\"scale\":12.0}"] {
        let leaky = format!("{}{leak}", &json[..json.len() - 1]);
        assert_eq!(Report::from_json(&leaky).unwrap_err().code(), "malformed");
    }
}

// ---------------------------------------------------------------------------
// Malformed input: always a rejection with a reason, never a panic.

#[test]
fn malformed_json_is_rejected_with_reasons() {
    let good = Report::new(
        queries()[0].clone(),
        MechanismName::Polyplace,
        1e-3,
        0.0,
        0.7315,
    )
    .to_json_line();
    assert!(good.ends_with(",\"value\":0.7315}"));
    let cases: Vec<(String, &str)> = vec![
        (String::new(), "empty"),
        ("   \n".into(), "empty"),
        ("garbage".into(), "malformed"),
        ("[1,2,3]".into(), "malformed"),
        (good[..good.len() / 2].to_string(), "truncated"),
        (
            good.replace("\"version\":2", "\"version\":3"),
            "unsupported-version",
        ),
        (
            good.replace("\"version\":2", "\"version\":70000"),
            "malformed",
        ),
        (good.replace("0.7315", "NaN"), "malformed"),
        (good.replace("0.7315", "null"), "malformed"),
        (good.replace("0.7315", "1e999"), "malformed"),
        (good.replace("polyplace", "gaussian"), "malformed"),
        (good.replace("\"threshold\":{", "\"circle\":{"), "malformed"),
        (good.replace(",\"delta\":0.0", ""), "malformed"),
    ];
    for (input, code) in cases {
        let rej = Report::from_json(&input).unwrap_err();
        assert_eq!(rej.code(), code, "{input:?}: {rej}");
        assert!(!rej.to_string().is_empty());
    }
    // Every prefix of a valid line is refused, none panics.
    for cut in 0..good.len() {
        assert!(Report::from_json(&good[..cut]).is_err());
    }
}

#[test]
fn malformed_binary_is_rejected_with_reasons() {
    let r = sample_reports()[3].clone();
    let good = r.to_bytes();
    assert_eq!(Report::from_bytes(&[]).unwrap_err(), Rejection::Empty);
    for cut in 1..good.len() {
        let e = Report::from_bytes(&good[..cut]).unwrap_err();
        assert_eq!(e.code(), "truncated", "cut {cut}");
    }
    let mut longer = good.clone();
    longer.push(7);
    assert_eq!(
        Report::from_bytes(&longer).unwrap_err(),
        Rejection::TrailingBytes { count: 1 }
    );
    // Binary version 4 does not exist yet (3 made the seeded byte
    // mandatory and added the check).
    let mut v4 = good.clone();
    v4[0] = 4;
    assert_eq!(
        Report::from_bytes(&v4).unwrap_err(),
        Rejection::UnsupportedVersion { found: 4 }
    );
    let mut bad_family = good.clone();
    bad_family[1] = 9;
    assert_eq!(
        Report::from_bytes(&bad_family).unwrap_err().code(),
        "malformed"
    );
    assert_eq!(Report::from_frame(&[0]).unwrap_err(), Rejection::Empty);
    assert_eq!(
        Report::from_frame(&[5, 1, 0]).unwrap_err().code(),
        "truncated"
    );

    // NaN survives the binary encoding but not validation.
    let mut nan = r.clone();
    nan.value = f64::NAN;
    let decoded = Report::from_bytes(&nan.to_bytes()).unwrap();
    assert_eq!(
        policy().validate(&decoded).unwrap_err().code(),
        "non-finite-value"
    );
    assert_eq!(
        policy().accept_bytes(&nan.to_bytes()).unwrap_err().code(),
        "non-finite-value"
    );
    // NaN in JSON is written as null and refused on decoding.
    assert_eq!(
        Report::from_json(&nan.to_json_line()).unwrap_err().code(),
        "malformed"
    );
}

// ---------------------------------------------------------------------------
// Binary version 3: no proper prefix of a binary report is one (attack7 O3)

/// Every sample report (every query family x mechanism) with and without
/// an id, seeded and not.
fn sample_variants() -> Vec<Report> {
    let mut out = Vec::new();
    for (i, r) in sample_reports().into_iter().enumerate() {
        let id = geopriv::ReportId([i as u8 ^ 0x5a; 16]);
        for r in [r.clone(), r.with_report_id(id)] {
            out.push(r.clone());
            out.push(r.with_seeded(true));
        }
    }
    out
}

#[path = "common/wire.rs"]
mod wire;
/// A legacy binary version 2 report (devices in the field).
use wire::legacy_v2_bytes;

/// Reports read from `stream` by the CLI's and the bindings' reader.
fn ingested(stream: &[u8]) -> Vec<Result<Report, String>> {
    use geopriv::server::ingest::{Decoded, FormatChoice, RecordReader};
    let mut reader = RecordReader::new(stream, FormatChoice::Binary, 1 << 16).unwrap();
    let mut out = Vec::new();
    while let Some((_, d)) = reader.next_record().unwrap() {
        match d {
            Decoded::Report(r) => out.push(Ok(r)),
            Decoded::Rejected(why) => out.push(Err(why.code().to_string())),
            Decoded::Skipped => {}
        }
    }
    out
}

#[test]
fn no_proper_prefix_of_a_binary_report_or_frame_is_a_report() {
    for r in sample_variants() {
        let b = r.to_bytes();
        assert_eq!(b[0], 3, "writers write binary version 3");
        assert_eq!(Report::from_bytes(&b).unwrap(), r);
        assert_eq!(Report::from_bytes(&[]).unwrap_err(), Rejection::Empty);
        for n in 1..b.len() {
            let e = Report::from_bytes(&b[..n]).unwrap_err();
            assert_eq!(e.code(), "truncated", "{r:?} cut to {n}");
            assert!(policy().accept_seeded().accept_bytes(&b[..n]).is_err());
        }
        // Frames: a cut frame holds a cut report. `from_frame` takes a
        // frame with or without its 0x00 (the same report); the stream
        // readers refuse a frame without it.
        let f = r.to_frame();
        for n in 0..f.len() {
            if n + 1 != f.len() {
                assert!(
                    Report::from_frame(&f[..n]).is_err(),
                    "{r:?} frame cut to {n}"
                );
            }
            assert!(report::frames(&f[..n]).all(|x| x.is_err()));
            assert!(report::read_frames(&f[..n]).all(|x| x.unwrap().is_err()));
            assert!(ingested(&f[..n]).iter().all(Result::is_err));
            // A frame cut by at least one byte before its terminator, then
            // a terminator and the next frame (a transport that lost
            // bytes): refused, the next frame read normally.
            if n + 1 == f.len() {
                continue;
            }
            let mut s = f[..n].to_vec();
            s.push(0);
            s.extend_from_slice(&f);
            let got = ingested(&s);
            assert_eq!(got.last().unwrap().as_ref().unwrap(), &r);
            assert!(got[..got.len() - 1].iter().all(Result::is_err), "{n}");
        }
    }
}

#[test]
fn seeded_binary_reports_stay_refused_by_default_and_damage_is_caught() {
    let p = policy();
    for r in sample_variants() {
        let b = r.to_bytes();
        if r.seeded {
            assert_eq!(p.accept_bytes(&b).unwrap_err(), Rejection::Seeded);
            assert_eq!(p.clone().accept_seeded().accept_bytes(&b).unwrap(), r);
        } else {
            assert_eq!(p.accept_bytes(&b).unwrap(), r);
        }
        // Any one damaged byte (every position, each bit and all ones) is
        // refused: a seeded byte 0x01 -> 0x00 included.
        for pos in 0..b.len() {
            for x in [1u8, 2, 4, 8, 16, 32, 64, 128, 255] {
                let mut d = b.clone();
                d[pos] ^= x;
                assert!(Report::from_bytes(&d).is_err(), "{pos} ^ {x}");
            }
        }
    }
}

/// Regression (fails on main 1ae9de6): a 61-byte seeded report with an id,
/// cut to its first 60 bytes, was an unseeded report with the same value
/// and id, which the default policy counted.
#[test]
fn attack7_o3_a_seeded_report_cut_by_its_last_byte_is_not_counted() {
    let r = sample_reports()[0]
        .clone()
        .with_report_id(geopriv::ReportId([7; 16]))
        .with_seeded(true);
    let b = r.to_bytes();
    let cut = &b[..b.len() - 1];
    assert_eq!(policy().accept_bytes(cut).unwrap_err().code(), "truncated");
    assert!(policy().accept_bytes(&b[..60]).is_err());
}

/// Legacy binary versions 1 and 2 are still read (devices in the field),
/// with the hole the README documents: for them alone, a seeded report cut
/// by its last byte is the unseeded report.
#[test]
fn legacy_binary_reports_are_still_read_with_their_documented_hole() {
    for r in sample_variants() {
        let b = legacy_v2_bytes(&r);
        assert_eq!(b[0], 2);
        assert_eq!(Report::from_bytes(&b).unwrap(), r);
        let unseeded = r.clone().with_seeded(false);
        let body = legacy_v2_bytes(&unseeded).len();
        for n in 1..b.len() {
            match Report::from_bytes(&b[..n]) {
                Ok(got) => {
                    assert!(r.seeded && n == body, "{r:?} cut to {n}");
                    assert_eq!(got, unseeded);
                }
                Err(e) => assert_eq!(e.code(), "truncated"),
            }
        }
        // In streams too (COBS frames of legacy bytes).
        let mut framed = Vec::new();
        for raw in [&b[..], &legacy_v2_bytes(&unseeded)[..]] {
            framed.extend_from_slice(&cobs(raw));
        }
        let got = ingested(&framed);
        assert_eq!(got, vec![Ok(r.clone()), Ok(unseeded)]);
        if r.report_id.is_none() {
            // Version 1: no id field.
            let v1 =
                postcard::to_allocvec(&(1u16, &r.query, r.mechanism, r.epsilon, r.delta, r.value))
                    .unwrap();
            let old = Report::from_bytes(&v1).unwrap();
            assert_eq!((old.version, old.seeded), (1, false));
            assert_eq!(old.value.to_bits(), r.value.to_bits());
        }
    }
}

/// COBS encoding with the terminator (as `Report::to_frame` frames bytes),
/// by the `cobs` crate: an encoder independent of the one under test.
fn cobs(raw: &[u8]) -> Vec<u8> {
    let mut out = ::cobs::encode_vec(raw);
    out.push(0);
    out
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2000))]

    #[test]
    fn garbage_never_panics(bytes in proptest::collection::vec(any::<u8>(), 0..80)) {
        let _ = Report::from_bytes(&bytes);
        let _ = Report::from_frame(&bytes);
        let _ = report::frames(&bytes).count();
        let _ = Report::from_json(&String::from_utf8_lossy(&bytes));
    }

    #[test]
    fn flipped_bytes_never_panic(pos in 0usize..47, xor in 1u8..=255) {
        let mut b = sample_reports()[0].to_bytes();
        b[pos] ^= xor;
        // Binary version 3's check catches any one damaged byte.
        prop_assert!(Report::from_bytes(&b).is_err());
    }
}

// ---------------------------------------------------------------------------
// Validation

#[test]
fn every_rejection_has_its_reason() {
    let base = Report::new(
        queries()[0].clone(),
        MechanismName::Polyplace,
        1e-3,
        0.0,
        0.4,
    );
    let p = policy();
    p.validate(&base).unwrap();
    let with = |f: &dyn Fn(&mut Report)| {
        let mut r = base.clone();
        f(&mut r);
        r
    };
    let cases: Vec<(Report, ValidationPolicy, &str)> = vec![
        (with(&|r| r.version = 9), p.clone(), "unsupported-version"),
        (
            with(&|r| r.value = f64::INFINITY),
            p.clone(),
            "non-finite-value",
        ),
        (with(&|r| r.value = f64::NAN), p.clone(), "non-finite-value"),
        (
            with(&|r| {
                r.query = QueryDescriptor::Threshold {
                    threshold: 1.0,
                    width: -2.0,
                }
            }),
            p.clone(),
            "invalid-query",
        ),
        (
            with(&|r| {
                r.query = QueryDescriptor::Interval {
                    lower: 5.0,
                    upper: 1.0,
                    width: 1.0,
                }
            }),
            p.clone(),
            "invalid-query",
        ),
        (
            with(&|r| {
                r.query = QueryDescriptor::Kde {
                    center: vec![],
                    bandwidth: 1.0,
                }
            }),
            p.clone(),
            "invalid-query",
        ),
        (
            base.clone(),
            p.clone().only_queries(&queries()[1..]),
            "unknown-query",
        ),
        (
            base.clone(),
            p.clone().only_mechanisms(&[MechanismName::StudentT]),
            "mechanism-not-allowed",
        ),
        (
            with(&|r| {
                r.mechanism = MechanismName::Ldp;
                r.epsilon = 2.0
            }),
            ValidationPolicy::new(0.01, 0.0).unwrap(),
            "mechanism-not-allowed",
        ),
        (
            with(&|r| r.epsilon = 0.5),
            p.clone(),
            "epsilon-out-of-policy",
        ),
        (
            with(&|r| r.epsilon = 0.0),
            p.clone(),
            "epsilon-out-of-policy",
        ),
        (
            with(&|r| r.epsilon = -1e-3),
            p.clone(),
            "epsilon-out-of-policy",
        ),
        (
            with(&|r| r.epsilon = f64::NAN),
            p.clone(),
            "epsilon-out-of-policy",
        ),
        (
            with(&|r| {
                r.mechanism = MechanismName::Ldp;
                r.epsilon = 9.0
            }),
            p.clone(),
            "epsilon-out-of-policy",
        ),
        (
            with(&|r| {
                r.mechanism = MechanismName::Laplace;
                r.delta = 1e-3
            }),
            p.clone(),
            "delta-out-of-policy",
        ),
        (with(&|r| r.delta = -1e-9), p.clone(), "delta-out-of-policy"),
        (
            with(&|r| r.delta = f64::NAN),
            p.clone(),
            "delta-out-of-policy",
        ),
        (with(&|r| r.delta = 1e-7), p.clone(), "delta-mismatch"),
        (
            with(&|r| r.mechanism = MechanismName::Laplace),
            p.clone(),
            "delta-mismatch",
        ),
    ];
    for (r, policy, code) in cases {
        let rej = policy.validate(&r).unwrap_err();
        assert_eq!(rej.code(), code, "{r:?}: {rej}");
        let text = rej.to_string();
        assert!(text.len() > 10, "{text}");
        // The typed error keeps the category.
        assert!(matches!(Error::from(rej), Error::InvalidReport { .. }));
    }
    // Allowed cases for contrast.
    let only = p.clone().only_queries(&queries()[..1]);
    only.validate(&base).unwrap();
    let ldp = with(&|r| {
        r.mechanism = MechanismName::Ldp;
        r.epsilon = 8.0
    });
    p.validate(&ldp).unwrap();
    let laplace = with(&|r| {
        r.mechanism = MechanismName::Laplace;
        r.delta = 1e-5
    });
    p.validate(&laplace).unwrap();
    // -0 and 0 name the same query.
    let zero = QueryDescriptor::Threshold {
        threshold: 0.0,
        width: 1.0,
    };
    let neg_zero = QueryDescriptor::Threshold {
        threshold: -0.0,
        width: 1.0,
    };
    assert_eq!(zero.canonical_id(), neg_zero.canonical_id());
    let r = with(&|r| r.query = neg_zero.clone());
    p.clone().only_queries([&zero]).validate(&r).unwrap();
}

#[test]
fn descriptors_match_queries() {
    let q = SoftThreshold::new(100_000.0, 20_000.0).unwrap();
    let d = QueryDescriptor::from(&q);
    assert_eq!(d.canonical_id(), "threshold:T=100000;w=20000");
    assert_eq!(d.to_string(), d.canonical_id());
    for d in queries() {
        let query = d.to_query().unwrap();
        assert_eq!(geopriv::Query::descriptor(&query), d);
        assert_eq!(
            geopriv::Query::dimension(&query),
            if d.family() == "threshold" || d.family() == "interval" {
                1
            } else {
                2
            }
        );
        assert_eq!(d.canonical_id().parse::<QueryDescriptor>().unwrap(), d);
    }
    assert_eq!(
        "student-t".parse::<MechanismName>().unwrap(),
        MechanismName::StudentT
    );
    assert!("gauss".parse::<MechanismName>().is_err());
}

// ---------------------------------------------------------------------------
// Aggregation

fn aggregate(values: &[f64]) -> Aggregator {
    let mut a = Aggregator::new();
    a.extend_from_slice(values).unwrap();
    a
}

fn value_strategy() -> impl Strategy<Value = f64> {
    prop_oneof![
        -1e6f64..1e6,
        any::<f64>().prop_filter("finite", |v| v.is_finite()),
        (-3i32..4).prop_map(|k| k as f64 * 0.1),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(300))]

    #[test]
    fn merge_is_associative_commutative_and_exact(
        a in proptest::collection::vec(value_strategy(), 0..40),
        b in proptest::collection::vec(value_strategy(), 0..40),
        c in proptest::collection::vec(value_strategy(), 0..40),
    ) {
        let (pa, pb, pc) = (aggregate(&a), aggregate(&b), aggregate(&c));
        // (a ⊕ b) ⊕ c
        let mut left = pa.clone();
        left.merge(&pb).unwrap();
        left.merge(&pc).unwrap();
        // a ⊕ (b ⊕ c)
        let mut bc = pb.clone();
        bc.merge(&pc).unwrap();
        let mut right = pa.clone();
        right.merge(&bc).unwrap();
        // c ⊕ b ⊕ a
        let mut rev = pc.clone();
        rev.merge(&pb).unwrap();
        rev.merge(&pa).unwrap();
        // single pass over the concatenation
        let all: Vec<f64> = a.iter().chain(&b).chain(&c).copied().collect();
        let single = aggregate(&all);
        prop_assert_eq!(&left, &single);
        prop_assert_eq!(&right, &single);
        prop_assert_eq!(&rev, &single);
        let (e1, e2) = (left.estimate(), single.estimate());
        prop_assert_eq!(format!("{e1:?}"), format!("{e2:?}")); // bitwise, NaN-proof
        // ... and after a serialization round trip.
        let shipped: Aggregator = postcard::from_bytes(&postcard::to_allocvec(&pa).unwrap()).unwrap();
        prop_assert_eq!(&shipped, &pa);
    }

    #[test]
    fn estimate_agrees_with_a_two_pass_computation(
        values in proptest::collection::vec(-1e3f64..1e3, 2..200),
    ) {
        let e = aggregate(&values).estimate().unwrap();
        let n = values.len() as f64;
        let mean = values.iter().sum::<f64>() / n;
        let var = values.iter().map(|v| (v - mean) * (v - mean)).sum::<f64>() / (n - 1.0);
        prop_assert!((e.mean - mean).abs() <= 1e-9 * (1.0 + mean.abs()));
        let tol = 1e-9 * (var + 1e-6 * (1.0 + mean * mean));
        prop_assert!((e.sample_variance.unwrap() - var).abs() <= tol);
        let se = (var / n).sqrt();
        let [lo, hi] = e.ci95.unwrap();
        prop_assert!(lo <= e.mean && e.mean <= hi);
        prop_assert!(((hi - lo) / 2.0 - 1.959963984540054 * se).abs() <= 1e-6 * (se + 1e-3));
    }
}

/// Heavy-tailed, wide-range values like real reports: f(x) in [0, 1] plus
/// Student-t-like noise with occasional huge outliers.
fn reports_like(n: usize, seed: u64) -> Vec<f64> {
    let mut rng = SmallRng::seed_from_u64(seed);
    (0..n)
        .map(|_| {
            let f = if rng.random::<f64>() < 0.3 { 1.0 } else { 0.0 };
            let u: f64 = rng.random::<f64>() - 0.5;
            let noise = 3.0 * (core::f64::consts::PI * u).tan();
            f + noise
        })
        .collect()
}

#[test]
fn a_million_reports_in_parallel_shards_merge_to_the_single_pass_result() {
    let values = reports_like(1_000_000, 42);
    let single = aggregate(&values);
    let reference = single.estimate().unwrap();
    assert_eq!(reference.n, 1_000_000);

    for shards in [2usize, 7, 64, 1000] {
        let chunk = values.len().div_ceil(shards);
        // Each shard ships its partial state as bytes, as a distributed
        // engine would; the reducer decodes and merges in rayon's order.
        let merged = values
            .par_chunks(chunk)
            .map(|part| postcard::to_allocvec(&aggregate(part)).unwrap())
            .map(|bytes| postcard::from_bytes::<Aggregator>(&bytes).unwrap())
            .reduce(Aggregator::new, |mut a, b| {
                a.merge(&b).unwrap();
                a
            });
        let est = merged.estimate().unwrap();
        assert_eq!(merged, single, "{shards} shards");
        assert_eq!(est.n, reference.n);
        assert_eq!(est.sum.to_bits(), reference.sum.to_bits());
        assert_eq!(est.mean.to_bits(), reference.mean.to_bits());
        assert_eq!(
            est.sample_variance.unwrap().to_bits(),
            reference.sample_variance.unwrap().to_bits()
        );
        assert_eq!(
            est.standard_error.unwrap().to_bits(),
            reference.standard_error.unwrap().to_bits()
        );
        assert_eq!(est.ci95, reference.ci95);
        assert_eq!(est, reference);
    }

    // A shuffled order gives the same bits too.
    let mut shuffled = values.clone();
    shuffled.reverse();
    assert_eq!(aggregate(&shuffled).estimate(), Some(reference));
    // The sum is the correctly rounded exact sum: compare with a
    // compensated sum to well within its accuracy.
    let mut hi = 0.0f64;
    let mut lo = 0.0f64;
    for &v in &values {
        let s = hi + v;
        let bb = s - hi;
        lo += (hi - (s - bb)) + (v - bb);
        hi = s;
    }
    assert!((reference.sum - (hi + lo)).abs() <= 1e-9 * reference.sum.abs().max(1.0));
}

#[test]
fn grid_of_two_way_thresholds_aggregates_reports_by_query() {
    let t: Vec<f64> = (0..5).map(|j| 10_000.0 + 30_000.0 * j as f64).collect();
    let mut grid = GridAggregator::two_way_grid(&t, &t, 8_000.0).unwrap();
    assert_eq!(grid.len(), 25);
    let mut rng = SmallRng::seed_from_u64(3);
    let mut shard_b = grid.clone();
    let queries = grid.queries().to_vec();
    let mut per_cell = vec![Vec::new(); 25];
    for i in 0..10_000 {
        let cell = rng.random_range(0..25);
        let v = rng.random::<f64>() * 2.0 - 0.5;
        per_cell[cell].push(v);
        let r = Report::new(
            queries[cell].clone(),
            MechanismName::Cauchy,
            1.0 / 12_000.0,
            0.0,
            v,
        );
        let r = Report::from_bytes(&r.to_bytes()).unwrap();
        if i % 2 == 0 { &mut grid } else { &mut shard_b }
            .add_report(&r)
            .unwrap();
    }
    grid.merge(&shard_b).unwrap();
    let json = serde_json::to_string(&grid).unwrap();
    let back: GridAggregator = serde_json::from_str(&json).unwrap();
    assert_eq!(back, grid);
    for (i, (q, est)) in back.estimates().into_iter().enumerate() {
        assert_eq!(q, &queries[i]);
        assert_eq!(est, aggregate(&per_cell[i]).estimate());
    }
}

// ---------------------------------------------------------------------------
// Projections

#[test]
fn web_mercator_known_values_and_round_trips() {
    let m = WebMercator;
    let r = geo::WGS84_A;
    assert_eq!(
        m.forward(LatLon::new(0.0, 0.0).unwrap()).unwrap(),
        [0.0, 0.0]
    );
    let [x, y] = m.forward(LatLon::new(0.0, 180.0).unwrap()).unwrap();
    assert!((x - core::f64::consts::PI * r).abs() < 1e-6 && y == 0.0);
    let [x, _] = m.forward(LatLon::new(0.0, -180.0).unwrap()).unwrap();
    assert!((x + core::f64::consts::PI * r).abs() < 1e-6);
    // Latitude 45°: y = R ln tan(67.5°) = R · 0.881373587...
    let [_, y] = m.forward(LatLon::new(45.0, 0.0).unwrap()).unwrap();
    assert!((y / r - 0.881_373_587_019_543).abs() < 1e-12);
    let mut rng = SmallRng::seed_from_u64(11);
    for _ in 0..10_000 {
        let p = LatLon::new(
            rng.random_range(-85.0..85.0),
            rng.random_range(-180.0..180.0),
        )
        .unwrap();
        let back = m.inverse(m.forward(p).unwrap()).unwrap();
        assert!((back.lat() - p.lat()).abs() < 1e-9 && (back.lon() - p.lon()).abs() < 1e-9);
    }
    assert!(m.forward(LatLon::new(89.0, 0.0).unwrap()).is_err());
    assert!(m.inverse([f64::NAN, 0.0]).is_err());
    assert!(m.inverse([0.0, 1e8]).is_err());
    // The scale error: near 60°N a short north-south step of 1 ground metre
    // (on the sphere) is about 2 projected metres.
    let a = m.forward(LatLon::new(60.0, 10.0).unwrap()).unwrap();
    let dlat = (1.0 / r).to_degrees();
    let b = m.forward(LatLon::new(60.0 + dlat, 10.0).unwrap()).unwrap();
    assert!(((b[1] - a[1]) - 2.0).abs() < 1e-4);
}

#[test]
fn local_equirectangular_is_true_metres_near_its_reference() {
    let mut rng = SmallRng::seed_from_u64(5);
    for &(lat0, lon0) in &[
        (0.0, 0.0),
        (45.0, 7.0),
        (-33.9, 18.4),
        (60.0, 179.99),
        (51.5, -0.12),
    ] {
        let reference = LatLon::new(lat0, lon0).unwrap();
        let sphere = LocalEquirectangular::spherical(reference, geo::MEAN_EARTH_RADIUS).unwrap();
        let ellipsoid = LocalEquirectangular::new(reference).unwrap();
        for _ in 0..200 {
            // Two points within ~3 km of the reference.
            let mut pick = || {
                let [x, y] = [
                    rng.random_range(-3000.0..3000.0),
                    rng.random_range(-3000.0..3000.0),
                ];
                sphere.inverse([x, y]).unwrap()
            };
            let (p, q) = (pick(), pick());
            let (a, b) = (sphere.forward(p).unwrap(), sphere.forward(q).unwrap());
            let planar = (a[0] - b[0]).hypot(a[1] - b[1]);
            let great_circle = geo::haversine(p, q, geo::MEAN_EARTH_RADIUS);
            if great_circle > 100.0 {
                assert!(
                    (planar / great_circle - 1.0).abs() < 1e-3,
                    "{lat0},{lon0}: {planar} vs {great_circle}"
                );
            }
            for proj in [&sphere, &ellipsoid] {
                let back = proj.inverse(proj.forward(p).unwrap()).unwrap();
                assert!((back.lat() - p.lat()).abs() < 1e-9);
                let dlon = (back.lon() - p.lon()).abs();
                assert!(dlon < 1e-9 || (dlon - 360.0).abs() < 1e-9);
            }
        }
    }
    // WGS84 degree lengths from the usual series (metres per degree):
    // latitude 111132.954 − 559.822 cos 2φ + 1.175 cos 4φ, longitude
    // 111412.84 cos φ − 93.5 cos 3φ + 0.118 cos 5φ; agree to 1e-5.
    for lat in [0.0f64, 30.0, 45.0, 60.0, -70.0] {
        let e = LocalEquirectangular::new(LatLon::new(lat, 0.0).unwrap()).unwrap();
        let r = lat.to_radians();
        let per_lat = 111_132.954 - 559.822 * (2.0 * r).cos() + 1.175 * (4.0 * r).cos();
        let per_lon = 111_412.84 * r.cos() - 93.5 * (3.0 * r).cos() + 0.118 * (5.0 * r).cos();
        let [x, y] = e.forward(LatLon::new(lat + 0.5, 0.5).unwrap()).unwrap();
        assert!((2.0 * y / per_lat - 1.0).abs() < 1e-5, "{lat}: {}", 2.0 * y);
        assert!((2.0 * x / per_lon - 1.0).abs() < 1e-5, "{lat}: {}", 2.0 * x);
    }
    // Across the antimeridian.
    let e = LocalEquirectangular::new(LatLon::new(0.0, 179.999).unwrap()).unwrap();
    let [x, _] = e.forward(LatLon::new(0.0, -179.999).unwrap()).unwrap();
    assert!(x > 0.0 && (x - 222.6).abs() < 1.0);
    assert!(LocalEquirectangular::new(LatLon::new(90.0, 0.0).unwrap()).is_err());
}

#[test]
fn geo_types_interop() {
    use geo_types::{coord, Point};
    let p = Point::new(2.3522, 48.8566); // x = lon, y = lat
    let ll = LatLon::try_from(p).unwrap();
    assert_eq!((ll.lat(), ll.lon()), (48.8566, 2.3522));
    assert_eq!(Point::from(ll), p);
    let m = WebMercator;
    let projected = m.forward_point(p).unwrap();
    assert_eq!([projected.x(), projected.y()], m.forward(ll).unwrap());
    let back = m.inverse_point(projected).unwrap();
    assert!((back.x() - p.x()).abs() < 1e-9 && (back.y() - p.y()).abs() < 1e-9);
    let c = m.forward_coord(coord! { x: 0.0, y: 0.0 }).unwrap();
    assert_eq!((c.x, c.y), (0.0, 0.0));
    assert!(LatLon::try_from(coord! { x: 0.0, y: 95.0 }).is_err());
}

mod device_to_server {
    use geopriv::{Aggregator, Mechanism, MechanismName, Report, SoftThreshold, ValidationPolicy};
    use rand::rngs::StdRng;
    use rand::SeedableRng;

    #[test]
    fn every_mechanism_names_itself_on_the_wire() {
        for m in [
            Mechanism::polyplace(1.0).unwrap(),
            Mechanism::student_t(1.0).unwrap(),
            Mechanism::cauchy(1.0).unwrap(),
            Mechanism::laplace(1.0, 1e-6).unwrap(),
            Mechanism::global_laplace(1.0).unwrap(),
            Mechanism::noise_a_priori(1.0).unwrap(),
            Mechanism::local_dp(1.0).unwrap(),
        ] {
            let name = m.name();
            assert_eq!(
                Mechanism::from_name(name, geopriv::MechanismParams::new(1.0, m.delta())).unwrap(),
                m
            );
            assert_eq!(name.as_str().parse::<MechanismName>().unwrap(), name);
        }
    }

    #[test]
    fn devices_release_reports_and_the_server_estimates_the_share() {
        // 20,000 households, incomes spread evenly over [0, 200k]; the share
        // above 100k (soft ramp 20k wide) is 1/2.
        let q = SoftThreshold::new(100_000.0, 20_000.0).unwrap();
        let m = Mechanism::polyplace(1.0 / 5_000.0).unwrap();
        let policy = ValidationPolicy::new(1e-3, 0.0).unwrap().accept_seeded();
        let mut rng = StdRng::seed_from_u64(5);
        let mut agg = Aggregator::new();
        let n = 20_000;
        for i in 0..n {
            let x = [200_000.0 * (i as f64 + 0.5) / n as f64];
            let line = Report::release_unmetered(&m, &q, &x, &mut rng)
                .unwrap()
                .to_json_line();
            assert!(!line.contains("scale"));
            let report = policy.accept_json(&line).unwrap();
            agg.add_report(&report).unwrap();
        }
        let e = agg.estimate().unwrap();
        let [lo, hi] = e.ci95.unwrap();
        assert!(lo <= 0.5 && 0.5 <= hi, "{e:?}");
    }
}
