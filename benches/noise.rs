//! One draw of each noise distribution (docs/MATH.md §4), with a seeded SmallRng.
//! Targets: generalized Cauchy and PolyPlace <= 100 ns per draw.

use criterion::{criterion_group, criterion_main, Criterion};
use geopriv::noise::{
    GeneralizedCauchy, Laplace, PlanarLaplace, PolyPlace, SphericalLaplace, StudentT,
};
use rand::distr::Distribution;
use rand::rngs::SmallRng;
use rand::SeedableRng;
use std::hint::black_box;

fn draw<D: Distribution<T>, T>(c: &mut Criterion, name: &str, d: D) {
    let mut rng = SmallRng::seed_from_u64(0x5eed);
    c.bench_function(name, |b| b.iter(|| black_box(&d).sample(&mut rng)));
}

fn noise(c: &mut Criterion) {
    draw(c, "laplace", Laplace::new(1.0).unwrap());
    draw(
        c,
        "gen_cauchy_k4",
        GeneralizedCauchy::new(4.0, 1.0).unwrap(),
    );
    draw(
        c,
        "gen_cauchy_k2.5",
        GeneralizedCauchy::new(2.5, 1.0).unwrap(),
    );
    // Reference: the textbook route (B/(1-B))^{1/k} through rand_distr's Beta.
    {
        let k = 4.0f64;
        let beta = rand_distr::Beta::new(1.0 / k, 1.0 - 1.0 / k).unwrap();
        let mut rng = SmallRng::seed_from_u64(0x5eed);
        c.bench_function("gen_cauchy_k4_via_rand_distr_beta", |b| {
            b.iter(|| {
                let x: f64 = beta.sample(&mut rng);
                let z = (x / (1.0 - x)).powf(1.0 / k);
                if rand::Rng::random::<bool>(&mut rng) {
                    -z
                } else {
                    z
                }
            })
        });
    }
    draw(c, "student_t_nu3", StudentT::new(3.0, 1.0).unwrap());
    draw(c, "polyplace_s9_a9", PolyPlace::new(9.0, 9.0).unwrap());
    draw(c, "planar_laplace", PlanarLaplace::new(1.0).unwrap());
    draw(
        c,
        "spherical_laplace_d3_vec",
        SphericalLaplace::new(3, 1.0).unwrap(),
    );
    {
        let d = SphericalLaplace::new(3, 1.0).unwrap();
        let mut rng = SmallRng::seed_from_u64(0x5eed);
        let mut out = [0.0; 3];
        c.bench_function("spherical_laplace_d3_sample_into", |b| {
            b.iter(|| {
                d.sample_into(&mut rng, &mut out).unwrap();
                black_box(out)
            })
        });
    }
}

criterion_group!(benches, noise);
criterion_main!(benches);
