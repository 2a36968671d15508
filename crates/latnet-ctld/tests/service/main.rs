//! The Chameleon service: API answers, the SQLite store surviving a restart to the same
//! state, refusing another configuration or a changed log, and a real HTTP round trip.

#![allow(clippy::unwrap_used)] // a test fails by panicking

#[path = "../common/mod.rs"]
mod common;

mod access;
mod api;
mod binary;
mod http;
mod polls;
mod store;
use common::{answers, Scratch};

use latnet_ctld::{
    listen, serve, ServeOptions, Service, ServiceConfig, ServiceError, Swap, Tokens, MIN_TOKEN,
};
use serde_json::{json, Value};
use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

fn cfg(k: usize) -> ServiceConfig {
    ServiceConfig::fat_tree(k, 8)
}

/// A store's file, `controller.db` in a [`Scratch`] directory (removed with the value).
struct Db {
    _dir: Scratch,
    file: PathBuf,
}

impl std::ops::Deref for Db {
    type Target = Path;
    fn deref(&self) -> &Path {
        &self.file
    }
}

impl AsRef<Path> for Db {
    fn as_ref(&self) -> &Path {
        &self.file
    }
}

fn tmp(name: &str) -> Db {
    let dir = Scratch::new("service", name);
    Db { file: dir.join("controller.db"), _dir: dir }
}

fn post(svc: &mut Service, body: Value) -> (u16, Value) {
    svc.handle("POST", "/flows", body.to_string().as_bytes())
}

fn req(src: &str, dst: &str, rate: u64, deadline_us: u64) -> Value {
    json!({"src": src, "dst": dst, "rate_bps": rate, "burst_bytes": 1500, "deadline_ns": deadline_us * 1000})
}

fn table_flows(db: &Path) -> Vec<Value> {
    let c = rusqlite::Connection::open(db).unwrap();
    let mut st = c.prepare("SELECT json FROM flows ORDER BY id").unwrap();
    let rows = st.query_map([], |r| r.get::<_, String>(0)).unwrap();
    rows.map(|r| serde_json::from_str(&r.unwrap()).unwrap()).collect()
}

/// `n` requests with tight deadlines and fat rates across the pods of a k = 4 fat-tree: the
/// controller admits, refuses and moves flows (the answers, in order).
fn crowd(svc: &mut Service, n: usize) -> Vec<(u16, Value)> {
    let (_, hosts) = svc.handle("GET", "/hosts", b"");
    let h = |i: usize| hosts[i % 16].as_str().unwrap().to_owned();
    (0..n)
        .map(|i| {
            let rate = 60_000_000 + (i as u64 % 7) * 10_000_000;
            post(svc, req(&h(i * 5), &h(i * 7 + 3), rate, 1200 + (i as u64 % 5) * 300))
        })
        .collect()
}

fn without_rerouted(mut v: Value) -> Value {
    v.as_object_mut().unwrap().remove("rerouted");
    v
}

fn http(addr: &str, raw: &str) -> (u16, String) {
    let mut s = TcpStream::connect(addr).unwrap();
    s.write_all(raw.as_bytes()).unwrap();
    let mut out = String::new();
    s.read_to_string(&mut out).unwrap();
    let status = out.split_whitespace().nth(1).unwrap().parse().unwrap();
    let body = out.split_once("\r\n\r\n").map(|(_, b)| b.to_owned()).unwrap_or_default();
    (status, body)
}

/// `svc` served on a port of 127.0.0.1: its address, the flag that stops it, its thread.
fn start(mut svc: Service, opts: ServeOptions) -> (String, Arc<AtomicBool>, JoinHandle<()>) {
    let server = listen("127.0.0.1:0").unwrap();
    let addr = server.local_addr().unwrap().to_string();
    let stop = Arc::new(AtomicBool::new(false));
    let s2 = stop.clone();
    let t = std::thread::spawn(move || {
        serve(&server, &mut svc, opts, || s2.load(Ordering::Relaxed));
    });
    (addr, stop, t)
}
