//! `geopriv experiment kde` and `geopriv demo`: a Gaussian kernel density
//! map of user locations (docs/MATH.md §7).
//!
//! A K × K grid of query points t covers the bounding box of the data; the
//! bandwidth h is one grid-cell diagonal. Every device answers every grid
//! point: for each t it releases a privatized f_t(x) = exp(-||x - t||²/2h²)
//! (ε-GP per release; composition across the K² releases is not accounted
//! for, as in the paper). The server averages the n reports of each grid
//! point. ASE = mean over the grid of (estimate - non-private KDE)².
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
use super::mechanisms::{build_all, Contender, MechParams, Release};
use super::plot::{self, HeatPanel};
use super::{
    add_in_order, fmt_count, fmt_eps, parse_epsilon, print_paths, rng_for, run_cells,
    write_outcome, CommonArgs, Outcome, Record, SweepArgs, SweepDefaults,
};
use clap::Args;
use geopriv::noise::PlanarLaplace;
use geopriv::{GaussianKde, Query};
use rand::distr::Distribution;
use rand::Rng;
use rayon::prelude::*;
use std::path::{Path, PathBuf};
use std::time::Instant;

/// Devices per work unit.
const CHUNK: usize = 128;
/// Work units per wave (partial sums are added in order after each wave).
const WAVE: usize = 64;

/// Where the locations come from.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Dataset {
    /// The bundled US airports (real data, examples/data/airports.csv).
    Airports,
    /// The synthetic city (any n).
    City,
}

/// Options of `geopriv experiment kde`.
///
/// Defaults (about a minute on 2 cores): the airports (3,069 in the
/// contiguous US) on a 31 × 31 grid; n ∈ {N/4, N/2, N} at ε = 1/1000 per
/// metre; ε ∈ {1/1000, 1e-4, 1e-5, 1e-6} per metre at n = N. With
/// `--dataset city`: n ∈ {2.5k, 5k, 10k}, ε ∈ {1/250, 1/1000, 1/4000}.
/// `--full` (the paper's setting; 48 min measured on 2 shared cores): the synthetic city with
/// n = 200,000, a 61 × 61 grid and ε = 1/1000 per metre.
#[derive(Args, Debug, Clone)]
pub struct KdeArgs {
    #[command(flatten)]
    pub common: CommonArgs,
    /// Data set [default: airports; with --full: city].
    #[arg(long, value_enum)]
    pub dataset: Option<Dataset>,
    /// A CSV with latitude/longitude columns to use instead of the bundled
    /// airports.
    #[arg(long)]
    pub csv: Option<PathBuf>,
    /// Which airports (or CSV rows) to keep.
    #[arg(long, value_enum, default_value = "conus")]
    pub region: Region,
    #[command(flatten)]
    pub sweep: SweepArgs,
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
}

impl Source {
    fn bbox(&self) -> [f64; 4] {
        match self {
            Source::Fixed(p, _) => bounding_box(p),
            Source::City(_) => [0.0, SyntheticCity::SIDE, 0.0, SyntheticCity::SIDE],
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
        }
    }

    fn available(&self) -> Option<usize> {
        match self {
            Source::Fixed(p, _) => Some(p.len()),
            Source::City(_) => None,
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
        }
    }
}

fn load_source(args: &KdeArgs) -> Result<(Source, Dataset)> {
    let dataset = args.dataset.unwrap_or(if args.common.full {
        Dataset::City
    } else {
        Dataset::Airports
    });
    Ok(match dataset {
        Dataset::City => (Source::City(SyntheticCity::standard()), dataset),
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
            (Source::Fixed(pts, what), dataset)
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

/// Run the KDE experiment, write outputs, print paths.
pub fn run(args: KdeArgs) -> Result<()> {
    let dir = args.common.out_dir("kde");
    let result = compute(&args, false)?;
    let paths = write_kde(&result, &dir, !args.common.no_plots)?;
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
    let (source, dataset) = load_source(args)?;
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
        println!("data: {}", source.describe());
        println!(
            "query grid: {k} × {k} = {} points over {:.0} km × {:.0} km (Web Mercator), bandwidth h = {:.1} km (one cell diagonal)",
            queries.len(),
            (grid.bbox[1] - grid.bbox[0]) / 1000.0,
            (grid.bbox[3] - grid.bbox[2]) / 1000.0,
            h / 1000.0
        );
        println!(
            "devices: each of n devices privatizes its value at every grid point (each release ε-GP, ε per metre) and uploads only those {} numbers",
            queries.len()
        );
        println!("server: averages the n reports of each grid point and compares with the non-private KDE");
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
            println!(
                "n = {}, ε = 1/{:.0} per metre (ε h = {:.2}):",
                fmt_count(n as f64),
                1.0 / eps,
                eps * h
            );
            println!(
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
                println!("{line}");
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
        let truth_scan: Vec<f64> = grid.scan().map(|i| truth[i]).collect();
        match crate::map::equal_budget_lines(grid.bbox, k, h, eps, &users, &truth_scan, seed) {
            Ok(lines) => {
                for line in lines {
                    if narrate {
                        println!("{line}");
                    } else {
                        eprintln!("{line}");
                    }
                }
            }
            Err(e) => eprintln!("  (equal per-device budget maps unavailable: {e})"),
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
        "every device answers every grid point, each release ε-GP on its own (composition across grid points not accounted for, as in the paper); noise a priori: one planar-Laplace location per device, reused for all grid points".into(),
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
                match dataset {
                    Dataset::Airports => "airports",
                    Dataset::City => "synthetic city",
                }
            ),
            metric: "ASE",
            eps_unit: "per metre",
            settings,
            mechs,
            groups: vec![group],
            sweep,
            records,
            seconds,
        },
        grid,
        maps,
        bandwidth: h,
    })
}

/// Σ over devices of each device's report at each grid point.
/// Reports are drawn cell by cell in the grid's scan order (see
/// [`Grid::scan`]) and stored in the core's order.
fn device_sums(
    r: &Release,
    grid: &Grid,
    queries: &[GaussianKde],
    users: &[[f64; 2]],
    seed: u64,
    n: usize,
    eps: f64,
) -> Result<Vec<f64>> {
    let g = queries.len();
    let chunks = users.len().div_ceil(CHUNK);
    let mut total = vec![0.0; g];
    let a_priori = PlanarLaplace::new(eps)?;
    let start = Instant::now();
    for wave in (0..chunks).step_by(WAVE) {
        // Progress of long (full-scale) runs, about every 10% of the devices.
        let step = (chunks / 10).max(WAVE).div_ceil(WAVE) * WAVE;
        if users.len() >= 50_000 && wave > 0 && wave % step == 0 {
            eprintln!(
                "    {}: {:.0}% of the devices in {:.0} s",
                r.kind.name(),
                100.0 * wave as f64 / chunks as f64,
                start.elapsed().as_secs_f64()
            );
        }
        let parts: Vec<Vec<f64>> = (wave..(wave + WAVE).min(chunks))
            .into_par_iter()
            .map(|c| {
                let mut rng = rng_for(seed, &[21, n as u64, eps.to_bits(), r.kind.tag(), c as u64]);
                let mut part = vec![0.0; g];
                for x in &users[c * CHUNK..((c + 1) * CHUNK).min(users.len())] {
                    if r.kind == Contender::A_PRIORI {
                        // One noisy location per device, for every grid point.
                        let z = a_priori.sample(&mut rng);
                        let noisy = [x[0] + z[0], x[1] + z[1]];
                        for i in grid.scan() {
                            part[i] += queries[i].value(&noisy)?;
                        }
                    } else {
                        for i in grid.scan() {
                            part[i] += r.release(&queries[i], x, &mut rng)?;
                        }
                    }
                }
                Ok(part)
            })
            .collect::<Result<_>>()?;
        let sum = add_in_order(parts, g);
        for (t, s) in total.iter_mut().zip(sum) {
            *t += s;
        }
    }
    Ok(total)
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
    /// Budgets per metre.
    #[arg(long, value_delimiter = ',', value_parser = parse_epsilon,
          default_value = "1e-3,1e-4,1e-5,1e-6")]
    pub epsilon: Vec<f64>,
    /// Mechanisms.
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
}

/// The end-to-end demo: the KDE of the bundled airports, privatized on the
/// devices and aggregated by the server; writes the table and the pictures
/// and prints where they are.
pub fn run_demo(args: DemoArgs) -> Result<()> {
    let start = Instant::now();
    println!("geopriv demo: a geo-private kernel density map of US airports");
    let kde = KdeArgs {
        common: CommonArgs {
            out: Some(args.out.clone()),
            seed: args.seed,
            mechanisms: Some(args.mechanisms.clone()),
            full: false,
            threads: args.threads,
            delta: 1e-6,
            no_plots: false,
        },
        dataset: Some(Dataset::Airports),
        csv: None,
        region: Region::Conus,
        sweep: SweepArgs {
            n: Some(vec![usize::MAX]),
            epsilon: Some(args.epsilon.clone()),
            ref_n: None,
            ref_epsilon: None,
        },
        grid: Some(args.grid),
        bandwidth: None,
        ldp_scale: 1000.0,
    };
    let result = compute(&kde, true)?;
    let paths = write_kde(&result, &args.out, true)?;
    println!("done in {:.1} s", start.elapsed().as_secs_f64());
    print_paths(&paths);
    Ok(())
}
