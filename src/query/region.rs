//! `RegionQuery`: "share of users inside this area" (a geofence, a district,
//! a catchment), the soft threshold of the signed distance to a polygon's
//! boundary (docs/MATH.md §13). Std only: distances, point-in-polygon and
//! validity come from the `geo` crate, which is not no_std.

use super::region_index::{brute_signed_distance, SegmentIndex};
use super::{ramp_smooth_sensitivity, Query};
use crate::error::{check_point, query_width, Error, Result};
use crate::geo::{LatLon, Projection};
use crate::growth::Growth;
use crate::report::QueryDescriptor;
use geo::{Coord, LineString, MultiLineString, MultiPolygon, Polygon, Validation};
use sha2::{Digest, Sha256};
use std::string::{String, ToString};
use std::vec::Vec;

/// The most vertices a region may have (all rings of all parts counted,
/// closing vertices included): 100,000. Each evaluation goes through an
/// R-tree of the boundary segments (logarithmic in the vertex count,
/// BENCHMARKS.md "Regions"); the bound keeps a hostile GeoJSON file from
/// making a query whose construction or memory is unbounded.
pub const MAX_REGION_VERTICES: usize = 100_000;

/// Soft membership of a region P (a polygon with holes, or several):
///
/// ```text
/// f(x) = clamp(1/2 + sd(x)/W, 0, 1)
/// ```
///
/// with sd(x) the signed distance from x to the boundary of P (positive
/// inside, negative outside) and W > 0 the ramp width (metres). f is 1
/// deeper than W/2 inside, 0 farther than W/2 outside, and linear in sd on
/// the band of width W around the boundary.
///
/// Because sd is 1-Lipschitz (d(x, y) >= |sd(x) - sd(y)|), f is the 1-D
/// soft threshold of width W composed with a 1-Lipschitz map, and the 1-D
/// formulas evaluated at sd(x) are upper bounds (docs/MATH.md §13): with
/// e = |sd(x)| - W/2,
///
/// ```text
/// L(x)  <= 1/(max(e, 0) + W)
/// S*(x) <= max( 1/(e + W), 1/(W · g(e)) )   off the ramp (e > 0), 1/W on it.
/// ```
///
/// They are the exact values on the ramp and wherever the straight profile
/// through x and its nearest boundary point reaches the opposite extreme
/// (full membership for an outside point, zero for an inside one) within
/// W/2 beyond the boundary; [`RegionQuery::is_exact_at`] checks that. In
/// thin parts, narrow necks and near corners seen from their convex side
/// (inside a reflex corner, outside a convex one) the exact values are
/// smaller, and the bound is what is used (never below the definition,
/// which is what privacy needs).
///
/// The public identity of a region is the SHA-256 digest of its normalised
/// geometry ([`RegionQuery::digest_hex`]); the descriptor carries that digest
/// and W, so a server can check that a report answered its task.
///
/// ```
/// use geo::polygon;
/// use geopriv::{Growth, Query, RegionQuery};
/// // A 100 m square, ramp 20 m.
/// let square = polygon![(x: 0.0, y: 0.0), (x: 100.0, y: 0.0), (x: 100.0, y: 100.0), (x: 0.0, y: 100.0)];
/// let q = RegionQuery::new(square, 20.0)?;
/// assert_eq!(q.value(&[50.0, 50.0])?, 1.0);
/// assert_eq!(q.value(&[100.0, 50.0])?, 0.5);
/// assert_eq!(q.value(&[-30.0, 50.0])?, 0.0);
/// // 20 m outside the ramp: L = 1/(20 + 20), S = max(1/40, e^{-0.1·20}/20).
/// let s = q.smooth_sensitivity(&[-30.0, 50.0], Growth::exponential(0.1)?)?;
/// assert!((s - (1.0 / 40.0f64).max((-2.0f64).exp() / 20.0)).abs() < 1e-15);
/// # Ok::<(), geopriv::Error>(())
/// ```
#[derive(Clone, Debug, PartialEq)]
pub struct RegionQuery {
    shape: MultiPolygon<f64>,
    boundary: MultiLineString<f64>,
    /// R-tree of the boundary segments (None for small shapes): results
    /// bit-identical to the brute pass (docs/MATH.md §13.7).
    index: Option<SegmentIndex>,
    width: f64,
    digest: [u8; 32],
}

/// An invalid region: `reason`, for the region called `name`.
pub(crate) fn invalid(name: &str, reason: impl ToString) -> Error {
    Error::InvalidRegion {
        feature: name.to_string(),
        reason: reason.to_string(),
    }
}

impl RegionQuery {
    /// A region query for `shape` (a [`Polygon`] or [`MultiPolygon`] in
    /// metres, x east and y north) with ramp width `width` (finite, > 0).
    ///
    /// The geometry is validated (finite coordinates, at most
    /// [`MAX_REGION_VERTICES`] vertices, rings of at least three distinct
    /// vertices, no self-intersections, holes inside their shell, parts
    /// not overlapping: the `geo` crate's OGC validity) and normalised
    /// (exterior rings counter-clockwise, holes clockwise, repeated
    /// vertices dropped, each ring starting at its smallest vertex, parts
    /// and holes sorted) before its digest is taken.
    pub fn new(shape: impl Into<MultiPolygon<f64>>, width: f64) -> Result<Self> {
        Self::named("region", shape.into(), width)
    }

    /// Like [`new`](Self::new) for a geometry in longitude/latitude degrees
    /// (x = longitude, y = latitude, the GeoJSON and `geo` convention),
    /// every vertex projected to metres with `projection`. Points given to
    /// the query must be projected with the same projection; ε is then per
    /// projected metre (see [`crate::geo`] for what that means on the
    /// ground). Edges stay straight in projected metres.
    pub fn from_lonlat(
        shape: impl Into<MultiPolygon<f64>>,
        width: f64,
        projection: &dyn Projection,
    ) -> Result<Self> {
        let projected = project("region", shape.into(), projection)?;
        Self::named("region", projected, width)
    }

    /// [`new`](Self::new) with the name used in error messages (a GeoJSON
    /// feature id).
    pub(crate) fn named(name: &str, shape: MultiPolygon<f64>, width: f64) -> Result<Self> {
        let width = query_width("width", width)?;
        let shape = normalise(name, shape)?;
        let boundary = MultiLineString::new(
            shape
                .0
                .iter()
                .flat_map(|p| core::iter::once(p.exterior()).chain(p.interiors()))
                .cloned()
                .collect(),
        );
        let digest = geometry_digest(&shape);
        let index = SegmentIndex::build(&shape);
        Ok(Self {
            shape,
            boundary,
            index,
            width,
            digest,
        })
    }

    /// The normalised geometry (metres).
    pub fn shape(&self) -> &MultiPolygon<f64> {
        &self.shape
    }

    /// The ramp width W.
    pub fn width(&self) -> f64 {
        self.width
    }

    /// Number of vertices (closing vertices included).
    pub fn vertex_count(&self) -> usize {
        self.boundary.0.iter().map(|r| r.0.len()).sum()
    }

    /// SHA-256 of the normalised geometry (docs/MATH.md §13.5).
    pub fn digest(&self) -> [u8; 32] {
        self.digest
    }

    /// [`digest`](Self::digest) as 64 lowercase hex digits: the region's
    /// public identity in descriptors and ids.
    pub fn digest_hex(&self) -> String {
        hex(&self.digest)
    }

    /// The signed distance sd(x) to the boundary (positive inside) and a
    /// nearest boundary point: through the segment index when there is one,
    /// bit-identical to [`signed_distance_unindexed`](Self::signed_distance_unindexed).
    fn signed_distance_with_nearest(&self, x: [f64; 2]) -> (f64, Option<[f64; 2]>) {
        self.index
            .as_ref()
            .and_then(|i| i.signed_distance(&self.shape, x))
            .unwrap_or_else(|| brute_signed_distance(&self.shape, &self.boundary, x))
    }

    /// sd(x) by a pass over every boundary segment (no index): the
    /// reference the indexed [`signed_distance`](Self::signed_distance)
    /// reproduces bit for bit (tests and benches compare the two).
    ///
    /// ```
    /// use geo::polygon;
    /// use geopriv::RegionQuery;
    /// let square = polygon![(x: 0.0, y: 0.0), (x: 100.0, y: 0.0), (x: 100.0, y: 100.0), (x: 0.0, y: 100.0)];
    /// let q = RegionQuery::new(square, 20.0)?;
    /// assert_eq!(q.signed_distance_unindexed(&[-3.0, 50.0])?, -3.0);
    /// # Ok::<(), geopriv::Error>(())
    /// ```
    pub fn signed_distance_unindexed(&self, x: &[f64]) -> Result<f64> {
        check_point(x, 2)?;
        Ok(brute_signed_distance(&self.shape, &self.boundary, [x[0], x[1]]).0)
    }

    /// Whether calls go through the segment index (shapes of at least 48
    /// segments with coordinates below 1e100 in magnitude).
    pub fn is_indexed(&self) -> bool {
        self.index.is_some()
    }

    /// sd(x): the distance from x to the boundary of the region, positive
    /// inside and negative outside (0 on the boundary). 1-Lipschitz.
    pub fn signed_distance(&self, x: &[f64]) -> Result<f64> {
        check_point(x, 2)?;
        Ok(self.signed_distance_with_nearest([x[0], x[1]]).0)
    }

    /// Whether the bounds of [`pointwise_lipschitz`](Query::pointwise_lipschitz)
    /// and [`smooth_sensitivity`](Query::smooth_sensitivity) at x are
    /// certified exact (docs/MATH.md §13.3): x is on the ramp, or the point
    /// z = p + (W/2)·u beyond x's nearest boundary point p along the ray
    /// u from x through p takes the opposite extreme value (f(z) = 1 for x
    /// outside, 0 for x inside). Where this is false the bounds are upper
    /// bounds that may exceed the exact values (thin parts, necks, corners
    /// seen from their convex side).
    pub fn is_exact_at(&self, x: &[f64]) -> Result<bool> {
        Ok(self.exactness_witness(x)?.is_some() || self.on_ramp(x)?)
    }

    fn on_ramp(&self, x: &[f64]) -> Result<bool> {
        Ok(self.signed_distance(x)?.abs() <= 0.5 * self.width)
    }

    /// For x off the ramp, the witness z of docs/MATH.md §13.3 when it
    /// certifies exactness (f(z) is the opposite extreme).
    pub fn exactness_witness(&self, x: &[f64]) -> Result<Option<[f64; 2]>> {
        check_point(x, 2)?;
        let (sd, nearest) = self.signed_distance_with_nearest([x[0], x[1]]);
        let Some(p) = nearest else { return Ok(None) };
        if sd.abs() <= 0.5 * self.width {
            return Ok(None);
        }
        let d = sd.abs();
        let u = [(p[0] - x[0]) / d, (p[1] - x[1]) / d];
        let z = [
            p[0] + 0.5 * self.width * u[0],
            p[1] + 0.5 * self.width * u[1],
        ];
        let fz = self.value(&z)?;
        let opposite = if sd > 0.0 { 0.0 } else { 1.0 };
        Ok((fz == opposite).then_some(z))
    }

    /// The ramp distance e = |sd(x)| - W/2, clamped at 0.
    fn ramp_distance(&self, x: &[f64]) -> Result<f64> {
        Ok((self.signed_distance(x)?.abs() - 0.5 * self.width).max(0.0))
    }

    /// Corner points of the ramp for the audit: every vertex and the points
    /// W/2 inside and outside it along the bisector (at most 64 vertices,
    /// evenly spread).
    pub(crate) fn landmark_points(&self) -> Vec<Vec<f64>> {
        let mut out = Vec::new();
        let n = self.vertex_count();
        let step = n.div_ceil(64).max(1);
        for ring in &self.boundary.0 {
            let pts = &ring.0;
            let m = pts.len().saturating_sub(1); // closed ring
            for i in (0..m).step_by(step) {
                let v = pts[i];
                let prev = pts[(i + m - 1) % m];
                let next = pts[(i + 1) % m];
                out.push(vec![v.x, v.y]);
                // Bisector direction of the two edges' normals.
                let (ax, ay) = unit(v.x - prev.x, v.y - prev.y);
                let (bx, by) = unit(next.x - v.x, next.y - v.y);
                let (nx, ny) = unit(ay + by, -(ax + bx));
                for s in [-0.5, 0.5] {
                    out.push(vec![v.x + s * self.width * nx, v.y + s * self.width * ny]);
                }
            }
        }
        out
    }
}

fn unit(x: f64, y: f64) -> (f64, f64) {
    let n = libm::hypot(x, y);
    if n > 0.0 && n.is_finite() {
        (x / n, y / n)
    } else {
        (0.0, 0.0)
    }
}

/// Project every vertex of a lon/lat geometry to metres.
pub(crate) fn project(
    name: &str,
    shape: MultiPolygon<f64>,
    projection: &dyn Projection,
) -> Result<MultiPolygon<f64>> {
    let ring = |r: &LineString<f64>| -> Result<LineString<f64>> {
        r.0.iter()
            .map(|c| {
                let ll = LatLon::new(c.y, c.x).map_err(|e| invalid(name, e))?;
                let [x, y] = projection.forward(ll).map_err(|e| invalid(name, e))?;
                Ok(Coord { x, y })
            })
            .collect::<Result<Vec<_>>>()
            .map(LineString::new)
    };
    shape
        .0
        .iter()
        .map(|p| {
            Ok(Polygon::new(
                ring(p.exterior())?,
                p.interiors().iter().map(ring).collect::<Result<Vec<_>>>()?,
            ))
        })
        .collect::<Result<Vec<_>>>()
        .map(MultiPolygon::new)
}

/// Check and normalise a geometry (docs/MATH.md §13.5).
fn normalise(name: &str, shape: MultiPolygon<f64>) -> Result<MultiPolygon<f64>> {
    if shape.0.is_empty() {
        return Err(invalid(name, "the geometry has no polygon"));
    }
    let mut count = 0usize;
    for p in &shape.0 {
        for r in core::iter::once(p.exterior()).chain(p.interiors()) {
            count = count.saturating_add(r.0.len());
            if count > MAX_REGION_VERTICES {
                return Err(invalid(
                    name,
                    format_args!("more than {MAX_REGION_VERTICES} vertices"),
                ));
            }
            if let Some(c) = r.0.iter().find(|c| !(c.x.is_finite() && c.y.is_finite())) {
                return Err(invalid(
                    name,
                    format_args!("a vertex is not finite ({}, {})", c.x, c.y),
                ));
            }
        }
    }
    let ring = |r: &LineString<f64>, ccw: bool| -> Result<LineString<f64>> {
        // Drop the closing vertex and repeated vertices; fold -0 into 0.
        let mut v: Vec<Coord<f64>> = Vec::with_capacity(r.0.len());
        for c in &r.0 {
            let c = Coord {
                x: c.x + 0.0,
                y: c.y + 0.0,
            };
            if v.last() != Some(&c) {
                v.push(c);
            }
        }
        while v.len() > 1 && v.first() == v.last() {
            v.pop();
        }
        if v.len() < 3 {
            return Err(invalid(name, "a ring has fewer than 3 distinct vertices"));
        }
        let area2: f64 = (0..v.len())
            .map(|i| {
                let (a, b) = (v[i], v[(i + 1) % v.len()]);
                a.x * b.y - b.x * a.y
            })
            .sum();
        if !(area2.is_finite() && area2 != 0.0) {
            return Err(invalid(name, "a ring has zero or non-finite area"));
        }
        if (area2 > 0.0) != ccw {
            v.reverse();
        }
        let start = (0..v.len())
            .min_by(|&i, &j| {
                (v[i].x, v[i].y)
                    .partial_cmp(&(v[j].x, v[j].y))
                    .unwrap_or(core::cmp::Ordering::Equal)
            })
            .unwrap_or(0);
        v.rotate_left(start);
        v.push(v[0]);
        Ok(LineString::new(v))
    };
    let key = |r: &LineString<f64>| (r.0[0].x, r.0[0].y);
    let mut polys = Vec::with_capacity(shape.0.len());
    for p in &shape.0 {
        let ext = ring(p.exterior(), true)?;
        let mut holes = p
            .interiors()
            .iter()
            .map(|r| ring(r, false))
            .collect::<Result<Vec<_>>>()?;
        holes.sort_by(|a, b| {
            key(a)
                .partial_cmp(&key(b))
                .unwrap_or(core::cmp::Ordering::Equal)
        });
        polys.push(Polygon::new(ext, holes));
    }
    polys.sort_by(|a, b| {
        key(a.exterior())
            .partial_cmp(&key(b.exterior()))
            .unwrap_or(core::cmp::Ordering::Equal)
    });
    let shape = MultiPolygon::new(polys);
    if let Err(e) = shape.check_validation() {
        return Err(invalid(name, e));
    }
    Ok(shape)
}

/// SHA-256 over a fixed encoding of the normalised geometry: the tag
/// `geopriv-region-v1`, then for each part its ring count, and for each
/// ring its vertex count and the vertices' x and y as little-endian IEEE
/// bits (all counts as u64 little-endian).
fn geometry_digest(shape: &MultiPolygon<f64>) -> [u8; 32] {
    let mut h = Sha256::new();
    h.update(b"geopriv-region-v1");
    h.update((shape.0.len() as u64).to_le_bytes());
    for p in &shape.0 {
        h.update((1 + p.interiors().len() as u64).to_le_bytes());
        for r in core::iter::once(p.exterior()).chain(p.interiors()) {
            h.update((r.0.len() as u64).to_le_bytes());
            for c in &r.0 {
                h.update(c.x.to_bits().to_le_bytes());
                h.update(c.y.to_bits().to_le_bytes());
            }
        }
    }
    h.finalize().into()
}

fn hex(bytes: &[u8]) -> String {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    let mut s = String::with_capacity(2 * bytes.len());
    for b in bytes {
        s.push(DIGITS[(b >> 4) as usize] as char);
        s.push(DIGITS[(b & 15) as usize] as char);
    }
    s
}

impl Query for RegionQuery {
    fn descriptor(&self) -> QueryDescriptor {
        QueryDescriptor::Region {
            digest: self.digest_hex(),
            width: self.width,
        }
    }

    fn dimension(&self) -> usize {
        2
    }

    fn value(&self, x: &[f64]) -> Result<f64> {
        Ok((0.5 + self.signed_distance(x)? / self.width).clamp(0.0, 1.0))
    }

    fn global_lipschitz(&self) -> f64 {
        1.0 / self.width
    }

    fn pointwise_lipschitz(&self, x: &[f64]) -> Result<f64> {
        Ok(1.0 / (self.ramp_distance(x)? + self.width))
    }

    fn smooth_sensitivity(&self, x: &[f64], growth: Growth) -> Result<f64> {
        Ok(ramp_smooth_sensitivity(
            self.ramp_distance(x)?,
            self.width,
            growth,
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use geo::polygon;

    fn square() -> Polygon<f64> {
        polygon![(x: 0.0, y: 0.0), (x: 100.0, y: 0.0), (x: 100.0, y: 100.0), (x: 0.0, y: 100.0)]
    }

    #[test]
    fn values_distances_and_digest() {
        let q = RegionQuery::new(square(), 20.0).unwrap();
        assert_eq!(q.signed_distance(&[50.0, 50.0]).unwrap(), 50.0);
        assert_eq!(q.signed_distance(&[-3.0, 50.0]).unwrap(), -3.0);
        assert_eq!(q.signed_distance(&[103.0, 104.0]).unwrap(), -5.0);
        assert_eq!(q.value(&[5.0, 50.0]).unwrap(), 0.75);
        assert_eq!(q.pointwise_lipschitz(&[5.0, 50.0]).unwrap(), 0.05);
        assert_eq!(q.pointwise_lipschitz(&[-30.0, 50.0]).unwrap(), 1.0 / 40.0);
        assert!(q.is_exact_at(&[-30.0, 50.0]).unwrap());
        assert_eq!(q.digest_hex().len(), 64);
        // The same square written clockwise, from another start vertex,
        // with a repeated vertex, has the same identity.
        let same: Polygon<f64> = polygon![(x: 100.0, y: 100.0), (x: 100.0, y: 0.0), (x: 100.0, y: 0.0), (x: 0.0, y: 0.0), (x: 0.0, y: 100.0)];
        assert_eq!(RegionQuery::new(same, 20.0).unwrap().digest(), q.digest());
        let moved: Polygon<f64> = polygon![(x: 0.0, y: 0.0), (x: 100.0, y: 0.0), (x: 100.0, y: 100.0), (x: 0.0, y: 100.5)];
        assert_ne!(RegionQuery::new(moved, 20.0).unwrap().digest(), q.digest());
    }

    #[test]
    fn bad_geometry_is_refused() {
        let bowtie: Polygon<f64> =
            polygon![(x: 0.0, y: 0.0), (x: 1.0, y: 1.0), (x: 1.0, y: 0.0), (x: 0.0, y: 1.0)];
        assert!(RegionQuery::new(bowtie, 1.0).is_err());
        let nan: Polygon<f64> = polygon![(x: 0.0, y: 0.0), (x: f64::NAN, y: 1.0), (x: 1.0, y: 0.0)];
        assert!(RegionQuery::new(nan, 1.0).is_err());
        let flat: Polygon<f64> = polygon![(x: 0.0, y: 0.0), (x: 1.0, y: 0.0), (x: 2.0, y: 0.0)];
        assert!(RegionQuery::new(flat, 1.0).is_err());
        assert!(RegionQuery::new(square(), 0.0).is_err());
        assert!(RegionQuery::new(MultiPolygon::new(vec![]), 1.0).is_err());
        let q = RegionQuery::new(square(), 1.0).unwrap();
        assert!(q.value(&[f64::NAN, 0.0]).is_err());
        assert!(q.value(&[1.0]).is_err());
    }
}
