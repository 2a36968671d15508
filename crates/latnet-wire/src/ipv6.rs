//! IPv6 fixed header (RFC 8200 section 3): [`Ipv6Packet`] view and [`Ipv6Repr`].
//!
//! # Contract
//!
//! [`Ipv6Packet::new_checked`] validates only that the 40-byte fixed header is present; the
//! payload (extension headers included) may be partly or entirely virtual:
//! [`Ipv6Packet::payload`] returns the bytes present and [`Ipv6Packet::payload_missing`] how
//! many of the payload-length bytes are absent. Once `new_checked` succeeded no accessor panics.
//! IPv6 has no header checksum, so every setter is a plain write. Extension headers are walked
//! by [`crate::ipv6_ext`].

use std::net::Ipv6Addr;

use crate::error::{need, Layer, Result, WireError};
use crate::ip::{Ecn, DSCP_MAX};
use crate::util::{be16, be32, clamped, clamped_mut, put16, put32};

mod field {
    use std::ops::Range;
    pub const VER_TC_FLOW: usize = 0;
    pub const LENGTH: usize = 4;
    pub const NXT_HDR: usize = 6;
    pub const HOP_LIMIT: usize = 7;
    pub const SRC: Range<usize> = 8..24;
    pub const DST: Range<usize> = 24..40;
    pub const PAYLOAD: usize = 40;
}

/// Length of the fixed header.
pub const HEADER_LEN: usize = field::PAYLOAD;

/// Largest flow label (20 bits).
pub const FLOW_LABEL_MAX: u32 = 0x000f_ffff;

/// Zero-copy view of an IPv6 fixed header and whatever payload bytes follow it.
#[derive(Debug, Clone)]
pub struct Ipv6Packet<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> Ipv6Packet<T> {
    /// Wraps `buffer` without checks; accessors may panic if it is shorter than 40 bytes.
    pub const fn new_unchecked(buffer: T) -> Ipv6Packet<T> {
        Ipv6Packet { buffer }
    }

    /// Wraps `buffer` after [`Self::check_len`].
    pub fn new_checked(buffer: T) -> Result<Ipv6Packet<T>> {
        let p = Self::new_unchecked(buffer);
        p.check_len()?;
        Ok(p)
    }

    /// `Truncated` if the fixed header is incomplete. Does not check the version
    /// ([`Ipv6Repr::parse`] does).
    pub fn check_len(&self) -> Result<()> {
        need(Layer::Ipv6, HEADER_LEN, self.buffer.as_ref().len())
    }

    /// The wrapped buffer.
    pub fn into_inner(self) -> T {
        self.buffer
    }

    #[inline]
    fn word0(&self) -> u32 {
        be32(self.buffer.as_ref(), field::VER_TC_FLOW)
    }

    /// Version field (6 for a valid packet).
    #[inline]
    pub fn version(&self) -> u8 {
        self.buffer.as_ref()[0] >> 4
    }

    /// Traffic class (DSCP and ECN).
    #[inline]
    pub fn traffic_class(&self) -> u8 {
        (self.word0() >> 20) as u8
    }

    /// DSCP (6 bits).
    #[inline]
    pub fn dscp(&self) -> u8 {
        self.traffic_class() >> 2
    }

    /// ECN field.
    #[inline]
    pub fn ecn(&self) -> Ecn {
        Ecn::from_bits(self.traffic_class())
    }

    /// Flow label (20 bits).
    #[inline]
    pub fn flow_label(&self) -> u32 {
        self.word0() & FLOW_LABEL_MAX
    }

    /// Payload length: bytes after the fixed header, extension headers included (may be
    /// virtual).
    #[inline]
    pub fn payload_len(&self) -> u16 {
        be16(self.buffer.as_ref(), field::LENGTH)
    }

    /// Next header (first extension header or upper-layer protocol).
    #[inline]
    pub fn next_header(&self) -> u8 {
        self.buffer.as_ref()[field::NXT_HDR]
    }

    /// Hop limit.
    #[inline]
    pub fn hop_limit(&self) -> u8 {
        self.buffer.as_ref()[field::HOP_LIMIT]
    }

    /// Source address.
    #[inline]
    pub fn src_addr(&self) -> Ipv6Addr {
        let mut a = [0u8; 16];
        a.copy_from_slice(&self.buffer.as_ref()[field::SRC]);
        Ipv6Addr::from(a)
    }

    /// Destination address.
    #[inline]
    pub fn dst_addr(&self) -> Ipv6Addr {
        let mut a = [0u8; 16];
        a.copy_from_slice(&self.buffer.as_ref()[field::DST]);
        Ipv6Addr::from(a)
    }

    /// Payload bytes present: from byte 40 to `40 + payload_len` or the buffer end.
    #[inline]
    pub fn payload(&self) -> &[u8] {
        clamped(self.buffer.as_ref(), HEADER_LEN, HEADER_LEN + usize::from(self.payload_len()))
    }

    /// Payload bytes counted in the payload length but absent from the buffer.
    #[inline]
    pub fn payload_missing(&self) -> usize {
        (HEADER_LEN + usize::from(self.payload_len())).saturating_sub(self.buffer.as_ref().len())
    }

    /// Whether some payload is virtual.
    #[inline]
    pub fn is_truncated(&self) -> bool {
        self.payload_missing() > 0
    }
}

impl<'a, T: AsRef<[u8]> + ?Sized> Ipv6Packet<&'a T> {
    /// [`Ipv6Packet::payload`] with the lifetime of the underlying buffer.
    pub fn payload_ref(&self) -> &'a [u8] {
        let d: &'a [u8] = self.buffer.as_ref();
        clamped(d, HEADER_LEN, HEADER_LEN + usize::from(self.payload_len()))
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Ipv6Packet<T> {
    fn set_word0(&mut self, mask: u32, bits: u32) {
        let v = (self.word0() & !mask) | (bits & mask);
        put32(self.buffer.as_mut(), field::VER_TC_FLOW, v);
    }

    /// Sets the version.
    pub fn set_version(&mut self, v: u8) {
        self.set_word0(0xf000_0000, u32::from(v) << 28);
    }

    /// Sets the traffic class.
    pub fn set_traffic_class(&mut self, tc: u8) {
        self.set_word0(0x0ff0_0000, u32::from(tc) << 20);
    }

    /// Sets the DSCP (masked to 6 bits), keeping ECN.
    pub fn set_dscp(&mut self, dscp: u8) {
        self.set_word0(0x0fc0_0000, u32::from(dscp & DSCP_MAX) << 22);
    }

    /// Sets the ECN field, keeping DSCP. This is how a queue marks CE.
    pub fn set_ecn(&mut self, ecn: Ecn) {
        self.set_word0(0x0030_0000, u32::from(ecn.bits()) << 20);
    }

    /// Sets the flow label (masked to 20 bits).
    pub fn set_flow_label(&mut self, v: u32) {
        self.set_word0(FLOW_LABEL_MAX, v);
    }

    /// Sets the payload length.
    pub fn set_payload_len(&mut self, v: u16) {
        put16(self.buffer.as_mut(), field::LENGTH, v);
    }

    /// Sets the next header.
    pub fn set_next_header(&mut self, v: u8) {
        self.buffer.as_mut()[field::NXT_HDR] = v;
    }

    /// Sets the hop limit.
    pub fn set_hop_limit(&mut self, v: u8) {
        self.buffer.as_mut()[field::HOP_LIMIT] = v;
    }

    /// Decrements the hop limit by one and returns the new value; 0 is left as is. A result
    /// of 0 means the packet has expired and must be dropped.
    pub fn decrement_hop_limit(&mut self) -> u8 {
        let h = self.hop_limit().saturating_sub(1);
        self.set_hop_limit(h);
        h
    }

    /// Sets the source address.
    pub fn set_src_addr(&mut self, a: &Ipv6Addr) {
        self.buffer.as_mut()[field::SRC].copy_from_slice(&a.octets());
    }

    /// Sets the destination address.
    pub fn set_dst_addr(&mut self, a: &Ipv6Addr) {
        self.buffer.as_mut()[field::DST].copy_from_slice(&a.octets());
    }

    /// Mutable payload bytes present in the buffer.
    pub fn payload_mut(&mut self) -> &mut [u8] {
        let end = HEADER_LEN + usize::from(self.payload_len());
        clamped_mut(self.buffer.as_mut(), HEADER_LEN, end)
    }
}

/// The fields of an IPv6 fixed header.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Ipv6Repr {
    /// Source address.
    pub src_addr: Ipv6Addr,
    /// Destination address.
    pub dst_addr: Ipv6Addr,
    /// Next header.
    pub next_header: u8,
    /// Payload length in bytes, extension headers included (may be virtual).
    pub payload_len: usize,
    /// Hop limit.
    pub hop_limit: u8,
    /// DSCP, 0..=63.
    pub dscp: u8,
    /// ECN field.
    pub ecn: Ecn,
    /// Flow label, at most [`FLOW_LABEL_MAX`].
    pub flow_label: u32,
}

impl Ipv6Repr {
    /// Reads a fixed header; `Malformed` unless the version is 6. The payload need not be
    /// present.
    pub fn parse<T: AsRef<[u8]>>(packet: &Ipv6Packet<T>) -> Result<Ipv6Repr> {
        packet.check_len()?;
        if packet.version() != 6 {
            return Err(WireError::malformed(Layer::Ipv6, "version"));
        }
        Ok(Ipv6Repr {
            src_addr: packet.src_addr(),
            dst_addr: packet.dst_addr(),
            next_header: packet.next_header(),
            payload_len: usize::from(packet.payload_len()),
            hop_limit: packet.hop_limit(),
            dscp: packet.dscp(),
            ecn: packet.ecn(),
            flow_label: packet.flow_label(),
        })
    }

    /// Bytes [`Self::emit`] writes: 40 (the fixed header only).
    pub const fn buffer_len(&self) -> usize {
        HEADER_LEN
    }

    /// `Ok` if [`Self::emit`] can encode these fields faithfully: DSCP <= 63, flow label
    /// within 20 bits, payload length at most 65535 (jumbograms are not supported).
    pub fn check(&self) -> Result<()> {
        if self.dscp > DSCP_MAX {
            return Err(WireError::malformed(Layer::Ipv6, "dscp"));
        }
        if self.flow_label > FLOW_LABEL_MAX {
            return Err(WireError::malformed(Layer::Ipv6, "flow_label"));
        }
        if self.payload_len > usize::from(u16::MAX) {
            return Err(WireError::unsupported(Layer::Ipv6, "payload over 65535 bytes"));
        }
        Ok(())
    }

    /// Writes the fixed header.
    ///
    /// # Panics
    /// If the buffer is shorter than 40 bytes or [`Self::check`] fails.
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(&self, packet: &mut Ipv6Packet<T>) {
        assert!(self.check().is_ok(), "Ipv6Repr::emit: fields fail check(): {self:?}");
        let tc = crate::ip::tos(self.dscp, self.ecn);
        let w0 = (6u32 << 28) | (u32::from(tc) << 20) | self.flow_label;
        let d = packet.buffer.as_mut();
        put32(d, field::VER_TC_FLOW, w0);
        put16(d, field::LENGTH, self.payload_len as u16);
        d[field::NXT_HDR] = self.next_header;
        d[field::HOP_LIMIT] = self.hop_limit;
        d[field::SRC].copy_from_slice(&self.src_addr.octets());
        d[field::DST].copy_from_slice(&self.dst_addr.octets());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn traffic_class_fields() {
        let mut b = [0u8; 40];
        let mut p = Ipv6Packet::new_checked(&mut b[..]).expect("40 bytes");
        p.set_version(6);
        p.set_flow_label(0xabcde);
        p.set_dscp(46);
        p.set_ecn(Ecn::Ect1);
        assert_eq!((p.dscp(), p.ecn(), p.flow_label(), p.version()), (46, Ecn::Ect1, 0xabcde, 6));
        p.set_ecn(Ecn::Ce);
        assert_eq!((p.dscp(), p.ecn(), p.traffic_class()), (46, Ecn::Ce, 0xbb));
        assert_eq!(&b[..4], &[0x6b, 0xba, 0xbc, 0xde]);
    }

    #[test]
    fn truncated_fixed_header() {
        for n in 0..HEADER_LEN {
            let b = vec![0x60; n];
            assert_eq!(
                Ipv6Packet::new_checked(&b[..]).err(),
                Some(WireError::truncated(Layer::Ipv6, 40, n))
            );
        }
    }
}
