use super::*;

const GOOD: &str = r#"
name = "two hosts"
[sim]
duration = "1s"
seed = 7

[defaults.link]
rate = "100Mbps"
delay = "1ms"

[[nodes]]
name = "h1"
kind = "host"
[[nodes]]
name = "s1"
kind = "switch"
[[nodes]]
name = "h2"
kind = "host"
address = "192.168.1.2"

[[links]]
a = "h1"
b = "s1"
[[links]]
a = "s1"
b = "h2"
rate = "10Mbps"
queue_a = { kind = "priority", classes = 4, limit_packets = 50 }

[[flows]]
src = "h1"
dst = "h2"
size = 1000
priority = 1
traffic = { kind = "cbr", rate = "1Mbps" }
"#;

fn err(src: &str) -> ScenarioError {
    Scenario::from_str_named("t.toml", src).expect_err("must be rejected")
}

/// Replace the first occurrence of `from` in the good scenario.
fn edit(from: &str, to: &str) -> String {
    assert!(GOOD.contains(from), "test bug: {from:?} not in GOOD");
    GOOD.replacen(from, to, 1)
}

#[test]
fn good_scenario_validates() {
    let sc = Scenario::from_str_named("t.toml", GOOD).unwrap();
    assert_eq!(sc.name, "two hosts");
    assert_eq!(sc.sim.seed, 7);
    assert_eq!(sc.nodes.len(), 3);
    assert_eq!(sc.nodes[0].address, Ipv4Addr::new(10, 0, 0, 1));
    assert_eq!(sc.nodes[2].address, Ipv4Addr::new(192, 168, 1, 2));
    assert_eq!(sc.links[0].rate, Rate::from_mbps(100));
    assert_eq!(sc.links[1].rate, Rate::from_mbps(10));
    assert_eq!(sc.links[1].delay, Duration::from_millis(1));
    assert!(matches!(sc.links[1].queue_ab, QueueSpec::Priority { classes: 4, .. }));
    assert_eq!(sc.links[1].queue_ba, QueueSpec::default());
    let f = &sc.flows[0];
    assert_eq!((f.name.as_str(), f.src, f.dst, f.priority, f.size), ("f0", 0, 2, 1, 1000));
    assert_eq!(f.stop, Time::from_nanos(1_000_000_000));
    assert_eq!(f.jitter, Duration::ZERO);
    let sc =
        Scenario::from_str_named("t.toml", &edit("size = 1000", "size = 1000\njitter = \"2us\""))
            .unwrap();
    assert_eq!(sc.flows[0].jitter, Duration::from_micros(2));
}

#[test]
fn unknown_field_names_line_and_field() {
    let e = err(&edit("seed = 7", "sed = 7"));
    assert_eq!(e.line_col.map(|l| l.0), Some(5));
    assert!(e.message.contains("unknown field `sed`"), "{e}");
    assert!(e.message.contains("seed"), "lists the expected fields: {e}");
    assert!(e.to_string().starts_with("t.toml:5:"), "{e}");
}

#[test]
fn deserializer_errors_name_the_key_they_point_at() {
    let e = err(&edit("seed = 7", "sed = 7"));
    assert_eq!(e.key.as_deref(), Some("sim.sed"), "{e}");
    // a misspelt key of a queue kind: the queue, and the keys its kind takes
    let e = err(&edit("classes = 4, limit_packets", "classes = 4, limit_packts"));
    assert_eq!(e.key.as_deref(), Some("links[1].queue_a"), "{e}");
    assert_eq!(e.line_col.map(|l| l.0), Some(29));
    assert!(
        e.message.ends_with(
            "unknown field `limit_packts`, expected one of `classes`, `limit_packets`, \
             `limit_bytes`"
        ),
        "{e}"
    );
    // an unknown kind, a value of the wrong type, an array of tables inside a table
    let e = err(&edit("kind = \"priority\"", "kind = \"prio\""));
    assert_eq!(e.key.as_deref(), Some("links[1].queue_a.kind"), "{e}");
    assert!(e.message.contains("unknown variant `prio`, expected one of `fifo`"), "{e}");
    let e = err(&edit("priority = 1", "priority = \"high\""));
    assert_eq!(e.key.as_deref(), Some("flows[0].priority"), "{e}");
    let e = err(&format!("{GOOD}[[flows.retag]]\nat = \"1ms\"\ntag = [1]\nbogus = 1\n"));
    assert_eq!(e.key.as_deref().map(|k| k.starts_with("flows[0]")), Some(true), "{e}");
}

#[test]
fn a_flow_no_link_path_joins_is_a_warning() {
    assert!(Scenario::from_str_named("t.toml", GOOD).is_ok_and(|s| s.warnings.is_empty()));
    // h2 cut off (its link moved to h1 - s1), or reached only through another host
    for (to, via) in [("a = \"h1\"\nb = \"s1\"", "cut"), ("a = \"h1\"\nb = \"h2\"", "host")] {
        let sc = Scenario::from_str_named("t.toml", &edit("a = \"s1\"\nb = \"h2\"", to));
        let sc = sc.unwrap_or_else(|e| panic!("{via}: {e}"));
        let w: Vec<String> = sc.warnings.iter().map(ToString::to_string).collect();
        if via == "host" {
            // h1 - h2 joined directly: a path
            assert!(w.is_empty(), "{w:?}");
        } else {
            assert_eq!(w.len(), 1, "{w:?}");
            assert!(
                w[0].starts_with("t.toml:33:7: `flows[0].dst`: no path from \"h1\" to \"h2\""),
                "{w:?}"
            );
        }
    }
    // a switch forwards, a host does not: h1 - h3 - h2 is no path
    let through_host =
        edit("a = \"s1\"\nb = \"h2\"", "a = \"s1\"\nb = \"h3\"\n[[links]]\na = \"h3\"\nb = \"h2\"");
    let through_host = through_host.replace(
        "[[links]]\na = \"h1\"",
        "[[nodes]]\nname = \"h3\"\nkind = \"host\"\n[[links]]\na = \"h1\"",
    );
    let sc = Scenario::from_str_named("t.toml", &through_host).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(sc.warnings.len(), 1, "{:?}", sc.warnings);
}

#[test]
fn a_missing_key_is_named_in_its_table() {
    // the top level's, a table's, a table in an array's, an inline table's
    let e = err("[sim]\nduration = \"1s\"\n");
    assert_eq!((e.key.as_deref(), e.message.as_str()), (Some("nodes"), "missing field `nodes`"));
    let e = err(&edit("duration = \"1s\"\n", ""));
    assert_eq!(e.key.as_deref(), Some("sim.duration"), "{e}");
    let e = err(&edit("src = \"h1\"\n", ""));
    assert_eq!(e.key.as_deref(), Some("flows[0].src"), "{e}");
    let e = err(&edit("kind = \"cbr\", ", ""));
    assert_eq!(e.key.as_deref(), Some("flows[0].traffic.kind"), "{e}");
}

#[test]
fn a_flow_starting_at_or_after_the_end_is_blamed_on_its_start() {
    let e = err(&edit("priority = 1", "priority = 1\nstart = \"1s\"\nstop = \"2s\""));
    assert_eq!(e.key.as_deref(), Some("flows[0].start"), "{e}");
    assert!(e.message.contains("expected a start before sim.duration (1s), got 1s"), "{e}");
    let e = err(&edit("priority = 1", "priority = 1\nstart = \"5ms\"\nstop = \"5ms\""));
    assert_eq!(e.key.as_deref(), Some("flows[0].stop"), "{e}");
}

#[test]
fn key_paths_of_offsets() {
    let src = "a = 1\n[t]\n\"b c\" = { d = [1, { e = 2 }] }\n[[u]]\nf = 3\n[[u]]\ng = 4\n";
    let at = |needle: &str| error::key_path_at(src, src.find(needle).unwrap());
    assert_eq!(at("a ").as_deref(), Some("a"));
    assert_eq!(at("\"b c\"").as_deref(), Some("t.\"b c\""));
    assert_eq!(at("e = ").as_deref(), Some("t.\"b c\".d[1].e"));
    assert_eq!(at("2 }").as_deref(), Some("t.\"b c\".d[1].e"));
    assert_eq!(at("g").as_deref(), Some("u[1].g"));
    assert_eq!(error::key_path_at("a = [", 0), None);
}

#[test]
fn bad_value_names_what_was_expected() {
    let e = err(&edit("rate = \"10Mbps\"", "rate = \"10 Mbs\""));
    assert!(e.message.contains("unknown unit \"Mbs\""), "{e}");
    assert_eq!(e.line_col.map(|l| l.0), Some(28));
    let e = err(&edit("duration = \"1s\"", "duration = 1.5"));
    assert!(e.message.contains("duration"), "{e}");
}

#[test]
fn unknown_node_names_key_and_line() {
    let e = err(&edit("dst = \"h2\"", "dst = \"h9\""));
    assert_eq!(e.key.as_deref(), Some("flows[0].dst"));
    assert!(e.message.contains("unknown node \"h9\""), "{e}");
    assert!(e.message.contains("h1, s1, h2"), "{e}");
    assert_eq!(e.line_col.map(|l| l.0), Some(33));
}

#[test]
fn semantic_errors() {
    let cases = [
        (edit("size = 1000", "size = 20"), "flows[0].size", "from 42"),
        (edit("src = \"h1\"", "src = \"s1\""), "flows[0].src", "is a switch"),
        (edit("dst = \"h2\"", "dst = \"h1\""), "flows[0].dst", "same host"),
        (edit("priority = 1", "priority = 9"), "flows[0].priority", "0 (highest) to 7"),
        (edit("name = \"h2\"", "name = \"h1\""), "nodes[2].name", "duplicate node name"),
        (edit("name = \"h2\"", "name = \"sub/h2\""), "nodes[2].name", "without '/'"),
        (edit("priority = 1", "priority = 1\nname = \"..\""), "flows[0].name", "not . or .."),
        (edit("address = \"192.168.1.2\"", "address = \"192.168.1\""), "nodes[2].address", "IPv4"),
        (
            edit("address = \"192.168.1.2\"", "address = \"10.0.0.1\""),
            "nodes[2].address",
            "already used",
        ),
        (edit("b = \"s1\"", "b = \"h1\""), "links[0].b", "two different nodes"),
        (edit("classes = 4", "classes = 12"), "links[1].queue_a", "between 1 and 8"),
        (edit("rate = \"1Mbps\"", "rate = 0"), "flows[0].traffic", "above zero"),
        (edit("duration = \"1s\"", "duration = 0"), "sim.duration", "above zero"),
        (edit("rate = \"100Mbps\"", "loss = 1.5"), "links[0].rate", "missing rate"),
        (edit("delay = \"1ms\"", "delay = \"1ms\"\nloss = 1.0"), "links[0].loss", "[0, 1)"),
        (edit("seed = 7", "seed = 7\n[output]\nqueues = \"0ms\""), "output.queues", "above zero"),
        (
            edit(
                "traffic = { kind = \"cbr\", rate = \"1Mbps\" }",
                "traffic = { kind = \"tcp-bulk\", cc = \"cubic\", bytes = 1000 }\njitter = \"1us\"",
            ),
            "flows[0].jitter",
            "not TCP",
        ),
        (
            edit(
                "traffic = { kind = \"cbr\", rate = \"1Mbps\" }",
                "traffic = { kind = \"tcp-bulk\", cc = \"cubic\", bytes = 1000 }\n\
                 slo = { lower = \"1ms\" }",
            ),
            "flows[0].slo",
            "TCP segments carry no LBF block",
        ),
    ];
    for (src, key, msg) in cases {
        let e = err(&src);
        assert_eq!(e.key.as_deref(), Some(key), "{e}");
        assert!(e.message.contains(msg), "expected {msg:?} in: {e}");
        assert!(e.to_string().starts_with("t.toml:"), "{e}");
    }
}

#[test]
fn routes_must_point_to_neighbours() {
    let src = format!("{GOOD}\n[[routes]]\nnode = \"h1\"\ndst = \"h2\"\nnext = \"h2\"\n");
    let e = err(&src);
    assert_eq!(e.key.as_deref(), Some("routes[0].next"));
    assert!(e.message.contains("not a neighbour"), "{e}");
}

#[test]
fn syntax_error_has_a_line() {
    let e = err("[sim\nduration = 1");
    assert_eq!(e.line_col.map(|l| l.0), Some(1));
    let e = Scenario::from_file(Path::new("/nonexistent/x.toml")).unwrap_err();
    assert!(e.message.contains("cannot read"), "{e}");
}

/// `[defaults.tcp]` gives TCP flows the connection settings they leave out, where the setting
/// applies to the flow's congestion control; a flow's own keys win; per-flow keys and values
/// a flow refuses are named under `defaults.tcp`.
#[test]
fn tcp_defaults_fill_what_each_flow_leaves_out() {
    let flows = |defaults: &str| {
        let two = "traffic = { kind = \"tcp-bulk\", cc = \"cubic\", hystart = false }\n\
                   [[flows]]\nname = \"b\"\nsrc = \"h1\"\ndst = \"h2\"\nsize = 1000\n\
                   traffic = { kind = \"tcp-bulk\", cc = \"bbr\" }\n\
                   [[flows]]\nname = \"c\"\nsrc = \"h1\"\ndst = \"h2\"\nsize = 1000\n\
                   traffic = { kind = \"tcp-rr\", request = \"1KB\", response = \"10KB\", \
                   interval = \"10ms\" }";
        let src = edit("traffic = { kind = \"cbr\", rate = \"1Mbps\" }", two).replacen(
            "[defaults.link]",
            &format!("{defaults}\n[defaults.link]"),
            1,
        );
        Scenario::from_str_named("t.toml", &src)
    };
    let sc = flows("[defaults.tcp]\nhystart = true\nrack_tlp = true\nmin_rto = \"1s\"").unwrap();
    let tcp: Vec<_> = sc.flows.iter().map(|f| f.traffic.tcp().unwrap().clone()).collect();
    // the flow's own `hystart = false` wins; BBR takes no `hystart`; the tcp-rr flow's CUBIC does
    assert_eq!(tcp.iter().map(|t| t.hystart).collect::<Vec<_>>(), [Some(false), None, Some(true)]);
    assert!(tcp.iter().all(|t| t.rack_tlp == Some(true)), "{tcp:?}");
    assert!(tcp.iter().all(|t| t.min_rto == Some(Duration::from_secs(1))), "{tcp:?}");
    // a key a flow would refuse for its other settings is left to the flows that take it:
    // RACK-TLP without SACK, pacing gains without pacing
    let sc = flows("[defaults.tcp]\nsack = false\nrack_tlp = true\npacing_ca_gain = 110").unwrap();
    let t: Vec<_> = sc.flows.iter().map(|f| f.traffic.tcp().unwrap()).collect();
    assert!(t.iter().all(|t| t.sack == Some(false) && t.rack_tlp.is_none()), "{t:?}");
    assert!(t.iter().all(|t| t.pacing_ca_gain.is_none()), "unpaced, or BBR: {t:?}");
    let sc = flows("[defaults.tcp]\npacing = true\npacing_ca_gain = 110").unwrap();
    let gains: Vec<_> = sc.flows.iter().map(|f| f.traffic.tcp().unwrap().pacing_ca_gain).collect();
    assert_eq!(gains, [Some(110), None, Some(110)], "BBR paces at its own rate");
    // without the table the keys stay out
    let bare = flows("").unwrap();
    let t = bare.flows[2].traffic.tcp().unwrap();
    assert_eq!((t.hystart, t.rack_tlp, t.min_rto), (None, None, None));
    let cases = [
        ("cc = \"bbr\"", "defaults.tcp.cc", "set per flow"),
        ("bytes = 1000", "defaults.tcp.bytes", "set per flow"),
        ("hystrat = true", "defaults.tcp", "unknown field `hystrat`"),
        ("min_rto = \"soon\"", "defaults.tcp", "soon"),
        // applied, a flow refuses it: named with the flow
        ("rcv_buf = \"500B\"", "defaults.tcp", "flows[0] (f0): expected `rcv_buf` of at least"),
    ];
    for (keys, key, msg) in cases {
        let e = flows(&format!("[defaults.tcp]\n{keys}")).expect_err(keys);
        assert_eq!(e.key.as_deref(), Some(key), "{e}");
        assert!(e.message.contains(msg), "expected {msg:?} in: {e}");
        assert!(e.line_col.is_some(), "{e}");
    }
}
