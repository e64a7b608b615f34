//! Regression tests for issue 12, one per finding: poisoning, lost
//! batches, memory, overflow, tool crashes, log injection and mixing
//! (docs/MATH.md §10).

use geopriv::audit::{audit_mechanism, MAX_AUDIT_PAIRS};
use geopriv::server::aggregate::{Aggregator, GridAggregator, MAX_GRID_CELLS};
use geopriv::server::clip::{ClipLevel, ClipPolicy};
use geopriv::server::ingest::{
    AggregationConfig, Counts, Estimator, FormatChoice, RecordReader, RecordRejection,
    ReportAggregator,
};
use geopriv::{
    Error, Mechanism, MechanismName, QueryDescriptor, Report, SoftThreshold, ValidationPolicy,
};
use proptest::prelude::*;
use rand::rngs::StdRng;
use rand::SeedableRng;
use std::io::Read;

const EPS: f64 = 1.0 / 20_000.0;

fn threshold() -> QueryDescriptor {
    QueryDescriptor::Threshold {
        threshold: 100_000.0,
        width: 20_000.0,
    }
}

fn honest_lines(n: usize) -> String {
    let q = SoftThreshold::new(100_000.0, 20_000.0).unwrap();
    let m = Mechanism::polyplace(EPS).unwrap();
    let mut rng = StdRng::seed_from_u64(12);
    let mut out = String::new();
    for i in 0..n {
        let x = [150_000.0 * (i as f64 + 0.5) / n as f64];
        let r = Report::release_unmetered(&m, &q, &x, &mut rng).unwrap();
        out.push_str(&r.to_json_line());
        out.push('\n');
    }
    out
}

fn policy() -> ValidationPolicy {
    // The honest reports are simulated with a seeded generator.
    ValidationPolicy::new(1.0, 1e-4).unwrap().accept_seeded()
}

/// Aggregate a JSON stream; returns the counts, the rejections and the
/// aggregator.
fn ingest(
    input: &[u8],
    config: AggregationConfig,
) -> (Counts, Vec<(u64, RecordRejection)>, ReportAggregator) {
    let mut reader = RecordReader::new(input, FormatChoice::Auto, 1 << 16).unwrap();
    let mut agg = ReportAggregator::new(policy(), config);
    let mut rejected = Vec::new();
    let counts = agg
        .ingest(&mut reader, |n, why| rejected.push((n, why.clone())))
        .unwrap();
    (counts, rejected, agg)
}

fn poisoned(honest: &str, value: f64, copies: usize) -> String {
    let mut s = honest.to_string();
    for _ in 0..copies {
        s.push_str(
            &Report::new(threshold(), MechanismName::Polyplace, EPS, 0.0, value).to_json_line(),
        );
        s.push('\n');
    }
    s
}

#[test]
fn one_poisoned_report_moves_the_mean_by_at_most_width_over_n() {
    let honest = honest_lines(20_000);
    let (_, _, clean) = ingest(honest.as_bytes(), AggregationConfig::default());
    let base = clean.estimates()[0].clone();
    for (value, copies) in [
        (1e4, 1),
        (1e3, 1),
        (f64::MAX, 1),
        (f64::MAX, 2),
        (-f64::MAX, 2),
    ] {
        let text = poisoned(&honest, value, copies);
        let (counts, _, agg) = ingest(text.as_bytes(), AggregationConfig::default());
        assert_eq!(counts.accepted, 20_000 + copies as u64);
        let e = &agg.estimates()[0];
        let clip = e.clip.unwrap();
        let moved = (e.estimate.mean - base.estimate.mean).abs();
        // Each poisoned report moves the sum by at most width(B).
        assert!(
            moved <= copies as f64 * clip.influence_bound * 1.000_001,
            "{value} x{copies}: moved {moved}, bound {}",
            clip.influence_bound
        );
        assert!(e.estimate.sum.is_finite(), "no null sum");
        assert_eq!(clip.clipped, copies as u64);
        assert!(clip.bias_bound > 0.0 && clip.bias_to_se_bound.unwrap() < 0.1);
    }
    // Unclipped, the same single report of 1e4 moves the mean by far more:
    // what the clipping prevents.
    let text = poisoned(&honest, 1e4, 1);
    let (_, _, raw) = ingest(
        text.as_bytes(),
        AggregationConfig {
            clip: None,
            ..AggregationConfig::default()
        },
    );
    assert!((raw.estimates()[0].estimate.mean - base.estimate.mean).abs() > 0.4);
}

#[test]
fn the_median_of_means_states_its_bias_and_resists_poison() {
    let honest = honest_lines(2_000);
    let text = poisoned(&honest, f64::MAX, 3);
    let config = AggregationConfig {
        clip: None,
        estimator: Estimator::MedianOfMeans { buckets: 16 },
        ..AggregationConfig::default()
    };
    // Unclipped values, robust estimator only: f64::MAX in 3 of 16
    // buckets does not move the median of means beyond the honest range.
    let (_, _, agg) = ingest(text.as_bytes(), config);
    let r = agg.estimates()[0].robust.unwrap();
    assert!(r.median_of_means.abs() < 5.0, "{r:?}");
    assert!(r.bias_bound > 0.0 && r.bias_bound.is_finite());
}

#[test]
fn no_byte_sequence_costs_a_good_record() {
    let good = Report::new(threshold(), MechanismName::Polyplace, EPS, 0.0, 0.5).to_json_line();
    let mut input = Vec::new();
    input.extend_from_slice(b"\xEF\xBB\xBF# exported by device fleet 7\n");
    input.extend_from_slice(good.as_bytes());
    input.extend_from_slice(b"\n\xff\xfe\x00 not utf-8\n");
    input.extend_from_slice(format!("[{good},{good}]\n").as_bytes());
    input.extend_from_slice(b"{\"version\":99,\"anything\":1}\n");
    input.extend_from_slice(format!("\u{feff}{good}\r\n\n").as_bytes());
    input.extend_from_slice(good.as_bytes()); // no final newline
    let (counts, rejected, agg) = ingest(&input, AggregationConfig::default());
    // `auto` decides each record by itself: the 0x00 ends a (bad) binary
    // record, and the rest of that line is one more bad record.
    assert_eq!(counts.records, 9);
    assert_eq!(
        (counts.accepted, counts.rejected, counts.skipped),
        (3, 4, 2)
    );
    let codes: Vec<(u64, &str)> = rejected.iter().map(|(n, r)| (*n, r.code())).collect();
    assert_eq!(
        codes,
        [
            (3, "truncated"),
            (4, "malformed"),
            (5, "json-array"),
            (6, "unsupported-version")
        ]
    );
    assert_eq!(agg.estimates()[0].estimate.n, 3);
}

#[test]
fn auto_detection_never_costs_the_good_records() {
    // Issue 19 item 9. Before: a 45-byte frame first read 100,000 JSON
    // lines as binary (n = 1); `garbage`, a leading NUL or a truncated
    // first frame refused the whole stream.
    let honest = honest_lines(100_000);
    let frame = Report::new(threshold(), MechanismName::Polyplace, EPS, 0.0, 0.5).to_frame();
    let truncated = &frame[3..];
    let heads: [(&str, Vec<u8>, u64); 5] = [
        ("a stray binary frame", frame.clone(), 1),
        ("a garbage line", b"garbage\n".to_vec(), 0),
        ("a leading NUL", b"\x00".to_vec(), 0),
        ("a truncated frame", truncated.to_vec(), 0),
        (
            "bytes 07 'garbage'",
            b"\x07garbage\n\x01\x02\x03\n".to_vec(),
            0,
        ),
    ];
    for (what, head, extra) in heads {
        let mut input = head.clone();
        input.extend_from_slice(honest.as_bytes());
        // Also a stray frame and garbage in the middle.
        input.extend_from_slice(&frame);
        input.extend_from_slice(b"garbage\n");
        input.extend_from_slice(honest_lines(10).as_bytes());
        let (counts, _, agg) = ingest(&input, AggregationConfig::default());
        let n: u64 = agg.estimates().iter().map(|g| g.estimate.n).sum();
        assert_eq!(n, 100_010 + extra + 1, "{what}: {counts:?}");
    }
    // Binary streams with the same damage: every good frame counted.
    let mut frames = Vec::new();
    for _ in 0..1_000 {
        frames.extend_from_slice(&frame);
    }
    for head in [
        &b"garbage\n"[..],
        b"\x00\x00",
        &frame[5..],
        b"{\"v\":1}\n",
        b"\xff\xfe\n\n",
    ] {
        let mut input = head.to_vec();
        input.extend_from_slice(&frames);
        input.extend_from_slice(b"{\"json\": 1}\n");
        input.extend_from_slice(&frames);
        let (counts, _, agg) = ingest(&input, AggregationConfig::default());
        assert_eq!(agg.estimates()[0].estimate.n, 2_000, "{head:?}: {counts:?}");
    }
    // A frame whose bytes hold 0x0a and '{': still one binary report.
    let mut found = false;
    for i in 0..2_000 {
        let v = 0.5 + i as f64 * 1e-3;
        let f = Report::new(threshold(), MechanismName::Polyplace, EPS, 0.0, v).to_frame();
        if f[..f.len() - 1].contains(&b'\n') {
            let mut input = honest_lines(3).into_bytes();
            input.extend_from_slice(&f);
            input.extend_from_slice(honest_lines(3).as_bytes());
            let (counts, _, _) = ingest(&input, AggregationConfig::default());
            assert_eq!((counts.accepted, counts.rejected), (7, 0), "{f:?}");
            found = true;
            break;
        }
    }
    assert!(found);
}

/// An endless source of one byte, counting what was read.
struct Endless {
    byte: u8,
    left: u64,
}

impl Read for Endless {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let n = buf.len().min(self.left as usize);
        buf[..n].fill(self.byte);
        self.left -= n as u64;
        Ok(n)
    }
}

#[test]
fn oversized_records_are_skipped_without_buffering() {
    // 64 MB without a delimiter, then a good record: the reader holds at
    // most max + 64 KiB and rejects the long record by itself.
    for (byte, format) in [(b'a', FormatChoice::Json), (0x05, FormatChoice::Binary)] {
        let good = Report::new(threshold(), MechanismName::Polyplace, EPS, 0.0, 0.5);
        let tail = if format == FormatChoice::Json {
            let mut t = b"\n".to_vec();
            t.extend(good.to_json_line().into_bytes());
            t
        } else {
            let mut t = vec![0u8];
            t.extend(good.to_frame());
            t
        };
        let source = Endless {
            byte,
            left: 64 << 20,
        }
        .chain(&tail[..]);
        let mut reader = RecordReader::new(source, format, 4096).unwrap();
        let mut agg = ReportAggregator::new(policy(), AggregationConfig::default());
        let mut rejected = Vec::new();
        let counts = agg
            .ingest(&mut reader, |n, why| rejected.push((n, why.clone())))
            .unwrap();
        assert_eq!((counts.accepted, counts.rejected), (1, 1));
        assert_eq!(
            rejected[0],
            (
                1,
                RecordRejection::TooLong {
                    length: 64 << 20,
                    limit: 4096
                }
            )
        );
    }
    assert!(RecordReader::new(&b""[..], FormatChoice::Json, 1 << 40).is_err());
}

#[test]
fn distinct_queries_are_bounded_and_allow_listed() {
    let mut input = String::new();
    for i in 0..500 {
        let q = QueryDescriptor::Threshold {
            threshold: i as f64,
            width: 1.0,
        };
        input.push_str(&Report::new(q, MechanismName::Polyplace, 0.5, 0.0, 0.5).to_json_line());
        input.push('\n');
    }
    let config = AggregationConfig {
        max_groups: 100,
        ..AggregationConfig::default()
    };
    let (counts, rejected, agg) = ingest(input.as_bytes(), config);
    assert_eq!((counts.accepted, counts.rejected), (100, 400));
    assert_eq!(agg.groups(), 100);
    assert!(rejected.iter().all(|(_, r)| r.code() == "too-many-groups"));
    // Allow-list from a file: one id per line, comments allowed.
    let list = geopriv::server::ingest::read_allow_list(
        &b"# collected\nthreshold:T=3;w=1\n\nthreshold:T=7;w=1\n"[..],
        10,
    )
    .unwrap();
    let mut reader = RecordReader::new(input.as_bytes(), FormatChoice::Json, 1 << 16).unwrap();
    let mut agg = ReportAggregator::new(policy().only_queries(&list), AggregationConfig::default());
    let counts = agg.ingest(&mut reader, |_, _| {}).unwrap();
    assert_eq!((counts.accepted, counts.rejected), (2, 498));
    assert!(
        geopriv::server::ingest::read_allow_list(&b"threshold:T=3;w=0\n"[..], 10)
            .unwrap_err()
            .starts_with("line 1:")
    );
    assert!(geopriv::server::ingest::read_allow_list(
        &b"threshold:T=1;w=1\nthreshold:T=2;w=1\n"[..],
        1
    )
    .is_err());
}

#[test]
fn grid_sizes_are_checked_before_allocating() {
    let axis: Vec<f64> = (0..200_000).map(|i| i as f64).collect();
    let e = GridAggregator::kde_grid(&axis, &axis, 1.0).unwrap_err();
    assert!(
        matches!(
            e,
            Error::LimitExceeded {
                what: "grid cells",
                ..
            }
        ),
        "{e}"
    );
    assert!(GridAggregator::two_way_grid(&axis, &axis[..2], 1.0).is_err());
    let side: Vec<f64> = (0..512).map(|i| i as f64).collect();
    assert_eq!(MAX_GRID_CELLS, 512 * 512);
    assert!(GridAggregator::two_way_grid(&side, &side[..1], 1.0).is_ok());
}

#[test]
fn counters_never_wrap() {
    // A restored aggregate at n = u64::MAX: adding is refused, unchanged.
    let mut a = Aggregator::new();
    a.add(2.0).unwrap();
    let json =
        serde_json::to_string(&a)
            .unwrap()
            .replacen("\"n\":1", "\"n\":18446744073709551615", 1);
    let mut big: Aggregator = serde_json::from_str(&json).unwrap();
    let before = big.clone();
    assert!(matches!(big.add(1.0), Err(Error::Overflow { .. })));
    assert_eq!(big, before);
    assert!(matches!(big.merge(&a), Err(Error::Overflow { .. })));
    assert_eq!(big, before);
    // A state whose sums are larger than n finite values can make is
    // refused on restore (a forged top limb).
    for forged in [
        r#"{"n":1,"sum":{"offset":67,"limbs":[2147483647]},"sum_sq":{"offset":133,"limbs":[2147483647]}}"#,
        r#"{"n":3,"sum":{"offset":0,"limbs":[]},"sum_sq":{"offset":133,"limbs":[1]}}"#,
    ] {
        assert!(
            serde_json::from_str::<Aggregator>(forged).is_err(),
            "{forged}"
        );
    }
    // Near capacity: n = 2^62 reports of about 2^1024 each (Σx = 2^2160,
    // Σx² = 2^4258, so n Σx² = (Σx)²), merged with itself, fits exactly;
    // one more merge would pass 2^64 reports and is refused instead of
    // wrapping or truncating the top limb.
    let top = format!(
        r#"{{"n":{},"sum":{{"offset":67,"limbs":[{}]}},"sum_sq":{{"offset":133,"limbs":[4]}}}}"#,
        1u64 << 62,
        1i64 << 16,
    );
    let mut near: Aggregator = serde_json::from_str(&top).unwrap();
    let copy = near.clone();
    near.merge(&copy).unwrap();
    assert_eq!(near.n(), 1 << 63);
    let doubled = near.clone();
    assert!(matches!(near.merge(&doubled), Err(Error::Overflow { .. })));
    assert_eq!(near, doubled);
    assert!(near.estimate().is_some());
}

#[test]
fn the_audit_refuses_what_it_cannot_audit() {
    let cases: [(f64, f64, f64, usize); 5] = [
        (1e20, 1e-10, 0.01, 100),
        (1e308, 1e307, 0.01, 100),
        (100.0, 20.0, 0.05, usize::MAX),
        (100.0, 20.0, 0.05, 1_000_000_000_000),
        (100.0, 20.0, 1e-200, 100),
    ];
    for (t, w, eps, pairs) in cases {
        // Parameters too extreme for a finite release are already refused
        // by the constructor (a typed error, docs/MATH.md §8.1); the rest
        // must be refused by the audit.
        let Ok(q) = SoftThreshold::new(t, w) else {
            continue;
        };
        let m = Mechanism::polyplace(eps).unwrap();
        let r = audit_mechanism(&m, &q, pairs, 1);
        assert!(
            matches!(
                r,
                Err(Error::Unauditable { .. } | Error::LimitExceeded { .. })
            ),
            "T={t} w={w} eps={eps} pairs={pairs}: {r:?}"
        );
    }
    const { assert!(MAX_AUDIT_PAIRS >= 10_000) };
}

#[test]
fn rejection_messages_cannot_forge_log_lines() {
    let forged = "{\"version\":1,\"a\\nline 1: report accepted\\n\\u001b[2J\":1}\n";
    let big = format!("{{\"version\":1,\"{}\":1}}\n", "x".repeat(10 << 20));
    let mut reader = RecordReader::new(forged.as_bytes(), FormatChoice::Json, 1 << 16).unwrap();
    let mut agg = ReportAggregator::new(policy(), AggregationConfig::default());
    let mut messages = Vec::new();
    agg.ingest(&mut reader, |_, why| messages.push(why.to_string()))
        .unwrap();
    let direct = Report::from_json(&big).unwrap_err().to_string();
    messages.push(direct);
    for m in &messages {
        assert!(!m.contains('\n') && !m.contains('\u{1b}'), "{m}");
        assert!(m.len() < 1000, "{} bytes", m.len());
    }
}

#[test]
fn mechanisms_and_budgets_are_never_mixed() {
    let mut input = String::new();
    for (m, eps, delta, v) in [
        (MechanismName::Polyplace, EPS, 0.0, 0.2),
        (MechanismName::APriori, EPS, 0.0, 0.9),
        (MechanismName::Polyplace, 2.0 * EPS, 0.0, 0.4),
        (MechanismName::Laplace, EPS, 1e-6, 0.6),
        (MechanismName::Polyplace, EPS, 0.0, 0.4),
    ] {
        input.push_str(&Report::new(threshold(), m, eps, delta, v).to_json_line());
        input.push('\n');
    }
    let (_, _, agg) = ingest(input.as_bytes(), AggregationConfig::default());
    let groups: Vec<(MechanismName, f64, u64)> = agg
        .estimates()
        .iter()
        .map(|e| (e.mechanism, e.epsilon, e.estimate.n))
        .collect();
    assert_eq!(groups.len(), 4);
    assert!(groups.contains(&(MechanismName::Polyplace, EPS, 2)));
    assert!(groups.contains(&(MechanismName::APriori, EPS, 1)));
}

#[test]
fn clipping_bounds_follow_the_mechanism() {
    // PolyPlace: σ_max = L_global/γ = (1/w)/(ε/9) = 9 at ε = 1/w.
    let p = ClipPolicy::for_reports(
        &threshold(),
        MechanismName::Polyplace,
        EPS,
        0.0,
        ClipLevel::default(),
    )
    .unwrap();
    assert!((p.sigma_max() - 9.0).abs() < 1e-12);
    let [lo, hi] = p.bounds();
    assert!((hi - 1.0 - p.z() * 9.0).abs() < 1e-12 && (lo + p.z() * 9.0).abs() < 1e-12);
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(200))]
    /// Any bytes: every record is counted exactly once, never a panic.
    #[test]
    fn every_record_is_counted_once(bytes in proptest::collection::vec(any::<u8>(), 0..2000),
                                    binary in any::<bool>(), max in 1usize..300) {
        let format = if binary { FormatChoice::Binary } else { FormatChoice::Json };
        let mut reader = RecordReader::new(&bytes[..], format, max).unwrap();
        let mut agg = ReportAggregator::new(policy(), AggregationConfig::default());
        let counts = agg.ingest(&mut reader, |_, _| {}).unwrap();
        let delim = if binary { 0 } else { b'\n' };
        let delims = bytes.iter().filter(|&&b| b == delim).count() as u64;
        let trailing = u64::from(bytes.last().is_some_and(|&b| b != delim));
        prop_assert_eq!(counts.records, delims + trailing);
        prop_assert_eq!(counts.accepted + counts.rejected + counts.skipped, counts.records);
    }
}

#[test]
fn partial_states_merge_bit_for_bit_and_refuse_what_does_not_fit() {
    // Sharded aggregation (Spark): any split of the stream, merged through
    // serialized states, gives the single aggregator's state and lines.
    let all = poisoned(&honest_lines(3_000), 1e4, 2);
    let (_, _, whole) = ingest(all.as_bytes(), AggregationConfig::default());
    let cut = all[..all.len() / 3].rfind('\n').unwrap() + 1;
    let (_, _, a) = ingest(&all.as_bytes()[..cut], AggregationConfig::default());
    let (_, _, b) = ingest(&all.as_bytes()[cut..], AggregationConfig::default());
    let mut reducer = ReportAggregator::new(policy(), AggregationConfig::default());
    for part in [&b, &a] {
        let json = serde_json::to_string(&part.state()).unwrap();
        reducer
            .merge_state(&serde_json::from_str(&json).unwrap())
            .unwrap();
    }
    assert_eq!(reducer.state(), whole.state());
    let lines = |agg: &ReportAggregator| -> Vec<String> {
        agg.estimates().iter().map(|g| g.to_json_line()).collect()
    };
    assert_eq!(lines(&reducer), lines(&whole));
    assert_eq!(whole.estimates()[0].clip.unwrap().clipped, 2);

    // Refused, leaving the reducer unchanged: another clipping level, an
    // order-dependent estimator, a group the policy refuses.
    let before = reducer.state();
    let fixed = AggregationConfig {
        clip: Some(ClipLevel::Fixed(1.0)),
        ..AggregationConfig::default()
    };
    let (_, _, other) = ingest(all.as_bytes(), fixed);
    assert!(matches!(
        reducer.merge_state(&other.state()),
        Err(RecordRejection::IncompatibleState { .. })
    ));
    let mut mom = ReportAggregator::new(
        policy(),
        AggregationConfig {
            estimator: Estimator::MedianOfMeans { buckets: 4 },
            ..AggregationConfig::default()
        },
    );
    assert!(mom.merge_state(&whole.state()).is_err());
    let mut strict = ReportAggregator::new(
        ValidationPolicy::new(EPS / 2.0, 0.0).unwrap(),
        AggregationConfig::default(),
    );
    assert_eq!(
        strict.merge_state(&whole.state()).unwrap_err().code(),
        "epsilon-out-of-policy"
    );
    assert_eq!(reducer.state(), before);
}

// ---- Issue 19, items 8, 11, 13 ----------------------------------------

/// 4,096 reports of the honest query with budgets one ulp apart.
fn ulp_flood(count: usize) -> String {
    let mut s = String::new();
    let mut eps = EPS;
    for _ in 0..count {
        eps = f64::from_bits(eps.to_bits() + 1);
        s.push_str(
            &Report::new(threshold(), MechanismName::Polyplace, eps, 0.0, 0.5).to_json_line(),
        );
        s.push('\n');
    }
    s
}

#[test]
fn group_exhaustion_never_costs_a_configured_task() {
    // Issue 19 item 8: 4,096 distinct ε one ulp apart, then 100,000 honest
    // reports. Before: every honest report `too-many-groups`.
    let flood = ulp_flood(4_096);
    let honest = honest_lines(100_000);
    let input = format!("{flood}{honest}");
    let task = geopriv::server::Task::new(threshold(), MechanismName::Polyplace, EPS, 0.0);
    // With the task set (also through an allow-list of queries).
    for policy in [
        policy().only_tasks(std::slice::from_ref(&task)).unwrap(),
        policy()
            .only_queries(&[threshold()])
            .only_tasks(std::slice::from_ref(&task))
            .unwrap(),
    ] {
        let mut reader = RecordReader::new(input.as_bytes(), FormatChoice::Json, 1 << 16).unwrap();
        let mut agg = ReportAggregator::new(policy, AggregationConfig::default());
        let mut codes = std::collections::BTreeSet::new();
        let counts = agg
            .ingest(&mut reader, |_, why| {
                codes.insert(why.code());
            })
            .unwrap();
        assert_eq!((counts.accepted, counts.rejected), (100_000, 4_096));
        assert_eq!(codes.into_iter().collect::<Vec<_>>(), ["not-a-task"]);
        assert_eq!(agg.estimates()[0].estimate.n, 100_000);
    }
    // Without tasks: at most 16 groups per query, so a flood of one query
    // leaves the table to the others, and an existing group is never
    // refused. Another query (T = 90,000) opens after the flood.
    let other = QueryDescriptor::Threshold {
        threshold: 90_000.0,
        width: 20_000.0,
    };
    let first = Report::new(threshold(), MechanismName::Polyplace, EPS, 0.0, 0.5).to_json_line();
    let late = Report::new(other, MechanismName::Polyplace, EPS, 0.0, 0.5).to_json_line();
    let input = format!("{first}\n{flood}{honest}{late}\n");
    let config = AggregationConfig {
        max_groups: 64,
        ..AggregationConfig::default()
    };
    let (counts, rejected, agg) = ingest(input.as_bytes(), config);
    assert_eq!(counts.accepted, 1 + 15 + 100_000 + 1);
    assert!(rejected
        .iter()
        .all(|(_, r)| r.code() == "too-many-groups-for-query"));
    assert_eq!(agg.groups(), 17);
    // Tasks are checked by the policy: a task outside it is refused.
    assert!(ValidationPolicy::new(EPS / 2.0, 0.0)
        .unwrap()
        .only_tasks(&[task])
        .is_err());
}

#[test]
fn the_query_file_names_tasks_and_ends_on_endless_input() {
    let text = format!(
        "# tasks\n{} polyplace {EPS:e} 0\n{} polyplace {EPS:e} 0 3\n",
        threshold().canonical_id(),
        threshold().canonical_id()
    );
    let f = geopriv::server::ingest::read_query_file(text.as_bytes(), 10).unwrap();
    assert_eq!((f.queries.len(), f.tasks.len()), (1, 2));
    assert!(
        geopriv::server::ingest::read_query_file(&b"threshold:T=1;w=1 polyplace 1\n"[..], 10)
            .unwrap_err()
            .starts_with("line 1:")
    );
    // `--queries /dev/zero`: one endless record, an error after 64 MiB.
    let zero = std::io::repeat(0).take(geopriv::server::ingest::MAX_QUERY_FILE_BYTES + 10);
    assert!(geopriv::server::ingest::read_query_file(zero, 10).is_err());
}

#[test]
fn forged_partial_states_are_refused() {
    // Issue 19 item 11. A shard's state, serialized, then forged.
    let (_, _, honest) = ingest(honest_lines(1_000).as_bytes(), AggregationConfig::default());
    let state = serde_json::to_value(honest.state()).unwrap();
    let refused = |v: &serde_json::Value| -> String {
        let mut reducer = ReportAggregator::new(policy(), AggregationConfig::default());
        let before = reducer.state();
        let code =
            match serde_json::from_value::<geopriv::server::ingest::AggregatorState>(v.clone()) {
                Err(_) => "unparsable".to_string(),
                Ok(s) => match reducer.merge_state(&s) {
                    Ok(()) => "merged".to_string(),
                    Err(why) => why.code().to_string(),
                },
            };
        if code != "merged" {
            assert_eq!(reducer.state(), before, "a refusal changes nothing");
        }
        code
    };
    assert_eq!(refused(&state), "merged");
    // n = 1 and a sum of 1e300 in a clipped group.
    let mut one = Aggregator::new();
    one.add(1e300).unwrap();
    let mut forged = state.clone();
    forged["groups"][0]["aggregate"] = serde_json::to_value(&one).unwrap();
    forged["groups"][0]["clipped"] = 0.into();
    assert_eq!(refused(&forged), "forged-state");
    // Sums just inside and just outside the bound B of the group.
    let [lo, hi] = honest.estimates()[0].clip.unwrap().bounds;
    for (v, ok) in [
        (hi, true),
        (lo, true),
        (hi * (1.0 + 1e-15), false),
        (lo - 1e-9, false),
    ] {
        let mut a = Aggregator::new();
        a.add_all(&[v; 3]).unwrap();
        let mut f = state.clone();
        f["groups"][0]["aggregate"] = serde_json::to_value(&a).unwrap();
        f["groups"][0]["clipped"] = 0.into();
        assert_eq!(
            refused(&f),
            if ok { "merged" } else { "forged-state" },
            "{v}"
        );
    }
    // Σx² beyond B²·n with Σx inside: values ±2B around 0.
    let mut wide = Aggregator::new();
    wide.add_all(&[2.0 * hi.abs().max(lo.abs()), -2.0 * hi.abs().max(lo.abs())])
        .unwrap();
    let mut f = state.clone();
    f["groups"][0]["aggregate"] = serde_json::to_value(&wide).unwrap();
    f["groups"][0]["clipped"] = 0.into();
    assert_eq!(refused(&f), "forged-state");
    // Empty groups (4,096 of them would fill the table).
    let mut f = state.clone();
    f["groups"][0]["aggregate"] = serde_json::to_value(Aggregator::new()).unwrap();
    f["groups"][0]["clipped"] = 0.into();
    assert_eq!(refused(&f), "forged-state");
    // More clipped than reports.
    let mut f = state.clone();
    f["groups"][0]["clipped"] = 1_001.into();
    assert_eq!(refused(&f), "forged-state");
    // Unknown fields, at the top and in a group.
    let mut f = state.clone();
    f["extra"] = 1.into();
    assert_eq!(refused(&f), "unparsable");
    let mut f = state.clone();
    f["groups"][0]["weight"] = 1.into();
    assert_eq!(refused(&f), "unparsable");
}

#[test]
fn escaping_covers_format_characters_and_backslashes() {
    // Issue 19 item 13: category Cf (bidi, invisible operators, soft
    // hyphen, tags) and backslashes reach the log escaped.
    for s in [
        "a\u{61c}b",
        "a\u{2061}b",
        "a\u{2064}b",
        "a\u{ad}b",
        "a\u{180e}b",
        "a\u{fff9}b",
        "a\u{e0041}b",
        // In JSON `\\` is one backslash: the key is `x\nline 2: ...`
        // with a literal backslash, which must not print like an escaped
        // newline.
        "x\\\\nline 2: accepted",
    ] {
        let line = format!(
            "{{\"v\":1,\"query\":\"threshold:T=1;w=1\",\"mechanism\":\"polyplace\",\"epsilon\":0.5,\"delta\":0,\"value\":0.5,\"{s}\":1}}\n"
        );
        let (_, rejected, _) = ingest(line.as_bytes(), AggregationConfig::default());
        let msg = rejected[0].1.to_string();
        assert!(
            msg.chars()
                .all(|c| !geopriv::server::escape::needs_escape(c)),
            "{msg:?}"
        );
        assert!(!msg.contains("x\\nline"), "{msg:?}");
    }
}
