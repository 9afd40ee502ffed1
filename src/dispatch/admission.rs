//! The checks every dispatch passes before it may take a worker slot, in one place.

use std::time::Duration;

use lintel_wire::{
    is_header_name, ExtrasRef, ExtrasView, NodeRouting, NotImplemented, RefusedDispatch,
    RefusedReason, RequestRef, RoutingRef,
};

use crate::implemented::IMPLEMENTED;

use super::options::Options;

/// Bytes a push or outcome frame may add around its input or result; names are bounded,
/// so this covers the envelope with room to spare.
pub const FRAME_OVERHEAD: usize = 16 * 1024;

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
    /// Most headers in one request.
    pub max_headers: usize,
    /// Most bytes of header names and values in one request.
    pub max_header_bytes: usize,
}

impl DispatchLimits {
    /// Largest input plus ids a dispatch may carry, and largest result an outcome carries.
    pub fn max_payload(&self) -> usize {
        self.max_frame_len.saturating_sub(FRAME_OVERHEAD)
    }
}

/// Highest priority a request may ask for, and the lowest.
const PRIORITIES: std::ops::RangeInclusive<u8> = 1..=5;

/// A fairness weight's bounds, in thousandths.
const WEIGHTS: std::ops::RangeInclusive<u32> = 1..=1_000_000;

/// Validates the whole request, its extras and its options against `limits`, then refuses
/// what the node does not implement.
///
/// # Errors
/// A refusal with reason [`RefusedReason::InvalidRequest`] naming the first rule broken, or
/// [`RefusedReason::Unsupported`] naming what the node does not implement.
pub(crate) fn validate(
    request: &RequestRef<'_>,
    extras: &ExtrasRef<'_>,
    options: &Options<'_>,
    limits: &DispatchLimits,
) -> Result<(), RefusedDispatch> {
    let invalid = |detail| RefusedDispatch {
        reason: RefusedReason::InvalidRequest,
        detail,
    };
    check(request, options, limits).map_err(invalid)?;
    // A version-2 request has no extras; they cost nothing to look at then.
    if extras.is_none() {
        return check_budget(request, 0, limits).map_err(invalid);
    }
    let extras = &extras.read();
    check_extras(extras, limits).map_err(invalid)?;
    let carried = extras.header_bytes() + extras.extension_bytes();
    check_budget(request, carried, limits).map_err(invalid)?;
    unsupported(extras).map_err(|detail| RefusedDispatch {
        reason: RefusedReason::Unsupported,
        detail,
    })
}

/// What the node does not implement, named: a critical extension of a tag it does not know,
/// or of a feature it does not implement.
fn unsupported(extras: &ExtrasView<'_>) -> Result<(), String> {
    match NotImplemented::critical(extras.extensions.iter(), IMPLEMENTED) {
        Some(missing) => Err(missing.to_string()),
        None => Ok(()),
    }
}

/// The bounds of a version-3 request's extras.
fn check_extras(extras: &ExtrasView<'_>, limits: &DispatchLimits) -> Result<(), String> {
    if let Err(err) = extras.heartbeat_timeout() {
        return Err(err.to_string());
    }
    let max = limits.max_name_len;
    if extras.headers.len() > limits.max_headers {
        return Err(format!(
            "{} headers, more than {}",
            extras.headers.len(),
            limits.max_headers
        ));
    }
    let header_bytes = extras.header_bytes();
    if header_bytes > limits.max_header_bytes {
        return Err(format!(
            "headers of {header_bytes} bytes, more than {}",
            limits.max_header_bytes
        ));
    }
    for header in extras.headers.iter() {
        if header.name.len() > max {
            return Err(format!("a header name is longer than {max} bytes"));
        }
        if !is_header_name(header.name) {
            return Err(format!(
                "header name {:?} is not lowercase token characters",
                clipped(header.name)
            ));
        }
    }
    if let Some(priority) = extras.priority.filter(|p| !PRIORITIES.contains(p)) {
        return Err(format!(
            "priority {priority} is outside {}..={}",
            PRIORITIES.start(),
            PRIORITIES.end()
        ));
    }
    if let Some(weight) = extras.fairness_weight.filter(|w| !WEIGHTS.contains(w)) {
        return Err(format!(
            "fairness weight {weight} is outside {}..={}",
            WEIGHTS.start(),
            WEIGHTS.end()
        ));
    }
    let names = [
        ("fairness key", extras.fairness_key),
        ("deployment", extras.deployment),
    ];
    for (what, name) in names {
        match name {
            Some("") => return Err(format!("empty {what}")),
            Some(name) if name.len() > max => {
                return Err(format!("{what} is longer than {max} bytes"))
            }
            _ => {}
        }
    }
    if extras.extensions.len() > limits.max_set_len {
        return Err(format!(
            "{} extensions, more than {}",
            extras.extensions.len(),
            limits.max_set_len
        ));
    }
    Ok(())
}

/// The start of a name a client chose, for a refusal's detail.
fn clipped(name: &str) -> &str {
    let end = (0..=name.len().min(64))
        .rev()
        .find(|at| name.is_char_boundary(*at))
        .unwrap_or(0);
    name.get(..end).unwrap_or_default()
}

/// A request's input and ids, with `extra` bytes of header names and values and extension
/// values, must fit a push with the frame's reserve to spare.
fn check_budget(
    request: &RequestRef<'_>,
    extra: usize,
    limits: &DispatchLimits,
) -> Result<(), String> {
    let max = limits.max_payload();
    let carried = request.input.len()
        + request.workflow_id.len()
        + request.run_id.map_or(0, str::len)
        + extra;
    if carried > max {
        return Err(format!(
            "input, ids, headers and extensions of {carried} bytes exceed the {max} a push can carry"
        ));
    }
    Ok(())
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
            max_headers: 2,
            max_header_bytes: 12,
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
        refusal(request, options).is_some()
    }

    fn refusal(request: &DispatchRequest, options: &DispatchOptions) -> Option<RefusedReason> {
        refusal_with(request, options.wire_extras(), options)
    }

    fn refusal_with(
        request: &DispatchRequest,
        extras: &lintel_wire::RequestExtras,
        options: &DispatchOptions,
    ) -> Option<RefusedReason> {
        validate(
            &request.view(),
            &extras.lend(),
            &Options::of(options),
            &limits(),
        )
        .err()
        .map(|refused| refused.reason)
    }

    #[test]
    fn headers_are_bounded_in_count_bytes_and_name() {
        let plain = DispatchOptions::default();
        let ok = plain.clone().header("tp", "x");
        assert_eq!(refusal(&request(), &ok), None);
        let invalid = Some(RefusedReason::InvalidRequest);
        let three = ok.clone().header("a", "b").header("c", "d");
        assert_eq!(
            refusal(&request(), &three),
            invalid,
            "more than max_headers"
        );
        let big = plain.clone().header("a", "b".repeat(12));
        assert_eq!(refusal(&request(), &big), invalid, "over max_header_bytes");
        let mut upper: lintel_wire::RequestExtras = lintel_wire::RequestExtras::default();
        upper.headers.push(lintel_wire::Header {
            name: "Trace".into(),
            value: String::new(),
        });
        assert_eq!(
            refusal_with(&request(), &upper, &plain),
            invalid,
            "not lowercase"
        );
        let long = plain.clone().header("n".repeat(9), "");
        assert_eq!(refusal(&request(), &long), invalid, "past max_name_len");
        let empty = plain.header("", "v");
        assert_eq!(refusal(&request(), &empty), invalid, "an empty name");
    }

    #[test]
    fn header_and_extension_bytes_count_against_the_input_budget() {
        let mut request = request();
        request.workflow_id = "w".repeat(8);
        request.input = bytes::Bytes::from(vec![0; 4]);
        let fits = DispatchOptions::default().header("a", "bcd");
        assert!(!refused(&request, &fits));
        let over = DispatchOptions::default().header("a", "bcde");
        assert!(refused(&request, &over));
        let extension = DispatchOptions::default().extension(1, false, vec![0; 5]);
        assert!(refused(&request, &extension));
    }

    #[test]
    fn scheduling_fields_and_a_deployment_are_checked() {
        let invalid = Some(RefusedReason::InvalidRequest);
        for (options, expected) in [
            (DispatchOptions::default().priority(0), invalid),
            (DispatchOptions::default().priority(6), invalid),
            (DispatchOptions::default().priority(1), None),
            (DispatchOptions::default().fairness_weight(0), invalid),
            (
                DispatchOptions::default().fairness_weight(1_000_001),
                invalid,
            ),
            (DispatchOptions::default().fairness_weight(1000), None),
            (DispatchOptions::default().fairness_key(""), invalid),
            (
                DispatchOptions::default().fairness_key("k".repeat(9)),
                invalid,
            ),
            (DispatchOptions::default().fairness_key("k"), None),
            (DispatchOptions::default().deployment(""), invalid),
            (
                DispatchOptions::default().deployment("d".repeat(9)),
                invalid,
            ),
            (DispatchOptions::default().deployment("v1"), None),
        ] {
            assert_eq!(
                refusal(&request(), &options),
                expected,
                "{:?}",
                options.wire_extras()
            );
        }
    }

    #[test]
    fn an_unknown_critical_extension_is_unsupported_and_a_plain_one_ignored() {
        let with = |critical| DispatchOptions::default().extension(77, critical, Vec::new());
        assert_eq!(refusal(&request(), &with(false)), None);
        assert_eq!(
            refusal(&request(), &with(true)),
            Some(RefusedReason::Unsupported)
        );
        let many = with(false)
            .extension(77, false, Vec::new())
            .extension(77, false, Vec::new());
        assert_eq!(
            refusal(&request(), &many),
            Some(RefusedReason::InvalidRequest),
            "more than max_set_len"
        );
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
