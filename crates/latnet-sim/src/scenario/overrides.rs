//! Setting values in a scenario's TOML before it is read: `latnet run --set`, `latnet sweep`.
//!
//! A key is a path of table keys separated by dots; an array element is chosen by its index or
//! by its `name` (`sim.seed`, `links[0].rate`, `flows[video].traffic.rate`,
//! `nodes[r1].forwarding`). A value is TOML (`20`, `true`, `"20Mbps"`,
//! `{ kind = "fifo", limit_packets = 50 }`) or, when it does not read as TOML, a string
//! (`20Mbps`, `1ms`). The result is scenario text that [`Scenario::from_str_named`] reads and
//! validates as usual, so a value of the wrong kind is reported there with its key.
//!
//! [`Scenario::from_str_named`]: super::Scenario::from_str_named

use super::error::ErrCtx;
use super::ScenarioError;
use toml::{Table, Value};

/// One segment of a key path: a table key, optionally followed by an array selector.
#[derive(Debug, PartialEq, Eq)]
struct Segment<'a> {
    key: &'a str,
    select: Option<&'a str>,
}

/// Split `links[0].queue.limit_packets` into segments; `None` if it is not a key path.
fn segments(path: &str) -> Option<Vec<Segment<'_>>> {
    let mut out = Vec::new();
    let mut rest = path;
    loop {
        let end = rest.find(['.', '[']).unwrap_or(rest.len());
        let key = &rest[..end];
        let ok = !key.is_empty()
            && key.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-');
        if !ok {
            return None;
        }
        rest = &rest[end..];
        let mut select = None;
        if let Some(r) = rest.strip_prefix('[') {
            let close = r.find(']')?;
            let sel = r[..close].trim();
            if sel.is_empty() {
                return None;
            }
            select = Some(sel);
            rest = &r[close + 1..];
        }
        out.push(Segment { key, select });
        if rest.is_empty() {
            return Some(out);
        }
        rest = rest.strip_prefix('.')?;
    }
}

/// A command-line value as TOML, or as a string when it does not read as a TOML value.
pub fn parse_value(text: &str) -> Value {
    let text = text.trim();
    match format!("v = {text}").parse::<Table>() {
        Ok(mut t) if t.len() == 1 => t.remove("v").unwrap_or_else(|| Value::String(text.into())),
        _ => Value::String(text.to_owned()),
    }
}

fn names(arr: &[Value]) -> String {
    let v: Vec<&str> = arr.iter().filter_map(|e| e.get("name").and_then(Value::as_str)).collect();
    if v.is_empty() {
        "no element has a `name`".to_owned()
    } else {
        format!("names: {}", v.join(", "))
    }
}

/// `value` as the table the path goes on into (`walked` so far, `next` key), or why not.
fn as_table<'v>(value: &'v mut Value, walked: &str, next: &str) -> Result<&'v mut Table, String> {
    let kind = value.type_str();
    value
        .as_table_mut()
        .ok_or_else(|| format!("`{walked}` is a {kind}, not a table, so it has no `{next}`"))
}

/// Set one value; `key` is the whole path, for errors.
fn set(root: &mut Table, path: &[Segment<'_>], value: Value, key: &str) -> Result<(), String> {
    let mut table = root;
    let mut walked = String::new();
    for (i, seg) in path.iter().enumerate() {
        let last = i + 1 == path.len();
        if !walked.is_empty() {
            walked.push('.');
        }
        walked.push_str(seg.key);
        let Some(sel) = seg.select else {
            if last {
                table.insert(seg.key.to_owned(), value);
                return Ok(());
            }
            let entry =
                table.entry(seg.key.to_owned()).or_insert_with(|| Value::Table(Table::new()));
            table = as_table(entry, &walked, path[i + 1].key)?;
            continue;
        };
        let arr = match table.get_mut(seg.key) {
            Some(Value::Array(a)) => a,
            Some(other) => {
                return Err(format!(
                    "`{walked}` is a {}, not an array to select `[{sel}]` from",
                    other.type_str()
                ))
            }
            None => return Err(format!("the scenario has no `{walked}` to select `[{sel}]` from")),
        };
        let idx = match sel.parse::<usize>() {
            Ok(n) if n < arr.len() => n,
            Ok(n) => {
                return Err(format!(
                    "index {n} is out of range: the scenario has {} `{walked}` (0 to {})",
                    arr.len(),
                    arr.len().saturating_sub(1)
                ))
            }
            Err(_) => {
                let sel = sel.trim_matches('"');
                match arr.iter().position(|e| e.get("name").and_then(Value::as_str) == Some(sel)) {
                    Some(n) => n,
                    None => {
                        return Err(format!(
                            "no element of `{walked}` is named `{sel}` ({})",
                            names(arr)
                        ))
                    }
                }
            }
        };
        walked.push_str(&format!("[{sel}]"));
        if last {
            arr[idx] = value;
            return Ok(());
        }
        table = as_table(&mut arr[idx], &walked, path[i + 1].key)?;
    }
    Err(format!("`{key}`: empty key"))
}

/// The scenario text `src` (named `file` in errors) with each `(key, value)` of `sets` set, in
/// order. Keys that do not exist are added (the reader then refuses unknown ones, naming them);
/// a missing array element or name is an error here, naming the key.
pub fn apply_overrides(
    file: &str,
    src: &str,
    sets: &[(String, String)],
) -> Result<String, ScenarioError> {
    let cx = ErrCtx { file, src };
    let mut root: Table = src.parse().map_err(|e| cx.toml_error(&e))?;
    for (key, value) in sets {
        let err = |message: String| ScenarioError {
            file: file.to_owned(),
            line_col: None,
            key: Some(key.clone()),
            message,
        };
        let path = segments(key.trim()).ok_or_else(|| {
            err("expected a key path such as `sim.seed`, `links[0].rate` or \
                 `flows[video].traffic.rate`"
                .to_owned())
        })?;
        set(&mut root, &path, parse_value(value), key).map_err(err)?;
    }
    toml::to_string(&root).map_err(|e| ScenarioError {
        file: file.to_owned(),
        line_col: None,
        key: None,
        message: format!("cannot write the scenario back as TOML: {e}"),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Scenario;

    const SRC: &str = r#"
name = "t"
[sim]
duration = "10ms"
[[nodes]]
name = "a"
kind = "host"
[[nodes]]
name = "b"
kind = "host"
[[links]]
a = "a"
b = "b"
rate = "10Mbps"
delay = "1ms"
queue = { kind = "fifo", limit_packets = 10 }
[[flows]]
name = "video"
src = "a"
dst = "b"
size = 1000
traffic = { kind = "cbr", rate = "1Mbps" }
"#;

    fn with(sets: &[(&str, &str)]) -> Result<Scenario, ScenarioError> {
        let sets: Vec<(String, String)> =
            sets.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
        let text = apply_overrides("t.toml", SRC, &sets)?;
        Scenario::from_str_named("t.toml", &text)
    }

    #[test]
    fn key_paths_split_into_segments() {
        assert_eq!(
            segments("links[0].queue.limit_packets").unwrap(),
            vec![
                Segment { key: "links", select: Some("0") },
                Segment { key: "queue", select: None },
                Segment { key: "limit_packets", select: None },
            ]
        );
        for bad in ["", ".a", "a.", "a..b", "a[", "a[]", "a[0]b", "a b", "[0]"] {
            assert!(segments(bad).is_none(), "{bad:?}");
        }
    }

    #[test]
    fn values_read_as_toml_or_else_as_strings() {
        assert_eq!(parse_value("20"), Value::Integer(20));
        assert_eq!(parse_value("true"), Value::Boolean(true));
        assert_eq!(parse_value("\"20Mbps\""), Value::String("20Mbps".into()));
        assert_eq!(parse_value("20Mbps"), Value::String("20Mbps".into()));
        assert_eq!(parse_value("1ms"), Value::String("1ms".into()));
        assert!(parse_value("{ kind = \"fifo\", limit_packets = 5 }").is_table());
        assert_eq!(parse_value("a = 1"), Value::String("a = 1".into()));
    }

    #[test]
    fn sets_values_by_index_and_by_name() {
        let sc = with(&[
            ("sim.seed", "7"),
            ("links[0].rate", "20Mbps"),
            ("links[0].queue.limit_packets", "50"),
            ("flows[video].size", "500"),
        ])
        .unwrap();
        assert_eq!(sc.sim.seed, 7);
        assert_eq!(sc.links[0].rate.bps(), 20_000_000);
        assert_eq!(sc.flows[0].size, 500);
        let untouched = Scenario::from_str_named("t.toml", SRC).unwrap();
        assert_eq!(untouched.links[0].delay, sc.links[0].delay);
        assert_ne!(
            format!("{:?}", untouched.links[0].queue_ab),
            format!("{:?}", sc.links[0].queue_ab)
        );
        // a whole inline table replaces the old one
        let sc = with(&[("links[0].queue", "{ kind = \"fifo\", limit_packets = 3 }")]).unwrap();
        assert!(format!("{:?}", sc.links[0].queue_ab).contains('3'));
    }

    #[test]
    fn bad_keys_and_values_are_errors_naming_the_file_and_key() {
        let cases = [
            ("links[3].rate", "1Mbps", "index 3 is out of range: the scenario has 1 `links`"),
            ("flows[audio].size", "5", "no element of `flows` is named `audio` (names: video)"),
            ("name[0]", "5", "`name` is a string, not an array"),
            ("sim.duration.x", "5", "`sim.duration` is a string, not a table"),
            ("routes[0].node", "a", "the scenario has no `routes`"),
            ("links[0]..rate", "1", "expected a key path"),
        ];
        for (k, v, want) in cases {
            let e = with(&[(k, v)]).unwrap_err();
            assert_eq!(e.file, "t.toml");
            assert_eq!(e.key.as_deref(), Some(k));
            assert!(e.message.contains(want), "{k}: {}", e.message);
        }
        // a value of the wrong kind, or an unknown key, is refused by the reader
        let e = with(&[("links[0].rate", "fast")]).unwrap_err();
        assert!(e.to_string().contains("t.toml"), "{e}");
        let e = with(&[("sim.sede", "3")]).unwrap_err();
        assert!(e.to_string().contains("sede"), "{e}");
    }
}
