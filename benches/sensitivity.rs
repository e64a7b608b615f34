//! Cost of one `smooth_sensitivity` call per query family and growth.
//!
//! Each benchmark cycles through a small array of varied points (on the
//! ramp, near it, far away, at region boundaries), so the reported time is
//! the mean cost of one call over those cases. Target: <= 50 ns per call.
//!
//! Run: `cargo bench --bench sensitivity`.

use criterion::{black_box, criterion_group, criterion_main, Criterion};
use geopriv::{Growth, Query, SoftInterval, SoftThreshold, TwoWayThreshold};
use std::time::Duration;

/// Benchmarks `query.smooth_sensitivity` over `points` (cycled) for both
/// growth functions with rate `gamma`.
fn bench_query<Q: Query>(
    c: &mut Criterion,
    name: &str,
    query: &Q,
    points: &[Vec<f64>],
    gamma: f64,
) {
    let mut group = c.benchmark_group(format!("smooth_sensitivity/{name}"));
    for (label, growth) in [
        ("exp", Growth::exponential(gamma).unwrap()),
        ("linear", Growth::linear(gamma).unwrap()),
    ] {
        group.bench_function(label, |b| {
            let mut i = 0;
            b.iter(|| {
                i = if i + 1 == points.len() { 0 } else { i + 1 };
                query
                    .smooth_sensitivity(black_box(&points[i]), black_box(growth))
                    .unwrap()
            })
        });
    }
    group.finish();
}

fn one_dimensional(c: &mut Criterion) {
    // Incomes: threshold at $100k with a $20k ramp; γ = ε/15 for ε = 1/12000.
    let gamma = 1.0 / 180_000.0;
    let incomes: Vec<Vec<f64>> = [
        1_000.0, 42_000.0, 85_000.0, 89_999.0, 90_000.0, 95_000.0, 100_000.0, 109_000.0, 110_000.0,
        120_000.0, 250_000.0, 1e6, 3e7, 64_321.5, 99_999.99, 133_333.3,
    ]
    .iter()
    .map(|&x| vec![x])
    .collect();
    let threshold = SoftThreshold::new(100_000.0, 20_000.0).unwrap();
    bench_query(c, "threshold", &threshold, &incomes, gamma);
    let interval = SoftInterval::new(50_000.0, 100_000.0, 20_000.0).unwrap();
    bench_query(c, "interval", &interval, &incomes, gamma);
}

fn two_way(c: &mut Criterion) {
    // (income, debt) thresholds (100k, 180k), τ = 24k.
    let query = TwoWayThreshold::new(100_000.0, 180_000.0, 24_000.0).unwrap();
    let c0 = query.corner();
    let points: Vec<Vec<f64>> = [
        [10_000.0, 20_000.0],
        [95_000.0, 400_000.0],
        [400_000.0, 175_000.0],
        [c0[0], c0[1] - 10_000.0],
        [c0[0] - 10_000.0, c0[1]],
        [c0[0] - 20_000.0, c0[1] - 20_000.0],
        [c0[0] + 5_000.0, c0[1] + 90_000.0],
        [c0[0] + 1e6, c0[1] + 2e6],
        [c0[0] - 30_000.0, c0[1] - 12_000.0],
        [88_000.0, 150_000.0],
        [150_000.0, 168_000.0],
        [5e6, -3e6],
        [112_345.0, 191_234.0],
        [60_000.0, 260_000.0],
        [c0[0] - 1.0, c0[1] + 1.0],
        [250_000.0, 250_000.0],
    ]
    .iter()
    .map(|p| p.to_vec())
    .collect();
    bench_query(c, "two_way", &query, &points, 1.0 / 180_000.0);
}

// ---------------------------------------------------------------------------
// KDE benches go here: GaussianKde::smooth_sensitivity (d = 1, 2, 3; points
// at scaled radii c ~ 0, 1, 2.57 and far in the tail; both growths), added
// to `criterion_group!` below once the KDE sensitivity has landed. Do not
// bench the placeholder.
// ---------------------------------------------------------------------------

fn config() -> Criterion {
    Criterion::default()
        .warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(2))
        .sample_size(50)
}

criterion_group! {
    name = benches;
    config = config();
    targets = one_dimensional, two_way
}
criterion_main!(benches);
