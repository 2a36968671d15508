//! A Per Packet Value marker in front of (or behind) a queue: how a sender's egress port or an
//! edge switch port marks packets (`kind = "pv-marker"`).
//!
//! Ports: one input, one output (pull). Packets go through the inner queue (`queue`, default a
//! FIFO); the marker ([`PvMarker`]) writes each packet's value when it leaves (`at =
//! "dequeue"`, default: the rate the marker measures is then the rate on the wire) or when it
//! arrives (`"enqueue"`). A packet the marker refuses (unparseable, malformed value option) is
//! dropped with that reason and counted here. Counters: the wrapper's [`QueueStats`] (drops by
//! the marker included) and the marker's [`MarkerStats`](crate::ppv::MarkerStats).

use super::{AnyQueue, Dropped, Queue, QueueSpec, QueueStats, SpecError, Verdict};
use crate::packet::Packet;
use crate::ppv::{MarkerSpec, PvMarker};
use latnet_units::{Bytes, Time};
use serde::Deserialize;
use std::collections::VecDeque;

/// When the value is written.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum MarkAt {
    /// When the packet leaves the inner queue.
    #[default]
    Dequeue,
    /// When the packet arrives.
    Enqueue,
}

/// `kind = "pv-marker"` as written in a scenario.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PvMarkingSpec {
    /// The marker (`marker = { tvf = { kind = "log-linear" }, method = "random-rate" }`;
    /// default: every marker default).
    #[serde(default)]
    pub marker: MarkerSpec,
    /// When to mark (default `dequeue`).
    #[serde(default)]
    pub at: MarkAt,
    /// The queue behind the marker (default: a FIFO with default limits).
    #[serde(default)]
    pub queue: Box<QueueSpec>,
}

/// A marker around a queue.
#[derive(Debug, Clone)]
pub struct PvMarking {
    marker: PvMarker,
    inner: Box<AnyQueue>,
    at: MarkAt,
    stats: QueueStats,
    dropped: VecDeque<Dropped>,
}

impl PvMarking {
    /// Build from a spec; `seed` selects the marker's (and the inner queue's) random streams.
    pub fn new(spec: &PvMarkingSpec, seed: u64) -> Result<PvMarking, SpecError> {
        if matches!(*spec.queue, QueueSpec::PvMarker(_)) {
            return Err(SpecError::OutOfRange {
                field: "queue",
                expected: "a queue that is not itself a pv-marker",
            });
        }
        Ok(PvMarking {
            marker: PvMarker::new(&spec.marker, seed)?,
            inner: Box::new(spec.queue.build_seeded(seed.wrapping_add(1))?),
            at: spec.at,
            stats: QueueStats::default(),
            dropped: VecDeque::new(),
        })
    }

    /// The marker.
    pub fn marker(&self) -> &PvMarker {
        &self.marker
    }

    /// The inner queue.
    pub fn inner(&self) -> &AnyQueue {
        &self.inner
    }
}

impl Queue for PvMarking {
    fn enqueue(&mut self, now: Time, mut pkt: Packet) -> Verdict {
        if self.at == MarkAt::Enqueue {
            if let Err(reason) = self.marker.mark(now, &mut pkt) {
                self.stats.on_drop(reason);
                return Verdict::drop(pkt, reason);
            }
        }
        let size = pkt.wire_len();
        let v = self.inner.enqueue(now, pkt);
        match &v {
            Verdict::Enqueued => {
                self.stats.enqueued_packets += 1;
                self.stats.enqueued_bytes += size.get();
                self.stats.peak_packets = self.stats.peak_packets.max(self.inner.len() as u64);
                self.stats.peak_bytes = self.stats.peak_bytes.max(self.inner.byte_len().get());
            }
            Verdict::Dropped(d) => self.stats.on_drop(d.reason),
        }
        v
    }

    fn dequeue(&mut self, now: Time) -> Option<Packet> {
        loop {
            let mut pkt = self.inner.dequeue(now)?;
            if self.at == MarkAt::Dequeue {
                if let Err(reason) = self.marker.mark(now, &mut pkt) {
                    self.stats.on_drop(reason);
                    self.dropped.push_back(Dropped { pkt, reason });
                    continue;
                }
            }
            self.stats.on_dequeue(&pkt);
            return Some(pkt);
        }
    }

    fn next_ready(&self, now: Time) -> Option<Time> {
        self.inner.next_ready(now)
    }

    fn drain(&mut self) -> Option<Packet> {
        self.inner.drain()
    }

    fn poll_drop(&mut self) -> Option<Dropped> {
        if let Some(d) = self.dropped.pop_front() {
            return Some(d);
        }
        let d = self.inner.poll_drop()?;
        self.stats.on_drop(d.reason);
        Some(d)
    }

    fn len(&self) -> usize {
        self.inner.len()
    }

    fn byte_len(&self) -> Bytes {
        self.inner.byte_len()
    }

    fn stats(&self) -> &QueueStats {
        &self.stats
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::drop::DropReason;
    use crate::packet::Meta;
    use latnet_wire::{build_udp_ipv4, packet_value, Ecn, EthernetAddress};
    use std::net::Ipv4Addr;

    fn pkt(id: u64) -> Packet {
        let m = EthernetAddress([2, 0, 0, 0, 0, 1]);
        let mut f = Vec::new();
        let (a, b) = (Ipv4Addr::new(10, 0, 0, 1), Ipv4Addr::new(10, 0, 0, 2));
        build_udp_ipv4(&mut f, m, m, a, b, 0, Ecn::Ect1, 64, 1, 2, 958).unwrap();
        Packet::new(f, 958, Meta { id, ..Meta::default() })
    }

    #[test]
    fn marks_at_dequeue_with_the_wire_rate() {
        let spec: QueueSpec = toml::from_str(
            "kind = \"pv-marker\"\nmarker = { tvf = { kind = \"hyperbolic\" }, ewma = 0.25 }\n\
             queue = { kind = \"fifo\", limit_packets = 5 }",
        )
        .unwrap();
        let mut q = spec.build_seeded(9).unwrap();
        for i in 0..5 {
            assert_eq!(q.enqueue(Time::ZERO, pkt(i)), Verdict::Enqueued);
        }
        assert!(matches!(q.enqueue(Time::ZERO, pkt(5)), Verdict::Dropped(_)), "inner limit");
        // the first packet: no rate yet -> V(0) = 65535; then 1004 B every 8.032 us = 1 Gbit/s
        let first = q.dequeue(Time::ZERO).unwrap();
        assert_eq!(packet_value(&first.data), Ok(Some(latnet_wire::PacketValue(65535))));
        assert_eq!(first.wire_len().get(), 1004, "the option adds 4 bytes");
        let mut last = None;
        for k in 1..5u64 {
            let p = q.dequeue(Time::from_nanos(8_032 * k)).unwrap();
            last = packet_value(&p.data).unwrap();
        }
        assert!(last.is_some_and(|v| v.0 < 65535));
        let AnyQueue::PvMarker(m) = &q else { panic!() };
        assert_eq!(m.marker().stats().marked, 5);
        assert_eq!(m.marker().stats().inserted, 5);
        assert_eq!(
            m.marker().rate_estimate((
                "10.0.0.1".parse().unwrap(),
                "10.0.0.2".parse().unwrap(),
                17,
                1,
                2
            )),
            Some(1_000_000_000)
        );
    }

    #[test]
    fn malformed_value_option_is_dropped_and_counted() {
        let spec = PvMarkingSpec {
            marker: MarkerSpec::default(),
            at: MarkAt::Enqueue,
            queue: Box::default(),
        };
        let mut q = PvMarking::new(&spec, 0).unwrap();
        let mut p = pkt(0);
        latnet_wire::option_edit::insert_ip_option(&mut p.data, latnet_wire::ppv::KINDS, &[0; 6])
            .unwrap();
        assert!(matches!(
            q.enqueue(Time::ZERO, p),
            Verdict::Dropped(Dropped { reason: DropReason::MalformedOption, .. })
        ));
        let spec = PvMarkingSpec { at: MarkAt::Dequeue, ..spec };
        let mut q = PvMarking::new(&spec, 0).unwrap();
        let mut p = pkt(1);
        latnet_wire::option_edit::insert_ip_option(&mut p.data, latnet_wire::ppv::KINDS, &[0; 6])
            .unwrap();
        assert_eq!(q.enqueue(Time::ZERO, p), Verdict::Enqueued);
        assert_eq!(q.enqueue(Time::ZERO, pkt(2)), Verdict::Enqueued);
        assert_eq!(q.dequeue(Time::ZERO).map(|p| p.meta.id), Some(2));
        assert_eq!(q.poll_drop().map(|d| d.reason), Some(DropReason::MalformedOption));
        assert_eq!(q.stats().drops.get(DropReason::MalformedOption), 1);
    }

    #[test]
    fn nesting_and_bad_settings_are_refused() {
        let e =
            toml::from_str::<QueueSpec>("kind = \"pv-marker\"\nqueue = { kind = \"pv-marker\" }")
                .unwrap()
                .build();
        assert!(e.is_err());
        let e = toml::from_str::<QueueSpec>("kind = \"pv-marker\"\nmarker = { ewma = 2 }")
            .unwrap()
            .build();
        assert!(matches!(e, Err(SpecError::OutOfRange { field: "ewma", .. })));
        assert!(toml::from_str::<QueueSpec>("kind = \"pv-marker\"\nmarkr = {}").is_err());
    }
}
