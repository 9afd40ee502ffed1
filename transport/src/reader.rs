//! Frames read from a socket into a buffer that grows under load and shrinks back when idle,
//! and decoded where they lie in it.

use std::future::Future;
use std::pin::Pin;
use std::task::{ready, Context, Poll};
use std::time::Duration;

use bytes::{Buf, BufMut, Bytes, BytesMut};
use lintel_wire::framing::LENGTH_PREFIX_LEN;
use lintel_wire::{
    decode_body_ref, frame_len, CodecError, DecodeError, Foreign, Frame, FrameRef, FrameSlots,
    PROTOCOL_VERSION, SHARE_MIN,
};
use tokio::time::Sleep;

use super::batch;
use super::socket::ReadSocket;

/// Room reserved for the first read, and the least reserved for any read.
const MIN_READ: usize = 512;

/// Most room reserved for one read: enough for hundreds of small frames per syscall.
const MAX_READ: usize = 64 * 1024;

/// A drained buffer is released once it is this many times the room reads now want, so a
/// connection that was busy once does not keep its peak buffer while idle.
const SHRINK_FACTOR: usize = 4;

/// The frames of one socket, each lent as a [`FrameRef`] until the next is asked for: a hot
/// frame's names and payload are read where they lie in the read buffer. Whatever must outlive
/// that turn takes an owned copy (`into_owned`), so no view holds a read buffer.
///
/// Before reading again after handing out frames, it writes what the polling task batched,
/// so answers to those frames go out before it takes more.
#[derive(Debug)]
pub struct FrameReader {
    socket: ReadSocket,
    /// Longest frame body accepted: a length over it is refused, never room to make.
    max_frame_len: usize,
    buf: BytesMut,
    /// Bytes at the front of `buf` of the frame lent last, let go when the next is asked for.
    lent: usize,
    /// A frame of [`SHARE_MIN`] bytes or more, lent from a buffer of its own whose slices
    /// can outlive it.
    large: Option<Bytes>,
    /// `large` was lent, and goes when the next frame is asked for.
    large_lent: bool,
    /// What the frame lent last keeps beside the buffer: a cold frame decoded into owned
    /// fields, a large payload's share of `large`.
    slots: FrameSlots,
    /// The connection's protocol version: a kind of a later one ends the stream with
    /// [`DecodeError::KindTooNew`].
    version: u16,
    /// Room to reserve for the next read: doubles when a read fills it (up to [`MAX_READ`]),
    /// grows to hold a whole frame as large as the last one handed out, halves when a read
    /// uses under a quarter of it.
    want: usize,
    /// Frames were handed out since the last read.
    handed_out: bool,
    /// The stream ended, cleanly or on an error.
    done: bool,
    /// How long a frame may take to arrive once its first byte has; `None` is forever.
    frame_timeout: Option<Duration>,
    /// When the frame being read must be whole; kept between frames and reset, not rebuilt.
    deadline: Option<Pin<Box<Sleep>>>,
    /// `deadline` runs for the partial frame now buffered.
    armed: bool,
}

/// The error a frame that arrived too slowly ends the stream with: an I/O error of kind
/// [`std::io::ErrorKind::TimedOut`].
pub fn is_frame_timeout(err: &CodecError) -> bool {
    matches!(err, CodecError::Io(err) if err.kind() == std::io::ErrorKind::TimedOut)
}

impl FrameReader {
    pub(super) fn new(socket: ReadSocket, max_frame_len: usize) -> Self {
        Self {
            socket,
            max_frame_len,
            buf: BytesMut::new(),
            lent: 0,
            large: None,
            large_lent: false,
            slots: FrameSlots::default(),
            version: PROTOCOL_VERSION,
            want: MIN_READ,
            handed_out: false,
            done: false,
            frame_timeout: None,
            deadline: None,
            armed: false,
        }
    }

    /// Reads the connection as one of `version` from now on: a frame of a kind a later version
    /// introduced is not a frame of this connection ([`DecodeError::KindTooNew`]), what the
    /// negotiated version does not allow is refused as it is read.
    pub fn speak(&mut self, version: u16) {
        self.version = self.version.min(version);
    }

    /// Ends the stream with a [`is_frame_timeout`] error when a frame takes longer than
    /// `timeout` to arrive once its first byte has: a peer that dribbles bytes holds nothing.
    pub fn set_frame_timeout(&mut self, timeout: Option<Duration>) {
        self.frame_timeout = timeout;
        self.deadline = None;
        self.armed = false;
    }

    /// Starts the clock for a partly buffered frame, once per frame: the reader is about to
    /// wait for the rest of it. Frames handed out whole never touch the timer.
    fn watch_partial(&mut self) {
        let Some(timeout) = self.frame_timeout else {
            return;
        };
        if self.buf.is_empty() {
            self.armed = false;
            return;
        }
        if self.armed {
            return;
        }
        self.armed = true;
        let at = tokio::time::Instant::now() + timeout;
        match self.deadline.as_mut() {
            Some(deadline) => deadline.as_mut().reset(at),
            None => self.deadline = Some(Box::pin(tokio::time::sleep_until(at))),
        }
    }

    /// The socket's read half.
    pub fn get_ref(&self) -> &ReadSocket {
        &self.socket
    }

    /// Makes room for the rest of a frame partly buffered whose length is in, so the
    /// decoder need not grow the buffer itself.
    fn room_for_partial_frame(&mut self) {
        if let Some(rest) = frame_rest(&self.buf, self.max_frame_len) {
            self.make_room(rest);
        }
    }

    /// Leaves room for `room` more bytes: in place when the buffer is ours alone, otherwise in
    /// a new buffer holding only the buffered bytes. Never by growing the allocation, which
    /// would copy all of it, consumed bytes included.
    #[inline]
    fn make_room(&mut self, room: usize) {
        if self.buf.capacity() - self.buf.len() >= room || self.buf.try_reclaim(room) {
            return;
        }
        let mut fresh = BytesMut::with_capacity(self.buf.len().saturating_add(room));
        fresh.extend_from_slice(&self.buf);
        self.buf = fresh;
    }

    /// A frame of [`SHARE_MIN`] bytes or more is partly buffered.
    fn large_partial(&self) -> bool {
        frame_rest(&self.buf, self.max_frame_len)
            .is_some_and(|rest| self.buf.len().saturating_add(rest) >= SHARE_MIN)
    }

    /// Reads once into the buffer; `Ok(0)` at end of stream.
    ///
    /// A large frame partly buffered is read to its end and no further: the next frame
    /// starts a buffer of its own, instead of being copied out of one that the large frame's
    /// payload, handed out as a slice, still holds.
    fn poll_fill(&mut self, cx: &mut Context<'_>) -> Poll<std::io::Result<usize>> {
        if self.buf.is_empty() && self.buf.capacity() > SHRINK_FACTOR * self.want {
            self.buf = BytesMut::new();
        }
        let large_rest = frame_rest(&self.buf, self.max_frame_len)
            .filter(|rest| self.buf.len().saturating_add(*rest) >= SHARE_MIN);
        if large_rest.is_none() {
            self.make_room(self.want);
        }
        let room = self.buf.capacity() - self.buf.len();
        let mut limited = (&mut self.buf).limit(large_rest.unwrap_or(usize::MAX));
        let polled = tokio_util::io::poll_read_buf(Pin::new(&mut self.socket), cx, &mut limited);
        let Poll::Ready(read) = polled else {
            // Waiting with nothing buffered: the room is let go, so an idle connection holds
            // no read buffer; a busy one takes it back with its next read.
            if self.buf.is_empty() {
                self.buf = BytesMut::new();
            }
            return Poll::Pending;
        };
        let read = read?;
        if large_rest.is_some() {
            // Cut short on purpose: says nothing of how much the socket had.
        } else if read >= room {
            self.want = (self.want * 2).min(MAX_READ).max(self.want);
        } else if read < self.want / 4 && !self.large_partial() {
            // A large frame only partly in keeps the room that will hold the next one whole.
            self.want = (self.want / 2).max(MIN_READ);
        }
        Poll::Ready(Ok(read))
    }
}

/// Bytes missing from a partly buffered frame whose length prefix is in and within
/// `max_frame_len` (a longer one is the decoder's to refuse); `None` otherwise.
fn frame_rest(buf: &[u8], max_frame_len: usize) -> Option<usize> {
    let prefix = buf.get(..LENGTH_PREFIX_LEN)?;
    let body = u32::from_be_bytes(<[u8; LENGTH_PREFIX_LEN]>::try_from(prefix).ok()?);
    let body = usize::try_from(body)
        .ok()
        .filter(|body| *body <= max_frame_len)?;
    let total = LENGTH_PREFIX_LEN.saturating_add(body);
    total.checked_sub(buf.len()).filter(|rest| *rest > 0)
}

/// `err`, or what the bytes are when an oversize length is another protocol's start.
fn recognised(err: CodecError, buf: &[u8]) -> CodecError {
    match (&err, Foreign::recognise(buf)) {
        (CodecError::Decode(DecodeError::Oversize { .. }), Some(foreign)) => {
            CodecError::Foreign(foreign)
        }
        _ => err,
    }
}

/// What [`FrameReader::poll_ready`] found at the front of the buffer.
#[derive(Debug)]
enum Ready {
    /// A whole frame of this many bytes, prefix included, at the front of `buf`.
    Buffered(usize),
    /// A whole large frame, its body in `large`.
    Large,
    /// The stream ended cleanly.
    End,
}

impl FrameReader {
    /// The next frame, lent until the next call; `None` once the stream has ended.
    ///
    /// Cancel-safe: a frame partly read stays buffered.
    pub fn next_frame(&mut self) -> NextFrame<'_> {
        NextFrame { reader: Some(self) }
    }

    /// The next frame, owned: for the few frames of a handshake, and for tests.
    ///
    /// Cancel-safe, as [`FrameReader::next_frame`].
    pub async fn next_owned(&mut self) -> Option<Result<Frame, CodecError>> {
        self.next_frame()
            .await
            .map(|frame| frame.map(FrameRef::into_owned))
    }

    /// Waits until the next frame can be lent at once, or the stream ended or failed; then
    /// [`FrameReader::take`] lends it. For a loop that reads the frame where it lies instead of
    /// moving it out of a `select!`. Cancel-safe, and a frame found but not taken is found again.
    pub fn ready(&mut self) -> FrameReady<'_> {
        FrameReady { reader: self }
    }

    /// Lends what [`FrameReader::ready`] found, as [`FrameReader::next_frame`] would.
    #[inline(always)]
    pub fn take(&mut self, found: Found) -> Option<Result<FrameRef<'_>, CodecError>> {
        match found.0 {
            Ok(ready) => self.lend(ready),
            Err(err) => Some(Err(err)),
        }
    }

    /// Lets go of the frame lent last.
    fn release(&mut self) {
        if self.lent > 0 {
            self.buf.advance(std::mem::take(&mut self.lent));
        }
        if std::mem::take(&mut self.large_lent) {
            self.large = None;
        }
        self.slots.clear();
    }

    /// Waits until a whole frame is buffered, or the stream ended or failed.
    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<Ready, CodecError>> {
        self.release();
        if self.large.is_some() {
            // Found before, and not taken.
            return Poll::Ready(Ok(Ready::Large));
        }
        loop {
            if self.done {
                return Poll::Ready(Ok(Ready::End));
            }
            self.room_for_partial_frame();
            match frame_len(&self.buf, self.max_frame_len) {
                Ok(Some(total)) => {
                    self.handed_out = true;
                    // Room for a whole frame as large as this one, so the next such frame
                    // lands in one allocation instead of being moved as it grows.
                    if total > self.want {
                        self.want = total.saturating_add(MIN_READ);
                    }
                    // What is left, if anything, is the start of the next frame: its clock
                    // starts if the reader has to wait for the rest.
                    self.armed = false;
                    if total - LENGTH_PREFIX_LEN < SHARE_MIN {
                        return Poll::Ready(Ok(Ready::Buffered(total)));
                    }
                    // Large payloads become slices of the body, which keeps only its own
                    // bytes alive.
                    self.buf.advance(LENGTH_PREFIX_LEN);
                    let body = self.buf.split_to(total - LENGTH_PREFIX_LEN).freeze();
                    self.large = Some(body);
                    return Poll::Ready(Ok(Ready::Large));
                }
                Ok(None) => self.watch_partial(),
                Err(err) => {
                    self.done = true;
                    return Poll::Ready(Err(recognised(err.into(), &self.buf)));
                }
            }
            if let Some(deadline) = self.deadline.as_mut().filter(|_| self.armed) {
                if deadline.as_mut().poll(cx).is_ready() {
                    self.done = true;
                    let late = std::io::Error::new(
                        std::io::ErrorKind::TimedOut,
                        "a frame took too long to arrive",
                    );
                    return Poll::Ready(Err(CodecError::Io(late)));
                }
            }
            if std::mem::take(&mut self.handed_out) {
                batch::flush();
            }
            match ready!(self.poll_fill(cx)) {
                Ok(0) => {
                    self.done = true;
                    if !self.buf.is_empty() {
                        return Poll::Ready(Err(CodecError::Truncated {
                            buffered: self.buf.len(),
                        }));
                    }
                }
                Ok(_) => {}
                Err(err) => {
                    self.done = true;
                    return Poll::Ready(Err(CodecError::Io(err)));
                }
            }
        }
    }

    /// Lends the frame [`FrameReader::poll_ready`] found.
    #[inline(always)]
    fn lend(&mut self, ready: Ready) -> Option<Result<FrameRef<'_>, CodecError>> {
        // A body that is not a frame ends the stream.
        let done = &mut self.done;
        let fail = |err| {
            *done = true;
            CodecError::Decode(err)
        };
        Some(match ready {
            Ready::End => return None,
            Ready::Buffered(total) => {
                self.lent = total;
                let body = self.buf.get(LENGTH_PREFIX_LEN..total).unwrap_or_default();
                decode_body_ref(body, self.version, None, &mut self.slots, fail)
            }
            Ready::Large => {
                self.large_lent = true;
                let body = self.large.as_ref()?;
                decode_body_ref(body, self.version, Some(body), &mut self.slots, fail)
            }
        })
    }
}

/// What [`FrameReader::ready`] found: a frame to take, the end of the stream or its failure.
#[derive(Debug)]
pub struct Found(Result<Ready, CodecError>);

impl Found {
    /// The stream ended, cleanly or on an error.
    pub fn is_end(&self) -> bool {
        !matches!(self.0, Ok(Ready::Buffered(_) | Ready::Large))
    }
}

/// The future of [`FrameReader::ready`].
pub struct FrameReady<'r> {
    reader: &'r mut FrameReader,
}

impl Future for FrameReady<'_> {
    type Output = Found;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Found> {
        self.reader.poll_ready(cx).map(Found)
    }
}

/// The future of [`FrameReader::next_frame`].
pub struct NextFrame<'r> {
    reader: Option<&'r mut FrameReader>,
}

impl<'r> Future for NextFrame<'r> {
    type Output = Option<Result<FrameRef<'r>, CodecError>>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let Some(reader) = self.reader.take() else {
            return Poll::Ready(None);
        };
        match reader.poll_ready(cx) {
            Poll::Pending => {
                self.reader = Some(reader);
                Poll::Pending
            }
            Poll::Ready(found) => Poll::Ready(reader.take(Found(found))),
        }
    }
}

#[cfg(test)]
mod tests {
    use lintel_wire::{encode_frame, Frame, Ping, DEFAULT_MAX_FRAME_LEN};
    use tokio::io::AsyncWriteExt;
    use tokio::net::{TcpListener, TcpStream};

    use super::{FrameReader, MAX_READ, MIN_READ, SHRINK_FACTOR};
    use crate::{fixtures, Socket};

    async fn pair() -> (FrameReader, TcpStream) {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let (client, accepted) = tokio::join!(TcpStream::connect(addr), listener.accept());
        let (read, _write) = Socket::from(accepted.unwrap().0).into_halves();
        (
            FrameReader::new(read, DEFAULT_MAX_FRAME_LEN),
            client.unwrap(),
        )
    }

    fn push(len: usize) -> Frame {
        fixtures::push(1, 1, bytes::Bytes::from(vec![3u8; len]))
    }

    fn pings(from: u64, count: u64) -> Vec<u8> {
        let mut bytes = bytes::BytesMut::new();
        for nonce in from..from + count {
            encode_frame(&Frame::Ping(Ping { nonce }), 1, &mut bytes, 1 << 20).unwrap();
        }
        bytes.to_vec()
    }

    #[tokio::test]
    async fn reads_grow_under_a_burst_and_the_buffer_is_let_go_when_traffic_thins() {
        let (mut reader, mut peer) = pair().await;
        let burst = 20_000;
        peer.write_all(&pings(0, burst)).await.unwrap();
        for nonce in 0..burst {
            assert_eq!(
                reader.next_owned().await.unwrap().unwrap(),
                Frame::Ping(Ping { nonce })
            );
        }
        assert!(reader.want > MIN_READ, "a burst grows the reads");

        // One frame at a time: each read uses a sliver of its room, so the room shrinks back.
        for nonce in burst..burst + 64 {
            peer.write_all(&pings(nonce, 1)).await.unwrap();
            assert_eq!(
                reader.next_owned().await.unwrap().unwrap(),
                Frame::Ping(Ping { nonce })
            );
        }
        assert_eq!(reader.want, MIN_READ);
        assert!(reader.buf.capacity() <= SHRINK_FACTOR * MIN_READ);
    }

    #[tokio::test]
    async fn a_reader_waiting_with_nothing_buffered_holds_no_read_buffer() {
        let (mut reader, mut peer) = pair().await;
        peer.write_all(&pings(7, 1)).await.unwrap();
        assert_eq!(
            reader.next_owned().await.unwrap().unwrap(),
            Frame::Ping(Ping { nonce: 7 })
        );
        let waited =
            tokio::time::timeout(std::time::Duration::from_millis(50), reader.next_owned()).await;
        assert!(waited.is_err());
        assert_eq!(
            reader.buf.capacity(),
            0,
            "an idle connection keeps no read room"
        );
        peer.write_all(&pings(8, 1)).await.unwrap();
        assert_eq!(
            reader.next_owned().await.unwrap().unwrap(),
            Frame::Ping(Ping { nonce: 8 })
        );
    }

    #[tokio::test]
    async fn room_for_large_frames_is_kept_while_they_come_and_let_go_when_the_reader_waits() {
        let (mut reader, mut peer) = pair().await;
        let frame = Frame::Ping(Ping { nonce: 1 });
        let mut large = bytes::BytesMut::new();
        let push = push(2 * MAX_READ);
        encode_frame(&push, 3, &mut large, 1 << 20).unwrap();
        encode_frame(&push, 3, &mut large, 1 << 20).unwrap();
        peer.write_all(&large).await.unwrap();
        for _ in 0..2 {
            assert_eq!(reader.next_owned().await.unwrap().unwrap(), push);
        }
        assert!(
            reader.want > 2 * MAX_READ,
            "reads grew to hold a whole large frame"
        );
        // Nothing more to read: the reader waits, and lets the large room go.
        let waited =
            tokio::time::timeout(std::time::Duration::from_millis(50), reader.next_owned()).await;
        assert!(waited.is_err());
        assert_eq!(reader.buf.capacity(), 0);
        peer.write_all(&pings(1, 1)).await.unwrap();
        assert_eq!(reader.next_owned().await.unwrap().unwrap(), frame);
    }

    #[tokio::test]
    async fn a_large_frame_is_read_to_its_end_and_no_further() {
        let (mut reader, mut peer) = pair().await;
        let large = push(3 * MAX_READ);
        let mut bytes = bytes::BytesMut::new();
        encode_frame(&large, 3, &mut bytes, 1 << 20).unwrap();
        encode_frame(&large, 3, &mut bytes, 1 << 20).unwrap();
        bytes.extend_from_slice(&pings(5, 1));
        peer.write_all(&bytes).await.unwrap();
        // Its first read says how large it is; later reads stop at its end, so the next
        // frame is not in the buffer its payload slice holds.
        assert_eq!(reader.next_owned().await.unwrap().unwrap(), large);
        assert!(reader.buf.is_empty(), "nothing past the frame was read");
        // A read from a frame boundary reads what room it reserved: at most a sliver more.
        assert_eq!(reader.next_owned().await.unwrap().unwrap(), large);
        assert!(reader.buf.len() <= MIN_READ);
        assert_eq!(
            reader.next_owned().await.unwrap().unwrap(),
            Frame::Ping(Ping { nonce: 5 })
        );
    }

    #[tokio::test]
    async fn a_frame_found_but_not_taken_is_found_again() {
        let (mut reader, mut peer) = pair().await;
        let large = push(2 * lintel_wire::SHARE_MIN);
        let mut bytes = bytes::BytesMut::new();
        encode_frame(&large, 3, &mut bytes, 1 << 20).unwrap();
        bytes.extend_from_slice(&pings(3, 1));
        peer.write_all(&bytes).await.unwrap();
        for expected in [large, Frame::Ping(Ping { nonce: 3 })] {
            // Found, then dropped unused: the frame stays for the next wait.
            let _ = reader.ready().await;
            let found = reader.ready().await;
            let taken = reader.take(found).unwrap().unwrap().into_owned();
            assert_eq!(taken, expected);
        }
        drop(peer);
        let found = reader.ready().await;
        assert!(found.is_end());
        assert!(reader.take(found).is_none(), "the stream ended");
    }
}
