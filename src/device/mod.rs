//! What runs on the phone: the metered release and the privacy ledger.
//!
//! Every release a device makes goes through a [`budget::Ledger`] that is
//! charged before the value is returned (`docs/MATH.md §8.3`):
//!
//! | module | what it does |
//! |---|---|
//! | [`budget`] | the ledger: units, the pinned policy, sequential composition, the write-ahead file |
//! | [`release`] | the metered release paths (`Report::release`, `Mechanism::privatize`) |
//! | [`schedule`] | data-independent report schedules and their planner (`docs/MATH.md §12.2`) |
//! | [`outbox`] | uploading a ledger's outbox to a collector: batches, retries, acknowledgements |
//! | [`memo`] | memoized releases keyed by a device secret, the instantaneous layer (`docs/MATH.md §12.3`) |
//!
//! The server side is [`crate::server`]; both share the wire format in
//! [`crate::report`].

pub mod budget;
pub mod memo;
pub mod outbox;
pub mod release;
pub mod schedule;
