//! TLS for the service: its settings from PEM files, and a connection's handshake before the
//! connection's thread reads requests through it (`crate::http`).
//!
//! Why not `tiny_http`'s TLS (the server the service used before its own): with its OpenSSL
//! backend the handshake ran in the accepting thread, so one client that started a handshake
//! and went quiet stopped every other accept; its rustls backend is rustls 0.20, which gets no
//! security fixes. Here each connection has its own thread from the first byte, and its
//! handshake must end within the I/O timeout, so a slow client holds only itself, as on a plain
//! port. rustls 0.23 with the *ring* provider does the cryptography, TLS 1.2 and 1.3 only.
//!
//! A client speaking plain HTTP to the TLS port gets a plain `400` saying so, not a hang or a
//! reset (counted in `GET /metrics` as an answer, and as a failed handshake). Certificates and keys are PEM files (`latnet-ctld --tls-cert FILE --tls-key FILE`,
//! read again on SIGHUP: [`crate::Swap`];
//! `scripts/tls-certs.sh` makes a CA and a certificate it signed).

use crate::err;
use crate::http::{linger_close, respond};
use crate::metrics::{Failure, Metrics};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, CertificateRevocationListDer, PrivateKeyDer};
use rustls::{ServerConfig, ServerConnection, StreamOwned};
use std::net::TcpStream;
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

pub use latnet_wire::x509::{left, next_update, not_after, Due, Left, Reminder};

/// The server's TLS settings from a certificate chain and its private key, both PEM, and with
/// `client_ca` (PEM) clients must present a certificate that CA signed (mutual TLS; a client
/// without one fails the handshake). With `client_crl` (PEM certificate revocation lists, one
/// per CA of the chain: `scripts/tls-revoke.sh` makes the one of the CA `scripts/tls-certs.sh`
/// made) a client whose certificate, or a CA certificate of its chain, a list revokes fails the
/// handshake (alert `certificate_revoked`), and so does one whose certificates no list covers:
/// a list of another CA locks every client out. A list is good until its next update: one
/// past it is refused here, naming the date, and once a loaded list passes it every client
/// fails the handshake until a renewed list is read (SIGHUP), as RFC 5280 says a list is not
/// to be relied on after then. Errors name the flag, the file and what was expected.
pub fn server_config(
    cert: &Path,
    key: &Path,
    client_ca: Option<&Path>,
    client_crl: Option<&Path>,
) -> Result<Arc<ServerConfig>, String> {
    server_config_dated(cert, key, client_ca, client_crl).map(|(cfg, _)| cfg)
}

/// Now, in seconds since 1970-01-01 00:00:00 UTC (as [`Due::unix_secs`]).
pub fn unix_now() -> i64 {
    let now = SystemTime::now().duration_since(SystemTime::UNIX_EPOCH);
    now.map_or(0, |d| i64::try_from(d.as_secs()).unwrap_or(i64::MAX))
}

/// The dates of the files of a [`server_config`], for the log and `GET /metrics`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Dates {
    /// When the service's certificate (the first of the chain) expires (`None` if its
    /// validity could not be read); rustls does not refuse to serve an expired one, clients do.
    pub certificate: Option<Due>,
    /// When the first client revocation list is due for renewal (with `client_crl`).
    pub revocation: Option<Due>,
}

/// [`server_config`], and its files' [`Dates`].
pub fn server_config_dated(
    cert: &Path,
    key: &Path,
    client_ca: Option<&Path>,
    client_crl: Option<&Path>,
) -> Result<(Arc<ServerConfig>, Dates), String> {
    let mut dates = Dates::default();
    let certs = pem_certificates("--tls-cert", cert)?;
    dates.certificate = certs.first().and_then(|c| not_after(c));
    let (c, k) = (cert.display(), key.display());
    let key = pem_key("--tls-key", key)?;
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let builder = ServerConfig::builder_with_provider(provider.clone())
        .with_safe_default_protocol_versions()
        .map_err(|e| e.to_string())?;
    let builder = match client_ca {
        None if client_crl.is_some() => {
            return Err("--tls-client-crl needs --tls-client-ca (whose clients it revokes)".into())
        }
        None => builder.with_no_client_auth(),
        Some(ca) => {
            let bad = |m: String| format!("--tls-client-ca {}: {m}", ca.display());
            let roots = pem_roots("--tls-client-ca", ca)?;
            let mut verifier =
                rustls::server::WebPkiClientVerifier::builder_with_provider(roots.into(), provider);
            if let Some(crl) = client_crl {
                let (lists, first_due) = revocation_lists(crl, unix_now())?;
                dates.revocation = Some(first_due);
                verifier = verifier.with_crls(lists).enforce_revocation_expiration();
            }
            let verifier = verifier.build().map_err(|e| bad(e.to_string()))?;
            builder.with_client_cert_verifier(verifier)
        }
    };
    let cfg = builder
        .with_single_cert(certs, key)
        .map_err(|e| format!("--tls-key {k}: does not serve the certificate of {c}: {e}"))?;
    Ok((Arc::new(cfg), dates))
}

/// The certificates in the PEM file `path` (`flag`'s), at least one; errors begin with `flag
/// path:` and say what was expected.
fn pem_certificates(flag: &str, path: &Path) -> Result<Vec<CertificateDer<'static>>, String> {
    let certs = read_certificates(flag, path)?;
    if certs.is_empty() {
        return Err(format!(
            "{flag} {}: no certificate in it (expected a PEM 'BEGIN CERTIFICATE' block)",
            path.display()
        ));
    }
    Ok(certs)
}

/// The CA certificates in the PEM file `path` (`flag`'s) as trust roots, at least one usable.
fn pem_roots(flag: &str, path: &Path) -> Result<rustls::RootCertStore, String> {
    let mut roots = rustls::RootCertStore::empty();
    let (added, _) = roots.add_parsable_certificates(read_certificates(flag, path)?);
    if added == 0 {
        return Err(format!(
            "{flag} {}: no usable certificate in it (expected a PEM 'BEGIN CERTIFICATE' block)",
            path.display()
        ));
    }
    Ok(roots)
}

/// The private key in the PEM file `path` (`flag`'s): PKCS#8, PKCS#1 or SEC1.
fn pem_key(flag: &str, path: &Path) -> Result<PrivateKeyDer<'static>, String> {
    PrivateKeyDer::from_pem_file(path).map_err(|e| {
        format!(
            "{flag} {}: {e} (expected a PEM private key: PKCS#8, PKCS#1 or SEC1)",
            path.display()
        )
    })
}

fn read_certificates(flag: &str, path: &Path) -> Result<Vec<CertificateDer<'static>>, String> {
    CertificateDer::pem_file_iter(path)
        .and_then(Iterator::collect::<Result<Vec<_>, _>>)
        .map_err(|e| format!("{flag} {}: {e} (expected PEM certificates)", path.display()))
}

/// The certificate revocation lists in the PEM file `path` (`--tls-client-crl`), at least one,
/// each with a next update after `now` (seconds since 1970), and the earliest of those.
fn revocation_lists(
    path: &Path,
    now: i64,
) -> Result<(Vec<CertificateRevocationListDer<'static>>, Due), String> {
    let bad = |m: String| format!("--tls-client-crl {}: {m}", path.display());
    let crls = CertificateRevocationListDer::pem_file_iter(path)
        .and_then(Iterator::collect::<Result<Vec<_>, _>>)
        .map_err(|e| bad(format!("{e} (expected PEM certificate revocation lists)")))?;
    if crls.is_empty() {
        return Err(bad("no revocation list in it (expected a PEM 'BEGIN X509 CRL' block)".into()));
    }
    let mut first: Option<Due> = None;
    for (i, der) in crls.iter().enumerate() {
        let which = if crls.len() == 1 { "the list".to_owned() } else { format!("list {}", i + 1) };
        match next_update(der) {
            None => {
                return Err(bad(format!(
                    "{which} says no next update (expected a version 2 list with nextUpdate, as \
                     RFC 5280 requires)"
                )))
            }
            Some(Due { unix_secs, shown }) if unix_secs <= now => {
                return Err(bad(format!(
                    "{which} was due for renewal at {shown} (its next update); make a new one \
                     (scripts/tls-revoke.sh DIR), then start again or send SIGHUP"
                )))
            }
            Some(due) => {
                if first.as_ref().is_none_or(|f| due.unix_secs < f.unix_secs) {
                    first = Some(due);
                }
            }
        }
    }
    let first = first.unwrap_or(Due { unix_secs: 0, shown: String::new() }); // (crls is not empty)
    Ok((crls, first))
}

/// Do the TLS handshake on `tcp` (within `io_timeout`), let `talk` read and write through it,
/// then close it, saying so (`close_notify`). A plain-HTTP request is answered 400. Every `Err`
/// (why the connection ended before or during the handshake) is counted in `metrics` as a
/// failed handshake, by its [`Failure`], before anything is written, the 400 also as an answer.
pub(crate) fn accept(
    tcp: TcpStream,
    cfg: Arc<ServerConfig>,
    io_timeout: Duration,
    metrics: &Metrics,
    talk: impl FnOnce(&mut StreamOwned<ServerConnection, TcpStream>),
) -> Result<(), String> {
    let shaken = handshake(tcp, cfg, io_timeout, metrics).map_err(|(why, e)| {
        if why != Failure::PlainHttp {
            metrics.tls_failed(why);
        }
        e
    })?;
    let Some(mut s) = shaken else { return Ok(()) };
    talk(&mut s);
    s.conn.send_close_notify();
    let _ = s.conn.complete_io(&mut s.sock);
    linger_close(&s.sock);
    Ok(())
}

/// The handshake of [`accept`]: the stream, or `None` if the client closed before a byte;
/// a failure says why. A plain-HTTP one is counted here, before its 400 is written.
fn handshake(
    mut tcp: TcpStream,
    cfg: Arc<ServerConfig>,
    io_timeout: Duration,
    metrics: &Metrics,
) -> Result<Option<StreamOwned<ServerConnection, TcpStream>>, (Failure, String)> {
    let other = |e: std::io::Error| (Failure::Other, e.to_string());
    let mut first = [0u8; 1];
    match tcp.peek(&mut first) {
        Ok(0) => return Ok(None), // a port scan, a health check of the TCP port
        Ok(_) => {}
        Err(e) => return Err((Failure::Closed, format!("before the handshake: {e}"))),
    }
    if first[0] != 0x16 {
        // not a TLS handshake record
        if first[0].is_ascii_uppercase() {
            // counted here, before the answer, and not again by the caller
            metrics.tls_failed(Failure::PlainHttp);
            let reply = err(400, None, "this port speaks HTTPS: use https://");
            let _ = respond(&mut tcp, metrics, "GET", reply, true);
            linger_close(&tcp);
            return Err((Failure::PlainHttp, "plain HTTP on the TLS port (answered 400)".into()));
        }
        let why = format!("not a TLS handshake (first byte {:#04x})", first[0]);
        return Err((Failure::NotTls, why));
    }
    let mut conn = ServerConnection::new(cfg).map_err(|e| (Failure::Other, e.to_string()))?;
    let deadline = Instant::now() + io_timeout;
    let late = || (Failure::Timeout, format!("handshake not done within {io_timeout:?}"));
    while conn.is_handshaking() {
        let left = deadline
            .checked_duration_since(Instant::now())
            .filter(|d| !d.is_zero())
            .ok_or_else(late)?;
        tcp.set_read_timeout(Some(left)).map_err(other)?;
        match conn.complete_io(&mut tcp) {
            Ok((0, 0)) => return Err((Failure::Closed, "closed during the handshake".into())),
            Ok(_) => {}
            Err(e) => return Err((failure(&e), format!("handshake: {e}"))),
        }
    }
    tcp.set_read_timeout(Some(io_timeout)).map_err(other)?;
    Ok(Some(StreamOwned::new(conn, tcp)))
}

/// Why the handshake's I/O failed with `e`.
fn failure(e: &std::io::Error) -> Failure {
    use std::io::ErrorKind;
    match e.get_ref().and_then(|inner| inner.downcast_ref::<rustls::Error>()) {
        Some(
            rustls::Error::InvalidCertificate(_)
            | rustls::Error::NoCertificatesPresented
            | rustls::Error::InvalidCertRevocationList(_),
        ) => Failure::ClientCertificate,
        Some(rustls::Error::AlertReceived(_)) => Failure::PeerAlert,
        Some(_) => Failure::Other,
        None => match e.kind() {
            ErrorKind::WouldBlock | ErrorKind::TimedOut => Failure::Timeout,
            ErrorKind::ConnectionReset
            | ErrorKind::ConnectionAborted
            | ErrorKind::UnexpectedEof
            | ErrorKind::BrokenPipe => Failure::Closed,
            _ => Failure::Other,
        },
    }
}
