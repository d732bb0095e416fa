//! What the registry says of a component while it loads, when it cannot be loaded, and when
//! it is installed or looked at again.

use service_contract::{AdapterEntry, AdapterKind, AdapterStatus, FailureKind};

use super::{LOADING, Slot, Supervisor, read, write};
use crate::adapters::managed::Managed;

impl Supervisor {
    /// A component being compiled: its entry says so, and its routes answer 503 until it is
    /// installed (a generation already serving keeps serving).
    pub fn loading(&self, name: &str) {
        let mut slots = write(&self.slots);
        if slots.get(name).is_some_and(|s| s.runner.is_some()) {
            return;
        }
        slots.insert(
            name.to_owned(),
            Slot {
                runner: None,
                native: false,
                started: None,
            },
        );
        drop(slots);
        let mut entry = self
            .registry()
            .get(name)
            .unwrap_or_else(|| AdapterEntry::new(name, AdapterKind::Wasm));
        entry.status = AdapterStatus::Stopped;
        entry.note = Some(LOADING.to_owned());
        self.registry().insert(entry);
    }

    /// A component that could not be loaded: the entry records why; a generation already
    /// serving keeps serving.
    pub fn load_failed(&self, name: &str, message: &str) {
        tracing::warn!(adapter = %name, "cannot load component: {message}");
        if self.is_native(name) {
            // The native adapter keeps running; its entry says what was refused.
            self.registry()
                .note_error(name, FailureKind::LoadError, message);
            return;
        }
        write(&self.slots).entry(name.to_owned()).or_insert(Slot {
            runner: None,
            native: false,
            started: None,
        });
        let mut entry = self
            .registry()
            .get(name)
            .unwrap_or_else(|| AdapterEntry::new(name, AdapterKind::Wasm));
        if entry.note.as_deref() == Some(LOADING) {
            entry.note = None;
        }
        self.registry().insert(entry);
        self.registry()
            .mark_error(name, FailureKind::LoadError, message);
    }

    /// The entry of an adapter whose runner did not change, back to what is true now (a load
    /// failure in between is no longer what it says).
    pub fn refresh(&self, name: &str) {
        let Some((runner, started)) = read(&self.slots)
            .get(name)
            .and_then(|s| Some((s.runner.clone()?, s.started.is_some())))
        else {
            return;
        };
        match self.off(name) {
            Some(reason) => self.registry().mark_stopped_because(name, &reason),
            None if started => {
                self.registry().mark_running(name);
                if let Some(problem) = runner.config_problem() {
                    self.registry()
                        .mark_error(name, FailureKind::ConfigError, &problem);
                }
            }
            None => {}
        }
    }

    /// The entry of a runner being installed: what it says of itself, a fresh status (`running`
    /// unless it is off; its `start` follows at once and records what fails), and the history
    /// (activity, errors) kept.
    pub(super) fn publish(&self, runner: &dyn Managed) {
        let name = runner.name();
        let mut entry = self
            .registry()
            .get(name)
            .unwrap_or_else(|| AdapterEntry::new(name, AdapterKind::Wasm));
        runner.describe(&mut entry);
        let off = self.off(name);
        entry.status = match off {
            Some(_) => AdapterStatus::Stopped,
            None => AdapterStatus::Running,
        };
        entry.note = off;
        self.registry().insert(entry);
    }
}
