//! attack8's finding O2 (docs/ATTACK-8.md), fixed: the mean is the
//! correctly rounded Σx / n of the exact sum, so it never leaves the range
//! of its summands.

use geopriv::Aggregator;

/// O2: the mean of values that all equal u is u (every fix proposed keeps
/// a mean inside the range of its summands). Before the fix the exact sum
/// was rounded to a double and then divided by n: 3·u rounded up, and
/// (3·u)/3 was u + 1 ulp, outside the clipping bound u that every summand
/// respects (`examples/fuzz 20000000 8` panicked on this).
#[test]
fn the_mean_of_equal_values_is_that_value() {
    let mut cases = vec![(5.651596489418639, 3u32), (-0.9038222466142735, 13)];
    // And a spread of magnitudes, subnormal to huge, and counts.
    let mut u = 1.0e-310_f64;
    for k in 0..200u32 {
        cases.push((u, 2 + k % 29));
        cases.push((-u * 0.77, 3 + k % 17));
        u *= 41.3;
        if !u.is_finite() || u > 1e300 {
            u = 3.3e-309 * (k as f64 + 1.0);
        }
    }
    for (u, n) in cases {
        let mut a = Aggregator::new();
        for _ in 0..n {
            a.add(u).unwrap();
        }
        let mean = a.estimate().unwrap().mean;
        assert_eq!(mean.to_bits(), f64::to_bits(u), "{n} x {u}: mean {mean}");
    }
}
