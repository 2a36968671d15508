//! Every prefix of a valid header shorter than the header is `Truncated`, never a panic.

use latnet_wire::*;

use crate::{hex, IGMP_ROUTER_ALERT, LINUX_SYN, MLD_REPORT, UDP_V4};

fn is_truncated<T>(r: Result<T>) -> bool {
    matches!(r, Err(WireError::Truncated { .. }))
}

#[test]
fn ethernet_and_vlan() {
    let f = hex(LINUX_SYN);
    for n in 0..14 {
        assert!(is_truncated(EthernetFrame::new_checked(&f[..n])), "{n}");
    }
    for n in 0..4 {
        assert!(is_truncated(VlanTag::parse(&VlanHeader::new_unchecked(&f[..n]))), "{n}");
    }
}

#[test]
fn ipv4_with_options() {
    let b = hex(IGMP_ROUTER_ALERT);
    for n in 0..24 {
        assert!(is_truncated(Ipv4Packet::new_checked(&b[..n])), "{n}");
        assert!(is_truncated(Ipv4Repr::parse(&Ipv4Packet::new_unchecked(&b[..n]))), "{n}");
    }
    assert!(Ipv4Packet::new_checked(&b[..24]).is_ok());
}

#[test]
fn ipv6_and_hop_by_hop() {
    let f = hex(MLD_REPORT);
    let ip = &f[14..];
    for n in 0..40 {
        assert!(is_truncated(Ipv6Packet::new_checked(&ip[..n])), "{n}");
        assert!(is_truncated(Ipv6Repr::parse(&Ipv6Packet::new_unchecked(&ip[..n]))), "{n}");
    }
    for n in 0..48 {
        assert!(is_truncated(find_upper_layer(&ip[..n])), "{n}");
    }
    let hbh = &f[54..62];
    for n in 0..8 {
        assert!(is_truncated(Ipv6ExtHeader::new_checked(&hbh[..n])), "{n}");
        let h = Ipv6ExtHeader::new_unchecked(&hbh[..n]);
        assert!(is_truncated(Ipv6HopByHopRepr::parse(&h)), "{n}");
    }
}

#[test]
fn udp_and_tcp() {
    let u = hex(UDP_V4);
    for n in 0..8 {
        assert!(is_truncated(UdpPacket::new_checked(&u[20..20 + n])), "{n}");
        assert!(is_truncated(UdpRepr::parse(&UdpPacket::new_unchecked(&u[20..20 + n]))), "{n}");
    }
    let f = hex(LINUX_SYN);
    let t = &f[34..];
    for n in 0..40 {
        assert!(is_truncated(TcpPacket::new_checked(&t[..n])), "{n}");
        assert!(is_truncated(TcpRepr::parse(&TcpPacket::new_unchecked(&t[..n]))), "{n}");
    }
}

#[test]
fn whole_frames() {
    let syn = hex(LINUX_SYN);
    let mld = hex(MLD_REPORT);
    let mut qinq = syn.clone();
    push_vlan(&mut qinq, VlanTag::new(1)).unwrap();
    push_vlan(&mut qinq, VlanTag { tpid: EtherType::QINQ, ..VlanTag::new(2) }).unwrap();
    // Headers end at: SYN 74, MLD 62 (ICMPv6 is not parsed), Q-in-Q SYN 82.
    for (f, hdr_end) in [(&syn, 74), (&mld, 62), (&qinq, 82)] {
        for n in 0..hdr_end {
            let r = parse_headers(&f[..n]);
            assert!(is_truncated(r), "{n}: {r:?}");
            let mut v = f[..n].to_vec();
            let _ = pop_vlan(&mut v);
            let _ = vlan_stack(&f[..n]);
        }
        assert!(parse_headers(&f[..hdr_end]).is_ok());
    }
}
