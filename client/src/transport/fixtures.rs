//! Frames and sockets the transport's tests share.

use bytes::Bytes;
use lintel_wire::{DispatchRequest, Frame, Ping, Push};
use socket2::SockRef;
use tokio::net::{TcpListener, TcpSocket, TcpStream};

/// A push of `input` with `correlation` and `ordinal`, in namespace `ns`, activity `act`.
pub(super) fn push(correlation: u64, ordinal: u64, input: Bytes) -> Frame {
    Frame::from(Push {
        correlation,
        request: DispatchRequest {
            namespace: "ns".into(),
            task_queue: String::new(),
            activity_type: "act".into(),
            node: None,
            workflow_id: "wf".into(),
            ordinal,
            run_id: None,
            attempt: 1,
            input,
            deadline_unix_ms: None,
        },
    })
}

pub(super) fn ping(nonce: u64) -> Frame {
    Frame::Ping(Ping { nonce })
}

/// A connected pair on 127.0.0.1 whose buffers are 4 KiB each way, so writes from the
/// accepted side stall soon: `(accepted, peer)`.
pub(super) async fn stalling_pair() -> (TcpStream, TcpStream) {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let socket = TcpSocket::new_v4().unwrap();
    socket.set_recv_buffer_size(4096).unwrap();
    let (peer, accepted) = tokio::join!(socket.connect(addr), listener.accept());
    let accepted = accepted.unwrap().0;
    SockRef::from(&accepted).set_send_buffer_size(4096).unwrap();
    (accepted, peer.unwrap())
}
