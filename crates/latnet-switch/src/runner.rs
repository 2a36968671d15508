//! The real-time loop: owns `CLOCK_MONOTONIC`, reads frames from the receive rings of every
//! interface, drives [`SwitchCore`], sends what is due in batches, and sleeps in `ppoll` until
//! the next frame or the core's next wake-up.

use crate::core::{Offload, SwitchCore};
use crate::replace::Replacer;
use crate::stats::{RunnerCounters, SwitchStats};
use crate::sys::{self, PacketSocket, VNET_GSO_NONE, VNET_NEEDS_CSUM};
use latnet_sim::Scenario;
use latnet_units::Time;
use std::io::{self, Write as _};
use std::path::PathBuf;

mod in_flight;
use in_flight::InFlight;

/// How to run a switch.
#[derive(Debug, Clone)]
pub struct RunConfig {
    /// Switch node name.
    pub node: String,
    /// The network namespace holding the switch's interfaces (a namespace file such as
    /// `/run/netns/NAME`); `None`: the current one. With it, one process can run the switches
    /// of several namespaces ([`run_many`]).
    pub netns: Option<PathBuf>,
    /// Statistics file (rewritten every `stats_every_ns` and at the end).
    pub stats: Option<PathBuf>,
    /// Interval of statistics writes (ns).
    pub stats_every_ns: u64,
    /// Receive ring size per interface (bytes).
    pub ring_bytes: usize,
    /// Stop after this long (ns); `None`: until SIGINT / SIGTERM.
    pub duration_ns: Option<u64>,
    /// The experiment's time zero on `CLOCK_MONOTONIC` (the senders' `t0`), if there is one:
    /// dual-queue AQMs count their reporting epochs from it, not from the switch's start.
    pub t0_ns: Option<u64>,
    /// Write a capture of every emulated port into this directory (`<node>-<peer>.pcap`, with
    /// the simulator's suffix for parallel links, see [`SwitchCore::enable_capture`]); a
    /// thread writes them, not the forwarding loop.
    pub pcap_dir: Option<PathBuf>,
    /// Write every switch's per-packet hop and drop records into this directory
    /// (`hops-<node>.csv` and `drops-<node>.csv`, see [`SwitchCore::enable_hop_records`]), by
    /// the same thread.
    pub hops_dir: Option<PathBuf>,
    /// Sample every emulated port's queue at this interval (else the scenario's
    /// `[output] queues`, if set) from the experiment's time zero (`t0_ns`, else the switch's
    /// start) until the scenario's end, into the final statistics (see
    /// [`SwitchCore::enable_queue_series`]).
    pub queues: Option<latnet_units::Duration>,
    /// Waits up to this long are spent polling the clock and the rings instead of sleeping in
    /// `ppoll` (default [`SPIN_NS`]); 0 always sleeps.
    pub spin_ns: u64,
}

/// Frames read per ring and pass (a pass takes up to this many times the number of rings,
/// oldest first across them) before the core catches up with the clock.
const RX_BUDGET: usize = 256;
/// Waits shorter than this are spent polling the clock and the rings instead of sleeping in
/// `ppoll` (whose system call and wake-up cost more than the wait itself), by default. When
/// switches outnumber the CPUs their busy-waits delay each other's wake-ups, and shorter ones
/// do better (see `latnet.testbed.Testbed`'s `spin_us`).
pub const SPIN_NS: u64 = 20_000;
/// Longest sleep (so that statistics and signals are handled).
const MAX_SLEEP_NS: u64 = 100_000_000;
/// Captured bytes (or hop records) a port (or switch) collects before they go to the writer
/// thread.
const CAPTURE_CHUNK: usize = 256 << 10;

/// Run switch `cfg.node` of `sc` on its interfaces (named by [`crate::plan`]) in its network
/// namespace until stopped.
pub fn run(sc: &Scenario, cfg: &RunConfig) -> io::Result<SwitchStats> {
    run_many(sc, std::slice::from_ref(cfg))?
        .pop()
        .ok_or_else(|| io::Error::other("no switch to run"))
}

/// Run several switches of `sc` (one per entry of `cfgs`, each in its own network namespace)
/// in this one thread until stopped, and return their final statistics in the same order.
///
/// One loop serves every switch's rings, runs every core up to the clock and sleeps until the
/// earliest of their wake-ups: on a machine with fewer CPUs than switches this replaces
/// processes that busy-wait against each other by one. The switches share nothing but the
/// clock; each has its own statistics file and captures. Every setting but `node`, `netns`
/// and `stats` is taken from the first entry.
pub fn run_many(sc: &Scenario, cfgs: &[RunConfig]) -> io::Result<Vec<SwitchStats>> {
    let Some(cfg) = cfgs.first() else { return Ok(Vec::new()) };
    // The switches' time zero; senders stamp LBF blocks on the same clock (CLOCK_MONOTONIC).
    let t0 = sys::mono_ns();
    let run_start = match cfg.t0_ns {
        Some(z) if z < t0 => {
            eprintln!(
                "latnet-switch: warning: the experiment's time zero is {} ms before this switch \
                 started; AQM epochs count from the switch's start",
                (t0 - z) / 1_000_000
            );
            0
        }
        Some(z) => z - t0,
        None => 0,
    };
    let mut stations = Vec::with_capacity(cfgs.len());
    for c in cfgs {
        let open = || Station::open(sc, c, cfg, t0, run_start);
        let st = match &c.netns {
            Some(ns) => sys::in_netns(ns, open),
            None => open(),
        };
        stations.push(st.map_err(|e| io::Error::new(e.kind(), format!("{}: {e}", c.node)))?);
    }
    let loop_switches = stations.len() as u32;
    stations.iter_mut().for_each(|st| st.rc.loop_switches = loop_switches);
    let mut in_flight = InFlight::new(
        &stations
            .iter()
            .map(|st| st.core.ifaces.iter().map(|i| (i.mac, i.peer_mac)).collect())
            .collect::<Vec<_>>(),
    );
    sys::precise_timers();
    sys::install_stop_handler();
    let fds: Vec<_> =
        stations.iter().flat_map(|st| st.socks.iter().map(PacketSocket::raw_fd)).collect();
    let mut ready = Vec::with_capacity(fds.len());
    let mut ring_clock = sys::KernelClock::new(t0);
    let outcome: io::Result<()> = 'run: loop {
        let now_ns = sys::mono_ns().saturating_sub(t0);
        if sys::stop_requested() || cfg.duration_ns.is_some_and(|d| now_ns >= d) {
            break Ok(());
        }
        ring_clock.refresh(now_ns);
        let mut more = false;
        for (s, st) in stations.iter_mut().enumerate() {
            match st.pass(sc, t0, &ring_clock, cfg.stats_every_ns, (&mut in_flight, s)) {
                Ok(m) => more |= m,
                Err(e) => break 'run Err(e),
            }
        }
        if more {
            continue;
        }
        let now_ns = sys::mono_ns().saturating_sub(t0);
        let mut wait = MAX_SLEEP_NS;
        for st in &stations {
            if let Some(t) = st.core.next_wakeup() {
                wait = wait.min(t.as_nanos().saturating_sub(now_ns));
            }
            if st.stats.is_some() {
                wait = wait.min(st.next_stats.saturating_sub(now_ns));
            }
        }
        if wait == 0 {
            continue;
        }
        if wait <= cfg.spin_ns {
            // Sooner than a sleep in the kernel would return: wait on the clock and the rings
            // in userspace instead.
            let until = now_ns + wait;
            while sys::mono_ns().saturating_sub(t0) < until
                && !stations.iter_mut().any(|st| st.socks.iter_mut().any(|s| s.rx_ready()))
            {
                std::hint::spin_loop();
            }
            stations.iter_mut().for_each(|st| st.rc.spins += 1);
            continue;
        }
        if let Err(e) = sys::poll_readable(&fds, Some(wait), &mut ready) {
            break Err(e);
        }
        stations.iter_mut().for_each(|st| st.rc.sleeps += 1);
    };
    // Every switch finishes (final statistics, captures complete), even after another's error.
    let finished: Vec<_> = stations.into_iter().map(|st| st.finish(sc, t0)).collect();
    outcome?;
    finished.into_iter().collect()
}

/// One switch of a [`run_many`] loop: its core, its interfaces' sockets and its counters.
struct Station {
    core: SwitchCore,
    socks: Vec<PacketSocket>,
    rc: RunnerCounters,
    /// How far the core has been advanced (switch clock, ns): it never goes back.
    core_ns: u64,
    output: Option<OutputWriter>,
    /// Writes the statistics file: a thread, so that the loop never waits for the disk.
    stats: Option<Replacer>,
    next_stats: u64,
}

impl Station {
    /// The core of `c.node` on its interfaces, opened in the current network namespace;
    /// `shared` holds the settings common to every switch of the loop.
    fn open(
        sc: &Scenario,
        c: &RunConfig,
        shared: &RunConfig,
        t0: u64,
        run_start: u64,
    ) -> io::Result<Station> {
        let mut core =
            SwitchCore::new_timed(sc, &c.node, t0, latnet_units::Duration::from_nanos(run_start))
                .map_err(io::Error::other)?;
        let mut socks = Vec::with_capacity(core.ifaces.len());
        for ifc in &core.ifaces {
            let (mac, mtu) = sys::if_hwaddr_mtu(&ifc.name)
                .map_err(|e| io::Error::new(e.kind(), format!("interface {}: {e}", ifc.name)))?;
            if mac != ifc.mac {
                eprintln!(
                    "latnet-switch: warning: {} has MAC {}, the plan says {}",
                    ifc.name,
                    crate::plan::mac_string(mac),
                    crate::plan::mac_string(ifc.mac)
                );
            }
            let s = PacketSocket::open(&ifc.name, mtu, shared.ring_bytes)
                .map_err(|e| io::Error::new(e.kind(), format!("AF_PACKET on {}: {e}", ifc.name)))?;
            socks.push(s);
        }
        if let Some(iv) = shared.queues.or(sc.output.queues) {
            core.enable_queue_series(iv, sc.sim.duration + sc.sim.drain);
        }
        // stamps count from the experiment's time zero, even one before this switch started
        let offset =
            shared.t0_ns.map_or(0, |z| i64::try_from(i128::from(t0) - i128::from(z)).unwrap_or(0));
        let pcap = shared.pcap_dir.as_deref().map(|dir| (dir, core.enable_capture(sc, offset)));
        let hops = shared.hops_dir.as_ref().map(|dir| {
            core.enable_hop_records(offset);
            RecordFiles {
                hops: dir.join(format!("hops-{}.csv", c.node)),
                drops: dir.join(format!("drops-{}.csv", c.node)),
                flows: sc.flows.iter().map(|f| f.name.clone()).collect(),
                nodes: sc.nodes.iter().map(|n| n.name.clone()).collect(),
            }
        });
        let output = if pcap.is_some() || hops.is_some() {
            Some(OutputWriter::start(pcap, hops)?)
        } else {
            None
        };
        Ok(Station {
            core,
            socks,
            rc: RunnerCounters::default(),
            core_ns: 0,
            output,
            stats: c.stats.clone().map(|p| Replacer::start(p, "statistics file")).transpose()?,
            next_stats: 0,
        })
    }

    /// Read the rings, run the core up to now, send what is due, hand over captures and write
    /// statistics when due. Returns whether frames are left in the rings (the read budget ran
    /// out). `(in_flight, s)`: the loop's record of frames between its switches and this
    /// switch's place in the loop.
    fn pass(
        &mut self,
        sc: &Scenario,
        t0: u64,
        ring_clock: &sys::KernelClock,
        stats_every_ns: u64,
        (in_flight, s): (&mut InFlight, usize),
    ) -> io::Result<bool> {
        let Station { core, socks, rc, core_ns, .. } = self;
        // Frames from every ring, oldest first (by their emulated arrival; ties go round the
        // rings), up to RX_BUDGET times the number of rings in one pass.
        let budget = RX_BUDGET * socks.len();
        let mut n = 0;
        while n < budget {
            // A frame arrived when the kernel put it into the ring, perhaps while this switch
            // slept or worked: it is stamped then (so that a late wake-up does not delay its
            // emulated transmission), or, sent by another switch of this loop, at the instant
            // that switch's core made it due here (so that the sender's late wake-up does not
            // either, see `in_flight`); but not before what the core has already run (which
            // cannot be undone) and not after now. Everything due before it runs first, in
            // emulated-time order.
            let stamp = |i: usize, f: &sys::RxFrame<'_>| {
                in_flight.due(s, i, f.data).or_else(|| ring_clock.arrival(f.kernel_ns))
            };
            let oldest = oldest_ring(socks.len(), n, |i| {
                socks[i].next_rx().map(|f| stamp(i, &f).unwrap_or(0))
            });
            let Some((_, i)) = oldest else { break };
            // "Now" is read once the frame is in the ring: read before, a frame the kernel put
            // there while this switch was preempted between the two would arrive, for the
            // emulation, when the clock was read (seen: 5 to 741 us before its ring timestamp,
            // even before its sender stamped it, so that it left every hop that much early).
            let read_ns = sys::mono_ns().saturating_sub(t0);
            let (kernel, due) = match socks[i].next_rx() {
                Some(f) => (ring_clock.arrival(f.kernel_ns), in_flight.take(s, i, f.data)),
                None => break,
            };
            let kernel = kernel.unwrap_or(read_ns);
            let read_late = read_ns.saturating_sub(kernel);
            // (a stamp after the read: the clocks' offset was off by at least that much)
            let ahead = kernel.saturating_sub(read_ns);
            rc.rx_stamp_ahead += u64::from(ahead > 0);
            rc.rx_stamp_ahead_max_ns = rc.rx_stamp_ahead_max_ns.max(ahead);
            rc.rx_read_late_max_ns = rc.rx_read_late_max_ns.max(read_late);
            rc.rx_read_late_10us += u64::from(read_late > 10_000);
            if let Some(d) = due {
                rc.rx_in_loop += 1;
                rc.rx_in_loop_absorbed_max_ns =
                    rc.rx_in_loop_absorbed_max_ns.max(kernel.saturating_sub(d));
            }
            let arrived = due.unwrap_or(kernel);
            // (`min` then `max`, not `clamp`: no panic even if the clock stepped back)
            let t_ns = arrived.min(read_ns).max(*core_ns);
            *core_ns = t_ns;
            let t = Time::from_nanos(t_ns);
            core.advance_owned(t, &mut |j, f, d| {
                emit(socks, rc, Some((&mut *in_flight, s)), read_ns, j, f, d)
            });
            // Parsed and copied straight from the ring slot, then the slot goes back.
            let Some(f) = socks[i].next_rx() else { break };
            let v = f.vnet;
            let offload = Offload {
                partial_csum: (v.flags & VNET_NEEDS_CSUM != 0)
                    .then_some((v.csum_start, v.csum_offset)),
                gso: v.gso_type != VNET_GSO_NONE,
                truncated: (f.data.len() as u64) < u64::from(f.wire_len),
                vlan: f.vlan,
            };
            core.receive(t, i, f.data, offload);
            socks[i].release();
            n += 1;
        }
        let now_ns = sys::mono_ns().saturating_sub(t0).max(*core_ns);
        *core_ns = now_ns;
        let now = Time::from_nanos(now_ns);
        core.advance_owned(now, &mut |i, f, d| {
            emit(socks, rc, Some((&mut *in_flight, s)), now_ns, i, f, d)
        });
        for s in socks.iter_mut() {
            rc.tx_refused += s.flush() as u64;
            for b in s.take_spent() {
                core.recycle_buffer(b);
            }
        }
        if let Some(w) = &mut self.output {
            w.collect(core, CAPTURE_CHUNK);
        }
        if let Some(w) = &mut self.stats {
            if now_ns >= self.next_stats {
                self.next_stats = now_ns + stats_every_ns;
                sync_counters(rc, socks, now_ns);
                w.send(SwitchStats::collect(sc, core, *rc, false).json()?)?;
            }
        }
        Ok(n == budget)
    }

    /// Everything due by now (the last queue samples included) still happens; the final
    /// statistics, written and returned.
    fn finish(mut self, sc: &Scenario, t0: u64) -> io::Result<SwitchStats> {
        let Station { core, socks, rc, core_ns, .. } = &mut self;
        let now_ns = sys::mono_ns().saturating_sub(t0).max(*core_ns);
        core.advance_owned(Time::from_nanos(now_ns), &mut |i, f, d| {
            emit(socks, rc, None, now_ns, i, f, d);
        });
        for s in socks.iter_mut() {
            rc.tx_refused += s.flush() as u64;
        }
        sync_counters(rc, socks, now_ns);
        let mut st = SwitchStats::collect(sc, core, *rc, true);
        st.queue_series = core.take_queue_series();
        if let Some(w) = self.stats.take() {
            // (after every earlier write: the file ends with these)
            let path = w.finish()?;
            st.write(&path)?;
        }
        if let Some(mut w) = self.output.take() {
            w.collect(&mut self.core, 1);
            w.finish()?;
        }
        Ok(st)
    }
}

/// Bring the counters the sockets keep into `rc` (ring drops are counted since the last call).
fn sync_counters(rc: &mut RunnerCounters, socks: &[PacketSocket], now_ns: u64) {
    rc.uptime_ns = now_ns;
    rc.ring_drops += socks.iter().map(PacketSocket::ring_drops).sum::<u64>();
    rc.tx_calls = socks.iter().map(PacketSocket::tx_calls).sum();
}

/// The ring whose next frame is the oldest, with that frame's timestamp, given each ring's
/// next timestamp (`peek`, `None`: empty); equal timestamps go to the first ring from `start`
/// on (round the rings).
fn oldest_ring(
    rings: usize,
    start: usize,
    mut peek: impl FnMut(usize) -> Option<u64>,
) -> Option<(u64, usize)> {
    let mut oldest: Option<(u64, usize)> = None;
    for k in 0..rings {
        let i = (k + start) % rings;
        if let Some(stamp) = peek(i) {
            if oldest.is_none_or(|(o, _)| stamp < o) {
                oldest = Some((stamp, i));
            }
        }
    }
    oldest
}

/// Where [`OutputWriter`] writes a switch's hop and drop records, and the names of the
/// scenario's flows and nodes (by index) they are written with.
struct RecordFiles {
    hops: PathBuf,
    drops: PathBuf,
    flows: Vec<String>,
    nodes: Vec<String>,
}

/// Writes the ports' captures and the hop records from a thread of its own, so that the
/// forwarding loop never waits for the disk: the loop hands over a file's bytes once it has
/// collected a chunk, and the thread hands the emptied buffers back for reuse (no fresh
/// allocation per chunk). Files `0..captures` are the ports' captures; the hop records, if
/// any, go to the two files after them (the thread turns them into CSV, transmissions and
/// drops, [`crate::core::hop_records_csv`]).
struct OutputWriter {
    tx: Option<std::sync::mpsc::Sender<(usize, Vec<u8>)>>,
    back: std::sync::mpsc::Receiver<Vec<u8>>,
    pool: Vec<Vec<u8>>,
    thread: Option<std::thread::JoinHandle<io::Result<()>>>,
    captures: usize,
    hops: bool,
}

impl OutputWriter {
    /// Create one capture file (header only) per name in `pcap` (its directory created), and
    /// the hop and drop records files (header only) if given, with the scenario's flow names.
    fn start(
        pcap: Option<(&std::path::Path, Vec<String>)>,
        hops: Option<RecordFiles>,
    ) -> io::Result<OutputWriter> {
        fn named(what: &str, p: &std::path::Path, e: io::Error) -> io::Error {
            io::Error::new(e.kind(), format!("{what} {}: {e}", p.display()))
        }
        let mut files = Vec::new();
        let captures = pcap.as_ref().map_or(0, |(_, names)| names.len());
        if let Some((dir, names)) = &pcap {
            std::fs::create_dir_all(dir).map_err(|e| named("packet capture", dir, e))?;
            for n in names {
                files.push(("packet capture", dir.join(n), latnet_sim::pcap::new_capture()));
            }
        }
        let with_hops = hops.is_some();
        let (mut flows, mut nodes) = (Vec::new(), Vec::new());
        if let Some(r) = hops {
            (flows, nodes) = (r.flows, r.nodes);
            if let Some(dir) = r.hops.parent() {
                std::fs::create_dir_all(dir).map_err(|e| named("hop records", dir, e))?;
            }
            let header = crate::core::HOP_RECORDS_HEADER.as_bytes().to_vec();
            files.push(("hop records", r.hops, header));
            let header = crate::core::DROP_RECORDS_HEADER.as_bytes().to_vec();
            files.push(("drop records", r.drops, header));
        }
        let mut open = Vec::with_capacity(files.len());
        for (what, path, header) in files {
            let mut f = std::fs::File::create(&path).map_err(|e| named(what, &path, e))?;
            f.write_all(&header).map_err(|e| named(what, &path, e))?;
            open.push((what, path, io::BufWriter::with_capacity(1 << 20, f)));
        }
        let (tx, rx) = std::sync::mpsc::channel::<(usize, Vec<u8>)>();
        let (back_tx, back) = std::sync::mpsc::channel::<Vec<u8>>();
        let thread = std::thread::Builder::new().name("output-writer".into()).spawn(move || {
            let (mut csv, mut drops) = (Vec::new(), Vec::new());
            for (i, mut chunk) in rx {
                if i == captures {
                    csv.clear();
                    drops.clear();
                    crate::core::hop_records_csv(&chunk, &flows, &nodes, &mut csv, &mut drops);
                    for (k, bytes) in [(i, &csv), (i + 1, &drops)] {
                        if let Some((what, path, f)) = open.get_mut(k) {
                            f.write_all(bytes).map_err(|e| named(what, path, e))?;
                        }
                    }
                } else if let Some((what, path, f)) = open.get_mut(i) {
                    f.write_all(&chunk).map_err(|e| named(what, path, e))?;
                }
                chunk.clear();
                // the loop may be gone already (at the end): then the buffer is dropped
                let _ = back_tx.send(chunk);
            }
            for (what, path, f) in &mut open {
                f.flush().map_err(|e| named(what, path, e))?;
            }
            Ok(())
        })?;
        Ok(OutputWriter {
            tx: Some(tx),
            back,
            pool: Vec::new(),
            thread: Some(thread),
            captures,
            hops: with_hops,
        })
    }

    /// Hand over every file's bytes of at least `at_least` bytes.
    fn collect(&mut self, core: &mut SwitchCore, at_least: usize) {
        let Some(tx) = &self.tx else { return };
        self.pool.extend(self.back.try_iter());
        for i in 0..=self.captures {
            let mut spare = self.pool.pop().unwrap_or_default();
            let taken = if i < self.captures {
                core.swap_capture(i, at_least, &mut spare)
            } else {
                self.hops && core.swap_hop_records(at_least, &mut spare)
            };
            if taken {
                // A failed writer reports its error in `finish`.
                let _ = tx.send((i, spare));
            } else {
                self.pool.push(spare);
            }
        }
    }

    /// Wait until everything handed over is written.
    fn finish(&mut self) -> io::Result<()> {
        self.tx = None;
        match self.thread.take().map(std::thread::JoinHandle::join) {
            Some(Ok(r)) => r,
            Some(Err(_)) => Err(io::Error::other("the output writer panicked")),
            None => Ok(()),
        }
    }
}

fn emit(
    socks: &mut [PacketSocket],
    rc: &mut RunnerCounters,
    in_flight: Option<(&mut InFlight, usize)>,
    now_ns: u64,
    iface: usize,
    frame: Vec<u8>,
    due: Time,
) {
    if let Some((f, s)) = in_flight {
        f.sent(s, iface, &frame, due.as_nanos());
    }
    let late = now_ns.saturating_sub(due.as_nanos());
    rc.late_max_ns = rc.late_max_ns.max(late);
    if late > 100_000 {
        rc.late_100us += 1;
    }
    if let Some(s) = socks.get_mut(iface) {
        rc.tx_refused += s.push_tx_owned(frame) as u64;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_oldest_frame_of_all_rings_goes_first() {
        let heads = [Some(5), None, Some(3), Some(3)];
        let peek = |i: usize| heads[i];
        assert_eq!(oldest_ring(4, 0, peek), Some((3, 2)));
        assert_eq!(oldest_ring(4, 3, peek), Some((3, 3)), "a tie goes round the rings");
        assert_eq!(oldest_ring(4, 7, peek), Some((3, 3)));
        assert_eq!(oldest_ring(2, 0, peek), Some((5, 0)));
        assert_eq!(oldest_ring(2, 1, |_| None), None);
        assert_eq!(oldest_ring(0, 0, peek), None);
    }
}
