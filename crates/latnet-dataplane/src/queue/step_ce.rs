//! A FIFO that marks ECN-capable packets CE above a step threshold: the marking bottleneck of
//! DCTCP (RFC 8257 section 3.1, "mark when the instantaneous queue exceeds K") and of L4S
//! queues (the DualPI2 step, Linux `fq_codel ce_threshold`).
//!
//! Ports: one input, one output (pull). Parameters (exactly one threshold):
//!
//! | key | unit | rule |
//! |---|---|---|
//! | `threshold_packets` | packets | at enqueue, mark if the queue already holds at least this many (ns-3 RED with `MinTh = MaxTh = K`, `QW = 1`; DCTCP's K) |
//! | `threshold_bytes` | bytes | at enqueue, mark if the queue already holds at least this many bytes |
//! | `threshold` | time | at dequeue, mark if the packet waited longer than this (sojourn time) |
//! | `non_ect` | `pass` / `drop` | a Not-ECT packet that would have been marked passes (default) or is dropped (`aqm-drop`, as RED does) |
//!
//! plus `limit_packets` / `limit_bytes` (tail drop). Counters: [`QueueStats`] with
//! `ce_marks`, drops by reason.

use super::{Dropped, Fifo, Queue, QueueLimits, QueueStats, Verdict};
use crate::drop::DropReason;
use crate::ecn::{mark_ce, MarkOutcome};
use crate::packet::Packet;
use latnet_units::{Bytes, Duration, Time};
use serde::Deserialize;
use std::collections::VecDeque;

/// What happens to a Not-ECT packet above the threshold.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum NonEct {
    /// Forward it unmarked.
    #[default]
    Pass,
    /// Drop it (`aqm-drop`).
    Drop,
}

/// The marking rule.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Threshold {
    /// Queue length in packets at enqueue.
    Packets(u32),
    /// Queue length in bytes at enqueue.
    Bytes(Bytes),
    /// Sojourn time at dequeue.
    Sojourn(Duration),
}

/// Step-marking FIFO.
#[derive(Debug, Clone)]
pub struct StepCe {
    fifo: Fifo,
    threshold: Threshold,
    non_ect: NonEct,
    stats: QueueStats,
    dropped: VecDeque<Dropped>,
}

impl StepCe {
    /// A step-marking FIFO.
    pub fn new(limits: QueueLimits, threshold: Threshold, non_ect: NonEct) -> Self {
        StepCe {
            fifo: Fifo::new(limits),
            threshold,
            non_ect,
            stats: QueueStats::default(),
            dropped: VecDeque::new(),
        }
    }

    /// Mark `pkt`; false if it must be dropped instead (Not-ECT with `non_ect = drop`).
    fn signal(&mut self, pkt: &mut Packet) -> bool {
        match mark_ce(&mut pkt.data) {
            MarkOutcome::Marked => {
                self.stats.ce_marks += 1;
                true
            }
            MarkOutcome::NotEct | MarkOutcome::NotIp => self.non_ect == NonEct::Pass,
            MarkOutcome::AlreadyCe => true,
        }
    }
}

impl Queue for StepCe {
    fn enqueue(&mut self, now: Time, mut pkt: Packet) -> Verdict {
        // a packet the full queue refuses is neither marked nor counted as marked
        let fits = self.fifo.limits().check(self.fifo.len(), self.fifo.byte_len(), &pkt).is_none();
        let over = fits
            && match self.threshold {
                Threshold::Packets(k) => self.fifo.len() >= k as usize,
                Threshold::Bytes(b) => self.fifo.byte_len() >= b,
                Threshold::Sojourn(_) => false,
            };
        if over && !self.signal(&mut pkt) {
            self.stats.on_drop(DropReason::AqmDrop);
            return Verdict::drop(pkt, DropReason::AqmDrop);
        }
        let size = pkt.wire_len();
        match self.fifo.enqueue(now, pkt) {
            Verdict::Enqueued => {
                self.stats.enqueued_packets += 1;
                self.stats.enqueued_bytes += size.get();
                self.stats.peak_packets = self.stats.peak_packets.max(self.fifo.len() as u64);
                self.stats.peak_bytes = self.stats.peak_bytes.max(self.fifo.byte_len().get());
                Verdict::Enqueued
            }
            Verdict::Dropped(d) => {
                self.stats.on_drop(d.reason);
                Verdict::Dropped(d)
            }
        }
    }

    fn dequeue(&mut self, now: Time) -> Option<Packet> {
        loop {
            let mut pkt = self.fifo.dequeue(now)?;
            if let Threshold::Sojourn(t) = self.threshold {
                if now.saturating_duration_since(pkt.meta.arrival) > t && !self.signal(&mut pkt) {
                    self.stats.on_drop(DropReason::AqmDrop);
                    self.dropped.push_back(Dropped { pkt, reason: DropReason::AqmDrop });
                    continue;
                }
            }
            self.stats.on_dequeue(&pkt);
            return Some(pkt);
        }
    }

    fn next_ready(&self, now: Time) -> Option<Time> {
        self.fifo.next_ready(now)
    }

    fn poll_drop(&mut self) -> Option<Dropped> {
        self.dropped.pop_front()
    }

    fn drain(&mut self) -> Option<Packet> {
        // no sojourn check: a packet still waiting when the run ends was not marked or dropped
        self.fifo.drain()
    }

    fn len(&self) -> usize {
        self.fifo.len()
    }

    fn byte_len(&self) -> Bytes {
        self.fifo.byte_len()
    }

    fn stats(&self) -> &QueueStats {
        &self.stats
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ecn::ecn_of;
    use crate::packet::Meta;
    use latnet_wire::{Ecn, EthernetAddress};
    use std::net::Ipv4Addr;

    fn pkt(ecn: Ecn) -> Packet {
        let mut f = Vec::new();
        let m = EthernetAddress([2, 0, 0, 0, 0, 1]);
        let (a, b) = (Ipv4Addr::new(10, 0, 0, 1), Ipv4Addr::new(10, 0, 0, 2));
        latnet_wire::build_udp_ipv4(&mut f, m, m, a, b, 0, ecn, 64, 1, 2, 958).unwrap();
        Packet::new(f, 958, Meta::default())
    }

    fn t(ns: u64) -> Time {
        Time::from_nanos(ns)
    }

    #[test]
    fn marks_ect_at_and_above_k_packets() {
        let mut q = StepCe::new(QueueLimits::default(), Threshold::Packets(2), NonEct::Pass);
        for e in [Ecn::Ect0, Ecn::Ect1, Ecn::Ect0, Ecn::NotEct, Ecn::Ect1] {
            assert_eq!(q.enqueue(t(0), pkt(e)), Verdict::Enqueued);
        }
        let got: Vec<_> = std::iter::from_fn(|| q.dequeue(t(1))).map(|p| ecn_of(&p.data)).collect();
        let want = [Ecn::Ect0, Ecn::Ect1, Ecn::Ce, Ecn::NotEct, Ecn::Ce].map(Some);
        assert_eq!(got, want, "the first two find fewer than 2 queued; Not-ECT passes unmarked");
        assert_eq!(q.stats().ce_marks, 2);
    }

    #[test]
    fn drop_mode_drops_not_ect_above_k() {
        let mut q = StepCe::new(QueueLimits::default(), Threshold::Packets(1), NonEct::Drop);
        assert_eq!(q.enqueue(t(0), pkt(Ecn::NotEct)), Verdict::Enqueued);
        match q.enqueue(t(0), pkt(Ecn::NotEct)) {
            Verdict::Dropped(d) => assert_eq!(d.reason, DropReason::AqmDrop),
            v => panic!("{v:?}"),
        }
        assert_eq!(q.stats().drops.get(DropReason::AqmDrop), 1);
    }

    #[test]
    fn sojourn_threshold_marks_at_dequeue() {
        let th = Threshold::Sojourn(Duration::from_micros(100));
        let mut q = StepCe::new(QueueLimits::default(), th, NonEct::Drop);
        let _ = q.enqueue(t(0), pkt(Ecn::Ect1));
        let _ = q.enqueue(t(0), pkt(Ecn::Ect1));
        let _ = q.enqueue(t(0), pkt(Ecn::NotEct));
        assert_eq!(q.dequeue(t(100_000)).map(|p| ecn_of(&p.data)), Some(Some(Ecn::Ect1)));
        assert_eq!(q.dequeue(t(100_001)).map(|p| ecn_of(&p.data)), Some(Some(Ecn::Ce)));
        // Not-ECT over the threshold in drop mode: dropped at dequeue, reported by poll_drop
        assert!(q.dequeue(t(200_000)).is_none());
        assert_eq!(q.poll_drop().map(|d| d.reason), Some(DropReason::AqmDrop));
        assert_eq!(q.stats().ce_marks, 1);
    }

    /// A packet refused by the full queue was not marked: `ce_marks` counts only packets
    /// that carry the mark on (a full queue is above any threshold, so every refused ECT
    /// packet was once counted as marked).
    #[test]
    fn tail_dropped_packets_are_not_counted_as_marked() {
        let limits = QueueLimits { limit_packets: 2, ..QueueLimits::default() };
        let mut q = StepCe::new(limits, Threshold::Packets(1), NonEct::Drop);
        for _ in 0..2 {
            assert_eq!(q.enqueue(t(0), pkt(Ecn::Ect1)), Verdict::Enqueued);
        }
        match q.enqueue(t(0), pkt(Ecn::Ect1)) {
            Verdict::Dropped(d) => assert_eq!(d.reason, DropReason::QueueFullPackets),
            v => panic!("{v:?}"),
        }
        let ce = std::iter::from_fn(|| q.dequeue(t(1)))
            .filter(|p| ecn_of(&p.data) == Some(Ecn::Ce))
            .count() as u64;
        assert_eq!(ce, 1);
        assert_eq!(q.stats().ce_marks, ce);
        assert_eq!(q.stats().drops.get(DropReason::QueueFullPackets), 1);
    }

    #[test]
    fn spec_needs_exactly_one_threshold() {
        let ok: super::super::QueueSpec =
            toml::from_str("kind = \"step-ce\"\nthreshold_packets = 20\nlimit_packets = 100")
                .unwrap();
        assert!(ok.build().is_ok());
        let none: super::super::QueueSpec = toml::from_str("kind = \"step-ce\"").unwrap();
        assert!(none.build().unwrap_err().to_string().contains("exactly one"));
        let two: super::super::QueueSpec =
            toml::from_str("kind = \"step-ce\"\nthreshold_packets = 2\nthreshold = \"1ms\"")
                .unwrap();
        assert!(two.build().is_err());
    }
}
