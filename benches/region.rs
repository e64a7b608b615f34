//! Cost of one region evaluation (value, smooth sensitivity, privatize) on
//! a 1,000-vertex polygon (docs/MATH.md §13.5), and on 100- and 10,000-vertex
//! ones for the scaling; `signed_distance_unindexed` is the brute pass over
//! every segment that the R-tree replaces (docs/MATH.md §13.7).
//!
//! Run: `cargo bench --bench region -- --warm-up-time 1 --measurement-time 3`.

use criterion::{black_box, criterion_group, criterion_main, Criterion};
use geo::{Coord, LineString, Polygon};
use geopriv::{Growth, Mechanism, Query, RegionQuery};
use rand::rngs::StdRng;
use rand::SeedableRng;

/// A star-shaped "flower" of `n` vertices, radius 1 km ± 30%, seven petals
/// (concave, many reflex vertices).
fn flower(n: usize) -> RegionQuery {
    let ring: Vec<Coord<f64>> = (0..n)
        .map(|i| {
            let t = i as f64 * std::f64::consts::TAU / n as f64;
            let r = 1000.0 * (1.0 + 0.3 * (7.0 * t).sin());
            Coord {
                x: r * t.cos(),
                y: r * t.sin(),
            }
        })
        .collect();
    RegionQuery::new(Polygon::new(LineString::new(ring), vec![]), 100.0).unwrap()
}

fn points() -> Vec<Vec<f64>> {
    // Inside, on the ramp, near and far outside.
    vec![
        vec![0.0, 0.0],
        vec![500.0, 200.0],
        vec![1000.0, 0.0],
        vec![1250.0, 300.0],
        vec![-3000.0, 2000.0],
        vec![20.0, -900.0],
    ]
}

fn region(c: &mut Criterion) {
    let pts = points();
    let g = Growth::exponential(1e-3).unwrap();
    let m = Mechanism::polyplace(1e-3).unwrap();
    for n in [100usize, 1000, 10_000] {
        let q = flower(n);
        let mut group = c.benchmark_group(format!("region/{n}-vertices"));
        group.bench_function("value", |b| {
            let mut i = 0;
            b.iter(|| {
                i = (i + 1) % pts.len();
                q.value(black_box(&pts[i])).unwrap()
            })
        });
        group.bench_function("signed_distance_unindexed", |b| {
            let mut i = 0;
            b.iter(|| {
                i = (i + 1) % pts.len();
                q.signed_distance_unindexed(black_box(&pts[i])).unwrap()
            })
        });
        group.bench_function("smooth_sensitivity", |b| {
            let mut i = 0;
            b.iter(|| {
                i = (i + 1) % pts.len();
                q.smooth_sensitivity(black_box(&pts[i]), g).unwrap()
            })
        });
        group.bench_function("privatize_polyplace", |b| {
            let mut rng = StdRng::seed_from_u64(1);
            let mut i = 0;
            b.iter(|| {
                i = (i + 1) % pts.len();
                m.privatize_unmetered(&q, black_box(&pts[i]), &mut rng)
                    .unwrap()
            })
        });
        group.finish();
    }
}

criterion_group!(benches, region);
criterion_main!(benches);
