//! A spatial index over a region's boundary segments (docs/MATH.md §13.7):
//! the signed distance and the point-in-polygon test in O(log n) per call
//! instead of a pass over every segment, with results bit-identical to the
//! `geo` crate's brute computation ([`brute_signed_distance`]).
//!
//! The segments sit in an R-tree (the `rstar` crate, already in the tree as
//! a dependency of `geo`). Both queries only decide *which* segments are
//! looked at; each looked-at segment is evaluated by the same `geo` code,
//! and the choice among them follows `geo`'s own tie rule, so the answer is
//! the brute one whenever the skipped segments provably cannot matter:
//!
//! * nearest point: the R-tree hands out segments in increasing order of
//!   its own squared distance (best first over node envelopes). Each is
//!   evaluated with `geo`'s `Line::closest_point`; D is the smallest `geo`
//!   distance so far. The walk stops at the first segment or node whose
//!   R-tree distance exceeds B = D + 1e-9·(D + M) (M the largest coordinate
//!   magnitude of the shape and x): the R-tree's and `geo`'s distances are
//!   both within a few units of 1e-16·(D + M) of the exact one, so every
//!   segment not yet handed out has a `geo` distance above D and can
//!   neither win nor tie. Among the evaluated segments the last one in
//!   boundary order at the smallest `Euclidean` distance wins, as in
//!   `geo`'s fold (`Closest::best_of_two` keeps the newer on ties).
//! * inside or outside: `geo`'s winding-number test adds nothing for an
//!   edge whose y-range misses y(x) or which lies wholly left of x (its
//!   robust orientation test then says "clockwise" for an upward edge and
//!   "counter-clockwise" for a downward one, and a collinear horizontal edge
//!   left of x is not "in between"), so the same test over the edges whose
//!   envelopes meet the ray from x to the right is the same winding number.

use geo::algorithm::coordinate_position::{CoordPos, CoordinatePosition};
use geo::{
    Closest, ClosestPoint, Coord, Distance, Euclidean, GeoNum, Kernel, Line, MultiLineString,
    MultiPolygon, Orientation, Point,
};
use rstar::primitives::{GeomWithData, Line as RLine};
use rstar::{RTree, AABB};

use std::vec::Vec;

/// Below this many segments the brute pass is as fast as the index.
pub(crate) const INDEX_MIN_SEGMENTS: usize = 48;

/// Coordinates beyond this magnitude go through the brute path (squares of
/// distances in the R-tree would overflow).
const INDEX_MAX_COORD: f64 = 1e100;

/// Where a segment sits: the part, the ring within the part (0 = the
/// exterior, then the holes in order), the ring's index in the boundary
/// (parts' rings in order) and the segment's index in its ring.
#[derive(Clone, Copy, Debug, PartialEq)]
struct SegmentId {
    part: u32,
    ring: u32,
    boundary_ring: u32,
    segment: u32,
}

type Entry = GeomWithData<RLine<[f64; 2]>, SegmentId>;

/// The R-tree of a region's boundary segments.
#[derive(Clone)]
pub(crate) struct SegmentIndex {
    tree: RTree<Entry>,
    /// Rings per part (exterior first), for the per-part inside test.
    rings_per_part: Vec<u32>,
    /// First ring of each part among all rings (exterior, holes, next part).
    ring_offset: Vec<u32>,
    /// Largest x of any vertex: the ray's end.
    max_x: f64,
    /// Largest coordinate magnitude of any vertex.
    max_abs: f64,
}

impl core::fmt::Debug for SegmentIndex {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        write!(f, "SegmentIndex({} segments)", self.tree.size())
    }
}

impl PartialEq for SegmentIndex {
    /// The index is a function of the geometry it was built from.
    fn eq(&self, _: &Self) -> bool {
        true
    }
}

impl SegmentIndex {
    /// The index of a normalised shape's boundary (closed rings), or `None`
    /// when the shape is small enough for the brute pass or its coordinates
    /// are too large for the R-tree's squared distances.
    pub(crate) fn build(shape: &MultiPolygon<f64>) -> Option<Self> {
        let mut entries = Vec::new();
        let mut rings_per_part = Vec::with_capacity(shape.0.len());
        let mut ring_offset = Vec::with_capacity(shape.0.len());
        let (mut max_x, mut max_abs) = (f64::NEG_INFINITY, 0.0f64);
        let mut boundary_ring = 0u32;
        for (part, p) in shape.0.iter().enumerate() {
            ring_offset.push(boundary_ring);
            rings_per_part.push(1 + p.interiors().len() as u32);
            for (ring, r) in core::iter::once(p.exterior())
                .chain(p.interiors())
                .enumerate()
            {
                for (segment, l) in r.lines().enumerate() {
                    for c in [l.start, l.end] {
                        max_x = max_x.max(c.x);
                        max_abs = max_abs.max(c.x.abs()).max(c.y.abs());
                    }
                    let id = SegmentId {
                        part: part as u32,
                        ring: ring as u32,
                        boundary_ring,
                        segment: segment as u32,
                    };
                    entries.push(GeomWithData::new(
                        RLine::new([l.start.x, l.start.y], [l.end.x, l.end.y]),
                        id,
                    ));
                }
                boundary_ring += 1;
            }
        }
        if entries.len() < INDEX_MIN_SEGMENTS || max_abs > INDEX_MAX_COORD {
            return None;
        }
        Some(Self {
            tree: RTree::bulk_load(entries),
            rings_per_part,
            ring_offset,
            max_x,
            max_abs,
        })
    }

    /// [`brute_signed_distance`] through the index; `None` when x is too far
    /// out for the index (the caller then takes the brute path).
    pub(crate) fn signed_distance(
        &self,
        shape: &MultiPolygon<f64>,
        x: [f64; 2],
    ) -> Option<(f64, Option<[f64; 2]>)> {
        let m = self.max_abs.max(x[0].abs()).max(x[1].abs());
        if m > INDEX_MAX_COORD {
            return None;
        }
        let p = Point::new(x[0], x[1]);
        let nearest = self.closest(p, m)?;
        let nearest = match nearest {
            Closest::Intersection(_) => return Some((0.0, Some(x))),
            Closest::SinglePoint(q) => q,
            Closest::Indeterminate => return Some((0.0, None)),
        };
        let d = libm::hypot(nearest.x() - x[0], nearest.y() - x[1]);
        let sign = match self.position(shape, p.0) {
            CoordPos::Inside => 1.0,
            CoordPos::Outside => -1.0,
            CoordPos::OnBoundary => return Some((0.0, Some(x))),
        };
        Some((sign * d, Some([nearest.x(), nearest.y()])))
    }

    /// `geo`'s `MultiLineString::closest_point` over the segments that can
    /// win (module docs).
    fn closest(&self, p: Point<f64>, m: f64) -> Option<Closest<f64>> {
        // The winner: smallest distance, and on ties the last in boundary
        // order (ring, then segment), as geo's fold picks it.
        let mut best: Option<((u32, u32), f64, Point<f64>)> = None;
        for (e, key2) in self
            .tree
            .nearest_neighbor_iter_with_distance_2(&[p.x(), p.y()])
        {
            if let Some((_, d, _)) = best {
                let bound = d + 1e-9 * (d + m);
                if key2 > bound * bound {
                    break;
                }
            }
            let q = match line_of(e).closest_point(&p) {
                Closest::Intersection(_) => return Some(Closest::Intersection(p)),
                Closest::SinglePoint(q) => q,
                Closest::Indeterminate => continue,
            };
            let d = Euclidean.distance(q, p);
            let key = (e.data.boundary_ring, e.data.segment);
            let better = match &best {
                None => true,
                Some((k, bd, _)) => d < *bd || (d == *bd && key > *k),
            };
            if better {
                best = Some((key, d, q));
            }
        }
        Some(best.map_or(Closest::Indeterminate, |(_, _, q)| Closest::SinglePoint(q)))
    }

    /// `geo`'s `MultiPolygon::coordinate_position` from the edges that meet
    /// the ray from c to the right (module docs).
    fn position(&self, shape: &MultiPolygon<f64>, c: Coord<f64>) -> CoordPos {
        let rings = self.ring_offset.last().copied().unwrap_or(0) as usize
            + self.rings_per_part.last().copied().unwrap_or(0) as usize;
        // Per ring: winding number, and whether an edge put c on it.
        let mut winding = std::vec![0i64; rings];
        let mut on = std::vec![false; rings];
        if c.x <= self.max_x {
            let ray = AABB::from_corners([c.x, c.y], [self.max_x, c.y]);
            for e in self.tree.locate_in_envelope_intersecting(&ray) {
                let i = e.data.boundary_ring as usize;
                match winding_step(line_of(e), c) {
                    Step::On => on[i] = true,
                    Step::Add(w) => winding[i] += w,
                }
            }
        }
        let ring_pos = |i: usize| {
            if on[i] {
                CoordPos::OnBoundary
            } else if winding[i] == 0 {
                CoordPos::Outside
            } else {
                CoordPos::Inside
            }
        };
        // Polygon::calculate_coordinate_position and the mod-2 rule, as geo.
        let (mut is_inside, mut boundary_count) = (false, 0usize);
        for (part, _) in shape.0.iter().enumerate() {
            let first = self.ring_offset[part] as usize;
            match ring_pos(first) {
                CoordPos::Outside => {}
                CoordPos::OnBoundary => boundary_count += 1,
                CoordPos::Inside => {
                    let mut in_hole = false;
                    for h in 1..self.rings_per_part[part] as usize {
                        match ring_pos(first + h) {
                            CoordPos::Outside => {}
                            CoordPos::OnBoundary => {
                                boundary_count += 1;
                                in_hole = true;
                                break;
                            }
                            CoordPos::Inside => {
                                in_hole = true;
                                break;
                            }
                        }
                    }
                    if !in_hole {
                        is_inside = true;
                    }
                }
            }
        }
        if boundary_count % 2 == 1 {
            CoordPos::OnBoundary
        } else if is_inside {
            CoordPos::Inside
        } else {
            CoordPos::Outside
        }
    }
}

fn line_of(e: &Entry) -> Line<f64> {
    let (a, b) = (e.geom().from, e.geom().to);
    Line::new(Coord { x: a[0], y: a[1] }, Coord { x: b[0], y: b[1] })
}

enum Step {
    On,
    Add(i64),
}

/// One edge of `geo`'s `coord_pos_relative_to_ring` (winding number with
/// the boundary short-cut), line for line.
fn winding_step(line: Line<f64>, coord: Coord<f64>) -> Step {
    let between = |v: f64, a: f64, b: f64| {
        if a < b {
            v >= a && v <= b
        } else {
            v >= b && v <= a
        }
    };
    if line.start.y <= coord.y {
        if line.end.y >= coord.y {
            let o = <f64 as GeoNum>::Ker::orient2d(line.start, line.end, coord);
            if o == Orientation::CounterClockwise && line.end.y != coord.y {
                return Step::Add(1);
            } else if o == Orientation::Collinear && between(coord.x, line.start.x, line.end.x) {
                return Step::On;
            }
        }
    } else if line.end.y <= coord.y {
        let o = <f64 as GeoNum>::Ker::orient2d(line.start, line.end, coord);
        if o == Orientation::Clockwise {
            return Step::Add(-1);
        } else if o == Orientation::Collinear && between(coord.x, line.start.x, line.end.x) {
            return Step::On;
        }
    }
    Step::Add(0)
}

/// The signed distance to the boundary and a nearest boundary point by a
/// pass over every segment (`geo`'s `closest_point` on the boundary rings
/// and `coordinate_position` on the shape): the reference the index must
/// reproduce bit for bit.
pub(crate) fn brute_signed_distance(
    shape: &MultiPolygon<f64>,
    boundary: &MultiLineString<f64>,
    x: [f64; 2],
) -> (f64, Option<[f64; 2]>) {
    let p = Point::new(x[0], x[1]);
    let nearest = match boundary.closest_point(&p) {
        Closest::Intersection(_) => return (0.0, Some(x)),
        Closest::SinglePoint(q) => q,
        Closest::Indeterminate => return (0.0, None), // unreachable: rings are non-empty
    };
    let d = libm::hypot(nearest.x() - x[0], nearest.y() - x[1]);
    let sign = match shape.coordinate_position(&p.0) {
        CoordPos::Inside => 1.0,
        CoordPos::Outside => -1.0,
        CoordPos::OnBoundary => return (0.0, Some(x)),
    };
    (sign * d, Some([nearest.x(), nearest.y()]))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::query::region::RegionQuery;
    use geo::{LineString, Polygon};
    use proptest::prelude::*;
    use rand::rngs::StdRng;
    use rand::{Rng, SeedableRng};

    fn ngon(cx: f64, cy: f64, n: usize, r: impl Fn(f64) -> f64, rot: f64) -> LineString<f64> {
        LineString::new(
            (0..n)
                .map(|i| {
                    let t = rot + i as f64 * core::f64::consts::TAU / n as f64;
                    Coord {
                        x: cx + r(t) * t.cos(),
                        y: cy + r(t) * t.sin(),
                    }
                })
                .collect(),
        )
    }

    /// An axis-aligned comb with integer vertices: horizontal edges,
    /// collinear runs and points level with vertices.
    fn comb(teeth: usize, depth: f64) -> LineString<f64> {
        let mut v = vec![Coord { x: 0.0, y: 0.0 }];
        for k in 0..teeth {
            let x = 4.0 * k as f64;
            v.push(Coord { x: x + 1.0, y: 0.0 });
            v.push(Coord {
                x: x + 1.0,
                y: -depth,
            });
            v.push(Coord {
                x: x + 3.0,
                y: -depth,
            });
            v.push(Coord { x: x + 3.0, y: 0.0 });
        }
        let w = 4.0 * teeth as f64;
        v.extend([
            Coord { x: w, y: 0.0 },
            Coord { x: w, y: 5.0 },
            Coord { x: 0.0, y: 5.0 },
        ]);
        LineString::new(v)
    }

    /// Shapes of each kind, all with at least INDEX_MIN_SEGMENTS segments.
    fn shape(kind: u8, n: usize, k: f64, rot: f64) -> MultiPolygon<f64> {
        let flower = move |a: f64| move |t: f64| 1000.0 * (1.0 + a * (k * t).sin());
        match kind % 5 {
            // convex
            0 => Polygon::new(ngon(10.0, -20.0, n, |_| 1000.0, rot), vec![]).into(),
            // concave (reflex vertices, necks when the amplitude is large)
            1 => Polygon::new(ngon(0.0, 0.0, n, flower(0.6), rot), vec![]).into(),
            // holed
            2 => Polygon::new(
                ngon(0.0, 0.0, n, |_| 1000.0, rot),
                vec![
                    ngon(-400.0, 0.0, n / 3 + 3, |_| 150.0, rot),
                    ngon(400.0, 0.0, 17, |_| 200.0, -rot),
                    ngon(0.0, 500.0, 5, |_| 100.0, 0.0),
                ],
            )
            .into(),
            // multi-part
            3 => MultiPolygon::new(vec![
                Polygon::new(ngon(0.0, 0.0, n, flower(0.3), rot), vec![]),
                Polygon::new(
                    ngon(2600.0, 100.0, n / 2 + 3, |_| 1000.0, rot),
                    vec![ngon(2600.0, 100.0, 9, |_| 300.0, 0.0)],
                ),
                Polygon::new(ngon(-900.0, 2500.0, 7, |_| 400.0, rot), vec![]),
            ]),
            _ => Polygon::new(comb(n / 4 + 12, 3.0 + (k as u32 % 4) as f64), vec![]).into(),
        }
    }

    /// Points that stress the index: uniform over the box and beyond,
    /// vertices, edge midpoints, vertices nudged by 1e-9..1, points level
    /// with a vertex, half-unit lattice points (ties between parallel
    /// edges of the comb) and far away.
    fn points(q: &RegionQuery, seed: u64, count: usize) -> Vec<[f64; 2]> {
        let mut rng = StdRng::seed_from_u64(seed);
        let verts: Vec<Coord<f64>> = q
            .shape()
            .0
            .iter()
            .flat_map(|p| core::iter::once(p.exterior()).chain(p.interiors()))
            .flat_map(|r| r.0.iter().copied())
            .collect();
        let (lo, hi) = verts
            .iter()
            .fold(([f64::MAX; 2], [f64::MIN; 2]), |(lo, hi), c| {
                (
                    [lo[0].min(c.x), lo[1].min(c.y)],
                    [hi[0].max(c.x), hi[1].max(c.y)],
                )
            });
        let span = (hi[0] - lo[0]).max(hi[1] - lo[1]);
        (0..count)
            .map(|_| {
                let v = verts[rng.random_range(0..verts.len())];
                let w = verts[rng.random_range(0..verts.len())];
                match rng.random_range(0..7) {
                    0 => [
                        rng.random_range(lo[0] - 0.5 * span..hi[0] + 0.5 * span),
                        rng.random_range(lo[1] - 0.5 * span..hi[1] + 0.5 * span),
                    ],
                    1 => [v.x, v.y],
                    2 => {
                        let u = verts.iter().position(|c| *c == v).unwrap_or(0);
                        let n = verts[(u + 1) % verts.len()];
                        [0.5 * (v.x + n.x), 0.5 * (v.y + n.y)]
                    }
                    3 => {
                        let s = 10f64.powf(rng.random_range(-9.0..0.0));
                        [
                            v.x + s * rng.random_range(-1.0..1.0),
                            v.y + s * rng.random_range(-1.0..1.0),
                        ]
                    }
                    4 => [w.x + rng.random_range(-span..span), v.y],
                    // on a half-unit lattice: equidistant from parallel edges
                    5 => [
                        (2.0 * rng.random_range(lo[0] - 3.0..hi[0] + 3.0)).round() / 2.0,
                        (2.0 * rng.random_range(lo[1] - 3.0..hi[1] + 3.0)).round() / 2.0,
                    ],
                    _ => [
                        lo[0] + 1e3 * span * rng.random_range(-1.0..1.0),
                        hi[1] + 1e3 * span,
                    ],
                }
            })
            .collect()
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(60))]
        /// The indexed signed distance and nearest point are the brute
        /// pass's, bit for bit, on convex, concave, holed, multi-part and
        /// axis-aligned shapes.
        #[test]
        fn index_is_bit_identical_to_the_brute_pass(
            kind in 0u8..5,
            n in 48usize..400,
            k in 2.0f64..9.0,
            rot in 0.0f64..6.3,
            seed in any::<u64>(),
        ) {
            let k = k.floor();
            let q = RegionQuery::new(shape(kind, n, k, rot), 50.0).unwrap();
            let index = SegmentIndex::build(q.shape()).expect("large enough to be indexed");
            let boundary = MultiLineString::new(
                q.shape().0.iter()
                    .flat_map(|p| core::iter::once(p.exterior()).chain(p.interiors()))
                    .cloned().collect(),
            );
            for x in points(&q, seed, 300) {
                let brute = brute_signed_distance(q.shape(), &boundary, x);
                let fast = index.signed_distance(q.shape(), x).expect("coordinates in range");
                prop_assert_eq!(brute.0.to_bits(), fast.0.to_bits(), "sd at {:?}", x);
                prop_assert_eq!(brute.1.map(|p| p.map(f64::to_bits)), fast.1.map(|p| p.map(f64::to_bits)), "nearest at {:?}", x);
            }
        }
    }

    #[test]
    fn small_and_huge_shapes_take_the_brute_path() {
        let tri = Polygon::new(ngon(0.0, 0.0, 3, |_| 1.0, 0.0), vec![]);
        assert!(!RegionQuery::new(tri, 1.0).unwrap().is_indexed());
        let big = Polygon::new(ngon(0.0, 0.0, 64, |_| 1e101, 0.0), vec![]);
        assert!(!RegionQuery::new(big, 1.0).unwrap().is_indexed());
        let q =
            RegionQuery::new(Polygon::new(ngon(0.0, 0.0, 64, |_| 1.0, 0.0), vec![]), 1.0).unwrap();
        assert!(q.is_indexed());
        // A point beyond the index's range is answered by the brute pass.
        let x = [3e100, 0.0];
        assert_eq!(
            q.signed_distance(&x).unwrap(),
            q.signed_distance_unindexed(&x).unwrap()
        );
    }
}
