//! Per-element cost of the packed array entry points of the bindings
//! (issue 23 item 2): `privatize_packed_unmetered` (n simulated devices),
//! `ReportServer::add_release_array` and `add_json_packed` (a column of
//! JSON reports), and the JSON decode alone: `decode_json_record` record
//! by record, the `JsonColumnDecoder` (header parse reused) and the serde
//! decoder. Throughput is per element; the Python timing of the same
//! paths, marshalling included, is in tests/python/test_native.py.
//!
//! `cargo bench -p geopriv-ffi --bench arrays -- --warm-up-time 1 --measurement-time 3`

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use geopriv_ffi::{GeoMechanism, GeoQuery, ReportPolicy, ReportServer, ServerConfig};

const N: usize = 100_000;

fn packed(values: &[f64]) -> Vec<u8> {
    values.iter().flat_map(|v| v.to_le_bytes()).collect()
}

fn bench(c: &mut Criterion) {
    let q = GeoQuery::threshold(100_000.0, 20_000.0).unwrap();
    let m = GeoMechanism::polyplace(2e-4).unwrap();
    let xs: Vec<f64> = (0..N)
        .map(|i| 40_000.0 + (i % 1000) as f64 * 100.0)
        .collect();
    let bytes = packed(&xs);
    let mut g = c.benchmark_group("arrays");
    g.throughput(Throughput::Elements(N as u64));
    g.sample_size(10);
    g.bench_function("privatize_packed_unmetered/threshold/polyplace", |b| {
        b.iter(|| {
            m.privatize_packed_unmetered(q.clone(), bytes.clone())
                .unwrap()
        })
    });
    let seeded = m.seeded(1);
    let arr = seeded
        .privatize_packed_unmetered(q.clone(), bytes.clone())
        .unwrap();
    let policy = ReportPolicy::new(1.0, 0.0).unwrap().accept_seeded();
    g.bench_function("add_release_array", |b| {
        b.iter(|| {
            ReportServer::new(policy.clone(), ServerConfig::new())
                .add_release_array(arr.clone())
                .unwrap()
        })
    });
    let lines = arr.to_json_lines();
    let mut lengths = Vec::new();
    for l in lines.lines() {
        lengths.extend_from_slice(&(l.len() as i64).to_le_bytes());
    }
    let data: Vec<u8> = lines.lines().flat_map(|l| l.bytes()).collect();
    g.bench_function("add_json_packed", |b| {
        b.iter(|| {
            ReportServer::new(policy.clone(), ServerConfig::new())
                .add_json_packed(data.clone(), lengths.clone())
                .unwrap()
        })
    });
    g.bench_function("decode_json_record_only", |b| {
        b.iter(|| {
            lines
                .lines()
                .filter(|l| {
                    matches!(
                        geopriv::server::ingest::decode_json_record(l.as_bytes()),
                        geopriv::server::ingest::Decoded::Report(_)
                    )
                })
                .count()
        })
    });
    g.bench_function("json_column_decoder_only", |b| {
        b.iter(|| {
            let mut d = geopriv::server::ingest::JsonColumnDecoder::default();
            lines
                .lines()
                .filter(|l| {
                    matches!(
                        d.decode(l.as_bytes()),
                        geopriv::server::ingest::Decoded::Report(_)
                    )
                })
                .count()
        })
    });
    // The path seeded lines took before the fast path read `"seeded":true`.
    g.bench_function("serde_from_json_only", |b| {
        b.iter(|| {
            lines
                .lines()
                .filter(|l| geopriv::Report::from_json(l).is_ok())
                .count()
        })
    });
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
