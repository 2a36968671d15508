//! A TCP flow's results from its sender's and receiver's accounts
//! ([`crate::tcpflow::TcpSent`], [`crate::tcpflow::TcpRecv`]), in the simulator's terms.

use crate::tcpflow::{TcpRecv, TcpSent};
use latnet_sim::scenario::FlowSpec;
use latnet_sim::stats::LatencyStats;
use latnet_sim::tcp::report::{LargeFlowChange, LargeFlowHostResult, SeriesRow, TcpFlowResult};

/// The simulator's TCP summary of flow `f` (`sent`: its sender's account; `recv`: its
/// receiver's, if the receiver reported).
pub(super) fn summary(f: &FlowSpec, sent: &TcpSent, recv: Option<&TcpRecv>) -> TcpFlowResult {
    let empty = TcpRecv::default();
    let r = recv.unwrap_or(&empty);
    let start = sent.t0_ns + f.start.as_nanos();
    let active_ns = r.last_ns.saturating_sub(start);
    let spec = f.traffic.tcp();
    let bytes = spec.and_then(|t| t.bytes).map(|b| b.get());
    let completed = bytes.is_some_and(|b| r.eof && r.bytes == b);
    let mut rtt = LatencyStats::new();
    for s in sent.samples.iter().filter(|s| s.srtt_ns > 0) {
        rtt.record(s.srtt_ns);
    }
    TcpFlowResult {
        cc: sent.cc.clone(),
        ecn: sent.ecn,
        delivered_bytes: r.bytes,
        goodput_bps: if active_ns == 0 { 0.0 } else { r.bytes as f64 * 8e9 / active_ns as f64 },
        segments_sent: sent.segments_sent,
        retransmits: sent.retransmits,
        rtos: sent.rtos,
        fast_recoveries: None,
        ecn_reductions: None,
        ece_acks: None,
        ce_marks: sent.ce_marks,
        rtt_ns: rtt.summary(),
        connections: 1,
        completed: u64::from(completed),
        aborted: u64::from(!completed && (!sent.connected || sent.error.is_some())),
        completion_ns: completed.then_some(active_ns),
        fct_ns: None,
        large_flow: sent.large_flow.as_ref().map(|l| LargeFlowHostResult {
            pacing: l.pacing.clone(),
            reports: l.reports,
            changes: l
                .changes
                .iter()
                .map(|&(t_ns, count, bottleneck_bps, rate_bps)| LargeFlowChange {
                    t_ns,
                    count,
                    bottleneck_bps,
                    rate_bps,
                })
                .collect(),
        }),
    }
}

/// The time-series rows of flow `index`, one per sample of its sender at the end of an
/// interval of `interval_ns`: the bytes read in the interval from the receiver's bins, the
/// rest from `TCP_INFO`.
pub(super) fn series(
    index: usize,
    interval_ns: u64,
    sent: &TcpSent,
    recv: Option<&TcpRecv>,
) -> Vec<SeriesRow> {
    let bins = recv.map_or(&[][..], |r| &r.bins[..]);
    let mut before = (0, 0);
    sent.samples
        .iter()
        .filter(|s| s.t_ns % interval_ns == 0)
        .map(|s| {
            // the bin that ends at the sample
            let k = (s.t_ns / interval_ns).checked_sub(1).map(|k| k as usize);
            let delivered = k.and_then(|k| bins.get(k)).copied().unwrap_or(0);
            let row = SeriesRow {
                flow: index as u32,
                t_ns: s.t_ns,
                delivered_bytes: delivered,
                goodput_bps: delivered as f64 * 8e9 / interval_ns as f64,
                cwnd: s.cwnd,
                in_flight: s.in_flight,
                srtt_ns: s.srtt_ns,
                rtt_samples: None,
                rtt_min_ns: None,
                rtt_mean_ns: None,
                rtt_max_ns: None,
                retransmits: s.retransmits.saturating_sub(before.0),
                ce_marks: s.ce_marks.saturating_sub(before.1),
                ece_acks: None,
                pacing_bps: s.pacing_bps,
            };
            before = (s.retransmits, s.ce_marks);
            row
        })
        .collect()
}
