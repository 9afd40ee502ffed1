//! Channel names: encode on the plain and escaping paths, with and without a node; parse.

use criterion::{black_box, criterion_group, Criterion};
use lintel_wire::channel::{dispatch_channel_name, parse_channel_name};

/// No `%` or `.` in any segment: each segment is copied as is.
const PLAIN: (&str, &str, &str) = ("remote", "gpu-render", "box-7");

/// Every segment holds `.` and `%`: each is escaped.
const ESCAPED: (&str, &str, &str) = ("acme.prod", "gpu.render%hi", "rack.2%a.box-7");

fn channel_encode(c: &mut Criterion) {
    let mut group = c.benchmark_group("channel_encode");
    for (label, (namespace, task_queue, node)) in [("plain", PLAIN), ("escaped", ESCAPED)] {
        group.bench_function(label, |b| {
            b.iter(|| {
                dispatch_channel_name(black_box(namespace), black_box(task_queue), black_box(None))
            });
        });
        group.bench_function(format!("{label}_node"), |b| {
            b.iter(|| {
                dispatch_channel_name(
                    black_box(namespace),
                    black_box(task_queue),
                    black_box(Some(node)),
                )
            });
        });
    }
    group.finish();
}

fn channel_parse(c: &mut Criterion) {
    let mut group = c.benchmark_group("channel_parse");
    for (label, (namespace, task_queue, node)) in [("plain", PLAIN), ("escaped", ESCAPED)] {
        let name = dispatch_channel_name(namespace, task_queue, Some(node));
        // Sanity: the bench parses a canonical name back to its segments.
        match parse_channel_name(&name) {
            Ok(address)
                if address.namespace == namespace
                    && address.task_queue == task_queue
                    && address.node.as_deref() == Some(node) => {}
            other => panic!("bench name {name} does not round-trip: {other:?}"),
        }
        group.bench_function(label, |b| {
            b.iter(|| parse_channel_name(black_box(&name)));
        });
    }
    group.finish();
}

criterion_group!(channel, channel_encode, channel_parse);
