//! The compile cache: compiled components on disk, keyed by the component's sha256 and the
//! engine's compatibility hash, written only by this host, and pruned to the components in
//! use (and a size cap).

use std::collections::HashSet;
use std::io::Write;
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

use sha2::{Digest, Sha256};
use wasmtime::Engine;
use wasmtime::component::Component;

/// The most the cache keeps; the least recently written artifacts go first past it.
pub(crate) const MAX_CACHE_BYTES: u64 = 512 << 20;

/// A compiled component, before `describe`.
pub(crate) struct Compiled {
    pub sha256: String,
    pub component: Component,
}

pub(crate) fn sha256_hex(bytes: &[u8]) -> String {
    hex::encode(Sha256::digest(bytes))
}

/// Compiles `bytes` (whose sha256 is `sha256`), reusing `<cache>/<sha256>-<engine hash>.cwasm` when present. Only files
/// this host wrote are ever deserialized: the cache directory is the host's own (mode 0700),
/// files appear there by atomic rename after a successful compile, and a file or directory that
/// someone else could have written is not trusted.
pub(super) fn compile(
    engine: &Engine,
    cache: &Path,
    bytes: &[u8],
    sha256: String,
) -> anyhow::Result<Compiled> {
    let path = cache_path(engine, cache, &sha256);
    let cached = match path.exists() {
        false => None,
        // SAFETY: deserializing loads native code; `trusted` says the host wrote the file.
        true if trusted(&path) => Some(unsafe { Component::deserialize_file(engine, &path) }),
        true => {
            tracing::warn!(
                "not using {}: it or its folder is writable by others or has another owner",
                path.display()
            );
            None
        }
    };
    let component = match cached {
        Some(Ok(component)) => component,
        cached => {
            if let Some(Err(e)) = cached {
                tracing::warn!("ignoring unusable cache entry {}: {e:#}", path.display());
            }
            if !bytes.starts_with(b"\0asm") {
                // wasmparser's own message lists the bytes one per line.
                anyhow::bail!(
                    "not a valid component: not a WebAssembly file (it does not start with \\0asm)"
                );
            }
            let component = Component::new(engine, bytes).map_err(|e| {
                let message = format!("{e:#}");
                anyhow::anyhow!(
                    "not a valid component: {}",
                    message.split_whitespace().collect::<Vec<_>>().join(" ")
                )
            })?;
            match write_cache(&path, &component.serialize()?) {
                Ok(()) => {
                    // Whoever writes keeps the cap: the server, or `adapters install` while it
                    // is down.
                    fit(cache, MAX_CACHE_BYTES);
                    // Served from the file, as a cached start is: its memory images map the
                    // file. The compiled component would build them in a sealed memfd, which
                    // a loaded kernel may refuse to seal for a moment (EBUSY) and so fail a
                    // load.
                    // SAFETY: the host wrote this file just now, in its own folder.
                    unsafe { Component::deserialize_file(engine, &path) }.unwrap_or(component)
                }
                Err(e) => {
                    tracing::warn!("cannot write the compile cache {}: {e:#}", path.display());
                    component
                }
            }
        }
    };
    Ok(Compiled { sha256, component })
}

/// Whether `engine`'s artifact of the component whose sha256 is `sha256` is in the cache.
pub(crate) fn is_cached(engine: &Engine, cache: &Path, sha256: &str) -> bool {
    let path = cache_path(engine, cache, sha256);
    path.exists() && trusted(&path)
}

/// Removes `engine`'s artifact of that component (a baseline one, once the optimized one is
/// written).
pub(super) fn forget(engine: &Engine, cache: &Path, sha256: &str) {
    let _ = std::fs::remove_file(cache_path(engine, cache, sha256));
}

fn cache_path(engine: &Engine, cache: &Path, sha256: &str) -> PathBuf {
    use std::hash::{Hash, Hasher};
    let mut hasher = std::hash::DefaultHasher::new();
    engine.precompile_compatibility_hash().hash(&mut hasher);
    cache.join(format!("{sha256}-{:016x}.cwasm", hasher.finish()))
}

/// Whether a cache file can only have been written by this host's user: the file and its
/// folder belong to the owner of the data directory, and nobody else may write to either.
fn trusted(path: &Path) -> bool {
    use std::os::unix::fs::MetadataExt;
    let Some(folder) = path.parent() else {
        return false;
    };
    let Some(data_dir) = folder.parent() else {
        return false;
    };
    let (Ok(file), Ok(folder), Ok(owner)) =
        (path.metadata(), folder.metadata(), data_dir.metadata())
    else {
        return false;
    };
    [file, folder]
        .iter()
        .all(|m| m.uid() == owner.uid() && m.mode() & 0o022 == 0)
}

fn write_cache(path: &Path, bytes: &[u8]) -> anyhow::Result<()> {
    let dir = path
        .parent()
        .expect("cache files live in the cache directory");
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dir)?;
    let tmp = path.with_extension(format!("tmp{}", std::process::id()));
    let mut file = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(&tmp)?;
    file.write_all(bytes)?;
    file.sync_all()?;
    std::fs::rename(&tmp, path)?;
    Ok(())
}

/// Removes artifacts of components not in `keep` (sha256s), then the oldest until the rest
/// fits in [`MAX_CACHE_BYTES`].
pub(crate) fn prune(cache: &Path, keep: &HashSet<String>) {
    for (_, _, path) in artifacts(cache) {
        let known = path
            .file_name()
            .and_then(|name| name.to_str()?.split_once('-'))
            .is_some_and(|(sha256, _)| keep.contains(sha256));
        if !known {
            remove(&path);
        }
    }
    fit(cache, MAX_CACHE_BYTES);
}

/// Removes the least recently written artifacts until the rest fits in `max` bytes.
fn fit(cache: &Path, max: u64) {
    let mut artifacts = artifacts(cache);
    artifacts.sort();
    let mut total: u64 = artifacts.iter().map(|(_, len, _)| len).sum();
    for (_, len, path) in artifacts {
        if total <= max {
            break;
        }
        remove(&path);
        total -= len;
    }
}

/// The cache's files: when each was written, its size, its path.
fn artifacts(cache: &Path) -> Vec<(Option<std::time::SystemTime>, u64, PathBuf)> {
    let Ok(entries) = std::fs::read_dir(cache) else {
        return Vec::new();
    };
    entries
        .flatten()
        .filter_map(|entry| {
            let meta = entry.metadata().ok()?;
            Some((meta.modified().ok(), meta.len(), entry.path()))
        })
        .collect()
}

fn remove(path: &Path) {
    if let Err(e) = std::fs::remove_file(path) {
        tracing::warn!(
            "cannot prune the compile cache entry {}: {e}",
            path.display()
        );
    }
}

#[cfg(test)]
mod tests {
    use std::os::unix::fs::PermissionsExt;

    use super::*;

    #[test]
    fn pruning_keeps_only_components_in_use() {
        let data_dir = tempfile::tempdir().unwrap();
        let cache = data_dir.path().join("cache");
        write_cache(&cache.join("aaa-1.cwasm"), b"in use").unwrap();
        write_cache(&cache.join("bbb-1.cwasm"), b"gone").unwrap();
        write_cache(&cache.join("aaa-2.cwasm"), b"in use, other engine").unwrap();
        prune(&cache, &HashSet::from(["aaa".to_owned()]));
        let mut left: Vec<String> = std::fs::read_dir(&cache)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        left.sort();
        assert_eq!(left, ["aaa-1.cwasm", "aaa-2.cwasm"]);
    }

    #[test]
    fn the_oldest_artifacts_go_past_the_cap() {
        let data_dir = tempfile::tempdir().unwrap();
        let cache = data_dir.path().join("cache");
        for (name, age) in [("old", 30), ("mid", 20), ("new", 10)] {
            let path = cache.join(format!("{name}-1.cwasm"));
            write_cache(&path, &[0; 100]).unwrap();
            let written = std::time::SystemTime::now() - std::time::Duration::from_secs(age);
            std::fs::File::options()
                .write(true)
                .open(&path)
                .unwrap()
                .set_modified(written)
                .unwrap();
        }
        fit(&cache, 250);
        let mut left: Vec<String> = std::fs::read_dir(&cache)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        left.sort();
        assert_eq!(left, ["mid-1.cwasm", "new-1.cwasm"]);
    }

    #[test]
    fn only_files_nobody_else_could_write_are_trusted() {
        let data_dir = tempfile::tempdir().unwrap();
        let path = data_dir.path().join("cache/abc.cwasm");
        write_cache(&path, b"compiled").unwrap();
        assert!(trusted(&path));
        let mode =
            |p: &Path, mode| std::fs::set_permissions(p, std::fs::Permissions::from_mode(mode));
        mode(&path, 0o666).unwrap();
        assert!(!trusted(&path), "a world-writable file");
        mode(&path, 0o600).unwrap();
        mode(path.parent().unwrap(), 0o777).unwrap();
        assert!(!trusted(&path), "a folder others may write to");
        assert!(!trusted(&data_dir.path().join("cache/missing.cwasm")));
    }
}
