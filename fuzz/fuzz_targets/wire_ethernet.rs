//! Ethernet II: view accessors, repr parse -> emit -> parse, and MAC address text.
#![no_main]

use latnet_wire::{EthernetAddress, EthernetFrame, EthernetRepr};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(frame) = EthernetFrame::new_checked(data) else { return };
    let _ = frame.payload().len();
    let repr = EthernetRepr::parse(&frame).expect("checked frame parses");
    let mut out = vec![0u8; repr.buffer_len()];
    repr.emit(&mut EthernetFrame::new_unchecked(&mut out[..]));
    assert_eq!(out[..], data[..repr.buffer_len()]);
    let again = EthernetRepr::parse(&EthernetFrame::new_checked(&out[..]).unwrap()).unwrap();
    assert_eq!(again, repr);
    let text = repr.src_addr.to_string();
    assert_eq!(text.parse::<EthernetAddress>(), Ok(repr.src_addr));
    if let Ok(s) = std::str::from_utf8(data) {
        if let Ok(a) = s.parse::<EthernetAddress>() {
            assert_eq!(a.to_string().parse::<EthernetAddress>(), Ok(a));
        }
    }
});
