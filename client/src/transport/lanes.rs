//! The two lanes of a connection's outbound queue and their bookkeeping: what is queued in
//! each, what a writing party holds, and in which order bytes are taken to be written.
//!
//! Bulk frames ([`Frame::Push`], [`Frame::Relay`]) carry work and its inputs; every other frame
//! is control. A writing party takes a [`Piece`] at a time: the rest of a started bulk frame,
//! then every control frame, then bulk frames, so control frames overtake bulk ones only at
//! a frame boundary. All of it lives under the outbound's one lock.

use tokio::time::Instant;

use bytes::{Buf, BytesMut};
use lintel_wire::framing::LENGTH_PREFIX_LEN;
use lintel_wire::Frame;

/// A buffer larger than this is released after it drains, so an idle connection stays small.
pub(super) const KEEP_BUFFER_BYTES: usize = 64 * 1024;

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

/// The lane a frame waits in; see the module docs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Lane {
    Control,
    Bulk,
}

impl Lane {
    pub(super) fn of(frame: &Frame) -> Self {
        match frame {
            Frame::Push(_) | Frame::Relay(_) => Lane::Bulk,
            _ => Lane::Control,
        }
    }
}

/// Who writes to the socket next; everyone else only appends to the lanes.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub(super) enum Owner {
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
pub(super) struct Piece {
    pub(super) buf: BytesMut,
    /// Bytes left of the frame at the front of `buf`; 0 when `buf` starts at a frame boundary.
    pub(super) frame_left: usize,
    /// Bulk bytes, which a waiting control frame may cut at a frame boundary.
    pub(super) bulk: bool,
}

impl Piece {
    /// Consumes `written` bytes, keeping track of where the current frame ends.
    pub(super) fn advance(&mut self, mut written: usize) {
        while written > 0 && !self.buf.is_empty() {
            if self.frame_left == 0 {
                self.frame_left = next_frame_len(&self.buf);
            }
            let step = written.min(self.frame_left).min(self.buf.len());
            self.buf.advance(step);
            self.frame_left -= step;
            written -= step;
        }
    }

    /// Bytes to the next frame boundary: the rest of the current frame, or all of the next.
    pub(super) fn to_boundary(&self) -> usize {
        if self.frame_left > 0 {
            self.frame_left
        } else {
            next_frame_len(&self.buf)
        }
    }

    /// Drops every frame after the current one; returns how many bytes went.
    pub(super) fn keep_current_frame(&mut self) -> usize {
        let keep = if self.frame_left > 0 {
            self.frame_left
        } else {
            0
        };
        let dropped = self.buf.len().saturating_sub(keep);
        self.buf.truncate(keep);
        dropped
    }
}

/// The length, prefix included, of the frame at the front of `buf` (all of `buf` if it is
/// too short to say, which the lanes never are).
pub(super) fn next_frame_len(buf: &[u8]) -> usize {
    let body = buf
        .get(..LENGTH_PREFIX_LEN)
        .and_then(|prefix| <[u8; 4]>::try_from(prefix).ok())
        .map(u32::from_be_bytes)
        .and_then(|len| usize::try_from(len).ok());
    match body {
        Some(body) => (LENGTH_PREFIX_LEN + body).min(buf.len()),
        None => buf.len(),
    }
}

#[derive(Debug, Default)]
pub(super) struct State {
    /// The bounds, kept under the same lock as what they bound.
    pub(super) limits: QueueLimits,
    /// Encoded control frames not yet taken.
    pub(super) control: BytesMut,
    /// Bytes left of the frame at the front of `control`; 0 at a boundary.
    pub(super) control_left: usize,
    /// Encoded bulk frames not yet taken.
    pub(super) bulk: BytesMut,
    /// Bulk bytes handed back unwritten, older than `bulk`, so written before it.
    pub(super) resume: BytesMut,
    /// Bytes left of the frame at the front of `resume`; 0 at a boundary.
    pub(super) resume_left: usize,
    /// Frames in `control` and `bulk`, against the frame bound.
    pub(super) control_frames: usize,
    pub(super) bulk_frames: usize,
    /// Bytes a writing party took and has not written yet.
    pub(super) in_hand: usize,
    /// Since when the queue has been at or over a bound, while it is.
    pub(super) full_since: Option<Instant>,
    /// An owed frame was refused at the ceiling.
    pub(super) overflowed: bool,
    pub(super) owner: Owner,
    /// A batching scope holds the lanes and writes them when its poll ends.
    pub(super) held: bool,
    /// The last batch grew while the writer yielded: keep batching instead of writing directly.
    pub(super) busy: bool,
    /// When bytes last went to the socket.
    pub(super) last_write: Option<Instant>,
    /// A close was asked for: flush, then shut the write side.
    pub(super) closing: bool,
    /// Only the frame being written and the control lane go out before the close.
    pub(super) discarding: bool,
    /// The writer has stopped.
    pub(super) stopped: bool,
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
                buf: self.control.split(),
                frame_left: std::mem::take(&mut self.control_left),
                bulk: false,
            }
        } else if !self.resume.is_empty() {
            Piece {
                buf: self.resume.split(),
                frame_left: std::mem::take(&mut self.resume_left),
                bulk: true,
            }
        } else if !self.bulk.is_empty() {
            self.bulk_frames = 0;
            Piece {
                buf: self.bulk.split(),
                frame_left: 0,
                bulk: true,
            }
        } else {
            return None;
        };
        self.in_hand = piece.buf.len();
        Some(piece)
    }

    /// Gives back the unwritten rest of `piece`, to go out before its lane's newer frames.
    pub(super) fn give_back(&mut self, mut piece: Piece) {
        self.in_hand = 0;
        if self.discarding {
            piece.keep_current_frame();
        }
        if piece.buf.is_empty() {
            return;
        }
        if piece.bulk {
            // Only the writing party fills `resume`, and it took it whole.
            let mut rest = piece.buf;
            rest.unsplit(std::mem::take(&mut self.resume));
            self.resume = rest;
            self.resume_left = piece.frame_left;
        } else {
            let mut rest = piece.buf;
            rest.unsplit(std::mem::take(&mut self.control));
            self.control = rest;
            self.control_left = piece.frame_left;
        }
    }

    /// Records `written` bytes of the piece in hand as written; true when that made room.
    pub(super) fn wrote(&mut self, written: usize, now: Instant) -> bool {
        self.in_hand = self.in_hand.saturating_sub(written);
        self.last_write = Some(now);
        self.note_fullness(|| now)
    }

    /// Lets go of large buffers once the lanes drained, so an idle connection stays small.
    pub(super) fn shrink(&mut self) {
        for buf in [&mut self.control, &mut self.bulk, &mut self.resume] {
            if buf.is_empty() && buf.capacity() > KEEP_BUFFER_BYTES {
                *buf = BytesMut::new();
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use bytes::BytesMut;
    use lintel_wire::{Frame, Ping};

    use super::*;

    fn encoded(frames: &[Frame]) -> BytesMut {
        let mut buf = BytesMut::new();
        for frame in frames {
            lintel_wire::encode_frame(frame, &mut buf, 1 << 20).unwrap();
        }
        buf
    }

    fn ping(nonce: u64) -> Frame {
        Frame::Ping(Ping { nonce })
    }

    #[test]
    fn a_piece_knows_where_its_current_frame_ends_across_partial_writes() {
        let frame_len = encoded(&[ping(300)]).len();
        let mut piece = Piece {
            buf: encoded(&[ping(300), ping(301), ping(302)]),
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
        assert_eq!(piece.buf.len(), frame_len - 3);
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
            (control.bulk, &control.buf[..]),
            (false, &encoded(&[ping(9)])[..])
        );
        let bulk = state.take().unwrap();
        assert_eq!((bulk.bulk, &bulk.buf[..]), (true, &encoded(&[ping(2)])[..]));
        assert!(state.take().is_none());
    }
}
