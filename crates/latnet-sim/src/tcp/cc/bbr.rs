//! BBR-like congestion control: the BBR v1 model (draft-cardwell-iccrg-bbr-congestion-
//! control-00; Cardwell et al., "BBR: Congestion-Based Congestion Control", ACM Queue 2016;
//! Linux `tcp_bbr.c`), with an optional BBRv2-style ECN response.
//!
//! Model (v1):
//!
//! * **BtlBw**: windowed maximum of delivery-rate samples over 10 round trips (section 4.1.1;
//!   application-limited samples count only if they raise the estimate).
//! * **RTprop**: minimum RTT over 10 s (4.1.2); when it expires, **ProbeRTT** caps cwnd at
//!   4 segments for 200 ms and one round (4.3.5).
//! * **Startup** with gain `2/ln 2 = 2.885` on pacing and cwnd until the bandwidth grew less
//!   than 25 % in 3 rounds (full pipe, 4.3.2); **Drain** with the inverse gain until inflight
//!   reaches the BDP (4.3.3); **ProbeBW** cycling pacing gains
//!   `[1.25, 0.75, 1, 1, 1, 1, 1, 1]` one phase per RTprop, starting in a random phase other
//!   than 0.75 (4.3.4), with cwnd gain 2.
//! * pacing rate `= gain * BtlBw * 99 %` (Linux's 1 % margin); before the pipe is full the
//!   rate only increases. cwnd `= cwnd_gain * BDP + 3 MSS`, reached by growing with each ACK.
//! * Loss recovery (Linux): packet conservation for the first round (`cwnd = inflight +
//!   acked`), then growth toward the target; the cwnd before recovery is restored at its end.
//!   After a timeout the window restarts at one segment and grows by the bytes acknowledged.
//!
//! ECN (option `bbr_ecn`, after BBRv2's `tcp_bbr2.c` defaults, reference constants of the L4S
//! seed): per round the fraction of bytes acknowledged with ECE updates
//! `ecn_alpha = (1 - 1/16) ecn_alpha + 1/16 * ce_ratio` (starting at 1, so that a flow
//! starting into a congested bottleneck responds at once); in a round with marks, the lower
//! bounds `inflight_lo` and `bw_lo` are cut by `(1 - ecn_alpha / 3)`; a round with more than 50 %
//! marked bytes sets `inflight_hi = inflight * (1 - 0.3)` and ends an up-probe; in cruising
//! phases cwnd stays below `inflight_hi * (1 - 15 %)` headroom. The lower bounds reset at each
//! up-probe. ECN is acted on only while the minimum RTT is at most 5 ms (`ecn_max_rtt`). This
//! is an approximation of BBRv2's ECN response on the v1 model, not BBRv2.
//!
//! Gains are fixed point in units of 1/256 (`BBR_UNIT`), as in Linux.

use super::{AckSample, CcParams, CongestionControl};
use latnet_units::{Duration, Rate, Rounding, Time};
use std::collections::VecDeque;

const UNIT: u64 = 256;
const HIGH_GAIN: u64 = 739; // 2.885 * 256
const DRAIN_GAIN: u64 = 88; // 256 / 2.885
const CWND_GAIN: u64 = 512;
const CYCLE: [u64; 8] = [320, 192, 256, 256, 256, 256, 256, 256];
const BW_ROUNDS: u64 = 10;
const RTPROP_WINDOW: Duration = Duration::from_secs(10);
const PROBE_RTT_TIME: Duration = Duration::from_millis(200);
const FULL_BW_ROUNDS: u32 = 3;
// BBRv2 ECN constants
const ECN_G_SHIFT: u32 = 4;
const ECN_THRESH: u64 = 512; // 50 % of 1024
const ECN_ALPHA_INIT: u64 = 1024; // 1.0, tcp_bbr2.c `bbr_ecn_alpha_init`: respond quickly
const BETA_NUM: u64 = 7; // 1 - 0.3
const HEADROOM_NUM: u64 = 85; // 1 - 15 %
const ECN_MAX_RTT: Duration = Duration::from_millis(5);

/// The BBR state machine's modes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// Exponential search for the bottleneck rate.
    Startup,
    /// Drain the queue built in startup.
    Drain,
    /// Cycle around the estimated rate.
    ProbeBw,
    /// Measure the minimum RTT with a small window.
    ProbeRtt,
}

/// BBR state.
#[derive(Debug, Clone)]
pub struct Bbr {
    mss: u64,
    init_cwnd: u64,
    cwnd: u64,
    prior_cwnd: u64,
    mode: Mode,
    bw_samples: VecDeque<(u64, Rate)>,
    rtprop: Option<Duration>,
    rtprop_stamp: Time,
    round: u64,
    next_round_delivered: u64,
    round_start: bool,
    full_bw: Rate,
    full_bw_cnt: u32,
    filled_pipe: bool,
    pacing_gain: u64,
    cwnd_gain: u64,
    pacing_rate: Option<Rate>,
    cycle_idx: usize,
    cycle_stamp: Time,
    probe_rtt_done: Option<Time>,
    probe_rtt_round_done: bool,
    in_recovery: bool,
    conservation: bool,
    rng: u64,
    // ECN (BBRv2-style)
    ecn: bool,
    ecn_alpha: u64,
    round_delivered: u64,
    round_ce: u64,
    inflight_lo: Option<u64>,
    inflight_hi: Option<u64>,
    bw_lo: Option<Rate>,
}

impl Bbr {
    /// A BBR sender with these parameters.
    pub fn new(p: &CcParams) -> Self {
        Bbr {
            mss: p.mss,
            init_cwnd: p.init_cwnd,
            cwnd: p.init_cwnd,
            prior_cwnd: p.init_cwnd,
            mode: Mode::Startup,
            bw_samples: VecDeque::new(),
            rtprop: None,
            rtprop_stamp: Time::ZERO,
            round: 0,
            next_round_delivered: 0,
            round_start: false,
            full_bw: Rate::ZERO,
            full_bw_cnt: 0,
            filled_pipe: false,
            pacing_gain: HIGH_GAIN,
            cwnd_gain: HIGH_GAIN,
            pacing_rate: None,
            cycle_idx: 0,
            cycle_stamp: Time::ZERO,
            probe_rtt_done: None,
            probe_rtt_round_done: false,
            in_recovery: false,
            conservation: false,
            rng: p.seed | 1,
            ecn: p.bbr_ecn,
            ecn_alpha: ECN_ALPHA_INIT,
            round_delivered: 0,
            round_ce: 0,
            inflight_lo: None,
            inflight_hi: None,
            bw_lo: None,
        }
    }

    /// Current mode.
    pub fn mode(&self) -> Mode {
        self.mode
    }

    /// The bottleneck bandwidth estimate.
    pub fn btlbw(&self) -> Rate {
        self.bw_samples.iter().map(|&(_, r)| r).max().unwrap_or(Rate::ZERO)
    }

    /// The minimum-RTT estimate.
    pub fn rtprop(&self) -> Option<Duration> {
        self.rtprop
    }

    fn rand(&mut self) -> u64 {
        // xorshift64*: deterministic per flow
        self.rng ^= self.rng >> 12;
        self.rng ^= self.rng << 25;
        self.rng ^= self.rng >> 27;
        self.rng.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    fn bw(&self) -> Rate {
        let b = self.btlbw();
        match self.bw_lo {
            Some(lo) => b.min(lo),
            None => b,
        }
    }

    /// `gain/256 * bw * rtprop` in bytes; the initial window before any estimate.
    fn bdp(&self, gain: u64) -> u64 {
        let (Some(rt), bw) = (self.rtprop, self.bw()) else { return self.init_cwnd };
        if bw.is_zero() {
            return self.init_cwnd;
        }
        let bytes = bw.bytes_in(rt, Rounding::Up).get();
        bytes.saturating_mul(gain) / UNIT
    }

    fn target_cwnd(&self, gain: u64) -> u64 {
        let mut c = self.bdp(gain) + 3 * self.mss;
        if self.mode == Mode::ProbeBw && self.cycle_idx == 0 {
            c += 2 * self.mss;
        }
        c
    }

    fn update_round(&mut self, s: &AckSample) {
        self.round_start = false;
        if let Some(rs) = s.rate {
            if rs.prior_delivered >= self.next_round_delivered {
                self.next_round_delivered = s.delivered;
                self.round += 1;
                self.round_start = true;
                self.conservation = false;
            }
        }
    }

    fn update_bw(&mut self, s: &AckSample) {
        let Some(rs) = s.rate else { return };
        if rs.rate.is_zero() {
            return;
        }
        if !rs.app_limited || rs.rate >= self.btlbw() {
            match self.bw_samples.back_mut() {
                Some((r, v)) if *r == self.round => *v = (*v).max(rs.rate),
                _ => self.bw_samples.push_back((self.round, rs.rate)),
            }
        }
        while self.bw_samples.front().is_some_and(|&(r, _)| r + BW_ROUNDS <= self.round) {
            self.bw_samples.pop_front();
        }
    }

    fn advance_cycle(&mut self, now: Time, s: &AckSample) {
        if self.mode != Mode::ProbeBw {
            return;
        }
        let Some(rt) = self.rtprop else { return };
        let full_length = now - self.cycle_stamp > rt;
        let gain = CYCLE[self.cycle_idx];
        let advance = if gain == UNIT {
            full_length
        } else if gain > UNIT {
            full_length && (s.lost > 0 || s.prior_in_flight >= self.bdp(gain))
        } else {
            full_length || s.prior_in_flight <= self.bdp(UNIT)
        };
        if advance {
            self.cycle_idx = (self.cycle_idx + 1) % CYCLE.len();
            self.cycle_stamp = now;
            if self.cycle_idx == 0 {
                // an up-probe starts: BBRv2 resets its lower bounds
                self.inflight_lo = None;
                self.bw_lo = None;
            }
        }
    }

    fn check_full_pipe(&mut self, s: &AckSample) {
        if self.filled_pipe || !self.round_start || s.rate.is_some_and(|r| r.app_limited) {
            return;
        }
        let bw = self.btlbw();
        if bw.bps() >= self.full_bw.bps() / 4 * 5 {
            self.full_bw = bw;
            self.full_bw_cnt = 0;
            return;
        }
        self.full_bw_cnt += 1;
        if self.full_bw_cnt >= FULL_BW_ROUNDS {
            self.filled_pipe = true;
        }
    }

    fn enter_probe_bw(&mut self, now: Time) {
        self.mode = Mode::ProbeBw;
        // a random phase, never the draining 0.75 one
        let r = (self.rand() % 7) as usize;
        self.cycle_idx = if r >= 1 { r + 1 } else { 0 };
        self.cycle_stamp = now;
    }

    fn check_drain(&mut self, now: Time, s: &AckSample) {
        if self.mode == Mode::Startup && self.filled_pipe {
            self.mode = Mode::Drain;
        }
        if self.mode == Mode::Drain && s.in_flight <= self.bdp(UNIT) {
            self.enter_probe_bw(now);
        }
    }

    fn update_min_rtt(&mut self, now: Time, s: &AckSample) {
        let expired = now > self.rtprop_stamp + RTPROP_WINDOW;
        if let Some(r) = s.rtt {
            if self.rtprop.is_none_or(|m| r <= m) || expired {
                self.rtprop = Some(r);
                self.rtprop_stamp = now;
            }
        }
        if expired && self.mode != Mode::ProbeRtt && self.rtprop.is_some() {
            self.mode = Mode::ProbeRtt;
            self.prior_cwnd = self.prior_cwnd.max(self.cwnd);
            self.probe_rtt_done = None;
        }
        if self.mode == Mode::ProbeRtt {
            match self.probe_rtt_done {
                None if s.in_flight <= 4 * self.mss => {
                    self.probe_rtt_done = Some(now + PROBE_RTT_TIME);
                    self.probe_rtt_round_done = false;
                    self.next_round_delivered = s.delivered;
                }
                None => {}
                Some(done) => {
                    if self.round_start {
                        self.probe_rtt_round_done = true;
                    }
                    if self.probe_rtt_round_done && now >= done {
                        self.rtprop_stamp = now;
                        self.cwnd = self.cwnd.max(self.prior_cwnd);
                        if self.filled_pipe {
                            self.enter_probe_bw(now);
                        } else {
                            self.mode = Mode::Startup;
                        }
                    }
                }
            }
        }
    }

    fn update_gains(&mut self) {
        (self.pacing_gain, self.cwnd_gain) = match self.mode {
            Mode::Startup => (HIGH_GAIN, HIGH_GAIN),
            Mode::Drain => (DRAIN_GAIN, HIGH_GAIN),
            Mode::ProbeBw => (CYCLE[self.cycle_idx], CWND_GAIN),
            Mode::ProbeRtt => (UNIT, UNIT),
        };
    }

    fn update_ecn(&mut self, s: &AckSample) {
        if !self.ecn {
            return;
        }
        self.round_delivered += s.acked;
        self.round_ce += s.ece_acked;
        if !self.round_start {
            return;
        }
        let eligible = self.rtprop.is_some_and(|r| r <= ECN_MAX_RTT);
        let ratio = (self.round_ce << 10) / self.round_delivered.max(1);
        self.ecn_alpha = self.ecn_alpha - (self.ecn_alpha >> ECN_G_SHIFT) + (ratio >> ECN_G_SHIFT);
        if eligible && self.round_ce > 0 {
            // cut = 1 - alpha / 3 (ecn_factor 1/3), alpha in 1/1024
            let cut = 3072 - self.ecn_alpha.min(1024);
            let lo = self.inflight_lo.unwrap_or(self.cwnd);
            self.inflight_lo = Some((lo * cut / 3072).max(4 * self.mss));
            let bw = self.bw_lo.unwrap_or(self.btlbw());
            self.bw_lo = Some(Rate::from_bps(bw.bps() / 3072 * cut));
            if ratio > ECN_THRESH {
                let hi = s.prior_in_flight.max(4 * self.mss) * BETA_NUM / 10;
                self.inflight_hi = Some(hi.max(4 * self.mss));
                if self.mode == Mode::ProbeBw && self.cycle_idx == 0 {
                    self.cycle_idx = 1; // stop probing up
                }
            }
        } else if self.mode == Mode::ProbeBw && self.cycle_idx == 0 {
            // probing up without congestion signals: raise the upper bound
            if let Some(hi) = &mut self.inflight_hi {
                *hi += self.round_delivered;
            }
        }
        self.round_delivered = 0;
        self.round_ce = 0;
    }

    fn set_pacing_rate(&mut self, s: &AckSample) {
        let bw = self.bw();
        let rate = if bw.is_zero() {
            // no estimate yet: high gain over the initial window per RTT (1 ms without one)
            let rtt = s.srtt.unwrap_or(Duration::from_millis(1));
            Rate::from_size_per(latnet_units::Bytes::new(self.cwnd), rtt, Rounding::Down)
                .map(|r| Rate::from_bps(r.bps() / UNIT * HIGH_GAIN))
        } else {
            Some(Rate::from_bps(bw.bps() / UNIT * self.pacing_gain / 100 * 99))
        };
        if let Some(r) = rate {
            if self.filled_pipe || self.pacing_rate.is_none_or(|p| r > p) {
                self.pacing_rate = Some(r);
            }
        }
    }

    fn set_cwnd(&mut self, s: &AckSample) {
        let target = self.target_cwnd(self.cwnd_gain);
        if self.in_recovery && self.conservation {
            self.cwnd = self.cwnd.max(s.in_flight + s.acked);
        } else if self.filled_pipe {
            self.cwnd = (self.cwnd + s.acked).min(target);
        } else if self.cwnd < target || s.delivered < self.init_cwnd {
            self.cwnd += s.acked;
        }
        self.cwnd = self.cwnd.max(4 * self.mss);
        if self.ecn {
            if let Some(lo) = self.inflight_lo {
                self.cwnd = self.cwnd.min(lo);
            }
            if let Some(hi) = self.inflight_hi {
                let cap = if self.mode == Mode::ProbeBw && self.cycle_idx != 0 {
                    hi * HEADROOM_NUM / 100
                } else {
                    hi
                };
                self.cwnd = self.cwnd.min(cap.max(4 * self.mss));
            }
        }
        if self.mode == Mode::ProbeRtt {
            self.cwnd = self.cwnd.min(4 * self.mss);
        }
    }
}

impl CongestionControl for Bbr {
    fn cwnd(&self) -> u64 {
        self.cwnd
    }
    fn ssthresh(&self) -> u64 {
        u64::MAX
    }
    fn set_cwnd(&mut self, cwnd: u64) {
        self.cwnd = cwnd.max(self.mss);
    }
    fn on_ack(&mut self, now: Time, s: &AckSample) {
        self.update_round(s);
        self.update_bw(s);
        self.update_ecn(s);
        self.advance_cycle(now, s);
        self.check_full_pipe(s);
        self.check_drain(now, s);
        self.update_min_rtt(now, s);
        self.update_gains();
        self.set_pacing_rate(s);
        self.set_cwnd(s);
    }
    fn on_loss(&mut self, _now: Time, s: &AckSample) {
        self.prior_cwnd = if self.in_recovery { self.prior_cwnd.max(self.cwnd) } else { self.cwnd };
        self.in_recovery = true;
        self.conservation = true;
        self.next_round_delivered = s.delivered;
        self.cwnd = (s.in_flight + s.acked).max(self.mss);
    }
    fn on_recovery_exit(&mut self, _now: Time) {
        if self.in_recovery {
            self.in_recovery = false;
            self.conservation = false;
            self.cwnd = self.cwnd.max(self.prior_cwnd);
        }
    }
    fn on_rto(&mut self, _now: Time, _in_flight: u64, _reduced: bool) {
        self.prior_cwnd = self.prior_cwnd.max(self.cwnd);
        self.in_recovery = true;
        self.conservation = false;
        self.full_bw = Rate::ZERO;
        self.full_bw_cnt = 0;
        self.round_start = true;
        self.cwnd = self.mss;
    }
    fn pacing_rate(&self) -> Option<Rate> {
        self.pacing_rate
    }
    fn in_slow_start(&self) -> bool {
        self.mode == Mode::Startup
    }
    fn uses_prr(&self) -> bool {
        false
    }
}

#[cfg(test)]
mod tests {
    use super::super::RateSample;
    use super::*;

    const MSS: u64 = 1000;

    fn params(ecn: bool) -> CcParams {
        CcParams {
            mss: MSS,
            init_cwnd: 10 * MSS,
            rtt_target: None,
            bbr_ecn: ecn,
            hystart: false,
            seed: 7,
        }
    }

    /// Feed one round per call: ACKs at `rate` with RTT `rtt`, as a steady bottleneck would.
    struct Feed {
        delivered: u64,
        now: Time,
    }

    impl Feed {
        fn round(&mut self, b: &mut Bbr, rate: Rate, rtt: Duration, ce_frac_pct: u64) {
            let per_round = rate.bytes_in(rtt, Rounding::Down).get().max(MSS);
            let n = per_round / MSS;
            let prior = self.delivered;
            for i in 0..n {
                self.delivered += MSS;
                self.now += Duration::from_nanos(rtt.as_nanos() / n);
                let ece = i * 100 < ce_frac_pct * n;
                let s = AckSample {
                    acked: MSS,
                    ece,
                    ece_acked: if ece { MSS } else { 0 },
                    rtt: Some(rtt),
                    srtt: Some(rtt),
                    min_rtt: Some(rtt),
                    prior_in_flight: b.cwnd(),
                    in_flight: b.cwnd().min(per_round),
                    delivered: self.delivered,
                    rate: Some(RateSample {
                        delivered: per_round,
                        interval: rtt,
                        rate,
                        prior_delivered: prior + i * MSS,
                        app_limited: false,
                    }),
                    ..AckSample::default()
                };
                b.on_ack(self.now, &s);
            }
        }
    }

    #[test]
    fn startup_finds_the_bottleneck_then_cycles_around_it() {
        let mut b = Bbr::new(&params(false));
        let mut f = Feed { delivered: 0, now: Time::ZERO };
        let rtt = Duration::from_millis(10);
        for _ in 0..20 {
            f.round(&mut b, Rate::from_mbps(100), rtt, 0);
        }
        assert!(b.filled_pipe, "bandwidth stopped growing: full pipe");
        assert_eq!(b.mode(), Mode::ProbeBw);
        assert_eq!(b.btlbw(), Rate::from_mbps(100));
        assert_eq!(b.rtprop(), Some(rtt));
        // cwnd converges to 2 BDP + 3 MSS (+ 2 in the up phase): BDP = 125 kB
        let bdp = 125_000;
        assert!(b.cwnd() >= 2 * bdp && b.cwnd() <= 2 * bdp + 5 * MSS, "cwnd {}", b.cwnd());
        // pacing at gain * 100 Mbit/s * 99 %
        let p = b.pacing_rate().unwrap().bps();
        assert!((74_000_000..=124_000_000).contains(&p), "pacing {p}");
    }

    #[test]
    fn loss_recovery_conserves_then_restores() {
        let mut b = Bbr::new(&params(false));
        b.cwnd = 100 * MSS;
        let s = AckSample { acked: MSS, in_flight: 60 * MSS, ..AckSample::default() };
        b.on_loss(Time::ZERO, &s);
        assert_eq!(b.cwnd(), 61 * MSS, "packet conservation: inflight + acked");
        b.on_recovery_exit(Time::ZERO);
        assert_eq!(b.cwnd(), 100 * MSS, "restored");
        b.on_rto(Time::ZERO, 0, false);
        assert_eq!(b.cwnd(), MSS);
        assert!(!b.uses_prr());
    }

    /// BBRv2 starts `ecn_alpha` at 1.0 (`bbr_ecn_alpha_init = BBR_UNIT`, "to respond quickly
    /// to congestion if the bottleneck is congested when the flow starts up"): the first
    /// round with marks (10 %) gives alpha = 1 - 1/16 + 0.1/16 and cuts `inflight_lo` by a
    /// third of that.
    #[test]
    fn first_marked_round_cuts_about_a_third() {
        let mut b = Bbr::new(&params(true));
        b.rtprop = Some(Duration::from_millis(1));
        b.cwnd = 100 * MSS;
        b.round_start = true;
        let s = AckSample { acked: 100 * MSS, ece_acked: 10 * MSS, ..AckSample::default() };
        b.update_ecn(&s);
        // ratio 102/1024; alpha = 1024 - 64 + 102 / 16 = 966
        assert_eq!(b.ecn_alpha, 966);
        assert_eq!(b.inflight_lo, Some(100 * MSS * (3072 - 966) / 3072));
    }

    #[test]
    fn ecn_option_cuts_the_window_only_when_enabled() {
        let rtt = Duration::from_millis(1);
        let run = |ecn: bool| {
            let mut b = Bbr::new(&params(ecn));
            let mut f = Feed { delivered: 0, now: Time::ZERO };
            for _ in 0..40 {
                f.round(&mut b, Rate::from_gbps(1), rtt, 0);
            }
            let before = b.cwnd();
            for _ in 0..10 {
                f.round(&mut b, Rate::from_gbps(1), rtt, 60);
            }
            (before, b.cwnd())
        };
        let (b0, a0) = run(false);
        let (b1, a1) = run(true);
        assert!(a0 >= b0 * 9 / 10, "v1 ignores ECN: {b0} -> {a0}");
        assert!(a1 < b1 / 2, "with the ECN response marks cut the window: {b1} -> {a1}");
    }
}
