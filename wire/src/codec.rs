//! `tokio_util::codec` adapter over [`crate::framing`].

use bytes::BytesMut;
use tokio_util::codec::{Decoder, Encoder};

use crate::dialect::{Dialect, FeatureSet};
use crate::error::CodecError;
use crate::frame::Frame;
use crate::framing::{decode_frame, encode_frame, DEFAULT_MAX_FRAME_LEN, LENGTH_PREFIX_LEN};
use crate::kind::FrameKind;
use crate::message::PROTOCOL_VERSION;

/// Length-prefixed postcard frames with a maximum body length, written as a connection of one
/// protocol version (and, from version 4, what its reader listed) carries them; every kind of
/// every version is read.
#[derive(Debug, Clone, Copy)]
pub struct FrameCodec {
    max_frame_len: usize,
    version: u16,
    /// What the other side listed: from version 4, results of its features are written whole.
    listed: FeatureSet,
    /// The kind of the frame decoded last.
    last_kind: Option<FrameKind>,
}

impl FrameCodec {
    /// A codec refusing bodies longer than `max_frame_len` bytes in either direction, writing
    /// frames as [`PROTOCOL_VERSION`] carries them until [`FrameCodec::set_version`].
    pub fn new(max_frame_len: usize) -> Self {
        Self {
            max_frame_len,
            version: PROTOCOL_VERSION,
            listed: FeatureSet::NONE,
            last_kind: None,
        }
    }

    /// The largest body this codec accepts.
    pub fn max_frame_len(&self) -> usize {
        self.max_frame_len
    }

    /// Writes frames as a connection of `version` carries them from now on: the version the
    /// handshake negotiated.
    pub fn set_version(&mut self, version: u16) {
        self.version = version;
    }

    /// The version frames are written as.
    pub fn version(&self) -> u16 {
        self.version
    }

    /// Writes from now on as to a reader that listed `listed` (from version 4: in `Features`,
    /// or a peer's hello).
    pub fn set_listed(&mut self, listed: FeatureSet) {
        self.listed = listed;
    }

    /// What frames are written as: the version and what the reader listed.
    pub fn dialect(&self) -> Dialect {
        Dialect::new(self.version, self.listed)
    }

    /// The kind the frame decoded last came as (a message's kinds decode alike): for those
    /// who check which kind a peer sent.
    pub fn last_kind(&self) -> Option<FrameKind> {
        self.last_kind
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
        // Every kind is one byte: its number is below 128.
        let kind = src.get(LENGTH_PREFIX_LEN).copied();
        let frame = decode_frame(src, self.max_frame_len)?;
        if frame.is_some() {
            self.last_kind = kind.and_then(|kind| FrameKind::from_discriminant(u32::from(kind)));
        }
        Ok(frame)
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
        Ok(encode_frame(
            frame,
            self.dialect(),
            dst,
            self.max_frame_len,
        )?)
    }
}

impl Encoder<Frame> for FrameCodec {
    type Error = CodecError;

    fn encode(&mut self, frame: Frame, dst: &mut BytesMut) -> Result<(), CodecError> {
        Ok(encode_frame(
            &frame,
            self.dialect(),
            dst,
            self.max_frame_len,
        )?)
    }
}
