//! Building a [`Simulator`] from a validated scenario: the network, ports and queues, the
//! forwarders (FIB, pipelines, tag stacks, LBF), the flows' sources and seeded streams.

use super::*;

impl Simulator {
    /// Build the network of a validated scenario.
    pub fn new(sc: Scenario) -> Simulator {
        let topo = Topology::build(&sc);
        let seed = sc.sim.seed;
        let rng_for = |stream: u64| {
            let mut r = ChaCha8Rng::seed_from_u64(seed);
            r.set_stream(stream);
            r
        };
        let ports = topo
            .ports
            .iter()
            .enumerate()
            .map(|(i, p)| {
                let l = &sc.links[p.link];
                let spec = if p.node == l.a { &l.queue_ab } else { &l.queue_ba };
                PortState {
                    // Specs were validated when the scenario was; a failure here is a bug.
                    queue: spec
                        .build_seeded(seed ^ (STREAM_PORT + i as u64))
                        .unwrap_or_else(|e| panic!("validated queue spec: {e}")),
                    busy: false,
                    wake_at: None,
                    loss_threshold: (l.loss * 2f64.powi(64)) as u64,
                    rng: rng_for(STREAM_PORT + i as u64),
                    tx_packets: 0,
                    tx_bytes: 0,
                    busy_time: Duration::ZERO,
                    busy_until: Time::ZERO,
                    drops: DropCounters::default(),
                }
            })
            .collect();
        // Sizes and priorities were validated with the scenario: building cannot fail.
        // per flow its frame templates from the instant each applies, and its LBF offset
        let templates: Vec<(Templates, Option<usize>)> = sc
            .flows
            .iter()
            .map(|f| {
                let (src, dst) = (sc.nodes[f.src].address, sc.nodes[f.dst].address);
                let dscp = dscp_from_priority(f.priority);
                let (sp, dp, size) = (f.src_port, f.dst_port, f.size as usize);
                match &f.slo {
                    Some(slo) => {
                        crate::lbf::template(f.src, f.dst, src, dst, dscp, sp, dp, size, slo)
                            .map(|(t, o)| (vec![(Time::ZERO, t)], Some(o)))
                    }
                    // a tagged flow's size includes its tags (validated: no LBF block with
                    // tags), whichever stack it pushes
                    None => {
                        let tagged = |at: Time, tags: &[u16]| {
                            hdr::udp_template(
                                f.src,
                                f.dst,
                                src,
                                dst,
                                dscp,
                                sp,
                                dp,
                                size - 4 * tags.len(),
                            )
                            .and_then(|mut t| hdr::push_tags(&mut t, tags).map(|()| (at, t)))
                        };
                        std::iter::once(tagged(Time::ZERO, &f.tags))
                            .chain(f.retag.iter().map(|r| tagged(r.at, &r.tags)))
                            .collect::<Result<Vec<_>, _>>()
                            .map(|t| (t, None))
                    }
                }
                .unwrap_or_else(|e| panic!("validated flow {}: {e}", f.name))
            })
            .collect();
        let offsets: Vec<Option<usize>> = templates.iter().map(|t| t.1).collect();
        let lbf = LbfState::new(&sc, &topo, &offsets);
        let mut flows: Vec<FlowState> = sc
            .flows
            .iter()
            .zip(templates)
            .enumerate()
            .map(|(i, (f, (templates, _)))| {
                let source = Source::new(f.traffic.clone(), f.size, f.start).with_jitter(f.jitter);
                FlowState::new(source, rng_for(STREAM_FLOW + i as u64), templates)
            })
            .collect();
        // TCP flows: their servers' packets are accounted on hidden records after the flows.
        let (tcp, hidden) = tcp_glue::TcpState::new(&sc, rng_for);
        for (k, &i) in hidden.iter().enumerate() {
            let f = &sc.flows[i];
            let source = Source::new(f.traffic.clone(), f.size, f.start);
            let rng = rng_for(STREAM_FLOW + (sc.flows.len() + k) as u64);
            flows.push(FlowState::new(source, rng, Vec::new()));
        }
        let host_by_addr = sc
            .nodes
            .iter()
            .enumerate()
            .filter(|(_, n)| n.kind == NodeKind::Host)
            .flat_map(|(i, n)| crate::lbf::host_addresses(n.address).map(|a| (a, i)))
            .collect::<HashMap<_, _>>();
        let end = Time::from_duration(sc.sim.duration + sc.sim.drain);
        let log = sc.output.packets.then(PacketLog::default);
        let pcap = sc.output.pcap.then(|| vec![crate::pcap::new_capture(); topo.ports.len()]);
        // a scenario refuses a zero interval; one set by hand afterwards would sample forever
        let queues = sc
            .output
            .queues
            .filter(|iv| !iv.is_zero())
            .map(|iv| queue_series::QueueSeries::new(iv, topo.ports.len()));
        let node_drops = vec![DropCounters::default(); sc.nodes.len()];
        let forwarders = sc
            .nodes
            .iter()
            .enumerate()
            .map(|(i, n)| {
                (n.kind == NodeKind::Switch)
                    .then(|| crate::switch::forwarder_for(&sc, i, lbf.as_ref()))
            })
            .collect();
        let large_flows: Vec<_> = sc
            .nodes
            .iter()
            .map(|n| n.large_flows.map(latnet_dataplane::LargeFlowCounter::new))
            .collect();
        let mut sim = Simulator {
            large_flow_wake: vec![None; large_flows.len()],
            large_flows,
            sc,
            topo,
            events: EventQueue::new(),
            ports,
            flows,
            node_drops,
            forwarders,
            host_by_addr,
            now: Time::ZERO,
            end,
            next_id: 0,
            log,
            pcap,
            queues,
            lbf,
            tcp,
        };
        for i in 0..sim.sc.flows.len() {
            sim.schedule_next_emission(i);
        }
        if let Some(first) = sim.queues.as_ref().map(queue_series::QueueSeries::first_sample) {
            sim.events.schedule(first, 0, Event::QueueSample);
        }
        sim.tcp_init();
        sim
    }
}
