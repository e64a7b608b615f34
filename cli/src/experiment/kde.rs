//! `geopriv experiment kde` and `geopriv demo`: Gaussian kernel density
//! maps of user locations (docs/MATH.md §7, §9).
//!
//! **Default: every mechanism at the same per-device ε** (docs/MATH.md §9,
//! issue 11). A K × K grid of kernel queries covers the data's bounding
//! box (h = one grid-cell diagonal). Each device spends the per-device
//! total ε on the whole map, whatever the mechanism: per-cell PolyPlace or
//! global Laplace at ε/m, vector global Laplace, sampled k of m, or one
//! noisy location (noise a priori) mapped plainly, debiased or partially
//! debiased (see `maps.rs`). The sweep covers (n, ε) over the bundled
//! airports and the synthetic city, n up to 10^6 (`--large-n` for more);
//! every row prints its per-device total and the planner's pick.
//!
//! **`--per-query-paper`: the paper's experiment.** Every device answers
//! every grid point at ε *each*: for each t it releases a privatized
//! f_t(x) = exp(-||x - t||²/2h²); the server averages the n reports of each
//! grid point; ASE = mean over the grid of (estimate - non-private KDE)².
//! A device then spends m·ε (m = K² cells) by sequential composition, and
//! the table says so in a per-device column (global Laplace: L1/L·ε by the
//! certified ℓ1 bound of the query set; noise a priori: ε, see below).
//!
//! Noise a priori is run the way a device would run it: one planar-Laplace
//! noisy location per device, reused for every grid point (the server could
//! equally compute the KDE of the noisy locations). For a single grid
//! point this has exactly the same distribution as a fresh noisy location
//! per grid point, so its ASE has the same expectation; it is also K² times
//! cheaper in noise draws, and is the natural deployment (one noisy location
//! is ε-GP for *all* grid points together).

use super::data::{airports, Region, SyntheticCity};
use super::error::{ExperimentError, Result};
use super::grid::Grid;
use super::maps::{self, device_sums, MapCell, Obtained, Setting, ROWS};
use super::mechanisms::{build_all, Contender, MechParams};
use super::plot::{self, HeatPanel};
use super::{
    fmt_count, fmt_eps, parse_count, parse_epsilon, print_paths, rng_for, run_cells, write_outcome,
    CommonArgs, Outcome, PerDevice, Record, SweepArgs, SweepDefaults,
};
use clap::Args;
use geopriv::{GaussianKde, Query};
use rand::Rng;
use rayon::prelude::*;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::time::Instant;

/// Where the locations come from.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Dataset {
    /// The bundled US airports (real data, examples/data/airports.csv).
    Airports,
    /// The synthetic city (any n).
    City,
    /// Constructed: 20 anisotropic clusters, a corridor, 25% background (30 km).
    Neighbourhoods,
    /// Constructed: clusters and corridors on land, half the square sea (30 km).
    Coast,
    /// Constructed: 60 small clusters, three corridors, 40% background (30 km).
    Sprawl,
}

/// Options of `geopriv experiment kde`.
///
/// Default (equal per-device ε): the airports (3,069 in the contiguous
/// US; n ∈ {N/4, N/2, N}) and the synthetic city (n ∈ {10^3, 10^4, 10^5,
/// 10^6}) on a 31 × 31 grid, at per-device totals εh ∈ {0.3, 1, 10} (ε per
/// metre = εh / h), every mechanism of `maps.rs`. Per-cell mechanisms are
/// run up to `--max-releases` n·m releases per cell and predicted beyond.
///
/// `--per-query-paper` (the paper's per-query experiment): one data set
/// [default: airports]; n ∈ {N/4, N/2, N} at ε = 1/1000 per metre; ε ∈
/// {1/1000, 1e-4, 1e-5, 1e-6} per metre at n = N (ε per query: each device
/// spends m·ε). With `--dataset city`: n ∈ {2.5k, 5k, 10k}, ε ∈ {1/250,
/// 1/1000, 1/4000}. `--full` (the paper's setting, implies
/// --per-query-paper; 48 min measured on 2 shared cores): the synthetic
/// city with n = 200,000, a 61 × 61 grid and ε = 1/1000 per metre.
#[derive(Args, Debug, Clone)]
pub struct KdeArgs {
    #[command(flatten)]
    pub common: CommonArgs,
    /// Data sets, comma-separated [default: airports,city; with
    /// --per-query-paper: airports, or city with --full].
    #[arg(long, value_enum, value_delimiter = ',')]
    pub dataset: Option<Vec<Dataset>>,
    /// A CSV with latitude/longitude columns to use instead of the bundled
    /// airports.
    #[arg(long)]
    pub csv: Option<PathBuf>,
    /// Which airports (or CSV rows) to keep.
    #[arg(long, value_enum, default_value = "conus")]
    pub region: Region,
    #[command(flatten)]
    pub sweep: SweepArgs,
    /// Per-device totals as εh (ε per metre times the bandwidth), used
    /// when --epsilon is not given (equal per-device ε mode).
    #[arg(long, value_delimiter = ',', default_value = "0.3,1,10")]
    pub eps_h: Vec<f64>,
    /// Run the paper's per-query experiment instead (ε per query; each
    /// row labelled with its true per-device cost m·ε); implied by --full.
    #[arg(long)]
    pub per_query_paper: bool,
    /// Allow n above 10^6 (memory and time grow linearly).
    #[arg(long)]
    pub large_n: bool,
    /// Run the per-cell mechanisms (n·m releases) only up to this many
    /// releases per cell; above it their ASE is the planner's prediction
    /// (exact for the Laplace rows, an upper bound for PolyPlace), marked.
    #[arg(long, value_parser = parse_count, default_value = "5M")]
    pub max_releases: usize,
    /// Bins per axis (at most) of the noise-a-priori server map (fewer:
    /// faster, with a larger discretisation error; no bound is stated).
    #[arg(long, default_value_t = maps::MAX_BINS)]
    pub map_bins: usize,
    /// Grid points per axis [default: 31; full: 61].
    #[arg(long)]
    pub grid: Option<usize>,
    /// Bandwidth h in metres [default: one grid-cell diagonal].
    #[arg(long)]
    pub bandwidth: Option<f64>,
    /// LDP reference: ε_LDP = ε × this many metres.
    #[arg(long, default_value_t = 1000.0)]
    pub ldp_scale: f64,
}

/// `471 m` or `242.6 km`.
fn fmt_metres(m: f64) -> String {
    if m >= 10_000.0 {
        format!("{:.1} km", m / 1000.0)
    } else {
        format!("{m:.0} m")
    }
}

fn bounding_box(points: &[[f64; 2]]) -> [f64; 4] {
    let mut b = [
        f64::INFINITY,
        f64::NEG_INFINITY,
        f64::INFINITY,
        f64::NEG_INFINITY,
    ];
    for p in points {
        b[0] = b[0].min(p[0]);
        b[1] = b[1].max(p[0]);
        b[2] = b[2].min(p[1]);
        b[3] = b[3].max(p[1]);
    }
    b
}

/// The resolved data source.
enum Source {
    Fixed(Vec<[f64; 2]>, String),
    City(SyntheticCity),
    Built(super::populations::Structured, super::populations::Preset),
}

impl Source {
    fn bbox(&self) -> [f64; 4] {
        match self {
            Source::Fixed(p, _) => bounding_box(p),
            Source::City(_) => [0.0, SyntheticCity::SIDE, 0.0, SyntheticCity::SIDE],
            Source::Built(..) => {
                let s = super::populations::Structured::SIDE;
                [0.0, s, 0.0, s]
            }
        }
    }

    /// n users: a seeded random subset of the table, or n fresh residents.
    fn users(&self, n: usize, seed: u64) -> Vec<[f64; 2]> {
        match self {
            Source::Fixed(p, _) => {
                if n >= p.len() {
                    return p.clone();
                }
                let mut idx: Vec<usize> = (0..p.len()).collect();
                let mut rng = rng_for(seed, &[31, n as u64]);
                for i in 0..n {
                    let j = rng.random_range(i..idx.len());
                    idx.swap(i, j);
                }
                idx[..n].iter().map(|&i| p[i]).collect()
            }
            Source::City(city) => {
                let chunk = 65_536;
                (0..n.div_ceil(chunk))
                    .into_par_iter()
                    .flat_map_iter(|c| {
                        let mut rng = rng_for(seed, &[32, n as u64, c as u64]);
                        let len = chunk.min(n - c * chunk);
                        (0..len).map(|_| city.sample(&mut rng)).collect::<Vec<_>>()
                    })
                    .collect()
            }
            Source::Built(pop, _) => {
                let chunk = 65_536;
                (0..n.div_ceil(chunk))
                    .into_par_iter()
                    .flat_map_iter(|c| {
                        let mut rng = rng_for(seed, &[33, n as u64, c as u64]);
                        let len = chunk.min(n - c * chunk);
                        (0..len).map(|_| pop.sample(&mut rng)).collect::<Vec<_>>()
                    })
                    .collect()
            }
        }
    }

    fn available(&self) -> Option<usize> {
        match self {
            Source::Fixed(p, _) => Some(p.len()),
            Source::City(_) | Source::Built(..) => None,
        }
    }

    fn describe(&self) -> String {
        match self {
            Source::Fixed(p, what) => format!("{what}: {} locations", p.len()),
            Source::City(c) => format!(
                "synthetic city, {} km × {} km, {} Gaussian neighbourhoods + {:.0}% uniform background (seeded)",
                SyntheticCity::SIDE / 1000.0,
                SyntheticCity::SIDE / 1000.0,
                c.neighbourhoods.len(),
                c.background * 100.0
            ),
            Source::Built(_, p) => format!(
                "constructed population {p:?} (src: cli/src/experiment/populations.rs), {} km square (seeded)",
                super::populations::Structured::SIDE / 1000.0
            ),
        }
    }
}

fn load_source(args: &KdeArgs, dataset: Dataset) -> Result<Source> {
    Ok(match dataset {
        Dataset::City => Source::City(SyntheticCity::standard()),
        Dataset::Neighbourhoods | Dataset::Coast | Dataset::Sprawl => {
            use super::populations::{Preset, Structured};
            let p = match dataset {
                Dataset::Neighbourhoods => Preset::Neighbourhoods,
                Dataset::Coast => Preset::Coast,
                _ => Preset::Sprawl,
            };
            Source::Built(Structured::preset(p), p)
        }
        Dataset::Airports => {
            let (pts, what) = match &args.csv {
                Some(path) => {
                    let text =
                        std::fs::read_to_string(path).map_err(ExperimentError::io(path))?;
                    (airports(Some(&text), args.region)?, path.display().to_string())
                }
                None => (
                    airports(None, args.region)?,
                    format!(
                        "US airports (examples/data/airports.csv, vega_datasets 0.9.0; public-domain data from ourairports.com), region {:?}",
                        args.region
                    ),
                ),
            };
            if pts.len() < 2 {
                return Err(ExperimentError::Data(
                    "fewer than 2 locations in the data".into(),
                ));
            }
            Source::Fixed(pts, what)
        }
    })
}

/// The maps of one ε at the reference n: the true KDE, and each
/// mechanism's estimate with its ASE.
pub struct Maps {
    /// Budget per metre.
    pub epsilon: f64,
    /// The non-private KDE at the grid points.
    pub truth: Vec<f64>,
    /// (mechanism, estimate, ASE).
    pub estimates: Vec<(Contender, Vec<f64>, f64)>,
}

/// Everything a KDE run produced.
pub struct KdeRun {
    /// Errors, settings, sweep.
    pub outcome: Outcome,
    /// The grid.
    pub grid: Grid,
    /// Per ε of the ε sweep, at the reference n.
    pub maps: Vec<Maps>,
    /// The kernel bandwidth h, metres.
    pub bandwidth: f64,
}

/// Run the KDE experiment (equal per-device ε, or the paper's per-query
/// run with `--per-query-paper`), write outputs, print paths.
pub fn run(args: KdeArgs) -> Result<()> {
    let dir = args.common.out_dir("kde")?;
    // `--full` is the paper's setting, hence the per-query run.
    let paths = if args.per_query_paper || args.common.full {
        let result = compute(&args, false)?;
        write_kde(&result, &dir, !args.common.no_plots)?
    } else {
        let run = equal_budget(&EqualPlan::from_args(&args)?, false)?;
        write_equal(&run, &dir, !args.common.no_plots)?
    };
    print_paths(&paths);
    Ok(())
}

fn write_kde(result: &KdeRun, dir: &Path, plots: bool) -> Result<Vec<PathBuf>> {
    let mut paths = write_outcome(&result.outcome, dir, plots)?;
    if plots {
        for Maps {
            epsilon: eps,
            truth,
            estimates: ests,
        } in &result.maps
        {
            let vmax = truth.iter().cloned().fold(0.0, f64::max);
            let mut panels = vec![HeatPanel {
                title: "true (non-private) KDE".into(),
                values: truth.clone(),
            }];
            for (m, v, ase) in ests {
                panels.push(HeatPanel {
                    title: format!("{}  ASE {:.2e}", m.label(), ase),
                    values: v.clone(),
                });
            }
            let name = format!("heatmap_eps_{}.png", fmt_eps(*eps).replace('/', "_"));
            let path = dir.join(name);
            plot::heatmaps(
                &path,
                &format!(
                    "KDE, n = {}, ε = {} per metre, h = {}, {} × {} grid",
                    fmt_count(result.outcome.sweep.ref_n as f64),
                    fmt_eps(*eps),
                    fmt_metres(result.bandwidth),
                    result.grid.k,
                    result.grid.k
                ),
                &result.grid,
                &panels,
                vmax,
            )?;
            paths.push(path);
        }
    }
    Ok(paths)
}

/// Compute every cell; `narrate` prints the device/server story (demo).
pub fn compute(args: &KdeArgs, narrate: bool) -> Result<KdeRun> {
    args.common.init_threads();
    let full = args.common.full;
    let dataset = match args.dataset.as_deref() {
        Some([d]) => *d,
        Some(_) => {
            return Err(ExperimentError::Data(
                "--per-query-paper runs one data set at a time".into(),
            ))
        }
        None if full => Dataset::City,
        None => Dataset::Airports,
    };
    let source = load_source(args, dataset)?;
    let k = args.grid.unwrap_or(if full { 61 } else { 31 });
    let grid = Grid::new(k, source.bbox())?;
    let h = args.bandwidth.unwrap_or_else(|| grid.diagonal());
    let (default_ns, default_eps): (Vec<usize>, Vec<f64>) = match (dataset, source.available()) {
        (Dataset::Airports, Some(all)) => (
            vec![all.div_ceil(4), all.div_ceil(2), all],
            vec![1e-3, 1e-4, 1e-5, 1e-6],
        ),
        _ => (
            vec![2_500, 5_000, 10_000],
            vec![1.0 / 250.0, 1.0 / 1000.0, 1.0 / 4000.0],
        ),
    };
    let mut sweep = args.sweep.resolve(
        full,
        SweepDefaults {
            ns: (&default_ns, &[200_000]),
            epsilons: (&default_eps, &[1e-3]),
            ref_eps: 1e-3,
        },
    );
    if let Some(all) = source.available() {
        // A fixed table cannot give more users than it has.
        for n in &mut sweep.ns {
            *n = (*n).min(all);
        }
        sweep.ns.dedup();
        sweep.ref_n = sweep.ref_n.min(all);
    }
    // The non-private KDE is the truth itself: it is the left panel of the
    // heat maps, not a row of the table.
    let mechs: Vec<Contender> = args
        .common
        .mechanisms()
        .into_iter()
        .filter(|&m| m != Contender::NonPrivate)
        .collect();
    let params = MechParams {
        delta: args.common.delta,
        ldp_scale: args.ldp_scale,
    };
    let queries: Vec<GaussianKde> = grid
        .centers
        .iter()
        .map(|c| GaussianKde::new(c, h))
        .collect::<Result<_, _>>()?;
    let seed = args.common.seed;
    if narrate {
        outln!("data: {}", source.describe());
        outln!(
            "query grid: {k} × {k} = {} points over {:.0} km × {:.0} km (Web Mercator), bandwidth h = {:.1} km (one cell diagonal)",
            queries.len(),
            (grid.bbox[1] - grid.bbox[0]) / 1000.0,
            (grid.bbox[3] - grid.bbox[2]) / 1000.0,
            h / 1000.0
        );
        outln!(
            "devices: each of n devices privatizes its value at every grid point (each release ε-GP, ε per metre) and uploads only those {} numbers",
            queries.len()
        );
        outln!("server: averages the n reports of each grid point and compares with the non-private KDE");
    }
    let mut maps = Vec::new();
    let group = String::new();
    let (records, seconds) = run_cells("kde", &sweep, |n, eps| {
        let users = source.users(n, seed);
        let t0 = Instant::now();
        let truth: Vec<f64> = queries
            .par_iter()
            .map(|q| {
                let mut s = 0.0;
                for x in &users {
                    s += q.value(x)?;
                }
                Ok(s / n as f64)
            })
            .collect::<Result<_, geopriv::Error>>()?;
        if narrate {
            outln!(
                "n = {}, ε = 1/{:.0} per metre (ε h = {:.2}):",
                fmt_count(n as f64),
                1.0 / eps,
                eps * h
            );
            outln!(
                "  (per-query mechanisms below: every device releases all {} cells at ε each, so it spends {} × ε per metre by sequential composition)",
                queries.len(),
                queries.len()
            );
        } else {
            eprintln!(
                "kde: n = {}, ε = {}: true KDE in {:.1} s",
                fmt_count(n as f64),
                fmt_eps(eps),
                t0.elapsed().as_secs_f64()
            );
        }
        let releases = build_all(&mechs, eps, params)?;
        let mut records = Vec::new();
        let mut ests = Vec::new();
        for r in &releases {
            let t1 = Instant::now();
            let sums = device_sums(r, &grid, &queries, &users, seed, n, eps)?;
            let est: Vec<f64> = sums.iter().map(|s| s / n as f64).collect();
            let ase = grid.ase(&est, &truth);
            let line = format!(
                "  {:<22} ASE {:.3e}   ({} releases in {:.1} s)",
                r.kind.label(),
                ase,
                fmt_count((n * queries.len()) as f64),
                t1.elapsed().as_secs_f64()
            );
            if narrate {
                outln!("{line}");
            } else {
                eprintln!("{line}");
            }
            records.push(Record {
                group: group.clone(),
                n,
                epsilon: eps,
                mech: r.kind,
                error: ase,
                noise_error: ase,
                expected_noise: None,
            });
            ests.push((r.kind, est, ase));
        }
        if n == sweep.ref_n && sweep.epsilons.contains(&eps) {
            maps.push(Maps {
                epsilon: eps,
                truth,
                estimates: ests,
            });
        }
        Ok((records, format!("{} mechanisms", releases.len())))
    })?;
    let m = queries.len();
    let tight_l1 = geopriv::map::KdeGrid::new_2d(grid.bbox, [k, k], h)?
        .l1()
        .bound
        * h
        / (-0.5f64).exp();
    let settings = vec![
        format!("data: {}", source.describe()),
        "locations in metres (Web Mercator for real data)".into(),
        format!(
            "{k} × {k} grid of query points over the bounding box ({:.1} km × {:.1} km); Gaussian kernel exp(-||x - t||²/2h²), h = {:.1} m",
            (grid.bbox[1] - grid.bbox[0]) / 1000.0,
            (grid.bbox[3] - grid.bbox[2]) / 1000.0,
            h
        ),
        format!(
            "n sweep {} at ε = {} per metre; ε sweep {} at n = {}",
            sweep.ns.iter().map(|&n| fmt_count(n as f64)).collect::<Vec<_>>().join(", "),
            fmt_eps(sweep.ref_eps),
            sweep.epsilons.iter().map(|&e| fmt_eps(e)).collect::<Vec<_>>().join(", "),
            fmt_count(sweep.ref_n as f64)
        ),
        "ASE: squared error of the estimated KDE (mean report) against the non-private KDE of the same users, averaged over the grid".into(),
        format!(
            "every device answers all {m} grid points at ε each (the paper's per-query experiment), so it spends m·ε = {m}ε per metre by sequential composition (the per-device column); counted tightly, global Laplace spends L1/L·ε = {:.1}ε (certified ℓ1 bound of the query set, L = e^(-1/2)/h), and noise a priori ε (one planar-Laplace location per device, reused for all grid points); `geopriv experiment kde` without --per-query-paper compares every mechanism at the same per-device ε",
            tight_l1
        ),
        format!(
            "approximate-GP Laplace: δ = {:e}; local DP: ε_LDP = ε × {} m",
            params.delta, params.ldp_scale
        ),
        format!("seed {seed}"),
    ];
    Ok(KdeRun {
        outcome: Outcome {
            name: format!(
                "Gaussian KDE on a {k} × {k} grid ({})",
                dataset_name(dataset)
            ),
            metric: "ASE",
            eps_unit: "per metre",
            settings,
            mechs,
            groups: vec![group],
            sweep,
            records,
            seconds,
            per_device: Some(PerDevice {
                queries: m,
                heading: "per device (m·ε, sequential composition)",
            }),
        },
        grid,
        maps,
        bandwidth: h,
    })
}

/// One data set of an equal-budget sweep.
pub struct EqualSet {
    dataset: Dataset,
    source: Source,
    grid: Grid,
    bandwidth: f64,
    ns: Vec<usize>,
    epsilons: Vec<f64>,
}

/// What an equal-budget run measures: data sets with their (n, ε) lists.
pub struct EqualPlan {
    sets: Vec<EqualSet>,
    seed: u64,
    max_releases: u64,
    max_bins: usize,
    plots: bool,
}

impl EqualPlan {
    /// The sweep of `geopriv experiment kde` (see [`KdeArgs`]).
    fn from_args(args: &KdeArgs) -> Result<Self> {
        args.common.init_threads();
        let datasets = args
            .dataset
            .clone()
            .unwrap_or_else(|| vec![Dataset::Airports, Dataset::City]);
        let mut sets = Vec::new();
        for d in datasets {
            let source = load_source(args, d)?;
            let grid = Grid::new(args.grid.unwrap_or(31), source.bbox())?;
            let bandwidth = args.bandwidth.unwrap_or_else(|| grid.diagonal());
            let mut ns = args
                .sweep
                .n
                .clone()
                .unwrap_or_else(|| match source.available() {
                    Some(all) => vec![all.div_ceil(4), all.div_ceil(2), all],
                    None => vec![1_000, 10_000, 100_000, 1_000_000],
                });
            if let Some(all) = source.available() {
                for n in &mut ns {
                    *n = (*n).min(all);
                }
            }
            ns.dedup();
            if let Some(&big) = ns.iter().find(|&&n| n > 1_000_000) {
                if !args.large_n {
                    return Err(ExperimentError::parse(
                        &big.to_string(),
                        "n above 10^6 needs --large-n",
                    ));
                }
            }
            let epsilons = args
                .sweep
                .epsilon
                .clone()
                .unwrap_or_else(|| args.eps_h.iter().map(|e| e / bandwidth).collect());
            sets.push(EqualSet {
                dataset: d,
                source,
                grid,
                bandwidth,
                ns,
                epsilons,
            });
        }
        Ok(Self {
            sets,
            seed: args.common.seed,
            max_releases: args.max_releases as u64,
            max_bins: args.map_bins,
            plots: !args.common.no_plots,
        })
    }
}

/// The results of one data set of an equal-budget run.
pub struct EqualSetRun {
    /// Data set.
    pub dataset: Dataset,
    /// Description of the data.
    pub describe: String,
    /// The grid.
    pub grid: Grid,
    /// Bandwidth h.
    pub bandwidth: f64,
    /// Every (n, cell), in run order.
    pub cells: Vec<(usize, MapCell)>,
    /// At the largest n: the true map (for the heat maps).
    pub truth: Vec<f64>,
    /// The largest n.
    pub max_n: usize,
}

/// Everything an equal-budget run produced.
pub struct EqualRun {
    /// Per data set.
    pub sets: Vec<EqualSetRun>,
    /// Wall time, seconds.
    pub seconds: f64,
    /// The seed.
    pub seed: u64,
    /// The release budget of measured per-cell rows.
    pub max_releases: u64,
}

/// The lines printing one cell (every row with its per-device total).
fn cell_lines(n: usize, h: f64, cell: &MapCell) -> Vec<String> {
    let mut out = vec![format!(
        "n = {}, per-device total ε = {:.2e} per metre (εh = {:.3}); every row spends exactly this per device:",
        fmt_count(n as f64),
        cell.epsilon,
        cell.epsilon * h
    )];
    for (i, r) in cell.rows.iter().enumerate() {
        out.push(format!(
            "  {:<26} ASE {}{}   per-device total {:.2e} per metre: {}",
            r.label,
            fmt_ase(r.ase, r.obtained),
            if i == cell.pick {
                "   <- planner's pick"
            } else {
                ""
            },
            cell.epsilon,
            r.accounting
        ));
    }
    out.push(format!("  planner: {}", cell.plan_line));
    out
}

/// `1.234e-4` measured, `(1.234e-4)` predicted, `<=1.234e-4` bound.
fn fmt_ase(v: f64, how: Obtained) -> String {
    match how {
        Obtained::Measured => format!("{v:.3e}"),
        Obtained::Predicted => format!("({v:.3e})"),
        Obtained::UpperBound => format!("<={v:.3e}"),
    }
}

/// Run every (data set, n, ε) cell at equal per-device ε; `narrate`
/// prints the cells on stdout (the demo), else on stderr.
pub fn equal_budget(plan: &EqualPlan, narrate: bool) -> Result<EqualRun> {
    let start = Instant::now();
    let mut sets = Vec::new();
    for set in &plan.sets {
        let max_n = set.ns.iter().copied().max().unwrap_or(0);
        let mut cells = Vec::new();
        let mut truth_at_max = Vec::new();
        for &n in &set.ns {
            let users = set.source.users(n, plan.seed);
            let truth = maps::true_map(&set.grid, set.bandwidth, &users)?;
            for &eps in &set.epsilons {
                let t0 = Instant::now();
                let setting = Setting {
                    grid: &set.grid,
                    bandwidth: set.bandwidth,
                    users: &users,
                    truth: &truth,
                    seed: plan.seed,
                    max_releases: plan.max_releases,
                    keep_maps: plan.plots && n == max_n,
                    max_bins: plan.max_bins,
                };
                let cell = maps::measure(&setting, eps)?;
                for line in cell_lines(n, set.bandwidth, &cell) {
                    if narrate {
                        outln!("{line}");
                    } else {
                        eprintln!("{line}");
                    }
                }
                eprintln!(
                    "kde ({}): n = {}, ε = {:.2e}: {:.1} s",
                    dataset_name(set.dataset),
                    fmt_count(n as f64),
                    eps,
                    t0.elapsed().as_secs_f64()
                );
                cells.push((n, cell));
            }
            if n == max_n {
                truth_at_max = truth;
            }
        }
        sets.push(EqualSetRun {
            dataset: set.dataset,
            describe: set.source.describe(),
            grid: set.grid.clone(),
            bandwidth: set.bandwidth,
            cells,
            truth: truth_at_max,
            max_n,
        });
    }
    Ok(EqualRun {
        sets,
        seconds: start.elapsed().as_secs_f64(),
        seed: plan.seed,
        max_releases: plan.max_releases,
    })
}

fn dataset_name(d: Dataset) -> &'static str {
    match d {
        Dataset::Airports => "airports",
        Dataset::City => "synthetic city",
        Dataset::Neighbourhoods => "neighbourhoods",
        Dataset::Coast => "coast",
        Dataset::Sprawl => "sprawl",
    }
}

/// results.md of an equal-budget run (no wall time inside the tables).
pub fn equal_markdown(run: &EqualRun) -> String {
    let mut s = String::new();
    let _ = writeln!(s, "# Gaussian KDE maps at equal per-device ε\n");
    for set in &run.sets {
        let _ = writeln!(
            s,
            "- {}: {}; {k} × {k} grid over the bounding box, h = {:.1} m (one cell diagonal), m = {} cells",
            dataset_name(set.dataset),
            set.describe,
            set.bandwidth,
            set.grid.len(),
            k = set.grid.k
        );
    }
    let _ = writeln!(
        s,
        "- every row of a cell spends the same per-device total ε (column 3) on the whole map; the accounting of each mechanism is listed below the table\n- ASE against the true (non-private) map of the same devices, one run; `(x)`: not run (more than {} per-cell releases), the planner's exact expected ASE; `<=x`: the planner's upper bound; **bold**: the planner's pick\n- seed {}",
        fmt_count(run.max_releases as f64),
        run.seed
    );
    let _ = writeln!(s, "- computed in {:.1} s\n", run.seconds);
    let _ = writeln!(s, "## ASE at equal per-device ε\n");
    let _ = write!(s, "| data | n | per-device total ε (per metre) | εh |");
    for r in ROWS {
        let _ = write!(s, " {r} |");
    }
    let _ = writeln!(s, " planner's pick |");
    let _ = writeln!(s, "|---|---:|---:|---:|{}---|", "---:|".repeat(ROWS.len()));
    for set in &run.sets {
        for (n, cell) in &set.cells {
            let _ = write!(
                s,
                "| {} | {} | {:.3e} | {:.3} |",
                dataset_name(set.dataset),
                fmt_count(*n as f64),
                cell.epsilon,
                cell.epsilon * set.bandwidth
            );
            for (i, r) in cell.rows.iter().enumerate() {
                let v = fmt_ase(r.ase, r.obtained);
                if i == cell.pick {
                    let _ = write!(s, " **{v}** |");
                } else {
                    let _ = write!(s, " {v} |");
                }
            }
            let _ = writeln!(s, " {} |", cell.rows[cell.pick].label);
        }
    }
    let _ = writeln!(s, "\n## Per-device total of each mechanism\n");
    if let Some((_, cell)) = run.sets.first().and_then(|set| set.cells.first()) {
        for r in &cell.rows {
            let _ = writeln!(s, "- {}: {}", r.label, r.accounting);
        }
    }
    s
}

fn write_equal(run: &EqualRun, dir: &Path, plots: bool) -> Result<Vec<PathBuf>> {
    std::fs::create_dir_all(dir).map_err(ExperimentError::io(dir))?;
    let md = dir.join("results.md");
    std::fs::write(&md, equal_markdown(run)).map_err(ExperimentError::io(&md))?;
    let mut paths = vec![md];
    if !plots {
        return Ok(paths);
    }
    for set in &run.sets {
        for (n, cell) in set.cells.iter().filter(|(n, _)| *n == set.max_n) {
            let vmax = set.truth.iter().cloned().fold(0.0, f64::max);
            let mut panels = vec![HeatPanel {
                title: "true (non-private) KDE".into(),
                values: set.truth.clone(),
            }];
            for (i, r) in cell.rows.iter().enumerate() {
                if let Some(v) = &r.estimate {
                    panels.push(HeatPanel {
                        title: format!(
                            "{}{}  ASE {:.2e}",
                            if i == cell.pick { "* planner: " } else { "" },
                            r.label,
                            r.ase
                        ),
                        values: v.clone(),
                    });
                }
            }
            let name = format!(
                "heatmap_{}_eps_{:.0e}.png",
                match set.dataset {
                    Dataset::City => "city",
                    d => dataset_name(d),
                },
                cell.epsilon
            );
            let path = dir.join(name);
            plot::heatmaps(
                &path,
                &format!(
                    "KDE, n = {}, per-device total ε = {:.1e} per metre for every map (εh = {:.2}), h = {}, {} × {} grid",
                    fmt_count(*n as f64),
                    cell.epsilon,
                    cell.epsilon * set.bandwidth,
                    fmt_metres(set.bandwidth),
                    set.grid.k,
                    set.grid.k
                ),
                &set.grid,
                &panels,
                vmax,
            )?;
            paths.push(path);
        }
    }
    Ok(paths)
}

/// Options of `geopriv demo`.
#[derive(Args, Debug, Clone)]
pub struct DemoArgs {
    /// Output directory.
    #[arg(long, default_value = "out/demo")]
    pub out: PathBuf,
    /// Base seed.
    #[arg(long, default_value_t = 20240601)]
    pub seed: u64,
    /// Grid points per axis.
    #[arg(long, default_value_t = 31)]
    pub grid: usize,
    /// Per-device total budgets per metre (with --per-query-paper: ε per
    /// grid query).
    #[arg(long, value_delimiter = ',', value_parser = parse_epsilon,
          default_value = "1e-3,1e-4,1e-5,1e-6")]
    pub epsilon: Vec<f64>,
    /// Mechanisms of the --per-query-paper run.
    #[arg(
        long,
        value_enum,
        value_delimiter = ',',
        default_value = "polyplace,student-t,cauchy,laplace,global-laplace,a-priori,ldp"
    )]
    pub mechanisms: Vec<Contender>,
    /// Worker threads [default: all cores].
    #[arg(long)]
    pub threads: Option<usize>,
    /// The old demo instead: the paper's per-query run (every device
    /// answers each of the m grid points at ε, spending m·ε).
    #[arg(long)]
    pub per_query_paper: bool,
    /// Write into an output directory that already holds files (they are
    /// overwritten); without it such a directory is refused (exit 2).
    #[arg(long)]
    pub force: bool,
}

/// The end-to-end demo: the KDE of the bundled airports, privatized on the
/// devices and aggregated by the server, every mechanism at the same
/// per-device ε; writes the table and the pictures and prints where they
/// are.
pub fn run_demo(args: DemoArgs) -> Result<()> {
    crate::output::check_dir(&args.out, args.force)?;
    let start = Instant::now();
    let kde = KdeArgs {
        common: CommonArgs {
            out: Some(args.out.clone()),
            seed: args.seed,
            mechanisms: Some(args.mechanisms.clone()),
            full: false,
            threads: args.threads,
            delta: 1e-6,
            no_plots: false,
            force: args.force,
        },
        dataset: Some(vec![Dataset::Airports]),
        csv: None,
        region: Region::Conus,
        sweep: SweepArgs {
            n: Some(vec![usize::MAX]),
            epsilon: Some(args.epsilon.clone()),
            ref_n: None,
            ref_epsilon: None,
        },
        eps_h: Vec::new(),
        per_query_paper: args.per_query_paper,
        large_n: false,
        max_releases: 5_000_000,
        map_bins: maps::MAX_BINS,
        grid: Some(args.grid),
        bandwidth: None,
        ldp_scale: 1000.0,
    };
    let paths = if args.per_query_paper {
        outln!("geopriv demo --per-query-paper: the paper's per-query KDE of US airports (each device spends m·ε)");
        let result = compute(&kde, true)?;
        write_kde(&result, &args.out, true)?
    } else {
        outln!("geopriv demo: a geo-private kernel density map of US airports, every mechanism at the same per-device ε");
        let plan = EqualPlan::from_args(&kde)?;
        if let Some(set) = plan.sets.first() {
            let m = set.grid.len();
            outln!("data: {}", set.source.describe());
            outln!(
                "query grid: {k} × {k} = {m} points over {:.0} km × {:.0} km (Web Mercator), bandwidth h = {:.1} km (one cell diagonal)",
                (set.grid.bbox[1] - set.grid.bbox[0]) / 1000.0,
                (set.grid.bbox[3] - set.grid.bbox[2]) / 1000.0,
                set.bandwidth / 1000.0,
                k = set.grid.k
            );
            outln!(
                "devices: each device spends the per-device total ε on the whole map, whatever the mechanism: every cell at ε/{m} (PolyPlace, global Laplace), one vector with Laplace(L1/ε), k sampled cells at ε/k, or one noisy location (noise a priori)"
            );
            outln!(
                "server: averages the reports (noise a priori: bins the noisy locations and applies the plain, debiased or partial kernel by FFT); the planner picks a mechanism from the reports; ASE against the true map"
            );
        }
        let run = equal_budget(&plan, true)?;
        write_equal(&run, &args.out, true)?
    };
    outln!("done in {:.1} s", start.elapsed().as_secs_f64());
    print_paths(&paths);
    Ok(())
}
