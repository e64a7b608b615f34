//! Whole-process CPU cost of the release paths of `benches/longitudinal.rs`
//! (issue 20's "memoized release within 2x of a plain release"), for
//! timing under `/usr/bin/time` on a loaded machine, where criterion's wall
//! clock counts the time other processes hold the core and CPU time does
//! not:
//!
//! ```text
//! cargo build --release --example memo_cost
//! /usr/bin/time -f '%U s user' target/release/examples/memo_cost plain threshold 2000000
//! /usr/bin/time -f '%U s user' target/release/examples/memo_cost new_cell threshold 2000000
//! ```
//!
//! Paths: `setup` (the set-up alone, to subtract), `plain` (metered
//! `Mechanism::privatize`), `unmetered` (`privatize_unmetered`), `resend`
//! (a memoized release of an unchanged cell), `new_cell` (a memoized
//! release of a new cell each call, the ledger started afresh every 1,000
//! cells as in the bench). Queries: `threshold` (1-D, PolyPlace at
//! ε = 1e-3 per dollar, $5k cells) or `kde` (2-D, per metre, 100 m cells).
use geopriv::device::budget::{BudgetPolicy, BudgetUnit, PrivacyBudget};
use geopriv::device::memo::Memoized;
use geopriv::{GaussianKde, Mechanism, Query, SoftThreshold};
use rand::rngs::SmallRng;
use rand::SeedableRng;
use std::hint::black_box;

fn run<Q: Query>(path: &str, q: &Q, x: &[f64], unit: BudgetUnit, width: f64, n: u64) {
    let m = Mechanism::polyplace(1e-3)
        .unwrap()
        .with_unit(unit.clone())
        .unwrap();
    let policy = BudgetPolicy::new(unit, 1e300, 0.0).unwrap();
    let mut rng = SmallRng::seed_from_u64(7);
    let mut memo = Memoized::new(m.clone(), width).unwrap();
    let mut ledger = PrivacyBudget::with_secret(policy.clone(), [7u8; 32]);
    let mut moving = x.to_vec();
    let mut sum = 0.0;
    for i in 0..n {
        sum += match path {
            "setup" => black_box(x)[0],
            "plain" => m.privatize(&mut ledger, q, black_box(x), &mut rng).unwrap(),
            "unmetered" => m.privatize_unmetered(q, black_box(x), &mut rng).unwrap(),
            "resend" => {
                memo.release(&mut ledger, q, black_box(x), &mut rng)
                    .unwrap()
                    .value
            }
            "new_cell" => {
                if i % 1_000 == 0 {
                    ledger = PrivacyBudget::with_secret(policy.clone(), [7u8; 32]);
                }
                moving[0] += 2.0 * width;
                memo.release(&mut ledger, q, black_box(&moving), &mut rng)
                    .unwrap()
                    .value
            }
            _ => panic!("unknown path {path}"),
        };
    }
    println!("{path}: {n} calls, checksum {sum:e}");
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let path = args.get(1).map(String::as_str).unwrap_or("plain");
    let query = args.get(2).map(String::as_str).unwrap_or("threshold");
    let n: u64 = args
        .get(3)
        .and_then(|s| s.parse().ok())
        .unwrap_or(1_000_000);
    match query {
        "threshold" => {
            let q = SoftThreshold::new(100_000.0, 20_000.0).unwrap();
            run(path, &q, &[95_000.0], BudgetUnit::PerDollar, 5_000.0, n);
        }
        "kde" => {
            let q = GaussianKde::new(&[500.0, -300.0], 250.0).unwrap();
            run(path, &q, &[700.0, -100.0], BudgetUnit::PerMetre, 100.0, n);
        }
        _ => panic!("unknown query {query}"),
    }
}
