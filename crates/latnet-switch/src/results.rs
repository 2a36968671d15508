//! Results of an emulated run in the simulator's format ([`latnet_sim::Results`]): the same
//! `results.json` and `flows.csv`, built from the senders' reports, the receivers' packet logs
//! and the switches' statistics files of one run directory.
//!
//! Differences from a simulated run, all stated in the output: latency is measured physically
//! (application send to application receive, both hosts' stacks included) whatever the
//! scenario's convention; `hops` are not measured; `in_flight_at_end` holds packets that were
//! sent but neither received nor dropped by a switch (lost in a host, or still in flight when
//! the receiver stopped); `events` counts packets the switches forwarded. Dual-queue AQM reports
//! are the switches' own, with epochs counted from the run's time zero when the switches were
//! given it (`latnet-switch run --t0`, as `latnet run --mode emu` does); so is the queue
//! series (`queues.csv`) of switches run with `--queues`.

use crate::stats::SwitchStats;
use crate::traffic::{RecvReport, SendReport};
use latnet_sim::results::{FlowResult, NodeResult, PortResult, QueueResult, Results};
use latnet_sim::stats::{Jitter, LatencyStats};
use latnet_sim::Scenario;
use std::collections::BTreeMap;
use std::io;
use std::path::Path;

fn read_json<T: serde::de::DeserializeOwned>(path: &Path) -> io::Result<Option<T>> {
    match std::fs::read_to_string(path) {
        Ok(s) => serde_json::from_str(&s)
            .map(Some)
            .map_err(|e| io::Error::other(format!("{}: {e}", path.display()))),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(e),
    }
}

fn merge(into: &mut BTreeMap<String, u64>, from: &BTreeMap<String, u64>) {
    for (k, v) in from {
        *into.entry(k.clone()).or_default() += v;
    }
}

/// Build the results of the emulated run in `dir`: `send-<flow>.json`, `recv-<host>.json`,
/// `packets-<flow>.csv` and `switch-<node>.json`. `t0_ns` is the run's time zero
/// (`CLOCK_MONOTONIC`), `end_ns` its length.
pub fn collect(sc: &Scenario, dir: &Path, end_ns: u64) -> io::Result<Results> {
    let mut switches = Vec::new();
    for n in &sc.nodes {
        if let Some(s) = read_json::<SwitchStats>(&dir.join(format!("switch-{}.json", n.name)))? {
            switches.push(s);
        }
    }
    let mut recv = BTreeMap::new();
    for n in &sc.nodes {
        if let Some(r) = read_json::<RecvReport>(&dir.join(format!("recv-{}.json", n.name)))? {
            for f in r.flows {
                recv.insert(f.flow.clone(), f);
            }
        }
    }
    let mut flows = Vec::with_capacity(sc.flows.len());
    for f in &sc.flows {
        let sent = read_json::<SendReport>(&dir.join(format!("send-{}.json", f.name)))?
            .map_or(0, |s| s.sent);
        let mut drops = BTreeMap::new();
        for s in &switches {
            if let Some(fs) = s.flows.iter().find(|x| x.flow == f.name) {
                merge(&mut drops, &fs.drops);
            }
        }
        let dropped: u64 = drops.values().sum();
        let r = recv.get(&f.name).cloned().unwrap_or_default();
        let mut lat = LatencyStats::new();
        let mut jitter = Jitter::default();
        let mut last_rx = 0u64;
        let mut first_send = u64::MAX;
        let log = dir.join(format!("packets-{}.csv", f.name));
        if let Ok(text) = std::fs::read_to_string(&log) {
            for line in text.lines().skip(1) {
                let mut it = line.split(',').map(|x| x.parse::<u64>().unwrap_or(0));
                let (_seq, s, rcv) = (it.next(), it.next().unwrap_or(0), it.next().unwrap_or(0));
                let l = rcv.saturating_sub(s);
                lat.record(l);
                jitter.record(l);
                last_rx = last_rx.max(rcv);
                first_send = first_send.min(s);
            }
        }
        let in_flight = sent.saturating_sub(r.received).saturating_sub(dropped);
        if in_flight > 0 {
            drops.insert("end-of-run".to_owned(), in_flight);
        }
        let active_ns = last_rx.saturating_sub(first_send);
        flows.push(FlowResult {
            name: f.name.clone(),
            src: sc.nodes[f.src].name.clone(),
            dst: sc.nodes[f.dst].name.clone(),
            priority: f.priority,
            size: f.size,
            sent,
            received: r.received,
            dropped,
            in_flight_at_end: in_flight,
            drops,
            // Emulated TCP runs in the hosts' kernels; its numbers come from iperf3, not here.
            tcp: None,
            throughput_bps: if active_ns == 0 {
                0.0
            } else {
                r.rx_bytes as f64 * 8.0 / (active_ns as f64 / 1e9)
            },
            latency_ns: lat.summary(),
            jitter_ns: jitter.mean(),
            hops: Vec::new(),
        });
    }
    let topo = latnet_sim::net::Topology::build(sc);
    let ports = topo
        .ports
        .iter()
        .enumerate()
        .map(|(g, t)| {
            let st = switches.iter().flat_map(|s| s.ports.iter()).find(|p| p.port == g);
            let q = |c: &crate::stats::QueueCounters, extra: Option<&BTreeMap<String, u64>>| {
                let mut drops = c.drops.clone();
                if let Some(e) = extra {
                    merge(&mut drops, e);
                }
                QueueResult {
                    enqueued: c.enqueued,
                    dequeued: c.dequeued,
                    peak_packets: c.peak_packets,
                    peak_bytes: c.peak_bytes,
                    ce_marks: c.ce_marks,
                    drops,
                }
            };
            PortResult {
                node: sc.nodes[t.node].name.clone(),
                peer: sc.nodes[t.peer].name.clone(),
                rate_bps: t.rate.bps(),
                tx_packets: st.map_or(0, |p| p.tx_packets),
                tx_bytes: st.map_or(0, |p| p.tx_bytes),
                utilisation: st.map_or(0.0, |p| {
                    if end_ns == 0 {
                        0.0
                    } else {
                        p.busy_ns as f64 / end_ns as f64
                    }
                }),
                queue: st.map_or_else(
                    || QueueResult {
                        enqueued: 0,
                        dequeued: 0,
                        peak_packets: 0,
                        peak_bytes: 0,
                        ce_marks: 0,
                        drops: BTreeMap::new(),
                    },
                    |p| q(&p.queue, Some(&p.link_drops)),
                ),
                classes: st
                    .map_or_else(Vec::new, |p| p.classes.iter().map(|c| q(c, None)).collect()),
                aqm: st.and_then(|p| p.aqm.clone()),
            }
        })
        .collect();
    let nodes = sc
        .nodes
        .iter()
        .map(|n| NodeResult {
            name: n.name.clone(),
            drops: switches
                .iter()
                .find(|s| s.node == n.name)
                .map_or_else(BTreeMap::new, |s| s.node_drops.clone()),
            large_flows: switches.iter().find(|s| s.node == n.name).and_then(|s| s.large_flows),
        })
        .collect();
    Ok(Results {
        scenario: sc.name.clone(),
        seed: sc.sim.seed,
        duration_ns: sc.sim.duration.as_nanos(),
        end_ns,
        latency_convention: "physical".to_owned(),
        // (a switch hands a frame to a switch before its serialization ends under cut-through)
        switching: sc.sim.switching.as_str().to_owned(),
        lbf: None,
        tie_break: sc.sim.tie_break.as_str().to_owned(),
        events: switches.iter().map(|s| s.forwarded).sum(),
        flows,
        ports,
        nodes,
        log: None,
        // the switches write their captures themselves (`latnet-switch run --pcap`)
        pcaps: Vec::new(),
        // the switches' samples (`latnet-switch run --queues`), in the simulator's order
        queue_series: {
            let mut rows: Vec<_> =
                switches.iter().flat_map(|s| s.queue_series.iter().copied()).collect();
            rows.sort_by_key(|r| (r.t_ns, r.port));
            rows
        },
        timeseries: Vec::new(),
        aux_flow_names: Vec::new(),
    })
}
