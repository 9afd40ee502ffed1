//! The message set: one top-level [`Frame`] enum whose variant order is frozen.
//!
//! Postcard encodes a variant as its index (a varint), so a variant is never
//! reordered or removed; new kinds are appended and only sent to a peer whose
//! negotiated version knows them (see `PROTOCOL.md`).

use bytes::Bytes;
use serde::{Deserialize, Serialize};

use crate::message::{
    ActivityOutcome, Cancel, CapacityUpdate, ClusterStatusReport, DispatchResult, Drain, Drained,
    ErrorFrame, Event, Farewell, Goodbye, Hello, OutcomeFrame, PeerHello, PeerHello3, Ping, Pong,
    PoolSettings, Presence, Presence3, Push, Push3, Refusal, Register, Register3, Registered,
    Relay, Relay3, RelayAck, RelayOutcome, Reply, Resume, Resumed, ServedOutcome, StatusDocument,
    StatusQuery, StatusReport, Submit, Submit3, Subscribe, SubscriptionEnded, Welcome, Welcome3,
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
    /// Version 3, producer to node: dispatch a request with its extras.
    Submit3(Box<Submit3>),
    /// Version 3, node to worker: execute this request, with its extras.
    Push3(Box<Push3>),
    /// Version 3, peer to peer: run this dispatch, with its extras, on your own workers.
    Relay3(Box<Relay3>),
    /// Version 3, worker to node: join pools, with a deployment identity.
    Register3(Box<Register3>),
    /// Version 3, node to client: the handshake succeeded; what the node implements.
    Welcome3(Box<Welcome3>),
    /// Version 3, peer to peer: the sender's own pools, with deployments and exclusions.
    Presence3(Presence3),
    /// Version 3, peer to peer: who the sender is, the members it knows, what it implements.
    PeerHello3(Box<PeerHello3>),
    /// Version 3, producer to node: send me the node's lifecycle events.
    Subscribe(Subscribe),
    /// Version 3, node to subscriber: one lifecycle event.
    Event(Box<Event>),
    /// Version 3, node to subscriber: the subscription ended.
    SubscriptionEnded(SubscriptionEnded),
    /// Version 3, node to producer: the answer to a status query, as a JSON document.
    StatusDocument(StatusDocument),
    /// Version 3, peer to peer: every relay the sender handled on this link is answered.
    Farewell(Farewell),
    /// Version 3, origin to serving peer: the relay outcomes the origin holds.
    RelayAck(RelayAck),
    /// Version 3, origin to serving peer: relays still unanswered after a relink.
    Resume(Resume),
    /// Version 3, serving peer to origin: what became of the relays named in `Resume`.
    Resumed(Resumed),
    /// Version 3, peer to peer: pools' current deployments.
    PoolSettings(PoolSettings),
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
    Presence3(Presence3),
    Subscribe(Subscribe),
    SubscriptionEnded(SubscriptionEnded),
    StatusDocument(StatusDocument),
    Farewell(Farewell),
    RelayAck(RelayAck),
    Resume(Resume),
    Resumed(Resumed),
    PoolSettings(PoolSettings),
);

from_body!(
    boxed: Register(Register),
    Push(Push),
    Submit(Submit),
    Status(StatusReport),
    Relay(Relay),
    ServedOutcome(ServedOutcome),
    ClusterStatus(ClusterStatusReport),
    Submit3(Submit3),
    Push3(Push3),
    Relay3(Relay3),
    Register3(Register3),
    Welcome3(Welcome3),
    PeerHello3(PeerHello3),
    Event(Event),
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
    Submit3 = 26,
    Push3 = 27,
    Relay3 = 28,
    Register3 = 29,
    Welcome3 = 30,
    Presence3 = 31,
    PeerHello3 = 32,
    Subscribe = 33,
    Event = 34,
    SubscriptionEnded = 35,
    StatusDocument = 36,
    Farewell = 37,
    RelayAck = 38,
    Resume = 39,
    Resumed = 40,
    PoolSettings = 41,
}

impl FrameKind {
    /// Every kind, in wire order.
    pub const ALL: [FrameKind; 42] = [
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
        FrameKind::Submit3,
        FrameKind::Push3,
        FrameKind::Relay3,
        FrameKind::Register3,
        FrameKind::Welcome3,
        FrameKind::Presence3,
        FrameKind::PeerHello3,
        FrameKind::Subscribe,
        FrameKind::Event,
        FrameKind::SubscriptionEnded,
        FrameKind::StatusDocument,
        FrameKind::Farewell,
        FrameKind::RelayAck,
        FrameKind::Resume,
        FrameKind::Resumed,
        FrameKind::PoolSettings,
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

    /// The protocol version that introduced the kind: a connection of an earlier version
    /// never carries it.
    pub fn version(self) -> u16 {
        match self.discriminant() {
            0..=19 => 1,
            20..=25 => 2,
            _ => 3,
        }
    }

    /// A request to run work (a push or a relay, of any version): it waits behind control
    /// frames in a connection's outbound queue.
    pub fn is_bulk(self) -> bool {
        matches!(
            self,
            FrameKind::Push | FrameKind::Relay | FrameKind::Push3 | FrameKind::Relay3
        )
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
            FrameKind::Submit3 => "Submit3",
            FrameKind::Push3 => "Push3",
            FrameKind::Relay3 => "Relay3",
            FrameKind::Register3 => "Register3",
            FrameKind::Welcome3 => "Welcome3",
            FrameKind::Presence3 => "Presence3",
            FrameKind::PeerHello3 => "PeerHello3",
            FrameKind::Subscribe => "Subscribe",
            FrameKind::Event => "Event",
            FrameKind::SubscriptionEnded => "SubscriptionEnded",
            FrameKind::StatusDocument => "StatusDocument",
            FrameKind::Farewell => "Farewell",
            FrameKind::RelayAck => "RelayAck",
            FrameKind::Resume => "Resume",
            FrameKind::Resumed => "Resumed",
            FrameKind::PoolSettings => "PoolSettings",
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
            Frame::Submit3(submit) => Some(&submit.request.input),
            Frame::Push3(push) => Some(&push.request.input),
            Frame::Relay3(relay) => Some(&relay.request.input),
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
            Frame::Submit3(_) => FrameKind::Submit3,
            Frame::Push3(_) => FrameKind::Push3,
            Frame::Relay3(_) => FrameKind::Relay3,
            Frame::Register3(_) => FrameKind::Register3,
            Frame::Welcome3(_) => FrameKind::Welcome3,
            Frame::Presence3(_) => FrameKind::Presence3,
            Frame::PeerHello3(_) => FrameKind::PeerHello3,
            Frame::Subscribe(_) => FrameKind::Subscribe,
            Frame::Event(_) => FrameKind::Event,
            Frame::SubscriptionEnded(_) => FrameKind::SubscriptionEnded,
            Frame::StatusDocument(_) => FrameKind::StatusDocument,
            Frame::Farewell(_) => FrameKind::Farewell,
            Frame::RelayAck(_) => FrameKind::RelayAck,
            Frame::Resume(_) => FrameKind::Resume,
            Frame::Resumed(_) => FrameKind::Resumed,
            Frame::PoolSettings(_) => FrameKind::PoolSettings,
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
