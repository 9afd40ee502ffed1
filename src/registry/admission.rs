//! Validation of a worker's registration: the checks every admission passes, in one place.

use std::collections::BTreeSet;

use lintel_wire::{NotImplemented, Refusal, RefusalCode, Register};

use crate::implemented::IMPLEMENTED;

/// Task queue of a registration or request that names none.
pub const DEFAULT_TASK_QUEUE: &str = "default";

/// Bounds on what a registration may state.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AdmissionLimits {
    /// Longest name (namespace, task queue, node, activity type, identity), in bytes.
    pub max_name_len: usize,
    /// Most namespaces or activity types in one registration.
    pub max_set_len: usize,
}

impl Default for AdmissionLimits {
    fn default() -> Self {
        Self {
            max_name_len: 256,
            max_set_len: 64,
        }
    }
}

/// A registration that passed validation: sets deduplicated, task queue and node normalized.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Registration {
    pub namespaces: BTreeSet<String>,
    pub task_queue: String,
    pub node: Option<String>,
    pub activity_types: BTreeSet<String>,
    pub identity: String,
    pub max_concurrency: u32,
    /// The deployment the worker runs, as its registration stated it.
    pub deployment: Option<String>,
    /// The worker's instance id, as its registration stated it.
    pub instance_id: Option<String>,
}

/// Validates `register` against `limits`, whichever kind it came as.
///
/// # Errors
/// A [`Refusal`] naming the first rule broken.
pub fn validate(register: &Register, limits: AdmissionLimits) -> Result<Registration, Refusal> {
    let max_concurrency = validate_capacity(register.max_concurrency)?;
    if register.namespaces.is_empty() {
        return Err(refusal(RefusalCode::EmptyNamespaces, "no namespace given"));
    }
    if register.activity_types.is_empty() {
        return Err(refusal(
            RefusalCode::EmptyActivityTypes,
            "no activity type given",
        ));
    }
    let namespaces = validate_set("namespace", &register.namespaces, limits)?;
    let activity_types = validate_set("activity type", &register.activity_types, limits)?;
    let task_queue = normalize_task_queue(&register.task_queue).to_owned();
    check_name("task queue", &task_queue, limits.max_name_len)?;
    let node = normalize_node(register.node.as_deref()).map(str::to_owned);
    if let Some(node) = &node {
        check_name("node", node, limits.max_name_len)?;
    }
    if register.identity.len() > limits.max_name_len {
        return Err(refusal(
            RefusalCode::InvalidField,
            format!("identity is longer than {} bytes", limits.max_name_len),
        ));
    }
    for (what, name) in [
        ("deployment", &register.deployment),
        ("instance id", &register.instance_id),
    ] {
        if let Some(name) = name {
            check_name(what, name, limits.max_name_len)?;
        }
    }
    if register.extensions.len() > limits.max_set_len {
        return Err(refusal(
            RefusalCode::LimitExceeded,
            format!("more than {} extensions", limits.max_set_len),
        ));
    }
    if let Some(missing) = NotImplemented::critical(&register.extensions, IMPLEMENTED) {
        return Err(refusal(RefusalCode::Unsupported, missing.to_string()));
    }
    Ok(Registration {
        namespaces,
        task_queue,
        node,
        activity_types,
        identity: register.identity.clone(),
        max_concurrency,
        deployment: register.deployment.clone(),
        instance_id: register.instance_id.clone(),
    })
}

/// The one place a stated capacity is checked: zero is refused.
///
/// # Errors
/// [`RefusalCode::ZeroCapacity`] for zero.
pub fn validate_capacity(max_concurrency: u32) -> Result<u32, Refusal> {
    if max_concurrency == 0 {
        return Err(refusal(
            RefusalCode::ZeroCapacity,
            "max_concurrency must be at least 1",
        ));
    }
    Ok(max_concurrency)
}

/// Empty means [`DEFAULT_TASK_QUEUE`].
pub fn normalize_task_queue(task_queue: &str) -> &str {
    if task_queue.is_empty() {
        DEFAULT_TASK_QUEUE
    } else {
        task_queue
    }
}

/// Empty means no node.
pub fn normalize_node(node: Option<&str>) -> Option<&str> {
    node.filter(|node| !node.is_empty())
}

fn validate_set(
    what: &str,
    items: &[String],
    limits: AdmissionLimits,
) -> Result<BTreeSet<String>, Refusal> {
    if items.len() > limits.max_set_len {
        return Err(refusal(
            RefusalCode::LimitExceeded,
            format!("more than {} {what}s", limits.max_set_len),
        ));
    }
    let mut set = BTreeSet::new();
    for item in items {
        check_name(what, item, limits.max_name_len)?;
        set.insert(item.clone());
    }
    Ok(set)
}

fn check_name(what: &str, name: &str, max_len: usize) -> Result<(), Refusal> {
    if name.is_empty() {
        return Err(refusal(RefusalCode::InvalidField, format!("empty {what}")));
    }
    if name.len() > max_len {
        return Err(refusal(
            RefusalCode::InvalidField,
            format!("{what} is longer than {max_len} bytes"),
        ));
    }
    Ok(())
}

fn refusal(code: RefusalCode, reason: impl Into<String>) -> Refusal {
    Refusal {
        code,
        reason: reason.into(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn register() -> Register {
        Register {
            namespaces: vec!["ns".into(), "ns".into()],
            task_queue: String::new(),
            node: Some(String::new()),
            activity_types: vec!["echo".into()],
            identity: "w".into(),
            max_concurrency: 2,
            ..Default::default()
        }
    }

    #[test]
    fn empty_task_queue_and_node_are_normalized_and_sets_deduplicated() {
        let registration = validate(&register(), AdmissionLimits::default()).unwrap();
        assert_eq!(registration.task_queue, "default");
        assert_eq!(registration.node, None);
        assert_eq!(registration.namespaces.len(), 1);
    }

    fn extension(critical: bool) -> lintel_wire::Extension {
        lintel_wire::Extension {
            tag: 9,
            critical,
            value: bytes::Bytes::new(),
        }
    }

    #[test]
    fn a_deployment_identity_is_kept_and_an_unknown_plain_extension_ignored() {
        let mut r = register();
        r.deployment = Some("v42".into());
        r.instance_id = Some("pod-1".into());
        r.extensions = vec![extension(false)];
        let registration = validate(&r, AdmissionLimits::default()).unwrap();
        assert_eq!(registration.deployment.as_deref(), Some("v42"));
        assert_eq!(registration.instance_id.as_deref(), Some("pod-1"));
    }

    #[test]
    fn each_broken_rule_has_its_code() {
        let limits = AdmissionLimits {
            max_name_len: 8,
            max_set_len: 2,
        };
        type Breakage = fn(&mut Register);
        let cases: [(Breakage, RefusalCode); 10] = [
            (|r| r.max_concurrency = 0, RefusalCode::ZeroCapacity),
            (|r| r.namespaces.clear(), RefusalCode::EmptyNamespaces),
            (
                |r| r.activity_types.clear(),
                RefusalCode::EmptyActivityTypes,
            ),
            (
                |r| r.namespaces = vec![String::new()],
                RefusalCode::InvalidField,
            ),
            (|r| r.task_queue = "x".repeat(9), RefusalCode::InvalidField),
            (
                |r| r.activity_types = vec!["a".into(), "b".into(), "c".into()],
                RefusalCode::LimitExceeded,
            ),
            (
                |r| r.deployment = Some(String::new()),
                RefusalCode::InvalidField,
            ),
            (
                |r| r.instance_id = Some("i".repeat(9)),
                RefusalCode::InvalidField,
            ),
            (
                |r| r.extensions = vec![extension(false); 3],
                RefusalCode::LimitExceeded,
            ),
            (
                |r| r.extensions = vec![extension(false), extension(true)],
                RefusalCode::Unsupported,
            ),
        ];
        for (breakage, code) in cases {
            let mut r = register();
            breakage(&mut r);
            assert_eq!(validate(&r, limits).map_err(|e| e.code), Err(code));
        }
    }
}
