//! The sending half of a TCP connection: what to send next, what an acknowledgment means,
//! when to retransmit.
//!
//! * **Transmission** ([`Sender::poll_data`]): retransmissions of segments marked lost first,
//!   then new data, while `pipe + len <= cwnd` (RFC 6675 section 5; during a window reduction
//!   cwnd is set by proportional rate reduction, RFC 6937, PRR-SSRB) and new data stays within
//!   the peer's receive window; data leaves no earlier than the pacer allows.
//! * **Acknowledgments** ([`Sender::on_ack`]): cumulative ACK and SACK blocks update the
//!   scoreboard; loss is detected by SACK (RFC 6675 IsLost, DupThresh 3) or, without SACK, by
//!   three duplicate ACKs and partial ACKs (NewReno, RFC 6582); the first loss of a window
//!   enters fast recovery until `snd_una` passes the recovery point; the first ECN-Echo of a
//!   window enters a reduction too (RFC 3168 section 6.1.2, CWR; RFC 8257 for DCTCP), and
//!   the next data segment carries CWR.
//! * **Timer** (RFC 6298): one retransmission timer, restarted when new data is
//!   acknowledged; on expiry every unSACKed segment is lost, the RTO backs off, the congestion
//!   control collapses the window ([`super::cc::CongestionControl::on_rto`]), and retransmission
//!   restarts in slow start (no PRR until the loss episode ends).
//! * **RACK** (optional, `rack_tlp`; RFC 8985 section 6 as Linux runs it, `tcp_rack_*`):
//!   the most recently sent segment the receiver has (cumulatively or by SACK) sets
//!   `RACK.xmit_ts`, `RACK.end_seq` and `RACK.rtt`; any segment not SACKed that was sent
//!   before it is lost once `now >= its send time + RACK.rtt + reo_wnd`, where `reo_wnd` is
//!   `min(min_rtt / 4, srtt)`, or, until reordering is seen (a segment sent once delivered
//!   below the highest one SACKed before it, `RACK.reord`), 0 in a loss reduction or once
//!   DupThresh segments are SACKed (no DSACK, so the window never grows as Linux's
//!   `reo_wnd_steps` does); a reordering timer fires for the rest and may start a
//!   recovery. Retransmissions are covered too (a retransmission's own send time counts), so
//!   lost retransmissions are found without the timer. Every outstanding segment is
//!   examined per ACK (Linux keeps them in send order and stops early).
//! * **Tail loss probe** (optional, with RACK; RFC 8985 section 7 as Linux 6.x runs it,
//!   `tcp_schedule_loss_probe` / `tcp_send_loss_probe` / `tcp_process_tlp_ack`): while no
//!   reduction runs and nothing is SACKed, with SACK on, a probe timeout
//!   `PTO = 2 srtt + 2 ms` (`+ min_rto` instead of 2 ms with one segment out; 1 s without an
//!   RTT sample), never later than the retransmission timer, is set after new data leaves and
//!   after each ACK that delivers data. When it fires the sender sends one new segment if
//!   the peer's window allows (ignoring cwnd), else retransmits the last segment, and
//!   restarts the retransmission timer; one probe at a time. An ACK beyond a retransmitted
//!   probe shows it repaired a loss: the window is reduced once, as a CWR (no DSACK here, so
//!   a probe that duplicated a delivered segment reads as a repair too: a window reduction
//!   Linux would skip). Linux rounds the PTO up to its timer ticks; here it is exact.
//! * **RTT** from the most recently sent segment newly acknowledged or SACKed that was never
//!   retransmitted (Karn); **delivery rate** samples per draft-cheng-iccrg-delivery-rate-
//!   estimation for BBR.
//!
//! Offsets are 64-bit stream positions (0 = first data byte); the FIN occupies one.

use super::cc::{AckSample, AnyCc, CongestionControl, RateSample};
use super::pacing::{effective_rate, window_rate, Pacer, PacingConfig};
use super::rtt::RttEstimator;
use super::scoreboard::{Scoreboard, SentSeg};
use latnet_units::{Duration, Rate, Rounding, Time};

/// Sender settings.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SenderConfig {
    /// Payload bytes per segment.
    pub mss: u32,
    /// Duplicate threshold (RFC 6675 DupThresh).
    pub dupthresh: u32,
    /// The peer accepted SACK.
    pub sack: bool,
    /// RTO before any sample.
    pub initial_rto: Duration,
    /// Lower bound of the RTO.
    pub min_rto: Duration,
    /// Upper bound of the RTO.
    pub max_rto: Duration,
    /// Pacing.
    pub pacing: PacingConfig,
    /// Detect lost retransmissions from SACKs of later data (Linux); off: only the timer.
    pub lost_retransmit: bool,
    /// RACK-TLP (RFC 8985, Linux's default): time-based loss detection and tail loss probes.
    pub rack_tlp: bool,
}

/// A data segment the sender wants on the wire.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DataSeg {
    /// First offset.
    pub start: u64,
    /// Payload bytes.
    pub len: u32,
    /// Carries the FIN.
    pub fin: bool,
    /// A retransmission.
    pub retx: bool,
    /// Carries CWR (first new data after an ECN reduction).
    pub cwr: bool,
}

/// Why the window is being reduced.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ReductionKind {
    /// Fast recovery after a loss.
    Loss,
    /// ECN congestion window reduction (CWR).
    Ecn,
    /// After a retransmission timeout (slow start, no PRR).
    Rto,
}

#[derive(Debug, Clone, Copy)]
struct Reduction {
    kind: ReductionKind,
    point: u64,
    prr_delivered: u64,
    prr_out: u64,
    recover_fs: u64,
}

/// Counters of a sender.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct SenderStats {
    /// Data segments sent (retransmissions included).
    pub segments: u64,
    /// Retransmitted segments.
    pub retransmits: u64,
    /// Retransmission timeouts.
    pub rtos: u64,
    /// Fast recoveries entered.
    pub recoveries: u64,
    /// ECN reductions entered.
    pub ecn_reductions: u64,
    /// ACKs received with ECN-Echo.
    pub ece_acks: u64,
    /// Payload bytes cumulatively acknowledged.
    pub acked_bytes: u64,
    /// Tail loss probes sent.
    pub loss_probes: u64,
    /// Losses a retransmitted probe repaired (each reduced the window once).
    pub probe_recoveries: u64,
}

/// What ended slow start the first time.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SlowStartCause {
    /// HyStart's ACK-train detector.
    HyStartTrain,
    /// HyStart's delay-increase detector.
    HyStartDelay,
    /// A loss (fast recovery).
    Loss,
    /// An ECN-Echo.
    Ecn,
    /// A retransmission timeout.
    Timeout,
}

impl SlowStartCause {
    /// Stable name, as in results.
    pub fn as_str(self) -> &'static str {
        match self {
            SlowStartCause::HyStartTrain => "hystart-train",
            SlowStartCause::HyStartDelay => "hystart-delay",
            SlowStartCause::Loss => "loss",
            SlowStartCause::Ecn => "ecn",
            SlowStartCause::Timeout => "timeout",
        }
    }
}

/// When and where slow start first ended: the first slow-start threshold.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SlowStartExit {
    /// When.
    pub at: Time,
    /// The threshold set (bytes).
    pub ssthresh: u64,
    /// Why.
    pub cause: SlowStartCause,
}

/// The sending half of a connection.
#[derive(Debug, Clone)]
pub struct Sender {
    cfg: SenderConfig,
    una: u64,
    nxt: u64,
    app_end: u64,
    fin_req: bool,
    fin_sent: bool,
    board: Scoreboard,
    snd_wnd: u64,
    reduction: Option<Reduction>,
    dupacks: u32,
    reno_sacked: u32,
    ecn: bool,
    cwr_pending: bool,
    rtt: RttEstimator,
    rto_at: Option<Time>,
    pacer: Pacer,
    cc: AnyCc,
    // delivery-rate estimation
    delivered: u64,
    delivered_time: Time,
    first_sent_time: Time,
    app_limited_mark: u64,
    // cwnd-limited tracking (RFC 7661 spirit, Linux is_cwnd_limited)
    round_end: u64,
    max_pipe: u64,
    prev_max_pipe: u64,
    last_rtt: Option<Duration>,
    stats: SenderStats,
    ss_exit: Option<SlowStartExit>,
    // tail loss probe: its timer, a probe to send, the probe outstanding (`snd_nxt` after it,
    // and whether it was a retransmission)
    pto_at: Option<Time>,
    probe_due: bool,
    tlp_high: Option<(u64, bool)>,
    // RACK: the most recently sent segment delivered (send time, end, RTT) and the
    // reordering timer
    rack: Option<(Time, u64, Duration)>,
    rack_at: Option<Time>,
    /// Whether a segment never retransmitted was delivered below one SACKed before it (RFC
    /// 8985 `RACK.reord`, Linux `reord_seen`): from then on RACK keeps its reordering window
    /// in recovery and past DupThresh SACKed segments.
    reord_seen: bool,
}

impl Sender {
    /// A sender with this congestion control.
    pub fn new(cfg: SenderConfig, cc: AnyCc) -> Self {
        Sender {
            rtt: RttEstimator::new(cfg.initial_rto, cfg.min_rto, cfg.max_rto),
            cfg,
            una: 0,
            nxt: 0,
            app_end: 0,
            fin_req: false,
            fin_sent: false,
            board: Scoreboard::default(),
            snd_wnd: 65_535,
            reduction: None,
            dupacks: 0,
            reno_sacked: 0,
            ecn: false,
            cwr_pending: false,
            rto_at: None,
            pacer: Pacer::new(),
            cc,
            delivered: 0,
            delivered_time: Time::ZERO,
            first_sent_time: Time::ZERO,
            app_limited_mark: 0,
            round_end: 0,
            max_pipe: 0,
            prev_max_pipe: 0,
            last_rtt: None,
            stats: SenderStats::default(),
            ss_exit: None,
            pto_at: None,
            probe_due: false,
            tlp_high: None,
            rack: None,
            rack_at: None,
            reord_seen: false,
        }
    }

    /// Set after the handshake: SACK permitted, ECN negotiated, peer's initial window.
    pub fn established(&mut self, sack: bool, ecn: bool, snd_wnd: u64) {
        self.cfg.sack = sack;
        self.ecn = ecn;
        self.snd_wnd = snd_wnd;
    }

    /// Add an RTT sample taken outside data transfer (the handshake).
    pub fn rtt_sample(&mut self, r: Duration) {
        self.rtt.sample(r);
        self.last_rtt = Some(r);
    }

    /// The application hands over `bytes` more (virtual) bytes.
    pub fn write(&mut self, bytes: u64) {
        self.app_end = self.app_end.saturating_add(bytes);
    }

    /// The application will write no more bytes beyond `end` (a stop: data not yet sent is
    /// abandoned).
    pub fn truncate(&mut self, end: u64) {
        self.app_end = self.app_end.min(end.max(self.nxt));
    }

    /// The application closes: a FIN follows the data.
    pub fn close(&mut self) {
        self.fin_req = true;
    }

    /// `snd_una`.
    pub fn una(&self) -> u64 {
        self.una
    }

    /// `snd_nxt` (highest offset sent).
    pub fn nxt(&self) -> u64 {
        self.nxt
    }

    /// Bytes written by the application so far.
    pub fn app_end(&self) -> u64 {
        self.app_end
    }

    /// Everything written (and the FIN, if requested) has been acknowledged.
    pub fn all_acked(&self) -> bool {
        self.board.is_empty() && self.nxt >= self.app_end && (!self.fin_req || self.fin_sent)
    }

    /// The FIN was sent and acknowledged.
    pub fn fin_acked(&self) -> bool {
        self.fin_sent && self.board.is_empty()
    }

    /// Congestion window (bytes).
    pub fn cwnd(&self) -> u64 {
        self.cc.cwnd()
    }

    /// Slow-start threshold (bytes).
    pub fn ssthresh(&self) -> u64 {
        self.cc.ssthresh()
    }

    /// Bytes in flight.
    pub fn in_flight(&self) -> u64 {
        self.pipe()
    }

    /// `pipe`: bytes in flight; without SACK each duplicate ACK counts as one segment that
    /// left the network (Linux's Reno "SACK" emulation, what makes PRR work without SACK).
    fn pipe(&self) -> u64 {
        self.board.pipe().saturating_sub(u64::from(self.reno_sacked) * u64::from(self.cfg.mss))
    }

    /// The RTT estimator.
    pub fn rtt(&self) -> &RttEstimator {
        &self.rtt
    }

    /// The congestion control.
    pub fn cc(&self) -> &AnyCc {
        &self.cc
    }

    /// Counters.
    pub fn stats(&self) -> &SenderStats {
        &self.stats
    }

    /// The current reduction, if any.
    pub fn reduction(&self) -> Option<ReductionKind> {
        self.reduction.map(|r| r.kind)
    }

    /// When and why slow start first ended (`None`: it has not; BBR keeps no threshold).
    pub fn slow_start_exit(&self) -> Option<SlowStartExit> {
        self.ss_exit
    }

    fn note_slow_start_exit(&mut self, now: Time, cause: SlowStartCause) {
        let ssthresh = self.cc.ssthresh();
        if self.ss_exit.is_none() && ssthresh != u64::MAX {
            let cause = match self.cc.hystart_exit() {
                Some(super::cc::hystart::Exit::AckTrain) => SlowStartCause::HyStartTrain,
                Some(super::cc::hystart::Exit::Delay) => SlowStartCause::HyStartDelay,
                None => cause,
            };
            self.ss_exit = Some(SlowStartExit { at: now, ssthresh, cause });
        }
    }

    /// The RTT sample of the last ACK, taken once.
    pub fn take_rtt_sample(&mut self) -> Option<Duration> {
        self.last_rtt.take()
    }

    /// Set the external pacing cap (`SO_MAX_PACING_RATE`); `None` removes it.
    pub fn set_max_pacing_rate(&mut self, r: Option<Rate>) {
        self.cfg.pacing.max_rate = r;
    }

    /// The pacing rate data is sent at now (`None`: unpaced).
    pub fn pacing_rate(&self) -> Option<Rate> {
        effective_rate(&self.cfg.pacing, self.internal_pacing_rate())
    }

    /// The congestion control's rate, or `gain * cwnd / srtt`.
    fn internal_pacing_rate(&self) -> Option<Rate> {
        self.cc.pacing_rate().or_else(|| {
            let gain = if self.cc.in_slow_start() {
                self.cfg.pacing.ss_gain_pct
            } else {
                self.cfg.pacing.ca_gain_pct
            };
            window_rate(self.cc.cwnd(), self.rtt.srtt(), gain)
        })
    }

    /// The rate Linux keeps as the socket's pacing rate whether or not it paces: the internal
    /// rate under the cap.
    fn linux_pacing_rate(&self) -> Option<Rate> {
        let internal = self.internal_pacing_rate();
        match (internal, self.cfg.pacing.max_rate) {
            (Some(a), Some(m)) => Some(a.min(m)),
            (a, m) => a.or(m),
        }
    }

    /// When the retransmission timer fires, if it runs.
    pub fn rto_deadline(&self) -> Option<Time> {
        self.rto_at
    }

    /// When the tail-loss-probe timer fires, if it runs (never after the retransmission
    /// timer).
    pub fn pto_deadline(&self) -> Option<Time> {
        self.pto_at
    }

    /// Arm the probe timer at `now` (Linux `tcp_schedule_loss_probe`) if a probe may go:
    /// probes on, SACK on, data outstanding, no reduction other than an ECN one, nothing
    /// SACKed; `from_now`: the retransmission timer's full RTO counts from now (after an ACK),
    /// else its deadline.
    fn schedule_loss_probe(&mut self, now: Time, from_now: bool) {
        let open =
            matches!(self.reduction, None | Some(Reduction { kind: ReductionKind::Ecn, .. }))
                && self.board.sacked_bytes() == 0
                && self.dupacks == 0;
        if !self.cfg.rack_tlp || !self.cfg.sack || self.board.is_empty() || !open {
            self.pto_at = None;
            return;
        }
        let timeout = match self.rtt.srtt() {
            Some(srtt) => {
                let extra =
                    if self.board.len() == 1 { self.cfg.min_rto } else { Duration::from_millis(2) };
                srtt + srtt + extra
            }
            None => Duration::from_secs(1),
        };
        let rto = if from_now { Some(now + self.rtt.rto()) } else { self.rto_at };
        let at = now + timeout;
        self.pto_at = Some(rto.map_or(at, |r| at.min(r)));
    }

    /// The probe timer fired at `now` (the caller checked the deadline): a probe goes with
    /// the next [`Self::poll_data`], unless one is outstanding.
    pub fn on_pto(&mut self, now: Time) {
        self.pto_at = None;
        if self.tlp_high.is_some() || self.board.is_empty() {
            return;
        }
        let fresh = self.has_new_data() && {
            let len = (self.app_end - self.nxt).min(u64::from(self.cfg.mss));
            self.nxt + len <= self.una + self.snd_wnd.max(1)
        };
        if fresh || self.board.mark_last_lost() {
            self.probe_due = true;
            // (the pacer does not hold a probe back)
            self.pacer = Pacer::new();
            self.rto_at = Some(now + self.rtt.rto());
        }
    }

    /// Whether reordering was seen (RFC 8985 `RACK.reord`; see [`Sender::on_ack`]).
    pub fn reordering_seen(&self) -> bool {
        self.reord_seen
    }

    /// When RACK's reordering timer fires, if it runs.
    pub fn rack_deadline(&self) -> Option<Time> {
        self.rack_at
    }

    /// RACK's loss marking at `now` (RFC 8985 6.2 step 5); arms the reordering timer for
    /// segments not yet old enough. Returns the payload bytes marked.
    fn rack_detect(&mut self, now: Time) -> u64 {
        self.rack_at = None;
        let Some((xmit, end, rtt)) = self.rack else { return 0 };
        let in_loss = matches!(self.reduction, Some(r) if r.kind != ReductionKind::Ecn);
        let sacked_segs = self.board.sacked_bytes() / u64::from(self.cfg.mss).max(1);
        let reo_wnd =
            if !self.reord_seen && (in_loss || sacked_segs >= u64::from(self.cfg.dupthresh)) {
                Duration::ZERO
            } else {
                let quarter = self
                    .rtt
                    .min_rtt()
                    .map_or(Duration::ZERO, |m| Duration::from_nanos(m.as_nanos() / 4));
                quarter.min(self.rtt.srtt().unwrap_or(Duration::ZERO))
            };
        let (marked, wait) = self.board.rack_mark(now, xmit, end, rtt + reo_wnd);
        self.rack_at = wait.map(|w| now + w);
        marked
    }

    /// RACK's reordering timer fired at `now` (the caller checked the deadline): mark what is
    /// now old enough, and start a recovery if that found a loss outside one (Linux
    /// `tcp_rack_reo_timeout`).
    pub fn on_rack_timer(&mut self, now: Time) {
        let marked = self.rack_detect(now);
        if marked == 0 || matches!(self.reduction, Some(r) if r.kind != ReductionKind::Ecn) {
            return;
        }
        let pipe = self.pipe();
        let sample = AckSample {
            prior_in_flight: pipe,
            in_flight: pipe,
            delivered: self.delivered,
            snd_nxt: self.nxt,
            snd_una: self.una,
            in_reduction: true,
            lost: marked,
            srtt: self.rtt.srtt(),
            min_rtt: self.rtt.min_rtt(),
            ..AckSample::default()
        };
        self.tlp_high = None;
        self.pto_at = None;
        self.enter_recovery(now, &sample, pipe);
        self.note_slow_start_exit(now, SlowStartCause::Loss);
        self.prr(0);
    }

    /// A loss starts fast recovery (or turns an ECN reduction into one) with `prior_in_flight`
    /// bytes out before it.
    fn enter_recovery(&mut self, now: Time, sample: &AckSample, prior_in_flight: u64) {
        self.stats.recoveries += 1;
        match &mut self.reduction {
            Some(r) => {
                r.kind = ReductionKind::Loss;
                r.point = self.nxt;
            }
            None => {
                self.cc.on_loss(now, sample);
                self.start_reduction(ReductionKind::Loss, prior_in_flight);
            }
        }
    }

    /// True when RACK's reordering timer has expired at `now`.
    pub fn rack_expired(&self, now: Time) -> bool {
        self.rack_at.is_some_and(|t| now >= t)
    }

    /// True when the probe timer has expired at `now`.
    pub fn pto_expired(&self, now: Time) -> bool {
        self.pto_at.is_some_and(|t| now >= t)
    }

    fn cwnd_limit(&self) -> u64 {
        self.cc.cwnd()
    }

    fn has_new_data(&self) -> bool {
        self.nxt < self.app_end || (self.fin_req && !self.fin_sent)
    }

    /// True if data waits and only the pacer holds it back; then [`Pacer::release`] is the
    /// time to try again.
    pub fn pacing_wakeup(&mut self, now: Time) -> Option<Time> {
        if self.pacer.ready(now) || !self.window_allows() {
            return None;
        }
        Some(self.pacer.release())
    }

    fn window_allows(&mut self) -> bool {
        let cwnd = self.cwnd_limit();
        let pipe = self.pipe();
        if let Some(s) = self.board.next_lost() {
            return pipe + s.payload() <= cwnd.max(s.payload());
        }
        if !self.has_new_data() {
            return false;
        }
        let len = (self.app_end - self.nxt).min(u64::from(self.cfg.mss));
        pipe + len <= cwnd && self.nxt + len <= self.una + self.snd_wnd.max(1)
    }

    /// The next data segment to send at `now`, if the window, the pacer and the application
    /// allow one. The caller sends it at once.
    pub fn poll_data(&mut self, now: Time) -> Option<DataSeg> {
        if !self.pacer.ready(now) {
            return None;
        }
        let probe = std::mem::take(&mut self.probe_due);
        // a probe goes whatever the window
        let cwnd = if probe { u64::MAX } else { self.cwnd_limit() };
        let pipe = self.pipe();
        let pipe_was_empty = pipe == 0;
        let (seg, fresh) = if let Some(s) = self.board.next_lost() {
            // a single segment may always go after an RTO collapsed cwnd below it
            if pipe.saturating_add(s.payload()) > cwnd.max(s.payload()) {
                return None;
            }
            (
                DataSeg {
                    start: s.start,
                    len: s.payload() as u32,
                    fin: s.fin,
                    retx: true,
                    cwr: false,
                },
                false,
            )
        } else if self.has_new_data() {
            let len = (self.app_end - self.nxt).min(u64::from(self.cfg.mss));
            if pipe.saturating_add(len) > cwnd {
                return None;
            }
            if self.nxt + len > self.una + self.snd_wnd.max(1) && len > 0 {
                return None;
            }
            let fin = self.fin_req && self.nxt + len == self.app_end;
            let cwr = std::mem::take(&mut self.cwr_pending);
            (DataSeg { start: self.nxt, len: len as u32, fin, retx: false, cwr }, true)
        } else {
            // nothing to send: application-limited (delivery-rate estimation)
            if pipe < cwnd {
                self.app_limited_mark = (self.delivered + pipe).max(1);
            }
            return None;
        };
        if pipe_was_empty {
            self.first_sent_time = now;
            self.delivered_time = now;
        }
        let (delivered, dtime, ftime) = (self.delivered, self.delivered_time, self.first_sent_time);
        let app_limited = self.app_limited_mark != 0;
        if fresh {
            self.board.push(SentSeg {
                start: seg.start,
                end: seg.start + u64::from(seg.len) + u64::from(seg.fin),
                fin: seg.fin,
                sent_at: now,
                sacked: false,
                lost: false,
                retx: false,
                in_pipe: true,
                delivered,
                delivered_time: dtime,
                first_sent_time: ftime,
                app_limited,
            });
            self.nxt = seg.start + u64::from(seg.len) + u64::from(seg.fin);
            self.fin_sent |= seg.fin;
        } else {
            self.board.on_retransmit(seg.start, self.nxt, now, |s| {
                s.delivered = delivered;
                s.delivered_time = dtime;
                s.first_sent_time = ftime;
                s.app_limited = app_limited;
            });
            self.stats.retransmits += 1;
        }
        if let Some(r) = &mut self.reduction {
            r.prr_out += u64::from(seg.len);
        }
        self.stats.segments += 1;
        self.max_pipe = self.max_pipe.max(self.pipe());
        self.cc.on_sent(now, u64::from(seg.len), self.pipe());
        let rate = self.pacing_rate();
        // charged by payload, the unit of cwnd and of BBR's bandwidth estimate (as ns-3 does;
        // Linux charges the skb, mostly payload)
        self.pacer.on_sent(now, u64::from(seg.len).max(1), rate);
        if self.rto_at.is_none() {
            self.rto_at = Some(now + self.rtt.rto());
        }
        if probe {
            self.stats.loss_probes += 1;
            self.tlp_high = Some((self.nxt, !fresh));
        } else if fresh {
            self.schedule_loss_probe(now, false);
        }
        Some(seg)
    }

    /// Process an acknowledgment: cumulative `ack`, SACK blocks (offsets), ECN-Echo, the
    /// peer's window in bytes.
    pub fn on_ack(&mut self, now: Time, ack: u64, sack: &[(u64, u64)], ece: bool, wnd: u64) {
        if ack > self.nxt || ack < self.una {
            return; // acknowledges unsent data, or old
        }
        self.snd_wnd = wnd;
        let prior_in_flight = self.pipe();
        let prior_una = self.una;
        // the most recently sent segment delivered by this ACK, for the rate sample
        let mut rs: Option<SentSeg> = None;
        let mut newest_sent: Option<Time> = None;
        let (mut acked, mut delivered) = (0u64, 0u64);
        let mut rack_new: Option<SentSeg> = None;
        // reordering (RFC 8985 6.2 step 3, Linux `tcp_check_sack_reordering`): a segment sent
        // once delivered now, below the highest SACKed before this ACK
        let prior_fack = self.board.highest_sacked();
        let mut reordered = false;
        let mut note = |s: &SentSeg, was_sacked: bool| {
            if !was_sacked {
                reordered |= !s.retx && s.end <= prior_fack;
                if rack_new.is_none_or(|r| (s.sent_at, s.end) > (r.sent_at, r.end)) {
                    rack_new = Some(*s);
                }
                delivered += s.payload();
                if !s.retx && newest_sent.is_none_or(|t| s.sent_at > t) {
                    newest_sent = Some(s.sent_at);
                }
                let newer = |r: SentSeg| {
                    s.delivered > r.delivered
                        || (s.delivered == r.delivered && s.sent_at > r.sent_at)
                };
                if rs.is_none_or(newer) {
                    rs = Some(*s);
                }
            }
        };
        self.board.ack_through(ack, |s| {
            acked += s.payload();
            note(s, s.sacked);
        });
        if self.cfg.sack {
            for &(lo, hi) in sack {
                // (a block ending just below a FIN sent covers the FIN's segment: the
                // receiver's blocks hold data only)
                let hi = if self.fin_sent && hi + 1 == self.nxt { self.nxt } else { hi };
                if hi > lo && lo >= ack && hi <= self.nxt {
                    self.board.sack(lo, hi, |s| note(s, false));
                }
            }
        }
        self.una = ack;
        self.stats.acked_bytes += acked;
        self.reord_seen |= reordered;
        // RACK (RFC 8985 6.2 steps 1-2): a retransmission's RTT counts only if it cannot be
        // the original's (at least min_rtt)
        if let Some(s) = rack_new.filter(|_| self.cfg.rack_tlp) {
            let rtt = now - s.sent_at;
            let plausible = !s.retx || self.rtt.min_rtt().is_none_or(|m| rtt >= m);
            let newer = self.rack.is_none_or(|(t, e, _)| (s.sent_at, s.end) > (t, e));
            if plausible && newer {
                self.rack = Some((s.sent_at, s.end, rtt));
            }
        }
        if delivered > 0 {
            self.delivered += delivered;
            self.delivered_time = now;
        }
        if self.app_limited_mark != 0 && self.delivered > self.app_limited_mark {
            self.app_limited_mark = 0;
        }
        // RTT (Karn: never from a retransmitted segment)
        let linux_rate = self.cc.reads_pacing_rate().then(|| self.linux_pacing_rate()).flatten();
        let rtt_sample = newest_sent.map(|t| now - t);
        if let Some(r) = rtt_sample {
            self.rtt.sample(r);
            self.last_rtt = Some(r);
        }
        let rate = rs.and_then(|s| self.rate_sample(now, &s));
        if let Some(s) = rs {
            // the next send interval starts at the send time of the newest delivered segment
            self.first_sent_time = s.sent_at;
        }
        // timer (RFC 6298 5.2, 5.3)
        if self.board.is_empty() {
            self.rto_at = None;
        } else if ack > prior_una {
            self.rto_at = Some(now + self.rtt.rto());
        }
        // duplicate ACKs (without SACK)
        let advanced = ack > prior_una;
        let removed = (acked / u64::from(self.cfg.mss).max(1)) as u32;
        let mut dup_credit = 0;
        if advanced {
            self.dupacks = 0;
            // segments the duplicate ACKs stood for are now cumulatively acknowledged
            self.reno_sacked = self.reno_sacked.saturating_sub(removed.saturating_sub(1));
        } else if delivered == 0 && !self.board.is_empty() && (sack.is_empty() || !self.cfg.sack) {
            self.dupacks += 1;
            if !self.cfg.sack {
                let outstanding = self.board.len() as u32;
                if self.reno_sacked + 1 < outstanding {
                    self.reno_sacked += 1;
                    dup_credit = u64::from(self.cfg.mss); // RFC 6937: a dupack delivered 1 MSS
                }
            }
        }
        if self.board.is_empty() {
            self.reno_sacked = 0;
        }
        // end of a reduction
        if let Some(r) = self.reduction {
            if self.una >= r.point {
                self.reduction = None;
                // Reno-family windows after a timeout grew by slow start: leave them; BBR
                // restores the window it had before.
                if r.kind != ReductionKind::Rto || !self.cc.uses_prr() {
                    self.cc.on_recovery_exit(now);
                }
            }
        }
        // loss detection
        let lost = if self.cfg.sack {
            let mut l = self.board.mark_sack_losses(self.cfg.dupthresh);
            if self.cfg.lost_retransmit {
                l += self.board.mark_lost_retransmissions();
            }
            if self.cfg.rack_tlp {
                l += self.rack_detect(now);
            }
            if l == 0 && self.dupacks >= self.cfg.dupthresh && self.reduction.is_none() {
                l = self.board.mark_front_lost();
            }
            l
        } else {
            let in_loss = matches!(self.reduction, Some(r) if r.kind == ReductionKind::Loss);
            // the third duplicate ACK, or a partial ACK in recovery (RFC 6582 3.2 step 3)
            let third_dup = self.dupacks == self.cfg.dupthresh && !in_loss;
            if third_dup || (in_loss && advanced) {
                self.board.mark_front_lost()
            } else {
                0
            }
        };
        let kind = self.reduction.map(|r| r.kind);
        let enter_loss = lost > 0 && matches!(kind, None | Some(ReductionKind::Ecn));
        if ece {
            self.stats.ece_acks += 1;
        }
        let enter_ecn = !enter_loss && ece && self.ecn && kind.is_none();
        // rounds, for the cwnd-limited test
        if self.una >= self.round_end {
            self.round_end = self.nxt;
            self.prev_max_pipe = self.max_pipe;
            self.max_pipe = self.pipe();
        }
        let flight = self.max_pipe.max(self.prev_max_pipe);
        let cwnd = self.cc.cwnd();
        let cwnd_limited = if self.cc.in_slow_start() {
            cwnd < 2 * flight
        } else {
            flight + u64::from(self.cfg.mss) >= cwnd
        };
        let sample = AckSample {
            acked: delivered,
            ece_acked: if ece { delivered } else { 0 },
            ece,
            rtt: rtt_sample,
            srtt: self.rtt.srtt(),
            min_rtt: self.rtt.min_rtt(),
            prior_in_flight,
            in_flight: self.pipe(),
            delivered: self.delivered,
            snd_nxt: self.nxt,
            snd_una: self.una,
            in_reduction: matches!(kind, Some(ReductionKind::Loss | ReductionKind::Ecn))
                || enter_loss
                || enter_ecn,
            lost,
            rate,
            app_limited: !cwnd_limited,
            pacing_rate: linux_rate,
            paced: self.cfg.pacing.enabled || self.cfg.pacing.max_rate.is_some(),
        };
        self.cc.on_ack(now, &sample);
        if enter_loss {
            self.enter_recovery(now, &sample, prior_in_flight);
        } else if enter_ecn {
            self.stats.ecn_reductions += 1;
            self.cc.on_ecn(now, &sample);
            self.start_reduction(ReductionKind::Ecn, prior_in_flight);
            self.cwr_pending = true;
        }
        self.prr(delivered + dup_credit);
        let cause = if enter_ecn { SlowStartCause::Ecn } else { SlowStartCause::Loss };
        self.note_slow_start_exit(now, cause);
        // tail loss probe (Linux tcp_process_tlp_ack); a reduction forgets the probe
        if enter_loss || enter_ecn {
            self.tlp_high = None;
        }
        if let Some((high, retx)) = self.tlp_high.filter(|&(high, _)| ack >= high) {
            if !retx || (ack == high && !advanced && delivered == 0) {
                // a probe of new data acknowledged, or a duplicate ACK: both copies arrived
                self.tlp_high = None;
            } else if ack > high {
                // the retransmitted probe repaired a loss: reduce the window once (a CWR)
                self.tlp_high = None;
                self.stats.probe_recoveries += 1;
                if self.reduction.is_none() {
                    self.cc.on_loss(now, &sample);
                    self.cc.on_recovery_exit(now);
                    self.note_slow_start_exit(now, SlowStartCause::Loss);
                }
            }
        }
        if advanced || delivered > 0 || self.board.is_empty() {
            self.schedule_loss_probe(now, true);
        }
    }

    fn start_reduction(&mut self, kind: ReductionKind, prior_in_flight: u64) {
        self.reduction = Some(Reduction {
            kind,
            point: self.nxt,
            prr_delivered: 0,
            prr_out: 0,
            recover_fs: prior_in_flight.max(1),
        });
    }

    /// Proportional rate reduction (RFC 6937, PRR-SSRB), as Linux's tcp_cwnd_reduction.
    fn prr(&mut self, delivered: u64) {
        if !self.cc.uses_prr() {
            return;
        }
        let pipe = self.pipe();
        let Some(r) = &mut self.reduction else { return };
        if r.kind == ReductionKind::Rto {
            return;
        }
        let mss = u64::from(self.cfg.mss);
        r.prr_delivered += delivered;
        let ssthresh = self.cc.ssthresh();
        let mut sndcnt = if pipe > ssthresh {
            let want = latnet_units::mul_div(
                u128::from(r.prr_delivered),
                u128::from(ssthresh),
                u128::from(r.recover_fs),
                Rounding::Up,
            )
            .unwrap_or(u64::MAX);
            want.saturating_sub(r.prr_out)
        } else {
            let limit = r.prr_delivered.saturating_sub(r.prr_out).max(delivered) + mss;
            (ssthresh - pipe).min(limit)
        };
        if r.prr_out == 0 {
            sndcnt = sndcnt.max(mss); // the fast retransmit goes out at once
        }
        self.cc.set_cwnd(pipe + sndcnt);
    }

    fn rate_sample(&self, now: Time, s: &SentSeg) -> Option<RateSample> {
        let send_elapsed = s.sent_at - s.first_sent_time;
        let ack_elapsed = now - s.delivered_time;
        let interval = send_elapsed.max(ack_elapsed);
        let delivered = self.delivered - s.delivered;
        if interval.is_zero() || self.rtt.min_rtt().is_some_and(|m| interval < m) {
            return None;
        }
        let rate =
            Rate::from_size_per(latnet_units::Bytes::new(delivered), interval, Rounding::Down)?;
        Some(RateSample {
            delivered,
            interval,
            rate,
            prior_delivered: s.delivered,
            app_limited: s.app_limited,
        })
    }

    /// The retransmission timer fired at `now` (the caller checked the deadline).
    pub fn on_rto(&mut self, now: Time) {
        if self.board.is_empty() {
            self.rto_at = None;
            return;
        }
        self.stats.rtos += 1;
        let flight = self.pipe();
        // Linux tcp_enter_loss: ssthresh is reduced once per loss episode
        self.cc.on_rto(now, flight, self.reduction.is_some());
        self.note_slow_start_exit(now, SlowStartCause::Timeout);
        self.tlp_high = None;
        self.pto_at = None;
        self.probe_due = false;
        self.rack_at = None;
        self.board.mark_all_lost();
        self.reno_sacked = 0;
        self.rtt.back_off();
        self.dupacks = 0;
        self.reduction = Some(Reduction {
            kind: ReductionKind::Rto,
            point: self.nxt,
            prr_delivered: 0,
            prr_out: 0,
            recover_fs: 1,
        });
        self.rto_at = Some(now + self.rtt.rto());
        self.pacer = Pacer::new();
    }

    /// Backoff count of the timer (consecutive expiries without an RTT sample).
    pub fn rto_expired(&self, now: Time) -> bool {
        self.rto_at.is_some_and(|t| now >= t)
    }
}
