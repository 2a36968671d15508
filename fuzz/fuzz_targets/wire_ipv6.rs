//! IPv6: fixed-header repr round trip, extension-header walk, hop-by-hop repr and options.
#![no_main]

use latnet_wire::{
    find_upper_layer, Ipv6ExtHeader, Ipv6HopByHopRepr, Ipv6Option, Ipv6Options, Ipv6OptionsWriter,
    Ipv6Packet, Ipv6Repr, RouterAlert,
};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok(p) = Ipv6Packet::new_checked(data) {
        let _ = (p.traffic_class(), p.flow_label(), p.hop_limit(), p.payload_missing());
        assert!(p.payload().len() <= usize::from(p.payload_len()));
        if let Ok(r) = Ipv6Repr::parse(&p) {
            let mut out = [0u8; 40];
            r.emit(&mut Ipv6Packet::new_unchecked(&mut out[..]));
            assert_eq!(out[..], data[..40]);
            assert_eq!(Ipv6Repr::parse(&Ipv6Packet::new_unchecked(&out[..])), Ok(r));
        }
        if let Ok(up) = find_upper_layer(data) {
            assert!(up.offset <= data.len());
            assert!(up.offset <= 40 + usize::from(p.payload_len()));
        }
    }
    // The same bytes as a hop-by-hop header.
    if let Ok(h) = Ipv6ExtHeader::new_checked(data) {
        if let Ok(r) = Ipv6HopByHopRepr::parse(&h) {
            let mut out = vec![0u8; r.buffer_len()];
            r.emit(&mut Ipv6ExtHeader::new_unchecked(&mut out[..]));
            assert_eq!(out[..], data[..r.buffer_len()]);
            // Re-emitting the non-padding options gives the same list.
            let opts: Vec<Ipv6Option<'_>> =
                h.options_iter().map(|o| o.unwrap()).filter(|o| !o.is_padding()).collect();
            let mut area = vec![0u8; 4096];
            let mut w = Ipv6OptionsWriter::new(&mut area);
            for o in &opts {
                if o.kind == Ipv6Option::ROUTER_ALERT {
                    if let Some(Ok(ra)) = o.decode::<RouterAlert>() {
                        w.push(&ra).unwrap();
                        continue;
                    }
                }
                w.push_raw(*o).unwrap();
            }
            let n = w.finish().unwrap();
            assert_eq!((2 + n) % 8, 0);
            let again: Vec<_> = Ipv6Options::new(&area[..n])
                .map(|o| o.unwrap())
                .filter(|o| !o.is_padding())
                .collect();
            assert_eq!(again, opts);
        }
    }
});
