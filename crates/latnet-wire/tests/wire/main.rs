//! Integration tests of latnet-wire: byte vectors from RFCs and captures, truncation at every
//! length, and property tests. One test binary.
#![allow(clippy::unwrap_used)]

mod lbf;
mod options;
mod props;
mod truncation;
mod vectors;

/// Bytes from a hex dump (whitespace ignored).
pub fn hex(s: &str) -> Vec<u8> {
    let digits: Vec<u8> = s.bytes().filter(|b| !b.is_ascii_whitespace()).collect();
    assert!(digits.len() % 2 == 0, "odd hex digit count");
    digits
        .chunks(2)
        .map(|p| u8::from_str_radix(std::str::from_utf8(p).unwrap(), 16).unwrap())
        .collect()
}

/// A real Linux 2.6 SYN (window 5840; options MSS 1460, SACK-permitted, timestamps, NOP,
/// window scale 7), 192.168.1.3:58816 -> 63.116.243.97:80, as captured with its Ethernet header.
/// Both checksums verify.
pub const LINUX_SYN: &str = "
    00 26 62 2f 47 87 00 1d 60 b3 01 84 08 00 45 00
    00 3c a8 cf 40 00 40 06 9d 6b c0 a8 01 03 3f 74
    f3 61 e5 c0 00 50 e5 94 3d aa 00 00 00 00 a0 02
    16 d0 9d e2 00 00 02 04 05 b4 04 02 08 0a 00 17
    95 65 00 00 00 00 01 03 03 07";

/// An MLDv2 report from :: to ff02::16 as captured from a switch: IPv6 with a hop-by-hop header
/// holding Router Alert 0 (RFC 2711) and PadN, then ICMPv6 (checksum 0x897c).
pub const MLD_REPORT: &str = "
    33 33 00 00 00 16 00 e0 ec 38 e5 d5 86 dd 60 00
    00 00 00 24 00 01 00 00 00 00 00 00 00 00 00 00
    00 00 00 00 00 00 ff 02 00 00 00 00 00 00 00 00
    00 00 00 00 00 16 3a 00 05 02 00 00 01 00 8f 00
    89 7c 00 00 00 01 04 00 00 00 ff 02 00 00 00 00
    00 00 00 00 00 01 ff 38 e5 d5";

/// The classic IPv4 header example (checksum 0xb861): 192.168.0.1 -> 192.168.0.199, UDP,
/// total length 115.
pub const CLASSIC_IPV4: &str = "45 00 00 73 00 00 40 00 40 11 b8 61 c0 a8 00 01 c0 a8 00 c7";

/// A DNS query (example.com A) in UDP over IPv4, 192.168.1.10:53124 -> 192.168.1.1:53, with
/// IPv4 and UDP checksums (computed by an independent implementation, not this crate).
pub const UDP_V4: &str = "
    45 00 00 39 1c 46 40 00 40 11 9b 12 c0 a8 01 0a c0 a8 01 01
    cf 84 00 35 00 25 ca ec
    12 34 01 00 00 01 00 00 00 00 00 00 07 65 78 61 6d 70 6c 65 03 63 6f 6d 00 00 01 00 01";

/// The same DNS query over IPv6, 2001:db8::1 -> 2001:db8::53 (UDP checksum computed
/// independently).
pub const UDP_V6: &str = "
    60 00 00 00 00 25 11 40
    20 01 0d b8 00 00 00 00 00 00 00 00 00 00 00 01
    20 01 0d b8 00 00 00 00 00 00 00 00 00 00 00 53
    cf 84 00 35 00 25 f2 82
    12 34 01 00 00 01 00 00 00 00 00 00 07 65 78 61 6d 70 6c 65 03 63 6f 6d 00 00 01 00 01";

/// An IGMPv3 report with an IPv4 Router Alert option (RFC 2113), IHL 6, as sent by Windows.
pub const IGMP_ROUTER_ALERT: &str = "
    46 00 00 30 37 3a 00 00 01 02 10 0e a9 fe 53 6b e0 00 00 16 94 04 00 00
    22 00 14 05 00 00 00 02 04 00 00 00 e0 00 00 fb 04 00 00 00 e0 00 00 fc";
