//! TCP (RFC 9293): [`TcpPacket`] view, [`TcpRepr`], [`TcpFlags`] and [`TcpSeqNumber`].
//!
//! # Contract
//!
//! [`TcpPacket::new_checked`] validates the header: at least 20 bytes, data offset >= 5 and the
//! whole header (options included) present. TCP has no length field: the segment length comes
//! from the IP layer, so the view's payload is simply the bytes after the header, and the
//! checksum functions take the segment length (header plus payload, virtual bytes included)
//! as an argument. Once `new_checked` succeeded no accessor panics.
//!
//! [`TcpRepr`] keeps the option bytes raw (validated), so `parse` then `emit` reproduces a
//! header byte for byte, unknown options included; its helper methods decode the known ones.

use std::fmt;
use std::net::IpAddr;
use std::ops;

use crate::checksum;
use crate::error::{need, Layer, Result, WireError};
use crate::ip::protocol;
use crate::tcp_option::{check_options, SackBlocks, TcpOption, TcpOptions, MAX_OPTIONS_LEN};
use crate::util::{be16, be32, clamped, clamped_mut, put16, put32};

mod field {
    pub const SRC_PORT: usize = 0;
    pub const DST_PORT: usize = 2;
    pub const SEQ: usize = 4;
    pub const ACK: usize = 8;
    pub const FLAGS: usize = 12;
    pub const WINDOW: usize = 14;
    pub const CHECKSUM: usize = 16;
    pub const URGENT: usize = 18;
    pub const OPTIONS: usize = 20;
}

/// Length of the header without options.
pub const HEADER_LEN: usize = field::OPTIONS;
/// Longest header (data offset 15).
pub const MAX_HEADER_LEN: usize = HEADER_LEN + MAX_OPTIONS_LEN;

/// The 12 low bits of header word 6: reserved bits, AE and the eight classic flags.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct TcpFlags(pub u16);

impl TcpFlags {
    /// No flags.
    pub const NONE: TcpFlags = TcpFlags(0);
    /// FIN.
    pub const FIN: TcpFlags = TcpFlags(0x001);
    /// SYN.
    pub const SYN: TcpFlags = TcpFlags(0x002);
    /// RST.
    pub const RST: TcpFlags = TcpFlags(0x004);
    /// PSH.
    pub const PSH: TcpFlags = TcpFlags(0x008);
    /// ACK.
    pub const ACK: TcpFlags = TcpFlags(0x010);
    /// URG.
    pub const URG: TcpFlags = TcpFlags(0x020);
    /// ECE (ECN echo).
    pub const ECE: TcpFlags = TcpFlags(0x040);
    /// CWR (congestion window reduced).
    pub const CWR: TcpFlags = TcpFlags(0x080);
    /// AE (accurate ECN, formerly NS, RFC 9768 / RFC 3540).
    pub const AE: TcpFlags = TcpFlags(0x100);
    /// Same bit as [`Self::AE`].
    pub const NS: TcpFlags = Self::AE;
    /// Mask of the 12 bits this type carries (three reserved bits included).
    pub const MASK: u16 = 0x0fff;

    /// All bits of `other` are set in `self`.
    #[inline]
    pub const fn contains(self, other: TcpFlags) -> bool {
        self.0 & other.0 == other.0
    }

    /// Any bit of `other` is set in `self`.
    #[inline]
    pub const fn intersects(self, other: TcpFlags) -> bool {
        self.0 & other.0 != 0
    }

    /// `self` with the bits of `other` set or cleared.
    #[inline]
    pub const fn with(self, other: TcpFlags, on: bool) -> TcpFlags {
        if on {
            TcpFlags(self.0 | other.0)
        } else {
            TcpFlags(self.0 & !other.0)
        }
    }
}

impl ops::BitOr for TcpFlags {
    type Output = TcpFlags;
    fn bitor(self, o: TcpFlags) -> TcpFlags {
        TcpFlags(self.0 | o.0)
    }
}

impl ops::BitOrAssign for TcpFlags {
    fn bitor_assign(&mut self, o: TcpFlags) {
        self.0 |= o.0;
    }
}

impl ops::BitAnd for TcpFlags {
    type Output = TcpFlags;
    fn bitand(self, o: TcpFlags) -> TcpFlags {
        TcpFlags(self.0 & o.0)
    }
}

impl fmt::Display for TcpFlags {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        const NAMES: [(TcpFlags, &str); 9] = [
            (TcpFlags::SYN, "SYN"),
            (TcpFlags::FIN, "FIN"),
            (TcpFlags::RST, "RST"),
            (TcpFlags::PSH, "PSH"),
            (TcpFlags::ACK, "ACK"),
            (TcpFlags::URG, "URG"),
            (TcpFlags::ECE, "ECE"),
            (TcpFlags::CWR, "CWR"),
            (TcpFlags::AE, "AE"),
        ];
        let mut first = true;
        for (flag, name) in NAMES {
            if self.contains(flag) {
                if !first {
                    f.write_str("|")?;
                }
                f.write_str(name)?;
                first = false;
            }
        }
        let reserved = self.0 & 0x0e00;
        if reserved != 0 {
            write!(f, "{}reserved 0x{reserved:03x}", if first { "" } else { "|" })?;
        } else if first {
            f.write_str("none")?;
        }
        Ok(())
    }
}

impl fmt::Debug for TcpFlags {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "TcpFlags({self})")
    }
}

/// A TCP sequence number: arithmetic and comparison wrap modulo 2^32 (RFC 9293 section 3.4).
///
/// Ordering compares by the sign of the wrapping difference, so it is only meaningful for
/// numbers less than 2^31 apart (which is why it is `PartialOrd` but not `Ord`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct TcpSeqNumber(pub u32);

impl TcpSeqNumber {
    /// `self - other` as a signed distance.
    #[inline]
    pub const fn diff(self, other: TcpSeqNumber) -> i32 {
        self.0.wrapping_sub(other.0) as i32
    }
}

impl ops::Add<u32> for TcpSeqNumber {
    type Output = TcpSeqNumber;
    fn add(self, n: u32) -> TcpSeqNumber {
        TcpSeqNumber(self.0.wrapping_add(n))
    }
}

impl ops::AddAssign<u32> for TcpSeqNumber {
    fn add_assign(&mut self, n: u32) {
        self.0 = self.0.wrapping_add(n);
    }
}

impl ops::Sub<u32> for TcpSeqNumber {
    type Output = TcpSeqNumber;
    fn sub(self, n: u32) -> TcpSeqNumber {
        TcpSeqNumber(self.0.wrapping_sub(n))
    }
}

impl ops::Sub for TcpSeqNumber {
    type Output = i32;
    fn sub(self, o: TcpSeqNumber) -> i32 {
        self.diff(o)
    }
}

impl PartialOrd for TcpSeqNumber {
    fn partial_cmp(&self, other: &TcpSeqNumber) -> Option<std::cmp::Ordering> {
        Some(self.diff(*other).cmp(&0))
    }
}

impl fmt::Display for TcpSeqNumber {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.0.fmt(f)
    }
}

/// Zero-copy view of a TCP header and the bytes after it.
#[derive(Debug, Clone)]
pub struct TcpPacket<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> TcpPacket<T> {
    /// Wraps `buffer` without checks; accessors may panic on a short or inconsistent buffer.
    pub const fn new_unchecked(buffer: T) -> TcpPacket<T> {
        TcpPacket { buffer }
    }

    /// Wraps `buffer` after [`Self::check_len`].
    pub fn new_checked(buffer: T) -> Result<TcpPacket<T>> {
        let p = Self::new_unchecked(buffer);
        p.check_len()?;
        Ok(p)
    }

    /// `Truncated` if the header (options included) is incomplete, `Malformed` if the data
    /// offset is below 5. Options are not checked ([`TcpRepr::parse`] does).
    pub fn check_len(&self) -> Result<()> {
        let len = self.buffer.as_ref().len();
        need(Layer::Tcp, HEADER_LEN, len)?;
        let hl = self.header_len();
        if hl < HEADER_LEN {
            return Err(WireError::malformed(Layer::Tcp, "data offset"));
        }
        need(Layer::Tcp, hl, len)
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

    /// Sequence number.
    #[inline]
    pub fn seq_number(&self) -> TcpSeqNumber {
        TcpSeqNumber(be32(self.buffer.as_ref(), field::SEQ))
    }

    /// Acknowledgment number (meaningful when ACK is set).
    #[inline]
    pub fn ack_number(&self) -> TcpSeqNumber {
        TcpSeqNumber(be32(self.buffer.as_ref(), field::ACK))
    }

    /// Header length in bytes (data offset x 4).
    #[inline]
    pub fn header_len(&self) -> usize {
        usize::from(self.buffer.as_ref()[field::FLAGS] >> 4) * 4
    }

    /// Flags (and the reserved bits).
    #[inline]
    pub fn flags(&self) -> TcpFlags {
        TcpFlags(be16(self.buffer.as_ref(), field::FLAGS) & TcpFlags::MASK)
    }

    /// SYN set.
    #[inline]
    pub fn syn(&self) -> bool {
        self.flags().contains(TcpFlags::SYN)
    }

    /// ACK set.
    #[inline]
    pub fn ack(&self) -> bool {
        self.flags().contains(TcpFlags::ACK)
    }

    /// FIN set.
    #[inline]
    pub fn fin(&self) -> bool {
        self.flags().contains(TcpFlags::FIN)
    }

    /// RST set.
    #[inline]
    pub fn rst(&self) -> bool {
        self.flags().contains(TcpFlags::RST)
    }

    /// Window field (unscaled).
    #[inline]
    pub fn window_len(&self) -> u16 {
        be16(self.buffer.as_ref(), field::WINDOW)
    }

    /// Checksum field.
    #[inline]
    pub fn checksum(&self) -> u16 {
        be16(self.buffer.as_ref(), field::CHECKSUM)
    }

    /// Urgent pointer.
    #[inline]
    pub fn urgent_at(&self) -> u16 {
        be16(self.buffer.as_ref(), field::URGENT)
    }

    /// Option bytes, padding included.
    #[inline]
    pub fn options(&self) -> &[u8] {
        clamped(self.buffer.as_ref(), field::OPTIONS, self.header_len())
    }

    /// Iterator over the options.
    pub fn options_iter(&self) -> TcpOptions<'_> {
        TcpOptions::new(self.options())
    }

    /// Bytes after the header present in the buffer.
    #[inline]
    pub fn payload(&self) -> &[u8] {
        let d = self.buffer.as_ref();
        clamped(d, self.header_len(), d.len())
    }

    /// Whether the checksum is correct for a segment of `segment_len` bytes (header plus
    /// payload, as the IP layer says) between `src` and `dst`.
    ///
    /// `None` if fewer than `segment_len` bytes are present (the checksum cannot be verified)
    /// or the addresses are of different families.
    pub fn verify_checksum(&self, src: &IpAddr, dst: &IpAddr, segment_len: usize) -> Option<bool> {
        let seg = self.buffer.as_ref().get(..segment_len)?;
        let pseudo =
            checksum::pseudo_header(src, dst, protocol::TCP, u32::try_from(segment_len).ok()?)?;
        Some(checksum::combine(&[pseudo, checksum::data(seg)]) == 0xffff)
    }
}

impl<'a, T: AsRef<[u8]> + ?Sized> TcpPacket<&'a T> {
    /// [`TcpPacket::options`] with the lifetime of the underlying buffer.
    pub fn options_ref(&self) -> &'a [u8] {
        let d: &'a [u8] = self.buffer.as_ref();
        clamped(d, field::OPTIONS, self.header_len())
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> TcpPacket<T> {
    /// Sets the source port.
    pub fn set_src_port(&mut self, v: u16) {
        put16(self.buffer.as_mut(), field::SRC_PORT, v);
    }

    /// Sets the destination port.
    pub fn set_dst_port(&mut self, v: u16) {
        put16(self.buffer.as_mut(), field::DST_PORT, v);
    }

    /// Sets the sequence number.
    pub fn set_seq_number(&mut self, v: TcpSeqNumber) {
        put32(self.buffer.as_mut(), field::SEQ, v.0);
    }

    /// Sets the acknowledgment number.
    pub fn set_ack_number(&mut self, v: TcpSeqNumber) {
        put32(self.buffer.as_mut(), field::ACK, v.0);
    }

    /// Sets the data offset from a byte length (divided by 4), keeping the flags.
    pub fn set_header_len(&mut self, bytes: usize) {
        let d = self.buffer.as_mut();
        d[field::FLAGS] = (((bytes / 4) as u8 & 0x0f) << 4) | (d[field::FLAGS] & 0x0f);
    }

    /// Sets the flags (and reserved bits), keeping the data offset.
    pub fn set_flags(&mut self, flags: TcpFlags) {
        let d = self.buffer.as_mut();
        let v = (be16(d, field::FLAGS) & !TcpFlags::MASK) | (flags.0 & TcpFlags::MASK);
        put16(d, field::FLAGS, v);
    }

    /// Sets the window field.
    pub fn set_window_len(&mut self, v: u16) {
        put16(self.buffer.as_mut(), field::WINDOW, v);
    }

    /// Sets the checksum field.
    pub fn set_checksum(&mut self, v: u16) {
        put16(self.buffer.as_mut(), field::CHECKSUM, v);
    }

    /// Sets the urgent pointer.
    pub fn set_urgent_at(&mut self, v: u16) {
        put16(self.buffer.as_mut(), field::URGENT, v);
    }

    /// Mutable option bytes.
    pub fn options_mut(&mut self) -> &mut [u8] {
        let hl = self.header_len();
        clamped_mut(self.buffer.as_mut(), field::OPTIONS, hl)
    }

    /// Mutable bytes after the header.
    pub fn payload_mut(&mut self) -> &mut [u8] {
        let hl = self.header_len();
        let d = self.buffer.as_mut();
        let len = d.len();
        clamped_mut(d, hl, len)
    }

    /// Computes and writes the checksum of a `segment_len`-byte segment (header plus payload,
    /// virtual bytes included) between `src` and `dst`. Bytes beyond the buffer count as zeros;
    /// bytes in the buffer beyond `segment_len` are ignored.
    ///
    /// `Malformed` (nothing written) for addresses of different families or a segment length
    /// that does not fit the pseudo-header.
    pub fn fill_checksum(&mut self, src: &IpAddr, dst: &IpAddr, segment_len: usize) -> Result<()> {
        let pseudo = u32::try_from(segment_len)
            .ok()
            .and_then(|l| checksum::pseudo_header(src, dst, protocol::TCP, l))
            .ok_or(WireError::malformed(Layer::Tcp, "pseudo-header"))?;
        self.set_checksum(0);
        let seg = clamped(self.buffer.as_ref(), 0, segment_len);
        let c = !checksum::combine(&[pseudo, checksum::data(seg)]);
        self.set_checksum(c);
        Ok(())
    }
}

/// The fields of a TCP header.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct TcpRepr<'a> {
    /// Source port.
    pub src_port: u16,
    /// Destination port.
    pub dst_port: u16,
    /// Sequence number.
    pub seq_number: TcpSeqNumber,
    /// Acknowledgment number (written as is, whether or not ACK is set).
    pub ack_number: TcpSeqNumber,
    /// Flags (reserved bits included, so a round trip is exact).
    pub flags: TcpFlags,
    /// Window field (unscaled).
    pub window_len: u16,
    /// Urgent pointer.
    pub urgent_at: u16,
    /// Raw option bytes padded to a multiple of 4 (at most 40); build them with
    /// [`crate::TcpOptionBuf`].
    pub options: &'a [u8],
}

impl<'a> TcpRepr<'a> {
    /// Reads a header and validates its options. The checksum is not verified (the payload may
    /// be virtual): use [`TcpPacket::verify_checksum`].
    pub fn parse<T: AsRef<[u8]> + ?Sized>(packet: &TcpPacket<&'a T>) -> Result<TcpRepr<'a>> {
        packet.check_len()?;
        let options = packet.options_ref();
        check_options(options)?;
        Ok(TcpRepr {
            src_port: packet.src_port(),
            dst_port: packet.dst_port(),
            seq_number: packet.seq_number(),
            ack_number: packet.ack_number(),
            flags: packet.flags(),
            window_len: packet.window_len(),
            urgent_at: packet.urgent_at(),
            options,
        })
    }

    /// Header length: 20 plus the option bytes.
    pub const fn header_len(&self) -> usize {
        HEADER_LEN + self.options.len()
    }

    /// Bytes [`Self::emit`] writes: the header (TCP has no length field; the payload is the
    /// caller's, or virtual).
    pub const fn buffer_len(&self) -> usize {
        self.header_len()
    }

    /// `Ok` if the options are well-formed, a multiple of 4 bytes and at most 40, and the flags
    /// fit 12 bits.
    pub fn check(&self) -> Result<()> {
        if self.options.len() % 4 != 0 || self.options.len() > MAX_OPTIONS_LEN {
            return Err(WireError::malformed(Layer::Tcp, "options length"));
        }
        if self.flags.0 & !TcpFlags::MASK != 0 {
            return Err(WireError::malformed(Layer::Tcp, "flags"));
        }
        check_options(self.options)
    }

    /// Iterator over the options.
    pub fn options_iter(&self) -> TcpOptions<'a> {
        TcpOptions::new(self.options)
    }

    fn find<R>(&self, f: impl Fn(TcpOption<'a>) -> Option<R>) -> Option<R> {
        self.options_iter().map_while(|o| o.ok()).find_map(f)
    }

    /// The MSS option.
    pub fn max_seg_size(&self) -> Option<u16> {
        self.find(|o| match o {
            TcpOption::MaxSegmentSize(v) => Some(v),
            _ => None,
        })
    }

    /// The window-scale option.
    pub fn window_scale(&self) -> Option<u8> {
        self.find(|o| match o {
            TcpOption::WindowScale(v) => Some(v),
            _ => None,
        })
    }

    /// Whether SACK-permitted is present.
    pub fn sack_permitted(&self) -> bool {
        self.find(|o| matches!(o, TcpOption::SackPermitted).then_some(())).is_some()
    }

    /// The SACK blocks.
    pub fn sack_blocks(&self) -> Option<SackBlocks> {
        self.find(|o| match o {
            TcpOption::Sack(s) => Some(s),
            _ => None,
        })
    }

    /// The timestamps option as `(tsval, tsecr)`.
    pub fn timestamp(&self) -> Option<(u32, u32)> {
        self.find(|o| match o {
            TcpOption::Timestamp { tsval, tsecr } => Some((tsval, tsecr)),
            _ => None,
        })
    }

    /// Writes the header with checksum 0; then write the payload and call
    /// [`TcpPacket::fill_checksum`].
    ///
    /// # Panics
    /// If the buffer is shorter than [`Self::buffer_len`] or [`Self::check`] fails.
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(&self, packet: &mut TcpPacket<T>) {
        assert!(self.check().is_ok(), "TcpRepr::emit: fields fail check(): {self:?}");
        let hl = self.header_len();
        let d = packet.buffer.as_mut();
        put16(d, field::SRC_PORT, self.src_port);
        put16(d, field::DST_PORT, self.dst_port);
        put32(d, field::SEQ, self.seq_number.0);
        put32(d, field::ACK, self.ack_number.0);
        put16(d, field::FLAGS, ((hl as u16 / 4) << 12) | self.flags.0);
        put16(d, field::WINDOW, self.window_len);
        put16(d, field::CHECKSUM, 0);
        put16(d, field::URGENT, self.urgent_at);
        d[field::OPTIONS..hl].copy_from_slice(self.options);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn seq_numbers_wrap() {
        let a = TcpSeqNumber(u32::MAX - 1);
        let b = a + 4;
        assert_eq!(b, TcpSeqNumber(2));
        assert_eq!(b - a, 4);
        assert_eq!(a - b, -4);
        assert!(a < b);
        assert!(b > a);
        assert_eq!(b - 4u32, a);
    }

    #[test]
    fn flags_display() {
        assert_eq!((TcpFlags::SYN | TcpFlags::ACK).to_string(), "SYN|ACK");
        assert_eq!(TcpFlags::NONE.to_string(), "none");
        assert_eq!(TcpFlags(0x0202).to_string(), "SYN|reserved 0x200");
        assert!(TcpFlags::AE.contains(TcpFlags::NS));
    }

    #[test]
    fn data_offset_below_five() {
        let mut b = [0u8; 20];
        b[12] = 0x40;
        assert_eq!(
            TcpPacket::new_checked(&b[..]).err(),
            Some(WireError::malformed(Layer::Tcp, "data offset"))
        );
        b[12] = 0x60;
        assert_eq!(
            TcpPacket::new_checked(&b[..]).err(),
            Some(WireError::truncated(Layer::Tcp, 24, 20))
        );
    }
}
