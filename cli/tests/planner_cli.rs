//! The planner's pick through `geopriv map sweep` on the city at small grids
//! (issue 19 item 15: the pick within 1.5x of the best measured map).

mod common;
use common::geopriv;

/// The sweep's one row for (`grid`, `n`, `eh`, `seed`) on `population`
/// (`city`, `sprawl`, …): its cells split on `|`, trimmed.
fn sweep_row(grid: &str, n: &str, eh: &str, seed: &str, population: &str) -> Vec<String> {
    let out = geopriv(
        &[
            "map",
            "sweep",
            "--grid",
            grid,
            "--n",
            n,
            "--eps-h",
            eh,
            "--seed",
            seed,
            "--population",
            population,
        ],
        b"",
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    let row = text
        .lines()
        .find(|l| l.starts_with(&format!("| {n} |")))
        .unwrap_or_else(|| panic!("no row for n = {n}: {text}"));
    row.split('|').map(|c| c.trim().to_string()).collect()
}

/// Asserts a sweep row's planner/best column (the pick's measured ASE over
/// the best measured row's) is at most 1.5 (issue 19 item 15).
fn assert_pick_within_1_5x(row: &[String], what: &str) {
    // | n | εh | ε | plain | debiased | best λ | EM | planner | pick |
    // best other | planner/plain | planner/best | seconds |
    let ratio: f64 = row[12].parse().unwrap();
    assert!(
        ratio <= 1.5,
        "{what}: pick {} at {ratio}x the best: {row:?}",
        row[9]
    );
}

/// EM's floor against the unbiased map less the scatter of that map's mean
/// squared noise (branch lead18, docs/MATH.md §9.4 addendum "lead18"). On
/// a 6 × 6 grid at εh 0.3, n = 10³, the unbiased map's noise drew about
/// twice its variance, the floor read that excess as EM's bias, ranked EM
/// at 36x its measured ASE behind λ = 1, and λ = 1 was picked at 75.7x
/// (seed 2) and 53.9x (seed 8) the best measured map (EM) on main
/// 05b497d. With the scatter subtracted EM is not ranked and is picked.
#[test]
fn a_chance_high_unbiased_map_does_not_rank_em_on_a_6_by_6_grid() {
    for seed in ["2", "8"] {
        let row = sweep_row("6", "1000", "0.3", seed, "city");
        assert_pick_within_1_5x(&row, &format!("seed {seed}"));
    }
}

/// The same floor on coarse grids at n 10⁶, εh 0.3 (docs/ATTACK-21.md F1):
/// less the plain map's whole `se_ranked` (its own blur's term included)
/// and gated again at 0.5·v₁, it vanished and EM was picked at 3.61x (city,
/// grid 11, seed 41) and 4.10x (sprawl, grid 9, seed 42); with the noise
/// term alone, the raw floor gated as before, λ = 1 at 1.00x in both.
#[test]
fn em_keeps_its_floor_against_the_unbiased_map_at_a_million_reports() {
    for (grid, seed, population) in [("11", "41", "city"), ("9", "42", "sprawl")] {
        let row = sweep_row(grid, "1000000", "0.3", seed, population);
        assert_pick_within_1_5x(&row, &format!("{population} grid {grid}"));
    }
}

/// The kernel maps' floor against EM reads EM's bias² no lower than the
/// coincident devices' term and the SE share give it (branch lead19,
/// docs/ATTACK-21.md F5, docs/MATH.md §9.4 addendum "lead19"): with the
/// moments' lower reading grid26 put there, every kernel map's floor rose
/// 8–15x and EM was picked at 34.5x the best map (neighbourhoods, grid 7,
/// n 10⁶, εh 100, seed 41; λ = 1's ranked prediction 10.1x its ASE) and
/// λ = 0 at 2.56x (coast, grid 19). And EM's rounding floor bounds its
/// interval's ends even where EM's point lies above it: on sprawl, grid 7,
/// seed 42, the interval's top sat 3.7x below EM's measured ASE and EM was
/// picked at 2.32x the best row (vector Laplace, now picked at 1.00x).
#[test]
fn a_low_em_rounding_reading_does_not_charge_the_kernel_maps_at_eps_h_100() {
    for (grid, seed, population) in [
        ("7", "41", "neighbourhoods"),
        ("19", "41", "coast"),
        ("7", "42", "sprawl"),
    ] {
        let row = sweep_row(grid, "1000000", "100", seed, population);
        assert_pick_within_1_5x(&row, &format!("{population} grid {grid} seed {seed}"));
    }
}
