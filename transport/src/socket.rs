//! The byte stream under a framed connection: a TCP stream, or any pair of async read and
//! write halves (an in-memory pipe, a simulated network).
//!
//! TCP keeps its own path: senders write straight from their task with `try_write`, and the
//! write side shuts through the socket. Other halves are written only by the writer task, which
//! polls them like any `AsyncWrite`.

use std::fmt;
use std::future::{poll_fn, Future};
use std::io::{self, IoSlice};
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::{Mutex, PoisonError};
use std::task::{Context, Poll};

use socket2::SockRef;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::tcp::{OwnedReadHalf, OwnedWriteHalf};
use tokio::net::TcpStream;

/// Most bytes gathered into one write for a half that is not vectored: one TLS record.
const GATHER_BYTES: usize = 16 * 1024;

/// The read half of a connection other than TCP.
pub type BoxRead = Box<dyn AsyncRead + Send + Unpin>;
/// The write half of a connection other than TCP.
pub type BoxWrite = Box<dyn AsyncWrite + Send + Unpin>;

/// A connected byte stream, not yet split into a frame reader and a writer.
pub struct Socket(Inner);

enum Inner {
    Tcp(TcpStream),
    Io {
        read: BoxRead,
        write: BoxWrite,
        local_addr: Option<SocketAddr>,
    },
}

impl Socket {
    /// A connection over `read` and `write`, reporting `local_addr` as its local address.
    pub fn from_io(
        read: impl AsyncRead + Send + Unpin + 'static,
        write: impl AsyncWrite + Send + Unpin + 'static,
        local_addr: Option<SocketAddr>,
    ) -> Self {
        Self(Inner::Io {
            read: Box::new(read),
            write: Box::new(write),
            local_addr,
        })
    }

    /// The TCP stream under this socket, or the socket back when it runs over other halves.
    ///
    /// # Errors
    /// The socket itself, unchanged, when it is not TCP.
    pub fn into_tcp(self) -> Result<TcpStream, Self> {
        match self.0 {
            Inner::Tcp(stream) => Ok(stream),
            other => Err(Self(other)),
        }
    }

    pub(super) fn into_halves(self) -> (ReadSocket, WriteSocket) {
        match self.0 {
            Inner::Tcp(stream) => {
                let (read, write) = stream.into_split();
                (ReadSocket(ReadInner::Tcp(read)), WriteSocket::Tcp(write))
            }
            Inner::Io {
                read,
                write,
                local_addr,
            } => (
                ReadSocket(ReadInner::Io {
                    read: Mutex::new(read),
                    local_addr,
                }),
                WriteSocket::Io(Mutex::new(write)),
            ),
        }
    }
}

impl From<TcpStream> for Socket {
    fn from(stream: TcpStream) -> Self {
        Self(Inner::Tcp(stream))
    }
}

impl fmt::Debug for Socket {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.0 {
            Inner::Tcp(stream) => f.debug_tuple("Socket").field(stream).finish(),
            Inner::Io { local_addr, .. } => f
                .debug_struct("Socket")
                .field("local_addr", local_addr)
                .finish_non_exhaustive(),
        }
    }
}

/// The read half a [`FrameReader`](super::FrameReader) reads from.
pub struct ReadSocket(ReadInner);

enum ReadInner {
    Tcp(OwnedReadHalf),
    Io {
        /// Reached through `get_mut` alone, so never locked; the mutex makes the reader `Sync`.
        read: Mutex<BoxRead>,
        local_addr: Option<SocketAddr>,
    },
}

impl ReadSocket {
    /// The connection's local address.
    ///
    /// # Errors
    /// The socket's error, or [`io::ErrorKind::NotConnected`] for halves given without one.
    pub fn local_addr(&self) -> io::Result<SocketAddr> {
        match &self.0 {
            ReadInner::Tcp(read) => read.local_addr(),
            ReadInner::Io { local_addr, .. } => {
                local_addr.ok_or_else(|| io::ErrorKind::NotConnected.into())
            }
        }
    }
}

impl AsyncRead for ReadSocket {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        match &mut self.get_mut().0 {
            ReadInner::Tcp(read) => Pin::new(read).poll_read(cx, buf),
            ReadInner::Io { read, .. } => {
                let read = read.get_mut().unwrap_or_else(PoisonError::into_inner);
                Pin::new(read).poll_read(cx, buf)
            }
        }
    }
}

impl fmt::Debug for ReadSocket {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.0 {
            ReadInner::Tcp(read) => f.debug_tuple("ReadSocket").field(read).finish(),
            ReadInner::Io { local_addr, .. } => f
                .debug_struct("ReadSocket")
                .field("local_addr", local_addr)
                .finish_non_exhaustive(),
        }
    }
}

/// The write half an outbound buffer drains into.
pub(super) enum WriteSocket {
    Tcp(OwnedWriteHalf),
    /// Locked only within one poll, by the writer task alone.
    Io(Mutex<BoxWrite>),
}

impl WriteSocket {
    /// Writes what the socket takes of `bufs`, in order, now without waiting; halves other
    /// than TCP take nothing here (`WouldBlock`) and leave the write to the writer task.
    pub(super) fn try_write_vectored(&self, bufs: &[IoSlice<'_>]) -> io::Result<usize> {
        match self {
            Self::Tcp(write) => write.try_write_vectored(bufs),
            Self::Io(_) => Err(io::ErrorKind::WouldBlock.into()),
        }
    }

    /// Writes some of `bufs`, in order, waiting until the socket takes at least one byte or
    /// fails. A half that is not vectored gets small slices gathered into one write and a
    /// large one alone, uncopied.
    pub(super) async fn write_vectored(&self, bufs: &[IoSlice<'_>]) -> io::Result<usize> {
        match self {
            Self::Tcp(write) => loop {
                write.writable().await?;
                match write.try_write_vectored(bufs) {
                    Err(err) if err.kind() == io::ErrorKind::WouldBlock => {}
                    written => return written,
                }
            },
            // Flushed before returning: a half that buffers (TLS) would otherwise hold the
            // tail of the last batch until the next write.
            Self::Io(write) => {
                let vectored = write
                    .lock()
                    .unwrap_or_else(PoisonError::into_inner)
                    .is_write_vectored();
                let gathered = if vectored { None } else { gather(bufs) };
                let written = match &gathered {
                    Some(gathered) => {
                        poll_io(write, |write, cx| write.poll_write(cx, gathered)).await?
                    }
                    None => poll_io(write, |write, cx| write.poll_write_vectored(cx, bufs)).await?,
                };
                poll_io(write, |write, cx| write.poll_flush(cx)).await?;
                Ok(written)
            }
        }
    }

    /// Shuts the write side: the peer reads the end of the stream.
    pub(super) async fn shutdown(&self) -> io::Result<()> {
        match self {
            Self::Tcp(write) => SockRef::from(write.as_ref()).shutdown(std::net::Shutdown::Write),
            Self::Io(write) => poll_io(write, |write, cx| write.poll_shutdown(cx)).await,
        }
    }
}

/// Slices gathered into one buffer for a half that is not vectored: the leading slices while
/// they fit in [`GATHER_BYTES`] together. `None` when the first slice is to be written alone
/// (it is large, or the only one), which `poll_write_vectored` then does without copying.
fn gather(bufs: &[IoSlice<'_>]) -> Option<Vec<u8>> {
    let mut slices = bufs.iter().filter(|slice| !slice.is_empty());
    let first = slices.next()?;
    let second = slices.next()?;
    if first.len() + second.len() > GATHER_BYTES {
        return None;
    }
    let mut gathered = Vec::with_capacity(GATHER_BYTES);
    for slice in bufs {
        if gathered.len() + slice.len() > GATHER_BYTES {
            break;
        }
        gathered.extend_from_slice(slice);
    }
    Some(gathered)
}

/// Polls the locked write half with `op` until it is ready; the lock lasts one poll.
fn poll_io<'a, T>(
    write: &'a Mutex<BoxWrite>,
    mut op: impl FnMut(Pin<&mut BoxWrite>, &mut Context<'_>) -> Poll<io::Result<T>> + 'a,
) -> impl Future<Output = io::Result<T>> + 'a {
    poll_fn(move |cx| {
        let mut write = write.lock().unwrap_or_else(PoisonError::into_inner);
        op(Pin::new(&mut *write), cx)
    })
}

impl fmt::Debug for WriteSocket {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Tcp(write) => f.debug_tuple("WriteSocket").field(write).finish(),
            Self::Io(_) => f.debug_tuple("WriteSocket").finish_non_exhaustive(),
        }
    }
}

#[cfg(test)]
mod tests {
    use std::io::{self, IoSlice};
    use std::net::SocketAddr;
    use std::pin::Pin;
    use std::task::{Context, Poll};
    use std::time::Duration;

    use bytes::{Bytes, BytesMut};
    use lintel_wire::{encode_frame, Frame, Ping};
    use tokio::io::{AsyncReadExt, AsyncWrite, DuplexStream};

    use super::Socket;
    use crate::fixtures;
    use crate::{split, Batched};

    /// A write half that takes at most `per_call` bytes a call, across slice edges when
    /// `vectored`, from the first slice alone otherwise.
    struct Trickle {
        inner: DuplexStream,
        per_call: usize,
        vectored: bool,
    }

    impl AsyncWrite for Trickle {
        fn poll_write(
            mut self: Pin<&mut Self>,
            cx: &mut Context<'_>,
            buf: &[u8],
        ) -> Poll<io::Result<usize>> {
            let len = buf.len().min(self.per_call);
            Pin::new(&mut self.inner).poll_write(cx, &buf[..len])
        }

        fn poll_write_vectored(
            mut self: Pin<&mut Self>,
            cx: &mut Context<'_>,
            bufs: &[IoSlice<'_>],
        ) -> Poll<io::Result<usize>> {
            if !self.vectored {
                let first = bufs.iter().find(|buf| !buf.is_empty());
                return self.poll_write(cx, first.map_or(&[][..], |buf| &buf[..]));
            }
            let mut gathered = Vec::new();
            for buf in bufs {
                let room = self.per_call - gathered.len();
                gathered.extend_from_slice(&buf[..buf.len().min(room)]);
            }
            Pin::new(&mut self.inner).poll_write(cx, &gathered)
        }

        fn is_write_vectored(&self) -> bool {
            self.vectored
        }

        fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
            Pin::new(&mut self.inner).poll_flush(cx)
        }

        fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
            Pin::new(&mut self.inner).poll_shutdown(cx)
        }
    }

    fn push(seq: u64, len: usize) -> Frame {
        let input = (0..len).map(|at| (at % 251) as u8).collect::<Vec<u8>>();
        fixtures::push(seq, seq, Bytes::from(input))
    }

    /// Large and small pushes, and pings among them when `pings`.
    fn mixed(pings: bool) -> Vec<Frame> {
        let mut frames = Vec::new();
        for seq in 0..24u64 {
            let len = [10, 16_384, 17_001, 65_536, 0, 200_000][seq as usize % 6];
            frames.push(push(seq, len));
            if pings && seq % 4 == 1 {
                frames.push(Frame::Ping(Ping { nonce: seq }));
            }
        }
        frames
    }

    fn wire(frames: &[Frame]) -> Vec<u8> {
        let mut wire = BytesMut::new();
        for frame in frames {
            encode_frame(frame, lintel_wire::PROTOCOL_VERSION, &mut wire, 1 << 20).unwrap();
        }
        wire.to_vec()
    }

    /// What a writer taking `per_call` bytes a call receives of `frames`, sent from a
    /// batching scope so that many go out in one write.
    async fn trickled(frames: &[Frame], per_call: usize, vectored: bool) -> Vec<u8> {
        let (near, mut far) = tokio::io::duplex(1 << 16);
        let trickle = Trickle {
            inner: near,
            per_call,
            vectored,
        };
        let socket = Socket::from_io(tokio::io::empty(), trickle, None);
        let (_reader, outbound, writer) = split(socket, 1 << 20, 1024);
        Batched::new(async {
            for frame in frames {
                outbound.send(frame.clone()).await.unwrap();
            }
        })
        .await;
        outbound.close();
        let mut received = Vec::new();
        let read = far.read_to_end(&mut received);
        tokio::time::timeout(Duration::from_secs(30), read)
            .await
            .expect("the bytes never all arrived")
            .unwrap();
        writer.await.unwrap().unwrap();
        received
    }

    #[tokio::test]
    async fn spliced_payloads_cross_writers_taking_a_few_bytes_a_call_byte_for_byte() {
        let frames = mixed(false);
        let expected = wire(&frames);
        for (per_call, vectored) in [(7, true), (7, false), (4096, true), (40_000, false)] {
            let received = trickled(&frames, per_call, vectored).await;
            assert_eq!(
                received.len(),
                expected.len(),
                "{per_call} a call, vectored {vectored}"
            );
            assert!(
                received == expected,
                "{per_call} a call, vectored {vectored}"
            );
        }
    }

    #[tokio::test]
    async fn control_frames_overtaking_spliced_payloads_leave_every_frame_whole() {
        let frames = mixed(true);
        for (per_call, vectored) in [(5, true), (3000, false)] {
            let received = trickled(&frames, per_call, vectored).await;
            let mut buf = BytesMut::from(&received[..]);
            let mut decoded = Vec::new();
            while let Some(frame) = lintel_wire::decode_frame(&mut buf, 1 << 20).unwrap() {
                decoded.push(frame);
            }
            assert!(buf.is_empty(), "no partial frame is left");
            let is_ping = |frame: &&Frame| matches!(frame, Frame::Ping(_));
            let lanes = |frames: &[Frame]| -> (Vec<Frame>, Vec<Frame>) {
                frames.iter().cloned().partition(|frame| is_ping(&frame))
            };
            assert_eq!(lanes(&decoded), lanes(&frames), "each lane in its order");
        }
    }

    /// Two framed ends over an in-memory pipe so small that writes are partial and wait.
    fn pipe(local: SocketAddr) -> (Socket, Socket) {
        let (near, far) = tokio::io::duplex(64);
        let (near_read, near_write) = tokio::io::split(near);
        let (far_read, far_write) = tokio::io::split(far);
        (
            Socket::from_io(near_read, near_write, Some(local)),
            Socket::from_io(far_read, far_write, None),
        )
    }

    #[tokio::test]
    async fn frames_cross_async_halves_in_order_and_a_close_ends_the_peers_stream() {
        let local: SocketAddr = "10.0.0.1:7000".parse().unwrap();
        let (near, far) = pipe(local);
        let (near_reader, near_out, near_writer) = split(near, 1 << 20, 4);
        let (mut far_reader, far_out, far_writer) = split(far, 1 << 20, 4);
        assert_eq!(near_reader.get_ref().local_addr().unwrap(), local);
        assert_eq!(
            far_reader.get_ref().local_addr().unwrap_err().kind(),
            io::ErrorKind::NotConnected
        );

        let sender = tokio::spawn(async move {
            for nonce in 0..200 {
                near_out.send(Frame::Ping(Ping { nonce })).await.unwrap();
            }
            near_out.close();
        });
        for nonce in 0..200 {
            assert_eq!(
                far_reader.next_owned().await.unwrap().unwrap(),
                Frame::Ping(Ping { nonce })
            );
        }
        assert!(
            far_reader.next_owned().await.is_none(),
            "the close ends the stream"
        );
        sender.await.unwrap();
        near_writer.await.unwrap().unwrap();
        drop((near_reader, far_out));
        far_writer.await.unwrap().unwrap();
    }
}
