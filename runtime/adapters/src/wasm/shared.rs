//! Components installed into the shared database, so one `adapters install` serves on every
//! replica. Each replica mirrors them into its adapters folder, where the watcher loads them
//! like any dropped-in file (compiled once per replica into its own cache): a new or changed
//! one is written there, grant first, both renamed into place; one removed from the database
//! is removed from the folder. What it mirrored is listed in `<data_dir>/shared-components`,
//! so files an operator dropped in by hand are never touched.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use anyhow::Context;
use futures_util::future::BoxFuture;
use sha2::{Digest, Sha256};

use crate::db::{self, Conn, Db};
use crate::error::Result;
use crate::params;

const MIRRORED: &str = "shared-components";

/// Stores a component and its grant (replacing an earlier one of that name).
pub fn put(conn: &Conn, name: &str, wasm: &[u8], grant: Option<&str>) -> Result<()> {
    let sha256 = hex::encode(Sha256::digest(wasm));
    conn.execute(
        "INSERT INTO shared_components (name, wasm, grant_toml, sha256, updated_at) \
         VALUES (?1, ?2, ?3, ?4, ?5) ON CONFLICT (name) DO UPDATE SET wasm = excluded.wasm, \
         grant_toml = excluded.grant_toml, sha256 = excluded.sha256, updated_at = excluded.updated_at",
        params![name, wasm, grant, sha256, db::now()],
    )?;
    Ok(())
}

/// Removes a component; false when there was none of that name.
pub fn remove(conn: &Conn, name: &str) -> Result<bool> {
    Ok(conn.execute(
        "DELETE FROM shared_components WHERE name = ?1",
        params![name],
    )? > 0)
}

/// The name a shadow build of `name` is stored under (mirrored as `<name>.shadow.wasm`).
pub fn shadow_key(name: &str) -> String {
    format!("{name}.shadow")
}

/// Makes `name`'s shadow build its component, under the grant it has (`bundled_grant` when
/// it is a bundled adapter with none stored); false when it has no shadow build.
pub fn promote(conn: &mut Conn, name: &str, bundled_grant: Option<&str>) -> Result<bool> {
    conn.transaction(|conn| {
        let Some((wasm, _)) = fetch(conn, &shadow_key(name))? else {
            return Ok(false);
        };
        let grant = match fetch(conn, name)? {
            Some((_, grant)) => grant,
            None => bundled_grant.map(str::to_owned),
        };
        put(conn, name, &wasm, grant.as_deref())?;
        remove(conn, &shadow_key(name))?;
        Ok(true)
    })
}

/// Each component's name with the digest of its bytes and grant (what a mirror compares).
fn versions(conn: &Conn) -> Result<BTreeMap<String, String>> {
    Ok(conn
        .query(
            "SELECT name, sha256 || ':' || coalesce(grant_toml, '') FROM shared_components",
            params![],
            |r| {
                let (name, version): (String, String) = (r.get(0)?, r.get(1)?);
                Ok((name, hex::encode(Sha256::digest(version.as_bytes()))))
            },
        )?
        .into_iter()
        .collect())
}

fn fetch(conn: &Conn, name: &str) -> Result<Option<(Vec<u8>, Option<String>)>> {
    conn.query_opt(
        "SELECT wasm, grant_toml FROM shared_components WHERE name = ?1",
        params![name],
        |r| Ok((r.get(0)?, r.get(1)?)),
    )
}

/// Brings `adapters_dir` in line with the database: writes what is new or changed, removes
/// what is gone. Returns the names it wrote or removed.
pub fn mirror<'a>(
    db: &'a Db,
    data_dir: &'a Path,
    adapters_dir: &'a Path,
) -> BoxFuture<'a, anyhow::Result<Vec<String>>> {
    Box::pin(async move {
        let record = data_dir.join(MIRRORED);
        let mut mirrored = read_record(&record)?;
        let wanted = db.call(|conn| versions(conn)).await?;
        let mut changed = Vec::new();
        for (name, version) in &wanted {
            if mirrored.get(name) == Some(version) {
                continue;
            }
            let fetched = {
                let name = name.clone();
                db.call(move |conn| fetch(conn, &name)).await?
            };
            let Some((wasm, grant)) = fetched else {
                continue;
            };
            let grant_path = adapters_dir.join(format!("{name}.toml"));
            // The grant first: the component must never be loaded without it.
            match grant {
                Some(text) => write_atomically(&grant_path, text.as_bytes())?,
                None => remove_if_present(&grant_path)?,
            }
            write_atomically(&adapters_dir.join(format!("{name}.wasm")), &wasm)?;
            mirrored.insert(name.clone(), version.clone());
            changed.push(name.clone());
        }
        let gone: Vec<String> = mirrored
            .keys()
            .filter(|name| !wanted.contains_key(*name))
            .cloned()
            .collect();
        for name in gone {
            remove_if_present(&adapters_dir.join(format!("{name}.wasm")))?;
            remove_if_present(&adapters_dir.join(format!("{name}.toml")))?;
            mirrored.remove(&name);
            changed.push(name);
        }
        if !changed.is_empty() {
            let text: String = mirrored
                .iter()
                .map(|(name, version)| format!("{name} {version}\n"))
                .collect();
            write_atomically(&record, text.as_bytes())?;
        }
        Ok(changed)
    })
}

fn read_record(path: &Path) -> anyhow::Result<BTreeMap<String, String>> {
    match std::fs::read_to_string(path) {
        Ok(text) => Ok(text
            .lines()
            .filter_map(|line| line.split_once(' '))
            .map(|(name, version)| (name.to_owned(), version.to_owned()))
            .collect()),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(BTreeMap::new()),
        Err(e) => Err(e).with_context(|| format!("cannot read {}", path.display())),
    }
}

/// Writes beside the target and renames, so the watcher never reads half a file.
pub fn write_atomically(path: &Path, bytes: &[u8]) -> anyhow::Result<()> {
    let tmp: PathBuf = path.with_extension("partial");
    std::fs::write(&tmp, bytes).with_context(|| format!("cannot write {}", tmp.display()))?;
    std::fs::rename(&tmp, path).with_context(|| format!("cannot install {}", path.display()))
}

fn remove_if_present(path: &Path) -> anyhow::Result<()> {
    match std::fs::remove_file(path) {
        Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
            Err(e).with_context(|| format!("cannot remove {}", path.display()))
        }
        _ => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::db::testing::{self, Backends};

    #[test]
    fn a_mirror_follows_the_database_and_leaves_hand_placed_files_alone() {
        testing::each_backend(Backends::Both, |db| {
            let data = tempfile::tempdir().unwrap();
            let dir = data.path().join("adapters");
            std::fs::create_dir_all(&dir).unwrap();
            std::fs::write(dir.join("local.wasm"), b"by hand").unwrap();
            let sync = || testing::block_on(mirror(db, data.path(), &dir)).unwrap();
            db.blocking(|conn| put(conn, "echo", b"\0asm one", Some("kv = true\n")))
                .unwrap();
            assert_eq!(sync(), ["echo"]);
            assert_eq!(std::fs::read(dir.join("echo.wasm")).unwrap(), b"\0asm one");
            assert_eq!(
                std::fs::read_to_string(dir.join("echo.toml")).unwrap(),
                "kv = true\n"
            );
            assert!(sync().is_empty(), "nothing changed");
            db.blocking(|conn| put(conn, "echo", b"\0asm one", None))
                .unwrap();
            assert_eq!(sync(), ["echo"], "a new grant is a change");
            assert!(!dir.join("echo.toml").exists());
            db.blocking(|conn| remove(conn, "echo")).unwrap();
            assert_eq!(sync(), ["echo"]);
            assert!(!dir.join("echo.wasm").exists());
            assert!(
                dir.join("local.wasm").exists(),
                "never mirrored, never removed"
            );
        });
    }
}
