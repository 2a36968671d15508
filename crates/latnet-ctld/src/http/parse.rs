//! Reading a request off the wire: the head (request line, headers, the target in origin
//! form), the body's framing, chunked bodies decoded as they arrive. Whatever the bytes, a
//! request or a reply naming what is wrong, never a panic.

use super::*;

/// A request's head.
#[derive(Debug, PartialEq, Eq)]
pub(crate) struct Head {
    pub method: String,
    pub target: String,
    /// HTTP/1.1 (else 1.0)
    pub http11: bool,
    pub headers: Vec<(String, String)>,
}

/// How a request's body comes.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Body {
    Length(usize),
    Chunked,
}

impl Head {
    pub(crate) fn header(&self, name: &str) -> Option<&str> {
        self.headers.iter().find(|(k, _)| k.eq_ignore_ascii_case(name)).map(|(_, v)| v.as_str())
    }

    /// Whether the client asked to close after this request (or speaks HTTP/1.0 without
    /// keep-alive).
    pub(crate) fn closes(&self) -> bool {
        let has = |tok: &str| {
            self.headers
                .iter()
                .filter(|(k, _)| k.eq_ignore_ascii_case("connection"))
                .any(|(_, v)| v.split(',').any(|t| t.trim().eq_ignore_ascii_case(tok)))
        };
        if self.http11 {
            has("close")
        } else {
            !has("keep-alive")
        }
    }

    /// How the body comes; a 400 for a framing a server must not guess at (RFC 9112 6.3).
    pub(crate) fn body(&self) -> Result<Body, Reply> {
        let lengths: Vec<&str> = self
            .headers
            .iter()
            .filter(|(k, _)| k.eq_ignore_ascii_case("content-length"))
            .flat_map(|(_, v)| v.split(','))
            .map(str::trim)
            .collect();
        let te = self.header("transfer-encoding");
        match (te, lengths.as_slice()) {
            (Some(_), [_, ..]) => Err(err(
                400,
                Some("Transfer-Encoding"),
                "both Transfer-Encoding and Content-Length",
            )),
            (Some(t), []) if t.trim().eq_ignore_ascii_case("chunked") => Ok(Body::Chunked),
            (Some(t), []) => {
                Err(err(501, Some("Transfer-Encoding"), format!("expected chunked, got {t:?}")))
            }
            (None, []) => Ok(Body::Length(0)),
            (None, [first, rest @ ..]) => {
                let n = first
                    .parse::<usize>()
                    .ok()
                    .filter(|_| first.bytes().all(|b| b.is_ascii_digit()));
                match n {
                    Some(n) if rest.iter().all(|r| r == first) => Ok(Body::Length(n)),
                    _ => Err(err(
                        400,
                        Some("Content-Length"),
                        format!("expected one whole number, got {:?}", lengths.join(", ")),
                    )),
                }
            }
        }
    }
}

/// Parse a request head (without its final empty line).
pub(crate) fn parse_head(raw: &[u8]) -> Result<Head, Reply> {
    let bad = |field: Option<&str>, m: String| err(400, field, m);
    let text =
        std::str::from_utf8(raw).map_err(|_| bad(None, "the request head is not UTF-8".into()))?;
    let mut lines = text.split("\r\n");
    let line = lines.next().unwrap_or_default();
    let mut parts = line.split(' ');
    let (Some(method), Some(target), Some(version), None) =
        (parts.next(), parts.next(), parts.next(), parts.next())
    else {
        return Err(bad(None, format!("expected METHOD TARGET HTTP/1.1, got {line:?}")));
    };
    let token = |s: &str| {
        !s.is_empty()
            && s.bytes().all(|b| b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b))
    };
    if !token(method) {
        return Err(bad(None, format!("bad method {method:?}")));
    }
    if target.bytes().any(|b| b <= b' ' || b == 0x7f) {
        return Err(bad(None, format!("expected a path starting with /, got {target:?}")));
    }
    let target = origin_form(target).ok_or_else(|| {
        bad(None, format!("expected a path starting with / or an http URL, got {target:?}"))
    })?;
    let http11 = match version {
        "HTTP/1.1" => true,
        "HTTP/1.0" => false,
        v => {
            return Err(err(505, None, format!("expected HTTP/1.1 or HTTP/1.0, got {v:?}")));
        }
    };
    let mut headers = Vec::new();
    for l in lines {
        let Some((k, v)) = l.split_once(':') else {
            return Err(bad(None, format!("a header line without a colon: {l:?}")));
        };
        if !token(k) {
            // also a folded line (obs-fold), which RFC 9112 lets a server refuse
            return Err(bad(None, format!("bad header name {k:?}")));
        }
        if v.bytes().any(|b| (b < b' ' && b != b'\t') || b == 0x7f) {
            return Err(bad(Some(k), format!("a control character in header {k}")));
        }
        headers.push((k.to_owned(), v.trim_matches([' ', '\t']).to_owned()));
    }
    // RFC 9112 3.2: an HTTP/1.1 request without Host, or any with more than one, is a 400
    let hosts = headers.iter().filter(|(k, _)| k.eq_ignore_ascii_case("host")).count();
    if hosts > 1 || (http11 && hosts == 0) {
        let why = if hosts > 1 {
            "more than one Host header"
        } else {
            "an HTTP/1.1 request needs a Host header"
        };
        return Err(bad(Some("Host"), why.into()));
    }
    Ok(Head { method: method.to_owned(), target, http11, headers })
}

/// The path and query of a request target: an origin-form one (`/flows?x=1`) as it is, an
/// absolute-form one (`http://host:port/flows?x=1`, RFC 9112 3.2.2, which a server must take)
/// without its scheme and authority (`/` for an empty path); `None` for anything else.
pub(super) fn origin_form(target: &str) -> Option<String> {
    if target.starts_with('/') {
        return Some(target.to_owned());
    }
    let (scheme, rest) = target.split_once("://")?;
    if !(scheme.eq_ignore_ascii_case("http") || scheme.eq_ignore_ascii_case("https")) {
        return None;
    }
    let end = rest.find(['/', '?']).unwrap_or(rest.len());
    let (authority, path) = rest.split_at(end);
    if authority.is_empty() {
        return None;
    }
    Some(if path.starts_with('/') { path.to_owned() } else { format!("/{path}") })
}

/// The end of the head in `buf` (the index after its empty line), skipping empty lines before
/// the request line (RFC 9112 2.2): `(start, end)`.
pub(super) fn head_end(buf: &[u8]) -> Option<(usize, usize)> {
    head_end_from(buf, 0)
}

/// [`head_end`], knowing that the first `scanned` bytes hold no end (a head arriving in many
/// small reads is searched once, not again from its start at every read).
pub(crate) fn head_end_from(buf: &[u8], scanned: usize) -> Option<(usize, usize)> {
    let mut start = 0;
    while buf[start..].starts_with(b"\r\n") && start < 2 * MAX_BLANK_LINES {
        start += 2;
    }
    let from = start.max(scanned.saturating_sub(3)).min(buf.len());
    buf[from..].windows(4).position(|w| w == b"\r\n\r\n").map(|p| (start, from + p + 4))
}

/// How far [`dechunk_more`] got: the whole chunks decoded so far and where the next begins, so
/// a body arriving in many small reads is read once, not again from its start at every read.
#[derive(Debug, Default)]
pub(crate) struct Chunks {
    pub(crate) at: usize,
    pub(crate) body: Vec<u8>,
    pub(crate) trailers: bool,
}

/// Decode a chunked body from the start of `buf`: `Ok(Some((body, used)))` once whole,
/// `Ok(None)` while more bytes are needed, a 400 / 413 when it cannot be one.
pub(crate) fn dechunk(buf: &[u8]) -> Result<Option<(Vec<u8>, usize)>, Reply> {
    let mut c = Chunks::default();
    Ok(dechunk_more(buf, &mut c)?.map(|used| (c.body, used)))
}

/// [`dechunk`] going on from `c` (what an earlier call on the start of the same `buf` left):
/// the bytes used once the body is whole (it is then in `c`).
pub(crate) fn dechunk_more(buf: &[u8], c: &mut Chunks) -> Result<Option<usize>, Reply> {
    let bad = |m: &str| err(400, Some("Transfer-Encoding"), format!("bad chunked body: {m}"));
    let line_end = |at: usize| buf[at..].windows(2).position(|w| w == b"\r\n");
    // the body with its framing, whole or not, within MAX_CHUNKED
    let framing = || {
        err(
            413,
            None,
            format!("the chunked body takes more than {MAX_CHUNKED} bytes with its framing"),
        )
    };
    let more = || if buf.len() > MAX_CHUNKED { Err(framing()) } else { Ok(None) };
    while c.trailers {
        // trailers, then an empty line
        let Some(nl) = line_end(c.at) else {
            return if buf.len() - c.at > MAX_HEAD {
                Err(bad("trailers too long"))
            } else {
                more()
            };
        };
        c.at += nl + 2;
        if nl == 0 {
            return Ok(Some(c.at));
        }
    }
    loop {
        let at = c.at;
        if at > MAX_CHUNKED {
            return Err(framing());
        }
        let Some(nl) = line_end(at) else {
            return if buf.len() - at > 1024 {
                Err(bad("a chunk-size line too long"))
            } else {
                more()
            };
        };
        let line =
            std::str::from_utf8(&buf[at..at + nl]).map_err(|_| bad("a chunk size not UTF-8"))?;
        let hex = line.split(';').next().unwrap_or_default().trim();
        if hex.is_empty() || hex.len() > 8 || !hex.bytes().all(|b| b.is_ascii_hexdigit()) {
            return Err(bad(&format!("chunk size {hex:?}")));
        }
        let size =
            usize::from_str_radix(hex, 16).map_err(|_| bad(&format!("chunk size {hex:?}")))?;
        let data = at + nl + 2;
        if size == 0 {
            c.at = data;
            c.trailers = true;
            return dechunk_more(buf, c);
        }
        if c.body.len() + size > MAX_BODY {
            return Err(err(413, None, format!("the body is larger than {MAX_BODY} bytes")));
        }
        if buf.len() < data + size + 2 {
            return more();
        }
        if &buf[data + size..data + size + 2] != b"\r\n" {
            return Err(bad("a chunk longer than its size"));
        }
        c.body.extend_from_slice(&buf[data..data + size]);
        c.at = data + size + 2;
    }
}

/// A request as a connection reads it: the head found in `raw` (after empty lines), parsed, its
/// body framed and, when chunked, decoded from the bytes after the head. `Ok(None)` while the
/// head is not whole; the reply a client would get otherwise. (For the fuzz target: whatever the
/// bytes, an answer and never a panic.)
pub fn read_request(raw: &[u8]) -> Result<Option<ReadRequest>, Reply> {
    let Some((start, end)) = head_end(raw) else { return Ok(None) };
    if end - start > MAX_HEAD {
        return Err(err(431, None, format!("the request head is larger than {MAX_HEAD} bytes")));
    }
    let head = parse_head(&raw[start..end - 4])?;
    let rest = &raw[end..];
    let body = match head.body()? {
        Body::Length(n) if n > MAX_BODY => {
            return Err(err(413, None, format!("the body is larger than {MAX_BODY} bytes")));
        }
        Body::Length(n) => rest.get(..n).map(<[u8]>::to_vec),
        Body::Chunked => dechunk(rest)?.map(|(b, _)| b),
    };
    Ok(Some(ReadRequest { method: head.method, target: head.target, body }))
}

/// What [`read_request`] found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReadRequest {
    /// The method.
    pub method: String,
    /// The path and query.
    pub target: String,
    /// The body, once whole.
    pub body: Option<Vec<u8>>,
}
