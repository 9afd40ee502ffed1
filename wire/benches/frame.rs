//! Encode and decode of a `Push` frame carrying a realistic `DispatchRequest`, and a frame's
//! trip through a node: a `Submit` decoded from the read buffer, its request moved into a
//! `Push` and encoded for the worker.
//!
//! Throughput is the whole encoded frame, length prefix included: the bytes that cross the wire.

use bytes::{Bytes, BytesMut};
use criterion::{black_box, criterion_group, BatchSize, BenchmarkId, Criterion, Throughput};
use lintel_wire::{
    decode_frame, encode_frame, DispatchRequest, Frame, NodeRouting, Push, RequestExtras, Submit,
    PROTOCOL_VERSION,
};

/// Input payload sizes: a small argument, a page, a large blob.
const PAYLOADS: [(&str, usize); 3] = [("64B", 64), ("4KiB", 4 * 1024), ("1MiB", 1024 * 1024)];

/// Large enough for the biggest payload plus the request's fields, whatever the crate default.
const MAX_FRAME_LEN: usize = 2 * 1024 * 1024;

/// Above this encoded size a batch of fresh copies is held in memory one at a time.
const LARGE_INPUT: usize = 64 * 1024;

fn push_frame(payload_len: usize) -> Frame {
    let input: Vec<u8> = (0..payload_len).map(|i| (i % 251) as u8).collect();
    Frame::from(Push {
        correlation: 1_048_577,
        request: DispatchRequest {
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
        },
        extras: RequestExtras::default(),
    })
}

fn encoded(frame: &Frame) -> BytesMut {
    let mut buf = BytesMut::new();
    if let Err(error) = encode_frame(frame, PROTOCOL_VERSION, &mut buf, MAX_FRAME_LEN) {
        panic!("bench frame does not encode: {error}");
    }
    buf
}

fn batch_size(encoded_len: usize) -> BatchSize {
    if encoded_len > LARGE_INPUT {
        BatchSize::LargeInput
    } else {
        BatchSize::SmallInput
    }
}

fn push_encode(c: &mut Criterion) {
    let mut group = c.benchmark_group("push_encode");
    for (label, payload_len) in PAYLOADS {
        let frame = push_frame(payload_len);
        let frame_len = encoded(&frame).len();
        group.throughput(Throughput::Bytes(frame_len as u64));
        group.bench_with_input(BenchmarkId::from_parameter(label), &frame, |b, frame| {
            let mut buf = BytesMut::with_capacity(frame_len);
            b.iter(|| {
                buf.clear();
                let result =
                    encode_frame(black_box(frame), PROTOCOL_VERSION, &mut buf, MAX_FRAME_LEN);
                black_box(&buf);
                result
            });
        });
    }
    group.finish();
}

fn push_decode(c: &mut Criterion) {
    let mut group = c.benchmark_group("push_decode");
    for (label, payload_len) in PAYLOADS {
        let frame = push_frame(payload_len);
        let bytes = encoded(&frame).freeze();
        // Sanity: the bench decodes what it encoded, fully.
        let mut check = BytesMut::from(&bytes[..]);
        match decode_frame(&mut check, MAX_FRAME_LEN) {
            Ok(Some(decoded)) if decoded == frame && check.is_empty() => {}
            other => panic!("bench frame does not round-trip: {other:?}"),
        }
        group.throughput(Throughput::Bytes(bytes.len() as u64));
        group.bench_with_input(BenchmarkId::from_parameter(label), &bytes, |b, bytes| {
            // The copy is made and dropped outside the timed routine.
            b.iter_batched_ref(
                || BytesMut::from(&bytes[..]),
                |src| decode_frame(black_box(src), MAX_FRAME_LEN),
                batch_size(bytes.len()),
            );
        });
    }
    group.finish();
}

/// Payloads for the trip: where copies start to dominate, up to the largest.
const TRIP_PAYLOADS: [(&str, usize); 4] = [
    ("64B", 64),
    ("16KiB", 16 * 1024),
    ("64KiB", 64 * 1024),
    ("1MiB", 1024 * 1024),
];

fn submit_bytes(payload_len: usize) -> Bytes {
    let Frame::Push(push) = push_frame(payload_len) else {
        unreachable!("push_frame builds a push");
    };
    let submit = Frame::from(Submit {
        correlation: 7,
        request: push.request,
        extras: RequestExtras::default(),
        wait_for_worker_ms: Some(2_000),
        reply_timeout_ms: None,
        routing: NodeRouting::Any,
    });
    encoded(&submit).freeze()
}

/// Decode a `Submit`, move its request into a `Push`, encode that: the bytes a producer sent
/// in, the bytes a worker gets out, with every copy the node makes on the way.
fn submit_to_push(c: &mut Criterion) {
    let mut group = c.benchmark_group("frame_trip");
    for (label, payload_len) in TRIP_PAYLOADS {
        let bytes = submit_bytes(payload_len);
        group.throughput(Throughput::Bytes(bytes.len() as u64));
        group.bench_with_input(BenchmarkId::from_parameter(label), &bytes, |b, bytes| {
            let mut out = BytesMut::with_capacity(bytes.len() + 64);
            b.iter_batched_ref(
                || BytesMut::from(&bytes[..]),
                |src| {
                    let Ok(Some(Frame::Submit(submit))) = decode_frame(src, MAX_FRAME_LEN) else {
                        panic!("bench submit does not decode");
                    };
                    out.clear();
                    let push = Frame::from(Push {
                        correlation: submit.correlation,
                        request: submit.request,
                        extras: submit.extras,
                    });
                    let result =
                        encode_frame(black_box(&push), PROTOCOL_VERSION, &mut out, MAX_FRAME_LEN);
                    black_box(&out);
                    result
                },
                batch_size(bytes.len()),
            );
        });
    }
    group.finish();
}

criterion_group!(frame, push_encode, push_decode, submit_to_push);
