//! The sender's scoreboard: every segment sent and not yet cumulatively acknowledged, with
//! its SACK, loss and retransmission state, and the `pipe` of RFC 6675.
//!
//! Offsets are 64-bit positions in the byte stream (0 = the first data byte), so sequence
//! number wrap-around never reaches this code; the connection converts at the edge.
//!
//! * `pipe` (RFC 6675 section 4, SetPipe) is kept incrementally: a segment counts while it is
//!   neither SACKed nor marked lost, or after it was retransmitted.
//! * Loss marking (RFC 6675 section 4, IsLost with DupThresh = `dupthresh`): a segment is lost
//!   when at least `dupthresh` segments above it have been SACKed. Marks are monotone, so a
//!   frontier remembers how far down they were applied and each segment is examined about
//!   once.
//! * Segments marked lost wait in a queue, in sequence order, for retransmission (NextSeg
//!   rule 1).
//! * Lost retransmissions (optional, as Linux's `tcp_mark_lost_retrans` before RACK): a
//!   retransmitted segment still unacknowledged when data first sent after it has been
//!   SACKed is lost again. Without this (RFC 6675 alone, and ns-3) only the timer finds it.

use latnet_units::Time;
use std::collections::VecDeque;

/// One segment in flight or SACKed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SentSeg {
    /// First offset.
    pub start: u64,
    /// One past the last offset (a FIN occupies one).
    pub end: u64,
    /// Carries the FIN.
    pub fin: bool,
    /// Last (re)transmission time.
    pub sent_at: Time,
    /// SACKed by the receiver.
    pub sacked: bool,
    /// Marked lost (by SACK or by the timer) and not retransmitted since.
    pub lost: bool,
    /// Retransmitted at least once (no RTT sample from it: Karn).
    pub retx: bool,
    /// Counted in `pipe`.
    pub in_pipe: bool,
    /// Delivery-rate state when sent: delivered count.
    pub delivered: u64,
    /// Delivery-rate state when sent: time of the last delivery.
    pub delivered_time: Time,
    /// Delivery-rate state when sent: send time of the first segment of the flight.
    pub first_sent_time: Time,
    /// Sent while the application limited the sender.
    pub app_limited: bool,
}

impl SentSeg {
    /// Payload bytes.
    pub fn payload(&self) -> u64 {
        self.end - self.start - u64::from(self.fin)
    }
}

/// The scoreboard.
#[derive(Debug, Clone, Default)]
pub struct Scoreboard {
    segs: VecDeque<SentSeg>,
    pipe: u64,
    lost_queue: VecDeque<u64>,
    /// Offsets below this were examined by loss marking.
    frontier: u64,
    highest_sacked: u64,
    sacked_bytes: u64,
    /// Retransmissions in flight: (start, snd_nxt when retransmitted), in sending order.
    retx_order: VecDeque<(u64, u64)>,
}

impl Scoreboard {
    /// Bytes in flight (RFC 6675 pipe).
    pub fn pipe(&self) -> u64 {
        self.pipe
    }

    /// The end of the highest segment ever SACKed (RFC 8985's `RACK.fack`, Linux's
    /// `snd_fack` by SACK; 0: none yet).
    pub fn highest_sacked(&self) -> u64 {
        self.highest_sacked
    }

    /// Bytes SACKed above the cumulative ACK.
    pub fn sacked_bytes(&self) -> u64 {
        self.sacked_bytes
    }

    /// No segment outstanding.
    pub fn is_empty(&self) -> bool {
        self.segs.is_empty()
    }

    /// Segments outstanding.
    pub fn len(&self) -> usize {
        self.segs.len()
    }

    /// The oldest outstanding segment.
    pub fn front(&self) -> Option<&SentSeg> {
        self.segs.front()
    }

    /// Append a newly sent segment (counted in pipe).
    pub fn push(&mut self, mut s: SentSeg) {
        s.in_pipe = true;
        self.pipe += s.payload();
        self.segs.push_back(s);
    }

    fn index_of(&self, start: u64) -> Option<usize> {
        let i = self.segs.partition_point(|s| s.start < start);
        (self.segs.get(i)?.start == start).then_some(i)
    }

    fn unpipe(&mut self, i: usize) {
        let s = &mut self.segs[i];
        if s.in_pipe {
            s.in_pipe = false;
            self.pipe -= s.payload();
        }
    }

    /// Remove every segment ending at or below `ack`; `f` sees each one removed (before its
    /// state changes). Returns the number removed.
    pub fn ack_through(&mut self, ack: u64, mut f: impl FnMut(&SentSeg)) -> usize {
        let mut n = 0;
        while let Some(s) = self.segs.front() {
            if s.end > ack {
                break;
            }
            f(s);
            if s.in_pipe {
                self.pipe -= s.payload();
            }
            if s.sacked {
                self.sacked_bytes -= s.end - s.start;
            }
            self.segs.pop_front();
            n += 1;
        }
        self.frontier = self.frontier.max(ack);
        n
    }

    /// Mark the segments lying entirely within `[lo, hi)` as SACKed; `f` sees each one newly
    /// SACKed.
    pub fn sack(&mut self, lo: u64, hi: u64, mut f: impl FnMut(&SentSeg)) {
        let mut i = self.segs.partition_point(|s| s.start < lo);
        while i < self.segs.len() && self.segs[i].end <= hi {
            if !self.segs[i].sacked {
                f(&self.segs[i]);
                self.unpipe(i);
                let s = &mut self.segs[i];
                s.sacked = true;
                s.lost = false;
                self.sacked_bytes += s.end - s.start;
                self.highest_sacked = self.highest_sacked.max(s.end);
            }
            i += 1;
        }
    }

    /// Mark lost every segment with at least `dupthresh` SACKed segments above it (RFC 6675
    /// IsLost). Returns the payload bytes newly marked lost.
    pub fn mark_sack_losses(&mut self, dupthresh: u32) -> u64 {
        if self.highest_sacked <= self.frontier || self.segs.is_empty() {
            return 0;
        }
        // Walk down from the highest SACKed segment to the `dupthresh`-th SACKed one.
        let top = self.segs.partition_point(|s| s.end <= self.highest_sacked.saturating_sub(1));
        let mut count = 0;
        let mut j = None;
        let mut i = top.min(self.segs.len() - 1) + 1;
        while i > 0 {
            i -= 1;
            let s = &self.segs[i];
            if s.end <= self.frontier {
                break;
            }
            if s.sacked {
                count += 1;
                if count >= dupthresh {
                    j = Some(i);
                    break;
                }
            }
        }
        let Some(j) = j else { return 0 };
        let lo = self.segs.partition_point(|s| s.end <= self.frontier);
        let mut newly = 0;
        for k in lo..j {
            newly += self.mark_lost_at(k);
        }
        self.frontier = self.frontier.max(self.segs[j].start);
        newly
    }

    /// Mark the oldest outstanding segment lost (a third duplicate ACK, or a partial ACK in
    /// NewReno recovery, without SACK). Returns payload bytes newly marked.
    pub fn mark_front_lost(&mut self) -> u64 {
        if self.segs.is_empty() {
            return 0;
        }
        self.mark_lost_at(0)
    }

    fn mark_lost_at(&mut self, k: usize) -> u64 {
        let s = self.segs[k];
        if s.sacked || (s.lost && !s.in_pipe) {
            return 0;
        }
        if s.retx && !s.lost && k != 0 {
            // already retransmitted after an earlier mark: only the timer declares it again
            return 0;
        }
        self.unpipe(k);
        self.segs[k].lost = true;
        self.lost_queue.push_back(s.start);
        s.payload().max(1)
    }

    /// The retransmission timer expired: every segment not SACKed is lost. Returns the bytes
    /// that were in the pipe.
    pub fn mark_all_lost(&mut self) -> u64 {
        let before = self.pipe;
        self.lost_queue.clear();
        self.retx_order.clear();
        for k in 0..self.segs.len() {
            if !self.segs[k].sacked {
                self.unpipe(k);
                let s = &mut self.segs[k];
                s.lost = true;
                self.lost_queue.push_back(s.start);
            }
        }
        self.frontier = self.segs.back().map_or(self.frontier, |s| s.end);
        before
    }

    /// The next segment to retransmit (NextSeg rule 1), if any.
    pub fn next_lost(&mut self) -> Option<SentSeg> {
        while let Some(&start) = self.lost_queue.front() {
            match self.index_of(start) {
                Some(i) if self.segs[i].lost && !self.segs[i].sacked => return Some(self.segs[i]),
                _ => {
                    self.lost_queue.pop_front();
                }
            }
        }
        None
    }

    /// Mark lost again every retransmission that data sent after it overtook (some segment
    /// starting at or above the `snd_nxt` of its retransmission was SACKed). Returns the
    /// payload bytes marked.
    pub fn mark_lost_retransmissions(&mut self) -> u64 {
        let mut newly = 0;
        while let Some(&(start, nxt)) = self.retx_order.front() {
            if self.highest_sacked <= nxt {
                break; // nothing sent after this retransmission has been SACKed yet
            }
            self.retx_order.pop_front();
            let Some(k) = self.index_of(start) else { continue };
            let s = self.segs[k];
            if s.sacked || s.lost || !s.retx {
                continue;
            }
            self.unpipe(k);
            self.segs[k].lost = true;
            // keep the retransmission queue in sequence order
            let at = self.lost_queue.partition_point(|&x| x < start);
            self.lost_queue.insert(at, start);
            newly += s.payload().max(1);
        }
        newly
    }

    /// The segment starting at `start` was retransmitted at `now` while `nxt` was the highest
    /// offset sent; `update` refreshes its delivery-rate fields.
    pub fn on_retransmit(
        &mut self,
        start: u64,
        nxt: u64,
        now: Time,
        update: impl FnOnce(&mut SentSeg),
    ) {
        self.retx_order.push_back((start, nxt));
        if self.lost_queue.front() == Some(&start) {
            self.lost_queue.pop_front();
        }
        if let Some(i) = self.index_of(start) {
            let s = &mut self.segs[i];
            s.lost = false;
            s.retx = true;
            s.sent_at = now;
            update(s);
            if !s.in_pipe {
                s.in_pipe = true;
                self.pipe += s.payload();
            }
        }
    }

    /// RACK's marking: every segment neither SACKed nor already marked that was sent before
    /// the one at (`xmit`, `end`) is lost once `now >= its send time + wait` (`wait`: RACK's
    /// RTT plus the reordering window). Returns the payload bytes marked and, if some such
    /// segment is not old enough yet, the longest wait until one comes due (Linux arms its
    /// timer for that one).
    ///
    /// Segments never retransmitted were sent in sequence order, and a retransmission is sent
    /// after every segment first sent before it, so the scan stops at the first segment never
    /// retransmitted that was sent at or after (`xmit`, `end`): everything above it was sent
    /// later still (Linux walks its send-time-ordered list and stops at the same point).
    pub fn rack_mark(
        &mut self,
        now: Time,
        xmit: Time,
        end: u64,
        wait: latnet_units::Duration,
    ) -> (u64, Option<latnet_units::Duration>) {
        let (mut newly, mut left) = (0, None::<latnet_units::Duration>);
        for k in 0..self.segs.len() {
            let s = self.segs[k];
            if s.sacked || s.lost {
                continue;
            }
            if (s.sent_at, s.end) >= (xmit, end) {
                if s.retx {
                    continue;
                }
                break;
            }
            let due = s.sent_at + wait;
            if now >= due {
                self.unpipe(k);
                self.segs[k].lost = true;
                let at = self.lost_queue.partition_point(|&x| x < s.start);
                self.lost_queue.insert(at, s.start);
                newly += s.payload().max(1);
            } else {
                left = Some(left.map_or(due - now, |l| l.max(due - now)));
            }
        }
        (newly, left)
    }

    /// Mark the last segment lost for a tail loss probe to retransmit; false if it is SACKed
    /// or already marked (or nothing is outstanding).
    pub fn mark_last_lost(&mut self) -> bool {
        let Some(k) = self.segs.len().checked_sub(1) else { return false };
        let s = self.segs[k];
        if s.sacked || s.lost {
            return false;
        }
        self.unpipe(k);
        self.segs[k].lost = true;
        let at = self.lost_queue.partition_point(|&x| x < s.start);
        self.lost_queue.insert(at, s.start);
        true
    }

    /// True if a segment waits for retransmission.
    pub fn has_lost(&mut self) -> bool {
        self.next_lost().is_some()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn seg(i: u64) -> SentSeg {
        SentSeg {
            start: i * 100,
            end: (i + 1) * 100,
            fin: false,
            sent_at: Time::ZERO,
            sacked: false,
            lost: false,
            retx: false,
            in_pipe: false,
            delivered: 0,
            delivered_time: Time::ZERO,
            first_sent_time: Time::ZERO,
            app_limited: false,
        }
    }

    fn board(n: u64) -> Scoreboard {
        let mut b = Scoreboard::default();
        for i in 0..n {
            b.push(seg(i));
        }
        b
    }

    #[test]
    fn sack_and_loss_marking_follow_rfc6675() {
        let mut b = board(10);
        assert_eq!(b.pipe(), 1000);
        // segment 2 lost; 3, 4 SACKed: only two above it, not lost yet
        b.sack(300, 500, |_| {});
        assert_eq!(b.pipe(), 800);
        assert_eq!(b.mark_sack_losses(3), 0);
        // 5 SACKed: three above segment 2 (and 0, 1 which are unacked too)
        b.sack(300, 600, |_| {});
        assert_eq!(b.mark_sack_losses(3), 300, "segments 0, 1, 2 lost");
        assert_eq!(b.pipe(), 400, "6..9 in flight");
        assert_eq!(b.next_lost().map(|s| s.start), Some(0));
        b.on_retransmit(0, 1000, Time::ZERO, |_| {});
        assert_eq!(b.pipe(), 500);
        assert_eq!(b.next_lost().map(|s| s.start), Some(100));
        // cumulative ACK past 1: 0 and 1 leave; 2 still lost
        b.ack_through(200, |_| {});
        assert_eq!(b.next_lost().map(|s| s.start), Some(200));
        assert_eq!(b.mark_sack_losses(3), 0, "nothing new");
        // 7 SACKed: 6 now has only one SACKed above: not lost
        b.sack(700, 800, |_| {});
        assert_eq!(b.mark_sack_losses(3), 0);
        assert_eq!(b.sacked_bytes(), 400);
    }

    #[test]
    fn timer_marks_everything_not_sacked() {
        let mut b = board(5);
        b.sack(200, 300, |_| {});
        assert_eq!(b.mark_all_lost(), 400);
        assert_eq!(b.pipe(), 0);
        let order: Vec<_> = std::iter::from_fn(|| {
            let s = b.next_lost()?;
            b.on_retransmit(s.start, 500, Time::ZERO, |_| {});
            Some(s.start)
        })
        .collect();
        assert_eq!(order, vec![0, 100, 300, 400]);
        assert_eq!(b.pipe(), 400);
    }

    #[test]
    fn a_retransmission_overtaken_by_later_data_is_lost_again() {
        let mut b = board(10);
        b.sack(100, 400, |_| {});
        assert_eq!(b.mark_sack_losses(3), 100);
        b.on_retransmit(0, 1000, Time::ZERO, |_| {}); // snd_nxt was 1000
        assert_eq!(b.mark_lost_retransmissions(), 0, "nothing sent after it was SACKed");
        for i in 10..12 {
            b.push(seg(i)); // new data after the retransmission
        }
        b.sack(400, 1000, |_| {});
        assert_eq!(b.mark_lost_retransmissions(), 0, "data sent before it does not count");
        b.sack(1000, 1100, |_| {});
        assert_eq!(b.mark_lost_retransmissions(), 100, "the first new segment arrived first");
        assert_eq!(b.next_lost().map(|s| s.start), Some(0));
    }

    #[test]
    fn rack_marks_what_was_sent_before_the_delivered_segment_once_old_enough() {
        let ms = latnet_units::Duration::from_millis;
        let at = |m: u64| Time::ZERO + ms(m);
        let mut b = Scoreboard::default();
        for i in 0..6 {
            b.push(SentSeg { sent_at: at(i), ..seg(i) }); // segment i sent at i ms
        }
        // segment 0 lost and retransmitted at 10 ms: now the newest send
        assert_eq!(b.mark_front_lost(), 100);
        b.on_retransmit(0, 600, at(10), |_| {});
        // 1 and 4 (sent at 4 ms) SACKed: 2 and 3 were sent before 4; 5 and the retransmitted
        // 0 after it
        b.sack(100, 200, |_| {});
        b.sack(400, 500, |_| {});
        let (marked, wait) = b.rack_mark(at(7), at(4), 500, ms(5));
        assert_eq!(marked, 100, "2, sent at 2 ms, is due at 7 ms");
        assert_eq!(wait, Some(ms(1)), "3 comes due at 8 ms");
        let (marked, wait) = b.rack_mark(at(8), at(4), 500, ms(5));
        assert_eq!((marked, wait), (100, None), "3 now; 5 and 0 were sent after 4");
        assert_eq!(b.next_lost().map(|s| s.start), Some(200));
        // the retransmitted 0 (sent at 10 ms) delivered: now 5 (sent at 5 ms) is older
        let (marked, _) = b.rack_mark(at(11), at(10), 100, ms(5));
        assert_eq!(marked, 100, "5 is found past the SACKed 4 and the marked 2, 3");
    }

    #[test]
    fn newreno_marks_the_front() {
        let mut b = board(3);
        assert_eq!(b.mark_front_lost(), 100);
        assert_eq!(b.mark_front_lost(), 0, "once");
        b.on_retransmit(0, 1000, Time::ZERO, |_| {});
        // a partial ACK in NewReno recovery marks the new front
        b.ack_through(100, |_| {});
        assert_eq!(b.mark_front_lost(), 100);
        assert_eq!(b.next_lost().map(|s| s.start), Some(100));
    }
}
