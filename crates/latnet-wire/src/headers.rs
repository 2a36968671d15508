//! [`parse_headers`]: the one-call header walk a switch runs on every packet.
//!
//! It validates Ethernet, the tag stack, the IP header (IPv4 with options, or IPv6 with its
//! extension headers) and the UDP or TCP header, and returns their offsets and the flow key. It
//! allocates nothing, copies only the key fields, and never panics.
//!
//! Like the views, it checks only that headers are present and self-consistent: the payload may
//! be virtual. Beyond the views' checks it requires the IP version to match the ethertype, and
//! the L4 header to lie within the IP datagram's declared length. It does not verify checksums
//! (use [`crate::Ipv4Packet::verify_checksum`] where that matters). In errors, `need` and `have`
//! count bytes from the start of the frame.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use crate::error::{need, Layer, Result, WireError};
use crate::ethernet::EtherType;
use crate::ip::{protocol, Ecn};
use crate::util::be16;
use crate::{ipv4, ipv6, ipv6_ext, tcp, udp, vlan};

/// Where the network-layer header is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum L3 {
    /// IPv4 header at `offset`, `header_len` bytes long (options included).
    Ipv4 {
        /// Offset of the IPv4 header in the frame.
        offset: usize,
        /// IPv4 header length (IHL x 4).
        header_len: usize,
    },
    /// IPv6 header at `offset`; the upper-layer header (after extension headers) at
    /// `upper_offset`.
    Ipv6 {
        /// Offset of the IPv6 header in the frame.
        offset: usize,
        /// Offset of the upper-layer header in the frame.
        upper_offset: usize,
    },
    /// Neither IPv4 nor IPv6: the ethertype after the tags.
    Other(EtherType),
}

/// Where the transport header is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum L4 {
    /// UDP header at this frame offset.
    Udp {
        /// Offset of the UDP header in the frame.
        offset: usize,
    },
    /// TCP header at this frame offset.
    Tcp {
        /// Offset of the TCP header in the frame.
        offset: usize,
    },
    /// Another upper-layer protocol (ICMP, ...): not parsed.
    Other(u8),
    /// No transport header: not IP, or a fragment other than the first.
    None,
}

/// The fields a switch classifies on.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct FlowKey {
    /// Source address.
    pub src: IpAddr,
    /// Destination address.
    pub dst: IpAddr,
    /// Upper-layer protocol (after IPv6 extension headers).
    pub proto: u8,
    /// Source port (0 unless UDP or TCP).
    pub src_port: u16,
    /// Destination port (0 unless UDP or TCP).
    pub dst_port: u16,
    /// DSCP.
    pub dscp: u8,
    /// ECN field.
    pub ecn: Ecn,
}

/// Result of [`parse_headers`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Headers {
    /// Number of 802.1Q / 802.1ad tags.
    pub vlan_tags: u8,
    /// Network layer.
    pub l3: L3,
    /// Transport layer.
    pub l4: L4,
    /// Flow key, for IP packets.
    pub key: Option<FlowKey>,
}

impl Headers {
    /// Offset of the IP header, if any.
    pub fn l3_offset(&self) -> Option<usize> {
        match self.l3 {
            L3::Ipv4 { offset, .. } | L3::Ipv6 { offset, .. } => Some(offset),
            L3::Other(_) => None,
        }
    }

    /// Offset of the UDP or TCP header, if any.
    pub fn l4_offset(&self) -> Option<usize> {
        match self.l4 {
            L4::Udp { offset } | L4::Tcp { offset } => Some(offset),
            L4::Other(_) | L4::None => None,
        }
    }
}

/// Shifts the counts of a `Truncated` error by `by` bytes.
fn shift(e: WireError, by: usize) -> WireError {
    match e {
        WireError::Truncated { layer, need, have } => {
            WireError::Truncated { layer, need: need + by, have: have + by }
        }
        other => other,
    }
}

/// Validates the transport header at `off`, `avail` being the bytes the IP layer declares
/// from `off` on. Returns the L4 location and the ports.
#[inline]
fn transport(
    frame: &[u8],
    proto: u8,
    off: usize,
    avail: usize,
    ip_layer: Layer,
) -> Result<(L4, u16, u16)> {
    let len = frame.len();
    match proto {
        protocol::UDP => {
            need(Layer::Udp, off + udp::HEADER_LEN, len)?;
            if avail < udp::HEADER_LEN {
                return Err(WireError::malformed(ip_layer, "length"));
            }
            let ulen = usize::from(be16(frame, off + 4));
            if ulen < udp::HEADER_LEN || ulen > avail {
                return Err(WireError::malformed(Layer::Udp, "length"));
            }
            Ok((L4::Udp { offset: off }, be16(frame, off), be16(frame, off + 2)))
        }
        protocol::TCP => {
            need(Layer::Tcp, off + tcp::HEADER_LEN, len)?;
            let hl = usize::from(frame[off + 12] >> 4) * 4;
            if hl < tcp::HEADER_LEN {
                return Err(WireError::malformed(Layer::Tcp, "data offset"));
            }
            need(Layer::Tcp, off + hl, len)?;
            if avail < hl {
                return Err(WireError::malformed(ip_layer, "length"));
            }
            Ok((L4::Tcp { offset: off }, be16(frame, off), be16(frame, off + 2)))
        }
        p => Ok((L4::Other(p), 0, 0)),
    }
}

/// Walks Ethernet, tags, IP and UDP/TCP headers of `frame`; see the module docs.
pub fn parse_headers(frame: &[u8]) -> Result<Headers> {
    let (tags, ethertype) = vlan::walk(frame)?;
    let l3off = 14 + vlan::TAG_LEN * tags;
    let len = frame.len();
    let vlan_tags = tags as u8;
    match ethertype {
        EtherType::IPV4 => {
            need(Layer::Ipv4, l3off + ipv4::HEADER_LEN, len)?;
            let ip = &frame[l3off..];
            if ip[0] >> 4 != 4 {
                return Err(WireError::malformed(Layer::Ipv4, "version"));
            }
            let hl = usize::from(ip[0] & 0x0f) * 4;
            if hl < ipv4::HEADER_LEN {
                return Err(WireError::malformed(Layer::Ipv4, "ihl"));
            }
            need(Layer::Ipv4, l3off + hl, len)?;
            let total = usize::from(be16(ip, 2));
            if total < hl {
                return Err(WireError::malformed(Layer::Ipv4, "total_len"));
            }
            let proto = ip[9];
            let tos = ip[1];
            let src = Ipv4Addr::new(ip[12], ip[13], ip[14], ip[15]);
            let dst = Ipv4Addr::new(ip[16], ip[17], ip[18], ip[19]);
            let later_fragment = be16(ip, 6) & 0x1fff != 0;
            let (l4, sp, dp) = if later_fragment {
                (L4::None, 0, 0)
            } else {
                transport(frame, proto, l3off + hl, total - hl, Layer::Ipv4)?
            };
            Ok(Headers {
                vlan_tags,
                l3: L3::Ipv4 { offset: l3off, header_len: hl },
                l4,
                key: Some(FlowKey {
                    src: IpAddr::V4(src),
                    dst: IpAddr::V4(dst),
                    proto,
                    src_port: sp,
                    dst_port: dp,
                    dscp: tos >> 2,
                    ecn: Ecn::from_bits(tos),
                }),
            })
        }
        EtherType::IPV6 => {
            need(Layer::Ipv6, l3off + ipv6::HEADER_LEN, len)?;
            let ip = &frame[l3off..];
            if ip[0] >> 4 != 6 {
                return Err(WireError::malformed(Layer::Ipv6, "version"));
            }
            let up = ipv6_ext::find_upper_layer(ip).map_err(|e| shift(e, l3off))?;
            let end = ipv6::HEADER_LEN + usize::from(be16(ip, 4));
            let upper_offset = l3off + up.offset;
            let (l4, sp, dp) = if up.later_fragment {
                (L4::None, 0, 0)
            } else {
                transport(frame, up.protocol, upper_offset, end - up.offset, Layer::Ipv6)?
            };
            let tc = (ip[0] << 4) | (ip[1] >> 4);
            let mut s = [0u8; 16];
            s.copy_from_slice(&ip[8..24]);
            let mut d = [0u8; 16];
            d.copy_from_slice(&ip[24..40]);
            Ok(Headers {
                vlan_tags,
                l3: L3::Ipv6 { offset: l3off, upper_offset },
                l4,
                key: Some(FlowKey {
                    src: IpAddr::V6(Ipv6Addr::from(s)),
                    dst: IpAddr::V6(Ipv6Addr::from(d)),
                    proto: up.protocol,
                    src_port: sp,
                    dst_port: dp,
                    dscp: tc >> 2,
                    ecn: Ecn::from_bits(tc),
                }),
            })
        }
        other => Ok(Headers { vlan_tags, l3: L3::Other(other), l4: L4::None, key: None }),
    }
}
