//! Brute-force oracle for the Gaussian KDE smooth sensitivity (docs/MATH.md §2, §3.4).
//!
//! The oracle evaluates the definitions directly, without the tangency
//! analysis of the implementation:
//!
//! * ℓ(ρ) = sup_r |φ(r) - φ(ρ)| / |r - ρ| by a dense grid over the partner
//!   r (plus r = ρ, the derivative), refined by golden-section search around
//!   the best grid points;
//! * S*(x) = (1/h) sup_ρ ℓ(ρ) / g(h|ρ - c|) by a dense grid over ρ in
//!   [0, max(c, 1) + 3] (plus ρ = c and ρ = 1), refined the same way.
//!
//! The reduction to radii (closest partners lie on the same ray) is checked
//! separately by a full-plane random search in 2-D.
//!
//! Tolerances: the implementation must never be below the oracle
//! (oracle <= S · (1 + 1e-13); S carries a 2^-40 ≈ 9e-13 safety factor), and
//! must agree with it to 1e-9 relative. Golden-section search locates a
//! smooth maximum to about 1e-8 in position, which is 1e-16 in value, so the
//! oracle itself is accurate to about 1e-15 relative; 1e-9 is met with a
//! wide margin (the worst ratio observed is printed).

use geopriv::query::kde::{
    radial_lipschitz, tangent_partner, LOG_SLOPE_TURNING_POINT, SLOPE_TURNING_POINT,
};
use geopriv::{GaussianKde, Growth, Query};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

fn phi(u: f64) -> f64 {
    (-0.5 * u * u).exp()
}

/// Golden-section maximisation of `f` on [a, b] (the library's).
fn golden_max(f: &dyn Fn(f64) -> f64, a: f64, b: f64) -> (f64, f64) {
    geopriv::audit::golden_max(f, a, b, 90)
}

/// Maximise f over a grid of `n` points on [lo, hi] plus `extra` points,
/// refining around the best three grid local maxima.
fn grid_then_refine(f: &dyn Fn(f64) -> f64, lo: f64, hi: f64, n: usize, extra: &[f64]) -> f64 {
    let xs: Vec<f64> = (0..=n)
        .map(|i| lo + (hi - lo) * i as f64 / n as f64)
        .collect();
    let ys: Vec<f64> = xs.iter().map(|&x| f(x)).collect();
    let mut best = extra.iter().map(|&x| f(x)).fold(f64::MIN, f64::max);
    let mut peaks: Vec<usize> = (0..=n)
        .filter(|&i| (i == 0 || ys[i] >= ys[i - 1]) && (i == n || ys[i] >= ys[i + 1]))
        .collect();
    peaks.sort_by(|&i, &j| ys[j].partial_cmp(&ys[i]).unwrap());
    for &i in peaks.iter().take(3) {
        best = best.max(ys[i]);
        let a = xs[i.saturating_sub(1)];
        let b = xs[(i + 1).min(n)];
        best = best.max(golden_max(f, a, b).1);
    }
    best
}

/// ℓ(ρ) from its definition.
fn ell_oracle(rho: f64) -> f64 {
    let secant = |r: f64| {
        if r == rho {
            rho * phi(rho)
        } else {
            // φ(r) - φ(ρ) = φ(ρ) expm1(-(r - ρ)(r + ρ)/2), free of cancellation.
            phi(rho) * (-0.5 * (r - rho) * (r + rho)).exp_m1().abs() / (r - rho).abs()
        }
    };
    let hi = rho.max(1.0) + 4.0;
    grid_then_refine(&secant, 0.0, hi, 400, &[rho, 0.0])
}

/// h · S*(x) from its definition, for x at scaled distance c, growth on
/// scaled distances.
fn smooth_oracle(c: f64, growth: Growth) -> f64 {
    let objective = |rho: f64| ell_oracle(rho) / growth.eval((rho - c).abs());
    let hi = c.max(1.0) + 3.0;
    grid_then_refine(&objective, 0.0, hi, 240, &[c, 1.0, 0.0])
}

struct Worst {
    below: f64,
    above: f64,
}

fn check_case(c: f64, gamma_h: f64, worst: &mut Worst) {
    for growth in [
        Growth::exponential(gamma_h).unwrap(),
        Growth::linear(gamma_h).unwrap(),
    ] {
        // A kernel with bandwidth h = 2 in 2-D, x placed at scaled distance c
        // in a random-looking direction; the growth rate per metre is γ = a/h.
        let h = 2.0;
        let q = GaussianKde::new(&[3.0, -1.0], h).unwrap();
        let dir = [0.6, 0.8];
        let x = [3.0 + dir[0] * c * h, -1.0 + dir[1] * c * h];
        let g_metres = Growth::new(growth.kind(), gamma_h / h).unwrap();
        let s = q.smooth_sensitivity(&x, g_metres).unwrap() * h;
        let oracle = smooth_oracle(c, growth);
        let below = oracle / s - 1.0; // > 0 means the implementation is too small
        let above = s / oracle - 1.0;
        assert!(
            below <= 1e-13,
            "S below the definition at c={c}, γh={gamma_h}, {:?}: S={s}, oracle={oracle}",
            growth.kind()
        );
        assert!(
            above <= 1e-9,
            "S not tight at c={c}, γh={gamma_h}, {:?}: S={s}, oracle={oracle}",
            growth.kind()
        );
        worst.below = worst.below.max(below);
        worst.above = worst.above.max(above);
        // Pointwise Lipschitz constant.
        let l = q.pointwise_lipschitz(&x).unwrap() * h;
        let l_oracle = ell_oracle(c);
        assert!(
            (l - l_oracle).abs() <= 1e-12 * l_oracle,
            "L at c={c}: {l} vs {l_oracle}"
        );
        assert!(s >= l * (1.0 - 1e-15));
    }
}

#[test]
fn kde_smooth_sensitivity_matches_the_definition() {
    let mut rng = StdRng::seed_from_u64(0x6b6465);
    let mut cases: Vec<(f64, f64)> = Vec::new();
    let special_c = [
        0.0,
        1e-12,
        1e-6,
        0.25,
        0.5,
        0.9,
        0.999,
        1.0 - 1e-6,
        1.0 - 1e-9,
        1.0,
        1.0 + 1e-9,
        1.0 + 1e-6,
        1.001,
        1.1,
        1.5,
        2.0,
        SLOPE_TURNING_POINT,
        2.3,
        LOG_SLOPE_TURNING_POINT,
        2.57,
        3.0,
        4.0,
        6.0,
        10.0,
        20.0,
    ];
    let special_a = [
        1e-9, 1e-6, 1e-3, 1e-2, 0.1, 0.5, 1.0, 2.36, 5.0, 20.0, 100.0,
    ];
    for &c in &special_c {
        for &a in &special_a {
            cases.push((c, a));
        }
    }
    // Random points: c uniform on [0, 8] and near 1, γh log-uniform on [1e-3, 1e2].
    while cases.len() < 2000 {
        let c = if rng.random::<f64>() < 0.3 {
            1.0 + (rng.random::<f64>() - 0.5) * 0.2
        } else {
            rng.random::<f64>() * 8.0
        };
        let a = 10f64.powf(-3.0 + 5.0 * rng.random::<f64>());
        cases.push((c, a));
    }
    let mut worst = Worst {
        below: f64::MIN,
        above: f64::MIN,
    };
    for &(c, a) in &cases {
        check_case(c, a, &mut worst);
    }
    println!(
        "{} points x 2 growths: worst oracle/S - 1 = {:.3e}, worst S/oracle - 1 = {:.3e}",
        cases.len(),
        worst.below,
        worst.above
    );
}

#[test]
fn spec_trap_the_tangency_partner_of_x_itself() {
    // c ≈ 2.57, γh ≈ 2.36: the secant to the centre gives 0.375, ℓ(c) ≈ 0.4087.
    let secant_to_centre = (1.0 - phi(2.57)) / 2.57;
    assert!((secant_to_centre - 0.375).abs() < 1e-3);
    let s = smooth_oracle(2.57, Growth::exponential(2.36).unwrap());
    let q = GaussianKde::new(&[0.0], 1.0).unwrap();
    let impl_s = q
        .smooth_sensitivity(&[2.57], Growth::exponential(2.36).unwrap())
        .unwrap();
    assert!(impl_s >= s && impl_s > 0.4087);
}

#[test]
fn radial_reduction_holds_in_the_plane() {
    // Full 2-D search: no pair (y, z) has a secant above ℓ(|y - t|/h)/h, and
    // no y gives L(y)/g(|x - y|) above S(x).
    let mut rng = StdRng::seed_from_u64(7);
    let h = 1.5;
    let t = [0.5, -0.25];
    let q = GaussianKde::new(&t, h).unwrap();
    let f = |p: [f64; 2]| phi(((p[0] - t[0]).powi(2) + (p[1] - t[1]).powi(2)).sqrt() / h);
    for _ in 0..20_000 {
        let y: [f64; 2] = [rng.random_range(-6.0..6.0), rng.random_range(-6.0..6.0)];
        let z: [f64; 2] = [rng.random_range(-6.0..6.0), rng.random_range(-6.0..6.0)];
        let d = ((y[0] - z[0]).powi(2) + (y[1] - z[1]).powi(2)).sqrt();
        let secant = (f(y) - f(z)).abs() / d;
        assert!(secant <= q.pointwise_lipschitz(&y).unwrap() * (1.0 + 1e-12));
    }
    for growth in [
        Growth::exponential(0.7).unwrap(),
        Growth::linear(0.7).unwrap(),
    ] {
        for _ in 0..200 {
            let x: [f64; 2] = [rng.random_range(-5.0..5.0), rng.random_range(-5.0..5.0)];
            let s = q.smooth_sensitivity(&x, growth).unwrap();
            for _ in 0..200 {
                let y: [f64; 2] = [rng.random_range(-6.0..6.0), rng.random_range(-6.0..6.0)];
                let d = ((x[0] - y[0]).powi(2) + (x[1] - y[1]).powi(2)).sqrt();
                let bound = q.pointwise_lipschitz(&y).unwrap() / growth.eval(d);
                assert!(bound <= s * (1.0 + 1e-13));
            }
        }
    }
}

#[test]
fn facts_about_ell() {
    // ℓ(0) ≈ 0.451256, maximised where (1 - φ(r))/r peaks.
    let ell0 = radial_lipschitz(0.0).unwrap();
    assert!((ell0 - 0.451256).abs() < 1e-6);
    assert!((ell0 - ell_oracle(0.0)).abs() < 1e-13);
    // Increasing on [0, 1] to e^{-1/2}, decreasing after, ~ 1/ρ.
    let mut prev = ell0;
    for i in 1..=1000 {
        let v = radial_lipschitz(i as f64 / 1000.0).unwrap();
        assert!(v >= prev, "ℓ not increasing at {}", i as f64 / 1000.0);
        prev = v;
    }
    assert_eq!(prev, (-0.5f64).exp());
    for i in 1..=5000 {
        let v = radial_lipschitz(1.0 + i as f64 / 100.0).unwrap();
        assert!(v <= prev);
        prev = v;
    }
    for rho in [10.0, 100.0, 1e4, 1e8, 1e200] {
        let v = radial_lipschitz(rho).unwrap();
        let tol = (2.0 / (rho * rho)).max(4e-16);
        assert!((v * rho - 1.0).abs() < tol, "ρℓ(ρ) at {rho}: {}", v * rho);
    }
    // Against the definition on a grid.
    for i in 0..=300 {
        let rho = i as f64 / 50.0;
        let (a, b) = (radial_lipschitz(rho).unwrap(), ell_oracle(rho));
        assert!(
            a >= b * (1.0 - 1e-14) && a <= b * (1.0 + 1e-12),
            "ρ={rho}: {a} vs {b}"
        );
    }
}

#[test]
fn tangency_partner_satisfies_its_equation() {
    for i in 0..=2000 {
        let rho = i as f64 / 100.0;
        let r = tangent_partner(rho).unwrap();
        // φ(ρ) = φ(r)(1 + r(r - ρ)), up to the rounding of the O(1) terms
        // of 1 + r² - rρ (which cancel for large ρ).
        let lhs = phi(rho);
        let rhs = phi(r) * (1.0 + r * (r - rho));
        let tol = 4.0 * f64::EPSILON * phi(r) * (1.0 + r * (r + rho));
        assert!((lhs - rhs).abs() <= tol, "ρ={rho}: {lhs} vs {rhs}");
        if rho > 1.0 {
            assert!(r > 0.0 && r < 1.0);
        } else if rho < 1.0 {
            assert!(r > 1.0 && r < 1.6);
        }
    }
}

/// The shape facts the outer search relies on (module docs of `kde`):
/// ℓ concave on [0, 1]; (ln ℓ)' = 1/r* - ρ decreasing on [1, ρ_J] and
/// increasing after; ℓ' = φ(r*)(1 - r*ρ) decreasing on [1, ρ_I] and
/// increasing after. Checked on dense grids up to ρ = 200 (beyond, the
/// asymptotic forms -1/ρ and -1/ρ² are increasing).
#[test]
fn shape_facts_used_by_the_outer_search() {
    let log_slope = |rho: f64| 1.0 / tangent_partner(rho).unwrap() - rho;
    let slope = |rho: f64| {
        let r = tangent_partner(rho).unwrap();
        phi(r) * (1.0 - r * rho)
    };
    // (ln ℓ)' checked against a finite difference of ln ℓ.
    for &rho in &[0.2, 0.7, 1.3, 2.0, 4.0, 9.0] {
        let eps = 1e-6;
        let fd = (radial_lipschitz(rho + eps).unwrap().ln()
            - radial_lipschitz(rho - eps).unwrap().ln())
            / (2.0 * eps);
        assert!((fd - log_slope(rho)).abs() < 1e-8, "ρ={rho}");
    }
    // Concavity of ℓ on [0, 1]: ℓ' decreasing.
    let mut prev = slope(0.0);
    for i in 1..=1000 {
        let v = slope(i as f64 / 1000.0);
        assert!(v <= prev + 1e-15, "ℓ' increasing at {}", i as f64 / 1000.0);
        prev = v;
    }
    for (f, turning, name) in [
        (
            &log_slope as &dyn Fn(f64) -> f64,
            LOG_SLOPE_TURNING_POINT,
            "(ln ℓ)'",
        ),
        (&slope as &dyn Fn(f64) -> f64, SLOPE_TURNING_POINT, "ℓ'"),
    ] {
        let step = 1e-3;
        let mut rho = 1.0 + step;
        let mut prev = f(1.0);
        while rho <= 200.0 {
            let v = f(rho);
            if rho < turning - step {
                assert!(v <= prev + 1e-15, "{name} not decreasing at {rho}");
            } else if rho > turning + step {
                assert!(v >= prev - 1e-15, "{name} not increasing at {rho}");
            }
            prev = v;
            rho += if rho < 10.0 { step } else { 0.05 };
        }
        let (argmin, _) = golden_max(&|r| -f(r), 1.5, 3.5);
        assert!(
            (argmin - turning).abs() < 1e-6,
            "{name}: {argmin} vs {turning}"
        );
    }
}

#[test]
fn smooth_sensitivity_at_the_centre_in_many_dimensions() {
    for d in 1..=5 {
        let center = vec![1.0; d];
        let q = GaussianKde::new(&center, 0.5).unwrap();
        for growth in [
            Growth::exponential(0.3).unwrap(),
            Growth::linear(0.3).unwrap(),
        ] {
            let s = q.smooth_sensitivity(&center, growth).unwrap() * 0.5;
            let oracle = smooth_oracle(0.0, Growth::new(growth.kind(), 0.15).unwrap());
            assert!(
                s >= oracle && s <= oracle * (1.0 + 1e-9),
                "d={d}: {s} vs {oracle}"
            );
        }
    }
}
