//! Maps under one per-device budget (docs/MATH.md §9): FFT maps against
//! direct evaluation, unbiasedness of the deconvolution kernel, sharding,
//! the planner, rejections.

use geopriv::map::{
    direct_map, plan, BinSpec, BinnedCounts, DebiasKernel, FftMapper, KdeGrid, MapAggregator,
    MapMechanism, MapRelease, QuerySet,
};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

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
    let mut counts = BinnedCounts::new(spec);
    for l in &locs {
        counts.add(l).unwrap();
    }
    let mapper = FftMapper::new(counts).unwrap();
    for lam in [0.0, 2.0 / 3.0] {
        // Closed-form kernels (λ(d+1)/2 integer) for a fast direct sum.
        let k = DebiasKernel::new(2, grid.bandwidth(), eps, lam).unwrap();
        let est = mapper.estimate(&k).unwrap();
        let direct = direct_map(&grid, &k, &locs).unwrap();
        let worst = est
            .values
            .iter()
            .zip(&direct)
            .map(|(a, b)| (a - b).abs())
            .fold(0.0, f64::max);
        assert!(
            worst <= est.discretisation_bound,
            "λ={lam}: {worst} > {}",
            est.discretisation_bound
        );
        assert!(
            worst < 0.05 * direct.iter().cloned().fold(0.0, f64::max),
            "λ={lam}: {worst}"
        );
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
    assert_eq!(a, b);
}

#[test]
fn debiased_map_is_unbiased_in_every_cell() {
    // Mean over repetitions within 3 standard errors of the true map.
    let grid = KdeGrid::square(10_000.0, 9).unwrap();
    let eps = 1.0 / grid.bandwidth();
    let xs = devices(2000, 4);
    let truth: Vec<f64> = (0..grid.len())
        .map(|j| {
            let t = grid.center(j);
            xs.iter()
                .map(|x| grid.kernel([x[0] - t[0], x[1] - t[1]]))
                .sum::<f64>()
                / xs.len() as f64
        })
        .collect();
    let reps = 40;
    let set = QuerySet::Kde(grid.clone());
    let mut sum = vec![0.0; grid.len()];
    let mut sum2 = vec![0.0; grid.len()];
    let mut plain_sum = vec![0.0; grid.len()];
    for r in 0..reps {
        let dev = MapRelease::new(set.clone(), MapMechanism::APriori, eps).unwrap();
        let mut agg = MapAggregator::new(set.clone(), MapMechanism::APriori, eps).unwrap();
        let mut rng = StdRng::seed_from_u64(500 + r);
        for x in &xs {
            agg.add(&dev.release_unmetered(x, &mut rng).unwrap())
                .unwrap();
        }
        let m = agg.mapper().unwrap().unwrap();
        let deb = m.estimate(&agg.kernel(1.0).unwrap()).unwrap();
        let pl = m.estimate(&agg.kernel(0.0).unwrap()).unwrap();
        for j in 0..grid.len() {
            sum[j] += deb.values[j];
            sum2[j] += deb.values[j] * deb.values[j];
            plain_sum[j] += pl.values[j];
        }
    }
    let mut plain_far = 0;
    for j in 0..grid.len() {
        let mean = sum[j] / reps as f64;
        let var = (sum2[j] / reps as f64 - mean * mean) * reps as f64 / (reps - 1) as f64;
        let se = (var / reps as f64).sqrt();
        assert!(
            (mean - truth[j]).abs() <= 3.0 * se + 1e-6,
            "cell {j}: {mean} vs {} (se {se})",
            truth[j]
        );
        if (plain_sum[j] / reps as f64 - truth[j]).abs() > 3.0 * se {
            plain_far += 1;
        }
    }
    // The plain map is visibly biased at this εh.
    assert!(plain_far > grid.len() / 4, "{plain_far}");
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
