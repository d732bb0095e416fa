//! Running one due schedule: a task, an agent run, and the trace id written back.

use std::sync::Arc;

use std::collections::HashMap;

use rusqlite::Connection;
use service_contract::agent::{AgentRunner, ProfileChoice, RunFailureKind, RunRequest};

use super::store;
use super::tick::Due;
use crate::db::Db;
use crate::error::Result;
use crate::tasks::{self, NewTask, RunningTasks, TaskStatus};

/// How a dispatched run ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Ran {
    pub status: TaskStatus,
    pub trace_id: Option<String>,
}

/// The title of a schedule's run task, which is also how a run in progress is found.
const TITLE: &str = "Scheduled run: ";

fn task_title(schedule: &str) -> String {
    format!("{TITLE}{schedule}")
}

/// Runs that have not ended, by schedule name, with their task id: the server's and those of
/// `schedule run` in another process alike, so neither starts a run over the other.
pub fn runs_in_progress(conn: &Connection) -> Result<HashMap<String, String>> {
    let mut stmt = conn.prepare_cached(
        "SELECT title, task_id FROM tasks WHERE status IN ('pending', 'running') \
         AND substr(title, 1, ?2) = ?1",
    )?;
    let rows = stmt.query_map((TITLE, TITLE.len() as i64), |row| {
        Ok((row.get::<_, String>(0)?, row.get::<_, String>(1)?))
    })?;
    let mut runs = HashMap::new();
    for row in rows {
        let (title, task_id) = row?;
        if let Some(name) = title.strip_prefix(TITLE) {
            runs.insert(name.to_owned(), task_id);
        }
    }
    Ok(runs)
}

pub struct Dispatcher {
    pub db: Db,
    pub agents: Arc<dyn AgentRunner>,
    pub running: Arc<RunningTasks>,
}

impl Dispatcher {
    /// Runs the schedule's prompt with its profile as a task and writes the trace id back.
    /// Deleting the task while it runs cancels the run.
    pub async fn run(&self, due: Due) -> Result<Ran> {
        let title = task_title(&due.name);
        let (agent, prompt) = (due.agent.clone(), due.prompt.clone());
        let task_id = self
            .db
            .call(move |conn| {
                tasks::create_running(
                    conn,
                    &NewTask {
                        title: &title,
                        description: Some(&prompt),
                        agent_profile_name: Some(&agent),
                        trace_id: None,
                    },
                )
            })
            .await?;
        let cancel = self.running.register(&task_id);
        let request = RunRequest {
            prompt: due.prompt,
            profile: ProfileChoice::Required(due.agent),
            model: None,
            source: super::NAME.to_owned(),
            parent: None,
        };
        let result = self.agents.run(request, cancel).await;
        self.running.finish(&task_id);
        let (status, trace_id) = match result {
            Ok(reply) => (TaskStatus::Completed, Some(reply.trace_id)),
            Err(failure) if failure.kind == RunFailureKind::Cancelled => {
                (TaskStatus::Cancelled, failure.trace_id)
            }
            Err(failure) => (TaskStatus::Error, failure.trace_id),
        };
        let (name, trace) = (due.name, trace_id.clone());
        let ran = Ran { status, trace_id };
        self.db
            .call(move |conn| {
                tasks::set_status(conn, &task_id, status)?;
                if let Some(trace) = &trace {
                    tasks::attach_trace(conn, &task_id, trace)?;
                    store::set_last_trace(conn, &name, trace)?;
                }
                Ok(())
            })
            .await?;
        Ok(ran)
    }
}
