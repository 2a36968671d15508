//! The Chameleon host agent: what the controller decided, programmed into hosts' kernels.
//!
//! One agent serves one or more hosts of an emulated testbed (each in its network namespace).
//! It polls the controller service (`latnet chameleon serve`, `latnet-ctld`) and keeps, for
//! every admitted flow whose source is one of its hosts:
//!
//! * a **tagger** entry ([`crate::tagger`]): the flow's packets (its `match`, to each address
//!   of its destination) get the flow's tag stack, the DSCP of the host's admitted class
//!   ([`ADMITTED_DSCP`]: priority 0, as the controller's host model has it) and, when shaping,
//!   the flow's HTB class;
//! * with `--shaper htb`, a **shaper**: an HTB class on the host's interface with the flow's
//!   token-bucket rate and burst as rate / ceiling and burst / cburst, counting the frame as
//!   sent (the outer tag, which travels as metadata, through HTB's `overhead`). Packets of no
//!   admitted flow go unshaped (HTB's direct queue).
//!
//! and, unless told not to, a **best-effort route** per other host (`GET /routes/SRC`: fewest
//! hops, the class below the admitted ones), so that every other packet (a ping, a TCP
//! handshake, iperf3's control connection) crosses the tag-routed network too.
//!
//! It learns of changes from `GET /log?after=SEQ` (by default a long poll, `&wait=500`: the
//! service answers as soon as an entry is committed; `--wait-ms 0` polls every `--poll-ms`
//! instead, as it does with a service that does not hold polls): an admission re-tags the flows it moved,
//! then starts tagging the new flow (by default one at a time, each once the flow moved before
//! it has had its old guarantee to drain its old path: [`Order::Sequential`], the states the
//! controller checked); a refusal that moved flows re-tags them; a removal stops
//! tagging (the flow's packets then follow the destination's best-effort route) and removes
//! its shaper once the packets queued in it were sent ([`RETIRE_MAX_NS`] at most). Each change
//! is read from `GET /flows/ID` and applied with one map update per destination address, so a packet sees the old stack or the new one; the status file's
//! `changes` record, with the log entry that caused it, the instants (`CLOCK_MONOTONIC`)
//! just before the first update (`t_start_ns`) and just after the last (`t_ns`): every packet
//! sent after `t_ns` gets the change. Shaper classes are made before a tagger names them and
//! removed after it no longer does. The agent's view starts from
//! `GET /flows` (what was admitted before it started), so it can start at any time.
//!
//! The controller is reached over the root namespace (a management network, out of band of
//! the emulated one); only the taggers' links and the shapers live in the hosts' namespaces.
//! Every log page names the service's store: when the service answers from another store (or
//! its log goes back), the agent undoes what it programmed and reads the state again.
//! Losing the controller keeps what was programmed; the agent counts failed polls and retries.
//! A service started with `--tokens` needs one: `--token-file` (a read token is enough for one
//! agent serving every host). A service speaking HTTPS (`latnet-ctld --tls-cert`) is
//! `--controller https://HOST:PORT` with `--ca-file` naming who signed its certificate, which
//! must name `HOST`; without TLS the token crosses the management network in the clear.
//!
//! Agents serving different hosts keep the sequential order between them through the service
//! (`latnet_ctld::agents`): each registers its hosts (`POST /agents`, renewed every second),
//! reports every step of its own once done (`POST /applied`), and before a step of its own whose
//! previous step is another agent's, waits (`GET /applied?...&wait=`, at most `--peer-wait-ms`)
//! until the service says that step is done, or that no agent serves its host. That needs an
//! `agent` (or `write`) token; with a read token, `--peer-wait-ms 0` or `--order together` the
//! order holds among the agent's own hosts only (`peers.off` in the status says why).
//! Stopping (SIGINT / SIGTERM, or `--duration`) detaches the taggers and removes the shapers.

use crate::tagger::{Action, Counters, Match, Tagger};
use serde_json::{json, Value};
use std::collections::BTreeMap;
use std::io::{self, Read, Write};
use std::net::{IpAddr, TcpStream, ToSocketAddrs};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration as StdDuration;

/// Every host's addresses, by name.
pub type AddressBook = BTreeMap<String, Vec<IpAddr>>;

/// DSCP of admitted flows at their source: priority 0 (`CS7`, latnet's priority mapping), the
/// host queue's guaranteed class.
pub const ADMITTED_DSCP: u8 = 56;
/// The HTB handle of the agent's root qdisc on a host interface (`1:`).
pub const HTB_MAJOR: u32 = 1;
/// Longest a removed flow's shaper class is kept for the packets queued in it (ns).
pub const RETIRE_MAX_NS: u64 = 2_000_000_000;
/// Most changes the status keeps (the oldest tenth goes when it is full; counted).
pub const MAX_CHANGES: usize = 100_000;

/// What went wrong.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum AgentError {
    /// The controller could not be reached or answered something unusable.
    #[error("controller {url}: {msg}")]
    Controller {
        /// Its address.
        url: String,
        /// What happened.
        msg: String,
    },
    /// A kernel object could not be made or changed.
    #[error("{0}")]
    Kernel(String),
    /// The agent was given something it cannot use.
    #[error("{0}")]
    Config(String),
}

// ------------------------------------------------------------------------ the controller

/// A controller service at `http://HOST:PORT` or `https://HOST:PORT` (then [`Controller::
/// with_ca_file`] names who signed its certificate, which must name `HOST`).
#[derive(Debug, Clone)]
pub struct Controller {
    url: String,
    host: String,
    /// With `https://`: the TLS settings (`None` until a CA file is given) and the name the
    /// certificate must carry.
    tls: Option<(Option<Arc<rustls::ClientConfig>>, rustls::pki_types::ServerName<'static>)>,
    /// Every address the host name resolved to, tried in turn.
    addrs: Vec<std::net::SocketAddr>,
    timeout: StdDuration,
    /// The bearer token sent with every request (a service started with `--tokens`).
    token: Option<String>,
}

impl Controller {
    /// Parse `http://HOST:PORT[/]` or `https://HOST:PORT[/]`.
    pub fn new(url: &str) -> Result<Controller, AgentError> {
        let bad = |m: &str| AgentError::Config(format!("--controller {url:?}: {m}"));
        let (scheme, rest) = url
            .split_once("://")
            .filter(|(s, _)| matches!(*s, "http" | "https"))
            .ok_or_else(|| bad("expected http://HOST:PORT or https://HOST:PORT"))?;
        let host = rest.trim_end_matches('/');
        if host.is_empty() || host.contains('/') {
            return Err(bad("expected http(s)://HOST:PORT with no path"));
        }
        let addrs: Vec<_> =
            host.to_socket_addrs().map_err(|e| bad(&format!("cannot resolve: {e}")))?.collect();
        if addrs.is_empty() {
            return Err(bad("resolves to no address"));
        }
        let tls = if scheme == "https" {
            let name = host.rsplit_once(':').map_or(host, |(h, _)| h);
            let name = name.trim_start_matches('[').trim_end_matches(']');
            let name = rustls::pki_types::ServerName::try_from(name.to_owned()).map_err(|e| {
                bad(&format!("{name:?} is not a name a certificate can carry: {e}"))
            })?;
            Some((None, name))
        } else {
            None
        };
        Ok(Controller {
            url: format!("{scheme}://{host}"),
            host: host.to_owned(),
            tls,
            addrs,
            timeout: StdDuration::from_secs(2),
            token: None,
        })
    }

    /// Trust the certificates (PEM) in `path` as the signers of an `https://` service's
    /// certificate (its own self-signed one will do). Refused for an `http://` service.
    pub fn with_ca_file(self, path: &Path) -> Result<Controller, AgentError> {
        self.with_tls(path, None)
    }

    /// [`Controller::with_ca_file`], and with `client` (certificate chain and key files, PEM)
    /// present that certificate to a service that asks for one (`latnet-ctld
    /// --tls-client-ca`, mutual TLS).
    pub fn with_tls(
        mut self,
        path: &Path,
        client: Option<(&Path, &Path)>,
    ) -> Result<Controller, AgentError> {
        use rustls::pki_types::{pem::PemObject, CertificateDer, PrivateKeyDer};
        let bad = |m: String| AgentError::Config(format!("--ca-file {}: {m}", path.display()));
        let Some((cfg, _)) = self.tls.as_mut() else {
            return Err(bad(format!("{} is not https://", self.url)));
        };
        let certs = CertificateDer::pem_file_iter(path)
            .and_then(Iterator::collect::<Result<Vec<_>, _>>)
            .map_err(|e| bad(format!("{e} (expected PEM certificates)")))?;
        let mut roots = rustls::RootCertStore::empty();
        let (added, _) = roots.add_parsable_certificates(certs);
        if added == 0 {
            return Err(bad("no usable certificate in it (expected a PEM 'BEGIN CERTIFICATE' \
                            block)"
                .into()));
        }
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let builder = rustls::ClientConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .map_err(|e| bad(e.to_string()))?
            .with_root_certificates(roots);
        let c = match client {
            None => builder.with_no_client_auth(),
            Some((cert, key)) => {
                let bad_cert = |m: String| {
                    AgentError::Config(format!("--client-cert {}: {m}", cert.display()))
                };
                let bad_key =
                    |m: String| AgentError::Config(format!("--client-key {}: {m}", key.display()));
                let chain = CertificateDer::pem_file_iter(cert)
                    .and_then(Iterator::collect::<Result<Vec<_>, _>>)
                    .map_err(|e| bad_cert(format!("{e} (expected PEM certificates)")))?;
                if chain.is_empty() {
                    return Err(bad_cert("no certificate in it".into()));
                }
                let k = PrivateKeyDer::from_pem_file(key)
                    .map_err(|e| bad_key(format!("{e} (expected a PEM private key)")))?;
                builder.with_client_auth_cert(chain, k).map_err(|e| {
                    bad_key(format!("does not go with --client-cert {}: {e}", cert.display()))
                })?
            }
        };
        *cfg = Some(Arc::new(c));
        Ok(self)
    }

    /// An `https://` service without a CA file is a configuration error, said before starting.
    pub fn check(&self) -> Result<(), AgentError> {
        match &self.tls {
            Some((None, _)) => Err(AgentError::Config(format!(
                "--controller {}: give the certificate that signed the service's: --ca-file FILE",
                self.url
            ))),
            _ => Ok(()),
        }
    }

    /// Send the token in file `path` (its first line that is neither empty nor a `#` comment,
    /// either `TOKEN` or `ROLE TOKEN` as in the service's own file) with every request.
    pub fn with_token_file(mut self, path: &Path) -> Result<Controller, AgentError> {
        let bad = |m: String| AgentError::Config(format!("--token-file {}: {m}", path.display()));
        let text = std::fs::read_to_string(path).map_err(|e| bad(e.to_string()))?;
        let line = text
            .lines()
            .map(str::trim)
            .find(|l| !l.is_empty() && !l.starts_with('#'))
            .ok_or_else(|| bad("expected a token, the file has none".into()))?;
        let token = line.split_whitespace().last().unwrap_or_default();
        if token.is_empty() || !token.chars().all(|c| c.is_ascii_graphic()) {
            return Err(bad("expected a token of printable characters".into()));
        }
        self.token = Some(token.to_owned());
        Ok(self)
    }

    /// The service's address.
    pub fn url(&self) -> &str {
        &self.url
    }

    fn fail(&self, msg: impl Into<String>) -> AgentError {
        AgentError::Controller { url: self.url.clone(), msg: msg.into() }
    }

    /// `GET path`: the status and the JSON body (`Null` when empty).
    pub fn get(&self, path: &str) -> Result<(u16, Value), AgentError> {
        self.get_waiting(path, StdDuration::ZERO)
    }

    /// `GET path` of a request the service may hold up to `wait` (a long poll).
    fn get_waiting(&self, path: &str, wait: StdDuration) -> Result<(u16, Value), AgentError> {
        self.call("GET", path, None, wait)
    }

    /// `POST path` with a JSON body: the status and the JSON body (`Null` when empty).
    pub fn post(&self, path: &str, body: &Value) -> Result<(u16, Value), AgentError> {
        self.call("POST", path, Some(body), StdDuration::ZERO)
    }

    fn call(
        &self,
        method: &str,
        path: &str,
        body: Option<&Value>,
        wait: StdDuration,
    ) -> Result<(u16, Value), AgentError> {
        // each address in turn (localhost is ::1, then 127.0.0.1), as TcpStream::connect does
        let mut tried = Err(io::Error::other("no address"));
        for a in &self.addrs {
            tried = TcpStream::connect_timeout(a, self.timeout);
            if tried.is_ok() {
                break;
            }
        }
        let tcp = tried.map_err(|e| self.fail(format!("cannot connect: {e}")))?;
        tcp.set_read_timeout(Some(self.timeout + wait)).map_err(|e| self.fail(e.to_string()))?;
        tcp.set_write_timeout(Some(self.timeout)).map_err(|e| self.fail(e.to_string()))?;
        let _ = tcp.set_nodelay(true);
        let mut s: Box<dyn ReadWrite> = match &self.tls {
            None => Box::new(tcp),
            Some((None, _)) => return Err(self.fail("https:// needs --ca-file")),
            Some((Some(cfg), name)) => {
                let conn = rustls::ClientConnection::new(cfg.clone(), name.clone())
                    .map_err(|e| self.fail(format!("TLS: {e}")))?;
                Box::new(rustls::StreamOwned::new(conn, tcp))
            }
        };
        let auth = self.token.as_ref().map(|t| format!("Authorization: Bearer {t}\r\n"));
        let body = body.map(Value::to_string).unwrap_or_default();
        let kind = if body.is_empty() { "" } else { "Content-Type: application/json\r\n" };
        let head = format!(
            "{method} {path} HTTP/1.1\r\nHost: {}\r\n{}{kind}Content-Length: {}\r\n\
             Connection: close\r\n\r\n",
            self.host,
            auth.unwrap_or_default(),
            body.len()
        );
        // one write: one TLS record, one segment
        s.write_all([head.as_bytes(), body.as_bytes()].concat().as_slice())
            .map_err(|e| self.fail(format!("{method} {path}: {e}")))?;
        s.flush().map_err(|e| self.fail(format!("{method} {path}: {e}")))?;
        let mut raw = Vec::new();
        UntilStop(s)
            .take(16 << 20)
            .read_to_end(&mut raw)
            .map_err(|e| self.fail(format!("{method} {path}: {e}")))?;
        let (status, body) =
            parse_response(&raw).map_err(|m| self.fail(format!("{method} {path}: {m}")))?;
        let v = if body.iter().all(u8::is_ascii_whitespace) {
            Value::Null
        } else {
            serde_json::from_slice(&body)
                .map_err(|e| self.fail(format!("{method} {path}: the body is not JSON: {e}")))?
        };
        Ok((status, v))
    }

    fn get_ok(&self, path: &str) -> Result<Value, AgentError> {
        match self.get(path)? {
            (200, v) => Ok(v),
            (st, v) => Err(self.fail(format!("GET {path}: {st} {v}"))),
        }
    }
}

/// A plain or a TLS connection.
trait ReadWrite: Read + Write {}
impl<T: Read + Write> ReadWrite for T {}

/// A reader whose read, interrupted by SIGINT / SIGTERM (the handler's `EINTR`), fails instead
/// of being tried again, as `read_to_end` would: a stop does not wait for the long poll in
/// flight (up to `--wait-ms`).
struct UntilStop<R>(R);

impl<R: Read> Read for UntilStop<R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        match self.0.read(buf) {
            Err(e) if e.kind() == io::ErrorKind::Interrupted && crate::sys::stop_requested() => {
                Err(io::Error::other("stopped (SIGINT / SIGTERM)"))
            }
            r => r,
        }
    }
}

/// Split an HTTP/1.1 response into its status and body (`Content-Length`, chunked, or to the
/// end of the connection).
pub fn parse_response(raw: &[u8]) -> Result<(u16, Vec<u8>), String> {
    let end =
        raw.windows(4).position(|w| w == b"\r\n\r\n").ok_or("no end of headers in the response")?;
    let head = std::str::from_utf8(&raw[..end]).map_err(|_| "headers are not UTF-8")?;
    let mut lines = head.split("\r\n");
    let status_line = lines.next().unwrap_or_default();
    let status: u16 = status_line
        .split_whitespace()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .ok_or_else(|| format!("bad status line {status_line:?}"))?;
    let mut length = None;
    let mut chunked = false;
    for l in lines {
        let Some((k, v)) = l.split_once(':') else { continue };
        let (k, v) = (k.trim().to_ascii_lowercase(), v.trim());
        if k == "content-length" {
            length = Some(v.parse::<usize>().map_err(|_| format!("bad Content-Length {v:?}"))?);
        } else if k == "transfer-encoding" && v.eq_ignore_ascii_case("chunked") {
            chunked = true;
        }
    }
    let body = &raw[end + 4..];
    if chunked {
        let mut out = Vec::new();
        let mut rest = body;
        loop {
            let nl = rest
                .windows(2)
                .position(|w| w == b"\r\n")
                .ok_or("a chunk without its size line")?;
            let size_text = std::str::from_utf8(&rest[..nl]).map_err(|_| "bad chunk size")?;
            let size = usize::from_str_radix(size_text.split(';').next().unwrap_or("").trim(), 16)
                .map_err(|_| format!("bad chunk size {size_text:?}"))?;
            rest = &rest[nl + 2..];
            if size == 0 {
                return Ok((status, out));
            }
            if rest.len() < size + 2 {
                return Err("a chunk shorter than its size".into());
            }
            out.extend_from_slice(&rest[..size]);
            rest = &rest[size + 2..];
        }
    }
    match length {
        Some(n) if body.len() < n => Err(format!("{} of {n} body bytes", body.len())),
        Some(n) => Ok((status, body[..n].to_vec())),
        None => Ok((status, body.to_vec())),
    }
}

// ------------------------------------------------------------------- flows to entries

/// One admitted flow of a source host, as the agent programs it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FlowEntry {
    /// The controller's id.
    pub id: u64,
    /// Destination host.
    pub dst: String,
    /// Tagger keys: the flow's match to each address of the destination.
    pub matches: Vec<Match>,
    /// Tag stack, outermost first.
    pub tags: Vec<u16>,
    /// Switches and hosts of the path (for the record).
    pub path: Vec<String>,
    /// Token-bucket rate (bit/s) and burst (bytes) of its shaper.
    pub shaper: (u64, u64),
    /// The end-to-end delay the controller guarantees on this path (ns), if it said.
    pub guarantee_ns: Option<u64>,
}

/// Why a flow cannot be programmed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum FlowError {
    /// The flow has no `match`: the agent cannot tell its packets.
    #[error(
        "flow {0} has no match: its packets cannot be told from others (request it with \"match\")"
    )]
    NoMatch(u64),
    /// The destination is not a host of the testbed.
    #[error("flow {id}: destination {dst:?} is not a host of the testbed")]
    UnknownDestination {
        /// Flow.
        id: u64,
        /// Its destination.
        dst: String,
    },
    /// More tags than the tagger pushes.
    #[error("flow {id}: {tags} tags, the tagger pushes at most {}", crate::tagger::MAX_TAGS)]
    TooManyTags {
        /// Flow.
        id: u64,
        /// Its tags.
        tags: usize,
    },
    /// The service's answer lacks a field or has the wrong type.
    #[error("flow {id}: {field}: {what}")]
    Field {
        /// Flow (0 if even the id was unreadable).
        id: u64,
        /// Field.
        field: &'static str,
        /// What was expected.
        what: &'static str,
    },
}

/// Read a flow as `GET /flows/ID` shows it; `Ok(None)` if its source is not `host`.
/// `addresses`: every host's addresses.
pub fn flow_entry(
    flow: &Value,
    host: &str,
    addresses: &AddressBook,
) -> Result<Option<FlowEntry>, FlowError> {
    let id = flow["id"].as_u64().ok_or(FlowError::Field {
        id: 0,
        field: "id",
        what: "a whole number",
    })?;
    let field = |field: &'static str, what: &'static str| FlowError::Field { id, field, what };
    let src = flow["src"].as_str().ok_or_else(|| field("src", "a host name"))?;
    if src != host {
        return Ok(None);
    }
    let dst = flow["dst"].as_str().ok_or_else(|| field("dst", "a host name"))?;
    let m = flow.get("match").filter(|m| !m.is_null()).ok_or(FlowError::NoMatch(id))?;
    let proto = match m["proto"].as_str() {
        Some("udp") => 17,
        Some("tcp") => 6,
        _ => return Err(field("match.proto", "\"udp\" or \"tcp\"")),
    };
    let port = |v: &Value| v.as_u64().and_then(|p| u16::try_from(p).ok());
    let dst_port = port(&m["dst_port"]).ok_or_else(|| field("match.dst_port", "a port"))?;
    let src_port = match m.get("src_port") {
        None | Some(Value::Null) => 0,
        Some(v) => port(v).ok_or_else(|| field("match.src_port", "a port"))?,
    };
    let addrs = addresses
        .get(dst)
        .ok_or_else(|| FlowError::UnknownDestination { id, dst: dst.to_owned() })?;
    let matches = addrs.iter().map(|&a| Match { dst: a, proto, src_port, dst_port }).collect();
    let tags = flow["tags"]
        .as_array()
        .ok_or_else(|| field("tags", "a list of tags"))?
        .iter()
        .map(|t| t.as_u64().and_then(|t| u16::try_from(t).ok()).filter(|&t| t < 4096))
        .collect::<Option<Vec<u16>>>()
        .ok_or_else(|| field("tags", "VLAN ids, 0-4095"))?;
    if tags.len() > crate::tagger::MAX_TAGS {
        return Err(FlowError::TooManyTags { id, tags: tags.len() });
    }
    let path = flow["path"]
        .as_array()
        .map(|p| p.iter().filter_map(|n| n.as_str().map(str::to_owned)).collect())
        .unwrap_or_default();
    let rate =
        flow["shaper"]["rate_bps"].as_u64().ok_or_else(|| field("shaper.rate_bps", "bit/s"))?;
    let burst = flow["shaper"]["burst_bytes"]
        .as_u64()
        .ok_or_else(|| field("shaper.burst_bytes", "bytes"))?;
    let guarantee_ns = flow["guarantee_ns"].as_u64();
    Ok(Some(FlowEntry {
        id,
        dst: dst.to_owned(),
        matches,
        tags,
        path,
        shaper: (rate, burst),
        guarantee_ns,
    }))
}

// -------------------------------------------------------------------------- the shaper

/// `tc` on one interface of a namespace.
#[derive(Debug)]
struct Tc {
    netns: Option<PathBuf>,
    iface: String,
    /// The interface's rtnetlink socket and index, for its root qdisc, classes and their
    /// counters; `Err`: why it could not be opened, and all of that goes through `tc`.
    rtnl: Result<(crate::sys::rtnl::Rtnl, u32), String>,
}

impl Tc {
    fn run(&self, args: &[String]) -> Result<String, AgentError> {
        crate::tcp::run_tc(self.netns.as_deref(), args)
            .map_err(|e| AgentError::Kernel(e.to_string()))
    }

    fn words(&self, w: &str) -> Vec<String> {
        w.replace("IF", &self.iface).split_whitespace().map(str::to_owned).collect()
    }

    fn new(netns: Option<PathBuf>, iface: &str) -> Tc {
        let rtnl = crate::sys::rtnl::Rtnl::open(netns.as_deref()).and_then(|r| {
            let index = match netns.as_deref() {
                Some(p) => crate::sys::in_netns(p, || crate::sys::if_index(iface))?,
                None => crate::sys::if_index(iface)?,
            };
            Ok((r, index))
        });
        Tc { netns, iface: iface.to_owned(), rtnl: rtnl.map_err(|e| e.to_string()) }
    }

    /// How the shaper is programmed: `"rtnetlink"`, or `tc` and why.
    fn way(&self) -> String {
        match &self.rtnl {
            Ok(_) => "rtnetlink".to_owned(),
            Err(e) => format!("tc (no rtnetlink socket: {e})"),
        }
    }

    fn kernel_err(&self, what: &str) -> impl Fn(std::io::Error) -> AgentError + '_ {
        let what = what.to_owned();
        move |e| AgentError::Kernel(format!("{}: {what}: {e}", self.iface))
    }

    fn setup(&self) -> Result<(), AgentError> {
        if let Ok((rtnl, index)) = &self.rtnl {
            let major = HTB_MAJOR as u16;
            return rtnl.htb_root(*index, major, 0).map_err(self.kernel_err("root HTB qdisc"));
        }
        eprintln!("latnet-switch agent: {}: shaping with {}", self.iface, self.way());
        self.run(&self.words("qdisc replace dev IF root handle 1: htb default 0")).map(drop)
    }

    fn teardown(&self) {
        if let Ok((rtnl, index)) = &self.rtnl {
            let _ = rtnl.del_root(*index);
            return;
        }
        let _ = self.run(&self.words("qdisc del dev IF root"));
    }

    /// Shape class `1:minor` to `rate` bit/s with a bucket of `burst` bytes, counting
    /// `overhead` more bytes per frame than the kernel's length of it.
    fn set_class(
        &self,
        minor: u32,
        rate: u64,
        burst: u64,
        overhead: u32,
    ) -> Result<(), AgentError> {
        let rate = rate.max(8);
        let burst = burst.max(1);
        if let Ok((rtnl, index)) = &self.rtnl {
            let c = crate::sys::rtnl::HtbClass {
                rate_bps: rate,
                ceil_bps: rate,
                burst,
                cburst: burst,
                quantum: 1600,
                overhead: u16::try_from(overhead).unwrap_or(u16::MAX),
            };
            return rtnl
                .htb_class(*index, HTB_MAJOR << 16, (HTB_MAJOR << 16) | minor, &c)
                .map_err(self.kernel_err(&format!("class 1:{minor:x}")));
        }
        let w = format!(
            "class replace dev IF parent 1: classid 1:{minor:x} htb rate {rate}bit ceil {rate}bit \
             burst {burst}b cburst {burst}b quantum 1600 overhead {overhead}"
        );
        self.run(&self.words(&w)).map(drop)
    }

    fn del_class(&self, minor: u32) -> Result<(), AgentError> {
        if let Ok((rtnl, index)) = &self.rtnl {
            return rtnl
                .del_class(*index, (HTB_MAJOR << 16) | minor)
                .map_err(self.kernel_err(&format!("class 1:{minor:x}")));
        }
        self.run(&self.words(&format!("class del dev IF classid 1:{minor:x}"))).map(drop)
    }

    /// Per class minor: bytes and packets sent, drops, overlimits, backlog.
    fn class_stats(&self) -> BTreeMap<u32, Value> {
        if let Ok((rtnl, index)) = &self.rtnl {
            return rtnl.class_stats(*index).map(|c| class_stats_of(&c)).unwrap_or_default();
        }
        self.run(&self.words("-s class show dev IF"))
            .map(|t| parse_class_stats(&t))
            .unwrap_or_default()
    }
}

/// The counters of the HTB classes of major `1:` in `classes`, per minor, as
/// [`parse_class_stats`] reads them from `tc -s class show`.
pub fn class_stats_of(classes: &[crate::sys::rtnl::ClassStats]) -> BTreeMap<u32, Value> {
    classes
        .iter()
        .filter(|c| c.classid >> 16 == HTB_MAJOR && c.kind() == "htb")
        .map(|c| {
            let v = json!({
                "sent_bytes": c.bytes, "sent_packets": c.packets, "dropped": c.drops,
                "overlimits": c.overlimits, "backlog_bytes": c.backlog_bytes,
                "backlog_packets": c.backlog_packets,
            });
            (c.classid & 0xffff, v)
        })
        .collect()
}

/// Read `tc -s class show` (text: iproute2 6.1 prints no JSON for classes) into, per class
/// minor of `1:`, bytes and packets sent, drops, overlimits and backlog.
pub fn parse_class_stats(text: &str) -> BTreeMap<u32, Value> {
    let mut out = BTreeMap::new();
    let mut minor = None;
    let num = |w: Option<&str>| -> Option<u64> {
        w.map(|w| w.trim_matches(|c: char| !c.is_ascii_digit())).and_then(|w| w.parse().ok())
    };
    for line in text.lines() {
        let w: Vec<&str> = line.split_whitespace().collect();
        match w.as_slice() {
            ["class", "htb", handle, ..] => {
                minor = handle.strip_prefix("1:").and_then(|m| u32::from_str_radix(m, 16).ok());
                if let Some(m) = minor {
                    out.insert(m, json!({}));
                }
            }
            // Sent 3000 bytes 2 pkt (dropped 0, overlimits 1 requeues 0)
            ["Sent", bytes, "bytes", pkts, "pkt", "(dropped", dropped, "overlimits", over, ..] => {
                if let Some(v) = minor.and_then(|m| out.get_mut(&m)) {
                    v["sent_bytes"] = json!(num(Some(bytes)));
                    v["sent_packets"] = json!(num(Some(pkts)));
                    v["dropped"] = json!(num(Some(dropped)));
                    v["overlimits"] = json!(num(Some(over)));
                }
            }
            // backlog 0b 0p requeues 0
            ["backlog", bytes, pkts, ..] => {
                if let Some(v) = minor.and_then(|m| out.get_mut(&m)) {
                    v["backlog_bytes"] = json!(num(Some(bytes)));
                    v["backlog_packets"] = json!(num(Some(pkts)));
                }
            }
            _ => {}
        }
    }
    out
}

// ---------------------------------------------------------------------------- the agent

/// One host the agent serves.
#[derive(Debug, Clone)]
pub struct HostSpec {
    /// Its name (the controller's and the scenario's).
    pub name: String,
    /// Its namespace file (`/run/netns/NAME`); `None`: the agent's own.
    pub netns: Option<PathBuf>,
    /// Its interfaces.
    pub ifaces: Vec<String>,
}

/// In what order the agent applies a request's moves and its new flow.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Order {
    /// One moved flow at a time, each once the flow moved before it has drained its old path
    /// (its old guarantee), the new flow last: only states the controller checked.
    Sequential,
    /// Every move, then the new flow, as fast as the agent goes.
    Together,
}

/// How the agent runs.
#[derive(Debug, Clone)]
pub struct AgentConfig {
    /// The controller service.
    pub controller: Controller,
    /// The hosts served.
    pub hosts: Vec<HostSpec>,
    /// Every host's addresses (destinations).
    pub addresses: AddressBook,
    /// Time between polls.
    pub poll: StdDuration,
    /// How long each poll may wait at the service for the next entry (`GET /log?wait=`, a
    /// long poll: the agent hears of a decision when it is committed); `None`: plain polls
    /// every `poll`. A service that does not know `wait` is polled plainly.
    pub wait: Option<StdDuration>,
    /// Shape admitted flows with HTB classes.
    pub shape: bool,
    /// The order of a request's moves and new flow.
    pub order: Order,
    /// Install best-effort routes.
    pub routes: bool,
    /// Shaper rates are divided by this (the testbed runs this many times slower).
    pub dilation: u64,
    /// Status file, rewritten after every change and once a second.
    pub status: Option<PathBuf>,
    /// Stop after this long (`None`: until SIGINT / SIGTERM).
    pub duration: Option<StdDuration>,
    /// In the sequential order, how long to wait for another agent's step before this one
    /// (registering with the service and reporting its own steps); `None`: keep the order
    /// only among this agent's hosts.
    pub peer_wait: Option<StdDuration>,
}

/// One step of the order a request's changes are applied in: a moved flow, or the new one.
#[derive(Debug, Clone, Copy)]
struct Step {
    flow: u64,
    seq: i64,
    /// Applied by this agent (which waited for its drain already).
    ours: bool,
}

/// How this agent keeps the sequential order with agents on other hosts.
#[derive(Debug, Default)]
struct Peers {
    /// Why it does not (`None`: it does, or will once registered).
    off: Option<String>,
    registered: bool,
    next_register_ns: u64,
    /// Another agent's steps asked about, by the answer that ended the wait (`applied`,
    /// `unserved`, `removed`), the time spent asking (the service holds a question until the
    /// step is done), and the waits that ran out.
    asked: BTreeMap<String, u64>,
    waited_ns: u64,
    timeouts: u64,
    /// Steps reported, and reports that failed.
    reports: u64,
    report_errors: u64,
    /// The step before the next one.
    prev: Option<Step>,
    /// Why the service refused this agent's hosts (another agent serves one).
    conflict: Option<String>,
}

/// A flow as programmed at one host.
#[derive(Debug)]
struct Programmed {
    entry: FlowEntry,
    minor: Option<u32>,
    /// Counters of matches already removed (a flow whose match set changed).
    carried: Counters,
}

struct HostState {
    spec: HostSpec,
    tagger: Tagger,
    tcs: Vec<Tc>,
    flows: BTreeMap<u64, Programmed>,
    routes: BTreeMap<String, (Vec<Match>, Vec<u16>)>,
    /// Flows of this host that cannot be programmed, and why.
    refused: BTreeMap<u64, String>,
    /// Shaper classes of removed flows, kept until the packets queued in them are sent (or
    /// until the instant given): deleting a class drops its queue.
    retiring: Vec<(u32, u64)>,
}

impl std::fmt::Debug for HostState {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HostState")
            .field("host", &self.spec.name)
            .field("flows", &self.flows.len())
            .finish()
    }
}

/// The agent: its hosts' taggers and shapers, and what it has applied.
#[derive(Debug)]
pub struct Agent {
    cfg: AgentConfig,
    hosts: Vec<HostState>,
    last_seq: i64,
    /// The log's end when the agent read the controller's state (`GET /flows`).
    synced_seq: i64,
    /// The service's store (`GET /log`'s `store`) when it did.
    store: Option<String>,
    /// How often it read the state again because the service's log was another.
    resyncs: u64,
    catch_ups: u64,
    polls: u64,
    errors: u64,
    last_error: Option<String>,
    changes: Vec<Value>,
    /// Changes dropped from `changes` to bound it.
    changes_dropped: u64,
    started_ns: u64,
    /// The name it registers under (first host, number of hosts, process id).
    name: String,
    peers: Peers,
}

fn kernel(what: &str) -> impl Fn(io::Error) -> AgentError + '_ {
    move |e| AgentError::Kernel(format!("{what}: {e}"))
}

impl Agent {
    /// Load a tagger per host, attach it to the host's interfaces and set up the shapers.
    pub fn start(cfg: AgentConfig) -> Result<Agent, AgentError> {
        if cfg.dilation == 0 {
            return Err(AgentError::Config("--dilation: expected a whole number >= 1".into()));
        }
        let known: Vec<String> = serde_json::from_value(cfg.controller.get_ok("/hosts")?)
            .map_err(|e| cfg.controller.fail(format!("GET /hosts: {e}")))?;
        let mut hosts = Vec::new();
        for spec in &cfg.hosts {
            if !known.contains(&spec.name) {
                return Err(AgentError::Config(format!(
                    "host {:?} is not a host of the controller at {} (it has {})",
                    spec.name,
                    cfg.controller.url(),
                    known.len()
                )));
            }
            let name: String = format!("lnag_{}", spec.name).chars().take(15).collect();
            let mut tagger =
                Tagger::load(&name).map_err(kernel(&format!("{}: tagger", spec.name)))?;
            let mut tcs = Vec::new();
            for i in &spec.ifaces {
                tagger
                    .attach_egress(spec.netns.as_deref(), i)
                    .map_err(kernel(&format!("{}: {i}", spec.name)))?;
                let tc = Tc::new(spec.netns.clone(), i);
                if cfg.shape {
                    tc.setup()?;
                }
                tcs.push(tc);
            }
            hosts.push(HostState {
                spec: spec.clone(),
                tagger,
                tcs,
                flows: BTreeMap::new(),
                routes: BTreeMap::new(),
                refused: BTreeMap::new(),
                retiring: Vec::new(),
            });
        }
        Ok(Agent {
            hosts,
            last_seq: 0,
            synced_seq: 0,
            store: None,
            resyncs: 0,
            catch_ups: 0,
            polls: 0,
            errors: 0,
            last_error: None,
            changes: Vec::new(),
            changes_dropped: 0,
            started_ns: crate::sys::mono_ns(),
            name: format!(
                "{}+{}@{}",
                cfg.hosts.first().map_or("", |h| h.name.as_str()),
                cfg.hosts.len().saturating_sub(1),
                std::process::id()
            ),
            peers: Peers {
                off: match (cfg.order, cfg.peer_wait) {
                    (Order::Together, _) => Some("--order together".into()),
                    (_, None) => Some("--peer-wait-ms 0".into()),
                    _ => None,
                },
                ..Peers::default()
            },
            cfg,
        })
    }

    /// Read what the controller holds now: routes, every admitted flow, the log's end.
    pub fn sync(&mut self) -> Result<(), AgentError> {
        let ctl = self.cfg.controller.clone();
        // the log's end first: anything logged after it is polled again (applying is idempotent)
        let health = ctl.get_ok("/health")?;
        self.last_seq = health["last"].as_i64().unwrap_or(0);
        self.store = health["store"].as_str().map(str::to_owned);
        self.synced_seq = self.last_seq;
        if self.cfg.routes {
            for h in 0..self.hosts.len() {
                let name = self.hosts[h].spec.name.clone();
                let r = ctl.get_ok(&format!("/routes/{name}"))?;
                self.set_routes(h, &r)?;
            }
        }
        let flows = ctl.get_ok("/flows")?;
        for f in flows.as_array().into_iter().flatten() {
            self.apply_flow(f, self.last_seq, "present")?;
        }
        self.peers.prev = None;
        self.register();
        // a registration of an agent that stopped without saying so lapses within seconds
        let until = crate::sys::mono_ns() + 4_000_000_000;
        while let Some(why) = self.peers.conflict.take() {
            if crate::sys::mono_ns() >= until {
                return Err(AgentError::Config(format!("{}: {why}", ctl.url())));
            }
            crate::sys::sleep_until(crate::sys::mono_ns() + 500_000_000);
            self.peers.next_register_ns = 0;
            self.register();
        }
        self.write_status();
        Ok(())
    }

    fn set_routes(&mut self, h: usize, r: &Value) -> Result<(), AgentError> {
        let addresses = &self.cfg.addresses;
        let st = &mut self.hosts[h];
        for rt in r["routes"].as_array().into_iter().flatten() {
            let (Some(dst), Some(tags)) = (rt["dst"].as_str(), rt["tags"].as_array()) else {
                continue;
            };
            let Some(addrs) = addresses.get(dst) else { continue };
            let tags: Vec<u16> = tags
                .iter()
                .filter_map(|t| t.as_u64())
                .filter_map(|t| u16::try_from(t).ok())
                .collect();
            let matches: Vec<Match> = addrs.iter().map(|&a| Match::any_to(a)).collect();
            for m in &matches {
                st.tagger
                    .set(m, &Action { tags: tags.clone(), dscp: None, class: None })
                    .map_err(kernel(&format!("{}: route to {dst}", st.spec.name)))?;
            }
            st.routes.insert(dst.to_owned(), (matches, tags));
        }
        Ok(())
    }

    /// Program `flow` (as `GET /flows/ID` shows it) at its source, if that is one of ours.
    fn apply_flow(&mut self, flow: &Value, seq: i64, why: &str) -> Result<(), AgentError> {
        for h in 0..self.hosts.len() {
            let name = self.hosts[h].spec.name.clone();
            let e = match flow_entry(flow, &name, &self.cfg.addresses) {
                Ok(Some(e)) => e,
                Ok(None) => continue,
                Err(err) => {
                    let id = flow["id"].as_u64().unwrap_or(0);
                    refuse(&mut self.hosts[h], &name, id, &err.to_string());
                    continue;
                }
            };
            let (shape, dilation) = (self.cfg.shape, self.cfg.dilation);
            let st = &mut self.hosts[h];
            st.refused.remove(&e.id);
            let old = st.flows.remove(&e.id);
            let unchanged = old.as_ref().is_some_and(|o| o.entry == e);
            let minor = match old.as_ref().and_then(|o| o.minor) {
                Some(m) => Some(m),
                // the smallest class number no flow of this host has (1:1 is the root's)
                None if shape => {
                    let used: std::collections::BTreeSet<u32> = st
                        .flows
                        .values()
                        .filter_map(|p| p.minor)
                        .chain(st.retiring.iter().map(|r| r.0))
                        .collect();
                    match (2..=0xfffe).find(|m| !used.contains(m)) {
                        Some(m) => Some(m),
                        None => {
                            refuse(st, &name, e.id, "no HTB class number left (65,533 flows)");
                            if let Some(o) = old {
                                st.flows.insert(e.id, o);
                            }
                            continue;
                        }
                    }
                }
                None => None,
            };
            // the class before the tagger names it; a move keeps its shaper. A class the kernel
            // refuses (a burst HTB cannot hold, ...) refuses this flow, not the agent
            if shape && old.as_ref().map(|o| o.entry.shaper) != Some(e.shaper) {
                let (rate, burst) = e.shaper;
                let overhead = if e.tags.is_empty() { 0 } else { 4 };
                let made = st.tcs.iter().try_for_each(|tc| {
                    tc.set_class(minor.unwrap_or(2), rate / dilation, burst, overhead)
                });
                if let Err(err) = made {
                    refuse(st, &name, e.id, &format!("its shaper: {err}"));
                    match old {
                        Some(o) => {
                            st.flows.insert(e.id, o);
                        }
                        None => {
                            for tc in &st.tcs {
                                let _ = tc.del_class(minor.unwrap_or(2));
                            }
                        }
                    }
                    continue;
                }
            }
            let action = Action {
                tags: e.tags.clone(),
                dscp: Some(ADMITTED_DSCP),
                class: minor.map(|m| (HTB_MAJOR << 16) | m),
            };
            let mut carried = old.as_ref().map(|o| o.carried).unwrap_or_default();
            // packets see the change from somewhere in [t_start, t_ns]
            let t_start = crate::sys::mono_ns();
            if let Some(o) = &old {
                for m in o.entry.matches.iter().filter(|m| !e.matches.contains(m)) {
                    if let Some(c) = st.tagger.remove(m).map_err(kernel("tagger"))? {
                        carried = carried + c;
                    }
                }
            }
            for m in &e.matches {
                st.tagger.set(m, &action).map_err(kernel(&format!("{name}: flow {}", e.id)))?;
            }
            let t_done = crate::sys::mono_ns();
            if !unchanged {
                let what = if old.is_some() { "move" } else { "add" };
                self.record(json!({
                    "t_start_ns": t_start, "t_ns": t_done, "seq": seq, "host": name, "flow": e.id,
                    "what": what, "why": why, "tags": e.tags, "path": e.path,
                    "guarantee_ns": e.guarantee_ns,
                }));
            }
            self.hosts[h].flows.insert(e.id, Programmed { entry: e, minor, carried });
        }
        Ok(())
    }

    fn remove_flow(&mut self, id: u64, seq: i64, why: &str) -> Result<(), AgentError> {
        for h in 0..self.hosts.len() {
            let st = &mut self.hosts[h];
            st.refused.remove(&id);
            let Some(p) = st.flows.remove(&id) else { continue };
            let t_start = crate::sys::mono_ns();
            for m in &p.entry.matches {
                st.tagger.remove(m).map_err(kernel("tagger"))?;
            }
            let t_done = crate::sys::mono_ns();
            // the class only once no packet is classified into it and the packets queued in it
            // were sent (`reap`)
            if let Some(minor) = p.minor {
                st.retiring.push((minor, t_done + RETIRE_MAX_NS));
            }
            let host = st.spec.name.clone();
            self.record(json!({
                "t_start_ns": t_start, "t_ns": t_done, "seq": seq, "host": host, "flow": id,
                "what": "remove", "why": why, "tags": [], "path": [],
            }));
        }
        Ok(())
    }

    /// Delete the shaper classes of removed flows whose queues are empty (or that were kept
    /// [`RETIRE_MAX_NS`]). A class left behind is said; the flow is gone either way.
    pub fn reap(&mut self) {
        let now = crate::sys::mono_ns();
        for st in &mut self.hosts {
            if st.retiring.is_empty() {
                continue;
            }
            let stats: Vec<BTreeMap<u32, Value>> = st.tcs.iter().map(Tc::class_stats).collect();
            let (tcs, name) = (&st.tcs, &st.spec.name);
            st.retiring.retain(|&(minor, until)| {
                let queued = stats.iter().any(|s| {
                    s.get(&minor).and_then(|c| c["backlog_packets"].as_u64()).unwrap_or(0) > 0
                });
                if queued && now < until {
                    return true;
                }
                for tc in tcs {
                    if let Err(e) = tc.del_class(minor) {
                        eprintln!("latnet-switch agent: {name}: class 1:{minor:x}: {e}");
                    }
                }
                false
            });
        }
    }

    /// Poll the log once and apply what changed. Returns how many entries were read.
    pub fn poll(&mut self) -> Result<usize, AgentError> {
        self.polls += 1;
        let ctl = self.cfg.controller.clone();
        let mut path = format!("/log?after={}&limit=1000", self.last_seq);
        let mut wait = self.cfg.wait.unwrap_or_default();
        if let Some(end) = self.cfg.duration.map(|d| self.started_ns + d.as_nanos() as u64) {
            let left = end.saturating_sub(crate::sys::mono_ns());
            wait = wait.min(StdDuration::from_nanos(left));
        }
        if wait.as_millis() > 0 {
            path += &format!("&wait={}", wait.as_millis());
        }
        let page = match ctl.get_waiting(&path, wait)? {
            (200, page) => page,
            // a service that does not know `wait`: poll it plainly from now on
            (400, e) if e["field"] == "wait" && self.cfg.wait.is_some() => {
                eprintln!(
                    "latnet-switch agent: {} does not hold polls ({}): polling every {:?}",
                    ctl.url(),
                    e["error"],
                    self.cfg.poll
                );
                self.cfg.wait = None;
                return Ok(0);
            }
            // entries this agent had not read were folded into the service's snapshot
            (410, gone) if gone["store"].as_str() == self.store.as_deref() => {
                self.catch_up()?;
                return Ok(0);
            }
            (410, _) => {
                self.resync()?;
                return Ok(0);
            }
            (st, v) => return Err(ctl.fail(format!("GET {path}: {st} {v}"))),
        };
        // another store (a service started on another file), or its log went back: what was
        // programmed is not what it decided; undo it and read its state again
        let store = page["store"].as_str().map(str::to_owned);
        if store != self.store || page["last"].as_i64().is_some_and(|l| l < self.last_seq) {
            eprintln!(
                "latnet-switch agent: {} now has another log (store {:?}, was {:?}): reading its state again",
                ctl.url(),
                store,
                self.store
            );
            self.resync()?;
            return Ok(0);
        }
        let entries = page["entries"].as_array().cloned().unwrap_or_default();
        for e in &entries {
            let seq = e["seq"].as_i64().unwrap_or(self.last_seq);
            let ids = |k: &str| -> Vec<u64> {
                e[k].as_array().into_iter().flatten().filter_map(Value::as_u64).collect()
            };
            match (e["op"].as_str(), e["outcome"].as_str()) {
                (Some("request"), Some("admitted")) => {
                    // the moved flows first, then the new one (the controller checked the
                    // moves with the new flow absent)
                    self.steps(&ids("rerouted"), e["id"].as_u64(), seq)?;
                }
                (Some("request"), Some("refused")) => {
                    self.steps(&ids("moved"), None, seq)?;
                }
                (Some("remove"), _) => {
                    if let Some(id) = e["id"].as_u64() {
                        self.remove_flow(id, seq, "removed")?;
                    }
                }
                _ => {}
            }
            self.last_seq = seq.max(self.last_seq);
        }
        // a short page read everything logged when it was answered
        if entries.len() < 1000 {
            if let Some(last) = page["last"].as_i64() {
                self.last_seq = self.last_seq.max(last);
            }
        }
        if !entries.is_empty() {
            self.write_status();
        }
        Ok(entries.len())
    }

    /// Re-tag the flows `moved` by log entry `seq`, then tag the flow it admitted (`new`), in
    /// the agent's [`Order`]: sequentially, each once the flow moved before it has had its old
    /// guarantee (times the dilation) to drain its old path (the states the controller
    /// checked, as `latnet chameleon transitions` simulates them), or all at once. In the
    /// sequential order a step of another agent's host is waited for through the service
    /// ([`Agent::wait_for_prev`]) and each step of this agent's is reported once done.
    fn steps(&mut self, moved: &[u64], new: Option<u64>, seq: i64) -> Result<(), AgentError> {
        let sequential = self.cfg.order == Order::Sequential;
        let all = moved.iter().map(|&id| (id, "moved")).chain(new.map(|id| (id, "admitted")));
        for (id, why) in all {
            let flow = match self.cfg.controller.get(&format!("/flows/{id}"))? {
                (200, f) => Some(f),
                (404, _) => None,
                (st, v) => {
                    return Err(self.cfg.controller.fail(format!("GET /flows/{id}: {st} {v}")))
                }
            };
            let ours = match &flow {
                Some(f) => self.hosts.iter().any(|h| f["src"].as_str() == Some(&h.spec.name)),
                // removed since: ours if this agent programmed it
                None => self.hosts.iter().any(|h| h.flows.contains_key(&id)),
            };
            if ours && sequential {
                self.wait_for_prev();
            }
            let step = Step { flow: id, seq, ours };
            self.peers.prev = Some(step);
            if !ours {
                continue;
            }
            let old = self
                .hosts
                .iter()
                .find_map(|st| st.flows.get(&id))
                .and_then(|p| p.entry.guarantee_ns)
                .filter(|_| why == "moved");
            match &flow {
                Some(f) => self.apply_flow(f, seq, why)?,
                None => self.remove_flow(id, seq, "removed")?,
            }
            if sequential {
                if let Some(g) = old {
                    crate::sys::sleep_until(
                        crate::sys::mono_ns() + g.saturating_mul(self.cfg.dilation),
                    );
                }
                self.report(step);
            }
        }
        Ok(())
    }

    /// In the sequential order, before applying a step: if the step before it was another
    /// agent's, wait (at most `peer_wait`) until the service says it is done.
    fn wait_for_prev(&mut self) {
        let Some(prev) = self.peers.prev.filter(|p| !p.ours) else { return };
        if self.peers.off.is_some() {
            return;
        }
        let Some(limit) = self.cfg.peer_wait else { return };
        let ctl = self.cfg.controller.clone();
        let started = crate::sys::mono_ns();
        let until = started + limit.as_nanos() as u64;
        loop {
            let now = crate::sys::mono_ns();
            // at most a second at a time, renewing this agent's registration in between
            let chunk =
                StdDuration::from_nanos(until.saturating_sub(now)).min(StdDuration::from_secs(1));
            let path =
                format!("/applied?flow={}&seq={}&wait={}", prev.flow, prev.seq, chunk.as_millis());
            match ctl.get_waiting(&path, chunk) {
                Ok((200, v)) if v["done"] == true => {
                    let why = v["why"].as_str().unwrap_or("").to_owned();
                    *self.peers.asked.entry(why).or_default() += 1;
                    break;
                }
                Ok((200, _)) if crate::sys::mono_ns() < until => self.register(),
                Ok((200, _)) => {
                    self.peers.timeouts += 1;
                    eprintln!(
                        "latnet-switch agent: flow {} (log entry {}) was not reported applied \
                         within {limit:?}: going on",
                        prev.flow, prev.seq
                    );
                    break;
                }
                // a service that cannot answer this at all: for good
                Ok((st @ (400 | 401 | 403 | 404 | 405), v)) => {
                    self.peers.off = Some(format!("GET /applied: {st} {v}"));
                    eprintln!(
                        "latnet-switch agent: {} cannot say when another agent's step is done \
                         ({st} {v}): the sequential order holds among this agent's hosts only",
                        ctl.url()
                    );
                    break;
                }
                // anything else (a service stopping): go on this time
                Ok((st, v)) => {
                    self.errors += 1;
                    self.last_error = Some(format!("GET /applied: {st} {v}"));
                    break;
                }
                Err(e) => {
                    self.errors += 1;
                    self.last_error = Some(e.to_string());
                    break;
                }
            }
        }
        self.peers.waited_ns += crate::sys::mono_ns() - started;
    }

    /// Register with the service as serving this agent's hosts, at most once a second (a
    /// registration lasts a few seconds).
    fn register(&mut self) {
        let now = crate::sys::mono_ns();
        if self.peers.off.is_some() || now < self.peers.next_register_ns {
            return;
        }
        self.peers.next_register_ns = now + 1_000_000_000;
        let hosts: Vec<&str> = self.hosts.iter().map(|h| h.spec.name.as_str()).collect();
        let ctl = self.cfg.controller.clone();
        match ctl.post("/agents", &json!({"name": self.name, "hosts": hosts})) {
            Ok((200, _)) => self.peers.registered = true,
            // the token does not allow it, or the service has no agents: for good
            Ok((st @ (401 | 403 | 404 | 405), v)) => {
                let why = format!("POST /agents: {st} {}", v["error"].as_str().unwrap_or(""));
                eprintln!(
                    "latnet-switch agent: {} does not register agents ({why}): the sequential \
                     order holds among this agent's hosts only",
                    ctl.url()
                );
                self.peers.off = Some(why);
                self.peers.registered = false;
            }
            // another agent serves one of these hosts: both would program it
            Ok((409, v)) => {
                let why = v["error"].as_str().unwrap_or("a host is served by another agent");
                eprintln!("latnet-switch agent: {}: {why}", ctl.url());
                self.peers.conflict = Some(why.to_owned());
                self.errors += 1;
                self.last_error = Some(format!("POST /agents: 409 {why}"));
            }
            // anything else (a service stopping, a bad gateway): again in a second
            Ok((st, v)) => {
                self.errors += 1;
                self.last_error = Some(format!("POST /agents: {st} {v}"));
            }
            Err(e) => {
                self.errors += 1;
                self.last_error = Some(e.to_string());
            }
        }
    }

    /// Tell the service that `step` (this agent's) is done.
    fn report(&mut self, step: Step) {
        if self.peers.off.is_some() {
            return;
        }
        let ctl = self.cfg.controller.clone();
        match ctl.post("/applied", &json!({"flow": step.flow, "seq": step.seq})) {
            // 404: the flow was removed meanwhile; nobody waits for it
            Ok((200 | 404, _)) => self.peers.reports += 1,
            Ok(_) | Err(_) => self.peers.report_errors += 1,
        }
    }

    /// Keep a change in the status (at most [`MAX_CHANGES`]).
    fn record(&mut self, change: Value) {
        if self.changes.len() >= MAX_CHANGES {
            let n = MAX_CHANGES / 10;
            self.changes.drain(..n);
            self.changes_dropped += n as u64;
        }
        self.changes.push(change);
    }

    /// The service folded log entries this agent had not read into its snapshot: program its
    /// flows as they are now and unprogram those it no longer has. Unlike [`Agent::resync`]
    /// nothing unchanged is touched; a flow moved meanwhile is re-tagged at once, not in the
    /// order the controller checked (which the folded entries held).
    fn catch_up(&mut self) -> Result<(), AgentError> {
        self.peers.prev = None;
        self.catch_ups += 1;
        let ctl = self.cfg.controller.clone();
        let health = ctl.get_ok("/health")?;
        if health["store"].as_str() != self.store.as_deref() {
            return self.resync();
        }
        let last = health["last"].as_i64().unwrap_or(self.last_seq);
        eprintln!(
            "latnet-switch agent: {} folded entries after {} into its snapshot: reading its flows",
            ctl.url(),
            self.last_seq
        );
        let flows = ctl.get_ok("/flows")?;
        let mut present = std::collections::BTreeSet::new();
        for f in flows.as_array().into_iter().flatten() {
            present.extend(f["id"].as_u64());
            self.apply_flow(f, last, "caught up")?;
        }
        let gone: Vec<u64> = self
            .hosts
            .iter()
            .flat_map(|st| st.flows.keys().chain(st.refused.keys()).copied())
            .filter(|id| !present.contains(id))
            .collect();
        for id in gone {
            self.remove_flow(id, last, "removed")?;
        }
        self.last_seq = self.last_seq.max(last);
        self.write_status();
        Ok(())
    }

    /// Undo every flow and route programmed, then read the service's state again.
    fn resync(&mut self) -> Result<(), AgentError> {
        self.resyncs += 1;
        let ids: Vec<u64> = self.hosts.iter().flat_map(|st| st.flows.keys().copied()).collect();
        for id in ids {
            self.remove_flow(id, self.last_seq, "resync")?;
        }
        for st in &mut self.hosts {
            for (matches, _) in st.routes.values() {
                for m in matches {
                    st.tagger.remove(m).map_err(kernel("tagger"))?;
                }
            }
            st.routes.clear();
            st.refused.clear();
        }
        self.sync()
    }

    /// Poll every `poll` until stopped; then detach and clean up.
    pub fn run(mut self) -> Result<(), AgentError> {
        let end = self.cfg.duration.map(|d| self.started_ns + d.as_nanos() as u64);
        let poll_ns = self.cfg.poll.as_nanos() as u64;
        let mut next_status = crate::sys::mono_ns() + 1_000_000_000;
        loop {
            if crate::sys::stop_requested() || end.is_some_and(|e| crate::sys::mono_ns() >= e) {
                break;
            }
            self.register();
            self.reap();
            match self.poll() {
                Ok(n) if n >= 1000 => continue, // more to read
                // the service held the poll until there was something or the wait ran out
                Ok(_) if self.cfg.wait.is_some() => {
                    let now = crate::sys::mono_ns();
                    if now >= next_status {
                        self.write_status();
                        next_status = now + 1_000_000_000;
                    }
                    continue;
                }
                Ok(_) => {}
                // a stop interrupted the poll: not the service's error
                Err(AgentError::Controller { .. }) if crate::sys::stop_requested() => break,
                Err(e @ AgentError::Controller { .. }) => {
                    self.errors += 1;
                    let msg = e.to_string();
                    if self.last_error.as_deref() != Some(&msg) {
                        eprintln!(
                            "latnet-switch agent: {msg} (keeping what is programmed, retrying)"
                        );
                    }
                    self.last_error = Some(msg);
                }
                Err(e) => {
                    self.write_status();
                    self.shutdown();
                    return Err(e);
                }
            }
            let now = crate::sys::mono_ns();
            if now >= next_status {
                self.write_status();
                next_status = now + 1_000_000_000;
            }
            let wake = now + poll_ns;
            crate::sys::sleep_until(end.map_or(wake, |e| e.min(wake)));
        }
        self.write_status();
        self.shutdown();
        Ok(())
    }

    fn shutdown(&mut self) {
        // other agents need not wait for this one's steps any more
        if self.peers.registered {
            let path = format!("/agents/{}", self.name);
            let _ = self.cfg.controller.call("DELETE", &path, None, StdDuration::ZERO);
            self.peers.registered = false;
        }
        for st in &self.hosts {
            if self.cfg.shape {
                for tc in &st.tcs {
                    tc.teardown();
                }
            }
        }
        // the taggers detach when their links are dropped, with the agent
    }

    /// The status document (also written to the status file).
    pub fn status(&self) -> Value {
        let hosts: serde_json::Map<String, Value> = self
            .hosts
            .iter()
            .map(|st| {
                let stats = if self.cfg.shape {
                    st.tcs.first().map(Tc::class_stats).unwrap_or_default()
                } else {
                    BTreeMap::new()
                };
                let flows: serde_json::Map<String, Value> = st
                    .flows
                    .iter()
                    .map(|(id, p)| {
                        let mut c = p.carried;
                        for m in &p.entry.matches {
                            if let Ok(Some(x)) = st.tagger.counters(m) {
                                c = c + x;
                            }
                        }
                        let e = &p.entry;
                        let v = json!({
                            "dst": e.dst, "tags": e.tags, "path": e.path,
                            "matches": e.matches.iter().map(|m| json!({"dst": m.dst.to_string(),
                                "proto": m.proto, "src_port": m.src_port, "dst_port": m.dst_port})).collect::<Vec<_>>(),
                            "shaper": {"rate_bps": e.shaper.0, "burst_bytes": e.shaper.1,
                                       "class": p.minor.map(|m| format!("{HTB_MAJOR}:{m:x}")),
                                       "stats": p.minor.and_then(|m| stats.get(&m).cloned())},
                            "tagged": c,
                        });
                        (id.to_string(), v)
                    })
                    .collect();
                let v = json!({
                    "ifaces": st.spec.ifaces, "attached": st.tagger.attached(),
                    "shaper_via": if self.cfg.shape { st.tcs.first().map(Tc::way) } else { None },
                    "routes": st.routes.iter().map(|(d, (_, t))| (d.clone(), json!(t))).collect::<serde_json::Map<_, _>>(),
                    "flows": flows,
                    "refused": st.refused.iter().map(|(id, why)| (id.to_string(), json!(why))).collect::<serde_json::Map<_, _>>(),
                    "retiring_classes": st.retiring.iter().map(|(m, _)| format!("{HTB_MAJOR}:{m:x}")).collect::<Vec<_>>(),
                });
                (st.spec.name.clone(), v)
            })
            .collect();
        json!({
            "controller": self.cfg.controller.url(),
            "started_ns": self.started_ns,
            "polls": self.polls,
            "wait_ms": self.cfg.wait.map(|w| w.as_millis() as u64),
            "controller_errors": self.errors,
            "last_error": self.last_error,
            "last_seq": self.last_seq,
            "synced_seq": self.synced_seq,
            "store": self.store,
            "resyncs": self.resyncs,
            "catch_ups": self.catch_ups,
            "shaper": if self.cfg.shape { "htb" } else { "none" },
            "order": match self.cfg.order { Order::Sequential => "sequential", Order::Together => "together" },
            "peers": {"name": self.name, "registered": self.peers.registered, "off": self.peers.off,
                      "asked": self.peers.asked, "waited_ns": self.peers.waited_ns,
                      "timeouts": self.peers.timeouts, "reports": self.peers.reports,
                      "report_errors": self.peers.report_errors},
            "dilation": self.cfg.dilation,
            "hosts": hosts,
            "changes": self.changes,
            "changes_dropped": self.changes_dropped,
        })
    }

    fn write_status(&self) {
        let Some(path) = &self.cfg.status else { return };
        let text = serde_json::to_string_pretty(&self.status()).unwrap_or_default() + "\n";
        let tmp = path.with_extension("tmp");
        if std::fs::write(&tmp, text).and_then(|()| std::fs::rename(&tmp, path)).is_err() {
            eprintln!("latnet-switch agent: cannot write {}", path.display());
        }
    }
}

/// Record that flow `id` cannot be programmed at host `st` (said once on stderr).
fn refuse(st: &mut HostState, host: &str, id: u64, why: &str) {
    if st.refused.insert(id, why.to_owned()).is_none() {
        eprintln!("latnet-switch agent: {host}: flow {id}: {why}");
    }
}

/// Hosts and addresses of a testbed plan: `hosts` (with their namespace files, `None` for the
/// agent's own) served, every host's IPv4 and IPv6 address as destinations.
pub fn from_plan(
    plan: &crate::plan::Plan,
    hosts: &[(String, Option<PathBuf>)],
) -> Result<(Vec<HostSpec>, AddressBook), AgentError> {
    let mut addresses = BTreeMap::new();
    for n in plan.nodes.iter().filter(|n| n.kind == "host") {
        let mut a = Vec::new();
        for s in [&n.address, &n.address6] {
            if let Ok(ip) = s.parse::<IpAddr>() {
                a.push(ip);
            }
        }
        addresses.insert(n.name.clone(), a);
    }
    let specs = hosts
        .iter()
        .map(|(name, netns)| {
            let n = plan.nodes.iter().find(|n| &n.name == name && n.kind == "host").ok_or_else(
                || AgentError::Config(format!("--host {name:?}: not a host of {}", plan.scenario)),
            )?;
            Ok(HostSpec {
                name: name.clone(),
                netns: netns.clone(),
                ifaces: n.ifaces.iter().map(|i| i.name.clone()).collect(),
            })
        })
        .collect::<Result<Vec<_>, AgentError>>()?;
    Ok((specs, addresses))
}

/// `Path` helper for the CLI: a namespace given by name lives in `/run/netns`.
pub fn netns_path(v: &str) -> PathBuf {
    if v.contains('/') {
        PathBuf::from(v)
    } else {
        Path::new("/run/netns").join(v)
    }
}

#[cfg(test)]
mod tests {
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
        assert_eq!(
            (e.id, e.tags.as_slice(), e.shaper),
            (4, &[21u16, 10, 30][..], (40_000_000, 3000))
        );
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
        assert!(matches!(
            flow_entry(&f, "h2", &book()),
            Err(FlowError::Field { field: "tags", .. })
        ));
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
        assert!(
            parse_response(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n").is_err()
        );
    }

    #[test]
    fn class_statistics_are_read_from_tc_text() {
        let t = "class htb 1:a root prio 0 rate 40Mbit overhead 4 ceil 40Mbit burst 3000b cburst 3000b \n \
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
        let cfg2 = || latnet_ctld::ServiceConfig {
            system: "chameleon".into(),
            k: Some(4),
            hosts_per_edge: None,
            queues: 8,
            topology: None,
        };
        let _ = std::fs::create_dir_all(dir.join("db"));
        let svc = latnet_ctld::Service::open(&dir.join("db").join("controller.db"), cfg2());
        let Ok(mut svc) = svc else { panic!("no service") };
        let tls = latnet_ctld::tls::server_config(
            &dir.join("a/service.crt"),
            &dir.join("a/service.key"),
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
        assert!(
            matches!(&hosts, Ok((200, v)) if v.as_array().map(Vec::len) == Some(16)),
            "{hosts:?}"
        );
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
        let c = Controller::new(&url).and_then(|c| c.with_tls(&ca, Some((&cert, &key))));
        let Ok(c) = c else { panic!("{c:?}") };
        let r = c.get("/hosts");
        assert!(matches!(&r, Ok((200, _))), "{r:?}");
        let c = Controller::new(&url).and_then(|c| c.with_ca_file(&ca));
        let Ok(c) = c else { panic!("{c:?}") };
        let r = c.get("/hosts");
        assert!(
            matches!(&r, Err(AgentError::Controller { msg, .. }) if msg.contains("Certificate"))
        );
        // a key that is not the certificate's is refused naming both
        let other = dir.join("b/client.key");
        let e = Controller::new(&url).and_then(|c| c.with_tls(&ca, Some((&cert, &other))));
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
        let seen = std::thread::spawn(move || {
            let Ok((mut s, _)) = l.accept() else { return String::new() };
            let mut req = Vec::new();
            let mut buf = [0u8; 512];
            while !req.windows(4).any(|w| w == b"\r\n\r\n") {
                match s.read(&mut buf) {
                    Ok(0) | Err(_) => break,
                    Ok(n) => req.extend_from_slice(&buf[..n]),
                }
            }
            let _ = s.write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\n[]");
            String::from_utf8_lossy(&req).into_owned()
        });
        let c = Controller::new(&url).and_then(|c| c.with_token_file(&file));
        let Ok(c) = c else { panic!("{c:?}") };
        assert!(matches!(c.get("/hosts"), Ok((200, _))));
        let req = seen.join().unwrap_or_default();
        assert!(req.contains("\r\nAuthorization: Bearer abcdef0123456789xyz\r\n"), "{req}");
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
}
