//! Criterion benchmarks of the longitudinal release paths (issue 20): a
//! memoized release (snapping, the keyed BLAKE3 stream giving the memo key
//! and the noise, the mechanism, the memo ledger) against a plain metered
//! release of the same query. Target: per call within 2x of the plain one.
use criterion::{black_box, criterion_group, criterion_main, Criterion};
use geopriv::device::budget::{BudgetPolicy, BudgetUnit, PrivacyBudget};
use geopriv::device::memo::Memoized;
use geopriv::{GaussianKde, Mechanism, Query, SoftThreshold};
use rand::rngs::SmallRng;
use rand::SeedableRng;
use std::time::{Duration, Instant};

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
    // The release alone, no ledger: what the ledger's charge adds to a
    // plain release.
    c.bench_function(&format!("unmetered_release_{name}"), |b| {
        b.iter(|| black_box(m.privatize_unmetered(q, black_box(x), &mut rng).unwrap()))
    });
    let mut memo = Memoized::new(m.clone(), width).unwrap();
    // The memoized report of a new cell from nothing cached, no ledger
    // (`Memoized::permanent`: offset PRFs, the query key with the
    // calibration formatted, the cell stream, release): what a new cell
    // costs without the per-device state kept.
    let mut fresh = x.to_vec();
    c.bench_function(&format!("memoized_uncached_no_ledger_{name}"), |b| {
        b.iter(|| {
            fresh[0] += 2.0 * width;
            black_box(memo.permanent(q, &[7u8; 32], black_box(&fresh)).unwrap())
        })
    });
    let mut ledger = PrivacyBudget::with_secret(policy.clone(), [7u8; 32]);
    c.bench_function(&format!("memoized_release_{name}"), |b| {
        b.iter(|| {
            black_box(
                memo.release(&mut ledger, q, black_box(x), &mut rng)
                    .unwrap(),
            )
        })
    });
    // Eight cells in turn, each charged before: every call misses the
    // 4-cell cache, so it pays the cell stream (memo key and noise) and
    // the release, but the ledger only looks the key up (no charge):
    // the memo's own cost of a cell it does not hold.
    let cells: Vec<Vec<f64>> = (0..8)
        .map(|k| {
            let mut p = x.to_vec();
            p[0] += 3.0 * width * f64::from(k);
            p
        })
        .collect();
    for p in &cells {
        memo.release(&mut ledger, q, p, &mut rng).unwrap();
    }
    let mut turn = 0;
    c.bench_function(&format!("memoized_release_revisit_{name}"), |b| {
        b.iter(|| {
            turn = (turn + 1) % cells.len();
            black_box(
                memo.release(&mut ledger, q, black_box(&cells[turn]), &mut rng)
                    .unwrap(),
            )
        })
    });
    // A new cell on every call (the first release of each cell): the cell
    // stream, the release and a new memo key.
    // The ledger starts afresh (same device secret, untimed) every
    // `FRESH_LEDGER_EVERY` cells: a device that moved to a new cell every
    // day for three years holds about 1,000 memo keys, and the table's
    // limit is 2^16.
    let mut moving = x.to_vec();
    c.bench_function(&format!("memoized_release_new_cell_{name}"), |b| {
        b.iter_custom(|iters| {
            let mut total = Duration::ZERO;
            let mut left = iters;
            while left > 0 {
                let n = left.min(FRESH_LEDGER_EVERY);
                ledger = PrivacyBudget::with_secret(policy.clone(), [7u8; 32]);
                let start = Instant::now();
                for _ in 0..n {
                    moving[0] += 2.0 * width;
                    black_box(
                        memo.release(&mut ledger, q, black_box(&moving), &mut rng)
                            .unwrap(),
                    );
                }
                total += start.elapsed();
                left -= n;
            }
            total
        })
    });
}

/// Cells per ledger in the new-cell benchmark.
const FRESH_LEDGER_EVERY: u64 = 1_000;

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

/// The file ledger's charge (issue 20 follow-up): lock, read and restore
/// the file, check, write a temporary file, fsync, rename, fsync the
/// directory, read back; against the same state's JSON round trip alone
/// (`restore` + `to_json`, the CPU part): the rest is the file system.
fn bench_file_ledger(c: &mut Criterion) {
    use geopriv::device::budget::{Charge, FileLedger, Ledger};
    let unit = BudgetUnit::PerDollar;
    let policy = BudgetPolicy::new(unit.clone(), 1e300, 0.0).unwrap();
    let charge = Charge::new(unit, 1e-3, 0.0).unwrap();
    let dir = std::env::temp_dir().join(format!("geopriv-bench-ledger-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("ledger.json");
    let _ = std::fs::remove_file(&path);
    let mut file = FileLedger::create(&path, &policy).unwrap();
    c.bench_function("file_ledger_commit", |b| {
        b.iter(|| file.commit(black_box(&charge)).unwrap())
    });
    let state = file.state().clone();
    c.bench_function("ledger_state_json_round_trip", |b| {
        b.iter(|| {
            let json = black_box(&state).to_json();
            black_box(PrivacyBudget::restore(&json, &policy).unwrap())
        })
    });
    let _ = std::fs::remove_dir_all(&dir);
}

criterion_group!(benches, bench_memoized, bench_file_ledger);
criterion_main!(benches);
