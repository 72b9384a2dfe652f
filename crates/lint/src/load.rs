//! Loading a configuration: files on disk with `include` (globs, relative to the prefix), or the
//! output of `nginx -T` split at its `# configuration file …:` markers.

use crate::parse::{self, Comment, Directive, ParseError};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// Includes nested deeper than this are refused (nginx itself would run out of descriptors).
const MAX_INCLUDE_DEPTH: usize = 32;
/// The largest file read (a configuration file of more is not one: `/dev/zero`, a log).
pub const MAX_FILE_BYTES: u64 = 16 << 20;

/// Read a configuration file: a regular file of at most [`MAX_FILE_BYTES`], else one line saying
/// why. FIFOs, devices and directories are refused before they are opened for reading, so a
/// `/dev/zero` cannot grow memory and a FIFO cannot hang the linter.
pub fn read_config_file(name: &str) -> Result<String, String> {
    let meta = std::fs::metadata(name).map_err(|e| format!("cannot read \"{name}\": {e}"))?;
    if !meta.is_file() {
        return Err(format!(
            "\"{name}\" is not a regular file (a directory, FIFO or device): pass the configuration file, or `nginx -T` output on standard input"
        ));
    }
    if meta.len() > MAX_FILE_BYTES {
        return Err(format!(
            "\"{name}\" is {} MiB, over the {} MiB a configuration file may have: is it really one?",
            meta.len() >> 20,
            MAX_FILE_BYTES >> 20
        ));
    }
    let bytes = std::fs::read(name).map_err(|e| format!("cannot read \"{name}\": {e}"))?;
    Ok(String::from_utf8_lossy(&bytes).into_owned())
}

/// One file of the configuration, named as in the input.
#[derive(Debug, Clone)]
pub struct SourceFile {
    /// The name as given: the path on the command line, the include path resolved against the
    /// prefix, or the path from an `nginx -T` marker.
    pub name: String,
    /// The file's text.
    pub text: String,
    /// Comments in the file (suppressions live there).
    pub comments: Vec<Comment>,
    /// Where each line starts: quoting a finding's line is then O(1), not a scan of the file.
    line_starts: Vec<usize>,
}

impl SourceFile {
    /// A file as read.
    pub fn new(name: String, text: String, comments: Vec<Comment>) -> SourceFile {
        let line_starts = std::iter::once(0)
            .chain(text.match_indices('\n').map(|(i, _)| i + 1))
            .collect();
        SourceFile {
            name,
            text,
            comments,
            line_starts,
        }
    }

    /// Line `n` (1-based) of the file, without its newline.
    pub fn line(&self, n: u32) -> Option<&str> {
        let i = (n as usize).checked_sub(1)?;
        let start = *self.line_starts.get(i)?;
        if start >= self.text.len() && i > 0 {
            return None;
        }
        let end = self
            .line_starts
            .get(i + 1)
            .map_or(self.text.len(), |e| e - 1);
        Some(self.text[start..end].trim_end_matches('\r'))
    }
}

/// A loaded configuration: every file, and the directive tree with includes spliced in place.
#[derive(Debug, Clone, Default)]
pub struct Config {
    /// Every file read, in the order first read.
    pub files: Vec<SourceFile>,
    /// The top-level directives of the main file, includes expanded.
    pub root: Vec<Directive>,
    /// Includes that could not be read and were left out (only when loading with
    /// [`load_text_lenient`]): `(FILE:LINE of the include, the file, why)`.
    pub unread: Vec<(String, String, String)>,
    /// Remarks about the input (e.g. an include glob that matched nothing).
    pub notes: Vec<String>,
    /// The input is a fragment wrapped in the context it is included into (a `conf.d` file
    /// linted as http{}): what that context holds outside the input is unknown.
    pub fragment: bool,
}

/// The error of loading: a syntax error, or an include that cannot be read.
#[derive(Debug, thiserror::Error)]
pub enum LoadError {
    /// A syntax error with its position. Transparent: shown with `{:#}` its text appears once,
    /// not again as its own source.
    #[error(transparent)]
    Parse(#[from] ParseError),
    /// Any other problem, already worded as one line naming the file and line.
    #[error("{0}")]
    Other(String),
}

/// True when `text` looks like `nginx -T` output: the first line that is not one of nginx's own
/// `nginx: …` status lines is a `# configuration file PATH:` marker.
pub fn is_dump(text: &str) -> bool {
    text.lines()
        .find(|l| !l.starts_with("nginx: ") && !l.trim().is_empty())
        .is_some_and(|l| marker(l).is_some())
}

fn marker(line: &str) -> Option<&str> {
    line.strip_prefix("# configuration file ")?
        .strip_suffix(':')
        .filter(|p| !p.is_empty())
}

/// Splits `nginx -T` output into `(path, text)` sections, in order.
pub fn split_dump(text: &str) -> Vec<(String, String)> {
    let mut out: Vec<(String, String)> = Vec::new();
    for line in text.split_inclusive('\n') {
        let bare = line.trim_end_matches(['\n', '\r']);
        if let Some(path) = marker(bare) {
            out.push((path.to_string(), String::new()));
        } else if let Some((_, body)) = out.last_mut() {
            body.push_str(line);
        }
    }
    // nginx writes one extra newline after each file's contents.
    for (_, body) in &mut out {
        if body.ends_with("\n\n") {
            body.pop();
        }
    }
    out
}

/// Where the text of an included file comes from.
trait Resolver {
    /// Files matched by an `include` argument (already made absolute against the prefix), sorted.
    fn expand(&self, pattern: &str) -> Result<Vec<String>, String>;
    fn read(&self, name: &str) -> Result<String, String>;
}

struct Disk;

fn has_glob(s: &str) -> bool {
    s.contains(['*', '?', '['])
}

impl Resolver for Disk {
    fn expand(&self, pattern: &str) -> Result<Vec<String>, String> {
        if !has_glob(pattern) {
            return Ok(vec![pattern.to_string()]);
        }
        let paths = glob::glob(pattern).map_err(|e| format!("invalid glob: {e}"))?;
        let mut out: Vec<String> = paths
            .filter_map(Result::ok)
            .filter(|p| p.is_file())
            .map(|p| p.display().to_string())
            .collect();
        out.sort();
        Ok(out)
    }

    fn read(&self, name: &str) -> Result<String, String> {
        read_config_file(name).map_err(|e| {
            format!("{e} (lint the output of `nginx -T` instead, or pass --prefix DIR)")
        })
    }
}

struct Dump {
    files: BTreeMap<String, String>,
}

impl Resolver for Dump {
    fn expand(&self, pattern: &str) -> Result<Vec<String>, String> {
        if !has_glob(pattern) {
            return Ok(vec![pattern.to_string()]);
        }
        let pat = glob::Pattern::new(pattern).map_err(|e| format!("invalid glob: {e}"))?;
        let opts = glob::MatchOptions {
            require_literal_separator: true,
            ..Default::default()
        };
        Ok(self
            .files
            .keys()
            .filter(|k| pat.matches_with(k, opts))
            .cloned()
            .collect())
    }

    fn read(&self, name: &str) -> Result<String, String> {
        self.files.get(name).cloned().ok_or_else(|| {
            format!("\"{name}\" is not in the nginx -T output (no \"# configuration file {name}:\" marker)")
        })
    }
}

struct Loader<'r> {
    resolver: &'r dyn Resolver,
    prefix: PathBuf,
    /// Where absolute include paths are looked up (a copy of a machine's files).
    sysroot: Option<PathBuf>,
    files: Vec<SourceFile>,
    notes: Vec<String>,
    stack: Vec<String>,
    /// Leave an include that cannot be read out, and say so, instead of stopping.
    lenient: bool,
    unread: Vec<(String, String, String)>,
}

impl Loader<'_> {
    fn load(&mut self, name: &str, text: String) -> Result<Vec<Directive>, LoadError> {
        let index = self.files.len();
        let parsed = parse::parse(&text, index, name)?;
        self.files
            .push(SourceFile::new(name.to_string(), text, parsed.comments));
        self.stack.push(name.to_string());
        let out = self.expand(parsed.directives);
        self.stack.pop();
        out
    }

    fn expand(&mut self, dirs: Vec<Directive>) -> Result<Vec<Directive>, LoadError> {
        let mut out = Vec::with_capacity(dirs.len());
        for mut d in dirs {
            if d.name.value == "include" && d.block.is_none() {
                out.extend(self.include(&d)?);
                continue;
            }
            if let Some(children) = d.block.take() {
                d.block = Some(self.expand(children)?);
            }
            out.push(d);
        }
        Ok(out)
    }

    fn include(&mut self, d: &Directive) -> Result<Vec<Directive>, LoadError> {
        let here = format!("{}:{}", self.files[d.file].name, d.name.span.line);
        let [arg] = d.args.as_slice() else {
            return Err(LoadError::Other(format!(
                "{here}: \"include\" takes exactly one argument (a file or a glob)"
            )));
        };
        let full = if Path::new(&arg.value).is_absolute() {
            match &self.sysroot {
                Some(root) => root
                    .join(arg.value.trim_start_matches('/'))
                    .display()
                    .to_string(),
                None => arg.value.clone(),
            }
        } else {
            self.prefix.join(&arg.value).display().to_string()
        };
        let names = self
            .resolver
            .expand(&full)
            .map_err(|e| LoadError::Other(format!("{here}: include \"{}\": {e}", arg.value)))?;
        if names.is_empty() {
            self.notes
                .push(format!("{here}: include \"{full}\" matched no file"));
        }
        let mut out = Vec::new();
        for name in names {
            if self.stack.contains(&name) {
                return Err(LoadError::Other(format!(
                    "{here}: include \"{name}\" includes itself (cycle: {} -> {name})",
                    self.stack.join(" -> ")
                )));
            }
            if self.stack.len() >= MAX_INCLUDE_DEPTH {
                return Err(LoadError::Other(format!(
                    "{here}: include \"{name}\" nests includes {} deep, more than the {MAX_INCLUDE_DEPTH} this linter follows (no cycle: each file is included once)",
                    self.stack.len() + 1
                )));
            }
            let text = match self.resolver.read(&name) {
                Ok(t) => t,
                Err(e) if self.lenient => {
                    self.unread.push((here.clone(), name.clone(), e));
                    continue;
                }
                Err(e) => return Err(LoadError::Other(format!("{here}: include: {e}"))),
            };
            out.extend(self.load(&name, text)?);
        }
        Ok(out)
    }
}

/// Loads a configuration from a file on disk (or from `nginx -T` output saved in that file).
/// Relative includes resolve against `prefix`, by default the directory of `path` (as nginx does
/// for the file given with `-c`).
pub fn load_path(path: &Path, prefix: Option<&Path>) -> Result<Config, LoadError> {
    load_path_in(path, prefix, None)
}

/// [`load_path`], with absolute include paths looked up under `sysroot` (a copy of the files
/// of the machine the configuration is for).
pub fn load_path_in(
    path: &Path,
    prefix: Option<&Path>,
    sysroot: Option<&Path>,
) -> Result<Config, LoadError> {
    let name = path.display().to_string();
    let text = read_config_file(&name).map_err(LoadError::Other)?;
    if is_dump(&text) {
        return load_dump(&text, prefix);
    }
    let prefix = prefix
        .map(Path::to_path_buf)
        .unwrap_or_else(|| path.parent().map(Path::to_path_buf).unwrap_or_default());
    let mut cfg = load_with(&Disk, &name, text, prefix, sysroot.map(Path::to_path_buf))?;
    if sysroot.is_some() {
        cfg.notes.push(format!(
            "absolute include paths looked up under {}",
            sysroot.unwrap_or(Path::new("")).display()
        ));
    }
    Ok(cfg)
}

/// Loads a configuration given as text (stdin). `nginx -T` output is recognised by its markers;
/// otherwise the text is one file named `name` whose includes resolve on disk against `prefix`
/// (default: the current directory).
pub fn load_text(name: &str, text: String, prefix: Option<&Path>) -> Result<Config, LoadError> {
    load_text_in(name, text, prefix, None)
}

/// [`load_text`] with absolute include paths looked up under `sysroot` (a copy of the
/// machine's files), as [`load_path_in`] does.
pub fn load_text_in(
    name: &str,
    text: String,
    prefix: Option<&Path>,
    sysroot: Option<&Path>,
) -> Result<Config, LoadError> {
    load_text_from_disk(name, text, prefix, sysroot, false)
}

/// [`load_text_in`], leaving out an include that cannot be read (a `mime.types` or a
/// `/etc/nginx/…` file of another machine) instead of stopping: each one is in
/// [`Config::unread`], for the caller to list. For tools that play a configuration and say
/// what they left out (`resolvelab verify`); the linter itself stops, as nginx would.
pub fn load_text_lenient(
    name: &str,
    text: String,
    prefix: Option<&Path>,
    sysroot: Option<&Path>,
) -> Result<Config, LoadError> {
    load_text_from_disk(name, text, prefix, sysroot, true)
}

/// Text whose includes are read from disk (or `nginx -T` output, which holds them).
fn load_text_from_disk(
    name: &str,
    text: String,
    prefix: Option<&Path>,
    sysroot: Option<&Path>,
    lenient: bool,
) -> Result<Config, LoadError> {
    if is_dump(&text) {
        return load_dump(&text, prefix);
    }
    let prefix = prefix.map(Path::to_path_buf).unwrap_or_default();
    let mut loader = Loader::new(&Disk, prefix, sysroot.map(Path::to_path_buf));
    loader.lenient = lenient;
    loader.run(name, text)
}

fn load_dump(text: &str, prefix: Option<&Path>) -> Result<Config, LoadError> {
    let sections = split_dump(text);
    let Some((main, main_text)) = sections.first().cloned() else {
        return Err(LoadError::Other(
            "nginx -T output without any \"# configuration file\" marker".into(),
        ));
    };
    let prefix = prefix.map(Path::to_path_buf).unwrap_or_else(|| {
        Path::new(&main)
            .parent()
            .map(Path::to_path_buf)
            .unwrap_or_default()
    });
    let dump = Dump {
        files: sections.into_iter().collect(),
    };
    load_with(&dump, &main, main_text, prefix, None)
}

fn load_with(
    resolver: &dyn Resolver,
    name: &str,
    text: String,
    prefix: PathBuf,
    sysroot: Option<PathBuf>,
) -> Result<Config, LoadError> {
    Loader::new(resolver, prefix, sysroot).run(name, text)
}

impl<'r> Loader<'r> {
    fn new(resolver: &'r dyn Resolver, prefix: PathBuf, sysroot: Option<PathBuf>) -> Loader<'r> {
        Loader {
            resolver,
            prefix,
            sysroot,
            files: Vec::new(),
            notes: Vec::new(),
            stack: Vec::new(),
            lenient: false,
            unread: Vec::new(),
        }
    }

    /// Load the main file `name` and everything it includes.
    fn run(mut self, name: &str, text: String) -> Result<Config, LoadError> {
        let root = self.load(name, text)?;
        Ok(Config {
            files: self.files,
            root,
            unread: self.unread,
            notes: self.notes,
            fragment: false,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dump_is_split_at_markers_and_includes_resolve_against_the_main_dir() {
        let dump = "nginx: the configuration file /etc/nginx/nginx.conf syntax is ok\n\
# configuration file /etc/nginx/nginx.conf:\n\
http {\n    include conf.d/*.conf;\n}\n\n\
# configuration file /etc/nginx/conf.d/b.conf:\n\
upstream b { server b:80; }\n\n\
# configuration file /etc/nginx/conf.d/a.conf:\n\
upstream a { server a:80; }\n\n";
        assert!(is_dump(dump));
        let cfg = load_text("-", dump.to_string(), None).unwrap();
        assert_eq!(cfg.files.len(), 3);
        let http = &cfg.root[0];
        let names: Vec<_> = http.children().iter().map(|d| d.arg(0).unwrap()).collect();
        assert_eq!(names, ["a", "b"], "glob results are sorted like nginx's");
        let a = &http.children()[0];
        assert_eq!(cfg.files[a.file].name, "/etc/nginx/conf.d/a.conf");
        assert_eq!(a.name.span.line, 1);
    }

    #[test]
    fn missing_dump_file_is_an_error_naming_the_include_line() {
        let dump = "# configuration file /n/nginx.conf:\nuser x;\ninclude other.conf;\n\n";
        let e = load_text("-", dump.to_string(), None)
            .unwrap_err()
            .to_string();
        assert!(e.starts_with("/n/nginx.conf:2: include"), "{e}");
    }
}
