//! A worker's link: its outbound queue plus the table of pushes awaiting a reply.
//!
//! The table maps a correlation id to its waiter behind a short mutex, never held across an
//! `.await`: an in-process caller's oneshot, or a producer's submission that turns the reply
//! into its outcome frame right in the worker's reader. An entry leaves on reply, on timeout
//! or caller drop, and on close, when every waiter hears "worker lost" at once.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard};

use lintel_client::transport::{Outbound, SendError};
use lintel_wire::{Cancel, DispatchRequest, DispatchResponse, Frame, Push};
use tokio::sync::oneshot;

use super::flights::Submission;

/// Why a push did not reach the worker's queue.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum PushError {
    /// The worker's outbound queue is full; the worker stays registered.
    #[error("worker outbound queue is full")]
    Backpressure,
    /// The worker's connection is closed.
    #[error("worker connection is closed")]
    Closed,
}

/// Why a pending reply ended without a response.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("worker connection closed before the reply")]
pub struct LinkClosed;

/// Who hears a push's reply.
#[derive(Debug)]
enum Waiter {
    /// An in-process caller awaiting a [`PendingReply`].
    Caller(oneshot::Sender<DispatchResponse>),
    /// A producer's submission; dropping it unanswered reports the worker lost.
    Submission(Submission),
}

impl Waiter {
    /// Ends a waiter whose push never left: nobody is told anything.
    fn settle(self) {
        if let Waiter::Submission(submission) = self {
            submission.settle();
        }
    }
}

#[derive(Debug, Default)]
struct Table {
    next_correlation: u64,
    pending: HashMap<u64, Waiter>,
    /// Pushes held until [`WorkerLink::open`], so they follow the `Registered` frame.
    held: Option<Vec<Frame>>,
    closed: bool,
}

#[derive(Debug)]
struct Inner {
    pid: u64,
    outbound: Outbound,
    table: Mutex<Table>,
}

/// Cloneable handle to one worker connection's push path.
#[derive(Debug, Clone)]
pub struct WorkerLink {
    inner: Arc<Inner>,
}

impl WorkerLink {
    /// A link for the connection `pid` whose frames go to `outbound`.
    pub fn new(pid: u64, outbound: Outbound) -> Self {
        Self::with_table(pid, outbound, Table::default())
    }

    /// A link that holds pushes until [`WorkerLink::open`]; a registering connection uses it
    /// so no push overtakes the `Registered` frame.
    pub fn held(pid: u64, outbound: Outbound) -> Self {
        let table = Table {
            held: Some(Vec::new()),
            ..Table::default()
        };
        Self::with_table(pid, outbound, table)
    }

    fn with_table(pid: u64, outbound: Outbound, table: Table) -> Self {
        Self {
            inner: Arc::new(Inner {
                pid,
                outbound,
                table: Mutex::new(table),
            }),
        }
    }

    /// Releases held pushes in order, waiting for queue room, and sends later pushes directly.
    pub async fn open(&self) {
        let held = self.table().held.take().unwrap_or_default();
        for frame in held {
            if self.inner.outbound.send(frame).await.is_err() {
                return;
            }
        }
    }

    /// The connection this link pushes on.
    pub fn pid(&self) -> u64 {
        self.inner.pid
    }

    /// Queues `request` as a push and returns the pending reply.
    ///
    /// # Errors
    /// [`PushError::Closed`] when the link is closed, [`PushError::Backpressure`] when its
    /// queue is full; neither leaves an entry behind.
    pub fn push(&self, request: DispatchRequest) -> Result<PendingReply, PushError> {
        let (tx, rx) = oneshot::channel();
        let correlation = self.enqueue(request, Waiter::Caller(tx))?;
        Ok(PendingReply {
            link: self.clone(),
            correlation,
            rx,
            settled: false,
        })
    }

    /// Queues `request` as a push whose reply goes to `submission`; returns its correlation id.
    ///
    /// # Errors
    /// As [`WorkerLink::push`]; the submission is then settled unanswered, and its caller
    /// owes the outcome.
    pub(crate) fn push_submission(
        &self,
        request: DispatchRequest,
        submission: Submission,
    ) -> Result<u64, PushError> {
        self.enqueue(request, Waiter::Submission(submission))
    }

    fn enqueue(&self, request: DispatchRequest, waiter: Waiter) -> Result<u64, PushError> {
        let (correlation, frame) = {
            let mut table = self.table();
            if table.closed {
                drop(table);
                waiter.settle();
                return Err(PushError::Closed);
            }
            table.next_correlation = table.next_correlation.wrapping_add(1);
            let correlation = table.next_correlation;
            table.pending.insert(correlation, waiter);
            let frame = Frame::Push(Push {
                correlation,
                request,
            });
            let direct = match table.held.as_mut() {
                Some(held) => {
                    held.push(frame);
                    None
                }
                None => Some(frame),
            };
            (correlation, direct)
        };
        let Some(frame) = frame else {
            return Ok(correlation);
        };
        if let Err(err) = self.inner.outbound.try_send(frame) {
            let err = match err {
                SendError::Full => PushError::Backpressure,
                SendError::Closed => PushError::Closed,
            };
            let waiter = self.table().pending.remove(&correlation);
            if let Some(waiter) = waiter {
                waiter.settle();
            }
            return Err(err);
        }
        Ok(correlation)
    }

    /// Hands a worker's reply to its waiter; `false` when nothing waits on `correlation`.
    pub fn complete(&self, correlation: u64, response: DispatchResponse) -> bool {
        let waiter = self.table().pending.remove(&correlation);
        match waiter {
            Some(Waiter::Caller(tx)) => tx.send(response).is_ok(),
            Some(Waiter::Submission(submission)) => {
                submission.complete(response);
                true
            }
            None => false,
        }
    }

    /// Closes the link: later pushes fail and every pending waiter hears [`LinkClosed`] now.
    pub fn close(&self) {
        let pending = {
            let mut table = self.table();
            table.closed = true;
            std::mem::take(&mut table.pending)
        };
        drop(pending);
    }

    /// Pushes awaiting a reply.
    pub fn in_flight(&self) -> usize {
        self.table().pending.len()
    }

    fn table(&self) -> MutexGuard<'_, Table> {
        // A poisoned table only means another thread panicked mid-update of a map; keep going.
        self.inner
            .table
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Forgets `correlation` and tells the worker to abandon it.
    pub(crate) fn abandon(&self, correlation: u64) {
        // Dropped outside the table lock: a submission's drop takes other locks.
        let waiter = self.table().pending.remove(&correlation);
        if let Some(waiter) = waiter {
            drop(waiter);
            let _ = self
                .inner
                .outbound
                .try_send(Frame::Cancel(Cancel { correlation }));
        }
    }
}

/// A push awaiting its reply. Dropping it before the reply forgets the entry and
/// sends the worker a cancel.
#[derive(Debug)]
pub struct PendingReply {
    link: WorkerLink,
    correlation: u64,
    rx: oneshot::Receiver<DispatchResponse>,
    settled: bool,
}

impl PendingReply {
    /// The correlation id the push carried.
    pub fn correlation(&self) -> u64 {
        self.correlation
    }

    /// Waits for the reply. Cancel-safe: dropping the future keeps the entry until `self` drops.
    ///
    /// # Errors
    /// [`LinkClosed`] when the worker's connection closed first.
    pub async fn recv(&mut self) -> Result<DispatchResponse, LinkClosed> {
        let result = (&mut self.rx).await.map_err(|_| LinkClosed);
        self.settled = true;
        result
    }
}

impl Drop for PendingReply {
    fn drop(&mut self) {
        if !self.settled {
            self.link.abandon(self.correlation);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn request() -> DispatchRequest {
        DispatchRequest {
            namespace: "ns".into(),
            task_queue: "tq".into(),
            activity_type: "echo".into(),
            node: None,
            workflow_id: "wf".into(),
            ordinal: 1,
            run_id: None,
            attempt: 1,
            input: bytes::Bytes::new(),
            deadline_unix_ms: None,
        }
    }

    fn response() -> DispatchResponse {
        DispatchResponse {
            workflow_id: "wf".into(),
            ordinal: 1,
            run_id: None,
            outcome: lintel_wire::ActivityOutcome::Success(bytes::Bytes::new()),
        }
    }

    async fn link(queue: usize) -> (WorkerLink, tokio::net::TcpStream) {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let (client, accepted) =
            tokio::join!(tokio::net::TcpStream::connect(addr), listener.accept());
        let (_reader, outbound, _writer) =
            crate::transport::split(accepted.unwrap().0, 1 << 20, queue);
        (WorkerLink::new(1, outbound), client.unwrap())
    }

    #[tokio::test]
    async fn a_reply_completes_only_its_own_correlation() {
        let (link, _peer) = link(8).await;
        let mut first = link.push(request()).unwrap();
        let second = link.push(request()).unwrap();
        assert!(!link.complete(999, response()));
        assert!(link.complete(first.correlation(), response()));
        assert!(first.recv().await.is_ok());
        assert!(
            !link.complete(first.correlation(), response()),
            "a finished id is dropped"
        );
        assert_eq!(link.in_flight(), 1);
        drop(second);
        assert_eq!(link.in_flight(), 0, "a dropped waiter leaves no entry");
    }

    #[tokio::test]
    async fn closing_fails_every_waiter_at_once_and_refuses_new_pushes() {
        let (link, _peer) = link(8).await;
        let mut a = link.push(request()).unwrap();
        let mut b = link.push(request()).unwrap();
        link.close();
        assert_eq!(a.recv().await, Err(LinkClosed));
        assert_eq!(b.recv().await, Err(LinkClosed));
        assert_eq!(link.push(request()).err(), Some(PushError::Closed));
    }
}
