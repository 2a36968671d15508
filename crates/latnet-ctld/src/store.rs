//! The service's SQLite store: its configuration, the log of every operation with its
//! outcome, the snapshot a compaction folds entries into, and replaying them into a controller.

use super::*;

/// The SQLite file holding a service's configuration, log and flows.
#[derive(Debug)]
pub struct Store {
    conn: Connection,
    path: String,
    /// A random id made with the store: tells a host agent that a service it polls now keeps
    /// another store (whose log numbers start over).
    pub(crate) id: String,
    /// The newest log entry's number (entries folded into the snapshot included; 0: none).
    last: i64,
    /// The last entry the snapshot holds (0: no snapshot); opening replays the entries after it.
    snap: i64,
    /// Entries up to this one were deleted (at most `snap`: the newest entries folded into the
    /// snapshot may be kept for readers of the log).
    folded: i64,
}

impl Store {
    fn sql(&self, e: rusqlite::Error) -> ServiceError {
        ServiceError::Sqlite { path: self.path.clone(), source: e }
    }

    /// Open (or create) the store at `path` for `cfg`, and the controller its log leads to.
    /// Settings that cannot build a controller are refused ([`ServiceError::Config`]) before
    /// the file is opened, so such a start neither makes a store nor writes into one.
    pub fn open(
        path: &Path,
        cfg: &ServiceConfig,
    ) -> Result<(Store, Controller, Matches), ServiceError> {
        let fresh = cfg.controller().map_err(ServiceError::Config)?;
        let p = path.display().to_string();
        let conn = Connection::open(path)
            .map_err(|e| ServiceError::Sqlite { path: p.clone(), source: e })?;
        let mut store = Store { conn, path: p, id: String::new(), last: 0, snap: 0, folded: 0 };
        store
            .conn
            .execute_batch(
                "PRAGMA journal_mode = WAL;
                 PRAGMA synchronous = NORMAL;
                 CREATE TABLE IF NOT EXISTS config (
                     id INTEGER PRIMARY KEY CHECK (id = 1), json TEXT NOT NULL);
                 CREATE TABLE IF NOT EXISTS log (
                     seq INTEGER PRIMARY KEY, op TEXT NOT NULL, body TEXT NOT NULL,
                     outcome TEXT NOT NULL);
                 CREATE TABLE IF NOT EXISTS flows (
                     id INTEGER PRIMARY KEY, src TEXT NOT NULL, dst TEXT NOT NULL,
                     rate_bps INTEGER NOT NULL, burst_bytes INTEGER NOT NULL,
                     deadline_ns INTEGER NOT NULL, guarantee_ns INTEGER NOT NULL,
                     json TEXT NOT NULL);
                 CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
                 CREATE TABLE IF NOT EXISTS snapshot (
                     id INTEGER PRIMARY KEY CHECK (id = 1), seq INTEGER NOT NULL,
                     json TEXT NOT NULL);
                 INSERT OR IGNORE INTO meta (key, value)
                     VALUES ('store', lower(hex(randomblob(8))));",
            )
            .map_err(|e| store.sql(e))?;
        store.id = store
            .conn
            .query_row("SELECT value FROM meta WHERE key = 'store'", [], |r| r.get(0))
            .map_err(|e| store.sql(e))?;
        let stored: Option<String> = store
            .conn
            .query_row("SELECT json FROM config WHERE id = 1", [], |r| r.get(0))
            .optional()
            .map_err(|e| store.sql(e))?;
        match stored {
            None => {
                let text =
                    serde_json::to_string(cfg).map_err(|e| ServiceError::Config(e.to_string()))?;
                store
                    .conn
                    .execute("INSERT INTO config (id, json) VALUES (1, ?1)", [text])
                    .map_err(|e| store.sql(e))?;
            }
            Some(text) => {
                let old: ServiceConfig =
                    serde_json::from_str(&text).map_err(|e| ServiceError::BadEntry {
                        path: store.path.clone(),
                        seq: 0,
                        message: format!("config: {e}"),
                    })?;
                for ((field, stored), (_, given)) in old.fields().into_iter().zip(cfg.fields()) {
                    if stored != given {
                        return Err(ServiceError::Mismatch {
                            path: store.path.clone(),
                            field: field.to_owned(),
                            stored,
                            given,
                        });
                    }
                }
            }
        }
        store.snap = store
            .conn
            .query_row("SELECT seq FROM snapshot WHERE id = 1", [], |r| r.get(0))
            .optional()
            .map_err(|e| store.sql(e))?
            .unwrap_or(0);
        let (oldest, newest): (Option<i64>, Option<i64>) = store
            .conn
            .query_row("SELECT MIN(seq), MAX(seq) FROM log", [], |r| Ok((r.get(0)?, r.get(1)?)))
            .map_err(|e| store.sql(e))?;
        store.last = newest.unwrap_or(0).max(store.snap);
        store.folded = oldest.map_or(store.snap, |o| o - 1);
        let (ctl, matches) = store.rebuild_from(fresh)?;
        store.rewrite_flows(&ctl, &matches)?;
        Ok((store, ctl, matches))
    }

    /// The newest log entry's number (0: none yet).
    pub fn last(&self) -> i64 {
        self.last
    }

    /// The last entry the snapshot holds (0: none).
    pub fn snapshot_seq(&self) -> i64 {
        self.snap
    }

    /// Entries up to this one were deleted from the log (0: none).
    pub fn folded(&self) -> i64 {
        self.folded
    }

    /// The snapshot as stored (`None`: the store has none).
    pub(crate) fn snapshot_json(&self) -> Result<Option<Value>, ServiceError> {
        let text: Option<String> = self
            .conn
            .query_row("SELECT json FROM snapshot WHERE id = 1", [], |r| r.get(0))
            .optional()
            .map_err(|e| self.sql(e))?;
        text.map(|t| {
            serde_json::from_str(&t).map_err(|e| ServiceError::BadSnapshot {
                path: self.path.clone(),
                seq: self.snap,
                message: format!("not JSON: {e}"),
            })
        })
        .transpose()
    }

    /// A controller for `cfg` in the store's state: the snapshot restored, then the log after it
    /// replayed and checked.
    pub(crate) fn rebuild(
        &self,
        cfg: &ServiceConfig,
    ) -> Result<(Controller, Matches), ServiceError> {
        self.rebuild_from(cfg.controller().map_err(ServiceError::Config)?)
    }

    /// [`Store::rebuild`] into `ctl`, a controller with nothing admitted.
    fn rebuild_from(&self, mut ctl: Controller) -> Result<(Controller, Matches), ServiceError> {
        let mut matches = Matches::new();
        if let Some(v) = self.snapshot_json()? {
            let bad = |message: String| ServiceError::BadSnapshot {
                path: self.path.clone(),
                seq: self.snap,
                message,
            };
            let topo = ctl.topology().clone();
            let cp = Checkpoint::from_json(&topo, &v).map_err(&bad)?;
            ctl.restore(&cp).map_err(&bad)?;
            for (i, f) in v["flows"].as_array().into_iter().flatten().enumerate() {
                if let (Some(id), Some(m)) = (f["id"].as_u64(), f.get("match")) {
                    let m: FlowMatch = serde_json::from_value(m.clone())
                        .map_err(|e| bad(format!("flows[{i}].match: {e}")))?;
                    matches.insert(id, m);
                }
            }
        }
        self.replay(&mut ctl, &mut matches)?;
        Ok((ctl, matches))
    }

    /// Replay the log's entries after the snapshot into `ctl`, checking every outcome and
    /// keeping the admitted flows' matches.
    fn replay(&self, ctl: &mut Controller, matches: &mut Matches) -> Result<(), ServiceError> {
        let mut stmt = self
            .conn
            .prepare("SELECT seq, body, outcome FROM log WHERE seq > ?1 ORDER BY seq")
            .map_err(|e| self.sql(e))?;
        let rows = stmt
            .query_map([self.snap], |r| {
                Ok((r.get::<_, i64>(0)?, r.get::<_, String>(1)?, r.get::<_, String>(2)?))
            })
            .map_err(|e| self.sql(e))?;
        for row in rows {
            let (seq, body, outcome) = row.map_err(|e| self.sql(e))?;
            let bad =
                |message: String| ServiceError::BadEntry { path: self.path.clone(), seq, message };
            let op: Op = serde_json::from_str(&body).map_err(|e| bad(format!("body: {e}")))?;
            let logged: Outcome =
                serde_json::from_str(&outcome).map_err(|e| bad(format!("outcome: {e}")))?;
            let (got, _) =
                apply(ctl, &op).map_err(|e| bad(format!("an invalid request in the log: {e}")))?;
            if got != logged {
                return Err(ServiceError::Diverged {
                    path: self.path.clone(),
                    seq,
                    op: op.name().to_owned(),
                    got: serde_json::to_string(&got).unwrap_or_default(),
                    logged: outcome,
                });
            }
            track(matches, &op, &got);
        }
        Ok(())
    }

    /// Make the controller's state now (`ctl`, `matches`: the state after the newest entry)
    /// the snapshot and delete every entry but the newest `keep` (kept for readers of the log;
    /// a restart replays none of them), in one transaction. The checkpoint is first restored
    /// into a fresh controller for `cfg` and must give the same queues and flows. Returns the
    /// entries deleted.
    pub(crate) fn compact(
        &mut self,
        cfg: &ServiceConfig,
        ctl: &Controller,
        matches: &Matches,
        keep: i64,
    ) -> Result<usize, ServiceError> {
        let (upto, drop_upto) = (self.last, self.last - keep.max(0));
        if upto == self.snap && drop_upto <= self.folded {
            return Ok(0);
        }
        let cp = ctl.checkpoint();
        let mut again = cfg.controller().map_err(ServiceError::Config)?;
        let same = again.restore(&cp).is_ok()
            && again.snapshot() == ctl.snapshot()
            && again.flows().eq(ctl.flows());
        if !same {
            return Err(ServiceError::BadSnapshot {
                path: self.path.clone(),
                seq: upto,
                message: "restoring the checkpoint does not give the controller's state; \
                          nothing was compacted"
                    .into(),
            });
        }
        let mut v = cp.to_json(ctl.topology());
        for f in v["flows"].as_array_mut().into_iter().flatten() {
            if let Some(m) = f["id"].as_u64().and_then(|id| matches.get(&id)) {
                f["match"] = serde_json::to_value(m).unwrap_or(Value::Null);
            }
        }
        v["seq"] = json!(upto);
        let tx = self.conn.unchecked_transaction().map_err(|e| self.sql(e))?;
        tx.execute(
            "INSERT OR REPLACE INTO snapshot (id, seq, json) VALUES (1, ?1, ?2)",
            params![upto, v.to_string()],
        )
        .map_err(|e| self.sql(e))?;
        let removed =
            tx.execute("DELETE FROM log WHERE seq <= ?1", [drop_upto]).map_err(|e| self.sql(e))?;
        tx.commit().map_err(|e| self.sql(e))?;
        self.snap = upto;
        self.folded = self.folded.max(drop_upto);
        Ok(removed)
    }

    fn rewrite_flows(&self, ctl: &Controller, matches: &Matches) -> Result<(), ServiceError> {
        let tx = self.conn.unchecked_transaction().map_err(|e| self.sql(e))?;
        tx.execute("DELETE FROM flows", []).map_err(|e| self.sql(e))?;
        for e in ctl.flows() {
            self.put_flow(&tx, ctl, e, matches)?;
        }
        tx.commit().map_err(|e| self.sql(e))
    }

    fn put_flow(
        &self,
        tx: &Connection,
        ctl: &Controller,
        e: &Embedding,
        matches: &Matches,
    ) -> Result<(), ServiceError> {
        let j = flow_json(ctl, e, matches.get(&e.id));
        let id = i64::try_from(e.id).unwrap_or(i64::MAX);
        tx.execute(
            "INSERT OR REPLACE INTO flows
                 (id, src, dst, rate_bps, burst_bytes, deadline_ns, guarantee_ns, json)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)",
            params![
                id,
                j["src"].as_str(),
                j["dst"].as_str(),
                j["rate_bps"].as_i64(),
                j["burst_bytes"].as_i64(),
                j["deadline_ns"].as_i64(),
                j["guarantee_ns"].as_i64(),
                j.to_string()
            ],
        )
        .map_err(|e| self.sql(e))?;
        Ok(())
    }

    /// Log entries after `after` (at most `limit`), and the newest entry's number (0: none).
    pub(crate) fn entries(
        &self,
        after: i64,
        limit: i64,
    ) -> Result<(Vec<Value>, i64), ServiceError> {
        let mut stmt = self
            .conn
            .prepare("SELECT seq, body, outcome FROM log WHERE seq > ?1 ORDER BY seq LIMIT ?2")
            .map_err(|e| self.sql(e))?;
        let rows = stmt
            .query_map(params![after, limit], |r| {
                Ok((r.get::<_, i64>(0)?, r.get::<_, String>(1)?, r.get::<_, String>(2)?))
            })
            .map_err(|e| self.sql(e))?;
        let mut out = Vec::new();
        for row in rows {
            let (seq, body, outcome) = row.map_err(|e| self.sql(e))?;
            let parse =
                |t: &str| serde_json::from_str::<Value>(t).unwrap_or(Value::String(t.into()));
            let mut entry = json!({"seq": seq});
            // `op` and the request's fields from the body, `outcome` and its fields beside them
            for part in [parse(&body), parse(&outcome)] {
                if let Value::Object(m) = part {
                    for (k, v) in m {
                        entry[k] = v;
                    }
                }
            }
            out.push(entry);
        }
        Ok((out, self.last))
    }

    /// Log `op` with its outcome and bring `flows` up to date, in one transaction (`matches`
    /// already holds what the operation did to them).
    pub(crate) fn record(
        &mut self,
        ctl: &Controller,
        matches: &Matches,
        op: &Op,
        outcome: &Outcome,
    ) -> Result<(), ServiceError> {
        let tx = self.conn.unchecked_transaction().map_err(|e| self.sql(e))?;
        let body = serde_json::to_string(op).unwrap_or_default();
        let out = serde_json::to_string(outcome).unwrap_or_default();
        // numbered explicitly: after a compaction the log may be empty, and numbers must not
        // start over
        tx.execute(
            "INSERT INTO log (seq, op, body, outcome) VALUES (?1, ?2, ?3, ?4)",
            params![self.last + 1, op.name(), body, out],
        )
        .map_err(|e| self.sql(e))?;
        match (op, outcome) {
            (_, Outcome::Admitted { rerouted: moved, .. } | Outcome::Refused { moved, .. }) => {
                let new = match outcome {
                    Outcome::Admitted { id, .. } => Some(id),
                    _ => None,
                };
                for fid in new.into_iter().chain(moved) {
                    if let Some(e) = ctl.flow(*fid) {
                        self.put_flow(&tx, ctl, e, matches)?;
                    }
                }
            }
            (Op::Remove { id }, Outcome::Removed { found: true }) => {
                tx.execute(
                    "DELETE FROM flows WHERE id = ?1",
                    [i64::try_from(*id).unwrap_or(i64::MAX)],
                )
                .map_err(|e| self.sql(e))?;
            }
            _ => {}
        }
        tx.commit().map_err(|e| self.sql(e))?;
        self.last += 1;
        Ok(())
    }
}
