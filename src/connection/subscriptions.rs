//! A producer connection's event subscriptions: each a task that moves the node's events of
//! its topics into the connection's outbound queue, in order, until it is cancelled, the node
//! shuts down or the connection ends.
//!
//! Events take at most half of the connection's outbound queue, in frames and in bytes, so a
//! subscriber that reads nothing never fills the queue: it falls behind in the node's event
//! ring, loses what the ring no longer holds, and is told `Missed{count}` before the next event
//! it gets. Its outcomes and status reports keep the other half.
//!
//! A subscriber whose grant does not see every namespace gets a worker event naming only the
//! pools it sees, and none for a worker in none of them; peer events and `Missed` it gets all.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use lintel_wire::{
    Event, Frame, NodeEvent, RefusalCode, Subscribe, SubscriptionEnded, WorkerEvent,
};
use tokio::sync::oneshot;
use tokio::task::JoinHandle;

use crate::auth::Grant;
use crate::events::{Delivery, Subscriber};
use crate::shared::Shared;
use lintel_transport::{Outbound, SendError};

/// Most subscriptions live at once on one connection.
pub(super) const MAX_SUBSCRIPTIONS: usize = 16;

/// How long ending the subscriptions waits for each to send its last frame.
const END_GRACE: Duration = Duration::from_secs(5);

/// Why a subscription ends, as its `SubscriptionEnded` says.
#[derive(Debug, Clone, Copy)]
pub(super) struct End {
    pub(super) code: RefusalCode,
    pub(super) reason: &'static str,
}

/// The subscriber cancelled.
pub(super) const CANCELLED: End = End {
    code: RefusalCode::Cancelled,
    reason: "cancelled",
};

/// The node shuts down.
pub(super) const SHUTTING_DOWN: End = End {
    code: RefusalCode::Draining,
    reason: "node shutting down",
};

/// One connection's live subscriptions, by correlation.
pub(super) struct Subscriptions {
    shared: Arc<Shared>,
    outbound: Outbound,
    /// `Err` with the reason when the connection's grant may not observe.
    allowed: Result<(), String>,
    /// The grant whose namespaces decide which events it is sent.
    sees: Arc<Grant>,
    live: HashMap<u64, Live>,
}

struct Live {
    /// Tells the task to end, and why; dropped, it ends without a word.
    end: oneshot::Sender<End>,
    task: JoinHandle<()>,
}

impl Subscriptions {
    /// No subscription yet on the connection of `outbound`, which may subscribe when
    /// `allowed` and is sent the events `sees` sees.
    pub(super) fn new(
        shared: &Arc<Shared>,
        outbound: &Outbound,
        allowed: Result<(), String>,
        sees: Grant,
    ) -> Self {
        Self {
            shared: Arc::clone(shared),
            outbound: outbound.clone(),
            allowed,
            sees: Arc::new(sees),
            live: HashMap::new(),
        }
    }

    /// Starts `subscribe`, or answers it with the `SubscriptionEnded` that refuses it.
    ///
    /// # Errors
    /// The refusal's [`SendError`], [`SendError::Closed`] once the connection is gone.
    pub(super) fn subscribe(&mut self, subscribe: Subscribe) -> Result<(), SendError> {
        let Subscribe {
            correlation,
            topics,
        } = subscribe;
        self.live.retain(|_, live| !live.task.is_finished());
        let refused = |code, reason: String| {
            Frame::SubscriptionEnded(SubscriptionEnded {
                correlation,
                code,
                reason,
            })
        };
        let refusal = if let Err(reason) = &self.allowed {
            Some(refused(RefusalCode::Unauthorized, reason.clone()))
        } else if self.live.contains_key(&correlation) {
            Some(refused(
                RefusalCode::InvalidField,
                format!("correlation {correlation} names a live subscription"),
            ))
        } else if self.live.len() >= MAX_SUBSCRIPTIONS {
            Some(refused(
                RefusalCode::LimitExceeded,
                format!("{MAX_SUBSCRIPTIONS} subscriptions are live on this connection"),
            ))
        } else if self.shared.closing.is_cancelled() {
            Some(refused(SHUTTING_DOWN.code, SHUTTING_DOWN.reason.to_owned()))
        } else {
            None
        };
        if let Some(refusal) = refusal {
            return self.outbound.send_owed(refusal);
        }
        let subscriber = self
            .shared
            .dispatcher
            .registry()
            .events()
            .subscribe(&topics);
        let (end, ending) = oneshot::channel();
        let limits = self.outbound.limits();
        let share = Share {
            frames: (limits.frames / 2).max(1),
            bytes: (limits.bytes / 2).max(1),
        };
        let forwarding = forward(
            subscriber,
            Target {
                outbound: self.outbound.clone(),
                correlation,
                sees: Arc::clone(&self.sees),
            },
            share,
            ending,
        );
        let task = tokio::spawn(forwarding);
        self.live.insert(correlation, Live { end, task });
        Ok(())
    }

    /// Ends the subscription `correlation` as cancelled; false when none is live.
    pub(super) fn cancel(&mut self, correlation: u64) -> bool {
        match self.live.remove(&correlation) {
            Some(live) => {
                let _ = live.end.send(CANCELLED);
                true
            }
            None => false,
        }
    }

    /// Ends every subscription for `end`, and waits a bounded time for each to send its last
    /// frame.
    pub(super) async fn end_all(&mut self, end: End) {
        let tasks: Vec<JoinHandle<()>> = self
            .live
            .drain()
            .map(|(_, live)| {
                let _ = live.end.send(end);
                live.task
            })
            .collect();
        let _ = tokio::time::timeout(END_GRACE, futures_util::future::join_all(tasks)).await;
    }
}

/// The part of the outbound queue events may fill.
#[derive(Debug, Clone, Copy)]
struct Share {
    frames: usize,
    bytes: usize,
}

/// Where one subscription's events go: a connection's queue, under its correlation, as much of
/// each as its grant sees.
struct Target {
    outbound: Outbound,
    correlation: u64,
    sees: Arc<Grant>,
}

/// Moves `subscriber`'s deliveries into the target's queue as `Event{correlation, ..}`, within
/// `share`, until told to end (then says `SubscriptionEnded`, after the events already in the
/// ring that fit), its handle is dropped, or the connection closes.
async fn forward(
    mut subscriber: Subscriber,
    target: Target,
    share: Share,
    mut ending: oneshot::Receiver<End>,
) {
    let outbound = &target.outbound;
    // Each branch is cancel-safe: a wait for room changes nothing, a delivery read is held
    // by the subscriber, and the end is read once.
    let end = loop {
        tokio::select! {
            biased;
            end = &mut ending => break end,
            () = outbound.under(share.frames, share.bytes) => {}
        }
        if outbound.is_closed() {
            return;
        }
        let delivery = tokio::select! {
            biased;
            end = &mut ending => break end,
            delivery = subscriber.next() => delivery,
        };
        let Some(delivery) = delivery else {
            return;
        };
        if let Err(SendError::Closed) = send(&mut subscriber, &target, &delivery) {
            return;
        }
    };
    let Ok(end) = end else {
        return;
    };
    // What the ring holds already goes first, as far as the share has room for it.
    while outbound.queued().0 < share.frames && outbound.queued().1 < share.bytes {
        let Some(delivery) = subscriber.try_next() else {
            break;
        };
        if let Err(SendError::Closed) = send(&mut subscriber, &target, &delivery) {
            return;
        }
    }
    let ended = Frame::SubscriptionEnded(SubscriptionEnded {
        correlation: target.correlation,
        code: end.code,
        reason: end.reason.to_owned(),
    });
    let _ = outbound.send_owed(ended);
}

/// Queues `delivery` as an `Event`, as much of it as the target sees; one that does not fit
/// counts as lost, told in the next `Missed`.
fn send(
    subscriber: &mut Subscriber,
    target: &Target,
    delivery: &Delivery,
) -> Result<(), SendError> {
    let (seq, at_unix_ms, event) = delivery.parts();
    let Some(event) = seen(event, &target.sees) else {
        return Ok(());
    };
    let frame = Frame::from(Event {
        correlation: target.correlation,
        seq,
        at_unix_ms,
        event,
    });
    match target.outbound.try_send(frame) {
        Ok(()) => Ok(()),
        Err(SendError::Closed) => Err(SendError::Closed),
        Err(err) => {
            if !matches!(err, SendError::Full) {
                tracing::warn!(error = %err, "an event could not be sent to a subscriber");
            }
            subscriber.lost(delivery);
            Err(err)
        }
    }
}

/// `event` as `grant` may see it: a worker event naming only the pools it sees, or none when
/// it sees none of them; any other event whole.
fn seen(event: NodeEvent, grant: &Grant) -> Option<NodeEvent> {
    if grant.sees_all() {
        return Some(event);
    }
    let narrow = |mut worker: WorkerEvent| {
        worker
            .channels
            .retain(|channel| grant.sees_channel(channel));
        (!worker.channels.is_empty()).then_some(worker)
    };
    match event {
        NodeEvent::WorkerRegistered(worker) => narrow(worker).map(NodeEvent::WorkerRegistered),
        NodeEvent::WorkerRestored(worker) => narrow(worker).map(NodeEvent::WorkerRestored),
        NodeEvent::WorkerExcluded { worker, reason } => {
            narrow(worker).map(|worker| NodeEvent::WorkerExcluded { worker, reason })
        }
        NodeEvent::WorkerDeparted { worker, reason } => {
            narrow(worker).map(|worker| NodeEvent::WorkerDeparted { worker, reason })
        }
        other @ (NodeEvent::PeerUp { .. }
        | NodeEvent::PeerDown { .. }
        | NodeEvent::Missed { .. }) => Some(other),
    }
}
