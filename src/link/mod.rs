//! Links: the push path to whoever runs a dispatch, and the one place each push's fate is
//! decided. A worker link pushes to a worker connection; a peer link relays to another node.
//!
//! Both are a [`Link`]: an outbound queue plus one table of what was sent without an answer,
//! where whichever of the answer, the dispatch's own end (deadline, cancel) and the link's
//! close takes an entry first wins. A [`Kind`] is what one sort of link adds. A [`RemoteSlot`] is
//! a relay charged against a peer's announced capacity until the relay ends.

mod charge;
mod fate;
#[cfg(test)]
pub(crate) mod fixtures;
mod pair;
mod peer;
mod table;
mod worker;

pub use charge::{Charge, RemoteSlot};
pub use fate::{End, PushError, ReplyFate};
pub use pair::{CountedLink, Pair, Retention};
pub use peer::{PeerLink, RelayEntry, ToPeer};
pub use table::{Entry, Kind, Link, Rebound, Release, Unanswered};
pub use worker::{PushEntry, ToWorker, WorkerLink};
