//! The connected-worker registry: pools, selection with capacity reservation, FIFO waiters,
//! census, departures.
//!
//! - `admission`: the checks every registration passes, in one place.
//! - `pools`: the [`Registry`] itself: one mutex-guarded state, selection, waiters served in
//!   arrival order, the census.
//! - `selection`: node tiers, eligibility and the census count; `waiters`: the FIFO queues;
//!   `departures`: when compatible workers last left; `worker`: one worker's record, its
//!   exclusions and state.

mod admission;
mod departures;
mod pools;
mod selection;
mod waiters;
mod worker;

pub use admission::{
    normalize_node, normalize_task_queue, validate, validate_capacity, AdmissionLimits,
    Registration, DEFAULT_TASK_QUEUE,
};
pub use pools::{Address, RegistrationGuard, Registry, Reservation, Wait};
pub(crate) use selection::{Bucketed, NodeFilter, Tally, Tiers};
pub use worker::{Exclusion, WorkerId};
