//! Statistical tests of the noise samplers (docs/MATH.md §4): Kolmogorov–Smirnov
//! tests of every sampler against its closed-form CDF, empirical variances
//! against the closed forms, and the PolyPlace-versus-Student's-t claim.
//!
//! Every test uses a fixed seed, so the outcome is deterministic; the
//! thresholds are chosen so that a correct sampler passes with
//! probability >= 0.999 for any seed (KS: √n·D < 1.95, the 0.1% critical
//! value of the Kolmogorov distribution; moments: 4 standard errors).

use geopriv::noise::{
    GeneralizedCauchy, Laplace, PlanarLaplace, PolyPlace, SphericalLaplace, StudentT,
};
use rand::distr::Distribution;
use rand::rngs::StdRng;
use rand::SeedableRng;
use std::f64::consts::PI;

const DRAWS: usize = 100_000;
/// 0.1% critical value of √n · D_n for large n.
const KS_CRITICAL: f64 = 1.95;

/// √n · sup |F_n - F| for the sample `xs` against the CDF `cdf`.
fn ks_statistic(mut xs: Vec<f64>, cdf: impl Fn(f64) -> f64) -> f64 {
    xs.sort_by(f64::total_cmp);
    let n = xs.len() as f64;
    let mut d: f64 = 0.0;
    for (i, &x) in xs.iter().enumerate() {
        let f = cdf(x);
        d = d.max(f - i as f64 / n).max((i + 1) as f64 / n - f);
    }
    d * n.sqrt()
}

fn assert_ks(name: &str, xs: Vec<f64>, cdf: impl Fn(f64) -> f64) {
    let stat = ks_statistic(xs, cdf);
    eprintln!("{name}: √n·D = {stat:.3}");
    assert!(
        stat < KS_CRITICAL,
        "{name}: KS statistic √n·D = {stat:.3} >= {KS_CRITICAL}"
    );
}

fn draws<D: Distribution<f64>>(d: &D, seed: u64, n: usize) -> Vec<f64> {
    let mut rng = StdRng::seed_from_u64(seed);
    (0..n).map(|_| d.sample(&mut rng)).collect()
}

/// Sample variance about the known mean 0 and its standard error
/// √((m4 - m2²)/n), estimated from the same sample.
fn variance_and_standard_error(xs: &[f64]) -> (f64, f64) {
    let n = xs.len() as f64;
    let m2 = xs.iter().map(|x| x * x).sum::<f64>() / n;
    let m4 = xs.iter().map(|x| x * x * x * x).sum::<f64>() / n;
    (m2, ((m4 - m2 * m2) / n).sqrt())
}

fn assert_variance(name: &str, xs: &[f64], want: f64) {
    let (v, se) = variance_and_standard_error(xs);
    assert!(
        (v - want).abs() <= 4.0 * se,
        "{name}: empirical variance {v} vs closed form {want} (standard error {se})"
    );
}

/// Gamma(d, 1/ε) CDF for integer d in closed form: 1 - e^{-x} Σ_{k<d} x^k/k!, x = εr.
fn gamma_integer_cdf(d: usize, epsilon: f64, r: f64) -> f64 {
    if r <= 0.0 {
        return 0.0;
    }
    let x = epsilon * r;
    let mut term = 1.0;
    let mut sum = 1.0;
    for k in 1..d {
        term *= x / k as f64;
        sum += term;
    }
    1.0 - (-x).exp() * sum
}

/// ∫_a^b f by adaptive Simpson (absolute tolerance `tol`).
fn integrate(f: &dyn Fn(f64) -> f64, a: f64, b: f64, tol: f64) -> f64 {
    #[allow(clippy::too_many_arguments)]
    fn step(
        f: &dyn Fn(f64) -> f64,
        a: f64,
        b: f64,
        fa: f64,
        fm: f64,
        fb: f64,
        whole: f64,
        tol: f64,
        depth: u32,
    ) -> f64 {
        let m = 0.5 * (a + b);
        let (lm, rm) = (0.5 * (a + m), 0.5 * (m + b));
        let (flm, frm) = (f(lm), f(rm));
        let left = (m - a) / 6.0 * (fa + 4.0 * flm + fm);
        let right = (b - m) / 6.0 * (fm + 4.0 * frm + fb);
        let delta = left + right - whole;
        // Stop at the tolerance, or when the difference is rounding noise.
        if depth == 0 || delta.abs() <= 15.0 * tol.max(1e-15 * (left + right).abs()) {
            left + right + delta / 15.0
        } else {
            step(f, a, m, fa, flm, fm, left, tol / 2.0, depth - 1)
                + step(f, m, b, fm, frm, fb, right, tol / 2.0, depth - 1)
        }
    }
    let n = 64;
    let h = (b - a) / n as f64;
    (0..n)
        .map(|i| {
            let (lo, hi) = (a + i as f64 * h, a + (i + 1) as f64 * h);
            let (flo, fmid, fhi) = (f(lo), f(0.5 * (lo + hi)), f(hi));
            let whole = (hi - lo) / 6.0 * (flo + 4.0 * fmid + fhi);
            step(f, lo, hi, flo, fmid, fhi, whole, tol / n as f64, 40)
        })
        .sum()
}

/// ∫_a^∞ f via x = a + L (t/(1-t))³.
fn integrate_to_inf(f: &dyn Fn(f64) -> f64, a: f64, length: f64, tol: f64) -> f64 {
    let g = |t: f64| {
        if t >= 1.0 {
            return 0.0;
        }
        let r = t / (1.0 - t);
        let v = f(a + length * r * r * r) * length * 3.0 * r * r / ((1.0 - t) * (1.0 - t));
        if v.is_finite() {
            v
        } else {
            0.0
        }
    };
    integrate(&g, 0.0, 1.0, tol)
}

// ---------------------------------------------------------------- KS, 1-D

#[test]
fn laplace_sampler_matches_cdf() {
    let d = Laplace::new(1.3).unwrap();
    assert_ks("Laplace(1.3)", draws(&d, 1, DRAWS), |x| d.cdf(x));
}

#[test]
fn generalized_cauchy_sampler_matches_cdf() {
    for (seed, k, s) in [(2, 4.0, 2.0), (3, 2.5, 1.0), (4, 8.0, 0.5), (5, 3.0, 10.0)] {
        let d = GeneralizedCauchy::new(k, s).unwrap();
        assert_ks(
            &format!("GeneralizedCauchy(k={k}, scale={s})"),
            draws(&d, seed, DRAWS),
            |x| d.cdf(x),
        );
    }
}

#[test]
fn student_t_sampler_matches_cdf() {
    for (seed, nu, s) in [(6, 3.0, 1.5), (7, 0.8, 1.0), (8, 25.0, 0.2)] {
        let d = StudentT::new(nu, s).unwrap();
        assert_ks(
            &format!("StudentT(nu={nu}, scale={s})"),
            draws(&d, seed, DRAWS),
            |x| d.cdf(x),
        );
    }
}

#[test]
fn polyplace_sampler_matches_cdf() {
    for (seed, s, a) in [
        (9, 9.0, 9.0),
        (10, 1.0, 1.5),
        (11, 300.0, 1000.0),
        (12, 2.0, 3.0),
    ] {
        let d = PolyPlace::new(s, a).unwrap();
        assert_ks(
            &format!("PolyPlace(s={s}, alpha={a})"),
            draws(&d, seed, DRAWS),
            |x| d.cdf(x),
        );
    }
}

// ---------------------------------------------------------------- KS, multi-D

#[test]
fn planar_laplace_radius_and_angle() {
    let d = PlanarLaplace::new(0.7).unwrap();
    let mut rng = StdRng::seed_from_u64(13);
    let points: Vec<[f64; 2]> = (0..DRAWS).map(|_| d.sample(&mut rng)).collect();
    let radii = points.iter().map(|p| p[0].hypot(p[1])).collect();
    assert_ks("PlanarLaplace radius", radii, |r| d.radius_cdf(r));
    // Same radius law as Gamma(2, 1/ε).
    let radii = points.iter().map(|p| p[0].hypot(p[1])).collect();
    assert_ks("PlanarLaplace radius vs Gamma(2)", radii, |r| {
        gamma_integer_cdf(2, 0.7, r)
    });
    let angles = points.iter().map(|p| p[1].atan2(p[0])).collect();
    assert_ks("PlanarLaplace angle", angles, |t| {
        ((t + PI) / (2.0 * PI)).clamp(0.0, 1.0)
    });
}

#[test]
fn spherical_laplace_radius_and_direction() {
    for (seed, dim, eps) in [(14, 1, 2.0), (15, 2, 0.7), (16, 3, 1.0), (17, 5, 0.05)] {
        let d = SphericalLaplace::new(dim, eps).unwrap();
        let mut rng = StdRng::seed_from_u64(seed);
        let mut points = vec![0.0; dim * DRAWS];
        for chunk in points.chunks_mut(dim) {
            d.sample_into(&mut rng, chunk).unwrap();
        }
        let radii: Vec<f64> = points
            .chunks(dim)
            .map(|p| p.iter().map(|x| x * x).sum::<f64>().sqrt())
            .collect();
        assert_ks(
            &format!("SphericalLaplace d={dim} radius"),
            radii.clone(),
            |r| gamma_integer_cdf(dim, eps, r),
        );
        assert_ks(
            &format!("SphericalLaplace d={dim} radius_cdf"),
            radii.clone(),
            |r| d.radius_cdf(r),
        );
        match dim {
            1 => {
                // d = 1 is Laplace(1/ε).
                let lap = Laplace::new(1.0 / eps).unwrap();
                assert_ks("SphericalLaplace d=1 vs Laplace", points.clone(), |x| {
                    lap.cdf(x)
                });
            }
            2 => {
                let planar = PlanarLaplace::new(eps).unwrap();
                assert_ks("SphericalLaplace d=2 vs planar", radii.clone(), |r| {
                    planar.radius_cdf(r)
                });
                let angles = points.chunks(2).map(|p| p[1].atan2(p[0])).collect();
                assert_ks("SphericalLaplace d=2 angle", angles, |t| {
                    ((t + PI) / (2.0 * PI)).clamp(0.0, 1.0)
                });
            }
            3 => {
                // Archimedes: each coordinate of a uniform direction on S² is
                // uniform on [-1, 1].
                for axis in 0..3 {
                    let coords = points
                        .chunks(3)
                        .zip(&radii)
                        .map(|(p, r)| p[axis] / r)
                        .collect();
                    assert_ks(&format!("SphericalLaplace d=3 axis {axis}"), coords, |u| {
                        ((u + 1.0) / 2.0).clamp(0.0, 1.0)
                    });
                }
            }
            _ => {}
        }
        // Direction moments: E[u_i] = 0, E[u_i u_j] = δ_ij / d (4 standard
        // errors; |u_i u_j| <= 1 so the standard error is at most 1/√n).
        let n = DRAWS as f64;
        for i in 0..dim {
            for j in i..dim {
                let prods: Vec<f64> = points
                    .chunks(dim)
                    .zip(&radii)
                    .map(|(p, r)| p[i] * p[j] / (r * r))
                    .collect();
                let mean = prods.iter().sum::<f64>() / n;
                let sd = (prods.iter().map(|x| (x - mean) * (x - mean)).sum::<f64>() / n).sqrt();
                let want = if i == j { 1.0 / dim as f64 } else { 0.0 };
                assert!(
                    (mean - want).abs() <= 4.0 * sd / n.sqrt() + 1e-15,
                    "d={dim} E[u{i} u{j}] = {mean}, want {want}"
                );
            }
            if dim > 1 {
                let mean = points
                    .chunks(dim)
                    .zip(&radii)
                    .map(|(p, r)| p[i] / r)
                    .sum::<f64>()
                    / n;
                assert!(mean.abs() <= 4.0 / n.sqrt(), "d={dim} E[u{i}] = {mean}");
            }
        }
    }
}

// ---------------------------------------------------------------- variances

#[test]
fn empirical_variances_match_closed_forms() {
    // Parameters with a finite fourth moment, so the standard error exists.
    let lap = Laplace::new(2.0).unwrap();
    assert_variance("Laplace", &draws(&lap, 20, DRAWS), lap.variance().unwrap());
    let gc = GeneralizedCauchy::new(8.0, 1.5).unwrap();
    assert_variance(
        "GeneralizedCauchy k=8",
        &draws(&gc, 21, DRAWS),
        gc.variance().unwrap(),
    );
    let t = StudentT::new(10.0, 0.7).unwrap();
    assert_variance(
        "StudentT nu=10",
        &draws(&t, 22, DRAWS),
        t.variance().unwrap(),
    );
    let pp = PolyPlace::new(9.0, 9.0).unwrap();
    assert_variance(
        "PolyPlace(9, 9)",
        &draws(&pp, 23, DRAWS),
        pp.variance().unwrap(),
    );

    let planar = PlanarLaplace::new(0.4).unwrap();
    let mut rng = StdRng::seed_from_u64(24);
    let pts: Vec<[f64; 2]> = (0..DRAWS).map(|_| planar.sample(&mut rng)).collect();
    for axis in 0..2 {
        let xs: Vec<f64> = pts.iter().map(|p| p[axis]).collect();
        assert_variance("PlanarLaplace coordinate", &xs, planar.variance().unwrap());
    }
    let sph = SphericalLaplace::new(3, 0.4).unwrap();
    let mut rng = StdRng::seed_from_u64(25);
    let pts: Vec<Vec<f64>> = (0..DRAWS).map(|_| sph.sample(&mut rng)).collect();
    for axis in 0..3 {
        let xs: Vec<f64> = pts.iter().map(|p| p[axis]).collect();
        assert_variance("SphericalLaplace coordinate", &xs, sph.variance().unwrap());
    }
}

#[test]
fn polyplace_variance_matches_quadrature() {
    for (s, a) in [
        (1.0, 2.2),
        (1.0, 3.0),
        (9.0, 9.0),
        (5.0, 40.0),
        (1.0, 500.0),
    ] {
        let d = PolyPlace::new(s, a).unwrap();
        let junction = s / a;
        let f = |x: f64| x * x * d.pdf(x);
        let numeric = 2.0
            * (integrate(&f, 0.0, junction, 1e-16)
                + integrate_to_inf(&f, junction, s, 1e-14 * s * s));
        let closed = d.variance().unwrap();
        assert!(
            (numeric - closed).abs() <= 1e-6 * closed,
            "PolyPlace(s={s}, alpha={a}): quadrature {numeric} vs closed form {closed}"
        );
    }
}

// ------------------------------------------- PolyPlace versus Student's t

/// Calibrations of docs/MATH.md §4 at smooth sensitivity S, budget ε, γ = ε/9.
fn polyplace_at(epsilon: f64, sensitivity: f64) -> PolyPlace {
    let gamma = epsilon / 9.0;
    PolyPlace::new(sensitivity / gamma, epsilon / gamma).unwrap()
}

fn student_t_at(epsilon: f64, sensitivity: f64) -> StudentT {
    // ε = ν γ + ((ν + 1)/(2√ν)) η with ν = 3 and the same γ = ε/9.
    let nu: f64 = 3.0;
    let gamma = epsilon / 9.0;
    let eta = (epsilon - nu * gamma) * 2.0 * nu.sqrt() / (nu + 1.0);
    StudentT::new(nu, sensitivity / eta).unwrap()
}

#[test]
fn reference_variances_at_gamma_one_ninth_of_epsilon() {
    for (epsilon, sensitivity) in [(1.0, 1.0), (1.0 / 800.0, 3.0), (5.0, 0.01)] {
        let unit = (epsilon / sensitivity) * (epsilon / sensitivity);
        let pp = polyplace_at(epsilon, sensitivity).variance().unwrap() * unit;
        assert!((pp - 2.97359).abs() < 5e-6, "PolyPlace Var·(ε/S)² = {pp}");
        let t = student_t_at(epsilon, sensitivity).variance().unwrap() * unit;
        assert!((t - 9.0).abs() < 1e-12, "Student's t Var·(ε/S)² = {t}");
    }
}

#[test]
fn polyplace_has_at_most_0_4_times_the_student_t_variance() {
    let (epsilon, sensitivity) = (1.0, 1.0);
    let n = 400_000;
    let pp = draws(&polyplace_at(epsilon, sensitivity), 30, n);
    let t = draws(&student_t_at(epsilon, sensitivity), 31, n);
    let var = |xs: &[f64]| xs.iter().map(|x| x * x).sum::<f64>() / xs.len() as f64;
    let ratio = var(&pp) / var(&t);
    eprintln!(
        "empirical variance ratio PolyPlace / t = {ratio:.4} (closed forms: {:.4})",
        2.97359 / 9.0
    );
    assert!(
        ratio <= 0.4,
        "empirical variance ratio PolyPlace / t = {ratio}"
    );
    // Closed forms: 2.97359 / 9.
    assert!(ratio > 0.25, "implausibly small ratio {ratio}");
}

#[test]
fn polyplace_tends_to_laplace_numerically() {
    // γ/ε -> 0 with s = α b: variance -> 2 b² and the sampler -> Laplace(b).
    let b = 0.8;
    for a in [1e2, 1e4, 1e6] {
        let d = PolyPlace::new(a * b, a).unwrap();
        let rel = d.variance().unwrap() / (2.0 * b * b) - 1.0;
        // Hladík–Tětek, Corollary 14: the gap is (17 - 3e)/e · γ/ε ≈ 3.26/α.
        assert!(
            (rel * a - (17.0 - 3.0 * std::f64::consts::E) / std::f64::consts::E).abs() < 0.1,
            "alpha={a}: relative gap {rel}"
        );
    }
    let d = PolyPlace::new(1e6 * b, 1e6).unwrap();
    let lap = Laplace::new(b).unwrap();
    assert_ks(
        "PolyPlace(alpha=1e6) vs Laplace",
        draws(&d, 32, DRAWS),
        |x| lap.cdf(x),
    );
}
