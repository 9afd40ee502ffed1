//! A framed TCP connection split into a frame reader and a writer task fed by a bounded queue.
//!
//! Node connections and both SDKs use it, so batching, close-after-frame and back-pressure
//! behave the same on every side.

use bytes::BytesMut;
use lintel_wire::{Frame, FrameCodec};
use tokio::io::AsyncWriteExt;
use tokio::net::tcp::{OwnedReadHalf, OwnedWriteHalf};
use tokio::net::TcpStream;
use tokio::sync::mpsc;
use tokio::task::JoinHandle;
use tokio_util::codec::FramedRead;

/// Frames read from the socket.
pub type FrameReader = FramedRead<OwnedReadHalf, FrameCodec>;

/// Bytes the writer gathers before one `write_all`.
const WRITE_BATCH_BYTES: usize = 64 * 1024;

/// What the writer task is asked to do.
#[derive(Debug)]
enum Command {
    /// Boxed so an idle queue's slots stay small.
    Send(Box<Frame>),
    /// Write everything queued so far, then shut the socket's write side.
    Close,
}

/// Why a frame could not be queued.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum SendError {
    /// The queue is full; the connection is alive but not keeping up.
    #[error("outbound queue is full")]
    Full,
    /// The writer has stopped; the connection is closed or closing.
    #[error("connection is closed")]
    Closed,
}

/// A cloneable handle that queues frames for one connection's writer task.
#[derive(Debug, Clone)]
pub struct Outbound {
    tx: mpsc::Sender<Command>,
}

impl Outbound {
    /// Queues `frame` without waiting.
    ///
    /// # Errors
    /// [`SendError::Full`] when the queue is full, [`SendError::Closed`] when the writer stopped.
    pub fn try_send(&self, frame: Frame) -> Result<(), SendError> {
        self.tx
            .try_send(Command::Send(Box::new(frame)))
            .map_err(|err| match err {
                mpsc::error::TrySendError::Full(_) => SendError::Full,
                mpsc::error::TrySendError::Closed(_) => SendError::Closed,
            })
    }

    /// Queues `frame`, waiting for room.
    ///
    /// # Errors
    /// [`SendError::Closed`] when the writer stopped.
    pub async fn send(&self, frame: Frame) -> Result<(), SendError> {
        self.tx
            .send(Command::Send(Box::new(frame)))
            .await
            .map_err(|_| SendError::Closed)
    }

    /// Queues `frame` and then a close: the writer sends both, in order, then shuts its side.
    pub async fn close_with(&self, frame: Frame) {
        if self.tx.send(Command::Send(Box::new(frame))).await.is_ok() {
            self.close().await;
        }
    }

    /// Asks the writer to flush what is queued and shut its side of the socket.
    pub async fn close(&self) {
        let _ = self.tx.send(Command::Close).await;
    }

    /// True once the writer has stopped.
    pub fn is_closed(&self) -> bool {
        self.tx.is_closed()
    }

    /// Resolves when the writer has stopped.
    pub async fn closed(&self) {
        self.tx.closed().await;
    }
}

/// Splits `stream` into a frame reader and a writer task with a queue of `queue_len` frames.
///
/// The writer stops when asked to close, when every [`Outbound`] is dropped, or on a write error.
pub fn split(
    stream: TcpStream,
    max_frame_len: usize,
    queue_len: usize,
) -> (FrameReader, Outbound, JoinHandle<std::io::Result<()>>) {
    let (read, write) = stream.into_split();
    let (tx, rx) = mpsc::channel(queue_len.max(1));
    let codec = FrameCodec::new(max_frame_len);
    let reader = FramedRead::with_capacity(read, codec, 512);
    let writer = tokio::spawn(write_loop(write, rx, max_frame_len));
    (reader, Outbound { tx }, writer)
}

async fn write_loop(
    mut socket: OwnedWriteHalf,
    mut rx: mpsc::Receiver<Command>,
    max_frame_len: usize,
) -> std::io::Result<()> {
    let mut buf = BytesMut::new();
    let result = async {
        let mut coalesce = Coalesce::default();
        while let Some(command) = rx.recv().await {
            let mut close = encode(command, &mut buf, max_frame_len);
            close = gather(&mut rx, &mut buf, max_frame_len, close).0;
            if !close && buf.len() < WRITE_BATCH_BYTES && coalesce.should_yield() {
                // A woken writer runs before the tasks that would add to its batch; yielding
                // once lets them queue first, so one write carries many frames.
                tokio::task::yield_now().await;
                let (closed, added) = gather(&mut rx, &mut buf, max_frame_len, close);
                close = closed;
                coalesce.yielded(added);
            }
            socket.write_all(&buf).await?;
            buf.clear();
            if buf.capacity() > WRITE_BATCH_BYTES {
                buf = BytesMut::new();
            }
            if close {
                break;
            }
        }
        Ok(())
    }
    .await;
    rx.close();
    let _ = socket.shutdown().await;
    result
}

/// Whether the writer yields before writing: only while yielding gathers more frames, with
/// a periodic probe, so a quiet connection writes at once and a busy one batches.
#[derive(Debug, Default)]
struct Coalesce {
    quiet: bool,
    writes: u32,
}

impl Coalesce {
    /// Writes between probes of a quiet connection.
    const PROBE_EVERY: u32 = 16;

    fn should_yield(&mut self) -> bool {
        self.writes = self.writes.wrapping_add(1);
        !self.quiet || self.writes % Self::PROBE_EVERY == 0
    }

    fn yielded(&mut self, added: usize) {
        self.quiet = added == 0;
    }
}

/// Encodes whatever is queued now into `buf`, up to a batch; returns whether a close was
/// seen and how many commands were taken.
fn gather(
    rx: &mut mpsc::Receiver<Command>,
    buf: &mut BytesMut,
    max_frame_len: usize,
    mut close: bool,
) -> (bool, usize) {
    let mut taken = 0;
    while !close && buf.len() < WRITE_BATCH_BYTES {
        match rx.try_recv() {
            Ok(command) => {
                close = encode(command, buf, max_frame_len);
                taken += 1;
            }
            Err(_) => break,
        }
    }
    (close, taken)
}

/// Encodes a send into `buf`; returns whether the command was a close.
///
/// Senders check sizes before queueing, so an unencodable frame here is logged and skipped.
fn encode(command: Command, buf: &mut BytesMut, max_frame_len: usize) -> bool {
    match command {
        Command::Send(frame) => {
            if let Err(err) = lintel_wire::encode_frame(&frame, buf, max_frame_len) {
                tracing::warn!(error = %err, "dropping a frame that cannot be encoded");
            }
            false
        }
        Command::Close => true,
    }
}
