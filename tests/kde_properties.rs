//! Property tests of the Gaussian KDE smooth sensitivity (docs/MATH.md §2):
//! S >= L, S is g-smooth, S <= the global constant, S -> the global
//! constant as γ -> 0, in 1 to 4 dimensions and for both growths.

use geopriv::{GaussianKde, Growth, GrowthKind, Query};
use proptest::prelude::*;

fn growth(kind: bool, rate: f64) -> Growth {
    Growth::new(
        if kind {
            GrowthKind::Exponential
        } else {
            GrowthKind::Linear
        },
        rate,
    )
    .unwrap()
}

fn point(dim: usize) -> impl Strategy<Value = Vec<f64>> {
    proptest::collection::vec(-40.0f64..40.0, dim)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2000))]

    #[test]
    fn s_bounds_l_and_the_global_constant(
        dim in 1usize..=4,
        h in 0.1f64..20.0,
        log_rate in -4.0f64..2.0,
        kind in any::<bool>(),
        seed in any::<u64>(),
    ) {
        let mut rng_state = seed;
        let mut next = || {
            rng_state = rng_state.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            ((rng_state >> 11) as f64 / (1u64 << 53) as f64 - 0.5) * 8.0 * h
        };
        let center: Vec<f64> = (0..dim).map(|_| next()).collect();
        let x: Vec<f64> = center.iter().map(|c| c + next()).collect();
        let q = GaussianKde::new(&center, h).unwrap();
        let g = growth(kind, 10f64.powf(log_rate) / h);
        let s = q.smooth_sensitivity(&x, g).unwrap();
        let l = q.pointwise_lipschitz(&x).unwrap();
        prop_assert!(s >= l * (1.0 - 1e-15), "S {s} < L {l}");
        prop_assert!(s <= q.global_lipschitz() * (1.0 + 1e-15));
        prop_assert!(l <= q.global_lipschitz() * (1.0 + 1e-15));
        let v = q.value(&x).unwrap();
        prop_assert!((0.0..=1.0).contains(&v));
    }

    #[test]
    fn s_is_g_smooth(
        dim in 1usize..=3,
        x in point(3),
        y in point(3),
        h in 0.5f64..10.0,
        log_rate in -3.0f64..1.5,
        kind in any::<bool>(),
    ) {
        let q = GaussianKde::new(&vec![1.0; dim], h).unwrap();
        let (x, y) = (&x[..dim], &y[..dim]);
        let g = growth(kind, 10f64.powf(log_rate) / h);
        let d = x.iter().zip(y).map(|(a, b)| (a - b) * (a - b)).sum::<f64>().sqrt();
        let sx = q.smooth_sensitivity(x, g).unwrap();
        let sy = q.smooth_sensitivity(y, g).unwrap();
        prop_assert!(sx <= g.eval(d) * sy * (1.0 + 1e-12), "S(x)={sx} S(y)={sy} d={d}");
        prop_assert!(sy <= g.eval(d) * sx * (1.0 + 1e-12));
    }

    #[test]
    fn s_tends_to_the_global_constant_as_gamma_vanishes(
        x in point(2),
        h in 0.5f64..10.0,
        kind in any::<bool>(),
    ) {
        let q = GaussianKde::new(&[0.0, 0.0], h).unwrap();
        let c = (x[0] * x[0] + x[1] * x[1]).sqrt() / h;
        // S*·h >= ℓ(1)/g(h|1 - c|), so the gap is at most γh|1 - c|.
        let rate = 1e-9 / h;
        let s = q.smooth_sensitivity(&x, growth(kind, rate)).unwrap();
        let global = q.global_lipschitz();
        prop_assert!(s <= global * (1.0 + 1e-15));
        prop_assert!(s >= global * (1.0 - 2e-9 * (1.0 + (1.0 - c).abs())), "{s} vs {global}");
    }
}

#[test]
fn errors_instead_of_panics() {
    let q = GaussianKde::new(&[0.0, 0.0], 1.0).unwrap();
    let g = Growth::exponential(1.0).unwrap();
    for bad in [
        vec![f64::NAN, 0.0],
        vec![0.0, f64::INFINITY],
        vec![f64::NEG_INFINITY, 1.0],
        vec![0.0],
        vec![0.0, 0.0, 0.0],
        vec![],
    ] {
        assert!(q.value(&bad).is_err());
        assert!(q.pointwise_lipschitz(&bad).is_err());
        assert!(q.smooth_sensitivity(&bad, g).is_err());
    }
    assert!(GaussianKde::new(&[0.0], 0.0).is_err());
    assert!(GaussianKde::new(&[0.0], -1.0).is_err());
    assert!(GaussianKde::new(&[0.0], f64::NAN).is_err());
    assert!(GaussianKde::new(&[f64::INFINITY], 1.0).is_err());
}
