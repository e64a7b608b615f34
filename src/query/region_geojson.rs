//! Regions from GeoJSON (RFC 7946) text, read with the `geojson` crate
//! (docs/MATH.md §13.5).
//!
//! A region is a feature (or a bare geometry) whose geometry is a Polygon
//! or a MultiPolygon, selected by its id or by a property value. Its rings
//! are checked as written (closed: first position = last; at least four
//! positions; two coordinates each, finite) before `geo`'s validity check
//! (no self-intersection) in [`RegionQuery`]; errors name the feature
//! (escaped on display: the file is untrusted).
//!
//! ```
//! use geopriv::query::region_geojson::{FeatureSelector, region_from_geojson};
//! use geopriv::Query;
//! let text = r#"{"type":"FeatureCollection","features":[
//!   {"type":"Feature","id":"park","properties":{"name":"Park"},
//!    "geometry":{"type":"Polygon","coordinates":[[[0,0],[100,0],[100,100],[0,100],[0,0]]]}}]}"#;
//! let q = region_from_geojson(text, &FeatureSelector::Id("park".into()), 20.0, None)?;
//! assert_eq!(q.value(&[50.0, 50.0])?, 1.0);
//! let by_name = FeatureSelector::Property { key: "name".into(), value: "Park".into() };
//! assert_eq!(region_from_geojson(text, &by_name, 20.0, None)?, q);
//! # Ok::<(), geopriv::Error>(())
//! ```

use super::region::{invalid, project, RegionQuery};
use crate::error::{Error, Result};
use crate::geo::Projection;
use geo::{Coord, LineString, MultiPolygon, Polygon};
use geojson::{feature::Id, Feature, GeoJson, GeometryValue};
use std::string::{String, ToString};
use std::vec::Vec;

/// The largest GeoJSON text read: 64 MiB (bounded memory).
pub const MAX_GEOJSON_BYTES: usize = 64 << 20;

/// Which feature of a GeoJSON document is the region.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum FeatureSelector {
    /// The feature whose `id` is this text (a numeric id matches its
    /// decimal form, e.g. `"7"`).
    Id(String),
    /// The feature whose property `key` is this text (a string property
    /// equal to it, or a number / boolean whose JSON form is it).
    Property {
        /// Property name.
        key: String,
        /// Wanted value.
        value: String,
    },
    /// The only feature (or a bare geometry); an error if there are
    /// several.
    Only,
}

impl FeatureSelector {
    fn describe(&self) -> String {
        match self {
            FeatureSelector::Id(id) => id.clone(),
            FeatureSelector::Property { key, value } => format!("{key}={value}"),
            FeatureSelector::Only => "the only feature".into(),
        }
    }
}

/// A feature's display name: its id, else its `name` property, else its
/// position in the collection.
fn feature_name(f: &Feature, index: usize) -> String {
    match &f.id {
        Some(Id::String(s)) => s.clone(),
        Some(Id::Number(n)) => n.to_string(),
        None => match f.property("name") {
            Some(serde_json::Value::String(s)) => s.clone(),
            _ => format!("#{index}"),
        },
    }
}

fn matches(f: &Feature, sel: &FeatureSelector) -> bool {
    match sel {
        FeatureSelector::Id(want) => match &f.id {
            Some(Id::String(s)) => s == want,
            Some(Id::Number(n)) => &n.to_string() == want,
            None => false,
        },
        FeatureSelector::Property { key, value } => match f.property(key) {
            Some(serde_json::Value::String(s)) => s == value,
            Some(v @ (serde_json::Value::Number(_) | serde_json::Value::Bool(_))) => {
                &v.to_string() == value
            }
            _ => false,
        },
        FeatureSelector::Only => true,
    }
}

fn parse(text: &str) -> Result<GeoJson> {
    if text.len() > MAX_GEOJSON_BYTES {
        return Err(Error::LimitExceeded {
            what: "GeoJSON bytes",
            requested: text.len() as u64,
            limit: MAX_GEOJSON_BYTES as u64,
        });
    }
    text.parse::<GeoJson>()
        .map_err(|e| invalid("GeoJSON", format_args!("not GeoJSON: {e}")))
}

/// The named polygons of a GeoJSON document: every feature (or the bare
/// geometry), converted and checked as written (closed rings of at least
/// four finite 2-D positions). Features without a Polygon / MultiPolygon
/// geometry are an error naming them.
pub fn polygons_from_geojson(text: &str) -> Result<Vec<(String, MultiPolygon<f64>)>> {
    match parse(text)? {
        GeoJson::Geometry(g) => Ok(vec![(
            "geometry".to_string(),
            to_multipolygon("geometry", &g.value)?,
        )]),
        GeoJson::Feature(f) => {
            let name = feature_name(&f, 0);
            let g = geometry_of(&f, &name)?;
            Ok(vec![(name.clone(), to_multipolygon(&name, g)?)])
        }
        GeoJson::FeatureCollection(fc) => fc
            .features
            .iter()
            .enumerate()
            .map(|(i, f)| {
                let name = feature_name(f, i);
                let g = geometry_of(f, &name)?;
                Ok((name.clone(), to_multipolygon(&name, g)?))
            })
            .collect(),
    }
}

fn geometry_of<'a>(f: &'a Feature, name: &str) -> Result<&'a GeometryValue> {
    f.geometry
        .as_ref()
        .map(|g| &g.value)
        .ok_or_else(|| invalid(name, "the feature has no geometry"))
}

/// The polygon(s) of the feature `selector` picks, in the file's
/// coordinates.
pub fn select_polygon(
    text: &str,
    selector: &FeatureSelector,
) -> Result<(String, MultiPolygon<f64>)> {
    let gj = parse(text)?;
    let features: Vec<Feature> = match gj {
        GeoJson::Geometry(g) => {
            return if *selector == FeatureSelector::Only {
                Ok(("geometry".into(), to_multipolygon("geometry", &g.value)?))
            } else {
                Err(invalid(
                    &selector.describe(),
                    "the document is a bare geometry without features",
                ))
            };
        }
        GeoJson::Feature(f) => vec![f],
        GeoJson::FeatureCollection(fc) => fc.features,
    };
    let mut found = features
        .iter()
        .enumerate()
        .filter(|(_, f)| matches(f, selector));
    let Some((i, f)) = found.next() else {
        return Err(invalid(&selector.describe(), "no such feature"));
    };
    if found.next().is_some() {
        return Err(invalid(
            &selector.describe(),
            "several features match; select by a unique id or property",
        ));
    }
    let name = feature_name(f, i);
    let g = geometry_of(f, &name)?;
    Ok((name.clone(), to_multipolygon(&name, g)?))
}

/// A [`RegionQuery`] of ramp width `width` for the feature `selector`
/// picks. With a `projection` the file's coordinates are longitude and
/// latitude degrees (RFC 7946) projected to metres; without one they are
/// metres already (x east, y north).
pub fn region_from_geojson(
    text: &str,
    selector: &FeatureSelector,
    width: f64,
    projection: Option<&dyn Projection>,
) -> Result<RegionQuery> {
    let (name, shape) = select_polygon(text, selector)?;
    let shape = match projection {
        Some(p) => project(&name, shape, p)?,
        None => shape,
    };
    RegionQuery::named(&name, shape, width)
}

fn ring(name: &str, positions: &[geojson::Position]) -> Result<LineString<f64>> {
    if positions.len() < 4 {
        return Err(invalid(name, "a ring has fewer than 4 positions"));
    }
    if positions.len() > super::MAX_REGION_VERTICES {
        return Err(invalid(
            name,
            format_args!("more than {} vertices", super::MAX_REGION_VERTICES),
        ));
    }
    let mut out = Vec::with_capacity(positions.len());
    for p in positions {
        let s = p.as_slice();
        if s.len() < 2 {
            return Err(invalid(name, "a position has fewer than 2 coordinates"));
        }
        if !(s[0].is_finite() && s[1].is_finite()) {
            return Err(invalid(name, "a coordinate is not finite"));
        }
        out.push(Coord { x: s[0], y: s[1] });
    }
    if out.first() != out.last() {
        return Err(invalid(
            name,
            "a ring is not closed (its first and last positions differ)",
        ));
    }
    Ok(LineString::new(out))
}

fn polygon(name: &str, rings: &[Vec<geojson::Position>]) -> Result<Polygon<f64>> {
    let (ext, holes) = rings
        .split_first()
        .ok_or_else(|| invalid(name, "a polygon has no rings"))?;
    Ok(Polygon::new(
        ring(name, ext)?,
        holes
            .iter()
            .map(|h| ring(name, h))
            .collect::<Result<Vec<_>>>()?,
    ))
}

fn to_multipolygon(name: &str, g: &GeometryValue) -> Result<MultiPolygon<f64>> {
    match g {
        GeometryValue::Polygon { coordinates } => {
            Ok(MultiPolygon::new(vec![polygon(name, coordinates)?]))
        }
        GeometryValue::MultiPolygon { coordinates } => coordinates
            .iter()
            .map(|p| polygon(name, p))
            .collect::<Result<Vec<_>>>()
            .map(MultiPolygon::new),
        other => Err(invalid(
            name,
            format_args!(
                "the geometry is a {}, not a Polygon or MultiPolygon",
                other.type_name()
            ),
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Query;

    const DOC: &str = r#"{"type":"FeatureCollection","features":[
      {"type":"Feature","id":7,"properties":{"name":"a"},
       "geometry":{"type":"Polygon","coordinates":[[[0,0],[10,0],[10,10],[0,10],[0,0]]]}},
      {"type":"Feature","properties":{"name":"open\nring"},
       "geometry":{"type":"Polygon","coordinates":[[[0,0],[10,0],[10,10],[0,10]]]}},
      {"type":"Feature","id":"bowtie","properties":{},
       "geometry":{"type":"Polygon","coordinates":[[[0,0],[1,1],[1,0],[0,1],[0,0]]]}},
      {"type":"Feature","id":"line","properties":{},
       "geometry":{"type":"LineString","coordinates":[[0,0],[1,1]]}}]}"#;

    #[test]
    fn selects_validates_and_names_the_feature() {
        let q = region_from_geojson(DOC, &FeatureSelector::Id("7".into()), 2.0, None).unwrap();
        assert_eq!(q.value(&[5.0, 5.0]).unwrap(), 1.0);
        let sel = FeatureSelector::Property {
            key: "name".into(),
            value: "open\nring".into(),
        };
        let e = region_from_geojson(DOC, &sel, 2.0, None).unwrap_err();
        let shown = e.to_string();
        assert!(
            shown.contains("open\\nring") && shown.contains("not closed"),
            "{shown}"
        );
        let e =
            region_from_geojson(DOC, &FeatureSelector::Id("bowtie".into()), 2.0, None).unwrap_err();
        assert!(e.to_string().contains("bowtie"), "{e}");
        let e =
            region_from_geojson(DOC, &FeatureSelector::Id("line".into()), 2.0, None).unwrap_err();
        assert!(e.to_string().contains("LineString"), "{e}");
        let e = region_from_geojson(DOC, &FeatureSelector::Id("x".into()), 2.0, None).unwrap_err();
        assert!(e.to_string().contains("no such feature"), "{e}");
        assert!(region_from_geojson(DOC, &FeatureSelector::Only, 2.0, None).is_err());
        assert!(region_from_geojson("{", &FeatureSelector::Only, 2.0, None).is_err());
        assert!(polygons_from_geojson(DOC).is_err());
    }
}
