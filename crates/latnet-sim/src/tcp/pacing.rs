//! Pacing: when a connection may release its next data segment.
//!
//! Three sources of a pacing rate combine, as in Linux:
//!
//! 1. **internal** pacing (`pacing = true`): `rate = gain * cwnd / srtt`, with the gain 2 in slow
//!    start and 1.2 in congestion avoidance (Linux `tcp_pacing_ss_ratio` = 200 %,
//!    `tcp_pacing_ca_ratio` = 120 %), or the rate the congestion control asks for (BBR);
//! 2. an **external maximum** per connection, what `SO_MAX_PACING_RATE` sets: the effective
//!    rate is `min(internal, max)`, and setting a maximum turns pacing on (as in Linux, where it
//!    marks the socket as needing pacing);
//! 3. a **host-wide shaper** is not here: it is a queue at the host's egress port
//!    (`kind = "htb"`, `latnet-dataplane`), which the host fills with backpressure.
//!
//! The pacer is sans-IO: after each data segment of `L` payload bytes sent at `now` it computes
//! the release time of the next one, `max(now, release) + L * 8 / rate` (no credit accumulates
//! while idle), and [`Pacer::release`] tells the connection when it may send again. Rates are
//! payload rates, the unit of cwnd and of BBR's bandwidth estimate (ns-3 charges the payload
//! too; Linux the skb, mostly payload): a cap of 20 Mbit/s yields 20 Mbit/s of goodput and
//! 20.7 Mbit/s of 1502-byte frames.

use latnet_units::{Bytes, Duration, Rate, Rounding, Time};

/// Pacing settings of a connection.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PacingConfig {
    /// Internal pacing from cwnd / srtt (or the congestion control's own rate).
    pub enabled: bool,
    /// Gain in slow start, percent (Linux: 200).
    pub ss_gain_pct: u32,
    /// Gain in congestion avoidance, percent (Linux: 120).
    pub ca_gain_pct: u32,
    /// External cap (`SO_MAX_PACING_RATE`); `Some` turns pacing on.
    pub max_rate: Option<Rate>,
}

impl Default for PacingConfig {
    fn default() -> Self {
        PacingConfig { enabled: false, ss_gain_pct: 200, ca_gain_pct: 120, max_rate: None }
    }
}

/// The pacer of one connection.
#[derive(Debug, Clone, Default)]
pub struct Pacer {
    release: Time,
    rate: Option<Rate>,
}

impl Pacer {
    /// A pacer that releases at once.
    pub fn new() -> Self {
        Self::default()
    }

    /// The rate used for the last segment (`None`: unpaced).
    pub fn rate(&self) -> Option<Rate> {
        self.rate
    }

    /// The earliest time the next data segment may leave.
    pub fn release(&self) -> Time {
        self.release
    }

    /// True if a segment may leave at `now`.
    pub fn ready(&self, now: Time) -> bool {
        now >= self.release
    }

    /// A data segment of `bytes` (payload) left at `now` under `rate` (`None`: unpaced).
    pub fn on_sent(&mut self, now: Time, bytes: u64, rate: Option<Rate>) {
        self.rate = rate;
        match rate {
            Some(r) if !r.is_zero() => {
                let gap =
                    r.tx_time_rounded(Bytes::new(bytes), Rounding::Up).unwrap_or(Duration::MAX);
                self.release = self.release.max(now).checked_add_duration(gap).unwrap_or(Time::MAX);
            }
            _ => self.release = now,
        }
    }
}

/// The pacing rate for `cwnd` bytes per `srtt` scaled by `gain_pct` percent; `None` without an
/// RTT sample (Linux paces only once it has one).
pub fn window_rate(cwnd: u64, srtt: Option<Duration>, gain_pct: u32) -> Option<Rate> {
    let srtt = srtt.filter(|s| !s.is_zero())?;
    // cwnd * 8 * 1e9 * gain / (100 * srtt_ns)
    let bits = u128::from(cwnd) * 8 * u128::from(gain_pct);
    latnet_units::mul_div(bits, 1_000_000_000, 100 * u128::from(srtt.as_nanos()), Rounding::Down)
        .map(Rate::from_bps)
}

/// The effective rate: the internal one (if pacing is on) capped by the external maximum.
pub fn effective_rate(cfg: &PacingConfig, internal: Option<Rate>) -> Option<Rate> {
    let internal = if cfg.enabled || cfg.max_rate.is_some() { internal } else { None };
    match (internal, cfg.max_rate) {
        (Some(a), Some(m)) => Some(a.min(m)),
        (None, Some(m)) => Some(m),
        (a, None) => a,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn releases_at_the_rate_without_accumulating_credit() {
        let mut p = Pacer::new();
        let r = Some(Rate::from_mbps(12)); // 1500 B every 1 ms
        assert!(p.ready(Time::ZERO));
        p.on_sent(Time::ZERO, 1500, r);
        assert_eq!(p.release(), Time::from_nanos(1_000_000));
        p.on_sent(Time::from_nanos(1_000_000), 1500, r);
        assert_eq!(p.release(), Time::from_nanos(2_000_000));
        // idle for 10 ms: the next release is one gap after now, not a burst
        p.on_sent(Time::from_nanos(12_000_000), 1500, r);
        assert_eq!(p.release(), Time::from_nanos(13_000_000));
        p.on_sent(Time::from_nanos(13_000_000), 1500, None);
        assert!(p.ready(Time::from_nanos(13_000_000)));
    }

    #[test]
    fn window_rate_and_cap() {
        // 100 kB per 10 ms at 120 % = 96 Mbit/s
        let r = window_rate(100_000, Some(Duration::from_millis(10)), 120);
        assert_eq!(r, Some(Rate::from_mbps(96)));
        assert_eq!(window_rate(100_000, None, 120), None);
        let cap = PacingConfig { max_rate: Some(Rate::from_mbps(50)), ..PacingConfig::default() };
        assert_eq!(effective_rate(&cap, r), Some(Rate::from_mbps(50)));
        assert_eq!(effective_rate(&cap, None), Some(Rate::from_mbps(50)));
        assert_eq!(effective_rate(&PacingConfig::default(), r), None, "pacing off");
        let on = PacingConfig { enabled: true, ..PacingConfig::default() };
        assert_eq!(effective_rate(&on, r), r);
    }
}
