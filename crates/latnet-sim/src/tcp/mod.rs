//! TCP in the simulator: sans-IO connection state machines whose segments carry real
//! TCP/IP headers (`latnet-wire`), with pluggable congestion control, ECN and pacing.
//!
//! Everything here is independent of the simulator's run loop: a [`Connection`] takes
//! segments and the time, and returns segments and the next time it wants to be woken (see
//! [`conn`] for the call order). The unit tests drive two connections through a model link in
//! virtual time (`tcp/testnet.rs`); the simulator drives them through its hosts, queues and links
//! (`sim/tcp_glue.rs`).
//!
//! | module | what |
//! |---|---|
//! | [`segment`] | [`Segment`]: header fields + options + ECN + virtual payload; emit/parse real bytes |
//! | [`conn`] | [`Connection`]: handshake, ACK piggybacking, timers, events |
//! | [`sender`] | transmission, SACK/NewReno loss recovery with PRR, RTO, ECN reduction, rate samples |
//! | [`scoreboard`] | segments in flight, SACK state, `pipe`, loss marking |
//! | [`receiver`] | reassembly, delayed ACK, SACK blocks, classic and per-packet ECN echo |
//! | [`rtt`] | RFC 6298 estimator |
//! | [`pacing`] | internal pacing, `SO_MAX_PACING_RATE` cap |
//! | [`cc`] | congestion controls: NewReno, CUBIC, DCTCP, Prague-like, BBR-like |
//! | [`app`] | applications: bulk transfer, request/response; their scenario syntax |
//! | [`report`] | per-flow TCP summary and time series |
//!
//! Defaults follow Linux where a choice exists (initial window 10, min RTO 200 ms, delayed
//! ACK every 2 segments or 40 ms, SACK on, pacing gains 200 % / 120 %); scenario files can set
//! ns-3's values instead (min RTO 1 s, delayed-ACK timeout 200 ms) for comparisons.

pub mod app;
pub mod cc;
pub mod conn;
pub mod pacing;
pub mod receiver;
pub mod report;
pub mod rtt;
pub mod scoreboard;
pub mod segment;
pub mod sender;
#[cfg(test)]
mod testnet;
#[cfg(test)]
mod tests;

pub use cc::{AnyCc, CcKind, CongestionControl};
pub use conn::{ConnEvent, Connection, State};
pub use pacing::PacingConfig;
pub use segment::{Segment, TCP_IPV4_OVERHEAD};

use latnet_units::Duration;
use latnet_wire::Ecn;

/// Everything that configures one TCP connection.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TcpConfig {
    /// Congestion control.
    pub cc: CcKind,
    /// Payload bytes per segment (the MSS announced and used).
    pub mss: u32,
    /// Initial window, segments (RFC 6928: 10).
    pub init_cwnd: u32,
    /// RTO before the first RTT sample (RFC 6298: 1 s).
    pub initial_rto: Duration,
    /// Lower bound of the RTO (Linux 200 ms; RFC 6298 and ns-3: 1 s).
    pub min_rto: Duration,
    /// Upper bound of the RTO.
    pub max_rto: Duration,
    /// Acknowledge every this many segments (1: no delayed ACKs).
    pub delack_count: u32,
    /// Delayed-ACK timeout (Linux 40 ms, ns-3 200 ms).
    pub delack_timeout: Duration,
    /// Receive buffer: the largest window advertised (bytes).
    pub rcv_buf: u64,
    /// Offer and use SACK.
    pub sack: bool,
    /// Duplicate threshold for loss detection.
    pub dupthresh: u32,
    /// Negotiate ECN.
    pub ecn: bool,
    /// ECT codepoint of data segments when ECN is on.
    pub ect: Ecn,
    /// Pacing.
    pub pacing: PacingConfig,
    /// Prague: RTT-independent additive increase below this RTT.
    pub rtt_target: Option<Duration>,
    /// BBR: BBRv2-style ECN response.
    pub bbr_ecn: bool,
    /// Give up after this many consecutive timeouts (Linux tcp_retries2 = 15).
    pub max_retries: u32,
    /// Detect lost retransmissions by SACKs of later data, as Linux (ns-3 does not: off
    /// leaves them to the timer).
    pub lost_retransmit: bool,
    /// CUBIC: end slow start by HyStart, as Linux (off: standard slow start, as RFC 9438's
    /// default and the ns-3 comparison).
    pub hystart: bool,
    /// RACK-TLP loss detection (RFC 8985), as Linux: segments sent before a delivered one
    /// are lost once older than its RTT plus a reordering window, and tail losses are probed
    /// (off: RFC 6675's DupThresh and the retransmission timer alone, as ns-3).
    pub rack_tlp: bool,
    /// Seed for randomized congestion-control choices.
    pub seed: u64,
}

impl Default for TcpConfig {
    fn default() -> Self {
        TcpConfig {
            cc: CcKind::Cubic,
            mss: 1448,
            init_cwnd: 10,
            initial_rto: Duration::from_secs(1),
            min_rto: Duration::from_millis(200),
            max_rto: Duration::from_secs(60),
            delack_count: 2,
            delack_timeout: Duration::from_millis(40),
            rcv_buf: 4 << 20,
            sack: true,
            dupthresh: 3,
            ecn: false,
            ect: Ecn::Ect0,
            pacing: PacingConfig::default(),
            rtt_target: None,
            bbr_ecn: false,
            max_retries: 15,
            lost_retransmit: true,
            hystart: false,
            rack_tlp: false,
            seed: 0,
        }
    }
}

impl TcpConfig {
    /// The defaults for a congestion control: DCTCP and Prague negotiate ECN (Prague with
    /// ECT(1), pacing and a 25 ms RTT target), BBR paces.
    pub fn for_cc(cc: CcKind) -> Self {
        let mut c = TcpConfig { cc, ..TcpConfig::default() };
        match cc {
            CcKind::Dctcp => c.ecn = true,
            CcKind::Prague => {
                c.ecn = true;
                c.ect = Ecn::Ect1;
                c.pacing.enabled = true;
                c.rtt_target = Some(Duration::from_millis(25));
            }
            CcKind::Bbr => c.pacing.enabled = true,
            CcKind::Newreno | CcKind::Cubic => {}
        }
        c
    }
}
