//! Differential property test of the composite pipeline (the seed's FFP) against the plain
//! pipeline, and of the POF-style against the strong lookup structures.
//!
//! Each case draws random tables (mask, LPM, exact, linear; narrow fields over a short packet
//! and the metadata so that rules overlap a lot), then interleaves random packets with random
//! churn: adds (overlapping masks, tied priorities, low-latency or normal), deletes, in-place
//! and re-installing modifies, table-miss changes, timeouts and low-latency learning. Four
//! classifiers get the same messages — plain POF, plain strong, composite over POF, composite
//! over strong — and must agree on every control reply, every decision, the packet bytes after
//! processing and every entry's counters. Small LUTs and short extra-rule lists are drawn too,
//! so eviction and record resets are exercised.
//!
//! `make test` runs [`differential_100k`] (over 100,000 packets); `make fuzz` also runs the
//! ignored [`differential_1m`] (over 1,000,000 packets, other seeds).

#![allow(clippy::unwrap_used)]

use latnet_dataplane::classifier::{
    Algo, Classifier, Control, FfpConfig, Field, FlowCommand, FlowMod, Instruction, Key,
    LearnPolicy, Match, Reply, StatsRequest, TableKind, TableMod, TableSpec,
};
use latnet_units::{Duration, Time};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

struct Case {
    rng: ChaCha8Rng,
    tables: Vec<TableSpec>,
    /// (table, id) of installed entries (as far as the generator knows)
    ids: Vec<(u8, u32)>,
    next_id: u32,
    now: Time,
    /// values of installed masks, to draw packets near rules
    values: Vec<(u8, Key, Key)>,
    /// Packet bytes; fields lie within them (or just past their end).
    pkt_bytes: usize,
    /// Longest match field, in bits (wide fields give keys of several 64-bit words).
    max_field: u16,
}

const PKT_BYTES: usize = 20;

impl Case {
    fn new(seed: u64) -> Case {
        Case {
            rng: ChaCha8Rng::seed_from_u64(seed),
            tables: Vec::new(),
            ids: Vec::new(),
            next_id: 0,
            now: Time::ZERO,
            values: Vec::new(),
            pkt_bytes: PKT_BYTES,
            max_field: 12,
        }
    }

    /// A case whose fields are up to 200 bits wide over a 64-byte packet, so that keys span
    /// several words and fields straddle word boundaries.
    fn wide(seed: u64) -> Case {
        Case { pkt_bytes: 64, max_field: 200, ..Case::new(seed) }
    }

    fn field(&mut self) -> Field {
        if self.rng.gen_bool(0.1) {
            Field::meta(self.rng.gen_range(0..40), self.rng.gen_range(1..10))
        } else {
            if self.max_field > 12 && self.rng.gen_bool(0.5) {
                let len = self.rng.gen_range(12..=self.max_field);
                let bits = self.pkt_bytes as u16 * 8;
                return Field::packet(self.rng.gen_range(0..bits.saturating_sub(len) + 8), len);
            }
            Field::packet(
                self.rng.gen_range(0..(self.pkt_bytes as u16 * 8 - 12)),
                self.rng.gen_range(1..12),
            )
        }
    }

    fn gen_tables(&mut self) -> Vec<Control> {
        let n = self.rng.gen_range(2..=5u8);
        let mut out = Vec::new();
        for id in 0..n {
            let kind = match (id, self.rng.gen_range(0..10)) {
                (0, 0..=5) | (_, 0..=3) => TableKind::Mask,
                (0, _) | (_, 4..=6) => TableKind::Lpm,
                (_, 7..=8) => TableKind::Exact,
                _ => TableKind::Linear,
            };
            let nf = match kind {
                TableKind::Linear => 0,
                TableKind::Lpm => 1,
                _ => self.rng.gen_range(1..=3),
            };
            let mut fields: Vec<Field> = (0..nf)
                .map(|_| {
                    let mut f = self.field();
                    if kind == TableKind::Lpm {
                        f.length = self.rng.gen_range(4..=16.max(self.max_field.min(160)));
                    }
                    f
                })
                .collect();
            // wide fields: keep the key within its 384 bits
            let mut budget = 384u16;
            for (i, f) in fields.iter_mut().enumerate() {
                f.length = f.length.min(budget - (nf - i - 1) as u16);
                budget -= f.length;
            }
            let miss = self.actions(id, n, true);
            let spec = TableSpec {
                id,
                name: format!("t{id}"),
                kind,
                names: (0..nf).map(|i| format!("f{i}")).collect(),
                fields,
                max_entries: self.rng.gen_range(8..40),
                miss,
            };
            self.tables.push(spec.clone());
            out.push(Control::Table(TableMod::Add(spec)));
        }
        out
    }

    fn actions(&mut self, table: u8, ntables: u8, miss: bool) -> Vec<Instruction> {
        if miss && self.rng.gen_bool(0.5) {
            return Vec::new();
        }
        let mut v = Vec::new();
        for _ in 0..self.rng.gen_range(0..3) {
            let ins = match self.rng.gen_range(0..10) {
                0 | 1 => Instruction::SetQueue(self.rng.gen_range(0..8)),
                2 => {
                    let field = self.field();
                    let mut value = Key::ZERO;
                    value.put_bits(0, 16, self.rng.gen());
                    Instruction::SetField { field, value }
                }
                3 => Instruction::PushTag { tpid: 0x8100, tci: self.rng.gen() },
                4 => Instruction::PopTag,
                5 => Instruction::Drop,
                _ => Instruction::Output(self.rng.gen_range(0..4)),
            };
            v.push(ins);
        }
        if table + 1 < ntables && self.rng.gen_bool(0.7) {
            let t = self.rng.gen_range(table + 1..ntables);
            if self.tables.get(usize::from(t)).is_some_and(|s| s.kind == TableKind::Linear) {
                v.push(Instruction::GotoDirect { table: t, index: self.rng.gen_range(0..10) });
            } else {
                v.push(Instruction::GotoTable(t));
            }
        } else if self.rng.gen_bool(0.8) {
            v.push(Instruction::Output(self.rng.gen_range(0..4)));
        }
        v
    }

    fn sparse_key(&mut self, width: usize) -> Key {
        let mut k = Key::ZERO;
        for i in 0..width {
            if self.rng.gen_bool(0.5) {
                k.set_bit(i);
            }
        }
        k
    }

    fn matcher(&mut self, spec: &TableSpec, id: u32) -> (Match, u16) {
        let width = spec.width();
        let prio = self.rng.gen_range(0..6);
        let m = match spec.kind {
            TableKind::Linear => Match::Index,
            TableKind::Exact => Match::Exact(self.sparse_key(width)),
            TableKind::Lpm => Match::Prefix {
                value: self.sparse_key(width),
                len: self.rng.gen_range(0..=width as u16),
            },
            TableKind::Mask => {
                // few mask shapes so that rules overlap and share tuples
                let mut mask = Key::ZERO;
                let shape = self.rng.gen_range(0..4);
                for i in 0..width {
                    let on = match shape {
                        0 => i < width / 2,
                        1 => i % 2 == 0,
                        2 => true,
                        _ => self.rng.gen_bool(0.4),
                    };
                    if on {
                        mask.set_bit(i);
                    }
                }
                Match::Masked { value: self.sparse_key(width), mask }
            }
        };
        let _ = id;
        (m, prio)
    }

    fn flow_mod(&mut self) -> Control {
        let ti = self.rng.gen_range(0..self.tables.len());
        let spec = self.tables[ti].clone();
        let ntables = self.tables.len() as u8;
        let roll = self.rng.gen_range(0..10);
        let existing: Vec<u32> =
            self.ids.iter().filter(|(t, _)| *t == spec.id).map(|(_, i)| *i).collect();
        let (command, id) = if roll < 6 || existing.is_empty() {
            let id = if spec.kind == TableKind::Linear {
                self.rng.gen_range(0..12)
            } else {
                self.next_id += 1;
                // sometimes a low id, so that equal priorities tie-break both ways
                if self.rng.gen_bool(0.3) {
                    self.rng.gen_range(0..50)
                } else {
                    self.next_id + 50
                }
            };
            (FlowCommand::Add, id)
        } else if roll < 8 {
            (FlowCommand::Delete, existing[self.rng.gen_range(0..existing.len())])
        } else {
            (FlowCommand::Modify, existing[self.rng.gen_range(0..existing.len())])
        };
        let (matcher, priority) = self.matcher(&spec, id);
        if let Match::Masked { value, mask } = matcher {
            self.values.push((spec.id, value, mask));
        }
        if let Match::Prefix { value, .. } | Match::Exact(value) = matcher {
            self.values.push((spec.id, value, Key::prefix_mask(spec.width())));
        }
        let timeout = |rng: &mut ChaCha8Rng| {
            rng.gen_bool(0.15).then(|| Duration::from_micros(rng.gen_range(1..200)))
        };
        let fm = FlowMod {
            command,
            table: spec.id,
            id,
            priority,
            matcher,
            instructions: self.actions(spec.id, ntables, false),
            low_latency: self.rng.gen_bool(0.6),
            idle_timeout: timeout(&mut self.rng),
            hard_timeout: timeout(&mut self.rng),
        };
        Control::Flow(fm)
    }

    /// A packet whose bits come from a rule's value (under its mask) where possible.
    fn packet(&mut self) -> Vec<u8> {
        let mut p: Vec<u8> = (0..self.pkt_bytes).map(|_| self.rng.gen()).collect();
        if self.rng.gen_bool(0.1) {
            // sometimes a tagged frame, so that pop_tag has work to do
            p[12] = 0x81;
            p[13] = 0x00;
        }
        for _ in 0..self.rng.gen_range(0..4) {
            if self.values.is_empty() {
                break;
            }
            let (t, value, mask) = self.values[self.rng.gen_range(0..self.values.len())];
            let Some(spec) = self.tables.iter().find(|s| s.id == t) else { continue };
            let mut pos = 0;
            for f in &spec.fields {
                for b in 0..usize::from(f.length) {
                    if mask.bit(pos + b)
                        && f.space == latnet_dataplane::classifier::field::Space::Packet
                    {
                        let i = usize::from(f.offset) + b;
                        if let Some(x) = p.get_mut(i / 8) {
                            let m = 0x80u8 >> (i % 8);
                            if value.bit(pos + b) {
                                *x |= m;
                            } else {
                                *x &= !m;
                            }
                        }
                    }
                }
                pos += usize::from(f.length);
            }
        }
        p
    }
}

fn run_case(seed: u64, packets: usize) -> usize {
    run_case_with(Case::new(seed), seed, packets)
}

fn run_case_with(mut c: Case, seed: u64, packets: usize) -> usize {
    let cfg = FfpConfig {
        lut_capacity: [4, 16, 64, 1024][c.rng.gen_range(0..4)],
        max_extra_rules: [1, 3, 64][c.rng.gen_range(0..3)],
        fast_keys: c.rng.gen_bool(0.5),
    };
    let mut cls = [
        Classifier::new(Algo::Pof, None, seed),
        Classifier::new(Algo::Strong, None, seed ^ 1),
        Classifier::new(Algo::Pof, Some(cfg), seed ^ 2),
        Classifier::new(Algo::Strong, Some(cfg), seed ^ 3),
    ];
    let apply_all = |cls: &mut [Classifier; 4], now: Time, m: &Control, step: usize| {
        let r0 = cls[0].apply(now, m);
        for (i, c) in cls.iter_mut().enumerate().skip(1) {
            let r = c.apply(now, m);
            assert_eq!(
                r.is_ok(),
                r0.is_ok(),
                "seed {seed} step {step}: classifier {i} reply differs on {m:?}: {r:?} vs {r0:?}"
            );
            if let (Err(a), Err(b)) = (&r, &r0) {
                assert_eq!(a, b, "seed {seed} step {step}");
            }
        }
        r0.is_ok()
    };
    for m in c.gen_tables() {
        assert!(apply_all(&mut cls, c.now, &m, 0), "seed {seed}: table refused: {m:?}");
    }
    for _ in 0..c.rng.gen_range(5..30) {
        let m = c.flow_mod();
        if apply_all(&mut cls, c.now, &m, 0) {
            track(&mut c, &m);
        }
    }
    let policy = LearnPolicy { min_packets: 3, min_idle: Duration::from_micros(50) };
    let mut done = 0;
    let mut step = 0;
    while done < packets {
        step += 1;
        c.now += Duration::from_nanos(c.rng.gen_range(0..3_000));
        let roll = c.rng.gen_range(0..100);
        if roll < 12 {
            let m = c.flow_mod();
            if apply_all(&mut cls, c.now, &m, step) {
                track(&mut c, &m);
            }
        } else if roll == 12 {
            let t = c.rng.gen_range(0..c.tables.len());
            let ntables = c.tables.len() as u8;
            let miss = c.actions(t as u8, ntables, true);
            let m = Control::Table(TableMod::SetMiss { table: t as u8, miss });
            apply_all(&mut cls, c.now, &m, step);
        } else if roll == 13 {
            let n: Vec<usize> = cls.iter_mut().map(|x| x.learn(&policy)).collect();
            assert!(
                n.iter().all(|&x| x == n[0]),
                "seed {seed} step {step}: learning differs {n:?}"
            );
        } else {
            let removed: Vec<_> = cls.iter_mut().map(|x| x.expire(c.now)).collect();
            for r in &removed[1..] {
                assert_eq!(r, &removed[0], "seed {seed} step {step}: expiry differs");
            }
            for (t, id) in &removed[0] {
                c.ids.retain(|e| e != &(*t, *id));
            }
            let pkt = c.packet();
            let in_port = c.rng.gen_range(0..4u16);
            let mut outs = Vec::new();
            for x in cls.iter_mut() {
                let mut d = pkt.clone();
                let dec = x.process(c.now, &mut d, in_port, 100);
                outs.push((dec, d));
            }
            for (i, o) in outs.iter().enumerate().skip(1) {
                assert_eq!(o, &outs[0], "seed {seed} step {step}: classifier {i} decided differently for packet {pkt:02x?}");
            }
            done += 1;
        }
        if step % 97 == 0 {
            let s0 = cls[0].flow_stats();
            for (i, x) in cls.iter().enumerate().skip(1) {
                assert_eq!(
                    x.flow_stats(),
                    s0,
                    "seed {seed} step {step}: counters of classifier {i} differ"
                );
            }
        }
    }
    let s0 = cls[0].flow_stats();
    for x in &cls[1..] {
        assert_eq!(x.flow_stats(), s0, "seed {seed}: final counters differ");
    }
    done
}

fn track(c: &mut Case, m: &Control) {
    if let Control::Flow(fm) = m {
        match fm.command {
            FlowCommand::Add => c.ids.push((fm.table, fm.id)),
            FlowCommand::Delete => c.ids.retain(|e| e != &(fm.table, fm.id)),
            FlowCommand::Modify => {}
        }
    }
}

/// The fast path must actually be used, or the differential test proves little.
fn ffp_activity(seed: u64) -> (u64, u64, u64) {
    let mut c = Case::new(seed);
    let mut x = Classifier::new(
        Algo::Pof,
        Some(FfpConfig { lut_capacity: 64, max_extra_rules: 8, fast_keys: true }),
        seed,
    );
    for m in c.gen_tables() {
        x.apply(Time::ZERO, &m).unwrap();
    }
    for _ in 0..40 {
        let m = c.flow_mod();
        if x.apply(Time::ZERO, &m).is_ok() {
            track(&mut c, &m);
        }
    }
    for i in 0..2000 {
        if i % 50 == 0 {
            let m = c.flow_mod();
            let _ = x.apply(Time::ZERO, &m);
        }
        let mut p = c.packet();
        // repeat packets so that records get reused
        for _ in 0..3 {
            let mut q = p.clone();
            x.process(Time::ZERO, &mut q, 0, 64);
        }
        p.clear();
    }
    let Classifier::Composite(comp) = &x else { unreachable!() };
    let s = comp.lut_stats();
    // a stats request answers with the same LUT counters: all of them, or one table's own
    let Ok(Reply::Tables { luts, .. }) = x.apply(Time::ZERO, &Control::Stats(StatsRequest::All))
    else {
        panic!("no table stats")
    };
    assert_eq!(luts, s);
    for l in &s {
        let one = x.apply(Time::ZERO, &Control::Stats(StatsRequest::Table(l.table)));
        let Ok(Reply::Tables { tables, luts }) = one else { panic!("no stats of {}", l.table) };
        assert_eq!((tables.len(), tables[0].table), (1, l.table));
        assert_eq!(luts, vec![l.clone()]);
    }
    (
        s.iter().map(|l| l.hits).sum(),
        s.iter().map(|l| l.verifications).sum(),
        s.iter().map(|l| l.invalidations).sum(),
    )
}

#[test]
fn differential_100k() {
    let mut total = 0;
    let mut seed = 0;
    while total < 100_000 {
        total += run_case(seed, 1_000);
        seed += 1;
    }
    assert!(total >= 100_000);
}

/// The same with keys of several words: wide fields straddling word boundaries, LPM over
/// up to 160 bits.
#[test]
fn differential_wide_keys() {
    let mut total = 0;
    let mut seed = 500_000;
    while total < 30_000 {
        total += run_case_with(Case::wide(seed), seed, 1_000);
        seed += 1;
    }
}

#[test]
fn the_fast_path_is_exercised() {
    let (mut hits, mut ver, mut inv) = (0, 0, 0);
    for seed in 0..20 {
        let (h, v, i) = ffp_activity(seed);
        hits += h;
        ver += v;
        inv += i;
    }
    assert!(hits > 1000, "LUT hits {hits}");
    assert!(ver > 10, "verifications {ver}");
    assert!(inv > 0, "invalidations {inv}");
}

#[test]
#[ignore = "long: 1,000,000 packets; run by `make fuzz`"]
fn differential_1m() {
    let mut total = 0;
    let mut seed = 1_000_000;
    while total < 1_000_000 {
        total += run_case(seed, 2_000);
        seed += 1;
    }
}

fn scenario_spec(name: &str) -> latnet_dataplane::classifier::workload::WorkloadSpec {
    let path = format!("{}/../../experiments/ffp/{name}.toml", env!("CARGO_MANIFEST_DIR"));
    let text = std::fs::read_to_string(&path).unwrap();
    toml::from_str(&text).unwrap()
}

/// The seed's three scenarios: the generators produce both kinds of flows, the composite
/// pipeline agrees with the plain one on a mix, and the JSON text form of the rule set builds
/// the same pipeline.
#[test]
fn seed_scenarios_run_and_agree() {
    use latnet_dataplane::classifier::{text, workload, Pipeline};
    for name in ["acl", "seadp", "wsm"] {
        let mut spec = scenario_spec(name);
        spec.flows = 64;
        let w = workload::build(&spec);
        assert_eq!(w.ll_flows.len(), 64, "{name}: low-latency flows");
        assert_eq!(w.normal_flows.len(), 64, "{name}: normal flows");
        let mut plain = w.classifier(Algo::Pof, None);
        let mut comp = w.classifier(Algo::Pof, Some(FfpConfig::default()));
        let mut strong = w.classifier(Algo::Strong, Some(FfpConfig::default()));
        // the JSON text form, re-parsed
        let mut from_text = Pipeline::new(Algo::Strong, 9);
        for (i, line) in w.to_json_lines().lines().enumerate() {
            let specs: Vec<TableSpec> = from_text.tables().map(|t| t.spec().clone()).collect();
            let m = text::parse_json(line, &specs)
                .unwrap_or_else(|e| panic!("{name} line {i}: {e}: {line}"));
            from_text.apply(Time::ZERO, &m).unwrap_or_else(|e| panic!("{name} line {i}: {e}"));
        }
        let seq = workload::mix(&w, 5_000, 500, 1);
        let mut ll = 0;
        for (k, f) in w.frames(&seq, 128).into_iter().enumerate() {
            let (mut a, mut b, mut c, mut d) = (f.clone(), f.clone(), f.clone(), f.clone());
            let x = plain.process(Time::ZERO, &mut a, 1, 128);
            assert_eq!(x, comp.process(Time::ZERO, &mut b, 1, 128), "{name} packet {k}");
            assert_eq!(x, strong.process(Time::ZERO, &mut c, 1, 128), "{name} packet {k}");
            assert_eq!(x, from_text.process(Time::ZERO, &mut d, 1, 128), "{name} packet {k}");
            assert_eq!(x.low_latency, seq[k].0, "{name} packet {k}: flow kind");
            ll += usize::from(x.low_latency);
        }
        assert!(ll > 2000 && ll < 3000, "{name}: {ll} low-latency packets of 5000");
        let Classifier::Composite(cp) = &comp else { unreachable!() };
        let hits: u64 = cp.lut_stats().iter().map(|l| l.hits).sum();
        assert!(hits > 2000, "{name}: the fast path served {hits} lookups");
    }
}

/// Malformed flow-mods are refused with a message that says what is wrong.
#[test]
fn malformed_flow_mods_are_refused_clearly() {
    use latnet_dataplane::classifier::{text, Pipeline};
    let mut p = Pipeline::new(Algo::Strong, 1);
    let add = r#"{"table_add": {"id": 0, "name": "eth", "kind": "mask", "fields": ["eth.dst", "eth.type"], "size": 4}}"#;
    let m = text::parse_json(add, &[]).unwrap();
    p.apply(Time::ZERO, &m).unwrap();
    let specs: Vec<TableSpec> = p.tables().map(|t| t.spec().clone()).collect();
    let cases = [
        ("{", "JSON"),
        (r#"{"flow_mod": {"table": "nope", "id": 1}}"#, "unknown table \"nope\""),
        (
            r#"{"flow_mod": {"table": "eth", "id": 1, "match": {"ip.src": "1"}}}"#,
            "has no field \"ip.src\"",
        ),
        (
            r#"{"flow_mod": {"table": "eth", "id": 1, "match": {"eth.type": "0x1ffff"}}}"#,
            "does not fit in 16 bits",
        ),
        (r#"{"flow_mod": {"table": "eth", "id": 1, "match": {"eth.dst": "10.0.0.1"}}}"#, "IPv4"),
        (
            r#"{"flow_mod": {"table": "eth", "id": 1, "actions": ["fly 3"]}}"#,
            "unknown action \"fly 3\"",
        ),
        (r#"{"flow_mod": {"table": "eth", "id": 1, "actions": ["output"]}}"#, "missing a port"),
        (
            r#"{"flow_mod": {"table": "eth", "id": 1, "actions": ["set_queue 9"]}}"#,
            "queue must be 0..=7",
        ),
        (r#"{"flow_mod": {"table": "eth", "id": 1, "color": "red"}}"#, "unknown field `color`"),
        (
            r#"{"table_add": {"id": 1, "kind": "lpm", "fields": ["eth.nope"], "size": 4}}"#,
            "unknown field \"eth.nope\"",
        ),
    ];
    for (text_in, want) in cases {
        let e = text::parse_json(text_in, &specs).unwrap_err().to_string();
        assert!(e.contains(want), "{text_in}: error {e:?} does not say {want:?}");
    }
    // typed errors from the pipeline: goto backwards, duplicate id, missing entry
    let goto0 = text::parse_json(
        r#"{"flow_mod": {"table": "eth", "id": 1, "actions": ["goto 0"]}}"#,
        &specs,
    )
    .unwrap();
    assert_eq!(
        p.apply(Time::ZERO, &goto0).unwrap_err().to_string(),
        "table 0: goto 0 must point to a later table"
    );
    let ok = text::parse_json(
        r#"{"flow_mod": {"table": "eth", "id": 1, "actions": ["output 1"]}}"#,
        &specs,
    )
    .unwrap();
    p.apply(Time::ZERO, &ok).unwrap();
    assert!(p.apply(Time::ZERO, &ok).unwrap_err().to_string().contains("already exists"));
    let del =
        text::parse_json(r#"{"flow_mod": {"command": "delete", "table": "eth", "id": 7}}"#, &specs)
            .unwrap();
    assert_eq!(p.apply(Time::ZERO, &del).unwrap_err().to_string(), "table 0: no entry 7");
}

/// Hostile traffic cannot grow a LUT beyond its capacity.
#[test]
fn luts_stay_bounded_under_random_keys() {
    use latnet_dataplane::classifier::workload;
    let mut spec = scenario_spec("acl");
    spec.flows = 8;
    let w = workload::build(&spec);
    let cfg = FfpConfig { lut_capacity: 256, max_extra_rules: 64, fast_keys: false };
    let mut c = w.classifier(Algo::Strong, Some(cfg));
    let mut rng = ChaCha8Rng::seed_from_u64(5);
    for _ in 0..20_000 {
        let mut f = workload::frame(&w.ll_flows[rng.gen_range(0..w.ll_flows.len())], 64);
        // randomise the source address and ports: every packet a new LUT key
        for b in &mut f[30..38] {
            *b = rng.gen();
        }
        f[54] = rng.gen();
        c.process(Time::ZERO, &mut f, 1, 64);
    }
    let Classifier::Composite(cp) = &c else { unreachable!() };
    for l in cp.lut_stats() {
        assert!(l.records <= l.capacity && l.capacity == 256, "{l:?}");
    }
    assert!(cp.lut_stats().iter().any(|l| l.evictions > 0));
}

/// Low-latency learning marks permanent, frequently hit entries (Section 4.1).
#[test]
fn learning_marks_long_lived_busy_entries() {
    use latnet_dataplane::classifier::text;
    let mut p = Classifier::new(Algo::Pof, Some(FfpConfig::default()), 3);
    let msgs = [
        r#"{"table_add": {"id": 0, "name": "t", "kind": "mask", "fields": ["eth.type"], "size": 8}}"#,
        r#"{"flow_mod": {"table": "t", "id": 1, "priority": 1, "match": {"eth.type": "0x86dd"}, "actions": ["output 1"]}}"#,
        r#"{"flow_mod": {"table": "t", "id": 2, "priority": 1, "match": {"eth.type": "0x0800"}, "actions": ["output 2"], "idle_timeout": "1us"}}"#,
    ];
    let mut specs: Vec<TableSpec> = Vec::new();
    for m in msgs {
        let c = text::parse_json(m, &specs).unwrap();
        if let Control::Table(TableMod::Add(s)) = &c {
            specs.push(s.clone());
        }
        p.apply(Time::ZERO, &c).unwrap();
    }
    let mut v6 = vec![0u8; 20];
    v6[12] = 0x86;
    v6[13] = 0xdd;
    let mut v4 = vec![0u8; 20];
    v4[12] = 0x08;
    for _ in 0..5 {
        assert!(!p.process(Time::ZERO, &mut v6.clone(), 0, 64).low_latency);
        p.process(Time::ZERO, &mut v4.clone(), 0, 64);
    }
    let policy = LearnPolicy { min_packets: 5, min_idle: Duration::from_secs(1) };
    assert_eq!(p.learn(&policy), 1, "only the permanent entry is long-lived");
    assert!(p.process(Time::ZERO, &mut v6.clone(), 0, 64).low_latency);
    assert!(!p.process(Time::ZERO, &mut v4.clone(), 0, 64).low_latency);
}

mod never_panics {
    use latnet_dataplane::classifier::text;
    use proptest::prelude::*;

    proptest! {
        #[test]
        fn parse_json_never_panics(s in ".{0,200}") {
            let _ = text::parse_json(&s, &[]);
        }

        #[test]
        fn flow_mod_fields_never_panic(
            table in "[a-z0-9]{0,4}", id in any::<u32>(), prio in any::<u16>(),
            v in "[0-9a-fx:./&*]{0,40}", act in "[a-z_ 0-9]{0,20}",
        ) {
            let specs = vec![];
            let j = serde_json::json!({"flow_mod": {"table": table, "id": id, "priority": prio,
                "match": {"eth.type": v}, "actions": [act]}});
            let _ = text::parse_json(&j.to_string(), &specs);
            let t = serde_json::json!({"table_add": {"id": 0, "kind": "mask",
                "fields": [{"offset": prio, "length": id % 1000}], "size": id, "miss": [act]}});
            let _ = text::parse_json(&t.to_string(), &specs);
        }
    }
}

/// Apply JSON control messages in order; the reply (or error text) of each.
fn apply_json(c: &mut Classifier, specs: &mut Vec<TableSpec>, msgs: &[&str]) -> Vec<String> {
    use latnet_dataplane::classifier::text;
    msgs.iter()
        .map(|m| match text::parse_json(m, specs) {
            Ok(ctl) => match c.apply(Time::ZERO, &ctl) {
                Ok(_) => {
                    if let Control::Table(TableMod::Add(s)) = &ctl {
                        specs.push(s.clone());
                    }
                    "ok".to_owned()
                }
                Err(e) => e.to_string(),
            },
            Err(e) => e.to_string(),
        })
        .collect()
}

/// A goto that cannot work with the table it names is refused when that table exists: it
/// used to be installed, and every packet then missed the target table.
#[test]
fn gotos_must_suit_the_target_table() {
    for algo in [Algo::Pof, Algo::Strong] {
        let mut c = Classifier::new(algo, Some(FfpConfig::default()), 1);
        let mut specs = Vec::new();
        let r = apply_json(
            &mut c,
            &mut specs,
            &[
                r#"{"table_add": {"id": 0, "name": "eth", "kind": "mask", "fields": ["eth.type"], "size": 8}}"#,
                r#"{"table_add": {"id": 1, "name": "fib", "kind": "exact", "fields": ["eth.dst"], "size": 8}}"#,
                r#"{"table_add": {"id": 2, "name": "ports", "kind": "linear", "size": 4}}"#,
                r#"{"flow_mod": {"table": "eth", "id": 1, "actions": ["goto_direct fib 0"]}}"#,
                r#"{"flow_mod": {"table": "eth", "id": 2, "actions": ["goto ports"]}}"#,
                r#"{"flow_mod": {"table": "eth", "id": 3, "actions": ["goto_direct ports 4"]}}"#,
                r#"{"table_miss": {"table": "eth", "miss": ["goto ports"]}}"#,
                r#"{"flow_mod": {"table": "eth", "id": 4, "actions": ["goto_direct ports 3"]}}"#,
                r#"{"flow_mod": {"table": "eth", "id": 5, "actions": ["goto fib"]}}"#,
                r#"{"flow_mod": {"command": "modify", "table": "eth", "id": 5, "match": {}, "priority": 0, "actions": ["goto_direct fib 1"]}}"#,
            ],
        );
        let want = [
            "ok",
            "ok",
            "ok",
            "goto_direct needs a linear one",
            "is linear and has no key",
            "table 2 has 4 entries",
            "is linear and has no key",
            "ok",
            "ok",
            "goto_direct needs a linear one",
        ];
        for (i, (got, want)) in r.iter().zip(want).enumerate() {
            assert!(got.contains(want), "{algo:?} message {i}: {got:?} does not say {want:?}");
        }
    }
}

/// A modify replaces an entry's match and priority as well as its actions: one that leaves
/// them out (meaning only to change the actions) would have made a mask table's entry match
/// every packet at priority 0, so it is refused naming what to give; given, it works.
#[test]
fn a_modify_without_its_match_or_priority_is_refused() {
    let mut c = Classifier::new(Algo::Pof, None, 1);
    let mut specs = Vec::new();
    let r = apply_json(
        &mut c,
        &mut specs,
        &[
            r#"{"table_add": {"id": 0, "name": "acl", "kind": "mask", "fields": ["ipv4.dport"], "size": 8}}"#,
            r#"{"table_add": {"id": 1, "name": "fib", "kind": "lpm", "fields": ["ipv4.dst"], "size": 8}}"#,
            r#"{"flow_mod": {"table": "acl", "id": 1, "priority": 5, "match": {"ipv4.dport": "80"}, "actions": ["output 1"]}}"#,
            r#"{"flow_mod": {"table": "fib", "id": 1, "match": {"ipv4.dst": "10.0.0.0/8"}, "actions": ["output 1"]}}"#,
            r#"{"flow_mod": {"command": "modify", "table": "acl", "id": 1, "actions": ["output 2"]}}"#,
            r#"{"flow_mod": {"command": "modify", "table": "acl", "id": 1, "match": {"ipv4.dport": "80"}, "actions": ["output 2"]}}"#,
            r#"{"flow_mod": {"command": "modify", "table": "fib", "id": 1, "actions": ["output 2"]}}"#,
            r#"{"flow_mod": {"command": "modify", "table": "acl", "id": 1, "priority": 5, "match": {"ipv4.dport": "80"}, "actions": ["output 2"]}}"#,
            r#"{"flow_mod": {"command": "modify", "table": "fib", "id": 1, "match": {"ipv4.dst": "10.0.0.0/8"}, "actions": ["output 2"]}}"#,
        ],
    );
    let want = [
        "ok",
        "ok",
        "ok",
        "ok",
        "match: a modify replaces the entry's match: give it",
        "priority: a modify replaces the entry's priority: give it",
        "match: a modify replaces the entry's match",
        "ok",
        "ok",
    ];
    for (i, (got, want)) in r.iter().zip(want).enumerate() {
        assert!(got.contains(want), "message {i}: {got:?} does not say {want:?}");
    }
    // the entry kept its priority (the refused modifies changed nothing)
    let Classifier::Plain(p) = &c else { unreachable!() };
    let acl: Vec<_> = p.flow_stats().into_iter().filter(|f| f.table == 0).collect();
    assert_eq!(acl.iter().map(|f| (f.id, f.priority)).collect::<Vec<_>>(), [(1, 5)]);
}

/// An LPM table over several fields matches a prefix of their concatenation; a rule naming
/// one of them used to place the value right-aligned in the whole key (10.0.0.0/8 on the
/// second field of two became a /8 of zeros on the first).
#[test]
fn an_lpm_over_several_fields_takes_its_prefix_as_key() {
    let mut c = Classifier::new(Algo::Strong, None, 1);
    let mut specs = Vec::new();
    let r = apply_json(
        &mut c,
        &mut specs,
        &[
            r#"{"table_add": {"id": 0, "name": "pair", "kind": "lpm", "fields": ["ipv4.src", "ipv4.dst"], "size": 8}}"#,
            r#"{"flow_mod": {"table": "pair", "id": 1, "match": {"ipv4.src": "0x0a000000/8"}, "actions": ["output 1"]}}"#,
            r#"{"flow_mod": {"table": "pair", "id": 2, "match": {"key": "0x0a00000000000000/8"}, "actions": ["output 2"]}}"#,
            r#"{"table_add": {"id": 1, "name": "one", "kind": "lpm", "fields": ["ipv4.dst"], "size": 8}}"#,
            r#"{"flow_mod": {"table": "one", "id": 1, "match": {"ipv4.dst": "10.0.0.0/8"}, "actions": ["output 1"]}}"#,
        ],
    );
    assert!(r[1].contains("write it as \"key\""), "{}", r[1]);
    assert_eq!([&r[0], &r[2], &r[3], &r[4]], ["ok"; 4]);
    // the "key" rule matches source 10/8
    let mut p = vec![0u8; 40];
    p[26] = 10;
    assert_eq!(
        c.process(Time::ZERO, &mut p, 0, 64).verdict,
        latnet_dataplane::classifier::Verdict::Output(2)
    );
}

/// Errors in table ids and raw fields name what is wrong (they said "data did not match any
/// variant of untagged enum"); duplicate table and field names are refused.
#[test]
fn table_ids_fields_and_names_are_refused_clearly() {
    use latnet_dataplane::classifier::text;
    let eth = r#"{"table_add": {"id": 0, "name": "eth", "kind": "mask", "fields": ["eth.type"], "size": 8}}"#;
    let Control::Table(TableMod::Add(spec)) = text::parse_json(eth, &[]).unwrap() else {
        unreachable!()
    };
    let specs = vec![spec];
    let cases = [
        (r#"{"flow_mod": {"table": 300, "id": 1}}"#, "table id must be 0..=255, got 300"),
        (r#"{"flow_mod": {"table": -1, "id": 1}}"#, "table id must be 0..=255, got -1"),
        (r#"{"flow_mod": {"table": true, "id": 1}}"#, "a table id 0..=255 or a table name"),
        (
            r#"{"table_add": {"id": 1, "kind": "mask", "fields": [{"offset": 70000, "length": 3}], "size": 8}}"#,
            "field offset 70000 is beyond 65535 bits",
        ),
        (
            r#"{"table_add": {"id": 1, "kind": "mask", "fields": [{"offset": 0, "len": 3}], "size": 8}}"#,
            "unknown field `len`",
        ),
        (
            r#"{"table_add": {"id": 1, "kind": "mask", "fields": [7], "size": 8}}"#,
            "a field name or {name, offset, length, meta}",
        ),
        (
            r#"{"table_add": {"id": 1, "name": "eth", "kind": "mask", "fields": ["eth.src"], "size": 8}}"#,
            "table 0 is already called \"eth\"",
        ),
        (
            r#"{"table_add": {"id": 1, "name": "0", "kind": "mask", "fields": ["eth.src"], "size": 8}}"#,
            "name: \"0\" would read as a table id",
        ),
        (
            r#"{"table_add": {"id": 1, "kind": "mask", "fields": ["eth.src", {"name": "eth.src", "offset": 0, "length": 8}], "size": 8}}"#,
            "fields[1]: the name \"eth.src\" is taken",
        ),
        (r#"{"flow_mod": {"table": "eth", "id": 1, "match": {"eth.type": "0x"}}}"#, "hex digits"),
    ];
    for (text_in, want) in cases {
        let e = text::parse_json(text_in, &specs).unwrap_err().to_string();
        assert!(e.contains(want), "{text_in}: error {e:?} does not say {want:?}");
    }
    // TOML takes the same forms
    let bad = "id = 1\nkind = \"mask\"\nfields = [{ offset = 99999, length = 1 }]\nsize = 2";
    let e = toml::from_str::<text::TableText>(bad).unwrap_err().to_string();
    assert!(e.contains("field offset 99999 is beyond 65535 bits"), "{e}");
    let good =
        "id = 1\nkind = \"mask\"\nfields = [\"eth.src\", { offset = 3, length = 1 }]\nsize = 2";
    let t: text::TableText = toml::from_str(good).unwrap();
    assert_eq!(
        t.fields,
        [
            text::FieldText::Named("eth.src".into()),
            text::FieldText::Raw { name: None, offset: 3, length: 1, meta: false }
        ]
    );
}

/// A LUT holds the number of records configured (rounded up to whole 4-way sets): 5,000 used
/// to become 8,192.
#[test]
fn a_lut_holds_the_capacity_configured() {
    for (asked, got) in [(5000, 5000), (16_384, 16_384), (1, 4), (4097, 4100)] {
        let mut c = Classifier::new(
            Algo::Pof,
            Some(FfpConfig { lut_capacity: asked, ..Default::default() }),
            1,
        );
        let m = latnet_dataplane::classifier::text::parse_json(
            r#"{"table_add": {"id": 0, "kind": "mask", "fields": ["eth.type"], "size": 8}}"#,
            &[],
        )
        .unwrap();
        c.apply(Time::ZERO, &m).unwrap();
        let Classifier::Composite(cp) = &c else { unreachable!() };
        assert_eq!(cp.lut_stats()[0].capacity, got, "asked {asked}");
    }
}
