//! Fresh-eyes attack on regions: hostile geometry (huge and tiny
//! coordinates, duplicate vertices, self-touching and degenerate rings,
//! deep nesting, many features) never panics; on every accepted shape the
//! indexed signed distance equals `signed_distance_unindexed` bit for bit
//! (vertices, edge points, points level with vertices, far points), the
//! value is in [0, 1] and the smooth sensitivity is at least the exact
//! ramp bound (1/W)/g(e) at the *true* ramp distance.

use geo::{Coord, LineString, MultiPolygon, Polygon};
use geopriv::query::region_geojson::{polygons_from_geojson, region_from_geojson, FeatureSelector};
use geopriv::{Growth, Query, RegionQuery};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

fn ngon(cx: f64, cy: f64, n: usize, r: f64, wobble: f64, seed: u64) -> LineString<f64> {
    let mut rng = StdRng::seed_from_u64(seed);
    LineString::new(
        (0..n)
            .map(|i| {
                let t = i as f64 * core::f64::consts::TAU / n as f64;
                let rr = r * (1.0 + wobble * rng.random_range(-1.0..1.0));
                Coord {
                    x: cx + rr * t.cos(),
                    y: cy + rr * t.sin(),
                }
            })
            .collect(),
    )
}

/// The next float up / down (MSRV 1.85 has no `next_up`).
fn up(v: f64) -> f64 {
    if v == 0.0 {
        f64::from_bits(1)
    } else if v > 0.0 {
        f64::from_bits(v.to_bits() + 1)
    } else {
        f64::from_bits(v.to_bits() - 1)
    }
}

fn down(v: f64) -> f64 {
    -up(-v)
}

fn probe_points(q: &RegionQuery, rng: &mut StdRng) -> Vec<[f64; 2]> {
    let mut out = Vec::new();
    let verts: Vec<Coord<f64>> = q
        .shape()
        .0
        .iter()
        .flat_map(|p| core::iter::once(p.exterior()).chain(p.interiors()))
        .flat_map(|r| r.0.iter().copied())
        .collect();
    let scale = verts
        .iter()
        .map(|c| c.x.abs().max(c.y.abs()))
        .fold(0.0f64, f64::max);
    for w in verts.windows(2) {
        let (a, b) = (w[0], w[1]);
        out.push([a.x, a.y]);
        for t in [0.5, 1.0 / 3.0, rng.random_range(0.0..1.0)] {
            out.push([a.x + t * (b.x - a.x), a.y + t * (b.y - a.y)]);
        }
        // Level with the vertex, to its left and right; nudged.
        out.push([a.x - 1.0, a.y]);
        out.push([a.x + 1.0, a.y]);
        out.push([up(a.x), a.y]);
        out.push([a.x, down(a.y)]);
        out.push([up(a.x), up(a.y)]);
    }
    for _ in 0..200 {
        out.push([
            rng.random_range(-2.0..2.0) * scale,
            rng.random_range(-2.0..2.0) * scale,
        ]);
    }
    for far in [1e50, 1e99, 1e100, 1e101, 1e200, 1e300, f64::MAX] {
        out.push([far, 0.0]);
        out.push([-far, far]);
        out.push([0.0, -far]);
    }
    out
}

/// The distance from x to the boundary, segment by segment, with the
/// projection parameter clamped (no `geo`).
fn boundary_distance(q: &RegionQuery, x: [f64; 2]) -> f64 {
    let mut best = f64::INFINITY;
    for p in &q.shape().0 {
        for r in core::iter::once(p.exterior()).chain(p.interiors()) {
            for w in r.0.windows(2) {
                let (a, b) = (w[0], w[1]);
                let (dx, dy) = (b.x - a.x, b.y - a.y);
                let l2 = dx * dx + dy * dy;
                let t = (((x[0] - a.x) * dx + (x[1] - a.y) * dy) / l2).clamp(0.0, 1.0);
                let (px, py) = (a.x + t * dx, a.y + t * dy);
                // Both the foot and the endpoints: the smallest is a
                // boundary point, so never below the true distance by more
                // than rounding.
                for (cx, cy) in [(px, py), (a.x, a.y), (b.x, b.y)] {
                    best = best.min(libm::hypot(cx - x[0], cy - x[1]));
                }
            }
        }
    }
    best
}

fn scale(q: &RegionQuery) -> f64 {
    q.shape()
        .0
        .iter()
        .flat_map(|p| core::iter::once(p.exterior()).chain(p.interiors()))
        .flat_map(|r| r.0.iter())
        .map(|c| c.x.abs().max(c.y.abs()))
        .fold(0.0f64, f64::max)
}

fn check(q: &RegionQuery, seed: u64) {
    let mut rng = StdRng::seed_from_u64(seed);
    let g = Growth::exponential(0.01).unwrap();
    for x in probe_points(q, &mut rng) {
        let a = q.signed_distance(&x).unwrap();
        let b = q.signed_distance_unindexed(&x).unwrap();
        assert_eq!(
            a.to_bits(),
            b.to_bits(),
            "indexed {a} vs unindexed {b} at {x:?} (indexed: {})",
            q.is_indexed()
        );
        // |sd| never above an independent distance (an overestimate of
        // the ramp distance would shrink the smooth sensitivity).
        // (Up to rounding at the coordinates' scale, 8 ulp of M + |x|.)
        let true_d = boundary_distance(q, x);
        let m = scale(q).max(x[0].abs()).max(x[1].abs());
        if true_d.is_finite() && m < 1e150 {
            assert!(
                a.abs() <= true_d * (1.0 + 1e-12) + 8.0 * f64::EPSILON * m,
                "|sd| {a} above the distance {true_d} at {x:?}"
            );
        }
        let v = q.value(&x).unwrap();
        assert!((0.0..=1.0).contains(&v), "value {v} at {x:?}");
        let s = q.smooth_sensitivity(&x, g).unwrap();
        assert!(s.is_finite() && s >= 0.0, "S {s} at {x:?}");
        if let Err(e) = q.is_exact_at(&x) {
            panic!("is_exact_at({x:?}) = {e} (sd {a})");
        }
    }
}

#[test]
fn hostile_shapes_never_panic_and_index_equals_brute() {
    let mut shapes: Vec<MultiPolygon<f64>> = Vec::new();
    for (n, r, c) in [
        (60, 1e3, 0.0),
        (200, 1e-6, 0.0),
        (60, 1e-300, 0.0),
        (60, 1e99, 0.0),
        (60, 1e100, 0.0),
        (60, 1e101, 0.0),
        (60, 1e150, 0.0),
        (60, 1.0, 1e15),
        (60, 1.0, 1e17),
        (60, 1e3, 1e99),
    ] {
        for wobble in [0.0, 0.3] {
            shapes.push(Polygon::new(ngon(c, c, n, r, wobble, n as u64), vec![]).into());
        }
    }
    // Duplicate vertices everywhere.
    let mut dup = ngon(0.0, 0.0, 80, 100.0, 0.2, 9).0;
    dup = dup.into_iter().flat_map(|c| [c, c, c]).collect();
    shapes.push(Polygon::new(LineString::new(dup), vec![]).into());
    // Two squares touching at a vertex (multi-part), each with many vertices.
    let square = |x0: f64, y0: f64| {
        let mut v = Vec::new();
        for i in 0..25 {
            v.push(Coord {
                x: x0 + i as f64,
                y: y0,
            });
        }
        for i in 0..25 {
            v.push(Coord {
                x: x0 + 25.0,
                y: y0 + i as f64,
            });
        }
        for i in 0..25 {
            v.push(Coord {
                x: x0 + 25.0 - i as f64,
                y: y0 + 25.0,
            });
        }
        for i in 0..25 {
            v.push(Coord {
                x: x0,
                y: y0 + 25.0 - i as f64,
            });
        }
        LineString::new(v)
    };
    shapes.push(MultiPolygon::new(vec![
        Polygon::new(square(0.0, 0.0), vec![]),
        Polygon::new(square(25.0, 25.0), vec![]),
    ]));
    // A hole touching the shell at a vertex.
    shapes.push(
        Polygon::new(
            square(0.0, 0.0),
            vec![LineString::new(vec![
                Coord { x: 0.0, y: 10.0 },
                Coord { x: 5.0, y: 8.0 },
                Coord { x: 5.0, y: 12.0 },
            ])],
        )
        .into(),
    );
    let mut accepted = 0;
    for (i, s) in shapes.into_iter().enumerate() {
        for w in [1e-300, 1e-3, 20.0, 1e300] {
            match RegionQuery::new(s.clone(), w) {
                Ok(q) => {
                    accepted += 1;
                    check(&q, i as u64);
                }
                Err(e) => {
                    let _ = e.to_string();
                }
            }
        }
    }
    assert!(accepted > 20, "{accepted}");
}

#[test]
fn hostile_geojson_is_refused_without_panic() {
    let deep = format!(
        "{{\"type\":\"Feature\",\"properties\":{{\"a\":{}1{}}},\"geometry\":null}}",
        "[".repeat(100_000),
        "]".repeat(100_000)
    );
    let mut many = String::from("{\"type\":\"FeatureCollection\",\"features\":[");
    for i in 0..20_000 {
        if i > 0 {
            many.push(',');
        }
        many.push_str(&format!(
            "{{\"type\":\"Feature\",\"id\":{i},\"geometry\":{{\"type\":\"Polygon\",\"coordinates\":[[[0,0],[1,0],[1,1],[0,0]]]}}}}"
        ));
    }
    many.push_str("]}");
    let big_ring: String = (0..200_001)
        .map(|i| format!("[{},{}]", i % 7, i % 11))
        .collect::<Vec<_>>()
        .join(",");
    let texts = [
        deep,
        many.clone(),
        format!("{{\"type\":\"Polygon\",\"coordinates\":[[{big_ring}]]}}"),
        r#"{"type":"Polygon","coordinates":[[[0,0],[1e400,0],[1,1],[0,0]]]}"#.into(),
        r#"{"type":"Polygon","coordinates":[[[0,0],[1e308,0],[1e308,1e308],[0,0]]]}"#.into(),
        r#"{"type":"Polygon","coordinates":[[[0,0],[1,0],[2,0],[0,0]]]}"#.into(),
        r#"{"type":"Polygon","coordinates":[[[0,0],[0,0],[0,0],[0,0]]]}"#.into(),
        r#"{"type":"Polygon","coordinates":[[[0,0],[2,2],[2,0],[0,2],[0,0]]]}"#.into(),
        r#"{"type":"Polygon","coordinates":[[[0,0,5],[1,0],[1,1],[0,0]]]}"#.into(),
        r#"{"type":"Polygon","coordinates":[[[0],[1,0],[1,1],[0,0]]]}"#.into(),
        r#"{"type":"Polygon","coordinates":[]}"#.into(),
        r#"{"type":"Polygon","coordinates":[[]]}"#.into(),
        r#"{"type":"MultiPolygon","coordinates":[[]]}"#.into(),
        r#"{"type":"GeometryCollection","geometries":[]}"#.into(),
        r#"{"type":"Polygon","coordinates":[[[0,0],[1,0],[1,1],[0,0]],[[0,0],[1,0],[1,1],[0,0]]]}"#
            .into(),
    ];
    for t in &texts {
        let _ = polygons_from_geojson(t).map(|v| v.len());
        for sel in [FeatureSelector::Only, FeatureSelector::Id("7".into())] {
            if let Ok(q) = region_from_geojson(t, &sel, 1.0, None) {
                check(&q, 1);
            }
        }
    }
    assert_eq!(polygons_from_geojson(&many).unwrap().len(), 20_000);
}

/// Memory of `polygons_from_geojson` on a large document (run by hand:
/// `/usr/bin/time -v cargo test ... -- --ignored geojson_memory`): the
/// peak RSS per input byte, to size the 64 MiB `MAX_GEOJSON_BYTES` limit.
#[test]
#[ignore = "measurement, run by hand"]
fn geojson_memory() {
    let mb: usize = std::env::var("ATTACK3_GEOJSON_MB")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(16);
    let mut t = String::from("{\"type\":\"FeatureCollection\",\"features\":[");
    let mut i = 0;
    while t.len() < mb << 20 {
        if i > 0 {
            t.push(',');
        }
        t.push_str(&format!(
            "{{\"type\":\"Feature\",\"id\":{i},\"geometry\":{{\"type\":\"Polygon\",\"coordinates\":[[[0,0],[1,0],[1,1],[0,1],[0,0]]]}}}}"
        ));
        i += 1;
    }
    t.push_str("]}");
    let n = polygons_from_geojson(&t).unwrap().len();
    eprintln!("{} bytes, {n} features", t.len());
}
