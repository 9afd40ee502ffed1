//! What the link tests share: an entry that records what it is told, a request, and an
//! outbound queue whose frames the test reads.

use std::sync::Mutex;
use std::time::Duration;

use futures_util::StreamExt;
use lintel_transport::Outbound;
use lintel_wire::{DispatchRequest, Frame, FrameCodec};
use tokio::net::TcpStream;
use tokio_util::codec::FramedRead;

use super::table::{Entry, Kind, Release, Unanswered};

/// Records what the link told it, one word per call.
#[derive(Default)]
pub(super) struct Heard(Mutex<Vec<String>>);

impl Heard {
    pub(super) fn all(&self) -> Vec<String> {
        self.0.lock().unwrap().clone()
    }
}

impl<K: Kind> Entry<K> for Heard
where
    for<'a> K::Answer<'a>: std::fmt::Debug,
{
    fn answered(&self, answer: K::Answer<'_>) {
        self.0.lock().unwrap().push(format!("answered {answer:?}"));
    }
    fn unanswered(&self, why: Unanswered) {
        self.0.lock().unwrap().push(format!("{why:?}"));
    }
    fn released(&self, why: Release) {
        self.0.lock().unwrap().push(format!("{why:?}"));
    }
}

pub(super) fn request() -> DispatchRequest {
    DispatchRequest {
        namespace: "ns".into(),
        task_queue: "tq".into(),
        activity_type: "echo".into(),
        node: None,
        workflow_id: "wf".into(),
        ordinal: 1,
        run_id: None,
        attempt: 1,
        input: bytes::Bytes::new(),
        deadline_unix_ms: None,
    }
}

/// What reaches the other end of a link's socket.
pub(crate) type Peer = FramedRead<TcpStream, FrameCodec>;

/// An outbound queue on a loopback socket, and the frames that reach the other end.
pub(crate) async fn outbound() -> (Outbound, Peer) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let (client, accepted) = tokio::join!(TcpStream::connect(addr), listener.accept());
    let (_reader, outbound, _writer) = lintel_transport::split(accepted.unwrap().0, 1 << 20, 8);
    let peer = FramedRead::new(client.unwrap(), FrameCodec::new(1 << 20));
    (outbound, peer)
}

/// The next frame the other end reads.
pub(super) async fn next_frame(peer: &mut Peer) -> Frame {
    tokio::time::timeout(Duration::from_secs(30), peer.next())
        .await
        .expect("no frame arrived")
        .expect("the stream ended")
        .expect("a frame")
}
