//! What the registry says of a runner when it is installed or looked at again, and the place
//! kept for an adapter that has no runner yet.

use service_contract::{AdapterEntry, AdapterKind, AdapterStatus};

use super::{Slot, Supervisor, read, write};
use crate::adapters::managed::Managed;

impl Supervisor {
    /// Keeps `name`'s place while no runner serves under it (one being loaded, or refused):
    /// its requests get 503 with `refusal`, not 404. False, changing nothing, when a runner
    /// serves under the name.
    pub(crate) fn keep_place(&self, name: &str, refusal: String) -> bool {
        let mut slots = write(&self.slots);
        match slots.get_mut(name) {
            Some(slot) if slot.runner.is_some() => false,
            Some(slot) => {
                slot.vacancy = Some(refusal);
                true
            }
            None => {
                let slot = Slot {
                    runner: None,
                    native: false,
                    started: None,
                    vacancy: Some(refusal),
                };
                slots.insert(name.to_owned(), slot);
                true
            }
        }
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
            // What its start found missing stays until it starts again.
            None if started && !self.registry().needs_settings(name) => {
                self.settle(name, runner.as_ref())
            }
            None => {}
        }
    }

    /// The entry of a runner being installed: what it says of itself, a fresh status (`running`
    /// unless it is off; its `start` follows at once and records what fails), and the history
    /// (activity, errors) kept.
    pub(super) fn publish(&self, runner: &dyn Managed) {
        let name = runner.name();
        let mut entry = self.registry().get(name).unwrap_or_else(|| {
            let mut entry = AdapterEntry::new(name, AdapterKind::Wasm);
            entry.last_activity_at = read(&self.activity).get(name).cloned();
            entry
        });
        runner.describe(&mut entry);
        let off = self.off(name);
        entry.status = match off {
            Some(_) => AdapterStatus::Stopped,
            None => AdapterStatus::Running,
        };
        entry.note = off;
        entry.phase = None;
        self.registry().insert(entry);
    }
}
