//! Property tests of the sensitivities (docs/MATH.md §2), for every query family and
//! both growth functions.
//!
//! `check_family` states, for any `Query`, what its numbers must satisfy at
//! a set of points; `check_rejects_bad_points` that malformed points give
//! errors rather than panics or numbers. Each family only contributes a
//! proptest strategy for its parameters and points. To add a family (e.g.
//! the Gaussian KDE), write a `proptest!` block that builds the query and
//! points and calls these two helpers.

use geopriv::{Growth, GrowthKind, Query, SoftInterval, SoftThreshold, TwoWayThreshold};
use proptest::prelude::*;
use proptest::test_runner::TestCaseError;

/// Relative slack for rounding in the inequalities below. The brute-force
/// oracle (`tests/brute_force_sensitivity.rs`) uses the same bound.
const REL_TOL: f64 = 1e-12;

fn growths(gamma: f64) -> [Growth; 2] {
    [
        Growth::exponential(gamma).unwrap(),
        Growth::linear(gamma).unwrap(),
    ]
}

fn dist(x: &[f64], y: &[f64]) -> f64 {
    x.iter()
        .zip(y)
        .map(|(a, b)| (a - b) * (a - b))
        .sum::<f64>()
        .sqrt()
}

/// Every docs/MATH.md §2 property of `query` at `points`, for exponential and
/// linear growth with rate `gamma`:
///
/// * f(x) in [0, 1] (all families are soft indicators or kernels);
/// * 0 <= L(x) <= global Lipschitz constant;
/// * L(x) <= S(x) <= global Lipschitz constant;
/// * smoothness: S(x) <= g(d(x, y)) S(y) for every ordered pair of points;
/// * S with exponential growth <= S with linear growth (exp(γt) >= 1 + γt,
///   and S* is a sup of L/g);
/// * the γ -> 0 limit: with γ = 1e-12 / `scale`, S(x) equals the global
///   constant to 1e-6 (S*(x) >= L_global / g(distance to where L is
///   attained), and g is 1 + O(1e-9) over the distances used here).
///
/// `scale` is the query's natural length (ramp width, bandwidth); the
/// limit check assumes the points lie within ~1e3 · scale of where f
/// changes.
fn check_family(
    query: &dyn Query,
    scale: f64,
    points: &[Vec<f64>],
    gamma: f64,
) -> Result<(), TestCaseError> {
    let global = query.global_lipschitz();
    prop_assert!(global.is_finite() && global > 0.0);
    let limit = growths(1e-12 / scale);
    for x in points {
        let v = query.value(x).unwrap();
        prop_assert!((0.0..=1.0).contains(&v), "value {v} at {x:?}");
        let l = query.pointwise_lipschitz(x).unwrap();
        prop_assert!(
            l >= 0.0 && l <= global * (1.0 + REL_TOL),
            "L = {l} vs global {global} at {x:?}"
        );
        let mut s_by_kind = [0.0; 2];
        for (i, g) in growths(gamma).into_iter().enumerate() {
            let s = query.smooth_sensitivity(x, g).unwrap();
            prop_assert!(
                s >= l * (1.0 - REL_TOL),
                "S = {s} < L = {l} at {x:?} ({g:?})"
            );
            prop_assert!(
                s <= global * (1.0 + REL_TOL),
                "S = {s} > global {global} at {x:?} ({g:?})"
            );
            for y in points {
                let s_y = query.smooth_sensitivity(y, g).unwrap();
                let bound = g.eval(dist(x, y)) * s_y;
                prop_assert!(
                    s <= bound * (1.0 + REL_TOL),
                    "not smooth: S(x) = {s} > g(d) S(y) = {bound}, x = {x:?}, y = {y:?} ({g:?})"
                );
            }
            s_by_kind[i] = s;
        }
        prop_assert!(
            s_by_kind[0] <= s_by_kind[1] * (1.0 + REL_TOL),
            "S_exp = {} > S_linear = {} at {x:?}",
            s_by_kind[0],
            s_by_kind[1]
        );
        for g in limit {
            let s = query.smooth_sensitivity(x, g).unwrap();
            prop_assert!(
                (s - global).abs() <= 1e-6 * global,
                "γ -> 0: S = {s}, global {global} at {x:?} ({g:?})"
            );
        }
    }
    Ok(())
}

/// NaN or infinite coordinates and points of the wrong dimension are
/// errors (not panics, not numbers) for value, L and S.
fn check_rejects_bad_points(query: &dyn Query, good: &[f64]) -> Result<(), TestCaseError> {
    let d = query.dimension();
    prop_assert_eq!(good.len(), d);
    let g = Growth::exponential(1.0).unwrap();
    let mut bad: Vec<Vec<f64>> = Vec::new();
    for i in 0..d {
        for v in [f64::NAN, f64::INFINITY, f64::NEG_INFINITY] {
            let mut p = good.to_vec();
            p[i] = v;
            bad.push(p);
        }
    }
    bad.push(Vec::new());
    bad.push(good[..d - 1].to_vec());
    let mut longer = good.to_vec();
    longer.push(0.0);
    bad.push(longer);
    for p in &bad {
        prop_assert!(query.value(p).is_err(), "value accepted {p:?}");
        prop_assert!(query.pointwise_lipschitz(p).is_err(), "L accepted {p:?}");
        for kind in [GrowthKind::Exponential, GrowthKind::Linear] {
            let g = Growth::new(kind, g.rate()).unwrap();
            prop_assert!(query.smooth_sensitivity(p, g).is_err(), "S accepted {p:?}");
        }
    }
    Ok(())
}

/// Offsets in widths: mostly near the ramps, some far, some exactly on the
/// ramp edges (±1/2 from a ramp centre).
fn offset() -> impl Strategy<Value = f64> {
    prop_oneof![
        4 => -3.0..3.0f64,
        2 => -1e3..1e3f64,
        1 => prop_oneof![Just(-0.5), Just(0.5), Just(0.0)],
    ]
}

/// γ · width, log-uniform in [1e-3, 1e2].
fn gamma_width() -> impl Strategy<Value = f64> {
    (-3.0..2.0f64).prop_map(|e| 10f64.powf(e))
}

fn width() -> impl Strategy<Value = f64> {
    (-2.0..4.0f64).prop_map(|e| 10f64.powf(e))
}

proptest! {
    #[test]
    fn threshold_properties(
        t in -1e6..1e6f64,
        w in width(),
        gw in gamma_width(),
        offsets in prop::collection::vec(offset(), 2..8),
    ) {
        let q = SoftThreshold::new(t, w).unwrap();
        let points: Vec<Vec<f64>> = offsets.iter().map(|o| vec![t + o * w]).collect();
        check_family(&q, w, &points, gw / w)?;
        check_rejects_bad_points(&q, &points[0])?;
    }

    #[test]
    fn interval_properties(
        a in -1e6..1e6f64,
        span in prop_oneof![Just(1.0), 1.0..3.0f64, 3.0..1e3f64],
        w in width(),
        gw in gamma_width(),
        offsets in prop::collection::vec(offset(), 2..8),
        near_upper in prop::collection::vec(any::<bool>(), 8),
    ) {
        let mut b = a + span * w;
        while b - a < w {
            b += b.abs().max(w) * f64::EPSILON;
        }
        let q = SoftInterval::new(a, b, w).unwrap();
        // Offsets taken from either end, so both ramps and the plateau
        // are exercised.
        let points: Vec<Vec<f64>> = offsets
            .iter()
            .zip(&near_upper)
            .map(|(o, &up)| vec![if up { b } else { a } + o * w])
            .collect();
        check_family(&q, w, &points, gw / w)?;
        check_rejects_bad_points(&q, &points[0])?;
    }

    #[test]
    fn two_way_properties(
        t1 in -1e6..1e6f64,
        t2 in -1e6..1e6f64,
        w in width(),
        gw in gamma_width(),
        offsets in prop::collection::vec((offset(), offset()), 2..8),
    ) {
        let q = TwoWayThreshold::new(t1, t2, w).unwrap();
        // Around the corner centre c0: the annulus, both arms, the quadrant
        // beyond them and the region boundaries x1 = c0.x, x2 = c0.y
        // (offset 0) all come up.
        let c0 = q.corner();
        let points: Vec<Vec<f64>> = offsets
            .iter()
            .map(|(u, v)| vec![c0[0] + u * w, c0[1] + v * w])
            .collect();
        check_family(&q, w, &points, gw / w)?;
        check_rejects_bad_points(&q, &points[0])?;
    }
}

/// The γ -> 0 limit spelled out: with γ = 1e-12/θ at a point 3 widths from
/// the ramp, the formula gives S = 1/(θ g(3θ)), i.e. 1/θ up to a relative
/// 3e-12 (far inside the 1e-6 asked of every family above), and L stays
/// 1/(4θ).
#[test]
fn gamma_to_zero_gives_the_global_constant() {
    let w = 2.5;
    let gamma = 1e-12 / w;
    let threshold = SoftThreshold::new(10.0, w).unwrap();
    let interval = SoftInterval::new(10.0, 30.0, w).unwrap();
    let two_way = TwoWayThreshold::new(10.0, 20.0, w).unwrap();
    let c0 = two_way.corner();
    let cases: [(&dyn Query, Vec<f64>); 4] = [
        (&threshold, vec![10.0 + 0.5 * w + 3.0 * w]),
        (&interval, vec![10.0 - 0.5 * w - 3.0 * w]),
        // Plateau, 3 widths from the nearer ramp.
        (&interval, vec![10.0 + 0.5 * w + 3.0 * w]),
        // Below the right arm, 3 widths from the band.
        (&two_way, vec![c0[0] + 10.0 * w, 20.0 - 0.5 * w - 3.0 * w]),
    ];
    for (q, x) in cases {
        let l = q.pointwise_lipschitz(&x).unwrap();
        assert!((l * 4.0 * w - 1.0).abs() < 1e-14, "L = {l} at {x:?}");
        for g in growths(gamma) {
            let s = q.smooth_sensitivity(&x, g).unwrap();
            let expected = 1.0 / (w * g.eval(3.0 * w));
            assert!(
                (s - expected).abs() <= 1e-15 * expected,
                "{s} vs {expected}"
            );
            assert!((s * w - 1.0).abs() < 4e-12, "S·θ = {} at {x:?}", s * w);
        }
    }
}
