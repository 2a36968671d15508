//! The controller service as the agent reaches it: HTTP/1.1 or HTTPS, a bearer token, every
//! address the host name resolved to.

use super::files::{Files, Loaded, TlsFiles};
use super::*;
use std::sync::Mutex;

/// A controller service at `http://HOST:PORT` or `https://HOST:PORT` (then [`Controller::
/// with_ca_file`] names who signed its certificate, which must name `HOST`).
#[derive(Debug, Clone)]
pub struct Controller {
    url: String,
    host: String,
    /// With `https://`: the name the service's certificate must carry.
    name: Option<rustls::pki_types::ServerName<'static>>,
    /// Every address the host name resolved to, tried in turn.
    pub(super) addrs: Vec<std::net::SocketAddr>,
    timeout: StdDuration,
    /// The TLS files (`https://`) and the token file (a service started with `--tokens`).
    files: Files,
    /// What was read from them (the TLS settings, the bearer token sent with every request),
    /// read again when one changes; shared by the clones.
    loaded: Arc<Mutex<Loaded>>,
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
        let name = if scheme == "https" {
            let name = host.rsplit_once(':').map_or(host, |(h, _)| h);
            let name = name.trim_start_matches('[').trim_end_matches(']');
            let name = rustls::pki_types::ServerName::try_from(name.to_owned()).map_err(|e| {
                bad(&format!("{name:?} is not a name a certificate can carry: {e}"))
            })?;
            Some(name)
        } else {
            None
        };
        Ok(Controller {
            url: format!("{scheme}://{host}"),
            host: host.to_owned(),
            name,
            addrs,
            timeout: StdDuration::from_secs(2),
            files: Files::default(),
            loaded: Arc::default(),
        })
    }

    /// Trust the certificates (PEM) in `path` as the signers of an `https://` service's
    /// certificate (its own self-signed one will do). Refused for an `http://` service.
    pub fn with_ca_file(self, path: &Path) -> Result<Controller, AgentError> {
        self.with_tls(path, None, None)
    }

    /// [`Controller::with_ca_file`], and with `client` (certificate chain and key files, PEM)
    /// present that certificate to a service that asks for one (`latnet-ctld
    /// --tls-client-ca`, mutual TLS), and with `crl` (PEM certificate revocation lists of the
    /// CA in `path`, `scripts/tls-revoke.sh`) refuse a service whose certificate a list
    /// revokes, or which no list covers, or once the list is past its next update. The files
    /// are read again when they change (`agent/files.rs`).
    pub fn with_tls(
        self,
        path: &Path,
        client: Option<(&Path, &Path)>,
        crl: Option<&Path>,
    ) -> Result<Controller, AgentError> {
        if self.name.is_none() {
            let m = format!("--ca-file {}: {} is not https://", path.display(), self.url);
            return Err(AgentError::Config(m));
        }
        let tls = TlsFiles {
            ca: path.to_owned(),
            client: client.map(|(c, k)| (c.to_owned(), k.to_owned())),
            crl: crl.map(Path::to_owned),
        };
        let files = Files { tls: Some(tls), ..self.files.clone() };
        self.with_files(files)
    }

    /// Read `files` now (refused if one cannot be used); the settings from then on.
    fn with_files(mut self, files: Files) -> Result<Controller, AgentError> {
        self.loaded = Arc::new(Mutex::new(files.read()?));
        self.files = files;
        Ok(self)
    }

    /// An `https://` service without a CA file is a configuration error, said before starting.
    pub fn check(&self) -> Result<(), AgentError> {
        match (&self.name, &self.files.tls) {
            (Some(_), None) => Err(AgentError::Config(format!(
                "--controller {}: give the certificate that signed the service's: --ca-file FILE",
                self.url
            ))),
            _ => Ok(()),
        }
    }

    /// Send the token in file `path` (its first line that is neither empty nor a `#` comment,
    /// either `TOKEN` or `ROLE TOKEN` as in the service's own file) with every request; the
    /// file is read again when it changes.
    pub fn with_token_file(self, path: &Path) -> Result<Controller, AgentError> {
        let files = Files { token: Some(path.to_owned()), ..self.files.clone() };
        self.with_files(files)
    }

    /// The service's address.
    pub fn url(&self) -> &str {
        &self.url
    }

    pub(super) fn fail(&self, msg: impl Into<String>) -> AgentError {
        AgentError::Controller { url: self.url.clone(), msg: msg.into() }
    }

    /// `GET path`: the status and the JSON body (`Null` when empty).
    pub fn get(&self, path: &str) -> Result<(u16, Value), AgentError> {
        self.get_waiting(path, StdDuration::ZERO)
    }

    /// `GET path` of a request the service may hold up to `wait` (a long poll).
    pub(super) fn get_waiting(
        &self,
        path: &str,
        wait: StdDuration,
    ) -> Result<(u16, Value), AgentError> {
        self.call("GET", path, None, wait)
    }

    /// `POST path` with a JSON body: the status and the JSON body (`Null` when empty).
    pub fn post(&self, path: &str, body: &Value) -> Result<(u16, Value), AgentError> {
        self.call("POST", path, Some(body), StdDuration::ZERO)
    }

    pub(super) fn call(
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
        let (tls, token) = self.files.current(&self.loaded);
        let mut s: Box<dyn ReadWrite> = match (&self.name, tls) {
            (None, _) => Box::new(tcp),
            (Some(_), None) => return Err(self.fail("https:// needs --ca-file")),
            (Some(name), Some(cfg)) => {
                let conn = rustls::ClientConnection::new(cfg, name.clone())
                    .map_err(|e| self.fail(format!("TLS: {e}")))?;
                Box::new(rustls::StreamOwned::new(conn, tcp))
            }
        };
        let auth = token.map(|t| format!("Authorization: Bearer {t}\r\n"));
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

    pub(super) fn get_ok(&self, path: &str) -> Result<Value, AgentError> {
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
