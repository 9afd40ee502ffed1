//! A worker link's correlation table: push then reply, and push then end (a deadline or cancel)
//! then the late reply.
//!
//! The link's writer task runs on a current-thread runtime, so it encodes and writes only
//! between batches, when the setup drains every frame queued so far off the peer's socket.
//! Inside the timed routine is the caller's side alone: the table and the `try_send` into the
//! outbound queue. The requests and responses are built outside it.

use std::cell::Cell;
use std::time::Duration;

use bytes::Bytes;
use criterion::{black_box, criterion_group, BatchSize, Criterion};
use futures_util::StreamExt;
use std::sync::Arc;

use lintel::link::{End, Entry, PushEntry, Release, ReplyFate, ToWorker, Unanswered, WorkerLink};
use lintel_wire::{
    ActivityOutcome, DispatchRequest, DispatchResponse, ExtrasRef, FrameCodec, ResponseRef,
    DEFAULT_MAX_FRAME_LEN,
};
use tokio::net::TcpStream;
use tokio::runtime::Runtime;
use tokio_util::codec::FramedRead;

use crate::support::{loopback, runtime};

/// Pushes per timed batch; the queue holds every frame of a batch (two per abandon).
const BATCH: u64 = 1_000;

/// Outbound queue length, above the most frames one batch queues.
const QUEUE_LEN: usize = 4 * BATCH as usize;

/// Longest a drain waits for a frame before declaring the bench broken.
const DRAIN_TIMEOUT: Duration = Duration::from_secs(5);

fn request() -> DispatchRequest {
    DispatchRequest {
        namespace: "remote".to_owned(),
        task_queue: "gpu".to_owned(),
        activity_type: "render_thumbnail".to_owned(),
        node: None,
        workflow_id: "order-fulfilment-7f3c9a2e".to_owned(),
        ordinal: 42,
        run_id: None,
        attempt: 1,
        input: Bytes::from_static(&[7; 64]),
        deadline_unix_ms: None,
    }
}

fn response() -> DispatchResponse {
    DispatchResponse {
        workflow_id: "order-fulfilment-7f3c9a2e".to_owned(),
        ordinal: 42,
        run_id: None,
        outcome: ActivityOutcome::Success(Bytes::from_static(&[9; 64])),
    }
}

/// Takes what the link tells it and drops it, as a dispatch's own bookkeeping would.
struct Dropped;

impl Entry<ToWorker> for Dropped {
    fn answered(&self, response: ResponseRef<'_>) {
        black_box(response);
    }
    fn unanswered(&self, why: Unanswered) {
        black_box(why);
    }
    fn released(&self, why: Release) {
        black_box(why);
    }
}

/// The worker's end of the socket, read until it has seen every frame the link queued.
struct Drain<'a> {
    runtime: &'a Runtime,
    frames: FramedRead<TcpStream, FrameCodec>,
    read: u64,
}

impl Drain<'_> {
    /// Runs the writer task and reads until `queued` frames have arrived.
    fn up_to(&mut self, queued: u64) {
        if self.read >= queued {
            return;
        }
        let Self {
            runtime,
            frames,
            read,
        } = self;
        runtime.block_on(async {
            while *read < queued {
                match tokio::time::timeout(DRAIN_TIMEOUT, frames.next()).await {
                    Ok(Some(Ok(_frame))) => *read += 1,
                    other => panic!("peer stopped receiving frames: {other:?}"),
                }
            }
        });
    }
}

/// One link on a fresh loopback pair, and the drain reading its peer end.
fn link(runtime: &Runtime) -> (WorkerLink, Drain<'_>) {
    let socket = loopback(runtime, QUEUE_LEN);
    let link = WorkerLink::new(1, 2, socket.outbound);
    let drain = Drain {
        runtime,
        frames: FramedRead::new(socket.peer, FrameCodec::new(DEFAULT_MAX_FRAME_LEN)),
        read: 0,
    };
    (link, drain)
}

/// Push (table insert, `try_send`), then the reply takes the entry.
fn push_complete(c: &mut Criterion) {
    let runtime = runtime();
    let (link, mut drain) = link(&runtime);
    let entry: Arc<PushEntry> = Arc::new(Dropped);
    let queued = Cell::new(0_u64);
    let mut group = c.benchmark_group("correlation");
    group.bench_function("push_complete", |b| {
        b.iter_batched(
            || {
                drain.up_to(queued.get());
                (request(), response())
            },
            |(request, response)| {
                let correlation = link
                    .push(
                        black_box(&request.view()),
                        &ExtrasRef::NONE,
                        Arc::clone(&entry),
                    )
                    .unwrap_or_else(|_| panic!("queue has room"));
                queued.set(queued.get() + 1);
                assert_eq!(
                    link.reply(correlation, response.view()),
                    ReplyFate::Delivered
                );
            },
            BatchSize::NumIterations(BATCH),
        );
    });
    group.finish();
}

/// Push, end it (a `Cancel` is queued, the entry stays), then the late reply removes it.
fn push_abandon(c: &mut Criterion) {
    let runtime = runtime();
    let (link, mut drain) = link(&runtime);
    let entry: Arc<PushEntry> = Arc::new(Dropped);
    let queued = Cell::new(0_u64);
    let mut group = c.benchmark_group("correlation");
    group.bench_function("push_abandon", |b| {
        b.iter_batched(
            || {
                drain.up_to(queued.get());
                (request(), response())
            },
            |(request, response)| {
                let correlation = link
                    .push(
                        black_box(&request.view()),
                        &ExtrasRef::NONE,
                        Arc::clone(&entry),
                    )
                    .unwrap_or_else(|_| panic!("queue has room"));
                assert_eq!(link.end(correlation), End::Ended);
                assert_eq!(link.reply(correlation, response.view()), ReplyFate::Late);
                queued.set(queued.get() + 2);
            },
            BatchSize::NumIterations(BATCH),
        );
    });
    group.finish();
    assert_eq!(link.in_flight(), 0, "a late reply leaves no entry");
}

criterion_group!(correlation, push_complete, push_abandon);
