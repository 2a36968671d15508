//! The HTTP server: a real round trip, slow or silent clients, chunked bodies and 100-continue,
//! keep-alive, the connection limit, heads.

use super::access::try_metrics;
use super::*;

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
