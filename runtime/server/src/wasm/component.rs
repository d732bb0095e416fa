//! Turning bytes into a loaded adapter generation: compile (or reuse the host's compile
//! cache), check the imports against the WIT version and the grant, call `describe`, and
//! prepare an `InstancePre` for fast per-request instantiation.

use std::io::Write;
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

use sha2::{Digest, Sha256};
use wasmtime::Engine;
use wasmtime::component::{Component, InstancePre, Linker};

use super::bindings::{handler, lifecycle, tool_provider};
use super::grants::{Effective, Grant, Request};

/// The WIT package versions this host implements.
pub const SUPPORTED_VERSIONS: &[&str] = &["0.1.0"];
const PACKAGE: &str = "service:adapter/";

/// Interfaces of the package a component may import.
const IMPORTABLE: &[&str] = &[
    "types",
    "registry",
    "agent",
    "tools",
    "outbound-http",
    "secrets",
    "kv",
    "jobs",
    "log",
];

/// A compiled component, before `describe`.
pub struct Compiled {
    pub sha256: String,
    pub component: Component,
    /// Imported interfaces of the package (`kv`, `agent`, ...).
    pub imports: Vec<String>,
}

pub fn sha256_hex(bytes: &[u8]) -> String {
    hex::encode(Sha256::digest(bytes))
}

/// Compiles `bytes`, reusing `<cache>/<sha256>-<engine hash>.cwasm` when present. Only files
/// this host wrote are ever deserialized: the cache directory is the host's own (mode 0700),
/// files appear there by atomic rename after a successful compile, and a file or directory that
/// someone else could have written is not trusted.
pub fn compile(engine: &Engine, cache: &Path, bytes: &[u8]) -> anyhow::Result<Compiled> {
    let sha256 = sha256_hex(bytes);
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
            let component = Component::new(engine, bytes)
                .map_err(|e| anyhow::anyhow!("not a valid component: {e:#}"))?;
            if let Err(e) = write_cache(&path, &component.serialize()?) {
                tracing::warn!("cannot write the compile cache {}: {e:#}", path.display());
            }
            component
        }
    };
    let imports = package_imports(engine, &component)?;
    Ok(Compiled {
        sha256,
        component,
        imports,
    })
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

/// Names of the imported interfaces of this package; any other import than WASI, an unknown
/// interface, or another package version is refused with the reason.
fn package_imports(engine: &Engine, component: &Component) -> anyhow::Result<Vec<String>> {
    let mut out = Vec::new();
    for (name, _) in component.component_type().imports(engine) {
        if name.starts_with("wasi:") {
            continue;
        }
        let Some(rest) = name.strip_prefix(PACKAGE) else {
            anyhow::bail!("imports {name}, which this host does not provide");
        };
        let (interface, version) = rest.split_once('@').unwrap_or((rest, ""));
        if !SUPPORTED_VERSIONS.contains(&version) {
            anyhow::bail!(
                "built for service:adapter@{version}; this host supports service:adapter@{}",
                SUPPORTED_VERSIONS.join(", @")
            );
        }
        if !IMPORTABLE.contains(&interface) {
            anyhow::bail!("imports {name}, which this host does not provide");
        }
        out.push(interface.to_owned());
    }
    Ok(out)
}

/// The exports found on a prepared component.
pub struct Exports {
    pub handler: handler::GuestIndices,
    pub lifecycle: Option<lifecycle::GuestIndices>,
    pub tools: Option<tool_provider::GuestIndices>,
}

pub fn prepare<T: 'static>(
    linker: &Linker<T>,
    component: &Component,
) -> anyhow::Result<(InstancePre<T>, Exports)> {
    let pre = linker
        .instantiate_pre(component)
        .map_err(|e| anyhow::anyhow!("cannot link: {e:#}"))?;
    let handler = handler::GuestIndices::new(&pre).map_err(|_| {
        anyhow::anyhow!(
            "does not export service:adapter/handler@{}",
            SUPPORTED_VERSIONS[0]
        )
    })?;
    let exports = Exports {
        handler,
        lifecycle: lifecycle::GuestIndices::new(&pre).ok(),
        tools: tool_provider::GuestIndices::new(&pre).ok(),
    };
    Ok((pre, exports))
}

/// The grant check at load: the effective grant, or why the component is refused.
pub fn grant_check(
    imports: &[String],
    request: &Request,
    grant: &Grant,
) -> anyhow::Result<Effective> {
    let effective = Effective::intersect(request, grant).map_err(anyhow::Error::msg)?;
    for interface in imports {
        if interface != "types" && !effective.allows_interface(interface) {
            anyhow::bail!("imports service:adapter/{interface} but was granted nothing of it");
        }
    }
    Ok(effective)
}

#[cfg(test)]
mod tests {
    use std::os::unix::fs::PermissionsExt;

    use super::*;

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
