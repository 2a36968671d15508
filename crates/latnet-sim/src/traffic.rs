//! Traffic sources: when each packet of a flow is created.
//!
//! Every pattern computes emission instants exactly and rounds each to whole nanoseconds only when
//! it returns it, never accumulating rounded gaps: the `k`-th packet of a constant-rate segment
//! leaves at `segment_start + floor(k * size * 8e9 / rate)`, computed from `k`, so long runs do
//! not drift and flows with equal parameters send at identical instants (which is what makes
//! tie-breaking matter; see `TieBreak`). Poisson and token-bucket sources keep their position as
//! an integer count of `1 / rate` ns since `start` (bit-nanoseconds at `rate`: one frame is
//! `size * 8e9` of them, one token bit-nanosecond accrues in each) and return
//! `start + floor(position / rate)` (Poisson) or `start + ceil(position / rate)` (token bucket:
//! never before the bucket holds the frame's tokens). So a source's long-run rate is exact
//! whatever its mean gap (a Poisson source whose mean gap is under 1 ns still advances on
//! average), and a run whose durations are `k` times longer and rates `k` times slower
//! (`[sim] dilation`, with `k` dividing the rates) draws the same gaps in the same units: its
//! instants divided by `k` are the undilated ones to within 1 ns (2 ns with a sender `jitter`,
//! one draw scaled to its bound: see [`Source::with_jitter`]).
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

    /// The TCP settings of a `tcp-bulk` or `tcp-rr` flow, to change.
    pub fn tcp_mut(&mut self) -> Option<&mut TcpSpec> {
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

/// One frame of `size` bytes in bit-nanoseconds (`size * 8e9`): the frame's tokens, and its
/// transmission time at any rate in units of `1 / rate` ns.
fn frame_units(size: u32) -> u128 {
    u128::from(size) * 8 * 1_000_000_000
}

/// The instant `units` of `1 / rate` ns after `start`, rounded to whole nanoseconds as asked;
/// `None` for a zero rate or past the end of time.
fn after_units(start: Time, units: u128, rate: Rate, rounding: Rounding) -> Option<Time> {
    let ns = mul_div(units, 1, u128::from(rate.bps()), rounding)?;
    start.checked_add_duration(Duration::from_nanos(ns))
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
    // poisson / token bucket: the exact position of the last packet, in units of `1 / rate` ns
    // since `start` (rounded to ns only when returned), and the bucket's tokens then (bit-ns)
    units: u128,
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
            TrafficSpec::TokenBucket { burst, .. } => burst.bits().saturating_mul(1_000_000_000),
            _ => 0,
        };
        Source {
            spec,
            size,
            start,
            k: 0,
            period: 0,
            segment: 0,
            units: 0,
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
        // One 64-bit draw scaled to `[0, jitter]` (multiply and shift: uniform to within
        // `(jitter + 1) / 2^64`): a bound `k` times longer draws `k` times the delay, to within
        // `k` ns, so a dilated run's delay is the undilated one to within 1 ns.
        let r: u64 = rng.gen();
        let late =
            Duration::from_nanos(((u128::from(r) * (u128::from(self.jitter) + 1)) >> 64) as u64);
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
                // An exponential gap whose mean is exactly one frame time, `size * 8e9` units of
                // `1 / rate` ns (exact in f64), to the nearest unit. The running sum is rounded to
                // ns only when returned: the long-run rate is exact and time advances even when
                // the mean gap is under 1 ns. One draw per packet, as before.
                let u: f64 = rng.gen_range(f64::MIN_POSITIVE..1.0);
                let gap = (-u.ln() * f64::from(size) * 8e9).round() as u128;
                self.units = self.units.checked_add(gap)?;
                self.k += 1;
                after_units(self.start, self.units, rate, Rounding::Down)
            }
            TrafficSpec::TokenBucket { rate, burst, peak, release } => {
                // Tokens in bit-ns; one accrues in each unit of `1 / rate` ns, so the bucket's
                // clock and its tokens stay exact together.
                let cap = burst.bits().saturating_mul(1_000_000_000);
                let need = frame_units(size);
                if need > cap {
                    return None; // the bucket can never pay for a frame (`validate` refuses it)
                }
                // the tokens to wait for once the bucket cannot pay for a frame
                let want = match release {
                    Release::Frame => need,
                    Release::Burst => cap / need * need,
                };
                // frames of a burst are spaced by the peak rate: `need / peak` ns, in units of
                // `1 / rate` ns, rounded up (never above the peak)
                let gap = match peak {
                    Some(p) if self.k > 0 => u128::from(mul_div(
                        need,
                        u128::from(rate.bps()),
                        u128::from(p.bps()),
                        Rounding::Up,
                    )?),
                    _ => 0,
                };
                let mut units = self.units.checked_add(gap)?;
                let mut tokens = self.tokens.saturating_add(gap).min(cap);
                if tokens < need {
                    // wait exactly until the bucket holds `want` (want >= need > tokens)
                    units = units.checked_add(want - tokens)?;
                    tokens = want;
                }
                self.tokens = tokens - need;
                self.units = units;
                self.k += 1;
                after_units(self.start, units, rate, Rounding::Up)
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

    /// Instants of `spec` from `start` until `end` ns (at most `max` of them), seed `seed`.
    fn until(
        spec: TrafficSpec,
        size: u32,
        start: u64,
        end: u64,
        max: usize,
        seed: u64,
    ) -> Vec<u64> {
        let mut s = Source::new(spec, size, Time::from_nanos(start));
        let mut rng = ChaCha8Rng::seed_from_u64(seed);
        (0..max)
            .map_while(|_| s.next_emission(&mut rng))
            .map(Time::as_nanos)
            .take_while(|&t| t < end)
            .collect()
    }

    /// `n` within `sigmas` standard deviations of a Poisson count of mean `mean`.
    fn within_sigmas(n: usize, mean: f64, sigmas: f64) -> bool {
        (n as f64 - mean).abs() <= sigmas * mean.sqrt()
    }

    #[test]
    fn poisson_rate_is_exact_when_the_mean_gap_is_fractional() {
        // 64 B at 40 Gbit/s: a mean gap of 12.8 ns (truncated to 12 ns, 6.7 % too many packets)
        let spec = TrafficSpec::Poisson { rate: Rate::from_gbps(40) };
        for seed in [1, 2, 3] {
            let n = until(spec.clone(), 64, 0, 10_000_000, 2_000_000, seed).len();
            assert!(within_sigmas(n, 781_250.0, 4.0), "seed {seed}: {n} packets in 10 ms");
        }
        // 1500 B at 7 Mbit/s: 1,714,285.7 ns
        let spec = TrafficSpec::Poisson { rate: Rate::from_mbps(7) };
        let n = until(spec, 1500, 0, 100_000_000_000, 200_000, 1).len();
        assert!(within_sigmas(n, 58_333.3, 4.0), "{n} packets in 100 s");
    }

    #[test]
    fn poisson_advances_when_the_mean_gap_is_under_a_nanosecond() {
        // 64 B at 10 Tbit/s: a mean gap of 0.0512 ns (was 0 ns: every packet at `start`)
        let spec = TrafficSpec::Poisson { rate: Rate::from_gbps(10_000) };
        let t = until(spec, 64, 5_000, 15_000, 1_000_000, 1);
        assert!(t.len() < 1_000_000, "time does not advance: {} packets", t.len());
        assert!(within_sigmas(t.len(), 195_312.5, 4.0), "{} packets in 10 us", t.len());
        assert!(t[0] >= 5_000 && t.windows(2).all(|w| w[0] <= w[1]));
    }

    /// The instants of `spec` (rates in bit/s, durations in ns) with every rate `k` times
    /// slower and every duration `k` times longer, divided by `k` to the nearest ns, are those
    /// of `spec` within 1 ns (what `[sim] dilation` promises).
    fn same_when_dilated(spec: &TrafficSpec, dilated: &TrafficSpec, k: u64, size: u32, n: usize) {
        let start = 1_234_567;
        let a = until(spec.clone(), size, start, u64::MAX, n, 7);
        let b = until(dilated.clone(), size, start * k, u64::MAX, n, 7);
        assert_eq!(a.len(), n);
        assert_eq!(b.len(), n);
        for (i, (&x, &y)) in a.iter().zip(&b).enumerate() {
            let y = y / k + u64::from(2 * (y % k) >= k);
            assert!(x.abs_diff(y) <= 1, "{spec:?} packet {i}: {x} ns, {y} ns dilated x{k}");
        }
    }

    #[test]
    fn a_dilated_source_sends_at_the_same_instants_slower() {
        let mbps = Rate::from_mbps;
        let kbps = |r: u64| Rate::from_bps(r * 1000);
        // the demo's backup flow (1500 B at 88 Mbit/s: 136,363.6 ns mean gap), dilated 10x
        let pois = |rate| TrafficSpec::Poisson { rate };
        same_when_dilated(&pois(mbps(88)), &pois(kbps(8_800)), 10, 1500, 20_000);
        same_when_dilated(&pois(Rate::from_gbps(40)), &pois(Rate::from_gbps(1)), 40, 64, 200_000);
        // a bucket of one frame at a rate whose frame time is fractional (each wait rounded up
        // to ns lost up to 1 ns of tokens), and one with a peak rate of 5.12 ns per frame
        let tb = |rate, burst, peak, release| TrafficSpec::TokenBucket {
            rate,
            burst: Bytes::new(burst),
            peak,
            release,
        };
        same_when_dilated(
            &tb(mbps(7), 1000, None, Release::Frame),
            &tb(kbps(700), 1000, None, Release::Frame),
            10,
            1000,
            5_000,
        );
        let fast = tb(Rate::from_gbps(3), 64_000, Some(Rate::from_gbps(100)), Release::Burst);
        let slow = tb(mbps(300), 64_000, Some(Rate::from_gbps(10)), Release::Burst);
        same_when_dilated(&fast, &slow, 10, 64, 20_000);
        // cbr and on/off compute each instant from the packet's index
        same_when_dilated(
            &TrafficSpec::Cbr { rate: mbps(7) },
            &TrafficSpec::Cbr { rate: kbps(700) },
            10,
            1000,
            5_000,
        );
        let onoff = |k: u64| TrafficSpec::Onoff {
            base_rate: kbps(3_000 / k),
            burst_rate: kbps(70_000 / k),
            period: Duration::from_micros(10_000 * k),
            burst: Duration::from_micros(1_000 * k),
            burst_at: Some(Duration::from_micros(3_000 * k)),
        };
        same_when_dilated(&onoff(1), &onoff(10), 10, 1200, 5_000);
    }

    #[test]
    fn a_token_bucket_keeps_its_rate_when_frame_times_are_fractional() {
        // a bucket of one 1000 B frame at 7 Mbit/s: frame n at ceil(n * 1,142,857.14 ns)
        // (each wait rounded up to ns lost the tokens beyond the bucket: 1,142,858 ns apart)
        let spec = TrafficSpec::TokenBucket {
            rate: Rate::from_mbps(7),
            burst: Bytes::new(1000),
            peak: None,
            release: Release::Frame,
        };
        let t = times(spec, 1000, 7001);
        for (n, &t) in t.iter().enumerate() {
            assert_eq!(u128::from(t), (n as u128 * 8_000_000_000_000).div_ceil(7_000_000));
        }
        assert_eq!(t[7000], 8_000_000_000, "7000 frames in 8 s");
        // the frames of a burst at a peak of 100 Gbit/s: 5.12 ns apart (were 5 ns)
        let spec = TrafficSpec::TokenBucket {
            rate: Rate::from_gbps(1),
            burst: Bytes::new(64_000),
            peak: Some(Rate::from_gbps(100)),
            release: Release::Frame,
        };
        let t = times(spec, 64, 1000);
        for (j, &t) in t.iter().enumerate() {
            assert_eq!(t, (j as u64 * 512).div_ceil(100), "frame {j}");
        }
    }

    #[test]
    fn a_source_that_cannot_send_says_so_instead_of_panicking() {
        // what `validate` refuses, built directly: no frame fits the bucket, a zero rate
        let mut rng = ChaCha8Rng::seed_from_u64(1);
        for spec in [
            TrafficSpec::TokenBucket {
                rate: Rate::from_mbps(1),
                burst: Bytes::new(10),
                peak: None,
                release: Release::Burst,
            },
            TrafficSpec::TokenBucket {
                rate: Rate::ZERO,
                burst: Bytes::new(1000),
                peak: Some(Rate::ZERO),
                release: Release::Frame,
            },
            TrafficSpec::Poisson { rate: Rate::ZERO },
        ] {
            let mut s = Source::new(spec.clone(), 100, Time::ZERO);
            let t: Vec<_> = (0..3).map_while(|_| s.next_emission(&mut rng)).collect();
            assert!(t.len() <= 1, "{spec:?}: {t:?}");
        }
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
