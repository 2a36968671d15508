//! The simulator's hosts running TCP: connections ([`crate::tcp::Connection`]) attached to
//! hosts, their segments turned into real frames and back, their timers as events, the
//! applications of `tcp-bulk` and `tcp-rr` flows, and the per-flow TCP results.
//!
//! * **Demultiplexing** on arrival at a host is by the 4-tuple of the parsed headers (local
//!   address and port, remote address and port); a SYN to a flow's destination address and
//!   port opens the server side. A segment for no connection is dropped (`no-connection`).
//! * **Host queue backpressure** (like Linux TCP small queues): a connection keeps at most
//!   `tsq` data segments (default 2) in its host's egress queue and sends more as they leave
//!   (or are dropped there); pure ACKs are never held back. So a window is not dumped into the
//!   host's queue at once, and a host-wide shaper (`htb`) at that queue paces every connection
//!   behind it.
//! * **Accounting**: the packets a flow's client sends count as the flow's packets (latency,
//!   drops, per hop, as for UDP flows); the server's count on a hidden reverse record that
//!   feeds the TCP summary only.
//! * **Timers**: one pending event per connection at a time for its earliest deadline
//!   (retransmission, delayed ACK, pacing release); a later deadline is picked up when the
//!   early event fires, so restarting a timer on every ACK costs no event.

mod large_flow;

use super::{Event, Simulator};
use crate::stats::LatencyStats;
use crate::tcp::app::{RrArrivals, TcpSpec};
use crate::tcp::report::{SeriesRow, SlowStartReport, TcpFlowResult};
use crate::tcp::sender::SlowStartExit;
use crate::tcp::{ConnEvent, Connection, Segment, TcpConfig};
use crate::traffic::TrafficSpec;
use latnet_dataplane::packet::dscp_from_priority;
use latnet_dataplane::{DropReason, Meta, Packet};
use latnet_units::{Duration, Time};
use latnet_wire::{Headers, TcpFlags};
use rand::Rng;
use rand_chacha::ChaCha8Rng;
use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};
use std::net::IpAddr;

/// A fast, deterministic hasher for the demultiplexing table (FxHash's multiply-rotate; the
/// keys are addresses and ports chosen by the scenario, not by an adversary). Lookups only:
/// no output depends on the table's iteration order.
#[derive(Debug, Default, Clone, Copy)]
struct FxHasher(u64);

impl Hasher for FxHasher {
    fn write(&mut self, bytes: &[u8]) {
        for chunk in bytes.chunks(8) {
            let mut b = [0u8; 8];
            b[..chunk.len()].copy_from_slice(chunk);
            self.write_u64(u64::from_le_bytes(b));
        }
    }
    fn write_u8(&mut self, v: u8) {
        self.write_u64(u64::from(v));
    }
    fn write_u16(&mut self, v: u16) {
        self.write_u64(u64::from(v));
    }
    fn write_u32(&mut self, v: u32) {
        self.write_u64(u64::from(v));
    }
    fn write_u64(&mut self, v: u64) {
        self.0 = (self.0.rotate_left(5) ^ v).wrapping_mul(0x51_7c_c1_b7_27_22_0a_95);
    }
    fn write_usize(&mut self, v: usize) {
        self.write_u64(v as u64);
    }
    fn finish(&self) -> u64 {
        self.0
    }
}

type FastMap<K, V> = HashMap<K, V, BuildHasherDefault<FxHasher>>;

/// Default interval of the time series when the scenario sets none.
const DEFAULT_INTERVAL: Duration = Duration::from_millis(100);

type Key = (IpAddr, u16, IpAddr, u16);

#[derive(Debug, Clone, Copy, Default)]
struct Counters {
    delivered: u64,
    segments: u64,
    retransmits: u64,
    rtos: u64,
    recoveries: u64,
    loss_probes: u64,
    ecn_reductions: u64,
    ece_acks: u64,
    ce_marks: u64,
}

#[derive(Debug, Clone, Copy, Default)]
struct Interval {
    delivered: u64,
    retransmits: u64,
    ce_marks: u64,
    ece_acks: u64,
    rtt_n: u64,
    rtt_sum: u128,
    rtt_min: Option<u64>,
    rtt_max: Option<u64>,
}

#[derive(Debug)]
struct TcpFlow {
    spec: TcpSpec,
    rr: bool,
    cfg: TcpConfig,
    src: usize,
    dst: usize,
    src_addr: IpAddr,
    dst_addr: IpAddr,
    dst_port: u16,
    dscp: u8,
    priority: u8,
    /// Accounting records: client's packets, server's packets.
    fwd: u32,
    rev: u32,
    start: Time,
    stop: Time,
    rng: ChaCha8Rng,
    /// tcp-rr: the request instants still to come.
    arrivals: Option<RrArrivals>,
    next_port: u16,
    open: Vec<u32>,
    client: Option<u32>,
    tot: Counters,
    iv: Interval,
    conns: u64,
    completed: u64,
    aborted: u64,
    rtt: LatencyStats,
    fct: LatencyStats,
    completion: Option<Time>,
    last_delivery: Time,
    ecn: Option<bool>,
    slow_start: Option<SlowStartExit>,
}

#[derive(Debug)]
struct Endpoint {
    conn: Connection,
    flow: u32,
    client: bool,
    node: usize,
    peer: usize,
    key: Key,
    acct: u32,
    timer_at: Option<Time>,
    gen: u32,
    nic: u32,
    started: Time,
    rx: u64,
    responded: bool,
    done: bool,
    seen: Counters,
}

/// TCP state of a simulation.
#[derive(Debug, Default)]
pub(super) struct TcpState {
    flows: Vec<Option<TcpFlow>>,
    eps: Vec<Option<Endpoint>>,
    free: Vec<u32>,
    demux: FastMap<Key, u32>,
    listen: FastMap<(IpAddr, u16), u32>,
    /// The one endpoint sending on an accounting record (bulk flows), to find it without
    /// parsing when its packet leaves the host.
    acct_ep: Vec<Option<u32>>,
    /// Segments of one `tcp_after` call, reused.
    scratch: Vec<Segment>,
    pending: Vec<u32>,
    /// Per accounting record (scenario flows, then hidden reverse records): is it TCP.
    is_tcp: Vec<bool>,
    interval: Duration,
    series: Vec<SeriesRow>,
    gen: u32,
    /// Switch-assisted pacing: the senders of large flows.
    lf: large_flow::HostAgents,
}

impl TcpState {
    /// The TCP flows of `sc`; hidden reverse accounting records get indices from
    /// `sc.flows.len()` on. Returns the state and, for each hidden record, its flow.
    pub(super) fn new(
        sc: &crate::Scenario,
        rng_for: impl Fn(u64) -> ChaCha8Rng,
    ) -> (TcpState, Vec<usize>) {
        let mut st = TcpState { is_tcp: vec![false; sc.flows.len()], ..TcpState::default() };
        let mut hidden = Vec::new();
        for (i, f) in sc.flows.iter().enumerate() {
            let (spec, rr) = match &f.traffic {
                TrafficSpec::TcpBulk(t) => (t.clone(), false),
                TrafficSpec::TcpRr(t) => (t.clone(), true),
                _ => {
                    st.flows.push(None);
                    continue;
                }
            };
            let rev = (sc.flows.len() + hidden.len()) as u32;
            hidden.push(i);
            st.is_tcp[i] = true;
            let mut rng = rng_for(STREAM_TCP + i as u64);
            let cfg = spec.config(f.size, rng.gen());
            let dst_addr = IpAddr::V4(sc.nodes[f.dst].address);
            st.listen.insert((dst_addr, f.dst_port), i as u32);
            st.flows.push(Some(TcpFlow {
                rr,
                cfg,
                src: f.src,
                dst: f.dst,
                src_addr: IpAddr::V4(sc.nodes[f.src].address),
                dst_addr,
                dst_port: f.dst_port,
                dscp: dscp_from_priority(f.priority),
                priority: f.priority,
                fwd: i as u32,
                rev,
                start: f.start,
                stop: f.stop,
                rng,
                arrivals: rr.then(|| RrArrivals::new(&spec, f.start, f.stop, sc.sim.seed, i)),
                next_port: f.src_port,
                open: Vec::new(),
                client: None,
                tot: Counters::default(),
                iv: Interval::default(),
                conns: 0,
                completed: 0,
                aborted: 0,
                rtt: LatencyStats::new(),
                fct: LatencyStats::new(),
                completion: None,
                last_delivery: f.start,
                ecn: None,
                slow_start: None,
                spec,
            }));
        }
        st.is_tcp.resize(sc.flows.len() + hidden.len(), true);
        st.acct_ep = vec![None; st.is_tcp.len()];
        st.interval = sc.output.timeseries.unwrap_or(DEFAULT_INTERVAL);
        st.lf = large_flow::HostAgents::new(sc);
        (st, hidden)
    }

    /// Whether packets accounted on `flow` belong to TCP.
    #[inline]
    pub(super) fn is_tcp(&self, flow: u32) -> bool {
        self.is_tcp.get(flow as usize).copied().unwrap_or(false)
    }

    /// Connections wait for a flush.
    #[inline]
    pub(super) fn has_pending(&self) -> bool {
        !self.pending.is_empty()
    }

    fn any(&self) -> bool {
        self.flows.iter().any(Option::is_some)
    }

    /// The TCP summary of scenario flow `i`.
    pub(super) fn result(&self, i: usize) -> Option<TcpFlowResult> {
        let f = self.flows.get(i)?.as_ref()?;
        let active = f.last_delivery - f.start;
        Some(TcpFlowResult {
            cc: f.cfg.cc.as_str().to_owned(),
            ecn: f.ecn.unwrap_or(false),
            delivered_bytes: f.tot.delivered,
            goodput_bps: if active.is_zero() {
                0.0
            } else {
                f.tot.delivered as f64 * 8.0 / active.as_secs_f64()
            },
            segments_sent: f.tot.segments,
            retransmits: f.tot.retransmits,
            rtos: Some(f.tot.rtos),
            fast_recoveries: Some(f.tot.recoveries),
            loss_probes: Some(f.tot.loss_probes),
            ecn_reductions: Some(f.tot.ecn_reductions),
            ece_acks: Some(f.tot.ece_acks),
            ce_marks: f.tot.ce_marks,
            rtt_ns: f.rtt.summary(),
            connections: f.conns,
            completed: f.completed,
            aborted: f.aborted,
            completion_ns: f.completion.map(|t| (t - f.start).as_nanos()),
            fct_ns: f.fct.summary(),
            slow_start: f.slow_start.map(|x| SlowStartReport {
                t_ns: x.at.as_nanos(),
                ssthresh_bytes: x.ssthresh,
                cause: Some(x.cause.as_str().to_owned()),
            }),
            large_flow: self.lf.result(i),
        })
    }

    /// Names of the hidden accounting records, in index order.
    pub(super) fn hidden_names(&self, flows: &[crate::scenario::FlowSpec]) -> Vec<String> {
        let mut v: Vec<(u32, String)> = self
            .flows
            .iter()
            .zip(flows)
            .filter_map(|(f, spec)| f.as_ref().map(|f| (f.rev, format!("{}:server", spec.name))))
            .collect();
        v.sort_by_key(|x| x.0);
        v.into_iter().map(|x| x.1).collect()
    }

    /// The time series, taken.
    pub(super) fn take_series(&mut self) -> Vec<SeriesRow> {
        std::mem::take(&mut self.series)
    }
}

/// Stream id of each TCP flow's random generator (ISS, BBR's phase; request arrivals draw
/// from [`crate::tcp::app::STREAM_RR`]).
const STREAM_TCP: u64 = 3 << 32;

impl Simulator {
    /// Schedule the applications' first events and the time series.
    pub(super) fn tcp_init(&mut self) {
        for i in 0..self.tcp.flows.len() {
            let tie = self.tie(i as u32);
            let Some(f) = &mut self.tcp.flows[i] else { continue };
            let (stop, rr) = (f.stop, f.rr);
            // a request/response flow's first request is its first arrival: its start
            let start = f.arrivals.as_mut().map_or(Some(f.start), Iterator::next);
            if let Some(start) = start {
                self.events.schedule(start, tie, Event::TcpApp { flow: i as u32, stop: false });
            }
            if !rr {
                self.events.schedule(stop, tie, Event::TcpApp { flow: i as u32, stop: true });
            }
        }
        if self.tcp.any() && !self.tcp.interval.is_zero() {
            self.events.schedule(Time::ZERO + self.tcp.interval, 0, Event::TcpSample);
        }
    }

    fn tcp_alloc(&mut self, ep: Endpoint) -> u32 {
        let key = ep.key;
        let (acct, bulk) =
            (ep.acct, self.tcp.flows[ep.flow as usize].as_ref().is_some_and(|f| !f.rr));
        let id = match self.tcp.free.pop() {
            Some(i) => {
                self.tcp.eps[i as usize] = Some(ep);
                i
            }
            None => {
                self.tcp.eps.push(Some(ep));
                (self.tcp.eps.len() - 1) as u32
            }
        };
        self.tcp.demux.insert(key, id);
        if bulk {
            if let Some(slot) = self.tcp.acct_ep.get_mut(acct as usize) {
                *slot = Some(id);
            }
        }
        id
    }

    fn tcp_free(&mut self, id: u32) {
        let Some(ep) = self.tcp.eps.get_mut(id as usize).and_then(Option::take) else { return };
        self.tcp.demux.remove(&ep.key);
        if let Some(slot) = self.tcp.acct_ep.get_mut(ep.acct as usize) {
            if *slot == Some(id) {
                *slot = None;
            }
        }
        if let Some(f) = self.tcp.flows[ep.flow as usize].as_mut() {
            f.open.retain(|&x| x != id);
            if f.client == Some(id) {
                f.client = None;
            }
        }
        self.tcp.free.push(id);
    }

    /// An application event: a bulk flow starts or stops, or a request arrives.
    pub(super) fn tcp_app(&mut self, flow: u32, stop: bool) {
        let Some(f) = self.tcp.flows[flow as usize].as_mut() else { return };
        if stop {
            if let Some(c) = f.client {
                if let Some(e) = self.tcp.eps[c as usize].as_mut() {
                    e.conn.stop_writing();
                    e.conn.close();
                }
                self.tcp_after(c);
            }
            return;
        }
        if let Some(next) = f.arrivals.as_mut().and_then(Iterator::next) {
            let tie = self.tie(flow);
            self.events.schedule(next, tie, Event::TcpApp { flow, stop: false });
        }
        self.tcp_open_client(flow);
    }

    fn tcp_open_client(&mut self, flow: u32) {
        let now = self.now;
        let Some(f) = self.tcp.flows[flow as usize].as_mut() else { return };
        // a fresh source port per connection (request/response opens many)
        let mut port = f.next_port;
        for _ in 0..u16::MAX {
            if port != 0
                && !self.tcp.demux.contains_key(&(f.src_addr, port, f.dst_addr, f.dst_port))
            {
                break;
            }
            port = port.wrapping_add(1);
        }
        f.next_port = port.wrapping_add(1);
        let iss = f.rng.gen::<u32>();
        let mut conn = Connection::connect(f.cfg.clone(), port, f.dst_port, iss);
        if !f.rr {
            match f.spec.bytes {
                Some(b) => {
                    conn.write(b.get());
                    conn.close();
                }
                None => conn.write(u64::MAX / 4),
            }
        } else if let Some(b) = f.spec.request {
            conn.write(b.get());
        }
        f.conns += 1;
        let ep = Endpoint {
            conn,
            flow,
            client: true,
            node: f.src,
            peer: f.dst,
            key: (f.src_addr, port, f.dst_addr, f.dst_port),
            acct: f.fwd,
            timer_at: None,
            gen: 0,
            nic: 0,
            started: now,
            rx: 0,
            responded: false,
            done: false,
            seen: Counters::default(),
        };
        let rr = f.rr;
        let id = self.tcp_alloc(ep);
        if let Some(f) = self.tcp.flows[flow as usize].as_mut() {
            f.open.push(id);
            if !rr {
                f.client = Some(id);
            }
        }
        self.tcp_after(id);
    }

    /// A TCP segment arrived at host `node` (already checked to be addressed to it).
    pub(super) fn tcp_receive(&mut self, node: usize, pkt: Packet, h: &Headers) {
        let (seg, src, dst) = match Segment::parse_with(&pkt.data, h) {
            Ok(x) => x,
            Err(_) => return self.drop_at_node(node, pkt, DropReason::Malformed),
        };
        let report = match self.lf_read(node, &pkt.data) {
            Ok(r) => r,
            Err(reason) => return self.drop_at_node(node, pkt, reason),
        };
        let key = (dst, seg.dst_port, src, seg.src_port);
        let id = match self.tcp.demux.get(&key) {
            Some(&id) => Some(id),
            None => self.tcp_accept(node, &seg, key),
        };
        let Some(id) = id else {
            return self.drop_at_node(node, pkt, DropReason::NoConnection);
        };
        self.deliver(pkt);
        let now = self.now;
        if let Some(e) = self.tcp.eps[id as usize].as_mut() {
            e.conn.handle_segment(now, &seg);
        }
        if let Some(o) = report {
            self.lf_apply(id, o);
        }
        self.tcp_after(id);
    }

    /// A SYN for a listening flow: the server side of a new connection.
    fn tcp_accept(&mut self, node: usize, seg: &Segment, key: Key) -> Option<u32> {
        if !seg.has(TcpFlags::SYN) || seg.has(TcpFlags::ACK) {
            return None;
        }
        let flow = *self.tcp.listen.get(&(key.0, key.1))?;
        let f = self.tcp.flows[flow as usize].as_mut()?;
        let iss = f.rng.gen::<u32>();
        let conn = Connection::accept(f.cfg.clone(), seg, iss)?;
        let ep = Endpoint {
            conn,
            flow,
            client: false,
            node,
            peer: f.src,
            key,
            acct: f.rev,
            timer_at: None,
            gen: 0,
            nic: 0,
            started: self.now,
            rx: 0,
            responded: false,
            done: false,
            seen: Counters::default(),
        };
        let id = self.tcp_alloc(ep);
        if let Some(f) = self.tcp.flows[flow as usize].as_mut() {
            f.open.push(id);
        }
        Some(id)
    }

    /// A timer event.
    pub(super) fn tcp_timer(&mut self, id: u32, gen: u32) {
        let now = self.now;
        let Some(e) = self.tcp.eps.get_mut(id as usize).and_then(Option::as_mut) else { return };
        if e.gen != gen {
            return; // superseded
        }
        e.timer_at = None;
        e.conn.handle_timeout(now);
        self.tcp_after(id);
    }

    /// A packet of a TCP flow left its source host's queue (sent or dropped there).
    pub(super) fn tcp_left_host(&mut self, pkt: &Packet) {
        // only data segments (virtual payload) count toward the host-queue limit
        if pkt.virtual_len == 0 {
            return;
        }
        let id = match self.tcp.acct_ep.get(pkt.meta.flow as usize).copied().flatten() {
            Some(id) => id,
            None => {
                let Ok((seg, src, dst)) = Segment::parse(&pkt.data) else { return };
                let Some(&id) = self.tcp.demux.get(&(src, seg.src_port, dst, seg.dst_port)) else {
                    return;
                };
                id
            }
        };
        if let Some(e) = self.tcp.eps[id as usize].as_mut() {
            e.nic = e.nic.saturating_sub(1);
            self.tcp.pending.push(id);
        }
    }

    /// Flush connections whose host queue drained.
    pub(super) fn tcp_flush_pending(&mut self) {
        while let Some(id) = self.tcp.pending.pop() {
            self.tcp_after(id);
        }
    }

    /// After any input to connection `id`: application events, transmissions, counters,
    /// timer.
    fn tcp_after(&mut self, id: u32) {
        let now = self.now;
        let mut closed = false;
        loop {
            let Some(e) = self.tcp.eps.get_mut(id as usize).and_then(Option::as_mut) else {
                return;
            };
            let Some(f) = self.tcp.flows[e.flow as usize].as_mut() else { return };
            let mut again = false;
            while let Some(ev) = e.conn.poll_event() {
                match ev {
                    ConnEvent::Connected => {
                        f.ecn.get_or_insert(e.conn.ecn());
                    }
                    ConnEvent::Data(n) => {
                        e.rx += n;
                        f.last_delivery = now;
                        if !f.rr {
                            if f.spec.bytes.is_some_and(|b| e.rx >= b.get()) && !e.done {
                                e.done = true;
                                f.completed += 1;
                                f.completion = Some(now);
                            }
                        } else if !e.client {
                            let req = f.spec.request.map_or(1, |b| b.get());
                            if !e.responded && e.rx >= req {
                                e.responded = true;
                                e.conn.write(f.spec.response.map_or(1, |b| b.get()));
                                e.conn.close();
                                again = true;
                            }
                        } else {
                            let resp = f.spec.response.map_or(1, |b| b.get());
                            if !e.done && e.rx >= resp {
                                e.done = true;
                                f.completed += 1;
                                f.fct.record((now - e.started).as_nanos());
                                e.conn.close();
                                again = true;
                            }
                        }
                    }
                    ConnEvent::PeerFin => {
                        e.conn.close();
                        again = true;
                    }
                    ConnEvent::Closed => closed = true,
                    ConnEvent::Aborted => {
                        f.aborted += 1;
                        closed = true;
                    }
                }
            }
            // transmit
            let tsq = f.spec.tsq_packets();
            let (node, peer, key, acct, prio, dscp) =
                (e.node, e.peer, e.key, e.acct, f.priority, f.dscp);
            let mut out = std::mem::take(&mut self.tcp.scratch);
            loop {
                let allow = e.nic < tsq;
                let Some(seg) = e.conn.poll_transmit(now, allow) else { break };
                if seg.len > 0 {
                    e.nic += 1;
                }
                out.push(seg);
            }
            // the connection may have closed by sending its last ACK
            while let Some(ev) = e.conn.poll_event() {
                match ev {
                    ConnEvent::Closed => closed = true,
                    ConnEvent::Aborted => {
                        f.aborted += 1;
                        closed = true;
                    }
                    _ => again = true,
                }
            }
            // counters
            if e.client && !f.rr && f.slow_start.is_none() {
                f.slow_start = e.conn.slow_start_exit();
            }
            let (s, r) = (e.conn.sender_stats(), e.conn.receiver_stats());
            let cur = Counters {
                delivered: e.rx,
                segments: s.segments,
                retransmits: s.retransmits,
                rtos: s.rtos,
                recoveries: s.recoveries,
                loss_probes: s.loss_probes,
                ecn_reductions: s.ecn_reductions,
                ece_acks: s.ece_acks,
                ce_marks: r.ce_marks,
            };
            let d = |a: u64, b: u64| a.saturating_sub(b);
            let old = e.seen;
            f.tot.delivered += d(cur.delivered, old.delivered);
            f.tot.segments += d(cur.segments, old.segments);
            f.tot.retransmits += d(cur.retransmits, old.retransmits);
            f.tot.rtos += d(cur.rtos, old.rtos);
            f.tot.recoveries += d(cur.recoveries, old.recoveries);
            f.tot.loss_probes += d(cur.loss_probes, old.loss_probes);
            f.tot.ecn_reductions += d(cur.ecn_reductions, old.ecn_reductions);
            f.tot.ece_acks += d(cur.ece_acks, old.ece_acks);
            f.tot.ce_marks += d(cur.ce_marks, old.ce_marks);
            f.iv.delivered += d(cur.delivered, old.delivered);
            f.iv.retransmits += d(cur.retransmits, old.retransmits);
            f.iv.ce_marks += d(cur.ce_marks, old.ce_marks);
            f.iv.ece_acks += d(cur.ece_acks, old.ece_acks);
            e.seen = cur;
            if let Some(r) = e.conn.take_rtt_sample() {
                let ns = r.as_nanos();
                f.rtt.record(ns);
                f.iv.rtt_n += 1;
                f.iv.rtt_sum += u128::from(ns);
                f.iv.rtt_min = Some(f.iv.rtt_min.map_or(ns, |m| m.min(ns)));
                f.iv.rtt_max = Some(f.iv.rtt_max.map_or(ns, |m| m.max(ns)));
            }
            // timer
            let mut timer = None;
            if !closed {
                if let Some(t) = e.conn.poll_timeout(now) {
                    if e.timer_at.is_none_or(|x| t < x) {
                        self.tcp.gen = self.tcp.gen.wrapping_add(1);
                        e.gen = self.tcp.gen;
                        e.timer_at = Some(t);
                        timer = Some((t.max(now), e.gen));
                    }
                }
            }
            if let Some((t, gen)) = timer {
                let tie = self.tie(acct);
                self.events.schedule(t, tie, Event::TcpTimer { ep: id, gen });
            }
            for seg in out.drain(..) {
                self.tcp_emit(node, peer, key, acct, prio, dscp, &seg);
            }
            self.tcp.scratch = out;
            if closed {
                self.tcp_free(id);
                return;
            }
            if !again {
                return;
            }
        }
    }

    /// Put a segment on the wire from `node` toward `peer`.
    #[allow(clippy::too_many_arguments)]
    fn tcp_emit(
        &mut self,
        node: usize,
        peer: usize,
        key: Key,
        acct: u32,
        priority: u8,
        dscp: u8,
        seg: &Segment,
    ) {
        let (IpAddr::V4(src), IpAddr::V4(dst)) = (key.0, key.2) else { return };
        let mut data = Vec::with_capacity(96);
        let mac = crate::hdr::mac_of;
        if seg.emit(&mut data, mac(node), mac(peer), src, dst, dscp, 64).is_err() {
            // Invariant: segments from Connection always fit (options <= 40 bytes).
            return;
        }
        self.lf_on_emit(acct, seg, &mut data);
        let f = &mut self.flows[acct as usize];
        let meta = Meta {
            id: self.next_id,
            flow: acct,
            seq: f.sent,
            created: self.now,
            arrival: self.now,
            priority,
            ..Meta::default()
        };
        self.next_id += 1;
        f.sent += 1;
        let pkt = Packet::new(data, seg.len, meta);
        match self.topo.fib[node][peer] {
            crate::net::NO_PORT => self.drop_at_node(node, pkt, DropReason::NoRoute),
            p => self.enqueue(p as usize, pkt),
        }
    }

    /// Close an interval of the time series.
    pub(super) fn tcp_sample(&mut self) {
        let now = self.now;
        let iv_len = self.tcp.interval;
        for i in 0..self.tcp.flows.len() {
            let Some(f) = self.tcp.flows[i].as_ref() else { continue };
            let (mut cwnd, mut flight, mut srtt, mut pacing) = (0u64, 0u64, 0u64, 0u64);
            for &id in &f.open {
                let Some(e) = self.tcp.eps[id as usize].as_ref() else { continue };
                let s = e.conn.sender();
                if s.nxt() == 0 {
                    continue; // has sent no data
                }
                cwnd += s.cwnd();
                flight += s.in_flight();
                if srtt == 0 {
                    srtt = s.rtt().srtt().map_or(0, Duration::as_nanos);
                }
                pacing += s.pacing_rate().map_or(0, |r| r.bps());
            }
            let iv = f.iv;
            self.tcp.series.push(SeriesRow {
                flow: i as u32,
                t_ns: now.as_nanos(),
                delivered_bytes: iv.delivered,
                goodput_bps: iv.delivered as f64 * 8.0 / iv_len.as_secs_f64(),
                cwnd,
                in_flight: flight,
                srtt_ns: srtt,
                rtt_samples: Some(iv.rtt_n),
                rtt_min_ns: iv.rtt_min,
                rtt_mean_ns: (iv.rtt_n > 0).then(|| iv.rtt_sum as f64 / iv.rtt_n as f64),
                rtt_max_ns: iv.rtt_max,
                retransmits: iv.retransmits,
                ce_marks: iv.ce_marks,
                ece_acks: Some(iv.ece_acks),
                pacing_bps: pacing,
            });
            if let Some(f) = self.tcp.flows[i].as_mut() {
                f.iv = Interval::default();
            }
        }
        if let Some(next) = now.checked_add_duration(iv_len) {
            if next <= self.end {
                self.events.schedule(next, 0, Event::TcpSample);
            }
        }
    }
}
