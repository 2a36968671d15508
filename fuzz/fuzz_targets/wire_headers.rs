//! parse_headers: whatever it accepts, the per-layer views accept too, and the key agrees
//! with them; VLAN pop then push restores the frame.
#![no_main]

use latnet_wire::{
    parse_headers, pop_vlan, push_vlan, EtherType, Ipv4Packet, Ipv6Packet, TcpPacket, UdpPacket,
    L3, L4,
};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok(h) = parse_headers(data) {
        match h.l3 {
            L3::Ipv4 { offset, header_len } => {
                let p = Ipv4Packet::new_checked(&data[offset..]).expect("IPv4 view agrees");
                assert_eq!(p.header_len(), header_len);
                let k = h.key.expect("IP has a key");
                assert_eq!((k.dscp, k.ecn, k.proto), (p.dscp(), p.ecn(), p.protocol()));
            }
            L3::Ipv6 { offset, upper_offset } => {
                let p = Ipv6Packet::new_checked(&data[offset..]).expect("IPv6 view agrees");
                assert!(upper_offset >= offset + 40);
                let k = h.key.expect("IP has a key");
                assert_eq!((k.dscp, k.ecn), (p.dscp(), p.ecn()));
            }
            L3::Other(t) => {
                assert!(t != EtherType::IPV4 && t != EtherType::IPV6 && !t.is_vlan_tpid());
                assert!(h.key.is_none());
            }
        }
        match h.l4 {
            L4::Udp { offset } => {
                let u = UdpPacket::new_checked(&data[offset..]).expect("UDP view agrees");
                assert_eq!(h.key.unwrap().src_port, u.src_port());
            }
            L4::Tcp { offset } => {
                let t = TcpPacket::new_checked(&data[offset..]).expect("TCP view agrees");
                assert_eq!(h.key.unwrap().dst_port, t.dst_port());
            }
            L4::Other(_) | L4::None => {}
        }
        // Removing the outer tag leaves a frame that parses to the same key.
        let mut f = data.to_vec();
        if let Ok(Some(tag)) = pop_vlan(&mut f) {
            let inner = parse_headers(&f).expect("untagged frame still parses");
            assert_eq!(inner.key, h.key);
            assert_eq!(inner.vlan_tags + 1, h.vlan_tags);
            push_vlan(&mut f, tag).expect("re-push");
            assert_eq!(f, data);
        }
    }
    let mut f = data.to_vec();
    if let Ok(Some(tag)) = pop_vlan(&mut f) {
        push_vlan(&mut f, tag).expect("re-push a popped tag");
        assert_eq!(f, data);
    }
});
