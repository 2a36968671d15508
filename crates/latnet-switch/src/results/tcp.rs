//! A TCP flow's results from its sender's and receiver's accounts
//! ([`crate::tcpflow::TcpSent`], [`crate::tcpflow::TcpRecv`]), in the simulator's terms.

use crate::tcpflow::{TcpRecv, TcpSent};
use latnet_sim::scenario::FlowSpec;
use latnet_sim::stats::LatencyStats;
use latnet_sim::tcp::report::{LargeFlowChange, LargeFlowHostResult, SeriesRow, TcpFlowResult};
use latnet_sim::traffic::TrafficSpec;

/// The simulator's TCP summary of flow `f` (`sent`: its sender's account; `recv`: its
/// receiver's, if the receiver reported). Both ends' data segments and retransmissions count,
/// as the simulator counts both endpoints of a flow's connections; a tcp-rr flow's delivered
/// bytes are the requests its server read and the responses its client read.
pub(super) fn summary(f: &FlowSpec, sent: &TcpSent, recv: Option<&TcpRecv>) -> TcpFlowResult {
    let empty = TcpRecv::default();
    let r = recv.unwrap_or(&empty);
    let start = sent.t0_ns + f.start.as_nanos();
    let rr = matches!(f.traffic, TrafficSpec::TcpRr(_));
    let bytes = f.traffic.tcp().and_then(|t| t.bytes).map(|b| b.get());
    let mut rtt = LatencyStats::new();
    let mut fct = LatencyStats::new();
    let (mut delivered, mut last, mut completed, mut aborted) = (r.bytes, r.last_ns, 0, 0);
    if rr {
        for c in &sent.conns {
            delivered += c.response_bytes;
            match c.fct_ns {
                Some(ns) => {
                    fct.record(ns);
                    completed += 1;
                    last = last.max(sent.t0_ns + c.start_ns + ns);
                }
                None => aborted += u64::from(c.error.is_some()),
            }
            if c.srtt_ns > 0 {
                rtt.record(c.srtt_ns);
            }
        }
    } else {
        let done = bytes.is_some_and(|b| r.eof && r.bytes == b);
        completed = u64::from(done);
        aborted = u64::from(!done && (!sent.connected || sent.error.is_some()));
        for s in sent.samples.iter().filter(|s| s.srtt_ns > 0) {
            rtt.record(s.srtt_ns);
        }
    }
    let active_ns = last.saturating_sub(start);
    TcpFlowResult {
        cc: sent.cc.clone(),
        ecn: sent.ecn,
        delivered_bytes: delivered,
        goodput_bps: if active_ns == 0 { 0.0 } else { delivered as f64 * 8e9 / active_ns as f64 },
        segments_sent: sent.segments_sent + r.segments_sent,
        retransmits: sent.retransmits + r.retransmits,
        rtos: sent.rtos,
        fast_recoveries: None,
        ecn_reductions: None,
        ece_acks: None,
        ce_marks: sent.ce_marks,
        rtt_ns: rtt.summary(),
        connections: if rr { sent.conns.len() as u64 } else { 1 },
        completed,
        aborted,
        completion_ns: (!rr && completed == 1).then_some(active_ns),
        fct_ns: fct.summary(),
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
/// interval of `interval_ns`: the bytes read in the interval from the receiver's bins (and a
/// tcp-rr client's), the rest from `TCP_INFO`.
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
            // (a tcp-rr flow's: the requests its server read and the responses its clients read)
            let at = |b: &[u64]| k.and_then(|k| b.get(k)).copied().unwrap_or(0);
            let delivered = at(bins) + at(&sent.bins);
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
