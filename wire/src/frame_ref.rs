//! [`FrameRef`]: a frame whose body is borrowed. The encoder's arguments (a push written from
//! a lent request, an outcome from a lent result) and what a frame decoded where it lies reads
//! as (hot bodies as views of the read buffer).

use crate::cursor::{PayloadRef, Read, Reader};
use crate::error::DecodeError;
use crate::frame::{Frame, FrameKind};
use crate::hot::{
    Body, OutcomeRef, PushRef, RelayOutcomeRef, RelayRef, ReplyRef, ServedOutcomeRef, SubmitRef,
};
use crate::message::{ActivityOutcome, DispatchResult, Push3Ref, Relay3Ref, ResultRef, Submit3Ref};

/// A frame whose body is borrowed. Encodes byte for byte as the owned [`Frame`] of the same
/// kind and fields; the hot kinds have variants of their own.
#[derive(Debug, Clone)]
pub enum FrameRef<'a> {
    /// A frame already built, of any kind.
    Frame(&'a Frame),
    Submit(SubmitRef<'a>),
    Push(PushRef<'a>),
    Relay(RelayRef<'a>),
    Reply(ReplyRef<'a>),
    Outcome(OutcomeRef<'a>),
    ServedOutcome(ServedOutcomeRef<'a>),
    RelayOutcome(RelayOutcomeRef<'a>),
    Submit3(Submit3Ref<'a>),
    Push3(Push3Ref<'a>),
    Relay3(Relay3Ref<'a>),
}

impl<'a> From<&'a Frame> for FrameRef<'a> {
    fn from(frame: &'a Frame) -> Self {
        FrameRef::Frame(frame)
    }
}

macro_rules! from_view {
    ($($variant:ident($view:ident)),* $(,)?) => {$(
        impl<'a> From<$view<'a>> for FrameRef<'a> {
            fn from(body: $view<'a>) -> Self {
                FrameRef::$variant(body)
            }
        }
    )*};
}

from_view!(
    Submit(SubmitRef),
    Push(PushRef),
    Relay(RelayRef),
    Reply(ReplyRef),
    Outcome(OutcomeRef),
    ServedOutcome(ServedOutcomeRef),
    RelayOutcome(RelayOutcomeRef),
    Submit3(Submit3Ref),
    Push3(Push3Ref),
    Relay3(Relay3Ref),
);

impl<'a> FrameRef<'a> {
    /// Reads the rest of a body of `kind`, whose kind `input` has read, requiring every byte
    /// be used; a kind that is not hot is `cold`'s to read. Each arm builds the frame where it
    /// is returned: a frame is a few hundred bytes, and every move of it is a copy.
    #[inline(always)]
    pub(crate) fn decode_hot<E>(
        kind: FrameKind,
        input: &mut Reader<'a>,
        fail: impl FnOnce(DecodeError) -> E,
        cold: impl FnOnce() -> Result<Self, DecodeError>,
    ) -> Result<Self, E> {
        macro_rules! hot {
            ($view:ident, $variant:ident) => {
                whole($view::decode(input), input, kind, FrameRef::$variant, fail)
            };
        }
        match kind {
            FrameKind::Submit => hot!(SubmitRef, Submit),
            FrameKind::Push => hot!(PushRef, Push),
            FrameKind::Relay => hot!(RelayRef, Relay),
            FrameKind::Reply => hot!(ReplyRef, Reply),
            FrameKind::Outcome => hot!(OutcomeRef, Outcome),
            FrameKind::ServedOutcome => hot!(ServedOutcomeRef, ServedOutcome),
            FrameKind::RelayOutcome => hot!(RelayOutcomeRef, RelayOutcome),
            FrameKind::Submit3 => hot!(Submit3Ref, Submit3),
            FrameKind::Push3 => hot!(Push3Ref, Push3),
            FrameKind::Relay3 => hot!(Relay3Ref, Relay3),
            _ => cold().map_err(fail),
        }
    }

    /// The kind of the frame it stands for.
    pub fn kind(&self) -> FrameKind {
        match self {
            FrameRef::Frame(frame) => frame.kind(),
            FrameRef::Submit(_) => FrameKind::Submit,
            FrameRef::Push(_) => FrameKind::Push,
            FrameRef::Relay(_) => FrameKind::Relay,
            FrameRef::Reply(_) => FrameKind::Reply,
            FrameRef::Outcome(_) => FrameKind::Outcome,
            FrameRef::ServedOutcome(_) => FrameKind::ServedOutcome,
            FrameRef::RelayOutcome(_) => FrameKind::RelayOutcome,
            FrameRef::Submit3(_) => FrameKind::Submit3,
            FrameRef::Push3(_) => FrameKind::Push3,
            FrameRef::Relay3(_) => FrameKind::Relay3,
        }
    }

    /// Runs `f` on the hot body, a built frame's seen through its view; `None` for the
    /// kinds serde encodes.
    #[inline]
    pub(crate) fn with_hot<R>(&self, f: impl FnOnce(&dyn Body) -> R) -> Option<R> {
        Some(match self {
            FrameRef::Frame(frame) => match frame {
                Frame::Submit(body) => f(&body.view()),
                Frame::Push(body) => f(&body.view()),
                Frame::Relay(body) => f(&body.view()),
                Frame::Reply(body) => f(&body.view()),
                Frame::Outcome(body) => f(&body.view()),
                Frame::ServedOutcome(body) => f(&body.view()),
                Frame::RelayOutcome(body) => f(&body.view()),
                Frame::Submit3(body) => f(&body.view()),
                Frame::Push3(body) => f(&body.view()),
                Frame::Relay3(body) => f(&body.view()),
                _ => return None,
            },
            FrameRef::Submit(body) => f(body),
            FrameRef::Push(body) => f(body),
            FrameRef::Relay(body) => f(body),
            FrameRef::Reply(body) => f(body),
            FrameRef::Outcome(body) => f(body),
            FrameRef::ServedOutcome(body) => f(body),
            FrameRef::RelayOutcome(body) => f(body),
            FrameRef::Submit3(body) => f(body),
            FrameRef::Push3(body) => f(body),
            FrameRef::Relay3(body) => f(body),
        })
    }

    /// The opaque payload the frame carries, if any: a request's input or a success's result.
    pub fn payload(&self) -> Option<PayloadRef<'_>> {
        match self {
            FrameRef::Frame(frame) => frame.payload().map(PayloadRef::of),
            FrameRef::Submit(submit) => Some(submit.request.input),
            FrameRef::Push(push) => Some(push.request.input),
            FrameRef::Relay(relay) => Some(relay.request.input),
            FrameRef::Reply(reply) => outcome_payload(&reply.response.outcome),
            FrameRef::Outcome(outcome) => result_payload(&outcome.result),
            FrameRef::ServedOutcome(outcome) => result_payload(&outcome.result),
            FrameRef::RelayOutcome(outcome) => result_payload(&outcome.result),
            FrameRef::Submit3(submit) => Some(submit.request.input),
            FrameRef::Push3(push) => Some(push.request.input),
            FrameRef::Relay3(relay) => Some(relay.request.input),
        }
    }

    /// Bytes of opaque payload the frame carries, as [`Frame::payload_len`].
    pub fn payload_len(&self) -> usize {
        self.payload().map_or(0, |payload| payload.len())
    }

    /// Bytes of the body of a hot kind (its kind included), reckoned without encoding it;
    /// `None` for the kinds serde encodes.
    pub fn encoded_len(&self) -> Option<usize> {
        self.with_hot(|body| body.encoded_len())
    }

    /// The owned frame it stands for.
    pub fn into_owned(self) -> Frame {
        match self {
            FrameRef::Frame(frame) => frame.clone(),
            FrameRef::Submit(submit) => Frame::from(submit.into_owned()),
            FrameRef::Push(push) => Frame::from(push.into_owned()),
            FrameRef::Relay(relay) => Frame::from(relay.into_owned()),
            FrameRef::Reply(reply) => Frame::Reply(reply.into_owned()),
            FrameRef::Outcome(outcome) => Frame::Outcome(outcome.into_owned()),
            FrameRef::ServedOutcome(outcome) => Frame::from(outcome.into_owned()),
            FrameRef::RelayOutcome(outcome) => Frame::RelayOutcome(outcome.into_owned()),
            FrameRef::Submit3(submit) => Frame::from(submit.into_owned()),
            FrameRef::Push3(push) => Frame::from(push.into_owned()),
            FrameRef::Relay3(relay) => Frame::from(relay.into_owned()),
        }
    }
}

/// The payload of a completed dispatch's success, if that is what `result` is.
fn result_payload<'r>(result: &ResultRef<'r>) -> Option<PayloadRef<'r>> {
    match result {
        DispatchResult::Completed(response) => outcome_payload(&response.outcome),
        _ => None,
    }
}

fn outcome_payload<'r>(
    outcome: &ActivityOutcome<crate::ownership::Borrowed<'r>>,
) -> Option<PayloadRef<'r>> {
    match outcome {
        ActivityOutcome::Success(bytes) => Some(*bytes),
        ActivityOutcome::Failure { .. } => None,
    }
}

/// A hot body read as the frame `wrap` makes of it, or why it is not one: malformed, or
/// followed by bytes of no field.
#[inline(always)]
fn whole<'a, T, E>(
    read: Read<T>,
    input: &Reader<'a>,
    kind: FrameKind,
    wrap: fn(T) -> FrameRef<'a>,
    fail: impl FnOnce(DecodeError) -> E,
) -> Result<FrameRef<'a>, E> {
    match read {
        Ok(_) if input.left() > 0 => Err(fail(DecodeError::TrailingBytes {
            kind,
            extra: input.left(),
        })),
        Ok(body) => Ok(wrap(body)),
        Err(source) => Err(fail(DecodeError::Malformed { kind, source })),
    }
}
