//! The testbed plan of a scenario: which network namespaces, veth interfaces, MAC addresses,
//! host addresses and host routes emulate it. The launcher (`latnet testbed up`, Python)
//! executes the plan; the switch uses the same conventions to find its interfaces.
//!
//! Conventions (the only ones; both sides call this module):
//!
//! * every node is a network namespace `PREFIX + node name`;
//! * link `i` is a veth pair with the interface `lk<i>` at both ends;
//! * the interface of node `n` on link `i` carries the scenario's port "`n` toward its peer on
//!   link `i`" (global port `p`) and has the MAC [`port_mac`]`(p)`: locally administered,
//!   `02:6c:6e` followed by `p` in 24 bits;
//! * a host gets its address as a /32 on each of its interfaces and, for every other host, a
//!   route through the interface its FIB entry names, with a gateway whose MAC is the peer's
//!   interface MAC (a permanent neighbour entry: no ARP crosses the switches);
//! * when a flow carries its SLO in an IPv6 hop-by-hop option, hosts also get IPv6: the
//!   simulator's address (`2001:db8::` + the IPv4 address) as a /128 and the same routes
//!   through [`GATEWAY6`] (no neighbour discovery, no duplicate address detection);
//! * links joining two hosts cannot be emulated (there is no switch to emulate their rate and
//!   delay) and are refused.

use latnet_sim::lbf::{ipv6_of, uses_ipv6};
use latnet_sim::net::{Topology, NO_PORT};
use latnet_sim::scenario::NodeKind;
use latnet_sim::Scenario;
use serde::Serialize;

/// The gateway address hosts route through (never on the wire: it only keys the permanent
/// neighbour entry that gives the next hop's MAC).
pub const GATEWAY: &str = "169.254.0.1";
/// The IPv6 gateway, used the same way.
pub const GATEWAY6: &str = "fe80::1";

/// MAC address of the interface that carries global port `p`.
pub fn port_mac(p: usize) -> [u8; 6] {
    let b = (p as u32).to_be_bytes();
    [0x02, 0x6c, 0x6e, b[1], b[2], b[3]]
}

/// `aa:bb:cc:dd:ee:ff`.
pub fn mac_string(m: [u8; 6]) -> String {
    m.iter().map(|b| format!("{b:02x}")).collect::<Vec<_>>().join(":")
}

/// Interface name of link `i` (in both namespaces it joins).
pub fn iface_name(link: usize) -> String {
    format!("lk{link}")
}

/// Why a scenario cannot be emulated.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum PlanError {
    /// A link joins two hosts.
    #[error("links[{link}] joins two hosts ({a}, {b}): emulation needs a switch on every link to emulate its rate and delay")]
    HostToHost {
        /// Link index.
        link: usize,
        /// One end.
        a: String,
        /// Other end.
        b: String,
    },
    /// More links than interface names or MACs can number.
    #[error("{0} links: the testbed numbers at most 65,536")]
    TooManyLinks(usize),
}

/// The testbed of a scenario.
#[derive(Debug, Clone, Serialize)]
pub struct Plan {
    /// Scenario name.
    pub scenario: String,
    /// Address the hosts use as gateway (see [`GATEWAY`]).
    pub gateway: String,
    /// Whether hosts also need IPv6 (a flow's SLO rides in a hop-by-hop option): each gets
    /// its `address6` and routes to the others' through [`GATEWAY6`].
    pub ipv6: bool,
    /// IPv6 gateway (link-local; keys a permanent neighbour entry like [`GATEWAY`]).
    pub gateway6: String,
    /// One entry per node, in scenario order.
    pub nodes: Vec<PlanNode>,
    /// One entry per link, in scenario order.
    pub links: Vec<PlanLink>,
    /// Flows, in scenario order.
    pub flows: Vec<PlanFlow>,
    /// Sending duration (ns).
    pub duration_ns: u64,
    /// Drain time after it (ns).
    pub drain_ns: u64,
    /// The scenario's `[output] pcap`: a run captures its links unless told otherwise.
    pub output_pcap: bool,
    /// The scenario's `[output] packets`: a run records every packet's hops unless told
    /// otherwise (`latnet-switch run --hops`).
    pub output_packets: bool,
    /// Why an emulated run cannot play the scenario's TCP flows on Linux's TCP (a key of the
    /// simulator's TCP, `cc = "prague"`, hosts whose flows disagree on a per-host setting:
    /// [`crate::tcpflow::check`]); `None` when it can (or there are none).
    pub tcp_refused: Option<String>,
}

/// A flow (for the launcher of senders and receivers).
#[derive(Debug, Clone, Serialize)]
pub struct PlanFlow {
    /// Name.
    pub name: String,
    /// Source host.
    pub src: String,
    /// Destination host.
    pub dst: String,
    /// Priority.
    pub priority: u8,
    /// Frame length.
    pub size: u32,
    /// Whether the flow is TCP traffic (`tcp-bulk`, `tcp-rr`): its sender runs Linux's TCP
    /// ([`crate::tcpflow`]).
    pub tcp: bool,
    /// Whether the flow paces with an HTB class on its host's interface
    /// (`large_flow_pacing = "htb"`, see [`crate::tcpflow::HostHtb`]): that interface gets no
    /// NIC token bucket, the class at the host queue's rate standing in for it.
    pub htb: bool,
}

/// A node: a namespace.
#[derive(Debug, Clone, Serialize)]
pub struct PlanNode {
    /// Scenario name.
    pub name: String,
    /// `host` or `switch`.
    pub kind: String,
    /// IPv4 address (hosts use it; switches have none on the wire).
    pub address: String,
    /// IPv6 address the simulator gives the node (`latnet_sim::lbf::ipv6_of`).
    pub address6: String,
    /// Interfaces, in link order.
    pub ifaces: Vec<PlanIface>,
    /// Routes of a host, one per other reachable host.
    pub routes: Vec<PlanRoute>,
}

/// One end of a link.
#[derive(Debug, Clone, Serialize)]
pub struct PlanIface {
    /// Interface name.
    pub name: String,
    /// Link index.
    pub link: usize,
    /// Global port index this interface transmits for.
    pub port: usize,
    /// Its MAC.
    pub mac: String,
    /// Node at the other end.
    pub peer: String,
    /// MAC of the interface at the other end.
    pub peer_mac: String,
}

/// A host route.
#[derive(Debug, Clone, Serialize)]
pub struct PlanRoute {
    /// Destination host address (/32).
    pub dst: String,
    /// Its IPv6 address (/128).
    pub dst6: String,
    /// Outgoing interface.
    pub iface: String,
    /// MAC of the next hop on that interface.
    pub next_hop_mac: String,
}

/// A link.
#[derive(Debug, Clone, Serialize)]
pub struct PlanLink {
    /// Index.
    pub index: usize,
    /// End `a`.
    pub a: String,
    /// End `b`.
    pub b: String,
    /// Interface name at both ends.
    pub iface: String,
    /// Rate (bit/s), emulated by the switch end(s).
    pub rate_bps: u64,
    /// Propagation delay (ns), emulated by the switch end(s).
    pub delay_ns: u64,
}

/// Build the plan of a validated scenario.
pub fn plan(sc: &Scenario) -> Result<Plan, PlanError> {
    if sc.links.len() > 1 << 16 {
        return Err(PlanError::TooManyLinks(sc.links.len()));
    }
    for (i, l) in sc.links.iter().enumerate() {
        if sc.nodes[l.a].kind == NodeKind::Host && sc.nodes[l.b].kind == NodeKind::Host {
            return Err(PlanError::HostToHost {
                link: i,
                a: sc.nodes[l.a].name.clone(),
                b: sc.nodes[l.b].name.clone(),
            });
        }
    }
    let topo = Topology::build(sc);
    let nodes = sc
        .nodes
        .iter()
        .enumerate()
        .map(|(n, spec)| {
            let ifaces = topo.node_ports[n]
                .iter()
                .map(|&p| {
                    let t = &topo.ports[p];
                    PlanIface {
                        name: iface_name(t.link),
                        link: t.link,
                        port: p,
                        mac: mac_string(port_mac(p)),
                        peer: sc.nodes[t.peer].name.clone(),
                        peer_mac: mac_string(port_mac(t.reverse)),
                    }
                })
                .collect();
            let routes = if spec.kind == NodeKind::Host {
                (0..sc.nodes.len())
                    .filter(|&d| d != n && sc.nodes[d].kind == NodeKind::Host)
                    .filter_map(|d| {
                        let p = topo.fib[n][d];
                        (p != NO_PORT).then(|| {
                            let t = &topo.ports[p as usize];
                            PlanRoute {
                                dst: sc.nodes[d].address.to_string(),
                                dst6: ipv6_of(sc.nodes[d].address).to_string(),
                                iface: iface_name(t.link),
                                next_hop_mac: mac_string(port_mac(t.reverse)),
                            }
                        })
                    })
                    .collect()
            } else {
                Vec::new()
            };
            PlanNode {
                name: spec.name.clone(),
                kind: match spec.kind {
                    NodeKind::Host => "host",
                    NodeKind::Switch => "switch",
                }
                .to_owned(),
                address: spec.address.to_string(),
                address6: ipv6_of(spec.address).to_string(),
                ifaces,
                routes,
            }
        })
        .collect();
    let links = sc
        .links
        .iter()
        .enumerate()
        .map(|(i, l)| PlanLink {
            index: i,
            a: sc.nodes[l.a].name.clone(),
            b: sc.nodes[l.b].name.clone(),
            iface: iface_name(i),
            rate_bps: l.rate.bps(),
            delay_ns: l.delay.as_nanos(),
        })
        .collect();
    let flows = sc
        .flows
        .iter()
        .map(|f| PlanFlow {
            name: f.name.clone(),
            src: sc.nodes[f.src].name.clone(),
            dst: sc.nodes[f.dst].name.clone(),
            priority: f.priority,
            size: f.size,
            tcp: f.traffic.tcp().is_some(),
            htb: f.traffic.tcp().and_then(|t| t.large_flow_mode())
                == Some(latnet_sim::tcp::app::LargeFlowPacing::Htb),
        })
        .collect();
    Ok(Plan {
        scenario: sc.name.clone(),
        gateway: GATEWAY.to_owned(),
        ipv6: sc.flows.iter().any(uses_ipv6),
        gateway6: GATEWAY6.to_owned(),
        nodes,
        links,
        flows,
        duration_ns: sc.sim.duration.as_nanos(),
        drain_ns: sc.sim.drain.as_nanos(),
        output_pcap: sc.output.pcap,
        output_packets: sc.output.packets,
        tcp_refused: crate::tcpflow::check(sc).err(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const SC: &str = r#"
[sim]
duration = "1s"
[defaults.link]
rate = "100Mbps"
[[nodes]]
name = "h1"
kind = "host"
[[nodes]]
name = "s1"
kind = "switch"
[[nodes]]
name = "h2"
kind = "host"
[[links]]
a = "h1"
b = "s1"
[[links]]
a = "s1"
b = "h2"
delay = "1ms"
"#;

    #[test]
    fn plan_names_macs_and_routes_follow_the_conventions() {
        let sc = Scenario::from_str_named("t.toml", SC).unwrap();
        let p = plan(&sc).unwrap();
        assert_eq!(p.nodes.len(), 3);
        let h1 = &p.nodes[0];
        assert_eq!(h1.ifaces[0].name, "lk0");
        assert_eq!(h1.ifaces[0].mac, "02:6c:6e:00:00:00");
        assert_eq!(h1.ifaces[0].peer_mac, "02:6c:6e:00:00:01");
        assert_eq!(h1.routes.len(), 1);
        assert_eq!(h1.routes[0].dst, "10.0.0.3");
        assert_eq!(h1.routes[0].dst6, "2001:db8::a00:3");
        assert!(!p.ipv6, "no flow carries its SLO in an IPv6 option");
        assert_eq!(h1.routes[0].next_hop_mac, "02:6c:6e:00:00:01");
        assert!(p.nodes[1].routes.is_empty());
        assert_eq!(p.links[1].delay_ns, 1_000_000);
    }

    #[test]
    fn host_to_host_links_are_refused() {
        let sc = SC.replace("a = \"s1\"\nb = \"h2\"", "a = \"h1\"\nb = \"h2\"");
        let sc = Scenario::from_str_named("t.toml", &sc).unwrap();
        assert!(matches!(plan(&sc), Err(PlanError::HostToHost { link: 1, .. })));
    }
}
