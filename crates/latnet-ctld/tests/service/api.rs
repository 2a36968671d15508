//! Admission over the API: flows admitted, listed, removed and kept across a restart; bad
//! requests named by field; matches; best-effort routes.

use super::*;

#[test]
fn flows_are_admitted_listed_removed_and_survive_a_restart() {
    let db = tmp("restart");
    let mut svc = Service::open(&db, cfg(4)).unwrap();
    let (st, hosts) = svc.handle("GET", "/hosts", b"");
    assert_eq!(st, 200);
    let hosts: Vec<String> = serde_json::from_value(hosts).unwrap();
    assert_eq!(hosts.len(), 16);
    let mut ids = Vec::new();
    for i in 0..12 {
        let (st, f) = post(&mut svc, req(&hosts[i], &hosts[15 - i], 50_000_000, 5000));
        assert_eq!(st, 201, "{f}");
        assert_eq!(f["src"], hosts[i].as_str());
        assert!(f["guarantee_ns"].as_u64().unwrap() <= 5_000_000);
        assert_eq!(f["path"].as_array().unwrap().first().unwrap(), hosts[i].as_str());
        assert!(f["rerouted"].is_array());
        ids.push(f["id"].as_u64().unwrap());
    }
    let (st, _) = svc.handle("DELETE", &format!("/flows/{}", ids[3]), b"");
    assert_eq!(st, 204);
    assert_eq!(svc.handle("DELETE", &format!("/flows/{}", ids[3]), b"").0, 404);
    assert_eq!(svc.handle("GET", &format!("/flows/{}", ids[3]), b"").0, 404);
    let (st, one) = svc.handle("GET", &format!("/flows/{}", ids[4]), b"");
    assert_eq!(st, 200);
    assert_eq!(one["id"], ids[4]);
    let (_, before) = svc.handle("GET", "/flows", b"");
    assert_eq!(before.as_array().unwrap().len(), 11);
    // what a client reads from the file is what the service answers
    assert_eq!(table_flows(&db), *before.as_array().unwrap());
    drop(svc);

    let mut again = Service::open(&db, cfg(4)).unwrap();
    let (_, after) = again.handle("GET", "/flows", b"");
    assert_eq!(after, before);
    // and it goes on from there: the next id follows the last one ever given
    let (st, f) = post(&mut again, req(&hosts[0], &hosts[1], 1_000_000, 9000));
    assert_eq!(st, 201);
    assert_eq!(f["id"].as_u64().unwrap(), ids.last().unwrap() + 1);
    let (_, health) = again.handle("GET", "/health", b"");
    assert_eq!((&health["ok"], &health["flows"]), (&json!(true), &json!(12)), "{health}");
}

#[test]
fn a_restart_keeps_rerouted_flows_where_they_were_moved() {
    let db = tmp("reroute");
    let mut svc = Service::open(&db, cfg(4)).unwrap();
    let answers = crowd(&mut svc, 120);
    let moves = |st: u16| -> usize {
        let n = answers.iter().filter(|(s, _)| *s == st);
        n.map(|(_, r)| r["rerouted"].as_array().unwrap().len()).sum()
    };
    // both kinds of move: to admit a flow, and while looking for room for one refused
    let moved = moves(201) + moves(409);
    assert!(moves(201) > 0 && moves(409) > 0, "{} {}", moves(201), moves(409));
    let stats = svc.handle("GET", "/stats", b"").1;
    assert!(moved >= 3, "no reroutes: {stats}");
    let (_, before) = svc.handle("GET", "/flows", b"");
    let table = table_flows(&db);
    for (a, b) in table.iter().zip(before.as_array().unwrap()) {
        assert_eq!(a, b, "flow {} in the table differs", b["id"]);
    }
    assert_eq!(table.len(), before.as_array().unwrap().len());
    drop(svc);
    let mut again = Service::open(&db, cfg(4)).unwrap();
    assert_eq!(again.handle("GET", "/flows", b"").1, before);
    assert_eq!(again.handle("GET", "/stats", b"").1, stats);
}

#[test]
fn bad_requests_name_the_field_and_change_nothing() {
    let db = tmp("bad");
    let mut svc = Service::open(&db, cfg(4)).unwrap();
    let (_, hosts) = svc.handle("GET", "/hosts", b"");
    let (a, b) = (hosts[0].as_str().unwrap().to_owned(), hosts[9].as_str().unwrap().to_owned());
    let cases: Vec<(Value, u16, &str, &str)> = vec![
        (
            json!({"src": a, "dst": b, "rate_bps": 1000, "burst_bytes": 100}),
            400,
            "deadline_ns",
            "missing",
        ),
        (
            json!({"src": a, "dst": b, "rate_bps": -5, "burst_bytes": 100, "deadline_ns": 1000000}),
            400,
            "rate_bps",
            ">= 1",
        ),
        (
            json!({"src": a, "dst": b, "rate_bps": 1.5, "burst_bytes": 100, "deadline_ns": 1000000}),
            400,
            "rate_bps",
            "whole number",
        ),
        (
            json!({"src": 3, "dst": b, "rate_bps": 1000, "burst_bytes": 100, "deadline_ns": 1000000}),
            400,
            "src",
            "a host name",
        ),
        (
            json!({"src": a, "dst": b, "rate_bps": 1000, "burst_bytes": 100, "deadline_ns": 1000000, "prio": 1}),
            400,
            "prio",
            "unknown field",
        ),
        (
            json!({"src": "h9_9_9", "dst": b, "rate_bps": 1000, "burst_bytes": 100, "deadline_ns": 1000000}),
            422,
            "src",
            "unknown host",
        ),
        (
            json!({"src": a, "dst": "h9_9_9", "rate_bps": 1000, "burst_bytes": 100, "deadline_ns": 1000000}),
            422,
            "dst",
            "unknown host",
        ),
        (
            json!({"src": a, "dst": a, "rate_bps": 1000, "burst_bytes": 100, "deadline_ns": 1000000}),
            422,
            "dst",
            "same host",
        ),
        (
            json!({"src": a, "dst": b, "rate_bps": 1000, "burst_bytes": 100, "deadline_ns": 10}),
            422,
            "deadline_ns",
            "below the minimum",
        ),
    ];
    for (body, status, field, why) in cases {
        let (st, r) = post(&mut svc, body.clone());
        assert_eq!(st, status, "{body} -> {r}");
        assert_eq!(r["field"], field, "{body} -> {r}");
        let text = r.to_string();
        assert!(text.contains(why), "{body} -> {r}");
    }
    let (st, r) = svc.handle("POST", "/flows", b"{not json");
    assert_eq!(st, 400);
    assert!(r["error"].as_str().unwrap().contains("not JSON"), "{r}");
    // refused: more than a 1 Gbit/s link carries
    let (st, r) = post(&mut svc, req(&a, &b, 2_000_000_000, 1000));
    assert_eq!((st, r["code"].as_str()), (409, Some("no-path")), "{r}");
    assert!(!r["reason"].as_str().unwrap().is_empty());
    assert_eq!(svc.handle("GET", "/nowhere", b"").0, 404);
    assert_eq!(svc.handle("PUT", "/flows", b"").0, 405);
    assert_eq!(svc.handle("PUT", "/flows", b"").1["allow"], "GET, HEAD, POST");
    assert_eq!(svc.handle("HEAD", "/flows", b""), svc.handle("GET", "/flows", b""));
    assert_eq!(svc.handle("GET", "/metrics", b""), svc.handle("GET", "/stats", b""));
    assert_eq!(svc.handle("GET", "/flows/abc", b"").0, 404);
    assert_eq!(svc.controller().len(), 0);
    // the four 422 answers are counted (400s never reached the controller)
    let stats = svc.handle("GET", "/stats", b"").1;
    assert_eq!(
        (&stats["invalid"], &stats["rejected"], &stats["admitted"]),
        (&json!(4), &json!(1), &json!(0))
    );
    drop(svc);
    // only the refused request reached the controller, so only it is in the log
    let c = rusqlite::Connection::open(&db).unwrap();
    let n: i64 = c.query_row("SELECT COUNT(*) FROM log", [], |r| r.get(0)).unwrap();
    assert_eq!(n, 1);
    let again = Service::open(&db, cfg(4)).unwrap();
    assert_eq!(again.controller().stats().rejected, 1);
}

fn hosts_of(svc: &mut Service) -> Vec<String> {
    let (_, hosts) = svc.handle("GET", "/hosts", b"");
    serde_json::from_value(hosts).unwrap()
}

#[test]
fn a_flows_match_is_kept_shown_and_survives_a_restart() {
    let db = tmp("match");
    let mut svc = Service::open(&db, cfg(4)).unwrap();
    let h = hosts_of(&mut svc);
    let mut r = req(&h[0], &h[9], 50_000_000, 5000);
    r["match"] = json!({"proto": "udp", "dst_port": 5001});
    let (st, f) = post(&mut svc, r.clone());
    assert_eq!(st, 201, "{f}");
    let first = f["id"].as_u64().unwrap();
    assert_eq!(f["match"], json!({"proto": "udp", "dst_port": 5001}));
    // the same match from the same source to the same destination could not be told apart
    let (st, e) = post(&mut svc, r.clone());
    assert_eq!(
        (st, e["code"].as_str(), e["field"].as_str()),
        (422, Some("match-in-use"), Some("match")),
        "{e}"
    );
    assert!(e["reason"].as_str().unwrap().contains(&format!("flow {first}")), "{e}");
    // a source port makes it another match; another destination another flow; none: no match
    let mut with_port = r.clone();
    with_port["match"]["src_port"] = json!(4000);
    let (st, f2) = post(&mut svc, with_port);
    assert_eq!((st, f2["match"]["src_port"].as_u64()), (201, Some(4000)), "{f2}");
    let mut elsewhere = r.clone();
    elsewhere["dst"] = json!(h[10]);
    assert_eq!(post(&mut svc, elsewhere).0, 201);
    let (st, plain) = post(&mut svc, req(&h[1], &h[8], 10_000_000, 5000));
    assert_eq!(st, 201);
    assert!(plain.get("match").is_none(), "{plain}");
    let (_, shown) = svc.handle("GET", &format!("/flows/{first}"), b"");
    assert_eq!(shown["match"], json!({"proto": "udp", "dst_port": 5001}));
    let (_, stats) = svc.handle("GET", "/stats", b"");
    assert_eq!(stats["invalid"], 1);
    let before: Value = svc.handle("GET", "/flows", b"").1;
    assert_eq!(table_flows(&db), before.as_array().unwrap().clone());
    // a restart replays the log: the same matches
    drop(svc);
    let mut svc = Service::open(&db, cfg(4)).unwrap();
    assert_eq!(svc.handle("GET", "/flows", b"").1, before);
    assert_eq!(table_flows(&db), before.as_array().unwrap().clone());
    // removing the flow frees its match
    assert_eq!(svc.handle("DELETE", &format!("/flows/{first}"), b"").0, 204);
    let (st, again) = post(&mut svc, r);
    assert_eq!((st, again["match"]["dst_port"].as_u64()), (201, Some(5001)), "{again}");
}

#[test]
fn a_bad_match_is_a_400_naming_the_field_and_nothing_is_logged() {
    let db = tmp("badmatch");
    let mut svc = Service::open(&db, cfg(4)).unwrap();
    let h = hosts_of(&mut svc);
    let cases = [
        (json!(5), "match"),
        (json!({"dst_port": 1}), "match.proto"),
        (json!({"proto": "sctp", "dst_port": 1}), "match.proto"),
        (json!({"proto": "udp"}), "match.dst_port"),
        (json!({"proto": "udp", "dst_port": 0}), "match.dst_port"),
        (json!({"proto": "udp", "dst_port": 70000}), "match.dst_port"),
        (json!({"proto": "tcp", "dst_port": 80, "src_port": "x"}), "match.src_port"),
        (json!({"proto": "tcp", "dst_port": 80, "dscp": 1}), "match.dscp"),
    ];
    for (m, field) in cases {
        let mut r = req(&h[0], &h[9], 50_000_000, 5000);
        r["match"] = m.clone();
        let (st, e) = post(&mut svc, r);
        assert_eq!((st, e["field"].as_str()), (400, Some(field)), "{m}: {e}");
        assert!(e["error"].as_str().unwrap().starts_with(field), "{e}");
    }
    let (_, log) = svc.handle("GET", "/log", b"");
    assert_eq!(log["entries"], json!([]));
}

#[test]
fn best_effort_routes_reach_every_other_host_below_the_admitted_classes() {
    let db = tmp("routes");
    let mut four = cfg(4);
    four.queues = 4;
    let mut svc = Service::open(&db, four).unwrap();
    let h = hosts_of(&mut svc);
    let (st, r) = svc.handle("GET", &format!("/routes/{}", h[0]), b"");
    assert_eq!(st, 200, "{r}");
    assert_eq!(r["queue"], 4);
    let routes = r["routes"].as_array().unwrap();
    assert_eq!(routes.len(), h.len() - 1);
    for rt in routes {
        let path: Vec<&str> =
            rt["path"].as_array().unwrap().iter().map(|n| n.as_str().unwrap()).collect();
        let tags: Vec<u64> =
            rt["tags"].as_array().unwrap().iter().map(|t| t.as_u64().unwrap()).collect();
        assert_eq!((path[0], *path.last().unwrap()), (h[0].as_str(), rt["dst"].as_str().unwrap()));
        // a tag per switch, each in the class below the four admitted ones (base 10)
        assert_eq!(tags.len(), path.len() - 2, "{rt}");
        assert!(tags.iter().all(|t| t % 10 == 4), "{rt}");
        // fewest hops in a k = 4 fat-tree: 1, 3 or 5 switches
        assert!([1, 3, 5].contains(&tags.len()), "{rt}");
    }
    assert_eq!(svc.handle("GET", "/routes/nobody", b"").1["field"], "src");
    let (_, hs) = svc.handle("GET", "/health", b"");
    assert_eq!(hs["flows"], 0, "routes admit nothing");
    let (st, e) = svc.handle("GET", "/routes/e0_0", b"");
    assert_eq!(st, 404, "a switch has no routes: {e}");
    assert_eq!(svc.handle("POST", &format!("/routes/{}", h[0]), b"").0, 405);
    // eight admitted classes leave none for best effort
    let mut svc8 = Service::open(&tmp("routes8"), cfg(4)).unwrap();
    let (st, r) = svc8.handle("GET", &format!("/routes/{}", h[0]), b"");
    assert_eq!((st, &r["queue"], &r["routes"]), (200, &Value::Null, &json!([])));
}

#[test]
fn numbers_the_store_cannot_hold_are_a_400_naming_the_field_and_change_nothing() {
    let db = tmp("huge");
    let mut svc = Service::open(&db, cfg(4)).unwrap();
    let ok = json!({"src": "h0_0_0", "dst": "h3_1_1", "rate_bps": 2_000_000u64,
                    "burst_bytes": 3000, "deadline_ns": 10_000_000u64});
    for field in ["deadline_ns", "rate_bps", "burst_bytes"] {
        for n in [1u64 << 63, u64::MAX] {
            let mut body = ok.clone();
            body[field] = json!(n);
            let (st, r) = post(&mut svc, body);
            assert_eq!((st, r["field"].as_str()), (400, Some(field)), "{r}");
            assert!(r["error"].as_str().unwrap().contains(field), "{r}");
        }
    }
    let (_, health) = svc.handle("GET", "/health", b"");
    assert_eq!(health["last"], 0, "{health}");
    assert_eq!(post(&mut svc, ok).0, 201);
    // the largest the store holds is taken (and refused or admitted by the controller)
    let mut body = json!({"src": "h0_0_0", "dst": "h3_1_1", "rate_bps": 2_000_000u64,
                          "burst_bytes": 3000, "deadline_ns": i64::MAX as u64});
    let (st, r) = post(&mut svc, body.clone());
    assert_eq!(st, 201, "{r}");
    body["deadline_ns"] = json!(1u64 << 63);
    assert_eq!(post(&mut svc, body).0, 400);
    drop(svc);
    assert_eq!(Service::open(&db, cfg(4)).unwrap().controller().len(), 2);
}

/// A request between hosts that every path joins through more switches than a packet has tags
/// for (11 in a line, `max_tags` 10) is invalid, 422 naming `dst` and the fewest switches.
#[test]
fn a_path_beyond_the_tags_a_packet_carries_is_invalid_naming_dst() {
    let mut topo = String::from("[defaults.link]\nrate = \"1Gbps\"\n");
    let mut names = vec!["h1".to_owned()];
    names.extend((0..11).map(|i| format!("s{i}")));
    names.push("h2".into());
    for n in &names {
        let kind = if n.starts_with('h') { "host" } else { "switch" };
        topo += &format!("[[nodes]]\nname = \"{n}\"\nkind = \"{kind}\"\n");
    }
    for w in names.windows(2) {
        topo += &format!("[[links]]\na = \"{}\"\nb = \"{}\"\n", w[0], w[1]);
    }
    let file = ServiceConfig { k: None, topology: Some(topo), ..cfg(4) };
    let mut svc = Service::open(&tmp("max-tags"), file).unwrap();
    let (st, r) = post(&mut svc, req("h1", "h2", 1_000_000, 1_000_000));
    assert_eq!(
        (st, r["field"].as_str(), r["code"].as_str()),
        (422, Some("dst"), Some("beyond-max-tags")),
        "{r}"
    );
    assert!(r["reason"].as_str().unwrap().contains("the fewest is 11"), "{r}");
}

/// `max_tags` and the tag base are settings of the service: tags are `base × port + queue`
/// with its base, a path beyond its tags is invalid, `GET /config` shows both (a service
/// without them shows neither), and its store refuses to reopen with others.
#[test]
fn the_tag_base_and_max_tags_are_the_services_and_its_stores() {
    let db = tmp("tags");
    let tagged = ServiceConfig { max_tags: Some(3), tag_base: Some(100), ..cfg(4) };
    let mut svc = Service::open(&db, tagged.clone()).unwrap();
    // within a pod: edge, aggregation, edge
    let (st, f) = post(&mut svc, req("h0_0_0", "h0_1_0", 1_000_000, 5000));
    assert_eq!(st, 201, "{f}");
    let tags: Vec<u64> = serde_json::from_value(f["tags"].clone()).unwrap();
    let queues: Vec<u64> = serde_json::from_value(f["queues"].clone()).unwrap();
    assert_eq!(tags.len(), 3);
    assert!(tags.iter().any(|&t| t >= 100), "base 10 would do: {tags:?}");
    for (t, q) in tags.iter().zip(&queues[1..]) {
        // a switch of a k = 4 fat-tree has 4 ports
        assert!(t / 100 < 4 && t % 100 == *q, "{tags:?} {queues:?}");
    }
    // across pods: five switches, beyond three tags
    let (st, e) = post(&mut svc, req("h0_0_0", "h1_0_0", 1_000_000, 5000));
    assert_eq!(
        (st, e["code"].as_str(), e["field"].as_str()),
        (422, Some("beyond-max-tags"), Some("dst"))
    );
    let (_, config) = svc.handle("GET", "/config", b"");
    assert_eq!((config["max_tags"].as_u64(), config["tag_base"].as_u64()), (Some(3), Some(100)));
    drop(svc);
    for (other, field) in [
        (ServiceConfig { max_tags: Some(4), ..tagged.clone() }, "max_tags"),
        (ServiceConfig { tag_base: None, ..tagged.clone() }, "tag_base"),
    ] {
        let e = Service::open(&db, other).unwrap_err();
        assert!(matches!(&e, ServiceError::Mismatch { field: f, .. } if f == field), "{e}");
    }
    let mut svc = Service::open(&db, tagged).unwrap();
    let (_, flows) = svc.handle("GET", "/flows", b"");
    assert_eq!(flows.as_array().map(Vec::len), Some(1));
    let plain_db = tmp("tags-default");
    let mut plain = Service::open(&plain_db, cfg(4)).unwrap();
    let (_, config) = plain.handle("GET", "/config", b"");
    assert!(config.get("max_tags").is_none() && config.get("tag_base").is_none(), "{config}");
    drop(plain);
    // the defaults given explicitly are the same settings
    let explicit = ServiceConfig { max_tags: Some(10), tag_base: Some(10), ..cfg(4) };
    assert!(Service::open(&plain_db, explicit).is_ok());
}
