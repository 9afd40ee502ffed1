//! Where serde writes a cold frame body: straight into a `BytesMut`.

use bytes::{BufMut, BytesMut};

/// A postcard flavor that appends to a `BytesMut`.
pub(crate) struct BytesMutFlavor<'a> {
    pub(crate) buf: &'a mut BytesMut,
}

impl postcard::ser_flavors::Flavor for BytesMutFlavor<'_> {
    type Output = ();

    fn try_push(&mut self, data: u8) -> postcard::Result<()> {
        self.buf.put_u8(data);
        Ok(())
    }

    fn try_extend(&mut self, data: &[u8]) -> postcard::Result<()> {
        self.buf.extend_from_slice(data);
        Ok(())
    }

    fn finalize(self) -> postcard::Result<()> {
        Ok(())
    }
}
