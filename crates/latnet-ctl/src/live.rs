//! A live run's plan: traffic on the network a controller configures, and the requests to make
//! of the controller while it runs (`latnet chameleon live`). The controller (a running
//! service) decides paths, queues, tags and shapers; host agents program them into the hosts'
//! kernels; the traffic is latnet's own UDP senders, so every packet is timed and traced.
//!
//! A spec file holds:
//!
//! ```toml
//! [sim]                # duration (required), and drain, seed, dilation
//! duration = "300ms"
//! dilation = 10        # the testbed runs ten times slower than the controller's numbers
//!
//! [[flows]]            # the traffic, in scenario syntax (`latnet run`), between its hosts
//! name = "a"
//! src = "h2"
//! dst = "h3"
//! size = 1400
//! traffic = { kind = "token-bucket", rate = "400Mbps", burst = "1400B" }
//!
//! [[requests]]         # what to ask the controller, and when
//! flow = "a"
//! at = "0ms"           # from the traffic's start; at 0: before it starts
//! deadline = "50ms"    # end to end
//! remove_at = "250ms"  # optional: remove the flow then (its packets go best effort again)
//! # rate, burst: what to reserve (default: the flow's token bucket, or its constant rate and
//! # one frame, with room for the tags its source will push; the burst one frame more, the
//! # rate 2 % more)
//! ```
//!
//! Flows get their source and destination ports from the scenario (`src_port` / `dst_port`,
//! or the defaults `latnet run` gives), and a request's `match` names the flow's UDP
//! destination and source port. A flow with no request, or whose request is refused, follows
//! its source's best-effort route.
//!
//! **Room for the tags.** The controller reserves for frames as they cross the network, with
//! their tag stack; a flow's frames grow by 4 bytes per tag at its source, after the
//! application sent them. A request's default rate and burst are the flow's times
//! `(size + 4 n) / size`, where `n` is the most tags a path of this network can carry (its
//! switches, at most the tagger's 16), so the shaper, which counts tagged frames, passes a flow
//! that keeps to its own token bucket.
//!
//! **Room for the shaper.** The default burst is one tagged frame more than that, and the
//! default rate [`RATE_HEADROOM_PERCENT`] more. A host's shaper (HTB) holding a flow to exactly
//! what it sends keeps what the machine bunched for as long as the flow sends: a sender the
//! machine held back catches up by sending its late packets at once, and a shaper timer that
//! fires late finds a full bucket and loses the rest of its tokens; at exactly the flow's rate
//! the shaper drains nothing of that backlog. On the two-core test machine, flow b of Fig. 6
//! (700 Mbit/s of 1,400-byte frames, deadline 0.8 ms, ten times dilated) took up to 3.8, 12
//! and 21 ms in three runs with neither; with the frame of slack, up to 0.24-0.27 ms in three
//! runs, but up to 1.0 ms in a later one, waiting at its source (its backlog growing through
//! the last 60 ms of the run). The headroom drains a stall's backlog in 50 times the stall.

use crate::controller::Controller;
use crate::verify::{network_scenario, scenario_toml};
use latnet_sim::scenario::{Scenario, ScenarioError};
use latnet_sim::traffic::TrafficSpec;
use latnet_units::{Bytes, Duration, Rate};
use serde::Serialize;
use std::collections::BTreeMap;
use toml::{Table, Value};

/// How much more than the flow's rate (tags counted) a request reserves by default, in percent.
pub const RATE_HEADROOM_PERCENT: u128 = 2;

/// Most tags a source's tagger pushes (the host agent's limit: what the wire format reads).
pub const MAX_TAGS: u64 = crate::controller::WIRE_MAX_TAGS as u64;

/// One request of a live run, resolved.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct LiveRequest {
    /// The flow it reserves for.
    pub flow: String,
    /// When to make it (ns from the traffic's start, in the scenario's time).
    pub at_ns: u64,
    /// When to remove the flow again, if at all (ns, as `at_ns`).
    pub remove_at_ns: Option<u64>,
    /// Source host.
    pub src: String,
    /// Destination host.
    pub dst: String,
    /// Reserved rate (bit/s).
    pub rate_bps: u64,
    /// Reserved burst (bytes).
    pub burst_bytes: u64,
    /// End-to-end deadline (ns).
    pub deadline_ns: u64,
    /// Which packets are the flow's: `{"proto": "udp", "dst_port", "src_port"}`.
    #[serde(rename = "match")]
    pub flow_match: serde_json::Value,
}

/// A live run: the scenario to emulate and the requests to make.
#[derive(Debug, Clone, Serialize)]
pub struct LivePlan {
    /// The scenario (the controller's network with the spec's traffic), as file text.
    pub scenario: String,
    /// Sending time (ns, scenario time).
    pub duration_ns: u64,
    /// How many times slower the testbed runs.
    pub dilation: u64,
    /// Bytes per frame the requests' defaults allow for tags.
    pub tag_allowance_bytes: u64,
    /// The controller's tag base: a tag is `base × local port + queue`.
    pub tag_base: u16,
    /// Per switch, the scenario's (global) index of each of its ports by local number: the
    /// port a tag names, as `hops.csv` numbers it.
    pub ports: BTreeMap<String, Vec<usize>>,
    /// The requests, in the order to make them (by `at`, then as written).
    pub requests: Vec<LiveRequest>,
}

fn err(file: &str, key: impl Into<String>, message: impl Into<String>) -> ScenarioError {
    ScenarioError {
        file: file.to_owned(),
        line_col: None,
        key: Some(key.into()),
        message: message.into(),
    }
}

/// Read `spec` (the text of the file `file`) against the network `ctl` configures.
pub fn live_plan(ctl: &Controller, file: &str, spec: &str) -> Result<LivePlan, ScenarioError> {
    let mut root: Table =
        spec.parse().map_err(|e: toml::de::Error| ScenarioError::from_toml(file, spec, &e))?;
    for k in root.keys() {
        if !["sim", "flows", "requests", "output", "name", "description"].contains(&k.as_str()) {
            return Err(err(
                file,
                k.clone(),
                "unknown; a live spec has [sim], [[flows]], [[requests]] and [output] (the network \
                 is the controller's)",
            ));
        }
    }
    let requests = match root.remove("requests") {
        None => Vec::new(),
        Some(Value::Array(a)) => a,
        Some(_) => return Err(err(file, "requests", "expected an array of tables ([[requests]])")),
    };
    let sim = match root.remove("sim") {
        Some(Value::Table(t)) => t,
        Some(_) => return Err(err(file, "sim", "expected a table")),
        None => return Err(err(file, "sim.duration", "missing (how long the traffic runs)")),
    };
    for k in sim.keys() {
        if !["duration", "drain", "seed", "dilation"].contains(&k.as_str()) {
            return Err(err(
                file,
                format!("sim.{k}"),
                "unknown; a live spec sets duration, drain, seed and dilation (the rest is the \
                 controller's model: physical latency, store-and-forward)",
            ));
        }
    }
    let duration = match sim.get("duration") {
        Some(Value::String(s)) => {
            s.parse::<Duration>().map_err(|e| err(file, "sim.duration", e.to_string()))?
        }
        Some(_) => return Err(err(file, "sim.duration", "expected a duration such as \"300ms\"")),
        None => return Err(err(file, "sim.duration", "missing (how long the traffic runs)")),
    };
    if duration.is_zero() {
        return Err(err(file, "sim.duration", "expected a duration above zero"));
    }
    // the network, with the spec's traffic and [sim] keys
    let net = network_scenario(ctl, duration).map_err(|m| err(file, "network", m))?;
    let net_text = scenario_toml(&net).map_err(|m| err(file, "network", m))?;
    let mut merged: Table =
        net_text.parse().map_err(|e: toml::de::Error| err(file, "network", e.to_string()))?;
    merged.insert("name".into(), Value::String(file.trim_end_matches(".toml").to_owned()));
    if let Some(Value::Table(s)) = merged.get_mut("sim") {
        for (k, v) in sim {
            s.insert(k, v);
        }
    }
    for (k, v) in root {
        merged.insert(k, v);
    }
    let text = toml::to_string(&merged).map_err(|e| err(file, "network", e.to_string()))?;
    let sc = Scenario::from_str_named(file, &text).map_err(|mut e| {
        // the line would be one of the merged text's, not of the spec
        e.line_col = None;
        e
    })?;
    let switches =
        sc.nodes.iter().filter(|n| n.kind == latnet_sim::scenario::NodeKind::Switch).count();
    let allowance = 4 * (switches as u64).min(MAX_TAGS);
    let mut out = Vec::new();
    for (i, r) in requests.iter().enumerate() {
        let key = |k: &str| format!("requests[{i}].{k}");
        let Value::Table(t) = r else {
            return Err(err(file, format!("requests[{i}]"), "expected a table"));
        };
        for k in t.keys() {
            if !["flow", "at", "deadline", "rate", "burst", "remove_at"].contains(&k.as_str()) {
                return Err(err(
                    file,
                    key(k),
                    "unknown; expected flow, at, deadline, rate, burst, remove_at",
                ));
            }
        }
        let name = match t.get("flow") {
            Some(Value::String(s)) => s.clone(),
            _ => return Err(err(file, key("flow"), "missing (the name of a flow of [[flows]])")),
        };
        let f = sc
            .flows
            .iter()
            .find(|f| f.name == name)
            .ok_or_else(|| err(file, key("flow"), format!("no flow {name:?} in [[flows]]")))?;
        let dur = |k: &str| -> Result<Option<Duration>, ScenarioError> {
            match t.get(k) {
                None => Ok(None),
                Some(Value::String(s)) => s
                    .parse()
                    .map(Some)
                    .map_err(|e: latnet_units::ParseUnitError| err(file, key(k), e.to_string())),
                Some(_) => Err(err(file, key(k), "expected a duration such as \"5ms\"")),
            }
        };
        let at = dur("at")?.unwrap_or(Duration::ZERO);
        if at >= duration {
            return Err(err(
                file,
                key("at"),
                format!("{at} is not before the end of the traffic ({duration})"),
            ));
        }
        let remove_at = dur("remove_at")?;
        if let Some(r) = remove_at {
            if r <= at || r >= duration {
                return Err(err(
                    file,
                    key("remove_at"),
                    format!(
                    "{r}: expected an instant after the request ({at}) and before the end of the \
                     traffic ({duration})"),
                ));
            }
        }
        let deadline = dur("deadline")?
            .filter(|d| !d.is_zero())
            .ok_or_else(|| err(file, key("deadline"), "missing (a duration above zero)"))?;
        let size = u64::from(f.size);
        // the loader gave rates in the testbed's time (divided by the dilation); the controller
        // reserves in the scenario's
        let k = u64::from(sc.sim.dilation.max(1));
        let undilated = |r: Rate| Rate::from_bps(r.bps().saturating_mul(k));
        let (rate, burst) = match f.traffic {
            TrafficSpec::TokenBucket { rate, burst, .. } => (Some(undilated(rate)), Some(burst)),
            TrafficSpec::Cbr { rate } => (Some(undilated(rate)), Some(Bytes::new(size))),
            _ => (None, None),
        };
        let grow = |x: u64| {
            (u128::from(x) * u128::from(size + allowance)).div_ceil(u128::from(size.max(1)))
        };
        let rate = match t.get("rate") {
            Some(Value::String(s)) => {
                s.parse::<Rate>().map_err(|e| err(file, key("rate"), e.to_string()))?.bps()
            }
            Some(_) => return Err(err(file, key("rate"), "expected a rate such as \"40Mbps\"")),
            None => match rate {
                // and RATE_HEADROOM_PERCENT more, for the shaper to drain what a stall bunched
                Some(r) => {
                    u64::try_from((grow(r.bps()) * (100 + RATE_HEADROOM_PERCENT)).div_ceil(100))
                        .unwrap_or(u64::MAX)
                }
                None => {
                    return Err(err(
                        file,
                        key("rate"),
                        format!(
                        "missing: flow {name:?} is neither a token bucket nor a constant rate, so \
                         what to reserve must be given"),
                    ))
                }
            },
        };
        let burst = match t.get("burst") {
            Some(Value::String(s)) => {
                s.parse::<Bytes>().map_err(|e| err(file, key("burst"), e.to_string()))?.get()
            }
            Some(Value::Integer(n)) if *n > 0 => *n as u64,
            Some(_) => return Err(err(file, key("burst"), "expected a size such as \"3000B\"")),
            // one tagged frame more than the flow's bucket: the slack its host shaper needs
            None => match burst {
                Some(b) => {
                    u64::try_from(grow(b.get()).saturating_add(u128::from(size + allowance)))
                        .unwrap_or(u64::MAX)
                }
                None => {
                    return Err(err(
                        file,
                        key("burst"),
                        format!("missing: flow {name:?} has no token bucket"),
                    ))
                }
            },
        };
        if rate == 0 || burst == 0 {
            return Err(err(
                file,
                key("rate"),
                "reserving nothing: expected a rate and burst above zero",
            ));
        }
        if out.iter().any(|r: &LiveRequest| r.flow == name) {
            return Err(err(file, key("flow"), format!("flow {name:?} is requested twice")));
        }
        out.push(LiveRequest {
            flow: name,
            at_ns: at.as_nanos(),
            remove_at_ns: remove_at.map(Duration::as_nanos),
            src: sc.nodes[f.src].name.clone(),
            dst: sc.nodes[f.dst].name.clone(),
            rate_bps: rate,
            burst_bytes: burst,
            deadline_ns: deadline.as_nanos(),
            flow_match: serde_json::json!({"proto": "udp", "dst_port": f.dst_port, "src_port": f.src_port}),
        });
    }
    out.sort_by_key(|r| r.at_ns);
    Ok(LivePlan {
        scenario: text,
        duration_ns: duration.as_nanos(),
        dilation: u64::from(sc.sim.dilation),
        tag_allowance_bytes: allowance,
        tag_base: ctl.config().tags.base,
        ports: switch_ports(ctl),
        requests: out,
    })
}

/// Per switch of `ctl`'s network, its ports' indices by local number (the scenario the plan
/// writes numbers ports as the controller's topology does).
fn switch_ports(ctl: &Controller) -> BTreeMap<String, Vec<usize>> {
    let topo = ctl.topology();
    (0..topo.nodes().len())
        .filter(|&n| !topo.is_host(n))
        .map(|n| {
            let mut by_local = topo.node_ports(n).to_vec();
            by_local.sort_by_key(|&p| topo.port(p).local);
            (topo.nodes()[n].name.clone(), by_local)
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::CtlConfig;
    use crate::topo::Topology;
    use std::sync::Arc;

    const FIG6: &str = include_str!("../../../experiments/chameleon/fig6.toml");

    fn ctl() -> Controller {
        let t = Arc::new(Topology::from_toml("fig6.toml", FIG6).unwrap_or_else(|e| panic!("{e}")));
        Controller::new(t, CtlConfig::chameleon(2).unwrap_or_else(|e| panic!("{e}")))
            .unwrap_or_else(|e| panic!("{e}"))
    }

    const SPEC: &str = r#"
[sim]
duration = "300ms"
dilation = 10
[[flows]]
name = "a"
src = "h2"
dst = "h3"
size = 1400
src_port = 10001
dst_port = 20001
traffic = { kind = "token-bucket", rate = "400Mbps", burst = "1400B" }
[[flows]]
name = "be"
src = "h6"
dst = "h3"
size = 1000
traffic = { kind = "cbr", rate = "10Mbps" }
[[requests]]
flow = "a"
deadline = "50ms"
"#;

    #[test]
    fn a_spec_becomes_the_networks_scenario_with_its_traffic_and_resolved_requests() {
        let p = live_plan(&ctl(), "live.toml", SPEC).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!((p.duration_ns, p.dilation, p.tag_allowance_bytes), (300_000_000, 10, 16));
        assert_eq!(p.tag_base, 10);
        // each switch's ports by the local number a tag names
        let c = ctl();
        let topo = c.topology();
        assert_eq!(p.ports.len(), (0..topo.nodes().len()).filter(|&n| !topo.is_host(n)).count());
        for (name, ports) in &p.ports {
            let n = topo.node_id(name).unwrap_or_else(|| panic!("{name}"));
            assert_eq!(ports.len(), topo.node_ports(n).len());
            for (local, &g) in ports.iter().enumerate() {
                assert_eq!((topo.port(g).node, usize::from(topo.port(g).local)), (n, local));
            }
        }
        let sc = Scenario::from_str_named("x", &p.scenario).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!((sc.nodes.len(), sc.links.len(), sc.flows.len()), (8, 8, 2));
        assert_eq!(sc.sim.dilation, 10);
        let r = &p.requests[0];
        assert_eq!(
            (r.flow.as_str(), r.src.as_str(), r.dst.as_str(), r.at_ns),
            ("a", "h2", "h3", 0)
        );
        // room for four tags on 1400-byte frames, 2 % more rate and one frame more burst
        assert_eq!((r.rate_bps, r.burst_bytes, r.deadline_ns), (412_662_858, 2832, 50_000_000));
        assert_eq!(
            r.flow_match,
            serde_json::json!({"proto": "udp", "dst_port": 20001, "src_port": 10001})
        );
    }

    #[test]
    fn mistakes_name_the_file_and_key() {
        let c = ctl();
        let bad = |spec: &str, key: &str| {
            let e = live_plan(&c, "live.toml", spec)
                .err()
                .unwrap_or_else(|| panic!("accepted: {spec}"));
            assert_eq!((e.file.as_str(), e.key.as_deref()), ("live.toml", Some(key)), "{e}");
        };
        bad("[sim]\nduration = \"1s\"\n[[nodes]]\nname = \"x\"\n", "nodes");
        bad("[[flows]]\nname = \"a\"\n", "sim.duration");
        bad("[sim]\nduration = \"1s\"\nlatency = \"seed\"\n", "sim.latency");
        bad("[sim]\nduration = \"0s\"\n", "sim.duration");
        bad(&SPEC.replace("flow = \"a\"", "flow = \"zz\""), "requests[0].flow");
        bad(&SPEC.replace("deadline = \"50ms\"", "deadline = 5"), "requests[0].deadline");
        bad(
            &SPEC.replace("deadline = \"50ms\"", "deadline = \"50ms\"\nat = \"1s\""),
            "requests[0].at",
        );
        bad(
            &SPEC.replace("deadline = \"50ms\"", "deadline = \"50ms\"\nrate = \"fast\""),
            "requests[0].rate",
        );
        bad(
            &SPEC.replace("deadline = \"50ms\"", "deadline = \"50ms\"\nqueue = 1"),
            "requests[0].queue",
        );
        bad(
            &(SPEC.to_owned() + "[[requests]]\nflow = \"a\"\ndeadline = \"9ms\"\n"),
            "requests[1].flow",
        );
        bad(
            &SPEC.replace("deadline = \"50ms\"", "deadline = \"50ms\"\nremove_at = \"0ms\""),
            "requests[0].remove_at",
        );
        bad(
            &SPEC.replace("deadline = \"50ms\"", "deadline = \"50ms\"\nremove_at = \"300ms\""),
            "requests[0].remove_at",
        );
        let p = live_plan(
            &c,
            "l",
            &SPEC.replace("deadline = \"50ms\"", "deadline = \"50ms\"\nremove_at = \"200ms\""),
        )
        .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(p.requests[0].remove_at_ns, Some(200_000_000));
        // the scenario's own checks, against the spec's name
        let e = live_plan(
            &c,
            "live.toml",
            &SPEC.replace("dst = \"h3\"\nsize = 1400", "dst = \"h9\"\nsize = 1400"),
        )
        .err()
        .unwrap_or_else(|| panic!("accepted an unknown host"));
        assert_eq!((e.file.as_str(), e.line_col), ("live.toml", None));
        assert!(e.to_string().contains("h9"), "{e}");
        // a spec that is not TOML: where
        let e = live_plan(&c, "live.toml", &SPEC.replace("size = 1400", "size = = 1400"))
            .err()
            .unwrap_or_else(|| panic!("accepted a spec that is not TOML"));
        assert_eq!(e.line_col.map(|(l, _)| SPEC.lines().nth(l - 1)), Some(Some("size = 1400")));
        // a constant-rate flow reserves its rate and two frames; another kind must say
        let p = live_plan(
            &c,
            "l",
            &(SPEC.to_owned() + "[[requests]]\nflow = \"be\"\ndeadline = \"9ms\"\n"),
        )
        .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!((p.requests[1].rate_bps, p.requests[1].burst_bytes), (10_363_200, 2032));
        let poisson = SPEC.replace(
            "{ kind = \"cbr\", rate = \"10Mbps\" }",
            "{ kind = \"poisson\", rate = \"10Mbps\" }",
        ) + "[[requests]]\nflow = \"be\"\ndeadline = \"9ms\"\n";
        bad(&poisson, "requests[1].rate");
    }
}
