//! The switch without I/O: the simulator's forwarder and queues, plus per-port emulation of
//! link rate and propagation delay, driven by the caller's clock.
//!
//! [`SwitchCore`] is one switch node of a [`Scenario`]. The runner (or a test) calls:
//!
//! 1. [`SwitchCore::advance`]`(now, sink)`: everything that happens up to `now` in emulated
//!    time, in time order: transmitters finishing and starting the next frame, frames leaving
//!    the delay lines; frames due on an interface go to `sink(iface, bytes, due)`;
//! 2. [`SwitchCore::receive`]`(now, iface, frame, offload)` for each frame read from an
//!    interface (the frame is parsed, classified, forwarded and queued; what cannot be parsed
//!    is dropped as `malformed` and counted, never a panic);
//! 3. `advance(now, sink)` again, then sleep until [`SwitchCore::next_wakeup`] or the next
//!    frame.
//!
//! # Emulated ports
//!
//! Every directed port of the scenario whose transmitting end or receiving end is this switch
//! and that no other switch emulates is an [`EmuPort`]: the switch's own egress ports, and the
//! ports of hosts attached to it (a host's kernel sends as fast as veth allows, so the switch
//! emulates the host's egress queue, rate and delay when the frame comes in). A port is the
//! simulator's model exactly: a queue (any `AnyQueue` from the scenario), a transmitter busy for
//! `(len + overhead) * 8 / rate` per frame (a serialization clock in integer ns), random loss
//! from a seeded stream, and a delay line that hands the frame on `delay` after its last bit
//! (after its first bit toward a switch under `switching = "cut-through"`, as the simulator).
//! Emulated time advances in the same order as the simulator's events, so a late wake-up
//! delays frames but never changes the rate: a transmitter that fell behind catches up on its
//! own serialization clock instead of losing capacity.
//!
//! Under cut-through a frame reaches this switch at its first bit (from a host's port emulated
//! here, or from a neighbouring switch, which hands it on at its first bit), its last bit one
//! serialization on the ingress link later. As in the simulator, the switch cannot finish
//! sending a frame before its last bit has arrived: toward a faster egress the frame joins the
//! egress queue only at `last bit in - serialization out` (the wait counts in `ser_so_far`);
//! toward an equal or slower one it joins at once.
//!
//! A port's busy time ([`EmuPort::busy_time`]) counts only what lies within the run, from the
//! experiment's time zero (the switch's start if it was not given one, see
//! [`SwitchCore::new_timed`]) for the scenario's duration and drain, the window the queue
//! series samples, as the simulator counts a port's utilisation: a frame still being sent at
//! the end counts up to the end, one sent before the time zero or after the end not at all.
//!
//! Frames are never released before their emulated instant: the runner only calls `advance`
//! with the clock's current value.

use crate::plan::port_mac;
pub use build::{forwarder_for, lbf_offsets, lbf_template};
use hop_log::HopLog;
pub use hop_log::{
    hop_records_csv, DROPPED, DROP_RECORDS_HEADER, HOP_RECORDS_HEADER, HOP_RECORD_BYTES,
};
use latnet_dataplane::packet::priority_from_dscp;
use latnet_dataplane::{AnyQueue, DropCounters, DropReason, FlowId, Meta, Packet, Queue, Verdict};
use latnet_sim::lbf::{flow_address, LbfState};
use latnet_sim::net::Topology;
use latnet_sim::results::QueueRow;
use latnet_sim::scenario::NodeKind;
use latnet_sim::stats::LatencyStats;
use latnet_sim::switch::{Forward, Forwarder, SwitchCtx};
use latnet_sim::Scenario;
use latnet_units::{Bytes, Duration, Time};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use rustc_hash::FxHashMap as HashMap;
use std::collections::VecDeque;
use std::net::IpAddr;

/// `meta.flow` of a packet that belongs to no scenario flow (iperf3, ping, ...).
pub const FOREIGN: FlowId = FlowId::MAX;

/// Stream of the run's RNG for port `p` (the simulator's numbering, so loss decisions of a
/// port follow the same sequence).
const STREAM_PORT: u64 = 2 << 32;

/// Buffers kept for reuse.
const POOL_MAX: usize = 16_384;

/// Offload state of a received frame (from the `virtio_net_hdr`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Offload {
    /// The L4 checksum is partial: sum from `.0` (from the frame start), store at `.0 + .1`.
    pub partial_csum: Option<(u16, u16)>,
    /// A GSO super-packet (more than one frame's worth): cannot be forwarded as one frame.
    pub gso: bool,
    /// The frame was longer than what the ring kept.
    pub truncated: bool,
    /// An outer 802.1Q tag (TPID, TCI) the kernel took out of the frame: put back after the
    /// MAC addresses (the partial checksum's offsets, counted without it, move with it).
    pub vlan: Option<(u16, u16)>,
}

/// What an emulated port stands for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    /// The switch's own egress port on interface `iface`.
    Egress {
        /// Local interface index.
        iface: usize,
    },
    /// The egress port of the host at the other end of interface `iface`.
    FromHost {
        /// Local interface index.
        iface: usize,
    },
}

/// One emulated directed port.
#[derive(Debug)]
pub struct EmuPort {
    /// Global port index in the scenario's topology.
    pub global: usize,
    /// What it stands for.
    pub role: Role,
    /// The queue.
    pub queue: AnyQueue,
    busy_until: Time,
    stalled_until: Time,
    /// Frames in flight: the instant the peer gets each (its first bit under cut-through
    /// toward a switch, else its last) and the instant its last bit arrives.
    delay_line: VecDeque<(Time, Time, Packet)>,
    /// Frames forwarded here under cut-through that wait for their last bit before they join
    /// the queue (a faster egress), by the instant they join (equal instants in arrival order).
    joining: VecDeque<(Time, Packet)>,
    /// The peer acts on whole frames (store-and-forward, or a host): a frame is handed on
    /// after its serialization and the delay; else (`switching = "cut-through"` toward a
    /// switch) after the delay only, as in the simulator.
    whole: bool,
    loss_threshold: u64,
    rng: ChaCha8Rng,
    /// The last (frame size + overhead, serialization time): frames of one size repeat.
    tx_memo: (Bytes, Duration),
    /// Frames that started transmission.
    pub tx_packets: u64,
    /// Their bytes.
    pub tx_bytes: u64,
    /// Time the emulated transmitter was busy within the run (see the module docs).
    pub busy_time: Duration,
    /// Drops on the link (random loss).
    pub link_drops: DropCounters,
}

/// What a port does next, in the order of events at one instant.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum PortEvent {
    /// A frame leaves the delay line.
    Release,
    /// A frame that waited for its last bit joins the queue.
    Join,
    /// The transmitter starts the next frame.
    Transmit,
}

/// One interface of the switch (one link).
#[derive(Debug, Clone)]
pub struct Iface {
    /// Interface name.
    pub name: String,
    /// Link index.
    pub link: usize,
    /// Global port this interface transmits for (the switch's egress port).
    pub port: usize,
    /// Index in [`SwitchCore::ports`] of the egress port.
    pub egress: usize,
    /// Index of the emulated host port feeding this interface, if the peer is a host.
    pub from_host: Option<usize>,
    /// Local port index at this node (what `Meta::ingress_port` holds).
    pub local: u16,
    /// This interface's MAC.
    pub mac: [u8; 6],
    /// MAC of the interface at the other end.
    pub peer_mac: [u8; 6],
    /// Frames received.
    pub rx_frames: u64,
    /// Bytes received.
    pub rx_bytes: u64,
    /// Frames handed to the interface.
    pub tx_frames: u64,
    /// Bytes handed to the interface.
    pub tx_bytes: u64,
}

/// Counters of the switch outside ports and queues.
#[derive(Debug, Clone, Default)]
pub struct Counters {
    /// Drops at the node (malformed, no route, TTL), as the simulator's node drops.
    pub node_drops: DropCounters,
    /// Frames whose partial checksum (veth offload) was completed in software.
    pub csum_completed: u64,
    /// GSO super-packets received (dropped as malformed).
    pub rx_gso: u64,
    /// Frames the ring truncated (dropped as malformed).
    pub rx_truncated: u64,
    /// Frames that were not IP (ARP, IPv6 ND, LLDP...), dropped as malformed.
    pub rx_non_ip: u64,
    /// Packets forwarded (enqueued at an egress port).
    pub forwarded: u64,
}

/// A scenario flow as the switch recognizes it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
struct FlowKey {
    /// UDP (latnet's senders) or TCP (a TCP flow's data segments, client to server).
    proto: u8,
    src: IpAddr,
    dst: IpAddr,
    sport: u16,
    dport: u16,
}

/// One switch node of a scenario, without I/O.
#[derive(Debug)]
pub struct SwitchCore {
    node: usize,
    topo: Topology,
    hosts: HashMap<IpAddr, usize>,
    fwd: Forwarder,
    /// Interfaces, in the node's link order.
    pub ifaces: Vec<Iface>,
    /// Emulated ports.
    pub ports: Vec<EmuPort>,
    port_of_global: Vec<Option<usize>>,
    flows: HashMap<FlowKey, FlowId>,
    /// Whether some flow is known from any source port (`sport` 0 in `flows`: tcp-rr).
    any_port_flows: bool,
    /// Per flow, the 802.1Q tag stacks its source pushes (the host tagger of source routing),
    /// each from the sequence number of the first packet created at or after its `retag`
    /// instant: the simulator's choice by creation time, read off the packet's stamp.
    flow_tags: Vec<Vec<(u64, Vec<u16>)>>,
    /// Per packet-source flow (latnet's own senders), the octets in front of its latnet
    /// payload after the UDP header (the LBF shim, if any): where the switch reads a packet's
    /// sequence number (for LBF notification records) and send instant (for `hop_latency`).
    /// `None` for TCP flows.
    flow_payload_at: Vec<Option<usize>>,
    /// The senders' clock (`CLOCK_MONOTONIC`) when this switch's clock reads zero.
    clock_origin_ns: u64,
    /// Per emulated port (local index) and flow, the latency from the sender's stamp to the
    /// start of each transmission (physical), as the simulator's per-hop latency. A packet
    /// without a stamp has `meta.created == Time::MAX` and is not measured.
    pub hop_latency: Vec<Vec<Option<LatencyStats>>>,
    /// Drops per scenario flow (by flow index).
    pub flow_drops: Vec<DropCounters>,
    /// Packets forwarded per scenario flow.
    pub flow_forwarded: Vec<u64>,
    /// Switch counters.
    pub counters: Counters,
    next_id: u64,
    pool: Vec<Vec<u8>>,
    lbf: Option<LbfState>,
    /// Large-flow counter (switch-assisted pacing), if the node has `large_flows`.
    large_flows: Option<latnet_dataplane::LargeFlowCounter>,
    /// When `advance` next wakes the large-flow counter: its earliest idle connection expires.
    large_flow_wake: Option<Time>,
    /// Ports whose next event may have changed since `advance` last looked (bit i: port i;
    /// `touched_high`: some port >= 64).
    touched: u64,
    touched_high: bool,
    /// `advance`'s view of each port's next event (kept between calls to reuse the buffer).
    events: Vec<Option<(Time, PortEvent)>>,
    /// How long before the experiment's time zero this switch's clock started.
    run_start: Duration,
    /// The run on the switch's clock, from the experiment's time zero to the end of its
    /// duration and drain: busy time counts only within it.
    run: (Time, Time),
    /// `switching = "cut-through"`: a frame from a neighbouring switch arrives at its first
    /// bit.
    cut_through: bool,
    /// Per emulated port, captured frames not yet taken ([`SwitchCore::enable_capture`]), and
    /// what to add to the switch's clock for their timestamps.
    capture: Option<(Vec<Vec<u8>>, i64)>,
    /// The queue series ([`SwitchCore::enable_queue_series`]).
    queue_series: Option<QueueSampler>,
    /// Per-packet hop records ([`SwitchCore::enable_hop_records`]).
    hop_log: Option<HopLog>,
}

/// Switch-clock instant `t` plus `offset_ns`, 0 if that is before zero.
fn shifted(t: Time, offset_ns: i64) -> u64 {
    let at = (i128::from(t.as_nanos()) + i128::from(offset_ns)).max(0);
    u64::try_from(at).unwrap_or(u64::MAX)
}

/// Samples of every emulated port's queue at fixed instants, as the simulator's
/// `[output] queues` takes them.
#[derive(Debug)]
struct QueueSampler {
    interval: Duration,
    /// The next sample's instant, on the switch's clock.
    next: Time,
    /// The last sample's latest instant (the scenario's end), on the switch's clock.
    last: Time,
    /// Per port: the most packets and bytes waiting since the last sample.
    peak: Vec<(u64, u64)>,
    rows: Vec<QueueRow>,
}

/// Why a switch cannot be built.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum CoreError {
    /// No such node.
    #[error("no node named {0:?} in the scenario")]
    NoNode(String),
    /// The node is a host.
    #[error("{0:?} is a host, not a switch")]
    NotSwitch(String),
    /// A queue spec failed to build (the scenario validated it, so this is a bug).
    #[error("queue of port {port}: {msg}")]
    Queue {
        /// Global port.
        port: usize,
        /// Error.
        msg: String,
    },
}

impl SwitchCore {
    /// The scenario topology.
    pub fn topology(&self) -> &Topology {
        &self.topo
    }

    /// Node index of this switch.
    pub fn node(&self) -> usize {
        self.node
    }

    fn buffer(&mut self) -> Vec<u8> {
        self.pool.pop().unwrap_or_else(|| Vec::with_capacity(2048))
    }

    fn recycle(&mut self, mut v: Vec<u8>) {
        if self.pool.len() < POOL_MAX {
            v.clear();
            self.pool.push(v);
        }
    }

    /// Count `pkt`'s drop at `t`, by the node or at emulated port `port` (and record it, if it
    /// is a stamped packet of a scenario flow and hop records are on: a [`HOP_RECORD_BYTES`]
    /// record whose port is [`DROPPED`], naming the node the simulator would: the port's).
    fn count_drop(&mut self, t: Time, pkt: Packet, reason: DropReason, port: Option<usize>) {
        if port.is_none() {
            self.counters.node_drops.count(reason);
        }
        if let Some(d) = self.flow_drops.get_mut(pkt.meta.flow as usize) {
            d.count(reason);
            if let (Some(log), true) = (&mut self.hop_log, pkt.meta.created <= t) {
                let node = port.map_or(self.node, |i| self.topo.ports[self.ports[i].global].node);
                log.dropped(&pkt.meta, reason, node, t);
            }
        }
        self.recycle(pkt.data);
    }

    /// A frame arrived on interface `iface` at `now`.
    pub fn receive(&mut self, now: Time, iface: usize, frame: &[u8], mut offload: Offload) {
        let Some(ifc) = self.ifaces.get_mut(iface) else { return };
        ifc.rx_frames += 1;
        // (with the tag the kernel took out)
        ifc.rx_bytes += frame.len() as u64 + if offload.vlan.is_some() { 4 } else { 0 };
        let (local, from_host, ingress) =
            (ifc.local, ifc.from_host, self.topo.ports[ifc.port].reverse);
        let mut data = self.buffer();
        match offload.vlan {
            Some((tpid, tci)) if frame.len() >= 12 => {
                data.extend_from_slice(&frame[..12]);
                data.extend_from_slice(&tpid.to_be_bytes());
                data.extend_from_slice(&tci.to_be_bytes());
                data.extend_from_slice(&frame[12..]);
                offload.partial_csum = offload.partial_csum.map(|(s, o)| (s.saturating_add(4), o));
            }
            _ => data.extend_from_slice(frame),
        }
        let mut meta = Meta {
            id: self.next_id,
            flow: FOREIGN,
            // the sender's stamp when the payload carries one; until then, none
            created: Time::MAX,
            arrival: now,
            ingress_port: local,
            ..Meta::default()
        };
        self.next_id += 1;
        if offload.truncated || offload.gso {
            if offload.gso {
                self.counters.rx_gso += 1;
            } else {
                self.counters.rx_truncated += 1;
            }
            let pkt = Packet::new(data, 0, meta);
            return self.count_drop(now, pkt, DropReason::Malformed, None);
        }
        let key = match latnet_wire::parse_headers(&data) {
            Ok(h) => h.key.map(|k| (k, h)),
            Err(_) => None,
        };
        let Some((key, headers)) = key else {
            self.counters.rx_non_ip += 1;
            let pkt = Packet::new(data, 0, meta);
            return self.count_drop(now, pkt, DropReason::Malformed, None);
        };
        if let Some((start, off)) = offload.partial_csum {
            let end = headers.l3_offset().and_then(|o| ip_end(&data, o)).unwrap_or(data.len());
            if !complete_checksum(&mut data, usize::from(start), usize::from(off), end) {
                let pkt = Packet::new(data, 0, meta);
                return self.count_drop(now, pkt, DropReason::Malformed, None);
            }
            self.counters.csum_completed += 1;
        }
        let fk = FlowKey {
            proto: key.proto,
            src: key.src,
            dst: key.dst,
            sport: key.src_port,
            dport: key.dst_port,
        };
        let flow = self.flows.get(&fk).or_else(|| {
            // (a tcp-rr flow's, from any source port: looked up only where there are some)
            let any = self.any_port_flows && key.proto == latnet_wire::protocol::TCP;
            any.then(|| self.flows.get(&FlowKey { sport: 0, ..fk })).flatten()
        });
        if let Some(&f) = flow {
            meta.flow = f;
            // (latnet's UDP senders stamp their packets; a TCP flow's segments carry no stamp)
            if let Some(&Some(skip)) = self.flow_payload_at.get(f as usize) {
                let at = headers.l4_offset().map(|o| o + 8 + skip);
                if let Some((seq, send_ns)) =
                    at.and_then(|o| crate::traffic::payload_stamp(data.get(o..)?))
                {
                    meta.seq = u64::from(seq);
                    meta.created = Time::from_nanos(send_ns.saturating_sub(self.clock_origin_ns));
                }
            }
        }
        meta.priority = priority_from_dscp(key.dscp);
        if from_host.is_some() {
            // The source's tagger, as the simulator's host does it: the flow's tag stack,
            // the first switch's tag outermost (the frame grows by 4 bytes per tag).
            let stacks = self.flow_tags.get(meta.flow as usize);
            if let Some((_, tags)) = stacks.and_then(|s| s.iter().rev().find(|s| s.0 <= meta.seq)) {
                for &t in tags.iter().rev() {
                    if latnet_wire::push_vlan(&mut data, latnet_wire::VlanTag::new(t)).is_err() {
                        let pkt = Packet::new(data, 0, meta);
                        return self.count_drop(now, pkt, DropReason::Malformed, None);
                    }
                }
            }
        }
        let pkt = Packet::new(data, 0, meta);
        match from_host {
            // The host's own egress port, emulated here.
            Some(p) => self.enqueue(p, now, pkt),
            // From a switch, which under cut-through handed the frame on at its first bit: the
            // last bit follows one serialization on its port later.
            None if self.cut_through => {
                let last_bit = now + self.tx_time(ingress, pkt.wire_len());
                self.forward(now, last_bit, pkt)
            }
            None => self.forward(now, now, pkt),
        }
    }

    /// How long global port `g` takes to serialize a frame of `size` (with the link's
    /// overhead).
    fn tx_time(&self, g: usize, size: Bytes) -> Duration {
        let t = &self.topo.ports[g];
        t.rate.tx_time(size + Bytes::new(u64::from(t.overhead))).unwrap_or(Duration::ZERO)
    }

    /// Forward `pkt`, which the switch has (its first bit) at `now` and whose last bit arrives
    /// at `last_bit` (`now` for a whole frame).
    fn forward(&mut self, now: Time, last_bit: Time, mut pkt: Packet) {
        let cx = SwitchCtx { now, node: self.node, topo: &self.topo, hosts: &self.hosts };
        match self.fwd.forward(&cx, &mut pkt) {
            // (`After` is a modelled processing cost, which `forwarder_for` leaves out)
            Forward::Port(g) | Forward::After(g, _) => {
                if let (Some(c), Some(t)) = (self.large_flows.as_mut(), self.topo.ports.get(g)) {
                    // switch-assisted pacing: count large flows at their egress port
                    let done = c.process(now, &mut pkt, g as u32, t.rate);
                    self.wake_large_flows(now);
                    if let Err(r) = done {
                        return self.count_drop(now, pkt, r, None);
                    }
                }
                match self.port_of_global.get(g).copied().flatten() {
                    // a frame with tags left toward a host: its kernel would discard it
                    // unseen; counted here as the simulator's host counts it
                    Some(i) if self.to_host(i) && vlan_tagged(&pkt.data) => {
                        self.count_drop(now, pkt, DropReason::NoRoute, None)
                    }
                    Some(i) => {
                        self.counters.forwarded += 1;
                        if let Some(n) = self.flow_forwarded.get_mut(pkt.meta.flow as usize) {
                            *n += 1;
                        }
                        // Cut-through toward a faster egress: not before `last_bit - tx`, or
                        // the transmitter would run out of bits (the simulator's rule).
                        let tail = last_bit.saturating_duration_since(now);
                        let tx = self.tx_time(g, pkt.wire_len());
                        let hold = latnet_sim::switch::cut_through_hold(tail, tx);
                        let through = now + hold;
                        if through > now {
                            pkt.meta.ser_so_far += hold;
                            self.touch(i);
                            let q = &mut self.ports[i].joining;
                            let at = q.partition_point(|(t, _)| *t <= through);
                            q.insert(at, (through, pkt));
                        } else {
                            self.enqueue(i, now, pkt)
                        }
                    }
                    None => self.count_drop(now, pkt, DropReason::NoRoute, None),
                }
            }
            Forward::Drop(r) => self.count_drop(now, pkt, r, None),
        }
    }

    /// Port `i` is the switch's egress toward a host.
    fn to_host(&self, i: usize) -> bool {
        match self.ports.get(i).map(|p| p.role) {
            Some(Role::Egress { iface }) => {
                self.ifaces.get(iface).is_some_and(|f| f.from_host.is_some())
            }
            _ => false,
        }
    }

    /// Port `i`'s next event may have changed.
    #[inline]
    fn touch(&mut self, i: usize) {
        if i < 64 {
            self.touched |= 1 << i;
        } else {
            self.touched_high = true;
        }
    }

    fn enqueue(&mut self, i: usize, now: Time, mut pkt: Packet) {
        self.touch(i);
        pkt.meta.arrival = now;
        if let Verdict::Dropped(d) = self.ports[i].queue.enqueue(now, pkt) {
            self.count_drop(now, d.pkt, d.reason, Some(i));
        }
        self.collect_queue_drops(i, now);
        if let Some(s) = &mut self.queue_series {
            let q = &self.ports[i].queue;
            let p = &mut s.peak[i];
            *p = (p.0.max(q.len() as u64), p.1.max(q.byte_len().get()));
        }
        self.try_transmit(i, now);
    }

    fn collect_queue_drops(&mut self, i: usize, t: Time) {
        while let Some(d) = self.ports[i].queue.poll_drop() {
            self.count_drop(t, d.pkt, d.reason, Some(i));
        }
    }

    /// Start a transmission on port `i` at `t` if its transmitter is free and a packet is
    /// eligible. Returns whether the port made progress (sent or dropped something).
    fn try_transmit(&mut self, i: usize, t: Time) -> bool {
        self.touch(i);
        let p = &mut self.ports[i];
        if p.busy_until > t {
            return false;
        }
        let before = p.queue.len();
        let next = p.queue.dequeue(t);
        let progressed = next.is_some() || p.queue.len() != before;
        self.collect_queue_drops(i, t);
        if let Some(pkt) = next {
            self.start_tx(i, t, pkt);
        }
        progressed
    }

    fn start_tx(&mut self, i: usize, t: Time, mut pkt: Packet) {
        let (rate, delay, overhead) = {
            let tp = &self.topo.ports[self.ports[i].global];
            (tp.rate, tp.delay, tp.overhead)
        };
        let size = pkt.wire_len();
        let p = &mut self.ports[i];
        let on_wire = size + Bytes::new(u64::from(overhead));
        let tx = if p.tx_memo.0 == on_wire {
            p.tx_memo.1
        } else {
            let tx = rate.tx_time(on_wire).unwrap_or(Duration::ZERO);
            p.tx_memo = (on_wire, tx);
            tx
        };
        p.busy_until = t + tx;
        // only the part within the run (a frame still being sent at its end counts up to it)
        let (zero, end) = self.run;
        p.busy_time += p.busy_until.min(end).saturating_duration_since(t.max(zero));
        p.tx_packets += 1;
        p.tx_bytes += size.get();
        // measurement at start of transmission, as in the simulator (a frame lost on the link
        // counts too). A host's NIC cannot start sending a packet before its sender stamped it:
        // a ring timestamp that converts to an instant before the stamp (the two clocks' offset
        // is read to within a few us, more while the machine stalls) is measured at the stamp,
        // and so are its enqueue and eligible instants in its hop record (it waited 0).
        let from_host = matches!(self.ports[i].role, Role::FromHost { .. });
        let stamped = pkt.meta.created != Time::MAX;
        let floor = if from_host && stamped { pkt.meta.created } else { Time::ZERO };
        let at = t.max(floor);
        if pkt.meta.created <= at {
            // (a stamp is read only for scenario flows: the slot exists)
            if let Some(s) =
                self.hop_latency.get_mut(i).and_then(|r| r.get_mut(pkt.meta.flow as usize))
            {
                s.get_or_insert_with(LatencyStats::new).record((at - pkt.meta.created).as_nanos());
                if let Some(log) = &mut self.hop_log {
                    log.transmitted(&pkt.meta, self.ports[i].global, at, floor);
                }
            }
        }
        let p = &mut self.ports[i];
        let lost = p.loss_threshold > 0 && p.rng.gen::<u64>() < p.loss_threshold;
        if lost {
            p.link_drops.count(DropReason::LinkLoss);
            return self.count_drop(t, pkt, DropReason::LinkLoss, Some(i));
        }
        let global = p.global;
        match p.role {
            Role::Egress { iface } => {
                self.fwd.on_transmit(t, global, &mut pkt);
                let ifc = &self.ifaces[iface];
                if pkt.data.len() >= 12 {
                    pkt.data[0..6].copy_from_slice(&ifc.peer_mac);
                    pkt.data[6..12].copy_from_slice(&ifc.mac);
                }
            }
            // The host's share of the per-hop LBF update, as the simulator's host does it.
            Role::FromHost { .. } => {
                if let Some(l) = &mut self.lbf {
                    l.host_transmit(t, global, &mut pkt);
                }
            }
        }
        if let Some((c, offset)) = &mut self.capture {
            let at = Time::from_nanos(shifted(t, *offset));
            latnet_sim::pcap::push(&mut c[i], at, &pkt.data, size.get());
        }
        pkt.meta.hops = pkt.meta.hops.saturating_add(1);
        let ser = if self.ports[i].whole { tx } else { Duration::ZERO };
        pkt.meta.ser_so_far += ser;
        self.ports[i].delay_line.push_back((t + ser + delay, t + tx + delay, pkt));
    }

    /// The earliest pending event of port `i`, and its kind.
    fn port_event(&self, i: usize) -> Option<(Time, PortEvent)> {
        let p = &self.ports[i];
        let release = p.delay_line.front().map(|(r, _, _)| (*r, PortEvent::Release));
        let join = p.joining.front().map(|(j, _)| (*j, PortEvent::Join));
        let tx = if p.queue.is_empty() {
            None
        } else {
            let from = p.busy_until.max(p.stalled_until);
            p.queue.next_ready(from).map(|r| (r.max(from), PortEvent::Transmit))
        };
        [release, join, tx].into_iter().flatten().min()
    }

    /// Run everything due up to `now`; a frame leaving on an interface goes to
    /// `sink(iface, bytes, due)`, `due` being its emulated instant (`<= now`).
    pub fn advance(&mut self, now: Time, sink: &mut impl FnMut(usize, &[u8], Time)) {
        self.advance_inner(now, &mut |i, data: Vec<u8>, t| {
            sink(i, &data, t);
            Some(data)
        });
    }

    /// [`Self::advance`] handing each frame's buffer to `sink` (no copy); give buffers back
    /// with [`Self::recycle_buffer`] once sent so that they are reused.
    pub fn advance_owned(&mut self, now: Time, sink: &mut impl FnMut(usize, Vec<u8>, Time)) {
        self.advance_inner(now, &mut |i, data, t| {
            sink(i, data, t);
            None
        });
    }

    /// A frame buffer from [`Self::advance_owned`], for reuse.
    pub fn recycle_buffer(&mut self, buf: Vec<u8>) {
        self.recycle(buf);
    }

    /// `sink` returns the buffer if it is free for reuse.
    fn advance_inner(
        &mut self,
        now: Time,
        sink: &mut impl FnMut(usize, Vec<u8>, Time) -> Option<Vec<u8>>,
    ) {
        if self.large_flow_wake.is_some_and(|t| t <= now) {
            self.large_flow_wake = None;
            if let Some(c) = self.large_flows.as_mut() {
                c.expire(now);
            }
            self.wake_large_flows(now);
        }
        // Every port's next event, kept up to date below for the ports an event touched
        // (only they can have changed), so that each event does not rescan every port.
        let mut ev = std::mem::take(&mut self.events);
        ev.clear();
        ev.extend((0..self.ports.len()).map(|i| self.port_event(i)));
        loop {
            // Earliest event; at equal times releases first, then frames joining a queue,
            // then transmissions, each by lower port index.
            let best =
                ev.iter().enumerate().filter_map(|(i, e)| e.map(|(t, kind)| (t, kind, i))).min();
            let Some((t, kind, i)) = best else { break };
            if t > now {
                break;
            }
            self.sample_queues(t);
            self.touched = 0;
            self.touched_high = false;
            self.touch(i);
            match kind {
                PortEvent::Release => {
                    // Always there (the event said so); a stale entry is only recomputed below.
                    let Some((_, last_bit, pkt)) = self.ports[i].delay_line.pop_front() else {
                        ev[i] = self.port_event(i);
                        continue;
                    };
                    match self.ports[i].role {
                        Role::Egress { iface } => {
                            // (MAC addresses were set as its transmission started)
                            let ifc = &mut self.ifaces[iface];
                            ifc.tx_frames += 1;
                            ifc.tx_bytes += pkt.data.len() as u64;
                            if let Some(buf) = sink(iface, pkt.data, t) {
                                self.recycle(buf);
                            }
                        }
                        Role::FromHost { .. } => self.forward(t, last_bit, pkt),
                    }
                }
                PortEvent::Join => {
                    if let Some((_, pkt)) = self.ports[i].joining.pop_front() {
                        self.enqueue(i, t, pkt);
                    }
                }
                PortEvent::Transmit => {
                    if !self.try_transmit(i, t) {
                        // Nothing eligible after all (the queue's promise did not hold): do
                        // not spin.
                        self.ports[i].stalled_until = t + Duration::from_nanos(1);
                    }
                }
            }
            if self.touched_high {
                for (j, e) in ev.iter_mut().enumerate() {
                    *e = self.port_event(j);
                }
            } else {
                let mut m = self.touched;
                while m != 0 {
                    let j = m.trailing_zeros() as usize;
                    m &= m - 1;
                    ev[j] = self.port_event(j);
                }
            }
        }
        self.events = ev;
        self.sample_queues(now);
    }

    /// When [`Self::advance`] next has something to do, if anything is pending.
    pub fn next_wakeup(&self) -> Option<Time> {
        let ports = (0..self.ports.len()).filter_map(|i| self.port_event(i)).map(|(t, _)| t);
        ports.chain(self.large_flow_wake).min()
    }

    /// Arm the large-flow counter's wake-up at its earliest idle connection's expiry (as the
    /// simulator does), unless one is armed: one armed later is never earlier.
    fn wake_large_flows(&mut self, now: Time) {
        if self.large_flow_wake.is_none() {
            let next = self.large_flows.as_ref().and_then(|c| c.next_expiry());
            self.large_flow_wake = next.map(|t| t.max(now));
        }
    }
}

/// The frame carries an 802.1Q / 802.1ad tag after its MAC addresses.
fn vlan_tagged(frame: &[u8]) -> bool {
    frame.get(12..14).is_some_and(|t| {
        latnet_wire::ethernet::EtherType(u16::from_be_bytes([t[0], t[1]])).is_vlan_tpid()
    })
}

/// End of the IP datagram that starts at `l3` (by its length field), clamped to the frame.
fn ip_end(frame: &[u8], l3: usize) -> Option<usize> {
    let v = frame.get(l3)? >> 4;
    let len = match v {
        4 => usize::from(u16::from_be_bytes([*frame.get(l3 + 2)?, *frame.get(l3 + 3)?])),
        6 => 40 + usize::from(u16::from_be_bytes([*frame.get(l3 + 4)?, *frame.get(l3 + 5)?])),
        _ => return None,
    };
    Some((l3 + len).min(frame.len()))
}

/// Complete a partial L4 checksum (veth `CHECKSUM_PARTIAL`): the field at `start + off` holds
/// the pseudo-header sum; the checksum is the complement of the sum from `start` to `end`.
/// `false` if the offsets do not fit the frame.
pub fn complete_checksum(frame: &mut [u8], start: usize, off: usize, end: usize) -> bool {
    let at = start + off;
    if at + 2 > end || end > frame.len() || start >= end {
        return false;
    }
    let mut c = latnet_wire::checksum::checksum(&frame[start..end]);
    // UDP: a computed 0 is sent as 0xffff (0 means "no checksum"); harmless for TCP.
    if c == 0 && off == 6 {
        c = 0xffff;
    }
    frame[at..at + 2].copy_from_slice(&c.to_be_bytes());
    true
}

mod build;
mod hop_log;
mod observe;
#[cfg(test)]
mod tests;
