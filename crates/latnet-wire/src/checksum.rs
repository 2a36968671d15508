//! The Internet checksum: RFC 1071 sum, RFC 1624 incremental update, and the IPv4 / IPv6
//! pseudo-headers of UDP and TCP.
//!
//! Vocabulary used throughout:
//!
//! * a **sum** is the ones'-complement sum of big-endian 16-bit words, folded to 16 bits and *not*
//!   complemented ([`data`], [`combine`], [`pseudo_header_v4`]);
//! * a **checksum** is the complement of a sum, the value stored in a header ([`checksum`]).
//!
//! A header whose checksum field is correct sums to `0xffff`, so [`checksum`] over it is 0.
//!
//! Missing bytes of a virtual payload add nothing to a sum, so a checksum computed over the
//! present bytes with the full length in the pseudo-header equals the checksum of the datagram
//! with a zero-filled payload. The builders rely on this.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

/// Folds a 64-bit accumulator of 16-bit words into a 16-bit ones'-complement sum.
#[inline]
pub fn fold(mut acc: u64) -> u16 {
    while acc > 0xffff {
        acc = (acc & 0xffff) + (acc >> 16);
    }
    acc as u16
}

/// Adds the big-endian 16-bit words of `data` to `acc` (an odd final byte is padded with a
/// zero byte, RFC 1071 section 4.1). Does not fold.
#[inline]
pub fn accumulate(mut acc: u64, data: &[u8]) -> u64 {
    let mut chunks = data.chunks_exact(8);
    for c in &mut chunks {
        // Four words at once; u64 cannot overflow for any slice that fits in memory
        // (2^64 / 2^18 per chunk is far more chunks than bytes can exist).
        acc += u64::from(u16::from_be_bytes([c[0], c[1]]))
            + u64::from(u16::from_be_bytes([c[2], c[3]]))
            + u64::from(u16::from_be_bytes([c[4], c[5]]))
            + u64::from(u16::from_be_bytes([c[6], c[7]]));
    }
    let mut words = chunks.remainder().chunks_exact(2);
    for w in &mut words {
        acc += u64::from(u16::from_be_bytes([w[0], w[1]]));
    }
    if let [last] = words.remainder() {
        acc += u64::from(*last) << 8;
    }
    acc
}

/// Ones'-complement sum of `data` (not complemented).
#[inline]
pub fn data(data: &[u8]) -> u16 {
    fold(accumulate(0, data))
}

/// Ones'-complement sum of partial sums. Each part must cover an even number of bytes, except
/// possibly the last one.
#[inline]
pub fn combine(parts: &[u16]) -> u16 {
    fold(parts.iter().map(|&p| u64::from(p)).sum())
}

/// RFC 1071 Internet checksum of `data`: the complement of [`data`].
#[inline]
pub fn checksum(bytes: &[u8]) -> u16 {
    !data(bytes)
}

/// Sum of the IPv4 pseudo-header (RFC 768, RFC 9293 section 3.1): addresses, protocol and
/// the upper-layer length.
#[inline]
pub fn pseudo_header_v4(src: Ipv4Addr, dst: Ipv4Addr, protocol: u8, length: u16) -> u16 {
    let s = src.octets();
    let d = dst.octets();
    let acc = u64::from(u16::from_be_bytes([s[0], s[1]]))
        + u64::from(u16::from_be_bytes([s[2], s[3]]))
        + u64::from(u16::from_be_bytes([d[0], d[1]]))
        + u64::from(u16::from_be_bytes([d[2], d[3]]))
        + u64::from(protocol)
        + u64::from(length);
    fold(acc)
}

/// Sum of the IPv6 pseudo-header (RFC 8200 section 8.1): addresses, the 32-bit upper-layer
/// length and the next-header value.
#[inline]
pub fn pseudo_header_v6(src: &Ipv6Addr, dst: &Ipv6Addr, next_header: u8, length: u32) -> u16 {
    let mut acc = accumulate(0, &src.octets());
    acc = accumulate(acc, &dst.octets());
    acc += u64::from(length >> 16) + u64::from(length & 0xffff) + u64::from(next_header);
    fold(acc)
}

/// Pseudo-header sum for either family; `None` if `src` and `dst` are of different families or
/// an IPv4 `length` exceeds 65535.
pub fn pseudo_header(src: &IpAddr, dst: &IpAddr, protocol: u8, length: u32) -> Option<u16> {
    match (src, dst) {
        (IpAddr::V4(s), IpAddr::V4(d)) => {
            Some(pseudo_header_v4(*s, *d, protocol, u16::try_from(length).ok()?))
        }
        (IpAddr::V6(s), IpAddr::V6(d)) => Some(pseudo_header_v6(s, d, protocol, length)),
        _ => None,
    }
}

/// RFC 1624 equation 3: the new checksum after one 16-bit word of the covered data changed
/// from `old` to `new`: `HC' = ~(~HC + ~m + m')`.
///
/// Given a correct `checksum`, the result equals a full recomputation (both never produce
/// `0xffff` for data that is not all zeros).
#[inline]
pub fn update_word(checksum: u16, old: u16, new: u16) -> u16 {
    !fold(u64::from(!checksum) + u64::from(!old) + u64::from(new))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rfc1071_example() {
        // RFC 1071 section 3 "Numerical Examples": bytes 00 01 f2 03 f4 f5 f6 f7 sum to ddf2.
        let bytes = [0x00, 0x01, 0xf2, 0x03, 0xf4, 0xf5, 0xf6, 0xf7];
        assert_eq!(data(&bytes), 0xddf2);
        assert_eq!(checksum(&bytes), !0xddf2);
    }

    #[test]
    fn odd_length_pads_with_zero() {
        // 00 01 f2 03 f4 f5 f6 == sum of 0001 + f203 + f4f5 + f600.
        let bytes = [0x00, 0x01, 0xf2, 0x03, 0xf4, 0xf5, 0xf6];
        let expect = fold(0x0001 + 0xf203 + 0xf4f5 + 0xf600);
        assert_eq!(data(&bytes), expect);
        assert_eq!(data(&[0xab]), 0xab00);
        assert_eq!(data(&[]), 0);
    }

    #[test]
    fn chunked_and_simple_sums_agree() {
        let bytes: Vec<u8> = (0..=255u8).cycle().take(1001).collect();
        let mut acc = 0u64;
        for w in bytes.chunks(2) {
            acc += u64::from(w[0]) << 8 | u64::from(*w.get(1).unwrap_or(&0));
        }
        assert_eq!(data(&bytes), fold(acc));
    }

    #[test]
    fn combine_parts() {
        let a = [0x12, 0x34, 0x56, 0x78];
        let b = [0x9a, 0xbc, 0xde];
        let mut all = a.to_vec();
        all.extend_from_slice(&b);
        assert_eq!(combine(&[data(&a), data(&b)]), data(&all));
    }

    #[test]
    fn incremental_matches_recompute() {
        // The classic header from the IPv4 vectors, TTL 64 -> 63.
        let mut h = [
            0x45, 0x00, 0x00, 0x73, 0x00, 0x00, 0x40, 0x00, 0x40, 0x11, 0xb8, 0x61, 0xc0, 0xa8,
            0x00, 0x01, 0xc0, 0xa8, 0x00, 0xc7,
        ];
        let old = u16::from_be_bytes([h[8], h[9]]);
        h[8] -= 1;
        let new = u16::from_be_bytes([h[8], h[9]]);
        let inc = update_word(0xb861, old, new);
        h[10] = 0;
        h[11] = 0;
        assert_eq!(inc, checksum(&h));
        assert_eq!(inc, 0xb961);
    }

    #[test]
    fn mixed_families_have_no_pseudo_header() {
        let a = IpAddr::V4(Ipv4Addr::LOCALHOST);
        let b = IpAddr::V6(Ipv6Addr::LOCALHOST);
        assert_eq!(pseudo_header(&a, &b, 17, 8), None);
        assert_eq!(pseudo_header(&a, &a, 17, 70_000), None);
    }
}
