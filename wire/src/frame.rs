//! The message set: one top-level [`Frame`] enum whose variant order is frozen.
//!
//! Postcard encodes a variant as its index (a varint), so a variant is never
//! reordered or removed; new kinds are appended and only sent to a peer whose
//! negotiated version knows them (see `PROTOCOL.md`).

use bytes::Bytes;
use serde::{Deserialize, Serialize};

use crate::message::{
    ActivityOutcome, Cancel, CapacityUpdate, ClusterStatusReport, DispatchResult, Drain, Drained,
    ErrorFrame, Goodbye, Hello, OutcomeFrame, PeerHello, Ping, Pong, Presence, Push, Refusal,
    Register, Registered, Relay, RelayOutcome, Reply, ServedOutcome, StatusQuery, StatusReport,
    Submit, Welcome,
};

/// One frame body. The discriminant is the frame kind on the wire.
///
/// Bodies larger than a [`Reply`] (a request, a registration, a report) are boxed, so a frame
/// stays small to move between the decoder, the reader and its handlers; boxing changes no
/// byte on the wire. Build one with `body.into()`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum Frame {
    /// Client to node, first frame of every connection.
    Hello(Hello),
    /// Node to client: the handshake succeeded.
    Welcome(Welcome),
    /// Node to client: the handshake failed; the node closes after sending it.
    HelloRefused(Refusal),
    /// Worker to node: join pools.
    Register(Box<Register>),
    /// Node to worker: the registration was admitted.
    Registered(Registered),
    /// Node to worker: the registration was refused; the connection stays usable.
    RegisterRefused(Refusal),
    /// Worker to node: new `max_concurrency`, effective on the next selection.
    CapacityUpdate(CapacityUpdate),
    /// Node to worker: execute this request and reply with the same correlation id.
    Push(Box<Push>),
    /// Worker to node: the answer to a push.
    Reply(Reply),
    /// Producer to node: dispatch a request.
    Submit(Box<Submit>),
    /// Node to producer: how a submission ended.
    Outcome(OutcomeFrame),
    /// Producer to node, or node to worker: abandon an in-flight request.
    Cancel(Cancel),
    /// Either direction: liveness probe.
    Ping(Ping),
    /// Either direction: answer to a ping, echoing its nonce.
    Pong(Pong),
    /// Node to worker: finish in-flight work and take no more. Worker to node: stop selecting me.
    Drain(Drain),
    /// Worker to node: in-flight work is finished after a drain.
    Drained(Drained),
    /// Either direction: a clean close follows.
    Goodbye(Goodbye),
    /// Either direction: a protocol violation; the sender closes after it.
    Error(ErrorFrame),
    /// Producer to node: ask for the node's status.
    StatusQuery(StatusQuery),
    /// Node to producer: the answer to a status query.
    Status(Box<StatusReport>),
    /// Version 2, peer to peer: who the sender is and the members it knows.
    PeerHello(PeerHello),
    /// Version 2, peer to peer: the sender's own pools, a snapshot then deltas.
    Presence(Presence),
    /// Version 2, peer to peer: run this dispatch on your own workers.
    Relay(Box<Relay>),
    /// Version 2, peer to peer: how a relay ended.
    RelayOutcome(RelayOutcome),
    /// Version 2, node to producer: how a submission ended and which node served it.
    ServedOutcome(Box<ServedOutcome>),
    /// Version 2, node to producer: the answer to a status query, with the node's peers.
    ClusterStatus(Box<ClusterStatusReport>),
}

/// `From<Body> for Frame` for every body that belongs to one kind only; `Refusal` belongs to two.
macro_rules! from_body {
    ($($variant:ident($body:ty)),* $(,)?) => {$(
        impl From<$body> for Frame {
            fn from(body: $body) -> Self {
                Frame::$variant(body)
            }
        }
    )*};
    (boxed: $($variant:ident($body:ty)),* $(,)?) => {$(
        impl From<$body> for Frame {
            fn from(body: $body) -> Self {
                Frame::$variant(Box::new(body))
            }
        }

        impl From<Box<$body>> for Frame {
            fn from(body: Box<$body>) -> Self {
                Frame::$variant(body)
            }
        }
    )*};
}

from_body!(
    Hello(Hello),
    Welcome(Welcome),
    Registered(Registered),
    CapacityUpdate(CapacityUpdate),
    Reply(Reply),
    Outcome(OutcomeFrame),
    Cancel(Cancel),
    Ping(Ping),
    Pong(Pong),
    Drain(Drain),
    Drained(Drained),
    Goodbye(Goodbye),
    Error(ErrorFrame),
    StatusQuery(StatusQuery),
    PeerHello(PeerHello),
    Presence(Presence),
    RelayOutcome(RelayOutcome),
);

from_body!(
    boxed: Register(Register),
    Push(Push),
    Submit(Submit),
    Status(StatusReport),
    Relay(Relay),
    ServedOutcome(ServedOutcome),
    ClusterStatus(ClusterStatusReport),
);

/// The kind of a frame: its wire discriminant, without the body.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[repr(u8)]
pub enum FrameKind {
    Hello = 0,
    Welcome = 1,
    HelloRefused = 2,
    Register = 3,
    Registered = 4,
    RegisterRefused = 5,
    CapacityUpdate = 6,
    Push = 7,
    Reply = 8,
    Submit = 9,
    Outcome = 10,
    Cancel = 11,
    Ping = 12,
    Pong = 13,
    Drain = 14,
    Drained = 15,
    Goodbye = 16,
    Error = 17,
    StatusQuery = 18,
    Status = 19,
    PeerHello = 20,
    Presence = 21,
    Relay = 22,
    RelayOutcome = 23,
    ServedOutcome = 24,
    ClusterStatus = 25,
}

impl FrameKind {
    /// Every kind, in wire order.
    pub const ALL: [FrameKind; 26] = [
        FrameKind::Hello,
        FrameKind::Welcome,
        FrameKind::HelloRefused,
        FrameKind::Register,
        FrameKind::Registered,
        FrameKind::RegisterRefused,
        FrameKind::CapacityUpdate,
        FrameKind::Push,
        FrameKind::Reply,
        FrameKind::Submit,
        FrameKind::Outcome,
        FrameKind::Cancel,
        FrameKind::Ping,
        FrameKind::Pong,
        FrameKind::Drain,
        FrameKind::Drained,
        FrameKind::Goodbye,
        FrameKind::Error,
        FrameKind::StatusQuery,
        FrameKind::Status,
        FrameKind::PeerHello,
        FrameKind::Presence,
        FrameKind::Relay,
        FrameKind::RelayOutcome,
        FrameKind::ServedOutcome,
        FrameKind::ClusterStatus,
    ];

    /// The kind with this wire discriminant, if this version knows it.
    pub fn from_discriminant(value: u32) -> Option<FrameKind> {
        usize::try_from(value)
            .ok()
            .and_then(|index| Self::ALL.get(index))
            .copied()
    }

    /// The wire discriminant.
    pub fn discriminant(self) -> u32 {
        self as u32
    }

    /// The name used in `PROTOCOL.md` and in error reasons.
    pub fn name(self) -> &'static str {
        match self {
            FrameKind::Hello => "Hello",
            FrameKind::Welcome => "Welcome",
            FrameKind::HelloRefused => "HelloRefused",
            FrameKind::Register => "Register",
            FrameKind::Registered => "Registered",
            FrameKind::RegisterRefused => "RegisterRefused",
            FrameKind::CapacityUpdate => "CapacityUpdate",
            FrameKind::Push => "Push",
            FrameKind::Reply => "Reply",
            FrameKind::Submit => "Submit",
            FrameKind::Outcome => "Outcome",
            FrameKind::Cancel => "Cancel",
            FrameKind::Ping => "Ping",
            FrameKind::Pong => "Pong",
            FrameKind::Drain => "Drain",
            FrameKind::Drained => "Drained",
            FrameKind::Goodbye => "Goodbye",
            FrameKind::Error => "Error",
            FrameKind::StatusQuery => "StatusQuery",
            FrameKind::Status => "Status",
            FrameKind::PeerHello => "PeerHello",
            FrameKind::Presence => "Presence",
            FrameKind::Relay => "Relay",
            FrameKind::RelayOutcome => "RelayOutcome",
            FrameKind::ServedOutcome => "ServedOutcome",
            FrameKind::ClusterStatus => "ClusterStatus",
        }
    }
}

impl std::fmt::Display for FrameKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

impl Frame {
    /// Bytes of opaque payload the frame carries: a request's input or a success's result.
    pub fn payload_len(&self) -> usize {
        self.payload().map_or(0, Bytes::len)
    }

    /// The opaque payload the frame carries, if any: a request's input or a success's result.
    pub fn payload(&self) -> Option<&Bytes> {
        match self {
            Frame::Submit(submit) => Some(&submit.request.input),
            Frame::Push(push) => Some(&push.request.input),
            Frame::Relay(relay) => Some(&relay.request.input),
            Frame::Reply(reply) => outcome_payload(&reply.response.outcome),
            Frame::Outcome(outcome) => result_payload(&outcome.result),
            Frame::ServedOutcome(outcome) => result_payload(&outcome.result),
            Frame::RelayOutcome(outcome) => result_payload(&outcome.result),
            _ => None,
        }
    }

    /// This frame's kind.
    pub fn kind(&self) -> FrameKind {
        match self {
            Frame::Hello(_) => FrameKind::Hello,
            Frame::Welcome(_) => FrameKind::Welcome,
            Frame::HelloRefused(_) => FrameKind::HelloRefused,
            Frame::Register(_) => FrameKind::Register,
            Frame::Registered(_) => FrameKind::Registered,
            Frame::RegisterRefused(_) => FrameKind::RegisterRefused,
            Frame::CapacityUpdate(_) => FrameKind::CapacityUpdate,
            Frame::Push(_) => FrameKind::Push,
            Frame::Reply(_) => FrameKind::Reply,
            Frame::Submit(_) => FrameKind::Submit,
            Frame::Outcome(_) => FrameKind::Outcome,
            Frame::Cancel(_) => FrameKind::Cancel,
            Frame::Ping(_) => FrameKind::Ping,
            Frame::Pong(_) => FrameKind::Pong,
            Frame::Drain(_) => FrameKind::Drain,
            Frame::Drained(_) => FrameKind::Drained,
            Frame::Goodbye(_) => FrameKind::Goodbye,
            Frame::Error(_) => FrameKind::Error,
            Frame::StatusQuery(_) => FrameKind::StatusQuery,
            Frame::Status(_) => FrameKind::Status,
            Frame::PeerHello(_) => FrameKind::PeerHello,
            Frame::Presence(_) => FrameKind::Presence,
            Frame::Relay(_) => FrameKind::Relay,
            Frame::RelayOutcome(_) => FrameKind::RelayOutcome,
            Frame::ServedOutcome(_) => FrameKind::ServedOutcome,
            Frame::ClusterStatus(_) => FrameKind::ClusterStatus,
        }
    }
}

/// The payload of a completed dispatch's success, if that is what `result` is.
pub(crate) fn result_payload(result: &DispatchResult) -> Option<&Bytes> {
    match result {
        DispatchResult::Completed(response) => outcome_payload(&response.outcome),
        _ => None,
    }
}

fn outcome_payload(outcome: &ActivityOutcome) -> Option<&Bytes> {
    match outcome {
        ActivityOutcome::Success(bytes) => Some(bytes),
        ActivityOutcome::Failure { .. } => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::message::DispatchRequest;

    /// The largest body kept inline is a reply or an outcome; everything larger is boxed.
    #[test]
    fn a_frame_stays_small_to_move() {
        let largest_inline = std::mem::size_of::<Reply>()
            .max(std::mem::size_of::<OutcomeFrame>())
            .max(std::mem::size_of::<RelayOutcome>());
        assert!(
            largest_inline <= 104,
            "inline bodies grew to {largest_inline} bytes"
        );
        assert!(
            std::mem::size_of::<Frame>() <= 112,
            "a frame is {} bytes",
            std::mem::size_of::<Frame>()
        );
    }

    #[test]
    fn from_a_body_builds_its_kind() {
        let push = Push {
            correlation: 7,
            request: DispatchRequest {
                namespace: "ns".into(),
                task_queue: String::new(),
                activity_type: "echo".into(),
                node: None,
                workflow_id: "wf".into(),
                ordinal: 1,
                run_id: None,
                attempt: 1,
                input: Bytes::from_static(b"in"),
                deadline_unix_ms: None,
            },
        };
        let frame: Frame = push.clone().into();
        assert_eq!(frame, Frame::Push(Box::new(push)));
        let frame: Frame = Ping { nonce: 3 }.into();
        assert_eq!(frame.kind(), FrameKind::Ping);
    }
}
