//! Building a [`SwitchCore`] for one switch node of a scenario: its interfaces, ports and
//! queues, its forwarder (the simulator's, LBF state and tag schedules included) and the
//! seeded emulation of each port's loss.

use super::*;

impl SwitchCore {
    /// The switch `node` of `sc`, with the scenario's conventions for interface names and MACs.
    /// Its clock and the senders' are one (see [`SwitchCore::new_at`]).
    pub fn new(sc: &Scenario, node: &str) -> Result<SwitchCore, CoreError> {
        Self::new_at(sc, node, 0)
    }

    /// As [`SwitchCore::new`], for a switch whose time zero is `clock_origin_ns` on the senders'
    /// clock (the runner: its start on `CLOCK_MONOTONIC`, which senders stamp into the LBF
    /// blocks of `carry = "timestamp"` flows).
    pub fn new_at(
        sc: &Scenario,
        node: &str,
        clock_origin_ns: u64,
    ) -> Result<SwitchCore, CoreError> {
        Self::new_timed(sc, node, clock_origin_ns, Duration::ZERO)
    }

    /// As [`SwitchCore::new_at`], for a switch started `run_start` before the experiment's time
    /// zero (the senders' `t0`): the dual-queue AQMs count their reporting epochs from there
    /// (see [`SwitchCore::aqm_report`]).
    pub fn new_timed(
        sc: &Scenario,
        node: &str,
        clock_origin_ns: u64,
        run_start: Duration,
    ) -> Result<SwitchCore, CoreError> {
        let n = sc.node_index(node).ok_or_else(|| CoreError::NoNode(node.to_owned()))?;
        if sc.nodes[n].kind != NodeKind::Switch {
            return Err(CoreError::NotSwitch(node.to_owned()));
        }
        let topo = Topology::build(sc);
        let rng_for = |stream: u64| {
            let mut r = ChaCha8Rng::seed_from_u64(sc.sim.seed);
            r.set_stream(stream);
            r
        };
        let make_port = |global: usize, role: Role| -> Result<EmuPort, CoreError> {
            let t = &topo.ports[global];
            let l = &sc.links[t.link];
            let spec = if t.node == l.a { &l.queue_ab } else { &l.queue_ba };
            // seeded as the simulator seeds it (random AQM decisions, PV marking)
            let queue = spec
                .with_epochs_after(run_start)
                .build_seeded(sc.sim.seed ^ (STREAM_PORT + global as u64))
                .map_err(|e| CoreError::Queue { port: global, msg: e.to_string() })?;
            Ok(EmuPort {
                global,
                role,
                queue,
                busy_until: Time::ZERO,
                stalled_until: Time::ZERO,
                delay_line: VecDeque::new(),
                joining: VecDeque::new(),
                whole: sc.receives_whole_frames(t.peer),
                loss_threshold: (l.loss * 2f64.powi(64)) as u64,
                rng: rng_for(STREAM_PORT + global as u64),
                tx_memo: (Bytes::new(u64::MAX), Duration::ZERO),
                tx_packets: 0,
                tx_bytes: 0,
                busy_time: Duration::ZERO,
                link_drops: DropCounters::default(),
            })
        };
        let mut ports = Vec::new();
        let mut ifaces = Vec::new();
        let mut port_of_global = vec![None; topo.ports.len()];
        for &p in &topo.node_ports[n] {
            let t = &topo.ports[p];
            let iface = ifaces.len();
            let egress = ports.len();
            port_of_global[p] = Some(egress);
            ports.push(make_port(p, Role::Egress { iface })?);
            let from_host = if sc.nodes[t.peer].kind == NodeKind::Host {
                ports.push(make_port(t.reverse, Role::FromHost { iface })?);
                Some(ports.len() - 1)
            } else {
                None
            };
            ifaces.push(Iface {
                name: crate::plan::iface_name(t.link),
                link: t.link,
                port: p,
                egress,
                from_host,
                local: t.local,
                mac: port_mac(p),
                peer_mac: port_mac(t.reverse),
                rx_frames: 0,
                rx_bytes: 0,
                tx_frames: 0,
                tx_bytes: 0,
            });
        }
        let hosts = sc
            .nodes
            .iter()
            .enumerate()
            .filter(|(_, s)| s.kind == NodeKind::Host)
            .flat_map(|(i, s)| latnet_sim::lbf::host_addresses(s.address).map(|a| (a, i)))
            .collect();
        let lbf = lbf_state(sc, &topo).map(|l| l.with_clock_origin(clock_origin_ns));
        // A flow is known by its protocol, its IPv4 addresses, or the IPv6 ones the simulator
        // gives its hosts when its SLO rides in a hop-by-hop option, and its ports (a TCP
        // flow: its data segments, from the client).
        let any_port_flows = sc
            .flows
            .iter()
            .any(|f| matches!(f.traffic, latnet_sim::traffic::TrafficSpec::TcpRr(_)));
        let flows = sc
            .flows
            .iter()
            .enumerate()
            .map(|(i, f)| {
                let key = FlowKey {
                    proto: match f.traffic.tcp() {
                        Some(_) => latnet_wire::protocol::TCP,
                        None => latnet_wire::protocol::UDP,
                    },
                    src: flow_address(sc, f, f.src),
                    dst: flow_address(sc, f, f.dst),
                    // a tcp-rr flow opens its connections from ephemeral ports: any
                    sport: match f.traffic {
                        latnet_sim::traffic::TrafficSpec::TcpRr(_) => 0,
                        _ => f.src_port,
                    },
                    dport: f.dst_port,
                };
                (key, i as FlowId)
            })
            .collect();
        let fwd = forwarder_for(sc, n, lbf.as_ref());
        let flow_payload_at = sc
            .flows
            .iter()
            .map(|f| match f.traffic.tcp() {
                Some(_) => None,
                None => crate::traffic::payload_prefix(sc, f).ok().map(|(p, _)| p.len()),
            })
            .collect();
        let hop_latency =
            (0..ports.len()).map(|_| sc.flows.iter().map(|_| None).collect()).collect();
        Ok(SwitchCore {
            node: n,
            topo,
            hosts,
            fwd,
            ifaces,
            ports,
            port_of_global,
            flows,
            any_port_flows,
            flow_tags: (0..sc.flows.len()).map(|i| tag_schedule(sc, i)).collect(),
            flow_payload_at,
            clock_origin_ns,
            hop_latency,
            flow_drops: vec![DropCounters::default(); sc.flows.len()],
            flow_forwarded: vec![0; sc.flows.len()],
            counters: Counters::default(),
            next_id: 0,
            pool: Vec::new(),
            lbf,
            large_flows: sc.nodes[n].large_flows.map(latnet_dataplane::LargeFlowCounter::new),
            large_flow_wake: None,
            touched: 0,
            touched_high: false,
            events: Vec::new(),
            run_start,
            run: {
                let zero = Time::ZERO + run_start;
                (zero, zero + sc.sim.duration + sc.sim.drain)
            },
            cut_through: !sc.receives_whole_frames(n),
            capture: None,
            queue_series: None,
            hop_log: None,
        })
    }
}

/// Flow `i`'s tag stacks, each with the sequence number of the first packet that carries it.
fn tag_schedule(sc: &Scenario, i: usize) -> Vec<(u64, Vec<u16>)> {
    let f = &sc.flows[i];
    let mut out = vec![(0, f.tags.clone())];
    if !f.retag.is_empty() {
        let mut emissions = crate::traffic::Emissions::new(sc, i).peekable();
        let mut seq = 0u64;
        for r in &f.retag {
            while emissions.next_if(|&t| t < r.at).is_some() {
                seq += 1;
            }
            out.push((seq, r.tags.clone()));
        }
    }
    out
}

/// The forwarding model of switch `n`, built exactly as the simulator builds it, but for a
/// pipeline's modelled processing cost: on real packets the real cost is paid, so neither the
/// modelled delay nor the modelled processor's overload drops apply.
pub fn forwarder_for(sc: &Scenario, n: usize, lbf: Option<&LbfState>) -> Forwarder {
    match sc.nodes[n].pipeline.map(|p| &sc.pipelines[p]) {
        Some(spec) if spec.processing.is_some() => {
            let spec = latnet_sim::scenario::PipelineSpec { processing: None, ..spec.clone() };
            let f = latnet_sim::pipeline_fwd::PipelineForwarder::new(&spec, sc.sim.seed);
            Forwarder::Pipeline(Box::new(f))
        }
        _ => latnet_sim::switch::forwarder_for(sc, n, lbf),
    }
}

/// Where each flow's LBF block sits in its frames (`None`: no SLO), from the simulator's
/// templates: the same offsets the senders' frames have.
pub fn lbf_offsets(sc: &Scenario) -> Vec<Option<usize>> {
    sc.flows.iter().map(|f| lbf_template(sc, f).map(|(_, o)| o)).collect()
}

/// The simulator's frame template (headers + LBF shim) of a flow with an SLO.
pub fn lbf_template(sc: &Scenario, f: &latnet_sim::scenario::FlowSpec) -> Option<(Vec<u8>, usize)> {
    let slo = f.slo.as_ref()?;
    let (src, dst) = (sc.nodes[f.src].address, sc.nodes[f.dst].address);
    let dscp = latnet_dataplane::packet::dscp_from_priority(f.priority);
    let (sp, dp, size) = (f.src_port, f.dst_port, f.size as usize);
    latnet_sim::lbf::template(f.src, f.dst, src, dst, dscp, sp, dp, size, slo).ok()
}

/// The simulator's LBF state for this scenario, if it uses LBF.
fn lbf_state(sc: &Scenario, topo: &Topology) -> Option<LbfState> {
    LbfState::new(sc, topo, &lbf_offsets(sc))
}
