//! What the registry says of a component while it loads and when it cannot be loaded: states
//! of components only, kept on this side of the supervisor, which keeps their place (their
//! requests get 503 with the reason, not 404).

use service_contract::{AdapterEntry, AdapterKind, AdapterPhase, AdapterStatus, FailureKind};

use crate::adapters::Supervisor;

/// A component being compiled: its entry is `stopped` in phase `loading`, and its routes answer 503 until it is
/// installed (a generation already serving keeps serving).
pub(super) fn loading(supervisor: &Supervisor, name: &str) {
    let refusal = format!("the {name} adapter is loading; try again shortly");
    if !supervisor.keep_place(name, refusal) {
        return;
    }
    let registry = supervisor.registry();
    let mut entry = registry
        .get(name)
        .unwrap_or_else(|| AdapterEntry::new(name, AdapterKind::Wasm));
    entry.status = AdapterStatus::Stopped;
    entry.phase = Some(AdapterPhase::Loading);
    registry.insert(entry);
}

/// A component that could not be loaded: the entry records why; a generation already serving
/// keeps serving, and a native adapter of that name keeps running.
pub(crate) fn load_failed(supervisor: &Supervisor, name: &str, message: &str) {
    tracing::warn!(adapter = %name, "cannot load component: {message}");
    let registry = supervisor.registry();
    if supervisor.is_native(name) {
        registry.note_error(name, FailureKind::LoadError, message);
        return;
    }
    supervisor.keep_place(
        name,
        format!("the {name} adapter is not installed; its entry in /api/adapters says why"),
    );
    let mut entry = registry
        .get(name)
        .unwrap_or_else(|| AdapterEntry::new(name, AdapterKind::Wasm));
    entry.phase = None;
    registry.insert(entry);
    registry.mark_error(name, FailureKind::LoadError, message);
}
