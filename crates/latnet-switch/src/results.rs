//! Results of an emulated run in the simulator's format ([`latnet_sim::Results`]): the same
//! `results.json` and `flows.csv`, built from the senders' reports, the receivers' packet logs
//! and the switches' statistics files of one run directory.
//!
//! Differences from a simulated run, all stated in the output: latency is measured physically
//! (application send to application receive, both hosts' stacks included) whatever the
//! scenario's convention; so are `hops`, the latency at the start of transmission from each
//! hop (from the sender's stamp to the emulated start, measured by the switch emulating the
//! port; flows of latnet's senders only); `in_flight_at_end` holds packets that were
//! sent but neither received nor dropped by a switch (lost in a host, or still in flight when
//! the receiver stopped); `events` counts packets the switches forwarded. Dual-queue AQM reports
//! are the switches' own, with epochs counted from the run's time zero when the switches were
//! given it (`latnet-switch run --t0`, as `latnet run --mode emu` does); so is the queue
//! series (`queues.csv`) of switches run with `--queues`.
//!
//! Latency-Based Forwarding (`lbf`): the switches' forwarder counters and late notifications
//! (timed from the run's time zero), the senders' damper violations counted where their queues
//! are emulated, drops by reason per flow, and the receivers' count of early / on-time / late
//! packets. That count compares the measured latency (physical, application to application)
//! with the flow's bounds, whatever convention the switches computed their budgets under, and
//! reads the late flag from each packet's block as it arrived (`packets-<flow>.csv`, `late`).

use crate::stats::SwitchStats;
use crate::traffic::{FlowRecv, RecvReport, SendReport};
use latnet_dataplane::DropReason;
use latnet_sim::lbf::{LbfFlowResult, LbfResults, LbfSwitchResult};
use latnet_sim::results::{
    undilate_ns, EmulatedReceiver, EmulatedSender, EmulatedSwitch, EmulationReport, FlowResult,
    HopResult, NodeResult, PortResult, QueueResult, Results,
};
use latnet_sim::stats::{Jitter, LatencyStats};
use latnet_sim::Scenario;
use std::collections::BTreeMap;
use std::io;
use std::path::Path;

/// The text of a file of the run, `None` if there is none; other errors name the file.
fn read_run_file(path: &Path) -> io::Result<Option<String>> {
    match std::fs::read_to_string(path) {
        Ok(s) => Ok(Some(s)),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(io::Error::new(e.kind(), format!("{}: {e}", path.display()))),
    }
}

fn read_json<T: serde::de::DeserializeOwned>(path: &Path) -> io::Result<Option<T>> {
    let Some(s) = read_run_file(path)? else { return Ok(None) };
    serde_json::from_str(&s)
        .map(Some)
        .map_err(|e| io::Error::other(format!("{}: {e}", path.display())))
}

/// The rows of `text`, a CSV file of the run (`path`) under `header`, split at commas into
/// exactly as many fields as the header has, with their line numbers; a missing header or a
/// row of another width is an error naming the file and line.
fn csv_rows<'a>(
    path: &Path,
    text: &'a str,
    header: &str,
) -> io::Result<impl Iterator<Item = io::Result<(usize, Vec<&'a str>)>> + 'a> {
    let header = header.trim_end();
    let width = header.split(',').count();
    let mut lines = text.lines();
    if lines.next() != Some(header) {
        return Err(bad_row(path, 1, format!("expected the header {header:?}")));
    }
    let path = path.to_owned();
    let header = header.to_owned();
    Ok(lines.enumerate().map(move |(k, line)| {
        let v: Vec<&str> = line.split(',').collect();
        if v.len() == width {
            Ok((k + 2, v))
        } else {
            let msg = format!("expected {width} fields ({header}), got {}", v.len());
            Err(bad_row(&path, k + 2, msg))
        }
    }))
}

fn bad_row(path: &Path, line: usize, what: String) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, format!("{}:{line}: {what}", path.display()))
}

/// Field `name` of line `line` of `path`, an integer.
fn int_field(path: &Path, line: usize, name: &str, s: &str) -> io::Result<u64> {
    s.parse::<u64>()
        .map_err(|_| bad_row(path, line, format!("{name}: expected an integer, got {s:?}")))
}

/// The scenario's flows by name, for the run's files that name them.
struct FlowNames<'a>(BTreeMap<&'a str, usize>);

impl<'a> FlowNames<'a> {
    fn new(sc: &'a Scenario) -> Self {
        FlowNames(sc.flows.iter().enumerate().map(|(i, f)| (f.name.as_str(), i)).collect())
    }

    /// The index of the flow that field `flow` of line `line` of `path` names.
    fn field(&self, path: &Path, line: usize, s: &str) -> io::Result<usize> {
        let no = || bad_row(path, line, format!("flow: no flow named {s:?}"));
        self.0.get(s).copied().ok_or_else(no)
    }
}

fn merge(into: &mut BTreeMap<String, u64>, from: &BTreeMap<String, u64>) {
    for (k, v) in from {
        *into.entry(k.clone()).or_default() += v;
    }
}

/// Flow `f`'s latency at the start of transmission from each hop of its route, as the
/// switches emulating those ports measured it (empty when none did: TCP flows, or no route).
///
/// The route is the one the flow took, not necessarily the FIB's (a source-routed or
/// pipeline-forwarded flow may leave elsewhere): from the source, each node's next port is
/// the one the flow was measured leaving by; where it was measured leaving by several, the
/// FIB's among them (else the first); where by none, the FIB's (an unmeasured hop, reported
/// empty).
fn hop_latency(
    sc: &Scenario,
    topo: &latnet_sim::net::Topology,
    f: &latnet_sim::scenario::FlowSpec,
    switches: &[SwitchStats],
) -> Vec<HopResult> {
    let measured: BTreeMap<usize, latnet_sim::stats::Summary> = switches
        .iter()
        .filter_map(|s| s.flows.iter().find(|x| x.flow == f.name))
        .flat_map(|fs| fs.hops.iter().map(|h| (h.port, h.latency_ns)))
        .collect();
    if measured.is_empty() {
        return Vec::new();
    }
    let mut hops = Vec::new();
    let mut at = f.src;
    // a route visits each port at most once (a loop guard)
    while at != f.dst && hops.len() < topo.ports.len() {
        let fib = topo.fib[at][f.dst];
        let fib = (fib != latnet_sim::net::NO_PORT).then_some(fib as usize);
        let here: Vec<usize> =
            measured.keys().copied().filter(|&p| topo.ports[p].node == at).collect();
        let port = match (here.as_slice(), fib) {
            ([p], _) => *p,
            (_, Some(p)) if here.is_empty() || here.contains(&p) => p,
            ([p, ..], _) => *p,
            _ => break,
        };
        hops.push(HopResult {
            hop: hops.len() as u32,
            node: sc.nodes[at].name.clone(),
            toward: sc.nodes[topo.ports[port].peer].name.clone(),
            latency_ns: measured.get(&port).copied(),
        });
        at = topo.ports[port].peer;
    }
    if hops.iter().all(|h| h.latency_ns.is_none()) {
        return Vec::new();
    }
    hops
}

/// The switches' per-packet hop records in `dir` (`hops-<node>.csv`, written under
/// `latnet-switch run --hops`) as the simulator's `hops.csv`, rows in order of their start of
/// transmission. A row's `hop` is its rank among its packet's transmissions, as the simulator
/// counts them (so source-routed and pipeline-forwarded flows get theirs too, whatever the
/// FIB says); `node` transmits on the row's port. `id` is empty (the simulator's packet id; an
/// emulated packet is named by `flow` and `seq`, as the simulator's rows are too). `None` when
/// no switch wrote records. A malformed row is an error naming the file and line.
pub fn hop_records(sc: &Scenario, dir: &Path) -> io::Result<Option<String>> {
    let k = sc.sim.dilation;
    let topo = latnet_sim::net::Topology::build(sc);
    let flows = FlowNames::new(sc);
    let mut found = false;
    // per transmission: flow index, seq, start, enqueue, eligible, port, priority
    let mut tx: Vec<(usize, u64, u64, u64, u64, usize, u8)> = Vec::new();
    for n in &sc.nodes {
        let path = dir.join(format!("hops-{}.csv", n.name));
        let Some(text) = read_run_file(&path)? else { continue };
        found = true;
        for row in csv_rows(&path, &text, crate::core::HOP_RECORDS_HEADER)? {
            let (at, v) = row?;
            let bad = |what: String| bad_row(&path, at, what);
            let num = |i: usize, name: &str| int_field(&path, at, name, v[i]);
            let fi = flows.field(&path, at, v[0])?;
            let (seq, port) = (num(1, "seq")?, num(2, "port")?);
            let port = usize::try_from(port).ok().filter(|&p| p < topo.ports.len());
            let Some(port) = port else {
                return Err(bad(format!("port: {} is not a port of the topology", v[2])));
            };
            let Ok(prio) = u8::try_from(num(3, "priority")?) else {
                return Err(bad(format!("priority: expected at most 255, got {}", v[3])));
            };
            let (enq, elig, start) =
                (num(4, "enqueue_ns")?, num(5, "eligible_ns")?, num(6, "start_tx_ns")?);
            let [enq, elig, start] = [enq, elig, start].map(|v| undilate_ns(v, k));
            tx.push((fi, seq, start, enq, elig, port, prio));
        }
    }
    if !found {
        return Ok(None);
    }
    // each packet's transmissions in time order: their ranks are the hops
    tx.sort_unstable();
    let mut rows: Vec<((u64, usize, usize, u64), String)> = Vec::with_capacity(tx.len());
    let mut hop = 0;
    for (k, &(fi, seq, start, enq, elig, port, prio)) in tx.iter().enumerate() {
        let same_packet = k > 0 && tx[k - 1].0 == fi && tx[k - 1].1 == seq;
        hop = if same_packet { hop + 1 } else { 0 };
        let (flow, node) = (&sc.flows[fi].name, &sc.nodes[topo.ports[port].node].name);
        rows.push((
            (start, hop, fi, seq),
            format!(",{flow},{seq},{hop},{node},{port},{prio},{enq},{elig},{start}\n"),
        ));
    }
    rows.sort_unstable_by_key(|r| r.0);
    let mut out = String::from(latnet_sim::results::HOPS_CSV_HEADER);
    out.extend(rows.into_iter().map(|r| r.1));
    Ok(Some(out))
}

/// One row of a receiver's packet log (`packets-<flow>.csv`, [`crate::traffic::recv`]).
#[derive(Debug, Clone, Copy)]
struct LoggedPacket {
    seq: u64,
    send_ns: u64,
    recv_ns: u64,
    late: bool,
}

/// The receiver's log of flow `flow` in `dir`, `None` if there is none; a malformed row is an
/// error naming the file, line and field.
fn packet_log(dir: &Path, flow: &str) -> io::Result<Option<Vec<LoggedPacket>>> {
    let path = dir.join(format!("packets-{flow}.csv"));
    let Some(text) = read_run_file(&path)? else { return Ok(None) };
    let mut out = Vec::new();
    for row in csv_rows(&path, &text, crate::traffic::PACKET_LOG_HEADER)? {
        let (at, v) = row?;
        let num = |i: usize, name: &str| int_field(&path, at, name, v[i]);
        let (seq, send_ns, recv_ns) = (num(0, "seq")?, num(1, "send_ns")?, num(2, "recv_ns")?);
        let (_intact, late) = (num(3, "intact")?, num(4, "late")? == 1);
        out.push(LoggedPacket { seq, send_ns, recv_ns, late });
    }
    Ok(Some(out))
}

/// The receivers' packet logs in `dir` (`packets-<flow>.csv`) and the switches' drop records
/// (`drops-<node>.csv`, written under `latnet-switch run --hops`) as the simulator's
/// `packets.csv`: one row per packet received or dropped by a switch, instants counted from
/// `t0_ns` (the run's time zero, `CLOCK_MONOTONIC`; the switches count their records from the
/// `--t0` they were given), rows in order of sending (then flow, sequence number). `id` is
/// empty, as in the emulated `hops.csv`. Every other packet a sender reports sent (lost in a
/// host's stack, or still in flight when the receivers stopped) is an `end-of-run` row, as
/// the simulator writes a packet in flight at its end: created at the flow's emission instant
/// for its sequence number ([`crate::traffic::Emissions`]), ended at `end_ns` (the run's
/// length), no node; so with the switches' records every packet has a row, as in the flow
/// table's `sent = received + dropped + in_flight_at_end`. `None` when there is neither a log
/// nor a record. A malformed row is an error naming the file and line.
pub fn packet_records(
    sc: &Scenario,
    dir: &Path,
    t0_ns: u64,
    end_ns: u64,
) -> io::Result<Option<String>> {
    let k = sc.sim.dilation;
    let flows = FlowNames::new(sc);
    let mut found = false;
    // (send instant, flow index, seq) and the row
    let mut rows: Vec<((u64, usize, u64), String)> = Vec::new();
    // per flow, the sequence numbers with a row
    let mut seen = vec![std::collections::BTreeSet::new(); sc.flows.len()];
    for n in &sc.nodes {
        let path = dir.join(format!("drops-{}.csv", n.name));
        let Some(text) = read_run_file(&path)? else { continue };
        found = true;
        for row in csv_rows(&path, &text, crate::core::DROP_RECORDS_HEADER)? {
            let (at, v) = row?;
            let bad = |what: String| bad_row(&path, at, what);
            let num = |i: usize, name: &str| int_field(&path, at, name, v[i]);
            let fi = flows.field(&path, at, v[0])?;
            let name = &sc.flows[fi].name;
            let seq = num(1, "seq")?;
            let Some(reason) = DropReason::from_name(v[2]) else {
                return Err(bad(format!("reason: no drop reason named {:?}", v[2])));
            };
            let Some(node) = sc.nodes.iter().find(|n| n.name == v[3]) else {
                return Err(bad(format!("node: no node named {:?}", v[3])));
            };
            let (created, end) = (num(4, "created_ns")?, num(5, "drop_ns")?);
            let (created, end) = (undilate_ns(created, k), undilate_ns(end, k));
            let (reason, node) = (reason.as_str(), &node.name);
            let row = format!(",{name},{seq},{created},{end},,{reason},{node}\n");
            rows.push(((created, fi, seq), row));
            seen[fi].insert(seq);
        }
    }
    for (fi, f) in sc.flows.iter().enumerate() {
        let Some(log) = packet_log(dir, &f.name)? else { continue };
        found = true;
        for p in log {
            let (created, end) = (p.send_ns.saturating_sub(t0_ns), p.recv_ns.saturating_sub(t0_ns));
            let (created, end) = (undilate_ns(created, k), undilate_ns(end, k));
            let latency = end.saturating_sub(created);
            let (name, seq) = (&f.name, p.seq);
            rows.push(((created, fi, seq), format!(",{name},{seq},{created},{end},{latency},,\n")));
            seen[fi].insert(seq);
        }
    }
    if !found {
        return Ok(None);
    }
    let end = undilate_ns(end_ns, k);
    for (fi, f) in sc.flows.iter().enumerate() {
        let path = dir.join(format!("send-{}.json", f.name));
        let Some(report) = read_json::<SendReport>(&path)? else { continue };
        let emitted = crate::traffic::Emissions::new(sc, fi).take(report.sent as usize);
        for (seq, t) in (0u64..).zip(emitted).filter(|(seq, _)| !seen[fi].contains(seq)) {
            let created = undilate_ns(t.as_nanos(), k);
            let row = format!(",{},{seq},{created},{end},,end-of-run,\n", f.name);
            rows.push(((created, fi, seq), row));
        }
    }
    rows.sort_unstable_by_key(|r| r.0);
    let mut out = String::from(latnet_sim::results::PACKETS_CSV_HEADER);
    out.extend(rows.into_iter().map(|r| r.1));
    Ok(Some(out))
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
    let topo = latnet_sim::net::Topology::build(sc);
    let mut flows = Vec::with_capacity(sc.flows.len());
    let mut lbf_flows = Vec::new();
    let mut senders = Vec::new();
    for f in &sc.flows {
        let mut slo = LbfFlowResult::new(f);
        let report = read_json::<SendReport>(&dir.join(format!("send-{}.json", f.name)))?;
        let sent = report.as_ref().map_or(0, |s| s.sent);
        senders.extend(report.map(|r| EmulatedSender {
            flow: r.flow,
            sent: r.sent,
            late_100us: r.late_100us,
            late_max_ns: r.late_max_ns,
        }));
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
        for p in packet_log(dir, &f.name)?.unwrap_or_default() {
            let l = p.recv_ns.saturating_sub(p.send_ns);
            if let Some(out) = &mut slo {
                out.record(l, p.late);
            }
            lat.record(l);
            jitter.record(l);
            last_rx = last_rx.max(p.recv_ns);
            first_send = first_send.min(p.send_ns);
        }
        if let Some(mut out) = slo {
            for s in &switches {
                let Some(fs) = s.flows.iter().find(|x| x.flow == f.name) else { continue };
                for (reason, into) in [
                    (DropReason::HopelessEarlyDrop, &mut out.early_drops),
                    (DropReason::DeadlineExpired, &mut out.expired),
                ] {
                    if let Some(&n) = fs.drops.get(reason.as_str()).filter(|&&n| n > 0) {
                        *into.entry(s.node.clone()).or_default() += n;
                    }
                }
                let lbf = s.lbf.as_ref();
                out.sender_damper_violations +=
                    lbf.and_then(|l| l.sender_damper_violations.get(&f.name)).copied().unwrap_or(0);
            }
            lbf_flows.push(out);
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
            hops: hop_latency(sc, &topo, f, &switches),
        });
    }
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
    let mut res = Results {
        scenario: sc.name.clone(),
        seed: sc.sim.seed,
        dilation: 1,
        duration_ns: sc.sim.duration.as_nanos(),
        end_ns,
        latency_convention: "physical".to_owned(),
        // (a switch hands a frame to a switch before its serialization ends under cut-through)
        switching: sc.sim.switching.as_str().to_owned(),
        lbf: (sc.lbf.is_some() || !lbf_flows.is_empty()).then(|| {
            let mut notes = Vec::new();
            let mut lbf_switches = Vec::new();
            let mut total = 0;
            // in node order, as the simulator lists them
            for n in &sc.nodes {
                let Some(s) = switches.iter().find(|s| s.node == n.name) else { continue };
                let Some(l) = &s.lbf else { continue };
                if let Some(c) = &l.counters {
                    lbf_switches
                        .push(LbfSwitchResult { node: s.node.clone(), counters: c.clone() });
                }
                notes.extend(l.notifications.iter().cloned());
                total += l.notifications_total;
            }
            LbfResults {
                latency_convention: "physical".to_owned(),
                switching: sc.sim.switching.as_str().to_owned(),
                switches: lbf_switches,
                flows: lbf_flows,
                notifications: latnet_sim::lbf::first_notifications(notes),
                notifications_total: total,
            }
        }),
        emulation: Some(emulation_report(sc, &switches, senders, &recv)),
        tie_break: sc.sim.tie_break.as_str().to_owned(),
        events: switches.iter().map(|s| s.forwarded).sum(),
        flows,
        ports,
        nodes,
        log: None,
        // the switches write their captures themselves (`latnet-switch run --pcap`)
        pcaps: Vec::new(),
        // the switches' samples (`latnet-switch run --queues`), in the simulator's order
        queues_sampled: sc.output.queues.is_some()
            || switches.iter().any(|s| !s.queue_series.is_empty()),
        queue_series: {
            let mut rows: Vec<_> =
                switches.iter().flat_map(|s| s.queue_series.iter().copied()).collect();
            rows.sort_by_key(|r| (r.t_ns, r.port));
            rows
        },
        timeseries: Vec::new(),
        aux_flow_names: Vec::new(),
    };
    res.undilate(sc.sim.dilation);
    Ok(res)
}

/// The switches', senders' and receivers' account of their timing, in node and flow order.
fn emulation_report(
    sc: &Scenario,
    switches: &[SwitchStats],
    senders: Vec<EmulatedSender>,
    recv: &BTreeMap<String, FlowRecv>,
) -> EmulationReport {
    let switches: Vec<_> = sc
        .nodes
        .iter()
        .filter_map(|n| switches.iter().find(|s| s.node == n.name))
        .map(|s| EmulatedSwitch {
            node: s.node.clone(),
            forwarded: s.forwarded,
            tx_late_100us: s.late_100us,
            tx_late_max_ns: s.late_max_ns,
            rx_read_late_10us: s.rx_read_late_10us,
            rx_read_late_max_ns: s.rx_read_late_max_ns,
            ring_drops: s.ring_drops,
            tx_refused: s.tx_refused,
        })
        .collect();
    let late_max_ns = switches
        .iter()
        .map(|s| s.tx_late_max_ns)
        .chain(senders.iter().map(|s| s.late_max_ns))
        .max()
        .unwrap_or(0);
    let receivers = sc
        .flows
        .iter()
        .filter_map(|f| recv.get(&f.name))
        .map(|r| EmulatedReceiver {
            flow: r.flow.clone(),
            received: r.received,
            stamped: r.stamped,
            read_late_100us: r.read_late_100us,
            read_late_max_ns: r.read_late_max_ns,
        })
        .collect();
    EmulationReport { late_max_ns, switches, senders, receivers }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::core::{lbf_template, SwitchCore};
    use crate::stats::RunnerCounters;
    use latnet_units::Time;

    const SC: &str = "[sim]\nduration = \"1s\"\n[defaults.link]\nrate = \"100Mbps\"\n\
        [defaults]\nqueue = { kind = \"lbf\" }\n[lbf]\nupper = \"mark\"\n\
        [[nodes]]\nname = \"h1\"\nkind = \"host\"\n[[nodes]]\nname = \"s1\"\nkind = \"switch\"\n\
        [[nodes]]\nname = \"h2\"\nkind = \"host\"\n\
        [[links]]\na = \"h1\"\nb = \"s1\"\n[[links]]\na = \"s1\"\nb = \"h2\"\ndelay = \"1ms\"\n\
        [[flows]]\nname = \"f\"\nsrc = \"h1\"\ndst = \"h2\"\nsize = 1250\n\
        traffic = { kind = \"cbr\", rate = \"1Mbps\" }\n\
        slo = { lower = \"100us\", upper = \"500us\" }\n";

    /// The LBF section of an emulated run: the receiver's log classified against the flow's
    /// bounds with the late flag each packet arrived with, the switch's forwarder counters and
    /// notification records (a 500 us upper bound behind a 1 ms link: s1 marks what it sees),
    /// and drops by LBF reason per switch from the switch's flow counters.
    #[test]
    fn an_emulated_run_reports_lbf_as_the_simulator_does() {
        let sc = Scenario::from_str_named("t.toml", SC).unwrap();
        let dir = std::env::temp_dir().join(format!("latnet-emu-lbf-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let mut core = SwitchCore::new(&sc, "s1").unwrap();
        let (mut frame, _) = lbf_template(&sc, &sc.flows[0]).unwrap();
        frame.resize(1250, 0);
        frame[0..6].copy_from_slice(&crate::plan::port_mac(1));
        frame[6..12].copy_from_slice(&crate::plan::port_mac(0));
        let skip = crate::traffic::payload_prefix(&sc, &sc.flows[0]).unwrap().0.len();
        for seq in 0..3 {
            crate::traffic::fill_payload(&mut frame[42 + skip..], 0, seq, 0);
            let t = Time::from_nanos(u64::from(seq) * 1_000_000);
            core.receive(t, 0, &frame, crate::core::Offload::default());
            core.advance(t + latnet_units::Duration::from_micros(500), &mut |_, _, _| {});
        }
        let mut st = SwitchStats::collect(&sc, &core, RunnerCounters::default(), true);
        st.flows[0].drops.insert("hopeless-early-drop".to_owned(), 2);
        st.write(&dir.join("switch-s1.json")).unwrap();
        std::fs::write(
            dir.join("send-f.json"),
            r#"{"flow":"f","sent":7,"send_errors":0,"late_max_ns":0}"#,
        )
        .unwrap();
        // early, on time, late (marked), late (unmarked), on time but marked
        let log = "seq,send_ns,recv_ns,intact,late\n0,1000,51000,1,0\n1,1000,301000,1,0\n\
                   2,1000,2001000,1,1\n3,1000,2001000,1,0\n4,1000,301000,1,1\n";
        std::fs::write(dir.join("packets-f.csv"), log).unwrap();
        let res = collect(&sc, &dir, 1_000_000_000);
        std::fs::remove_dir_all(&dir).unwrap();
        let res = res.unwrap();
        // per hop, from the payload's stamp (0) to each start of transmission: at h1's NIC
        // on arrival, at s1 after the 100 us serialization on h1's link
        let hops: Vec<_> = res.flows[0]
            .hops
            .iter()
            .map(|h| {
                let l = h.latency_ns.map(|l| (l.count, l.min, l.max));
                (h.hop, h.node.as_str(), h.toward.as_str(), l)
            })
            .collect();
        assert_eq!(
            hops,
            [
                (0, "h1", "s1", Some((3, 0, 2_000_000))),
                (1, "s1", "h2", Some((3, 100_000, 2_100_000)))
            ]
        );
        let lbf = res.lbf.expect("an LBF section");
        let f = &lbf.flows[0];
        assert_eq!((f.flow.as_str(), f.lower_ns, f.upper_ns), ("f", 100_000, Some(500_000)));
        assert_eq!((f.received, f.early, f.on_time), (5, 1, 2));
        assert_eq!((f.late_marked, f.late_unmarked, f.marked_but_on_time), (1, 1, 1));
        assert_eq!(f.early_drops, BTreeMap::from([("s1".to_owned(), 2)]));
        assert!(f.expired.is_empty());
        assert_eq!(lbf.latency_convention, "physical");
        assert_eq!(lbf.switches.len(), 1);
        let c = &lbf.switches[0].counters;
        assert_eq!((lbf.switches[0].node.as_str(), c.lbf_packets, c.marked_late), ("s1", 3, 3));
        assert_eq!(lbf.notifications_total, 3);
        let seqs: Vec<_> = lbf.notifications.iter().map(|n| (n.flow.as_str(), n.seq)).collect();
        assert_eq!(seqs, [("f", 0), ("f", 1), ("f", 2)]);
    }

    /// The switches' and senders' lateness behind their schedules, and how late the receivers
    /// read what the kernel stamped, go into `emulation`, in the scenario's time (here 10 times
    /// dilated: divided by 10), counts as counted; a sender's or receiver's report from before
    /// the counts (no `late_100us`, no `stamped`) still reads; a damaged one is an error
    /// naming the file.
    #[test]
    fn an_emulated_run_reports_its_lateness_in_the_scenarios_time() {
        let text = SC.replace("[sim]\n", "[sim]\ndilation = 10\n");
        let sc = Scenario::from_str_named("t.toml", &text).unwrap();
        let dir = std::env::temp_dir().join(format!("latnet-emu-late-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let core = SwitchCore::new(&sc, "s1").unwrap();
        let rc = RunnerCounters {
            late_100us: 3,
            late_max_ns: 4_500_000,
            rx_read_late_10us: 7,
            rx_read_late_max_ns: 20_000,
            ring_drops: 1,
            ..RunnerCounters::default()
        };
        SwitchStats::collect(&sc, &core, rc, true).write(&dir.join("switch-s1.json")).unwrap();
        let send = r#"{"flow":"f","sent":7,"send_errors":0,"late_max_ns":6000000,"late_100us":2}"#;
        std::fs::write(dir.join("send-f.json"), send).unwrap();
        let recv = r#"{"host":"h2","flows":[{"flow":"f","received":6,"rx_bytes":7500,
            "corrupted":0,"reordered":0,"duplicates":0,"foreign":0,"stamped":6,
            "read_late_100us":1,"read_late_max_ns":2500000}]}"#;
        std::fs::write(dir.join("recv-h2.json"), recv).unwrap();
        let res = collect(&sc, &dir, 1_000_000_000);
        let old = r#"{"flow":"f","sent":7,"send_errors":0,"late_max_ns":30000}"#;
        std::fs::write(dir.join("send-f.json"), old).unwrap();
        let old = r#"{"host":"h2","flows":[{"flow":"f","received":6,"rx_bytes":7500,
            "corrupted":0,"reordered":0,"duplicates":0,"foreign":0}]}"#;
        std::fs::write(dir.join("recv-h2.json"), old).unwrap();
        let res_old = collect(&sc, &dir, 1_000_000_000);
        std::fs::write(dir.join("send-f.json"), r#"{"flow":"f","sent":"seven"}"#).unwrap();
        let bad = collect(&sc, &dir, 1_000_000_000).map(|_| ()).unwrap_err().to_string();
        std::fs::remove_dir_all(&dir).unwrap();
        assert!(bad.contains("send-f.json: invalid type: string \"seven\""), "{bad}");
        let e = res.unwrap().emulation.expect("an emulation section");
        let s1 = EmulatedSwitch {
            node: "s1".to_owned(),
            forwarded: 0,
            tx_late_100us: 3,
            tx_late_max_ns: 450_000,
            rx_read_late_10us: 7,
            rx_read_late_max_ns: 2_000,
            ring_drops: 1,
            tx_refused: 0,
        };
        let f =
            EmulatedSender { flow: "f".to_owned(), sent: 7, late_100us: 2, late_max_ns: 600_000 };
        let r = EmulatedReceiver {
            flow: "f".to_owned(),
            received: 6,
            stamped: 6,
            read_late_100us: 1,
            read_late_max_ns: 250_000,
        };
        // (the receivers' reads are kept out of the latencies and out of `late_max_ns`)
        let want = EmulationReport {
            late_max_ns: 600_000,
            switches: vec![s1],
            senders: vec![f],
            receivers: vec![r],
        };
        assert_eq!(e, want);
        let e = res_old.unwrap().emulation.unwrap();
        assert_eq!(
            (e.late_max_ns, e.senders[0].late_100us, e.senders[0].late_max_ns),
            (450_000, 0, 3_000)
        );
        let r = &e.receivers[0];
        assert_eq!((r.received, r.stamped, r.read_late_100us, r.read_late_max_ns), (6, 0, 0, 0));
    }

    /// The receivers' logs and the switches' drop records become the simulator's
    /// `packets.csv`: instants from the run's time zero, rows in order of sending, drops with
    /// their reason and node, the rest of what the sender sent as `end-of-run`; no log, no
    /// table; a bad row names the file and line.
    #[test]
    fn packet_logs_become_the_simulators_packets_csv() {
        let sc = Scenario::from_str_named("t.toml", SC).unwrap();
        let dir = std::env::temp_dir().join(format!("latnet-emu-pk-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        assert_eq!(packet_records(&sc, &dir, 5_000, 1_100_000_000).unwrap(), None);
        let header = crate::traffic::PACKET_LOG_HEADER;
        // arrival order: seq 1 overtook seq 0
        let log = format!("{header}1,7000,9500,1,0\n0,6000,10000,1,1\n");
        std::fs::write(dir.join("packets-f.csv"), log).unwrap();
        let got = packet_records(&sc, &dir, 5_000, 1_100_000_000).unwrap().unwrap();
        let want = format!(
            "{},f,0,1000,5000,4000,,\n,f,1,2000,4500,2500,,\n",
            latnet_sim::results::PACKETS_CSV_HEADER
        );
        assert_eq!(got, want);
        // s1 dropped seq 2 at h1's NIC (already counted from time zero) and seq 3 itself
        let drops = dir.join("drops-s1.csv");
        let drop_header = crate::core::DROP_RECORDS_HEADER;
        let records = "f,3,hopeless-early-drop,s1,2500,2700\nf,2,queue-full-packets,h1,1500,1500\n";
        std::fs::write(&drops, format!("{drop_header}{records}")).unwrap();
        let got = packet_records(&sc, &dir, 5_000, 1_100_000_000).unwrap().unwrap();
        let want = format!(
            "{},f,0,1000,5000,4000,,\n,f,2,1500,1500,,queue-full-packets,h1\n\
             ,f,1,2000,4500,2500,,\n,f,3,2500,2700,,hopeless-early-drop,s1\n",
            latnet_sim::results::PACKETS_CSV_HEADER
        );
        assert_eq!(got, want);
        // the sender sent 6: seq 4 and 5 reached neither the receiver nor a switch's records,
        // in flight at the end as the simulator writes it, created at the flow's 10 ms period
        let send = r#"{"flow":"f","sent":6,"send_errors":0,"late_max_ns":0}"#;
        std::fs::write(dir.join("send-f.json"), send).unwrap();
        let got = packet_records(&sc, &dir, 5_000, 1_100_000_000).unwrap().unwrap();
        let lost = ",f,4,40000000,1100000000,,end-of-run,\n,f,5,50000000,1100000000,,end-of-run,\n";
        assert_eq!(got, format!("{want}{lost}"));
        std::fs::remove_file(dir.join("send-f.json")).unwrap();
        let err = |row: &str| {
            std::fs::write(&drops, format!("{drop_header}{row}\n")).unwrap();
            packet_records(&sc, &dir, 5_000, 1_100_000_000).unwrap_err().to_string()
        };
        let e = err("f,3,tired,s1,2500,2700");
        assert!(e.ends_with("drops-s1.csv:2: reason: no drop reason named \"tired\""), "{e}");
        let e = err("f,3,no-route,s9,2500,2700");
        assert!(e.ends_with("drops-s1.csv:2: node: no node named \"s9\""), "{e}");
        let e = err("g,3,no-route,s1,2500,2700");
        assert!(e.ends_with("drops-s1.csv:2: flow: no flow named \"g\""), "{e}");
        let e = err("f,3,no-route,s1,2500");
        assert!(e.contains("drops-s1.csv:2:"), "{e}");
        std::fs::remove_file(&drops).unwrap();
        std::fs::write(dir.join("packets-f.csv"), format!("{header}1,7000,x,1,0\n")).unwrap();
        let e = packet_records(&sc, &dir, 5_000, 1_100_000_000).unwrap_err().to_string();
        std::fs::remove_dir_all(&dir).unwrap();
        assert!(e.ends_with("packets-f.csv:2: recv_ns: expected an integer, got \"x\""), "{e}");
    }

    /// A receiver's log with a row that is not five integers is an error naming the file, the
    /// line and the field, not a packet counted with a latency made up of zeros.
    #[test]
    fn a_malformed_packet_log_is_an_error_naming_the_line() {
        let sc = Scenario::from_str_named("t.toml", SC).unwrap();
        let dir = std::env::temp_dir().join(format!("latnet-emu-log-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let header = crate::traffic::PACKET_LOG_HEADER;
        let err = |text: String| {
            std::fs::write(dir.join("packets-f.csv"), text).unwrap();
            collect(&sc, &dir, 1_000_000_000).unwrap_err().to_string()
        };
        let e = err(format!("{header}0,1000,51000,1,0\n1,1000,,1,0\n"));
        assert!(e.ends_with("packets-f.csv:3: recv_ns: expected an integer, got \"\""), "{e}");
        let e = err(format!("{header}0,1000,51000,1\n"));
        assert!(
            e.ends_with(
                "packets-f.csv:2: expected 5 fields (seq,send_ns,recv_ns,intact,late), got 4"
            ),
            "{e}"
        );
        let e = err("seq,send\n".to_owned());
        assert!(e.contains("packets-f.csv:1: expected the header"), "{e}");
        // a well-formed log is read
        std::fs::write(dir.join("packets-f.csv"), format!("{header}0,1000,51000,1,0\n")).unwrap();
        let res = collect(&sc, &dir, 1_000_000_000);
        std::fs::remove_dir_all(&dir).unwrap();
        let lat = res.unwrap().flows[0].latency_ns.expect("one packet");
        assert_eq!((lat.count, lat.min), (1, 50_000));
    }

    /// The switches' hop records become the simulator's `hops.csv`: hop index from the order
    /// of each packet's transmissions, node from the port, rows in order of their start; no
    /// file, no table; a bad row is an error naming the file, the line and the field.
    #[test]
    fn hop_records_are_merged_into_the_simulators_hops_csv() {
        let sc = Scenario::from_str_named("t.toml", SC).unwrap();
        let dir = std::env::temp_dir().join(format!("latnet-emu-hops-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let topo = latnet_sim::net::Topology::build(&sc);
        let out = |p: usize| topo.fib[p][2];
        let (p0, p1) = (out(0), out(1));
        assert_eq!(hop_records(&sc, &dir).unwrap(), None);
        let file = dir.join("hops-s1.csv");
        let header = crate::core::HOP_RECORDS_HEADER;
        std::fs::write(
            &file,
            format!(
                "{header}f,1,{p1},2,1200,1300,1400\nf,0,{p0},0,0,0,10\nf,1,{p0},0,1000,1000,1010\n"
            ),
        )
        .unwrap();
        let got = hop_records(&sc, &dir).unwrap().unwrap();
        let want = format!(
            "{}\
             ,f,0,0,h1,{p0},0,0,0,10\n,f,1,0,h1,{p0},0,1000,1000,1010\n,f,1,1,s1,{p1},2,1200,1300,1400\n",
            latnet_sim::results::HOPS_CSV_HEADER
        );
        assert_eq!(got, want);
        // the hop is the rank among the packet's transmissions, not the FIB's: a packet sent on
        // by s1 toward h1 (as a source route might) is at hop 1 there
        let back = topo.fib[1][0];
        std::fs::write(
            &file,
            format!("{header}f,2,{back},0,2200,2200,2300\nf,2,{p0},0,2000,2000,2010\n"),
        )
        .unwrap();
        let got = hop_records(&sc, &dir).unwrap().unwrap();
        assert!(
            got.ends_with(&format!(
                ",f,2,0,h1,{p0},0,2000,2000,2010\n,f,2,1,s1,{back},0,2200,2200,2300\n"
            )),
            "{got}"
        );
        let err = |text: String| {
            std::fs::write(&file, text).unwrap();
            hop_records(&sc, &dir).unwrap_err().to_string()
        };
        let e = err(format!("{header}f,0,{p0},0,0,0,10\nf,x,{p0},0,0,0,10\n"));
        assert!(e.ends_with("hops-s1.csv:3: seq: expected an integer, got \"x\""), "{e}");
        let e = err(format!("{header}g,0,{p0},0,0,0,10\n"));
        assert!(e.ends_with(":2: flow: no flow named \"g\""), "{e}");
        let e = err(format!("{header}f,0,99,0,0,0,10\n"));
        assert!(e.ends_with(":2: port: 99 is not a port of the topology"), "{e}");
        let e = err(format!("{header}f,0,{p0},256,0,0,10\n"));
        assert!(e.ends_with(":2: priority: expected at most 255, got 256"), "{e}");
        let e = err(format!("{header}f,0,{p0},0\n"));
        assert!(e.contains(":2: expected 7 fields"), "{e}");
        let e = err("seq,flow\n".to_owned());
        assert!(e.contains(":1: expected the header"), "{e}");
        std::fs::remove_dir_all(&dir).unwrap();
    }

    /// A source-routed flow's per-hop summary follows the ports it left by, not the FIB: on
    /// two equal paths from s1 to s4 the tags choose the one the FIB does not, and the rows
    /// are the simulator's, each with the latency measured at its port.
    #[test]
    fn hop_summaries_follow_the_route_the_flow_took() {
        let sc = Scenario::from_str_named(
            "diamond.toml",
            &format!(
                "[sim]\nduration = \"10ms\"\n[defaults.link]\nrate = \"1Gbps\"\n\
                 [[nodes]]\nname = \"h1\"\nkind = \"host\"\n\
                 [[nodes]]\nname = \"h2\"\nkind = \"host\"\n{}\
                 [[links]]\na = \"h1\"\nb = \"s1\"\n[[links]]\na = \"s1\"\nb = \"s2\"\n\
                 [[links]]\na = \"s1\"\nb = \"s3\"\n[[links]]\na = \"s2\"\nb = \"s4\"\n\
                 [[links]]\na = \"s3\"\nb = \"s4\"\n[[links]]\na = \"s4\"\nb = \"h2\"\n\
                 [[flows]]\nname = \"f\"\nsrc = \"h1\"\ndst = \"h2\"\nsize = 500\n\
                 count = 10\ntags = [20, 10, 20]\n\
                 traffic = {{ kind = \"cbr\", rate = \"10Mbps\" }}\n",
                ["s1", "s2", "s3", "s4"]
                    .map(|s| format!(
                        "[[nodes]]\nname = \"{s}\"\nkind = \"switch\"\n\
                         forwarding = {{ kind = \"tag-stack\" }}\n"
                    ))
                    .concat()
            ),
        )
        .unwrap();
        let topo = latnet_sim::net::Topology::build(&sc);
        let name = |n: usize| sc.nodes[n].name.as_str();
        let fib: Vec<_> = topo.path(0, 1).unwrap().into_iter().map(name).collect();
        assert_eq!(fib, ["h1", "s1", "s2", "s4", "h2"]);
        let sim = latnet_sim::Simulator::new(sc.clone()).run();
        let route: Vec<_> =
            sim.flows[0].hops.iter().map(|h| (h.node.clone(), h.toward.clone())).collect();
        assert_eq!(route[1], ("s1".to_owned(), "s3".to_owned()), "{route:?}");
        // each port's measurement where the run would have it: at its switch, or at the switch
        // emulating the host's NIC; hop k measured k us
        let dir = std::env::temp_dir().join(format!("latnet-emu-route-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        for s in ["s1", "s2", "s3", "s4"] {
            let core = SwitchCore::new(&sc, s).unwrap();
            let mut st = SwitchStats::collect(&sc, &core, RunnerCounters::default(), true);
            for (k, (node, toward)) in route.iter().enumerate() {
                let g = (0..topo.ports.len())
                    .find(|&g| {
                        name(topo.ports[g].node) == node && name(topo.ports[g].peer) == toward
                    })
                    .unwrap();
                if node == s || (node == "h1" && s == "s1") {
                    let mut l = LatencyStats::new();
                    l.record(k as u64 * 1000);
                    let latency_ns = l.summary().unwrap();
                    st.flows[0].hops.push(crate::stats::PortLatency { port: g, latency_ns });
                }
            }
            st.write(&dir.join(format!("switch-{s}.json"))).unwrap();
        }
        let res = collect(&sc, &dir, 10_000_000);
        std::fs::remove_dir_all(&dir).unwrap();
        let hops: Vec<_> = res.unwrap().flows[0]
            .hops
            .iter()
            .map(|h| ((h.node.clone(), h.toward.clone()), h.latency_ns.map(|l| l.max)))
            .collect();
        let want: Vec<_> =
            route.iter().enumerate().map(|(k, r)| (r.clone(), Some(k as u64 * 1000))).collect();
        assert_eq!(hops, want);
    }
}
