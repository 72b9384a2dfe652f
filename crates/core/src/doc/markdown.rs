//! Markdown: the report model ([`super`]) as GitHub-flavoured Markdown. Charts are left
//! out (the HTML page has them); tables escape `|` so that a log line cannot break a row.

use super::{Block, Cell, Doc, Line, Table, Text};
use std::fmt::Write;

/// The document as Markdown.
pub fn render(doc: &Doc) -> String {
    format!("# {}\n\n{}", doc.title, blocks(&doc.blocks))
}

/// Blocks without a title: a generated part of a hand-written page.
pub fn blocks(blocks: &[Block]) -> String {
    let mut o = String::new();
    for b in blocks {
        block(&mut o, b);
    }
    o
}

fn block(o: &mut String, b: &Block) {
    match b {
        Block::Heading(level, line) => {
            let _ = writeln!(o, "{} {}\n", "#".repeat(*level as usize), text(line, false));
        }
        Block::Status(_, line) | Block::Para(line) => {
            let _ = writeln!(o, "{}\n", text(line, false));
        }
        Block::List(items) => {
            for i in items {
                let _ = writeln!(o, "- {}", text(i, false));
            }
            o.push('\n');
        }
        Block::Table(t) => table(o, t),
        // A fence inside would end the block early.
        Block::Pre(text) => {
            let body = text.trim_end().replace("```", "'''");
            let _ = writeln!(o, "```\n{body}\n```\n");
        }
        // Configuration files stay on the HTML page; the run directory has them.
        Block::Chart { .. } | Block::Details(..) => {}
        Block::Section(_, blocks) => {
            for b in blocks {
                block(o, b);
            }
        }
    }
}

fn table(o: &mut String, t: &Table) {
    let head: Vec<&str> = t.cols.iter().map(|(c, _)| *c).collect();
    let _ = writeln!(o, "| {} |", head.join(" | "));
    let align: String = (t.cols.iter())
        .map(|(_, right)| if *right { "---:|" } else { "---|" })
        .collect();
    let _ = writeln!(o, "|{align}");
    for r in &t.rows {
        let cells: Vec<String> = r.iter().map(cell).collect();
        let _ = writeln!(o, "| {} |", cells.join(" | "));
    }
    o.push('\n');
}

fn cell(c: &Cell) -> String {
    text(&c.line, true)
}

/// A line; inside a table `|` is escaped and a line break becomes a space.
fn text(line: &Line, in_table: bool) -> String {
    let mut out = String::new();
    for t in line {
        let s = match t {
            Text::Marked(s) => s.clone(),
            Text::Plain(s) => s.replace('\n', " "),
            // A backtick inside would end the span early.
            Text::Code(s) => format!("`{}`", s.replace('`', "'").replace('\n', " ")),
        };
        out.push_str(&s);
    }
    match in_table {
        true => out.replace('|', "\\|").replace('\n', " "),
        false => out,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::doc::{Cell, code, m, p};

    /// The cells of a Markdown table row: split at every `|` that is not escaped.
    fn cells(row: &str) -> Vec<String> {
        let inner = row.trim().trim_start_matches('|');
        let mut out = vec![String::new()];
        let mut prev = ' ';
        for c in inner.chars() {
            if c == '|' && prev != '\\' {
                out.push(String::new());
            } else {
                out.last_mut().unwrap().push(c);
            }
            prev = c;
        }
        out.pop(); // after the closing `|`
        out
    }

    #[test]
    fn a_pipe_or_a_newline_in_a_cell_cannot_break_its_row() {
        let evil = "GET /a|b HTTP/1.1\n| x | y |";
        let t = Table {
            id: None,
            cols: vec![("what", false), ("line", false), ("n", true)],
            rows: vec![vec![
                Cell::new(vec![m("our |words|")]),
                Cell::new(vec![p(evil), code("c|d")]),
                Cell::new(vec![m("3")]),
            ]],
            keyed: false,
        };
        let md = render(&Doc {
            title: "t".into(),
            blocks: vec![Block::Table(t)],
        });
        let rows: Vec<&str> = md.lines().filter(|l| l.starts_with('|')).collect();
        assert_eq!(rows.len(), 3, "head, alignment, one row:\n{md}");
        for r in &rows {
            assert_eq!(cells(r).len(), 3, "{r}");
        }
        let row = cells(rows[2]);
        assert_eq!(row[1].trim(), r"GET /a\|b HTTP/1.1 \| x \| y \|`c\|d`");
        assert_eq!(row[2].trim(), "3");
        // Outside a table nothing is escaped.
        let para = render(&Doc {
            title: "t".into(),
            blocks: vec![Block::Para(vec![p("a|b")])],
        });
        assert!(para.contains("a|b") && !para.contains(r"a\|b"), "{para}");
    }
}
