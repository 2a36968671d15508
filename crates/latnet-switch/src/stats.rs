//! The switch's statistics file: per-interface, per-port, per-queue (and per-class), per-flow
//! and node counters, written as JSON while the switch runs and when it stops.

use crate::core::{Role, SwitchCore};
use latnet_dataplane::{DropCounters, Queue, QueueStats};
use latnet_sim::stats::Summary;
use latnet_sim::Scenario;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::io;
use std::path::Path;

/// Drops by kebab-case reason.
pub type Drops = BTreeMap<String, u64>;

fn drops(d: &DropCounters) -> Drops {
    d.nonzero().map(|(r, n)| (r.as_str().to_owned(), n)).collect()
}

/// Everything one switch counted.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct SwitchStats {
    /// Node name.
    pub node: String,
    /// Time since the switch started (ns).
    pub uptime_ns: u64,
    /// True in the file written when the switch stopped.
    #[serde(rename = "final")]
    pub final_: bool,
    /// Packets forwarded (enqueued at an egress port).
    pub forwarded: u64,
    /// Frames whose partial checksum was completed in software.
    pub csum_completed: u64,
    /// GSO super-packets received (dropped as malformed).
    pub rx_gso: u64,
    /// Frames the receive ring truncated (dropped as malformed).
    pub rx_truncated: u64,
    /// Frames that were not IP (dropped as malformed).
    pub rx_non_ip: u64,
    /// Frames the kernel dropped because a receive ring was full.
    pub ring_drops: u64,
    /// Frames the kernel refused to send.
    pub tx_refused: u64,
    /// Frames sent later than their emulated instant by more than 100 us.
    pub late_100us: u64,
    /// Largest lateness of a sent frame (ns).
    pub late_max_ns: u64,
    /// Frames read from a ring more than 10 us after the kernel put them there (they are
    /// stamped with the kernel's instant, as far as the core's clock allows).
    #[serde(default)]
    pub rx_read_late_10us: u64,
    /// Largest time between the kernel putting a frame into a ring and the switch reading it.
    #[serde(default)]
    pub rx_read_late_max_ns: u64,
    /// Frames whose kernel stamp, converted to the switch's clock, fell after the switch read
    /// the frame: the conversion's error (`KernelClock`; such a frame arrives when it was read).
    #[serde(default)]
    pub rx_stamp_ahead: u64,
    /// By how much such a stamp was ahead of the read, at most (ns).
    #[serde(default)]
    pub rx_stamp_ahead_max_ns: u64,
    /// Frames from another switch served by the same loop (`run --node A,B`), stamped with
    /// the instant that switch's emulation made them due here rather than when the kernel put
    /// them into the ring (so that its late wake-ups do not add up along a path).
    #[serde(default)]
    pub rx_in_loop: u64,
    /// Largest time by which the kernel's stamp of such a frame trailed its due instant: the
    /// sending switch's lateness, kept out of the emulated arrival (ns).
    #[serde(default)]
    pub rx_in_loop_absorbed_max_ns: u64,
    /// Times the loop slept in `ppoll`.
    #[serde(default)]
    pub sleeps: u64,
    /// Short waits spent polling the clock and the rings instead of sleeping.
    #[serde(default)]
    pub spins: u64,
    /// Switches served by this process's loop (`run --node A,B`): `sleeps` and `spins` are
    /// that loop's, the same in each of their statistics. 1 for a switch with a process alone.
    #[serde(default = "one")]
    pub loop_switches: u32,
    /// `sendmmsg` calls.
    #[serde(default)]
    pub tx_calls: u64,
    /// Drops at the node (malformed, no route, TTL expired).
    pub node_drops: Drops,
    /// Large-flow counter of a switch with `large_flows` (switch-assisted pacing).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub large_flows: Option<latnet_dataplane::flow_counter::CounterStats>,
    /// Latency-Based Forwarding, in a scenario that uses it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lbf: Option<LbfStats>,
    /// Interfaces.
    pub ifaces: Vec<IfaceStats>,
    /// Emulated ports.
    pub ports: Vec<PortStats>,
    /// Scenario flows seen by this switch.
    pub flows: Vec<FlowStats>,
    /// The queue series (`latnet-switch run --queues`), in the final write only.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub queue_series: Vec<latnet_sim::results::QueueRow>,
}

/// What Latency-Based Forwarding did at one switch.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct LbfStats {
    /// The LBF forwarder's counters (`None` at a switch that does not run it).
    pub counters: Option<latnet_sim::lbf::LbfCounters>,
    /// The forwarder's late notification records (the first
    /// [`latnet_sim::lbf::MAX_NOTIFICATIONS`], timed from the experiment's time zero when the
    /// switch was given one, `run --t0`, else from its start), in the final write only.
    #[serde(default)]
    pub notifications: Vec<latnet_sim::lbf::Notification>,
    /// All late notifications.
    pub notifications_total: u64,
    /// Per flow, damper-mode packets that waited longer than their sender's damper bound in the
    /// sender's own queue (emulated at this switch's port from the host).
    #[serde(default)]
    pub sender_damper_violations: BTreeMap<String, u64>,
}

/// One interface.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct IfaceStats {
    /// Name.
    pub name: String,
    /// Link index.
    pub link: usize,
    /// Frames received.
    pub rx_frames: u64,
    /// Bytes received.
    pub rx_bytes: u64,
    /// Frames sent.
    pub tx_frames: u64,
    /// Bytes sent.
    pub tx_bytes: u64,
}

/// One emulated port.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct PortStats {
    /// Global port index (the scenario's port order: link `i` owns `2i` and `2i + 1`).
    pub port: usize,
    /// `egress` (the switch's) or `from-host` (a host's port emulated at ingress).
    pub role: String,
    /// Interface.
    pub iface: String,
    /// Transmitting node.
    pub node: String,
    /// Receiving node.
    pub peer: String,
    /// Emulated rate (bit/s).
    pub rate_bps: u64,
    /// Emulated propagation delay (ns).
    pub delay_ns: u64,
    /// Frames that started transmission.
    pub tx_packets: u64,
    /// Their bytes.
    pub tx_bytes: u64,
    /// Emulated busy time of the transmitter within the run (ns): from the experiment's time
    /// zero (else the switch's start) for the scenario's duration and drain, as the simulator
    /// counts utilisation (see [`crate::core`]).
    pub busy_ns: u64,
    /// Queue counters.
    pub queue: QueueCounters,
    /// Per-class counters of schedulers with classes.
    pub classes: Vec<QueueCounters>,
    /// Drops on the link (random loss).
    pub link_drops: Drops,
    /// A dual-queue AQM's per-epoch report and control trace (epochs and times counted from the
    /// experiment's time zero when the switch was given one; the trace only in the final write).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub aqm: Option<latnet_dataplane::queue::AqmReport>,
}

/// Counters of one queue.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct QueueCounters {
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
    /// Packets held now.
    pub len: u64,
    /// Drops by reason.
    pub drops: Drops,
}

impl QueueCounters {
    fn new(s: &QueueStats, len: usize) -> Self {
        QueueCounters {
            enqueued: s.enqueued_packets,
            dequeued: s.dequeued_packets,
            peak_packets: s.peak_packets,
            peak_bytes: s.peak_bytes,
            ce_marks: s.ce_marks,
            len: len as u64,
            drops: drops(&s.drops),
        }
    }
}

/// One scenario flow at this switch.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct FlowStats {
    /// Flow name.
    pub flow: String,
    /// Packets forwarded.
    pub forwarded: u64,
    /// Drops by reason.
    pub drops: Drops,
    /// Latency at the start of transmission from each emulated port of this switch the flow
    /// left by: from the sender's stamp (`CLOCK_MONOTONIC`) to the emulated start, so physical
    /// and including the sender's stack. Only flows of latnet's senders (not TCP).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub hops: Vec<PortLatency>,
}

/// A flow's latency at the start of transmission from one emulated port.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct PortLatency {
    /// Global port index (as in the results' `ports`).
    pub port: usize,
    /// Latency (ns).
    pub latency_ns: Summary,
}

/// What the runner counts besides the core.
#[derive(Debug, Clone, Copy, Default)]
pub struct RunnerCounters {
    /// Uptime (ns).
    pub uptime_ns: u64,
    /// Ring drops over all interfaces.
    pub ring_drops: u64,
    /// Frames refused by the kernel.
    pub tx_refused: u64,
    /// Frames sent more than 100 us late.
    pub late_100us: u64,
    /// Largest lateness (ns).
    pub late_max_ns: u64,
    /// Frames read more than 10 us after their ring timestamp.
    pub rx_read_late_10us: u64,
    /// Largest time from ring timestamp to reading (ns).
    pub rx_read_late_max_ns: u64,
    /// Frames whose converted ring timestamp fell after the read.
    pub rx_stamp_ahead: u64,
    /// By how much, at most (ns).
    pub rx_stamp_ahead_max_ns: u64,
    /// Frames from another switch of the loop, stamped with the instant it made them due.
    pub rx_in_loop: u64,
    /// Largest time by which such a frame's ring timestamp trailed that instant (ns).
    pub rx_in_loop_absorbed_max_ns: u64,
    /// Sleeps in `ppoll`.
    pub sleeps: u64,
    /// Short waits spent polling instead of sleeping.
    pub spins: u64,
    /// Switches sharing the loop that counts `sleeps` and `spins`.
    pub loop_switches: u32,
    /// `sendmmsg` calls.
    pub tx_calls: u64,
}

fn one() -> u32 {
    1
}

impl SwitchStats {
    /// Snapshot of a switch.
    pub fn collect(sc: &Scenario, core: &SwitchCore, r: RunnerCounters, final_: bool) -> Self {
        let topo = core.topology();
        let name = |i: usize| sc.nodes[i].name.clone();
        let ports = core
            .ports
            .iter()
            .enumerate()
            .map(|(i, p)| {
                let t = &topo.ports[p.global];
                let (role, iface) = match p.role {
                    Role::Egress { iface } => ("egress", iface),
                    Role::FromHost { iface } => ("from-host", iface),
                };
                let classes = p
                    .queue
                    .class_stats()
                    .into_iter()
                    .map(|s| QueueCounters::new(s, 0))
                    .collect::<Vec<_>>();
                PortStats {
                    port: p.global,
                    role: role.to_owned(),
                    iface: core.ifaces.get(iface).map(|i| i.name.clone()).unwrap_or_default(),
                    node: name(t.node),
                    peer: name(t.peer),
                    rate_bps: t.rate.bps(),
                    delay_ns: t.delay.as_nanos(),
                    tx_packets: p.tx_packets,
                    tx_bytes: p.tx_bytes,
                    busy_ns: p.busy_time.as_nanos(),
                    queue: QueueCounters::new(p.queue.stats(), p.queue.len()),
                    classes,
                    link_drops: drops(&p.link_drops),
                    // the control trace (up to a million points) only in the final write
                    aqm: core.aqm_report(i, final_),
                }
            })
            .collect();
        let c = &core.counters;
        SwitchStats {
            node: name(core.node()),
            uptime_ns: r.uptime_ns,
            final_,
            forwarded: c.forwarded,
            csum_completed: c.csum_completed,
            rx_gso: c.rx_gso,
            rx_truncated: c.rx_truncated,
            rx_non_ip: c.rx_non_ip,
            ring_drops: r.ring_drops,
            tx_refused: r.tx_refused,
            late_100us: r.late_100us,
            late_max_ns: r.late_max_ns,
            rx_read_late_10us: r.rx_read_late_10us,
            rx_read_late_max_ns: r.rx_read_late_max_ns,
            rx_stamp_ahead: r.rx_stamp_ahead,
            rx_stamp_ahead_max_ns: r.rx_stamp_ahead_max_ns,
            rx_in_loop: r.rx_in_loop,
            rx_in_loop_absorbed_max_ns: r.rx_in_loop_absorbed_max_ns,
            sleeps: r.sleeps,
            spins: r.spins,
            loop_switches: r.loop_switches.max(1),
            tx_calls: r.tx_calls,
            node_drops: drops(&c.node_drops),
            large_flows: core.large_flow_stats(),
            lbf: core.lbf_stats(final_),
            ifaces: core
                .ifaces
                .iter()
                .map(|i| IfaceStats {
                    name: i.name.clone(),
                    link: i.link,
                    rx_frames: i.rx_frames,
                    rx_bytes: i.rx_bytes,
                    tx_frames: i.tx_frames,
                    tx_bytes: i.tx_bytes,
                })
                .collect(),
            ports,
            flows: sc
                .flows
                .iter()
                .enumerate()
                .map(|(i, f)| FlowStats {
                    flow: f.name.clone(),
                    forwarded: core.flow_forwarded[i],
                    drops: drops(&core.flow_drops[i]),
                    hops: core
                        .ports
                        .iter()
                        .zip(&core.hop_latency)
                        .filter_map(|(p, row)| {
                            let l = row.get(i)?.as_ref()?.summary()?;
                            Some(PortLatency { port: p.global, latency_ns: l })
                        })
                        .collect(),
                })
                .collect(),
            queue_series: Vec::new(),
        }
    }

    /// The statistics as the file holds them (JSON).
    pub fn json(&self) -> io::Result<String> {
        serde_json::to_string_pretty(self).map(|s| s + "\n").map_err(io::Error::other)
    }

    /// Write as JSON to `path` atomically (a temporary file renamed over it).
    pub fn write(&self, path: &Path) -> io::Result<()> {
        crate::replace::replace_file(path, &self.json()?, "statistics file")
    }
}
