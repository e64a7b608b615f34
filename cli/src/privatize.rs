//! `geopriv privatize <family>`: one report per input point.

use crate::mechanism_args::MechanismArgs;
use crate::sensitivity::for_each_point;
use clap::{Args, ValueEnum};
use geopriv::geo::{LatLon, LocalEquirectangular, Projection, WebMercator};
use geopriv::{AnyQuery, Mechanism, Query, QueryDescriptor, Report};
use rand::RngCore;
use std::io::{self, BufRead, Write};

/// Output encodings.
#[derive(ValueEnum, Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    /// One JSON object per line.
    Json,
    /// postcard frames, COBS-encoded, each followed by a 0x00 byte.
    Binary,
}

/// How lat/lon input is turned into metres.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum ProjectionChoice {
    /// Web Mercator (EPSG:3857) metres, as in the paper.
    Mercator,
    /// Local equirectangular metres around a reference point.
    Local(f64, f64),
}

fn projection(s: &str) -> Result<ProjectionChoice, String> {
    if s == "mercator" {
        return Ok(ProjectionChoice::Mercator);
    }
    let rest = s
        .strip_prefix("local:")
        .ok_or_else(|| format!("`{s}`: expected `mercator` or `local:LAT,LON`"))?;
    let p = crate::query_args::pair(rest)?;
    Ok(ProjectionChoice::Local(p.0[0], p.0[1]))
}

/// Flags of `privatize` (besides the query's own).
#[derive(Args, Debug, Clone)]
pub struct PrivatizeArgs {
    #[command(flatten)]
    pub mechanism: MechanismArgs,
    /// Seed a reproducible (NOT secure) generator; without it the noise
    /// comes from a cryptographically secure generator keyed by the OS.
    #[arg(long, value_name = "N")]
    pub seed: Option<u64>,
    /// Output encoding.
    #[arg(long, value_enum, default_value = "json")]
    pub format: Format,
    /// Input lines are `lat,lon` in WGS84 degrees, projected to metres
    /// (2-D queries only).
    #[arg(long)]
    pub latlon: bool,
    /// Projection for --latlon: `mercator` or `local:LAT,LON`.
    #[arg(long, value_name = "mercator|local:LAT,LON", value_parser = projection, default_value = "mercator", allow_hyphen_values = true)]
    pub projection: ProjectionChoice,
}

/// What a run saw.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Summary {
    /// Reports written.
    pub released: u64,
    /// Malformed lines (reported on the error stream).
    pub malformed: u64,
}

/// Everything a run needs besides the streams.
pub struct Plan {
    pub query: AnyQuery,
    pub descriptor: QueryDescriptor,
    pub mechanism: Mechanism,
    pub format: Format,
    pub projection: Option<Box<dyn Projection>>,
}

impl PrivatizeArgs {
    /// The projection for --latlon (None without it).
    pub fn projection(&self, dimension: usize) -> Result<Option<Box<dyn Projection>>, String> {
        if !self.latlon {
            return Ok(None);
        }
        if dimension != 2 {
            return Err(format!(
                "--latlon needs a 2-D query (this one has {dimension} coordinate(s))"
            ));
        }
        Ok(Some(match self.projection {
            ProjectionChoice::Mercator => Box::new(WebMercator),
            ProjectionChoice::Local(lat, lon) => Box::new(
                LocalEquirectangular::new(LatLon::new(lat, lon).map_err(|e| e.to_string())?)
                    .map_err(|e| e.to_string())?,
            ),
        }))
    }
}

/// Reads points (or lat/lon pairs), writes one report per good line and
/// `line N: <reason>` on `err` for each bad one; later lines go on.
pub fn run<R: BufRead, W: Write, E: Write>(
    plan: &Plan,
    rng: &mut dyn RngCore,
    input: R,
    mut out: W,
    err: E,
) -> io::Result<Summary> {
    let dim = if plan.projection.is_some() {
        2
    } else {
        plan.query.dimension()
    };
    let name = plan.mechanism.name();
    let (epsilon, delta) = (plan.mechanism.epsilon(), plan.mechanism.delta());
    let (released, malformed) = for_each_point(input, dim, err, |point| {
        let value = (|| {
            if let Some(p) = &plan.projection {
                let ll = LatLon::new(point[0], point[1]).map_err(|e| e.to_string())?;
                let xy = p.forward(ll).map_err(|e| e.to_string())?;
                point.clear();
                point.extend_from_slice(&xy);
            }
            plan.mechanism
                .privatize(&plan.query, point, rng)
                .map_err(|e| e.to_string())
        })();
        Ok(match value {
            Ok(value) => {
                let report = Report::new(plan.descriptor.clone(), name, epsilon, delta, value);
                match plan.format {
                    Format::Json => report.write_json_line(&mut out)?,
                    Format::Binary => report.write_frame(&mut out)?,
                }
                Ok(())
            }
            Err(reason) => Err(reason),
        })
    })?;
    out.flush()?;
    Ok(Summary {
        released,
        malformed,
    })
}
