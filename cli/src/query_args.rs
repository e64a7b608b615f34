//! Query and growth flags, shared by every subcommand that works with one
//! query (`sensitivity`, `privatize` and `audit`).
//!
//! `QueryCommand<A>` is the list of query families, one clap subcommand
//! each (`threshold`, `interval`, `two-way`, `kde`). Every family gets its
//! own flags plus the flags `A` of the calling command, e.g.
//! `QueryCommand<GrowthArgs>` for `sensitivity`; a later command can
//! flatten `GrowthArgs` into its own `Args` struct together with, say,
//! `--epsilon`.

use clap::builder::PossibleValue;
use clap::{Args, Subcommand, ValueEnum};
use geopriv::server::escape::Untrusted;
use geopriv::{AnyQuery, Error, Growth, GrowthKind, QueryDescriptor};

/// The query families. `A` holds the flags the calling command adds to
/// every family.
#[derive(Subcommand, Debug, Clone)]
pub enum QueryCommand<A: Args> {
    /// Soft threshold "x > T" (one coordinate per point).
    ///
    /// f(x) = 0 below T - W/2, 1 above T + W/2, linear on the ramp in
    /// between.
    Threshold {
        #[command(flatten)]
        query: ThresholdArgs,
        #[command(flatten)]
        common: A,
    },
    /// Soft interval "A <= x <= B" (one coordinate per point).
    ///
    /// Ramps of width W centred at A and at B, f = 1 on the plateau in
    /// between, 0 outside. Needs B - A >= W.
    Interval {
        #[command(flatten)]
        query: IntervalArgs,
        #[command(flatten)]
        common: A,
    },
    /// Soft two-way threshold "x1 > T1 and x2 > T2" (two coordinates per
    /// point).
    ///
    /// f = 1 beyond both thresholds, 0 below either; a ramp band of width W
    /// runs along x1 = T1 and x2 = T2, joined by a rounded corner.
    #[command(name = "two-way")]
    TwoWay {
        #[command(flatten)]
        query: TwoWayArgs,
        #[command(flatten)]
        common: A,
    },
    /// Gaussian kernel at a query point t (d coordinates per point).
    ///
    /// f(x) = exp(-|x - t|² / (2 H²)); the dimension d is the number of
    /// coordinates given to --center.
    Kde {
        #[command(flatten)]
        query: KdeArgs,
        #[command(flatten)]
        common: A,
    },
    /// Soft membership of a region read from GeoJSON (two coordinates per
    /// point, metres).
    ///
    /// f(x) = clamp(1/2 + sd(x)/W, 0, 1), sd the signed distance to the
    /// region's boundary (positive inside): 1 deeper than W/2 inside, 0
    /// farther than W/2 outside (docs/MATH.md §13). The file's coordinates
    /// are metres, or lon/lat degrees with `privatize --latlon` (then
    /// projected like the points).
    Region {
        #[command(flatten)]
        query: RegionArgs,
        #[command(flatten)]
        common: A,
    },
}

impl<A: Args> QueryCommand<A> {
    /// The query described by the flags, built from its descriptor (the
    /// core checks the constraints between flags, e.g. an interval
    /// narrower than its ramps).
    pub fn build(&self) -> Result<AnyQuery, Error> {
        self.build_with(None)
    }

    /// [`build`](Self::build), with a region's GeoJSON read as lon/lat
    /// degrees and projected to metres with `projection` (other families
    /// ignore it: their parameters are metres already).
    pub fn build_with(
        &self,
        projection: Option<&dyn geopriv::Projection>,
    ) -> Result<AnyQuery, Error> {
        match self {
            QueryCommand::Region { query, .. } => query.load(projection).map(AnyQuery::from),
            _ => self.descriptor()?.to_query(),
        }
    }

    /// The public description of the query that goes into reports.
    pub fn descriptor(&self) -> Result<QueryDescriptor, Error> {
        let d = match self {
            QueryCommand::Threshold { query, .. } => QueryDescriptor::Threshold {
                threshold: query.threshold,
                width: query.width,
            },
            QueryCommand::Interval { query, .. } => QueryDescriptor::Interval {
                lower: query.lower,
                upper: query.upper,
                width: query.width,
            },
            QueryCommand::TwoWay { query, .. } => QueryDescriptor::TwoWay {
                thresholds: query.threshold.0,
                width: query.width,
            },
            QueryCommand::Kde { query, .. } => QueryDescriptor::Kde {
                center: query.center.0.clone(),
                bandwidth: query.bandwidth,
            },
            QueryCommand::Region { query, .. } => {
                return Ok(geopriv::Query::descriptor(&query.load(None)?))
            }
        };
        Ok(d)
    }

    /// The flags the calling command added.
    pub fn common(&self) -> &A {
        match self {
            QueryCommand::Threshold { common, .. }
            | QueryCommand::Interval { common, .. }
            | QueryCommand::TwoWay { common, .. }
            | QueryCommand::Kde { common, .. }
            | QueryCommand::Region { common, .. } => common,
        }
    }
}

/// Flags of `region`: which feature of which GeoJSON file, and the ramp.
#[derive(Args, Debug, Clone)]
#[command(group(clap::ArgGroup::new("selector").args(["feature", "property"])))]
pub struct RegionArgs {
    /// GeoJSON file (RFC 7946; at most 64 MiB): a FeatureCollection, a
    /// Feature or a bare Polygon / MultiPolygon.
    #[arg(long, value_name = "FILE")]
    pub geojson: std::path::PathBuf,
    /// The feature's id (a numeric id in its decimal form). Without it and
    /// --property, the file must hold exactly one feature.
    #[arg(long, value_name = "ID")]
    pub feature: Option<String>,
    /// Select the feature by a property instead, e.g. `name=Old Town`.
    #[arg(long, value_name = "KEY=VALUE")]
    pub property: Option<String>,
    /// Ramp width W > 0 in metres: f goes from 0 at W/2 outside the
    /// boundary to 1 at W/2 inside. The global Lipschitz constant is 1/W.
    #[arg(long, value_name = "W", value_parser = positive, allow_negative_numbers = true)]
    pub width: f64,
}

impl RegionArgs {
    /// The feature selector of the flags.
    pub fn selector(&self) -> Result<geopriv::query::region_geojson::FeatureSelector, Error> {
        use geopriv::query::region_geojson::FeatureSelector;
        Ok(match (&self.feature, &self.property) {
            (Some(id), _) => FeatureSelector::Id(id.clone()),
            (None, Some(kv)) => {
                let (key, value) = kv.split_once('=').ok_or(Error::Parse {
                    what: "--property",
                    reason: "expected KEY=VALUE",
                })?;
                FeatureSelector::Property {
                    key: key.to_string(),
                    value: value.to_string(),
                }
            }
            (None, None) => FeatureSelector::Only,
        })
    }

    /// Read, select, validate (and with a projection, project) the region.
    pub fn load(
        &self,
        projection: Option<&dyn geopriv::Projection>,
    ) -> Result<geopriv::RegionQuery, Error> {
        use geopriv::query::region_geojson::{region_from_geojson, MAX_GEOJSON_BYTES};
        use std::io::Read;
        let io_error = |e: std::io::Error| Error::InvalidRegion {
            feature: self.geojson.display().to_string(),
            reason: format!("cannot read the GeoJSON file: {e}"),
        };
        let file = std::fs::File::open(&self.geojson).map_err(io_error)?;
        let mut text = String::new();
        file.take(MAX_GEOJSON_BYTES as u64 + 1)
            .read_to_string(&mut text)
            .map_err(io_error)?;
        region_from_geojson(&text, &self.selector()?, self.width, projection)
    }
}

/// Flags of `threshold`.
#[derive(Args, Debug, Clone)]
pub struct ThresholdArgs {
    /// Threshold T, in the unit of the coordinates (e.g. dollars).
    #[arg(long, value_name = "T", value_parser = finite, allow_negative_numbers = true)]
    pub threshold: f64,
    /// Width W > 0 of the ramp centred at T (same unit). The global
    /// Lipschitz constant is 1/W.
    #[arg(long, value_name = "W", value_parser = positive, allow_negative_numbers = true)]
    pub width: f64,
}

/// Flags of `interval`.
#[derive(Args, Debug, Clone)]
pub struct IntervalArgs {
    /// Lower end A of the interval (centre of the lower ramp).
    #[arg(long, value_name = "A", value_parser = finite, allow_negative_numbers = true)]
    pub lower: f64,
    /// Upper end B of the interval (centre of the upper ramp); B - A >= W.
    #[arg(long, value_name = "B", value_parser = finite, allow_negative_numbers = true)]
    pub upper: f64,
    /// Width W > 0 of each ramp (same unit as A and B). The global
    /// Lipschitz constant is 1/W.
    #[arg(long, value_name = "W", value_parser = positive, allow_negative_numbers = true)]
    pub width: f64,
}

/// Flags of `two-way`.
#[derive(Args, Debug, Clone)]
pub struct TwoWayArgs {
    /// Thresholds T1,T2 on the two coordinates, comma-separated.
    #[arg(long, value_name = "T1,T2", value_parser = pair, allow_hyphen_values = true)]
    pub threshold: Pair,
    /// Width W > 0 of the ramp band (same unit as the coordinates). The
    /// global Lipschitz constant is 1/W.
    #[arg(long, value_name = "W", value_parser = positive, allow_negative_numbers = true)]
    pub width: f64,
}

/// Flags of `kde`.
#[derive(Args, Debug, Clone)]
pub struct KdeArgs {
    /// Query point t1,...,td, comma-separated; its length is the dimension.
    #[arg(long, value_name = "t1,...,td", value_parser = list, allow_hyphen_values = true)]
    pub center: List,
    /// Bandwidth H > 0 (same unit as the coordinates).
    #[arg(long, value_name = "H", value_parser = positive, allow_negative_numbers = true)]
    pub bandwidth: f64,
}

/// clap's `ValueEnum` over the core's [`GrowthKind`]: `exp` (alias
/// `exponential`) or `linear`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct GrowthArg(pub GrowthKind);

impl ValueEnum for GrowthArg {
    fn value_variants<'a>() -> &'a [Self] {
        &[
            GrowthArg(GrowthKind::Exponential),
            GrowthArg(GrowthKind::Linear),
        ]
    }

    fn to_possible_value(&self) -> Option<PossibleValue> {
        Some(match self.0 {
            GrowthKind::Exponential => PossibleValue::new("exp").alias("exponential").help(
                "g(t) = exp(γ t): for the pure-GP mechanisms (Cauchy, Student's t, PolyPlace)",
            ),
            GrowthKind::Linear => PossibleValue::new("linear")
                .help("g(t) = 1 + γ t: for the approximate-GP Laplace mechanism"),
        })
    }
}

/// The growth function g of the smooth sensitivity: S(x) <= g(d) S(y) for
/// points d apart.
#[derive(Args, Debug, Clone)]
pub struct GrowthArgs {
    /// Growth function: `exp` for g(t) = exp(γ t) (pure geo-privacy
    /// mechanisms) or `linear` for g(t) = 1 + γ t (the approximate
    /// (ε, δ) Laplace mechanism).
    #[arg(long, value_enum, value_name = "exp|linear")]
    pub growth: GrowthArg,
    /// Growth rate γ > 0 per unit distance (same unit as the coordinates).
    /// It is the share of the privacy budget ε (also per unit distance)
    /// spent on smoothness: a larger γ lets S fall faster away from where
    /// f changes (less noise there) but leaves less of ε for the noise.
    #[arg(long, value_name = "G", value_parser = positive, allow_negative_numbers = true)]
    pub gamma: f64,
}

impl GrowthArgs {
    /// The validated growth function.
    pub fn growth(&self) -> Result<Growth, Error> {
        Growth::new(self.growth.0, self.gamma)
    }
}

/// Two numbers given as `a,b`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Pair(pub [f64; 2]);

/// One or more numbers given as `a,b,...`.
#[derive(Debug, Clone, PartialEq)]
pub struct List(pub Vec<f64>);

/// A finite number (clap value parser).
pub fn finite(s: &str) -> Result<f64, String> {
    let v: f64 = s
        .trim()
        .parse()
        .map_err(|_| format!("`{}` is not a number", Untrusted(s)))?;
    if v.is_finite() {
        Ok(v)
    } else {
        Err(format!("{v} is not allowed: the number must be finite"))
    }
}

/// A finite number > 0 (clap value parser).
pub fn positive(s: &str) -> Result<f64, String> {
    let v = finite(s)?;
    if v > 0.0 {
        Ok(v)
    } else {
        Err(format!("{v} is not allowed: the number must be > 0"))
    }
}

/// Comma-separated finite numbers, at least one (clap value parser).
pub fn list(s: &str) -> Result<List, String> {
    s.split(',').map(finite).collect::<Result<_, _>>().map(List)
}

/// Exactly two comma-separated finite numbers (clap value parser).
pub fn pair(s: &str) -> Result<Pair, String> {
    match list(s)?.0[..] {
        [a, b] => Ok(Pair([a, b])),
        ref v => Err(format!(
            "expected two comma-separated numbers, found {}",
            v.len()
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn value_parsers() {
        assert_eq!(finite(" -2.5 "), Ok(-2.5));
        assert!(finite("nan").is_err());
        assert!(finite("inf").is_err());
        assert!(finite("x").is_err());
        assert!(positive("0").is_err());
        assert!(positive("-1").is_err());
        assert_eq!(positive("1e-3"), Ok(1e-3));
        assert_eq!(pair("-1, 2"), Ok(Pair([-1.0, 2.0])));
        assert!(pair("1").is_err());
        assert!(pair("1,2,3").is_err());
        assert!(pair("1,").is_err());
        assert_eq!(list("1,2,3"), Ok(List(vec![1.0, 2.0, 3.0])));
        assert!(list("").is_err());
    }
}
