//! `lintel-transport`: lintel's framed connections, the same for the node and both SDKs.
//!
//! A frame reader, plus a bounded outbound buffer drained by a writer task, plus a batching
//! scope that turns many queued frames into one write, so batching, close-after-frame and
//! back-pressure behave the same on every side. The bytes run over TCP, or over any pair of
//! async halves ([`Socket::from_io`]) dialled through a [`Dialer`], at every address a name
//! resolves to ([`resolve`]).
//!
//! # Layout
//! - [`split`]: a socket into a [`FrameReader`] and an [`Outbound`] with its writer task; the
//!   outbound's control and bulk lanes ([`QueueLimits`], [`Pressure`]), [`Batched`] writes.
//! - [`keepalive`]: pings, their answers and the miss limit; [`burst`]: the frames one turn of
//!   a connection's loop handles.
//! - [`Dialer`] and [`TcpDialer`]; [`resolve`]: a name to every address it resolves to, again
//!   and again, for the node's peers and the SDKs' node addresses.
#![deny(unreachable_pub, rustdoc::broken_intra_doc_links)]
#![warn(missing_docs)]

mod batch;
pub mod burst;
mod dial;
#[cfg(any(test, feature = "fixtures"))]
#[doc(hidden)]
pub mod fixtures;
pub mod keepalive;
mod lanes;
mod outbound;
mod reader;
pub mod resolve;
mod socket;

use tokio::task::JoinHandle;

pub use batch::{turn, Batched};
pub use dial::{Dialer, Dialing, TcpDialer};
pub use lanes::{Pressure, QueueLimits, DEFAULT_QUEUE_BYTES};
pub use outbound::{Outbound, SendError, WriteMark};
pub use reader::{is_frame_timeout, Found, FrameReader, FrameReady};
pub use socket::{BoxRead, BoxWrite, ReadSocket, Socket};

/// Splits `stream` into a frame reader and a writer task with room for `queue_len` frames.
///
/// The writer stops when asked to close, when every [`Outbound`] is dropped, or on a write error.
pub fn split(
    stream: impl Into<Socket>,
    max_frame_len: usize,
    queue_len: usize,
) -> (FrameReader, Outbound, JoinHandle<std::io::Result<()>>) {
    let (read, write) = stream.into().into_halves();
    let (outbound, writer) = outbound::start(write, max_frame_len, queue_len);
    (FrameReader::new(read, max_frame_len), outbound, writer)
}
