//! Ethernet II frames: [`EthernetFrame`] view, [`EthernetRepr`], [`EthernetAddress`] and
//! [`EtherType`].
//!
//! Once [`EthernetFrame::new_checked`] succeeded (the buffer holds at least 14 bytes) no
//! accessor panics. The view does not look inside 802.1Q tags: [`EthernetFrame::ethertype`] of a
//! tagged frame is the outer TPID; see [`crate::vlan`] for tag stacks.

use std::fmt;
use std::str::FromStr;

use crate::error::{need, Layer, Result};
use crate::util::{be16, put16};

/// A 48-bit MAC address.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct EthernetAddress(pub [u8; 6]);

impl EthernetAddress {
    /// `ff:ff:ff:ff:ff:ff`.
    pub const BROADCAST: EthernetAddress = EthernetAddress([0xff; 6]);

    /// The first 6 bytes of `bytes`, or `None` if there are fewer.
    pub fn from_bytes(bytes: &[u8]) -> Option<EthernetAddress> {
        let b: [u8; 6] = bytes.get(..6)?.try_into().ok()?;
        Some(EthernetAddress(b))
    }

    /// The six octets.
    pub const fn as_bytes(&self) -> &[u8; 6] {
        &self.0
    }

    /// All ones.
    pub fn is_broadcast(&self) -> bool {
        *self == Self::BROADCAST
    }

    /// Group bit set (includes broadcast).
    pub const fn is_multicast(&self) -> bool {
        self.0[0] & 0x01 != 0
    }

    /// Group bit clear.
    pub const fn is_unicast(&self) -> bool {
        !self.is_multicast()
    }

    /// Locally administered bit set.
    pub const fn is_local(&self) -> bool {
        self.0[0] & 0x02 != 0
    }
}

impl fmt::Display for EthernetAddress {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let b = &self.0;
        write!(f, "{:02x}:{:02x}:{:02x}:{:02x}:{:02x}:{:02x}", b[0], b[1], b[2], b[3], b[4], b[5])
    }
}

impl fmt::Debug for EthernetAddress {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(self, f)
    }
}

/// Error of [`EthernetAddress::from_str`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("invalid MAC address: expected six hex octets separated by ':' or '-'")]
pub struct ParseEthernetAddressError;

impl FromStr for EthernetAddress {
    type Err = ParseEthernetAddressError;

    /// Parses `aa:bb:cc:dd:ee:ff` or `aa-bb-cc-dd-ee-ff` (one or two hex digits per octet).
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let sep = if s.contains('-') { '-' } else { ':' };
        let mut out = [0u8; 6];
        let mut n = 0;
        for part in s.split(sep) {
            if n == 6 || part.is_empty() || part.len() > 2 {
                return Err(ParseEthernetAddressError);
            }
            out[n] = u8::from_str_radix(part, 16).map_err(|_| ParseEthernetAddressError)?;
            n += 1;
        }
        if n != 6 {
            return Err(ParseEthernetAddressError);
        }
        Ok(EthernetAddress(out))
    }
}

/// The 16-bit type field of an Ethernet II header (or the TPID of a tag).
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct EtherType(pub u16);

impl EtherType {
    /// IPv4.
    pub const IPV4: EtherType = EtherType(0x0800);
    /// ARP.
    pub const ARP: EtherType = EtherType(0x0806);
    /// 802.1Q customer VLAN tag.
    pub const VLAN: EtherType = EtherType(0x8100);
    /// IPv6.
    pub const IPV6: EtherType = EtherType(0x86dd);
    /// 802.1ad service tag (Q-in-Q outer tag).
    pub const QINQ: EtherType = EtherType(0x88a8);
    /// Pre-standard Q-in-Q outer tag still emitted by some switches.
    pub const QINQ_LEGACY: EtherType = EtherType(0x9100);

    /// Whether a frame with this type continues with a VLAN tag ([`Self::VLAN`], [`Self::QINQ`]
    /// or [`Self::QINQ_LEGACY`]).
    #[inline]
    pub const fn is_vlan_tpid(self) -> bool {
        matches!(self.0, 0x8100 | 0x88a8 | 0x9100)
    }
}

impl fmt::Display for EtherType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            EtherType::IPV4 => f.write_str("IPv4"),
            EtherType::ARP => f.write_str("ARP"),
            EtherType::VLAN => f.write_str("802.1Q"),
            EtherType::IPV6 => f.write_str("IPv6"),
            EtherType::QINQ => f.write_str("802.1ad"),
            EtherType::QINQ_LEGACY => f.write_str("Q-in-Q 0x9100"),
            EtherType(t) => write!(f, "0x{t:04x}"),
        }
    }
}

impl fmt::Debug for EtherType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "EtherType({self})")
    }
}

impl From<u16> for EtherType {
    fn from(v: u16) -> Self {
        EtherType(v)
    }
}

impl From<EtherType> for u16 {
    fn from(v: EtherType) -> Self {
        v.0
    }
}

mod field {
    use std::ops::Range;
    pub const DST: Range<usize> = 0..6;
    pub const SRC: Range<usize> = 6..12;
    pub const ETHERTYPE: usize = 12;
    pub const PAYLOAD: usize = 14;
}

/// Length of an untagged Ethernet II header.
pub const HEADER_LEN: usize = field::PAYLOAD;

/// Zero-copy view of an Ethernet II frame.
#[derive(Debug, Clone)]
pub struct EthernetFrame<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> EthernetFrame<T> {
    /// Wraps `buffer` without checks; accessors may panic if it is shorter than 14 bytes.
    pub const fn new_unchecked(buffer: T) -> EthernetFrame<T> {
        EthernetFrame { buffer }
    }

    /// Wraps `buffer` after [`Self::check_len`].
    pub fn new_checked(buffer: T) -> Result<EthernetFrame<T>> {
        let f = Self::new_unchecked(buffer);
        f.check_len()?;
        Ok(f)
    }

    /// `Truncated` if the buffer is shorter than the 14-byte header.
    pub fn check_len(&self) -> Result<()> {
        need(Layer::Ethernet, HEADER_LEN, self.buffer.as_ref().len())
    }

    /// The wrapped buffer.
    pub fn into_inner(self) -> T {
        self.buffer
    }

    /// Header length: always 14 (tags are part of the payload at this layer).
    pub const fn header_len() -> usize {
        HEADER_LEN
    }

    /// Destination address.
    #[inline]
    pub fn dst_addr(&self) -> EthernetAddress {
        let d = self.buffer.as_ref();
        let mut a = [0u8; 6];
        a.copy_from_slice(&d[field::DST]);
        EthernetAddress(a)
    }

    /// Source address.
    #[inline]
    pub fn src_addr(&self) -> EthernetAddress {
        let d = self.buffer.as_ref();
        let mut a = [0u8; 6];
        a.copy_from_slice(&d[field::SRC]);
        EthernetAddress(a)
    }

    /// Type field (the outer TPID for a tagged frame).
    #[inline]
    pub fn ethertype(&self) -> EtherType {
        EtherType(be16(self.buffer.as_ref(), field::ETHERTYPE))
    }

    /// Bytes after the 14-byte header.
    #[inline]
    pub fn payload(&self) -> &[u8] {
        &self.buffer.as_ref()[field::PAYLOAD..]
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> EthernetFrame<T> {
    /// Sets the destination address.
    pub fn set_dst_addr(&mut self, a: EthernetAddress) {
        self.buffer.as_mut()[field::DST].copy_from_slice(&a.0);
    }

    /// Sets the source address.
    pub fn set_src_addr(&mut self, a: EthernetAddress) {
        self.buffer.as_mut()[field::SRC].copy_from_slice(&a.0);
    }

    /// Sets the type field.
    pub fn set_ethertype(&mut self, t: EtherType) {
        put16(self.buffer.as_mut(), field::ETHERTYPE, t.0);
    }

    /// Mutable bytes after the 14-byte header.
    pub fn payload_mut(&mut self) -> &mut [u8] {
        &mut self.buffer.as_mut()[field::PAYLOAD..]
    }
}

/// The fields of an Ethernet II header.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct EthernetRepr {
    /// Source address.
    pub src_addr: EthernetAddress,
    /// Destination address.
    pub dst_addr: EthernetAddress,
    /// Type field.
    pub ethertype: EtherType,
}

impl EthernetRepr {
    /// Reads the header of a checked frame.
    pub fn parse<T: AsRef<[u8]>>(frame: &EthernetFrame<T>) -> Result<EthernetRepr> {
        frame.check_len()?;
        Ok(EthernetRepr {
            src_addr: frame.src_addr(),
            dst_addr: frame.dst_addr(),
            ethertype: frame.ethertype(),
        })
    }

    /// Bytes [`Self::emit`] writes: 14.
    pub const fn buffer_len(&self) -> usize {
        HEADER_LEN
    }

    /// Writes the header.
    ///
    /// # Panics
    /// If the frame's buffer is shorter than [`Self::buffer_len`].
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(&self, frame: &mut EthernetFrame<T>) {
        frame.set_dst_addr(self.dst_addr);
        frame.set_src_addr(self.src_addr);
        frame.set_ethertype(self.ethertype);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn address_text_round_trip() {
        let a: EthernetAddress = "02:00:5e:10:00:ff".parse().expect("valid");
        assert_eq!(a.0, [0x02, 0x00, 0x5e, 0x10, 0x00, 0xff]);
        assert_eq!(a.to_string(), "02:00:5e:10:00:ff");
        assert!(a.is_local() && a.is_unicast());
        let b: EthernetAddress = "33-33-0-0-0-16".parse().expect("valid");
        assert!(b.is_multicast());
        for bad in ["", "1:2:3:4:5", "1:2:3:4:5:6:7", "001:2:3:4:5:6", "g0:1:2:3:4:5", "1::3:4:5:6"]
        {
            assert!(bad.parse::<EthernetAddress>().is_err(), "{bad}");
        }
    }

    #[test]
    fn short_frames_are_truncated() {
        for n in 0..HEADER_LEN {
            let buf = vec![0u8; n];
            assert!(matches!(
                EthernetFrame::new_checked(&buf[..]),
                Err(crate::WireError::Truncated { layer: Layer::Ethernet, need: 14, have }) if have == n
            ));
        }
    }
}
