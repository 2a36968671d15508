//! Latency-Based Forwarding queues: a packet is never sent before its eligible time, and among
//! the packets that are eligible an [`LbfOrder`] picks the next one.
//!
//! Sources: the LBF seed (Clemm & Eckert, NOMS 2020, section IV.B: "a PIFO queue on the
//! lower-bound budget, then a FIFO, for example prioritized according to the budget for the
//! upper delay bound"), its proof of concept (github network2030/lbf-poc: slack buckets,
//! earliest eligible time first; a dynamic-priority option advertised but missing), and gLBF
//! (IETF DetNet draft) whose damper is this queue with `eligible = arrival + residue`.
//!
//! # Model
//!
//! Two stages. Stage 1 is a PIFO ranked by [`Meta::eligible`](crate::Meta::eligible) (ties in
//! arrival order). At each dequeue every packet whose eligible time has come moves, in eligible
//! order, to stage 2, where the [`LbfOrder`] decides:
//!
//! | order | scenario `kind` | stage 2 |
//! |---|---|---|
//! | [`LbfOrder::Fifo`] | `lbf` (`second = "fifo"`) | FIFO: packets leave in eligible order (the seed's two-stage queue) |
//! | [`LbfOrder::Budget`] | `lbf` (`second = "priority"`) | strict priority by the upper-bound budget `deadline - arrival`, class `min(budget / class_width, classes - 1)`; FIFO within a class; no deadline: last class |
//! | [`LbfOrder::Slack`] | `lbf-slack` | the PoC: smallest slack bucket first, slack = `deadline - eligible` (`qmax - qmin`), bucket `min(slack / bucket, buckets - 1)`; earliest eligible first within a bucket; no deadline: last bucket |
//! | [`LbfOrder::Deadline`] | `lbf-dynamic` | dynamic priority: least laxity `deadline - now` first, i.e. earliest deadline; no deadline: after all others, in eligible order |
//!
//! The dynamic priority of a waiting packet rises as `now` approaches its deadline, but two
//! waiting packets never swap places (both laxities shrink at the same rate), so a heap on the
//! absolute deadline implements it exactly.
//!
//! A packet whose [`Meta::expires`](crate::Meta::expires) has passed when it reaches the head
//! of stage 2 is dropped (`deadline-expired`, counted, handed out by
//! [`Queue::poll_drop`]) and the next one is taken.
//!
//! # Contract
//!
//! * Never releases a packet before its eligible time (property-tested).
//! * `enqueue` and `dequeue` are O(log n) (amortized: a packet moves between stages once; the
//!   bucket scan of `Slack` / `Budget` is over at most [`MAX_CLASSES`] classes, a constant).
//! * Bounded by [`QueueLimits`] over both stages together; tail drop at enqueue.
//!
//! Ports: one input, one output (pull). Counters: [`QueueStats`]; drops `queue-full-packets`,
//! `queue-full-bytes`, `deadline-expired`.

use super::{Dropped, Queue, QueueLimits, QueueStats, Verdict};
use crate::drop::DropReason;
use crate::packet::Packet;
use latnet_units::{Bytes, Duration, Time};
use std::cmp::{Ordering, Reverse};
use std::collections::{BinaryHeap, VecDeque};

/// Most classes or slack buckets of a stage 2 with classes.
pub const MAX_CLASSES: usize = 1024;

/// How stage 2 orders eligible packets (see the module documentation).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LbfOrder {
    /// First eligible, first out.
    Fifo,
    /// Strict priority by upper-bound budget classes.
    Budget {
        /// Width of a class.
        width: Duration,
        /// Number of classes (1..=`MAX_CLASSES` (1,024)).
        classes: u16,
    },
    /// The PoC's slack buckets.
    Slack {
        /// Width of a bucket.
        width: Duration,
        /// Number of buckets (1..=`MAX_CLASSES` (1,024)).
        buckets: u16,
    },
    /// Earliest deadline (least laxity) first.
    Deadline,
}

#[derive(Debug, Clone)]
struct Ranked {
    key: (Time, Time, u64),
    pkt: Packet,
}

impl PartialEq for Ranked {
    fn eq(&self, o: &Self) -> bool {
        self.key == o.key
    }
}
impl Eq for Ranked {}
impl PartialOrd for Ranked {
    fn partial_cmp(&self, o: &Self) -> Option<Ordering> {
        Some(self.cmp(o))
    }
}
impl Ord for Ranked {
    fn cmp(&self, o: &Self) -> Ordering {
        self.key.cmp(&o.key)
    }
}

#[derive(Debug, Clone)]
enum Stage2 {
    Fifo(VecDeque<Packet>),
    Classes { q: Vec<VecDeque<Packet>>, width: Duration, slack: bool },
    Heap(BinaryHeap<Reverse<Ranked>>),
}

/// An LBF queue (see the module documentation).
#[derive(Debug, Clone)]
pub struct LbfQueue {
    limits: QueueLimits,
    order: LbfOrder,
    pifo: BinaryHeap<Reverse<Ranked>>,
    stage2: Stage2,
    in_stage2: usize,
    len: usize,
    bytes: Bytes,
    seq: u64,
    dropped: VecDeque<Dropped>,
    stats: QueueStats,
}

impl LbfQueue {
    /// An empty queue. Class and bucket counts are clamped to 1..=`MAX_CLASSES` (1,024) (callers
    /// validate configuration), a zero width to 1 ns.
    pub fn new(limits: QueueLimits, order: LbfOrder) -> Self {
        let classes = |n: u16| (0..usize::from(n).clamp(1, MAX_CLASSES)).map(|_| VecDeque::new());
        let stage2 = match order {
            LbfOrder::Fifo => Stage2::Fifo(VecDeque::new()),
            LbfOrder::Budget { width, classes: n } => Stage2::Classes {
                q: classes(n).collect(),
                width: width.max(Duration::from_nanos(1)),
                slack: false,
            },
            LbfOrder::Slack { width, buckets } => Stage2::Classes {
                q: classes(buckets).collect(),
                width: width.max(Duration::from_nanos(1)),
                slack: true,
            },
            LbfOrder::Deadline => Stage2::Heap(BinaryHeap::new()),
        };
        LbfQueue {
            limits,
            order,
            pifo: BinaryHeap::new(),
            stage2,
            in_stage2: 0,
            len: 0,
            bytes: Bytes::ZERO,
            seq: 0,
            dropped: VecDeque::new(),
            stats: QueueStats::default(),
        }
    }

    /// The limits.
    pub fn limits(&self) -> QueueLimits {
        self.limits
    }

    /// The stage-2 order.
    pub fn order(&self) -> LbfOrder {
        self.order
    }

    /// Packets in stage 1 (not yet eligible at the last dequeue).
    pub fn waiting(&self) -> usize {
        self.len - self.in_stage2
    }

    fn promote(&mut self, now: Time) {
        while self.pifo.peek().is_some_and(|Reverse(r)| r.key.0 <= now) {
            let Some(Reverse(r)) = self.pifo.pop() else { break };
            let pkt = r.pkt;
            self.in_stage2 += 1;
            match &mut self.stage2 {
                Stage2::Fifo(q) => q.push_back(pkt),
                Stage2::Classes { q, width, slack } => {
                    let last = q.len() - 1;
                    let c = match pkt.meta.deadline {
                        None => last,
                        Some(d) => {
                            let from = if *slack { pkt.meta.eligible } else { pkt.meta.arrival };
                            let span = d.saturating_duration_since(from).as_nanos();
                            usize::try_from(span / width.as_nanos()).unwrap_or(last).min(last)
                        }
                    };
                    q[c].push_back(pkt);
                }
                Stage2::Heap(h) => {
                    let d = pkt.meta.deadline.unwrap_or(Time::MAX);
                    h.push(Reverse(Ranked { key: (d, pkt.meta.eligible, r.key.2), pkt }));
                }
            }
        }
    }

    fn pop_stage2(&mut self) -> Option<Packet> {
        let p = match &mut self.stage2 {
            Stage2::Fifo(q) => q.pop_front(),
            Stage2::Classes { q, .. } => q.iter_mut().find_map(VecDeque::pop_front),
            Stage2::Heap(h) => h.pop().map(|Reverse(r)| r.pkt),
        }?;
        self.in_stage2 -= 1;
        self.len -= 1;
        self.bytes -= p.wire_len();
        Some(p)
    }

    fn stage2_head_eligible(&self) -> Option<Time> {
        match &self.stage2 {
            Stage2::Fifo(q) => q.front().map(|p| p.meta.eligible),
            Stage2::Classes { q, .. } => {
                q.iter().filter_map(|c| c.front()).map(|p| p.meta.eligible).min()
            }
            Stage2::Heap(h) => h.peek().map(|Reverse(r)| r.pkt.meta.eligible),
        }
    }
}

impl Queue for LbfQueue {
    fn enqueue(&mut self, now: Time, mut pkt: Packet) -> Verdict {
        if let Some(reason) = self.limits.check(self.len, self.bytes, &pkt) {
            self.stats.on_drop(reason);
            return Verdict::drop(pkt, reason);
        }
        pkt.meta.arrival = now;
        self.seq += 1;
        self.len += 1;
        self.bytes += pkt.wire_len();
        self.stats.on_enqueue(&pkt, self.len, self.bytes);
        let key = (pkt.meta.eligible, Time::ZERO, self.seq);
        self.pifo.push(Reverse(Ranked { key, pkt }));
        Verdict::Enqueued
    }

    fn dequeue(&mut self, now: Time) -> Option<Packet> {
        self.promote(now);
        while let Some(p) = self.pop_stage2() {
            if p.meta.expires.is_some_and(|e| now > e) {
                self.stats.on_drop(DropReason::DeadlineExpired);
                self.dropped.push_back(Dropped { pkt: p, reason: DropReason::DeadlineExpired });
                continue;
            }
            self.stats.on_dequeue(&p);
            return Some(p);
        }
        None
    }

    fn next_ready(&self, _now: Time) -> Option<Time> {
        let a = self.stage2_head_eligible();
        let b = self.pifo.peek().map(|Reverse(r)| r.key.0);
        match (a, b) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }

    fn poll_drop(&mut self) -> Option<Dropped> {
        self.dropped.pop_front()
    }

    fn drain(&mut self) -> Option<Packet> {
        self.promote(Time::MAX);
        self.pop_stage2()
    }

    fn len(&self) -> usize {
        self.len
    }

    fn byte_len(&self) -> Bytes {
        self.bytes
    }

    fn stats(&self) -> &QueueStats {
        &self.stats
    }
}

#[cfg(test)]
#[path = "lbf_tests.rs"]
mod tests;
