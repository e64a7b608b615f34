//! Growth functions as a foreign-friendly enum (core: `geopriv::Growth`).

use crate::GeoprivError;

/// The growth function g of a g-smooth sensitivity bound, with its rate γ
/// per unit distance (finite, > 0; checked when used).
///
/// Kotlin: `Growth.Exponential(rate)`, Swift: `.exponential(rate:)`,
/// Python: `Growth.EXPONENTIAL(rate)`.
#[derive(Debug, Clone, Copy, PartialEq, uniffi::Enum)]
pub enum Growth {
    /// g(t) = exp(γ t), used by the pure-GP mechanisms.
    Exponential {
        /// γ, per unit distance.
        rate: f64,
    },
    /// g(t) = 1 + γ t, used by the approximate-GP Laplace mechanism.
    Linear {
        /// γ, per unit distance.
        rate: f64,
    },
}

impl TryFrom<Growth> for geopriv::Growth {
    type Error = GeoprivError;

    fn try_from(g: Growth) -> Result<Self, GeoprivError> {
        Ok(match g {
            Growth::Exponential { rate } => geopriv::Growth::exponential(rate)?,
            Growth::Linear { rate } => geopriv::Growth::linear(rate)?,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rates_are_validated() {
        for bad in [0.0, -1.0, f64::NAN, f64::INFINITY, f64::NEG_INFINITY] {
            for g in [
                Growth::Exponential { rate: bad },
                Growth::Linear { rate: bad },
            ] {
                let e = geopriv::Growth::try_from(g).unwrap_err();
                assert!(matches!(e, GeoprivError::InvalidParameter(_)), "{e:?}");
                assert!(e.to_string().contains("gamma"), "{e}");
            }
        }
        let g = geopriv::Growth::try_from(Growth::Linear { rate: 0.5 }).unwrap();
        assert_eq!(g.kind(), geopriv::GrowthKind::Linear);
        assert_eq!(g.rate(), 0.5);
    }
}
