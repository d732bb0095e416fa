//! The adapters folder: what is in it, and a loop that hot-reloads what changes.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use tokio_util::sync::CancellationToken;

use super::components::Components;

/// How often the folder is looked at.
pub const POLL: Duration = Duration::from_millis(500);

/// An adapter's files in the adapters folder, as (length, modified) stamps: a changed stamp
/// is a changed file.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Files {
    pub wasm: Option<(PathBuf, Stamp)>,
    pub grant: Option<Stamp>,
}

pub type Stamp = (u64, SystemTime);

/// The adapters folder by adapter name: its component and its grant file.
pub fn scan(dir: &Path) -> BTreeMap<String, Files> {
    let mut found: BTreeMap<String, Files> = BTreeMap::new();
    for entry in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        let path = entry.path();
        let (Some(name), Some(extension), Ok(meta)) = (
            path.file_stem().and_then(|s| s.to_str()).map(str::to_owned),
            path.extension().and_then(|e| e.to_str()).map(str::to_owned),
            entry.metadata(),
        ) else {
            continue;
        };
        let stamp = (
            meta.len(),
            meta.modified().unwrap_or(SystemTime::UNIX_EPOCH),
        );
        match extension.as_str() {
            "wasm" => found.entry(name).or_default().wasm = Some((path, stamp)),
            "toml" => found.entry(name).or_default().grant = Some(stamp),
            _ => {}
        }
    }
    found
}

/// Reloads what changes in the adapters folder until `stop`.
pub async fn watch(components: Arc<Components>, stop: CancellationToken) {
    loop {
        tokio::select! {
            () = tokio::time::sleep(POLL) => components.reload_changed().await,
            () = stop.cancelled() => return,
        }
    }
}
