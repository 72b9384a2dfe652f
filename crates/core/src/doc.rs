//! A report as data: headings, paragraphs, lists, tables and charts, built once (the
//! diagnosis report's sections in `resolvelab-report`, the load report in `resolvelab-load`)
//! and rendered twice ([`markdown::render`], [`html::render`]), so that the two formats show
//! the same sections in the same order with the same numbers. A renderer decides only how a
//! block looks: Markdown leaves charts out, HTML draws them.
//!
//! Text comes in three kinds ([`Text`]) because it comes from two places: the checker's own
//! words (explanations, fixes), written once with Markdown's inline `code` spans and
//! **bold**, and what the logs said (paths, upstream names, error lines), which is
//! attacker-controlled and must reach either format as literal text.
//!
//! ```
//! use resolvelab_core::doc::{Block, Doc, code, html, m, markdown, p};
//! let d = Doc {
//!     title: "report".into(),
//!     blocks: vec![Block::Para(vec![m("**Fix:** add `resolve`; seen "), code("<b>x</b>"), p(" |")])],
//! };
//! assert_eq!(markdown::render(&d), "# report\n\n**Fix:** add `resolve`; seen `<b>x</b>` |\n\n");
//! assert!(html::render(&d, "").contains("<b>Fix:</b> add <code>resolve</code>; seen <code>&lt;b&gt;x&lt;/b&gt;</code> |"));
//! ```

pub mod html;
pub mod markdown;

/// One run of text.
#[derive(Debug, Clone, PartialEq)]
pub enum Text {
    /// Our own words, with `code` spans and **bold** as in Markdown.
    Marked(String),
    /// Literal text from the inputs.
    Plain(String),
    /// Literal text from the inputs, shown as code.
    Code(String),
}

/// A line: runs of text one after the other.
pub type Line = Vec<Text>;

/// Our own words.
pub fn m(s: impl Into<String>) -> Text {
    Text::Marked(s.into())
}

/// Literal text from the inputs.
pub fn p(s: impl Into<String>) -> Text {
    Text::Plain(s.into())
}

/// Literal text from the inputs, shown as code.
pub fn code(s: impl Into<String>) -> Text {
    Text::Code(s.into())
}

/// A table cell.
#[derive(Debug, Clone, PartialEq)]
pub struct Cell {
    /// What it says.
    pub line: Line,
    /// A style in HTML (`held`, `nothold`, `ev` for a log line).
    pub class: Option<&'static str>,
    /// Where it links to in HTML (`#incident-3`, `run/verdict.html`).
    pub link: Option<String>,
    /// A colour swatch before the text in HTML (a CSS colour: the series it stands for).
    pub swatch: Option<&'static str>,
}

impl Cell {
    /// A cell with this line.
    pub fn new(line: Line) -> Cell {
        Cell {
            line,
            class: None,
            link: None,
            swatch: None,
        }
    }

    /// With an HTML style.
    pub fn class(mut self, c: &'static str) -> Cell {
        self.class = Some(c);
        self
    }

    /// With a colour swatch before it (HTML).
    pub fn swatch(mut self, color: &'static str) -> Cell {
        self.swatch = Some(color);
        self
    }

    /// Linking to `href` (HTML).
    pub fn link(mut self, href: String) -> Cell {
        self.link = Some(href);
        self
    }
}

impl From<Text> for Cell {
    fn from(t: Text) -> Cell {
        Cell::new(vec![t])
    }
}

/// A number (or any of our own words) as a cell.
pub fn n(v: impl ToString) -> Cell {
    m(v.to_string()).into()
}

/// A table: its columns (title, right-aligned?) and rows.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Table {
    /// The HTML id (tests and links find the table by it).
    pub id: Option<&'static str>,
    /// The column titles, and whether the column is right-aligned (numbers).
    pub cols: Vec<(&'static str, bool)>,
    /// The rows, one cell per column.
    pub rows: Vec<Vec<Cell>>,
    /// The first column names each row (HTML `<th>`): a key/value table.
    pub keyed: bool,
}

/// One block of a report.
#[derive(Debug, Clone, PartialEq)]
pub enum Block {
    /// A heading (level 2 or 3; the title is level 1).
    Heading(u8, Line),
    /// The run's status line, good or bad.
    Status(bool, Line),
    /// A paragraph.
    Para(Line),
    /// A bulleted list.
    List(Vec<Line>),
    /// A table.
    Table(Table),
    /// Literal preformatted text (a tool's own text summary).
    Pre(String),
    /// An SVG chart with its HTML id and caption (only HTML draws charts).
    Chart {
        /// The HTML id; `None` for a chart that zooms into its section (HTML class `chart zoom`).
        id: Option<&'static str>,
        /// The drawing.
        svg: String,
        /// What it shows.
        caption: Option<Line>,
    },
    /// A group with an anchor (an incident's own section).
    Section(String, Vec<Block>),
    /// A collapsed block of literal text under a one-line summary (a configuration file).
    Details(Line, String),
}

/// A whole report.
#[derive(Debug, Clone, PartialEq)]
pub struct Doc {
    /// The title (level 1).
    pub title: String,
    /// What follows it.
    pub blocks: Vec<Block>,
}
