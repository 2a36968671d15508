//! The host agent's tagger in the kernel: the verifier accepts the program, test runs of it
//! rewrite and count what they should, and on a real veth pair the frames the peer's
//! `AF_PACKET` ring receives carry the whole tag stack. Needs root (CI runs as root); without
//! it each test says so and passes.

use latnet_switch::tagger::{Action, Match, Tagger, MAX_TAGS, TCX_NEXT};
use latnet_wire::EthernetAddress;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
mod common;
use common::{root, tags_in};

fn tagger(name: &str) -> Option<Tagger> {
    if !root() {
        eprintln!("skipped: loading a BPF program needs root");
        return None;
    }
    Some(Tagger::load(name).unwrap_or_else(|e| panic!("{e}")))
}

const SRC4: Ipv4Addr = Ipv4Addr::new(10, 0, 0, 1);
const DST4: Ipv4Addr = Ipv4Addr::new(10, 0, 0, 3);

fn udp4(dst: Ipv4Addr, sport: u16, dport: u16, dscp: u8, ecn: latnet_wire::Ecn) -> Vec<u8> {
    let mut f = Vec::new();
    let mac = EthernetAddress([2, 0, 0, 0, 0, 1]);
    latnet_wire::build_udp_ipv4(&mut f, mac, mac, SRC4, dst, dscp, ecn, 64, sport, dport, 32)
        .unwrap_or_else(|e| panic!("{e}"));
    f.resize(f.len() + 32, 0xab);
    f
}

fn ipv4_checksum_ok(ip: &[u8]) -> bool {
    let mut sum = 0u32;
    for w in ip[..20].chunks(2) {
        sum += u32::from(u16::from_be_bytes([w[0], w[1]]));
    }
    while sum > 0xffff {
        sum = (sum & 0xffff) + (sum >> 16);
    }
    sum == 0xffff
}

/// `skb->priority` as the test run left it.
fn priority(ctx: &[u8]) -> u32 {
    u32::from_ne_bytes([ctx[32], ctx[33], ctx[34], ctx[35]])
}

#[test]
fn the_verifier_accepts_the_program_and_a_matching_ipv4_packet_is_rewritten() {
    let Some(t) = tagger("lnt_v4") else { return };
    let m = Match { dst: IpAddr::V4(DST4), proto: 17, src_port: 40_000, dst_port: 5001 };
    let a = Action { tags: vec![100, 200, 300], dscp: Some(46), class: Some(0x0001_0005) };
    t.set(&m, &a).unwrap_or_else(|e| panic!("{e}"));
    let frame = udp4(DST4, 40_000, 5001, 0, latnet_wire::Ecn::Ect1);
    let r = t.test_run(&frame).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(r.retval, TCX_NEXT);
    // the outermost tag is metadata (pushed last, as on a NIC with VLAN offload); the two
    // inner ones are in the data, then the IPv4 header
    let (tags, at) = tags_in(&r.data);
    assert_eq!(tags, vec![200, 300]);
    assert_eq!(r.data.len(), frame.len() + 8);
    assert_eq!(&r.data[at..at + 2], &[0x08, 0x00]);
    let ip = &r.data[at + 2..];
    assert_eq!(ip[1] >> 2, 46, "DSCP");
    assert_eq!(ip[1] & 3, 1, "ECN (ECT(1)) kept");
    assert!(ipv4_checksum_ok(ip), "header checksum updated");
    // nothing else changed: the TOS byte and the checksum are the only differences
    assert_eq!(ip[0], frame[14]);
    assert_eq!(&ip[2..10], &frame[16..24]);
    assert_eq!(&ip[12..], &frame[26..]);
    assert_eq!(priority(&r.ctx), 0x0001_0005, "skb->priority names the shaper's class");
    let c = t.counters(&m).unwrap_or_else(|e| panic!("{e}")).unwrap_or_default();
    assert_eq!((c.packets, c.bytes, c.push_failures), (1, frame.len() as u64, 0));
    // re-tagging keeps the counters; removing returns them and the packet passes untouched
    t.set(&m, &Action { tags: vec![9], ..Action::default() }).unwrap_or_else(|e| panic!("{e}"));
    let r = t.test_run(&frame).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(r.data, frame, "one tag: metadata only; DSCP kept");
    let c = t.remove(&m).unwrap_or_else(|e| panic!("{e}")).unwrap_or_default();
    assert_eq!(c.packets, 2);
    let r = t.test_run(&frame).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!((r.retval, &r.data), (TCX_NEXT, &frame));
    assert_eq!(priority(&r.ctx), 0);
}

#[test]
fn lookups_fall_back_to_any_source_port_then_to_the_destinations_route() {
    let Some(t) = tagger("lnt_fallback") else { return };
    let exact = Match { dst: IpAddr::V4(DST4), proto: 17, src_port: 1111, dst_port: 5001 };
    let any_src = Match { src_port: 0, ..exact };
    let route = Match::any_to(IpAddr::V4(DST4));
    let tag = |v: u16| Action { tags: vec![v, 1], dscp: None, class: None };
    for (m, v) in [(exact, 10), (any_src, 20), (route, 30)] {
        t.set(&m, &tag(v)).unwrap_or_else(|e| panic!("{e}"));
    }
    let inner = |f: &[u8]| {
        let r = t.test_run(f).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(r.retval, TCX_NEXT);
        tags_in(&r.data).0
    };
    // the inner tag (1) is in the data; which entry matched shows in the counters
    assert_eq!(inner(&udp4(DST4, 1111, 5001, 0, latnet_wire::Ecn::NotEct)), vec![1]);
    assert_eq!(inner(&udp4(DST4, 2222, 5001, 0, latnet_wire::Ecn::NotEct)), vec![1]);
    assert_eq!(inner(&udp4(DST4, 2222, 6000, 0, latnet_wire::Ecn::NotEct)), vec![1]);
    // another destination: nothing matches
    let other = udp4(Ipv4Addr::new(10, 0, 0, 9), 1111, 5001, 0, latnet_wire::Ecn::NotEct);
    assert_eq!(inner(&other), Vec::<u16>::new());
    let n = |m: &Match| t.counters(m).unwrap_or_else(|e| panic!("{e}")).unwrap_or_default().packets;
    assert_eq!((n(&exact), n(&any_src), n(&route)), (1, 1, 1));
    // ARP and other frames pass unchanged and are not counted
    let mut arp = udp4(DST4, 1111, 5001, 0, latnet_wire::Ecn::NotEct);
    arp[12..14].copy_from_slice(&[0x08, 0x06]);
    assert_eq!(t.test_run(&arp).unwrap_or_else(|e| panic!("{e}")).data, arp);
    assert_eq!((n(&exact), n(&any_src), n(&route)), (1, 1, 1));
}

#[test]
fn an_ipv6_packet_gets_its_traffic_class_and_tags() {
    let Some(t) = tagger("lnt_v6") else { return };
    let m = Match { dst: IpAddr::V6(DST6), proto: 17, src_port: 0, dst_port: 7000 };
    t.set(&m, &Action { tags: vec![5, 6], dscp: Some(56), class: Some(0x0001_0002) })
        .unwrap_or_else(|e| panic!("{e}"));
    let f = udp6(10, latnet_wire::Ecn::Ce, 0);
    let r = t.test_run(&f).unwrap_or_else(|e| panic!("{e}"));
    let (tags, at) = tags_in(&r.data);
    assert_eq!(tags, vec![6]);
    let ip = &r.data[at + 2..];
    let tc = ((ip[0] & 0x0f) << 4) | (ip[1] >> 4);
    assert_eq!((ip[0] >> 4, tc >> 2, tc & 3), (6, 56, 3), "version, DSCP, ECN (CE kept)");
    assert_eq!(&ip[1..2][0] & 0x0f, f[15] & 0x0f, "flow label untouched");
    assert_eq!(&ip[2..], &f[16..]);
    assert_eq!(priority(&r.ctx), 0x0001_0002);
}

#[test]
fn an_entry_pushes_as_many_tags_as_the_wire_format_reads() {
    let Some(t) = tagger("lnt_deep") else { return };
    let m = Match::any_to(IpAddr::V4(DST4));
    let stack: Vec<u16> = (1..=MAX_TAGS as u16).map(|i| 100 + i).collect();
    t.set(&m, &Action { tags: stack.clone(), dscp: None, class: None })
        .unwrap_or_else(|e| panic!("{e}"));
    let frame = udp4(DST4, 1, 2, 0, latnet_wire::Ecn::NotEct);
    let r = t.test_run(&frame).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(r.retval, TCX_NEXT);
    // the outermost is metadata; the other fifteen in the data, in order
    let (tags, at) = tags_in(&r.data);
    assert_eq!(tags, stack[1..]);
    assert_eq!(&r.data[at..], &frame[12..]);
    let c = t.counters(&m).unwrap_or_else(|e| panic!("{e}")).unwrap_or_default();
    assert_eq!((c.packets, c.push_failures), (1, 0));
    let more = Action { tags: vec![1; MAX_TAGS + 1], ..Action::default() };
    assert!(t.set(&m, &more).is_err(), "one tag more is refused");
}

const SRC6: Ipv6Addr = Ipv6Addr::new(0x2001, 0xdb8, 0, 0, 0, 0, 0, 1);
const DST6: Ipv6Addr = Ipv6Addr::new(0x2001, 0xdb8, 0, 0, 0, 0, 0, 3);

/// A UDP datagram from `SRC6` port 3000 to `DST6` port 7000.
fn udp6(dscp: u8, ecn: latnet_wire::Ecn, payload: usize) -> Vec<u8> {
    let mut f = Vec::new();
    let mac = EthernetAddress([2, 0, 0, 0, 0, 1]);
    latnet_wire::build_udp_ipv6(&mut f, mac, mac, SRC6, DST6, dscp, ecn, 64, 3000, 7000, payload)
        .unwrap_or_else(|e| panic!("{e}"));
    f
}

/// [`udp6`] with extension headers `(type, header)` between the IPv6 and the UDP header; each
/// header's first octet is filled in here.
fn udp6_with(exts: &[(u8, Vec<u8>)]) -> Vec<u8> {
    let mut f = udp6(0, latnet_wire::Ecn::NotEct, 8);
    let mut chain = Vec::new();
    for (i, (_, h)) in exts.iter().enumerate() {
        let mut h = h.clone();
        h[0] = exts.get(i + 1).map_or(17, |e| e.0);
        chain.extend_from_slice(&h);
    }
    if let Some((first, _)) = exts.first() {
        f[20] = *first;
    }
    let len = u16::from_be_bytes([f[18], f[19]]) + chain.len() as u16;
    f[18..20].copy_from_slice(&len.to_be_bytes());
    f.splice(54..54, chain);
    f
}

#[test]
fn ipv6_extension_headers_are_walked_to_the_ports() {
    let Some(t) = tagger("lnt_ext") else { return };
    let flow = Match { dst: IpAddr::V6(DST6), proto: 17, src_port: 3000, dst_port: 7000 };
    let route = Match::any_to(IpAddr::V6(DST6));
    t.set(&flow, &Action { tags: vec![1, 10], ..Action::default() })
        .unwrap_or_else(|e| panic!("{e}"));
    t.set(&route, &Action { tags: vec![1, 20], ..Action::default() })
        .unwrap_or_else(|e| panic!("{e}"));
    let inner = |f: &[u8]| {
        let r = t.test_run(f).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(r.retval, TCX_NEXT);
        let (tags, at) = tags_in(&r.data);
        assert_eq!(&r.data[at..], &f[12..], "only the tags are new");
        tags
    };
    // hop-by-hop options of 8 and 24 octets (an LBF block is 24), routing, destination options
    let hbh = |units: u8| {
        let mut h = vec![0u8; 8 * (usize::from(units) + 1)];
        h[1] = units;
        h
    };
    let frag = |offset: u16, more: bool| {
        let w = offset << 3 | u16::from(more);
        let mut h = vec![0, 0, 0, 0, 0, 0, 0, 1];
        h[2..4].copy_from_slice(&w.to_be_bytes());
        h
    };
    let ah = vec![0u8, 4, 0, 0, 0, 0, 0, 1, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0];
    let flow_cases: Vec<Vec<(u8, Vec<u8>)>> = vec![
        vec![],
        vec![(0, hbh(0))],
        vec![(0, hbh(2))],
        vec![(0, hbh(0)), (43, hbh(1)), (60, hbh(0))],
        vec![(44, frag(0, true))],
        vec![(51, ah.clone())],
        (0..6).map(|i| (if i == 0 { 0 } else { 60 }, hbh(0))).collect(),
    ];
    for exts in &flow_cases {
        let kinds: Vec<u8> = exts.iter().map(|e| e.0).collect();
        assert_eq!(inner(&udp6_with(exts)), vec![10], "{kinds:?}: the flow's entry");
    }
    let route_cases: Vec<Vec<(u8, Vec<u8>)>> = vec![
        // a later fragment has no ports
        vec![(44, frag(185, false))],
        // one header more than are walked
        (0..7).map(|i| (if i == 0 { 0 } else { 60 }, hbh(0))).collect(),
        // ESP: encrypted from here
        vec![(50, vec![0u8; 8])],
    ];
    for exts in &route_cases {
        let kinds: Vec<u8> = exts.iter().map(|e| e.0).collect();
        assert_eq!(inner(&udp6_with(exts)), vec![20], "{kinds:?}: the destination's route");
    }
    // a header longer than the frame: the route, nothing read past the end
    let mut cut = udp6_with(&[(0, hbh(0))]);
    cut[55] = 200;
    assert_eq!(inner(&cut), vec![20]);
    let n = |m: &Match| t.counters(m).unwrap_or_else(|e| panic!("{e}")).unwrap_or_default().packets;
    assert_eq!((n(&flow), n(&route)), (flow_cases.len() as u64, route_cases.len() as u64 + 1));
}

/// A segmentation burst, as TCP hands one to the device: `gso_segs` segments, `wire_len`
/// bytes with each segment's headers (`struct __sk_buff` up to `gso_segs`).
fn gso_ctx(segs: u32, wire_len: u32) -> Vec<u8> {
    let mut ctx = vec![0u8; 168];
    ctx[160..164].copy_from_slice(&wire_len.to_ne_bytes());
    ctx[164..168].copy_from_slice(&segs.to_ne_bytes());
    ctx
}

#[test]
fn a_segmentation_burst_counts_as_the_packets_it_becomes() {
    let Some(t) = tagger("lnt_gso") else { return };
    let m = Match::any_to(IpAddr::V4(DST4));
    t.set(&m, &Action { tags: vec![3], ..Action::default() }).unwrap_or_else(|e| panic!("{e}"));
    let f = udp4(DST4, 1, 2, 0, latnet_wire::Ecn::NotEct);
    let count = || t.counters(&m).unwrap_or_else(|e| panic!("{e}")).unwrap_or_default();
    let run = |ctx: &[u8]| {
        let r = t.test_run_ctx(&f, ctx).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(r.retval, TCX_NEXT);
    };
    run(&[]);
    assert_eq!((count().packets, count().bytes), (1, f.len() as u64), "one packet");
    // four segments: the frame's headers three more times
    let wire = f.len() as u32 + 3 * 42;
    run(&gso_ctx(4, wire));
    assert_eq!((count().packets, count().bytes), (5, (f.len() as u32 + wire) as u64));
}

#[test]
fn truncated_and_foreign_frames_pass_without_harm() {
    let Some(t) = tagger("lnt_short") else { return };
    let m = Match::any_to(IpAddr::V4(DST4));
    t.set(&m, &Action { tags: vec![1, 2], dscp: Some(8), class: None })
        .unwrap_or_else(|e| panic!("{e}"));
    let full = udp4(DST4, 1, 2, 0, latnet_wire::Ecn::NotEct);
    // every prefix the kernel accepts for a test run: it refuses IPv4 frames shorter than an
    // Ethernet and an IPv4 header itself (the verifier proved the program's own bounds checks
    // for anything shorter); without room for ports a packet matches the destination's route
    let mut ran = 0;
    for len in 14..=full.len() {
        let r = match t.test_run(&full[..len]) {
            Ok(r) => r,
            Err(e) if e.raw_os_error() == Some(libc::EINVAL) && len < 34 => continue,
            Err(e) => panic!("{len}: {e}"),
        };
        ran += 1;
        assert_eq!(r.retval, TCX_NEXT, "{len}");
        let (tags, at) = tags_in(&r.data);
        assert_eq!(tags, vec![2], "{len}");
        assert_eq!(r.data[at + 3] >> 2, 8, "{len}: DSCP");
        assert_eq!(r.data.len(), len + 4, "{len}");
    }
    assert_eq!(ran, full.len() - 33, "every prefix from 34 bytes on ran");
    // an IPv4 header with options still matches the destination's route (no ports read)
    let mut opts = full.clone();
    opts[14] = 0x46;
    let r = t.test_run(&opts).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(tags_in(&r.data).0, vec![2]);
}

/// A veth pair in a namespace of its own: the tagger on `vx0`'s egress, packets sent from a
/// UDP socket in the namespace, read on `vx1` by the switch's own `AF_PACKET` ring, which gets
/// the outer tag beside the frame.
#[test]
fn on_a_veth_pair_the_peer_receives_the_whole_stack() {
    let Some(mut t) = tagger("lnt_veth") else { return };
    let mut v = common::Veth::new("tag");
    t.attach_egress(Some(&v.path), "vx0").unwrap_or_else(|e| panic!("{e}"));
    let two = IpAddr::V4(Ipv4Addr::new(10, 77, 0, 2));
    let flow = Match { dst: two, proto: 17, src_port: 0, dst_port: 5001 };
    t.set(&flow, &Action { tags: vec![100, 200, 300], dscp: Some(46), class: None })
        .unwrap_or_else(|e| panic!("{e}"));
    t.set(&Match::any_to(two), &Action { tags: vec![7], ..Action::default() })
        .unwrap_or_else(|e| panic!("{e}"));
    v.send("10.77.0.2:5001"); // the flow's entry
    v.send("10.77.0.2:6000"); // the destination's route
    v.send("10.77.0.3:5001"); // nothing
    drop(t); // detaches: the next packet goes untagged
    v.send("10.77.0.2:5001");
    assert_eq!(
        v.seen(4),
        vec![
            (vec![100, 200, 300], [10, 77, 0, 2], 5001, 46),
            (vec![7], [10, 77, 0, 2], 6000, 0),
            (vec![], [10, 77, 0, 3], 5001, 0),
            (vec![], [10, 77, 0, 2], 5001, 0),
        ]
    );
}
