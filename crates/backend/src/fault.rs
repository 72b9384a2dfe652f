//! Backend faults at run time: a parsed fault ([`BackendFault`], written
//! `KIND[:key=value,…]` with the common keys `toxicity`, `for`, `seed`, `name`) installed on a
//! running backend with its gate and counters.

use resolvelab_inject::gate::Gate;
use std::sync::atomic::{AtomicU64, Ordering};

/// A backend fault's kind and its parsed spec: the lab's vocabulary
/// (`resolvelab_core::spec::fault`). This module adds what a fault does at run time.
pub use resolvelab_core::spec::fault::{BACKEND_KINDS, BackendFault, BackendFaultKind};

/// A fault installed on a running backend.
#[derive(Debug)]
pub struct Fault {
    pub(crate) name: String,
    pub(crate) spec: BackendFault,
    pub(crate) gate: Gate,
    /// Kind-specific second counter: for `reclaim`, requests that arrived in the gap and were
    /// dropped (each is one first-try failure on the client side).
    pub(crate) caught: AtomicU64,
}

impl resolvelab_inject::gate::Gated for Fault {
    fn gate(&self) -> &resolvelab_inject::gate::Gate {
        &self.gate
    }
}

impl resolvelab_inject::gate::Named for Fault {
    fn name(&self) -> &str {
        &self.name
    }
}

/// A fault's counters.
#[derive(Debug, Clone, serde::Serialize, PartialEq)]
pub struct FaultStatus {
    /// Name.
    pub name: String,
    /// Kind.
    pub kind: String,
    /// Spec rendered back.
    pub spec: String,
    /// Inside its window?
    pub active: bool,
    /// What it actually touched: reclaim/idle-timeout closes, rst/hang connections, refuse
    /// windows, status/slow-headers/close-after-headers requests.
    pub hits: u64,
    /// For `reclaim`: requests caught in the gap (never answered).
    pub caught: u64,
}

impl Fault {
    pub(crate) fn new(spec: BackendFault) -> Fault {
        Fault {
            name: spec.name(),
            gate: Gate::new(spec.common.clone()),
            spec,
            caught: AtomicU64::new(0),
        }
    }

    /// The hit counter.
    pub fn hits(&self) -> u64 {
        self.gate.hits()
    }

    pub(crate) fn status(&self) -> FaultStatus {
        FaultStatus {
            name: self.name.clone(),
            kind: self.spec.kind.name().to_string(),
            spec: self.spec.render(),
            active: self.gate.in_window(),
            hits: self.gate.hits(),
            caught: self.caught.load(Ordering::Relaxed),
        }
    }
}
