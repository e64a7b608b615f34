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
        // | n | εh | ε | plain | debiased | best λ | EM | planner | pick |
        // best other | planner/plain | planner/best | seconds |
        let ratio: f64 = row[12].parse().unwrap();
        assert!(
            ratio <= 1.5,
            "seed {seed}: pick {} at {ratio}x the best: {row:?}",
            row[9]
        );
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
        let ratio: f64 = row[12].parse().unwrap();
        assert!(
            ratio <= 1.5,
            "{population} grid {grid}: pick {} at {ratio}x",
            row[9]
        );
    }
}
