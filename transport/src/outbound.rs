//! A connection's bounded outbound queue and the writer task that drains it.
//!
//! Frames wait in one of two lanes ([`super::lanes`]), as the frame table puts their kind
//! ([`FrameKind::lane`]). Bulk frames (pushes and relays, of every version) carry work and its
//! inputs: they are optional, since a full queue refuses them and the caller
//! places the work elsewhere. Everything else is control (pings, pongs, cancels, outcomes,
//! presence, handshakes and closes): small or owed, it keeps the connection alive and
//! answers what the peer already sent. Control frames are written before queued bulk frames
//! at the next frame boundary, never inside a partly written frame, and in their own order.
//!
//! The queue is bounded in frames and in bytes. A bounded send is refused while either bound
//! is reached; an owed send ([`Outbound::send_owed`]) is taken past them up to a ceiling,
//! beyond which it is refused as [`SendError::Overflow`] and the connection must close.
//!
//! Senders encode into the lanes under a short lock. Inside a batching scope the frames are
//! held for the scope to write; otherwise a quiet connection writes straight from the sender
//! (no task hop, one syscall), and a busy one leaves the lanes to the writer task, which
//! yields once before writing so one syscall carries many frames. No syscall runs under the
//! lock: one party at a time owns the socket ([`Phase`]).

use std::io::{self, IoSlice};
use std::sync::atomic::{AtomicU16, AtomicU32, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use tokio::time::Instant;

use lintel_wire::{
    Dialect, EncodeError, FeatureSet, Frame, FrameKind, FrameRef, Lane, PROTOCOL_VERSION,
};
use tokio::sync::Notify;
use tokio::task::JoinHandle;

use super::batch::{self, HeldWrite};
use super::lanes::{Phase, Piece, Pressure, Queue, QueueLimits, State};
use super::socket::WriteSocket;

/// A frame following the previous write this closely is part of a burst: it is left to the
/// writer task to batch instead of costing a syscall of its own.
const BURST_GAP: Duration = Duration::from_micros(5);

/// Most slices handed to one vectored write; what is left goes in the next.
const MAX_SLICES: usize = 64;

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
    /// The frame does not fit in one frame of the connection's limit; nothing was queued.
    #[error("{kind} frame of {len} bytes exceeds the frame limit of {max} bytes")]
    TooLarge {
        /// The frame's kind.
        kind: FrameKind,
        /// Its body, in bytes.
        len: usize,
        /// The connection's limit.
        max: usize,
    },
    /// The frame cannot be encoded at all; nothing was queued.
    #[error("{kind} frame cannot be encoded")]
    Unencodable {
        /// The frame's kind.
        kind: FrameKind,
    },
    /// The connection's version cannot carry the frame: `field` has no room in `kind` (or the
    /// kind itself is of a later version, `field` then `None`); nothing was queued.
    #[error("a {kind} frame of version {version} cannot carry it ({})", field.unwrap_or("the kind"))]
    Unsupported {
        /// The frame's kind.
        kind: FrameKind,
        /// The field without room, or `None` for the kind itself.
        field: Option<&'static str>,
        /// The connection's version.
        version: u16,
    },
    /// An owed frame would take the queue past its ceiling; nothing was queued, and the
    /// connection should close as a slow consumer.
    #[error("outbound queue is over its ceiling")]
    Overflow,
}

impl From<EncodeError> for SendError {
    fn from(err: EncodeError) -> Self {
        match err {
            EncodeError::Oversize { kind, len, max } => SendError::TooLarge { kind, len, max },
            EncodeError::Serialize { kind, .. } => SendError::Unencodable { kind },
            EncodeError::Unsupported {
                kind,
                field,
                version,
            } => SendError::Unsupported {
                kind,
                field: Some(field),
                version,
            },
            EncodeError::KindTooNew { kind, version } => SendError::Unsupported {
                kind,
                field: None,
                version,
            },
            EncodeError::NotListed { kind, feature } => SendError::Unsupported {
                kind,
                field: Some(feature),
                version: kind.version(),
            },
        }
    }
}

/// One connection's outbound queue and the socket it drains into, shared by every sender
/// and the writer task.
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
    /// Largest frame body sent; lowered to the peer's once the handshake names it.
    max_frame_len: AtomicUsize,
    /// The protocol version frames are written as: each message goes as the kind this version
    /// carries it as. Lowered to the negotiated one once the handshake names it.
    version: AtomicU16,
    /// What the reader listed ([`FeatureSet`] bits): from version 4 a result's variant and
    /// the kinds after version 3 are written as it reads them.
    listed: AtomicU32,
}

impl Pipe {
    /// What frames are written as: the version and what the reader listed.
    fn dialect(&self) -> Dialect {
        let listed = FeatureSet::from_bits(self.listed.load(Ordering::Relaxed));
        Dialect::new(self.version.load(Ordering::Relaxed), listed)
    }

    fn state(&self) -> MutexGuard<'_, State> {
        // Every update leaves the state consistent before it could panic.
        self.state
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Encodes `frame` into its lane; `bounded` refuses it when the queue is full, otherwise
    /// it is refused only past the owed ceiling.
    fn enqueue(self: &Arc<Self>, frame: &FrameRef<'_>, bounded: bool) -> Result<(), SendError> {
        self.enqueue_marked(frame, bounded).map(drop)
    }

    /// As [`Pipe::enqueue`], returning the frame's [`WriteMark`].
    fn enqueue_marked(
        self: &Arc<Self>,
        frame: &FrameRef<'_>,
        bounded: bool,
    ) -> Result<WriteMark, SendError> {
        let mut state = self.state();
        if !state.phase.is_open() {
            return Err(SendError::Closed);
        }
        if bounded && state.is_full() {
            return Err(SendError::Full);
        }
        if !bounded && state.bytes() >= state.limits.owed_ceiling {
            state.overflowed = true;
            drop(state);
            self.changed.notify_waiters();
            return Err(SendError::Overflow);
        }
        let was_empty = state.is_empty() && state.in_hand == 0;
        let dialect = self.dialect();
        let lane = frame.lane();
        let queue = match lane {
            Lane::Control => &mut state.control,
            Lane::Bulk => &mut state.bulk,
        };
        let before = queue.len();
        queue.push_frame(frame, dialect, self.max_frame_len.load(Ordering::Relaxed))?;
        let added = queue.len().saturating_sub(before) as u64;
        let mark = match lane {
            Lane::Control => {
                state.control_frames += 1;
                state.control_queued += added;
                WriteMark(Some(state.control_queued))
            }
            Lane::Bulk => {
                state.bulk_frames += 1;
                WriteMark(None)
            }
        };
        if state.full_since.is_none() && state.is_full() {
            state.full_since = Some(Instant::now());
        }
        match state.phase {
            Phase::Idle => {}
            Phase::Held => {
                if state.bytes() >= HOLD_BYTES || state.frames() >= state.limits.frames / 2 {
                    self.write_buffer(state, Instant::now());
                }
                return Ok(mark);
            }
            _ => return Ok(mark),
        }
        if batch::hold(self) {
            state.phase = Phase::Held;
            return Ok(mark);
        }
        let now = Instant::now();
        let quiet = state
            .last_write
            .is_none_or(|last| now.saturating_duration_since(last) >= BURST_GAP);
        if was_empty && !state.busy && quiet {
            self.write_buffer(state, now);
            return Ok(mark);
        }
        state.phase = Phase::Flushing;
        drop(state);
        self.wake.notify_one();
        Ok(mark)
    }

    /// Writes one lane from the calling task unless someone else owns the socket, or both
    /// lanes hold frames (the writer task then orders them); a held phase ends here.
    ///
    /// The write runs with the lock released; what the socket does not take goes back in
    /// front of its lane, and the writer task takes over.
    fn write_buffer(&self, mut state: MutexGuard<'_, State>, now: Instant) {
        if !matches!(state.phase, Phase::Idle | Phase::Held) || state.is_empty() {
            return;
        }
        let one_lane = state.resume.is_empty()
            && (state.control.is_empty() || state.bulk.is_empty())
            && state.control_left == 0;
        if !one_lane {
            state.phase = Phase::Flushing;
            drop(state);
            self.wake.notify_one();
            return;
        }
        let Some(mut piece) = state.take() else {
            return;
        };
        state.phase = Phase::Sending;
        state.last_write = Some(now);
        drop(state);
        // Would block, or an error the writer task will meet and report: nothing was written.
        let written = match piece.queue.contiguous(usize::MAX) {
            Some(bytes) => self.socket.try_write_vectored(&[IoSlice::new(bytes)]),
            None => {
                let mut slices = [IoSlice::new(&[]); MAX_SLICES];
                let filled = piece.queue.slices(usize::MAX, &mut slices);
                let slices = slices.get(..filled).unwrap_or_default();
                self.socket.try_write_vectored(slices)
            }
        };
        let written = written.unwrap_or(0);
        piece.advance(written);
        let mut state = self.state();
        // From the write's end: a syscall longer than the burst gap would make every frame of
        // a burst look quiet and cost a syscall of its own.
        let freed = state.wrote(written, Instant::now());
        state.give_back(piece);
        let drained = state.is_empty();
        let hand_over = state.phase.sent(drained);
        if !hand_over {
            state.shrink();
        }
        drop(state);
        if hand_over {
            self.wake.notify_one();
        }
        if freed {
            self.changed.notify_waiters();
        }
    }

    fn close(&self) {
        if self.state().phase.close(false) {
            self.wake.notify_one();
        }
    }

    /// Drops every frame not yet started, queues `frame` and closes.
    fn discard_and_close(&self, frame: &Frame) -> Result<(), SendError> {
        let mut state = self.state();
        if !state.phase.is_open() {
            return Err(SendError::Closed);
        }
        let mut control = Queue::default();
        let dialect = self.dialect();
        control.push_frame(
            &frame.into(),
            dialect,
            self.max_frame_len.load(Ordering::Relaxed),
        )?;
        // The rest of a started frame stays, or the peer could not tell where frames begin;
        // a control piece in hand is cut where its writer keeps its current frame.
        let control_in_hand = state.in_hand > 0 && !state.in_hand_bulk;
        if state.control_cut.is_none() && !control_in_hand {
            state.control_cut = Some(state.control_written + state.control_left as u64);
        }
        let resume_left = state.resume_left;
        state.resume.truncate(resume_left);
        let control_left = state.control_left;
        state.control.truncate(control_left);
        state.control.append(control);
        state.bulk = Queue::default();
        state.control_frames = 1;
        state.bulk_frames = 0;
        let wake = state.phase.close(true);
        drop(state);
        if wake {
            self.wake.notify_one();
        }
        self.changed.notify_waiters();
        Ok(())
    }
}

impl HeldWrite for Pipe {
    /// Writes what a batching scope held; what the socket does not take goes to the writer.
    fn write_held(&self) {
        let mut state = self.state();
        if state.phase == Phase::Held {
            state.phase = Phase::Idle;
            self.write_buffer(state, Instant::now());
        }
    }
}

/// Where a queued frame ends in its lane's stream, to ask later whether it was written
/// ([`Outbound::written`]). Bulk frames are not followed: their mark says written.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WriteMark(Option<u64>);

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
    /// [`SendError::Full`] when the queue is full, [`SendError::Closed`] when the writer
    /// stopped, [`SendError::TooLarge`] or [`SendError::Unencodable`] when the frame cannot
    /// be encoded.
    pub fn try_send(&self, frame: Frame) -> Result<(), SendError> {
        self.pipe.enqueue(&FrameRef::Frame(&frame), true)
    }

    /// As [`Outbound::try_send`], leaving `frame` with the caller, who may still need it; a
    /// [`FrameRef`] is encoded from its borrowed body without building the frame.
    ///
    /// # Errors
    /// As [`Outbound::try_send`].
    pub fn try_send_ref(&self, frame: &FrameRef<'_>) -> Result<(), SendError> {
        self.pipe.enqueue(frame, true)
    }

    /// Queues `frame` even when the queue is full: for answers the peer is owed. The caller
    /// bounds them by reading no more requests while [`Outbound::has_room`] is false.
    ///
    /// # Errors
    /// [`SendError::Overflow`] past the owed ceiling, [`SendError::Closed`] when the writer
    /// stopped, and the encoding errors of [`Outbound::try_send`].
    pub fn send_owed(&self, frame: Frame) -> Result<(), SendError> {
        self.pipe.enqueue(&FrameRef::Frame(&frame), false)
    }

    /// As [`Outbound::send_owed`], leaving `frame` with the caller; a [`FrameRef`] is encoded
    /// from its borrowed body without building the frame.
    ///
    /// # Errors
    /// As [`Outbound::send_owed`].
    pub fn send_owed_ref(&self, frame: &FrameRef<'_>) -> Result<(), SendError> {
        self.pipe.enqueue(frame, false)
    }

    /// Queues `frame`, waiting for room.
    ///
    /// # Errors
    /// [`SendError::Closed`] when the writer stopped, and the encoding errors of
    /// [`Outbound::try_send`].
    pub async fn send(&self, frame: Frame) -> Result<(), SendError> {
        self.send_ref(&FrameRef::Frame(&frame)).await
    }

    /// As [`Outbound::send`] for a frame whose body is borrowed; taken by reference, so the
    /// waiting future holds a pointer, not the frame.
    ///
    /// # Errors
    /// As [`Outbound::send`].
    pub async fn send_ref(&self, frame: &FrameRef<'_>) -> Result<(), SendError> {
        self.send_marked(frame).await.map(drop)
    }

    /// As [`Outbound::send_ref`], returning where the frame ends in its lane, for
    /// [`Outbound::written`].
    ///
    /// # Errors
    /// As [`Outbound::send`].
    pub async fn send_marked(&self, frame: &FrameRef<'_>) -> Result<WriteMark, SendError> {
        // Room is the common case: only a full queue pays for registering a wake-up.
        match self.pipe.enqueue_marked(frame, true) {
            Err(SendError::Full) => {}
            other => return other,
        }
        loop {
            let changed = self.pipe.changed.notified();
            tokio::pin!(changed);
            changed.as_mut().enable();
            match self.pipe.enqueue_marked(frame, true) {
                Err(SendError::Full) => changed.await,
                other => return other,
            }
        }
    }

    /// True once the frame `mark` came from was written whole to the socket; false while it
    /// waits, is being written, or was dropped unsent by a discard or the writer's end.
    /// Bulk frames (whose mark is not followed) always count as written.
    pub fn written(&self, mark: WriteMark) -> bool {
        match mark.0 {
            Some(end) => self.pipe.state().control_written(end),
            None => true,
        }
    }

    /// Refuses frames whose body is longer than `max` from now on ([`SendError::TooLarge`]),
    /// when that is below the bound set at the start: for the peer's bound, once it is known.
    pub fn limit_frame_len(&self, max: usize) {
        self.pipe.max_frame_len.fetch_min(max, Ordering::Relaxed);
    }

    /// Writes each frame from now on as a connection of `version` carries it (the kind it goes
    /// as, the fields it has room for: [`SendError::Unsupported`] otherwise), when that is
    /// below the version set at the start ([`PROTOCOL_VERSION`]): for the negotiated version,
    /// once the handshake names it.
    pub fn speak(&self, version: u16) {
        self.pipe.version.fetch_min(version, Ordering::Relaxed);
    }

    /// Writes each frame from now on as to a reader that listed `listed` (a client's
    /// `Features`, a peer's or a node's features): a kind or variant after version 3 goes
    /// only as far as it listed, the nearest older one otherwise.
    pub fn listen(&self, listed: FeatureSet) {
        self.pipe.listed.store(listed.bits(), Ordering::Relaxed);
    }

    /// What the reader listed, as [`Outbound::listen`] last set it.
    pub fn listed(&self) -> FeatureSet {
        FeatureSet::from_bits(self.pipe.listed.load(Ordering::Relaxed))
    }

    /// The protocol version frames are written as.
    pub fn version(&self) -> u16 {
        self.pipe.version.load(Ordering::Relaxed)
    }

    /// Sets how much this connection may queue from now on.
    pub fn set_limits(&self, limits: QueueLimits) {
        let mut state = self.pipe.state();
        state.limits = QueueLimits {
            frames: limits.frames.max(1),
            bytes: limits.bytes.max(1),
            owed_ceiling: limits.owed_ceiling.max(limits.bytes),
        };
        state.note_fullness(Instant::now);
    }

    /// How much this connection may queue.
    pub fn limits(&self) -> QueueLimits {
        self.pipe.state().limits
    }

    /// How full the queue is, read under one lock.
    pub fn pressure(&self) -> Pressure {
        let state = self.pipe.state();
        Pressure {
            room: !state.is_full() || !state.phase.is_open(),
            bytes: state.bytes(),
            full_since: state.full_since,
            overflowed: state.overflowed,
            closed: !state.phase.is_open(),
        }
    }

    /// Frames and bytes queued and not yet written.
    pub fn queued(&self) -> (usize, usize) {
        let state = self.pipe.state();
        (state.frames(), state.bytes())
    }

    /// True while the queue is below both bounds, or once the connection is closing (waiting
    /// for room would then be waiting for nothing).
    pub fn has_room(&self) -> bool {
        self.pressure().room
    }

    /// Since when the queue has been full without a break, while it is.
    pub fn full_since(&self) -> Option<Instant> {
        self.pipe.state().full_since
    }

    /// True once an owed frame was refused at the ceiling.
    pub fn overflowed(&self) -> bool {
        self.pipe.state().overflowed
    }

    /// Resolves once [`Outbound::has_room`] is true, or an owed frame overflowed.
    pub async fn room(&self) {
        self.wait_until(|outbound| outbound.has_room() || outbound.overflowed())
            .await;
    }

    /// Resolves once fewer than `bytes` are queued, or the connection is closing.
    pub async fn below(&self, bytes: usize) {
        self.wait_until(|outbound| {
            let state = outbound.pipe.state();
            state.bytes() < bytes || !state.phase.is_open()
        })
        .await;
    }

    /// Resolves once fewer than `frames` frames and fewer than `bytes` bytes are queued, or
    /// the connection is closing.
    pub async fn under(&self, frames: usize, bytes: usize) {
        self.wait_until(|outbound| {
            let state = outbound.pipe.state();
            (state.frames() < frames && state.bytes() < bytes) || !state.phase.is_open()
        })
        .await;
    }

    /// Queues `frame` and then a close: both go out in order, then the write side shuts.
    pub async fn close_with(&self, frame: Frame) {
        if self.send(frame).await.is_ok() {
            self.close();
        }
    }

    /// Drops every queued frame not yet started, then queues `frame` and a close: the frame
    /// being written is finished, then `frame` goes out and the write side shuts.
    ///
    /// # Errors
    /// [`SendError::Closed`] when a close was already asked for, and the encoding errors of
    /// [`Outbound::try_send`].
    pub fn discard_and_close_with(&self, frame: &Frame) -> Result<(), SendError> {
        self.pipe.discard_and_close(frame)
    }

    /// Asks the writer to flush what is queued and shut its side of the socket.
    pub fn close(&self) {
        self.pipe.close();
    }

    /// True once the writer has stopped.
    pub fn is_closed(&self) -> bool {
        self.pipe.state().phase == Phase::Stopped
    }

    /// Resolves when the writer has stopped.
    pub async fn closed(&self) {
        self.wait_until(Self::is_closed).await;
    }

    /// Resolves once `ready` holds, checking again each time the queue drains or the writer
    /// stops; the wake-up is registered before the check, so none is missed.
    async fn wait_until(&self, ready: impl Fn(&Self) -> bool) {
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

/// Starts the writer task for `socket`, with room for `queue_len` frames and
/// [`super::DEFAULT_QUEUE_BYTES`].
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
        max_frame_len: AtomicUsize::new(max_frame_len),
        version: AtomicU16::new(PROTOCOL_VERSION),
        listed: AtomicU32::new(FeatureSet::NONE.bits()),
    });
    pipe.state().limits = QueueLimits {
        frames: queue_len.max(1),
        ..QueueLimits::default()
    };
    let writer = tokio::spawn(write_loop(Arc::clone(&pipe)));
    (Outbound { pipe }, writer)
}

async fn write_loop(pipe: Arc<Pipe>) -> io::Result<()> {
    let result = drain(&pipe).await;
    {
        let mut state = pipe.state();
        state.phase = Phase::Stopped;
        state.control = Queue::default();
        state.bulk = Queue::default();
        state.resume = Queue::default();
        state.control_frames = 0;
        state.bulk_frames = 0;
        state.in_hand = 0;
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
        let active = pipe.state().phase.task_writes();
        if !active {
            pipe.wake.notified().await;
            continue;
        }
        // Woken writers run before the tasks that would add to the batch; yielding once
        // lets them queue first, and tells a busy connection from a quiet one.
        let before = pipe.state().frames();
        tokio::task::yield_now().await;
        let piece = {
            let mut state = pipe.state();
            state.busy = state.frames() > before;
            let piece = state.take();
            if piece.is_none() {
                if !state.phase.is_open() {
                    return Ok(());
                }
                state.phase = Phase::Idle;
                state.shrink();
            }
            piece
        };
        if let Some(piece) = piece {
            // Boxed: a write's state would otherwise sit in every idle connection's writer.
            Box::pin(write_piece(pipe, piece)).await?;
        }
    }
}

/// Writes `piece`, stopping at a frame boundary to give the rest back when a control frame
/// waits behind bulk bytes.
async fn write_piece(pipe: &Pipe, mut piece: Piece) -> io::Result<()> {
    let mut to_boundary = false;
    while !piece.is_empty() {
        let limit = if to_boundary {
            piece.to_boundary()
        } else {
            usize::MAX
        };
        let written = match piece.queue.contiguous(limit) {
            Some(bytes) => pipe.socket.write_vectored(&[IoSlice::new(bytes)]).await?,
            None => {
                // On the heap: an array held across the write's await would sit in every
                // connection's writer task, idle or not, for a path only large payloads take.
                let mut slices = vec![IoSlice::new(&[]); MAX_SLICES];
                let filled = piece.queue.slices(limit, &mut slices);
                let slices = slices.get(..filled).unwrap_or_default();
                pipe.socket.write_vectored(slices).await?
            }
        };
        let written = match written {
            0 => return Err(io::ErrorKind::WriteZero.into()),
            written => written,
        };
        piece.advance(written);
        let mut state = pipe.state();
        let mut freed = state.wrote(written, Instant::now());
        if let Phase::Discarding { .. } = state.phase {
            let dropped = state.keep_current_frame(&mut piece);
            state.in_hand = state.in_hand.saturating_sub(dropped);
            freed |= state.note_fullness(Instant::now);
        }
        if piece.bulk && !state.control.is_empty() && !piece.is_empty() {
            if piece.frame_left == 0 {
                state.give_back(std::mem::take(&mut piece));
            } else {
                to_boundary = true;
            }
        }
        drop(state);
        if freed {
            pipe.changed.notify_waiters();
        }
    }
    pipe.changed.notify_waiters();
    Ok(())
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use bytes::Bytes;
    use futures_util::StreamExt;
    use lintel_wire::{
        Cancel, ErrorCode, ErrorFrame, Frame, FrameCodec, FrameKind, FrameRef, PROTOCOL_VERSION,
    };
    use socket2::SockRef;
    use tokio::net::{TcpListener, TcpStream};
    use tokio_util::codec::FramedRead;

    use super::SendError;
    use crate::fixtures::{self, ping};
    use crate::{split, Batched, FrameReader, Outbound, QueueLimits};

    /// A push of `len` input bytes whose correlation names its sender and sequence number.
    fn push(sender: u64, seq: u64, len: usize) -> Frame {
        fixtures::push((sender << 32) | seq, seq, Bytes::from(vec![7; len]))
    }

    /// An outbound whose socket takes little before writes stall, and the peer's frames, not
    /// read until the test reads them.
    async fn stalled_pair(
        max_frame_len: usize,
    ) -> (Outbound, FramedRead<TcpStream, FrameCodec>, FrameReader) {
        let (accepted, peer) = fixtures::stalling_pair().await;
        let (reader, outbound, _writer) = split(accepted, max_frame_len, 64);
        let peer = FramedRead::new(peer, FrameCodec::new(max_frame_len));
        (outbound, peer, reader)
    }

    async fn next(peer: &mut FramedRead<TcpStream, FrameCodec>) -> Frame {
        tokio::time::timeout(Duration::from_secs(30), peer.next())
            .await
            .expect("no frame arrived")
            .expect("the stream ended")
            .expect("a frame")
    }

    #[tokio::test]
    async fn a_control_frame_queued_behind_bulk_payloads_goes_out_at_the_next_frame_boundary() {
        let (outbound, mut peer, _reader) = stalled_pair(1 << 20).await;
        let (first, second) = (push(1, 1, 256 * 1024), push(1, 2, 256 * 1024));
        // Both payloads are handed to the socket as one write, which it takes only part of.
        Batched::new(async {
            outbound.try_send_ref(&FrameRef::Frame(&first)).unwrap();
            outbound.try_send_ref(&FrameRef::Frame(&second)).unwrap();
        })
        .await;
        outbound.try_send(ping(9)).unwrap();
        assert_eq!(
            next(&mut peer).await,
            first,
            "the started frame is finished"
        );
        assert_eq!(next(&mut peer).await, ping(9), "then the control frame");
        assert_eq!(next(&mut peer).await, second);
    }

    #[tokio::test]
    async fn a_frame_too_large_to_encode_is_an_error_the_caller_sees() {
        let (outbound, mut peer, _reader) = stalled_pair(64 * 1024).await;
        let refused = outbound.try_send(push(1, 1, 100 * 1024));
        assert!(matches!(
            refused,
            Err(SendError::TooLarge {
                kind: FrameKind::Push3,
                max: 65_536,
                ..
            })
        ));
        let owed = outbound.send_owed(push(1, 2, 100 * 1024));
        assert!(matches!(owed, Err(SendError::TooLarge { .. })));
        let waited = outbound.send(push(1, 3, 100 * 1024)).await;
        assert!(matches!(waited, Err(SendError::TooLarge { .. })));
        assert_eq!(outbound.queued(), (0, 0), "nothing was queued");
        outbound.try_send(ping(1)).unwrap();
        assert_eq!(next(&mut peer).await, ping(1), "the connection still works");
    }

    #[tokio::test]
    async fn what_the_negotiated_version_cannot_carry_is_refused_and_nothing_is_queued() {
        let (outbound, mut peer, _reader) = stalled_pair(1 << 20).await;
        outbound.speak(2);
        outbound.speak(3);
        assert_eq!(outbound.version(), 2, "a version is lowered, never raised");
        let Frame::Push(mut headed) = push(1, 1, 8) else {
            unreachable!("the fixture builds a push")
        };
        headed.extras.headers = vec![lintel_wire::Header::new("traceparent", "00-ab-01")];
        let refused = outbound.try_send(Frame::Push(headed));
        assert_eq!(
            refused,
            Err(SendError::Unsupported {
                kind: FrameKind::Push,
                field: Some("headers"),
                version: 2,
            })
        );
        let subscribe = lintel_wire::Subscribe {
            correlation: 1,
            topics: Vec::new(),
        };
        let too_new = outbound.send_owed(Frame::Subscribe(subscribe));
        assert_eq!(
            too_new,
            Err(SendError::Unsupported {
                kind: FrameKind::Subscribe,
                field: None,
                version: 2,
            })
        );
        assert_eq!(outbound.queued(), (0, 0), "nothing was queued");
        outbound.try_send(push(1, 2, 8)).unwrap();
        assert_eq!(
            next(&mut peer).await,
            push(1, 2, 8),
            "a plain push still goes"
        );
    }

    #[tokio::test]
    async fn a_frame_bound_can_be_lowered_to_the_peers_but_never_raised() {
        let (outbound, mut peer, _reader) = stalled_pair(64 * 1024).await;
        outbound.limit_frame_len(2048);
        outbound.limit_frame_len(1 << 20);
        let refused = outbound.try_send(push(1, 1, 4096));
        assert!(
            matches!(refused, Err(SendError::TooLarge { max: 2048, .. })),
            "{refused:?}"
        );
        outbound.try_send(push(1, 2, 1024)).unwrap();
        assert_eq!(
            next(&mut peer).await,
            push(1, 2, 1024),
            "a frame under it goes"
        );
    }

    #[tokio::test]
    async fn the_queue_is_bounded_in_bytes_and_owed_frames_stop_at_the_ceiling() {
        let (outbound, _peer, _reader) = stalled_pair(1 << 20).await;
        outbound.set_limits(QueueLimits {
            frames: 1_000,
            bytes: 100 * 1024,
            owed_ceiling: 400 * 1024,
        });
        outbound.try_send(push(1, 1, 150 * 1024)).unwrap();
        assert!(!outbound.has_room());
        assert!(outbound.full_since().is_some());
        assert_eq!(outbound.try_send(push(1, 2, 10)), Err(SendError::Full));
        let mut owed = 0;
        let overflow = loop {
            match outbound.send_owed(push(1, 3, 100 * 1024)) {
                Ok(()) => owed += 1,
                Err(err) => break err,
            }
            assert!(owed < 10, "owed frames were never refused");
        };
        assert_eq!(overflow, SendError::Overflow);
        assert!(outbound.overflowed());
        let (_, bytes) = outbound.queued();
        assert!(bytes < 600 * 1024, "{bytes} bytes queued");
    }

    #[tokio::test]
    async fn discarding_finishes_the_started_frame_then_sends_only_the_closing_frame() {
        let (outbound, mut peer, _reader) = stalled_pair(1 << 20).await;
        let first = push(1, 1, 256 * 1024);
        outbound.try_send_ref(&FrameRef::Frame(&first)).unwrap();
        for seq in 2..6 {
            outbound.send_owed(push(1, seq, 256 * 1024)).unwrap();
            outbound.send_owed(ping(seq)).unwrap();
        }
        let error = Frame::Error(ErrorFrame {
            code: ErrorCode::SlowConsumer,
            reason: "slow".into(),
        });
        outbound.discard_and_close_with(&error).unwrap();
        assert!(
            outbound.queued().1 < 300 * 1024,
            "queued frames were let go"
        );
        assert_eq!(next(&mut peer).await, first);
        assert_eq!(next(&mut peer).await, error);
        let end = tokio::time::timeout(Duration::from_secs(30), peer.next()).await;
        assert!(matches!(end, Ok(None)), "the stream ends after the error");
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
                    // Senders 0 and 3 send control frames, the others bulk ones.
                    let frame = if sender % 3 == 0 {
                        Frame::Cancel(Cancel {
                            correlation: (sender << 32) | seq,
                        })
                    } else {
                        push(sender, seq, len)
                    };
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
                let correlation = match frame.unwrap() {
                    Frame::Push(push) => push.correlation,
                    Frame::Cancel(cancel) => cancel.correlation,
                    other => panic!("only pushes and cancels were sent, got {other:?}"),
                };
                let (sender, seq) = (correlation >> 32, correlation & 0xffff_ffff);
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

    #[tokio::test]
    async fn spliced_payloads_cross_a_stalling_tcp_socket_byte_for_byte() {
        let (accepted, peer) = fixtures::stalling_pair().await;
        let (_reader, outbound, writer) = split(accepted, 1 << 20, 1024);
        let frames: Vec<Frame> = (0..40)
            .map(|seq| {
                push(
                    1,
                    seq,
                    [16_384, 3, 70_000, 16_383, 300_000][seq as usize % 5],
                )
            })
            .collect();
        let mut expected = bytes::BytesMut::new();
        for frame in &frames {
            lintel_wire::encode_frame(frame, PROTOCOL_VERSION, &mut expected, 1 << 20).unwrap();
        }
        let send = async {
            for (at, frame) in frames.iter().enumerate() {
                // Some straight from the sender, some batched into one vectored write.
                if at % 3 == 0 {
                    outbound.send(frame.clone()).await.unwrap();
                } else {
                    Batched::new(outbound.send(frame.clone())).await.unwrap();
                }
            }
            outbound.close();
        };
        let mut received = Vec::new();
        let read = async {
            let mut peer = peer;
            tokio::io::AsyncReadExt::read_to_end(&mut peer, &mut received)
                .await
                .unwrap();
        };
        tokio::time::timeout(Duration::from_secs(30), async { tokio::join!(send, read) })
            .await
            .expect("the bytes never all arrived");
        assert_eq!(received.len(), expected.len());
        assert!(received == expected, "the same bytes as whole encodes");
        writer.await.unwrap().unwrap();
    }

    /// A write half that never takes a byte.
    struct Stuck;

    impl tokio::io::AsyncWrite for Stuck {
        fn poll_write(
            self: std::pin::Pin<&mut Self>,
            _: &mut std::task::Context<'_>,
            _: &[u8],
        ) -> std::task::Poll<std::io::Result<usize>> {
            std::task::Poll::Pending
        }

        fn poll_flush(
            self: std::pin::Pin<&mut Self>,
            _: &mut std::task::Context<'_>,
        ) -> std::task::Poll<std::io::Result<()>> {
            std::task::Poll::Ready(Ok(()))
        }

        fn poll_shutdown(
            self: std::pin::Pin<&mut Self>,
            _: &mut std::task::Context<'_>,
        ) -> std::task::Poll<std::io::Result<()>> {
            std::task::Poll::Ready(Ok(()))
        }
    }

    #[tokio::test]
    async fn the_byte_bound_counts_spliced_payloads_exactly() {
        let socket = crate::Socket::from_io(tokio::io::empty(), Stuck, None);
        let (_reader, outbound, _writer) = split(socket, 1 << 20, 1024);
        let frame = push(1, 1, 300_000);
        let mut encoded = bytes::BytesMut::new();
        lintel_wire::encode_frame(&frame, PROTOCOL_VERSION, &mut encoded, 1 << 20).unwrap();
        let mut ping_len = bytes::BytesMut::new();
        lintel_wire::encode_frame(&ping(1), PROTOCOL_VERSION, &mut ping_len, 1 << 20).unwrap();
        outbound.set_limits(QueueLimits {
            frames: 1_000,
            bytes: 3 * encoded.len() + 1,
            owed_ceiling: usize::MAX,
        });
        // Nothing is ever written, so everything queued (or in the writer's hand) counts.
        for _ in 0..3 {
            outbound.try_send_ref(&FrameRef::Frame(&frame)).unwrap();
            tokio::task::yield_now().await;
        }
        assert_eq!(outbound.queued().1, 3 * encoded.len());
        assert!(outbound.has_room(), "one byte below the bound");
        outbound.try_send(ping(1)).unwrap();
        assert_eq!(outbound.queued().1, 3 * encoded.len() + ping_len.len());
        assert!(!outbound.has_room());
        assert_eq!(
            outbound.try_send_ref(&FrameRef::Frame(&frame)),
            Err(SendError::Full)
        );
    }
}
