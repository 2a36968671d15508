//! The LBF block: byte vectors of both carriers, locating it in a frame, rejecting malformed
//! blocks, and property tests (never panics; emit -> parse round trip).

use std::net::Ipv4Addr;

use latnet_wire::lbf::{self, Carrier, LbfBlock, LbfMode, LbfRepr};
use latnet_wire::*;
use proptest::collection::vec;
use proptest::prelude::*;

use crate::hex;

/// A 300-octet UDP/IPv4 frame (42 header octets + 32 shim octets present, 226 virtual) from
/// 10.0.0.1:10000 to 10.0.0.6:20000 carrying the shim: lower bound 700 us, no upper bound,
/// latency so far 100 us.
const SHIM_V4: &str = "
    02 00 00 00 00 01 02 00 00 00 00 02 08 00 45 00
    01 1e 00 00 40 00 40 11 25 c9 0a 00 00 01 0a 00
    00 06 27 10 4e 20 01 0a 00 00 4c 42 1c 00 10 00
    00 00 00 00 00 00 00 0a ae 60 00 00 00 00 00 00
    00 00 00 00 00 00 00 01 86 a0";

/// A 300-octet UDP/IPv6 frame 2001:db8::1 -> 2001:db8::6 whose hop-by-hop header holds only the
/// LBF option (type 0x3e, length 28): sender-timestamp mode, late, lower 1 ms, upper 5 ms,
/// timestamp 123,456,789 ns. UDP checksum over a zero payload.
const HBH_V6: &str = "
    02 00 00 00 00 01 02 00 00 00 00 02 86 dd 60 00
    00 00 00 f6 00 40 20 01 0d b8 00 00 00 00 00 00
    00 00 00 00 00 01 20 01 0d b8 00 00 00 00 00 00
    00 00 00 00 00 06 11 03 3e 1c 11 c0 00 00 00 00
    00 00 00 0f 42 40 00 00 00 00 00 4c 4b 40 00 00
    00 00 07 5b cd 15 27 10 4e 20 00 d6 2d 99";

fn mac(b: u8) -> EthernetAddress {
    EthernetAddress([2, 0, 0, 0, 0, b])
}

#[test]
fn udp_shim_vector() {
    let f = hex(SHIM_V4);
    let h = parse_headers(&f).unwrap();
    let loc = lbf::locate(&f, &h, true).unwrap().unwrap();
    assert_eq!(loc.carrier, Carrier::UdpShim);
    assert_eq!(loc.offset, 42 + 4);
    let expect = LbfRepr {
        mode: LbfMode::LatencySoFar,
        late: false,
        lower_ns: 700_000,
        upper_ns: None,
        value_ns: 100_000,
    };
    assert_eq!(loc.repr, expect);
    // Not looked for unless asked: a UDP payload starting with "LB" is only a shim by contract.
    assert_eq!(lbf::locate(&f, &h, false).unwrap(), None);
    // The builder writes exactly these bytes.
    let mut out = Vec::new();
    lbf::build_udp_ipv4_shim(
        &mut out,
        mac(2),
        mac(1),
        Ipv4Addr::new(10, 0, 0, 1),
        Ipv4Addr::new(10, 0, 0, 6),
        0,
        64,
        10_000,
        20_000,
        &expect,
        226,
    )
    .unwrap();
    assert_eq!(out, f);
    assert!(Ipv4Packet::new_checked(&f[14..]).unwrap().verify_checksum());
}

#[test]
fn hop_by_hop_vector() {
    let f = hex(HBH_V6);
    let h = parse_headers(&f).unwrap();
    assert!(matches!(h.l4, L4::Udp { offset: 86 }));
    let loc = lbf::locate(&f, &h, false).unwrap().unwrap();
    assert_eq!(loc.carrier, Carrier::Ipv6HopByHop);
    // option data at 14 + 40 + 2 (HBH header) + 2 (TLV): the 64-bit fields are 8-aligned
    // relative to the hop-by-hop header.
    assert_eq!(loc.offset, 58);
    assert_eq!((loc.offset + 4 - 54) % 8, 0);
    let expect = LbfRepr {
        mode: LbfMode::SenderTimestamp,
        late: true,
        lower_ns: 1_000_000,
        upper_ns: Some(5_000_000),
        value_ns: 123_456_789,
    };
    assert_eq!(loc.repr, expect);
    let mut out = Vec::new();
    lbf::build_udp_ipv6_hbh(
        &mut out,
        mac(2),
        mac(1),
        "2001:db8::1".parse().unwrap(),
        "2001:db8::6".parse().unwrap(),
        0,
        64,
        10_000,
        20_000,
        &expect,
        206,
    )
    .unwrap();
    assert_eq!(out, f);
    // The generic option machinery sees the same option and its alignment rule.
    let ext = Ipv6ExtHeader::new_checked(&f[54..86]).unwrap();
    let opts: Vec<_> = ext.options_iter().collect::<Result<_>>().unwrap();
    assert_eq!(opts.len(), 1);
    assert_eq!(opts[0].decode::<LbfRepr>(), Some(Ok(expect)));
    let mut area = [0u8; 30];
    let mut w = Ipv6OptionsWriter::new(&mut area);
    w.push(&expect).unwrap();
    assert_eq!(w.finish().unwrap(), 30);
    assert_eq!(&area[..], &f[56..86]);
}

#[test]
fn per_hop_updates_in_place() {
    let mut f = hex(SHIM_V4);
    let h = parse_headers(&f).unwrap();
    let loc = lbf::locate(&f, &h, true).unwrap().unwrap();
    let mut b = lbf::block_mut(&mut f, loc.offset).unwrap();
    b.set_value_ns(b.value_ns() + 250_000);
    b.set_late(true);
    let again = lbf::locate(&f, &parse_headers(&f).unwrap(), true).unwrap().unwrap();
    assert_eq!(again.repr.value_ns, 350_000);
    assert!(again.repr.late);
}

#[test]
fn malformed_blocks_are_errors_with_the_lbf_layer() {
    let good = hex(SHIM_V4);
    let cases: &[(usize, u8, &str)] = &[
        (46, 0x20, "version"),
        (46, 0x1f, "mode"),
        (47, 0x01, "reserved"),
        (44, 0x1b, "shim header"),
        (45, 0x01, "shim header"),
        (60, 0x01, "upper without U flag"),
    ];
    for &(at, v, what) in cases {
        let mut f = good.clone();
        f[at] = v;
        let h = parse_headers(&f).unwrap();
        let e = lbf::locate(&f, &h, true).unwrap_err();
        assert_eq!(e.layer(), Layer::Lbf, "{what}");
        assert_eq!(e, WireError::Malformed { layer: Layer::Lbf, field: what });
    }
    // cut short: every length from the magic to the end of the block
    for len in 44..good.len() {
        let f = &good[..len];
        if let Ok(h) = parse_headers(f) {
            assert!(lbf::locate(f, &h, true).is_err(), "len {len}");
        }
    }
    // lower above upper in the IPv6 option
    let mut f = hex(HBH_V6);
    f[62] = 0xff;
    let h = parse_headers(&f).unwrap();
    assert_eq!(
        lbf::locate(&f, &h, false).unwrap_err(),
        WireError::Malformed { layer: Layer::Lbf, field: "lower > upper" }
    );
    // a second LBF option would be ambiguous
    let r =
        LbfRepr { mode: LbfMode::RestSlo, late: false, lower_ns: 0, upper_ns: None, value_ns: 0 };
    let mut area = [0u8; 62];
    let mut w = Ipv6OptionsWriter::new(&mut area);
    w.push(&r).unwrap();
    w.push(&r).unwrap();
    let n = w.finish().unwrap();
    let mut f2 = hex(HBH_V6);
    let mut hbh = vec![17u8, ((2 + n) / 8 - 1) as u8];
    hbh.extend_from_slice(&area[..n]);
    f2.splice(54..86, hbh.iter().copied());
    let pl = u16::from_be_bytes([f2[18], f2[19]]) + (2 + n - 32) as u16;
    f2[18..20].copy_from_slice(&pl.to_be_bytes());
    let h = parse_headers(&f2).unwrap();
    assert_eq!(
        lbf::locate(&f2, &h, false).unwrap_err(),
        WireError::Malformed { layer: Layer::Lbf, field: "duplicate option" }
    );
}

fn arb_repr() -> impl Strategy<Value = LbfRepr> {
    (0u8..4, any::<bool>(), any::<u64>(), proptest::option::of(any::<u64>()), any::<u64>())
        .prop_map(|(m, late, a, b, value_ns)| {
            let (lower_ns, upper_ns) = match b {
                Some(b) => (a.min(b), Some(a.max(b))),
                None => (a, None),
            };
            LbfRepr { mode: LbfMode::from_code(m).unwrap(), late, lower_ns, upper_ns, value_ns }
        })
}

proptest! {
    #[test]
    fn block_parser_never_panics(b in vec(any::<u8>(), 0..64)) {
        if let Ok(v) = LbfBlock::new_checked(&b[..]) {
            let _ = (v.version(), v.mode_code(), v.late(), v.lower_ns(), v.upper_ns(), v.value_ns());
            if let Ok(r) = LbfRepr::parse(&v) {
                let mut out = [0u8; lbf::BLOCK_LEN];
                r.emit_into(&mut out);
                prop_assert_eq!(&out[..], &b[..lbf::BLOCK_LEN]);
            }
        }
    }

    #[test]
    fn repr_round_trips(r in arb_repr()) {
        let mut out = [0u8; lbf::BLOCK_LEN];
        r.emit_into(&mut out);
        prop_assert_eq!(LbfRepr::parse(&LbfBlock::new_checked(&out[..]).unwrap()), Ok(r));
        let s = r.to_shim();
        prop_assert_eq!(&s[4..], &out[..]);
    }

    #[test]
    fn locate_never_panics_on_mutated_frames(
        which in 0usize..2,
        edits in vec((0usize..120, any::<u8>()), 0..6),
        cut in 0usize..130,
        shim in any::<bool>(),
    ) {
        let mut f = hex(if which == 0 { SHIM_V4 } else { HBH_V6 });
        for (at, v) in edits {
            if at < f.len() { f[at] = v; }
        }
        f.truncate(cut.max(1));
        if let Ok(h) = parse_headers(&f) {
            if let Ok(Some(loc)) = lbf::locate(&f, &h, shim) {
                prop_assert!(loc.offset + lbf::BLOCK_LEN <= f.len());
                prop_assert!(lbf::block_mut(&mut f, loc.offset).is_some());
            }
        }
    }

    #[test]
    fn locate_never_panics_on_random_frames(b in vec(any::<u8>(), 0..200), shim in any::<bool>()) {
        if let Ok(h) = parse_headers(&b) {
            let _ = lbf::locate(&b, &h, shim);
        }
    }
}
