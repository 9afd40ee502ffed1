//! A subscription to a node's lifecycle events, as a stream, and the sink that feeds it from
//! the connection's reader.
//!
//! The reader never waits on a subscriber: each subscription buffers at most `BUFFERED` (1024)
//! events, and one that falls further behind loses the newest and reads a `Missed{count}`
//! (made here, numbered one less than the event after it) before the next event it gets, as
//! the node tells a subscriber that fell behind there.

use std::fmt::Debug;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use futures_util::Stream;
use lintel_wire::{Event, NodeEvent, RefusalCode, SubscriptionEnded};
use tokio::sync::{mpsc, oneshot};

/// What a subscription needs of its connection, which it keeps open while it lives.
pub(crate) trait Connection: Debug + Send + Sync {
    /// Tells the node to end the subscription `correlation`.
    fn cancel(&self, correlation: u64);
    /// Forgets the subscription `correlation`; true when it was still live.
    fn forget(&self, correlation: u64) -> bool;
}

/// Events a subscription holds for its reader before it loses the newest.
pub(crate) const BUFFERED: usize = 1024;

/// Why a subscription's stream ended.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum SubscriptionError {
    /// The node ended it: `Cancelled` after [`Subscription::cancel`], `Draining` when the
    /// node shuts down, `Unauthorized` without the observer role.
    #[error("the node ended the subscription ({code:?}): {reason}")]
    Ended {
        /// Why, as a code.
        code: RefusalCode,
        /// Why, for people.
        reason: String,
    },
    /// The connection closed.
    #[error("connection to the node closed")]
    Closed,
}

/// The reader's end of one subscription.
#[derive(Debug)]
pub(crate) struct Sink {
    events: mpsc::Sender<Event>,
    end: oneshot::Sender<SubscriptionEnded>,
    /// Events lost since the last one delivered.
    lost: u64,
}

impl Sink {
    /// A sink and the receivers a [`Subscription`] reads.
    pub(crate) fn new() -> (
        Self,
        mpsc::Receiver<Event>,
        oneshot::Receiver<SubscriptionEnded>,
    ) {
        let (events, received) = mpsc::channel(BUFFERED);
        let (end, ending) = oneshot::channel();
        let sink = Self {
            events,
            end,
            lost: 0,
        };
        (sink, received, ending)
    }

    /// Hands `event` on without waiting; a `Missed` goes first when events were lost.
    pub(crate) fn deliver(&mut self, event: Event) {
        let count = match event.event {
            NodeEvent::Missed { count } => count,
            _ => 1,
        };
        if self.lost > 0 {
            let missed = Event {
                correlation: event.correlation,
                seq: event.seq.saturating_sub(1),
                at_unix_ms: event.at_unix_ms,
                event: NodeEvent::Missed { count: self.lost },
            };
            if self.events.try_send(missed).is_err() {
                self.lost = self.lost.saturating_add(count);
                return;
            }
            self.lost = 0;
        }
        if let Err(mpsc::error::TrySendError::Full(_)) = self.events.try_send(event) {
            self.lost = self.lost.saturating_add(count);
        }
    }

    /// The node ended the subscription: its reader gets `ended` after the events before it.
    pub(crate) fn end(self, ended: SubscriptionEnded) {
        // Told before the events' sender drops, so a reader that sees the events end finds it.
        let _ = self.end.send(ended);
    }
}

/// A live subscription: a [`Stream`] of the node's events, in order, each with its `seq` and
/// `at_unix_ms`. It ends with one `Err`: [`SubscriptionError::Ended`] when the node ends it
/// (after [`Subscription::cancel`], or as the node shuts down), or
/// [`SubscriptionError::Closed`] when the connection closes. Dropping it cancels it.
#[derive(Debug)]
pub struct Subscription {
    connection: Arc<dyn Connection>,
    correlation: u64,
    events: mpsc::Receiver<Event>,
    ending: oneshot::Receiver<SubscriptionEnded>,
    done: bool,
}

impl Subscription {
    pub(crate) fn new(
        connection: Arc<dyn Connection>,
        correlation: u64,
        events: mpsc::Receiver<Event>,
        ending: oneshot::Receiver<SubscriptionEnded>,
    ) -> Self {
        Self {
            connection,
            correlation,
            events,
            ending,
            done: false,
        }
    }

    /// The correlation naming the subscription on its connection.
    pub fn correlation(&self) -> u64 {
        self.correlation
    }

    /// Asks the node to end the subscription: the events already sent still arrive, then the
    /// stream ends with [`SubscriptionError::Ended`] saying `Cancelled`.
    pub fn cancel(&self) {
        self.connection.cancel(self.correlation);
    }
}

impl Stream for Subscription {
    type Item = Result<Event, SubscriptionError>;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        if self.done {
            return Poll::Ready(None);
        }
        match self.events.poll_recv(cx) {
            Poll::Ready(Some(event)) => Poll::Ready(Some(Ok(event))),
            Poll::Ready(None) => {
                self.done = true;
                let end = match self.ending.try_recv() {
                    Ok(ended) => SubscriptionError::Ended {
                        code: ended.code,
                        reason: ended.reason,
                    },
                    Err(_) => SubscriptionError::Closed,
                };
                Poll::Ready(Some(Err(end)))
            }
            Poll::Pending => Poll::Pending,
        }
    }
}

impl Drop for Subscription {
    fn drop(&mut self) {
        if !self.done && self.connection.forget(self.correlation) {
            self.connection.cancel(self.correlation);
        }
    }
}
