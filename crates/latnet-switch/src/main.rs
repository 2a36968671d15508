//! `latnet-switch`: the real-time switch, testbed plans and UDP traffic of latnet emulation.
//!
//! ```text
//! latnet-switch run     --scenario S.toml --node NODE[,NODE...] [--netns NS[,NS...]]
//!                       [--stats FILE[,FILE...]] [--stats-every 1s]
//!                       [--ring-mb 8] [--duration D] [--seed N] [--t0 NS] [--pcap DIR]
//!                       [--queues INTERVAL] [--hops DIR] [--spin-us 20]
//! latnet-switch plan    --scenario S.toml
//! latnet-switch send    --scenario S.toml --flow NAME --t0 NS [--out FILE] [--seed N]
//! latnet-switch recv    --scenario S.toml --host NAME --until NS --dir DIR [--out FILE]
//!                       [--ready stdout] [--t0 NS]
//! latnet-switch results --scenario S.toml --dir DIR --end-ns NS --out DIR [--seed N] [--t0 NS]
//! latnet-switch tcp-send --dst ADDR:PORT --seconds S [--cc cubic] [--register yes|no]
//!                        [--pace socket|htb:DEV|none] [--out FILE]
//! latnet-switch tcp-recv --bind ADDR:PORT --conns N --seconds S [--out FILE]
//! latnet-switch agent   --controller URL --scenario S.toml --host H[,H...] [--netns NS[,NS...]]
//!                       [--status FILE] [--poll-ms 20] [--wait-ms 500]
//!                       [--shaper htb|none] [--routes yes|no]
//!                       [--order sequential|together] [--token-file FILE] [--ca-file FILE
//!                       [--client-cert FILE --client-key FILE] [--crl-file FILE]]
//!                       [--dilation K] [--duration D]
//! ```
//!
//! Exit status: 0 on success, 2 for a usage or scenario error, 1 for anything else.

use latnet_sim::Scenario;
use latnet_switch::{agent, plan, results, runner, tcp, traffic};
use latnet_units::Duration;
use std::collections::BTreeMap;
use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

const USAGE: &str = "usage: latnet-switch (run|plan|send|recv|results) --scenario S.toml [options]
       latnet-switch tcp-send --dst ADDR:PORT --seconds S [--cc cubic] [--register yes|no]
                              [--pace socket|htb:DEV|none] [--out FILE]
       latnet-switch tcp-recv --bind ADDR:PORT --conns N --seconds S [--out FILE]
       latnet-switch agent --controller http(s)://HOST:PORT --scenario S.toml --host H[,H...]
                           [--netns NS[,NS...]] [--status FILE] [--poll-ms 20] [--wait-ms 500]
                           [--shaper htb|none] [--routes yes|no] [--order sequential|together]
                           [--token-file FILE] [--ca-file FILE (https: who signed the
                            service's certificate) [--client-cert FILE --client-key FILE
                            (mutual TLS)] [--crl-file FILE (that CA's revocation lists: a
                            service certificate they revoke is refused)]] [--dilation K]
                           [--duration D]
                           [--peer-wait-ms 5000] (sequential order across agents: how long
                            to wait for another agent's step; 0: only among its own hosts)
  run      --node NODE [--stats FILE] [--stats-every 1s] [--ring-mb 8] [--duration D] [--seed N]
           [--netns NS] (the namespace holding the interfaces, a name or a file; default: this
                         process's)
           several switches in one process (one loop, no busy-waits against each other):
           --node A,B --netns NS_A,NS_B [--stats FILE_A,FILE_B]
           [--t0 NS]   (the experiment's time zero, CLOCK_MONOTONIC: AQM epochs, queue
                        samples and capture stamps count from it; default: the switch's start)
           [--pcap DIR] (a capture per emulated port: DIR/<node>-<peer>.pcap, parallel
                        links' as the simulator's, DIR/<node>-<peer>.1.pcap, ...)
           [--queues INTERVAL] (each port's queue sampled into the final --stats file)
           [--hops DIR] (a row per transmission and per drop of a packet of a scenario
                         flow: DIR/hops-<node>.csv and DIR/drops-<node>.csv, merged into
                         hops.csv and packets.csv by `results`)
           [--spin-us 20] (waits up to this long busy-poll instead of sleeping; 0: never)
  plan     (prints the testbed plan as JSON)
  send     --flow NAME --t0 NS [--out FILE] [--seed N]
           (a TCP flow runs on Linux's TCP, in the namespace's settings it sets)
  recv     --host NAME --until NS --dir DIR [--out FILE]
           [--ready stdout] (a line `ready` on stdout once every socket is bound)
           [--t0 NS] (the run's time zero: TCP flows' bytes counted per interval of the
                      scenario's time series)
  results  --dir DIR --end-ns NS --out DIR [--seed N] [--t0 NS]
           (also DIR/hops-<node>.csv into OUT/hops.csv, and with the run's time zero --t0 the
            receivers' DIR/packets-<flow>.csv and the switches' DIR/drops-<node>.csv into
            OUT/packets.csv, a packet sent but in neither as end-of-run: the simulator's
            formats)";

enum Fail {
    Usage(String),
    Other(String),
}

type Args = BTreeMap<String, String>;

fn parse_args(argv: &[String]) -> Result<(String, Args), Fail> {
    let mut it = argv.iter();
    let cmd = it.next().ok_or_else(|| Fail::Usage("missing command".into()))?.clone();
    let mut args = Args::new();
    while let Some(k) = it.next() {
        let Some(key) = k.strip_prefix("--") else {
            return Err(Fail::Usage(format!("unexpected argument {k:?}")));
        };
        let v = it.next().ok_or_else(|| Fail::Usage(format!("--{key} needs a value")))?;
        args.insert(key.to_owned(), v.clone());
    }
    Ok((cmd, args))
}

fn need<'a>(a: &'a Args, k: &str) -> Result<&'a str, Fail> {
    a.get(k).map(String::as_str).ok_or_else(|| Fail::Usage(format!("missing --{k}")))
}

fn num(a: &Args, k: &str) -> Result<u64, Fail> {
    need(a, k)?.parse().map_err(|_| Fail::Usage(format!("--{k}: expected an integer")))
}

fn dur(a: &Args, k: &str) -> Result<Option<Duration>, Fail> {
    a.get(k)
        .map(|v| v.parse::<Duration>().map_err(|e| Fail::Usage(format!("--{k}: {e}"))))
        .transpose()
}

/// `--seconds`: a positive, finite number of seconds (bounds every TCP run).
fn secs(a: &Args) -> Result<f64, Fail> {
    let v = need(a, "seconds")?;
    match v.parse::<f64>() {
        Ok(s) if s.is_finite() && s > 0.0 && s <= 3600.0 => Ok(s),
        _ => Err(Fail::Usage(format!("--seconds: expected a number in (0, 3600], got {v:?}"))),
    }
}

fn scenario(a: &Args) -> Result<Scenario, Fail> {
    let mut sc = Scenario::from_file(Path::new(need(a, "scenario")?))
        .map_err(|e| Fail::Usage(e.to_string()))?;
    if let Some(s) = a.get("seed") {
        sc.sim.seed = s.parse().map_err(|_| Fail::Usage("--seed: expected an integer".into()))?;
    }
    Ok(sc)
}

/// `--node`: a node of the scenario, or several separated by commas.
fn node_list(sc: &Scenario, v: &str) -> Vec<String> {
    if sc.nodes.iter().any(|n| n.name == v) {
        vec![v.to_owned()]
    } else {
        v.split(',').map(str::to_owned).collect()
    }
}

fn io(e: std::io::Error) -> Fail {
    Fail::Other(e.to_string())
}

fn write_json(path: Option<&String>, v: &impl serde::Serialize) -> Result<(), Fail> {
    let body = serde_json::to_string_pretty(v).map_err(|e| Fail::Other(e.to_string()))? + "\n";
    match path {
        Some(p) => std::fs::write(p, body).map_err(io),
        None => std::io::stdout().write_all(body.as_bytes()).map_err(io),
    }
}

/// `--KEY MS`: whole milliseconds from 0 to 60,000 (`default_ms` when absent); 0 is `None`.
fn optional_ms(a: &Args, key: &str, default_ms: u64) -> Result<Option<std::time::Duration>, Fail> {
    let ms = match a.get(key) {
        None => default_ms,
        Some(v) => match v.parse::<u64>() {
            Ok(ms) if ms <= 60_000 => ms,
            _ => {
                return Err(Fail::Usage(format!(
                    "--{key}: expected whole milliseconds from 0 to 60000, got {v:?}"
                )))
            }
        },
    };
    Ok((ms > 0).then(|| std::time::Duration::from_millis(ms)))
}

fn main_inner(argv: &[String]) -> Result<(), Fail> {
    let (cmd, a) = parse_args(argv)?;
    match cmd.as_str() {
        "run" => {
            let sc = scenario(&a)?;
            let nodes = node_list(&sc, need(&a, "node")?);
            let per_node = |key: &str| -> Result<Vec<Option<String>>, Fail> {
                match a.get(key) {
                    None => Ok(vec![None; nodes.len()]),
                    Some(v) if nodes.len() == 1 => Ok(vec![Some(v.clone())]),
                    Some(v) => {
                        let l: Vec<_> = v.split(',').map(|x| Some(x.to_owned())).collect();
                        if l.len() == nodes.len() {
                            Ok(l)
                        } else {
                            Err(Fail::Usage(format!(
                                "--{key}: expected {} comma-separated values, one per --node, \
                                 got {}",
                                nodes.len(),
                                l.len()
                            )))
                        }
                    }
                }
            };
            let (netns, stats) = (per_node("netns")?, per_node("stats")?);
            if nodes.len() > 1 && netns.iter().any(Option::is_none) {
                return Err(Fail::Usage(
                    "--node: several switches in one process need --netns, one per node".into(),
                ));
            }
            let cfg = runner::RunConfig {
                node: String::new(),
                netns: None,
                stats: None,
                stats_every_ns: dur(&a, "stats-every")?.map_or(1_000_000_000, |d| d.as_nanos()),
                ring_bytes: a
                    .get("ring-mb")
                    .map(|v| v.parse::<usize>())
                    .transpose()
                    .map_err(|_| Fail::Usage("--ring-mb: expected an integer".into()))?
                    .unwrap_or(8)
                    << 20,
                duration_ns: dur(&a, "duration")?.map(|d| d.as_nanos()),
                t0_ns: a.get("t0").map(|_| num(&a, "t0")).transpose()?,
                pcap_dir: a.get("pcap").map(PathBuf::from),
                hops_dir: a.get("hops").map(PathBuf::from),
                queues: match dur(&a, "queues")? {
                    Some(d) if d.is_zero() => {
                        return Err(Fail::Usage("--queues: expected an interval above zero".into()))
                    }
                    d => d,
                },
                spin_ns: match a.get("spin-us") {
                    None => runner::SPIN_NS,
                    Some(v) => match v.parse::<u64>() {
                        Ok(us) if us <= 1_000 => us * 1_000,
                        _ => {
                            return Err(Fail::Usage(format!(
                                "--spin-us: expected whole microseconds from 0 to 1000, got {v:?}"
                            )))
                        }
                    },
                },
            };
            let cfgs: Vec<_> = nodes
                .iter()
                .zip(netns)
                .zip(stats)
                .map(|((node, ns), st)| runner::RunConfig {
                    node: node.clone(),
                    // a name given to `ip netns add`, or a namespace file
                    netns: ns.as_deref().map(agent::netns_path),
                    stats: st.map(PathBuf::from),
                    ..cfg.clone()
                })
                .collect();
            runner::run_many(&sc, &cfgs).map_err(io)?;
            Ok(())
        }
        "plan" => {
            let sc = scenario(&a)?;
            let p = plan::plan(&sc)
                .map_err(|e| Fail::Usage(format!("{}: {e}", need(&a, "scenario").unwrap_or(""))))?;
            write_json(a.get("out"), &p)
        }
        "send" => {
            let sc = scenario(&a)?;
            let rep = traffic::send(&sc, need(&a, "flow")?, num(&a, "t0")?).map_err(io)?;
            write_json(a.get("out"), &rep)
        }
        "recv" => {
            let sc = scenario(&a)?;
            let dir = PathBuf::from(need(&a, "dir")?);
            let announce = match a.get("ready").map(String::as_str) {
                None => false,
                Some("stdout") => true,
                Some(v) => return Err(Fail::Usage(format!("--ready: expected stdout, got {v:?}"))),
            };
            let ready = || {
                if announce {
                    let mut out = std::io::stdout().lock();
                    out.write_all(b"ready\n")?;
                    out.flush()?;
                }
                Ok(())
            };
            let t0 = if a.contains_key("t0") { Some(num(&a, "t0")?) } else { None };
            let rep = traffic::recv(&sc, need(&a, "host")?, num(&a, "until")?, t0, &dir, ready)
                .map_err(io)?;
            write_json(a.get("out"), &rep)
        }
        "results" => {
            let sc = scenario(&a)?;
            let end_ns = num(&a, "end-ns")?;
            let res = results::collect(&sc, Path::new(need(&a, "dir")?), end_ns).map_err(io)?;
            let out = Path::new(need(&a, "out")?);
            res.write_dir(out).map_err(io)?;
            let dir = Path::new(need(&a, "dir")?);
            let write = |name: &str, text: String| {
                std::fs::write(out.join(name), text)
                    .map_err(|e| io(std::io::Error::new(e.kind(), format!("{name}: {e}"))))
            };
            if let Some(h) = results::hop_records(&sc, dir).map_err(io)? {
                write("hops.csv", h)?;
            }
            if a.contains_key("t0") {
                if let Some(p) =
                    results::packet_records(&sc, dir, num(&a, "t0")?, end_ns).map_err(io)?
                {
                    write("packets.csv", p)?;
                }
            }
            Ok(())
        }
        "tcp-send" => {
            let dst = need(&a, "dst")?;
            let cfg = tcp::SendConfig {
                dst: dst.parse().map_err(|_| {
                    Fail::Usage(format!(
                        "--dst: expected ADDR:PORT (IPv4, or [IPv6]:PORT), got {dst:?}"
                    ))
                })?,
                seconds: secs(&a)?,
                cc: a.get("cc").cloned().unwrap_or_else(|| "cubic".into()),
                register: match a.get("register").map(String::as_str) {
                    None | Some("no") => false,
                    Some("yes") => true,
                    Some(v) => {
                        return Err(Fail::Usage(format!(
                            "--register: expected yes or no, got {v:?}"
                        )))
                    }
                },
                pace: tcp::Pace::parse(a.get("pace").map_or("socket", String::as_str))
                    .map_err(|e| Fail::Usage(format!("--pace: {e}")))?,
            };
            if a.contains_key("pace") && !cfg.register {
                return Err(Fail::Usage(
                    "--pace: applies the switch's reports, so it needs --register yes".into(),
                ));
            }
            let rep = tcp::send(&cfg).map_err(io)?;
            write_json(a.get("out"), &rep)
        }
        "tcp-recv" => {
            let bind = need(&a, "bind")?;
            let bind = bind
                .parse()
                .map_err(|_| Fail::Usage(format!("--bind: expected ADDR:PORT, got {bind:?}")))?;
            let conns = usize::try_from(num(&a, "conns")?).unwrap_or(usize::MAX);
            let rep = tcp::recv(bind, conns, secs(&a)?).map_err(io)?;
            write_json(a.get("out"), &rep)
        }
        "agent" => {
            let sc = scenario(&a)?;
            let p = plan::plan(&sc)
                .map_err(|e| Fail::Usage(format!("{}: {e}", need(&a, "scenario").unwrap_or(""))))?;
            let hosts: Vec<String> = need(&a, "host")?.split(',').map(str::to_owned).collect();
            let netns: Vec<Option<PathBuf>> = match a.get("netns") {
                None => vec![None; hosts.len()],
                Some(v) => {
                    let l: Vec<_> = v.split(',').map(|n| Some(agent::netns_path(n))).collect();
                    if l.len() != hosts.len() {
                        return Err(Fail::Usage(format!(
                            "--netns: expected {} comma-separated values, one per --host, got {}",
                            hosts.len(),
                            l.len()
                        )));
                    }
                    l
                }
            };
            let served: Vec<_> = hosts.into_iter().zip(netns).collect();
            let (specs, addresses) =
                agent::from_plan(&p, &served).map_err(|e| Fail::Usage(e.to_string()))?;
            let yes_no = |k: &str, default: bool| match a.get(k).map(String::as_str) {
                None => Ok(default),
                Some("yes") => Ok(true),
                Some("no") => Ok(false),
                Some(v) => Err(Fail::Usage(format!("--{k}: expected yes or no, got {v:?}"))),
            };
            let cfg = agent::AgentConfig {
                controller: {
                    let c = agent::Controller::new(need(&a, "controller")?)
                        .map_err(|e| Fail::Usage(e.to_string()))?;
                    let c = match a.get("token-file") {
                        None => c,
                        Some(f) => c
                            .with_token_file(Path::new(f))
                            .map_err(|e| Fail::Usage(e.to_string()))?,
                    };
                    let client = match (a.get("client-cert"), a.get("client-key")) {
                        (Some(c), Some(k)) => Some((Path::new(c), Path::new(k))),
                        (None, None) => None,
                        _ => {
                            return Err(Fail::Usage(
                                "give both --client-cert and --client-key, or neither".into(),
                            ))
                        }
                    };
                    let crl = a.get("crl-file").map(Path::new);
                    let c = match (a.get("ca-file"), client, crl) {
                        (None, None, None) => c,
                        (None, Some(_), _) => {
                            return Err(Fail::Usage("--client-cert needs --ca-file".into()))
                        }
                        (None, None, Some(_)) => {
                            return Err(Fail::Usage(
                                "--crl-file needs --ca-file (whose certificates it revokes)".into(),
                            ))
                        }
                        (Some(f), client, crl) => c
                            .with_tls(Path::new(f), client, crl)
                            .map_err(|e| Fail::Usage(e.to_string()))?,
                    };
                    c.check().map_err(|e| Fail::Usage(e.to_string()))?;
                    c
                },
                hosts: specs,
                addresses,
                poll: match a.get("poll-ms") {
                    None => std::time::Duration::from_millis(20),
                    Some(v) => match v.parse::<u64>() {
                        Ok(ms) if (1..=10_000).contains(&ms) => {
                            std::time::Duration::from_millis(ms)
                        }
                        _ => {
                            return Err(Fail::Usage(format!(
                                "--poll-ms: expected whole milliseconds from 1 to 10000, got {v:?}"
                            )))
                        }
                    },
                },
                wait: optional_ms(&a, "wait-ms", 500)?,
                shape: match a.get("shaper").map(String::as_str) {
                    None | Some("htb") => true,
                    Some("none") => false,
                    Some(v) => {
                        return Err(Fail::Usage(format!(
                            "--shaper: expected htb or none, got {v:?}"
                        )))
                    }
                },
                routes: yes_no("routes", true)?,
                order: match a.get("order").map(String::as_str) {
                    None | Some("sequential") => agent::Order::Sequential,
                    Some("together") => agent::Order::Together,
                    Some(v) => {
                        return Err(Fail::Usage(format!(
                            "--order: expected sequential or together, got {v:?}"
                        )))
                    }
                },
                dilation: match a.get("dilation") {
                    None => 1,
                    Some(_) => match num(&a, "dilation")? {
                        0 => {
                            return Err(Fail::Usage(
                                "--dilation: expected a whole number >= 1".into(),
                            ))
                        }
                        k => k,
                    },
                },
                status: a.get("status").map(PathBuf::from),
                peer_wait: optional_ms(&a, "peer-wait-ms", 5000)?,
                duration: dur(&a, "duration")?
                    .map(|d| std::time::Duration::from_nanos(d.as_nanos())),
            };
            latnet_switch::sys::install_stop_handler();
            let mut ag = agent::Agent::start(cfg).map_err(|e| Fail::Other(e.to_string()))?;
            ag.sync().map_err(|e| Fail::Other(e.to_string()))?;
            ag.run().map_err(|e| Fail::Other(e.to_string()))
        }
        "-h" | "--help" | "help" => {
            std::io::stdout().write_all(format!("{USAGE}\n").as_bytes()).map_err(io)
        }
        other => Err(Fail::Usage(format!("unknown command {other:?}"))),
    }
}

fn main() -> ExitCode {
    let argv: Vec<String> = std::env::args().skip(1).collect();
    // `--help` anywhere (`latnet-switch agent --help`): the usage, not an error
    if argv.iter().any(|a| a == "--help" || a == "-h") {
        return match std::io::stdout().write_all(format!("{USAGE}\n").as_bytes()) {
            Ok(()) => ExitCode::SUCCESS,
            Err(_) => ExitCode::from(1),
        };
    }
    match main_inner(&argv) {
        Ok(()) => ExitCode::SUCCESS,
        Err(Fail::Usage(m)) => {
            eprintln!("latnet-switch: {m}\n{USAGE}");
            ExitCode::from(2)
        }
        Err(Fail::Other(m)) => {
            eprintln!("latnet-switch: {m}");
            ExitCode::from(1)
        }
    }
}
