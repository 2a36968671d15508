//! Scenario errors that name the file, the line, the key and what was expected.

use std::fmt;
use std::ops::Range;

/// A scenario file that cannot be used, with where and why.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub struct ScenarioError {
    /// The file (or `<string>` for scenarios given as text).
    pub file: String,
    /// 1-based line and column, when known.
    pub line_col: Option<(usize, usize)>,
    /// The key path, e.g. `links[2].rate`, when known.
    pub key: Option<String>,
    /// What is wrong and what was expected.
    pub message: String,
}

impl fmt::Display for ScenarioError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.file)?;
        if let Some((l, c)) = self.line_col {
            write!(f, ":{l}:{c}")?;
        }
        f.write_str(": ")?;
        if let Some(k) = &self.key {
            write!(f, "`{k}`: ")?;
        }
        f.write_str(&self.message)
    }
}

impl ScenarioError {
    /// An error of the TOML reader on `src`, the text of `file`: its line and column and the
    /// key path its span points at (for other TOML files than scenarios too: a topology, a
    /// live spec).
    pub fn from_toml(file: &str, src: &str, e: &toml::de::Error) -> ScenarioError {
        ErrCtx { file, src }.toml_error(e)
    }
}

/// 1-based line and column of a byte offset in `src`.
pub(crate) fn line_col(src: &str, offset: usize) -> (usize, usize) {
    let offset = offset.min(src.len());
    let before = &src.as_bytes()[..offset];
    let line = before.iter().filter(|&&b| b == b'\n').count() + 1;
    let col = offset - before.iter().rposition(|&b| b == b'\n').map_or(0, |p| p + 1) + 1;
    (line, col)
}

/// Builds errors for one source text (a scenario, or another TOML file: a topology).
#[derive(Debug, Clone, Copy)]
pub struct ErrCtx<'a> {
    /// The file, as errors name it.
    pub file: &'a str,
    /// Its text (spans are byte offsets into it).
    pub src: &'a str,
}

impl ErrCtx<'_> {
    /// An error at a span with a key path.
    pub fn at(
        &self,
        span: Option<Range<usize>>,
        key: impl Into<String>,
        msg: impl Into<String>,
    ) -> ScenarioError {
        ScenarioError {
            file: self.file.to_owned(),
            line_col: span.map(|s| line_col(self.src, s.start)),
            key: Some(key.into()),
            message: msg.into(),
        }
    }

    /// An error from the TOML deserializer (syntax, unknown field, wrong type), with the key
    /// path of what its span points at (the deserializer names none) and, for an unknown key
    /// of a queue, the keys its kind takes.
    pub fn toml_error(&self, e: &toml::de::Error) -> ScenarioError {
        let found = e.span().and_then(|s| locate(self.src, s.start));
        let mut message = e.message().trim().to_owned();
        // A queue kind with flattened limits loses serde's list of expected keys.
        if message.starts_with("unknown field") && !message.contains("expected") {
            let queue = found.as_ref().filter(|f| {
                let last = f.path.rsplit('.').next().unwrap_or("");
                last == "queue" || last.starts_with("queue_")
            });
            let keys = queue
                .and_then(|f| f.kind.as_deref())
                .and_then(latnet_dataplane::queue::QueueSpec::keys);
            if let Some(keys) = keys {
                let keys: Vec<String> = keys.iter().map(|k| format!("`{k}`")).collect();
                message = format!("{message}, expected one of {}", keys.join(", "));
            }
        }
        // a missing key: the span is its table's (empty for the document's top level), the key
        // the one the table lacks
        let missing = message.strip_prefix("missing field `").and_then(|r| r.split('`').next());
        let key = match (missing, e.span()) {
            (Some(k), Some(s)) if s.is_empty() => Some(join("", k)),
            (Some(k), _) => found.map(|t| join(&t.path, k)),
            (None, _) => found.map(|f| f.path),
        };
        ScenarioError {
            file: self.file.to_owned(),
            line_col: e.span().map(|s| line_col(self.src, s.start)),
            key,
            message,
        }
    }
}

/// What of a TOML text holds a byte: its key path and, for a table, its `kind`.
#[derive(Debug, Default)]
struct Found {
    path: String,
    kind: Option<String>,
}

/// The key path (`links[2].queue.kind`) of the innermost key or value of the TOML text `src`
/// that holds byte `at`; `None` when `src` does not parse or nothing holds `at`.
#[cfg(test)]
pub(crate) fn key_path_at(src: &str, at: usize) -> Option<String> {
    locate(src, at).map(|f| f.path)
}

fn locate(src: &str, at: usize) -> Option<Found> {
    let doc = toml_edit::ImDocument::parse(src).ok()?;
    let mut best = None;
    in_table(doc.as_table(), "", at, &mut best);
    best
}

fn holds(span: Option<Range<usize>>, at: usize) -> bool {
    span.is_some_and(|s| s.contains(&at))
}

fn join(prefix: &str, key: &str) -> String {
    let bare =
        !key.is_empty() && key.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-');
    let key = if bare { key.to_owned() } else { format!("{key:?}") };
    if prefix.is_empty() {
        key
    } else {
        format!("{prefix}.{key}")
    }
}

fn in_table(t: &toml_edit::Table, prefix: &str, at: usize, best: &mut Option<Found>) {
    for (k, item) in t.iter() {
        let path = join(prefix, k);
        if holds(t.key(k).and_then(toml_edit::Key::span), at) || holds(item.span(), at) {
            let kind = item.get("kind").and_then(toml_edit::Item::as_str).map(str::to_owned);
            *best = Some(Found { path: path.clone(), kind });
        }
        match item {
            toml_edit::Item::Value(v) => in_value(v, &path, at, best),
            toml_edit::Item::Table(sub) => in_table(sub, &path, at, best),
            toml_edit::Item::ArrayOfTables(a) => {
                for (i, sub) in a.iter().enumerate() {
                    let path = format!("{path}[{i}]");
                    if holds(sub.span(), at) {
                        *best = Some(Found { path: path.clone(), kind: None });
                    }
                    in_table(sub, &path, at, best);
                }
            }
            toml_edit::Item::None => {}
        }
    }
}

fn in_value(v: &toml_edit::Value, path: &str, at: usize, best: &mut Option<Found>) {
    match v {
        toml_edit::Value::InlineTable(t) => {
            for (k, v) in t.iter() {
                let path = join(path, k);
                if holds(t.key(k).and_then(toml_edit::Key::span), at) || holds(v.span(), at) {
                    let kind = v
                        .as_inline_table()
                        .and_then(|t| t.get("kind"))
                        .and_then(toml_edit::Value::as_str)
                        .map(str::to_owned);
                    *best = Some(Found { path: path.clone(), kind });
                }
                in_value(v, &path, at, best);
            }
        }
        toml_edit::Value::Array(a) => {
            for (i, v) in a.iter().enumerate() {
                let path = format!("{path}[{i}]");
                if holds(v.span(), at) {
                    *best = Some(Found { path: path.clone(), kind: None });
                }
                in_value(v, &path, at, best);
            }
        }
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn line_col_counts_from_one() {
        let s = "ab\ncd\nef";
        assert_eq!(line_col(s, 0), (1, 1));
        assert_eq!(line_col(s, 4), (2, 2));
        assert_eq!(line_col(s, 6), (3, 1));
        assert_eq!(line_col(s, 999), (3, 3));
    }

    #[test]
    fn display_names_file_line_and_key() {
        let e = ErrCtx { file: "x.toml", src: "a\nb = 1" }.at(Some(2..3), "b", "expected a string");
        assert_eq!(e.to_string(), "x.toml:2:1: `b`: expected a string");
    }
}
