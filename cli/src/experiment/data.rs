//! Data for the experiments: the bundled airports (real locations), the
//! simulated incomes of docs/MATH.md §7 and a synthetic city for large n.
//!
//! Provenance and licences are in `examples/data/README.md`.

use super::error::{ExperimentError, Result};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use rand_distr::{Distribution, StandardNormal};

/// The bundled airports table (vega_datasets 0.9.0, public domain data),
/// compiled into the binary so the demo runs from any directory.
pub const AIRPORTS_CSV: &str = include_str!("../../../examples/data/airports.csv");

/// Web Mercator projection (EPSG:3857) of (latitude, longitude) in degrees
/// to metres, through the core crate's `geopriv::geo::WebMercator`.
/// Distances in this plane are ground distances times 1/cos φ.
pub fn web_mercator(lat_deg: f64, lon_deg: f64) -> Result<[f64; 2]> {
    use geopriv::geo::{LatLon, Projection, WebMercator};
    let point = LatLon::new(lat_deg, lon_deg)?;
    Ok(WebMercator.forward(point)?)
}

/// Which airports to keep.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Region {
    /// The contiguous United States: latitude 24..50 N, longitude 125..66 W.
    Conus,
    /// Every row of the table.
    All,
}

impl Region {
    fn contains(self, lat: f64, lon: f64) -> bool {
        match self {
            Region::All => true,
            Region::Conus => (24.0..=50.0).contains(&lat) && (-125.0..=-66.0).contains(&lon),
        }
    }
}

/// Split one CSV record (RFC 4180 quoting: a field in double quotes may
/// contain commas, and `""` inside it is a literal quote). Records must not
/// span lines.
pub fn split_csv_line(line: &str) -> Vec<String> {
    let mut fields = Vec::new();
    let mut field = String::new();
    let mut quoted = false;
    let mut chars = line.chars().peekable();
    while let Some(c) = chars.next() {
        match (c, quoted) {
            ('"', true) if chars.peek() == Some(&'"') => {
                field.push('"');
                chars.next();
            }
            ('"', _) => quoted = !quoted,
            (',', false) => fields.push(std::mem::take(&mut field)),
            _ => field.push(c),
        }
    }
    fields.push(field);
    fields
}

/// Parse a CSV with a header naming `latitude` and `longitude` columns
/// (or `lat`, `lon`/`lng`; other columns are ignored). Returns (latitude,
/// longitude) pairs in degrees.
pub fn parse_lat_lon_csv(text: &str) -> Result<Vec<(f64, f64)>> {
    let mut lines = text.lines().filter(|l| !l.trim().is_empty());
    let header = lines
        .next()
        .ok_or_else(|| ExperimentError::Data("empty CSV".into()))?;
    let cols: Vec<String> = split_csv_line(header)
        .iter()
        .map(|c| c.trim().to_ascii_lowercase())
        .collect();
    let find = |names: &[&str]| {
        cols.iter()
            .position(|c| names.contains(&c.as_str()))
            .ok_or_else(|| {
                ExperimentError::Data(format!("CSV header lacks a column named {}", names[0]))
            })
    };
    let ilat = find(&["latitude", "lat"])?;
    let ilon = find(&["longitude", "lon", "lng"])?;
    let mut out = Vec::new();
    for (k, line) in lines.enumerate() {
        let fields = split_csv_line(line);
        let get = |i: usize| -> Result<f64> {
            let f = fields.get(i).ok_or_else(|| {
                ExperimentError::Data(format!("CSV line {}: too few fields", k + 2))
            })?;
            f.trim()
                .parse::<f64>()
                .map_err(|e| ExperimentError::Data(format!("CSV line {}: {e}: {f:?}", k + 2)))
        };
        out.push((get(ilat)?, get(ilon)?));
    }
    Ok(out)
}

/// Locations (Web Mercator metres) of the airports in `region`, from `csv`
/// text (the bundled table when `None`).
pub fn airports(csv: Option<&str>, region: Region) -> Result<Vec<[f64; 2]>> {
    parse_lat_lon_csv(csv.unwrap_or(AIRPORTS_CSV))?
        .into_iter()
        .filter(|&(lat, lon)| region.contains(lat, lon))
        .map(|(lat, lon)| web_mercator(lat, lon))
        .collect()
}

/// Log-normal household incomes (docs/MATH.md §7): ln income ~ N(μ, σ²).
#[derive(Clone, Copy, Debug)]
pub struct IncomeModel {
    /// Mean of ln income (log-dollars).
    pub mu: f64,
    /// Standard deviation of ln income.
    pub sigma: f64,
}

impl IncomeModel {
    /// The fit of docs/MATH.md §7: μ = 11.494, σ = 0.829.
    pub const CENSUS_FIT: IncomeModel = IncomeModel {
        mu: 11.494,
        sigma: 0.829,
    };

    /// One income in dollars.
    pub fn sample<R: Rng + ?Sized>(&self, rng: &mut R) -> f64 {
        let z: f64 = StandardNormal.sample(rng);
        (self.mu + self.sigma * z).exp()
    }

    /// E\[income\] = exp(μ + σ²/2).
    pub fn mean(&self) -> f64 {
        (self.mu + self.sigma * self.sigma / 2.0).exp()
    }
}

/// Correlated (income, debt), docs/MATH.md §7: (ln income, ln debt) bivariate
/// normal, equal σ, correlation ρ of the logs, E\[debt\] = ratio · E\[income\].
#[derive(Clone, Copy, Debug)]
pub struct IncomeDebtModel {
    /// The income marginal.
    pub income: IncomeModel,
    /// Correlation of ln income and ln debt.
    pub log_correlation: f64,
    /// E\[debt\] / E\[income\].
    pub debt_mean_ratio: f64,
}

impl IncomeDebtModel {
    /// Correlation 0.4, debt mean 1.791 × income mean.
    pub const CENSUS_FIT: IncomeDebtModel = IncomeDebtModel {
        income: IncomeModel::CENSUS_FIT,
        log_correlation: 0.4,
        debt_mean_ratio: 1.791,
    };

    /// μ of ln debt: with equal σ the mean ratio is exp(μ_debt - μ).
    pub fn debt_mu(&self) -> f64 {
        self.income.mu + self.debt_mean_ratio.ln()
    }

    /// One household [income, debt] in dollars.
    pub fn sample<R: Rng + ?Sized>(&self, rng: &mut R) -> [f64; 2] {
        let z1: f64 = StandardNormal.sample(rng);
        let z2: f64 = StandardNormal.sample(rng);
        let rho = self.log_correlation;
        let s = self.income.sigma;
        let zd = rho * z1 + (1.0 - rho * rho).sqrt() * z2;
        [
            (self.income.mu + s * z1).exp(),
            (self.debt_mu() + s * zd).exp(),
        ]
    }
}

/// A synthetic city for large-n KDE runs: `SIDE` × `SIDE` metres, 85% of the
/// residents in Gaussian neighbourhoods, 15% uniform. The neighbourhoods
/// are drawn once from a fixed seed, so every run sees the same city;
/// residents are drawn from the run's seed.
#[derive(Clone, Debug)]
pub struct SyntheticCity {
    /// (centre, spread in metres, weight) of each neighbourhood.
    pub neighbourhoods: Vec<([f64; 2], f64, f64)>,
    /// Share of residents spread uniformly over the square.
    pub background: f64,
}

impl SyntheticCity {
    /// Side of the square city, metres.
    pub const SIDE: f64 = 20_000.0;

    /// The standard city: 12 neighbourhoods, 15% background.
    pub fn standard() -> Self {
        let mut rng = StdRng::seed_from_u64(0xC17);
        let neighbourhoods = (0..12)
            .map(|i| {
                let centre = [
                    rng.random_range(0.15..0.85) * Self::SIDE,
                    rng.random_range(0.15..0.85) * Self::SIDE,
                ];
                // The first one is a dense centre; the rest vary.
                let spread = if i == 0 {
                    900.0
                } else {
                    rng.random_range(300.0..1500.0)
                };
                let weight = if i == 0 {
                    3.0
                } else {
                    rng.random_range(0.5..1.5)
                };
                (centre, spread, weight)
            })
            .collect();
        Self {
            neighbourhoods,
            background: 0.15,
        }
    }

    /// One resident's location in metres, inside [0, SIDE]².
    pub fn sample<R: Rng + ?Sized>(&self, rng: &mut R) -> [f64; 2] {
        if rng.random::<f64>() < self.background {
            return [
                rng.random::<f64>() * Self::SIDE,
                rng.random::<f64>() * Self::SIDE,
            ];
        }
        let total: f64 = self.neighbourhoods.iter().map(|n| n.2).sum();
        let mut u = rng.random::<f64>() * total;
        let mut pick = &self.neighbourhoods[self.neighbourhoods.len() - 1];
        for n in &self.neighbourhoods {
            if u < n.2 {
                pick = n;
                break;
            }
            u -= n.2;
        }
        let (c, s, _) = *pick;
        let zx: f64 = StandardNormal.sample(rng);
        let zy: f64 = StandardNormal.sample(rng);
        [
            (c[0] + s * zx).clamp(0.0, Self::SIDE),
            (c[1] + s * zy).clamp(0.0, Self::SIDE),
        ]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bundled_airports_parse_and_project() {
        let all = parse_lat_lon_csv(AIRPORTS_CSV).unwrap();
        assert_eq!(all.len(), 3376);
        // First data row: 00M, Thigpen, Bay Springs MS.
        assert_eq!(all[0], (31.95376472, -89.23450472));
        let conus = airports(None, Region::Conus).unwrap();
        assert_eq!(conus.len(), 3069);
        assert_eq!(airports(None, Region::All).unwrap().len(), 3376);
        for p in &conus {
            // Contiguous US in Web Mercator: x in [-13.9, -7.3] Mm, y in [2.7, 6.5] Mm.
            assert!((-13.92e6..=-7.34e6).contains(&p[0]), "{p:?}");
            assert!((2.75e6..=6.45e6).contains(&p[1]), "{p:?}");
        }
    }

    #[test]
    fn csv_with_quotes_and_other_columns() {
        let text = "\"name\",\"lon\",\"lat\"\nA,-1.5,2.25\n\n\"B, \"\"the\"\" b\",\"3\",-4\n";
        assert_eq!(
            parse_lat_lon_csv(text).unwrap(),
            vec![(2.25, -1.5), (-4.0, 3.0)]
        );
        assert_eq!(
            split_csv_line("a,\"b, c\",\"d \"\"e\"\"\",,"),
            vec!["a", "b, c", "d \"e\"", "", ""]
        );
        assert!(parse_lat_lon_csv("a,b\n1,2\n").is_err());
        assert!(parse_lat_lon_csv("lat,lon\n1,x\n").is_err());
        assert!(parse_lat_lon_csv("lat,lon\n1\n").is_err());
    }

    #[test]
    fn web_mercator_reference_points() {
        let o = web_mercator(0.0, 0.0).unwrap();
        assert!(o[0] == 0.0 && o[1].abs() < 1e-6, "{o:?}");
        // 180 E on the equator is half the circumference.
        let p = web_mercator(0.0, 180.0).unwrap();
        assert!((p[0] - 20_037_508.342789244).abs() < 1e-6);
        // EPSG:3857 of 45 N: y = R ln tan(67.5°) = 5,621,521.486 m.
        let p = web_mercator(45.0, -90.0).unwrap();
        assert!((p[1] - 5_621_521.486).abs() < 1e-2, "{}", p[1]);
        assert!((p[0] + 10_018_754.171394622).abs() < 1e-6);
        // Symmetric in latitude.
        let q = web_mercator(-45.0, -90.0).unwrap();
        assert!((p[1] + q[1]).abs() < 1e-6);
        assert!(web_mercator(89.0, 0.0).is_err());
        assert!(web_mercator(f64::NAN, 0.0).is_err());
    }

    #[test]
    fn income_model_matches_its_targets() {
        let m = IncomeModel::CENSUS_FIT;
        let mut rng = StdRng::seed_from_u64(7);
        let n = 400_000;
        let logs: Vec<f64> = (0..n).map(|_| m.sample(&mut rng).ln()).collect();
        let mean = logs.iter().sum::<f64>() / n as f64;
        let var = logs.iter().map(|l| (l - mean).powi(2)).sum::<f64>() / n as f64;
        assert!((mean - 11.494).abs() < 0.005, "{mean}");
        assert!((var.sqrt() - 0.829).abs() < 0.005, "{}", var.sqrt());
        // Dollar mean exp(μ + σ²/2) ≈ $138k.
        let mut rng = StdRng::seed_from_u64(8);
        let dollars = (0..n).map(|_| m.sample(&mut rng)).sum::<f64>() / n as f64;
        assert!((dollars / m.mean() - 1.0).abs() < 0.01, "{dollars}");
    }

    #[test]
    fn income_debt_model_matches_its_targets() {
        let m = IncomeDebtModel::CENSUS_FIT;
        let mut rng = StdRng::seed_from_u64(9);
        let n = 400_000;
        let draws: Vec<[f64; 2]> = (0..n).map(|_| m.sample(&mut rng)).collect();
        let mean = |f: &dyn Fn(&[f64; 2]) -> f64| draws.iter().map(f).sum::<f64>() / n as f64;
        let (mi, md) = (mean(&|d| d[0]), mean(&|d| d[1]));
        assert!((md / mi - 1.791).abs() < 0.03, "debt/income {}", md / mi);
        let (li, ld) = (mean(&|d| d[0].ln()), mean(&|d| d[1].ln()));
        let cov = mean(&|d| (d[0].ln() - li) * (d[1].ln() - ld));
        let vi = mean(&|d| (d[0].ln() - li).powi(2));
        let vd = mean(&|d| (d[1].ln() - ld).powi(2));
        let corr = cov / (vi * vd).sqrt();
        assert!((corr - 0.4).abs() < 0.01, "{corr}");
        assert!((vd.sqrt() - 0.829).abs() < 0.005);
    }

    #[test]
    fn synthetic_city_is_seeded_and_inside_its_square() {
        let city = SyntheticCity::standard();
        let draw = |seed| {
            let mut rng = StdRng::seed_from_u64(seed);
            (0..2000).map(|_| city.sample(&mut rng)).collect::<Vec<_>>()
        };
        let a = draw(1);
        assert_eq!(a, draw(1));
        assert_ne!(a, draw(2));
        assert!(a
            .iter()
            .all(|p| p.iter().all(|c| (0.0..=SyntheticCity::SIDE).contains(c))));
        // Clustered: the densest neighbourhood holds far more than a uniform
        // city would put within 1 km of its centre (π km² / 400 km² ≈ 0.8%).
        let c = city.neighbourhoods[0].0;
        let near = a
            .iter()
            .filter(|p| ((p[0] - c[0]).powi(2) + (p[1] - c[1]).powi(2)).sqrt() < 1000.0)
            .count();
        assert!(near as f64 / a.len() as f64 > 0.05, "{near}");
    }
}
