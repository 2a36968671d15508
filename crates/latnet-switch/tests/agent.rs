//! The host agent against a stand-in for the controller service (canned HTTP answers on
//! loopback) on a real veth pair: what it programs is read off the frames the peer receives.
//! Needs root (CI runs as root); without it each test says so and passes.

mod common;

use common::{root, Veth};
use latnet_switch::agent::{Agent, AgentConfig, Controller, HostSpec, Order};
use serde_json::{json, Value};
use std::collections::{BTreeMap, HashMap};
use std::io::{Read, Write};
use std::net::{IpAddr, TcpListener};
use std::sync::{Arc, Mutex};

/// A service that answers `GET path` with what the test set for it (`/log` whatever the query).
struct Fake {
    url: String,
    answers: Arc<Mutex<HashMap<String, (u16, Value)>>>,
}

impl Fake {
    fn start() -> Fake {
        let l = TcpListener::bind("127.0.0.1:0").unwrap_or_else(|e| panic!("{e}"));
        let url = format!("http://{}", l.local_addr().unwrap_or_else(|e| panic!("{e}")));
        let answers: Arc<Mutex<HashMap<String, (u16, Value)>>> = Arc::default();
        let a = answers.clone();
        std::thread::spawn(move || {
            for mut s in l.incoming().flatten() {
                let mut req = Vec::new();
                let mut buf = [0u8; 1024];
                while !req.windows(4).any(|w| w == b"\r\n\r\n") {
                    match s.read(&mut buf) {
                        Ok(0) | Err(_) => break,
                        Ok(n) => req.extend_from_slice(&buf[..n]),
                    }
                }
                let text = String::from_utf8_lossy(&req).into_owned();
                // the body too (a POST's), so that closing does not reset the connection
                let want = text
                    .lines()
                    .find_map(|l| {
                        l.to_ascii_lowercase().strip_prefix("content-length:").map(str::to_owned)
                    })
                    .and_then(|v| v.trim().parse::<usize>().ok())
                    .unwrap_or(0);
                let head = text.find("\r\n\r\n").map_or(req.len(), |i| i + 4);
                while req.len() < head + want {
                    match s.read(&mut buf) {
                        Ok(0) | Err(_) => break,
                        Ok(n) => req.extend_from_slice(&buf[..n]),
                    }
                }
                let path = text.split_whitespace().nth(1).unwrap_or("").to_owned();
                let key = if path.starts_with("/log") { "/log".to_owned() } else { path };
                let (st, body) = a
                    .lock()
                    .map(|m| m.get(&key).cloned())
                    .ok()
                    .flatten()
                    .unwrap_or((404, json!({"error": "no such resource"})));
                let body = body.to_string();
                let _ = write!(
                    s,
                    "HTTP/1.1 {st} X\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
                    body.len()
                );
            }
        });
        Fake { url, answers }
    }

    fn set(&self, path: &str, status: u16, body: Value) {
        if let Ok(mut m) = self.answers.lock() {
            m.insert(path.to_owned(), (status, body));
        }
    }
}

fn flow(id: u64, dport: Option<u16>, tags: &[u16], burst: u64) -> Value {
    let mut f = json!({"id": id, "src": "h1", "dst": "h2", "tags": tags, "path": ["h1", "s1", "h2"],
        "guarantee_ns": 500_000, "shaper": {"rate_bps": 10_000_000, "burst_bytes": burst}});
    if let Some(p) = dport {
        f["match"] = json!({"proto": "udp", "dst_port": p});
    }
    f
}

fn log(entries: Value, last: i64, store: &str) -> Value {
    json!({"entries": entries, "last": last, "store": store})
}

fn classes(v: &Veth) -> String {
    let out = std::process::Command::new("nsenter")
        .arg(format!("--net={}", v.path.display()))
        .args(["--", "tc", "class", "show", "dev", "vx0"])
        .output()
        .unwrap_or_else(|e| panic!("{e}"));
    String::from_utf8_lossy(&out.stdout).into_owned()
}

#[test]
fn the_agent_programs_moves_removes_refuses_and_resyncs() {
    if !root() {
        eprintln!("skipped: the agent needs root");
        return;
    }
    let mut v = Veth::new("agt");
    let svc = Fake::start();
    svc.set("/hosts", 200, json!(["h1", "h2", "h3"]));
    svc.set("/log", 200, log(json!([]), 2, "s1"));
    svc.set("/health", 200, json!({"ok": true, "last": 2, "store": "s1", "snapshot": 0}));
    svc.set("/routes/h1", 200, json!({"routes": [{"dst": "h2", "tags": [7], "path": []}]}));
    // 1: programmable; 2: a burst HTB cannot hold (its class is refused by the kernel);
    // 3: no match (its packets cannot be told apart)
    svc.set(
        "/flows",
        200,
        json!([
            flow(1, Some(5001), &[100, 200], 3000),
            flow(2, Some(5002), &[5], 5_000_000_000),
            flow(3, None, &[6], 3000)
        ]),
    );
    let mut addresses = BTreeMap::new();
    for (h, a) in [("h1", "10.77.0.1"), ("h2", "10.77.0.2"), ("h3", "10.77.0.3")] {
        addresses.insert(h.to_owned(), vec![a.parse::<IpAddr>().unwrap_or_else(|e| panic!("{e}"))]);
    }
    let cfg = AgentConfig {
        controller: Controller::new(&svc.url).unwrap_or_else(|e| panic!("{e}")),
        hosts: vec![HostSpec {
            name: "h1".into(),
            netns: Some(v.path.clone()),
            ifaces: vec!["vx0".into()],
        }],
        addresses,
        poll: std::time::Duration::from_millis(10),
        wait: None,
        shape: true,
        order: Order::Sequential,
        routes: true,
        dilation: 1,
        status: None,
        duration: None,
        peer_wait: Some(std::time::Duration::from_secs(1)),
    };
    // a service that cannot register agents just now: tried again later, not given up
    svc.set("/agents", 503, json!({"error": "the service is stopping"}));
    let mut ag = Agent::start(cfg).unwrap_or_else(|e| panic!("{e}"));
    ag.sync().unwrap_or_else(|e| panic!("{e}"));
    let st = ag.status();
    assert_eq!(st["peers"]["off"], Value::Null, "{}", st["peers"]);
    assert!(st["last_error"].as_str().is_some_and(|e| e.contains("POST /agents: 503")), "{st}");
    let h1 = &st["hosts"]["h1"];
    assert_eq!(
        h1["flows"].as_object().map(|m| m.keys().cloned().collect::<Vec<_>>()),
        Some(vec!["1".to_owned()])
    );
    assert_eq!(h1["flows"]["1"]["shaper"]["class"], "1:2");
    let refused = |k: &str| h1["refused"][k].as_str().unwrap_or_default().to_owned();
    assert!(
        refused("2").contains("its shaper") && refused("2").contains("burst"),
        "{}",
        refused("2")
    );
    assert!(refused("3").contains("no match"), "{}", refused("3"));
    assert!(classes(&v).contains("class htb 1:2 "), "{}", classes(&v));
    assert!(!classes(&v).contains("1:3"), "the refused flow's class is not left behind");
    v.send("10.77.0.2:5001");
    v.send("10.77.0.2:5002");
    v.send("10.77.0.3:5001");
    assert_eq!(
        v.seen(3),
        vec![
            (vec![100, 200], [10, 77, 0, 2], 5001, 56), // flow 1, admitted class's DSCP
            (vec![7], [10, 77, 0, 2], 5002, 0),         // flow 2 refused: the best-effort route
            (vec![], [10, 77, 0, 3], 5001, 0),          // no route to h3 was given
        ]
    );
    // an admission (flow 9, not this host's) that moved flow 1 (and gave it 1 Mbit/s)
    let mut moved = flow(1, Some(5001), &[300], 3000);
    moved["shaper"]["rate_bps"] = json!(1_000_000);
    svc.set("/flows/1", 200, moved);
    svc.set(
        "/log",
        200,
        log(
            json!([{"seq": 3, "op": "request", "outcome": "admitted", "id": 9, "rerouted": [1]}]),
            3,
            "s1",
        ),
    );
    assert_eq!(ag.poll().unwrap_or_else(|e| panic!("{e}")), 1);
    v.send("10.77.0.2:5001");
    assert_eq!(v.seen(1), vec![(vec![300], [10, 77, 0, 2], 5001, 56)]);
    // 150 datagrams: about 100 wait in its class behind its 3,000-byte bucket (about 50 ms at
    // 1 Mbit/s) when it is removed. Its class stays until they are sent (deleting it would
    // drop them), then goes; new packets take the best-effort route
    for _ in 0..150 {
        v.send("10.77.0.2:5001");
    }
    svc.set("/log", 200, log(json!([{"seq": 4, "op": "remove", "id": 1, "found": true}]), 4, "s1"));
    assert_eq!(ag.poll().unwrap_or_else(|e| panic!("{e}")), 1);
    ag.reap();
    assert!(classes(&v).contains("class htb 1:2 "), "{}", classes(&v));
    assert_eq!(ag.status()["hosts"]["h1"]["retiring_classes"], json!(["1:2"]));
    let queued = v.seen(150);
    assert_eq!(queued.len(), 150, "none dropped");
    assert!(queued.iter().all(|q| q.0 == vec![300]), "all sent as flow 1's");
    ag.reap();
    assert!(!classes(&v).contains("1:2"), "{}", classes(&v));
    assert_eq!(ag.status()["hosts"]["h1"]["retiring_classes"], json!([]));
    v.send("10.77.0.2:5001");
    assert_eq!(v.seen(1), vec![(vec![7], [10, 77, 0, 2], 5001, 0)]);
    // the service now answers from another store: what it holds is programmed afresh
    svc.set("/log", 200, log(json!([]), 1, "s2"));
    svc.set("/health", 200, json!({"ok": true, "last": 1, "store": "s2", "snapshot": 0}));
    svc.set("/flows", 200, json!([flow(1, Some(5001), &[400], 3000)]));
    ag.poll().unwrap_or_else(|e| panic!("{e}"));
    v.send("10.77.0.2:5001");
    assert_eq!(v.seen(1), vec![(vec![400], [10, 77, 0, 2], 5001, 56)]);
    // entries the agent had not read were folded into the service's snapshot: it programs the
    // flows as they are now (1 moved, 4 new) without undoing anything first
    svc.set("/log", 410, json!({"error": "compacted", "snapshot": 6, "last": 7, "store": "s2"}));
    svc.set("/health", 200, json!({"ok": true, "last": 7, "store": "s2", "snapshot": 6}));
    svc.set(
        "/flows",
        200,
        json!([flow(1, Some(5001), &[500], 3000), flow(4, Some(5004), &[8], 3000)]),
    );
    assert_eq!(ag.poll().unwrap_or_else(|e| panic!("{e}")), 0);
    v.send("10.77.0.2:5001");
    v.send("10.77.0.2:5004");
    assert_eq!(
        v.seen(2),
        vec![(vec![500], [10, 77, 0, 2], 5001, 56), (vec![8], [10, 77, 0, 2], 5004, 56)]
    );
    assert_eq!(ag.status()["last_seq"], 7);
    // and a flow the service no longer has is unprogrammed
    svc.set("/flows", 200, json!([flow(4, Some(5004), &[8], 3000)]));
    svc.set("/health", 200, json!({"ok": true, "last": 9, "store": "s2", "snapshot": 8}));
    ag.poll().unwrap_or_else(|e| panic!("{e}"));
    v.send("10.77.0.2:5001");
    assert_eq!(v.seen(1), vec![(vec![7], [10, 77, 0, 2], 5001, 0)]);
    let st = ag.status();
    assert_eq!((st["resyncs"].as_u64(), st["store"].as_str()), (Some(1), Some("s2")));
    assert_eq!(st["catch_ups"].as_u64(), Some(2));
    let what: Vec<(u64, &str)> = st["changes"]
        .as_array()
        .map(|c| {
            c.iter()
                .map(|c| (c["flow"].as_u64().unwrap_or(0), c["what"].as_str().unwrap_or("")))
                .collect()
        })
        .unwrap_or_default();
    assert_eq!(
        what,
        vec![
            (1, "add"),
            (1, "move"),
            (1, "remove"),
            (1, "add"),
            (1, "move"),
            (4, "add"),
            (1, "remove")
        ]
    );
    // another agent serves h1 (the service refuses the registration, 409): reading the state
    // again fails, naming it (registrations are renewed at most once a second)
    let why = "hosts[0]: h1 is served by agent \"h1+0@7\" already";
    svc.set("/agents", 409, json!({"error": why, "field": "hosts[0]"}));
    std::thread::sleep(std::time::Duration::from_millis(1100));
    let e = ag.sync().unwrap_err();
    assert!(e.to_string().contains(why), "{e}");
    // an unreachable service is a controller error, kept apart from kernel errors (the run
    // loop counts it and retries)
    let gone = Controller::new("http://127.0.0.1:1").unwrap_or_else(|e| panic!("{e}"));
    assert!(matches!(gone.get("/hosts"), Err(latnet_switch::agent::AgentError::Controller { .. })));
}
