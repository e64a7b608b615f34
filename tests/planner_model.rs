//! The planner's error model against measured ASE (issue 19 item 15,
//! docs/MATH.md §9.4, §9.6): for every estimator the planner ranks with an
//! estimate (every a-priori kernel λ and EM), predicted ASE within 3x of
//! the ASE measured against the true map of the same devices, over εh and
//! n on three populations (the bundled airports, the synthetic city, a
//! constructed population of anisotropic clusters, a corridor and a uniform
//! background), and the pick within 1.5x of the best measured.
//!
//! EM is held to 3x at every εh (its bootstrap up to εh = 3, the plain
//! map's noise, rounding and blurred bias above; docs/MATH.md §9.4,
//! "Domain of the model"). The truth is [`KdeGrid::exact_map`].
//! `GEOPRIV_PLANNER_DEBUG=1` prints EM's bootstrap and the planner's line
//! per cell; `GEOPRIV_PLANNER_DECOMP=1` adds the error of the exact map of
//! the noisy locations (noise), of the true locations rounded to bin
//! centres (rounding) and of the noisy ones rounded (both).
//!
//! The CI test runs nine cells at n <= 10^5 (31 × 31 maps), one per
//! population and εh regime; `cargo test --test planner_model -- --ignored
//! --nocapture` runs the grid εh ∈ {0.1, …, 1000} × n ∈ {10^3, 10^4, 10^5}
//! on the three populations (with `GEOPRIV_PLANNER_FULL=1` also n = 10^6;
//! `GEOPRIV_PLANNER_CELLS="a:0.3:1000;c:10:10000"` picks cells: a, c, x =
//! airports, city, constructed; n up to 10^7 works, tens of seconds per
//! cell). Former failures, since mended (BENCHMARKS.md "Branch emmodel",
//! "Branch emlow", "Branch emhigh", "Branch planmodel"): EM at εh 0.1 and
//! 0.3, n = 10^4 on the constructed population (10.6x and 3.9x
//! under-predicted), at εh 1000, n = 10^6 there (0.28) and on the airports
//! at εh 100, n = 10^7 (64x under: coincident devices; 1.21 with the
//! charge of docs/MATH.md §9.4 "Atoms"); at n = 10^7 (branch cells16):
//! the kernel maps on the constructed population at εh 100–1000
//! (0.11–0.52: thin ridges read as coincident devices; two resolutions),
//! λ = 1 on the airports at εh 3 (0.16: the EM floor), EM on the city at
//! εh 0.3 (5.25, picked at 2.47x the best) and the pick on the
//! constructed population at εh 3 (EM at 1.91x: EM against the unbiased
//! map).
//!
//! Open (branch cells17, BENCHMARKS.md "Branch cells17"): EM on the
//! airports under the emlow floor, over-predicted where EM removes most
//! of the plain map's blur: εh 0.1 at n = 10^5, 10^6, 10^7 (0.21, 0.23,
//! 0.29) and εh 0.3 at n = 10^5 (0.14). The ignored grid's default
//! (n <= 10^5) therefore fails at exactly those two cells at n = 10^5.
//! Branch cells18 (docs/MATH.md §9.4 "What the reports cannot tell"):
//! they are not excused by an information limit. No twin population with
//! n·KL <= 0.1 against the airports' reports makes EM's ASE differ 9x
//! (none can at εh 0.1, n = 10^7 and εh 0.3, n = 10^5; the twins built
//! move it 0.98–1.65x). The twins are cells here: `t150:0.1:100000` (every
//! airport moved by a seeded Gaussian of sd 150 km) and `p:0.1:100000`
//! with `GEOPRIV_PLANNER_TWIN_FILE` (written by `scripts/twins.py path`);
//! `GEOPRIV_PLANNER_SEED` (default 7) redraws the devices and the noise of
//! `GEOPRIV_PLANNER_CELLS`; `GEOPRIV_PLANNER_GRID=61` (branch scope19) runs
//! them on the CLI's default map (61 × 61, up to 1024 bins per axis).
//! Seed 7 hides a second failure there: at seeds 2–6 the pick at εh 0.3, n = 10^5 is λ = 0.8 at 3.3–5.9x the best (EM)
//! and at seed 4, εh 0.1, n = 10^5 the plain map at 5.8x.
//!
//! Branch cells20: `m<k>:εh:n` is a population of k atoms on a smooth
//! background ([`Pop::Atoms`]), and `GEOPRIV_PLANNER_CAND=1` prints, per
//! cell with EM, the truth-free statistics measured as candidates for
//! the emlow floor's share (none adopted; BENCHMARKS.md "Branch cells20").
//! Also open there, at seeds other than 7: EM on the city at εh 0.1,
//! n = 10^3 under-predicted 3.4–9.3x at seeds 2, 3, 4, 6 (EM stops at
//! t* = 3–24 and removes little); λ = 0 ranked on a chance small bias
//! estimate at seed 4 (the city at εh 0.3, n = 10^4, picked at 2.57x);
//! and `m3000`/`m300` at εh 0.3, n = 10^5, EM over-predicted 5–25x and
//! the pick λ = 0.6 or 0.8 at 3.5–12.9x the best at seeds 2–7.
//!
//! Branch twins19 (docs/MATH.md §9.4, "What the reports cannot tell"):
//! `c<w>:εh:n` is the city with every device moved by a Gaussian of sd
//! w km ([`Pop::CityTwin`]) and `pc:εh:n` a city twin read from
//! `GEOPRIV_PLANNER_TWIN_FILE` (`scripts/city_twins.py path`). Neither of
//! the last two misses is an information limit: at n·KL <= 0.1 against
//! the city's reports (εh 0.1, n = 10^3) no twin built puts EM's ASE 9x
//! apart often enough to force a failure (the city's misses, 13 of seeds
//! 1–20, fall where EM stops by t* = 27 and the twins read within 5x of
//! it), and at the atoms (εh 0.3, n = 10^5) the signed bound leaves no
//! room for one. Both stay open as the model's errors, measured here.
//!
//! Branch cells22 (docs/MATH.md §9.4, "EM at an early stop"):
//! `GEOPRIV_PLANNER_EARLY=1` prints, per cell with EM, the truth-free
//! ends of what the reports allow for the structure EM leaves when it
//! stops early (L, the devices' own sampling structure, and EM's mean for
//! the most a map in [0, 1] can carry) beside EM's measured ASE and how
//! far EM's map spreads. The planner now reads EM's bias² as at least
//! √(L·U) − D where EM's map spreads no more than L: the city at εh 0.1,
//! n = 10^3 is under-predicted beyond 3x at 7 of seeds 1–20 (13 before;
//! left: EM stopped at t* 6–27 with a little structure), the constructed
//! population there at 0 (9 before). Open, found here: the city and the
//! constructed population at εh 0.3, n = 10^3 under-predicted 3.2–8.3x at
//! 7 and 8 of seeds 1–20 (BENCHMARKS.md "Branch cells22").
//!
//! Branch cells23 (docs/MATH.md §9.4, "Beyond the band"; nothing in the
//! planner changed): those two cells are not an information limit (city
//! twins at n·KL 0.002–0.21 keep EM's ASE within 3.6x of the city's); the
//! prediction there is EM's bootstrap, which misses the devices' structure
//! beyond the band the reports resolve. A floor for it (the log-centre of
//! that structure's truth-free ends) mended them but newly over-predicted
//! the atoms at εh 0.3, n = 10^3 and the airports there at seed 4, and
//! was reverted; gated on EM's spread <= 20 L it held on fresh seeds
//! 21–40 but still over-predicted the airports' seed 4 (0.31), reverted. Also open, seeds 1–20: the city at εh 0.25, n = 10^3
//! (13 under), εh 0.2 and 0.3, n = 3000 (11, 6); the constructed
//! population at εh 0.25, n = 10^3 (7) and εh 0.3, n = 3000 (5); the city
//! at εh 0.5, n = 10^3, seed 20 picks λ = 0.6 at 2.05x the best.
//!
//! Branch rank15 (docs/MATH.md §9.4, "EM ranked only where the reports
//! pin it"): at εh <= 3 EM is ranked only where its ASE interval from the
//! reports spans at most 9x, and clamped into it like the kernel maps;
//! elsewhere its row is the interval's upper end (`upper_bound`, held to
//! measured <= 3x predicted) and the line gives the interval. The misses
//! above are then not ranked predictions; what remains ranked beyond 3x
//! is in BENCHMARKS.md "Branch rank15".

use geopriv::map::{plan, KdeGrid, MapAggregator, MapMechanism, MapRelease, QuerySet};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use rand_distr::{Distribution, StandardNormal};

/// Populations of the test.
#[derive(Clone, Copy, Debug)]
enum Pop {
    /// The bundled airports of the contiguous US (Web Mercator metres),
    /// resampled with replacement to n devices.
    Airports,
    /// The synthetic city of `geopriv map sweep --population city`
    /// (12 Gaussian neighbourhoods, 15% background, 20 km).
    City,
    /// Constructed: 20 anisotropic clusters (aspect up to 6), one
    /// corridor, 25% uniform background, 30 km (the structure of the
    /// sweep's `neighbourhoods`, drawn here from its own seed).
    Constructed,
    /// A twin of the airports (branch cells18, docs/MATH.md §9.4 "What the
    /// reports cannot tell"): every resampled airport moved by a Gaussian
    /// of standard deviation `w` metres per axis, redrawn until it lies in
    /// the airports' box (each airport's blob truncated to the box).
    Twin(f64),
    /// A twin read from `GEOPRIV_PLANNER_TWIN_FILE` (`scripts/twins.py
    /// path`: first line the cell side, then "x y mass" per cell): a cell
    /// drawn by its mass, the device uniform in it (clamped to the
    /// airports' box).
    FileTwin,
    /// Atoms on a smooth background (branch cells20): `k` atoms drawn once
    /// (seeded) from a smooth density on a 30 km square (three broad
    /// Gaussians, sd 3–6 km, and an empty third of the square), each
    /// device on an atom with probability 0.7 (atoms equally weighted),
    /// else drawn from the smooth density itself.
    Atoms(usize),
    /// A twin of the city (branch twins19, docs/MATH.md §9.4 "What the
    /// reports cannot tell"): every city device moved by a Gaussian of
    /// standard deviation `w` metres per axis, redrawn until it lies in
    /// the city's square (`scripts/city_twins.py` computes its report
    /// law's KL against the city's).
    CityTwin(f64),
    /// A twin of the city read from `GEOPRIV_PLANNER_TWIN_FILE`
    /// (`scripts/city_twins.py path`), as [`Pop::FileTwin`] on the city's
    /// square.
    CityFileTwin,
    /// A street along a bin axis (attack16 F2, branch plan21): half the
    /// devices uniform on a 20 km square, half on a 1 m wide north-south
    /// street at x = 7,791 m (y in 2–18 km), off the bin centres: every
    /// bin row the street crosses holds its devices at one offset.
    Street,
    /// A thin ring (attack16 F4, branch plan22): every device on a ring of
    /// radius 6 km centred at (10.3 km, 9.7 km) in a 20 km square, its
    /// radius uniform over the given thickness (metres): where the ring
    /// runs along a bin axis its devices share one sub-bin offset.
    Ring(f64),
    /// Heavy jittered sites (attack17 F1, branch lead17): 400 sites
    /// uniform in the middle 18 km of a 20 km square (drawn once, seed
    /// 0x517E), Zipf weights 1/k^1.1, each device 1–10 m from its site in
    /// a random direction (geocoding jitter).
    ZipfSites,

    /// Heavy atoms (attack17 F1, branch plan23; attack16's `atoms`): 500
    /// sites drawn once (seeded) uniformly in [1, 19] km² of a 20 km
    /// square, Zipf weights 1/i^1.1, every device exactly at its site.
    ZipfAtoms,
}

fn airports() -> Vec<[f64; 2]> {
    let csv = include_str!("../examples/data/airports.csv");
    let r = 6_378_137.0;
    csv.lines()
        .skip(1)
        .filter_map(|l| {
            let f: Vec<&str> = l.split(',').collect();
            let lat: f64 = f.get(f.len().wrapping_sub(2))?.parse().ok()?;
            let lon: f64 = f.last()?.parse().ok()?;
            ((24.0..=50.0).contains(&lat) && (-125.0..=-66.0).contains(&lon)).then(|| {
                [
                    r * lon.to_radians(),
                    r * (std::f64::consts::FRAC_PI_4 + lat.to_radians() / 2.0)
                        .tan()
                        .ln(),
                ]
            })
        })
        .collect()
}

fn gauss(rng: &mut StdRng) -> f64 {
    StandardNormal.sample(rng)
}

/// Side of the synthetic city's square (metres).
const CITY_SIDE: f64 = 20_000.0;

/// The synthetic city's 12 neighbourhoods (centre, sd in metres, weight),
/// drawn once from seed 0xC17; `scripts/city_twins.py` carries the same
/// numbers (checked by `the_city_twin_script_carries_the_citys_neighbourhoods`).
fn city_hoods() -> Vec<([f64; 2], f64, f64)> {
    let side = CITY_SIDE;
    let mut g = StdRng::seed_from_u64(0xC17);
    (0..12)
        .map(|i| {
            let c = [
                g.random_range(0.15..0.85) * side,
                g.random_range(0.15..0.85) * side,
            ];
            let s = if i == 0 {
                900.0
            } else {
                g.random_range(300.0..1500.0)
            };
            let w = if i == 0 {
                3.0
            } else {
                g.random_range(0.5..1.5)
            };
            (c, s, w)
        })
        .collect()
}

/// Every device of `(xs, b)` moved by a Gaussian of sd `w` per axis (the
/// twins `t<w>` and `c<w>`), redrawn until it lies inside the box.
fn blurred((xs, b): (Vec<[f64; 2]>, [f64; 4]), w: f64, seed: u64) -> (Vec<[f64; 2]>, [f64; 4]) {
    let mut g = StdRng::seed_from_u64(seed);
    let xs = xs
        .iter()
        .map(|x| loop {
            let p = [x[0] + w * gauss(&mut g), x[1] + w * gauss(&mut g)];
            if (b[0]..=b[1]).contains(&p[0]) && (b[2]..=b[3]).contains(&p[1]) {
                break p;
            }
        })
        .collect();
    (xs, b)
}

/// (devices, bounding box) of `pop` with n devices.
fn population(pop: Pop, n: usize, seed: u64) -> (Vec<[f64; 2]>, [f64; 4]) {
    let mut rng = StdRng::seed_from_u64(seed);
    match pop {
        Pop::Twin(w) => blurred(population(Pop::Airports, n, seed), w, seed ^ 0x7317),
        Pop::CityTwin(w) => blurred(population(Pop::City, n, seed), w, seed ^ 0xC17_7317),
        Pop::FileTwin | Pop::CityFileTwin => {
            let base = match pop {
                Pop::FileTwin => Pop::Airports,
                _ => Pop::City,
            };
            let (_, b) = population(base, 1, seed);
            let path =
                std::env::var("GEOPRIV_PLANNER_TWIN_FILE").expect("GEOPRIV_PLANNER_TWIN_FILE");
            let text = std::fs::read_to_string(path).expect("twin file");
            let mut lines = text.lines();
            let side: f64 = lines.next().unwrap().trim().parse().unwrap();
            let cells: Vec<[f64; 3]> = lines
                .map(|l| {
                    let f: Vec<f64> = l.split_whitespace().map(|v| v.parse().unwrap()).collect();
                    [f[0], f[1], f[2]]
                })
                .collect();
            let mut cum = Vec::with_capacity(cells.len());
            let mut t = 0.0;
            for c in &cells {
                t += c[2];
                cum.push(t);
            }
            let xs = (0..n)
                .map(|_| {
                    let u = rng.random::<f64>() * t;
                    let c = cells[cum.partition_point(|&v| v <= u).min(cells.len() - 1)];
                    [
                        (c[0] + (rng.random::<f64>() - 0.5) * side).clamp(b[0], b[1]),
                        (c[1] + (rng.random::<f64>() - 0.5) * side).clamp(b[2], b[3]),
                    ]
                })
                .collect();
            (xs, b)
        }
        Pop::Airports => {
            let a = airports();
            let (mut x0, mut x1, mut y0, mut y1) = (f64::MAX, f64::MIN, f64::MAX, f64::MIN);
            for p in &a {
                x0 = x0.min(p[0]);
                x1 = x1.max(p[0]);
                y0 = y0.min(p[1]);
                y1 = y1.max(p[1]);
            }
            let xs = if n == a.len() {
                a.clone()
            } else {
                (0..n).map(|_| a[rng.random_range(0..a.len())]).collect()
            };
            (xs, [x0, x1, y0, y1])
        }
        Pop::Atoms(k) => {
            let side = 30_000.0;
            let mut g = StdRng::seed_from_u64(0xA70);
            let blobs = [
                ([0.3 * side, 0.3 * side], 3_000.0, 1.0),
                ([0.7 * side, 0.35 * side], 6_000.0, 1.5),
                ([0.45 * side, 0.6 * side], 4_000.0, 1.0),
            ];
            let smooth = |r: &mut StdRng| loop {
                let mut u = r.random::<f64>() * 3.5;
                let mut b = blobs[2];
                for c in &blobs {
                    if u < c.2 {
                        b = *c;
                        break;
                    }
                    u -= c.2;
                }
                let p = [b.0[0] + b.1 * gauss(r), b.0[1] + b.1 * gauss(r)];
                // The empty part: the top third of the square.
                if (0.0..side).contains(&p[0]) && (0.0..side * 2.0 / 3.0).contains(&p[1]) {
                    break p;
                }
            };
            let atoms: Vec<[f64; 2]> = (0..k.max(1)).map(|_| smooth(&mut g)).collect();
            let xs = (0..n)
                .map(|_| {
                    if rng.random::<f64>() < 0.7 {
                        atoms[rng.random_range(0..atoms.len())]
                    } else {
                        smooth(&mut rng)
                    }
                })
                .collect();
            (xs, [0.0, side, 0.0, side])
        }
        Pop::City => {
            let side = CITY_SIDE;
            let hoods = city_hoods();
            let total: f64 = hoods.iter().map(|h| h.2).sum();
            let xs = (0..n)
                .map(|_| {
                    if rng.random::<f64>() < 0.15 {
                        return [rng.random::<f64>() * side, rng.random::<f64>() * side];
                    }
                    let mut u = rng.random::<f64>() * total;
                    let mut pick = hoods[hoods.len() - 1];
                    for h in &hoods {
                        if u < h.2 {
                            pick = *h;
                            break;
                        }
                        u -= h.2;
                    }
                    let (zx, zy) = (gauss(&mut rng), gauss(&mut rng));
                    [
                        (pick.0[0] + pick.1 * zx).clamp(0.0, side),
                        (pick.0[1] + pick.1 * zy).clamp(0.0, side),
                    ]
                })
                .collect();
            (xs, [0.0, side, 0.0, side])
        }
        Pop::Constructed => {
            let side = 30_000.0;
            let mut g = StdRng::seed_from_u64(0x4e32);
            // (centre, long/short spread, angle, weight)
            let clusters: Vec<([f64; 2], [f64; 2], f64, f64)> = (0..20)
                .map(|_| {
                    let c = [
                        g.random_range(0.1..0.9) * side,
                        g.random_range(0.1..0.9) * side,
                    ];
                    let long = g.random_range(300.0..2500.0);
                    let aspect = g.random_range(1.0..6.0);
                    (
                        c,
                        [long, long / aspect],
                        g.random_range(0.0..std::f64::consts::PI),
                        g.random_range(0.3..1.5),
                    )
                })
                .collect();
            let total: f64 = clusters.iter().map(|c| c.3).sum::<f64>() + 2.0;
            let (a, b) = ([0.1 * side, 0.2 * side], [0.9 * side, 0.7 * side]);
            let xs = (0..n)
                .map(|_| {
                    let p = if rng.random::<f64>() < 0.25 {
                        [rng.random::<f64>() * side, rng.random::<f64>() * side]
                    } else {
                        let mut u = rng.random::<f64>() * total;
                        let mut out = None;
                        for c in &clusters {
                            if u < c.3 {
                                let (z0, z1) = (gauss(&mut rng) * c.1[0], gauss(&mut rng) * c.1[1]);
                                let (s, co) = c.2.sin_cos();
                                out = Some([c.0[0] + co * z0 - s * z1, c.0[1] + s * z0 + co * z1]);
                                break;
                            }
                            u -= c.3;
                        }
                        out.unwrap_or_else(|| {
                            // The corridor: a segment with a 200 m cross-section.
                            let t: f64 = rng.random();
                            let z = gauss(&mut rng) * 200.0;
                            let d = [b[0] - a[0], b[1] - a[1]];
                            let l = d[0].hypot(d[1]);
                            [
                                a[0] + t * d[0] - z * d[1] / l,
                                a[1] + t * d[1] + z * d[0] / l,
                            ]
                        })
                    };
                    [p[0].clamp(0.0, side), p[1].clamp(0.0, side)]
                })
                .collect();
            (xs, [0.0, side, 0.0, side])
        }
        Pop::Street => {
            let side = 20_000.0;
            let xs = (0..n)
                .map(|i| {
                    let (u, v): (f64, f64) = (rng.random(), rng.random());
                    if i % 2 == 0 {
                        [7_791.0 + u, 2_000.0 + 16_000.0 * v]
                    } else {
                        [side * u, side * v]
                    }
                })
                .collect();
            (xs, [0.0, side, 0.0, side])
        }
        Pop::ZipfAtoms => {
            let side = 20_000.0;
            let mut srng = StdRng::seed_from_u64(8);
            let sites: Vec<[f64; 2]> = (0..500)
                .map(|_| {
                    let (u, v): (f64, f64) = (srng.random(), srng.random());
                    [1_000.0 + 18_000.0 * u, 1_000.0 + 18_000.0 * v]
                })
                .collect();
            let mut cum = Vec::with_capacity(sites.len());
            let mut t = 0.0;
            for i in 1..=sites.len() {
                t += 1.0 / (i as f64).powf(1.1);
                cum.push(t);
            }
            let xs = (0..n)
                .map(|_| {
                    let u: f64 = rng.random::<f64>() * t;
                    sites[cum.partition_point(|&c| c < u).min(sites.len() - 1)]
                })
                .collect();
            (xs, [0.0, side, 0.0, side])
        }
        Pop::Ring(w) => {
            let side = 20_000.0;
            let xs = (0..n)
                .map(|_| {
                    let (u, v): (f64, f64) = (rng.random(), rng.random());
                    let (a, r) = (u * std::f64::consts::TAU, 6_000.0 + w * v);
                    [10_300.0 + r * a.cos(), 9_700.0 + r * a.sin()]
                })
                .collect();
            (xs, [0.0, side, 0.0, side])
        }
        Pop::ZipfSites => {
            let side = 20_000.0;
            let mut g = StdRng::seed_from_u64(0x517E);
            let sites: Vec<[f64; 2]> = (0..400)
                .map(|_| {
                    [
                        1_000.0 + 18_000.0 * g.random::<f64>(),
                        1_000.0 + 18_000.0 * g.random::<f64>(),
                    ]
                })
                .collect();
            let mut cum = Vec::with_capacity(sites.len());
            let mut t = 0.0;
            for k in 1..=sites.len() {
                t += (k as f64).powf(-1.1);
                cum.push(t);
            }
            let xs = (0..n)
                .map(|_| {
                    let u = rng.random::<f64>() * t;
                    let s = sites[cum.partition_point(|&v| v <= u).min(sites.len() - 1)];
                    let (r, a) = (
                        1.0 + 9.0 * rng.random::<f64>(),
                        std::f64::consts::TAU * rng.random::<f64>(),
                    );
                    [s[0] + r * a.cos(), s[1] + r * a.sin()]
                })
                .collect();
            (xs, [0.0, side, 0.0, side])
        }
    }
}

fn ase(a: &[f64], b: &[f64]) -> f64 {
    a.iter().zip(b).map(|(x, y)| (x - y).powi(2)).sum::<f64>() / a.len() as f64
}

/// Share of the positive mass in the top tenth of the cells.
fn top_share(v: &[f64]) -> f64 {
    let mut w: Vec<f64> = v.iter().map(|x| x.max(0.0)).collect();
    let t: f64 = w.iter().sum();
    w.sort_by(|a, b| b.total_cmp(a));
    w.iter().take(v.len() / 10).sum::<f64>() / t
}

/// Entropy of the positive part, normalised to mass 1 (nats).
fn entropy(v: &[f64]) -> f64 {
    let t: f64 = v.iter().map(|x| x.max(0.0)).sum();
    -v.iter()
        .map(|x| x.max(0.0) / t)
        .filter(|p| *p > 0.0)
        .map(|p| p * p.ln())
        .sum::<f64>()
}

/// Share of the (mean-removed) square map's energy at DFT frequencies
/// max(|kx|, |ky|) <= kmax.
fn low_share(v: &[f64], kmax: i64) -> f64 {
    let k = (v.len() as f64).sqrt().round() as usize;
    let mean = v.iter().sum::<f64>() / v.len() as f64;
    let (mut low, mut all) = (0.0, 0.0);
    for a in 0..k {
        for b in 0..k {
            let (mut re, mut im) = (0.0, 0.0);
            for i in 0..k {
                for j in 0..k {
                    let ph = -2.0 * std::f64::consts::PI * ((a * i + b * j) as f64) / k as f64;
                    let x = v[i * k + j] - mean;
                    re += x * ph.cos();
                    im += x * ph.sin();
                }
            }
            let e = re * re + im * im;
            let fa = (a as i64).min((k - a) as i64);
            let fb = (b as i64).min((k - b) as i64);
            all += e;
            if fa.max(fb) <= kmax {
                low += e;
            }
        }
    }
    low / all
}

/// Branch cells20 (`GEOPRIV_PLANNER_CAND=1`; BENCHMARKS.md "Branch
/// cells20"): truth-free statistics of the reports that might tell the
/// airports' emlow floor cells from the city's (docs/MATH.md §9.4, emlow
/// bullet), printed beside what they would have to predict: EM's
/// measured/predicted ratio, the share of the plain map's error EM
/// removed, and need_c = (measured − variance)/bias², the multiple of the
/// floor that would have been exact. Candidates: conc = top-tenth mass
/// share of EM over the plain map's, dH = entropy of the plain map less
/// EM's, peak_em/plain and peak_em/l1 (EM's peak over the plain and the
/// λ = 1 map's), x08 = mean (map_0.8 − map₁)² − mean (map₀ − map₁)²
/// (avg_0.8 − avg₀ without the variance terms), low2/low4 = the share of
/// the mean-removed map's energy at DFT frequencies max(|kx|, |ky|) <= 2
/// or 4 (EM's, and the truth's for reference), rings = the shares on
/// rings 1–5, snr_sd and snr_pk = EM's standard deviation over the cells
/// and EM's peak over √v₁ (v₁ the λ = 1 map's predicted variance).
fn candidates(
    p: &geopriv::map::Plan,
    e: &geopriv::map::EmMap,
    m: &geopriv::map::FftMapper,
    agg: &MapAggregator,
    truth: &[f64],
    half1: Option<&[Vec<f64>; 2]>,
) -> String {
    let map = |l: f64| m.estimate(&agg.kernel(l).unwrap()).unwrap().values;
    let (m0, m08, m1) = (map(0.0), map(0.8), map(1.0));
    let em_ase = ase(&e.values, truth);
    let plain_ase = ase(&m0, truth);
    let q = p.predictions.iter().find(|q| q.name == "a-priori em");
    let (pa, pv, pb) = q.map_or((f64::NAN, f64::NAN, f64::NAN), |q| {
        (q.ase, q.variance, q.bias2)
    });
    let d_raw = ase(&m0, &e.values);
    let max = |v: &[f64]| v.iter().cloned().fold(f64::MIN, f64::max);
    let x08 = ase(&m08, &m1) - ase(&m0, &m1);
    // The unbiased map's predicted variance (its bias is not charged at
    // these εh) and EM's structure against it.
    let v1 = p
        .predictions
        .iter()
        .find(|q| q.name == "a-priori λ=1.0")
        .map_or(f64::NAN, |q| q.variance);
    let mean_em = e.values.iter().sum::<f64>() / e.values.len() as f64;
    let sd_em = (e.values.iter().map(|v| (v - mean_em).powi(2)).sum::<f64>()
        / e.values.len() as f64)
        .sqrt();
    format!(
        "\n  CAND pred {pa:.3e} var {pv:.3e} bias2 {pb:.3e} meas {em_ase:.3e} ratio {:.3} removed {:.3} \
         need_c {:.3} d_raw {d_raw:.3e} top_em {:.4} top_plain {:.4} conc {:.4} dH {:.4} \
         peak_em/plain {:.3} peak_em/l1 {:.3} \
         x08 {x08:.3e} x08/D {:.3} low2_em {:.4} low2_true {:.4} low4_em {:.4} low4_true {:.4} \
         ring_em {} ring_true {} ring_plain {} snr_sd {:.4} snr_pk {:.4} v1 {v1:.3e}",
        em_ase / pa,
        1.0 - em_ase / plain_ase,
        (em_ase - pv).max(0.0) / pb,
        top_share(&e.values),
        top_share(&m0),
        top_share(&e.values) / top_share(&m0),
        entropy(&m0) - entropy(&e.values),
        max(&e.values) / max(&m0),
        max(&e.values) / max(&m1),
        x08 / pb,
        low_share(&e.values, 2),
        low_share(truth, 2),
        low_share(&e.values, 4),
        low_share(truth, 4),
        rings(&e.values),
        rings(truth),
        rings(&m0),
        sd_em / v1.sqrt(),
        max(&e.values) / v1.sqrt(),
    ) + &half1.map_or(String::new(), |h| {
        // Per DFT ring max(|kx|, |ky|) = k (k = 0 the mean), as ASE
        // contributions: S = (EM − map₁), N = the λ = 1 map's noise (the
        // halves' half-difference), T = (EM − truth), B0 = (map₀ − truth).
        let diff = |a: &[f64], b: &[f64]| a.iter().zip(b).map(|(x, y)| x - y).collect::<Vec<_>>();
        let noise: Vec<f64> = h[0].iter().zip(&h[1]).map(|(a, b)| (a - b) / 2.0).collect();
        let show = |v: &[f64]| {
            ring_energies(v)
                .iter()
                .map(|x| format!("{x:.2e}"))
                .collect::<Vec<_>>()
                .join("/")
        };
        format!(
            "\n  BAND S {} N {} T {} B0 {}",
            show(&diff(&e.values, &m1)),
            show(&noise),
            show(&diff(&e.values, truth)),
            show(&diff(&m0, truth)),
        )
    })
}

/// Branch cells22 (`GEOPRIV_PLANNER_EARLY=1`; BENCHMARKS.md "Branch
/// cells22"): the truth-free statistics measured as candidates for EM's
/// prediction where its held-out stop comes early, beside EM's measured
/// ASE. `EARLY t* a plain pred var bias2 D vEM varEM var0 mean0 shot
/// meanEM`:
/// t* the held-out stop, a and plain EM's and the plain map's measured
/// ASE, pred/var/bias2 EM's prediction, D = mean (map₀ − EM)², vEM EM's
/// conditioned bootstrap variance, varEM and var0 the two maps' spread
/// over the grid (their distance from a flat map), mean0 the plain map's
/// mean and shot the devices' own sampling structure,
/// (mean_j (1/n)Σ_i K²(t_j − x̃_i) − mean_j map₀_j²)/n read at the grid's
/// K² integral π h²/(cell area · cells) (the truth's structure from n
/// devices drawn from any smooth law), meanEM EM's map's mean.
fn early_stop_statistics(
    p: &geopriv::map::Plan,
    e: &geopriv::map::EmMap,
    m: &geopriv::map::FftMapper,
    agg: &MapAggregator,
    truth: &[f64],
    n: usize,
) -> String {
    let m0 = m.estimate(&agg.kernel(0.0).unwrap()).unwrap().values;
    let q = p.predictions.iter().find(|q| q.name == "a-priori em");
    let (pa, pv, pb) = q.map_or((f64::NAN, f64::NAN, f64::NAN), |q| {
        (q.ase, q.variance, q.bias2)
    });
    let spread = |v: &[f64]| {
        let mean = v.iter().sum::<f64>() / v.len() as f64;
        (
            v.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / v.len() as f64,
            mean,
        )
    };
    let (var_em, mean_em) = spread(&e.values);
    let (var0, mean0) = spread(&m0);
    // The grid's h is the diagonal spacing: π h² / (Δ² · 31²) = 2π/961.
    let k2 = 2.0 * std::f64::consts::PI / m0.len() as f64;
    let sq0 = m0.iter().map(|x| x * x).sum::<f64>() / m0.len() as f64;
    let shot = (k2 - sq0) / n as f64;
    format!(
        "\n  EARLY {} {:.4e} {:.4e} {pa:.4e} {pv:.4e} {pb:.4e} {:.4e} {:.4e} {var_em:.4e} {var0:.4e} {mean0:.4e} {shot:.4e} {mean_em:.4e}",
        e.iterations,
        ase(&e.values, truth),
        ase(&m0, truth),
        ase(&m0, &e.values),
        e.predicted_variance,
    )
}

/// ASE contributions (1/N²)·Σ |X_k|² of a square map's DFT on the rings
/// max(|kx|, |ky|) = 0, 1, …, 15 (N the cell count; the ASE is their sum
/// over all rings, Parseval).
fn ring_energies(v: &[f64]) -> Vec<f64> {
    let k = (v.len() as f64).sqrt().round() as usize;
    let mut out = vec![0.0; k / 2 + 1];
    for a in 0..k {
        for b in 0..k {
            let (mut re, mut im) = (0.0, 0.0);
            for i in 0..k {
                for j in 0..k {
                    let ph = -2.0 * std::f64::consts::PI * ((a * i + b * j) % k) as f64 / k as f64;
                    re += v[i * k + j] * ph.cos();
                    im += v[i * k + j] * ph.sin();
                }
            }
            let r = a.min(k - a).max(b.min(k - b));
            out[r] += (re * re + im * im) / (v.len() * v.len()) as f64;
        }
    }
    out
}

/// Shares of the (mean-removed) map's energy on the DFT rings
/// max(|kx|, |ky|) = 1, …, 5, joined by '/'.
fn rings(v: &[f64]) -> String {
    let mut prev = 0.0;
    (1..=5)
        .map(|k| {
            let s = low_share(v, k);
            let r = s - prev;
            prev = s;
            format!("{r:.4}")
        })
        .collect::<Vec<_>>()
        .join("/")
}

/// One cell of the grid: per ranked estimator (name, predicted, measured),
/// the pick's measured ASE and the best measured.
struct Cell {
    rows: Vec<(String, f64, f64, bool)>,
    pick: String,
    pick_ase: f64,
    best: f64,
    best_name: String,
    em: String,
    line: String,
}

fn run_cell(pop: Pop, eh: f64, n: usize, seed: u64) -> Cell {
    run_cell_on(pop, eh, n, seed, 31, 512)
}

/// [`run_cell`] on a `k` × `k` grid (bandwidth the cell diagonal) with at
/// most `max_bins` bins per axis (the CLI's map: 61 and 1024).
fn run_cell_on(pop: Pop, eh: f64, n: usize, seed: u64, k: usize, max_bins: usize) -> Cell {
    let (xs, bbox) = population(pop, n, seed);
    let diag = ((bbox[1] - bbox[0]) / (k - 1) as f64).hypot((bbox[3] - bbox[2]) / (k - 1) as f64);
    let grid = KdeGrid::new_2d(bbox, [k, k], diag).unwrap();
    let set = QuerySet::Kde(grid.clone());
    let truth = grid.exact_map(&xs);
    let eps = eh / grid.bandwidth();
    let dev = MapRelease::new(set.clone(), MapMechanism::APriori, eps).unwrap();
    let mut agg =
        MapAggregator::with_max_bins(set.clone(), MapMechanism::APriori, eps, max_bins).unwrap();
    let mut rng = StdRng::seed_from_u64(seed ^ 0x5eed);
    let mut noisy = Vec::new();
    // Branch cells20: the reports split in two alternating halves, whose
    // unbiased maps' half-difference has the λ = 1 map's noise.
    let mut halves = std::env::var("GEOPRIV_PLANNER_CAND").is_ok().then(|| {
        [0, 1].map(|_| {
            MapAggregator::with_max_bins(set.clone(), MapMechanism::APriori, eps, max_bins).unwrap()
        })
    });
    for (i, x) in xs.iter().enumerate() {
        let r = dev.release_unmetered(x, &mut rng).unwrap();
        if let Some(l) = &r.location {
            noisy.push([l[0], l[1]]);
        }
        agg.add(&r).unwrap();
        if let Some(h) = &mut halves {
            h[i % 2].add(&r).unwrap();
        }
    }
    let half1 = halves.map(|h| {
        h.map(|a| {
            a.mapper()
                .unwrap()
                .unwrap()
                .estimate(&a.kernel(1.0).unwrap())
                .unwrap()
                .values
        })
    });
    let m = agg.mapper().unwrap().unwrap();
    let decomp = if std::env::var("GEOPRIV_PLANNER_DECOMP").is_ok() {
        let spec = m.counts().spec().clone();
        let snap = |v: &[[f64; 2]]| -> Vec<[f64; 2]> {
            v.iter()
                .filter_map(|x| spec.bin_of(x).map(|b| spec.bin_centre(b)))
                .collect()
        };
        format!(
            "noise(exact) {:.3e} round(true->bins) {:.3e} noisy binned {:.3e} delta/h {:.4}",
            ase(&grid.exact_map(&noisy), &truth),
            ase(&grid.exact_map(&snap(&xs)), &truth),
            ase(&grid.exact_map(&snap(&noisy)), &truth),
            spec.delta()[0] / grid.bandwidth()
        )
    } else {
        String::new()
    };
    let p = plan(&set, eps, n as u64, Some(&m)).unwrap();
    let mut rows = Vec::new();
    let measured = |name: &str| -> Option<f64> {
        if name == "a-priori em" {
            return p.em.as_ref().map(|e| ase(&e.values, &truth));
        }
        let l: f64 = name.strip_prefix("a-priori λ=")?.parse().ok()?;
        Some(ase(
            &m.estimate(&agg.kernel(l).unwrap()).unwrap().values,
            &truth,
        ))
    };
    // The best measured over every kernel map and EM, ranked or not, and
    // the other mechanisms' predictions (vector Laplace: its exact
    // expected ASE; composition and sampled queries: upper bounds).
    let (mut best, mut best_name) = (f64::INFINITY, String::new());
    let mut all: Vec<String> = geopriv::map::LAMBDAS
        .iter()
        .map(|l| format!("a-priori λ={l:.1}"))
        .collect();
    all.push("a-priori em".into());
    for name in &all {
        if let Some(v) = measured(name) {
            if v < best {
                best = v;
                best_name = name.clone();
            }
        }
    }
    let mut pick_ase = f64::NAN;
    for (i, q) in p.predictions.iter().enumerate() {
        let got = measured(&q.name).unwrap_or(q.ase);
        if got < best {
            best = got;
            best_name = q.name.clone();
        }
        if i == 0 {
            pick_ase = got;
        }
        if q.name.starts_with("a-priori") {
            rows.push((q.name.clone(), q.ase, got, q.upper_bound));
        }
    }
    let em = p.em.as_ref().map_or(String::new(), |e| {
        format!(
            "EM t={} boot var {:.3e} boot ase {:.3e} measured {:.3e} path (map - pilot)² {:.3e}",
            e.iterations,
            e.predicted_variance,
            e.predicted_ase,
            ase(&e.values, &truth),
            ase(&e.values, &e.pilot_values)
        ) + &if std::env::var("GEOPRIV_PLANNER_DEBUG").is_ok() {
            // EM's floor where the plain map's bias is not resolved
            // (docs/MATH.md §9.4): its distance to the plain map.
            let plain = m.estimate(&agg.kernel(0.0).unwrap()).unwrap().values;
            format!(
                " plain-EM {:.3e} plain ase {:.3e}",
                ase(&plain, &e.values),
                ase(&plain, &truth)
            )
        } else {
            String::new()
        } + &if std::env::var("GEOPRIV_PLANNER_EARLY").is_ok() {
            early_stop_statistics(&p, e, &m, &agg, &truth, n)
        } else {
            String::new()
        } + &if std::env::var("GEOPRIV_PLANNER_CAND").is_ok() {
            candidates(&p, e, &m, &agg, &truth, half1.as_ref())
        } else {
            String::new()
        }
    });
    Cell {
        em: format!("{em}\n  {decomp}"),
        line: p.line.clone(),
        rows,
        pick: p.pick().name.clone(),
        pick_ase,
        best,
        best_name,
    }
}

/// Branch rank15: EM's ASE interval `[lo, hi]` and, where EM is the
/// pick, its point estimate, as the plan's line states them where EM is
/// not ranked.
fn em_interval_in_line(line: &str) -> Option<(f64, f64, Option<f64>)> {
    let rest = &line[line.find("ASE in [")? + "ASE in [".len()..];
    let (lo, rest) = rest.split_once(", ")?;
    let (hi, rest) = rest.split_once(']')?;
    let point = rest
        .split_once("point estimate ")
        .and_then(|(_, r)| r.split_whitespace().next())
        .and_then(|v| v.parse().ok());
    Some((lo.parse().ok()?, hi.parse().ok()?, point))
}

/// Item 15's rule on the pick: a message if the picked map's measured
/// ASE is more than 1.5x the best measured map's.
fn pick_beyond_1_5x(pop: Pop, eh: f64, n: usize, c: &Cell) -> Option<String> {
    (c.pick_ase > 1.5 * c.best).then(|| {
        format!(
            "{pop:?} εh {eh} n {n}: pick {} {:.3e} vs best {} {:.3e}",
            c.pick, c.pick_ase, c.best_name, c.best
        )
    })
}

fn report(pop: Pop, eh: f64, n: usize, c: &Cell) -> (f64, f64) {
    let (mut lo, mut hi) = (f64::INFINITY, 0.0f64);
    for (name, pred, got, upper) in &c.rows {
        let r = got / pred;
        // A stated upper estimate (EM above εh = 3) is held to
        // measured <= 3 x predicted only.
        if !upper {
            lo = lo.min(r);
        }
        hi = hi.max(r);
        let u = if *upper { "<= " } else { "" };
        println!("| {pop:?} | {eh} | {n} | {name} | {u}{pred:.3e} | {got:.3e} | {r:.2} |");
    }
    println!(
        "| {pop:?} | {eh} | {n} | pick {} | {:.3e} | best {} {:.3e} | {:.2} |",
        c.pick,
        c.pick_ase,
        c.best_name,
        c.best,
        c.pick_ase / c.best
    );
    if std::env::var("GEOPRIV_PLANNER_DEBUG").is_ok() {
        println!("  {}\n  {}", c.em, c.line);
    }
    (lo, hi)
}

fn check(cells: &[(Pop, f64, usize)], seed: u64) {
    println!("| population | εh | n | estimator | predicted | measured | measured/predicted |");
    println!("|---|---|---|---|---|---|---|");
    let mut bad = Vec::new();
    // GEOPRIV_PLANNER_GRID=61 (branch scope19): the CLI's default map
    // (61 × 61, up to 1024 bins per axis) instead of 31 × 31 with 512.
    let k = std::env::var("GEOPRIV_PLANNER_GRID").map_or(31, |v| v.parse().unwrap());
    let max_bins = if k > 31 { 1024 } else { 512 };
    for &(pop, eh, n) in cells {
        let c = run_cell_on(pop, eh, n, seed, k, max_bins);
        let (lo, hi) = report(pop, eh, n, &c);
        if lo < 1.0 / 3.0 || hi > 3.0 || c.rows.is_empty() {
            bad.push(format!("{pop:?} εh {eh} n {n}: ratio {lo:.2}..{hi:.2}"));
        }
        bad.extend(pick_beyond_1_5x(pop, eh, n, &c));
    }
    assert!(bad.is_empty(), "{bad:#?}");
}

/// CI: one cell per (population, εh regime), n <= 10^4 (a few seconds in
/// the test profile); the full grid is the ignored test below.
#[test]
fn planner_predicts_within_3x_and_picks_within_1_5x_of_the_best() {
    check(
        &[
            (Pop::Airports, 0.3, 1_000),
            (Pop::City, 1.0, 10_000),
            (Pop::Constructed, 3.0, 1_000),
            (Pop::Airports, 10.0, 1_000),
            (Pop::Airports, 30.0, 10_000),
            (Pop::City, 30.0, 1_000),
            (Pop::Constructed, 1000.0, 1_000),
            // Branch planmodel: EM was taken above εh = 50 (2.39x the
            // best measured here), and the coincident airports (32
            // devices a location) round into bins as wholes (the kernel
            // maps' rounding 4.8x their variance here).
            (Pop::City, 100.0, 10_000),
            (Pop::Airports, 100.0, 100_000),
        ],
        7,
    );
}

/// attack16 F2 (branch plan21): a sub-bin street along a bin axis. The
/// offset-averaged rounding charge read the street as a ridge and charged
/// nothing: on main every prediction here was 7.9x–30x below the measured
/// ASE and the εh 1000 pick (λ = 1) 1.59x the best (vector Laplace). With
/// the SE's own rounding share (the coherent pairs of the street's bins)
/// no prediction is low and the pick is within 1.5x; the share charges
/// the offset-averaged rounding V_a, not the street's own offset, so it
/// is high here (measured/predicted 0.22–0.36; docs/MATH.md, plan21).
#[test]
fn a_street_along_a_bin_axis_is_not_predicted_low() {
    let mut bad = Vec::new();
    for (eh, n) in [(100.0, 10_000), (1000.0, 10_000)] {
        let c = run_cell(Pop::Street, eh, n, 7);
        let (_, hi) = report(Pop::Street, eh, n, &c);
        if hi > 3.0 || c.rows.is_empty() {
            bad.push(format!(
                "Street εh {eh} n {n}: measured/predicted up to {hi:.2}"
            ));
        }
        bad.extend(pick_beyond_1_5x(Pop::Street, eh, n, &c));
    }
    assert!(bad.is_empty(), "{bad:#?}");
}

/// attack16 F4 (branch plan22): EM on a thin ring at high εh, on the
/// CLI's map (61 points, up to 1024 bins). Above εh 20 EM kept only its
/// own rounding terms, which read a ring's stretches along a bin axis as
/// ridges and charge them nothing: on main the 200 m ring at εh 1000 picks
/// EM at 11.35x the best (and the 20 m ring at εh 30 at 11.94x). Charging
/// EM only its own terms with the kernels taking the SE's rounding share
/// picked EM on the 20 m ring at εh 100 at 2.25x. With EM's prediction and
/// interval floored at its variance plus the share (docs/MATH.md §9.4,
/// plan22) both pick within 1.5x (λ = 1, 1.00x).
#[test]
fn em_on_a_thin_ring_at_high_eps_h_is_not_picked_far_above_the_best() {
    let mut bad = Vec::new();
    for (w, eh, n) in [(200.0, 1000.0, 1_000_000), (20.0, 100.0, 1_000_000)] {
        let c = run_cell_on(Pop::Ring(w), eh, n, 7, 61, 1024);
        report(Pop::Ring(w), eh, n, &c);
        bad.extend(pick_beyond_1_5x(Pop::Ring(w), eh, n, &c));
    }
    assert!(bad.is_empty(), "{bad:#?}");
}

/// attack17 F1 (branch lead17; docs/MATH.md §9.4 addendum "lead17"):
/// heavy jittered sites at εh 10. EM is not ranked here (its interval
/// spans 100x or more) and its point estimate is far below its error
/// (the bootstrap's bias² reads below 0 at the work cap). On main two
/// things picked it: (a) the kernel maps' floor against EM read that point
/// as EM's bias² (a ranked EM's premise), so λ = 1 was charged EM's own
/// distance from it (λ = 1 at 0.05 measured/predicted at seed 5,
/// n 10⁶); (b) EM sorted at that point ahead of λ = 1. On main: EM picked
/// at 3.91x (seed 7, n 10⁵), 4.40x (seed 3, n 10⁵) and 22.4x (seed 5,
/// n 10⁶) the best (λ = 1); with (a) alone 1.00x, 4.40x, 22.4x; with an
/// unranked EM's bias² read at its interval's top and plan20's minimax
/// rule against λ = 1 for an unranked EM whose point fell at its
/// interval's lower end, λ = 1 at 1.00x in all three. About 5.5 s of
/// CPU in the test profile.
#[test]
fn an_unranked_em_does_not_lend_its_distance_to_the_unbiased_map() {
    let bad = cells_beyond_3x_or_picked_beyond_1_5x(&[
        (Pop::ZipfSites, 10.0, 100_000, 7),
        (Pop::ZipfSites, 10.0, 100_000, 3),
        (Pop::ZipfSites, 10.0, 1_000_000, 5),
    ]);
    assert!(bad.is_empty(), "{bad:#?}");
}

/// attack17 F1 (branch plan23): heavy atoms at εh 10 on the CLI's map
/// (61 points, up to 1024 bins). EM's interval spans 100x there and it
/// was sorted at its point estimate, 7-27x below its measured ASE, while
/// λ = 1's bias² read the distance to EM's map as its own bias against
/// EM's (low) point bias²: on main 2cde698 the default map at n 10⁵ is EM
/// at 4.40x the best (λ = 1; seeds 1, 4, 6: 3.77x, 3.35x, 2.31x; seeds 3
/// and 5 pick λ = 1). With lead17's two rules (docs/MATH.md §9.4
/// addendum "lead17": EM's bias bounded by its interval's upper end in
/// λ = 1's floor, and an unranked EM whose point sits at its interval's
/// lower end yielding to λ = 1 by plan20's rule) the pick is λ = 1 at
/// 1.00x in all six seeds (1–6, measured on main 8afd0bc's planner).
/// `PLAN23_CELLS=n:seed,...` runs others. About 2.2 s of CPU.
#[test]
fn em_on_heavy_atoms_at_eps_h_10_is_not_picked_at_its_point_estimate() {
    let cells: Vec<(usize, u64)> = match std::env::var("PLAN23_CELLS") {
        Ok(v) => v
            .split(',')
            .map(|c| {
                let (n, s) = c.split_once(':').unwrap();
                (n.parse().unwrap(), s.parse().unwrap())
            })
            .collect(),
        Err(_) => vec![(100_000, 2)],
    };
    let mut bad = Vec::new();
    for (n, seed) in cells {
        let c = run_cell_on(Pop::ZipfAtoms, 10.0, n, seed, 61, 1024);
        report(Pop::ZipfAtoms, 10.0, n, &c);
        bad.extend(pick_beyond_1_5x(Pop::ZipfAtoms, 10.0, n, &c));
    }
    assert!(bad.is_empty(), "{bad:#?}");
}

#[test]
#[ignore = "the full table: GEOPRIV_PLANNER_FULL=1 cargo test --test planner_model -- --ignored --nocapture"]
fn planner_predicts_within_3x_full_grid() {
    if let Ok(c) = std::env::var("GEOPRIV_PLANNER_CELLS") {
        // pop:eh:n;...
        let cells: Vec<(Pop, f64, usize)> = c
            .split(';')
            .map(|t| {
                let f: Vec<&str> = t.split(':').collect();
                let pop = match f[0] {
                    "a" => Pop::Airports,
                    "c" => Pop::City,
                    // t<w in km>: the airports' twin of blob width w.
                    t if t.starts_with('t') => Pop::Twin(t[1..].parse::<f64>().unwrap() * 1e3),
                    "p" => Pop::FileTwin,
                    "z" => Pop::ZipfSites,
                    "pc" => Pop::CityFileTwin,
                    // m<k>: k atoms on a smooth background.
                    t if t.starts_with('m') => Pop::Atoms(t[1..].parse().unwrap()),
                    // c<w in km>: the city's twin of blob width w.
                    t if t.starts_with('c') => Pop::CityTwin(t[1..].parse::<f64>().unwrap() * 1e3),
                    _ => Pop::Constructed,
                };
                (pop, f[1].parse().unwrap(), f[2].parse().unwrap())
            })
            .collect();
        // GEOPRIV_PLANNER_SEED (default 7): the devices' and the noise's
        // seed, to see one cell's spread over realisations.
        let seed = std::env::var("GEOPRIV_PLANNER_SEED").map_or(7, |s| s.parse().unwrap());
        return check(&cells, seed);
    }
    let full = std::env::var("GEOPRIV_PLANNER_FULL").is_ok();
    let ns: &[usize] = if full {
        &[1_000, 10_000, 100_000, 1_000_000]
    } else {
        &[1_000, 10_000, 100_000]
    };
    let mut cells = Vec::new();
    for pop in [Pop::Airports, Pop::City, Pop::Constructed] {
        for &eh in &[0.1, 0.3, 1.0, 3.0, 10.0, 30.0, 100.0, 1000.0] {
            for &n in ns {
                cells.push((pop, eh, n));
            }
        }
    }
    check(&cells, 7);
}

/// Branch cells21 (issue 19 item 15): at seed 4 the unbiased map's noise
/// drew every λ < 1's bias estimate about 2.45 standard errors below 0;
/// the interval [avg − 2se, avg + 2se] closed to the point 0 and λ = 0
/// was ranked at its variance alone (482x and 13,520x under the measured
/// ASE) and picked at 2.57x and 5.82x the best map (EM). Every ranked
/// prediction within 3x and the pick within 1.5x of the best; EM on the
/// airports at εh 0.1, n = 10⁵ was exempt (measured/predicted 0.18, the
/// emlow floor's over-prediction, branches cells17 and cells20) until
/// branch rank15, which no longer ranks it there (its ASE interval spans
/// more than 9x; its upper end is held to measured <= 3x). The city at εh 0.3, n = 10³,
/// seed 3 is a third such cell. About 1.4 s of CPU in the test profile.
#[test]
fn a_chance_low_bias_estimate_ranks_no_kernel_map() {
    let bad = cells_beyond_3x_or_picked_beyond_1_5x(&[
        (Pop::City, 0.3, 10_000, 4),
        (Pop::Airports, 0.1, 100_000, 4),
        // The same at seed 3 (λ = 0 50x and λ = 0.2 11x low).
        (Pop::City, 0.3, 1_000, 3),
    ]);
    assert!(bad.is_empty(), "{bad:#?}");
}

/// Runs each (population, εh, n, seed) cell and lists every ranked
/// prediction whose measured/predicted ratio lies outside [1/3, 3] (an
/// upper end, EM not ranked since branch rank15, is held to measured <= 3 x
/// predicted only) and every pick beyond 1.5x of the best measured map.
fn cells_beyond_3x_or_picked_beyond_1_5x(cells: &[(Pop, f64, usize, u64)]) -> Vec<String> {
    let mut bad = Vec::new();
    for &(pop, eh, n, seed) in cells {
        let c = run_cell(pop, eh, n, seed);
        report(pop, eh, n, &c);
        for (name, pred, got, upper) in &c.rows {
            let r = got / pred;
            let held = (1.0 / 3.0..=3.0).contains(&r) || (*upper && r <= 3.0);
            if !held {
                bad.push(format!("{pop:?} εh {eh} n {n} seed {seed}: {name} {r:.2}"));
            }
        }
        bad.extend(pick_beyond_1_5x(pop, eh, n, &c));
    }
    bad
}

/// Branch plan19 (docs/MATH.md §9.4, "The bounds' confidence"): a kernel
/// map's bias² interval at z = 2.713 standard errors (a 1% miss
/// probability per ranked prediction over the three bounds it reads), not
/// 2. At 2 these three seed-cells ranked a kernel map more than 3x above
/// its measured ASE (the airports at εh 0.1, n = 10⁵, seed 36, λ = 0.8:
/// 0.33; the city at εh 0.1, n = 10³, seed 2, λ = 0.8: 0.32; the
/// constructed population at εh 0.5, n = 10³, seed 4, λ = 0.6: 0.30).
/// Every ranked prediction within 3x, every upper end at least a third of
/// the measured ASE, the pick within 1.5x of the best. About 2 s of CPU
/// in the test profile.
#[test]
fn kernel_bias_intervals_at_one_percent_rank_no_map_beyond_3x() {
    let bad = cells_beyond_3x_or_picked_beyond_1_5x(&[
        (Pop::Airports, 0.1, 100_000, 36),
        (Pop::City, 0.1, 1_000, 2),
        (Pop::Constructed, 0.5, 1_000, 4),
    ]);
    assert!(bad.is_empty(), "{bad:#?}");
}

/// Branch cells22 (docs/MATH.md §9.4, "EM at an early stop"): where EM's
/// held-out stop leaves its map with no more structure than the devices'
/// own sampling, its bias² is read at the log-centre of what the reports
/// allow less the distance it moved. Without it EM was under-predicted
/// 8.08x on the city at εh 0.1, n = 10³, seed 2 (t* = 4) and 5.27x on the
/// constructed population there at seed 1 (t* = 1, a cell not used to
/// choose the rule). About 0.7 s of CPU in the test profile.
#[test]
fn em_stopped_without_structure_is_predicted_within_3x() {
    let mut bad = Vec::new();
    for (pop, eh, n, seed) in [
        (Pop::City, 0.1, 1_000, 2),
        (Pop::Constructed, 0.1, 1_000, 1),
    ] {
        let c = run_cell(pop, eh, n, seed);
        report(pop, eh, n, &c);
        for (name, pred, got, upper) in &c.rows {
            // EM is not ranked here since branch rank15 (its interval spans
            // more than 9x); the early-stop centre is then the pick's point
            // estimate, stated in the line, and held to 3x here.
            let point = match em_interval_in_line(&c.line) {
                Some((_, _, Some(p))) if *upper => p,
                _ => *pred,
            };
            let r = got / point;
            if name.ends_with(" em") && !(1.0 / 3.0..=3.0).contains(&r) {
                bad.push(format!("{pop:?} εh {eh} n {n} seed {seed}: {name} {r:.2}"));
            }
        }
        bad.extend(pick_beyond_1_5x(pop, eh, n, &c));
    }
    assert!(bad.is_empty(), "{bad:#?}");
}

/// `scripts/city_twins.py` (branch twins19) computes the city's report law
/// from its own copy of the 12 neighbourhoods: the copy must be exact
/// (Rust's `{:?}` and Python's `repr` both print the shortest round-trip
/// decimal). On a mismatch the message carries the lines to paste.
#[test]
fn the_city_twin_script_carries_the_citys_neighbourhoods() {
    let script = include_str!("../scripts/city_twins.py");
    let lines: Vec<String> = city_hoods()
        .iter()
        .map(|(c, s, w)| format!("    ({:?}, {:?}, {:?}, {:?}),", c[0], c[1], s, w))
        .collect();
    let missing: Vec<&String> = lines
        .iter()
        .filter(|l| !script.contains(l.as_str()))
        .collect();
    assert!(
        missing.is_empty(),
        "scripts/city_twins.py HOODS differ from city_hoods(); expected:\n{}",
        lines.join("\n")
    );
}

/// Branch rank15 (docs/MATH.md §9.4, "EM ranked only where the reports
/// pin it"): EM is ranked only where its ASE interval from the reports,
/// [var + L, var + U], spans at most 9x, and its prediction is clamped
/// into [(var + U)/3, 3(var + L)]; elsewhere its number is the upper end
/// (`upper_bound`) and the line gives the interval. Every ranked
/// prediction within 3x, every upper end at least a third of the
/// measured ASE, the pick within 1.5x of the best, and EM not ranked at
/// either cell with its measured ASE inside the line's interval. On main
/// EM was ranked at both: 8.32x under its measured ASE on the city at
/// εh 0.3, n = 10³, seed 4 (EM stopped at t* = 6), and 0.11 (over: the
/// emlow floor) on the atoms at εh 0.3, n = 10⁵, seed 7. About 3 s of
/// CPU in the test profile.
#[test]
fn em_is_ranked_only_where_the_reports_pin_its_error() {
    let mut bad = Vec::new();
    for (pop, eh, n, seed) in [
        (Pop::City, 0.3, 1_000, 4),
        (Pop::Atoms(3000), 0.3, 100_000, 7),
    ] {
        let c = run_cell(pop, eh, n, seed);
        report(pop, eh, n, &c);
        for (name, pred, got, upper) in &c.rows {
            let r = got / pred;
            let held = if *upper {
                r <= 3.0
            } else {
                (1.0 / 3.0..=3.0).contains(&r)
            };
            if !held {
                bad.push(format!("{pop:?} εh {eh} n {n} seed {seed}: {name} {r:.2}"));
            }
        }
        // Not ranked at either cell: the line's interval holds EM's
        // measured ASE.
        let em = c.rows.iter().find(|r| r.0.ends_with(" em"));
        match (em, em_interval_in_line(&c.line)) {
            (Some(r), Some((lo, hi, _))) if r.3 && (lo..=hi).contains(&r.2) => {}
            (r, i) => bad.push(format!(
                "{pop:?} seed {seed}: EM {r:?}, interval {i:?}: {}",
                c.line
            )),
        }
        bad.extend(pick_beyond_1_5x(pop, eh, n, &c));
    }
    assert!(bad.is_empty(), "{bad:#?}");
}
