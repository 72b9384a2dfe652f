//! The common part of every fault: name, toxicity (probability), window (`for`), seed and the
//! hit counter. Backend faults and proxy toxics share it so that `toxicity=0.3,for=2s,seed=7`
//! means the same thing everywhere.

use rand::{RngExt, SeedableRng};
use rand_chacha::ChaCha8Rng;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Instant;

pub use resolvelab_core::spec::fault::{COMMON_KEYS, Common, default_seed};

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
    use resolvelab_core::spec::Spec;

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
