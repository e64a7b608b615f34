//! Criterion benchmark of the server map (issue 11: 10^6 noisy locations
//! into a 61 × 61 map in at most 2 s): parse the JSON report lines, bin
//! them into exact integer counts, FFT, and apply the kernel with standard
//! errors. The whole-process timing from a file is in BENCHMARKS.md.
use criterion::{black_box, criterion_group, criterion_main, Criterion};
use geopriv::map::{KdeGrid, MapAggregator, MapMechanism, MapRelease, MapReport, QuerySet};
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};

fn bench_map(c: &mut Criterion) {
    let grid = KdeGrid::square(20_000.0, 61).unwrap();
    let eps = 1.0 / grid.bandwidth(); // εh = 1
    let set = QuerySet::Kde(grid);
    let rel = MapRelease::new(set.clone(), MapMechanism::APriori, eps).unwrap();
    let mut rng = SmallRng::seed_from_u64(1);
    let n = 1_000_000;
    let lines: Vec<String> = (0..n)
        .map(|_| {
            let x = [
                rng.random::<f64>() * 20_000.0,
                rng.random::<f64>() * 20_000.0,
            ];
            serde_json::to_string(&rel.release_unmetered(&x, &mut rng).unwrap()).unwrap()
        })
        .collect();
    let mut group = c.benchmark_group("map");
    group.sample_size(10);
    group.bench_function("server_map_1e6_reports_61x61_eps_h_1", |b| {
        b.iter(|| {
            let mut agg = MapAggregator::new(set.clone(), MapMechanism::APriori, eps).unwrap();
            for l in &lines {
                let r: MapReport = serde_json::from_str(l).unwrap();
                agg.add(&r).unwrap();
            }
            black_box(agg.estimate(Some(1.0)).unwrap())
        })
    });
    group.finish();
}

criterion_group!(benches, bench_map);
criterion_main!(benches);
