//! The simulation's workers and producers: raw protocol clients on turmoil hosts that record
//! what they see in the [`Record`].
//!
//! A worker counts the pushes it holds on its current connection and records a violation when
//! they exceed its `max_concurrency`; it replies to every push (a cancelled one at once) and
//! drops its work when its connection goes. Told to drain, it finishes what it holds, says
//! `Drained` and leaves, and dials its node again. A producer submits a fixed number of dispatches
//! with a bounded window; the dispatches in flight when its connection closes are recorded as
//! lost, and it reconnects.
//!
//! Both ping the node and give a connection up when nothing arrives for [`IDLE`]: a partition
//! can swallow a close, and turmoil does not retransmit, so a silent connection is dead.

use std::collections::BTreeMap;
use std::time::Duration;

use bytes::Bytes;
use lintel::sdk::connect::connect_with;
use lintel::sdk::{Connection, Handshake};
use lintel::wire::{
    ActivityOutcome, DispatchRequest, DispatchResponse, Drained, Frame, Goodbye, NodeRouting, Ping,
    Pong, Push, Register, Reply, Role, Submit, DEFAULT_MAX_FRAME_LEN,
};
use tokio::sync::mpsc;
use tokio::task::JoinSet;
use tokio::time::{interval, sleep, sleep_until, Instant, MissedTickBehavior};

use super::sim::{address, Ended, Record, SimDialer};

/// A connection that reads nothing for this long is given up.
pub const IDLE: Duration = Duration::from_millis(1_500);
/// How often a client pings its node.
const PING: Duration = Duration::from_millis(250);
/// The pause before dialling again.
const REDIAL: Duration = Duration::from_millis(200);
/// The pool and activity every worker serves and every dispatch asks for.
pub const NAMESPACE: &str = "sim";
pub const ACTIVITY: &str = "work";

fn handshake(role: Role, name: &str) -> Handshake {
    let mut handshake = Handshake::new(role, name);
    handshake.timeout = Duration::from_secs(1);
    handshake.max_frame_len = DEFAULT_MAX_FRAME_LEN;
    handshake.queue_len = 256;
    handshake
}

/// Dials `node` until a handshake succeeds.
async fn connect(node: &str, role: Role, name: &str) -> Connection {
    let dialer = SimDialer::client();
    loop {
        if let Ok(conn) = connect_with(&dialer, &address(node), &handshake(role, name)).await {
            return conn;
        }
        sleep(REDIAL).await;
    }
}

/// A worker process connected to `node`, registered with node label `label`.
#[derive(Debug, Clone, Copy)]
pub struct WorkerSpec {
    pub name: &'static str,
    pub node: &'static str,
    pub capacity: u32,
    pub label: Option<&'static str>,
}

/// `seed` mixed with `name` (FNV-1a), for generators that are pure functions of both.
pub fn mix(seed: u64, name: &str) -> u64 {
    let mut hash = seed ^ 0xcbf2_9ce4_8422_2325;
    for byte in name.bytes() {
        hash = (hash ^ u64::from(byte)).wrapping_mul(0x0100_0000_01b3);
    }
    hash
}

/// How long the worker takes over `workflow_id`: a pure function of the seed and the id, so
/// a replay runs the same work. Mostly short, some long, a few past the reply timeout.
fn run_time(seed: u64, workflow_id: &str) -> Duration {
    let mut rng = fastrand::Rng::with_seed(mix(seed, workflow_id));
    match rng.u32(0..100) {
        0..=79 => Duration::from_millis(rng.u64(5..150)),
        80..=95 => Duration::from_millis(rng.u64(150..800)),
        _ => Duration::from_millis(2_500),
    }
}

/// Runs the worker for the whole simulation, reconnecting whenever its connection goes.
pub async fn worker(spec: WorkerSpec, seed: u64, record: Record) -> turmoil::Result {
    loop {
        let conn = connect(spec.node, Role::Worker, spec.name).await;
        serve_pushes(spec, seed, &record, conn).await;
        sleep(REDIAL).await;
    }
}

/// Registers and serves pushes until the connection goes (the work in hand goes with it) or
/// the node's drain is done.
async fn serve_pushes(spec: WorkerSpec, seed: u64, record: &Record, conn: Connection) {
    let Connection {
        mut reader,
        outbound,
        ..
    } = conn;
    let register = Register {
        namespaces: vec![NAMESPACE.into()],
        task_queue: String::new(),
        node: spec.label.map(Into::into),
        activity_types: vec![ACTIVITY.into()],
        identity: spec.name.into(),
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
    // Replies since the node said `Drain`, while it drains.
    let mut draining: Option<u64> = None;
    loop {
        if let Some(completed) = draining.filter(|_| holding.is_empty()) {
            let _ = outbound.send_owed(Frame::Drained(Drained { completed }));
            let goodbye = Goodbye {
                reason: "drained".into(),
            };
            let _ = outbound.send_owed(Frame::Goodbye(goodbye));
            outbound.close();
            return;
        }
        // Biased, like every select the simulation runs: the same branch wins in a replay.
        tokio::select! {
            biased;
            frame = reader.next_owned() => {
                let Some(Ok(frame)) = frame else { return };
                heard = Instant::now();
                // A version-3 node pushes `Push`; the extras are not this worker's business.
                let frame = match frame {
                    Frame::Push(push) => Frame::from(Push {
                        correlation: push.correlation,
                        request: push.request,
                        extras: Default::default(),
                    }),
                    other => other,
                };
                match frame {
                    Frame::Registered(_) | Frame::Pong(_) => {}
                    Frame::Push(push) => {
                        let correlation = push.correlation;
                        let workflow_id = push.request.workflow_id.clone();
                        let took = run_time(seed, &workflow_id);
                        {
                            let mut ledger = record.lock();
                            ledger.note(&workflow_id, format!("pushed to {} on {}", spec.name, spec.node));
                            ledger
                                .pushes
                                .entry(workflow_id.clone())
                                .or_default()
                                .push((spec.name.into(), spec.node.into()));
                            if holding.insert(correlation, *push).is_some() {
                                ledger.violations.push(format!(
                                    "{} got push {correlation} twice on one connection",
                                    spec.name
                                ));
                            }
                            if holding.len() > spec.capacity as usize {
                                ledger.violations.push(format!(
                                    "{} holds {} pushes with max_concurrency {} ({workflow_id})",
                                    spec.name,
                                    holding.len(),
                                    spec.capacity
                                ));
                            }
                        }
                        let done = done_tx.clone();
                        work.spawn(async move {
                            sleep(took).await;
                            let _ = done.send(correlation);
                        });
                    }
                    // Any reply lets go of the slot; the node drops it as late.
                    Frame::Cancel(cancel) => {
                        if reply(spec, record, &outbound, &mut holding, cancel.correlation) {
                            draining = draining.map(|completed| completed + 1);
                        }
                    }
                    Frame::Ping(ping) => {
                        let _ = outbound.try_send(Frame::Pong(Pong { nonce: ping.nonce }));
                    }
                    Frame::Drain(_) => draining = draining.or(Some(0)),
                    // Goodbye, Error, a refused registration: this connection is over.
                    _ => return,
                }
            }
            Some(correlation) = done_rx.recv() => {
                if reply(spec, record, &outbound, &mut holding, correlation) {
                    draining = draining.map(|completed| completed + 1);
                }
            }
            () = sleep_until(heard + IDLE) => return,
            _ = ping.tick() => {
                nonce += 1;
                let _ = outbound.try_send(Frame::Ping(Ping { nonce }));
            }
        }
    }
}

/// Replies to the push `correlation` if it is still held, naming the worker's node; true when
/// it was.
fn reply(
    spec: WorkerSpec,
    record: &Record,
    outbound: &lintel::transport::Outbound,
    holding: &mut BTreeMap<u64, Push>,
    correlation: u64,
) -> bool {
    let Some(push) = holding.remove(&correlation) else {
        return false;
    };
    record.lock().note(
        &push.request.workflow_id,
        format!("replied by {}", spec.name),
    );
    let response = DispatchResponse {
        workflow_id: push.request.workflow_id,
        ordinal: push.request.ordinal,
        run_id: push.request.run_id,
        outcome: ActivityOutcome::Success(Bytes::from_static(spec.node.as_bytes())),
    };
    let _ = outbound.send_owed(Frame::Reply(Reply {
        correlation,
        response,
    }));
    true
}

/// A producer process connected to `node`.
#[derive(Debug, Clone, Copy)]
pub struct ProducerSpec {
    pub name: &'static str,
    pub node: &'static str,
    /// Dispatches it submits in all.
    pub dispatches: u64,
    /// The pause before each submission, drawn in this range of milliseconds.
    pub pause_ms: (u64, u64),
    /// Only workers registered with this node label run its dispatches; any worker when
    /// `None`.
    pub pin: Option<&'static str>,
}

/// Submissions a producer has in flight at most.
const WINDOW: usize = 6;
/// Reply timeout of every submission.
pub const REPLY_TIMEOUT_MS: u64 = 1_500;

/// Submits `spec.dispatches` dispatches (fewer once [`Ledger::producers_stop`] is set),
/// reconnecting when its connection goes, until each has an outcome or was lost with a
/// connection.
///
/// [`Ledger::producers_stop`]: super::sim::Ledger::producers_stop
pub async fn producer(spec: ProducerSpec, seed: u64, record: Record) -> turmoil::Result {
    // The workload is a pure function of the seed and the producer.
    let mut rng = fastrand::Rng::with_seed(mix(seed, spec.name));
    let mut next = 0;
    loop {
        let conn = connect(spec.node, Role::Producer, spec.name).await;
        if submit_all(spec, &mut rng, &mut next, &record, conn).await {
            record.lock().producers_done += 1;
            return Ok(());
        }
        sleep(REDIAL).await;
    }
}

/// Submits on one connection; true once everything was submitted and answered, false when the
/// connection went first.
async fn submit_all(
    spec: ProducerSpec,
    rng: &mut fastrand::Rng,
    next: &mut u64,
    record: &Record,
    conn: Connection,
) -> bool {
    let Connection {
        mut reader,
        outbound,
        ..
    } = conn;
    let mut in_flight: BTreeMap<u64, String> = BTreeMap::new();
    let mut submit_at =
        Instant::now() + Duration::from_millis(rng.u64(spec.pause_ms.0..spec.pause_ms.1));
    let mut ping = interval(PING);
    ping.set_missed_tick_behavior(MissedTickBehavior::Delay);
    let mut nonce = 0;
    let mut heard = Instant::now();
    let answered = loop {
        let more = *next < spec.dispatches && !record.lock().producers_stop;
        if !more && in_flight.is_empty() {
            break true;
        }
        let room = more && in_flight.len() < WINDOW;
        // Biased, like every select the simulation runs: the same branch wins in a replay.
        tokio::select! {
            biased;
            frame = reader.next_owned() => {
                let Some(Ok(frame)) = frame else { break false };
                heard = Instant::now();
                match frame {
                    Frame::ServedOutcome(outcome) => {
                        let mut ledger = record.lock();
                        match in_flight.remove(&outcome.correlation) {
                            Some(workflow_id) => {
                                let what = format!("{:?} served by {}", outcome.result, outcome.served_by);
                                ledger.note(&workflow_id, what);
                                ledger.outcomes.entry(workflow_id).or_default().push(Ended {
                                    served_by: outcome.served_by,
                                    result: outcome.result,
                                    at: turmoil::sim_elapsed().unwrap_or_default(),
                                });
                            }
                            None => ledger.violations.push(format!(
                                "{} got an outcome for {}, not in flight: {:?}",
                                spec.name, outcome.correlation, outcome.result
                            )),
                        }
                    }
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
                let wait_for_worker_ms = (rng.u32(0..5) != 0).then(|| rng.u64(0..600));
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
                    wait_for_worker_ms,
                    reply_timeout_ms: Some(REPLY_TIMEOUT_MS),
                    routing: spec.pin.map_or(NodeRouting::Any, |node| NodeRouting::Pin(node.into())),
                    extras: Default::default(),
                };
                {
                    let mut ledger = record.lock();
                    ledger.note(&workflow_id, format!("submitted at {}", spec.node));
                    ledger.submitted.insert(workflow_id.clone(), spec.node.into());
                    let now = turmoil::sim_elapsed().unwrap_or_default();
                    ledger.submitted_at.insert(workflow_id.clone(), now);
                }
                in_flight.insert(seq, workflow_id);
                if outbound.send(Frame::from(submit)).await.is_err() {
                    break false;
                }
                submit_at = Instant::now() + Duration::from_millis(rng.u64(spec.pause_ms.0..spec.pause_ms.1));
            }
            () = sleep_until(heard + IDLE) => break false,
            _ = ping.tick() => {
                nonce += 1;
                let _ = outbound.try_send(Frame::Ping(Ping { nonce }));
            }
        }
    };
    if !answered {
        let mut ledger = record.lock();
        for workflow_id in in_flight.into_values() {
            ledger.note(&workflow_id, "lost with its producer's connection".into());
            ledger.lost.insert(workflow_id);
        }
    }
    outbound.close();
    answered
}

/// Workers that come and go, on one host: for `lasting`, one registers every
/// `1 s / per_second` at the next of `nodes` in turn, in one of `pools` namespaces of its own,
/// answers pings, and leaves `lifetime` later. Returns once the last one left.
pub async fn churn(
    nodes: Vec<&'static str>,
    per_second: u32,
    pools: usize,
    lifetime: Duration,
    lasting: Duration,
) -> turmoil::Result {
    let mut workers = JoinSet::new();
    let mut every = interval(Duration::from_secs(1) / per_second.max(1));
    every.set_missed_tick_behavior(MissedTickBehavior::Delay);
    let until = Instant::now() + lasting;
    let mut count: usize = 0;
    while Instant::now() < until {
        every.tick().await;
        let node = nodes[count % nodes.len()];
        let namespace = format!("churn{}", count % pools.max(1));
        let name = format!("churn-{count}");
        count += 1;
        workers.spawn(async move { churn_worker(node, namespace, name, lifetime).await });
    }
    while workers.join_next().await.is_some() {}
    Ok(())
}

/// One worker of [`churn`]: registers at `node` in `namespace`, stays `lifetime`, leaves.
async fn churn_worker(node: &str, namespace: String, name: String, lifetime: Duration) {
    let leave_at = Instant::now() + lifetime;
    let Connection {
        mut reader,
        outbound,
        ..
    } = connect(node, Role::Worker, &name).await;
    let register = Register {
        namespaces: vec![namespace],
        task_queue: String::new(),
        node: None,
        activity_types: vec!["churn".into()],
        identity: name,
        max_concurrency: 1,
        ..Default::default()
    };
    if outbound.send(Frame::from(register)).await.is_err() {
        return;
    }
    loop {
        tokio::select! {
            biased;
            () = sleep_until(leave_at) => break,
            frame = reader.next_owned() => match frame {
                Some(Ok(Frame::Ping(ping))) => {
                    let _ = outbound.try_send(Frame::Pong(Pong { nonce: ping.nonce }));
                }
                Some(Ok(_)) => {}
                None | Some(Err(_)) => break,
            },
        }
    }
    outbound.close();
}
