//! Frames read from a socket into a buffer that grows under load and shrinks back when idle.

use std::future::Future;
use std::pin::Pin;
use std::task::{ready, Context, Poll};
use std::time::Duration;

use bytes::BytesMut;
use futures_util::Stream;
use lintel_wire::{CodecError, Frame, FrameCodec};
use tokio::time::Sleep;
use tokio_util::codec::Decoder;

use super::batch;
use super::socket::ReadSocket;

/// Room reserved for the first read, and the least reserved for any read.
const MIN_READ: usize = 512;

/// Most room reserved for one read: enough for hundreds of small frames per syscall.
const MAX_READ: usize = 64 * 1024;

/// A drained buffer is released once it is this many times the room reads now want, so a
/// connection that was busy once does not keep its peak buffer while idle.
const SHRINK_FACTOR: usize = 4;

/// A stream of frames from one socket.
///
/// Before reading again after handing out frames, it writes what the polling task batched,
/// so answers to those frames go out before it takes more.
#[derive(Debug)]
pub struct FrameReader {
    socket: ReadSocket,
    codec: FrameCodec,
    buf: BytesMut,
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
            codec: FrameCodec::new(max_frame_len),
            buf: BytesMut::new(),
            want: MIN_READ,
            handed_out: false,
            done: false,
            frame_timeout: None,
            deadline: None,
            armed: false,
        }
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

    /// Reads once into the buffer; `Ok(0)` at end of stream.
    fn poll_fill(&mut self, cx: &mut Context<'_>) -> Poll<std::io::Result<usize>> {
        if self.buf.is_empty() && self.buf.capacity() > SHRINK_FACTOR * self.want {
            self.buf = BytesMut::new();
        }
        let spare = self.buf.capacity() - self.buf.len();
        if spare < self.want {
            self.buf.reserve(self.want);
        }
        let room = self.buf.capacity() - self.buf.len();
        let polled = tokio_util::io::poll_read_buf(Pin::new(&mut self.socket), cx, &mut self.buf);
        let Poll::Ready(read) = polled else {
            // Waiting with nothing buffered: the room is let go, so an idle connection holds
            // no read buffer; a busy one takes it back with its next read.
            if self.buf.is_empty() {
                self.buf = BytesMut::new();
            }
            return Poll::Pending;
        };
        let read = read?;
        if read >= room {
            self.want = (self.want * 2).min(MAX_READ).max(self.want);
        } else if read < self.want / 4 {
            self.want = (self.want / 2).max(MIN_READ);
        }
        Poll::Ready(Ok(read))
    }
}

impl Stream for FrameReader {
    type Item = Result<Frame, CodecError>;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        let this = &mut *self;
        loop {
            if this.done {
                return Poll::Ready(None);
            }
            let buffered = this.buf.len();
            match this.codec.decode(&mut this.buf) {
                Ok(Some(frame)) => {
                    this.handed_out = true;
                    // Room for a whole frame as large as this one, so the next such frame
                    // lands in one allocation instead of being moved as it grows.
                    let took = buffered.saturating_sub(this.buf.len());
                    if took > this.want {
                        this.want = took.saturating_add(MIN_READ);
                    }
                    // What is left, if anything, is the start of the next frame: its clock
                    // starts if the reader has to wait for the rest.
                    this.armed = false;
                    return Poll::Ready(Some(Ok(frame)));
                }
                Ok(None) => this.watch_partial(),
                Err(err) => {
                    this.done = true;
                    return Poll::Ready(Some(Err(err)));
                }
            }
            if let Some(deadline) = this.deadline.as_mut().filter(|_| this.armed) {
                if deadline.as_mut().poll(cx).is_ready() {
                    this.done = true;
                    let late = std::io::Error::new(
                        std::io::ErrorKind::TimedOut,
                        "a frame took too long to arrive",
                    );
                    return Poll::Ready(Some(Err(CodecError::Io(late))));
                }
            }
            if std::mem::take(&mut this.handed_out) {
                batch::flush();
            }
            match ready!(this.poll_fill(cx)) {
                Ok(0) => {
                    this.done = true;
                    return Poll::Ready(match this.codec.decode_eof(&mut this.buf) {
                        Ok(frame) => frame.map(Ok),
                        Err(err) => Some(Err(err)),
                    });
                }
                Ok(_) => {}
                Err(err) => {
                    this.done = true;
                    return Poll::Ready(Some(Err(CodecError::Io(err))));
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use futures_util::StreamExt;
    use lintel_wire::{encode_frame, Frame, Ping, DEFAULT_MAX_FRAME_LEN};
    use tokio::io::AsyncWriteExt;
    use tokio::net::{TcpListener, TcpStream};

    use super::{FrameReader, MAX_READ, MIN_READ, SHRINK_FACTOR};
    use crate::transport::Socket;

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
        Frame::from(lintel_wire::Push {
            correlation: 1,
            request: lintel_wire::DispatchRequest {
                namespace: "ns".into(),
                task_queue: String::new(),
                activity_type: "echo".into(),
                node: None,
                workflow_id: "wf".into(),
                ordinal: 1,
                run_id: None,
                attempt: 1,
                input: bytes::Bytes::from(vec![3u8; len]),
                deadline_unix_ms: None,
            },
        })
    }

    fn pings(from: u64, count: u64) -> Vec<u8> {
        let mut bytes = bytes::BytesMut::new();
        for nonce in from..from + count {
            encode_frame(&Frame::Ping(Ping { nonce }), &mut bytes, 1 << 20).unwrap();
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
                reader.next().await.unwrap().unwrap(),
                Frame::Ping(Ping { nonce })
            );
        }
        assert!(reader.want > MIN_READ, "a burst grows the reads");

        // One frame at a time: each read uses a sliver of its room, so the room shrinks back.
        for nonce in burst..burst + 64 {
            peer.write_all(&pings(nonce, 1)).await.unwrap();
            assert_eq!(
                reader.next().await.unwrap().unwrap(),
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
            reader.next().await.unwrap().unwrap(),
            Frame::Ping(Ping { nonce: 7 })
        );
        let waited =
            tokio::time::timeout(std::time::Duration::from_millis(50), reader.next()).await;
        assert!(waited.is_err());
        assert_eq!(
            reader.buf.capacity(),
            0,
            "an idle connection keeps no read room"
        );
        peer.write_all(&pings(8, 1)).await.unwrap();
        assert_eq!(
            reader.next().await.unwrap().unwrap(),
            Frame::Ping(Ping { nonce: 8 })
        );
    }

    #[tokio::test]
    async fn room_for_large_frames_is_kept_while_they_come_and_let_go_when_the_reader_waits() {
        let (mut reader, mut peer) = pair().await;
        let frame = Frame::Ping(Ping { nonce: 1 });
        let mut large = bytes::BytesMut::new();
        let push = push(2 * MAX_READ);
        encode_frame(&push, &mut large, 1 << 20).unwrap();
        encode_frame(&push, &mut large, 1 << 20).unwrap();
        peer.write_all(&large).await.unwrap();
        for _ in 0..2 {
            assert_eq!(reader.next().await.unwrap().unwrap(), push);
        }
        assert!(
            reader.want > 2 * MAX_READ,
            "reads grew to hold a whole large frame"
        );
        // Nothing more to read: the reader waits, and lets the large room go.
        let waited =
            tokio::time::timeout(std::time::Duration::from_millis(50), reader.next()).await;
        assert!(waited.is_err());
        assert_eq!(reader.buf.capacity(), 0);
        peer.write_all(&pings(1, 1)).await.unwrap();
        assert_eq!(reader.next().await.unwrap().unwrap(), frame);
    }
}
