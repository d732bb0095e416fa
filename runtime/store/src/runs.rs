//! Runs started through the API: each is a task (its status is the task's), in a conversation,
//! with its trace named before it starts, and the frames of its stream in order, so a client
//! that lost the stream re-joins it on any replica.

use serde::Serialize;
use serde_json::Value;

use crate::db::{self, Conn, Row};
use crate::error::{Error, Result};
use crate::params;
use crate::run_webhooks;
use crate::tasks::{self, NewTask, Task, TaskStatus};

/// A run's status as the runs API says it: the task's, with `waiting_for_approval` for a
/// pending task whose run waits for a person.
pub const STATUSES: [&str; 6] = [
    "pending",
    "running",
    "waiting_for_approval",
    "completed",
    "error",
    "cancelled",
];

#[derive(Debug, Clone, Serialize, utoipa::ToSchema)]
pub struct Run {
    pub run_id: String,
    pub conversation_id: String,
    pub trace_id: String,
    /// One of [`STATUSES`].
    #[schema(
        value_type = String,
        pattern = "^(pending|running|waiting_for_approval|completed|error|cancelled)$"
    )]
    pub status: &'static str,
    pub agent: Option<String>,
    /// The caller's own JSON object, as given.
    pub metadata: Option<Value>,
    pub started_by: Option<String>,
    pub created_at: String,
    pub updated_at: String,
    /// Why it failed, or what cancelled it (the task's notes).
    pub description: Option<String>,
}

/// What a new run records.
pub struct NewRun<'a> {
    pub title: &'a str,
    pub agent: &'a str,
    pub conversation_id: &'a str,
    pub trace_id: &'a str,
    pub metadata: Option<&'a Value>,
    pub runner: &'a str,
    pub started_by: Option<&'a str>,
    /// Called when the run ends (see [`crate::run_webhooks`]).
    pub webhook: Option<&'a str>,
}

/// Records a run and its task (`running`); returns the run's id (the task's).
pub fn create(conn: &mut Conn, run: &NewRun<'_>) -> Result<String> {
    conn.transaction(|tx| {
        let task_id = tasks::create_running(
            tx,
            &NewTask {
                title: run.title,
                description: None,
                agent_profile_name: Some(run.agent),
                trace_id: Some(run.trace_id),
                schedule_name: None,
                runner: Some(run.runner),
                started_by: run.started_by,
            },
        )?;
        tx.execute_later(
            "INSERT INTO runs (task_id, conversation_id, trace_id, metadata, created_at) \
             VALUES (?1, ?2, ?3, ?4, ?5)",
            params![
                task_id,
                run.conversation_id,
                run.trace_id,
                run.metadata.map(Value::to_string),
                db::now()
            ],
        )?;
        if let Some(url) = run.webhook {
            run_webhooks::add(tx, &task_id, url)?;
        }
        Ok(task_id)
    })
}

/// The run status of a task.
pub fn status_of(task: &Task) -> &'static str {
    match task.status {
        TaskStatus::Pending if task.waiting_for.as_deref() == Some("approval") => {
            "waiting_for_approval"
        }
        status => status.as_str(),
    }
}

/// A run's own columns: task id, conversation, trace, metadata.
type Keys = (String, String, String, Option<String>);

fn keys(row: &Row<'_>) -> Result<Keys> {
    Ok((row.get(0)?, row.get(1)?, row.get(2)?, row.get(3)?))
}

fn assemble(
    task: Task,
    conversation_id: String,
    trace_id: String,
    metadata: Option<String>,
) -> Run {
    Run {
        status: status_of(&task),
        run_id: task.task_id,
        conversation_id,
        trace_id,
        agent: task.agent_profile_name,
        // Written by this module from a JSON value.
        metadata: metadata.and_then(|m| serde_json::from_str(&m).ok()),
        started_by: task.started_by,
        created_at: task.created_at,
        updated_at: task.updated_at,
        description: task.description,
    }
}

pub fn get(conn: &Conn, run_id: &str) -> Result<Option<Run>> {
    let found = conn.query_opt(
        "SELECT task_id, conversation_id, trace_id, metadata FROM runs WHERE task_id = ?1",
        params![run_id],
        keys,
    )?;
    let Some((task_id, conversation_id, trace_id, metadata)) = found else {
        return Ok(None);
    };
    let task = tasks::get(conn, &task_id)?
        .ok_or_else(|| Error::not_found(format!("no run {run_id:?}")))?;
    Ok(Some(assemble(task, conversation_id, trace_id, metadata)))
}

/// Which runs a list shows.
#[derive(Debug, Default)]
pub struct Filter {
    /// One of [`STATUSES`].
    pub status: Option<String>,
    pub conversation_id: Option<String>,
    pub trace_id: Option<String>,
    /// Only runs this principal started (`user:<name>`...); none: everyone's.
    pub started_by: Option<String>,
    /// Only runs of this agent.
    pub agent: Option<String>,
    /// Only runs whose status changed after this time (as [`db::now`] writes it).
    pub updated_after: Option<String>,
}

/// A page of runs, newest first, and how many match.
pub fn list(conn: &Conn, filter: &Filter, limit: u32, offset: u32) -> Result<(Vec<Run>, i64)> {
    if let Some(status) = &filter.status
        && !STATUSES.contains(&status.as_str())
    {
        return Err(Error::field(
            "status",
            format!(
                "unknown run status {status:?}; expected one of {}",
                STATUSES.join(", ")
            ),
        ));
    }
    // The task's status, and whether a pending one waits for a person.
    let status_sql = "CASE WHEN t.status = 'pending' AND EXISTS (SELECT 1 FROM approvals a \
         WHERE a.task_id = t.task_id AND a.status = 'pending') \
         THEN 'waiting_for_approval' ELSE t.status END";
    let filter_sql = format!(
        "FROM runs r JOIN tasks t ON t.task_id = r.task_id \
         WHERE (CAST(?1 AS TEXT) IS NULL OR {status_sql} = ?1) \
         AND (CAST(?2 AS TEXT) IS NULL OR r.conversation_id = ?2) \
         AND (CAST(?3 AS TEXT) IS NULL OR t.started_by = ?3) \
         AND (CAST(?4 AS TEXT) IS NULL OR r.trace_id = ?4) \
         AND (CAST(?5 AS TEXT) IS NULL OR t.agent_profile_name = ?5) \
         AND (CAST(?6 AS TEXT) IS NULL OR t.updated_at > ?6)"
    );
    let keys = conn.query(
        &format!(
            "SELECT r.task_id, r.conversation_id, r.trace_id, r.metadata {filter_sql} \
             ORDER BY r.created_at DESC, r.task_id DESC LIMIT ?7 OFFSET ?8"
        ),
        params![
            filter.status,
            filter.conversation_id,
            filter.started_by,
            filter.trace_id,
            filter.agent,
            filter.updated_after,
            limit,
            offset
        ],
        keys,
    )?;
    let total = conn.query_one(
        &format!("SELECT count(*) {filter_sql}"),
        params![
            filter.status,
            filter.conversation_id,
            filter.started_by,
            filter.trace_id,
            filter.agent,
            filter.updated_after
        ],
        |r| r.get(0),
    )?;
    // The page's tasks in one statement, not one each.
    let ids: Vec<String> = keys.iter().map(|key| key.0.clone()).collect();
    let mut tasks: std::collections::HashMap<String, Task> = tasks::get_many(conn, &ids)?
        .into_iter()
        .map(|task| (task.task_id.clone(), task))
        .collect();
    let runs = keys
        .into_iter()
        .filter_map(|(task_id, conversation_id, trace_id, metadata)| {
            let task = tasks.remove(&task_id)?;
            Some(assemble(task, conversation_id, trace_id, metadata))
        })
        .collect();
    Ok((runs, total))
}

/// Appends frames `first..` of a run's stream (a frame already there is kept).
pub fn append_events(conn: &mut Conn, run_id: &str, first: i64, frames: &[String]) -> Result<()> {
    conn.transaction(|tx| {
        for (seq, frame) in (first..).zip(frames) {
            tx.execute_later(
                "INSERT INTO run_events (task_id, seq, frame) VALUES (?1, ?2, ?3) \
                 ON CONFLICT (task_id, seq) DO NOTHING",
                params![run_id, seq, frame],
            )?;
        }
        Ok(())
    })
}

/// How a run ended, for its task.
#[derive(Debug, Clone)]
pub struct Finish {
    /// `pending` for a run waiting for a person (it finishes the task once it goes on).
    pub status: TaskStatus,
    pub trace_id: Option<String>,
    /// Why it failed, added to the task's description.
    pub note: Option<String>,
}

/// Records how a run ended on its task (a cancelled one stays cancelled) and writes its last
/// frames `first..`, in one transaction: a reader never sees it ended without its last frame.
pub fn finish(
    conn: &mut Conn,
    run_id: &str,
    finish: &Finish,
    first: i64,
    frames: &[String],
) -> Result<()> {
    conn.transaction(|tx| {
        append_events(tx, run_id, first, frames)?;
        tasks::record_run(tx, run_id, finish.status, finish.trace_id.as_deref())?;
        match &finish.note {
            Some(note) => tasks::append_note(tx, run_id, note),
            None => Ok(()),
        }
    })
}

/// Up to `limit` frames after `after`, in order.
pub fn events_after(
    conn: &Conn,
    run_id: &str,
    after: i64,
    limit: u32,
) -> Result<Vec<(i64, String)>> {
    conn.query(
        "SELECT seq, frame FROM run_events WHERE task_id = ?1 AND seq > ?2 \
         ORDER BY seq LIMIT ?3",
        params![run_id, after, limit],
        |row| Ok((row.get(0)?, row.get(1)?)),
    )
}

/// The last frame's number (0: none yet).
pub fn last_event(conn: &Conn, run_id: &str) -> Result<i64> {
    conn.query_one(
        "SELECT coalesce(max(seq), 0) FROM run_events WHERE task_id = ?1",
        params![run_id],
        |r| r.get(0),
    )
}

/// Deletes the frames of one run that ended before `cutoff` (its task's last change), so a
/// statement holds the database for one run's frames at most; returns how many went.
pub fn prune_events(conn: &Conn, cutoff: &str) -> Result<u64> {
    conn.execute(
        "DELETE FROM run_events WHERE task_id IN (SELECT t.task_id FROM tasks t \
         JOIN runs r ON r.task_id = t.task_id \
         WHERE t.status IN ('completed', 'error', 'cancelled') AND t.updated_at < ?1 \
         AND EXISTS (SELECT 1 FROM run_events e WHERE e.task_id = t.task_id) LIMIT 1)",
        params![cutoff],
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::db::testing::{Backends, each_conn};
    use serde_json::json;

    fn new_run(conn: &mut Conn, conversation: &str) -> String {
        create(
            conn,
            &NewRun {
                title: "hello",
                agent: "default",
                conversation_id: conversation,
                trace_id: "trace-1",
                metadata: Some(&json!({"ticket": 7})),
                runner: "replica-a",
                started_by: Some("owner"),
                webhook: None,
            },
        )
        .unwrap()
    }

    #[test]
    fn a_run_is_a_running_task_with_its_metadata_and_frames_in_order() {
        each_conn(Backends::Both, |conn| {
            let id = new_run(conn, "c1");
            let run = get(conn, &id).unwrap().unwrap();
            assert_eq!(run.status, "running");
            assert_eq!(run.metadata, Some(json!({"ticket": 7})));
            assert_eq!(
                tasks::get(conn, &id).unwrap().unwrap().trace_id.as_deref(),
                Some("trace-1")
            );

            append_events(conn, &id, 1, &["a".into(), "b".into()]).unwrap();
            // A frame written twice (a retried flush) stays once.
            append_events(conn, &id, 2, &["b".into(), "c".into()]).unwrap();
            let after_one = events_after(conn, &id, 1, 10).unwrap();
            assert_eq!(after_one, vec![(2, "b".to_owned()), (3, "c".to_owned())]);
            assert_eq!(last_event(conn, &id).unwrap(), 3);

            let other = new_run(conn, "c2");
            let filter = Filter {
                conversation_id: Some("c2".into()),
                ..Filter::default()
            };
            let (runs, total) = list(conn, &filter, 10, 0).unwrap();
            assert_eq!((runs.len(), total), (1, 1));
            assert_eq!(runs[0].run_id, other);
            let bad = Filter {
                status: Some("done".into()),
                ..Filter::default()
            };
            assert!(list(conn, &bad, 10, 0).is_err());

            tasks::set_status(conn, &id, TaskStatus::Completed).unwrap();
            assert_eq!(prune_events(conn, "9999").unwrap(), 3);
            assert_eq!(last_event(conn, &id).unwrap(), 0);
        });
    }
}
