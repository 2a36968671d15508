//! Unit tests of the agent's pieces that need no kernel.

use super::*;
use std::net::Ipv4Addr;

fn book() -> AddressBook {
    let mut b = BTreeMap::new();
    b.insert(
        "h3".to_owned(),
        vec![
            IpAddr::V4(Ipv4Addr::new(10, 0, 0, 7)),
            "2001:db8::a00:7".parse().unwrap_or(IpAddr::V4(Ipv4Addr::UNSPECIFIED)),
        ],
    );
    b
}

fn flow() -> Value {
    json!({"id": 4, "src": "h2", "dst": "h3", "rate_bps": 40_000_000, "burst_bytes": 3000,
           "deadline_ns": 5_000_000, "guarantee_ns": 900_000,
           "path": ["h2", "s1", "m2", "s2", "h3"], "queues": [0, 1, 0, 0],
           "budgets_ns": [1, 2, 3, 4], "tags": [21, 10, 30],
           "shaper": {"rate_bps": 40_000_000, "burst_bytes": 3000},
           "match": {"proto": "udp", "dst_port": 5001}})
}

#[test]
fn a_flow_of_this_host_becomes_one_entry_per_destination_address() {
    let e = flow_entry(&flow(), "h2", &book()).unwrap_or_else(|e| panic!("{e}"));
    let e = e.unwrap_or_else(|| panic!("h2 is the source"));
    assert_eq!((e.id, e.tags.as_slice(), e.shaper), (4, &[21u16, 10, 30][..], (40_000_000, 3000)));
    assert_eq!(e.matches.len(), 2);
    assert!(e.matches.iter().all(|m| (m.proto, m.src_port, m.dst_port) == (17, 0, 5001)));
    assert_eq!(e.path.len(), 5);
    assert_eq!(flow_entry(&flow(), "h1", &book()), Ok(None), "another host's flow");
}

#[test]
fn flows_that_cannot_be_programmed_say_why() {
    let mut f = flow();
    f.as_object_mut().map(|m| m.remove("match"));
    assert_eq!(flow_entry(&f, "h2", &book()), Err(FlowError::NoMatch(4)));
    let mut f = flow();
    f["dst"] = json!("h9");
    assert!(matches!(
        flow_entry(&f, "h2", &book()),
        Err(FlowError::UnknownDestination { id: 4, .. })
    ));
    let mut f = flow();
    f["tags"] = json!([5000]);
    assert!(matches!(flow_entry(&f, "h2", &book()), Err(FlowError::Field { field: "tags", .. })));
    let mut f = flow();
    f["tags"] = json!(vec![1; 17]);
    assert_eq!(flow_entry(&f, "h2", &book()), Err(FlowError::TooManyTags { id: 4, tags: 17 }));
    f["tags"] = json!(vec![1; 10]);
    assert!(flow_entry(&f, "h2", &book()).is_ok(), "the controller's default max_tags fits");
    let mut f = flow();
    f["match"]["proto"] = json!("sctp");
    assert!(matches!(
        flow_entry(&f, "h2", &book()),
        Err(FlowError::Field { field: "match.proto", .. })
    ));
    let mut f = flow();
    f["match"]["src_port"] = json!(4000);
    let e = flow_entry(&f, "h2", &book()).ok().flatten().map(|e| e.matches[0].src_port);
    assert_eq!(e, Some(4000));
}

#[test]
fn responses_are_read_by_length_chunks_or_to_the_end() {
    let r = b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\n{}extra";
    assert_eq!(parse_response(r), Ok((200, b"{}".to_vec())));
    let r = b"HTTP/1.1 404 Not Found\r\nTransfer-Encoding: chunked\r\n\r\n3\r\n{\"a\r\n4\r\n\": 1\r\n1\r\n}\r\n0\r\n\r\n";
    assert_eq!(parse_response(r), Ok((404, b"{\"a\": 1}".to_vec())));
    let r = b"HTTP/1.1 204 No Content\r\n\r\n";
    assert_eq!(parse_response(r), Ok((204, Vec::new())));
    assert!(parse_response(b"HTTP/1.1 200 OK\r\nContent-Length: 9\r\n\r\n{}").is_err());
    assert!(parse_response(b"garbage").is_err());
    assert!(parse_response(b"HTTP/1.1 abc\r\n\r\n").is_err());
    assert!(parse_response(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n").is_err());
}

#[test]
fn class_statistics_are_read_from_tc_text() {
    let t =
        "class htb 1:a root prio 0 rate 40Mbit overhead 4 ceil 40Mbit burst 3000b cburst 3000b \n \
             Sent 151200 bytes 100 pkt (dropped 3, overlimits 42 requeues 0) \n \
             backlog 3024b 2p requeues 0\n lended: 0 borrowed: 0 giants: 0\n\n\
             class htb 1:2 root prio 0 rate 8Mbit ceil 8Mbit burst 1500b cburst 1500b \n \
             Sent 0 bytes 0 pkt (dropped 0, overlimits 0 requeues 0) \n backlog 0b 0p requeues 0\n";
    let s = parse_class_stats(t);
    assert_eq!(s.len(), 2);
    assert_eq!(
        s[&10],
        json!({"sent_bytes": 151200, "sent_packets": 100, "dropped": 3,
        "overlimits": 42, "backlog_bytes": 3024, "backlog_packets": 2})
    );
    assert_eq!(s[&2]["sent_packets"], 0);
    assert!(parse_class_stats("garbage\nSent x").is_empty());
}

#[test]
fn controller_addresses_are_http_or_https_host_port() {
    assert!(Controller::new("http://127.0.0.1:8711").is_ok());
    assert!(Controller::new("http://127.0.0.1:8711/").is_ok());
    assert!(Controller::new("https://127.0.0.1:8711").is_ok());
    for bad in ["127.0.0.1:8711", "ftp://127.0.0.1:1", "http://", "https://127.0.0.1:1/flows"] {
        assert!(matches!(Controller::new(bad), Err(AgentError::Config(_))), "{bad}");
    }
}

#[test]
fn an_https_service_is_reached_with_its_ca_file_and_client_certificate_and_refused_otherwise() {
    let dir = std::env::temp_dir().join(format!("latnet-agent-tls-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../scripts/tls-certs.sh");
    for name in ["a", "b"] {
        let out = std::process::Command::new(&script).arg(dir.join(name)).output();
        assert!(out.is_ok_and(|o| o.status.success()), "scripts/tls-certs.sh (openssl)");
    }
    let cfg2 = || latnet_ctld::ServiceConfig::fat_tree(4, 8);
    let _ = std::fs::create_dir_all(dir.join("db"));
    let svc = latnet_ctld::Service::open(&dir.join("db").join("controller.db"), cfg2());
    let Ok(mut svc) = svc else { panic!("no service") };
    let tls = latnet_ctld::tls::server_config(
        &dir.join("a/service.crt"),
        &dir.join("a/service.key"),
        None,
        None,
    );
    let opts = latnet_ctld::ServeOptions::default();
    let endpoint = latnet_ctld::Endpoint::open("127.0.0.1:0", tls.ok());
    let Ok(endpoint) = endpoint else { panic!("{endpoint:?}") };
    let url = endpoint.url();
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let stop2 = stop.clone();
    let served = std::thread::spawn(move || {
        endpoint.run(&mut svc, opts, || stop2.load(std::sync::atomic::Ordering::Relaxed));
    });
    // trusting the CA that signed the service's certificate: answered, and a POST goes in
    let c = Controller::new(&url).and_then(|c| c.with_ca_file(&dir.join("a/ca.crt")));
    let Ok(c) = c else { panic!("{c:?}") };
    assert!(c.check().is_ok());
    let hosts = c.get("/hosts");
    assert!(matches!(&hosts, Ok((200, v)) if v.as_array().map(Vec::len) == Some(16)), "{hosts:?}");
    // by name (the certificate names localhost too), and with an address where nothing
    // listens resolved first (as localhost's ::1 may be): the next one is tried
    let local = url.replace("127.0.0.1", "localhost");
    let c2 = Controller::new(&local).and_then(|c| c.with_ca_file(&dir.join("a/ca.crt")));
    let Ok(mut c2) = c2 else { panic!("{c2:?}") };
    c2.addrs.insert(0, std::net::SocketAddr::from(([127, 0, 0, 1], 1)));
    assert!(matches!(c2.get("/health"), Ok((200, _))), "{local}");
    c2.addrs.truncate(1);
    let e = c2.get("/health");
    assert!(
        matches!(&e, Err(AgentError::Controller { msg, .. }) if msg.contains("cannot connect"))
    );
    let flow = json!({"src": "h0_0_0", "dst": "h3_1_1", "rate_bps": 1_000_000,
                      "burst_bytes": 1500, "deadline_ns": 10_000_000u64});
    assert!(matches!(c.post("/flows", &flow), Ok((201, _))));
    // trusting another CA: refused, saying why
    let c = Controller::new(&url).and_then(|c| c.with_ca_file(&dir.join("b/ca.crt")));
    let Ok(c) = c else { panic!("{c:?}") };
    match c.get("/hosts") {
        Err(AgentError::Controller { msg, .. }) => {
            assert!(msg.contains("certificate"), "{msg}")
        }
        other => panic!("{other:?}"),
    }
    // with the CA's revocation lists: one revoking nothing lets it in; one past its next
    // update, or revoking the service's certificate, refuses it, saying why; the agent reads
    // the file again when it changes, and keeps what it had if the new one cannot be used
    let ca = dir.join("a/ca.crt");
    let a = |f: &str| dir.join("a").join(f);
    let run = |cmd: &mut std::process::Command| {
        let out = cmd.output();
        assert!(out.as_ref().is_ok_and(|o| o.status.success()), "{out:?}");
    };
    let revoke = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../scripts/tls-revoke.sh");
    run(std::process::Command::new(&revoke).arg(dir.join("a")));
    let in_use = a("in-use.crl");
    let use_list = |from: &Path| assert!(std::fs::copy(from, &in_use).is_ok());
    use_list(&a("ca.crl"));
    let c = Controller::new(&url).and_then(|c| c.with_tls(&ca, None, Some(&in_use)));
    let Ok(c) = c else { panic!("{c:?}") };
    assert!(matches!(c.get("/hosts"), Ok((200, _))));
    run(std::process::Command::new("openssl")
        .args(["ca", "-config"])
        .arg(a("ca-revoke.cnf"))
        .arg("-keyfile")
        .arg(a("ca.key"))
        .arg("-cert")
        .arg(a("ca.crt"))
        .args(["-gencrl", "-crl_lastupdate", "20200101000000Z"])
        .args(["-crl_nextupdate", "20200102000000Z", "-out"])
        .arg(a("stale.crl")));
    use_list(&a("stale.crl"));
    let e = c.get("/hosts");
    let said = |e: &Result<_, AgentError>, what: &str| matches!(e, Err(AgentError::Controller { msg, .. }) if msg.contains(what));
    assert!(said(&e, "revocation list expired"), "{e:?}");
    // renewed: in again, on the same controller (and its clones)
    use_list(&a("ca.crl"));
    assert!(matches!(c.clone().get("/hosts"), Ok((200, _))));
    run(std::process::Command::new(&revoke).arg(dir.join("a")).arg(a("service.crt")));
    use_list(&a("ca.crl"));
    let e = c.get("/hosts");
    assert!(said(&e, "Revoked"), "{e:?}");
    // a file it cannot use keeps the previous lists (still refused), then a good one is used
    assert!(std::fs::write(&in_use, "not a list\n").is_ok());
    assert!(said(&c.get("/hosts"), "Revoked"));
    let e = Controller::new(&url).and_then(|c| c.with_tls(&ca, None, Some(&ca)));
    let want = format!("--crl-file {}: no revocation list", ca.display());
    assert!(matches!(&e, Err(AgentError::Config(m)) if m.starts_with(&want)), "{e:?}");
    // no CA file for https://, a CA file for http://, a file without certificates
    let Ok(bare) = Controller::new(&url) else { panic!("{url}") };
    assert!(matches!(bare.check(), Err(AgentError::Config(m)) if m.contains("--ca-file")));
    let plain = url.replace("https://", "http://");
    let e = Controller::new(&plain).and_then(|c| c.with_ca_file(&dir.join("a/ca.crt")));
    assert!(matches!(e, Err(AgentError::Config(m)) if m.contains("is not https://")));
    let key = dir.join("a/service.key");
    let e = Controller::new(&url).and_then(|c| c.with_ca_file(&key));
    let want = format!("--ca-file {}: no usable certificate", key.display());
    assert!(matches!(&e, Err(AgentError::Config(m)) if m.starts_with(&want)), "{e:?}");
    // plain HTTP to the TLS port is told so
    let Ok(c) = Controller::new(&plain) else { panic!("{plain}") };
    let r = c.get("/hosts");
    assert!(matches!(&r, Ok((400, v)) if v.to_string().contains("https://")), "{r:?}");
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    assert!(served.join().is_ok());
    // a service that asks for a client certificate (mutual TLS): the agent's gets it in,
    // none does not
    let ca = dir.join("a/ca.crt");
    let tls = latnet_ctld::tls::server_config(
        &dir.join("a/service.crt"),
        &dir.join("a/service.key"),
        Some(&ca),
        None,
    );
    let endpoint = latnet_ctld::Endpoint::open("127.0.0.1:0", tls.ok());
    let Ok(endpoint) = endpoint else { panic!("{endpoint:?}") };
    let url = endpoint.url();
    let svc = latnet_ctld::Service::open(&dir.join("db").join("controller.db"), cfg2());
    let Ok(mut svc) = svc else { panic!("no service") };
    stop.store(false, std::sync::atomic::Ordering::Relaxed);
    let stop2 = stop.clone();
    let opts = latnet_ctld::ServeOptions::default();
    let served = std::thread::spawn(move || {
        endpoint.run(&mut svc, opts, || stop2.load(std::sync::atomic::Ordering::Relaxed));
    });
    let (cert, key) = (dir.join("a/client.crt"), dir.join("a/client.key"));
    let c = Controller::new(&url).and_then(|c| c.with_tls(&ca, Some((&cert, &key)), None));
    let Ok(c) = c else { panic!("{c:?}") };
    let r = c.get("/hosts");
    assert!(matches!(&r, Ok((200, _))), "{r:?}");
    let c = Controller::new(&url).and_then(|c| c.with_ca_file(&ca));
    let Ok(c) = c else { panic!("{c:?}") };
    let r = c.get("/hosts");
    assert!(matches!(&r, Err(AgentError::Controller { msg, .. }) if msg.contains("Certificate")));
    // a key that is not the certificate's is refused naming both
    let other = dir.join("b/client.key");
    let e = Controller::new(&url).and_then(|c| c.with_tls(&ca, Some((&cert, &other)), None));
    let want = format!("--client-key {}: does not go with --client-cert", other.display());
    assert!(matches!(&e, Err(AgentError::Config(m)) if m.starts_with(&want)), "{e:?}");
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    assert!(served.join().is_ok());
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_token_file_gives_every_request_its_bearer_header() {
    use std::net::TcpListener;
    let dir = std::env::temp_dir().join(format!("latnet-agent-token-{}", std::process::id()));
    let _ = std::fs::create_dir_all(&dir);
    let file = dir.join("token");
    let _ = std::fs::write(&file, "# the agents' token\n\nread abcdef0123456789xyz\n");
    let Ok(l) = TcpListener::bind("127.0.0.1:0") else { panic!("no listener") };
    let url = format!("http://{}", l.local_addr().map(|a| a.to_string()).unwrap_or_default());
    // the requests it reads, one per connection
    let seen = std::thread::spawn(move || {
        let mut all = Vec::new();
        for _ in 0..4 {
            let Ok((mut s, _)) = l.accept() else { break };
            let mut req = Vec::new();
            let mut buf = [0u8; 512];
            while !req.windows(4).any(|w| w == b"\r\n\r\n") {
                match s.read(&mut buf) {
                    Ok(0) | Err(_) => break,
                    Ok(n) => req.extend_from_slice(&buf[..n]),
                }
            }
            let _ = s.write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\n[]");
            all.push(String::from_utf8_lossy(&req).into_owned());
        }
        all
    });
    let c = Controller::new(&url).and_then(|c| c.with_token_file(&file));
    let Ok(c) = c else { panic!("{c:?}") };
    assert!(matches!(c.get("/hosts"), Ok((200, _))));
    // a new token in the file is sent from the next request on; a file without one keeps
    // the previous token
    let _ = std::fs::write(&file, "read newtoken0123456789\n");
    assert!(matches!(c.get("/hosts"), Ok((200, _))));
    let _ = std::fs::write(&file, "# nothing yet\n");
    assert!(matches!(c.get("/hosts"), Ok((200, _))));
    let _ = std::fs::write(&file, "third0123456789abcdef\n");
    assert!(matches!(c.get("/hosts"), Ok((200, _))));
    let reqs = seen.join().unwrap_or_default();
    let tokens: Vec<_> = reqs
        .iter()
        .map(|r| r.lines().find_map(|l| l.strip_prefix("Authorization: Bearer ")).unwrap_or(""))
        .collect();
    let want = ["abcdef0123456789xyz", "newtoken0123456789", "newtoken0123456789"];
    assert_eq!(tokens, [&want[..], &["third0123456789abcdef"]].concat(), "{reqs:?}");
    // a file without a token, or none at all, is refused naming it
    let _ = std::fs::write(&file, "# nothing yet\n");
    for path in [file.clone(), dir.join("missing")] {
        let e = Controller::new(&url).and_then(|c| c.with_token_file(&path));
        match e {
            Err(AgentError::Config(m)) => {
                assert!(m.starts_with(&format!("--token-file {}", path.display())), "{m}");
            }
            other => panic!("{other:?}"),
        }
    }
    let _ = std::fs::remove_dir_all(&dir);
}
