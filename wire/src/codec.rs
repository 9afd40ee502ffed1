//! `tokio_util::codec` adapter over [`crate::framing`].

use bytes::BytesMut;
use tokio_util::codec::{Decoder, Encoder};

use crate::error::CodecError;
use crate::frame::Frame;
use crate::framing::{decode_frame, encode_frame, DEFAULT_MAX_FRAME_LEN};

/// Length-prefixed postcard frames with a maximum body length.
#[derive(Debug, Clone, Copy)]
pub struct FrameCodec {
    max_frame_len: usize,
}

impl FrameCodec {
    /// A codec refusing bodies longer than `max_frame_len` bytes in either direction.
    pub fn new(max_frame_len: usize) -> Self {
        Self { max_frame_len }
    }

    /// The largest body this codec accepts.
    pub fn max_frame_len(&self) -> usize {
        self.max_frame_len
    }
}

impl Default for FrameCodec {
    fn default() -> Self {
        Self::new(DEFAULT_MAX_FRAME_LEN)
    }
}

impl Decoder for FrameCodec {
    type Item = Frame;
    type Error = CodecError;

    #[inline]
    fn decode(&mut self, src: &mut BytesMut) -> Result<Option<Frame>, CodecError> {
        Ok(decode_frame(src, self.max_frame_len)?)
    }

    fn decode_eof(&mut self, src: &mut BytesMut) -> Result<Option<Frame>, CodecError> {
        match self.decode(src)? {
            Some(frame) => Ok(Some(frame)),
            None if src.is_empty() => Ok(None),
            None => Err(CodecError::Truncated {
                buffered: src.len(),
            }),
        }
    }
}

impl Encoder<&Frame> for FrameCodec {
    type Error = CodecError;

    fn encode(&mut self, frame: &Frame, dst: &mut BytesMut) -> Result<(), CodecError> {
        Ok(encode_frame(frame, dst, self.max_frame_len)?)
    }
}

impl Encoder<Frame> for FrameCodec {
    type Error = CodecError;

    fn encode(&mut self, frame: Frame, dst: &mut BytesMut) -> Result<(), CodecError> {
        Ok(encode_frame(&frame, dst, self.max_frame_len)?)
    }
}
