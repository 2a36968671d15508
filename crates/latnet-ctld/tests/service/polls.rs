//! What host agents poll: the log (also as a long poll) and the steps other agents report.

use super::*;

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
    // (2 s: the test runs at idle priority beside others, and a registration must not lapse
    // while it waits 100-200 ms for something else; 400 ms did not leave much room)
    svc.agents_mut().set_ttl(Duration::from_secs(2));
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
    // stalled machine cannot let its 2 s lapse during the 150 ms wait)
    assert_eq!(call("POST", "/agents", r#"{"name": "A", "hosts": ["h0_0_0"]}"#).0, 200);
    let t0 = Instant::now();
    let (_, a) = call("GET", &format!("/applied?flow={id}&seq=2&wait=150"), "");
    assert_eq!((a["done"].clone(), a["why"].clone()), (json!(false), json!("waiting")), "{a}");
    assert!(t0.elapsed() >= Duration::from_millis(150));
    // A stops renewing: its hosts are unserved again
    std::thread::sleep(Duration::from_millis(2050));
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
