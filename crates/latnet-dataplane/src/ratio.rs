//! [`Ratio`]: an exact non-negative fraction for configuration (weights, shares, gains in Hz).
//!
//! Element state holds no floats; configuration may still be written naturally. A `Ratio`
//! deserializes from an integer (`2`), a decimal (`0.985`, kept exactly as 985/1000), a
//! fraction string (`"41/256"`) or a percentage (`"98.5%"`), and is then used only through
//! integer products ([`Ratio::mul_u64`], [`Ratio::mul_u128`]).

use serde::de::{self, Deserializer, Visitor};
use serde::Deserialize;
use std::fmt;

/// An exact fraction `num / den` (`den > 0`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Ratio {
    num: u64,
    den: u64,
}

impl Ratio {
    /// One.
    pub const ONE: Ratio = Ratio { num: 1, den: 1 };
    /// Zero.
    pub const ZERO: Ratio = Ratio { num: 0, den: 1 };

    /// `num / den`; `None` if `den` is zero.
    pub const fn new(num: u64, den: u64) -> Option<Ratio> {
        if den == 0 {
            None
        } else {
            Some(Ratio { num, den })
        }
    }

    /// Numerator.
    pub const fn num(self) -> u64 {
        self.num
    }

    /// Denominator (never zero).
    pub const fn den(self) -> u64 {
        self.den
    }

    /// `x * self`, rounded down, saturating at `u64::MAX`.
    pub fn mul_u64(self, x: u64) -> u64 {
        u64::try_from(u128::from(x) * u128::from(self.num) / u128::from(self.den))
            .unwrap_or(u64::MAX)
    }

    /// `x * self` in 128 bits, rounded down (saturating).
    pub fn mul_u128(self, x: u128) -> u128 {
        x.saturating_mul(u128::from(self.num)) / u128::from(self.den)
    }

    /// `x / self`, rounded down; `None` if `self` is zero.
    pub fn div_u64(self, x: u64) -> Option<u64> {
        if self.num == 0 {
            return None;
        }
        Some(
            u64::try_from(u128::from(x) * u128::from(self.den) / u128::from(self.num))
                .unwrap_or(u64::MAX),
        )
    }

    /// True if `self <= 1`.
    pub const fn at_most_one(self) -> bool {
        self.num <= self.den
    }

    /// True if zero.
    pub const fn is_zero(self) -> bool {
        self.num == 0
    }

    /// As a float, for reports only.
    pub fn as_f64(self) -> f64 {
        self.num as f64 / self.den as f64
    }

    /// Parse `"a/b"`, `"x%"` or a decimal such as `"0.985"`.
    pub fn parse(s: &str) -> Result<Ratio, String> {
        let s = s.trim();
        let err =
            || format!("expected a fraction such as 0.985, \"41/256\" or \"98.5%\", got {s:?}");
        if let Some((a, b)) = s.split_once('/') {
            let a: u64 = a.trim().parse().map_err(|_| err())?;
            let b: u64 = b.trim().parse().map_err(|_| err())?;
            return Ratio::new(a, b).ok_or_else(err);
        }
        if let Some(p) = s.strip_suffix('%') {
            let r = Self::decimal(p.trim()).ok_or_else(err)?;
            return Ratio::new(r.num, r.den.checked_mul(100).ok_or_else(err)?).ok_or_else(err);
        }
        Self::decimal(s).ok_or_else(err)
    }

    /// A decimal with at most 12 fractional digits, exactly.
    fn decimal(s: &str) -> Option<Ratio> {
        let (int, frac) = s.split_once('.').unwrap_or((s, ""));
        if (int.is_empty() && frac.is_empty()) || frac.len() > 12 {
            return None;
        }
        let digits = |t: &str| t.bytes().all(|b| b.is_ascii_digit());
        if !digits(int) || !digits(frac) {
            return None;
        }
        let den = 10u64.pow(frac.len() as u32);
        let i: u64 = if int.is_empty() { 0 } else { int.parse().ok()? };
        let f: u64 = if frac.is_empty() { 0 } else { frac.parse().ok()? };
        Some(Ratio { num: i.checked_mul(den)?.checked_add(f)?, den })
    }
}

impl fmt::Display for Ratio {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.num, self.den)
    }
}

impl<'de> Deserialize<'de> for Ratio {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl Visitor<'_> for V {
            type Value = Ratio;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a non-negative fraction: 0.985, 2, \"41/256\" or \"98.5%\"")
            }
            fn visit_u64<E: de::Error>(self, v: u64) -> Result<Ratio, E> {
                Ok(Ratio { num: v, den: 1 })
            }
            fn visit_i64<E: de::Error>(self, v: i64) -> Result<Ratio, E> {
                u64::try_from(v)
                    .map(|v| Ratio { num: v, den: 1 })
                    .map_err(|_| E::invalid_value(de::Unexpected::Signed(v), &self))
            }
            fn visit_f64<E: de::Error>(self, v: f64) -> Result<Ratio, E> {
                // The shortest decimal that prints as `v` is what the user wrote.
                if !v.is_finite() || v < 0.0 {
                    return Err(E::invalid_value(de::Unexpected::Float(v), &self));
                }
                Ratio::parse(&format!("{v}")).map_err(E::custom)
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<Ratio, E> {
                Ratio::parse(v).map_err(E::custom)
            }
        }
        d.deserialize_any(V)
    }
}

impl serde::Serialize for Ratio {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&self.to_string())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Deserialize)]
    struct T {
        r: Ratio,
    }

    fn de(s: &str) -> Result<Ratio, String> {
        toml::from_str::<T>(&format!("r = {s}")).map(|t| t.r).map_err(|e| e.to_string())
    }

    #[test]
    fn parses_exactly() {
        assert_eq!(de("0.985").unwrap(), Ratio::new(985, 1000).unwrap());
        assert_eq!(de("2").unwrap(), Ratio::new(2, 1).unwrap());
        assert_eq!(de("\"41/256\"").unwrap(), Ratio::new(41, 256).unwrap());
        assert_eq!(de("\"98.5%\"").unwrap(), Ratio::new(985, 1000).unwrap());
        assert_eq!(de("0.16").unwrap().mul_u64(1_000_000_000), 160_000_000);
        assert!(de("-1").is_err());
        assert!(de("\"1/0\"").is_err());
        assert!(de("\"x\"").is_err());
        assert!(de("\"1.2.3\"").is_err());
    }

    #[test]
    fn products_round_down() {
        let r = Ratio::new(1, 3).unwrap();
        assert_eq!(r.mul_u64(10), 3);
        assert_eq!(r.div_u64(10), Some(30));
        assert_eq!(Ratio::ZERO.div_u64(1), None);
        assert_eq!(Ratio::new(u64::MAX, 1).unwrap().mul_u64(u64::MAX), u64::MAX);
    }
}
