//! What runs on a back-end: everything that touches reports after upload.
//!
//! Reports arrive as untrusted bytes and leave as estimates:
//!
//! ```text
//! bytes -> ingest (framing, size limits) -> validation (policy, task) -> clip -> aggregate -> estimate
//! ```
//!
//! | module | what it does |
//! |---|---|
//! | [`ingest`] | the byte-level reader: JSON lines or binary frames, one rejection per bad record |
//! | `validation` | [`ValidationPolicy`]: which reports a server accepts, with a reason for each refusal |
//! | [`clip`] | public clipping bounds per group and the honest bias they cost (`docs/MATH.md §10`) |
//! | [`robust`] | median of means over report buckets |
//! | [`aggregate`] | exactly mergeable sums: bit-identical under any sharding |
//! | [`periods`] | per-period estimates of longitudinal deployments, with each period's own n_t (`docs/MATH.md §12.5`) |
//! | [`escape`] | escaping of untrusted text before it reaches a terminal or a log |
//!
//! The device side is [`crate::device`]; both share the wire format in
//! [`crate::report`].

pub mod aggregate;
pub mod clip;
pub mod escape;
#[cfg(feature = "std")]
pub(crate) mod fast_json;
#[cfg(feature = "std")]
mod id_table;
#[cfg(feature = "std")]
pub mod ingest;
pub mod periods;
pub mod robust;
mod validation;

pub use validation::{Rejection, Task, ValidationPolicy, MAX_KDE_DIMENSION};
