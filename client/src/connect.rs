//! The client side of every SDK connection: dial with `TCP_NODELAY`, send `Hello`, await `Welcome`.
//!
//! [`connect`] either returns a handshaken [`Connection`] within its timeout or a [`ConnectError`]
//! variant saying why not; it never retries, callers own their reconnect policy. [`connect_tls`]
//! runs TLS first; [`connect_with`] does the same over a connection a [`Dialer`] opens.

use std::fmt;
use std::io;
use std::ops::RangeInclusive;
use std::time::Duration;

use lintel_wire::{
    CodecError, ErrorFrame, FeatureSet, Features, Foreign, Frame, Hello, Refusal, RefusalCode,
    Role, Welcome,
};

pub use lintel_wire::PROTOCOL_VERSION;
use tokio::net::{TcpStream, ToSocketAddrs};
use tokio::task::JoinHandle;

use crate::tls::{rustls_error, ClientTls};
use lintel_transport::resolve::ResolveError;
use lintel_transport::{Dialer, FrameReader, Outbound, Socket};

/// Lowest protocol version the SDKs accept; they speak up to [`PROTOCOL_VERSION`].
pub const MIN_PROTOCOL_VERSION: u16 = 1;

/// What a client states in its `Hello`, and the limits of its side of the connection.
#[derive(Debug, Clone)]
pub struct Handshake {
    /// The role the client takes: worker, producer or observer.
    pub role: Role,
    /// The protocol versions offered; the node picks the highest it speaks too.
    pub versions: RangeInclusive<u16>,
    /// Free-form client name, for the node's logs and status.
    pub name: String,
    /// The token of a node that requires one.
    pub auth_token: Option<String>,
    /// Bounds the TCP connect, the TLS handshake and the wait for `Welcome` together.
    pub timeout: Duration,
    /// Largest frame body this side reads or writes.
    pub max_frame_len: usize,
    /// Frames the outbound queue holds before senders wait.
    pub queue_len: usize,
    /// What this side understands of what version 4 and later add: sent in `Features` on a
    /// version-4 connection of a worker or a producer; the SDK's own roles set it.
    pub(crate) understands: FeatureSet,
}

impl Handshake {
    /// A handshake as `role` named `name`: every version the SDK speaks, no token, a 5 s
    /// timeout, the default frame limit and a queue of 1024 frames.
    pub fn new(role: Role, name: impl Into<String>) -> Self {
        Self {
            role,
            versions: MIN_PROTOCOL_VERSION..=PROTOCOL_VERSION,
            name: name.into(),
            auth_token: None,
            timeout: Duration::from_secs(5),
            max_frame_len: lintel_wire::DEFAULT_MAX_FRAME_LEN,
            queue_len: 1024,
            understands: FeatureSet::NONE,
        }
    }
}

/// A handshaken connection: frames in, a queue of frames out, and what the node said.
#[derive(Debug)]
pub struct Connection {
    /// Frames from the node.
    pub reader: FrameReader,
    /// The queue of frames to the node.
    pub outbound: Outbound,
    /// The writer task; it ends when asked to close or when every [`Outbound`] is dropped.
    pub writer: JoinHandle<io::Result<()>>,
    /// The node's welcome: the negotiated version, which `reader` and `outbound` speak, and
    /// from a version-3 node its header limits and features.
    pub welcome: Welcome,
    /// Largest frame body both sides accept: the smaller of ours and the node's. `outbound`
    /// refuses longer frames ([`lintel_transport::SendError::TooLarge`]).
    pub max_send_len: usize,
}

/// Why a connection could not be set up.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ConnectError {
    /// Connecting, reading or writing failed.
    #[error("i/o error: {0}")]
    Io(io::Error),
    /// TLS failed: the node's certificate is not signed by a trusted CA or names another host,
    /// the node refused our certificate, or the other side does not speak TLS.
    #[error("TLS failed: {0}")]
    Tls(rustls::Error),
    /// The node answered `HelloRefused` (or `RegisterRefused` where a registration follows).
    #[error("refused ({:?}): {}", .0.code, .0.reason)]
    Refused(Refusal),
    /// The node reported a protocol violation and closed.
    #[error("node reported a protocol error ({:?}): {}", .0.code, .0.reason)]
    Protocol(ErrorFrame),
    /// The node sent a frame (named as [`Frame::name`] names it) that has no place at this
    /// point of the conversation.
    #[error("node sent an unexpected {0} frame")]
    UnexpectedFrame(&'static str),
    /// Bytes from the node were not a frame.
    #[error("cannot read frames from the node: {0}")]
    Codec(#[source] CodecError),
    /// The node welcomed us with a version outside the range we offered.
    #[error("node chose protocol version {0}, outside the range offered")]
    UnsupportedVersion(u16),
    /// Nothing conclusive happened within the handshake timeout.
    #[error("no answer from the node within {0:?}")]
    Timeout(Duration),
    /// The node said `Goodbye` instead of answering: it is shutting down or draining.
    #[error("node said goodbye: {0}")]
    Goodbye(String),
    /// The node closed the connection before answering.
    #[error("node closed the connection during the handshake")]
    Closed,
    /// The address answered in another protocol: TLS from a node that speaks TLS (connect
    /// with a [`ClientTls`]), or HTTP from an HTTP endpoint such as a node's admin listener.
    #[error("the address answered with {0}, not lintel frames")]
    Foreign(Foreign),
    /// No node address was given.
    #[error("no node address given")]
    NoNodes,
    /// A node's name resolved to no address.
    #[error(transparent)]
    Resolve(ResolveError),
    /// Every address given failed, each with its error, in the order tried.
    #[error("no node could be reached: {}", list(.0))]
    AllFailed(Vec<Attempt>),
}

/// One node address tried and why it failed, as [`ConnectError::AllFailed`] lists them.
#[derive(Debug)]
pub struct Attempt {
    /// The address as given (`host:port`), and when a name resolved, the address dialled.
    pub address: String,
    /// Why it failed.
    pub error: ConnectError,
}

impl fmt::Display for Attempt {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.address, self.error)
    }
}

fn list(attempts: &[Attempt]) -> String {
    let said: Vec<String> = attempts.iter().map(ToString::to_string).collect();
    said.join("; ")
}

impl ConnectError {
    /// True when trying again cannot help until something is changed: a final refusal, a TLS
    /// failure, another protocol, or a version the SDK does not speak. A refused or reset
    /// connection, a timeout, a goodbye or a draining node may pass.
    pub fn is_permanent(&self) -> bool {
        match self {
            ConnectError::Refused(refusal) => is_final_refusal(refusal.code),
            ConnectError::Tls(_)
            | ConnectError::Foreign(_)
            | ConnectError::UnsupportedVersion(_)
            | ConnectError::UnexpectedFrame(_)
            | ConnectError::Codec(_)
            | ConnectError::NoNodes => true,
            ConnectError::AllFailed(attempts) => {
                attempts.iter().all(|attempt| attempt.error.is_permanent())
            }
            ConnectError::Resolve(_) => false,
            ConnectError::Io(_)
            | ConnectError::Protocol(_)
            | ConnectError::Timeout(_)
            | ConnectError::Goodbye(_)
            | ConnectError::Closed => false,
        }
    }
}

impl From<io::Error> for ConnectError {
    fn from(err: io::Error) -> Self {
        match rustls_error(&err) {
            Some(tls) => ConnectError::Tls(tls.clone()),
            None => ConnectError::Io(err),
        }
    }
}

impl From<CodecError> for ConnectError {
    fn from(err: CodecError) -> Self {
        match err {
            CodecError::Io(err) => err.into(),
            CodecError::Foreign(foreign) => ConnectError::Foreign(foreign),
            other => ConnectError::Codec(other),
        }
    }
}

/// True when retrying cannot change the answer: the refusal is about who we are, not the
/// node's momentary state.
pub fn is_final_refusal(code: RefusalCode) -> bool {
    !matches!(
        code,
        RefusalCode::TooManyConnections | RefusalCode::Draining
    )
}

/// Dials `addr`, sends `Hello` and waits for `Welcome`, all within `handshake.timeout`.
///
/// # Errors
/// [`ConnectError::Timeout`] when the connect and handshake together outlast the timeout;
/// [`ConnectError::Refused`] on `HelloRefused`; [`ConnectError::Protocol`] on an `Error` frame;
/// [`ConnectError::UnexpectedFrame`], [`ConnectError::UnsupportedVersion`] or
/// [`ConnectError::Codec`] when the node does not speak the protocol; [`ConnectError::Io`] and
/// [`ConnectError::Closed`] when the connection fails.
pub async fn connect<A: ToSocketAddrs>(
    addr: A,
    handshake: &Handshake,
) -> Result<Connection, ConnectError> {
    within(handshake, async {
        let stream = TcpStream::connect(addr).await?;
        stream.set_nodelay(true)?;
        greet(stream.into(), handshake).await
    })
    .await
}

/// As [`connect`], speaking TLS as `tls` says: the node's certificate is checked against its
/// server name, else `host`, else the IP address dialled. The TLS handshake counts against
/// `handshake.timeout` too.
///
/// # Errors
/// As [`connect`], and [`ConnectError::Tls`] when the TLS handshake fails.
pub async fn connect_tls<A: ToSocketAddrs>(
    addr: A,
    host: Option<&str>,
    tls: &ClientTls,
    handshake: &Handshake,
) -> Result<Connection, ConnectError> {
    within(handshake, async {
        let stream = TcpStream::connect(addr).await?;
        stream.set_nodelay(true)?;
        let socket = tls.secure(stream, host).await?;
        greet(socket, handshake).await
    })
    .await
}

/// As [`connect`], over the connection `dialer` opens to `address`.
///
/// # Errors
/// As [`connect`]; [`ConnectError::Io`] carries the dialer's error.
pub async fn connect_with(
    dialer: &dyn Dialer,
    address: &str,
    handshake: &Handshake,
) -> Result<Connection, ConnectError> {
    within(handshake, async {
        let socket = dialer.dial(address).await?;
        greet(socket, handshake).await
    })
    .await
}

/// Runs `attempt` within the handshake timeout.
async fn within(
    handshake: &Handshake,
    attempt: impl std::future::Future<Output = Result<Connection, ConnectError>>,
) -> Result<Connection, ConnectError> {
    let timeout = handshake.timeout;
    tokio::time::timeout(timeout, attempt)
        .await
        .map_err(|_| ConnectError::Timeout(timeout))?
}

/// Sends `Hello` over `socket`, waits for `Welcome` and, on version 4, sends `Features`.
async fn greet(socket: Socket, handshake: &Handshake) -> Result<Connection, ConnectError> {
    let (mut reader, outbound, writer) =
        lintel_transport::split(socket, handshake.max_frame_len, handshake.queue_len);
    let hello = Hello {
        min_version: *handshake.versions.start(),
        max_version: *handshake.versions.end(),
        role: handshake.role,
        name: handshake.name.clone(),
        auth_token: handshake.auth_token.clone(),
    };
    outbound
        .send(Frame::Hello(hello))
        .await
        .map_err(|_| ConnectError::Closed)?;
    let welcome = match next_frame(&mut reader).await? {
        // The welcome of a version-3 node states its header limits; an earlier one's cannot.
        Frame::Welcome(welcome) if (welcome.version >= 3) == welcome.header_limits.is_some() => {
            *welcome
        }
        Frame::HelloRefused(refusal) => return Err(ConnectError::Refused(refusal)),
        Frame::Error(error) => return Err(ConnectError::Protocol(error)),
        Frame::Goodbye(goodbye) => return Err(ConnectError::Goodbye(goodbye.reason)),
        other => return Err(ConnectError::UnexpectedFrame(other.name())),
    };
    if !handshake.versions.contains(&welcome.version) {
        return Err(ConnectError::UnsupportedVersion(welcome.version));
    }
    let node_max = usize::try_from(welcome.limits.max_frame_len).unwrap_or(usize::MAX);
    let max_send_len = handshake.max_frame_len.min(node_max);
    outbound.limit_frame_len(max_send_len);
    outbound.speak(welcome.version);
    reader.speak(welcome.version);
    // What the node lists bounds what is sent to it, as what we list bounds what it sends.
    outbound.listen(FeatureSet::named(&welcome.features));
    if welcome.version >= 4 && handshake.role != Role::Peer {
        outbound
            .send(Frame::from(Features::of(handshake.understands)))
            .await
            .map_err(|_| ConnectError::Closed)?;
    }
    Ok(Connection {
        reader,
        outbound,
        writer,
        welcome,
        max_send_len,
    })
}

/// The next frame, treating the end of the stream as [`ConnectError::Closed`].
///
/// Cancel-safe: the partial frame stays buffered in `reader`.
pub(crate) async fn next_frame(reader: &mut FrameReader) -> Result<Frame, ConnectError> {
    match reader.next_owned().await {
        Some(frame) => Ok(frame?),
        None => Err(ConnectError::Closed),
    }
}

/// The `Error` frame owed to the node for bytes that were not a frame; `None` for I/O errors,
/// which leave nobody to tell.
pub(crate) fn decode_error_frame(err: &CodecError) -> Option<ErrorFrame> {
    match err {
        CodecError::Decode(decode) => Some(ErrorFrame {
            code: decode.error_code(),
            reason: decode.to_string(),
        }),
        CodecError::Truncated { .. }
        | CodecError::Encode(_)
        | CodecError::Io(_)
        | CodecError::Foreign(_) => None,
    }
}
