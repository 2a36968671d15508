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
//! TCP flows (`tcp-bulk`, on Linux's TCP: [`crate::tcpflow`]) have the simulator's `tcp`
//! summary and time-series rows, from their senders' `TCP_INFO` samples and the bytes their
//! receivers read; what Linux keeps no per-connection count of is `None`. Their `sent` and
//! `received` count data segments (the sender's, retransmissions included, and the
//! receiver's), their throughput frames as the simulator's does (the bytes read plus the
//! headers of each data segment received); they have no latency (their segments carry no
//! stamp).
//!
//! Latency-Based Forwarding (`lbf`): the switches' forwarder counters and late notifications
//! (timed from the run's time zero), the senders' damper violations counted where their queues
//! are emulated, drops by reason per flow, and the receivers' count of early / on-time / late
//! packets. That count compares the measured latency (physical, application to application)
//! with the flow's bounds, whatever convention the switches computed their budgets under, and
//! reads the late flag from each packet's block as it arrived (`packets-<flow>.csv`, `late`).

use crate::stats::SwitchStats;
use crate::tcpflow::FRAME_OVERHEAD;
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
    let mut timeseries = Vec::new();
    for (i, f) in sc.flows.iter().enumerate() {
        let mut slo = LbfFlowResult::new(f);
        let report = read_json::<SendReport>(&dir.join(format!("send-{}.json", f.name)))?;
        let sent = report.as_ref().map_or(0, |s| s.sent);
        let tcp_sent = report.as_ref().and_then(|r| r.tcp.clone());
        senders.extend(report.map(|r| EmulatedSender {
            flow: r.flow,
            // (a TCP flow's scheduled sends are its connections' starts)
            sent: match &r.tcp {
                Some(t) if !t.conns.is_empty() => t.conns.len() as u64,
                Some(_) => 1,
                None => r.sent,
            },
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
        let tcp = tcp_sent.as_ref().map(|t| tcp::summary(f, t, r.tcp.as_ref()));
        if let (Some(t), Some(every)) = (&tcp_sent, sc.output.timeseries) {
            timeseries.extend(tcp::series(i, every.as_nanos().max(1), t, r.tcp.as_ref()));
        }
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
            throughput_bps: match (&tcp_sent, r.tcp.as_ref()) {
                // frames, as the simulator counts them: the bytes read and the headers of every
                // data segment received, from the start to the last byte read
                (Some(t), Some(rt)) => {
                    let frames = rt.bytes + rt.data_segs_in * u64::from(FRAME_OVERHEAD);
                    let active = rt.last_ns.saturating_sub(t.t0_ns + f.start.as_nanos());
                    if active == 0 {
                        0.0
                    } else {
                        frames as f64 * 8e9 / active as f64
                    }
                }
                (Some(_), None) => 0.0,
                (None, _) if active_ns == 0 => 0.0,
                (None, _) => r.rx_bytes as f64 * 8.0 / (active_ns as f64 / 1e9),
            },
            tcp,
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
        timeseries: {
            timeseries.sort_by_key(|r| (r.t_ns, r.flow));
            timeseries
        },
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
            rx_stamp_ahead: s.rx_stamp_ahead,
            rx_stamp_ahead_max_ns: s.rx_stamp_ahead_max_ns,
            rx_in_loop: s.rx_in_loop,
            rx_in_loop_absorbed_max_ns: s.rx_in_loop_absorbed_max_ns,
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
        // (a TCP flow's segments are read as a byte stream: no arrival stamps to be late on)
        .filter(|r| r.tcp.is_none())
        .map(|r| EmulatedReceiver {
            flow: r.flow.clone(),
            received: r.received,
            stamped: r.stamped,
            read_late_100us: r.read_late_100us,
            read_late_max_ns: r.read_late_max_ns,
            stamp_ahead: r.stamp_ahead,
            stamp_ahead_max_ns: r.stamp_ahead_max_ns,
        })
        .collect();
    EmulationReport { late_max_ns, switches, senders, receivers }
}

mod tcp;
#[cfg(test)]
mod tests;
