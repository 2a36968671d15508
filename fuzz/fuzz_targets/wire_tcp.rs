//! TCP: accessors, options, repr parse -> emit -> parse, checksum fill / verify.
#![no_main]

use std::net::{IpAddr, Ipv4Addr};

use latnet_wire::{TcpOption, TcpOptionBuf, TcpOptions, TcpPacket, TcpRepr};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(p) = TcpPacket::new_checked(data) else { return };
    let _ = (p.seq_number(), p.ack_number(), p.flags(), p.window_len(), p.payload().len());
    let Ok(repr) = TcpRepr::parse(&p) else { return };
    repr.check().expect("a parsed repr passes check()");
    let _ = (repr.max_seg_size(), repr.window_scale(), repr.sack_permitted());
    let _ = (repr.sack_blocks(), repr.timestamp());
    let hl = repr.buffer_len();
    let mut out = data.to_vec();
    repr.emit(&mut TcpPacket::new_unchecked(&mut out[..]));
    assert_eq!(TcpRepr::parse(&TcpPacket::new_checked(&out[..]).unwrap()), Ok(repr));
    let mut q = TcpPacket::new_unchecked(&mut out[..]);
    let (s, d) = (IpAddr::V4(Ipv4Addr::new(192, 0, 2, 1)), IpAddr::V4(Ipv4Addr::new(192, 0, 2, 2)));
    q.fill_checksum(&s, &d, data.len()).unwrap();
    assert_eq!(q.verify_checksum(&s, &d, data.len()), Some(true));
    assert_eq!(q.verify_checksum(&s, &d, data.len() + 1), None);
    let mut expect = data[..hl].to_vec();
    expect[16..18].copy_from_slice(&out[16..18]);
    assert_eq!(out[..hl], expect[..]);

    // Options re-emitted from the iterator parse back to the same list.
    let opts: Vec<TcpOption<'_>> =
        repr.options_iter().map(|o| o.unwrap()).filter(|o| *o != TcpOption::EndOfList).collect();
    if let Ok(buf) = TcpOptionBuf::new(&opts) {
        let again: Vec<_> = TcpOptions::new(buf.as_slice())
            .map(|o| o.unwrap())
            .filter(|o| *o != TcpOption::EndOfList)
            .collect();
        assert_eq!(again, opts);
    }
});
