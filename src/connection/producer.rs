//! A producer connection: submissions run concurrently, each answered by exactly one outcome.

use std::sync::Arc;
use std::time::Duration;

use lintel_wire::{Frame, FrameRef, Pong, StatusReport};
use tokio::time::Instant;

use super::close::Close;
use super::flights::{CloseOnDrop, Flights, Recipient, ReplyTimer};
use super::report;
use super::subscriptions::{Subscriptions, SHUTTING_DOWN};
use crate::auth::Grant;
use crate::shared::{Fired, Shared};
use crate::status;
use lintel_transport::burst::Burst;
use lintel_transport::keepalive::Keepalive;
use lintel_transport::{FrameReader, Outbound, SendError};

/// Sleeps until `at`; never wakes without one.
async fn sleep_until(at: Option<Instant>) {
    match at {
        Some(at) => tokio::time::sleep_until(at).await,
        None => std::future::pending().await,
    }
}

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
    let allowed = if grant.may_observe() {
        Ok(())
    } else {
        Err(grant.observe_refusal())
    };
    // What its status reports and events may show: a copy, as its dispatches own the grant.
    let sees = grant.clone();
    let mut subscriptions = Subscriptions::new(shared, outbound, allowed, sees.clone());
    let answer = Recipient::Producer {
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
    let closer = CloseOnDrop(Some(Arc::clone(&flights)));
    outbound.set_limits(shared.config.producer_queue_limits());
    let budget = shared.config.outbound_queue_bytes;
    let grace = shared.config.slow_consumer_grace();
    let mut timer = ReplyTimer::default();
    let timer_sleep = tokio::time::sleep(Duration::ZERO);
    tokio::pin!(timer_sleep);
    let mut keepalive = Keepalive::new(
        shared.config.ping_interval(),
        shared.config.max_missed_pings,
    );
    // Made once, not per turn of the loop: the token wait registers with its token once, and
    // later turns only read the token's state.
    let closing = Fired::new(&shared.closing);
    tokio::pin!(closing);
    // Every branch is cancel-safe: `FrameReader::ready`, a token wait, a sleep, a keep-alive
    // tick, a wait for room and a notification lose nothing. While the producer's queue, or
    // its queue plus the inputs of its dispatches in flight, is at its bound nothing more is
    // read, so what it is owed stays bounded; deadlines and shutdown are still served.
    let close = 'conn: loop {
        let pressure = outbound.pressure();
        if pressure.closed {
            // The socket is gone or going: nothing read now could be answered.
            break Close::Quietly;
        }
        if pressure.overflowed {
            break Close::slow_consumer(format!(
                "outcomes owed passed {} bytes unread",
                outbound.limits().owed_ceiling
            ));
        }
        let queue_room = pressure.room;
        let room = queue_room && pressure.bytes.saturating_add(flights.held_input()) < budget;
        let stalled_until = pressure.full_since.map(|since| since + grace);
        let found = tokio::select! {
            biased;
            () = &mut closing => {
                // Whatever still runs gets its outcome, queued before the goodbye.
                flights.shut_down();
                let _ = tokio::time::timeout(SETTLE_GRACE, flights.settled()).await;
                subscriptions.end_all(SHUTTING_DOWN).await;
                break Close::goodbye("node shutting down");
            }
            () = &mut timer_sleep, if timer.armed.is_some() => {
                timer.armed = None;
                timer.arm(flights.expire(Instant::now()), timer_sleep.as_mut());
                continue;
            }
            () = sleep_until(stalled_until), if stalled_until.is_some() => {
                if outbound.full_since().is_some_and(|since| since.elapsed() >= grace) {
                    break Close::slow_consumer(format!(
                        "its outbound queue stayed full for {} ms",
                        grace.as_millis()
                    ));
                }
                continue;
            }
            tick = keepalive.tick() => {
                match Close::unless_pinged(tick) {
                    Ok(None) => continue,
                    Ok(Some(ping)) => {
                        // A producer that only stops reading is not dead: a ping its full
                        // queue cannot take is not counted, nor one whose answer this loop
                        // will not read while it reads nothing (the ping still tells the
                        // producer this side is alive).
                        if outbound.try_send(Frame::Ping(ping)).is_err() || !room {
                            keepalive.unsent();
                        }
                        continue;
                    }
                    Err(close) => break close,
                }
            }
            () = outbound.room(), if !queue_room => continue,
            () = flights.relieved(), if queue_room && !room => continue,
            () = outbound.below(budget.saturating_sub(flights.held_input())), if queue_room && !room => continue,
            found = reader.ready(), if room => found,
        };
        // Read where they lie, by reference (a submission is a few hundred bytes of views):
        // this frame, then those already read behind it while there is room for them.
        let mut found = found;
        let mut burst = Burst::after_first();
        loop {
            let frame = reader.take(found);
            let frame = match &frame {
                None | Some(Err(_)) => match frame.and_then(Result::err) {
                    Some(err) => break 'conn Close::read_failed(err),
                    None => break 'conn Close::Quietly,
                },
                Some(Ok(FrameRef::Submit(submit))) => {
                    keepalive.heard();
                    let deadline = flights.submit(submit);
                    timer.arm(deadline, timer_sleep.as_mut());
                    None
                }
                Some(Ok(FrameRef::Frame(frame))) => Some(*frame),
                Some(Ok(other)) => {
                    break 'conn Close::unexpected(other.name(), "on a producer connection")
                }
            };
            if let Some(frame) = frame {
                keepalive.heard();
                match frame {
                    Frame::Cancel(cancel) => {
                        if !subscriptions.cancel(cancel.correlation) {
                            flights.cancel(cancel.correlation);
                        }
                    }
                    Frame::StatusQuery(query) => {
                        let max_frame_len = shared.config.max_frame_len;
                        let correlation = query.correlation;
                        let report = match version {
                            3.. => report::document(shared, &sees, correlation, max_frame_len),
                            2 => report::fit(
                                Frame::from(status::scoped_report(
                                    shared.cluster_status(correlation),
                                    &sees,
                                )),
                                max_frame_len,
                            ),
                            _ => report::fit(
                                Frame::from(StatusReport {
                                    correlation,
                                    status: status::scoped_node(shared.status(), &sees),
                                }),
                                max_frame_len,
                            ),
                        };
                        match outbound.send_owed(report) {
                            // An overflow closes the producer as a slow consumer at the loop's top.
                            Ok(()) | Err(SendError::Overflow | SendError::Full) => {}
                            Err(SendError::Closed) => break 'conn Close::Quietly,
                            Err(
                                err @ (SendError::TooLarge { .. }
                                | SendError::Unencodable { .. }
                                | SendError::Unsupported { .. }),
                            ) => {
                                tracing::error!(error = %err, "a status report could not be sent");
                                break 'conn Close::Quietly;
                            }
                        }
                    }
                    Frame::Subscribe(subscribe) => {
                        if let Err(SendError::Closed) = subscriptions.subscribe(subscribe.clone()) {
                            break 'conn Close::Quietly;
                        }
                    }
                    Frame::Ping(ping) => {
                        let _ = outbound.try_send(Frame::Pong(Pong { nonce: ping.nonce }));
                    }
                    Frame::Pong(_) => {}
                    Frame::Goodbye(_) => break 'conn Close::Quietly,
                    other => {
                        break 'conn Close::unexpected(other.name(), "on a producer connection")
                    }
                }
            }
            let pressure = outbound.pressure();
            let room =
                pressure.room && pressure.bytes.saturating_add(flights.held_input()) < budget;
            if pressure.closed || pressure.overflowed || !room {
                break;
            }
            match burst.next(reader) {
                Some(next) => found = next,
                None => break,
            }
        }
    };
    // Nobody is left to cancel on the producer's behalf: end what it started.
    drop(closer);
    let _ = tokio::time::timeout(SETTLE_GRACE, flights.settled()).await;
    close
}
