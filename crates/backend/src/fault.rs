//! Backend faults at run time: a parsed fault ([`BackendFault`], written
//! `KIND[:key=value,…]` with the common keys `toxicity`, `for`, `seed`, `name`) installed on a
//! running backend with its gate, its counters and its kind's behaviour: one file per kind
//! (`fault/<kind>.rs`), each a [`hooks::Behaviour`] at the server's hook points (accept, before
//! the headers, after the response, idle), registered in [`behaviour`].

mod close_after_headers;
mod hang;
pub(crate) mod hooks;
mod idle_timeout;
mod reclaim;
mod refuse;
mod restart;
mod rst;
mod slow_headers;
mod status;

use hooks::Behaviour;

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
    /// What the kind does at the server's hook points.
    pub(crate) behaviour: Box<dyn Behaviour>,
}

/// Each kind's behaviour: the table a new kind adds its row (and its file) to.
fn behaviour(kind: &BackendFaultKind) -> Box<dyn Behaviour> {
    match *kind {
        BackendFaultKind::Reclaim { delay } => Box::new(reclaim::Reclaim { delay }),
        BackendFaultKind::IdleTimeout { after } => Box::new(idle_timeout::IdleTimeout { after }),
        BackendFaultKind::Rst => Box::new(rst::Rst),
        BackendFaultKind::Refuse => Box::new(refuse::Refuse),
        BackendFaultKind::Restart => Box::new(restart::Restart),
        BackendFaultKind::Hang => Box::new(hang::Hang),
        BackendFaultKind::CloseAfterHeaders => Box::new(close_after_headers::CloseAfterHeaders),
        BackendFaultKind::Status { code } => Box::new(status::Status { code }),
        BackendFaultKind::SlowHeaders { delay } => Box::new(slow_headers::SlowHeaders { delay }),
    }
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
            behaviour: behaviour(&spec.kind),
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
