//! Programming a host: best-effort routes, a flow's tagger entries and shaper class, its
//! removal and the retiring of its class.

use super::*;

impl Agent {
    pub(super) fn set_routes(&mut self, h: usize, r: &Value) -> Result<(), AgentError> {
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
    pub(super) fn apply_flow(
        &mut self,
        flow: &Value,
        seq: i64,
        why: &str,
    ) -> Result<(), AgentError> {
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

    pub(super) fn remove_flow(&mut self, id: u64, seq: i64, why: &str) -> Result<(), AgentError> {
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
}
