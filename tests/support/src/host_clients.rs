//! Workers and producers as processes on hosts of their own: raw protocol clients over TCP that
//! print what they see as [`Report`] lines on stdout, and [`Collected`], which gathers those
//! lines from every process into the simulation's [`Ledger`] for [`crate::sim_checks`].
//!
//! A worker counts the pushes it holds on its current connection, reports each push, a new peak
//! and a count past its `max_concurrency`, and replies with its node's id after a short piece of
//! work; it dials its node again whenever its connection goes. A producer submits with a
//! bounded window and a pause between submissions until told to stop, then waits for what it
//! has in flight; it reports each submission and each outcome (the frame itself, hex-encoded),
//! the dispatches in flight when its connection closed as lost, and reconnects.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;
use std::net::SocketAddr;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use bytes::{Bytes, BytesMut};
use lintel::sdk::connect::{connect, Connection, Handshake};
use lintel::wire::{
    ActivityOutcome, DispatchRequest, DispatchResponse, Frame, FrameCodec, NodeRouting, Ping, Pong,
    Push, Register, Reply, Role, ServedOutcome, Submit,
};
use tokio::sync::{mpsc, watch};
use tokio::task::JoinSet;
use tokio::time::{interval, sleep, sleep_until, Instant, MissedTickBehavior};
use tokio_util::codec::{Decoder, Encoder};

use super::sim::{Ended, Ledger};

/// What every report line starts with, to tell it from anything else on the same stdout.
pub const PREFIX: &str = "host-client";
/// The pool and activity every worker serves and every dispatch asks for.
pub const NAMESPACE: &str = "hosts";
pub const ACTIVITY: &str = "work";
/// A connection that reads nothing for this long is given up.
const IDLE: Duration = Duration::from_secs(5);
/// How often a client pings its node.
const PING: Duration = Duration::from_millis(500);
/// The pause before dialling again.
const REDIAL: Duration = Duration::from_millis(200);

/// One line a client process prints.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Report {
    Registered {
        worker: String,
    },
    /// A worker at `node` received a push of `workflow_id`.
    Push {
        worker: String,
        node: String,
        workflow_id: String,
    },
    /// The most pushes `worker` held at once so far.
    Peak {
        worker: String,
        held: u32,
    },
    Violation(String),
    Submitted {
        origin: String,
        workflow_id: String,
        unix_ms: u64,
    },
    /// The `ServedOutcome` frame read for `workflow_id`, as the codec writes it, in hex.
    Outcome {
        workflow_id: String,
        unix_ms: u64,
        frame: String,
    },
    /// In flight when the producer's connection closed.
    Lost {
        workflow_id: String,
    },
    /// A producer that was told to stop has every outcome.
    Done {
        producer: String,
    },
    /// A weathered proxy's counts: connections, chunks, stalls, cuts.
    Weather([u64; 4]),
    /// How a TCP connect from one host to another went: `connected`, `refused`, `timeout`, ...
    Probe(String),
}

impl fmt::Display for Report {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{PREFIX} ")?;
        match self {
            Self::Registered { worker } => write!(f, "registered {worker}"),
            Self::Push {
                worker,
                node,
                workflow_id,
            } => write!(f, "push {worker} {node} {workflow_id}"),
            Self::Peak { worker, held } => write!(f, "peak {worker} {held}"),
            Self::Violation(text) => write!(f, "violation {}", text.replace('\n', " ")),
            Self::Submitted {
                origin,
                workflow_id,
                unix_ms,
            } => write!(f, "submitted {origin} {workflow_id} {unix_ms}"),
            Self::Outcome {
                workflow_id,
                unix_ms,
                frame,
            } => write!(f, "outcome {workflow_id} {unix_ms} {frame}"),
            Self::Lost { workflow_id } => write!(f, "lost {workflow_id}"),
            Self::Done { producer } => write!(f, "done {producer}"),
            Self::Weather([connections, chunks, stalls, cuts]) => {
                write!(f, "weather {connections} {chunks} {stalls} {cuts}")
            }
            Self::Probe(result) => write!(f, "probe {result}"),
        }
    }
}

impl Report {
    /// The report on `line`, if it holds one (after whatever else the process printed first).
    pub fn parse(line: &str) -> Option<Self> {
        let from = line.find(PREFIX)?;
        let rest = line.get(from + PREFIX.len()..)?.strip_prefix(' ')?;
        let (kind, rest) = rest.split_once(' ').unwrap_or((rest, ""));
        let words: Vec<&str> = rest.split(' ').collect();
        let word = |index: usize| words.get(index).map(|word| (*word).to_owned());
        let number = |index: usize| words.get(index).and_then(|word| word.parse::<u64>().ok());
        Some(match kind {
            "registered" => Self::Registered { worker: word(0)? },
            "push" => Self::Push {
                worker: word(0)?,
                node: word(1)?,
                workflow_id: word(2)?,
            },
            "peak" => Self::Peak {
                worker: word(0)?,
                held: u32::try_from(number(1)?).ok()?,
            },
            "violation" => Self::Violation(rest.to_owned()),
            "submitted" => Self::Submitted {
                origin: word(0)?,
                workflow_id: word(1)?,
                unix_ms: number(2)?,
            },
            "outcome" => Self::Outcome {
                workflow_id: word(0)?,
                unix_ms: number(1)?,
                frame: word(2)?,
            },
            "lost" => Self::Lost {
                workflow_id: word(0)?,
            },
            "done" => Self::Done { producer: word(0)? },
            "weather" => Self::Weather([number(0)?, number(1)?, number(2)?, number(3)?]),
            "probe" => Self::Probe(word(0)?),
            _ => return None,
        })
    }

    /// Prints the report on stdout, a line of its own.
    pub fn print(&self) {
        println!("{self}");
    }
}

/// Milliseconds since the Unix epoch: one clock for every process on the machine.
pub fn unix_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |since| {
            u64::try_from(since.as_millis()).unwrap_or(u64::MAX)
        })
}

fn handshake(role: Role, name: &str) -> Handshake {
    let mut handshake = Handshake::new(role, name);
    handshake.timeout = Duration::from_secs(2);
    handshake.queue_len = 256;
    handshake
}

/// Dials `node` until a handshake succeeds.
async fn dial(node: SocketAddr, role: Role, name: &str) -> Connection {
    loop {
        if let Ok(conn) = connect(node, &handshake(role, name)).await {
            return conn;
        }
        sleep(REDIAL).await;
    }
}

/// A worker process: its name, its node's id and address, its slots.
#[derive(Debug, Clone)]
pub struct WorkerSpec {
    pub name: String,
    pub node_id: String,
    pub node: SocketAddr,
    pub capacity: u32,
}

/// Runs the worker until the process ends, dialling its node again whenever the connection goes.
pub async fn worker(spec: WorkerSpec, seed: u64) {
    let mut rng = fastrand::Rng::with_seed(seed);
    let mut peak = 0;
    loop {
        let conn = dial(spec.node, Role::Worker, &spec.name).await;
        serve_pushes(&spec, &mut rng, &mut peak, conn).await;
        sleep(REDIAL).await;
    }
}

/// Registers and serves pushes until the connection goes; the work in hand goes with it.
async fn serve_pushes(
    spec: &WorkerSpec,
    rng: &mut fastrand::Rng,
    peak: &mut u32,
    conn: Connection,
) {
    let Connection {
        mut reader,
        outbound,
        ..
    } = conn;
    let register = Register {
        namespaces: vec![NAMESPACE.into()],
        task_queue: String::new(),
        node: None,
        activity_types: vec![ACTIVITY.into()],
        identity: spec.name.clone(),
        max_concurrency: spec.capacity,
        ..Default::default()
    };
    if outbound.send(Frame::from(register)).await.is_err() {
        return;
    }
    let (done_tx, mut done_rx) = mpsc::unbounded_channel::<u64>();
    // Dropped with the connection: the work in hand is abandoned.
    let mut work = JoinSet::new();
    let mut holding: BTreeMap<u64, Push> = BTreeMap::new();
    let mut ping = interval(PING);
    ping.set_missed_tick_behavior(MissedTickBehavior::Delay);
    let mut nonce = 0;
    let mut heard = Instant::now();
    loop {
        tokio::select! {
            frame = reader.next_owned() => {
                let Some(Ok(frame)) = frame else { return };
                heard = Instant::now();
                match frame {
                    Frame::Registered(_) => Report::Registered { worker: spec.name.clone() }.print(),
                    Frame::Pong(_) => {}
                    Frame::Push(push) => {
                        let correlation = push.correlation;
                        Report::Push {
                            worker: spec.name.clone(),
                            node: spec.node_id.clone(),
                            workflow_id: push.request.workflow_id.clone(),
                        }
                        .print();
                        if holding.insert(correlation, *push).is_some() {
                            Report::Violation(format!(
                                "{} got push {correlation} twice on one connection",
                                spec.name
                            ))
                            .print();
                        }
                        let held = u32::try_from(holding.len()).unwrap_or(u32::MAX);
                        if held > *peak {
                            *peak = held;
                            Report::Peak { worker: spec.name.clone(), held }.print();
                        }
                        if held > spec.capacity {
                            Report::Violation(format!(
                                "{} holds {held} pushes with max_concurrency {}",
                                spec.name, spec.capacity
                            ))
                            .print();
                        }
                        let took = Duration::from_millis(rng.u64(20..120));
                        let done = done_tx.clone();
                        work.spawn(async move {
                            sleep(took).await;
                            let _ = done.send(correlation);
                        });
                    }
                    // Any reply lets go of the slot; the node drops it as late.
                    Frame::Cancel(cancel) => reply(spec, &outbound, &mut holding, cancel.correlation),
                    Frame::Ping(ping) => {
                        let _ = outbound.try_send(Frame::Pong(Pong { nonce: ping.nonce }));
                    }
                    // Goodbye, Error, a refused registration: this connection is over.
                    _ => return,
                }
            }
            Some(correlation) = done_rx.recv() => reply(spec, &outbound, &mut holding, correlation),
            () = sleep_until(heard + IDLE) => return,
            _ = ping.tick() => {
                nonce += 1;
                let _ = outbound.try_send(Frame::Ping(Ping { nonce }));
            }
        }
    }
}

/// Replies to the push `correlation`, if it is still held, with the worker's node id.
fn reply(
    spec: &WorkerSpec,
    outbound: &lintel::transport::Outbound,
    holding: &mut BTreeMap<u64, Push>,
    correlation: u64,
) {
    let Some(push) = holding.remove(&correlation) else {
        return;
    };
    let response = DispatchResponse {
        workflow_id: push.request.workflow_id,
        ordinal: push.request.ordinal,
        run_id: push.request.run_id,
        outcome: ActivityOutcome::Success(Bytes::from(spec.node_id.clone())),
    };
    let _ = outbound.send_owed(Frame::Reply(Reply {
        correlation,
        response,
    }));
}

/// A producer process: its name, its node's id and address, its pace.
#[derive(Debug, Clone)]
pub struct ProducerSpec {
    pub name: String,
    pub node_id: String,
    pub node: SocketAddr,
    /// Submissions in flight at most.
    pub window: usize,
    /// The pause before each submission, drawn in this range of milliseconds.
    pub pause_ms: (u64, u64),
    pub wait_for_worker_ms: u64,
    pub reply_timeout_ms: u64,
}

/// Submits until `stop` turns true, reconnecting when its connection goes, then waits for every
/// outcome still owed and reports [`Report::Done`].
pub async fn producer(spec: ProducerSpec, seed: u64, stop: watch::Receiver<bool>) {
    let mut rng = fastrand::Rng::with_seed(seed);
    let mut next = 0;
    loop {
        let conn = dial(spec.node, Role::Producer, &spec.name).await;
        if submit_all(&spec, &mut rng, &mut next, stop.clone(), conn).await {
            Report::Done {
                producer: spec.name.clone(),
            }
            .print();
            return;
        }
        sleep(REDIAL).await;
    }
}

/// Submits on one connection; true once stopped with every outcome in, false when the
/// connection went first.
async fn submit_all(
    spec: &ProducerSpec,
    rng: &mut fastrand::Rng,
    next: &mut u64,
    mut stop: watch::Receiver<bool>,
    conn: Connection,
) -> bool {
    let Connection {
        mut reader,
        outbound,
        ..
    } = conn;
    let mut in_flight: BTreeMap<u64, String> = BTreeMap::new();
    let pause =
        |rng: &mut fastrand::Rng| Duration::from_millis(rng.u64(spec.pause_ms.0..=spec.pause_ms.1));
    let mut submit_at = Instant::now() + pause(rng);
    let mut ping = interval(PING);
    ping.set_missed_tick_behavior(MissedTickBehavior::Delay);
    let mut nonce = 0;
    let mut heard = Instant::now();
    let answered = loop {
        let more = !*stop.borrow_and_update();
        if !more && in_flight.is_empty() {
            break true;
        }
        let room = more && in_flight.len() < spec.window;
        tokio::select! {
            frame = reader.next_owned() => {
                let Some(Ok(frame)) = frame else { break false };
                heard = Instant::now();
                match frame {
                    Frame::ServedOutcome(outcome) => match in_flight.remove(&outcome.correlation) {
                        Some(workflow_id) => Report::Outcome {
                            workflow_id,
                            unix_ms: unix_ms(),
                            frame: encode(*outcome),
                        }
                        .print(),
                        None => Report::Violation(format!(
                            "{} got an outcome for {}, not in flight: {:?}",
                            spec.name, outcome.correlation, outcome.result
                        ))
                        .print(),
                    },
                    Frame::Ping(ping) => {
                        let _ = outbound.try_send(Frame::Pong(Pong { nonce: ping.nonce }));
                    }
                    Frame::Pong(_) => {}
                    _ => break false,
                }
            }
            () = sleep_until(submit_at), if room => {
                let seq = *next;
                *next += 1;
                let workflow_id = format!("{}/{seq}", spec.name);
                let submit = Submit {
                    correlation: seq,
                    request: DispatchRequest {
                        namespace: NAMESPACE.into(),
                        task_queue: String::new(),
                        activity_type: ACTIVITY.into(),
                        node: None,
                        workflow_id: workflow_id.clone(),
                        ordinal: seq,
                        run_id: None,
                        attempt: 1,
                        input: Bytes::new(),
                        deadline_unix_ms: None,
                    },
                    wait_for_worker_ms: Some(spec.wait_for_worker_ms),
                    reply_timeout_ms: Some(spec.reply_timeout_ms),
                    routing: NodeRouting::Any,
                    extras: Default::default(),
                };
                Report::Submitted {
                    origin: spec.node_id.clone(),
                    workflow_id: workflow_id.clone(),
                    unix_ms: unix_ms(),
                }
                .print();
                in_flight.insert(seq, workflow_id);
                if outbound.send(Frame::from(submit)).await.is_err() {
                    break false;
                }
                submit_at = Instant::now() + pause(rng);
            }
            _ = stop.changed(), if more => {}
            () = sleep_until(heard + IDLE) => break false,
            _ = ping.tick() => {
                nonce += 1;
                let _ = outbound.try_send(Frame::Ping(Ping { nonce }));
            }
        }
    };
    if !answered {
        for workflow_id in in_flight.into_values() {
            Report::Lost { workflow_id }.print();
        }
    }
    outbound.close();
    answered
}

/// `outcome` as the codec writes it, in hex.
fn encode(outcome: ServedOutcome) -> String {
    let mut bytes = BytesMut::new();
    if let Err(err) =
        FrameCodec::default().encode(Frame::ServedOutcome(Box::new(outcome)), &mut bytes)
    {
        return format!("unencodable:{err}").replace(' ', "_");
    }
    bytes.iter().map(|byte| format!("{byte:02x}")).collect()
}

/// The `ServedOutcome` `hex` holds, as [`encode`] wrote it.
fn decode(hex: &str) -> Option<ServedOutcome> {
    let bytes: Option<Vec<u8>> = (0..hex.len())
        .step_by(2)
        .map(|at| {
            hex.get(at..at + 2)
                .and_then(|pair| u8::from_str_radix(pair, 16).ok())
        })
        .collect();
    let mut buffer = BytesMut::from(bytes?.as_slice());
    match FrameCodec::default().decode(&mut buffer) {
        Ok(Some(Frame::ServedOutcome(outcome))) => Some(*outcome),
        _ => None,
    }
}

/// What every client process reported, gathered: the simulation's ledger (times since
/// `start_unix_ms`), each worker's peak, the producers done, the proxy's latest counts.
#[derive(Debug, Default)]
pub struct Collected {
    pub start_unix_ms: u64,
    pub ledger: Ledger,
    pub peaks: BTreeMap<String, u32>,
    pub registered: BTreeMap<String, u32>,
    pub done: BTreeSet<String>,
    pub weather: [u64; 4],
    /// Outcomes read, by kind (`completed`, `peer-lost`, ...).
    pub kinds: BTreeMap<&'static str, u64>,
}

impl Collected {
    pub fn new(start_unix_ms: u64) -> Self {
        Self {
            start_unix_ms,
            ..Self::default()
        }
    }

    fn since_start(&self, unix_ms: u64) -> Duration {
        Duration::from_millis(unix_ms.saturating_sub(self.start_unix_ms))
    }

    /// Takes in one report.
    pub fn take(&mut self, report: Report) {
        match report {
            Report::Registered { worker } => *self.registered.entry(worker).or_default() += 1,
            Report::Push {
                worker,
                node,
                workflow_id,
            } => self
                .ledger
                .pushes
                .entry(workflow_id)
                .or_default()
                .push((worker, node)),
            Report::Peak { worker, held } => {
                let peak = self.peaks.entry(worker).or_default();
                *peak = (*peak).max(held);
            }
            Report::Violation(text) => self.ledger.violations.push(text),
            Report::Submitted {
                origin,
                workflow_id,
                unix_ms,
            } => {
                let at = self.since_start(unix_ms);
                self.ledger.submitted.insert(workflow_id.clone(), origin);
                self.ledger.submitted_at.insert(workflow_id, at);
            }
            Report::Outcome {
                workflow_id,
                unix_ms,
                frame,
            } => {
                let Some(outcome) = decode(&frame) else {
                    self.ledger.violations.push(format!(
                        "{workflow_id}: an outcome that does not decode: {frame}"
                    ));
                    return;
                };
                *self.kinds.entry(kind(&outcome.result)).or_default() += 1;
                let ended = Ended {
                    served_by: outcome.served_by,
                    result: outcome.result,
                    at: self.since_start(unix_ms),
                };
                self.ledger
                    .outcomes
                    .entry(workflow_id)
                    .or_default()
                    .push(ended);
            }
            Report::Lost { workflow_id } => {
                self.ledger.lost.insert(workflow_id);
            }
            Report::Done { producer } => {
                self.done.insert(producer);
            }
            Report::Weather(counts) => self.weather = counts,
            Report::Probe(_) => {}
        }
    }
}

/// The kind of `result`, as the tally names it.
pub fn kind(result: &lintel::wire::DispatchResult) -> &'static str {
    use lintel::wire::DispatchResult as R;
    match result {
        R::Completed(_) => "completed",
        R::NoWorker(_) => "no-worker",
        R::WorkerLost { .. } => "worker-lost",
        R::Timeout { .. } => "timeout",
        R::Refused(_) => "refused",
        R::Cancelled => "cancelled",
        R::Draining => "draining",
        R::PeerLost { .. } => "peer-lost",
        R::ShutDown { .. } => "shut-down",
        R::HeartbeatTimeout { .. } => "heartbeat-timeout",
    }
}
