//! The Per Packet Value and large-flow options: reading never panics; a write either fails and
//! leaves the frame unchanged or yields a frame that parses to the same flow key and reads back
//! what was written.
#![no_main]

use latnet_wire::{
    large_flow_option, packet_value, parse_headers, set_large_flow_option, set_packet_value,
    LargeFlowMsg, LargeFlowOption, PacketValue,
};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let _ = latnet_wire::packet_info(data);
    let _ = large_flow_option(data);
    let key = parse_headers(data).ok().and_then(|h| h.key);
    let pv = PacketValue(data.first().map_or(7, |&b| u16::from(b) * 257));
    let mut f = data.to_vec();
    match set_packet_value(&mut f, pv) {
        Ok(()) => {
            assert_eq!(parse_headers(&f).expect("still parses").key, key);
            assert_eq!(packet_value(&f), Ok(Some(pv)));
        }
        Err(_) => assert_eq!(f, data),
    }
    let mut o = LargeFlowOption::new(LargeFlowMsg::Report);
    o.fill(3, 100_000);
    let mut g = data.to_vec();
    match set_large_flow_option(&mut g, &o) {
        Ok(()) => {
            assert_eq!(parse_headers(&g).expect("still parses").key, key);
            assert_eq!(large_flow_option(&g), Ok(Some(o)));
        }
        Err(_) => assert_eq!(g, data),
    }
});
