//! The checks every dispatch passes before it may take a worker slot, in one place.

use std::time::Duration;

use lintel_wire::{NodeRouting, RefusedDispatch, RefusedReason, RequestRef, RoutingRef};

use super::options::Options;

/// Bytes a push or outcome frame may add around its input or result; names are bounded,
/// so this covers the envelope with room to spare.
pub(crate) const FRAME_OVERHEAD: usize = 16 * 1024;

/// Longest reply timeout or wait for a worker a dispatch may ask for: 7 days.
pub const MAX_TIMEOUT: Duration = Duration::from_secs(7 * 24 * 3600);

/// Bounds the node applies to every dispatch, whatever its source.
#[derive(Debug, Clone, Copy)]
pub struct DispatchLimits {
    /// Reply timeout when a dispatch states none.
    pub default_reply_timeout: Duration,
    /// Longest namespace, task queue, activity type or node name, in bytes.
    pub max_name_len: usize,
    /// Most nodes in a `Prefer` or `Require` list.
    pub max_set_len: usize,
    /// Largest frame the node sends; a request must fit a push frame.
    pub max_frame_len: usize,
    /// Most dispatches running at once; more are refused with `TooManyInFlight`.
    pub max_active: usize,
}

impl DispatchLimits {
    /// Largest input plus ids a dispatch may carry, and largest result an outcome carries.
    pub fn max_payload(&self) -> usize {
        self.max_frame_len.saturating_sub(FRAME_OVERHEAD)
    }
}

/// Validates the whole request and its options against `limits`.
///
/// # Errors
/// A refusal with reason [`RefusedReason::InvalidRequest`] naming the first rule broken.
pub(crate) fn validate(
    request: &RequestRef<'_>,
    options: &Options<'_>,
    limits: &DispatchLimits,
) -> Result<(), RefusedDispatch> {
    check(request, options, limits).map_err(|detail| RefusedDispatch {
        reason: RefusedReason::InvalidRequest,
        detail,
    })
}

fn check(
    request: &RequestRef<'_>,
    options: &Options<'_>,
    limits: &DispatchLimits,
) -> Result<(), String> {
    if request.namespace.is_empty() {
        return Err("empty namespace".into());
    }
    if request.activity_type.is_empty() {
        return Err("empty activity type".into());
    }
    let max = limits.max_name_len;
    let names = [
        ("namespace", request.namespace),
        ("task queue", request.task_queue),
        ("activity type", request.activity_type),
        ("node", request.node.unwrap_or_default()),
    ];
    for (what, name) in names {
        if name.len() > max {
            return Err(format!("{what} is longer than {max} bytes"));
        }
    }
    check_routing(&options.routing, limits)?;
    let timeouts = [
        ("reply timeout", options.reply_timeout),
        ("wait for a worker", options.wait_for_worker),
    ];
    for (what, timeout) in timeouts {
        if timeout.is_some_and(|timeout| timeout > MAX_TIMEOUT) {
            return Err(format!(
                "{what} is longer than {} ms",
                MAX_TIMEOUT.as_millis()
            ));
        }
    }
    let max = limits.max_payload();
    let carried =
        request.input.len() + request.workflow_id.len() + request.run_id.map_or(0, str::len);
    if carried > max {
        return Err(format!(
            "input and ids of {carried} bytes exceed the {max} a push can carry"
        ));
    }
    Ok(())
}

/// Node lists are bounded like a registration's sets, so selection never scans a flood.
fn check_routing(routing: &RoutingRef<'_>, limits: &DispatchLimits) -> Result<(), String> {
    let max = limits.max_name_len;
    let (what, nodes) = match routing {
        NodeRouting::Any => return Ok(()),
        NodeRouting::Pin(node) if node.len() > max => {
            return Err(format!("pinned node is longer than {max} bytes"));
        }
        NodeRouting::Pin(_) => return Ok(()),
        NodeRouting::Prefer(nodes) => ("prefer", *nodes),
        NodeRouting::Require(nodes) => ("require", *nodes),
    };
    if nodes.len() > limits.max_set_len {
        return Err(format!(
            "{what} lists {} nodes, more than {}",
            nodes.len(),
            limits.max_set_len
        ));
    }
    for node in nodes.iter() {
        if node.is_empty() {
            return Err(format!("{what} lists an empty node"));
        }
        if node.len() > max {
            return Err(format!("{what} lists a node longer than {max} bytes"));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use lintel_client::DispatchOptions;
    use lintel_wire::DispatchRequest;

    fn limits() -> DispatchLimits {
        DispatchLimits {
            default_reply_timeout: Duration::from_secs(1),
            max_name_len: 8,
            max_set_len: 2,
            max_frame_len: FRAME_OVERHEAD + 16,
            max_active: 10,
        }
    }

    fn request() -> DispatchRequest {
        DispatchRequest {
            namespace: "ns".into(),
            task_queue: String::new(),
            activity_type: "echo".into(),
            node: None,
            workflow_id: "wf".into(),
            ordinal: 1,
            run_id: None,
            attempt: 1,
            input: bytes::Bytes::new(),
            deadline_unix_ms: None,
        }
    }

    fn refused(request: &DispatchRequest, options: &DispatchOptions) -> bool {
        validate(&request.view(), &Options::of(options), &limits()).is_err()
    }

    #[test]
    fn routing_lists_are_bounded_in_length_and_name_size() {
        let ok = DispatchOptions::default().require(["a", "b"]);
        assert!(!refused(&request(), &ok));
        let long = DispatchOptions::default().prefer(["a", "b", "c"]);
        assert!(refused(&request(), &long));
        let big_name = DispatchOptions::default().require(["a".repeat(9)]);
        assert!(refused(&request(), &big_name));
        let empty = DispatchOptions::default().prefer([""]);
        assert!(refused(&request(), &empty));
        let pin = DispatchOptions::default().pin("a".repeat(9));
        assert!(refused(&request(), &pin));
    }

    #[test]
    fn timeouts_past_the_bound_are_refused() {
        let wait =
            DispatchOptions::default().wait_for_worker(MAX_TIMEOUT + Duration::from_millis(1));
        assert!(refused(&request(), &wait));
        let reply = DispatchOptions::default().reply_timeout(Duration::from_millis(u64::MAX));
        assert!(refused(&request(), &reply));
        let fine = DispatchOptions::default().reply_timeout(MAX_TIMEOUT);
        assert!(!refused(&request(), &fine));
    }

    #[test]
    fn the_input_and_ids_must_fit_a_push() {
        let mut request = request();
        request.workflow_id = "w".repeat(8);
        request.input = bytes::Bytes::from(vec![0; 8]);
        assert!(!refused(&request, &DispatchOptions::default()));
        request.input = bytes::Bytes::from(vec![0; 9]);
        assert!(refused(&request, &DispatchOptions::default()));
    }
}
