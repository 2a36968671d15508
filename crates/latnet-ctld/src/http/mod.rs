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

mod parse;
#[cfg(test)]
mod tests;

pub(crate) use parse::{dechunk_more, head_end_from, parse_head, Body, Chunks, Head};
pub use parse::{read_request, ReadRequest};

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
