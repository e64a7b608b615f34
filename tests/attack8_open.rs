//! attack8's open findings as reproducers (docs/ATTACK-8.md): ignored,
//! because they fail on the current code; `cargo test --test attack8_open
//! -- --ignored` shows them. Un-ignore with the fix.

use geopriv::Aggregator;

/// O2: the mean of values that all equal u is u (every fix proposed keeps
/// a mean inside the range of its summands). Today the exact sum is
/// rounded to a double and then divided by n: 3·u rounds up, and
/// (3·u)/3 is u + 1 ulp, outside the clipping bound u that every summand
/// respects (`examples/fuzz 20000000 8` panics on this).
#[test]
#[ignore = "open finding O2 of docs/ATTACK-8.md"]
fn the_mean_of_equal_values_is_that_value() {
    for (u, n) in [(5.651596489418639, 3u32), (-0.9038222466142735, 13)] {
        let mut a = Aggregator::new();
        for _ in 0..n {
            a.add(u).unwrap();
        }
        let mean = a.estimate().unwrap().mean;
        assert_eq!(mean.to_bits(), f64::to_bits(u), "{n} x {u}: mean {mean}");
    }
}
