//! The central median: sorting plus the exact β-smooth sensitivity of 10^6
//! values in [0, Λ] (O(n log n)), and the whole release.
//!
//! Run: `cargo bench --bench central`.

use criterion::{black_box, criterion_group, criterion_main, Criterion};
use geopriv::central::median::{CentralNoise, MedianMechanism, SortedDataset};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use std::time::Duration;

fn median_million(c: &mut Criterion) {
    let mut rng = StdRng::seed_from_u64(1);
    // Log-normal-like trip lengths in km, clipped to Λ = 100.
    let values: Vec<f64> = (0..1_000_000)
        .map(|_| {
            let u: f64 = rng.random::<f64>().max(1e-12);
            (3.0 * (-u.ln()).powf(1.5)).min(100.0)
        })
        .collect();
    let data = SortedDataset::new(&values, 100.0).unwrap();
    let m = data.quantile_rank(0.5).unwrap();
    let mut group = c.benchmark_group("central/median_1e6");
    group.sample_size(10);
    group.measurement_time(Duration::from_secs(10));
    group.bench_function("smooth_sensitivity_sorted", |b| {
        b.iter(|| {
            data.smooth_sensitivity(black_box(m), black_box(0.1 / 9.0))
                .unwrap()
        })
    });
    group.bench_function("sort_and_smooth_sensitivity", |b| {
        b.iter(|| {
            let d = SortedDataset::new(black_box(&values), 100.0).unwrap();
            d.smooth_sensitivity(m, 0.1 / 9.0).unwrap()
        })
    });
    let mech = MedianMechanism::new(CentralNoise::PolyPlace, 0.1, 100.0).unwrap();
    group.bench_function("release_polyplace", |b| {
        let mut r = StdRng::seed_from_u64(2);
        b.iter(|| {
            mech.release_quantile(black_box(&values), 0.5, &mut r)
                .unwrap()
        })
    });
    group.finish();
}

criterion_group!(benches, median_million);
criterion_main!(benches);
