//! The self-contained HTML page: the report model ([`super`]) with inline CSS and SVG, no
//! scripts, no external assets. Every text from the inputs is escaped; our own words have
//! their `code` spans and **bold** turned into markup after escaping.

use super::{Block, Cell, Doc, Line, Table, Text};
use crate::text::html_escape as h;
use std::fmt::Write;

/// The page style every report shares; a caller adds its own after it.
pub const CSS: &str = "body{font-family:system-ui,sans-serif;margin:24px;color:#222;max-width:1280px}\
table{border-collapse:collapse;margin:8px 0 16px}td,th{border:1px solid #ccc;padding:3px 7px;font-size:13px;text-align:left;vertical-align:top}\
th{background:#f3f3f3}td.r{text-align:right}code{background:#f6f6f6;padding:0 3px}.held{color:#1a7f37}.nothold{color:#c62828}\
.status{font-size:18px;padding:8px 12px;border-radius:6px;display:inline-block;background:#eef}\
.status.bad{background:#fde2e2}.status.good{background:#e3f6e8}figure{margin:8px 0 20px}figcaption{font-size:13px;color:#555}\
.ev{font-family:monospace;font-size:12px;white-space:pre-wrap;word-break:break-all}\
.sw{display:inline-block;width:10px;height:10px;margin-right:5px;border-radius:2px}";

/// The document as one HTML page: [`CSS`], then `css` (the caller's own rules).
pub fn render(doc: &Doc, css: &str) -> String {
    let title = h(&doc.title);
    let mut o = format!(
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>{title}</title><style>{CSS}{css}</style></head><body>\n<h1>{title}</h1>\n"
    );
    for b in &doc.blocks {
        block(&mut o, b);
    }
    o.push_str("</body></html>\n");
    o
}

fn block(o: &mut String, b: &Block) {
    match b {
        Block::Heading(level, line) => {
            let _ = writeln!(o, "<h{level}>{}</h{level}>", text(line));
        }
        Block::Status(good, line) => {
            let class = if *good { "good" } else { "bad" };
            let _ = writeln!(
                o,
                "<p class=\"status {class}\" id=\"status\">{}</p>",
                text(line)
            );
        }
        Block::Para(line) => {
            let _ = writeln!(o, "<p>{}</p>", text(line));
        }
        Block::List(items) => {
            o.push_str("<ul>");
            for i in items {
                let _ = write!(o, "<li>{}</li>", text(i));
            }
            o.push_str("</ul>\n");
        }
        Block::Table(t) => table(o, t),
        Block::Pre(text) => {
            let _ = writeln!(o, "<pre>{}</pre>", h(text));
        }
        Block::Chart { id, svg, caption } => {
            let (class, id) = match id {
                Some(id) => ("chart", format!(" id=\"{id}\"")),
                None => ("chart zoom", String::new()),
            };
            let cap = (caption.as_ref())
                .map(|c| format!("<figcaption>{}</figcaption>", text(c)))
                .unwrap_or_default();
            let _ = writeln!(o, "<figure class=\"{class}\"{id}>{svg}{cap}</figure>");
        }
        Block::Details(summary, body) => {
            let _ = writeln!(
                o,
                "<details><summary>{}</summary><pre>{}</pre></details>",
                text(summary),
                h(body)
            );
        }
        Block::Section(id, blocks) => {
            let _ = writeln!(o, "<section class=\"incident\" id=\"{}\">", h(id));
            for b in blocks {
                block(o, b);
            }
            o.push_str("</section>\n");
        }
    }
}

fn table(o: &mut String, t: &Table) {
    let id = t.id.map(|i| format!(" id=\"{i}\"")).unwrap_or_default();
    let _ = write!(o, "<table{id}>");
    if !t.keyed {
        o.push_str("<tr>");
        for (c, _) in &t.cols {
            let _ = write!(o, "<th>{}</th>", h(c));
        }
        o.push_str("</tr>\n");
    }
    for r in &t.rows {
        o.push_str("<tr>");
        for (k, c) in r.iter().enumerate() {
            let right = t.cols.get(k).is_some_and(|(_, r)| *r);
            cell(o, c, t.keyed && k == 0, right);
        }
        o.push_str("</tr>\n");
    }
    o.push_str("</table>\n");
}

fn cell(o: &mut String, c: &Cell, head: bool, right: bool) {
    let tag = if head { "th" } else { "td" };
    let class = match (c.class, right) {
        (Some(k), _) => format!(" class=\"{k}\""),
        (None, true) => " class=\"r\"".to_string(),
        (None, false) => String::new(),
    };
    let mut inner = match &c.link {
        Some(href) => format!("<a href=\"{}\">{}</a>", h(href), text(&c.line)),
        None => text(&c.line),
    };
    if let Some(color) = c.swatch {
        inner = format!(
            "<span class=\"sw\" style=\"background:{}\"></span>{inner}",
            h(color)
        );
    }
    let _ = write!(o, "<{tag}{class}>{inner}</{tag}>");
}

fn text(line: &Line) -> String {
    let mut out = String::new();
    for t in line {
        match t {
            Text::Marked(s) => out.push_str(&marked(s)),
            Text::Plain(s) => out.push_str(&h(s)),
            Text::Code(s) => {
                let _ = write!(out, "<code>{}</code>", h(s));
            }
        }
    }
    out
}

/// Our own words: escaped, then `code` spans and **bold** as markup.
fn marked(s: &str) -> String {
    let mut out = String::new();
    for (i, part) in h(s).split('`').enumerate() {
        if i % 2 == 1 {
            let _ = write!(out, "<code>{part}</code>");
            continue;
        }
        for (j, run) in part.split("**").enumerate() {
            match j % 2 {
                1 => {
                    let _ = write!(out, "<b>{run}</b>");
                }
                _ => out.push_str(run),
            }
        }
    }
    out
}
