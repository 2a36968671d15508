//! The receiving half of a TCP connection: reassembly, acknowledgments, SACK blocks, delayed
//! ACKs, ECN feedback and the advertised window.
//!
//! * **Reassembly**: in-order data advances `rcv_nxt` and is delivered at once (the
//!   application reads immediately); out-of-order data is kept as ranges (payload virtual).
//! * **ACK policy** (RFC 5681 section 4.2, RFC 1122): an ACK at least every `delack_count`
//!   full segments or `delack_timeout` after the first unacknowledged one; immediately for
//!   out-of-order segments, for a segment that fills a hole, for duplicates and for a FIN.
//! * **SACK** (RFC 2018): up to 4 blocks (no timestamps option), the block holding the most
//!   recently received segment first, then the most recently reported others.
//! * **ECN feedback**, chosen by the connection:
//!   - classic (RFC 3168 section 6.1.3): after a CE mark, ECE on every ACK until a segment with
//!     CWR arrives;
//!   - per-packet (RFC 8257 section 3.2, what DCTCP and Prague need): ECE mirrors the CE
//!     state of received segments; when the state changes with an ACK pending, an ACK with the
//!     old state goes out first for the data before, then the new state applies at once.
//! * **Window**: `rcv_buf` minus the bytes held out of order, scaled by the negotiated shift.

use latnet_units::{Duration, Time};
use std::collections::VecDeque;

/// How the receiver echoes CE marks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum EcnFeedback {
    /// No ECN.
    #[default]
    Off,
    /// RFC 3168: latch ECE until CWR.
    Classic,
    /// RFC 8257: ECE = CE state of the latest segments.
    PerPacket,
}

/// An acknowledgment to send: cumulative offset, ECE, SACK blocks (offsets).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct AckInfo {
    /// Cumulative acknowledgment (offset; the FIN counts once received).
    pub ack: u64,
    /// ECN-Echo.
    pub ece: bool,
    /// Number of valid entries in `sack`.
    pub n_sack: usize,
    /// SACK blocks, most recent first.
    pub sack: [(u64, u64); 4],
}

/// Receiver counters.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ReceiverStats {
    /// Bytes delivered in order to the application.
    pub delivered: u64,
    /// Data segments received.
    pub segments: u64,
    /// Segments that arrived with CE.
    pub ce_marks: u64,
    /// Segments that carried only data already received.
    pub duplicates: u64,
    /// Segments that arrived out of order.
    pub out_of_order: u64,
}

/// The receiving half of a connection.
#[derive(Debug, Clone)]
pub struct Receiver {
    nxt: u64,
    ooo: Vec<(u64, u64)>,
    ooo_bytes: u64,
    recent: VecDeque<(u64, u64)>,
    fin_at: Option<u64>,
    fin_received: bool,
    delack_count: u32,
    delack_timeout: Duration,
    unacked: u32,
    ack_now: bool,
    delack_at: Option<Time>,
    pending: VecDeque<AckInfo>,
    feedback: EcnFeedback,
    ece_latched: bool,
    ce_state: bool,
    rcv_buf: u64,
    wscale: u8,
    stats: ReceiverStats,
}

impl Receiver {
    /// A receiver acknowledging every `delack_count` segments (1: every segment) or after
    /// `delack_timeout`, advertising up to `rcv_buf` bytes.
    pub fn new(delack_count: u32, delack_timeout: Duration, rcv_buf: u64) -> Self {
        Receiver {
            nxt: 0,
            ooo: Vec::new(),
            ooo_bytes: 0,
            recent: VecDeque::new(),
            fin_at: None,
            fin_received: false,
            delack_count: delack_count.max(1),
            delack_timeout,
            unacked: 0,
            ack_now: false,
            delack_at: None,
            pending: VecDeque::new(),
            feedback: EcnFeedback::Off,
            ece_latched: false,
            ce_state: false,
            rcv_buf,
            wscale: 0,
            stats: ReceiverStats::default(),
        }
    }

    /// Set after the handshake.
    pub fn established(&mut self, feedback: EcnFeedback, wscale: u8) {
        self.feedback = feedback;
        self.wscale = wscale;
    }

    /// `rcv_nxt` (offset; counts the FIN once received).
    pub fn nxt(&self) -> u64 {
        self.nxt + u64::from(self.fin_received)
    }

    /// Bytes delivered in order.
    pub fn delivered(&self) -> u64 {
        self.nxt
    }

    /// The peer's FIN arrived and everything before it.
    pub fn fin_received(&self) -> bool {
        self.fin_received
    }

    /// Counters.
    pub fn stats(&self) -> &ReceiverStats {
        &self.stats
    }

    /// The window field to advertise (already shifted).
    pub fn window_field(&self) -> u16 {
        let w = self.rcv_buf.saturating_sub(self.ooo_bytes) >> self.wscale;
        w.min(u64::from(u16::MAX)) as u16
    }

    /// The window-scale shift that makes `rcv_buf` fit 16 bits (RFC 7323), at most 14.
    pub fn wscale_for(rcv_buf: u64) -> u8 {
        let mut s = 0u8;
        while s < 14 && (rcv_buf >> s) > u64::from(u16::MAX) {
            s += 1;
        }
        s
    }

    /// A segment with `len` payload bytes at offset `off` arrived at `now` (FIN if `fin`), with
    /// IP CE (`ce`) and TCP CWR (`cwr`).
    pub fn on_data(&mut self, now: Time, off: u64, len: u64, fin: bool, ce: bool, cwr: bool) {
        self.stats.segments += 1;
        if ce {
            self.stats.ce_marks += 1;
        }
        match self.feedback {
            EcnFeedback::Off => {}
            EcnFeedback::Classic => {
                if cwr {
                    self.ece_latched = false;
                }
                if ce {
                    self.ece_latched = true;
                }
            }
            EcnFeedback::PerPacket => {
                if ce != self.ce_state {
                    if self.unacked > 0 {
                        // RFC 8257 3.2: ACK the data so far with the old CE state first.
                        let old = self.ack_info();
                        self.pending.push_back(old);
                        self.unacked = 0;
                        self.delack_at = None;
                    }
                    self.ce_state = ce;
                    self.ack_now = true;
                }
            }
        }
        let end = off + len;
        if fin {
            self.fin_at = Some(end);
            self.ack_now = true;
        }
        if len > 0 {
            if end <= self.nxt {
                self.stats.duplicates += 1;
                self.ack_now = true;
            } else if off <= self.nxt {
                let had_holes = !self.ooo.is_empty();
                self.nxt = end;
                self.absorb();
                if had_holes {
                    self.ack_now = true; // filled (part of) a hole
                }
                self.note_recent(off, end);
            } else {
                self.stats.out_of_order += 1;
                self.insert_ooo(off, end);
                self.note_recent(off, end);
                self.ack_now = true;
            }
            self.unacked += 1;
            if self.unacked >= self.delack_count {
                self.ack_now = true;
            }
        }
        if let Some(f) = self.fin_at {
            if !self.fin_received && self.nxt >= f {
                self.fin_received = true;
                self.ack_now = true;
            }
        }
        self.stats.delivered = self.nxt;
        if !self.ack_now && self.delack_at.is_none() {
            self.delack_at = Some(now + self.delack_timeout);
        }
    }

    fn absorb(&mut self) {
        while let Some(&(lo, hi)) = self.ooo.first() {
            if lo > self.nxt {
                break;
            }
            self.ooo.remove(0);
            self.ooo_bytes -= hi - lo;
            self.nxt = self.nxt.max(hi);
        }
    }

    fn insert_ooo(&mut self, lo: u64, hi: u64) {
        let i = self.ooo.partition_point(|&(_, h)| h < lo);
        let (mut lo, mut hi) = (lo, hi);
        let mut j = i;
        while j < self.ooo.len() && self.ooo[j].0 <= hi {
            lo = lo.min(self.ooo[j].0);
            hi = hi.max(self.ooo[j].1);
            self.ooo_bytes -= self.ooo[j].1 - self.ooo[j].0;
            j += 1;
        }
        self.ooo.drain(i..j);
        self.ooo.insert(i, (lo, hi));
        self.ooo_bytes += hi - lo;
    }

    /// Remember the block that holds `[lo, hi)` as the most recent (RFC 2018 section 4).
    fn note_recent(&mut self, lo: u64, hi: u64) {
        let block = self.ooo.iter().copied().find(|&(a, b)| a <= lo && hi <= b);
        self.recent.retain(|&(a, b)| !(block.is_some_and(|(x, y)| a < y && x < b)));
        if let Some(b) = block {
            self.recent.push_front(b);
        }
        self.recent.truncate(8);
    }

    /// The acknowledgment to send now, with SACK blocks.
    pub fn ack_info(&self) -> AckInfo {
        let mut a = AckInfo {
            ack: self.nxt(),
            ece: match self.feedback {
                EcnFeedback::Off => false,
                EcnFeedback::Classic => self.ece_latched,
                EcnFeedback::PerPacket => self.ce_state,
            },
            ..AckInfo::default()
        };
        for &(lo, hi) in &self.recent {
            if a.n_sack == 4 {
                break;
            }
            // report blocks still held out of order (current extent)
            if let Some(&b) = self.ooo.iter().find(|&&(x, y)| x <= lo && hi <= y) {
                if !a.sack[..a.n_sack].contains(&b) {
                    a.sack[a.n_sack] = b;
                    a.n_sack += 1;
                }
            }
        }
        a
    }

    /// An ACK queued to go out before anything else (per-packet ECN state changes).
    pub fn pop_pending(&mut self) -> Option<AckInfo> {
        self.pending.pop_front()
    }

    /// An ACK is due now.
    pub fn ack_due(&self) -> bool {
        self.ack_now
    }

    /// When the delayed ACK is due.
    pub fn delack_deadline(&self) -> Option<Time> {
        self.delack_at
    }

    /// The delayed-ACK timer fired.
    pub fn on_delack_timer(&mut self, now: Time) {
        if self.delack_at.is_some_and(|t| now >= t) {
            self.delack_at = None;
            self.ack_now = true;
        }
    }

    /// An ACK (pure or piggybacked) was sent.
    pub fn on_ack_sent(&mut self) {
        self.unacked = 0;
        self.ack_now = false;
        self.delack_at = None;
        let nxt = self.nxt;
        self.recent.retain(|&(_, hi)| hi > nxt);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rx() -> Receiver {
        Receiver::new(2, Duration::from_millis(40), 1 << 20)
    }

    #[test]
    fn delayed_ack_every_second_segment_or_timeout() {
        let mut r = rx();
        r.on_data(Time::ZERO, 0, 1000, false, false, false);
        assert!(!r.ack_due());
        assert_eq!(r.delack_deadline(), Some(Time::from_nanos(40_000_000)));
        r.on_data(Time::ZERO, 1000, 1000, false, false, false);
        assert!(r.ack_due(), "second full segment");
        assert_eq!(r.ack_info().ack, 2000);
        r.on_ack_sent();
        r.on_data(Time::ZERO, 2000, 1000, false, false, false);
        r.on_delack_timer(Time::from_nanos(40_000_000));
        assert!(r.ack_due(), "timer");
    }

    #[test]
    fn out_of_order_gets_sack_blocks_most_recent_first() {
        let mut r = rx();
        r.on_data(Time::ZERO, 0, 1000, false, false, false);
        r.on_data(Time::ZERO, 2000, 1000, false, false, false); // hole at 1000
        assert!(r.ack_due());
        r.on_data(Time::ZERO, 5000, 1000, false, false, false); // hole at 3000..5000
        let a = r.ack_info();
        assert_eq!(a.ack, 1000);
        assert_eq!(&a.sack[..a.n_sack], &[(5000, 6000), (2000, 3000)]);
        r.on_data(Time::ZERO, 3000, 1000, false, false, false);
        let a = r.ack_info();
        assert_eq!(&a.sack[..a.n_sack], &[(2000, 4000), (5000, 6000)]);
        r.established(EcnFeedback::Off, 5);
        assert_eq!(r.window_field(), (((1u64 << 20) - 3000) >> 5) as u16, "held bytes shrink it");
        // the hole fills: everything up to 4000, then 6000
        r.on_data(Time::ZERO, 1000, 1000, false, false, false);
        assert_eq!(r.ack_info().ack, 4000);
        r.on_data(Time::ZERO, 4000, 1000, false, false, false);
        let a = r.ack_info();
        assert_eq!((a.ack, a.n_sack), (6000, 0));
        assert_eq!(r.stats().delivered, 6000);
    }

    #[test]
    fn classic_ecn_latches_until_cwr() {
        let mut r = rx();
        r.established(EcnFeedback::Classic, 0);
        r.on_data(Time::ZERO, 0, 1000, false, true, false);
        assert!(r.ack_info().ece);
        r.on_data(Time::ZERO, 1000, 1000, false, false, false);
        assert!(r.ack_info().ece, "still latched");
        r.on_data(Time::ZERO, 2000, 1000, false, false, true);
        assert!(!r.ack_info().ece, "CWR clears it");
    }

    #[test]
    fn per_packet_ecn_acks_the_old_state_first() {
        let mut r = rx();
        r.established(EcnFeedback::PerPacket, 0);
        r.on_data(Time::ZERO, 0, 1000, false, false, false); // delayed, not CE
        assert!(!r.ack_due());
        r.on_data(Time::ZERO, 1000, 1000, false, true, false); // CE: state changes
        let old = r.pop_pending().expect("an ACK with the old state");
        assert_eq!((old.ack, old.ece), (1000, false));
        assert!(r.ack_due(), "and the new segment is acknowledged at once");
        let now = r.ack_info();
        assert_eq!((now.ack, now.ece), (2000, true));
        r.on_ack_sent();
        // CE stays: normal delayed ACKs with ECE set
        r.on_data(Time::ZERO, 2000, 1000, false, true, false);
        assert!(!r.ack_due());
        assert!(r.ack_info().ece);
        assert_eq!(r.stats().ce_marks, 2);
    }

    #[test]
    fn fin_is_acknowledged_once_in_order() {
        let mut r = rx();
        r.on_data(Time::ZERO, 1000, 0, true, false, false); // FIN before data
        assert!(!r.fin_received());
        r.on_data(Time::ZERO, 0, 1000, false, false, false);
        assert!(r.fin_received());
        assert_eq!(r.ack_info().ack, 1001);
        assert_eq!(Receiver::wscale_for(4 << 20), 7);
    }
}
