//! The large-flow option of switch-assisted TCP pacing (seed 003, Kfoury et al.).
//!
//! A host starting a large transfer puts a REGISTER option in the IP header of its SYN;
//! switches count the large flows per egress port and answer with the count `N` and the port's
//! rate, in the SYN-ACK and (when `N` changes) on later packets toward the sender; the sender
//! paces at `rate / N`. The seed carries "a custom header in the IP options field" without
//! giving its layout; latnet's is 12 bytes:
//!
//! ```text
//!  0        1        2        3        4        5        6        7        8 ... 11
//! +--------+--------+--------+--------+--------+--------+--------+--------+------------+
//! |  kind  |  len   |  type  | flags  |    count N      |    reserved     | rate kbit/s|
//! +--------+--------+--------+--------+--------+--------+--------+--------+------------+
//! ```
//!
//! * IPv4: kind `0x5e` (not copied, class 2, number 30: an RFC 4727 experiment), length 12 (a
//!   multiple of 4, so no padding). IPv6: hop-by-hop type `0x1e` (skip if unknown, number 30,
//!   RFC 4727), 10 data bytes, aligned `4n` so the rate is 4-byte aligned.
//! * `type`: 1 REGISTER (on a SYN: count this connection), 2 REPORT (toward a sender: the count
//!   and rate at the tightest switch that wrote it), 3 DEREGISTER (stop counting this
//!   connection; FIN and RST do the same without an option).
//! * `flags`: bit 0 (`0x01`) FILLED: a switch wrote `count` and `rate`. Other bits are
//!   reserved: sent as zero, ignored and kept on receipt.
//! * `count`: large flows sharing the bottleneck port (this one included), `rate`: that port's
//!   rate in kbit/s (up to 4.29 Tbit/s). A switch overwrites them only if its share
//!   `rate / count` is smaller than the one already written (or none is), so the sender learns
//!   the tightest share on the path. The reserved 16 bits are sent as zero.
//!
//! Parsing checks the length (exactly 10 data bytes) and the type, and that a header holds the
//! option once; anything else is `Malformed`, which a switch counts and drops.

use crate::error::{Layer, Result, WireError};
use crate::headers::{parse_headers, Headers};
use crate::ipv6_ext::Ipv6OptionData;
use crate::option_edit::{find_ip_option_in, set_ip_option, OptionKinds};
use crate::util::{be16, be32, put16, put32};
use crate::L3;

/// IPv4 option kind.
pub const IPV4_KIND: u8 = 0x5e;
/// IPv6 hop-by-hop option type.
pub const IPV6_KIND: u8 = 0x1e;
/// Both kinds, for [`crate::option_edit`].
pub const KINDS: OptionKinds = OptionKinds { v4: IPV4_KIND, v6: IPV6_KIND, v6_align: (4, 0) };
/// Data bytes of the option (after kind and length).
pub const DATA_LEN: usize = 10;
/// Flag: a switch wrote count and rate.
pub const FLAG_FILLED: u8 = 0x01;

/// The message an option carries.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum LargeFlowMsg {
    /// A SYN of a large flow: count it.
    Register = 1,
    /// Count and rate of the tightest bottleneck, toward the sender.
    Report = 2,
    /// Stop counting this connection.
    Deregister = 3,
}

/// The large-flow option.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct LargeFlowOption {
    /// The message.
    pub msg: LargeFlowMsg,
    /// Flags byte (see [`FLAG_FILLED`]).
    pub flags: u8,
    /// Large flows at the bottleneck.
    pub count: u16,
    /// Rate of the bottleneck port, kbit/s.
    pub rate_kbps: u32,
}

impl LargeFlowOption {
    /// A message not yet filled by any switch.
    pub const fn new(msg: LargeFlowMsg) -> LargeFlowOption {
        LargeFlowOption { msg, flags: 0, count: 0, rate_kbps: 0 }
    }

    /// A switch wrote count and rate.
    pub const fn filled(&self) -> bool {
        self.flags & FLAG_FILLED != 0 && self.count > 0
    }

    /// The fair share `rate / count` in bit/s, if filled with a rate (a share of 0 would stop
    /// a sender that paced at it: `None`, as when nothing was written).
    pub fn share_bps(&self) -> Option<u64> {
        (self.filled() && self.rate_kbps > 0)
            .then(|| u64::from(self.rate_kbps) * 1000 / u64::from(self.count))
    }

    /// Whether a port of `rate_kbps` shared by `count` flows is a tighter bottleneck than the
    /// one written (always true when none is). Compared exactly: `rate / count < r0 / c0`.
    pub fn is_tighter(&self, count: u16, rate_kbps: u32) -> bool {
        if !self.filled() {
            return count > 0;
        }
        count > 0
            && u64::from(rate_kbps) * u64::from(self.count)
                < u64::from(self.rate_kbps) * u64::from(count)
    }

    /// Write `count` and `rate_kbps` and set FILLED.
    pub fn fill(&mut self, count: u16, rate_kbps: u32) {
        self.count = count;
        self.rate_kbps = rate_kbps;
        self.flags |= FLAG_FILLED;
    }

    /// Reads the 10 data bytes.
    pub fn parse_data(data: &[u8], layer: Layer) -> Result<LargeFlowOption> {
        let [t, flags, ..] = *data else {
            return Err(WireError::malformed(layer, "large-flow option length"));
        };
        if data.len() != DATA_LEN {
            return Err(WireError::malformed(layer, "large-flow option length"));
        }
        let msg = match t {
            1 => LargeFlowMsg::Register,
            2 => LargeFlowMsg::Report,
            3 => LargeFlowMsg::Deregister,
            _ => return Err(WireError::malformed(layer, "large-flow message type")),
        };
        Ok(LargeFlowOption { msg, flags, count: be16(data, 2), rate_kbps: be32(data, 6) })
    }

    /// The 10 data bytes.
    pub fn to_data(&self) -> [u8; DATA_LEN] {
        let mut d = [0u8; DATA_LEN];
        d[0] = self.msg as u8;
        d[1] = self.flags;
        put16(&mut d, 2, self.count);
        put32(&mut d, 6, self.rate_kbps);
        d
    }
}

impl Ipv6OptionData<'_> for LargeFlowOption {
    const KIND: u8 = IPV6_KIND;
    const ALIGN: (usize, usize) = (4, 0);

    fn parse(data: &[u8]) -> Result<LargeFlowOption> {
        LargeFlowOption::parse_data(data, Layer::Ipv6Option)
    }

    fn data_len(&self) -> usize {
        DATA_LEN
    }

    fn emit_data(&self, buf: &mut [u8]) {
        buf.copy_from_slice(&self.to_data());
    }
}

/// The large-flow option of a frame, if it has one.
///
/// Errors: the frame does not parse or is not IP, its options are malformed, or the
/// large-flow option is (wrong length, unknown type, twice in the header).
pub fn large_flow_option(frame: &[u8]) -> Result<Option<LargeFlowOption>> {
    large_flow_option_in(frame, &parse_headers(frame)?)
}

/// [`large_flow_option`] of a frame whose headers `h` are already parsed.
pub fn large_flow_option_in(frame: &[u8], h: &Headers) -> Result<Option<LargeFlowOption>> {
    let layer = match h.l3 {
        L3::Ipv6 { .. } => Layer::Ipv6Option,
        _ => Layer::Ipv4Option,
    };
    match find_ip_option_in(frame, h, KINDS)? {
        Some(r) => LargeFlowOption::parse_data(frame.get(r).unwrap_or(&[]), layer).map(Some),
        None => Ok(None),
    }
}

/// Write `opt` into the frame, replacing its large-flow option or inserting one (IPv4 header
/// +12 bytes, IPv6 hop-by-hop +16 or less). On error the frame is unchanged.
pub fn set_large_flow_option(frame: &mut Vec<u8>, opt: &LargeFlowOption) -> Result<()> {
    set_ip_option(frame, KINDS, &opt.to_data()).map(|_| ())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{build_tcp_ipv4, build_tcp_ipv6, Ecn, EthernetAddress, TcpFlags, TcpRepr};
    use crate::{Ipv4Packet, TcpSeqNumber};
    use std::net::{Ipv4Addr, Ipv6Addr};

    const M: EthernetAddress = EthernetAddress([2, 0, 0, 0, 0, 1]);

    fn syn() -> TcpRepr<'static> {
        TcpRepr {
            src_port: 40000,
            dst_port: 5201,
            seq_number: TcpSeqNumber(100),
            ack_number: TcpSeqNumber(0),
            flags: TcpFlags::SYN,
            window_len: 65535,
            urgent_at: 0,
            options: &[],
        }
    }

    #[test]
    fn ipv4_register_vector() {
        let mut f = Vec::new();
        let (a, b) = (Ipv4Addr::new(10, 0, 0, 1), Ipv4Addr::new(10, 0, 0, 9));
        build_tcp_ipv4(&mut f, M, M, a, b, 0, Ecn::NotEct, 64, &syn(), 0).unwrap();
        set_large_flow_option(&mut f, &LargeFlowOption::new(LargeFlowMsg::Register)).unwrap();
        #[rustfmt::skip]
        let opt: [u8; 12] = [0x5e, 12, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0];
        assert_eq!(&f[34..46], &opt);
        assert_eq!(f[14], 0x48, "IHL 8");
        assert!(Ipv4Packet::new_checked(&f[14..]).unwrap().verify_checksum());
        // a switch fills it: 3 flows on a 100 Mbit/s port
        let mut o = large_flow_option(&f).unwrap().unwrap();
        assert!(!o.filled());
        assert!(o.is_tighter(3, 100_000));
        o.fill(3, 100_000);
        set_large_flow_option(&mut f, &o).unwrap();
        assert_eq!(&f[34..46], &[0x5e, 12, 1, 1, 0, 3, 0, 0, 0x00, 0x01, 0x86, 0xa0]);
        let o = large_flow_option(&f).unwrap().unwrap();
        assert_eq!(o.share_bps(), Some(33_333_333));
        // a 1 Gbit/s port with 4 flows is not tighter; a 100 Mbit/s port with 4 is
        assert!(!o.is_tighter(4, 1_000_000));
        assert!(o.is_tighter(4, 100_000));
        assert!(!o.is_tighter(3, 100_000), "equal share is not tighter");
        assert!(!o.is_tighter(0, 1), "a port with no large flow never reports");
        let mut zero = o;
        zero.fill(3, 0);
        assert_eq!(zero.share_bps(), None, "no rate, no share to pace at");
    }

    #[test]
    fn ipv6_report() {
        let mut f = Vec::new();
        let a = Ipv6Addr::new(0xfd00, 0, 0, 0, 0, 0, 0, 1);
        let mut r = syn();
        r.flags = TcpFlags::SYN | TcpFlags::ACK;
        build_tcp_ipv6(&mut f, M, M, a, a, 0, Ecn::NotEct, 64, &r, 0).unwrap();
        let mut o = LargeFlowOption::new(LargeFlowMsg::Report);
        o.fill(2, 10_000_000);
        set_large_flow_option(&mut f, &o).unwrap();
        // HBH of 16 bytes: next TCP, len 1, option at 2..4 padded to 4n, 12 bytes, pad
        assert_eq!(f[54], 6);
        assert_eq!(f[55], 1);
        assert_eq!(large_flow_option(&f).unwrap(), Some(o));
        assert_eq!(parse_headers(&f).unwrap().l4_offset(), Some(54 + 16));
    }

    #[test]
    fn malformed_type_and_length() {
        let mut f = Vec::new();
        let (a, b) = (Ipv4Addr::new(10, 0, 0, 1), Ipv4Addr::new(10, 0, 0, 9));
        build_tcp_ipv4(&mut f, M, M, a, b, 0, Ecn::NotEct, 64, &syn(), 0).unwrap();
        let mut g = f.clone();
        let mut bad = LargeFlowOption::new(LargeFlowMsg::Register).to_data();
        bad[0] = 9;
        crate::option_edit::insert_ip_option(&mut g, KINDS, &bad).unwrap();
        assert_eq!(
            large_flow_option(&g),
            Err(WireError::malformed(Layer::Ipv4Option, "large-flow message type"))
        );
        crate::option_edit::insert_ip_option(&mut f, KINDS, &[1, 0]).unwrap();
        assert_eq!(
            large_flow_option(&f),
            Err(WireError::malformed(Layer::Ipv4Option, "large-flow option length"))
        );
        assert!(LargeFlowOption::parse_data(&[], Layer::Ipv4Option).is_err());
    }
}
