//! Criterion benchmarks of whole releases: smooth sensitivity, noise draw
//! and snapping. Targets: one KDE release in 2-D at most 1.5 µs, one
//! threshold release at most 150 ns.
use criterion::{black_box, criterion_group, criterion_main, Criterion};
use geopriv::{GaussianKde, Mechanism, SecureRng, SoftThreshold};
use rand::rngs::SmallRng;
use rand::SeedableRng;

fn bench_releases(c: &mut Criterion) {
    let threshold = SoftThreshold::new(100_000.0, 20_000.0).unwrap();
    let incomes: Vec<[f64; 1]> = (0..64).map(|i| [20_000.0 + 4_000.0 * i as f64]).collect();
    let kde = GaussianKde::new(&[500.0, -300.0], 250.0).unwrap();
    let places: Vec<[f64; 2]> = (0..64)
        .map(|i| {
            let a = i as f64 * 0.7;
            let r = 40.0 * i as f64;
            [500.0 + r * a.cos(), -300.0 + r * a.sin()]
        })
        .collect();
    for (name, mech) in [
        ("polyplace", Mechanism::polyplace(1e-3).unwrap()),
        ("student_t", Mechanism::student_t(1e-3).unwrap()),
        ("cauchy", Mechanism::cauchy(1e-3).unwrap()),
        ("laplace", Mechanism::laplace(1e-3, 1e-6).unwrap()),
    ] {
        let mut rng = SmallRng::seed_from_u64(7);
        c.bench_function(&format!("release_threshold_{name}"), |b| {
            let mut i = 0;
            b.iter(|| {
                i = (i + 1) % incomes.len();
                black_box(
                    mech.privatize_unmetered(&threshold, black_box(&incomes[i]), &mut rng)
                        .unwrap(),
                )
            })
        });
        c.bench_function(&format!("release_kde_2d_{name}"), |b| {
            let mut i = 0;
            b.iter(|| {
                i = (i + 1) % places.len();
                black_box(
                    mech.privatize_unmetered(&kde, black_box(&places[i]), &mut rng)
                        .unwrap(),
                )
            })
        });
    }
    // The secure default generator (ChaCha12 keyed from the OS).
    let mech = Mechanism::polyplace(1e-3).unwrap();
    let mut secure = SecureRng::new();
    c.bench_function("release_kde_2d_polyplace_secure_rng", |b| {
        let mut i = 0;
        b.iter(|| {
            i = (i + 1) % places.len();
            black_box(
                mech.privatize_unmetered(&kde, black_box(&places[i]), &mut secure)
                    .unwrap(),
            )
        })
    });
}

criterion_group!(benches, bench_releases);
criterion_main!(benches);
