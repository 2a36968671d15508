//! LBF flows' frames: their addresses (IPv4, or IPv6 with `encap = "ipv6"`) and the template
//! a sender fills, with the block where the flow carries it.

use super::*;

/// Whether flow `f` carries its SLO in an IPv6 hop-by-hop option (its frames are IPv6).
pub fn uses_ipv6(f: &FlowSpec) -> bool {
    f.slo.is_some_and(|s| s.encap == Encap::Ipv6)
}

/// The address node `n` has in flow `f`'s frames: its IPv4 address, or [`ipv6_of`] it when
/// the flow [`uses_ipv6`].
pub fn flow_address(sc: &Scenario, f: &FlowSpec, n: usize) -> IpAddr {
    let v4 = sc.nodes[n].address;
    if uses_ipv6(f) {
        IpAddr::V6(ipv6_of(v4))
    } else {
        IpAddr::V4(v4)
    }
}

/// The IPv6 address of a node with IPv4 address `v4` when its flows use `encap = "ipv6"`:
/// `2001:db8::<v4>`.
pub fn ipv6_of(v4: Ipv4Addr) -> Ipv6Addr {
    let o = v4.octets();
    Ipv6Addr::new(
        0x2001,
        0x0db8,
        0,
        0,
        0,
        0,
        u16::from_be_bytes([o[0], o[1]]),
        u16::from_be_bytes([o[2], o[3]]),
    )
}

/// The block mode that carries the latency so far as `carry` says.
pub(super) fn wire_mode(carry: Carry) -> LbfMode {
    match carry {
        Carry::LatencySoFar => LbfMode::LatencySoFar,
        Carry::Timestamp => LbfMode::SenderTimestamp,
        Carry::RestSlo => LbfMode::RestSlo,
        Carry::Damper => LbfMode::Damper,
    }
}

/// The header bytes of a flow carrying an LBF block, with the block's offset in them.
#[allow(clippy::too_many_arguments)]
pub fn template(
    src_node: usize,
    dst_node: usize,
    src: Ipv4Addr,
    dst: Ipv4Addr,
    dscp: u8,
    src_port: u16,
    dst_port: u16,
    frame_len: usize,
    slo: &SloSpec,
) -> Result<(Vec<u8>, usize), WireError> {
    let repr = LbfRepr {
        mode: wire_mode(slo.carry),
        late: false,
        lower_ns: slo.lower.as_nanos(),
        upper_ns: slo.upper.map(Duration::as_nanos),
        value_ns: 0,
    };
    let mut frame = Vec::with_capacity(96);
    let (smac, dmac) = (hdr::mac_of(src_node), hdr::mac_of(dst_node));
    match slo.encap {
        Encap::UdpShim => {
            let payload = frame_len.saturating_sub(42 + wire::SHIM_LEN);
            wire::build_udp_ipv4_shim(
                &mut frame, smac, dmac, src, dst, dscp, 64, src_port, dst_port, &repr, payload,
            )?;
            Ok((frame, 42 + wire::SHIM_HEADER_LEN))
        }
        Encap::Ipv6 => {
            let payload = frame_len.saturating_sub(62 + wire::HBH_LEN);
            wire::build_udp_ipv6_hbh(
                &mut frame,
                smac,
                dmac,
                ipv6_of(src),
                ipv6_of(dst),
                dscp,
                64,
                src_port,
                dst_port,
                &repr,
                payload,
            )?;
            Ok((frame, 14 + 40 + 4))
        }
    }
}

/// Scenario name of a carry mode.
pub fn carry_name(c: Carry) -> &'static str {
    match c {
        Carry::LatencySoFar => "latency-so-far",
        Carry::Timestamp => "timestamp",
        Carry::RestSlo => "rest-slo",
        Carry::Damper => "damper",
    }
}

/// Addresses under which a host receives: its IPv4 address and the IPv6 one of
/// [`ipv6_of`].
pub fn host_addresses(v4: Ipv4Addr) -> [IpAddr; 2] {
    [IpAddr::V4(v4), IpAddr::V6(ipv6_of(v4))]
}
