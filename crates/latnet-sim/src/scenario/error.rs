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

/// 1-based line and column of a byte offset in `src`.
pub(crate) fn line_col(src: &str, offset: usize) -> (usize, usize) {
    let offset = offset.min(src.len());
    let before = &src.as_bytes()[..offset];
    let line = before.iter().filter(|&&b| b == b'\n').count() + 1;
    let col = offset - before.iter().rposition(|&b| b == b'\n').map_or(0, |p| p + 1) + 1;
    (line, col)
}

/// Builds errors for one source text.
#[derive(Debug, Clone, Copy)]
pub(crate) struct ErrCtx<'a> {
    pub file: &'a str,
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
        let key = e.span().and_then(|s| key_path_at(self.src, s.start));
        let mut message = e.message().trim().to_owned();
        // A queue kind with flattened limits loses serde's list of expected keys.
        if message.starts_with("unknown field") && !message.contains("expected") {
            let kind = key.as_deref().and_then(|k| queue_kind_at(self.src, k));
            if let Some(keys) = kind.and_then(|k| latnet_dataplane::queue::QueueSpec::keys(&k)) {
                let keys: Vec<String> = keys.iter().map(|k| format!("`{k}`")).collect();
                message = format!("{message}, expected one of {}", keys.join(", "));
            }
        }
        ScenarioError {
            file: self.file.to_owned(),
            line_col: e.span().map(|s| line_col(self.src, s.start)),
            key,
            message,
        }
    }
}

/// The key path (`links[2].queue.kind`) of the innermost key or value of the TOML text `src`
/// that holds byte `at`; `None` when `src` does not parse or nothing holds `at`.
pub(crate) fn key_path_at(src: &str, at: usize) -> Option<String> {
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

fn in_table(t: &toml_edit::Table, prefix: &str, at: usize, best: &mut Option<String>) {
    for (k, item) in t.iter() {
        let path = join(prefix, k);
        if holds(t.key(k).and_then(toml_edit::Key::span), at) || holds(item.span(), at) {
            *best = Some(path.clone());
        }
        match item {
            toml_edit::Item::Value(v) => in_value(v, &path, at, best),
            toml_edit::Item::Table(sub) => in_table(sub, &path, at, best),
            toml_edit::Item::ArrayOfTables(a) => {
                for (i, sub) in a.iter().enumerate() {
                    let path = format!("{path}[{i}]");
                    if holds(sub.span(), at) {
                        *best = Some(path.clone());
                    }
                    in_table(sub, &path, at, best);
                }
            }
            toml_edit::Item::None => {}
        }
    }
}

fn in_value(v: &toml_edit::Value, path: &str, at: usize, best: &mut Option<String>) {
    match v {
        toml_edit::Value::InlineTable(t) => {
            for (k, v) in t.iter() {
                let path = join(path, k);
                if holds(t.key(k).and_then(toml_edit::Key::span), at) || holds(v.span(), at) {
                    *best = Some(path.clone());
                }
                in_value(v, &path, at, best);
            }
        }
        toml_edit::Value::Array(a) => {
            for (i, v) in a.iter().enumerate() {
                let path = format!("{path}[{i}]");
                if holds(v.span(), at) {
                    *best = Some(path.clone());
                }
                in_value(v, &path, at, best);
            }
        }
        _ => {}
    }
}

/// The `kind` of the queue table at `key` (a path [`key_path_at`] gave, ending in a key
/// named like `queue`), if it has one.
fn queue_kind_at(src: &str, key: &str) -> Option<String> {
    let last = key.rsplit('.').next()?;
    if last != "queue" && !last.starts_with("queue_") {
        return None;
    }
    let value: toml::Value = src.parse::<toml::Table>().ok()?.into();
    let mut at = &value;
    for seg in key.split('.') {
        let (name, idx) = match seg.split_once('[') {
            Some((n, rest)) => (n, rest.trim_end_matches(']').parse::<usize>().ok()),
            None => (seg, None),
        };
        at = at.get(name.trim_matches('"'))?;
        if let Some(i) = idx {
            at = at.get(i)?;
        }
    }
    Some(at.get("kind")?.as_str()?.to_owned())
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
