//! Items shared by IPv4 and IPv6: [`Ecn`], DSCP helpers and protocol numbers.

use std::fmt;

/// The 2-bit ECN field of the IPv4 TOS byte / IPv6 traffic class (RFC 3168, RFC 9331).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
#[repr(u8)]
pub enum Ecn {
    /// `00`: not ECN-capable transport.
    #[default]
    NotEct = 0b00,
    /// `01`: ECT(1), the L4S identifier (RFC 9331).
    Ect1 = 0b01,
    /// `10`: ECT(0), classic ECN.
    Ect0 = 0b10,
    /// `11`: congestion experienced.
    Ce = 0b11,
}

impl Ecn {
    /// The value of the two low bits of `bits` (higher bits ignored).
    #[inline]
    pub const fn from_bits(bits: u8) -> Ecn {
        match bits & 0b11 {
            0b00 => Ecn::NotEct,
            0b01 => Ecn::Ect1,
            0b10 => Ecn::Ect0,
            _ => Ecn::Ce,
        }
    }

    /// The two-bit value.
    #[inline]
    pub const fn bits(self) -> u8 {
        self as u8
    }

    /// ECT(0), ECT(1) or CE: the transport is ECN-capable.
    #[inline]
    pub const fn is_ect(self) -> bool {
        !matches!(self, Ecn::NotEct)
    }
}

impl fmt::Display for Ecn {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Ecn::NotEct => "Not-ECT",
            Ecn::Ect1 => "ECT(1)",
            Ecn::Ect0 => "ECT(0)",
            Ecn::Ce => "CE",
        })
    }
}

/// Largest DSCP value (6 bits).
pub const DSCP_MAX: u8 = 63;

/// The TOS / traffic-class byte made of `dscp` (masked to 6 bits) and `ecn`.
#[inline]
pub const fn tos(dscp: u8, ecn: Ecn) -> u8 {
    ((dscp & DSCP_MAX) << 2) | ecn.bits()
}

/// IP protocol / IPv6 next-header numbers used by this crate.
pub mod protocol {
    /// IPv6 hop-by-hop options.
    pub const HOP_BY_HOP: u8 = 0;
    /// ICMP.
    pub const ICMP: u8 = 1;
    /// IGMP.
    pub const IGMP: u8 = 2;
    /// TCP.
    pub const TCP: u8 = 6;
    /// UDP.
    pub const UDP: u8 = 17;
    /// IPv6 routing header.
    pub const IPV6_ROUTE: u8 = 43;
    /// IPv6 fragment header.
    pub const IPV6_FRAG: u8 = 44;
    /// Encapsulating security payload (opaque: ends the header walk).
    pub const ESP: u8 = 50;
    /// Authentication header.
    pub const AH: u8 = 51;
    /// ICMPv6.
    pub const ICMPV6: u8 = 58;
    /// No next header.
    pub const IPV6_NO_NXT: u8 = 59;
    /// IPv6 destination options.
    pub const IPV6_OPTS: u8 = 60;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ecn_bits_round_trip() {
        for b in 0..4u8 {
            assert_eq!(Ecn::from_bits(b).bits(), b);
        }
        assert_eq!(Ecn::from_bits(0xfe), Ecn::Ect0);
        assert_eq!(tos(46, Ecn::Ect1), 0xb9);
        assert!(Ecn::Ce.is_ect() && !Ecn::NotEct.is_ect());
    }
}
