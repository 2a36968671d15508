//! Congestion controls: one small trait, a closed set dispatched through [`AnyCc`].
//!
//! The sender ([`super::sender`]) owns loss detection, recovery (SACK-based with proportional
//! rate reduction), ECN feedback and timers; a congestion control only decides windows and,
//! optionally, a pacing rate. Windows are in bytes; every quantity is an integer (no floating
//! point in simulator state: ratios are fixed-point, see each module).
//!
//! The sender calls, in this order for each acknowledgment:
//!
//! 1. [`CongestionControl::on_ack`] with an [`AckSample`] (newly delivered bytes, ECN-echo
//!    bytes, RTT sample, delivery-rate sample, whether the sender is in a window reduction);
//! 2. on the first ECN echo of a window, [`CongestionControl::on_ecn`] (classic ECN, DCTCP,
//!    Prague: the reduction happens here);
//! 3. on the first loss of a window, [`CongestionControl::on_loss`];
//! 4. when a reduction (loss recovery or ECN CWR) ends, [`CongestionControl::on_recovery_exit`].
//!
//! and [`CongestionControl::on_rto`] when the retransmission timer expires. During a
//! reduction the sender sets the window itself by proportional rate reduction (RFC 6937) from
//! [`CongestionControl::ssthresh`], unless [`CongestionControl::uses_prr`] is false (BBR).
//!
//! | module | algorithm | source |
//! |---|---|---|
//! | [`newreno`] | slow start + congestion avoidance with byte counting, halving | RFC 5681, RFC 3465, RFC 6582 |
//! | [`cubic`] | CUBIC | RFC 9438 |
//! | [`hystart`] | HyStart, CUBIC's optional slow-start exit | Linux `tcp_cubic.c` (5.8 on) |
//! | [`dctcp`] | DCTCP | RFC 8257 |
//! | [`prague`] | Prague-like: DCTCP response, ECT(1), pacing, RTT independence | draft-briscoe-iccrg-prague-congestion-control-03 |
//! | [`bbr`] | BBR v1 model, optional BBRv2-style ECN response | draft-cardwell-iccrg-bbr-congestion-control-00, Cardwell et al. ACM Queue 2016 |

pub mod bbr;
pub mod cubic;
pub mod dctcp;
pub mod hystart;
pub mod newreno;
pub mod prague;

use latnet_units::{Duration, Rate, Time};
use serde::Deserialize;

/// A delivery-rate sample (draft-cheng-iccrg-delivery-rate-estimation).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct RateSample {
    /// Bytes delivered over the sample's interval.
    pub delivered: u64,
    /// The interval (max of send and ack elapsed times).
    pub interval: Duration,
    /// The delivery rate, `delivered * 8 / interval`.
    pub rate: Rate,
    /// The connection's delivered count when the sampled packet was sent.
    pub prior_delivered: u64,
    /// True if the sample was taken while the application limited the sender.
    pub app_limited: bool,
}

/// What one acknowledgment told the sender.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct AckSample {
    /// Bytes newly delivered (cumulatively acknowledged or SACKed for the first time).
    pub acked: u64,
    /// Of those, bytes acknowledged by an ACK with ECN-Echo set.
    pub ece_acked: u64,
    /// The ACK carried ECN-Echo.
    pub ece: bool,
    /// RTT sample from this ACK (never from a retransmitted segment).
    pub rtt: Option<Duration>,
    /// Smoothed RTT after this ACK.
    pub srtt: Option<Duration>,
    /// Minimum RTT seen.
    pub min_rtt: Option<Duration>,
    /// Bytes in flight before this ACK.
    pub prior_in_flight: u64,
    /// Bytes in flight after this ACK.
    pub in_flight: u64,
    /// Total bytes delivered so far.
    pub delivered: u64,
    /// The highest sequence offset sent so far (`snd_nxt`).
    pub snd_nxt: u64,
    /// The cumulative acknowledgment (`snd_una`) after this ACK.
    pub snd_una: u64,
    /// The sender is in a window reduction (loss recovery, ECN CWR or after an RTO).
    pub in_reduction: bool,
    /// Bytes newly marked lost by this ACK.
    pub lost: u64,
    /// Delivery-rate sample, if one could be taken.
    pub rate: Option<RateSample>,
    /// The application had nothing more to send.
    pub app_limited: bool,
    /// The rate Linux would hold as the socket's pacing rate before this ACK (`gain * cwnd /
    /// srtt`, or the algorithm's own, capped by `SO_MAX_PACING_RATE`), whether or not the
    /// connection paces (HyStart reads it).
    pub pacing_rate: Option<Rate>,
    /// The connection paces (internally or under a cap).
    pub paced: bool,
}

/// The interface every congestion control implements. Windows are in bytes.
pub trait CongestionControl {
    /// Congestion window.
    fn cwnd(&self) -> u64;
    /// Slow-start threshold (`u64::MAX`: none yet).
    fn ssthresh(&self) -> u64;
    /// Set the window (the sender does during reductions).
    fn set_cwnd(&mut self, cwnd: u64);
    /// An acknowledgment delivered data; grow the window unless `s.in_reduction`.
    fn on_ack(&mut self, now: Time, s: &AckSample);
    /// First ECN echo of a window: set ssthresh (the sender then reduces the window).
    fn on_ecn(&mut self, _now: Time, _s: &AckSample) {}
    /// First loss of a window: set ssthresh.
    fn on_loss(&mut self, now: Time, s: &AckSample);
    /// The retransmission timer expired: set ssthresh (unless `reduced`: it was already set in
    /// this loss episode, as Linux's `tcp_enter_loss` keeps it) and collapse the window.
    fn on_rto(&mut self, now: Time, in_flight: u64, reduced: bool);
    /// A reduction ended (`snd_una` passed the recovery point).
    fn on_recovery_exit(&mut self, _now: Time) {
        let s = self.ssthresh();
        if s != u64::MAX {
            self.set_cwnd(s);
        }
    }
    /// A data segment of `bytes` was sent with `in_flight` bytes now outstanding.
    fn on_sent(&mut self, _now: Time, _bytes: u64, _in_flight: u64) {}
    /// A pacing rate of the algorithm's own (BBR); `None` to use `gain * cwnd / srtt`.
    fn pacing_rate(&self) -> Option<Rate> {
        None
    }
    /// True in slow start.
    fn in_slow_start(&self) -> bool {
        self.cwnd() < self.ssthresh()
    }
    /// True if the sender reduces the window by PRR during recovery (false: the algorithm
    /// handles recovery itself).
    fn uses_prr(&self) -> bool {
        true
    }
    /// Which HyStart detector ended slow start, if HyStart runs and one did (CUBIC).
    fn hystart_exit(&self) -> Option<hystart::Exit> {
        None
    }
    /// True if the algorithm reads [`AckSample::pacing_rate`] (HyStart); the sender works it
    /// out per ACK only then.
    fn reads_pacing_rate(&self) -> bool {
        false
    }
    /// True if the algorithm reacts to ECN per packet (DCTCP-style feedback wanted from the
    /// receiver) rather than once per window.
    fn wants_accurate_ecn(&self) -> bool {
        false
    }
}

/// Which algorithm, as written in scenario files (`cc = "cubic"`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum CcKind {
    /// NewReno.
    Newreno,
    /// CUBIC.
    #[default]
    Cubic,
    /// DCTCP.
    Dctcp,
    /// Prague-like.
    Prague,
    /// BBR-like (v1).
    Bbr,
}

impl CcKind {
    /// Stable name.
    pub fn as_str(self) -> &'static str {
        match self {
            CcKind::Newreno => "newreno",
            CcKind::Cubic => "cubic",
            CcKind::Dctcp => "dctcp",
            CcKind::Prague => "prague",
            CcKind::Bbr => "bbr",
        }
    }
}

/// Parameters of a congestion control, beyond its kind.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CcParams {
    /// Maximum segment size (bytes).
    pub mss: u64,
    /// Initial window (bytes).
    pub init_cwnd: u64,
    /// Prague: additive increase independent of the RTT below this target (`None`: off).
    pub rtt_target: Option<Duration>,
    /// BBR: respond to ECN as BBRv2 does.
    pub bbr_ecn: bool,
    /// CUBIC: end slow start by HyStart.
    pub hystart: bool,
    /// Seed for algorithms that randomize (BBR's initial gain-cycle phase).
    pub seed: u64,
}

/// The closed set of congestion controls.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub enum AnyCc {
    /// See [`newreno::NewReno`].
    NewReno(newreno::NewReno),
    /// See [`cubic::Cubic`].
    Cubic(cubic::Cubic),
    /// See [`dctcp::Dctcp`].
    Dctcp(dctcp::Dctcp),
    /// See [`prague::Prague`].
    Prague(prague::Prague),
    /// See [`bbr::Bbr`].
    Bbr(Box<bbr::Bbr>),
}

impl AnyCc {
    /// Build the algorithm.
    pub fn new(kind: CcKind, p: &CcParams) -> AnyCc {
        match kind {
            CcKind::Newreno => AnyCc::NewReno(newreno::NewReno::new(p.mss, p.init_cwnd)),
            CcKind::Cubic => {
                let c = cubic::Cubic::new(p.mss, p.init_cwnd);
                AnyCc::Cubic(if p.hystart { c.with_hystart() } else { c })
            }
            CcKind::Dctcp => AnyCc::Dctcp(dctcp::Dctcp::new(p.mss, p.init_cwnd)),
            CcKind::Prague => AnyCc::Prague(prague::Prague::new(p.mss, p.init_cwnd, p.rtt_target)),
            CcKind::Bbr => AnyCc::Bbr(Box::new(bbr::Bbr::new(p))),
        }
    }
}

macro_rules! dispatch {
    ($self:ident, $c:ident => $e:expr) => {
        match $self {
            AnyCc::NewReno($c) => $e,
            AnyCc::Cubic($c) => $e,
            AnyCc::Dctcp($c) => $e,
            AnyCc::Prague($c) => $e,
            AnyCc::Bbr($c) => $e,
        }
    };
}

impl CongestionControl for AnyCc {
    fn cwnd(&self) -> u64 {
        dispatch!(self, c => c.cwnd())
    }
    fn ssthresh(&self) -> u64 {
        dispatch!(self, c => c.ssthresh())
    }
    fn set_cwnd(&mut self, cwnd: u64) {
        dispatch!(self, c => c.set_cwnd(cwnd))
    }
    fn on_ack(&mut self, now: Time, s: &AckSample) {
        dispatch!(self, c => c.on_ack(now, s))
    }
    fn on_ecn(&mut self, now: Time, s: &AckSample) {
        dispatch!(self, c => c.on_ecn(now, s))
    }
    fn on_loss(&mut self, now: Time, s: &AckSample) {
        dispatch!(self, c => c.on_loss(now, s))
    }
    fn on_rto(&mut self, now: Time, in_flight: u64, reduced: bool) {
        dispatch!(self, c => c.on_rto(now, in_flight, reduced))
    }
    fn on_recovery_exit(&mut self, now: Time) {
        dispatch!(self, c => c.on_recovery_exit(now))
    }
    fn on_sent(&mut self, now: Time, bytes: u64, in_flight: u64) {
        dispatch!(self, c => c.on_sent(now, bytes, in_flight))
    }
    fn pacing_rate(&self) -> Option<Rate> {
        dispatch!(self, c => c.pacing_rate())
    }
    fn in_slow_start(&self) -> bool {
        dispatch!(self, c => c.in_slow_start())
    }
    fn uses_prr(&self) -> bool {
        dispatch!(self, c => c.uses_prr())
    }
    fn wants_accurate_ecn(&self) -> bool {
        dispatch!(self, c => c.wants_accurate_ecn())
    }
    fn hystart_exit(&self) -> Option<hystart::Exit> {
        dispatch!(self, c => c.hystart_exit())
    }
    fn reads_pacing_rate(&self) -> bool {
        dispatch!(self, c => c.reads_pacing_rate())
    }
}

/// Reno-style window growth shared by NewReno, DCTCP and Prague: slow start by the bytes
/// acknowledged (RFC 3465 with no limit per ACK, as Linux and ns-3 count acknowledged
/// segments), then one MSS per window of acknowledged bytes (RFC 5681 section 3.1, byte
/// counting). `acc` carries the bytes acknowledged toward the next increase.
pub(crate) fn reno_grow(cwnd: &mut u64, ssthresh: u64, acc: &mut u64, acked: u64, mss: u64) {
    let mut acked = acked;
    if *cwnd < ssthresh {
        let room = ssthresh - *cwnd;
        let inc = acked.min(room);
        *cwnd += inc;
        acked -= inc;
        if acked == 0 {
            return;
        }
    }
    *acc += acked;
    if *acc >= *cwnd {
        let n = *acc / *cwnd;
        *acc -= n * *cwnd;
        *cwnd += n * mss;
    }
}

#[cfg(test)]
pub(crate) mod testutil {
    use super::*;

    /// An ACK of `acked` bytes with an RTT sample, outside any reduction.
    pub fn ack(acked: u64, rtt_ms: u64) -> AckSample {
        let r = Duration::from_millis(rtt_ms);
        AckSample { acked, rtt: Some(r), srtt: Some(r), min_rtt: Some(r), ..AckSample::default() }
    }

    /// Acknowledge one full window in MSS-sized ACKs (one per segment).
    pub fn ack_window(cc: &mut impl CongestionControl, now: Time, mss: u64, rtt_ms: u64) {
        let n = cc.cwnd() / mss;
        for _ in 0..n {
            cc.on_ack(now, &ack(mss, rtt_ms));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reno_growth_slow_start_then_one_mss_per_window() {
        let mss = 1000;
        let (mut cwnd, mut acc) = (10_000u64, 0u64);
        // slow start: doubles per window of ACKs, capped at ssthresh
        for _ in 0..10 {
            reno_grow(&mut cwnd, 15_000, &mut acc, mss, mss);
        }
        assert_eq!(cwnd, 15_000, "5 ACKs in slow start to 15 kB, 5 kB toward the next MSS");
        assert_eq!(acc, 5_000);
        for _ in 0..10 {
            reno_grow(&mut cwnd, 15_000, &mut acc, mss, mss);
        }
        assert_eq!(cwnd, 16_000, "one MSS per cwnd of acknowledged bytes");
    }
}
