//! Scripted peers over raw frames: a worker the test drives frame by frame, a worker that
//! answers by itself, a producer connection, and a peer node past its hellos.

use std::collections::VecDeque;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::sync::Arc;

use futures_util::{SinkExt, StreamExt};
use lintel::wire::{
    Frame, FrameKind, HeaderLimits, Hello, Limits, OutcomeFrame, Ping, Pong, PoolPresence,
    PresenceGroup, Push, Register, Role, Welcome,
};
use tokio::net::TcpListener;
use tokio::sync::mpsc;
use tokio::task::JoinHandle;

use super::frames::{hello_at, reply_frame};
use super::node::within;
use super::raw::{next_frame, small_window_client, RawClient};

/// A registered raw worker: the test reads and answers every frame itself.
pub struct RawWorker {
    pub client: RawClient,
    pub pid: u64,
    pub worker_id: u64,
    nonce: u64,
    /// Frames other than pings that came while [`RawWorker::settle`] waited, read first.
    held: VecDeque<Frame>,
}

impl RawWorker {
    pub async fn start(addr: SocketAddr, register: Register) -> Self {
        let (client, pid) = RawClient::hello(addr, Role::Worker).await;
        Self::register(client, pid, register).await
    }

    pub async fn register(client: RawClient, pid: u64, register: Register) -> Self {
        Self::register_frame(client, pid, Frame::from(register)).await
    }

    /// Registers with `frame` (a `Register` or `Register`) and settles.
    pub async fn register_frame(mut client: RawClient, pid: u64, frame: Frame) -> Self {
        client.send(frame).await;
        let mut worker = match next_frame(&mut client).await {
            Some(Frame::Registered(registered)) => Self {
                client,
                pid,
                worker_id: registered.worker_id,
                nonce: 0,
                held: VecDeque::new(),
            },
            other => panic!("expected Registered, got {other:?}"),
        };
        worker.settle().await;
        worker
    }

    /// Answers the node's pings until one of our own round trips passes with none: every ping
    /// the node had sent is answered and its answer handled, so a probation is over. Other
    /// frames (a dispatch waiting for the worker is pushed once it is out of probation) are
    /// held for the next read.
    pub async fn settle(&mut self) {
        within("the node's pings to settle", async {
            loop {
                self.nonce += 1;
                let nonce = u64::MAX - self.nonce;
                self.client.send(Frame::Ping(Ping { nonce })).await;
                let mut answered = false;
                loop {
                    match self.client.framed.next().await {
                        Some(Ok(Frame::Ping(ping))) => {
                            answered = true;
                            self.client
                                .send(Frame::Pong(Pong { nonce: ping.nonce }))
                                .await;
                        }
                        Some(Ok(Frame::Pong(pong))) if pong.nonce == nonce => break,
                        Some(Ok(frame)) => self.held.push_back(frame),
                        None | Some(Err(_)) => panic!("closed while settling"),
                    }
                }
                if !answered {
                    return;
                }
            }
        })
        .await;
    }

    /// The next push; any other frame but a ping fails the test.
    pub async fn next_push(&mut self) -> Push {
        match self.next_frame().await {
            Some(Frame::Push(push)) => *push,
            other => panic!("expected a Push, got {other:?}"),
        }
    }

    /// The next frame held or read that is not a ping (pings are answered).
    async fn next_frame(&mut self) -> Option<Frame> {
        match self.held.pop_front() {
            Some(frame) => Some(frame),
            None => next_frame(&mut self.client).await,
        }
    }

    pub async fn reply(&mut self, push: &Push, payload: &str) {
        self.client.send(reply_frame(push, payload)).await;
    }

    pub async fn expect_cancel(&mut self, correlation: u64) {
        match self.next_frame().await {
            Some(Frame::Cancel(cancel)) => assert_eq!(cancel.correlation, correlation),
            other => panic!("expected Cancel for {correlation}, got {other:?}"),
        }
    }

    /// A ping round trip: the node has handled every frame sent before it, and sent this worker
    /// nothing but the pong meanwhile.
    pub async fn sync(&mut self) {
        self.nonce += 1;
        let nonce = u64::MAX - self.nonce;
        self.client.send(Frame::Ping(Ping { nonce })).await;
        match next_frame(&mut self.client).await {
            Some(Frame::Pong(pong)) if pong.nonce == nonce => {}
            other => panic!("expected only our Pong, got {other:?}"),
        }
    }
}

/// What an auto worker saw.
#[derive(Default)]
pub struct Stats {
    pub in_flight: AtomicU32,
    pub peak: AtomicU32,
    pub served: AtomicU64,
}

/// A raw worker that answers every push by itself, with its identity as the result, after
/// yielding up to `max_yields` times. It counts pushes held at once: decremented before the
/// reply is sent, so the count never exceeds what the node has reserved on it.
pub struct AutoWorker {
    pub pid: u64,
    pub stats: Arc<Stats>,
    tasks: Vec<JoinHandle<()>>,
}

impl Drop for AutoWorker {
    fn drop(&mut self) {
        for task in &self.tasks {
            task.abort();
        }
    }
}

impl AutoWorker {
    pub async fn start(addr: SocketAddr, register: Register, max_yields: u32) -> Self {
        let name = register.identity.clone();
        let raw = RawWorker::start(addr, register).await;
        let (mut sink, mut stream) = raw.client.framed.split();
        let (tx, mut rx) = mpsc::unbounded_channel::<Frame>();
        let writer = tokio::spawn(async move {
            while let Some(frame) = rx.recv().await {
                if sink.send(frame).await.is_err() {
                    break;
                }
            }
        });
        let stats = Arc::new(Stats::default());
        let seen = Arc::clone(&stats);
        let reader = tokio::spawn(async move {
            while let Some(Ok(frame)) = stream.next().await {
                match frame {
                    Frame::Push(push) => {
                        let now = seen.in_flight.fetch_add(1, Ordering::SeqCst) + 1;
                        seen.peak.fetch_max(now, Ordering::SeqCst);
                        seen.served.fetch_add(1, Ordering::SeqCst);
                        let (stats, tx, name) = (Arc::clone(&seen), tx.clone(), name.clone());
                        tokio::spawn(async move {
                            for _ in 0..fastrand::u32(0..=max_yields) {
                                tokio::task::yield_now().await;
                            }
                            stats.in_flight.fetch_sub(1, Ordering::SeqCst);
                            let _ = tx.send(reply_frame(&push, &name));
                        });
                    }
                    Frame::Ping(ping) => {
                        let _ = tx.send(Frame::Pong(Pong { nonce: ping.nonce }));
                    }
                    _ => {}
                }
            }
        });
        Self {
            pid: raw.pid,
            stats,
            tasks: vec![reader, writer],
        }
    }
}

/// A worker whose socket takes little before the node's writes stall.
pub async fn small_window_worker(addr: SocketAddr, register: Register) -> RawWorker {
    let (client, pid) = small_window_client(addr, Role::Worker).await;
    RawWorker::register(client, pid, register).await
}

pub async fn producer(addr: SocketAddr) -> RawClient {
    RawClient::hello(addr, Role::Producer).await.0
}

pub async fn next_outcome(producer: &mut RawClient) -> OutcomeFrame {
    match next_frame(producer).await {
        Some(Frame::Outcome(outcome)) => outcome,
        other => panic!("expected an Outcome, got {other:?}"),
    }
}

/// A hand-written peer on a link it dialled to `node`, speaking versions 2 to `max_version`,
/// past the hellos: it sent `hello` (a `PeerHello`) and read the node's.
pub async fn hand_peer(node: SocketAddr, max_version: u16, hello: Frame) -> RawClient {
    let mut raw = welcomed_peer(node, max_version).await;
    raw.send(hello).await;
    match raw.recv().await {
        Some(Frame::PeerHello(_)) => {}
        other => panic!("expected the node's hello, got {other:?}"),
    }
    raw
}

/// A hand-written version-3 peer on a link it dialled to `node`, past the handshake, that sent
/// `hello` written as a version-`written_at` peer writes it; the node's hello is left unread.
pub async fn hand_peer_written_at(node: SocketAddr, hello: Frame, written_at: u16) -> RawClient {
    let mut raw = welcomed_peer(node, 3).await;
    assert_eq!(raw.last_kind(), Some(FrameKind::Welcome3));
    raw.speak(written_at);
    raw.send(hello).await;
    raw.speak(3);
    raw
}

/// A peer's `Hello` for versions 2 to `max_version` sent to `node`, and its `Welcome` read.
async fn welcomed_peer(node: SocketAddr, max_version: u16) -> RawClient {
    let mut raw = RawClient::connect(node).await;
    raw.send(Frame::Hello(Hello {
        min_version: 2,
        ..hello_at(Role::Peer, max_version)
    }))
    .await;
    match raw.recv().await {
        Some(Frame::Welcome(_)) => {}
        other => panic!("expected a welcome, got {other:?}"),
    }
    raw
}

/// A hand-written peer named `node_id` answering, on `listener`, a node's dial as a version-3
/// node listing `features`: it read the node's `Hello` and its peer hello, which is returned.
/// Its own hello is not sent: the caller decides when the node reads it.
pub async fn hand_acceptor(
    listener: &TcpListener,
    node_id: &str,
    features: &[&str],
) -> (RawClient, Frame) {
    let (stream, _) = within("a node's dial", listener.accept())
        .await
        .expect("accept");
    let mut raw = RawClient::over(stream);
    match raw.recv().await {
        Some(Frame::Hello(hello)) if hello.role == Role::Peer => {}
        other => panic!("expected a peer's Hello, got {other:?}"),
    }
    raw.send(Frame::from(Welcome {
        version: 3,
        node_id: node_id.into(),
        pid: 1,
        limits: Limits {
            max_frame_len: 4 * 1024 * 1024,
            max_in_flight: 1024,
            ping_interval_ms: 0,
            max_missed_pings: 3,
            max_name_len: 256,
            max_set_len: 64,
        },
        header_limits: Some(HeaderLimits::default()),
        features: features.iter().map(|&feature| feature.to_owned()).collect(),
    }))
    .await;
    let hello = match raw.recv().await {
        Some(hello @ Frame::PeerHello(_)) => hello,
        other => panic!("expected the node's PeerHello, got {other:?}"),
    };
    (raw, hello)
}

/// Pool `channel` with `free` slots for `activity` on one worker, as a peer announces it.
pub fn offering(channel: String, activity: &str, free: u32) -> PoolPresence {
    PoolPresence {
        channel,
        workers: 1,
        groups: vec![PresenceGroup {
            activity_type: activity.into(),
            node: None,
            workers: 1,
            slots: free,
            free,
            full: 0,
            draining: 0,
            ..Default::default()
        }],
    }
}
