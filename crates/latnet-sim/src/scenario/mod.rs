//! Scenario files (TOML): nodes, links, per-port queues, routes, flows, run settings, outputs.
//!
//! [`Scenario::from_file`] / [`Scenario::from_str_named`] parse and validate (`raw.rs`: the
//! file as written; `validate.rs`). Every error names the file, the line, the key and what was
//! expected (see [`ScenarioError`]). The validated [`Scenario`] holds indices instead of names
//! and is what the simulator and the emulator build a network from. The format is documented
//! in `docs/scenario.md`.

mod error;
mod large_flow;
mod lbf;
mod overrides;
mod pipeline;
mod raw;
mod validate;

pub use error::{ErrCtx, ScenarioError};
pub use lbf::{
    min_frame, BudgetRule, Carry, Encap, ExpirePolicy, LbfFibOverride, LbfScenario, LbfSettings,
    SloSpec, UpperPolicy,
};
pub use overrides::{apply_overrides, parse_value};
pub use pipeline::{PipelineSpec, Processing};

use crate::switch::ForwardingSpec;
use crate::traffic::TrafficSpec;
use latnet_dataplane::packet::{Priority, BEST_EFFORT};
use latnet_dataplane::QueueSpec;
use latnet_units::{Duration, Rate, Time};
use serde::Deserialize;
use std::collections::HashMap;
use std::net::Ipv4Addr;
use std::path::Path;
use toml::Spanned;

/// Smallest frame a flow may send: Ethernet (14) + IPv4 (20) + UDP (8).
pub const MIN_FRAME: u32 = 42;
/// Largest frame a flow may send (jumbo frames included).
pub const MAX_FRAME: u32 = 65_535;

/// How events at the same instant are ordered (the seed LBF tables depend on it).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum TieBreak {
    /// In the order they were scheduled (like ns-3 and OMNeT++).
    #[default]
    Fifo,
    /// Packet events of the lower flow index first (earlier `[[flows]]` entry wins ties).
    FlowAsc,
    /// Packet events of the higher flow index first (later `[[flows]]` entry wins ties).
    FlowDesc,
}

impl TieBreak {
    /// Stable name.
    pub fn as_str(self) -> &'static str {
        match self {
            TieBreak::Fifo => "fifo",
            TieBreak::FlowAsc => "flow-asc",
            TieBreak::FlowDesc => "flow-desc",
        }
    }
}

/// What a reported latency includes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum LatencyConvention {
    /// Creation at the source to the last bit at the receiver: queueing, serialization and
    /// propagation on every link.
    #[default]
    Physical,
    /// As the LBF seed and its proof of concept count it: waiting time until start of
    /// transmission plus propagation, without the packet's own serialization times.
    ExcludeSerialization,
}

impl LatencyConvention {
    /// Stable name.
    pub fn as_str(self) -> &'static str {
        match self {
            LatencyConvention::Physical => "physical",
            LatencyConvention::ExcludeSerialization => "exclude-serialization",
        }
    }
}

/// When a frame reaches the next node.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Switching {
    /// Whole: its last bit has arrived (`start of transmission + serialization + delay`).
    #[default]
    StoreAndForward,
    /// A switch may act on a frame when its first bit arrives (`start of transmission +
    /// delay`); the sender's transmitter is still busy for the serialization time. Hosts
    /// receive whole frames. This is the link model of the LBF seed's proof of concept, whose
    /// latencies leave serialization out.
    CutThrough,
}

impl Switching {
    /// Stable name.
    pub fn as_str(self) -> &'static str {
        match self {
            Switching::StoreAndForward => "store-and-forward",
            Switching::CutThrough => "cut-through",
        }
    }
}

/// Metric of computed shortest-path routes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum RoutingMetric {
    /// Fewest hops.
    #[default]
    Hops,
    /// Least propagation delay.
    Delay,
}

/// Node kinds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum NodeKind {
    /// An end host: runs sources, receives flows, does not forward.
    Host,
    /// A switch/router: forwards by its FIB.
    Switch,
}

/// Run settings.
#[derive(Debug, Clone, PartialEq)]
pub struct SimConfig {
    /// Sources stop at this time.
    pub duration: Duration,
    /// Extra time after `duration` for packets in flight to arrive.
    pub drain: Duration,
    /// Seed of the run's random number generator.
    pub seed: u64,
    /// Ordering of simultaneous events.
    pub tie_break: TieBreak,
    /// Latency convention of every reported latency.
    pub latency: LatencyConvention,
    /// Metric of computed routes.
    pub routing: RoutingMetric,
    /// When a frame reaches a switch.
    pub switching: Switching,
    /// Time dilation (1: none): the scenario as written runs this many times slower, every
    /// duration (written or default) this many times longer and every rate this many times
    /// slower, and the results are reported in the scenario's own time (see
    /// [`crate::Results::undilate`]). Only for what scales so: no TCP (a kernel keeps real
    /// time), no AQM or shaper with rate-like parameters, no captures.
    pub dilation: u32,
}

/// A validated node.
#[derive(Debug, Clone, PartialEq)]
pub struct NodeSpec {
    /// Unique name.
    pub name: String,
    /// Host or switch.
    pub kind: NodeKind,
    /// IPv4 address (hosts; switches get one too, unused for forwarding).
    pub address: Ipv4Addr,
    /// Index into [`Scenario::pipelines`] of a switch that classifies with a pipeline.
    pub pipeline: Option<usize>,
    /// Forwarding model (switches only; hosts keep the default).
    pub forwarding: ForwardingSpec,
    /// A switch that counts large TCP flows per egress port (switch-assisted pacing, seed 003).
    pub large_flows: Option<latnet_dataplane::CounterSpec>,
}

/// A validated bidirectional link.
#[derive(Debug, Clone, PartialEq)]
pub struct LinkSpec {
    /// One end (node index).
    pub a: usize,
    /// The other end (node index).
    pub b: usize,
    /// Rate of each direction.
    pub rate: Rate,
    /// Propagation delay of each direction.
    pub delay: Duration,
    /// Probability that a frame is lost, in [0, 1).
    pub loss: f64,
    /// Bytes per frame added for serialization (preamble, FCS, inter-frame gap: 24 on Ethernet).
    pub overhead: u32,
    /// Egress queue of `a` toward `b`.
    pub queue_ab: QueueSpec,
    /// Egress queue of `b` toward `a`.
    pub queue_ba: QueueSpec,
}

/// An explicit route: at `node`, packets for host `dst` go to neighbour `next`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RouteSpec {
    /// Node index.
    pub node: usize,
    /// Destination host index.
    pub dst: usize,
    /// Next-hop node index (a neighbour of `node`).
    pub next: usize,
}

/// A validated flow.
#[derive(Debug, Clone, PartialEq)]
pub struct FlowSpec {
    /// Unique name.
    pub name: String,
    /// Source host index.
    pub src: usize,
    /// Destination host index.
    pub dst: usize,
    /// Priority (0 highest, 7 best effort).
    pub priority: Priority,
    /// Frame length in bytes (headers included).
    pub size: u32,
    /// First packet no earlier than this.
    pub start: Time,
    /// No packet at or after this.
    pub stop: Time,
    /// At most this many packets.
    pub count: Option<u64>,
    /// UDP source port.
    pub src_port: u16,
    /// UDP destination port.
    pub dst_port: u16,
    /// The sending pattern.
    pub traffic: TrafficSpec,
    /// Each packet leaves up to this much after the pattern's instant (uniform, seeded per
    /// flow; never before the flow's previous packet): a sender's scheduling noise. Zero for
    /// none; packet sources only.
    pub jitter: Duration,
    /// Latency objective carried in an LBF block, if any.
    pub slo: Option<SloSpec>,
    /// 802.1Q tag stack the source pushes, outermost (first switch) first; empty for none.
    /// `size` includes the 4 bytes of each tag.
    pub tags: Vec<u16>,
    /// Later tag stacks, in increasing order of `at`: a packet created at or after `at` (and
    /// before the next entry's) carries that stack instead of `tags` (a reroute at the source,
    /// as a controller's host agent applies it). The frame keeps its `size`.
    pub retag: Vec<Retag>,
}

/// A tag stack a flow's source pushes from an instant on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Retag {
    /// First creation time the stack applies to.
    pub at: Time,
    /// The stack, outermost (first switch) first.
    pub tags: Vec<u16>,
}

impl FlowSpec {
    /// The tag stack of a packet created at `t`.
    pub fn tags_at(&self, t: Time) -> &[u16] {
        self.retag.iter().rev().find(|r| r.at <= t).map_or(&self.tags, |r| &r.tags)
    }

    /// Every tag stack the flow pushes: `tags`, then each `retag` entry's.
    pub fn tag_stacks(&self) -> impl Iterator<Item = &[u16]> {
        std::iter::once(self.tags.as_slice()).chain(self.retag.iter().map(|r| r.tags.as_slice()))
    }
}

/// What to write besides the summary.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct OutputSpec {
    /// Keep a record per packet (and per hop) for `packets.csv` / `hops.csv`.
    #[serde(default)]
    pub packets: bool,
    /// Keep a packet capture of every egress port (`pcap/<node>-<peer>.pcap`).
    #[serde(default)]
    pub pcap: bool,
    /// Interval of the per-port queue occupancy series (`queues.csv`); none by default.
    pub queues: Option<Duration>,
    /// Interval of the per-flow TCP time series (`timeseries.csv`); default 100 ms when the
    /// scenario has TCP flows, zero for none.
    pub timeseries: Option<Duration>,
}

/// A validated scenario.
#[derive(Debug, Clone, PartialEq)]
pub struct Scenario {
    /// Name (defaults to the file stem).
    pub name: String,
    /// Free text.
    pub description: String,
    /// Run settings.
    pub sim: SimConfig,
    /// Nodes.
    pub nodes: Vec<NodeSpec>,
    /// Links.
    pub links: Vec<LinkSpec>,
    /// Explicit routes (override computed ones).
    pub routes: Vec<RouteSpec>,
    /// Flows.
    pub flows: Vec<FlowSpec>,
    /// Outputs.
    pub output: OutputSpec,
    /// Match-action pipelines used by switches.
    pub pipelines: Vec<PipelineSpec>,
    /// Latency-Based Forwarding: which switches run it, their settings, FIB overrides.
    pub lbf: Option<LbfScenario>,
    /// What is valid but most likely not meant (a flow no link path joins: every packet
    /// dropped as `no-route`), for `latnet check` and `latnet run` to say.
    pub warnings: Vec<ScenarioError>,
}

/// The largest `[sim] dilation`.
pub const MAX_DILATION: u32 = 1000;

/// The default address of node `i`: 10.0.0.0 + i + 1.
pub fn default_address(i: usize) -> Ipv4Addr {
    Ipv4Addr::from(0x0a00_0000u32.wrapping_add(i as u32 + 1))
}

#[cfg(test)]
mod tests;
