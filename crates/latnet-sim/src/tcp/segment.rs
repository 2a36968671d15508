//! TCP segments as the transport sees them, and their real bytes on the wire.
//!
//! A [`Segment`] is the validated content of one TCP/IP packet: header fields, the options this
//! model uses (MSS, window scale, SACK-permitted, SACK blocks), the IP ECN codepoint and the
//! payload length. The payload itself is *virtual*: counted in the IP length fields, never
//! stored (see `latnet-wire`'s truncation convention).
//!
//! [`Segment::emit`] writes Ethernet + IPv4 + TCP headers through `latnet-wire`
//! ([`latnet_wire::build_tcp_ipv4`], correct IPv4 and TCP checksums); [`Segment::parse`] reads
//! them back from a frame through [`latnet_wire::parse_headers`] and [`TcpRepr::parse`], and
//! returns a [`WireError`] (never panics) for anything that is not a well-formed TCP packet.

use latnet_wire::{
    parse_headers, EthernetAddress, Headers, Ipv4Packet, Ipv6Packet, Layer, SackBlocks, TcpFlags,
    TcpOption, TcpOptionBuf, TcpPacket, TcpRepr, TcpSeqNumber, WireError, L3, L4,
};
use latnet_wire::{Ecn, Result as WireResult};
use std::net::{IpAddr, Ipv4Addr};

/// Ethernet (14) + IPv4 (20) + TCP (20) header bytes of a segment without options.
pub const TCP_IPV4_OVERHEAD: u32 = 54;

/// One TCP segment (header fields, options, ECN codepoint, virtual payload length).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Segment {
    /// Source port.
    pub src_port: u16,
    /// Destination port.
    pub dst_port: u16,
    /// Sequence number of the first octet (of the SYN or FIN if set).
    pub seq: TcpSeqNumber,
    /// Acknowledgment number (meaningful when `ACK` is set).
    pub ack: TcpSeqNumber,
    /// Flags.
    pub flags: TcpFlags,
    /// Window field as sent (unscaled).
    pub window: u16,
    /// Payload bytes (virtual).
    pub len: u32,
    /// MSS option (SYN segments).
    pub mss: Option<u16>,
    /// Window-scale option (SYN segments).
    pub wscale: Option<u8>,
    /// SACK-permitted option (SYN segments).
    pub sack_permitted: bool,
    /// SACK blocks (RFC 2018), most recent first.
    pub sack: Option<SackBlocks>,
    /// ECN codepoint of the IP header.
    pub ecn: Ecn,
}

impl Segment {
    /// True if the flag is set.
    #[inline]
    pub fn has(&self, f: TcpFlags) -> bool {
        self.flags.contains(f)
    }

    /// Sequence space the segment occupies: payload plus one for SYN and one for FIN.
    #[inline]
    pub fn seq_len(&self) -> u32 {
        self.len + u32::from(self.has(TcpFlags::SYN)) + u32::from(self.has(TcpFlags::FIN))
    }

    /// The option bytes this segment carries.
    fn options(&self) -> WireResult<TcpOptionBuf> {
        let mut opts: [TcpOption<'_>; 5] = [TcpOption::NoOperation; 5];
        let mut n = 0;
        if let Some(m) = self.mss {
            opts[n] = TcpOption::MaxSegmentSize(m);
            n += 1;
        }
        if self.sack_permitted {
            opts[n] = TcpOption::SackPermitted;
            n += 1;
        }
        if let Some(w) = self.wscale {
            opts[n] = TcpOption::WindowScale(w);
            n += 1;
        }
        if let Some(s) = self.sack {
            opts[n] = TcpOption::Sack(s);
            n += 1;
        }
        TcpOptionBuf::new(&opts[..n])
    }

    /// TCP option bytes (padded) this segment adds to the 20-byte header.
    pub fn options_len(&self) -> usize {
        self.options().map_or(0, |o| o.as_slice().len())
    }

    /// Write the Ethernet, IPv4 and TCP headers of this segment into `frame` (cleared first);
    /// the payload is virtual. Errors if a field is out of range (options too long, DSCP).
    #[allow(clippy::too_many_arguments)]
    pub fn emit(
        &self,
        frame: &mut Vec<u8>,
        src_mac: EthernetAddress,
        dst_mac: EthernetAddress,
        src: Ipv4Addr,
        dst: Ipv4Addr,
        dscp: u8,
        ttl: u8,
    ) -> WireResult<()> {
        let opts = self.options()?;
        let repr = TcpRepr {
            src_port: self.src_port,
            dst_port: self.dst_port,
            seq_number: self.seq,
            ack_number: self.ack,
            flags: self.flags,
            window_len: self.window,
            urgent_at: 0,
            options: opts.as_slice(),
        };
        latnet_wire::build_tcp_ipv4(
            frame,
            src_mac,
            dst_mac,
            src,
            dst,
            dscp,
            self.ecn,
            ttl,
            &repr,
            self.len as usize,
        )
    }

    /// Read a segment from a frame (Ethernet, optional VLAN tags, IPv4 or IPv6, TCP). Returns
    /// the segment and the source and destination addresses. Never panics.
    pub fn parse(frame: &[u8]) -> WireResult<(Segment, IpAddr, IpAddr)> {
        let h = parse_headers(frame)?;
        Self::parse_with(frame, &h)
    }

    /// [`Segment::parse`] for a frame whose headers [`parse_headers`] already walked.
    pub fn parse_with(frame: &[u8], h: &Headers) -> WireResult<(Segment, IpAddr, IpAddr)> {
        let (L4::Tcp { offset: l4 }, Some(key)) = (h.l4, h.key) else {
            return Err(WireError::Unsupported { layer: Layer::Tcp, what: "not a TCP packet" });
        };
        // End of the IP datagram, as declared (the payload beyond the headers is virtual).
        let ip_end = match h.l3 {
            L3::Ipv4 { offset, .. } => {
                let ip = Ipv4Packet::new_checked(frame.get(offset..).unwrap_or_default())?;
                offset + usize::from(ip.total_len())
            }
            L3::Ipv6 { offset, .. } => {
                let ip = Ipv6Packet::new_checked(frame.get(offset..).unwrap_or_default())?;
                offset + latnet_wire::ipv6::HEADER_LEN + usize::from(ip.payload_len())
            }
            L3::Other(_) => {
                return Err(WireError::Unsupported { layer: Layer::Tcp, what: "not IP" });
            }
        };
        let tcp = TcpPacket::new_checked(frame.get(l4..).unwrap_or_default())?;
        let repr = TcpRepr::parse(&tcp)?;
        let len = ip_end
            .checked_sub(l4 + repr.header_len())
            .ok_or(WireError::Malformed { layer: Layer::Tcp, field: "segment length" })?;
        let seg = Segment {
            src_port: repr.src_port,
            dst_port: repr.dst_port,
            seq: repr.seq_number,
            ack: repr.ack_number,
            flags: repr.flags,
            window: repr.window_len,
            len: len as u32,
            mss: repr.max_seg_size(),
            wscale: repr.window_scale(),
            sack_permitted: repr.sack_permitted(),
            sack: repr.sack_blocks(),
            ecn: key.ecn,
        };
        Ok((seg, key.src, key.dst))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn mac(b: u8) -> EthernetAddress {
        EthernetAddress([2, 0, 0, 0, 0, b])
    }

    #[test]
    fn round_trip_through_real_bytes() {
        let seg = Segment {
            src_port: 10_000,
            dst_port: 20_000,
            seq: TcpSeqNumber(0xfff0_0000),
            ack: TcpSeqNumber(77),
            flags: TcpFlags::ACK | TcpFlags::ECE,
            window: 512,
            len: 1448,
            sack: SackBlocks::new(&[(100, 200), (300, 400)]),
            ecn: Ecn::Ect1,
            ..Segment::default()
        };
        let mut f = Vec::new();
        let (a, b) = (Ipv4Addr::new(10, 0, 0, 1), Ipv4Addr::new(10, 0, 0, 2));
        seg.emit(&mut f, mac(1), mac(2), a, b, 0, 64).unwrap();
        assert_eq!(f.len(), 54 + 20, "headers only: 54 + 2 SACK blocks (18 B padded to 20)");
        let (back, src, dst) = Segment::parse(&f).unwrap();
        assert_eq!(back, seg);
        assert_eq!((src, dst), (IpAddr::V4(a), IpAddr::V4(b)));
        // The TCP checksum is valid for the zero-filled payload.
        let mut full = f.clone();
        full.resize(f.len() + 1448, 0);
        let tcp = TcpPacket::new_checked(&full[34..]).unwrap();
        assert_eq!(tcp.verify_checksum(&src, &dst, 20 + 20 + 1448), Some(true));
    }

    #[test]
    fn syn_options_round_trip_and_seq_len() {
        let seg = Segment {
            flags: TcpFlags::SYN | TcpFlags::ECE | TcpFlags::CWR,
            mss: Some(1448),
            wscale: Some(7),
            sack_permitted: true,
            ..Segment::default()
        };
        let mut f = Vec::new();
        seg.emit(&mut f, mac(1), mac(2), Ipv4Addr::LOCALHOST, Ipv4Addr::LOCALHOST, 0, 64).unwrap();
        let (back, ..) = Segment::parse(&f).unwrap();
        assert_eq!(back, seg);
        assert_eq!(back.seq_len(), 1);
    }

    #[test]
    fn udp_is_refused() {
        let mut f = Vec::new();
        latnet_wire::build_udp_ipv4(
            &mut f,
            mac(1),
            mac(2),
            Ipv4Addr::LOCALHOST,
            Ipv4Addr::LOCALHOST,
            0,
            Ecn::NotEct,
            64,
            1,
            2,
            100,
        )
        .unwrap();
        assert!(Segment::parse(&f).is_err());
    }

    proptest! {
        #[test]
        fn parse_never_panics(bytes in proptest::collection::vec(any::<u8>(), 0..160)) {
            let _ = Segment::parse(&bytes);
        }

        #[test]
        fn parse_never_panics_on_mutated_segments(
            pos in 0usize..80, val in any::<u8>(), cut in 0usize..80
        ) {
            let seg = Segment { flags: TcpFlags::ACK, len: 100,
                sack: SackBlocks::new(&[(1, 2)]), ..Segment::default() };
            let mut f = Vec::new();
            seg.emit(&mut f, mac(1), mac(2), Ipv4Addr::LOCALHOST, Ipv4Addr::LOCALHOST, 0, 64)
                .unwrap();
            if pos < f.len() { f[pos] = val; }
            f.truncate(f.len().saturating_sub(cut % 8));
            let _ = Segment::parse(&f);
        }
    }
}
