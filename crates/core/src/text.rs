//! Text output shared by every component: HTML escaping for reports and charts, and the
//! Prometheus text exposition of the lab's `/metrics` endpoints.
//!
//! ```
//! use resolvelab_core::text::{Exposition, html_escape};
//! assert_eq!(html_escape("<a href=\"x\">&</a>"), "&lt;a href=&quot;x&quot;&gt;&amp;&lt;/a&gt;");
//! let mut m = Exposition::default();
//! m.family("resolvelab_x_total", "counter", None);
//! m.sample("resolvelab_x_total", &[("name", "a\"b")], 3);
//! assert_eq!(m.finish(), "# TYPE resolvelab_x_total counter\nresolvelab_x_total{name=\"a\\\"b\"} 3\n");
//! ```

use std::fmt::{Display, Write as _};

/// Escape text for HTML and SVG: element content and double-quoted attributes.
pub fn html_escape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            c => out.push(c),
        }
    }
    out
}

/// A Prometheus text exposition being written: families in order, each sample's label
/// values escaped as the format requires (`\`, `"`, newline).
#[derive(Debug, Default)]
pub struct Exposition(String);

impl Exposition {
    /// Start a metric family: its `# HELP` line (when given) and `# TYPE` line. Every sample of
    /// the family must follow before the next family starts.
    pub fn family(&mut self, name: &str, kind: &str, help: Option<&str>) {
        if let Some(h) = help {
            let _ = writeln!(self.0, "# HELP {name} {h}");
        }
        let _ = writeln!(self.0, "# TYPE {name} {kind}");
    }

    /// One sample of `name` with its labels.
    pub fn sample(&mut self, name: &str, labels: &[(&str, &str)], value: impl Display) {
        self.0.push_str(name);
        if !labels.is_empty() {
            self.0.push('{');
            for (i, (k, v)) in labels.iter().enumerate() {
                if i > 0 {
                    self.0.push(',');
                }
                let _ = write!(self.0, "{k}=\"{}\"", label_escape(v));
            }
            self.0.push('}');
        }
        let _ = writeln!(self.0, " {value}");
    }

    /// The exposition text.
    pub fn finish(self) -> String {
        self.0
    }
}

/// Escape a label value: backslash, double quote and newline.
pub fn label_escape(s: &str) -> String {
    s.replace('\\', "\\\\")
        .replace('"', "\\\"")
        .replace('\n', "\\n")
}
