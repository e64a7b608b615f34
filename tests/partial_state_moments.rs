//! Branch state25 (issue 19 item 15's gap): a partial state carries the
//! binning's offset moments (`BinnedCounts::sparse_moments`,
//! `from_sparse`, `MapAggregator::restore_binned`), so shards restored
//! from their states merge into the single-process moments bit for bit and
//! the planner picks as one process would; forged moments are refused
//! with typed errors; older states (counts only) still restore.
use geopriv::map::{
    check_bin_moments, BinnedCounts, KdeGrid, MapAggregator, MapMechanism, MapRelease, MomentRow,
    QuerySet,
};
use rand::SeedableRng;

/// A kernel grid at εh 1000 (above the planner's moment gate) and
/// reports of heavy atoms (a few locations, many devices each) plus a
/// diffuse part.
fn setup() -> (QuerySet, f64, Vec<geopriv::map::MapReport>) {
    let grid = KdeGrid::square(10_000.0, 11).unwrap();
    let eps = 1000.0 / grid.bandwidth();
    let set = QuerySet::Kde(grid);
    let device = MapRelease::new(set.clone(), MapMechanism::APriori, eps).unwrap();
    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(25);
    let reports = (0..6_000u32)
        .map(|i| {
            let x = if i % 3 == 0 {
                let t = f64::from(i);
                [
                    5000.0 + 3000.0 * (t * 0.618).sin(),
                    5000.0 + 3000.0 * (t * 0.377).cos(),
                ]
            } else {
                [
                    2000.0 + 1500.0 * f64::from(i % 4),
                    3000.0 + 2000.0 * f64::from(i % 3),
                ]
            };
            device.release_unmetered(&x, &mut rng).unwrap()
        })
        .collect();
    (set, eps, reports)
}

fn server(set: &QuerySet, eps: f64) -> MapAggregator {
    MapAggregator::new(set.clone(), MapMechanism::APriori, eps).unwrap()
}

/// Through the sparse parts, as the collector and the bindings ship them.
fn ship(set: &QuerySet, eps: f64, a: &MapAggregator, with_moments: bool) -> MapAggregator {
    let c = a.counts().unwrap();
    let moments = with_moments.then(|| c.sparse_moments().unwrap());
    let parts = BinnedCounts::from_sparse(
        c.spec().clone(),
        &c.sparse_counts(),
        c.outside(),
        moments.as_deref(),
    )
    .unwrap();
    MapAggregator::restore_binned(
        set.clone(),
        MapMechanism::APriori,
        eps,
        geopriv::map::DEFAULT_MAX_BINS,
        Some(parts),
        Vec::new(),
        a.accepted(),
    )
    .unwrap()
}

#[test]
fn shards_shipped_with_moments_merge_into_the_single_process_state_and_pick() {
    let (set, eps, reports) = setup();
    let mut whole = server(&set, eps);
    let mut shards = [0, 1, 2].map(|_| server(&set, eps));
    for (i, r) in reports.iter().enumerate() {
        whole.add(r).unwrap();
        shards[(i * 7 + i / 5) % 3].add(r).unwrap();
    }
    assert!(
        whole.counts().unwrap().moments().is_some(),
        "above the gate"
    );
    let mut merged = ship(&set, eps, &shards[2], true);
    merged.merge(&ship(&set, eps, &shards[0], true)).unwrap();
    merged.merge(&ship(&set, eps, &shards[1], true)).unwrap();
    assert_eq!(merged.counts(), whole.counts(), "moments bit-identical");
    let (a, pa) = whole.planned_estimate().unwrap();
    let (b, pb) = merged.planned_estimate().unwrap();
    assert_eq!(pa, pb);
    assert_eq!(a.lambda, b.lambda);
    let bits = |v: &[f64]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
    assert_eq!(bits(&a.values), bits(&b.values));
    assert_eq!(bits(&a.standard_errors), bits(&b.standard_errors));

    // One shard from an older state (counts only): the merge keeps the
    // counts and drops every moment (a partial sum would be wrong).
    let mut mixed = ship(&set, eps, &shards[0], true);
    mixed.merge(&ship(&set, eps, &shards[1], false)).unwrap();
    mixed.merge(&ship(&set, eps, &shards[2], true)).unwrap();
    assert!(mixed.counts().unwrap().moments().is_none());
    assert_eq!(
        mixed.counts().unwrap().counts(),
        whole.counts().unwrap().counts()
    );
    // ... and the old format alone still restores.
    assert!(ship(&set, eps, &whole, false)
        .counts()
        .unwrap()
        .moments()
        .is_none());
}

fn row(i: u64, m: [i128; 5]) -> MomentRow {
    let s = |v: i128| v.to_string();
    (i, s(m[0]), s(m[1]), s(m[2]), s(m[3]), s(m[4]))
}

#[test]
fn forged_moments_are_refused_with_typed_errors() {
    let (set, eps, reports) = setup();
    let mut a = server(&set, eps);
    for r in &reports[..500] {
        a.add(r).unwrap();
    }
    let c = a.counts().unwrap();
    let bins = c.sparse_counts();
    let good = c.sparse_moments().unwrap();
    let try_rows = |rows: &[MomentRow]| {
        BinnedCounts::from_sparse(c.spec().clone(), &bins, c.outside(), Some(rows))
    };
    assert_eq!(&try_rows(&good).unwrap(), c);
    let (b, n) = bins[0];
    let empty = (0..c.counts().len() as u64)
        .find(|i| c.counts()[*i as usize] == 0)
        .unwrap();
    let n = n as i128;
    let h = 1i128 << 31;
    let cases: Vec<Vec<MomentRow>> = vec![
        vec![row(empty, [1, 0, 1, 0, 0])], // bin with count 0
        vec![row(b, [0, 0, 1, 1, 0]), row(b, [0, 0, 1, 1, 0])], // duplicate
        vec![row(c.counts().len() as u64, [0, 0, 1, 1, 0])], // past the bins
        vec![row(u64::MAX, [0, 0, 1, 1, 0])],
        vec![row(b, [n * h + 1, 0, n * h * h, 0, 0])], // |Σq| > c·2^31
        vec![row(b, [0, 0, n * h * h + 1, 0, 0])],     // Σq² > c·2^62
        vec![row(b, [0, 0, -1, 0, 0])],                // Σq² < 0
        vec![row(b, [n * 1000, 0, 1000, 0, 0])],       // Σq² < (Σq)²/c
        vec![row(b, [0, 0, 4, 9, 7])],                 // |Σq0q1| > √(Σq0²Σq1²)
        vec![row(b, [0, 0, 0, 0, i128::MIN])],
        vec![row(
            b,
            [i128::MAX, i128::MIN, i128::MAX, i128::MAX, i128::MIN],
        )],
    ];
    for rows in &cases {
        let e = try_rows(rows).unwrap_err();
        assert!(matches!(e, geopriv::Error::InvalidReport { .. }), "{e}");
        assert!(
            e.to_string().contains("refused") || e.to_string().contains("bins must be"),
            "{e}"
        );
    }
    // Strings that are not canonical decimal i128s.
    for bad in [
        "1.5",
        "1e3",
        "+4",
        "04",
        "-0",
        " 4",
        "",
        "0x10",
        "NaN",
        "170141183460469231731687303715884105728",
        &"9".repeat(100_000),
    ] {
        let mut rows = vec![row(b, [0, 0, 4, 0, 0])];
        rows[0].3 = bad.to_string();
        let e = try_rows(&rows).unwrap_err();
        assert!(
            e.to_string().contains("canonical decimal"),
            "{bad:.20}: {e}"
        );
    }
    // Below the gate (εh 1): no server keeps moments there, so a state
    // that carries them is refused.
    let grid = KdeGrid::square(10_000.0, 11).unwrap();
    let low_eps = 1.0 / grid.bandwidth();
    let low = server(&set, low_eps);
    let lc = low.counts().unwrap();
    assert!(lc.moments().is_none(), "below the gate: none allocated");
    let spec = lc.spec().clone();
    let mut forged = BinnedCounts::new(spec.clone());
    forged.add(&[5000.0, 5000.0]).unwrap();
    let forged = BinnedCounts::from_sparse(
        spec,
        &forged.sparse_counts(),
        0,
        forged.sparse_moments().as_deref(),
    )
    .unwrap();
    let e = MapAggregator::restore_binned(
        set,
        MapMechanism::APriori,
        low_eps,
        geopriv::map::DEFAULT_MAX_BINS,
        Some(forged),
        Vec::new(),
        1,
    )
    .unwrap_err();
    assert!(e.to_string().contains("does not read them"), "{e}");
}

/// The bound checks are exact at their edges: one location at the
/// extreme offset (±2^31 on both axes) passes, one unit more does not;
/// 2^64 − 1 locations at the extremes cannot overflow the checks.
#[test]
fn the_moment_bounds_are_exact_at_their_edges() {
    let h = 1i128 << 31;
    assert!(check_bin_moments(&[h, -h, h * h, h * h, -h * h], 1, 2).is_ok());
    assert!(check_bin_moments(&[h, -h, h * h, h * h, -h * h - 1], 1, 2).is_err());
    assert!(check_bin_moments(&[h + 1, 0, h * h, 0, 0], 1, 2).is_err());
    let c = u64::MAX;
    let big = c as i128 * h;
    assert!(check_bin_moments(&[big, big, big * h, big * h, big * h], c, 2).is_ok());
    assert!(check_bin_moments(&[big, big, big * h, big * h, big * h + 1], c, 2).is_err());
    assert!(check_bin_moments(&[0, 1, 0, 1, 0], 1, 1).is_err()); // 1-D
    assert!(check_bin_moments(&[0; 5], 0, 2).is_ok());
}

/// BENCHMARKS.md "Branch state25": the size of a kernel map's partial
/// state with and without the moments, and the time to restore and merge
/// three shards' states, for the reports in `$GEOPRIV_STATE25_REPORTS`
/// (`map release` JSON lines over a 20 km box, grid 61, at εh 1000).
/// `GEOPRIV_STATE25_REPORTS=/tmp/ms3-rep-1000.jsonl cargo test --profile
/// test -p geopriv --test partial_state_moments -- --ignored --nocapture`
#[test]
#[ignore]
fn state_size_and_merge_time() {
    let Ok(path) = std::env::var("GEOPRIV_STATE25_REPORTS") else {
        return;
    };
    let grid = KdeGrid::square(20_000.0, 61).unwrap();
    let text = std::fs::read_to_string(path).unwrap();
    let mut eps = 0.0;
    let mut shards: Vec<BinnedCounts> = Vec::new();
    for (i, line) in text.lines().enumerate() {
        let v: serde_json::Value = serde_json::from_str(line).unwrap();
        if shards.is_empty() {
            eps = v["epsilon"].as_f64().unwrap();
            let spec = geopriv::map::BinSpec::for_estimation(&grid, eps, 1024).unwrap();
            shards = (0..3).map(|_| BinnedCounts::new(spec.clone())).collect();
        }
        let x = [
            v["location"][0].as_f64().unwrap(),
            v["location"][1].as_f64().unwrap(),
        ];
        shards[i % 3].add(&x).unwrap();
    }
    let spec = shards[0].spec().clone();
    let n: u64 = shards.iter().map(|s| s.total()).sum();
    let json = |c: &BinnedCounts, m: bool| {
        serde_json::json!({
            "bins": c.sparse_counts(),
            "outside": c.outside(),
            "moments": if m { c.sparse_moments() } else { None },
        })
        .to_string()
    };
    let with: Vec<String> = shards.iter().map(|s| json(s, true)).collect();
    let without: Vec<String> = shards.iter().map(|s| json(s, false)).collect();
    let t = std::time::Instant::now();
    let mut merged: Option<BinnedCounts> = None;
    for s in &with {
        let v: serde_json::Value = serde_json::from_str(s).unwrap();
        let bins: Vec<(u64, u64)> = serde_json::from_value(v["bins"].clone()).unwrap();
        let rows: Vec<MomentRow> = serde_json::from_value(v["moments"].clone()).unwrap();
        let c = BinnedCounts::from_sparse(
            spec.clone(),
            &bins,
            v["outside"].as_u64().unwrap(),
            Some(&rows),
        )
        .unwrap();
        match merged.as_mut() {
            Some(m) => m.merge(&c).unwrap(),
            None => merged = Some(c),
        }
    }
    let secs = t.elapsed().as_secs_f64();
    let merged = merged.unwrap();
    println!(
        "n {n}, εh {:.1}, bins {}, non-empty bins (merged) {}, per-shard state bytes with moments {:?}, without {:?}; parse + restore + merge of 3 with moments {secs:.3} s",
        eps * grid.bandwidth(),
        spec.len(),
        merged.counts().iter().filter(|&&c| c > 0).count(),
        with.iter().map(|s| s.len()).collect::<Vec<_>>(),
        without.iter().map(|s| s.len()).collect::<Vec<_>>(),
    );
    assert!(merged.moments().is_some());
}
