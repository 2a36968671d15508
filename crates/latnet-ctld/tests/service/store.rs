//! The SQLite store: its configuration and log checked on open, a failed write, the store's id,
//! compaction and the snapshot.

use super::*;

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
