//! Deferred adapter work. A job is a task (its status lives there) plus the adapter and the
//! payload, written in one transaction before the enqueuing handler's response leaves.

use rusqlite::{Connection, params};

use crate::error::Result;
use crate::tasks::{self, NewTask};

/// A job waiting to run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Job {
    pub task_id: String,
    pub adapter: String,
    pub payload: Vec<u8>,
}

/// Persists a job as a pending task; returns the task id.
pub fn enqueue(conn: &mut Connection, adapter: &str, payload: &[u8]) -> Result<String> {
    let tx = conn.transaction()?;
    let title = format!("{adapter} job");
    let task = tasks::create(
        &tx,
        &NewTask {
            title: &title,
            description: Some("adapter job"),
            ..NewTask::default()
        },
    )?;
    tx.prepare_cached("INSERT INTO adapter_jobs (task_id, adapter, payload) VALUES (?1, ?2, ?3)")?
        .execute(params![task.task_id, adapter, payload])?;
    tx.commit()?;
    Ok(task.task_id)
}

/// Pending jobs, oldest first (after a restart these run; running ones were failed).
pub fn pending(conn: &Connection, limit: u32) -> Result<Vec<Job>> {
    let mut stmt = conn.prepare(
        "SELECT j.task_id, j.adapter, j.payload FROM adapter_jobs j JOIN tasks t ON t.task_id = j.task_id \
         WHERE t.status = 'pending' ORDER BY t.created_at, t.rowid LIMIT ?1",
    )?;
    let rows = stmt.query_map([limit], |r| {
        Ok(Job {
            task_id: r.get(0)?,
            adapter: r.get(1)?,
            payload: r.get(2)?,
        })
    })?;
    Ok(rows.collect::<rusqlite::Result<_>>()?)
}

#[cfg(test)]
mod tests {
    use rusqlite::OptionalExtension;

    use super::*;
    use crate::db;
    use crate::tasks::TaskStatus;

    fn payload(conn: &Connection, task_id: &str) -> Option<Vec<u8>> {
        conn.query_row(
            "SELECT payload FROM adapter_jobs WHERE task_id = ?1",
            [task_id],
            |r| r.get(0),
        )
        .optional()
        .unwrap()
    }

    #[test]
    fn a_job_is_a_pending_task_with_a_payload() {
        let mut conn = db::memory();
        let first = enqueue(&mut conn, "teamchat", b"{\"channel\":\"C1\"}").unwrap();
        let second = enqueue(&mut conn, "webhook", b"2").unwrap();
        let task = tasks::get(&conn, &first).unwrap().unwrap();
        assert_eq!(
            (task.status, task.title.as_str()),
            (TaskStatus::Pending, "teamchat job")
        );
        let queue: Vec<String> = pending(&conn, 10)
            .unwrap()
            .into_iter()
            .map(|j| j.task_id)
            .collect();
        assert_eq!(queue, [first.clone(), second.clone()]);
        tasks::set_status(&conn, &first, TaskStatus::Running).unwrap();
        assert_eq!(pending(&conn, 10).unwrap().len(), 1);
        assert_eq!(
            payload(&conn, &first).as_deref(),
            Some(&b"{\"channel\":\"C1\"}"[..])
        );
        // Deleting the finished task deletes the job with it.
        tasks::set_status(&conn, &first, TaskStatus::Completed).unwrap();
        tasks::cancel_or_delete(&mut conn, &first).unwrap();
        assert!(payload(&conn, &first).is_none());
    }
}
