//! Control messages refused with a named error, tables' names, ids and kinds, LUT capacity and
//! learning, and never a panic whatever the messages.

use super::*;

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
