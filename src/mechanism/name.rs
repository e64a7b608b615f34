//! [`MechanismName`]: the one identity of a mechanism, shared by
//! [`Mechanism::name`](crate::Mechanism::name), the wire format, the CLI,
//! the experiments and the bindings.
//!
//! The variant order is part of the binary wire format (postcard writes
//! the variant index): new mechanisms are only ever appended.

use crate::error::{Error, Result};
use core::fmt;
use core::str::FromStr;
use serde::{Deserialize, Serialize};

/// Which mechanism produced a report (docs/MATH.md §4). Its ε is per unit distance
/// (geo-privacy) for every mechanism except [`Ldp`](MechanismName::Ldp).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum MechanismName {
    /// PolyPlace noise with smooth sensitivity; pure GP (δ = 0).
    Polyplace,
    /// Student's t noise with smooth sensitivity; pure GP (δ = 0).
    StudentT,
    /// Generalized Cauchy noise with smooth sensitivity; pure GP (δ = 0).
    Cauchy,
    /// Laplace noise with smooth sensitivity under linear growth;
    /// approximate GP, δ > 0.
    Laplace,
    /// Laplace noise scaled to the global Lipschitz constant (baseline);
    /// pure GP (δ = 0).
    GlobalLaplace,
    /// Noise added to the point itself, f evaluated on the noisy point
    /// (baseline); pure GP (δ = 0).
    APriori,
    /// Local differential privacy reference: f(x) + Laplace(range/ε). Its ε
    /// is a **local-DP ε** (any two inputs, whatever their distance), not a
    /// budget per unit distance, so it is policed separately
    /// ([`ValidationPolicy::allow_ldp`](crate::ValidationPolicy::allow_ldp)); δ = 0.
    Ldp,
}

impl MechanismName {
    /// Every mechanism, in wire order.
    pub const ALL: [MechanismName; 7] = [
        MechanismName::Polyplace,
        MechanismName::StudentT,
        MechanismName::Cauchy,
        MechanismName::Laplace,
        MechanismName::GlobalLaplace,
        MechanismName::APriori,
        MechanismName::Ldp,
    ];

    /// The name used in JSON (kebab-case).
    pub fn as_str(self) -> &'static str {
        match self {
            MechanismName::Polyplace => "polyplace",
            MechanismName::StudentT => "student-t",
            MechanismName::Cauchy => "cauchy",
            MechanismName::Laplace => "laplace",
            MechanismName::GlobalLaplace => "global-laplace",
            MechanismName::APriori => "a-priori",
            MechanismName::Ldp => "ldp",
        }
    }

    /// A label for tables and plot legends, e.g. `Student's t (ν=3)` (the
    /// default calibration of [`Mechanism::from_name`](crate::Mechanism::from_name)).
    pub fn label(self) -> &'static str {
        match self {
            MechanismName::Polyplace => "PolyPlace",
            MechanismName::StudentT => "Student's t (ν=3)",
            MechanismName::Cauchy => "Gen Cauchy (k=4)",
            MechanismName::Laplace => "Laplace (ε,δ)-GP",
            MechanismName::GlobalLaplace => "Global Laplace",
            MechanismName::APriori => "Noise a priori",
            MechanismName::Ldp => "Local DP",
        }
    }

    /// Pure (δ = 0) mechanisms; only [`Laplace`](MechanismName::Laplace)
    /// is approximate.
    pub fn is_pure(self) -> bool {
        self != MechanismName::Laplace
    }

    /// Whether ε is a geo-privacy budget per unit distance (all but
    /// [`Ldp`](MechanismName::Ldp)).
    pub fn is_geo_private(self) -> bool {
        self != MechanismName::Ldp
    }
}

impl fmt::Display for MechanismName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for MechanismName {
    type Err = Error;
    fn from_str(s: &str) -> Result<Self> {
        MechanismName::ALL
            .into_iter()
            .find(|m| m.as_str() == s)
            .ok_or(Error::Parse {
            what: "mechanism name",
            reason:
                "expected polyplace, student-t, cauchy, laplace, global-laplace, a-priori or ldp",
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip_and_keep_wire_order() {
        for (i, m) in MechanismName::ALL.into_iter().enumerate() {
            assert_eq!(m.as_str().parse::<MechanismName>().unwrap(), m);
            assert_eq!(postcard::to_allocvec(&m).unwrap(), [i as u8]);
            assert_eq!(
                serde_json::to_string(&m).unwrap(),
                alloc::format!("\"{m}\"")
            );
        }
        assert!("gaussian".parse::<MechanismName>().is_err());
    }
}
