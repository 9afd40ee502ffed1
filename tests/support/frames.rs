//! Builders for the frames and requests tests send.

use bytes::Bytes;
use lintel::wire::{DispatchRequest, Hello, Register, Role, PROTOCOL_VERSION};

pub fn hello(role: Role) -> Hello {
    Hello {
        min_version: 1,
        max_version: PROTOCOL_VERSION,
        role,
        name: "test".into(),
        auth_token: None,
    }
}

/// A registration for `namespace` and `activity` with capacity `max_concurrency`.
pub fn register(namespace: &str, activity: &str, max_concurrency: u32) -> Register {
    Register {
        namespaces: vec![namespace.into()],
        task_queue: String::new(),
        node: None,
        activity_types: vec![activity.into()],
        identity: "test-worker".into(),
        max_concurrency,
    }
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
