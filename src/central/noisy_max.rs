//! Private selection from a finite public candidate set
//! (`docs/MATH.md §11.2`): Smooth Noisy Max (Chaves, Farias, Perez,
//! Mesquita and Machado, "Differentially Private Selection using Smooth
//! Sensitivity", IEEE S&P 2025) and two global-sensitivity baselines, the
//! exponential mechanism and permute-and-flip.
//!
//! Smooth Noisy Max releases argmax_r (u(x, r) + S(x) · Z_r) with i.i.d.
//! Z_r, where S is a β-smooth upper bound on the local sensitivity of the
//! utility vector, max over neighbours y of max_r |u(x, r) - u(y, r)|.
//! The noise shapes and scales are those of the authors' public code
//! (`percentile_selection/mechanims.py`, functions `rnm_lap_pmf` and
//! `rnm_tdist_pmf`); the Laplace variant's β is ours (below):
//!
//! | variant | β | noise | guarantee |
//! |---|---|---|---|
//! | Laplace | ε / (2 ln(2M/δ)), M = most candidates | Laplace, scale 2S/ε | (ε, δ) for every \|R\| <= M |
//! | Student's t, d = 3 | ε / (2(d+1)) | t_d, scale 2S/α, α = 2√d (ε - β(d+1))/(d+1) | ε (paper; audited) |
//!
//! **Per candidate vs total** (`docs/MATH.md §11.2`). Moving from x to a
//! neighbour x' changes the utilities by at most S (a *shift*) and the scale
//! S by a factor e^{±β} (a *dilation*). The shift costs one candidate's
//! worth: conditioned on the other candidates' noise, r wins iff its own
//! noise clears a threshold that moves by at most 2S (the factor 2 in the
//! scale). The dilation, however, acts on all |R| noise draws at once. We
//! reduce it to a shift of the winner's noise by β G (G = the leader's
//! margin over r in noise units) plus a bad event "some candidate's noise
//! is beyond the Laplace cut-off"; that event is a union over the |R|
//! candidates, so its probability is |R| times one candidate's. The paper's
//! β = ε/(2 ln(2/δ)) prices that cut-off for one candidate: its δ holds per
//! candidate, (ε, |R| δ) in total. We calibrate the cut-off at δ/M instead
//! ([`SmoothNoisyMax::with_max_candidates`], default M =
//! [`DEFAULT_MAX_CANDIDATES`]) and refuse more than M candidates, so δ is
//! the total. ε does not grow with |R| (the argument is per output).
//!
//! The exact audit over neighbouring datasets (`central::audit`) checks
//! both variants, including instances with many candidates at one margin
//! (the case where the dilation touches every draw).
//!
//! ```
//! use geopriv::central::noisy_max::{SmoothNoisyMax, SnmNoise};
//! use rand::SeedableRng;
//! let snm = SmoothNoisyMax::new(SnmNoise::StudentT, 1.0)?;
//! let u = [0.0, -3.0, -10.0];
//! let mut rng = rand::rngs::StdRng::seed_from_u64(1);
//! let r = snm.select(&u, 0.5, &mut rng)?; // S = 0.5 computed at snm.beta()
//! assert!(r < 3);
//! # Ok::<(), geopriv::Error>(())
//! ```

use super::{check_delta, check_epsilon, Noise};
use crate::error::{positive_finite, Error, Result};
use crate::math::{exp, ln, sqrt};
use crate::noise::{Laplace, StudentT};
use alloc::vec::Vec;
use rand::Rng;

/// Degrees of freedom of the Student's t variant (the paper's d = 3).
pub const SNM_T_DOF: f64 = 3.0;

/// Default largest candidate set M of [`SmoothNoisyMax::new`]: the Laplace
/// variant's δ is the total over up to M candidates (module docs).
pub const DEFAULT_MAX_CANDIDATES: usize = 4096;

/// The noise of Smooth Noisy Max.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum SnmNoise {
    /// Laplace noise, (ε, δ)-DP.
    Laplace {
        /// δ ∈ (0, 1).
        delta: f64,
    },
    /// Student's t with 3 degrees of freedom, ε-DP.
    StudentT,
}

/// Smooth Noisy Max with the paper's constants.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct SmoothNoisyMax {
    variant: SnmNoise,
    epsilon: f64,
    beta: f64,
    noise: Noise,
    max_candidates: usize,
}

fn check_candidates(utilities: &[f64], max_candidates: usize) -> Result<()> {
    if utilities.len() > max_candidates {
        return Err(Error::InvalidData {
            index: max_candidates,
            value: utilities.len() as f64,
            reason: "more candidates than the mechanism was calibrated for (max_candidates)",
        });
    }
    if utilities.is_empty() {
        return Err(Error::InvalidData {
            index: 0,
            value: f64::NAN,
            reason: "the candidate set is empty",
        });
    }
    for (index, &value) in utilities.iter().enumerate() {
        if !value.is_finite() {
            return Err(Error::InvalidData {
                index,
                value,
                reason: "utilities must be finite",
            });
        }
    }
    Ok(())
}

impl SmoothNoisyMax {
    /// Smooth Noisy Max for budget ε over at most
    /// [`DEFAULT_MAX_CANDIDATES`] candidates.
    pub fn new(variant: SnmNoise, epsilon: f64) -> Result<Self> {
        Self::with_max_candidates(variant, epsilon, DEFAULT_MAX_CANDIDATES)
    }

    /// Smooth Noisy Max for budget ε over at most `max_candidates`
    /// candidates (>= 1): the Laplace variant's β = ε/(2 ln(2M/δ)) makes δ
    /// the total over all of them (module docs); the Student's t variant
    /// does not depend on M.
    pub fn with_max_candidates(
        variant: SnmNoise,
        epsilon: f64,
        max_candidates: usize,
    ) -> Result<Self> {
        let epsilon = check_epsilon(epsilon)?;
        if max_candidates == 0 {
            return Err(Error::InvalidParameter {
                name: "max_candidates",
                value: 0.0,
                requirement: "at least 1",
            });
        }
        let (beta, noise) = match variant {
            SnmNoise::Laplace { delta } => {
                let delta = check_delta(delta)?;
                (
                    epsilon / (2.0 * ln(2.0 * max_candidates as f64 / delta)),
                    Noise::Laplace(Laplace::new(2.0 / epsilon)?),
                )
            }
            SnmNoise::StudentT => {
                let d = SNM_T_DOF;
                let beta = epsilon / (2.0 * (d + 1.0));
                let alpha = 2.0 * sqrt(d) * (epsilon - beta * (d + 1.0)) / (d + 1.0);
                (beta, Noise::StudentT(StudentT::new(d, 2.0 / alpha)?))
            }
        };
        Ok(Self {
            variant,
            epsilon,
            beta,
            noise,
            max_candidates,
        })
    }

    /// The largest candidate set M the guarantee covers.
    pub fn max_candidates(&self) -> usize {
        self.max_candidates
    }

    /// The β at which the caller computes the smooth upper bound S.
    pub fn beta(&self) -> f64 {
        self.beta
    }

    /// ε.
    pub fn epsilon(&self) -> f64 {
        self.epsilon
    }

    /// δ of the guarantee (0 for Student's t).
    pub fn delta(&self) -> f64 {
        match self.variant {
            SnmNoise::Laplace { delta } => delta,
            SnmNoise::StudentT => 0.0,
        }
    }

    /// The per-candidate noise in units of S.
    pub fn unit_noise(&self) -> Noise {
        self.noise
    }

    /// argmax_r (u_r + S Z_r); ties (probability 0) go to the lowest index.
    pub fn select<R: Rng + ?Sized>(
        &self,
        utilities: &[f64],
        smooth_sensitivity: f64,
        rng: &mut R,
    ) -> Result<usize> {
        check_candidates(utilities, self.max_candidates)?;
        let s = positive_finite("smooth_sensitivity", smooth_sensitivity)?;
        let mut best = f64::NEG_INFINITY;
        let mut arg = 0;
        for (r, &u) in utilities.iter().enumerate() {
            let v = u + s * self.noise.sample(rng);
            if v > best {
                best = v;
                arg = r;
            }
        }
        Ok(arg)
    }

    /// The exact selection probabilities
    /// P\[r\] = ∫ p_Z(z) Π_{s≠r} F_Z(z + (u_r - u_s)/S) dz, by adaptive
    /// Simpson quadrature after z = t/(1 - t²) (absolute error ~1e-12).
    pub fn probabilities(&self, utilities: &[f64], smooth_sensitivity: f64) -> Result<Vec<f64>> {
        check_candidates(utilities, self.max_candidates)?;
        let s = positive_finite("smooth_sensitivity", smooth_sensitivity)?;
        let noise = self.noise;
        let mut out = Vec::with_capacity(utilities.len());
        for (r, &ur) in utilities.iter().enumerate() {
            let integrand = |t: f64| {
                let om = 1.0 - t * t;
                if om <= 0.0 {
                    return 0.0;
                }
                let z = t / om;
                let dz = (1.0 + t * t) / (om * om);
                let mut v = exp(noise.ln_pdf(z)) * dz;
                for (q, &uq) in utilities.iter().enumerate() {
                    if q != r {
                        v *= noise.cdf(z + (ur - uq) / s);
                        if v == 0.0 {
                            break;
                        }
                    }
                }
                if v.is_finite() {
                    v
                } else {
                    0.0
                }
            };
            out.push(super::integrate(&integrand, -1.0, 1.0, 1e-11));
        }
        Ok(out)
    }
}

/// Exponential mechanism: P\[r\] ∝ exp(ε u_r / (2Δ)) with Δ the global
/// sensitivity of the utility.
pub fn exponential_probabilities(
    utilities: &[f64],
    sensitivity: f64,
    epsilon: f64,
) -> Result<Vec<f64>> {
    check_candidates(utilities, usize::MAX)?;
    let delta = positive_finite("sensitivity", sensitivity)?;
    let epsilon = check_epsilon(epsilon)?;
    let top = utilities.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    let w: Vec<f64> = utilities
        .iter()
        .map(|&u| exp(epsilon * (u - top) / (2.0 * delta)))
        .collect();
    let total: f64 = w.iter().sum();
    Ok(w.into_iter().map(|x| x / total).collect())
}

/// One draw of the exponential mechanism.
pub fn exponential_mechanism<R: Rng + ?Sized>(
    utilities: &[f64],
    sensitivity: f64,
    epsilon: f64,
    rng: &mut R,
) -> Result<usize> {
    let p = exponential_probabilities(utilities, sensitivity, epsilon)?;
    let mut u = rng.random::<f64>();
    for (r, &pr) in p.iter().enumerate() {
        if u < pr {
            return Ok(r);
        }
        u -= pr;
    }
    Ok(p.len() - 1)
}

/// Permute-and-flip (McKenna and Sheldon, 2020): visit the candidates in a
/// uniformly random order and stop at r with probability
/// exp(ε (u_r - u*) / (2Δ)), u* = max u (the maximiser always stops).
/// ε-DP for a utility of global sensitivity Δ.
pub fn permute_and_flip<R: Rng + ?Sized>(
    utilities: &[f64],
    sensitivity: f64,
    epsilon: f64,
    rng: &mut R,
) -> Result<usize> {
    check_candidates(utilities, usize::MAX)?;
    let delta = positive_finite("sensitivity", sensitivity)?;
    let epsilon = check_epsilon(epsilon)?;
    let top = utilities.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    let mut order: Vec<usize> = (0..utilities.len()).collect();
    // Fisher–Yates: visiting order[0], order[1], ... is a uniform permutation.
    for i in 0..order.len() {
        let j = rng.random_range(i..order.len());
        order.swap(i, j);
        let r = order[i];
        if rng.random::<f64>() < exp(epsilon * (utilities[r] - top) / (2.0 * delta)) {
            return Ok(r);
        }
    }
    // Unreachable: the maximiser stops with probability 1.
    Ok(order[order.len() - 1])
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::rngs::StdRng;
    use rand::SeedableRng;

    #[test]
    fn probabilities_sum_to_one_and_match_sampling() {
        let u = [0.0, -0.5, -2.0, -0.1];
        for v in [SnmNoise::Laplace { delta: 1e-6 }, SnmNoise::StudentT] {
            let snm = SmoothNoisyMax::new(v, 1.0).unwrap();
            let p = snm.probabilities(&u, 0.3).unwrap();
            let total: f64 = p.iter().sum();
            assert!((total - 1.0).abs() < 1e-9, "{total}");
            let mut rng = StdRng::seed_from_u64(5);
            let mut c = [0usize; 4];
            let n = 40_000;
            for _ in 0..n {
                c[snm.select(&u, 0.3, &mut rng).unwrap()] += 1;
            }
            for r in 0..4 {
                let f = c[r] as f64 / n as f64;
                assert!(
                    (f - p[r]).abs() < 5.0 * (p[r] / n as f64).sqrt() + 1e-3,
                    "{r} {f} {}",
                    p[r]
                );
            }
        }
    }

    #[test]
    fn laplace_delta_is_the_total_over_the_candidates() {
        let d = 1e-6;
        let one =
            SmoothNoisyMax::with_max_candidates(SnmNoise::Laplace { delta: d }, 1.0, 1).unwrap();
        let many = SmoothNoisyMax::new(SnmNoise::Laplace { delta: d }, 1.0).unwrap();
        // One candidate: the paper's β; M candidates: the cut-off at δ/M.
        assert!((one.beta() - 1.0 / (2.0 * (2.0 / d).ln())).abs() < 1e-15);
        let m = DEFAULT_MAX_CANDIDATES as f64;
        assert!((many.beta() - 1.0 / (2.0 * (2.0 * m / d).ln())).abs() < 1e-15);
        let t = SmoothNoisyMax::new(SnmNoise::StudentT, 1.0).unwrap();
        assert_eq!(t.beta(), 1.0 / 8.0);
    }

    #[test]
    fn permute_and_flip_and_em_prefer_the_best() {
        let u = [0.0, -5.0, -5.0];
        let mut rng = StdRng::seed_from_u64(2);
        let mut pf = 0;
        let mut em = 0;
        for _ in 0..2000 {
            pf += (permute_and_flip(&u, 1.0, 2.0, &mut rng).unwrap() == 0) as usize;
            em += (exponential_mechanism(&u, 1.0, 2.0, &mut rng).unwrap() == 0) as usize;
        }
        // EM: 1/(1 + 2e^-5) = 0.987; PF is at least as accurate.
        assert!(em > 1900 && pf > 1900, "{em} {pf}");
    }

    #[test]
    fn bad_input_is_a_typed_error() {
        let snm = SmoothNoisyMax::new(SnmNoise::StudentT, 1.0).unwrap();
        let mut rng = StdRng::seed_from_u64(2);
        assert!(matches!(
            snm.select(&[], 1.0, &mut rng),
            Err(Error::InvalidData { .. })
        ));
        assert!(snm.select(&[f64::NAN], 1.0, &mut rng).is_err());
        assert!(snm.select(&[1.0], 0.0, &mut rng).is_err());
        assert!(SmoothNoisyMax::new(SnmNoise::StudentT, 0.0).is_err());
        assert!(SmoothNoisyMax::new(SnmNoise::Laplace { delta: 0.0 }, 1.0).is_err());
        let two = SmoothNoisyMax::with_max_candidates(SnmNoise::StudentT, 1.0, 2).unwrap();
        assert!(two.select(&[0.0, 1.0, 2.0], 1.0, &mut rng).is_err());
        assert!(two.probabilities(&[0.0, 1.0, 2.0], 1.0).is_err());
        assert!(SmoothNoisyMax::with_max_candidates(SnmNoise::StudentT, 1.0, 0).is_err());
        assert!(permute_and_flip(&[], 1.0, 1.0, &mut rng).is_err());
        assert!(exponential_mechanism(&[1.0], 0.0, 1.0, &mut rng).is_err());
    }
}
