//! A producer connection: submissions run concurrently, each answered by exactly one outcome.

use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use futures_util::StreamExt;
use lintel_wire::{
    DispatchResult, Frame, OutcomeFrame, Pong, RefusedDispatch, RefusedReason, StatusReport, Submit,
};
use tokio::sync::{oneshot, Notify};

use super::Close;
use crate::dispatch::DispatchOptions;
use crate::node::Shared;
use crate::transport::{FrameReader, Outbound};

/// How long a closing producer connection waits for its dispatches to report.
const SETTLE_GRACE: Duration = Duration::from_secs(5);

/// Submissions in flight on one connection: a cancel trigger per producer correlation id,
/// plus a count of dispatch tasks that have not yet reported.
#[derive(Default)]
struct InFlight {
    cancels: Mutex<HashMap<u64, oneshot::Sender<()>>>,
    reporting: AtomicUsize,
    settled: Notify,
}

impl InFlight {
    fn cancels(&self) -> MutexGuard<'_, HashMap<u64, oneshot::Sender<()>>> {
        self.cancels
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Fires every cancel trigger.
    fn cancel_all(&self) {
        for (_, cancel) in self.cancels().drain() {
            let _ = cancel.send(());
        }
    }

    /// Resolves once every dispatch task has reported.
    async fn settled(&self) {
        loop {
            let settled = self.settled.notified();
            tokio::pin!(settled);
            settled.as_mut().enable();
            if self.reporting.load(Ordering::Acquire) == 0 {
                return;
            }
            settled.await;
        }
    }
}

/// Counts one dispatch task until it has reported, even if it panics.
struct Reporting(Arc<InFlight>);

impl Reporting {
    fn start(in_flight: &Arc<InFlight>) -> Self {
        in_flight.reporting.fetch_add(1, Ordering::AcqRel);
        Self(Arc::clone(in_flight))
    }
}

impl Drop for Reporting {
    fn drop(&mut self) {
        if self.0.reporting.fetch_sub(1, Ordering::AcqRel) == 1 {
            self.0.settled.notify_waiters();
        }
    }
}

/// Runs the producer role until the connection should close.
pub(super) async fn serve(
    shared: &Arc<Shared>,
    reader: &mut FrameReader,
    outbound: &Outbound,
) -> Close {
    let in_flight = Arc::new(InFlight::default());
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
            Frame::Submit(submit) => submit_one(shared, outbound, &in_flight, submit).await,
            Frame::Cancel(cancel) => {
                if let Some(trigger) = in_flight.cancels().remove(&cancel.correlation) {
                    let _ = trigger.send(());
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
    in_flight.cancel_all();
    let _ = tokio::time::timeout(SETTLE_GRACE, in_flight.settled()).await;
    close
}

async fn submit_one(
    shared: &Arc<Shared>,
    outbound: &Outbound,
    in_flight: &Arc<InFlight>,
    submit: Submit,
) {
    let correlation = submit.correlation;
    let (trigger, cancelled) = oneshot::channel::<()>();
    let refusal = {
        let mut cancels = in_flight.cancels();
        let max = shared.config.max_in_flight_per_producer as usize;
        if cancels.contains_key(&correlation) {
            Some((
                RefusedReason::DuplicateCorrelation,
                format!("correlation {correlation} is already in flight"),
            ))
        } else if cancels.len() >= max {
            Some((
                RefusedReason::TooManyInFlight,
                format!("{max} submissions already in flight"),
            ))
        } else {
            cancels.insert(correlation, trigger);
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
    let reporting = Reporting::start(in_flight);
    let shared = Arc::clone(shared);
    let outbound = outbound.clone();
    tokio::spawn(async move {
        // A dropped trigger means the dispatch ended first; only a sent one cancels.
        let cancelled = async {
            if cancelled.await.is_err() {
                std::future::pending::<()>().await;
            }
        };
        let result = shared
            .dispatcher
            .dispatch_until(submit.request, &options, cancelled)
            .await;
        reporting.0.cancels().remove(&correlation);
        let _ = outbound.send(outcome(correlation, result)).await;
        drop(reporting);
    });
}

fn outcome(correlation: u64, result: DispatchResult) -> Frame {
    Frame::Outcome(OutcomeFrame {
        correlation,
        result,
    })
}
