//! The adapter registry (spec 2.5, 3.2): one entry per discovered adapter, with its live status.
//! Mutators are no-ops for unknown names, so an adapter can never create entries for others.

use std::collections::BTreeMap;
use std::sync::{OnceLock, PoisonError, RwLock};

use chrono::{SecondsFormat, Utc};
use serde::Serialize;

use crate::error::{ConfigProblem, FailureKind, Missing};

pub const ADAPTER_STATUS_RUNNING: &str = "running";
pub const ADAPTER_STATUS_STOPPED: &str = "stopped";
pub const ADAPTER_STATUS_ERROR: &str = "error";

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, utoipa::ToSchema)]
#[serde(rename_all = "lowercase")]
pub enum AdapterStatus {
    Running,
    Stopped,
    Error,
}

impl AdapterStatus {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Running => ADAPTER_STATUS_RUNNING,
            Self::Stopped => ADAPTER_STATUS_STOPPED,
            Self::Error => ADAPTER_STATUS_ERROR,
        }
    }
}

/// Where an adapter is on its way to serving, beside its status (which stays one of the
/// specification's three).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, utoipa::ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum AdapterPhase {
    /// A component being compiled: status `stopped`, its routes answer 503 until it serves.
    Loading,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, utoipa::ToSchema)]
#[serde(rename_all = "lowercase")]
pub enum AdapterKind {
    Native,
    Wasm,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, utoipa::ToSchema)]
pub struct AdapterEntry {
    pub name: String,
    pub kind: AdapterKind,
    pub status: AdapterStatus,
    /// UTC ISO 8601; `None` until the first activity.
    pub last_activity_at: Option<String>,
    pub error_count: u64,
    /// The most recent error as `<Type>: <message>`.
    pub error_message: Option<String>,
    /// When it happened (UTC ISO 8601).
    pub error_at: Option<String>,
    /// True when the adapter has both `start` and `stop`.
    pub supports_toggle: bool,
    pub version: Option<String>,
    /// Capabilities granted to the adapter.
    pub capabilities: Vec<String>,
    /// Why the adapter is in its state when that is not obvious (disabled by whom).
    pub note: Option<String>,
    /// `loading` while a component compiles; `null` otherwise.
    pub phase: Option<AdapterPhase>,
    /// Facts the adapter reports about itself, e.g. `auth` (its authentication scheme).
    pub metadata: BTreeMap<String, String>,
    /// Its jobs waiting to run.
    pub pending_jobs: u32,
    /// The settings it waits for (its status is then `error`, with a `ConfigError`): every
    /// variable that is not set, of every way to configure it.
    pub missing_settings: Vec<String>,
    /// When it can be configured in more than one way: each way's variables that are not set
    /// (any one way set in full will do). Empty when there is one way.
    pub missing_settings_any_of: Vec<Vec<String>>,
}

impl AdapterEntry {
    /// A new entry: stopped, no activity, no errors.
    pub fn new(name: &str, kind: AdapterKind) -> Self {
        Self {
            name: name.to_owned(),
            kind,
            status: AdapterStatus::Stopped,
            last_activity_at: None,
            error_count: 0,
            error_message: None,
            error_at: None,
            supports_toggle: false,
            version: None,
            capabilities: Vec::new(),
            note: None,
            phase: None,
            metadata: BTreeMap::new(),
            pending_jobs: 0,
            missing_settings: Vec::new(),
            missing_settings_any_of: Vec::new(),
        }
    }
}

/// The longest error message an entry keeps; longer ones are cut and marked with `…`.
pub const MAX_MESSAGE_CHARS: usize = 2_000;

/// `text`, cut to `max` characters (with a trailing `…` when cut).
pub fn clip(text: &str, max: usize) -> std::borrow::Cow<'_, str> {
    match text.char_indices().nth(max) {
        None => text.into(),
        Some((end, _)) => format!("{}…", &text[..end]).into(),
    }
}

/// Now, as entries write times (UTC ISO 8601, milliseconds).
pub fn now() -> String {
    Utc::now().to_rfc3339_opts(SecondsFormat::Millis, true)
}

#[derive(Debug, Default)]
pub struct AdapterRegistry {
    entries: RwLock<BTreeMap<String, AdapterEntry>>,
    /// Told of every error recorded on an entry, with its kind (metrics count limit hits).
    errors: OnceLock<ErrorObserver>,
}

/// Hears of errors recorded on entries: `(adapter, kind)`.
pub struct ErrorObserver(pub Box<OnError>);

pub type OnError = dyn Fn(&str, &str) + Send + Sync;

impl std::fmt::Debug for ErrorObserver {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("ErrorObserver")
    }
}

impl AdapterRegistry {
    pub fn new() -> Self {
        Self::default()
    }

    /// Sets who hears of recorded errors (once; later calls change nothing).
    pub fn observe_errors(&self, observer: ErrorObserver) {
        let _ = self.errors.set(observer);
    }

    fn observed(&self, name: &str, kind: &str) {
        if let Some(observer) = self.errors.get()
            && self.contains(name)
        {
            (observer.0)(name, kind);
        }
    }

    /// Adds (or replaces) an entry; discovery calls this.
    pub fn insert(&self, entry: AdapterEntry) {
        self.write(|entries| {
            entries.insert(entry.name.clone(), entry);
        });
    }

    /// Removes an entry (an unloaded component); returns whether it was there.
    pub fn remove(&self, name: &str) -> bool {
        let mut removed = false;
        self.write(|entries| removed = entries.remove(name).is_some());
        removed
    }

    fn write(&self, f: impl FnOnce(&mut BTreeMap<String, AdapterEntry>)) {
        f(&mut self.entries.write().unwrap_or_else(PoisonError::into_inner));
    }

    fn update(&self, name: &str, f: impl FnOnce(&mut AdapterEntry)) {
        self.write(|entries| {
            if let Some(entry) = entries.get_mut(name) {
                f(entry);
            }
        });
    }

    /// Running: the note and the settings it waited for go, and so does an error of its
    /// settings or its hooks (running says its cause is gone; the count keeps it).
    pub fn mark_running(&self, name: &str) {
        self.update(name, |e| {
            e.status = AdapterStatus::Running;
            e.note = None;
            e.phase = None;
            e.missing_settings.clear();
            e.missing_settings_any_of.clear();
            let resolved = [FailureKind::ConfigError, FailureKind::HookError];
            if e.error_message.as_deref().is_some_and(|m| {
                resolved
                    .iter()
                    .any(|kind| m.starts_with(&format!("{kind}: ")))
            }) {
                e.error_message = None;
                e.error_at = None;
            }
        });
    }

    /// Waiting for settings (spec 3.2 rule 5: a missing secret marks an error): status
    /// `error`, counted, a `ConfigError` naming every variable, and `missing_settings` listing
    /// them, which tells the dashboard it needs setting up rather than fixing.
    pub fn mark_needs_settings(&self, name: &str, missing: &Missing) {
        self.mark_error(name, FailureKind::ConfigError, &missing.to_string());
        self.update(name, |e| {
            e.missing_settings = missing.names();
            e.missing_settings_any_of = match missing {
                Missing::All(_) => Vec::new(),
                Missing::AnyOf(ways) => ways.clone(),
            };
        });
    }

    /// Records what keeps an adapter from working with its settings: missing ones, or a
    /// wrong one (both a `ConfigError`).
    pub fn report_config(&self, name: &str, problem: &ConfigProblem) {
        match problem {
            ConfigProblem::Missing(missing) => self.mark_needs_settings(name, missing),
            ConfigProblem::Invalid(message) => {
                self.mark_error(name, FailureKind::ConfigError, message);
            }
        }
    }

    /// Whether the adapter waits for settings (`missing_settings` is not empty).
    pub fn needs_settings(&self, name: &str) -> bool {
        self.get(name)
            .is_some_and(|e| !e.missing_settings.is_empty())
    }

    /// Forgets the settings it waited for (a start about to check them again).
    pub fn clear_missing_settings(&self, name: &str) {
        self.update(name, |e| {
            e.missing_settings.clear();
            e.missing_settings_any_of.clear();
        });
    }

    pub fn mark_stopped(&self, name: &str) {
        self.update(name, |e| e.status = AdapterStatus::Stopped);
    }

    /// Drops the note on why the adapter is in its state (that reason no longer holds).
    pub fn clear_note(&self, name: &str) {
        self.update(name, |e| e.note = None);
    }

    /// Stopped, with the reason (e.g. disabled by a setting).
    pub fn mark_stopped_because(&self, name: &str, note: &str) {
        self.update(name, |e| {
            e.status = AdapterStatus::Stopped;
            e.note = Some(note.to_owned());
        });
    }

    /// Records an error: status `error`, one more in the count, message `<kind>: <message>`
    /// (at most [`MAX_MESSAGE_CHARS`] characters of it, so an entry stays small whatever an
    /// adapter reports).
    pub fn mark_error(&self, name: &str, kind: impl AsRef<str>, message: &str) {
        let kind = kind.as_ref();
        self.observed(name, kind);
        let message = clip(message, MAX_MESSAGE_CHARS);
        self.update(name, |e| {
            e.status = AdapterStatus::Error;
            e.error_count += 1;
            e.error_message = Some(format!("{kind}: {message}"));
            e.error_at = Some(now());
        });
    }

    /// Records an error that is not the adapter's state (a component file that tried to take
    /// a native adapter's name, say): counted and shown, the status unchanged.
    pub fn note_error(&self, name: &str, kind: impl AsRef<str>, message: &str) {
        let kind = kind.as_ref();
        self.observed(name, kind);
        let message = clip(message, MAX_MESSAGE_CHARS);
        self.update(name, |e| {
            e.error_count += 1;
            e.error_message = Some(format!("{kind}: {message}"));
            e.error_at = Some(now());
        });
    }

    /// Sets one key of `metadata` (e.g. a count an adapter keeps of suppressed failures); the
    /// status is unchanged.
    pub fn set_metadata(&self, name: &str, key: &str, value: &str) {
        self.update(name, |e| {
            e.metadata.insert(key.to_owned(), value.to_owned());
        });
    }

    pub fn remove_metadata(&self, name: &str, key: &str) {
        self.update(name, |e| {
            e.metadata.remove(key);
        });
    }

    /// Sets how many of its jobs wait to run; the status is unchanged.
    pub fn set_pending_jobs(&self, name: &str, pending: u32) {
        self.update(name, |e| e.pending_jobs = pending);
    }

    /// Sets `last_activity_at` to now; the status is unchanged.
    pub fn touch(&self, name: &str) {
        self.update(name, |e| e.last_activity_at = Some(now()));
    }

    /// Sets `last_activity_at` to `at` (UTC ISO 8601, as [`now`] writes) unless the entry
    /// has a later one: activity remembered from before a restart.
    pub fn restore_activity(&self, name: &str, at: &str) {
        self.update(name, |e| {
            if e.last_activity_at
                .as_deref()
                .is_none_or(|current| current < at)
            {
                e.last_activity_at = Some(at.to_owned());
            }
        });
    }

    /// Whether an entry of that name exists.
    pub fn contains(&self, name: &str) -> bool {
        self.entries
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .contains_key(name)
    }

    pub fn get(&self, name: &str) -> Option<AdapterEntry> {
        self.entries
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .get(name)
            .cloned()
    }

    /// Every entry, sorted by name.
    pub fn entries(&self) -> Vec<AdapterEntry> {
        self.entries
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .values()
            .cloned()
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn follows_the_spec_state_table() {
        let registry = AdapterRegistry::new();
        registry.insert(AdapterEntry::new("webhook", AdapterKind::Wasm));
        registry.insert(AdapterEntry::new("guildchat", AdapterKind::Native));
        let fresh = registry.get("webhook").unwrap();
        assert_eq!(
            (
                fresh.status,
                fresh.last_activity_at.clone(),
                fresh.error_count
            ),
            (AdapterStatus::Stopped, None, 0)
        );

        registry.mark_running("webhook");
        registry.touch("webhook");
        let touched = registry.get("webhook").unwrap();
        assert_eq!(
            touched.status,
            AdapterStatus::Running,
            "touch keeps the status"
        );
        assert!(touched.last_activity_at.unwrap().ends_with('Z'));

        registry.mark_error("webhook", "Trap", "wasm trap: unreachable");
        registry.mark_error("webhook", "Timeout", "handle-http took longer than 2.5 s");
        let failed = registry.get("webhook").unwrap();
        assert_eq!(failed.status, AdapterStatus::Error);
        assert_eq!(failed.error_count, 2);
        assert_eq!(
            failed.error_message.as_deref(),
            Some("Timeout: handle-http took longer than 2.5 s")
        );

        let long = "x".repeat(MAX_MESSAGE_CHARS * 10);
        registry.mark_error("webhook", "AdapterError", &long);
        let kept = registry.get("webhook").unwrap().error_message.unwrap();
        assert_eq!(
            kept.chars().count(),
            "AdapterError: ".len() + MAX_MESSAGE_CHARS + 1
        );
        assert!(kept.ends_with('…'));

        // Waiting for settings is an error of the spec's three statuses, counted and named;
        // running again clears the error of its settings, not others.
        let secret = "SERVICE_WEBHOOK_SECRET".to_owned();
        registry.mark_needs_settings("webhook", &Missing::All(vec![secret.clone()]));
        let waiting = registry.get("webhook").unwrap();
        assert_eq!(
            (
                waiting.status,
                waiting.error_count,
                waiting.error_message.as_deref(),
                waiting.missing_settings
            ),
            (
                AdapterStatus::Error,
                4,
                Some("ConfigError: SERVICE_WEBHOOK_SECRET is not set"),
                vec![secret.clone()]
            )
        );
        assert!(registry.needs_settings("webhook"));
        registry.mark_running("webhook");
        let resolved = registry.get("webhook").unwrap();
        assert_eq!(
            (
                resolved.error_message,
                resolved.missing_settings,
                resolved.error_count
            ),
            (None, Vec::<String>::new(), 4)
        );
        registry.mark_error("webhook", "Trap", "wasm trap: unreachable");
        registry.mark_running("webhook");
        assert!(
            registry.get("webhook").unwrap().error_message.is_some(),
            "an error of another kind stays"
        );
        registry.report_config("webhook", &ConfigProblem::Invalid("bad URL".into()));
        assert_eq!(
            registry.get("webhook").unwrap().error_message.as_deref(),
            Some("ConfigError: bad URL")
        );
        registry.mark_running("webhook");
        let resolved = registry.get("webhook").unwrap();
        assert_eq!(
            (
                resolved.error_message,
                resolved.error_at,
                resolved.error_count
            ),
            (None, None, 6)
        );

        // Two ways to configure it: both listed, grouped.
        let ways = vec![
            vec!["A_URL".to_owned(), "A_USER".to_owned()],
            vec!["B_TOKEN".to_owned()],
        ];
        registry.mark_needs_settings("webhook", &Missing::AnyOf(ways.clone()));
        let waiting = registry.get("webhook").unwrap();
        assert_eq!(
            (waiting.missing_settings, waiting.missing_settings_any_of),
            (
                vec![
                    "A_URL".to_owned(),
                    "A_USER".to_owned(),
                    "B_TOKEN".to_owned()
                ],
                ways
            )
        );
        assert_eq!(
            waiting.error_message.as_deref(),
            Some(
                "ConfigError: A_URL and A_USER are not set; or B_TOKEN is not set \
                 (any one of these ways will do)"
            )
        );

        // Unknown names change nothing and create nothing.
        registry.mark_error("ghost", "X", "y");
        registry.touch("ghost");
        assert!(registry.get("ghost").is_none());
        let names: Vec<String> = registry.entries().into_iter().map(|e| e.name).collect();
        assert_eq!(names, ["guildchat", "webhook"], "sorted by name");
        assert!(registry.remove("webhook") && !registry.remove("webhook"));
    }

    #[test]
    fn set_metadata_keeps_the_status_and_ignores_unknown_names() {
        let registry = AdapterRegistry::new();
        let mut entry = AdapterEntry::new("guildchat", AdapterKind::Native);
        entry.metadata.insert("auth".to_owned(), "token".to_owned());
        registry.insert(entry);
        registry.mark_running("guildchat");

        registry.set_metadata("guildchat", "send_failures", "1");
        registry.set_metadata("guildchat", "send_failures", "2");
        let entry = registry.get("guildchat").unwrap();
        assert_eq!(entry.status, AdapterStatus::Running);
        assert_eq!(entry.error_count, 0);
        assert_eq!(
            entry.metadata.get("send_failures").map(String::as_str),
            Some("2")
        );
        assert_eq!(
            entry.metadata.get("auth").map(String::as_str),
            Some("token"),
            "other keys are kept"
        );

        registry.set_metadata("ghost", "k", "v");
        assert!(registry.get("ghost").is_none());
    }
}
