//! The hot frame bodies written field by field: per-dispatch frames call no serializer.

use bytes::BufMut;

use crate::flavor::BytesMutFlavor;
use crate::frame::{Frame, FrameKind};
use crate::frame_ref::FrameRef;
use crate::message::{
    ActivityOutcome, DispatchRequest, DispatchResponse, DispatchResult, NodeRouting,
};

/// Writes the body of `frame` (its kind, then its fields) and returns true, or returns false
/// having written nothing when `frame` has no writer here.
///
/// # Errors
/// Serde's, from the parts still written through it: a result other than `Completed`, a
/// routing other than to any node.
pub(crate) fn write_body(
    frame: FrameRef<'_>,
    out: &mut BytesMutFlavor<'_>,
) -> postcard::Result<bool> {
    // A built push, relay or peer outcome takes the same path as its borrowed form.
    match frame.unfolded() {
        FrameRef::Push {
            correlation,
            request,
        } => {
            write_head(out, FrameKind::Push, correlation);
            write_request(out, request);
        }
        FrameRef::Relay {
            correlation,
            request,
            routing,
            reply_timeout_ms,
        } => {
            write_head(out, FrameKind::Relay, correlation);
            write_request(out, request);
            write_routing(out, routing)?;
            write_varint(out, reply_timeout_ms);
        }
        FrameRef::ServedOutcome {
            correlation,
            served_by,
            result,
        } => {
            write_head(out, FrameKind::ServedOutcome, correlation);
            write_str(out, served_by);
            write_result(out, result)?;
        }
        FrameRef::RelayOutcome {
            correlation,
            result,
        } => {
            write_head(out, FrameKind::RelayOutcome, correlation);
            write_result(out, result)?;
        }
        FrameRef::Frame(Frame::Submit(submit)) => {
            write_head(out, FrameKind::Submit, submit.correlation);
            write_request(out, &submit.request);
            write_opt_varint(out, submit.wait_for_worker_ms);
            write_opt_varint(out, submit.reply_timeout_ms);
            write_routing(out, &submit.routing)?;
        }
        FrameRef::Frame(Frame::Reply(reply)) => {
            write_head(out, FrameKind::Reply, reply.correlation);
            write_response(out, &reply.response);
        }
        FrameRef::Frame(Frame::Outcome(outcome)) => {
            write_head(out, FrameKind::Outcome, outcome.correlation);
            write_result(out, &outcome.result)?;
        }
        FrameRef::Frame(_) => return Ok(false),
    }
    Ok(true)
}

/// The frame's kind, then the correlation id every hot body starts with.
fn write_head(out: &mut BytesMutFlavor<'_>, kind: FrameKind, correlation: u64) {
    write_varint(out, u64::from(kind.discriminant()));
    write_varint(out, correlation);
}

fn write_request(out: &mut BytesMutFlavor<'_>, request: &DispatchRequest) {
    write_str(out, &request.namespace);
    write_str(out, &request.task_queue);
    write_str(out, &request.activity_type);
    write_opt_str(out, request.node.as_deref());
    write_str(out, &request.workflow_id);
    write_varint(out, request.ordinal);
    write_opt_str(out, request.run_id.as_deref());
    write_varint(out, u64::from(request.attempt));
    write_bytes(out, &request.input);
    write_opt_varint(out, request.deadline_unix_ms);
}

fn write_response(out: &mut BytesMutFlavor<'_>, response: &DispatchResponse) {
    write_str(out, &response.workflow_id);
    write_varint(out, response.ordinal);
    write_opt_str(out, response.run_id.as_deref());
    match &response.outcome {
        ActivityOutcome::Success(bytes) => {
            out.buf.put_u8(0);
            write_bytes(out, bytes);
        }
        ActivityOutcome::Failure { message, retryable } => {
            out.buf.put_u8(1);
            write_str(out, message);
            out.buf.put_u8(u8::from(*retryable));
        }
    }
}

/// A completed result field by field; any other through serde (none carries a payload).
fn write_result(out: &mut BytesMutFlavor<'_>, result: &DispatchResult) -> postcard::Result<()> {
    match result {
        DispatchResult::Completed(response) => {
            out.buf.put_u8(0);
            write_response(out, response);
            Ok(())
        }
        other => write_by_serde(out, other),
    }
}

/// Routing to any node by hand; any other through serde.
fn write_routing(out: &mut BytesMutFlavor<'_>, routing: &NodeRouting) -> postcard::Result<()> {
    match routing {
        NodeRouting::Any => {
            out.buf.put_u8(0);
            Ok(())
        }
        other => write_by_serde(out, other),
    }
}

/// Appends serde's encoding of a value that carries no payload.
fn write_by_serde(
    out: &mut BytesMutFlavor<'_>,
    value: &impl serde::Serialize,
) -> postcard::Result<()> {
    let flavor = BytesMutFlavor {
        buf: &mut *out.buf,
        leave_out: None,
        left_out_at: None,
    };
    postcard::serialize_with_flavor(value, flavor).map(|_| ())
}

fn write_varint(out: &mut BytesMutFlavor<'_>, mut value: u64) {
    while value >= 0x80 {
        out.buf.put_u8((value as u8) | 0x80);
        value >>= 7;
    }
    out.buf.put_u8(value as u8);
}

fn write_opt_varint(out: &mut BytesMutFlavor<'_>, value: Option<u64>) {
    match value {
        Some(value) => {
            out.buf.put_u8(1);
            write_varint(out, value);
        }
        None => out.buf.put_u8(0),
    }
}

fn write_str(out: &mut BytesMutFlavor<'_>, text: &str) {
    write_varint(out, text.len() as u64);
    out.buf.extend_from_slice(text.as_bytes());
}

fn write_opt_str(out: &mut BytesMutFlavor<'_>, text: Option<&str>) {
    match text {
        Some(text) => {
            out.buf.put_u8(1);
            write_str(out, text);
        }
        None => out.buf.put_u8(0),
    }
}

/// A payload's length, then its bytes, unless they are the ones to leave out.
fn write_bytes(out: &mut BytesMutFlavor<'_>, bytes: &[u8]) {
    write_varint(out, bytes.len() as u64);
    out.extend_or_leave_out(bytes);
}
