//! Byte vectors: parse, check every field, emit back the same bytes.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use latnet_wire::checksum;
use latnet_wire::*;

use crate::{hex, CLASSIC_IPV4, IGMP_ROUTER_ALERT, LINUX_SYN, MLD_REPORT, UDP_V4, UDP_V6};

#[test]
fn rfc1071_numerical_example() {
    let b = hex("00 01 f2 03 f4 f5 f6 f7");
    assert_eq!(checksum::data(&b), 0xddf2);
    // Odd length: the last byte is padded with a zero byte.
    assert_eq!(checksum::data(&b[..7]), checksum::data(&hex("00 01 f2 03 f4 f5 f6 00")));
}

#[test]
fn classic_ipv4_header() {
    let b = hex(CLASSIC_IPV4);
    let p = Ipv4Packet::new_checked(&b[..]).unwrap();
    assert_eq!(p.version(), 4);
    assert_eq!(p.header_len(), 20);
    assert_eq!(p.total_len(), 115);
    assert!(p.dont_frag() && !p.more_frags());
    assert_eq!((p.ttl(), p.protocol(), p.checksum()), (64, protocol::UDP, 0xb861));
    assert_eq!(p.src_addr(), Ipv4Addr::new(192, 168, 0, 1));
    assert_eq!(p.dst_addr(), Ipv4Addr::new(192, 168, 0, 199));
    assert!(p.verify_checksum());
    assert_eq!(p.payload_missing(), 95);
    let r = Ipv4Repr::parse(&p).unwrap();
    assert_eq!(r.payload_len, 95);
    let mut out = vec![0xee; r.buffer_len()];
    r.emit(&mut Ipv4Packet::new_unchecked(&mut out[..]));
    assert_eq!(out, b);
    // A wrong checksum is refused by the repr, not by the view.
    let mut bad = b.clone();
    bad[11] ^= 1;
    let p = Ipv4Packet::new_checked(&bad[..]).unwrap();
    assert_eq!(
        Ipv4Repr::parse(&p),
        Err(WireError::Malformed { layer: Layer::Ipv4, field: "checksum" })
    );
}

#[test]
fn incremental_rewrites_equal_full_recompute() {
    let b = hex(CLASSIC_IPV4);
    for ecn in [Ecn::NotEct, Ecn::Ect1, Ecn::Ect0, Ecn::Ce] {
        for dscp in [0, 10, 46, 63] {
            let mut inc = b.clone();
            let mut p = Ipv4Packet::new_checked(&mut inc[..]).unwrap();
            p.set_ecn(ecn);
            p.set_dscp(dscp);
            assert_eq!(p.decrement_ttl(), 63);
            assert!(p.verify_checksum());
            let c = p.checksum();
            p.fill_checksum();
            assert_eq!(p.checksum(), c, "ecn {ecn} dscp {dscp}");
            assert_eq!((p.ecn(), p.dscp(), p.ttl()), (ecn, dscp, 63));
        }
    }
    let mut b = b;
    let mut p = Ipv4Packet::new_checked(&mut b[..]).unwrap();
    p.set_ttl(1);
    assert_eq!(p.decrement_ttl(), 0);
    assert_eq!(p.decrement_ttl(), 0);
    assert!(p.verify_checksum());
}

#[test]
fn ipv4_router_alert_option() {
    let b = hex(IGMP_ROUTER_ALERT);
    let p = Ipv4Packet::new_checked(&b[..]).unwrap();
    assert_eq!(p.header_len(), 24);
    assert!(p.verify_checksum());
    let opts: Vec<_> = p.options_iter().collect::<Result<_>>().unwrap();
    assert_eq!(opts, [Ipv4Option::new(Ipv4Option::ROUTER_ALERT, &[0, 0])]);
    assert!(opts[0].copied());
    let r = Ipv4Repr::parse(&p).unwrap();
    assert_eq!(Ipv4OptionBuf::new(&opts).unwrap().as_slice(), r.options);
    let mut out = vec![0; r.buffer_len()];
    r.emit(&mut Ipv4Packet::new_unchecked(&mut out[..]));
    assert_eq!(out, b[..24]);
    assert_eq!(p.payload(), &b[24..]);
    assert_eq!(p.payload_missing(), 0);
    // A router-alert option whose length runs past IHL is malformed.
    let mut bad = b.clone();
    bad[21] = 6;
    let p = Ipv4Packet::new_checked(&mut bad[..]).unwrap();
    assert_eq!(
        p.options_iter().next(),
        Some(Err(WireError::Malformed { layer: Layer::Ipv4Option, field: "length" }))
    );
}

#[test]
fn linux_syn() {
    let f = hex(LINUX_SYN);
    let h = parse_headers(&f).unwrap();
    assert_eq!(h.vlan_tags, 0);
    assert_eq!(h.l3, L3::Ipv4 { offset: 14, header_len: 20 });
    assert_eq!(h.l4, L4::Tcp { offset: 34 });
    let key = h.key.unwrap();
    assert_eq!(key.src, IpAddr::V4(Ipv4Addr::new(192, 168, 1, 3)));
    assert_eq!(key.dst, IpAddr::V4(Ipv4Addr::new(63, 116, 243, 97)));
    assert_eq!((key.proto, key.src_port, key.dst_port), (6, 58816, 80));
    assert_eq!((key.dscp, key.ecn), (0, Ecn::NotEct));

    let eth = EthernetFrame::new_checked(&f[..]).unwrap();
    assert_eq!(eth.dst_addr().to_string(), "00:26:62:2f:47:87");
    assert_eq!(eth.ethertype(), EtherType::IPV4);
    let ip = Ipv4Packet::new_checked(eth.payload()).unwrap();
    assert!(ip.verify_checksum());
    let tcp = TcpPacket::new_checked(ip.payload()).unwrap();
    let (src, dst) = (IpAddr::V4(ip.src_addr()), IpAddr::V4(ip.dst_addr()));
    assert_eq!(tcp.verify_checksum(&src, &dst, 40), Some(true));
    assert_eq!(tcp.verify_checksum(&src, &dst, 41), None);
    let r = TcpRepr::parse(&tcp).unwrap();
    assert_eq!(r.seq_number, TcpSeqNumber(0xe594_3daa));
    assert_eq!(r.flags, TcpFlags::SYN);
    assert_eq!(r.window_len, 5840);
    assert_eq!(r.header_len(), 40);
    assert_eq!(r.max_seg_size(), Some(1460));
    assert!(r.sack_permitted());
    assert_eq!(r.timestamp(), Some((0x0017_9565, 0)));
    assert_eq!(r.window_scale(), Some(7));
    assert_eq!(r.sack_blocks(), None);
    let opts: Vec<_> = r.options_iter().collect::<Result<_>>().unwrap();
    assert_eq!(
        opts,
        [
            TcpOption::MaxSegmentSize(1460),
            TcpOption::SackPermitted,
            TcpOption::Timestamp { tsval: 0x0017_9565, tsecr: 0 },
            TcpOption::NoOperation,
            TcpOption::WindowScale(7),
        ]
    );
    assert_eq!(TcpOptionBuf::new(&opts).unwrap().as_slice(), r.options);

    // Whole-frame round trip: Ethernet, IPv4 and TCP reprs emit the captured bytes.
    let mut out = vec![0u8; f.len()];
    EthernetRepr::parse(&eth).unwrap().emit(&mut EthernetFrame::new_unchecked(&mut out[..]));
    Ipv4Repr::parse(&ip).unwrap().emit(&mut Ipv4Packet::new_unchecked(&mut out[14..]));
    let mut t = TcpPacket::new_unchecked(&mut out[34..]);
    r.emit(&mut t);
    t.fill_checksum(&src, &dst, 40).unwrap();
    assert_eq!(out, f);
}

#[test]
fn ipv6_hop_by_hop_router_alert() {
    let f = hex(MLD_REPORT);
    let h = parse_headers(&f).unwrap();
    assert_eq!(h.l3, L3::Ipv6 { offset: 14, upper_offset: 62 });
    assert_eq!(h.l4, L4::Other(protocol::ICMPV6));
    let key = h.key.unwrap();
    assert_eq!(key.dst, IpAddr::V6("ff02::16".parse().unwrap()));
    assert_eq!((key.proto, key.src_port), (58, 0));

    let ip = Ipv6Packet::new_checked(&f[14..]).unwrap();
    let r = Ipv6Repr::parse(&ip).unwrap();
    assert_eq!(r.next_header, protocol::HOP_BY_HOP);
    assert_eq!((r.payload_len, r.hop_limit, r.flow_label), (36, 1, 0));
    assert_eq!(r.src_addr, Ipv6Addr::UNSPECIFIED);
    let mut out = [0u8; 40];
    r.emit(&mut Ipv6Packet::new_unchecked(&mut out[..]));
    assert_eq!(out, f[14..54]);

    let up = find_upper_layer(&f[14..]).unwrap();
    assert_eq!(up, UpperLayer { protocol: 58, offset: 48, ext_headers: 1, later_fragment: false });

    let hbh = Ipv6ExtHeader::new_checked(&f[54..]).unwrap();
    assert_eq!((hbh.next_header(), hbh.header_len()), (58, 8));
    let opts: Vec<_> = hbh.options_iter().collect::<Result<_>>().unwrap();
    assert_eq!(opts.len(), 2);
    assert_eq!(opts[0].decode::<RouterAlert>(), Some(Ok(RouterAlert(0))));
    assert_eq!(opts[0].action(), UnknownOptionAction::Skip);
    assert_eq!(opts[1], Ipv6Option::new(Ipv6Option::PADN, &[]));
    let hr = Ipv6HopByHopRepr::parse(&hbh).unwrap();
    let mut out = [0u8; 8];
    hr.emit(&mut Ipv6ExtHeader::new_unchecked(&mut out[..]));
    assert_eq!(out, f[54..62]);
    // The writer produces the same option bytes.
    let mut area = [0u8; 6];
    let mut w = Ipv6OptionsWriter::new(&mut area);
    w.push(&RouterAlert(0)).unwrap();
    assert_eq!(w.finish().unwrap(), 6);
    assert_eq!(area, f[56..62]);

    // ICMPv6 checksum over the IPv6 pseudo-header verifies.
    let icmp = &f[62..];
    let pseudo = checksum::pseudo_header_v6(&r.src_addr, &r.dst_addr, 58, icmp.len() as u32);
    assert_eq!(checksum::combine(&[pseudo, checksum::data(icmp)]), 0xffff);
}

#[test]
fn udp_over_ipv4_checksum() {
    let b = hex(UDP_V4);
    let ip = Ipv4Packet::new_checked(&b[..]).unwrap();
    assert!(ip.verify_checksum());
    let (src, dst) = (IpAddr::V4(ip.src_addr()), IpAddr::V4(ip.dst_addr()));
    let udp = UdpPacket::new_checked(ip.payload()).unwrap();
    assert_eq!((udp.src_port(), udp.dst_port(), udp.length()), (53124, 53, 37));
    assert_eq!(udp.verify_checksum(&src, &dst), Some(true));
    assert_eq!(udp.verify_checksum(&dst, &src), Some(true)); // the sum is symmetric
    assert_eq!(udp.payload().len(), 29);
    let r = UdpRepr::parse(&udp).unwrap();
    assert_eq!(r, UdpRepr { src_port: 53124, dst_port: 53, payload_len: 29 });
    let mut out = b[20..].to_vec();
    out[..8].fill(0);
    let mut p = UdpPacket::new_unchecked(&mut out[..]);
    r.emit(&mut p);
    assert_eq!(p.checksum(), 0);
    assert_eq!(p.verify_checksum(&src, &dst), Some(true)); // zero = none over IPv4
    p.fill_checksum(&src, &dst).unwrap();
    assert_eq!(out, b[20..]);
    let mut bad = b[20..].to_vec();
    bad[10] ^= 0x40;
    let p = UdpPacket::new_checked(&bad[..]).unwrap();
    assert_eq!(p.verify_checksum(&src, &dst), Some(false));
}

#[test]
fn udp_over_ipv6_checksum() {
    let b = hex(UDP_V6);
    let ip = Ipv6Packet::new_checked(&b[..]).unwrap();
    let (src, dst) = (IpAddr::V6(ip.src_addr()), IpAddr::V6(ip.dst_addr()));
    assert_eq!(ip.payload_missing(), 0);
    let udp = UdpPacket::new_checked(ip.payload()).unwrap();
    assert_eq!(udp.checksum(), 0xf282);
    assert_eq!(udp.verify_checksum(&src, &dst), Some(true));
    let mut out = b[40..].to_vec();
    let mut p = UdpPacket::new_unchecked(&mut out[..]);
    p.set_checksum(0);
    assert_eq!(p.verify_checksum(&src, &dst), Some(false)); // zero is invalid over IPv6
    p.fill_checksum(&src, &dst).unwrap();
    assert_eq!(out, b[40..]);
    assert_eq!(udp.verify_checksum(&IpAddr::V4(Ipv4Addr::LOCALHOST), &dst), None);
}

/// The Linux SYN re-framed with one 802.1Q tag (PCP 5, VID 100).
const SYN_TAGGED_HEAD: &str = "00 26 62 2f 47 87 00 1d 60 b3 01 84 81 00 a0 64 08 00";
/// ... and with an 802.1ad service tag (VID 200, DEI) outside the customer tag.
const SYN_QINQ_HEAD: &str = "00 26 62 2f 47 87 00 1d 60 b3 01 84 88 a8 10 c8 81 00 a0 64 08 00";

#[test]
fn vlan_tagged_and_qinq_frames() {
    let syn = hex(LINUX_SYN);
    let mut tagged = hex(SYN_TAGGED_HEAD);
    tagged.extend_from_slice(&syn[14..]);
    let mut qinq = hex(SYN_QINQ_HEAD);
    qinq.extend_from_slice(&syn[14..]);

    let s = vlan_stack(&tagged).unwrap();
    assert_eq!(s.len(), 1);
    assert_eq!(s.outer(), Some(VlanTag { tpid: EtherType::VLAN, pcp: 5, dei: false, vid: 100 }));
    assert_eq!(s.inner_ethertype(), EtherType::IPV4);
    assert_eq!(s.payload_offset(), 18);
    let h = parse_headers(&tagged).unwrap();
    assert_eq!(
        (h.vlan_tags, h.l3, h.l4),
        (1, L3::Ipv4 { offset: 18, header_len: 20 }, L4::Tcp { offset: 38 })
    );

    let s = vlan_stack(&qinq).unwrap();
    let tags: Vec<_> = s.iter().collect();
    assert_eq!(
        tags,
        [
            VlanTag { tpid: EtherType::QINQ, pcp: 0, dei: true, vid: 200 },
            VlanTag { tpid: EtherType::VLAN, pcp: 5, dei: false, vid: 100 },
        ]
    );
    let h = parse_headers(&qinq).unwrap();
    assert_eq!(h.vlan_tags, 2);
    assert_eq!(h.l4_offset(), Some(42));
    assert_eq!(h.key, parse_headers(&syn).unwrap().key);

    // One tag view and repr round trip.
    let v = VlanHeader::new_checked(&qinq[12..16]).unwrap();
    assert_eq!((v.tpid(), v.pcp(), v.dei(), v.vid()), (EtherType::QINQ, 0, true, 200));
    let t = VlanTag::parse(&v).unwrap();
    let mut out = [0u8; 4];
    t.emit(&mut VlanHeader::new_unchecked(&mut out[..]));
    assert_eq!(out, qinq[12..16]);

    // Pushing the tags onto the untagged frame gives the same bytes; popping restores it.
    let mut f = syn.clone();
    push_vlan(&mut f, tags[1]).unwrap();
    assert_eq!(f, tagged);
    push_vlan(&mut f, tags[0]).unwrap();
    assert_eq!(f, qinq);
    assert_eq!(pop_vlan(&mut f).unwrap(), Some(tags[0]));
    assert_eq!(pop_vlan(&mut f).unwrap(), Some(tags[1]));
    assert_eq!(pop_vlan(&mut f).unwrap(), None);
    assert_eq!(f, syn);
}

const MAC_A: EthernetAddress = EthernetAddress([0x02, 0, 0, 0, 0, 1]);
const MAC_B: EthernetAddress = EthernetAddress([0x02, 0, 0, 0, 0, 2]);

#[test]
fn build_udp_ipv4_virtual_payload() {
    let (src, dst) = (Ipv4Addr::new(10, 0, 0, 1), Ipv4Addr::new(10, 0, 1, 2));
    let mut f = Vec::new();
    build_udp_ipv4(&mut f, MAC_A, MAC_B, src, dst, 46, Ecn::Ect1, 64, 5000, 6000, 1458).unwrap();
    assert_eq!(f.len(), 42);
    let h = parse_headers(&f).unwrap();
    assert_eq!(h.l4, L4::Udp { offset: 34 });
    let k = h.key.unwrap();
    assert_eq!((k.dscp, k.ecn, k.src_port, k.dst_port, k.proto), (46, Ecn::Ect1, 5000, 6000, 17));
    let ip = Ipv4Packet::new_checked(&f[14..]).unwrap();
    assert_eq!(ip.total_len(), 1486);
    assert!(ip.verify_checksum() && ip.dont_frag());
    assert_eq!(ip.ttl(), 64);
    assert_eq!(ip.payload_missing(), 1458);
    let udp = UdpPacket::new_checked(ip.payload()).unwrap();
    assert_eq!((udp.length(), udp.checksum()), (1466, 0));
    assert_eq!(udp.payload_missing(), 1458);
    assert_eq!(udp.verify_checksum(&IpAddr::V4(src), &IpAddr::V4(dst)), None);
    let eth = EthernetFrame::new_checked(&f[..]).unwrap();
    assert_eq!((eth.src_addr(), eth.dst_addr()), (MAC_A, MAC_B));

    // Reusing the vector, and refusing bad input without touching it.
    let before = f.clone();
    assert!(build_udp_ipv4(&mut f, MAC_A, MAC_B, src, dst, 64, Ecn::Ce, 1, 1, 2, 3).is_err());
    assert!(build_udp_ipv4(&mut f, MAC_A, MAC_B, src, dst, 0, Ecn::Ce, 1, 1, 2, 65_508).is_err());
    assert_eq!(f, before);
    build_udp_ipv4(&mut f, MAC_A, MAC_B, src, dst, 0, Ecn::Ce, 1, 1, 2, 65_507).unwrap();
    assert_eq!(Ipv4Packet::new_checked(&f[14..]).unwrap().total_len(), 65_535);
}

#[test]
fn build_udp_ipv6_checksums_zero_payload() {
    let src: Ipv6Addr = "2001:db8::1".parse().unwrap();
    let dst: Ipv6Addr = "2001:db8::2".parse().unwrap();
    let mut f = Vec::new();
    build_udp_ipv6(&mut f, MAC_A, MAC_B, src, dst, 10, Ecn::Ect0, 32, 7, 8, 1000).unwrap();
    assert_eq!(f.len(), 62);
    let h = parse_headers(&f).unwrap();
    assert_eq!(h.l3, L3::Ipv6 { offset: 14, upper_offset: 54 });
    let k = h.key.unwrap();
    assert_eq!((k.dscp, k.ecn, k.src_port, k.dst_port), (10, Ecn::Ect0, 7, 8));
    let ip = Ipv6Packet::new_checked(&f[14..]).unwrap();
    assert_eq!((ip.payload_len(), ip.hop_limit(), ip.next_header()), (1008, 32, 17));
    let c = UdpPacket::new_checked(ip.payload()).unwrap().checksum();
    assert_ne!(c, 0);
    // The same datagram with a real zero-filled payload verifies.
    let mut full = f[54..].to_vec();
    full.resize(1008, 0);
    let p = UdpPacket::new_checked(&full[..]).unwrap();
    assert_eq!(p.verify_checksum(&IpAddr::V6(src), &IpAddr::V6(dst)), Some(true));
}

#[test]
fn build_tcp_headers() {
    let opts = TcpOptionBuf::new(&[
        TcpOption::MaxSegmentSize(1460),
        TcpOption::SackPermitted,
        TcpOption::Timestamp { tsval: 1, tsecr: 0 },
        TcpOption::NoOperation,
        TcpOption::WindowScale(7),
    ])
    .unwrap();
    let repr = TcpRepr {
        src_port: 40000,
        dst_port: 5201,
        seq_number: TcpSeqNumber(1),
        ack_number: TcpSeqNumber(0),
        flags: TcpFlags::SYN | TcpFlags::ECE | TcpFlags::CWR,
        window_len: 64240,
        urgent_at: 0,
        options: opts.as_slice(),
    };
    let (s4, d4) = (Ipv4Addr::new(10, 0, 0, 1), Ipv4Addr::new(10, 0, 0, 2));
    let mut f = Vec::new();
    build_tcp_ipv4(&mut f, MAC_A, MAC_B, s4, d4, 0, Ecn::NotEct, 64, &repr, 100).unwrap();
    assert_eq!(f.len(), 74);
    let h = parse_headers(&f).unwrap();
    assert_eq!(h.l4, L4::Tcp { offset: 34 });
    let ip = Ipv4Packet::new_checked(&f[14..]).unwrap();
    assert_eq!(ip.total_len(), 20 + 40 + 100);
    let t = TcpPacket::new_checked(ip.payload()).unwrap();
    assert_eq!(TcpRepr::parse(&t).unwrap(), repr);
    let mut full = f[34..].to_vec();
    full.resize(140, 0);
    let t = TcpPacket::new_checked(&full[..]).unwrap();
    assert_eq!(t.verify_checksum(&IpAddr::V4(s4), &IpAddr::V4(d4), 140), Some(true));

    let (s6, d6): (Ipv6Addr, Ipv6Addr) = ("fd00::1".parse().unwrap(), "fd00::2".parse().unwrap());
    build_tcp_ipv6(&mut f, MAC_A, MAC_B, s6, d6, 0, Ecn::Ect1, 64, &repr, 0).unwrap();
    assert_eq!(f.len(), 94);
    let h = parse_headers(&f).unwrap();
    assert_eq!(h.l4, L4::Tcp { offset: 54 });
    let t = TcpPacket::new_checked(&f[54..]).unwrap();
    assert_eq!(t.verify_checksum(&IpAddr::V6(s6), &IpAddr::V6(d6), 40), Some(true));
}

#[test]
fn ipv6_extension_walk() {
    // Hop-by-hop -> routing (type 4, empty) -> fragment (first) -> destination options -> UDP.
    let mut p = hex("60 00 00 00 00 28 00 40");
    p.extend_from_slice(&[0u8; 32]);
    p.extend_from_slice(&hex("2b 00 01 04 00 00 00 00")); // HBH: PadN(4)
    p.extend_from_slice(&hex("2c 00 04 00 00 00 00 00")); // routing
    p.extend_from_slice(&hex("3c 00 00 01 00 00 00 2a")); // fragment, offset 0, M
    p.extend_from_slice(&hex("11 00 01 04 00 00 00 00")); // destination options
    p.extend_from_slice(&hex("00 07 00 09 00 08 00 00")); // UDP
    let up = find_upper_layer(&p).unwrap();
    assert_eq!(up, UpperLayer { protocol: 17, offset: 72, ext_headers: 4, later_fragment: false });
    // A later fragment stops the walk after the fragment header.
    let mut later = p.clone();
    later[58..60].copy_from_slice(&[0x00, 0x08]);
    let up = find_upper_layer(&later).unwrap();
    assert_eq!((up.protocol, up.offset, up.later_fragment), (60, 64, true));
    // Hop-by-hop anywhere but first is malformed.
    let mut bad = p.clone();
    bad[40] = 0;
    assert_eq!(
        find_upper_layer(&bad),
        Err(WireError::Malformed { layer: Layer::Ipv6ExtHeader, field: "hop-by-hop not first" })
    );
    // Headers running past the payload length are malformed.
    let mut short = p.clone();
    short[5] = 0x10;
    assert_eq!(
        find_upper_layer(&short),
        Err(WireError::Malformed { layer: Layer::Ipv6, field: "payload_len" })
    );
    // A loop of destination-options headers is cut at MAX_EXT_HEADERS.
    let mut looped = hex("60 00 00 00 00 50 3c 40");
    looped.extend_from_slice(&[0u8; 32]);
    for _ in 0..10 {
        looped.extend_from_slice(&hex("3c 00 01 04 00 00 00 00"));
    }
    assert!(matches!(find_upper_layer(&looped), Err(WireError::Unsupported { .. })));
}
