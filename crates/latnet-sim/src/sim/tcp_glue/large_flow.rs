//! The host side of switch-assisted TCP pacing (seed 003, Kfoury et al.): senders of
//! `large_flow = true` flows register on their SYN, read the count `N` and the bottleneck
//! rate `C` the switches report (in the SYN-ACK, then on later packets when `N` changes) and
//! pace at `C / N`.
//!
//! * **Register**: the client's SYN (and a retransmitted SYN) carries a REGISTER option
//!   ([`latnet_wire::large_flow`]). FIN and RST end the registration at the switch; nothing
//!   else is needed here.
//! * **Read**: every packet arriving at a host that sends a large flow is checked for the
//!   option; a malformed one is dropped and counted (`malformed-option` at the host). A filled
//!   REPORT on a packet of a large flow's connection, whose `(N, C)` differs from the last one
//!   applied, re-paces the flow. With `bottleneck_rate` the flow divides that rate instead of
//!   the reported one.
//! * **Apply** (`large_flow_pacing`), from the share `s = C / N` of the bottleneck (bits on
//!   its wire, so the frame overhead `o` of the host's own link stands in for the bottleneck's
//!   and a frame of `S` bytes, MSS `M`):
//!   * `per-connection`: the connection's `SO_MAX_PACING_RATE`-like cap, a payload rate:
//!     `s * M / (S + o)`;
//!   * `htb`: the host's egress HTB-like shaper (`kind = "htb"`): root and class rates
//!     `k * s * S / (S + o)` where `k` is the number of the host's large flows that are
//!     running with `htb` pacing (one DTN per flow in the seed: `k = 1`);
//!   * `fq`: the host's egress FQ-like queue (`kind = "fq"`): per-flow `maxrate`
//!     `s * S / (S + o)`;
//!   * `none`: nothing (the counter and reports alone).
//!
//! The scenario loader checks that an `htb` or `fq` flow's host has that queue kind on its
//! links. What was learned and applied is in the flow's TCP result (`large_flow`).

use super::super::Simulator;
use crate::tcp::app::LargeFlowPacing;
use crate::tcp::report::{LargeFlowChange, LargeFlowHostResult};
use crate::tcp::Segment;
use latnet_dataplane::{AnyQueue, DropReason};
use latnet_units::{Rate, Rounding};
use latnet_wire::{
    large_flow_option, set_large_flow_option, LargeFlowMsg, LargeFlowOption, TcpFlags,
};

/// One large flow's sender state.
#[derive(Debug, Clone)]
struct LfFlow {
    mode: LargeFlowPacing,
    reports: u64,
    last: Option<(u16, u64)>,
    changes: Vec<LargeFlowChange>,
}

/// The host agents of a simulation.
#[derive(Debug, Default)]
pub(in crate::sim) struct HostAgents {
    /// Per scenario flow: its sender state if it is a large flow.
    flows: Vec<Option<LfFlow>>,
    /// Per node: it sends a large flow (arriving packets are checked for the option).
    hosts: Vec<bool>,
}

impl HostAgents {
    pub(super) fn new(sc: &crate::Scenario) -> HostAgents {
        let mut hosts = vec![false; sc.nodes.len()];
        let flows = sc
            .flows
            .iter()
            .map(|f| {
                let mode = f.traffic.tcp()?.large_flow_mode()?;
                hosts[f.src] = true;
                Some(LfFlow { mode, reports: 0, last: None, changes: Vec::new() })
            })
            .collect();
        HostAgents { flows, hosts }
    }

    /// The result of scenario flow `i`.
    pub(super) fn result(&self, i: usize) -> Option<LargeFlowHostResult> {
        let f = self.flows.get(i)?.as_ref()?;
        Some(LargeFlowHostResult {
            pacing: f.mode.as_str().to_owned(),
            reports: f.reports,
            changes: f.changes.clone(),
        })
    }

    fn is_large(&self, flow: u32) -> bool {
        self.flows.get(flow as usize).is_some_and(Option::is_some)
    }
}

/// `rate * num / den`, rounded down.
fn scale(rate: u64, num: u64, den: u64) -> u64 {
    latnet_units::mul_div(u128::from(rate), u128::from(num), u128::from(den.max(1)), Rounding::Down)
        .unwrap_or(u64::MAX)
}

impl Simulator {
    /// A frame of client segment `seg` of accounting record `acct` is being built: a large
    /// flow's SYN gets the REGISTER option.
    pub(super) fn lf_on_emit(&self, acct: u32, seg: &Segment, data: &mut Vec<u8>) {
        if seg.has(TcpFlags::SYN) && !seg.has(TcpFlags::ACK) && self.tcp.lf.is_large(acct) {
            // A SYN has room for the 12 option bytes; if not, the flow just stays unregistered.
            let _ = set_large_flow_option(data, &LargeFlowOption::new(LargeFlowMsg::Register));
        }
    }

    /// A frame arrived at host `node`: read the large-flow option if the host sends a large
    /// flow. `Err` means malformed: drop it.
    pub(super) fn lf_read(
        &self,
        node: usize,
        data: &[u8],
    ) -> Result<Option<LargeFlowOption>, DropReason> {
        if !self.tcp.lf.hosts.get(node).copied().unwrap_or(false) {
            return Ok(None);
        }
        match large_flow_option(data) {
            Ok(o) => Ok(o.filter(|o| o.msg == LargeFlowMsg::Report && o.filled())),
            Err(_) => Err(DropReason::MalformedOption),
        }
    }

    /// Endpoint `id` received a filled REPORT `o`: re-pace if it is a large flow's client and
    /// what it says changed.
    pub(super) fn lf_apply(&mut self, id: u32, o: LargeFlowOption) {
        let now = self.now;
        let Some(e) = self.tcp.eps.get(id as usize).and_then(Option::as_ref) else { return };
        if !e.client {
            return;
        }
        let (flow, node, peer) = (e.flow as usize, e.node, e.peer);
        let Some(spec) = self.tcp.flows[flow].as_ref() else { return };
        let bottleneck =
            spec.spec.bottleneck_rate.map_or(u64::from(o.rate_kbps) * 1000, |r| r.bps());
        let mss = u64::from(spec.cfg.mss);
        let frame = u64::from(self.sc.flows[flow].size);
        let Some(lf) = self.tcp.lf.flows.get_mut(flow).and_then(Option::as_mut) else { return };
        lf.reports += 1;
        let count = o.count.max(1);
        if lf.last == Some((count, bottleneck)) {
            return;
        }
        lf.last = Some((count, bottleneck));
        let mode = lf.mode;
        let port = self.topo.fib[node][peer];
        let overhead = match port {
            crate::net::NO_PORT => 0,
            p => u64::from(self.topo.ports[p as usize].overhead),
        };
        let share = bottleneck / u64::from(count);
        let rate = match mode {
            LargeFlowPacing::None => 0,
            LargeFlowPacing::PerConnection => {
                let r = scale(share, mss, frame + overhead).max(1);
                if let Some(e) = self.tcp.eps[id as usize].as_mut() {
                    e.conn.set_max_pacing_rate(Some(Rate::from_bps(r)));
                }
                r
            }
            LargeFlowPacing::Htb | LargeFlowPacing::Fq => {
                let per_flow = scale(share, frame, frame + overhead).max(1);
                let k = if mode == LargeFlowPacing::Htb { self.lf_running_on(node) } else { 1 };
                let r = per_flow.saturating_mul(k.max(1));
                if port != crate::net::NO_PORT {
                    let p = port as usize;
                    match &mut self.ports[p].queue {
                        AnyQueue::Htb(q) => q.reshape(now, Rate::from_bps(r)),
                        AnyQueue::Fq(q) => q.set_maxrate(Some(Rate::from_bps(r))),
                        _ => {} // refused by the scenario loader
                    }
                    if !self.ports[p].busy {
                        self.try_transmit(p);
                    }
                }
                r
            }
        };
        if let Some(lf) = self.tcp.lf.flows.get_mut(flow).and_then(Option::as_mut) {
            lf.changes.push(LargeFlowChange {
                t_ns: now.as_nanos(),
                count,
                bottleneck_bps: bottleneck,
                rate_bps: rate,
            });
        }
    }

    /// Large flows with `htb` pacing whose client connection runs on host `node`.
    fn lf_running_on(&self, node: usize) -> u64 {
        self.tcp
            .flows
            .iter()
            .zip(&self.tcp.lf.flows)
            .filter(|(f, lf)| {
                lf.as_ref().is_some_and(|l| l.mode == LargeFlowPacing::Htb)
                    && f.as_ref().is_some_and(|f| f.src == node && f.client.is_some())
            })
            .count() as u64
    }
}
