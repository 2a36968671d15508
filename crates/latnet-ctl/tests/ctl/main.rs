//! Integration tests of the controller: admission against hand-computed network calculus,
//! properties (monotone bounds, exact release), invalid requests, rerouting, topologies, the
//! study driver, and the packet-level cross-check in latnet-sim.

mod admission;
mod checkpoint;
mod crosscheck;
mod topology;
mod transition;

use latnet_ctl::{Controller, CtlConfig, FlowRequest, Topology};
use latnet_units::{Bytes, Duration, Rate};
use std::sync::Arc;

/// Two edge switches `s1`, `s2` joined over two spines `m1`, `m2` (1 Gbit/s links); hosts
/// `h1`, `h2` on `s1`, `h3` on `s2`, `h6` on `m1`: the topology of the paper's Fig. 6, where
/// a flow h2 -> h3 over `m1` is moved to `m2` to make room for h1 -> h6.
pub const FIG6: &str = include_str!("../../../../experiments/chameleon/fig6.toml");

pub fn fat_tree(k: usize, m: usize) -> Arc<Topology> {
    Arc::new(Topology::fat_tree(k, m, Rate::from_gbps(1)).unwrap_or_else(|e| panic!("{e}")))
}

pub fn controller(topo: &Arc<Topology>, cfg: CtlConfig) -> Controller {
    Controller::new(topo.clone(), cfg).unwrap_or_else(|e| panic!("{e}"))
}

pub fn req(topo: &Topology, src: &str, dst: &str, mbps: u64, burst: u64, ms: u64) -> FlowRequest {
    FlowRequest {
        src: topo.node_id(src).unwrap_or_else(|| panic!("{src}")),
        dst: topo.node_id(dst).unwrap_or_else(|| panic!("{dst}")),
        rate: Rate::from_mbps(mbps),
        burst: Bytes::new(burst),
        deadline: Duration::from_millis(ms),
    }
}
