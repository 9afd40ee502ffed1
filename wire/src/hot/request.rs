//! A [`DispatchRequest`], the part every request kind (submit, push, relay) carries.

use compact_str::CompactString;

use crate::cursor::PayloadRef;
use crate::cursor::{bytes_len, opt_str_len, opt_u64_len, varint_len, Read, Reader, Writer};
use crate::message::{DispatchRequest, RequestRef};
use crate::ownership::{Borrowed, Compact, Ownership};

impl RequestRef<'_> {
    pub fn encoded_len(&self) -> usize {
        let head = match self.head {
            Some(head) => head.len(),
            None => self.fields.head_len(),
        };
        head + bytes_len(self.input.len()) + opt_u64_len(self.deadline_unix_ms)
    }

    /// Writes the request: the fields before its input as they were read when they were, so a
    /// forwarded request is copied, not encoded again.
    pub(crate) fn encode(&self, out: &mut Writer<'_>) {
        match self.head {
            Some(head) => out.raw(head),
            None => self.fields.encode_head(out),
        }
        out.payload(self.input.as_slice());
        out.opt_u64(self.deadline_unix_ms);
    }
}

impl<'a> DispatchRequest<Borrowed<'a>> {
    /// Bytes of the fields before the input.
    fn head_len(&self) -> usize {
        bytes_len(self.namespace.len())
            + bytes_len(self.task_queue.len())
            + bytes_len(self.activity_type.len())
            + opt_str_len(self.node)
            + bytes_len(self.workflow_id.len())
            + varint_len(self.ordinal)
            + opt_str_len(self.run_id)
            + varint_len(u64::from(self.attempt))
    }

    /// Writes the fields before the input.
    fn encode_head(&self, out: &mut Writer<'_>) {
        out.str(self.namespace);
        out.str(self.task_queue);
        out.str(self.activity_type);
        out.opt_str(self.node);
        out.str(self.workflow_id);
        out.u64(self.ordinal);
        out.opt_str(self.run_id);
        out.u64(u64::from(self.attempt));
    }
}

impl<'a> RequestRef<'a> {
    /// Reads a request, every name checked, keeping the bytes of the fields before its input
    /// when they are canonical.
    #[inline]
    pub(crate) fn decode(input: &mut Reader<'a>) -> Read<Self> {
        let start = input.position();
        let namespace = input.str()?;
        let task_queue = input.str()?;
        let activity_type = input.str()?;
        let node = input.opt_str()?;
        let workflow_id = input.str()?;
        let ordinal = input.u64()?;
        let run_id = input.opt_str()?;
        let attempt = input.u32()?;
        let head = input.since(start);
        let fields = DispatchRequest {
            namespace,
            task_queue,
            activity_type,
            node,
            workflow_id,
            ordinal,
            run_id,
            attempt,
            input: input.payload()?,
            deadline_unix_ms: input.opt_u64()?,
        };
        // A head holding a varint written longer than it needs is encoded again rather than
        // passed on: senders must write canonical varints.
        Ok(RequestRef {
            fields,
            head: (!input.read_overlong()).then_some(head),
        })
    }

    /// The same view for a shorter lifetime (a view does not shorten by itself: its type is
    /// invariant in its lifetime).
    pub fn reborrow<'b>(&self) -> RequestRef<'b>
    where
        'a: 'b,
    {
        RequestRef {
            fields: self.fields.map(|text| *text, |bytes| *bytes),
            head: self.head,
        }
    }

    /// An owned copy, for a request kept beyond the frame it arrived in.
    pub fn into_owned(self) -> DispatchRequest {
        self.fields
            .map(|text| (*text).to_owned(), PayloadRef::to_bytes)
    }

    /// An owned copy whose names of up to 24 bytes are held inline: it allocates only for
    /// its input (unless [`PayloadRef::to_bytes`] shares it) and for longer names.
    pub fn to_compact(&self) -> DispatchRequest<Compact> {
        self.fields
            .map(|text| CompactString::new(text), PayloadRef::to_bytes)
    }
}

impl DispatchRequest {
    /// The request lent, to encode or hand on without copying it.
    #[inline]
    pub fn view(&self) -> RequestRef<'_> {
        RequestRef::new(self.map(String::as_str, PayloadRef::of))
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

#[cfg(test)]
mod tests {
    use bytes::{Bytes, BytesMut};

    use super::*;

    fn request() -> DispatchRequest {
        DispatchRequest {
            namespace: "billing".into(),
            task_queue: "gpu".into(),
            activity_type: "charge".into(),
            node: Some("eu-1".into()),
            workflow_id: "order-17".into(),
            ordinal: 300,
            run_id: Some("run-1".into()),
            attempt: 2,
            input: Bytes::from_static(b"{\"amount\": 5}"),
            deadline_unix_ms: Some(1_700_000_000_000),
        }
    }

    fn encoded(request: &RequestRef<'_>) -> Vec<u8> {
        let mut buf = BytesMut::new();
        request.encode(&mut Writer::new(&mut buf, None));
        assert_eq!(buf.len(), request.encoded_len());
        buf.to_vec()
    }

    #[test]
    fn a_request_read_from_its_bytes_is_written_again_from_them_to_the_same_bytes() {
        let owned = request();
        let bytes = encoded(&owned.view());
        let mut reader = Reader::of(&bytes);
        let read = RequestRef::decode(&mut reader).expect("a request");
        assert!(read.head.is_some(), "the head is kept");
        assert_eq!(reader.left(), 0);
        assert_eq!(read.clone().into_owned(), owned);
        assert_eq!(encoded(&read.reborrow()), bytes);
        // What is written is the head as read, not the fields encoded again.
        let marked = RequestRef {
            head: Some(b"head"),
            ..read
        };
        assert!(encoded(&marked).starts_with(b"head"));
    }

    #[test]
    fn a_head_with_an_overlong_varint_is_encoded_again_in_canonical_form() {
        // "ns", "", "a", no node, "w", ordinal 0 written as two bytes, no run id, attempt 1,
        // no input, no deadline.
        let overlong = [
            2, b'n', b's', 0, 1, b'a', 0, 1, b'w', 0x80, 0x00, 0, 1, 0, 0,
        ];
        let read = RequestRef::decode(&mut Reader::of(&overlong)).expect("postcard reads it");
        assert_eq!(read.ordinal, 0);
        assert!(read.head.is_none(), "an overlong head is not passed on");
        let canonical = [2, b'n', b's', 0, 1, b'a', 0, 1, b'w', 0, 0, 1, 0, 0];
        assert_eq!(encoded(&read), canonical);
    }
}
