//! In-process dispatches on a [`TestNode`] and what to read from their results.

use std::collections::BTreeMap;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::Poll;

use lintel::dispatch::DispatchOptions;
use lintel::wire::{ActivityOutcome, Census, DispatchRequest, DispatchResponse, DispatchResult};
use tokio::task::JoinHandle;

use super::node::{within, TestNode};

/// The payload of a completed dispatch: the name of the worker that served it, for auto workers.
#[track_caller]
pub fn served_by(result: &DispatchResult) -> String {
    match result {
        DispatchResult::Completed(DispatchResponse {
            outcome: ActivityOutcome::Success(bytes),
            ..
        }) => String::from_utf8(bytes.to_vec()).expect("utf-8 payload"),
        other => panic!("expected a successful completion, got {other:?}"),
    }
}

/// The census of a no-worker outcome.
#[track_caller]
pub fn no_worker(result: DispatchResult) -> Census {
    match result {
        DispatchResult::NoWorker(census) => census,
        other => panic!("expected NoWorker, got {other:?}"),
    }
}

pub async fn dispatch(
    node: &TestNode,
    request: DispatchRequest,
    options: DispatchOptions,
) -> DispatchResult {
    within(
        "a dispatch outcome",
        node.node.dispatcher().dispatch(request, &options),
    )
    .await
}

pub fn spawn_dispatch(
    node: &TestNode,
    request: DispatchRequest,
    options: DispatchOptions,
) -> JoinHandle<DispatchResult> {
    let dispatcher = Arc::clone(node.node.dispatcher());
    tokio::spawn(async move { dispatcher.dispatch(request, &options).await })
}

pub async fn outcome_of(handle: JoinHandle<DispatchResult>) -> DispatchResult {
    within("a spawned dispatch", handle)
        .await
        .expect("dispatch task")
}

/// Polls `future` once from the current task, which stays its waker.
pub async fn poll_once<F: Future + Unpin>(future: &mut F) -> Poll<F::Output> {
    std::future::poll_fn(|cx| Poll::Ready(Pin::new(&mut *future).poll(cx))).await
}

/// Dispatches counted as waiting for a worker, across all addresses.
pub fn parked(node: &TestNode) -> u32 {
    node.registry().snapshot().1.iter().map(|w| w.waiting).sum()
}

pub fn count(names: impl IntoIterator<Item = String>) -> BTreeMap<String, usize> {
    let mut counts = BTreeMap::new();
    for name in names {
        *counts.entry(name).or_insert(0) += 1;
    }
    counts
}

pub fn counts(pairs: &[(&str, usize)]) -> BTreeMap<String, usize> {
    pairs.iter().map(|(k, v)| ((*k).to_owned(), *v)).collect()
}
