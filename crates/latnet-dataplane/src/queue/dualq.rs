//! What the two dual-queue AQMs ([`super::VdqCsaqm`], [`super::DualPi2`]) share: the L4S /
//! Classic classifier (RFC 9331: ECT(1) and CE go to the L4S queue), the packets they hold with
//! what was read from their headers at enqueue, and CE marking of the held bytes.

use super::aqm_stats::EpochStats;
use super::{Dropped, QueueStats};
use crate::drop::DropReason;
use crate::packet::Packet;
use latnet_units::{Bytes, Duration, Time};
use latnet_wire::{parse_headers, Ecn, Ipv4Packet, Ipv6Packet, L3};
use std::collections::VecDeque;

/// Index of the L4S queue.
pub const L4S: usize = 0;
/// Index of the Classic queue.
pub const CLASSIC: usize = 1;
/// Class names, by index.
pub const NAMES: [&str; 2] = ["l4s", "classic"];

/// A held packet and what the AQM read from it at enqueue.
#[derive(Debug, Clone)]
pub struct Held {
    /// The packet.
    pub pkt: Packet,
    /// ECN field at enqueue.
    pub ecn: Ecn,
    /// Packet value (VDQ-CSAQM), `default_pv` when it carried none.
    pub pv: u16,
    /// Where the IP header is (to mark CE without walking the headers again).
    pub l3: L3,
}

/// Read class, ECN and packet value. Errors hand the packet back with its drop reason (boxed:
/// the rare path): `malformed` for a frame that does not parse as IP, `malformed-option` for a
/// malformed value option.
pub fn read(pkt: Packet, default_pv: u16, want_pv: bool) -> Result<(usize, Held), Box<Dropped>> {
    let err = |reason, pkt| Err(Box::new(Dropped { pkt, reason }));
    let Ok(h) = parse_headers(&pkt.data) else { return err(DropReason::Malformed, pkt) };
    let Some(key) = h.key else { return err(DropReason::Malformed, pkt) };
    let pv = if want_pv {
        let kinds = latnet_wire::ppv::KINDS;
        match latnet_wire::option_edit::find_ip_option_in(&pkt.data, &h, kinds) {
            Ok(Some(r)) => match pkt.data.get(r) {
                Some([a, b]) => u16::from_be_bytes([*a, *b]),
                _ => return err(DropReason::MalformedOption, pkt),
            },
            Ok(None) => default_pv,
            Err(_) => return err(DropReason::MalformedOption, pkt),
        }
    } else {
        default_pv
    };
    let class = match key.ecn {
        Ecn::Ect1 | Ecn::Ce => L4S,
        Ecn::NotEct | Ecn::Ect0 => CLASSIC,
    };
    Ok((class, Held { pkt, ecn: key.ecn, pv, l3: h.l3 }))
}

/// Set CE on a held ECN-capable packet (incremental IPv4 checksum update). Returns whether the
/// packet was changed (not for Not-ECT or already CE).
pub fn mark_ce(h: &mut Held) -> bool {
    if !matches!(h.ecn, Ecn::Ect0 | Ecn::Ect1) {
        return false;
    }
    let ok = match h.l3 {
        L3::Ipv4 { offset, .. } => match h.pkt.data.get_mut(offset..) {
            Some(b) => match Ipv4Packet::new_checked(b) {
                Ok(mut ip) => {
                    ip.set_ecn(Ecn::Ce);
                    true
                }
                Err(_) => false,
            },
            None => false,
        },
        L3::Ipv6 { offset, .. } => match h.pkt.data.get_mut(offset..) {
            Some(b) => match Ipv6Packet::new_checked(b) {
                Ok(mut ip) => {
                    ip.set_ecn(Ecn::Ce);
                    true
                }
                Err(_) => false,
            },
            None => false,
        },
        L3::Other(_) => false,
    };
    if ok {
        h.ecn = Ecn::Ce;
    }
    ok
}

/// A FIFO of held packets with its byte count.
#[derive(Debug, Clone, Default)]
pub struct HeldFifo {
    q: VecDeque<Held>,
    bytes: u64,
}

impl HeldFifo {
    /// Append.
    pub fn push(&mut self, h: Held) {
        self.bytes += h.pkt.wire_len().get();
        self.q.push_back(h);
    }
    /// Remove the head.
    pub fn pop(&mut self) -> Option<Held> {
        let h = self.q.pop_front()?;
        self.bytes -= h.pkt.wire_len().get();
        Some(h)
    }
    /// Packets.
    pub fn len(&self) -> usize {
        self.q.len()
    }
    /// Empty.
    pub fn is_empty(&self) -> bool {
        self.q.is_empty()
    }
    /// Bytes.
    pub fn bytes(&self) -> Bytes {
        Bytes::new(self.bytes)
    }
    /// Arrival time of the head.
    pub fn head_arrival(&self) -> Option<Time> {
        self.q.front().map(|h| h.pkt.meta.arrival)
    }
    /// Sojourn of the head at `now` (zero when empty).
    pub fn head_sojourn(&self, now: Time) -> latnet_units::Duration {
        self.head_arrival().map_or(latnet_units::Duration::ZERO, |a| now - a)
    }
}

/// The two physical queues of a dual-queue AQM, indexed by [`L4S`] and [`CLASSIC`], with what
/// both AQMs answer the same way (the earliest head, draining L4S first, sizes).
#[derive(Debug, Clone, Default)]
pub struct DualFifo([HeldFifo; 2]);

impl std::ops::Index<usize> for DualFifo {
    type Output = HeldFifo;
    fn index(&self, class: usize) -> &HeldFifo {
        &self.0[class]
    }
}

impl std::ops::IndexMut<usize> for DualFifo {
    fn index_mut(&mut self, class: usize) -> &mut HeldFifo {
        &mut self.0[class]
    }
}

impl DualFifo {
    /// Arrival of the older of the two heads.
    pub fn next_ready(&self) -> Option<Time> {
        match (self.0[L4S].head_arrival(), self.0[CLASSIC].head_arrival()) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }
    /// Remove a packet without any AQM decision (L4S first), for draining at the end.
    pub fn drain(&mut self) -> Option<Packet> {
        Some(self.0[L4S].pop().or_else(|| self.0[CLASSIC].pop())?.pkt)
    }
    /// Packets in both queues.
    pub fn len(&self) -> usize {
        self.0[L4S].len() + self.0[CLASSIC].len()
    }
    /// Bytes in both queues.
    pub fn bytes(&self) -> Bytes {
        self.0[L4S].bytes() + self.0[CLASSIC].bytes()
    }
}

/// What a dual-queue AQM counts: the whole queue, each class, each epoch; and the packets it
/// dropped at dequeue, for [`super::Queue::poll_drop`].
#[derive(Debug, Clone)]
pub struct DualCounts {
    /// Whole queue.
    pub stats: QueueStats,
    /// Per class ([`L4S`], [`CLASSIC`]).
    pub cls: [QueueStats; 2],
    /// Per epoch and class.
    pub epochs: EpochStats,
    /// Dropped at dequeue, not yet polled.
    pub dropped: VecDeque<Dropped>,
}

impl DualCounts {
    /// Counters with epochs starting at `epochs`.
    pub fn new(epochs: &[Duration]) -> DualCounts {
        DualCounts {
            stats: QueueStats::default(),
            cls: [QueueStats::default(), QueueStats::default()],
            epochs: EpochStats::new(epochs, 2),
            dropped: VecDeque::new(),
        }
    }

    /// A packet of `class` refused at enqueue because its queue is full.
    pub fn full(&mut self, now: Time, class: usize, reason: DropReason) {
        self.stats.on_drop(reason);
        self.cls[class].on_drop(reason);
        self.epochs.at(now, class).full_drops += 1;
    }

    /// The AQM dropped a held packet of `class` at dequeue.
    pub fn aqm_drop(&mut self, now: Time, class: usize, pkt: Packet) {
        let reason = DropReason::AqmDrop;
        self.stats.on_drop(reason);
        self.cls[class].on_drop(reason);
        self.epochs.at(now, class).aqm_drops += 1;
        self.dropped.push_back(Dropped { pkt, reason });
    }

    /// A packet of `class` leaves after `sojourn`, CE-marked by the AQM or not.
    pub fn sent(&mut self, now: Time, class: usize, pkt: &Packet, sojourn: Duration, marked: bool) {
        let e = self.epochs.at(now, class);
        e.tx_packets += 1;
        e.tx_bytes += pkt.wire_len().get();
        e.sojourn.record(sojourn);
        if marked {
            e.ce_marks += 1;
            self.stats.ce_marks += 1;
            self.cls[class].ce_marks += 1;
        }
        self.stats.on_dequeue(pkt);
        self.cls[class].on_dequeue(pkt);
    }
}
