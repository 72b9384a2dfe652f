//! A tokenizer and parser for one nginx configuration file.
//!
//! It follows the rules of nginx's own `ngx_conf_read_token`: words end at whitespace, `;` or `{`
//! (not at `}`), `${var}` keeps its braces, quotes only open at the start of a word, a comment only
//! starts where a word could start. Directives are not checked against a list — nginx and its
//! modules have hundreds, and the rules only look at the few they know.

use std::fmt;

/// Deepest block nesting accepted; deeper input is rejected instead of exhausting the stack.
const MAX_DEPTH: usize = 200;

/// Where a word sits in its file: 1-based line and column (columns count Unicode scalar values).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Span {
    /// 1-based line.
    pub line: u32,
    /// 1-based column.
    pub col: u32,
    /// Width in characters (at least 1), used for the caret.
    pub len: u32,
}

/// One word of a directive: its value with quotes removed and escapes applied, and where it is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Word {
    /// The value as nginx sees it.
    pub value: String,
    /// Where the word is written.
    pub span: Span,
}

/// One directive with its arguments, its file and, for block directives, its children.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Directive {
    /// The directive name (`server`, `resolver`, …).
    pub name: Word,
    /// The arguments after the name.
    pub args: Vec<Word>,
    /// Index of the file in [`crate::Config::files`].
    pub file: usize,
    /// Line of the `;` or the closing `}`: the last line the directive covers.
    pub end_line: u32,
    /// Children of a block directive (`http {…}`); `None` for simple directives.
    pub block: Option<Vec<Directive>>,
}

impl Directive {
    /// The value of argument `i`, if present.
    pub fn arg(&self, i: usize) -> Option<&str> {
        self.args.get(i).map(|w| w.value.as_str())
    }

    /// The directive's children, or an empty slice.
    pub fn children(&self) -> &[Directive] {
        self.block.as_deref().unwrap_or(&[])
    }
}

/// A `#` comment: suppressions live in comments.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Comment {
    /// Text after the `#`.
    pub text: String,
    /// Where the `#` is.
    pub span: Span,
    /// True when code precedes the comment on the same line (a trailing comment).
    pub trailing: bool,
}

/// A syntax error: one line naming file, line and column.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ParseError {
    /// File name as given in the input.
    pub file: String,
    /// 1-based line.
    pub line: u32,
    /// 1-based column.
    pub col: u32,
    /// What is wrong (worded like nginx's own messages).
    pub message: String,
}

impl fmt::Display for ParseError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{}:{}:{}: {}",
            self.file, self.line, self.col, self.message
        )
    }
}

impl std::error::Error for ParseError {}

/// The parse of one file: its top-level directives and every comment.
#[derive(Debug, Clone, Default)]
pub struct Parsed {
    /// Top-level directives (includes are not expanded here).
    pub directives: Vec<Directive>,
    /// Every comment, in order.
    pub comments: Vec<Comment>,
}

/// Parses the text of one file. `file_index` is stored in every directive; `file_name` is used in
/// errors. Never panics, whatever the input.
pub fn parse(text: &str, file_index: usize, file_name: &str) -> Result<Parsed, ParseError> {
    let mut p = Parser {
        chars: text.chars().collect(),
        pos: 0,
        line: 1,
        col: 1,
        file: file_index,
        file_name,
        comments: Vec::new(),
        code_on_line: false,
    };
    let directives = p.block(0, None)?;
    Ok(Parsed {
        directives,
        comments: p.comments,
    })
}

enum Tok {
    Word(Word),
    Semi(Span),
    Open(Span),
    Close(Span),
    Eof(Span),
}

struct Parser<'a> {
    chars: Vec<char>,
    pos: usize,
    line: u32,
    col: u32,
    file: usize,
    file_name: &'a str,
    comments: Vec<Comment>,
    /// Whether a token was already seen on the current line (for trailing comments).
    code_on_line: bool,
}

impl Parser<'_> {
    fn err(&self, span: Span, message: impl Into<String>) -> ParseError {
        ParseError {
            file: self.file_name.to_string(),
            line: span.line,
            col: span.col,
            message: message.into(),
        }
    }

    fn here(&self) -> Span {
        Span {
            line: self.line,
            col: self.col,
            len: 1,
        }
    }

    fn peek(&self) -> Option<char> {
        self.chars.get(self.pos).copied()
    }

    fn bump(&mut self) -> Option<char> {
        let c = self.chars.get(self.pos).copied()?;
        self.pos += 1;
        if c == '\n' {
            self.line += 1;
            self.col = 1;
            self.code_on_line = false;
        } else {
            self.col += 1;
        }
        Some(c)
    }

    fn next_token(&mut self) -> Result<Tok, ParseError> {
        loop {
            let Some(c) = self.peek() else {
                return Ok(Tok::Eof(self.here()));
            };
            if c.is_whitespace() {
                self.bump();
                continue;
            }
            if c == '#' {
                let span = self.here();
                let trailing = self.code_on_line;
                self.bump();
                let mut text = String::new();
                while let Some(c) = self.peek() {
                    if c == '\n' {
                        break;
                    }
                    text.push(c);
                    self.bump();
                }
                let len = text.chars().count() as u32 + 1;
                self.comments.push(Comment {
                    text,
                    span: Span { len, ..span },
                    trailing,
                });
                continue;
            }
            break;
        }
        let span = self.here();
        self.code_on_line = true;
        let c = self.peek().unwrap_or(' ');
        match c {
            ';' => {
                self.bump();
                Ok(Tok::Semi(span))
            }
            '{' => {
                self.bump();
                Ok(Tok::Open(span))
            }
            '}' => {
                self.bump();
                Ok(Tok::Close(span))
            }
            '"' | '\'' => self.quoted(c, span),
            _ => {
                let w = self.word(span);
                match self.quantifier_ahead() {
                    Some(whole) => Err(self.err(
                        self.here(),
                        format!(
                            "\"{{\" inside the unquoted regex \"{whole}\" opens a block in nginx (it reports an unknown directive here): quote the regex, e.g. \"{whole}\""
                        ),
                    )),
                    None => Ok(Tok::Word(w)),
                }
            }
        }
    }

    /// At a `{` that ended a word: a regex quantifier (`{2}`, `{2,}`, `{1,3}`) right after it
    /// means an unquoted regex that nginx splits there. Returns the regex as written.
    fn quantifier_ahead(&self) -> Option<String> {
        if self.peek() != Some('{') {
            return None;
        }
        let rest = &self.chars[self.pos + 1..];
        let n = rest
            .iter()
            .take_while(|c| c.is_ascii_digit() || **c == ',')
            .count();
        let digits = rest[..n].iter().filter(|c| c.is_ascii_digit()).count();
        if digits == 0 || rest.get(n) != Some(&'}') {
            return None;
        }
        // The word before the `{` and what follows up to the next separator.
        let start = self.chars[..self.pos]
            .iter()
            .rposition(|c| c.is_whitespace())
            .map_or(0, |i| i + 1);
        let end = self.chars[self.pos..]
            .iter()
            .position(|c| c.is_whitespace() || *c == ';')
            .map_or(self.chars.len(), |i| self.pos + i);
        Some(self.chars[start..end].iter().collect())
    }

    fn quoted(&mut self, quote: char, span: Span) -> Result<Tok, ParseError> {
        self.bump();
        let mut value = String::new();
        loop {
            let Some(c) = self.bump() else {
                return Err(self.err(
                    span,
                    format!("unterminated quoted string (missing closing {quote})"),
                ));
            };
            if c == quote {
                break;
            }
            if c == '\\' {
                match self.bump() {
                    Some('"') => value.push('"'),
                    Some('\'') => value.push('\''),
                    Some('\\') => value.push('\\'),
                    Some('t') => value.push('\t'),
                    Some('r') => value.push('\r'),
                    Some('n') => value.push('\n'),
                    Some(other) => {
                        value.push('\\');
                        value.push(other);
                    }
                    None => {
                        return Err(self.err(
                            span,
                            format!("unterminated quoted string (missing closing {quote})"),
                        ));
                    }
                }
                continue;
            }
            value.push(c);
        }
        // nginx requires a separator after a closing quote.
        if let Some(c) = self.peek()
            && !(c.is_whitespace() || c == ';' || c == '{' || c == ')' || c == '}')
        {
            let here = self.here();
            return Err(self.err(here, format!("unexpected \"{c}\" after a quoted string")));
        }
        let len = if span.line == self.line {
            self.col.saturating_sub(span.col).max(1)
        } else {
            1
        };
        Ok(Tok::Word(Word {
            value,
            span: Span { len, ..span },
        }))
    }

    fn word(&mut self, span: Span) -> Word {
        let mut value = String::new();
        let mut variable = false;
        while let Some(c) = self.peek() {
            if c == '{' && variable {
                value.push(c);
                self.bump();
                variable = false;
                continue;
            }
            variable = false;
            if c.is_whitespace() || c == ';' || c == '{' {
                break;
            }
            self.bump();
            value.push(c);
            if c == '\\' {
                if let Some(n) = self.peek()
                    && n != '\n'
                {
                    value.push(n);
                    self.bump();
                }
            } else if c == '$' {
                variable = true;
            }
        }
        let len = value.chars().count().max(1) as u32;
        Word {
            value,
            span: Span { len, ..span },
        }
    }

    /// Skips the body of a `*_by_lua_block {…}`: Lua, not nginx syntax. Returns the line of the
    /// closing brace.
    fn raw_block(&mut self, open: Span) -> Result<u32, ParseError> {
        let mut depth = 1usize;
        while let Some(c) = self.bump() {
            match c {
                '{' => depth += 1,
                '}' => {
                    depth -= 1;
                    if depth == 0 {
                        return Ok(self.line);
                    }
                }
                '"' | '\'' => {
                    while let Some(s) = self.bump() {
                        if s == '\\' {
                            self.bump();
                        } else if s == c || s == '\n' {
                            break;
                        }
                    }
                }
                // Long strings `[[ … ]]`, `[==[ … ]==]`: braces inside are text.
                '[' => {
                    if let Some(level) = self.long_open()
                        && !self.long_close(level)
                    {
                        break;
                    }
                }
                '-' if self.peek() == Some('-') => {
                    self.bump();
                    // `--[[ … ]]` is a long comment; `-- …` ends at the line's end.
                    if self.peek() == Some('[') {
                        self.bump();
                        if let Some(level) = self.long_open() {
                            if !self.long_close(level) {
                                break;
                            }
                            continue;
                        }
                    }
                    while let Some(s) = self.peek() {
                        if s == '\n' {
                            break;
                        }
                        self.bump();
                    }
                }
                _ => {}
            }
        }
        Err(self.err(
            open,
            "unexpected end of file in a Lua block, expecting \"}\"",
        ))
    }

    /// Just after a `[`: the level of a Lua long bracket (`[[` is 0, `[==[` is 2), consumed;
    /// None, consuming nothing, when it is not one.
    fn long_open(&mut self) -> Option<usize> {
        let mut k = 0;
        while self.chars.get(self.pos + k) == Some(&'=') {
            k += 1;
        }
        if self.chars.get(self.pos + k) != Some(&'[') {
            return None;
        }
        for _ in 0..=k {
            self.bump();
        }
        Some(k)
    }

    /// Skip past the `]==]` that closes a long bracket of `level`; false at the end of input.
    fn long_close(&mut self, level: usize) -> bool {
        while let Some(c) = self.bump() {
            if c != ']' {
                continue;
            }
            let mut k = 0;
            while self.chars.get(self.pos + k) == Some(&'=') {
                k += 1;
            }
            if k == level && self.chars.get(self.pos + k) == Some(&']') {
                for _ in 0..=k {
                    self.bump();
                }
                return true;
            }
        }
        false
    }

    fn block(&mut self, depth: usize, opened: Option<Span>) -> Result<Vec<Directive>, ParseError> {
        if depth > MAX_DEPTH {
            let span = opened.unwrap_or_default();
            return Err(self.err(span, "blocks nested too deeply"));
        }
        let mut out = Vec::new();
        let mut words: Vec<Word> = Vec::new();
        loop {
            match self.next_token()? {
                Tok::Word(w) => words.push(w),
                Tok::Semi(span) => {
                    if words.is_empty() {
                        return Err(self.err(span, "unexpected \";\""));
                    }
                    let mut it = std::mem::take(&mut words).into_iter();
                    let name = it.next().unwrap_or_else(|| Word {
                        value: String::new(),
                        span,
                    });
                    out.push(Directive {
                        name,
                        args: it.collect(),
                        file: self.file,
                        end_line: span.line,
                        block: None,
                    });
                }
                Tok::Open(span) => {
                    if words.is_empty() {
                        return Err(self.err(span, "unexpected \"{\""));
                    }
                    let mut it = std::mem::take(&mut words).into_iter();
                    let name = it.next().unwrap_or_else(|| Word {
                        value: String::new(),
                        span,
                    });
                    let args: Vec<Word> = it.collect();
                    if name.value.ends_with("_by_lua_block") {
                        let end_line = self.raw_block(span)?;
                        out.push(Directive {
                            name,
                            args,
                            file: self.file,
                            end_line,
                            block: None,
                        });
                        continue;
                    }
                    let children = self.block(depth + 1, Some(span))?;
                    out.push(Directive {
                        name,
                        args,
                        file: self.file,
                        end_line: self.line,
                        block: Some(children),
                    });
                }
                Tok::Close(span) => {
                    if !words.is_empty() {
                        return Err(self.err(span, "unexpected \"}\" (missing \";\" before it?)"));
                    }
                    if depth == 0 {
                        return Err(self.err(span, "unexpected \"}\" (no block is open)"));
                    }
                    return Ok(out);
                }
                Tok::Eof(span) => {
                    if let Some(w) = words.first() {
                        return Err(self.err(
                            w.span,
                            format!(
                                "unexpected end of file, expecting \";\" or \"}}\" after \"{}\"",
                                w.value
                            ),
                        ));
                    }
                    if let Some(open) = opened {
                        return Err(self.err(
                            span,
                            format!(
                                "unexpected end of file, expecting \"}}\" to close the block opened at line {}",
                                open.line
                            ),
                        ));
                    }
                    return Ok(out);
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn directives_keep_lines_and_blocks() {
        let p = parse(
            "user root;\nhttp {\n  upstream be { server a.example:80 resolve; }\n}\n",
            0,
            "x",
        )
        .unwrap();
        assert_eq!(p.directives.len(), 2);
        let http = &p.directives[1];
        assert_eq!(http.name.value, "http");
        assert_eq!(http.end_line, 4);
        let up = &http.children()[0];
        assert_eq!(up.arg(0), Some("be"));
        let srv = &up.children()[0];
        assert_eq!(srv.name.span.line, 3);
        assert_eq!(srv.name.span.col, 17);
        assert_eq!(srv.arg(1), Some("resolve"));
    }

    #[test]
    fn quotes_variables_and_comments() {
        let p = parse(
            "log_format lab '$msec \"$x\"';  # trailing\n# own line\nset $a ${b}c;\n",
            0,
            "x",
        )
        .unwrap();
        assert_eq!(p.directives[0].arg(1), Some("$msec \"$x\""));
        assert_eq!(p.directives[1].arg(1), Some("${b}c"));
        assert_eq!(p.comments.len(), 2);
        assert!(p.comments[0].trailing);
        assert!(!p.comments[1].trailing);
        assert_eq!(p.comments[1].text, " own line");
    }

    #[test]
    fn lua_long_brackets_may_hold_braces() {
        let text = "content_by_lua_block {\n  local s = [[ } { ]]\n  --[==[ a } comment\n ]==]\n  local t = [=[ ]] } ]=]\n  -- } line comment\n}\nx y;\n";
        let p = parse(text, 0, "t").unwrap();
        let names: Vec<&str> = p.directives.iter().map(|d| d.name.value.as_str()).collect();
        assert_eq!(names, ["content_by_lua_block", "x"]);
        assert!(parse("content_by_lua_block { local s = [[ } \n", 0, "t").is_err());
    }

    #[test]
    fn if_conditions_and_lua_blocks() {
        let p = parse(
            "location @r { if ($request_method !~ ^(GET|HEAD)$) { return 502; } }\ncontent_by_lua_block { local t = {1,2} ngx.say(\"}\") }\nx y;",
            0,
            "x",
        )
        .unwrap();
        let ifd = &p.directives[0].children()[0];
        assert_eq!(ifd.arg(0), Some("($request_method"));
        assert_eq!(ifd.arg(2), Some("^(GET|HEAD)$)"));
        assert_eq!(p.directives[2].name.value, "x");
    }

    #[test]
    fn malformed_input_is_one_error_with_position() {
        let e = parse("http {\n  server {\n    listen 80;\n", 0, "n.conf").unwrap_err();
        assert_eq!(e.line, 4);
        assert!(e.message.contains("expecting \"}\""), "{e}");
        let e = parse("a b;\n}\n", 0, "n.conf").unwrap_err();
        assert_eq!((e.line, e.col), (2, 1));
        let e = parse("a \"b;\n", 0, "n.conf").unwrap_err();
        assert_eq!((e.line, e.col), (1, 3));
        let e = parse("a b\n", 0, "n.conf").unwrap_err();
        assert!(
            e.to_string()
                .starts_with("n.conf:1:1: unexpected end of file")
        );
        let e = parse("a {\n b }\n", 0, "n.conf").unwrap_err();
        assert_eq!(e.line, 2);
        assert!(parse(&"a {".repeat(1000), 0, "deep").is_err());
    }

    /// nginx splits an unquoted regex at its `{` and names the line ("unknown directive
    /// \"2}$\" in re.conf:5", nginx 1.28.3): the error is there, not at the end of the file.
    #[test]
    fn an_unquoted_regex_quantifier_is_named_where_nginx_names_it() {
        let conf =
            "http {\n  server {\n    location ~ ^/a{2}$ {\n      return 200;\n    }\n  }\n}\n";
        let e = parse(conf, 0, "re.conf").unwrap_err();
        assert_eq!(e.line, 3, "{e}");
        assert!(e.message.contains("\"^/a{2}$\""), "{e}");
        // Quoted it is fine, and so are blocks written without a space.
        assert!(parse("http {\n location ~ \"^/a{2,3}$\" {\n }\n}\n", 0, "q").is_ok());
        assert!(parse("http{server{listen 80;}}\n", 0, "c").is_ok());
        assert!(parse("map $a $b{default 1;}\n", 0, "m").is_ok());
    }
}
