//! Worked example of the central model (docs/MATH.md §11.1): the median
//! distance of US airports from the 2020 mean centre of population of the
//! United States (37.4159 °N, 92.1338 °W, near Hartville, Missouri),
//! released with differential privacy over the airport records.
//!
//! Data: `examples/data/airports.csv` (public domain, see its README).
//! Each airport is one record; its value is its great-circle distance in km,
//! clipped to the public range [0, Λ] with Λ = 10,000 km (clipping a record
//! by a public rule is part of the query, so neighbours stay neighbours).
//!
//! Run: `cargo run --release --example central_median`.

use geopriv::central::median::{CentralNoise, MedianMechanism, SortedDataset};
use rand::rngs::StdRng;
use rand::SeedableRng;

const LAMBDA_KM: f64 = 10_000.0;

fn haversine_km(lat1: f64, lon1: f64, lat2: f64, lon2: f64) -> f64 {
    let (p1, p2) = (lat1.to_radians(), lat2.to_radians());
    let dp = p2 - p1;
    let dl = (lon2 - lon1).to_radians();
    let a = (dp / 2.0).sin().powi(2) + p1.cos() * p2.cos() * (dl / 2.0).sin().powi(2);
    2.0 * 6371.0088 * a.sqrt().asin()
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/examples/data/airports.csv");
    let text = std::fs::read_to_string(path)?;
    let mut km = Vec::new();
    for line in text.lines().skip(1) {
        // The last two comma-separated fields are latitude and longitude.
        let mut f = line.rsplit(',');
        let lon: f64 = f.next().ok_or("no longitude")?.parse()?;
        let lat: f64 = f.next().ok_or("no latitude")?.parse()?;
        km.push(haversine_km(lat, lon, 37.4159, -92.1338).min(LAMBDA_KM));
    }
    let data = SortedDataset::new(&km, LAMBDA_KM)?;
    let m = data.quantile_rank(0.5)?;
    let truth = data.order_statistic(m)?;
    println!(
        "n = {} airports, true median {truth:.1} km (rank {m}, lower median)",
        data.len()
    );
    println!("noise\tepsilon\tone_release_km\tnoise_sd_km\trmse_km_2000_releases");
    for eps in [0.1, 1.0] {
        for kind in [
            CentralNoise::PolyPlace,
            CentralNoise::STUDENT_T,
            CentralNoise::Laplace { delta: 1e-6 },
            CentralNoise::LectureCauchy { k: 4.0 },
        ] {
            let mech = MedianMechanism::new(kind, eps, LAMBDA_KM)?;
            let mut rng = StdRng::seed_from_u64(2026);
            let one = mech.release(&data, 0.5, &mut rng)?;
            let sd = mech.noise_std(&data, 0.5)?;
            let reps = 2000;
            let mut sq = 0.0;
            for _ in 0..reps {
                let y = mech.release(&data, 0.5, &mut rng)?;
                sq += (y - truth).powi(2);
            }
            println!(
                "{}\t{eps}\t{one:.1}\t{}\t{:.2}",
                kind.name(),
                sd.map_or("inf".to_string(), |s| format!("{s:.2}")),
                (sq / reps as f64).sqrt()
            );
        }
    }
    println!("(noise_sd depends on the data and is not private; it is shown to judge the method)");
    Ok(())
}
