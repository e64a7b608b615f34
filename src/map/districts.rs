//! [`DistrictSet`]: a partition into districts (a GeoJSON
//! FeatureCollection) answered as one query set under one per-device
//! budget (docs/MATH.md §13.6): the soft memberships f_j of every
//! district, with a certified ℓ1 Lipschitz constant for the vector
//! mechanism.

use super::query_set::L1Bound;
use crate::error::{check_point, Error, Result};
use crate::geo::Projection;
use crate::query::region_geojson::polygons_from_geojson;
use crate::query::{Query, RegionQuery};
use std::format;
use std::string::String;
use std::vec::Vec;

/// The most districts in one set: 10,000.
pub const MAX_DISTRICTS: usize = 10_000;

/// Cells of the certification grid (at most 512 x 512).
const MAX_CELLS_PER_AXIS: usize = 512;

/// Districts P_1..P_m, each a [`RegionQuery`] with the same ramp width W:
/// f_j(x) = clamp(1/2 + sd_j(x)/W, 0, 1).
///
/// Certified ℓ1 constant (docs/MATH.md §13.6): with K the largest number
/// of ramps {|sd_j| <= W/2} that overlap at one point,
///
/// ```text
/// Σ_j |f_j(x) - f_j(x')| <= (K / W) · d(x, x'),
/// ```
///
/// K is bounded on a grid of cells: a cell of half-diagonal r whose centre
/// c has |sd_j(c)| > W/2 + r meets no point of ramp j (sd_j is
/// 1-Lipschitz), so the largest count of j with |sd_j(c)| <= W/2 + r over
/// the cells bounds K. For a grid of rectangles K = 4 (corners), for
/// generic partitions where three districts meet K = 3 once the cells are
/// fine.
///
/// ```
/// use geo::polygon;
/// use geopriv::map::DistrictSet;
/// use geopriv::RegionQuery;
/// let a = polygon![(x: 0.0, y: 0.0), (x: 100.0, y: 0.0), (x: 100.0, y: 100.0), (x: 0.0, y: 100.0)];
/// let b = polygon![(x: 100.0, y: 0.0), (x: 200.0, y: 0.0), (x: 200.0, y: 100.0), (x: 100.0, y: 100.0)];
/// let set = DistrictSet::new(vec![("a".into(), a.into()), ("b".into(), b.into())], 10.0)?;
/// assert_eq!(set.values(&[50.0, 50.0])?, vec![1.0, 0.0]);
/// // Two ramps overlap along the shared edge: L1 = 2/W.
/// assert_eq!(set.l1().bound, 0.2);
/// # Ok::<(), geopriv::Error>(())
/// ```
#[derive(Clone, Debug, PartialEq)]
pub struct DistrictSet {
    names: Vec<String>,
    regions: Vec<RegionQuery>,
    width: f64,
    bbox: [f64; 4],
    l1: L1Bound,
}

impl DistrictSet {
    /// Districts from named geometries in metres, ramp `width` W.
    pub fn new(parts: Vec<(String, geo::MultiPolygon<f64>)>, width: f64) -> Result<Self> {
        if parts.is_empty() || parts.len() > MAX_DISTRICTS {
            return Err(Error::LimitExceeded {
                what: "districts (at least 1)",
                requested: parts.len() as u64,
                limit: MAX_DISTRICTS as u64,
            });
        }
        let mut names = Vec::with_capacity(parts.len());
        let mut regions = Vec::with_capacity(parts.len());
        let mut bbox = [
            f64::INFINITY,
            f64::NEG_INFINITY,
            f64::INFINITY,
            f64::NEG_INFINITY,
        ];
        for (name, shape) in parts {
            let r = RegionQuery::named(&name, shape, width)?;
            let b = region_bbox(&r);
            bbox = [
                bbox[0].min(b[0]),
                bbox[1].max(b[1]),
                bbox[2].min(b[2]),
                bbox[3].max(b[3]),
            ];
            names.push(name);
            regions.push(r);
        }
        let mut set = Self {
            names,
            regions,
            width,
            bbox,
            l1: L1Bound {
                bound: 0.0,
                numerical: 0.0,
                gap: 0.0,
            },
        };
        set.l1 = set.certify_l1();
        Ok(set)
    }

    /// Every feature of a GeoJSON FeatureCollection is a district (metres,
    /// or lon/lat degrees projected with `projection`).
    pub fn from_geojson(
        text: &str,
        width: f64,
        projection: Option<&dyn Projection>,
    ) -> Result<Self> {
        let mut parts = polygons_from_geojson(text)?;
        if let Some(p) = projection {
            parts = parts
                .into_iter()
                .map(|(name, shape)| {
                    let shape = crate::query::region::project(&name, shape, p)?;
                    Ok((name, shape))
                })
                .collect::<Result<Vec<_>>>()?;
        }
        Self::new(parts, width)
    }

    /// District names (feature ids, else `name` properties, else `#i`).
    pub fn names(&self) -> &[String] {
        &self.names
    }

    /// The districts' queries.
    pub fn regions(&self) -> &[RegionQuery] {
        &self.regions
    }

    /// Number of districts.
    pub fn len(&self) -> usize {
        self.regions.len()
    }

    /// Never empty.
    pub fn is_empty(&self) -> bool {
        false
    }

    /// The ramp width W.
    pub fn width(&self) -> f64 {
        self.width
    }

    /// Bounding box [x_min, x_max, y_min, y_max] of the districts.
    pub fn bbox(&self) -> [f64; 4] {
        self.bbox
    }

    /// f_j(x).
    pub fn value(&self, j: usize, x: &[f64]) -> Result<f64> {
        self.regions
            .get(j)
            .ok_or(Error::InvalidParameter {
                name: "district index",
                value: j as f64,
                requirement: "below the number of districts",
            })?
            .value(x)
    }

    /// All memberships f_1(x)..f_m(x).
    pub fn values(&self, x: &[f64]) -> Result<Vec<f64>> {
        self.regions.iter().map(|r| r.value(x)).collect()
    }

    /// Canonical id: `districts:w=W:` and the districts' digests in order.
    pub fn id(&self) -> String {
        let mut s = format!("districts:w={}", self.width);
        for r in &self.regions {
            s.push(':');
            s.push_str(&r.digest_hex());
        }
        s
    }

    /// The certified ℓ1 constant K/W (computed once at construction).
    pub fn l1(&self) -> L1Bound {
        self.l1
    }

    /// Refuse a location that is not a finite 2-D point. Any point of the
    /// plane is a valid location (outside every district all memberships
    /// are 0).
    pub fn check_location(&self, x: &[f64]) -> Result<()> {
        check_point(x, 2)
    }

    /// K/W bounded on a grid of cells over the ramps' box (docs/MATH.md
    /// §13.6); `numerical` is the largest ℓ1 secant ratio
    /// Σ_j |f_j(c + h u) - f_j(c)| / h found at the cell centres (16
    /// directions, h = W/64), a lower bound of the true constant.
    fn certify_l1(&self) -> L1Bound {
        let w = self.width;
        let lo = [self.bbox[0] - w, self.bbox[2] - w];
        let span = [
            self.bbox[1] - self.bbox[0] + 2.0 * w,
            self.bbox[3] - self.bbox[2] + 2.0 * w,
        ];
        // Cells of side about W/2 (half-diagonal ≈ 0.35 W), at most 512 per axis.
        let per = |s: f64| ((s / (0.5 * w)).ceil() as usize).clamp(1, MAX_CELLS_PER_AXIS);
        let (nx, ny) = (per(span[0]), per(span[1]));
        let (hx, hy) = (span[0] / nx as f64, span[1] / ny as f64);
        let r = 0.5 * libm::hypot(hx, hy);
        let mut k_max = 0usize;
        let mut numerical = 0.0f64;
        let h = w / 64.0;
        for i in 0..nx {
            for j in 0..ny {
                let c = [lo[0] + (i as f64 + 0.5) * hx, lo[1] + (j as f64 + 0.5) * hy];
                let mut near = Vec::new();
                for (idx, q) in self.regions.iter().enumerate() {
                    let sd = q.signed_distance(&c).unwrap_or(0.0);
                    if sd.abs() <= 0.5 * w + r {
                        near.push(idx);
                    }
                }
                k_max = k_max.max(near.len());
                if near.len() >= 2 || (near.len() == 1 && numerical == 0.0) {
                    for dir in 0..16 {
                        let a = dir as f64 * core::f64::consts::PI / 16.0;
                        let z = [c[0] + h * libm::cos(a), c[1] + h * libm::sin(a)];
                        let s: f64 = near
                            .iter()
                            .map(|&q| {
                                let q = &self.regions[q];
                                (q.value(&z).unwrap_or(0.0) - q.value(&c).unwrap_or(0.0)).abs()
                            })
                            .sum();
                        numerical = numerical.max(s / h);
                    }
                }
            }
        }
        let bound = k_max.max(1) as f64 / w;
        let numerical = numerical.min(bound);
        L1Bound {
            bound,
            numerical,
            gap: if numerical > 0.0 {
                bound / numerical - 1.0
            } else {
                f64::INFINITY
            },
        }
    }
}

/// Bounding box [x_min, x_max, y_min, y_max] of a region's exterior rings.
pub(crate) fn region_bbox(r: &RegionQuery) -> [f64; 4] {
    let mut bb = [
        f64::INFINITY,
        f64::NEG_INFINITY,
        f64::INFINITY,
        f64::NEG_INFINITY,
    ];
    for p in &r.shape().0 {
        for c in &p.exterior().0 {
            bb = [
                bb[0].min(c.x),
                bb[1].max(c.x),
                bb[2].min(c.y),
                bb[3].max(c.y),
            ];
        }
    }
    bb
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use geo::polygon;

    /// An nx x ny grid of square districts of `side` (shared with the
    /// district channel's tests).
    pub(crate) fn grid(nx: usize, ny: usize, side: f64) -> Vec<(String, geo::MultiPolygon<f64>)> {
        let mut out = Vec::new();
        for i in 0..nx {
            for j in 0..ny {
                let (x0, y0) = (i as f64 * side, j as f64 * side);
                let (x1, y1) = (x0 + side, y0 + side);
                let p: geo::Polygon<f64> =
                    polygon![(x: x0, y: y0), (x: x1, y: y0), (x: x1, y: y1), (x: x0, y: y1)];
                out.push((format!("{i},{j}"), p.into()));
            }
        }
        out
    }

    #[test]
    fn grid_partition_has_k_four_and_secants_stay_below() {
        let set = DistrictSet::new(grid(3, 3, 100.0), 10.0).unwrap();
        let l1 = set.l1();
        assert_eq!(l1.bound, 0.4, "{l1:?}");
        // Near a corner, moving diagonally changes four memberships at
        // rate 1/(W√2) each: 4/(W√2) ≈ 0.283 ≤ 0.4.
        assert!(l1.numerical > 0.25 && l1.numerical <= l1.bound, "{l1:?}");
        // Brute force: random pairs never exceed the bound.
        let mut worst = 0.0f64;
        for k in 0..20_000 {
            let t = k as f64 * 0.618_033_988_7;
            let x = [90.0 + 30.0 * (t.fract()), 90.0 + 30.0 * ((t * 7.3).fract())];
            let a = (t * 13.1).fract() * core::f64::consts::TAU;
            let d = 0.1 + 20.0 * (t * 3.7).fract();
            let y = [x[0] + d * a.cos(), x[1] + d * a.sin()];
            let fx = set.values(&x).unwrap();
            let fy = set.values(&y).unwrap();
            let s: f64 = fx.iter().zip(&fy).map(|(a, b)| (a - b).abs()).sum();
            worst = worst.max(s / d);
        }
        assert!(worst <= l1.bound * (1.0 + 1e-9), "{worst}");
        assert!(set.id().starts_with("districts:w=10:"));
    }
}
