//! The service on the network: a `tiny_http` server whose clients cannot stall the controller.
//!
//! Three kinds of thread share the work:
//!
//! * the *controller* (the caller of [`serve`]) owns the [`Service`] and answers one request at
//!   a time from a channel; it never touches a socket;
//! * the *dispatcher* takes each request `tiny_http` has parsed the head of and hands it to the
//!   worker of its connection, starting one if there is none;
//! * a *worker* per connection reads a request's body, passes the request to the controller,
//!   waits for the reply and writes it, one request after the other, so that the requests of
//!   one connection are answered in the order they were sent.
//!
//! A client that sends its body slowly, or never, or does not read its answer, holds only its
//! own worker, and only for [`ServeOptions::io_timeout`]: the listening socket carries that
//! timeout for reads and writes (Linux copies it to every accepted socket), and a body must have
//! arrived whole within it (408 otherwise).
//!
//! `GET /log?after=SEQ&wait=MS` is a long poll: when nothing was logged after `SEQ`, the
//! connection's worker (not the controller) waits up to `MS` ms (at most [`MAX_WAIT_MS`]) for
//! the next entry and then asks again, so a host agent learns of a decision as soon as it is
//! committed instead of at its next poll. `GET /applied?flow=ID&seq=SEQ&wait=MS` waits the same
//! way for another agent's step ([`crate::agents`]), asking again after every report.
//!
//! With [`ServeOptions::tokens`] a worker checks a
//! request's token before reading its body; a refused one reaches the controller only to be
//! counted.

use crate::{err, Reply, Service, Tokens, MAX_BODY};
use std::collections::HashMap;
use std::io::ErrorKind;
use std::net::{SocketAddr, ToSocketAddrs};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError, Sender};
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

/// How [`serve`] treats its clients.
#[derive(Debug, Clone)]
pub struct ServeOptions {
    /// Longest one read or write of a client's connection may wait, and longest a request's
    /// body may take to arrive whole (then 408). A connection idle for this long is closed.
    pub io_timeout: Duration,
    /// The tokens requests must carry (`None`: anyone may ask anything).
    pub tokens: Option<Arc<Tokens>>,
}

impl Default for ServeOptions {
    fn default() -> Self {
        ServeOptions { io_timeout: Duration::from_secs(10), tokens: None }
    }
}

/// A server listening on `addr` (`ADDR:PORT`; port 0: one the system chooses) whose accepted
/// connections time out reads and writes after `opts.io_timeout`.
pub fn listen(addr: &str, opts: &ServeOptions) -> Result<tiny_http::Server, String> {
    let listener = bind(addr, opts.io_timeout)?;
    tiny_http::Server::from_listener(listener, None).map_err(|e| e.to_string())
}

/// A socket listening on `addr` whose reads and writes (and, on Linux, those of the sockets it
/// accepts) time out after `timeout`.
pub(crate) fn bind(addr: &str, timeout: Duration) -> Result<std::net::TcpListener, String> {
    use socket2::{Domain, Socket, Type};
    let sa: SocketAddr = addr
        .to_socket_addrs()
        .map_err(|e| e.to_string())?
        .next()
        .ok_or_else(|| format!("{addr:?} names no address"))?;
    let sock =
        Socket::new(Domain::for_address(sa), Type::STREAM, None).map_err(|e| e.to_string())?;
    let t = Some(timeout);
    sock.set_reuse_address(true)
        .and_then(|()| sock.set_nodelay(true))
        .and_then(|()| sock.set_read_timeout(t))
        .and_then(|()| sock.set_write_timeout(t))
        .and_then(|()| sock.bind(&sa.into()))
        .and_then(|()| sock.listen(128))
        .map_err(|e| e.to_string())?;
    Ok(sock.into())
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

/// How long a `GET /applied` asks to wait for its step (`None`: it does not, or its value is
/// bad, which the service answers).
fn applied_poll(method: &str, url: &str) -> Option<Duration> {
    let (path, query) = url.split_once('?')?;
    if method != "GET" || path.trim_end_matches('/') != "/applied" {
        return None;
    }
    let wait = query.split('&').find_map(|kv| kv.strip_prefix("wait="))?.parse::<u64>().ok()?;
    (wait > 0).then(|| Duration::from_millis(wait.min(MAX_WAIT_MS)))
}

/// `after` and `wait` of a `GET /log` that asks to wait (`None` otherwise; a bad value is left
/// for the service to answer 400).
fn long_poll(method: &str, url: &str) -> Option<(i64, Duration)> {
    let (path, query) = url.split_once('?')?;
    if method != "GET" || path.trim_end_matches('/') != "/log" {
        return None;
    }
    let (mut after, mut wait) = (0i64, 0u64);
    for kv in query.split('&') {
        match kv.split_once('=') {
            Some(("after", v)) => after = v.parse().ok()?,
            Some(("wait", v)) => wait = v.parse().ok()?,
            _ => {}
        }
    }
    (wait > 0).then(|| (after, Duration::from_millis(wait.min(MAX_WAIT_MS))))
}

/// What a worker passes to the controller.
#[derive(Clone)]
enum Input {
    /// Method, URL and body.
    Ask(String, String, Vec<u8>),
    /// The reply the request's body earned (408, 413, 400).
    Refused(Reply),
    /// The reply the request's token earned (401, 403), to be counted.
    Denied(Reply),
}

/// A request on its way to the controller and where the answer goes.
struct Job {
    input: Input,
    reply: Sender<Reply>,
}

/// The workers' queues by connection (`None`: a connection without a peer address).
type Workers = Arc<Mutex<HashMap<Option<SocketAddr>, Sender<tiny_http::Request>>>>;

/// Run `svc` on `server` until `stop` returns true (checked every 100 ms while idle). Requests
/// still in a worker when it stops are answered 503.
pub fn serve(
    server: &tiny_http::Server,
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
        scope.spawn(move || dispatch(server, &jobs, opts, &b, stop));
        while !stop() {
            match inbox.recv_timeout(Duration::from_millis(100)) {
                Ok(job) => {
                    let reply = match job.input {
                        Input::Ask(method, url, body) => svc.handle(&method, &url, &body),
                        Input::Refused(reply) => reply,
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
        // dropping `inbox` tells the workers waiting on it that the service has stopped
    });
}

/// Hand every request to its connection's worker until `stop`.
fn dispatch(
    server: &tiny_http::Server,
    jobs: &Sender<Job>,
    opts: ServeOptions,
    bell: &Arc<LogBell>,
    stop: &(impl Fn() -> bool + Sync),
) {
    let workers: Workers = Arc::default();
    while !stop() {
        let req = match server.recv_timeout(Duration::from_millis(100)) {
            Ok(Some(r)) => r,
            Ok(None) => continue,
            Err(_) => break,
        };
        let conn = req.remote_addr().copied();
        let mut map = workers.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        // a worker takes itself out of the map (under the lock) before it ends, so a queue in
        // the map has a worker reading it
        let req = match map.get(&conn) {
            Some(queue) => match queue.send(req) {
                Ok(()) => continue,
                Err(mpsc::SendError(r)) => r,
            },
            None => req,
        };
        let (queue, rx) = mpsc::channel();
        let (jobs, workers2, opts, bell) =
            (jobs.clone(), workers.clone(), opts.clone(), bell.clone());
        let started = std::thread::Builder::new()
            .name("latnet-ctld-conn".into())
            .spawn(move || work(conn, &rx, &jobs, &workers2, &opts, &bell));
        if started.is_ok() && queue.send(req).is_ok() {
            map.insert(conn, queue);
        }
        // if no thread could be started the request is dropped, which tiny_http answers 500
    }
}

/// One connection's worker: its requests in order, until none came for a second.
fn work(
    conn: Option<SocketAddr>,
    rx: &Receiver<tiny_http::Request>,
    jobs: &Sender<Job>,
    workers: &Workers,
    opts: &ServeOptions,
    bell: &LogBell,
) {
    loop {
        let mut req = match rx.recv_timeout(Duration::from_secs(1)) {
            Ok(r) => r,
            Err(RecvTimeoutError::Disconnected) => return,
            Err(RecvTimeoutError::Timeout) => {
                let mut map = workers.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
                match rx.try_recv() {
                    Ok(r) => r,
                    Err(_) => {
                        map.remove(&conn);
                        return;
                    }
                }
            }
        };
        let method = req.method().as_str().to_owned();
        let url = req.url().to_owned();
        let allowed = opts.tokens.as_ref().map_or(Ok(()), |t| {
            let auth = req.headers().iter().find(|h| h.field.equiv("Authorization"));
            t.check(&method, &url, auth.map(|h| h.value.as_str()))
        });
        let input = match allowed {
            Err(reply) => Input::Denied(reply),
            Ok(()) => match read_body(&mut req, opts.io_timeout) {
                Ok(body) => Input::Ask(method, url, body),
                Err(reply) => Input::Refused(reply),
            },
        };
        let poll = match &input {
            Input::Ask(method, url, _) => long_poll(method, url),
            _ => None,
        };
        let ask = |input: Input| {
            let (reply, answer) = mpsc::channel();
            let stopped = || err(503, None, "the service is stopping");
            match jobs.send(Job { input, reply }) {
                Ok(()) => answer.recv().unwrap_or_else(|_| stopped()),
                Err(_) => stopped(),
            }
        };
        let applied = match &input {
            Input::Ask(method, url, _) => applied_poll(method, url),
            _ => None,
        };
        if let Some(wait) = applied {
            // ask until the step is done or the time asked is up, again after each change
            let until = Instant::now() + wait;
            loop {
                let seen = bell.now();
                let reply = ask(input.clone());
                if reply.0 != 200 || reply.1["done"] == true || Instant::now() >= until {
                    respond(req, reply);
                    break;
                }
                bell.wait_for(|now| now != seen, until);
            }
            continue;
        }
        let again = poll.map(|_| input.clone());
        let mut reply = ask(input);
        // nothing new yet: wait here for the next entry (or the time asked), then ask once more
        if let (Some((after, wait)), Some(again)) = (poll, again) {
            if reply.0 == 200 && reply.1["entries"].as_array().is_some_and(Vec::is_empty) {
                bell.wait(after, Instant::now() + wait);
                reply = ask(again);
            }
        }
        respond(req, reply);
    }
}

fn respond(req: tiny_http::Request, (status, body): Reply) {
    let text = if body.is_null() { String::new() } else { body.to_string() + "\n" };
    let mut resp = tiny_http::Response::from_string(text).with_status_code(status);
    if !body.is_null() {
        if let Ok(h) = tiny_http::Header::from_bytes("Content-Type", "application/json") {
            resp = resp.with_header(h);
        }
    }
    if status == 401 {
        if let Ok(h) =
            tiny_http::Header::from_bytes("WWW-Authenticate", "Bearer realm=\"latnet-ctld\"")
        {
            resp = resp.with_header(h);
        }
    }
    // a client gone or not reading its answer (the write timed out) loses only that answer
    let _ = req.respond(resp);
}

/// The request's body, whole within `timeout`: 413 if larger than [`MAX_BODY`], 408 if it did
/// not arrive in time, 400 if the connection failed.
fn read_body(req: &mut tiny_http::Request, timeout: Duration) -> Result<Vec<u8>, Reply> {
    let too_big = || err(413, None, format!("the body is larger than {MAX_BODY} bytes"));
    if req.body_length().is_some_and(|n| n > MAX_BODY) {
        return Err(too_big());
    }
    let late = || {
        err(408, None, format!("the body did not arrive whole within {} s", timeout.as_secs_f64()))
    };
    let start = Instant::now();
    let reader = req.as_reader();
    let mut body = Vec::new();
    let mut chunk = [0u8; 8192];
    loop {
        match reader.read(&mut chunk) {
            Ok(0) => return Ok(body),
            Ok(n) => {
                body.extend_from_slice(&chunk[..n]);
                if body.len() > MAX_BODY {
                    return Err(too_big());
                }
                if start.elapsed() > timeout {
                    return Err(late());
                }
            }
            Err(e) if e.kind() == ErrorKind::Interrupted => {}
            Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => {
                return Err(late())
            }
            Err(e) => return Err(err(400, None, format!("the body could not be read: {e}"))),
        }
    }
}

#[cfg(test)]
mod tests {
    /// `tiny_http` never sets `TCP_NODELAY`; it writes an answer's head and body apart, so with
    /// Nagle a keep-alive client waited for its delayed ACK (40 ms) on every request. The
    /// listener carries the option and Linux copies it to every socket it accepts.
    #[test]
    fn accepted_connections_send_without_nagle() {
        let Ok(l) = super::bind("127.0.0.1:0", std::time::Duration::from_secs(1)) else {
            panic!("no listener")
        };
        let Ok(addr) = l.local_addr() else { panic!("no address") };
        let Ok(_c) = std::net::TcpStream::connect(addr) else { panic!("no connection") };
        let Ok((s, _)) = l.accept() else { panic!("nothing accepted") };
        assert!(matches!(s.nodelay(), Ok(true)));
    }
}
