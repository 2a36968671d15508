//! The order a request's changes are applied in, kept with agents on other hosts through
//! the service (`POST /agents`, `POST /applied`, `GET /applied?...&wait=`).

use super::*;

/// One step of the order a request's changes are applied in: a moved flow, or the new one.
#[derive(Debug, Clone, Copy)]
pub(super) struct Step {
    pub(super) flow: u64,
    pub(super) seq: i64,
    /// Applied by this agent (which waited for its drain already).
    pub(super) ours: bool,
}

/// How this agent keeps the sequential order with agents on other hosts.
#[derive(Debug, Default)]
pub(super) struct Peers {
    /// Why it does not (`None`: it does, or will once registered).
    pub(super) off: Option<String>,
    pub(super) registered: bool,
    pub(super) next_register_ns: u64,
    /// Another agent's steps asked about, by the answer that ended the wait (`applied`,
    /// `unserved`, `removed`), the time spent asking (the service holds a question until the
    /// step is done), and the waits that ran out.
    pub(super) asked: BTreeMap<String, u64>,
    pub(super) waited_ns: u64,
    pub(super) timeouts: u64,
    /// Steps reported, and reports that failed.
    pub(super) reports: u64,
    pub(super) report_errors: u64,
    /// The step before the next one.
    pub(super) prev: Option<Step>,
    /// Why the service refused this agent's hosts (another agent serves one).
    pub(super) conflict: Option<String>,
}

impl Agent {
    /// Re-tag the flows `moved` by log entry `seq`, then tag the flow it admitted (`new`), in
    /// the agent's [`Order`]: sequentially, each once the flow moved before it has had its old
    /// guarantee (times the dilation) to drain its old path (the states the controller
    /// checked, as `latnet chameleon transitions` simulates them), or all at once. In the
    /// sequential order a step of another agent's host is waited for through the service
    /// ([`Agent::wait_for_prev`]) and each step of this agent's is reported once done.
    pub(super) fn steps(
        &mut self,
        moved: &[u64],
        new: Option<u64>,
        seq: i64,
    ) -> Result<(), AgentError> {
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
    pub(super) fn wait_for_prev(&mut self) {
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
    pub(super) fn register(&mut self) {
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
    pub(super) fn report(&mut self, step: Step) {
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
}
