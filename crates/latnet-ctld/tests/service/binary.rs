//! The `latnet-ctld` binary: settings refused before anything is written.

use super::*;

/// `latnet-ctld ARGS --db DB --stdin-stop` with nothing on its standard input (so that a start
/// that succeeds stops at once): its exit status and standard error.
fn ctld(args: &[&str], db: &Path) -> (Option<i32>, String) {
    use std::process::{Command, Stdio};
    let out = Command::new(env!("CARGO_BIN_EXE_latnet-ctld"))
        .args(args)
        .arg("--db")
        .arg(db)
        .arg("--stdin-stop")
        .stdin(Stdio::null())
        .output()
        .unwrap();
    (out.status.code(), String::from_utf8_lossy(&out.stderr).into_owned())
}

#[test]
fn a_start_refused_for_its_settings_writes_no_store_and_the_corrected_one_starts() {
    let db = tmp("bad-start");
    let with = |f: fn(&mut ServiceConfig)| {
        let mut c = cfg(4);
        f(&mut c);
        c
    };
    for bad in [
        cfg(3),
        with(|c| c.system = "foo".into()),
        with(|c| c.system = "qjump".into()),
        with(|c| c.queues = 9),
    ] {
        let e = Service::open(&db, bad.clone()).unwrap_err();
        assert!(matches!(e, ServiceError::Config(_)), "{bad:?}: {e}");
        assert!(!db.exists(), "{bad:?} made a store");
    }
    let mut svc = Service::open(&db, cfg(4)).unwrap();
    assert_eq!(svc.handle("GET", "/config", b"").1["k"], 4);
}

#[test]
fn the_binary_says_2_for_settings_it_cannot_use_and_touches_no_store_before_it_listens() {
    let db = tmp("bad-binary");
    let free = ["--listen", "127.0.0.1:0"];
    for (args, why) in [
        (&["--k", "3"][..], "even k"),
        (&["--k", "4", "--system", "foo"], "foo"),
        (&["--k", "4", "--system", "qjump"], "qjump"),
        (&["--k", "4", "--queues", "9"], "9 queues"),
    ] {
        let (code, err) = ctld(&[args, &free[..]].concat(), &db);
        assert_eq!(code, Some(2), "{args:?}: {err}");
        assert!(err.contains(why), "{args:?}: {err}");
        assert!(!db.exists(), "{args:?} made a store");
    }
    // a port in use: a store error's status, and no store either
    let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = taken.local_addr().unwrap().to_string();
    let (code, err) = ctld(&["--k", "6", "--listen", &addr], &db);
    assert_eq!(code, Some(1), "{err}");
    assert!(err.contains(&addr), "{err}");
    assert!(!db.exists(), "a start that could not listen made a store");
    let (code, err) = ctld(&["--k", "4", "--listen", "127.0.0.1:0"], &db);
    assert_eq!(code, Some(0), "{err}");
    // a store made with other settings is still refused, as a store error
    let (code, err) = ctld(&["--k", "6", "--listen", "127.0.0.1:0"], &db);
    assert_eq!(code, Some(1), "{err}");
    assert!(err.contains("k = 4"), "{err}");
}
