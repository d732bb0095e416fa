//! Records adapters keep through the host: tasks for the work they dispatch, and feedback
//! people give on results.

use futures_util::future::BoxFuture;

/// The states of a task (spec 2.3).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TaskState {
    Pending,
    Running,
    Completed,
    Error,
    Cancelled,
}

/// Creates and updates task records, which the dashboard lists.
pub trait TaskTracker: Send + Sync {
    /// Creates a pending task; returns its id.
    fn create(
        &self,
        title: &str,
        agent: Option<&str>,
    ) -> BoxFuture<'static, Result<String, String>>;

    /// Moves a task to `state`, linking the trace of its run when given.
    fn update(
        &self,
        task_id: &str,
        state: TaskState,
        trace_id: Option<&str>,
    ) -> BoxFuture<'static, Result<(), String>>;
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Vote {
    Up,
    Down,
}

/// One person's verdict on one posted result; a later vote by the same person replaces it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Feedback {
    pub message_id: String,
    pub user_id: String,
    pub channel_id: String,
    pub vote: Vote,
    pub trace_id: Option<String>,
}

pub trait FeedbackStore: Send + Sync {
    fn record(&self, feedback: Feedback) -> BoxFuture<'static, Result<(), String>>;
}
