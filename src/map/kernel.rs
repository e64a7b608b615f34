//! Kernels of the noise-a-priori map estimators (docs/MATH.md §9.2).
//!
//! A device releases x̃ = x + N once, N with density ∝ exp(-ε|z|) in d
//! dimensions, whose characteristic function is
//! φ_N(ω) = (1 + |ω|²/ε²)^{-(d+1)/2}. For the Gaussian kernel
//! K_h(z) = exp(-|z|²/(2h²)) and λ ∈ [0, 1] the server applies K_λ with
//!
//! ```text
//! F[K_λ](ω) = F[K_h](ω) · φ_N(ω)^{-λ} = (2π)^{d/2} h^d e^{-h²|ω|²/2} (1 + |ω|²/ε²)^{λ(d+1)/2}.
//! ```
//!
//! λ = 0 is the plain estimator K_h(t - x̃) (biased: its mean is
//! (K_h * p_N)(t - x)); λ = 1 is the deconvolution kernel K̃ with
//! E[K̃(t - x̃)] = K_h(t - x) for every x (unbiased); in between, partial
//! debiasing trades bias for variance.

use crate::error::{positive_finite, Error, Result};
use crate::math::{exp, ln, pow, sqrt};
use alloc::vec;
use alloc::vec::Vec;
use core::f64::consts::PI;

/// Points of the composite Simpson rule used for radial integrals.
const QUAD_PANELS: usize = 20_000;

/// The kernel K_λ of the λ-debiased noise-a-priori estimator, in d = 1, 2
/// or 3 dimensions (see the module docs for its Fourier transform).
///
/// ```
/// use geopriv::map::DebiasKernel;
/// // 1-D, λ = 1: K̃ = K_h - K_h''/ε² in closed form.
/// let k = DebiasKernel::new(1, 2.0, 0.5, 1.0)?;
/// let z: f64 = 1.0;
/// let v = (-z * z / 8.0).exp() * (1.0 + (1.0 - z * z / 4.0) / (0.5f64 * 2.0).powi(2));
/// assert!((k.value(z)? - v).abs() < 1e-12);
/// # Ok::<(), geopriv::Error>(())
/// ```
#[derive(Clone, Debug, PartialEq)]
pub struct DebiasKernel {
    dim: usize,
    bandwidth: f64,
    epsilon: f64,
    lambda: f64,
    /// Coefficients (in v = r²/h²) of the polynomial Q with
    /// (1 - Δ/ε²)^p K_h = Q(v) e^{-v/2}, p = ceil(λ(d+1)/2).
    poly: Vec<f64>,
    /// s = p - λ(d+1)/2 in [0, 1): the Bessel-potential part.
    s: f64,
    /// (2π)^{d/2} h^d, the factor of F (computed once).
    norm: f64,
}

impl DebiasKernel {
    /// K_λ for dimension `dim` (1..=3), bandwidth h > 0, noise rate ε > 0
    /// (per unit distance) and λ ∈ [0, 1].
    pub fn new(dim: usize, bandwidth: f64, epsilon: f64, lambda: f64) -> Result<Self> {
        if !(1..=3).contains(&dim) {
            return Err(Error::InvalidParameter {
                name: "dimension",
                value: dim as f64,
                requirement: "1, 2 or 3",
            });
        }
        let bandwidth = positive_finite("bandwidth", bandwidth)?;
        let epsilon = positive_finite("epsilon", epsilon)?;
        // εh >= 1e-75, so that the polynomial's c^p = (εh)^{-2p} (p <= 2)
        // and what is built on it stay finite with room: below, kernel maps
        // came out NaN everywhere (JSON null) with exit status 0, λ = 1
        // from εh ≈ 1e-102, every λ from εh ≈ 3e-154 (attack15 F4,
        // docs/ATTACK-15.md). Such an ε hides a location within 10^70 m.
        if epsilon * bandwidth < 1e-75 {
            return Err(Error::InvalidParameter {
                name: "epsilon",
                value: epsilon,
                requirement:
                    "epsilon x bandwidth at least 1e-75 (the kernel's (epsilon h)^-4 finite)",
            });
        }
        if !(0.0..=1.0).contains(&lambda) {
            return Err(Error::InvalidParameter {
                name: "lambda",
                value: lambda,
                requirement: "in [0, 1]",
            });
        }
        let a = lambda * (dim as f64 + 1.0) / 2.0;
        // Snap a to an integer when within rounding (λ = 2/3 in 2-D).
        let p = if (a - libm::round(a)).abs() < 1e-12 {
            libm::round(a)
        } else {
            libm::ceil(a)
        };
        let s = (p - a).max(0.0);
        let c = 1.0 / libm::pow(epsilon * bandwidth, (2) as f64);
        let mut poly = vec![1.0];
        for _ in 0..p as usize {
            poly = apply_one_minus_laplacian(&poly, c, dim);
        }
        Ok(Self {
            dim,
            bandwidth,
            epsilon,
            lambda,
            poly,
            s,
            norm: pow(2.0 * PI, dim as f64 / 2.0) * libm::pow(bandwidth, dim as f64),
        })
    }

    /// λ.
    pub fn lambda(&self) -> f64 {
        self.lambda
    }
    /// Bandwidth h.
    pub fn bandwidth(&self) -> f64 {
        self.bandwidth
    }
    /// Noise rate ε.
    pub fn epsilon(&self) -> f64 {
        self.epsilon
    }
    /// Dimension d.
    pub fn dim(&self) -> usize {
        self.dim
    }
    /// The exponent a = λ(d+1)/2 of (1 + |ω|²/ε²).
    fn exponent(&self) -> f64 {
        self.lambda * (self.dim as f64 + 1.0) / 2.0
    }

    /// F\[K_λ\](ω) at |ω| = w.
    pub fn fourier(&self, w: f64) -> f64 {
        let h = self.bandwidth;
        let w2 = w * w;
        let gauss = -0.5 * h * h * w2;
        if gauss < -1500.0 {
            // F <= e^{-1500}·(1 + w²/ε²)^{3/2}: below the smallest double
            // unless ε < 1e-300·w; the same 0 that exp gives.
            let growth = self.exponent() * crate::math::log1p(w2 / (self.epsilon * self.epsilon));
            if gauss + growth < -1500.0 {
                return 0.0;
            }
        }
        self.norm
            * exp(gauss + self.exponent() * crate::math::log1p(w2 / (self.epsilon * self.epsilon)))
    }

    /// (2π)^{-d} ∫_{R^d} |ω|^k F[K_λ](ω)^q dω by Simpson's rule in the
    /// radial variable (the integrand is smooth and decays like a Gaussian;
    /// the truncation and rule errors are below 1e-12 relative).
    fn radial_moment(&self, k: i32, q: i32) -> f64 {
        let h = self.bandwidth;
        let a = self.exponent() * q as f64;
        // Upper limit: e^{-q u²/2} (1 + u²/(εh)²)^a u^(k+d-1) < e^{-60}·(its peak).
        let eh = self.epsilon * h;
        let mut u_max: f64 = 12.0;
        for _ in 0..50 {
            let log_growth = a * ln(1.0 + u_max * u_max / (eh * eh))
                + (k + self.dim as i32) as f64 * ln(u_max + 1.0);
            let next = sqrt(2.0 * (60.0 + log_growth) / q as f64);
            if (next - u_max).abs() < 1e-6 {
                break;
            }
            u_max = next.max(12.0 / sqrt(q as f64));
        }
        let w_max = u_max / h;
        let surface = match self.dim {
            1 => 2.0,
            2 => 2.0 * PI,
            _ => 4.0 * PI,
        };
        let f = |w: f64| {
            libm::pow(w, (k + self.dim as i32 - 1) as f64) * libm::pow(self.fourier(w), q as f64)
        };
        simpson(f, 0.0, w_max, QUAD_PANELS) * surface
            / libm::pow(2.0 * PI, (self.dim as i32) as f64)
    }

    /// An upper bound of sup_z |K_λ(z)|: (2π)^{-d} ∫ |F\[K_λ\]|.
    pub fn sup_bound(&self) -> f64 {
        self.radial_moment(0, 1)
    }

    /// An upper bound of the Lipschitz constant of K_λ:
    /// (2π)^{-d} ∫ |ω| |F\[K_λ\](ω)| dω.
    pub fn lipschitz_bound(&self) -> f64 {
        self.radial_moment(1, 1)
    }

    /// An upper bound of sup_z ‖Hess K_λ(z)‖ (operator norm):
    /// (2π)^{-d} ∫ |ω|² |F\[K_λ\](ω)| dω.
    pub fn hessian_bound(&self) -> f64 {
        self.radial_moment(2, 1)
    }

    /// ∫ K_λ(z)² dz = (2π)^{-d} ∫ F\[K_λ\]² (Plancherel): the size that sets
    /// the estimator's variance.
    pub fn squared_integral(&self) -> f64 {
        self.radial_moment(0, 2)
    }

    /// The radius R_P(τ) beyond which the kernel's Gaussian part
    /// P = (1 − Δ/ε²)^p K_h = Q(r²/h²)e^{−r²/(2h²)} is below τ times its
    /// supremum: the smallest R (to 1e-9 h, by bisection) with
    ///
    /// ```text
    /// sup_{|z| >= R} |P(z)| <= τ · sup_z |P(z)|,
    /// ```
    ///
    /// both sides bounded termwise as in [`tail_bound`](Self::tail_bound).
    /// Used to size the FFT's period so that the periodic images of the
    /// bins are that far from every map point (docs/MATH.md §9.3). τ is
    /// clamped to [1e-300, 1].
    ///
    /// ```
    /// use geopriv::map::DebiasKernel;
    /// // λ = 0 is K_h itself: e^{-R²/2h²} = 1e-14 at R = 8.03 h.
    /// let k = DebiasKernel::new(2, 1.0, 10.0, 0.0)?;
    /// assert!((k.gaussian_part_radius(1e-14) - 8.03).abs() < 0.01);
    /// # Ok::<(), geopriv::Error>(())
    /// ```
    pub fn gaussian_part_radius(&self, tau: f64) -> f64 {
        let tau = if tau.is_nan() {
            1.0
        } else {
            tau.clamp(1e-300, 1.0)
        };
        let target = tau * self.poly_tail(0.0);
        let h = self.bandwidth;
        let mut hi = h;
        while self.poly_tail(hi) > target && hi < 1e6 * h {
            hi *= 2.0;
        }
        let mut lo = 0.0;
        while hi - lo > 1e-9 * h {
            let mid = 0.5 * (lo + hi);
            if self.poly_tail(mid) > target {
                lo = mid;
            } else {
                hi = mid;
            }
        }
        hi
    }

    /// sup over r >= r0 of |Q(r²/h²)| e^{-r²/(2h²)} (termwise: each
    /// v^k e^{-v/2} is decreasing for v >= 2k).
    fn poly_tail(&self, r0: f64) -> f64 {
        let v0 = libm::pow(r0 / self.bandwidth, (2) as f64);
        self.poly
            .iter()
            .enumerate()
            .map(|(k, q)| {
                let v = v0.max(2.0 * k as f64);
                q.abs() * libm::pow(v, (k as i32) as f64) * exp(-0.5 * v)
            })
            .sum()
    }

    /// A certified bound T(R) >= sup_{|z| >= R} |K_λ(z)| (docs/MATH.md
    /// §9.2): K_λ = P * G_s with P = (1 - Δ/ε²)^p K_h = Q(r²/h²)e^{-r²/2h²}
    /// and G_s the law of √T·Z, T ~ Gamma(s, rate ε²/2), Z standard normal;
    /// so |K_λ(z)| <= sup_{|w| >= R - ρ}|P| + sup|P| · P(|Y| > ρ), with
    /// P(|Y| > ρ) <= min_κ κ^{-s} e^{-ερ√(1-κ)} (d <= 2; for d = 3 only
    /// s = 0 occurs).
    pub fn tail_bound(&self, r: f64) -> f64 {
        if r <= 0.0 {
            return self.poly_tail(0.0);
        }
        if self.s == 0.0 {
            return self.poly_tail(r);
        }
        let p_sup = self.poly_tail(0.0);
        let mut best = p_sup;
        for i in 1..20 {
            let alpha = i as f64 / 20.0;
            let rho = alpha * r;
            let er = self.epsilon * rho;
            let kappa = (2.0 * self.s / er).min(0.999);
            let y_tail = (pow(kappa, -self.s) * exp(-er * sqrt(1.0 - kappa))).min(1.0);
            best = best.min(self.poly_tail(r - rho) + p_sup * y_tail);
        }
        best
    }

    /// K_λ(z) at |z| = r: closed form Q(r²/h²) e^{-r²/(2h²)} when
    /// λ(d+1)/2 is an integer (d = 1 or 3 at λ = 1, d = 2 at λ = 2/3, any d
    /// at λ = 0); otherwise (d = 1, 2) the inverse Fourier integral
    /// (1/π) ∫ F cos(wr) dw or (1/2π) ∫ F J_0(wr) w dw by Simpson's rule
    /// (accurate to about 1e-10 relative for r up to 100 h).
    pub fn value(&self, r: f64) -> Result<f64> {
        let r = crate::error::finite("radius", r)?.abs();
        if self.s == 0.0 {
            let v = libm::pow(r / self.bandwidth, (2) as f64);
            let mut q = 0.0;
            for c in self.poly.iter().rev() {
                q = q * v + c;
            }
            return Ok(q * exp(-0.5 * v));
        }
        let w_max = {
            let eh = self.epsilon * self.bandwidth;
            let a = self.exponent();
            let mut u: f64 = 12.0;
            for _ in 0..50 {
                u = sqrt(2.0 * (60.0 + a * ln(1.0 + u * u / (eh * eh)) + 2.0 * ln(u + 1.0)))
                    .max(12.0);
            }
            u / self.bandwidth
        };
        Ok(match self.dim {
            1 => {
                simpson(
                    |w| self.fourier(w) * libm::cos(w * r),
                    0.0,
                    w_max,
                    QUAD_PANELS,
                ) / PI
            }
            2 => {
                simpson(
                    |w| self.fourier(w) * libm::j0(w * r) * w,
                    0.0,
                    w_max,
                    QUAD_PANELS,
                ) / (2.0 * PI)
            }
            _ => {
                return Err(Error::Numerical {
                    routine: "K_λ for d = 3 needs λ(d+1)/2 integer",
                })
            }
        })
    }
}

/// Q ↦ Q - c·Δ̂Q where, for f = Q(v)e^{-v/2} with v = r²/h², h²Δf =
/// [4v(Q'' - Q' + Q/4) + 2d(Q' - Q/2)] e^{-v/2} and c = 1/(εh)².
fn apply_one_minus_laplacian(q: &[f64], c: f64, dim: usize) -> Vec<f64> {
    let n = q.len();
    let mut out = vec![0.0; n + 1];
    let d = dim as f64;
    for (k, &qk) in q.iter().enumerate() {
        let kf = k as f64;
        out[k] += qk;
        // 4v(Q'' - Q' + Q/4): v·Q'' gives k(k-1) v^{k-1}; v·Q' gives k v^k; v·Q/4 gives v^{k+1}/4.
        let mut lap = vec![0.0; n + 1];
        if k >= 1 {
            lap[k - 1] += 4.0 * kf * (kf - 1.0) * qk + 2.0 * d * kf * qk;
        }
        lap[k] += -4.0 * kf * qk - d * qk;
        lap[k + 1] += qk;
        for (o, l) in out.iter_mut().zip(lap) {
            *o -= c * l;
        }
    }
    while out.len() > 1 && out[out.len() - 1] == 0.0 {
        out.pop();
    }
    out
}

/// Composite Simpson rule with `panels` (even) panels.
pub(crate) fn simpson<F: Fn(f64) -> f64>(f: F, a: f64, b: f64, panels: usize) -> f64 {
    let n = panels + panels % 2;
    let h = (b - a) / n as f64;
    let mut s = f(a) + f(b);
    for i in 1..n {
        let w = if i % 2 == 1 { 4.0 } else { 2.0 };
        s += w * f(a + h * i as f64);
    }
    s * h / 3.0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn closed_forms_agree_with_the_fourier_integral() {
        // 1-D, λ = 1: closed form vs quadrature of the same transform.
        let k = DebiasKernel::new(1, 1.0, 0.7, 1.0).unwrap();
        for r in [0.0, 0.5, 1.3, 3.0] {
            let direct = simpson(|w| k.fourier(w) * (w * r).cos(), 0.0, 40.0, 20000) / PI;
            assert!((k.value(r).unwrap() - direct).abs() < 1e-9, "{r}");
        }
        // 2-D, λ = 2/3: closed form (1 - Δ/ε²)K_h vs the Hankel integral.
        let k = DebiasKernel::new(2, 1.0, 1.5, 2.0 / 3.0).unwrap();
        for r in [0.0, 0.7, 2.0, 4.0] {
            let direct =
                simpson(|w| k.fourier(w) * libm::j0(w * r) * w, 0.0, 40.0, 20000) / (2.0 * PI);
            assert!((k.value(r).unwrap() - direct).abs() < 1e-9, "{r}");
        }
        // λ = 0 is the Gaussian itself.
        let k = DebiasKernel::new(2, 2.0, 1.0, 0.0).unwrap();
        assert!((k.value(2.0).unwrap() - (-0.5f64).exp()).abs() < 1e-15);
    }

    #[test]
    fn deconvolution_kernel_is_unbiased_in_one_dimension() {
        // E[K̃(t - x - N)] = K_h(t - x) for N ~ Laplace(1/ε): quadrature.
        let (h, eps) = (1.0, 0.8);
        let k = DebiasKernel::new(1, h, eps, 1.0).unwrap();
        for t in [0.0, 0.9, 2.5] {
            let m = simpson(
                |z| k.value(t - z).unwrap() * 0.5 * eps * (-eps * z.abs()).exp(),
                -60.0,
                60.0,
                200_000,
            );
            assert!(
                (m - (-0.5 * t * t / (h * h)).exp()).abs() < 1e-8,
                "{t}: {m}"
            );
        }
    }

    #[test]
    fn tail_bound_dominates_the_kernel() {
        for (dim, lam) in [(1, 1.0), (2, 1.0), (2, 0.4), (2, 2.0 / 3.0), (1, 0.3)] {
            let k = DebiasKernel::new(dim, 1.0, 0.9, lam).unwrap();
            for r in [0.0, 1.0, 3.0, 6.0, 12.0] {
                let v = k.value(r).unwrap().abs();
                assert!(
                    v <= k.tail_bound(r) * (1.0 + 1e-9) + 1e-12,
                    "{dim} {lam} {r}: {v} > {}",
                    k.tail_bound(r)
                );
            }
            assert!(k.value(0.0).unwrap().abs() <= k.sup_bound() * (1.0 + 1e-9));
        }
    }

    #[test]
    fn size_grows_like_the_spec_rate() {
        // ∫K̃² relative to ∫K_h² grows like (1 + 1/(εh)²)^{3/2}·const as εh -> 0.
        let base = DebiasKernel::new(2, 1.0, 1.0, 0.0)
            .unwrap()
            .squared_integral();
        assert!((base - PI).abs() < 1e-9); // ∫ e^{-r²} d²z = π
        let r1 = DebiasKernel::new(2, 1.0, 0.1, 1.0).unwrap().sup_bound();
        let r2 = DebiasKernel::new(2, 1.0, 0.05, 1.0).unwrap().sup_bound();
        // sup ~ (εh)^{-3}: halving εh multiplies by about 8.
        assert!((r2 / r1 - 8.0).abs() < 0.5, "{}", r2 / r1);
    }
}
