//! Round-trip time estimation and the retransmission timeout (RFC 6298).
//!
//! * First sample `R`: `SRTT = R`, `RTTVAR = R / 2` (section 2.2).
//! * Later samples: `RTTVAR = 3/4 RTTVAR + 1/4 |SRTT - R|`, `SRTT = 7/8 SRTT + 1/8 R`
//!   (section 2.3), in integer nanoseconds.
//! * `RTO = SRTT + max(G, 4 RTTVAR)`, clamped to `[min_rto, max_rto]` (sections 2.3-2.5);
//!   before any sample, `RTO = initial_rto` (2.1). The clock granularity `G` is 1 ms, as in
//!   ns-3's default.
//! * Backoff: each expiry doubles the RTO up to `max_rto` (5.5); a new sample resets it.
//!
//! Samples are taken only from segments that were never retransmitted (Karn's algorithm,
//! section 3); the caller ensures that. The minimum RTT seen is kept too (for BBR, HyStart-like
//! logic and reports).

use latnet_units::Duration;

/// Clock granularity G of RFC 6298.
pub const GRANULARITY: Duration = Duration::from_millis(1);

/// RTT estimator and RTO calculator.
#[derive(Debug, Clone)]
pub struct RttEstimator {
    srtt: Option<Duration>,
    rttvar: Duration,
    latest: Duration,
    min: Option<Duration>,
    min_rto: Duration,
    max_rto: Duration,
    initial_rto: Duration,
    backoff: u32,
}

impl RttEstimator {
    /// An estimator with these RTO bounds.
    pub fn new(initial_rto: Duration, min_rto: Duration, max_rto: Duration) -> Self {
        RttEstimator {
            srtt: None,
            rttvar: Duration::ZERO,
            latest: Duration::ZERO,
            min: None,
            min_rto,
            max_rto,
            initial_rto,
            backoff: 0,
        }
    }

    /// Add a sample.
    pub fn sample(&mut self, r: Duration) {
        self.latest = r;
        self.min = Some(self.min.map_or(r, |m| m.min(r)));
        self.backoff = 0;
        match self.srtt {
            None => {
                self.srtt = Some(r);
                self.rttvar = Duration::from_nanos(r.as_nanos() / 2);
            }
            Some(s) => {
                let diff = s.as_nanos().abs_diff(r.as_nanos());
                self.rttvar = Duration::from_nanos((3 * self.rttvar.as_nanos() + diff) / 4);
                self.srtt = Some(Duration::from_nanos((7 * s.as_nanos() + r.as_nanos()) / 8));
            }
        }
    }

    /// Smoothed RTT, if any sample was taken.
    pub fn srtt(&self) -> Option<Duration> {
        self.srtt
    }

    /// RTT variation.
    pub fn rttvar(&self) -> Duration {
        self.rttvar
    }

    /// The latest sample.
    pub fn latest(&self) -> Duration {
        self.latest
    }

    /// The smallest sample so far.
    pub fn min_rtt(&self) -> Option<Duration> {
        self.min
    }

    /// The current RTO, backoff included.
    pub fn rto(&self) -> Duration {
        let base = match self.srtt {
            None => self.initial_rto,
            Some(s) => s + GRANULARITY.max(Duration::from_nanos(4 * self.rttvar.as_nanos())),
        };
        let base = base.max(self.min_rto).min(self.max_rto);
        base.checked_mul(1u64 << self.backoff.min(20)).unwrap_or(self.max_rto).min(self.max_rto)
    }

    /// The timer expired: double the RTO (RFC 6298 5.5).
    pub fn back_off(&mut self) {
        self.backoff = self.backoff.saturating_add(1);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ms(v: u64) -> Duration {
        Duration::from_millis(v)
    }

    #[test]
    fn follows_rfc6298() {
        let mut r = RttEstimator::new(ms(1000), ms(200), ms(60_000));
        assert_eq!(r.rto(), ms(1000), "initial RTO");
        r.sample(ms(100));
        assert_eq!(r.srtt(), Some(ms(100)));
        assert_eq!(r.rttvar(), ms(50));
        assert_eq!(r.rto(), ms(300), "100 + 4 * 50");
        r.sample(ms(200));
        // RTTVAR = 3/4 * 50 + 1/4 * 100 = 62.5; SRTT = 7/8 * 100 + 1/8 * 200 = 112.5
        assert_eq!(r.rttvar(), Duration::from_micros(62_500));
        assert_eq!(r.srtt(), Some(Duration::from_micros(112_500)));
        assert_eq!(r.rto(), Duration::from_micros(362_500));
        assert_eq!(r.min_rtt(), Some(ms(100)));
    }

    #[test]
    fn clamps_and_backs_off() {
        let mut r = RttEstimator::new(ms(1000), ms(200), ms(1500));
        r.sample(ms(10));
        assert_eq!(r.rto(), ms(200), "min RTO");
        r.back_off();
        assert_eq!(r.rto(), ms(400));
        r.back_off();
        r.back_off();
        assert_eq!(r.rto(), ms(1500), "max RTO");
        r.sample(ms(10));
        assert_eq!(r.rto(), ms(200), "a sample resets the backoff");
    }
}
