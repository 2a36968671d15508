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

    /// An error from the TOML deserializer (syntax, unknown field, wrong type).
    pub fn toml_error(&self, e: &toml::de::Error) -> ScenarioError {
        ScenarioError {
            file: self.file.to_owned(),
            line_col: e.span().map(|s| line_col(self.src, s.start)),
            key: None,
            message: e.message().trim().to_owned(),
        }
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
