//! latnet-sim's TCP segments from frame bytes: `Segment::parse` never panics, and a parsed
//! segment emitted again (as Ethernet + IPv4 + TCP) parses back to the same segment. The
//! scenario parser for TCP traffic tables gets the same bytes as TOML.
#![no_main]

use latnet_sim::tcp::Segment;
use latnet_wire::EthernetAddress;
use libfuzzer_sys::fuzz_target;
use std::net::Ipv4Addr;

fuzz_target!(|data: &[u8]| {
    if let Ok((seg, _, _)) = Segment::parse(data) {
        let mut f = Vec::new();
        let m = EthernetAddress([2, 0, 0, 0, 0, 1]);
        let a = Ipv4Addr::new(192, 0, 2, 1);
        // Emitting may refuse (options that no longer fit 40 bytes once padded): fine.
        if seg.emit(&mut f, m, m, a, a, 0, 64).is_ok() {
            let (again, _, _) = Segment::parse(&f).expect("an emitted segment parses");
            assert_eq!(again, seg);
        }
    }
    if let Ok(text) = std::str::from_utf8(data) {
        let _ = toml::from_str::<latnet_sim::tcp::app::TcpSpec>(text);
    }
});
