//! Fleets: one diagnosis over many nginx instances (issue #47).
//!
//! The unit the checker classifies is one nginx instance: its error lines pair with its own
//! access lines by `*connection` id, and its resolver re-queries on its own clock, so two
//! instances' logs read as one would pair lines that never met. A fleet's diagnosis is therefore
//! the set of its instances' diagnoses, merged as values:
//!
//! - [`Partial`] is that set, written by `resolvelab diagnose --instance NAME --partial FILE`
//!   for one instance and by `resolvelab merge --partial FILE` for several. Merging is the union
//!   of the instances by name, so it is associative and commutative, and a partial's size is its
//!   instances' diagnoses (bounded lists, not lines or failures). An instance in two partials is
//!   refused: time slices of one instance are not mergeable yet.
//! - [`Fleet`] is the report built from a partial: the instances side by side, the classes
//!   across the fleet, and the fleet's incidents — each instance's incidents on one upstream
//!   that overlap in time — read with the one evidence only a fleet has ([`reading`]).
//!
//! ```
//! use resolvelab_diagnose::fleet::{Partial, Fleet};
//! # let d = || serde_json::from_str::<resolvelab_diagnose::Diagnosis>(
//! #     include_str!("../../tests/data/one-request-diagnosis.json")).unwrap();
//! let a = Partial::one("nginx-a", d()).unwrap();
//! let b = Partial::one("nginx-b", d()).unwrap();
//! let both = a.clone().merge(b.clone()).unwrap();
//! assert_eq!(both.to_json(), b.merge(a.clone()).unwrap().to_json());
//! assert!(both.clone().merge(a).is_err()); // nginx-a twice
//! let fleet = Fleet::of_partial(&both);
//! assert_eq!(fleet.instances.len(), 2);
//! ```

pub mod digest;
pub mod judge;
pub mod reading;
mod view;

pub use digest::{Digest, Lane};
pub use reading::{Reading, ReadingKind};
pub use view::{Fleet, FleetClass, FleetIncident, InstanceRow, Member};

use crate::Diagnosis;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// The partial's schema id.
pub const PARTIAL_SCHEMA: &str = "resolvelab.partial/v1";

/// The version of resolvelab that writes and reads partials: a partial holds diagnoses, whose
/// fields change between versions, so only partials of this version are merged.
pub const VERSION: &str = env!("CARGO_PKG_VERSION");

/// NLU events a partial keeps of each instance's (a diagnosis keeps 5,000): the list is a
/// sample of evidence, and it was most of a busy instance's partial.
pub const NLU_EVENTS: usize = 1000;

/// Instance names are labels in reports and file names in recipes: printable, no spaces.
const MAX_NAME: usize = 253;

/// The mergeable diagnosis of one or more nginx instances.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Partial {
    /// [`PARTIAL_SCHEMA`].
    pub schema: String,
    /// The resolvelab version that wrote it ([`VERSION`]).
    pub resolvelab: String,
    /// Each instance's diagnosis, by instance name.
    pub instances: BTreeMap<String, Diagnosis>,
}

/// Just what decides whether a file is a partial this version can read.
#[derive(Deserialize)]
struct Head {
    schema: Option<String>,
    resolvelab: Option<String>,
}

impl Partial {
    /// One instance's diagnosis. The name must be printable and without spaces (a pod name, a
    /// host name). Its NLU events are cut to the first [`NLU_EVENTS`] (a partial travels).
    pub fn one(instance: &str, mut d: Diagnosis) -> anyhow::Result<Partial> {
        check_name(instance)?;
        if d.nlu_events.len() > NLU_EVENTS {
            d.nlu_events.truncate(NLU_EVENTS);
            d.nlu_events_truncated = true;
        }
        Ok(Partial {
            schema: PARTIAL_SCHEMA.into(),
            resolvelab: VERSION.into(),
            instances: BTreeMap::from([(instance.to_string(), d)]),
        })
    }

    /// Both partials' instances. An instance in both is refused (its name in the error).
    pub fn merge(mut self, other: Partial) -> anyhow::Result<Partial> {
        for (name, d) in other.instances {
            if self.instances.contains_key(&name) {
                return Err(twice(&name));
            }
            self.instances.insert(name, d);
        }
        Ok(self)
    }

    /// The partial as JSON (the file `--partial` writes).
    pub fn to_json(&self) -> String {
        serde_json::to_string(self).expect("a partial serializes") + "\n"
    }

    /// Read a partial file; a file of another kind or version is refused with one line naming
    /// it and the fix.
    pub fn read(path: &Path) -> anyhow::Result<Partial> {
        let text = std::fs::read_to_string(path)
            .map_err(|e| anyhow::anyhow!("cannot read {}: {e}", path.display()))?;
        Partial::parse(&text).map_err(|e| anyhow::anyhow!("{}: {e}", path.display()))
    }

    /// [`Partial::read`] of a file's text.
    pub fn parse(text: &str) -> anyhow::Result<Partial> {
        check_head(text)?;
        let p: Partial = serde_json::from_str(text)
            .map_err(|e| anyhow::anyhow!("a damaged partial ({e}); write it again"))?;
        for name in p.instances.keys() {
            check_name(name)?;
        }
        Ok(p)
    }
}

/// An instance in two partials.
fn twice(name: &str) -> anyhow::Error {
    anyhow::anyhow!(
        "instance `{name}` is in two partials: time slices of one instance cannot be merged yet; diagnose each instance's logs in one `resolvelab diagnose --partial` run"
    )
}

/// A file of another kind or version is refused with one line naming the fix.
fn check_head(text: &str) -> anyhow::Result<()> {
    let head: Head = serde_json::from_str(text).map_err(|e| {
        anyhow::anyhow!("not a resolvelab partial ({e}); write one with `resolvelab diagnose … --instance NAME --partial FILE`")
    })?;
    match (head.schema.as_deref(), head.resolvelab.as_deref()) {
        (Some(PARTIAL_SCHEMA), Some(VERSION)) => Ok(()),
        (Some(PARTIAL_SCHEMA), v) => anyhow::bail!(
            "written by resolvelab {}, this is {VERSION}: diagnose that instance again with this version (a partial's fields change between versions)",
            v.unwrap_or("of unknown version")
        ),
        (s, _) => anyhow::bail!(
            "schema `{}` is not {PARTIAL_SCHEMA}; write a partial with `resolvelab diagnose … --instance NAME --partial FILE`",
            s.unwrap_or("(none)")
        ),
    }
}

/// Partial files read for merging: each instance's [`Digest`] and the file its diagnosis is in.
/// Memory holds the digests only; [`Merge::write_partial`] copies each diagnosis from its file
/// as written.
#[derive(Debug, Default)]
pub struct Merge {
    files: Vec<PathBuf>,
    /// Each instance's digest, by name.
    digests: BTreeMap<String, Digest>,
    /// Each instance's file (index into `files`).
    file_of: BTreeMap<String, usize>,
}

#[derive(Deserialize)]
struct DigestFile {
    instances: BTreeMap<String, Digest>,
}

#[derive(Deserialize)]
struct RawFile {
    instances: BTreeMap<String, Box<serde_json::value::RawValue>>,
}

impl Merge {
    /// Nothing read yet.
    pub fn new() -> Merge {
        Merge::default()
    }

    /// Read one partial file. Refused, naming the file: another kind or version, a damaged
    /// file, an instance already read.
    pub fn add(&mut self, path: &Path) -> anyhow::Result<()> {
        let at = |e: anyhow::Error| anyhow::anyhow!("{}: {e}", path.display());
        let text = std::fs::read_to_string(path)
            .map_err(|e| anyhow::anyhow!("cannot read {}: {e}", path.display()))?;
        check_head(&text).map_err(at)?;
        let f: DigestFile = serde_json::from_str(&text)
            .map_err(|e| at(anyhow::anyhow!("a damaged partial ({e}); write it again")))?;
        let file = self.files.len();
        self.files.push(path.to_path_buf());
        for (name, d) in f.instances {
            check_name(&name).map_err(at)?;
            if self.file_of.contains_key(&name) {
                return Err(at(twice(&name)));
            }
            self.file_of.insert(name.clone(), file);
            self.digests.insert(name, d);
        }
        Ok(())
    }

    /// The instances read, by name.
    pub fn digests(&self) -> &BTreeMap<String, Digest> {
        &self.digests
    }

    /// The fleet report (the digests move into it).
    pub fn fleet(self) -> Fleet {
        Fleet::of(self.digests)
    }

    /// Write the merged partial — the same bytes as [`Partial::to_json`] of the union — copying
    /// each instance's diagnosis from its file (a file is read again when its instance's turn
    /// comes; the last one read is kept).
    pub fn write_partial(&self, out: &mut impl std::io::Write) -> anyhow::Result<()> {
        write!(
            out,
            "{{\"schema\":{},\"resolvelab\":{},\"instances\":{{",
            serde_json::to_string(PARTIAL_SCHEMA)?,
            serde_json::to_string(VERSION)?
        )?;
        let mut cached: Option<(usize, RawFile)> = None;
        for (k, (name, file)) in self.file_of.iter().enumerate() {
            if cached.as_ref().is_none_or(|c| c.0 != *file) {
                let p = &self.files[*file];
                let text = std::fs::read_to_string(p)
                    .map_err(|e| anyhow::anyhow!("cannot read {} again: {e}", p.display()))?;
                cached = Some((*file, serde_json::from_str(&text)?));
            }
            let raw = &cached.as_ref().expect("just read").1;
            let d = raw.instances.get(name).ok_or_else(|| {
                anyhow::anyhow!("{} changed while merging", self.files[*file].display())
            })?;
            let sep = if k > 0 { "," } else { "" };
            write!(out, "{sep}{}:{}", serde_json::to_string(name)?, d.get())?;
        }
        writeln!(out, "}}}}")?;
        Ok(())
    }
}

/// Whether `name` can name an instance: 1 to 253 printable characters without spaces.
pub fn check_name(name: &str) -> anyhow::Result<()> {
    let ok = !name.is_empty()
        && name.len() <= MAX_NAME
        && name.chars().all(|c| {
            c.is_ascii_graphic() || (!c.is_ascii() && !c.is_whitespace() && !c.is_control())
        });
    if ok {
        Ok(())
    } else {
        anyhow::bail!(
            "instance name `{name}`: give 1 to {MAX_NAME} printable characters without spaces (a pod or host name)"
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn diagnosis() -> Diagnosis {
        serde_json::from_str(include_str!("../../tests/data/one-request-diagnosis.json")).unwrap()
    }

    #[test]
    fn names_are_checked() {
        assert!(Partial::one("nginx-7d9f-x2k", diagnosis()).is_ok());
        for bad in ["", "two words", "tab\there", &"x".repeat(254)] {
            let e = Partial::one(bad, diagnosis()).unwrap_err().to_string();
            assert!(e.contains("printable characters"), "{e}");
        }
    }

    #[test]
    fn other_files_and_versions_are_refused_in_one_line() {
        let p = Partial::one("a", diagnosis()).unwrap();
        assert_eq!(Partial::parse(&p.to_json()).unwrap().to_json(), p.to_json());
        let old = p.to_json().replace(VERSION, "0.0.1");
        let e = Partial::parse(&old).unwrap_err().to_string();
        assert!(e.starts_with("written by resolvelab 0.0.1, this is"), "{e}");
        let report = serde_json::to_string(&diagnosis()).unwrap();
        let e = Partial::parse(&report).unwrap_err().to_string();
        assert!(e.contains("is not resolvelab.partial/v1"), "{e}");
        let e = Partial::parse("1796018401.100 502 …")
            .unwrap_err()
            .to_string();
        assert!(e.starts_with("not a resolvelab partial"), "{e}");
        for e in [old, report] {
            assert!(!Partial::parse(&e).unwrap_err().to_string().contains('\n'));
        }
    }

    #[test]
    fn an_instance_twice_is_refused() {
        let a = Partial::one("a", diagnosis()).unwrap();
        let e = a.clone().merge(a).unwrap_err().to_string();
        assert!(e.starts_with("instance `a` is in two partials"), "{e}");
    }
}
