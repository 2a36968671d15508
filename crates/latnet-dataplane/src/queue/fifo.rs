//! A bounded first-in first-out queue with tail drop.
//!
//! Ports: one input, one output (pull). Parameters: `limit_packets`, `limit_bytes` (wire
//! length). Counters: [`QueueStats`], drops `queue-full-packets` / `queue-full-bytes`.

use super::{Queue, QueueLimits, QueueStats, Verdict};
use crate::packet::Packet;
use latnet_units::{Bytes, Time};
use std::collections::VecDeque;

/// Bounded FIFO.
#[derive(Debug, Clone)]
pub struct Fifo {
    limits: QueueLimits,
    q: VecDeque<Packet>,
    bytes: Bytes,
    stats: QueueStats,
}

impl Fifo {
    /// An empty FIFO with these limits.
    pub fn new(limits: QueueLimits) -> Self {
        Fifo { limits, q: VecDeque::new(), bytes: Bytes::ZERO, stats: QueueStats::default() }
    }

    /// The limits.
    pub fn limits(&self) -> QueueLimits {
        self.limits
    }

    /// The packet at the head, if any.
    pub fn peek(&self) -> Option<&Packet> {
        self.q.front()
    }
}

impl Queue for Fifo {
    #[inline]
    fn enqueue(&mut self, now: Time, mut pkt: Packet) -> Verdict {
        if let Some(reason) = self.limits.check(self.q.len(), self.bytes, &pkt) {
            self.stats.on_drop(reason);
            return Verdict::drop(pkt, reason);
        }
        pkt.meta.arrival = now;
        self.bytes += pkt.wire_len();
        self.q.push_back(pkt);
        if let Some(p) = self.q.back() {
            self.stats.on_enqueue(p, self.q.len(), self.bytes);
        }
        Verdict::Enqueued
    }

    #[inline]
    fn dequeue(&mut self, _now: Time) -> Option<Packet> {
        let pkt = self.q.pop_front()?;
        self.bytes -= pkt.wire_len();
        self.stats.on_dequeue(&pkt);
        Some(pkt)
    }

    #[inline]
    fn next_ready(&self, _now: Time) -> Option<Time> {
        self.q.front().map(|p| p.meta.arrival)
    }

    fn drain(&mut self) -> Option<Packet> {
        let pkt = self.q.pop_front()?;
        self.bytes -= pkt.wire_len();
        Some(pkt)
    }

    fn len(&self) -> usize {
        self.q.len()
    }

    fn byte_len(&self) -> Bytes {
        self.bytes
    }

    fn stats(&self) -> &QueueStats {
        &self.stats
    }
}
