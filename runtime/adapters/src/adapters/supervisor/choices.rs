//! Why an adapter is off, and turning it on and off: the operator's choices (kept across
//! restarts, followed from other replicas), settings that hold one back, and another replica
//! running a native one.

use std::collections::HashSet;

use futures_util::future::BoxFuture;
use service_contract::{AdapterEntry, AdapterError, AdapterStatus};

use super::{DISABLED, Supervisor, read, write};
use crate::adapters::{activity, toggles};
use crate::error::Error;

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
    #[error("adapter {name:?} is not configured: set {settings}")]
    Unconfigured { name: String, settings: String },
    #[error(transparent)]
    Internal(#[from] Error),
}

/// Whether a toggle is this replica's operator's choice (kept) or another replica's (followed).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Choice {
    Made,
    Followed,
}

impl Supervisor {
    /// Reads the operator's choices, and the activity kept from before; call it before
    /// anything starts.
    pub fn load_choices(&self) -> BoxFuture<'_, crate::error::Result<()>> {
        Box::pin(async move {
            let disabled = toggles::disabled(&self.db).await?;
            write(&self.disabled).extend(disabled);
            let activity = activity::load(&self.db).await?;
            for (name, at) in &activity {
                self.registry().restore_activity(name, at);
            }
            *write(&self.activity) = activity;
            Ok(())
        })
    }

    /// Keeps an adapter from starting, with the reason its entry shows.
    pub fn hold_back(&self, name: &str, reason: &str) {
        write(&self.held_back).insert(name.to_owned(), reason.to_owned());
    }

    /// Another replica runs native `name` (or this one cannot tell that it does): it stops
    /// here, and its entry says why.
    pub(crate) async fn stand_by(&self, name: &str, reason: &str) {
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
    pub(crate) async fn take_over(&self, name: &str) {
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

    pub(super) async fn set_disabled(&self, name: &str, disabled: bool, choice: Choice) {
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
                if choice == Choice::Made
                    && let Some(entry) = self.registry().get(name)
                    && !entry.missing_settings.is_empty()
                {
                    if disabled {
                        // Left as it was: off, its entry listing what it waits for.
                        let _ = self.stop(name, runner.as_ref()).await;
                        self.registry().mark_stopped_because(name, DISABLED);
                    }
                    let ways = match entry.missing_settings_any_of.as_slice() {
                        [] => vec![entry.missing_settings],
                        ways => ways.to_vec(),
                    };
                    let ways: Vec<String> = ways.iter().map(|way| way.join(", ")).collect();
                    return Err(ToggleError::Unconfigured {
                        name: name.to_owned(),
                        settings: ways.join("; or "),
                    });
                }
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
}
