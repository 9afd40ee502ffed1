//! The dispatcher: select a worker, push, await the correlated reply, end in one outcome.

mod options;

pub use options::{DispatchOptions, DEFAULT_REPLY_TIMEOUT};
