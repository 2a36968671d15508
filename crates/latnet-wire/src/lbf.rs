//! The Latency-Based Forwarding (LBF) block: a packet's latency objective and the latency it
//! has met so far, carried as an IPv6 hop-by-hop option or as a shim after UDP.
//!
//! Source: A. Clemm, T. Eckert, "High-Precision Latency Forwarding over Packet-Programmable
//! Networks", NOMS 2020 (the LBF seed), sections IV.A (three ways to know the latency so far)
//! and IV.C (the 16-octet BPP mapping), and gLBF (IETF DetNet draft) for the damper residue.
//!
//! # Block layout (28 octets, every time field in nanoseconds, big endian)
//!
//! ```text
//!  0                   1                   2                   3
//!  0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1
//! +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//! |  Ver  | Mode  |L|U|  reserved |          reserved (0)         |
//! +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//! |                    lower bound (ns, 64 bits)                  |
//! |                                                               |
//! +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//! |           upper bound (ns, 64 bits; 0 unless U is set)        |
//! |                                                               |
//! +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//! |   value (ns, 64 bits): latency so far / sender timestamp /    |
//! |   0 (rest-SLO) / damper residue, by Mode                      |
//! +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//! ```
//!
//! * `Ver` = 1. `Mode` ([`LbfMode`]): 0 latency so far, accumulated at each hop (the seed PoC's
//!   choice); 1 sender timestamp (needs synchronized clocks); 2 rest-SLO (the bounds are the
//!   *remaining* objective, rewritten at each hop; value 0); 3 damper (gLBF: the value is the
//!   time the next hop must hold the packet).
//! * `L` (late): a node found the packet can no longer meet its upper bound and marked it.
//!   `U`: an upper bound is present; without it the packet is best effort above its lower
//!   bound and the upper-bound field is 0.
//! * Reserved bits and octets are 0. A block with a non-zero reserved bit, an unknown version or
//!   mode, `lower > upper`, or an upper-bound field set without `U` is malformed: a switch drops
//!   it with a counted reason (`lbf-malformed`) rather than guess.
//!
//! 64-bit nanosecond fields reach 584 years: unlike the PoC's 16-bit microsecond fields (65 ms
//! at most) they never saturate on a real path.
//!
//! # Carriers
//!
//! * **IPv6 hop-by-hop option** type [`LBF_OPTION_TYPE`] (`0x3E`: RFC 4727 experimental type;
//!   action `00` = skip if unknown; change bit set, the value changes en route), data length 28,
//!   alignment `8n + 2` so that the three 64-bit fields are 8-aligned. Alone in a hop-by-hop
//!   header it needs no padding: 2 + 2 + 28 = 32 octets.
//! * **UDP shim**, for UDP-only senders such as the seed's PoC: the first 32 octets of the UDP
//!   payload are magic `0x4C 0x42` ("LB"), length 28, one reserved octet (0), then the block.
//!   A switch looks for it only where it was told to expect it (the carrier is a deployment
//!   choice: a UDP payload that happens to start with "LB" is not LBF elsewhere).
//!
//! # Beside the seed's BPP mapping (Fig. 4, 16 octets)
//!
//! | | seed (BPP block) | latnet |
//! |---|---|---|
//! | framing | BPP header (ver, flags, len 16, meta 14, next, proto) + command header (`lbf-ify`, len 8, parameter flags) | IPv6 HBH option TLV (2 octets) or UDP shim header (4 octets) |
//! | lower bound | `par1` slo-lb, 16 bits, microseconds | 64 bits, nanoseconds |
//! | upper bound | `par2` slo-ub, 16 bits, microseconds | 64 bits, nanoseconds + `U` flag |
//! | latency so far | `meta` packet-delay at offset 0, 16 bits, microseconds (`par3` points to it) | 64-bit value, meaning by `Mode` |
//! | late mark | none | `L` flag |
//! | size | 16 octets | 28 (+4 framing) octets |
//! | ceiling | 65.535 ms | 584 years |
//!
//! # Contract
//!
//! [`LbfBlock::new_checked`] checks that 28 octets are present; after that no accessor panics.
//! [`LbfRepr::parse`] validates everything above; `parse` then `emit` reproduces the block byte
//! for byte. [`locate`] finds the block in a frame and never panics on any input.

use std::net::{Ipv4Addr, Ipv6Addr};

use crate::error::{need, Layer, Result, WireError};
use crate::ethernet::EthernetAddress;
use crate::headers::{Headers, L3, L4};
use crate::ip::Ecn;
use crate::ipv6_ext::{Ipv6OptionData, Ipv6Options};
use crate::udp;
use crate::util::be16;

mod field {
    pub const VER_MODE: usize = 0;
    pub const FLAGS: usize = 1;
    pub const RESERVED: usize = 2;
    pub const LOWER: usize = 4;
    pub const UPPER: usize = 12;
    pub const VALUE: usize = 20;
}

/// Length of the LBF block.
pub const BLOCK_LEN: usize = 28;
/// Block version this crate reads and writes.
pub const VERSION: u8 = 1;
/// IPv6 hop-by-hop option type of the LBF block (RFC 4727 experimental value, change bit set).
pub const LBF_OPTION_TYPE: u8 = 0x3E;
/// Magic of the UDP shim ("LB").
pub const SHIM_MAGIC: [u8; 2] = [0x4C, 0x42];
/// Length of the UDP shim header before the block.
pub const SHIM_HEADER_LEN: usize = 4;
/// Length of the UDP shim (header + block).
pub const SHIM_LEN: usize = SHIM_HEADER_LEN + BLOCK_LEN;
/// Length of a hop-by-hop header holding only the LBF option.
pub const HBH_LEN: usize = 2 + 2 + BLOCK_LEN;

const FLAG_LATE: u8 = 0x80;
const FLAG_UPPER: u8 = 0x40;

/// How a block says what latency the packet met so far (seed section IV.A, plus gLBF).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum LbfMode {
    /// The value is the latency accumulated so far; each hop adds its transit and link delay.
    LatencySoFar,
    /// The value is the sender's timestamp (ns on a clock every node shares).
    SenderTimestamp,
    /// The bounds are what remains of the objective; each hop subtracts what it spent.
    RestSlo,
    /// gLBF damper: the value is how long the next hop holds the packet before queueing it.
    Damper,
}

impl LbfMode {
    /// The 4-bit code on the wire.
    pub const fn code(self) -> u8 {
        match self {
            LbfMode::LatencySoFar => 0,
            LbfMode::SenderTimestamp => 1,
            LbfMode::RestSlo => 2,
            LbfMode::Damper => 3,
        }
    }

    /// The mode of a 4-bit code.
    pub const fn from_code(c: u8) -> Option<LbfMode> {
        match c {
            0 => Some(LbfMode::LatencySoFar),
            1 => Some(LbfMode::SenderTimestamp),
            2 => Some(LbfMode::RestSlo),
            3 => Some(LbfMode::Damper),
            _ => None,
        }
    }
}

/// Zero-copy view of a 28-octet LBF block.
#[derive(Debug, Clone)]
pub struct LbfBlock<T: AsRef<[u8]>> {
    buffer: T,
}

fn be64(d: &[u8], at: usize) -> u64 {
    let mut b = [0u8; 8];
    b.copy_from_slice(&d[at..at + 8]);
    u64::from_be_bytes(b)
}

fn put64(d: &mut [u8], at: usize, v: u64) {
    d[at..at + 8].copy_from_slice(&v.to_be_bytes());
}

impl<T: AsRef<[u8]>> LbfBlock<T> {
    /// Wraps `buffer` without checks; accessors may panic if it is shorter than 28 octets.
    pub const fn new_unchecked(buffer: T) -> LbfBlock<T> {
        LbfBlock { buffer }
    }

    /// Wraps `buffer` after [`Self::check_len`].
    pub fn new_checked(buffer: T) -> Result<LbfBlock<T>> {
        let b = Self::new_unchecked(buffer);
        b.check_len()?;
        Ok(b)
    }

    /// `Truncated` unless 28 octets are present.
    pub fn check_len(&self) -> Result<()> {
        need(Layer::Lbf, BLOCK_LEN, self.buffer.as_ref().len())
    }

    /// The wrapped buffer.
    pub fn into_inner(self) -> T {
        self.buffer
    }

    /// Version (high nibble of octet 0).
    #[inline]
    pub fn version(&self) -> u8 {
        self.buffer.as_ref()[field::VER_MODE] >> 4
    }

    /// Raw mode code (low nibble of octet 0).
    #[inline]
    pub fn mode_code(&self) -> u8 {
        self.buffer.as_ref()[field::VER_MODE] & 0x0f
    }

    /// The `L` (late) flag.
    #[inline]
    pub fn late(&self) -> bool {
        self.buffer.as_ref()[field::FLAGS] & FLAG_LATE != 0
    }

    /// The `U` (upper bound present) flag.
    #[inline]
    pub fn has_upper(&self) -> bool {
        self.buffer.as_ref()[field::FLAGS] & FLAG_UPPER != 0
    }

    /// Flags octet.
    #[inline]
    pub fn flags(&self) -> u8 {
        self.buffer.as_ref()[field::FLAGS]
    }

    /// Reserved octets 2..4.
    #[inline]
    pub fn reserved(&self) -> u16 {
        be16(self.buffer.as_ref(), field::RESERVED)
    }

    /// Lower bound (ns).
    #[inline]
    pub fn lower_ns(&self) -> u64 {
        be64(self.buffer.as_ref(), field::LOWER)
    }

    /// Upper-bound field (ns; meaningful only with `U`).
    #[inline]
    pub fn upper_ns(&self) -> u64 {
        be64(self.buffer.as_ref(), field::UPPER)
    }

    /// Value field (ns; meaning by mode).
    #[inline]
    pub fn value_ns(&self) -> u64 {
        be64(self.buffer.as_ref(), field::VALUE)
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> LbfBlock<T> {
    /// Sets or clears the late flag.
    pub fn set_late(&mut self, late: bool) {
        let b = &mut self.buffer.as_mut()[field::FLAGS];
        if late {
            *b |= FLAG_LATE;
        } else {
            *b &= !FLAG_LATE;
        }
    }

    /// Sets the lower bound (ns).
    pub fn set_lower_ns(&mut self, v: u64) {
        put64(self.buffer.as_mut(), field::LOWER, v);
    }

    /// Sets the upper-bound field (ns); does not touch `U`.
    pub fn set_upper_ns(&mut self, v: u64) {
        put64(self.buffer.as_mut(), field::UPPER, v);
    }

    /// Sets the value field (ns).
    pub fn set_value_ns(&mut self, v: u64) {
        put64(self.buffer.as_mut(), field::VALUE, v);
    }
}

/// The validated content of an LBF block. Times are nanoseconds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct LbfRepr {
    /// How the latency so far is known.
    pub mode: LbfMode,
    /// Marked late by a node.
    pub late: bool,
    /// Lower bound of the end-to-end latency (remaining bound in rest-SLO mode).
    pub lower_ns: u64,
    /// Upper bound, if any (remaining bound in rest-SLO mode).
    pub upper_ns: Option<u64>,
    /// Latency so far, sender timestamp, 0 or damper residue, by mode.
    pub value_ns: u64,
}

impl LbfRepr {
    /// Reads and validates a block.
    pub fn parse<T: AsRef<[u8]>>(b: &LbfBlock<T>) -> Result<LbfRepr> {
        b.check_len()?;
        if b.version() != VERSION {
            return Err(WireError::malformed(Layer::Lbf, "version"));
        }
        let mode =
            LbfMode::from_code(b.mode_code()).ok_or(WireError::malformed(Layer::Lbf, "mode"))?;
        if b.flags() & !(FLAG_LATE | FLAG_UPPER) != 0 || b.reserved() != 0 {
            return Err(WireError::malformed(Layer::Lbf, "reserved"));
        }
        let upper_ns = if b.has_upper() {
            Some(b.upper_ns())
        } else if b.upper_ns() != 0 {
            return Err(WireError::malformed(Layer::Lbf, "upper without U flag"));
        } else {
            None
        };
        let r = LbfRepr {
            mode,
            late: b.late(),
            lower_ns: b.lower_ns(),
            upper_ns,
            value_ns: b.value_ns(),
        };
        r.check()?;
        Ok(r)
    }

    /// `Malformed` if the lower bound exceeds the upper bound.
    pub fn check(&self) -> Result<()> {
        match self.upper_ns {
            Some(u) if self.lower_ns > u => Err(WireError::malformed(Layer::Lbf, "lower > upper")),
            _ => Ok(()),
        }
    }

    /// Octets [`Self::emit`] writes (28).
    pub const fn buffer_len(&self) -> usize {
        BLOCK_LEN
    }

    /// Writes the block into the first 28 octets of `buf`.
    ///
    /// # Panics
    /// If `buf` is shorter than 28 octets or [`Self::check`] fails.
    pub fn emit_into(&self, buf: &mut [u8]) {
        assert!(self.check().is_ok(), "LbfRepr::emit: lower > upper");
        let b = &mut buf[..BLOCK_LEN];
        b[field::VER_MODE] = (VERSION << 4) | self.mode.code();
        b[field::FLAGS] = (if self.late { FLAG_LATE } else { 0 })
            | (if self.upper_ns.is_some() { FLAG_UPPER } else { 0 });
        b[field::RESERVED] = 0;
        b[field::RESERVED + 1] = 0;
        put64(b, field::LOWER, self.lower_ns);
        put64(b, field::UPPER, self.upper_ns.unwrap_or(0));
        put64(b, field::VALUE, self.value_ns);
    }

    /// Writes the block into a view.
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(&self, b: &mut LbfBlock<T>) {
        self.emit_into(b.buffer.as_mut());
    }

    /// The 32-octet UDP shim (magic, length, reserved, block).
    pub fn to_shim(&self) -> [u8; SHIM_LEN] {
        let mut s = [0u8; SHIM_LEN];
        s[..2].copy_from_slice(&SHIM_MAGIC);
        s[2] = BLOCK_LEN as u8;
        self.emit_into(&mut s[SHIM_HEADER_LEN..]);
        s
    }

    /// The 32-octet hop-by-hop header holding only this block as an option.
    pub fn to_hop_by_hop(&self, next_header: u8) -> [u8; HBH_LEN] {
        let mut h = [0u8; HBH_LEN];
        h[0] = next_header;
        h[1] = (HBH_LEN / 8 - 1) as u8;
        h[2] = LBF_OPTION_TYPE;
        h[3] = BLOCK_LEN as u8;
        self.emit_into(&mut h[4..]);
        h
    }
}

impl Ipv6OptionData<'_> for LbfRepr {
    const KIND: u8 = LBF_OPTION_TYPE;
    const ALIGN: (usize, usize) = (8, 2);

    fn parse(data: &[u8]) -> Result<LbfRepr> {
        if data.len() != BLOCK_LEN {
            return Err(WireError::malformed(Layer::Lbf, "option length"));
        }
        LbfRepr::parse(&LbfBlock::new_unchecked(data))
    }

    fn data_len(&self) -> usize {
        BLOCK_LEN
    }

    fn emit_data(&self, buf: &mut [u8]) {
        self.emit_into(buf);
    }
}

/// Where a frame carries its LBF block.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Carrier {
    /// An option of the IPv6 hop-by-hop header.
    Ipv6HopByHop,
    /// The shim at the start of the UDP payload.
    UdpShim,
}

/// An LBF block found in a frame.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct LbfLocation {
    /// Offset of the 28-octet block in the frame.
    pub offset: usize,
    /// Where it was found.
    pub carrier: Carrier,
    /// Its validated content.
    pub repr: LbfRepr,
}

/// Finds and validates the LBF block of a frame whose headers `h` were parsed by
/// [`crate::parse_headers`].
///
/// Looks first in the IPv6 hop-by-hop header (an LBF option there is used whatever
/// `udp_shim` says), then, if `udp_shim`, at the start of the UDP payload. `Ok(None)`: no block
/// (a best-effort packet). Errors (`Layer::Lbf`): an option of the LBF type with the wrong
/// length, two LBF options, a shim cut short or with the wrong length octet, or a block that
/// fails [`LbfRepr::parse`]; and (`Layer::Ipv6Option`) a hop-by-hop option area that cannot be
/// walked (an option's length running past the header), whether or not it holds an LBF option.
pub fn locate(frame: &[u8], h: &Headers, udp_shim: bool) -> Result<Option<LbfLocation>> {
    if let L3::Ipv6 { offset, upper_offset } = h.l3 {
        let first = offset + crate::ipv6::HEADER_LEN;
        // A hop-by-hop header, if any, is first (parse_headers validated the chain).
        if frame.get(offset + 6) == Some(&crate::ip::protocol::HOP_BY_HOP) && upper_offset > first {
            let hl = (usize::from(frame.get(first + 1).copied().unwrap_or(0)) + 1) * 8;
            let area = frame.get(first + 2..first + hl).unwrap_or(&[]);
            let mut pos = 0usize;
            let mut found: Option<LbfLocation> = None;
            for o in Ipv6Options::new(area) {
                let o = o?;
                if o.kind == LBF_OPTION_TYPE {
                    if found.is_some() {
                        return Err(WireError::malformed(Layer::Lbf, "duplicate option"));
                    }
                    let repr = <LbfRepr as Ipv6OptionData<'_>>::parse(o.data)?;
                    found = Some(LbfLocation {
                        offset: first + 2 + pos + 2,
                        carrier: Carrier::Ipv6HopByHop,
                        repr,
                    });
                }
                pos += o.buffer_len();
            }
            if found.is_some() {
                return Ok(found);
            }
        }
    }
    if udp_shim {
        if let L4::Udp { offset } = h.l4 {
            let p = offset + udp::HEADER_LEN;
            if frame.get(p..p + 2) == Some(&SHIM_MAGIC[..]) {
                need(Layer::Lbf, p + SHIM_LEN, frame.len())?;
                // The shim must lie within the UDP datagram.
                let ulen = usize::from(be16(frame, offset + 4));
                if ulen < udp::HEADER_LEN + SHIM_LEN {
                    return Err(WireError::malformed(Layer::Lbf, "shim beyond UDP length"));
                }
                if frame[p + 2] != BLOCK_LEN as u8 || frame[p + 3] != 0 {
                    return Err(WireError::malformed(Layer::Lbf, "shim header"));
                }
                let off = p + SHIM_HEADER_LEN;
                let repr = LbfRepr::parse(&LbfBlock::new_unchecked(&frame[off..off + BLOCK_LEN]))?;
                return Ok(Some(LbfLocation { offset: off, carrier: Carrier::UdpShim, repr }));
            }
        }
    }
    Ok(None)
}

/// A mutable view of the block at `loc.offset` of `frame` (for per-hop updates).
/// `None` if the frame is shorter than the location says (it cannot be after [`locate`]).
pub fn block_mut(frame: &mut [u8], offset: usize) -> Option<LbfBlock<&mut [u8]>> {
    frame.get_mut(offset..offset + BLOCK_LEN).map(LbfBlock::new_unchecked)
}

/// Writes the headers of a UDP/IPv4 packet whose payload starts with the LBF shim
/// (42 + 32 octets present; `payload_len` more octets of virtual payload after the shim).
///
/// Errors as [`crate::build_udp_ipv4`], or `Malformed` if `lbf` fails [`LbfRepr::check`].
#[allow(clippy::too_many_arguments)] // mirrors the header fields one to one
pub fn build_udp_ipv4_shim(
    frame: &mut Vec<u8>,
    src_mac: EthernetAddress,
    dst_mac: EthernetAddress,
    src: Ipv4Addr,
    dst: Ipv4Addr,
    dscp: u8,
    ttl: u8,
    src_port: u16,
    dst_port: u16,
    lbf: &LbfRepr,
    payload_len: usize,
) -> Result<()> {
    lbf.check()?;
    crate::build_udp_ipv4(
        frame,
        src_mac,
        dst_mac,
        src,
        dst,
        dscp,
        Ecn::NotEct,
        ttl,
        src_port,
        dst_port,
        SHIM_LEN + payload_len,
    )?;
    frame.extend_from_slice(&lbf.to_shim());
    Ok(())
}

/// Writes the headers of a UDP/IPv6 packet with a hop-by-hop header holding the LBF option
/// (14 + 40 + 32 + 8 = 94 octets present; `payload_len` octets of virtual payload). The UDP
/// checksum is computed as if the payload were zeros.
///
/// Errors as [`crate::build_udp_ipv6`] (with the 32 hop-by-hop octets counted in the IPv6
/// payload length), or `Malformed` if `lbf` fails [`LbfRepr::check`].
#[allow(clippy::too_many_arguments)] // mirrors the header fields one to one
pub fn build_udp_ipv6_hbh(
    frame: &mut Vec<u8>,
    src_mac: EthernetAddress,
    dst_mac: EthernetAddress,
    src: Ipv6Addr,
    dst: Ipv6Addr,
    dscp: u8,
    hop_limit: u8,
    src_port: u16,
    dst_port: u16,
    lbf: &LbfRepr,
    payload_len: usize,
) -> Result<()> {
    lbf.check()?;
    if udp::HEADER_LEN + payload_len + HBH_LEN > usize::from(u16::MAX) {
        return Err(WireError::malformed(Layer::Ipv6, "payload_len"));
    }
    let mut plain = Vec::with_capacity(crate::build::UDP_IPV6_HEADERS_LEN);
    crate::build_udp_ipv6(
        &mut plain,
        src_mac,
        dst_mac,
        src,
        dst,
        dscp,
        Ecn::NotEct,
        hop_limit,
        src_port,
        dst_port,
        payload_len,
    )?;
    let ip = crate::ethernet::HEADER_LEN;
    let upper = ip + crate::ipv6::HEADER_LEN;
    frame.clear();
    frame.extend_from_slice(&plain[..upper]);
    frame.extend_from_slice(&lbf.to_hop_by_hop(crate::ip::protocol::UDP));
    frame.extend_from_slice(&plain[upper..]);
    let mut v6 = crate::Ipv6Packet::new_unchecked(&mut frame[ip..]);
    v6.set_next_header(crate::ip::protocol::HOP_BY_HOP);
    let len = v6.payload_len() + HBH_LEN as u16;
    v6.set_payload_len(len);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> LbfRepr {
        LbfRepr {
            mode: LbfMode::LatencySoFar,
            late: false,
            lower_ns: 700_000,
            upper_ns: Some(2_000_000),
            value_ns: 100_000,
        }
    }

    #[test]
    fn vector_round_trip() {
        let mut b = [0u8; BLOCK_LEN];
        sample().emit_into(&mut b);
        let expect: [u8; BLOCK_LEN] = [
            0x10, 0x40, 0x00, 0x00, // v1 mode 0, U
            0x00, 0x00, 0x00, 0x00, 0x00, 0x0a, 0xae, 0x60, // 700,000 ns
            0x00, 0x00, 0x00, 0x00, 0x00, 0x1e, 0x84, 0x80, // 2,000,000 ns
            0x00, 0x00, 0x00, 0x00, 0x00, 0x01, 0x86, 0xa0, // 100,000 ns
        ];
        assert_eq!(b, expect);
        assert_eq!(LbfRepr::parse(&LbfBlock::new_checked(&b[..]).unwrap()), Ok(sample()));
    }

    #[test]
    fn rejects_what_it_cannot_read() {
        let mut b = [0u8; BLOCK_LEN];
        sample().emit_into(&mut b);
        let bad = |f: &dyn Fn(&mut [u8; BLOCK_LEN])| {
            let mut c = b;
            f(&mut c);
            LbfRepr::parse(&LbfBlock::new_unchecked(&c[..]))
        };
        assert_eq!(bad(&|c| c[0] = 0x20), Err(WireError::malformed(Layer::Lbf, "version")));
        assert_eq!(bad(&|c| c[0] = 0x17), Err(WireError::malformed(Layer::Lbf, "mode")));
        assert_eq!(bad(&|c| c[1] |= 1), Err(WireError::malformed(Layer::Lbf, "reserved")));
        assert_eq!(bad(&|c| c[3] = 1), Err(WireError::malformed(Layer::Lbf, "reserved")));
        assert_eq!(
            bad(&|c| c[1] = 0),
            Err(WireError::malformed(Layer::Lbf, "upper without U flag"))
        );
        assert_eq!(bad(&|c| c[4] = 0xff), Err(WireError::malformed(Layer::Lbf, "lower > upper")));
        assert!(LbfBlock::new_checked(&b[..27]).is_err());
    }
}
