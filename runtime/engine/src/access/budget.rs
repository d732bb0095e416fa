//! A budget of agent runs per principal and minute, counted in the database so replicas share
//! it: one leaked token cannot spend the model's budget faster than the setting allows.

use crate::db::Conn;
use crate::error::Result;
use crate::params;

/// Counts one run of `principal` in the current minute of the database's clock. `Err` with the
/// seconds until the next minute once more than `limit` were counted.
pub fn spend(conn: &Conn, principal: &str, limit: u32) -> Result<std::result::Result<(), u64>> {
    let clock = conn.clock_ms();
    let (runs, now_ms): (i64, i64) = conn.query_one(
        &format!(
            "INSERT INTO run_budget (principal, minute, runs) VALUES (?1, ({clock}) / 60000, 1) \
             ON CONFLICT (principal, minute) DO UPDATE SET runs = run_budget.runs + 1 \
             RETURNING runs, {clock}"
        ),
        params![principal],
        |row| Ok((row.get(0)?, row.get(1)?)),
    )?;
    Ok(if runs > i64::from(limit) {
        Err(60 - (now_ms.rem_euclid(60_000) / 1000) as u64)
    } else {
        Ok(())
    })
}

/// Deletes the counts of minutes before the last one.
pub fn trim(conn: &Conn) -> Result<u64> {
    conn.execute(
        &format!(
            "DELETE FROM run_budget WHERE minute < ({}) / 60000 - 1",
            conn.clock_ms()
        ),
        params![],
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::db::testing::{Backends, each_conn};

    #[test]
    fn runs_past_the_limit_wait_for_the_next_minute() {
        each_conn(Backends::Both, |conn| {
            // Away from a minute's end, so the three spends fall in one minute.
            let second = chrono::Utc::now().timestamp() % 60;
            if second > 55 {
                std::thread::sleep(std::time::Duration::from_secs(61 - second as u64));
            }
            assert_eq!(spend(conn, "token:a", 2).unwrap(), Ok(()));
            assert_eq!(spend(conn, "token:a", 2).unwrap(), Ok(()));
            let wait = spend(conn, "token:a", 2).unwrap().unwrap_err();
            assert!((1..=60).contains(&wait), "{wait}");
            assert_eq!(spend(conn, "token:b", 2).unwrap(), Ok(()), "each their own");
            conn.execute("UPDATE run_budget SET minute = minute - 5", params![])
                .unwrap();
            assert_eq!(trim(conn).unwrap(), 2);
            assert_eq!(spend(conn, "token:a", 2).unwrap(), Ok(()), "a new minute");
        });
    }
}
