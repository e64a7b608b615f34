//! Server-side throughput: aggregating in-memory values (target >= 20 M/s
//! per core) and decoding binary report frames + validating + aggregating
//! (target >= 2 M/s per core).

use criterion::{black_box, criterion_group, criterion_main, Criterion, Throughput};
use geopriv::report::{self, MechanismName, QueryDescriptor, Report};
use geopriv::server::aggregate::Aggregator;
use geopriv::ValidationPolicy;
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};

const N: usize = 1_000_000;

fn values() -> Vec<f64> {
    let mut rng = SmallRng::seed_from_u64(1);
    (0..N)
        .map(|_| {
            let f = if rng.random::<f64>() < 0.3 { 1.0 } else { 0.0 };
            let u: f64 = rng.random::<f64>() - 0.5;
            f + 3.0 * (std::f64::consts::PI * u).tan()
        })
        .collect()
}

fn in_memory(c: &mut Criterion) {
    let xs = values();
    let mut g = c.benchmark_group("aggregate");
    g.throughput(Throughput::Elements(N as u64));
    g.bench_function("add_in_memory", |b| {
        b.iter(|| {
            let mut a = Aggregator::new();
            for &x in black_box(&xs) {
                a.add(x).unwrap();
            }
            black_box(a)
        })
    });
    g.finish();
}

fn decode_and_aggregate(c: &mut Criterion) {
    let q = QueryDescriptor::Threshold {
        threshold: 100_000.0,
        width: 20_000.0,
    };
    let mut stream = Vec::new();
    for x in values() {
        let r = Report::new(q.clone(), MechanismName::Polyplace, 1.0 / 1000.0, 0.0, x);
        stream.extend_from_slice(&r.to_frame());
    }
    let policy = ValidationPolicy::new(0.01, 0.0).unwrap().only_queries([&q]);
    let mut g = c.benchmark_group("aggregate");
    g.throughput(Throughput::Elements(N as u64));
    g.sample_size(20);
    g.bench_function("decode_validate_add_frames", |b| {
        b.iter(|| {
            let mut a = Aggregator::new();
            for r in report::frames(black_box(&stream)) {
                let r = r.unwrap();
                policy.validate(&r).unwrap();
                a.add(r.value).unwrap();
            }
            black_box(a)
        })
    });
    g.bench_function("decode_frames_only", |b| {
        b.iter(|| {
            let mut s = 0.0;
            for r in report::frames(black_box(&stream)) {
                s += r.unwrap().value;
            }
            black_box(s)
        })
    });
    let raw: Vec<Vec<u8>> = report::frames(&stream)
        .map(|r| r.unwrap().to_bytes())
        .collect();
    g.bench_function("postcard_from_bytes_only", |b| {
        b.iter(|| {
            let mut s = 0.0;
            for r in black_box(&raw) {
                s += Report::from_bytes(r).unwrap().value;
            }
            black_box(s)
        })
    });
    g.finish();
}

/// The hardened reader on JSON lines in memory (10^6 reports over 1,000
/// threshold queries, the layout of examples/gen_reports.rs, default
/// policy and clipping, `--format auto`): `ingest_parallel` on 1 and 2
/// threads (issue 22 item 4; the two give bit-identical estimates).
fn ingest_json_lines(c: &mut Criterion) {
    use geopriv::server::ingest::{
        AggregationConfig, FormatChoice, RecordReader, ReportAggregator,
    };
    let mut rng = SmallRng::seed_from_u64(7);
    let mut text = Vec::new();
    for i in 0..N {
        let q = QueryDescriptor::Threshold {
            threshold: 10_000.0 + 1_000.0 * (i % 1_000) as f64,
            width: 20_000.0,
        };
        let value = rng.random::<f64>() * 40.0 - 19.5;
        let r = Report::new(q, MechanismName::Polyplace, 1e-4, 0.0, value);
        text.extend_from_slice(r.to_json_line().as_bytes());
        text.push(b'\n');
    }
    let policy = ValidationPolicy::new(1.0, 1e-4).unwrap();
    let mut g = c.benchmark_group("aggregate");
    g.throughput(Throughput::Elements(N as u64));
    g.sample_size(10);
    for threads in [1, 2] {
        g.bench_function(format!("ingest_json_lines_threads_{threads}"), |b| {
            b.iter(|| {
                let mut reader =
                    RecordReader::new(black_box(&text[..]), FormatChoice::Auto, 1 << 16).unwrap();
                let mut agg = ReportAggregator::new(policy.clone(), AggregationConfig::default());
                let counts = agg
                    .ingest_parallel(&mut reader, threads, |_, _| {})
                    .unwrap();
                assert_eq!(counts.accepted, N as u64);
                black_box(agg.groups())
            })
        });
    }
    g.finish();
}

criterion_group!(benches, in_memory, decode_and_aggregate, ingest_json_lines);
criterion_main!(benches);
