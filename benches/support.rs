//! What the groups share: a runtime, and a node-side outbound queue over a real loopback socket.

use lintel::transport::{self, FrameReader, Outbound};
use lintel_wire::DEFAULT_MAX_FRAME_LEN;
use tokio::net::{TcpListener, TcpStream};
use tokio::runtime::Runtime;

/// A current-thread runtime: its tasks (the link's writer) run only inside `block_on`,
/// so nothing runs beside a timed routine.
pub(crate) fn runtime() -> Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("bench runtime builds")
}

/// One accepted connection split as the node splits it, and the dialing peer's socket.
pub(crate) struct Loopback {
    /// The node side's queue into its writer task.
    pub(crate) outbound: Outbound,
    /// The worker's end: whatever the writer sends arrives here.
    pub(crate) peer: TcpStream,
    /// Held so the node side's read half stays open for the bench's life.
    _reader: FrameReader,
}

/// A loopback pair whose node side has an outbound queue of `queue_len` frames.
pub(crate) fn loopback(runtime: &Runtime, queue_len: usize) -> Loopback {
    runtime.block_on(async {
        let listener = TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind a loopback listener");
        let addr = listener.local_addr().expect("listener address");
        let (peer, accepted) = tokio::join!(TcpStream::connect(addr), listener.accept());
        let peer = peer.expect("dial the loopback listener");
        let (accepted, _) = accepted.expect("accept the loopback peer");
        // The writer task is detached; it ends when every `Outbound` clone is dropped.
        let (reader, outbound, _writer) =
            transport::split(accepted, DEFAULT_MAX_FRAME_LEN, queue_len);
        Loopback {
            outbound,
            peer,
            _reader: reader,
        }
    })
}
