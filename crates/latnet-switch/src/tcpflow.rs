//! A scenario's TCP flows (`tcp-bulk`, `tcp-rr`) in emulated runs: real Linux TCP between the
//! hosts' namespaces, through the emulated switches, reported in the simulator's terms.
//!
//! [`linux_tcp`] maps a flow's TCP keys to what the kernel offers, refusing by name what it
//! cannot be told per connection (`init_cwnd`, `min_rto`, `delayed_ack`, ...: the simulator's)
//! and what it lacks (`cc = "prague"`, ECT(1), the simulator's host queues for switch-assisted
//! pacing); [`check`] adds the settings Linux takes per namespace (ECN, SACK, the pacing
//! ratios), which every flow from one host must agree on.
//!
//! [`send`] (`latnet-switch send` for a TCP flow) opens the connection from the flow's address
//! and port at its start, with its congestion control (`newreno` is Linux's `reno`), DSCP and
//! segment size (a full frame is the flow's `size`, timestamps included); writes while the
//! kernel has less than [`UNSENT_LOW`] bytes not yet sent (so that little more than the window
//! is in the host when the flow stops: the simulator's application stops at once), until its
//! `bytes` are written or its stop; then closes and waits, until the end of the run's drain,
//! for the receiver to read everything. It reads `TCP_INFO` at every sample instant of the
//! scenario's time series (10 ms without one): window, bytes in flight, smoothed RTT,
//! retransmissions, CE echoes and pacing rate. A large flow registers on the SYN and paces at
//! the reported share as `latnet-switch tcp-send` does ([`crate::tcp`]).
//!
//! The receiver ([`TcpRx`], inside `latnet-switch recv`) accepts the flow's connection and
//! reads it to the end, counting the bytes read per interval of the time series.
//!
//! A tcp-rr flow opens a connection per request (module `rr`): at the simulator's instants
//! ([`rr_instants`], Poisson arrivals too), from an ephemeral port (the switches know the flow's
//! segments from any source port), writes the request, reads the response and closes; the
//! server answers each connection in a thread of its own. Its result has the simulator's
//! connections, completions and flow completion times, and each connection's smoothed RTT
//! when it closed; its time series adds up the clients' open connections' windows, bytes in
//! flight and pacing rates (the first one's smoothed RTT). The simulator's adds the servers'
//! connections too, which send the responses; the emulated servers' are not sampled.
//!
//! What Linux keeps no per-connection count of (fast recoveries, ECN window reductions,
//! ECN-Echo ACKs, RTT samples) is reported as not known (`null`), never as zero.

use crate::sys;
use crate::tcp::{self as ktcp, Applied, Pace};
use latnet_dataplane::QueueSpec;
use latnet_sim::lbf::flow_address;
use latnet_sim::scenario::FlowSpec;
use latnet_sim::tcp::app::{EctSpec, LargeFlowPacing};
use latnet_sim::tcp::CcKind;
use latnet_sim::traffic::TrafficSpec;
use latnet_sim::Scenario;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::io::{self, Read as _, Write as _};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::os::fd::{AsRawFd, OwnedFd, RawFd};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

mod rr;
pub use rr::rr_instants;

/// Most bytes the kernel holds not yet sent before the sender writes more
/// (`TCP_NOTSENT_LOWAT`).
pub const UNSENT_LOW: u32 = 16 * 1024;

/// Interval of the sender's `TCP_INFO` samples (or the time series', if shorter).
pub const SAMPLE_NS: u64 = 10_000_000;

/// Octets a frame adds to a segment's payload over IPv4: Ethernet, IPv4, TCP, and the
/// timestamp option Linux puts in every segment.
pub const FRAME_OVERHEAD: u32 = 14 + 20 + 20 + TIMESTAMP_OPTION;

/// The TCP timestamp option as Linux sends it (10 bytes and two no-ops). `TCP_MAXSEG` sets
/// the MSS the connection announces and is clamped to, which Linux then lessens by the options
/// it puts in every segment: a full segment's payload is the value set less this.
const TIMESTAMP_OPTION: u32 = 12;

/// The least MSS Linux takes (`TCP_MIN_MSS`; a smaller `TCP_MAXSEG` is refused).
const TCP_MIN_MSS: u32 = 88;

/// How Linux plays one scenario TCP flow.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LinuxTcp {
    /// Linux's name of the congestion control.
    pub cc: &'static str,
    /// Ask for ECN (`net.ipv4.tcp_ecn = 1` in the sender's namespace; 2, Linux's default,
    /// otherwise: ECN only when asked).
    pub ecn: bool,
    /// Offer SACK (`net.ipv4.tcp_sack`).
    pub sack: bool,
    /// Pacing gains in slow start and congestion avoidance, percent
    /// (`net.ipv4.tcp_pacing_ss_ratio`, `tcp_pacing_ca_ratio`: Linux's own are the
    /// simulator's, 200 and 120).
    pub pacing_ratios: (u32, u32),
    /// `SO_MAX_PACING_RATE`, bytes/s: the flow's `max_pacing_rate`, or for `pacing = true`
    /// without one `u64::MAX - 1`, which turns the kernel's own pacing on with no cap. `None`:
    /// unpaced (BBR paces by itself).
    pub pacing_cap: Option<u64>,
    /// `bytes` to send (`None`: until the stop).
    pub bytes: Option<u64>,
    /// Switch-assisted pacing: how the sender applies the reported share (never `Fq`:
    /// refused; `send` makes the [`Pace`], naming an HTB class's interface from the
    /// topology, see [`HostHtb`]).
    pub large_flow: Option<LargeFlowPacing>,
    /// A full segment's payload: its frame is the flow's `size` (`TCP_MAXSEG` is this plus
    /// the timestamp option).
    pub mss: u32,
    /// tcp-rr: request and response sizes (bytes).
    pub rr: Option<(u64, u64)>,
    /// RACK-TLP off (`rack_tlp = false`: `net.ipv4.tcp_early_retrans = 0` and
    /// `net.ipv4.tcp_recovery = 0` in the sender's namespace; Linux's defaults, 3 and 1, run
    /// it).
    pub no_rack_tlp: bool,
}

impl LinuxTcp {
    /// Whether the kernel paces the connection: a cap or `pacing = true`, a per-connection
    /// large flow (its cap comes with each REPORT), or BBR (which paces by itself).
    pub fn kernel_paces(&self) -> bool {
        self.pacing_cap.is_some()
            || self.large_flow == Some(LargeFlowPacing::PerConnection)
            || self.cc == "bbr"
    }

    /// The settings of the sender's namespace this flow needs (`/proc/sys` path and value):
    /// ECN, SACK and RACK-TLP (Linux's defaults, 3 and 1, unless the flow turns it off: so a
    /// namespace that served an earlier run without it, on a testbed kept up, runs it again,
    /// and two flows of one host that disagree are refused), and the pacing ratios where the
    /// kernel paces the flow by its window (a flow it does not pace leaves them to the host's
    /// other flows).
    pub fn sysctls(&self) -> Vec<(&'static str, String)> {
        let (early, recovery) = if self.no_rack_tlp { ("0", "0") } else { ("3", "1") };
        let mut v = vec![
            ("net/ipv4/tcp_ecn", if self.ecn { "1" } else { "2" }.to_owned()),
            ("net/ipv4/tcp_sack", if self.sack { "1" } else { "0" }.to_owned()),
            ("net/ipv4/tcp_early_retrans", early.to_owned()),
            ("net/ipv4/tcp_recovery", recovery.to_owned()),
        ];
        if self.kernel_paces() && self.cc != "bbr" {
            v.push(("net/ipv4/tcp_pacing_ss_ratio", self.pacing_ratios.0.to_string()));
            v.push(("net/ipv4/tcp_pacing_ca_ratio", self.pacing_ratios.1.to_string()));
        }
        v
    }
}

/// Why flow `f` cannot run on Linux's TCP, or how it does (`None`: not a TCP flow).
pub fn linux_tcp(f: &FlowSpec) -> Result<Option<LinuxTcp>, String> {
    let (t, rr) = match &f.traffic {
        TrafficSpec::TcpBulk(t) => (t, false),
        TrafficSpec::TcpRr(t) => (t, true),
        _ => return Ok(None),
    };
    let refuse = |what: String| Err(format!("flow {:?}: {what}", f.name));
    // Linux takes an MSS of 88 bytes at least, and the testbed's links carry 1500-byte packets
    let (least, most) = (TCP_MIN_MSS + FRAME_OVERHEAD, 1514);
    if !(least..=most).contains(&f.size) {
        return refuse(format!(
            "`size` {} B: Linux's TCP sends frames of {least} to {most} B here (an MSS of at \
             least 88 bytes, with {FRAME_OVERHEAD} bytes of headers and timestamps, in \
             1500-byte packets)",
            f.size
        ));
    }
    let cc = match t.cc {
        CcKind::Newreno => "reno",
        CcKind::Cubic => "cubic",
        CcKind::Dctcp => "dctcp",
        CcKind::Bbr => "bbr",
        CcKind::Prague => {
            return refuse(
                "cc = \"prague\" has no counterpart in Linux's own TCP (tcp_prague is out of \
                 tree); run it in the simulator (--mode sim)"
                    .into(),
            )
        }
    };
    // keys of the simulator's TCP that Linux takes no per-connection setting for here
    let sim_only = [
        ("init_cwnd", t.init_cwnd.is_some()),
        ("initial_rto", t.initial_rto.is_some()),
        ("min_rto", t.min_rto.is_some()),
        ("delayed_ack", t.delayed_ack.is_some()),
        ("delack_timeout", t.delack_timeout.is_some()),
        ("rcv_buf", t.rcv_buf.is_some()),
        ("tsq", t.tsq.is_some()),
        ("lost_retransmit", t.lost_retransmit.is_some()),
        ("rtt_target", t.rtt_target.is_some()),
        ("bbr_ecn", t.bbr_ecn.is_some()),
        ("bottleneck_rate", t.bottleneck_rate.is_some()),
    ];
    let set: Vec<_> = sim_only.iter().filter(|(_, s)| *s).map(|(k, _)| format!("`{k}`")).collect();
    if !set.is_empty() {
        return refuse(format!(
            "{} set the simulator's TCP, which Linux takes no per-connection setting for here: \
             leave {} out (of the flow's traffic and [defaults.tcp]) to run with Linux's own, \
             or run the flow in the simulator (--mode sim)",
            set.join(", "),
            if set.len() == 1 { "it" } else { "them" }
        ));
    }
    if t.ect == Some(EctSpec::Ect1) {
        return refuse("`ect = \"ect1\"`: Linux's TCP sends ECT(0)".into());
    }
    if rr && t.rack_tlp == Some(false) {
        return refuse(
            "`rack_tlp = false` on a tcp-rr flow: its responses leave the server's namespace, \
             whose Linux runs RACK-TLP (tcp_early_retrans = 3, tcp_recovery = 1); leave \
             `rack_tlp` out there (and out of [defaults.tcp])"
                .into(),
        );
    }
    if let Some(want) = t.hystart {
        let machine = machine_hystart();
        if machine != Some(want) {
            let has = match machine {
                Some(true) => "on (hystart = 1, both detectors)",
                Some(false) => "off (hystart = 0)",
                None => "neither plainly on nor off (or unreadable)",
            };
            return refuse(format!(
                "`hystart = {want}`: Linux's CUBIC takes HyStart from the machine-wide module \
                 parameters /sys/module/tcp_cubic/parameters/hystart and hystart_detect, which \
                 are {has} here; leave `hystart` out (of the flow's traffic and [defaults.tcp]) \
                 to run with the machine's"
            ));
        }
    }
    let large_flow = t.large_flow_mode();
    if large_flow == Some(LargeFlowPacing::Fq) {
        return refuse(
            "`large_flow_pacing = \"fq\"` sets a per-flow maxrate in the host's fq queue, \
             which an emulated run does not set up (the kernels it was built on lack sch_fq); \
             it paces with HTB (\"htb\"), per connection (\"per-connection\") or not at all \
             (\"none\")"
                .to_owned(),
        );
    }
    let cfg = t.config(f.size, 0);
    let pacing_cap = match (cfg.pacing.max_rate, cfg.pacing.enabled && t.cc != CcKind::Bbr) {
        (Some(r), _) => Some(r.bps() / 8),
        (None, true) => Some(u64::MAX - 1),
        (None, false) => None,
    };
    Ok(Some(LinuxTcp {
        cc,
        ecn: cfg.ecn,
        sack: cfg.sack,
        pacing_ratios: (cfg.pacing.ss_gain_pct, cfg.pacing.ca_gain_pct),
        pacing_cap,
        bytes: t.bytes.map(|b| b.get()),
        large_flow,
        mss: f.size.saturating_sub(FRAME_OVERHEAD),
        no_rack_tlp: t.rack_tlp == Some(false),
        rr: rr.then(|| {
            let size = |b: Option<latnet_units::Bytes>| b.map_or(1, |b| b.get());
            (size(t.request), size(t.response))
        }),
    }))
}

/// A large flow's HTB shaper (`large_flow_pacing = "htb"`): the sending host's egress
/// interface gets an HTB qdisc with one class, as the simulator's host queue (a classless
/// `kind = "htb"`, which the scenario requires there) at its rate and burst; every REPORT sets
/// the class to the flow's share of frames (`C / N` less the link's per-frame overhead, as the
/// simulator re-shapes its queue).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HostHtb {
    /// The interface (`lk<link>`).
    pub dev: String,
    /// The class's rate until the first REPORT (bit/s): the host queue's.
    pub rate_bps: u64,
    /// Its bursts (bytes): the host queue's (default 1 ms at its rate, at least 3200).
    pub burst: u32,
    /// The flow's frame length (bytes).
    pub frame: u64,
    /// That plus the link's per-frame overhead: the class gets `share * frame / wire`.
    pub wire: u64,
}

impl HostHtb {
    /// What the class is set to for each reported share.
    fn rate(&self) -> ktcp::HtbRate {
        ktcp::HtbRate { frame: self.frame, wire: self.wire, burst: self.burst }
    }
}

/// Flow `i`'s HTB shaper, or why it cannot have one (the host queue has classes: one class
/// paces here).
pub fn host_htb(sc: &Scenario, i: usize) -> Result<HostHtb, String> {
    let f = &sc.flows[i];
    let topo = latnet_sim::net::Topology::build(sc);
    let port = topo.fib[f.src][f.dst];
    let Some(p) = topo.ports.get(port as usize) else {
        return Err(format!("flow {:?}: no route from its source", f.name));
    };
    let l = &sc.links[p.link];
    let q = if l.a == f.src { &l.queue_ab } else { &l.queue_ba };
    let QueueSpec::Htb { rate, burst, classes, .. } = q else {
        return Err(format!(
            "flow {:?}: large_flow_pacing = \"htb\" needs the host's queue on links[{}] to be \
             kind = \"htb\"",
            f.name, p.link
        ));
    };
    if !classes.is_empty() {
        return Err(format!(
            "flow {:?}: large_flow_pacing = \"htb\": an emulated run shapes the host's \
             interface with one HTB class; links[{}]'s host queue has {} classes (leave \
             `classes` out)",
            f.name,
            p.link,
            classes.len()
        ));
    }
    let burst = burst.unwrap_or_else(|| latnet_dataplane::queue::htb::default_burst(*rate));
    let frame = u64::from(f.size);
    Ok(HostHtb {
        dev: crate::plan::iface_name(p.link),
        rate_bps: rate.bps(),
        burst: u32::try_from(burst.get()).unwrap_or(u32::MAX),
        frame,
        wire: frame + u64::from(p.overhead),
    })
}

/// Whether every TCP flow of `sc` runs on Linux's TCP, and the flows from each host agree on
/// the settings Linux takes per namespace; the first reason not. A host sends at most one
/// large flow that paces with HTB (its class is the host's: the simulator shapes its queue to
/// `k` shares for `k` such flows, which one class per flow cannot follow).
pub fn check(sc: &Scenario) -> Result<(), String> {
    // per host and setting: the value and the flow that set it
    let mut host: BTreeMap<(usize, &str), (String, &str)> = BTreeMap::new();
    let mut htb: BTreeMap<usize, &str> = BTreeMap::new();
    for (i, f) in sc.flows.iter().enumerate() {
        // (a dilated scenario with TCP flows is refused at load: its timers keep real time)
        let Some(t) = linux_tcp(f)? else { continue };
        if t.large_flow == Some(LargeFlowPacing::Htb) {
            host_htb(sc, i)?;
            if let Some(other) = htb.insert(f.src, &f.name) {
                return Err(format!(
                    "flows {other:?} and {:?} both pace host {:?} with HTB: an emulated run \
                     shapes a host's interface for one large flow",
                    f.name, sc.nodes[f.src].name
                ));
            }
        }
        for (key, value) in t.sysctls() {
            match host.get(&(f.src, key)) {
                Some((v, other)) if *v != value => {
                    return Err(format!(
                        "flows {other:?} and {:?} leave host {:?} with different {} ({v} and \
                         {value}), which Linux sets per host (namespace), not per connection",
                        f.name,
                        sc.nodes[f.src].name,
                        key.trim_start_matches("net/ipv4/"),
                    ))
                }
                Some(_) => {}
                None => {
                    host.insert((f.src, key), (value, &f.name));
                }
            }
        }
    }
    Ok(())
}

/// One `TCP_INFO` sample of the sender.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct TcpSample {
    /// Instant from the scenario's time zero (ns).
    pub t_ns: u64,
    /// Congestion window (bytes).
    pub cwnd: u64,
    /// Bytes in flight.
    pub in_flight: u64,
    /// Smoothed RTT (ns; 0 before the first sample).
    pub srtt_ns: u64,
    /// Retransmitted segments so far.
    pub retransmits: u64,
    /// Segments delivered with a CE echo so far.
    pub ce_marks: u64,
    /// Pacing rate (bit/s; 0 when the kernel does not pace the connection).
    pub pacing_bps: u64,
    /// Slow-start threshold (bytes; `None` before the first).
    #[serde(default)]
    pub ssthresh: Option<u64>,
}

/// What a large flow's sender learned (the simulator's `large_flow` result).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct TcpLargeFlow {
    /// `per-connection`, `htb` or `none`.
    pub pacing: String,
    /// Packets with a filled REPORT option.
    pub reports: u64,
    /// Packets with a malformed large-flow option (ignored).
    pub malformed: u64,
    /// Reports whose pacing cap (or HTB class rate) the kernel refused.
    pub pacing_errors: u64,
    /// Each change: `(t_ns from time zero, count, bottleneck bit/s, rate set)`, the rate set
    /// being the cap (payload bit/s) or the HTB class's (frame bit/s).
    pub changes: Vec<(u64, u16, u64, u64)>,
}

/// The sender's account of a TCP flow (in its `send-<flow>.json`).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct TcpSent {
    /// The run's time zero the sender was given (`CLOCK_MONOTONIC` ns).
    pub t0_ns: u64,
    /// Linux's congestion control.
    pub cc: String,
    /// ECN negotiated.
    pub ecn: bool,
    /// The connection was established.
    pub connected: bool,
    /// Why the connection failed (not established in time, reset): the simulator's
    /// `aborted`.
    pub error: Option<String>,
    /// Bytes handed to the kernel.
    pub written: u64,
    /// Bytes the receiver acknowledged (the SYN and FIN count one each, as in `TCP_INFO`).
    pub bytes_acked: u64,
    /// Segments with data sent, retransmissions included.
    pub segments_sent: u64,
    /// Retransmitted segments.
    pub retransmits: u64,
    /// Retransmission timeouts (`None` before Linux 6.7).
    pub rtos: Option<u64>,
    /// Segments delivered with a CE echo.
    pub ce_marks: u64,
    /// Every sample, in time order (the smoothed RTT summary is theirs).
    pub samples: Vec<TcpSample>,
    /// HyStart's exits in the sender's namespace during the flow (ACK train, delay), when
    /// the flow is the only one there that sends data over TCP (else they are not its own).
    #[serde(default)]
    pub hystart: Option<(u64, u64)>,
    /// Tail loss probes the sender's namespace sent during the flow, as `hystart`.
    #[serde(default)]
    pub loss_probes: Option<u64>,
    /// Switch-assisted pacing.
    pub large_flow: Option<TcpLargeFlow>,
    /// tcp-rr: every connection, in the order opened.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub conns: Vec<RrConn>,
    /// tcp-rr: response bytes read per interval of the scenario's time series (the requests
    /// are in the receiver's bins).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub bins: Vec<u64>,
}

/// One request/response connection of a tcp-rr flow (the client's account).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct RrConn {
    /// When it was opened, from the scenario's time zero (ns).
    pub start_ns: u64,
    /// Its flow completion time: from the open to the last response byte read (ns); `None`
    /// when the response did not all come.
    pub fct_ns: Option<u64>,
    /// Request bytes written (all or none).
    pub request_bytes: u64,
    /// Response bytes read.
    pub response_bytes: u64,
    /// The kernel's smoothed RTT when it closed (ns; 0: none).
    pub srtt_ns: u64,
    /// Why it failed (not established, reset, the run's end).
    pub error: Option<String>,
}

/// The receiver's account of a TCP flow (in its `recv-<host>.json`).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct TcpRecv {
    /// Bytes read.
    pub bytes: u64,
    /// Segments with data received (retransmissions included).
    pub data_segs_in: u64,
    /// When the first and last bytes were read (`CLOCK_MONOTONIC` ns; 0: none).
    pub first_ns: u64,
    /// See `first_ns`.
    pub last_ns: u64,
    /// The sender closed and every byte was read.
    pub eof: bool,
    /// Bytes read per interval of the scenario's time series from its time zero (empty
    /// without one).
    pub bins: Vec<u64>,
    /// tcp-rr: the server's connections, its data segments sent (the responses) and its
    /// retransmissions.
    #[serde(default)]
    pub conns: u64,
    /// See `conns`.
    #[serde(default)]
    pub segments_sent: u64,
    /// See `conns`.
    #[serde(default)]
    pub retransmits: u64,
    /// tcp-rr with a time series: the server's connections that have sent data, added up at
    /// the end of every interval (as [`TcpSent::samples`]; the flow's series adds them to the
    /// clients').
    #[serde(default)]
    pub samples: Vec<TcpSample>,
}

fn invalid(e: String) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidInput, e)
}

fn named(what: String, e: io::Error) -> io::Error {
    io::Error::new(e.kind(), format!("{what}: {e}"))
}

/// Set `/proc/sys/PATH` in this process's network namespace, unless it already holds `value`.
fn sysctl(path: &str, value: &str) -> io::Result<()> {
    let file = std::path::Path::new("/proc/sys").join(path);
    let now = std::fs::read_to_string(&file).map_err(|e| named(file.display().to_string(), e))?;
    if now.trim() == value {
        return Ok(());
    }
    std::fs::write(&file, value).map_err(|e| named(format!("setting {}", file.display()), e))
}

/// Whether this machine's CUBIC runs HyStart as the simulator's `hystart = true` does (both
/// detectors) or not at all; `None` for another mix or when the parameters cannot be read.
fn machine_hystart() -> Option<bool> {
    let read = |p: &str| {
        let path = format!("/sys/module/tcp_cubic/parameters/{p}");
        std::fs::read_to_string(path).ok()?.trim().parse::<u32>().ok()
    };
    match (read("hystart")?, read("hystart_detect")?) {
        (0, _) => Some(false),
        (_, 3) => Some(true),
        _ => None,
    }
}

/// `TCP_INFINITE_SSTHRESH`: no slow-start threshold yet.
const INFINITE_SSTHRESH: u32 = 0x7fff_ffff;

/// Whether flow `i` is the only one that sends data over TCP from its source's namespace
/// (other flows from there, and tcp-rr flows answered there, would share its counters).
fn sole_tcp_sender(sc: &Scenario, i: usize) -> bool {
    let host = sc.flows[i].src;
    sc.flows.iter().enumerate().all(|(j, g)| match &g.traffic {
        _ if j == i => true,
        TrafficSpec::TcpBulk(_) => g.src != host,
        TrafficSpec::TcpRr(_) => g.src != host && g.dst != host,
        _ => true,
    })
}

/// The sender's interval between samples: [`SAMPLE_NS`], or the scenario's time series where
/// that is shorter or not a multiple of it (every interval's end is a sample).
fn sample_interval(sc: &Scenario) -> u64 {
    match sc.output.timeseries.map(|d| d.as_nanos().max(1)) {
        Some(every) if every < SAMPLE_NS || every % SAMPLE_NS != 0 => every,
        _ => SAMPLE_NS,
    }
}

fn sample(fd: RawFd, t_ns: u64, paced: bool) -> Option<TcpSample> {
    Some(sample_of(&sys::tcp_info(fd).ok()?, t_ns, paced))
}

/// [`sample`] of `i`, read at `t_ns`.
fn sample_of(i: &sys::TcpInfo, t_ns: u64, paced: bool) -> TcpSample {
    if matches!(i.state, 2 | 7) {
        // not connected yet (`TCP_SYN_SENT`, `TCP_CLOSE`): nothing sent, nothing in flight
        return TcpSample { t_ns, ..TcpSample::default() };
    }
    let mss = u64::from(i.snd_mss);
    TcpSample {
        t_ns,
        cwnd: u64::from(i.snd_cwnd) * mss,
        in_flight: u64::from(i.in_flight()) * mss,
        srtt_ns: u64::from(i.rtt_us) * 1000,
        retransmits: u64::from(i.total_retrans),
        ce_marks: u64::from(i.delivered_ce),
        pacing_bps: if paced { i.pacing_rate.saturating_mul(8) } else { 0 },
        ssthresh: (i.snd_ssthresh < INFINITE_SSTHRESH).then(|| u64::from(i.snd_ssthresh) * mss),
    }
}

/// `take(t)` at `t0_ns + t` for `t = k * every`, `k` from 1, until `stop`.
fn sampler(
    t0_ns: u64,
    every: u64,
    stop: &AtomicBool,
    mut take: impl FnMut(u64) -> Option<TcpSample>,
) -> Vec<TcpSample> {
    sys::precise_timers();
    let mut out = Vec::new();
    let mut k = 1;
    while !stop.load(Ordering::Relaxed) {
        let at = t0_ns + k * every;
        sys::sleep_until(at.min(sys::mono_ns() + 50_000_000));
        if sys::mono_ns() < at {
            continue; // (woken to look at `stop`)
        }
        out.extend(take(k * every));
        k += 1;
    }
    out
}

/// A TCP socket bound to `src` with flow `f`'s settings ([`set_options`]).
fn client_socket(f: &FlowSpec, lt: &LinuxTcp, src: SocketAddr) -> io::Result<OwnedFd> {
    let what = |w: &str| format!("flow {:?}: {w}", f.name);
    let (sock, _) = sys::tcp_socket_on(src).map_err(|e| named(what(&format!("bind {src}")), e))?;
    set_options(sock.as_raw_fd(), f, lt)?;
    Ok(sock)
}

/// Flow `f`'s congestion control, DSCP, segment size and pacing on socket `fd` (a listener's
/// pass to the connections it accepts: the servers' segments, a tcp-rr flow's responses, go
/// as the simulator's server sends them, not by the host's defaults); errors name the flow
/// and the option.
fn set_options(fd: RawFd, f: &FlowSpec, lt: &LinuxTcp) -> io::Result<()> {
    let what = |w: &str| format!("flow {:?}: {w}", f.name);
    sys::setsockopt_bytes(fd, libc::IPPROTO_TCP, libc::TCP_CONGESTION, lt.cc.as_bytes()).map_err(
        |e| named(what(&format!("congestion control {:?} (is it in this kernel?)", lt.cc)), e),
    )?;
    let dscp = latnet_dataplane::packet::dscp_from_priority(f.priority);
    sys::set_tos(fd, dscp << 2).map_err(|e| named(what("IP_TOS"), e))?;
    let int = |v: u32| (v as libc::c_int).to_ne_bytes();
    let maxseg = int(lt.mss + TIMESTAMP_OPTION);
    sys::setsockopt_bytes(fd, libc::IPPROTO_TCP, libc::TCP_MAXSEG, &maxseg)
        .map_err(|e| named(what("TCP_MAXSEG"), e))?;
    sys::setsockopt_bytes(fd, libc::IPPROTO_TCP, libc::TCP_NOTSENT_LOWAT, &int(UNSENT_LOW))
        .map_err(|e| named(what("TCP_NOTSENT_LOWAT"), e))?;
    if let Some(cap) = lt.pacing_cap {
        sys::setsockopt_bytes(fd, libc::SOL_SOCKET, libc::SO_MAX_PACING_RATE, &cap.to_ne_bytes())
            .map_err(|e| named(what("SO_MAX_PACING_RATE"), e))?;
    }
    Ok(())
}

/// Play TCP flow `i` of `sc` from this host (its namespace): see the module documentation.
/// Returns the sender's report; the connection's failure is reported in it, not returned.
pub fn send(sc: &Scenario, i: usize, t0_ns: u64) -> io::Result<crate::traffic::SendReport> {
    check(sc).map_err(invalid)?;
    let f = &sc.flows[i];
    let lt = linux_tcp(f).map_err(invalid)?.ok_or_else(|| invalid("not a TCP flow".into()))?;
    for (path, value) in lt.sysctls() {
        sysctl(path, &value)?;
    }
    if let Some((request, response)) = lt.rr {
        return rr::send(sc, i, t0_ns, &lt, request, response);
    }
    let src = SocketAddr::new(flow_address(sc, f, f.src), f.src_port);
    let dst = SocketAddr::new(flow_address(sc, f, f.dst), f.dst_port);
    let what = |w: &str| format!("flow {:?}: {w}", f.name);
    let sock = client_socket(f, &lt, src)?;
    let fd = sock.as_raw_fd();
    // (the shaper is removed when the sender ends, the interface left as it was)
    let (pace, htb, _shaper) = match lt.large_flow {
        None => (None, ktcp::HtbRate::SHARE, None),
        Some(LargeFlowPacing::PerConnection) => (Some(Pace::Socket), ktcp::HtbRate::SHARE, None),
        Some(LargeFlowPacing::None) => (Some(Pace::Off), ktcp::HtbRate::SHARE, None),
        Some(LargeFlowPacing::Htb) => {
            let h = host_htb(sc, i).map_err(invalid)?;
            let shaper = ktcp::HtbShaper::install(&h.dev, h.rate_bps, h.burst)
                .map_err(|e| named(what(&format!("HTB shaper on {}", h.dev)), e))?;
            (Some(Pace::Htb { dev: h.dev.clone() }), h.rate(), Some(shaper))
        }
        // (refused by `linux_tcp`)
        Some(LargeFlowPacing::Fq) => return Err(invalid("large_flow_pacing = \"fq\"".into())),
    };
    if lt.large_flow.is_some() {
        let (level, name, opt) = ktcp::register_option(&dst);
        sys::setsockopt_bytes(fd, level, name, &opt)
            .map_err(|e| named(what("REGISTER option (IP_OPTIONS)"), e))?;
    }
    sys::install_stop_handler();
    let start_ns = t0_ns + f.start.as_nanos();
    let stop_ns = t0_ns + f.stop.as_nanos().min(sc.sim.duration.as_nanos());
    let end_ns = t0_ns + sc.sim.duration.as_nanos() + sc.sim.drain.as_nanos();
    let paced = lt.kernel_paces();
    let stop = Arc::new(AtomicBool::new(false));
    let seen = Arc::new(Mutex::new(ktcp::Seen::default()));
    let every = sample_interval(sc);
    let samples = {
        let stop = Arc::clone(&stop);
        // (reads TCP_INFO of `fd` only; joined before the socket closes)
        std::thread::spawn(move || sampler(t0_ns, every, &stop, |t| sample(fd, t, paced)))
    };
    let watch_start = Instant::now();
    let watch_mono = sys::mono_ns();
    let watcher = match &pace {
        Some(pace) => {
            let pkt = sys::ip_packet_socket(false, Duration::from_millis(50))
                .map_err(|e| named(what("packet socket watching for reports"), e))?;
            let (stop, seen) = (Arc::clone(&stop), Arc::clone(&seen));
            let w = ktcp::Watch {
                pace: pace.clone(),
                tcp: fd,
                peer: dst,
                port: f.src_port,
                start: watch_start,
                htb,
            };
            Some(std::thread::spawn(move || ktcp::watch_reports(pkt, w, stop, seen)))
        }
        None => None,
    };
    sys::sleep_until(start_ns);
    let late = sys::mono_ns().saturating_sub(start_ns);
    let mut rep = TcpSent { t0_ns, cc: lt.cc.to_owned(), ..TcpSent::default() };
    let counters_before = sys::tcp_counters().filter(|_| sole_tcp_sender(sc, i));
    let played = play(&sock, &lt, dst, stop_ns, end_ns, &mut rep);
    let info = sys::tcp_info(fd).unwrap_or_default();
    if let Some((a, b)) = counters_before.zip(sys::tcp_counters()) {
        let d = |k: usize| b[k].saturating_sub(a[k]);
        rep.hystart = Some((d(0), d(1)));
        rep.loss_probes = Some(d(2));
    }
    stop.store(true, Ordering::Relaxed);
    rep.samples = samples.join().unwrap_or_default();
    if let Some(w) = watcher {
        let _ = w.join();
    }
    drop(sock);
    if let Err(e) = played {
        rep.error = Some(e.to_string());
    }
    rep.ecn = info.ecn;
    rep.bytes_acked = info.bytes_acked;
    rep.segments_sent = u64::from(info.data_segs_out);
    rep.retransmits = u64::from(info.total_retrans);
    rep.rtos = info.total_rto.map(u64::from);
    rep.ce_marks = u64::from(info.delivered_ce);
    if let Some(pacing) = lt.large_flow {
        let seen = std::mem::take(&mut *seen.lock().unwrap_or_else(|p| p.into_inner()));
        rep.large_flow = Some(TcpLargeFlow {
            pacing: pacing.as_str().into(),
            reports: seen.reports,
            malformed: seen.malformed,
            pacing_errors: seen.pacing_errors,
            changes: seen
                .applied
                .iter()
                .map(|a: &Applied| {
                    // (the watcher started before time zero, as the sender does: its instants
                    // are counted from its start, then moved to time zero's)
                    let t = (watch_mono + a.t_ms * 1_000_000).saturating_sub(t0_ns);
                    // (the rate set: the cap in bits, or the HTB class's; 0 in the other)
                    (t, a.count, a.rate_bps, a.pacing_bytes_per_s * 8 + a.htb_rate_bps)
                })
                .collect(),
        });
    }
    Ok(crate::traffic::SendReport {
        flow: f.name.clone(),
        sent: rep.segments_sent,
        send_errors: 0,
        late_max_ns: late,
        late_100us: u64::from(late > 100_000),
        tcp: Some(rep),
    })
}

/// Connect, write until `lt.bytes` or `stop_ns`, close and wait until `end_ns` for the
/// receiver to close too. A failure of the connection is returned; `rep` keeps what was done.
fn play(
    sock: &OwnedFd,
    lt: &LinuxTcp,
    dst: SocketAddr,
    stop_ns: u64,
    end_ns: u64,
    rep: &mut TcpSent,
) -> io::Result<()> {
    let fd = sock.as_raw_fd();
    let left = |t: u64| Duration::from_nanos(t.saturating_sub(sys::mono_ns()).max(1_000_000));
    // (the kernel gives up a connect after its SYN retries, or at this timeout)
    sys::set_timeout(fd, libc::SO_SNDTIMEO, left(end_ns))?;
    sys::connect(sock, dst).map_err(|e| named(format!("connect to {dst}"), e))?;
    rep.connected = true;
    if lt.large_flow.is_some() {
        // only the SYN needs it
        let (level, name) = ktcp::register_sockopt(&dst);
        sys::setsockopt_bytes(fd, level, name, &[])?;
    }
    let mut s = TcpStream::from(sock.try_clone()?);
    s.set_nonblocking(true)?;
    let chunk = vec![0x5au8; 64 * 1024];
    let mut to_send = lt.bytes.unwrap_or(u64::MAX);
    while to_send > 0 && !sys::stop_requested() {
        let now = sys::mono_ns();
        if now >= stop_ns {
            break;
        }
        if !sys::poll_writable(fd, (stop_ns - now).min(50_000_000))? {
            continue;
        }
        let n = chunk.len().min(usize::try_from(to_send).unwrap_or(usize::MAX));
        match s.write(&chunk[..n]) {
            Ok(k) => {
                rep.written += k as u64;
                to_send -= k as u64;
            }
            Err(e)
                if matches!(e.kind(), io::ErrorKind::WouldBlock | io::ErrorKind::Interrupted) => {}
            Err(e) => return Err(named(format!("sending to {dst}"), e)),
        }
    }
    s.shutdown(std::net::Shutdown::Write)?;
    // the receiver closes once it has read everything: wait for that (or the run's end)
    s.set_nonblocking(false)?;
    let mut b = [0u8; 4096];
    loop {
        s.set_read_timeout(Some(left(end_ns).min(Duration::from_millis(100))))?;
        match s.read(&mut b) {
            Ok(0) => return Ok(()),
            Ok(_) => {}
            Err(e) if matches!(e.kind(), io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut) => {
                if sys::mono_ns() >= end_ns || sys::stop_requested() {
                    return Ok(());
                }
            }
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(named(format!("closing the connection to {dst}"), e)),
        }
    }
}

/// The receiving end of one TCP flow at its destination (inside `latnet-switch recv`).
#[derive(Debug)]
pub struct TcpRx {
    /// The flow's index.
    pub flow: usize,
    listener: TcpListener,
    conn: Option<TcpStream>,
    /// What was received.
    pub stats: TcpRecv,
    /// The scenario's time zero and time-series interval (ns), for the bins.
    bins: Option<(u64, u64)>,
    /// tcp-rr: the server of its connections.
    rr: Option<rr::Server>,
}

impl TcpRx {
    /// Listen on flow `i`'s destination address and port until `until_ns`. `t0_ns`: the
    /// scenario's time zero, for the bins of its time series.
    pub fn bind(sc: &Scenario, i: usize, t0_ns: Option<u64>, until_ns: u64) -> io::Result<TcpRx> {
        let f = &sc.flows[i];
        let addr = SocketAddr::new(flow_address(sc, f, f.dst), f.dst_port);
        let listener = TcpListener::bind(addr)
            .map_err(|e| named(format!("listen on {addr} for flow {:?}", f.name), e))?;
        listener.set_nonblocking(true)?;
        let lt = linux_tcp(f).map_err(invalid)?.ok_or_else(|| invalid("not a TCP flow".into()))?;
        // the server's segments (ACKs, responses) go at the flow's priority, with its congestion
        // control, segment size and pacing, as the simulator's server sends them: the accepted
        // connections take the listener's
        set_options(listener.as_raw_fd(), f, &lt)?;
        let bins = t0_ns.zip(sc.output.timeseries.map(|d| d.as_nanos().max(1)));
        let paced = lt.kernel_paces();
        let rr = lt
            .rr
            .map(|(request, response)| rr::Server::new((request, response), until_ns, bins, paced));
        Ok(TcpRx { flow: i, listener, conn: None, stats: TcpRecv::default(), bins, rr })
    }

    /// The descriptor to wait on: the connection once accepted, the listener before.
    pub fn fd(&self) -> RawFd {
        self.conn.as_ref().map_or(self.listener.as_raw_fd(), AsRawFd::as_raw_fd)
    }

    /// Accept or read what is ready, at `now` (`CLOCK_MONOTONIC` ns).
    pub fn on_ready(&mut self, buf: &mut [u8]) -> io::Result<()> {
        if let Some(server) = self.rr.as_mut() {
            loop {
                match self.listener.accept() {
                    Ok((c, _)) => server.serve(c),
                    Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Ok(()),
                    Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                    Err(e) => return Err(e),
                }
            }
        }
        let Some(c) = self.conn.as_mut() else {
            match self.listener.accept() {
                Ok((c, _)) => {
                    c.set_nonblocking(true)?;
                    self.conn = Some(c);
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
                Err(e) => return Err(e),
            }
            return Ok(());
        };
        loop {
            match c.read(buf) {
                Ok(0) => {
                    self.stats.eof = true;
                    self.close();
                    return Ok(());
                }
                Ok(n) => {
                    let now = sys::mono_ns();
                    let s = &mut self.stats;
                    s.bytes += n as u64;
                    if s.first_ns == 0 {
                        s.first_ns = now;
                    }
                    s.last_ns = now;
                    if let Some((t0, every)) = self.bins {
                        let k = (now.saturating_sub(t0) / every) as usize;
                        if s.bins.len() <= k {
                            s.bins.resize(k + 1, 0);
                        }
                        s.bins[k] += n as u64;
                    }
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Ok(()),
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                // (a reset: what was read stays counted)
                Err(_) => {
                    self.close();
                    return Ok(());
                }
            }
        }
    }

    /// Take the connection's count of data segments and close it (the sender sees the end);
    /// tcp-rr: wait for the server's connections and add them up.
    pub fn close(&mut self) {
        if let Some(server) = self.rr.take() {
            server.finish(&mut self.stats);
        }
        if let Some(c) = self.conn.take() {
            if let Ok(i) = sys::tcp_info(c.as_raw_fd()) {
                self.stats.data_segs_in = u64::from(i.data_segs_in);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// h1 - s1 - h2 with these flows; `host_link`: more keys of the link h1 - s1.
    fn scenario(flows: &str, host_link: &str) -> Scenario {
        let text = format!(
            "[sim]\nduration = \"1s\"\n[defaults.link]\nrate = \"100Mbps\"\n\
             [[nodes]]\nname = \"h1\"\nkind = \"host\"\n[[nodes]]\nname = \"s1\"\nkind = \"switch\"\n\
             [[nodes]]\nname = \"h2\"\nkind = \"host\"\n\
             [[links]]\na = \"h1\"\nb = \"s1\"\n{host_link}[[links]]\na = \"s1\"\nb = \"h2\"\n{flows}"
        );
        Scenario::from_str_named("t.toml", &text).unwrap()
    }

    fn flow(name: &str, keys: &str) -> String {
        format!(
            "[[flows]]\nname = \"{name}\"\nsrc = \"h1\"\ndst = \"h2\"\nsize = 1514\n\
             traffic = {{ kind = \"tcp-bulk\", {keys} }}\n"
        )
    }

    fn linux(keys: &str) -> Result<Option<LinuxTcp>, String> {
        linux_tcp(&scenario(&flow("f", keys), "").flows[0])
    }

    #[test]
    fn scenario_keys_map_to_linuxs_settings() {
        let t = linux("cc = \"cubic\"").unwrap().unwrap();
        assert_eq!(
            t,
            LinuxTcp {
                cc: "cubic",
                ecn: false,
                sack: true,
                pacing_ratios: (200, 120),
                pacing_cap: None,
                bytes: None,
                large_flow: None,
                // a full segment's frame is the flow's size, timestamps included
                mss: 1448,
                rr: None,
                no_rack_tlp: false,
            }
        );
        // RACK-TLP off: the sender's namespace neither probes nor detects by time (Linux does
        // both by default)
        let nt = linux("cc = \"cubic\", rack_tlp = false").unwrap().unwrap();
        assert_eq!(nt.sysctls()[2], ("net/ipv4/tcp_early_retrans", "0".to_owned()));
        assert_eq!(nt.sysctls()[3], ("net/ipv4/tcp_recovery", "0".to_owned()));
        // on, or left out: Linux's defaults, set again (a testbed kept up may have had them off)
        for keys in ["cc = \"cubic\", rack_tlp = true", "cc = \"cubic\""] {
            let on = linux(keys).unwrap().unwrap().sysctls();
            assert_eq!(
                on[2..],
                [
                    ("net/ipv4/tcp_early_retrans", "3".to_owned()),
                    ("net/ipv4/tcp_recovery", "1".to_owned())
                ]
            );
        }
        assert_eq!(t.sysctls()[0], ("net/ipv4/tcp_ecn", "2".to_owned()));
        assert_eq!(t.sysctls().len(), 4, "unpaced: the pacing ratios are not its");
        assert_eq!(linux("cc = \"newreno\"").unwrap().unwrap().cc, "reno");
        // BBR paces by itself; the kernel's own pacing for others is a cap it never reaches
        assert_eq!(linux("cc = \"bbr\"").unwrap().unwrap().pacing_cap, None);
        let paced = linux("cc = \"cubic\", pacing = true, pacing_ca_gain = 110").unwrap().unwrap();
        assert_eq!((paced.pacing_cap, paced.pacing_ratios), (Some(u64::MAX - 1), (200, 110)));
        assert_eq!(paced.sysctls()[5], ("net/ipv4/tcp_pacing_ca_ratio", "110".to_owned()));
        let capped = linux("cc = \"cubic\", max_pacing_rate = \"8Mbps\"").unwrap().unwrap();
        assert_eq!(capped.pacing_cap, Some(1_000_000));
        let t = linux("cc = \"dctcp\", bytes = \"1MB\", sack = false").unwrap().unwrap();
        assert_eq!((t.cc, t.ecn, t.sack, t.bytes), ("dctcp", true, false, Some(1_000_000)));
        assert_eq!(t.sysctls()[1], ("net/ipv4/tcp_sack", "0".to_owned()));
        let lf = |p: &str| linux(&format!("large_flow = true, large_flow_pacing = \"{p}\""));
        let on = |p: &str| lf(p).unwrap().unwrap().large_flow;
        assert_eq!(on("per-connection"), Some(LargeFlowPacing::PerConnection));
        assert_eq!(on("none"), Some(LargeFlowPacing::None));
        // not TCP: nothing to map
        let udp = "[[flows]]\nname = \"u\"\nsrc = \"h1\"\ndst = \"h2\"\nsize = 200\n\
                   traffic = { kind = \"cbr\", rate = \"1Mbps\" }\n";
        assert_eq!(linux_tcp(&scenario(udp, "").flows[0]), Ok(None));
    }

    /// `large_flow_pacing = "htb"`: an HTB class on the host's interface toward the flow's
    /// destination, at the host queue's rate and burst, set to the share of frames; a host
    /// queue with classes, or a second such flow from one host, is refused by name.
    #[test]
    fn an_htb_paced_flow_shapes_its_hosts_interface() {
        let keys = "large_flow = true, large_flow_pacing = \"htb\"";
        let q = "queue_a = { kind = \"htb\", rate = \"1Gbps\", burst = 3004 }\n";
        let sc = scenario(&flow("f", keys), q);
        let t = linux_tcp(&sc.flows[0]).unwrap().unwrap();
        assert_eq!(t.large_flow, Some(LargeFlowPacing::Htb));
        assert!(t.sysctls().iter().all(|(k, _)| !k.contains("pacing")), "not the kernel's pacing");
        let overhead = u64::from(sc.links[0].overhead);
        let want = HostHtb {
            dev: "lk0".into(),
            rate_bps: 1_000_000_000,
            burst: 3004,
            frame: 1514,
            wire: 1514 + overhead,
        };
        assert_eq!(host_htb(&sc, 0), Ok(want.clone()));
        // the simulator's rate for a share: its frames, less the link's overhead
        assert_eq!(want.rate().of(20_000_000), 20_000_000 * 1514 / (1514 + overhead));
        assert_eq!(ktcp::HtbRate::SHARE.of(20_000_000), 20_000_000);
        assert_eq!(check(&sc), Ok(()));
        // the default burst: 1 ms at the rate
        let sc = scenario(&flow("f", keys), "queue_a = { kind = \"htb\", rate = \"1Gbps\" }\n");
        assert_eq!(host_htb(&sc, 0).unwrap().burst, 125_000);
        let classes =
            "queue_a = { kind = \"htb\", rate = \"1Gbps\", classes = [{ rate = \"1Gbps\" }] }\n";
        let e = check(&scenario(&flow("f", keys), classes)).unwrap_err();
        assert!(e.contains("one HTB class; links[0]'s host queue has 1 classes"), "{e}");
        let two = flow("f", keys) + &flow("g", keys);
        let e = check(&scenario(&two, q)).unwrap_err();
        assert!(e.contains("flows \"f\" and \"g\" both pace host \"h1\" with HTB"), "{e}");
    }

    #[test]
    fn what_linux_cannot_be_told_is_refused_by_name() {
        for (keys, why) in [
            ("cc = \"prague\"", "flow \"f\": cc = \"prague\" has no counterpart"),
            ("init_cwnd = 4", "flow \"f\": `init_cwnd` set the simulator's TCP"),
            ("min_rto = \"10ms\", tsq = 4", "`min_rto`, `tsq` set the simulator's TCP"),
            ("cc = \"bbr\", bbr_ecn = true", "`bbr_ecn` set"),
            ("ecn = true, ect = \"ect1\"", "Linux's TCP sends ECT(0)"),
        ] {
            let e = linux(keys).unwrap_err();
            assert!(e.contains(why), "{keys}: {e}");
        }
        // frames Linux would not send: an MSS below its least, a packet above the links' MTU
        for size in [153, 1515] {
            let f = flow("f", "cc = \"cubic\"").replace("size = 1514", &format!("size = {size}"));
            let e = linux_tcp(&scenario(&f, "").flows[0]).unwrap_err();
            assert!(
                e.contains(&format!("`size` {size} B: Linux's TCP sends frames of 154 to 1514"))
            );
        }
        let f = flow("f", "cc = \"cubic\"").replace("size = 1514", "size = 154");
        assert_eq!(linux_tcp(&scenario(&f, "").flows[0]).unwrap().unwrap().mss, 88);
        // fq's per-flow maxrate is not set up (the scenario has the queue on the host's link)
        let keys = "large_flow = true, large_flow_pacing = \"fq\"";
        let sc = scenario(&flow("f", keys), "queue_a = { kind = \"fq\" }\n");
        let e = linux_tcp(&sc.flows[0]).unwrap_err();
        assert!(e.contains("`large_flow_pacing = \"fq\"` sets a per-flow maxrate"), "{e}");
        assert!(e.contains("it paces with HTB (\"htb\")"), "{e}");
        // a tcp-rr flow's responses leave the server's namespace, which keeps Linux's RACK-TLP
        let rr = flow("f", "cc = \"cubic\"").replace(
            "kind = \"tcp-bulk\", cc = \"cubic\"",
            "kind = \"tcp-rr\", cc = \"cubic\", request = \"1KB\", response = \"10KB\", \
             interval = \"10ms\", rack_tlp = false",
        );
        let e = linux_tcp(&scenario(&rr, "").flows[0]).unwrap_err();
        assert!(e.contains("`rack_tlp = false` on a tcp-rr flow"), "{e}");
        // HyStart is the machine's (module parameters): a flow that asks for the other
        // setting is refused, one that asks for the machine's runs
        let machine = machine_hystart();
        for want in [true, false] {
            let got = linux(&format!("cc = \"cubic\", hystart = {want}"));
            if machine == Some(want) {
                assert!(got.is_ok(), "{got:?}");
            } else {
                let e = got.unwrap_err();
                assert!(e.contains(&format!("`hystart = {want}`: Linux's CUBIC takes")), "{e}");
            }
        }
    }

    /// A listener given a flow's settings passes them to the connections it accepts: the
    /// server's segments (a tcp-rr flow's responses) go with the flow's congestion control
    /// and segment size, not the host's defaults.
    #[test]
    fn accepted_connections_take_the_flows_settings_from_the_listener() {
        let sc = scenario(&flow("f", "cc = \"newreno\""), "");
        let lt = linux_tcp(&sc.flows[0]).unwrap().unwrap();
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        set_options(l.as_raw_fd(), &sc.flows[0], &lt).unwrap();
        let _c = TcpStream::connect(l.local_addr().unwrap()).unwrap();
        let (a, _) = l.accept().unwrap();
        assert_eq!(sys::tcp_congestion(a.as_raw_fd()).unwrap(), "reno");
        let plain = TcpListener::bind("127.0.0.1:0").unwrap();
        let _c2 = TcpStream::connect(plain.local_addr().unwrap()).unwrap();
        let (b, _) = plain.accept().unwrap();
        let default = std::fs::read_to_string("/proc/sys/net/ipv4/tcp_congestion_control");
        assert_eq!(sys::tcp_congestion(b.as_raw_fd()).unwrap(), default.unwrap().trim());
    }

    /// A tcp-rr flow runs too: its sizes, and connections opened at the simulator's instants,
    /// fixed or Poisson (as many as the simulator opens, its SYNs leaving then).
    #[test]
    fn request_response_flows_open_at_their_instants() {
        let rr = |arrivals: &str| {
            flow("r", "cc = \"cubic\"").replace(
                "kind = \"tcp-bulk\"",
                &format!(
                    "kind = \"tcp-rr\", request = \"1KB\", response = \"20KB\", \
                     interval = \"10ms\", arrivals = \"{arrivals}\""
                ),
            )
        };
        let sc = scenario(&rr("fixed"), "");
        assert_eq!(linux_tcp(&sc.flows[0]).unwrap().unwrap().rr, Some((1000, 20_000)));
        let fixed = rr_instants(&sc, 0);
        assert_eq!(fixed, (0..100).map(|k| k * 10_000_000).collect::<Vec<_>>());
        let sim = latnet_sim::Simulator::new(sc.clone()).run();
        let t = sim.flows[0].tcp.as_ref().unwrap();
        assert_eq!(t.connections, fixed.len() as u64, "as many as the simulator opens");
        let limited = scenario(&rr("fixed").replace("arrivals", "requests = 7, arrivals"), "");
        assert_eq!(rr_instants(&limited, 0).len(), 7);
        let poisson = scenario(&(rr("poisson") + "[output]\npcap = true\n"), "");
        let p = rr_instants(&poisson, 0);
        assert!(p.windows(2).all(|w| w[0] <= w[1]) && *p.last().unwrap() < 1_000_000_000);
        // about 1 s / 10 ms of them (a Poisson count of mean 100: within 5 sigma)
        assert!((50..=150).contains(&p.len()), "{}", p.len());
        // the simulator's SYNs leave h1 then (a frame later at most, where h1's link is busy
        // with an earlier connection's: 1514 B at 100 Mbit/s)
        let sim = latnet_sim::Simulator::new(poisson).run();
        let (_, cap) = sim.pcaps.iter().find(|(n, _)| n == "h1-s1.pcap").unwrap();
        let syns: Vec<u64> = latnet_sim::pcap::records(cap)
            .unwrap()
            .iter()
            .filter(|r| {
                let ihl = usize::from(r.bytes[14] & 0x0f) * 4;
                r.bytes[14 + ihl + 13] & 0x12 == 0x02
            })
            .map(|r| r.at_ns)
            .collect();
        assert_eq!(syns.len(), p.len());
        for (syn, at) in syns.iter().zip(&p) {
            assert!((*at..=at + 121_120).contains(syn), "SYN at {syn} ns, request at {at}");
        }
    }

    #[test]
    fn flows_from_one_host_agree_on_its_settings() {
        let same = flow("a", "cc = \"cubic\"") + &flow("b", "cc = \"bbr\"");
        assert_eq!(check(&scenario(&same, "")), Ok(()));
        // pacing ratios bind only the flows the kernel paces by their window
        let gains = flow("a", "cc = \"cubic\"")
            + &flow("b", "cc = \"cubic\", pacing = true, pacing_ca_gain = 110");
        assert_eq!(check(&scenario(&gains, "")), Ok(()));
        let both = gains.replace("cc = \"cubic\" }", "cc = \"cubic\", pacing = true }");
        let e = check(&scenario(&both, "")).unwrap_err();
        assert!(e.contains("different tcp_pacing_ca_ratio (120 and 110)"), "{e}");
        let mixed = flow("a", "cc = \"cubic\"") + &flow("b", "cc = \"cubic\", ecn = true");
        let e = check(&scenario(&mixed, "")).unwrap_err();
        assert!(
            e.starts_with("flows \"a\" and \"b\" leave host \"h1\" with different tcp_ecn"),
            "{e}"
        );
        // RACK-TLP off for one flow of a host turns it off for the host's others too: refused
        let rack = flow("a", "cc = \"cubic\"") + &flow("b", "cc = \"cubic\", rack_tlp = false");
        let e = check(&scenario(&rack, "")).unwrap_err();
        assert!(e.contains("different tcp_early_retrans (3 and 0)"), "{e}");
        // from different hosts they may differ
        let apart = mixed.replacen("src = \"h1\"\ndst = \"h2\"", "src = \"h2\"\ndst = \"h1\"", 1);
        assert_eq!(check(&scenario(&apart, "")), Ok(()));
    }
}
