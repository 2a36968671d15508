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

mod control;

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
