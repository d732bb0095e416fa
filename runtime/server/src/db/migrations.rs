//! The schema history. Each step is one file in `migrations/`, additive and written with
//! `IF NOT EXISTS` so applying it twice is harmless; `PRAGMA user_version` records the step.
//! Columns added to existing tables, which SQLite cannot add `IF NOT EXISTS`, are added here
//! by [`add_missing_columns`], with the same guarantee.

use rusqlite::{Connection, Transaction};
use rusqlite_migration::{HookResult, M, Migrations};

/// The schema version this build writes and understands.
pub const SCHEMA_VERSION: u32 = 14;

const STEPS: [&str; SCHEMA_VERSION as usize] = [
    include_str!("../../../../migrations/0001_agent_profiles.sql"),
    include_str!("../../../../migrations/0002_traces.sql"),
    include_str!("../../../../migrations/0003_notes.sql"),
    include_str!("../../../../migrations/0004_tasks.sql"),
    include_str!("../../../../migrations/0005_trace_steps.sql"),
    include_str!("../../../../migrations/0006_adapter_kv.sql"),
    include_str!("../../../../migrations/0007_schedules.sql"),
    include_str!("../../../../migrations/0008_adapter_jobs.sql"),
    include_str!("../../../../migrations/0009_adapter_state.sql"),
    include_str!("../../../../migrations/0010_guildchat_feedback.sql"),
    include_str!("../../../../migrations/0011_task_indexes.sql"),
    include_str!("../../../../migrations/0012_trace_schedule_indexes.sql"),
    include_str!("../../../../migrations/0013_integration_verifications.sql"),
    include_str!("../../../../migrations/0014_adapter_quotas_and_job_attempts.sql"),
];

/// Columns step 14 adds: (table, column, definition).
const COLUMNS_14: &[(&str, &str, &str)] = &[
    // A task that is a scheduled run names its schedule.
    ("tasks", "schedule_name", "TEXT"),
    // How often a job has started, and not before when (unix ms) it may start again.
    ("adapter_jobs", "attempt", "INTEGER NOT NULL DEFAULT 0"),
    ("adapter_jobs", "run_after", "INTEGER"),
];

/// Adds each of `columns` its table does not have yet, then the indexes over them.
fn add_missing_columns(tx: &Transaction, columns: &[(&str, &str, &str)]) -> rusqlite::Result<()> {
    for (table, column, definition) in columns {
        let present: bool = tx.query_row(
            &format!("SELECT count(*) > 0 FROM pragma_table_info('{table}') WHERE name = ?1"),
            [column],
            |r| r.get(0),
        )?;
        if !present {
            tx.execute_batch(&format!(
                "ALTER TABLE {table} ADD COLUMN {column} {definition}"
            ))?;
        }
    }
    tx.execute_batch(
        "CREATE INDEX IF NOT EXISTS tasks_schedule_name ON tasks (schedule_name) \
         WHERE schedule_name IS NOT NULL;",
    )
}

fn step_14(tx: &Transaction) -> HookResult {
    Ok(add_missing_columns(tx, COLUMNS_14)?)
}

fn migrations() -> Migrations<'static> {
    Migrations::new(
        STEPS
            .iter()
            .enumerate()
            .map(|(i, sql)| match i + 1 {
                14 => M::up_with_hook(sql, step_14),
                _ => M::up(sql),
            })
            .collect(),
    )
}

/// Reads `PRAGMA user_version` without changing anything.
pub fn user_version(conn: &Connection) -> rusqlite::Result<u32> {
    conn.pragma_query_value(None, "user_version", |row| row.get(0))
}

/// Refuses a database written by a newer build before anything touches it.
pub fn ensure_not_newer(conn: &Connection) -> anyhow::Result<()> {
    let found = user_version(conn)?;
    anyhow::ensure!(
        found <= SCHEMA_VERSION,
        "the database has schema version {found}, newer than the {SCHEMA_VERSION} this build \
         understands; upgrade service-runtime or point --data-dir elsewhere (the file was not modified)"
    );
    Ok(())
}

/// Brings the schema up to [`SCHEMA_VERSION`], one transaction per step.
pub fn migrate(conn: &mut Connection) -> anyhow::Result<()> {
    ensure_not_newer(conn)?;
    migrations().to_latest(conn)?;
    Ok(())
}

#[cfg(test)]
pub(crate) fn migrate_to(conn: &mut Connection, version: u32) {
    migrations().to_version(conn, version as usize).unwrap();
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn history_is_valid() {
        migrations().validate().unwrap();
    }

    #[test]
    fn every_step_is_idempotent() {
        let mut conn = Connection::open_in_memory().unwrap();
        for sql in STEPS {
            conn.execute_batch(sql).unwrap();
            conn.execute_batch(sql).unwrap();
        }
        for _ in 0..2 {
            let tx = conn.transaction().unwrap();
            step_14(&tx).unwrap();
            tx.commit().unwrap();
        }
    }

    #[test]
    fn kv_usage_follows_every_write() {
        let mut conn = Connection::open_in_memory().unwrap();
        migrate(&mut conn).unwrap();
        let usage = |conn: &Connection| -> i64 {
            conn.query_row(
                "SELECT bytes FROM adapter_kv_usage WHERE adapter = 'a'",
                [],
                |r| r.get(0),
            )
            .unwrap()
        };
        let set = "INSERT INTO adapter_kv (adapter, key, value) VALUES ('a', ?1, ?2) \
                   ON CONFLICT (adapter, key) DO UPDATE SET value = excluded.value";
        conn.execute(set, ("k\u{e9}", vec![0u8; 10])).unwrap();
        assert_eq!(usage(&conn), 3 + 10, "key bytes, not characters");
        conn.execute(set, ("k\u{e9}", vec![0u8; 4])).unwrap();
        conn.execute(set, ("other", vec![0u8; 1])).unwrap();
        assert_eq!(usage(&conn), 3 + 4 + 5 + 1);
        conn.execute("DELETE FROM adapter_kv WHERE key = 'other'", [])
            .unwrap();
        assert_eq!(usage(&conn), 3 + 4);
    }

    /// A row for every table that exists at `version`, so an upgrade can prove it kept them.
    fn seed(conn: &Connection, version: u32) {
        let at = "2025-01-01T00:00:00.000Z";
        conn.execute(
            "INSERT INTO agent_profiles (name, system_prompt, created_at, updated_at) VALUES ('old', 'p', ?1, ?1)",
            [at],
        )
        .unwrap();
        if version >= 2 {
            conn.execute(
                "INSERT INTO traces (id, provider, model, prompt, status, created_at) VALUES ('t1', 'offline', 'm', 'hi', 'ok', ?1)",
                [at],
            )
            .unwrap();
        }
        if version >= 3 {
            conn.execute(
                "INSERT INTO notes (title, body, created_at, updated_at) VALUES ('groceries', 'oat milk', ?1, ?1)",
                [at],
            )
            .unwrap();
        }
        if version >= 4 {
            conn.execute(
                "INSERT INTO tasks (task_id, title, status, created_at, updated_at) VALUES ('k1', 'old task', 'completed', ?1, ?1)",
                [at],
            )
            .unwrap();
        }
        if version >= 5 {
            conn.execute(
                "INSERT INTO llm_calls (trace_id, step, provider, model, status, started_at, latency_ms) VALUES ('t1', 0, 'offline', 'm', 'ok', ?1, 5)",
                [at],
            )
            .unwrap();
        }
        if version >= 6 {
            conn.execute(
                "INSERT INTO adapter_kv (adapter, key, value) VALUES ('teamchat', 'event:1', x'01')",
                [],
            )
            .unwrap();
        }
        if version >= 7 {
            conn.execute(
                "INSERT INTO schedules (name, cron_expression, agent_profile_name, prompt, created_at, updated_at) VALUES ('s', '0 * * * *', 'old', 'p', ?1, ?1)",
                [at],
            )
            .unwrap();
        }
        if version >= 9 {
            conn.execute(
                "INSERT INTO adapter_state (name, enabled, updated_at) VALUES ('webhook', 0, ?1)",
                [at],
            )
            .unwrap();
        }
        if version >= 10 {
            conn.execute(
                "INSERT INTO guildchat_feedback (message_id, user_id, channel_id, value, updated_at) VALUES ('m', 'u', 'c', 'up', ?1)",
                [at],
            )
            .unwrap();
        }
    }

    fn count(conn: &Connection, table: &str) -> i64 {
        conn.query_row(&format!("SELECT count(*) FROM {table}"), [], |r| r.get(0))
            .unwrap()
    }

    #[test]
    fn upgrades_every_older_version_with_rows_intact() {
        for version in 1..SCHEMA_VERSION {
            let dir = tempfile::tempdir().unwrap();
            let path = dir.path().join("service.sqlite");
            {
                let mut conn = Connection::open(&path).unwrap();
                migrate_to(&mut conn, version);
                assert_eq!(user_version(&conn).unwrap(), version);
                seed(&conn, version);
            }
            let mut conn = Connection::open(&path).unwrap();
            migrate(&mut conn).unwrap();
            assert_eq!(user_version(&conn).unwrap(), SCHEMA_VERSION);

            let prompt: String = conn
                .query_row(
                    "SELECT system_prompt FROM agent_profiles WHERE name = 'old'",
                    [],
                    |r| r.get(0),
                )
                .unwrap();
            assert_eq!(prompt, "p", "profile lost upgrading from {version}");
            let expected = [
                ("traces", 2),
                ("notes", 3),
                ("tasks", 4),
                ("llm_calls", 5),
                ("adapter_kv", 6),
                ("schedules", 7),
                ("adapter_state", 9),
                ("guildchat_feedback", 10),
            ];
            for (table, since) in expected {
                let rows = i64::from(version >= since);
                assert_eq!(
                    count(&conn, table),
                    rows,
                    "{table} upgrading from {version}"
                );
            }
            if version >= 3 {
                let hits: i64 = conn
                    .query_row(
                        "SELECT count(*) FROM notes_fts WHERE notes_fts MATCH 'oat'",
                        [],
                        |r| r.get(0),
                    )
                    .unwrap();
                assert_eq!(hits, 1, "full-text index lost upgrading from {version}");
            }
        }
    }

    #[test]
    fn task_status_is_constrained() {
        let mut conn = Connection::open_in_memory().unwrap();
        migrate(&mut conn).unwrap();
        let bad = conn.execute(
            "INSERT INTO tasks (task_id, title, status, created_at, updated_at) VALUES ('x', 't', 'done', 'a', 'a')",
            [],
        );
        assert!(bad.is_err());
    }

    #[test]
    fn refuses_a_newer_database_without_touching_it() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("service.sqlite");
        {
            let conn = Connection::open(&path).unwrap();
            conn.execute_batch(&format!(
                "CREATE TABLE future (x); PRAGMA user_version = {};",
                SCHEMA_VERSION + 1
            ))
            .unwrap();
        }
        let before = std::fs::read(&path).unwrap();
        let mut conn = Connection::open(&path).unwrap();
        let err = migrate(&mut conn).unwrap_err().to_string();
        assert!(
            err.contains(&format!("schema version {}", SCHEMA_VERSION + 1)),
            "{err}"
        );
        drop(conn);
        assert_eq!(std::fs::read(&path).unwrap(), before);
    }
}
