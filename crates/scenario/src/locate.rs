//! Where a value of a scenario file is written, so that a mistake found after parsing (a bad
//! DNS mode, a fault spec, a reference to a backend that does not exist) is reported as
//! `file:line` like a syntax error is.
//!
//! ```
//! use resolvelab_scenario::locate::line_of;
//! let text = "[load]\nrate = \"300\"\n\n[[timeline]]\nat = \"1s\"\n\n[[timeline]]\nmode = \"x\"\n";
//! assert_eq!(line_of(text, &["timeline", "1", "mode"]), Some((8, true)));
//! assert_eq!(line_of(text, &["load", "duration"]), Some((1, false)));
//! ```

use toml::de::{DeTable, DeValue};

/// The text a scenario was read from.
#[derive(Debug)]
pub struct Source {
    /// The file as named in errors (`scenarios/rto.toml`).
    pub origin: String,
    /// Its text.
    pub text: String,
}

/// The 1-based line of the value at `path` (table keys, and array indices as numbers), and
/// whether the whole path exists. When it does not, the line of the deepest part that does
/// (the table a missing key belongs in). `None` when the text does not parse.
pub fn line_of(text: &str, path: &[&str]) -> Option<(usize, bool)> {
    let doc = DeTable::parse(text).ok()?;
    let mut span = doc.span();
    let root = DeValue::Table(doc.into_inner());
    let mut cur = &root;
    let mut exact = true;
    for key in path {
        let next = match (cur, key.parse::<usize>()) {
            (DeValue::Array(_), Ok(i)) => cur.get(i),
            _ => cur.get(*key),
        };
        match next {
            Some(v) => {
                span = v.span();
                cur = v.get_ref();
            }
            None => {
                exact = false;
                break;
            }
        }
    }
    let line = text.as_bytes()[..span.start.min(text.len())]
        .iter()
        .filter(|&&b| b == b'\n')
        .count()
        + 1;
    Some((line, exact))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn inline_arrays_and_tables_are_found() {
        let text = "name = \"x\"\n[[variant]]\nname = \"a\"\ntimeline = [\n  { at = \"1s\" },\n  { at = \"2s\", mode = \"m\" },\n]\n";
        assert_eq!(
            line_of(text, &["variant", "0", "timeline", "1", "mode"]),
            Some((6, true))
        );
        assert_eq!(line_of(text, &["variant", "0", "nginx"]), Some((2, false)));
        assert_eq!(line_of("=", &["x"]), None);
    }
}
