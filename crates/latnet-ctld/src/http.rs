//! The service on the network: an HTTP/1.1 server of our own whose clients cannot stall the
//! controller or each other.
//!
//! Three kinds of thread share the work:
//!
//! * the *controller* (the caller of [`serve`]) owns the [`Service`] and answers one request at
//!   a time from a channel; it never touches a socket;
//! * the *acceptor* takes each new connection and starts a thread for it (at most
//!   [`MAX_CONNECTIONS`] at once; one more is answered 503 and handed to the *closer*, one
//!   thread that reads and drops what such a client still sends, for at most
//!   [`REFUSED_LINGER`], before closing: closing on an unread request is a reset, which can
//!   destroy the 503 before the client reads it, or fail the client's write of its request;
//!   at most [`REFUSED_WAITING`] wait for it, beyond that one is closed at once);
//! * a *connection* thread does the TLS handshake, if any ([`crate::tls`]), then reads one
//!   request after the other (head, then body), passes each to the controller, waits for the
//!   reply and writes it, so the requests of one connection are answered in the order they
//!   were sent, and a client that sends ahead is simply not read until its earlier ones are
//!   answered (its bytes wait in the kernel, not in a queue of ours).
//!
//! Every read and write of a connection times out after [`ServeOptions::io_timeout`]; a
//! request's head and its body must each arrive whole within it (408 otherwise), and a
//! connection idle that long between requests is closed. A client that sends slowly, or
//! never, or does not read its answer, thus holds only its own thread, and only for that long.
//! A head larger than [`MAX_HEAD`] is answered 431, a body larger than [`MAX_BODY`] 413, a
//! malformed head 400 naming what is wrong; each closes the connection. Bodies come with
//! `Content-Length` or chunked; `Expect: 100-continue` is answered before the body is read.
//!
//! `GET /log?after=SEQ&wait=MS` is a long poll: when nothing was logged after `SEQ`, the
//! connection's thread (not the controller) waits up to `MS` ms (at most [`MAX_WAIT_MS`]) for
//! the next entry and then asks again, so a host agent learns of a decision as soon as it is
//! committed instead of at its next poll. `GET /applied?flow=ID&seq=SEQ&wait=MS` waits the same
//! way for another agent's step ([`crate::agents`]), asking again after every report.
//!
//! With [`ServeOptions::tokens`] a connection checks a request's token before reading its
//! body; a refused one reaches the controller only to be counted.

use crate::metrics::{self, Metrics};
use crate::{err, Reply, Service, Tokens, MAX_BODY};
use rustls::ServerConfig;
use std::io::{ErrorKind, Read, Write};
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream, ToSocketAddrs};
use std::sync::atomic::Ordering;
use std::sync::mpsc::{self, RecvTimeoutError, Sender, SyncSender};
use std::sync::{Arc, Condvar, Mutex, RwLock};
use std::time::{Duration, Instant};

/// Largest request head (request line and headers, bytes).
pub const MAX_HEAD: usize = 16 * 1024;

/// Most empty lines skipped before a request line.
const MAX_BLANK_LINES: usize = 64;

/// Most bytes a chunked body may take on the wire, framing (chunk sizes, extensions,
/// trailers) included: a few times [`MAX_BODY`], so that framing cannot make a client's
/// connection hold much more than a body (413 beyond).
const MAX_CHUNKED: usize = 4 * MAX_BODY;

/// Most connections served at once.
pub const MAX_CONNECTIONS: usize = 1024;

/// How long the closer reads what a connection refused for [`MAX_CONNECTIONS`] still sends.
pub const REFUSED_LINGER: Duration = Duration::from_millis(250);

/// How many refused connections may wait for the closer.
pub const REFUSED_WAITING: usize = 64;

/// How [`serve`] treats its clients.
#[derive(Debug, Clone)]
pub struct ServeOptions {
    /// Longest one read or write of a client's connection may wait, and longest a request's
    /// head, and then its body, may take to arrive whole (then 408). A connection idle for this
    /// long between requests is closed; a TLS handshake must end within it.
    pub io_timeout: Duration,
    /// The tokens requests must carry (`None`: anyone may ask anything), read afresh for every
    /// request, so a token taken out of them ([`Swap::set`]) is refused from the next request
    /// on, on connections already open too.
    pub tokens: Option<Swap<Tokens>>,
}

/// A setting the service reads afresh where it uses it, which may be replaced while the
/// service runs: `latnet-ctld` replaces its TLS settings and its tokens when it is sent SIGHUP.
/// Clones share the setting.
pub struct Swap<T>(Arc<RwLock<Arc<T>>>);

impl<T> Swap<T> {
    /// A setting starting as `v`.
    pub fn new(v: impl Into<Arc<T>>) -> Self {
        Swap(Arc::new(RwLock::new(v.into())))
    }

    /// The setting now (later replacements do not change what this returned).
    pub fn get(&self) -> Arc<T> {
        self.0.read().unwrap_or_else(std::sync::PoisonError::into_inner).clone()
    }

    /// Replace the setting for everyone sharing it.
    pub fn set(&self, v: impl Into<Arc<T>>) {
        *self.0.write().unwrap_or_else(std::sync::PoisonError::into_inner) = v.into();
    }
}

impl<T> Clone for Swap<T> {
    fn clone(&self) -> Self {
        Swap(self.0.clone())
    }
}

impl<T: std::fmt::Debug> std::fmt::Debug for Swap<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.get().fmt(f)
    }
}

impl Default for ServeOptions {
    fn default() -> Self {
        ServeOptions { io_timeout: Duration::from_secs(10), tokens: None }
    }
}

/// Where the service listens: a TCP socket, speaking HTTPS when it has a TLS configuration.
pub struct Endpoint {
    listener: TcpListener,
    /// Read for every new connection ([`Endpoint::tls`] replaces it).
    tls: Option<Swap<ServerConfig>>,
    metrics: Arc<Metrics>,
}

impl std::fmt::Debug for Endpoint {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Endpoint").field("url", &self.url()).finish_non_exhaustive()
    }
}

impl Endpoint {
    /// Listen on `addr` (`ADDR:PORT`; port 0: one the system chooses): plain HTTP, or HTTPS
    /// with `tls` ([`crate::tls::server_config`]).
    pub fn open(addr: &str, tls: Option<Arc<ServerConfig>>) -> Result<Endpoint, String> {
        use socket2::{Domain, Socket, Type};
        let sa: SocketAddr = addr
            .to_socket_addrs()
            .map_err(|e| e.to_string())?
            .next()
            .ok_or_else(|| format!("{addr:?} names no address"))?;
        let sock =
            Socket::new(Domain::for_address(sa), Type::STREAM, None).map_err(|e| e.to_string())?;
        sock.set_reuse_address(true)
            // Linux lets accept() time out like a read, so the acceptor sees `stop`
            .and_then(|()| sock.set_read_timeout(Some(Duration::from_millis(100))))
            .and_then(|()| sock.bind(&sa.into()))
            .and_then(|()| sock.listen(1024))
            .map_err(|e| e.to_string())?;
        let metrics = Arc::default();
        Ok(Endpoint { listener: sock.into(), tls: tls.map(Swap::new), metrics })
    }

    /// The TLS settings of an HTTPS endpoint (`None` for plain HTTP), shared: a replacement
    /// ([`Swap::set`]) serves every connection accepted after it; those open keep theirs.
    pub fn tls(&self) -> Option<Swap<ServerConfig>> {
        self.tls.clone()
    }

    /// Its network side's counters (`GET /metrics`), shared.
    pub fn metrics(&self) -> Arc<Metrics> {
        self.metrics.clone()
    }

    /// The address it listens on.
    pub fn local_addr(&self) -> Option<SocketAddr> {
        self.listener.local_addr().ok()
    }

    /// The address clients reach: `http://ADDR:PORT` or `https://ADDR:PORT`.
    pub fn url(&self) -> String {
        let scheme = if self.tls.is_some() { "https" } else { "http" };
        format!("{scheme}://{}", self.local_addr().map_or_else(|| "?".into(), |a| a.to_string()))
    }

    /// Run `svc` here until `stop` returns true ([`serve`]).
    pub fn run(self, svc: &mut Service, opts: ServeOptions, stop: impl Fn() -> bool + Sync) {
        serve(&self, svc, opts, stop);
    }
}

/// A plain-HTTP endpoint on `addr` ([`Endpoint::open`] without TLS).
pub fn listen(addr: &str) -> Result<Endpoint, String> {
    Endpoint::open(addr, None)
}

/// Longest a `GET /log` may wait for a new entry (`wait`, ms).
pub const MAX_WAIT_MS: u64 = 60_000;

/// The newest log entry's number and the agents' generation ([`Service::generation`]), for the
/// workers holding a long poll (and whether the service is stopping).
#[derive(Default)]
struct LogBell {
    state: Mutex<((i64, u64), bool)>,
    rung: Condvar,
}

impl LogBell {
    fn set(&self, now: (i64, u64), stopping: bool) {
        let mut s = self.state.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        if *s != (now, stopping) {
            *s = (now, stopping);
            self.rung.notify_all();
        }
    }

    fn now(&self) -> (i64, u64) {
        self.state.lock().unwrap_or_else(std::sync::PoisonError::into_inner).0
    }

    /// Wait until `done` holds for the state, the service stops, or `until`.
    fn wait_for(&self, done: impl Fn((i64, u64)) -> bool, until: Instant) {
        let mut s = self.state.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        while !done(s.0) && !s.1 {
            let Some(left) = until.checked_duration_since(Instant::now()) else { return };
            s = match self.rung.wait_timeout(s, left) {
                Ok((g, _)) => g,
                Err(p) => p.into_inner().0,
            };
        }
    }

    /// Wait until an entry after `after` is logged, the service stops, or `until`.
    fn wait(&self, after: i64, until: Instant) {
        self.wait_for(|(last, _)| last > after, until);
    }
}

/// The query of a `GET path?QUERY` as `(name, value)` pairs (`None` for another request).
fn get_query<'a>(method: &str, url: &'a str, path: &str) -> Option<Vec<(&'a str, &'a str)>> {
    let (p, query) = url.split_once('?')?;
    (method == "GET" && p.trim_end_matches('/') == path)
        .then(|| query.split('&').filter_map(|kv| kv.split_once('=')).collect())
}

/// The `wait` a held request asks for, at most [`MAX_WAIT_MS`] (`None`: 0, absent or bad,
/// which the service answers).
fn wait_of(query: &[(&str, &str)]) -> Option<Duration> {
    let ms = query.iter().find(|(k, _)| *k == "wait")?.1.parse::<u64>().ok()?;
    (ms > 0).then(|| Duration::from_millis(ms.min(MAX_WAIT_MS)))
}

/// How long a `GET /applied` asks to wait for its step (`None`: it does not, or its value is
/// bad, which the service answers).
fn applied_poll(method: &str, url: &str) -> Option<Duration> {
    wait_of(&get_query(method, url, "/applied")?)
}

/// `after` and `wait` of a `GET /log` that asks to wait (`None` otherwise; a bad value is left
/// for the service to answer 400).
fn long_poll(method: &str, url: &str) -> Option<(i64, Duration)> {
    let q = get_query(method, url, "/log")?;
    let after = match q.iter().find(|(k, _)| *k == "after") {
        Some((_, v)) => v.parse().ok()?,
        None => 0,
    };
    Some((after, wait_of(&q)?))
}

/// What a connection passes to the controller.
#[derive(Clone)]
enum Input {
    /// Method, URL and body.
    Ask(String, String, Vec<u8>),
    /// The reply the request's token earned (401, 403), to be counted.
    Denied(Reply),
}

/// A request on its way to the controller and where the answer goes.
struct Job {
    input: Input,
    reply: Sender<Reply>,
}

/// Run `svc` on `endpoint` until `stop` returns true (checked every 100 ms while idle).
/// Requests still in a connection when it stops are answered 503.
pub fn serve(
    endpoint: &Endpoint,
    svc: &mut Service,
    opts: ServeOptions,
    stop: impl Fn() -> bool + Sync,
) {
    let (jobs, inbox) = mpsc::channel::<Job>();
    let bell = Arc::new(LogBell::default());
    bell.set(svc.generation(), false);
    std::thread::scope(|scope| {
        let stop = &stop;
        let b = bell.clone();
        let (refused, to_close) = mpsc::sync_channel::<TcpStream>(REFUSED_WAITING);
        scope.spawn(move || to_close.iter().for_each(|tcp| drain(&tcp, REFUSED_LINGER)));
        scope.spawn(move || accept(endpoint, &jobs, &refused, &opts, &b, stop));
        while !stop() {
            match inbox.recv_timeout(Duration::from_millis(100)) {
                Ok(job) => {
                    let reply = match job.input {
                        Input::Ask(method, url, body) => svc.handle(&method, &url, &body),
                        Input::Denied(reply) => {
                            svc.note_denied();
                            reply
                        }
                    };
                    let _ = job.reply.send(reply);
                    bell.set(svc.generation(), false);
                }
                Err(RecvTimeoutError::Timeout) => {}
                Err(RecvTimeoutError::Disconnected) => break,
            }
        }
        bell.set(svc.generation(), true);
        // dropping `inbox` tells the connections waiting on it that the service has stopped
    });
}

/// Start a thread for every connection until `stop`.
fn accept(
    endpoint: &Endpoint,
    jobs: &Sender<Job>,
    refused: &SyncSender<TcpStream>,
    opts: &ServeOptions,
    bell: &Arc<LogBell>,
    stop: &(impl Fn() -> bool + Sync),
) {
    let m = &endpoint.metrics;
    while !stop() {
        let (tcp, peer) = match endpoint.listener.accept() {
            Ok(c) => c,
            Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => continue,
            Err(e) if e.kind() == ErrorKind::Interrupted => continue,
            Err(e) => {
                // out of descriptors, say; the connections queued meanwhile wait in the kernel
                eprintln!("latnet-ctld: accept: {e}");
                std::thread::sleep(Duration::from_millis(50));
                continue;
            }
        };
        let t = Some(opts.io_timeout);
        if tcp.set_read_timeout(t).and_then(|()| tcp.set_write_timeout(t)).is_err() {
            continue;
        }
        let _ = tcp.set_nodelay(true);
        m.accepted.fetch_add(1, Ordering::Relaxed);
        if m.open.fetch_add(1, Ordering::AcqRel) >= MAX_CONNECTIONS {
            m.open.fetch_sub(1, Ordering::AcqRel);
            m.refused.fetch_add(1, Ordering::Relaxed);
            let busy = err(503, None, format!("{MAX_CONNECTIONS} connections are open"));
            if endpoint.tls.is_none() {
                // said without waiting for the client (the acceptor must not stall); the
                // closer then reads what the client still sends, so the close is no reset
                let _ = tcp.set_write_timeout(Some(Duration::from_millis(100)));
                let _ = respond(&mut &tcp, m, "GET", busy, true);
                let _ = tcp.shutdown(Shutdown::Write);
                // a full queue: closed at once, at the risk of the reset
                let _ = refused.try_send(tcp);
            }
            continue;
        }
        let (jobs, opts, bell, tls) =
            (jobs.clone(), opts.clone(), bell.clone(), endpoint.tls.as_ref().map(Swap::get));
        let m2 = m.clone();
        let started =
            std::thread::Builder::new().name("latnet-ctld-conn".into()).spawn(move || {
                let client = Client { jobs: &jobs, opts: &opts, bell: &bell, metrics: &m2 };
                match tls {
                    None => {
                        client.talk(&tcp);
                        linger_close(&tcp);
                    }
                    Some(cfg) => {
                        let talk = |s: &mut _| client.talk(s);
                        let accepted = crate::tls::accept(tcp, cfg, opts.io_timeout, &m2, talk);
                        // counted as a failed handshake by `accept`
                        if let Err(e) = accepted {
                            eprintln!("latnet-ctld: tls: {peer}: {e}");
                        }
                    }
                }
                m2.open.fetch_sub(1, Ordering::AcqRel);
            });
        if started.is_err() {
            m.open.fetch_sub(1, Ordering::AcqRel);
        }
    }
}

/// Close `tcp` once the client had its chance to read what was written: read (and drop) what
/// it still sends for up to 500 ms first ([`drain`], as the closer does for a refused
/// connection), since closing on unread bytes is a reset, which can destroy the answer before
/// the client reads it.
pub(crate) fn linger_close(tcp: &TcpStream) {
    let _ = tcp.shutdown(Shutdown::Write);
    drain(tcp, Duration::from_millis(500));
}

/// Read and drop what the client of `tcp` (whose writing side is shut) sends until it closes,
/// for at most `linger` in all and 64 KiB, so that dropping `tcp` then closes it without a
/// reset: a client that trickles cannot hold the thread longer.
fn drain(tcp: &TcpStream, linger: Duration) {
    let until = Instant::now() + linger;
    let mut buf = [0u8; 4096];
    let mut left: usize = 64 * 1024;
    while left > 0 {
        let rest = until.saturating_duration_since(Instant::now());
        if rest.is_zero() || tcp.set_read_timeout(Some(rest)).is_err() {
            return;
        }
        match (&mut &*tcp).read(&mut buf) {
            Ok(0) => return,
            Ok(n) => left = left.saturating_sub(n),
            Err(e) if e.kind() == ErrorKind::Interrupted => {}
            Err(_) => return,
        }
    }
}

/// What a connection's thread needs.
struct Client<'a> {
    jobs: &'a Sender<Job>,
    opts: &'a ServeOptions,
    bell: &'a LogBell,
    metrics: &'a Metrics,
}

/// A request's head.
#[derive(Debug, PartialEq, Eq)]
pub(crate) struct Head {
    pub method: String,
    pub target: String,
    /// HTTP/1.1 (else 1.0)
    pub http11: bool,
    pub headers: Vec<(String, String)>,
}

/// How a request's body comes.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Body {
    Length(usize),
    Chunked,
}

impl Head {
    fn header(&self, name: &str) -> Option<&str> {
        self.headers.iter().find(|(k, _)| k.eq_ignore_ascii_case(name)).map(|(_, v)| v.as_str())
    }

    /// Whether the client asked to close after this request (or speaks HTTP/1.0 without
    /// keep-alive).
    fn closes(&self) -> bool {
        let has = |tok: &str| {
            self.headers
                .iter()
                .filter(|(k, _)| k.eq_ignore_ascii_case("connection"))
                .any(|(_, v)| v.split(',').any(|t| t.trim().eq_ignore_ascii_case(tok)))
        };
        if self.http11 {
            has("close")
        } else {
            !has("keep-alive")
        }
    }

    /// How the body comes; a 400 for a framing a server must not guess at (RFC 9112 6.3).
    pub(crate) fn body(&self) -> Result<Body, Reply> {
        let lengths: Vec<&str> = self
            .headers
            .iter()
            .filter(|(k, _)| k.eq_ignore_ascii_case("content-length"))
            .flat_map(|(_, v)| v.split(','))
            .map(str::trim)
            .collect();
        let te = self.header("transfer-encoding");
        match (te, lengths.as_slice()) {
            (Some(_), [_, ..]) => Err(err(
                400,
                Some("Transfer-Encoding"),
                "both Transfer-Encoding and Content-Length",
            )),
            (Some(t), []) if t.trim().eq_ignore_ascii_case("chunked") => Ok(Body::Chunked),
            (Some(t), []) => {
                Err(err(501, Some("Transfer-Encoding"), format!("expected chunked, got {t:?}")))
            }
            (None, []) => Ok(Body::Length(0)),
            (None, [first, rest @ ..]) => {
                let n = first
                    .parse::<usize>()
                    .ok()
                    .filter(|_| first.bytes().all(|b| b.is_ascii_digit()));
                match n {
                    Some(n) if rest.iter().all(|r| r == first) => Ok(Body::Length(n)),
                    _ => Err(err(
                        400,
                        Some("Content-Length"),
                        format!("expected one whole number, got {:?}", lengths.join(", ")),
                    )),
                }
            }
        }
    }
}

/// Parse a request head (without its final empty line).
pub(crate) fn parse_head(raw: &[u8]) -> Result<Head, Reply> {
    let bad = |field: Option<&str>, m: String| err(400, field, m);
    let text =
        std::str::from_utf8(raw).map_err(|_| bad(None, "the request head is not UTF-8".into()))?;
    let mut lines = text.split("\r\n");
    let line = lines.next().unwrap_or_default();
    let mut parts = line.split(' ');
    let (Some(method), Some(target), Some(version), None) =
        (parts.next(), parts.next(), parts.next(), parts.next())
    else {
        return Err(bad(None, format!("expected METHOD TARGET HTTP/1.1, got {line:?}")));
    };
    let token = |s: &str| {
        !s.is_empty()
            && s.bytes().all(|b| b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b))
    };
    if !token(method) {
        return Err(bad(None, format!("bad method {method:?}")));
    }
    if target.bytes().any(|b| b <= b' ' || b == 0x7f) {
        return Err(bad(None, format!("expected a path starting with /, got {target:?}")));
    }
    let target = origin_form(target).ok_or_else(|| {
        bad(None, format!("expected a path starting with / or an http URL, got {target:?}"))
    })?;
    let http11 = match version {
        "HTTP/1.1" => true,
        "HTTP/1.0" => false,
        v => {
            return Err(err(505, None, format!("expected HTTP/1.1 or HTTP/1.0, got {v:?}")));
        }
    };
    let mut headers = Vec::new();
    for l in lines {
        let Some((k, v)) = l.split_once(':') else {
            return Err(bad(None, format!("a header line without a colon: {l:?}")));
        };
        if !token(k) {
            // also a folded line (obs-fold), which RFC 9112 lets a server refuse
            return Err(bad(None, format!("bad header name {k:?}")));
        }
        if v.bytes().any(|b| (b < b' ' && b != b'\t') || b == 0x7f) {
            return Err(bad(Some(k), format!("a control character in header {k}")));
        }
        headers.push((k.to_owned(), v.trim_matches([' ', '\t']).to_owned()));
    }
    // RFC 9112 3.2: an HTTP/1.1 request without Host, or any with more than one, is a 400
    let hosts = headers.iter().filter(|(k, _)| k.eq_ignore_ascii_case("host")).count();
    if hosts > 1 || (http11 && hosts == 0) {
        let why = if hosts > 1 {
            "more than one Host header"
        } else {
            "an HTTP/1.1 request needs a Host header"
        };
        return Err(bad(Some("Host"), why.into()));
    }
    Ok(Head { method: method.to_owned(), target, http11, headers })
}

/// The path and query of a request target: an origin-form one (`/flows?x=1`) as it is, an
/// absolute-form one (`http://host:port/flows?x=1`, RFC 9112 3.2.2, which a server must take)
/// without its scheme and authority (`/` for an empty path); `None` for anything else.
fn origin_form(target: &str) -> Option<String> {
    if target.starts_with('/') {
        return Some(target.to_owned());
    }
    let (scheme, rest) = target.split_once("://")?;
    if !(scheme.eq_ignore_ascii_case("http") || scheme.eq_ignore_ascii_case("https")) {
        return None;
    }
    let end = rest.find(['/', '?']).unwrap_or(rest.len());
    let (authority, path) = rest.split_at(end);
    if authority.is_empty() {
        return None;
    }
    Some(if path.starts_with('/') { path.to_owned() } else { format!("/{path}") })
}

/// The end of the head in `buf` (the index after its empty line), skipping empty lines before
/// the request line (RFC 9112 2.2): `(start, end)`.
fn head_end(buf: &[u8]) -> Option<(usize, usize)> {
    head_end_from(buf, 0)
}

/// [`head_end`], knowing that the first `scanned` bytes hold no end (a head arriving in many
/// small reads is searched once, not again from its start at every read).
fn head_end_from(buf: &[u8], scanned: usize) -> Option<(usize, usize)> {
    let mut start = 0;
    while buf[start..].starts_with(b"\r\n") && start < 2 * MAX_BLANK_LINES {
        start += 2;
    }
    let from = start.max(scanned.saturating_sub(3)).min(buf.len());
    buf[from..].windows(4).position(|w| w == b"\r\n\r\n").map(|p| (start, from + p + 4))
}

/// How far [`dechunk_more`] got: the whole chunks decoded so far and where the next begins, so
/// a body arriving in many small reads is read once, not again from its start at every read.
#[derive(Debug, Default)]
pub(crate) struct Chunks {
    at: usize,
    body: Vec<u8>,
    trailers: bool,
}

/// Decode a chunked body from the start of `buf`: `Ok(Some((body, used)))` once whole,
/// `Ok(None)` while more bytes are needed, a 400 / 413 when it cannot be one.
pub(crate) fn dechunk(buf: &[u8]) -> Result<Option<(Vec<u8>, usize)>, Reply> {
    let mut c = Chunks::default();
    Ok(dechunk_more(buf, &mut c)?.map(|used| (c.body, used)))
}

/// [`dechunk`] going on from `c` (what an earlier call on the start of the same `buf` left):
/// the bytes used once the body is whole (it is then in `c`).
pub(crate) fn dechunk_more(buf: &[u8], c: &mut Chunks) -> Result<Option<usize>, Reply> {
    let bad = |m: &str| err(400, Some("Transfer-Encoding"), format!("bad chunked body: {m}"));
    let line_end = |at: usize| buf[at..].windows(2).position(|w| w == b"\r\n");
    // the body with its framing, whole or not, within MAX_CHUNKED
    let framing = || {
        err(
            413,
            None,
            format!("the chunked body takes more than {MAX_CHUNKED} bytes with its framing"),
        )
    };
    let more = || if buf.len() > MAX_CHUNKED { Err(framing()) } else { Ok(None) };
    while c.trailers {
        // trailers, then an empty line
        let Some(nl) = line_end(c.at) else {
            return if buf.len() - c.at > MAX_HEAD {
                Err(bad("trailers too long"))
            } else {
                more()
            };
        };
        c.at += nl + 2;
        if nl == 0 {
            return Ok(Some(c.at));
        }
    }
    loop {
        let at = c.at;
        if at > MAX_CHUNKED {
            return Err(framing());
        }
        let Some(nl) = line_end(at) else {
            return if buf.len() - at > 1024 {
                Err(bad("a chunk-size line too long"))
            } else {
                more()
            };
        };
        let line =
            std::str::from_utf8(&buf[at..at + nl]).map_err(|_| bad("a chunk size not UTF-8"))?;
        let hex = line.split(';').next().unwrap_or_default().trim();
        if hex.is_empty() || hex.len() > 8 || !hex.bytes().all(|b| b.is_ascii_hexdigit()) {
            return Err(bad(&format!("chunk size {hex:?}")));
        }
        let size =
            usize::from_str_radix(hex, 16).map_err(|_| bad(&format!("chunk size {hex:?}")))?;
        let data = at + nl + 2;
        if size == 0 {
            c.at = data;
            c.trailers = true;
            return dechunk_more(buf, c);
        }
        if c.body.len() + size > MAX_BODY {
            return Err(err(413, None, format!("the body is larger than {MAX_BODY} bytes")));
        }
        if buf.len() < data + size + 2 {
            return more();
        }
        if &buf[data + size..data + size + 2] != b"\r\n" {
            return Err(bad("a chunk longer than its size"));
        }
        c.body.extend_from_slice(&buf[data..data + size]);
        c.at = data + size + 2;
    }
}

/// A request as a connection reads it: the head found in `raw` (after empty lines), parsed, its
/// body framed and, when chunked, decoded from the bytes after the head. `Ok(None)` while the
/// head is not whole; the reply a client would get otherwise. (For the fuzz target: whatever the
/// bytes, an answer and never a panic.)
pub fn read_request(raw: &[u8]) -> Result<Option<ReadRequest>, Reply> {
    let Some((start, end)) = head_end(raw) else { return Ok(None) };
    if end - start > MAX_HEAD {
        return Err(err(431, None, format!("the request head is larger than {MAX_HEAD} bytes")));
    }
    let head = parse_head(&raw[start..end - 4])?;
    let rest = &raw[end..];
    let body = match head.body()? {
        Body::Length(n) if n > MAX_BODY => {
            return Err(err(413, None, format!("the body is larger than {MAX_BODY} bytes")));
        }
        Body::Length(n) => rest.get(..n).map(<[u8]>::to_vec),
        Body::Chunked => dechunk(rest)?.map(|(b, _)| b),
    };
    Ok(Some(ReadRequest { method: head.method, target: head.target, body }))
}

/// What [`read_request`] found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReadRequest {
    /// The method.
    pub method: String,
    /// The path and query.
    pub target: String,
    /// The body, once whole.
    pub body: Option<Vec<u8>>,
}

/// What a read that got nothing means.
enum Got {
    /// Bytes arrived.
    More,
    /// The client closed.
    Closed,
    /// The read timed out.
    Late,
}

/// Read more of `s` into `buf`.
fn fill(s: &mut impl Read, buf: &mut Vec<u8>) -> Got {
    let mut chunk = [0u8; 16 * 1024];
    loop {
        match s.read(&mut chunk) {
            Ok(0) => return Got::Closed,
            Ok(n) => {
                buf.extend_from_slice(&chunk[..n]);
                return Got::More;
            }
            Err(e) if e.kind() == ErrorKind::Interrupted => {}
            Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => {
                return Got::Late
            }
            Err(_) => return Got::Closed,
        }
    }
}

impl Client<'_> {
    /// Serve one connection until it closes, fails or idles.
    pub(crate) fn talk<S: Read + Write>(&self, mut s: S) {
        let timeout = self.opts.io_timeout;
        let late = |what: &str| {
            err(
                408,
                None,
                format!("the {what} did not arrive whole within {} s", timeout.as_secs_f64()),
            )
        };
        let mut buf: Vec<u8> = Vec::new();
        loop {
            // the head, whole within the timeout from its first byte, an empty line before it
            // included (the time a kept-alive connection sat idle before it does not count)
            let mut began = (!buf.is_empty()).then(Instant::now);
            let mut scanned = 0;
            let (start, end) = loop {
                let found = head_end_from(&buf, scanned);
                scanned = buf.len();
                if let Some((start, end)) = found.filter(|(s, e)| e - s <= MAX_HEAD) {
                    break (start, end);
                }
                if found.is_some() || buf.len() > MAX_HEAD + 2 * MAX_BLANK_LINES {
                    let r =
                        err(431, None, format!("the request head is larger than {MAX_HEAD} bytes"));
                    let _ = respond(&mut s, self.metrics, "GET", r, true);
                    return;
                }
                let got = fill(&mut s, &mut buf);
                if began.is_none() && !buf.is_empty() {
                    began = Some(Instant::now());
                }
                match (got, began) {
                    (Got::More, None) => {}
                    (Got::More, Some(t)) if t.elapsed() <= timeout => {}
                    (Got::Closed, _) => return,
                    (Got::Late, None) => return, // idle between requests: close quietly
                    (Got::More | Got::Late, Some(_)) => {
                        let _ = respond(&mut s, self.metrics, "GET", late("request head"), true);
                        return;
                    }
                }
            };
            let head = match parse_head(&buf[start..end - 4]) {
                Ok(h) => h,
                Err(r) => {
                    let _ = respond(&mut s, self.metrics, "GET", r, true);
                    return;
                }
            };
            buf.drain(..end);
            let closes = head.closes();
            let framing = match head.body() {
                Ok(Body::Length(n)) if n > MAX_BODY => {
                    let r = err(413, None, format!("the body is larger than {MAX_BODY} bytes"));
                    let _ = respond(&mut s, self.metrics, &head.method, r, true);
                    return;
                }
                Ok(f) => f,
                Err(r) => {
                    let _ = respond(&mut s, self.metrics, &head.method, r, true);
                    return;
                }
            };
            let wants_body = !matches!(framing, Body::Length(0));
            let allowed = self.opts.tokens.as_ref().map_or(Ok(()), |t| {
                t.get().check(&head.method, &head.target, head.header("Authorization"))
            });
            if let Err(reply) = allowed {
                // answered without reading a body, so a request with one ends the connection
                let reply = self.ask(Input::Denied(reply));
                let close = closes || wants_body;
                if respond(&mut s, self.metrics, &head.method, reply, close).is_err() || close {
                    return;
                }
                continue;
            }
            let expects =
                head.header("Expect").is_some_and(|v| v.eq_ignore_ascii_case("100-continue"));
            let go_on = b"HTTP/1.1 100 Continue\r\n\r\n";
            if wants_body
                && expects
                && head.http11
                && s.write_all(go_on).and_then(|()| s.flush()).is_err()
            {
                return;
            }
            // the body
            let started = Instant::now();
            let mut chunks = Chunks::default();
            let body = loop {
                let whole = match framing {
                    Body::Length(n) => (buf.len() >= n).then(|| (buf[..n].to_vec(), n)),
                    Body::Chunked => match dechunk_more(&buf, &mut chunks) {
                        Ok(done) => done.map(|used| (std::mem::take(&mut chunks.body), used)),
                        Err(r) => {
                            let _ = respond(&mut s, self.metrics, &head.method, r, true);
                            return;
                        }
                    },
                };
                if let Some((body, used)) = whole {
                    buf.drain(..used);
                    break body;
                }
                match fill(&mut s, &mut buf) {
                    Got::More if started.elapsed() <= timeout => {}
                    Got::Closed => return,
                    Got::More | Got::Late => {
                        let _ = respond(&mut s, self.metrics, &head.method, late("body"), true);
                        return;
                    }
                }
            };
            let sent = if matches!(head.method.as_str(), "GET" | "HEAD")
                && head.target.split('?').next().map(|p| p.trim_matches('/')) == Some("metrics")
            {
                self.metrics_text(&mut s, &head.method, closes)
            } else {
                let reply = self.answer(&head, body);
                respond(&mut s, self.metrics, &head.method, reply, closes)
            };
            if sent.is_err() || closes {
                return;
            }
        }
    }

    /// Answer `GET /metrics`: the controller's counters and the network side's, as text.
    fn metrics_text(&self, s: &mut impl Write, method: &str, close: bool) -> std::io::Result<()> {
        let stats = self.ask(Input::Ask("GET".into(), "/metrics".into(), Vec::new()));
        if stats.0 != 200 {
            return respond(s, self.metrics, method, stats, close);
        }
        // counted before it is written, so that it counts itself like every other answer
        self.metrics.answered(200);
        let text = metrics::render(&stats.1, self.metrics);
        let kind = "text/plain; version=0.0.4; charset=utf-8";
        send(s, method, 200, Some(kind), None, &text, close)
    }

    /// Pass `input` to the controller and wait for its reply.
    fn ask(&self, input: Input) -> Reply {
        let (reply, answer) = mpsc::channel();
        let stopped = || err(503, None, "the service is stopping");
        match self.jobs.send(Job { input, reply }) {
            Ok(()) => answer.recv().unwrap_or_else(|_| stopped()),
            Err(_) => stopped(),
        }
    }

    /// The controller's reply to a request, waited for as its long poll asks.
    fn answer(&self, head: &Head, body: Vec<u8>) -> Reply {
        let (method, url) = (head.method.as_str(), head.target.as_str());
        // a HEAD is answered at once ([`Service::handle`] answers it as GET): only a GET waits
        let input = Input::Ask(method.to_owned(), url.to_owned(), body);
        if let Some(wait) = applied_poll(method, url) {
            // ask until the step is done or the time asked is up, again after each change
            let until = Instant::now() + wait;
            loop {
                let seen = self.bell.now();
                let reply = self.ask(input.clone());
                if reply.0 != 200 || reply.1["done"] == true || Instant::now() >= until {
                    return reply;
                }
                self.bell.wait_for(|now| now != seen, until);
            }
        }
        let poll = long_poll(method, url);
        let reply = self.ask(input.clone());
        // nothing new yet: wait here for the next entry (or the time asked), then ask once more
        match poll {
            Some((after, wait))
                if reply.0 == 200 && reply.1["entries"].as_array().is_some_and(Vec::is_empty) =>
            {
                self.bell.wait(after, Instant::now() + wait);
                self.ask(input)
            }
            _ => reply,
        }
    }
}

/// The reason phrase of a status.
fn reason(status: u16) -> &'static str {
    match status {
        100 => "Continue",
        200 => "OK",
        201 => "Created",
        204 => "No Content",
        400 => "Bad Request",
        401 => "Unauthorized",
        403 => "Forbidden",
        404 => "Not Found",
        405 => "Method Not Allowed",
        408 => "Request Timeout",
        409 => "Conflict",
        410 => "Gone",
        413 => "Content Too Large",
        422 => "Unprocessable Content",
        431 => "Request Header Fields Too Large",
        500 => "Internal Server Error",
        501 => "Not Implemented",
        503 => "Service Unavailable",
        505 => "HTTP Version Not Supported",
        _ => "",
    }
}

/// `secs` after the Unix epoch as an HTTP date (RFC 9110 5.6.7: `Sun, 06 Nov 1994 08:49:37
/// GMT`), for the `Date` header an origin server with a clock must send.
fn http_date(secs: u64) -> String {
    const DAYS: [&str; 7] = ["Thu", "Fri", "Sat", "Sun", "Mon", "Tue", "Wed"];
    const MONTHS: [&str; 12] =
        ["Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"];
    let (days, rest) = (secs / 86_400, secs % 86_400);
    // the civil date of a day count (H. Hinnant's algorithm, from 0000-03-01)
    let z = days + 719_468;
    let (era, doe) = (z / 146_097, z % 146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + u64::from(month <= 2);
    format!(
        "{}, {day:02} {} {year} {:02}:{:02}:{:02} GMT",
        DAYS[(days % 7) as usize],
        MONTHS[(month - 1) as usize],
        rest / 3600,
        rest / 60 % 60,
        rest % 60
    )
}

/// Write `reply` in one write (a `HEAD` request gets no body); `close`: say so.
pub(crate) fn respond(
    s: &mut impl Write,
    metrics: &Metrics,
    method: &str,
    (status, body): Reply,
    close: bool,
) -> std::io::Result<()> {
    metrics.answered(status);
    let text =
        if body.is_null() || status == 204 { String::new() } else { body.to_string() + "\n" };
    let allow = body["allow"].as_str().filter(|_| status == 405);
    send(s, method, status, Some("application/json"), allow, &text, close)
}

/// Write an answer with body `text` of type `kind` (none if `text` is empty) and, for a 405,
/// the methods the resource `allow`s.
fn send(
    s: &mut impl Write,
    method: &str,
    status: u16,
    kind: Option<&str>,
    allow: Option<&str>,
    text: &str,
    close: bool,
) -> std::io::Result<()> {
    let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH);
    let date = http_date(now.map_or(0, |d| d.as_secs()));
    let mut out = format!("HTTP/1.1 {status} {}\r\nDate: {date}\r\n", reason(status));
    if let Some(kind) = kind.filter(|_| !text.is_empty()) {
        out += &format!("Content-Type: {kind}\r\n");
    }
    if let Some(allow) = allow {
        out += &format!("Allow: {allow}\r\n");
    }
    if status == 401 {
        out += "WWW-Authenticate: Bearer realm=\"latnet-ctld\"\r\n";
    }
    if close {
        out += "Connection: close\r\n";
    }
    if status != 204 {
        out += &format!("Content-Length: {}\r\n", text.len());
    }
    out += "\r\n";
    if method != "HEAD" {
        out += text;
    }
    // a client gone or not reading its answer (the write timed out) loses only that answer
    s.write_all(out.as_bytes())?;
    s.flush()
}

#[cfg(test)]
mod tests {
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
        assert_eq!(
            long_poll("GET", "/log?after=7&wait=500"),
            Some((7, Duration::from_millis(500)))
        );
        assert_eq!(long_poll("GET", "/log/?wait=9000000"), Some((0, Duration::from_secs(60))));
        for (m, url) in [("GET", "/log?after=7"), ("GET", "/log?wait=0"), ("GET", "/log?wait=x")]
            .into_iter()
            .chain([
                ("GET", "/log?after=x&wait=5"),
                ("POST", "/log?wait=5"),
                ("GET", "/logs?wait=5"),
            ])
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
}
