//! The service over TLS: it answers a client's requests in order, tells a plain-HTTP
//! client where it is, lets no stalled handshake hold up another client, presents the
//! certificate it was given, and refuses certificate files it cannot use, naming them.
//! Certificates are made by `scripts/tls-certs.sh` (the `openssl` command).

#![allow(clippy::unwrap_used)] // a test fails by panicking

mod common;
use common::{answers, Scratch};

use latnet_ctld::{tls, Endpoint, ServeOptions, Service, ServiceConfig, Swap};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, ServerName};
use serde_json::{json, Value};
use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

fn dir(name: &str) -> Scratch {
    Scratch::new("tls", name)
}

/// A CA and a service certificate it signed for 127.0.0.1 and localhost, in `d/name`
/// (`scripts/tls-certs.sh`): (CA certificate, service certificate, service key).
fn certs(d: &Path, name: &str) -> (PathBuf, PathBuf, PathBuf) {
    let out = d.join(name);
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../scripts/tls-certs.sh");
    let run = std::process::Command::new(script)
        .arg(&out)
        .output()
        .expect("scripts/tls-certs.sh (it needs the openssl command)");
    assert!(run.status.success(), "{}", String::from_utf8_lossy(&run.stderr));
    (out.join("ca.crt"), out.join("service.crt"), out.join("service.key"))
}

/// A service on an HTTPS port of 127.0.0.1: its address, the flag that stops it, its threads.
fn start(name: &str, io_timeout: Duration, cert: &Path, key: &Path) -> Running {
    start_with(name, io_timeout, cert, key, None, None)
}

/// [`start`], asking clients for a certificate `client_ca` signed (and none `crl` revokes).
fn start_with(
    name: &str,
    io_timeout: Duration,
    cert: &Path,
    key: &Path,
    client_ca: Option<&Path>,
    crl: Option<&Path>,
) -> Running {
    let svc = Service::open(
        &dir(&format!("{name}-db")).join("controller.db"),
        ServiceConfig::fat_tree(4, 8),
    )
    .unwrap();
    let opts = ServeOptions { io_timeout, tokens: None };
    let cfg = tls::server_config(cert, key, client_ca, crl).unwrap();
    let endpoint = Endpoint::open("127.0.0.1:0", Some(cfg)).unwrap();
    let tls = endpoint.tls().unwrap();
    let url = endpoint.url();
    let addr = url.strip_prefix("https://").unwrap().to_owned();
    let stop = Arc::new(AtomicBool::new(false));
    let s2 = stop.clone();
    let mut svc = svc;
    let t = std::thread::spawn(move || endpoint.run(&mut svc, opts, || s2.load(Ordering::Relaxed)));
    Running { addr, stop, thread: t, tls }
}

struct Running {
    addr: String,
    stop: Arc<AtomicBool>,
    thread: JoinHandle<()>,
    /// Its TLS settings, as SIGHUP replaces them.
    tls: Swap<rustls::ServerConfig>,
}

impl Running {
    fn end(self) {
        self.stop.store(true, Ordering::Relaxed);
        self.thread.join().unwrap();
    }
}

/// A client trusting the certificates in `ca`.
fn client(ca: &Path) -> Arc<rustls::ClientConfig> {
    client_with(ca, None)
}

/// [`client`], presenting the certificate and key `mine` when asked.
fn client_with(ca: &Path, mine: Option<(&Path, &Path)>) -> Arc<rustls::ClientConfig> {
    let mut roots = rustls::RootCertStore::empty();
    for c in CertificateDer::pem_file_iter(ca).unwrap() {
        roots.add(c.unwrap()).unwrap();
    }
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let cfg = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_root_certificates(roots);
    let cfg = match mine {
        None => cfg.with_no_client_auth(),
        Some((cert, key)) => {
            let chain = CertificateDer::pem_file_iter(cert).unwrap().map(Result::unwrap).collect();
            let key = rustls::pki_types::PrivateKeyDer::from_pem_file(key).unwrap();
            cfg.with_client_auth_cert(chain, key).unwrap()
        }
    };
    Arc::new(cfg)
}

/// `raw` sent over TLS to `addr`; everything the service sent back (it must close).
fn https(addr: &str, cfg: &Arc<rustls::ClientConfig>, raw: &str) -> std::io::Result<String> {
    let tcp = TcpStream::connect(addr)?;
    tcp.set_read_timeout(Some(Duration::from_secs(10)))?;
    let name = ServerName::try_from("127.0.0.1").unwrap();
    let conn = rustls::ClientConnection::new(cfg.clone(), name).unwrap();
    let mut s = rustls::StreamOwned::new(conn, tcp);
    s.write_all(raw.as_bytes())?;
    let mut out = String::new();
    s.read_to_string(&mut out)?;
    Ok(out)
}

/// `POST /flows` from the `i`-th host (of 16) to another.
fn post_flow(i: usize) -> String {
    let h = |i: usize| format!("h{}_{}_{}", (i / 4) % 4, (i / 2) % 2, i % 2);
    let body = json!({"src": h(i), "dst": h(i + 5), "rate_bps": 1_000_000,
                      "burst_bytes": 1500, "deadline_ns": 10_000_000u64})
    .to_string();
    format!("POST /flows HTTP/1.1\r\nHost: x\r\nContent-Length: {}\r\n\r\n{body}", body.len())
}

#[test]
fn requests_over_tls_are_answered_in_order_and_plain_http_is_told_where_it_is() {
    let d = dir("order");
    let (ca, cert, key) = certs(&d, "a");
    let svc = start("order", Duration::from_secs(5), &cert, &key);
    let cfg = client(&ca);
    // three requests in one write on one connection: answered in order
    let raw = format!(
        "{}GET /flows HTTP/1.1\r\nHost: x\r\n\r\nGET /health HTTP/1.1\r\nHost: x\r\n\
         Connection: close\r\n\r\n",
        post_flow(0)
    );
    let got = answers(&https(&svc.addr, &cfg, &raw).unwrap());
    assert_eq!(got.iter().map(|a| a.0).collect::<Vec<_>>(), [201, 200, 200], "{got:?}");
    let list: Value = serde_json::from_str(&got[1].1).unwrap();
    assert_eq!(list.as_array().map(Vec::len), Some(1), "the GET was answered before the POST");
    // an answer larger than a TLS record (64 flows: tens of kB) arrives whole
    let many: String = (1..64).map(post_flow).collect::<String>()
        + "GET /flows HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n";
    let got = answers(&https(&svc.addr, &cfg, &many).unwrap());
    let list: Value = serde_json::from_str(&got.last().unwrap().1).unwrap();
    let admitted = got.iter().filter(|a| a.0 == 201).count();
    assert_eq!(list.as_array().map(Vec::len), Some(1 + admitted), "{}", got.len());
    assert!(got.last().unwrap().1.len() > 16 * 1024, "{}", got.last().unwrap().1.len());
    // plain HTTP on the TLS port: a plain 400 saying so
    let mut s = TcpStream::connect(&svc.addr).unwrap();
    s.write_all(b"GET /health HTTP/1.1\r\nHost: x\r\n\r\n").unwrap();
    let mut out = String::new();
    s.read_to_string(&mut out).unwrap();
    let got = answers(&out);
    assert_eq!(got.first().map(|a| a.0), Some(400), "{out}");
    assert!(got[0].1.contains("https://"), "{out}");
    assert!(out.contains("\r\nDate: "), "{out}");
    // and it is counted as an answer like any other (and as a failed handshake)
    let raw = "GET /metrics HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n";
    let text = &answers(&https(&svc.addr, &cfg, raw).unwrap())[0].1;
    for line in [
        "latnet_ctld_responses_total{code=\"400\"} 1",
        "latnet_ctld_tls_handshake_failures_total{reason=\"plain_http\"} 1",
        "latnet_ctld_tls_handshake_failures_total{reason=\"peer_alert\"} 0",
    ] {
        assert!(text.lines().any(|l| l == line), "{line} not in\n{text}");
    }
    svc.end();
}

#[test]
fn a_stalled_handshake_holds_up_nobody_else_and_is_closed_in_time() {
    let d = dir("stall");
    let (ca, cert, key) = certs(&d, "a");
    let timeout = Duration::from_secs(2);
    let svc = start("stall", timeout, &cert, &key);
    let cfg = client(&ca);
    // a: the first bytes of a handshake record, then nothing
    let mut a = TcpStream::connect(&svc.addr).unwrap();
    a.write_all(&[0x16, 0x03, 0x01, 0x00]).unwrap();
    let a_sent = Instant::now();
    // b: connected, says nothing at all
    let b = TcpStream::connect(&svc.addr).unwrap();
    // meanwhile another client's handshake and request go through at once
    let t = Instant::now();
    let got = answers(
        &https(&svc.addr, &cfg, "GET /health HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
            .unwrap(),
    );
    assert_eq!(got.first().map(|a| a.0), Some(200), "{got:?}");
    assert!(t.elapsed() < timeout, "answered after {:?}, behind the stalled ones", t.elapsed());
    // a and b are closed once their time is up, not before
    for mut s in [a, b] {
        s.set_read_timeout(Some(timeout * 3)).unwrap();
        let mut rest = Vec::new();
        let _ = s.read_to_end(&mut rest);
        assert!(rest.is_empty(), "{rest:?}");
    }
    let waited = a_sent.elapsed();
    assert!(waited >= timeout && waited < timeout * 3, "closed after {waited:?}");
    svc.end();
}

#[test]
fn the_service_presents_its_certificate_and_another_ca_is_not_fooled() {
    let d = dir("ca");
    let (ca, cert, key) = certs(&d, "a");
    let (other_ca, _, _) = certs(&d, "b");
    let svc = start("ca", Duration::from_secs(5), &cert, &key);
    let ask = "GET /health HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n";
    let e = https(&svc.addr, &client(&other_ca), ask).unwrap_err();
    assert!(e.to_string().contains("invalid peer certificate"), "{e}");
    // the service is unharmed by the failed handshake
    let got = answers(&https(&svc.addr, &client(&ca), ask).unwrap());
    assert_eq!(got.first().map(|a| a.0), Some(200), "{got:?}");
    svc.end();
}

#[test]
fn certificate_files_it_cannot_use_are_refused_naming_the_flag_and_the_file() {
    let d = dir("files");
    let (_, cert, key) = certs(&d, "a");
    let (_, other_cert, other_key) = certs(&d, "b");
    let empty = d.join("empty.pem");
    std::fs::write(&empty, "").unwrap();
    let missing = d.join("missing.pem");
    let cases: [(&Path, &Path, &str, &Path, &str); 5] = [
        (&missing, &key, "--tls-cert", &missing, "No such file"),
        (&empty, &key, "--tls-cert", &empty, "no certificate"),
        (&cert, &empty, "--tls-key", &empty, "private key"),
        (&cert, &other_cert, "--tls-key", &other_cert, "private key"),
        (&cert, &other_key, "--tls-key", &other_key, "does not serve the certificate"),
    ];
    for (c, k, flag, file, why) in cases {
        let e = tls::server_config(c, k, None, None).unwrap_err();
        assert!(e.starts_with(&format!("{flag} {}", file.display())), "{e}");
        assert!(e.contains(why), "{e}");
    }
    assert!(tls::server_config(&cert, &key, None, None).is_ok());
    assert!(tls::server_config(&other_cert, &other_key, None, None).is_ok());
}

#[test]
fn with_a_client_ca_only_clients_presenting_a_certificate_it_signed_get_in() {
    let d = dir("mutual");
    let (ca, cert, key) = certs(&d, "a");
    let (other_ca, _, _) = certs(&d, "b");
    let svc = start_with("mutual", Duration::from_secs(5), &cert, &key, Some(&ca), None);
    let ask = "GET /health HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n";
    let (mine, my_key) = (d.join("a/client.crt"), d.join("a/client.key"));
    let got = answers(&https(&svc.addr, &client_with(&ca, Some((&mine, &my_key))), ask).unwrap());
    assert_eq!(got.first().map(|a| a.0), Some(200), "{got:?}");
    // no certificate, or one another CA signed: the handshake fails, nothing is answered
    let e = https(&svc.addr, &client(&ca), ask).unwrap_err();
    assert!(e.to_string().contains("CertificateRequired"), "{e}");
    let theirs = (d.join("b/client.crt"), d.join("b/client.key"));
    let e = https(&svc.addr, &client_with(&ca, Some((&theirs.0, &theirs.1))), ask).unwrap_err();
    assert!(e.to_string().contains("fatal alert"), "{e}");
    svc.end();
    // a client CA file it cannot use is refused naming the flag and the file
    let empty = d.join("empty.pem");
    std::fs::write(&empty, "").unwrap();
    let e = tls::server_config(&cert, &key, Some(&empty), None).unwrap_err();
    assert!(e.starts_with(&format!("--tls-client-ca {}: no usable certificate", empty.display())));
    assert!(tls::server_config(&cert, &key, Some(&other_ca), None).is_ok());
}

/// `scripts/tls-revoke.sh dir certs...`: the CA in `dir` revokes `certs`; its list, `dir/ca.crl`.
fn revoke(dir: &Path, certs: &[&Path]) -> PathBuf {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../scripts/tls-revoke.sh");
    let run = std::process::Command::new(script).arg(dir).args(certs).output().unwrap();
    assert!(run.status.success(), "{}", String::from_utf8_lossy(&run.stderr));
    dir.join("ca.crl")
}

#[test]
fn a_client_certificate_the_revocation_list_names_is_refused_once_the_list_is_reloaded() {
    let d = dir("crl");
    let (ca, cert, key) = certs(&d, "a");
    let (other_ca, _, _) = certs(&d, "b");
    // a second client of the same CA
    let (mine, my_key) = (d.join("a/client.crt"), d.join("a/client.key"));
    let (theirs, their_key) = (d.join("c/client.crt"), d.join("c/client.key"));
    std::fs::create_dir_all(d.join("c")).unwrap();
    let made = std::process::Command::new("openssl")
        .args(["req", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes"])
        .args(["-subj", "/CN=second client", "-x509", "-days", "1", "-CA"])
        .arg(d.join("a/ca.crt"))
        .arg("-CAkey")
        .arg(d.join("a/ca.key"))
        .args(["-addext", "basicConstraints=critical,CA:FALSE"])
        .args(["-addext", "extendedKeyUsage=clientAuth", "-keyout"])
        .arg(&their_key)
        .arg("-out")
        .arg(&theirs)
        .output()
        .unwrap();
    assert!(made.status.success(), "{}", String::from_utf8_lossy(&made.stderr));
    let crl = revoke(&d.join("a"), &[]);
    let svc = start_with("crl", Duration::from_secs(5), &cert, &key, Some(&ca), Some(&crl));
    let ask = "GET /health HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n";
    let get = |c: &Path, k: &Path| https(&svc.addr, &client_with(&ca, Some((c, k))), ask);
    for (c, k) in [(&mine, &my_key), (&theirs, &their_key)] {
        assert_eq!(answers(&get(c, k).unwrap()).first().map(|a| a.0), Some(200));
    }
    // the CA revokes the first client; the service reads the renewed list (as on SIGHUP)
    let crl = revoke(&d.join("a"), &[&mine]);
    svc.tls.set(tls::server_config(&cert, &key, Some(&ca), Some(&crl)).unwrap());
    let e = get(&mine, &my_key).unwrap_err();
    assert!(e.to_string().contains("CertificateRevoked"), "{e}");
    assert_eq!(answers(&get(&theirs, &their_key).unwrap()).first().map(|a| a.0), Some(200));
    // a list of another CA covers none of its clients: every one is refused
    let foreign = revoke(&d.join("b"), &[]);
    svc.tls.set(tls::server_config(&cert, &key, Some(&ca), Some(&foreign)).unwrap());
    let e = get(&theirs, &their_key).unwrap_err();
    assert!(e.to_string().contains("fatal alert"), "{e}");
    // both refusals are counted as the clients' certificates' (read with the list back)
    svc.tls.set(tls::server_config(&cert, &key, Some(&ca), Some(&crl)).unwrap());
    let ask = "GET /metrics HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n";
    let text =
        &answers(&https(&svc.addr, &client_with(&ca, Some((&theirs, &their_key))), ask).unwrap())
            [0]
        .1;
    let line = "latnet_ctld_tls_handshake_failures_total{reason=\"client_certificate\"} 2";
    assert!(text.lines().any(|l| l == line), "{line} not in\n{text}");
    svc.end();
    // a file with no list, or a list without a client CA, is refused naming the flag
    let e = tls::server_config(&cert, &key, Some(&ca), Some(&cert)).unwrap_err();
    assert!(e.starts_with(&format!("--tls-client-crl {}: no revocation list", cert.display())));
    let e = tls::server_config(&cert, &key, None, Some(&crl)).unwrap_err();
    assert!(e.contains("--tls-client-crl needs --tls-client-ca"), "{e}");
    assert!(tls::server_config(&cert, &key, Some(&other_ca), Some(&foreign)).is_ok());
}

/// The list of the CA in `dir` (after [`revoke`]) written again with `when` (`openssl ca
/// -gencrl` arguments) setting its update times; the file `dir/name`.
fn list_dated(dir: &Path, name: &str, when: &[&str]) -> PathBuf {
    let out = dir.join(name);
    let run = std::process::Command::new("openssl")
        .args(["ca", "-config"])
        .arg(dir.join("ca-revoke.cnf"))
        .arg("-keyfile")
        .arg(dir.join("ca.key"))
        .arg("-cert")
        .arg(dir.join("ca.crt"))
        .arg("-gencrl")
        .args(when)
        .arg("-out")
        .arg(&out)
        .output()
        .unwrap();
    assert!(run.status.success(), "{}", String::from_utf8_lossy(&run.stderr));
    out
}

#[test]
fn a_revocation_list_past_its_next_update_is_refused_and_one_that_passes_it_locks_clients_out() {
    let d = dir("crl-due");
    let (ca, cert, key) = certs(&d, "a");
    let (mine, my_key) = (d.join("a/client.crt"), d.join("a/client.key"));
    revoke(&d.join("a"), &[]);
    // due in 2020: refused when loaded, naming the file and the date
    let old = ["-crl_lastupdate", "20200101000000Z", "-crl_nextupdate", "20200102000000Z"];
    let stale = list_dated(&d.join("a"), "stale.crl", &old);
    let e = tls::server_config(&cert, &key, Some(&ca), Some(&stale)).unwrap_err();
    assert!(e.starts_with(&format!("--tls-client-crl {}: ", stale.display())), "{e}");
    assert!(e.contains("due for renewal at 2020-01-02 00:00:00 UTC"), "{e}");
    // due in 3 s: taken, and clients get in until then
    let short = list_dated(&d.join("a"), "short.crl", &["-crlsec", "3"]);
    let loaded = Instant::now();
    let svc = start_with("crl-due", Duration::from_secs(5), &cert, &key, Some(&ca), Some(&short));
    let ask = "GET /health HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n";
    let get = || https(&svc.addr, &client_with(&ca, Some((&mine, &my_key))), ask);
    let first = get();
    // (a slow machine may have taken the 3 s already; then only the refusal is checked)
    if loaded.elapsed() < Duration::from_secs(2) {
        assert_eq!(answers(&first.unwrap()).first().map(|a| a.0), Some(200));
    }
    std::thread::sleep(Duration::from_secs(4).saturating_sub(loaded.elapsed()));
    let e = get().unwrap_err();
    assert!(e.to_string().contains("fatal alert"), "{e}");
    // a renewed list (as on SIGHUP) lets them in again
    let renewed = revoke(&d.join("a"), &[]);
    svc.tls.set(tls::server_config(&cert, &key, Some(&ca), Some(&renewed)).unwrap());
    assert_eq!(answers(&get().unwrap()).first().map(|a| a.0), Some(200));
    svc.end();
}

/// One answer read from a kept-alive connection `s`: status and body.
fn answer(s: &mut impl Read) -> (u16, String) {
    let mut raw = Vec::new();
    let mut byte = [0u8; 1];
    while !raw.ends_with(b"\r\n\r\n") {
        s.read_exact(&mut byte).unwrap();
        raw.push(byte[0]);
    }
    let head = String::from_utf8(raw).unwrap();
    let len = head
        .lines()
        .find_map(|l| l.to_ascii_lowercase().strip_prefix("content-length:").map(str::to_owned))
        .map_or(0, |v| v.trim().parse::<usize>().unwrap());
    let mut body = vec![0u8; len];
    s.read_exact(&mut body).unwrap();
    (head.split_whitespace().nth(1).unwrap().parse().unwrap(), String::from_utf8(body).unwrap())
}

/// `GET /hosts` with `token`, on a connection that stays open.
fn hosts_with(token: &str) -> String {
    format!("GET /hosts HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {token}\r\n\r\n")
}

/// The status of `GET /hosts` with `token` on a new connection trusting `ca`.
fn status(addr: &str, ca: &Path, token: &str) -> std::io::Result<u16> {
    let raw = hosts_with(token).replace("\r\n\r\n", "\r\nConnection: close\r\n\r\n");
    Ok(answers(&https(addr, &client(ca), &raw)?).first().unwrap().0)
}

/// The `latnet-ctld` binary on a port of 127.0.0.1 with the TLS and token files given.
struct Daemon {
    child: std::process::Child,
    addr: String,
    stderr: std::io::Lines<std::io::BufReader<std::process::ChildStderr>>,
}

impl Daemon {
    fn start(d: &Path, cert: &Path, key: &Path, tokens: &Path) -> Daemon {
        Daemon::start_with(d, cert, key, tokens, &[])
    }

    /// [`Daemon::start`] with `more` arguments.
    fn start_with(d: &Path, cert: &Path, key: &Path, tokens: &Path, more: &[&Path]) -> Daemon {
        use std::io::BufRead;
        use std::process::{Command, Stdio};
        let mut child = Command::new(env!("CARGO_BIN_EXE_latnet-ctld"))
            .args(["--k", "4", "--listen", "127.0.0.1:0", "--stdin-stop", "--db"])
            .arg(d.join("controller.db"))
            .arg("--tls-cert")
            .arg(cert)
            .arg("--tls-key")
            .arg(key)
            .arg("--tokens")
            .arg(tokens)
            .args(more)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let mut line = String::new();
        std::io::BufReader::new(child.stdout.take().unwrap()).read_line(&mut line).unwrap();
        let addr = line.split_whitespace().nth(2).unwrap().strip_prefix("https://").unwrap();
        let stderr = std::io::BufReader::new(child.stderr.take().unwrap()).lines();
        Daemon { addr: addr.to_owned(), child, stderr }
    }

    /// Send SIGHUP; the line the daemon says about it.
    fn hangup(&mut self) -> String {
        let pid = self.child.id().to_string();
        let kill = std::process::Command::new("kill").args(["-HUP", &pid]).status().unwrap();
        assert!(kill.success());
        loop {
            let line = self.stderr.next().unwrap().unwrap();
            if line.contains("SIGHUP") {
                return line;
            }
        }
    }

    /// Close its standard input; it must stop by itself, successfully.
    fn end(mut self) {
        drop(self.child.stdin.take());
        assert!(self.child.wait().unwrap().success());
    }
}

#[test]
fn sighup_rereads_the_certificate_and_tokens_and_a_file_it_cannot_use_changes_nothing() {
    let d = dir("reload");
    let (ca_a, cert_a, key_a) = certs(&d, "a");
    let (ca_b, cert_b, key_b) = certs(&d, "b");
    let (cert, key, tokens) = (d.join("service.crt"), d.join("service.key"), d.join("tokens"));
    let (r1, r2, r3) = ("r1r1r1r1r1r1r1r1r1r1", "r2r2r2r2r2r2r2r2r2r2", "r3r3r3r3r3r3r3r3r3r3");
    std::fs::copy(&cert_a, &cert).unwrap();
    std::fs::copy(&key_a, &key).unwrap();
    std::fs::write(&tokens, format!("read {r1}\n")).unwrap();
    let mut daemon = Daemon::start(&d, &cert, &key, &tokens);
    let addr = daemon.addr.clone();
    assert_eq!(status(&addr, &ca_a, r1).unwrap(), 200);
    // a connection opened before the reload, kept alive across it
    let tcp = TcpStream::connect(&addr).unwrap();
    tcp.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    let name = ServerName::try_from("127.0.0.1").unwrap();
    let conn = rustls::ClientConnection::new(client(&ca_a), name).unwrap();
    let mut kept = rustls::StreamOwned::new(conn, tcp);
    kept.write_all(hosts_with(r1).as_bytes()).unwrap();
    assert_eq!(answer(&mut kept).0, 200);

    // renewed: B's certificate, r1 revoked for r2
    std::fs::copy(&cert_b, &cert).unwrap();
    std::fs::copy(&key_b, &key).unwrap();
    std::fs::write(&tokens, format!("read {r2}\n")).unwrap();
    let said = daemon.hangup();
    assert!(said.contains("reloaded 1 tokens from") && said.contains("service.crt"), "{said}");
    let e = status(&addr, &ca_a, r2).unwrap_err();
    assert!(e.to_string().contains("invalid peer certificate"), "{e}");
    assert_eq!(status(&addr, &ca_b, r2).unwrap(), 200);
    assert_eq!(status(&addr, &ca_b, r1).unwrap(), 401);
    // the open connection keeps its session but not the revoked token
    kept.write_all(hosts_with(r1).as_bytes()).unwrap();
    assert_eq!(answer(&mut kept).0, 401);
    kept.write_all(hosts_with(r2).as_bytes()).unwrap();
    assert_eq!(answer(&mut kept).0, 200);

    // a certificate it cannot use: neither it nor the new token file is taken
    std::fs::write(&cert, "not a certificate\n").unwrap();
    std::fs::write(&tokens, format!("read {r3}\n")).unwrap();
    let said = daemon.hangup();
    assert!(said.contains("kept the previous settings: --tls-cert"), "{said}");
    assert!(said.contains("service.crt"), "{said}");
    assert_eq!(status(&addr, &ca_b, r2).unwrap(), 200);
    assert_eq!(status(&addr, &ca_b, r3).unwrap(), 401);
    // nor a token file it cannot use
    std::fs::copy(&cert_a, &cert).unwrap();
    std::fs::write(&tokens, "reader r4r4r4r4r4r4r4r4r4r4\n").unwrap();
    let said = daemon.hangup();
    assert!(said.contains("kept the previous settings: --tokens"), "{said}");
    assert!(said.contains("tokens:1: expected the role"), "{said}");
    assert_eq!(status(&addr, &ca_b, r2).unwrap(), 200);
    // GET /metrics counted the reloads and the handshake A's client failed
    let raw = format!(
        "GET /metrics HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {r2}\r\n\
         Connection: close\r\n\r\n"
    );
    let text = &answers(&https(&addr, &client(&ca_b), &raw).unwrap())[0].1;
    for line in [
        "latnet_ctld_reloads_total{result=\"ok\"} 1",
        "latnet_ctld_reloads_total{result=\"failed\"} 2",
        // A's client refused B's certificate, with an alert
        "latnet_ctld_tls_handshake_failures_total{reason=\"peer_alert\"} 1",
        "latnet_ctld_tls_handshake_failures_total{reason=\"client_certificate\"} 0",
    ] {
        assert!(text.lines().any(|l| l == line), "{line} not in\n{text}");
    }
    daemon.end();
}

#[test]
fn when_the_revocation_lists_are_due_is_logged_and_in_the_metrics_and_follows_a_reload() {
    let d = dir("crl-due-metrics");
    let (ca, cert, key) = certs(&d, "a");
    let a = d.join("a");
    let (tokens, read) = (d.join("tokens"), "rrrrrrrrrrrrrrrrrrrr");
    std::fs::write(&tokens, format!("read {read}\n")).unwrap();
    revoke(&a, &[]);
    let dated = |name: &str, next: &str| {
        list_dated(&a, name, &["-crl_lastupdate", "20260101000000Z", "-crl_nextupdate", next])
    };
    let crl = d.join("in-use.crl");
    std::fs::copy(dated("first.crl", "20990101000000Z"), &crl).unwrap();
    let more = [Path::new("--tls-client-ca"), &ca, Path::new("--tls-client-crl"), &crl];
    let mut daemon = Daemon::start_with(&d, &cert, &key, &tokens, &more);
    let said = daemon.stderr.next().unwrap().unwrap();
    assert!(said.contains("due for renewal at 2099-01-01 00:00:00 UTC"), "{said}");
    let mine = client_with(&ca, Some((&a.join("client.crt"), &a.join("client.key"))));
    let raw = format!(
        "GET /metrics HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {read}\r\n\
         Connection: close\r\n\r\n"
    );
    let addr = daemon.addr.clone();
    let gauge = || {
        let text = &answers(&https(&addr, &mine, &raw).unwrap())[0].1;
        let name = "latnet_ctld_tls_client_crl_next_update_timestamp_seconds ";
        text.lines().find_map(|l| l.strip_prefix(name).map(str::to_owned))
    };
    // `date -u -d 2099-01-01 +%s`
    assert_eq!(gauge().as_deref(), Some("4070908800"));
    // renewed with an earlier next update (a CA that shortened its period): both follow
    std::fs::copy(dated("second.crl", "20980101000000Z"), &crl).unwrap();
    let said = daemon.hangup();
    assert!(said.contains("are due for renewal at 2098-01-01 00:00:00 UTC"), "{said}");
    assert!(!said.contains("warning"), "{said}");
    assert_eq!(gauge().as_deref(), Some("4039372800"));
    // one due in 2 days: warned of (the renewal is not happening)
    std::fs::copy(list_dated(&a, "third.crl", &["-crldays", "2"]), &crl).unwrap();
    let said = daemon.hangup();
    let want = format!("warning: the revocation lists {} are due for renewal at ", crl.display());
    assert!(said.contains(&want) && said.ends_with(", in 2 days"), "{said}");
    daemon.end();
}

#[test]
fn a_certificate_near_its_end_is_warned_of_and_its_expiry_is_in_the_metrics() {
    let d = dir("cert-expiry");
    let (cert, key, tokens) = (d.join("soon.crt"), d.join("soon.key"), d.join("tokens"));
    let read = "rrrrrrrrrrrrrrrrrrrr";
    std::fs::write(&tokens, format!("read {read}\n")).unwrap();
    // self-signed, for 127.0.0.1, valid 3 days from now
    let made = std::process::Command::new("openssl")
        .args(["req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1"])
        .args(["-nodes", "-days", "3", "-subj", "/CN=127.0.0.1"])
        .args(["-addext", "subjectAltName=IP:127.0.0.1"])
        .args(["-addext", "basicConstraints=critical,CA:FALSE", "-keyout"])
        .arg(&key)
        .arg("-out")
        .arg(&cert)
        .output()
        .unwrap();
    assert!(made.status.success(), "{}", String::from_utf8_lossy(&made.stderr));
    let started = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap();
    let mut daemon = Daemon::start(&d, &cert, &key, &tokens);
    let said = daemon.stderr.next().unwrap().unwrap();
    assert!(said.contains("warning: the certificate") && said.contains("soon.crt"), "{said}");
    assert!(said.contains("in 3 days"), "{said}");
    let raw = format!(
        "GET /metrics HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {read}\r\n\
         Connection: close\r\n\r\n"
    );
    let text = &answers(&https(&daemon.addr, &client(&cert), &raw).unwrap())[0].1;
    let name = "latnet_ctld_tls_certificate_not_after_timestamp_seconds ";
    let at = text.lines().find_map(|l| l.strip_prefix(name)).unwrap_or_else(|| panic!("{text}"));
    let at: u64 = at.parse().unwrap();
    // openssl counts the 3 days from when it signed, a moment before the service started
    let three_days = started.as_secs() + 3 * 86_400;
    assert!((three_days - 60..=three_days).contains(&at), "{at} against {three_days}");
    daemon.end();
}
