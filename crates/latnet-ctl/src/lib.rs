//! The Chameleon controller (Van Bemten et al., "Chameleon: Predictable Latency and High
//! Utilization with Queue-Aware and Adaptive Source Routing", CoNEXT 2020) as a library, with
//! the Silo and QJump baselines of its evaluation.
//!
//! A [`Controller`] holds a [`Topology`], a [`CtlConfig`] (queues, delay budgets and buffers
//! per port, per-hop constant, network-calculus options, routing, rerouting, tag scheme) and
//! the reservations of the admitted flows. [`Controller::request`] admits a [`FlowRequest`]
//! (source and destination host, token bucket, deadline) if a path on the queue-level graph
//! keeps every queue it touches — and every lower-priority queue at those ports — strictly
//! within its delay budget and buffer (exact network calculus from `latnet-nc`), rerouting
//! admitted flows when that is the only way (the paper's Fig. 6). An admitted flow's
//! [`Embedding`] gives its path, queue per hop, tag stack and the shaper for its source host.
//!
//! The controller is sans-IO and reads no clock. Decisions are exact and reproducible:
//! reservations are integer aggregates (removing a flow restores the previous state exactly),
//! bounds are exact rationals, and every tie is broken by index.
//!
//! | module | what |
//! |---|---|
//! | [`topo`] | topologies: fat-tree of any even `k` with any hosts per edge, TOML files |
//! | [`config`] | queues, budgets (the paper's sets for 1/2/4/8 queues), buffers, routing, rerouting, tags |
//! | [`state`] | per-port reservations and the per-queue access check |
//! | [`route`] | least-delay / min-hop search with path-dependent access checks, LARAC |
//! | [`controller`] | admission, reservation, release, rerouting, tags and shapers |
//! | [`qjump`] | the QJump baseline |
//! | [`workload`] | the paper's flow types (Table 1) and scenarios (Table 2), seeded |
//! | [`eval`] | the admission study: runs until the first rejection, utilisation, runtime |
//! | [`verify`] | packet-level cross-check of an admitted set in `latnet-sim` |

mod checkpoint;
pub mod config;
pub mod controller;
pub mod eval;
pub mod live;
pub mod qjump;
pub mod route;
pub mod state;
pub mod topo;
pub mod verify;
pub mod workload;

pub use config::{CtlConfig, QueueSet, RerouteConfig, Routing, TagScheme, DEFAULT_MAX_TAGS};
pub use controller::{
    Admission, Checkpoint, Controller, Embedding, FlowId, FlowRequest, Hop, Rejection, Shaper,
    Stats,
};
pub use eval::{EvalOptions, RunResult, System, SystemKind};
pub use latnet_nc::BurstModel;
pub use qjump::{Qjump, QjumpConfig};
pub use route::PathHop;
pub use topo::{Link, Node, NodeId, NodeKind, PortId, Topology, TopologyError};
pub use workload::{Workload, FLOW_TYPES, SCENARIOS};
