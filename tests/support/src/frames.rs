//! Builders for the frames and requests tests send.

use bytes::Bytes;
use lintel::wire::{
    feature, ActivityOutcome, DispatchRequest, DispatchResponse, Frame, Hello, NodeRouting, Push,
    Register, Reply, Role, Submit,
};

/// What a node lists in its `Welcome` and `PeerHello` of version 3, in order (version 4 adds
/// what it implements of version 4's features).
pub const VERSION_3_FEATURES: [&str; 10] = [
    feature::HEADERS,
    feature::PRIORITY,
    feature::FAIRNESS,
    feature::DEPLOYMENTS,
    feature::STATUS_DOCUMENT,
    feature::PROBATION,
    feature::FAREWELL,
    feature::EVENTS,
    feature::POOL_SETTINGS,
    feature::RELAY_RESUME,
];

/// A handshake as `role` at protocol version 1: the raw clients are version-1 clients
/// written from `PROTOCOL.md`, which a version-2 node keeps serving unchanged.
pub fn hello(role: Role) -> Hello {
    hello_at(role, 1)
}

/// A handshake as `role` speaking versions up to `max_version`.
pub fn hello_at(role: Role, max_version: u16) -> Hello {
    Hello {
        min_version: 1,
        max_version,
        role,
        name: "test".into(),
        auth_token: None,
    }
}

/// A registration for `namespace` and `activity` with capacity `max_concurrency`, as
/// `test-worker`.
pub fn register(namespace: &str, activity: &str, max_concurrency: u32) -> Register {
    plain(namespace, activity, max_concurrency, "test-worker")
}

/// A request for `namespace` / default task queue / `activity` carrying `input`.
pub fn request(namespace: &str, activity: &str, input: &str) -> DispatchRequest {
    DispatchRequest {
        namespace: namespace.into(),
        task_queue: String::new(),
        activity_type: activity.into(),
        node: None,
        workflow_id: "wf-1".into(),
        ordinal: 1,
        run_id: Some("run-1".into()),
        attempt: 1,
        input: Bytes::copy_from_slice(input.as_bytes()),
        deadline_unix_ms: None,
    }
}

/// A registration with every field given.
pub fn registration(
    namespaces: &[&str],
    task_queue: &str,
    node: Option<&str>,
    activities: &[&str],
    max_concurrency: u32,
    identity: &str,
) -> Register {
    Register {
        namespaces: namespaces.iter().map(|ns| (*ns).to_owned()).collect(),
        task_queue: task_queue.to_owned(),
        node: node.map(str::to_owned),
        activity_types: activities.iter().map(|a| (*a).to_owned()).collect(),
        identity: identity.to_owned(),
        max_concurrency,
        ..Default::default()
    }
}

/// A worker on the default task queue with no node.
pub fn plain(namespace: &str, activity: &str, max_concurrency: u32, identity: &str) -> Register {
    registration(
        &[namespace],
        "",
        None,
        &[activity],
        max_concurrency,
        identity,
    )
}

/// A worker on the default task queue announcing `node`.
pub fn on_node(namespace: &str, activity: &str, node: &str, cap: u32, identity: &str) -> Register {
    registration(&[namespace], "", Some(node), &[activity], cap, identity)
}

/// An empty request for `namespace` / `task_queue` / `activity`.
pub fn request_in(namespace: &str, task_queue: &str, activity: &str) -> DispatchRequest {
    DispatchRequest {
        task_queue: task_queue.to_owned(),
        ..request(namespace, activity, "")
    }
}

/// A successful response to `push` carrying `payload`.
pub fn response_to(push: &Push, payload: &str) -> DispatchResponse {
    DispatchResponse {
        workflow_id: push.request.workflow_id.clone(),
        ordinal: push.request.ordinal,
        run_id: push.request.run_id.clone(),
        outcome: ActivityOutcome::Success(Bytes::copy_from_slice(payload.as_bytes())),
    }
}

/// A `Reply` to `push` carrying `payload`.
pub fn reply_frame(push: &Push, payload: &str) -> Frame {
    Frame::Reply(Reply {
        correlation: push.correlation,
        response: response_to(push, payload),
    })
}

/// A submission routed anywhere, waiting `wait_ms` for a worker, with the node's reply timeout.
pub fn submit(correlation: u64, request: DispatchRequest, wait_ms: Option<u64>) -> Frame {
    Frame::from(Submit {
        correlation,
        request,
        wait_for_worker_ms: wait_ms,
        reply_timeout_ms: None,
        routing: NodeRouting::Any,
        extras: Default::default(),
    })
}

/// A submission for `ns` / `act` carrying `workflow_id` as input, with its own reply timeout.
pub fn submit_timing_out(correlation: u64, workflow_id: &str, reply_timeout_ms: u64) -> Frame {
    Frame::from(Submit {
        correlation,
        request: request("ns", "act", workflow_id),
        wait_for_worker_ms: None,
        reply_timeout_ms: Some(reply_timeout_ms),
        routing: NodeRouting::Any,
        extras: Default::default(),
    })
}
