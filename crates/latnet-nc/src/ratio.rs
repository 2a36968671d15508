//! Exact non-negative rationals over `u128`, the number type of every bound.
//!
//! Bounds are quotients of integers (a sum of bursts over a rate, a breakpoint of two lines), so
//! they are kept as `num / den` and compared by cross-multiplication. Nothing is rounded, so a
//! decision such as `delay < budget` is the same on every machine and in every run. Operations
//! that could exceed `u128` return [`NcError::Overflow`] instead of wrapping or panicking; with
//! the ranges documented in the crate root they never do.

use crate::NcError;
use std::cmp::Ordering;
use std::fmt;

/// `num / den` with `den > 0`.
#[derive(Debug, Clone, Copy)]
pub struct Ratio {
    num: u128,
    den: u128,
}

/// `a * b`, or [`NcError::Overflow`].
#[inline]
pub(crate) fn mul(a: u128, b: u128) -> Result<u128, NcError> {
    a.checked_mul(b).ok_or(NcError::Overflow)
}

/// `a + b`, or [`NcError::Overflow`].
#[inline]
pub(crate) fn add(a: u128, b: u128) -> Result<u128, NcError> {
    a.checked_add(b).ok_or(NcError::Overflow)
}

/// `a / b` against `c / d` (`b, d > 0`) without multiplying.
fn cmp_frac(mut a: u128, mut b: u128, mut c: u128, mut d: u128) -> Ordering {
    loop {
        let (qa, ra) = (a / b, a % b);
        let (qc, rc) = (c / d, c % d);
        if qa != qc {
            return qa.cmp(&qc);
        }
        match (ra == 0, rc == 0) {
            (true, true) => return Ordering::Equal,
            (true, false) => return Ordering::Less,
            (false, true) => return Ordering::Greater,
            // ra/b vs rc/d  <=>  d/rc vs b/ra
            (false, false) => (a, b, c, d) = (d, rc, b, ra),
        }
    }
}

impl Ratio {
    /// Zero.
    pub const ZERO: Ratio = Ratio { num: 0, den: 1 };

    /// `num / den`; `None` if `den == 0`.
    pub const fn new(num: u128, den: u128) -> Option<Ratio> {
        if den == 0 {
            None
        } else {
            Some(Ratio { num, den })
        }
    }

    /// The integer `n`.
    pub const fn integer(n: u128) -> Ratio {
        Ratio { num: n, den: 1 }
    }

    /// Numerator.
    pub const fn numer(self) -> u128 {
        self.num
    }

    /// Denominator (never zero).
    pub const fn denom(self) -> u128 {
        self.den
    }

    /// The value as a float, for reports only.
    pub fn as_f64(self) -> f64 {
        self.num as f64 / self.den as f64
    }

    /// Exact comparison. Never overflows: it compares integer parts and then the reciprocals of
    /// the remainders (Euclid's algorithm), so the `Result` is always `Ok`; it is kept so that
    /// callers treat every comparison uniformly.
    pub fn try_cmp(self, other: Ratio) -> Result<Ordering, NcError> {
        Ok(cmp_frac(self.num, self.den, other.num, other.den))
    }

    /// `self < n` exactly.
    pub fn try_lt_int(self, n: u128) -> Result<bool, NcError> {
        // if n * den exceeds u128 it exceeds num too
        Ok(n.checked_mul(self.den).is_none_or(|x| self.num < x))
    }

    /// The smallest integer at or above the value.
    pub fn ceil(self) -> u128 {
        self.num.div_ceil(self.den)
    }

    /// The largest integer at or below the value.
    pub fn floor(self) -> u128 {
        self.num / self.den
    }
}

impl PartialEq for Ratio {
    fn eq(&self, other: &Self) -> bool {
        matches!(self.try_cmp(*other), Ok(Ordering::Equal))
    }
}

impl fmt::Display for Ratio {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.num, self.den)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn compares_exactly() {
        let a = Ratio::new(1, 3).unwrap();
        let b = Ratio::new(333_333_333_333, 1_000_000_000_000).unwrap();
        assert_eq!(a.try_cmp(b).unwrap(), Ordering::Greater);
        assert_eq!(Ratio::new(2, 6).unwrap(), a);
        assert!(Ratio::new(5, 2).unwrap().try_lt_int(3).unwrap());
        assert!(!Ratio::new(6, 2).unwrap().try_lt_int(3).unwrap());
        assert_eq!(Ratio::new(5, 2).unwrap().ceil(), 3);
        assert_eq!(Ratio::new(5, 2).unwrap().floor(), 2);
        assert!(Ratio::new(1, 0).is_none());
    }

    #[test]
    fn huge_values_compare_without_overflow() {
        let big = Ratio::new(u128::MAX, 3).unwrap();
        let other = Ratio::new(u128::MAX, 7).unwrap();
        assert_eq!(big.try_cmp(other), Ok(Ordering::Greater));
        let a = Ratio::new(u128::MAX - 1, u128::MAX).unwrap();
        let b = Ratio::new(u128::MAX - 2, u128::MAX - 1).unwrap();
        assert_eq!(a.try_cmp(b), Ok(Ordering::Greater));
        assert_eq!(a.try_cmp(a), Ok(Ordering::Equal));
        assert_eq!(Ratio::integer(5).try_lt_int(u128::MAX), Ok(true));
        assert_eq!(Ratio::new(1, u128::MAX).unwrap().try_lt_int(u128::MAX), Ok(true));
    }

    proptest::proptest! {
        #[test]
        fn comparison_agrees_with_cross_multiplication(
            a in 0u64..u64::MAX, b in 1u64..u64::MAX, c in 0u64..u64::MAX, d in 1u64..u64::MAX
        ) {
            let want = (u128::from(a) * u128::from(d)).cmp(&(u128::from(c) * u128::from(b)));
            let got = Ratio::new(a.into(), b.into()).unwrap().try_cmp(Ratio::new(c.into(), d.into()).unwrap());
            proptest::prop_assert_eq!(got, Ok(want));
        }
    }
}
