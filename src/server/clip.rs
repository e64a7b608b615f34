//! Bounded influence of one report (docs/MATH.md §10).
//!
//! A report is f(x) + σ(x)·Z with heavy-tailed Z, so its value is
//! unbounded and one forged report can move a mean anywhere. Honest
//! reports stay within z·σ_max of f(x) except with a public tail
//! probability (σ_max = the mechanism's largest scale, L_global/η for the
//! smooth-sensitivity mechanisms). A [`ClipPolicy`] clamps every report of a
//! query to the public interval
//!
//! ```text
//! B = [f_min − z·σ_max, f_max + z·σ_max]
//! ```
//!
//! so one report moves a mean of n reports by at most width(B)/n, and the
//! mean of honest reports is biased by at most σ_max · E[(|Z| − z)+]
//! ([`tail_excess`], closed form for each noise shape). Both numbers are
//! public and are reported with every estimate.
//!
//! # Default z
//!
//! [`ClipLevel::default`] picks, per noise shape, the smallest z with
//!
//! ```text
//! E[(|Z| − z)+] <= 0.1 · sd(Z) / sqrt(10^6),
//! ```
//!
//! which keeps the clipping bias of the honest mean below 0.1 standard
//! error at n = 10^6 reports *whatever the distribution of the users'
//! scales σ(x_i) <= σ_max* (docs/MATH.md §10 for the argument). The
//! resulting z for the default calibrations (see [`default_z`]; z is in
//! units of the scale of the unit noise, s = S/γ for PolyPlace): Laplace
//! 8.86, PolyPlace (α = 9) 2.01, Student's t (ν = 3) 79.8, generalized
//! Cauchy (k = 4) 38.7 (checked by the test `default_levels_are_stated`).
//!
//! ```
//! use geopriv::server::clip::{ClipLevel, ClipPolicy};
//! use geopriv::{MechanismName, QueryDescriptor};
//!
//! let q = QueryDescriptor::Threshold { threshold: 100_000.0, width: 20_000.0 };
//! let clip = ClipPolicy::for_reports(&q, MechanismName::Laplace, 1e-4, 1e-6, ClipLevel::default())?;
//! let [lo, hi] = clip.bounds();
//! assert!(lo < 0.0 && hi > 1.0);
//! assert_eq!(clip.clip(1e300), hi);
//! assert!(clip.bias_to_se_bound(1_000_000).unwrap() <= 0.1);
//! # Ok::<(), geopriv::Error>(())
//! ```

use crate::error::{Error, Result};
use crate::mechanism::{Mechanism, NoiseShape};
use crate::noise::special::beta_reg;
use crate::noise::{GeneralizedCauchy, StudentT};
use crate::query::Query;
use crate::report::{MechanismName, QueryDescriptor};
use core::f64::consts::PI;
use serde::{Deserialize, Serialize};

/// The deployment size the default clipping level is tuned for: 10^6
/// reports per query.
pub const DEFAULT_DEPLOYMENT_N: u64 = 1_000_000;
/// The default largest ratio of the honest clipping bias to the standard
/// error at [`DEFAULT_DEPLOYMENT_N`]: 0.1.
pub const DEFAULT_BIAS_TO_SE: f64 = 0.1;

/// How far out to clip, in units of σ_max.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum ClipLevel {
    /// The smallest z whose honest bias is at most `bias_to_se` standard
    /// errors at `deployment_n` reports ([`default_z`]).
    Auto {
        /// n the bound is tuned for.
        deployment_n: u64,
        /// Largest bias / standard error at that n.
        bias_to_se: f64,
    },
    /// A fixed z >= 0 (finite).
    Fixed(f64),
}

impl Default for ClipLevel {
    /// `Auto { deployment_n: 10^6, bias_to_se: 0.1 }`.
    fn default() -> Self {
        ClipLevel::Auto {
            deployment_n: DEFAULT_DEPLOYMENT_N,
            bias_to_se: DEFAULT_BIAS_TO_SE,
        }
    }
}

/// E[(|Z| − z)+] for the unit noise Z of `shape` and a level z >= 0, in
/// closed form:
///
/// * Laplace(1): e^{−z} (|Z| is Exp(1), memoryless).
/// * Student's t, ν > 1: 2[(ν + z²)/(ν − 1) · p(z) − z · P(T > z)], from
///   d/dt[(ν + t²) p(t)] = (1 − ν) t p(t).
/// * Generalized Cauchy, k > 2: with |Z| = (B/(1 − B))^{1/k},
///   B ~ Beta(1/k, 1 − 1/k):
///   E[|Z|; |Z| > z] = sin(π/k)/sin(2π/k) · (1 − I_u(2/k, 1 − 2/k)),
///   u = z^k/(1 + z^k), minus z · P(|Z| > z).
/// * PolyPlace(1, α), α > 1: ∫_z^∞ P(|Z| > t) dt with the closed-form tail
///   P(|Z| > t) = 2C(1 + t)^{−α}/α for t >= 1/α,
///   C = N(α + 1)(1 − 1/α²)^α, N = α/(2(α − 1 + 2((α − 1)/α)^α)); beyond
///   1/α the integral is 2C(1 + z)^{1−α}/(α(α − 1)), and the core piece
///   below 1/α is a polynomial integral.
pub fn tail_excess(shape: NoiseShape, z: f64) -> Result<f64> {
    if !(z.is_finite() && z >= 0.0) {
        return Err(Error::InvalidParameter {
            name: "z",
            value: z,
            requirement: "finite and >= 0",
        });
    }
    let v = match shape {
        NoiseShape::Laplace => libm::exp(-z),
        NoiseShape::StudentT { dof } => {
            if dof.is_nan() || dof <= 1.0 {
                return Err(no_mean("dof", dof));
            }
            let t = StudentT::new(dof, 1.0)?;
            let upper = t.cdf(-z);
            2.0 * ((dof + z * z) / (dof - 1.0) * t.pdf(z) - z * upper)
        }
        NoiseShape::GeneralizedCauchy { k } => {
            if k.is_nan() || k <= 2.0 {
                return Err(no_mean("k", k));
            }
            let c = GeneralizedCauchy::new(k, 1.0)?;
            let beyond = 2.0 * c.cdf(-z);
            let (u, one_minus_u) = if z <= 1.0 {
                let t = libm::pow(z, k);
                (t / (1.0 + t), 1.0 / (1.0 + t))
            } else {
                let t = libm::pow(z, -k);
                (1.0 / (1.0 + t), t / (1.0 + t))
            };
            let (_, upper) = beta_reg(2.0 / k, 1.0 - 2.0 / k, u, one_minus_u);
            let first_moment = libm::sin(PI / k) / libm::sin(2.0 * PI / k);
            first_moment * upper - z * beyond
        }
        NoiseShape::PolyPlace { alpha } => {
            if !(alpha > 1.0 && alpha.is_finite()) {
                return Err(no_mean("alpha", alpha));
            }
            let a = alpha;
            let n = a / (2.0 * (a - 1.0 + 2.0 * libm::pow((a - 1.0) / a, a)));
            let c = n * (a + 1.0) * libm::pow(1.0 - 1.0 / (a * a), a);
            let tail_from = |t: f64| 2.0 * c * libm::pow(1.0 + t, 1.0 - a) / (a * (a - 1.0));
            let junction = 1.0 / a;
            if z >= junction {
                tail_from(z)
            } else {
                // P(|Z| > t) = 1 − K(1 − (1 − t)^α) on [0, 1/α), K = 2N(α−1)/α.
                let k = 2.0 * n * (a - 1.0) / a;
                let core = (junction - z) * (1.0 - k)
                    + k * (libm::pow(1.0 - z, a + 1.0) - libm::pow(1.0 - junction, a + 1.0))
                        / (a + 1.0);
                core + tail_from(junction)
            }
        }
    };
    // Rounding can leave a tiny negative number where the excess underflows.
    Ok(v.max(0.0))
}

fn no_mean(name: &'static str, value: f64) -> Error {
    Error::InvalidParameter {
        name,
        value,
        requirement: "a noise with a finite mean (t: dof > 1, Cauchy: k > 2, PolyPlace: alpha > 1)",
    }
}

/// The standard deviation of the unit noise (None if infinite).
fn unit_sd(shape: NoiseShape) -> Result<Option<f64>> {
    let unit = crate::mechanism::OutputDensity::new(0.0, 1.0, shape)?;
    Ok(unit.variance().map(libm::sqrt))
}

/// The default level: the smallest z >= 0 with
/// E[(|Z| − z)+] <= `bias_to_se` · sd(Z)/sqrt(`deployment_n`), found by
/// Brent's method on a bracket where the (decreasing) excess changes sign.
/// Refused for noise with infinite variance (give z explicitly then).
pub fn default_z(shape: NoiseShape, deployment_n: u64, bias_to_se: f64) -> Result<f64> {
    if deployment_n == 0 {
        return Err(Error::InvalidParameter {
            name: "deployment_n",
            value: 0.0,
            requirement: ">= 1",
        });
    }
    crate::error::positive_finite("bias_to_se", bias_to_se)?;
    let sd = unit_sd(shape)?.ok_or(Error::InvalidParameter {
        name: "z",
        value: f64::NAN,
        requirement: "given explicitly: the noise has infinite variance, so no standard error bounds the bias",
    })?;
    let target = bias_to_se * sd / libm::sqrt(deployment_n as f64);
    let excess = |z: f64| tail_excess(shape, z).map(|e| e - target);
    if excess(0.0)? <= 0.0 {
        return Ok(0.0);
    }
    let mut hi = 1.0;
    while excess(hi)? > 0.0 {
        hi *= 2.0;
        if hi > 1e15 {
            return Err(Error::Numerical {
                routine: "clip level: no z reaches the bias target",
            });
        }
    }
    let z = crate::roots::brent("clip level", |z| excess(z).unwrap_or(f64::NAN), 0.0, hi)?;
    // Brent stops within a tolerance of the root: step up until the
    // target holds exactly (a few ulps at most).
    let mut z = z;
    while excess(z)? > 0.0 {
        z = z * (1.0 + 1e-12) + 1e-300;
    }
    Ok(z)
}

/// The first mechanism name (local DP aside, which is not clipped by a
/// noise level) whose noise no clipping level reaches at this target:
/// [`default_z`] of its noise shape fails numerically, so a server with
/// `ClipLevel::Auto { deployment_n, bias_to_se }` would refuse every
/// report of that mechanism's groups (`unclippable`). Servers refuse such
/// a target up front (issue 19 item 14): the CLI's `--clip-n` /
/// `--clip-bias-se` and the bindings' `ServerConfig.with_clip_target`.
/// Noise of infinite variance (Cauchy) has no default level at any target
/// and is not reported here (its groups need a fixed z). `None`: every
/// other mechanism has a level.
pub fn unreachable_clip_target(
    deployment_n: u64,
    bias_to_se: f64,
) -> Option<(MechanismName, Error)> {
    for name in MechanismName::ALL {
        if name == MechanismName::Ldp {
            continue;
        }
        let delta = if name.is_pure() { 0.0 } else { 1e-6 };
        let Ok(m) = default_mechanism(name, 1e-3, delta) else {
            continue;
        };
        if let Some(shape) = m.noise_shape() {
            if let Err(e @ Error::Numerical { .. }) = default_z(shape, deployment_n, bias_to_se) {
                return Some((name, e));
            }
        }
    }
    None
}

/// The mechanism a report names, with the crate's default calibration of
/// that name (the wire format carries only the name, ε and δ; a server
/// whose devices use other parameters builds its policy with
/// [`ClipPolicy::for_mechanism`]).
pub fn default_mechanism(name: MechanismName, epsilon: f64, delta: f64) -> Result<Mechanism> {
    match name {
        MechanismName::Polyplace => Mechanism::polyplace(epsilon),
        MechanismName::StudentT => Mechanism::student_t(epsilon),
        MechanismName::Cauchy => Mechanism::cauchy(epsilon),
        MechanismName::Laplace => Mechanism::laplace(epsilon, delta),
        MechanismName::GlobalLaplace => Mechanism::global_laplace(epsilon),
        MechanismName::APriori => Mechanism::noise_a_priori(epsilon),
        MechanismName::Ldp => Mechanism::local_dp(epsilon),
    }
}

/// The public clipping interval of one (query, mechanism, ε, δ) and the
/// two numbers that come with it: the honest bias bound and the
/// influence of one report (module docs).
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct ClipPolicy {
    lower: f64,
    upper: f64,
    z: f64,
    sigma_max: f64,
    tail_excess: f64,
    unit_sd: Option<f64>,
}

impl ClipPolicy {
    /// The policy for reports naming `mechanism` with `epsilon`, `delta`
    /// on `query`, assuming the default calibration of that name
    /// ([`default_mechanism`]).
    pub fn for_reports(
        query: &QueryDescriptor,
        mechanism: MechanismName,
        epsilon: f64,
        delta: f64,
        level: ClipLevel,
    ) -> Result<Self> {
        let m = default_mechanism(mechanism, epsilon, delta)?;
        let q = query.bounds_query()?;
        Self::for_mechanism(&m, &q, level)
    }

    /// The policy for releases of `mechanism` on `query`: σ_max is the
    /// scale at the largest sensitivity the mechanism can use (L_global for
    /// the smooth and global mechanisms, the range of f for LDP). Noise a
    /// priori releases f of a noisy point, so its reports already lie in
    /// [f_min, f_max]: σ_max = 0 and the bias is 0.
    pub fn for_mechanism<Q: Query + ?Sized>(
        mechanism: &Mechanism,
        query: &Q,
        level: ClipLevel,
    ) -> Result<Self> {
        let (f_min, f_max) = query.value_bounds();
        let Some(shape) = mechanism.noise_shape() else {
            return Self::new(f_min, f_max, 0.0, None, level);
        };
        let sensitivity = if mechanism.name() == MechanismName::Ldp {
            f_max - f_min
        } else {
            query.global_lipschitz()
        };
        let sigma_max = mechanism.scale_for(sensitivity).unwrap_or(0.0);
        Self::new(f_min, f_max, sigma_max, Some(shape), level)
    }

    /// The policy from its ingredients: f takes values in
    /// [`f_min`, `f_max`], honest reports are f + σ Z with σ <= `sigma_max`
    /// and Z of `shape` (None: no noise on the value, σ_max must be 0).
    pub fn new(
        f_min: f64,
        f_max: f64,
        sigma_max: f64,
        shape: Option<NoiseShape>,
        level: ClipLevel,
    ) -> Result<Self> {
        crate::error::finite("f_min", f_min)?;
        crate::error::finite("f_max", f_max)?;
        if f_max < f_min {
            return Err(Error::InvalidParameter {
                name: "f_max",
                value: f_max,
                requirement: ">= f_min",
            });
        }
        if !(sigma_max.is_finite() && sigma_max >= 0.0) {
            return Err(Error::InvalidParameter {
                name: "sigma_max",
                value: sigma_max,
                requirement: "finite and >= 0",
            });
        }
        let Some(shape) = shape else {
            if sigma_max != 0.0 {
                return Err(Error::InvalidParameter {
                    name: "sigma_max",
                    value: sigma_max,
                    requirement: "0 when no noise shape is given",
                });
            }
            return Ok(Self {
                lower: f_min,
                upper: f_max,
                z: 0.0,
                sigma_max: 0.0,
                tail_excess: 0.0,
                unit_sd: None,
            });
        };
        let z = match level {
            ClipLevel::Fixed(z) => z,
            ClipLevel::Auto {
                deployment_n,
                bias_to_se,
            } => default_z(shape, deployment_n, bias_to_se)?,
        };
        let excess = tail_excess(shape, z)?;
        let reach = z * sigma_max;
        let (lower, upper) = (f_min - reach, f_max + reach);
        if !(lower.is_finite() && upper.is_finite()) {
            return Err(Error::InvalidParameter {
                name: "z",
                value: z,
                requirement: "small enough that f ± z·sigma_max is finite",
            });
        }
        Ok(Self {
            lower,
            upper,
            z,
            sigma_max,
            tail_excess: excess,
            unit_sd: unit_sd(shape)?,
        })
    }

    /// Clamp a report value into B (NaN, which validation refuses, maps to
    /// the lower end).
    #[inline]
    pub fn clip(&self, value: f64) -> f64 {
        if value >= self.upper {
            self.upper
        } else if value >= self.lower {
            value
        } else {
            self.lower
        }
    }

    /// B = [lower, upper].
    pub fn bounds(&self) -> [f64; 2] {
        [self.lower, self.upper]
    }

    /// width(B) = f_max − f_min + 2 z σ_max: the most one report can move a
    /// sum.
    pub fn width(&self) -> f64 {
        self.upper - self.lower
    }

    /// The level z (in units of σ_max).
    pub fn z(&self) -> f64 {
        self.z
    }

    /// σ_max, the largest honest noise scale.
    pub fn sigma_max(&self) -> f64 {
        self.sigma_max
    }

    /// σ_max · E[(|Z| − z)+]: the largest bias clipping can cause in the
    /// mean of honest reports.
    pub fn bias_bound(&self) -> f64 {
        self.sigma_max * self.tail_excess
    }

    /// width(B)/n: the most one report can move a mean of n reports
    /// (None for n = 0).
    pub fn influence_bound(&self, n: u64) -> Option<f64> {
        (n > 0).then(|| self.width() / n as f64)
    }

    /// sqrt(n) · E[(|Z| − z)+]/sd(Z): a bound on (honest clipping bias) /
    /// (standard error) at n reports that holds whatever the users' scales
    /// (docs/MATH.md §10). 0 without noise; None if sd(Z) is infinite.
    pub fn bias_to_se_bound(&self, n: u64) -> Option<f64> {
        if self.sigma_max == 0.0 {
            return Some(0.0);
        }
        self.unit_sd
            .map(|sd| libm::sqrt(n as f64) * self.tail_excess / sd)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn shapes() -> [NoiseShape; 5] {
        [
            NoiseShape::Laplace,
            NoiseShape::StudentT { dof: 3.0 },
            NoiseShape::GeneralizedCauchy { k: 4.0 },
            NoiseShape::PolyPlace { alpha: 9.0 },
            NoiseShape::PolyPlace { alpha: 2.5 },
        ]
    }

    /// ∫_z^∞ 2 P(Z > t) dt by quadrature of the noise's own CDF.
    fn numeric_excess(shape: NoiseShape, z: f64) -> f64 {
        let n = 200_000;
        let (lo, hi) = (libm::log(z + 1.0), libm::log(z + 1.0 + 1e6));
        let h = (hi - lo) / n as f64;
        let mut total = 0.0;
        for i in 0..n {
            // t = e^s − 1, dt = e^s ds; 2 P(Z > t) = 2 ∫_t^∞ p = E via parts.
            let s = lo + (i as f64 + 0.5) * h;
            let t = libm::exp(s) - 1.0;
            total += 2.0 * tail_prob(shape, t) * libm::exp(s) * h;
        }
        total
    }

    fn tail_prob(shape: NoiseShape, t: f64) -> f64 {
        match shape {
            NoiseShape::Laplace => 0.5 * libm::exp(-t),
            NoiseShape::StudentT { dof } => StudentT::new(dof, 1.0).unwrap().cdf(-t),
            NoiseShape::GeneralizedCauchy { k } => GeneralizedCauchy::new(k, 1.0).unwrap().cdf(-t),
            NoiseShape::PolyPlace { alpha } => {
                crate::noise::PolyPlace::new(1.0, alpha).unwrap().cdf(-t)
            }
        }
    }

    #[test]
    fn closed_forms_match_quadrature_of_the_cdf() {
        for shape in shapes() {
            for z in [0.0, 0.05, 0.3, 1.0, 4.0, 20.0] {
                let exact = tail_excess(shape, z).unwrap();
                let numeric = numeric_excess(shape, z);
                // The quadrature truncates at 1e6: heavy tails lose at most
                // ∫_{1e6}^∞ 2P(Z>t) dt, below 1e-6 relative here.
                assert!(
                    (exact - numeric).abs() <= 1e-5 * exact + 1e-12,
                    "{shape:?} z={z}: {exact} vs {numeric}"
                );
            }
        }
    }

    #[test]
    fn default_levels_are_stated() {
        // The values quoted in the module docs (and BENCHMARKS/MATH §10).
        let expect = [
            (NoiseShape::Laplace, 8.86),
            (NoiseShape::PolyPlace { alpha: 9.0 }, 2.01),
            (NoiseShape::StudentT { dof: 3.0 }, 79.78),
            (NoiseShape::GeneralizedCauchy { k: 4.0 }, 38.74),
        ];
        let zs: alloc::vec::Vec<f64> = expect
            .iter()
            .map(|(shape, _)| default_z(*shape, DEFAULT_DEPLOYMENT_N, DEFAULT_BIAS_TO_SE).unwrap())
            .collect();
        std::println!("{zs:?}");
        for ((shape, z_doc), z) in expect.into_iter().zip(zs) {
            assert!((z - z_doc).abs() < 0.05, "{shape:?}: z = {z}");
            let sd = unit_sd(shape).unwrap().unwrap();
            let ratio = 1000.0 * tail_excess(shape, z).unwrap() / sd;
            assert!(ratio <= 0.1 && ratio > 0.0999, "{shape:?}: {ratio}");
        }
    }

    #[test]
    fn policy_bounds_influence_and_bias() {
        let q = QueryDescriptor::Threshold {
            threshold: 100.0,
            width: 20.0,
        };
        for name in MechanismName::ALL {
            let delta = if name.is_pure() { 0.0 } else { 1e-6 };
            let p = ClipPolicy::for_reports(&q, name, 0.05, delta, ClipLevel::default()).unwrap();
            let [lo, hi] = p.bounds();
            assert!(lo <= 0.0 && hi >= 1.0);
            assert_eq!(p.clip(f64::MAX), hi);
            assert_eq!(p.clip(-f64::MAX), lo);
            assert_eq!(p.clip(0.5), 0.5);
            assert!((p.influence_bound(1000).unwrap() - p.width() / 1000.0).abs() < 1e-15);
            assert!(p.bias_to_se_bound(DEFAULT_DEPLOYMENT_N).unwrap() <= 0.1);
            if name == MechanismName::APriori {
                assert_eq!((lo, hi, p.bias_bound()), (0.0, 1.0, 0.0));
            } else {
                assert!(p.bias_bound() > 0.0 && p.sigma_max() > 0.0);
            }
        }
        assert!(ClipPolicy::new(
            0.0,
            1.0,
            1.0,
            Some(NoiseShape::Laplace),
            ClipLevel::Fixed(-1.0)
        )
        .is_err());
        assert!(ClipPolicy::new(
            0.0,
            1.0,
            1e300,
            Some(NoiseShape::Laplace),
            ClipLevel::Fixed(1e10)
        )
        .is_err());
        assert!(default_z(NoiseShape::StudentT { dof: 1.5 }, 10, 0.1).is_err());
    }
}
