//! Physical topologies: hosts, switches, links, and the directed ports the controller reserves.
//!
//! Ports follow the simulator's convention (`latnet_sim::net::Topology`): link `i` owns port
//! `2i` (from `a` toward `b`) and `2i + 1` (from `b` toward `a`), and a node's *local* port
//! numbers count its links in link order. A tag `f(port, queue)` therefore names the same port
//! in the controller and in a simulated network built from the same nodes and links.
//!
//! Sources: [`Topology::fat_tree`] (any even `k`, any number of hosts per edge switch) and
//! [`Topology::from_toml`] (a file: `[[nodes]]` with `name` and `kind`, `[[links]]` with `a`,
//! `b`, `rate`, and `[defaults.link] rate`; errors name the file, line, key and expectation).

use latnet_sim::scenario::{ErrCtx, ScenarioError};
use latnet_units::Rate;
use serde::Deserialize;
use std::collections::{BTreeMap, VecDeque};
use toml::Spanned;

/// Node index.
pub type NodeId = usize;
/// Directed port index (`2 × link + direction`).
pub type PortId = usize;

/// Hosts send and receive flows and never forward; switches forward.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum NodeKind {
    /// An end host (server).
    Host,
    /// A switch.
    Switch,
}

/// A node.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Node {
    /// Unique name.
    pub name: String,
    /// Host or switch.
    pub kind: NodeKind,
}

/// A bidirectional link of equal rate in both directions.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Link {
    /// One end.
    pub a: NodeId,
    /// The other end.
    pub b: NodeId,
    /// Rate of each direction.
    pub rate: Rate,
}

/// One direction of a link: the egress port of `node` toward `peer`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Port {
    /// Owning node.
    pub node: NodeId,
    /// Index among `node`'s ports (link order).
    pub local: u16,
    /// Node at the other end.
    pub peer: NodeId,
    /// The opposite direction.
    pub reverse: PortId,
    /// Rate.
    pub rate: Rate,
}

/// A validated topology.
#[derive(Debug, Clone)]
pub struct Topology {
    nodes: Vec<Node>,
    links: Vec<Link>,
    ports: Vec<Port>,
    node_ports: Vec<Vec<PortId>>,
    /// Per node, its ports toward switches.
    switch_ports: Vec<Vec<PortId>>,
    by_name: BTreeMap<String, NodeId>,
}

/// A topology that cannot be built, with where and why (`file:line:col: \`key\`: message`):
/// the scenario's error, as a topology file is TOML too.
pub type TopologyError = ScenarioError;

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawTopo {
    #[serde(default)]
    defaults: RawDefaults,
    #[serde(default)]
    nodes: Vec<RawNode>,
    #[serde(default)]
    links: Vec<RawLink>,
}

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
struct RawDefaults {
    link: Option<RawLinkDefaults>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawLinkDefaults {
    rate: Option<Spanned<Rate>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawNode {
    name: Spanned<String>,
    kind: NodeKind,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawLink {
    a: Spanned<String>,
    b: Spanned<String>,
    rate: Option<Spanned<Rate>>,
}

/// Most nodes a topology may have (bounds the work a hostile file can cause).
pub const MAX_NODES: usize = 1 << 20;

impl Topology {
    /// Build from nodes and links (indices into `nodes`). Checks: unique non-empty names, links
    /// join two different existing nodes at a non-zero rate, every host has at least one link,
    /// at most 65,536 ports per node.
    pub fn new(nodes: Vec<Node>, links: Vec<Link>) -> Result<Topology, String> {
        if nodes.len() > MAX_NODES {
            return Err(format!("at most {MAX_NODES} nodes are supported"));
        }
        let mut by_name = BTreeMap::new();
        for (i, n) in nodes.iter().enumerate() {
            if n.name.is_empty() {
                return Err(format!("node {i} has an empty name"));
            }
            if by_name.insert(n.name.clone(), i).is_some() {
                return Err(format!("duplicate node name {:?}", n.name));
            }
        }
        let mut ports = Vec::with_capacity(links.len() * 2);
        let mut node_ports = vec![Vec::new(); nodes.len()];
        for (i, l) in links.iter().enumerate() {
            if l.a >= nodes.len() || l.b >= nodes.len() {
                return Err(format!("link {i} names a node that does not exist"));
            }
            if l.a == l.b {
                return Err(format!("link {i} joins {:?} to itself", nodes[l.a].name));
            }
            if l.rate.is_zero() {
                return Err(format!("link {i} has a zero rate"));
            }
            for (node, peer, reverse) in [(l.a, l.b, 2 * i + 1), (l.b, l.a, 2 * i)] {
                let local = u16::try_from(node_ports[node].len()).map_err(|_| {
                    format!("node {:?} has more than 65,536 ports", nodes[node].name)
                })?;
                node_ports[node].push(ports.len());
                ports.push(Port { node, local, peer, reverse, rate: l.rate });
            }
        }
        for (i, n) in nodes.iter().enumerate() {
            if n.kind == NodeKind::Host && node_ports[i].is_empty() {
                return Err(format!("host {:?} has no link", n.name));
            }
        }
        let switch_ports = node_ports
            .iter()
            .map(|ps| {
                ps.iter()
                    .copied()
                    .filter(|&p| nodes[ports[p].peer].kind == NodeKind::Switch)
                    .collect()
            })
            .collect();
        Ok(Topology { nodes, links, ports, node_ports, switch_ports, by_name })
    }

    /// A `k`-ary fat-tree (`k` even, at least 2) with `hosts_per_edge` servers under each edge
    /// switch and every link at `rate`: `k` pods of `k/2` edge and `k/2` aggregation switches,
    /// `(k/2)²` cores. The standard fat-tree has `k/2` hosts per edge (`k³/4` servers); the
    /// Chameleon paper's scalability study uses `40 × k/2` (640 servers at `k = 4`, 17,280 at
    /// `k = 12`).
    ///
    /// Names: hosts `h<pod>_<edge>_<i>`, edge switches `e<pod>_<j>`, aggregation `a<pod>_<j>`,
    /// cores `c<i>`. Edge switches number their host ports first (0 ..), then their uplinks;
    /// aggregation switches their edge ports, then their core ports.
    pub fn fat_tree(k: usize, hosts_per_edge: usize, rate: Rate) -> Result<Topology, String> {
        if k < 2 || k % 2 != 0 {
            return Err(format!("a fat-tree needs an even k of at least 2, got {k}"));
        }
        if hosts_per_edge == 0 {
            return Err("a fat-tree needs at least one host per edge switch".into());
        }
        let half = k / 2;
        // checked: `k` and `hosts_per_edge` come from users, and a product that wrapped would
        // pass the size check and then build (or try to) an enormous network
        let total = k
            .checked_mul(half)
            .and_then(|x| x.checked_mul(hosts_per_edge))
            .and_then(|x| x.checked_add(k.checked_mul(k)?))
            .and_then(|x| x.checked_add(half.checked_mul(half)?));
        let Some(total) = total.filter(|&t| t <= MAX_NODES) else {
            return Err(format!(
                "k = {k} with {hosts_per_edge} hosts per edge is too large (at most {MAX_NODES} \
                 nodes)"
            ));
        };
        let mut nodes = Vec::with_capacity(total);
        let mut links = Vec::new();
        let mut node = |name: String, kind: NodeKind| {
            nodes.push(Node { name, kind });
            nodes.len() - 1
        };
        let cores: Vec<_> =
            (0..half * half).map(|i| node(format!("c{i}"), NodeKind::Switch)).collect();
        for p in 0..k {
            let aggs: Vec<_> =
                (0..half).map(|j| node(format!("a{p}_{j}"), NodeKind::Switch)).collect();
            let mut edges = Vec::with_capacity(half);
            for e in 0..half {
                let sw = node(format!("e{p}_{e}"), NodeKind::Switch);
                edges.push(sw);
                for i in 0..hosts_per_edge {
                    let h = node(format!("h{p}_{e}_{i}"), NodeKind::Host);
                    links.push(Link { a: h, b: sw, rate });
                }
            }
            for &e in &edges {
                for &a in &aggs {
                    links.push(Link { a: e, b: a, rate });
                }
            }
            for (j, &a) in aggs.iter().enumerate() {
                for &c in &cores[j * half..(j + 1) * half] {
                    links.push(Link { a, b: c, rate });
                }
            }
        }
        Topology::new(nodes, links)
    }

    /// Parse a topology file's text; `file` names it in errors.
    pub fn from_toml(file: &str, src: &str) -> Result<Topology, TopologyError> {
        let cx = ErrCtx { file, src };
        let raw: RawTopo = toml::from_str(src).map_err(|e| cx.toml_error(&e))?;
        if raw.nodes.is_empty() {
            return Err(cx.at(None, "nodes", "expected at least one [[nodes]] entry"));
        }
        if raw.nodes.len() > MAX_NODES {
            return Err(cx.at(None, "nodes", format!("at most {MAX_NODES} nodes")));
        }
        let mut by_name: BTreeMap<String, usize> = BTreeMap::new();
        let mut nodes = Vec::with_capacity(raw.nodes.len());
        for (i, n) in raw.nodes.iter().enumerate() {
            let name = n.name.get_ref().trim().to_owned();
            let key = format!("nodes[{i}].name");
            if name.is_empty() {
                return Err(cx.at(Some(n.name.span()), key, "expected a non-empty name"));
            }
            if by_name.insert(name.clone(), i).is_some() {
                return Err(cx.at(
                    Some(n.name.span()),
                    key,
                    format!("duplicate node name {name:?}"),
                ));
            }
            nodes.push(Node { name, kind: n.kind });
        }
        let default_rate = raw.defaults.link.and_then(|l| l.rate);
        let lookup = |s: &Spanned<String>, key: String| {
            by_name.get(s.get_ref().trim()).copied().ok_or_else(|| {
                let known: Vec<_> = by_name.keys().take(12).map(String::as_str).collect();
                cx.at(
                    Some(s.span()),
                    key,
                    format!("unknown node {:?} (nodes: {})", s.get_ref(), known.join(", ")),
                )
            })
        };
        let mut links = Vec::with_capacity(raw.links.len());
        let mut degree = vec![0usize; nodes.len()];
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
            let rate = l.rate.as_ref().or(default_rate.as_ref()).ok_or_else(|| {
                cx.at(
                    Some(l.a.span()),
                    format!("links[{i}].rate"),
                    "missing rate (set it here or in [defaults.link])",
                )
            })?;
            if rate.get_ref().is_zero() {
                return Err(cx.at(
                    Some(rate.span()),
                    format!("links[{i}].rate"),
                    "expected a rate above zero",
                ));
            }
            for n in [a, b] {
                degree[n] += 1;
                if degree[n] > usize::from(u16::MAX) {
                    return Err(cx.at(
                        Some(l.a.span()),
                        format!("links[{i}]"),
                        format!("node {:?} has more than 65,535 links", nodes[n].name),
                    ));
                }
            }
            links.push(Link { a, b, rate: *rate.get_ref() });
        }
        for (i, n) in raw.nodes.iter().enumerate() {
            if nodes[i].kind == NodeKind::Host && degree[i] == 0 {
                return Err(cx.at(
                    Some(n.name.span()),
                    format!("nodes[{i}]"),
                    format!("host {:?} has no link", nodes[i].name),
                ));
            }
        }
        Topology::new(nodes, links).map_err(|m| cx.at(None, "links", m))
    }

    /// All nodes.
    pub fn nodes(&self) -> &[Node] {
        &self.nodes
    }
    /// All links.
    pub fn links(&self) -> &[Link] {
        &self.links
    }
    /// All directed ports.
    pub fn ports(&self) -> &[Port] {
        &self.ports
    }
    /// One port.
    pub fn port(&self, p: PortId) -> &Port {
        &self.ports[p]
    }
    /// The ports of `n`, by local number.
    pub fn node_ports(&self, n: NodeId) -> &[PortId] {
        &self.node_ports[n]
    }
    /// The ports of `n` toward switches.
    pub fn switch_ports(&self, n: NodeId) -> &[PortId] {
        &self.switch_ports[n]
    }
    /// The node called `name`.
    pub fn node_id(&self, name: &str) -> Option<NodeId> {
        self.by_name.get(name).copied()
    }
    /// Is `n` a host?
    pub fn is_host(&self, n: NodeId) -> bool {
        self.nodes.get(n).is_some_and(|x| x.kind == NodeKind::Host)
    }
    /// Host node ids, in node order.
    pub fn hosts(&self) -> Vec<NodeId> {
        (0..self.nodes.len()).filter(|&n| self.is_host(n)).collect()
    }
    /// True if either end of port `p` is a host.
    pub fn touches_host(&self, p: PortId) -> bool {
        let port = &self.ports[p];
        self.is_host(port.node) || self.is_host(port.peer)
    }

    /// Hop distance from `dst` and every switch to host `dst`, walking only through switches
    /// (hosts are never transit, so other hosts stay at `u32::MAX`). Links are symmetric, so
    /// this is also the distance from `dst`.
    pub fn hops_to(&self, dst: NodeId) -> Vec<u32> {
        let mut dist = vec![u32::MAX; self.nodes.len()];
        let mut queue = VecDeque::new();
        dist[dst] = 0;
        for &p in &self.node_ports[dst] {
            let sw = self.ports[p].peer;
            if !self.is_host(sw) && dist[sw] == u32::MAX {
                dist[sw] = 1;
                queue.push_back(sw);
            }
        }
        while let Some(v) = queue.pop_front() {
            for &p in &self.switch_ports[v] {
                let u = self.ports[p].peer;
                if dist[u] == u32::MAX {
                    dist[u] = dist[v] + 1;
                    queue.push_back(u);
                }
            }
        }
        dist
    }

    /// A fewest-hops path from host `src` to host `dst` as egress ports, choosing the lowest
    /// port at every step (deterministic); `None` if there is none.
    pub fn shortest_path(&self, src: NodeId, dst: NodeId) -> Option<Vec<PortId>> {
        let hops = self.hops_to(dst);
        let mut at = src;
        let mut path = Vec::new();
        while at != dst {
            let p = self.node_ports[at]
                .iter()
                .copied()
                .filter(|&p| {
                    let peer = self.ports[p].peer;
                    (peer == dst || !self.is_host(peer))
                        && hops[peer] != u32::MAX
                        && (at == src || hops[peer] < hops[at])
                })
                .min_by_key(|&p| (hops[self.ports[p].peer], p))?;
            path.push(p);
            at = self.ports[p].peer;
            if path.len() > self.nodes.len() {
                return None;
            }
        }
        Some(path)
    }

    /// The directed ports that lie on at least one shortest (fewest-hops) path from host `src`
    /// to host `dst`, excluding ports that touch a host: the links between the endpoints'
    /// switches that Chameleon's rerouting looks at. In port order.
    pub fn shortest_path_ports(&self, src: NodeId, dst: NodeId) -> Vec<PortId> {
        let to_dst = self.hops_to(dst);
        let from_src = self.hops_to(src);
        let total = self.node_ports[src]
            .iter()
            .map(|&p| to_dst[self.ports[p].peer])
            .filter(|&d| d != u32::MAX)
            .min()
            .map(|d| d + 1);
        let Some(total) = total else { return Vec::new() };
        (0..self.ports.len())
            .filter(|&p| !self.touches_host(p))
            .filter(|&p| {
                let Port { node: u, peer: v, .. } = self.ports[p];
                let (a, b) = (from_src[u], to_dst[v]);
                a != u32::MAX && b != u32::MAX && a + 1 + b == total
            })
            .collect()
    }
}
