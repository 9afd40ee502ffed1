//! A raw client speaking frames, for tests that state exactly what crosses the wire.

use std::net::SocketAddr;

use futures_util::{SinkExt, StreamExt};
use lintel::wire::{FeatureSet, Features, Frame, FrameCodec, FrameKind, Pong, Role};
use tokio::net::{TcpSocket, TcpStream};
use tokio_util::codec::Framed;

use super::frames::hello_at;
use super::node::within;

/// A raw client speaking frames, for exact protocol tests.
pub struct RawClient {
    pub framed: Framed<TcpStream, FrameCodec>,
}

impl RawClient {
    pub async fn connect(addr: SocketAddr) -> Self {
        Self::over(TcpStream::connect(addr).await.expect("connect"))
    }

    /// A client on `stream`, with Nagle off so each frame goes out at once.
    pub fn over(stream: TcpStream) -> Self {
        stream.set_nodelay(true).expect("nodelay");
        Self {
            framed: Framed::new(stream, FrameCodec::default()),
        }
    }

    /// Connects and completes the handshake as `role`; returns the client and its pid.
    pub async fn hello(addr: SocketAddr, role: Role) -> (Self, u64) {
        Self::hello_at(addr, role, 1).await
    }

    /// Connects and says hello as `role` speaking versions up to `max_version`; returns the
    /// client and its pid. From then on it writes frames as the negotiated version does.
    pub async fn hello_at(addr: SocketAddr, role: Role, max_version: u16) -> (Self, u64) {
        Self::connect(addr).await.handshake(role, max_version).await
    }

    /// Completes the handshake as `role` up to `max_version`, on version 4 listing nothing;
    /// returns the client and its pid.
    async fn handshake(self, role: Role, max_version: u16) -> (Self, u64) {
        self.handshake_listing(role, max_version, FeatureSet::NONE)
            .await
    }

    /// Connects and says hello as a `role` of version 4 that understands `listed` (sent in
    /// `Features`); returns the client and its pid.
    pub async fn hello_listing(addr: SocketAddr, role: Role, listed: FeatureSet) -> (Self, u64) {
        Self::connect(addr)
            .await
            .handshake_listing(role, 4, listed)
            .await
    }

    async fn handshake_listing(
        mut self,
        role: Role,
        max_version: u16,
        listed: FeatureSet,
    ) -> (Self, u64) {
        self.send(Frame::Hello(hello_at(role, max_version))).await;
        let pid = match self.recv().await {
            Some(Frame::Welcome(welcome)) => {
                if welcome.version >= 4 && role != Role::Peer {
                    self.send(Frame::from(Features::of(listed))).await;
                }
                welcome.pid
            }
            other => panic!("expected a welcome, got {other:?}"),
        };
        (self, pid)
    }

    /// Writes frames as a connection of `version` does from now on.
    pub fn speak(&mut self, version: u16) {
        self.framed.codec_mut().set_version(version);
    }

    /// The kind the frame received last came as.
    pub fn last_kind(&self) -> Option<FrameKind> {
        self.framed.codec().last_kind()
    }

    pub async fn send(&mut self, frame: Frame) {
        self.framed.send(frame).await.expect("send frame");
    }

    /// The next frame, or `None` when the node closed the connection. A welcome sets the
    /// version frames are written as from then on.
    pub async fn recv(&mut self) -> Option<Frame> {
        let frame = within("a frame", self.framed.next())
            .await
            .and_then(Result::ok);
        self.heard(frame.as_ref());
        frame
    }

    /// Speaks the version a welcome names.
    fn heard(&mut self, frame: Option<&Frame>) {
        if let Some(Frame::Welcome(welcome)) = frame {
            self.speak(welcome.version);
        }
    }

    /// Waits until the node closes the connection, skipping any frames before.
    pub async fn closed(&mut self) {
        within("close", async {
            while let Some(Ok(_)) = self.framed.next().await {}
        })
        .await;
    }
}

/// The next frame that is not a ping (pings are answered), or `None` once the node closed.
/// Bounded as a whole, so a node pinging every few seconds cannot keep it waiting forever.
pub async fn next_frame(client: &mut RawClient) -> Option<Frame> {
    within("a frame other than a ping", async {
        loop {
            match client.framed.next().await {
                Some(Ok(Frame::Ping(ping))) => {
                    client.send(Frame::Pong(Pong { nonce: ping.nonce })).await;
                }
                other => {
                    let frame = other.and_then(Result::ok);
                    client.heard(frame.as_ref());
                    return frame;
                }
            }
        }
    })
    .await
}

/// A client in `role`, past the handshake, whose socket takes little before the node's
/// writes stall; with its pid.
pub async fn small_window_client(addr: SocketAddr, role: Role) -> (RawClient, u64) {
    small_window_client_at(addr, role, 1).await
}

/// As [`small_window_client`], speaking versions up to `max_version`.
pub async fn small_window_client_at(
    addr: SocketAddr,
    role: Role,
    max_version: u16,
) -> (RawClient, u64) {
    let socket = TcpSocket::new_v4().expect("socket");
    socket.set_recv_buffer_size(16 * 1024).expect("recv buffer");
    let stream = socket.connect(addr).await.expect("connect");
    RawClient::over(stream).handshake(role, max_version).await
}

/// The next frame `wanted` picks, answering pings and skipping the rest; panics if the node
/// closes first.
pub async fn next_of(client: &mut RawClient, wanted: fn(&Frame) -> bool) -> Frame {
    within("a frame from the node", async {
        loop {
            match next_frame(client).await {
                Some(frame) if wanted(&frame) => return frame,
                Some(_) => {}
                None => panic!("the node closed the connection"),
            }
        }
    })
    .await
}
