//! Dispatch: admit a request, select a worker, push on its link, end in exactly one outcome.
//!
//! - `admission`: the bounds every request is checked against; `options`: a dispatch's
//!   routing and waits, borrowed;
//! - `dispatcher`: the one path every source's dispatches take, waiting included;
//! - `flight`: one dispatch in progress and the one finish that counts and answers it;
//! - `relayed`: a dispatch relayed to a peer, placed again when the peer ran nothing;
//! - `caller`: where an outcome goes, the only thing that differs between sources;
//! - `counters`, `activity`: totals and the count of dispatches without an outcome;
//!   [`latency`] (re-exported): the latency histogram, readable bucket by bucket;
//! - [`outcome`]: outcome classes for people and exit codes.

mod activity;
mod admission;
mod caller;
mod counters;
mod dispatcher;
mod flight;
mod options;
pub mod outcome;
mod relayed;

pub use crate::latency;
pub use admission::{DispatchLimits, FRAME_OVERHEAD, MAX_TIMEOUT};
pub(crate) use caller::{Caller, Sink, Tag};
pub use counters::DispatchCounters;
pub(crate) use dispatcher::Started;
pub use dispatcher::{Dispatcher, Placement};
pub(crate) use flight::Flight;
pub use flight::PROGRESS_PER_SECOND;
pub use lintel_client::{DispatchOptions, DEFAULT_REPLY_TIMEOUT};
pub(crate) use options::{asked, Options};
