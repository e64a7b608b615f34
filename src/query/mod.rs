//! Queries f : R^d -> R and their sensitivities (docs/MATH.md §2, §3).
//!
//! Every query reports its value f(x), its global Lipschitz constant, the
//! pointwise Lipschitz constant
//!
//! ```text
//! L_f(x) = sup_{y != x} |f(x) - f(y)| / d(x, y)
//! ```
//!
//! and the smooth sensitivity, the smallest g-smooth upper bound of L_f:
//!
//! ```text
//! S*(x) = sup_y L_f(y) / g(d(x, y))
//! ```
//!
//! Privacy rests on S: if it were ever below the definition the guarantee
//! would be void. Each family documents why its formula is exact, and
//! `tests/brute_force_sensitivity.rs` checks every family against a direct
//! evaluation of the definitions.

use crate::error::Result;
use crate::growth::Growth;
use crate::report::QueryDescriptor;

mod any;
mod interval;
pub mod kde;
#[cfg(feature = "std")]
pub mod region;
#[cfg(feature = "std")]
pub mod region_geojson;
#[cfg(feature = "std")]
mod region_index;
mod threshold;
mod two_way;

pub use any::AnyQuery;
pub use interval::SoftInterval;
pub use kde::GaussianKde;
#[cfg(feature = "std")]
pub use region::{RegionQuery, MAX_REGION_VERTICES};
pub use threshold::SoftThreshold;
pub use two_way::TwoWayThreshold;

/// A real-valued query on points of R^d with an exactly computable smooth
/// sensitivity.
///
/// Points are slices of `dimension()` finite coordinates; a wrong length or
/// a NaN/infinite coordinate gives an error rather than a number.
pub trait Query {
    /// The public description of the query (family and parameters): what
    /// a report says it answered. [`QueryDescriptor::to_query`] builds the
    /// query back from it.
    fn descriptor(&self) -> QueryDescriptor;

    /// Number of coordinates a point must have.
    fn dimension(&self) -> usize;

    /// f(x).
    fn value(&self, x: &[f64]) -> Result<f64>;

    /// sup over all x != y of |f(x) - f(y)| / d(x, y).
    fn global_lipschitz(&self) -> f64;

    /// L_f(x) = sup_{y != x} |f(x) - f(y)| / d(x, y).
    fn pointwise_lipschitz(&self, x: &[f64]) -> Result<f64>;

    /// S*(x) = sup_y L_f(y) / g(d(x, y)) for the growth function `growth`.
    fn smooth_sensitivity(&self, x: &[f64], growth: Growth) -> Result<f64>;

    /// Check that `x` is a point this query accepts: exactly
    /// [`dimension`](Query::dimension) coordinates, all finite
    /// ([`Error::DimensionMismatch`](crate::Error::DimensionMismatch),
    /// [`Error::NonFinitePoint`](crate::Error::NonFinitePoint) otherwise).
    fn check_point(&self, x: &[f64]) -> Result<()> {
        crate::error::check_point(x, self.dimension())
    }

    /// The interval [lo, hi] that f takes values in. All bundled queries
    /// are shares, so the default is (0, 1). Used by the local-DP
    /// reference mechanism, whose noise scales with hi - lo.
    fn value_bounds(&self) -> (f64, f64) {
        (0.0, 1.0)
    }
}

/// The smooth sensitivity of a query that is a soft step of width `width`
/// in the distance `e >= 0` to its ramp (docs/MATH.md §3.1): off the ramp
/// L = 1/(e + width) and
///
/// ```text
/// S*(e) = max( 1/(e + width), 1/(width · g(e)) ).
/// ```
///
/// Why it is exact: the candidates y at ramp-distance e' <= e and distance
/// e - e' from x give 1/((e' + w) g(e - e')). For g = exp(γt) the log of this
/// is convex in e'; for g = 1 + γt its denominator is a concave quadratic in
/// e'. Either way the maximum is at an end point, e' = e (y = x) or e' = 0
/// (the ramp edge). Points farther from the ramp than x have smaller L and a
/// larger g. For e = 0 this is 1/width, the global constant.
pub(crate) fn ramp_smooth_sensitivity(e: f64, width: f64, growth: Growth) -> f64 {
    let at_x = 1.0 / (e + width);
    let at_ramp = 1.0 / (width * growth.eval(e));
    if at_x > at_ramp {
        at_x
    } else {
        at_ramp
    }
}
