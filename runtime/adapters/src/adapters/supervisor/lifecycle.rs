//! Installing, starting and stopping adapters: one lock, deadlines, failures on the entry.

use std::collections::BTreeSet;
use std::panic::AssertUnwindSafe;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use futures_util::FutureExt;
use futures_util::future::BoxFuture;
use service_contract::{
    Adapter, AdapterEntry, AdapterError, AdapterKind, AdapterStatus, FailureKind,
};

use super::choices::Choice;
use super::{Slot, Supervisor, read, write};
use crate::adapters::managed::Managed;
use crate::adapters::native::{Native, panic_message};

impl Supervisor {
    /// Registers a native adapter (it mounts its routes now) as a `stopped` entry; it starts
    /// with [`Supervisor::start_natives`].
    pub fn add_native(&self, adapter: Arc<dyn Adapter>) {
        let name = adapter.name().to_owned();
        let mut entry = AdapterEntry::new(&name, AdapterKind::Native);
        let runner = match Native::bind(adapter, Arc::clone(&self.context)) {
            Ok(native) => {
                native.describe(&mut entry);
                Some(Arc::new(native) as Arc<dyn Managed>)
            }
            Err(e) => {
                entry.status = AdapterStatus::Error;
                entry.error_count = 1;
                entry.error_message = Some(e.to_string());
                entry.error_at = Some(service_contract::registry::now());
                None
            }
        };
        self.registry().insert(entry);
        write(&self.slots).insert(
            name,
            Slot {
                runner,
                native: true,
                started: None,
                vacancy: None,
            },
        );
    }

    /// Starts every native adapter that is not off, in name order.
    pub fn start_natives(&self) -> BoxFuture<'_, ()> {
        Box::pin(async move {
            let _lifecycle = self.lifecycle.lock().await;
            let natives: Vec<(String, Arc<dyn Managed>)> = read(&self.slots)
                .iter()
                .filter(|(_, slot)| slot.native)
                .filter_map(|(name, slot)| Some((name.clone(), slot.runner.clone()?)))
                .collect();
            for (name, runner) in natives {
                match self.off(&name) {
                    Some(reason) => self.registry().mark_stopped_because(&name, &reason),
                    // A failure is already on the entry; the others start regardless.
                    None => drop(self.start(&name, runner.as_ref()).await),
                }
            }
        })
    }

    /// Makes `runner` the one that serves its name: `stop` of the one it replaces, then its
    /// own `start` (unless the operator disabled it). Failures are on the entry.
    pub async fn install(&self, runner: Arc<dyn Managed>) {
        let _lifecycle = self.lifecycle.lock().await;
        let name = runner.name().to_owned();
        if !runner.toggleable() && read(&self.disabled).contains(&name) {
            // A version without start and stop could never be enabled again.
            self.set_disabled(&name, false, Choice::Made).await;
        }
        let replaced = write(&self.slots).insert(
            name.clone(),
            Slot {
                runner: Some(Arc::clone(&runner)),
                native: false,
                started: None,
                vacancy: None,
            },
        );
        self.publish(runner.as_ref());
        if let Some(Slot {
            runner: Some(old),
            started: Some(_),
            ..
        }) = replaced
        {
            let _ = self.hook(&name, old.stop(), self.stop_limit).await;
        }
        match self.off(&name) {
            Some(reason) => self.registry().mark_stopped_because(&name, &reason),
            None => drop(self.start(&name, runner.as_ref()).await),
        }
    }

    /// Runs `start`: running when it succeeds without recording a problem. An adapter that
    /// finds a setting missing records it and returns (spec 3.2 rule 5): that start succeeded,
    /// and the entry says what it waits for.
    pub(super) async fn start(&self, name: &str, runner: &dyn Managed) -> Result<(), AdapterError> {
        // Only what this start reports counts.
        self.registry().clear_missing_settings(name);
        let errors_before = self.errors(name);
        self.hook(name, runner.start(), self.start_limit).await?;
        if let Some(slot) = write(&self.slots).get_mut(name) {
            slot.started = Some(self.starts.fetch_add(1, Ordering::Relaxed));
        }
        let waits = self.registry().needs_settings(name);
        if self.errors(name) != errors_before && !waits {
            let entry = self.registry().get(name);
            let message = entry.and_then(|e| e.error_message).unwrap_or_default();
            return Err(AdapterError::config(message));
        }
        if !waits {
            self.settle(name, runner);
        }
        self.serving.notify_one();
        Ok(())
    }

    /// The entry of an adapter that started: `running`, unless its runner can tell it waits
    /// for settings or one of them is wrong.
    pub(super) fn settle(&self, name: &str, runner: &dyn Managed) {
        match runner.config_problem() {
            None => self.registry().mark_running(name),
            Some(problem) => self.registry().report_config(name, &problem),
        }
    }

    pub(super) async fn stop(&self, name: &str, runner: &dyn Managed) -> Result<(), AdapterError> {
        let stopped = self.hook(name, runner.stop(), self.stop_limit).await;
        if let Some(slot) = write(&self.slots).get_mut(name) {
            slot.started = None;
        }
        stopped
    }

    /// Awaits a hook within `limit`, turning an error, a panic or a timeout into a registry
    /// error.
    pub(super) async fn hook(
        &self,
        name: &str,
        hook: BoxFuture<'_, Result<(), AdapterError>>,
        limit: Duration,
    ) -> Result<(), AdapterError> {
        let outcome = tokio::time::timeout(limit, AssertUnwindSafe(hook).catch_unwind()).await;
        let error = match outcome {
            Ok(Ok(Ok(()))) => return Ok(()),
            Ok(Ok(Err(e))) => e,
            Ok(Err(panic)) => AdapterError::new(FailureKind::Panic, panic_message(panic.as_ref())),
            Err(_) => AdapterError::new(
                FailureKind::Timeout,
                format!("the hook did not finish within {limit:?}"),
            ),
        };
        tracing::warn!(adapter = name, "{error}");
        self.registry()
            .mark_error(name, &error.kind, &error.message);
        Err(error)
    }

    /// Settings changed: every native adapter that reads one of `changed` is stopped and
    /// started again (natives read their settings when they start). Components are reloaded
    /// by `wasm::Components`. Returns the adapters started anew.
    pub(crate) async fn restart_natives_reading(&self, changed: &BTreeSet<String>) -> Vec<String> {
        let _lifecycle = self.lifecycle.lock().await;
        let natives: Vec<(String, Arc<dyn Managed>, bool)> = read(&self.slots)
            .iter()
            .filter(|(_, s)| s.native)
            .filter_map(|(name, s)| Some((name.clone(), s.runner.clone()?, s.started.is_some())))
            .collect();
        let mut restarted = Vec::new();
        for (name, runner, started) in natives {
            let reads = runner.settings().iter().any(|s| changed.contains(s));
            if !reads || self.off(&name).is_some() {
                continue;
            }
            if started {
                let _ = self.stop(&name, runner.as_ref()).await;
            }
            let _ = self.start(&name, runner.as_ref()).await;
            restarted.push(name);
        }
        restarted
    }

    /// Unloads a component: its `stop`, its slot and its entry.
    pub async fn remove(&self, name: &str) {
        let _lifecycle = self.lifecycle.lock().await;
        if self.is_native(name) {
            return;
        }
        let removed = write(&self.slots).remove(name);
        if let Some(Slot {
            runner: Some(runner),
            started: Some(_),
            ..
        }) = &removed
        {
            let _ = self.hook(name, runner.stop(), self.stop_limit).await;
        }
        if removed.is_some() {
            self.registry().remove(name);
        }
    }

    /// Stops every running adapter, the last started first (shutdown).
    pub fn stop_all(&self) -> BoxFuture<'_, ()> {
        Box::pin(async move {
            let _lifecycle = self.lifecycle.lock().await;
            let mut running: Vec<(u64, String, Arc<dyn Managed>)> = read(&self.slots)
                .iter()
                .filter_map(|(name, slot)| {
                    Some((slot.started?, name.clone(), slot.runner.clone()?))
                })
                .collect();
            running.sort_by_key(|(started, _, _)| std::cmp::Reverse(*started));
            for (_, name, runner) in running {
                if self.stop(&name, runner.as_ref()).await.is_ok() {
                    self.registry().mark_stopped(&name);
                }
            }
        })
    }
}
