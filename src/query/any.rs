//! [`AnyQuery`]: one value for a query of any bundled family, built from a
//! [`QueryDescriptor`]. Front ends (CLI, bindings, servers) hold this
//! instead of matching on the family themselves.

use super::{GaussianKde, Query, SoftInterval, SoftThreshold, TwoWayThreshold};
use crate::error::Result;
use crate::growth::Growth;
use crate::report::QueryDescriptor;

/// A query of any bundled family. Build it with
/// [`QueryDescriptor::to_query`] (or `From` one of the families); it is a
/// [`Query`] itself.
///
/// ```
/// use geopriv::{Query, QueryDescriptor};
/// let d: QueryDescriptor = "threshold:T=100000;w=20000".parse()?;
/// let q = d.to_query()?;
/// assert_eq!(q.value(&[120_000.0])?, 1.0);
/// assert_eq!(q.descriptor(), d);
/// # Ok::<(), geopriv::Error>(())
/// ```
#[derive(Clone, Debug, PartialEq)]
pub enum AnyQuery {
    /// [`SoftThreshold`].
    Threshold(SoftThreshold),
    /// [`SoftInterval`].
    Interval(SoftInterval),
    /// [`TwoWayThreshold`].
    TwoWay(TwoWayThreshold),
    /// [`GaussianKde`].
    Kde(GaussianKde),
    /// [`RegionQuery`](super::RegionQuery) (std).
    #[cfg(feature = "std")]
    Region(super::RegionQuery),
}

impl AnyQuery {
    /// The family's own query, as a trait object: the one place that
    /// dispatches on the family (every [`Query`] method goes through it).
    #[inline]
    pub fn as_query(&self) -> &(dyn Query + Send + Sync) {
        match self {
            AnyQuery::Threshold(q) => q,
            AnyQuery::Interval(q) => q,
            AnyQuery::TwoWay(q) => q,
            AnyQuery::Kde(q) => q,
            #[cfg(feature = "std")]
            AnyQuery::Region(q) => q,
        }
    }
}

impl Query for AnyQuery {
    fn descriptor(&self) -> QueryDescriptor {
        self.as_query().descriptor()
    }
    fn dimension(&self) -> usize {
        self.as_query().dimension()
    }
    fn value(&self, x: &[f64]) -> Result<f64> {
        self.as_query().value(x)
    }
    fn global_lipschitz(&self) -> f64 {
        self.as_query().global_lipschitz()
    }
    fn pointwise_lipschitz(&self, x: &[f64]) -> Result<f64> {
        self.as_query().pointwise_lipschitz(x)
    }
    fn smooth_sensitivity(&self, x: &[f64], growth: Growth) -> Result<f64> {
        self.as_query().smooth_sensitivity(x, growth)
    }
    fn value_bounds(&self) -> (f64, f64) {
        self.as_query().value_bounds()
    }
}

impl From<SoftThreshold> for AnyQuery {
    fn from(q: SoftThreshold) -> Self {
        AnyQuery::Threshold(q)
    }
}

impl From<SoftInterval> for AnyQuery {
    fn from(q: SoftInterval) -> Self {
        AnyQuery::Interval(q)
    }
}

impl From<TwoWayThreshold> for AnyQuery {
    fn from(q: TwoWayThreshold) -> Self {
        AnyQuery::TwoWay(q)
    }
}

impl From<GaussianKde> for AnyQuery {
    fn from(q: GaussianKde) -> Self {
        AnyQuery::Kde(q)
    }
}

#[cfg(feature = "std")]
impl From<super::RegionQuery> for AnyQuery {
    fn from(q: super::RegionQuery) -> Self {
        AnyQuery::Region(q)
    }
}
