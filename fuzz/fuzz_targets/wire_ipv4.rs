//! IPv4: accessors, options, repr parse -> emit -> parse, and the incremental checksum
//! rewrites.
#![no_main]

use latnet_wire::{Ecn, Ipv4Option, Ipv4OptionBuf, Ipv4Packet, Ipv4Repr};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(p) = Ipv4Packet::new_checked(data) else { return };
    let _ = (p.version(), p.dscp(), p.ecn(), p.total_len(), p.ident(), p.frag_offset());
    let _ = (p.ttl(), p.protocol(), p.src_addr(), p.dst_addr(), p.payload_missing());
    assert!(p.payload().len() <= usize::from(p.total_len()));
    let options: Result<Vec<Ipv4Option<'_>>, _> = p.options_iter().collect();
    let Ok(repr) = Ipv4Repr::parse(&p) else { return };
    repr.check().expect("a parsed repr passes check()");
    let hl = repr.buffer_len();
    let mut out = vec![0u8; hl];
    repr.emit(&mut Ipv4Packet::new_unchecked(&mut out[..]));
    assert_eq!(out[..], data[..hl]);
    assert_eq!(Ipv4Repr::parse(&Ipv4Packet::new_checked(&out[..]).unwrap()), Ok(repr));

    // Options re-emitted from the iterator parse back to the same list.
    let options = options.expect("a parsed repr has valid options");
    if let Ok(buf) = Ipv4OptionBuf::new(&options) {
        let again: Vec<_> =
            latnet_wire::Ipv4Options::new(buf.as_slice()).map(|o| o.unwrap()).collect();
        assert_eq!(again, options);
    }

    // Forwarding rewrites keep the checksum valid and equal to a full recompute.
    let mut p = Ipv4Packet::new_unchecked(&mut out[..]);
    let ecn = Ecn::from_bits(data.len() as u8);
    p.set_ecn(ecn);
    p.set_dscp(data[data.len() - 1] >> 2);
    let ttl = p.decrement_ttl();
    assert!(p.verify_checksum());
    let c = p.checksum();
    p.fill_checksum();
    assert_eq!(p.checksum(), c);
    assert_eq!((p.ecn(), p.ttl()), (ecn, ttl));
});
