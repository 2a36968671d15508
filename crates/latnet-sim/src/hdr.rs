//! The simulator's use of real headers, in one place: building a flow's frame template and
//! reading what forwarding needs from a frame. Everything goes through `latnet-wire`.

use latnet_wire::{EthernetAddress, Headers, Ipv4Packet, Ipv6Packet, Layer, WireError, L3, L4};
use std::net::{IpAddr, Ipv4Addr};

/// What a switch needs from a frame to forward it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RouteInfo {
    /// Destination address.
    pub dst: IpAddr,
    /// DSCP of the IP header.
    pub dscp: u8,
    /// Where the IP header is.
    pub l3: L3,
    /// Where the transport header is (TCP segments go to the host's TCP).
    pub l4: L4,
    /// Everything the header walk found (a host's TCP reads its segment from it).
    pub headers: Headers,
}

/// MAC address of node `i` (locally administered).
pub fn mac_of(i: usize) -> EthernetAddress {
    let b = (i as u32).to_be_bytes();
    EthernetAddress([0x02, 0x00, b[0], b[1], b[2], b[3]])
}

/// The header bytes of every packet of a UDP/IPv4 flow (42 bytes); `frame_len` is the full
/// frame length, the part beyond the headers is virtual payload.
#[allow(clippy::too_many_arguments)]
pub fn udp_template(
    src_node: usize,
    dst_node: usize,
    src: Ipv4Addr,
    dst: Ipv4Addr,
    dscp: u8,
    src_port: u16,
    dst_port: u16,
    frame_len: usize,
) -> Result<Vec<u8>, WireError> {
    let mut frame = Vec::with_capacity(64);
    let payload = frame_len.saturating_sub(latnet_wire::build::UDP_IPV4_HEADERS_LEN);
    latnet_wire::build_udp_ipv4(
        &mut frame,
        mac_of(src_node),
        mac_of(dst_node),
        src,
        dst,
        dscp,
        latnet_wire::Ecn::NotEct,
        64,
        src_port,
        dst_port,
        payload,
    )?;
    Ok(frame)
}

/// Destination, DSCP and IP header position of a frame.
#[inline]
pub fn route_info(frame: &[u8]) -> Result<RouteInfo, WireError> {
    let h = latnet_wire::parse_headers(frame)?;
    let key = h.key.ok_or(WireError::Unsupported { layer: Layer::Ethernet, what: "not IP" })?;
    Ok(RouteInfo { dst: key.dst, dscp: key.dscp, l3: h.l3, l4: h.l4, headers: h })
}

/// Decrement the IPv4 TTL / IPv6 hop limit of a frame parsed by [`route_info`], in place.
/// `false` if it reached zero (the packet must be dropped).
#[inline]
pub fn decrement_ttl(frame: &mut [u8], l3: L3) -> bool {
    match l3 {
        L3::Ipv4 { offset, .. } => match frame.get_mut(offset..).map(Ipv4Packet::new_checked) {
            Some(Ok(mut ip)) => ip.decrement_ttl() > 0,
            _ => false,
        },
        L3::Ipv6 { offset, .. } => match frame.get_mut(offset..).map(Ipv6Packet::new_checked) {
            Some(Ok(mut ip)) => ip.decrement_hop_limit() > 0,
            _ => false,
        },
        L3::Other(_) => true,
    }
}
