//! Property tests: parsers never panic on arbitrary bytes; emit -> parse round trips; tag
//! push/pop; incremental checksum updates.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use latnet_wire::*;
use proptest::collection::vec;
use proptest::prelude::*;

use crate::{hex, LINUX_SYN, MLD_REPORT};

/// Touches every accessor of every view that accepts `b`.
fn exercise_all(b: &[u8]) {
    if let Ok(f) = EthernetFrame::new_checked(b) {
        let _ = (f.src_addr(), f.dst_addr(), f.ethertype(), f.payload().len());
        let _ = EthernetRepr::parse(&f);
    }
    if let Ok(v) = VlanHeader::new_checked(b) {
        let _ = (v.tpid(), v.pcp(), v.dei(), v.vid(), VlanTag::parse(&v));
    }
    if let Ok(s) = vlan_stack(b) {
        assert!(s.len() <= MAX_TAGS);
        assert_eq!(s.iter().count(), s.len());
        assert!(s.payload_offset() <= b.len());
    }
    if let Ok(p) = Ipv4Packet::new_checked(b) {
        let _ = (p.version(), p.dscp(), p.ecn(), p.ident(), p.dont_frag(), p.more_frags());
        let _ = (p.frag_offset(), p.ttl(), p.protocol(), p.src_addr(), p.dst_addr());
        let _ = (p.options().len(), p.payload().len(), p.payload_missing(), p.verify_checksum());
        for o in p.options_iter() {
            let _ = o;
        }
        if let Ok(r) = Ipv4Repr::parse(&p) {
            r.check().unwrap();
            let mut out = vec![0u8; r.buffer_len()];
            r.emit(&mut Ipv4Packet::new_unchecked(&mut out[..]));
            assert_eq!(out, b[..r.buffer_len()]);
        }
    }
    if let Ok(p) = Ipv6Packet::new_checked(b) {
        let _ = (p.version(), p.traffic_class(), p.flow_label(), p.next_header(), p.hop_limit());
        let _ = (p.src_addr(), p.dst_addr(), p.payload().len(), p.payload_missing());
        if let Ok(r) = Ipv6Repr::parse(&p) {
            let mut out = [0u8; 40];
            r.emit(&mut Ipv6Packet::new_unchecked(&mut out[..]));
            assert_eq!(out, b[..40]);
        }
        if let Ok(up) = find_upper_layer(b) {
            assert!(up.offset <= b.len());
        }
    }
    if let Ok(h) = Ipv6ExtHeader::new_checked(b) {
        let _ = (h.next_header(), h.data().len());
        for o in h.options_iter() {
            let _ = o.map(|o| (o.action(), o.may_change(), o.decode::<RouterAlert>()));
        }
        let _ = Ipv6HopByHopRepr::parse(&h);
    }
    if let Ok(u) = UdpPacket::new_checked(b) {
        let _ = (u.src_port(), u.dst_port(), u.length(), u.payload().len(), u.payload_missing());
        let a = IpAddr::V4(Ipv4Addr::LOCALHOST);
        let _ = u.verify_checksum(&a, &a);
        let _ = UdpRepr::parse(&u);
    }
    if let Ok(t) = TcpPacket::new_checked(b) {
        let _ = (t.seq_number(), t.ack_number(), t.flags(), t.window_len(), t.urgent_at());
        let _ = (t.options().len(), t.payload().len());
        let a = IpAddr::V6(Ipv6Addr::LOCALHOST);
        let _ = t.verify_checksum(&a, &a, b.len());
        for o in t.options_iter() {
            let _ = o;
        }
        if let Ok(r) = TcpRepr::parse(&t) {
            let _ = (r.max_seg_size(), r.window_scale(), r.sack_blocks(), r.timestamp());
            let mut out = vec![0u8; r.buffer_len()];
            r.emit(&mut TcpPacket::new_unchecked(&mut out[..]));
            out[16..18].copy_from_slice(&b[16..18]); // emit writes checksum 0
            assert_eq!(out, b[..r.buffer_len()]);
        }
    }
    for o in Ipv4Options::new(b) {
        let _ = o;
    }
    for o in TcpOptions::new(b) {
        let _ = o;
    }
    if let Ok(h) = parse_headers(b) {
        if let Some(off) = h.l4_offset() {
            assert!(off < b.len());
        }
    }
    let mut v = b.to_vec();
    if let Ok(Some(tag)) = pop_vlan(&mut v) {
        assert_eq!(v.len() + 4, b.len());
        push_vlan(&mut v, tag).unwrap();
        assert_eq!(v, b);
    }
}

/// A real frame with up to 8 random byte overwrites: reaches deeper than uniform noise.
fn mutated_frame() -> impl Strategy<Value = Vec<u8>> {
    let bases = [hex(LINUX_SYN), hex(MLD_REPORT)];
    (0..bases.len(), vec((any::<usize>(), any::<u8>()), 0..8), any::<usize>()).prop_map(
        move |(i, edits, cut)| {
            let mut f = bases[i].clone();
            for (at, v) in edits {
                let n = f.len();
                f[at % n] = v;
            }
            f.truncate(cut % (f.len() + 1));
            f
        },
    )
}

fn ipv4_option() -> impl Strategy<Value = (u8, Vec<u8>)> {
    prop_oneof![Just((1u8, vec![])), (2u8..=255, vec(any::<u8>(), 0..6)),]
}

fn tcp_option() -> impl Strategy<Value = TcpOption<'static>> {
    prop_oneof![
        Just(TcpOption::NoOperation),
        any::<u16>().prop_map(TcpOption::MaxSegmentSize),
        any::<u8>().prop_map(TcpOption::WindowScale),
        Just(TcpOption::SackPermitted),
        vec((any::<u32>(), any::<u32>()), 1..=4)
            .prop_map(|b| TcpOption::Sack(SackBlocks::new(&b).unwrap())),
        (any::<u32>(), any::<u32>())
            .prop_map(|(tsval, tsecr)| TcpOption::Timestamp { tsval, tsecr }),
        (9u8..=255, 0usize..4)
            .prop_map(|(kind, n)| TcpOption::Unknown { kind, data: &[0xa5; 4][..n] }),
    ]
}

fn ecn() -> impl Strategy<Value = Ecn> {
    (0u8..4).prop_map(Ecn::from_bits)
}

proptest! {
    #[test]
    fn arbitrary_bytes_never_panic(b in vec(any::<u8>(), 0..128)) {
        exercise_all(&b);
    }

    #[test]
    fn mutated_frames_never_panic(f in mutated_frame()) {
        exercise_all(&f);
        for start in [14, 18, 34, 54, 62] {
            if let Some(rest) = f.get(start..) {
                exercise_all(rest);
            }
        }
    }

    #[test]
    fn ethernet_round_trip(src in any::<[u8; 6]>(), dst in any::<[u8; 6]>(), t in any::<u16>()) {
        let r = EthernetRepr {
            src_addr: EthernetAddress(src),
            dst_addr: EthernetAddress(dst),
            ethertype: EtherType(t),
        };
        let mut b = [0u8; 14];
        r.emit(&mut EthernetFrame::new_unchecked(&mut b[..]));
        prop_assert_eq!(EthernetRepr::parse(&EthernetFrame::new_checked(&b[..]).unwrap()), Ok(r));
        let text = r.src_addr.to_string();
        prop_assert_eq!(text.parse::<EthernetAddress>(), Ok(r.src_addr));
    }

    #[test]
    fn ipv4_round_trip(
        src in any::<u32>(), dst in any::<u32>(), proto in any::<u8>(), dscp in 0u8..64,
        ecn in ecn(), ident in any::<u16>(), df in any::<bool>(), mf in any::<bool>(),
        frag in 0u16..8192, ttl in any::<u8>(), payload_len in 0usize..65_000,
        opts in vec(ipv4_option(), 0..5),
    ) {
        let opts: Vec<Ipv4Option<'_>> =
            opts.iter().map(|(k, d)| Ipv4Option::new(*k, d)).collect();
        let Ok(buf) = Ipv4OptionBuf::new(&opts) else { return Ok(()) };
        let r = Ipv4Repr {
            src_addr: Ipv4Addr::from(src), dst_addr: Ipv4Addr::from(dst), protocol: proto,
            dscp, ecn, ident, dont_frag: df, more_frags: mf, frag_offset: frag * 8, ttl,
            payload_len: payload_len.min(65_535 - 20 - buf.as_slice().len()),
            options: buf.as_slice(),
        };
        let mut b = vec![0u8; r.buffer_len()];
        r.emit(&mut Ipv4Packet::new_unchecked(&mut b[..]));
        let p = Ipv4Packet::new_checked(&b[..]).unwrap();
        prop_assert_eq!(Ipv4Repr::parse(&p), Ok(r));
        let parsed: Vec<_> = p.options_iter().collect::<Result<_>>().unwrap();
        prop_assert_eq!(parsed, opts);
    }

    #[test]
    fn ipv4_incremental_checksum(
        hdr in vec(any::<u8>(), 20), ecn in ecn(), dscp in 0u8..64, ttl in any::<u8>(),
    ) {
        let mut b = hdr;
        b[0] = 0x45;
        b[2] = 0x05; // total length >= 20
        let mut p = Ipv4Packet::new_checked(&mut b[..]).unwrap();
        p.fill_checksum();
        p.set_ttl(ttl);
        p.set_ecn(ecn);
        p.set_dscp(dscp);
        p.decrement_ttl();
        prop_assert!(p.verify_checksum());
        let inc = p.checksum();
        p.fill_checksum();
        prop_assert_eq!(inc, p.checksum());
    }

    #[test]
    fn ipv6_round_trip(
        src in any::<u128>(), dst in any::<u128>(), nh in any::<u8>(), len in any::<u16>(),
        hl in any::<u8>(), dscp in 0u8..64, ecn in ecn(), flow in 0u32..(1 << 20),
    ) {
        let r = Ipv6Repr {
            src_addr: Ipv6Addr::from(src), dst_addr: Ipv6Addr::from(dst), next_header: nh,
            payload_len: usize::from(len), hop_limit: hl, dscp, ecn, flow_label: flow,
        };
        let mut b = [0u8; 40];
        r.emit(&mut Ipv6Packet::new_unchecked(&mut b[..]));
        prop_assert_eq!(Ipv6Repr::parse(&Ipv6Packet::new_checked(&b[..]).unwrap()), Ok(r));
    }

    #[test]
    fn hop_by_hop_round_trip(
        opts in vec((2u8..=255, vec(any::<u8>(), 0..12)), 0..4), alert in any::<Option<u16>>(),
        nh in any::<u8>(),
    ) {
        let mut area = [0u8; 128];
        let mut w = Ipv6OptionsWriter::new(&mut area);
        for (k, d) in &opts {
            w.push_raw(Ipv6Option::new(*k, d)).unwrap();
        }
        if let Some(a) = alert {
            w.push(&RouterAlert(a)).unwrap();
        }
        let n = w.finish().unwrap();
        prop_assert_eq!((2 + n) % 8, 0);
        let r = Ipv6HopByHopRepr { next_header: nh, options: &area[..n] };
        let mut b = vec![0u8; r.buffer_len()];
        r.emit(&mut Ipv6ExtHeader::new_unchecked(&mut b[..]));
        let h = Ipv6ExtHeader::new_checked(&b[..]).unwrap();
        prop_assert_eq!(Ipv6HopByHopRepr::parse(&h), Ok(r));
        let got: Vec<_> = h.options_iter().map(|o| o.unwrap()).filter(|o| !o.is_padding()).collect();
        let mut want: Vec<_> = opts.iter().map(|(k, d)| Ipv6Option::new(*k, d)).collect();
        let ra;
        if let Some(a) = alert {
            ra = a.to_be_bytes();
            want.push(Ipv6Option::new(Ipv6Option::ROUTER_ALERT, &ra));
        }
        prop_assert_eq!(got, want);
    }

    #[test]
    fn udp_round_trip(sp in any::<u16>(), dp in any::<u16>(), len in 0usize..65_528) {
        let r = UdpRepr { src_port: sp, dst_port: dp, payload_len: len };
        let mut b = [0u8; 8];
        r.emit(&mut UdpPacket::new_unchecked(&mut b[..]));
        prop_assert_eq!(UdpRepr::parse(&UdpPacket::new_checked(&b[..]).unwrap()), Ok(r));
    }

    #[test]
    fn tcp_round_trip(
        sp in any::<u16>(), dp in any::<u16>(), seq in any::<u32>(), ack in any::<u32>(),
        flags in 0u16..0x1000, win in any::<u16>(), urg in any::<u16>(),
        opts in vec(tcp_option(), 0..5),
    ) {
        let Ok(buf) = TcpOptionBuf::new(&opts) else { return Ok(()) };
        let r = TcpRepr {
            src_port: sp, dst_port: dp, seq_number: TcpSeqNumber(seq),
            ack_number: TcpSeqNumber(ack), flags: TcpFlags(flags), window_len: win,
            urgent_at: urg, options: buf.as_slice(),
        };
        let mut b = vec![0u8; r.buffer_len()];
        r.emit(&mut TcpPacket::new_unchecked(&mut b[..]));
        let p = TcpPacket::new_checked(&b[..]).unwrap();
        prop_assert_eq!(TcpRepr::parse(&p), Ok(r));
        let parsed: Vec<_> = p
            .options_iter()
            .map(|o| o.unwrap())
            .filter(|o| *o != TcpOption::EndOfList)
            .collect();
        prop_assert_eq!(parsed, opts);
    }

    #[test]
    fn push_then_pop_restores(
        frame in vec(any::<u8>(), 14..80), tpid in 0usize..3, pcp in 0u8..8, dei in any::<bool>(),
        vid in 0u16..4096,
    ) {
        let tag = VlanTag {
            tpid: [EtherType::VLAN, EtherType::QINQ, EtherType::QINQ_LEGACY][tpid],
            pcp, dei, vid,
        };
        let mut f = frame.clone();
        match push_vlan(&mut f, tag) {
            Ok(()) => {
                prop_assert_eq!(f.len(), frame.len() + 4);
                prop_assert_eq!(vlan_stack(&f).unwrap().outer(), Some(tag));
                prop_assert_eq!(pop_vlan(&mut f), Ok(Some(tag)));
                prop_assert_eq!(f, frame);
            }
            Err(_) => prop_assert_eq!(f, frame),
        }
    }

    #[test]
    fn builders_agree_with_parse_headers(
        src in any::<u32>(), dst in any::<u32>(), dscp in 0u8..64, ecn in ecn(), ttl in any::<u8>(),
        sp in any::<u16>(), dp in any::<u16>(), len in 0usize..65_507, tags in vec(0u16..4096, 0..4),
    ) {
        let (s, d) = (Ipv4Addr::from(src), Ipv4Addr::from(dst));
        let mut f = Vec::new();
        let mac = EthernetAddress([2, 0, 0, 0, 0, 9]);
        build_udp_ipv4(&mut f, mac, mac, s, d, dscp, ecn, ttl, sp, dp, len).unwrap();
        for vid in &tags {
            push_vlan(&mut f, VlanTag::new(*vid)).unwrap();
        }
        let h = parse_headers(&f).unwrap();
        prop_assert_eq!(usize::from(h.vlan_tags), tags.len());
        prop_assert_eq!(h.l4, L4::Udp { offset: 34 + 4 * tags.len() });
        prop_assert_eq!(h.key, Some(FlowKey {
            src: IpAddr::V4(s), dst: IpAddr::V4(d), proto: 17, src_port: sp, dst_port: dp,
            dscp, ecn,
        }));
        let (s6, d6) = (Ipv6Addr::from(u128::from(src)), Ipv6Addr::from(u128::from(dst) << 64));
        build_udp_ipv6(&mut f, mac, mac, s6, d6, dscp, ecn, ttl, sp, dp, len).unwrap();
        let k = parse_headers(&f).unwrap().key.unwrap();
        prop_assert_eq!((k.src, k.dst, k.dscp, k.ecn, k.src_port), (IpAddr::V6(s6), IpAddr::V6(d6), dscp, ecn, sp));
    }
}
