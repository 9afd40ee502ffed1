//! The message set: [`Frame`], one variant per message, generated from the frame table
//! (`table`).

use serde::{Deserialize, Serialize};

use crate::kind::FrameKind;
use crate::message::{
    Cancel, CapacityUpdate, ClusterStatusReport, Drain, Drained, ErrorFrame, Event, Farewell,
    Goodbye, Hello, OutcomeFrame, PeerHello, PeerHello3, Ping, Pong, PoolSettings, Presence,
    Presence3, Push, Push3, Refusal, Register, Register3, Registered, Relay, Relay3, RelayAck,
    RelayOutcome, Reply, Resume, Resumed, ServedOutcome, StatusDocument, StatusQuery, StatusReport,
    Submit, Submit3, Subscribe, SubscriptionEnded, Welcome, Welcome3,
};
use crate::table::frame_table;

macro_rules! frames {
    ($(
        $(#[$doc:meta])*
        $message:ident($body:ty) [$($flag:tt)*] {
            $($number:literal $kind:ident: $version:literal $lane:ident $feature:tt;)+
        }
    )+) => {
        /// One frame body. The discriminant is the frame kind on the wire.
        ///
        /// Bodies larger than a [`Reply`] (a request, a registration, a report) are boxed, so a
        /// frame stays small to move between the decoder, the reader and its handlers; boxing
        /// changes no byte on the wire. Build one with `body.into()`.
        #[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
        pub enum Frame {
            $($(#[$doc])* $message(frames!(@held [$($flag)*] $body)),)+
        }

        $(frames!(@from $message [$($flag)*] $body);)+

        impl Frame {
            /// This frame's kind.
            pub fn kind(&self) -> FrameKind {
                match self {
                    $($(Frame::$message(_) => FrameKind::$kind,)+)+
                }
            }
        }
    };
    (@held [] $body:ty) => { $body };
    (@held [boxed $($rest:tt)*] $body:ty) => { Box<$body> };
    (@held [$first:tt $($rest:tt)*] $body:ty) => { frames!(@held [$($rest)*] $body) };
    (@from $message:ident [from boxed $($rest:tt)*] $body:ty) => {
        impl From<$body> for Frame {
            fn from(body: $body) -> Self {
                Frame::$message(Box::new(body))
            }
        }

        impl From<Box<$body>> for Frame {
            fn from(body: Box<$body>) -> Self {
                Frame::$message(body)
            }
        }
    };
    (@from $message:ident [from $($rest:tt)*] $body:ty) => {
        impl From<$body> for Frame {
            fn from(body: $body) -> Self {
                Frame::$message(body)
            }
        }
    };
    (@from $message:ident [$($rest:tt)*] $body:ty) => {};
}

frame_table!(frames);

#[cfg(test)]
mod tests {
    use super::*;
    use crate::message::DispatchRequest;
    use bytes::Bytes;

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
