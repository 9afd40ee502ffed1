//! A [`NodeRouting`], carried by submissions and relays.

use crate::cursor::Names;
use crate::cursor::{bytes_len, list_len, read_list, write_list, Read, Reader, Writer};
use crate::message::{NodeRouting, RoutingRef};

impl RoutingRef<'_> {
    pub fn encoded_len(&self) -> usize {
        1 + match self {
            NodeRouting::Any => 0,
            NodeRouting::Pin(node) => bytes_len(node.len()),
            NodeRouting::Prefer(nodes) | NodeRouting::Require(nodes) => list_len(nodes),
        }
    }

    pub(crate) fn encode(&self, out: &mut Writer<'_>) {
        match self {
            NodeRouting::Any => out.u8(0),
            NodeRouting::Pin(node) => {
                out.u8(1);
                out.str(node);
            }
            NodeRouting::Prefer(nodes) => {
                out.u8(2);
                write_list(nodes, out);
            }
            NodeRouting::Require(nodes) => {
                out.u8(3);
                write_list(nodes, out);
            }
        }
    }
}

impl<'a> RoutingRef<'a> {
    #[inline]
    pub(crate) fn decode(input: &mut Reader<'a>) -> Read<Self> {
        Ok(match input.variant()? {
            0 => NodeRouting::Any,
            1 => NodeRouting::Pin(input.str()?),
            2 => NodeRouting::Prefer(read_list(input)?),
            3 => NodeRouting::Require(read_list(input)?),
            _ => return Err(postcard::Error::SerdeDeCustom),
        })
    }

    /// The same view for a shorter lifetime.
    pub fn reborrow<'b>(&self) -> RoutingRef<'b>
    where
        'a: 'b,
    {
        match self {
            NodeRouting::Any => NodeRouting::Any,
            NodeRouting::Pin(node) => NodeRouting::Pin(*node),
            NodeRouting::Prefer(nodes) => NodeRouting::Prefer(*nodes),
            NodeRouting::Require(nodes) => NodeRouting::Require(*nodes),
        }
    }

    /// An owned copy, for a routing kept beyond the frame it arrived in.
    pub fn into_owned(self) -> NodeRouting {
        match self {
            NodeRouting::Any => NodeRouting::Any,
            NodeRouting::Pin(node) => NodeRouting::Pin(node.to_owned()),
            NodeRouting::Prefer(nodes) => NodeRouting::Prefer(nodes.to_vec()),
            NodeRouting::Require(nodes) => NodeRouting::Require(nodes.to_vec()),
        }
    }
}

impl NodeRouting {
    /// The routing lent, to encode or read without copying it.
    pub fn view(&self) -> RoutingRef<'_> {
        match self {
            NodeRouting::Any => NodeRouting::Any,
            NodeRouting::Pin(node) => NodeRouting::Pin(node.as_str()),
            NodeRouting::Prefer(nodes) => NodeRouting::Prefer(Names::of(nodes)),
            NodeRouting::Require(nodes) => NodeRouting::Require(Names::of(nodes)),
        }
    }
}
