//! Schedules in the database. Timestamps are UTC RFC 3339 with milliseconds, fixed width, so text
//! comparison is time comparison (the tick's due query relies on it).

use chrono::{DateTime, SecondsFormat, Utc};
use std::collections::HashMap;

use serde::Serialize;

use super::cron::CronExpr;
use super::plan::CatchUp;
use crate::db::{self, Conn, Row};
use crate::error::{Error, Result};
use crate::params;

#[derive(Debug, Clone, PartialEq, Eq, Serialize, utoipa::ToSchema)]
pub struct Schedule {
    pub name: String,
    pub cron_expression: String,
    pub agent_profile_name: String,
    pub prompt: String,
    pub enabled: bool,
    pub catch_up_policy: String,
    pub last_run_at: Option<String>,
    pub next_run_at: Option<String>,
    pub last_trace_id: Option<String>,
    pub created_at: String,
    pub updated_at: String,
}

pub fn timestamp(at: DateTime<Utc>) -> String {
    at.to_rfc3339_opts(SecondsFormat::Millis, true)
}

pub fn parse_timestamp(text: &str) -> Option<DateTime<Utc>> {
    DateTime::parse_from_rfc3339(text)
        .ok()
        .map(|t| t.with_timezone(&Utc))
}

const MAX_NAME: usize = 64;

/// A schedule name: non-empty, at most 64 characters, no control characters or edge spaces.
pub(crate) fn validate_name(name: &str) -> Result<()> {
    if name.trim().is_empty()
        || name.trim() != name
        || name.chars().count() > MAX_NAME
        || name.chars().any(char::is_control)
    {
        return Err(Error::invalid(format!(
            "invalid schedule name {name:?}: use 1 to {MAX_NAME} characters without leading or trailing spaces"
        )));
    }
    Ok(())
}

pub(crate) fn validate_prompt(prompt: &str) -> Result<()> {
    if prompt.trim().is_empty() {
        return Err(Error::invalid("the prompt must not be empty"));
    }
    Ok(())
}

pub struct NewSchedule<'a> {
    pub name: &'a str,
    pub cron: &'a CronExpr,
    pub agent: &'a str,
    pub prompt: &'a str,
    pub catch_up: CatchUp,
    pub enabled: bool,
    pub next_run_at: Option<DateTime<Utc>>,
}

const COLUMNS: &str = "name, cron_expression, agent_profile_name, prompt, enabled, catch_up_policy, \
    last_run_at, next_run_at, last_trace_id, created_at, updated_at";

fn from_row(row: &Row<'_>) -> Result<Schedule> {
    Ok(Schedule {
        name: row.get(0)?,
        cron_expression: row.get(1)?,
        agent_profile_name: row.get(2)?,
        prompt: row.get(3)?,
        enabled: row.get(4)?,
        catch_up_policy: row.get(5)?,
        last_run_at: row.get(6)?,
        next_run_at: row.get(7)?,
        last_trace_id: row.get(8)?,
        created_at: row.get(9)?,
        updated_at: row.get(10)?,
    })
}

fn not_found(name: &str) -> Error {
    Error::not_found(format!("no schedule named {name:?}"))
}

pub fn create(conn: &Conn, new: &NewSchedule<'_>) -> Result<Schedule> {
    validate_name(new.name)?;
    validate_prompt(new.prompt)?;
    let now = db::now();
    conn.query_opt(
        &format!(
            "INSERT INTO schedules ({COLUMNS}) VALUES (?1, ?2, ?3, ?4, ?5, ?6, NULL, ?7, NULL, ?8, ?8) \
             ON CONFLICT (name) DO NOTHING RETURNING {COLUMNS}"
        ),
        params![
            new.name,
            new.cron.canonical(),
            new.agent,
            new.prompt,
            new.enabled,
            new.catch_up.as_str(),
            new.next_run_at.map(timestamp),
            now
        ],
        from_row,
    )?
    .ok_or_else(|| Error::conflict(format!("a schedule named {:?} already exists", new.name)))
}

pub fn get(conn: &Conn, name: &str) -> Result<Option<Schedule>> {
    conn.query_opt(
        &format!("SELECT {COLUMNS} FROM schedules WHERE name = ?1"),
        params![name],
        from_row,
    )
}

pub fn require(conn: &Conn, name: &str) -> Result<Schedule> {
    get(conn, name)?.ok_or_else(|| not_found(name))
}

pub fn list(conn: &Conn) -> Result<Vec<Schedule>> {
    conn.query(
        &format!("SELECT {COLUMNS} FROM schedules ORDER BY name"),
        params![],
        from_row,
    )
}

/// The names of the schedules that run the profile `profile`, sorted.
pub(crate) fn naming_profile(conn: &Conn, profile: &str) -> Result<Vec<String>> {
    conn.query(
        "SELECT name FROM schedules WHERE agent_profile_name = ?1 ORDER BY name",
        params![profile],
        |row| row.get(0),
    )
}

/// Enabled schedules whose next run is unset or at or before `now`, via the `schedules_due` index.
pub fn due(conn: &Conn, now: DateTime<Utc>) -> Result<Vec<Schedule>> {
    conn.query(
        &format!(
            "SELECT {COLUMNS} FROM schedules WHERE enabled = TRUE \
             AND (next_run_at IS NULL OR next_run_at <= ?1)"
        ),
        params![timestamp(now)],
        from_row,
    )
}

/// Changes of `schedule edit`; `None` keeps a field.
#[derive(Default)]
pub struct Edit<'a> {
    /// A new cron expression with the next run it implies.
    pub cron: Option<(&'a CronExpr, Option<DateTime<Utc>>)>,
    pub agent: Option<&'a str>,
    pub prompt: Option<&'a str>,
    pub catch_up: Option<CatchUp>,
}

pub fn edit(conn: &mut Conn, name: &str, edit: &Edit<'_>) -> Result<Schedule> {
    if let Some(prompt) = edit.prompt {
        validate_prompt(prompt)?;
    }
    conn.transaction(|tx| {
        require(tx, name)?;
        let now = db::now();
        if let Some((cron, next)) = edit.cron {
            tx.execute(
                "UPDATE schedules SET cron_expression = ?2, next_run_at = ?3, updated_at = ?4 WHERE name = ?1",
                params![name, cron.canonical(), next.map(timestamp), now],
            )?;
        }
        for (column, value) in [
            ("agent_profile_name", edit.agent),
            ("prompt", edit.prompt),
            ("catch_up_policy", edit.catch_up.map(CatchUp::as_str)),
        ] {
            if let Some(value) = value {
                tx.execute(
                    &format!("UPDATE schedules SET {column} = ?2, updated_at = ?3 WHERE name = ?1"),
                    params![name, value, now],
                )?;
            }
        }
        require(tx, name)
    })
}

/// Enables (with a fresh next run, so a backlog from while it was off is not replayed) or
/// disables a schedule.
pub fn set_enabled(
    conn: &Conn,
    name: &str,
    enabled: bool,
    next_run_at: Option<DateTime<Utc>>,
) -> Result<Schedule> {
    let returned = if enabled {
        conn.query_opt(
            &format!(
                "UPDATE schedules SET enabled = TRUE, next_run_at = ?2, updated_at = ?3 \
                 WHERE name = ?1 RETURNING {COLUMNS}"
            ),
            params![name, next_run_at.map(timestamp), db::now()],
            from_row,
        )?
    } else {
        conn.query_opt(
            &format!(
                "UPDATE schedules SET enabled = FALSE, updated_at = ?2 WHERE name = ?1 \
                 RETURNING {COLUMNS}"
            ),
            params![name, db::now()],
            from_row,
        )?
    };
    returned.ok_or_else(|| not_found(name))
}

pub fn delete(conn: &Conn, name: &str) -> Result<()> {
    if conn.execute("DELETE FROM schedules WHERE name = ?1", params![name])? == 0 {
        return Err(not_found(name));
    }
    Ok(())
}

/// Persists a planning decision: the new next run, and the run time when it fires.
pub(crate) fn record_plan(
    conn: &Conn,
    name: &str,
    fired_at: Option<DateTime<Utc>>,
    next_run_at: DateTime<Utc>,
) -> Result<()> {
    conn.execute(
        "UPDATE schedules SET last_run_at = coalesce(?2, last_run_at), next_run_at = ?3 WHERE name = ?1",
        params![name, fired_at.map(timestamp), timestamp(next_run_at)],
    )?;
    Ok(())
}

/// Stamps a run started outside the cron as the last run.
pub(crate) fn set_last_run(conn: &Conn, name: &str, at: DateTime<Utc>) -> Result<()> {
    conn.execute(
        "UPDATE schedules SET last_run_at = ?2 WHERE name = ?1",
        params![name, timestamp(at)],
    )?;
    Ok(())
}

pub(crate) fn set_last_trace(conn: &Conn, name: &str, trace_id: &str) -> Result<()> {
    conn.execute(
        "UPDATE schedules SET last_trace_id = ?2 WHERE name = ?1",
        params![name, trace_id],
    )?;
    Ok(())
}

/// Runs that have not ended, by schedule name, with their task id: the server's and those of
/// `schedule run` in another process alike, so neither starts a run over the other.
pub fn runs_in_progress(conn: &Conn) -> Result<HashMap<String, String>> {
    Ok(conn
        .query(
            "SELECT schedule_name, task_id FROM tasks WHERE status IN ('pending', 'running') \
             AND schedule_name IS NOT NULL",
            params![],
            |row| Ok((row.get(0)?, row.get(1)?)),
        )?
        .into_iter()
        .collect())
}
