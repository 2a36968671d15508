//! The agent's settings from files (`--ca-file`, `--client-cert` / `--client-key`,
//! `--crl-file`, `--token-file`), read again when one of them changes: an agent runs for
//! months, while a revocation list is renewed every few weeks (and one past its next update
//! refuses the service), a client certificate expires, a token is revoked. The service reads
//! its own files again on SIGHUP; the agent reads its files before each request and compares
//! them with what it read last (a few small files per poll; modification times are too coarse,
//! a jiffy, to tell two writes apart), so a file replaced in place or by a rename is used from
//! the next poll on, with no signal to send. A file it cannot use keeps the previous settings,
//! said once on standard error, and is tried again when it changes.
//!
//! The agent also warns, on standard error, ahead of the dates in those files (it has no other
//! channel; the service has `GET /metrics`): a client certificate that expires within
//! [`CERT_WARN_DAYS`] days or has expired (the service then refuses the agent, whose
//! handshake error does not say why), and revocation lists within [`LIST_WARN_DAYS`] days of
//! their next update or past it (the agent then refuses the service). A warning still due is
//! said again once a day, and at once after the files are read again.

use super::AgentError;
use latnet_wire::x509::{self, Due, Left, Reminder};
use std::hash::{DefaultHasher, Hash, Hasher};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, PoisonError};

/// The TLS files of an `https://` service.
#[derive(Debug, Clone)]
pub(super) struct TlsFiles {
    /// Who signed the service's certificate (`--ca-file`).
    pub ca: PathBuf,
    /// The client certificate chain and key (`--client-cert`, `--client-key`).
    pub client: Option<(PathBuf, PathBuf)>,
    /// The CA's revocation lists (`--crl-file`).
    pub crl: Option<PathBuf>,
}

/// A client certificate is warned of within this many days of its end (as the service warns
/// of its own).
const CERT_WARN_DAYS: i64 = 14;
/// Revocation lists are warned of within this many days of their next update: they are renewed
/// every few days (`scripts/tls-revoke.sh --days 30` from cron or a timer), so one this close
/// to it means the renewal is not happening.
const LIST_WARN_DAYS: i64 = 3;

/// What was read from the files, shared by the clones of a controller.
#[derive(Debug, Default)]
pub(super) struct Loaded {
    pub tls: Option<Arc<rustls::ClientConfig>>,
    pub token: Option<String>,
    /// What the files looked like when read (in the order of [`Files::paths`]).
    stamps: Vec<Stamp>,
    /// The dates the TLS files name.
    dates: Vec<Dated>,
    /// When the warnings were last said.
    reminder: Reminder,
}

/// A date a TLS file names.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Dated {
    what: DateOf,
    /// The file, as given.
    path: PathBuf,
    due: Due,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum DateOf {
    /// When the client certificate (the first of `--client-cert`) expires.
    ClientCertificate,
    /// When the first of the `--crl-file` lists is due for renewal.
    Revocation,
}

impl Loaded {
    /// The warnings due at `now` (seconds since 1970-01-01 UTC), none if some were said less
    /// than a day before.
    fn warnings(&mut self, now: i64) -> Vec<String> {
        let dates = &self.dates;
        self.reminder.say(now, || dates.iter().filter_map(|d| d.warning(now)).collect())
    }
}

impl Dated {
    /// The warning due at `now`, if any.
    fn warning(&self, now: i64) -> Option<String> {
        let (file, at) = (self.path.display(), &self.due.shown);
        Some(match self.what {
            DateOf::ClientCertificate => match x509::left(&self.due, now, CERT_WARN_DAYS) {
                Left::Later => return None,
                Left::Passed => {
                    format!("warning: --client-cert {file} expired at {at}: the service refuses it")
                }
                left => format!("warning: --client-cert {file} expires at {at}, {left}"),
            },
            DateOf::Revocation => match x509::left(&self.due, now, LIST_WARN_DAYS) {
                Left::Later => return None,
                Left::Passed => format!(
                    "warning: --crl-file {file} was due for renewal at {at}: the service is \
                     refused until the list is renewed"
                ),
                left => format!("warning: --crl-file {file} is due for renewal at {at}, {left}"),
            },
        })
    }
}

/// Now, in seconds since 1970-01-01 00:00:00 UTC.
fn unix_now() -> i64 {
    let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH);
    now.map_or(0, |d| i64::try_from(d.as_secs()).unwrap_or(i64::MAX))
}

/// A hash of a file's bytes; `None` if it cannot be read.
type Stamp = Option<u64>;

fn stamp(path: &Path) -> Stamp {
    let bytes = std::fs::read(path).ok()?;
    let mut h = DefaultHasher::new();
    bytes.hash(&mut h);
    Some(h.finish())
}

/// The files the settings come from.
#[derive(Debug, Clone, Default)]
pub(super) struct Files {
    pub tls: Option<TlsFiles>,
    pub token: Option<PathBuf>,
}

impl Files {
    /// Every file, in a fixed order.
    fn paths(&self) -> Vec<&Path> {
        let mut out = Vec::new();
        if let Some(t) = &self.tls {
            out.push(t.ca.as_path());
            if let Some((c, k)) = &t.client {
                out.extend([c.as_path(), k.as_path()]);
            }
            out.extend(t.crl.as_deref());
        }
        out.extend(self.token.as_deref());
        out
    }

    fn stamps(&self) -> Vec<Stamp> {
        self.paths().into_iter().map(stamp).collect()
    }

    /// Read every file: the TLS settings and the token.
    pub fn read(&self) -> Result<Loaded, AgentError> {
        let stamps = self.stamps();
        let (tls, dates) = match &self.tls {
            None => (None, Vec::new()),
            Some(files) => client_config(files).map(|(c, d)| (Some(c), d))?,
        };
        let token = self.token.as_deref().map(read_token).transpose()?;
        Ok(Loaded { tls, token, stamps, dates, reminder: Reminder::default() })
    }

    /// The settings now: those in `loaded`, read again first if a file changed since (a file
    /// that cannot be used keeps them, said once on standard error). The warnings of their
    /// dates that are due are said on standard error.
    pub fn current(
        &self,
        loaded: &Mutex<Loaded>,
    ) -> (Option<Arc<rustls::ClientConfig>>, Option<String>) {
        let stamps = self.stamps();
        let mut l = loaded.lock().unwrap_or_else(PoisonError::into_inner);
        if stamps != l.stamps {
            match self.read() {
                Ok(new) => {
                    *l = new;
                    let names: Vec<_> =
                        self.paths().iter().map(|p| p.display().to_string()).collect();
                    eprintln!("latnet-switch agent: read {} again", names.join(", "));
                }
                Err(e) => {
                    // tried again only when a file changes again
                    l.stamps = stamps;
                    eprintln!("latnet-switch agent: kept the previous settings: {e}");
                }
            }
        }
        for w in l.warnings(unix_now()) {
            eprintln!("latnet-switch agent: {w}");
        }
        (l.tls.clone(), l.token.clone())
    }
}

/// The token in file `path` (its first line that is neither empty nor a `#` comment, either
/// `TOKEN` or `ROLE TOKEN` as in the service's own file).
fn read_token(path: &Path) -> Result<String, AgentError> {
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
    Ok(token.to_owned())
}

/// The client's TLS settings from `files`, and the dates they name; errors name the flag and
/// the file.
fn client_config(files: &TlsFiles) -> Result<(Arc<rustls::ClientConfig>, Vec<Dated>), AgentError> {
    use rustls::pki_types::PrivateKeyDer;
    use rustls::pki_types::{pem::PemObject, CertificateDer, CertificateRevocationListDer};
    let path = &files.ca;
    let bad = |m: String| AgentError::Config(format!("--ca-file {}: {m}", path.display()));
    let certs = CertificateDer::pem_file_iter(path)
        .and_then(Iterator::collect::<Result<Vec<_>, _>>)
        .map_err(|e| bad(format!("{e} (expected PEM certificates)")))?;
    let mut roots = rustls::RootCertStore::empty();
    let (added, _) = roots.add_parsable_certificates(certs);
    if added == 0 {
        return Err(bad(
            "no usable certificate in it (expected a PEM 'BEGIN CERTIFICATE' block)".into()
        ));
    }
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let builder = rustls::ClientConfig::builder_with_provider(provider.clone())
        .with_safe_default_protocol_versions()
        .map_err(|e| bad(e.to_string()))?;
    let mut dates = Vec::new();
    let builder = match &files.crl {
        None => builder.with_root_certificates(roots),
        Some(f) => {
            let bad = |m: String| AgentError::Config(format!("--crl-file {}: {m}", f.display()));
            let lists = CertificateRevocationListDer::pem_file_iter(f)
                .and_then(Iterator::collect::<Result<Vec<_>, _>>)
                .map_err(|e| bad(format!("{e} (expected PEM certificate revocation lists)")))?;
            if lists.is_empty() {
                return Err(bad(
                    "no revocation list in it (expected a PEM 'BEGIN X509 CRL' block)".into(),
                ));
            }
            let first =
                lists.iter().filter_map(|l| x509::next_update(l)).min_by_key(|d| d.unix_secs);
            let path = f.clone();
            dates.extend(first.map(|due| Dated { what: DateOf::Revocation, path, due }));
            let verifier =
                rustls::client::WebPkiServerVerifier::builder_with_provider(roots.into(), provider)
                    .with_crls(lists)
                    .enforce_revocation_expiration()
                    .build()
                    .map_err(|e| bad(e.to_string()))?;
            builder.with_webpki_verifier(verifier)
        }
    };
    let c = match &files.client {
        None => builder.with_no_client_auth(),
        Some((cert, key)) => {
            let bad_cert =
                |m: String| AgentError::Config(format!("--client-cert {}: {m}", cert.display()));
            let bad_key =
                |m: String| AgentError::Config(format!("--client-key {}: {m}", key.display()));
            let chain = CertificateDer::pem_file_iter(cert)
                .and_then(Iterator::collect::<Result<Vec<_>, _>>)
                .map_err(|e| bad_cert(format!("{e} (expected PEM certificates)")))?;
            let Some(leaf) = chain.first() else {
                return Err(bad_cert("no certificate in it".into()));
            };
            let (what, path) = (DateOf::ClientCertificate, cert.clone());
            dates.extend(x509::not_after(leaf).map(|due| Dated { what, path, due }));
            let k = PrivateKeyDer::from_pem_file(key)
                .map_err(|e| bad_key(format!("{e} (expected a PEM private key)")))?;
            builder.with_client_auth_cert(chain, k).map_err(|e| {
                bad_key(format!("does not go with --client-cert {}: {e}", cert.display()))
            })?
        }
    };
    Ok((Arc::new(c), dates))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(cmd: &mut std::process::Command) -> std::process::Output {
        let out = cmd.output();
        let Ok(out) = out else { panic!("{cmd:?}: {out:?}") };
        out
    }

    #[test]
    fn the_client_certificate_and_the_lists_are_warned_of_ahead_of_their_dates_once_a_day() {
        let dir = std::env::temp_dir().join(format!("latnet-agent-dates-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let scripts = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../scripts");
        let made = run(std::process::Command::new(scripts.join("tls-certs.sh")).arg(&dir));
        assert!(made.status.success(), "scripts/tls-certs.sh (openssl): {made:?}");
        // the list due in 2 days (a number of days the script refuses is told)
        let revoke = || std::process::Command::new(scripts.join("tls-revoke.sh"));
        let bad = run(revoke().args(["--days", "x"]).arg(&dir));
        let said = String::from_utf8_lossy(&bad.stderr);
        assert_eq!(bad.status.code(), Some(2), "{said}");
        assert!(said.contains("--days: expected a whole number of days"), "{said}");
        assert!(run(revoke().args(["--days", "2"]).arg(&dir)).status.success());
        let (cert, crl) = (dir.join("client.crt"), dir.join("ca.crl"));
        let tls = TlsFiles {
            ca: dir.join("ca.crt"),
            client: Some((cert.clone(), dir.join("client.key"))),
            crl: Some(crl.clone()),
        };
        let files = Files { tls: Some(tls), token: None };
        let Ok(mut loaded) = files.read() else { panic!("files not read") };
        let now = unix_now();
        let [list, client] = &loaded.dates[..] else { panic!("{:?}", loaded.dates) };
        assert_eq!((list.what, &list.path), (DateOf::Revocation, &crl));
        assert_eq!((client.what, &client.path), (DateOf::ClientCertificate, &cert));
        // openssl's dates: 2 and 825 days from when the files were made (a minute ago at most)
        let from_now = |d: &Dated| d.due.unix_secs - now;
        assert!((2 * 86_400 - 60..=2 * 86_400).contains(&from_now(list)), "{list:?}");
        assert!((825 * 86_400 - 60..=825 * 86_400).contains(&from_now(client)), "{client:?}");
        let expiry = client.due.unix_secs;
        // due in 2 days: warned of; not again within the day, then again
        let w = loaded.warnings(now);
        let want = format!("warning: --crl-file {} is due for renewal at ", crl.display());
        assert!(w.len() == 1 && w[0].starts_with(&want) && w[0].ends_with(", in 2 days"), "{w:?}");
        assert_eq!(loaded.warnings(now + 3_600), Vec::<String>::new());
        let w = loaded.warnings(now + 86_400);
        assert!(w.len() == 1 && w[0].ends_with(", in 1 day"), "{w:?}");
        let w = loaded.warnings(now + 3 * 86_400);
        assert!(w.len() == 1 && w[0].contains("was due for renewal at"), "{w:?}");
        // the client certificate too, from 14 days before its end
        let w = loaded.warnings(expiry - 15 * 86_400);
        assert_eq!(w.len(), 1, "{w:?}");
        let w = loaded.warnings(expiry - 5 * 86_400);
        let want = format!("warning: --client-cert {} expires at ", cert.display());
        assert!(w.len() == 2 && w[1].starts_with(&want) && w[1].ends_with(", in 5 days"), "{w:?}");
        let w = loaded.warnings(expiry);
        assert!(w.len() == 2 && w[1].ends_with(": the service refuses it"), "{w:?}");
        // a list due in 30 days and a certificate in 825: nothing to say
        assert!(run(revoke().arg(&dir)).status.success());
        let Ok(mut later) = files.read() else { panic!("files not read") };
        assert_eq!(later.warnings(now), Vec::<String>::new());
        let _ = std::fs::remove_dir_all(&dir);
    }
}
