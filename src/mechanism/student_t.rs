//! Student's t noise scaled to the smooth sensitivity (exponential
//! growth); pure ε-GP (docs/MATH.md §4).
//!
//! # Privacy argument
//!
//! Student's t with ν dof: tail exponent ν + 1, so dilation costs ν γ d;
//! sup |d/dz ln p| = (ν+1)/(2√ν) (at z² = ν). Sum: ε d.

//!
//! # Floating-point guarantee (docs/MATH.md §8.1)
//!
//! (ε, δ, η, δ_fp) = (ε, 0, 6.1e-9, 1e-15) at the default ν = 3 (the heavy t tail needs a large z_max, hence a coarse grid): every output cell within
//! z_max = 1.30e5 noise scales has ln(P_x(c)/P_x'(c)) <= ε d + η, the rest has
//! mass δ_fp; release grid 2^⌊log2 σ_max⌋ · 2^-3
//! ([`Mechanism::floating_point_guarantee`], measured by `audit::enumeration`).

use super::{share, Mechanism, NoiseShape};
use crate::error::{positive_finite, Error, Result};
use crate::growth::Growth;
use crate::MechanismName;

/// Default share of ε spent on smoothness for Student's t (γ = ε/(3ν)).
pub const STUDENT_T_SMOOTHNESS_SHARE: f64 = 1.0 / 3.0;

impl Mechanism {
    /// Student's t with the paper's defaults: ν = 3, γ = ε/(3ν).
    pub fn student_t(epsilon: f64) -> Result<Self> {
        Self::student_t_with(epsilon, 3.0, STUDENT_T_SMOOTHNESS_SHARE)
    }

    /// Student's t with ν = `dof` > 1 and νγ = `smoothness_share` · ε:
    /// ε = νγ + ((ν+1)/(2√ν)) η, release f(x) + S(x)/η · T_ν.
    ///
    /// ν <= 1 is refused: the noise would have no mean (reports would not
    /// be unbiased), and the dilation cost of the t density is
    /// max(1, ν) γ d, so the calibration's νγ would undercharge for ν < 1.
    pub fn student_t_with(epsilon: f64, dof: f64, smoothness_share: f64) -> Result<Self> {
        let epsilon = positive_finite("epsilon", epsilon)?;
        if !(dof.is_finite() && dof > 1.0) {
            return Err(Error::InvalidParameter {
                name: "dof",
                value: dof,
                requirement: "finite and > 1 (the noise needs a mean)",
            });
        }
        let s = share("smoothness_share", smoothness_share)?;
        let gamma = s * epsilon / dof;
        let eta = (1.0 - s) * epsilon * 2.0 * crate::math::sqrt(dof) / (dof + 1.0);
        Self::smooth(
            MechanismName::StudentT,
            epsilon,
            0.0,
            s,
            Growth::exponential(gamma)?,
            1.0 / eta,
            NoiseShape::StudentT { dof },
        )
    }
}

#[cfg(test)]
mod tests {
    use super::super::test_support::{self, refuses_bad_epsilon};
    use super::*;

    #[test]
    fn calibration_matches_the_spec() {
        let eps = 0.01;
        let m = Mechanism::student_t(eps).unwrap();
        let g = m.growth().unwrap();
        // ε = νγ + ((ν+1)/(2√ν)) η with ν = 3, γ = ε/9.
        let eta = 1.0 / m.scale_for(1.0).unwrap();
        assert!((3.0 * g.rate() + 4.0 / (2.0 * 3f64.sqrt()) * eta - eps).abs() < 1e-15);
        assert!((g.rate() - eps / 9.0).abs() < 1e-18);
    }

    #[test]
    fn refuses_parameters_that_void_the_guarantee() {
        assert!(Mechanism::student_t_with(1.0, 0.0, 0.3).is_err());
        assert!(Mechanism::student_t_with(1.0, 0.9, 0.3).is_err());
        assert!(Mechanism::student_t_with(1.0, 1.0, 0.3).is_err());
        assert!(Mechanism::student_t_with(1.0, 3.0, 1.0).is_err());
        refuses_bad_epsilon(Mechanism::student_t);
    }

    #[test]
    fn releases_are_on_the_public_grid_and_unbiased() {
        test_support::releases_are_on_the_public_grid_and_unbiased(
            &Mechanism::student_t(0.05).unwrap(),
        );
    }
}
