//! Links: the push path to whoever runs a dispatch, and the one place each push's fate is
//! decided. A worker link pushes to a worker connection; a peer link relays to another node.
//!
//! Both keep a table of what they sent without an answer, under a short mutex never held
//! across an `.await`: whichever of the answer, the dispatch's own end (deadline, cancel) and
//! the link's close takes an entry first wins.

mod fate;
mod peer;
mod worker;

pub use fate::{End, PushError, ReplyFate};
pub use peer::{PeerLink, RelayEntry};
pub use worker::{PushEntry, Release, WorkerLink};
