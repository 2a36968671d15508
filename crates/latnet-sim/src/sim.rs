//! The simulator: drives hosts, switches, queues and links in virtual time.
//!
//! # Model
//!
//! * A **link** is two directed ports. A port has a queue (any [`AnyQueue`]) and a
//!   transmitter: a frame of `L` bytes occupies it for `(L + overhead) * 8 / rate` (rounded up
//!   to whole ns) and arrives whole at the peer `delay` later (store and forward). Random loss,
//!   if configured, is decided when transmission starts.
//! * Under `switching = "cut-through"` a switch has a frame (and forwards it) `delay` after its
//!   transmission started, at its first bit; its last bit arrives one serialization later. The
//!   switch cannot finish sending a frame before that: toward a faster egress the frame joins
//!   the egress queue only at `last bit in - serialization out` (the wait counts as
//!   serialization in `ser_so_far`); at an equal or slower rate it joins at once. Hosts
//!   receive whole frames.
//! * A **switch** parses each arriving frame through `latnet-wire`, looks the destination up in
//!   its FIB, decrements the TTL, sets the packet's priority from the DSCP, and enqueues it at
//!   the egress port. What it cannot parse or route it drops with a counted reason.
//! * A **host** runs the sources of the flows it sends and receives the flows addressed to it;
//!   TCP flows (`tcp-bulk`, `tcp-rr`) run connections on both hosts (see `sim/tcp_glue.rs`).
//!
//! # Measurement points
//!
//! For every packet: creation, enqueue and start of transmission at each hop (hop 0 is the
//! source host's NIC), reception or drop with reason. Per-hop latency is measured at the start
//! of transmission. All latencies follow the scenario's [`LatencyConvention`].
//!
//! At the end of the run, packets still queued or on a link are counted as `end-of-run`, so
//! every packet sent is accounted for: `sent = received + dropped (all reasons)`. Queues give
//! theirs up with [`Queue::drain`], which counts nothing: a port's `dequeued` is what its
//! transmitter sent, and no AQM marks or drops a packet for having waited until the end. A
//! port's busy time (utilisation) counts only what lies within the run.

mod build;
mod queue_series;
mod tcp_glue;

use crate::engine::{EventQueue, MAX_TIE};
use crate::hdr;
use crate::lbf::LbfState;
use crate::net::{Topology, NO_PORT};
use crate::results::{
    FlowResult, HopRecord, HopResult, NodeResult, PacketLog, PacketRecord, PortResult, Results,
};
use crate::scenario::{LatencyConvention, NodeKind, Scenario, TieBreak};
use crate::stats::{Jitter, LatencyStats};
use crate::switch::{Forward, Forwarder, SwitchCtx};
use crate::traffic::Source;
use latnet_dataplane::packet::dscp_from_priority;
use latnet_dataplane::{AnyQueue, DropCounters, DropReason, Meta, Packet, Queue, Verdict};
use latnet_units::{Duration, Time};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use rustc_hash::FxHashMap as HashMap;
use std::net::IpAddr;

/// Progress report passed to the callback of [`Simulator::run_with_progress`].
#[derive(Debug, Clone, Copy)]
pub struct Progress {
    /// Virtual time reached.
    pub now: Time,
    /// Virtual time at which the run ends.
    pub end: Time,
    /// Events executed so far.
    pub events: u64,
}

#[derive(Debug)]
enum Event {
    /// A frame sent on `port` arrives at the peer; its last bit `tail` later (cut-through
    /// toward a switch: the event is at the first bit), else `tail` is zero.
    Arrive { port: u32, pkt: Packet, tail: Duration },
    /// The transmitter of `port` is free.
    TxDone { port: u32 },
    /// A non-work-conserving queue asked to be woken.
    Wake { port: u32 },
    /// The source of `flow` creates a packet.
    Emit { flow: u32 },
    /// A switch finished its modelled processing of `pkt`: enqueue it at `port`.
    Enqueue { port: u32, pkt: Packet },
    /// A TCP connection's timer (ignored unless `gen` is the endpoint's current one).
    TcpTimer { ep: u32, gen: u32 },
    /// A TCP application event of `flow`: start (or the next request), or stop.
    TcpApp { flow: u32, stop: bool },
    /// The TCP time series closes an interval.
    TcpSample,
    /// The queue occupancy series closes an interval.
    QueueSample,
    /// A switch's large-flow counter asked to be woken: its earliest idle connection expires.
    LargeFlowExpiry { node: u32 },
}

#[derive(Debug)]
struct PortState {
    queue: AnyQueue,
    busy: bool,
    wake_at: Option<Time>,
    loss_threshold: u64,
    rng: ChaCha8Rng,
    tx_packets: u64,
    tx_bytes: u64,
    /// Serialization time of every transmission started (the last may end after the run).
    busy_time: Duration,
    /// When the last transmission started ends.
    busy_until: Time,
    drops: DropCounters,
}

#[derive(Debug)]
struct HopStat {
    node: usize,
    port: usize,
    lat: LatencyStats,
}

/// A flow's frame templates, each from the creation instant it applies (the first from zero).
type Templates = Vec<(Time, Vec<u8>)>;

#[derive(Debug)]
struct FlowState {
    source: Source,
    rng: ChaCha8Rng,
    templates: Templates,
    sent: u64,
    received: u64,
    rx_bytes: u64,
    last_rx: Time,
    drops: DropCounters,
    lat: LatencyStats,
    jitter: Jitter,
    hops: Vec<HopStat>,
}

impl FlowState {
    /// A flow's state before the run: nothing sent, received or measured yet.
    fn new(source: Source, rng: ChaCha8Rng, templates: Templates) -> FlowState {
        FlowState {
            source,
            rng,
            templates,
            sent: 0,
            received: 0,
            rx_bytes: 0,
            last_rx: Time::ZERO,
            drops: DropCounters::default(),
            lat: LatencyStats::new(),
            jitter: Jitter::default(),
            hops: Vec::new(),
        }
    }
}

/// Stream ids of the run's random generators (one ChaCha stream per consumer).
const STREAM_FLOW: u64 = 1 << 32;
const STREAM_PORT: u64 = 2 << 32;

/// A simulation of one scenario.
#[derive(Debug)]
pub struct Simulator {
    sc: Scenario,
    topo: Topology,
    events: EventQueue<Event>,
    ports: Vec<PortState>,
    flows: Vec<FlowState>,
    node_drops: Vec<DropCounters>,
    /// Forwarding model of each switch (`None` for hosts).
    forwarders: Vec<Option<Forwarder>>,
    /// Large-flow counter of each switch that has one (switch-assisted pacing).
    large_flows: Vec<Option<latnet_dataplane::LargeFlowCounter>>,
    /// When each large-flow counter is woken next (a [`Event::LargeFlowExpiry`] scheduled).
    large_flow_wake: Vec<Option<Time>>,
    host_by_addr: HashMap<IpAddr, usize>,
    now: Time,
    end: Time,
    next_id: u64,
    log: Option<PacketLog>,
    /// One capture per egress port, when `[output] pcap = true`.
    pcap: Option<Vec<Vec<u8>>>,
    /// The queue occupancy series, when `[output] queues` sets an interval.
    queues: Option<queue_series::QueueSeries>,
    /// Latency-Based Forwarding state (runs with LBF switches or SLO flows).
    lbf: Option<LbfState>,
    tcp: tcp_glue::TcpState,
}

impl Simulator {
    /// The scenario being run.
    pub fn scenario(&self) -> &Scenario {
        &self.sc
    }

    /// The built topology.
    pub fn topology(&self) -> &Topology {
        &self.topo
    }

    /// Deliver `pkt` to the peer of `port` as if it had arrived on that link at time `at` (for
    /// tests and fault injection: malformed frames, foreign traffic). A packet of a scenario
    /// flow is counted in its statistics; one of a flow id beyond them is foreign traffic,
    /// forwarded, dropped and counted at nodes like any other but in no flow's statistics. A
    /// port the topology does not have is refused, naming it.
    pub fn inject(&mut self, at: Time, port: usize, pkt: Packet) -> Result<(), String> {
        let ports = self.topo.ports.len();
        if port >= ports {
            return Err(format!("port {port}: the topology has {ports} ports (0 to {ports} - 1)"));
        }
        self.events.schedule(at, 0, Event::Arrive { port: port as u32, pkt, tail: Duration::ZERO });
        Ok(())
    }

    /// Run to the end.
    pub fn run(self) -> Results {
        self.run_with_progress(|_| true)
    }

    /// Run to the end, calling `progress` about every 1 % of virtual time; if it returns
    /// `false` the run stops there (the results then cover the time reached).
    pub fn run_with_progress(mut self, mut progress: impl FnMut(Progress) -> bool) -> Results {
        let step = Duration::from_nanos((self.end.as_nanos() / 100).max(1));
        let mut next_report = Time::ZERO + step;
        while let Some(t) = self.events.peek_time() {
            if t > self.end {
                break;
            }
            let Some((t, ev)) = self.events.pop() else { break };
            self.now = t;
            self.handle(ev);
            if t >= next_report {
                next_report = t + step;
                let p = Progress { now: t, end: self.end, events: self.events.executed() };
                if !progress(p) {
                    self.end = t;
                    break;
                }
            }
        }
        progress(Progress { now: self.end, end: self.end, events: self.events.executed() });
        self.finish()
    }

    fn tie(&self, flow: u32) -> u32 {
        match self.sc.sim.tie_break {
            TieBreak::Fifo => 0,
            TieBreak::FlowAsc => flow.min(MAX_TIE),
            TieBreak::FlowDesc => MAX_TIE.saturating_sub(flow),
        }
    }

    #[inline]
    fn handle(&mut self, ev: Event) {
        match ev {
            Event::Emit { flow } => self.emit(flow as usize),
            Event::Arrive { port, pkt, tail } => self.arrive(port as usize, pkt, tail),
            Event::Enqueue { port, pkt } => self.enqueue(port as usize, pkt),
            Event::TxDone { port } => {
                self.ports[port as usize].busy = false;
                self.try_transmit(port as usize);
            }
            Event::Wake { port } => {
                let p = &mut self.ports[port as usize];
                if p.wake_at == Some(self.now) {
                    p.wake_at = None;
                }
                if !p.busy {
                    self.try_transmit(port as usize);
                }
            }
            Event::TcpTimer { ep, gen } => self.tcp_timer(ep, gen),
            Event::TcpApp { flow, stop } => self.tcp_app(flow, stop),
            Event::TcpSample => self.tcp_sample(),
            Event::QueueSample => self.queue_sample(),
            Event::LargeFlowExpiry { node } => {
                let node = node as usize;
                self.large_flow_wake[node] = None;
                if let Some(c) = self.large_flows[node].as_mut() {
                    c.expire(self.now);
                }
                self.wake_large_flows(node);
            }
        }
        if self.tcp.has_pending() {
            self.tcp_flush_pending();
        }
    }

    fn schedule_next_emission(&mut self, i: usize) {
        let spec = &self.sc.flows[i];
        let f = &mut self.flows[i];
        if spec.count.is_some_and(|c| f.sent >= c) {
            return;
        }
        if let Some(t) = f.source.next_emission(&mut f.rng) {
            if t < spec.stop {
                let tie = self.tie(i as u32);
                self.events.schedule(t.max(self.now), tie, Event::Emit { flow: i as u32 });
            }
        }
    }

    fn emit(&mut self, i: usize) {
        let spec = &self.sc.flows[i];
        let (src, dst, size, priority) = (spec.src, spec.dst, spec.size, spec.priority);
        let f = &mut self.flows[i];
        let now = self.now;
        let data = match f.templates.iter().rev().find(|(at, _)| *at <= now) {
            Some((_, t)) => t.clone(),
            None => Vec::new(),
        };
        let virtual_len = size.saturating_sub(data.len() as u32);
        let meta = Meta {
            id: self.next_id,
            flow: i as u32,
            seq: f.sent,
            created: self.now,
            arrival: self.now,
            priority,
            ..Meta::default()
        };
        self.next_id += 1;
        f.sent += 1;
        let mut pkt = Packet::new(data, virtual_len, meta);
        if let Some(l) = &self.lbf {
            l.on_emit(self.now, &mut pkt);
        }
        match self.topo.fib[src][dst] {
            NO_PORT => self.drop_at_node(src, pkt, DropReason::NoRoute),
            p => self.enqueue(p as usize, pkt),
        }
        self.schedule_next_emission(i);
    }

    fn arrive(&mut self, from: usize, mut pkt: Packet, tail: Duration) {
        let node = self.topo.ports[from].peer;
        pkt.meta.ingress_port = self.topo.ports[self.topo.ports[from].reverse].local;
        let Some(fwd) = self.forwarders[node].as_mut() else {
            // A host: accept what is addressed to it. A frame that still carries 802.1Q tags
            // had a longer tag stack than its path has switches: a host without VLAN
            // interfaces discards it (as the kernel does in emulation).
            return match hdr::route_info(&pkt.data) {
                Ok(i) if i.headers.vlan_tags > 0 => {
                    self.drop_at_node(node, pkt, DropReason::NoRoute)
                }
                Ok(i) if self.host_by_addr.get(&i.dst) == Some(&node) => match i.l4 {
                    latnet_wire::L4::Tcp { .. } => self.tcp_receive(node, pkt, &i.headers),
                    _ => self.deliver(pkt),
                },
                Ok(_) => self.drop_at_node(node, pkt, DropReason::NotForHost),
                Err(_) => self.drop_at_node(node, pkt, DropReason::Malformed),
            };
        };
        let cx = SwitchCtx { now: self.now, node, topo: &self.topo, hosts: &self.host_by_addr };
        let last_bit = self.now + tail;
        match fwd.forward(&cx, &mut pkt) {
            Forward::Port(port) => {
                if let Some(mut pkt) = self.count_large_flow(node, port, pkt) {
                    match self.cut_through_wait(port, &mut pkt, self.now, last_bit) {
                        None => self.enqueue(port, pkt),
                        Some(at) => self.enqueue_at(at, port, pkt),
                    }
                }
            }
            Forward::After(port, at) => {
                if let Some(mut pkt) = self.count_large_flow(node, port, pkt) {
                    let at = self.cut_through_wait(port, &mut pkt, at, last_bit).unwrap_or(at);
                    self.enqueue_at(at, port, pkt);
                }
            }
            Forward::Drop(reason) => self.drop_at_node(node, pkt, reason),
        }
    }

    fn enqueue_at(&mut self, at: Time, port: usize, pkt: Packet) {
        let tie = self.tie(pkt.meta.flow);
        self.events.schedule(at, tie, Event::Enqueue { port: port as u32, pkt });
    }

    /// Cut-through: a frame whose last bit arrives at `last_bit` may not start on `port` before
    /// `last_bit` minus its serialization there, or it would run out of bits (a faster egress).
    /// If that is after `ready` (when the switch could otherwise queue it), the instant to
    /// queue it instead, with the wait added to its serialization; `None` to queue at `ready`.
    fn cut_through_wait(
        &self,
        port: usize,
        pkt: &mut Packet,
        ready: Time,
        last_bit: Time,
    ) -> Option<Time> {
        let tail = last_bit.saturating_duration_since(ready);
        let wait = crate::switch::cut_through_hold(tail, self.tx_time(port, pkt.wire_len()));
        if wait.is_zero() {
            return None; // store-and-forward, a frame already whole, or a slower egress
        }
        pkt.meta.ser_so_far += wait;
        Some(ready + wait)
    }

    /// How long `port` takes to serialize a frame of `size` (with the link's overhead).
    fn tx_time(&self, port: usize, size: latnet_units::Bytes) -> Duration {
        let t = &self.topo.ports[port];
        t.rate
            .tx_time(size + latnet_units::Bytes::new(u64::from(t.overhead)))
            .unwrap_or(Duration::ZERO)
    }

    /// Switch-assisted pacing: a switch with a large-flow counter counts the packet at its
    /// egress port (and may rewrite its report option); `None` when it dropped the packet.
    fn count_large_flow(&mut self, node: usize, port: usize, mut pkt: Packet) -> Option<Packet> {
        let Some(c) = self.large_flows[node].as_mut() else { return Some(pkt) };
        let rate = self.topo.ports[port].rate;
        let done = c.process(self.now, &mut pkt, port as u32, rate);
        self.wake_large_flows(node);
        match done {
            Ok(_) => Some(pkt),
            Err(reason) => {
                self.drop_at_node(node, pkt, reason);
                None
            }
        }
    }

    /// Wake `node`'s large-flow counter when its earliest idle connection expires, so a
    /// connection leaves the count `idle_timeout` after its last packet, as the element asks,
    /// not at the next packet's scan. Only when no wake-up is pending: an expiry armed later
    /// (a new or refreshed connection) is never earlier than the pending one, so one event per
    /// expiry at most, and a wake-up that finds nothing idle arms the next.
    fn wake_large_flows(&mut self, node: usize) {
        if self.large_flow_wake[node].is_some() {
            return;
        }
        let Some(at) = self.large_flows[node].as_ref().and_then(|c| c.next_expiry()) else {
            return;
        };
        let at = at.max(self.now);
        self.large_flow_wake[node] = Some(at);
        self.events.schedule(at, 0, Event::LargeFlowExpiry { node: node as u32 });
    }

    fn enqueue(&mut self, port: usize, mut pkt: Packet) {
        pkt.meta.arrival = self.now;
        let p = &mut self.ports[port];
        if let Verdict::Dropped(d) = p.queue.enqueue(self.now, pkt) {
            self.record_drop(d.pkt, d.reason, self.topo.ports[port].node);
        }
        self.collect_queue_drops(port);
        self.note_queue_peak(port);
        if !self.ports[port].busy {
            self.try_transmit(port);
        }
    }

    fn collect_queue_drops(&mut self, port: usize) {
        while let Some(d) = self.ports[port].queue.poll_drop() {
            self.record_drop(d.pkt, d.reason, self.topo.ports[port].node);
        }
    }

    fn try_transmit(&mut self, port: usize) {
        let now = self.now;
        let next = self.ports[port].queue.dequeue(now);
        self.collect_queue_drops(port);
        match next {
            Some(pkt) => self.start_tx(port, pkt),
            None => {
                let p = &mut self.ports[port];
                if let Some(t) = p.queue.next_ready(now) {
                    if t > now && p.wake_at.is_none_or(|w| t < w) {
                        p.wake_at = Some(t);
                        self.events.schedule(t, 0, Event::Wake { port: port as u32 });
                    }
                }
            }
        }
    }

    fn latency(&self, meta: &Meta) -> u64 {
        let d = self.now - meta.created;
        match self.sc.sim.latency {
            LatencyConvention::Physical => d.as_nanos(),
            LatencyConvention::ExcludeSerialization => (d - meta.ser_so_far).as_nanos(),
        }
    }

    fn start_tx(&mut self, port: usize, mut pkt: Packet) {
        if pkt.meta.hops == 0 && self.tcp.is_tcp(pkt.meta.flow) {
            self.tcp_left_host(&pkt); // TCP small queues: the connection may send more
        }
        let size = pkt.wire_len();
        let tx = self.tx_time(port, size);
        let topo = &self.topo.ports[port];
        // measurement at start of transmission
        let lat = self.latency(&pkt.meta);
        let hop = usize::from(pkt.meta.hops);
        // (foreign traffic, `inject`ed, has no flow statistics)
        if let Some(f) = self.flows.get_mut(pkt.meta.flow as usize) {
            if f.hops.len() <= hop {
                f.hops.resize_with(hop + 1, || HopStat {
                    node: topo.node,
                    port,
                    lat: LatencyStats::new(),
                });
            }
            f.hops[hop].lat.record(lat);
        }
        if let Some(log) = &mut self.log {
            log.hops.push(HopRecord {
                id: pkt.meta.id,
                flow: pkt.meta.flow,
                seq: pkt.meta.seq,
                hop: pkt.meta.hops,
                node: topo.node as u32,
                port: port as u32,
                priority: pkt.meta.priority,
                enqueue_ns: pkt.meta.arrival.as_nanos(),
                eligible_ns: pkt.meta.eligible.max(pkt.meta.arrival).as_nanos(),
                start_tx_ns: self.now.as_nanos(),
            });
        }
        let delay = topo.delay;
        let p = &mut self.ports[port];
        p.busy = true;
        p.tx_packets += 1;
        p.tx_bytes += size.get();
        p.busy_time += tx;
        p.busy_until = self.now + tx;
        let lost = p.loss_threshold > 0 && p.rng.gen::<u64>() < p.loss_threshold;
        self.events.schedule(self.now + tx, 0, Event::TxDone { port: port as u32 });
        if lost {
            self.ports[port].drops.count(DropReason::LinkLoss);
            let node = self.topo.ports[port].node;
            self.record_drop(pkt, DropReason::LinkLoss, node);
            return;
        }
        let node = self.topo.ports[port].node;
        if let Some(fwd) = self.forwarders[node].as_mut() {
            fwd.on_transmit(self.now, port, &mut pkt);
        } else if let Some(l) = &mut self.lbf {
            l.host_transmit(self.now, port, &mut pkt);
        }
        if let Some(c) = &mut self.pcap {
            crate::pcap::push(&mut c[port], self.now, &pkt.data, size.get());
        }
        pkt.meta.hops = pkt.meta.hops.saturating_add(1);
        // Cut-through: a switch acts on the first bit, the last `tx` later; hosts always
        // receive whole frames.
        let whole = self.sc.receives_whole_frames(self.topo.ports[port].peer);
        let (ser, tail) = if whole { (tx, Duration::ZERO) } else { (Duration::ZERO, tx) };
        pkt.meta.ser_so_far += ser;
        let tie = self.tie(pkt.meta.flow);
        let arrive = Event::Arrive { port: port as u32, pkt, tail };
        self.events.schedule(self.now + ser + delay, tie, arrive);
    }

    fn deliver(&mut self, pkt: Packet) {
        let mut lat = self.latency(&pkt.meta);
        if let Some(l) = &self.lbf {
            // gLBF: the receiver applies the last hop's damper residue before the application.
            lat += l.final_hold(&pkt);
        }
        let Some(f) = self.flows.get_mut(pkt.meta.flow as usize) else {
            return; // foreign traffic (`inject`): in no flow's statistics
        };
        f.received += 1;
        f.rx_bytes += pkt.wire_len().get();
        f.last_rx = self.now;
        f.lat.record(lat);
        f.jitter.record(lat);
        if let Some(l) = &mut self.lbf {
            l.on_deliver(&pkt, lat);
        }
        if let Some(log) = &mut self.log {
            log.packets.push(PacketRecord::received(&pkt.meta, self.now, lat));
        }
    }

    fn drop_at_node(&mut self, node: usize, pkt: Packet, reason: DropReason) {
        self.node_drops[node].count(reason);
        self.record_drop(pkt, reason, node);
    }

    fn record_drop(&mut self, pkt: Packet, reason: DropReason, node: usize) {
        // dropped before leaving its host (a full host queue, a shaper): free its TSQ slot
        if pkt.meta.hops == 0 && reason != DropReason::LinkLoss && self.tcp.is_tcp(pkt.meta.flow) {
            self.tcp_left_host(&pkt);
        }
        if let Some(f) = self.flows.get_mut(pkt.meta.flow as usize) {
            f.drops.count(reason);
        }
        if let Some(l) = &mut self.lbf {
            l.on_drop(pkt.meta.flow as usize, node, reason);
        }
        if let Some(log) = &mut self.log {
            log.packets.push(PacketRecord::dropped(&pkt.meta, self.now, reason, node as u32));
        }
    }

    /// Account for what is still in queues and on links, then summarize.
    fn finish(mut self) -> Results {
        let events = self.events.executed();
        let end = self.end;
        self.now = end;
        let mut leftovers = Vec::new();
        while let Some((_, ev)) = self.events.pop() {
            match ev {
                Event::Arrive { pkt, port, .. } | Event::Enqueue { pkt, port } => {
                    leftovers.push((pkt, self.topo.ports[port as usize].node));
                }
                _ => {}
            }
        }
        // drain() counts nothing: the queues' counters stay where the run left them
        for port in 0..self.ports.len() {
            let node = self.topo.ports[port].node;
            while let Some(pkt) = self.ports[port].queue.drain() {
                leftovers.push((pkt, node));
            }
            self.collect_queue_drops(port);
        }
        for (pkt, node) in leftovers {
            self.record_drop(pkt, DropReason::EndOfRun, node);
        }
        if let Some(log) = &mut self.log {
            log.packets.sort_by_key(|r| r.id);
        }
        self.summarize(events)
    }

    fn summarize(mut self, events: u64) -> Results {
        let lbf = self.lbf.take().map(|l| {
            l.results(self.forwarders.iter().filter_map(|f| match f {
                Some(Forwarder::Lbf(s)) => Some(&**s),
                _ => None,
            }))
        });
        let timeseries = self.tcp.take_series();
        let sc = &self.sc;
        let node_name = |i: usize| sc.nodes[i].name.clone();
        let end = self.end;
        let flows = self
            .flows
            .iter()
            .zip(&sc.flows)
            .enumerate()
            .map(|(i, (f, spec))| {
                // Over the time from the flow's start to its last reception: what the receiver
                // saw, including delivery after the sources stopped.
                let active = f.last_rx - spec.start;
                FlowResult {
                    name: spec.name.clone(),
                    src: node_name(spec.src),
                    dst: node_name(spec.dst),
                    priority: spec.priority,
                    size: spec.size,
                    sent: f.sent,
                    received: f.received,
                    dropped: f.drops.total() - f.drops.get(DropReason::EndOfRun),
                    in_flight_at_end: f.drops.get(DropReason::EndOfRun),
                    drops: f.drops.nonzero().map(|(r, n)| (r.as_str().to_owned(), n)).collect(),
                    throughput_bps: if active.is_zero() {
                        0.0
                    } else {
                        f.rx_bytes as f64 * 8.0 / active.as_secs_f64()
                    },
                    latency_ns: f.lat.summary(),
                    jitter_ns: f.jitter.mean(),
                    hops: f
                        .hops
                        .iter()
                        .enumerate()
                        .map(|(k, h)| HopResult {
                            hop: k as u32,
                            node: node_name(h.node),
                            toward: node_name(self.topo.ports[h.port].peer),
                            latency_ns: h.lat.summary(),
                        })
                        .collect(),
                    tcp: self.tcp.result(i),
                }
            })
            .collect();
        let ports = self
            .ports
            .iter()
            .zip(&self.topo.ports)
            .map(|(p, t)| {
                // only what the transmitter did within the run: not the rest of a frame still
                // being sent at its end
                let busy = p.busy_time - p.busy_until.saturating_duration_since(end);
                PortResult::new(
                    &node_name(t.node),
                    &node_name(t.peer),
                    t,
                    p.tx_packets,
                    p.tx_bytes,
                    busy,
                    end,
                    &p.queue,
                    &p.drops,
                )
            })
            .collect();
        let nodes = self
            .node_drops
            .iter()
            .enumerate()
            .map(|(i, d)| NodeResult {
                name: node_name(i),
                drops: d.nonzero().map(|(r, n)| (r.as_str().to_owned(), n)).collect(),
                large_flows: self.large_flows[i].as_ref().map(|c| *c.stats()),
            })
            .collect();
        let mut res = Results {
            scenario: sc.name.clone(),
            seed: sc.sim.seed,
            dilation: 1,
            duration_ns: sc.sim.duration.as_nanos(),
            end_ns: end.as_nanos(),
            latency_convention: sc.sim.latency.as_str().to_owned(),
            switching: sc.sim.switching.as_str().to_owned(),
            tie_break: sc.sim.tie_break.as_str().to_owned(),
            events,
            flows,
            ports,
            nodes,
            lbf,
            emulation: None,
            log: self.log,
            queues_sampled: self.queues.is_some(),
            queue_series: self.queues.map(|q| q.rows).unwrap_or_default(),
            pcaps: match self.pcap {
                Some(c) => {
                    let names =
                        self.topo.ports.iter().map(|t| {
                            (sc.nodes[t.node].name.as_str(), sc.nodes[t.peer].name.as_str())
                        });
                    crate::results::capture_names(names).into_iter().zip(c).collect()
                }
                None => Vec::new(),
            },
            timeseries,
            aux_flow_names: self.tcp.hidden_names(&sc.flows),
        };
        res.undilate(sc.sim.dilation);
        res
    }
}
