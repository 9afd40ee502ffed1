//! A connection's bounded outbound buffer and the writer task that drains it.
//!
//! Senders encode into a shared buffer under a short lock. Inside a batching scope the frames
//! are held for the scope to write; otherwise a quiet connection writes straight from the
//! sender (no task hop), and a busy one leaves the buffer to the writer task, which yields once
//! before writing so one syscall carries many frames.
//!
//! No syscall runs under the lock. One party at a time owns the socket ([`Owner`]): a sender
//! takes the buffer, writes it with the lock released, and hands what is left, plus what others
//! appended meanwhile, to the writer task.

use std::io;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use tokio::time::Instant;

use bytes::{Buf, BytesMut};
use lintel_wire::Frame;
use tokio::sync::Notify;
use tokio::task::JoinHandle;

use super::batch::{self, HeldWrite};
use super::socket::WriteSocket;

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

/// Who writes to the socket next; everyone else only appends to the buffer.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
enum Owner {
    /// Nobody: a sender may write directly.
    #[default]
    Free,
    /// A sender is writing with the lock released; it hands over to the writer task when
    /// bytes are left, and on a close.
    Sender,
    /// The writer task.
    Task,
}

#[derive(Debug, Default)]
struct State {
    /// Encoded frames not yet written.
    buf: BytesMut,
    /// Frames in `buf` or being written, against the queue bound.
    frames: usize,
    owner: Owner,
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

/// What is left to do, with the lock released, after a sender's write.
#[derive(Debug)]
struct AfterWrite {
    /// The writer task took over.
    wake_writer: bool,
    /// The queue was full and the write made room.
    freed_room: bool,
    /// A buffer a burst grew, to free outside the lock.
    release: Option<BytesMut>,
}

impl State {
    /// Ends a sender's write of `batch`, `taken` frames of which the socket took `written`
    /// bytes: the unwritten rest goes back in front of what others appended meanwhile, and the
    /// writer task takes over when any bytes are left or a close was asked for.
    fn sender_wrote(
        &mut self,
        mut batch: BytesMut,
        written: usize,
        taken: usize,
        queue_len: usize,
    ) -> AfterWrite {
        if written < batch.len() {
            // The count stays: the writer task resets it when it takes the buffer.
            batch.advance(written);
            batch.extend_from_slice(&self.buf);
            self.buf = batch;
            self.owner = Owner::Task;
            return AfterWrite {
                wake_writer: true,
                freed_room: false,
                release: None,
            };
        }
        let freed_room = self.frames >= queue_len;
        self.frames = self.frames.saturating_sub(taken);
        let release = if !self.buf.is_empty() || batch.capacity() > KEEP_BUFFER_BYTES {
            // Keep what others appended, or let go of a buffer a burst grew.
            Some(batch)
        } else {
            batch.clear();
            self.buf = batch;
            None
        };
        let hand_over = !self.buf.is_empty() || self.closing;
        self.owner = if hand_over { Owner::Task } else { Owner::Free };
        AfterWrite {
            wake_writer: hand_over,
            freed_room,
            release,
        }
    }
}

#[derive(Debug)]
struct Pipe {
    socket: WriteSocket,
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
        if state.owner != Owner::Free {
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
        state.owner = Owner::Task;
        drop(state);
        self.wake.notify_one();
        Ok(())
    }

    /// Writes the buffer from the calling task unless someone else owns the socket.
    ///
    /// The write runs with the lock released; what the socket does not take goes back in front
    /// of what others appended meanwhile, and the writer task takes over.
    fn write_buffer(&self, mut state: MutexGuard<'_, State>, now: Instant) {
        if state.owner != Owner::Free || state.buf.is_empty() {
            return;
        }
        state.owner = Owner::Sender;
        state.last_write = Some(now);
        let taken = state.frames;
        let batch = std::mem::take(&mut state.buf);
        drop(state);
        // Would block, or an error the writer task will meet and report: nothing was written.
        let written = self.socket.try_write(&batch).unwrap_or(0);
        let after = self
            .state()
            .sender_wrote(batch, written, taken, self.queue_len);
        if after.wake_writer {
            self.wake.notify_one();
        }
        if after.freed_room {
            self.changed.notify_waiters();
        }
        drop(after.release);
    }

    fn close(&self) {
        let mut state = self.state();
        state.closing = true;
        if state.owner == Owner::Sender {
            // The sender hands over to the writer task when its write ends.
            return;
        }
        state.owner = Owner::Task;
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

    /// Frames and bytes queued and not yet written.
    pub fn queued(&self) -> (usize, usize) {
        let state = self.pipe.state();
        (state.frames, state.buf.len())
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
    socket: WriteSocket,
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
    if let Err(err) = pipe.socket.shutdown().await {
        tracing::trace!(error = %err, "shutdown of the write side failed");
    }
    result
}

/// Writes whatever senders hand over until a close is flushed or a write fails.
async fn drain(pipe: &Pipe) -> io::Result<()> {
    loop {
        let active = pipe.state().owner == Owner::Task;
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
            match pipe.socket.write(&batch).await? {
                0 => return Err(io::ErrorKind::WriteZero.into()),
                written => batch.advance(written),
            }
        }
        pipe.changed.notify_waiters();
        let mut state = pipe.state();
        state.last_write = Some(Instant::now());
        if state.buf.is_empty() {
            if closing || state.closing {
                return Ok(());
            }
            state.owner = Owner::Free;
            if state.buf.capacity() > KEEP_BUFFER_BYTES {
                state.buf = BytesMut::new();
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use bytes::{Bytes, BytesMut};
    use futures_util::StreamExt;
    use lintel_wire::{DispatchRequest, Frame, FrameCodec, Push};
    use socket2::SockRef;
    use tokio::net::{TcpListener, TcpStream};
    use tokio_util::codec::FramedRead;

    use super::{Owner, State, KEEP_BUFFER_BYTES};
    use crate::transport::{split, Batched};

    /// A state while a sender writes: `appended` was queued meanwhile, `frames` counts both.
    fn writing(appended: &[u8], frames: usize) -> State {
        State {
            buf: BytesMut::from(appended),
            frames,
            owner: Owner::Sender,
            ..State::default()
        }
    }

    #[test]
    fn a_full_write_with_nothing_appended_frees_the_socket_and_keeps_the_buffer() {
        let mut state = writing(b"", 2);
        let after = state.sender_wrote(BytesMut::from(&b"abcdef"[..]), 6, 2, 4);
        assert_eq!((state.owner, state.frames), (Owner::Free, 0));
        assert!(state.buf.is_empty() && state.buf.capacity() >= 6);
        assert!(!after.wake_writer && !after.freed_room && after.release.is_none());
    }

    #[test]
    fn a_partial_write_puts_the_rest_in_front_of_what_was_appended() {
        let mut state = writing(b"xyz", 3);
        let after = state.sender_wrote(BytesMut::from(&b"abcdef"[..]), 4, 2, 4);
        assert_eq!(&state.buf[..], b"efxyz");
        assert_eq!((state.owner, state.frames), (Owner::Task, 3));
        assert!(after.wake_writer && !after.freed_room);
    }

    #[test]
    fn a_full_write_hands_what_was_appended_to_the_writer_task_and_frees_room() {
        let mut state = writing(b"xyz", 5);
        let after = state.sender_wrote(BytesMut::from(&b"abcdef"[..]), 6, 4, 4);
        assert_eq!(&state.buf[..], b"xyz");
        assert_eq!((state.owner, state.frames), (Owner::Task, 1));
        assert!(after.wake_writer && after.freed_room);
    }

    #[test]
    fn a_close_asked_for_during_a_write_goes_to_the_writer_task() {
        let mut state = writing(b"", 1);
        state.closing = true;
        let after = state.sender_wrote(BytesMut::from(&b"ab"[..]), 2, 1, 4);
        assert_eq!(state.owner, Owner::Task);
        assert!(after.wake_writer);
    }

    #[test]
    fn a_buffer_a_burst_grew_is_let_go_after_a_full_write() {
        let mut state = writing(b"", 1);
        let mut batch = BytesMut::with_capacity(KEEP_BUFFER_BYTES + 1);
        batch.extend_from_slice(b"ab");
        let after = state.sender_wrote(batch, 2, 1, 4);
        assert_eq!(state.buf.capacity(), 0);
        assert!(after.release.is_some());
    }

    /// A push of `len` input bytes whose correlation names its sender and sequence number.
    fn push(sender: u64, seq: u64, len: usize) -> Frame {
        Frame::Push(Push {
            correlation: (sender << 32) | seq,
            request: DispatchRequest {
                namespace: "ns".into(),
                task_queue: String::new(),
                activity_type: "act".into(),
                node: None,
                workflow_id: "wf".into(),
                ordinal: seq,
                run_id: None,
                attempt: 1,
                input: Bytes::from(vec![7; len]),
                deadline_unix_ms: None,
            },
        })
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn concurrent_senders_keep_their_order_through_partial_writes_and_a_close_flushes_all() {
        const SENDERS: u64 = 6;
        const EACH: u64 = 200;
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let (peer, accepted) = tokio::join!(TcpStream::connect(addr), listener.accept());
        let accepted = accepted.unwrap().0;
        // A small send buffer makes writes partial and would-block often.
        SockRef::from(&accepted).set_send_buffer_size(4096).unwrap();
        let (_reader, outbound, writer) = split(accepted, 1 << 20, 32);

        let mut senders = Vec::new();
        for sender in 0..SENDERS {
            let outbound = outbound.clone();
            senders.push(tokio::spawn(async move {
                for seq in 0..EACH {
                    let len = if seq % 16 == 0 { 50_000 } else { 24 };
                    let frame = push(sender, seq, len);
                    let sent = if sender % 2 == 0 {
                        outbound.send(frame).await
                    } else {
                        Batched::new(outbound.send(frame)).await
                    };
                    sent.unwrap();
                    if seq % 8 == 0 {
                        tokio::task::yield_now().await;
                    }
                }
            }));
        }
        drop(outbound);

        let read_all = async {
            let mut next = vec![0u64; SENDERS as usize];
            let mut frames = FramedRead::new(peer.unwrap(), FrameCodec::new(1 << 20));
            while let Some(frame) = frames.next().await {
                let Frame::Push(push) = frame.unwrap() else {
                    panic!("only pushes were sent");
                };
                let (sender, seq) = (push.correlation >> 32, push.correlation & 0xffff_ffff);
                assert_eq!(seq, next[sender as usize], "sender {sender} out of order");
                next[sender as usize] += 1;
            }
            next
        };
        let received = tokio::time::timeout(Duration::from_secs(30), read_all)
            .await
            .expect("the close never reached the peer");
        assert_eq!(received, vec![EACH; SENDERS as usize]);
        for sender in senders {
            sender.await.unwrap();
        }
        writer.await.unwrap().unwrap();
    }
}
