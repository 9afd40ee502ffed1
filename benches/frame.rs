//! A frame's trip through the node: a `Submit` written into the producer's socket is read and
//! decoded by the node's `FrameReader`, its request moved into a `Push` and encoded on a
//! worker's outbound queue, whose writer sends it on.
//!
//! Timed: the producer's write, the reader's read and decode, and the encode into the queue,
//! everything a node does for one frame but choose a worker. Reading the push off the
//! worker's socket is outside the timing. Throughput is the `Submit` frame's bytes.

use std::time::{Duration, Instant};

use bytes::{Bytes, BytesMut};
use criterion::{black_box, criterion_group, BenchmarkId, Criterion, Throughput};
use lintel::transport::{self, FrameReader, Outbound};
use lintel_wire::{
    encode_frame, DispatchRequest, Frame, FrameRef, NodeRouting, Push, Submit,
    DEFAULT_MAX_FRAME_LEN,
};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::runtime::Runtime;

use crate::support::{loopback, runtime};

/// Payloads from a small argument to a large blob: copies start to dominate at 16 KiB.
const PAYLOADS: [(&str, usize); 4] = [
    ("64B", 64),
    ("16KiB", 16 * 1024),
    ("64KiB", 64 * 1024),
    ("1MiB", 1024 * 1024),
];

/// Longest one trip may take before the bench declares itself broken.
const TRIP_TIMEOUT: Duration = Duration::from_secs(10);

fn request(payload_len: usize) -> DispatchRequest {
    let input: Vec<u8> = (0..payload_len).map(|i| (i % 251) as u8).collect();
    DispatchRequest {
        namespace: "remote".to_owned(),
        task_queue: "gpu".to_owned(),
        activity_type: "render_thumbnail".to_owned(),
        node: None,
        workflow_id: "order-fulfilment-7f3c9a2e-5b1d-4e8f-9a60-2c4d8e1f0b37".to_owned(),
        ordinal: 42,
        run_id: Some("01J9Z8Q4K7M2N5P8R1T4V7X0YB".to_owned()),
        attempt: 1,
        input: Bytes::from(input),
        deadline_unix_ms: Some(1_767_225_600_000),
    }
}

fn encoded(frame: &Frame) -> Bytes {
    let mut buf = BytesMut::new();
    encode_frame(
        frame,
        lintel::wire::PROTOCOL_VERSION,
        &mut buf,
        DEFAULT_MAX_FRAME_LEN,
    )
    .expect("bench frame encodes");
    buf.freeze()
}

/// The producer's socket and the node's reader of it, as the node splits an accepted socket.
fn producer(runtime: &Runtime) -> (TcpStream, FrameReader, Outbound) {
    runtime.block_on(async {
        let listener = TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind a loopback listener");
        let addr = listener.local_addr().expect("listener address");
        let (producer, accepted) = tokio::join!(TcpStream::connect(addr), listener.accept());
        let (accepted, _) = accepted.expect("accept the producer");
        let (reader, outbound, _writer) = transport::split(accepted, DEFAULT_MAX_FRAME_LEN, 1024);
        (producer.expect("dial the listener"), reader, outbound)
    })
}

fn submit_to_push(c: &mut Criterion) {
    let runtime = runtime();
    let mut group = c.benchmark_group("frame_trip_node");
    for (label, payload_len) in PAYLOADS {
        let submit = encoded(&Frame::from(Submit {
            correlation: 7,
            request: request(payload_len),
            wait_for_worker_ms: Some(2_000),
            reply_timeout_ms: None,
            routing: NodeRouting::Any,
            extras: Default::default(),
        }));
        let push_len = encoded(&Frame::from(Push {
            correlation: 7,
            request: request(payload_len),
            extras: Default::default(),
        }))
        .len();
        // Kept open for the group: the node side's queue to the producer stays unused.
        let (mut from_producer, mut reader, _to_producer) = producer(&runtime);
        let mut worker = loopback(&runtime, 1024);
        let mut pushed = vec![0u8; push_len];
        group.throughput(Throughput::Bytes(submit.len() as u64));
        group.bench_with_input(BenchmarkId::from_parameter(label), &submit, |b, submit| {
            b.iter_custom(|iters| {
                runtime.block_on(async {
                    let mut timed = Duration::ZERO;
                    for _ in 0..iters {
                        let started = Instant::now();
                        let (written, frame) =
                            tokio::join!(from_producer.write_all(submit), reader.next_frame());
                        written.expect("producer writes");
                        let Some(Ok(FrameRef::Submit(submit))) = frame else {
                            panic!("the node reads a submit, not {frame:?}");
                        };
                        let push = FrameRef::Push(Push {
                            correlation: submit.correlation,
                            request: submit.request,
                            extras: Default::default(),
                        });
                        worker
                            .outbound
                            .try_send_ref(black_box(&push))
                            .expect("queue has room");
                        timed += started.elapsed();
                        tokio::time::timeout(TRIP_TIMEOUT, worker.peer.read_exact(&mut pushed))
                            .await
                            .expect("the push reaches the worker in time")
                            .expect("worker reads the push");
                    }
                    timed
                })
            });
        });
    }
    group.finish();
}

criterion_group!(frame, submit_to_push);
