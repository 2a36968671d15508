//! What the simulator reports about TCP flows: a summary per flow (in `results.json`) and a
//! time series per flow and interval (`timeseries.csv`).

use crate::stats::Summary;
use serde::Serialize;
use std::fmt::Write as _;

/// TCP summary of one flow (all its connections together).
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct TcpFlowResult {
    /// Congestion control.
    pub cc: String,
    /// ECN negotiated (on the flow's first connection).
    pub ecn: bool,
    /// Bytes delivered in order to the receiving applications.
    pub delivered_bytes: u64,
    /// Delivered bits per second, from the flow's start to its last delivery.
    pub goodput_bps: f64,
    /// Data segments sent, retransmissions included.
    pub segments_sent: u64,
    /// Retransmitted segments.
    pub retransmits: u64,
    /// Retransmission timeouts (`None`: not known; an emulated run reads the kernel's count
    /// where it keeps one, Linux 6.7 on).
    pub rtos: Option<u64>,
    /// Fast recoveries (`None` in emulated runs: Linux keeps no count per connection).
    pub fast_recoveries: Option<u64>,
    /// Tail loss probes sent (`rack_tlp`; emulated runs: the sender namespace's
    /// `TCPLossProbes` when the flow is a tcp-bulk flow and the only one sending over TCP
    /// there, else `None`).
    pub loss_probes: Option<u64>,
    /// ECN window reductions (`None` in emulated runs, as `fast_recoveries`).
    pub ecn_reductions: Option<u64>,
    /// ACKs received with ECN-Echo (`None` in emulated runs, as `fast_recoveries`).
    pub ece_acks: Option<u64>,
    /// Data segments received with CE (emulated runs: the segments the kernel counts as
    /// delivered with a CE echo, `tcpi_delivered_ce`).
    pub ce_marks: u64,
    /// RTT samples (ns; emulated runs: the kernel's smoothed RTT read at every sample of the
    /// time series, every 10 ms without one).
    pub rtt_ns: Option<Summary>,
    /// Connections opened.
    pub connections: u64,
    /// Transfers completed (tcp-bulk with `bytes`: all bytes delivered; tcp-rr: response
    /// complete).
    pub completed: u64,
    /// Connections given up after repeated timeouts.
    pub aborted: u64,
    /// tcp-bulk with `bytes`: from the start to the last byte at the receiver (ns).
    pub completion_ns: Option<u64>,
    /// tcp-rr: flow completion times, SYN to the last response byte (ns).
    pub fct_ns: Option<Summary>,
    /// tcp-bulk: when, where and why slow start first ended (`None`: it did not, or BBR,
    /// which keeps no threshold; tcp-rr flows: not kept).
    pub slow_start: Option<SlowStartReport>,
    /// Switch-assisted pacing: what a large flow's sender learned and applied.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub large_flow: Option<LargeFlowHostResult>,
}

/// The first slow-start threshold of a tcp-bulk connection.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct SlowStartReport {
    /// When it was set, from the scenario's time zero (ns; emulated runs: the first
    /// `TCP_INFO` sample that showed it, at most 10 ms later).
    pub t_ns: u64,
    /// The threshold (bytes).
    pub ssthresh_bytes: u64,
    /// `hystart-train`, `hystart-delay`, `loss`, `ecn` or `timeout` (emulated runs: HyStart's
    /// from the sender namespace's counters when the flow is its host's only TCP flow,
    /// `loss` when segments were retransmitted by then, `ecn` when CE was echoed, else
    /// `null`).
    pub cause: Option<String>,
}

/// What the sender of a large flow (`large_flow = true`) learned from the switches.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct LargeFlowHostResult {
    /// How the share is applied (`per-connection`, `htb`, `fq`, `none`).
    pub pacing: String,
    /// Packets received with a filled REPORT option.
    pub reports: u64,
    /// Every change of what was applied: time, count `N`, the bottleneck rate divided
    /// (bit/s), and the rate set (bit/s: payload for `per-connection`, frames for `htb` and
    /// `fq`; 0 for `none`).
    pub changes: Vec<LargeFlowChange>,
}

/// One change in [`LargeFlowHostResult::changes`].
#[derive(Debug, Clone, Copy, Serialize, PartialEq, Eq)]
pub struct LargeFlowChange {
    /// When the report arrived (ns).
    pub t_ns: u64,
    /// Large flows at the bottleneck.
    pub count: u16,
    /// Bottleneck rate divided by `count` (bit/s).
    pub bottleneck_bps: u64,
    /// Rate applied (bit/s).
    pub rate_bps: u64,
}

/// One interval of one TCP flow.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct SeriesRow {
    /// Flow index.
    pub flow: u32,
    /// End of the interval (ns).
    pub t_ns: u64,
    /// Bytes delivered to the receiving applications in the interval.
    pub delivered_bytes: u64,
    /// Goodput over the interval (bit/s).
    pub goodput_bps: f64,
    /// Congestion window at the end of the interval (bytes; all open connections that send).
    pub cwnd: u64,
    /// Bytes in flight at the end of the interval.
    pub in_flight: u64,
    /// Smoothed RTT at the end of the interval (ns; 0 before any sample).
    pub srtt_ns: u64,
    /// RTT samples in the interval (`None` in emulated runs: the kernel's samples are not
    /// seen, only its smoothed RTT).
    pub rtt_samples: Option<u64>,
    /// Smallest RTT sample in the interval (ns).
    pub rtt_min_ns: Option<u64>,
    /// Mean RTT sample in the interval (ns).
    pub rtt_mean_ns: Option<f64>,
    /// Largest RTT sample in the interval (ns).
    pub rtt_max_ns: Option<u64>,
    /// Retransmissions in the interval.
    pub retransmits: u64,
    /// CE-marked data segments received in the interval.
    pub ce_marks: u64,
    /// ECN-Echo ACKs received in the interval (`None` in emulated runs).
    pub ece_acks: Option<u64>,
    /// Pacing rate at the end of the interval (bit/s; 0 unpaced).
    pub pacing_bps: u64,
}

fn opt<T: std::fmt::Display>(v: Option<T>) -> String {
    v.map_or_else(String::new, |v| v.to_string())
}

/// The time series as CSV; `names` maps flow indices to names.
pub fn series_csv(rows: &[SeriesRow], names: &[String]) -> String {
    let mut s = String::from(
        "flow,t_s,delivered_bytes,goodput_bps,cwnd,in_flight,srtt_ns,rtt_samples,rtt_min_ns,\
         rtt_mean_ns,rtt_max_ns,retransmits,ce_marks,ece_acks,pacing_bps\n",
    );
    for r in rows {
        let _ = writeln!(
            s,
            "{},{},{},{},{},{},{},{},{},{},{},{},{},{},{}",
            names.get(r.flow as usize).map_or("", String::as_str),
            r.t_ns as f64 / 1e9,
            r.delivered_bytes,
            r.goodput_bps,
            r.cwnd,
            r.in_flight,
            r.srtt_ns,
            opt(r.rtt_samples),
            opt(r.rtt_min_ns),
            opt(r.rtt_mean_ns),
            opt(r.rtt_max_ns),
            r.retransmits,
            r.ce_marks,
            opt(r.ece_acks),
            r.pacing_bps,
        );
    }
    s
}
