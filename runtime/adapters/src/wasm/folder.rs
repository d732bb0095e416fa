//! What the adapters folder holds: for each adapter name, its component (`<name>.wasm`), its
//! grant file (`<name>.toml`) and a shadow build (`<name>.shadow.wasm`, see `shadow`),
//! stamped so a change shows. Read by the watcher, by the components' first load and by the
//! inventory.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::SystemTime;

/// An adapter's files in the adapters folder, as (length, modified) stamps: a changed stamp
/// is a changed file.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Files {
    pub wasm: Option<(PathBuf, Stamp)>,
    pub grant: Option<Stamp>,
    pub shadow: Option<(PathBuf, Stamp)>,
}

pub(crate) type Stamp = (u64, SystemTime);

/// The adapter a file of the folder belongs to, and which of its files it is: `<name>.wasm`
/// (`wasm`), `<name>.toml` (`toml`) or `<name>.shadow.wasm` (`shadow`; no adapter name has a
/// dot).
pub(crate) fn adapter_of(path: &Path) -> Option<(String, &str)> {
    let stem = path.file_stem()?.to_str()?;
    match (path.extension()?.to_str()?, stem.strip_suffix(".shadow")) {
        ("wasm", Some(name)) => Some((name.to_owned(), "shadow")),
        (extension @ ("wasm" | "toml"), _) => Some((stem.to_owned(), extension)),
        _ => None,
    }
}

/// Where adapter `name`'s shadow build is kept in `dir`.
pub fn shadow_file(dir: &Path, name: &str) -> PathBuf {
    dir.join(format!("{name}.shadow.wasm"))
}

/// The adapters folder by adapter name: its component and its grant file.
pub(super) fn scan(dir: &Path) -> BTreeMap<String, Files> {
    let mut found: BTreeMap<String, Files> = BTreeMap::new();
    for entry in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        let path = entry.path();
        let (Some((name, extension)), Ok(meta)) = (adapter_of(&path), entry.metadata()) else {
            continue;
        };
        let stamp = (
            meta.len(),
            meta.modified().unwrap_or(SystemTime::UNIX_EPOCH),
        );
        let files = found.entry(name).or_default();
        match extension {
            "wasm" => files.wasm = Some((path, stamp)),
            "shadow" => files.shadow = Some((path, stamp)),
            _ => files.grant = Some(stamp),
        }
    }
    found
}
