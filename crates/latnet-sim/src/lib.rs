//! latnet's deterministic discrete-event simulator.
//!
//! A [`Scenario`] (TOML file: nodes, links, queues, routes, flows) is built into a network of
//! hosts, switches and links whose data plane is `latnet-dataplane`'s sans-IO elements, run in
//! virtual time (integer nanoseconds, events ordered by `(time, tie, sequence)`), and
//! summarized into [`Results`]: per-flow latency (min / mean / percentiles / max, jitter), loss
//! by reason, throughput, per-hop latency, per-port counters, and optionally a record per
//! packet and per hop. Same scenario + same seed = byte-identical results.
//!
//! ```no_run
//! use latnet_sim::{Scenario, Simulator};
//! let sc = Scenario::from_file("experiments/demo.toml".as_ref())?;
//! let res = Simulator::new(sc).run();
//! println!("{}", res.to_json());
//! # Ok::<(), latnet_sim::ScenarioError>(())
//! ```
//!
//! | module | what |
//! |---|---|
//! | [`engine`] | the event queue |
//! | [`scenario`] | scenario files: parsing, validation, errors with file / line / key |
//! | [`net`] | ports and FIB (shortest paths, explicit routes) |
//! | [`traffic`] | sources: CBR, on/off bursts, Poisson, token bucket |
//! | [`sim`] | the run loop: hosts, switches, links |
//! | [`switch`] | forwarding models of switches ([`switch::Forwarder`]) |
//! | [`pipeline_fwd`] | switches classifying with a match-action pipeline and the FFP |
//! | [`lbf`] | Latency-Based Forwarding: the LBF switch, FIB, host stamping, LBF results |
//! | [`srcroute`] | source routing by tag stacks (Chameleon) |
//! | [`tcp`] | TCP: sans-IO connections, congestion controls, pacing, applications |
//! | [`stats`] | latency summaries (HDR histograms), jitter |
//! | [`results`] | JSON / CSV results |
//! | [`pcap`] | packet captures of the links (`[output] pcap = true`) |

pub mod engine;
mod hdr;
pub mod lbf;
pub mod net;
pub mod pcap;
pub mod pipeline_fwd;
pub mod results;
pub mod scenario;
pub mod sim;
pub mod srcroute;
pub mod stats;
pub mod switch;
pub mod tcp;
pub mod traffic;

pub use results::Results;
pub use scenario::{LatencyConvention, Scenario, ScenarioError, Switching, TieBreak};
pub use sim::{Progress, Simulator};

/// Parse, validate and run a scenario file with an optional seed override.
pub fn run_file(path: &std::path::Path, seed: Option<u64>) -> Result<Results, ScenarioError> {
    let mut sc = Scenario::from_file(path)?;
    if let Some(s) = seed {
        sc.sim.seed = s;
    }
    Ok(Simulator::new(sc).run())
}
