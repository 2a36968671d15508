//! Header builders for simulators and tests: write the Ethernet, IP and UDP/TCP headers of a
//! packet whose payload is *virtual* (counted in the length fields, not written).
//!
//! Each builder clears `frame` and writes only the headers (42 bytes for UDP over IPv4, 62 over
//! IPv6, 54 / 74 plus options for TCP), reusing the vector's capacity. IPv4 headers get
//! identification 0, don't-fragment set and a correct header checksum.
//!
//! Checksums of the transport layer:
//! * UDP over IPv4: 0 ("no checksum", RFC 768), so nothing depends on the virtual payload;
//! * UDP over IPv6, where 0 is not allowed (RFC 8200 section 8.1), and TCP over either family:
//!   computed as if the virtual payload were all zeros. [`crate::UdpPacket::fill_checksum`] and
//!   [`crate::TcpPacket::fill_checksum`] give the same value for a buffer that holds the
//!   zero-filled payload.
//!
//! On error (a field out of range, a payload too long for the length fields) `frame` is left
//! unchanged.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use crate::error::{Layer, Result, WireError};
use crate::ethernet::{EtherType, EthernetAddress, EthernetFrame, EthernetRepr};
use crate::ip::{protocol, Ecn};
use crate::ipv4::{Ipv4Packet, Ipv4Repr};
use crate::ipv6::{Ipv6Packet, Ipv6Repr};
use crate::tcp::{TcpPacket, TcpRepr};
use crate::udp::{UdpPacket, UdpRepr};
use crate::{ethernet, ipv4, ipv6, udp};

/// Length of the headers [`build_udp_ipv4`] writes.
pub const UDP_IPV4_HEADERS_LEN: usize = ethernet::HEADER_LEN + ipv4::HEADER_LEN + udp::HEADER_LEN;
/// Length of the headers [`build_udp_ipv6`] writes.
pub const UDP_IPV6_HEADERS_LEN: usize = ethernet::HEADER_LEN + ipv6::HEADER_LEN + udp::HEADER_LEN;

fn ipv4_repr(
    src: Ipv4Addr,
    dst: Ipv4Addr,
    dscp: u8,
    ecn: Ecn,
    ttl: u8,
    protocol: u8,
    payload_len: usize,
) -> Ipv4Repr<'static> {
    Ipv4Repr {
        src_addr: src,
        dst_addr: dst,
        protocol,
        dscp,
        ecn,
        ident: 0,
        dont_frag: true,
        more_frags: false,
        frag_offset: 0,
        ttl,
        payload_len,
        options: &[],
    }
}

fn ipv6_repr(
    src: Ipv6Addr,
    dst: Ipv6Addr,
    dscp: u8,
    ecn: Ecn,
    hop_limit: u8,
    next_header: u8,
    payload_len: usize,
) -> Ipv6Repr {
    Ipv6Repr {
        src_addr: src,
        dst_addr: dst,
        next_header,
        payload_len,
        hop_limit,
        dscp,
        ecn,
        flow_label: 0,
    }
}

fn ethernet(frame: &mut [u8], src_mac: EthernetAddress, dst_mac: EthernetAddress, t: EtherType) {
    let repr = EthernetRepr { src_addr: src_mac, dst_addr: dst_mac, ethertype: t };
    repr.emit(&mut EthernetFrame::new_unchecked(frame));
}

fn udp_repr(src_port: u16, dst_port: u16, payload_len: usize) -> Result<(UdpRepr, usize)> {
    let repr = UdpRepr { src_port, dst_port, payload_len };
    repr.check()?;
    Ok((repr, udp::HEADER_LEN + payload_len))
}

/// Writes the 42 header bytes of a UDP/IPv4 packet with a `payload_len`-byte virtual payload
/// (counted in the IP total length and UDP length, not written). UDP checksum 0.
///
/// Errors: DSCP over 63, or a payload that does not fit the 16-bit length fields.
#[allow(clippy::too_many_arguments)] // mirrors the header fields one to one
pub fn build_udp_ipv4(
    frame: &mut Vec<u8>,
    src_mac: EthernetAddress,
    dst_mac: EthernetAddress,
    src: Ipv4Addr,
    dst: Ipv4Addr,
    dscp: u8,
    ecn: Ecn,
    ttl: u8,
    src_port: u16,
    dst_port: u16,
    payload_len: usize,
) -> Result<()> {
    let (udp, ip_payload) = udp_repr(src_port, dst_port, payload_len)?;
    let ip = ipv4_repr(src, dst, dscp, ecn, ttl, protocol::UDP, ip_payload);
    ip.check()?;
    frame.clear();
    frame.resize(UDP_IPV4_HEADERS_LEN, 0);
    let (eth, rest) = frame.split_at_mut(ethernet::HEADER_LEN);
    ethernet(eth, src_mac, dst_mac, EtherType::IPV4);
    let (l3, l4) = rest.split_at_mut(ipv4::HEADER_LEN);
    ip.emit(&mut Ipv4Packet::new_unchecked(l3));
    udp.emit(&mut UdpPacket::new_unchecked(l4));
    Ok(())
}

/// Writes the 62 header bytes of a UDP/IPv6 packet with a `payload_len`-byte virtual payload.
/// Flow label 0. The UDP checksum is computed as if the payload were zeros (IPv6 forbids 0).
///
/// Errors: DSCP over 63, or a payload that does not fit the 16-bit length fields.
#[allow(clippy::too_many_arguments)] // mirrors the header fields one to one
pub fn build_udp_ipv6(
    frame: &mut Vec<u8>,
    src_mac: EthernetAddress,
    dst_mac: EthernetAddress,
    src: Ipv6Addr,
    dst: Ipv6Addr,
    dscp: u8,
    ecn: Ecn,
    hop_limit: u8,
    src_port: u16,
    dst_port: u16,
    payload_len: usize,
) -> Result<()> {
    let (udp, ip_payload) = udp_repr(src_port, dst_port, payload_len)?;
    let ip = ipv6_repr(src, dst, dscp, ecn, hop_limit, protocol::UDP, ip_payload);
    ip.check()?;
    frame.clear();
    frame.resize(UDP_IPV6_HEADERS_LEN, 0);
    let (eth, rest) = frame.split_at_mut(ethernet::HEADER_LEN);
    ethernet(eth, src_mac, dst_mac, EtherType::IPV6);
    let (l3, l4) = rest.split_at_mut(ipv6::HEADER_LEN);
    ip.emit(&mut Ipv6Packet::new_unchecked(l3));
    let mut p = UdpPacket::new_unchecked(l4);
    udp.emit(&mut p);
    p.fill_checksum(&IpAddr::V6(src), &IpAddr::V6(dst))
}

fn tcp_segment_len(repr: &TcpRepr<'_>, payload_len: usize) -> Result<usize> {
    repr.check()?;
    repr.header_len()
        .checked_add(payload_len)
        .filter(|&n| n <= usize::from(u16::MAX))
        .ok_or(WireError::malformed(Layer::Tcp, "segment length"))
}

/// Writes the headers of a TCP/IPv4 packet (54 bytes plus TCP options) with a
/// `payload_len`-byte virtual payload. The TCP checksum is computed as if the payload were
/// zeros.
///
/// Errors: DSCP over 63, `repr` failing [`TcpRepr::check`], or a segment too long for IPv4.
#[allow(clippy::too_many_arguments)] // mirrors the header fields one to one
pub fn build_tcp_ipv4(
    frame: &mut Vec<u8>,
    src_mac: EthernetAddress,
    dst_mac: EthernetAddress,
    src: Ipv4Addr,
    dst: Ipv4Addr,
    dscp: u8,
    ecn: Ecn,
    ttl: u8,
    repr: &TcpRepr<'_>,
    payload_len: usize,
) -> Result<()> {
    let seg = tcp_segment_len(repr, payload_len)?;
    let ip = ipv4_repr(src, dst, dscp, ecn, ttl, protocol::TCP, seg);
    ip.check()?;
    frame.clear();
    frame.resize(ethernet::HEADER_LEN + ipv4::HEADER_LEN + repr.header_len(), 0);
    let (eth, rest) = frame.split_at_mut(ethernet::HEADER_LEN);
    ethernet(eth, src_mac, dst_mac, EtherType::IPV4);
    let (l3, l4) = rest.split_at_mut(ipv4::HEADER_LEN);
    ip.emit(&mut Ipv4Packet::new_unchecked(l3));
    let mut p = TcpPacket::new_unchecked(l4);
    repr.emit(&mut p);
    p.fill_checksum(&IpAddr::V4(src), &IpAddr::V4(dst), seg)
}

/// Writes the headers of a TCP/IPv6 packet (74 bytes plus TCP options) with a
/// `payload_len`-byte virtual payload. Flow label 0. The TCP checksum is computed as if the
/// payload were zeros.
///
/// Errors: DSCP over 63, `repr` failing [`TcpRepr::check`], or a segment over 65535 bytes.
#[allow(clippy::too_many_arguments)] // mirrors the header fields one to one
pub fn build_tcp_ipv6(
    frame: &mut Vec<u8>,
    src_mac: EthernetAddress,
    dst_mac: EthernetAddress,
    src: Ipv6Addr,
    dst: Ipv6Addr,
    dscp: u8,
    ecn: Ecn,
    hop_limit: u8,
    repr: &TcpRepr<'_>,
    payload_len: usize,
) -> Result<()> {
    let seg = tcp_segment_len(repr, payload_len)?;
    let ip = ipv6_repr(src, dst, dscp, ecn, hop_limit, protocol::TCP, seg);
    ip.check()?;
    frame.clear();
    frame.resize(ethernet::HEADER_LEN + ipv6::HEADER_LEN + repr.header_len(), 0);
    let (eth, rest) = frame.split_at_mut(ethernet::HEADER_LEN);
    ethernet(eth, src_mac, dst_mac, EtherType::IPV6);
    let (l3, l4) = rest.split_at_mut(ipv6::HEADER_LEN);
    ip.emit(&mut Ipv6Packet::new_unchecked(l3));
    let mut p = TcpPacket::new_unchecked(l4);
    repr.emit(&mut p);
    p.fill_checksum(&IpAddr::V6(src), &IpAddr::V6(dst), seg)
}
