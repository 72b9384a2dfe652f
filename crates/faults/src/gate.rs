//! The common part of every fault: name, toxicity (probability), window (`for`), seed and the
//! hit counter. Backend faults and proxy toxics share it so that `toxicity=0.3,for=2s,seed=7`
//! means the same thing everywhere.

use rand::{RngExt, SeedableRng};
use rand_chacha::ChaCha8Rng;
use resolvelab_core::{dur, spec::Spec};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// Keys every fault accepts besides its own.
pub const COMMON_KEYS: &[&str] = &["toxicity", "for", "seed", "name"];

/// The parsed common keys of a fault spec.
#[derive(Debug, Clone, PartialEq)]
pub struct Common {
    /// Name used by the control API and counters (default: derived from the kind).
    pub name: Option<String>,
    /// Probability (0–1) that the fault applies to one decision point (connection or request).
    pub toxicity: f64,
    /// Optional window: the fault is active for this long after it was added, then inert.
    pub window: Option<Duration>,
    /// Seed of the fault's ChaCha8 random stream.
    pub seed: u64,
}

impl Common {
    /// Read the common keys of `spec`, rejecting any key outside `COMMON_KEYS` and `own`.
    pub fn from_spec(spec: &Spec, own: &[&str]) -> Result<Common, String> {
        let mut allowed: Vec<&str> = COMMON_KEYS.to_vec();
        allowed.extend_from_slice(own);
        spec.only(&allowed)?;
        let toxicity = match spec.get("toxicity") {
            None => 1.0,
            Some(t) => {
                let v: f64 = t.parse().map_err(|_| {
                    format!(
                        "`{}`: toxicity `{t}` is not a number (write e.g. toxicity=0.3)",
                        spec.kind
                    )
                })?;
                if !(0.0..=1.0).contains(&v) {
                    return Err(format!(
                        "`{}`: toxicity {t} is outside 0..1 (it is a probability)",
                        spec.kind
                    ));
                }
                v
            }
        };
        let window = spec
            .get("for")
            .map(|w| dur::parse(w).map_err(|e| format!("`{}`: for={w}: {e}", spec.kind)))
            .transpose()?;
        let seed = match spec.get("seed") {
            None => default_seed(&spec.kind),
            Some(s) => s
                .parse()
                .map_err(|_| format!("`{}`: seed `{s}` is not an unsigned integer", spec.kind))?,
        };
        Ok(Common {
            name: spec.get("name").map(str::to_string),
            toxicity,
            window,
            seed,
        })
    }

    /// Render the common keys that differ from the defaults, as `key=value` pairs.
    pub fn render(&self, kind: &str) -> Vec<String> {
        let mut out = Vec::new();
        if self.toxicity != 1.0 {
            out.push(format!("toxicity={}", self.toxicity));
        }
        if let Some(w) = self.window {
            out.push(format!("for={}", dur::format(w)));
        }
        if self.seed != default_seed(kind) {
            out.push(format!("seed={}", self.seed));
        }
        if let Some(n) = &self.name {
            out.push(format!("name={n}"));
        }
        out
    }
}

/// A fixed seed per kind, so that a spec without `seed=` is still reproducible.
pub fn default_seed(kind: &str) -> u64 {
    // FNV-1a: stable across Rust versions, unlike `DefaultHasher`.
    kind.bytes().fold(0xcbf2_9ce4_8422_2325u64, |h, b| {
        (h ^ b as u64).wrapping_mul(0x0100_0000_01b3)
    })
}

/// Derive an independent seed for one connection (and direction) from a fault's seed, so that
/// per-connection decisions do not depend on the order in which connections are scheduled.
pub fn sub_seed(seed: u64, conn: u64, lane: u64) -> u64 {
    let mut z = seed ^ conn.wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ lane.rotate_left(32);
    // splitmix64 finaliser
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// A live fault's common state: window start, seeded RNG and the hit counter.
#[derive(Debug)]
pub struct Gate {
    common: Common,
    added: Instant,
    rng: Mutex<ChaCha8Rng>,
    hits: AtomicU64,
}

impl Gate {
    /// Start the fault now (the window, if any, starts now).
    pub fn new(common: Common) -> Gate {
        Gate {
            rng: Mutex::new(ChaCha8Rng::seed_from_u64(common.seed)),
            common,
            added: Instant::now(),
            hits: AtomicU64::new(0),
        }
    }

    /// The common keys.
    pub fn common(&self) -> &Common {
        &self.common
    }

    /// Is the fault inside its window (always, without `for`)?
    pub fn in_window(&self) -> bool {
        self.common.window.is_none_or(|w| self.added.elapsed() < w)
    }

    /// When the window ends, if it has one.
    pub fn window_end(&self) -> Option<Instant> {
        self.common.window.map(|w| self.added + w)
    }

    /// Decide one decision point: inside the window and the seeded coin says yes.
    pub fn roll(&self) -> bool {
        if !self.in_window() {
            return false;
        }
        if self.common.toxicity >= 1.0 {
            return true;
        }
        self.unit() < self.common.toxicity
    }

    /// A uniform sample in [0, 1) from the fault's own random stream.
    pub fn unit(&self) -> f64 {
        let mut rng = self.rng.lock().unwrap_or_else(|p| p.into_inner());
        rng.random::<f64>()
    }

    /// Count one hit (the fault actually touched a connection, request or window).
    pub fn hit(&self) {
        self.hits.fetch_add(1, Ordering::Relaxed);
    }

    /// How many times the fault actually touched something.
    pub fn hits(&self) -> u64 {
        self.hits.load(Ordering::Relaxed)
    }
}

/// Something in a [`FaultList`]: faults are addressed by name.
pub trait Named {
    /// The fault's name (unique in its list).
    fn name(&self) -> &str;
}

/// A named fault with its gate (window and hit counter).
pub trait Gated: Named {
    /// The fault's gate.
    fn gate(&self) -> &Gate;
}

/// The live list of faults of a backend or a proxy: copy-on-write, so that the data path takes a
/// snapshot (`current`) without holding a lock while it works, and a change applies to the next
/// connection or chunk.
pub struct FaultList<T> {
    list: std::sync::RwLock<Arc<Vec<Arc<T>>>>,
}

impl<T: Named> Default for FaultList<T> {
    fn default() -> Self {
        FaultList {
            list: std::sync::RwLock::new(Arc::new(Vec::new())),
        }
    }
}

impl<T: Named> FaultList<T> {
    /// A snapshot of the faults now.
    pub fn current(&self) -> Arc<Vec<Arc<T>>> {
        self.list.read().unwrap_or_else(|p| p.into_inner()).clone()
    }

    /// Add `item`; `Err(name)` when a fault of that name is already there.
    pub fn add(&self, item: Arc<T>) -> Result<(), String> {
        let mut list = self.list.write().unwrap_or_else(|p| p.into_inner());
        if list.iter().any(|f| f.name() == item.name()) {
            return Err(item.name().to_string());
        }
        let mut next = (**list).clone();
        next.push(item);
        *list = Arc::new(next);
        Ok(())
    }

    /// Remove the fault called `name`; false if there was none.
    pub fn remove(&self, name: &str) -> bool {
        let mut list = self.list.write().unwrap_or_else(|p| p.into_inner());
        let next: Vec<_> = list.iter().filter(|f| f.name() != name).cloned().collect();
        let removed = next.len() != list.len();
        *list = Arc::new(next);
        removed
    }

    /// Remove every fault.
    pub fn clear(&self) {
        *self.list.write().unwrap_or_else(|p| p.into_inner()) = Arc::new(Vec::new());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    struct F(&'static str);
    impl Named for F {
        fn name(&self) -> &str {
            self.0
        }
    }

    #[test]
    fn fault_list_names_are_unique_and_snapshots_stay_put() {
        let l = FaultList::<F>::default();
        l.add(Arc::new(F("a"))).unwrap();
        l.add(Arc::new(F("b"))).unwrap();
        assert_eq!(l.add(Arc::new(F("a"))).unwrap_err(), "a");
        let snap = l.current();
        assert!(l.remove("a"));
        assert!(!l.remove("a"));
        // A connection's snapshot is not changed under it.
        assert_eq!(snap.len(), 2);
        assert_eq!(l.current().len(), 1);
        l.clear();
        assert!(l.current().is_empty());
    }

    #[test]
    fn common_keys() {
        let s = Spec::parse("reclaim:toxicity=0.3,for=2s,seed=7,delay=0..50ms").unwrap();
        let c = Common::from_spec(&s, &["delay"]).unwrap();
        assert_eq!(c.toxicity, 0.3);
        assert_eq!(c.window, Some(Duration::from_secs(2)));
        assert_eq!(c.seed, 7);
        assert!(Common::from_spec(&s, &[]).unwrap_err().contains("delay"));
        let bad = Spec::parse("rst:toxicity=1.5").unwrap();
        assert!(
            Common::from_spec(&bad, &[])
                .unwrap_err()
                .contains("outside 0..1")
        );
    }

    #[test]
    fn seeded_roll_is_reproducible_and_near_toxicity() {
        let s = Spec::parse("x:toxicity=0.3,seed=42").unwrap();
        let a = Gate::new(Common::from_spec(&s, &[]).unwrap());
        let b = Gate::new(Common::from_spec(&s, &[]).unwrap());
        let ra: Vec<bool> = (0..2000).map(|_| a.roll()).collect();
        let rb: Vec<bool> = (0..2000).map(|_| b.roll()).collect();
        assert_eq!(ra, rb);
        let yes = ra.iter().filter(|x| **x).count();
        assert!((500..700).contains(&yes), "{yes}");
    }

    #[test]
    fn window_expires() {
        let s = Spec::parse("x:for=0ms").unwrap();
        let g = Gate::new(Common::from_spec(&s, &[]).unwrap());
        assert!(!g.in_window());
        assert!(!g.roll());
    }
}
