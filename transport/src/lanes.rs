//! The two lanes of a connection's outbound queue and their bookkeeping: what is queued in
//! each, what a writing party holds, and in which order bytes are taken to be written.
//!
//! A frame's lane is its kinds', from the frame table ([`lintel_wire::FrameRef::lane`]; every kind of one
//! message shares a lane, so no version is needed to choose it): bulk frames
//! (requests to run work: pushes and relays) carry work and its inputs; every other frame is
//! control. A writing party takes a [`Piece`] at a time: the rest of a started bulk frame, then
//! every control frame, then bulk frames, so control frames overtake bulk ones only at a frame
//! boundary. All of it lives under the outbound's one lock.

use std::collections::VecDeque;
use std::io::IoSlice;

use tokio::time::Instant;

use bytes::{Buf, Bytes, BytesMut};
use lintel_wire::framing::LENGTH_PREFIX_LEN;
#[cfg(doc)]
use lintel_wire::FrameKind;
use lintel_wire::{Dialect, EncodeError, FrameRef};

/// A buffer larger than this is released after it drains, so an idle connection stays small.
pub(super) const KEEP_BUFFER_BYTES: usize = 64 * 1024;

/// Room for this many segments is kept after a queue drains; more is released.
const KEEP_SEGMENTS: usize = 64;

/// Bytes a connection queues before bounded sends are refused, unless set otherwise.
pub const DEFAULT_QUEUE_BYTES: usize = 64 * 1024 * 1024;

/// How much one connection may queue.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct QueueLimits {
    /// Frames queued before bounded sends are refused.
    pub frames: usize,
    /// Bytes queued (written or not yet) before bounded sends are refused.
    pub bytes: usize,
    /// Bytes past which even owed sends are refused; `usize::MAX` never refuses them.
    pub owed_ceiling: usize,
}

impl Default for QueueLimits {
    fn default() -> Self {
        Self {
            frames: 1024,
            bytes: DEFAULT_QUEUE_BYTES,
            owed_ceiling: usize::MAX,
        }
    }
}

/// How full a connection's queue is, at one moment.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Pressure {
    /// Below both bounds (or closing): [`super::Outbound::has_room`].
    pub room: bool,
    /// Bytes queued or being written.
    pub bytes: usize,
    /// [`super::Outbound::full_since`].
    pub full_since: Option<Instant>,
    /// [`super::Outbound::overflowed`].
    pub overflowed: bool,
    /// A close was asked for or the writer has stopped: nothing more will be written.
    pub closed: bool,
}

/// Who writes to the socket next, everyone else only appending to the lanes, and how far the
/// connection's close has come.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub(super) enum Phase {
    /// Nobody writes: a sender may write directly.
    #[default]
    Idle,
    /// A batching scope holds the lanes and writes them when its poll ends.
    Held,
    /// A sender writes with the lock released, then goes back to `Idle` or hands over.
    Sending,
    /// The writer task writes.
    Flushing,
    /// A close was asked for: the writer task writes what is queued and shuts the write side,
    /// after a sender still `sending` hands over.
    Closing { sending: bool },
    /// As `Closing`, but only the frame being written and the control lane go out.
    Discarding { sending: bool },
    /// The writer has stopped.
    Stopped,
}

impl Phase {
    /// No close was asked for and the writer runs: frames may still be queued.
    pub(super) fn is_open(self) -> bool {
        matches!(
            self,
            Phase::Idle | Phase::Held | Phase::Sending | Phase::Flushing
        )
    }

    /// The writer task owns the socket.
    pub(super) fn task_writes(self) -> bool {
        match self {
            Phase::Closing { sending } | Phase::Discarding { sending } => !sending,
            other => other == Phase::Flushing,
        }
    }

    /// Asks for a close, `discarding` or not, unless one was; true when the writer task is to
    /// be woken for it. A sender still writing hands over to the task when its write ends.
    pub(super) fn close(&mut self, discarding: bool) -> bool {
        let sending = match *self {
            Phase::Idle | Phase::Held | Phase::Flushing => false,
            Phase::Sending => true,
            Phase::Closing { .. } | Phase::Discarding { .. } | Phase::Stopped => {
                return self.task_writes();
            }
        };
        *self = match discarding {
            true => Phase::Discarding { sending },
            false => Phase::Closing { sending },
        };
        !sending
    }

    /// A sender's write ended, leaving the lanes `drained` or not; true when it handed over to
    /// the writer task, which is to be woken.
    pub(super) fn sent(&mut self, drained: bool) -> bool {
        *self = match *self {
            Phase::Sending if drained => Phase::Idle,
            Phase::Sending => Phase::Flushing,
            Phase::Closing { .. } => Phase::Closing { sending: false },
            Phase::Discarding { .. } => Phase::Discarding { sending: false },
            // Nothing else follows a sender's write.
            other => other,
        };
        self.task_writes()
    }
}

/// Encoded frames waiting in order: the segments of `sealed`, then `open`. A large payload is
/// a segment of its own, a slice of the frame it came from, never copied here.
#[derive(Debug, Default)]
pub(super) struct Queue {
    /// Older than `open`: encoded bytes up to a large payload, the payload, and so on.
    sealed: VecDeque<Bytes>,
    /// Bytes in `sealed`.
    sealed_len: usize,
    /// Encoded bytes after the last sealed segment, where new frames are appended.
    open: BytesMut,
}

impl Queue {
    /// Bytes queued, large payloads included.
    pub(super) fn len(&self) -> usize {
        self.sealed_len + self.open.len()
    }

    pub(super) fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Appends `frame` as a connection of `dialect` carries it, leaving a large payload as a
    /// segment of its own.
    ///
    /// # Errors
    /// As [`lintel_wire::encode_frame`]; nothing is appended then.
    pub(super) fn push_frame(
        &mut self,
        frame: &FrameRef<'_>,
        dialect: impl Into<Dialect>,
        max_frame_len: usize,
    ) -> Result<(), EncodeError> {
        let start = self.open.len();
        if let Some(spliced) =
            lintel_wire::encode_frame_spliced(frame, dialect, &mut self.open, max_frame_len)?
        {
            let head = self.open.split_to(start + spliced.at).freeze();
            self.seal(head);
            self.seal(spliced.payload);
        }
        Ok(())
    }

    fn seal(&mut self, bytes: Bytes) {
        if !bytes.is_empty() {
            self.sealed_len += bytes.len();
            self.sealed.push_back(bytes);
        }
    }

    /// Takes every byte queued, leaving the queue empty with its spare room.
    pub(super) fn take(&mut self) -> Queue {
        Queue {
            sealed: std::mem::take(&mut self.sealed),
            sealed_len: std::mem::take(&mut self.sealed_len),
            open: self.open.split(),
        }
    }

    /// Puts `older` in front of what is queued.
    pub(super) fn prepend(&mut self, older: Queue) {
        if older.is_empty() {
            return;
        }
        if older.sealed.is_empty() && self.sealed.is_empty() {
            // Contiguous when nothing was appended since `older` was taken: no copy.
            let mut open = older.open;
            open.unsplit(std::mem::take(&mut self.open));
            self.open = open;
            return;
        }
        let mut sealed = older.sealed;
        let mut sealed_len = older.sealed_len;
        if !older.open.is_empty() {
            sealed_len += older.open.len();
            sealed.push_back(older.open.freeze());
        }
        sealed.append(&mut self.sealed);
        self.sealed = sealed;
        self.sealed_len += sealed_len;
    }

    /// Puts `newer` behind what is queued.
    pub(super) fn append(&mut self, mut newer: Queue) {
        newer.prepend(std::mem::take(self));
        *self = newer;
    }

    /// Consumes the first `len` bytes (all of them if fewer are queued).
    pub(super) fn advance(&mut self, mut len: usize) {
        while len > 0 {
            let Some(first) = self.sealed.front_mut() else {
                let step = len.min(self.open.len());
                self.open.advance(step);
                return;
            };
            let step = len.min(first.len());
            first.advance(step);
            self.sealed_len -= step;
            len -= step;
            if first.is_empty() {
                self.sealed.pop_front();
            }
        }
    }

    /// Keeps the first `len` bytes and drops the rest.
    pub(super) fn truncate(&mut self, mut len: usize) {
        if len >= self.len() {
            return;
        }
        if len < self.sealed_len {
            self.open.clear();
            let mut kept = 0;
            while let Some(segment) = self.sealed.get_mut(kept) {
                if len <= segment.len() {
                    segment.truncate(len);
                    break;
                }
                len -= segment.len();
                kept += 1;
            }
            self.sealed.truncate(kept + 1);
            self.sealed.retain(|segment| !segment.is_empty());
            self.sealed_len = self.sealed.iter().map(Bytes::len).sum();
        } else {
            self.open.truncate(len - self.sealed_len);
        }
    }

    /// The first bytes queued, up to `N`, and how many there are.
    fn peek<const N: usize>(&self) -> ([u8; N], usize) {
        let mut out = [0u8; N];
        let mut filled = 0;
        for segment in self.segments() {
            for (slot, byte) in out.iter_mut().skip(filled).zip(segment) {
                *slot = *byte;
                filled += 1;
            }
            if filled == N {
                break;
            }
        }
        (out, filled)
    }

    /// The first `limit` bytes queued when they are one slice: no large payload among them.
    pub(super) fn contiguous(&self, limit: usize) -> Option<&[u8]> {
        if !self.sealed.is_empty() {
            return None;
        }
        Some(self.open.get(..limit).unwrap_or(&self.open))
    }

    /// Fills `out` with the queued bytes in order, at most `limit` of them; returns how many
    /// slices it filled.
    pub(super) fn slices<'a>(&'a self, mut limit: usize, out: &mut [IoSlice<'a>]) -> usize {
        let mut filled = 0;
        for segment in self.segments() {
            if limit == 0 {
                break;
            }
            let segment = segment.get(..limit).unwrap_or(segment);
            if segment.is_empty() {
                continue;
            }
            let Some(slot) = out.get_mut(filled) else {
                break;
            };
            *slot = IoSlice::new(segment);
            limit -= segment.len();
            filled += 1;
        }
        filled
    }

    /// The queued bytes in order, one slice per segment.
    fn segments(&self) -> impl Iterator<Item = &[u8]> {
        let sealed = self.sealed.iter().map(AsRef::as_ref);
        sealed.chain(std::iter::once(self.open.as_ref()))
    }

    /// Lets go of a large buffer once drained, so an idle connection stays small.
    fn shrink(&mut self) {
        if self.is_empty() {
            if self.open.capacity() > KEEP_BUFFER_BYTES {
                self.open = BytesMut::new();
            }
            if self.sealed.capacity() > KEEP_SEGMENTS {
                self.sealed = VecDeque::new();
            }
        }
    }
}

#[derive(Debug, Default)]
pub(super) struct Piece {
    pub(super) queue: Queue,
    /// Bytes left of the frame at the front of `queue`; 0 when it starts at a frame boundary.
    pub(super) frame_left: usize,
    /// Bulk bytes, which a waiting control frame may cut at a frame boundary.
    pub(super) bulk: bool,
}

impl Piece {
    pub(super) fn is_empty(&self) -> bool {
        self.queue.is_empty()
    }

    /// Consumes `written` bytes, keeping track of where the current frame ends.
    pub(super) fn advance(&mut self, mut written: usize) {
        while written > 0 && !self.queue.is_empty() {
            if self.frame_left == 0 {
                self.frame_left = next_frame_len(&self.queue);
            }
            let step = written.min(self.frame_left).min(self.queue.len());
            self.queue.advance(step);
            self.frame_left -= step;
            written -= step;
        }
    }

    /// Bytes to the next frame boundary: the rest of the current frame, or all of the next.
    pub(super) fn to_boundary(&self) -> usize {
        if self.frame_left > 0 {
            self.frame_left
        } else {
            next_frame_len(&self.queue)
        }
    }

    /// Drops every frame after the current one; returns how many bytes went.
    pub(super) fn keep_current_frame(&mut self) -> usize {
        let dropped = self.queue.len().saturating_sub(self.frame_left);
        self.queue.truncate(self.frame_left);
        dropped
    }
}

/// The length, prefix included, of the frame at the front of `queue` (all of `queue` if it
/// is too short to say, which the lanes never are).
fn next_frame_len(queue: &Queue) -> usize {
    let (prefix, filled) = queue.peek::<LENGTH_PREFIX_LEN>();
    let body = usize::try_from(u32::from_be_bytes(prefix)).ok();
    match body.filter(|_| filled == LENGTH_PREFIX_LEN) {
        Some(body) => LENGTH_PREFIX_LEN.saturating_add(body).min(queue.len()),
        None => queue.len(),
    }
}

#[derive(Debug, Default)]
pub(super) struct State {
    /// The bounds, kept under the same lock as what they bound.
    pub(super) limits: QueueLimits,
    /// Encoded control frames not yet taken.
    pub(super) control: Queue,
    /// Bytes left of the frame at the front of `control`; 0 at a boundary.
    pub(super) control_left: usize,
    /// Encoded bulk frames not yet taken.
    pub(super) bulk: Queue,
    /// Bulk bytes handed back unwritten, older than `bulk`, so written before it.
    pub(super) resume: Queue,
    /// Bytes left of the frame at the front of `resume`; 0 at a boundary.
    pub(super) resume_left: usize,
    /// Frames in `control` and `bulk`, against the frame bound.
    pub(super) control_frames: usize,
    pub(super) bulk_frames: usize,
    /// Bytes a writing party took and has not written yet.
    pub(super) in_hand: usize,
    /// The piece in hand is of the bulk lane.
    pub(super) in_hand_bulk: bool,
    /// Control-lane bytes ever queued, and ever written to the socket: a control frame is
    /// written once the second reaches the first as it stood after the frame was queued.
    pub(super) control_queued: u64,
    pub(super) control_written: u64,
    /// Once a discard dropped control frames unsent: the control offset past which nothing
    /// but the closing frame was written.
    pub(super) control_cut: Option<u64>,
    /// Since when the queue has been at or over a bound, while it is.
    pub(super) full_since: Option<Instant>,
    /// An owed frame was refused at the ceiling: latched, whatever the phase, for the
    /// connection's owner to close it.
    pub(super) overflowed: bool,
    pub(super) phase: Phase,
    /// When bytes last went to the socket.
    pub(super) last_write: Option<Instant>,
    /// The writer task's last batch grew while it yielded: keep batching instead of writing
    /// directly.
    pub(super) busy: bool,
}

impl State {
    pub(super) fn frames(&self) -> usize {
        self.control_frames + self.bulk_frames
    }

    /// Bytes queued or being written.
    pub(super) fn bytes(&self) -> usize {
        self.control.len() + self.bulk.len() + self.resume.len() + self.in_hand
    }

    pub(super) fn is_full(&self) -> bool {
        self.frames() >= self.limits.frames || self.bytes() >= self.limits.bytes
    }

    pub(super) fn is_empty(&self) -> bool {
        self.control.is_empty() && self.bulk.is_empty() && self.resume.is_empty()
    }

    /// Notes when the queue became full, or that it is not; true when it just stopped being.
    pub(super) fn note_fullness(&mut self, now: impl FnOnce() -> Instant) -> bool {
        match (self.is_full(), self.full_since) {
            (true, None) => {
                self.full_since = Some(now());
                false
            }
            (false, Some(_)) => {
                self.full_since = None;
                true
            }
            _ => false,
        }
    }

    /// The next bytes to write, in order: the rest of a started bulk frame, then control
    /// frames, then bulk frames handed back, then new bulk frames.
    pub(super) fn take(&mut self) -> Option<Piece> {
        // A started bulk frame is finished first; `control_left` and `resume_left` are never
        // both set, since one party writes at a time.
        let piece = if self.resume_left == 0 && !self.control.is_empty() {
            self.control_frames = 0;
            Piece {
                queue: self.control.take(),
                frame_left: std::mem::take(&mut self.control_left),
                bulk: false,
            }
        } else if !self.resume.is_empty() {
            Piece {
                queue: self.resume.take(),
                frame_left: std::mem::take(&mut self.resume_left),
                bulk: true,
            }
        } else if !self.bulk.is_empty() {
            self.bulk_frames = 0;
            Piece {
                queue: self.bulk.take(),
                frame_left: 0,
                bulk: true,
            }
        } else {
            return None;
        };
        self.in_hand = piece.queue.len();
        self.in_hand_bulk = piece.bulk;
        Some(piece)
    }

    /// Gives back the unwritten rest of `piece`, to go out before its lane's newer frames.
    pub(super) fn give_back(&mut self, mut piece: Piece) {
        self.in_hand = 0;
        if let Phase::Discarding { .. } = self.phase {
            self.keep_current_frame(&mut piece);
        }
        if piece.is_empty() {
            return;
        }
        if piece.bulk {
            // Only the writing party fills `resume`, and it took it whole.
            self.resume.prepend(piece.queue);
            self.resume_left = piece.frame_left;
        } else {
            self.control.prepend(piece.queue);
            self.control_left = piece.frame_left;
        }
    }

    /// Drops every frame of `piece` after its current one; returns how many bytes went.
    pub(super) fn keep_current_frame(&mut self, piece: &mut Piece) -> usize {
        if !piece.bulk && self.control_cut.is_none() {
            self.control_cut = Some(self.control_written + piece.frame_left as u64);
        }
        piece.keep_current_frame()
    }

    /// True once the control frame queued when [`State::control_queued`] read `mark` has
    /// been written whole to the socket.
    pub(super) fn control_written(&self, mark: u64) -> bool {
        mark <= self.control_written && self.control_cut.is_none_or(|cut| mark <= cut)
    }

    /// Records `written` bytes of the piece in hand as written; true when that made room.
    pub(super) fn wrote(&mut self, written: usize, now: Instant) -> bool {
        self.in_hand = self.in_hand.saturating_sub(written);
        if !self.in_hand_bulk {
            self.control_written += written as u64;
        }
        self.last_write = Some(now);
        self.note_fullness(|| now)
    }

    /// Lets go of large buffers once the lanes drained, so an idle connection stays small.
    pub(super) fn shrink(&mut self) {
        for queue in [&mut self.control, &mut self.bulk, &mut self.resume] {
            queue.shrink();
        }
    }
}

#[cfg(test)]
mod tests {
    use lintel_wire::{Frame, FrameKind, Lane, PROTOCOL_VERSION};

    use crate::fixtures::{self, ping};

    use super::*;

    fn encoded(frames: &[Frame]) -> Queue {
        let mut queue = Queue::default();
        for frame in frames {
            queue
                .push_frame(&frame.into(), PROTOCOL_VERSION, 1 << 20)
                .unwrap();
        }
        queue
    }

    /// The bytes a queue would put on the wire, in order.
    fn wire(queue: &Queue) -> Vec<u8> {
        queue.segments().flatten().copied().collect()
    }

    /// What `encode_frame` makes of `frames`: the wire bytes a queue must match.
    fn whole(frames: &[Frame]) -> Vec<u8> {
        let mut buf = BytesMut::new();
        for frame in frames {
            lintel_wire::encode_frame(frame, PROTOCOL_VERSION, &mut buf, 1 << 20).unwrap();
        }
        buf.to_vec()
    }

    fn push(seq: u64, len: usize) -> Frame {
        fixtures::push(seq, seq, Bytes::from(vec![seq as u8; len]))
    }

    #[test]
    fn requests_wait_in_the_bulk_lane_whether_built_or_borrowed() {
        let built = push(1, 64);
        let Frame::Push(pushed) = &built else {
            panic!("the fixture builds a push");
        };
        let Frame::Relay(relayed) = Frame::from(lintel_wire::Relay {
            correlation: 2,
            request: pushed.request.clone(),
            extras: Default::default(),
            routing: lintel_wire::NodeRouting::Any,
            reply_timeout_ms: 1_000,
        }) else {
            unreachable!()
        };
        let relay = Frame::Relay(relayed.clone());
        let bulk = [
            FrameRef::Frame(&built),
            FrameRef::Push(pushed.view()),
            FrameRef::Frame(&relay),
            FrameRef::Relay(relayed.view()),
        ];
        for version in [2, 3] {
            for frame in &bulk {
                let lane = frame.kind_at(version).map(FrameKind::lane);
                assert_eq!(lane.ok(), Some(Lane::Bulk), "{}", frame.name());
                assert_eq!(frame.lane(), Lane::Bulk, "{}", frame.name());
            }
        }
        let ping = FrameRef::Frame(&ping(3));
        assert_eq!(
            ping.kind_at(1).map(FrameKind::lane).ok(),
            Some(Lane::Control)
        );
        assert_eq!(ping.lane(), Lane::Control);
    }

    #[test]
    fn pushes_and_relays_of_every_version_are_bulk_and_every_other_kind_is_control() {
        let requests = [
            FrameKind::Push,
            FrameKind::Relay,
            FrameKind::Push3,
            FrameKind::Relay3,
        ];
        for kind in FrameKind::ALL {
            let expected = match requests.contains(&kind) {
                true => Lane::Bulk,
                false => Lane::Control,
            };
            assert_eq!(kind.lane(), expected, "{kind}");
            assert_eq!(kind.is_bulk(), expected == Lane::Bulk, "{kind}");
        }
    }

    #[test]
    fn a_piece_knows_where_its_current_frame_ends_across_partial_writes() {
        let frame_len = encoded(&[ping(300)]).len();
        let mut piece = Piece {
            queue: encoded(&[ping(300), ping(301), ping(302)]),
            frame_left: 0,
            bulk: true,
        };
        assert_eq!(piece.to_boundary(), frame_len);
        piece.advance(2);
        assert_eq!(piece.to_boundary(), frame_len - 2);
        piece.advance(frame_len + 1);
        assert_eq!(
            piece.to_boundary(),
            frame_len - 3,
            "inside the second frame"
        );
        assert_eq!(
            piece.keep_current_frame(),
            frame_len,
            "the third frame goes"
        );
        assert_eq!(piece.queue.len(), frame_len - 3);
    }

    #[test]
    fn the_rest_of_a_started_bulk_frame_goes_first_then_control_frames_then_bulk() {
        let mut state = State {
            bulk: encoded(&[ping(1), ping(2)]),
            bulk_frames: 2,
            ..State::default()
        };
        // A sender writes part of the first frame and gives the rest back.
        let mut piece = state.take().unwrap();
        piece.advance(3);
        state.give_back(piece);
        state.control = encoded(&[ping(9)]);
        state.control_frames = 1;
        let mut started = state.take().unwrap();
        assert!(
            started.bulk && started.frame_left > 0,
            "the started frame first"
        );
        // The writer finishes that frame and, a control frame waiting, gives the rest back.
        started.advance(started.frame_left);
        state.give_back(started);
        let control = state.take().unwrap();
        assert_eq!(
            (control.bulk, wire(&control.queue)),
            (false, whole(&[ping(9)]))
        );
        let bulk = state.take().unwrap();
        assert_eq!((bulk.bulk, wire(&bulk.queue)), (true, whole(&[ping(2)])));
        assert!(state.take().is_none());
    }

    #[test]
    fn a_large_payload_is_queued_as_its_own_segment_and_counted_in_full() {
        let frames = [
            ping(1),
            push(2, 20_000),
            ping(3),
            push(4, 70_000),
            push(5, 10),
        ];
        let queue = encoded(&frames);
        assert_eq!(wire(&queue), whole(&frames), "the same bytes on the wire");
        assert_eq!(queue.len(), whole(&frames).len(), "payloads are counted");
        let Frame::Push(large) = &frames[3] else {
            unreachable!()
        };
        assert!(
            queue
                .segments()
                .any(|segment| segment.as_ptr() == large.request.input.as_ptr()),
            "the payload is the frame's own bytes, not a copy"
        );
        let mut slices = [IoSlice::new(&[]); 3];
        let filled = queue.slices(30, &mut slices);
        let limited: Vec<u8> = slices[..filled]
            .iter()
            .flat_map(|s| s.iter().copied())
            .collect();
        assert_eq!(
            limited,
            whole(&frames)[..30],
            "a limit cuts inside a segment"
        );
    }

    #[test]
    fn a_spliced_queue_advances_truncates_and_takes_back_its_bytes_exactly() {
        let frames = [push(1, 20_000), ping(2), push(3, 17_000)];
        let bytes = whole(&frames);
        // Every cut point around the segment edges, and a few in between.
        let first = whole(&frames[..1]).len();
        for cut in [
            0,
            1,
            30,
            31,
            40,
            5_000,
            first - 1,
            first,
            first + 1,
            bytes.len() - 1,
        ] {
            let mut queue = encoded(&frames);
            queue.advance(cut);
            assert_eq!(wire(&queue), bytes[cut..], "advanced by {cut}");
            assert_eq!(queue.len(), bytes.len() - cut);
            let mut kept = encoded(&frames);
            kept.truncate(cut);
            assert_eq!(wire(&kept), bytes[..cut], "truncated to {cut}");
            assert_eq!(kept.len(), cut);
            // Taken, partly written, and given back ahead of newer frames.
            let mut lane = encoded(&frames);
            let mut taken = lane.take();
            taken.advance(cut);
            lane.push_frame(&(&push(4, 16_384)).into(), PROTOCOL_VERSION, 1 << 20)
                .unwrap();
            lane.push_frame(&(&ping(5)).into(), PROTOCOL_VERSION, 1 << 20)
                .unwrap();
            lane.prepend(taken);
            let mut expected = bytes[cut..].to_vec();
            expected.extend(whole(&[push(4, 16_384), ping(5)]));
            assert_eq!(wire(&lane), expected, "given back after {cut}");
            assert_eq!(lane.len(), expected.len());
        }
    }

    #[test]
    fn frame_boundaries_are_found_across_payload_segments() {
        let frames = [push(1, 20_000), ping(2)];
        let first = whole(&frames[..1]).len();
        let mut piece = Piece {
            queue: encoded(&frames),
            frame_left: 0,
            bulk: true,
        };
        assert_eq!(piece.to_boundary(), first);
        piece.advance(first - 7);
        assert_eq!(piece.to_boundary(), 7);
        assert_eq!(piece.keep_current_frame(), whole(&frames[1..]).len());
        piece.advance(7);
        assert!(piece.is_empty());
    }
}
