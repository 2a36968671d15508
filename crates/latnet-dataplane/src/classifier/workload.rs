//! The seed's three evaluation scenarios (Section 5.1) as rule sets and traffic generators:
//! three stages — stage 1 mask match on Ethernet (destination MAC, EtherType); stage 2 an
//! IPv6 ACL (data-centre server communication), a SEADP table (videoconferencing) or a WSM
//! table (vehicles); stage 3 a FIB: LPM on the IPv6 destination, or exact match on the
//! destination MAC (WSM).
//!
//! Rule counts and the share of low-latency rules are parameters ([`WorkloadSpec`]; the
//! seed gives none); `experiments/ffp/*.toml` hold the values we use. Everything is drawn from
//! a seeded ChaCha stream: the same spec gives the same rules and packets.
//!
//! Header layouts: Ethernet II + IPv6 + UDP/TCP ports for the ACL; for SEADP (whose layout the
//! seed does not give) we assume IPv6 with next header 253 (experimental) followed by
//! `type(8) flags(8) length(16) sport(16) dport(16) dst_eid(160) src_eid(160)` — 160-bit
//! entity ids as in SEANet; WSM is carried directly over Ethernet (EtherType 0x88DC) with a
//! version byte and the PSID taken as the next 32 bits.
//!
//! A flow is *low-latency* when every entry it hits is a low-latency entry; the generator runs
//! candidate packets through a plain pipeline and sorts them by the decision's flag.

use super::control::{Control, FlowCommand, FlowMod, TableMod};
use super::field::Field;
use super::instr::Instruction;
use super::key::Key;
use super::pipeline::{Pipeline, Verdict};
use super::table::{Algo, Match, TableKind, TableSpec};
use latnet_units::Time;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

/// SEADP fields (our assumed layout after a 54-byte Ethernet + IPv6 header).
pub mod seadp {
    use super::Field;
    /// IPv6 next-header value we use for SEADP.
    pub const NEXT_HEADER: u8 = 253;
    /// Packet type.
    pub const TYPE: Field = Field::packet(432, 8);
    /// Flags.
    pub const FLAGS: Field = Field::packet(440, 8);
    /// Destination entity id (160 bits).
    pub const DST_EID: Field = Field::packet(496, 160);
    /// Source entity id (160 bits).
    pub const SRC_EID: Field = Field::packet(656, 160);
    /// Header bytes through the source EID.
    pub const HEADER_END: usize = 102;
}

/// WSM (IEEE 1609.3 WSMP over Ethernet) fields.
pub mod wsm {
    use super::Field;
    /// EtherType of WSMP.
    pub const ETHERTYPE: u16 = 0x88dc;
    /// WSMP version byte.
    pub const VERSION: Field = Field::packet(112, 8);
    /// Provider service id (the next 32 bits).
    pub const PSID: Field = Field::packet(120, 32);
}

/// The three scenarios.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum ScenarioKind {
    /// Data-centre server communication: IPv6 5-tuple ACL, IPv6 FIB (LPM).
    Acl,
    /// Videoconferencing: SEADP table on entity ids, IPv6 FIB (LPM).
    Seadp,
    /// Vehicles: WSM table on version and PSID, MAC FIB (exact).
    Wsm,
}

impl ScenarioKind {
    /// Stable name.
    pub fn as_str(self) -> &'static str {
        match self {
            ScenarioKind::Acl => "acl",
            ScenarioKind::Seadp => "seadp",
            ScenarioKind::Wsm => "wsm",
        }
    }
}

/// Parameters of a scenario's rule set and traffic.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct WorkloadSpec {
    /// Which scenario.
    pub scenario: ScenarioKind,
    /// Rules in the stage-2 table.
    pub rules: u32,
    /// Entries in the stage-3 FIB.
    pub routes: u32,
    /// Share of stage-2 rules the controller marks low-latency, per mille.
    pub ll_rules_permille: u32,
    /// Distinct flows of each kind (low-latency, normal) in the traffic.
    pub flows: u32,
    /// Seed of the generator.
    pub seed: u64,
}

/// A generated scenario: control messages that build the pipeline, and packets of
/// low-latency and of normal flows (header bytes, padded to the frame size by [`frame`]).
#[derive(Debug, Clone)]
pub struct Workload {
    /// The spec.
    pub spec: WorkloadSpec,
    /// Table-mods then flow-mods, in order.
    pub messages: Vec<Control>,
    /// One packet per low-latency flow.
    pub ll_flows: Vec<Vec<u8>>,
    /// One packet per normal flow.
    pub normal_flows: Vec<Vec<u8>>,
}

/// Pad header bytes to a frame of `size` bytes (the payload is zeros).
pub fn frame(headers: &[u8], size: usize) -> Vec<u8> {
    let mut v = headers.to_vec();
    if v.len() < size {
        v.resize(size, 0);
    }
    v
}

const SWITCH_MAC: u64 = 0x0200_0000_00fe;
const PORTS: u16 = 8;

fn key_from_bytes(b: &[u8]) -> Key {
    let mut k = Key::ZERO;
    for (i, &x) in b.iter().enumerate() {
        k.put_bits(i * 8, 8, u64::from(x));
    }
    k
}

fn add(
    table: u8,
    id: u32,
    priority: u16,
    matcher: Match,
    actions: Vec<Instruction>,
    ll: bool,
) -> Control {
    Control::Flow(FlowMod {
        command: FlowCommand::Add,
        table,
        id,
        priority,
        matcher,
        instructions: actions,
        low_latency: ll,
        idle_timeout: None,
        hard_timeout: None,
    })
}

fn table(id: u8, name: &str, kind: TableKind, fields: Vec<(&str, Field)>, size: u32) -> Control {
    Control::Table(TableMod::Add(TableSpec {
        id,
        name: name.to_owned(),
        kind,
        names: fields.iter().map(|(n, _)| (*n).to_owned()).collect(),
        fields: fields.into_iter().map(|(_, f)| f).collect(),
        max_entries: size,
        miss: Vec::new(),
    }))
}

/// Mask-match key helper: concatenated (value, mask) of fields.
struct Mk {
    v: Key,
    m: Key,
    pos: usize,
}

impl Mk {
    fn new() -> Mk {
        Mk { v: Key::ZERO, m: Key::ZERO, pos: 0 }
    }
    /// A field of `bits` bits: its value (as a key whose first bits hold it) and prefix length.
    fn field(mut self, bits: usize, value: &Key, plen: usize) -> Mk {
        let mask = Key::prefix_mask(plen);
        let v = value.and(&mask);
        let mut done = 0;
        while done < bits {
            let n = (bits - done).min(64);
            self.v.put_bits(self.pos + done, n, v.get_bits(done, n));
            self.m.put_bits(self.pos + done, n, mask.get_bits(done, n));
            done += n;
        }
        self.pos += bits;
        self
    }
    fn done(self) -> Match {
        Match::Masked { value: self.v, mask: self.m }
    }
}

fn ipv6_key(hi: u64, lo: u64) -> Key {
    let mut k = Key::ZERO;
    k.put_bits(0, 64, hi);
    k.put_bits(64, 64, lo);
    k
}

fn uint_key(v: u64, bits: usize) -> Key {
    let mut k = Key::ZERO;
    k.put_bits(0, bits, v);
    k
}

/// Stage 1: the Ethernet table, the same shape in every scenario: the scenario's EtherType
/// to the switch (or any MAC for WSM) goes on, other known types are handled, some
/// MAC-specific rules of higher priority sit above.
fn eth_stage(msgs: &mut Vec<Control>, kind: ScenarioKind, rng: &mut ChaCha8Rng) {
    let mac = |m: u64| uint_key(m, 48);
    let ty = |t: u64| uint_key(t, 16);
    msgs.push(table(
        0,
        "eth",
        TableKind::Mask,
        vec![("eth.dst", Field::packet(0, 48)), ("eth.type", Field::packet(96, 16))],
        64,
    ));
    let next = vec![Instruction::GotoTable(1)];
    let (main_mac, main_plen, main_type) = match kind {
        ScenarioKind::Wsm => (0, 0, u64::from(wsm::ETHERTYPE)),
        _ => (SWITCH_MAC, 48, 0x86dd),
    };
    msgs.push(add(
        0,
        1,
        100,
        Mk::new().field(48, &mac(main_mac), main_plen).field(16, &ty(main_type), 16).done(),
        next,
        true,
    ));
    // other traffic the switch sees
    let others: [(u64, u64, Vec<Instruction>); 5] = [
        (SWITCH_MAC, 0x0800, vec![Instruction::Output(0)]),
        (0xffff_ffff_ffff, 0x0806, vec![Instruction::Output(0)]),
        (0x0180_c200_000e, 0x88cc, vec![Instruction::Drop]),
        (0x0180_c200_0000, 0x0000, vec![Instruction::Drop]),
        (SWITCH_MAC, 0x8847, vec![Instruction::Output(1)]),
    ];
    for (i, (m, t, a)) in others.into_iter().enumerate() {
        let tl = if t == 0 { 0 } else { 16 };
        msgs.push(add(
            0,
            10 + i as u32,
            50 + i as u16,
            Mk::new().field(48, &mac(m), 48).field(16, &ty(t), tl).done(),
            a,
            false,
        ));
    }
    // higher-priority rules for specific (other) hosts' MACs
    for i in 0..8u32 {
        let m = 0x0200_0100_0000 | u64::from(rng.gen::<u16>());
        msgs.push(add(
            0,
            100 + i,
            200 + i as u16,
            Mk::new().field(48, &mac(m), 48).field(16, &ty(0), 0).done(),
            vec![Instruction::Drop],
            false,
        ));
    }
}

#[derive(Debug, Clone, Copy)]
struct Route {
    hi: u64,
    len: usize,
}

/// Stage 3 for the IPv6 scenarios: LPM on the destination; stable routes, marked low-latency
/// by the controller; a normal default route.
fn ipv6_fib(msgs: &mut Vec<Control>, routes: u32, rng: &mut ChaCha8Rng) -> Vec<Route> {
    msgs.push(table(
        2,
        "fib",
        TableKind::Lpm,
        vec![("ipv6.dst", Field::packet(304, 128))],
        routes + 16,
    ));
    let lens = [32usize, 40, 48, 48, 48, 56, 64];
    let mut out = Vec::new();
    let mut seen = std::collections::HashSet::new();
    let mut id = 1;
    while out.len() < routes as usize {
        let len = lens[rng.gen_range(0..lens.len())];
        let hi = (0x2001_0db8u64 << 32 | u64::from(rng.gen::<u32>())) & (u64::MAX << (64 - len));
        if !seen.insert((hi, len)) {
            continue;
        }
        let port = rng.gen_range(1..PORTS);
        msgs.push(add(
            2,
            id,
            0,
            Match::Prefix { value: ipv6_key(hi, 0), len: len as u16 },
            vec![Instruction::Output(port)],
            true,
        ));
        out.push(Route { hi, len });
        id += 1;
    }
    msgs.push(add(
        2,
        0,
        0,
        Match::Prefix { value: Key::ZERO, len: 0 },
        vec![Instruction::Output(0)],
        false,
    ));
    out
}

type PacketGen = Box<dyn FnMut(&mut ChaCha8Rng, usize) -> Vec<u8>>;

/// Build a scenario.
pub fn build(spec: &WorkloadSpec) -> Workload {
    let mut rng = ChaCha8Rng::seed_from_u64(spec.seed);
    let mut msgs = Vec::new();
    eth_stage(&mut msgs, spec.scenario, &mut rng);
    let ll_rule = |rng: &mut ChaCha8Rng| rng.gen_range(0..1000) < spec.ll_rules_permille;
    let mut gen_packet: PacketGen;
    match spec.scenario {
        ScenarioKind::Acl => {
            let routes = ipv6_fib(&mut msgs, spec.routes, &mut rng);
            msgs.push(table(
                1,
                "acl",
                TableKind::Mask,
                vec![
                    ("ipv6.src", Field::packet(176, 128)),
                    ("ipv6.dst", Field::packet(304, 128)),
                    ("ipv6.next", Field::packet(160, 8)),
                    ("ipv6.sport", Field::packet(432, 16)),
                    ("ipv6.dport", Field::packet(448, 16)),
                ],
                spec.rules + 16,
            ));
            let dports = [22u64, 80, 443, 3306, 5001, 6379, 8080, 9092];
            let mut rules = Vec::new();
            for i in 0..spec.rules {
                let r = routes[rng.gen_range(0..routes.len())];
                let slen = [32usize, 48, 56, 64][rng.gen_range(0..4)];
                let dlen = [32usize, 48, 56, 64][rng.gen_range(0..4)];
                let src = (0x2001_0db8u64 << 32) | u64::from(rng.gen::<u32>());
                let dst = (r.hi & (u64::MAX << (64 - r.len)))
                    | (rng.gen::<u64>() & !(u64::MAX << (64 - r.len)) & 0xffff_ffff);
                let proto = [6u64, 17, 0][rng.gen_range(0..3)];
                let dport =
                    if rng.gen_bool(0.7) { dports[rng.gen_range(0..dports.len())] } else { 0 };
                let ll = ll_rule(&mut rng);
                let actions = if ll {
                    vec![Instruction::SetQueue(0), Instruction::GotoTable(2)]
                } else if rng.gen_bool(0.8) {
                    vec![Instruction::GotoTable(2)]
                } else {
                    vec![Instruction::Drop]
                };
                let m = Mk::new()
                    .field(128, &ipv6_key(src, 0), slen)
                    .field(128, &ipv6_key(dst, 0), dlen)
                    .field(8, &uint_key(proto, 8), if proto == 0 { 0 } else { 8 })
                    .field(16, &Key::ZERO, 0)
                    .field(16, &uint_key(dport, 16), if dport == 0 { 0 } else { 16 })
                    .done();
                let prio = rng.gen_range(1..=60_000u16);
                msgs.push(add(1, i + 1, prio, m, actions, ll));
                rules.push((src, slen, dst, dlen, proto, dport));
            }
            gen_packet = Box::new(move |rng, _| {
                let (src, slen, dst, dlen, proto, dport) = rules[rng.gen_range(0..rules.len())];
                let fill = |v: u64, len: usize, rng: &mut ChaCha8Rng| {
                    let keep = if len >= 64 { u64::MAX } else { u64::MAX << (64 - len) };
                    (v & keep) | (rng.gen::<u64>() & !keep)
                };
                let s_hi = fill(src, slen.min(64), rng);
                let d_hi = fill(dst, dlen.min(64), rng);
                let proto = if proto == 0 { [6u8, 17][rng.gen_range(0..2)] } else { proto as u8 };
                let dport = if dport == 0 { rng.gen_range(1..65535u16) } else { dport as u16 };
                let mut p = Vec::with_capacity(64);
                eth(&mut p, SWITCH_MAC, 0x86dd);
                ipv6(&mut p, proto, s_hi, rng.gen(), d_hi, rng.gen());
                p.extend_from_slice(&rng.gen_range(32768..61000u16).to_be_bytes());
                p.extend_from_slice(&dport.to_be_bytes());
                p.extend_from_slice(&[0; 4]);
                p
            });
        }
        ScenarioKind::Seadp => {
            let routes = ipv6_fib(&mut msgs, spec.routes, &mut rng);
            msgs.push(table(
                1,
                "seadp",
                TableKind::Mask,
                vec![
                    ("seadp.type", seadp::TYPE),
                    ("seadp.dst_eid", seadp::DST_EID),
                    ("seadp.src_eid", seadp::SRC_EID),
                ],
                spec.rules + 16,
            ));
            let mut rules = Vec::new();
            for i in 0..spec.rules {
                let ty = [1u64, 2, 3, 0][rng.gen_range(0..4)];
                let dlen = [64usize, 96, 128, 160][rng.gen_range(0..4)];
                let slen = [0usize, 0, 64, 160][rng.gen_range(0..4)];
                let deid: [u8; 20] = rng.gen();
                let seid: [u8; 20] = rng.gen();
                let ll = ll_rule(&mut rng);
                let actions = if ll {
                    vec![Instruction::SetQueue(1), Instruction::GotoTable(2)]
                } else if rng.gen_bool(0.85) {
                    vec![Instruction::GotoTable(2)]
                } else {
                    vec![Instruction::Drop]
                };
                let m = Mk::new()
                    .field(8, &uint_key(ty, 8), if ty == 0 { 0 } else { 8 })
                    .field(160, &key_from_bytes(&deid), dlen)
                    .field(160, &key_from_bytes(&seid), slen)
                    .done();
                let prio = rng.gen_range(1..=60_000u16);
                msgs.push(add(1, i + 1, prio, m, actions, ll));
                rules.push((ty, deid, dlen, seid, slen));
            }
            gen_packet = Box::new(move |rng, _| {
                let (ty, deid, dlen, seid, slen) = rules[rng.gen_range(0..rules.len())];
                let fill = |v: &[u8; 20], len: usize, rng: &mut ChaCha8Rng| {
                    let mut out: [u8; 20] = rng.gen();
                    for b in 0..len {
                        let (i, m) = (b / 8, 0x80u8 >> (b % 8));
                        out[i] = (out[i] & !m) | (v[i] & m);
                    }
                    out
                };
                let r = routes[rng.gen_range(0..routes.len())];
                let keep = u64::MAX << (64 - r.len);
                let d_hi = (r.hi & keep) | (rng.gen::<u64>() & !keep);
                let mut p = Vec::with_capacity(128);
                eth(&mut p, SWITCH_MAC, 0x86dd);
                ipv6(&mut p, seadp::NEXT_HEADER, 0x2001_0db8_0000_0001, 1, d_hi, rng.gen());
                let ty = if ty == 0 { rng.gen_range(1..4u8) } else { ty as u8 };
                p.push(ty);
                p.push(0);
                p.extend_from_slice(&48u16.to_be_bytes());
                p.extend_from_slice(&rng.gen::<u16>().to_be_bytes());
                p.extend_from_slice(&rng.gen::<u16>().to_be_bytes());
                p.extend_from_slice(&fill(&deid, dlen, rng));
                p.extend_from_slice(&fill(&seid, slen, rng));
                p
            });
        }
        ScenarioKind::Wsm => {
            msgs.push(table(
                2,
                "fib",
                TableKind::Exact,
                vec![("eth.dst", Field::packet(0, 48))],
                spec.routes + 16,
            ));
            let mut macs = Vec::new();
            for i in 0..spec.routes {
                let m = 0x0200_0200_0000u64 | u64::from(i);
                msgs.push(add(
                    2,
                    i + 1,
                    0,
                    Match::Exact(uint_key(m, 48)),
                    vec![Instruction::Output(1 + (i % u32::from(PORTS - 1)) as u16)],
                    true,
                ));
                macs.push(m);
            }
            msgs.push(table(
                1,
                "wsm",
                TableKind::Mask,
                vec![("wsm.version", wsm::VERSION), ("wsm.psid", wsm::PSID)],
                spec.rules + 16,
            ));
            let mut rules = Vec::new();
            for i in 0..spec.rules {
                let psid = u64::from(rng.gen::<u32>() & 0x00ff_ffff);
                let plen = [32usize, 32, 24, 16][rng.gen_range(0..4)];
                let ll = ll_rule(&mut rng);
                let actions = if ll {
                    vec![Instruction::SetQueue(0), Instruction::GotoTable(2)]
                } else {
                    vec![Instruction::GotoTable(2)]
                };
                let m = Mk::new()
                    .field(8, &uint_key(3, 8), 8)
                    .field(32, &uint_key(psid, 32), plen)
                    .done();
                let prio = rng.gen_range(1..=60_000u16);
                msgs.push(add(1, i + 1, prio, m, actions, ll));
                rules.push((psid, plen));
            }
            gen_packet = Box::new(move |rng, _| {
                let (psid, plen) = rules[rng.gen_range(0..rules.len())];
                let keep = (u32::MAX as u64) << (32 - plen) & 0xffff_ffff;
                let psid = (psid & keep) | (u64::from(rng.gen::<u32>()) & !keep & 0xffff_ffff);
                let mut p = Vec::with_capacity(64);
                eth(&mut p, macs[rng.gen_range(0..macs.len())], wsm::ETHERTYPE);
                p.push(3);
                p.extend_from_slice(&(psid as u32).to_be_bytes());
                p.extend_from_slice(&[0x80, 0x00, 0x20]);
                p
            });
        }
    }
    // sort candidate flows by their decision in a plain pipeline
    let mut check = Pipeline::new(Algo::Strong, spec.seed);
    for m in &msgs {
        // generated messages are valid by construction; a refusal here is a generator bug
        if let Err(e) = check.apply(Time::ZERO, m) {
            panic!("workload {}: generated message refused: {e}", spec.scenario.as_str());
        }
    }
    let mut ll_flows = Vec::new();
    let mut normal_flows = Vec::new();
    let want = spec.flows as usize;
    let mut tries = 0usize;
    while (ll_flows.len() < want || normal_flows.len() < want) && tries < want * 400 {
        tries += 1;
        let p = gen_packet(&mut rng, tries);
        let mut d = p.clone();
        let dec = check.process(Time::ZERO, &mut d, 1, 64);
        if !matches!(dec.verdict, Verdict::Output(_)) && dec.low_latency {
            continue;
        }
        if dec.low_latency {
            if ll_flows.len() < want {
                ll_flows.push(p);
            }
        } else if normal_flows.len() < want && dec.stages >= 2 {
            normal_flows.push(p);
        }
    }
    Workload { spec: spec.clone(), messages: msgs, ll_flows, normal_flows }
}

fn eth(p: &mut Vec<u8>, dst: u64, ty: u16) {
    p.extend_from_slice(&dst.to_be_bytes()[2..]);
    p.extend_from_slice(&0x0200_0000_0001u64.to_be_bytes()[2..]);
    p.extend_from_slice(&ty.to_be_bytes());
}

fn ipv6(p: &mut Vec<u8>, next: u8, s_hi: u64, s_lo: u64, d_hi: u64, d_lo: u64) {
    p.extend_from_slice(&[0x60, 0, 0, 0]);
    p.extend_from_slice(&64u16.to_be_bytes());
    p.push(next);
    p.push(64);
    p.extend_from_slice(&s_hi.to_be_bytes());
    p.extend_from_slice(&s_lo.to_be_bytes());
    p.extend_from_slice(&d_hi.to_be_bytes());
    p.extend_from_slice(&d_lo.to_be_bytes());
}

/// A packet sequence: `n` packets, each from a low-latency flow with probability
/// `ll_permille / 1000`, flows drawn uniformly; returns (is low-latency, flow index) pairs.
pub fn mix(w: &Workload, n: usize, ll_permille: u32, seed: u64) -> Vec<(bool, usize)> {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    (0..n)
        .filter_map(|_| {
            let ll = rng.gen_range(0..1000) < ll_permille;
            let pool = if ll { &w.ll_flows } else { &w.normal_flows };
            (!pool.is_empty()).then(|| (ll, rng.gen_range(0..pool.len())))
        })
        .collect()
}

impl Workload {
    /// A classifier with this workload's tables and rules installed.
    pub fn classifier(&self, algo: Algo, ffp: Option<super::ffp::FfpConfig>) -> super::Classifier {
        let mut c = super::Classifier::new(algo, ffp, self.spec.seed);
        for m in &self.messages {
            // the same messages were accepted by a plain pipeline in `build`
            if let Err(e) = c.apply(Time::ZERO, m) {
                panic!("workload {}: message refused: {e}", self.spec.scenario.as_str());
            }
        }
        c
    }

    /// Frames of `size` bytes for a packet sequence from [`mix`].
    pub fn frames(&self, seq: &[(bool, usize)], size: usize) -> Vec<Vec<u8>> {
        seq.iter()
            .map(|&(ll, i)| frame(if ll { &self.ll_flows[i] } else { &self.normal_flows[i] }, size))
            .collect()
    }

    /// The rule set as JSON control messages, one per line (the text form of
    /// [`super::text`]).
    pub fn to_json_lines(&self) -> String {
        let mut out = String::new();
        let mut specs: Vec<TableSpec> = Vec::new();
        for m in &self.messages {
            let line = match m {
                Control::Table(TableMod::Add(t)) => {
                    specs.push(t.clone());
                    let fields: Vec<serde_json::Value> = t
                        .fields
                        .iter()
                        .zip(&t.names)
                        .map(|(f, n)| {
                            serde_json::json!({"name": n, "offset": f.offset, "length": f.length,
                                               "meta": f.space == super::field::Space::Meta})
                        })
                        .collect();
                    serde_json::json!({"table_add": {"id": t.id, "name": t.name,
                        "kind": t.kind.as_str(), "fields": fields, "size": t.max_entries}})
                }
                Control::Flow(fm) => {
                    let Some(spec) = specs.iter().find(|s| s.id == fm.table) else { continue };
                    serde_json::json!({"flow_mod": rule_json(spec, &specs, fm)})
                }
                _ => continue,
            };
            out.push_str(&line.to_string());
            out.push('\n');
        }
        out
    }
}

fn hex_bits(k: &Key, pos: usize, bits: usize) -> String {
    let mut s = String::from("0x");
    let mut done = 0;
    // whole nibbles, left-padded: the value is right-aligned in `bits`
    let pad = (4 - bits % 4) % 4;
    let mut v = Key::ZERO;
    while done < bits {
        let n = (bits - done).min(64);
        v.put_bits(pad + done, n, k.get_bits(pos + done, n));
        done += n;
    }
    for i in 0..(bits + pad) / 4 {
        s.push(char::from_digit(v.get_bits(i * 4, 4) as u32, 16).unwrap_or('0'));
    }
    s
}

fn action_text(i: &Instruction, specs: &[TableSpec]) -> String {
    let tname = |t: u8| specs.iter().find(|s| s.id == t).map_or(t.to_string(), |s| s.name.clone());
    match i {
        Instruction::GotoTable(t) => format!("goto {}", tname(*t)),
        Instruction::GotoDirect { table, index } => {
            format!("goto_direct {} {index}", tname(*table))
        }
        Instruction::SetField { field, value } => format!(
            "set_field {}{}:{} {}",
            if field.space == super::field::Space::Meta { "meta:" } else { "" },
            field.offset,
            field.length,
            hex_bits(value, 0, usize::from(field.length))
        ),
        Instruction::SetQueue(q) => format!("set_queue {q}"),
        Instruction::PushTag { tpid, tci } => format!("push_tag {tpid} {tci}"),
        Instruction::PopTag => "pop_tag".into(),
        Instruction::Output(p) => format!("output {p}"),
        Instruction::Drop => "drop".into(),
    }
}

fn rule_json(spec: &TableSpec, specs: &[TableSpec], fm: &FlowMod) -> serde_json::Value {
    let mut m = serde_json::Map::new();
    let mut pos = 0;
    match fm.matcher {
        Match::Index => {}
        Match::Prefix { value, len } => {
            let name = spec.names.first().cloned().unwrap_or_else(|| "key".into());
            m.insert(name, format!("{}/{len}", hex_bits(&value, 0, spec.width())).into());
        }
        Match::Exact(value) => {
            for (f, n) in spec.fields.iter().zip(&spec.names) {
                let b = usize::from(f.length);
                m.insert(n.clone(), hex_bits(&value, pos, b).into());
                pos += b;
            }
        }
        Match::Masked { value, mask } => {
            for (f, n) in spec.fields.iter().zip(&spec.names) {
                let b = usize::from(f.length);
                let mk = hex_bits(&mask, pos, b);
                if mk.trim_start_matches("0x").chars().any(|c| c != '0') {
                    m.insert(n.clone(), format!("{}&{mk}", hex_bits(&value, pos, b)).into());
                }
                pos += b;
            }
        }
    }
    serde_json::json!({
        "table": spec.name, "id": fm.id, "priority": fm.priority, "low_latency": fm.low_latency,
        "match": m,
        "actions": fm.instructions.iter().map(|i| action_text(i, specs)).collect::<Vec<_>>(),
    })
}
