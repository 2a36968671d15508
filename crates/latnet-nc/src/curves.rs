//! Arrival and service curves with integer parameters.
//!
//! * Rates are bit/s (`u128`).
//! * Bursts and backlogs are **nanobits** (10⁻⁹ bit, `u128`): a burst of `b` bytes is
//!   `b × 8 × 10⁹` nanobits, and a rate `r` (bit/s) held for `d` ns adds exactly `r × d`
//!   nanobits. This is what makes burst increase and aggregation exact: adding a flow and
//!   removing it again restores every aggregate bit for bit.
//! * A burst over a rate is a time in ns (`nanobits / (bit/s) = ns`).

use crate::ratio::{add, mul, Ratio};
use crate::NcError;
use latnet_units::{Bytes, Duration, Rate};

/// Nanobits in one byte.
pub const NB_PER_BYTE: u128 = 8_000_000_000;

/// Nanobits of `b` bytes.
pub const fn nanobits(b: Bytes) -> u128 {
    b.get() as u128 * NB_PER_BYTE
}

/// A token-bucket arrival curve `γ(t) = r t + b` for `t > 0` (and 0 at `t = 0`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Hash)]
pub struct TokenBucket {
    /// Sustained rate (bit/s).
    pub rate: u128,
    /// Burst (nanobits).
    pub burst: u128,
}

impl TokenBucket {
    /// The empty curve.
    pub const ZERO: TokenBucket = TokenBucket { rate: 0, burst: 0 };

    /// `r t + b` with the rate in bit/s and the burst in bytes.
    pub const fn new(rate: Rate, burst: Bytes) -> TokenBucket {
        TokenBucket { rate: rate.bps() as u128, burst: nanobits(burst) }
    }

    /// The sum of two token buckets (aggregation), or `Overflow`.
    pub fn checked_add(self, o: TokenBucket) -> Result<TokenBucket, NcError> {
        Ok(TokenBucket { rate: add(self.rate, o.rate)?, burst: add(self.burst, o.burst)? })
    }

    /// `self - o` (removing a member of an aggregate); `Inconsistent` if `o` is not part of it.
    pub fn checked_sub(self, o: TokenBucket) -> Result<TokenBucket, NcError> {
        Ok(TokenBucket {
            rate: self.rate.checked_sub(o.rate).ok_or(NcError::Inconsistent)?,
            burst: self.burst.checked_sub(o.burst).ok_or(NcError::Inconsistent)?,
        })
    }

    /// The burst after the flow waited at most `d` (output bound of a server with delay `d`):
    /// `(r, b + r d)`.
    pub fn delayed(self, d: Duration) -> Result<TokenBucket, NcError> {
        Ok(TokenBucket {
            rate: self.rate,
            burst: add(self.burst, mul(self.rate, u128::from(d.as_nanos()))?)?,
        })
    }

    /// Burst in bytes as a float, for reports.
    pub fn burst_bytes_f64(self) -> f64 {
        self.burst as f64 / NB_PER_BYTE as f64
    }
}

/// A rate-latency service curve `β(t) = R [t − T]⁺`, stored as `R` and `N = R T` so that the
/// latency `T = N / R` (ns) stays exact through the static-priority cascade.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct RateLatency {
    /// Rate `R` (bit/s).
    pub rate: u128,
    /// `R × T` in nanobits: the latency is `latency_nb / rate` ns.
    pub latency_nb: u128,
}

impl RateLatency {
    /// `R [t − T]⁺` with `T` given in ns.
    pub fn new(rate: Rate, latency: Duration) -> Result<RateLatency, NcError> {
        let r = rate.bps() as u128;
        Ok(RateLatency { rate: r, latency_nb: mul(r, u128::from(latency.as_nanos()))? })
    }

    /// The service of one output link of rate `R` under non-preemptive static priority with
    /// maximum packet length `L`: `T = k L / R`, where `k` counts `L`-sized terms. Chameleon uses
    /// `k = 2`: one packet of a lower priority already in transmission (non-preemption) plus
    /// one for packetization of the queue's own output.
    pub const fn link(rate: Rate, l_max: Bytes, k: u8) -> RateLatency {
        RateLatency { rate: rate.bps() as u128, latency_nb: nanobits(l_max) * k as u128 }
    }

    /// The latency `T` in ns; `None` for a zero rate.
    pub fn latency(self) -> Option<Ratio> {
        Ratio::new(self.latency_nb, self.rate)
    }

    /// A packetizer after this server: the latency grows by `L / R`.
    pub fn packetized(self, l_max: Bytes) -> Result<RateLatency, NcError> {
        Ok(RateLatency { rate: self.rate, latency_nb: add(self.latency_nb, nanobits(l_max))? })
    }

    /// The leftover service for a lower priority after this server also serves `tb` at a
    /// higher priority (blind multiplexing, the least-latency residual rate-latency curve):
    /// `R' = R − r`, `T' = (b + R T) / (R − r)`, i.e. `N' = N + b`. `None` if nothing is left
    /// (`r ≥ R`).
    pub fn leftover(self, tb: TokenBucket) -> Result<Option<RateLatency>, NcError> {
        if tb.rate >= self.rate {
            return Ok(None);
        }
        Ok(Some(RateLatency {
            rate: self.rate - tb.rate,
            latency_nb: add(self.latency_nb, tb.burst)?,
        }))
    }
}

/// One concave piece of an arrival curve: the minimum of two lines, `min(r₀ t + b₀, r₁ t + b₁)`,
/// normalised so that line 0 holds at `t = 0⁺` and line 1 after the breakpoint (if any).
///
/// A token bucket is a piece whose two lines are equal. A token bucket seen through an input
/// link of rate `C` that can deliver at most one packet of `L` bytes beyond its rate is the
/// piece `min(r t + b, C t + L)`: this is input-link shaping.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Piece {
    /// Slope before the breakpoint (bit/s).
    pub r0: u128,
    /// Value at `0⁺` (nanobits).
    pub b0: u128,
    /// Slope after the breakpoint.
    pub r1: u128,
    /// Intercept of the line after the breakpoint.
    pub b1: u128,
    /// The breakpoint (ns), where the two lines meet; `None` if line 0 holds forever.
    pub bp: Option<Ratio>,
}

impl Piece {
    /// The piece of a token bucket (no breakpoint).
    pub const fn bucket(tb: TokenBucket) -> Piece {
        Piece { r0: tb.rate, b0: tb.burst, r1: tb.rate, b1: tb.burst, bp: None }
    }

    /// `min(tb, C t + L)`: the token bucket shaped by an input link of rate `C` (bit/s) with
    /// maximum packet `L` (nanobits).
    pub fn shaped(tb: TokenBucket, link_rate: u128, l_max_nb: u128) -> Piece {
        Self::min_of_lines((tb.rate, tb.burst), (link_rate, l_max_nb))
    }

    /// The minimum of two lines `(rate, intercept)`.
    pub fn min_of_lines(a: (u128, u128), b: (u128, u128)) -> Piece {
        // Line 0 is the lower one at 0⁺ (ties: the flatter one, which then stays lower).
        let (first, second) = if (a.1, a.0) <= (b.1, b.0) { (a, b) } else { (b, a) };
        if first.0 <= second.0 {
            return Piece { r0: first.0, b0: first.1, r1: first.0, b1: first.1, bp: None };
        }
        // first is steeper and starts lower: they meet at (b_s - b_f) / (r_f - r_s) > 0.
        let bp = Ratio::new(second.1 - first.1, first.0 - second.0);
        Piece { r0: first.0, b0: first.1, r1: second.0, b1: second.1, bp }
    }

    /// `q × piece(p / q)` exactly (a piece is the minimum of its two lines).
    #[inline]
    pub fn eval_scaled(&self, p: u128, q: u128) -> Result<u128, NcError> {
        let v0 = add(mul(self.r0, p)?, mul(self.b0, q)?)?;
        if self.bp.is_none() {
            return Ok(v0);
        }
        let v1 = add(mul(self.r1, p)?, mul(self.b1, q)?)?;
        Ok(v0.min(v1))
    }

    /// The long-term rate.
    pub const fn rate(&self) -> u128 {
        self.r1
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shaped_bucket_breaks_where_the_lines_meet() {
        // r = 100 Mbps, b = 10,000 B; C = 1 Gbps, L = 1,530 B.
        let tb = TokenBucket::new(Rate::from_mbps(100), Bytes::new(10_000));
        let p = Piece::shaped(tb, 1_000_000_000, nanobits(Bytes::new(1530)));
        assert_eq!((p.r0, p.r1), (1_000_000_000, 100_000_000));
        // (10,000 - 1,530) B * 8 / 900 Mbps = 75.289 us
        let bp = p.bp.unwrap().as_f64();
        assert!((bp - 75_288.888).abs() < 0.01, "{bp}");
        // a small burst is not shaped: the bucket stays below the link line
        let small = TokenBucket::new(Rate::from_mbps(100), Bytes::new(1000));
        assert_eq!(Piece::shaped(small, 1_000_000_000, nanobits(Bytes::new(1530))).bp, None);
    }

    #[test]
    fn leftover_accumulates_bursts_in_the_latency() {
        let link = RateLatency::link(Rate::from_gbps(1), Bytes::new(1530), 2);
        assert_eq!(link.latency().unwrap().as_f64(), 24_480.0);
        let tb = TokenBucket::new(Rate::from_mbps(322), Bytes::new(186_000));
        let lo = link.leftover(tb).unwrap().unwrap();
        assert_eq!(lo.rate, 678_000_000);
        // T1 = (186,000 * 8 + 24,480) bits / 678 Mbps = 2.230796 ms
        assert!((lo.latency().unwrap().as_f64() - 2_230_796.46).abs() < 0.01);
        assert_eq!(link.leftover(TokenBucket { rate: 1_000_000_000, burst: 0 }).unwrap(), None);
    }

    #[test]
    fn delayed_bucket_is_exact() {
        let tb = TokenBucket::new(Rate::from_kbps(300), Bytes::new(100));
        let d = tb.delayed(Duration::from_micros(500)).unwrap();
        // 300 kbit/s * 0.5 ms = 150 bits = 150e9 nanobits
        assert_eq!(d.burst - tb.burst, 150_000_000_000);
        assert_eq!(d.checked_sub(tb).unwrap(), TokenBucket { rate: 0, burst: 150_000_000_000 });
    }
}
