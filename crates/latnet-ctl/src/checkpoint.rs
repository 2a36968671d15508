//! A [`Checkpoint`] as JSON: what the controller service keeps as its snapshot and serves at
//! `GET /snapshot`, and what the Python bindings restore an in-process controller from.
//!
//! ```json
//! {"next_id": 42, "rerouted": [3, 17],
//!  "stats": {"admitted": 40, "rejected": 9, "invalid": 0, "reroutes": 2,
//!            "admitted_after_reroute": 1, "checks": 123456},
//!  "flows": [{"id": 3, "src": "h0_0_0", "dst": "h3_1_1", "rate_bps": 2000000,
//!             "burst_bytes": 3000, "deadline_ns": 5000000, "hops": [[0, 2], [17, 1], ...]}]}
//! ```
//!
//! `hops` are `[port, queue]` pairs, ports numbered as the topology numbers them (the service
//! refuses to open a store made with another topology). Other keys of a flow (the service's
//! `match`) are left to the caller.

use crate::controller::{Checkpoint, FlowRequest, Stats};
use crate::route::PathHop;
use crate::topo::Topology;
use latnet_units::{Bytes, Duration, Rate};
use serde_json::{json, Value};

impl Checkpoint {
    /// The checkpoint as JSON (hosts by name).
    pub fn to_json(&self, topo: &Topology) -> Value {
        let name = |n: usize| topo.nodes().get(n).map_or_else(String::new, |x| x.name.clone());
        let s = &self.stats;
        json!({
            "next_id": self.next_id,
            "rerouted": self.rerouted,
            "stats": {"admitted": s.admitted, "rejected": s.rejected, "invalid": s.invalid,
                      "reroutes": s.reroutes, "admitted_after_reroute": s.admitted_after_reroute,
                      "checks": s.checks},
            "flows": self.flows.iter().map(|(id, r, path)| json!({
                "id": id, "src": name(r.src), "dst": name(r.dst), "rate_bps": r.rate.bps(),
                "burst_bytes": r.burst.get(), "deadline_ns": r.deadline.as_nanos(),
                "hops": path.iter().map(|h| json!([h.port, h.queue])).collect::<Vec<_>>(),
            })).collect::<Vec<_>>(),
        })
    }

    /// Read a checkpoint written by [`Checkpoint::to_json`]; errors name the key. Whether it
    /// describes a state the controller can reach is [`crate::Controller::restore`]'s to check.
    pub fn from_json(topo: &Topology, v: &Value) -> Result<Checkpoint, String> {
        let num = |v: &Value, key: &str| -> Result<u64, String> {
            v.get(key)
                .and_then(Value::as_u64)
                .ok_or_else(|| format!("{key}: expected a whole number >= 0"))
        };
        let list = |v: &'_ Value, key: &str| -> Result<Vec<Value>, String> {
            v.get(key)
                .and_then(Value::as_array)
                .cloned()
                .ok_or_else(|| format!("{key}: expected a list"))
        };
        let st = v.get("stats").ok_or("stats: expected an object")?;
        let stat = |k: &str| num(st, k).map_err(|e| format!("stats.{e}"));
        let stats = Stats {
            admitted: stat("admitted")?,
            rejected: stat("rejected")?,
            invalid: stat("invalid")?,
            reroutes: stat("reroutes")?,
            admitted_after_reroute: stat("admitted_after_reroute")?,
            checks: stat("checks")?,
        };
        let rerouted = list(v, "rerouted")?
            .iter()
            .map(|x| x.as_u64().ok_or_else(|| "rerouted: expected flow ids".to_owned()))
            .collect::<Result<Vec<_>, _>>()?;
        let mut flows = Vec::new();
        for (i, f) in list(v, "flows")?.iter().enumerate() {
            let at = |e: String| format!("flows[{i}].{e}");
            let host = |key: &str| -> Result<usize, String> {
                let n = f
                    .get(key)
                    .and_then(Value::as_str)
                    .ok_or_else(|| at(format!("{key}: expected a host name")))?;
                topo.node_id(n).ok_or_else(|| at(format!("{key}: no node {n:?}")))
            };
            let r = FlowRequest {
                src: host("src")?,
                dst: host("dst")?,
                rate: Rate::from_bps(num(f, "rate_bps").map_err(at)?),
                burst: Bytes::new(num(f, "burst_bytes").map_err(at)?),
                deadline: Duration::from_nanos(num(f, "deadline_ns").map_err(at)?),
            };
            let hops = list(f, "hops")
                .map_err(at)?
                .iter()
                .map(|h| {
                    let pair = h.as_array().filter(|p| p.len() == 2);
                    let (port, queue) = pair
                        .and_then(|p| Some((p[0].as_u64()?, u8::try_from(p[1].as_u64()?).ok()?)))
                        .ok_or_else(|| at("hops: expected [port, queue] pairs".into()))?;
                    let port =
                        usize::try_from(port).map_err(|_| at("hops: no such port".into()))?;
                    Ok(PathHop { port, queue })
                })
                .collect::<Result<Vec<_>, String>>()?;
            flows.push((num(f, "id").map_err(at)?, r, hops));
        }
        Ok(Checkpoint { flows, next_id: num(v, "next_id")?, stats, rerouted })
    }
}
