//! Frames and sockets the tests of this crate and of lintel-client share; built for tests
//! and with the `fixtures` feature only.

use bytes::Bytes;
use lintel_wire::{DispatchRequest, Frame, Limits, Ping, Push, Welcome};
use socket2::SockRef;
use tokio::net::{TcpListener, TcpSocket, TcpStream};

/// A push of `input` with `correlation` and `ordinal`, in namespace `ns`, activity `act`.
pub fn push(correlation: u64, ordinal: u64, input: Bytes) -> Frame {
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
        extras: Default::default(),
    })
}

/// Request number `ordinal` in namespace `ns`, activity `echo`: workflow `wf-{ordinal}`, its
/// ordinal as input, so an echoed answer can be matched to it.
pub fn numbered_request(ordinal: u64) -> DispatchRequest {
    DispatchRequest {
        namespace: "ns".into(),
        task_queue: String::new(),
        activity_type: "echo".into(),
        node: None,
        workflow_id: format!("wf-{ordinal}"),
        ordinal,
        run_id: None,
        attempt: 1,
        input: Bytes::from(ordinal.to_string()),
        deadline_unix_ms: None,
    }
}

/// A scripted version-2 node's `Welcome`: no pings, roomy limits.
pub fn welcome() -> Frame {
    Frame::from(Welcome {
        version: 2,
        node_id: "fake-node".to_owned(),
        pid: 1,
        limits: Limits {
            max_frame_len: 4 * 1024 * 1024,
            max_in_flight: 4096,
            ping_interval_ms: 0,
            max_missed_pings: 3,
            max_name_len: 256,
            max_set_len: 64,
        },
        header_limits: None,
        features: Vec::new(),
    })
}

pub fn ping(nonce: u64) -> Frame {
    Frame::Ping(Ping { nonce })
}

/// A connected pair on 127.0.0.1 whose buffers are 4 KiB each way, so writes from the
/// accepted side stall soon: `(accepted, peer)`.
pub async fn stalling_pair() -> (TcpStream, TcpStream) {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let socket = TcpSocket::new_v4().unwrap();
    socket.set_recv_buffer_size(4096).unwrap();
    let (peer, accepted) = tokio::join!(socket.connect(addr), listener.accept());
    let accepted = accepted.unwrap().0;
    SockRef::from(&accepted).set_send_buffer_size(4096).unwrap();
    (accepted, peer.unwrap())
}
