//! Dispatch: select a worker, push on its link, await the correlated reply, end in one outcome.

mod activity;
mod counters;
mod dispatcher;
mod flights;
mod link;
pub mod outcome;

pub use counters::DispatchCounters;
pub use dispatcher::{DispatchLimits, Dispatcher};
pub(crate) use flights::Flights;
pub use link::{LinkClosed, PendingReply, PushError, WorkerLink};
pub use lintel_client::{DispatchOptions, DEFAULT_REPLY_TIMEOUT};
