//! Criterion benchmarks of the Gaussian KDE smooth sensitivity (issue: at
//! most 1 µs per call in 2-D).
use criterion::{black_box, criterion_group, criterion_main, Criterion};
use geopriv::{GaussianKde, Growth, Query};

fn points() -> Vec<[f64; 2]> {
    // Scaled distances spread over the regimes of the outer search: the
    // centre, inside the inflection radius, near 1, between 1 and the
    // turning points, and far away.
    [0.0, 0.3, 0.8, 0.99, 1.2, 1.8, 2.4, 3.5, 6.0, 15.0]
        .iter()
        .map(|&c| [100.0 + 0.6 * c * 50.0, 200.0 + 0.8 * c * 50.0])
        .collect()
}

fn bench_kde(c: &mut Criterion) {
    let q = GaussianKde::new(&[100.0, 200.0], 50.0).unwrap();
    let pts = points();
    for (name, growth) in [
        ("exp", Growth::exponential(0.02).unwrap()),
        ("linear", Growth::linear(0.02).unwrap()),
    ] {
        c.bench_function(&format!("kde_2d_smooth_sensitivity_{name}"), |b| {
            let mut i = 0;
            b.iter(|| {
                i = (i + 1) % pts.len();
                black_box(q.smooth_sensitivity(black_box(&pts[i]), growth).unwrap())
            })
        });
    }
    // The regimes with an interior maximiser (the slowest branch): γh = 0.5
    // with x at the centre or between the turning points (exponential), and
    // far away (linear).
    let h = 50.0;
    let interior = |cs: &[f64]| -> Vec<[f64; 2]> {
        cs.iter()
            .map(|&c| [100.0 + 0.6 * c * h, 200.0 + 0.8 * c * h])
            .collect()
    };
    for (name, growth, pts) in [
        (
            "exp",
            Growth::exponential(0.5 / h).unwrap(),
            interior(&[0.0, 1.5, 2.0, 4.0]),
        ),
        (
            "linear",
            Growth::linear(0.5 / h).unwrap(),
            interior(&[4.0, 8.0, 20.0, 50.0]),
        ),
    ] {
        c.bench_function(&format!("kde_2d_smooth_sensitivity_interior_{name}"), |b| {
            let mut i = 0;
            b.iter(|| {
                i = (i + 1) % pts.len();
                black_box(q.smooth_sensitivity(black_box(&pts[i]), growth).unwrap())
            })
        });
    }
    c.bench_function("kde_2d_pointwise_lipschitz", |b| {
        let mut i = 0;
        b.iter(|| {
            i = (i + 1) % pts.len();
            black_box(q.pointwise_lipschitz(black_box(&pts[i])).unwrap())
        })
    });
}

criterion_group!(benches, bench_kde);
criterion_main!(benches);
