//! One owner of every adapter's lifecycle, native or component, split by job: `lifecycle`
//! (install, start and stop in order under one lock, with deadlines; a hook that fails, panics
//! or hangs is recorded on that adapter's entry and never stops the others), `entries` (what
//! the registry says of a runner installed or looked at again, and the place kept for an
//! adapter that has none yet), `choices` (the operator's
//! enable/disable, kept across restarts; settings that hold one back; another replica running
//! it) and `dispatch` (requests). Behaviour comes from what a [`Managed`] says of itself; the
//! one difference of kind kept here is that a native adapter is never removed or replaced by a
//! component's load.

mod choices;
mod dispatch;
mod entries;
mod lifecycle;

pub use choices::ToggleError;
pub use dispatch::Refusal;

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, PoisonError, RwLock};
use std::time::Duration;

use service_contract::{AdapterContext, AdapterRegistry};

use super::managed::Managed;
use crate::db::Db;

/// How long `start` and `stop` may take.
pub(crate) const START_LIMIT: Duration = Duration::from_secs(10);
pub(crate) const STOP_LIMIT: Duration = Duration::from_secs(5);

const DISABLED: &str = "disabled from the dashboard";

struct Slot {
    /// `None` while it loads, or when it could not be loaded.
    runner: Option<Arc<dyn Managed>>,
    native: bool,
    /// While it runs: when it was started (a sequence number, for the stop order).
    started: Option<u64>,
    /// Without a runner: what its requests are told (503).
    vacancy: Option<String>,
}

pub struct Supervisor {
    context: Arc<AdapterContext>,
    db: Db,
    slots: RwLock<BTreeMap<String, Slot>>,
    /// The operator's choice.
    disabled: RwLock<HashSet<String>>,
    /// Kept from starting by a setting, with the reason.
    held_back: RwLock<HashMap<String, String>>,
    /// Each adapter's last activity before this start, restored onto its entry.
    activity: RwLock<HashMap<String, String>>,
    /// Natives another replica runs (or that wait to learn which one does), with the reason.
    standby: RwLock<HashMap<String, String>>,
    /// Taken by everything that runs `start` or `stop`, so hooks never interleave and never
    /// run twice for one change.
    lifecycle: tokio::sync::Mutex<()>,
    starts: AtomicU64,
    /// Notified when an adapter starts serving (its waiting jobs can run now).
    serving: Arc<tokio::sync::Notify>,
    /// Whether start-up (natives started, components loaded) is over.
    ready: std::sync::atomic::AtomicBool,
    start_limit: Duration,
    stop_limit: Duration,
}

fn read<T>(lock: &RwLock<T>) -> std::sync::RwLockReadGuard<'_, T> {
    lock.read().unwrap_or_else(PoisonError::into_inner)
}

fn write<T>(lock: &RwLock<T>) -> std::sync::RwLockWriteGuard<'_, T> {
    lock.write().unwrap_or_else(PoisonError::into_inner)
}

impl Supervisor {
    pub fn new(context: Arc<AdapterContext>, db: Db, serving: Arc<tokio::sync::Notify>) -> Self {
        Self {
            serving,
            context,
            db,
            slots: RwLock::default(),
            disabled: RwLock::default(),
            held_back: RwLock::default(),
            standby: RwLock::default(),
            activity: RwLock::default(),
            lifecycle: tokio::sync::Mutex::new(()),
            starts: AtomicU64::new(0),
            ready: std::sync::atomic::AtomicBool::new(false),
            start_limit: START_LIMIT,
            stop_limit: STOP_LIMIT,
        }
    }

    /// Shorter hook deadlines, for tests of hanging adapters.
    pub fn with_limits(mut self, start: Duration, stop: Duration) -> Self {
        self.start_limit = start;
        self.stop_limit = stop;
        self
    }

    pub fn context(&self) -> &Arc<AdapterContext> {
        &self.context
    }

    pub fn registry(&self) -> &Arc<AdapterRegistry> {
        &self.context.registry
    }

    /// Start-up is over: every adapter found at start has started or failed.
    pub fn mark_ready(&self) {
        self.ready.store(true, Ordering::Relaxed);
    }

    pub fn is_ready(&self) -> bool {
        self.ready.load(Ordering::Relaxed)
    }

    /// Why an adapter is off (held back, disabled or on standby), if it is.
    fn off(&self, name: &str) -> Option<String> {
        if let Some(reason) = read(&self.held_back).get(name) {
            return Some(reason.clone());
        }
        if read(&self.disabled).contains(name) {
            return Some(DISABLED.to_owned());
        }
        read(&self.standby).get(name).cloned()
    }

    fn runner_of(&self, name: &str) -> Option<Arc<dyn Managed>> {
        read(&self.slots).get(name)?.runner.clone()
    }

    /// The runner of `name` when it is of type `T` (a component generation, say).
    pub(crate) fn runner<T: Managed>(&self, name: &str) -> Option<Arc<T>> {
        let runner: Arc<dyn std::any::Any + Send + Sync> = self.runner_of(name)?;
        runner.downcast::<T>().ok()
    }

    /// Every runner of type `T`, by name.
    pub(crate) fn runners<T: Managed>(&self) -> Vec<Arc<T>> {
        let names: Vec<String> = read(&self.slots).keys().cloned().collect();
        names
            .iter()
            .filter_map(|name| self.runner::<T>(name))
            .collect()
    }

    /// Natives that may run on this replica: installed, not held back by a setting.
    pub fn natives(&self) -> Vec<String> {
        let held_back = read(&self.held_back);
        read(&self.slots)
            .iter()
            .filter(|(name, slot)| {
                slot.native && slot.runner.is_some() && !held_back.contains_key(*name)
            })
            .map(|(name, _)| name.clone())
            .collect()
    }

    pub(crate) fn is_native(&self, name: &str) -> bool {
        read(&self.slots).get(name).is_some_and(|s| s.native)
    }

    /// Installed and neither disabled nor held back: its requests, jobs and tools run.
    pub(crate) fn is_serving(&self, name: &str) -> bool {
        self.runner_of(name).is_some() && self.off(name).is_none()
    }

    fn errors(&self, name: &str) -> u64 {
        self.registry().get(name).map_or(0, |e| e.error_count)
    }
}
