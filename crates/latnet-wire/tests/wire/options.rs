//! Property tests of the frame-level options (Per Packet Value, large flow): reading never
//! panics on arbitrary bytes; setting an option either fails and leaves the frame unchanged, or
//! yields a frame that still parses to the same flow key and reads the option back.

use std::net::{Ipv4Addr, Ipv6Addr};

use latnet_wire::*;
use proptest::collection::vec;
use proptest::prelude::*;

const M: EthernetAddress = EthernetAddress([2, 0, 0, 0, 0, 1]);

fn check_set(frame: &[u8], pv: u16, lf: LargeFlowOption) {
    let key = parse_headers(frame).ok().and_then(|h| h.key);
    let mut f = frame.to_vec();
    match set_packet_value(&mut f, PacketValue(pv)) {
        Ok(()) => {
            let h = parse_headers(&f).expect("a frame with a value still parses");
            assert_eq!(h.key, key, "the flow key is unchanged");
            assert_eq!(packet_value(&f), Ok(Some(PacketValue(pv))));
            if let L3::Ipv4 { offset, .. } = h.l3 {
                // the header checksum is recomputed whole after a write
                assert!(Ipv4Packet::new_checked(&f[offset..]).unwrap().verify_checksum());
            }
        }
        Err(_) => assert_eq!(f, frame, "a refused write leaves the frame unchanged"),
    }
    let mut g = frame.to_vec();
    match set_large_flow_option(&mut g, &lf) {
        Ok(()) => {
            let h = parse_headers(&g).expect("still parses");
            assert_eq!(h.key, key);
            assert_eq!(large_flow_option(&g), Ok(Some(lf)));
        }
        Err(_) => assert_eq!(g, frame),
    }
}

fn lf_strategy() -> impl Strategy<Value = LargeFlowOption> {
    (1u8..=3, any::<u8>(), any::<u16>(), any::<u32>()).prop_map(|(t, flags, count, rate)| {
        let msg = match t {
            1 => LargeFlowMsg::Register,
            2 => LargeFlowMsg::Report,
            _ => LargeFlowMsg::Deregister,
        };
        LargeFlowOption { msg, flags, count, rate_kbps: rate }
    })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2000))]

    #[test]
    fn option_readers_never_panic(b in vec(any::<u8>(), 0..200)) {
        let _ = packet_info(&b);
        let _ = large_flow_option(&b);
        let _ = find_ip_option(&b, ppv::KINDS);
    }

    /// Mutated real frames: flip bytes of a TCP/IPv4 or UDP/IPv6 frame that already holds
    /// options, then read and write.
    #[test]
    fn mutated_frames(v6 in any::<bool>(), flips in vec((0usize..120, any::<u8>()), 0..6),
                      pv in any::<u16>(), lf in lf_strategy()) {
        let mut f = Vec::new();
        if v6 {
            let a = Ipv6Addr::new(0xfd00, 0, 0, 0, 0, 0, 0, 1);
            build_udp_ipv6(&mut f, M, M, a, a, 0, Ecn::Ect1, 64, 1, 2, 500).unwrap();
        } else {
            let (a, b) = (Ipv4Addr::new(10, 0, 0, 1), Ipv4Addr::new(10, 0, 0, 2));
            build_udp_ipv4(&mut f, M, M, a, b, 0, Ecn::Ect1, 64, 1, 2, 500).unwrap();
        }
        set_packet_value(&mut f, PacketValue(1)).unwrap();
        for (at, x) in flips {
            if let Some(b) = f.get_mut(at) {
                *b ^= x;
            }
        }
        let _ = packet_info(&f);
        let _ = large_flow_option(&f);
        check_set(&f, pv, lf);
    }

    #[test]
    fn arbitrary_frames_set(b in vec(any::<u8>(), 0..160), pv in any::<u16>(), lf in lf_strategy()) {
        check_set(&b, pv, lf);
    }
}
