//! Frames read from a socket into a buffer that grows under load and shrinks back when idle.

use std::pin::Pin;
use std::task::{ready, Context, Poll};

use bytes::BytesMut;
use futures_util::Stream;
use lintel_wire::{CodecError, Frame, FrameCodec};
use tokio::net::tcp::OwnedReadHalf;
use tokio_util::codec::Decoder;

use super::batch;

/// Room reserved for the first read, and the least reserved for any read.
const MIN_READ: usize = 512;

/// Most room reserved for one read: enough for hundreds of small frames per syscall.
const MAX_READ: usize = 64 * 1024;

/// A drained buffer larger than this is released, so a connection that was busy once does
/// not keep its peak buffer while idle.
const KEEP_BYTES: usize = 2 * MAX_READ;

/// A stream of frames from one socket.
///
/// Before reading again after handing out frames, it writes what the polling task batched,
/// so answers to those frames go out before it takes more.
#[derive(Debug)]
pub struct FrameReader {
    socket: OwnedReadHalf,
    codec: FrameCodec,
    buf: BytesMut,
    /// Room to reserve for the next read: doubles when a read fills it, halves when one
    /// uses under a quarter of it.
    want: usize,
    /// Frames were handed out since the last read.
    handed_out: bool,
    /// The stream ended, cleanly or on an error.
    done: bool,
}

impl FrameReader {
    pub(super) fn new(socket: OwnedReadHalf, max_frame_len: usize) -> Self {
        Self {
            socket,
            codec: FrameCodec::new(max_frame_len),
            buf: BytesMut::new(),
            want: MIN_READ,
            handed_out: false,
            done: false,
        }
    }

    /// The socket's read half.
    pub fn get_ref(&self) -> &OwnedReadHalf {
        &self.socket
    }

    /// Reads once into the buffer; `Ok(0)` at end of stream.
    fn poll_fill(&mut self, cx: &mut Context<'_>) -> Poll<std::io::Result<usize>> {
        if self.buf.is_empty() && self.buf.capacity() > KEEP_BYTES {
            self.buf = BytesMut::new();
        }
        let spare = self.buf.capacity() - self.buf.len();
        if spare < self.want {
            self.buf.reserve(self.want);
        }
        let room = self.buf.capacity() - self.buf.len();
        let read = ready!(tokio_util::io::poll_read_buf(
            Pin::new(&mut self.socket),
            cx,
            &mut self.buf
        ))?;
        if read >= room {
            self.want = (self.want * 2).min(MAX_READ);
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
            match this.codec.decode(&mut this.buf) {
                Ok(Some(frame)) => {
                    this.handed_out = true;
                    return Poll::Ready(Some(Ok(frame)));
                }
                Ok(None) => {}
                Err(err) => {
                    this.done = true;
                    return Poll::Ready(Some(Err(err)));
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
