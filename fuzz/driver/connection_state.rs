//! Drives one connection of a real `Node` through a script decoded from fuzz bytes: a role,
//! then frames of every kind (well-formed, out of place, cut short) and raw garbage, with the
//! clock advanced between them. The node serves in-memory pipes on a current-thread runtime in
//! paused time: no sockets, no disk.
//!
//! Beside the scripted connection runs a well-behaved one of the other role: a worker that
//! answers every push (a `slow` one only once cancelled) for a scripted producer, a producer
//! with three submissions for a scripted worker. [`run`] asserts:
//! - nothing panics, and every byte the node sends decodes as a frame its version knows, with
//!   no outcome of a variant or reason its version does not know;
//! - a scripted producer gets exactly one outcome per `Submit`, never one for a correlation it
//!   has none in flight for, unless the node ended the connection (and then with `Error`,
//!   `Goodbye` or `HelloRefused`, or after bytes that were not whole frames);
//! - the well-behaved producer gets exactly one outcome per submission, whatever the script did;
//! - once the scripted connection closed: no worker from it stays registered, no dispatch is in
//!   flight or waiting, every slot is free, and only the well-behaved connection remains.
//!
//! Script bytes: the first picks the role, the version (1 to 3) and whether pings are answered,
//! and whether the client says hello by itself; then
//! each op is one byte (below) followed by the bytes it reads. Running out of bytes ends the
//! script; missing operands read as zero; bytes past the first 128 are not read.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, Once};
use std::time::Duration;

use bytes::{Bytes, BytesMut};
use futures_util::StreamExt;
use lintel::transport::Socket;
use lintel::wire::{
    encode_frame, ActivityOutcome, Cancel, CapacityUpdate, DispatchRequest, DispatchResponse,
    DispatchResult, Drain, Drained, ErrorCode, ErrorFrame, Extension, Farewell, Frame, FrameCodec,
    FrameKind, Goodbye, Header, Hello, NodeRouting, Ping, Pong, Push, Register, Registered, Relay,
    Reply, RequestExtras, Role, StatusQuery, Submit, Subscribe,
};
use lintel::{Node, NodeConfig};
use tokio::io::AsyncWriteExt;
use tokio::sync::{mpsc, Notify};
use tokio_util::codec::FramedRead;

/// Largest frame body either side sends.
const MAX_FRAME_LEN: usize = 1 << 16;

/// Script bytes read; the rest of a longer input is ignored, which bounds one run's work.
const MAX_SCRIPT_LEN: usize = 128;

/// How long, in paused time, the node may take to answer or close once the script is over.
const SETTLE: Duration = Duration::from_secs(600);

static PANICKED: AtomicBool = AtomicBool::new(false);

/// Notes any panic, on any task, before the previous hook reports it.
fn watch_panics() {
    static HOOK: Once = Once::new();
    HOOK.call_once(|| {
        let previous = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            PANICKED.store(true, Ordering::SeqCst);
            previous(info);
        }));
    });
}

/// What the scripted connection read, to tell a script that reached deep states from one the
/// node turned away at once.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Report {
    pub frames: usize,
    pub outcomes: usize,
    pub pushes: usize,
    pub registered: bool,
    pub errors: usize,
}

/// Runs the script `data` against a fresh node and checks every invariant above.
pub fn run(data: &[u8]) -> Report {
    watch_panics();
    PANICKED.store(false, Ordering::SeqCst);
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .start_paused(true)
        .build()
        .expect("runtime");
    let report = runtime.block_on(drive(data));
    drop(runtime);
    assert!(!PANICKED.load(Ordering::SeqCst), "a task panicked");
    report
}

/// Reads script bytes; past the end every operand is zero.
struct Script<'a> {
    bytes: &'a [u8],
}

impl Script<'_> {
    fn op(&mut self) -> Option<u8> {
        let (first, rest) = self.bytes.split_first()?;
        self.bytes = rest;
        Some(*first)
    }

    fn byte(&mut self) -> u8 {
        self.op().unwrap_or(0)
    }

    fn take(&mut self, n: usize) -> Vec<u8> {
        let n = n.min(self.bytes.len());
        let (taken, rest) = self.bytes.split_at(n);
        self.bytes = rest;
        taken.to_vec()
    }

    fn pick<T: Clone>(&mut self, choices: &[T]) -> T {
        choices[usize::from(self.byte()) % choices.len()].clone()
    }
}

/// What goes out on a client's write half.
enum Out {
    Frame(Box<Frame>),
    Bytes(Vec<u8>),
    Shutdown,
}

/// What a client has read.
#[derive(Default)]
struct Seen {
    frames: Vec<Frame>,
    /// The kind each of `frames` came as.
    kinds: Vec<FrameKind>,
    pushes: Vec<Push>,
    pings: Vec<u64>,
    version: Option<u16>,
    /// The node closed its write half (or the pipe broke).
    closed: bool,
    undecodable: Option<String>,
}

/// How a client's reader answers by itself.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Answers {
    Nothing,
    Pings,
    /// Pings, and pushes: `echo` at once, others once cancelled.
    AsWorker,
}

/// One client connection to the node over an in-memory pipe.
struct Client {
    out: mpsc::UnboundedSender<Out>,
    seen: Arc<Mutex<Seen>>,
    changed: Arc<Notify>,
}

impl Client {
    fn connect(incoming: &mpsc::UnboundedSender<Socket>, answers: Answers) -> Self {
        let (near, far) = tokio::io::duplex(1 << 16);
        let (far_read, far_write) = tokio::io::split(far);
        incoming
            .send(Socket::from_io(far_read, far_write, None))
            .expect("the node accepts");
        let (read, mut write) = tokio::io::split(near);
        let (out, mut queued) = mpsc::unbounded_channel::<Out>();
        tokio::spawn(async move {
            while let Some(item) = queued.recv().await {
                let written = match item {
                    Out::Frame(frame) => {
                        let mut bytes = BytesMut::new();
                        encode_frame(
                            &frame,
                            lintel::wire::PROTOCOL_VERSION,
                            &mut bytes,
                            MAX_FRAME_LEN,
                        )
                        .expect("encode");
                        write.write_all(&bytes).await
                    }
                    Out::Bytes(bytes) => write.write_all(&bytes).await,
                    Out::Shutdown => write.shutdown().await,
                };
                if written.is_err() {
                    break;
                }
            }
        });
        let seen = Arc::new(Mutex::new(Seen::default()));
        let changed = Arc::new(Notify::new());
        let client = Self {
            out: out.clone(),
            seen: Arc::clone(&seen),
            changed: Arc::clone(&changed),
        };
        tokio::spawn(async move {
            let mut frames = FramedRead::new(read, FrameCodec::new(MAX_FRAME_LEN));
            let mut held: Vec<Push> = Vec::new();
            loop {
                let next = frames.next().await;
                let mut seen = seen.lock().expect("seen");
                match next {
                    Some(Ok(frame)) => {
                        match &frame {
                            Frame::Welcome(welcome) => seen.version = Some(welcome.version),
                            Frame::Ping(ping) => {
                                seen.pings.push(ping.nonce);
                                if answers != Answers::Nothing {
                                    let _ = out.send(Out::Frame(Box::new(Frame::Pong(Pong {
                                        nonce: ping.nonce,
                                    }))));
                                }
                            }
                            Frame::Push(_) => {
                                let push = as_push(&frame).expect("a push");
                                seen.pushes.push(push.clone());
                                if answers == Answers::AsWorker {
                                    if push.request.activity_type == "echo" {
                                        let _ = out.send(Out::Frame(Box::new(reply(&push))));
                                    } else {
                                        held.push(push);
                                    }
                                }
                            }
                            Frame::Cancel(cancel) if answers == Answers::AsWorker => {
                                if let Some(at) = held
                                    .iter()
                                    .position(|p| p.correlation == cancel.correlation)
                                {
                                    let _ = out
                                        .send(Out::Frame(Box::new(reply(&held.swap_remove(at)))));
                                }
                            }
                            _ => {}
                        }
                        if let Some(kind) = frames.decoder().last_kind() {
                            seen.kinds.push(kind);
                        }
                        seen.frames.push(frame);
                    }
                    Some(Err(err)) => {
                        seen.undecodable = Some(err.to_string());
                        seen.closed = true;
                    }
                    None => seen.closed = true,
                }
                let closed = seen.closed;
                drop(seen);
                changed.notify_waiters();
                if closed {
                    return;
                }
            }
        });
        client
    }

    fn send(&self, frame: Frame) {
        let _ = self.out.send(Out::Frame(Box::new(frame)));
    }

    /// Waits until `done` holds of what the client saw, at most `bound` of paused time; says
    /// whether it held.
    async fn until(&self, bound: Duration, done: impl Fn(&Seen) -> bool) -> bool {
        let waiting = async {
            loop {
                let changed = self.changed.notified();
                tokio::pin!(changed);
                changed.as_mut().enable();
                if done(&self.seen.lock().expect("seen")) {
                    return;
                }
                changed.await;
            }
        };
        tokio::time::timeout(bound, waiting).await.is_ok()
    }
}

/// A push as the worker answers it, whichever kind it came as.
fn as_push(frame: &Frame) -> Option<Push> {
    match frame {
        Frame::Push(push) => Some(Push::clone(push)),
        _ => None,
    }
}

/// A success echoing `push`'s input.
fn reply(push: &Push) -> Frame {
    Frame::Reply(Reply {
        correlation: push.correlation,
        response: DispatchResponse {
            workflow_id: push.request.workflow_id.clone(),
            ordinal: push.request.ordinal,
            run_id: push.request.run_id.clone(),
            outcome: ActivityOutcome::Success(push.request.input.clone()),
        },
    })
}

fn request(namespace: &str, activity: &str, input: &[u8]) -> DispatchRequest {
    DispatchRequest {
        namespace: namespace.into(),
        task_queue: String::new(),
        activity_type: activity.into(),
        node: None,
        workflow_id: "wf".into(),
        ordinal: 1,
        run_id: None,
        attempt: 1,
        input: Bytes::copy_from_slice(input),
        deadline_unix_ms: None,
    }
}

fn hello(role: Role, min_version: u16, max_version: u16) -> Frame {
    Frame::Hello(Hello {
        min_version,
        max_version,
        role,
        name: "fuzz".into(),
        auth_token: None,
    })
}

fn submit(
    correlation: u64,
    request: DispatchRequest,
    wait: Option<u64>,
    reply: Option<u64>,
) -> Frame {
    Frame::from(Submit {
        correlation,
        request,
        wait_for_worker_ms: wait,
        reply_timeout_ms: reply,
        routing: NodeRouting::Any,
        extras: Default::default(),
    })
}

/// The node's settings: every timeout within a few of the script's waits (at most 2.55 s
/// each), as a run costs in proportion to the paused time it spans, pings firing all through.
fn config() -> NodeConfig {
    NodeConfig {
        max_frame_len: MAX_FRAME_LEN,
        ping_interval_ms: 1_000,
        max_missed_pings: 3,
        handshake_timeout_ms: 2_000,
        frame_timeout_ms: 3_000,
        reply_timeout_ms: 5_000,
        late_reply_grace_ms: 5_000,
        drain_timeout_ms: 1_000,
        max_in_flight_per_producer: 16,
        ..NodeConfig::default()
    }
}

const NAMESPACES: [&str; 3] = ["ns", "other", ""];
const ACTIVITIES: [&str; 3] = ["echo", "slow", ""];

/// What the script's own bookkeeping says about its connection.
#[derive(Default)]
struct Model {
    /// The first frame was a producer's valid hello, and only whole frames were sent since.
    producer: bool,
    /// Bytes that are not whole frames went out: what the node reads is no longer known.
    garbled: bool,
    /// The script ended the connection itself (goodbye or shut write half).
    ended: bool,
    /// Submissions sent per correlation.
    submitted: BTreeMap<u64, u32>,
    frames_sent: u32,
}

async fn drive(data: &[u8]) -> Report {
    let mut script = Script {
        bytes: data.get(..MAX_SCRIPT_LEN).unwrap_or(data),
    };
    let header = script.byte();
    let as_producer = header & 1 == 1;
    // Bit 5 picks version 3; otherwise bit 1 picks 1 or 2, as before version 3.
    let version = if header >> 5 & 1 == 1 {
        3
    } else {
        1 + u16::from(header >> 1 & 1)
    };
    let answers = if header >> 2 & 1 == 1 {
        Answers::Pings
    } else {
        Answers::Nothing
    };
    let auto_hello = header >> 3 & 3 != 0;

    let node = Arc::new(Node::new(config()).expect("config"));
    let (incoming, accepted) = mpsc::unbounded_channel::<Socket>();
    let stream = futures_util::stream::unfold(accepted, |mut accepted| async move {
        let socket = accepted.recv().await?;
        Some((Ok(socket), accepted))
    });
    let serving = Arc::clone(&node);
    let local = SocketAddr::from(([127, 0, 0, 1], 7000));
    tokio::spawn(async move {
        serving
            .serve_connections(local, stream, std::future::pending())
            .await;
    });

    // The well-behaved connection of the other role, set up before the script starts.
    let other = if as_producer {
        let worker = Client::connect(&incoming, Answers::AsWorker);
        worker.send(hello(Role::Worker, 1, 2));
        worker.send(Frame::from(register(&["ns"], &["echo", "slow"], 2)));
        let registered = worker
            .until(SETTLE, |seen| {
                seen.frames
                    .iter()
                    .any(|f| matches!(f, Frame::Registered(_)))
            })
            .await;
        assert!(registered, "the well-behaved worker registers");
        worker
    } else {
        let producer = Client::connect(&incoming, Answers::Pings);
        producer.send(hello(Role::Producer, 2, 2));
        producer.send(submit(
            1,
            request("ns", "echo", b"a"),
            Some(2_000),
            Some(5_000),
        ));
        producer.send(submit(
            2,
            request("ns", "slow", b"b"),
            Some(2_000),
            Some(3_000),
        ));
        producer.send(submit(3, request("ns", "echo", b"c"), None, None));
        producer
    };

    let client = Client::connect(&incoming, answers);
    let mut model = Model::default();
    if auto_hello {
        let role = if as_producer {
            Role::Producer
        } else {
            Role::Worker
        };
        send(&client, &mut model, hello(role, 1, version));
        model.producer = as_producer;
    }
    while let Some(op) = script.op() {
        if model.ended {
            break;
        }
        play(op, &mut script, &client, &mut model).await;
    }

    settle(&client, &model).await;
    if !model.ended {
        client.send(Frame::Goodbye(Goodbye {
            reason: "script over".into(),
        }));
    }
    let closed = client.until(SETTLE, |seen| seen.closed).await;
    assert!(closed, "the node closes the connection after a goodbye");
    check_frames(&client);
    check_other(&other, as_producer).await;
    check_released(&node, usize::from(as_producer)).await;
    let seen = client.seen.lock().expect("seen");
    Report {
        frames: seen.frames.len(),
        outcomes: seen
            .frames
            .iter()
            .filter(|f| matches!(f, Frame::Outcome(_) | Frame::ServedOutcome(_)))
            .count(),
        pushes: seen.pushes.len(),
        registered: seen
            .frames
            .iter()
            .any(|f| matches!(f, Frame::Registered(_))),
        errors: seen
            .frames
            .iter()
            .filter(|f| matches!(f, Frame::Error(_)))
            .count(),
    }
}

fn register(namespaces: &[&str], activities: &[&str], max_concurrency: u32) -> Register {
    Register {
        namespaces: namespaces.iter().map(|n| (*n).to_owned()).collect(),
        task_queue: String::new(),
        node: None,
        activity_types: activities.iter().map(|a| (*a).to_owned()).collect(),
        identity: "fuzz".into(),
        max_concurrency,
        ..Default::default()
    }
}

fn send(client: &Client, model: &mut Model, frame: Frame) {
    let submitted = match &frame {
        Frame::Submit(submit) => Some(submit.correlation),
        _ => None,
    };
    if let Some(correlation) = submitted {
        *model.submitted.entry(correlation).or_default() += 1;
    }
    model.frames_sent += 1;
    client.send(frame);
}

/// Plays one op of the script.
async fn play(op: u8, script: &mut Script<'_>, client: &Client, model: &mut Model) {
    match op % 24 {
        0 => {
            let role = script.pick(&[Role::Worker, Role::Producer, Role::Peer]);
            let min = u16::from(script.byte() % 4);
            let max = u16::from(script.byte() % 4);
            if model.frames_sent == 0 && !model.garbled {
                model.producer = role == Role::Producer && min <= 3 && max >= 1 && min <= max;
            }
            send(client, model, hello(role, min, max));
        }
        1 => {
            let mask = script.byte();
            let namespaces: Vec<&str> = NAMESPACES
                .iter()
                .enumerate()
                .filter(|(i, _)| mask >> i & 1 == 1)
                .map(|(_, n)| *n)
                .collect();
            let activity = script.pick(&ACTIVITIES);
            let capacity = u32::from(script.byte() % 4);
            send(
                client,
                model,
                Frame::from(register(&namespaces, &[activity], capacity)),
            );
        }
        2 => {
            let max_concurrency = u32::from(script.byte() % 4);
            send(
                client,
                model,
                Frame::CapacityUpdate(CapacityUpdate { max_concurrency }),
            );
        }
        3 => {
            let pick = usize::from(script.byte());
            let push = client
                .seen
                .lock()
                .expect("seen")
                .pushes
                .get(pick % 4)
                .cloned();
            let frame = match push {
                Some(push) => reply(&push),
                None => reply(&Push {
                    correlation: u64::from(script.byte()),
                    request: request("ns", "echo", b""),
                    extras: Default::default(),
                }),
            };
            send(client, model, frame);
        }
        4 | 18 | 19 | 20 => {
            let correlation = u64::from(script.byte() % 8);
            let namespace = script.pick(&NAMESPACES);
            let activity = script.pick(&ACTIVITIES);
            let wait = script.pick(&[None, Some(0), Some(50), Some(2_000)]);
            let reply_timeout = script.pick(&[None, Some(10), Some(1_000), Some(8_000)]);
            let len = usize::from(script.byte() % 8);
            let input = script.take(len);
            let request = request(namespace, activity, &input);
            let frame = if op % 24 == 20 {
                // Version 3: extras that pass, that are invalid, or that need a feature.
                let extras = extras(script.byte());
                Frame::from(Submit {
                    correlation,
                    request,
                    extras,
                    wait_for_worker_ms: wait,
                    reply_timeout_ms: reply_timeout,
                    routing: NodeRouting::Any,
                })
            } else {
                submit(correlation, request, wait, reply_timeout)
            };
            send(client, model, frame);
        }
        21 => {
            let activity = script.pick(&ACTIVITIES);
            let capacity = u32::from(script.byte() % 4);
            let identity = script.byte();
            let register = Register {
                deployment: (identity & 1 == 1).then(|| "v1".to_owned()),
                instance_id: (identity & 2 == 2).then(|| "i1".to_owned()),
                extensions: extensions(identity >> 2),
                ..register(&["ns"], &[activity], capacity)
            };
            send(client, model, Frame::from(register));
        }
        22 => {
            let correlation = u64::from(script.byte() % 8);
            send(
                client,
                model,
                Frame::Subscribe(Subscribe {
                    correlation,
                    topics: Vec::new(),
                }),
            );
        }
        5 => {
            let correlation = u64::from(script.byte() % 8);
            send(client, model, Frame::Cancel(Cancel { correlation }));
        }
        6 => send(
            client,
            model,
            Frame::Ping(Ping {
                nonce: u64::from(script.byte()),
            }),
        ),
        7 => {
            let last = client.seen.lock().expect("seen").pings.last().copied();
            let nonce = last.unwrap_or_else(|| u64::from(script.byte()));
            send(client, model, Frame::Pong(Pong { nonce }));
        }
        8 => send(
            client,
            model,
            Frame::Drain(Drain {
                grace_ms: u64::from(script.byte()),
            }),
        ),
        9 => send(client, model, Frame::Drained(Drained { completed: 0 })),
        10 => {
            send(
                client,
                model,
                Frame::Goodbye(Goodbye {
                    reason: "bye".into(),
                }),
            );
            model.ended = true;
        }
        11 => {
            let correlation = u64::from(script.byte());
            send(
                client,
                model,
                Frame::StatusQuery(StatusQuery { correlation }),
            );
        }
        12 => {
            let frame = match script.byte() % 8 {
                0 => Frame::from(Push {
                    correlation: 1,
                    request: request("ns", "echo", b""),
                    extras: Default::default(),
                }),
                1 => Frame::Registered(Registered { worker_id: 1 }),
                2 => Frame::from(Relay {
                    correlation: 1,
                    request: request("ns", "echo", b""),
                    routing: NodeRouting::Any,
                    reply_timeout_ms: 100,
                    extras: Default::default(),
                }),
                3 => Frame::Error(ErrorFrame {
                    code: ErrorCode::Malformed,
                    reason: "fuzz".into(),
                }),
                4 => Frame::Outcome(lintel::wire::OutcomeFrame {
                    correlation: 1,
                    result: DispatchResult::Cancelled,
                }),
                5 => Frame::from(Push {
                    correlation: 1,
                    request: request("ns", "echo", b""),
                    extras: RequestExtras::default(),
                }),
                6 => Frame::Farewell(Farewell {
                    reason: "fuzz".into(),
                }),
                _ => hello(Role::Producer, 1, 2),
            };
            send(client, model, frame);
        }
        13 => {
            let len = usize::from(script.byte() % 32);
            let bytes = script.take(len);
            model.garbled = true;
            model.producer = false;
            let _ = client.out.send(Out::Bytes(bytes));
        }
        14 => {
            let mut bytes = BytesMut::new();
            let frame = Frame::StatusQuery(StatusQuery { correlation: 9 });
            encode_frame(
                &frame,
                lintel::wire::PROTOCOL_VERSION,
                &mut bytes,
                MAX_FRAME_LEN,
            )
            .expect("encode");
            let cut = usize::from(script.byte()) % bytes.len();
            model.garbled = true;
            model.producer = false;
            let _ = client.out.send(Out::Bytes(bytes[..cut].to_vec()));
        }
        15 => {
            let millis = u64::from(script.byte()) * 10;
            tokio::time::sleep(Duration::from_millis(millis)).await;
        }
        16 => {
            for _ in 0..script.byte() % 8 {
                tokio::task::yield_now().await;
            }
        }
        _ => {
            let _ = client.out.send(Out::Shutdown);
            model.ended = true;
        }
    }
}

/// A request's version-3 extras as `pick` says: none, a header, an invalid header name, a
/// priority (0 to 6, some out of range), a required deployment, or extensions.
fn extras(pick: u8) -> RequestExtras {
    let mut extras: RequestExtras = RequestExtras::default();
    match pick % 6 {
        0 => {}
        1 => extras.headers.push(Header::new("traceparent", "00-ab-01")),
        2 => extras.headers.push(Header {
            name: "Not A Name".into(),
            value: String::new(),
        }),
        3 => extras.priority = Some(pick / 6 % 7),
        4 => extras.deployment = Some("v1".into()),
        _ => extras.extensions = extensions(pick / 6),
    }
    extras
}

/// Up to three extensions, some critical, as the bits of `pick` say.
fn extensions(pick: u8) -> Vec<Extension> {
    (0..pick % 4)
        .map(|tag| Extension {
            tag: u32::from(tag),
            critical: pick >> (2 + tag) & 1 == 1,
            value: Bytes::from_static(b"x"),
        })
        .collect()
}

/// Waits, in paused time, until the script's producer has every outcome or the node closed;
/// then checks the outcomes against what was submitted.
async fn settle(client: &Client, model: &Model) {
    let expected: u32 = model.submitted.values().sum();
    let outcomes = |seen: &Seen| {
        seen.frames
            .iter()
            .filter(|f| matches!(f, Frame::Outcome(_) | Frame::ServedOutcome(_)))
            .count() as u32
    };
    let settled = client
        .until(SETTLE, |seen| seen.closed || outcomes(seen) >= expected)
        .await;
    let seen = client.seen.lock().expect("seen");
    if !model.producer || model.garbled {
        return;
    }
    let node_ended = seen.closed && !model.ended;
    if node_ended {
        let last = seen.frames.last();
        assert!(
            matches!(
                last,
                Some(Frame::Error(_) | Frame::Goodbye(_) | Frame::HelloRefused(_))
            ),
            "the node closed a producer without saying why; last frame {last:?}"
        );
        return;
    }
    if model.ended {
        // Outcomes after our own goodbye may never come; what came must still add up.
        check_outcomes(&seen, &model.submitted, false);
        return;
    }
    assert!(settled, "submissions still unanswered after {SETTLE:?}");
    check_outcomes(&seen, &model.submitted, true);
}

/// No more outcomes per correlation than submissions, in any prefix; with `all`, exactly as
/// many.
fn check_outcomes(seen: &Seen, submitted: &BTreeMap<u64, u32>, all: bool) {
    let mut outstanding = submitted.clone();
    for frame in &seen.frames {
        let correlation = match frame {
            Frame::Outcome(outcome) => outcome.correlation,
            Frame::ServedOutcome(outcome) => outcome.correlation,
            _ => continue,
        };
        let left = outstanding.entry(correlation).or_default();
        assert!(
            *left > 0,
            "an outcome for {correlation}, with none in flight"
        );
        *left -= 1;
    }
    if all {
        assert!(
            outstanding.values().all(|left| *left == 0),
            "submissions without an outcome: {outstanding:?}"
        );
    }
}

/// Every frame decoded; none of a kind the connection's version does not know, and no outcome
/// of a variant or reason it does not know (or, on version 3, a version-2 `NoWorker`).
fn check_frames(client: &Client) {
    let seen = client.seen.lock().expect("seen");
    assert!(
        seen.undecodable.is_none(),
        "the node sent bytes that are not a frame: {:?}",
        seen.undecodable
    );
    let Some(version) = seen.version else {
        return;
    };
    for (frame, kind) in seen.frames.iter().zip(&seen.kinds) {
        assert!(
            kind.version() <= version,
            "a version-{version} connection got {kind}: {frame:?}"
        );
        if !matches!(frame, Frame::Outcome(_) | Frame::ServedOutcome(_)) {
            continue;
        }
        // An outcome the version knows reads back the same once written at that version.
        let mut bytes = BytesMut::new();
        encode_frame(frame, version, &mut bytes, MAX_FRAME_LEN).expect("an outcome encodes");
        let again = lintel::wire::decode_frame(&mut bytes, MAX_FRAME_LEN);
        assert_eq!(
            again.ok().flatten().as_ref(),
            Some(frame),
            "a version-{version} producer got an outcome of another version"
        );
    }
}

/// The well-behaved connection is still up; as a producer, it got exactly one outcome each.
async fn check_other(other: &Client, other_is_worker: bool) {
    if other_is_worker {
        let seen = other.seen.lock().expect("seen");
        assert!(!seen.closed, "the well-behaved worker was closed");
        return;
    }
    let answered = other
        .until(SETTLE, |seen| {
            seen.frames
                .iter()
                .filter(|f| matches!(f, Frame::ServedOutcome(_)))
                .count()
                >= 3
        })
        .await;
    let seen = other.seen.lock().expect("seen");
    assert!(
        answered && !seen.closed,
        "the well-behaved producer got {:?}",
        seen.frames
    );
    check_outcomes(&seen, &BTreeMap::from([(1, 1), (2, 1), (3, 1)]), true);
}

/// Once the scripted connection closed, the node holds nothing of it: no worker, no flight, no
/// waiter, no reserved slot; only the well-behaved connection, with its `workers` registration.
async fn check_released(node: &Node, workers: usize) {
    let released = || {
        let registry = node.registry();
        registry.worker_count() == workers
            && registry.waiting() == 0
            && registry.reserved_slots() == 0
            && node.dispatcher().active() == 0
            && node.status().connections == 1
    };
    let waited = eventually(SETTLE, released).await;
    assert!(
        waited,
        "after the close: {} workers, {} waiting, {} slots reserved, {} dispatches active, {} connections",
        node.registry().worker_count(),
        node.registry().waiting(),
        node.registry().reserved_slots(),
        node.dispatcher().active(),
        node.status().connections
    );
}

/// Looks at `done` after each step of paused time, at most `bound`.
async fn eventually(bound: Duration, done: impl Fn() -> bool) -> bool {
    let deadline = tokio::time::Instant::now() + bound;
    while tokio::time::Instant::now() < deadline {
        if done() {
            return true;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    done()
}
