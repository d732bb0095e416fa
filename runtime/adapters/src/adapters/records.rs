//! The host side of the records adapters keep: tasks and feedback, in SQLite.

use futures_util::FutureExt;
use futures_util::future::BoxFuture;
use service_contract::records::{Feedback, FeedbackStore, TaskState, TaskTracker, Vote};

use crate::db::{self, Db};
use crate::params;
use crate::tasks::{self, NewTask, TaskStatus};

pub struct DbTasks {
    pub db: Db,
    /// The replica whose adapters run the tasks.
    pub replica: String,
}

impl TaskTracker for DbTasks {
    fn create(
        &self,
        title: &str,
        agent: Option<&str>,
    ) -> BoxFuture<'static, Result<String, String>> {
        let (db, title, agent) = (self.db.clone(), title.to_owned(), agent.map(str::to_owned));
        let replica = self.replica.clone();
        async move {
            db.call(move |conn| {
                let task = tasks::create(
                    conn,
                    &NewTask {
                        title: &title,
                        agent_profile_name: agent.as_deref(),
                        runner: Some(&replica),
                        ..NewTask::default()
                    },
                )?;
                Ok(task.task_id)
            })
            .await
            .map_err(|e| e.to_string())
        }
        .boxed()
    }

    fn update(
        &self,
        task_id: &str,
        state: TaskState,
        trace_id: Option<&str>,
    ) -> BoxFuture<'static, Result<(), String>> {
        let (db, task_id, trace_id) = (
            self.db.clone(),
            task_id.to_owned(),
            trace_id.map(str::to_owned),
        );
        let status = match state {
            TaskState::Pending => TaskStatus::Pending,
            TaskState::Running => TaskStatus::Running,
            TaskState::Completed => TaskStatus::Completed,
            TaskState::Error => TaskStatus::Error,
            TaskState::Cancelled => TaskStatus::Cancelled,
        };
        async move {
            db.call(move |conn| tasks::record_run(conn, &task_id, status, trace_id.as_deref()))
                .await
                .map_err(|e| e.to_string())
        }
        .boxed()
    }
}

pub struct DbFeedback(pub Db);

impl FeedbackStore for DbFeedback {
    fn record(&self, feedback: Feedback) -> BoxFuture<'static, Result<(), String>> {
        let db = self.0.clone();
        async move {
            db.call(move |conn| {
                let value = match feedback.vote {
                    Vote::Up => "up",
                    Vote::Down => "down",
                };
                conn.execute(
                    "INSERT INTO guildchat_feedback (message_id, user_id, channel_id, value, trace_id, updated_at) \
                     VALUES (?1, ?2, ?3, ?4, ?5, ?6) ON CONFLICT (message_id, user_id) DO UPDATE SET \
                     value = excluded.value, trace_id = excluded.trace_id, updated_at = excluded.updated_at",
                    params![feedback.message_id, feedback.user_id, feedback.channel_id, value, feedback.trace_id, db::now()],
                )?;
                Ok(())
            })
            .await
            .map_err(|e| e.to_string())
        }
        .boxed()
    }
}

#[cfg(test)]
mod tests {
    use service_contract::records::{Feedback, FeedbackStore, Vote};

    use super::DbFeedback;
    use crate::db::testing::{self, Backends};
    use crate::params;

    #[test]
    fn one_vote_per_user_and_message_the_latest_wins() {
        testing::each_backend(Backends::Both, |db| {
            let store = DbFeedback(db.clone());
            let vote = |user: &str, vote| Feedback {
                message_id: "M1".into(),
                user_id: user.into(),
                channel_id: "C1".into(),
                vote,
                trace_id: None,
            };
            testing::block_on(async {
                store.record(vote("alice", Vote::Up)).await.unwrap();
                store.record(vote("bob", Vote::Up)).await.unwrap();
                store.record(vote("alice", Vote::Down)).await.unwrap();
            });
            let rows: Vec<(String, String)> = db
                .blocking(|conn| {
                    conn.query(
                        "SELECT user_id, value FROM guildchat_feedback ORDER BY user_id",
                        params![],
                        |r| Ok((r.get(0)?, r.get(1)?)),
                    )
                })
                .unwrap();
            assert_eq!(
                rows,
                [("alice".into(), "down".into()), ("bob".into(), "up".into())]
            );
        });
    }
}
