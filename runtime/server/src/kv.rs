//! Per-adapter key-value store with expiry, in SQLite so it survives restarts. `claim` is the
//! atomic first-writer-wins used to handle a retried event exactly once. Writes stay within the
//! adapter's byte quota (kept per adapter by triggers in `adapter_kv_usage`).

use rusqlite::{Connection, OptionalExtension, TransactionBehavior, params};

use crate::error::{Error, Result};

fn now_ms() -> i64 {
    chrono::Utc::now().timestamp_millis()
}

fn expiry(ttl_ms: Option<u64>) -> Option<i64> {
    ttl_ms.map(|ttl| now_ms().saturating_add(i64::try_from(ttl).unwrap_or(i64::MAX)))
}

/// Why a write was refused.
#[derive(Debug, thiserror::Error)]
pub enum Refused {
    #[error(
        "the adapter's key-value store would hold {would} bytes, over its quota of {quota} (limits.kv_total_bytes)"
    )]
    OverQuota { would: i64, quota: u64 },
    #[error(transparent)]
    Db(#[from] Error),
}

impl From<rusqlite::Error> for Refused {
    fn from(e: rusqlite::Error) -> Self {
        Self::Db(e.into())
    }
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

/// Bytes the adapter stores now (expired entries count until purged).
pub fn usage(conn: &Connection, adapter: &str) -> Result<i64> {
    Ok(conn
        .prepare_cached("SELECT bytes FROM adapter_kv_usage WHERE adapter = ?1")?
        .query_row([adapter], |r| r.get(0))
        .optional()?
        .unwrap_or(0))
}

/// Checks that storing `value` under `key` keeps the adapter within `quota` bytes, purging
/// its expired entries first when they are what stands in the way.
fn within_quota(
    conn: &Connection,
    adapter: &str,
    key: &str,
    value_len: usize,
    quota: u64,
) -> std::result::Result<(), Refused> {
    let existing: i64 = conn
        .prepare_cached(
            "SELECT octet_length(key) + octet_length(value) FROM adapter_kv \
             WHERE adapter = ?1 AND key = ?2",
        )?
        .query_row([adapter, key], |r| r.get(0))
        .optional()?
        .unwrap_or(0);
    let adding = (key.len() + value_len) as i64 - existing;
    let fits = |conn: &Connection| -> Result<Option<i64>> {
        let would = usage(conn, adapter)? + adding;
        Ok((would > i64::try_from(quota).unwrap_or(i64::MAX)).then_some(would))
    };
    if fits(conn)?.is_none() {
        return Ok(());
    }
    conn.prepare_cached(
        "DELETE FROM adapter_kv WHERE adapter = ?1 AND expires_at IS NOT NULL AND expires_at <= ?2",
    )?
    .execute(params![adapter, now_ms()])?;
    match fits(conn)? {
        None => Ok(()),
        Some(would) => Err(Refused::OverQuota { would, quota }),
    }
}

pub fn set(
    conn: &mut Connection,
    adapter: &str,
    key: &str,
    value: &[u8],
    ttl_ms: Option<u64>,
    quota: u64,
) -> std::result::Result<(), Refused> {
    let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
    within_quota(&tx, adapter, key, value.len(), quota)?;
    tx.prepare_cached(
        "INSERT INTO adapter_kv (adapter, key, value, expires_at) VALUES (?1, ?2, ?3, ?4) \
         ON CONFLICT (adapter, key) DO UPDATE SET value = excluded.value, expires_at = excluded.expires_at",
    )?
    .execute(params![adapter, key, value, expiry(ttl_ms)])?;
    tx.commit()?;
    Ok(())
}

pub fn delete(conn: &Connection, adapter: &str, key: &str) -> Result<()> {
    conn.prepare_cached("DELETE FROM adapter_kv WHERE adapter = ?1 AND key = ?2")?
        .execute(params![adapter, key])?;
    Ok(())
}

/// Stores `key` when it is absent or expired; true for the first caller only. One statement,
/// so two concurrent claims cannot both win.
pub fn claim(
    conn: &mut Connection,
    adapter: &str,
    key: &str,
    ttl_ms: u64,
    quota: u64,
) -> std::result::Result<bool, Refused> {
    let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
    within_quota(&tx, adapter, key, 0, quota)?;
    let changed = tx
        .prepare_cached(
            "INSERT INTO adapter_kv (adapter, key, value, expires_at) VALUES (?1, ?2, x'', ?3) \
             ON CONFLICT (adapter, key) DO UPDATE SET value = excluded.value, expires_at = excluded.expires_at \
             WHERE adapter_kv.expires_at IS NOT NULL AND adapter_kv.expires_at <= ?4",
        )?
        .execute(params![adapter, key, expiry(Some(ttl_ms)), now_ms()])?;
    tx.commit()?;
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

    const PLENTY: u64 = 1 << 20;

    #[test]
    fn namespaced_values_with_expiry() {
        let mut conn = db::memory();
        set(&mut conn, "a", "k", b"one", None, PLENTY).unwrap();
        set(&mut conn, "b", "k", b"two", None, PLENTY).unwrap();
        assert_eq!(get(&conn, "a", "k").unwrap().as_deref(), Some(&b"one"[..]));
        assert_eq!(get(&conn, "b", "k").unwrap().as_deref(), Some(&b"two"[..]));
        set(&mut conn, "a", "gone", b"x", Some(0), PLENTY).unwrap();
        assert_eq!(get(&conn, "a", "gone").unwrap(), None);
        assert_eq!(purge_expired(&conn).unwrap(), 1);
        delete(&conn, "a", "k").unwrap();
        assert_eq!(get(&conn, "a", "k").unwrap(), None);
    }

    #[test]
    fn claim_wins_once_until_it_expires() {
        let mut conn = db::memory();
        let mut claim = |adapter, key, ttl| claim(&mut conn, adapter, key, ttl, PLENTY).unwrap();
        assert!(claim("teamchat", "event:Ev1", 60_000));
        assert!(!claim("teamchat", "event:Ev1", 60_000));
        assert!(
            claim("webhook", "event:Ev1", 60_000),
            "namespaces are separate"
        );
        assert!(claim("teamchat", "event:Ev2", 0));
        assert!(
            claim("teamchat", "event:Ev2", 60_000),
            "an expired claim can be taken again"
        );
        set(&mut conn, "teamchat", "plain", b"v", None, PLENTY).unwrap();
        assert!(
            !super::claim(&mut conn, "teamchat", "plain", 1, PLENTY).unwrap(),
            "a value without expiry is never reclaimed"
        );
    }

    #[test]
    fn writes_stay_within_the_quota_and_expired_entries_make_room() {
        let mut conn = db::memory();
        set(&mut conn, "a", "k1", &[0; 60], None, 100).unwrap();
        let over = set(&mut conn, "a", "k2", &[0; 60], None, 100).unwrap_err();
        assert!(
            matches!(
                over,
                Refused::OverQuota {
                    would: 124,
                    quota: 100
                }
            ),
            "{over}"
        );
        // Replacing a value counts only the difference.
        set(&mut conn, "a", "k1", &[0; 90], None, 100).unwrap();
        assert_eq!(usage(&conn, "a").unwrap(), 92);
        assert!(matches!(
            claim(&mut conn, "a", "event:1234", 1_000, 100),
            Err(Refused::OverQuota { .. })
        ));
        assert!(
            set(&mut conn, "b", "k", &[0; 90], None, 100).is_ok(),
            "quotas are per adapter"
        );
        set(&mut conn, "a", "k1", &[0; 90], Some(0), 100).unwrap();
        assert!(
            set(&mut conn, "a", "k2", &[0; 60], None, 100).is_ok(),
            "the expired entry was purged"
        );
        assert_eq!(usage(&conn, "a").unwrap(), 62);
    }
}
