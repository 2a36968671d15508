//! Traffic sources: when each packet of a flow is created.
//!
//! Every pattern computes emission instants exactly in integer nanoseconds: the `k`-th packet of a
//! constant-rate segment leaves at `segment_start + floor(k * size * 8e9 / rate)`, computed from
//! `k` rather than accumulated, so long runs do not drift and flows with equal parameters send
//! at identical instants (which is what makes tie-breaking matter; see `TieBreak`).
//!
//! | kind | parameters | pattern |
//! |---|---|---|
//! | `cbr` | `rate` | one packet every `size / rate` |
//! | `onoff` | `base_rate`, `burst_rate`, `period`, `burst`, `burst_at` | each period: base rate until `burst_at`, burst rate for `burst`, base rate after; each segment restarts its grid (the LBF seed's sender; `burst_at` defaults to `period - burst`, i.e. the burst ends each period) |
//! | `poisson` | `rate` | exponential gaps with mean `size / rate` (seeded per flow) |
//! | `token-bucket` | `rate`, `burst`, `peak` | greedy sender shaped by a token bucket: the full burst at start (at `peak`, default back to back), then `rate` |
//! | `tcp-bulk` | `cc`, `bytes`, `ecn`, ... | a TCP connection; the window decides (see [`crate::tcp::app`]) |
//! | `tcp-rr` | `cc`, `request`, `response`, `interval`, ... | TCP request/response short flows (see [`crate::tcp::app`]) |

use crate::tcp::app::TcpSpec;
use latnet_units::{mul_div, Bytes, Duration, Rate, Rounding, Time};
use rand::Rng;
use serde::Deserialize;

/// A sending pattern, as written in scenario files.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(tag = "kind", rename_all = "kebab-case", deny_unknown_fields)]
#[non_exhaustive]
pub enum TrafficSpec {
    /// Constant bit rate.
    Cbr {
        /// Rate of frames (frame length x packets per second x 8).
        rate: Rate,
    },
    /// Periodic bursts over a base rate.
    Onoff {
        /// Rate outside the burst (may be 0).
        #[serde(default)]
        base_rate: Rate,
        /// Rate inside the burst.
        burst_rate: Rate,
        /// Period of the pattern.
        period: Duration,
        /// Length of the burst in each period.
        burst: Duration,
        /// Offset of the burst within the period (default: `period - burst`).
        burst_at: Option<Duration>,
    },
    /// Poisson arrivals.
    Poisson {
        /// Mean rate.
        rate: Rate,
    },
    /// Greedy sender shaped by a token bucket.
    TokenBucket {
        /// Token rate.
        rate: Rate,
        /// Bucket depth.
        burst: Bytes,
        /// Peak rate while the bucket has tokens (default: unlimited, the NIC paces).
        peak: Option<Rate>,
        /// When frames leave: as soon as the bucket holds one (default), or only once it holds
        /// as many whole frames as `burst` can, all of them then (the most bursty sender the
        /// envelope allows; gLBF's validation model).
        #[serde(default)]
        release: Release,
    },
    /// A TCP bulk transfer.
    TcpBulk(TcpSpec),
    /// TCP request/response short flows.
    TcpRr(TcpSpec),
}

impl TrafficSpec {
    /// Check the parameters for frames of `size` bytes; the message says what was expected.
    pub fn validate(&self, size: u32) -> Result<(), String> {
        match self {
            TrafficSpec::TcpBulk(t) => t.validate(size, false)?,
            TrafficSpec::TcpRr(t) => t.validate(size, true)?,
            TrafficSpec::Cbr { rate } | TrafficSpec::Poisson { rate } => {
                if rate.is_zero() {
                    return Err("expected `rate` above zero".into());
                }
            }
            TrafficSpec::Onoff { base_rate, burst_rate, period, burst, burst_at } => {
                if period.is_zero() {
                    return Err("expected `period` above zero".into());
                }
                let at = burst_at.unwrap_or(period.saturating_sub(*burst));
                if *burst > *period || at + *burst > *period {
                    return Err(format!(
                        "expected the burst ({burst} at {at}) to fit within the period ({period})"
                    ));
                }
                if burst_rate.is_zero() && !burst.is_zero() {
                    return Err("expected `burst_rate` above zero".into());
                }
                if base_rate.is_zero() && (burst.is_zero() || burst_rate.is_zero()) {
                    return Err("the pattern sends nothing: set `base_rate` or a burst".into());
                }
            }
            TrafficSpec::TokenBucket { rate, burst, peak, .. } => {
                if rate.is_zero() {
                    return Err("expected `rate` above zero".into());
                }
                if burst.get() < u64::from(size) {
                    return Err(format!(
                        "expected `burst` of at least one frame ({size} B), got {burst}"
                    ));
                }
                if peak.is_some_and(|p| p < *rate) {
                    return Err("expected `peak` at or above `rate`".into());
                }
            }
        }
        Ok(())
    }

    /// The TCP settings of a `tcp-bulk` or `tcp-rr` flow.
    pub fn tcp(&self) -> Option<&TcpSpec> {
        match self {
            TrafficSpec::TcpBulk(t) | TrafficSpec::TcpRr(t) => Some(t),
            _ => None,
        }
    }
}

/// Offset of the `k`-th packet on a grid of frames of `size` bytes at `rate`.
fn grid(k: u64, size: u32, rate: Rate) -> Duration {
    Duration::from_nanos(
        mul_div(
            u128::from(k) * u128::from(size) * 8,
            1_000_000_000,
            u128::from(rate.bps()),
            Rounding::Down,
        )
        .unwrap_or(u64::MAX),
    )
}

/// The state of one flow's source.
#[derive(Debug, Clone)]
pub struct Source {
    spec: TrafficSpec,
    size: u32,
    start: Time,
    k: u64,
    // on/off: period index and segment index
    period: u64,
    segment: u8,
    // poisson / token bucket
    last: Time,
    tokens: u128,
    // sender jitter (see `with_jitter`) and the last instant returned
    jitter: u64,
    out: Time,
}

/// When a token-bucket sender releases its frames.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Release {
    /// Each frame as soon as the bucket holds its tokens.
    #[default]
    Frame,
    /// Wait until the bucket holds as many whole frames as fit in its depth, then send them.
    Burst,
}

impl Source {
    /// A source of `size`-byte frames starting at `start`.
    pub fn new(spec: TrafficSpec, size: u32, start: Time) -> Self {
        let tokens = match &spec {
            TrafficSpec::TokenBucket { burst, .. } => burst.bits() * 1_000_000_000,
            _ => 0,
        };
        Source {
            spec,
            size,
            start,
            k: 0,
            period: 0,
            segment: 0,
            last: start,
            tokens,
            jitter: 0,
            out: Time::ZERO,
        }
    }

    /// Delay each packet by a uniform draw from `[0, jitter]` after the pattern's instant, never
    /// before the previous packet (a sender's scheduling noise; the pattern itself does not
    /// drift). The draws come from the `rng` given to [`Source::next_emission`]; zero draws none.
    pub fn with_jitter(mut self, jitter: Duration) -> Self {
        self.jitter = jitter.as_nanos();
        self
    }

    /// The instant of the next packet (at or after `start`), advancing the source.
    /// `None` when the pattern can produce no further packet.
    pub fn next_emission<R: Rng>(&mut self, rng: &mut R) -> Option<Time> {
        let t = self.next_on_pattern(rng)?;
        if self.jitter == 0 {
            return Some(t);
        }
        let late = Duration::from_nanos(rng.gen_range(0..=self.jitter));
        self.out = t.checked_add_duration(late)?.max(self.out);
        Some(self.out)
    }

    fn next_on_pattern<R: Rng>(&mut self, rng: &mut R) -> Option<Time> {
        let size = self.size;
        match self.spec.clone() {
            TrafficSpec::Cbr { rate } => {
                let t = self.start.checked_add_duration(grid(self.k, size, rate))?;
                self.k += 1;
                Some(t)
            }
            TrafficSpec::Onoff { base_rate, burst_rate, period, burst, burst_at } => {
                let at = burst_at.unwrap_or(period.saturating_sub(burst));
                let segs = [
                    (Duration::ZERO, at, base_rate),
                    (at, at + burst, burst_rate),
                    (at + burst, period, base_rate),
                ];
                loop {
                    let (s0, s1, rate) = segs[usize::from(self.segment)];
                    if !rate.is_zero() && s1 > s0 {
                        let off = grid(self.k, size, rate);
                        if s0 + off < s1 {
                            self.k += 1;
                            let p0 = self
                                .start
                                .checked_add_duration(period.checked_mul(self.period)?)?;
                            return p0.checked_add_duration(s0 + off);
                        }
                    }
                    self.k = 0;
                    self.segment += 1;
                    if self.segment == 3 {
                        self.segment = 0;
                        self.period = self.period.checked_add(1)?;
                    }
                }
            }
            TrafficSpec::Poisson { rate } => {
                let mean = grid(1, size, rate).as_nanos() as f64;
                let u: f64 = rng.gen_range(f64::MIN_POSITIVE..1.0);
                let gap = Duration::from_nanos((-u.ln() * mean).round() as u64);
                let t = if self.k == 0 { self.start + gap } else { self.last + gap };
                self.k += 1;
                self.last = t;
                Some(t)
            }
            TrafficSpec::TokenBucket { rate, burst, peak, release } => {
                let cap = burst.bits() * 1_000_000_000;
                let need = u128::from(size) * 8 * 1_000_000_000;
                // the tokens to wait for once the bucket cannot pay for a frame
                let want = match release {
                    Release::Frame => need,
                    Release::Burst => cap / need * need,
                };
                let gap = match peak {
                    Some(p) if self.k > 0 => grid(1, size, p),
                    _ => Duration::ZERO,
                };
                let mut t = self.last + gap;
                let mut tokens = (self.tokens + rate.bit_nanos(t - self.last)).min(cap);
                if tokens < need {
                    let wait = (want - tokens).div_ceil(u128::from(rate.bps()));
                    let wait = Duration::from_nanos(u64::try_from(wait).ok()?);
                    t += wait;
                    tokens = (tokens + rate.bit_nanos(wait)).min(cap);
                }
                self.tokens = tokens - need.min(tokens);
                self.last = t;
                self.k += 1;
                Some(t)
            }
            // TCP flows are driven by their connections, not by a packet source.
            TrafficSpec::TcpBulk(_) | TrafficSpec::TcpRr(_) => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::SeedableRng;
    use rand_chacha::ChaCha8Rng;

    fn times(spec: TrafficSpec, size: u32, n: usize) -> Vec<u64> {
        let mut s = Source::new(spec, size, Time::ZERO);
        let mut rng = ChaCha8Rng::seed_from_u64(1);
        (0..n).map_while(|_| s.next_emission(&mut rng)).map(Time::as_nanos).collect()
    }

    #[test]
    fn cbr_is_exact_and_does_not_drift() {
        let t = times(TrafficSpec::Cbr { rate: Rate::from_mbps(1) }, 300, 3);
        assert_eq!(t, vec![0, 2_400_000, 4_800_000]);
        // 1000 B at 3 Mbps: 2,666,666.67 ns gaps, floor of k * gap.
        let t = times(TrafficSpec::Cbr { rate: Rate::from_mbps(3) }, 1000, 4);
        assert_eq!(t, vec![0, 2_666_666, 5_333_333, 8_000_000]);
    }

    /// F1 of the LBF seed: 1 Mbps base, 55 Mbps burst in the last 1 ms of each 10 ms.
    fn lbf_f1() -> TrafficSpec {
        TrafficSpec::Onoff {
            base_rate: Rate::from_mbps(1),
            burst_rate: Rate::from_mbps(55),
            period: Duration::from_millis(10),
            burst: Duration::from_millis(1),
            burst_at: None,
        }
    }

    #[test]
    fn onoff_matches_the_lbf_seed_sender() {
        let t = times(lbf_f1(), 300, 60);
        let first: Vec<_> = t.iter().copied().filter(|&x| x < 10_000_000).collect();
        assert_eq!(first.len(), 4 + 23, "4 base + 23 burst packets per period");
        assert_eq!(&first[..5], &[0, 2_400_000, 4_800_000, 7_200_000, 9_000_000]);
        assert_eq!(first[5], 9_000_000 + 43_636);
        assert_eq!(t[27], 10_000_000, "the next period starts on time");
        assert!(t.windows(2).all(|w| w[0] < w[1]));
    }

    #[test]
    fn jitter_delays_each_packet_within_its_bound_in_order() {
        let spec = lbf_f1();
        let exact = times(spec.clone(), 300, 2700);
        let jittered = |j: u64, seed: u64| -> Vec<u64> {
            let mut s =
                Source::new(spec.clone(), 300, Time::ZERO).with_jitter(Duration::from_nanos(j));
            let mut rng = ChaCha8Rng::seed_from_u64(seed);
            (0..2700).map_while(|_| s.next_emission(&mut rng)).map(Time::as_nanos).collect()
        };
        assert_eq!(jittered(0, 1), exact, "no jitter, no change");
        let a = jittered(1_000, 1);
        assert_eq!(a, jittered(1_000, 1), "same seed, same instants");
        assert_ne!(a, jittered(1_000, 2), "another seed, other instants");
        assert!(a.iter().zip(&exact).all(|(&j, &e)| (e..=e + 1_000).contains(&j)));
        assert!(a.iter().zip(&exact).any(|(&j, &e)| j != e));
        // uniform over [0, 1 us]: the mean delay is near 500 ns
        let mean = a.iter().zip(&exact).map(|(&j, &e)| j - e).sum::<u64>() / a.len() as u64;
        assert!((450..=550).contains(&mean), "mean delay {mean} ns");
        // a jitter above the gap keeps the packets in order (never before the previous one)
        let b = jittered(100_000, 3);
        assert!(b.windows(2).all(|w| w[0] <= w[1]));
    }

    #[test]
    fn token_bucket_sends_the_burst_then_the_rate() {
        let spec = TrafficSpec::TokenBucket {
            rate: Rate::from_mbps(8),
            burst: Bytes::new(3000),
            peak: None,
            release: Release::Frame,
        };
        // 1000 B frames: 3 back to back at t=0, then one per ms (8 Mbps).
        assert_eq!(times(spec, 1000, 5), vec![0, 0, 0, 1_000_000, 2_000_000]);
        let spec = TrafficSpec::TokenBucket {
            rate: Rate::from_mbps(8),
            burst: Bytes::new(2000),
            peak: Some(Rate::from_mbps(80)),
            release: Release::Frame,
        };
        assert_eq!(times(spec, 1000, 4), vec![0, 100_000, 1_000_000, 2_000_000]);
    }

    #[test]
    fn a_burst_releasing_bucket_waits_for_whole_bursts() {
        // 3,500 B holds three 1000 B frames: three at once, then three more as soon as the
        // bucket holds 3,000 B again (the first burst left 500 B: 2.5 ms), then every 3 ms.
        let spec = TrafficSpec::TokenBucket {
            rate: Rate::from_mbps(8),
            burst: Bytes::new(3500),
            peak: None,
            release: Release::Burst,
        };
        let t = times(spec, 1000, 7);
        assert_eq!(t, vec![0, 0, 0, 2_500_000, 2_500_000, 2_500_000, 5_500_000]);
        // with a peak rate the burst's frames are spaced by it
        let spec = TrafficSpec::TokenBucket {
            rate: Rate::from_mbps(8),
            burst: Bytes::new(2000),
            peak: Some(Rate::from_mbps(80)),
            release: Release::Burst,
        };
        assert_eq!(times(spec, 1000, 4), vec![0, 100_000, 2_000_000, 2_100_000]);
    }

    #[test]
    fn poisson_mean_rate_is_close_and_seeded() {
        let spec = TrafficSpec::Poisson { rate: Rate::from_mbps(8) };
        let t = times(spec.clone(), 1000, 20_000);
        let mean_gap = *t.last().unwrap_or(&0) as f64 / (t.len() - 1) as f64;
        assert!((mean_gap - 1e6).abs() < 0.03e6, "mean gap {mean_gap}");
        assert_eq!(t, times(spec, 1000, 20_000), "same seed, same times");
    }

    #[test]
    fn validation_explains() {
        let bad = TrafficSpec::Onoff {
            base_rate: Rate::ZERO,
            burst_rate: Rate::from_mbps(1),
            period: Duration::from_millis(1),
            burst: Duration::from_millis(2),
            burst_at: None,
        };
        assert!(bad.validate(100).unwrap_err().contains("fit within the period"));
        let bad = TrafficSpec::TokenBucket {
            rate: Rate::from_mbps(1),
            burst: Bytes::new(10),
            peak: None,
            release: Release::Frame,
        };
        assert!(bad.validate(100).unwrap_err().contains("at least one frame"));
        assert!(TrafficSpec::Cbr { rate: Rate::ZERO }.validate(100).is_err());
    }
}
