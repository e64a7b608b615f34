//! Maps under one per-device budget (docs/MATH.md §9): FFT maps against
//! direct evaluation, unbiasedness of the deconvolution kernel, sharding,
//! the planner, rejections.

use geopriv::map::{
    direct_map, plan, BinSpec, BinnedCounts, DebiasKernel, EmDeconvolution, EmOptions, FftMapper,
    KdeGrid, MapAggregator, MapMechanism, MapRelease, Plan, Prediction, QuerySet,
};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

mod common;

/// Devices clustered in two blobs inside a 10 km square.
fn devices(n: usize, seed: u64) -> Vec<[f64; 2]> {
    let mut rng = StdRng::seed_from_u64(seed);
    (0..n)
        .map(|i| {
            let c = if i % 3 == 0 {
                [3_000.0, 4_000.0]
            } else {
                [6_500.0, 6_000.0]
            };
            let r: f64 = 600.0 * rng.random::<f64>().sqrt();
            let a: f64 = rng.random::<f64>() * std::f64::consts::TAU;
            [c[0] + r * a.cos(), c[1] + r * a.sin()]
        })
        .collect()
}

fn noisy(grid: &KdeGrid, eps: f64, xs: &[[f64; 2]], seed: u64) -> Vec<[f64; 2]> {
    let mut rng = StdRng::seed_from_u64(seed);
    let rel = MapRelease::new(QuerySet::Kde(grid.clone()), MapMechanism::APriori, eps).unwrap();
    xs.iter()
        .map(|x| {
            let l = rel
                .release_unmetered(x, &mut rng)
                .unwrap()
                .location
                .unwrap();
            [l[0], l[1]]
        })
        .collect()
}

#[test]
fn fft_map_matches_direct_evaluation_within_its_bound() {
    let grid = KdeGrid::square(10_000.0, 11).unwrap();
    let eps = 1.0 / grid.bandwidth(); // εh = 1
    let xs = devices(400, 1);
    let locs = noisy(&grid, eps, &xs, 2);
    let spec = BinSpec::for_estimation(&grid, eps, 2048).unwrap();
    let counts_delta = spec.delta()[0];
    let mut counts = BinnedCounts::new(spec);
    for l in &locs {
        counts.add(l).unwrap();
    }
    let mapper = FftMapper::new(counts).unwrap();
    for lam in [0.0, 2.0 / 3.0] {
        // Closed-form kernels (λ(d+1)/2 integer) for a fast direct sum.
        let k = DebiasKernel::new(2, grid.bandwidth(), eps, lam).unwrap();
        let est = mapper.estimate(&k).unwrap();
        // The map states no discretisation bound (docs/MATH.md §9.3); the
        // certified one is still computed on request.
        assert!(est.discretisation_bound.is_nan());
        let bound = mapper.discretisation(&k).total();
        let direct = direct_map(&grid, &k, &locs).unwrap();
        let worst = est
            .values
            .iter()
            .zip(&direct)
            .map(|(a, b)| (a - b).abs())
            .fold(0.0, f64::max);
        assert!(worst <= bound, "λ={lam}: {worst} > {bound}");
        assert!(
            worst < 0.05 * direct.iter().cloned().fold(0.0, f64::max),
            "λ={lam}: {worst}"
        );
        // The bound is data-dependent (docs/MATH.md §9.3) and within a
        // stated factor of the error it bounds: the first-order binning
        // terms ∇K·u of different locations partly cancel, which a
        // deterministic bound cannot use. Being 31-36x the error, it is
        // not printed with the map (issue 22: within 3x or none).
        let parts = mapper.discretisation(&k);
        println!(
            "λ={lam}: observed {worst:.2e}, bound {bound:.2e} (binning {:.2e}, global Lip·|Δ|/2 {:.2e}), ratio {:.1}",
            parts.binning,
            k.lipschitz_bound() * 0.5 * std::f64::consts::SQRT_2 * counts_delta,
            bound / worst
        );
        assert!(bound <= 200.0 * worst, "λ={lam}");
    }
}

#[test]
fn counts_are_bit_identical_under_any_sharding() {
    let grid = KdeGrid::square(10_000.0, 11).unwrap();
    let eps = 2e-3;
    let set = QuerySet::Kde(grid.clone());
    let dev = MapRelease::new(set.clone(), MapMechanism::APriori, eps).unwrap();
    let mut rng = StdRng::seed_from_u64(9);
    let reports: Vec<_> = devices(3000, 3)
        .iter()
        .map(|x| dev.release_unmetered(x, &mut rng).unwrap())
        .collect();
    let mut whole = MapAggregator::new(set.clone(), MapMechanism::APriori, eps).unwrap();
    for r in &reports {
        whole.add(r).unwrap();
    }
    let mut shards: Vec<MapAggregator> = (0..3)
        .map(|_| MapAggregator::new(set.clone(), MapMechanism::APriori, eps).unwrap())
        .collect();
    for (i, r) in reports.iter().enumerate() {
        shards[(i * 7 + i / 5) % 3].add(r).unwrap();
    }
    let mut merged = shards.pop().unwrap();
    for s in shards.iter().rev() {
        merged.merge(s).unwrap();
    }
    assert_eq!(merged.counts(), whole.counts());
    let a = merged.estimate(Some(0.5)).unwrap();
    let b = whole.estimate(Some(0.5)).unwrap();
    // (Not `a == b`: the unstated discretisation bound is NaN in both.)
    assert_eq!(
        (&a.values, &a.standard_errors, a.n, a.lambda),
        (&b.values, &b.standard_errors, b.n, b.lambda)
    );
}

/// A certified radial table of a kernel: K(r) at r = kτ, linearly
/// interpolated; the interpolation error is at most H τ²/8 (H >= sup
/// ‖Hess K‖), returned with the table.
struct RadialTable {
    tau: f64,
    v: Vec<f64>,
    err: f64,
}

impl RadialTable {
    fn new(k: &DebiasKernel, r_max: f64, points: usize) -> Self {
        let tau = r_max / points as f64;
        let v = (0..=points + 1)
            .map(|i| k.value(i as f64 * tau).unwrap())
            .collect();
        // Beyond r_max the kernel is at most its certified tail bound.
        let err = (k.hessian_bound() * tau * tau / 8.0).max(k.tail_bound(r_max));
        Self { tau, v, err }
    }
    fn at(&self, r: f64) -> f64 {
        let x = r / self.tau;
        let i = x as usize;
        if i + 1 >= self.v.len() {
            return 0.0;
        }
        let f = x - i as f64;
        self.v[i] * (1.0 - f) + self.v[i + 1] * f
    }
}

/// Bernstein's inequality for a mean of N independent terms with
/// |Y_i - E Y_i| <= b and average variance <= σ²: P(|mean - E mean| >= u)
/// <= 2 exp(-N u² / (2σ² + 2bu/3)); the u that makes the right-hand side α.
fn bernstein_radius(n: f64, sigma2: f64, b: f64, alpha: f64) -> f64 {
    let l = (2.0 / alpha).ln();
    let c = 2.0 * b * l / 3.0;
    (c + (c * c + 8.0 * n * sigma2 * l).sqrt()) / (2.0 * n)
}

/// An upper confidence bound (level 1 - α) of the average second moment
/// s = (1/N) Σ E Y_i² from ŝ = (1/N) Σ Y_i² with |Y| <= m: Bernstein on the
/// terms Y² (range m², variance <= m² E Y²) gives s <= ŝ + a√s + c', solved
/// for √s.
fn second_moment_ucb(n: f64, s_hat: f64, m: f64, alpha: f64) -> f64 {
    let l = (1.0 / alpha).ln();
    let a = (2.0 * m * m * l / n).sqrt();
    let c = s_hat + 2.0 * m * m * l / (3.0 * n);
    let r = 0.5 * (a + (a * a + 4.0 * c).sqrt());
    r * r
}

#[test]
fn debiased_map_is_unbiased_in_every_cell_and_its_error_vanishes_as_n_grows() {
    // No hand-picked seed: seeds 0, 1, 2 all run and must all pass, with
    // bounds whose false-failure probability is at most 1e-6 in total
    // (Bonferroni over cells, seeds, the two checkpoints and the two
    // inequalities used at each).
    //
    // Per seed, repetitions of the n devices give N independent per-device
    // terms Y = K̃(t_j - x̃) per cell, with E Y = K_h(t_j - x) (docs/MATH.md
    // §9.2), so the average of the N terms is unbiased for the true map.
    // It is evaluated exactly (a certified radial table of K̃, not the FFT,
    // whose own error is tested above). Bernstein's inequality with
    // |Y - E Y| <= b = 2 sup|K̃| and the average variance bounded by an
    // upper confidence bound of the average E Y² (Bernstein again, on Y²)
    // gives a radius u(N) ~ 1/√N: |mean - truth| <= u(N) + the table's
    // error + the snapping bias Lip(K̃)·Λ/√2 (Λ <= 2^-20/ε, the public
    // grid of the sent location). Checked at N = 5n and N = 20n: the
    // allowed error shrinks as N grows and the debiased mean stays inside
    // it, while the plain map's mean stays outside it in many cells.
    let grid = KdeGrid::square(10_000.0, 9).unwrap();
    let h = grid.bandwidth();
    let eps = 1.0 / h; // εh = 1
    let xs = devices(2000, 4);
    let truth = grid.exact_map(&xs);
    let (seeds, checkpoints) = (3u64, [5u64, 20]);
    let set = QuerySet::Kde(grid.clone());
    let kt = DebiasKernel::new(2, h, eps, 1.0).unwrap();
    let table = RadialTable::new(&kt, 30.0 * h, 6000);
    let m = kt.sup_bound();
    let b = 2.0 * m;
    let alpha = 1e-6 / (grid.len() * seeds as usize * checkpoints.len() * 2) as f64;
    let snap = kt.lipschitz_bound() * 2f64.powi(-20) / eps / 2f64.sqrt();
    let dev = MapRelease::new(set, MapMechanism::APriori, eps).unwrap();
    let mut plain_far = [0usize; 2];
    let mut radii = [0.0f64; 2];
    let mut worst_ratio = [0.0f64; 2];
    for seed in 0..seeds {
        let mut rng = StdRng::seed_from_u64(seed);
        let mut sum = vec![0.0; grid.len()];
        let mut sum2 = vec![0.0; grid.len()];
        let mut plain = vec![0.0; grid.len()];
        let mut done = 0u64;
        for (c, &reps) in checkpoints.iter().enumerate() {
            while done < reps {
                for x in &xs {
                    let l = dev
                        .release_unmetered(x, &mut rng)
                        .unwrap()
                        .location
                        .unwrap();
                    for j in 0..grid.len() {
                        let t = grid.center(j);
                        let r = ((l[0] - t[0]).powi(2) + (l[1] - t[1]).powi(2)).sqrt();
                        let y = table.at(r);
                        sum[j] += y;
                        sum2[j] += y * y;
                        plain[j] += (-0.5 * r * r / (h * h)).exp();
                    }
                }
                done += 1;
            }
            let nn = (done as usize * xs.len()) as f64;
            for j in 0..grid.len() {
                let s2 = second_moment_ucb(nn, sum2[j] / nn, m, alpha);
                let radius = bernstein_radius(nn, s2, b, alpha) + table.err + snap;
                radii[c] = radii[c].max(radius);
                let err = (sum[j] / nn - truth[j]).abs();
                worst_ratio[c] = worst_ratio[c].max(err / radius);
                assert!(
                    err <= radius,
                    "seed {seed}, N = {nn}, cell {j}: {} vs {} (allowed {radius})",
                    sum[j] / nn,
                    truth[j]
                );
                if (plain[j] / nn - truth[j]).abs() > radius {
                    plain_far[c] += 1;
                }
            }
        }
    }
    println!(
        "table error {:.2e}, snapping {snap:.1e}, sup {m:.3}",
        table.err
    );
    println!(
        "allowed error (largest over cells) {:.4} at N = 5n, {:.4} at N = 20n; worst |mean - truth| / allowed {:.2}, {:.2}; plain beyond it in {} and {} of {} cells",
        radii[0],
        radii[1],
        worst_ratio[0],
        worst_ratio[1],
        plain_far[0],
        plain_far[1],
        grid.len() * seeds as usize
    );
    // The allowed error shrinks about like 1/√N (4x the devices: about half).
    assert!(radii[1] < 0.6 * radii[0], "{radii:?}");
    // The same bound sees the plain map's bias, more of it as N grows.
    let cells = grid.len() * seeds as usize;
    assert!(plain_far[1] > cells / 4, "{plain_far:?} of {cells}");
    assert!(plain_far[1] >= plain_far[0], "{plain_far:?}");
}

#[test]
fn planner_beats_plain_and_explains_itself() {
    let grid = KdeGrid::square(10_000.0, 11).unwrap();
    let eps = 1.0 / grid.bandwidth();
    let xs = devices(20_000, 5);
    let set = QuerySet::Kde(grid.clone());
    let dev = MapRelease::new(set.clone(), MapMechanism::APriori, eps).unwrap();
    let mut agg = MapAggregator::new(set.clone(), MapMechanism::APriori, eps).unwrap();
    let mut rng = StdRng::seed_from_u64(6);
    for x in &xs {
        agg.add(&dev.release_unmetered(x, &mut rng).unwrap())
            .unwrap();
    }
    let m = agg.mapper().unwrap().unwrap();
    let p = plan(&set, eps, xs.len() as u64, Some(&m)).unwrap();
    assert!(!p.line.contains('\n'));
    assert!(p.pick().name.starts_with("a-priori"), "{}", p.line);
    let plain = p
        .predictions
        .iter()
        .find(|q| q.lambda == Some(0.0))
        .unwrap();
    assert!(p.pick().ase <= plain.ase);
}

#[test]
fn reports_for_another_grid_epsilon_or_shape_are_rejected() {
    let g1 = QuerySet::Kde(KdeGrid::square(10_000.0, 11).unwrap());
    let g2 = QuerySet::Kde(KdeGrid::square(10_000.0, 13).unwrap());
    let mut rng = StdRng::seed_from_u64(7);
    let r2 = MapRelease::new(g2, MapMechanism::APriori, 1e-3)
        .unwrap()
        .release_unmetered(&[10.0, 10.0], &mut rng)
        .unwrap();
    let mut agg = MapAggregator::new(g1.clone(), MapMechanism::APriori, 1e-3).unwrap();
    assert!(agg.add(&r2).is_err());
    let mut r1 = MapRelease::new(g1.clone(), MapMechanism::APriori, 1e-3)
        .unwrap()
        .release_unmetered(&[10.0, 10.0], &mut rng)
        .unwrap();
    let mut other_eps = r1.clone();
    other_eps.epsilon = 2e-3;
    assert!(agg.add(&other_eps).is_err());
    r1.location = Some(vec![f64::NAN, 1.0]);
    assert!(agg.add(&r1).is_err());
    r1.location = Some(vec![1.0]);
    assert!(agg.add(&r1).is_err());
    assert_eq!(agg.accepted(), 0);
    let mut vl = MapAggregator::new(g1.clone(), MapMechanism::VectorLaplace, 1e-3).unwrap();
    let mut bad = MapRelease::new(g1, MapMechanism::VectorLaplace, 1e-3)
        .unwrap()
        .release_unmetered(&[10.0, 10.0], &mut rng)
        .unwrap();
    bad.values.as_mut().unwrap().pop();
    assert!(vl.add(&bad).is_err());
}

#[test]
fn debiased_ladder_bias_vanishes_as_n_grows() {
    // d = 1: an income ladder (three soft thresholds and an interval, θ =
    // 10k) from noise a priori at ε = 1/5000 per dollar. With the public
    // bandwidth h_n = θ·min(1/4, n^{-1/4}) ([`LadderDebias::for_n`]) the
    // debiased estimate's expectation is the ladder smoothed by N(0, h_n²)
    // (exactly: docs/MATH.md §9.2), so its bias (1/n)Σ (f_h - f)(x_i),
    // computed in closed form, shrinks with n, while plain's bias
    // (1/n)Σ (E f(x_i + N) - f(x_i)) does not. The simulated estimate must
    // lie within the bias plus a Bernstein radius (|g| <= sup|g|, false
    // failure <= 1e-6 over queries and n) of the truth.
    use geopriv::map::{LadderDebias, RampLadder, RampQuery};
    use geopriv::{SoftInterval, SoftThreshold};
    let theta = 10_000.0;
    let eps = 1.0 / 5_000.0;
    let queries: Vec<RampQuery> = [30e3, 60e3, 100e3]
        .iter()
        .map(|&t| RampQuery::Threshold(SoftThreshold::new(t, theta).unwrap()))
        .chain([RampQuery::Interval(
            SoftInterval::new(40e3, 80e3, theta).unwrap(),
        )])
        .collect();
    let set = QuerySet::Ramps(RampLadder::new(queries.clone(), [0.0, 300e3]).unwrap());
    let ns = [1_000usize, 10_000, 100_000];
    let alpha = 1e-6 / (queries.len() * ns.len()) as f64;
    let mut rng = StdRng::seed_from_u64(0);
    let mut deb_bias = Vec::new();
    for &n in &ns {
        // Log-normal-ish incomes.
        let xs: Vec<f64> = (0..n)
            .map(|_| {
                let z: f64 = (0..12).map(|_| rng.random::<f64>()).sum::<f64>() - 6.0;
                (50e3 * (0.5 * z).exp()).min(300e3)
            })
            .collect();
        let d = LadderDebias::for_n(&queries, eps, n as u64).unwrap();
        let dev = MapRelease::new(set.clone(), MapMechanism::APriori, eps).unwrap();
        let mut agg = MapAggregator::new(set.clone(), MapMechanism::APriori, eps)
            .unwrap()
            .with_ladder_smoothing(d.smoothing())
            .unwrap();
        for x in &xs {
            agg.add(&dev.release_unmetered(&[*x], &mut rng).unwrap())
                .unwrap();
        }
        let deb = agg.estimate(Some(1.0)).unwrap();
        let mut worst_bias: f64 = 0.0;
        for (j, q) in queries.iter().enumerate() {
            let truth = xs.iter().map(|&x| q.value(x).unwrap()).sum::<f64>() / n as f64;
            let target = xs.iter().map(|&x| d.smoothed(q, x).unwrap()).sum::<f64>() / n as f64;
            let bias = target - truth;
            assert!(bias.abs() <= d.bias_bound(q));
            worst_bias = worst_bias.max(bias.abs());
            let sup = d.sup_bound(q);
            let l = (2.0 / alpha).ln();
            let c = 4.0 * sup * l / 3.0;
            let radius = (c + (c * c + 8.0 * n as f64 * sup * sup * l).sqrt()) / (2.0 * n as f64);
            assert!(
                (deb.values[j] - target).abs() <= radius,
                "n = {n}, query {j}: {} vs {target} (radius {radius})",
                deb.values[j]
            );
        }
        deb_bias.push(worst_bias);
    }
    println!("debiased ladder: largest |bias| at n = 1e3, 1e4, 1e5: {deb_bias:?}");
    // h_n shrinks by 10^{1/4} per decade of n; the bias with it.
    assert!(deb_bias[1] < 0.8 * deb_bias[0] && deb_bias[2] < 0.8 * deb_bias[1]);
    // Plain's bias for the 60k threshold at this ε, by quadrature over the
    // Laplace noise, does not shrink: it is far above the debiased one.
    let q = &queries[1];
    let xs: Vec<f64> = (0..200).map(|i| 20e3 + 400.0 * i as f64).collect();
    let plain_bias = xs
        .iter()
        .map(|&x| {
            let steps = 20_000;
            let (a, b) = (-100e3, 100e3);
            let hstep = (b - a) / steps as f64;
            let mean: f64 = (0..steps)
                .map(|k| {
                    let z = a + (k as f64 + 0.5) * hstep;
                    q.value(x + z).unwrap() * 0.5 * eps * (-eps * z.abs()).exp() * hstep
                })
                .sum();
            (mean - q.value(x).unwrap()).abs()
        })
        .fold(0.0, f64::max);
    assert!(
        plain_bias > 5.0 * deb_bias[2],
        "{plain_bias} vs {deb_bias:?}"
    );
}

#[test]
fn one_dimensional_noisy_location_meets_its_floating_point_guarantee() {
    // Exact enumeration (docs/MATH.md §8.1, §9.5) of the 1-D location sent
    // by noise a priori: y = snap(±(-b ln w) + x) on Λ = 2^⌊log2 b⌋ 2^-20,
    // b = 1/ε, w the full-resolution uniform: the same arithmetic as
    // `MapRelease` (checked below on one draw). Measured η and δ_fp must
    // be within `location_floating_point_guarantee()`. The 2-D location
    // (planar Laplace, not a product of 1-D noises) is covered by the
    // argument only.
    use geopriv::audit::enumeration::{compare_pair, CellPlan, FullResolution, MonotoneSampler};
    use geopriv::map::{RampLadder, RampQuery};
    use geopriv::noise::Laplace;
    use geopriv::SoftThreshold;
    let eps = 1.0 / 7_000.0; // per dollar
    let set = QuerySet::Ramps(
        RampLadder::new(
            vec![RampQuery::Threshold(
                SoftThreshold::new(50e3, 10e3).unwrap(),
            )],
            [0.0, 400e3],
        )
        .unwrap(),
    );
    let rel = MapRelease::new(set, MapMechanism::APriori, eps).unwrap();
    let g = rel.location_floating_point_guarantee().unwrap();
    let b = 1.0 / eps;
    let grid = 2f64.powi(b.log2().floor() as i32) * 2f64.powi(-(g.grid_bits as i32));
    let lap = Laplace::new(b).unwrap();
    let snap = |y: f64| (y / grid).round() * grid;
    let (x, x2) = (123_456.7, 123_456.7 + 350.0);
    let rx = move |w: f64, neg: bool| {
        let m = lap.magnitude_at(w);
        snap(if neg { -m } else { m } + x)
    };
    let rx2 = move |w: f64, neg: bool| {
        let m = lap.magnitude_at(w);
        snap(if neg { -m } else { m } + x2)
    };
    // Same arithmetic as the release: every sent location is on the grid.
    let mut rng = StdRng::seed_from_u64(0);
    for _ in 0..1000 {
        let y = rel
            .release_unmetered(&[x], &mut rng)
            .unwrap()
            .location
            .unwrap()[0];
        assert_eq!(y, snap(y));
    }
    let law = FullResolution;
    let plan = CellPlan {
        centre: x,
        scale: b,
        grid,
        epsilon_d: eps * (x2 - x),
        eta: g.eta,
        z_max: g.z_max,
        tail_beyond_z_max: g.delta_fp,
        exact_cells: 32,
        samples: 3_000,
        seed: 3,
        relative_bits: None,
    };
    let f = compare_pair(
        &MonotoneSampler {
            law: &law,
            release: &rx,
        },
        &MonotoneSampler {
            law: &law,
            release: &rx2,
        },
        &plan,
    );
    println!(
        "1-D noisy location: η measured {:e} (stated {:e}), δ_fp {:e} (stated {:e}), cells {}",
        f.eta_measured, g.eta, f.delta_fp, g.delta_fp, f.cells
    );
    assert!(f.eta_measured <= g.eta, "{f:?}");
    assert!(f.delta_fp <= g.delta_fp * (1.0 + 1e-9), "{f:?}");
}

#[test]
fn cell_correlation_sums_range_from_independent_to_fully_correlated() {
    // (1/m)Σ_jk ρ² is 1 for independent cells and m when all cells move
    // together (docs/MATH.md §9.4): a narrow kernel (h far below the grid
    // step) against a very wide one.
    let grid = KdeGrid::square(10_000.0, 9).unwrap();
    let eps = 1.0 / grid.bandwidth();
    let spec = BinSpec::for_estimation(&grid, eps, 2048).unwrap();
    let mut counts = BinnedCounts::new(spec);
    counts.add(&[5_000.0, 5_000.0]).unwrap();
    let mapper = FftMapper::new(counts).unwrap();
    let m = grid.len() as f64;
    let (s1, s2) = mapper.correlation_sums(|w| (-0.5 * (w * 50.0).powi(2)).exp());
    assert!(
        (s1 - 1.0).abs() < 0.05 && (s2 - 1.0).abs() < 1e-3,
        "{s1} {s2}"
    );
    let (s1, s2) = mapper.correlation_sums(|w| (-0.5 * (w * 1e6).powi(2)).exp());
    assert!(
        s1 > 0.9 * m && s2 > 0.9 * m && s2 <= m * (1.0 + 1e-9),
        "{s1} {s2}"
    );
}

#[test]
fn ladder_server_merges_shards_and_fixes_its_smoothing_before_reports() {
    use geopriv::map::{RampLadder, RampQuery};
    use geopriv::SoftThreshold;
    let set = QuerySet::Ramps(
        RampLadder::new(
            vec![RampQuery::Threshold(
                SoftThreshold::new(50e3, 10e3).unwrap(),
            )],
            [0.0, 200e3],
        )
        .unwrap(),
    );
    let eps = 1e-4;
    let dev = MapRelease::new(set.clone(), MapMechanism::APriori, eps).unwrap();
    let mut rng = StdRng::seed_from_u64(1);
    let reports: Vec<_> = (0..300)
        .map(|i| {
            dev.release_unmetered(&[1_000.0 * i as f64 % 200e3], &mut rng)
                .unwrap()
        })
        .collect();
    let new = || MapAggregator::new(set.clone(), MapMechanism::APriori, eps).unwrap();
    let mut whole = new();
    let (mut a, mut b) = (new(), new());
    for (i, r) in reports.iter().enumerate() {
        whole.add(r).unwrap();
        if i % 3 == 0 { &mut a } else { &mut b }.add(r).unwrap();
    }
    a.merge(&b).unwrap();
    let (d1, d2) = (
        a.estimate(Some(1.0)).unwrap(),
        whole.estimate(Some(1.0)).unwrap(),
    );
    assert!((d1.values[0] - d2.values[0]).abs() < 1e-12);
    assert_eq!(d1.lambda, 1.0);
    assert_eq!(a.estimate(None).unwrap().lambda, 0.0);
    // The bandwidth is public and fixed before any report.
    assert!(whole.clone().with_ladder_smoothing(500.0).is_err());
    let other = new().with_ladder_smoothing(500.0).unwrap();
    assert!(a.merge(&other).is_err());
    // Not a ladder: refused.
    let grid = QuerySet::Kde(KdeGrid::square(10_000.0, 5).unwrap());
    assert!(MapAggregator::new(grid, MapMechanism::APriori, eps)
        .unwrap()
        .with_ladder_smoothing(1.0)
        .is_err());
}

/// Noise-a-priori reports of `xs` at εh = `eh` on `grid`, aggregated
/// with at most 512 bins per axis.
fn aggregated(grid: &KdeGrid, eh: f64, xs: &[[f64; 2]], seed: u64) -> MapAggregator {
    aggregated_with_bins(grid, eh, xs, seed, Some(512))
}

/// The same with `max_bins` bins per axis at most (`None`: the server's
/// default, 1024).
fn aggregated_with_bins(
    grid: &KdeGrid,
    eh: f64,
    xs: &[[f64; 2]],
    seed: u64,
    max_bins: Option<usize>,
) -> MapAggregator {
    let eps = eh / grid.bandwidth();
    let set = QuerySet::Kde(grid.clone());
    let dev = MapRelease::new(set.clone(), MapMechanism::APriori, eps).unwrap();
    let mut agg = match max_bins {
        Some(b) => MapAggregator::with_max_bins(set, MapMechanism::APriori, eps, b),
        None => MapAggregator::new(set, MapMechanism::APriori, eps),
    }
    .unwrap();
    let mut rng = StdRng::seed_from_u64(seed);
    for x in xs {
        agg.add(&dev.release_unmetered(x, &mut rng).unwrap())
            .unwrap();
    }
    agg
}

fn ase(a: &[f64], b: &[f64]) -> f64 {
    a.iter().zip(b).map(|(x, y)| (x - y).powi(2)).sum::<f64>() / a.len() as f64
}

#[test]
fn em_map_is_non_negative_sharding_free_and_beats_plain_at_low_eps_h() {
    // docs/MATH.md §9.6. εh = 0.3: the plain map is mostly bias; EM
    // deconvolution (stopped by held-out likelihood, no truth) removes
    // most of it. The map is a function of the integer counts only, so
    // two shards merged give the same bits as one server.
    let grid = KdeGrid::square(10_000.0, 21).unwrap();
    let xs = devices(30_000, 11);
    let truth = grid.exact_map(&xs);
    let eh = 0.3;
    let eps = eh / grid.bandwidth();
    let agg = aggregated(&grid, eh, &xs, 12);
    let em = EmDeconvolution::new(&grid, eps, agg.counts().unwrap(), EmOptions::default())
        .unwrap()
        .estimate()
        .unwrap();
    assert!(em.values.iter().all(|v| *v >= 0.0 && v.is_finite()));
    let m = agg.mapper().unwrap().unwrap();
    let plain = m.estimate(&agg.kernel(0.0).unwrap()).unwrap();
    let (e, p) = (ase(&em.values, &truth), ase(&plain.values, &truth));
    println!(
        "EM {e:.3e} ({} iterations, predicted {:.3e}), plain {p:.3e}",
        em.iterations, em.predicted_ase
    );
    assert!(e < p / 3.0, "EM {e} vs plain {p}");
    // The raw bootstrap error model is within 5x of the measured error
    // (the planner doubles its bias part; issue 19 item 15 asks for 3x,
    // not yet met on these sharp-edged discs at n = 3·10^4).
    assert!(
        em.predicted_ase > e / 5.0 && em.predicted_ase < 5.0 * e,
        "{}",
        em.predicted_ase
    );
    // Sharding: the same devices' reports in two shards, merged.
    let set = QuerySet::Kde(grid.clone());
    let dev = MapRelease::new(set.clone(), MapMechanism::APriori, eps).unwrap();
    let mut rng = StdRng::seed_from_u64(12);
    let reports: Vec<_> = xs
        .iter()
        .map(|x| dev.release_unmetered(x, &mut rng).unwrap())
        .collect();
    let shard = |rs: &[geopriv::map::MapReport]| {
        let mut a =
            MapAggregator::with_max_bins(set.clone(), MapMechanism::APriori, eps, 512).unwrap();
        for r in rs {
            a.add(r).unwrap();
        }
        a
    };
    let mut merged = shard(&reports[7_000..]);
    merged.merge(&shard(&reports[..7_000])).unwrap();
    let em2 = EmDeconvolution::new(&grid, eps, merged.counts().unwrap(), EmOptions::default())
        .unwrap()
        .estimate()
        .unwrap();
    assert_eq!(em2, em);
}

#[test]
fn planner_picks_em_at_low_eps_h_and_the_debiased_kernel_at_high_eps_h() {
    let grid = KdeGrid::square(10_000.0, 21).unwrap();
    let xs = devices(30_000, 13);
    let truth = grid.exact_map(&xs);
    for (eh, want_em) in [(0.3, true), (10.0, false)] {
        let agg = aggregated(&grid, eh, &xs, 14);
        let (est, p) = agg.planned_estimate().unwrap();
        let p = p.unwrap();
        println!("εh = {eh}: {}", p.line);
        assert_eq!(est.em_iterations.is_some(), want_em, "{}", p.line);
        // The pick is within 1.5x of the best measured estimator.
        let m = agg.mapper().unwrap().unwrap();
        let mut best = ase(&p.em.as_ref().unwrap().values, &truth);
        for l in geopriv::map::LAMBDAS {
            best = best.min(ase(
                &m.estimate(&agg.kernel(l).unwrap()).unwrap().values,
                &truth,
            ));
        }
        let got = ase(&est.values, &truth);
        assert!(got <= 1.5 * best, "εh = {eh}: {got} vs best {best}");
        // The published interval (docs/MATH.md §9.7, branch emk1): for EM
        // the λ = 1 map's, bit for bit (its centres and SE beside EM's
        // values); a kernel map's is centred on its values.
        let k1 = m.estimate(&agg.kernel(1.0).unwrap()).unwrap();
        if want_em {
            assert!(est.interval_centres.as_ref() == Some(&k1.values));
            assert!(est.standard_errors == k1.standard_errors);
            assert!(est.values != k1.values);
            let em = p.em.as_ref().unwrap();
            // The same map through the public constructor (λ is NaN
            // for EM: compared field by field).
            let again = agg.em_estimate(em, &m).unwrap();
            assert!(again.values == est.values && again.standard_errors == est.standard_errors);
            assert!(again.interval_centres == est.interval_centres);
            assert_eq!(again.em_iterations, est.em_iterations);
        } else {
            assert_eq!(est.interval_centres, None);
        }
    }
}

#[test]
fn debiased_standard_errors_count_only_the_noise_at_high_eps_h() {
    // Against the map of the same devices only the noise varies: at
    // εh = 10 the old unconditional spread (which includes the devices'
    // own spread) was 5x too large (issue 22): sd of (map - truth)/SE was
    // 0.18; with the conditional variance (and the rounding spread,
    // docs/MATH.md §9.7) it is 0.81 over the cells with devices near,
    // on this one draw.
    let grid = KdeGrid::square(10_000.0, 21).unwrap();
    let xs = devices(20_000, 15);
    let truth = grid.exact_map(&xs);
    let agg = aggregated(&grid, 10.0, &xs, 16);
    let m = agg.mapper().unwrap().unwrap();
    let est = m.estimate(&agg.kernel(1.0).unwrap()).unwrap();
    let z: Vec<f64> = est
        .values
        .iter()
        .zip(&truth)
        .zip(&est.standard_errors)
        // Cells with devices near (elsewhere map and truth are both 0 up
        // to the FFT's round-off, the SE's floor).
        .filter(|((_, t), _)| **t > 1e-9)
        .map(|((v, t), s)| (v - t) / s)
        .collect();
    let sd = (z.iter().map(|v| v * v).sum::<f64>() / z.len() as f64).sqrt();
    let cover = z.iter().filter(|v| v.abs() <= 1.96).count() as f64 / z.len() as f64;
    println!("sd {sd:.3}, coverage {cover:.3}");
    assert!((0.6..1.5).contains(&sd), "sd {sd}");
    // 0.997 on this draw (the occupied cells are few and correlated, so
    // one draw's coverage is noisy); over
    // draws and λ see intervals_cover_95_percent_of_cells_...
    assert!(cover >= 0.9, "coverage {cover}");
}

#[test]
fn em_on_a_coarse_lattice_at_eps_h_0_1_is_non_negative_and_beats_plain() {
    // docs/MATH.md §9.8 (opt-in, EmOptions::coarse_lattice): at εh = 0.1
    // one map step is below a tenth of the noise scale, so EM's cells
    // span c = floor(0.2/(ε·step)) = 2 map steps (odd map points fall on
    // cell edges). The map is still
    // non-negative, a function of the counts only, and beats plain.
    let grid = KdeGrid::square(10_000.0, 21).unwrap();
    let xs = devices(30_000, 21);
    let truth = grid.exact_map(&xs);
    let eh = 0.1;
    let eps = eh / grid.bandwidth();
    let agg = aggregated(&grid, eh, &xs, 22);
    let opts = EmOptions {
        coarse_lattice: true,
        ..EmOptions::default()
    };
    let engine = EmDeconvolution::new(&grid, eps, agg.counts().unwrap(), opts).unwrap();
    // The window: 11 cells of 1 km over the map and 57 beyond each side.
    assert_eq!(
        format!("{engine:?}"),
        "EmDeconvolution(window [125, 125], fft [125, 125])"
    );
    let fine =
        EmDeconvolution::new(&grid, eps, agg.counts().unwrap(), EmOptions::default()).unwrap();
    println!("coarse {engine:?}, fine {fine:?}");
    let em = engine.estimate().unwrap();
    assert!(em.values.iter().all(|v| *v >= 0.0 && v.is_finite()));
    let m = agg.mapper().unwrap().unwrap();
    let plain = m.estimate(&agg.kernel(0.0).unwrap()).unwrap();
    let (e, p) = (ase(&em.values, &truth), ase(&plain.values, &truth));
    println!(
        "EM {e:.3e} ({} iterations, predicted {:.3e}), plain {p:.3e}",
        em.iterations, em.predicted_ase
    );
    assert!(e < p, "EM {e} vs plain {p}");
    // The lattice map of the counts is a density of the same mass.
    let lattice = engine.plain_lattice_map();
    assert!(lattice.iter().all(|v| *v >= 0.0 && v.is_finite()));
}

#[test]
fn em_noise_lattice_bounds_the_window_at_low_eps_h() {
    // docs/MATH.md §9.8 (branch emlow, the default): at εh <= 0.318 EM's
    // cells span c = ⌊0.45/(ε·step)⌋ map steps, so the noise scale spans
    // about 2.2-2.4 cells and the window (map ± 8/ε) stays under a few
    // dozen cells per axis however small εh is; at εh >= 1 the lattice is
    // the one without it. The map stays non-negative and beats plain.
    let grid = KdeGrid::square(10_000.0, 21).unwrap();
    let xs = devices(20_000, 31);
    let truth = grid.exact_map(&xs);
    let window = |e: &EmDeconvolution| -> usize {
        let d = format!("{e:?}");
        let w = d.split("window [").nth(1).unwrap();
        w.split(',').next().unwrap().trim().parse().unwrap()
    };
    let fine_opts = EmOptions {
        noise_lattice: 0.0,
        ..EmOptions::default()
    };
    for (eh, lattice_on) in [(0.03, true), (0.1, true), (0.3, true), (1.0, false)] {
        let eps = eh / grid.bandwidth();
        let agg = aggregated(&grid, eh, &xs, 32);
        let c = agg.counts().unwrap();
        let em = EmDeconvolution::new(&grid, eps, c, EmOptions::default()).unwrap();
        let fine = EmDeconvolution::new(&grid, eps, c, fine_opts).unwrap();
        println!("εh {eh}: {em:?}, without the noise lattice {fine:?}");
        if lattice_on {
            assert!(window(&em) <= 70, "εh {eh}: {em:?}");
            assert!(window(&em) < window(&fine), "εh {eh}: {em:?} vs {fine:?}");
        } else {
            assert_eq!(format!("{em:?}"), format!("{fine:?}"));
        }
        if eh == 0.1 {
            let e = em.estimate().unwrap();
            assert!(e.values.iter().all(|v| *v >= 0.0 && v.is_finite()));
            let m = agg.mapper().unwrap().unwrap();
            let plain = m.estimate(&agg.kernel(0.0).unwrap()).unwrap();
            let (a, p) = (ase(&e.values, &truth), ase(&plain.values, &truth));
            println!(
                "εh 0.1: EM {a:.3e} ({} iterations), plain {p:.3e}",
                e.iterations
            );
            assert!(a < p, "EM {a} vs plain {p}");
        }
    }
}

#[test]
fn planned_estimate_with_the_callers_mapper_is_the_same_map() {
    // The CLI transforms the counts once and hands the FFT to the planner
    // (issue 22 item 4): same map and plan as the self-contained call,
    // and a mapper of other counts is refused.
    let grid = KdeGrid::square(10_000.0, 21).unwrap();
    let xs = devices(5_000, 23);
    let agg = aggregated(&grid, 1.0, &xs, 24);
    let m = agg.mapper().unwrap().unwrap();
    let (a, pa) = agg.planned_estimate().unwrap();
    let (b, pb) = agg.planned_estimate_with(&m).unwrap();
    // Debug strings: the EM map's λ is NaN, which PartialEq never equates.
    assert_eq!(format!("{a:?}"), format!("{b:?}"));
    assert_eq!(format!("{pa:?}"), format!("{pb:?}"));
    let other = aggregated(&grid, 1.0, &xs[..100], 24);
    assert!(agg
        .planned_estimate_with(&other.mapper().unwrap().unwrap())
        .is_err());
}

#[test]
fn intervals_cover_95_percent_of_cells_and_the_planner_predicts_within_3x() {
    // docs/MATH.md §9.7. value ± 1.96 SE against its target: the true map
    // for λ = 1 and EM, the map smoothed by the residual noise for λ < 1
    // (computed from the devices' own locations, binned 3x finer).
    // Coverage averaged over the cells and two noise draws of the same
    // devices; beside it the planner's predicted ASE against the measured.
    let grid = KdeGrid::square(10_000.0, 21).unwrap();
    let set = QuerySet::Kde(grid.clone());
    let xs = devices(20_000, 21);
    let truth = grid.exact_map(&xs);
    let lams = [0.0, 0.6, 1.0];
    let mut kernel_cover = Vec::new();
    let mut em_cover = Vec::new();
    for eh in [0.3, 1.0, 10.0] {
        let eps = eh / grid.bandwidth();
        let mut cov = [0.0; 4];
        let mut ratio = [0.0; 4];
        for rep in 0..2u64 {
            let agg = aggregated(&grid, eh, &xs, 22 + rep);
            let m = agg.mapper().unwrap().unwrap();
            let p = plan(&set, eps, xs.len() as u64, Some(&m)).unwrap();
            // A kernel map whose bias the reports do not resolve is not
            // ranked (no prediction; NaN here), nor EM where its error is
            // not pinned (its number is then an upper end, branch rank15).
            let pred = |name: &str| {
                p.predictions
                    .iter()
                    .find(|q| q.name == name && !(q.em_iterations.is_some() && q.upper_bound))
                    .map_or(f64::NAN, |q| q.ase)
            };
            let maps = common::kernel_maps_against_targets(&grid, &agg, &xs, &truth, &lams);
            for (i, (lam, (est, target))) in lams.into_iter().zip(maps).enumerate() {
                cov[i] += 0.5
                    * geopriv::map::interval_coverage(&est.values, &est.standard_errors, &target);
                ratio[i] += 0.5 * ase(&est.values, &truth) / pred(&format!("a-priori λ={lam:.1}"));
            }
            let em = p.em.as_ref().unwrap();
            let se = geopriv::map::em_standard_errors(em, EmOptions::default().replicates);
            cov[3] += 0.5 * geopriv::map::interval_coverage(&em.values, &se, &truth);
            ratio[3] += 0.5 * ase(&em.values, &truth) / pred("a-priori em");
        }
        println!(
            "εh = {eh}: coverage λ=0 {:.3}, λ=0.6 {:.3}, λ=1 {:.3}, EM {:.3}; measured/predicted ASE {:.2}, {:.2}, {:.2}, EM {:.2}",
            cov[0], cov[1], cov[2], cov[3], ratio[0], ratio[1], ratio[2], ratio[3]
        );
        for (i, c) in cov[..3].iter().enumerate() {
            // Measured 0.930-0.954 (seeded); the mean over the nine below.
            assert!((0.89..=0.98).contains(c), "εh = {eh}, λ = {}: {c}", lams[i]);
            kernel_cover.push(*c);
        }
        // EM: the bias-aware interval of the path bias bound
        // κ·|M_t − M_3t| and the bootstrap spread conditioned on the
        // devices (docs/MATH.md §9.7; before: 0.916 / 0.976 / 0.890 at
        // εh = 0.3 / 1 / 10 from the bootstrap's bias).
        em_cover.push(cov[3]);
        // The unbiased map's prediction is its variance (noise and
        // rounding), within 3x of the measured ASE at every εh.
        assert!((1.0 / 3.0..=3.0).contains(&ratio[2]), "λ = 1: {}", ratio[2]);
        // Every ranked prediction within 3x (NaN: not ranked).
        for r in ratio {
            assert!(
                r.is_nan() || (1.0 / 3.0..=3.0).contains(&r),
                "εh = {eh}: {ratio:?}"
            );
        }
    }
    let mean = kernel_cover.iter().sum::<f64>() / kernel_cover.len() as f64;
    println!("kernel maps: mean coverage {mean:.3}; EM {em_cover:.3?}");
    assert!((0.93..=0.97).contains(&mean), "{mean}");
    // EM (docs/MATH.md §9.7): measured 0.937 / 0.986 / 0.923 at εh =
    // 0.3 / 1 / 10 (mean 0.949; before, with the bootstrap's bias alone:
    // 0.916 / 0.976 / 0.890). Issue 22 item 2's [0.93, 0.97] per εh is
    // not met at εh = 1 (conservative) and εh = 10 (short at the discs'
    // sharp edges); the mean is held to it, each εh to [0.91, 0.99].
    let em_mean = em_cover.iter().sum::<f64>() / em_cover.len() as f64;
    assert!((0.93..=0.97).contains(&em_mean), "EM {em_cover:?}");
    for c in &em_cover {
        assert!((0.91..=0.99).contains(c), "EM coverage {em_cover:?}");
    }
}

#[test]
#[ignore = "measurement (branch emtarget, docs/MATH.md §9.7): 24 plans and 48 EM fits, about 25 s CPU"]
fn em_spread_only_interval_against_ems_mean_given_the_devices() {
    // Measured, not adopted (docs/MATH.md §9.7, BENCHMARKS.md "Branch
    // emtarget"): EM's interval formed from the bootstrap spread alone,
    // scored against T_j = E[M_j | devices], estimated from K = 8 noise
    // draws of the two discs (draw k against the mean of the other 7,
    // half-width x √(8/7) for that mean's own error). Columns: the
    // conditioned spread (R = 4, the planner's), the unconditioned one
    // (the same EM without the planner's share), both with R = 16, and
    // the stated bias-aware interval. Prints only.
    let grid = KdeGrid::square(10_000.0, 21).unwrap();
    let set = QuerySet::Kde(grid.clone());
    let xs = devices(20_000, 21);
    const K: usize = 8;
    let z = 1.959_963_984_540_054;
    for eh in [0.3, 1.0, 10.0] {
        let eps = eh / grid.bandwidth();
        // per draw: values, [cond4, uncond4, cond16, uncond16] SEs, t*
        // Per draw: the map, its SEs (the five columns), t* and the share.
        type Draw = (Vec<f64>, Vec<Vec<f64>>, usize, f64);
        let mut runs: Vec<Draw> = Vec::new();
        for rep in 0..K as u64 {
            let agg = aggregated(&grid, eh, &xs, 500 + rep);
            let m = agg.mapper().unwrap().unwrap();
            let p = plan(&set, eps, xs.len() as u64, Some(&m)).unwrap();
            let em = p.em.as_ref().unwrap();
            let c = agg.counts().unwrap();
            let u4 = EmDeconvolution::new(&grid, eps, c, EmOptions::default())
                .unwrap()
                .estimate()
                .unwrap();
            assert_eq!(u4.values, em.values);
            let o16 = EmOptions {
                replicates: 16,
                ..EmOptions::default()
            };
            let u16 = EmDeconvolution::new(&grid, eps, c, o16)
                .unwrap()
                .estimate()
                .unwrap();
            let share: f64 = {
                let (a, b): (f64, f64) = em
                    .standard_errors
                    .iter()
                    .zip(&u4.standard_errors)
                    .fold((0.0, 0.0), |(a, b), (x, y)| (a + x * x, b + y * y));
                a / b
            };
            let w4 = geopriv::map::student_t_975(3) / z;
            let w16 = geopriv::map::student_t_975(15) / z;
            let peak = em.values.iter().fold(0.0f64, |a, v| a.max(v.abs()));
            let fl = 64.0 * f64::EPSILON * peak;
            let f = |s: &[f64], w: f64, sh: f64| {
                s.iter()
                    .map(|x| (x * w * sh.sqrt()).max(fl))
                    .collect::<Vec<_>>()
            };
            let ses = vec![
                f(&em.standard_errors, w4, 1.0),
                f(&u4.standard_errors, w4, 1.0),
                f(&u16.standard_errors, w16, share),
                f(&u16.standard_errors, w16, 1.0),
                geopriv::map::em_standard_errors(em, 4),
            ];
            runs.push((em.values.clone(), ses, em.iterations, share));
        }
        let n = runs[0].0.len();
        let mut tot = vec![0.0; n];
        for r in &runs {
            for (t, x) in tot.iter_mut().zip(&r.0) {
                *t += x;
            }
        }
        let inflate = (K as f64 / (K - 1) as f64).sqrt();
        let mut cov = [0.0; 5];
        for r in &runs {
            let loo: Vec<f64> = tot
                .iter()
                .zip(&r.0)
                .map(|(t, x)| (t - x) / (K - 1) as f64)
                .collect();
            for (i, se) in r.1.iter().enumerate() {
                let w: Vec<f64> = se.iter().map(|s| s * inflate).collect();
                cov[i] += geopriv::map::interval_coverage(&r.0, &w, &loo) / K as f64;
            }
        }
        let ts: Vec<usize> = runs.iter().map(|r| r.2).collect();
        let sh: Vec<String> = runs.iter().map(|r| format!("{:.3}", r.3)).collect();
        println!("εh {eh}: t* {ts:?} share {sh:?}; coverage of T: cond R4 {:.3}, uncond R4 {:.3}, cond R16 {:.3}, uncond R16 {:.3}, the stated (bias-aware, for F) {:.3}", cov[0], cov[1], cov[2], cov[3], cov[4]);
    }
}

#[test]
fn kernel_intervals_cover_a_coast_with_an_empty_half() {
    // Issue 22 item 2 on a coastline (docs/MATH.md §9.7): a 15 km square,
    // devices on the land below y = 7.5 km (half uniform, half two discs
    // inside the land), nobody above: a sea 10h deep. Beyond the shore a
    // cell's error is a matter of rare noisy locations landing near it;
    // the sample variance of a typical draw holds none of them. Before
    // the noise-law plug-in floor (SE² >= u/4n) the far sea cells of the
    // coast population were covered 4-32% of the time at εh = 1. Each λ
    // against its target, two noise draws, averaged over the 31 x 31
    // cells (h = 707 m, as the sweep's 61 x 61 over 30 km).
    let grid = KdeGrid::square(15_000.0, 31).unwrap();
    let mut rng = StdRng::seed_from_u64(31);
    let mut xs: Vec<[f64; 2]> = Vec::new();
    while xs.len() < 20_000 {
        let x = if xs.len() % 2 == 0 {
            [
                rng.random::<f64>() * 15_000.0,
                rng.random::<f64>() * 5_000.0,
            ]
        } else {
            let c = if xs.len() % 4 == 1 {
                [4_000.0, 2_500.0]
            } else {
                [10_000.0, 5_500.0]
            };
            let r: f64 = 700.0 * rng.random::<f64>().sqrt();
            let a: f64 = rng.random::<f64>() * std::f64::consts::TAU;
            [c[0] + r * a.cos(), c[1] + r * a.sin()]
        };
        // Rejected, not clamped: no pile-up on the shore.
        if x[1] < 7_500.0 {
            xs.push(x);
        }
    }
    let truth = grid.exact_map(&xs);
    let lams = [0.0, 0.6, 1.0];
    let mut all = Vec::new();
    // The cells with something to estimate (truth >= 1e-12 of its peak;
    // the sea beyond about 7.4h is not).
    let live = common::live_cells(&truth);
    for eh in [0.3, 1.0, 10.0] {
        let (mut cov, mut land, mut sea) = ([0.0; 3], [0.0; 3], [0.0; 3]);
        // The published interval: all cells, live cells, the picks.
        let (mut pub_all, mut pub_live, mut picks) = (0.0, 0.0, Vec::new());
        // Branch band22: the cells with at least m* = ln 20 effective
        // reports (docs/MATH.md §9.7 "band22"), and the live cells below.
        let m_eff = geopriv::map::effective_reports(&grid, &xs, eh / grid.bandwidth());
        let (kept, thin) = geopriv::map::split_by_effective_reports(&m_eff, &live);
        let (mut pub_kept, mut pub_thin) = (0.0, 0.0);
        for rep in 0..2u64 {
            // The server's default binning (1024 bins per axis at most).
            let eps = eh / grid.bandwidth();
            let set = QuerySet::Kde(grid.clone());
            let dev = MapRelease::new(set.clone(), MapMechanism::APriori, eps).unwrap();
            let mut agg = MapAggregator::new(set, MapMechanism::APriori, eps).unwrap();
            let mut rng = StdRng::seed_from_u64(40 + rep);
            for x in &xs {
                agg.add(&dev.release_unmetered(x, &mut rng).unwrap())
                    .unwrap();
            }
            let maps = common::kernel_maps_against_targets(&grid, &agg, &xs, &truth, &lams);
            for (i, (lam, (est, target))) in lams.into_iter().zip(maps).enumerate() {
                cov[i] += 0.5
                    * geopriv::map::interval_coverage(&est.values, &est.standard_errors, &target);
                // Where the misses are: land (truth above 1e-6 of its
                // maximum) and sea.
                let tmax = truth.iter().fold(0.0f64, |a, b| a.max(*b));
                let part = |land: bool| {
                    let idx: Vec<usize> = (0..truth.len())
                        .filter(|&j| (truth[j] >= 1e-6 * tmax) == land)
                        .collect();
                    let pick = |v: &[f64]| idx.iter().map(|&j| v[j]).collect::<Vec<_>>();
                    geopriv::map::interval_coverage(
                        &pick(&est.values),
                        &pick(&est.standard_errors),
                        &pick(&target),
                    )
                };
                let (l, sea_c) = (part(true), part(false));
                println!("  εh = {eh}, λ = {lam}, draw {rep}: land {l:.3}, sea {sea_c:.3}");
                land[i] += 0.5 * l;
                sea[i] += 0.5 * sea_c;
            }
            // Issue 22 item 2's adopted criterion (docs/MATH.md §9.7,
            // branch cover22): the interval the server publishes for the
            // planner's pick covers its target on the live cells.
            let (all_c, live_c, pick) = common::published_coverage(&agg, &truth, &live);
            pub_all += 0.5 * all_c;
            pub_live += 0.5 * live_c;
            pub_kept += 0.5 * common::published_coverage(&agg, &truth, &kept).1;
            if !thin.is_empty() {
                pub_thin += 0.5 * common::published_coverage(&agg, &truth, &thin).1;
            }
            picks.push(pick);
        }
        println!(
            "coast, εh = {eh}: published, cells with m >= m* ({} of {}) {pub_kept:.3}, live cells below m* ({}) {pub_thin:.3}",
            kept.len(),
            truth.len(),
            thin.len()
        );
        // Measured (two draws): εh 0.3 0.953 (every cell has m >= m*: the
        // noise, 3.3h, reaches the whole sea), εh 1 0.953, εh 10 0.971
        // (492 cells; the live cells below m*, 157, 0.997: conservative).
        // At εh 10 the land itself reads at the band's top, so 0.98 as for
        // the live cells (docs/MATH.md §9.7 "band22").
        let top = if eh < 10.0 { 0.97 } else { 0.98 };
        assert!(
            (0.93..=top).contains(&pub_kept),
            "εh = {eh}: published over m >= m*: {pub_kept}"
        );
        assert!(
            thin.is_empty() || pub_thin >= 0.95,
            "εh = {eh}: live cells below m*: {pub_thin}"
        );
        println!(
            "coast, εh = {eh}: published interval ({picks:?}) covers all cells {pub_all:.3}, live cells ({} of {}) {pub_live:.3}",
            live.len(),
            truth.len()
        );
        // At εh = 10 this square's live cells read 0.975 (two draws, λ = 1
        // picked; the land above 1e-6 of the peak alone 0.965-0.974 per
        // draw, the near-shore cells between 1e-12 and 1e-6 raise it): the
        // gap left open (docs/MATH.md §9.7, "The adopted criterion"); held
        // at 0.98 so that it does not grow.
        let top = if eh < 10.0 { 0.97 } else { 0.98 };
        assert!(
            (0.93..=top).contains(&pub_live),
            "εh = {eh}: published ({picks:?}), live cells {pub_live}"
        );
        if eh == 0.3 {
            // The EM-picked case: EM's values, λ = 1's interval for F.
            assert!(picks.iter().all(|p| p == "a-priori em"), "{picks:?}");
        }
        println!(
            "coast, εh = {eh}: coverage λ=0 {:.3}, λ=0.6 {:.3}, λ=1 {:.3}",
            cov[0], cov[1], cov[2]
        );
        if eh < 10.0 {
            all.extend(cov);
        } else {
            // εh = 10: the sea (half the square, truth below 1e-6 of its
            // peak) is covered because the FFT's period keeps the land's
            // periodic images R_w from the map (FftMapper::with_wrap_guard,
            // docs/MATH.md §9.3); before, its top rows, 4.2h from the
            // image, carried up to 1e-6 of the map's peak and the sea was
            // covered 0.70-0.79. Measured land 0.965-0.974, sea
            // 0.998-1.000, cell average 0.982-0.983: an empty cell's error
            // is the FFT's round-off, covered always, so with half the
            // cells empty the average is above 0.97 (docs/MATH.md §9.7);
            // the land and the sea are held separately.
            for i in 0..3 {
                assert!(
                    (0.93..=0.99).contains(&land[i]),
                    "εh = 10, λ = {}: land {}",
                    lams[i],
                    land[i]
                );
                assert!(sea[i] >= 0.95, "εh = 10, λ = {}: sea {}", lams[i], sea[i]);
            }
        }
    }
    let mean = all.iter().sum::<f64>() / all.len() as f64;
    println!("coast: mean coverage {mean:.3}");
    for c in &all {
        assert!((0.90..=0.985).contains(c), "{c}");
    }
    assert!((0.93..=0.97).contains(&mean), "{mean}");
}

#[test]
fn kernel_maps_put_no_periodic_image_of_the_bins_on_the_far_edge() {
    // docs/MATH.md §9.3 "The period": at εh = 10 the margin is 1.9h, and
    // with an FFT as long as the bins the images of devices on the bottom
    // edge sat 4.2h beyond the top edge (up to 1.3e-6 of the map's peak on
    // the coast square, where the exact map is 1e-37). The server's mapper
    // keeps them R_w (about 8h) away: the top row is then round-off.
    let grid = KdeGrid::square(15_000.0, 31).unwrap();
    let eps = 10.0 / grid.bandwidth();
    let set = QuerySet::Kde(grid.clone());
    let dev = MapRelease::new(set.clone(), MapMechanism::APriori, eps).unwrap();
    let mut agg = MapAggregator::new(set, MapMechanism::APriori, eps).unwrap();
    let mut rng = StdRng::seed_from_u64(5);
    for i in 0..300 {
        let x = [50.0 * i as f64, 200.0 * rng.random::<f64>()];
        agg.add(&dev.release_unmetered(&x, &mut rng).unwrap())
            .unwrap();
    }
    let top: Vec<usize> = (0..grid.len())
        .filter(|&j| grid.center(j)[1] > 14_999.0)
        .collect();
    let worst = |m: &geopriv::map::FftMapper, lam: f64| {
        let est = m.estimate(&agg.kernel(lam).unwrap()).unwrap();
        let peak = est.values.iter().fold(0.0f64, |a, b| a.max(*b));
        top.iter()
            .map(|&j| est.values[j].abs() / peak)
            .fold(0.0f64, f64::max)
    };
    let guarded = agg.mapper().unwrap().unwrap();
    let plain = geopriv::map::FftMapper::new(agg.counts().unwrap().clone()).unwrap();
    assert!(guarded.fft_len()[1] > plain.fft_len()[1]);
    for lam in [0.0, 1.0] {
        let (g, p) = (worst(&guarded, lam), worst(&plain, lam));
        println!("λ = {lam}: top row / peak: guarded {g:.1e}, as long as the bins {p:.1e}");
        assert!(g < 1e-13, "λ = {lam}: {g}");
        assert!(
            p > 1e-9,
            "λ = {lam}: the unguarded FFT no longer wraps ({p})"
        );
    }
}

#[test]
fn em_on_coincident_reports_stops_at_its_work_cap() {
    // Attack6 O1 (docs/MATH.md §9.6, branch emcost): 1,000 reports of one
    // point at εh = 10 on the CLI's default map made EM's held-out search
    // run 218 steps to t* = 164, then the pilot to 492 and 4 replicates of
    // 164 steps (10.5 s of CPU on the idle machine). The work budget caps
    // the search at T_c = ⌊(100/6)·B0·B1/(N0·N1)⌋ = 18 steps here, so the
    // fit is at most 18 steps and the pilot 54, through the function the
    // CLI and the collector use (`MapAggregator::planned_estimate`).
    let grid = KdeGrid::with_cell_diagonal([0.0, 20_000.0, 0.0, 20_000.0], [61, 61]).unwrap();
    let eps = 10.0 / grid.bandwidth();
    let set = QuerySet::Kde(grid.clone());
    let dev = MapRelease::new(set.clone(), MapMechanism::APriori, eps).unwrap();
    let mut agg = MapAggregator::new(set, MapMechanism::APriori, eps).unwrap();
    let mut rng = StdRng::seed_from_u64(5);
    let xs = vec![[5_000.0, 5_000.0]; 1_000];
    for x in &xs {
        agg.add(&dev.release_unmetered(x, &mut rng).unwrap())
            .unwrap();
    }
    let engine =
        EmDeconvolution::new(&grid, eps, agg.counts().unwrap(), EmOptions::default()).unwrap();
    let cap = engine.work_cap().unwrap();
    assert!(cap <= 20, "cap {cap}");
    let (est, plan) = agg.planned_estimate().unwrap();
    let plan = plan.unwrap();
    let em = plan.em.as_ref().unwrap();
    // Held-out search, fit and pilot under the cap (main: 218, 164, 492).
    assert!(em.held_out_steps <= cap + 1, "{} steps", em.held_out_steps);
    assert!(em.iterations <= cap, "t* {}", em.iterations);
    assert_eq!(em.work_cap, Some(cap));
    assert!(plan.line.contains("work cap"), "{}", plan.line);
    // A sensible map: EM's peak is the point's map point (15, 15), and
    // both EM's map and the printed one are within a few percent of the
    // devices' exact map (relative root ASE against its peak).
    let truth = grid.exact_map(&xs);
    let peak = truth.iter().fold(0.0f64, |m, v| m.max(*v));
    let top = (0..em.values.len())
        .max_by(|&a, &b| em.values[a].total_cmp(&em.values[b]))
        .unwrap();
    assert_eq!(top, 15 * 61 + 15);
    for (name, v) in [("em", &em.values), ("printed", &est.values)] {
        let rel = ase(v, &truth).sqrt() / peak;
        eprintln!(
            "{name}: t* {} steps {} cap {cap}: rel. root ASE {rel:.3e} (predicted EM ASE {:.3e}, measured {:.3e})",
            em.iterations,
            em.held_out_steps,
            em.predicted_ase,
            ase(v, &truth)
        );
        assert!(rel < 0.05, "{name}: {rel}");
    }
}

/// Uniform devices on a `side` m square.
fn uniform(n: usize, side: f64, seed: u64) -> Vec<[f64; 2]> {
    let mut r = StdRng::seed_from_u64(seed);
    (0..n)
        .map(|_| [side * r.random::<f64>(), side * r.random::<f64>()])
        .collect()
}

/// The planner's map of `agg`, λ = 1's and the map of the plan's first
/// noise-a-priori prediction (a λ or EM), each measured against `truth`:
/// (pick's name, first a-priori's name, served, λ = 1, first a-priori).
fn o5_case(agg: &MapAggregator, truth: &[f64]) -> (String, String, f64, f64, f64) {
    let (est, p) = agg.planned_estimate().unwrap();
    let p = p.unwrap();
    let m = agg.mapper().unwrap().unwrap();
    let l1 = m.estimate(&agg.kernel(1.0).unwrap()).unwrap();
    let first = p
        .predictions
        .iter()
        .find(|q| q.lambda.is_some() || q.em_iterations.is_some())
        .unwrap();
    let first_map = match (first.lambda, &p.em) {
        (Some(l), _) => m.estimate(&agg.kernel(l).unwrap()).unwrap().values,
        (None, Some(em)) => em.values.clone(),
        (None, None) => unreachable!("an EM prediction without its map"),
    };
    println!("{}", p.line);
    (
        p.pick().name.clone(),
        first.name.clone(),
        ase(&est.values, truth),
        ase(&l1.values, truth),
        ase(&first_map, truth),
    )
}

#[test]
fn another_mechanisms_pick_serves_the_lambda_1_map_not_the_first_a_priori_prediction() {
    // attack13 O5: where the planner picks another device mechanism, the
    // server holds noise-a-priori reports it cannot map by that pick. It
    // serves λ = 1's map; the plan's first a-priori prediction (EM in both
    // cases here) measured worse: (a) two discs, grid 5 on 10 km, n 5,000,
    // εh 1000: pick vector-laplace, EM predicted 1.69e-7 but measured
    // 7.81e-7, λ = 1 1.24e-7 (6.3x); (b) attack13's case, 50 uniform
    // devices on 20 km, grid 3, ε 1000 (εh 1.4e7): pick composition, EM's
    // map was all zeros (ASE 4.16e-1) against λ = 1's 1.13e-5 (fixed on
    // branch emzero: the first a-priori prediction is now λ = 0, whose
    // map measures the same 1.13e-5). If the
    // first a-priori map ever measures better here, revisit O5
    // (docs/ATTACK-13.md).
    let grid_a = KdeGrid::square(10_000.0, 5).unwrap();
    let grid_b = KdeGrid::square(20_000.0, 3).unwrap();
    let eh_b = 1000.0 * grid_b.bandwidth();
    for (case, grid, xs, eh, expected) in [
        ("(a)", grid_a, devices(5_000, 31), 1000.0, "vector-laplace"),
        ("(b)", grid_b, uniform(50, 20_000.0, 0), eh_b, "composition"),
    ] {
        let truth = grid.exact_map(&xs);
        let agg = aggregated(&grid, eh, &xs, 32);
        let (pick, first, served, l1, first_ase) = o5_case(&agg, &truth);
        println!("{case} pick {pick}, first a-priori {first}: served {served:.3e}, λ = 1 {l1:.3e}, first a-priori {first_ase:.3e}");
        assert_eq!(pick, expected);
        assert_eq!(served, l1);
        assert!(
            first_ase >= served,
            "{case} {first} now measures better: revisit O5"
        );
    }
}

/// The sweeps' populations on 10 km: "discs" ([`devices`], seed 31 +
/// `seed`) or uniform.
fn discs_or_uniform(pop: &str, n: usize, seed: u64) -> Vec<[f64; 2]> {
    if pop == "discs" {
        devices(n, 31 + seed)
    } else {
        uniform(n, 10_000.0, seed)
    }
}

/// attack13 O5's sweep (BENCHMARKS.md "Branch maptidy"): every cell where
/// the pick is another mechanism, the served (λ = 1) map against the
/// plan's first a-priori prediction's, both measured against the truth.
#[test]
#[ignore]
fn o5_sweep_another_mechanisms_pick() {
    let mut cells = 0;
    let mut changed = Vec::new();
    for pop in ["discs", "uniform"] {
        for g in [3usize, 5, 7, 11] {
            let grid = KdeGrid::square(10_000.0, g).unwrap();
            for n in [50usize, 500, 5_000] {
                for seed in 0..4u64 {
                    let xs = discs_or_uniform(pop, n, seed);
                    let truth = grid.exact_map(&xs);
                    for eh in [30.0, 100.0, 300.0, 1000.0, 3000.0] {
                        let agg = aggregated(&grid, eh, &xs, 32 + seed);
                        let p = agg.planned_estimate().unwrap().1.unwrap();
                        if p.pick().lambda.is_some() || p.pick().em_iterations.is_some() {
                            continue;
                        }
                        cells += 1;
                        let (pick, first, served, _, first_ase) = o5_case(&agg, &truth);
                        if first_ase != served {
                            println!(
                                "{pop} grid {g} n {n} seed {seed} εh {eh}: pick {pick}, first a-priori {first} {first_ase:.3e}, served λ = 1 {served:.3e}, ratio {:.2}",
                                first_ase / served
                            );
                            changed.push(first_ase / served);
                        }
                    }
                }
            }
        }
    }
    println!(
        "{cells} cells with another mechanism's pick, {} where the first a-priori map differs from λ = 1's, better in {}",
        changed.len(),
        changed.iter().filter(|r| **r < 1.0).count()
    );
}

/// attack13 O2's population: half in a Gaussian blob (σ 1000 m) at
/// (8000, 12000), half uniform, on a 20 km square (blob draws outside it
/// redrawn).
fn blob_and_uniform(n: usize, seed: u64) -> Vec<[f64; 2]> {
    let mut r = StdRng::seed_from_u64(seed);
    (0..n)
        .map(|i| {
            if i < n / 2 {
                loop {
                    let (u, v): (f64, f64) = (r.random(), r.random());
                    let rad = 1000.0 * (-2.0 * (1.0 - u).ln()).sqrt();
                    let a = std::f64::consts::TAU * v;
                    let p = [8_000.0 + rad * a.cos(), 12_000.0 + rad * a.sin()];
                    if p.iter().all(|c| (0.0..=20_000.0).contains(c)) {
                        break p;
                    }
                }
            } else {
                [20_000.0 * r.random::<f64>(), 20_000.0 * r.random::<f64>()]
            }
        })
        .collect()
}

#[test]
fn predictions_are_sorted_by_the_order_key_they_carry() {
    // attack13 O2: EM is ordered by its point estimate within its ASE
    // interval, while its `ase` is that point clamped further (ranked) or
    // the interval's top (not ranked): the list read by `ase` alone is out
    // of order. Every prediction now carries the number it is sorted by;
    // it is `ase` for every other prediction.
    let grid = KdeGrid::square(20_000.0, 21).unwrap();
    let mut out_of_ase_order = 0;
    for seed in 1..=4u64 {
        let xs = blob_and_uniform(500, seed);
        let agg = aggregated(&grid, 0.001 * grid.bandwidth(), &xs, 7 + seed);
        let p = agg.planned_estimate().unwrap().1.unwrap();
        let q = &p.predictions;
        for w in q.windows(2) {
            assert!(w[0].order_key <= w[1].order_key, "seed {seed}: {}", p.line);
            if w[0].ase > w[1].ase {
                // Only EM may be out of its printed ASE's order.
                assert!(
                    w[0].em_iterations.is_some() || w[1].em_iterations.is_some(),
                    "seed {seed}: {} before {}",
                    w[0].name,
                    w[1].name
                );
                out_of_ase_order += 1;
            }
        }
        for x in q {
            if x.em_iterations.is_none() {
                assert_eq!(x.order_key.to_bits(), x.ase.to_bits(), "{}", x.name);
            }
        }
        let em = q.iter().find(|x| x.em_iterations.is_some()).unwrap();
        println!(
            "seed {seed}: EM ase {}{:.3e} ordered at {:.3e}; {}",
            if em.upper_bound { "<= " } else { "" },
            em.ase,
            em.order_key,
            p.line
        );
        for x in q.iter().filter(|x| x.name.starts_with("a-priori")) {
            println!("  {} {:.3e} (order key {:.3e})", x.name, x.ase, x.order_key);
        }
    }
    // The reproduction: EM out of the order of its printed ASE somewhere.
    assert!(out_of_ase_order > 0);
}

/// Branch emzero: EM's map of near-noiseless reports is the plain map's
/// (the devices' own map), at εh 10^6, 10^8 and the largest ε the CLI
/// accepts (any finite positive: f64::MAX). Before the fix the channel's
/// densities ε²/(2π)·e^{-ε r} all underflowed to 0 from εh ≈ 10^6 (grid
/// 3 on 20 km), the normalised channel was 0/0 and the map all zeros.
#[test]
fn em_map_of_near_noiseless_reports_is_the_plain_map_up_to_the_largest_epsilon() {
    for (g, side, n) in [
        (3usize, 20_000.0, 50usize),
        (5, 10_000.0, 500),
        (21, 10_000.0, 2_000),
    ] {
        let grid = KdeGrid::square(side, g).unwrap();
        let xs = uniform(n, side, 0);
        let truth = grid.exact_map(&xs);
        let scale = truth.iter().map(|v| v * v).sum::<f64>() / truth.len() as f64;
        let h = grid.bandwidth();
        let mut plain = f64::NAN;
        for eps in [1e6 / h, 1e8 / h, 1e300, f64::MAX] {
            let set = QuerySet::Kde(grid.clone());
            let em = if eps < 1e300 {
                let dev = MapRelease::new(set.clone(), MapMechanism::APriori, eps).unwrap();
                let mut agg =
                    MapAggregator::with_max_bins(set, MapMechanism::APriori, eps, 512).unwrap();
                let mut rng = StdRng::seed_from_u64(32);
                for x in &xs {
                    agg.add(&dev.release_unmetered(x, &mut rng).unwrap())
                        .unwrap();
                }
                let m = agg.mapper().unwrap().unwrap();
                plain = ase(
                    &m.estimate(&agg.kernel(0.0).unwrap()).unwrap().values,
                    &truth,
                );
                EmDeconvolution::new(&grid, eps, agg.counts().unwrap(), EmOptions::default())
            } else {
                // The CLI accepts any finite ε > 0; a device's noise is then
                // below the float spacing of its location (and its release
                // snaps to a grid that underflows): bin the locations.
                let mut c = BinnedCounts::new(BinSpec::for_estimation(&grid, eps, 512).unwrap());
                for x in &xs {
                    c.add(x).unwrap();
                }
                EmDeconvolution::new(&grid, eps, &c, EmOptions::default())
            }
            .unwrap()
            .estimate()
            .unwrap();
            let e = ase(&em.values, &truth);
            println!(
                "grid {g} n {n} ε {eps:.3e}: EM {e:.3e} (predicted {:.3e}), plain {plain:.3e}, truth² {scale:.3e}",
                em.predicted_ase
            );
            assert!(em.values.iter().all(|v| v.is_finite() && *v >= 0.0));
            assert!(
                e <= 2.0 * plain + 1e-6 * scale,
                "grid {g} ε {eps:e}: EM {e:e} vs plain {plain:e}"
            );
            assert!(em.predicted_ase.is_finite() && em.predicted_ase >= 0.0);
        }
    }
}

/// Branch emzero, issue 19 item 15: EM's ranked predictions above εh 3
/// against its measured ASE, with the o5 sweep's populations on grids
/// 3–61 (to see whether the misses are a small-grid effect). Prints each
/// miss beyond 3x and the counts per grid (BENCHMARKS.md "Branch emzero").
#[test]
#[ignore]
fn em_sweep_ranked_predictions_above_eps_h_3() {
    let grids: Vec<usize> = std::env::var("EMZERO_GRIDS")
        .ok()
        .map(|s| s.split(',').map(|g| g.parse().unwrap()).collect())
        .unwrap_or(vec![3, 5, 7, 11, 21, 31, 61]);
    let seeds: u64 = std::env::var("EMZERO_SEEDS")
        .ok()
        .map_or(2, |s| s.parse().unwrap());
    for g in grids {
        let (mut ranked, mut low, mut high, mut unranked) = (0, 0, 0, 0);
        // The same counts at n >= 10³ (issue 19 item 15's range).
        let (mut low_big, mut high_big, mut ranked_big) = (0, 0, 0);
        let grid = KdeGrid::square(10_000.0, g).unwrap();
        for pop in ["discs", "uniform"] {
            for n in [50usize, 500, 5_000] {
                for seed in 0..seeds {
                    let xs = discs_or_uniform(pop, n, seed);
                    let truth = grid.exact_map(&xs);
                    for eh in [10.0, 30.0, 100.0, 300.0, 1000.0] {
                        let agg = aggregated(&grid, eh, &xs, 32 + seed);
                        let p = agg.planned_estimate().unwrap().1.unwrap();
                        let (Some(q), Some(em)) = (
                            p.predictions.iter().find(|q| q.em_iterations.is_some()),
                            &p.em,
                        ) else {
                            continue;
                        };
                        if q.upper_bound {
                            unranked += 1;
                            continue;
                        }
                        ranked += 1;
                        ranked_big += usize::from(n >= 1_000);
                        let measured = ase(&em.values, &truth);
                        let r = measured / q.ase;
                        if r > 3.0 {
                            low += 1;
                            low_big += usize::from(n >= 1_000);
                        } else if r < 1.0 / 3.0 {
                            high += 1;
                            high_big += usize::from(n >= 1_000);
                        }
                        if !(1.0 / 3.0..=3.0).contains(&r) {
                            let m = agg.mapper().unwrap().unwrap();
                            let plain = m.estimate(&agg.kernel(0.0).unwrap()).unwrap().values;
                            let p0 = p.predictions.iter().find(|q| q.lambda == Some(0.0));
                            println!(
                                "{pop} grid {g} n {n} seed {seed} εh {eh}: EM predicted {:.3e}, measured {measured:.3e} (x{r:.2}, t* {}); plain measured {:.3e} predicted {:.3e}, EM-plain {:.3e}",
                                q.ase, em.iterations, ase(&plain, &truth), p0.map_or(f64::NAN, |q| q.ase), ase(&plain, &em.values)
                            );
                        }
                    }
                }
            }
        }
        println!(
            "grid {g}: {ranked} ranked EM predictions, {low} more than 3x below the measured ASE, {high} more than 3x above; {unranked} unranked; at n >= 10³: {ranked_big} ranked, {low_big} below, {high_big} above"
        );
    }
}

/// The planner's EM prediction for `agg`'s reports and EM's measured ASE
/// against `truth`.
fn em_prediction_and_ase(agg: &MapAggregator, truth: &[f64]) -> (Prediction, f64) {
    let p = agg.planned_estimate().unwrap().1.unwrap();
    let q = p
        .predictions
        .iter()
        .find(|q| q.em_iterations.is_some())
        .unwrap()
        .clone();
    (q, ase(&p.em.as_ref().unwrap().values, truth))
}

/// Prints EM's prediction `q` beside its `measured` ASE and asserts it is
/// ranked, not more than 3x above the measurement and not more than
/// `under` times below it (measured < under·predicted).
fn assert_em_ranked_within(label: &str, q: &Prediction, measured: f64, under: f64) {
    println!(
        "{label}: EM predicted {:.3e}, measured {measured:.3e} (x{:.2})",
        q.ase,
        measured / q.ase
    );
    assert!(!q.upper_bound, "{label}: EM not ranked");
    assert!(
        measured < under * q.ase && q.ase < 3.0 * measured,
        "{label}: predicted {:e}, measured {measured:e}",
        q.ase
    );
}

/// Branch emzero, issue 19 item 15: on a 3-point grid at εh 300 and 1000
/// EM's held-out stop runs long (t* 161, 326) and its map moves 1.15e-6
/// to 1.33e-6 (mean square) away from a plain map predicted near the
/// truth; the bootstrap, whose replicates move the same way, predicted
/// 4.55e-8 and 8.29e-8 against 1.89e-6 and 2.29e-6 measured (41x, 28x
/// low). The floor (√D − √ASE₀⁺)² from EM's distance to the plain map
/// (docs/MATH.md §9.4) brings them to 3.8x and 3.7x: not yet the 3x of
/// item 15, hence the 5x here.
#[test]
fn em_prediction_on_a_3_point_grid_at_high_eps_h_sees_its_distance_to_the_plain_map() {
    let grid = KdeGrid::square(10_000.0, 3).unwrap();
    let xs = devices(5_000, 31);
    let truth = grid.exact_map(&xs);
    for eh in [300.0, 1000.0] {
        let agg = aggregated(&grid, eh, &xs, 32);
        let (q, measured) = em_prediction_and_ase(&agg, &truth);
        assert_em_ranked_within(&format!("εh {eh}"), &q, measured, 5.0);
    }
}

/// Branch small19, issue 19 item 15: above εh 3 EM's one-step model
/// over-predicted its ASE far beyond 3x on an 11 × 11 grid (two discs,
/// n 5,000: 0.03x–0.21x at εh 30 and 100, t* 2–6), and where EM's map
/// moves farther from the plain map than the plain map's own error (a
/// 21 × 21 grid at εh 100, 300: EM 3.4e-8 from the plain map, the plain
/// map 1.8e-9 from the truth) premise A's top would put it 4–9x low. EM's
/// interval (docs/MATH.md §9.4, "EM's interval above εh 3") holds both:
/// ranked within 3x, or, where not pinned, not ranked with the measured
/// ASE under its upper end.
#[test]
fn em_interval_above_eps_h_3_holds_em_within_3x() {
    for (g, ehs) in [(11, [30.0, 100.0]), (21, [100.0, 300.0])] {
        let grid = KdeGrid::square(10_000.0, g).unwrap();
        for seed in 0..2 {
            let xs = devices(5_000, 31 + seed);
            let truth = grid.exact_map(&xs);
            for eh in ehs {
                let agg = aggregated(&grid, eh, &xs, 32 + seed);
                let (q, measured) = em_prediction_and_ase(&agg, &truth);
                println!(
                    "grid {g} seed {seed} εh {eh}: EM predicted {:.3e} (upper bound {}), measured {measured:.3e}",
                    q.ase, q.upper_bound
                );
                if q.upper_bound {
                    assert!(measured <= q.ase, "grid {g} seed {seed} εh {eh}");
                } else {
                    assert!(
                        measured <= 3.0 * q.ase && q.ase <= 3.0 * measured,
                        "grid {g} seed {seed} εh {eh}: predicted {:e}, measured {measured:e}",
                        q.ase
                    );
                }
            }
        }
    }
}

/// docs/ATTACK-14.md O1: where no report lies inside the map's bins (ε
/// 1e-7 per metre on a 20 km square, grid 3: the noise is 10⁴ km), the
/// first prediction is the λ = 0 map with NaN numbers, NaN `order_key`
/// included (the pick, "no prediction"); the others follow in the order of
/// their `order_key`, all finite. The documented exception to "sorted by
/// `order_key`" (`Plan::predictions`, the bindings' `MapPlan.predictions`);
/// the map served there is finite and, not being EM's, has no interval
/// centres.
#[test]
fn with_no_report_in_the_bins_only_the_first_prediction_is_nan() {
    let grid = KdeGrid::square(20_000.0, 3).unwrap();
    let xs = [[10_000.0, 10_000.0], [3_000.0, 17_000.0]];
    let agg = aggregated(&grid, 1e-7 * grid.bandwidth(), &xs, 7);
    let (est, p) = agg.planned_estimate().unwrap();
    let p = p.unwrap();
    let q = &p.predictions;
    assert!(q[0].order_key.is_nan() && q[0].ase.is_nan(), "{}", p.line);
    assert_eq!(q[0].lambda, Some(0.0), "{}", p.line);
    // The same prediction (NaN fields: not `==`).
    assert!(std::ptr::eq(p.pick(), &q[0]));
    assert!(p.line.contains("no prediction"), "{}", p.line);
    for w in q[1..].windows(2) {
        assert!(w[0].order_key <= w[1].order_key, "{}", p.line);
    }
    assert!(q[1..].iter().all(|x| x.order_key.is_finite()), "{}", p.line);
    assert!(est
        .values
        .iter()
        .chain(&est.standard_errors)
        .all(|v| v.is_finite()));
    // A λ < 1 pick publishes the λ = 1 map's interval (branch pubint).
    let centres = est
        .interval_centres
        .expect("λ = 0 picked: λ = 1's interval");
    assert!(centres.iter().all(|v| v.is_finite()));
}

/// Branch plan20, attack14 O2: a ranked EM ordered at its point estimate
/// went ahead of λ = 1 while its interval reached well above λ = 1's
/// prediction, and measured worse (the river town at εh 10: 1.65x). Now
/// EM goes ahead of λ = 1 (when λ = 1 comes right after it) only where
/// its interval's log-centre is below λ = 1's prediction
/// (docs/MATH.md §9.4, "A ranked EM against λ = 1"). Here (uniform on
/// 10 km, 5,000 devices, grid 11, εh 3) main picked EM, which measured
/// 1.32x λ = 1's ASE (3.04e-6 against 2.31e-6).
#[test]
fn a_ranked_em_yields_to_lambda_1_where_its_interval_does_not_put_it_ahead() {
    let grid = KdeGrid::square(10_000.0, 11).unwrap();
    let xs = discs_or_uniform("uniform", 5_000, 2);
    let truth = grid.exact_map(&xs);
    let agg = aggregated(&grid, 3.0, &xs, 34);
    let p = agg.planned_estimate().unwrap().1.unwrap();
    let em = p
        .predictions
        .iter()
        .find(|q| q.em_iterations.is_some())
        .unwrap();
    let l1 = p
        .predictions
        .iter()
        .find(|q| q.lambda == Some(1.0))
        .unwrap();
    assert!(!em.upper_bound, "EM ranked: {}", p.line);
    assert_eq!(em.order_key.to_bits(), l1.ase.to_bits(), "{}", p.line);
    assert_eq!(p.predictions[0].lambda, Some(1.0), "{}", p.line);
    let m = agg.mapper().unwrap().unwrap();
    let k1 = ase(
        &m.estimate(&agg.kernel(1.0).unwrap()).unwrap().values,
        &truth,
    );
    let e = ase(&p.em.as_ref().unwrap().values, &truth);
    println!("EM {e:.3e}, λ = 1 {k1:.3e}; {}", p.line);
    assert!(k1 < e, "λ = 1 {k1:e} vs EM {e:e}");
}

/// Branch plan20 (issue 19 item 15, emzero's sweep at n = 5,000): above
/// εh 3 EM's lower end no longer reads the floor against the unbiased
/// map, whose premise (λ = 1 unbiased up to a binning the noise dithers
/// away) fails at εh 10 on a 31-point grid over 10 km (the noise, 47 m,
/// no longer spans the bins): there it put L at var + 2.45e-8 = 6.9e-8
/// above EM's measured 5.53e-8, and EM was predicted at 3 lo = 2.07e-7
/// (0.27x). docs/MATH.md §9.4.
#[test]
fn em_above_eps_h_3_does_not_read_the_unbiased_maps_floor() {
    let grid = KdeGrid::square(10_000.0, 31).unwrap();
    let xs = discs_or_uniform("discs", 5_000, 0);
    let truth = grid.exact_map(&xs);
    let agg = aggregated(&grid, 10.0, &xs, 32);
    let (q, measured) = em_prediction_and_ase(&agg, &truth);
    let r = measured / q.ase;
    println!(
        "EM predicted {}{:.3e}, measured {measured:.3e} ({r:.2})",
        if q.upper_bound { "<= " } else { "" },
        q.ase
    );
    if q.upper_bound {
        assert!(r <= 3.0, "{r}");
    } else {
        assert!((1.0 / 3.0..=3.0).contains(&r), "{r}");
    }
}

/// Devices on `sites` atoms (coincident locations) uniform in a square of
/// `side` metres, `n` devices spread evenly over them.
fn atoms(n: usize, sites: usize, side: f64, seed: u64) -> Vec<[f64; 2]> {
    let mut rng = StdRng::seed_from_u64(seed);
    let at: Vec<[f64; 2]> = (0..sites)
        .map(|_| [rng.random::<f64>() * side, rng.random::<f64>() * side])
        .collect();
    (0..n).map(|i| at[i % sites]).collect()
}

/// Coverage of the λ = 1 map's 95% interval of the true map, over the
/// cells whose true map is above 1e-6 of its peak, with the z-scores' sd.
fn atoms_coverage(grid: &KdeGrid, xs: &[[f64; 2]], eh: f64, seed: u64) -> (f64, f64) {
    let truth = grid.exact_map(xs);
    // The server's default binning (1024 bins per axis at most).
    let agg = aggregated_with_bins(grid, eh, xs, seed, None);
    let m = agg.mapper().unwrap().unwrap();
    let est = m.estimate(&agg.kernel(1.0).unwrap()).unwrap();
    let top = truth.iter().cloned().fold(0.0, f64::max);
    let z: Vec<f64> = est
        .values
        .iter()
        .zip(&truth)
        .zip(&est.standard_errors)
        .filter(|((_, t), _)| **t > 1e-6 * top)
        .map(|((v, t), s)| (v - t) / s)
        .collect();
    let sd = (z.iter().map(|v| v * v).sum::<f64>() / z.len() as f64).sqrt();
    let cover = z.iter().filter(|v| v.abs() <= 1.96).count() as f64 / z.len() as f64;
    (cover, sd)
}

/// attack16 F1 (docs/ATTACK-16.md; docs/MATH.md §9.7 "Coincident
/// devices", branch round16): devices on 200 atoms, n = 10⁴, εh = 100. The
/// noise (1/ε = h/100) no longer dithers the rounding into bins of about
/// h/50: each atom's reports round as a whole, an error that does not
/// average over its 50 devices. Before the atoms' rounding term joined
/// the kernel map's SE, the 95% interval covered 0.58 of the cells (z sd
/// 2.6, first draw); with it 0.941 and 0.966 (z sd 0.96, 0.93), and with
/// the lines' term too (atoms sharing a bin column) 0.961 and 0.973.
#[test]
fn kernel_intervals_charge_the_rounding_of_coincident_devices() {
    let grid = KdeGrid::square(10_000.0, 21).unwrap();
    let xs = atoms(10_000, 200, 10_000.0, 61);
    for seed in [62, 63] {
        let (cover, sd) = atoms_coverage(&grid, &xs, 100.0, seed);
        println!("seed {seed}: coverage {cover:.3}, z sd {sd:.2}");
        assert!(cover >= 0.9, "coverage {cover} (z sd {sd})");
        assert!(sd < 2.0, "z sd {sd} (coverage {cover})");
    }
}

/// attack16 F2 (docs/ATTACK-16.md; docs/MATH.md §9.7 "Lines along a bin
/// axis", branch round16): half of 10⁴ devices on a 1 m street along y
/// (the other half uniform), εh = 100. The street's devices share one
/// offset along x in every bin row, so their rounding errors add up over
/// the rows within the kernel's reach; the two-resolution rule reads the
/// street as a ridge (Â = 0) and the SE charged nothing for it. Coverage
/// of the street's 42 cells (within h of it) without the lines' term:
/// 0.333 (first draw); with it 1.000 on both draws.
#[test]
fn kernel_intervals_charge_the_rounding_of_a_street_along_a_bin_axis() {
    let grid = KdeGrid::square(10_000.0, 21).unwrap();
    let h = grid.bandwidth();
    let mut rng = StdRng::seed_from_u64(71);
    let street = 4_013.0;
    let xs: Vec<[f64; 2]> = (0..10_000)
        .map(|i| {
            if i % 2 == 0 {
                [
                    street + rng.random::<f64>(),
                    1_000.0 + 8_000.0 * rng.random::<f64>(),
                ]
            } else {
                [
                    10_000.0 * rng.random::<f64>(),
                    10_000.0 * rng.random::<f64>(),
                ]
            }
        })
        .collect();
    let truth = grid.exact_map(&xs);
    for seed in [72, 73] {
        let eps = 100.0 / h;
        let set = QuerySet::Kde(grid.clone());
        let dev = MapRelease::new(set.clone(), MapMechanism::APriori, eps).unwrap();
        let mut agg = MapAggregator::new(set, MapMechanism::APriori, eps).unwrap();
        let mut r = StdRng::seed_from_u64(seed);
        for x in &xs {
            agg.add(&dev.release_unmetered(x, &mut r).unwrap()).unwrap();
        }
        let m = agg.mapper().unwrap().unwrap();
        let est = m.estimate(&agg.kernel(1.0).unwrap()).unwrap();
        let (mut hit, mut all) = (0usize, 0usize);
        for (j, t) in truth.iter().enumerate() {
            let p = grid.center(j);
            if (p[0] - street).abs() > h || !(1_500.0..8_500.0).contains(&p[1]) {
                continue;
            }
            all += 1;
            if (est.values[j] - t).abs() <= 1.96 * est.standard_errors[j] {
                hit += 1;
            }
        }
        let cover = hit as f64 / all as f64;
        println!("seed {seed}: street cells {all}, coverage {cover:.3}");
        assert!(all >= 10 && cover >= 0.85, "coverage {cover} of {all}");
    }
}

#[test]
fn kernel_standard_errors_do_not_shrink_with_a_cells_chance_low_counts() {
    // Issue 22 item 2 (b) (docs/MATH.md §9.7 "A smoothed sample
    // variance", branch cover23): at low εh the raw sample variance v̂_j
    // rises and falls with the counts near t_j, as the map's own error
    // does, so a cell whose counts fell low got a low value and a small
    // SE and was missed below (city, n = 10^4, εh = 0.3: corr(SE, error)
    // 0.25, misses 5.6% below and 1.0% above, coverage 0.934). Smoothing
    // v̂ by a Gaussian of sd 0.4/ε decouples them. A city-like town (six
    // Gaussian neighbourhoods, 20% background) on 31 x 31 over 15 km
    // (h = 707 m), n = 10^4, εh = 0.3, λ = 1 against the true map, two
    // noise draws.
    let grid = KdeGrid::square(15_000.0, 31).unwrap();
    let mut rng = StdRng::seed_from_u64(23);
    let centres = [
        [4_000.0, 4_000.0, 900.0],
        [10_500.0, 5_000.0, 1_300.0],
        [7_500.0, 9_500.0, 700.0],
        [3_500.0, 11_000.0, 1_100.0],
        [11_500.0, 11_500.0, 600.0],
        [7_000.0, 3_000.0, 1_600.0],
    ];
    let n = 10_000;
    let mut xs: Vec<[f64; 2]> = Vec::with_capacity(n);
    while xs.len() < n {
        let x = if xs.len() % 5 == 0 {
            [
                1_000.0 + 13_000.0 * rng.random::<f64>(),
                1_000.0 + 13_000.0 * rng.random::<f64>(),
            ]
        } else {
            let c = centres[xs.len() % centres.len()];
            // Box–Muller.
            let r = (-2.0 * (1.0 - rng.random::<f64>()).ln()).sqrt() * c[2];
            let a = rng.random::<f64>() * std::f64::consts::TAU;
            [c[0] + r * a.cos(), c[1] + r * a.sin()]
        };
        if (0.0..15_000.0).contains(&x[0]) && (0.0..15_000.0).contains(&x[1]) {
            xs.push(x);
        }
    }
    let truth = grid.exact_map(&xs);
    let live = common::live_cells(&truth);
    let eps = 0.3 / grid.bandwidth();
    let (mut corr, mut cov, mut below) = (0.0, 0.0, 0.0);
    for rep in 0..2u64 {
        let set = QuerySet::Kde(grid.clone());
        let dev = MapRelease::new(set.clone(), MapMechanism::APriori, eps).unwrap();
        let mut agg = MapAggregator::new(set, MapMechanism::APriori, eps).unwrap();
        let mut rng = StdRng::seed_from_u64(230 + rep);
        for x in &xs {
            agg.add(&dev.release_unmetered(x, &mut rng).unwrap())
                .unwrap();
        }
        let (est, target) = common::kernel_maps_against_targets(&grid, &agg, &xs, &truth, &[1.0])
            .pop()
            .unwrap();
        let e: Vec<f64> = live.iter().map(|&j| est.values[j] - target[j]).collect();
        let s: Vec<f64> = live.iter().map(|&j| est.standard_errors[j]).collect();
        let k = e.len() as f64;
        let (me, ms) = (e.iter().sum::<f64>() / k, s.iter().sum::<f64>() / k);
        let cxy: f64 = e.iter().zip(&s).map(|(a, b)| (a - me) * (b - ms)).sum();
        let cxx: f64 = e.iter().map(|a| (a - me) * (a - me)).sum();
        let cyy: f64 = s.iter().map(|b| (b - ms) * (b - ms)).sum();
        let r = cxy / (cxx * cyy).sqrt();
        let c = e
            .iter()
            .zip(&s)
            .filter(|(a, b)| a.abs() <= 1.96 * **b)
            .count() as f64
            / k;
        let lo = e.iter().zip(&s).filter(|(a, b)| **a < -1.96 * **b).count() as f64 / k;
        println!("  draw {rep}: corr(SE, error) {r:.3}, coverage {c:.3}, below {lo:.3}");
        corr += 0.5 * r;
        cov += 0.5 * c;
        below += 0.5 * lo;
    }
    println!("  mean: corr(SE, error) {corr:.3}, coverage {cov:.3}, below {below:.3}");
    assert!(corr.abs() < 0.12, "SE tracks the error: corr {corr:.3}");
    assert!((0.93..=0.97).contains(&cov), "coverage {cov:.3}");
    assert!(below < 0.04, "misses below {below:.3}");
}

/// Branch small23's probe (ignored): one cell of emzero's sweep,
/// `SMALL23_CELL=pop:grid:n:seed:εh`, every prediction against its
/// measured ASE (the kernel maps', EM's).
#[test]
#[ignore]
fn small23_probe_one_cell() {
    let c = std::env::var("SMALL23_CELL").unwrap_or("discs:3:5000:0:100".into());
    let f: Vec<&str> = c.split(':').collect();
    let (pop, g, n, seed, eh): (&str, usize, usize, u64, f64) = (
        f[0],
        f[1].parse().unwrap(),
        f[2].parse().unwrap(),
        f[3].parse().unwrap(),
        f[4].parse().unwrap(),
    );
    let (grid, xs, rseed) = if pop == "corner" {
        let xs = corner_city(n, 20_000.0, seed);
        (KdeGrid::square(20_000.0, g).unwrap(), xs, 100 + seed)
    } else {
        let xs = discs_or_uniform(pop, n, seed);
        (KdeGrid::square(10_000.0, g).unwrap(), xs, 32 + seed)
    };
    // SMALL23_RSEED: another draw of the noise for the same devices.
    let rseed = std::env::var("SMALL23_RSEED").map_or(rseed, |s| s.parse().unwrap());
    let truth = grid.exact_map(&xs);
    let agg = aggregated(&grid, eh, &xs, rseed);
    let p = agg.planned_estimate().unwrap().1.unwrap();
    println!("{}", p.line);
    let m = agg.mapper().unwrap().unwrap();
    for q in &p.predictions {
        let measured = if let Some(l) = q.lambda {
            ase(&m.estimate(&agg.kernel(l).unwrap()).unwrap().values, &truth)
        } else if q.em_iterations.is_some() {
            ase(&p.em.as_ref().unwrap().values, &truth)
        } else {
            continue;
        };
        println!(
            "{}: predicted {:.3e} (var {:.3e}, bias² {:.3e}, upper {}, key {:.3e}), measured {measured:.3e} (x{:.2})",
            q.name,
            q.ase,
            q.variance,
            q.bias2,
            q.upper_bound,
            q.order_key,
            measured / q.ase
        );
    }
}

/// attack16 O4's population (its `gen.py corner`): a city centred 2 km
/// outside the box's (0, 0) corner, exponential profile 3 km, only the
/// devices inside the `side` box kept.
fn corner_city(n: usize, side: f64, seed: u64) -> Vec<[f64; 2]> {
    let mut rng = StdRng::seed_from_u64(seed);
    let mut xs = Vec::with_capacity(n);
    while xs.len() < n {
        let r = -3_000.0 * (1.0 - rng.random::<f64>()).ln();
        let a: f64 = rng.random::<f64>() * std::f64::consts::TAU;
        let p = [-2_000.0 + r * a.cos(), -2_000.0 + r * a.sin()];
        if (0.0..=side).contains(&p[0]) && (0.0..=side).contains(&p[1]) {
            xs.push(p);
        }
    }
    xs
}

/// Branch small23's scan (ignored): the corner city at n = 10³, εh 0.3
/// on the 20 km box, grid 61, seeds `SMALL23_SEEDS` (default 0..20):
/// every ranked kernel prediction outside [1/3, 3] of its measured ASE.
#[test]
#[ignore]
fn small23_corner_scan() {
    let seeds: u64 = std::env::var("SMALL23_SEEDS").map_or(20, |s| s.parse().unwrap());
    let eh: f64 = std::env::var("SMALL23_EH").map_or(0.3, |s| s.parse().unwrap());
    let n: usize = std::env::var("SMALL23_N").map_or(1_000, |s| s.parse().unwrap());
    let grid = KdeGrid::square(20_000.0, 61).unwrap();
    let (mut ranked, mut bad) = (0, 0);
    let mut picks = Vec::new();
    for seed in 0..seeds {
        let xs = corner_city(n, 20_000.0, seed);
        let truth = grid.exact_map(&xs);
        let agg = aggregated(&grid, eh, &xs, 100 + seed);
        let p = agg.planned_estimate().unwrap().1.unwrap();
        let m = agg.mapper().unwrap().unwrap();
        let maps: Vec<(String, f64)> = p
            .predictions
            .iter()
            .filter_map(|q| {
                let v = match (q.lambda, &p.em) {
                    (Some(l), _) => m.estimate(&agg.kernel(l).unwrap()).unwrap().values,
                    (None, Some(em)) if q.em_iterations.is_some() => em.values.clone(),
                    _ => return None,
                };
                Some((q.name.clone(), ase(&v, &truth)))
            })
            .collect();
        let best = maps.iter().map(|x| x.1).fold(f64::INFINITY, f64::min);
        if let Some(x) = maps.iter().find(|x| x.0 == p.pick().name) {
            picks.push(format!("{}: {:.2}", x.0, x.1 / best));
        }
        for (l, predicted, measured) in ranked_kernel_predictions(&p, &agg, &m, &truth) {
            ranked += 1;
            let r = measured / predicted;
            if !(1.0 / 3.0..=3.0).contains(&r) {
                bad += 1;
                println!("seed {seed} λ {l}: predicted {predicted:.3e} measured {measured:.3e} (x{r:.3})");
            }
        }
    }
    println!("corner n {n} εh {eh}: {ranked} ranked kernel predictions, {bad} beyond 3x; picks' ratios to the best a-priori map {picks:?}");
}

/// Every ranked kernel prediction of plan `p` (not an upper bound) as
/// (λ, predicted ASE, measured ASE of that λ's map against `truth`).
fn ranked_kernel_predictions(
    p: &geopriv::map::Plan,
    agg: &MapAggregator,
    m: &FftMapper,
    truth: &[f64],
) -> Vec<(f64, f64, f64)> {
    p.predictions
        .iter()
        .filter(|q| !q.upper_bound)
        .filter_map(|q| {
            let l = q.lambda?;
            let measured = ase(&m.estimate(&agg.kernel(l).unwrap()).unwrap().values, truth);
            Some((l, q.ase, measured))
        })
        .collect()
}

/// Branch small23 (attack16 O4; docs/MATH.md §9.4, "Uneven variance"): a
/// kernel map's bias² standard error read the cells' mean variance v̄ in
/// its second term, 2v̄²S2/m. Where the variance is concentrated (a city
/// in the box's corner, mean v_j² = 6.6 v̄² at εh 0.3) that understated
/// the noise of the estimate 2.6x, and a chance-high draw ranked λ = 0–0.6
/// at 12–110x their measured ASE (corner city, n = 10³, εh 0.3, seed 3 on
/// main: λ = 0 predicted 4.5e-3, measured 4.3e-5). The second term now
/// reads mean v_j²: those maps are not ranked, and every ranked kernel
/// prediction is within 3x. About 0.3 s of CPU in the test profile.
#[test]
fn kernel_bias_se_reads_uneven_variance_and_ranks_no_map_beyond_3x() {
    let grid = KdeGrid::square(20_000.0, 61).unwrap();
    let xs = corner_city(1_000, 20_000.0, 3);
    let truth = grid.exact_map(&xs);
    let agg = aggregated(&grid, 0.3, &xs, 103);
    let p = agg.planned_estimate().unwrap().1.unwrap();
    let m = agg.mapper().unwrap().unwrap();
    let mut ranked = 0;
    for (l, predicted, measured) in ranked_kernel_predictions(&p, &agg, &m, &truth) {
        ranked += 1;
        let r = measured / predicted;
        assert!(
            (1.0 / 3.0..=3.0).contains(&r),
            "λ {l}: predicted {predicted:.3e}, measured {measured:.3e} (x{r:.3})"
        );
    }
    // λ = 1 (no bias) and λ = 0.8 stay ranked.
    assert!(ranked >= 2, "{}", p.line);
}

/// n/4 tiny clusters of 3–5 devices each (sd 3 m), centres uniform on a
/// `side` square (attack17's "tiny" population).
fn tiny_clusters(n: usize, side: f64, seed: u64) -> Vec<[f64; 2]> {
    let mut rng = StdRng::seed_from_u64(seed);
    let mut xs = Vec::with_capacity(n);
    while xs.len() < n {
        let c = [side * rng.random::<f64>(), side * rng.random::<f64>()];
        let size = rng.random_range(3..6);
        for _ in 0..size.min(n - xs.len()) {
            // Box–Muller, sd 3 m.
            let (u, v): (f64, f64) = (1.0 - rng.random::<f64>(), rng.random());
            let r = 3.0 * (-2.0 * u.ln()).sqrt();
            let a = std::f64::consts::TAU * v;
            xs.push([c[0] + r * a.cos(), c[1] + r * a.sin()]);
        }
    }
    xs
}

/// Branch pubint (attack17 F2; docs/MATH.md §9.7, "A λ < 1 pick publishes
/// the unbiased map's interval"): where the planner picks a λ < 1 map (tiny
/// clusters, n 10⁴, εh 1: λ = 0), that map's own interval is for the map
/// blurred by the residual noise and covers the true map far below 95%
/// (attack17: 0.72–0.73 over live cells); the published interval is the
/// λ = 1 map's, like EM's, and covers the true map in [0.93, 0.97].
#[test]
fn a_lambda_below_1_pick_publishes_the_unbiased_maps_interval_for_the_true_map() {
    let grid = KdeGrid::square(20_000.0, 61).unwrap();
    let xs = tiny_clusters(10_000, 20_000.0, 5);
    let truth = grid.exact_map(&xs);
    let live = common::live_cells(&truth);
    let agg = aggregated(&grid, 1.0, &xs, 105);
    let (est, plan) = agg.planned_estimate().unwrap();
    let pick = plan.unwrap().pick().clone();
    let lam = pick
        .lambda
        .filter(|&l| l < 1.0 && pick.em_iterations.is_none());
    let Some(lam) = lam else {
        panic!(
            "the test needs a λ < 1 pick; the planner picked {}",
            pick.name
        )
    };
    let own = agg.estimate(Some(lam)).unwrap();
    let k1 = agg.estimate(Some(1.0)).unwrap();
    assert_eq!(est.values, own.values);
    assert_eq!(est.interval_centres.as_ref(), Some(&k1.values));
    assert_eq!(est.standard_errors, k1.standard_errors);
    let sub = |v: &[f64]| live.iter().map(|&j| v[j]).collect::<Vec<_>>();
    let own_cover = geopriv::map::interval_coverage(
        &sub(&own.values),
        &sub(&own.standard_errors),
        &sub(&truth),
    );
    let (_, published, _) = common::published_coverage(&agg, &truth, &live);
    println!("tiny clusters, λ = {lam} picked: own interval covers {own_cover:.3}, published {published:.3} (live cells {})", live.len());
    assert!(
        own_cover < 0.9,
        "λ = {lam}'s own interval covers {own_cover}"
    );
    assert!(
        (0.93..=0.97).contains(&published),
        "published covers {published}"
    );
}

/// Branch small24's probe (ignored; attack17 O2, BENCHMARKS.md "Branch
/// small24"): tiny clusters (n = 10⁴, clamped into the 20 km box) on an
/// 11 × 11 grid at εh 0.3, seeds `SMALL24_SEEDS` (default 0–9, release
/// seed 200 + seed): per seed the planner's line, every prediction (name,
/// ASE, variance, upper, key) and the measured ASE of every kernel map and
/// of EM, and the pick's ratio to the best measured. On main 2cde698 EM
/// is the best map in all ten seeds (1.35e-4–5.35e-4), λ = 0–0.6 are not
/// ranked, and λ = 0.8 (ranked) is picked at 4.4–18.8x in seven.
#[test]
#[ignore]
fn small24_grid11_probe() {
    let seeds: Vec<u64> = std::env::var("SMALL24_SEEDS").map_or((0..10).collect(), |s| {
        s.split(',').map(|v| v.parse().unwrap()).collect()
    });
    let eh: f64 = std::env::var("SMALL24_EH").map_or(0.3, |s| s.parse().unwrap());
    for seed in seeds {
        let cell = tiny_clusters_on_grid_11(seed, eh);
        println!("seed {seed}: {}", cell.line);
        for (name, ase, var, upper, key) in &cell.predictions {
            println!("PRED seed {seed} {name} {ase:.3e} var {var:.3e} upper {upper} key {key:.3e}");
        }
        for (name, a) in &cell.measured {
            println!(
                "MEAS seed {seed} {name} {a:.3e} (x{:.2} the best)",
                a / cell.best
            );
        }
        println!("PICK seed {seed} {} x{:.2}", cell.pick, cell.pick_ratio);
    }
}

/// The measured ASE against `truth` of every map the planner `p` chose
/// from: (name as in the plan, ASE) for λ in `LAMBDAS`, then EM where the
/// plan made it.
fn every_map_ase(agg: &MapAggregator, p: &Plan, truth: &[f64]) -> Vec<(String, f64)> {
    let m = agg.mapper().unwrap().unwrap();
    let mut maps: Vec<(String, f64)> = geopriv::map::LAMBDAS
        .iter()
        .map(|&l| {
            let v = m.estimate(&agg.kernel(l).unwrap()).unwrap().values;
            (format!("a-priori λ={l:.1}"), ase(&v, truth))
        })
        .collect();
    if let Some(em) = &p.em {
        maps.push(("a-priori em".into(), ase(&em.values, truth)));
    }
    maps
}

/// One cell of small24's probe: what the planner predicted and picked, and
/// every map's measured ASE against the devices' exact map.
struct ProbeCell {
    line: String,
    /// (name, predicted ASE, variance, upper bound, order key)
    predictions: Vec<(String, f64, f64, bool, f64)>,
    /// (name, measured ASE) for λ in `LAMBDAS` and EM
    measured: Vec<(String, f64)>,
    best: f64,
    pick: String,
    /// the pick's measured ASE over the best measured map's
    pick_ratio: f64,
}

/// Tiny clusters (3–5 devices each), 10⁴ devices on a 20 km box, grid 11,
/// at `eh`: small24's probe cell for `seed`.
fn tiny_clusters_on_grid_11(seed: u64, eh: f64) -> ProbeCell {
    let grid = KdeGrid::square(20_000.0, 11).unwrap();
    // Clusters at the box's edge spill a few metres out: clamped in.
    let xs: Vec<[f64; 2]> = tiny_clusters(10_000, 20_000.0, seed)
        .into_iter()
        .map(|x| x.map(|v| v.clamp(0.0, 20_000.0)))
        .collect();
    let truth = grid.exact_map(&xs);
    let agg = aggregated(&grid, eh, &xs, 200 + seed);
    let p = agg.planned_estimate().unwrap().1.unwrap();
    let measured = every_map_ase(&agg, &p, &truth);
    let best = measured.iter().map(|x| x.1).fold(f64::INFINITY, f64::min);
    let pick = p.pick().name.clone();
    let pick_ase = measured
        .iter()
        .find(|x| x.0 == pick)
        .map_or(f64::NAN, |x| x.1);
    ProbeCell {
        line: p.line.clone(),
        predictions: p
            .predictions
            .iter()
            .map(|q| {
                (
                    q.name.clone(),
                    q.ase,
                    q.variance,
                    q.upper_bound,
                    q.order_key,
                )
            })
            .collect(),
        measured,
        best,
        pick,
        pick_ratio: pick_ase / best,
    }
}

/// An EM the reports do not pin is ordered at most at the log-centre of
/// its ASE interval (branch lead18, docs/MATH.md §9.4 addendum "lead18";
/// attack17 O2, small24's probe). Tiny clusters on grid 11 at εh 0.3,
/// n = 10⁴: EM is the best map in every seed, but its point estimate (the
/// emlow floor, EM at least as far from the truth as from the plain map)
/// sat above a ranked λ = 0.8, picked at 4.4–18.8x the best in seven of
/// these ten seeds on main 05b497d. Ordered at min(point, √(lo·hi)) EM is
/// picked in all ten.
#[test]
fn an_unpinned_em_is_ordered_at_most_at_its_intervals_log_centre() {
    for seed in 0..10 {
        let cell = tiny_clusters_on_grid_11(seed, 0.3);
        assert!(
            cell.pick_ratio <= 1.5,
            "seed {seed}: pick {} at {:.2}x the best: {}",
            cell.pick,
            cell.pick_ratio,
            cell.line
        );
    }
}

/// attack16's thin ring (docs/ATTACK-16.md O1): radius 6 km, 1 m thick,
/// centred at (10.3 km, 9.7 km) in a 20 km box (scripts/attack16/gen.py
/// "ring"; the same law, drawn here with StdRng).
fn thin_ring(n: usize, seed: u64) -> Vec<[f64; 2]> {
    let mut rng = StdRng::seed_from_u64(seed);
    (0..n)
        .map(|_| {
            let a: f64 = rng.random::<f64>() * std::f64::consts::TAU;
            let r = 6_000.0 + rng.random::<f64>();
            [10_300.0 + r * a.cos(), 9_700.0 + r * a.sin()]
        })
        .collect()
}

/// Branch band23 (issue 22 item 2; docs/MATH.md §9.7 "band23"): the
/// published interval on attack16's thin ring (61 × 61 over 20 km, the
/// server's default binning) scored over the live cells (truth >= 10⁻¹²
/// of its peak) and over band22's cells with m >= m* = ln 20 effective
/// reports, with the live cells below m* apart. Env: BAND23_N (10000),
/// BAND23_EH (0.3,1,10), BAND23_SEEDS (1,2), BAND23_REPS (2). One line
/// per (n, εh, seed): `RING n eh seed: pick(s), live, m>=m*, thin (cells),
/// shares kept`.
#[test]
#[ignore]
fn band23_thin_ring_probe() {
    let list = |k: &str, d: &str| -> Vec<f64> {
        std::env::var(k)
            .unwrap_or_else(|_| d.into())
            .split(',')
            .map(|v| v.parse().unwrap())
            .collect()
    };
    let grid = KdeGrid::square(20_000.0, 61).unwrap();
    let reps: u64 = std::env::var("BAND23_REPS").map_or(2, |s| s.parse().unwrap());
    for n in list("BAND23_N", "10000") {
        for seed in list("BAND23_SEEDS", "1,2") {
            let xs = thin_ring(n as usize, seed as u64);
            let truth = grid.exact_map(&xs);
            let live = common::live_cells(&truth);
            for eh in list("BAND23_EH", "0.3,1,10") {
                let eps = eh / grid.bandwidth();
                let m_eff = geopriv::map::effective_reports(&grid, &xs, eps);
                let (kept, thin) = geopriv::map::split_by_effective_reports(&m_eff, &live);
                let (mut c_live, mut c_kept, mut c_thin, mut picks) = (0.0, 0.0, 0.0, Vec::new());
                for rep in 0..reps {
                    let set = QuerySet::Kde(grid.clone());
                    let dev = MapRelease::new(set.clone(), MapMechanism::APriori, eps).unwrap();
                    let mut agg = MapAggregator::new(set, MapMechanism::APriori, eps).unwrap();
                    let mut rng = StdRng::seed_from_u64(7_000 + 100 * seed as u64 + rep);
                    for x in &xs {
                        agg.add(&dev.release_unmetered(x, &mut rng).unwrap())
                            .unwrap();
                    }
                    let (_, l, pick) = common::published_coverage(&agg, &truth, &live);
                    c_live += l / reps as f64;
                    c_kept += common::published_coverage(&agg, &truth, &kept).1 / reps as f64;
                    if !thin.is_empty() {
                        c_thin += common::published_coverage(&agg, &truth, &thin).1 / reps as f64;
                    }
                    picks.push(pick);
                }
                let mass = |idx: &[usize]| {
                    idx.iter().map(|&j| truth[j]).sum::<f64>() / truth.iter().sum::<f64>()
                };
                println!(
                    "RING n {n} eh {eh} seed {seed}: {picks:?} live {c_live:.3} m>=m* {c_kept:.3} thin {c_thin:.3} ({}) cells kept {:.3}/{:.3} mass kept {:.6}/{:.6}",
                    thin.len(),
                    live.len() as f64 / truth.len() as f64,
                    kept.len() as f64 / truth.len() as f64,
                    mass(&live),
                    mass(&kept)
                );
            }
        }
    }
}

/// Branch band23 (issue 22 item 2; docs/MATH.md §9.7 "band23";
/// docs/ATTACK-16.md O1): on attack16's thin ring (1 m thick) at εh 10 the
/// live cells (truth >= 10⁻¹² of its peak) keep a fringe 7.4h wide on each
/// side of the curve, where the estimate is one near-fixed value and the
/// interval covers almost always; scored over band22's cells with at least
/// m* = ln 20 effective reports, the published interval (the λ = 1 map's
/// for every pick, branch pubint) is in band and the live cells below m*
/// are covered at least 0.95.
#[test]
fn published_interval_on_a_thin_ring_is_in_band_over_cells_with_m_star_reports() {
    let grid = KdeGrid::square(20_000.0, 61).unwrap();
    let eh = 10.0;
    let eps = eh / grid.bandwidth();
    let xs = thin_ring(10_000, 1);
    let truth = grid.exact_map(&xs);
    let live = common::live_cells(&truth);
    let m_eff = geopriv::map::effective_reports(&grid, &xs, eps);
    let (kept, thin) = geopriv::map::split_by_effective_reports(&m_eff, &live);
    let sub = |idx: &[usize], v: &[f64]| idx.iter().map(|&j| v[j]).collect::<Vec<_>>();
    let (mut c_live, mut c_kept, mut c_thin) = (0.0, 0.0, 0.0);
    for rep in 0..2u64 {
        let set = QuerySet::Kde(grid.clone());
        let dev = MapRelease::new(set.clone(), MapMechanism::APriori, eps).unwrap();
        let mut agg = MapAggregator::new(set, MapMechanism::APriori, eps).unwrap();
        let mut rng = StdRng::seed_from_u64(7_100 + rep);
        for x in &xs {
            agg.add(&dev.release_unmetered(x, &mut rng).unwrap())
                .unwrap();
        }
        // The published interval: the λ = 1 map ± 1.96 SE.
        let mapper = agg.mapper().unwrap().unwrap();
        let est = mapper.estimate(&agg.kernel(1.0).unwrap()).unwrap();
        let cov = |idx: &[usize]| {
            geopriv::map::interval_coverage(
                &sub(idx, &est.values),
                &sub(idx, &est.standard_errors),
                &sub(idx, &truth),
            )
        };
        c_live += 0.5 * cov(&live);
        c_kept += 0.5 * cov(&kept);
        c_thin += 0.5 * cov(&thin);
    }
    println!(
        "thin ring, n 10⁴, εh 10: live ({}) {c_live:.3}, m >= m* ({}) {c_kept:.3}, live below m* ({}) {c_thin:.3}",
        live.len(),
        kept.len(),
        thin.len()
    );
    // A third of the cells hold m >= m*, with all but 10⁻⁴ of the truth's
    // mass; more than a thousand live cells are below m*.
    assert!(kept.len() * 4 > truth.len() && thin.len() > 1_000);
    let mass = |idx: &[usize]| idx.iter().map(|&j| truth[j]).sum::<f64>();
    assert!(mass(&kept) >= (1.0 - 1e-3) * mass(&(0..truth.len()).collect::<Vec<_>>()));
    assert!((0.93..=0.97).contains(&c_kept), "m >= m*: {c_kept}");
    assert!(c_thin >= 0.95, "live cells below m*: {c_thin}");
    // The fringe lifts the live-cell average.
    assert!(c_live > c_kept, "live {c_live}, m >= m* {c_kept}");
}

/// Branch grid26 (issue 19 item 15, BENCHMARKS.md "Branch small23"): on
/// a 3-point grid at εh 100 the two 600 m discs are two atoms at fixed
/// offsets in their bins. EM's rounding was floored by the SE share, which
/// averages a location's rounding over its offset: EM predicted 1.70e-5
/// and 1.65e-5 against 1.0e-6 and 1.2e-6 measured (0.06, 0.07). Where the
/// counts carry their offsets' moments EM's floor reads the plain map's
/// rounding from them (docs/MATH.md §9.4 addendum "grid26").
#[test]
fn em_on_a_3_point_grid_at_eps_h_100_reads_the_discs_rounding_from_the_moments() {
    let grid = KdeGrid::square(10_000.0, 3).unwrap();
    for seed in [0u64, 1] {
        let xs = discs_or_uniform("discs", 5_000, seed);
        let truth = grid.exact_map(&xs);
        let agg = aggregated(&grid, 100.0, &xs, 32 + seed);
        let (q, measured) = em_prediction_and_ase(&agg, &truth);
        assert_em_ranked_within(&format!("seed {seed}"), &q, measured, 3.0);
    }
}

/// Branch grid26 (attack16 F3, lead17's atomsc cells): Zipf-weighted
/// atoms exactly on the bin centres at εh 100. The binned maps' rounding
/// (the sinc correction of a box that is not there, and λ's deconvolution
/// of a noise the bins removed) and a λ < 1 map's residual blur have
/// opposite signs, so its error is below λ = 1's; charged as the sum of
/// two squares every λ < 1 map was predicted above λ = 1 and λ = 1 was
/// picked at 1.6x the best map (CLI, n 10⁵, seeds 3 and 4). The cross
/// term 2⟨R̂_1, map_λ − map_1⟩ from the moments orders them (docs/MATH.md
/// §9.4 addendum "grid26").
#[test]
fn atoms_on_bin_centres_at_eps_h_100_pick_the_map_whose_blur_offsets_the_rounding() {
    let grid = KdeGrid::square(20_000.0, 61).unwrap();
    let eh = 100.0;
    let eps = eh / grid.bandwidth();
    let set = QuerySet::Kde(grid.clone());
    let spec = MapAggregator::with_max_bins(set, MapMechanism::APriori, eps, 512)
        .unwrap()
        .counts()
        .unwrap()
        .spec()
        .clone();
    let mut rng = StdRng::seed_from_u64(8);
    let sites: Vec<[f64; 2]> = (0..500)
        .map(|_| {
            let x = [
                1_000.0 + 18_000.0 * rng.random::<f64>(),
                1_000.0 + 18_000.0 * rng.random::<f64>(),
            ];
            spec.bin_centre(spec.bin_of(&x).unwrap())
        })
        .collect();
    let w: Vec<f64> = (1..=500).map(|k| (k as f64).powf(-1.1)).collect();
    let total: f64 = w.iter().sum();
    let mut xs = Vec::with_capacity(100_000);
    for _ in 0..100_000 {
        let mut u = rng.random::<f64>() * total;
        let mut i = 0;
        while i + 1 < w.len() && u >= w[i] {
            u -= w[i];
            i += 1;
        }
        xs.push(sites[i]);
    }
    let truth = grid.exact_map(&xs);
    let agg = aggregated(&grid, eh, &xs, 3);
    let p = agg.planned_estimate().unwrap().1.unwrap();
    let m = agg.mapper().unwrap().unwrap();
    let mut best = f64::INFINITY;
    let mut picked = f64::NAN;
    for q in p.predictions.iter().filter(|q| q.lambda.is_some()) {
        let l = q.lambda.unwrap();
        let measured = ase(&m.estimate(&agg.kernel(l).unwrap()).unwrap().values, &truth);
        println!(
            "{}: predicted {:.3e}, measured {measured:.3e} (x{:.2})",
            q.name,
            q.ase,
            measured / q.ase
        );
        assert!(
            q.upper_bound || (measured < 3.0 * q.ase && q.ase < 3.0 * measured),
            "{}: predicted {:e}, measured {measured:e}",
            q.name,
            q.ase
        );
        best = best.min(measured);
        if p.pick().lambda == Some(l) {
            picked = measured;
        }
    }
    println!(
        "pick {}: {:.2}x the best kernel map",
        p.pick().name,
        picked / best
    );
    assert!(
        picked <= 1.5 * best,
        "pick {} at {}x",
        p.pick().name,
        picked / best
    );
}

/// Branch emin26 (issue 19 item 15): the planner's pick on one seeded
/// release and its measured ASE over the best of the six kernel maps and
/// EM, against the true map of the devices `xs`. Returns the pick's name
/// and that ratio.
fn emin26_pick_ratio(grid: &KdeGrid, eh: f64, xs: &[[f64; 2]], seed: u64) -> (String, f64) {
    let truth = grid.exact_map(xs);
    let agg = aggregated(grid, eh, xs, seed);
    let p = agg.planned_estimate().unwrap().1.unwrap();
    let maps = every_map_ase(&agg, &p, &truth);
    let best = maps.iter().map(|x| x.1).fold(f64::INFINITY, f64::min);
    let pick = maps.iter().find(|x| x.0 == p.pick().name).map(|x| x.1);
    if std::env::var("EMIN26_VERBOSE").is_ok() {
        println!("{}", p.line);
        for q in &p.predictions {
            println!("PRED {} {:.3e} key {:.3e}", q.name, q.ase, q.order_key);
        }
        for (name, a) in &maps {
            println!("MEAS {name} {a:.3e} (x{:.2})", a / best);
        }
    }
    (p.pick().name.clone(), pick.unwrap_or(f64::NAN) / best)
}

/// Branch emin26: a probe over tiny clusters (env EMIN26_GRID, EMIN26_EH,
/// EMIN26_N, EMIN26_SEEDS), printing each seed's pick and its ratio to the
/// best measured map.
#[test]
#[ignore]
fn emin26_probe() {
    let env = |k: &str, d: &str| std::env::var(k).unwrap_or_else(|_| d.to_string());
    let k: usize = env("EMIN26_GRID", "61").parse().unwrap();
    let eh: f64 = env("EMIN26_EH", "3").parse().unwrap();
    let n: usize = env("EMIN26_N", "1000").parse().unwrap();
    let grid = KdeGrid::square(20_000.0, k).unwrap();
    for seed in env("EMIN26_SEEDS", "0,1,2,3,4,5,6,7,8,9")
        .split(',')
        .map(|v| v.parse::<u64>().unwrap())
    {
        let xs = emin26_tiny(n, seed);
        let (name, r) = emin26_pick_ratio(&grid, eh, &xs, 200 + seed);
        println!("EMIN26 grid {k} eh {eh} n {n} seed {seed}: {name} x{r:.2}");
    }
}

/// Tiny clusters (3–5 devices, sd 3 m) clamped into the 20 km box, for
/// branch emin26's tests.
fn emin26_tiny(n: usize, seed: u64) -> Vec<[f64; 2]> {
    tiny_clusters(n, 20_000.0, seed)
        .into_iter()
        .map(|x| x.map(|v| v.clamp(0.0, 20_000.0)))
        .collect()
}

/// Branch emin26 (issue 19 item 15; docs/MATH.md §9.4 addendum "emin26"):
/// lead17's low-n cells (tiny clusters, grid 61, εh 3, n 10³). EM is
/// ranked on an interval [3.1e-7, 4.4e-7] whose top sits below EM's
/// point estimate (1.0e-6–1.1e-6, within 1.3x of EM's measured ASE), and
/// the clamp to the top put EM ahead of every kernel map; it measured
/// 1.5–1.9x the best. Keyed at max(hi, √(lo·point)), EM goes behind the
/// kernel maps predicted below that. Main picked EM at 1.70x (seed 0)
/// and 1.86x (seed 6).
#[test]
fn a_ranked_em_whose_point_lies_above_its_interval_is_not_keyed_at_its_top() {
    let grid = KdeGrid::square(20_000.0, 61).unwrap();
    for seed in [0u64, 6] {
        let xs = emin26_tiny(1_000, seed);
        let (name, r) = emin26_pick_ratio(&grid, 3.0, &xs, 200 + seed);
        assert!(r <= 1.5, "seed {seed}: {name} at {r:.2}x the best map");
    }
}

/// A town of three neighbourhoods (Gaussian, sd 700 m) over a sparse
/// uniform background (`background` of the n devices) in a 15 km square.
fn town_on_a_sparse_background(n: usize, background: f64, seed: u64) -> Vec<[f64; 2]> {
    let mut rng = StdRng::seed_from_u64(seed);
    let centres = [[4_000.0, 5_000.0], [9_500.0, 9_000.0], [11_000.0, 4_000.0]];
    (0..n)
        .map(|i| {
            if rng.random::<f64>() < background {
                return [
                    15_000.0 * rng.random::<f64>(),
                    15_000.0 * rng.random::<f64>(),
                ];
            }
            let c = centres[i % 3];
            // Box–Muller.
            let (u, v): (f64, f64) = (rng.random::<f64>().max(1e-300), rng.random());
            let r = 700.0 * (-2.0 * u.ln()).sqrt();
            let a = std::f64::consts::TAU * v;
            [c[0] + r * a.cos(), c[1] + r * a.sin()]
        })
        .collect()
}

/// Per draw of the town on a sparse background: the published λ = 1 map's
/// coverage over the cells with m̂ >= m* (m̂ from the reports, the map's
/// `effective_reports`), over the live cells with m̂ < m*, the same thin
/// cells' coverage without the widening (SE² − w, w =
/// `thin_cell_variance`), and the thin cells' count.
fn sparse24_town_draw(
    grid: &KdeGrid,
    xs: &[[f64; 2]],
    truth: &[f64],
    eh: f64,
    seed: u64,
) -> (f64, f64, f64, usize) {
    let agg = aggregated_with_bins(grid, eh, xs, seed, None);
    let mapper = agg.mapper().unwrap().unwrap();
    let k1 = agg.kernel(1.0).unwrap();
    let est = mapper.estimate(&k1).unwrap();
    let m_hat = est.effective_reports.as_deref().unwrap();
    let live = common::live_cells(truth);
    let (kept, thin) = geopriv::map::split_by_effective_reports(m_hat, &live);
    let peak = mapper
        .spatial_kernel(&k1)
        .iter()
        .fold(0.0f64, |a, x| a.max(x.abs()));
    let w = geopriv::map::thin_cell_variance(peak, xs.len() as f64);
    let sub = |idx: &[usize], v: &[f64]| idx.iter().map(|&j| v[j]).collect::<Vec<_>>();
    let cov = |idx: &[usize], se: &[f64]| {
        geopriv::map::interval_coverage(&sub(idx, &est.values), &sub(idx, se), &sub(idx, truth))
    };
    let unwidened: Vec<f64> = est
        .standard_errors
        .iter()
        .zip(m_hat)
        .map(|(s, &m)| {
            if m < geopriv::map::EFFECTIVE_REPORTS_THRESHOLD {
                (s * s - w).max(0.0).sqrt()
            } else {
                *s
            }
        })
        .collect();
    (
        cov(&kept, &est.standard_errors),
        cov(&thin, &est.standard_errors),
        cov(&thin, &unwidened),
        thin.len(),
    )
}

/// Probe for branch sparse24: the town on a sparse background over draws.
/// Env: SPARSE24_N (3000), SPARSE24_BG (0.1), SPARSE24_EH (1,10),
/// SPARSE24_DRAWS (4).
#[test]
#[ignore]
fn sparse24_town_probe() {
    let var = |k: &str, d: &str| std::env::var(k).unwrap_or_else(|_| d.into());
    let n: usize = var("SPARSE24_N", "3000").parse().unwrap();
    let bg: f64 = var("SPARSE24_BG", "0.1").parse().unwrap();
    let draws: u64 = var("SPARSE24_DRAWS", "4").parse().unwrap();
    let grid = KdeGrid::square(15_000.0, 31).unwrap();
    let xs = town_on_a_sparse_background(n, bg, 5);
    let truth = grid.exact_map(&xs);
    for eh in var("SPARSE24_EH", "1,10").split(',') {
        let eh: f64 = eh.parse().unwrap();
        for d in 0..draws {
            let (k, t, u, c) = sparse24_town_draw(&grid, &xs, &truth, eh, 2_400 + d);
            println!("TOWN n {n} bg {bg} eh {eh} draw {d}: m̂>=m* {k:.3}, thin {t:.3} (unwidened {u:.3}, {c} cells)");
        }
    }
}

/// Branch sparse24 (issue 22 item 2; docs/MATH.md §9.7 "sparse24"): a
/// town of 3,000 devices, a tenth of them a uniform background over the
/// 15 km square (31 × 31, εh 1, four draws). The map states per cell the
/// effective reports m̂ read from the reports (`effective_reports`); the
/// background's cells with m̂ < m* = ln 20 (81–107 per draw) are flagged,
/// and their published interval carries ln 20 reports' worth of the
/// kernel's peak weight (`thin_cell_variance`). Without it those cells were
/// covered 0.930 (0.914–0.953 by draw); with it 1.000, and the cells with
/// m̂ >= m* are in band (0.947).
#[test]
fn thin_cells_flagged_by_the_reports_are_covered_conservatively() {
    let grid = KdeGrid::square(15_000.0, 31).unwrap();
    let xs = town_on_a_sparse_background(3_000, 0.1, 5);
    let truth = grid.exact_map(&xs);
    let (mut kept, mut thin, mut unwidened) = (0.0, 0.0, 0.0);
    for d in 0..4u64 {
        let (k, t, u, cells) = sparse24_town_draw(&grid, &xs, &truth, 1.0, 2_400 + d);
        println!("draw {d}: m̂ >= m* {k:.3}, m̂ < m* {t:.3} (unwidened {u:.3}, {cells} cells)");
        assert!(cells > 50, "draw {d}: {cells} thin cells");
        assert!(t >= 0.95, "draw {d}: thin cells covered {t}");
        kept += k / 4.0;
        thin += t / 4.0;
        unwidened += u / 4.0;
    }
    assert!((0.93..=0.97).contains(&kept), "m̂ >= m*: {kept}");
    assert!(thin >= 0.95, "m̂ < m*: {thin}");
    // What the widening mends: the same intervals without it.
    assert!(unwidened < 0.95, "unwidened: {unwidened}");
}

/// Probe for branch sparse24: the CPU of m̂ (`observed_effective_reports`)
/// against the λ = 1 map's `estimate` on 10⁶ reports (61 × 61 over 20 km,
/// εh in SPARSE24_EH, default 0.3,1,10). Prints times; asserts nothing on them.
#[test]
#[ignore]
fn sparse24_cost_probe() {
    let grid = KdeGrid::square(20_000.0, 61).unwrap();
    let xs: Vec<[f64; 2]> = town_on_a_sparse_background(1_000_000, 0.25, 9)
        .into_iter()
        .map(|x| [x[0] * 4.0 / 3.0, x[1] * 4.0 / 3.0])
        .collect();
    let list = std::env::var("SPARSE24_EH").unwrap_or_else(|_| "0.3,1,10".into());
    for eh in list.split(',') {
        let eh: f64 = eh.parse().unwrap();
        let eps = eh / grid.bandwidth();
        let set = QuerySet::Kde(grid.clone());
        let dev = MapRelease::new(set.clone(), MapMechanism::APriori, eps).unwrap();
        let mut agg = MapAggregator::new(set, MapMechanism::APriori, eps).unwrap();
        let mut rng = StdRng::seed_from_u64(11);
        for x in &xs {
            agg.add(&dev.release_unmetered(x, &mut rng).unwrap())
                .unwrap();
        }
        let mapper = agg.mapper().unwrap().unwrap();
        let t = std::time::Instant::now();
        let m = mapper.observed_effective_reports(grid.bandwidth());
        let tm = t.elapsed();
        let t = std::time::Instant::now();
        let est = mapper.estimate(&agg.kernel(1.0).unwrap()).unwrap();
        let te = t.elapsed();
        println!(
            "COST εh {eh}: bins {:?}, m̂ {tm:?} (min {:.1}), estimate(λ = 1) {te:?} ({} values)",
            mapper.counts().spec().bins(),
            m.iter().fold(f64::INFINITY, |a, b| a.min(*b)),
            est.values.len()
        );
    }
}
