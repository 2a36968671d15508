//! An FQ-like pacing queue (after Linux `sch_fq`): one FIFO per flow, deficit round robin
//! between flows, and every flow paced at most at `maxrate` — the host-side discipline of the
//! pacing seed's "FQ" mode (`tc qdisc fq maxrate bottleneck/N`; `kind = "fq"`).
//!
//! Ports: one input, one output (pull); non-work-conserving when `maxrate` is set
//! ([`Queue::next_ready`] returns when the next paced packet may leave).
//!
//! | key | default | meaning |
//! |---|---|---|
//! | `maxrate` | none (no pacing) | per-flow rate cap, bit/s of frames |
//! | `quantum` | 3028 B (2 MTU) | DRR credit per round |
//! | `initial_quantum` | 15140 B (10 MTU) | credit of a new flow (Linux's initial burst) |
//! | `flow_limit` | 100 | packets per flow (tail drop, `queue-full-packets`) |
//! | `limit_packets`, `limit_bytes` | 10,000, 15 MB | all flows together |
//!
//! Flows are told apart by their 5-tuple (frames that do not parse share one flow). After a
//! flow sends a packet of `L` bytes at `now` its next packet may leave at
//! `now + L / maxrate`, minus up to half of that if the flow was late (as Linux, so a flow
//! served late is not penalised twice). [`FqPace::set_maxrate`] changes the cap at once (a
//! host agent reacting to the switch's count of large flows). Flows idle and empty for 1 s are
//! forgotten. Counters: [`QueueStats`] and the number of flows.

use super::{Queue, QueueLimits, QueueStats, SpecError, Verdict};
use crate::drop::DropReason;
use crate::packet::Packet;
use latnet_units::{Bytes, Duration, Rate, Time};
use serde::Deserialize;
use std::collections::{BTreeMap, VecDeque};
use std::net::IpAddr;

/// `kind = "fq"` as written in a scenario.
#[derive(Debug, Clone, PartialEq, Eq, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FqSpec {
    /// Per-flow rate cap (none: no pacing).
    pub maxrate: Option<Rate>,
    /// DRR quantum (default 3028 B).
    pub quantum: Option<Bytes>,
    /// Credit of a new flow (default 15140 B).
    pub initial_quantum: Option<Bytes>,
    /// Packets per flow (default 100).
    pub flow_limit: Option<u32>,
    /// Packets of all flows (default 10,000).
    pub limit_packets: Option<u32>,
    /// Bytes of all flows (default 15 MB).
    pub limit_bytes: Option<Bytes>,
}

type Key = Option<(IpAddr, IpAddr, u8, u16, u16)>;

#[derive(Debug, Clone)]
struct Flow {
    q: VecDeque<Packet>,
    credit: i64,
    time_next: Time,
    last_active: Time,
    listed: bool,
}

/// The FQ-like pacing queue.
#[derive(Debug, Clone)]
pub struct FqPace {
    maxrate: Option<Rate>,
    quantum: i64,
    initial: i64,
    flow_limit: usize,
    limits: QueueLimits,
    index: BTreeMap<Key, usize>,
    flows: Vec<Flow>,
    rr: VecDeque<usize>,
    len: usize,
    bytes: Bytes,
    stats: QueueStats,
    last_gc: Time,
}

const IDLE: Duration = Duration::from_secs(1);

impl FqPace {
    /// Build from a spec.
    pub fn new(spec: &FqSpec) -> Result<FqPace, SpecError> {
        let bad = |field, expected| Err(SpecError::OutOfRange { field, expected });
        if spec.maxrate.is_some_and(|r| r.is_zero()) {
            return bad("maxrate", "above zero");
        }
        let quantum = spec.quantum.unwrap_or(Bytes::new(3028)).get();
        if quantum == 0 {
            return bad("quantum", "at least 1 byte");
        }
        let limits = super::check_limits(QueueLimits {
            limit_packets: spec.limit_packets.unwrap_or(10_000),
            limit_bytes: spec.limit_bytes.unwrap_or(Bytes::new(15_000_000)),
        })?;
        let flow_limit = spec.flow_limit.unwrap_or(100);
        if flow_limit == 0 {
            return bad("flow_limit", "at least 1");
        }
        Ok(FqPace {
            maxrate: spec.maxrate,
            quantum: quantum as i64,
            initial: spec.initial_quantum.unwrap_or(Bytes::new(15_140)).get() as i64,
            flow_limit: flow_limit as usize,
            limits,
            index: BTreeMap::new(),
            flows: Vec::new(),
            rr: VecDeque::new(),
            len: 0,
            bytes: Bytes::ZERO,
            stats: QueueStats::default(),
            last_gc: Time::ZERO,
        })
    }

    /// The per-flow cap.
    pub fn maxrate(&self) -> Option<Rate> {
        self.maxrate
    }

    /// Change the per-flow cap from now on (`None`: stop pacing).
    pub fn set_maxrate(&mut self, rate: Option<Rate>) {
        self.maxrate = rate.filter(|r| !r.is_zero());
    }

    /// Flows known (backlogged or recently active).
    pub fn flows(&self) -> usize {
        self.index.len()
    }

    fn key(pkt: &Packet) -> Key {
        let k = latnet_wire::parse_headers(&pkt.data).ok()?.key?;
        Some((k.src, k.dst, k.proto, k.src_port, k.dst_port))
    }

    /// Forget flows that are empty and idle (rebuilding the slot numbers).
    fn gc(&mut self, now: Time) {
        if now.saturating_duration_since(self.last_gc) < IDLE {
            return;
        }
        self.last_gc = now;
        let keep: Vec<bool> = self
            .flows
            .iter()
            .map(|f| !f.q.is_empty() || now.saturating_duration_since(f.last_active) < IDLE)
            .collect();
        if keep.iter().all(|&k| k) {
            return;
        }
        let mut map = vec![usize::MAX; self.flows.len()];
        let mut flows = Vec::new();
        for (i, f) in std::mem::take(&mut self.flows).into_iter().enumerate() {
            if keep[i] {
                map[i] = flows.len();
                flows.push(f);
            }
        }
        self.flows = flows;
        self.index.retain(|_, i| {
            *i = map[*i];
            *i != usize::MAX
        });
        self.rr = self.rr.iter().map(|&i| map[i]).filter(|&i| i != usize::MAX).collect();
    }
}

impl Queue for FqPace {
    fn enqueue(&mut self, now: Time, mut pkt: Packet) -> Verdict {
        self.gc(now);
        if let Some(reason) = self.limits.check(self.len, self.bytes, &pkt) {
            self.stats.on_drop(reason);
            return Verdict::drop(pkt, reason);
        }
        let key = Self::key(&pkt);
        let i = match self.index.get(&key) {
            Some(&i) => i,
            None => {
                self.flows.push(Flow {
                    q: VecDeque::new(),
                    credit: self.initial,
                    time_next: now,
                    last_active: now,
                    listed: false,
                });
                self.index.insert(key, self.flows.len() - 1);
                self.flows.len() - 1
            }
        };
        let f = &mut self.flows[i];
        if f.q.len() >= self.flow_limit {
            self.stats.on_drop(DropReason::QueueFullPackets);
            return Verdict::drop(pkt, DropReason::QueueFullPackets);
        }
        pkt.meta.arrival = now;
        f.last_active = now;
        self.bytes += pkt.wire_len();
        self.len += 1;
        f.q.push_back(pkt);
        if !f.listed {
            f.listed = true;
            self.rr.push_back(i);
        }
        if let Some(p) = self.flows[i].q.back() {
            self.stats.on_enqueue(p, self.len, self.bytes);
        }
        Verdict::Enqueued
    }

    fn dequeue(&mut self, now: Time) -> Option<Packet> {
        // Round robin until a flow sends (as Linux's `fq_dequeue` loops): a flow out of credit
        // gets a quantum and goes to the back, as often as it takes (a packet may be many
        // quanta long). Stop once every listed flow in a row was held by its pacing time.
        let mut held = 0;
        while held < self.rr.len() {
            let i = self.rr.pop_front()?;
            let f = &mut self.flows[i];
            if f.q.is_empty() {
                f.listed = false;
                continue;
            }
            if self.maxrate.is_some() && f.time_next > now {
                self.rr.push_back(i);
                held += 1;
                continue;
            }
            if f.credit <= 0 {
                f.credit += self.quantum;
                self.rr.push_back(i);
                held = 0;
                continue;
            }
            let Some(pkt) = f.q.pop_front() else { continue };
            let len = pkt.wire_len();
            f.credit -= len.get() as i64;
            f.last_active = now;
            if let Some(rate) = self.maxrate {
                let gap = rate.tx_time(len).unwrap_or(Duration::ZERO);
                let late = now.saturating_duration_since(f.time_next);
                let credit = Duration::from_nanos((gap.as_nanos() / 2).min(late.as_nanos()));
                f.time_next = now + (gap - credit);
            }
            if f.q.is_empty() {
                f.listed = false;
            } else {
                self.rr.push_back(i);
            }
            self.len -= 1;
            self.bytes -= len;
            self.stats.on_dequeue(&pkt);
            return Some(pkt);
        }
        None
    }

    fn next_ready(&self, now: Time) -> Option<Time> {
        self.rr
            .iter()
            .filter(|&&i| !self.flows[i].q.is_empty())
            .map(|&i| {
                let f = &self.flows[i];
                let arrival = f.q.front().map_or(now, |p| p.meta.arrival);
                if self.maxrate.is_some() {
                    f.time_next.max(arrival)
                } else {
                    arrival
                }
            })
            .min()
    }

    fn drain(&mut self) -> Option<Packet> {
        for f in &mut self.flows {
            if let Some(p) = f.q.pop_front() {
                self.len -= 1;
                self.bytes -= p.wire_len();
                return Some(p);
            }
        }
        None
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
mod tests {
    use super::*;
    use crate::packet::Meta;
    use latnet_wire::{build_udp_ipv4, Ecn, EthernetAddress};
    use std::net::Ipv4Addr;

    fn pkt(flow: u8, id: u64) -> Packet {
        let m = EthernetAddress([2, 0, 0, 0, 0, 1]);
        let mut f = Vec::new();
        let (a, b) = (Ipv4Addr::new(10, 0, 0, flow), Ipv4Addr::new(10, 0, 1, 1));
        build_udp_ipv4(&mut f, m, m, a, b, 0, Ecn::NotEct, 64, 1, 2, 958).unwrap();
        Packet::new(f, 958, Meta { id, flow: u32::from(flow), ..Meta::default() })
    }

    /// Drive the queue like a transmitter of `link` and return (time, flow) of each departure.
    fn drain_at(q: &mut FqPace, link: Rate, until: Time) -> Vec<(u64, u32)> {
        let mut now = Time::ZERO;
        let mut out = Vec::new();
        while now < until {
            match q.dequeue(now) {
                Some(p) => {
                    out.push((now.as_nanos(), p.meta.flow));
                    now += link.tx_time(p.wire_len()).unwrap();
                }
                None => match q.next_ready(now) {
                    Some(t) if t > now => now = t,
                    _ => break,
                },
            }
        }
        out
    }

    #[test]
    fn paces_each_flow_at_maxrate() {
        let spec = FqSpec {
            maxrate: Some(Rate::from_mbps(10)),
            initial_quantum: Some(Bytes::new(1000)),
            ..FqSpec::default()
        };
        let mut q = FqPace::new(&spec).unwrap();
        for k in 0..50 {
            assert_eq!(q.enqueue(Time::ZERO, pkt(1, k)), Verdict::Enqueued);
            assert_eq!(q.enqueue(Time::ZERO, pkt(2, 100 + k)), Verdict::Enqueued);
        }
        let out = drain_at(&mut q, Rate::from_gbps(1), Time::from_nanos(1_000_000_000));
        assert_eq!(out.len(), 100);
        // 1000 B at 10 Mbit/s = 800 us apart per flow
        let f1: Vec<u64> = out.iter().filter(|(_, f)| *f == 1).map(|(t, _)| *t).collect();
        for w in f1.windows(2) {
            assert_eq!(w[1] - w[0], 800_000, "{f1:?}");
        }
        assert_eq!(q.flows(), 2);
    }

    #[test]
    fn set_maxrate_takes_effect_and_none_stops_pacing() {
        let spec = FqSpec { maxrate: Some(Rate::from_mbps(10)), ..FqSpec::default() };
        let mut q = FqPace::new(&spec).unwrap();
        for k in 0..20 {
            let _ = q.enqueue(Time::ZERO, pkt(1, k));
        }
        q.set_maxrate(Some(Rate::from_mbps(80)));
        let out = drain_at(&mut q, Rate::from_gbps(1), Time::from_nanos(1_000_000_000));
        // 1000 B at 80 Mbit/s: 100 us apart from the first packet on
        assert!(out.windows(2).all(|w| w[1].0 - w[0].0 == 100_000), "{out:?}");
        q.set_maxrate(None);
        for k in 0..5 {
            let _ = q.enqueue(Time::from_nanos(2_000_000_000), pkt(1, k));
        }
        let t0 = Time::from_nanos(2_000_000_000);
        assert!(q.dequeue(t0).is_some() && q.dequeue(t0).is_some(), "no pacing: back to back");
    }

    /// A packet longer than a quantum needs several rounds of credit: the queue keeps handing
    /// it out until a flow may send, instead of reporting nothing while `next_ready` says now
    /// (which stalled the port: jumbo frames under the default 3028-byte quantum).
    #[test]
    fn packets_longer_than_the_quantum_never_stall_the_queue() {
        let spec = FqSpec {
            quantum: Some(Bytes::new(100)),
            initial_quantum: Some(Bytes::new(1000)),
            ..FqSpec::default()
        };
        let mut q = FqPace::new(&spec).unwrap();
        for k in 0..5 {
            let _ = q.enqueue(Time::ZERO, pkt(1, k));
            let _ = q.enqueue(Time::ZERO, pkt(2, 100 + k));
        }
        let order: Vec<u32> =
            std::iter::from_fn(|| q.dequeue(Time::ZERO)).map(|p| p.meta.flow).collect();
        assert_eq!(order, [1, 2, 1, 2, 1, 2, 1, 2, 1, 2], "DRR still alternates");
        // default quantum, 9018-byte frames
        let mut q = FqPace::new(&FqSpec::default()).unwrap();
        let m = EthernetAddress([2, 0, 0, 0, 0, 1]);
        for k in 0..10 {
            let mut f = Vec::new();
            let (a, b) = (Ipv4Addr::new(10, 0, 0, 1), Ipv4Addr::new(10, 0, 1, 1));
            build_udp_ipv4(&mut f, m, m, a, b, 0, Ecn::NotEct, 64, 1, 2, 8958).unwrap();
            let _ = q.enqueue(Time::ZERO, Packet::new(f, 8958, Meta { id: k, ..Meta::default() }));
        }
        assert_eq!(std::iter::from_fn(|| q.dequeue(Time::ZERO)).count(), 10);
        // paced flows that are all waiting still give nothing, and say when
        let spec = FqSpec { maxrate: Some(Rate::from_mbps(8)), ..spec };
        let mut q = FqPace::new(&spec).unwrap();
        for k in 0..2 {
            let _ = q.enqueue(Time::ZERO, pkt(1, k));
            let _ = q.enqueue(Time::ZERO, pkt(2, 100 + k));
        }
        assert!(q.dequeue(Time::ZERO).is_some() && q.dequeue(Time::ZERO).is_some());
        assert!(q.dequeue(Time::ZERO).is_none());
        assert_eq!(q.next_ready(Time::ZERO), Some(Time::from_nanos(1_000_000)));
        assert!(q.dequeue(Time::from_nanos(1_000_000)).is_some());
    }

    #[test]
    fn drr_shares_between_flows_and_limits_per_flow() {
        let spec = FqSpec { flow_limit: Some(3), ..FqSpec::default() };
        let mut q = FqPace::new(&spec).unwrap();
        for k in 0..4 {
            let v = q.enqueue(Time::ZERO, pkt(1, k));
            assert_eq!(matches!(v, Verdict::Enqueued), k < 3);
        }
        for k in 0..3 {
            let _ = q.enqueue(Time::ZERO, pkt(2, 10 + k));
        }
        let order: Vec<u32> =
            std::iter::from_fn(|| q.dequeue(Time::ZERO)).map(|p| p.meta.flow).collect();
        assert_eq!(order.len(), 6);
        assert_eq!(order.iter().filter(|&&f| f == 1).count(), 3);
        assert!(q.is_empty());
        assert!(FqPace::new(&FqSpec { quantum: Some(Bytes::ZERO), ..FqSpec::default() }).is_err());
    }
}
