//! UDP (RFC 768): [`UdpPacket`] view and [`UdpRepr`].
//!
//! # Contract
//!
//! [`UdpPacket::new_checked`] validates the 8-byte header and that the length field is at least
//! 8; the payload may be virtual ([`UdpPacket::payload`] returns the bytes present,
//! [`UdpPacket::payload_missing`] counts the others). Once `new_checked` succeeded no accessor
//! panics.
//!
//! # Checksums
//!
//! [`UdpPacket::verify_checksum`] answers only when the whole datagram is present (`None`
//! otherwise). Over IPv4 a zero checksum means "none" and verifies; over IPv6 it is invalid.
//! [`UdpPacket::fill_checksum`] always works: missing payload bytes count as zeros, which is the
//! convention the builders use for virtual payloads.

use std::net::IpAddr;

use crate::checksum;
use crate::error::{need, Layer, Result, WireError};
use crate::ip::protocol;
use crate::util::{be16, clamped, clamped_mut, put16};

mod field {
    pub const SRC_PORT: usize = 0;
    pub const DST_PORT: usize = 2;
    pub const LENGTH: usize = 4;
    pub const CHECKSUM: usize = 6;
    pub const PAYLOAD: usize = 8;
}

/// Length of the UDP header.
pub const HEADER_LEN: usize = field::PAYLOAD;

/// Zero-copy view of a UDP header and whatever payload bytes follow it.
#[derive(Debug, Clone)]
pub struct UdpPacket<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> UdpPacket<T> {
    /// Wraps `buffer` without checks; accessors may panic if it is shorter than 8 bytes.
    pub const fn new_unchecked(buffer: T) -> UdpPacket<T> {
        UdpPacket { buffer }
    }

    /// Wraps `buffer` after [`Self::check_len`].
    pub fn new_checked(buffer: T) -> Result<UdpPacket<T>> {
        let p = Self::new_unchecked(buffer);
        p.check_len()?;
        Ok(p)
    }

    /// `Truncated` if the header is incomplete, `Malformed` if the length field is below 8.
    pub fn check_len(&self) -> Result<()> {
        need(Layer::Udp, HEADER_LEN, self.buffer.as_ref().len())?;
        if usize::from(self.length()) < HEADER_LEN {
            return Err(WireError::malformed(Layer::Udp, "length"));
        }
        Ok(())
    }

    /// The wrapped buffer.
    pub fn into_inner(self) -> T {
        self.buffer
    }

    /// Source port.
    #[inline]
    pub fn src_port(&self) -> u16 {
        be16(self.buffer.as_ref(), field::SRC_PORT)
    }

    /// Destination port.
    #[inline]
    pub fn dst_port(&self) -> u16 {
        be16(self.buffer.as_ref(), field::DST_PORT)
    }

    /// Length field: header plus payload (may be virtual).
    #[inline]
    pub fn length(&self) -> u16 {
        be16(self.buffer.as_ref(), field::LENGTH)
    }

    /// Checksum field.
    #[inline]
    pub fn checksum(&self) -> u16 {
        be16(self.buffer.as_ref(), field::CHECKSUM)
    }

    /// Payload bytes present: from byte 8 to the length field or the buffer end.
    #[inline]
    pub fn payload(&self) -> &[u8] {
        clamped(self.buffer.as_ref(), HEADER_LEN, usize::from(self.length()))
    }

    /// Payload bytes counted in the length field but absent from the buffer.
    #[inline]
    pub fn payload_missing(&self) -> usize {
        usize::from(self.length()).saturating_sub(self.buffer.as_ref().len())
    }

    /// Whether some payload is virtual.
    #[inline]
    pub fn is_truncated(&self) -> bool {
        self.payload_missing() > 0
    }

    /// Whether the checksum is correct for the pseudo-header of `src` / `dst`.
    ///
    /// `None` if the datagram is incomplete (its checksum cannot be verified) or the addresses
    /// are of different families. A zero checksum is `Some(true)` over IPv4 (no checksum) and
    /// `Some(false)` over IPv6.
    pub fn verify_checksum(&self, src: &IpAddr, dst: &IpAddr) -> Option<bool> {
        if self.is_truncated() {
            return None;
        }
        let len = self.length();
        let pseudo = checksum::pseudo_header(src, dst, protocol::UDP, u32::from(len))?;
        if self.checksum() == 0 {
            return Some(src.is_ipv4());
        }
        let data = clamped(self.buffer.as_ref(), 0, usize::from(len));
        Some(checksum::combine(&[pseudo, checksum::data(data)]) == 0xffff)
    }
}

impl<'a, T: AsRef<[u8]> + ?Sized> UdpPacket<&'a T> {
    /// [`UdpPacket::payload`] with the lifetime of the underlying buffer.
    pub fn payload_ref(&self) -> &'a [u8] {
        let d: &'a [u8] = self.buffer.as_ref();
        clamped(d, HEADER_LEN, usize::from(self.length()))
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> UdpPacket<T> {
    /// Sets the source port.
    pub fn set_src_port(&mut self, v: u16) {
        put16(self.buffer.as_mut(), field::SRC_PORT, v);
    }

    /// Sets the destination port.
    pub fn set_dst_port(&mut self, v: u16) {
        put16(self.buffer.as_mut(), field::DST_PORT, v);
    }

    /// Sets the length field.
    pub fn set_length(&mut self, v: u16) {
        put16(self.buffer.as_mut(), field::LENGTH, v);
    }

    /// Sets the checksum field.
    pub fn set_checksum(&mut self, v: u16) {
        put16(self.buffer.as_mut(), field::CHECKSUM, v);
    }

    /// Computes and writes the checksum for the pseudo-header of `src` / `dst`, counting
    /// missing payload bytes as zeros. A computed 0 is sent as `0xffff` (RFC 768).
    ///
    /// `Malformed` (and nothing written) if the addresses are of different families.
    pub fn fill_checksum(&mut self, src: &IpAddr, dst: &IpAddr) -> Result<()> {
        let len = self.length();
        let pseudo = checksum::pseudo_header(src, dst, protocol::UDP, u32::from(len))
            .ok_or(WireError::malformed(Layer::Udp, "address families"))?;
        self.set_checksum(0);
        let data = clamped(self.buffer.as_ref(), 0, usize::from(len));
        let c = !checksum::combine(&[pseudo, checksum::data(data)]);
        self.set_checksum(if c == 0 { 0xffff } else { c });
        Ok(())
    }

    /// Mutable payload bytes present in the buffer.
    pub fn payload_mut(&mut self) -> &mut [u8] {
        let end = usize::from(self.length());
        clamped_mut(self.buffer.as_mut(), HEADER_LEN, end)
    }
}

/// The fields of a UDP header.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct UdpRepr {
    /// Source port.
    pub src_port: u16,
    /// Destination port.
    pub dst_port: u16,
    /// Payload length in bytes (the length field minus 8; may be virtual).
    pub payload_len: usize,
}

impl UdpRepr {
    /// Reads a header. The checksum is not verified (the payload may be virtual): use
    /// [`UdpPacket::verify_checksum`].
    pub fn parse<T: AsRef<[u8]>>(packet: &UdpPacket<T>) -> Result<UdpRepr> {
        packet.check_len()?;
        Ok(UdpRepr {
            src_port: packet.src_port(),
            dst_port: packet.dst_port(),
            payload_len: usize::from(packet.length()) - HEADER_LEN,
        })
    }

    /// Bytes [`Self::emit`] writes: the 8-byte header.
    pub const fn buffer_len(&self) -> usize {
        HEADER_LEN
    }

    /// `Ok` if header plus payload fit the 16-bit length field.
    pub fn check(&self) -> Result<()> {
        if self.payload_len > usize::from(u16::MAX) - HEADER_LEN {
            return Err(WireError::malformed(Layer::Udp, "length"));
        }
        Ok(())
    }

    /// Writes the header with length `8 + payload_len` and checksum 0 ("none", legal over
    /// IPv4). Write the payload, then call [`UdpPacket::fill_checksum`] for a real checksum
    /// (mandatory over IPv6).
    ///
    /// # Panics
    /// If the buffer is shorter than 8 bytes or [`Self::check`] fails.
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(&self, packet: &mut UdpPacket<T>) {
        assert!(self.check().is_ok(), "UdpRepr::emit: payload too long: {self:?}");
        packet.set_src_port(self.src_port);
        packet.set_dst_port(self.dst_port);
        packet.set_length((HEADER_LEN + self.payload_len) as u16);
        packet.set_checksum(0);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::Ipv4Addr;

    #[test]
    fn length_below_header_is_malformed() {
        let b = [0, 1, 0, 2, 0, 7, 0, 0];
        assert_eq!(
            UdpPacket::new_checked(&b[..]).err(),
            Some(WireError::malformed(Layer::Udp, "length"))
        );
    }

    #[test]
    fn virtual_payload_checksum_is_zero_filled() {
        let src = IpAddr::V4(Ipv4Addr::new(10, 0, 0, 1));
        let dst = IpAddr::V4(Ipv4Addr::new(10, 0, 0, 2));
        let repr = UdpRepr { src_port: 1000, dst_port: 2000, payload_len: 100 };
        let mut short = [0u8; 8];
        let mut p = UdpPacket::new_unchecked(&mut short[..]);
        repr.emit(&mut p);
        p.fill_checksum(&src, &dst).expect("same family");
        assert_eq!(p.verify_checksum(&src, &dst), None);
        let c = p.checksum();
        let mut full = [0u8; 108];
        let mut q = UdpPacket::new_unchecked(&mut full[..]);
        repr.emit(&mut q);
        q.fill_checksum(&src, &dst).expect("same family");
        assert_eq!(q.checksum(), c);
        assert_eq!(q.verify_checksum(&src, &dst), Some(true));
        q.payload_mut()[0] = 1;
        assert_eq!(q.verify_checksum(&src, &dst), Some(false));
    }
}
