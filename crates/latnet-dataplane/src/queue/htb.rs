//! An HTB-like shaper (after Linux `sch_htb`): a root token bucket with classes that each have
//! an assured `rate` and a `ceil` they may reach by borrowing the root's spare tokens. The
//! host-wide shaper of the pacing seed (hosts shape their traffic to bottleneck / N with tc
//! htb) is one class at the host's egress.
//!
//! Ports: one input, one output (pull); non-work-conserving ([`Queue::next_ready`] returns the
//! instant the next packet may leave). Classes are chosen by priority: priority `p` goes to
//! class `min(p, classes - 1)`; without `classes`, one class at the root's rate.
//!
//! | key | unit | meaning |
//! |---|---|---|
//! | `rate` | bit/s | root rate: all classes together never exceed it over time |
//! | `burst` | bytes | root bucket depth (default: 1 ms at `rate`, at least 3200 B) |
//! | `classes` | list of `{ rate, ceil, burst }` | assured rate, maximum rate (default `rate`), bucket depth |
//! | `limit_packets`, `limit_bytes` | | per class, tail drop |
//!
//! Dequeue order: a class with tokens for its head packet at its assured rate ("green")
//! first, lowest class index first; otherwise a class within its ceil while the root has
//! tokens ("yellow", borrowing), round robin. Every packet sent is charged to its class's two
//! buckets and to the root. Tokens are integers (bits x ns); no floating point. Counters: the
//! aggregate [`QueueStats`] and one per class.

use super::{Fifo, Queue, QueueLimits, QueueStats, Verdict};
use crate::packet::Packet;
use latnet_units::{Bytes, Duration, Rate, Time};
use serde::Deserialize;

/// A class as written in scenario files.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct HtbClassSpec {
    /// Assured rate.
    pub rate: Rate,
    /// Maximum rate when borrowing (default: the root rate).
    pub ceil: Option<Rate>,
    /// Bucket depth (default as the root's).
    pub burst: Option<Bytes>,
}

const NS: i128 = 1_000_000_000;

/// A token bucket in bits x ns (may go negative when a parent is charged).
#[derive(Debug, Clone, Copy)]
struct Bucket {
    rate: Rate,
    depth: i128,
    tokens: i128,
    at: Time,
}

impl Bucket {
    fn new(rate: Rate, depth: Bytes) -> Self {
        let depth = i128::try_from(depth.bits()).unwrap_or(i128::MAX / NS) * NS;
        Bucket { rate, depth, tokens: depth, at: Time::ZERO }
    }

    fn refill(&mut self, now: Time) {
        if now > self.at {
            let add = i128::try_from(self.rate.bit_nanos(now - self.at)).unwrap_or(i128::MAX / 2);
            self.tokens = self.tokens.saturating_add(add).min(self.depth);
            self.at = now;
        }
    }

    fn has(&self, bits: i128) -> bool {
        self.tokens >= bits * NS
    }

    fn charge(&mut self, bits: i128) {
        self.tokens -= bits * NS;
    }

    /// When the bucket will hold `bits` (refilled to `self.at`).
    fn ready_at(&self, bits: i128) -> Time {
        let need = bits * NS - self.tokens;
        if need <= 0 {
            return self.at;
        }
        let r = i128::from(self.rate.bps().max(1));
        let ns = u64::try_from((need + r - 1) / r).unwrap_or(u64::MAX);
        self.at.checked_add_duration(Duration::from_nanos(ns)).unwrap_or(Time::MAX)
    }
}

#[derive(Debug, Clone)]
struct Class {
    fifo: Fifo,
    assured: Bucket,
    ceil: Bucket,
}

/// HTB-like shaper.
#[derive(Debug, Clone)]
pub struct Htb {
    root: Bucket,
    classes: Vec<Class>,
    rr: usize,
    stats: QueueStats,
}

/// Default bucket depth: 1 ms at `rate`, at least two full frames.
pub fn default_burst(rate: Rate) -> Bytes {
    Bytes::new(rate.bytes_in(Duration::from_millis(1), latnet_units::Rounding::Up).get().max(3200))
}

impl Htb {
    /// A shaper at `rate` with bucket depth `burst` over `classes` (none: one class at
    /// `rate`), each class with `limits`.
    pub fn new(rate: Rate, burst: Bytes, classes: &[HtbClassSpec], limits: QueueLimits) -> Self {
        let one = [HtbClassSpec { rate, ceil: Some(rate), burst: Some(burst) }];
        let specs = if classes.is_empty() { &one[..] } else { classes };
        let classes = specs
            .iter()
            .map(|c| {
                let depth = c.burst.unwrap_or(burst);
                Class {
                    fifo: Fifo::new(limits),
                    assured: Bucket::new(c.rate, depth),
                    ceil: Bucket::new(c.ceil.unwrap_or(rate), depth),
                }
            })
            .collect();
        Htb { root: Bucket::new(rate, burst), classes, rr: 0, stats: QueueStats::default() }
    }

    /// Per-class counters.
    pub fn class_stats(&self) -> Vec<&QueueStats> {
        self.classes.iter().map(|c| c.fifo.stats()).collect()
    }

    /// Change the root rate (a host agent re-shaping); class rates are unchanged.
    pub fn set_rate(&mut self, now: Time, rate: Rate) {
        self.root.refill(now);
        self.root.rate = rate;
    }

    /// Re-shape a host-wide shaper to `rate`: the root and every class's assured rate and ceil
    /// become `rate` (tokens earned so far are kept, up to the bucket depths). What a host agent
    /// does when it learns a new share (switch-assisted pacing).
    pub fn reshape(&mut self, now: Time, rate: Rate) {
        self.refill(now);
        self.root.rate = rate;
        for c in &mut self.classes {
            c.assured.rate = rate;
            c.ceil.rate = rate;
        }
    }

    /// The root rate.
    pub fn rate(&self) -> Rate {
        self.root.rate
    }

    fn class_of(&self, pkt: &Packet) -> usize {
        usize::from(pkt.meta.priority).min(self.classes.len().saturating_sub(1))
    }

    fn refill(&mut self, now: Time) {
        self.root.refill(now);
        for c in &mut self.classes {
            c.assured.refill(now);
            c.ceil.refill(now);
        }
    }

    fn head_bits(c: &Class) -> Option<i128> {
        c.fifo.peek().map(|p| i128::from(p.wire_len().get()) * 8)
    }

    /// The class to serve now, if any.
    fn pick(&self) -> Option<usize> {
        // green: within the assured rate, by class order
        for (i, c) in self.classes.iter().enumerate() {
            if let Some(b) = Self::head_bits(c) {
                if c.assured.has(b) && c.ceil.has(b) {
                    return Some(i);
                }
            }
        }
        // yellow: borrowing within ceil from the root, round robin
        let n = self.classes.len();
        (0..n).map(|k| (self.rr + k) % n).find(|&i| {
            let c = &self.classes[i];
            Self::head_bits(c).is_some_and(|b| c.ceil.has(b) && self.root.has(b))
        })
    }
}

impl Queue for Htb {
    fn enqueue(&mut self, now: Time, pkt: Packet) -> Verdict {
        let i = self.class_of(&pkt);
        let size = pkt.wire_len();
        let Some(c) = self.classes.get_mut(i) else {
            self.stats.on_drop(crate::DropReason::QueueFullPackets);
            return Verdict::drop(pkt, crate::DropReason::QueueFullPackets);
        };
        match c.fifo.enqueue(now, pkt) {
            Verdict::Enqueued => {
                self.stats.enqueued_packets += 1;
                self.stats.enqueued_bytes += size.get();
                self.stats.peak_packets = self.stats.peak_packets.max(self.len() as u64);
                self.stats.peak_bytes = self.stats.peak_bytes.max(self.byte_len().get());
                Verdict::Enqueued
            }
            Verdict::Dropped(d) => {
                self.stats.on_drop(d.reason);
                Verdict::Dropped(d)
            }
        }
    }

    fn dequeue(&mut self, now: Time) -> Option<Packet> {
        self.refill(now);
        let i = self.pick()?;
        let c = &mut self.classes[i];
        let pkt = c.fifo.dequeue(now)?;
        let bits = i128::from(pkt.wire_len().get()) * 8;
        c.assured.charge(bits);
        c.ceil.charge(bits);
        self.root.charge(bits);
        self.rr = (i + 1) % self.classes.len();
        self.stats.on_dequeue(&pkt);
        Some(pkt)
    }

    fn next_ready(&self, now: Time) -> Option<Time> {
        let mut best: Option<Time> = None;
        for c in &self.classes {
            let Some(b) = Self::head_bits(c) else { continue };
            // buckets are refilled lazily: project from their last update
            let green = c.assured.ready_at(b).max(c.ceil.ready_at(b));
            let yellow = c.ceil.ready_at(b).max(self.root.ready_at(b));
            let t = green.min(yellow).max(c.fifo.next_ready(now).unwrap_or(now));
            best = Some(best.map_or(t, |x| x.min(t)));
        }
        best
    }

    fn drain(&mut self) -> Option<Packet> {
        // no tokens charged, no round-robin turn taken
        self.classes.iter_mut().find_map(|c| c.fifo.drain())
    }

    fn len(&self) -> usize {
        self.classes.iter().map(|c| c.fifo.len()).sum()
    }

    fn byte_len(&self) -> Bytes {
        self.classes.iter().map(|c| c.fifo.byte_len()).sum()
    }

    fn stats(&self) -> &QueueStats {
        &self.stats
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::packet::Meta;

    fn pkt(prio: u8) -> Packet {
        Packet::new(vec![0; 20], 980, Meta { priority: prio, ..Meta::default() })
    }

    /// Drain the shaper as a link of infinite speed would; departure times.
    fn drain(q: &mut Htb, mut now: Time, n: usize) -> Vec<(u64, u8)> {
        let mut out = Vec::new();
        while out.len() < n {
            match q.dequeue(now) {
                Some(p) => out.push((now.as_nanos(), p.meta.priority)),
                None => now = q.next_ready(now).expect("backlog"),
            }
        }
        out
    }

    #[test]
    fn shapes_to_the_rate_after_the_burst() {
        // 8 Mbit/s: a 1000-byte packet every 1 ms once the 3200 B bucket is spent
        let mut q = Htb::new(Rate::from_mbps(8), Bytes::new(3200), &[], QueueLimits::default());
        for _ in 0..10 {
            assert_eq!(q.enqueue(Time::ZERO, pkt(7)), Verdict::Enqueued);
        }
        let t: Vec<u64> = drain(&mut q, Time::ZERO, 10).into_iter().map(|(t, _)| t).collect();
        assert_eq!(&t[..3], &[0, 0, 0], "the burst");
        assert_eq!(t[3], 800_000, "then refill: 800 B missing at 1 B/us");
        for w in t[3..].windows(2) {
            assert_eq!(w[1] - w[0], 1_000_000);
        }
        assert_eq!(q.stats().dequeued_packets, 10);
    }

    #[test]
    fn classes_get_their_rate_and_borrow_up_to_ceil() {
        // root 10 Mbit/s; class 0 assured 8, class 1 assured 2 with ceil 10
        let classes = [
            HtbClassSpec { rate: Rate::from_mbps(8), ceil: None, burst: Some(Bytes::new(1000)) },
            HtbClassSpec { rate: Rate::from_mbps(2), ceil: None, burst: Some(Bytes::new(1000)) },
        ];
        let mut q =
            Htb::new(Rate::from_mbps(10), Bytes::new(1000), &classes, QueueLimits::default());
        for _ in 0..400 {
            let _ = q.enqueue(Time::ZERO, pkt(0));
            let _ = q.enqueue(Time::ZERO, pkt(1));
        }
        let out = drain(&mut q, Time::ZERO, 500);
        let end = out.last().map(|x| x.0).unwrap_or(0) as f64 / 1e9;
        let share0 = out.iter().filter(|x| x.1 == 0).count() as f64 / out.len() as f64;
        // 10 Mbit/s of 1000-byte packets: 1250 per s; class 0 gets 80 %
        assert!((end - 0.4).abs() < 0.01, "root rate: 500 packets in {end} s");
        assert!((share0 - 0.8).abs() < 0.02, "share {share0}");
        // class 1 alone borrows up to the root rate
        let mut q =
            Htb::new(Rate::from_mbps(10), Bytes::new(1000), &classes, QueueLimits::default());
        for _ in 0..100 {
            let _ = q.enqueue(Time::ZERO, pkt(1));
        }
        let out = drain(&mut q, Time::ZERO, 100);
        let end = out.last().map(|x| x.0).unwrap_or(0) as f64 / 1e9;
        assert!((end - 0.08).abs() < 0.002, "borrowed to 10 Mbit/s: {end}");
    }

    #[test]
    fn reshape_changes_the_rate_of_a_one_class_shaper() {
        // 80 Mbit/s (a 1000-byte packet every 100 us), re-shaped to 8 Mbit/s at 1 ms
        let mut q = Htb::new(Rate::from_mbps(80), Bytes::new(1000), &[], QueueLimits::default());
        for _ in 0..30 {
            let _ = q.enqueue(Time::ZERO, pkt(7));
        }
        let t: Vec<u64> = drain(&mut q, Time::ZERO, 11).into_iter().map(|(t, _)| t).collect();
        assert_eq!(t[10], 1_000_000);
        q.reshape(Time::from_nanos(1_000_000), Rate::from_mbps(8));
        assert_eq!(q.rate(), Rate::from_mbps(8));
        let t: Vec<u64> =
            drain(&mut q, Time::from_nanos(1_000_000), 5).into_iter().map(|(t, _)| t).collect();
        for w in t.windows(2) {
            assert_eq!(w[1] - w[0], 1_000_000, "the new rate holds for every class: {t:?}");
        }
    }
}
