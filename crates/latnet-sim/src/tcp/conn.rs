//! One TCP connection endpoint as a sans-IO state machine (quinn-proto style).
//!
//! # Call order
//!
//! The owner (the simulator, or a test driving two endpoints in virtual time) owns the clock
//! and the wire:
//!
//! 1. create with [`Connection::connect`] (active open: sends a SYN) or
//!    [`Connection::accept`] (passive open from a received SYN);
//! 2. feed every segment addressed to it to [`Connection::handle_segment`]`(now, seg)`;
//! 3. after any input, call [`Connection::poll_transmit`]`(now, allow_data)` until `None` and
//!    put each segment on the wire (`allow_data = false` asks for control segments only: the
//!    host's queue is full, TSQ-like backpressure);
//! 4. ask [`Connection::poll_timeout`]`(now)` when to call [`Connection::handle_timeout`]`(now)`
//!    next (retransmission, delayed ACK, pacing release, handshake) — calling it early is
//!    harmless;
//! 5. drain [`Connection::poll_event`] for what the application sees (connected, bytes
//!    delivered, peer's FIN, closed).
//!
//! The application side: [`Connection::write`] hands over virtual bytes, [`Connection::close`]
//! queues a FIN after them.
//!
//! # Handshake
//!
//! Three-way (RFC 9293): SYN with MSS, window scale (RFC 7323), SACK-permitted (RFC 2018) and,
//! with ECN on, ECE|CWR (RFC 3168 section 6.1.1); the SYN-ACK answers ECE when both sides want
//! ECN. The SYN / SYN-ACK exchange gives the first RTT sample. SYNs are never ECT. No
//! simultaneous open, no RST generation, no TIME-WAIT: a connection is done when its FIN is
//! acknowledged and the peer's FIN received and acknowledged.
//!
//! # ECN on the wire
//!
//! With ECN negotiated, new data segments carry the configured ECT codepoint (ECT(0), or
//! ECT(1) for L4S). Classic ECN leaves retransmissions and pure ACKs Not-ECT (RFC 3168 section
//! 6.1.5); congestion controls with per-packet feedback (DCTCP, Prague) mark every segment
//! ECT, as Linux does for them.

use super::cc::{AnyCc, CcParams, CongestionControl};
use super::receiver::{AckInfo, EcnFeedback, Receiver, ReceiverStats};
use super::segment::Segment;
use super::sender::{Sender, SenderConfig, SenderStats};
use super::TcpConfig;
use latnet_units::{Duration, Rate, Time};
use latnet_wire::{Ecn, SackBlocks, TcpFlags, TcpSeqNumber};
use std::collections::VecDeque;

/// Connection states (the subset this model needs).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum State {
    /// SYN sent, waiting for the SYN-ACK.
    SynSent,
    /// SYN received, SYN-ACK sent, waiting for its ACK.
    SynRcvd,
    /// Data transfer (and closing).
    Established,
    /// Done (both FINs acknowledged) or aborted.
    Closed,
}

/// What the application sees.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ConnEvent {
    /// The handshake completed.
    Connected,
    /// `n` more bytes arrived in order.
    Data(u64),
    /// The peer's FIN arrived (after all its data).
    PeerFin,
    /// Both directions closed and acknowledged.
    Closed,
    /// Gave up after too many retransmission timeouts.
    Aborted,
}

/// One endpoint of a TCP connection.
#[derive(Debug, Clone)]
pub struct Connection {
    cfg: TcpConfig,
    state: State,
    local_port: u16,
    remote_port: u16,
    iss: TcpSeqNumber,
    irs: TcpSeqNumber,
    snd: Sender,
    rcv: Receiver,
    hs_send: bool,
    hs_timer: Option<Time>,
    hs_first_sent: Option<Time>,
    hs_retries: u32,
    ack_pending: bool,
    ecn_ok: bool,
    all_ect: bool,
    our_wscale: u8,
    peer_wscale: u8,
    delivered_reported: u64,
    peer_fin_reported: bool,
    rto_una: Option<u64>,
    rto_streak: u32,
    events: VecDeque<ConnEvent>,
}

fn sender_config(cfg: &TcpConfig, mss: u32) -> SenderConfig {
    SenderConfig {
        mss,
        dupthresh: cfg.dupthresh,
        sack: cfg.sack,
        initial_rto: cfg.initial_rto,
        min_rto: cfg.min_rto,
        max_rto: cfg.max_rto,
        pacing: cfg.pacing,
        lost_retransmit: cfg.lost_retransmit,
        rack_tlp: cfg.rack_tlp,
    }
}

fn new_sender(cfg: &TcpConfig, mss: u32) -> Sender {
    let p = CcParams {
        mss: u64::from(mss),
        init_cwnd: u64::from(cfg.init_cwnd) * u64::from(mss),
        rtt_target: cfg.rtt_target,
        bbr_ecn: cfg.bbr_ecn,
        hystart: cfg.hystart,
        seed: cfg.seed,
    };
    Sender::new(sender_config(cfg, mss), AnyCc::new(cfg.cc, &p))
}

impl Connection {
    fn new(cfg: TcpConfig, state: State, local_port: u16, remote_port: u16, iss: u32) -> Self {
        let our_wscale = Receiver::wscale_for(cfg.rcv_buf);
        Connection {
            snd: new_sender(&cfg, cfg.mss),
            rcv: Receiver::new(cfg.delack_count, cfg.delack_timeout, cfg.rcv_buf),
            cfg,
            state,
            local_port,
            remote_port,
            iss: TcpSeqNumber(iss),
            irs: TcpSeqNumber(0),
            hs_send: true,
            hs_timer: None,
            hs_first_sent: None,
            hs_retries: 0,
            ack_pending: false,
            ecn_ok: false,
            all_ect: false,
            our_wscale,
            peer_wscale: 0,
            delivered_reported: 0,
            peer_fin_reported: false,
            rto_una: None,
            rto_streak: 0,
            events: VecDeque::new(),
        }
    }

    /// Active open: the first [`Self::poll_transmit`] returns the SYN.
    pub fn connect(cfg: TcpConfig, local_port: u16, remote_port: u16, iss: u32) -> Self {
        Self::new(cfg, State::SynSent, local_port, remote_port, iss)
    }

    /// Passive open from a received SYN: the first [`Self::poll_transmit`] returns the SYN-ACK.
    /// `None` if `syn` is not a SYN.
    pub fn accept(cfg: TcpConfig, syn: &Segment, iss: u32) -> Option<Self> {
        if !syn.has(TcpFlags::SYN) || syn.has(TcpFlags::ACK) {
            return None;
        }
        let mut c = Self::new(cfg, State::SynRcvd, syn.dst_port, syn.src_port, iss);
        c.irs = syn.seq;
        c.ecn_ok = c.cfg.ecn && syn.has(TcpFlags::ECE) && syn.has(TcpFlags::CWR);
        c.negotiate(syn);
        Some(c)
    }

    /// Options of the peer's SYN or SYN-ACK: MSS, window scale, SACK.
    fn negotiate(&mut self, syn: &Segment) {
        match syn.wscale {
            Some(w) => self.peer_wscale = w.min(14),
            None => {
                self.peer_wscale = 0;
                self.our_wscale = 0;
            }
        }
        let sack = self.cfg.sack && syn.sack_permitted;
        let mss = syn.mss.map_or(536, u32::from).clamp(48, self.cfg.mss);
        if mss != self.cfg.mss {
            self.snd = new_sender(&self.cfg, mss);
        }
        self.cfg.sack = sack;
    }

    fn establish(&mut self, now: Time, peer_window: u16) {
        self.state = State::Established;
        if self.hs_retries == 0 {
            if let Some(t) = self.hs_first_sent {
                self.snd.rtt_sample(now - t);
            }
        }
        self.hs_timer = None;
        let accurate = self.snd.cc().wants_accurate_ecn();
        self.all_ect = self.ecn_ok && accurate;
        let feedback = match (self.ecn_ok, accurate) {
            (false, _) => EcnFeedback::Off,
            (true, false) => EcnFeedback::Classic,
            (true, true) => EcnFeedback::PerPacket,
        };
        // The window of a SYN or SYN-ACK is never scaled (RFC 7323 section 2.2).
        self.snd.established(self.cfg.sack, self.ecn_ok, u64::from(peer_window));
        self.rcv.established(feedback, self.our_wscale);
        self.events.push_back(ConnEvent::Connected);
    }

    /// The state.
    pub fn state(&self) -> State {
        self.state
    }

    /// Local port.
    pub fn local_port(&self) -> u16 {
        self.local_port
    }

    /// Remote port.
    pub fn remote_port(&self) -> u16 {
        self.remote_port
    }

    /// The application hands over `bytes` more bytes to send.
    pub fn write(&mut self, bytes: u64) {
        self.snd.write(bytes);
    }

    /// The application stops writing: data not yet sent is abandoned.
    pub fn stop_writing(&mut self) {
        let n = self.snd.nxt();
        self.snd.truncate(n);
    }

    /// The application closes its sending direction (a FIN follows the data).
    pub fn close(&mut self) {
        self.snd.close();
    }

    /// Set `SO_MAX_PACING_RATE`.
    pub fn set_max_pacing_rate(&mut self, r: Option<Rate>) {
        self.snd.set_max_pacing_rate(r);
    }

    /// The sending half.
    pub fn sender(&self) -> &Sender {
        &self.snd
    }

    /// Sender counters.
    pub fn sender_stats(&self) -> &SenderStats {
        self.snd.stats()
    }

    /// Receiver counters.
    pub fn receiver_stats(&self) -> &ReceiverStats {
        self.rcv.stats()
    }

    /// ECN was negotiated.
    pub fn ecn(&self) -> bool {
        self.ecn_ok
    }

    /// When and why the sender's slow start first ended.
    pub fn slow_start_exit(&self) -> Option<super::sender::SlowStartExit> {
        self.snd.slow_start_exit()
    }

    /// The RTT sample of the last acknowledgment (taken once).
    pub fn take_rtt_sample(&mut self) -> Option<Duration> {
        self.snd.take_rtt_sample()
    }

    /// Next application event.
    pub fn poll_event(&mut self) -> Option<ConnEvent> {
        self.events.pop_front()
    }

    fn off_of(base_off: u64, base: TcpSeqNumber, seq: TcpSeqNumber) -> Option<u64> {
        let d = i64::from(seq.diff(base));
        u64::try_from(base_off as i64 + d).ok()
    }

    fn snd_seq(&self, off: u64) -> TcpSeqNumber {
        self.iss + 1 + off as u32
    }

    fn rcv_seq(&self, off: u64) -> TcpSeqNumber {
        self.irs + 1 + off as u32
    }

    /// A segment for this connection arrived at `now`.
    pub fn handle_segment(&mut self, now: Time, seg: &Segment) {
        if seg.has(TcpFlags::RST) {
            if self.state != State::Closed {
                self.state = State::Closed;
                self.events.push_back(ConnEvent::Aborted);
            }
            return;
        }
        match self.state {
            State::Closed => return,
            State::SynSent => {
                if !(seg.has(TcpFlags::SYN) && seg.has(TcpFlags::ACK)) || seg.ack != self.iss + 1 {
                    return;
                }
                self.irs = seg.seq;
                self.ecn_ok = self.cfg.ecn && seg.has(TcpFlags::ECE) && !seg.has(TcpFlags::CWR);
                self.negotiate(seg);
                self.establish(now, seg.window);
                self.ack_pending = true;
                return;
            }
            State::SynRcvd => {
                if seg.has(TcpFlags::SYN) && !seg.has(TcpFlags::ACK) {
                    self.hs_send = true; // our SYN-ACK was lost: send it again
                    return;
                }
                if !seg.has(TcpFlags::ACK) || seg.ack != self.iss + 1 {
                    return;
                }
                self.establish(now, seg.window);
                // fall through: the ACK may carry data
            }
            State::Established => {
                if seg.has(TcpFlags::SYN) {
                    self.ack_pending = true; // a retransmitted SYN-ACK: our ACK was lost
                    return;
                }
            }
        }
        if seg.has(TcpFlags::ACK) {
            self.on_ack(now, seg);
        }
        if seg.len > 0 || seg.has(TcpFlags::FIN) {
            let base = self.rcv.delivered();
            if let Some(off) = Self::off_of(base, self.rcv_seq(base), seg.seq) {
                let ce = seg.ecn == Ecn::Ce;
                let fin = seg.has(TcpFlags::FIN);
                self.rcv.on_data(now, off, u64::from(seg.len), fin, ce, seg.has(TcpFlags::CWR));
            } else {
                self.ack_pending = true; // before the start of the stream: a stale duplicate
            }
            let d = self.rcv.delivered();
            if d > self.delivered_reported {
                self.events.push_back(ConnEvent::Data(d - self.delivered_reported));
                self.delivered_reported = d;
            }
            if self.rcv.fin_received() && !self.peer_fin_reported {
                self.peer_fin_reported = true;
                self.events.push_back(ConnEvent::PeerFin);
            }
        }
    }

    fn on_ack(&mut self, now: Time, seg: &Segment) {
        let una = self.snd.una();
        let base = self.snd_seq(una);
        let Some(ack) = Self::off_of(una, base, seg.ack) else { return };
        let mut blocks = [(0u64, 0u64); 4];
        let mut n = 0;
        if let Some(s) = seg.sack {
            for &(l, r) in s.as_slice() {
                let l = Self::off_of(una, base, TcpSeqNumber(l));
                let r = Self::off_of(una, base, TcpSeqNumber(r));
                if let (Some(l), Some(r)) = (l, r) {
                    blocks[n] = (l, r);
                    n += 1;
                }
            }
        }
        let ece = self.ecn_ok && seg.has(TcpFlags::ECE);
        let wnd = u64::from(seg.window) << self.peer_wscale;
        self.snd.on_ack(now, ack, &blocks[..n], ece, wnd);
        if self.snd.una() > una {
            self.rto_streak = 0;
        }
    }

    fn segment(&self, flags: TcpFlags, seq: TcpSeqNumber, len: u32, ecn: Ecn) -> Segment {
        Segment {
            src_port: self.local_port,
            dst_port: self.remote_port,
            seq,
            flags,
            len,
            ecn,
            ..Segment::default()
        }
    }

    fn with_ack(&self, mut s: Segment, a: &AckInfo) -> Segment {
        s.flags |= TcpFlags::ACK;
        s.ack = self.rcv_seq(a.ack);
        s.window = self.rcv.window_field();
        if a.ece {
            s.flags |= TcpFlags::ECE;
        }
        if a.n_sack > 0 && self.cfg.sack {
            let mut b = [(0u32, 0u32); 4];
            for (i, &(l, r)) in a.sack[..a.n_sack].iter().enumerate() {
                b[i] = (self.rcv_seq(l).0, self.rcv_seq(r).0);
            }
            s.sack = SackBlocks::new(&b[..a.n_sack]);
        }
        s
    }

    fn handshake_segment(&mut self, now: Time) -> Segment {
        self.hs_send = false;
        self.hs_first_sent.get_or_insert(now);
        let rto = self.cfg.initial_rto.checked_mul(1 << self.hs_retries.min(16));
        self.hs_timer = Some(now + rto.unwrap_or(self.cfg.max_rto).min(self.cfg.max_rto));
        let mut s = self.segment(TcpFlags::SYN, self.iss, 0, Ecn::NotEct);
        s.mss = Some(self.cfg.mss.min(u32::from(u16::MAX)) as u16);
        s.sack_permitted = self.cfg.sack;
        match self.state {
            State::SynSent => {
                // unscaled, as every SYN's window (RFC 7323 section 2.2)
                s.window = self.rcv.window_field();
                s.wscale = Some(self.our_wscale);
                if self.cfg.ecn {
                    s.flags |= TcpFlags::ECE | TcpFlags::CWR;
                }
                s
            }
            _ => {
                // SYN-ACK: options only as the SYN offered them
                if self.peer_wscale > 0 || self.our_wscale > 0 {
                    s.wscale = Some(self.our_wscale);
                }
                if self.ecn_ok {
                    s.flags |= TcpFlags::ECE;
                }
                self.with_ack(s, &AckInfo { ack: 0, ..AckInfo::default() })
            }
        }
    }

    /// The next segment to put on the wire at `now`, if any. With `allow_data` false only
    /// control segments (handshake, pure ACKs) come out.
    pub fn poll_transmit(&mut self, now: Time, allow_data: bool) -> Option<Segment> {
        match self.state {
            State::Closed => None,
            State::SynSent | State::SynRcvd => self.hs_send.then(|| self.handshake_segment(now)),
            State::Established => {
                let ect = if self.all_ect { self.cfg.ect } else { Ecn::NotEct };
                if let Some(a) = self.rcv.pop_pending() {
                    let s = self.segment(TcpFlags::NONE, self.snd_seq(self.snd.nxt()), 0, ect);
                    return Some(self.with_ack(s, &a));
                }
                if allow_data {
                    if let Some(d) = self.snd.poll_data(now) {
                        let mut flags = TcpFlags::NONE;
                        if d.fin {
                            flags |= TcpFlags::FIN;
                        }
                        if d.cwr {
                            flags |= TcpFlags::CWR;
                        }
                        let ecn = if self.ecn_ok && (self.all_ect || !d.retx) {
                            self.cfg.ect
                        } else {
                            Ecn::NotEct
                        };
                        let s = self.segment(flags, self.snd_seq(d.start), d.len, ecn);
                        let s = self.with_ack(s, &self.rcv.ack_info());
                        self.rcv.on_ack_sent();
                        self.ack_pending = false;
                        return Some(s);
                    }
                }
                if self.rcv.ack_due() || self.ack_pending {
                    let s = self.segment(TcpFlags::NONE, self.snd_seq(self.snd.nxt()), 0, ect);
                    let s = self.with_ack(s, &self.rcv.ack_info());
                    self.rcv.on_ack_sent();
                    self.ack_pending = false;
                    return Some(s);
                }
                if self.snd.fin_acked() && self.rcv.fin_received() {
                    self.state = State::Closed;
                    self.events.push_back(ConnEvent::Closed);
                }
                None
            }
        }
    }

    /// When [`Self::handle_timeout`] should next run (`None`: nothing pending).
    pub fn poll_timeout(&mut self, now: Time) -> Option<Time> {
        let mut t = None::<Time>;
        let mut consider = |x: Option<Time>| {
            if let Some(x) = x {
                t = Some(t.map_or(x, |t| t.min(x)));
            }
        };
        match self.state {
            State::Closed => return None,
            State::SynSent | State::SynRcvd => consider(self.hs_timer),
            State::Established => {
                consider(self.snd.rto_deadline());
                consider(self.snd.pto_deadline());
                consider(self.snd.rack_deadline());
                consider(self.rcv.delack_deadline());
                consider(self.snd.pacing_wakeup(now));
            }
        }
        t
    }

    /// Timers due at `now` fire (early calls do nothing).
    pub fn handle_timeout(&mut self, now: Time) {
        match self.state {
            State::Closed => {}
            State::SynSent | State::SynRcvd => {
                if self.hs_timer.is_some_and(|t| now >= t) {
                    self.hs_retries += 1;
                    self.hs_timer = None;
                    if self.hs_retries > self.cfg.max_retries {
                        self.abort();
                    } else {
                        self.hs_send = true;
                    }
                }
            }
            State::Established => {
                self.rcv.on_delack_timer(now);
                if self.snd.rack_expired(now) {
                    self.snd.on_rack_timer(now);
                }
                if self.snd.pto_expired(now) {
                    self.snd.on_pto(now);
                }
                if self.snd.rto_expired(now) {
                    let una = self.snd.una();
                    if self.rto_una == Some(una) {
                        self.rto_streak += 1;
                    } else {
                        self.rto_streak = 1;
                    }
                    self.rto_una = Some(una);
                    if self.rto_streak > self.cfg.max_retries {
                        self.abort();
                    } else {
                        self.snd.on_rto(now);
                    }
                }
            }
        }
    }

    fn abort(&mut self) {
        self.state = State::Closed;
        self.events.push_back(ConnEvent::Aborted);
    }
}
