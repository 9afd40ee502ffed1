//! The SDK's builders from the wire's structs tests already write: a [`Dispatch`] from a
//! `DispatchRequest` and a worker config from a `Register`, field by field through the public
//! builders, so a test states a request or a registration once and sends it either as raw
//! frames or through the SDK.

use std::time::{Duration, UNIX_EPOCH};

use lintel::sdk::{Dispatch, WorkerConfig, WorkerConfigBuilder};
use lintel::wire::{DispatchRequest, Register};

/// `request` as a [`Dispatch`], every field through its builder method.
pub fn dispatch_of(request: DispatchRequest) -> Dispatch {
    let DispatchRequest {
        namespace,
        task_queue,
        activity_type,
        node,
        workflow_id,
        ordinal,
        run_id,
        attempt,
        input,
        deadline_unix_ms,
    } = request;
    let mut dispatch = Dispatch::new(namespace, activity_type)
        .task_queue(task_queue)
        .workflow(workflow_id, ordinal)
        .attempt(attempt)
        .input(input);
    if let Some(node) = node {
        dispatch = dispatch.node(node);
    }
    if let Some(run_id) = run_id {
        dispatch = dispatch.run_id(run_id);
    }
    if let Some(ms) = deadline_unix_ms {
        dispatch = dispatch.deadline(UNIX_EPOCH + Duration::from_millis(ms));
    }
    dispatch
}

/// A builder for a worker at `addr` registering `register`, every field through its builder
/// method (its client name is its identity, as the builder makes it).
pub fn worker_builder(addr: impl Into<String>, register: Register) -> WorkerConfigBuilder {
    let Register {
        namespaces,
        task_queue,
        node,
        activity_types,
        identity,
        max_concurrency,
        deployment,
        instance_id,
        extensions,
    } = register;
    let mut builder = WorkerConfig::builder()
        .node(addr)
        .namespaces(namespaces)
        .task_queue(task_queue)
        .activities(activity_types)
        .identity(identity)
        .concurrency(max_concurrency);
    if let Some(label) = node {
        builder = builder.label(label);
    }
    if let Some(deployment) = deployment {
        builder = builder.deployment(deployment);
    }
    if let Some(instance) = instance_id {
        builder = builder.instance_id(instance);
    }
    for extension in extensions {
        builder = builder.extension(extension.tag, extension.critical, extension.value);
    }
    builder
}

/// The config of a worker at `addr` registering `register`; see [`worker_builder`].
#[track_caller]
pub fn worker_config(addr: impl Into<String>, register: Register) -> WorkerConfig {
    worker_builder(addr, register)
        .build()
        .expect("a registration the builder takes")
}
