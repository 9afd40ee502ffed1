//! A connection's bounded outbound buffer and the writer task that drains it.
//!
//! Senders encode into a shared buffer under a short lock. Inside a batching scope the frames
//! are held for the scope to write; otherwise a quiet connection writes straight from the
//! sender (no task hop), and a busy one leaves the buffer to the writer task, which yields once
//! before writing so one syscall carries many frames.

use std::io;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use bytes::{Buf, BytesMut};
use lintel_wire::Frame;
use socket2::SockRef;
use tokio::net::tcp::OwnedWriteHalf;
use tokio::sync::Notify;
use tokio::task::JoinHandle;

use super::batch::{self, HeldWrite};

/// A buffer larger than this is released after it drains, so an idle connection stays small.
const KEEP_BUFFER_BYTES: usize = 64 * 1024;

/// A frame following the previous write this closely is part of a burst: it is left to the
/// writer task to batch instead of costing a syscall of its own.
const BURST_GAP: Duration = Duration::from_micros(5);

/// A held buffer this large is written at once instead of waiting for its scope to end.
const HOLD_BYTES: usize = 64 * 1024;

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

#[derive(Debug, Default)]
struct State {
    /// Encoded frames not yet written.
    buf: BytesMut,
    /// Frames in `buf`, against the queue bound.
    frames: usize,
    /// The writer task owns the next write: senders only append.
    writer_active: bool,
    /// A batching scope holds this buffer and writes it when its poll ends.
    held: bool,
    /// The last batch grew while the writer yielded: keep batching instead of writing directly.
    busy: bool,
    /// When bytes last went to the socket.
    last_write: Option<Instant>,
    /// A close was asked for: flush, then shut the write side.
    closing: bool,
    /// The writer has stopped.
    stopped: bool,
}

impl State {
    /// Everything buffered went out: count nothing, and let go of a buffer a burst grew.
    fn drained(&mut self) {
        self.frames = 0;
        if self.buf.capacity() > KEEP_BUFFER_BYTES {
            self.buf = BytesMut::new();
        } else {
            self.buf.clear();
        }
    }
}

#[derive(Debug)]
struct Pipe {
    socket: OwnedWriteHalf,
    state: Mutex<State>,
    /// Wakes the writer task.
    wake: Notify,
    /// Wakes senders waiting for room, and waiters for the writer to stop.
    changed: Notify,
    /// Live [`Outbound`] handles; the last one to go closes the connection.
    handles: AtomicUsize,
    max_frame_len: usize,
    queue_len: usize,
}

impl Pipe {
    fn state(&self) -> MutexGuard<'_, State> {
        // Every update leaves the state consistent before it could panic.
        self.state
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Encodes `frame` into the buffer; `bounded` refuses it when the queue is full.
    fn enqueue(self: &Arc<Self>, frame: &Frame, bounded: bool) -> Result<(), SendError> {
        let mut state = self.state();
        if state.closing || state.stopped {
            return Err(SendError::Closed);
        }
        if bounded && state.frames >= self.queue_len {
            return Err(SendError::Full);
        }
        let was_empty = state.buf.is_empty();
        if let Err(err) = lintel_wire::encode_frame(frame, &mut state.buf, self.max_frame_len) {
            // Senders bound what they queue; a frame that still cannot be encoded is skipped.
            tracing::warn!(error = %err, "dropping a frame that cannot be encoded");
            return Ok(());
        }
        state.frames += 1;
        if state.writer_active {
            return Ok(());
        }
        if state.held {
            if state.buf.len() >= HOLD_BYTES || state.frames >= self.queue_len / 2 {
                self.write_buffer(state, Instant::now());
            }
            return Ok(());
        }
        if batch::hold(self) {
            state.held = true;
            return Ok(());
        }
        let now = Instant::now();
        let quiet = state
            .last_write
            .is_none_or(|last| now.saturating_duration_since(last) >= BURST_GAP);
        if was_empty && !state.busy && quiet {
            self.write_buffer(state, now);
            return Ok(());
        }
        state.writer_active = true;
        drop(state);
        self.wake.notify_one();
        Ok(())
    }

    /// Writes the buffer from the calling task unless the writer owns it.
    fn write_buffer(&self, mut state: MutexGuard<'_, State>, now: Instant) {
        if state.writer_active || state.buf.is_empty() {
            return;
        }
        state.last_write = Some(now);
        match self.socket.try_write(&state.buf) {
            Ok(written) if written == state.buf.len() => {
                let was_full = state.frames >= self.queue_len;
                state.drained();
                drop(state);
                if was_full {
                    self.changed.notify_waiters();
                }
                return;
            }
            Ok(written) => state.buf.advance(written),
            // Would block, or an error the writer will meet and report.
            Err(_) => {}
        }
        state.writer_active = true;
        drop(state);
        self.wake.notify_one();
    }

    fn close(&self) {
        let mut state = self.state();
        state.closing = true;
        state.writer_active = true;
        drop(state);
        self.wake.notify_one();
    }
}

impl HeldWrite for Pipe {
    /// Writes what a batching scope held; what the socket does not take goes to the writer.
    fn write_held(&self) {
        let mut state = self.state();
        if std::mem::take(&mut state.held) {
            self.write_buffer(state, Instant::now());
        }
    }
}

/// A cloneable handle that queues frames for one connection.
#[derive(Debug)]
pub struct Outbound {
    pipe: Arc<Pipe>,
}

impl Clone for Outbound {
    fn clone(&self) -> Self {
        self.pipe.handles.fetch_add(1, Ordering::Relaxed);
        Self {
            pipe: Arc::clone(&self.pipe),
        }
    }
}

impl Drop for Outbound {
    fn drop(&mut self) {
        if self.pipe.handles.fetch_sub(1, Ordering::AcqRel) == 1 {
            self.pipe.close();
        }
    }
}

impl Outbound {
    /// Queues `frame` without waiting.
    ///
    /// # Errors
    /// [`SendError::Full`] when the queue is full, [`SendError::Closed`] when the writer stopped.
    pub fn try_send(&self, frame: Frame) -> Result<(), SendError> {
        self.pipe.enqueue(&frame, true)
    }

    /// As [`Outbound::try_send`], leaving `frame` with the caller, who may still need it.
    ///
    /// # Errors
    /// As [`Outbound::try_send`].
    pub fn try_send_ref(&self, frame: &Frame) -> Result<(), SendError> {
        self.pipe.enqueue(frame, true)
    }

    /// Queues `frame` even when the queue is full: for answers the peer is owed. The caller
    /// bounds them by reading no more requests while [`Outbound::has_room`] is false.
    ///
    /// # Errors
    /// [`SendError::Closed`] when the writer stopped.
    pub fn send_owed(&self, frame: Frame) -> Result<(), SendError> {
        self.pipe.enqueue(&frame, false)
    }

    /// Queues `frame`, waiting for room.
    ///
    /// # Errors
    /// [`SendError::Closed`] when the writer stopped.
    pub async fn send(&self, frame: Frame) -> Result<(), SendError> {
        // Room is the common case: only a full queue pays for registering a wake-up.
        match self.pipe.enqueue(&frame, true) {
            Err(SendError::Full) => {}
            other => return other,
        }
        loop {
            let changed = self.pipe.changed.notified();
            tokio::pin!(changed);
            changed.as_mut().enable();
            match self.pipe.enqueue(&frame, true) {
                Err(SendError::Full) => changed.await,
                other => return other,
            }
        }
    }

    /// True while the queue is below its bound, or once the connection is closing (waiting
    /// for room would then be waiting for nothing).
    pub fn has_room(&self) -> bool {
        let state = self.pipe.state();
        state.frames < self.pipe.queue_len || state.closing || state.stopped
    }

    /// Resolves once [`Outbound::has_room`] is true.
    pub async fn room(&self) {
        self.wait_until(Self::has_room).await;
    }

    /// Queues `frame` and then a close: both go out in order, then the write side shuts.
    pub async fn close_with(&self, frame: Frame) {
        if self.send(frame).await.is_ok() {
            self.close();
        }
    }

    /// Asks the writer to flush what is queued and shut its side of the socket.
    pub fn close(&self) {
        self.pipe.close();
    }

    /// True once the writer has stopped.
    pub fn is_closed(&self) -> bool {
        self.pipe.state().stopped
    }

    /// Resolves when the writer has stopped.
    pub async fn closed(&self) {
        self.wait_until(Self::is_closed).await;
    }

    /// Resolves once `ready` holds, checking again each time the queue drains or the writer
    /// stops; the wake-up is registered before the check, so none is missed.
    async fn wait_until(&self, ready: fn(&Self) -> bool) {
        loop {
            let changed = self.pipe.changed.notified();
            tokio::pin!(changed);
            changed.as_mut().enable();
            if ready(self) {
                return;
            }
            changed.await;
        }
    }
}

/// Starts the writer task for `socket`, with room for `queue_len` frames.
///
/// The writer stops when asked to close, when every [`Outbound`] is dropped, or on a write error.
pub(super) fn start(
    socket: OwnedWriteHalf,
    max_frame_len: usize,
    queue_len: usize,
) -> (Outbound, JoinHandle<io::Result<()>>) {
    let pipe = Arc::new(Pipe {
        socket,
        state: Mutex::new(State::default()),
        wake: Notify::new(),
        changed: Notify::new(),
        handles: AtomicUsize::new(1),
        max_frame_len,
        queue_len: queue_len.max(1),
    });
    let writer = tokio::spawn(write_loop(Arc::clone(&pipe)));
    (Outbound { pipe }, writer)
}

async fn write_loop(pipe: Arc<Pipe>) -> io::Result<()> {
    let result = drain(&pipe).await;
    {
        let mut state = pipe.state();
        state.stopped = true;
        state.buf = BytesMut::new();
        state.frames = 0;
    }
    pipe.changed.notify_waiters();
    if let Err(err) = SockRef::from(pipe.socket.as_ref()).shutdown(std::net::Shutdown::Write) {
        tracing::trace!(error = %err, "shutdown of the write side failed");
    }
    result
}

/// Writes whatever senders hand over until a close is flushed or a write fails.
async fn drain(pipe: &Pipe) -> io::Result<()> {
    loop {
        let active = pipe.state().writer_active;
        if !active {
            pipe.wake.notified().await;
            continue;
        }
        // Woken writers run before the tasks that would add to the batch; yielding once
        // lets them queue first, and tells a busy connection from a quiet one.
        let before = pipe.state().frames;
        tokio::task::yield_now().await;
        let (mut batch, closing) = {
            let mut state = pipe.state();
            state.busy = state.frames > before;
            state.frames = 0;
            let batch = state.buf.split();
            (batch, state.closing)
        };
        while !batch.is_empty() {
            pipe.socket.writable().await?;
            match pipe.socket.try_write(&batch) {
                Ok(0) => return Err(io::ErrorKind::WriteZero.into()),
                Ok(written) => batch.advance(written),
                Err(err) if err.kind() == io::ErrorKind::WouldBlock => {}
                Err(err) => return Err(err),
            }
        }
        pipe.changed.notify_waiters();
        let mut state = pipe.state();
        state.last_write = Some(Instant::now());
        if state.buf.is_empty() {
            if closing || state.closing {
                return Ok(());
            }
            state.writer_active = false;
            if state.buf.capacity() > KEEP_BUFFER_BYTES {
                state.buf = BytesMut::new();
            }
        }
    }
}
