//! Units shared by every latnet crate: [`Time`], [`Duration`], [`Rate`] and [`Bytes`].
//!
//! # Contract
//!
//! * Time and durations are integer nanoseconds (`u64`, about 584 years of range). Rates are
//!   integer bits per second. Sizes are integer bytes. There are no floats in any of these types;
//!   `as_secs_f64`-style accessors exist only for reports.
//! * Products that mix units (rate x duration, bytes / rate) are computed in `u128` with an
//!   explicit [`Rounding`], so they cannot overflow and never round silently.
//! * The `std::ops` operators never panic: `+` and `-` saturate (at the type's maximum and at
//!   zero). Use the `checked_*` methods where an overflow or a negative result is a bug that
//!   must be seen.
//! * Every type parses from a human string with a unit (`"10ms"`, `"1.5Gbps"`, `"64KiB"`) and
//!   displays in a form that parses back to the same value. With serde, each type deserializes
//!   from such a string or from a bare integer in its base unit (ns, bit/s, bytes) and
//!   serializes as that bare integer.
//! * Time dilation ([`with_dilation`]): while a closure runs with a factor `k`, every
//!   [`Duration`] and [`Time`] deserialized on its thread is `k` times longer and every
//!   [`Rate`] `k` times slower ([`Bytes`] unchanged), whatever form it was written in. A
//!   scenario read so runs `k` times slower and otherwise the same (a real-time emulation then
//!   has `k` times more time per packet); nothing else in latnet deserializes under it.

use std::fmt;
use std::ops::{Add, AddAssign, Sub, SubAssign};
use std::str::FromStr;

mod parse;

pub use parse::ParseUnitError;

/// How a division that does not come out even is rounded.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Rounding {
    /// Toward zero.
    Down,
    /// Away from zero.
    Up,
    /// To the nearest integer, halves away from zero.
    Nearest,
}

const NS_PER_SEC: u128 = 1_000_000_000;

/// `a * b / c` in 128 bits with explicit rounding; `None` if `c == 0` or the result exceeds `u64`.
pub fn mul_div(a: u128, b: u128, c: u128, rounding: Rounding) -> Option<u64> {
    if c == 0 {
        return None;
    }
    let p = a.checked_mul(b)?;
    let q = p / c;
    let r = p % c;
    let q = match rounding {
        Rounding::Down => q,
        Rounding::Up => q + u128::from(r != 0),
        Rounding::Nearest => q + u128::from(r >= c - r),
    };
    u64::try_from(q).ok()
}

macro_rules! common_impls {
    ($t:ident, $inner:ty) => {
        impl $t {
            /// The zero value.
            pub const ZERO: $t = $t(0);
            /// The largest representable value.
            pub const MAX: $t = $t(<$inner>::MAX);

            /// `self + rhs`, or `None` on overflow.
            pub const fn checked_add(self, rhs: $t) -> Option<$t> {
                match self.0.checked_add(rhs.0) {
                    Some(v) => Some($t(v)),
                    None => None,
                }
            }
            /// `self - rhs`, or `None` if `rhs > self`.
            pub const fn checked_sub(self, rhs: $t) -> Option<$t> {
                match self.0.checked_sub(rhs.0) {
                    Some(v) => Some($t(v)),
                    None => None,
                }
            }
            /// `self + rhs`, clamped at [`Self::MAX`].
            pub const fn saturating_add(self, rhs: $t) -> $t {
                $t(self.0.saturating_add(rhs.0))
            }
            /// `self - rhs`, clamped at zero.
            pub const fn saturating_sub(self, rhs: $t) -> $t {
                $t(self.0.saturating_sub(rhs.0))
            }
            /// `self * k`, or `None` on overflow.
            pub const fn checked_mul(self, k: u64) -> Option<$t> {
                match self.0.checked_mul(k) {
                    Some(v) => Some($t(v)),
                    None => None,
                }
            }
            /// `self * k`, clamped at [`Self::MAX`].
            pub const fn saturating_mul(self, k: u64) -> $t {
                $t(self.0.saturating_mul(k))
            }
            /// `self * num / den` with explicit rounding; `None` if `den == 0` or on overflow.
            pub fn mul_div(self, num: u64, den: u64, rounding: Rounding) -> Option<$t> {
                mul_div(u128::from(self.0), u128::from(num), u128::from(den), rounding).map($t)
            }
            /// True if the value is zero.
            pub const fn is_zero(self) -> bool {
                self.0 == 0
            }
        }

        impl serde::Serialize for $t {
            fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
                s.serialize_u64(self.0)
            }
        }

        impl<'de> serde::Deserialize<'de> for $t {
            fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
                struct V;
                impl serde::de::Visitor<'_> for V {
                    type Value = $t;
                    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                        f.write_str(<$t>::EXPECTING)
                    }
                    fn visit_u64<E: serde::de::Error>(self, v: u64) -> Result<$t, E> {
                        Ok($t(v))
                    }
                    fn visit_i64<E: serde::de::Error>(self, v: i64) -> Result<$t, E> {
                        u64::try_from(v)
                            .map($t)
                            .map_err(|_| E::invalid_value(serde::de::Unexpected::Signed(v), &Self))
                    }
                    fn visit_str<E: serde::de::Error>(self, v: &str) -> Result<$t, E> {
                        v.parse().map_err(|e: ParseUnitError| E::custom(e))
                    }
                }
                let v = d.deserialize_any(V)?;
                match DILATION.with(std::cell::Cell::get) {
                    1 => Ok(v),
                    k => v.dilated(k).map_err(serde::de::Error::custom),
                }
            }
        }
    };
}

thread_local! {
    /// The factor of [`with_dilation`] on this thread (1: none).
    static DILATION: std::cell::Cell<u64> = const { std::cell::Cell::new(1) };
}

/// Run `f` with every [`Duration`] and [`Time`] deserialized on this thread `k` times longer
/// and every [`Rate`] `k` times slower (rounded to the nearest bit per second; a rate that
/// would round to zero is an error), as the crate's contract describes. `k = 0` counts as 1.
/// Nests: the innermost factor applies.
pub fn with_dilation<R>(k: u64, f: impl FnOnce() -> R) -> R {
    struct Restore(u64);
    impl Drop for Restore {
        fn drop(&mut self) {
            DILATION.with(|d| d.set(self.0));
        }
    }
    let _restore = Restore(DILATION.with(|d| d.replace(k.max(1))));
    f()
}

/// `d`, a default written in code rather than read, as [`with_dilation`] would have read it:
/// `k` times longer inside the closure (saturating), itself outside.
pub fn dilated_default(d: Duration) -> Duration {
    d.saturating_mul(DILATION.with(std::cell::Cell::get))
}

impl Duration {
    fn dilated(self, k: u64) -> Result<Self, String> {
        self.0.checked_mul(k).map(Duration).ok_or_else(|| format!("{self} x {k} overflows"))
    }
}

impl Time {
    fn dilated(self, k: u64) -> Result<Self, String> {
        self.0.checked_mul(k).map(Time).ok_or_else(|| format!("{self} x {k} overflows"))
    }
}

impl Rate {
    fn dilated(self, k: u64) -> Result<Self, String> {
        match mul_div(u128::from(self.0), 1, u128::from(k), Rounding::Nearest) {
            Some(0) if self.0 > 0 => Err(format!("{self} / {k} is below 1 bit/s")),
            Some(r) => Ok(Rate(r)),
            None => Err(format!("{self} / {k} is not a rate")),
        }
    }
}

impl Bytes {
    #[allow(clippy::unnecessary_wraps)]
    fn dilated(self, _k: u64) -> Result<Self, String> {
        Ok(self)
    }
}

/// A span of time in nanoseconds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct Duration(u64);

/// An instant of (virtual or real) time: nanoseconds since the start of the run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct Time(u64);

/// A data rate in bits per second.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct Rate(u64);

/// A size in bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct Bytes(u64);

common_impls!(Duration, u64);
common_impls!(Time, u64);
common_impls!(Rate, u64);
common_impls!(Bytes, u64);

impl Duration {
    const EXPECTING: &'static str =
        "a duration: an integer number of nanoseconds or a string such as \"10ms\", \"1.5us\", \"2s\"";

    /// From nanoseconds.
    pub const fn from_nanos(ns: u64) -> Self {
        Duration(ns)
    }
    /// From microseconds (saturating).
    pub const fn from_micros(us: u64) -> Self {
        Duration(us.saturating_mul(1_000))
    }
    /// From milliseconds (saturating).
    pub const fn from_millis(ms: u64) -> Self {
        Duration(ms.saturating_mul(1_000_000))
    }
    /// From seconds (saturating).
    pub const fn from_secs(s: u64) -> Self {
        Duration(s.saturating_mul(1_000_000_000))
    }
    /// Nanoseconds.
    pub const fn as_nanos(self) -> u64 {
        self.0
    }
    /// Whole microseconds (truncated).
    pub const fn as_micros(self) -> u64 {
        self.0 / 1_000
    }
    /// Seconds as a float, for reports only.
    pub fn as_secs_f64(self) -> f64 {
        self.0 as f64 / 1e9
    }
    /// Microseconds as a float, for reports only.
    pub fn as_micros_f64(self) -> f64 {
        self.0 as f64 / 1e3
    }
    /// `self / k` rounded as asked; `None` if `k == 0`.
    pub fn div_rounded(self, k: u64, rounding: Rounding) -> Option<Duration> {
        self.mul_div(1, k, rounding)
    }
}

impl Time {
    const EXPECTING: &'static str =
        "an instant: an integer number of nanoseconds or a string such as \"10ms\", \"2s\"";

    /// From nanoseconds since the start of the run.
    pub const fn from_nanos(ns: u64) -> Self {
        Time(ns)
    }
    /// Nanoseconds since the start of the run.
    pub const fn as_nanos(self) -> u64 {
        self.0
    }
    /// The instant `d` after the start of the run.
    pub const fn from_duration(d: Duration) -> Self {
        Time(d.0)
    }
    /// Time elapsed since the start of the run.
    pub const fn since_start(self) -> Duration {
        Duration(self.0)
    }
    /// `self - earlier`, clamped at zero.
    pub const fn saturating_duration_since(self, earlier: Time) -> Duration {
        Duration(self.0.saturating_sub(earlier.0))
    }
    /// `self - earlier`, or `None` if `earlier` is later than `self`.
    pub const fn checked_duration_since(self, earlier: Time) -> Option<Duration> {
        match self.0.checked_sub(earlier.0) {
            Some(v) => Some(Duration(v)),
            None => None,
        }
    }
    /// `self + d`, or `None` on overflow.
    pub const fn checked_add_duration(self, d: Duration) -> Option<Time> {
        match self.0.checked_add(d.0) {
            Some(v) => Some(Time(v)),
            None => None,
        }
    }
    /// Seconds as a float, for reports only.
    pub fn as_secs_f64(self) -> f64 {
        self.0 as f64 / 1e9
    }
}

impl Rate {
    const EXPECTING: &'static str =
        "a rate: an integer number of bit/s or a string such as \"100Mbps\", \"1.5Gbit/s\", \"900kbps\"";

    /// From bits per second.
    pub const fn from_bps(bps: u64) -> Self {
        Rate(bps)
    }
    /// From kilobits (10^3) per second (saturating).
    pub const fn from_kbps(k: u64) -> Self {
        Rate(k.saturating_mul(1_000))
    }
    /// From megabits (10^6) per second (saturating).
    pub const fn from_mbps(m: u64) -> Self {
        Rate(m.saturating_mul(1_000_000))
    }
    /// From gigabits (10^9) per second (saturating).
    pub const fn from_gbps(g: u64) -> Self {
        Rate(g.saturating_mul(1_000_000_000))
    }
    /// Bits per second.
    pub const fn bps(self) -> u64 {
        self.0
    }
    /// Bits per second as a float, for reports only.
    pub fn as_bps_f64(self) -> f64 {
        self.0 as f64
    }
    /// Time to serialize `size` at this rate, rounded up to whole nanoseconds
    /// (a transmitter is busy until the last bit is out). `None` for a zero rate.
    pub fn tx_time(self, size: Bytes) -> Option<Duration> {
        self.tx_time_rounded(size, Rounding::Up)
    }
    /// Time to serialize `size` at this rate with the given rounding. `None` for a zero rate.
    pub fn tx_time_rounded(self, size: Bytes, rounding: Rounding) -> Option<Duration> {
        mul_div(u128::from(size.0) * 8, NS_PER_SEC, u128::from(self.0), rounding).map(Duration)
    }
    /// Bits sent at this rate during `d` (exact, in 128 bits, scaled by 10^9: `bps * ns`).
    pub fn bit_nanos(self, d: Duration) -> u128 {
        u128::from(self.0) * u128::from(d.0)
    }
    /// Bytes sent at this rate during `d`, rounded as asked.
    pub fn bytes_in(self, d: Duration, rounding: Rounding) -> Bytes {
        // bps * ns / (8 * 1e9); cannot overflow u64 for any realistic input, clamps otherwise.
        Bytes(
            mul_div(u128::from(self.0), u128::from(d.0), 8 * NS_PER_SEC, rounding)
                .unwrap_or(u64::MAX),
        )
    }
    /// The rate that moves `size` in `d`, rounded as asked; `None` if `d` is zero.
    pub fn from_size_per(size: Bytes, d: Duration, rounding: Rounding) -> Option<Rate> {
        mul_div(u128::from(size.0) * 8, NS_PER_SEC, u128::from(d.0), rounding).map(Rate)
    }
}

impl Bytes {
    const EXPECTING: &'static str =
        "a size: an integer number of bytes or a string such as \"1500B\", \"64KiB\", \"1MB\"";

    /// From a byte count.
    pub const fn new(n: u64) -> Self {
        Bytes(n)
    }
    /// The byte count.
    pub const fn get(self) -> u64 {
        self.0
    }
    /// The size in bits.
    pub const fn bits(self) -> u128 {
        self.0 as u128 * 8
    }
}

impl From<u64> for Bytes {
    fn from(n: u64) -> Self {
        Bytes(n)
    }
}

// ---- operators: saturating, never panicking ----

impl Add<Duration> for Time {
    type Output = Time;
    fn add(self, d: Duration) -> Time {
        Time(self.0.saturating_add(d.0))
    }
}
impl AddAssign<Duration> for Time {
    fn add_assign(&mut self, d: Duration) {
        *self = *self + d;
    }
}
impl Sub<Duration> for Time {
    type Output = Time;
    fn sub(self, d: Duration) -> Time {
        Time(self.0.saturating_sub(d.0))
    }
}
impl Sub<Time> for Time {
    type Output = Duration;
    fn sub(self, earlier: Time) -> Duration {
        self.saturating_duration_since(earlier)
    }
}

macro_rules! same_type_ops {
    ($t:ident) => {
        impl Add for $t {
            type Output = $t;
            fn add(self, rhs: $t) -> $t {
                self.saturating_add(rhs)
            }
        }
        impl AddAssign for $t {
            fn add_assign(&mut self, rhs: $t) {
                *self = self.saturating_add(rhs);
            }
        }
        impl Sub for $t {
            type Output = $t;
            fn sub(self, rhs: $t) -> $t {
                self.saturating_sub(rhs)
            }
        }
        impl SubAssign for $t {
            fn sub_assign(&mut self, rhs: $t) {
                *self = self.saturating_sub(rhs);
            }
        }
        impl std::iter::Sum for $t {
            fn sum<I: Iterator<Item = $t>>(iter: I) -> $t {
                iter.fold($t::ZERO, |a, b| a + b)
            }
        }
    };
}
same_type_ops!(Duration);
same_type_ops!(Rate);
same_type_ops!(Bytes);

// ---- display: exact, and parses back to the same value ----

fn fmt_scaled(f: &mut fmt::Formatter<'_>, v: u64, units: &[(u64, &str)]) -> fmt::Result {
    // units from largest to smallest; the last has scale 1.
    for &(scale, name) in units {
        if v != 0 && v % scale == 0 {
            return write!(f, "{}{}", v / scale, name);
        }
    }
    let (_, base) = units[units.len() - 1];
    write!(f, "{v}{base}")
}

impl fmt::Display for Duration {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt_scaled(f, self.0, &[(1_000_000_000, "s"), (1_000_000, "ms"), (1_000, "us"), (1, "ns")])
    }
}
impl fmt::Display for Time {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        Duration(self.0).fmt(f)
    }
}
impl fmt::Display for Rate {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt_scaled(
            f,
            self.0,
            &[(1_000_000_000, "Gbps"), (1_000_000, "Mbps"), (1_000, "kbps"), (1, "bps")],
        )
    }
}
impl fmt::Display for Bytes {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}B", self.0)
    }
}

impl FromStr for Duration {
    type Err = ParseUnitError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        parse::parse_duration(s).map(Duration)
    }
}
impl FromStr for Time {
    type Err = ParseUnitError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        parse::parse_duration(s).map(Time)
    }
}
impl FromStr for Rate {
    type Err = ParseUnitError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        parse::parse_rate(s).map(Rate)
    }
}
impl FromStr for Bytes {
    type Err = ParseUnitError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        parse::parse_bytes(s).map(Bytes)
    }
}

#[cfg(test)]
mod tests;
