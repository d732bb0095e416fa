//! Per-adapter key-value store with expiry, in the database so it survives restarts and is
//! shared by replicas. `claim` is the atomic first-writer-wins used to handle a retried event
//! exactly once. Writes stay within the adapter's byte quota (kept per adapter by triggers in
//! `adapter_kv_usage`).

use crate::db::{Backend, Conn, now_ms};
use crate::error::{Error, Result};
use crate::params;

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

pub fn get(conn: &Conn, adapter: &str, key: &str) -> Result<Option<Vec<u8>>> {
    conn.query_opt(
        "SELECT value FROM adapter_kv WHERE adapter = ?1 AND key = ?2 \
         AND (expires_at IS NULL OR expires_at > ?3)",
        params![adapter, key, now_ms()],
        |r| r.get(0),
    )
}

/// Bytes the adapter stores now (expired entries count until purged).
pub(crate) fn usage(conn: &Conn, adapter: &str) -> Result<i64> {
    Ok(conn
        .query_opt(
            "SELECT bytes FROM adapter_kv_usage WHERE adapter = ?1",
            params![adapter],
            |r| r.get(0),
        )?
        .unwrap_or(0))
}

/// One write within the adapter's byte quota, purging its expired entries first when they
/// are what stands in the way.
struct Write<'a> {
    adapter: &'a str,
    key: &'a str,
    value: &'a [u8],
    expires_at: Option<i64>,
    quota: u64,
    /// Only over an absent or expired entry.
    claim: bool,
}

impl Write<'_> {
    /// Whether it wrote (a claim may find the key taken).
    fn run(&self, conn: &mut Conn) -> std::result::Result<bool, Refused> {
        match conn.backend() {
            Backend::Postgres => self.in_one_statement(conn),
            Backend::Sqlite => conn.transaction(|tx| {
                self.within_quota(tx)?;
                // A claim writes only over an absent or expired entry.
                let changed = tx.execute(
                    "INSERT INTO adapter_kv (adapter, key, value, expires_at) \
                     VALUES (?1, ?2, ?3, ?4) ON CONFLICT (adapter, key) DO UPDATE \
                     SET value = excluded.value, expires_at = excluded.expires_at \
                     WHERE NOT ?6 OR (adapter_kv.expires_at IS NOT NULL \
                                      AND adapter_kv.expires_at <= ?5)",
                    params![
                        self.adapter,
                        self.key,
                        self.value,
                        self.expires_at,
                        now_ms(),
                        self.claim
                    ],
                )?;
                Ok(changed == 1)
            }),
        }
    }

    /// PostgreSQL's `adapter_kv_write` (migration 27) does what the SQLite transaction does,
    /// in one statement where that took five.
    fn in_one_statement(&self, conn: &Conn) -> std::result::Result<bool, Refused> {
        let (written, would): (bool, Option<i64>) = conn.query_one(
            "SELECT written, would FROM adapter_kv_write(?1, ?2, ?3, ?4, ?5, ?6, ?7)",
            params![
                self.adapter,
                self.key,
                self.value,
                self.expires_at,
                self.limit(),
                now_ms(),
                self.claim
            ],
            |r| Ok((r.get(0)?, r.get(1)?)),
        )?;
        match would {
            Some(would) => Err(self.over(would)),
            None => Ok(written),
        }
    }

    /// In SQLite's write transaction, which keeps other writers out until it ends.
    fn within_quota(&self, conn: &Conn) -> std::result::Result<(), Refused> {
        // The entry's size now and the adapter's usage, in one statement.
        let (existing, used): (i64, i64) = conn.query_one(
            "SELECT coalesce((SELECT octet_length(key) + octet_length(value) FROM adapter_kv \
               WHERE adapter = ?1 AND key = ?2), 0), \
             coalesce((SELECT bytes FROM adapter_kv_usage WHERE adapter = ?1), 0)",
            params![self.adapter, self.key],
            |r| Ok((r.get(0)?, r.get(1)?)),
        )?;
        let adding = (self.key.len() + self.value.len()) as i64 - existing;
        if used + adding <= self.limit() {
            return Ok(());
        }
        conn.execute(
            "DELETE FROM adapter_kv WHERE adapter = ?1 AND expires_at IS NOT NULL AND expires_at <= ?2",
            params![self.adapter, now_ms()],
        )?;
        let would = usage(conn, self.adapter)? + adding;
        if would > self.limit() {
            return Err(self.over(would));
        }
        Ok(())
    }

    fn limit(&self) -> i64 {
        i64::try_from(self.quota).unwrap_or(i64::MAX)
    }

    fn over(&self, would: i64) -> Refused {
        Refused::OverQuota {
            would,
            quota: self.quota,
        }
    }
}

pub fn set(
    conn: &mut Conn,
    adapter: &str,
    key: &str,
    value: &[u8],
    ttl_ms: Option<u64>,
    quota: u64,
) -> std::result::Result<(), Refused> {
    let write = Write {
        adapter,
        key,
        value,
        expires_at: expiry(ttl_ms),
        quota,
        claim: false,
    };
    write.run(conn).map(drop)
}

pub fn delete(conn: &Conn, adapter: &str, key: &str) -> Result<()> {
    conn.execute_later(
        "DELETE FROM adapter_kv WHERE adapter = ?1 AND key = ?2",
        params![adapter, key],
    )
}

/// Stores `key` when it is absent or expired; true for the first caller only. Two concurrent
/// claims (on any replicas) cannot both win.
pub fn claim(
    conn: &mut Conn,
    adapter: &str,
    key: &str,
    ttl_ms: u64,
    quota: u64,
) -> std::result::Result<bool, Refused> {
    let write = Write {
        adapter,
        key,
        value: b"",
        expires_at: expiry(Some(ttl_ms)),
        quota,
        claim: true,
    };
    write.run(conn)
}

/// Drops expired entries (the reads above ignore them anyway).
pub fn purge_expired(conn: &Conn) -> Result<u64> {
    conn.execute(
        "DELETE FROM adapter_kv WHERE expires_at IS NOT NULL AND expires_at <= ?1",
        params![now_ms()],
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::db::testing::{Backends, each_conn};

    const PLENTY: u64 = 1 << 20;

    #[test]
    fn namespaced_values_with_expiry() {
        each_conn(Backends::Both, |conn| {
            set(conn, "a", "k", b"one", None, PLENTY).unwrap();
            set(conn, "b", "k", b"two", None, PLENTY).unwrap();
            assert_eq!(get(conn, "a", "k").unwrap().as_deref(), Some(&b"one"[..]));
            assert_eq!(get(conn, "b", "k").unwrap().as_deref(), Some(&b"two"[..]));
            set(conn, "a", "gone", b"x", Some(0), PLENTY).unwrap();
            assert_eq!(get(conn, "a", "gone").unwrap(), None);
            assert_eq!(purge_expired(conn).unwrap(), 1);
            delete(conn, "a", "k").unwrap();
            assert_eq!(get(conn, "a", "k").unwrap(), None);
        });
    }

    #[test]
    fn claim_wins_once_until_it_expires() {
        each_conn(Backends::Both, |conn| {
            let mut claim = |adapter, key, ttl| claim(conn, adapter, key, ttl, PLENTY).unwrap();
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
            set(conn, "teamchat", "plain", b"v", None, PLENTY).unwrap();
            assert!(
                !super::claim(conn, "teamchat", "plain", 1, PLENTY).unwrap(),
                "a value without expiry is never reclaimed"
            );
        });
    }

    #[test]
    fn writes_stay_within_the_quota_and_expired_entries_make_room() {
        each_conn(Backends::Both, |conn| {
            set(conn, "a", "k1", &[0; 60], None, 100).unwrap();
            let over = set(conn, "a", "k2", &[0; 60], None, 100).unwrap_err();
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
            set(conn, "a", "k1", &[0; 90], None, 100).unwrap();
            assert_eq!(usage(conn, "a").unwrap(), 92);
            assert!(matches!(
                claim(conn, "a", "event:1234", 1_000, 100),
                Err(Refused::OverQuota { .. })
            ));
            assert!(
                set(conn, "b", "k", &[0; 90], None, 100).is_ok(),
                "quotas are per adapter"
            );
            set(conn, "a", "k1", &[0; 90], Some(0), 100).unwrap();
            assert!(
                set(conn, "a", "k2", &[0; 60], None, 100).is_ok(),
                "the expired entry was purged"
            );
            assert_eq!(usage(conn, "a").unwrap(), 62);
        });
    }
}
