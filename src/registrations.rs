//! The registrations of worker connections: each connection's pid mapped to its registry entry
//! for as long as the connection lives, behind the [`ConnectionNotifier`] a connection tells.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard};

use lintel_wire::{DepartureReason, Refusal, RefusalCode, Register};

use crate::link::WorkerLink;
use crate::registry::{RegistrationGuard, Registry, WorkerId};

/// Told when a worker connection registers and when it goes.
pub trait ConnectionNotifier: Send + Sync + 'static {
    /// Admits the registration of connection `pid`, whose pushes go to `link`; a version-2
    /// `Register` comes as the `Register` it means.
    ///
    /// # Errors
    /// A [`Refusal`] sent back to the worker; nothing stays registered.
    fn on_worker_registered(
        &self,
        pid: u64,
        registration: &Register,
        link: WorkerLink,
    ) -> Result<WorkerId, Refusal>;

    /// Connection `pid`, registered earlier, is closed, for `reason`. Called exactly once per
    /// registration.
    fn on_worker_unregistered(&self, pid: u64, reason: DepartureReason);
}

/// Each connection's [`RegistrationGuard`], keyed by pid: the node's default notifier.
#[derive(Debug)]
pub struct Registrations {
    registry: Arc<Registry>,
    guards: Mutex<HashMap<u64, RegistrationGuard>>,
}

impl Registrations {
    pub fn new(registry: Arc<Registry>) -> Self {
        Self {
            registry,
            guards: Mutex::new(HashMap::new()),
        }
    }

    /// Connections currently holding a registration.
    pub fn registered(&self) -> usize {
        self.guards().len()
    }

    fn guards(&self) -> MutexGuard<'_, HashMap<u64, RegistrationGuard>> {
        self.guards
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

impl ConnectionNotifier for Registrations {
    fn on_worker_registered(
        &self,
        pid: u64,
        registration: &Register,
        link: WorkerLink,
    ) -> Result<WorkerId, Refusal> {
        if self.guards().contains_key(&pid) {
            return Err(Refusal {
                code: RefusalCode::Rejected,
                reason: format!("connection {pid} is already registered"),
            });
        }
        let guard = self.registry.admit(pid, registration, link)?;
        let worker_id = guard.worker_id();
        self.guards().insert(pid, guard);
        Ok(worker_id)
    }

    fn on_worker_unregistered(&self, pid: u64, reason: DepartureReason) {
        // Drop outside the map's lock: the guard takes the registry's lock.
        let guard = self.guards().remove(&pid);
        if let Some(mut guard) = guard {
            guard.departing(reason);
        }
    }
}

/// Held by a registered connection; dropping it calls `on_worker_unregistered` once.
pub(crate) struct Registered {
    notifier: Arc<dyn ConnectionNotifier>,
    pid: u64,
    pub(crate) worker_id: WorkerId,
    pub(crate) link: WorkerLink,
    /// The node is shutting down: pushes still live are abandoned rather than lost.
    pub(crate) shutting_down: bool,
    /// Why the worker leaves, as far as its connection can prove.
    pub(crate) departure: DepartureReason,
}

impl Registered {
    pub(crate) fn new(
        notifier: Arc<dyn ConnectionNotifier>,
        pid: u64,
        worker_id: WorkerId,
        link: WorkerLink,
    ) -> Self {
        Self {
            notifier,
            pid,
            worker_id,
            link,
            shutting_down: false,
            departure: DepartureReason::Disconnected,
        }
    }
}

impl Drop for Registered {
    fn drop(&mut self) {
        self.notifier
            .on_worker_unregistered(self.pid, self.departure);
        // Deregistered first so nothing new selects it; then every waiter hears how it ended.
        if self.shutting_down {
            self.link.close_abandoning();
        } else {
            self.link.close();
        }
    }
}
