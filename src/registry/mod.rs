//! The connected-worker registry: pools, selection with capacity reservation, waiters served
//! by priority and fairness key, census, departures.
//!
//! - `admission`: the checks every registration passes, in one place.
//! - `pools`: the [`Registry`] itself: one mutex-guarded state, selection, waiters served as
//!   `waiters` orders them, the census.
//! - `selection`: node tiers, eligibility and the census count; `waiters`: the queues and the
//!   order a freed slot serves them in; `fairness`: priorities, keys, weights and caps;
//!   `departures`: when compatible workers last left; `worker`: one worker's record, its
//!   exclusions and state; `presence`: a pool as a peer sees it, groups capped by merging.

mod admission;
mod departures;
pub mod fairness;
mod pools;
mod presence;
mod selection;
mod waiters;
mod worker;

pub use admission::{
    normalize_node, normalize_task_queue, validate, validate_capacity, AdmissionLimits,
    Registration, DEFAULT_TASK_QUEUE,
};
pub use fairness::{Fairness, FairnessPolicy, FairnessRef};
pub(crate) use pools::Elsewhere;
pub use pools::{Placed, RegistrationGuard, Registry, Reservation, Wait};
pub use selection::Address;
pub(crate) use selection::{Bucketed, CensusCount, NodeFilter, Tiers};
pub use worker::{Exclusion, WorkerId};
