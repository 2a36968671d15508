//! From the file as written to a [`Scenario`]: every reference resolved, every value checked,
//! each error naming the file, the key and what was expected.

use super::raw::*;
use super::*;

impl Scenario {
    /// Read and validate a scenario file.
    pub fn from_file(path: &Path) -> Result<Scenario, ScenarioError> {
        let file = path.display().to_string();
        let src = std::fs::read_to_string(path).map_err(|e| ScenarioError {
            file: file.clone(),
            line_col: None,
            key: None,
            message: format!("cannot read the file: {e}"),
        })?;
        let stem = path.file_stem().map(|s| s.to_string_lossy().into_owned());
        Self::parse(&file, &src, stem)
    }

    /// Parse and validate scenario text; `file` names it in errors.
    pub fn from_str_named(file: &str, src: &str) -> Result<Scenario, ScenarioError> {
        Self::parse(file, src, None)
    }

    fn parse(file: &str, src: &str, stem: Option<String>) -> Result<Scenario, ScenarioError> {
        let cx = ErrCtx { file, src };
        let k = peek_dilation(cx, src)?;
        latnet_units::with_dilation(u64::from(k), || {
            let raw: Raw = toml::from_str(src).map_err(|e| cx.toml_error(&e))?;
            let sc = validate(cx, raw, stem)?;
            check_dilation(cx, &sc)?;
            Ok(sc)
        })
    }

    /// Index of the node with this name.
    pub fn node_index(&self, name: &str) -> Option<usize> {
        self.nodes.iter().position(|n| n.name == name)
    }

    /// Whether node `peer` acts on a frame only once it has all of it (one serialization after
    /// its first bit): under store-and-forward always, under cut-through when it is a host.
    pub fn receives_whole_frames(&self, peer: usize) -> bool {
        self.sim.switching == Switching::StoreAndForward
            || self.nodes.get(peer).is_some_and(|n| n.kind == NodeKind::Host)
    }
}

fn build_check(
    cx: ErrCtx<'_>,
    q: &Spanned<QueueSpec>,
    key: String,
) -> Result<QueueSpec, ScenarioError> {
    q.get_ref().build().map_err(|e| cx.at(Some(q.span()), key, e.to_string()))?;
    Ok(q.get_ref().clone())
}

fn check_loss(cx: ErrCtx<'_>, l: &Spanned<f64>, key: String) -> Result<f64, ScenarioError> {
    let v = *l.get_ref();
    if !(0.0..1.0).contains(&v) {
        return Err(cx.at(
            Some(l.span()),
            key,
            format!("expected a probability in [0, 1), got {v}"),
        ));
    }
    Ok(v)
}

/// A dilated scenario (`[sim] dilation` above 1) must be one that runs the same, only slower:
/// every time-dependent parameter a duration or a rate. Refused: TCP flows (the kernel's
/// stack and latnet's model keep timers of their own), the queue kinds with rates or gains
/// written as plain numbers (`htb`'s default burst, the AQMs, `fq`), large-flow counters
/// (TCP's) and packet captures (their stamps would be in dilated time).
fn check_dilation(cx: ErrCtx<'_>, sc: &Scenario) -> Result<(), ScenarioError> {
    if sc.sim.dilation == 1 {
        return Ok(());
    }
    let refuse = |key: String, what: &str| {
        Err(cx.at(
            None,
            key,
            format!("{what} cannot be dilated (sim.dilation = {})", sc.sim.dilation),
        ))
    };
    for (i, l) in sc.links.iter().enumerate() {
        for (q, side) in [(&l.queue_ab, "a"), (&l.queue_ba, "b")] {
            if !matches!(
                q,
                QueueSpec::Fifo { .. }
                    | QueueSpec::Priority { .. }
                    | QueueSpec::Lbf { .. }
                    | QueueSpec::LbfSlack { .. }
                    | QueueSpec::LbfDynamic { .. }
                    | QueueSpec::StepCe { .. }
            ) {
                let what = "a queue (here or from `defaults.queue`) other than fifo, priority, \
                            lbf, lbf-slack, lbf-dynamic or step-ce";
                return refuse(format!("links[{i}].queue_{side}"), what);
            }
        }
    }
    for (i, f) in sc.flows.iter().enumerate() {
        if matches!(f.traffic, TrafficSpec::TcpBulk(_) | TrafficSpec::TcpRr(_)) {
            return refuse(format!("flows[{i}].traffic"), "a TCP flow");
        }
    }
    for (i, n) in sc.nodes.iter().enumerate() {
        if n.large_flows.is_some() {
            return refuse(format!("nodes[{i}].large_flows"), "a large-flow counter");
        }
    }
    if sc.output.pcap {
        return refuse("output.pcap".to_owned(), "a packet capture");
    }
    Ok(())
}

/// The nodes a frame from host `src` can reach over the links (`adj`: each node's neighbours):
/// through switches only (hosts do not forward), whatever the routes say.
fn reachable(nodes: &[NodeSpec], adj: &[Vec<usize>], src: usize) -> Vec<bool> {
    let mut seen = vec![false; nodes.len()];
    seen[src] = true;
    let mut next = vec![src];
    while let Some(n) = next.pop() {
        if n != src && nodes[n].kind != NodeKind::Switch {
            continue;
        }
        for &to in &adj[n] {
            if !seen[to] {
                seen[to] = true;
                next.push(to);
            }
        }
    }
    seen
}

/// Why `name` (a node's or a flow's) cannot be part of a file name, which outputs make of it
/// (`pcap/NODE-PEER.pcap`, an emulated run's `packets-FLOW.csv`, `switch-NODE.json`).
fn not_a_file_name(name: &str) -> Option<String> {
    let bad =
        name.contains('/') || name.chars().any(char::is_control) || name == "." || name == "..";
    bad.then(|| {
        format!(
            "expected a name without '/' or control characters, and not . or .. (outputs are \
             named after it), got {name:?}"
        )
    })
}

fn validate(cx: ErrCtx<'_>, raw: Raw, stem: Option<String>) -> Result<Scenario, ScenarioError> {
    let duration = *raw.sim.duration.get_ref();
    if duration.is_zero() {
        return Err(cx.at(
            Some(raw.sim.duration.span()),
            "sim.duration",
            "expected a duration above zero",
        ));
    }
    let sim = SimConfig {
        duration,
        drain: raw.sim.drain.unwrap_or(latnet_units::dilated_default(Duration::from_secs(1))),
        seed: raw.sim.seed,
        tie_break: raw.sim.tie_break,
        latency: raw.sim.latency,
        routing: raw.sim.routing,
        switching: raw.sim.switching,
        dilation: raw.sim.dilation.as_ref().map_or(1, |d| *d.get_ref()),
    };
    let default_queue = match &raw.defaults.queue {
        Some(q) => build_check(cx, q, "defaults.queue".into())?,
        None => QueueSpec::default(),
    };
    let link_defaults = raw.defaults.link.unwrap_or_default();
    let tcp_defaults = match &raw.defaults.tcp {
        Some(t) => Some((tcp_defaults(cx, t)?, t.span())),
        None => None,
    };
    let pipelines = pipeline::validate(cx, &raw.pipelines)?;

    // nodes
    let mut index: HashMap<String, usize> = HashMap::new();
    let mut nodes = Vec::with_capacity(raw.nodes.len());
    let mut node_queue = Vec::with_capacity(raw.nodes.len());
    let mut addrs: HashMap<Ipv4Addr, usize> = HashMap::new();
    if raw.nodes.is_empty() {
        return Err(cx.at(None, "nodes", "expected at least one [[nodes]] entry"));
    }
    for (i, n) in raw.nodes.iter().enumerate() {
        let name = n.name.get_ref().trim().to_owned();
        if name.is_empty() {
            return Err(cx.at(
                Some(n.name.span()),
                format!("nodes[{i}].name"),
                "expected a non-empty name",
            ));
        }
        if let Some(why) = not_a_file_name(&name) {
            return Err(cx.at(Some(n.name.span()), format!("nodes[{i}].name"), why));
        }
        if index.insert(name.clone(), i).is_some() {
            return Err(cx.at(
                Some(n.name.span()),
                format!("nodes[{i}].name"),
                format!("duplicate node name {name:?}"),
            ));
        }
        let address = match &n.address {
            Some(a) => a.get_ref().parse::<Ipv4Addr>().map_err(|_| {
                cx.at(
                    Some(a.span()),
                    format!("nodes[{i}].address"),
                    format!("expected an IPv4 address such as \"10.0.0.1\", got {:?}", a.get_ref()),
                )
            })?,
            None => default_address(i),
        };
        if let Some(prev) = addrs.insert(address, i) {
            let span = n.address.as_ref().map(Spanned::span).unwrap_or(n.name.span());
            return Err(cx.at(
                Some(span),
                format!("nodes[{i}].address"),
                format!(
                    "address {address} is already used by node {:?}",
                    raw.nodes[prev].name.get_ref()
                ),
            ));
        }
        node_queue.push(match &n.queue {
            Some(q) => Some(build_check(cx, q, format!("nodes[{i}].queue"))?),
            None => None,
        });
        let pipeline = match &n.pipeline {
            None => None,
            Some(p) => {
                let want = p.get_ref().trim();
                let found = pipelines.iter().position(|q| q.name == want);
                if n.kind != NodeKind::Switch || found.is_none() {
                    let known: Vec<&str> = pipelines.iter().map(|q| q.name.as_str()).collect();
                    return Err(cx.at(
                        Some(p.span()),
                        format!("nodes[{i}].pipeline"),
                        format!(
                            "expected a switch and the name of a [[pipelines]] entry, got {want:?} (pipelines: {})",
                            known.join(", ")
                        ),
                    ));
                }
                found
            }
        };
        let forwarding = match &n.forwarding {
            None => ForwardingSpec::default(),
            Some(f) if n.kind == NodeKind::Host => {
                return Err(cx.at(
                    Some(f.span()),
                    format!("nodes[{i}].forwarding"),
                    "only switches have a forwarding model (hosts send by their FIB)",
                ))
            }
            Some(f) => match *f.get_ref() {
                ForwardingSpec::TagStack { base: 0 } => {
                    return Err(cx.at(
                        Some(f.span()),
                        format!("nodes[{i}].forwarding.base"),
                        "expected a tag base of at least 1 (tag = base x port + queue)",
                    ))
                }
                spec => spec,
            },
        };
        if let (Some(_), Some(f)) = (pipeline, &n.forwarding) {
            return Err(cx.at(
                Some(f.span()),
                format!("nodes[{i}].forwarding"),
                "a switch has either a `pipeline` or a `forwarding` model, not both",
            ));
        }
        let large_flows = match &n.large_flows {
            None => None,
            Some(c) if n.kind == NodeKind::Switch && c.get_ref().max_flows > 0 => {
                Some(*c.get_ref())
            }
            Some(c) => {
                return Err(cx.at(
                    Some(c.span()),
                    format!("nodes[{i}].large_flows"),
                    "expected on a switch, with `max_flows` of at least 1",
                ))
            }
        };
        nodes.push(NodeSpec { name, kind: n.kind, address, pipeline, forwarding, large_flows });
    }
    let lookup = |s: &Spanned<String>, key: String| -> Result<usize, ScenarioError> {
        index.get(s.get_ref().trim()).copied().ok_or_else(|| {
            let mut known: Vec<_> = nodes.iter().map(|n| n.name.as_str()).collect();
            known.truncate(12);
            cx.at(
                Some(s.span()),
                key,
                format!("unknown node {:?} (nodes: {})", s.get_ref(), known.join(", ")),
            )
        })
    };

    // links
    let mut links = Vec::with_capacity(raw.links.len());
    for (i, l) in raw.links.iter().enumerate() {
        let a = lookup(&l.a, format!("links[{i}].a"))?;
        let b = lookup(&l.b, format!("links[{i}].b"))?;
        if a == b {
            return Err(cx.at(
                Some(l.b.span()),
                format!("links[{i}].b"),
                "a link must join two different nodes",
            ));
        }
        let rate_s = l.rate.as_ref().or(link_defaults.rate.as_ref()).ok_or_else(|| {
            cx.at(
                Some(l.a.span()),
                format!("links[{i}].rate"),
                "missing rate (set it here or in [defaults.link])",
            )
        })?;
        let rate = *rate_s.get_ref();
        if rate.is_zero() {
            return Err(cx.at(
                Some(rate_s.span()),
                format!("links[{i}].rate"),
                "expected a rate above zero",
            ));
        }
        let loss = match l.loss.as_ref().or(link_defaults.loss.as_ref()) {
            Some(v) => check_loss(cx, v, format!("links[{i}].loss"))?,
            None => 0.0,
        };
        let side = |q: &Option<Spanned<QueueSpec>>,
                    node: usize,
                    key: &str|
         -> Result<QueueSpec, ScenarioError> {
            match q.as_ref().or(l.queue.as_ref()) {
                Some(q) => build_check(cx, q, format!("links[{i}].{key}")),
                None => Ok(node_queue[node].clone().unwrap_or_else(|| default_queue.clone())),
            }
        };
        links.push(LinkSpec {
            a,
            b,
            rate,
            delay: l.delay.or(link_defaults.delay).unwrap_or(Duration::ZERO),
            loss,
            overhead: l.overhead.or(link_defaults.overhead).unwrap_or(0),
            queue_ab: side(&l.queue_a, a, "queue_a")?,
            queue_ba: side(&l.queue_b, b, "queue_b")?,
        });
    }

    // routes
    let adjacent =
        |x: usize, y: usize| links.iter().any(|l| (l.a == x && l.b == y) || (l.a == y && l.b == x));
    let mut routes = Vec::with_capacity(raw.routes.len());
    for (i, r) in raw.routes.iter().enumerate() {
        let node = lookup(&r.node, format!("routes[{i}].node"))?;
        let dst = lookup(&r.dst, format!("routes[{i}].dst"))?;
        let next = lookup(&r.next, format!("routes[{i}].next"))?;
        if nodes[dst].kind != NodeKind::Host {
            return Err(cx.at(Some(r.dst.span()), format!("routes[{i}].dst"), "expected a host"));
        }
        if !adjacent(node, next) {
            return Err(cx.at(
                Some(r.next.span()),
                format!("routes[{i}].next"),
                format!("{:?} is not a neighbour of {:?}", nodes[next].name, nodes[node].name),
            ));
        }
        routes.push(RouteSpec { node, dst, next });
    }

    // flows
    let mut flows = Vec::with_capacity(raw.flows.len());
    let mut flow_names: HashMap<String, usize> = HashMap::new();
    let mut reach: HashMap<usize, Vec<bool>> = HashMap::new(); // per source host
    let mut adj = vec![Vec::new(); nodes.len()]; // each node's neighbours over the links
    for l in &links {
        adj[l.a].push(l.b);
        adj[l.b].push(l.a);
    }
    let mut warnings = Vec::new();
    let mut tcp_listeners: HashMap<(usize, u16), usize> = HashMap::new();
    for (i, f) in raw.flows.iter().enumerate() {
        let key = |k: &str| format!("flows[{i}].{k}");
        let name =
            f.name.as_ref().map_or_else(|| format!("f{i}"), |n| n.get_ref().trim().to_owned());
        if let Some(why) = not_a_file_name(&name) {
            return Err(cx.at(f.name.as_ref().map(Spanned::span), key("name"), why));
        }
        if flow_names.insert(name.clone(), i).is_some() {
            let span = f.name.as_ref().map(Spanned::span);
            return Err(cx.at(span, key("name"), format!("duplicate flow name {name:?}")));
        }
        let src = lookup(&f.src, key("src"))?;
        let dst = lookup(&f.dst, key("dst"))?;
        for (idx, s, k) in [(src, &f.src, "src"), (dst, &f.dst, "dst")] {
            if nodes[idx].kind != NodeKind::Host {
                return Err(cx.at(
                    Some(s.span()),
                    key(k),
                    format!("{:?} is a switch; flows start and end at hosts", nodes[idx].name),
                ));
            }
        }
        if src == dst {
            return Err(cx.at(
                Some(f.dst.span()),
                key("dst"),
                "source and destination are the same host",
            ));
        }
        if !reach.entry(src).or_insert_with(|| reachable(&nodes, &adj, src))[dst] {
            warnings.push(cx.at(
                Some(f.dst.span()),
                key("dst"),
                format!(
                    "no path from {:?} to {:?} over the links (through switches): every packet \
                     is dropped as no-route",
                    nodes[src].name, nodes[dst].name
                ),
            ));
        }
        let priority = match &f.priority {
            Some(p) if *p.get_ref() > 7 => {
                return Err(cx.at(
                    Some(p.span()),
                    key("priority"),
                    "expected 0 (highest) to 7 (best effort)",
                ))
            }
            Some(p) => *p.get_ref(),
            None => BEST_EFFORT,
        };
        let size = *f.size.get_ref();
        if !(MIN_FRAME..=MAX_FRAME).contains(&size) {
            return Err(cx.at(Some(f.size.span()), key("size"), format!("expected a frame length in bytes from {MIN_FRAME} (Ethernet + IPv4 + UDP headers) to {MAX_FRAME}, got {size}")));
        }
        let check_stack = |v: &[u16], span: std::ops::Range<usize>, what: String| {
            if v.len() > latnet_wire::MAX_TAGS {
                return Err(cx.at(
                    Some(span),
                    what,
                    format!("expected at most {} tags, got {}", latnet_wire::MAX_TAGS, v.len()),
                ));
            }
            if let Some(bad) = v.iter().find(|&&x| x > 4095) {
                return Err(cx.at(
                    Some(span),
                    what,
                    format!("expected 802.1Q VIDs from 0 to 4095, got {bad}"),
                ));
            }
            let need = MIN_FRAME + 4 * v.len() as u32;
            if size < need {
                return Err(cx.at(
                    Some(f.size.span()),
                    key("size"),
                    format!(
                        "expected at least {need} bytes: headers plus 4 bytes per tag, got {size}"
                    ),
                ));
            }
            Ok(())
        };
        let tags = match &f.tags {
            None => Vec::new(),
            Some(t) => {
                check_stack(t.get_ref(), t.span(), key("tags"))?;
                t.get_ref().clone()
            }
        };
        let mut retag: Vec<Retag> = Vec::new();
        if let Some(r) = &f.retag {
            if f.tags.is_none() {
                return Err(cx.at(
                    Some(r.span()),
                    key("retag"),
                    "`retag` changes a flow's `tags` stack; give the flow its first `tags`",
                ));
            }
            for (j, e) in r.get_ref().iter().enumerate() {
                check_stack(&e.tags, r.span(), format!("{}[{j}].tags", key("retag")))?;
                if retag.last().is_some_and(|p| p.at >= e.at) {
                    return Err(cx.at(
                        Some(r.span()),
                        format!("{}[{j}].at", key("retag")),
                        format!(
                            "expected instants in increasing order, got {} after {}",
                            e.at,
                            retag.last().map_or(Time::ZERO, |p| p.at)
                        ),
                    ));
                }
                retag.push(Retag { at: e.at, tags: e.tags.clone() });
            }
        }
        let start = f.start.unwrap_or(Time::ZERO);
        let stop_limit = Time::from_duration(duration);
        let stop = f.stop.as_ref().map_or(stop_limit, |s| (*s.get_ref()).min(stop_limit));
        if start >= stop_limit {
            // (the start is what is wrong, whatever the stop: `--set sim.duration=...`)
            let span = f.name.as_ref().map(Spanned::span);
            return Err(cx.at(
                span,
                key("start"),
                format!("expected a start before sim.duration ({duration}), got {start}"),
            ));
        }
        if stop <= start {
            let span = f.stop.as_ref().map(Spanned::span);
            return Err(cx.at(span, key("stop"), format!("expected stop after start ({start})")));
        }
        f.traffic
            .get_ref()
            .validate(size)
            .map_err(|m| cx.at(Some(f.traffic.span()), key("traffic"), m))?;
        let mut traffic = f.traffic.get_ref().clone();
        if let (Some((d, span)), Some(t)) = (&tcp_defaults, traffic.tcp_mut()) {
            t.fill_from(d);
            traffic.validate(size).map_err(|m| {
                let msg = format!("as applied to flows[{i}] ({name}): {m}");
                cx.at(Some(span.clone()), "defaults.tcp", msg)
            })?;
        }
        large_flow::check(cx, i, f.traffic.span(), &traffic, src, &nodes, &links)?;
        let slo = match &f.slo {
            Some(s) => Some(lbf::validate_slo(cx, s, key("slo"), size)?),
            None => None,
        };
        if let (Some(_), Some(t)) = (&slo, &f.tags) {
            return Err(cx.at(
                Some(t.span()),
                key("tags"),
                "a flow carries either an LBF `slo` block or a `tags` stack, not both",
            ));
        }
        if let (Some(_), Some(t)) = (f.traffic.get_ref().tcp(), &f.tags) {
            return Err(cx.at(
                Some(t.span()),
                key("tags"),
                "tag stacks apply to packet sources (cbr, onoff, poisson, token-bucket), not TCP",
            ));
        }
        if let (Some(_), Some(s)) = (f.traffic.get_ref().tcp(), &f.slo) {
            return Err(cx.at(
                Some(s.span()),
                key("slo"),
                "an LBF `slo` rides on packet sources (cbr, onoff, poisson, token-bucket); \
                 TCP segments carry no LBF block",
            ));
        }
        if let (Some(_), Some(j)) = (f.traffic.get_ref().tcp(), &f.jitter) {
            return Err(cx.at(
                Some(j.span()),
                key("jitter"),
                "jitter applies to packet sources (cbr, onoff, poisson, token-bucket), not TCP",
            ));
        }
        let dst_port = f.dst_port.unwrap_or(20_000u16.wrapping_add(i as u16));
        if f.traffic.get_ref().tcp().is_some() {
            if f.count.is_some() {
                return Err(cx.at(
                    Some(f.traffic.span()),
                    key("count"),
                    "`count` limits packet sources; a TCP flow sends `bytes` (tcp-bulk) or \
                     `requests` (tcp-rr)",
                ));
            }
            if let Some(j) = tcp_listeners.insert((dst, dst_port), i) {
                return Err(cx.at(
                    Some(f.dst.span()),
                    key("dst_port"),
                    format!(
                        "flows[{j}] already listens on {:?} port {dst_port}; give this TCP flow \
                         another `dst_port`",
                        nodes[dst].name
                    ),
                ));
            }
        }
        flows.push(FlowSpec {
            name,
            src,
            dst,
            priority,
            size,
            start,
            stop,
            count: f.count,
            src_port: f.src_port.unwrap_or(10_000u16.wrapping_add(i as u16)),
            dst_port,
            traffic,
            jitter: f.jitter.as_ref().map_or(Duration::ZERO, |j| *j.get_ref()),
            slo,
            tags,
            retag,
        });
    }
    let node_lbf: Vec<_> = raw.nodes.iter().map(|n| n.lbf.as_ref()).collect();
    let lbf = lbf::validate(cx, raw.lbf.as_ref(), &node_lbf, &nodes, &index)?;
    lbf::check_queues(cx, &links, &nodes, lbf.as_ref())?;
    if raw.output.queues.is_some_and(|q| q.is_zero()) {
        return Err(cx.at(
            None,
            "output.queues",
            "expected an interval above zero (leave `queues` out for no queue series)",
        ));
    }

    let slo_spans: Vec<_> = raw.flows.iter().map(|f| f.slo.as_ref().map(Spanned::span)).collect();
    let sc = Scenario {
        name: raw.name.or(stem).unwrap_or_else(|| "scenario".to_owned()),
        description: raw.description,
        sim,
        nodes,
        links,
        routes,
        flows,
        output: raw.output,
        pipelines,
        lbf,
        warnings,
    };
    lbf::check_damper_paths(cx, &sc, &slo_spans)?;
    Ok(sc)
}

/// `[defaults.tcp]`: connection settings for every TCP flow that leaves them out
/// ([`crate::tcp::app::TcpSpec::fill_from`]); a flow's congestion control and application keys
/// are its own.
fn tcp_defaults(
    cx: ErrCtx<'_>,
    t: &Spanned<toml::Table>,
) -> Result<crate::tcp::app::TcpSpec, ScenarioError> {
    use crate::tcp::app::PER_FLOW_KEYS;
    let span = Some(t.span());
    if let Some(k) = t.get_ref().keys().find(|k| PER_FLOW_KEYS.contains(&k.as_str())) {
        return Err(cx.at(
            span,
            format!("defaults.tcp.{k}"),
            format!(
                "`{k}` is set per flow, in its `traffic`; [defaults.tcp] takes connection \
                 settings only (not {})",
                PER_FLOW_KEYS.join(", ")
            ),
        ));
    }
    let spec: crate::tcp::app::TcpSpec = toml::Value::Table(t.get_ref().clone())
        .try_into()
        .map_err(|e: toml::de::Error| cx.at(span.clone(), "defaults.tcp", e.message()))?;
    Ok(spec)
}
