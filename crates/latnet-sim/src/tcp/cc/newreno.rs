//! NewReno (RFC 5681, RFC 6582).
//!
//! * Slow start while `cwnd < ssthresh`: the window grows by the bytes acknowledged
//!   (RFC 3465 byte counting; with delayed ACKs each ACK covers two segments).
//! * Congestion avoidance: one MSS per window of acknowledged bytes (RFC 5681 section 3.1).
//! * Loss (entering fast recovery, RFC 5681 equation 4): `ssthresh = max(FlightSize / 2,
//!   2 * MSS)`; the sender then reduces the window to ssthresh by PRR and NewReno/SACK recovery
//!   (RFC 6582 / RFC 6675) retransmits.
//! * Classic ECN (RFC 3168 section 6.1.2): the same reduction as a loss, once per window.
//! * RTO (RFC 5681 section 3.1): `ssthresh = max(FlightSize / 2, 2 * MSS)` (kept if this loss
//!   episode already reduced it, as Linux), `cwnd = 1 MSS`.

use super::{reno_grow, AckSample, CongestionControl};
use latnet_units::Time;

/// NewReno window state.
#[derive(Debug, Clone)]
pub struct NewReno {
    mss: u64,
    cwnd: u64,
    ssthresh: u64,
    acc: u64,
}

impl NewReno {
    /// Initial window `init_cwnd` bytes, no ssthresh.
    pub fn new(mss: u64, init_cwnd: u64) -> Self {
        NewReno { mss, cwnd: init_cwnd, ssthresh: u64::MAX, acc: 0 }
    }

    fn halve(&mut self, flight: u64) {
        self.ssthresh = (flight / 2).max(2 * self.mss);
    }
}

impl CongestionControl for NewReno {
    fn cwnd(&self) -> u64 {
        self.cwnd
    }
    fn ssthresh(&self) -> u64 {
        self.ssthresh
    }
    fn set_cwnd(&mut self, cwnd: u64) {
        self.cwnd = cwnd.max(self.mss);
    }
    fn on_ack(&mut self, _now: Time, s: &AckSample) {
        if !s.in_reduction && !s.app_limited {
            reno_grow(&mut self.cwnd, self.ssthresh, &mut self.acc, s.acked, self.mss);
        }
    }
    fn on_ecn(&mut self, _now: Time, s: &AckSample) {
        self.halve(s.prior_in_flight);
    }
    fn on_loss(&mut self, _now: Time, s: &AckSample) {
        self.halve(s.prior_in_flight);
    }
    fn on_rto(&mut self, _now: Time, in_flight: u64, reduced: bool) {
        if !reduced {
            self.halve(in_flight);
        }
        self.cwnd = self.mss;
        self.acc = 0;
    }
}

#[cfg(test)]
mod tests {
    use super::super::testutil::{ack, ack_window};
    use super::*;

    const MSS: u64 = 1448;

    #[test]
    fn slow_start_doubles_per_rtt_then_linear() {
        let mut c = NewReno::new(MSS, 10 * MSS);
        ack_window(&mut c, Time::ZERO, MSS, 10);
        assert_eq!(c.cwnd(), 20 * MSS, "slow start doubles per window");
        c.ssthresh = 20 * MSS;
        ack_window(&mut c, Time::ZERO, MSS, 10);
        assert_eq!(c.cwnd(), 21 * MSS, "congestion avoidance: +1 MSS per window");
    }

    #[test]
    fn window_after_loss_is_half_the_flight() {
        let mut c = NewReno::new(MSS, 40 * MSS);
        let s = AckSample { prior_in_flight: 40 * MSS, ..ack(MSS, 10) };
        c.on_loss(Time::ZERO, &s);
        assert_eq!(c.ssthresh(), 20 * MSS);
        c.on_recovery_exit(Time::ZERO);
        assert_eq!(c.cwnd(), 20 * MSS, "after recovery cwnd = ssthresh = flight / 2");
        // no growth during a reduction
        c.on_ack(Time::ZERO, &AckSample { in_reduction: true, ..ack(MSS, 10) });
        assert_eq!(c.cwnd(), 20 * MSS);
        // classic ECN: the same halving
        let mut e = NewReno::new(MSS, 40 * MSS);
        e.on_ecn(Time::ZERO, &s);
        assert_eq!(e.ssthresh(), 20 * MSS);
        // floor of two segments
        let mut f = NewReno::new(MSS, 2 * MSS);
        f.on_loss(Time::ZERO, &AckSample { prior_in_flight: 2 * MSS, ..ack(MSS, 10) });
        assert_eq!(f.ssthresh(), 2 * MSS);
    }

    #[test]
    fn rto_collapses_to_one_segment() {
        let mut c = NewReno::new(MSS, 30 * MSS);
        c.on_rto(Time::ZERO, 30 * MSS, false);
        assert_eq!((c.cwnd(), c.ssthresh()), (MSS, 15 * MSS));
        assert!(c.in_slow_start());
        // a timeout inside the same loss episode keeps the ssthresh set at its start
        c.cwnd = 8 * MSS;
        c.on_rto(Time::ZERO, 8 * MSS, true);
        assert_eq!((c.cwnd(), c.ssthresh()), (MSS, 15 * MSS));
    }
}
