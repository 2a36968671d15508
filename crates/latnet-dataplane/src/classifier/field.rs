//! Fields as POF defines them: `{offset, length}` in bits over the packet or over the
//! per-packet metadata, and the text forms of field values.
//!
//! POF switches have no parser: a table names the bits it matches, and the controller knows
//! what they mean. For readable rule files, [`catalogue`] names the fields of untagged
//! Ethernet / IPv4 / IPv6 / UDP headers at their fixed offsets (as a POF controller would
//! compute them); any other field is written as `{offset, length}`.

use super::key::{Key, KEY_BITS};
use std::net::{Ipv4Addr, Ipv6Addr};

/// Bytes of per-packet metadata (POF's metadata area; bytes 0..2 hold the ingress port).
pub const META_BYTES: usize = 32;

/// Where a field's bits come from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Space {
    /// The packet bytes.
    Packet,
    /// The metadata area that travels with the packet through the pipeline.
    Meta,
}

/// A field: `length` bits at bit `offset` of the packet or the metadata.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Field {
    /// Packet or metadata.
    pub space: Space,
    /// Offset in bits from the start.
    pub offset: u16,
    /// Length in bits (1..=[`KEY_BITS`]).
    pub length: u16,
}

impl Field {
    /// A packet field.
    pub const fn packet(offset: u16, length: u16) -> Field {
        Field { space: Space::Packet, offset, length }
    }

    /// A metadata field.
    pub const fn meta(offset: u16, length: u16) -> Field {
        Field { space: Space::Meta, offset, length }
    }

    /// Check the length and, for metadata, the range.
    pub fn check(&self) -> Result<(), String> {
        if self.length == 0 || usize::from(self.length) > KEY_BITS {
            return Err(format!("field length must be 1..={KEY_BITS} bits, got {}", self.length));
        }
        if self.space == Space::Meta
            && usize::from(self.offset) + usize::from(self.length) > META_BYTES * 8
        {
            return Err(format!(
                "metadata field [{}, +{}) beyond the {} metadata bits",
                self.offset,
                self.length,
                META_BYTES * 8
            ));
        }
        Ok(())
    }
}

/// Named fields of untagged frames at their fixed offsets (bits), for rule files.
///
/// | name | offset | length |
/// |---|---|---|
/// | `in_port` (metadata) | 0 | 16 |
/// | `eth.dst`, `eth.src`, `eth.type` | 0, 48, 96 | 48, 48, 16 |
/// | `ipv4.dscp`, `ipv4.proto`, `ipv4.src`, `ipv4.dst` | 120, 184, 208, 240 | 6, 8, 32, 32 |
/// | `ipv4.sport`, `ipv4.dport` (UDP/TCP after a 20-byte IPv4 header) | 272, 288 | 16, 16 |
/// | `ipv6.tc`, `ipv6.next`, `ipv6.src`, `ipv6.dst` | 116, 160, 176, 304 | 8, 8, 128, 128 |
/// | `ipv6.sport`, `ipv6.dport` (UDP/TCP right after the IPv6 header) | 432, 448 | 16, 16 |
/// | `seadp.*`, `wsm.*` | see [`super::workload`] | |
pub fn catalogue(name: &str) -> Option<Field> {
    use super::workload::{seadp, wsm};
    Some(match name {
        "in_port" => Field::meta(0, 16),
        "eth.dst" => Field::packet(0, 48),
        "eth.src" => Field::packet(48, 48),
        "eth.type" => Field::packet(96, 16),
        "ipv4.dscp" => Field::packet(120, 6),
        "ipv4.proto" => Field::packet(184, 8),
        "ipv4.src" => Field::packet(208, 32),
        "ipv4.dst" => Field::packet(240, 32),
        "ipv4.sport" => Field::packet(272, 16),
        "ipv4.dport" => Field::packet(288, 16),
        "ipv6.tc" => Field::packet(116, 8),
        "ipv6.next" => Field::packet(160, 8),
        "ipv6.src" => Field::packet(176, 128),
        "ipv6.dst" => Field::packet(304, 128),
        "ipv6.sport" => Field::packet(432, 16),
        "ipv6.dport" => Field::packet(448, 16),
        "seadp.type" => seadp::TYPE,
        "seadp.flags" => seadp::FLAGS,
        "seadp.dst_eid" => seadp::DST_EID,
        "seadp.src_eid" => seadp::SRC_EID,
        "wsm.version" => wsm::VERSION,
        "wsm.psid" => wsm::PSID,
        _ => return None,
    })
}

/// All catalogue names (for error messages).
pub const CATALOGUE_NAMES: &[&str] = &[
    "in_port",
    "eth.dst",
    "eth.src",
    "eth.type",
    "ipv4.dscp",
    "ipv4.proto",
    "ipv4.src",
    "ipv4.dst",
    "ipv4.sport",
    "ipv4.dport",
    "ipv6.tc",
    "ipv6.next",
    "ipv6.src",
    "ipv6.dst",
    "ipv6.sport",
    "ipv6.dport",
    "seadp.type",
    "seadp.flags",
    "seadp.dst_eid",
    "seadp.src_eid",
    "wsm.version",
    "wsm.psid",
];

/// Parse a field value of `bits` bits into a key whose first `bits` bits hold it.
///
/// Accepted: decimal (`80`), hex (`0x86dd`, any length up to the field), a MAC address
/// (`02:00:00:00:00:01`, 48-bit fields), an IPv4 address (32-bit fields), an IPv6 address
/// (128-bit fields). The value must fit in the field.
pub fn parse_value(text: &str, bits: usize) -> Result<Key, String> {
    let t = text.trim();
    let mut k = Key::ZERO;
    if bits == 0 || bits > KEY_BITS {
        return Err(format!("field width {bits} is out of range"));
    }
    if bits == 48 && t.matches(':').count() == 5 && !t.contains("::") {
        let mut v = 0u64;
        for part in t.split(':') {
            let b = (matches!(part.len(), 1 | 2) && part.bytes().all(|c| c.is_ascii_hexdigit()))
                .then(|| u8::from_str_radix(part, 16).ok())
                .flatten()
                .ok_or_else(|| {
                    format!("expected a MAC address like 02:00:00:00:00:01, got {t:?}")
                })?;
            v = (v << 8) | u64::from(b);
        }
        k.put_bits(0, 48, v);
        return Ok(k);
    }
    if t.contains(':') {
        if bits != 128 {
            return Err(format!("{t:?} looks like an IPv6 address, but the field has {bits} bits"));
        }
        let a: Ipv6Addr = t.parse().map_err(|_| format!("expected an IPv6 address, got {t:?}"))?;
        let v = u128::from(a);
        k.put_bits(0, 64, (v >> 64) as u64);
        k.put_bits(64, 64, v as u64);
        return Ok(k);
    }
    if t.matches('.').count() == 3 {
        if bits != 32 {
            return Err(format!("{t:?} looks like an IPv4 address, but the field has {bits} bits"));
        }
        let a: Ipv4Addr = t.parse().map_err(|_| format!("expected an IPv4 address, got {t:?}"))?;
        k.put_bits(0, 32, u64::from(u32::from(a)));
        return Ok(k);
    }
    if let Some(hex) = t.strip_prefix("0x").or_else(|| t.strip_prefix("0X")) {
        if hex.is_empty() {
            return Err(format!("expected hex digits after 0x, got {t:?}"));
        }
        let hex = hex.trim_start_matches('0');
        if hex.is_empty() {
            return Ok(k);
        }
        if !hex.bytes().all(|b| b.is_ascii_hexdigit()) {
            return Err(format!("expected hex digits after 0x, got {t:?}"));
        }
        // significant bits of the number
        let lead = u8::from_str_radix(&hex[..1], 16).unwrap_or(0);
        let sig = (hex.len() - 1) * 4 + (8 - lead.leading_zeros() as usize);
        if sig > bits {
            return Err(format!("value {t} does not fit in {bits} bits"));
        }
        // place nibbles right-aligned in `bits`
        for (i, c) in hex.bytes().rev().enumerate() {
            let nib = u64::from((c as char).to_digit(16).unwrap_or(0));
            let lsb = bits as isize - 1 - 4 * i as isize; // position of this nibble's lowest bit
            for j in 0..4 {
                if (nib >> j) & 1 == 1 {
                    let p = lsb - j as isize;
                    if p >= 0 {
                        k.set_bit(p as usize);
                    }
                }
            }
        }
        return Ok(k);
    }
    let v: u128 = t.parse().map_err(|_| {
        format!("expected a number (decimal or 0x hex), a MAC, IPv4 or IPv6 address, got {t:?}")
    })?;
    let sig = 128 - v.leading_zeros() as usize;
    if sig > bits {
        return Err(format!("value {t} does not fit in {bits} bits"));
    }
    for i in 0..sig {
        if (v >> i) & 1 == 1 {
            k.set_bit(bits - 1 - i);
        }
    }
    Ok(k)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_in_every_form() {
        assert_eq!(parse_value("0x86dd", 16).unwrap().get_bits(0, 16), 0x86dd);
        assert_eq!(parse_value("34525", 16).unwrap().get_bits(0, 16), 0x86dd);
        assert_eq!(parse_value("02:00:00:00:00:01", 48).unwrap().get_bits(0, 48), 0x0200_0000_0001);
        assert_eq!(parse_value("10.0.0.1", 32).unwrap().get_bits(0, 32), 0x0a00_0001);
        let k = parse_value("2001:db8::1", 128).unwrap();
        assert_eq!(k.get_bits(0, 32), 0x2001_0db8);
        assert_eq!(k.get_bits(96, 32), 1);
        assert_eq!(parse_value("5", 3).unwrap().get_bits(0, 3), 5);
        assert_eq!(parse_value("0x0", 3).unwrap(), Key::ZERO);
    }

    #[test]
    fn values_that_do_not_fit_are_rejected() {
        assert!(parse_value("0x1ff", 8).unwrap_err().contains("does not fit"));
        assert!(parse_value("256", 8).is_err());
        assert!(parse_value("10.0.0.1", 16).is_err());
        assert!(parse_value("nonsense", 16).is_err());
        assert!(parse_value("0xzz", 16).is_err());
        assert!(parse_value("1", 0).is_err());
    }

    #[test]
    fn a_bare_0x_is_not_zero() {
        // "0x" alone was read as the value 0
        assert!(parse_value("0x", 16).unwrap_err().contains("hex digits after 0x"));
        assert!(parse_value("0X", 8).is_err());
        assert_eq!(parse_value("0x00", 8).unwrap(), Key::ZERO);
    }

    #[test]
    fn macs_with_short_groups_are_macs() {
        // "2:0:0:0:0:1" was refused as "looks like an IPv6 address"
        assert_eq!(parse_value("2:0:0:0:0:1", 48).unwrap().get_bits(0, 48), 0x0200_0000_0001);
        assert_eq!(parse_value("a:b:c:d:e:F", 48).unwrap().get_bits(0, 48), 0x0a0b_0c0d_0e0f);
        let e = parse_value("02:00:00:00:00:100", 48).unwrap_err();
        assert!(e.contains("expected a MAC address"), "{e}");
        assert!(parse_value("+2:0:0:0:0:1", 48).unwrap_err().contains("MAC"));
    }
}
