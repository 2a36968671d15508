//! UDP: accessors, repr round trip, and checksum fill / verify over both families.
#![no_main]

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use latnet_wire::{UdpPacket, UdpRepr};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(p) = UdpPacket::new_checked(data) else { return };
    assert!(p.payload().len() + 8 <= usize::from(p.length()));
    let v4 = (IpAddr::V4(Ipv4Addr::new(10, 0, 0, 1)), IpAddr::V4(Ipv4Addr::new(10, 0, 0, 2)));
    let v6 = (IpAddr::V6(Ipv6Addr::LOCALHOST), IpAddr::V6(Ipv6Addr::UNSPECIFIED));
    for (s, d) in [v4, v6] {
        let verdict = p.verify_checksum(&s, &d);
        assert_eq!(verdict.is_none(), p.is_truncated());
    }
    let repr = UdpRepr::parse(&p).expect("checked view parses");
    let mut out = data.to_vec();
    let mut q = UdpPacket::new_unchecked(&mut out[..]);
    repr.emit(&mut q);
    assert_eq!(UdpRepr::parse(&q), Ok(repr));
    for (s, d) in [v4, v6] {
        q.fill_checksum(&s, &d).unwrap();
        let expect = if q.is_truncated() { None } else { Some(true) };
        assert_eq!(q.verify_checksum(&s, &d), expect);
    }
});
