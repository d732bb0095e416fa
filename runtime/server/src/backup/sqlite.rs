//! The SQLite database of a backup: a snapshot taken with `VACUUM INTO` (one read transaction:
//! in WAL mode the server's writers never wait for it) and checked before a restore uses it.

use std::path::Path;

use anyhow::{Context, bail, ensure};

use crate::db::sqlite;

/// A consistent copy of the live database at `live` written to `into`.
pub(super) fn snapshot(live: &Path, into: &Path) -> anyhow::Result<()> {
    let _ = std::fs::remove_file(into);
    let conn = sqlite::connect(live)?;
    let target = into
        .to_str()
        .with_context(|| format!("{} is not a UTF-8 path", into.display()))?;
    conn.execute("VACUUM INTO ?1", [target])
        .with_context(|| format!("cannot snapshot {}", live.display()))?;
    Ok(())
}

/// The schema version of the service database at `database`.
pub(super) fn schema_of(database: &Path) -> anyhow::Result<u32> {
    let conn = sqlite::connect(database)?;
    let version: u32 = conn
        .query_row("PRAGMA user_version", [], |r| r.get(0))
        .with_context(|| format!("{} is not a database", database.display()))?;
    if version == 0 {
        bail!("{} holds no service database", database.display());
    }
    Ok(version)
}

/// Refuses a damaged database.
pub(super) fn check(database: &Path) -> anyhow::Result<()> {
    let conn = sqlite::connect(database)?;
    let check: String = conn.query_row("PRAGMA integrity_check", [], |r| r.get(0))?;
    ensure!(check == "ok", "its database is damaged ({check})");
    Ok(())
}
