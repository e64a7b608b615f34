//! A short run of the fuzz harness (examples/fuzz.rs) in CI: 200,000
//! inputs over every decoder, the record reader and aggregator and every
//! restore path, with the counting invariant. The long run
//! (`cargo run --release --example fuzz -- 10000000`) is recorded in
//! BENCHMARKS.md.

#[path = "../examples/fuzz.rs"]
#[allow(dead_code)]
mod fuzz;

#[test]
fn fuzz_short_run() {
    for seed in [1, 2] {
        let stats = fuzz::run(100_000, seed);
        assert!(stats.inputs >= 100_000);
        assert!(stats.records > 1_000 && stats.accepted > 1_000, "{stats:?}");
    }
}
