//! Unit tests of the server's parsing and polling rules.

use super::parse::*;
use super::*;

fn head(raw: &str) -> Result<Head, Reply> {
    parse_head(raw.as_bytes())
}

#[test]
fn a_head_is_parsed_or_refused_naming_what_is_wrong() {
    let h = head("POST /flows?x=1 HTTP/1.1\r\nHost: a\r\nContent-Length:  12 \r\nX-A:\tb");
    let Ok(h) = h else { panic!("{h:?}") };
    assert_eq!((h.method.as_str(), h.target.as_str(), h.http11), ("POST", "/flows?x=1", true));
    assert_eq!(h.header("content-length"), Some("12"));
    assert_eq!(h.header("x-a"), Some("b"));
    assert_eq!(h.body(), Ok(Body::Length(12)));
    assert!(!h.closes());
    let Ok(h) = head("GET / HTTP/1.0") else { panic!() };
    assert!(h.closes());
    let Ok(h) = head("GET / HTTP/1.1\r\nHost: a\r\nConnection: keep-alive, Close") else {
        panic!()
    };
    assert!(h.closes());
    for (raw, status, why) in [
        ("GET /", 400, "expected METHOD TARGET HTTP/1.1"),
        ("GET  / HTTP/1.1", 400, "expected METHOD TARGET"),
        ("GET / HTTP/2.0", 505, "expected HTTP/1.1 or HTTP/1.0"),
        ("GET flows HTTP/1.1", 400, "starting with /"),
        ("G(T / HTTP/1.1", 400, "bad method"),
        ("GET / HTTP/1.1\r\nNo colon", 400, "without a colon"),
        ("GET / HTTP/1.1\r\nA: b\r\n folded: c", 400, "bad header name"),
        ("GET / HTTP/1.1\r\nA: b\x01", 400, "control character"),
    ] {
        match head(raw) {
            Err((st, v)) => {
                assert_eq!(st, status, "{raw:?}");
                assert!(v["error"].as_str().is_some_and(|e| e.contains(why)), "{raw:?}: {v}");
            }
            Ok(h) => panic!("{raw:?} parsed: {h:?}"),
        }
    }
    assert_eq!(parse_head(b"GET / HTTP/1.1\r\nA: \xff").map_err(|e| e.0), Err(400));
}

#[test]
fn a_body_is_framed_as_the_rfc_says_or_refused() {
    let framing =
        |h: &str| head(&format!("POST / HTTP/1.1\r\nHost: a\r\n{h}")).and_then(|h| h.body());
    assert_eq!(framing("Content-Length: 5, 5"), Ok(Body::Length(5)));
    assert_eq!(framing("Transfer-Encoding: Chunked"), Ok(Body::Chunked));
    assert_eq!(framing("X: y"), Ok(Body::Length(0)));
    for (h, status) in [
        ("Content-Length: 5, 6", 400),
        ("Content-Length: +5", 400),
        ("Content-Length: 5\r\nContent-Length: 6", 400),
        ("Content-Length: 99999999999999999999999", 400),
        ("Transfer-Encoding: chunked\r\nContent-Length: 5", 400),
        ("Transfer-Encoding: gzip, chunked", 501),
    ] {
        assert_eq!(framing(h).map_err(|e| e.0), Err(status), "{h}");
    }
}

#[test]
fn a_chunked_body_is_decoded_whole_or_waited_for_or_refused() {
    let raw = b"5;ext=1\r\nhello\r\n6\r\n world\r\n0\r\nTrailer: x\r\n\r\nNEXT";
    let Ok(Some((body, used))) = dechunk(raw) else { panic!() };
    assert_eq!((body.as_slice(), &raw[used..]), (&b"hello world"[..], &b"NEXT"[..]));
    for cut in 0..raw.len() - 4 {
        assert!(matches!(dechunk(&raw[..cut]), Ok(None)), "{cut}");
    }
    // fed a byte at a time, going on from where it stopped: the same body, the same end
    let mut c = Chunks::default();
    let mut done = None;
    for n in 1..=raw.len() {
        if let Ok(Some(used)) = dechunk_more(&raw[..n], &mut c) {
            done = Some((n, used));
            break;
        }
    }
    assert_eq!(done, Some((raw.len() - 4, raw.len() - 4)));
    assert_eq!(c.body, b"hello world");
    assert!(matches!(dechunk(b"zz\r\n"), Err((400, _))));
    assert!(matches!(dechunk(b"2\r\nabc\r\n"), Err((400, _))));
    let big = format!("{:x}\r\n", MAX_BODY + 1);
    assert!(matches!(dechunk(big.as_bytes()), Err((413, _))));
    assert!(matches!(dechunk(&[b'1'; 2000]), Err((400, _))));
}

#[test]
fn held_requests_are_told_by_their_query() {
    assert_eq!(long_poll("GET", "/log?after=7&wait=500"), Some((7, Duration::from_millis(500))));
    assert_eq!(long_poll("GET", "/log/?wait=9000000"), Some((0, Duration::from_secs(60))));
    for (m, url) in [("GET", "/log?after=7"), ("GET", "/log?wait=0"), ("GET", "/log?wait=x")]
        .into_iter()
        .chain([("GET", "/log?after=x&wait=5"), ("POST", "/log?wait=5"), ("GET", "/logs?wait=5")])
    {
        assert_eq!(long_poll(m, url), None, "{m} {url}");
    }
    let held = applied_poll("GET", "/applied?flow=1&seq=2&wait=300");
    assert_eq!(held, Some(Duration::from_millis(300)));
    assert_eq!(applied_poll("GET", "/applied?flow=1&seq=2"), None);
    assert_eq!(applied_poll("GET", "/log?wait=300"), None);
}

#[test]
fn dates_are_written_as_http_says() {
    assert_eq!(http_date(0), "Thu, 01 Jan 1970 00:00:00 GMT");
    assert_eq!(http_date(784_111_777), "Sun, 06 Nov 1994 08:49:37 GMT"); // RFC 9110's
    assert_eq!(http_date(951_782_400), "Tue, 29 Feb 2000 00:00:00 GMT");
    assert_eq!(http_date(1_795_647_599), "Wed, 25 Nov 2026 22:59:59 GMT");
    assert_eq!(http_date(4_107_542_400), "Mon, 01 Mar 2100 00:00:00 GMT");
}

#[test]
fn empty_lines_before_a_request_are_skipped() {
    assert_eq!(head_end(b"\r\n\r\nGET / HTTP/1.1\r\n\r\nrest"), Some((4, 22)));
    assert_eq!(head_end(b"GET / HTTP/1.1\r\n"), None);
    // an end that straddles what was searched before is still found
    let raw = b"GET / HTTP/1.1\r\nA: b\r\n\r\n";
    for scanned in 0..raw.len() {
        assert_eq!(head_end_from(raw, scanned), Some((0, raw.len())), "{scanned}");
    }
}

#[test]
fn an_http_1_1_head_needs_one_host_and_may_give_an_absolute_target() {
    for raw in ["GET /x HTTP/1.1", "GET /x HTTP/1.1\r\nHost: a\r\nhost: b"] {
        match head(raw) {
            Err((400, v)) => assert_eq!(v["field"], "Host", "{raw:?}: {v}"),
            other => panic!("{raw:?}: {other:?}"),
        }
    }
    assert!(head("GET /x HTTP/1.0").is_ok());
    for (raw, target) in [
        ("GET http://a:1/flows?x=1 HTTP/1.1\r\nHost: a:1", "/flows?x=1"),
        ("GET HTTPS://a HTTP/1.1\r\nHost: a", "/"),
        ("GET http://a?x HTTP/1.1\r\nHost: a", "/?x"),
        ("GET http://a/health HTTP/1.0", "/health"),
    ] {
        let h = head(raw);
        assert_eq!(h.map(|h| h.target), Ok(target.to_owned()), "{raw:?}");
    }
    for raw in ["GET ftp://a/x HTTP/1.1\r\nHost: a", "GET http:/x HTTP/1.1\r\nHost: a"] {
        assert_eq!(head(raw).map_err(|e| e.0), Err(400), "{raw:?}");
    }
}

#[test]
fn a_chunked_body_s_framing_is_bounded_too() {
    // one-byte chunks with long extensions: little body, much framing
    let chunk = format!("1;{}\r\na\r\n", "e".repeat(1000));
    let raw = chunk.repeat(30_000);
    assert!(matches!(dechunk(raw.as_bytes()), Err((413, _))));
    // fed as it arrives: refused once the framing passes the bound, not at the end
    let mut c = Chunks::default();
    let mut refused = None;
    for n in (0..=raw.len()).step_by(16 * 1024) {
        if let Err((st, _)) = dechunk_more(&raw.as_bytes()[..n], &mut c) {
            refused = Some((st, n));
            break;
        }
    }
    let (st, n) = refused.unwrap();
    assert_eq!(st, 413);
    assert!(n <= MAX_CHUNKED + 16 * 1024, "{n}");
}
