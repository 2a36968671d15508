//! `GET /metrics`: the service's counters in the Prometheus text format (version 0.0.4), for a
//! scraper (Prometheus, an OpenMetrics agent) to watch a running service.
//!
//! Two sources: the controller's (`GET /stats`: flows, admissions, refusals, reroutes, the
//! log), asked of the controller thread like any request, and the network side's own, kept by
//! the connection threads in [`Metrics`] (connections, answers by status, TLS handshakes that
//! failed, reloads). The request needs a read token like any other (`GET /health` is the only
//! one without).

use serde_json::Value;
use std::collections::BTreeMap;
use std::fmt::Write;
use std::sync::atomic::{AtomicI64, AtomicU64, AtomicUsize, Ordering};
use std::sync::Mutex;

/// The network side's counters, shared by an endpoint's threads.
#[derive(Debug, Default)]
pub struct Metrics {
    /// Connections accepted (including those refused for [`crate::MAX_CONNECTIONS`]).
    pub(crate) accepted: AtomicU64,
    /// Connections open now.
    pub(crate) open: AtomicUsize,
    /// Connections refused because [`crate::MAX_CONNECTIONS`] were open.
    pub(crate) refused: AtomicU64,
    /// TLS connections that ended before or during the handshake with an error, by why
    /// (indexed by [`Failure`]).
    tls_failed: [AtomicU64; Failure::ALL.len()],
    /// Answers written, by status code.
    answers: Mutex<BTreeMap<u16, u64>>,
    /// Reloads of the token and TLS files that replaced them.
    reloads: AtomicU64,
    /// Reloads that kept the previous settings (a file could not be used).
    reloads_failed: AtomicU64,
    /// When the first client revocation list in use is due for renewal (seconds since 1970);
    /// 0 without lists.
    crl_due: AtomicI64,
    /// When the service's certificate in use expires (seconds since 1970); 0 without TLS.
    cert_expiry: AtomicI64,
}

/// Why a TLS connection ended before its first request (`GET /metrics`:
/// `latnet_ctld_tls_handshake_failures_total{reason="..."}`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Failure {
    /// Plain HTTP on the TLS port (answered 400).
    PlainHttp,
    /// Neither TLS nor HTTP.
    NotTls,
    /// The handshake did not end within the I/O timeout.
    Timeout,
    /// The client closed or reset the connection during the handshake.
    Closed,
    /// The client's certificate was refused: none, another CA's, revoked, or one the revocation
    /// lists cannot vouch for (a list of another CA, or past its next update).
    ClientCertificate,
    /// The client ended it with an alert (it refused the service's certificate, say).
    PeerAlert,
    /// Anything else (a protocol error).
    Other,
}

impl Failure {
    /// Every reason, in the order of the metric's samples.
    pub const ALL: [Failure; 7] = [
        Failure::PlainHttp,
        Failure::NotTls,
        Failure::Timeout,
        Failure::Closed,
        Failure::ClientCertificate,
        Failure::PeerAlert,
        Failure::Other,
    ];

    /// The metric's label value.
    pub fn label(self) -> &'static str {
        match self {
            Failure::PlainHttp => "plain_http",
            Failure::NotTls => "not_tls",
            Failure::Timeout => "timeout",
            Failure::Closed => "closed",
            Failure::ClientCertificate => "client_certificate",
            Failure::PeerAlert => "peer_alert",
            Failure::Other => "other",
        }
    }
}

impl Metrics {
    /// Count a TLS connection that failed for `why`.
    pub(crate) fn tls_failed(&self, why: Failure) {
        self.tls_failed[why as usize].fetch_add(1, Ordering::Relaxed);
    }

    /// Count an answer with `status`.
    pub(crate) fn answered(&self, status: u16) {
        let mut a = self.answers.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        *a.entry(status).or_default() += 1;
    }

    /// Count a reload of the settings files: `ok` if it replaced them.
    pub fn reloaded(&self, ok: bool) {
        let c = if ok { &self.reloads } else { &self.reloads_failed };
        c.fetch_add(1, Ordering::Relaxed);
    }

    /// The TLS files in use now have these dates.
    pub fn tls_dates(&self, dates: &crate::tls::Dates) {
        let secs = |d: &Option<crate::tls::Due>| d.as_ref().map_or(0, |d| d.unix_secs);
        self.crl_due.store(secs(&dates.revocation), Ordering::Relaxed);
        self.cert_expiry.store(secs(&dates.certificate), Ordering::Relaxed);
    }
}

/// The controller's counters: the `GET /stats` field, the metric, its type and its help.
const CONTROLLER: [(&str, &str, &str, &str); 10] = [
    ("flows", "latnet_ctld_flows", "gauge", "Flows admitted now."),
    ("admitted", "latnet_ctld_admitted_total", "counter", "Flows admitted (the store's count)."),
    ("rejected", "latnet_ctld_rejected_total", "counter", "Flows refused (the store's count)."),
    ("reroutes", "latnet_ctld_reroutes_total", "counter", "Admitted flows moved to fit new ones."),
    (
        "admitted_after_reroute",
        "latnet_ctld_admitted_after_reroute_total",
        "counter",
        "Flows admitted only after moving others.",
    ),
    (
        "invalid",
        "latnet_ctld_invalid_requests_total",
        "counter",
        "Requests answered 422 since the service started.",
    ),
    (
        "denied",
        "latnet_ctld_denied_requests_total",
        "counter",
        "Requests refused for their token (401, 403) since the service started.",
    ),
    (
        "compaction_errors",
        "latnet_ctld_compaction_errors_total",
        "counter",
        "Compactions of the store that failed.",
    ),
    ("last", "latnet_ctld_log_last_seq", "gauge", "The newest entry of the store's log."),
    ("agents", "latnet_ctld_agents", "gauge", "Host agents registered now."),
];

/// One metric without labels.
fn metric(out: &mut String, name: &str, kind: &str, help: &str, value: impl std::fmt::Display) {
    let _ = write!(out, "# HELP {name} {help}\n# TYPE {name} {kind}\n{name} {value}\n");
}

/// The text of `GET /metrics`: the controller's `stats` (the body of `GET /stats`) and `net`.
pub(crate) fn render(stats: &Value, net: &Metrics) -> String {
    let mut out = String::new();
    for (field, name, kind, help) in CONTROLLER {
        if let Some(v) = stats.get(field).and_then(Value::as_u64) {
            metric(&mut out, name, kind, help, v);
        }
    }
    let load = |c: &AtomicU64| c.load(Ordering::Relaxed);
    let open = net.open.load(Ordering::Relaxed);
    metric(&mut out, "latnet_ctld_connections_open", "gauge", "Connections open now.", open);
    let help = "Connections accepted (with those refused).";
    metric(&mut out, "latnet_ctld_connections_total", "counter", help, load(&net.accepted));
    let help = "Connections refused because the most were open (503).";
    metric(&mut out, "latnet_ctld_connections_refused_total", "counter", help, load(&net.refused));
    let name = "latnet_ctld_tls_handshake_failures_total";
    let _ = write!(
        out,
        "# HELP {name} TLS connections that failed before their first request, by why.\n\
         # TYPE {name} counter\n"
    );
    for why in Failure::ALL {
        let n = load(&net.tls_failed[why as usize]);
        let _ = writeln!(out, "{name}{{reason=\"{}\"}} {n}", why.label());
    }
    let name = "latnet_ctld_responses_total";
    let _ = write!(out, "# HELP {name} Answers written, by status.\n# TYPE {name} counter\n");
    let answers = net.answers.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
    for (code, n) in answers.iter() {
        let _ = writeln!(out, "{name}{{code=\"{code}\"}} {n}");
    }
    drop(answers);
    let name = "latnet_ctld_reloads_total";
    let _ = write!(
        out,
        "# HELP {name} Rereads of the token and TLS files (SIGHUP), by result.\n\
         # TYPE {name} counter\n{name}{{result=\"ok\"}} {}\n{name}{{result=\"failed\"}} {}\n",
        load(&net.reloads),
        load(&net.reloads_failed)
    );
    let expiry = net.cert_expiry.load(Ordering::Relaxed);
    if expiry != 0 {
        let help = "When the service's certificate (--tls-cert) expires, in seconds since 1970: \
                    clients refuse it from then on.";
        let name = "latnet_ctld_tls_certificate_not_after_timestamp_seconds";
        metric(&mut out, name, "gauge", help, expiry);
    }
    let due = net.crl_due.load(Ordering::Relaxed);
    if due != 0 {
        let help = "When the first client revocation list (--tls-client-crl) is due for \
                    renewal, in seconds since 1970: every client is refused from then on.";
        let name = "latnet_ctld_tls_client_crl_next_update_timestamp_seconds";
        metric(&mut out, name, "gauge", help, due);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// Every sample line of `text`: (name with labels, value).
    fn samples(text: &str) -> Vec<(String, f64)> {
        text.lines()
            .filter(|l| !l.starts_with('#'))
            .map(|l| {
                let (k, v) = l.rsplit_once(' ').expect("a sample is NAME VALUE");
                (k.to_owned(), v.parse().expect("a number"))
            })
            .collect()
    }

    #[test]
    fn every_sample_has_help_and_type_before_it_and_counts_what_happened() {
        let net = Metrics::default();
        net.answered(200);
        net.answered(200);
        net.answered(401);
        net.reloaded(false);
        net.tls_failed(Failure::Timeout);
        net.accepted.store(3, Ordering::Relaxed);
        let stats = json!({"flows": 2, "admitted": 5, "rejected": 1, "reroutes": 0,
                           "admitted_after_reroute": 0, "invalid": 4, "denied": 1,
                           "compaction_errors": 0, "last": 6, "agents": 1});
        let text = render(&stats, &net);
        let got: BTreeMap<String, f64> = samples(&text).into_iter().collect();
        assert_eq!(got["latnet_ctld_flows"], 2.0);
        assert_eq!(got["latnet_ctld_admitted_total"], 5.0);
        assert_eq!(got["latnet_ctld_log_last_seq"], 6.0);
        assert_eq!(got["latnet_ctld_responses_total{code=\"200\"}"], 2.0);
        assert_eq!(got["latnet_ctld_responses_total{code=\"401\"}"], 1.0);
        assert_eq!(got["latnet_ctld_reloads_total{result=\"failed\"}"], 1.0);
        assert_eq!(got["latnet_ctld_reloads_total{result=\"ok\"}"], 0.0);
        assert_eq!(got["latnet_ctld_connections_total"], 3.0);
        let failures = |why: &str| {
            got[&format!("latnet_ctld_tls_handshake_failures_total{{reason=\"{why}\"}}")]
        };
        assert_eq!(failures("timeout"), 1.0);
        assert!(Failure::ALL.iter().all(|f| *f == Failure::Timeout || failures(f.label()) == 0.0));
        let due = "latnet_ctld_tls_client_crl_next_update_timestamp_seconds";
        let expiry = "latnet_ctld_tls_certificate_not_after_timestamp_seconds";
        assert!(!got.contains_key(due) && !got.contains_key(expiry), "no TLS, no dates");
        let at = |unix_secs| Some(crate::tls::Due { unix_secs, shown: String::new() });
        net.tls_dates(&crate::tls::Dates { certificate: at(1_867_070_634), revocation: None });
        let text = render(&stats, &net);
        let got: BTreeMap<String, f64> = samples(&text).into_iter().collect();
        assert_eq!(got[expiry], 1_867_070_634.0);
        assert!(!got.contains_key(due), "no revocation lists, no renewal time");
        net.tls_dates(&crate::tls::Dates { certificate: None, revocation: at(1_867_071_600) });
        let text = render(&stats, &net);
        let got: BTreeMap<String, f64> = samples(&text).into_iter().collect();
        assert_eq!(got[due], 1_867_071_600.0);
        // each metric family is declared once, before its samples, with a known type
        let mut declared = Vec::new();
        for l in text.lines() {
            if let Some(rest) = l.strip_prefix("# TYPE ") {
                let (name, kind) = rest.split_once(' ').unwrap();
                assert!(["counter", "gauge"].contains(&kind), "{l}");
                assert!(!declared.contains(&name.to_owned()), "{name} declared twice");
                declared.push(name.to_owned());
            } else if !l.starts_with('#') {
                let family = l.split(['{', ' ']).next().unwrap();
                assert_eq!(declared.last().map(String::as_str), Some(family), "{l}");
                if family.ends_with("_total") {
                    assert!(text.contains(&format!("# TYPE {family} counter")), "{family}");
                }
            }
        }
        // a field the controller did not give is left out, not made up
        let text = render(&json!({"flows": 1}), &net);
        assert!(text.contains("latnet_ctld_flows 1\n"), "{text}");
        assert!(!text.contains("latnet_ctld_admitted_total"), "{text}");
    }
}
