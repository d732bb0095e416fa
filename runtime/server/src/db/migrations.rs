//! The schema history. Each step is one file in `migrations/`, additive and written with
//! `IF NOT EXISTS` so applying it twice is harmless; `PRAGMA user_version` records the step.

use rusqlite::Connection;
use rusqlite_migration::{M, Migrations};

/// The schema version this build writes and understands.
pub const SCHEMA_VERSION: u32 = 13;

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
];

fn migrations() -> Migrations<'static> {
    Migrations::new(STEPS.iter().map(|sql| M::up(sql)).collect())
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
        let conn = Connection::open_in_memory().unwrap();
        for sql in STEPS {
            conn.execute_batch(sql).unwrap();
            conn.execute_batch(sql).unwrap();
        }
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
            conn.execute_batch("CREATE TABLE future (x); PRAGMA user_version = 14;")
                .unwrap();
        }
        let before = std::fs::read(&path).unwrap();
        let mut conn = Connection::open(&path).unwrap();
        let err = migrate(&mut conn).unwrap_err().to_string();
        assert!(err.contains("schema version 14"), "{err}");
        drop(conn);
        assert_eq!(std::fs::read(&path).unwrap(), before);
    }
}
