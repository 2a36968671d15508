//! Who may ask the service what: bearer tokens (RFC 6750) listed in a file.
//!
//! ```text
//! # ROLE TOKEN   (one per line; ROLE is read, agent or write)
//! write 8c1d6f0e2b7a4c9d93e1f0a2b4c6d8e0
//! read  51a7c3e9d1f2b4a6c8e0f1a3b5c7d9e2
//! agent 0f3e5d7c9b1a2c4e6f8a0b2d4f6e8c1a
//! ```
//!
//! With a token file, every request but `GET /health` must carry `Authorization: Bearer TOKEN`:
//! a `read` token may `GET`; an `agent` token may also register a host agent, end its
//! registration and report its steps (`POST /agents`, `DELETE /agents/NAME`, `POST /applied`:
//! [`crate::agents`]), but not change a reservation; a
//! `write` token may also `POST` and `DELETE` everything else. A request without a
//! token, or with one not in the file, is answered 401 (with `WWW-Authenticate: Bearer`); a read
//! token asking to change something, 403. Both name the field (`Authorization`) and are
//! counted (`denied` in `GET /stats`); neither reaches the controller.

use crate::{err, Reply};
use std::path::Path;

/// What a token allows.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Role {
    /// `GET` requests.
    Read,
    /// `GET` requests, and a host agent's registration and reports.
    Agent,
    /// Every request.
    Write,
}

/// Fewest characters a token may have (16 random bytes in hex are 32).
pub const MIN_TOKEN: usize = 16;

/// The tokens a service accepts, with their roles.
#[derive(Clone)]
pub struct Tokens {
    list: Vec<(Role, String)>,
}

impl std::fmt::Debug for Tokens {
    // never print a token
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Tokens").field("count", &self.list.len()).finish()
    }
}

/// A token's characters: RFC 6750's `b64token`.
fn token_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || "-._~+/=".contains(c)
}

/// `a == b` in time that does not depend on where they first differ.
fn same(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

impl Tokens {
    /// How many tokens it holds.
    pub fn len(&self) -> usize {
        self.list.len()
    }

    /// Whether it holds none (a token file without any is refused).
    pub fn is_empty(&self) -> bool {
        self.list.is_empty()
    }

    /// Read a token file; errors name the file, the line and what was expected.
    pub fn load(path: &Path) -> Result<Tokens, String> {
        let text = std::fs::read_to_string(path).map_err(|e| format!("{}: {e}", path.display()))?;
        Tokens::parse(&path.display().to_string(), &text)
    }

    /// Parse the text of token file `name`.
    pub fn parse(name: &str, text: &str) -> Result<Tokens, String> {
        let mut list: Vec<(Role, String)> = Vec::new();
        for (i, line) in text.lines().enumerate() {
            let line = line.trim();
            if line.is_empty() || line.starts_with('#') {
                continue;
            }
            let at = |m: String| format!("{name}:{}: {m}", i + 1);
            let mut words = line.split_whitespace();
            let (role, token) = (words.next().unwrap_or_default(), words.next());
            let role = match role {
                "read" => Role::Read,
                "agent" => Role::Agent,
                "write" => Role::Write,
                other => {
                    return Err(at(format!(
                        "expected the role read, agent or write, got {other:?}"
                    )))
                }
            };
            let token =
                token.ok_or_else(|| at("expected ROLE TOKEN, the token is missing".into()))?;
            if words.next().is_some() {
                return Err(at("expected ROLE TOKEN and nothing after the token".into()));
            }
            if token.len() < MIN_TOKEN || !token.chars().all(token_char) {
                return Err(at(format!(
                    "a token must have at least {MIN_TOKEN} characters out of A-Z a-z 0-9 - . _ ~ + / ="
                )));
            }
            if list.iter().any(|(_, t)| t == token) {
                return Err(at("this token is listed twice".into()));
            }
            list.push((role, token.to_owned()));
        }
        if list.is_empty() {
            return Err(format!("{name}: no tokens (every request would be refused)"));
        }
        Ok(Tokens { list })
    }

    /// May a request (`method`, `path`, its `Authorization` header) go on? A 401 or 403 reply
    /// otherwise.
    pub fn check(
        &self,
        method: &str,
        path: &str,
        authorization: Option<&str>,
    ) -> Result<(), Reply> {
        let path = path.split_once('?').map_or(path, |(p, _)| p);
        // HEAD reads as GET does (the same head, without the body)
        let reads = matches!(method, "GET" | "HEAD");
        if reads && path.trim_end_matches('/') == "/health" {
            return Ok(());
        }
        let denied = |m: &str| Err(err(401, Some("Authorization"), m));
        let Some(h) = authorization else {
            return denied("this service needs a token: send Authorization: Bearer TOKEN");
        };
        let Some((scheme, token)) = h.trim().split_once(' ') else {
            return denied("expected Authorization: Bearer TOKEN");
        };
        if !scheme.eq_ignore_ascii_case("bearer") {
            return denied("expected Authorization: Bearer TOKEN");
        }
        let token = token.trim().as_bytes();
        // look at every token whichever matches, so that the time taken tells nothing
        let role =
            self.list.iter().fold(
                None,
                |found, (r, t)| if same(t.as_bytes(), token) { Some(*r) } else { found },
            );
        match role {
            None => denied("the token is not one the service accepts"),
            Some(Role::Read) if !reads => Err(err(
                403,
                Some("Authorization"),
                format!("the token may only read; {method} needs a write token"),
            )),
            Some(Role::Agent)
                if !(reads
                    || (method == "POST"
                        && ["/agents", "/applied"].contains(&path.trim_end_matches('/')))
                    || (method == "DELETE" && path.starts_with("/agents/"))) =>
            {
                Err(err(
                    403,
                    Some("Authorization"),
                    format!(
                        "an agent token may read, POST /agents, DELETE /agents/NAME and POST \
                         /applied; {method} {path} needs a write token"
                    ),
                ))
            }
            Some(_) => Ok(()),
        }
    }
}
