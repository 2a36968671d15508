//! TLS for the service: a front that accepts TLS connections on the public address and relays
//! each one, decrypted, to the plain-HTTP server ([`crate::listen`]) on a loopback port.
//!
//! Why a front of our own rather than `tiny_http`'s TLS: with its OpenSSL backend the handshake
//! runs in the accepting thread, so one client that starts a handshake and goes quiet stops every
//! other accept; its rustls backend is rustls 0.20, which gets no security fixes. Here every
//! connection has its own thread from the first byte: the handshake must end within the I/O
//! timeout, and then one thread moves bytes both ways (`poll(2)` on the two sockets), so a slow
//! client holds only itself, as on the plain port. Each relayed connection comes from its own
//! loopback port, so the service still keeps one worker, and the order of answers, per client.
//!
//! A client speaking plain HTTP to the TLS port gets a plain `400` saying so, not a hang or a
//! reset. Certificates and keys are PEM files (`latnet-ctld --tls-cert FILE --tls-key FILE`);
//! rustls with the *ring* provider does the cryptography, TLS 1.2 and 1.3 only.

use crate::{ServeOptions, Service};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use rustls::{ServerConfig, ServerConnection};
use std::io::{ErrorKind, Read, Write};
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::os::fd::AsRawFd;
use std::path::Path;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Most connections the front relays at once; one more is closed as soon as it is accepted.
pub const MAX_CONNECTIONS: usize = 1024;

/// Bytes of the client's plaintext held for the service before the front stops reading it.
const HOLD: usize = 256 * 1024;

/// The server's TLS settings from a certificate chain and its private key, both PEM. Errors
/// name the flag, the file and what was expected.
pub fn server_config(cert: &Path, key: &Path) -> Result<Arc<ServerConfig>, String> {
    let c = cert.display();
    let certs = CertificateDer::pem_file_iter(cert)
        .and_then(Iterator::collect::<Result<Vec<_>, _>>)
        .map_err(|e| format!("--tls-cert {c}: {e} (expected PEM certificates)"))?;
    if certs.is_empty() {
        return Err(format!(
            "--tls-cert {c}: no certificate in it (expected a PEM 'BEGIN CERTIFICATE' block)"
        ));
    }
    let k = key.display();
    let key = PrivateKeyDer::from_pem_file(key).map_err(|e| {
        format!("--tls-key {k}: {e} (expected a PEM private key: PKCS#8, PKCS#1 or SEC1)")
    })?;
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let cfg = ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| e.to_string())?
        .with_no_client_auth()
        .with_single_cert(certs, key)
        .map_err(|e| format!("--tls-key {k}: does not serve the certificate of {c}: {e}"))?;
    Ok(Arc::new(cfg))
}

/// Where the service listens: its HTTP server and, with TLS, the public port of the TLS front
/// relaying to that server on a loopback port.
pub struct Endpoint {
    server: tiny_http::Server,
    front: Option<(TcpListener, Arc<ServerConfig>)>,
}

impl std::fmt::Debug for Endpoint {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Endpoint").field("url", &self.url()).finish_non_exhaustive()
    }
}

impl Endpoint {
    /// Listen on `addr` (port 0: one the system chooses): plain HTTP, or HTTPS with `tls`.
    pub fn open(
        addr: &str,
        opts: &ServeOptions,
        tls: Option<Arc<ServerConfig>>,
    ) -> Result<Endpoint, String> {
        let Some(cfg) = tls else {
            return Ok(Endpoint { server: crate::listen(addr, opts)?, front: None });
        };
        // the front's port first: a bad --listen is said before anything else listens
        let public = bind(addr)?;
        let server = crate::listen("127.0.0.1:0", opts).map_err(|e| format!("loopback: {e}"))?;
        Ok(Endpoint { server, front: Some((public, cfg)) })
    }

    /// The address clients reach: `http://ADDR:PORT` or `https://ADDR:PORT`.
    pub fn url(&self) -> String {
        let (scheme, addr) = match &self.front {
            Some((l, _)) => ("https", l.local_addr().ok()),
            None => ("http", self.server.server_addr().to_ip()),
        };
        format!("{scheme}://{}", addr.map_or_else(|| "?".into(), |a| a.to_string()))
    }

    /// Run `svc` here until `stop` returns true ([`crate::serve`], and the TLS front).
    pub fn run(self, svc: &mut Service, opts: ServeOptions, stop: impl Fn() -> bool + Sync) {
        let Endpoint { server, front: tls } = self;
        std::thread::scope(|scope| {
            if let (Some((public, cfg)), Some(backend)) = (tls, server.server_addr().to_ip()) {
                let (io_timeout, stop) = (opts.io_timeout, &stop);
                scope.spawn(move || front(public, backend, cfg, io_timeout, stop));
            }
            crate::serve(&server, svc, opts, &stop);
        });
    }
}

/// A socket listening on `addr` for [`front`].
pub fn bind(addr: &str) -> Result<TcpListener, String> {
    crate::http::bind(addr, Duration::from_millis(200))
}

/// Accept TLS connections on `listener` until `stop` returns true (checked every 200 ms) and
/// relay each one, decrypted, to `backend`. A handshake must end within `io_timeout`; a
/// client that stops reading (or a service that stops reading) for `io_timeout` is closed.
/// A connection that fails is said on standard error, one line each.
pub fn front(
    listener: TcpListener,
    backend: SocketAddr,
    cfg: Arc<ServerConfig>,
    io_timeout: Duration,
    stop: impl Fn() -> bool,
) {
    // Linux lets accept() time out like a read, so the loop sees `stop`
    let _ = socket2::SockRef::from(&listener).set_read_timeout(Some(Duration::from_millis(200)));
    let open = Arc::new(AtomicUsize::new(0));
    while !stop() {
        let (tcp, peer) = match listener.accept() {
            Ok(c) => c,
            Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => continue,
            Err(e) if e.kind() == ErrorKind::Interrupted => continue,
            Err(e) => {
                eprintln!("latnet-ctld: tls: accept: {e}");
                std::thread::sleep(Duration::from_millis(50));
                continue;
            }
        };
        if open.fetch_add(1, Ordering::AcqRel) >= MAX_CONNECTIONS {
            open.fetch_sub(1, Ordering::AcqRel);
            eprintln!("latnet-ctld: tls: {peer}: closed, {MAX_CONNECTIONS} connections are open");
            continue;
        }
        let (cfg, open2) = (cfg.clone(), open.clone());
        let started = std::thread::Builder::new().name("latnet-ctld-tls".into()).spawn(move || {
            if let Err(e) = relay(tcp, backend, cfg, io_timeout) {
                eprintln!("latnet-ctld: tls: {peer}: {e}");
            }
            open2.fetch_sub(1, Ordering::AcqRel);
        });
        if started.is_err() {
            open.fetch_sub(1, Ordering::AcqRel);
        }
    }
}

/// The answer to plain HTTP on the TLS port.
const PLAIN_HTTP: &str = "{\"error\": \"this port speaks HTTPS: use https://\"}";

/// One client: the handshake, then both directions until either side is done.
fn relay(
    mut tcp: TcpStream,
    backend: SocketAddr,
    cfg: Arc<ServerConfig>,
    io_timeout: Duration,
) -> Result<(), String> {
    let io = |e: std::io::Error| e.to_string();
    tcp.set_write_timeout(Some(io_timeout)).map_err(io)?;
    tcp.set_read_timeout(Some(io_timeout)).map_err(io)?;
    let _ = tcp.set_nodelay(true);
    let mut first = [0u8; 1];
    match tcp.peek(&mut first) {
        Ok(0) => return Ok(()), // a port scan, a health check of the TCP port
        Ok(_) => {}
        Err(e) => return Err(format!("before the handshake: {e}")),
    }
    if first[0] != 0x16 {
        // not a TLS handshake record
        if first[0].is_ascii_uppercase() {
            let _ = write!(
                tcp,
                "HTTP/1.1 400 Bad Request\r\nContent-Type: application/json\r\n\
                 Content-Length: {}\r\nConnection: close\r\n\r\n{PLAIN_HTTP}",
                PLAIN_HTTP.len()
            );
            // read what the client sent before closing: closing on unread bytes is a reset,
            // which can destroy the answer before the client reads it
            let _ = tcp.shutdown(Shutdown::Write);
            let _ = tcp.set_read_timeout(Some(io_timeout.min(Duration::from_secs(1))));
            let _ = std::io::copy(&mut (&tcp).take(64 * 1024), &mut std::io::sink());
            return Err("plain HTTP on the TLS port (answered 400)".into());
        }
        return Err(format!("not a TLS handshake (first byte {:#04x})", first[0]));
    }
    let mut conn = ServerConnection::new(cfg).map_err(|e| e.to_string())?;
    let deadline = Instant::now() + io_timeout;
    while conn.is_handshaking() {
        let left = deadline
            .checked_duration_since(Instant::now())
            .filter(|d| !d.is_zero())
            .ok_or_else(|| format!("handshake not done within {io_timeout:?}"))?;
        tcp.set_read_timeout(Some(left)).map_err(io)?;
        match conn.complete_io(&mut tcp) {
            Ok((0, 0)) => return Err("closed during the handshake".into()),
            Ok(_) => {}
            Err(e) => return Err(format!("handshake: {e}")),
        }
    }
    let back = TcpStream::connect_timeout(&backend, io_timeout)
        .map_err(|e| format!("the service at {backend}: {e}"))?;
    let _ = back.set_nodelay(true);
    pump(conn, tcp, back, io_timeout)
}

/// `poll(2)` on two descriptors (a negative one is skipped): how many have events.
#[allow(unsafe_code)]
fn poll2(fds: &mut [libc::pollfd; 2], timeout: Duration) -> std::io::Result<usize> {
    let ms = i32::try_from(timeout.as_millis()).unwrap_or(i32::MAX);
    // SAFETY: `fds` is a valid, exclusively borrowed array of two pollfd for the whole call.
    let n = unsafe { libc::poll(fds.as_mut_ptr(), 2, ms) };
    usize::try_from(n).map_err(|_| std::io::Error::last_os_error())
}

/// Move bytes between the TLS client and the service until the service has closed and all its
/// bytes reached the client, or either side fails or stalls for `idle`.
fn pump(
    mut conn: ServerConnection,
    mut tcp: TcpStream,
    mut back: TcpStream,
    idle: Duration,
) -> Result<(), String> {
    use libc::{POLLERR, POLLHUP, POLLIN, POLLOUT};
    let io = |e: std::io::Error| e.to_string();
    tcp.set_nonblocking(true).map_err(io)?;
    back.set_nonblocking(true).map_err(io)?;
    conn.set_buffer_limit(None); // we read the service only once all of it went out
    let mut to_back: Vec<u8> = Vec::new();
    let mut buf = vec![0u8; 16 * 1024];
    let (mut client_done, mut back_done, mut back_shut) = (false, false, false);
    let mut tcp_eof = false;
    loop {
        // the client's plaintext, also what came with the end of the handshake
        while !client_done && to_back.len() < HOLD {
            match conn.reader().read(&mut buf) {
                Ok(0) => client_done = true, // close_notify
                Ok(n) => to_back.extend_from_slice(&buf[..n]),
                Err(e) if e.kind() == ErrorKind::WouldBlock => break,
                Err(_) => client_done = true, // closed without close_notify
            }
        }
        if client_done && to_back.is_empty() && !back_shut {
            let _ = back.shutdown(Shutdown::Write);
            back_shut = true;
        }
        if back_done && !conn.wants_write() {
            return Ok(());
        }
        let mut tev = if conn.wants_write() { POLLOUT } else { 0 };
        if !client_done && !tcp_eof && conn.wants_read() && to_back.len() < HOLD {
            tev |= POLLIN;
        }
        let mut bev = if to_back.is_empty() { 0 } else { POLLOUT };
        if !back_done && !conn.wants_write() {
            bev |= POLLIN;
        }
        let fd = |s: &TcpStream, ev: i16| libc::pollfd {
            fd: if ev == 0 { -1 } else { s.as_raw_fd() },
            events: ev,
            revents: 0,
        };
        let mut fds = [fd(&tcp, tev), fd(&back, bev)];
        match poll2(&mut fds, idle) {
            Ok(0) if conn.wants_write() => {
                return Err(format!("the client read nothing for {idle:?}"))
            }
            Ok(0) if !to_back.is_empty() => {
                return Err(format!("the service read nothing for {idle:?}"))
            }
            Ok(_) => {}
            Err(e) if e.kind() == ErrorKind::Interrupted => continue,
            Err(e) => return Err(format!("poll: {e}")),
        }
        let (tr, br) = (fds[0].revents, fds[1].revents);
        if tr & (POLLIN | POLLHUP | POLLERR) != 0 && tev & POLLIN != 0 {
            match conn.read_tls(&mut tcp) {
                Ok(0) => tcp_eof = true, // the reader says whether it was a clean close
                Ok(_) => {
                    if let Err(e) = conn.process_new_packets() {
                        let _ = conn.write_tls(&mut tcp); // the alert, if it fits
                        return Err(e.to_string());
                    }
                }
                Err(e) if e.kind() == ErrorKind::WouldBlock => {}
                Err(e) => return Err(format!("from the client: {e}")),
            }
        }
        if br & (POLLOUT | POLLHUP | POLLERR) != 0 && bev & POLLOUT != 0 {
            match back.write(&to_back) {
                Ok(n) => drop(to_back.drain(..n)),
                Err(e) if e.kind() == ErrorKind::WouldBlock => {}
                Err(e) => return Err(format!("to the service: {e}")),
            }
        }
        if br & (POLLIN | POLLHUP | POLLERR) != 0 && bev & POLLIN != 0 {
            match back.read(&mut buf) {
                Ok(0) => {
                    back_done = true;
                    conn.send_close_notify();
                }
                Ok(n) => conn.writer().write_all(&buf[..n]).map_err(io)?,
                Err(e) if e.kind() == ErrorKind::WouldBlock => {}
                Err(e) => return Err(format!("from the service: {e}")),
            }
        }
        while conn.wants_write() {
            match conn.write_tls(&mut tcp) {
                Ok(_) => {}
                Err(e) if e.kind() == ErrorKind::WouldBlock => break,
                Err(e) => return Err(format!("to the client: {e}")),
            }
        }
    }
}
