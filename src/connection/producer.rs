//! A producer connection: submissions run concurrently, each answered by exactly one outcome.

use std::sync::Arc;
use std::time::Duration;

use futures_util::StreamExt;
use lintel_wire::{ErrorCode, Frame, Ping, Pong, StatusReport};
use tokio::time::Instant;

use super::close::Close;
use super::flights::{Answer, CloseOnDrop, Flights, ReplyTimer};
use crate::auth::Grant;
use crate::shared::Shared;
use lintel_client::transport::{FrameReader, Outbound};

/// How long a closing producer connection waits for its waiting submissions to report.
const SETTLE_GRACE: Duration = Duration::from_secs(5);

/// Runs the producer role until the connection should close.
pub(super) async fn serve(
    shared: &Arc<Shared>,
    reader: &mut FrameReader,
    outbound: &Outbound,
    version: u16,
    grant: Grant,
) -> Close {
    let answer = Answer::Producer {
        version,
        node_id: Arc::from(shared.node_id()),
    };
    let flights = Flights::new(
        Arc::clone(&shared.dispatcher),
        outbound.clone(),
        shared.config.max_in_flight_per_producer as usize,
        answer,
        grant,
    );
    let closer = CloseOnDrop(Arc::clone(&flights));
    let mut timer = ReplyTimer::default();
    let timer_sleep = tokio::time::sleep(Duration::ZERO);
    tokio::pin!(timer_sleep);
    let mut liveness = Liveness::new(shared.config.ping_interval());
    // Every branch is cancel-safe: `FrameReader::next`, a token wait, a sleep, an interval
    // tick and a wait for room lose nothing. While the producer's queue is full nothing more
    // is read, so what it is owed stays bounded; deadlines and shutdown are still served.
    let close = loop {
        let room = outbound.has_room();
        let frame = tokio::select! {
            biased;
            () = shared.closing.cancelled() => {
                // Whatever still runs gets its outcome before the goodbye.
                flights.shut_down();
                break Close::goodbye("node shutting down");
            }
            () = &mut timer_sleep, if timer.armed.is_some() => {
                timer.armed = None;
                timer.arm(flights.expire(Instant::now()), timer_sleep.as_mut());
                continue;
            }
            _ = liveness.ticks.tick() => {
                match liveness.ping(outbound, shared.config.max_missed_pings) {
                    Ok(()) => continue,
                    Err(close) => break close,
                }
            }
            () = outbound.room(), if !room => continue,
            frame = reader.next(), if room => frame,
        };
        let frame = match frame {
            None => break Close::Quietly,
            Some(Err(err)) => break Close::read_failed(err),
            Some(Ok(frame)) => frame,
        };
        liveness.missed = 0;
        match frame {
            Frame::Submit(submit) => {
                let deadline = flights.submit(submit);
                timer.arm(deadline, timer_sleep.as_mut());
            }
            Frame::Cancel(cancel) => flights.cancel(cancel.correlation),
            Frame::StatusQuery(query) => {
                let report = if version >= 2 {
                    Frame::ClusterStatus(shared.cluster_status(query.correlation))
                } else {
                    Frame::Status(StatusReport {
                        correlation: query.correlation,
                        status: shared.status(),
                    })
                };
                if outbound.send_owed(report).is_err() {
                    break Close::Quietly;
                }
            }
            Frame::Ping(ping) => {
                let _ = outbound.try_send(Frame::Pong(Pong { nonce: ping.nonce }));
            }
            Frame::Pong(_) => {}
            Frame::Goodbye(_) => break Close::Quietly,
            other => break Close::unexpected(other.kind(), "on a producer connection"),
        }
    };
    // Nobody is left to cancel on the producer's behalf: end what it started.
    drop(closer);
    let _ = tokio::time::timeout(SETTLE_GRACE, flights.settled()).await;
    close
}

/// Pings the producer; one that answers nothing for `max_missed_pings` pings is closed.
struct Liveness {
    ticks: tokio::time::Interval,
    /// Pings sent since the producer last sent anything.
    missed: u32,
    nonce: u64,
}

impl Liveness {
    fn new(period: Duration) -> Self {
        let mut ticks = tokio::time::interval_at(Instant::now() + period, period);
        ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        Self {
            ticks,
            missed: 0,
            nonce: 0,
        }
    }

    /// Sends the next ping, or closes when too many went unanswered. A ping that finds the
    /// queue full is not sent and not counted: a producer that stops reading is not dead.
    fn ping(&mut self, outbound: &Outbound, max_missed: u32) -> Result<(), Close> {
        if self.missed >= max_missed {
            return Err(Close::error(
                ErrorCode::LivenessTimeout,
                format!("{max_missed} pings in a row went unanswered"),
            ));
        }
        self.nonce = self.nonce.wrapping_add(1);
        let ping = Frame::Ping(Ping { nonce: self.nonce });
        if outbound.try_send(ping).is_ok() {
            self.missed += 1;
        }
        Ok(())
    }
}
