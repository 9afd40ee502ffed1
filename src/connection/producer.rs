//! A producer connection: submissions run concurrently, each answered by exactly one outcome.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use futures_util::StreamExt;
use lintel_wire::{
    DispatchResult, Frame, OutcomeFrame, Pong, RefusedDispatch, RefusedReason, StatusReport, Submit,
};
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use super::Close;
use crate::dispatch::DispatchOptions;
use crate::node::Shared;
use crate::transport::{FrameReader, Outbound};

/// How long a closing producer connection waits for its dispatches to report.
const SETTLE_GRACE: Duration = Duration::from_secs(5);

/// Submissions in flight on one connection, keyed by the producer's correlation id.
#[derive(Default)]
struct InFlight(Mutex<HashMap<u64, CancellationToken>>);

impl InFlight {
    fn lock(&self) -> MutexGuard<'_, HashMap<u64, CancellationToken>> {
        self.0
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

/// Runs the producer role until the connection should close.
pub(super) async fn serve(
    shared: &Arc<Shared>,
    reader: &mut FrameReader,
    outbound: &Outbound,
) -> Close {
    let in_flight = Arc::new(InFlight::default());
    let tasks = TaskTracker::new();
    // Both branches are cancel-safe: `FramedRead::next` and a token wait lose nothing.
    let close = loop {
        let frame = tokio::select! {
            biased;
            () = shared.closing.cancelled() => break Close::goodbye("node shutting down"),
            frame = reader.next() => frame,
        };
        let frame = match frame {
            None => break Close::Quietly,
            Some(Err(err)) => break Close::read_failed(err),
            Some(Ok(frame)) => frame,
        };
        match frame {
            Frame::Submit(submit) => submit_one(shared, outbound, &in_flight, &tasks, submit).await,
            Frame::Cancel(cancel) => {
                if let Some(token) = in_flight.lock().get(&cancel.correlation) {
                    token.cancel();
                }
            }
            Frame::StatusQuery(query) => {
                let report = Frame::Status(StatusReport {
                    correlation: query.correlation,
                    status: shared.status(),
                });
                if outbound.send(report).await.is_err() {
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
    // Nobody is left to cancel on the producer's behalf: end what it started, let each report.
    for token in in_flight.lock().values() {
        token.cancel();
    }
    tasks.close();
    let _ = tokio::time::timeout(SETTLE_GRACE, tasks.wait()).await;
    close
}

async fn submit_one(
    shared: &Arc<Shared>,
    outbound: &Outbound,
    in_flight: &Arc<InFlight>,
    tasks: &TaskTracker,
    submit: Submit,
) {
    let correlation = submit.correlation;
    let token = CancellationToken::new();
    let refusal = {
        let mut map = in_flight.lock();
        let max = shared.config.max_in_flight_per_producer as usize;
        if map.contains_key(&correlation) {
            Some((
                RefusedReason::DuplicateCorrelation,
                format!("correlation {correlation} is already in flight"),
            ))
        } else if map.len() >= max {
            Some((
                RefusedReason::TooManyInFlight,
                format!("{max} submissions already in flight"),
            ))
        } else {
            map.insert(correlation, token.clone());
            None
        }
    };
    if let Some((reason, detail)) = refusal {
        let result = DispatchResult::Refused(RefusedDispatch { reason, detail });
        let _ = outbound.send(outcome(correlation, result)).await;
        return;
    }
    let options = DispatchOptions::from_wire(
        submit.routing,
        submit.wait_for_worker_ms,
        submit.reply_timeout_ms,
    );
    let shared = Arc::clone(shared);
    let outbound = outbound.clone();
    let in_flight = Arc::clone(in_flight);
    tasks.spawn(async move {
        let result = shared
            .dispatcher
            .dispatch_cancellable(submit.request, &options, &token)
            .await;
        in_flight.lock().remove(&correlation);
        let _ = outbound.send(outcome(correlation, result)).await;
    });
}

fn outcome(correlation: u64, result: DispatchResult) -> Frame {
    Frame::Outcome(OutcomeFrame {
        correlation,
        result,
    })
}
