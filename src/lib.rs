//! # geopriv: local geo-privacy with smooth sensitivity
//!
//! A device holds a private value x (a location in metres, an income in
//! dollars). It releases f(x) plus noise scaled to a *smooth sensitivity*
//! S(x); the server only sums the releases. Geo-privacy (GP) protects in
//! proportion to distance: with budget ε per unit distance, two inputs x, x'
//! give output distributions within a factor exp(ε · d(x, x')).
//!
//! Data flows one way, one module per arrow:
//!
//! ```text
//! point -> query -> smooth sensitivity -> mechanism -> report -> aggregate -> estimate
//!          query::*   Query::smooth_...    mechanism   report    server::aggregate
//! ```
//!
//! Two audiences, two modules: a phone developer reads [`device`] (the
//! metered release and the ledger), a back-end developer reads [`server`]
//! (ingestion, validation, clipping, exact aggregation); both share the
//! wire format in [`report`]. Maps ([`map`]) and the central model
//! ([`central`]) have a device and a server half of their own.
//!
//! ```
//! use geopriv::{Growth, Query, SoftThreshold};
//!
//! // "Share of households with income above $100k", ramp 20k wide.
//! let q = SoftThreshold::new(100_000.0, 20_000.0)?;
//! let x = [42_000.0];
//! let value = q.value(&x)?;                                   // 0.0
//! let s = q.smooth_sensitivity(&x, Growth::exponential(1e-4)?)?;
//! assert_eq!(value, 0.0);
//! assert!(s < q.global_lipschitz());                            // far from the ramp: less noise
//! # Ok::<(), geopriv::Error>(())
//! ```
//!
//! The mathematics the code relies on is `docs/MATH.md` (cited as
//! `docs/MATH.md §N`); each
//! query and mechanism states its formula and why it is private next to
//! the code.
#![cfg_attr(not(feature = "std"), no_std)]
#![forbid(unsafe_code)]
#![warn(missing_docs)]

extern crate alloc;
#[cfg(feature = "std")]
extern crate std;

#[cfg(feature = "std")]
pub mod audit;
pub mod central;
pub mod device;
pub mod error;
pub mod geo;
pub mod growth;
pub mod map;
pub mod mechanism;
pub mod noise;
pub mod query;
pub mod radius;
pub mod release_grid;
pub mod report;
pub mod server;

mod exact;
mod math;
mod roots;
#[cfg(feature = "std")]
mod secure_rng;

pub use self::geo::{LatLon, LocalEquirectangular, Projection, WebMercator};
pub use device::budget::{BudgetPolicy, BudgetUnit, Ledger, PrivacyBudget};
pub use error::{Error, Result, ShortNumber};
pub use growth::{Growth, GrowthKind};
pub use mechanism::{Mechanism, MechanismName, MechanismParams, NoiseShape, OutputDensity};
#[cfg(feature = "std")]
pub use query::RegionQuery;
pub use query::{AnyQuery, GaussianKde, Query, SoftInterval, SoftThreshold, TwoWayThreshold};
pub use radius::PrivacyRadius;
pub use report::{QueryDescriptor, Report, ReportId};
#[cfg(feature = "std")]
pub use secure_rng::SecureRng;
pub use server::aggregate::{Aggregator, Estimate, GridAggregator, PerDeviceTotal};
pub use server::{Rejection, ValidationPolicy};

/// The README's example, compiled and run as a doctest.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
struct ReadmeDoctests;
