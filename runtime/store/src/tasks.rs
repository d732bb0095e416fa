//! Tasks: records of units of work with a status. Adapters, jobs and the scheduler create
//! them through this module; the dashboard reads them and may cancel or delete one.

use std::collections::{HashMap, VecDeque};
use std::fmt;
use std::str::FromStr;
use std::sync::{Mutex, PoisonError};
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};
use tokio_util::sync::CancellationToken;

use service_contract::registry::clip;

use crate::db::{self, Conn, Row, ToParam};
use crate::error::{Error, Result};
use crate::params;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "lowercase")]
pub enum TaskStatus {
    Pending,
    Running,
    Completed,
    Error,
    Cancelled,
}

impl TaskStatus {
    pub const ALL: [Self; 5] = [
        Self::Pending,
        Self::Running,
        Self::Completed,
        Self::Error,
        Self::Cancelled,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            Self::Pending => "pending",
            Self::Running => "running",
            Self::Completed => "completed",
            Self::Error => "error",
            Self::Cancelled => "cancelled",
        }
    }

    /// Pending and running tasks still have work attached; the rest are history.
    pub fn is_active(self) -> bool {
        matches!(self, Self::Pending | Self::Running)
    }
}

impl fmt::Display for TaskStatus {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for TaskStatus {
    type Err = Error;

    /// Exact, case-sensitive match on one of the five names.
    fn from_str(s: &str) -> Result<Self> {
        Self::ALL
            .into_iter()
            .find(|status| status.as_str() == s)
            .ok_or_else(|| {
                Error::invalid(format!(
                    "unknown task status {s:?}; expected one of pending, running, completed, \
                     error, cancelled"
                ))
            })
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, utoipa::ToSchema)]
pub struct Task {
    pub task_id: String,
    pub title: String,
    pub description: Option<String>,
    pub agent_profile_name: Option<String>,
    pub trace_id: Option<String>,
    pub status: TaskStatus,
    /// The schedule this task is a run of.
    pub schedule_name: Option<String>,
    /// How often it has started, for a job.
    pub attempt: Option<u32>,
    /// What a `pending` task's run waits for: `approval` (a person's, of a tool call).
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(required = false)]
    pub waiting_for: Option<String>,
    /// Who asked for its run: `owner`, `user:<name>`, `token:<name>`; null for an adapter's
    /// or a schedule's.
    pub started_by: Option<String>,
    pub created_at: String,
    pub updated_at: String,
}

#[derive(Debug, Default)]
pub struct NewTask<'a> {
    pub title: &'a str,
    pub description: Option<&'a str>,
    pub agent_profile_name: Option<&'a str>,
    pub trace_id: Option<&'a str>,
    pub schedule_name: Option<&'a str>,
    /// The replica that will run it (jobs name theirs when one claims them).
    pub runner: Option<&'a str>,
    pub started_by: Option<&'a str>,
}

/// What [`cancel_or_delete`] did.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, utoipa::ToSchema)]
#[serde(rename_all = "lowercase")]
pub enum Removal {
    Cancelled,
    Deleted,
}

const COLUMNS: &str = "task_id, title, description, agent_profile_name, trace_id, status, \
     schedule_name, created_at, updated_at, runner, started_by";

/// A task row with its job's attempt, for reads.
const SELECT: &str = "SELECT t.task_id, t.title, t.description, t.agent_profile_name, t.trace_id, \
     t.status, t.schedule_name, t.created_at, t.updated_at, j.attempt, \
     CASE WHEN EXISTS (SELECT 1 FROM approvals a WHERE a.task_id = t.task_id \
       AND a.status = 'pending') THEN 'approval' END, t.started_by \
     FROM tasks t LEFT JOIN adapter_jobs j ON j.task_id = t.task_id";

fn from_row(row: &Row<'_>) -> Result<Task> {
    let status: String = row.get(5)?;
    Ok(Task {
        task_id: row.get(0)?,
        title: row.get(1)?,
        description: row.get(2)?,
        agent_profile_name: row.get(3)?,
        trace_id: row.get(4)?,
        // The CHECK constraint guarantees one of the five names.
        status: status.parse()?,
        schedule_name: row.get(6)?,
        created_at: row.get(7)?,
        updated_at: row.get(8)?,
        attempt: row.get(9)?,
        waiting_for: row.get(10)?,
        started_by: row.get(11)?,
    })
}

impl Task {
    /// Whether its title and description are what someone wrote: an agent run's take its
    /// prompt (a scheduled run's are the schedule's name, a job's its adapter's).
    pub fn holds_content(&self) -> bool {
        self.agent_profile_name.is_some() && self.schedule_name.is_none()
    }

    /// The task without what someone wrote: title and description empty.
    pub fn without_content(self) -> Self {
        Self {
            title: String::new(),
            description: None,
            ..self
        }
    }
}

/// Creates a pending task with a fresh id.
pub fn create(conn: &Conn, task: &NewTask<'_>) -> Result<Task> {
    insert(conn, task, TaskStatus::Pending)
}

/// Creates a task that starts running at once (its work is already under way); returns its id.
pub(crate) fn create_running(conn: &Conn, task: &NewTask<'_>) -> Result<String> {
    insert(conn, task, TaskStatus::Running).map(|task| task.task_id)
}

fn insert(conn: &Conn, task: &NewTask<'_>, status: TaskStatus) -> Result<Task> {
    let task_id = uuid::Uuid::new_v4().to_string();
    let now = db::now();
    conn.execute_later(
        &format!(
            "INSERT INTO tasks ({COLUMNS}) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?8, ?9, ?10)"
        ),
        params![
            task_id,
            task.title,
            task.description,
            task.agent_profile_name,
            task.trace_id,
            status.as_str(),
            task.schedule_name,
            now,
            task.runner,
            task.started_by
        ],
    )?;
    Ok(Task {
        task_id,
        title: task.title.to_owned(),
        description: task.description.map(str::to_owned),
        agent_profile_name: task.agent_profile_name.map(str::to_owned),
        trace_id: task.trace_id.map(str::to_owned),
        status,
        schedule_name: task.schedule_name.map(str::to_owned),
        attempt: None,
        waiting_for: None,
        started_by: task.started_by.map(str::to_owned),
        created_at: now.clone(),
        updated_at: now,
    })
}

pub fn get(conn: &Conn, task_id: &str) -> Result<Option<Task>> {
    conn.query_opt(
        &format!("{SELECT} WHERE t.task_id = ?1"),
        params![task_id],
        from_row,
    )
}

/// The tasks of `ids` that exist, in one statement.
pub(crate) fn get_many(conn: &Conn, ids: &[String]) -> Result<Vec<Task>> {
    if ids.is_empty() {
        return Ok(Vec::new());
    }
    let marks: Vec<String> = (1..=ids.len()).map(|n| format!("?{n}")).collect();
    let values: Vec<&dyn db::ToParam> = ids.iter().map(|id| id as &dyn db::ToParam).collect();
    conn.query(
        &format!("{SELECT} WHERE t.task_id IN ({})", marks.join(", ")),
        &values,
        from_row,
    )
}

/// A page of the tasks (every task, or those of one status), newest first, and how many there
/// are in all.
pub fn list(
    conn: &Conn,
    status: Option<TaskStatus>,
    limit: u32,
    offset: u32,
) -> Result<(Vec<Task>, i64)> {
    let status = status.map(TaskStatus::as_str);
    let tasks = conn.query(
        &format!(
            "{SELECT} WHERE CAST(?1 AS TEXT) IS NULL OR t.status = ?1 \
             ORDER BY t.created_at DESC, t.rowid DESC LIMIT ?2 OFFSET ?3"
        ),
        params![status, limit, offset],
        from_row,
    )?;
    let total = conn.query_one(
        "SELECT count(*) FROM tasks WHERE CAST(?1 AS TEXT) IS NULL OR status = ?1",
        params![status],
        |r| r.get(0),
    )?;
    Ok((tasks, total))
}

/// How many tasks have each status (every status present, zero included), for filter tabs.
pub fn counts(conn: &Conn) -> Result<Vec<(TaskStatus, i64)>> {
    let found: HashMap<String, i64> = conn
        .query(
            "SELECT status, count(*) FROM tasks GROUP BY status",
            params![],
            |r| Ok((r.get(0)?, r.get(1)?)),
        )?
        .into_iter()
        .collect();
    Ok(TaskStatus::ALL
        .into_iter()
        .map(|status| (status, found.get(status.as_str()).copied().unwrap_or(0)))
        .collect())
}

/// Moves a task to `status`. A cancelled task stays cancelled, so work that finishes after
/// its cancellation cannot revive it. Returns whether the task changed.
pub fn set_status(conn: &Conn, task_id: &str, status: TaskStatus) -> Result<bool> {
    let changed = conn.execute(SET_STATUS, params![task_id, status.as_str(), db::now()])?;
    Ok(changed > 0)
}

/// [`set_status`] for work that need not know whether it changed anything (the job whose
/// lease its transaction just checked): with PostgreSQL it goes with the next statement.
pub(crate) fn set_status_later(conn: &Conn, task_id: &str, status: TaskStatus) -> Result<()> {
    conn.execute_later(SET_STATUS, params![task_id, status.as_str(), db::now()])
}

const SET_STATUS: &str = "UPDATE tasks SET status = ?2, updated_at = ?3 \
                          WHERE task_id = ?1 AND status != 'cancelled'";

/// Records where a task's run got to, in one statement: its new status (a cancelled task
/// stays cancelled), and the run's trace, if any.
pub fn record_run(
    conn: &Conn,
    task_id: &str,
    status: TaskStatus,
    trace_id: Option<&str>,
) -> Result<()> {
    let changed = conn.execute(
        "UPDATE tasks SET \
           status = CASE WHEN status = 'cancelled' THEN status ELSE ?2 END, \
           trace_id = coalesce(CAST(?3 AS TEXT), trace_id), updated_at = ?4 \
         WHERE task_id = ?1",
        params![task_id, status.as_str(), trace_id, db::now()],
    )?;
    if changed == 0 {
        return Err(Error::not_found(format!("no task {task_id:?}")));
    }
    Ok(())
}

/// Task titles are the start of the prompt.
pub(crate) const TITLE_CHARS: usize = 80;

/// Names what a job's task did once its first agent run starts: titled by the run (its
/// source and prompt) and naming its agent, instead of `<adapter> job`. Later runs of the job
/// change nothing. Sent with the next statement.
pub fn name_run(conn: &Conn, task_id: &str, source: &str, prompt: &str, agent: &str) -> Result<()> {
    let title = format!("{source}: {}", prompt.trim());
    let title: String = title.chars().take(TITLE_CHARS).collect();
    conn.execute_later(
        "UPDATE tasks SET title = ?2, agent_profile_name = ?3 \
         WHERE task_id = ?1 AND agent_profile_name IS NULL",
        params![task_id, title, agent],
    )
}

/// Links a task to the trace of a run done in it (the latest, for a job that ran several),
/// leaving its status as it is. Sent with the next statement.
pub fn link_trace(conn: &Conn, task_id: &str, trace_id: &str) -> Result<()> {
    conn.execute_later(
        "UPDATE tasks SET trace_id = ?2, updated_at = ?3 WHERE task_id = ?1",
        params![task_id, trace_id, db::now()],
    )
}

/// Cancels a pending or running task; deletes a finished one.
pub fn cancel_or_delete(conn: &mut Conn, task_id: &str) -> Result<Removal> {
    conn.transaction(|tx| {
        let task =
            get(tx, task_id)?.ok_or_else(|| Error::not_found(format!("no task {task_id:?}")))?;
        if task.status.is_active() {
            tx.execute(
                "UPDATE tasks SET status = 'cancelled', updated_at = ?2 WHERE task_id = ?1",
                params![task_id, db::now()],
            )?;
            Ok(Removal::Cancelled)
        } else {
            tx.execute("DELETE FROM tasks WHERE task_id = ?1", params![task_id])?;
            Ok(Removal::Deleted)
        }
    })
}

/// Those of `task_ids` whose tasks are cancelled, for a replica that may have missed the
/// cancels' notifications (see `bus`): it stops their work.
pub fn cancelled_among(conn: &Conn, task_ids: &[String]) -> Result<Vec<String>> {
    let mut cancelled = Vec::new();
    // Within any backend's count of parameters a statement.
    for some in task_ids.chunks(500) {
        let marks: Vec<String> = (1..=some.len()).map(|n| format!("?{n}")).collect();
        let sql = format!(
            "SELECT task_id FROM tasks WHERE status = 'cancelled' AND task_id IN ({})",
            marks.join(", ")
        );
        let params: Vec<&dyn ToParam> = some.iter().map(|id| id as &dyn ToParam).collect();
        cancelled.extend(conn.query(&sql, &params, |r| r.get(0))?);
    }
    Ok(cancelled)
}

/// Cancellation handles of work in progress, by task id, so deleting a task stops its work.
#[derive(Default)]
pub struct RunningTasks {
    tokens: Mutex<Tokens>,
}

#[derive(Default)]
struct Tokens {
    running: HashMap<String, CancellationToken>,
    /// Cancels that found no work, oldest first: a job's task deleted after its claim and
    /// before its work registered, whichever replica heard the delete first.
    unclaimed: VecDeque<(Instant, String)>,
}

/// How long, and how many, cancels that found no work are remembered: a job registers its
/// work a moment after its claim, so a minute is far more than the gap.
const UNCLAIMED_KEPT: Duration = Duration::from_secs(60);
const UNCLAIMED_MOST: usize = 4_096;

impl RunningTasks {
    /// A token the work for `task_id` watches; cancelled by [`RunningTasks::cancel`].
    pub fn register(&self, task_id: &str) -> CancellationToken {
        let token = CancellationToken::new();
        self.lock()
            .running
            .insert(task_id.to_owned(), token.clone());
        token
    }

    /// [`RunningTasks::register`] for a job just claimed from the database: its token is
    /// cancelled already when its task was deleted since the claim (the cancel came first).
    pub fn register_claimed(&self, task_id: &str) -> CancellationToken {
        let token = CancellationToken::new();
        let mut tokens = self.lock();
        tokens.forget_old();
        if let Some(at) = tokens.unclaimed.iter().position(|(_, id)| id == task_id) {
            tokens.unclaimed.remove(at);
            token.cancel();
        }
        tokens.running.insert(task_id.to_owned(), token.clone());
        token
    }

    pub fn finish(&self, task_id: &str) {
        self.lock().running.remove(task_id);
    }

    /// The keys of the work running now.
    pub fn keys(&self) -> Vec<String> {
        self.lock().running.keys().cloned().collect()
    }

    /// Cancels the work of a task; returns whether any was running. One that was not is
    /// remembered for a while, for a job whose claim came before the cancel and its
    /// registration after.
    pub fn cancel(&self, task_id: &str) -> bool {
        let mut tokens = self.lock();
        if let Some(token) = tokens.running.remove(task_id) {
            token.cancel();
            return true;
        }
        tokens.forget_old();
        if tokens.unclaimed.len() == UNCLAIMED_MOST {
            tokens.unclaimed.pop_front();
        }
        tokens
            .unclaimed
            .push_back((Instant::now(), task_id.to_owned()));
        false
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Tokens> {
        self.tokens.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

impl Tokens {
    fn forget_old(&mut self) {
        while self
            .unclaimed
            .front()
            .is_some_and(|(at, _)| at.elapsed() > UNCLAIMED_KEPT)
        {
            self.unclaimed.pop_front();
        }
    }
}

/// The most of one note (a failed job's message, say) a task's description takes.
pub(crate) const NOTE_CHARS: usize = 1_000;

/// The most a task's description keeps: past it, the oldest lines go.
pub(crate) const DESCRIPTION_CHARS: usize = 4_000;

/// Adds a line to a task's description (how an attempt ended, for instance), cut to
/// [`NOTE_CHARS`], keeping the description within [`DESCRIPTION_CHARS`] (the newest lines).
pub(crate) fn append_note(conn: &Conn, task_id: &str, note: &str) -> Result<()> {
    let note = clip(note, NOTE_CHARS);
    let description: Option<String> = conn
        .query_opt(
            "SELECT description FROM tasks WHERE task_id = ?1",
            params![task_id],
            |r| r.get(0),
        )?
        .flatten();
    let joined = match description {
        Some(earlier) if !earlier.is_empty() => format!("{earlier}\n{note}"),
        _ => note.into_owned(),
    };
    conn.execute_later(
        "UPDATE tasks SET description = ?2, updated_at = ?3 WHERE task_id = ?1",
        params![task_id, newest(&joined, DESCRIPTION_CHARS), db::now()],
    )?;
    Ok(())
}

/// The end of `text` within `max` characters, from the start of a line when there is one.
fn newest(text: &str, max: usize) -> &str {
    let chars = text.chars().count();
    if chars <= max {
        return text;
    }
    let (start, _) = text
        .char_indices()
        .nth(chars - max)
        .expect("more than max characters");
    let tail = &text[start..];
    tail.split_once('\n')
        .map_or(tail, |(_, whole_lines)| whole_lines)
}

/// Work cannot survive its process: tasks left running by a replica that stopped are failed:
/// those `restarted` ran before this process (the same replica) started, with any a build
/// before replicas left running, and those of a replica whose presence ran out (see
/// `replica`). Jobs are left to their leases (see
/// `job_queue::reclaim`).
pub fn fail_orphaned(conn: &Conn, restarted: Option<&str>) -> Result<u64> {
    conn.execute(
        &format!(
            "UPDATE tasks SET status = 'error', description = coalesce(description || '\n', '') || \
             CASE WHEN runner IS NULL OR runner = ?2 THEN 'interrupted by restart' \
               ELSE 'interrupted: its replica ' || runner || ' stopped' END, updated_at = ?1 \
             WHERE status = 'running' AND task_id NOT IN (SELECT task_id FROM adapter_jobs) \
             AND ((runner IS NULL AND CAST(?2 AS TEXT) IS NOT NULL) OR runner = ?2 \
               OR (runner IS NOT NULL AND NOT EXISTS (SELECT 1 FROM leases \
                 WHERE name = 'replica:' || tasks.runner AND expires_at >= {})))",
            conn.clock_ms()
        ),
        params![db::now(), restarted],
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::db::testing::{Backends, each_conn};

    fn task(conn: &Conn, title: &str) -> Task {
        create(
            conn,
            &NewTask {
                title,
                ..NewTask::default()
            },
        )
        .unwrap()
    }

    #[test]
    fn status_parsing_is_exact() {
        assert_eq!(
            "running".parse::<TaskStatus>().unwrap(),
            TaskStatus::Running
        );
        assert!("Running".parse::<TaskStatus>().is_err());
        assert!("done".parse::<TaskStatus>().is_err());
    }

    #[test]
    fn lists_newest_first_and_filters() {
        each_conn(Backends::Both, |conn| {
            let a = task(conn, "a");
            let b = task(conn, "b");
            set_status(conn, &a.task_id, TaskStatus::Running).unwrap();
            let titles = |status, limit, offset| {
                let (tasks, total) = list(conn, status, limit, offset).unwrap();
                (
                    tasks.into_iter().map(|t| t.title).collect::<Vec<_>>(),
                    total,
                )
            };
            assert_eq!(
                titles(None, 10, 0),
                (vec!["b".to_owned(), "a".to_owned()], 2)
            );
            assert_eq!(titles(None, 1, 1), (vec!["a".to_owned()], 2), "a page");
            assert_eq!(
                titles(Some(TaskStatus::Running), 10, 0),
                (vec!["a".to_owned()], 1)
            );
            assert_eq!(
                list(conn, Some(TaskStatus::Pending), 10, 0).unwrap().0[0].task_id,
                b.task_id
            );
        });
    }

    #[test]
    fn notes_are_cut_and_the_description_keeps_the_newest() {
        each_conn(Backends::Both, |conn| {
            let t = task(conn, "work");
            for attempt in 1..=10 {
                append_note(
                    conn,
                    &t.task_id,
                    &format!("attempt {attempt}: {}", "e".repeat(5_000)),
                )
                .unwrap();
            }
            let description = get(conn, &t.task_id).unwrap().unwrap().description.unwrap();
            assert!(description.chars().count() <= DESCRIPTION_CHARS);
            assert!(
                description.starts_with("attempt "),
                "whole lines: {}",
                &description[..20]
            );
            let last = description.lines().last().unwrap();
            assert!(last.starts_with("attempt 10: "), "{}", &last[..20]);
            assert_eq!(last.chars().count(), NOTE_CHARS + 1, "cut, with its mark");
            assert!(!description.contains("attempt 1:"), "the oldest went");
        });
    }

    #[test]
    fn cancel_then_delete_and_cancelled_stays_cancelled() {
        each_conn(Backends::Both, |conn| {
            let t = task(conn, "work");
            record_run(conn, &t.task_id, TaskStatus::Running, None).unwrap();
            assert_eq!(
                cancel_or_delete(conn, &t.task_id).unwrap(),
                Removal::Cancelled
            );
            assert!(!set_status(conn, &t.task_id, TaskStatus::Completed).unwrap());
            record_run(conn, &t.task_id, TaskStatus::Error, Some("trace-1")).unwrap();
            let stored = get(conn, &t.task_id).unwrap().unwrap();
            assert_eq!(stored.status, TaskStatus::Cancelled);
            assert_eq!(stored.trace_id.as_deref(), Some("trace-1"));
            let other = task(conn, "other");
            let keys = [&t.task_id, &other.task_id, "conversation:c"].map(str::to_owned);
            assert_eq!(
                cancelled_among(conn, &keys).unwrap(),
                vec![t.task_id.clone()]
            );
            assert_eq!(
                cancel_or_delete(conn, &t.task_id).unwrap(),
                Removal::Deleted
            );
            assert!(get(conn, &t.task_id).unwrap().is_none());
            assert!(matches!(
                cancel_or_delete(conn, &t.task_id),
                Err(Error::NotFound(_))
            ));
        });
    }

    #[test]
    fn tasks_of_a_replica_that_stopped_are_failed() {
        each_conn(Backends::Both, |conn| {
            let running = |runner: &str| {
                let task = create_running(
                    conn,
                    &NewTask {
                        title: runner,
                        runner: Some(runner),
                        ..NewTask::default()
                    },
                )
                .unwrap();
                (runner.to_owned(), task)
            };
            let alive = running("alive");
            let gone = running("gone");
            let restarted = running("restarted");
            crate::leases::hold(conn, "replica:alive", "alive", 60_000).unwrap();
            assert_eq!(fail_orphaned(conn, Some("restarted")).unwrap(), 2);
            let status = |(_, id): &(String, String)| get(conn, id).unwrap().unwrap().status;
            assert_eq!(status(&alive), TaskStatus::Running);
            assert_eq!(status(&gone), TaskStatus::Error);
            assert_eq!(status(&restarted), TaskStatus::Error);
        });
    }

    #[test]
    fn a_cancel_before_a_claimed_job_registers_stops_it_and_only_it() {
        let running = RunningTasks::default();
        assert!(!running.cancel("job-1"), "nothing ran yet");
        assert!(!running.cancel("conversation:c"));
        assert!(running.register_claimed("job-1").is_cancelled());
        running.finish("job-1");
        assert!(
            !running.register_claimed("job-1").is_cancelled(),
            "a cancel counts once"
        );
        assert!(
            !running.register("conversation:c").is_cancelled(),
            "other work is not claimed: an old cancel of its key does not stop it"
        );
        let live = running.register_claimed("job-2");
        assert!(running.cancel("job-2"));
        assert!(live.is_cancelled());
        for n in 0..=UNCLAIMED_MOST {
            running.cancel(&format!("gone-{n}"));
        }
        assert!(
            !running.register_claimed("gone-0").is_cancelled(),
            "the oldest is forgotten past the bound"
        );
        assert!(running.register_claimed("gone-1").is_cancelled());
    }
}
