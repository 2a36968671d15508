//! A TCP flow's results from its sender's and receiver's accounts
//! ([`crate::tcpflow::TcpSent`], [`crate::tcpflow::TcpRecv`]), in the simulator's terms.

use crate::tcpflow::{TcpRecv, TcpSample, TcpSent};
use latnet_sim::scenario::FlowSpec;
use latnet_sim::stats::LatencyStats;
use latnet_sim::tcp::report::{
    LargeFlowChange, LargeFlowHostResult, SeriesRow, SlowStartReport, TcpFlowResult,
};
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
        loss_probes: if rr { None } else { sent.loss_probes },
        ecn_reductions: None,
        ece_acks: None,
        ce_marks: sent.ce_marks,
        rtt_ns: rtt.summary(),
        connections: if rr { sent.conns.len() as u64 } else { 1 },
        completed,
        aborted,
        completion_ns: (!rr && completed == 1).then_some(active_ns),
        fct_ns: fct.summary(),
        slow_start: if rr { None } else { slow_start(sent) },
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

/// The first slow-start threshold among the sender's samples, and why, as far as the kernel
/// tells: HyStart's namespace counters (when they are the flow's own), else a retransmission
/// or a CE echo by then.
fn slow_start(sent: &TcpSent) -> Option<SlowStartReport> {
    let s = sent.samples.iter().find(|s| s.ssthresh.is_some())?;
    let cause = match sent.hystart {
        Some((train, delay)) if train > 0 && delay == 0 => Some("hystart-train"),
        Some((train, delay)) if train == 0 && delay > 0 => Some("hystart-delay"),
        // (a timeout started slow start over and HyStart ended it again)
        Some((train, delay)) if train > 0 && delay > 0 => Some("hystart"),
        _ if s.retransmits > 0 => Some("loss"),
        _ if s.ce_marks > 0 => Some("ecn"),
        _ => None,
    };
    Some(SlowStartReport {
        t_ns: s.t_ns,
        ssthresh_bytes: s.ssthresh?,
        cause: cause.map(str::to_owned),
    })
}

/// The time-series rows of flow `index`, one per sample of its sender at the end of an
/// interval of `interval_ns`: the bytes read in the interval from the receiver's bins (and a
/// tcp-rr client's), the rest from `TCP_INFO` (a tcp-rr flow's server's connections added to
/// its clients', as the simulator adds up both ends; the clients' smoothed RTT first).
pub(super) fn series(
    index: usize,
    interval_ns: u64,
    sent: &TcpSent,
    recv: Option<&TcpRecv>,
) -> Vec<SeriesRow> {
    let bins = recv.map_or(&[][..], |r| &r.bins[..]);
    let served = recv.map_or(&[][..], |r| &r.samples[..]);
    let mut before = (0, 0);
    sent.samples
        .iter()
        .filter(|s| s.t_ns % interval_ns == 0)
        .map(|s| match served.binary_search_by_key(&s.t_ns, |r| r.t_ns) {
            Ok(k) => both(s, &served[k]),
            // (none at this instant, as after the server's last: its counts so far, nothing
            // open)
            Err(k) => k.checked_sub(1).map_or(*s, |k| {
                let r = &served[k];
                let so_far = TcpSample {
                    retransmits: r.retransmits,
                    ce_marks: r.ce_marks,
                    ..TcpSample::default()
                };
                both(s, &so_far)
            }),
        })
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

/// Two ends' samples at one instant, added up.
fn both(a: &TcpSample, b: &TcpSample) -> TcpSample {
    TcpSample {
        t_ns: a.t_ns,
        cwnd: a.cwnd + b.cwnd,
        in_flight: a.in_flight + b.in_flight,
        srtt_ns: if a.srtt_ns > 0 { a.srtt_ns } else { b.srtt_ns },
        retransmits: a.retransmits + b.retransmits,
        ce_marks: a.ce_marks + b.ce_marks,
        pacing_bps: a.pacing_bps + b.pacing_bps,
        ssthresh: a.ssthresh,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tcpflow::TcpSample;

    /// The first sample with a threshold dates it; HyStart's counters, when the flow's own,
    /// name the detector, else what the sample had counted by then.
    #[test]
    fn slow_start_exit_is_the_first_threshold_seen_and_its_cause() {
        let s = |t_ms: u64, ssthresh: Option<u64>, retransmits: u64, ce_marks: u64| TcpSample {
            t_ns: t_ms * 1_000_000,
            ssthresh,
            retransmits,
            ce_marks,
            ..TcpSample::default()
        };
        let sent = |hystart, samples| TcpSent { hystart, samples, ..TcpSent::default() };
        let samples =
            vec![s(10, None, 0, 0), s(20, Some(300_000), 2, 0), s(30, Some(200_000), 9, 0)];
        let cause = |h| slow_start(&sent(h, samples.clone())).and_then(|r| r.cause);
        let r = slow_start(&sent(Some((0, 1)), samples.clone())).unwrap();
        assert_eq!((r.t_ns, r.ssthresh_bytes), (20_000_000, 300_000));
        assert_eq!(r.cause.as_deref(), Some("hystart-delay"));
        assert_eq!(cause(Some((2, 0))).as_deref(), Some("hystart-train"));
        assert_eq!(cause(Some((1, 1))).as_deref(), Some("hystart"));
        // no HyStart exit (or counters not the flow's own): the retransmission by then
        assert_eq!(cause(Some((0, 0))).as_deref(), Some("loss"));
        assert_eq!(cause(None).as_deref(), Some("loss"));
        let ecn = vec![s(10, Some(100_000), 0, 3)];
        assert_eq!(slow_start(&sent(None, ecn)).unwrap().cause.as_deref(), Some("ecn"));
        let quiet = vec![s(10, Some(100_000), 0, 0)];
        assert_eq!(slow_start(&sent(None, quiet)).unwrap().cause, None, "not told");
        assert_eq!(slow_start(&sent(Some((0, 0)), vec![s(10, None, 0, 0)])), None);
    }

    /// A tcp-rr flow's rows add its server's samples to its clients' at the same instant:
    /// windows, bytes in flight, pacing rates and the retransmissions of the interval (from
    /// both ends' counts so far); the clients' smoothed RTT, the server's when they have none.
    /// Samples between rows are left out; a row after the server's last sample keeps its
    /// counts so far.
    #[test]
    fn a_request_response_flows_rows_add_up_both_ends() {
        let ms = 1_000_000;
        let s = |t: u64, cwnd: u64, srtt_ns: u64, retransmits: u64| TcpSample {
            t_ns: t * ms,
            cwnd,
            in_flight: cwnd / 2,
            srtt_ns,
            retransmits,
            pacing_bps: cwnd * 8,
            ..TcpSample::default()
        };
        let sent = TcpSent {
            samples: vec![
                s(10, 1, 5, 0),
                s(100, 14_480, 0, 1),
                s(200, 2_896, 7, 2),
                s(300, 0, 0, 4),
            ],
            bins: vec![1_000, 0, 30_000],
            ..TcpSent::default()
        };
        let recv = TcpRecv {
            bins: vec![2_000, 1_000],
            samples: vec![s(100, 28_960, 9, 3), s(200, 0, 0, 3)],
            ..TcpRecv::default()
        };
        let rows = series(4, 100 * ms, &sent, Some(&recv));
        let got: Vec<_> = rows
            .iter()
            .map(|r| {
                (r.t_ns / ms, r.delivered_bytes, r.cwnd, r.in_flight, r.srtt_ns, r.retransmits)
            })
            .collect();
        assert_eq!(
            got,
            [
                (100, 3_000, 43_440, 21_720, 9, 4),
                (200, 1_000, 2_896, 1_448, 7, 1),
                (300, 30_000, 0, 0, 0, 2),
            ]
        );
        assert_eq!(rows[0].pacing_bps, 43_440 * 8);
        // without the server's samples (a bulk flow's receiver takes none): the clients' alone
        let alone = series(4, 100 * ms, &sent, None);
        assert_eq!(alone.iter().map(|r| r.cwnd).collect::<Vec<_>>(), [14_480, 2_896, 0]);
    }
}
