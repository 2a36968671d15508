//! The Chameleon service: API answers, the SQLite store surviving a restart to the same
//! state, refusing another configuration or a changed log, and a real HTTP round trip.

#![allow(clippy::unwrap_used)] // a test fails by panicking

mod common;
use common::answers;

use latnet_ctld::{
    listen, serve, ServeOptions, Service, ServiceConfig, ServiceError, Swap, Tokens, MIN_TOKEN,
};
use serde_json::{json, Value};
use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

fn cfg(k: usize) -> ServiceConfig {
    ServiceConfig {
        system: "chameleon".into(),
        k: Some(k),
        hosts_per_edge: None,
        queues: 8,
        topology: None,
    }
}

fn tmp(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("latnet-ctld-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d.join("controller.db")
}

fn post(svc: &mut Service, body: Value) -> (u16, Value) {
    svc.handle("POST", "/flows", body.to_string().as_bytes())
}

fn req(src: &str, dst: &str, rate: u64, deadline_us: u64) -> Value {
    json!({"src": src, "dst": dst, "rate_bps": rate, "burst_bytes": 1500, "deadline_ns": deadline_us * 1000})
}

fn table_flows(db: &Path) -> Vec<Value> {
    let c = rusqlite::Connection::open(db).unwrap();
    let mut st = c.prepare("SELECT json FROM flows ORDER BY id").unwrap();
    let rows = st.query_map([], |r| r.get::<_, String>(0)).unwrap();
    rows.map(|r| serde_json::from_str(&r.unwrap()).unwrap()).collect()
}

/// `n` requests with tight deadlines and fat rates across the pods of a k = 4 fat-tree: the
/// controller admits, refuses and moves flows (the answers, in order).
fn crowd(svc: &mut Service, n: usize) -> Vec<(u16, Value)> {
    let (_, hosts) = svc.handle("GET", "/hosts", b"");
    let h = |i: usize| hosts[i % 16].as_str().unwrap().to_owned();
    (0..n)
        .map(|i| {
            let rate = 60_000_000 + (i as u64 % 7) * 10_000_000;
            post(svc, req(&h(i * 5), &h(i * 7 + 3), rate, 1200 + (i as u64 % 5) * 300))
        })
        .collect()
}

fn without_rerouted(mut v: Value) -> Value {
    v.as_object_mut().unwrap().remove("rerouted");
    v
}

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

#[test]
fn a_store_refuses_another_configuration_and_a_changed_log() {
    let db = tmp("refuse");
    let mut svc = Service::open(&db, cfg(4)).unwrap();
    let (_, hosts) = svc.handle("GET", "/hosts", b"");
    let h = |i: usize| hosts[i].as_str().unwrap().to_owned();
    for i in 0..4 {
        assert_eq!(post(&mut svc, req(&h(i), &h(8 + i), 10_000_000, 4000)).0, 201);
    }
    drop(svc);
    let e = Service::open(&db, cfg(6)).unwrap_err();
    assert!(matches!(&e, ServiceError::Mismatch { field, .. } if field == "k"), "{e}");
    let msg = e.to_string();
    assert!(
        msg.contains("controller.db") && msg.contains("k = 4") && msg.contains("with 6"),
        "{msg}"
    );
    let mut q = cfg(4);
    q.queues = 4;
    let e = Service::open(&db, q).unwrap_err();
    assert!(e.to_string().contains("queues = 8"), "{e}");
    // a store made on one topology file refuses another, though its size is the same
    let line = |rate: &str| {
        format!(
            "[defaults.link]\nrate = \"{rate}\"\n[[nodes]]\nname = \"h1\"\nkind = \"host\"\n\
             [[nodes]]\nname = \"s\"\nkind = \"switch\"\n[[nodes]]\nname = \"h2\"\n\
             kind = \"host\"\n[[links]]\na = \"h1\"\nb = \"s\"\n[[links]]\na = \"s\"\nb = \"h2\"\n"
        )
    };
    let file = |rate: &str| ServiceConfig { k: None, topology: Some(line(rate)), ..cfg(4) };
    let tdb = tmp("refuse-topology");
    drop(Service::open(&tdb, file("1Gbps")).unwrap());
    let e = Service::open(&tdb, file("2Gbps")).unwrap_err();
    assert!(matches!(&e, ServiceError::Mismatch { field, .. } if field == "topology"), "{e}");
    assert!(Service::open(&tdb, file("1Gbps")).is_ok());
    // someone edits the log: the replay notices at that entry
    let c = rusqlite::Connection::open(&db).unwrap();
    c.execute(
        "UPDATE log SET outcome = '{\"outcome\":\"admitted\",\"id\":7,\"rerouted\":[]}' WHERE seq = 3",
        [],
    )
    .unwrap();
    drop(c);
    let e = Service::open(&db, cfg(4)).unwrap_err();
    assert!(matches!(e, ServiceError::Diverged { seq: 3, .. }), "{e}");
    assert!(e.to_string().contains("log entry 3 (request)"), "{e}");
}

fn http(addr: &str, raw: &str) -> (u16, String) {
    let mut s = TcpStream::connect(addr).unwrap();
    s.write_all(raw.as_bytes()).unwrap();
    let mut out = String::new();
    s.read_to_string(&mut out).unwrap();
    let status = out.split_whitespace().nth(1).unwrap().parse().unwrap();
    let body = out.split_once("\r\n\r\n").map(|(_, b)| b.to_owned()).unwrap_or_default();
    (status, body)
}

/// `svc` served on a port of 127.0.0.1: its address, the flag that stops it, its thread.
fn start(mut svc: Service, opts: ServeOptions) -> (String, Arc<AtomicBool>, JoinHandle<()>) {
    let server = listen("127.0.0.1:0").unwrap();
    let addr = server.local_addr().unwrap().to_string();
    let stop = Arc::new(AtomicBool::new(false));
    let s2 = stop.clone();
    let t = std::thread::spawn(move || {
        serve(&server, &mut svc, opts, || s2.load(Ordering::Relaxed));
    });
    (addr, stop, t)
}

#[test]
fn the_service_answers_over_http() {
    let db = tmp("http");
    let svc = Service::open(&db, cfg(4)).unwrap();
    let (addr, stop, t) = start(svc, ServeOptions::default());
    let body = req("h0_0_0", "h3_1_1", 1_000_000, 10_000).to_string();
    let raw = format!(
        "POST /flows HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    );
    let (st, text) = http(&addr, &raw);
    assert_eq!(st, 201, "{text}");
    let f: Value = serde_json::from_str(&text).unwrap();
    assert_eq!(f["dst"], "h3_1_1");
    let (st, text) = http(&addr, "GET /flows HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
    assert_eq!(st, 200);
    let list: Value = serde_json::from_str(&text).unwrap();
    assert_eq!(without_rerouted(f), list[0]);
    let big = "x".repeat(latnet_ctld::MAX_BODY + 10);
    let raw = format!(
        "POST /flows HTTP/1.1\r\nHost: x\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{big}",
        big.len()
    );
    assert_eq!(http(&addr, &raw).0, 413);
    stop.store(true, Ordering::Relaxed);
    t.join().unwrap();
}

#[test]
fn a_failed_write_is_a_500_and_the_controller_keeps_what_the_store_holds() {
    let db = tmp("fail");
    let mut svc = Service::open(&db, cfg(4)).unwrap();
    for (a, b) in [("h0_0_0", "h3_1_1"), ("h1_0_0", "h2_1_1")] {
        assert_eq!(post(&mut svc, req(a, b, 5_000_000, 5000)).0, 201);
    }
    let (_, before) = svc.handle("GET", "/flows", b"");
    // the next write fails (as on a full disk)
    let c = rusqlite::Connection::open(&db).unwrap();
    c.execute_batch(
        "CREATE TRIGGER full BEFORE INSERT ON log BEGIN SELECT RAISE(FAIL, 'disk full'); END;",
    )
    .unwrap();
    let (st, r) = post(&mut svc, req("h0_1_0", "h3_0_1", 5_000_000, 5000));
    assert_eq!(st, 500, "{r}");
    assert!(r["error"].as_str().unwrap().contains("disk full"), "{r}");
    assert_eq!(svc.handle("GET", "/flows", b"").1, before);
    assert_eq!(svc.handle("DELETE", "/flows/0", b"").0, 500);
    assert_eq!(svc.handle("GET", "/flows", b"").1, before);
    c.execute_batch("DROP TRIGGER full;").unwrap();
    let (st, f) = post(&mut svc, req("h0_1_0", "h3_0_1", 5_000_000, 5000));
    assert_eq!((st, f["id"].as_u64()), (201, Some(2)), "{f}");
}

#[test]
fn the_log_tells_a_polling_agent_what_moved() {
    let db = tmp("log");
    let mut svc = Service::open(&db, cfg(4)).unwrap();
    let answers = crowd(&mut svc, 120);
    assert_eq!(svc.handle("DELETE", "/flows/1", b"").0, 204);
    let (st, page) = svc.handle("GET", "/log", b"");
    assert_eq!(st, 200);
    let entries = page["entries"].as_array().unwrap();
    // every request reached the controller (none was invalid), then the removal
    assert_eq!(entries.len(), 121);
    assert_eq!(page["last"], 121);
    for ((st, r), e) in answers.iter().zip(entries) {
        assert_eq!(e["op"], "request");
        match st {
            201 => {
                assert_eq!((&e["outcome"], &e["id"]), (&json!("admitted"), &r["id"]));
                assert_eq!(e["rerouted"], r["rerouted"]);
            }
            409 => {
                assert_eq!((&e["outcome"], &e["code"]), (&json!("refused"), &r["code"]));
                assert_eq!(e["moved"], r["rerouted"]);
            }
            _ => panic!("{st} {r}"),
        }
    }
    assert!(entries.iter().any(|e| !e["rerouted"].as_array().is_none_or(Vec::is_empty)));
    assert_eq!(entries[120]["op"], "remove");
    assert_eq!(entries[120]["id"], 1);
    // an agent that has seen entry 118 gets the last three; one that has seen all gets none
    let (_, tail) = svc.handle("GET", "/log?after=118", b"");
    let seqs: Vec<u64> =
        tail["entries"].as_array().unwrap().iter().map(|e| e["seq"].as_u64().unwrap()).collect();
    assert_eq!(seqs, [119, 120, 121]);
    let (_, none) = svc.handle("GET", "/log?after=121", b"");
    assert_eq!((&none["entries"], &none["last"]), (&json!([]), &json!(121)), "{none}");
    let (_, two) = svc.handle("GET", "/log?after=5&limit=2", b"");
    assert_eq!(two["entries"].as_array().unwrap().len(), 2);
    assert_eq!(two["entries"][0]["seq"], 6);
    for (q, field) in [("after=-1", "after"), ("limit=x", "limit"), ("since=3", "since")] {
        let (st, r) = svc.handle("GET", &format!("/log?{q}"), b"");
        assert_eq!((st, r["field"].as_str()), (400, Some(field)), "{q}: {r}");
    }
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
fn a_store_keeps_its_id_across_restarts_and_another_store_has_another() {
    let db = tmp("storeid");
    let svc = Service::open(&db, cfg(4)).unwrap();
    let mut svc = svc;
    let (_, h) = svc.handle("GET", "/health", b"");
    let id = h["store"].as_str().unwrap().to_owned();
    assert_eq!(id.len(), 16, "{h}");
    let (_, log) = svc.handle("GET", "/log", b"");
    assert_eq!(log["store"], id.as_str(), "every log page says which store it is from");
    drop(svc);
    let mut again = Service::open(&db, cfg(4)).unwrap();
    assert_eq!(again.handle("GET", "/health", b"").1["store"], id.as_str());
    let mut other = Service::open(&tmp("storeid2"), cfg(4)).unwrap();
    assert_ne!(other.handle("GET", "/health", b"").1["store"], id.as_str());
}

#[test]
fn a_slow_or_silent_client_holds_up_nobody_else() {
    let db = tmp("slow");
    let mut svc = Service::open(&db, cfg(4)).unwrap();
    for i in 0..8 {
        let (st, _) = post(&mut svc, req(&format!("h0_0_{}", i % 2), "h3_1_1", 1_000_000, 10_000));
        assert_eq!(st, 201);
    }
    let timeout = Duration::from_secs(3);
    let (addr, stop, t) = start(svc, ServeOptions { io_timeout: timeout, tokens: None });
    // a: a request whose body never arrives whole
    let mut a = TcpStream::connect(&addr).unwrap();
    a.write_all(b"POST /flows HTTP/1.1\r\nHost: x\r\nContent-Length: 5000\r\n\r\n{\"src\":")
        .unwrap();
    let a_sent = Instant::now();
    // b: asks for every flow again and again and reads none of the answers
    let mut b = TcpStream::connect(&addr).unwrap();
    b.set_write_timeout(Some(Duration::from_secs(2))).unwrap();
    let ask = "GET /flows HTTP/1.1\r\nHost: x\r\n\r\n".repeat(100);
    for _ in 0..100 {
        if b.write_all(ask.as_bytes()).is_err() {
            break;
        }
    }
    // meanwhile the others are answered as usual, well before a's and b's time is up
    let quick = |raw: &str| {
        let mut s = TcpStream::connect(&addr).unwrap();
        s.set_read_timeout(Some(timeout / 2)).unwrap();
        s.write_all(raw.as_bytes()).unwrap();
        let mut out = String::new();
        s.read_to_string(&mut out).map(|_| answers(&out)).unwrap_or_default()
    };
    let health = quick("GET /health HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
    assert_eq!(health.first().map(|a| a.0), Some(200), "{health:?}");
    // and two requests sent together on one connection are answered in order
    let body = req("h1_0_0", "h2_0_1", 1_000_000, 10_000).to_string();
    let both = quick(&format!(
        "POST /flows HTTP/1.1\r\nHost: x\r\nContent-Length: {}\r\n\r\n{body}\
         GET /flows HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n",
        body.len()
    ));
    assert_eq!(both.len(), 2, "{both:?}");
    assert_eq!(both[0].0, 201, "{both:?}");
    let list: Value = serde_json::from_str(&both[1].1).unwrap();
    assert_eq!(list.as_array().map(Vec::len), Some(9), "the GET was answered before the POST");
    // a hears why once its time is up
    a.set_read_timeout(Some(timeout * 3)).unwrap();
    let mut out = String::new();
    let _ = a.read_to_string(&mut out);
    let got = answers(&out);
    assert_eq!(got.first().map(|a| a.0), Some(408), "{out:?}");
    assert!(got[0].1.contains("did not arrive whole"), "{out:?}");
    assert!(a_sent.elapsed() >= timeout, "a was answered after {:?}", a_sent.elapsed());
    stop.store(true, Ordering::Relaxed);
    t.join().unwrap();
}

#[test]
fn a_token_file_names_the_line_and_what_it_expected() {
    let ok = Tokens::parse(
        "t.txt",
        "# role token\nwrite 0123456789abcdef0123\n\nread  fedcba9876543210fedc\n",
    );
    assert!(ok.is_ok(), "{ok:?}");
    for (text, want) in [
        (
            "admin 0123456789abcdef0123\n",
            "t.txt:1: expected the role read, agent or write, got \"admin\"",
        ),
        ("# x\nwrite\n", "t.txt:2: expected ROLE TOKEN, the token is missing"),
        ("write 0123456789abcdef0123 extra\n", "t.txt:1: expected ROLE TOKEN and nothing after"),
        ("read short\n", "t.txt:1: a token must have at least 16 characters"),
        ("read 0123456789abcdef0123\"\n", "t.txt:1: a token must have at least 16 characters"),
        (
            "read 0123456789abcdef0123\nwrite 0123456789abcdef0123\n",
            "t.txt:2: this token is listed twice",
        ),
        ("# nothing\n\n", "t.txt: no tokens"),
    ] {
        let e = Tokens::parse("t.txt", text).unwrap_err();
        assert!(e.starts_with(want), "{text:?}: {e}");
    }
    let dbg = format!("{:?}", ok.unwrap());
    assert!(!dbg.contains("0123456789abcdef0123"), "Debug shows a token: {dbg}");
}

#[test]
fn with_tokens_a_request_needs_one_and_a_read_token_only_reads() {
    let (w, r, a) = ("0123456789abcdef0123", "fedcba9876543210fedc", "agent-0123456789abcdef");
    let tokens = Tokens::parse("t", &format!("write {w}\nread {r}\nagent {a}\n")).unwrap();
    let db = tmp("tokens");
    let svc = Service::open(&db, cfg(4)).unwrap();
    let opts = ServeOptions { tokens: Some(Swap::new(tokens)), ..ServeOptions::default() };
    let (addr, stop, t) = start(svc, opts);
    let ask = |method: &str, path: &str, auth: Option<&str>, body: &str| {
        let auth = auth.map(|a| format!("Authorization: {a}\r\n")).unwrap_or_default();
        let raw = format!(
            "{method} {path} HTTP/1.1\r\nHost: x\r\n{auth}Content-Length: {}\r\nConnection: close\r\n\r\n{body}",
            body.len()
        );
        let mut s = TcpStream::connect(&addr).unwrap();
        s.write_all(raw.as_bytes()).unwrap();
        let mut out = String::new();
        s.read_to_string(&mut out).unwrap();
        let head = out.split("\r\n\r\n").next().unwrap_or_default().to_ascii_lowercase();
        let (st, body) = answers(&out).into_iter().next().unwrap();
        (st, body, head)
    };
    let flow = req("h0_0_0", "h3_1_1", 1_000_000, 10_000).to_string();
    // no token: only /health
    assert_eq!(ask("GET", "/health", None, "").0, 200);
    let (st, body, head) = ask("GET", "/flows", None, "");
    assert_eq!(st, 401, "{body}");
    assert!(head.contains("www-authenticate: bearer"), "{head}");
    assert!(body.contains("\"field\":\"Authorization\""), "{body}");
    assert_eq!(ask("POST", "/flows", None, &flow).0, 401);
    assert_eq!(ask("GET", "/nothing", None, "").0, 401, "a resource's existence shows");
    // a token the file does not list, or not a bearer one
    assert_eq!(ask("GET", "/flows", Some("Bearer 0123456789abcdef0124"), "").0, 401);
    assert_eq!(ask("GET", "/flows", Some(&format!("Basic {w}")), "").0, 401);
    assert_eq!(ask("GET", "/flows", Some("Bearer"), "").0, 401);
    // a read token reads, and may not change anything
    assert_eq!(ask("GET", "/flows", Some(&format!("Bearer {r}")), "").0, 200);
    assert_eq!(ask("GET", "/log?after=0", Some(&format!("bearer {r}")), "").0, 200);
    let (st, body, _) = ask("POST", "/flows", Some(&format!("Bearer {r}")), &flow);
    assert_eq!(st, 403, "{body}");
    assert!(body.contains("write token"), "{body}");
    assert_eq!(ask("DELETE", "/flows/0", Some(&format!("Bearer {r}")), "").0, 403);
    // an agent token registers and reports, and changes no reservation
    let reg = r#"{"name": "a1", "hosts": ["h0_0_0"]}"#;
    assert_eq!(ask("POST", "/agents", Some(&format!("Bearer {r}")), reg).0, 403);
    let (st, body, _) = ask("POST", "/agents", Some(&format!("Bearer {a}")), reg);
    assert_eq!(st, 200, "{body}");
    let (st, body, _) = ask("POST", "/flows", Some(&format!("Bearer {a}")), &flow);
    assert_eq!(st, 403, "{body}");
    assert!(body.contains("an agent token may read, POST /agents, DELETE /agents/NAME"), "{body}");
    assert_eq!(ask("DELETE", "/flows/0", Some(&format!("Bearer {a}")), "").0, 403);
    // a write token does everything
    let (st, body, _) = ask("POST", "/flows", Some(&format!("Bearer {w}")), &flow);
    assert_eq!(st, 201, "{body}");
    let (st, body, _) =
        ask("POST", "/applied", Some(&format!("Bearer {a}")), r#"{"flow": 0, "seq": 1}"#);
    assert_eq!(st, 200, "{body}");
    assert_eq!(ask("DELETE", "/agents/a1", Some(&format!("Bearer {a}")), "").0, 204);
    let (st, body, _) = ask("GET", "/stats", Some(&format!("Bearer {w}")), "");
    assert_eq!(st, 200);
    let stats: Value = serde_json::from_str(&body).unwrap();
    assert_eq!(stats["denied"], 11, "{stats}"); // six 401s, five 403s
    assert_eq!(stats["admitted"], 1, "{stats}");
    assert_eq!(ask("DELETE", "/flows/0", Some(&format!("Bearer {w}")), "").0, 204);
    stop.store(true, Ordering::Relaxed);
    t.join().unwrap();
}

/// Step `i` of a stream of requests (a third with a match) and removals over a k = 4
/// fat-tree that admits, refuses and moves flows.
fn step(svc: &mut Service, i: usize) -> (u16, Value) {
    let h = |j: usize| format!("h{}_{}_{}", (j / 4) % 4, (j / 2) % 2, j % 2);
    if i % 6 == 5 {
        return svc.handle("DELETE", &format!("/flows/{}", (i * 7) % (i / 2 + 1)), b"");
    }
    let rate = 60_000_000 + (i as u64 % 7) * 10_000_000;
    let mut r = req(&h(i * 5), &h(i * 7 + 3), rate, 1200 + (i as u64 % 5) * 300);
    if i % 3 == 0 {
        r["match"] = json!({"proto": "udp", "dst_port": 5000 + i});
    }
    post(svc, r)
}

fn log_rows(db: &Path) -> i64 {
    let c = rusqlite::Connection::open(db).unwrap();
    c.query_row("SELECT COUNT(*) FROM log", [], |r| r.get(0)).unwrap()
}

#[test]
fn a_compacted_log_decides_as_the_whole_one_and_a_restart_replays_only_its_tail() {
    let (db, whole_db) = (tmp("compact"), tmp("compact-whole"));
    let mut svc = Service::open(&db, cfg(4)).unwrap();
    let mut whole = Service::open(&whole_db, cfg(4)).unwrap();
    let (_, empty) = svc.handle("GET", "/snapshot", b"");
    assert_eq!((&empty["seq"], &empty["flows"]), (&json!(0), &json!([])), "{empty}");
    let (mut moved, mut refused) = (0, 0);
    for i in 0..400 {
        let a = step(&mut svc, i);
        assert_eq!(a, step(&mut whole, i), "step {i}");
        moved += usize::from(a.1["rerouted"].as_array().is_some_and(|r| !r.is_empty()));
        refused += usize::from(a.0 == 409);
        if i % 100 == 99 {
            // the state now becomes the snapshot; the newest 10 entries stay for readers
            let (st, c) = svc.handle("POST", "/compact?keep=10", b"");
            assert_eq!(st, 200, "{c}");
            let (_, health) = svc.handle("GET", "/health", b"");
            assert_eq!((&c["snapshot"], &c["folded"]), (&health["snapshot"], &health["folded"]));
            assert_eq!(health["last"], whole.handle("GET", "/health", b"").1["last"]);
            assert_eq!(health["snapshot"], health["last"]);
            assert_eq!(log_rows(&db), 10);
            let folded = c["folded"].as_i64().unwrap();
            assert_eq!(folded, health["last"].as_i64().unwrap() - 10);
            let (st, gone) = svc.handle("GET", &format!("/log?after={}", folded - 1), b"");
            assert_eq!((st, &gone["field"]), (410, &json!("after")), "{gone}");
            let (_, tail) = svc.handle("GET", &format!("/log?after={folded}"), b"");
            let (_, same) = whole.handle("GET", &format!("/log?after={folded}"), b"");
            assert_eq!(tail["entries"], same["entries"]);
            assert_eq!(tail["entries"].as_array().map(Vec::len), Some(10));
            // a restart restores the snapshot and replays nothing (the kept entries are in it)
            drop(svc);
            svc = Service::open(&db, cfg(4)).unwrap();
            for path in ["/flows", "/stats"] {
                assert_eq!(svc.handle("GET", path, b""), whole.handle("GET", path, b""), "{path}");
            }
            assert_eq!(table_flows(&db), table_flows(&whole_db));
        }
    }
    assert!(moved > 3 && refused > 20, "the stream must move and refuse flows: {moved} {refused}");
    // the snapshot holds the matches too: a restart shows them
    let (_, flows) = svc.handle("GET", "/flows", b"");
    assert!(flows.as_array().unwrap().iter().any(|f| f.get("match").is_some()), "{flows}");
    // keep=0 folds everything; numbering goes on
    assert_eq!(svc.handle("POST", "/compact", b"").0, 200);
    assert_eq!(log_rows(&db), 0);
    let a = post(&mut svc, req("h0_0_0", "h1_0_1", 1_000_000, 5000));
    assert_eq!(a, post(&mut whole, req("h0_0_0", "h1_0_1", 1_000_000, 5000)));
    let snap = svc.handle("GET", "/health", b"").1["snapshot"].clone();
    let (_, page) = svc.handle("GET", &format!("/log?after={snap}"), b"");
    assert_eq!(page["entries"][0]["seq"], whole.handle("GET", "/health", b"").1["last"]);
    for bad in ["/compact?keep=-1", "/compact?keep=x", "/compact?upto=3"] {
        let (st, r) = svc.handle("POST", bad, b"");
        assert_eq!(st, 400, "{bad}: {r}");
    }
    assert_eq!(svc.handle("GET", "/compact", b"").0, 405);
}

#[test]
fn with_log_keep_the_log_stays_bounded_and_decides_the_same() {
    let (db, whole_db) = (tmp("keep"), tmp("keep-whole"));
    let mut svc = Service::open(&db, cfg(4)).unwrap();
    svc.set_log_keep(Some(20));
    let mut whole = Service::open(&whole_db, cfg(4)).unwrap();
    let mut most = 0;
    for i in 0..300 {
        assert_eq!(step(&mut svc, i), step(&mut whole, i), "step {i}");
        most = most.max(log_rows(&db));
    }
    assert!(most <= 40, "the log held {most} entries");
    assert!(svc.handle("GET", "/health", b"").1["snapshot"].as_i64() > Some(200));
    assert_eq!(svc.handle("GET", "/stats", b"").1["compaction_errors"], 0);
    drop(svc);
    let mut svc = Service::open(&db, cfg(4)).unwrap();
    assert_eq!(svc.handle("GET", "/flows", b""), whole.handle("GET", "/flows", b""));
}

#[test]
fn a_changed_snapshot_is_refused_naming_it() {
    let db = tmp("snap-bad");
    let mut svc = Service::open(&db, cfg(4)).unwrap();
    for i in 0..80 {
        step(&mut svc, i);
    }
    assert_eq!(svc.handle("POST", "/compact", b"").0, 200);
    drop(svc);
    let c = rusqlite::Connection::open(&db).unwrap();
    let text: String = c.query_row("SELECT json FROM snapshot", [], |r| r.get(0)).unwrap();
    let good: Value = serde_json::from_str(&text).unwrap();
    // the first flow doubled (more than its queues hold), then a flow's hop sent elsewhere
    let mut over = good.clone();
    let first = over["flows"][0].clone();
    for k in 0..300 {
        let mut f = first.clone();
        f["id"] = json!(1000 + k);
        over["flows"].as_array_mut().unwrap().push(f);
    }
    over["next_id"] = json!(2000);
    let mut elsewhere = good.clone();
    elsewhere["flows"][0]["hops"][1][0] = json!(0);
    for (bad, why) in [(over, "exceed"), (elsewhere, "does not leave"), (json!([]), "stats")] {
        c.execute("UPDATE snapshot SET json = ?1", [bad.to_string()]).unwrap();
        let e = Service::open(&db, cfg(4)).unwrap_err();
        assert!(matches!(e, ServiceError::BadSnapshot { .. }), "{e}");
        let text = e.to_string();
        assert!(text.contains("the snapshot of log entries 1 to ") && text.contains(why), "{text}");
    }
    c.execute("UPDATE snapshot SET json = ?1", [good.to_string()]).unwrap();
    assert!(Service::open(&db, cfg(4)).is_ok());
}

#[test]
fn a_long_poll_on_the_log_ends_when_an_entry_is_logged() {
    let svc = Service::open(&tmp("wait"), cfg(4)).unwrap();
    let (addr, stop, t) = start(svc, ServeOptions::default());
    let get = |addr: &str, path: &str| {
        let (st, body) =
            http(addr, &format!("GET {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"));
        (st, serde_json::from_str::<Value>(&body).unwrap_or(Value::Null))
    };
    // nothing is logged: the answer comes, empty, once the time asked has passed
    let t0 = Instant::now();
    let (st, page) = get(&addr, "/log?after=0&wait=300");
    assert_eq!((st, &page["entries"]), (200, &json!([])), "{page}");
    assert!(t0.elapsed() >= Duration::from_millis(300), "{:?}", t0.elapsed());
    // an admission while a poll waits ends the wait with it, long before the time asked
    let a2 = addr.clone();
    let waiter = std::thread::spawn(move || {
        let t = Instant::now();
        let r = get(&a2, "/log?after=0&wait=20000");
        (t.elapsed(), r)
    });
    std::thread::sleep(Duration::from_millis(200));
    let body = req("h0_0_0", "h3_1_1", 1_000_000, 10_000).to_string();
    let raw = format!(
        "POST /flows HTTP/1.1\r\nHost: x\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    );
    assert_eq!(http(&addr, &raw).0, 201);
    let (took, (st, page)) = waiter.join().unwrap();
    assert_eq!(st, 200);
    assert_eq!(page["entries"].as_array().map(Vec::len), Some(1), "{page}");
    assert!(took < Duration::from_secs(10), "the poll waited {took:?}");
    // and others are answered while polls wait
    assert_eq!(get(&addr, "/health").0, 200);
    let (st, r) = get(&addr, "/log?after=0&wait=60001");
    assert_eq!((st, &r["field"]), (400, &json!("wait")), "{r}");
    stop.store(true, Ordering::Relaxed);
    t.join().unwrap();
}

/// Agents on separate hosts keep the sequential order through the service: a `GET /applied`
/// with `wait` is held until the flow's agent reports its step, and answers at once when no
/// agent serves the flow's source or the flow is gone.
#[test]
fn a_step_of_another_agent_is_waited_for_until_it_is_reported() {
    let db = tmp("applied");
    let mut svc = Service::open(&db, cfg(4)).unwrap();
    svc.agents_mut().set_ttl(Duration::from_millis(400));
    let (addr, stop, t) = start(svc, ServeOptions::default());
    let call = |method: &str, path: &str, body: &str| -> (u16, Value) {
        let raw = format!(
            "{method} {path} HTTP/1.1\r\nHost: x\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
            body.len()
        );
        let (st, text) = http(&addr, &raw);
        (st, serde_json::from_str(&text).unwrap_or(Value::Null))
    };
    let (st, f) = call("POST", "/flows", &req("h0_0_0", "h3_1_1", 1_000_000, 10_000).to_string());
    assert_eq!(st, 201, "{f}");
    let id = f["id"].as_u64().unwrap();
    // nobody serves h0_0_0 yet
    let (_, a) = call("GET", &format!("/applied?flow={id}&seq=1&wait=5000"), "");
    assert_eq!((a["done"].clone(), a["why"].clone()), (json!(true), json!("unserved")), "{a}");
    assert_eq!(call("POST", "/agents", r#"{"name": "A", "hosts": ["h0_0_0"]}"#).0, 200);
    // held until A reports (another report in between does not end it)
    let started = Instant::now();
    let waiter = {
        let addr = addr.clone();
        std::thread::spawn(move || {
            let raw = format!("GET /applied?flow={id}&seq=1&wait=5000 HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
            http(&addr, &raw)
        })
    };
    std::thread::sleep(Duration::from_millis(100));
    assert_eq!(call("POST", "/agents", r#"{"name": "A", "hosts": ["h0_0_0"]}"#).0, 200);
    std::thread::sleep(Duration::from_millis(100));
    assert_eq!(call("POST", "/applied", &format!(r#"{{"flow": {id}, "seq": 1}}"#)).0, 200);
    let (st, body) = waiter.join().unwrap();
    let held = started.elapsed();
    let a: Value = serde_json::from_str(&body).unwrap();
    assert_eq!(
        (st, a["why"].clone(), a["agent"].clone()),
        (200, json!("applied"), json!("A")),
        "{a}"
    );
    assert!(held >= Duration::from_millis(200), "answered after {held:?}, before the report");
    // a step A never reports: answered not done when the wait is up (A renewed first, so a
    // stalled machine cannot let its 400 ms lapse during the 150 ms wait)
    assert_eq!(call("POST", "/agents", r#"{"name": "A", "hosts": ["h0_0_0"]}"#).0, 200);
    let t0 = Instant::now();
    let (_, a) = call("GET", &format!("/applied?flow={id}&seq=2&wait=150"), "");
    assert_eq!((a["done"].clone(), a["why"].clone()), (json!(false), json!("waiting")), "{a}");
    assert!(t0.elapsed() >= Duration::from_millis(150));
    // A stops renewing: its hosts are unserved again
    std::thread::sleep(Duration::from_millis(450));
    assert_eq!(call("GET", "/agents", "").1, json!([]));
    let (_, a) = call("GET", &format!("/applied?flow={id}&seq=2"), "");
    assert_eq!(a["why"], "unserved", "{a}");
    // the flow removed: nothing to wait for
    assert_eq!(call("POST", "/agents", r#"{"name": "A", "hosts": ["h0_0_0"]}"#).0, 200);
    assert_eq!(call("DELETE", &format!("/flows/{id}"), "").0, 204);
    let (_, a) = call("GET", &format!("/applied?flow={id}&seq=9&wait=5000"), "");
    assert_eq!(a["why"], "removed", "{a}");
    assert_eq!(call("POST", "/applied", &format!(r#"{{"flow": {id}, "seq": 1}}"#)).0, 404);
    stop.store(true, Ordering::Relaxed);
    t.join().unwrap();
}

#[test]
fn a_service_nobody_asked_for_longer_than_its_io_timeout_still_answers() {
    let db = tmp("idle");
    let svc = Service::open(&db, cfg(4)).unwrap();
    let timeout = Duration::from_millis(300);
    let (addr, stop, t) = start(svc, ServeOptions { io_timeout: timeout, tokens: None });
    for _ in 0..2 {
        std::thread::sleep(timeout * 3);
        let (st, _) = http(&addr, "GET /health HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
        assert_eq!(st, 200);
    }
    stop.store(true, Ordering::Relaxed);
    t.join().unwrap();
}

#[test]
fn bodies_come_chunked_or_after_100_continue_and_bad_heads_are_refused() {
    let db = tmp("framing");
    let svc = Service::open(&db, cfg(4)).unwrap();
    let (addr, stop, t) = start(svc, ServeOptions::default());
    let body = req("h0_0_0", "h3_1_1", 1_000_000, 10_000).to_string();
    let (a, b) = body.split_at(body.len() / 2);
    let chunked = format!(
        "POST /flows HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\n\
         {:x}\r\n{a}\r\n{:x};note=1\r\n{b}\r\n0\r\n\r\n",
        a.len(),
        b.len()
    );
    let (st, text) = http(&addr, &chunked);
    assert_eq!(st, 201, "{text}");
    // curl's way with a larger body: the head, then the body once told to go on
    let mut s = TcpStream::connect(&addr).unwrap();
    let body = req("h0_0_1", "h3_1_0", 1_000_000, 10_000).to_string();
    write!(
        s,
        "POST /flows HTTP/1.1\r\nHost: x\r\nExpect: 100-continue\r\nContent-Length: {}\r\n\
         Connection: close\r\n\r\n",
        body.len()
    )
    .unwrap();
    let mut go = [0u8; 25];
    s.read_exact(&mut go).unwrap();
    assert_eq!(&go, b"HTTP/1.1 100 Continue\r\n\r\n");
    s.write_all(body.as_bytes()).unwrap();
    let mut out = String::new();
    s.read_to_string(&mut out).unwrap();
    assert_eq!(answers(&out).first().map(|a| a.0), Some(201), "{out}");
    // heads it cannot use: refused, naming why, and nothing admitted
    let huge = format!("GET /flows HTTP/1.1\r\nX: {}\r\n\r\n", "y".repeat(latnet_ctld::MAX_HEAD));
    for (raw, status, why) in [
        (huge.as_str(), 431, "larger than"),
        ("HELLO\r\n\r\n", 400, "expected METHOD TARGET HTTP/1.1"),
        ("GET /flows HTTP/3\r\n\r\n", 505, "HTTP/1.1 or HTTP/1.0"),
        ("POST /flows HTTP/1.1\r\nHost: x\r\nContent-Length: x\r\n\r\n", 400, "Content-Length"),
    ] {
        let (st, text) = http(&addr, raw);
        assert_eq!(st, status, "{text}");
        assert!(text.contains(why), "{text}");
    }
    let (_, text) = http(&addr, "GET /flows HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
    let list: Value = serde_json::from_str(&text).unwrap();
    assert_eq!(list.as_array().map(Vec::len), Some(2));
    stop.store(true, Ordering::Relaxed);
    t.join().unwrap();
}

#[test]
fn a_kept_alive_connection_s_idle_time_does_not_count_against_its_next_head() {
    let db = tmp("keepalive");
    let svc = Service::open(&db, cfg(4)).unwrap();
    let timeout = Duration::from_secs(2);
    let (addr, stop, t) = start(svc, ServeOptions { io_timeout: timeout, tokens: None });
    let mut s = TcpStream::connect(&addr).unwrap();
    s.set_read_timeout(Some(timeout * 2)).unwrap();
    let one = |s: &mut TcpStream| {
        let mut buf = [0u8; 4096];
        let n = s.read(&mut buf).unwrap();
        answers(&String::from_utf8_lossy(&buf[..n]))
    };
    s.write_all(b"GET /health HTTP/1.1\r\nHost: x\r\n\r\n").unwrap();
    assert_eq!(one(&mut s).first().map(|a| a.0), Some(200));
    // idle for most of the timeout, then a head that takes half of it
    std::thread::sleep(timeout * 3 / 4);
    s.write_all(b"GET /health HTTP/1.1\r\n").unwrap();
    std::thread::sleep(timeout / 2);
    s.write_all(b"Host: x\r\n\r\n").unwrap();
    assert_eq!(one(&mut s).first().map(|a| a.0), Some(200));
    stop.store(true, Ordering::Relaxed);
    t.join().unwrap();
}

#[test]
fn beyond_the_most_connections_a_new_one_hears_503_and_a_freed_place_is_taken_again() {
    let db = tmp("crowd");
    let svc = Service::open(&db, cfg(4)).unwrap();
    let (addr, stop, t) = start(svc, ServeOptions::default());
    let most = latnet_ctld::MAX_CONNECTIONS;
    let mut held: Vec<TcpStream> = Vec::with_capacity(most);
    for _ in 0..most {
        let mut s = TcpStream::connect(&addr).unwrap();
        // each is answered once, so each has its thread before the next connects
        s.write_all(b"GET /health HTTP/1.1\r\nHost: x\r\n\r\n").unwrap();
        let mut buf = [0u8; 1024];
        assert!(s.read(&mut buf).unwrap() > 0);
        held.push(s);
    }
    let (st, text) = http(&addr, "GET /health HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
    assert_eq!(st, 503, "{text}");
    assert!(text.contains("connections are open"), "{text}");
    // a client that sends its request in two writes, the second after the 503 was said: the
    // refused connection is read until the client closes, so neither write nor read is reset
    let mut s = TcpStream::connect(&addr).unwrap();
    s.write_all(b"GET /health HTTP/1.1\r\n").unwrap();
    std::thread::sleep(Duration::from_millis(50));
    s.write_all(b"Host: x\r\nConnection: close\r\n\r\n").expect("the second write");
    let mut out = String::new();
    s.read_to_string(&mut out).expect("the 503, unreset");
    assert!(out.starts_with("HTTP/1.1 503"), "{out}");
    drop(s);
    held.truncate(most - 1);
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        let (st, _) = http(&addr, "GET /health HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
        if st == 200 {
            break;
        }
        assert!(Instant::now() < deadline, "the freed place was not taken");
        std::thread::sleep(Duration::from_millis(20));
    }
    // the loop's connection may not be counted closed yet: until it is, a new one hears 503
    let deadline = Instant::now() + Duration::from_secs(5);
    let m = loop {
        if let Some(m) = try_metrics(&addr, "") {
            break m;
        }
        assert!(Instant::now() < deadline, "no place for GET /metrics");
        std::thread::sleep(Duration::from_millis(20));
    };
    // the 503 above, and any the loops heard before the freed place was taken
    let refused = m["latnet_ctld_connections_refused_total"];
    assert!(refused >= 1.0, "{m:?}");
    assert_eq!(m["latnet_ctld_responses_total{code=\"503\"}"], refused, "{m:?}");
    assert!(m["latnet_ctld_connections_total"] >= (most + 2) as f64, "{m:?}");
    assert_eq!(m["latnet_ctld_connections_open"], most as f64, "{m:?}");
    drop(held);
    stop.store(true, Ordering::Relaxed);
    t.join().unwrap();
}

/// The samples of `GET /metrics` (with `auth`, a header line or nothing), which must be 200
/// in the Prometheus text format.
fn metrics(addr: &str, auth: &str) -> std::collections::BTreeMap<String, f64> {
    try_metrics(addr, auth).expect("GET /metrics answered 503")
}

/// As [`metrics`], or `None` when the service has no place for the connection (503).
fn try_metrics(addr: &str, auth: &str) -> Option<std::collections::BTreeMap<String, f64>> {
    let mut s = TcpStream::connect(addr).unwrap();
    write!(s, "GET /metrics HTTP/1.1\r\nHost: x\r\n{auth}Connection: close\r\n\r\n").unwrap();
    let mut out = String::new();
    s.read_to_string(&mut out).unwrap();
    let (head, body) = out.split_once("\r\n\r\n").unwrap();
    if head.starts_with("HTTP/1.1 503") {
        return None;
    }
    assert!(head.starts_with("HTTP/1.1 200"), "{out}");
    assert!(head.contains("Content-Type: text/plain; version=0.0.4"), "{head}");
    let samples = body
        .lines()
        .filter(|l| !l.starts_with('#'))
        .map(|l| {
            let (k, v) = l.rsplit_once(' ').unwrap();
            (k.to_owned(), v.parse().unwrap())
        })
        .collect();
    Some(samples)
}

#[test]
fn metrics_count_what_the_service_did_in_the_prometheus_format() {
    let (w, r) = ("w".repeat(MIN_TOKEN), "r".repeat(MIN_TOKEN));
    let tokens = Tokens::parse("t", &format!("write {w}\nread {r}\n")).unwrap();
    let svc = Service::open(&tmp("metrics"), cfg(4)).unwrap();
    let opts = ServeOptions { tokens: Some(Swap::new(tokens)), ..ServeOptions::default() };
    let (addr, stop, t) = start(svc, opts);
    let (auth_w, auth_r) =
        (format!("Authorization: Bearer {w}\r\n"), format!("Authorization: Bearer {r}\r\n"));
    // a token is needed, as for every request but GET /health
    let (st, _) = http(&addr, "GET /metrics HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
    assert_eq!(st, 401);
    let before = metrics(&addr, &auth_r);
    assert_eq!(before["latnet_ctld_flows"], 0.0);
    assert_eq!(before["latnet_ctld_denied_requests_total"], 1.0);
    assert_eq!(before["latnet_ctld_responses_total{code=\"401\"}"], 1.0);
    // an admission, an invalid request and one for nothing, on one kept-alive connection
    let post = |body: &str| {
        format!(
            "POST /flows HTTP/1.1\r\nHost: x\r\n{auth_w}Content-Length: {}\r\n\r\n{body}",
            body.len()
        )
    };
    let mut kept = TcpStream::connect(&addr).unwrap();
    let raw = post(&req("h0_0_0", "h3_1_1", 1_000_000, 10_000).to_string())
        + &post(&req("h0_0_0", "nowhere", 1_000_000, 10_000).to_string())
        + &format!("GET /nothing HTTP/1.1\r\nHost: x\r\n{auth_r}\r\n");
    kept.write_all(raw.as_bytes()).unwrap();
    kept.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    let mut got = String::new();
    let mut buf = [0u8; 4096];
    while common::answers(&got).len() < 3 {
        let n = kept.read(&mut buf).unwrap();
        assert!(n > 0, "closed early: {got}");
        got.push_str(std::str::from_utf8(&buf[..n]).unwrap());
    }
    let codes: Vec<u16> = common::answers(&got).iter().map(|a| a.0).collect();
    assert_eq!(codes, [201, 422, 404]);
    let after = metrics(&addr, &auth_r);
    assert_eq!(after["latnet_ctld_flows"], 1.0);
    assert_eq!(after["latnet_ctld_admitted_total"], 1.0);
    assert_eq!(after["latnet_ctld_invalid_requests_total"], 1.0);
    assert_eq!(after["latnet_ctld_log_last_seq"], 1.0);
    for code in ["201", "422", "404"] {
        assert_eq!(after[&format!("latnet_ctld_responses_total{{code=\"{code}\"}}")], 1.0);
    }
    // the scrape before counted itself; this one's connection and the kept one are open
    assert_eq!(after["latnet_ctld_responses_total{code=\"200\"}"], 2.0);
    assert_eq!(after["latnet_ctld_connections_open"], 2.0);
    assert_eq!(after["latnet_ctld_connections_total"], 4.0);
    assert_eq!(after["latnet_ctld_connections_refused_total"], 0.0);
    // HEAD: the head alone; POST: not allowed
    let mut s = TcpStream::connect(&addr).unwrap();
    write!(s, "HEAD /metrics HTTP/1.1\r\nHost: x\r\n{auth_r}Connection: close\r\n\r\n").unwrap();
    let mut out = String::new();
    s.read_to_string(&mut out).unwrap();
    assert!(out.starts_with("HTTP/1.1 200") && out.ends_with("\r\n\r\n"), "{out}");
    // as on every GET resource: HEAD /flows tells the length of GET /flows' body, HEAD /health
    // needs no token
    let len = |out: &str| {
        let l = out.lines().find_map(|l| l.strip_prefix("Content-Length: ")).unwrap();
        l.parse::<usize>().unwrap()
    };
    let ask = |m: &str, path: &str, auth: &str| {
        let mut s = TcpStream::connect(&addr).unwrap();
        write!(s, "{m} {path} HTTP/1.1\r\nHost: x\r\n{auth}Connection: close\r\n\r\n").unwrap();
        let mut out = String::new();
        s.read_to_string(&mut out).unwrap();
        out
    };
    let (get, head) = (ask("GET", "/flows", &auth_r), ask("HEAD", "/flows", &auth_r));
    assert!(head.starts_with("HTTP/1.1 200") && head.ends_with("\r\n\r\n"), "{head}");
    assert_eq!(len(&head), len(&get));
    assert_eq!(len(&get), get.split_once("\r\n\r\n").unwrap().1.len());
    assert!(ask("HEAD", "/health", "").starts_with("HTTP/1.1 200"));
    // a long poll asked with HEAD is answered at once
    let t0 = Instant::now();
    assert!(ask("HEAD", "/log?after=1&wait=5000", &auth_r).starts_with("HTTP/1.1 200"));
    assert!(t0.elapsed() < Duration::from_secs(4), "{:?}", t0.elapsed());
    let raw =
        format!("POST /metrics HTTP/1.1\r\nHost: x\r\n{auth_w}Content-Length: 0\r\nConnection: close\r\n\r\n");
    assert_eq!(http(&addr, &raw).0, 405);
    // a 405 says what is allowed (RFC 9110: an Allow header)
    for (m, path, allow) in [
        ("POST", "/metrics", "GET, HEAD"),
        ("PUT", "/flows", "GET, HEAD, POST"),
        ("POST", "/flows/1", "GET, HEAD, DELETE"),
        ("GET", "/compact", "POST"),
    ] {
        let out = ask(m, path, &auth_w);
        assert!(out.starts_with("HTTP/1.1 405"), "{out}");
        assert!(out.contains(&format!("\r\nAllow: {allow}\r\n")), "{out}");
    }
    assert!(!ask("GET", "/nothing", &auth_r).contains("Allow:"));
    drop(kept);
    stop.store(true, Ordering::Relaxed);
    t.join().unwrap();
}

/// `latnet-ctld ARGS --db DB --stdin-stop` with nothing on its standard input (so that a start
/// that succeeds stops at once): its exit status and standard error.
fn ctld(args: &[&str], db: &Path) -> (Option<i32>, String) {
    use std::process::{Command, Stdio};
    let out = Command::new(env!("CARGO_BIN_EXE_latnet-ctld"))
        .args(args)
        .arg("--db")
        .arg(db)
        .arg("--stdin-stop")
        .stdin(Stdio::null())
        .output()
        .unwrap();
    (out.status.code(), String::from_utf8_lossy(&out.stderr).into_owned())
}

#[test]
fn a_start_refused_for_its_settings_writes_no_store_and_the_corrected_one_starts() {
    let db = tmp("bad-start");
    let with = |f: fn(&mut ServiceConfig)| {
        let mut c = cfg(4);
        f(&mut c);
        c
    };
    for bad in [
        cfg(3),
        with(|c| c.system = "foo".into()),
        with(|c| c.system = "qjump".into()),
        with(|c| c.queues = 9),
    ] {
        let e = Service::open(&db, bad.clone()).unwrap_err();
        assert!(matches!(e, ServiceError::Config(_)), "{bad:?}: {e}");
        assert!(!db.exists(), "{bad:?} made a store");
    }
    let mut svc = Service::open(&db, cfg(4)).unwrap();
    assert_eq!(svc.handle("GET", "/config", b"").1["k"], 4);
}

#[test]
fn the_binary_says_2_for_settings_it_cannot_use_and_touches_no_store_before_it_listens() {
    let db = tmp("bad-binary");
    let free = ["--listen", "127.0.0.1:0"];
    for (args, why) in [
        (&["--k", "3"][..], "even k"),
        (&["--k", "4", "--system", "foo"], "foo"),
        (&["--k", "4", "--system", "qjump"], "qjump"),
        (&["--k", "4", "--queues", "9"], "9 queues"),
    ] {
        let (code, err) = ctld(&[args, &free[..]].concat(), &db);
        assert_eq!(code, Some(2), "{args:?}: {err}");
        assert!(err.contains(why), "{args:?}: {err}");
        assert!(!db.exists(), "{args:?} made a store");
    }
    // a port in use: a store error's status, and no store either
    let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = taken.local_addr().unwrap().to_string();
    let (code, err) = ctld(&["--k", "6", "--listen", &addr], &db);
    assert_eq!(code, Some(1), "{err}");
    assert!(err.contains(&addr), "{err}");
    assert!(!db.exists(), "a start that could not listen made a store");
    let (code, err) = ctld(&["--k", "4", "--listen", "127.0.0.1:0"], &db);
    assert_eq!(code, Some(0), "{err}");
    // a store made with other settings is still refused, as a store error
    let (code, err) = ctld(&["--k", "6", "--listen", "127.0.0.1:0"], &db);
    assert_eq!(code, Some(1), "{err}");
    assert!(err.contains("k = 4"), "{err}");
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

#[test]
fn compact_with_a_bare_keep_names_what_keep_expects() {
    let mut svc = Service::open(&tmp("bare-keep"), cfg(4)).unwrap();
    for q in ["keep", "keep="] {
        let (st, r) = svc.handle("POST", &format!("/compact?{q}"), b"");
        assert_eq!(st, 400, "{r}");
        assert_eq!(r["field"], "keep");
        assert_eq!(r["error"], "keep: expected a whole number >= 0, got \"\"", "{q}");
    }
    let (st, r) = svc.handle("POST", "/compact?kept=1", b"");
    assert_eq!((st, r["field"].as_str()), (400, Some("kept")), "{r}");
}

#[test]
fn blank_lines_before_a_head_count_against_its_time() {
    let svc = Service::open(&tmp("blank-slow"), cfg(4)).unwrap();
    let timeout = Duration::from_millis(600);
    let (addr, stop, t) = start(svc, ServeOptions { io_timeout: timeout, tokens: None });
    let mut s = TcpStream::connect(&addr).unwrap();
    // far fewer than the blank lines it refuses by their number, over twice the timeout
    for _ in 0..12 {
        if s.write_all(b"\r\n").is_err() {
            break;
        }
        std::thread::sleep(timeout / 5);
    }
    let _ = s.write_all(b"GET /health HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
    s.set_read_timeout(Some(timeout * 4)).unwrap();
    let mut out = String::new();
    let _ = s.read_to_string(&mut out);
    assert_eq!(answers(&out).first().map(|a| a.0), Some(408), "{out:?}");
    stop.store(true, Ordering::Relaxed);
    t.join().unwrap();
}

#[test]
fn metrics_with_a_trailing_slash_is_the_same_text() {
    let svc = Service::open(&tmp("metrics-slash"), cfg(4)).unwrap();
    let (addr, stop, t) = start(svc, ServeOptions::default());
    for path in ["/metrics", "/metrics/"] {
        let raw = format!("GET {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
        let mut s = TcpStream::connect(&addr).unwrap();
        s.write_all(raw.as_bytes()).unwrap();
        let mut out = String::new();
        s.read_to_string(&mut out).unwrap();
        assert!(out.contains("Content-Type: text/plain; version=0.0.4"), "{path}: {out}");
        assert!(out.contains("\nlatnet_ctld_flows 0\n"), "{path}: {out}");
    }
    stop.store(true, Ordering::Relaxed);
    t.join().unwrap();
}

#[test]
fn http_1_1_needs_a_host_and_takes_an_absolute_target() {
    let svc = Service::open(&tmp("host"), cfg(4)).unwrap();
    let (addr, stop, t) = start(svc, ServeOptions::default());
    let (st, text) = http(&addr, "GET /health HTTP/1.1\r\nConnection: close\r\n\r\n");
    assert_eq!(st, 400, "{text}");
    assert!(text.contains("Host"), "{text}");
    let raw =
        format!("GET http://{addr}/health HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n");
    let (st, text) = http(&addr, &raw);
    assert_eq!(st, 200, "{text}");
    assert!(text.contains("\"ok\":true"), "{text}");
    // HTTP/1.0 has no Host to require
    let (st, text) = http(&addr, "GET /health HTTP/1.0\r\n\r\n");
    assert_eq!(st, 200, "{text}");
    stop.store(true, Ordering::Relaxed);
    t.join().unwrap();
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
