//! ECN marking of real header bytes: what an AQM does to say "congestion experienced".
//!
//! [`mark_ce`] finds the IP header of a frame through `latnet-wire`'s [`parse_headers`] (VLAN
//! tags and IPv6 included) and sets CE with the incremental checksum update of RFC 1624
//! (`Ipv4Packet::set_ecn`). Only ECN-capable packets (ECT(0), ECT(1)) are marked (RFC 3168
//! section 5); what cannot be parsed is left alone and reported.

use latnet_wire::{parse_headers, Ecn, Ipv4Packet, Ipv6Packet, L3};

/// What [`mark_ce`] did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MarkOutcome {
    /// ECT(0) or ECT(1) became CE.
    Marked,
    /// Already CE.
    AlreadyCe,
    /// Not-ECT: the transport cannot understand a mark.
    NotEct,
    /// Not an IP packet, or headers that do not parse.
    NotIp,
}

/// The ECN field of a frame's IP header, `None` if there is none.
pub fn ecn_of(frame: &[u8]) -> Option<Ecn> {
    parse_headers(frame).ok()?.key.map(|k| k.ecn)
}

/// Set CE on an ECN-capable packet.
pub fn mark_ce(frame: &mut [u8]) -> MarkOutcome {
    let Ok(h) = parse_headers(frame) else { return MarkOutcome::NotIp };
    let Some(key) = h.key else { return MarkOutcome::NotIp };
    match key.ecn {
        Ecn::NotEct => return MarkOutcome::NotEct,
        Ecn::Ce => return MarkOutcome::AlreadyCe,
        Ecn::Ect0 | Ecn::Ect1 => {}
    }
    match h.l3 {
        L3::Ipv4 { offset, .. } => match Ipv4Packet::new_checked(&mut frame[offset..]) {
            Ok(mut ip) => ip.set_ecn(Ecn::Ce),
            Err(_) => return MarkOutcome::NotIp,
        },
        L3::Ipv6 { offset, .. } => match Ipv6Packet::new_checked(&mut frame[offset..]) {
            Ok(mut ip) => ip.set_ecn(Ecn::Ce),
            Err(_) => return MarkOutcome::NotIp,
        },
        L3::Other(_) => return MarkOutcome::NotIp,
    }
    MarkOutcome::Marked
}

#[cfg(test)]
mod tests {
    use super::*;
    use latnet_wire::EthernetAddress;
    use std::net::Ipv4Addr;

    fn frame(ecn: Ecn) -> Vec<u8> {
        let mut f = Vec::new();
        let m = EthernetAddress([2, 0, 0, 0, 0, 1]);
        latnet_wire::build_udp_ipv4(
            &mut f,
            m,
            m,
            Ipv4Addr::new(10, 0, 0, 1),
            Ipv4Addr::new(10, 0, 0, 2),
            0,
            ecn,
            64,
            1,
            2,
            100,
        )
        .unwrap();
        f
    }

    #[test]
    fn marks_only_ect_and_keeps_the_checksum_valid() {
        for e in [Ecn::Ect0, Ecn::Ect1] {
            let mut f = frame(e);
            assert_eq!(mark_ce(&mut f), MarkOutcome::Marked);
            assert_eq!(ecn_of(&f), Some(Ecn::Ce));
            assert!(Ipv4Packet::new_checked(&f[14..]).unwrap().verify_checksum());
            assert_eq!(mark_ce(&mut f), MarkOutcome::AlreadyCe);
        }
        let mut f = frame(Ecn::NotEct);
        assert_eq!(mark_ce(&mut f), MarkOutcome::NotEct);
        assert_eq!(ecn_of(&f), Some(Ecn::NotEct));
        assert_eq!(mark_ce(&mut [0u8; 20]), MarkOutcome::NotIp);
    }
}
