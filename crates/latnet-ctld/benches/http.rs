//! What a request to the service costs on loopback, in plain HTTP and over the TLS front:
//! `GET /health` on a kept-alive connection (one round trip through the controller thread),
//! and on a new connection each time (with TLS: a TLS 1.3 handshake, ECDSA P-256). The
//! certificates come from `scripts/tls-certs.sh` (the `openssl` command).

use criterion::{criterion_group, criterion_main, Criterion};
use latnet_ctld::{tls, Endpoint, ServeOptions, Service, ServiceConfig};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, ServerName};
use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

const ASK: &[u8] = b"GET /health HTTP/1.1\r\nHost: x\r\n\r\n";
const ASK_CLOSE: &[u8] = b"GET /health HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n";

/// Read one answer (head and `Content-Length` body) from `s`.
fn answer(s: &mut impl Read, buf: &mut Vec<u8>) {
    buf.clear();
    let mut chunk = [0u8; 4096];
    loop {
        let n = s.read(&mut chunk).expect("an answer");
        assert!(n > 0, "closed before the answer");
        buf.extend_from_slice(&chunk[..n]);
        if let Some(end) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            let head = String::from_utf8_lossy(&buf[..end]).to_ascii_lowercase();
            let len: usize = head
                .lines()
                .find_map(|l| l.strip_prefix("content-length:"))
                .map_or(0, |v| v.trim().parse().expect("a length"));
            if buf.len() >= end + 4 + len {
                assert!(head.starts_with("http/1.1 200"), "{head}");
                return;
            }
        }
    }
}

fn client(ca: &Path) -> Arc<rustls::ClientConfig> {
    let mut roots = rustls::RootCertStore::empty();
    for c in CertificateDer::pem_file_iter(ca).expect("the CA file") {
        roots.add(c.expect("a certificate")).expect("a root");
    }
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let cfg = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .expect("TLS versions")
        .with_root_certificates(roots)
        .with_no_client_auth();
    Arc::new(cfg)
}

fn bench(c: &mut Criterion) {
    let dir = std::env::temp_dir().join(format!("latnet-ctld-bench-http-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("temp dir");
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../scripts/tls-certs.sh");
    let made = std::process::Command::new(script).arg(dir.join("tls")).status();
    assert!(made.is_ok_and(|s| s.success()), "scripts/tls-certs.sh (openssl)");
    let tls_cfg =
        tls::server_config(&dir.join("tls/service.crt"), &dir.join("tls/service.key"), None, None)
            .expect("certificates");
    let stop = Arc::new(AtomicBool::new(false));
    let mut threads = Vec::new();
    let mut urls = Vec::new();
    for (name, tls_cfg) in [("plain", None), ("tls", Some(tls_cfg))] {
        let cfg = ServiceConfig::fat_tree(4, 8);
        let mut svc = Service::open(&dir.join(format!("{name}.db")), cfg).expect("store");
        let opts = ServeOptions::default();
        let ep = Endpoint::open("127.0.0.1:0", tls_cfg).expect("listening");
        urls.push(ep.url());
        let s = stop.clone();
        threads.push(std::thread::spawn(move || {
            ep.run(&mut svc, opts, || s.load(Ordering::Relaxed));
        }));
    }
    let plain = urls[0].trim_start_matches("http://").to_owned();
    let secure = urls[1].trim_start_matches("https://").to_owned();
    let cfg = client(&dir.join("tls/ca.crt"));
    let name = ServerName::try_from("127.0.0.1").expect("a name");
    let tls_conn = |addr: &str| {
        let tcp = TcpStream::connect(addr).expect("connect");
        tcp.set_nodelay(true).expect("nodelay");
        let conn = rustls::ClientConnection::new(cfg.clone(), name.clone()).expect("client");
        rustls::StreamOwned::new(conn, tcp)
    };
    let mut buf = Vec::new();
    let mut g = c.benchmark_group("service");
    g.bench_function("kept-alive GET /health, plain", |b| {
        let mut s = TcpStream::connect(&plain).expect("connect");
        s.set_nodelay(true).expect("nodelay");
        b.iter(|| {
            s.write_all(ASK).expect("ask");
            answer(&mut s, &mut buf);
        });
    });
    g.bench_function("kept-alive GET /health, TLS", |b| {
        let mut s = tls_conn(&secure);
        b.iter(|| {
            s.write_all(ASK).expect("ask");
            answer(&mut s, &mut buf);
        });
    });
    g.finish();
    // each new connection is read to its end, as a client of `Connection: close` does (a
    // client closing first leaves its port in TIME_WAIT, which loopback reuses at once, and a
    // SYN meeting the service's half-closed socket of the last round is refused)
    let mut g = c.benchmark_group("service");
    g.sample_size(10);
    g.warm_up_time(std::time::Duration::from_millis(300));
    g.measurement_time(std::time::Duration::from_secs(1));
    g.bench_function("new connection GET /health, TLS", |b| {
        b.iter(|| {
            let mut s = tls_conn(&secure);
            s.write_all(ASK_CLOSE).expect("ask");
            answer(&mut s, &mut buf);
            s.read_to_end(&mut buf).expect("the end");
        });
    });
    g.bench_function("new connection GET /health, plain", |b| {
        b.iter(|| {
            let mut s = TcpStream::connect(&plain).expect("connect");
            s.write_all(ASK_CLOSE).expect("ask");
            answer(&mut s, &mut buf);
            s.read_to_end(&mut buf).expect("the end");
        });
    });
    g.finish();
    stop.store(true, Ordering::Relaxed);
    for t in threads {
        let _ = t.join();
    }
    let _ = std::fs::remove_dir_all(&dir);
}

criterion_group!(benches, bench);
criterion_main!(benches);
