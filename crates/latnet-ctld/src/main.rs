//! `latnet-ctld`: the Chameleon controller as a REST service with its state in SQLite.
//!
//! ```text
//! latnet-ctld [--db FILE] [--listen ADDR:PORT] [--system NAME] [--queues N] [--max-tags N]
//!             [--tag-base B]
//!             (--k K [--hosts-per-edge M] | --topology FILE) [--io-timeout SECONDS]
//!             [--tokens FILE] [--log-keep N] [--tls-cert FILE --tls-key FILE
//!             [--tls-client-ca FILE [--tls-client-crl FILE]]] [--stdin-stop]
//! ```
//!
//! Prints `listening on http://ADDR:PORT` once it accepts requests (with `--listen
//! 127.0.0.1:0` the port the system chose), and stops on SIGINT / SIGTERM or, with
//! `--stdin-stop`, when its standard input closes. Exit status 2 for a usage error, settings
//! that cannot build a controller among them (`--k 3`, `--queues 9`, `--system qjump`); 1 for a
//! store error (the message names the file and what differs, as for a store made with other
//! settings) or a `--listen` address that cannot be bound. Settings are checked and the port
//! bound before the store is opened, so a start refused for either writes nothing.
//!
//! `--max-tags N` (default 10): most tags a host pushes, so most switches an admitted path
//! crosses (at most 16). `--tag-base B` (default 10): a tag is `B × local port + queue` (the
//! paper's example uses 100; every tag must fit a VLAN id, below 4096). Both are kept in the
//! store with the other settings: a restart must give the same.
//!
//! `--io-timeout` (default 10 s): how long one read or write of a client's connection may wait
//! and how long a request's body may take to arrive (408 after); each client has a thread of
//! its own, so a slow one delays only itself. `--tokens FILE`: the bearer tokens requests must
//! carry, a `ROLE TOKEN` per line (see [`latnet_ctld::Tokens`]); without it anyone who reaches
//! the port may admit and remove flows. `--log-keep N`: once N entries were logged after the
//! store's snapshot, the controller's state becomes the snapshot and the log keeps its newest
//! N entries (restarts then replay fewer than N); without it only `POST /compact` compacts.
//!
//! `--tls-cert FILE --tls-key FILE` (PEM): the service speaks HTTPS on `--listen` (and prints
//! `listening on https://...`); see [`latnet_ctld::tls`]. Tokens travel in the clear without it.
//! `--tls-client-ca FILE`: clients must also present a certificate that CA signed (mutual TLS).
//! `--tls-client-crl FILE`: and one no revocation list in FILE (PEM; `scripts/tls-revoke.sh`)
//! revokes; a renewed list is read on SIGHUP. A list past its next update is refused, and
//! once a loaded one passes it every client is refused until a renewed one is read.
//!
//! SIGHUP: read the `--tokens` and `--tls-*` files again (after a certificate was renewed, a
//! token revoked). Connections accepted after it get the new certificate; open ones keep the
//! one they shook hands with. Requests are checked against the new tokens from the next one
//! on, on open connections too. If any file cannot be used, nothing changes and standard error
//! says why (the same message as at start); a line on standard error says what was reloaded.
//!
//! Standard error also says, at start and at each reload, when the revocation lists are due,
//! and warns when the service's certificate expires within 14 days or has expired (rustls
//! serves it all the same; clients refuse it) and when the lists are within 3 days of their
//! next update or past it (every client is then refused). A service runs for months: while a
//! warning is due it is said again once a day (the dates are looked at every hour), so a log
//! shows it without a reload. `GET /metrics` has both dates.

use latnet_ctld::metrics::Metrics;
use latnet_ctld::{tls, Endpoint, ServeOptions, Service, ServiceConfig, Swap, Tokens};
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

const USAGE: &str = "usage: latnet-ctld [--db FILE] [--listen ADDR:PORT] [--system NAME] \
[--queues N] [--max-tags N] [--tag-base B] (--k K [--hosts-per-edge M] | --topology FILE) \
[--io-timeout SECONDS] \
[--tokens FILE] [--log-keep N] [--tls-cert FILE --tls-key FILE [--tls-client-ca FILE \
[--tls-client-crl FILE]]] [--stdin-stop]";

#[derive(Clone)]
struct Args {
    db: PathBuf,
    listen: String,
    cfg: ServiceConfig,
    opts: ServeOptions,
    stdin_stop: bool,
    log_keep: Option<u64>,
    /// The certificate chain and key files, PEM.
    tls: Option<(PathBuf, PathBuf)>,
    /// The CA whose certificates clients must present (mutual TLS).
    client_ca: Option<PathBuf>,
    /// Revocation lists of the clients' certificates.
    client_crl: Option<PathBuf>,
    /// The token file.
    tokens: Option<PathBuf>,
}

/// The service's TLS settings, and the dates of their files.
type TlsSettings = (Arc<rustls::ServerConfig>, tls::Dates);

/// A certificate expiring within this many days is warned of.
const WARN_DAYS: i64 = 14;
/// Revocation lists within this many days of their next update are warned of: renewed every
/// few days from cron or a timer, a list this close to it means the renewal is not happening.
const LIST_WARN_DAYS: i64 = 3;
/// How often the dates are looked at between signals.
const CHECK_EVERY: std::time::Duration = std::time::Duration::from_secs(3600);

/// What to say about the dates of the TLS files at `now` (seconds since 1970-01-01 UTC): when
/// the revocation lists are due, then [`warnings`].
fn dated(args: &Args, dates: &tls::Dates, now: i64) -> Vec<String> {
    let mut said = Vec::new();
    if let (Some(crl), Some(due)) = (&args.client_crl, &dates.revocation) {
        let (crl, shown) = (crl.display(), &due.shown);
        said.push(format!("the revocation lists {crl} are due for renewal at {shown}"));
    }
    said.extend(warnings(args, dates, now));
    said
}

/// The warnings due at `now`: the certificate expired or expires within [`WARN_DAYS`], the
/// lists passed their next update or reach it within [`LIST_WARN_DAYS`].
fn warnings(args: &Args, dates: &tls::Dates, now: i64) -> Vec<String> {
    let mut said = Vec::new();
    if let (Some((cert, _)), Some(expiry)) = (&args.tls, &dates.certificate) {
        let (cert, shown) = (cert.display(), &expiry.shown);
        match tls::left(expiry, now, WARN_DAYS) {
            tls::Left::Passed => said.push(format!(
                "warning: the certificate {cert} expired at {shown}: clients refuse it"
            )),
            left @ tls::Left::Days(_) => {
                said.push(format!("warning: the certificate {cert} expires at {shown}, {left}"))
            }
            tls::Left::Later => {}
        }
    }
    if let (Some(crl), Some(due)) = (&args.client_crl, &dates.revocation) {
        let (crl, shown) = (crl.display(), &due.shown);
        match tls::left(due, now, LIST_WARN_DAYS) {
            tls::Left::Passed => said.push(format!(
                "warning: the revocation lists {crl} were due for renewal at {shown}: every \
                 client is refused until they are renewed (then SIGHUP)"
            )),
            left @ tls::Left::Days(_) => said.push(format!(
                "warning: the revocation lists {crl} are due for renewal at {shown}, {left}"
            )),
            tls::Left::Later => {}
        }
    }
    said
}

/// The token file `p`, or an error naming the flag and the file's line.
fn load_tokens(p: &Path) -> Result<Tokens, String> {
    Tokens::load(p).map_err(|e| format!("--tokens {e}"))
}

impl Args {
    /// The TLS settings from the `--tls-*` files (`None` without them), and their dates.
    fn tls(&self) -> Result<Option<TlsSettings>, String> {
        let Some((cert, key)) = &self.tls else { return Ok(None) };
        tls::server_config_dated(cert, key, self.client_ca.as_deref(), self.client_crl.as_deref())
            .map(Some)
    }

    /// Read the token and TLS files again and replace what `opts` and `endpoint` use, all or
    /// nothing: what was replaced, and the new files' dates with whether a warning was among
    /// what it said (`None` without TLS); or why nothing was.
    fn reload(
        &self,
        opts: &ServeOptions,
        endpoint_tls: Option<&Swap<rustls::ServerConfig>>,
        metrics: &Metrics,
    ) -> Result<(String, Option<(tls::Dates, bool)>), String> {
        let tokens = self.tokens.as_deref().map(load_tokens).transpose()?;
        let tls = self.tls()?;
        let mut done = Vec::new();
        let mut new_dates = None;
        if let (Some(t), Some(swap), Some(p)) = (tokens, &opts.tokens, &self.tokens) {
            done.push(format!("{} tokens from {}", t.len(), p.display()));
            swap.set(t);
        }
        if let (Some((cfg, dates)), Some(swap), Some((cert, _))) = (tls, endpoint_tls, &self.tls) {
            done.push(format!("the certificate {}", cert.display()));
            if let Some(crl) = &self.client_crl {
                done.push(format!("the revocation lists {}", crl.display()));
            }
            let lines = dated(self, &dates, tls::unix_now());
            let warned = lines.iter().any(|l| l.starts_with("warning"));
            done.extend(lines);
            swap.set(cfg);
            metrics.tls_dates(&dates);
            new_dates = Some((dates, warned));
        }
        let what = if done.is_empty() {
            "nothing to reload (no --tokens or --tls-cert)".into()
        } else {
            done.join(", ")
        };
        Ok((what, new_dates))
    }
}

fn parse(mut it: impl Iterator<Item = String>) -> Result<Args, String> {
    let mut db = PathBuf::from("out/chameleon-service/controller.db");
    let mut listen = "127.0.0.1:8700".to_owned();
    // a fat-tree's k or a topology file is given below (exactly one)
    let mut cfg = ServiceConfig { k: None, ..ServiceConfig::fat_tree(0, 8) };
    let mut stdin_stop = false;
    let mut log_keep = None;
    let (mut tls_cert, mut tls_key, mut client_ca, mut tokens) = (None, None, None, None);
    let mut client_crl = None;
    let mut opts = ServeOptions::default();
    let num = |flag: &str, v: Option<String>| -> Result<usize, String> {
        let v = v.ok_or_else(|| format!("{flag}: expected a value"))?;
        v.parse::<usize>()
            .ok()
            .filter(|&n| n > 0)
            .ok_or_else(|| format!("{flag}: expected a whole number >= 1, got {v:?}"))
    };
    while let Some(a) = it.next() {
        match a.as_str() {
            "--db" => db = it.next().ok_or("--db: expected a file")?.into(),
            "--listen" => {
                listen = it.next().ok_or("--listen: expected ADDR:PORT")?;
                // not an address at all is a usage error; one that cannot be bound is not
                if std::net::ToSocketAddrs::to_socket_addrs(listen.as_str()).is_err() {
                    return Err(format!("--listen {listen}: expected ADDR:PORT"));
                }
            }
            "--system" => cfg.system = it.next().ok_or("--system: expected a system")?,
            "--queues" => cfg.queues = num("--queues", it.next())?,
            "--max-tags" => cfg.max_tags = Some(num("--max-tags", it.next())?),
            "--tag-base" => {
                let n = num("--tag-base", it.next())?;
                let b = u16::try_from(n).ok().filter(|&b| b < 4096);
                let b = b.ok_or_else(|| format!("--tag-base: expected at most 4095, got {n}"))?;
                cfg.tag_base = Some(b);
            }
            "--k" => cfg.k = Some(num("--k", it.next())?),
            "--hosts-per-edge" => cfg.hosts_per_edge = Some(num("--hosts-per-edge", it.next())?),
            "--topology" => {
                let p = it.next().ok_or("--topology: expected a file")?;
                let text =
                    std::fs::read_to_string(&p).map_err(|e| format!("--topology {p}: {e}"))?;
                cfg.topology = Some(text);
            }
            "--io-timeout" => {
                let v = it.next().ok_or("--io-timeout: expected seconds")?;
                opts.io_timeout = v
                    .parse::<f64>()
                    .ok()
                    .filter(|s| s.is_finite() && *s >= 0.001 && *s <= 3600.0)
                    .map(std::time::Duration::from_secs_f64)
                    .ok_or_else(|| {
                        format!("--io-timeout: expected seconds from 0.001 to 3600, got {v:?}")
                    })?;
            }
            "--tokens" => {
                let p = PathBuf::from(it.next().ok_or("--tokens: expected a file")?);
                opts.tokens = Some(Swap::new(load_tokens(&p)?));
                tokens = Some(p);
            }
            "--log-keep" => log_keep = Some(num("--log-keep", it.next())? as u64),
            "--tls-cert" => tls_cert = Some(it.next().ok_or("--tls-cert: expected a file")?.into()),
            "--tls-key" => tls_key = Some(it.next().ok_or("--tls-key: expected a file")?.into()),
            "--tls-client-ca" => {
                client_ca = Some(it.next().ok_or("--tls-client-ca: expected a file")?.into());
            }
            "--tls-client-crl" => {
                client_crl = Some(it.next().ok_or("--tls-client-crl: expected a file")?.into());
            }
            "--stdin-stop" => stdin_stop = true,
            other => return Err(format!("unknown argument {other:?}")),
        }
    }
    if cfg.k.is_some() == cfg.topology.is_some() {
        return Err("give exactly one of --k (a fat-tree) and --topology FILE".into());
    }
    let tls = match (tls_cert, tls_key) {
        (Some(c), Some(k)) => Some((c, k)),
        (None, None) => None,
        _ => return Err("give both --tls-cert and --tls-key, or neither".into()),
    };
    if client_ca.is_some() && tls.is_none() {
        return Err("--tls-client-ca needs --tls-cert and --tls-key".into());
    }
    if client_crl.is_some() && client_ca.is_none() {
        return Err("--tls-client-crl needs --tls-client-ca (whose clients it revokes)".into());
    }
    Ok(Args { db, listen, cfg, opts, stdin_stop, log_keep, tls, client_ca, client_crl, tokens })
}

#[allow(clippy::print_stdout)] // the address line is the binary's output
fn main() -> ExitCode {
    // before any thread starts, so that every thread inherits it blocked and only the reload
    // thread takes it
    let hangup = block_hangup();
    if std::env::args().skip(1).any(|a| a == "--help" || a == "-h") {
        println!("{USAGE}");
        return ExitCode::SUCCESS;
    }
    let args = match parse(std::env::args().skip(1)) {
        Ok(a) => a,
        Err(e) => {
            eprintln!("latnet-ctld: {e}\n{USAGE}");
            return ExitCode::from(2);
        }
    };
    // certificate files are read before the store is touched
    // (a file an option names that cannot be used is a usage error, as a bad option is)
    let tls = match args.tls() {
        Ok(c) => c,
        Err(e) => {
            eprintln!("latnet-ctld: {e}");
            return ExitCode::from(2);
        }
    };
    // the settings, then the port, before anything is written
    if let Err(e) = args.cfg.controller() {
        eprintln!("latnet-ctld: {e}");
        return ExitCode::from(2);
    }
    let (tls, dates) = match tls {
        Some((cfg, dates)) => (Some(cfg), dates),
        None => (None, tls::Dates::default()),
    };
    let endpoint = match Endpoint::open(&args.listen, tls) {
        Ok(e) => e,
        Err(e) => {
            eprintln!("latnet-ctld: --listen {}: {e}", args.listen);
            return ExitCode::from(1);
        }
    };
    let started = tls::unix_now();
    let said = dated(&args, &dates, started);
    for line in &said {
        eprintln!("latnet-ctld: {line}");
    }
    // again a day from now if a warning was just said
    let mut reminder = tls::Reminder::default();
    if said.iter().any(|l| l.starts_with("warning")) {
        reminder.said(started);
    }
    endpoint.metrics().tls_dates(&dates);
    if let Some(dir) = args.db.parent().filter(|d| !d.as_os_str().is_empty()) {
        if let Err(e) = std::fs::create_dir_all(dir) {
            eprintln!("latnet-ctld: {}: {e}", dir.display());
            return ExitCode::from(1);
        }
    }
    let mut svc = match Service::open(&args.db, args.cfg.clone()) {
        Ok(s) => s,
        Err(e) => {
            eprintln!("latnet-ctld: {e}");
            // settings that build no controller are a usage error (checked above already)
            let config = matches!(e, latnet_ctld::ServiceError::Config(_));
            return ExitCode::from(if config { 2 } else { 1 });
        }
    };
    svc.set_log_keep(args.log_keep);
    let stop = Arc::new(AtomicBool::new(false));
    // SIGINT / SIGTERM end the process as usual: every request is committed to the store
    // (one transaction) before it is answered, so nothing answered is lost.
    if args.stdin_stop {
        let s = stop.clone();
        std::thread::spawn(move || {
            let mut sink = Vec::new();
            let _ = std::io::Read::read_to_end(&mut std::io::stdin(), &mut sink);
            s.store(true, Ordering::Relaxed);
        });
    }
    if let Some(set) = hangup {
        let (args, opts, tls) = (args.clone(), args.opts.clone(), endpoint.tls());
        let metrics = endpoint.metrics();
        let mut dates = dates;
        std::thread::spawn(move || loop {
            match wait_hangup(&set, CHECK_EVERY) {
                Woken::Hangup => {
                    let done = args.reload(&opts, tls.as_ref(), &metrics);
                    metrics.reloaded(done.is_ok());
                    match done {
                        Ok((what, new_dates)) => {
                            eprintln!("latnet-ctld: SIGHUP: reloaded {what}");
                            if let Some((d, warned)) = new_dates {
                                dates = d;
                                // the reload said the warnings due: again a day from now
                                reminder = tls::Reminder::default();
                                if warned {
                                    reminder.said(tls::unix_now());
                                }
                            }
                        }
                        Err(e) => {
                            eprintln!("latnet-ctld: SIGHUP: kept the previous settings: {e}")
                        }
                    }
                }
                Woken::Timeout => {
                    let now = tls::unix_now();
                    for w in reminder.say(now, || warnings(&args, &dates, now)) {
                        eprintln!("latnet-ctld: {w}");
                    }
                }
                Woken::Failed => break,
            }
        });
    }
    println!(
        "listening on {} ({} flows from {})",
        endpoint.url(),
        svc.controller().len(),
        args.db.display()
    );
    endpoint.run(&mut svc, args.opts.clone(), || stop.load(Ordering::Relaxed));
    ExitCode::SUCCESS
}

/// Block SIGHUP in this thread (and so in every thread it starts): the set to wait on, or
/// `None` if it could not be blocked (SIGHUP then ends the process, as by default). With the
/// next function, the binary's only `unsafe` code.
#[allow(unsafe_code)]
fn block_hangup() -> Option<libc::sigset_t> {
    // SAFETY: `set` is initialised by sigemptyset before use; pthread_sigmask only reads it.
    unsafe {
        let mut set: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut set);
        libc::sigaddset(&mut set, libc::SIGHUP);
        (libc::pthread_sigmask(libc::SIG_BLOCK, &set, std::ptr::null_mut()) == 0).then_some(set)
    }
}

/// What ended a [`wait_hangup`].
enum Woken {
    Hangup,
    Timeout,
    Failed,
}

/// Wait up to `timeout` for a SIGHUP (blocked by [`block_hangup`]).
#[allow(unsafe_code)]
fn wait_hangup(set: &libc::sigset_t, timeout: std::time::Duration) -> Woken {
    let t = libc::timespec {
        tv_sec: libc::time_t::try_from(timeout.as_secs()).unwrap_or(libc::time_t::MAX),
        tv_nsec: libc::c_long::from(timeout.subsec_nanos()),
    };
    loop {
        // SAFETY: `set` and `t` are live, initialised values; a null siginfo is allowed.
        let r = unsafe { libc::sigtimedwait(set, std::ptr::null_mut(), &t) };
        if r == libc::SIGHUP {
            return Woken::Hangup;
        }
        match std::io::Error::last_os_error().raw_os_error() {
            Some(libc::EAGAIN) => return Woken::Timeout,
            Some(libc::EINTR) => continue,
            _ => return Woken::Failed,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(unix_secs: i64) -> Option<tls::Due> {
        Some(tls::Due { unix_secs, shown: format!("<{unix_secs}>") })
    }

    #[test]
    fn warnings_are_said_ahead_of_the_dates() {
        let flags = "--k 4 --tls-cert s.crt --tls-key s.key --tls-client-ca ca.crt \
                     --tls-client-crl ca.crl";
        let Ok(args) = parse(flags.split_whitespace().map(str::to_owned)) else { panic!() };
        let day = 86_400;
        let dates = tls::Dates { certificate: at(100 * day), revocation: at(50 * day) };
        // far from both: the lists' date only
        let said = dated(&args, &dates, 10 * day);
        assert_eq!(said, ["the revocation lists ca.crl are due for renewal at <4320000>"]);
        assert!(warnings(&args, &dates, 10 * day).is_empty());
        // the lists within 3 days
        let now = 48 * day;
        let said = warnings(&args, &dates, now);
        assert_eq!(
            said,
            ["warning: the revocation lists ca.crl are due for renewal at <4320000>, in 2 days"]
        );
        // both past: each said
        let said = warnings(&args, &dates, 100 * day);
        assert!(said[0].contains("the certificate s.crt expired at <8640000>"), "{said:?}");
        assert!(said[1].contains("were due for renewal at <4320000>: every client"), "{said:?}");
        // the certificate from 14 days before its end
        assert!(warnings(&args, &dates, 86 * day)[0].contains("lists"));
        assert_eq!(warnings(&args, &dates, 86 * day + 1).len(), 2);
    }
}
