//! The operator's enable/disable choices, kept across restarts (`adapter_state`).

use crate::db::{self, Db};
use crate::error::Result;
use crate::params;

/// Adapters the operator disabled.
pub(super) async fn disabled(db: &Db) -> Result<Vec<String>> {
    db.call(|conn| {
        conn.query(
            "SELECT name FROM adapter_state WHERE enabled = FALSE",
            params![],
            |r| r.get(0),
        )
    })
    .await
}

/// Persists a choice.
pub(super) async fn remember(db: &Db, name: &str, enabled: bool) -> Result<()> {
    let name = name.to_owned();
    db.call(move |conn| {
        conn.execute(
            "INSERT INTO adapter_state (name, enabled, updated_at) VALUES (?1, ?2, ?3) \
             ON CONFLICT (name) DO UPDATE SET enabled = excluded.enabled, updated_at = excluded.updated_at",
            params![name, enabled, db::now()],
        )?;
        Ok(())
    })
    .await
}
