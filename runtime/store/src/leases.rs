//! Leases: what one replica at a time may do (tick the scheduler, hold a gateway connection),
//! and which replicas are alive. A lease has one holder until it expires, measured by the
//! database's clock so replicas agree; its token grows at every change of holder, so work
//! done under an old token can be told apart (a fencing token).

use crate::db::Conn;
use crate::error::Result;
use crate::params;

/// Takes `name` for `holder` for `ttl_ms`, or keeps holding it; `Some(token)` when held.
/// A lease held by another replica and not yet expired is not taken.
pub fn hold(conn: &Conn, name: &str, holder: &str, ttl_ms: i64) -> Result<Option<i64>> {
    let clock = conn.clock_ms();
    conn.query_opt(
        &format!(
            "INSERT INTO leases (name, holder, token, expires_at) VALUES (?1, ?2, 1, {clock} + ?3) \
             ON CONFLICT (name) DO UPDATE SET \
               token = CASE WHEN leases.holder = excluded.holder THEN leases.token \
                            ELSE leases.token + 1 END, \
               holder = excluded.holder, expires_at = excluded.expires_at \
             WHERE leases.holder = excluded.holder OR leases.expires_at < {clock} \
             RETURNING token"
        ),
        params![name, holder, ttl_ms],
        |r| r.get(0),
    )
}

/// Gives `name` up at once if `holder` has it, so another replica need not wait for it to
/// expire. The token is kept: the next holder's is larger.
pub fn release(conn: &Conn, name: &str, holder: &str) -> Result<()> {
    conn.execute(
        "UPDATE leases SET expires_at = 0 WHERE name = ?1 AND holder = ?2",
        params![name, holder],
    )?;
    Ok(())
}

/// Who holds `name` now, if anyone.
pub fn holder(conn: &Conn, name: &str) -> Result<Option<String>> {
    conn.query_opt(
        &format!(
            "SELECT holder FROM leases WHERE name = ?1 AND expires_at >= {}",
            conn.clock_ms()
        ),
        params![name],
        |r| r.get(0),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::db::testing::{Backends, each_conn};

    #[test]
    fn one_holder_until_it_expires_with_a_growing_token() {
        each_conn(Backends::Both, |conn| {
            assert_eq!(hold(conn, "scheduler", "a", 60_000).unwrap(), Some(1));
            assert_eq!(
                hold(conn, "scheduler", "a", 60_000).unwrap(),
                Some(1),
                "renewed"
            );
            assert_eq!(hold(conn, "scheduler", "b", 60_000).unwrap(), None);
            assert_eq!(holder(conn, "scheduler").unwrap().as_deref(), Some("a"));
            release(conn, "scheduler", "b").unwrap();
            assert_eq!(
                holder(conn, "scheduler").unwrap().as_deref(),
                Some("a"),
                "not b's"
            );
            release(conn, "scheduler", "a").unwrap();
            assert_eq!(holder(conn, "scheduler").unwrap(), None);
            assert_eq!(
                hold(conn, "scheduler", "b", -1).unwrap(),
                Some(2),
                "taken over"
            );
            assert_eq!(
                hold(conn, "scheduler", "a", 60_000).unwrap(),
                Some(3),
                "b's lease ran out"
            );
        });
    }
}
