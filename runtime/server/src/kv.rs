//! Per-adapter key-value store with expiry, in SQLite so it survives restarts. `claim` is the
//! atomic first-writer-wins used to handle a retried event exactly once.

use rusqlite::{Connection, OptionalExtension, params};

use crate::error::Result;

fn now_ms() -> i64 {
    chrono::Utc::now().timestamp_millis()
}

fn expiry(ttl_ms: Option<u64>) -> Option<i64> {
    ttl_ms.map(|ttl| now_ms().saturating_add(i64::try_from(ttl).unwrap_or(i64::MAX)))
}

pub fn get(conn: &Connection, adapter: &str, key: &str) -> Result<Option<Vec<u8>>> {
    Ok(conn
        .prepare_cached(
            "SELECT value FROM adapter_kv WHERE adapter = ?1 AND key = ?2 \
             AND (expires_at IS NULL OR expires_at > ?3)",
        )?
        .query_row(params![adapter, key, now_ms()], |r| r.get(0))
        .optional()?)
}

pub fn set(
    conn: &Connection,
    adapter: &str,
    key: &str,
    value: &[u8],
    ttl_ms: Option<u64>,
) -> Result<()> {
    conn.prepare_cached(
        "INSERT INTO adapter_kv (adapter, key, value, expires_at) VALUES (?1, ?2, ?3, ?4) \
         ON CONFLICT (adapter, key) DO UPDATE SET value = excluded.value, expires_at = excluded.expires_at")?.execute(params![adapter, key, value, expiry(ttl_ms)],
    )?;
    Ok(())
}

pub fn delete(conn: &Connection, adapter: &str, key: &str) -> Result<()> {
    conn.prepare_cached("DELETE FROM adapter_kv WHERE adapter = ?1 AND key = ?2")?
        .execute(params![adapter, key])?;
    Ok(())
}

/// Stores `key` when it is absent or expired; true for the first caller only. One statement,
/// so two concurrent claims cannot both win.
pub fn claim(conn: &Connection, adapter: &str, key: &str, ttl_ms: u64) -> Result<bool> {
    let changed = conn.prepare_cached(
        "INSERT INTO adapter_kv (adapter, key, value, expires_at) VALUES (?1, ?2, x'', ?3) \
         ON CONFLICT (adapter, key) DO UPDATE SET value = excluded.value, expires_at = excluded.expires_at \
         WHERE adapter_kv.expires_at IS NOT NULL AND adapter_kv.expires_at <= ?4")?.execute(params![adapter, key, expiry(Some(ttl_ms)), now_ms()],
    )?;
    Ok(changed == 1)
}

/// Drops expired entries (the reads above ignore them anyway).
pub fn purge_expired(conn: &Connection) -> Result<usize> {
    Ok(conn.execute(
        "DELETE FROM adapter_kv WHERE expires_at IS NOT NULL AND expires_at <= ?1",
        [now_ms()],
    )?)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::db;

    #[test]
    fn namespaced_values_with_expiry() {
        let conn = db::memory();
        set(&conn, "a", "k", b"one", None).unwrap();
        set(&conn, "b", "k", b"two", None).unwrap();
        assert_eq!(get(&conn, "a", "k").unwrap().as_deref(), Some(&b"one"[..]));
        assert_eq!(get(&conn, "b", "k").unwrap().as_deref(), Some(&b"two"[..]));
        set(&conn, "a", "gone", b"x", Some(0)).unwrap();
        assert_eq!(get(&conn, "a", "gone").unwrap(), None);
        assert_eq!(purge_expired(&conn).unwrap(), 1);
        delete(&conn, "a", "k").unwrap();
        assert_eq!(get(&conn, "a", "k").unwrap(), None);
    }

    #[test]
    fn claim_wins_once_until_it_expires() {
        let conn = db::memory();
        assert!(claim(&conn, "teamchat", "event:Ev1", 60_000).unwrap());
        assert!(!claim(&conn, "teamchat", "event:Ev1", 60_000).unwrap());
        assert!(
            claim(&conn, "webhook", "event:Ev1", 60_000).unwrap(),
            "namespaces are separate"
        );
        assert!(claim(&conn, "teamchat", "event:Ev2", 0).unwrap());
        assert!(
            claim(&conn, "teamchat", "event:Ev2", 60_000).unwrap(),
            "an expired claim can be taken again"
        );
        set(&conn, "teamchat", "plain", b"v", None).unwrap();
        assert!(
            !claim(&conn, "teamchat", "plain", 1).unwrap(),
            "a value without expiry is never reclaimed"
        );
    }
}
