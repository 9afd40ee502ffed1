//! One registered connection: pushed requests run through the handler within capacity,
//! cancels, keepalive and drain. What it runs is [`Held`], which outlives it.

use std::time::Duration;

use lintel_wire::{
    ActivityOutcome, CapacityUpdate, CodecError, DispatchResponse, Drain, Drained, ErrorCode,
    ErrorFrame, ExtrasRef, Frame, FrameRef, Goodbye, Pong, Push, Reply, RequestRef, ResponseRef,
};
use tokio::sync::watch;
use tokio::time::Instant;

use super::handler::Answered;
use super::held::{Held, Kept};
use super::state::{SessionEnd, WorkerState};
use crate::connect::decode_error_frame;
use lintel_transport::burst::Burst;
use lintel_transport::keepalive::{Keepalive, Tick};
use lintel_transport::{FrameReader, Outbound, SendError};

/// How long a finished drain waits for `Drained` and `Goodbye` to reach the socket.
const GOODBYE_FLUSH_TIMEOUT: Duration = Duration::from_secs(5);

/// Who asked for the drain in progress.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum DrainOrigin {
    Node,
    Handle,
}

#[derive(Debug)]
pub(super) struct Draining {
    origin: DrainOrigin,
    /// In-flight work still running at this instant is aborted.
    deadline: Instant,
    /// Replies sent since the drain began.
    completed: u64,
}

/// A registered connection being served.
pub(super) struct Session<'a> {
    pub(super) state: &'a watch::Sender<WorkerState>,
    pub(super) capacity_rx: &'a mut watch::Receiver<u32>,
    pub(super) drain_rx: &'a mut watch::Receiver<Option<Duration>>,
    pub(super) keepalive: Keepalive,
    pub(super) outbound: Outbound,
    pub(super) worker_id: u64,
    /// The local limit on requests held. The session is the only place that starts handlers,
    /// so this count beside what `held` holds is the semaphore: exact, and resizable both ways.
    pub(super) capacity: u32,
    /// The handlers and results held, which outlive this connection.
    pub(super) held: &'a mut Held,
    pub(super) draining: Option<Draining>,
    /// Answers taken from the runner, kept to reuse the allocation.
    pub(super) answers: Vec<Answered>,
}

/// Whether the session goes on.
type Flow = Result<(), SessionEnd>;

impl Session<'_> {
    /// Sends the results held from a lost connection, then serves the frames of `reader` until
    /// the connection ends.
    pub(super) async fn serve(mut self, reader: FrameReader) -> SessionEnd {
        let end = self.serve_frames(reader).await;
        // Whatever ended it, no result goes out on this connection from the runner any more.
        self.held.stop_sending_directly();
        end
    }

    async fn serve_frames(&mut self, mut reader: FrameReader) -> SessionEnd {
        let mut unsent: Vec<Answered> = self
            .held
            .ledger()
            .unsent
            .drain()
            .map(|(_, answered)| answered)
            .collect();
        if let Err(end) = self.deliver(&mut unsent).await {
            return end;
        }
        if self.draining.is_none() {
            self.held
                .send_directly(self.outbound.clone(), self.capacity);
        }
        loop {
            if self.draining.is_some() && self.held.len() == 0 {
                return self.finish_drain().await;
            }
            let deadline = self.draining.as_ref().map(|draining| draining.deadline);
            // Every branch is cancel-safe: `FrameReader::ready` keeps partial frames buffered,
            // `Runner::answered` and watch `changed` lose nothing when dropped, the grace sleep
            // is rebuilt from the stored deadline, and `Keepalive::tick` changes nothing until
            // it resolves.
            let flow = tokio::select! {
                found = reader.ready() => {
                    match reader.take(found) {
                        Some(Ok(frame)) => {
                            self.keepalive.heard();
                            match self.on_frame(&frame).await {
                                Ok(()) => self.on_burst(&mut reader).await,
                                ended => ended,
                            }
                        }
                        Some(Err(err)) => self.on_read_error(&err).await,
                        None => Err(SessionEnd::Lost { resumable: true }),
                    }
                }
                () = self.held.runner.answered() => self.on_answers().await,
                Ok(()) = self.capacity_rx.changed() => self.on_capacity().await,
                Ok(()) = self.drain_rx.changed(), if self.draining.is_none() => {
                    self.on_drain_request().await
                }
                () = grace_expiry(deadline) => {
                    self.abort_in_flight();
                    Ok(())
                }
                tick = self.keepalive.tick() => match tick {
                    Tick::Ping(ping) => {
                        self.held.pinged(ping.nonce);
                        self.send(Frame::Ping(ping)).await
                    }
                    Tick::Dead { .. } => {
                        tracing::warn!("node stopped answering pings; reconnecting");
                        Err(SessionEnd::Lost { resumable: true })
                    }
                    // No timeout is set here: the node's silence counts only in missed pings.
                    Tick::Overdue => Ok(()),
                },
            };
            // What this turn started or aborted goes to the runner in one batch, also when the
            // connection ended: the requests it started are held across it.
            self.held.runner.flush();
            if let Err(end) = flow {
                return end;
            }
        }
    }

    /// After a frame the reader lent, handles the frames already read behind it, in one
    /// [`Burst`]: a burst of pushes costs one pass through `serve`'s `select!` instead of one
    /// each, and cannot keep the other branches (finished tasks, keepalive, drain) waiting
    /// long. A drain ends the burst, so `serve` checks for a finished drain between frames.
    async fn on_burst(&mut self, reader: &mut FrameReader) -> Flow {
        let mut burst = Burst::after_first();
        while self.draining.is_none() {
            let Some(found) = burst.next(reader) else {
                break;
            };
            match reader.take(found) {
                Some(Ok(frame)) => {
                    self.keepalive.heard();
                    self.on_frame(&frame).await?;
                }
                Some(Err(err)) => return self.on_read_error(&err).await,
                None => return Err(SessionEnd::Lost { resumable: true }),
            }
        }
        Ok(())
    }

    async fn on_read_error(&self, err: &CodecError) -> Flow {
        tracing::warn!(error = %err, "worker connection failed");
        if let Some(error) = decode_error_frame(err) {
            self.outbound.close_with(Frame::Error(error)).await;
            // A protocol error ends the session too.
            return Err(SessionEnd::Lost { resumable: false });
        }
        Err(SessionEnd::Lost { resumable: true })
    }

    async fn on_frame(&mut self, frame: &FrameRef<'_>) -> Flow {
        let frame = match frame {
            FrameRef::Push(push) => {
                return self
                    .start(push.correlation, &push.request, &push.extras)
                    .await
            }
            FrameRef::Frame(frame) => frame,
            other => return self.unexpected(other.name()).await,
        };
        match frame {
            Frame::Cancel(cancel) => {
                let removed = self.held.ledger().in_flight.remove(&cancel.correlation);
                let Some(ticket) = removed else {
                    return Ok(());
                };
                self.held.runner.abort(ticket);
                // The node holds the push's slot until the worker lets go of it: say so now.
                let stopped = DispatchResponse {
                    workflow_id: "",
                    ordinal: 0,
                    run_id: None,
                    outcome: ActivityOutcome::Failure {
                        message: "cancelled",
                        retryable: false,
                    },
                };
                self.reply(cancel.correlation, stopped).await
            }
            Frame::Ping(ping) => self.send(Frame::Pong(Pong { nonce: ping.nonce })).await,
            Frame::Pong(pong) => {
                self.held.ponged(pong.nonce);
                Ok(())
            }
            Frame::Session(session) => {
                self.held.session = Some(Kept {
                    token: session.token.clone(),
                    grace: Duration::from_millis(session.resume_grace_ms),
                    lost_at: None,
                });
                Ok(())
            }
            Frame::Drain(drain) => {
                if self.draining.is_none() {
                    self.begin_drain(DrainOrigin::Node, Duration::from_millis(drain.grace_ms));
                }
                Ok(())
            }
            // Coming back as the same instance would supersede the worker that replaced it.
            Frame::Goodbye(goodbye) if goodbye.reason == Goodbye::SUPERSEDED => {
                Err(SessionEnd::Refused(lintel_wire::Refusal {
                    code: lintel_wire::RefusalCode::Superseded,
                    reason: "another worker registered with this deployment and instance id".into(),
                }))
            }
            Frame::Goodbye(goodbye) => {
                tracing::info!(reason = %goodbye.reason, "node said goodbye");
                Err(SessionEnd::Lost { resumable: false })
            }
            Frame::Error(error) => {
                tracing::warn!(code = ?error.code, reason = %error.reason, "node reported a protocol error");
                Err(SessionEnd::Lost { resumable: false })
            }
            other => self.unexpected(other.name()).await,
        }
    }

    async fn unexpected(&self, kind: &str) -> Flow {
        tracing::warn!(%kind, "node sent a frame a worker never receives");
        self.outbound
            .close_with(Frame::Error(ErrorFrame {
                code: ErrorCode::UnexpectedFrame,
                reason: format!("{kind} is not a node-to-worker frame here"),
            }))
            .await;
        Err(SessionEnd::Lost { resumable: false })
    }

    /// Gives a pushed request, with its extras, to the runner, or refuses it at once when at
    /// capacity.
    ///
    /// Pushes that arrive while draining still run: the node sent them before it saw the drain
    /// and waits for their replies; the grace deadline bounds them.
    async fn start(
        &mut self,
        correlation: u64,
        request: &RequestRef<'_>,
        extras: &ExtrasRef<'_>,
    ) -> Flow {
        let (reused, held) = {
            let ledger = self.held.ledger();
            let reused = ledger.in_flight.contains_key(&correlation)
                || ledger.unsent.contains_key(&correlation);
            (reused, ledger.len())
        };
        if reused {
            tracing::warn!(
                correlation,
                "node reused a correlation id in flight; ignoring it"
            );
            return Ok(());
        }
        let capacity = usize::try_from(self.capacity).unwrap_or(usize::MAX);
        if held >= capacity {
            tracing::warn!(correlation, capacity, "push beyond capacity refused");
            let message = format!("worker is at its capacity of {capacity} requests");
            let response = DispatchResponse {
                workflow_id: request.workflow_id,
                ordinal: request.ordinal,
                run_id: request.run_id,
                outcome: ActivityOutcome::Failure {
                    message: message.as_str(),
                    retryable: true,
                },
            };
            return self.reply(correlation, response).await;
        }
        // The handler owns its request: the one copy of the push out of the read buffer. It
        // stays in its box until the handler takes it, so the runner moves a pointer.
        let push = Box::new(Push {
            correlation,
            request: request.to_compact(),
            extras: extras.to_compact(),
        });
        // The runner answers only once its orders are flushed, at the end of this turn.
        let ticket = self.held.runner.run(push);
        self.held.ledger().in_flight.insert(correlation, ticket);
        Ok(())
    }

    /// Delivers the answers the runner has for requests still owed; an answer to a request
    /// cancelled or dropped since matches no ticket in flight and is let go.
    async fn on_answers(&mut self) -> Flow {
        let mut answers = std::mem::take(&mut self.answers);
        self.held.runner.take_answers(&mut answers);
        {
            let mut ledger = self.held.ledger();
            let in_flight = &mut ledger.in_flight;
            answers.retain(|answered| match in_flight.remove(&answered.correlation) {
                Some(ticket) if ticket == answered.ticket => true,
                // A later push under the same correlation id: still owed.
                Some(ticket) => {
                    in_flight.insert(answered.correlation, ticket);
                    false
                }
                None => false,
            });
        }
        let flow = self.deliver(&mut answers).await;
        self.answers = answers;
        flow
    }

    async fn on_capacity(&mut self) -> Flow {
        let capacity = *self.capacity_rx.borrow_and_update();
        if capacity == self.capacity {
            return Ok(());
        }
        self.capacity = capacity;
        self.held.node_capacity = capacity;
        if self.draining.is_none() {
            self.held.send_directly(self.outbound.clone(), capacity);
        }
        self.send(Frame::CapacityUpdate(CapacityUpdate {
            max_concurrency: capacity,
        }))
        .await
    }

    async fn on_drain_request(&mut self) -> Flow {
        let Some(grace) = *self.drain_rx.borrow_and_update() else {
            return Ok(());
        };
        let grace_ms = u64::try_from(grace.as_millis()).unwrap_or(u64::MAX);
        self.begin_drain(DrainOrigin::Handle, grace);
        self.send(Frame::Drain(Drain { grace_ms })).await
    }

    fn begin_drain(&mut self, origin: DrainOrigin, grace: Duration) {
        // Replies since the drain began are counted here, and the last one ends it.
        self.held.stop_sending_directly();
        let now = Instant::now();
        let deadline = now.checked_add(grace).unwrap_or_else(|| far_future(now));
        self.draining = Some(Draining {
            origin,
            deadline,
            completed: 0,
        });
        self.state.send_replace(WorkerState::Draining {
            worker_id: self.worker_id,
        });
    }

    fn abort_in_flight(&mut self) {
        if self.held.len() > 0 {
            tracing::warn!(in_flight = self.held.len(), "drain grace expired; aborting");
        }
        {
            let mut ledger = self.held.ledger();
            ledger.in_flight.clear();
            ledger.unsent.clear();
        }
        self.held.runner.abort_all();
    }

    /// Sends `Drained` and `Goodbye`, closes, and waits (bounded) for the writer to flush.
    async fn finish_drain(&mut self) -> SessionEnd {
        let Some(draining) = self.draining.take() else {
            return SessionEnd::Lost { resumable: true };
        };
        let _ = self
            .outbound
            .send(Frame::Drained(Drained {
                completed: draining.completed,
            }))
            .await;
        self.outbound
            .close_with(Frame::Goodbye(Goodbye {
                reason: "drained".to_owned(),
            }))
            .await;
        let flushed = self.outbound.closed();
        if tokio::time::timeout(GOODBYE_FLUSH_TIMEOUT, flushed)
            .await
            .is_err()
        {
            tracing::warn!("node did not take the goodbye in time");
        }
        match draining.origin {
            DrainOrigin::Node => SessionEnd::NodeDrained,
            DrainOrigin::Handle => SessionEnd::SelfDrained,
        }
    }

    /// Sends the results in `answers` (leaving it empty), each kept until the node is known to
    /// have read it; those the connection could not take stay held, to be listed when the
    /// session resumes.
    async fn deliver(&mut self, answers: &mut Vec<Answered>) -> Flow {
        let mut sent = 0;
        let mut flow = Ok(());
        for answered in answers.iter() {
            if let Some(draining) = &mut self.draining {
                draining.completed += 1;
            }
            flow = self.reply(answered.correlation, answered.response()).await;
            if flow.is_err() {
                break;
            }
            sent += 1;
        }
        {
            let mut ledger = self.held.ledger();
            for answered in answers.drain(sent..) {
                ledger.unsent.insert(answered.correlation, answered);
            }
        }
        self.held
            .sent(answers.drain(..), Held::unacked_bound(self.capacity));
        flow
    }

    /// Sends the reply, or a failure in its place when it does not fit in a frame.
    async fn reply(&self, correlation: u64, response: ResponseRef<'_>) -> Flow {
        let (workflow_id, ordinal, run_id) =
            (response.workflow_id, response.ordinal, response.run_id);
        let reply = Reply {
            correlation,
            response,
        };
        let (len, max) = match self.outbound.send_ref(&FrameRef::Reply(reply)).await {
            Ok(()) => return Ok(()),
            Err(SendError::TooLarge { len, max, .. }) => (len, max),
            Err(_) => return Err(SessionEnd::Lost { resumable: true }),
        };
        tracing::warn!(correlation, len, "reply too large for one frame");
        let message = format!("result of {len} bytes exceeds the frame limit of {max} bytes");
        let failed = DispatchResponse {
            workflow_id,
            ordinal,
            run_id,
            outcome: ActivityOutcome::Failure {
                message: message.as_str(),
                retryable: false,
            },
        };
        self.send_ref(&FrameRef::Reply(Reply {
            correlation,
            response: failed,
        }))
        .await
    }

    async fn send_ref(&self, frame: &FrameRef<'_>) -> Flow {
        self.outbound
            .send_ref(frame)
            .await
            .map_err(|_| SessionEnd::Lost { resumable: true })
    }

    async fn send(&self, frame: Frame) -> Flow {
        self.outbound
            .send(frame)
            .await
            .map_err(|_| SessionEnd::Lost { resumable: true })
    }
}

/// Resolves at `deadline`; never without one.
async fn grace_expiry(deadline: Option<Instant>) {
    match deadline {
        Some(deadline) => tokio::time::sleep_until(deadline).await,
        None => std::future::pending().await,
    }
}

/// An instant further off than any grace worth waiting for.
fn far_future(now: Instant) -> Instant {
    now.checked_add(Duration::from_secs(86_400 * 365 * 30))
        .unwrap_or(now)
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use bytes::{Bytes, BytesMut};
    use futures_util::StreamExt;
    use lintel_wire::{
        encode_frame, ActivityOutcome, Drain, Drained, Frame, FrameCodec, Push, Registered,
        DEFAULT_MAX_FRAME_LEN,
    };
    use tokio::io::AsyncWriteExt;
    use tokio::net::TcpListener;
    use tokio_util::codec::FramedRead;

    use crate::{Handler, Worker, WorkerConfig};
    use lintel_transport::burst::FRAMES_PER_TURN;
    use lintel_transport::fixtures;

    /// Echoes its input at once, saying it runs briefly.
    struct BriefEcho;

    impl Handler for BriefEcho {
        async fn handle(&self, request: crate::Request) -> ActivityOutcome {
            ActivityOutcome::Success(request.input)
        }

        fn runs_briefly(&self) -> bool {
            true
        }
    }

    fn push(correlation: u64) -> Frame {
        Frame::from(Push {
            correlation,
            request: fixtures::numbered_request(correlation),
            extras: Default::default(),
        })
    }

    #[tokio::test]
    async fn a_burst_longer_than_a_batch_is_answered_and_a_drain_in_it_ends_it() {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let config = WorkerConfig::builder()
            .node(listener.local_addr().unwrap().to_string())
            .namespace("ns")
            .activity("echo")
            .identity("worker-under-test")
            // Room for every push: none is refused at capacity.
            .concurrency(2 * FRAMES_PER_TURN as u32 + 4)
            .handshake_timeout(Duration::from_secs(10))
            .build()
            .unwrap();
        let worker = Worker::spawn(config, BriefEcho);

        let (socket, _) = listener.accept().await.unwrap();
        let (read, mut write) = socket.into_split();
        let mut frames = FramedRead::new(read, FrameCodec::new(DEFAULT_MAX_FRAME_LEN));
        let mut recv = async || frames.next().await.unwrap().unwrap();
        let Frame::Hello(_) = recv().await else {
            panic!("expected Hello");
        };
        let mut bytes = BytesMut::new();
        let mut queue =
            |frame: Frame| encode_frame(&frame, 2, &mut bytes, DEFAULT_MAX_FRAME_LEN).unwrap();
        queue(fixtures::welcome());
        write.write_all(&bytes).await.unwrap();
        bytes.clear();
        let Frame::Register(_) = recv().await else {
            panic!("expected Register");
        };

        // Registered, a burst, a drain and pushes behind it, all in one write.
        let burst = 2 * FRAMES_PER_TURN as u64 + 1;
        let mut queue =
            |frame: Frame| encode_frame(&frame, 2, &mut bytes, DEFAULT_MAX_FRAME_LEN).unwrap();
        queue(Frame::Registered(Registered { worker_id: 1 }));
        for correlation in 1..=burst {
            queue(push(correlation));
        }
        queue(Frame::Drain(Drain { grace_ms: 60_000 }));
        for correlation in burst + 1..=burst + 3 {
            queue(push(correlation));
        }
        write.write_all(&bytes).await.unwrap();

        // Handlers run on tasks of their own: replies come in any order. Pushes behind the
        // drain run only if work was still in flight when it came.
        let mut answered = std::collections::BTreeSet::new();
        let completed = loop {
            match recv().await {
                Frame::Reply(reply) => {
                    let correlation = reply.correlation;
                    assert_eq!(
                        reply.response.outcome,
                        ActivityOutcome::Success(Bytes::from(correlation.to_string()))
                    );
                    assert!(answered.insert(correlation), "{correlation} answered twice");
                }
                Frame::Drained(Drained { completed }) => break completed,
                other => panic!("expected a reply or Drained, got {other:?}"),
            }
        };
        assert!((1..=burst).all(|correlation| answered.contains(&correlation)));
        assert!(answered.iter().all(|correlation| *correlation <= burst + 3));
        assert!(completed <= answered.len() as u64);
        assert!(matches!(recv().await, Frame::Goodbye(_)));
        worker.shutdown().await;
    }
}
