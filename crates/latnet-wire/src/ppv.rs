//! The Per Packet Value (PPV) carrier: a 16-bit packet value in an IP option.
//!
//! In the PPV framework (seed 001, Nádas et al.) an edge marker writes a *packet value* into
//! every packet; resource nodes forward the packets of highest value first. The seed does not
//! say where the value travels; latnet carries it as a 16-bit unsigned integer (0 = no value,
//! 65535 = the highest) in an experimental IP option (RFC 4727 code points):
//!
//! ```text
//! IPv4 option (4 bytes, no padding)          IPv6 hop-by-hop option (4 bytes, 2n aligned)
//! +--------+--------+--------+--------+      +--------+--------+--------+--------+
//! |  0x9e  |   4    |  packet value   |      |  0x3e  |   2    |  packet value   |
//! +--------+--------+--------+--------+      +--------+--------+--------+--------+
//! ```
//!
//! * IPv4 kind `0x9e` = copied (every fragment carries the value), class 0, number 30
//!   (RFC 4727 "RFC3692-style experiment").
//! * IPv6 type `0x3e`: the two high bits `00` make a node that does not know it skip it
//!   (RFC 8200 section 4.2), bit `0x20` says the data may change en route (a marker at a
//!   domain border may re-mark); number 30 (RFC 4727).
//!
//! Reading: [`packet_info`] walks the frame once and returns the ECN field and the value
//! (`None` when the packet has no value option). A value option of the wrong length is
//! `Malformed`: a switch counts and drops such a packet, it never guesses. Writing:
//! [`set_packet_value`] overwrites the option or inserts it (IPv4 header +4 bytes, IPv6 a
//! hop-by-hop header of 8 bytes); see [`crate::option_edit`].

use crate::error::{Layer, Result, WireError};
use crate::headers::parse_headers;
use crate::ip::Ecn;
use crate::ipv6_ext::{Ipv6Option, Ipv6OptionData};
use crate::option_edit::{find_ip_option_in, set_ip_option, OptionKinds};
use crate::util::put16;

/// IPv4 option kind of the packet value.
pub const IPV4_KIND: u8 = 0x9e;
/// IPv6 hop-by-hop option type of the packet value.
pub const IPV6_KIND: u8 = 0x3e;
/// Both kinds, for [`crate::option_edit`].
pub const KINDS: OptionKinds = OptionKinds { v4: IPV4_KIND, v6: IPV6_KIND, v6_align: (2, 0) };

/// A packet value: higher is more valuable.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct PacketValue(pub u16);

impl PacketValue {
    /// The highest value.
    pub const MAX: PacketValue = PacketValue(u16::MAX);
}

impl Ipv6OptionData<'_> for PacketValue {
    const KIND: u8 = IPV6_KIND;
    const ALIGN: (usize, usize) = (2, 0);

    fn parse(data: &[u8]) -> Result<PacketValue> {
        match data {
            [a, b] => Ok(PacketValue(u16::from_be_bytes([*a, *b]))),
            _ => Err(WireError::malformed(Layer::Ipv6Option, "packet value length")),
        }
    }

    fn data_len(&self) -> usize {
        2
    }

    fn emit_data(&self, buf: &mut [u8]) {
        put16(buf, 0, self.0);
    }
}

impl PacketValue {
    /// The IPv6 option TLV form (for [`crate::Ipv6OptionsWriter::push`]).
    pub fn ipv6_option(data: &[u8; 2]) -> Ipv6Option<'_> {
        Ipv6Option::new(IPV6_KIND, data)
    }
}

/// What an AQM needs from a packet: its ECN field and its value.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PvInfo {
    /// ECN field of the IP header.
    pub ecn: Ecn,
    /// The packet value, `None` when the packet carries no value option.
    pub pv: Option<PacketValue>,
}

fn decode(frame: &[u8], r: std::ops::Range<usize>, layer: Layer) -> Result<PacketValue> {
    match frame.get(r) {
        Some([a, b]) => Ok(PacketValue(u16::from_be_bytes([*a, *b]))),
        _ => Err(WireError::malformed(layer, "packet value length")),
    }
}

/// ECN field and packet value of a frame, in one walk.
///
/// Errors: the frame does not parse or is not IP, its option list is malformed, or the value
/// option does not hold exactly two bytes or appears twice.
pub fn packet_info(frame: &[u8]) -> Result<PvInfo> {
    let h = parse_headers(frame)?;
    let Some(key) = h.key else {
        return Err(WireError::unsupported(Layer::Ethernet, "not IP"));
    };
    let layer = match h.l3 {
        crate::L3::Ipv6 { .. } => Layer::Ipv6Option,
        _ => Layer::Ipv4Option,
    };
    let pv = match find_ip_option_in(frame, &h, KINDS)? {
        Some(r) => Some(decode(frame, r, layer)?),
        None => None,
    };
    Ok(PvInfo { ecn: key.ecn, pv })
}

/// The packet value of a frame (`None` without a value option); errors as [`packet_info`].
pub fn packet_value(frame: &[u8]) -> Result<Option<PacketValue>> {
    packet_info(frame).map(|i| i.pv)
}

/// Write `pv` into the frame's value option, inserting the option if there is none.
/// On error (see [`set_ip_option`]) the frame is unchanged.
pub fn set_packet_value(frame: &mut Vec<u8>, pv: PacketValue) -> Result<()> {
    set_ip_option(frame, KINDS, &pv.0.to_be_bytes()).map(|_| ())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{build_tcp_ipv4, build_udp_ipv6, EthernetAddress, TcpFlags, TcpPacket, TcpRepr};
    use crate::{Ipv4Packet, TcpSeqNumber};
    use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

    const M: EthernetAddress = EthernetAddress([2, 0, 0, 0, 0, 1]);

    fn tcp4(ecn: Ecn) -> Vec<u8> {
        let mut f = Vec::new();
        let repr = TcpRepr {
            src_port: 5000,
            dst_port: 80,
            seq_number: TcpSeqNumber(1),
            ack_number: TcpSeqNumber(7),
            flags: TcpFlags::ACK,
            window_len: 1000,
            urgent_at: 0,
            options: &[],
        };
        let (a, b) = (Ipv4Addr::new(10, 0, 0, 1), Ipv4Addr::new(10, 0, 0, 2));
        build_tcp_ipv4(&mut f, M, M, a, b, 0, ecn, 64, &repr, 1448).unwrap();
        f
    }

    /// Byte vector: an IPv4 header with the value option, checksum by RFC 1071 by hand.
    #[test]
    fn ipv4_vector() {
        let mut f = tcp4(Ecn::Ect1);
        set_packet_value(&mut f, PacketValue(0x1234)).unwrap();
        let ip = &f[14..14 + 24];
        #[rustfmt::skip]
        let expect: [u8; 24] = [
            0x46, 0x01, 0x05, 0xd4, // v4 IHL 6, ECT(1), total 24 + 20 + 1448 = 1492
            0x00, 0x00, 0x40, 0x00, // id 0, DF
            0x40, 0x06, 0x00, 0x00, // TTL 64, TCP, checksum (below)
            10, 0, 0, 1, 10, 0, 0, 2,
            0x9e, 0x04, 0x12, 0x34, // the value option
        ];
        assert_eq!(&ip[..10], &expect[..10]);
        assert_eq!(&ip[12..], &expect[12..]);
        // 0x4601 + 0x05d4 + 0x0000 + 0x4000 + 0x4006 + 0x0a00 + 0x0001 + 0x0a00 + 0x0002
        //   + 0x9e04 + 0x1234 = 0x1_9016 -> 0x9017 -> checksum !0x9017 = 0x6fe8
        assert_eq!(&ip[10..12], &[0x6f, 0xe8]);
        assert!(Ipv4Packet::new_checked(ip).unwrap().verify_checksum());
        assert_eq!(
            packet_info(&f).unwrap(),
            PvInfo { ecn: Ecn::Ect1, pv: Some(PacketValue(0x1234)) }
        );
        // the TCP checksum is still right: options do not enter the pseudo-header
        let mut full = f.clone();
        full.resize(f.len() + 1448, 0);
        let t = TcpPacket::new_checked(&full[14 + 24..]).unwrap();
        let (a, b) =
            (IpAddr::V4(Ipv4Addr::new(10, 0, 0, 1)), IpAddr::V4(Ipv4Addr::new(10, 0, 0, 2)));
        assert_eq!(t.verify_checksum(&a, &b, 20 + 1448), Some(true));
    }

    #[test]
    fn ipv6_vector_and_reread() {
        let mut f = Vec::new();
        let a = Ipv6Addr::new(0xfd00, 0, 0, 0, 0, 0, 0, 1);
        build_udp_ipv6(&mut f, M, M, a, a, 0, Ecn::Ce, 64, 1, 2, 100).unwrap();
        assert_eq!(packet_info(&f).unwrap(), PvInfo { ecn: Ecn::Ce, pv: None });
        set_packet_value(&mut f, PacketValue(65535)).unwrap();
        assert_eq!(&f[54..62], &[17, 0, 0x3e, 0x02, 0xff, 0xff, 0x01, 0x00]);
        assert_eq!(packet_value(&f).unwrap(), Some(PacketValue::MAX));
        set_packet_value(&mut f, PacketValue(7)).unwrap();
        assert_eq!(f.len(), 70);
        assert_eq!(packet_value(&f).unwrap(), Some(PacketValue(7)));
    }

    #[test]
    fn wrong_length_value_option_is_malformed() {
        let mut f = tcp4(Ecn::Ect0);
        // a 0x9e option with 6 data bytes
        crate::option_edit::insert_ip_option(&mut f, KINDS, &[0, 0, 0, 0, 0, 0]).unwrap();
        assert_eq!(
            packet_info(&f),
            Err(WireError::malformed(Layer::Ipv4Option, "packet value length"))
        );
        assert!(set_packet_value(&mut f, PacketValue(1)).is_err());
    }

    #[test]
    fn typed_ipv6_option_round_trip() {
        let mut area = [0u8; 6];
        let mut w = crate::Ipv6OptionsWriter::new(&mut area);
        w.push(&PacketValue(0xbeef)).unwrap();
        w.finish().unwrap();
        let o = crate::Ipv6Options::new(&area).next().unwrap().unwrap();
        assert_eq!(o.decode::<PacketValue>(), Some(Ok(PacketValue(0xbeef))));
        assert!(PacketValue::parse(&[1]).is_err());
        assert_eq!(PacketValue::ipv6_option(&[0, 1]).kind, IPV6_KIND);
    }
}
