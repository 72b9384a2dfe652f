//! Building the directives a rewrite or a fix writes into a parsed configuration: one word,
//! one simple directive placed where another one is (its file and lines, for the card).

use resolvelab_lint::parse::{Directive, Word};

/// A word with no place in the user's file (the lab wrote it).
pub(crate) fn word(v: &str) -> Word {
    Word {
        value: v.to_string(),
        span: Default::default(),
    }
}

/// `name args;`, attributed to where `near` is.
pub(crate) fn line(near: &Directive, name: &str, args: &[&str]) -> Directive {
    Directive {
        name: word(name),
        args: args.iter().map(|a| word(a)).collect(),
        block: None,
        ..near.clone()
    }
}
