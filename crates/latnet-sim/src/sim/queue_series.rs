//! Queue occupancy of every egress port, sampled every `[output] queues` interval
//! (`queues.csv`, `Results.queue_series`): packets and bytes waiting at the sample instant and
//! the most waiting at any instant of the interval (the packet in transmission is not waiting).

use super::{Event, Simulator};
use crate::results::QueueRow;
use latnet_dataplane::Queue;
use latnet_units::{Duration, Time};

/// The sampler's state.
#[derive(Debug)]
pub(super) struct QueueSeries {
    interval: Duration,
    /// Per port: the most packets and bytes waiting since the last sample.
    peak: Vec<(u64, u64)>,
    pub(super) rows: Vec<QueueRow>,
}

impl QueueSeries {
    pub(super) fn new(interval: Duration, ports: usize) -> Self {
        QueueSeries { interval, peak: vec![(0, 0); ports], rows: Vec::new() }
    }

    pub(super) fn first_sample(&self) -> Time {
        Time::ZERO + self.interval
    }
}

impl Simulator {
    /// Called after every enqueue: occupancy only grows there.
    pub(super) fn note_queue_peak(&mut self, port: usize) {
        let Some(s) = &mut self.queues else { return };
        let q = &self.ports[port].queue;
        let (pkts, bytes) = (q.len() as u64, q.byte_len().get());
        let p = &mut s.peak[port];
        *p = (p.0.max(pkts), p.1.max(bytes));
    }

    pub(super) fn queue_sample(&mut self) {
        let now = self.now;
        let Some(s) = &mut self.queues else { return };
        for (i, port) in self.ports.iter().enumerate() {
            let (pkts, bytes) = (port.queue.len() as u64, port.queue.byte_len().get());
            let (max_pkts, max_bytes) = s.peak[i];
            s.rows.push(QueueRow {
                t_ns: now.as_nanos(),
                port: i as u32,
                packets: pkts,
                bytes,
                max_packets: max_pkts.max(pkts),
                max_bytes: max_bytes.max(bytes),
            });
            s.peak[i] = (pkts, bytes);
        }
        if let Some(next) = now.checked_add_duration(s.interval) {
            if next <= self.end {
                self.events.schedule(next, 0, Event::QueueSample);
            }
        }
    }
}
