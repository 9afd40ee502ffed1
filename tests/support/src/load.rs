//! Seeded load over raw producer connections, and the ledger that proves each submission ended
//! in exactly one outcome, on time, of an allowed class.
//!
//! A producer keeps a window of `echo` and `sleep` submissions in flight under correlation ids
//! it chose, cancels a seeded share of them, answers the node's pings, and records every frame
//! it reads; [`check`] then judges the ledger against the workers the test killed or stopped.

use std::cmp::Reverse;
use std::collections::{BTreeMap, BTreeSet, BinaryHeap};
use std::net::SocketAddr;
use std::time::Duration;

use bytes::Bytes;
use futures_util::{SinkExt, StreamExt};
use lintel::wire::{
    ActivityOutcome, Cancel, DispatchRequest, DispatchResult, Frame, FrameCodec, NodeRouting, Pong,
    Role, Submit,
};
use tokio::net::TcpStream;
use tokio::sync::watch;
use tokio::time::Instant;
use tokio_util::codec::Framed;

use crate::hello_at;

/// What every load producer of a run does.
#[derive(Debug, Clone)]
pub struct LoadSpec {
    pub namespace: String,
    /// Submissions in flight at once.
    pub window: usize,
    /// Most submissions in a run, whatever its length.
    pub max_submissions: u64,
    pub wait_for_worker_ms: u64,
    pub reply_timeout_ms: u64,
    /// Share of submissions cancelled a little after they were sent, in percent.
    pub cancel_percent: u32,
    pub max_sleep_ms: u64,
    pub max_echo_len: usize,
}

impl LoadSpec {
    /// The latest a submission may end, from when it was sent: a full wait for a worker, then a
    /// full reply timeout.
    pub fn budget(&self) -> Duration {
        Duration::from_millis(self.wait_for_worker_ms + self.reply_timeout_ms)
    }
}

/// One submission as sent.
#[derive(Debug)]
pub struct Sent {
    pub at: Instant,
    /// A digest of the result a completion must carry.
    pub expected: u64,
    pub workflow_id: String,
    pub cancelled: bool,
}

/// One outcome as read.
#[derive(Debug)]
pub struct Heard {
    pub at: Instant,
    pub ended: Ended,
}

/// An outcome, with a completion judged as it arrives so the ledger holds no payloads.
#[derive(Debug)]
pub enum Ended {
    /// `right` when it carried its own request's identity and result.
    Completed { right: bool },
    /// Any other result.
    Other(DispatchResult),
}

/// A digest of a result's bytes.
fn digest(bytes: &[u8]) -> u64 {
    use std::hash::{Hash, Hasher};
    let mut hasher = std::collections::hash_map::DefaultHasher::new();
    bytes.hash(&mut hasher);
    hasher.finish()
}

/// Judges `result` against the submission it answers, if it answers one.
fn judge(result: DispatchResult, correlation: u64, sent: Option<&Sent>) -> Ended {
    match result {
        DispatchResult::Completed(response) => Ended::Completed {
            right: sent.is_some_and(|sent| {
                response.workflow_id == sent.workflow_id
                    && response.ordinal == correlation
                    && matches!(&response.outcome, ActivityOutcome::Success(bytes) if digest(bytes) == sent.expected)
            }),
        },
        other => Ended::Other(other),
    }
}

/// Everything one producer sent and read.
#[derive(Debug, Default)]
pub struct Ledger {
    pub producer: u32,
    pub sent: BTreeMap<u64, Sent>,
    pub heard: BTreeMap<u64, Vec<Heard>>,
    /// Frames a producer must never be sent, and how the connection ended if not by us.
    pub unexpected: Vec<String>,
}

/// Runs producer `producer` against `addr` until `stop` turns true (or its submissions run
/// out), then waits for what it still has in flight, at most one budget plus `margin`.
pub async fn produce(
    addr: SocketAddr,
    producer: u32,
    spec: LoadSpec,
    seed: u64,
    mut stop: watch::Receiver<bool>,
    margin: Duration,
) -> Ledger {
    let mut rng = fastrand::Rng::with_seed(seed ^ (u64::from(producer) << 48));
    let stream = TcpStream::connect(addr).await.expect("connect a producer");
    stream.set_nodelay(true).expect("nodelay");
    let mut framed = Framed::new(stream, FrameCodec::default());
    framed
        .send(Frame::Hello(hello_at(Role::Producer, 2)))
        .await
        .expect("hello");
    match framed.next().await {
        Some(Ok(Frame::Welcome(_))) => {}
        other => panic!("producer {producer} expected Welcome, got {other:?}"),
    }
    let mut ledger = Ledger {
        producer,
        ..Ledger::default()
    };
    let mut in_flight = BTreeSet::new();
    let mut cancels: BinaryHeap<Reverse<(Instant, u64)>> = BinaryHeap::new();
    let mut next = 1u64;
    let mut stopping = false;
    let give_up = tokio::time::sleep(Duration::MAX / 4);
    tokio::pin!(give_up);
    loop {
        let submitting = !stopping && next <= spec.max_submissions;
        if !submitting && in_flight.is_empty() {
            break;
        }
        let next_cancel = cancels.peek().map(|Reverse((at, _))| *at);
        tokio::select! {
            biased;
            frame = framed.next() => match frame {
                Some(Ok(Frame::ServedOutcome(outcome))) => {
                    in_flight.remove(&outcome.correlation);
                    let ended = judge(outcome.result, outcome.correlation, ledger.sent.get(&outcome.correlation));
                    ledger.heard.entry(outcome.correlation).or_default().push(Heard {
                        at: Instant::now(),
                        ended,
                    });
                }
                Some(Ok(Frame::Ping(ping))) => {
                    if framed.send(Frame::Pong(Pong { nonce: ping.nonce })).await.is_err() {
                        ledger.unexpected.push("the node closed while we answered a ping".into());
                        break;
                    }
                }
                Some(Ok(other)) => {
                    ledger.unexpected.push(format!("{other:?}"));
                    break;
                }
                Some(Err(err)) => {
                    ledger.unexpected.push(format!("read failed: {err}"));
                    break;
                }
                None => {
                    ledger.unexpected.push("the node closed the connection".into());
                    break;
                }
            },
            () = tokio::time::sleep_until(next_cancel.unwrap_or_else(Instant::now)), if next_cancel.is_some() => {
                if let Some(Reverse((_, correlation))) = cancels.pop() {
                    if in_flight.contains(&correlation) {
                        if let Some(sent) = ledger.sent.get_mut(&correlation) {
                            sent.cancelled = true;
                        }
                        if framed.send(Frame::Cancel(Cancel { correlation })).await.is_err() {
                            ledger.unexpected.push("the node closed while we cancelled".into());
                            break;
                        }
                    }
                }
            }
            changed = stop.changed(), if !stopping => {
                if changed.is_err() || *stop.borrow() {
                    stopping = true;
                    give_up.as_mut().reset(Instant::now() + spec.budget() + margin);
                }
            }
            () = &mut give_up => break,
            () = std::future::ready(()), if submitting && in_flight.len() < spec.window => {
                let correlation = next;
                next += 1;
                let (frame, sent) = submission(&spec, producer, correlation, &mut rng);
                if rng.u32(0..100) < spec.cancel_percent {
                    let after = Duration::from_millis(rng.u64(0..=20));
                    cancels.push(Reverse((sent.at + after, correlation)));
                }
                ledger.sent.insert(correlation, sent);
                in_flight.insert(correlation);
                if framed.send(frame).await.is_err() {
                    ledger.unexpected.push("the node closed while we submitted".into());
                    break;
                }
            }
        }
    }
    let _ = framed
        .send(Frame::Goodbye(lintel::wire::Goodbye {
            reason: "load done".into(),
        }))
        .await;
    ledger
}

/// A seeded `echo` or `sleep` submission, and its record.
fn submission(
    spec: &LoadSpec,
    producer: u32,
    correlation: u64,
    rng: &mut fastrand::Rng,
) -> (Frame, Sent) {
    let workflow_id = format!("p{producer}-{correlation}");
    let (activity, input, expected) = if rng.bool() {
        let len = rng.usize(0..=spec.max_echo_len);
        let input: Bytes = (0..len).map(|_| rng.u8(..)).collect::<Vec<u8>>().into();
        let expected = digest(&input);
        ("echo", input, expected)
    } else {
        let millis = rng.u64(0..=spec.max_sleep_ms);
        (
            "sleep",
            Bytes::from(millis.to_string()),
            digest(format!("slept {millis} ms").as_bytes()),
        )
    };
    let request = DispatchRequest {
        namespace: spec.namespace.clone(),
        task_queue: String::new(),
        activity_type: activity.into(),
        node: None,
        workflow_id: workflow_id.clone(),
        ordinal: correlation,
        run_id: None,
        attempt: 1,
        input,
        deadline_unix_ms: None,
    };
    let frame = Frame::from(Submit {
        correlation,
        request,
        wait_for_worker_ms: Some(spec.wait_for_worker_ms),
        reply_timeout_ms: Some(spec.reply_timeout_ms),
        routing: NodeRouting::Any,
        extras: Default::default(),
    });
    let sent = Sent {
        at: Instant::now(),
        expected,
        workflow_id,
        cancelled: false,
    };
    (frame, sent)
}

/// Workers the test killed or stopped: when, by worker id.
pub type Deaths = BTreeMap<u64, Instant>;

/// Outcomes by class, over every ledger of a run.
#[derive(Debug, Default, Clone, Copy)]
pub struct Tally {
    pub submitted: u64,
    pub completed: u64,
    pub worker_lost: u64,
    pub no_worker: u64,
    pub cancelled: u64,
}

impl Tally {
    pub fn add(&mut self, other: Tally) {
        self.submitted += other.submitted;
        self.completed += other.completed;
        self.worker_lost += other.worker_lost;
        self.no_worker += other.no_worker;
        self.cancelled += other.cancelled;
    }
}

/// What a run allows a worker-lost outcome and the whole run.
#[derive(Debug, Clone, Copy)]
pub struct Bounds {
    /// How long after its submission an outcome may arrive past the submission's budget.
    pub margin: Duration,
    /// How long after a worker was killed or stopped its pushes may end worker-lost.
    pub lost_within: Duration,
}

/// Judges `ledger`: every submission has exactly one outcome, none arrives for an id never
/// sent, none past its budget plus the margin; a completion carries its own request's result;
/// worker-lost names a worker the test killed or stopped, soon after; cancelled only what was
/// cancelled; no other class. Returns the tally, or every violation found.
pub fn check(
    ledger: &Ledger,
    spec: &LoadSpec,
    deaths: &Deaths,
    bounds: Bounds,
) -> Result<Tally, Vec<String>> {
    let p = ledger.producer;
    let mut violations: Vec<String> = ledger
        .unexpected
        .iter()
        .map(|what| format!("producer {p}: unexpected: {what}"))
        .collect();
    let mut tally = Tally {
        submitted: ledger.sent.len() as u64,
        ..Tally::default()
    };
    for correlation in ledger.heard.keys() {
        if !ledger.sent.contains_key(correlation) {
            violations.push(format!(
                "producer {p}: an outcome for {correlation}, never sent"
            ));
        }
    }
    for (correlation, sent) in &ledger.sent {
        let heard = ledger.heard.get(correlation).map_or(&[][..], Vec::as_slice);
        let [one] = heard else {
            violations.push(format!(
                "producer {p}: {correlation} ({}) has {} outcomes: {:?}",
                sent.workflow_id,
                heard.len(),
                heard.iter().map(|h| &h.ended).collect::<Vec<_>>()
            ));
            continue;
        };
        let took = one.at.saturating_duration_since(sent.at);
        if took > spec.budget() + bounds.margin {
            violations.push(format!(
                "producer {p}: {correlation} ended after {took:?}, past its budget {:?} + {:?}",
                spec.budget(),
                bounds.margin
            ));
        }
        match &one.ended {
            Ended::Completed { right } => {
                tally.completed += 1;
                if !right {
                    violations.push(format!(
                        "producer {p}: {correlation} completed with another request's identity or result"
                    ));
                }
            }
            Ended::Other(result) => match result {
                DispatchResult::WorkerLost { worker_id } => {
                    tally.worker_lost += 1;
                    match deaths.get(worker_id) {
                    None => violations.push(format!(
                        "producer {p}: {correlation} lost worker {worker_id}, which the test neither killed nor stopped"
                    )),
                    Some(died) if one.at > *died + bounds.lost_within => violations.push(format!(
                        "producer {p}: {correlation} heard worker {worker_id} lost {:?} after it died, past {:?}",
                        one.at - *died,
                        bounds.lost_within
                    )),
                    Some(_) => {}
                }
                }
                DispatchResult::NoWorker(_) => tally.no_worker += 1,
                DispatchResult::Cancelled if sent.cancelled => tally.cancelled += 1,
                other => violations.push(format!(
                    "producer {p}: {correlation} ended {other:?}{}",
                    if sent.cancelled { " (cancelled)" } else { "" }
                )),
            },
        }
    }
    if violations.is_empty() {
        Ok(tally)
    } else {
        Err(violations)
    }
}
