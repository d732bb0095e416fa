//! The operator's enable/disable choices, kept across restarts (`adapter_state`).

use crate::db::{self, Db};
use crate::error::Result;

/// Adapters the operator disabled.
pub async fn disabled(db: &Db) -> Result<Vec<String>> {
    db.call(|conn| {
        let mut stmt = conn.prepare("SELECT name FROM adapter_state WHERE enabled = 0")?;
        let names = stmt.query_map([], |r| r.get::<_, String>(0))?;
        Ok(names.collect::<rusqlite::Result<Vec<_>>>()?)
    })
    .await
}

/// Persists a choice.
pub async fn remember(db: &Db, name: &str, enabled: bool) -> Result<()> {
    let name = name.to_owned();
    db.call(move |conn| {
        conn.execute(
            "INSERT INTO adapter_state (name, enabled, updated_at) VALUES (?1, ?2, ?3) \
             ON CONFLICT (name) DO UPDATE SET enabled = excluded.enabled, updated_at = excluded.updated_at",
            rusqlite::params![name, enabled, db::now()],
        )?;
        Ok(())
    })
    .await
}
