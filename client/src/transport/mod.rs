//! A framed TCP connection: a frame reader, plus a bounded outbound buffer drained by a writer
//! task, plus a batching scope that turns many queued frames into one write.
//!
//! Node connections and both SDKs use it, so batching, close-after-frame and back-pressure
//! behave the same on every side.

mod batch;
mod outbound;
mod reader;

use tokio::net::TcpStream;
use tokio::task::JoinHandle;

pub use batch::Batched;
pub use outbound::{Outbound, SendError};
pub use reader::FrameReader;

/// Splits `stream` into a frame reader and a writer task with room for `queue_len` frames.
///
/// The writer stops when asked to close, when every [`Outbound`] is dropped, or on a write error.
pub fn split(
    stream: TcpStream,
    max_frame_len: usize,
    queue_len: usize,
) -> (FrameReader, Outbound, JoinHandle<std::io::Result<()>>) {
    let (read, write) = stream.into_split();
    let (outbound, writer) = outbound::start(write, max_frame_len, queue_len);
    (FrameReader::new(read, max_frame_len), outbound, writer)
}
