//! The loop that hot-reloads what changes in the adapters folder (`folder` says what is in
//! it). File-system
//! notifications wake the loop the moment a file is complete (closed after writing, or renamed
//! into place); a slow poll is the safety net for a missed one. Where notifications are not
//! available (or `SERVICE_WATCH_POLL=true`, for network file systems that never send them),
//! the folder is polled instead, and a changed file is loaded only once it stopped changing.
//! Either way the loader never reads a file still being written.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use futures_util::future::BoxFuture;
use notify::event::{AccessKind, AccessMode, EventKind, ModifyKind};
use notify::{RecommendedWatcher, RecursiveMode, Watcher};
use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;

use super::components::Components;
use super::folder::{Files, Stamp, adapter_of, scan};

/// How often the folder is scanned without notifications, and while a file is being written.
pub(crate) const POLL: Duration = Duration::from_millis(500);
/// How often the folder is scanned anyway while notifications work.
pub(crate) const SAFETY_POLL: Duration = Duration::from_secs(5);
/// Polling: a changed file is looked at again this much later, and loaded only if it stayed
/// the same.
pub(crate) const SETTLE: Duration = Duration::from_millis(100);
/// Notifications: a file written to and not closed is taken as complete after this long
/// without a change (a writer that never closes it, a hard link).
pub(crate) const QUIET_LIMIT: Duration = Duration::from_secs(2);

/// Reloads what changes in the adapters folder until `stop`.
pub fn watch(components: Arc<Components>, stop: CancellationToken) -> BoxFuture<'static, ()> {
    Box::pin(async move {
        let dir = components.loader().adapters_dir().to_owned();
        let polling = components.loader().services().env.get("SERVICE_WATCH_POLL");
        if polling.as_deref() == Some("true") {
            tracing::info!(folder = %dir.display(), "watching the adapters folder by polling (SERVICE_WATCH_POLL=true)");
            return poll(&components, &dir, stop).await;
        }
        match Notifications::start(&dir) {
            Ok(notifications) => {
                tracing::info!(folder = %dir.display(), "watching the adapters folder (file-system notifications)");
                notified(&components, &dir, &notifications, stop).await;
            }
            Err(e) => {
                tracing::warn!(folder = %dir.display(), "no file-system notifications ({e}); polling the adapters folder every {POLL:?}");
                poll(&components, &dir, stop).await;
            }
        }
    })
}

/// What a notification last said about a file.
#[derive(Debug, Clone, Copy)]
enum Seen {
    /// Written to (or created), not closed since; when that was last seen.
    Writing(Instant),
    /// Closed after writing, or moved into place: complete.
    Complete,
}

/// What the notifications said: which files are being written or complete, and a wake-up for
/// the loop.
struct Notifications {
    files: Arc<Mutex<HashMap<PathBuf, Seen>>>,
    changed: Arc<Notify>,
    // Watching stops when this is dropped.
    _watcher: RecommendedWatcher,
}

impl Notifications {
    fn start(dir: &Path) -> notify::Result<Self> {
        let files: Arc<Mutex<HashMap<PathBuf, Seen>>> = Arc::default();
        let changed = Arc::new(Notify::new());
        let (noted, wake) = (Arc::clone(&files), Arc::clone(&changed));
        let mut watcher = notify::recommended_watcher(move |event| note(event, &noted, &wake))?;
        watcher.watch(dir, RecursiveMode::NonRecursive)?;
        Ok(Self {
            files,
            changed,
            _watcher: watcher,
        })
    }

    /// Adapters with a file that may still be being written: one written to and not closed
    /// since, or one modified within [`QUIET_LIMIT`] that no notification has called complete
    /// yet (a scan can see a file before its notifications arrive). Either counts as complete
    /// once it has not changed for [`QUIET_LIMIT`].
    fn unfinished(&self, dir: &Path, scanned: &BTreeMap<String, Files>) -> BTreeSet<String> {
        let files = self.files.lock().unwrap_or_else(PoisonError::into_inner);
        let writing = files.iter().filter_map(|(path, seen)| match seen {
            Seen::Writing(last) if last.elapsed() < QUIET_LIMIT => adapter_of(path),
            _ => None,
        });
        let unconfirmed = scanned.iter().filter_map(|(name, found)| {
            let fresh = |path: &Path, stamp: &Stamp| {
                !matches!(files.get(path), Some(Seen::Complete))
                    && stamp.1.elapsed().is_ok_and(|age| age < QUIET_LIMIT)
            };
            let wasm = [&found.wasm, &found.shadow]
                .into_iter()
                .flatten()
                .any(|(path, stamp)| fresh(path, stamp));
            let grant = found
                .grant
                .as_ref()
                .is_some_and(|stamp| fresh(&dir.join(format!("{name}.toml")), stamp));
            (wasm || grant).then(|| name.clone())
        });
        writing.map(|(name, _)| name).chain(unconfirmed).collect()
    }
}

/// Records what a notification says about files being written, and wakes the loop unless the
/// event only continues a write.
fn note(
    event: notify::Result<notify::Event>,
    files: &Mutex<HashMap<PathBuf, Seen>>,
    wake: &Notify,
) {
    // An error (a full event queue, say) may have hidden changes: look at the folder.
    let Ok(event) = event else {
        wake.notify_one();
        return;
    };
    let mut files = files.lock().unwrap_or_else(PoisonError::into_inner);
    match event.kind {
        // Reading a file (the loader does) changes nothing.
        EventKind::Access(AccessKind::Open(_)) => return,
        // A write goes on: the close or rename that ends it wakes the loop.
        EventKind::Modify(ModifyKind::Data(_)) => {
            for path in event.paths {
                files.insert(path, Seen::Writing(Instant::now()));
            }
            return;
        }
        // A new file may be written next (or is a link, complete at once: see QUIET_LIMIT).
        EventKind::Create(_) => {
            for path in event.paths {
                files.insert(path, Seen::Writing(Instant::now()));
            }
        }
        // Complete: closed after writing, or moved into place.
        EventKind::Access(AccessKind::Close(AccessMode::Write))
        | EventKind::Modify(ModifyKind::Name(_)) => {
            for path in event.paths {
                files.insert(path, Seen::Complete);
            }
        }
        EventKind::Remove(_) => {
            for path in &event.paths {
                files.remove(path);
            }
        }
        _ => {}
    }
    wake.notify_one();
}

/// A pass at once (for what changed while the components loaded), then one whenever a
/// notification wakes the loop, and every [`SAFETY_POLL`] anyway (every [`POLL`] while a file
/// is being written, so one that is never closed is picked up after [`QUIET_LIMIT`]).
async fn notified(
    components: &Components,
    dir: &Path,
    notifications: &Notifications,
    stop: CancellationToken,
) {
    loop {
        let scanned = scan(dir);
        let unfinished = notifications.unfinished(dir, &scanned);
        components.reload_changed(scanned, &unfinished).await;
        let next = if unfinished.is_empty() {
            SAFETY_POLL
        } else {
            POLL
        };
        tokio::select! {
            () = notifications.changed.notified() => {}
            () = tokio::time::sleep(next) => {}
            () = stop.cancelled() => return,
        }
    }
}

/// Every [`POLL`]: when the folder changed since the last pass, it is looked at again after
/// [`SETTLE`], and what changed in between waits for a later pass.
async fn poll(components: &Components, dir: &Path, stop: CancellationToken) {
    let mut last = scan(dir);
    loop {
        tokio::select! {
            () = tokio::time::sleep(POLL) => {}
            () = stop.cancelled() => return,
        }
        let mut now = scan(dir);
        let mut unfinished = BTreeSet::new();
        if now != last {
            tokio::select! {
                () = tokio::time::sleep(SETTLE) => {}
                () = stop.cancelled() => return,
            }
            let settled = scan(dir);
            unfinished = now
                .keys()
                .chain(settled.keys())
                .filter(|name| now.get(*name) != settled.get(*name))
                .cloned()
                .collect();
            now = settled;
        }
        components.reload_changed(now.clone(), &unfinished).await;
        last = now;
    }
}
