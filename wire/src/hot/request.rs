//! A [`DispatchRequest`], the part every request kind (submit, push, relay) carries.

use compact_str::CompactString;

use crate::cursor::PayloadRef;
use crate::cursor::{bytes_len, opt_str_len, opt_u64_len, varint_len, Read, Reader, Writer};
use crate::message::{DispatchRequest, RequestRef};
use crate::ownership::{Compact, Ownership};

impl RequestRef<'_> {
    pub fn encoded_len(&self) -> usize {
        bytes_len(self.namespace.len())
            + bytes_len(self.task_queue.len())
            + bytes_len(self.activity_type.len())
            + opt_str_len(self.node)
            + bytes_len(self.workflow_id.len())
            + varint_len(self.ordinal)
            + opt_str_len(self.run_id)
            + varint_len(u64::from(self.attempt))
            + bytes_len(self.input.len())
            + opt_u64_len(self.deadline_unix_ms)
    }

    pub(crate) fn encode(&self, out: &mut Writer<'_>) {
        out.str(self.namespace);
        out.str(self.task_queue);
        out.str(self.activity_type);
        out.opt_str(self.node);
        out.str(self.workflow_id);
        out.u64(self.ordinal);
        out.opt_str(self.run_id);
        out.u64(u64::from(self.attempt));
        out.payload(self.input.as_slice());
        out.opt_u64(self.deadline_unix_ms);
    }
}

impl<'a> RequestRef<'a> {
    #[inline]
    pub(crate) fn decode(input: &mut Reader<'a>) -> Read<Self> {
        Ok(DispatchRequest {
            namespace: input.str()?,
            task_queue: input.str()?,
            activity_type: input.str()?,
            node: input.opt_str()?,
            workflow_id: input.str()?,
            ordinal: input.u64()?,
            run_id: input.opt_str()?,
            attempt: input.u32()?,
            input: input.payload()?,
            deadline_unix_ms: input.opt_u64()?,
        })
    }

    /// The same view for a shorter lifetime (a view does not shorten by itself: its type is
    /// invariant in its lifetime).
    pub fn reborrow<'b>(&self) -> RequestRef<'b>
    where
        'a: 'b,
    {
        self.map(|text| *text, |bytes| *bytes)
    }

    /// An owned copy, for a request kept beyond the frame it arrived in.
    pub fn into_owned(self) -> DispatchRequest {
        self.map(|text| (*text).to_owned(), PayloadRef::to_bytes)
    }

    /// An owned copy whose names of up to 24 bytes are held inline: it allocates only for
    /// its input (unless [`PayloadRef::to_bytes`] shares it) and for longer names.
    pub fn to_compact(&self) -> DispatchRequest<Compact> {
        self.map(|text| CompactString::new(text), PayloadRef::to_bytes)
    }
}

impl DispatchRequest {
    /// The request lent, to encode or hand on without copying it.
    #[inline]
    pub fn view(&self) -> RequestRef<'_> {
        self.map(String::as_str, PayloadRef::of)
    }
}

impl<O: Ownership> DispatchRequest<O> {
    /// The same request with its names converted by `text` and its input by `bytes`: what
    /// lending, reborrowing and copying a request have in common.
    fn map<'s, T: Ownership>(
        &'s self,
        text: impl Fn(&'s O::Str) -> T::Str,
        bytes: impl FnOnce(&'s O::Payload) -> T::Payload,
    ) -> DispatchRequest<T> {
        DispatchRequest {
            namespace: text(&self.namespace),
            task_queue: text(&self.task_queue),
            activity_type: text(&self.activity_type),
            node: self.node.as_ref().map(&text),
            workflow_id: text(&self.workflow_id),
            ordinal: self.ordinal,
            run_id: self.run_id.as_ref().map(&text),
            attempt: self.attempt,
            input: bytes(&self.input),
            deadline_unix_ms: self.deadline_unix_ms,
        }
    }
}
