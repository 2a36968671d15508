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

/// alpha = 1 in fixed point (Linux DCTCP's units, 1/1024).
pub const ALPHA_ONE: u64 = 1024;
/// `g = 1 / 2^G_SHIFT`.
pub const G_SHIFT: u32 = 4;
/// Fraction bits of alpha in TCP Prague (`tcp_prague.c` `PRAGUE_ALPHA_BITS`).
pub const PRAGUE_ALPHA_BITS: u32 = 20;

/// The fixed point the estimate is kept in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AlphaPrecision {
    /// Linux `tcp_dctcp.c`: alpha in units of 1/1024, each window adding `F * 1024 / 16`
    /// truncated, so a window with less than 1/64 of its bytes marked adds nothing, and alpha
    /// below 16/1024 drops to 0 (`min_not_zero`). Under a coupled AQM's sparse marks (1.7 % of
    /// one DCTCP flow's packets against one CUBIC flow through DualPI2 at 1 Gbit/s, 5 ms:
    /// `experiments/l4s/one-one.toml`) alpha therefore sits near 0 and DCTCP hardly reduces its
    /// window at a mark.
    Dctcp,
    /// TCP Prague (`tcp_prague.c`): alpha in units of 1/2^20 ([`PRAGUE_ALPHA_BITS`]), kept
    /// multiplied by 16 (`1/g`) so each window's remainder carries over, and `F` in the same
    /// units: a marked fraction of 1/100,000 still counts. The precision the Prague draft asks
    /// for at the low marking probabilities of an L4S AQM.
    Prague,
}

/// The DCTCP congestion estimate, shared with Prague.
#[derive(Debug, Clone)]
pub struct AlphaEstimator {
    precision: AlphaPrecision,
    /// [`AlphaPrecision::Dctcp`]: alpha in 1/1024; [`AlphaPrecision::Prague`]: 16 alpha in
    /// 1/2^20.
    alpha: u64,
    window_end: Option<u64>,
    acked: u64,
    ce_acked: u64,
}

impl Default for AlphaEstimator {
    fn default() -> Self {
        AlphaEstimator::new(AlphaPrecision::Dctcp)
    }
}

impl AlphaEstimator {
    /// An estimate starting at alpha = 1 (Linux `dctcp_alpha_on_init`, ns-3
    /// `DctcpAlphaOnInit` = 1; `tcp_prague.c` starts at its maximum too).
    pub fn new(precision: AlphaPrecision) -> Self {
        let alpha = match precision {
            AlphaPrecision::Dctcp => ALPHA_ONE,
            AlphaPrecision::Prague => Self::PRAGUE_UPSCALED_ONE,
        };
        AlphaEstimator { precision, alpha, window_end: None, acked: 0, ce_acked: 0 }
    }

    /// alpha = 1 in Prague's upscaled units.
    const PRAGUE_UPSCALED_ONE: u64 = 1 << (PRAGUE_ALPHA_BITS + G_SHIFT);

    /// alpha in units of 1/1024 (rounded down).
    pub fn alpha(&self) -> u64 {
        match self.precision {
            AlphaPrecision::Dctcp => self.alpha,
            AlphaPrecision::Prague => self.alpha >> (G_SHIFT + PRAGUE_ALPHA_BITS - 10),
        }
    }

    /// alpha as a fraction of 1, in the estimator's own precision.
    pub fn alpha_f64(&self) -> f64 {
        match self.precision {
            AlphaPrecision::Dctcp => self.alpha as f64 / ALPHA_ONE as f64,
            AlphaPrecision::Prague => self.alpha as f64 / Self::PRAGUE_UPSCALED_ONE as f64,
        }
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
        match self.precision {
            AlphaPrecision::Dctcp => {
                // Linux dctcp_update_alpha: alpha += F * 1024 / 16 - alpha / 16, where the
                // decay is min_not_zero(alpha, alpha / 16): below 16/1024 alpha drops to 0 at
                // once (it would never decay further in integers)
                let f = (self.ce_acked << (10 - G_SHIFT)) / self.acked.max(1);
                let decay = match self.alpha >> G_SHIFT {
                    0 => self.alpha,
                    d => d,
                };
                self.alpha = (self.alpha - decay + f).min(ALPHA_ONE);
            }
            AlphaPrecision::Prague => {
                // tcp_prague.c prague_update_alpha: 16 alpha += F - alpha, F in 1/2^20
                let f = u128::from(self.ce_acked) << PRAGUE_ALPHA_BITS;
                let f = u64::try_from(f / u128::from(self.acked.max(1))).unwrap_or(u64::MAX);
                let up = self.alpha - (self.alpha >> G_SHIFT);
                self.alpha = up.saturating_add(f).min(Self::PRAGUE_UPSCALED_ONE);
            }
        }
        self.acked = 0;
        self.ce_acked = 0;
        self.window_end = Some(s.snd_nxt);
        true
    }

    /// `cwnd (1 - alpha / 2)`, at least `floor`.
    pub fn reduced(&self, cwnd: u64, floor: u64) -> u64 {
        let cut = match self.precision {
            AlphaPrecision::Dctcp => (u128::from(cwnd) * u128::from(self.alpha)) >> 11,
            AlphaPrecision::Prague => {
                let alpha = u128::from(self.alpha >> G_SHIFT);
                (u128::from(cwnd) * alpha) >> (PRAGUE_ALPHA_BITS + 1)
            }
        };
        (cwnd - u64::try_from(cut).unwrap_or(cwnd)).max(floor)
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

    /// Windows of 1,000 segments with 10 marked (1 %, below Linux DCTCP's 1/64): DCTCP's
    /// estimate adds nothing and decays to 0, so it does not reduce at a mark; Prague's settles
    /// at the marked fraction and cuts the window by half of it.
    #[test]
    fn sparse_marks_are_lost_to_dctcps_precision_and_kept_by_pragues() {
        let window = |e: &mut AlphaEstimator, una: &mut u64| {
            for i in 0..1000u64 {
                *una += MSS;
                let ece_acked = if i % 100 == 0 { MSS } else { 0 };
                let (snd_una, snd_nxt) = (*una, *una + 1000 * MSS);
                e.on_ack(&AckSample {
                    acked: MSS,
                    ece_acked,
                    snd_una,
                    snd_nxt,
                    ..Default::default()
                });
            }
        };
        let (mut dctcp, mut prague) =
            (AlphaEstimator::default(), AlphaEstimator::new(AlphaPrecision::Prague));
        let (mut a, mut b) = (0, 0);
        for _ in 0..400 {
            window(&mut dctcp, &mut a);
            window(&mut prague, &mut b);
        }
        assert_eq!(dctcp.alpha(), 0);
        assert_eq!(dctcp.reduced(1000 * MSS, 2 * MSS), 1000 * MSS);
        assert!((prague.alpha_f64() - 0.01).abs() < 1e-4, "{}", prague.alpha_f64());
        assert_eq!(prague.alpha(), 10, "1/100 in 1/1024, rounded down");
        // cwnd (1 - 0.005): 5 of 1,000 segments
        let cut = 1000 * MSS - prague.reduced(1000 * MSS, 2 * MSS);
        assert!((4 * MSS..=5 * MSS).contains(&cut), "{cut}");
        // both start at 1 (halve at the first mark) and never pass it
        let fresh = AlphaEstimator::new(AlphaPrecision::Prague);
        assert_eq!((fresh.alpha(), fresh.reduced(100 * MSS, 2 * MSS)), (1024, 50 * MSS));
        let mut all = AlphaEstimator::new(AlphaPrecision::Prague);
        for i in 1..=50u64 {
            let (snd_una, snd_nxt) = (i * MSS, i * MSS);
            let s =
                AckSample { acked: MSS, ece_acked: MSS, snd_una, snd_nxt, ..Default::default() };
            all.on_ack(&s);
        }
        assert_eq!(all.alpha_f64(), 1.0);
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
