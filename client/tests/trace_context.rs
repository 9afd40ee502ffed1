//! A trace context goes from a producer to the worker that runs its dispatch, through a real
//! node on 127.0.0.1: attached with `DispatchOptions::trace_context` and read with
//! `TraceContext::from_headers`, and with the `opentelemetry` feature injected from a
//! `Context` and extracted into one through the W3C propagator.

use std::time::Duration;

use bytes::Bytes;
use lintel_client::trace::{TraceContext, TraceParent};
use lintel_client::{
    handler_fn_with, ActivityOutcome, Client, ClientConfig, Dispatch, DispatchOptions,
    DispatchResult, Extras, Request, Worker, WorkerConfig, WorkerHandle,
};

const WAIT: Duration = Duration::from_secs(10);
const PARENT: &str = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";

/// A node on loopback, its address.
async fn node() -> String {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let addr = listener.local_addr().expect("address").to_string();
    let node = lintel::Node::new(lintel::NodeConfig::default()).expect("node");
    tokio::spawn(async move { node.serve(listener, std::future::pending()).await });
    addr
}

/// A worker at `addr` replying with what `reply` makes of each request's extras.
async fn worker(addr: &str, reply: fn(&Extras) -> String) -> WorkerHandle {
    let config = WorkerConfig::builder()
        .node(addr)
        .namespace("ns")
        .activity("traced")
        .identity("tracing-worker")
        .concurrency(4)
        .build()
        .expect("a worker config");
    let handler = handler_fn_with(move |_request: Request, extras: Extras| async move {
        ActivityOutcome::Success(Bytes::from(reply(&extras)))
    });
    let worker = Worker::spawn(config, handler);
    worker.wait_registered(WAIT).await.expect("registered");
    worker
}

/// Dispatches through a producer at `addr` with `options`; the worker's reply as text.
async fn dispatch(addr: &str, options: &DispatchOptions) -> String {
    let client = Client::connect(addr, ClientConfig::default())
        .await
        .expect("producer connects");
    let dispatch = Dispatch::new("ns", "traced").workflow("wf", 1);
    let result = tokio::time::timeout(WAIT, client.dispatch(&dispatch, options))
        .await
        .expect("in time")
        .expect("connection");
    match result {
        DispatchResult::Completed(response) => match response.outcome {
            ActivityOutcome::Success(bytes) => String::from_utf8_lossy(&bytes).into_owned(),
            other => panic!("activity failed: {other:?}"),
        },
        other => panic!("not completed: {other:?}"),
    }
}

/// The trace context the worker read, as `traceparent|tracestate`.
fn read_back(extras: &Extras) -> String {
    match TraceContext::from_headers(&extras.headers) {
        Ok(Some(context)) => format!("{}|{}", context.parent, context.state.unwrap_or_default()),
        Ok(None) => "none".into(),
        Err(err) => format!("invalid: {err}"),
    }
}

#[tokio::test]
async fn a_trace_context_attached_by_a_producer_is_read_by_the_worker() {
    let addr = node().await;
    let _worker = worker(&addr, read_back).await;
    let context = TraceContext {
        parent: PARENT.parse::<TraceParent>().expect("valid"),
        state: Some("congo=t61rcWkgMzE,rojo=00f067aa0ba902b7".into()),
    };
    let options = DispatchOptions::default().trace_context(&context);
    assert_eq!(
        dispatch(&addr, &options).await,
        format!("{PARENT}|congo=t61rcWkgMzE,rojo=00f067aa0ba902b7")
    );
    assert_eq!(dispatch(&addr, &DispatchOptions::default()).await, "none");
}

#[cfg(feature = "opentelemetry")]
mod opentelemetry_feature {
    use lintel_client::trace::otel;
    use opentelemetry::trace::{
        SpanContext, SpanId, TraceContextExt, TraceFlags, TraceId, TraceState,
    };
    use opentelemetry::Context;
    use opentelemetry_sdk::propagation::TraceContextPropagator;

    use super::*;

    /// The span context the worker extracted, as `trace id/span id/sampled/remote`.
    fn extracted(extras: &Extras) -> String {
        let context = otel::extract_with(&TraceContextPropagator::new(), extras);
        let span = context.span();
        let span = span.span_context();
        format!(
            "{}/{}/{}/{}",
            span.trace_id(),
            span.span_id(),
            span.is_sampled(),
            span.is_remote()
        )
    }

    #[tokio::test]
    async fn a_context_injected_at_the_producer_is_extracted_at_the_worker() {
        let addr = node().await;
        let _worker = worker(&addr, extracted).await;
        let span = SpanContext::new(
            TraceId::from_hex("4bf92f3577b34da6a3ce929d0e0e4736").expect("hex"),
            SpanId::from_hex("00f067aa0ba902b7").expect("hex"),
            TraceFlags::SAMPLED,
            true,
            TraceState::default(),
        );
        let context = Context::new().with_remote_span_context(span);
        let options = otel::inject_with(
            &TraceContextPropagator::new(),
            DispatchOptions::default(),
            &context,
        );
        // What the propagator wrote is the W3C header the SDK's own helpers read.
        let written = TraceContext::from_headers(&options.wire_extras().headers)
            .expect("valid")
            .expect("present");
        assert_eq!(written.parent.to_string(), PARENT);
        assert_eq!(
            dispatch(&addr, &options).await,
            "4bf92f3577b34da6a3ce929d0e0e4736/00f067aa0ba902b7/true/true"
        );
    }

    #[tokio::test]
    async fn the_global_propagator_carries_the_current_context() {
        opentelemetry::global::set_text_map_propagator(TraceContextPropagator::new());
        let addr = node().await;
        let _worker = worker(&addr, read_back).await;
        let span = SpanContext::new(
            TraceId::from_hex("0af7651916cd43dd8448eb211c80319c").expect("hex"),
            SpanId::from_hex("b7ad6b7169203331").expect("hex"),
            TraceFlags::default(),
            true,
            TraceState::default(),
        );
        let _attached = Context::new().with_remote_span_context(span).attach();
        let options = otel::inject_current(DispatchOptions::default());
        assert_eq!(
            dispatch(&addr, &options).await,
            "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-00|"
        );
    }
}
