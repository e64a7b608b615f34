//! Criterion benchmarks of the longitudinal release paths (issue 20): a
//! memoized release (snapping, HMAC-SHA256 memo key and seed, ChaCha20
//! noise stream, the mechanism, the memo ledger) against a plain metered
//! release of the same query. Target: per call within 2x of the plain one.
use criterion::{black_box, criterion_group, criterion_main, Criterion};
use geopriv::device::budget::{BudgetPolicy, BudgetUnit, PrivacyBudget};
use geopriv::device::memo::Memoized;
use geopriv::{GaussianKde, Mechanism, Query, SoftThreshold};
use rand::rngs::SmallRng;
use rand::SeedableRng;

fn pair<Q: Query>(c: &mut Criterion, name: &str, q: &Q, x: &[f64], unit: BudgetUnit, width: f64) {
    let m = Mechanism::polyplace(1e-3)
        .unwrap()
        .with_unit(unit.clone())
        .unwrap();
    let policy = BudgetPolicy::new(unit, 1e300, 0.0).unwrap();
    let mut plain = PrivacyBudget::new(policy.clone());
    let mut rng = SmallRng::seed_from_u64(7);
    c.bench_function(&format!("plain_release_{name}"), |b| {
        b.iter(|| black_box(m.privatize(&mut plain, q, black_box(x), &mut rng).unwrap()))
    });
    let mut memo = Memoized::new(m.clone(), width).unwrap();
    let mut ledger = PrivacyBudget::with_secret(policy, [7u8; 32]);
    c.bench_function(&format!("memoized_release_{name}"), |b| {
        b.iter(|| {
            black_box(
                memo.release(&mut ledger, q, black_box(x), &mut rng)
                    .unwrap(),
            )
        })
    });
    // A new cell on every call (the first release of each cell): PRFs,
    // the release and a new memo key.
    let mut moving = x.to_vec();
    c.bench_function(&format!("memoized_release_new_cell_{name}"), |b| {
        b.iter(|| {
            moving[0] += 2.0 * width;
            black_box(
                memo.release(&mut ledger, q, black_box(&moving), &mut rng)
                    .unwrap(),
            )
        })
    });
}

fn bench_memoized(c: &mut Criterion) {
    let threshold = SoftThreshold::new(100_000.0, 20_000.0).unwrap();
    pair(
        c,
        "threshold",
        &threshold,
        &[95_000.0],
        BudgetUnit::PerDollar,
        5_000.0,
    );
    let kde = GaussianKde::new(&[500.0, -300.0], 250.0).unwrap();
    pair(
        c,
        "kde_2d",
        &kde,
        &[700.0, -100.0],
        BudgetUnit::PerMetre,
        100.0,
    );
}

criterion_group!(benches, bench_memoized);
criterion_main!(benches);
