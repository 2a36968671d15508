//! Tokens and the metrics endpoint.

use super::*;

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

/// The samples of `GET /metrics` (with `auth`, a header line or nothing), which must be 200
/// in the Prometheus text format.
fn metrics(addr: &str, auth: &str) -> std::collections::BTreeMap<String, f64> {
    try_metrics(addr, auth).expect("GET /metrics answered 503")
}

/// As [`metrics`], or `None` when the service has no place for the connection (503).
pub(crate) fn try_metrics(
    addr: &str,
    auth: &str,
) -> Option<std::collections::BTreeMap<String, f64>> {
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
    // the scrape before counted itself
    assert_eq!(after["latnet_ctld_responses_total{code=\"200\"}"], 2.0);
    assert_eq!(after["latnet_ctld_connections_total"], 4.0);
    // a scrape's connection and the kept one are open, once the threads of the closed ones
    // are done (on a busy machine one may still be ending after its client saw it close)
    let mut open = after["latnet_ctld_connections_open"];
    for _ in 0..250 {
        if open <= 2.0 {
            break;
        }
        std::thread::sleep(Duration::from_millis(20));
        open = metrics(&addr, &auth_r)["latnet_ctld_connections_open"];
    }
    assert_eq!(open, 2.0);
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
