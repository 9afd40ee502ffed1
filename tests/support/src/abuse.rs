//! Clients that misbehave on purpose: garbage at each protocol state, a flood of connections
//! past `max_connections`, and producers that submit and never read.
//!
//! Each garbage case states the answer `wire/PROTOCOL.md` gives it and checks the node gave
//! exactly that; the flood reports how each connection was answered.

use std::net::SocketAddr;
use std::time::Duration;

use bytes::{Bytes, BytesMut};
use futures_util::{SinkExt, StreamExt};
use lintel::wire::{
    encode_frame, CapacityUpdate, DispatchRequest, DispatchResult, ErrorCode, Frame, FrameCodec,
    Goodbye, NodeRouting, Pong, Push, RefusalCode, Role, StatusQuery, Submit,
    DEFAULT_MAX_FRAME_LEN,
};
use tokio::io::AsyncWriteExt;
use tokio::net::TcpStream;
use tokio::sync::oneshot;
use tokio::task::JoinHandle;
use tokio_util::codec::Framed;

use crate::{hello_at, next_frame, plain, reply_frame, request, within, RawClient, RawWorker};

/// Where in a connection's life the garbage arrives.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum State {
    BeforeHello,
    WorkerBeforeRegister,
    ProducerBeforeSubmit,
    /// A registered worker holding a push.
    WorkerMidDispatch,
    /// A producer whose submission a worker holds.
    ProducerMidDispatch,
}

pub const STATES: [State; 5] = [
    State::BeforeHello,
    State::WorkerBeforeRegister,
    State::ProducerBeforeSubmit,
    State::WorkerMidDispatch,
    State::ProducerMidDispatch,
];

/// What is sent.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Garbage {
    /// A kind no version knows.
    UnknownKind,
    /// A length prefix past the maximum body length.
    Oversize,
    /// A frame the state allows, its body one byte short.
    Truncated,
    /// A frame the state allows, with a byte left over.
    Trailing,
    /// A well-formed frame the state does not allow.
    Unexpected,
    /// The first part of a frame, then the write half shuts.
    PartialThenClose,
    /// Random bytes, then the write half shuts.
    Noise,
}

pub const GARBAGE: [Garbage; 7] = [
    Garbage::UnknownKind,
    Garbage::Oversize,
    Garbage::Truncated,
    Garbage::Trailing,
    Garbage::Unexpected,
    Garbage::PartialThenClose,
    Garbage::Noise,
];

impl Garbage {
    /// The error `PROTOCOL.md` answers it with; `None` when any error, or a close alone, will do.
    fn answer(self) -> Option<ErrorCode> {
        match self {
            Garbage::UnknownKind => Some(ErrorCode::UnknownFrameKind),
            Garbage::Oversize => Some(ErrorCode::Oversize),
            Garbage::Truncated | Garbage::Trailing | Garbage::PartialThenClose => {
                Some(ErrorCode::Malformed)
            }
            Garbage::Unexpected => Some(ErrorCode::UnexpectedFrame),
            Garbage::Noise => None,
        }
    }
}

fn encoded(frame: &Frame) -> BytesMut {
    let mut bytes = BytesMut::new();
    encode_frame(
        frame,
        lintel::wire::PROTOCOL_VERSION,
        &mut bytes,
        DEFAULT_MAX_FRAME_LEN,
    )
    .expect("encode");
    bytes
}

/// `frame`'s bytes with its body changed by `change`, the length prefix fixed to match.
fn reframed(frame: &Frame, change: impl FnOnce(&mut Vec<u8>)) -> Vec<u8> {
    let mut body = encoded(frame).split_off(4).to_vec();
    change(&mut body);
    let len = u32::try_from(body.len()).expect("a small body");
    let mut bytes = len.to_be_bytes().to_vec();
    bytes.extend_from_slice(&body);
    bytes
}

/// The bytes of `garbage` for a state whose allowed frame is `allowed` and that does not allow
/// `refused`.
fn bytes_of(
    garbage: Garbage,
    allowed: &Frame,
    refused: &Frame,
    rng: &mut fastrand::Rng,
) -> Vec<u8> {
    match garbage {
        Garbage::UnknownKind => {
            // A canonical kind varint of 26 or more, then a body nobody reads.
            let kind = rng.u32(26..=u32::MAX);
            let mut body = Vec::new();
            let mut rest = kind;
            while rest >= 0x80 {
                body.push((rest as u8 & 0x7f) | 0x80);
                rest >>= 7;
            }
            body.push(rest as u8);
            body.extend((0..rng.usize(0..16)).map(|_| rng.u8(..)));
            let mut bytes = u32::try_from(body.len())
                .expect("small")
                .to_be_bytes()
                .to_vec();
            bytes.extend_from_slice(&body);
            bytes
        }
        Garbage::Oversize => {
            let len = rng.u32(DEFAULT_MAX_FRAME_LEN as u32 + 1..=u32::MAX);
            let mut bytes = len.to_be_bytes().to_vec();
            bytes.extend((0..rng.usize(0..64)).map(|_| rng.u8(..)));
            bytes
        }
        Garbage::Truncated => reframed(allowed, |body| {
            body.pop();
        }),
        Garbage::Trailing => reframed(allowed, |body| body.push(rng.u8(..))),
        Garbage::Unexpected => encoded(refused).to_vec(),
        Garbage::PartialThenClose => {
            let bytes = encoded(allowed);
            let cut = rng.usize(1..bytes.len());
            bytes[..cut].to_vec()
        }
        Garbage::Noise => (0..rng.usize(1..256)).map(|_| rng.u8(..)).collect(),
    }
}

/// Writes `bytes` raw; for a garbage that ends the stream, shuts the write half after them.
async fn send_garbage(client: &mut RawClient, garbage: Garbage, bytes: &[u8]) {
    let socket = client.framed.get_mut();
    // The node may answer and close before it read all of it: a failed write is no failure.
    let _ = socket.write_all(bytes).await;
    if matches!(garbage, Garbage::PartialThenClose | Garbage::Noise) {
        let _ = socket.shutdown().await;
    }
}

/// Reads the node's answer to garbage: `expected`'s error (any error when `None`), then the
/// close. Pings before it are answered.
async fn expect_answer(client: &mut RawClient, garbage: Garbage, state: State) {
    let answer = loop {
        match within("the answer to garbage", client.framed.next()).await {
            Some(Ok(Frame::Ping(ping))) => {
                let _ = client
                    .framed
                    .send(Frame::Pong(Pong { nonce: ping.nonce }))
                    .await;
            }
            // A push or a cancel already under way may come before the answer.
            Some(Ok(Frame::Push(_) | Frame::Cancel(_))) => {}
            Some(Ok(frame)) => break Some(frame),
            Some(Err(_)) | None => break None,
        }
    };
    match (garbage.answer(), answer) {
        (Some(code), Some(Frame::Error(error))) => assert_eq!(
            error.code, code,
            "{garbage:?} in {state:?}: answered {error:?}"
        ),
        (None, Some(Frame::Error(_)) | None) => {}
        (expected, other) => {
            panic!("{garbage:?} in {state:?}: expected Error{{{expected:?}}}, got {other:?}")
        }
    }
    client.closed().await;
}

/// Sends `garbage` at `state` to the node at `addr` and checks its answer: the error
/// `PROTOCOL.md` names, the close, and for a dispatch in flight, its other side told at once
/// (the producer hears worker-lost, the worker is cancelled). Uses namespace `namespace` alone.
pub async fn garbage_at(
    addr: SocketAddr,
    state: State,
    garbage: Garbage,
    namespace: &str,
    rng: &mut fastrand::Rng,
) {
    let submit_one = |correlation| {
        Frame::from(Submit {
            correlation,
            request: request(namespace, "act", "x"),
            wait_for_worker_ms: Some(5_000),
            reply_timeout_ms: Some(60_000),
            routing: NodeRouting::Any,
            extras: Default::default(),
        })
    };
    match state {
        State::BeforeHello => {
            let mut client = RawClient::connect(addr).await;
            let allowed = Frame::Hello(hello_at(Role::Producer, 2));
            let refused = Frame::StatusQuery(StatusQuery { correlation: 1 });
            let bytes = bytes_of(garbage, &allowed, &refused, rng);
            send_garbage(&mut client, garbage, &bytes).await;
            expect_answer(&mut client, garbage, state).await;
        }
        State::WorkerBeforeRegister => {
            let (mut client, _) = hello(addr, Role::Worker).await;
            let allowed = Frame::from(plain(namespace, "act", 1, "garbage"));
            let refused = Frame::CapacityUpdate(CapacityUpdate { max_concurrency: 3 });
            let bytes = bytes_of(garbage, &allowed, &refused, rng);
            send_garbage(&mut client, garbage, &bytes).await;
            expect_answer(&mut client, garbage, state).await;
        }
        State::ProducerBeforeSubmit => {
            let (mut client, _) = hello(addr, Role::Producer).await;
            let refused = Frame::from(plain(namespace, "act", 1, "garbage"));
            let bytes = bytes_of(garbage, &submit_one(1), &refused, rng);
            send_garbage(&mut client, garbage, &bytes).await;
            expect_answer(&mut client, garbage, state).await;
        }
        State::WorkerMidDispatch => {
            let (client, pid) = hello(addr, Role::Worker).await;
            let mut worker =
                RawWorker::register(client, pid, plain(namespace, "act", 1, "garbage")).await;
            let (mut producer, _) = hello(addr, Role::Producer).await;
            producer.send(submit_one(7)).await;
            let push = worker.next_push().await;
            let allowed = reply_frame(&push, "done");
            let refused = Frame::from(plain(namespace, "act", 1, "again"));
            let bytes = bytes_of(garbage, &allowed, &refused, rng);
            send_garbage(&mut worker.client, garbage, &bytes).await;
            expect_answer(&mut worker.client, garbage, state).await;
            match next_frame(&mut producer).await {
                Some(Frame::ServedOutcome(outcome)) => {
                    assert_eq!(outcome.correlation, 7);
                    assert_eq!(
                        outcome.result,
                        DispatchResult::WorkerLost {
                            worker_id: worker.worker_id
                        },
                        "{garbage:?} from a worker holding a push"
                    );
                }
                other => panic!("expected worker-lost after {garbage:?}, got {other:?}"),
            }
            goodbye(&mut producer).await;
        }
        State::ProducerMidDispatch => {
            let (client, pid) = hello(addr, Role::Worker).await;
            let mut worker =
                RawWorker::register(client, pid, plain(namespace, "act", 1, "garbage")).await;
            let (mut producer, _) = hello(addr, Role::Producer).await;
            producer.send(submit_one(7)).await;
            let push: Push = worker.next_push().await;
            let allowed = Frame::Cancel(lintel::wire::Cancel { correlation: 7 });
            let refused = reply_frame(&push, "from a producer");
            let bytes = bytes_of(garbage, &allowed, &refused, rng);
            send_garbage(&mut producer, garbage, &bytes).await;
            expect_answer(&mut producer, garbage, state).await;
            worker.expect_cancel(push.correlation).await;
            worker.reply(&push, "cancelled").await;
            goodbye(&mut worker.client).await;
        }
    }
}

/// Connects and completes a version-2 handshake as `role`.
async fn hello(addr: SocketAddr, role: Role) -> (RawClient, u64) {
    let mut client = RawClient::connect(addr).await;
    client.send(Frame::Hello(hello_at(role, 2))).await;
    match client.recv().await {
        Some(Frame::Welcome(welcome)) => (client, welcome.pid),
        other => panic!("expected Welcome, got {other:?}"),
    }
}

/// Says goodbye and waits for the node to close.
async fn goodbye(client: &mut RawClient) {
    client
        .send(Frame::Goodbye(Goodbye {
            reason: "done".into(),
        }))
        .await;
    client.closed().await;
}

/// How the node answered one connection of a flood.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Reception {
    Welcomed,
    Refused,
    /// Closed without a frame.
    Closed,
}

/// A flood's connections, the welcomed ones held open (answering pings) until dropped.
pub struct Flood {
    pub answers: Vec<Reception>,
    release: Vec<oneshot::Sender<()>>,
    tasks: Vec<JoinHandle<()>>,
}

impl Flood {
    /// Opens `count` connections at once, each saying hello as a producer, and reads each one's
    /// answer. A refusal must be `HelloRefused{TooManyConnections}` followed by the close.
    pub async fn open(addr: SocketAddr, count: usize) -> Self {
        let mut release = Vec::with_capacity(count);
        let mut tasks = Vec::with_capacity(count);
        let mut reports = Vec::with_capacity(count);
        for _ in 0..count {
            let (answered, report) = oneshot::channel();
            let (released, hold) = oneshot::channel();
            tasks.push(tokio::spawn(one_of_a_flood(addr, answered, hold)));
            release.push(released);
            reports.push(report);
        }
        let mut answers = Vec::with_capacity(count);
        for report in reports {
            answers.push(
                within("a flood connection's answer", report)
                    .await
                    .expect("answered"),
            );
        }
        Self {
            answers,
            release,
            tasks,
        }
    }

    pub fn count(&self, answer: Reception) -> usize {
        self.answers.iter().filter(|a| **a == answer).count()
    }
}

impl Drop for Flood {
    fn drop(&mut self) {
        self.release.clear();
        for task in &self.tasks {
            task.abort();
        }
    }
}

async fn one_of_a_flood(
    addr: SocketAddr,
    answered: oneshot::Sender<Reception>,
    mut hold: oneshot::Receiver<()>,
) {
    let Ok(stream) = TcpStream::connect(addr).await else {
        let _ = answered.send(Reception::Closed);
        return;
    };
    let mut framed = Framed::new(stream, FrameCodec::default());
    // The node may refuse before reading the hello, and close before it is written.
    let _ = framed.send(Frame::Hello(hello_at(Role::Producer, 2))).await;
    let first = within("a flood connection's first frame", framed.next()).await;
    match first {
        Some(Ok(Frame::Welcome(_))) => {
            let _ = answered.send(Reception::Welcomed);
            loop {
                tokio::select! {
                    _ = &mut hold => return,
                    frame = framed.next() => match frame {
                        Some(Ok(Frame::Ping(ping))) => {
                            let _ = framed.send(Frame::Pong(Pong { nonce: ping.nonce })).await;
                        }
                        _ => return,
                    },
                }
            }
        }
        Some(Ok(Frame::HelloRefused(refusal))) => {
            assert_eq!(
                refusal.code,
                RefusalCode::TooManyConnections,
                "{}",
                refusal.reason
            );
            let after = within("the close after a refusal", framed.next()).await;
            assert!(
                !matches!(after, Some(Ok(_))),
                "a refused connection is closed, got {after:?}"
            );
            let _ = answered.send(Reception::Refused);
        }
        Some(Ok(other)) => panic!("a flood connection got {other:?}"),
        Some(Err(_)) | None => {
            let _ = answered.send(Reception::Closed);
        }
    }
}

/// A producer that submits `echo`s and never reads a byte, held open until dropped.
pub struct NeverReader {
    pub submitted: u64,
    _framed: Framed<TcpStream, FrameCodec>,
}

impl NeverReader {
    /// Connects, reads its `Welcome` (the only read), then submits up to `max` echoes of
    /// `payload` bytes into `namespace` until a write stalls for `stall`.
    pub async fn start(
        addr: SocketAddr,
        namespace: &str,
        payload: usize,
        max: u64,
        stall: Duration,
    ) -> Self {
        let (client, _) = hello(addr, Role::Producer).await;
        let mut framed = client.framed;
        let input = Bytes::from(vec![b'n'; payload]);
        let mut submitted = 0;
        for correlation in 1..=max {
            let frame = Frame::from(Submit {
                correlation,
                request: DispatchRequest {
                    input: input.clone(),
                    ..request(namespace, "echo", "")
                },
                wait_for_worker_ms: Some(5_000),
                reply_timeout_ms: Some(20_000),
                routing: NodeRouting::Any,
                extras: Default::default(),
            });
            match tokio::time::timeout(stall, framed.send(frame)).await {
                Ok(Ok(())) => submitted += 1,
                Ok(Err(_)) | Err(_) => break,
            }
        }
        Self {
            submitted,
            _framed: framed,
        }
    }
}
