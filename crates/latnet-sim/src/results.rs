//! Results of a run: a JSON summary, a per-flow table, and optional per-packet / per-hop
//! tables. Output is a pure function of the scenario and seed (no wall-clock time, no
//! hash-map order), so two runs with the same seed write byte-identical files.

use crate::net::PortTopo;
use crate::stats::Summary;
use latnet_dataplane::{AnyQueue, DropCounters, DropReason, Meta, Queue};
use latnet_units::{Duration, Time};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::io;
use std::path::Path;

/// Everything a run reports.
#[derive(Debug, Clone, Serialize)]
pub struct Results {
    /// Scenario name.
    pub scenario: String,
    /// Seed of the run.
    pub seed: u64,
    /// Sending duration (ns).
    pub duration_ns: u64,
    /// Virtual time at which the run ended (ns).
    pub end_ns: u64,
    /// What reported latencies include.
    pub latency_convention: String,
    /// When frames reach switches: `store-and-forward` or `cut-through`.
    pub switching: String,
    /// Ordering rule of simultaneous events.
    pub tie_break: String,
    /// The scenario's time dilation (`[sim] dilation`): the run went this many times slower,
    /// and every instant, duration and rate here is back in the scenario's own time
    /// ([`Results::undilate`]).
    pub dilation: u32,
    /// Events executed.
    pub events: u64,
    /// Per flow, in scenario order.
    pub flows: Vec<FlowResult>,
    /// Per egress port, in link order (a to b, then b to a).
    pub ports: Vec<PortResult>,
    /// Every node in scenario order, with its drops outside queues (malformed, no route, TTL,
    /// not for host).
    pub nodes: Vec<NodeResult>,
    /// Latency-Based Forwarding counters, per-flow outcomes and late notifications (only in
    /// runs with LBF switches or flows with an SLO).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub lbf: Option<crate::lbf::LbfResults>,
    /// How closely an emulated run kept to the scenario's clock (emulated runs only).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub emulation: Option<EmulationReport>,
    /// Per-packet and per-hop records, when `[output] packets = true`.
    #[serde(skip)]
    pub log: Option<PacketLog>,
    /// Queue occupancy of every egress port per interval, when `[output] queues` is set.
    #[serde(skip)]
    pub queue_series: Vec<QueueRow>,
    /// Whether the run sampled the queues (`queue_series` may still be empty: an interval
    /// longer than the run).
    #[serde(skip)]
    pub queues_sampled: bool,
    /// Per egress port, its file name (see [`capture_names`]: `<node>-<peer>.pcap`, with a
    /// suffix for parallel links) and packet capture, when `[output] pcap = true` (see
    /// [`crate::pcap`]).
    #[serde(skip)]
    pub pcaps: Vec<(String, Vec<u8>)>,
    /// Per-interval rows of every TCP flow (`timeseries.csv`).
    #[serde(skip)]
    pub timeseries: Vec<crate::tcp::report::SeriesRow>,
    /// Names of the accounting records after the flows (the server side of TCP flows,
    /// `<flow>:server`), as packet and hop records name them.
    #[serde(skip)]
    pub aux_flow_names: Vec<String>,
}

/// What the machine did to an emulated run's timing, as the switches and senders measured it
/// against their own schedules: a simulated run keeps every instant exactly, an emulated one
/// as closely as the machine lets it (a busy core, a late wake-up, a stall of the virtual
/// machine). Lateness is in the scenario's time (a dilated run's divided by its dilation);
/// the counts' thresholds are of the machine's clock.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct EmulationReport {
    /// The largest lateness below, of a switch's frame or a sender's packet (ns).
    pub late_max_ns: u64,
    /// Per switch, in node order.
    pub switches: Vec<EmulatedSwitch>,
    /// Per flow of latnet's senders, in flow order.
    pub senders: Vec<EmulatedSender>,
    /// Per flow of latnet's receivers, in flow order: how late the receiving process read what
    /// the kernel had stamped on arrival. Latencies run to the stamp, so this is what the
    /// emulation kept out of them (and not in `late_max_ns`).
    pub receivers: Vec<EmulatedReceiver>,
}

/// One switch's account of its timing (see [`EmulationReport`]).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct EmulatedSwitch {
    /// Node name.
    pub node: String,
    /// Packets forwarded.
    pub forwarded: u64,
    /// Frames sent more than 100 us (of the machine's clock) after their emulated instant.
    pub tx_late_100us: u64,
    /// Largest lateness of a sent frame behind its emulated instant (ns).
    pub tx_late_max_ns: u64,
    /// Frames read from a receive ring more than 10 us (machine's clock) after the kernel put
    /// them there.
    pub rx_read_late_10us: u64,
    /// Largest time from the kernel putting a frame into a ring to the switch reading it (ns).
    pub rx_read_late_max_ns: u64,
    /// Frames whose kernel timestamp, converted to the switch's clock, fell after the switch
    /// read them: the error of that conversion (the frame arrives when it was read).
    pub rx_stamp_ahead: u64,
    /// By how much such a timestamp was ahead of the read, at most (ns).
    pub rx_stamp_ahead_max_ns: u64,
    /// Frames from another switch served by the same process, which arrived at the instant
    /// that switch's emulation made them due rather than when the kernel delivered them.
    pub rx_in_loop: u64,
    /// Largest time by which the kernel delivered such a frame after its due instant: the
    /// sending switch's lateness, kept out of the emulated arrival (ns).
    pub rx_in_loop_absorbed_max_ns: u64,
    /// Frames the kernel dropped because a receive ring was full.
    pub ring_drops: u64,
    /// Frames the kernel refused to send.
    pub tx_refused: u64,
}

/// One sender's account of its timing (see [`EmulationReport`]).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct EmulatedSender {
    /// Flow name.
    pub flow: String,
    /// Packets sent.
    pub sent: u64,
    /// Packets sent more than 100 us (of the machine's clock) after their scheduled instant.
    pub late_100us: u64,
    /// Largest lateness of a packet behind its scheduled instant (ns; its latency counts from
    /// when it was sent, so this moves the pattern, not the measured latency).
    pub late_max_ns: u64,
}

/// One receiver's account of its timing (see [`EmulationReport`]).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct EmulatedReceiver {
    /// Flow name.
    pub flow: String,
    /// Packets received.
    pub received: u64,
    /// Packets received that the receiving host's kernel stamped on arrival (the latency of
    /// the rest runs to when the receiver read them).
    pub stamped: u64,
    /// Of those, packets read more than 100 us (of the machine's clock) after their stamp.
    pub read_late_100us: u64,
    /// Largest time from a stamp to the read (ns).
    pub read_late_max_ns: u64,
    /// Packets whose stamp, converted to the receiver's clock, fell after their read: the
    /// error of that conversion (their latency runs to the read).
    pub stamp_ahead: u64,
    /// By how much such a stamp was ahead of the read, at most (ns).
    pub stamp_ahead_max_ns: u64,
}

/// One interval of one egress port's queue (`queues.csv`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct QueueRow {
    /// End of the interval (ns).
    pub t_ns: u64,
    /// Port index, as in [`Results::ports`] (link `port / 2`).
    pub port: u32,
    /// Packets waiting at `t_ns` (the one in transmission not counted).
    pub packets: u64,
    /// Their bytes.
    pub bytes: u64,
    /// Most packets waiting at any instant of the interval.
    pub max_packets: u64,
    /// Most bytes waiting at any instant of the interval.
    pub max_bytes: u64,
}

/// One flow.
#[derive(Debug, Clone, Serialize)]
pub struct FlowResult {
    /// Name.
    pub name: String,
    /// Source host.
    pub src: String,
    /// Destination host.
    pub dst: String,
    /// Priority (0 highest).
    pub priority: u8,
    /// Frame length (bytes).
    pub size: u32,
    /// Packets created.
    pub sent: u64,
    /// Packets received.
    pub received: u64,
    /// Packets dropped (all reasons but end-of-run).
    pub dropped: u64,
    /// Packets still queued or on a link when the run ended.
    pub in_flight_at_end: u64,
    /// Drops by reason (including end-of-run).
    pub drops: BTreeMap<String, u64>,
    /// Received bits per second, from the flow's start to its last reception.
    pub throughput_bps: f64,
    /// End-to-end latency of received packets.
    pub latency_ns: Option<Summary>,
    /// Mean absolute delay variation between consecutive packets.
    pub jitter_ns: Option<f64>,
    /// Latency at the start of transmission from each hop (hop 0: the source's NIC).
    pub hops: Vec<HopResult>,
    /// TCP flows: goodput, retransmissions, ECN, RTT, completion times.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tcp: Option<crate::tcp::report::TcpFlowResult>,
}

impl FlowResult {
    /// Fraction of packets lost (end-of-run packets excluded from both sides).
    pub fn loss_rate(&self) -> f64 {
        let settled = self.sent.saturating_sub(self.in_flight_at_end);
        if settled == 0 {
            0.0
        } else {
            self.dropped as f64 / settled as f64
        }
    }
}

/// Latency of a flow at the start of transmission from one hop.
#[derive(Debug, Clone, Serialize)]
pub struct HopResult {
    /// Hop index (0: source host).
    pub hop: u32,
    /// The transmitting node.
    pub node: String,
    /// The node the port leads to.
    pub toward: String,
    /// Latency from creation to the start of transmission here.
    pub latency_ns: Option<Summary>,
}

/// One egress port.
#[derive(Debug, Clone, Serialize)]
pub struct PortResult {
    /// Owning node.
    pub node: String,
    /// Peer node.
    pub peer: String,
    /// Rate (bit/s).
    pub rate_bps: u64,
    /// Frames transmitted.
    pub tx_packets: u64,
    /// Bytes transmitted (frame lengths).
    pub tx_bytes: u64,
    /// Fraction of the run the transmitter was busy (a frame still being sent when the run
    /// ended counts up to the end only), 0..=1.
    pub utilisation: f64,
    /// Queue counters.
    pub queue: QueueResult,
    /// Per-class queue counters for schedulers with classes.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub classes: Vec<QueueResult>,
    /// Dual-queue AQMs (VDQ-CSAQM, DualPI2): per-epoch sojourn percentiles per physical queue,
    /// marks, drops and the control trace.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub aqm: Option<latnet_dataplane::queue::AqmReport>,
}

/// Queue counters.
#[derive(Debug, Clone, Serialize)]
pub struct QueueResult {
    /// Packets accepted.
    pub enqueued: u64,
    /// Packets handed to the transmitter.
    pub dequeued: u64,
    /// Largest backlog (packets).
    pub peak_packets: u64,
    /// Largest backlog (bytes).
    pub peak_bytes: u64,
    /// CE marks.
    pub ce_marks: u64,
    /// Drops by reason (queue drops and link loss).
    pub drops: BTreeMap<String, u64>,
}

impl QueueResult {
    fn from_stats(s: &latnet_dataplane::QueueStats, extra: Option<&DropCounters>) -> Self {
        let mut drops = s.drops.clone();
        if let Some(e) = extra {
            drops.merge(e);
        }
        QueueResult {
            enqueued: s.enqueued_packets,
            dequeued: s.dequeued_packets,
            peak_packets: s.peak_packets,
            peak_bytes: s.peak_bytes,
            ce_marks: s.ce_marks,
            drops: drops.nonzero().map(|(r, n)| (r.as_str().to_owned(), n)).collect(),
        }
    }
}

impl PortResult {
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn new(
        node: &str,
        peer: &str,
        t: &PortTopo,
        tx_packets: u64,
        tx_bytes: u64,
        busy: Duration,
        end: Time,
        q: &AnyQueue,
        link_drops: &DropCounters,
    ) -> Self {
        PortResult {
            node: node.to_owned(),
            peer: peer.to_owned(),
            rate_bps: t.rate.bps(),
            tx_packets,
            tx_bytes,
            utilisation: if end == Time::ZERO {
                0.0
            } else {
                busy.as_nanos() as f64 / end.as_nanos() as f64
            },
            queue: QueueResult::from_stats(q.stats(), Some(link_drops)),
            classes: q
                .class_stats()
                .into_iter()
                .map(|s| QueueResult::from_stats(s, None))
                .collect(),
            aqm: q.aqm_report(),
        }
    }
}

/// Drops at one node outside its queues.
#[derive(Debug, Clone, Serialize)]
pub struct NodeResult {
    /// Node name.
    pub name: String,
    /// Drops by reason.
    pub drops: BTreeMap<String, u64>,
    /// Switches counting large flows (switch-assisted pacing): what the counter did.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub large_flows: Option<latnet_dataplane::flow_counter::CounterStats>,
}

/// Per-packet and per-hop records.
#[derive(Debug, Clone, Default)]
pub struct PacketLog {
    /// One record per packet, by id.
    pub packets: Vec<PacketRecord>,
    /// One record per transmission (in time order).
    pub hops: Vec<HopRecord>,
}

/// What happened to one packet.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct PacketRecord {
    /// Packet id.
    pub id: u64,
    /// Flow index.
    pub flow: u32,
    /// Sequence number within the flow.
    pub seq: u64,
    /// Creation time (ns).
    pub created_ns: u64,
    /// When it was received or dropped (ns).
    pub end_ns: u64,
    /// Latency if received (ns, per the run's convention).
    pub latency_ns: Option<u64>,
    /// Drop reason if dropped.
    pub drop: Option<DropReason>,
    /// Node where it was dropped.
    pub drop_node: Option<u32>,
}

impl PacketRecord {
    pub(crate) fn received(m: &Meta, now: Time, latency: u64) -> Self {
        PacketRecord {
            id: m.id,
            flow: m.flow,
            seq: m.seq,
            created_ns: m.created.as_nanos(),
            end_ns: now.as_nanos(),
            latency_ns: Some(latency),
            drop: None,
            drop_node: None,
        }
    }
    pub(crate) fn dropped(m: &Meta, now: Time, reason: DropReason, node: u32) -> Self {
        PacketRecord {
            id: m.id,
            flow: m.flow,
            seq: m.seq,
            created_ns: m.created.as_nanos(),
            end_ns: now.as_nanos(),
            latency_ns: None,
            drop: Some(reason),
            drop_node: Some(node),
        }
    }
}

/// The header of `packets.csv` (simulated and emulated runs).
pub const PACKETS_CSV_HEADER: &str =
    "id,flow,seq,created_ns,end_ns,latency_ns,drop_reason,drop_node\n";

/// The header of `hops.csv` (simulated and emulated runs).
pub const HOPS_CSV_HEADER: &str =
    "id,flow,seq,hop,node,port,priority,enqueue_ns,eligible_ns,start_tx_ns\n";

/// One transmission of one packet.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HopRecord {
    /// Packet id.
    pub id: u64,
    /// Flow index.
    pub flow: u32,
    /// Sequence number within the flow (as in [`PacketRecord`]).
    pub seq: u64,
    /// Hop index (0: source host).
    pub hop: u8,
    /// Transmitting node.
    pub node: u32,
    /// Egress port (global index).
    pub port: u32,
    /// The packet's priority at this hop (its classifier's, or its tag's queue): the class it
    /// was queued in on a `priority` port (the last class for any priority beyond it).
    pub priority: u8,
    /// When it joined the queue (ns).
    pub enqueue_ns: u64,
    /// When the forwarder's LBF or damper hold ended (ns; `enqueue_ns` without one). Only
    /// `lbf` queues honour the hold: behind another queue kind the packet may leave earlier.
    pub eligible_ns: u64,
    /// When its transmission started (ns).
    pub start_tx_ns: u64,
}

fn opt<T: std::fmt::Display>(v: Option<T>) -> String {
    v.map_or_else(String::new, |v| v.to_string())
}

/// Nanoseconds `v` of a run `k` times dilated in the scenario's own time: `v / k`, to the
/// nearest (half up).
pub fn undilate_ns(v: u64, k: u32) -> u64 {
    let k = u64::from(k.max(1));
    v / k + u64::from(2 * (v % k) >= k)
}

impl Results {
    /// Bring the results of a run `k` times dilated back to the scenario's own time: every
    /// instant, duration, latency and jitter divided by `k` (to the nearest nanosecond), every
    /// rate and throughput multiplied by it; counts, sizes and utilisations stay. Captures are
    /// not converted (a dilated scenario has none).
    pub fn undilate(&mut self, k: u32) {
        if k <= 1 {
            return;
        }
        let k64 = u64::from(k);
        let ns = |v: u64| undilate_ns(v, k);
        let summary = |s: &mut Summary| {
            for v in [&mut s.min, &mut s.p50, &mut s.p90, &mut s.p99, &mut s.p999, &mut s.max] {
                *v = ns(*v);
            }
            s.mean /= f64::from(k);
        };
        self.dilation = k;
        self.duration_ns = ns(self.duration_ns);
        self.end_ns = ns(self.end_ns);
        for f in &mut self.flows {
            f.throughput_bps *= f64::from(k);
            f.latency_ns.as_mut().map(summary);
            f.jitter_ns = f.jitter_ns.map(|j| j / f64::from(k));
            for h in &mut f.hops {
                h.latency_ns.as_mut().map(summary);
            }
        }
        for p in &mut self.ports {
            p.rate_bps = p.rate_bps.saturating_mul(k64);
        }
        if let Some(l) = &mut self.lbf {
            for f in &mut l.flows {
                f.lower_ns = ns(f.lower_ns);
                f.upper_ns = f.upper_ns.map(ns);
            }
            for n in &mut l.notifications {
                n.time_ns = ns(n.time_ns);
                n.projected_ns = ns(n.projected_ns);
                n.upper_ns = ns(n.upper_ns);
            }
        }
        if let Some(e) = &mut self.emulation {
            e.late_max_ns = ns(e.late_max_ns);
            for w in &mut e.switches {
                w.tx_late_max_ns = ns(w.tx_late_max_ns);
                w.rx_read_late_max_ns = ns(w.rx_read_late_max_ns);
                w.rx_stamp_ahead_max_ns = ns(w.rx_stamp_ahead_max_ns);
                w.rx_in_loop_absorbed_max_ns = ns(w.rx_in_loop_absorbed_max_ns);
            }
            for w in &mut e.senders {
                w.late_max_ns = ns(w.late_max_ns);
            }
            for w in &mut e.receivers {
                w.read_late_max_ns = ns(w.read_late_max_ns);
                w.stamp_ahead_max_ns = ns(w.stamp_ahead_max_ns);
            }
        }
        if let Some(log) = &mut self.log {
            for r in &mut log.packets {
                r.created_ns = ns(r.created_ns);
                r.end_ns = ns(r.end_ns);
                r.latency_ns = r.latency_ns.map(ns);
            }
            for r in &mut log.hops {
                r.enqueue_ns = ns(r.enqueue_ns);
                r.eligible_ns = ns(r.eligible_ns);
                r.start_tx_ns = ns(r.start_tx_ns);
            }
        }
        for r in &mut self.queue_series {
            r.t_ns = ns(r.t_ns);
        }
    }

    /// The JSON summary (pretty, stable field order).
    pub fn to_json(&self) -> String {
        // Serializing plain data with string keys cannot fail.
        serde_json::to_string_pretty(self).unwrap_or_else(|e| format!("{{\"error\": \"{e}\"}}"))
    }

    /// The per-flow table as CSV.
    pub fn flows_csv(&self) -> String {
        let mut s = String::from(
            "flow,src,dst,priority,size,sent,received,dropped,in_flight_at_end,loss_rate,throughput_bps,\
             latency_min_ns,latency_mean_ns,latency_p50_ns,latency_p90_ns,latency_p99_ns,latency_p999_ns,latency_max_ns,jitter_ns\n",
        );
        for f in &self.flows {
            let l = f.latency_ns;
            let _ = writeln!(
                s,
                "{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{}",
                f.name,
                f.src,
                f.dst,
                f.priority,
                f.size,
                f.sent,
                f.received,
                f.dropped,
                f.in_flight_at_end,
                f.loss_rate(),
                f.throughput_bps,
                opt(l.map(|l| l.min)),
                opt(l.map(|l| l.mean)),
                opt(l.map(|l| l.p50)),
                opt(l.map(|l| l.p90)),
                opt(l.map(|l| l.p99)),
                opt(l.map(|l| l.p999)),
                opt(l.map(|l| l.max)),
                opt(f.jitter_ns),
            );
        }
        s
    }

    /// The per-packet table as CSV, if recorded.
    pub fn packets_csv(&self) -> Option<String> {
        let log = self.log.as_ref()?;
        let mut s = String::from(PACKETS_CSV_HEADER);
        for r in &log.packets {
            let _ = writeln!(
                s,
                "{},{},{},{},{},{},{},{}",
                r.id,
                self.flow_name(r.flow),
                r.seq,
                r.created_ns,
                r.end_ns,
                opt(r.latency_ns),
                r.drop.map_or("", DropReason::as_str),
                r.drop_node
                    .and_then(|n| self.nodes.get(n as usize))
                    .map_or("", |n| n.name.as_str()),
            );
        }
        Some(s)
    }

    /// The per-hop table as CSV, if recorded.
    pub fn hops_csv(&self) -> Option<String> {
        let log = self.log.as_ref()?;
        let mut s = String::from(HOPS_CSV_HEADER);
        for r in &log.hops {
            let _ = writeln!(
                s,
                "{},{},{},{},{},{},{},{},{},{}",
                r.id,
                self.flow_name(r.flow),
                r.seq,
                r.hop,
                self.nodes.get(r.node as usize).map_or("", |n| n.name.as_str()),
                r.port,
                r.priority,
                r.enqueue_ns,
                r.eligible_ns,
                r.start_tx_ns,
            );
        }
        Some(s)
    }

    /// The name of accounting record `i` in packet and hop records: a flow's name, or
    /// `<flow>:server` for the server side of a TCP flow.
    pub fn flow_name(&self, i: u32) -> &str {
        let i = i as usize;
        match self.flows.get(i) {
            Some(f) => f.name.as_str(),
            None => self.aux_flow_names.get(i - self.flows.len()).map_or("", String::as_str),
        }
    }

    /// The TCP time series as CSV, if the run had TCP flows.
    pub fn timeseries_csv(&self) -> Option<String> {
        if self.timeseries.is_empty() {
            return None;
        }
        let names: Vec<String> = self.flows.iter().map(|f| f.name.clone()).collect();
        Some(crate::tcp::report::series_csv(&self.timeseries, &names))
    }

    /// The queue occupancy series as CSV (`queues.csv`), if the run sampled one (the header
    /// alone if no interval ended within the run): per sample
    /// and egress port, its `node`, `peer` and `link` (the link's index in the scenario, which
    /// tells parallel links between the same two nodes apart).
    pub fn queues_csv(&self) -> Option<String> {
        if self.queue_series.is_empty() && !self.queues_sampled {
            return None;
        }
        let mut out = String::from("t_ns,node,peer,link,packets,bytes,max_packets,max_bytes\n");
        for q in &self.queue_series {
            let p = &self.ports[q.port as usize];
            // link i owns ports 2i and 2i + 1 (crate::net::Topology)
            let link = q.port / 2;
            let _ = writeln!(
                out,
                "{},{},{},{},{},{},{},{}",
                q.t_ns, p.node, p.peer, link, q.packets, q.bytes, q.max_packets, q.max_bytes
            );
        }
        Some(out)
    }

    /// Write `results.json`, `flows.csv` and, if recorded, `packets.csv`, `hops.csv`,
    /// `timeseries.csv`, `queues.csv` and the captures `pcap/<name>` ([`capture_names`]) into
    /// `dir` (created if missing). Returns the paths written. An error names the file or
    /// directory it could not write (`cannot write <path>: <reason>`), keeping the kind.
    pub fn write_dir(&self, dir: &Path) -> io::Result<Vec<std::path::PathBuf>> {
        mkdir(dir)?;
        let mut written = Vec::new();
        let mut put = |name: &str, body: String| -> io::Result<()> {
            let p = dir.join(name);
            std::fs::write(&p, body).map_err(|e| naming(e, "write", &p))?;
            written.push(p);
            Ok(())
        };
        put("results.json", self.to_json() + "\n")?;
        put("flows.csv", self.flows_csv())?;
        if let Some(p) = self.packets_csv() {
            put("packets.csv", p)?;
        }
        if let Some(h) = self.hops_csv() {
            put("hops.csv", h)?;
        }
        if let Some(t) = self.timeseries_csv() {
            put("timeseries.csv", t)?;
        }
        if let Some(q) = self.queues_csv() {
            put("queues.csv", q)?;
        }
        if !self.pcaps.is_empty() {
            let sub = dir.join("pcap");
            mkdir(&sub)?;
            for (name, capture) in &self.pcaps {
                let p = sub.join(name);
                std::fs::write(&p, capture).map_err(|e| naming(e, "write", &p))?;
                written.push(p);
            }
        }
        Ok(written)
    }
}

fn mkdir(dir: &Path) -> io::Result<()> {
    std::fs::create_dir_all(dir).map_err(|e| naming(e, "create directory", dir))
}

/// `e` with the path it concerns in its message (`std::fs` leaves it out).
fn naming(e: io::Error, what: &str, path: &Path) -> io::Error {
    io::Error::new(e.kind(), format!("cannot {what} {}: {e}", path.display()))
}

/// The capture file name of each egress port, given its node's and peer's names in port
/// order: `<node>-<peer>.pcap`, and for the second and later ports from one node to the same
/// peer (parallel links, in link order) `<node>-<peer>.<k>.pcap` with `k` from 1. Names are
/// distinct whatever the node names: a plain name another port already has (`a-b` toward `c`
/// and `a` toward `b-c`) goes to the later port with the next free suffix, as does a suffixed
/// name already taken. The simulator and the emulated switches name captures this way.
pub fn capture_names<'a>(ports: impl IntoIterator<Item = (&'a str, &'a str)>) -> Vec<String> {
    let ports: Vec<(&str, &str)> = ports.into_iter().collect();
    let mut taken = std::collections::BTreeSet::new();
    let mut first = std::collections::BTreeSet::new();
    // the first port of each (node, peer) keeps its plain name where no earlier one has it
    let mut names: Vec<Option<String>> = ports
        .iter()
        .map(|&(node, peer)| {
            let plain = format!("{node}-{peer}.pcap");
            (first.insert((node, peer)) && taken.insert(plain.clone())).then_some(plain)
        })
        .collect();
    for (name, (node, peer)) in names.iter_mut().zip(&ports) {
        if name.is_none() {
            let free = (1u64..)
                .map(|k| format!("{node}-{peer}.{k}.pcap"))
                .find(|n| !taken.contains(n))
                .unwrap_or_default(); // unreachable: finitely many names are taken
            taken.insert(free.clone());
            *name = Some(free);
        }
    }
    names.into_iter().flatten().collect()
}
