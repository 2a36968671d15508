//! Frame-level access to one IP option: find it, rewrite it in place, or insert it.
//!
//! Middleboxes that carry state in packets (the Per Packet Value of [`crate::ppv`], the
//! large-flow registration of [`crate::large_flow`]) need to read an option of a whole frame
//! (Ethernet, tags, IPv4 or IPv6) and to add one to a packet that has none. This module does
//! that once for both IP versions:
//!
//! * **IPv4**: an option of kind `kind4` among the header's options (RFC 791 section 3.1). A new
//!   option is inserted right after the fixed header, so it must be a multiple of 4 bytes long
//!   (no padding is needed and existing options keep their place); IHL, total length and the
//!   header checksum are updated. `Unsupported` if the header would exceed 60 bytes.
//! * **IPv6**: a TLV of type `kind6` in the hop-by-hop options header (RFC 8200 section 4.3),
//!   which must be the first extension header. A new option is appended to an existing
//!   hop-by-hop header (its old option bytes stay where they are, so their alignment holds) or a
//!   new hop-by-hop header is inserted after the fixed header; the payload length is updated.
//!   Upper-layer checksums do not change: the pseudo-header counts the upper-layer length only.
//!   `Unsupported` if a new header would make the chain longer than
//!   [`crate::ipv6_ext::MAX_EXT_HEADERS`] (the frame would no longer parse).
//!
//! Every function validates what it walks and returns [`WireError`] on malformed input; none
//! panics, whatever the bytes. Ranges returned index the frame.

use std::ops::Range;

use crate::error::{Layer, Result, WireError};
use crate::headers::{parse_headers, Headers, L3};
use crate::ip::protocol;
use crate::ipv4_option::Ipv4Options;
use crate::ipv6_ext::{Ipv6Option, Ipv6Options, Ipv6OptionsWriter};
use crate::util::{be16, put16};
use crate::{checksum, ipv4, ipv6};

/// Identifies one option type in both IP versions.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct OptionKinds {
    /// IPv4 option kind octet.
    pub v4: u8,
    /// IPv6 hop-by-hop option type.
    pub v6: u8,
    /// Alignment of the IPv6 option, `xn + y` as `(x, y)` (RFC 8200 section 4.2).
    pub v6_align: (usize, usize),
}

/// Where the IP header of a frame is, as this module needs it.
#[derive(Debug, Clone, Copy)]
enum Ip {
    V4 { off: usize, hl: usize },
    V6 { off: usize },
}

fn locate(frame: &[u8]) -> Result<Ip> {
    locate_in(&parse_headers(frame)?)
}

fn locate_in(h: &Headers) -> Result<Ip> {
    match h.l3 {
        L3::Ipv4 { offset, header_len } => Ok(Ip::V4 { off: offset, hl: header_len }),
        L3::Ipv6 { offset, .. } => Ok(Ip::V6 { off: offset }),
        L3::Other(_) => Err(WireError::unsupported(Layer::Ethernet, "not IP")),
    }
}

/// The IPv6 hop-by-hop header of the IPv6 packet at `off`: (start, length) in the frame.
fn hop_by_hop(frame: &[u8], off: usize) -> Option<(usize, usize)> {
    if frame.get(off + 6) != Some(&protocol::HOP_BY_HOP) {
        return None;
    }
    let start = off + ipv6::HEADER_LEN;
    // parse_headers validated that the whole header is present.
    let len = (usize::from(*frame.get(start + 1)?) + 1) * 8;
    Some((start, len))
}

/// The data bytes of the option `kinds` in `frame`, if present.
///
/// Errors: the frame does not parse (see [`parse_headers`]), is not IP, its option list is
/// malformed, or it holds the option twice (`Malformed`, "duplicate option": which one a
/// reader should believe is not defined, so neither is). An option of the right kind is
/// returned whatever its length: the caller checks it.
pub fn find_ip_option(frame: &[u8], kinds: OptionKinds) -> Result<Option<Range<usize>>> {
    find_ip_option_in(frame, &parse_headers(frame)?, kinds)
}

/// [`find_ip_option`] for a frame already walked by [`parse_headers`] (`headers` must be its
/// result for this very frame).
pub fn find_ip_option_in(
    frame: &[u8],
    headers: &Headers,
    kinds: OptionKinds,
) -> Result<Option<Range<usize>>> {
    match locate_in(headers)? {
        Ip::V4 { off, hl } => {
            let start = off + ipv4::HEADER_LEN;
            let opts = frame.get(start..off + hl).unwrap_or(&[]);
            let (mut pos, mut found) = (start, None);
            for o in Ipv4Options::new(opts) {
                let o = o?;
                if o.kind == kinds.v4 {
                    if found.is_some() {
                        return Err(WireError::malformed(Layer::Ipv4Option, "duplicate option"));
                    }
                    let data = pos + 2;
                    found = Some(data..data + o.data.len());
                }
                pos += o.buffer_len();
            }
            Ok(found)
        }
        Ip::V6 { off } => {
            let Some((start, len)) = hop_by_hop(frame, off) else { return Ok(None) };
            let area = frame.get(start + 2..start + len).unwrap_or(&[]);
            let (mut pos, mut found) = (start + 2, None);
            for o in Ipv6Options::new(area) {
                let o = o?;
                if o.kind == kinds.v6 {
                    if found.is_some() {
                        return Err(WireError::malformed(Layer::Ipv6Option, "duplicate option"));
                    }
                    let data = pos + 2;
                    found = Some(data..data + o.data.len());
                }
                pos += o.buffer_len();
            }
            Ok(found)
        }
    }
}

/// Recompute the IPv4 header checksum of the header at `off`, `hl` bytes (no-op for IPv6).
fn fix_checksum_at(frame: &mut [u8], ip: Ip) {
    if let Ip::V4 { off, hl } = ip {
        if let Some(h) = frame.get_mut(off..off + hl) {
            put16(h, 10, 0);
            let c = checksum::checksum(h);
            put16(h, 10, c);
        }
    }
}

/// Overwrite the data of option `kinds` with `data` (same length), or insert the option if the
/// frame has none. Returns the range of the option data in the (possibly grown) frame.
///
/// Errors: as [`find_ip_option`]; `Malformed` if the option is present with another data
/// length; `Unsupported` if there is no room to insert it (IPv4 header over 60 bytes, an IPv6
/// payload over 65535 bytes), or, for IPv4, if `data.len() + 2` is not a multiple of 4.
/// On error the frame is unchanged.
pub fn set_ip_option(frame: &mut Vec<u8>, kinds: OptionKinds, data: &[u8]) -> Result<Range<usize>> {
    let h = parse_headers(frame)?;
    set_ip_option_in(frame, &h, kinds, data)
}

/// [`set_ip_option`] for a frame already walked by [`parse_headers`] (`headers` must be its
/// result for this very frame): saves the second walk on the per-packet path of a marker.
pub fn set_ip_option_in(
    frame: &mut Vec<u8>,
    headers: &Headers,
    kinds: OptionKinds,
    data: &[u8],
) -> Result<Range<usize>> {
    let ip = locate_in(headers)?;
    if let Some(r) = find_ip_option_in(frame, headers, kinds)? {
        let layer = match ip {
            Ip::V4 { .. } => Layer::Ipv4Option,
            Ip::V6 { .. } => Layer::Ipv6Option,
        };
        if r.len() != data.len() || r.end > frame.len() {
            return Err(WireError::malformed(layer, "option length"));
        }
        frame[r.clone()].copy_from_slice(data);
        fix_checksum_at(frame, ip);
        return Ok(r);
    }
    insert_at(frame, ip, kinds, data)
}

/// Insert option `kinds` with `data` (the frame must not hold one; see [`set_ip_option`]).
pub fn insert_ip_option(
    frame: &mut Vec<u8>,
    kinds: OptionKinds,
    data: &[u8],
) -> Result<Range<usize>> {
    let ip = locate(frame)?;
    insert_at(frame, ip, kinds, data)
}

fn insert_at(frame: &mut Vec<u8>, ip: Ip, kinds: OptionKinds, data: &[u8]) -> Result<Range<usize>> {
    if data.len() > 253 {
        return Err(WireError::malformed(Layer::Ipv4Option, "option length"));
    }
    match ip {
        Ip::V4 { off, hl } => {
            let n = data.len() + 2;
            if n % 4 != 0 {
                return Err(WireError::unsupported(
                    Layer::Ipv4Option,
                    "length not a multiple of 4",
                ));
            }
            if hl + n > ipv4::MAX_HEADER_LEN {
                return Err(WireError::unsupported(Layer::Ipv4Option, "no room for option"));
            }
            let total = usize::from(be16(frame, off + 2)) + n;
            let Ok(total) = u16::try_from(total) else {
                return Err(WireError::unsupported(Layer::Ipv4, "total length over 65535"));
            };
            let at = off + ipv4::HEADER_LEN;
            let mut opt = Vec::with_capacity(n);
            opt.push(kinds.v4);
            opt.push(n as u8);
            opt.extend_from_slice(data);
            frame.splice(at..at, opt);
            frame[off] = (frame[off] & 0xf0) | (((hl + n) / 4) as u8);
            put16(frame, off + 2, total);
            fix_checksum_at(frame, Ip::V4 { off, hl: hl + n });
            Ok(at + 2..at + n)
        }
        Ip::V6 { off } => {
            let (start, old_len, next, old_area) = match hop_by_hop(frame, off) {
                Some((s, l)) => (s, l, frame[s], frame[s + 2..s + l].to_vec()),
                None => {
                    // a new extension header must not push the chain past what parsers walk
                    let up = crate::ipv6_ext::find_upper_layer(&frame[off..])?;
                    if usize::from(up.ext_headers) >= crate::ipv6_ext::MAX_EXT_HEADERS {
                        return Err(WireError::unsupported(
                            Layer::Ipv6ExtHeader,
                            "no room for option",
                        ));
                    }
                    (off + ipv6::HEADER_LEN, 0, frame[off + 6], Vec::new())
                }
            };
            // Old option bytes stay at their offsets; ours is appended, aligned, then padding.
            let mut area = vec![0u8; old_area.len() + data.len() + 2 + 16];
            area[..old_area.len()].copy_from_slice(&old_area);
            let mut w = Ipv6OptionsWriter::new(&mut area[old_area.len()..]);
            let before = 2 + old_area.len();
            let (x, y) = kinds.v6_align;
            if x > 1 {
                let at = before % x;
                w.pad((y % x + x - at) % x)?;
            }
            let data_at = before + w.len() + 2;
            w.push_raw(Ipv6Option::new(kinds.v6, data))?;
            let pad = (8 - (before + w.len()) % 8) % 8;
            w.pad(pad)?;
            let used = old_area.len() + w.len();
            area.truncate(used);
            let new_len = 2 + used;
            if new_len > 2048 {
                return Err(WireError::unsupported(Layer::Ipv6ExtHeader, "no room for option"));
            }
            let payload = usize::from(be16(frame, off + 4)) + new_len - old_len;
            let Ok(payload) = u16::try_from(payload) else {
                return Err(WireError::unsupported(Layer::Ipv6, "payload length over 65535"));
            };
            let mut hdr = Vec::with_capacity(new_len);
            hdr.push(next);
            hdr.push((new_len / 8 - 1) as u8);
            hdr.extend_from_slice(&area);
            frame.splice(start..start + old_len, hdr);
            frame[off + 6] = protocol::HOP_BY_HOP;
            put16(frame, off + 4, payload);
            Ok(start + data_at..start + data_at + data.len())
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{build_udp_ipv4, build_udp_ipv6, parse_headers, EthernetAddress, Ipv4Packet};
    use crate::{Ecn, Ipv6ExtHeader, Ipv6HopByHopRepr};
    use std::net::{Ipv4Addr, Ipv6Addr};

    const K: OptionKinds = OptionKinds { v4: 0x9e, v6: 0x3e, v6_align: (2, 0) };
    const M: EthernetAddress = EthernetAddress([2, 0, 0, 0, 0, 1]);

    fn v4() -> Vec<u8> {
        let mut f = Vec::new();
        let (a, b) = (Ipv4Addr::new(10, 0, 0, 1), Ipv4Addr::new(10, 0, 0, 2));
        build_udp_ipv4(&mut f, M, M, a, b, 0, Ecn::Ect1, 64, 1, 2, 1000).unwrap();
        f
    }

    fn v6() -> Vec<u8> {
        let mut f = Vec::new();
        let (a, b) = (Ipv6Addr::LOCALHOST, Ipv6Addr::LOCALHOST);
        build_udp_ipv6(&mut f, M, M, a, b, 0, Ecn::Ect0, 64, 1, 2, 1000).unwrap();
        f
    }

    #[test]
    fn ipv4_insert_then_overwrite() {
        let mut f = v4();
        assert_eq!(find_ip_option(&f, K).unwrap(), None);
        let r = set_ip_option(&mut f, K, &[0x12, 0x34]).unwrap();
        assert_eq!(f.len(), 42 + 4);
        assert_eq!(&f[14 + 20..14 + 24], &[0x9e, 0x04, 0x12, 0x34]);
        assert_eq!(r, 36..38);
        let ip = Ipv4Packet::new_checked(&f[14..]).unwrap();
        assert_eq!(ip.header_len(), 24);
        assert_eq!(ip.total_len(), 20 + 4 + 8 + 1000);
        assert!(ip.verify_checksum());
        // still parses, UDP found after the option
        let h = parse_headers(&f).unwrap();
        assert_eq!(h.l4_offset(), Some(14 + 24));
        assert_eq!(find_ip_option(&f, K).unwrap(), Some(36..38));
        set_ip_option(&mut f, K, &[0xab, 0xcd]).unwrap();
        assert_eq!(f.len(), 46, "overwrite does not grow");
        assert_eq!(&f[36..38], &[0xab, 0xcd]);
        assert!(Ipv4Packet::new_checked(&f[14..]).unwrap().verify_checksum());
        // a different length for an existing option is refused, frame unchanged
        let before = f.clone();
        assert!(set_ip_option(&mut f, K, &[1, 2, 3, 4, 5, 6]).is_err());
        assert_eq!(f, before);
    }

    #[test]
    fn ipv4_full_header_is_refused_unchanged() {
        let mut f = v4();
        let big = OptionKinds { v4: 0x07, ..K };
        set_ip_option(&mut f, big, &[0u8; 38]).unwrap();
        let before = f.clone();
        assert!(matches!(set_ip_option(&mut f, K, &[1, 2]), Err(WireError::Unsupported { .. })));
        assert_eq!(f, before);
    }

    #[test]
    fn ipv6_new_hop_by_hop_and_append() {
        let mut f = v6();
        let r = set_ip_option(&mut f, K, &[0x12, 0x34]).unwrap();
        assert_eq!(f.len(), 62 + 8);
        assert_eq!(f[14 + 6], 0, "next header is hop-by-hop");
        assert_eq!(be16(&f, 14 + 4), 8 + 8 + 1000);
        // HBH: next = UDP, len 0, PV option at offset 2 (2n aligned), PadN 2
        assert_eq!(&f[54..62], &[17, 0, 0x3e, 2, 0x12, 0x34, 1, 0]);
        assert_eq!(&f[r.clone()], &[0x12, 0x34]);
        let h = parse_headers(&f).unwrap();
        assert_eq!(h.l4_offset(), Some(62));
        assert_eq!(h.key.unwrap().proto, 17);
        let hbh = Ipv6ExtHeader::new_checked(&f[54..62]).unwrap();
        assert!(Ipv6HopByHopRepr::parse(&hbh).is_ok());
        // another option type is appended to the same header
        let other = OptionKinds { v4: 0x5e, v6: 0x1e, v6_align: (4, 0) };
        let r2 = set_ip_option(&mut f, other, &[9; 10]).unwrap();
        assert_eq!((r2.start - 54 - 2) % 4, 0, "option type at 4n");
        assert_eq!(find_ip_option(&f, K).unwrap(), Some(r), "first option did not move");
        assert_eq!(&f[r2.clone()], &[9; 10]);
        let h = parse_headers(&f).unwrap();
        let hl = (usize::from(f[55]) + 1) * 8;
        assert_eq!(h.l4_offset(), Some(54 + hl));
        assert_eq!(usize::from(be16(&f, 18)), hl + 8 + 1000);
    }

    /// Found by fuzzing: a packet with the most extension headers parsers walk gets no new
    /// hop-by-hop header (it would no longer parse).
    #[test]
    fn ipv6_full_extension_chain_is_refused() {
        let mut f = v6();
        // eight destination-options headers of 8 bytes each (next header 60, then UDP)
        let mut chain = Vec::new();
        for k in 0..8 {
            chain.extend_from_slice(&[if k == 7 { 17 } else { 60 }, 0, 1, 4, 0, 0, 0, 0]);
        }
        f.splice(54..54, chain);
        f[14 + 6] = 60;
        let plen = be16(&f, 18) + 64;
        put16(&mut f, 18, plen);
        assert!(parse_headers(&f).is_ok());
        let before = f.clone();
        assert!(matches!(set_ip_option(&mut f, K, &[1, 2]), Err(WireError::Unsupported { .. })));
        assert_eq!(f, before);
    }

    #[test]
    fn a_duplicate_option_is_malformed_and_left_alone() {
        let dup = |layer| WireError::malformed(layer, "duplicate option");
        // IPv4: the option twice, after another kind
        let mut f = v4();
        set_ip_option(&mut f, K, &[1, 2]).unwrap();
        let other = OptionKinds { v4: 0x5e, v6: 0x1e, v6_align: (4, 0) };
        set_ip_option(&mut f, other, &[9, 9]).unwrap();
        let mut twice = f.clone();
        twice.splice(42..42, [0x9e, 0x04, 3, 4]);
        twice[14] = 0x48;
        let tl = be16(&twice, 16) + 4;
        put16(&mut twice, 16, tl);
        assert!(parse_headers(&twice).is_ok());
        assert_eq!(find_ip_option(&twice, K), Err(dup(Layer::Ipv4Option)));
        let before = twice.clone();
        assert_eq!(set_ip_option(&mut twice, K, &[5, 6]), Err(dup(Layer::Ipv4Option)));
        assert_eq!(twice, before);
        // the other kind, present once, is still found
        assert_eq!(find_ip_option(&twice, other).unwrap(), Some(36..38));
        // IPv6: the option twice in one hop-by-hop header
        let mut f = v6();
        set_ip_option(&mut f, K, &[0x12, 0x34]).unwrap();
        // replace the PadN (at 60..62) by a second option of the kind, growing the header
        let mut twice = f.clone();
        twice.splice(60..62, [0x3e, 2, 0x56, 0x78, 1, 4, 0, 0, 0, 0]);
        twice[55] = 1;
        let plen = be16(&twice, 18) + 8;
        put16(&mut twice, 18, plen);
        assert!(parse_headers(&twice).is_ok());
        assert_eq!(find_ip_option(&twice, K), Err(dup(Layer::Ipv6Option)));
        let before = twice.clone();
        assert_eq!(set_ip_option(&mut twice, K, &[5, 6]), Err(dup(Layer::Ipv6Option)));
        assert_eq!(twice, before);
    }

    #[test]
    fn not_ip_and_garbage_are_errors() {
        assert!(find_ip_option(&[0u8; 10], K).is_err());
        let mut arp = v4();
        arp[12] = 0x08;
        arp[13] = 0x06;
        assert!(find_ip_option(&arp, K).is_err());
        let mut bad = v4();
        // IHL 6 with an option whose length runs past the header
        let mut opt = bad.clone();
        opt.splice(34..34, [0x94, 0x09, 0, 0]);
        opt[14] = 0x46;
        assert!(find_ip_option(&opt, K).is_err());
        assert!(set_ip_option(&mut opt, K, &[1, 2]).is_err());
        bad.truncate(20);
        assert!(set_ip_option(&mut bad, K, &[1, 2]).is_err());
    }
}
