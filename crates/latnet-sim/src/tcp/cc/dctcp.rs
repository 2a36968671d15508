//! DCTCP (RFC 8257).
//!
//! * The receiver echoes CE per packet (RFC 8257 section 3.2: ECE mirrors the CE state of
//!   the last segments, with an immediate ACK when the state changes); the sender counts the
//!   bytes acknowledged with ECE set.
//! * Once per observation window (one RTT: until `snd_una` passes the `snd_nxt` of the window's
//!   start, section 3.3): `alpha = (1 - g) alpha + g F`, `F` = the fraction of bytes
//!   acknowledged with ECE, `g = 1/16`. Fixed point as in Linux: alpha in units of 1/1024,
//!   initial 1024 (Linux `dctcp_alpha_on_init`, ns-3 `DctcpAlphaOnInit` = 1).
//! * On the first ECE of a window (section 3.3): `ssthresh = cwnd (1 - alpha / 2)`, at least
//!   2 MSS; the sender reduces the window (CWR) and the next reduction waits a window.
//! * Loss (section 3.4): like standard TCP, `ssthresh = cwnd / 2`.
//! * Growth: Reno slow start and congestion avoidance (`super::reno_grow`).

use super::{reno_grow, AckSample, CongestionControl};
use latnet_units::Time;

/// alpha = 1 in fixed point.
pub const ALPHA_ONE: u64 = 1024;
/// `g = 1 / 2^G_SHIFT`.
pub const G_SHIFT: u32 = 4;

/// The DCTCP congestion estimate, shared with Prague.
#[derive(Debug, Clone)]
pub struct AlphaEstimator {
    alpha: u64,
    window_end: Option<u64>,
    acked: u64,
    ce_acked: u64,
}

impl Default for AlphaEstimator {
    fn default() -> Self {
        AlphaEstimator { alpha: ALPHA_ONE, window_end: None, acked: 0, ce_acked: 0 }
    }
}

impl AlphaEstimator {
    /// alpha in units of 1/1024.
    pub fn alpha(&self) -> u64 {
        self.alpha
    }

    /// Account one ACK; at the end of an observation window, update alpha. Returns true if
    /// alpha was updated.
    pub fn on_ack(&mut self, s: &AckSample) -> bool {
        self.acked += s.acked;
        self.ce_acked += s.ece_acked;
        let end = *self.window_end.get_or_insert(s.snd_nxt);
        if s.snd_una < end {
            return false;
        }
        // Linux dctcp_update_alpha: alpha += F * 1024 / 16 - alpha / 16, where the decay is
        // min_not_zero(alpha, alpha / 16): below 16/1024 alpha drops to 0 at once (it would
        // never decay further in integers)
        let f = (self.ce_acked << (10 - G_SHIFT)) / self.acked.max(1);
        let decay = match self.alpha >> G_SHIFT {
            0 => self.alpha,
            d => d,
        };
        self.alpha = (self.alpha - decay + f).min(ALPHA_ONE);
        self.acked = 0;
        self.ce_acked = 0;
        self.window_end = Some(s.snd_nxt);
        true
    }

    /// `cwnd (1 - alpha / 2)`, at least `floor`.
    pub fn reduced(&self, cwnd: u64, floor: u64) -> u64 {
        (cwnd - ((cwnd * self.alpha) >> 11)).max(floor)
    }
}

/// DCTCP window state.
#[derive(Debug, Clone)]
pub struct Dctcp {
    mss: u64,
    cwnd: u64,
    ssthresh: u64,
    acc: u64,
    est: AlphaEstimator,
}

impl Dctcp {
    /// Initial window `init_cwnd` bytes.
    pub fn new(mss: u64, init_cwnd: u64) -> Self {
        Dctcp { mss, cwnd: init_cwnd, ssthresh: u64::MAX, acc: 0, est: AlphaEstimator::default() }
    }

    /// alpha in units of 1/1024.
    pub fn alpha(&self) -> u64 {
        self.est.alpha()
    }
}

impl CongestionControl for Dctcp {
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
            reno_grow(&mut self.cwnd, self.ssthresh, &mut self.acc, s.acked, self.mss);
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
    }
    fn wants_accurate_ecn(&self) -> bool {
        true
    }
}

#[cfg(test)]
mod tests {
    use super::super::testutil::ack;
    use super::*;

    const MSS: u64 = 1000;

    #[test]
    fn alpha_is_updated_once_per_window_from_the_marked_fraction() {
        let mut e = AlphaEstimator::default();
        // A window of 10 segments (snd_nxt = 10 MSS when it starts), 3 ACKed with ECE.
        for i in 1..=10u64 {
            let s = AckSample {
                acked: MSS,
                ece_acked: if i <= 3 { MSS } else { 0 },
                snd_una: i * MSS,
                snd_nxt: 10 * MSS + (i - 1) * MSS, // each ACK releases one more segment
                ..AckSample::default()
            };
            assert_eq!(e.on_ack(&s), i == 10, "update only when the window closes");
        }
        // alpha = 1024 - 1024/16 + (0.3 * 1024)/16 = 960 + 19
        assert_eq!(e.alpha(), 979);
    }

    #[test]
    fn alpha_converges_to_the_marked_fraction() {
        let mut c = Dctcp::new(MSS, 10 * MSS);
        let mut una = 0;
        for _ in 0..300 {
            for i in 0..10u64 {
                una += MSS;
                let ece = i < 3;
                let s = AckSample {
                    ece,
                    ece_acked: if ece { MSS } else { 0 },
                    snd_una: una,
                    snd_nxt: una + 10 * MSS,
                    in_reduction: true, // keep cwnd fixed: only alpha is under test
                    ..ack(MSS, 1)
                };
                c.on_ack(Time::ZERO, &s);
            }
        }
        // 0.3 * 1024 = 307; Linux's integer update settles where alpha / 16 == 19 (<= 319).
        assert!((300..=320).contains(&c.alpha()), "alpha {}", c.alpha());
    }

    /// Without marks alpha decays to 0 (RFC 8257: `alpha = (1 - g) alpha`; Linux
    /// `alpha -= min_not_zero(alpha, alpha >> g)` takes the last 15/1024 away at once), so a
    /// flow that saw no marks for long does not reduce on its first one.
    #[test]
    fn alpha_decays_to_zero_without_marks() {
        let mut e = AlphaEstimator::default();
        let mut una = 0;
        for _ in 0..200 {
            una += 10 * MSS;
            let s = AckSample { acked: 10 * MSS, snd_una: una, snd_nxt: una, ..Default::default() };
            e.on_ack(&s);
        }
        assert_eq!(e.alpha(), 0);
        assert_eq!(e.reduced(100 * MSS, 2 * MSS), 100 * MSS);
    }

    #[test]
    fn window_after_ce_marks_is_cwnd_times_one_minus_alpha_half() {
        let mut c = Dctcp::new(MSS, 100 * MSS);
        // alpha = 1 initially: halve
        c.on_ecn(Time::ZERO, &ack(MSS, 1));
        assert_eq!(c.ssthresh(), 50 * MSS);
        // alpha = 0.25: cwnd * (1 - 0.125)
        c.est.alpha = 256;
        c.on_ecn(Time::ZERO, &ack(MSS, 1));
        assert_eq!(c.ssthresh(), 100 * MSS * 7 / 8);
        c.on_recovery_exit(Time::ZERO);
        assert_eq!(c.cwnd(), 87_500);
        // alpha = 0: no reduction at all
        c.est.alpha = 0;
        c.on_ecn(Time::ZERO, &ack(MSS, 1));
        assert_eq!(c.ssthresh(), 87_500);
    }

    #[test]
    fn loss_halves_regardless_of_alpha() {
        let mut c = Dctcp::new(MSS, 100 * MSS);
        c.est.alpha = 10;
        c.on_loss(Time::ZERO, &ack(MSS, 1));
        assert_eq!(c.ssthresh(), 50 * MSS);
        assert!(c.wants_accurate_ecn());
    }
}
