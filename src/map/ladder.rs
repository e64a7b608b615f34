//! Debiased ladders of soft thresholds and intervals from noise a priori
//! in one dimension (docs/MATH.md §9.2, "Ladders").
//!
//! A device sends x̃ = x + N, N ~ Laplace(1/ε), whose transform is
//! φ_N(ω) = 1/(1 + ω²/ε²). A soft threshold or interval f is piecewise
//! linear: f(x) = Σ_i s_i (x - k_i)_+ with kinks k_i and slope changes
//! s_i (a threshold T of width θ: +1/θ at T - θ/2, -1/θ at T + θ/2; an
//! interval adds the mirrored pair at its upper end). Its deconvolution
//! f - f''/ε² has Dirac masses at the kinks, so it is first smoothed by a
//! Gaussian of public bandwidth h:
//!
//!   f_h(x) = Σ_i s_i ψ(x - k_i),  ψ(u) = u Φ(u/h) + h φ(u/h),
//!
//! (ψ = (·)_+ convolved with the N(0, h²) density), and the released
//! estimator is g = (1 - D²/ε²) f_h, in closed form
//!
//!   g(x̃) = Σ_i s_i [ψ(x̃ - k_i) - φ(( x̃ - k_i)/h) / (h ε²)].
//!
//! Then E g(x + N) = f_h(x) exactly for every x (the multiplier
//! 1 + ω²/ε² cancels φ_N), so the average of g(x̃_i) over devices is
//! unbiased for the smoothed ladder, and its bias for the ladder itself is
//! |f_h - f| <= Σ_i |s_i| h φ(0) (ψ(u) - u_+ = hφ(u/h) - |u|Φ(-|u|/h) lies
//! in [0, hφ(0)]). A bandwidth h_n -> 0 as n grows makes the bias vanish;
//! the variance is at most E g² <= (sup |g|)², sup |g| <= sup|f_h| +
//! Σ|s_i| φ(0)/(h ε²). [`LadderDebias::for_n`] takes
//! h = θ_min · min(1/4, n^{-1/4}), which balances bias² ~ h² against
//! variance ~ 1/(n h² ε⁴) up to constants.

use super::query_set::RampQuery;
use crate::error::{positive_finite, Result};
use alloc::vec;
use alloc::vec::Vec;

const INV_SQRT_2PI: f64 = 0.398_942_280_401_432_7;

/// Standard normal density.
fn phi(z: f64) -> f64 {
    INV_SQRT_2PI * libm::exp(-0.5 * z * z)
}

/// Standard normal distribution function (via erfc: accurate in the tails).
fn big_phi(z: f64) -> f64 {
    0.5 * libm::erfc(-z * core::f64::consts::FRAC_1_SQRT_2)
}

/// Kinks (k_i, s_i) of a soft threshold or interval: f = Σ s_i (x - k_i)_+.
fn kinks(q: &RampQuery) -> Vec<(f64, f64)> {
    match q {
        RampQuery::Threshold(t) => {
            let (c, w) = (t.threshold(), t.width());
            vec![(c - 0.5 * w, 1.0 / w), (c + 0.5 * w, -1.0 / w)]
        }
        RampQuery::Interval(i) => {
            let w = i.width();
            vec![
                (i.lower() - 0.5 * w, 1.0 / w),
                (i.lower() + 0.5 * w, -1.0 / w),
                (i.upper() - 0.5 * w, -1.0 / w),
                (i.upper() + 0.5 * w, 1.0 / w),
            ]
        }
    }
}

/// The debiased estimator g of a ladder's queries for noise a priori at
/// per-device ε with smoothing bandwidth h (module docs).
///
/// ```
/// use geopriv::map::{LadderDebias, RampQuery};
/// use geopriv::query::SoftThreshold;
/// let q = RampQuery::Threshold(SoftThreshold::new(50_000.0, 10_000.0)?);
/// let d = LadderDebias::new(1e-4, 1_000.0)?; // ε per dollar, h in dollars
/// // E g(x + N) = f_h(x): average g over the noisy incomes.
/// let g = d.value(&q, 47_000.0)?;
/// assert!(g.abs() <= d.sup_bound(&q));
/// assert!((d.smoothed(&q, 80_000.0)? - 1.0).abs() < 1e-12);
/// # Ok::<(), geopriv::Error>(())
/// ```
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct LadderDebias {
    epsilon: f64,
    h: f64,
}

impl LadderDebias {
    /// At per-device ε (per unit of x) with smoothing bandwidth `h` > 0.
    pub fn new(epsilon: f64, h: f64) -> Result<Self> {
        Ok(Self {
            epsilon: positive_finite("epsilon", epsilon)?,
            h: positive_finite("smoothing", h)?,
        })
    }

    /// The bandwidth for n devices: h = θ_min · min(1/4, n^{-1/4}), θ_min
    /// the narrowest ramp of `queries` (public parameters only).
    pub fn for_n(queries: &[RampQuery], epsilon: f64, n: u64) -> Result<Self> {
        let theta = queries
            .iter()
            .map(|q| match q {
                RampQuery::Threshold(t) => t.width(),
                RampQuery::Interval(i) => i.width(),
            })
            .fold(f64::INFINITY, f64::min);
        let nf = positive_finite("n", n as f64)?;
        Self::new(epsilon, theta * libm::pow(nf, -0.25).min(0.25))
    }

    /// The smoothing bandwidth h.
    pub fn smoothing(&self) -> f64 {
        self.h
    }

    /// g(x̃) = Σ_i s_i [ψ(x̃ - k_i) - φ((x̃ - k_i)/h)/(h ε²)]: the per-device
    /// term whose mean is f_h(x).
    pub fn value(&self, q: &RampQuery, noisy: f64) -> Result<f64> {
        let x = crate::error::finite("noisy location", noisy)?;
        let c = 1.0 / (self.h * self.epsilon * self.epsilon);
        Ok(kinks(q)
            .iter()
            .map(|&(k, s)| s * (self.psi(x - k) - c * phi((x - k) / self.h)))
            .sum())
    }

    /// f_h(x) = E g(x + N): the ladder query smoothed by N(0, h²).
    pub fn smoothed(&self, q: &RampQuery, x: f64) -> Result<f64> {
        let x = crate::error::finite("location", x)?;
        Ok(kinks(q).iter().map(|&(k, s)| s * self.psi(x - k)).sum())
    }

    /// ψ(u) = u Φ(u/h) + h φ(u/h) (the positive part smoothed by N(0, h²)).
    fn psi(&self, u: f64) -> f64 {
        let z = u / self.h;
        u * big_phi(z) + self.h * phi(z)
    }

    /// sup_x |f_h(x) - f(x)| <= Σ_i |s_i| h φ(0): the bias of the debiased
    /// estimate for the ladder query itself.
    pub fn bias_bound(&self, q: &RampQuery) -> f64 {
        kinks(q).iter().map(|&(_, s)| s.abs()).sum::<f64>() * self.h * INV_SQRT_2PI
    }

    /// sup |g| <= 1 + bias bound + Σ|s_i| φ(0)/(h ε²) (f ∈ [0, 1]).
    pub fn sup_bound(&self, q: &RampQuery) -> f64 {
        let s: f64 = kinks(q).iter().map(|&(_, s)| s.abs()).sum();
        1.0 + self.bias_bound(q) + s * INV_SQRT_2PI / (self.h * self.epsilon * self.epsilon)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::map::kernel::simpson;
    use crate::query::{SoftInterval, SoftThreshold};

    fn queries() -> [RampQuery; 2] {
        [
            RampQuery::Threshold(SoftThreshold::new(10.0, 4.0).unwrap()),
            RampQuery::Interval(SoftInterval::new(-5.0, 8.0, 3.0).unwrap()),
        ]
    }

    #[test]
    fn kinks_reproduce_the_queries() {
        for q in queries() {
            for i in -200..200 {
                let x = i as f64 * 0.1;
                let f: f64 = kinks(&q).iter().map(|&(k, s)| s * (x - k).max(0.0)).sum();
                assert!((f - q.value(x).unwrap()).abs() < 1e-12, "{x}");
            }
        }
    }

    #[test]
    fn expectation_is_the_smoothed_query_exactly() {
        // E g(x + N) = f_h(x) for N ~ Laplace(1/ε), by quadrature.
        let eps = 0.7;
        let d = LadderDebias::new(eps, 0.5).unwrap();
        for q in queries() {
            for x in [-7.0, -3.0, 0.0, 8.5, 10.0, 11.9, 25.0] {
                let split = |a: f64, b: f64| {
                    simpson(
                        |z| d.value(&q, x + z).unwrap() * 0.5 * eps * (-eps * z.abs()).exp(),
                        a,
                        b,
                        200_000,
                    )
                };
                // The Laplace density has a kink at 0: integrate each side.
                let m = split(-80.0, 0.0) + split(0.0, 80.0);
                let fh = d.smoothed(&q, x).unwrap();
                assert!((m - fh).abs() < 1e-8, "{x}: {m} vs {fh}");
                assert!((fh - q.value(x).unwrap()).abs() <= d.bias_bound(&q) + 1e-15);
            }
        }
    }

    #[test]
    fn sup_bound_holds() {
        let d = LadderDebias::new(0.3, 0.2).unwrap();
        for q in queries() {
            for i in -400..400 {
                let v = d.value(&q, i as f64 * 0.05).unwrap().abs();
                assert!(v <= d.sup_bound(&q), "{i}");
            }
        }
    }
}
