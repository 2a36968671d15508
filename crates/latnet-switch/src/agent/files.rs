//! The agent's settings from files (`--ca-file`, `--client-cert` / `--client-key`,
//! `--crl-file`, `--token-file`), read again when one of them changes: an agent runs for
//! months, while a revocation list is renewed every few weeks (and one past its next update
//! refuses the service), a client certificate expires, a token is revoked. The service reads
//! its own files again on SIGHUP; the agent reads its files before each request and compares
//! them with what it read last (a few small files per poll; modification times are too coarse,
//! a jiffy, to tell two writes apart), so a file replaced in place or by a rename is used from
//! the next poll on, with no signal to send. A file it cannot use keeps the previous settings,
//! said once on standard error, and is tried again when it changes.

use super::AgentError;
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

/// What was read from the files, shared by the clones of a controller.
#[derive(Debug, Default)]
pub(super) struct Loaded {
    pub tls: Option<Arc<rustls::ClientConfig>>,
    pub token: Option<String>,
    /// What the files looked like when read (in the order of [`Files::paths`]).
    stamps: Vec<Stamp>,
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
        let tls = self.tls.as_ref().map(client_config).transpose()?;
        let token = self.token.as_deref().map(read_token).transpose()?;
        Ok(Loaded { tls, token, stamps })
    }

    /// The settings now: those in `loaded`, read again first if a file changed since (a file
    /// that cannot be used keeps them, said once on standard error).
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

/// The client's TLS settings from `files`; errors name the flag and the file.
fn client_config(files: &TlsFiles) -> Result<Arc<rustls::ClientConfig>, AgentError> {
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
    Ok(Arc::new(c))
}
