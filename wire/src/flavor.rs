//! Where an encoded frame body goes: a postcard flavor over a `BytesMut`, shared by the serde
//! encoder and the hand-written writers of the hot bodies.

use bytes::{BufMut, BytesMut};

/// A postcard flavor that appends straight into a `BytesMut`, except the bytes of
/// `leave_out` (recognised by address, not content), whose place it notes.
pub(crate) struct BytesMutFlavor<'a> {
    pub(crate) buf: &'a mut BytesMut,
    pub(crate) leave_out: Option<&'a [u8]>,
    pub(crate) left_out_at: Option<usize>,
}

impl BytesMutFlavor<'_> {
    /// Appends `data`, or notes its place when it is the first sight of the bytes to leave out.
    pub(crate) fn extend_or_leave_out(&mut self, data: &[u8]) {
        let skip = self.leave_out.is_some_and(|payload| {
            self.left_out_at.is_none()
                && payload.len() == data.len()
                && std::ptr::eq(payload.as_ptr(), data.as_ptr())
        });
        if skip {
            self.left_out_at = Some(self.buf.len());
        } else {
            self.buf.extend_from_slice(data);
        }
    }
}

impl postcard::ser_flavors::Flavor for BytesMutFlavor<'_> {
    type Output = Option<usize>;

    fn try_push(&mut self, data: u8) -> postcard::Result<()> {
        self.buf.put_u8(data);
        Ok(())
    }

    fn try_extend(&mut self, data: &[u8]) -> postcard::Result<()> {
        self.extend_or_leave_out(data);
        Ok(())
    }

    fn finalize(self) -> postcard::Result<Option<usize>> {
        Ok(self.left_out_at)
    }
}
