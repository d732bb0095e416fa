//! Each adapter's allowance of agent runs per minute, kept in the database so replicas share
//! one: the whole minute's allowance at once, then refilled evenly (a token bucket).

use crate::db::Conn;
use crate::error::Result;
use crate::params;

/// Takes one run from `adapter`'s allowance of `per_minute`; false when none is left.
pub fn take_run(conn: &Conn, adapter: &str, per_minute: u32) -> Result<bool> {
    if per_minute == 0 {
        return Ok(false);
    }
    let clock = conn.clock_ms();
    // What the bucket holds now: what it held, plus the refill since, up to a full minute's.
    let refilled = format!(
        "CASE WHEN adapter_run_allowance.tokens + ({clock} - adapter_run_allowance.updated_ms) \
              * CAST(?2 AS DOUBLE PRECISION) / 60000.0 > CAST(?2 AS DOUBLE PRECISION) \
         THEN CAST(?2 AS DOUBLE PRECISION) \
         ELSE adapter_run_allowance.tokens + ({clock} - adapter_run_allowance.updated_ms) \
              * CAST(?2 AS DOUBLE PRECISION) / 60000.0 END"
    );
    let taken = conn.query_opt(
        &format!(
            "INSERT INTO adapter_run_allowance (adapter, tokens, updated_ms) \
             VALUES (?1, CAST(?2 AS DOUBLE PRECISION) - 1, {clock}) \
             ON CONFLICT (adapter) DO UPDATE SET tokens = {refilled} - 1, updated_ms = {clock} \
             WHERE {refilled} >= 1 RETURNING 1"
        ),
        params![adapter, f64::from(per_minute)],
        |_| Ok(()),
    )?;
    Ok(taken.is_some())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::db::testing::{Backends, each_conn};

    #[test]
    fn a_minutes_allowance_then_refused_per_adapter() {
        each_conn(Backends::Both, |conn| {
            assert!((0..5).all(|_| take_run(conn, "a", 5).unwrap()));
            assert!(
                !take_run(conn, "a", 5).unwrap(),
                "the minute's allowance is spent"
            );
            assert!(
                take_run(conn, "b", 5).unwrap(),
                "allowances are per adapter"
            );
            assert!(!take_run(conn, "c", 0).unwrap());
            // A minute's refill, as if the last take was a minute ago.
            conn.execute(
                "UPDATE adapter_run_allowance SET updated_ms = updated_ms - 60000 WHERE adapter = 'a'",
                params![],
            )
            .unwrap();
            assert!((0..5).all(|_| take_run(conn, "a", 5).unwrap()));
            assert!(
                !take_run(conn, "a", 5).unwrap(),
                "refilled to the allowance, no more"
            );
        });
    }
}
