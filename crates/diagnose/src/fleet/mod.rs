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
//!   instances' diagnoses (bounded lists, not lines or failures). An instance in two partials
//!   is two time slices of it (`diagnose --since/--until`), joined into one diagnosis
//!   ([`slices`]); without ranges, or with ranges that leave a gap or overlap, it is refused.
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
pub mod slices;
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
        cut_events(&mut d);
        Ok(Partial {
            schema: PARTIAL_SCHEMA.into(),
            resolvelab: VERSION.into(),
            instances: BTreeMap::from([(instance.to_string(), d)]),
        })
    }

    /// Both partials' instances. An instance in both is two time slices of it, joined
    /// ([`slices::join`]); refused (its name in the error) unless their ranges are adjacent.
    pub fn merge(mut self, other: Partial) -> anyhow::Result<Partial> {
        for (name, d) in other.instances {
            let d = match self.instances.remove(&name) {
                Some(mine) => joined(&name, vec![mine, d])?,
                None => d,
            };
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

/// A partial keeps the first [`NLU_EVENTS`] NLU events of an instance.
fn cut_events(d: &mut Diagnosis) {
    if d.nlu_events.len() > NLU_EVENTS {
        d.nlu_events.truncate(NLU_EVENTS);
        d.nlu_events_truncated = true;
    }
}

/// An instance's time slices joined into one diagnosis; refused naming the instance.
fn joined(name: &str, parts: Vec<Diagnosis>) -> anyhow::Result<Diagnosis> {
    let mut d = slices::join_all(parts).map_err(|e| anyhow::anyhow!("instance `{name}`: {e}"))?;
    cut_events(&mut d);
    Ok(d)
}

/// An instance in two partials that are not both time slices.
fn twice(name: &str) -> anyhow::Error {
    anyhow::anyhow!(
        "instance `{name}` is in two partials without a time range: diagnose each time slice with --since/--until, or all of the instance's logs in one `resolvelab diagnose --partial` run"
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
    /// Each instance's files (indexes into `files`): several for time slices.
    file_of: BTreeMap<String, Vec<usize>>,
    /// The instances read in time slices, joined ([`Merge::join_slices`]).
    joined: BTreeMap<String, Diagnosis>,
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
    /// file, an instance already read unless both are time slices (`--since`/`--until`).
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
            if let Some(seen) = self.digests.get(&name)
                && (seen.range.is_none() || d.range.is_none())
            {
                return Err(at(twice(&name)));
            }
            self.file_of.entry(name.clone()).or_default().push(file);
            self.digests.insert(name, d);
        }
        Ok(())
    }

    /// Join each instance read in time slices into one diagnosis (each slice read again from
    /// its file), its digest made from that; refused when its slices leave a gap or overlap.
    /// Done once, by [`Merge::fleet`] and [`Merge::write_partial`] too.
    pub fn join_slices(&mut self) -> anyhow::Result<()> {
        for (name, files) in &self.file_of {
            if files.len() < 2 || self.joined.contains_key(name) {
                continue;
            }
            let mut parts = Vec::new();
            for &f in files {
                let p = &self.files[f];
                let raw = read_raw(p)?;
                let d = raw.instances.get(name).ok_or_else(|| changed(p))?;
                parts
                    .push(serde_json::from_str(d.get()).map_err(|e| {
                        anyhow::anyhow!("{}: a damaged partial ({e})", p.display())
                    })?);
            }
            let d = joined(name, parts)?;
            self.digests.insert(name.clone(), Digest::from(&d));
            self.joined.insert(name.clone(), d);
        }
        Ok(())
    }

    /// The instances read, by name.
    pub fn digests(&self) -> &BTreeMap<String, Digest> {
        &self.digests
    }

    /// The fleet report (the digests move into it), time slices joined.
    pub fn fleet(mut self) -> anyhow::Result<Fleet> {
        self.join_slices()?;
        Ok(Fleet::of(self.digests))
    }

    /// Write the merged partial — the same bytes as [`Partial::to_json`] of the union — copying
    /// each instance's diagnosis from its file (a file is read again when its instance's turn
    /// comes; the last one read is kept).
    pub fn write_partial(&mut self, out: &mut impl std::io::Write) -> anyhow::Result<()> {
        self.join_slices()?;
        write!(
            out,
            "{{\"schema\":{},\"resolvelab\":{},\"instances\":{{",
            serde_json::to_string(PARTIAL_SCHEMA)?,
            serde_json::to_string(VERSION)?
        )?;
        let mut cached: Option<(usize, RawFile)> = None;
        for (k, (name, files)) in self.file_of.iter().enumerate() {
            let sep = if k > 0 { "," } else { "" };
            write!(out, "{sep}{}:", serde_json::to_string(name)?)?;
            if let Some(d) = self.joined.get(name) {
                serde_json::to_writer(&mut *out, d)?;
                continue;
            }
            let file = files[0];
            if cached.as_ref().is_none_or(|c| c.0 != file) {
                cached = Some((file, read_raw(&self.files[file])?));
            }
            let raw = &cached.as_ref().expect("just read").1;
            let d = raw
                .instances
                .get(name)
                .ok_or_else(|| changed(&self.files[file]))?;
            out.write_all(d.get().as_bytes())?;
        }
        writeln!(out, "}}}}")?;
        Ok(())
    }
}

/// A partial file read again, its instances left as written.
fn read_raw(p: &Path) -> anyhow::Result<RawFile> {
    let text = std::fs::read_to_string(p)
        .map_err(|e| anyhow::anyhow!("cannot read {} again: {e}", p.display()))?;
    Ok(serde_json::from_str(&text)?)
}

/// A file that no longer holds what it held when read.
fn changed(p: &Path) -> anyhow::Error {
    anyhow::anyhow!("{} changed while merging", p.display())
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
        assert!(e.starts_with("instance `a`: "), "{e}");
        assert!(e.contains("without a time range"), "{e}");
    }
}
