//! TCP applications and their scenario syntax: bulk transfer (`kind = "tcp-bulk"`) and
//! request/response short flows (`kind = "tcp-rr"`).
//!
//! * **Bulk**: at the flow's `start` the client connects and writes `bytes` (unlimited if
//!   absent) then closes; at the flow's `stop` it stops writing (data not yet sent is
//!   abandoned) and closes. The completion time is when the receiver has every byte.
//! * **Request/response**: from `start` until `stop` (or `requests` of them), requests arrive
//!   every `interval` (`arrivals = "fixed"`) or with exponential gaps of mean `interval`
//!   (`"poisson"`, seeded per flow: [`RrArrivals`]). Each request opens a new connection from a new source
//!   port, sends `request` bytes; the server answers `response` bytes and closes; the client
//!   closes when the response is complete. The flow completion time (FCT) runs from the SYN to
//!   the last response byte at the client.
//!
//! Both kinds share the connection settings of [`TcpSpec`] (defaults per congestion control
//! from [`TcpConfig::for_cc`]). The flow's `size` is the largest frame: MSS = `size` − 54
//! (Ethernet, IPv4, TCP headers).

use super::cc::CcKind;
use super::segment::TCP_IPV4_OVERHEAD;
use super::TcpConfig;
use latnet_units::{Bytes, Duration, Rate, Time};
use latnet_wire::Ecn;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use serde::Deserialize;

/// ECT codepoint as written in scenarios.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum EctSpec {
    /// ECT(0), classic ECN.
    Ect0,
    /// ECT(1), L4S.
    Ect1,
}

/// Request arrival process.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Arrivals {
    /// One request every `interval`.
    #[default]
    Fixed,
    /// Exponential gaps with mean `interval`.
    Poisson,
}

/// How a large-flow sender applies the share `bottleneck / N` the switches report
/// (switch-assisted pacing, seed 003).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum LargeFlowPacing {
    /// The connection's `SO_MAX_PACING_RATE`-like cap.
    #[default]
    PerConnection,
    /// The host's HTB-like shaper (`kind = "htb"` at the host's egress): share times the
    /// host's large flows.
    Htb,
    /// The host's FQ-like queue (`kind = "fq"` at the host's egress): per-flow `maxrate`.
    Fq,
    /// Register and read the reports, but do not pace (the counter alone).
    None,
}

impl LargeFlowPacing {
    /// Name as written in scenarios.
    pub fn as_str(self) -> &'static str {
        match self {
            LargeFlowPacing::PerConnection => "per-connection",
            LargeFlowPacing::Htb => "htb",
            LargeFlowPacing::Fq => "fq",
            LargeFlowPacing::None => "none",
        }
    }
}

/// TCP flow settings as written in a scenario's `traffic` table.
#[derive(Debug, Clone, PartialEq, Eq, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TcpSpec {
    /// Congestion control (default `cubic`).
    #[serde(default)]
    pub cc: CcKind,
    /// Negotiate ECN (default: on for DCTCP and Prague).
    pub ecn: Option<bool>,
    /// ECT codepoint of data (default: ECT(1) for Prague, ECT(0) otherwise).
    pub ect: Option<EctSpec>,
    /// Internal pacing (default: on for Prague and BBR).
    pub pacing: Option<bool>,
    /// `SO_MAX_PACING_RATE`.
    pub max_pacing_rate: Option<Rate>,
    /// Pacing gain in slow start, percent (200).
    pub pacing_ss_gain: Option<u32>,
    /// Pacing gain in congestion avoidance, percent (120).
    pub pacing_ca_gain: Option<u32>,
    /// Initial window in segments (10).
    pub init_cwnd: Option<u32>,
    /// RTO before the first RTT sample (1 s).
    pub initial_rto: Option<Duration>,
    /// Minimum RTO (200 ms).
    pub min_rto: Option<Duration>,
    /// ACK every this many segments (2; 1 disables delayed ACKs).
    pub delayed_ack: Option<u32>,
    /// Delayed-ACK timeout (40 ms).
    pub delack_timeout: Option<Duration>,
    /// Receive buffer, the largest advertised window (4 MiB).
    pub rcv_buf: Option<Bytes>,
    /// SACK (true).
    pub sack: Option<bool>,
    /// Prague: RTT-independent increase below this RTT (25 ms; "0" turns it off).
    pub rtt_target: Option<Duration>,
    /// BBR: BBRv2-style ECN response (false).
    pub bbr_ecn: Option<bool>,
    /// Data segments a connection may have waiting in its host's queue (TSQ-like, 2).
    pub tsq: Option<u32>,
    /// Detect lost retransmissions from SACKs of later data (true, as Linux; ns-3: false).
    pub lost_retransmit: Option<bool>,
    /// CUBIC: leave slow start by HyStart, as Linux (false).
    pub hystart: Option<bool>,
    /// RACK-TLP loss detection (RFC 8985), as Linux (false).
    pub rack_tlp: Option<bool>,
    /// tcp-bulk: bytes to send (unlimited if absent).
    pub bytes: Option<Bytes>,
    /// tcp-rr: request size.
    pub request: Option<Bytes>,
    /// tcp-rr: response size.
    pub response: Option<Bytes>,
    /// tcp-rr: (mean) time between requests.
    pub interval: Option<Duration>,
    /// tcp-rr: fixed or Poisson arrivals.
    pub arrivals: Option<Arrivals>,
    /// tcp-rr: at most this many requests.
    pub requests: Option<u64>,
    /// tcp-bulk: register as a large flow on the SYN (switch-assisted pacing; false).
    pub large_flow: Option<bool>,
    /// How the share reported by the switches is applied (`per-connection`).
    pub large_flow_pacing: Option<LargeFlowPacing>,
    /// Divide this rate by the reported count instead of the rate the switch reports.
    pub bottleneck_rate: Option<Rate>,
}

/// The keys of a TCP flow's `traffic` that `[defaults.tcp]` may not give: the congestion
/// control and what the flow's application sends (set them per flow).
pub const PER_FLOW_KEYS: [&str; 11] = [
    "kind",
    "cc",
    "bytes",
    "request",
    "response",
    "interval",
    "arrivals",
    "requests",
    "large_flow",
    "large_flow_pacing",
    "bottleneck_rate",
];

impl TcpSpec {
    /// The connection negotiates ECN (given, or its congestion control's default).
    fn ecn_on(&self) -> bool {
        self.ecn.unwrap_or(TcpConfig::for_cc(self.cc).ecn)
    }

    /// The kernel would pace the connection: asked, its congestion control's default, or a
    /// pacing cap (given, or set by switch-assisted pacing), which paces by the window too.
    fn paced_by_window_or_cap(&self) -> bool {
        self.pacing.unwrap_or(TcpConfig::for_cc(self.cc).pacing.enabled)
            || self.max_pacing_rate.is_some()
            || self.large_flow == Some(true)
    }

    /// Take each connection setting this flow leaves out from `d` (a scenario's
    /// `[defaults.tcp]`), where it applies to this flow, by the rules [`TcpSpec::validate`]
    /// checks: `hystart` to CUBIC, `rtt_target` to Prague, `bbr_ecn` to BBR, `ect` to flows
    /// with ECN, the pacing gains to paced flows other than BBR, `rack_tlp = true` to flows
    /// with SACK. The keys of [`PER_FLOW_KEYS`] are not taken.
    pub fn fill_from(&mut self, d: &TcpSpec) {
        macro_rules! fill {
            ($($k:ident),* $(,)?) => {$(
                if self.$k.is_none() {
                    self.$k = d.$k.clone();
                }
            )*};
        }
        fill!(
            ecn,
            pacing,
            max_pacing_rate,
            init_cwnd,
            initial_rto,
            min_rto,
            delayed_ack,
            delack_timeout,
            rcv_buf,
            sack,
            tsq,
            lost_retransmit,
        );
        match self.cc {
            CcKind::Cubic => fill!(hystart),
            CcKind::Prague => fill!(rtt_target),
            CcKind::Bbr => fill!(bbr_ecn),
            _ => {}
        }
        if self.ecn_on() {
            fill!(ect);
        }
        if self.cc != CcKind::Bbr && self.paced_by_window_or_cap() {
            fill!(pacing_ss_gain, pacing_ca_gain);
        }
        if self.sack != Some(false) || d.rack_tlp != Some(true) {
            fill!(rack_tlp);
        }
    }

    /// Check the settings for frames of `size` bytes; `rr` for request/response.
    pub fn validate(&self, size: u32, rr: bool) -> Result<(), String> {
        if size < TCP_IPV4_OVERHEAD + 48 {
            return Err(format!(
                "expected `size` (the largest frame) of at least {} bytes for TCP: 54 bytes of \
                 Ethernet, IPv4 and TCP headers plus an MSS of at least 48",
                TCP_IPV4_OVERHEAD + 48
            ));
        }
        let pos = |v: Option<u32>, k: &str| match v {
            Some(0) => Err(format!("expected `{k}` of at least 1")),
            _ => Ok(()),
        };
        pos(self.init_cwnd, "init_cwnd")?;
        pos(self.delayed_ack, "delayed_ack")?;
        pos(self.tsq, "tsq")?;
        pos(self.pacing_ss_gain, "pacing_ss_gain")?;
        pos(self.pacing_ca_gain, "pacing_ca_gain")?;
        if self.max_pacing_rate.is_some_and(|r| r.is_zero()) {
            return Err("expected `max_pacing_rate` above zero".into());
        }
        if self.rcv_buf.is_some_and(|b| b.get() < u64::from(size)) {
            return Err(format!("expected `rcv_buf` of at least one frame ({size} B)"));
        }
        if self.min_rto.is_some_and(|d| d.is_zero())
            || self.initial_rto.is_some_and(|d| d.is_zero())
        {
            return Err("expected RTO bounds above zero".into());
        }
        // a key of another congestion control would be ignored: most likely not meant
        if self.rtt_target.is_some() && self.cc != CcKind::Prague {
            return Err("`rtt_target` belongs to cc = \"prague\" (RTT independence)".into());
        }
        if self.bbr_ecn.is_some() && self.cc != CcKind::Bbr {
            return Err("`bbr_ecn` belongs to cc = \"bbr\"".into());
        }
        if self.rack_tlp == Some(true) && self.sack == Some(false) {
            return Err("`rack_tlp = true` needs SACK (RACK reads SACK blocks; Linux probes \
                        only with SACK): leave `sack` on"
                .into());
        }
        if self.hystart.is_some() && self.cc != CcKind::Cubic {
            return Err("`hystart` belongs to cc = \"cubic\" (Linux's HyStart is CUBIC's)".into());
        }
        if self.ect.is_some() && !self.ecn_on() {
            return Err(
                "`ect` needs ECN: `ecn = true` (the default for dctcp and prague); without it \
                 data is sent Not-ECT"
                    .into(),
            );
        }
        let gains =
            [(self.pacing_ss_gain, "pacing_ss_gain"), (self.pacing_ca_gain, "pacing_ca_gain")];
        if let Some((_, k)) = gains.iter().find(|(v, _)| v.is_some()) {
            if self.cc == CcKind::Bbr {
                return Err(format!(
                    "`{k}` does not apply to cc = \"bbr\", which paces at its own rate"
                ));
            }
            if !self.paced_by_window_or_cap() {
                return Err(format!(
                    "`{k}` needs pacing: `pacing = true` (the default for prague), \
                     `max_pacing_rate` or `large_flow = true`"
                ));
            }
        }
        let rr_keys = self.request.is_some()
            || self.response.is_some()
            || self.interval.is_some()
            || self.arrivals.is_some()
            || self.requests.is_some();
        let large = self.large_flow.unwrap_or(false);
        if !large && (self.large_flow_pacing.is_some() || self.bottleneck_rate.is_some()) {
            return Err("`large_flow_pacing` and `bottleneck_rate` need `large_flow = true`".into());
        }
        if self.bottleneck_rate.is_some_and(|r| r.is_zero()) {
            return Err("expected `bottleneck_rate` above zero".into());
        }
        if rr && large {
            return Err("`large_flow` belongs to tcp-bulk (one long connection)".into());
        }
        if rr {
            if self.bytes.is_some() {
                return Err(
                    "`bytes` belongs to tcp-bulk; tcp-rr has `request` and `response`".into()
                );
            }
            for (v, k) in [(self.request, "request"), (self.response, "response")] {
                match v {
                    None => return Err(format!("expected `{k}` (bytes)")),
                    Some(b) if b.is_zero() => return Err(format!("expected `{k}` above zero")),
                    _ => {}
                }
            }
            match self.interval {
                None => return Err("expected `interval` (time between requests)".into()),
                Some(d) if d.is_zero() => return Err("expected `interval` above zero".into()),
                _ => {}
            }
            if self.requests == Some(0) {
                return Err("expected `requests` of at least 1".into());
            }
        } else {
            if rr_keys {
                return Err(
                    "`request`, `response`, `interval`, `arrivals` and `requests` belong to tcp-rr"
                        .into(),
                );
            }
            if self.bytes.is_some_and(|b| b.is_zero()) {
                return Err("expected `bytes` above zero (or leave it out: unlimited)".into());
            }
        }
        Ok(())
    }

    /// The connection settings for frames of `size` bytes, with this seed.
    pub fn config(&self, size: u32, seed: u64) -> TcpConfig {
        let mut c = TcpConfig::for_cc(self.cc);
        c.mss = size.saturating_sub(TCP_IPV4_OVERHEAD).max(48);
        c.seed = seed;
        if let Some(v) = self.ecn {
            c.ecn = v;
        }
        if let Some(e) = self.ect {
            c.ect = match e {
                EctSpec::Ect0 => Ecn::Ect0,
                EctSpec::Ect1 => Ecn::Ect1,
            };
        }
        if let Some(v) = self.pacing {
            c.pacing.enabled = v;
        }
        c.pacing.max_rate = self.max_pacing_rate;
        if let Some(v) = self.pacing_ss_gain {
            c.pacing.ss_gain_pct = v;
        }
        if let Some(v) = self.pacing_ca_gain {
            c.pacing.ca_gain_pct = v;
        }
        if let Some(v) = self.init_cwnd {
            c.init_cwnd = v;
        }
        if let Some(v) = self.initial_rto {
            c.initial_rto = v;
        }
        if let Some(v) = self.min_rto {
            c.min_rto = v;
        }
        if let Some(v) = self.delayed_ack {
            c.delack_count = v;
        }
        if let Some(v) = self.delack_timeout {
            c.delack_timeout = v;
        }
        if let Some(v) = self.rcv_buf {
            c.rcv_buf = v.get();
        }
        if let Some(v) = self.sack {
            c.sack = v;
        }
        if let Some(v) = self.rtt_target {
            c.rtt_target = (!v.is_zero()).then_some(v);
        }
        if let Some(v) = self.bbr_ecn {
            c.bbr_ecn = v;
        }
        if let Some(v) = self.lost_retransmit {
            c.lost_retransmit = v;
        }
        if let Some(v) = self.hystart {
            c.hystart = v;
        }
        if let Some(v) = self.rack_tlp {
            c.rack_tlp = v;
        }
        c
    }

    /// Switch-assisted pacing: how this flow applies the reported share, if it is a large
    /// flow.
    pub fn large_flow_mode(&self) -> Option<LargeFlowPacing> {
        self.large_flow.unwrap_or(false).then(|| self.large_flow_pacing.unwrap_or_default())
    }

    /// Data segments a connection may keep in its host's queue.
    pub fn tsq_packets(&self) -> u32 {
        self.tsq.unwrap_or(2)
    }
}

/// Stream id of each tcp-rr flow's request-gap generator (stream `STREAM_RR + flow index` of
/// the scenario's seed), apart from the simulator's other streams (packet sources 1, ports 2,
/// TCP connections 3 `<< 32`), so the emulated client draws the simulator's gaps.
pub const STREAM_RR: u64 = 4 << 32;

/// The instants at which a tcp-rr flow opens its connections: the first at its `start`, each
/// next one a gap later (the flow's `interval`, or an exponential draw of that mean for
/// `arrivals = "poisson"`), before `stop` and up to its `requests`. The simulator and the
/// emulated client both walk this, so they open at the same instants, Poisson ones included.
#[derive(Debug, Clone)]
pub struct RrArrivals {
    interval: Duration,
    arrivals: Arrivals,
    requests: Option<u64>,
    rng: ChaCha8Rng,
    next: Option<Time>,
    stop: Time,
    issued: u64,
}

impl RrArrivals {
    /// The arrivals of flow `flow` (its index in the scenario) with `spec`, in a run seeded
    /// with `seed`.
    pub fn new(spec: &TcpSpec, start: Time, stop: Time, seed: u64, flow: usize) -> RrArrivals {
        let mut rng = ChaCha8Rng::seed_from_u64(seed);
        rng.set_stream(STREAM_RR + flow as u64);
        RrArrivals {
            interval: spec.interval.unwrap_or(Duration::from_millis(1)),
            arrivals: spec.arrivals.unwrap_or_default(),
            requests: spec.requests,
            rng,
            next: Some(start),
            stop,
            issued: 0,
        }
    }

    fn gap(&mut self) -> Duration {
        match self.arrivals {
            Arrivals::Fixed => self.interval,
            Arrivals::Poisson => {
                let u: f64 = self.rng.gen_range(f64::MIN_POSITIVE..1.0);
                Duration::from_nanos((-u.ln() * self.interval.as_nanos() as f64).round() as u64)
            }
        }
    }
}

impl Iterator for RrArrivals {
    type Item = Time;

    fn next(&mut self) -> Option<Time> {
        let at = self.next?;
        self.issued += 1;
        let more = self.requests.is_none_or(|n| self.issued < n);
        let gap = self.gap();
        self.next = at.checked_add_duration(gap).filter(|&t| more && t < self.stop);
        Some(at)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn request_arrivals_are_fixed_or_seeded_per_flow() {
        let at = |ms: u64| Time::ZERO + Duration::from_millis(ms);
        let rr = |keys: &str| spec(&format!("interval = \"10ms\"\n{keys}")).unwrap();
        let fixed = RrArrivals::new(&rr(""), at(5), at(45), 1, 0).collect::<Vec<_>>();
        assert_eq!(fixed, [at(5), at(15), at(25), at(35)], "before the stop");
        let three = RrArrivals::new(&rr("requests = 3"), at(5), at(1000), 1, 0);
        assert_eq!(three.count(), 3);
        let poisson = rr("arrivals = \"poisson\"");
        let draw = |seed, flow| RrArrivals::new(&poisson, at(0), at(10_000), seed, flow);
        let a: Vec<Time> = draw(1, 0).collect();
        assert_eq!(a, draw(1, 0).collect::<Vec<_>>(), "seeded");
        assert_ne!(a, draw(1, 1).collect::<Vec<_>>(), "a stream per flow");
        assert_ne!(a, draw(2, 0).collect::<Vec<_>>(), "and per seed");
        // 10 s at a mean gap of 10 ms: a Poisson count of mean 1000, within 5 sigma
        assert!((842..=1158).contains(&a.len()), "{}", a.len());
        assert!(a.windows(2).all(|w| w[0] <= w[1]));
    }

    fn spec(src: &str) -> Result<TcpSpec, toml::de::Error> {
        toml::from_str(src)
    }

    #[test]
    fn defaults_follow_the_congestion_control() {
        let s = spec("cc = \"prague\"").unwrap();
        let c = s.config(1502, 1);
        assert_eq!(c.mss, 1448);
        assert!(c.ecn && c.pacing.enabled);
        assert_eq!(c.ect, Ecn::Ect1);
        assert_eq!(c.rtt_target, Some(Duration::from_millis(25)));
        let s = spec("cc = \"prague\"\nrtt_target = 0\necn = false").unwrap();
        let c = s.config(1502, 1);
        assert_eq!(c.rtt_target, None);
        assert!(!c.ecn);
        let c = spec("cc = \"cubic\"\nmax_pacing_rate = \"10Mbps\"").unwrap().config(1502, 1);
        assert_eq!(c.pacing.max_rate, Some(Rate::from_mbps(10)));
        assert!(!c.ecn);
    }

    #[test]
    fn validation_explains() {
        let s = spec("cc = \"cubic\"").unwrap();
        assert!(s.validate(60, false).unwrap_err().contains("at least 102"));
        assert!(s.validate(1500, true).unwrap_err().contains("`request`"));
        let s = spec("request = 100\nresponse = 1000\ninterval = \"1ms\"").unwrap();
        assert!(s.validate(1500, true).is_ok());
        assert!(s.validate(1500, false).unwrap_err().contains("belong to tcp-rr"));
        assert!(spec("cc = \"vegas\"").is_err());
        assert!(spec("cwnd = 3").is_err(), "unknown keys are refused");
        // a key of another congestion control is refused, not ignored
        let s = spec("cc = \"dctcp\"\nrtt_target = \"10ms\"").unwrap();
        assert!(s.validate(1502, false).unwrap_err().contains("`rtt_target` belongs to"));
        assert!(spec("cc = \"prague\"\nrtt_target = 0").unwrap().validate(1502, false).is_ok());
        let s = spec("cc = \"cubic\"\nbbr_ecn = true").unwrap();
        assert!(s.validate(1502, false).unwrap_err().contains("`bbr_ecn` belongs to"));
        assert!(spec("cc = \"bbr\"\nbbr_ecn = true").unwrap().validate(1502, false).is_ok());
        // settings that would be ignored: an ECT codepoint without ECN, pacing gains without
        // window-based pacing
        let err = |src: &str| spec(src).unwrap().validate(1502, false).err().unwrap_or_default();
        assert!(err("cc = \"cubic\"\nect = \"ect1\"").contains("`ect` needs ECN"));
        assert!(err("cc = \"dctcp\"\necn = false\nect = \"ect1\"").contains("`ect` needs ECN"));
        assert_eq!(err("cc = \"cubic\"\necn = true\nect = \"ect1\""), "");
        assert_eq!(err("cc = \"dctcp\"\nect = \"ect1\""), "");
        assert!(
            err("cc = \"cubic\"\npacing_ca_gain = 100").contains("needs pacing: `pacing = true`")
        );
        assert!(err("cc = \"prague\"\npacing = false\npacing_ss_gain = 150").contains("needs"));
        assert!(err("cc = \"bbr\"\npacing_ca_gain = 100").contains("its own rate"));
        assert_eq!(err("cc = \"prague\"\npacing_ca_gain = 100"), "");
        assert_eq!(err("cc = \"cubic\"\npacing = true\npacing_ss_gain = 150"), "");
        let capped = "cc = \"cubic\"\nmax_pacing_rate = \"1Mbps\"\npacing_ss_gain = 150";
        assert_eq!(err(capped), "");
        assert_eq!(err("cc = \"cubic\"\nlarge_flow = true\npacing_ca_gain = 100"), "");
        let s = spec("large_flow_pacing = \"htb\"").unwrap();
        assert!(s.validate(1502, false).unwrap_err().contains("need `large_flow = true`"));
        let s = spec("large_flow = true\nlarge_flow_pacing = \"fq\"").unwrap();
        assert!(s.validate(1502, false).is_ok());
        assert_eq!(s.large_flow_mode(), Some(LargeFlowPacing::Fq));
        assert!(s.validate(1502, true).unwrap_err().contains("belongs to tcp-bulk"));
        assert_eq!(
            spec("large_flow = true").unwrap().large_flow_mode(),
            Some(LargeFlowPacing::PerConnection)
        );
        assert_eq!(spec("large_flow = false").unwrap().large_flow_mode(), None);
        assert!(spec("large_flow = true\nlarge_flow_pacing = \"tbf\"").is_err());
        let s = spec("large_flow = true\nbottleneck_rate = 0").unwrap();
        assert!(s.validate(1502, false).unwrap_err().contains("`bottleneck_rate` above zero"));
    }
}
