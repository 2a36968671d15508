//! IPv4 (RFC 791): [`Ipv4Packet`] view and [`Ipv4Repr`].
//!
//! # Contract
//!
//! [`Ipv4Packet::new_checked`] validates the *header* only: the buffer holds at least IHL x 4
//! bytes, IHL >= 5, and total length >= header length. The payload may be partly or entirely
//! absent (latnet's simulator carries a virtual payload length): [`Ipv4Packet::payload`] returns
//! the bytes present and [`Ipv4Packet::payload_missing`] how many are not. Once `new_checked`
//! succeeded no accessor panics, and the header-length-dependent accessors stay panic-free even
//! after a setter changed IHL.
//!
//! # Setters and the header checksum
//!
//! Plain setters write their field and leave the checksum alone: call
//! [`Ipv4Packet::fill_checksum`] after them. The forwarding rewrites [`Ipv4Packet::set_dscp`],
//! [`Ipv4Packet::set_ecn`], [`Ipv4Packet::set_ttl`] and [`Ipv4Packet::decrement_ttl`] instead
//! update the checksum incrementally (RFC 1624), so a valid header stays valid.

use std::net::Ipv4Addr;

use crate::checksum;
use crate::error::{need, Layer, Result, WireError};
use crate::ip::{tos, Ecn, DSCP_MAX};
use crate::ipv4_option::{check_options, Ipv4Options, MAX_OPTIONS_LEN};
use crate::util::{be16, clamped, clamped_mut, put16};

mod field {
    use std::ops::Range;
    pub const VER_IHL: usize = 0;
    pub const TOS: usize = 1;
    pub const LENGTH: usize = 2;
    pub const IDENT: usize = 4;
    pub const FLG_OFF: usize = 6;
    pub const TTL: usize = 8;
    pub const PROTOCOL: usize = 9;
    pub const CHECKSUM: usize = 10;
    pub const SRC: Range<usize> = 12..16;
    pub const DST: Range<usize> = 16..20;
    pub const OPTIONS: usize = 20;
}

/// Length of the fixed header (IHL 5).
pub const HEADER_LEN: usize = field::OPTIONS;
/// Longest header (IHL 15).
pub const MAX_HEADER_LEN: usize = HEADER_LEN + MAX_OPTIONS_LEN;

const RESERVED: u16 = 0x8000;
const DF: u16 = 0x4000;
const MF: u16 = 0x2000;
const OFFSET_MASK: u16 = 0x1fff;

/// Zero-copy view of an IPv4 header and whatever payload bytes follow it.
#[derive(Debug, Clone)]
pub struct Ipv4Packet<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> Ipv4Packet<T> {
    /// Wraps `buffer` without checks; accessors may panic on a short or inconsistent buffer.
    pub const fn new_unchecked(buffer: T) -> Ipv4Packet<T> {
        Ipv4Packet { buffer }
    }

    /// Wraps `buffer` after [`Self::check_len`].
    pub fn new_checked(buffer: T) -> Result<Ipv4Packet<T>> {
        let p = Self::new_unchecked(buffer);
        p.check_len()?;
        Ok(p)
    }

    /// Validates that the header is complete and self-consistent (see the module docs). Does
    /// not check the version, the checksum or the options: [`Ipv4Repr::parse`] does.
    pub fn check_len(&self) -> Result<()> {
        let len = self.buffer.as_ref().len();
        need(Layer::Ipv4, HEADER_LEN, len)?;
        let hl = self.header_len();
        if hl < HEADER_LEN {
            return Err(WireError::malformed(Layer::Ipv4, "ihl"));
        }
        need(Layer::Ipv4, hl, len)?;
        if usize::from(self.total_len()) < hl {
            return Err(WireError::malformed(Layer::Ipv4, "total_len"));
        }
        Ok(())
    }

    /// The wrapped buffer.
    pub fn into_inner(self) -> T {
        self.buffer
    }

    /// Version field (4 for a valid packet).
    #[inline]
    pub fn version(&self) -> u8 {
        self.buffer.as_ref()[field::VER_IHL] >> 4
    }

    /// Header length in bytes (IHL x 4).
    #[inline]
    pub fn header_len(&self) -> usize {
        usize::from(self.buffer.as_ref()[field::VER_IHL] & 0x0f) * 4
    }

    /// The TOS byte (DSCP and ECN).
    #[inline]
    pub fn tos(&self) -> u8 {
        self.buffer.as_ref()[field::TOS]
    }

    /// Differentiated services code point (6 bits).
    #[inline]
    pub fn dscp(&self) -> u8 {
        self.tos() >> 2
    }

    /// ECN field.
    #[inline]
    pub fn ecn(&self) -> Ecn {
        Ecn::from_bits(self.tos())
    }

    /// Total length: header plus payload, in bytes (the payload may be virtual).
    #[inline]
    pub fn total_len(&self) -> u16 {
        be16(self.buffer.as_ref(), field::LENGTH)
    }

    /// Identification.
    #[inline]
    pub fn ident(&self) -> u16 {
        be16(self.buffer.as_ref(), field::IDENT)
    }

    /// The reserved flag (bit 0 of the flags; must be zero, RFC 791).
    #[inline]
    pub fn reserved_flag(&self) -> bool {
        be16(self.buffer.as_ref(), field::FLG_OFF) & RESERVED != 0
    }

    /// Don't-fragment flag.
    #[inline]
    pub fn dont_frag(&self) -> bool {
        be16(self.buffer.as_ref(), field::FLG_OFF) & DF != 0
    }

    /// More-fragments flag.
    #[inline]
    pub fn more_frags(&self) -> bool {
        be16(self.buffer.as_ref(), field::FLG_OFF) & MF != 0
    }

    /// Fragment offset in bytes (the field times 8).
    #[inline]
    pub fn frag_offset(&self) -> u16 {
        (be16(self.buffer.as_ref(), field::FLG_OFF) & OFFSET_MASK) << 3
    }

    /// A fragment other than the first: its payload does not start with the L4 header.
    #[inline]
    pub fn is_later_fragment(&self) -> bool {
        be16(self.buffer.as_ref(), field::FLG_OFF) & OFFSET_MASK != 0
    }

    /// Time to live.
    #[inline]
    pub fn ttl(&self) -> u8 {
        self.buffer.as_ref()[field::TTL]
    }

    /// Protocol of the payload (see [`crate::ip::protocol`]).
    #[inline]
    pub fn protocol(&self) -> u8 {
        self.buffer.as_ref()[field::PROTOCOL]
    }

    /// Header checksum field.
    #[inline]
    pub fn checksum(&self) -> u16 {
        be16(self.buffer.as_ref(), field::CHECKSUM)
    }

    /// Source address.
    #[inline]
    pub fn src_addr(&self) -> Ipv4Addr {
        let d = &self.buffer.as_ref()[field::SRC];
        Ipv4Addr::new(d[0], d[1], d[2], d[3])
    }

    /// Destination address.
    #[inline]
    pub fn dst_addr(&self) -> Ipv4Addr {
        let d = &self.buffer.as_ref()[field::DST];
        Ipv4Addr::new(d[0], d[1], d[2], d[3])
    }

    /// Option bytes (between the fixed header and IHL), padding included.
    #[inline]
    pub fn options(&self) -> &[u8] {
        clamped(self.buffer.as_ref(), field::OPTIONS, self.header_len())
    }

    /// Iterator over the options.
    pub fn options_iter(&self) -> Ipv4Options<'_> {
        Ipv4Options::new(self.options())
    }

    /// Payload bytes present in the buffer: from the header end to the total length or the
    /// buffer end, whichever comes first (bytes past the total length, e.g. Ethernet padding,
    /// are not payload).
    #[inline]
    pub fn payload(&self) -> &[u8] {
        clamped(self.buffer.as_ref(), self.header_len(), usize::from(self.total_len()))
    }

    /// Payload bytes counted in the total length but absent from the buffer.
    #[inline]
    pub fn payload_missing(&self) -> usize {
        usize::from(self.total_len()).saturating_sub(self.buffer.as_ref().len())
    }

    /// Whether some payload is virtual ([`Self::payload_missing`] > 0).
    #[inline]
    pub fn is_truncated(&self) -> bool {
        self.payload_missing() > 0
    }

    /// Whether the header checksum is correct. Always computable: it covers the header only.
    pub fn verify_checksum(&self) -> bool {
        let d = self.buffer.as_ref();
        match d.get(..self.header_len()) {
            Some(h) => checksum::data(h) == 0xffff,
            None => false,
        }
    }
}

impl<'a, T: AsRef<[u8]> + ?Sized> Ipv4Packet<&'a T> {
    /// [`Ipv4Packet::options`] with the lifetime of the underlying buffer.
    pub fn options_ref(&self) -> &'a [u8] {
        let d: &'a [u8] = self.buffer.as_ref();
        clamped(d, field::OPTIONS, self.header_len())
    }

    /// [`Ipv4Packet::payload`] with the lifetime of the underlying buffer.
    pub fn payload_ref(&self) -> &'a [u8] {
        let d: &'a [u8] = self.buffer.as_ref();
        clamped(d, self.header_len(), usize::from(self.total_len()))
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Ipv4Packet<T> {
    /// Sets the version (checksum untouched).
    pub fn set_version(&mut self, v: u8) {
        let d = self.buffer.as_mut();
        d[field::VER_IHL] = (v << 4) | (d[field::VER_IHL] & 0x0f);
    }

    /// Sets IHL to `len / 4` (checksum untouched).
    pub fn set_header_len(&mut self, len: usize) {
        let d = self.buffer.as_mut();
        d[field::VER_IHL] = (d[field::VER_IHL] & 0xf0) | ((len / 4) as u8 & 0x0f);
    }

    /// Sets the whole TOS byte (checksum untouched).
    pub fn set_tos(&mut self, tos: u8) {
        self.buffer.as_mut()[field::TOS] = tos;
    }

    /// Sets the total length (checksum untouched).
    pub fn set_total_len(&mut self, v: u16) {
        put16(self.buffer.as_mut(), field::LENGTH, v);
    }

    /// Sets the identification (checksum untouched).
    pub fn set_ident(&mut self, v: u16) {
        put16(self.buffer.as_mut(), field::IDENT, v);
    }

    fn set_flg_off(&mut self, mask: u16, bits: u16) {
        let d = self.buffer.as_mut();
        let v = (be16(d, field::FLG_OFF) & !mask) | (bits & mask);
        put16(d, field::FLG_OFF, v);
    }

    /// Sets the reserved flag (checksum untouched).
    pub fn set_reserved_flag(&mut self, v: bool) {
        self.set_flg_off(RESERVED, if v { RESERVED } else { 0 });
    }

    /// Sets the don't-fragment flag (checksum untouched).
    pub fn set_dont_frag(&mut self, v: bool) {
        self.set_flg_off(DF, if v { DF } else { 0 });
    }

    /// Sets the more-fragments flag (checksum untouched).
    pub fn set_more_frags(&mut self, v: bool) {
        self.set_flg_off(MF, if v { MF } else { 0 });
    }

    /// Sets the fragment offset from a byte offset (divided by 8; checksum untouched).
    pub fn set_frag_offset(&mut self, bytes: u16) {
        self.set_flg_off(OFFSET_MASK, bytes >> 3);
    }

    /// Sets the protocol (checksum untouched).
    pub fn set_protocol(&mut self, v: u8) {
        self.buffer.as_mut()[field::PROTOCOL] = v;
    }

    /// Sets the checksum field.
    pub fn set_checksum(&mut self, v: u16) {
        put16(self.buffer.as_mut(), field::CHECKSUM, v);
    }

    /// Sets the source address (checksum untouched).
    pub fn set_src_addr(&mut self, a: Ipv4Addr) {
        self.buffer.as_mut()[field::SRC].copy_from_slice(&a.octets());
    }

    /// Sets the destination address (checksum untouched).
    pub fn set_dst_addr(&mut self, a: Ipv4Addr) {
        self.buffer.as_mut()[field::DST].copy_from_slice(&a.octets());
    }

    /// Recomputes the header checksum.
    pub fn fill_checksum(&mut self) {
        self.set_checksum(0);
        let hl = self.header_len();
        let c = checksum::checksum(clamped(self.buffer.as_ref(), 0, hl));
        self.set_checksum(c);
    }

    /// Rewrites the 16-bit word at `at` and updates the checksum incrementally.
    fn rewrite_word(&mut self, at: usize, new: u16) {
        let d = self.buffer.as_mut();
        let old = be16(d, at);
        if old != new {
            put16(d, at, new);
            let c = checksum::update_word(be16(d, field::CHECKSUM), old, new);
            put16(d, field::CHECKSUM, c);
        }
    }

    /// Sets the DSCP (masked to 6 bits), keeping the checksum valid (RFC 1624).
    pub fn set_dscp(&mut self, dscp: u8) {
        let d = self.buffer.as_ref();
        let word = u16::from_be_bytes([d[field::VER_IHL], tos(dscp, self.ecn())]);
        self.rewrite_word(field::VER_IHL, word);
    }

    /// Sets the ECN field, keeping the checksum valid (RFC 1624). This is how a queue marks CE.
    pub fn set_ecn(&mut self, ecn: Ecn) {
        let d = self.buffer.as_ref();
        let word = u16::from_be_bytes([d[field::VER_IHL], (d[field::TOS] & !0b11) | ecn.bits()]);
        self.rewrite_word(field::VER_IHL, word);
    }

    /// Sets the TTL, keeping the checksum valid (RFC 1624).
    pub fn set_ttl(&mut self, ttl: u8) {
        let d = self.buffer.as_ref();
        let word = u16::from_be_bytes([ttl, d[field::PROTOCOL]]);
        self.rewrite_word(field::TTL, word);
    }

    /// Decrements the TTL by one, keeping the checksum valid, and returns the new TTL. A TTL
    /// of 0 is left as is. A result of 0 means the packet has expired and must be dropped.
    pub fn decrement_ttl(&mut self) -> u8 {
        let ttl = self.ttl().saturating_sub(1);
        self.set_ttl(ttl);
        ttl
    }

    /// Mutable option bytes.
    pub fn options_mut(&mut self) -> &mut [u8] {
        let hl = self.header_len();
        clamped_mut(self.buffer.as_mut(), field::OPTIONS, hl)
    }

    /// Mutable payload bytes present in the buffer.
    pub fn payload_mut(&mut self) -> &mut [u8] {
        let (hl, tl) = (self.header_len(), usize::from(self.total_len()));
        clamped_mut(self.buffer.as_mut(), hl, tl)
    }
}

/// The fields of an IPv4 header.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Ipv4Repr<'a> {
    /// Source address.
    pub src_addr: Ipv4Addr,
    /// Destination address.
    pub dst_addr: Ipv4Addr,
    /// Payload protocol.
    pub protocol: u8,
    /// DSCP, 0..=63.
    pub dscp: u8,
    /// ECN field.
    pub ecn: Ecn,
    /// Identification.
    pub ident: u16,
    /// Don't-fragment flag.
    pub dont_frag: bool,
    /// More-fragments flag.
    pub more_frags: bool,
    /// Fragment offset in bytes (a multiple of 8, at most 65528).
    pub frag_offset: u16,
    /// Time to live.
    pub ttl: u8,
    /// Payload length in bytes (total length minus header length; may be virtual).
    pub payload_len: usize,
    /// Raw option bytes, padded to a multiple of 4 (at most 40); see
    /// [`crate::Ipv4OptionBuf`] to build them.
    pub options: &'a [u8],
}

impl<'a> Ipv4Repr<'a> {
    /// Reads and validates a header: lengths, version 4, header checksum, the reserved flag
    /// clear, and options. The payload need not be present.
    ///
    /// A checksum field of `0xffff` is refused even where it verifies (the other words sum to
    /// zero, so `0x0000` is equally valid): RFC 1071 never computes it (RFC 1624 section 3), and
    /// refusing it keeps `parse` then `emit` byte-exact. [`Ipv4Packet::verify_checksum`]
    /// accepts it, as receivers do.
    pub fn parse<T: AsRef<[u8]> + ?Sized>(packet: &Ipv4Packet<&'a T>) -> Result<Ipv4Repr<'a>> {
        packet.check_len()?;
        if packet.version() != 4 {
            return Err(WireError::malformed(Layer::Ipv4, "version"));
        }
        if !packet.verify_checksum() || packet.checksum() == 0xffff {
            return Err(WireError::malformed(Layer::Ipv4, "checksum"));
        }
        if packet.reserved_flag() {
            return Err(WireError::malformed(Layer::Ipv4, "reserved flag"));
        }
        let options = packet.options_ref();
        check_options(options)?;
        Ok(Ipv4Repr {
            src_addr: packet.src_addr(),
            dst_addr: packet.dst_addr(),
            protocol: packet.protocol(),
            dscp: packet.dscp(),
            ecn: packet.ecn(),
            ident: packet.ident(),
            dont_frag: packet.dont_frag(),
            more_frags: packet.more_frags(),
            frag_offset: packet.frag_offset(),
            ttl: packet.ttl(),
            payload_len: usize::from(packet.total_len()) - packet.header_len(),
            options,
        })
    }

    /// Header length: 20 plus the option bytes.
    pub const fn header_len(&self) -> usize {
        HEADER_LEN + self.options.len()
    }

    /// Bytes [`Self::emit`] writes: the header only (the payload is the caller's, or virtual).
    pub const fn buffer_len(&self) -> usize {
        self.header_len()
    }

    /// `Ok` if [`Self::emit`] can encode these fields faithfully: DSCP <= 63, options a
    /// multiple of 4 and at most 40 bytes, well-formed options, fragment offset a multiple of 8,
    /// and header plus payload at most 65535 bytes.
    pub fn check(&self) -> Result<()> {
        if self.dscp > DSCP_MAX {
            return Err(WireError::malformed(Layer::Ipv4, "dscp"));
        }
        if self.options.len() % 4 != 0 || self.options.len() > MAX_OPTIONS_LEN {
            return Err(WireError::malformed(Layer::Ipv4, "options length"));
        }
        check_options(self.options)?;
        if self.frag_offset % 8 != 0 {
            return Err(WireError::malformed(Layer::Ipv4, "frag_offset"));
        }
        if self.header_len().saturating_add(self.payload_len) > usize::from(u16::MAX) {
            return Err(WireError::malformed(Layer::Ipv4, "total_len"));
        }
        Ok(())
    }

    /// Writes the header, options and checksum.
    ///
    /// # Panics
    /// If the buffer is shorter than [`Self::buffer_len`] or [`Self::check`] fails.
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(&self, packet: &mut Ipv4Packet<T>) {
        assert!(self.check().is_ok(), "Ipv4Repr::emit: fields fail check(): {self:?}");
        let hl = self.header_len();
        let d = packet.buffer.as_mut();
        d[field::VER_IHL] = 0x40 | (hl / 4) as u8;
        d[field::TOS] = tos(self.dscp, self.ecn);
        put16(d, field::LENGTH, (hl + self.payload_len) as u16);
        put16(d, field::IDENT, self.ident);
        let flg = (u16::from(self.dont_frag) << 14)
            | (u16::from(self.more_frags) << 13)
            | (self.frag_offset >> 3);
        put16(d, field::FLG_OFF, flg);
        d[field::TTL] = self.ttl;
        d[field::PROTOCOL] = self.protocol;
        d[field::SRC].copy_from_slice(&self.src_addr.octets());
        d[field::DST].copy_from_slice(&self.dst_addr.octets());
        d[field::OPTIONS..hl].copy_from_slice(self.options);
        packet.fill_checksum();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const CLASSIC: [u8; 20] = [
        0x45, 0x00, 0x00, 0x73, 0x00, 0x00, 0x40, 0x00, 0x40, 0x11, 0xb8, 0x61, 0xc0, 0xa8, 0x00,
        0x01, 0xc0, 0xa8, 0x00, 0xc7,
    ];

    #[test]
    fn virtual_payload() {
        let p = Ipv4Packet::new_checked(&CLASSIC[..]).expect("header complete");
        assert_eq!(p.payload(), &[] as &[u8]);
        assert_eq!(p.payload_missing(), 0x73 - 20);
        assert!(p.is_truncated());
        assert!(p.verify_checksum());
    }

    #[test]
    fn header_inconsistencies() {
        let mut h = CLASSIC;
        h[0] = 0x44;
        assert_eq!(
            Ipv4Packet::new_checked(&h[..]).err(),
            Some(WireError::malformed(Layer::Ipv4, "ihl"))
        );
        h[0] = 0x46;
        assert_eq!(
            Ipv4Packet::new_checked(&h[..]).err(),
            Some(WireError::truncated(Layer::Ipv4, 24, 20))
        );
        let mut h = CLASSIC;
        h[2] = 0;
        h[3] = 19;
        assert_eq!(
            Ipv4Packet::new_checked(&h[..]).err(),
            Some(WireError::malformed(Layer::Ipv4, "total_len"))
        );
    }

    #[test]
    fn accessors_survive_hostile_ihl_setter() {
        let mut h = CLASSIC;
        let mut p = Ipv4Packet::new_checked(&mut h[..]).expect("ok");
        p.set_header_len(60);
        assert_eq!(p.options().len(), 0);
        assert_eq!(p.payload().len(), 0);
        assert_eq!(p.options_mut().len(), 0);
        assert!(!p.verify_checksum());
        p.fill_checksum();
    }
}
