//! Prague-like congestion control (draft-briscoe-iccrg-prague-congestion-control-03; the L4S
//! requirements of RFC 9331 section 4.3).
//!
//! What this model takes from TCP Prague:
//!
//! * **Scalable ECN response** as DCTCP (section 2.3.1 of the draft): the same per-window
//!   EWMA of the marked fraction with `g = 1/16` ([`super::dctcp::AlphaEstimator`]) and, once
//!   per window with ECN-Echo, `cwnd = cwnd (1 - alpha / 2)`, but with alpha in 1/2^20 as
//!   `tcp_prague.c` keeps it ([`AlphaPrecision::Prague`]), not Linux DCTCP's 1/1024, which
//!   loses an L4S AQM's sparse marks (a window less than 1/64 marked adds nothing).
//! * **ECT(1)** on data (the L4S identifier, RFC 9331): set by the connection config
//!   (`ect = "ect1"` is Prague's default), and per-packet CE feedback from the receiver.
//! * **Pacing** (section 2.2): on by default for Prague flows (`pacing = true`).
//! * **Reduced RTT dependence** (section 2.3.3, "RTT independence"), optional: below a target
//!   RTT (`rtt_target`, 25 ms in the draft), the additive increase per RTT is scaled by
//!   `(srtt / target)^2`, so a flow's rate grows as fast as a flow with the target RTT would.
//! * **Loss** (section 2.3.4): a classic (Reno) halving.
//! * Slow start as Reno; a CE mark ends it through the reduction (ssthresh is set).
//!
//! Not modelled: AccECN's byte counters on the wire (the receiver's DCTCP-style echo carries
//! the same per-packet information to the sender here), classic-AQM detection.

use super::dctcp::{AlphaEstimator, AlphaPrecision};
use super::{reno_grow, AckSample, CongestionControl};
use latnet_units::{Duration, Time};

/// Prague window state.
#[derive(Debug, Clone)]
pub struct Prague {
    mss: u64,
    cwnd: u64,
    ssthresh: u64,
    acc: u64,
    /// Scaled additive-increase accumulator: bytes * srtt^2, compared with cwnd * target^2.
    acc_scaled: u128,
    rtt_target: Option<Duration>,
    est: AlphaEstimator,
}

impl Prague {
    /// Initial window `init_cwnd` bytes; RTT independence below `rtt_target` if set.
    pub fn new(mss: u64, init_cwnd: u64, rtt_target: Option<Duration>) -> Self {
        Prague {
            mss,
            cwnd: init_cwnd,
            ssthresh: u64::MAX,
            acc: 0,
            acc_scaled: 0,
            rtt_target,
            est: AlphaEstimator::new(AlphaPrecision::Prague),
        }
    }

    /// alpha in units of 1/1024.
    pub fn alpha(&self) -> u64 {
        self.est.alpha()
    }

    fn grow(&mut self, s: &AckSample) {
        let scaled = match (self.rtt_target, s.srtt) {
            (Some(t), Some(r)) if r < t && self.cwnd >= self.ssthresh && !r.is_zero() => {
                Some((t, r))
            }
            _ => None,
        };
        match scaled {
            None => reno_grow(&mut self.cwnd, self.ssthresh, &mut self.acc, s.acked, self.mss),
            Some((t, r)) => {
                // +1 MSS per cwnd * (target / srtt)^2 acknowledged bytes
                let r2 = u128::from(r.as_nanos()).pow(2);
                let t2 = u128::from(t.as_nanos()).pow(2);
                self.acc_scaled += u128::from(s.acked) * r2;
                let step = u128::from(self.cwnd) * t2;
                if self.acc_scaled >= step {
                    let n = self.acc_scaled / step;
                    self.acc_scaled -= n * step;
                    self.cwnd += n as u64 * self.mss;
                }
            }
        }
    }
}

impl CongestionControl for Prague {
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
        self.est.on_ack(s);
        if !s.in_reduction && !s.app_limited {
            self.grow(s);
        }
    }
    fn on_ecn(&mut self, _now: Time, _s: &AckSample) {
        self.ssthresh = self.est.reduced(self.cwnd, 2 * self.mss);
    }
    fn on_loss(&mut self, _now: Time, _s: &AckSample) {
        self.ssthresh = (self.cwnd / 2).max(2 * self.mss);
    }
    fn on_rto(&mut self, _now: Time, _in_flight: u64, reduced: bool) {
        if !reduced {
            self.ssthresh = (self.cwnd / 2).max(2 * self.mss);
        }
        self.cwnd = self.mss;
        self.acc = 0;
        self.acc_scaled = 0;
    }
    fn wants_accurate_ecn(&self) -> bool {
        true
    }
}

#[cfg(test)]
mod tests {
    use super::super::testutil::{ack, ack_window};
    use super::*;

    const MSS: u64 = 1000;

    #[test]
    fn ce_response_is_dctcp_and_loss_response_is_reno() {
        let mut p = Prague::new(MSS, 100 * MSS, None);
        p.on_ecn(Time::ZERO, &ack(MSS, 1));
        assert_eq!(p.ssthresh(), 50 * MSS, "alpha starts at 1: halve");
        let mut q = Prague::new(MSS, 100 * MSS, None);
        q.on_loss(Time::ZERO, &ack(MSS, 1));
        assert_eq!(q.ssthresh(), 50 * MSS);
        assert!(q.wants_accurate_ecn());
    }

    #[test]
    fn rtt_independence_scales_the_additive_increase() {
        // 5 ms RTT, 25 ms target: (5/25)^2 = 1/25 MSS per RTT; 25 RTTs for one MSS.
        let mut p = Prague::new(MSS, 100 * MSS, Some(Duration::from_millis(25)));
        p.ssthresh = 100 * MSS;
        for _ in 0..24 {
            ack_window(&mut p, Time::ZERO, MSS, 5);
        }
        assert_eq!(p.cwnd(), 100 * MSS);
        ack_window(&mut p, Time::ZERO, MSS, 5);
        assert_eq!(p.cwnd(), 101 * MSS);
        // at or above the target: Reno (one MSS per RTT)
        let mut q = Prague::new(MSS, 100 * MSS, Some(Duration::from_millis(25)));
        q.ssthresh = 100 * MSS;
        ack_window(&mut q, Time::ZERO, MSS, 30);
        assert_eq!(q.cwnd(), 101 * MSS);
        // the option off: Reno at any RTT
        let mut r = Prague::new(MSS, 100 * MSS, None);
        r.ssthresh = 100 * MSS;
        ack_window(&mut r, Time::ZERO, MSS, 5);
        assert_eq!(r.cwnd(), 101 * MSS);
    }
}
