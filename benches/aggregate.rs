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

criterion_group!(benches, in_memory, decode_and_aggregate);
criterion_main!(benches);
