//! Mechanisms and the device-side release: [`GeoMechanism`] privatizes f(x)
//! and returns a [`PrivateReport`] ready to upload.
//!
//! The report holds the released value and the public parameters (query,
//! mechanism, ε, δ) and nothing else: the smooth sensitivity S(x) and the
//! noise scale depend on x and would leak it, so they never cross the
//! boundary.

use std::fmt;
use std::sync::{Arc, Mutex};

use geopriv::device::budget::NoiseRng;
use rand::rngs::StdRng;
use rand::SeedableRng;

use crate::{guard, lock, BudgetUnit, GeoQuery, GeoprivError, Growth, PrivacyLedger, Projection};

pub use geopriv::MechanismName;

// The core's MechanismName, exported as it is (uniffi remote type): the
// variant list below is checked against the core enum by the compiler.
// Kotlin `MechanismName.STUDENT_T`, Swift `.studentT`, Python
// `MechanismName.STUDENT_T`.
#[uniffi::remote(Enum)]
pub enum MechanismName {
    Polyplace,
    StudentT,
    Cauchy,
    Laplace,
    GlobalLaplace,
    APriori,
    Ldp,
}

/// What a device uploads after privatizing: the same report in two
/// encodings, plus its fields for the app's own bookkeeping.
///
/// Upload `json` (one line, no newline) or `bytes` (compact binary
/// version 3, 47 bytes for a threshold query); the server decodes either
/// with `ReportPolicy.accept_json` / `accept_bytes`. Every field is public
/// information once uploaded; the smooth sensitivity and the noise scale
/// are deliberately absent (they would reveal x).
#[derive(Debug, Clone, PartialEq, uniffi::Record)]
pub struct PrivateReport {
    /// The report as one JSON line (without the trailing newline).
    pub json: String,
    /// The report in the binary wire format.
    pub bytes: Vec<u8>,
    /// The released value f(x) + noise: unbiased for f(x), often outside
    /// [0, 1]. Do not clamp or round it (that biases the server's mean).
    pub value: f64,
    /// The canonical id of the query answered (`GeoQuery.query_id()`).
    pub query_id: String,
    /// The mechanism used.
    pub mechanism: MechanismName,
    /// ε of the release (per unit distance of the query's coordinates).
    pub epsilon: f64,
    /// δ of the release (0 for pure mechanisms).
    pub delta: f64,
    /// The noise came from a `seeded` (reproducible, NOT secure)
    /// mechanism; servers refuse such reports unless told otherwise.
    pub seeded: bool,
}

impl PrivateReport {
    pub(crate) fn from_core(r: &geopriv::Report) -> Self {
        PrivateReport {
            json: r.to_json_line(),
            bytes: r.to_bytes(),
            value: r.value,
            query_id: r.query.canonical_id(),
            mechanism: r.mechanism,
            epsilon: r.epsilon,
            delta: r.delta,
            seeded: r.seeded,
        }
    }
}

/// A release mechanism with its budget ε (per unit distance of the query's
/// coordinates: per metre for projected locations, per dollar for incomes)
/// and, for the Laplace mechanism, δ. Immutable and thread-safe.
///
/// Noise comes from the operating system's secure generator, drawn afresh
/// for every release. `seeded(seed)` gives a copy with a reproducible
/// generator for tests and experiments only.
#[derive(uniffi::Object)]
#[uniffi::export(Display)]
pub struct GeoMechanism {
    inner: geopriv::Mechanism,
    /// `Some` only for `seeded` copies: NOT secure, reproducible.
    seeded: Option<Mutex<StdRng>>,
}

impl GeoMechanism {
    pub(crate) fn wrap(m: geopriv::Result<geopriv::Mechanism>) -> Result<Arc<Self>, GeoprivError> {
        Ok(Arc::new(Self {
            inner: m?,
            seeded: None,
        }))
    }

    /// Run `f` with this mechanism's generator: a fresh OS-seeded
    /// `SecureRng` per call, or the seeded generator (locked) of a
    /// `seeded` copy.
    pub(crate) fn with_rng<T>(
        &self,
        f: impl FnOnce(&mut dyn NoiseRng) -> Result<T, GeoprivError>,
    ) -> Result<T, GeoprivError> {
        match &self.seeded {
            Some(rng) => f(&mut *lock(rng, "seeded generator")?),
            None => f(&mut geopriv::SecureRng::new()),
        }
    }

    /// The core mechanism.
    pub(crate) fn core(&self) -> &geopriv::Mechanism {
        &self.inner
    }

    fn release(
        &self,
        inner: &geopriv::Mechanism,
        query: &GeoQuery,
        x: &[f64],
        ledger: Option<&PrivacyLedger>,
    ) -> Result<PrivateReport, GeoprivError> {
        let report = match ledger {
            // Lock order: ledger, then generator (nothing locks them the
            // other way round).
            Some(l) => l.with_ledger(|ledger| {
                self.with_rng(|rng| query.release(inner, x, rng, Some(ledger)))
            })?,
            None => self.with_rng(|rng| query.release(inner, x, rng, None))?,
        };
        Ok(PrivateReport::from_core(&report))
    }

    /// A lat/lon release: ε is per Web Mercator metre under `WebMercator`
    /// (`PER_MERCATOR_METRE`) and per ground metre under
    /// `LocalEquirectangular` (`PER_METRE`); a mechanism that states
    /// another metre is refused (`UnitMismatch`), other units are left to
    /// the ledger.
    fn latlon_mechanism(
        &self,
        projection: &Projection,
    ) -> Result<geopriv::Mechanism, GeoprivError> {
        use geopriv::BudgetUnit as U;
        let unit = match projection {
            Projection::WebMercator => U::PerMercatorMetre,
            Projection::LocalEquirectangular { .. } => U::PerMetre,
        };
        match self.inner.unit() {
            Some(u @ (U::PerMetre | U::PerMercatorMetre)) if *u != unit => {
                Err(GeoprivError::UnitMismatch(format!(
                    "this projection releases epsilon {unit}, but the mechanism states {u}"
                )))
            }
            Some(_) => Ok(self.inner.clone()),
            None => Ok(self
                .inner
                .clone()
                .with_unit(unit)
                .unwrap_or_else(|_| self.inner.clone())),
        }
    }

    /// Project a location for a 2-D query, refusing a projection other than
    /// the one the query was built with.
    fn project_for(
        query: &GeoQuery,
        lat: f64,
        lon: f64,
        projection: Projection,
    ) -> Result<[f64; 2], GeoprivError> {
        if query.dimension() != 2 {
            return Err(GeoprivError::InvalidParameter(format!(
                "privatize_latlon needs a 2-D query (two-way or a 2-D KDE), but {query} takes {} coordinate(s)",
                query.dimension()
            )));
        }
        if let Some(built_with) = query.projection() {
            if built_with != projection {
                return Err(GeoprivError::InvalidParameter(format!(
                    "the query was built with projection {built_with:?} but the location is projected with {projection:?}; use the same projection"
                )));
            }
        }
        projection.forward(lat, lon, crate::geo::PointRole::Input)
    }
}

#[uniffi::export]
impl GeoMechanism {
    /// PolyPlace, the recommended mechanism (least variance for pure GP),
    /// with γ = ε/9. `epsilon` finite and > 0.
    #[uniffi::constructor]
    pub fn polyplace(epsilon: f64) -> Result<Arc<Self>, GeoprivError> {
        guard(|| Self::wrap(geopriv::Mechanism::polyplace(epsilon)))
    }

    /// PolyPlace with γ = `gamma_share` · ε, 0 < gamma_share < 1 (finite
    /// variance only below 1/2).
    #[uniffi::constructor]
    pub fn polyplace_with(epsilon: f64, gamma_share: f64) -> Result<Arc<Self>, GeoprivError> {
        guard(|| Self::wrap(geopriv::Mechanism::polyplace_with(epsilon, gamma_share)))
    }

    /// Student's t with ν = 3 degrees of freedom and a third of ε spent on
    /// smoothness.
    #[uniffi::constructor]
    pub fn student_t(epsilon: f64) -> Result<Arc<Self>, GeoprivError> {
        guard(|| Self::wrap(geopriv::Mechanism::student_t(epsilon)))
    }

    /// Student's t with `dof` > 1 degrees of freedom and `smoothness_share`
    /// (in (0, 1)) of ε spent on smoothness.
    #[uniffi::constructor]
    pub fn student_t_with(
        epsilon: f64,
        dof: f64,
        smoothness_share: f64,
    ) -> Result<Arc<Self>, GeoprivError> {
        guard(|| {
            Self::wrap(geopriv::Mechanism::student_t_with(
                epsilon,
                dof,
                smoothness_share,
            ))
        })
    }

    /// Generalized Cauchy, density ∝ 1/(1 + |z|⁴), 20% of ε on smoothness.
    #[uniffi::constructor]
    pub fn cauchy(epsilon: f64) -> Result<Arc<Self>, GeoprivError> {
        guard(|| Self::wrap(geopriv::Mechanism::cauchy(epsilon)))
    }

    /// Generalized Cauchy with exponent `k` > 2 and `smoothness_share`
    /// (in (0, 1)) of ε spent on smoothness.
    #[uniffi::constructor]
    pub fn cauchy_with(
        epsilon: f64,
        k: f64,
        smoothness_share: f64,
    ) -> Result<Arc<Self>, GeoprivError> {
        guard(|| {
            Self::wrap(geopriv::Mechanism::cauchy_with(
                epsilon,
                k,
                smoothness_share,
            ))
        })
    }

    /// Approximate-GP Laplace: (ε, δ)-GP with 0 < δ < 1, half of ε on
    /// smoothness.
    #[uniffi::constructor]
    pub fn laplace(epsilon: f64, delta: f64) -> Result<Arc<Self>, GeoprivError> {
        guard(|| Self::wrap(geopriv::Mechanism::laplace(epsilon, delta)))
    }

    /// Approximate-GP Laplace with `smoothness_share` (in (0, 1)) of ε on
    /// smoothness.
    #[uniffi::constructor]
    pub fn laplace_with(
        epsilon: f64,
        delta: f64,
        smoothness_share: f64,
    ) -> Result<Arc<Self>, GeoprivError> {
        guard(|| {
            Self::wrap(geopriv::Mechanism::laplace_with(
                epsilon,
                delta,
                smoothness_share,
            ))
        })
    }

    /// Baseline: Laplace noise scaled to the query's global Lipschitz
    /// constant (the worst case for every user).
    #[uniffi::constructor]
    pub fn global_laplace(epsilon: f64) -> Result<Arc<Self>, GeoprivError> {
        guard(|| Self::wrap(geopriv::Mechanism::global_laplace(epsilon)))
    }

    /// Baseline: ε-GP noise on the point itself, then f of the noisy point.
    /// Biased for nonlinear queries; for comparisons only.
    #[uniffi::constructor]
    pub fn noise_a_priori(epsilon: f64) -> Result<Arc<Self>, GeoprivError> {
        guard(|| Self::wrap(geopriv::Mechanism::noise_a_priori(epsilon)))
    }

    /// Reference: local differential privacy with a local-DP `epsilon`
    /// (every pair of inputs protected alike, e.g. 1.0), not a budget per
    /// unit distance. Keep its budget in a separate `PrivacyBudget`.
    #[uniffi::constructor]
    pub fn local_dp(epsilon: f64) -> Result<Arc<Self>, GeoprivError> {
        guard(|| Self::wrap(geopriv::Mechanism::local_dp(epsilon)))
    }

    /// A copy whose ε is stated in `unit` (per metre, per dollar…), which
    /// `privatize` charges to a ledger of the same unit. `local_dp`
    /// mechanisms are always `LOCAL_DP`; a geo-private one cannot be
    /// (`UnitMismatch`).
    pub fn with_unit(&self, unit: BudgetUnit) -> Result<Arc<GeoMechanism>, GeoprivError> {
        guard(|| {
            Ok(Arc::new(GeoMechanism {
                inner: self.inner.clone().with_unit(unit.try_into()?)?,
                seeded: self
                    .seeded
                    .as_ref()
                    .map(|rng| lock(rng, "seeded generator").map(|r| Mutex::new(r.clone())))
                    .transpose()?,
            }))
        })
    }

    /// The unit of ε, if stated (`LOCAL_DP` for `local_dp`).
    pub fn unit(&self) -> Option<BudgetUnit> {
        self.inner.unit().map(BudgetUnit::from)
    }

    /// A copy drawing its noise from a generator seeded with `seed`, so a
    /// run can be reproduced. **NOT SECURE**: anyone who knows or guesses
    /// the seed can subtract the noise. For tests and simulations only,
    /// never for real users' data. Its reports are marked `seeded`, which
    /// servers refuse unless told otherwise.
    pub fn seeded(&self, seed: u64) -> Arc<GeoMechanism> {
        Arc::new(GeoMechanism {
            inner: self.inner.clone(),
            seeded: Some(Mutex::new(StdRng::seed_from_u64(seed))),
        })
    }

    /// Whether this is a `seeded` (insecure, reproducible) copy.
    pub fn is_seeded(&self) -> bool {
        self.seeded.is_some()
    }

    /// Which mechanism this is.
    pub fn name(&self) -> MechanismName {
        self.inner.name()
    }

    /// ε, per unit distance (a local-DP ε for `local_dp`).
    pub fn epsilon(&self) -> f64 {
        self.inner.epsilon()
    }

    /// δ (0 for the pure mechanisms).
    pub fn delta(&self) -> f64 {
        self.inner.delta()
    }

    /// The share of ε spent on smoothness (γ/ε for PolyPlace); `null` for
    /// the baselines.
    pub fn smoothness_share(&self) -> Option<f64> {
        self.inner.smoothness_share()
    }

    /// The growth function of the smooth-sensitivity calibration; `null`
    /// for the baselines.
    pub fn growth(&self) -> Option<Growth> {
        self.inner.growth().map(|g| match g.kind() {
            geopriv::GrowthKind::Exponential => Growth::Exponential { rate: g.rate() },
            geopriv::GrowthKind::Linear => Growth::Linear { rate: g.rate() },
        })
    }

    /// Privatize f(x) for `query` and return the report to upload,
    /// **charged to `ledger` before it is returned** (written to its file
    /// first, for a file-backed ledger). Refused with nothing released and
    /// nothing charged: `UnitMismatch` (the ledger's unit is not this
    /// mechanism's, or `with_unit` was not called), `BudgetExceeded`,
    /// `InvalidInput` (`x` must have `query.dimension()` finite
    /// coordinates), `InvalidParameter` (a release that would not be
    /// finite); `LedgerIo` if the charge cannot be written (the report is
    /// then dropped).
    pub fn privatize(
        &self,
        ledger: Arc<PrivacyLedger>,
        query: Arc<GeoQuery>,
        x: Vec<f64>,
    ) -> Result<PrivateReport, GeoprivError> {
        guard(|| self.release(&self.inner, &query, &x, Some(&ledger)))
    }

    /// `privatize` **without any ledger**: for simulations of many devices
    /// and for servers' tests, never for a device's own uploads.
    pub fn privatize_unmetered(
        &self,
        query: Arc<GeoQuery>,
        x: Vec<f64>,
    ) -> Result<PrivateReport, GeoprivError> {
        guard(|| self.release(&self.inner, &query, &x, None))
    }

    /// Privatize f at a location (WGS84 degrees) for a 2-D query (two-way
    /// or KDE, in metres), charged to `ledger` (see `privatize`): the
    /// location is projected with `projection` (which must be the one a
    /// `*_latlon` constructor of the query used) and privatized. ε is per
    /// **projected** metre: under `WebMercator` one ground metre is
    /// 1/cos(lat) projected metres, so ε per projected metre is ε/cos(lat)
    /// per ground metre, and the charge is `PER_MERCATOR_METRE`; under
    /// `LocalEquirectangular` it is `PER_METRE` (ground metres). Bad
    /// coordinates are `InvalidInput`.
    pub fn privatize_latlon(
        &self,
        ledger: Arc<PrivacyLedger>,
        query: Arc<GeoQuery>,
        lat: f64,
        lon: f64,
        projection: Projection,
    ) -> Result<PrivateReport, GeoprivError> {
        guard(|| {
            let mechanism = self.latlon_mechanism(&projection)?;
            let x = Self::project_for(&query, lat, lon, projection)?;
            self.release(&mechanism, &query, &x, Some(&ledger))
        })
    }

    /// `privatize_latlon` **without any ledger** (simulations only).
    pub fn privatize_latlon_unmetered(
        &self,
        query: Arc<GeoQuery>,
        lat: f64,
        lon: f64,
        projection: Projection,
    ) -> Result<PrivateReport, GeoprivError> {
        guard(|| {
            let x = Self::project_for(&query, lat, lon, projection)?;
            self.release(&self.inner, &query, &x, None)
        })
    }
}

impl fmt::Display for GeoMechanism {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "GeoMechanism({}, epsilon={}, delta={}",
            self.inner.name(),
            self.inner.epsilon(),
            self.inner.delta()
        )?;
        if let Some(s) = self.inner.smoothness_share() {
            write!(f, ", smoothness_share={s}")?;
        }
        if self.seeded.is_some() {
            write!(f, ", seeded: NOT SECURE")?;
        }
        write!(f, ")")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn all_constructors(eps: f64) -> Vec<Result<Arc<GeoMechanism>, GeoprivError>> {
        vec![
            GeoMechanism::polyplace(eps),
            GeoMechanism::polyplace_with(eps, 0.2),
            GeoMechanism::student_t(eps),
            GeoMechanism::student_t_with(eps, 4.0, 0.3),
            GeoMechanism::cauchy(eps),
            GeoMechanism::cauchy_with(eps, 5.0, 0.3),
            GeoMechanism::laplace(eps, 1e-6),
            GeoMechanism::laplace_with(eps, 1e-6, 0.4),
            GeoMechanism::global_laplace(eps),
            GeoMechanism::noise_a_priori(eps),
            GeoMechanism::local_dp(eps),
        ]
    }

    #[test]
    fn bad_epsilons_are_invalid_parameter() {
        for eps in [0.0, -0.0, -1.0, f64::NAN, f64::INFINITY, f64::NEG_INFINITY] {
            for m in all_constructors(eps) {
                match m {
                    Err(GeoprivError::InvalidParameter(msg)) => {
                        assert!(msg.contains("epsilon"), "{msg}")
                    }
                    Err(e) => panic!("{eps}: wrong kind {e:?}"),
                    Ok(m) => panic!("{eps}: accepted {m}"),
                }
            }
        }
        for (what, r) in [
            ("delta 0", GeoMechanism::laplace(1.0, 0.0)),
            ("delta 1", GeoMechanism::laplace(1.0, 1.0)),
            ("delta NaN", GeoMechanism::laplace(1.0, f64::NAN)),
            ("share 0", GeoMechanism::polyplace_with(1.0, 0.0)),
            ("share 1", GeoMechanism::student_t_with(1.0, 3.0, 1.0)),
            ("dof 1", GeoMechanism::student_t_with(1.0, 1.0, 0.3)),
            ("k 2", GeoMechanism::cauchy_with(1.0, 2.0, 0.3)),
            ("k inf", GeoMechanism::cauchy_with(1.0, f64::INFINITY, 0.3)),
        ] {
            assert!(
                matches!(r, Err(GeoprivError::InvalidParameter(_))),
                "{what}: {:?}",
                r.map(|m| m.to_string())
            );
        }
    }

    #[test]
    fn every_mechanism_releases_a_report_without_its_scale() {
        let q = GeoQuery::threshold(100.0, 10.0).unwrap();
        for m in all_constructors(0.05) {
            let m = m.unwrap();
            let r = m.privatize_unmetered(q.clone(), vec![42.0]).unwrap();
            assert!(r.value.is_finite(), "{m}: {r:?}");
            assert_eq!(r.query_id, "threshold:T=100;w=10");
            assert_eq!(r.mechanism, m.name());
            assert_eq!((r.epsilon, r.delta), (m.epsilon(), m.delta()));
            let back = geopriv::Report::from_json(&r.json).unwrap();
            assert_eq!(back, geopriv::Report::from_bytes(&r.bytes).unwrap());
            assert_eq!(back.value, r.value);
            for leak in ["scale", "sensitivity", "sigma"] {
                assert!(!r.json.contains(leak), "{}", r.json);
            }
        }
    }

    #[test]
    fn seeded_copies_are_reproducible_and_labelled() {
        let q = GeoQuery::kde(vec![0.0, 0.0], 100.0).unwrap();
        let m = GeoMechanism::polyplace(0.01).unwrap();
        assert!(!m.is_seeded());
        let run = |seed| {
            let s = m.seeded(seed);
            assert!(s.is_seeded() && s.to_string().contains("NOT SECURE"));
            (0..5)
                .map(|i| {
                    s.privatize_unmetered(q.clone(), vec![i as f64, 30.0])
                        .unwrap()
                        .value
                })
                .collect::<Vec<_>>()
        };
        assert_eq!(run(7), run(7));
        assert_ne!(run(7), run(8));
    }

    #[test]
    fn bad_points_are_refused_before_any_noise() {
        let m = GeoMechanism::cauchy(0.1).unwrap();
        let q = GeoQuery::two_way(0.0, 0.0, 1.0).unwrap();
        for x in [
            vec![],
            vec![1.0],
            vec![1.0, 2.0, 3.0],
            vec![f64::NAN, 0.0],
            vec![0.0, f64::INFINITY],
        ] {
            assert!(
                matches!(
                    m.privatize_unmetered(q.clone(), x.clone()),
                    Err(GeoprivError::InvalidInput(_))
                ),
                "{x:?}"
            );
        }
    }

    #[test]
    fn latlon_release_checks_the_projection() {
        let paris = Projection::LocalEquirectangular {
            ref_lat: 48.85,
            ref_lon: 2.35,
        };
        let q = GeoQuery::kde_latlon(48.86, 2.34, 250.0, paris).unwrap();
        let m = GeoMechanism::polyplace(1e-3).unwrap();
        let r = m
            .privatize_latlon_unmetered(q.clone(), 48.861, 2.341, paris)
            .unwrap();
        assert!(r.query_id.starts_with("kde:t="), "{}", r.query_id);
        let e = m
            .privatize_latlon_unmetered(q.clone(), 48.861, 2.341, Projection::WebMercator)
            .unwrap_err();
        assert!(matches!(e, GeoprivError::InvalidParameter(_)), "{e:?}");
        for (lat, lon) in [(f64::NAN, 2.0), (48.0, f64::INFINITY), (95.0, 2.0)] {
            let e = m
                .privatize_latlon_unmetered(q.clone(), lat, lon, paris)
                .unwrap_err();
            assert!(matches!(e, GeoprivError::InvalidInput(_)), "{e:?}");
        }
        let one_d = GeoQuery::threshold(0.0, 1.0).unwrap();
        let e = m
            .privatize_latlon_unmetered(one_d, 48.0, 2.0, paris)
            .unwrap_err();
        assert!(matches!(e, GeoprivError::InvalidParameter(_)), "{e:?}");
        // A query in plain metres accepts any projection.
        let plain = GeoQuery::two_way(0.0, 0.0, 100.0).unwrap();
        m.privatize_latlon_unmetered(plain, 48.86, 2.36, paris)
            .unwrap();
    }
}
