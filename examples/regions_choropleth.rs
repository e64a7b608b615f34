//! Regions on real locations (docs/MATH.md §13): the 3,069 contiguous-US
//! airports (examples/data/airports.csv, public domain) as devices.
//!
//! 1. **One region, wide ramp** (BENCHMARKS.md "Regions"): a 6 x 4 grid
//!    cell over Kansas as a GeoJSON feature (lon/lat, Web Mercator metres),
//!    ramp W = 100 km, ε = 1e-4 per metre (W = 10/ε). Per device, the noise
//!    of one release with the smooth PolyPlace mechanism, with global
//!    Lipschitz Laplace, and the error of noise a priori (f of a noisy
//!    location), by distance from the ramp in units of 1/ε.
//! 2. **Districts under one per-device budget**: the 24 grid cells as one
//!    [`DistrictSet`] (certified ℓ1 constant), the planner's pick at the
//!    per-device ε, and the estimated shares of the mechanisms (noise a
//!    priori plain and debiased through the district channel) against the
//!    truth, with a picture (a choropleth, SVG and PNG: truth and the
//!    planner's pick side by side).
//!
//! Run (seeded): `cargo run --release --example regions_choropleth -- [COPIES] [OUT.svg]`;
//! COPIES (default 1) replicates every airport, so n = 3,069 · COPIES; the
//! PNG is written beside OUT.svg (OUT.png).

use geopriv::geo::WebMercator;
use geopriv::map::{
    plan, DistrictChannel, DistrictSet, MapAggregator, MapMechanism, MapRelease, QuerySet,
};
use geopriv::query::region_geojson::{region_from_geojson, FeatureSelector};
use geopriv::{LatLon, Mechanism, Projection, Query};
use rand::rngs::StdRng;
use rand::SeedableRng;
use std::fmt::Write as _;

const LON: [f64; 2] = [-125.0, -66.0];
const LAT: [f64; 2] = [24.0, 50.0];
const NX: usize = 6;
const NY: usize = 4;

/// The grid districts as a GeoJSON FeatureCollection in lon/lat.
fn grid_geojson() -> String {
    let mut s = String::from(r#"{"type":"FeatureCollection","features":["#);
    for i in 0..NX {
        for j in 0..NY {
            let x0 = LON[0] + (LON[1] - LON[0]) * i as f64 / NX as f64;
            let x1 = LON[0] + (LON[1] - LON[0]) * (i + 1) as f64 / NX as f64;
            let y0 = LAT[0] + (LAT[1] - LAT[0]) * j as f64 / NY as f64;
            let y1 = LAT[0] + (LAT[1] - LAT[0]) * (j + 1) as f64 / NY as f64;
            if i + j > 0 {
                s.push(',');
            }
            write!(
                s,
                r#"{{"type":"Feature","id":"c{i}r{j}","properties":{{}},"geometry":{{"type":"Polygon","coordinates":[[[{x0},{y0}],[{x1},{y0}],[{x1},{y1}],[{x0},{y1}],[{x0},{y0}]]]}}}}"#
            )
            .unwrap();
        }
    }
    s.push_str("]}");
    s
}

fn airports() -> Result<Vec<[f64; 2]>, Box<dyn std::error::Error>> {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/examples/data/airports.csv");
    let text = std::fs::read_to_string(path)?;
    let mut out = Vec::new();
    for line in text.lines().skip(1) {
        let mut f = line.rsplit(',');
        let lon: f64 = f.next().ok_or("no longitude")?.parse()?;
        let lat: f64 = f.next().ok_or("no latitude")?.parse()?;
        if (LAT[0]..=LAT[1]).contains(&lat) && (LON[0]..=LON[1]).contains(&lon) {
            out.push(WebMercator.forward(LatLon::new(lat, lon)?)?);
        }
    }
    Ok(out)
}

fn one_region(points: &[[f64; 2]]) -> Result<(), Box<dyn std::error::Error>> {
    let eps = 1e-4;
    let w = 100_000.0;
    let q = region_from_geojson(
        &grid_geojson(),
        &FeatureSelector::Id("c3r2".into()),
        w,
        Some(&WebMercator),
    )?;
    let smooth = Mechanism::polyplace(eps)?;
    let global = Mechanism::global_laplace(eps)?;
    let apriori = Mechanism::noise_a_priori(eps)?;
    let g_sd = global
        .output_density(&q, &points[0])?
        .ok_or("density")?
        .variance()
        .ok_or("var")?
        .sqrt();
    // Bands of e = |sd| - W/2 in units of 1/ε.
    let bands = [
        (f64::NEG_INFINITY, 0.0),
        (0.0, 1.0),
        (1.0, 10.0),
        (10.0, 100.0),
        (100.0, f64::INFINITY),
    ];
    let mut rows = vec![(0usize, 0.0f64, 0.0f64); bands.len()];
    let mut rng = StdRng::seed_from_u64(24);
    for x in points {
        let e = (q.signed_distance(x)?.abs() - 0.5 * w) * eps;
        let b = bands
            .iter()
            .position(|&(lo, hi)| e >= lo && e < hi)
            .unwrap_or(0);
        let sd = smooth
            .output_density(&q, x)?
            .ok_or("density")?
            .variance()
            .ok_or("var")?
            .sqrt();
        let f = q.value(x)?;
        let reps = 200;
        let mut sq = 0.0;
        for _ in 0..reps {
            let y = apriori.privatize_unmetered(&q, x, &mut rng)?;
            sq += (y - f) * (y - f);
        }
        rows[b].0 += 1;
        rows[b].1 += sd * sd;
        rows[b].2 += sq / reps as f64;
    }
    println!("## One region (c3r2, W = 100 km, ε = 1e-4 per metre, W·ε = 10)");
    println!("| distance beyond the ramp (units of 1/ε) | devices | PolyPlace noise sd | global Laplace noise sd | noise a priori RMSE |");
    println!("|---|---|---|---|---|");
    for ((lo, hi), (n, v, a)) in bands.iter().zip(&rows) {
        if *n == 0 {
            continue;
        }
        let label = if lo.is_infinite() {
            "on the ramp".to_string()
        } else {
            format!("[{lo}, {hi})")
        };
        println!(
            "| {label} | {n} | {:.3e} | {:.3e} | {:.3e} |",
            (v / *n as f64).sqrt(),
            g_sd,
            (a / *n as f64).sqrt()
        );
    }
    Ok(())
}

/// Blue scale for a share in [0, 0.25].
fn shade(v: f64) -> u8 {
    let t = if v.is_finite() {
        v.clamp(0.0, 0.25) / 0.25
    } else {
        0.0
    };
    (255.0 * (1.0 - t)) as u8
}

const FONT: &[u8] = include_bytes!(concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/cli/assets/DejaVuSans.ttf"
));

/// The choropleth as a PNG (plotters' bitmap backend, the CLI's bundled
/// DejaVu font): one panel per estimate, each district a cell of the grid
/// coloured by its share, the share written in it.
fn png(out: &str, pictures: &[(String, Vec<f64>)]) -> Result<(), Box<dyn std::error::Error>> {
    use plotters::prelude::*;
    use plotters::style::{register_font, FontStyle};
    register_font("sans-serif", FontStyle::Normal, FONT).map_err(|_| "font")?;
    let (cw, ch) = (80i32, 64i32);
    let panel_w = NX as i32 * cw + 30;
    let size = (
        (pictures.len() as i32 * panel_w + 10) as u32,
        (NY as i32 * ch + 50) as u32,
    );
    let root = BitMapBackend::new(out, size).into_drawing_area();
    root.fill(&WHITE)?;
    let title = ("sans-serif", 14).into_font();
    let label = ("sans-serif", 12).into_font();
    for (k, (name, vals)) in pictures.iter().enumerate() {
        let ox = k as i32 * panel_w + 10;
        root.draw(&Text::new(name.clone(), (ox, 8), title.clone()))?;
        for i in 0..NX {
            for j in 0..NY {
                let v = vals[i * NY + j];
                let (x, y) = (ox + i as i32 * cw, 35 + (NY - 1 - j) as i32 * ch);
                let c = shade(v);
                root.draw(&Rectangle::new(
                    [(x, y), (x + cw, y + ch)],
                    RGBColor(c, c, 255).filled(),
                ))?;
                root.draw(&Rectangle::new([(x, y), (x + cw, y + ch)], BLACK))?;
                root.draw(&Text::new(
                    format!("{v:.3}"),
                    (x + 12, y + 26),
                    label.clone(),
                ))?;
            }
        }
    }
    root.present()?;
    Ok(())
}

fn districts(
    points: &[[f64; 2]],
    copies: usize,
    out: &str,
) -> Result<(), Box<dyn std::error::Error>> {
    let eps = 1e-5;
    let w = 200_000.0;
    let set = DistrictSet::from_geojson(&grid_geojson(), w, Some(&WebMercator))?;
    let l1 = set.l1();
    let n = points.len() * copies;
    println!("\n## {NX} x {NY} districts, W = 200 km, per-device ε = 1e-5 per metre, n = {n}");
    println!(
        "certified ℓ1 constant: {:.3e} per metre (= K/W, K = {:.0}); largest secant found {:.3e}",
        l1.bound,
        l1.bound * w,
        l1.numerical
    );
    let mut truth = vec![0.0; set.len()];
    for x in points {
        for (t, v) in truth.iter_mut().zip(set.values(x)?) {
            *t += v / points.len() as f64;
        }
    }
    let qs = QuerySet::Districts(set.clone());
    let p = plan(&qs, eps, n as u64, None)?;
    println!("planner: {}", p.line);
    let channel = DistrictChannel::standard(&set, eps)?;
    println!(
        "district channel: {} Monte Carlo pairs per district, every entry within {:.3} of its integral (probability 1 - 1e-6)",
        (2e7 / (set.len() * set.len()) as f64).clamp(100.0, 4_000.0) as usize,
        channel.entry_error_bound()
    );
    let ase = |e: &[f64]| {
        e.iter()
            .zip(&truth)
            .map(|(a, b)| (a - b) * (a - b))
            .sum::<f64>()
            / truth.len() as f64
    };
    let predicted = |name: &str| {
        p.predictions
            .iter()
            .find(|q| q.name == name)
            .map_or(f64::NAN, |q| q.ase)
    };
    let mut pictures = vec![("truth".to_string(), truth.clone())];
    let mut rng = StdRng::seed_from_u64(2024);
    println!("| mechanism | per-device total | predicted ASE | measured ASE |");
    println!("|---|---|---|---|");
    for mech in [
        MapMechanism::VectorLaplace,
        MapMechanism::APriori,
        MapMechanism::Composition,
    ] {
        let release = MapRelease::new(qs.clone(), mech, eps)?;
        let mut agg = MapAggregator::new(qs.clone(), mech, eps)?;
        for _ in 0..copies {
            for x in points {
                agg.add(&release.release_unmetered(x, &mut rng)?)?;
            }
        }
        let est = agg.estimate(Some(0.0))?;
        let mut rows = vec![(mech.name(), est.values.clone())];
        if mech == MapMechanism::APriori {
            rows = vec![
                ("a-priori λ=0.0".to_string(), est.values.clone()),
                (
                    "a-priori debiased".to_string(),
                    channel.debias(&est.values)?,
                ),
            ];
        }
        for (name, vals) in rows {
            println!(
                "| {name} | {} | {:.2e} | {:.2e} |",
                release.per_device_total(),
                predicted(&name),
                ase(&vals)
            );
            if p.pick().name == name {
                pictures.push((format!("{name} (planner's pick)"), vals));
            }
        }
    }
    // SVG: panels side by side.
    let (cw, ch) = (60.0, 50.0);
    let mut svg = format!(
        r#"<svg xmlns="http://www.w3.org/2000/svg" width="{}" height="{}" font-family="sans-serif" font-size="12">"#,
        pictures.len() as f64 * (NX as f64 * cw + 30.0),
        NY as f64 * ch + 40.0
    );
    for (k, (title, vals)) in pictures.iter().enumerate() {
        let ox = k as f64 * (NX as f64 * cw + 30.0) + 10.0;
        write!(svg, r#"<text x="{ox}" y="15">{title}</text>"#)?;
        for i in 0..NX {
            for j in 0..NY {
                let v = vals[i * NY + j];
                let (x, y) = (ox + i as f64 * cw, 25.0 + (NY - 1 - j) as f64 * ch);
                let c = shade(v);
                write!(
                    svg,
                    r#"<rect x="{x}" y="{y}" width="{cw}" height="{ch}" fill="rgb({c},{c},255)" stroke="black"/><text x="{}" y="{}">{:.3}</text>"#,
                    x + 8.0,
                    y + 30.0,
                    v
                )?;
            }
        }
    }
    svg.push_str("</svg>\n");
    std::fs::write(out, svg)?;
    let png_out = format!("{}.png", out.strip_suffix(".svg").unwrap_or(out));
    png(&png_out, &pictures)?;
    println!("pictures: {out}, {png_out}");
    Ok(())
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().collect();
    let copies: usize = args.get(1).map(|s| s.parse()).transpose()?.unwrap_or(1);
    let out = args
        .get(2)
        .cloned()
        .unwrap_or_else(|| "target/regions_choropleth.svg".into());
    let points = airports()?;
    one_region(&points)?;
    districts(&points, copies, &out)?;
    Ok(())
}
