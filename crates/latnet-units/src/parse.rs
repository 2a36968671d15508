//! Exact parsing of unit strings (no floats): `"1.5ms"` is 1,500,000 ns, not 1.4999999 ms.

use std::fmt;

/// A string that is not a valid quantity of the expected unit.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid {what} {input:?}: {reason}")]
pub struct ParseUnitError {
    what: &'static str,
    input: String,
    reason: Reason,
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum Reason {
    Empty,
    BadNumber,
    UnknownUnit(String, &'static str),
    TooPrecise,
    Overflow,
}

impl fmt::Display for Reason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Reason::Empty => f.write_str("empty string"),
            Reason::BadNumber => {
                f.write_str("expected a non-negative decimal number before the unit")
            }
            Reason::UnknownUnit(u, expected) => {
                write!(f, "unknown unit {u:?}, expected one of {expected}")
            }
            Reason::TooPrecise => f.write_str("more decimal places than the base unit resolves"),
            Reason::Overflow => f.write_str("value too large"),
        }
    }
}

impl ParseUnitError {
    fn new(what: &'static str, input: &str, reason: Reason) -> Self {
        ParseUnitError { what, input: input.to_owned(), reason }
    }
}

/// Split "12.5 Mbps" into ("12.5", "Mbps").
fn split(s: &str) -> (&str, &str) {
    let s = s.trim();
    let end = s.find(|c: char| !(c.is_ascii_digit() || c == '.' || c == '_')).unwrap_or(s.len());
    (&s[..end], s[end..].trim())
}

/// Parse decimal `num` (digits, optional single '.') times `scale`, exactly.
fn scaled(num: &str, scale: u64) -> Result<u64, Reason> {
    let num: String = num.chars().filter(|&c| c != '_').collect();
    let (int, frac) = match num.split_once('.') {
        Some((i, f)) => (i, f),
        None => (num.as_str(), ""),
    };
    if (int.is_empty() && frac.is_empty()) || frac.contains('.') {
        return Err(Reason::BadNumber);
    }
    let int_v: u128 =
        if int.is_empty() { 0 } else { int.parse().map_err(|_| Reason::BadNumber)? };
    let mut v = int_v.checked_mul(u128::from(scale)).ok_or(Reason::Overflow)?;
    // Fractional digits: each must be representable in the base unit.
    let mut place = u128::from(scale);
    for c in frac.chars() {
        let d = c.to_digit(10).ok_or(Reason::BadNumber)?;
        if d == 0 {
            place /= 10;
            continue;
        }
        if place % 10 != 0 {
            return Err(Reason::TooPrecise);
        }
        place /= 10;
        v += u128::from(d) * place;
    }
    u64::try_from(v).map_err(|_| Reason::Overflow)
}

fn parse_with(
    what: &'static str,
    input: &str,
    default_scale: Option<u64>,
    units: &[(&str, u64)],
    expected: &'static str,
) -> Result<u64, ParseUnitError> {
    let err = |r| ParseUnitError::new(what, input, r);
    if input.trim().is_empty() {
        return Err(err(Reason::Empty));
    }
    let (num, unit) = split(input);
    if num.is_empty() {
        return Err(err(Reason::BadNumber));
    }
    let scale = if unit.is_empty() {
        default_scale.ok_or_else(|| err(Reason::UnknownUnit(String::new(), expected)))?
    } else {
        units
            .iter()
            .find(|(u, _)| *u == unit)
            .map(|&(_, s)| s)
            .ok_or_else(|| err(Reason::UnknownUnit(unit.to_owned(), expected)))?
    };
    scaled(num, scale).map_err(err)
}

pub(crate) fn parse_duration(s: &str) -> Result<u64, ParseUnitError> {
    parse_with(
        "duration",
        s,
        None,
        &[
            ("ns", 1),
            ("us", 1_000),
            ("µs", 1_000),
            ("ms", 1_000_000),
            ("s", 1_000_000_000),
            ("min", 60_000_000_000),
        ],
        "ns, us, ms, s, min",
    )
}

pub(crate) fn parse_rate(s: &str) -> Result<u64, ParseUnitError> {
    const K: u64 = 1_000;
    const M: u64 = 1_000_000;
    const G: u64 = 1_000_000_000;
    const T: u64 = 1_000_000_000_000;
    parse_with(
        "rate",
        s,
        None,
        &[
            ("bps", 1),
            ("bit/s", 1),
            ("kbps", K),
            ("Kbps", K),
            ("kbit/s", K),
            ("Mbps", M),
            ("Mbit/s", M),
            ("Gbps", G),
            ("Gbit/s", G),
            ("Tbps", T),
            ("Tbit/s", T),
        ],
        "bps, kbps, Mbps, Gbps, Tbps (or bit/s, kbit/s, ...)",
    )
}

pub(crate) fn parse_bytes(s: &str) -> Result<u64, ParseUnitError> {
    parse_with(
        "size",
        s,
        Some(1),
        &[
            ("B", 1),
            ("kB", 1_000),
            ("KB", 1_000),
            ("MB", 1_000_000),
            ("GB", 1_000_000_000),
            ("KiB", 1 << 10),
            ("MiB", 1 << 20),
            ("GiB", 1 << 30),
        ],
        "B, kB, MB, GB, KiB, MiB, GiB",
    )
}
