//! The schema history: one ordered list of steps for both backends, one schema version. Each
//! step is a file in `migrations/` (SQLite) and `migrations/postgres/` (PostgreSQL), additive
//! and written with `IF NOT EXISTS`, so applying one twice is harmless; the version lives in
//! `PRAGMA user_version` (SQLite) or the `service_schema` table (PostgreSQL). PostgreSQL
//! support began at step 14, whose PostgreSQL file builds everything up to it.

use anyhow::ensure;

use super::conn::{Backend, Conn};
use crate::error::Result;

/// The schema version this build writes and understands.
pub const SCHEMA_VERSION: u32 = 27;

struct Step {
    sqlite: &'static str,
    /// `None` for steps before PostgreSQL support began.
    postgres: Option<&'static str>,
    /// Columns SQLite cannot add with `IF NOT EXISTS`: (table, column, definition), added
    /// here when missing, then `sqlite_after` (indexes over them).
    sqlite_columns: &'static [(&'static str, &'static str, &'static str)],
    sqlite_after: &'static str,
}

const fn sqlite_only(sqlite: &'static str) -> Step {
    Step {
        sqlite,
        postgres: None,
        sqlite_columns: &[],
        sqlite_after: "",
    }
}

macro_rules! sql {
    ($file:literal) => {
        include_str!(concat!("../../../../migrations/", $file))
    };
}

const STEPS: [Step; SCHEMA_VERSION as usize] = [
    sqlite_only(sql!("0001_agent_profiles.sql")),
    sqlite_only(sql!("0002_traces.sql")),
    sqlite_only(sql!("0003_notes.sql")),
    sqlite_only(sql!("0004_tasks.sql")),
    sqlite_only(sql!("0005_trace_steps.sql")),
    sqlite_only(sql!("0006_adapter_kv.sql")),
    sqlite_only(sql!("0007_schedules.sql")),
    sqlite_only(sql!("0008_adapter_jobs.sql")),
    sqlite_only(sql!("0009_adapter_state.sql")),
    sqlite_only(sql!("0010_guildchat_feedback.sql")),
    sqlite_only(sql!("0011_task_indexes.sql")),
    sqlite_only(sql!("0012_trace_schedule_indexes.sql")),
    sqlite_only(sql!("0013_integration_verifications.sql")),
    Step {
        sqlite: sql!("0014_adapter_quotas_and_job_attempts.sql"),
        postgres: Some(sql!("postgres/0014_baseline.sql")),
        sqlite_columns: &[
            // A task that is a scheduled run names its schedule.
            ("tasks", "schedule_name", "TEXT"),
            // How often a job has started, and not before when (unix ms) it may start again.
            ("adapter_jobs", "attempt", "INTEGER NOT NULL DEFAULT 0"),
            ("adapter_jobs", "run_after", "INTEGER"),
        ],
        sqlite_after: "CREATE INDEX IF NOT EXISTS tasks_schedule_name ON tasks (schedule_name) \
                       WHERE schedule_name IS NOT NULL;",
    },
    Step {
        sqlite: sql!("0015_replicas.sql"),
        postgres: Some(sql!("postgres/0015_replicas.sql")),
        sqlite_columns: &[
            // The replica running a job, and until when (unix ms, the database's clock) its
            // lease holds; past that another replica takes the job over.
            ("adapter_jobs", "lease_holder", "TEXT"),
            ("adapter_jobs", "lease_until", "INTEGER"),
            // The replica running a task or a run, so one that stops is told apart from one
            // that is still working.
            ("tasks", "runner", "TEXT"),
            ("traces", "runner", "TEXT"),
        ],
        sqlite_after: "",
    },
    Step {
        sqlite: sql!("0016_job_trace_context.sql"),
        postgres: Some(sql!("postgres/0016_job_trace_context.sql")),
        // The trace context of the request that enqueued a job.
        sqlite_columns: &[("adapter_jobs", "traceparent", "TEXT")],
        sqlite_after: "",
    },
    Step {
        sqlite: sql!("0017_conversations.sql"),
        postgres: Some(sql!("postgres/0017_conversations.sql")),
        sqlite_columns: &[],
        sqlite_after: "",
    },
    Step {
        sqlite: sql!("0018_approvals.sql"),
        postgres: Some(sql!("postgres/0018_approvals.sql")),
        sqlite_columns: &[],
        sqlite_after: "",
    },
    Step {
        sqlite: sql!("0019_adapter_approvals.sql"),
        postgres: Some(sql!("postgres/0019_adapter_approvals.sql")),
        sqlite_columns: &[
            // What started the paused run (an adapter's name, `chat`, `scheduler`...).
            ("approvals", "source", "TEXT"),
            // Where the run got to once it went on (JSON), for the adapter's job to read.
            ("approvals", "outcome", "TEXT"),
            // The task of the job queued for the adapter once the run went on.
            ("approvals", "then_task", "TEXT"),
        ],
        sqlite_after: "CREATE INDEX IF NOT EXISTS approvals_then_task ON approvals (then_task);",
    },
    Step {
        sqlite: sql!("0020_adapter_activity.sql"),
        postgres: Some(sql!("postgres/0020_adapter_activity.sql")),
        sqlite_columns: &[],
        sqlite_after: "",
    },
    Step {
        sqlite: sql!("0021_access_tokens.sql"),
        postgres: Some(sql!("postgres/0021_access_tokens.sql")),
        sqlite_columns: &[
            // Who decided an approval: `owner`, `token:<name>`, `adapter:<name>`.
            ("approvals", "decided_by", "TEXT"),
        ],
        sqlite_after: "",
    },
    Step {
        sqlite: sql!("0022_people.sql"),
        postgres: Some(sql!("postgres/0022_people.sql")),
        sqlite_columns: &[
            // Who started it: `owner`, `user:<name>`, `token:<name>`, or none (an adapter's
            // thread, or before v0.14).
            ("conversations", "started_by", "TEXT"),
            // Who may use the agent besides admins (JSON `{roles, groups}`); null: everyone.
            ("agent_profiles", "access", "TEXT"),
            // Who asked for the run (as conversations say it); none for adapters' and
            // schedules' runs.
            ("tasks", "started_by", "TEXT"),
            ("traces", "started_by", "TEXT"),
        ],
        sqlite_after: "CREATE INDEX IF NOT EXISTS conversations_started_by ON conversations (started_by);",
    },
    Step {
        sqlite: sql!("0023_runs.sql"),
        postgres: Some(sql!("postgres/0023_runs.sql")),
        sqlite_columns: &[],
        sqlite_after: "",
    },
    Step {
        sqlite: sql!("0024_run_webhooks.sql"),
        postgres: Some(sql!("postgres/0024_run_webhooks.sql")),
        sqlite_columns: &[],
        sqlite_after: "",
    },
    Step {
        sqlite: sql!("0025_adapter_recordings.sql"),
        postgres: Some(sql!("postgres/0025_adapter_recordings.sql")),
        sqlite_columns: &[],
        sqlite_after: "",
    },
    Step {
        sqlite: sql!("0026_adapter_shadows.sql"),
        postgres: Some(sql!("postgres/0026_adapter_shadows.sql")),
        sqlite_columns: &[],
        sqlite_after: "",
    },
    Step {
        sqlite: sql!("0027_single_statement_writes.sql"),
        postgres: Some(sql!("postgres/0027_single_statement_writes.sql")),
        sqlite_columns: &[],
        sqlite_after: "",
    },
];

/// Serializes replicas migrating one PostgreSQL database at once (an advisory lock key).
const MIGRATION_LOCK: i64 = 0x5e7_51ce;

/// The schema version of the database, without changing anything.
pub(crate) fn version(conn: &Conn) -> Result<u32> {
    match conn.backend() {
        Backend::Sqlite => conn.query_one("PRAGMA user_version", crate::params![], |r| r.get(0)),
        Backend::Postgres => {
            let exists: bool = conn.query_one(
                "SELECT to_regclass('service_schema') IS NOT NULL",
                crate::params![],
                |r| r.get(0),
            )?;
            if !exists {
                return Ok(0);
            }
            Ok(conn
                .query_opt(
                    "SELECT version FROM service_schema",
                    crate::params![],
                    |r| r.get(0),
                )?
                .unwrap_or(0))
        }
    }
}

/// Refuses a database written by a newer build before anything touches it.
pub(crate) fn ensure_not_newer(conn: &Conn) -> anyhow::Result<()> {
    let found = version(conn)?;
    ensure!(
        found <= SCHEMA_VERSION,
        "the database has schema version {found}, newer than the {SCHEMA_VERSION} this build \
         understands; upgrade service-runtime or point it at another database (nothing was \
         modified)"
    );
    Ok(())
}

/// Brings the schema up to [`SCHEMA_VERSION`], one transaction per step.
pub(crate) fn migrate(conn: &mut Conn) -> anyhow::Result<()> {
    migrate_to(conn, SCHEMA_VERSION)
}

pub(crate) fn migrate_to(conn: &mut Conn, target: u32) -> anyhow::Result<()> {
    let postgres = conn.backend() == Backend::Postgres;
    if postgres {
        conn.query_one(
            "SELECT 1 FROM (SELECT pg_advisory_lock(?1)) locked",
            crate::params![MIGRATION_LOCK],
            |_| Ok(()),
        )?;
    }
    let migrated = apply_missing(conn, target);
    if postgres {
        conn.query_one(
            "SELECT pg_advisory_unlock(?1)",
            crate::params![MIGRATION_LOCK],
            |_| Ok(()),
        )?;
    }
    migrated
}

fn apply_missing(conn: &mut Conn, target: u32) -> anyhow::Result<()> {
    ensure_not_newer(conn)?;
    let found = version(conn)?;
    for (number, step) in (1..=target).zip(&STEPS) {
        if number <= found {
            continue;
        }
        let sql = match conn.backend() {
            Backend::Sqlite => step.sqlite,
            Backend::Postgres => match step.postgres {
                Some(sql) => sql,
                None => continue,
            },
        };
        conn.transaction(|tx| -> Result<()> {
            tx.batch(sql)?;
            if tx.backend() == Backend::Sqlite {
                add_missing_columns(tx, step.sqlite_columns)?;
                tx.batch(step.sqlite_after)?;
            }
            set_version(tx, number)
        })?;
    }
    Ok(())
}

fn add_missing_columns(conn: &Conn, columns: &[(&str, &str, &str)]) -> Result<()> {
    for (table, column, definition) in columns {
        let present: bool = conn.query_one(
            &format!("SELECT count(*) > 0 FROM pragma_table_info('{table}') WHERE name = ?1"),
            crate::params![column],
            |r| r.get(0),
        )?;
        if !present {
            conn.batch(&format!(
                "ALTER TABLE {table} ADD COLUMN {column} {definition}"
            ))?;
        }
    }
    Ok(())
}

fn set_version(conn: &Conn, version: u32) -> Result<()> {
    match conn.backend() {
        // Pragmas take no parameters; `version` is a number from this module.
        Backend::Sqlite => conn.batch(&format!("PRAGMA user_version = {version}")),
        Backend::Postgres => {
            conn.batch(
                "CREATE TABLE IF NOT EXISTS service_schema (version BIGINT NOT NULL); \
                 DELETE FROM service_schema;",
            )?;
            conn.execute(
                "INSERT INTO service_schema (version) VALUES (?1)",
                crate::params![version],
            )
            .map(drop)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::db::testing::{self, Backends};

    #[test]
    fn every_step_is_idempotent() {
        let conn = rusqlite::Connection::open_in_memory().unwrap();
        let conn = Conn::sqlite(&conn);
        for step in &STEPS {
            conn.batch(step.sqlite).unwrap();
            conn.batch(step.sqlite).unwrap();
            add_missing_columns(&conn, step.sqlite_columns).unwrap();
            add_missing_columns(&conn, step.sqlite_columns).unwrap();
            conn.batch(step.sqlite_after).unwrap();
        }
        testing::each_backend(Backends::PostgresOnly, |db| {
            db.blocking(|conn| {
                for sql in STEPS.iter().filter_map(|s| s.postgres) {
                    conn.batch(sql)?;
                }
                Ok(())
            })
            .unwrap();
        });
    }

    #[test]
    fn kv_usage_follows_every_write() {
        testing::each_backend(Backends::Both, |db| {
            db.blocking(|conn| {
                let usage = |conn: &Conn| -> i64 {
                    conn.query_one(
                        "SELECT bytes FROM adapter_kv_usage WHERE adapter = 'a'",
                        crate::params![],
                        |r| r.get(0),
                    )
                    .unwrap()
                };
                let set = "INSERT INTO adapter_kv (adapter, key, value) VALUES ('a', ?1, ?2) \
                           ON CONFLICT (adapter, key) DO UPDATE SET value = excluded.value";
                conn.execute(set, crate::params!["k\u{e9}", vec![0u8; 10]])?;
                assert_eq!(usage(conn), 3 + 10, "key bytes, not characters");
                conn.execute(set, crate::params!["k\u{e9}", vec![0u8; 4]])?;
                conn.execute(set, crate::params!["other", vec![0u8; 1]])?;
                assert_eq!(usage(conn), 3 + 4 + 5 + 1);
                conn.execute(
                    "DELETE FROM adapter_kv WHERE key = 'other'",
                    crate::params![],
                )?;
                assert_eq!(usage(conn), 3 + 4);
                Ok(())
            })
            .unwrap();
        });
    }

    /// A row for every table that exists at `version`, so an upgrade can prove it kept them.
    fn seed(conn: &rusqlite::Connection, version: u32) {
        let at = "2025-01-01T00:00:00.000Z";
        let rows = [
            (
                1,
                "INSERT INTO agent_profiles (name, system_prompt, created_at, updated_at) VALUES ('old', 'p', ?1, ?1)",
            ),
            (
                2,
                "INSERT INTO traces (id, provider, model, prompt, status, created_at) VALUES ('t1', 'offline', 'm', 'hi', 'ok', ?1)",
            ),
            (
                3,
                "INSERT INTO notes (title, body, created_at, updated_at) VALUES ('groceries', 'oat milk', ?1, ?1)",
            ),
            (
                4,
                "INSERT INTO tasks (task_id, title, status, created_at, updated_at) VALUES ('k1', 'old task', 'completed', ?1, ?1)",
            ),
            (
                5,
                "INSERT INTO llm_calls (trace_id, step, provider, model, status, started_at, latency_ms) VALUES ('t1', 0, 'offline', 'm', 'ok', ?1, 5)",
            ),
            (
                6,
                "INSERT INTO adapter_kv (adapter, key, value, expires_at) VALUES ('teamchat', 'event:1', x'01', length(?1) * 0)",
            ),
            (
                7,
                "INSERT INTO schedules (name, cron_expression, agent_profile_name, prompt, created_at, updated_at) VALUES ('s', '0 * * * *', 'old', 'p', ?1, ?1)",
            ),
            (
                9,
                "INSERT INTO adapter_state (name, enabled, updated_at) VALUES ('webhook', 0, ?1)",
            ),
            (
                10,
                "INSERT INTO guildchat_feedback (message_id, user_id, channel_id, value, updated_at) VALUES ('m', 'u', 'c', 'up', ?1)",
            ),
        ];
        for (since, sql) in rows {
            if version >= since {
                conn.execute(sql, [at]).unwrap();
            }
        }
    }

    fn count(conn: &Conn, table: &str) -> i64 {
        conn.query_one(
            &format!("SELECT count(*) FROM {table}"),
            crate::params![],
            |r| r.get(0),
        )
        .unwrap()
    }

    #[test]
    fn upgrades_every_older_sqlite_version_with_rows_intact() {
        for version in 1..SCHEMA_VERSION {
            let dir = tempfile::tempdir().unwrap();
            let path = dir.path().join("service.sqlite");
            {
                let raw = rusqlite::Connection::open(&path).unwrap();
                migrate_to(&mut Conn::sqlite(&raw), version).unwrap();
                assert_eq!(super::version(&Conn::sqlite(&raw)).unwrap(), version);
                seed(&raw, version);
            }
            let raw = rusqlite::Connection::open(&path).unwrap();
            let mut conn = Conn::sqlite(&raw);
            migrate(&mut conn).unwrap();
            assert_eq!(super::version(&conn).unwrap(), SCHEMA_VERSION);

            let prompt: String = conn
                .query_one(
                    "SELECT system_prompt FROM agent_profiles WHERE name = 'old'",
                    crate::params![],
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
                let hits = count(&conn, "notes_fts WHERE notes_fts MATCH 'oat'");
                assert_eq!(hits, 1, "full-text index lost upgrading from {version}");
            }
        }
    }

    #[test]
    fn task_status_is_constrained() {
        testing::each_backend(Backends::Both, |db| {
            let bad = db.blocking(|conn| {
                conn.execute(
                    "INSERT INTO tasks (task_id, title, status, created_at, updated_at) \
                     VALUES ('x', 't', 'done', 'a', 'a')",
                    crate::params![],
                )
            });
            assert!(bad.is_err());
        });
    }

    #[test]
    fn refuses_a_newer_sqlite_database_without_touching_it() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("service.sqlite");
        {
            let conn = rusqlite::Connection::open(&path).unwrap();
            conn.execute_batch(&format!(
                "CREATE TABLE future (x); PRAGMA user_version = {};",
                SCHEMA_VERSION + 1
            ))
            .unwrap();
        }
        let before = std::fs::read(&path).unwrap();
        let raw = rusqlite::Connection::open(&path).unwrap();
        let err = migrate(&mut Conn::sqlite(&raw)).unwrap_err().to_string();
        assert!(
            err.contains(&format!("schema version {}", SCHEMA_VERSION + 1)),
            "{err}"
        );
        drop(raw);
        assert_eq!(std::fs::read(&path).unwrap(), before);
    }

    #[test]
    fn refuses_a_newer_postgres_database_without_touching_it() {
        testing::each_backend(Backends::PostgresOnly, |db| {
            db.blocking(|conn| {
                conn.execute(
                    "UPDATE service_schema SET version = ?1",
                    crate::params![SCHEMA_VERSION + 1],
                )
            })
            .unwrap();
            let err = db
                .blocking(|conn| migrate(conn).map_err(crate::error::Error::Internal))
                .unwrap_err()
                .to_string();
            assert!(
                err.contains(&format!("schema version {}", SCHEMA_VERSION + 1)),
                "{err}"
            );
            let tables: i64 = db
                .blocking(|conn| {
                    conn.query_one(
                        "SELECT count(*) FROM information_schema.tables WHERE table_schema = 'public'",
                        crate::params![],
                        |r| r.get(0),
                    )
                })
                .unwrap();
            assert!(tables > 10);
        });
    }
}
