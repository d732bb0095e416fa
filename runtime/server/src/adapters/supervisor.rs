//! One owner of every adapter's lifecycle, native or component: the registry entries, the
//! operator's enable/disable choices (kept across restarts), start and stop (in order, under
//! one lock, with deadlines; a hook that fails, panics or hangs is recorded on that adapter's
//! entry and never stops the others), toggles, and request dispatch. Kind is data here (what
//! a [`Managed`] says of itself), never a branch.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::panic::AssertUnwindSafe;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, PoisonError, RwLock};
use std::time::Duration;

use futures_util::FutureExt;
use futures_util::future::BoxFuture;
use service_contract::{
    Adapter, AdapterContext, AdapterEntry, AdapterError, AdapterKind, AdapterRegistry,
    AdapterStatus, FailureKind, HttpRequest, HttpResponse,
};

use super::managed::{CallError, Managed};
use super::native::{Native, panic_message};
use super::response;
use super::toggles;
use crate::db::Db;
use crate::error::Error;

/// How long `start` and `stop` may take.
pub const START_LIMIT: Duration = Duration::from_secs(10);
pub const STOP_LIMIT: Duration = Duration::from_secs(5);

const DISABLED: &str = "disabled from the dashboard";
const LOADING: &str = "loading";

/// Why a toggle was refused or failed.
#[derive(Debug, thiserror::Error)]
pub enum ToggleError {
    #[error("no adapter named {0:?}")]
    Unknown(String),
    #[error("adapter {0:?} is not installed; its entry in /api/adapters says why")]
    NotInstalled(String),
    #[error("adapter {0:?} cannot be enabled or disabled: it has no start and stop")]
    NotToggleable(String),
    #[error("adapter {name:?} is held back: {reason}")]
    HeldBack { name: String, reason: String },
    #[error("{0}")]
    HookFailed(AdapterError),
    #[error(transparent)]
    Internal(#[from] Error),
}

/// Why a request was not answered by its adapter: the status and what the client is told.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refusal {
    pub status: u16,
    pub message: String,
}

impl Refusal {
    fn new(status: u16, message: impl Into<String>) -> Self {
        Self {
            status,
            message: message.into(),
        }
    }
}

/// Whether a toggle is this replica's operator's choice (kept) or another replica's (followed).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Choice {
    Made,
    Followed,
}

struct Slot {
    /// `None` while it loads, or when it could not be loaded.
    runner: Option<Arc<dyn Managed>>,
    native: bool,
    /// While it runs: when it was started (a sequence number, for the stop order).
    started: Option<u64>,
}

pub struct Supervisor {
    context: Arc<AdapterContext>,
    db: Db,
    slots: RwLock<BTreeMap<String, Slot>>,
    /// The operator's choice.
    disabled: RwLock<HashSet<String>>,
    /// Kept from starting by a setting, with the reason.
    held_back: RwLock<HashMap<String, String>>,
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

    /// Reads the operator's choices; call it before anything starts.
    pub async fn load_choices(&self) -> crate::error::Result<()> {
        let disabled = toggles::disabled(&self.db).await?;
        write(&self.disabled).extend(disabled);
        Ok(())
    }

    /// Keeps an adapter from starting, with the reason its entry shows.
    pub fn hold_back(&self, name: &str, reason: &str) {
        write(&self.held_back).insert(name.to_owned(), reason.to_owned());
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
    pub fn runner<T: Managed>(&self, name: &str) -> Option<Arc<T>> {
        let runner: Arc<dyn std::any::Any + Send + Sync> = self.runner_of(name)?;
        runner.downcast::<T>().ok()
    }

    /// Every runner of type `T`, by name.
    pub fn runners<T: Managed>(&self) -> Vec<Arc<T>> {
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

    /// Another replica runs native `name` (or this one cannot tell that it does): it stops
    /// here, and its entry says why.
    pub async fn stand_by(&self, name: &str, reason: &str) {
        let _lifecycle = self.lifecycle.lock().await;
        write(&self.standby).insert(name.to_owned(), reason.to_owned());
        let slot = read(&self.slots)
            .get(name)
            .and_then(|s| Some((s.runner.clone()?, s.started.is_some())));
        if let Some((runner, true)) = slot {
            let _ = self.stop(name, runner.as_ref()).await;
        }
        if let Some(reason) = self.off(name) {
            self.registry().mark_stopped_because(name, &reason);
        }
    }

    /// This replica runs native `name` now: it starts here, unless it is off for another
    /// reason.
    pub async fn take_over(&self, name: &str) {
        let _lifecycle = self.lifecycle.lock().await;
        if write(&self.standby).remove(name).is_none() {
            return;
        }
        let slot = read(&self.slots)
            .get(name)
            .and_then(|s| Some((s.runner.clone()?, s.started.is_some())));
        match (slot, self.off(name)) {
            (Some((runner, false)), None) => {
                // The standby note goes; a failed start records its own error.
                self.registry().clear_note(name);
                drop(self.start(name, runner.as_ref()).await);
            }
            (Some(_), Some(reason)) => self.registry().mark_stopped_because(name, &reason),
            _ => {}
        }
    }

    pub fn is_native(&self, name: &str) -> bool {
        read(&self.slots).get(name).is_some_and(|s| s.native)
    }

    /// Installed and neither disabled nor held back: its requests, jobs and tools run.
    pub fn is_serving(&self, name: &str) -> bool {
        self.runner_of(name).is_some() && self.off(name).is_none()
    }

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
            },
        );
    }

    /// Starts every native adapter that is not off, in name order.
    pub async fn start_natives(&self) {
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
    }

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
    fn publish(&self, runner: &dyn Managed) {
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

    /// Runs `start`: running when it succeeds without recording a problem (an adapter that
    /// finds a setting missing records it and returns, spec 3.2 rule 5).
    async fn start(&self, name: &str, runner: &dyn Managed) -> Result<(), AdapterError> {
        let errors_before = self.errors(name);
        self.hook(name, runner.start(), self.start_limit).await?;
        if let Some(slot) = write(&self.slots).get_mut(name) {
            slot.started = Some(self.starts.fetch_add(1, Ordering::Relaxed));
        }
        if self.errors(name) != errors_before {
            let entry = self.registry().get(name);
            let message = entry.and_then(|e| e.error_message).unwrap_or_default();
            return Err(AdapterError::config(message));
        }
        self.registry().mark_running(name);
        if let Some(problem) = runner.config_problem() {
            self.registry()
                .mark_error(name, FailureKind::ConfigError, &problem);
        }
        self.serving.notify_one();
        Ok(())
    }

    async fn stop(&self, name: &str, runner: &dyn Managed) -> Result<(), AdapterError> {
        let stopped = self.hook(name, runner.stop(), self.stop_limit).await;
        if let Some(slot) = write(&self.slots).get_mut(name) {
            slot.started = None;
        }
        stopped
    }

    fn errors(&self, name: &str) -> u64 {
        self.registry().get(name).map_or(0, |e| e.error_count)
    }

    /// Awaits a hook within `limit`, turning an error, a panic or a timeout into a registry
    /// error.
    async fn hook(
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

    /// Settings changed: every serving adapter whose entry reports a configuration problem
    /// looks again. A native adapter is started again (it reads its settings when it starts);
    /// a component's required secrets are checked anew. An entry whose problem is gone is
    /// `running` again.
    pub async fn recheck(&self) {
        let _lifecycle = self.lifecycle.lock().await;
        let slots: Vec<(String, Arc<dyn Managed>, bool, bool)> = read(&self.slots)
            .iter()
            .filter_map(|(name, s)| {
                Some((
                    name.clone(),
                    s.runner.clone()?,
                    s.native,
                    s.started.is_some(),
                ))
            })
            .collect();
        for (name, runner, native, started) in slots {
            let config_error = self.registry().get(&name).is_some_and(|e| {
                e.status == AdapterStatus::Error
                    && e.error_message
                        .is_some_and(|m| m.starts_with(FailureKind::ConfigError.as_str()))
            });
            if !config_error || self.off(&name).is_some() {
                continue;
            }
            if native {
                if started {
                    let _ = self.stop(&name, runner.as_ref()).await;
                }
                let _ = self.start(&name, runner.as_ref()).await;
                continue;
            }
            match runner.config_problem() {
                None => self.registry().mark_running(&name),
                Some(problem) => {
                    let current = format!("{}: {problem}", FailureKind::ConfigError);
                    if self.registry().get(&name).and_then(|e| e.error_message) != Some(current) {
                        self.registry()
                            .mark_error(&name, FailureKind::ConfigError, &problem);
                    }
                }
            }
        }
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
    pub async fn stop_all(&self) {
        let _lifecycle = self.lifecycle.lock().await;
        let mut running: Vec<(u64, String, Arc<dyn Managed>)> = read(&self.slots)
            .iter()
            .filter_map(|(name, slot)| Some((slot.started?, name.clone(), slot.runner.clone()?)))
            .collect();
        running.sort_by_key(|(started, _, _)| std::cmp::Reverse(*started));
        for (_, name, runner) in running {
            if self.stop(&name, runner.as_ref()).await.is_ok() {
                self.registry().mark_stopped(&name);
            }
        }
    }

    async fn set_disabled(&self, name: &str, disabled: bool, choice: Choice) {
        {
            let mut set = write(&self.disabled);
            if disabled {
                set.insert(name.to_owned());
            } else {
                set.remove(name);
            }
        }
        if choice == Choice::Made
            && let Err(e) = toggles::remember(&self.db, name, !disabled).await
        {
            tracing::warn!(adapter = %name, "cannot remember the toggle: {e}");
        }
    }

    /// Enables (runs `start`) or disables (runs `stop`) an adapter; the choice is kept across
    /// restarts. Disabling always takes effect (a failing `stop` is recorded); an enable
    /// whose `start` fails leaves the adapter disabled and says why.
    pub async fn toggle(&self, name: &str, enable: bool) -> Result<AdapterEntry, ToggleError> {
        self.apply(name, enable, Choice::Made).await
    }

    /// Follows a choice another replica's operator made (already kept in the database).
    pub async fn follow(&self, name: &str, enable: bool) {
        if let Err(e) = self.apply(name, enable, Choice::Followed).await {
            tracing::warn!(adapter = %name, "cannot follow another replica's toggle: {e}");
        }
    }

    /// Re-reads the operator's choices and follows those that changed (after notifications
    /// from other replicas may have been missed).
    pub async fn reload_choices(&self) -> crate::error::Result<()> {
        let disabled: HashSet<String> = toggles::disabled(&self.db).await?.into_iter().collect();
        let names: Vec<String> = read(&self.slots).keys().cloned().collect();
        for name in names {
            let now = disabled.contains(&name);
            if now != read(&self.disabled).contains(&name) {
                self.follow(&name, !now).await;
            }
        }
        Ok(())
    }

    async fn apply(
        &self,
        name: &str,
        enable: bool,
        choice: Choice,
    ) -> Result<AdapterEntry, ToggleError> {
        let _lifecycle = self.lifecycle.lock().await;
        let slot = read(&self.slots)
            .get(name)
            .map(|s| (s.runner.clone(), s.started.is_some()));
        let (runner, started) = slot.ok_or_else(|| ToggleError::Unknown(name.to_owned()))?;
        let runner = runner.ok_or_else(|| ToggleError::NotInstalled(name.to_owned()))?;
        if !runner.toggleable() {
            return Err(ToggleError::NotToggleable(name.to_owned()));
        }
        if let Some(reason) = read(&self.held_back).get(name) {
            return Err(ToggleError::HeldBack {
                name: name.to_owned(),
                reason: reason.clone(),
            });
        }
        let disabled = read(&self.disabled).contains(name);
        let status = self.registry().get(name).map(|e| e.status);
        if read(&self.standby).contains_key(name) {
            // The replica that runs it starts or stops it when it hears of the choice.
            self.set_disabled(name, !enable, choice).await;
            if let Some(reason) = self.off(name) {
                self.registry().mark_stopped_because(name, &reason);
            }
        } else if enable {
            // Running already: no hook runs twice (a second gateway connection, say).
            if !(started && !disabled && status == Some(AdapterStatus::Running)) {
                if choice == Choice::Followed {
                    // Made and kept elsewhere: enabled here too, even if it fails to start
                    // (its entry says why).
                    self.set_disabled(name, false, choice).await;
                    self.registry().clear_note(name);
                }
                self.start(name, runner.as_ref())
                    .await
                    .map_err(ToggleError::HookFailed)?;
                self.set_disabled(name, false, choice).await;
                self.serving.notify_one();
            }
        } else if !disabled {
            self.set_disabled(name, true, choice).await;
            if started {
                // Recorded on the entry when it fails; disabled regardless.
                let _ = self.stop(name, runner.as_ref()).await;
            }
            self.registry().mark_stopped_because(name, DISABLED);
        }
        self.registry()
            .get(name)
            .ok_or_else(|| ToggleError::Unknown(name.to_owned()))
    }

    /// After an answer that went well (below 500, nothing recorded while it was made), an
    /// adapter whose entry says `error` from an earlier failure is `running` again: one slow
    /// request is a count on its entry, not an adapter stuck in `error`. A configuration
    /// problem it still has keeps it in `error`.
    fn recovered(
        &self,
        name: &str,
        runner: &dyn Managed,
        answer: &HttpResponse,
        errors_before: u64,
    ) {
        let in_error = self
            .registry()
            .get(name)
            .is_some_and(|e| e.status == AdapterStatus::Error);
        if in_error
            && answer.status < 500
            && self.errors(name) == errors_before
            && runner.config_problem().is_none()
        {
            self.registry().mark_running(name);
        }
    }

    /// Answers a request to `/api/adapters/<name>/...`.
    pub async fn dispatch(
        &self,
        name: &str,
        request: HttpRequest,
    ) -> Result<HttpResponse, Refusal> {
        let slot = read(&self.slots).get(name).map(|s| s.runner.clone());
        let Some(runner) =
            slot.ok_or_else(|| Refusal::new(404, format!("no adapter named {name:?}")))?
        else {
            let loading = self
                .registry()
                .get(name)
                .is_some_and(|e| e.note.as_deref() == Some(LOADING));
            return Err(Refusal::new(
                503,
                match loading {
                    true => format!("the {name} adapter is loading; try again shortly"),
                    false => format!(
                        "the {name} adapter is not installed; its entry in /api/adapters says why"
                    ),
                },
            ));
        };
        if let Some(reason) = self.off(name) {
            return Err(Refusal::new(
                503,
                format!("adapter {name:?} is off: {reason}"),
            ));
        }
        let errors_before = self.errors(name);
        let failure = match runner.handle_http(request).await {
            Ok(answer) => match response::check(&answer) {
                Ok(()) => {
                    // Activity is what it handled, not what it turned away.
                    if answer.status < 400 {
                        self.registry().touch(name);
                    }
                    self.recovered(name, runner.as_ref(), &answer, errors_before);
                    return Ok(answer);
                }
                Err(problem) => AdapterError::new(FailureKind::BadResponse, problem),
            },
            Err(CallError::Busy(message)) => return Err(Refusal::new(503, message)),
            Err(CallError::Failed(failure)) => failure,
        };
        self.registry()
            .mark_error(name, &failure.kind, &failure.message);
        let status = if failure.is(FailureKind::Timeout) {
            503
        } else if failure.is(FailureKind::BadResponse) {
            502
        } else {
            500
        };
        Err(Refusal::new(
            status,
            format!(
                "adapter {name:?} failed ({}); its entry in /api/adapters has the details",
                failure.kind
            ),
        ))
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Mutex as StdMutex;

    use axum::body::Body;
    use axum::extract::ConnectInfo;
    use tower::ServiceExt;

    use futures_util::FutureExt;
    use service_contract::{Hook, Routes};

    use super::*;
    use crate::app::App;
    use crate::http::{AppState, guards::Binding, router};

    /// A supervisor of these native adapters, on a fresh data directory.
    fn supervise(
        app: &App,
        natives: Vec<Arc<dyn Adapter>>,
        limits: Option<Duration>,
    ) -> Arc<Supervisor> {
        let mut supervisor = Supervisor::new(
            Arc::clone(app.supervisor.context()),
            app.db.clone(),
            Arc::default(),
        );
        if let Some(limit) = limits {
            supervisor = supervisor.with_limits(limit, limit);
        }
        for native in natives {
            supervisor.add_native(native);
        }
        Arc::new(supervisor)
    }

    /// An adapter whose start does what `behaviour` says, and which logs its hooks.
    struct Fake {
        name: &'static str,
        behaviour: &'static str,
        log: Arc<StdMutex<Vec<String>>>,
    }

    impl Adapter for Fake {
        fn name(&self) -> &str {
            self.name
        }

        fn start<'a>(&'a self, ctx: &'a Arc<AdapterContext>) -> Option<Hook<'a>> {
            Some(
                async move {
                    self.log
                        .lock()
                        .unwrap()
                        .push(format!("start {}", self.name));
                    match self.behaviour {
                        "fail" => Err(AdapterError::new("IoError", "port in use")),
                        "panic" => panic!("boom in start"),
                        "hang" => std::future::pending().await,
                        "no-secret" => {
                            ctx.registry.mark_error(
                                self.name,
                                "ConfigError",
                                "SERVICE_X_TOKEN is not set",
                            );
                            Ok(())
                        }
                        _ => Ok(()),
                    }
                }
                .boxed(),
            )
        }

        fn stop(&self) -> Option<Hook<'_>> {
            (self.behaviour != "start-only").then(|| {
                async move {
                    self.log.lock().unwrap().push(format!("stop {}", self.name));
                    Ok(())
                }
                .boxed()
            })
        }
    }

    #[tokio::test]
    async fn failures_are_contained_and_recorded() {
        let tmp = tempfile::tempdir().unwrap();
        let app = App::open(tmp.path(), crate::app::Role::Server)
            .await
            .unwrap();
        let log = Arc::new(StdMutex::new(Vec::new()));
        let fake = |name, behaviour| {
            Arc::new(Fake {
                name,
                behaviour,
                log: Arc::clone(&log),
            }) as Arc<dyn Adapter>
        };
        let adapters = supervise(
            &app,
            vec![
                fake("e-hang", "hang"),
                fake("a-good", "ok"),
                fake("c-panic", "panic"),
                fake("b-fail", "fail"),
                fake("d-config", "no-secret"),
                fake("f-half", "start-only"),
            ],
            Some(Duration::from_millis(200)),
        );
        adapters.start_natives().await;

        let entry = |name: &str| adapters.registry().get(name).unwrap();
        assert_eq!(entry("a-good").status, AdapterStatus::Running);
        assert_eq!(
            entry("b-fail").error_message.as_deref(),
            Some("IoError: port in use")
        );
        assert_eq!(
            entry("c-panic").error_message.as_deref(),
            Some("Panic: boom in start")
        );
        assert!(
            entry("e-hang")
                .error_message
                .unwrap()
                .starts_with("Timeout:")
        );
        let config = entry("d-config");
        assert_eq!(
            (config.status, config.error_count),
            (AdapterStatus::Error, 1),
            "not marked running over its own error"
        );
        assert_eq!(entry("f-half").status, AdapterStatus::Running);
        assert!(!entry("f-half").supports_toggle && entry("a-good").supports_toggle);
        assert!(matches!(
            adapters.toggle("f-half", false).await,
            Err(ToggleError::NotToggleable(_))
        ));

        log.lock().unwrap().clear();
        adapters.stop_all().await;
        let stops: Vec<String> = log.lock().unwrap().clone();
        // Those whose start failed never ran, so nothing stops them.
        assert_eq!(stops, ["stop d-config", "stop a-good"], "reverse order");
    }

    /// Mounts `GET /ping` and a route that panics, and counts its starts.
    #[derive(Default)]
    struct Pinger {
        starts: std::sync::atomic::AtomicUsize,
    }

    impl Adapter for Pinger {
        fn name(&self) -> &str {
            "pinger"
        }

        fn bind(
            &self,
            routes: &mut Routes,
            _ctx: &Arc<AdapterContext>,
        ) -> Result<(), AdapterError> {
            routes.add("GET", "/boom", |_: HttpRequest| async move {
                panic!("the route fell over")
            })?;
            routes.add("GET", "/ping", |request: HttpRequest| async move {
                HttpResponse {
                    status: 200,
                    headers: vec![("x-query".into(), request.query)],
                    body: b"pong".to_vec(),
                }
            })
        }

        fn start<'a>(&'a self, _ctx: &'a Arc<AdapterContext>) -> Option<Hook<'a>> {
            Some(
                async move {
                    self.starts
                        .fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                    Ok(())
                }
                .boxed(),
            )
        }

        fn stop(&self) -> Option<Hook<'_>> {
            Some(async { Ok(()) }.boxed())
        }
    }

    #[tokio::test]
    async fn native_routes_are_served_under_the_adapters_prefix() {
        let tmp = tempfile::tempdir().unwrap();
        let app = App::open(tmp.path(), crate::app::Role::Server)
            .await
            .unwrap();
        let pinger = Arc::new(Pinger::default());
        let adapters = supervise(&app, vec![Arc::clone(&pinger) as Arc<dyn Adapter>], None);
        adapters.start_natives().await;
        let mut state = AppState::new(&app).unwrap();
        state.adapters = Arc::clone(&adapters);
        let service = router(state, Binding { loopback: true }, Default::default());
        let call = |method: &str, path: &str| {
            let request = axum::http::Request::builder()
                .method(method)
                .uri(path)
                .header("host", "127.0.0.1")
                .extension(ConnectInfo(std::net::SocketAddr::from((
                    [127, 0, 0, 1],
                    4000,
                ))))
                .body(Body::empty())
                .unwrap();
            let service = service.clone();
            async move {
                let response = service.oneshot(request).await.unwrap();
                let status = response.status().as_u16();
                let query = response
                    .headers()
                    .get("x-query")
                    .map(|v| v.to_str().unwrap().to_owned());
                let body = axum::body::to_bytes(response.into_body(), 1 << 16)
                    .await
                    .unwrap();
                (status, query, String::from_utf8(body.to_vec()).unwrap())
            }
        };

        let (status, query, body) = call("GET", "/api/adapters/pinger/ping?n=1").await;
        assert_eq!(
            (status, query.as_deref(), body.as_str()),
            (200, Some("n=1"), "pong")
        );
        assert!(
            adapters
                .registry()
                .get("pinger")
                .unwrap()
                .last_activity_at
                .is_some()
        );
        let (status, _, body) = call("POST", "/api/adapters/pinger/ping").await;
        assert_eq!(status, 405, "{body}");
        assert!(body.contains("POST /ping is served for GET only"), "{body}");
        let (status, _, body) = call("GET", "/api/adapters/pinger/nowhere").await;
        assert_eq!(status, 404, "{body}");
        assert!(body.contains("no route GET /nowhere"), "{body}");

        let (status, _, body) = call("GET", "/api/adapters/pinger/boom").await;
        assert_eq!(status, 500, "{body}");
        assert!(
            !body.contains("fell over"),
            "details stay on the entry: {body}"
        );
        let entry = adapters.registry().get("pinger").unwrap();
        assert_eq!(
            entry.error_message.as_deref(),
            Some("Panic: the route fell over")
        );

        adapters.toggle("pinger", false).await.unwrap();
        let (status, _, body) = call("GET", "/api/adapters/pinger/ping").await;
        assert_eq!(status, 503, "{body}");
        adapters.toggle("pinger", true).await.unwrap();
        assert_eq!(call("GET", "/api/adapters/pinger/ping").await.0, 200);
        // Enabling what runs starts nothing twice: one start at boot, one enable.
        adapters.toggle("pinger", true).await.unwrap();
        assert_eq!(pinger.starts.load(std::sync::atomic::Ordering::SeqCst), 2);
        assert_eq!(call("GET", "/api/adapters/nobody/ping").await.0, 404);
    }
}
