//! Floating-point safety (Mironov, CCS 2012): a naive release y = f(x) + σZ
//! computed in floating point leaks through its low-order bits; releases
//! snapped to the public power-of-two grid do not.
//!
//! Setup: a soft threshold at 0 with width 1, inputs x = -1/2 - 2^-10 (f = 0)
//! and x' = -1/2 + 2^-10 (f = 2^-10), ε = 1, so the ideal mechanism's
//! outputs differ by a factor of at most e^{ε d} = e^{2^-9} ≈ 1.002.
//!
//! Distinguisher: E = {|y| < 2^-11 and y is not a multiple of 2^-63}. Under
//! x', every output with |y| < 2^-11 is 2^-10 + fl(σZ) with fl(σZ) in
//! [2^-11, 1.5 · 2^-10], both multiples of 2^-63, and the sum is exact, so E
//! is impossible. Under x the output is fl(σZ) itself, whose last bits are
//! free, so E happens with positive probability: an infinite privacy loss
//! on an event of noticeable probability.

use geopriv::noise::PolyPlace;
use geopriv::{Mechanism, NoiseShape, Query, SoftThreshold};
use rand::distr::Distribution;
use rand::rngs::StdRng;
use rand::SeedableRng;

const DRAWS: usize = 2_000_000;

fn event(y: f64) -> bool {
    let q = 2f64.powi(-63);
    y.abs() < 2f64.powi(-11) && (y / q).fract() != 0.0
}

fn count<F: FnMut() -> f64>(mut release: F) -> usize {
    (0..DRAWS).filter(|_| event(release())).count()
}

fn setup() -> (SoftThreshold, [f64; 1], [f64; 1], Mechanism) {
    let q = SoftThreshold::new(0.0, 1.0).unwrap();
    let x = [-0.5 - 2f64.powi(-10)];
    let x_prime = [-0.5 + 2f64.powi(-10)];
    assert_eq!(q.value(&x).unwrap(), 0.0);
    assert_eq!(q.value(&x_prime).unwrap(), 2f64.powi(-10));
    (q, x, x_prime, Mechanism::polyplace(1.0).unwrap())
}

/// The naive release y = f(x) + σ(x) Z, built by hand from the
/// mechanism's public density (the library has no public path that skips
/// the grid: issue 19 item 3).
fn naive(m: &Mechanism, q: &SoftThreshold, x: &[f64], rng: &mut StdRng) -> f64 {
    let d = m.output_density(q, x).unwrap().unwrap();
    let NoiseShape::PolyPlace { alpha } = d.shape() else {
        unreachable!("the setup uses PolyPlace")
    };
    d.location() + d.scale() * PolyPlace::new(1.0, alpha).unwrap().sample(rng)
}

#[test]
fn naive_release_leaks_through_its_low_bits() {
    let (q, x, x_prime, m) = setup();
    let mut rng = StdRng::seed_from_u64(11);
    let under_x = count(|| naive(&m, &q, &x, &mut rng));
    let under_x_prime = count(|| naive(&m, &q, &x_prime, &mut rng));
    println!("naive: event count {under_x} under x, {under_x_prime} under x'");
    // Ideal mechanism: P_x(E) <= e^{2^-9} P_x'(E). Here P_x'(E) = 0 exactly
    // while P_x(E) is clearly positive.
    assert_eq!(under_x_prime, 0);
    assert!(under_x >= 50, "{under_x}");
}

#[test]
fn snapped_release_does_not() {
    let (q, x, x_prime, m) = setup();
    let grid = m.release_grid(&q);
    assert!(grid >= 2f64.powi(-40) && grid.log2().fract() == 0.0);
    let mut rng = StdRng::seed_from_u64(11);
    let mut ys: Vec<f64> = (0..DRAWS)
        .map(|_| m.privatize_unmetered(&q, &x, &mut rng).unwrap())
        .collect();
    let mut ys_prime: Vec<f64> = (0..DRAWS)
        .map(|_| m.privatize_unmetered(&q, &x_prime, &mut rng).unwrap())
        .collect();
    // Every release is a multiple of the public grid, whatever x was, so
    // the distinguisher's event never happens.
    assert!(ys
        .iter()
        .chain(&ys_prime)
        .all(|y| (y / grid).fract() == 0.0));
    assert_eq!(ys.iter().filter(|&&y| event(y)).count(), 0);
    assert_eq!(ys_prime.iter().filter(|&&y| event(y)).count(), 0);
    // And the two output distributions are statistically indistinguishable
    // (two-sample Kolmogorov–Smirnov at the 0.1% level).
    ys.sort_by(f64::total_cmp);
    ys_prime.sort_by(f64::total_cmp);
    let (mut i, mut j, mut d) = (0usize, 0usize, 0f64);
    while i < ys.len() && j < ys_prime.len() {
        if ys[i] <= ys_prime[j] {
            i += 1;
        } else {
            j += 1;
        }
        d = d.max((i as f64 - j as f64).abs() / DRAWS as f64);
    }
    let critical = 1.95 * (2.0 / DRAWS as f64).sqrt();
    println!("snapped: KS distance {d:.2e} (critical {critical:.2e}), grid {grid:e}");
    assert!(d < critical);
}
