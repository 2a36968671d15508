//! What a [`SwitchCore`] reports besides the frames: per-epoch AQM figures, captures, hop
//! records, sampled queue series and the large-flow and LBF counters.

use super::*;

impl SwitchCore {
    /// The dual-queue AQM report of port `i` (if its queue is one), with epochs and times
    /// counted from the experiment's time zero; the control trace only `with_trace`.
    pub fn aqm_report(
        &self,
        i: usize,
        with_trace: bool,
    ) -> Option<latnet_dataplane::queue::AqmReport> {
        Some(self.ports.get(i)?.queue.aqm_report_with(with_trace)?.since(self.run_start))
    }

    /// Capture every frame the emulated ports transmit from now on, as the simulator's
    /// `[output] pcap` does: one capture per port, stamped at the start of the frame's
    /// transmission, with its bytes after the transmit-time updates; frames lost on the link are
    /// not in it. A stamp is the switch's clock plus `offset_ns` (the runner counts from the
    /// experiment's time zero; an instant before the stamps' zero is stamped 0). Returns each
    /// port's file name as the simulator names it ([`latnet_sim::results::capture_names`] over
    /// every port of the scenario: `<node>-<peer>.pcap`, `<node>-<peer>.1.pcap` for the second
    /// of parallel links, ...), so that the switches of a run name no two ports alike; records
    /// (without the file header, see [`latnet_sim::pcap::new_capture`]) are collected with
    /// [`Self::take_capture`].
    pub fn enable_capture(&mut self, sc: &Scenario, offset_ns: i64) -> Vec<String> {
        self.capture = Some((vec![Vec::new(); self.ports.len()], offset_ns));
        let pairs = self
            .topo
            .ports
            .iter()
            .map(|t| (sc.nodes[t.node].name.as_str(), sc.nodes[t.peer].name.as_str()));
        let mut names = latnet_sim::results::capture_names(pairs);
        self.ports.iter().map(|p| std::mem::take(&mut names[p.global])).collect()
    }

    /// Record every transmission of a stamped packet of a scenario flow from now on (the
    /// packets [`Self::hop_latency`] measures), as the simulator's per-packet `hops.csv` does:
    /// records of [`HOP_RECORD_BYTES`] (CSV rows under [`HOP_RECORDS_HEADER`] once passed to
    /// [`hop_records_csv`]), instants on the switch's clock plus `offset_ns` (as
    /// [`Self::enable_capture`] stamps them), collected with [`Self::swap_hop_records`].
    pub fn enable_hop_records(&mut self, offset_ns: i64) {
        self.hop_log = Some(HopLog::new(offset_ns));
    }

    /// The hop records written so far, if recording and there are at least `at_least` bytes of
    /// them: swapped with `spare` (which should be empty), as [`Self::swap_capture`] does.
    pub fn swap_hop_records(&mut self, at_least: usize, spare: &mut Vec<u8>) -> bool {
        self.hop_log.as_mut().is_some_and(|log| log.swap(at_least, spare))
    }

    /// Port `i`'s captured records, if capturing and there are at least `at_least` bytes of
    /// them (and at least one): swapped into `spare` (emptied first), whose allocation the port
    /// goes on with. Returns whether it took them.
    pub fn swap_capture(&mut self, i: usize, at_least: usize, spare: &mut Vec<u8>) -> bool {
        let Some(buf) = self.capture.as_mut().and_then(|c| c.0.get_mut(i)) else { return false };
        if buf.is_empty() || buf.len() < at_least {
            return false;
        }
        spare.clear();
        std::mem::swap(buf, spare);
        true
    }

    /// [`Self::swap_capture`] into a new buffer.
    pub fn take_capture(&mut self, i: usize, at_least: usize) -> Option<Vec<u8>> {
        let mut out = Vec::new();
        self.swap_capture(i, at_least, &mut out).then_some(out)
    }

    /// Sample every emulated port's queue each `interval` from the experiment's time zero
    /// until `end` (its duration and drain), as the simulator's `[output] queues` does: per port
    /// the packets and bytes waiting at the instant (the frame in transmission not counted) and
    /// the most waiting at any instant since the previous sample. A sample is taken before
    /// anything else happening at its instant. Rows come back from
    /// [`Self::take_queue_series`], stamped from the time zero, with the global port index. A
    /// zero interval takes none.
    pub fn enable_queue_series(&mut self, interval: Duration, end: Duration) {
        if interval.is_zero() {
            return;
        }
        let zero = Time::ZERO + self.run_start;
        self.queue_series = Some(QueueSampler {
            interval,
            next: zero + interval,
            last: zero + end,
            peak: vec![(0, 0); self.ports.len()],
            rows: Vec::new(),
        });
    }

    /// The queue samples taken so far (see [`Self::enable_queue_series`]).
    pub fn take_queue_series(&mut self) -> Vec<QueueRow> {
        self.queue_series.as_mut().map(|s| std::mem::take(&mut s.rows)).unwrap_or_default()
    }

    /// Take the samples due at or before `t`.
    pub(super) fn sample_queues(&mut self, t: Time) {
        let Some(s) = &mut self.queue_series else { return };
        while s.next <= t && s.next <= s.last {
            let at = s.next.as_nanos() - self.run_start.as_nanos();
            for (p, peak) in self.ports.iter().zip(&mut s.peak) {
                let (pkts, bytes) = (p.queue.len() as u64, p.queue.byte_len().get());
                s.rows.push(QueueRow {
                    t_ns: at,
                    port: p.global as u32,
                    packets: pkts,
                    bytes,
                    max_packets: peak.0.max(pkts),
                    max_bytes: peak.1.max(bytes),
                });
                *peak = (pkts, bytes);
            }
            s.next += s.interval;
        }
    }

    /// What the large-flow counter did, if this switch has one.
    pub fn large_flow_stats(&self) -> Option<latnet_dataplane::flow_counter::CounterStats> {
        self.large_flows.as_ref().map(|c| *c.stats())
    }

    /// What Latency-Based Forwarding did here, if the scenario uses it: the forwarder's
    /// counters (a switch running it) and notification records (only `with_notifications`,
    /// timed from the experiment's time zero, see [`SwitchCore::new_timed`]), and the damper
    /// violations of the senders whose queues this switch emulates.
    pub fn lbf_stats(&self, with_notifications: bool) -> Option<crate::stats::LbfStats> {
        let state = self.lbf.as_ref()?;
        let fwd = match &self.fwd {
            Forwarder::Lbf(l) => Some(l),
            _ => None,
        };
        let (notes, total) = fwd.map_or((&[][..], 0), |l| l.notifications());
        let shift = self.run_start.as_nanos();
        Some(crate::stats::LbfStats {
            counters: fwd.map(|l| l.counters.clone()),
            notifications: if with_notifications {
                notes
                    .iter()
                    .map(|n| latnet_sim::lbf::Notification {
                        time_ns: n.time_ns.saturating_sub(shift),
                        ..n.clone()
                    })
                    .collect()
            } else {
                Vec::new()
            },
            notifications_total: total,
            sender_damper_violations: state
                .flow_results()
                .iter()
                .filter(|f| f.sender_damper_violations > 0)
                .map(|f| (f.flow.clone(), f.sender_damper_violations))
                .collect(),
        })
    }
}
