//! The region query (docs/MATH.md §13) under the density audit (§6) and
//! the black-box sampling tester (§8.2): every mechanism passes on a
//! concave, holed region and on a triangle, and the audit fails on a
//! region whose S is deliberately halved.

use geo::{polygon, Polygon};
use geopriv::audit::sampling::{sampling_audit, SamplingOptions};
use geopriv::audit::{audit_mechanism, AuditTarget};
use geopriv::{Growth, Mechanism, Query, QueryDescriptor, RegionQuery};

/// An L-shape (reflex vertex at (40, 40)) with a square hole, ramp 10.
fn concave_holed() -> RegionQuery {
    let outer: Polygon<f64> = polygon![
        (x: 0.0, y: 0.0), (x: 100.0, y: 0.0), (x: 100.0, y: 40.0),
        (x: 40.0, y: 40.0), (x: 40.0, y: 100.0), (x: 0.0, y: 100.0)
    ];
    let hole: Polygon<f64> =
        polygon![(x: 10.0, y: 10.0), (x: 25.0, y: 10.0), (x: 25.0, y: 25.0), (x: 10.0, y: 25.0)];
    RegionQuery::new(
        Polygon::new(outer.exterior().clone(), vec![hole.exterior().clone()]),
        10.0,
    )
    .unwrap()
}

/// Every local mechanism at `eps` (noise a priori too with `a_priori`).
fn mechanisms(eps: f64, a_priori: bool) -> Vec<Mechanism> {
    let mut v = vec![
        Mechanism::polyplace(eps).unwrap(),
        Mechanism::student_t(eps).unwrap(),
        Mechanism::cauchy(eps).unwrap(),
        Mechanism::laplace(eps, 1e-6).unwrap(),
        Mechanism::global_laplace(eps).unwrap(),
    ];
    if a_priori {
        v.push(Mechanism::noise_a_priori(eps).unwrap());
    }
    v
}

#[test]
fn density_audit_passes_on_regions() {
    for (q, epsilon) in [(concave_holed(), 0.05), (triangle(), 0.5)] {
        for m in mechanisms(epsilon, false) {
            let r = audit_mechanism(&m, &q, 3_000, 7).unwrap();
            println!(
                "{:15} {:36} max_loss_ratio {:.9}",
                r.mechanism, r.query, r.max_loss_ratio
            );
            assert!(r.passed, "{r:#?}");
            if matches!(r.mechanism.as_str(), "polyplace" | "student-t" | "cauchy") {
                assert!(r.max_loss_ratio > 0.5, "{r:#?}");
            }
        }
    }
}

fn triangle() -> RegionQuery {
    let t: Polygon<f64> = polygon![(x: 0.0, y: 0.0), (x: 4.0, y: 0.0), (x: 1.0, y: 3.0)];
    RegionQuery::new(t, 1.0).unwrap()
}

#[test]
fn sampling_tester_passes_on_a_region() {
    let q = triangle();
    let options = SamplingOptions {
        samples: 40_000,
        pilot: 10_000,
        bins: 32,
        alpha: 1e-6,
        seed: 17,
    };
    for m in mechanisms(2.0, true) {
        let r = sampling_audit(&m, &q, &options).unwrap();
        let w = r.worst.clone().unwrap();
        println!(
            "{} region: {} pairs, worst {:.3} εd",
            m.name(),
            r.pairs,
            w.ratio
        );
        assert!(r.passed, "{}: {w:?}", m.name());
    }
}

/// A region with S halved: a seeded fault the audit must catch.
struct HalvedS(RegionQuery);

impl Query for HalvedS {
    fn descriptor(&self) -> QueryDescriptor {
        self.0.descriptor()
    }
    fn dimension(&self) -> usize {
        2
    }
    fn value(&self, x: &[f64]) -> geopriv::Result<f64> {
        self.0.value(x)
    }
    fn global_lipschitz(&self) -> f64 {
        self.0.global_lipschitz()
    }
    fn pointwise_lipschitz(&self, x: &[f64]) -> geopriv::Result<f64> {
        self.0.pointwise_lipschitz(x)
    }
    fn smooth_sensitivity(&self, x: &[f64], g: Growth) -> geopriv::Result<f64> {
        Ok(0.5 * self.0.smooth_sensitivity(x, g)?)
    }
}

impl AuditTarget for HalvedS {
    fn landmarks(&self) -> Vec<Vec<f64>> {
        self.0.landmarks()
    }
    fn length_scale(&self) -> f64 {
        self.0.length_scale()
    }
    fn describe(&self) -> String {
        "halved-S region".into()
    }
}

#[test]
fn density_audit_fails_on_a_halved_region_sensitivity() {
    let q = HalvedS(concave_holed());
    let r = audit_mechanism(&Mechanism::polyplace(0.05).unwrap(), &q, 2_000, 7).unwrap();
    println!("halved S: max_loss_ratio {:.3}", r.max_loss_ratio);
    assert!(!r.passed && r.max_loss_ratio > 1.2, "{r:#?}");
}
