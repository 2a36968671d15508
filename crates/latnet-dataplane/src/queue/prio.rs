//! Strict-priority scheduler over up to eight child queues.
//!
//! Ports: one input, one output (pull). The child is chosen by the packet's
//! [`Meta::priority`](crate::packet::Meta::priority): priority `p` goes to class
//! `min(p, classes - 1)`; class 0 is served first. Dequeue takes from the first class that has
//! a packet eligible now, so a non-work-conserving child (e.g. an LBF queue waiting for an
//! eligible time) does not block lower classes. Counters: the scheduler's own
//! [`QueueStats`] (all classes together) plus each child's.

use super::{AnyQueue, Dropped, Queue, QueueStats, Verdict};
use crate::packet::Packet;
use latnet_units::{Bytes, Time};

/// Maximum number of classes.
pub const MAX_CLASSES: usize = 8;

/// Strict priority over child queues.
#[derive(Debug, Clone)]
pub struct StrictPriority {
    classes: Vec<AnyQueue>,
    stats: QueueStats,
}

impl StrictPriority {
    /// A scheduler over `classes` (index 0 = highest priority). At most `MAX_CLASSES` (8)
    /// are used; extra children are ignored (callers validate counts from configuration).
    pub fn new(mut classes: Vec<AnyQueue>) -> Self {
        classes.truncate(MAX_CLASSES);
        StrictPriority { classes, stats: QueueStats::default() }
    }

    /// The child queues, highest priority first.
    pub fn classes(&self) -> &[AnyQueue] {
        &self.classes
    }

    fn class_of(&self, pkt: &Packet) -> usize {
        usize::from(pkt.meta.priority).min(self.classes.len().saturating_sub(1))
    }
}

impl Queue for StrictPriority {
    fn enqueue(&mut self, now: Time, pkt: Packet) -> Verdict {
        let c = self.class_of(&pkt);
        let Some(child) = self.classes.get_mut(c) else {
            // No classes at all: nothing can be held.
            self.stats.on_drop(crate::DropReason::QueueFullPackets);
            return Verdict::drop(pkt, crate::DropReason::QueueFullPackets);
        };
        let size = pkt.wire_len();
        let v = child.enqueue(now, pkt);
        match &v {
            Verdict::Enqueued => {
                self.stats.enqueued_packets += 1;
                self.stats.enqueued_bytes += size.get();
                self.stats.peak_packets = self.stats.peak_packets.max(self.len() as u64);
                self.stats.peak_bytes = self.stats.peak_bytes.max(self.byte_len().get());
            }
            Verdict::Dropped(d) => self.stats.on_drop(d.reason),
        }
        v
    }

    fn dequeue(&mut self, now: Time) -> Option<Packet> {
        for child in &mut self.classes {
            match child.next_ready(now) {
                Some(t) if t <= now => {
                    if let Some(p) = child.dequeue(now) {
                        self.stats.on_dequeue(&p);
                        return Some(p);
                    }
                    // The child dropped what it had (e.g. expired): keep looking.
                }
                _ => {}
            }
        }
        None
    }

    fn next_ready(&self, now: Time) -> Option<Time> {
        self.classes.iter().filter_map(|c| c.next_ready(now)).min()
    }

    fn drain(&mut self) -> Option<Packet> {
        self.classes.iter_mut().find_map(|c| c.drain())
    }

    fn poll_drop(&mut self) -> Option<Dropped> {
        for child in &mut self.classes {
            if let Some(d) = child.poll_drop() {
                self.stats.on_drop(d.reason);
                return Some(d);
            }
        }
        None
    }

    fn len(&self) -> usize {
        self.classes.iter().map(Queue::len).sum()
    }

    fn byte_len(&self) -> Bytes {
        self.classes.iter().map(Queue::byte_len).sum()
    }

    fn stats(&self) -> &QueueStats {
        &self.stats
    }
}
