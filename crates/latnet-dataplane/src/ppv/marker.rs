//! The Per Packet Value marker: an edge element that writes a packet value into every packet
//! (seed 001; the PPV papers of Nádas et al.).
//!
//! Ports: one input, one output; it rewrites headers only. Run it where packets leave a sender
//! (a host's egress port, an edge switch): in latnet it is the queue wrapper
//! [`crate::queue::PvMarking`], marking at dequeue by default so that the rate it measures is
//! the rate on the wire, not the instant a TCP burst was handed to the host queue.
//!
//! # Method
//!
//! Flows are told apart by their 5-tuple; a bounded table (`max_flows`) keeps, per flow, an
//! exponentially weighted average of the gap between packets and of their size (per-packet
//! weight `ewma`, default 1/8), so the flow's rate estimate is `R = 8 * size / gap`. A flow not
//! seen for `idle` starts over. A packet of policy class `c` (its [`Meta::priority`], clamped to
//! the `weights` list; weight `w_c`, default 1) gets
//!
//! * `random-rate` (default): `PV = V((u * R) / w_c)` with `u` uniform in [0, 1) drawn from the
//!   marker's own seeded ChaCha stream. At a bottleneck forwarding `PV > CTV` the flow then
//!   keeps `min(R, w_c V⁻¹(CTV))`.
//! * `token-bucket`: the TVF quantised into rate regions with upper edges `regions` (default
//!   24 edges doubling from 100 kbit/s); region `j` has a token bucket of rate
//!   `r_j - r_(j-1)` and depth `bucket` worth of that rate (at least 1500 B); a packet takes
//!   `V(r_j / w_c)` of the first region whose bucket holds its size, or `V(∞)` if none does.
//!   Deterministic.
//!
//! Where the value travels: [`latnet_wire::ppv`] (IPv4 option `0x9e` or IPv6 hop-by-hop
//! option `0x3e`, 16 bits), written over an existing value or inserted.
//!
//! Counters ([`MarkerStats`]): packets marked, value options inserted, packets that could not
//! carry a value (no room in the header; forwarded without one), flows evicted from a full
//! table. A packet whose existing value option is malformed is dropped with
//! `malformed-option`; one that does not parse with `malformed`.

use super::tvf::Tvf;
use crate::drop::DropReason;
use crate::packet::{Meta, Packet};
use crate::queue::SpecError;
use crate::ratio::Ratio;
use latnet_units::{Duration, Rate, Time};
use latnet_wire::{parse_headers, PacketValue};
use rand::{RngCore, SeedableRng};
use rand_chacha::ChaCha8Rng;
use serde::Deserialize;
use std::collections::BTreeMap;
use std::net::IpAddr;

/// How values are drawn.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum MarkMethod {
    /// `V(u * R)`, `u` uniform.
    #[default]
    RandomRate,
    /// Token buckets per rate region.
    TokenBucket,
}

/// Marker settings as written in a scenario (inside a `pv-marker` queue).
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MarkerSpec {
    /// The throughput-value function (default log-linear).
    #[serde(default)]
    pub tvf: Tvf,
    /// How values are drawn (default `random-rate`).
    #[serde(default)]
    pub method: MarkMethod,
    /// Per-packet weight of the rate estimator's averages (default 1/8).
    #[serde(default = "MarkerSpec::default_ewma")]
    pub ewma: Ratio,
    /// Policy class weights, indexed by priority (default: one class of weight 1).
    #[serde(default)]
    pub weights: Vec<Ratio>,
    /// Largest number of flows tracked (default 65536).
    #[serde(default = "MarkerSpec::default_max_flows")]
    pub max_flows: u32,
    /// A flow idle this long starts over (default 1 s).
    #[serde(default = "MarkerSpec::default_idle")]
    pub idle: Duration,
    /// Token-bucket method: upper edges of the rate regions, increasing.
    pub regions: Option<Vec<Rate>>,
    /// Token-bucket method: bucket depth in time at the region's rate (default 10 ms).
    #[serde(default = "MarkerSpec::default_bucket")]
    pub bucket: Duration,
}

impl Default for MarkerSpec {
    fn default() -> Self {
        MarkerSpec {
            tvf: Tvf::default(),
            method: MarkMethod::default(),
            ewma: Self::default_ewma(),
            weights: Vec::new(),
            max_flows: Self::default_max_flows(),
            idle: Self::default_idle(),
            regions: None,
            bucket: Self::default_bucket(),
        }
    }
}

impl MarkerSpec {
    fn default_ewma() -> Ratio {
        Ratio::new(1, 8).unwrap_or(Ratio::ONE)
    }
    fn default_max_flows() -> u32 {
        65_536
    }
    fn default_idle() -> Duration {
        Duration::from_secs(1)
    }
    fn default_bucket() -> Duration {
        Duration::from_millis(10)
    }

    /// The default regions: 24 upper edges doubling from 100 kbit/s (to 838.9 Gbit/s).
    pub fn default_regions() -> Vec<Rate> {
        (0..24).map(|k| Rate::from_kbps(100u64 << k)).collect()
    }

    /// Check the settings.
    pub fn validate(&self) -> Result<(), SpecError> {
        let bad = |field, expected| Err(SpecError::OutOfRange { field, expected });
        if let Err(e) = self.tvf.validate() {
            return bad("tvf", e);
        }
        if self.ewma.is_zero() || !self.ewma.at_most_one() {
            return bad("ewma", "a weight in (0, 1]");
        }
        if self.weights.len() > 8 || self.weights.iter().any(|w| w.is_zero()) {
            return bad("weights", "at most 8 class weights, each above zero");
        }
        if self.max_flows == 0 {
            return bad("max_flows", "at least 1");
        }
        if let Some(r) = &self.regions {
            if r.is_empty() || r.len() > 64 || r[0].is_zero() || r.windows(2).any(|w| w[0] >= w[1])
            {
                return bad("regions", "1 to 64 increasing rates above zero");
            }
        }
        if self.method == MarkMethod::TokenBucket && self.bucket.is_zero() {
            return bad("bucket", "above zero");
        }
        Ok(())
    }
}

/// What the marker has done.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize)]
pub struct MarkerStats {
    /// Packets given a value.
    pub marked: u64,
    /// Of those, packets that had no value option before (one was inserted).
    pub inserted: u64,
    /// Packets that could not carry a value (no room in the header), sent without one.
    pub unmarkable: u64,
    /// Flows pushed out of a full table.
    pub evicted: u64,
}

type FlowKey = (IpAddr, IpAddr, u8, u16, u16);

/// Averages are kept with 8 fractional bits.
const Q: i128 = 256;
const NS: i128 = 1_000_000_000;

#[derive(Debug, Clone)]
struct FlowState {
    last: Time,
    packets: u64,
    gap_q: i128,
    size_q: i128,
    /// Token buckets (bit·ns), token-bucket method only.
    tokens: Vec<i128>,
    refilled: Time,
}

/// The marker. See the module documentation.
#[derive(Debug, Clone)]
pub struct PvMarker {
    spec: MarkerSpec,
    regions: Vec<Rate>,
    flows: BTreeMap<FlowKey, FlowState>,
    rng: ChaCha8Rng,
    stats: MarkerStats,
}

impl PvMarker {
    /// A marker with these settings; `seed` selects its random stream.
    pub fn new(spec: &MarkerSpec, seed: u64) -> Result<PvMarker, SpecError> {
        spec.validate()?;
        let regions = spec.regions.clone().unwrap_or_else(MarkerSpec::default_regions);
        let mut rng = ChaCha8Rng::seed_from_u64(seed);
        rng.set_stream(0x7076); // "pv"
        Ok(PvMarker {
            spec: spec.clone(),
            regions,
            flows: BTreeMap::new(),
            rng,
            stats: MarkerStats::default(),
        })
    }

    /// Counters.
    pub fn stats(&self) -> &MarkerStats {
        &self.stats
    }

    /// Flows currently tracked.
    pub fn flows(&self) -> usize {
        self.flows.len()
    }

    /// The settings.
    pub fn spec(&self) -> &MarkerSpec {
        &self.spec
    }

    /// The weight of a packet's policy class as (num, den).
    fn weight(&self, meta: &Meta) -> (u64, u64) {
        let w = match self.spec.weights.len() {
            0 => Ratio::ONE,
            n => self.spec.weights[usize::from(meta.priority).min(n - 1)],
        };
        (w.num(), w.den())
    }

    /// The current rate estimate of a flow (bit/s), if it has sent two packets.
    fn rate_of(st: &FlowState) -> Option<u64> {
        if st.packets < 2 || st.gap_q <= 0 {
            return None;
        }
        u64::try_from(st.size_q * 8 * NS / st.gap_q).ok()
    }

    /// The rate estimate of the flow of `key` (for tests and reports).
    pub fn rate_estimate(&self, key: (IpAddr, IpAddr, u8, u16, u16)) -> Option<u64> {
        self.flows.get(&key).and_then(Self::rate_of)
    }

    fn make_room(&mut self, now: Time) {
        let idle = self.spec.idle;
        self.flows.retain(|_, st| now.saturating_duration_since(st.last) < idle);
        if self.flows.len() >= self.spec.max_flows as usize {
            // least recently seen; ties to the smallest key (BTreeMap order): deterministic
            if let Some(k) = self.flows.iter().min_by_key(|(_, st)| st.last).map(|(k, _)| *k) {
                self.flows.remove(&k);
                self.stats.evicted += 1;
            }
        }
    }

    /// The value of a packet of `size` bytes of flow `key` at `now` (updates the flow's state).
    pub fn value_for(&mut self, now: Time, key: FlowKey, size: u64, meta: &Meta) -> PacketValue {
        let (wn, wd) = self.weight(meta);
        if !self.flows.contains_key(&key) && self.flows.len() >= self.spec.max_flows as usize {
            self.make_room(now);
        }
        let n_regions = self.regions.len();
        let idle = self.spec.idle;
        let st = self.flows.entry(key).or_insert_with(|| FlowState {
            last: now,
            packets: 0,
            gap_q: 0,
            size_q: 0,
            tokens: Vec::new(),
            refilled: now,
        });
        if st.packets > 0 && now.saturating_duration_since(st.last) >= idle {
            // idle too long: start over
            *st = FlowState {
                last: now,
                packets: 0,
                gap_q: 0,
                size_q: 0,
                tokens: Vec::new(),
                refilled: now,
            };
        }
        // rate estimator
        let size_q = i128::from(size) * Q;
        if st.packets == 0 {
            st.size_q = size_q;
        } else {
            let gap_q = i128::from(now.saturating_duration_since(st.last).as_nanos()) * Q;
            let (n, d) = (i128::from(self.spec.ewma.num()), i128::from(self.spec.ewma.den()));
            if st.packets == 1 {
                st.gap_q = gap_q;
            } else {
                st.gap_q += (gap_q - st.gap_q) * n / d;
            }
            st.size_q += (size_q - st.size_q) * n / d;
        }
        st.packets += 1;
        st.last = now;
        let tvf = self.spec.tvf;
        match self.spec.method {
            MarkMethod::RandomRate => {
                let r = Self::rate_of(st).unwrap_or(0);
                let u = u64::from(self.rng.next_u32());
                let x = u64::try_from((u128::from(r) * u128::from(u)) >> 32).unwrap_or(u64::MAX);
                PacketValue(tvf.value_weighted(x, wn, wd))
            }
            MarkMethod::TokenBucket => {
                let regions = &self.regions;
                let depth = |j: usize| -> i128 {
                    let lo = if j == 0 { Rate::ZERO } else { regions[j - 1] };
                    let r = regions[j].saturating_sub(lo);
                    let d = i128::try_from(r.bit_nanos(self.spec.bucket)).unwrap_or(i128::MAX / 4);
                    d.max(1500 * 8 * NS)
                };
                if st.tokens.len() != n_regions {
                    st.tokens = (0..n_regions).map(depth).collect();
                    st.refilled = now;
                }
                let dt = now.saturating_duration_since(st.refilled);
                st.refilled = now;
                let bits = i128::from(size) * 8 * NS;
                let mut pv = None;
                for j in 0..n_regions {
                    let lo = if j == 0 { Rate::ZERO } else { regions[j - 1] };
                    let r = regions[j].saturating_sub(lo);
                    let add = i128::try_from(r.bit_nanos(dt)).unwrap_or(i128::MAX / 4);
                    st.tokens[j] = st.tokens[j].saturating_add(add).min(depth(j));
                    if pv.is_none() && st.tokens[j] >= bits {
                        st.tokens[j] -= bits;
                        pv = Some(tvf.value_weighted(regions[j].bps(), wn, wd));
                    }
                }
                PacketValue(pv.unwrap_or_else(|| tvf.value(u64::MAX)))
            }
        }
    }

    /// Give `pkt` its value at `now`. `Ok(Some(pv))` when written, `Ok(None)` when the header
    /// had no room for the option (the packet goes on without a value); `Err` with the drop
    /// reason for a frame that does not parse or holds a malformed value option.
    pub fn mark(&mut self, now: Time, pkt: &mut Packet) -> Result<Option<PacketValue>, DropReason> {
        // one walk of the headers serves the flow key, the old value and the write
        let Ok(h) = parse_headers(&pkt.data) else { return Err(DropReason::Malformed) };
        let Some(k) = h.key else { return Err(DropReason::Malformed) };
        let key = (k.src, k.dst, k.proto, k.src_port, k.dst_port);
        let kinds = latnet_wire::ppv::KINDS;
        let had = match latnet_wire::option_edit::find_ip_option_in(&pkt.data, &h, kinds) {
            Ok(Some(r)) if r.len() == 2 => true,
            Ok(None) => false,
            _ => return Err(DropReason::MalformedOption),
        };
        // The value is for the frame as sent: count the option it will carry. IPv4 grows by
        // the 4 option bytes; IPv6 by what the hop-by-hop header grows (8 for a new header,
        // 0 to 8 with padding in an existing one), so there the option is inserted first with
        // a placeholder and the value written into it (no IPv6 header checksum to mend).
        let v6_insert = !had && matches!(h.l3, latnet_wire::L3::Ipv6 { .. });
        let written = if v6_insert {
            match latnet_wire::option_edit::set_ip_option_in(&mut pkt.data, &h, kinds, &[0, 0]) {
                Ok(r) => {
                    let pv = self.value_for(now, key, pkt.wire_len().get(), &pkt.meta);
                    match pkt.data.get_mut(r) {
                        Some(d) if d.len() == 2 => {
                            d.copy_from_slice(&pv.0.to_be_bytes());
                            Ok(pv)
                        }
                        _ => return Err(DropReason::MalformedOption),
                    }
                }
                Err(_) => {
                    let _ = self.value_for(now, key, pkt.wire_len().get(), &pkt.meta);
                    Err(())
                }
            }
        } else {
            let size = pkt.wire_len().get() + if had { 0 } else { 4 };
            let pv = self.value_for(now, key, size, &pkt.meta);
            latnet_wire::option_edit::set_ip_option_in(
                &mut pkt.data,
                &h,
                kinds,
                &pv.0.to_be_bytes(),
            )
            .map(|_| pv)
            .map_err(|_| ())
        };
        match written {
            Ok(pv) => {
                self.stats.marked += 1;
                if !had {
                    self.stats.inserted += 1;
                }
                Ok(Some(pv))
            }
            Err(_) => {
                self.stats.unmarkable += 1;
                Ok(None)
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use latnet_wire::Ecn as Ecn6;
    use std::net::Ipv4Addr;

    fn key(i: u8) -> FlowKey {
        (IpAddr::V4(Ipv4Addr::new(10, 0, 0, i)), IpAddr::V4(Ipv4Addr::new(10, 0, 1, 1)), 17, 1, 2)
    }

    /// A flow at a constant rate: the estimate converges to it, and the values are spread as
    /// `V(u R)`: the fraction above `V(x)` is `x / R`.
    #[test]
    fn random_rate_values_follow_the_tvf() {
        let spec = MarkerSpec::default();
        let mut m = PvMarker::new(&spec, 1).unwrap();
        let gap = 12_000; // 1500 B every 12 us = 1 Gbit/s
        let mut above = 0;
        let n = 20_000;
        let thr = spec.tvf.value(250_000_000);
        for i in 0..n {
            let pv = m.value_for(Time::from_nanos(i * gap), key(1), 1500, &Meta::default());
            if i >= 100 && pv.0 > thr {
                above += 1;
            }
        }
        let r = m.rate_estimate(key(1)).unwrap();
        assert_eq!(r, 1_000_000_000);
        let frac = f64::from(above) / (n - 100) as f64;
        assert!((frac - 0.25).abs() < 0.01, "fraction above V(R/4) = {frac}");
    }

    #[test]
    fn weights_by_priority() {
        let spec = MarkerSpec {
            weights: vec![Ratio::ONE, Ratio::new(1, 2).unwrap()],
            method: MarkMethod::TokenBucket,
            ..MarkerSpec::default()
        };
        let mut m = PvMarker::new(&spec, 1).unwrap();
        let gold = Meta { priority: 0, ..Meta::default() };
        let silver = Meta { priority: 7, ..Meta::default() };
        // first packet: region 0 (100 kbit/s) for both, silver valued as if twice the rate
        let g = m.value_for(Time::ZERO, key(1), 1500, &gold);
        let s = m.value_for(Time::ZERO, key(2), 1500, &silver);
        assert_eq!(g.0, spec.tvf.value(100_000));
        assert_eq!(s.0, spec.tvf.value(200_000));
    }

    /// Token buckets: a flow at 1 Mbit/s gets, over time, bytes of value V(r_j) in proportion to
    /// the region widths up to its rate.
    #[test]
    fn token_bucket_regions() {
        let spec = MarkerSpec {
            method: MarkMethod::TokenBucket,
            regions: Some(vec![Rate::from_kbps(250), Rate::from_kbps(500), Rate::from_mbps(10)]),
            bucket: Duration::from_millis(1),
            ..MarkerSpec::default()
        };
        let mut m = PvMarker::new(&spec, 1).unwrap();
        let mut per = BTreeMap::new();
        // 1 Mbit/s: 125 B every 1 ms, 10 s
        for i in 0..10_000u64 {
            let pv = m.value_for(Time::from_nanos(i * 1_000_000), key(1), 125, &Meta::default());
            *per.entry(pv.0).or_insert(0u64) += 125;
        }
        let v = |r: u64| spec.tvf.value(r);
        let total: u64 = per.values().sum();
        let share = |r| per.get(&v(r)).copied().unwrap_or(0) as f64 / total as f64;
        assert!((share(250_000) - 0.25).abs() < 0.02, "{per:?}");
        assert!((share(500_000) - 0.25).abs() < 0.02, "{per:?}");
        assert!((share(10_000_000) - 0.50).abs() < 0.02, "{per:?}");
    }

    /// The rate is measured on frames as sent: an IPv6 packet without a hop-by-hop header
    /// gains 8 bytes (a new header holding the option), an IPv4 one 4. Frames of 1000 bytes
    /// as sent, one every 8 us: 1 Gbit/s exactly, for both.
    #[test]
    fn rate_counts_the_bytes_the_value_adds() {
        use latnet_wire::EthernetAddress;
        use std::net::Ipv6Addr;
        let mac = EthernetAddress([2, 0, 0, 0, 0, 1]);
        let mut m = PvMarker::new(&MarkerSpec::default(), 1).unwrap();
        let (a6, b6) = (Ipv6Addr::LOCALHOST, Ipv6Addr::UNSPECIFIED);
        let (a4, b4) = (Ipv4Addr::new(10, 0, 0, 1), Ipv4Addr::new(10, 0, 0, 2));
        for i in 0..50u64 {
            let now = Time::from_nanos(i * 8_000);
            let mut f = Vec::new();
            latnet_wire::build_udp_ipv6(&mut f, mac, mac, a6, b6, 0, Ecn6::Ect1, 64, 1, 2, 100)
                .unwrap();
            let virt = 1000 - 8 - f.len() as u32;
            let mut p = Packet::new(f, virt, Meta::default());
            m.mark(now, &mut p).unwrap().unwrap();
            assert_eq!(p.wire_len().get(), 1000);
            let mut f = Vec::new();
            latnet_wire::build_udp_ipv4(&mut f, mac, mac, a4, b4, 0, Ecn6::Ect1, 64, 1, 2, 100)
                .unwrap();
            let virt = 1000 - 4 - f.len() as u32;
            let mut p = Packet::new(f, virt, Meta::default());
            m.mark(now, &mut p).unwrap().unwrap();
            assert_eq!(p.wire_len().get(), 1000);
        }
        let k6 = (IpAddr::V6(a6), IpAddr::V6(b6), 17, 1, 2);
        let k4 = (IpAddr::V4(a4), IpAddr::V4(b4), 17, 1, 2);
        assert_eq!(m.rate_estimate(k4), Some(1_000_000_000));
        assert_eq!(m.rate_estimate(k6), Some(1_000_000_000));
    }

    #[test]
    fn table_is_bounded_and_evicts_least_recent() {
        let spec = MarkerSpec { max_flows: 2, ..MarkerSpec::default() };
        let mut m = PvMarker::new(&spec, 1).unwrap();
        for (t, k) in [(0, 1), (1, 2), (2, 1), (3, 3)] {
            m.value_for(Time::from_nanos(t), key(k), 100, &Meta::default());
        }
        assert_eq!(m.flows(), 2);
        assert_eq!(m.stats().evicted, 1);
        assert!(m.flows.contains_key(&key(1)) && m.flows.contains_key(&key(3)));
    }

    #[test]
    fn validation_names_fields() {
        let bad = MarkerSpec { ewma: Ratio::new(3, 2).unwrap(), ..MarkerSpec::default() };
        assert!(matches!(PvMarker::new(&bad, 0), Err(SpecError::OutOfRange { field: "ewma", .. })));
        let bad = MarkerSpec {
            regions: Some(vec![Rate::from_mbps(2), Rate::from_mbps(1)]),
            ..MarkerSpec::default()
        };
        assert!(PvMarker::new(&bad, 0).is_err());
    }
}
