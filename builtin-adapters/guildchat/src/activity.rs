//! The activity feed: one line in `#service-activity` per status change of a dispatched task.

use service_contract::TaskState;

/// The task status as the spec names it (2.3).
pub fn state_label(state: TaskState) -> &'static str {
    match state {
        TaskState::Pending => "pending",
        TaskState::Running => "running",
        TaskState::Completed => "completed",
        TaskState::Error => "error",
        TaskState::Cancelled => "cancelled",
    }
}

/// `task_id` is `None` when the task record could not be written; the line still tells what
/// happened in which thread.
pub fn activity_line(
    title: &str,
    state: TaskState,
    task_id: Option<&str>,
    thread_id: u64,
) -> String {
    let task = task_id.map_or_else(String::new, |id| format!(" (task `{id}`)"));
    format!(
        "`{}` **{title}**{task} in <#{thread_id}>",
        state_label(state)
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_line_names_the_status_task_and_thread() {
        assert_eq!(
            activity_line("Deploy now", TaskState::Running, Some("t-1"), 55),
            "`running` **Deploy now** (task `t-1`) in <#55>"
        );
        assert_eq!(
            activity_line("x", TaskState::Error, None, 5),
            "`error` **x** in <#5>"
        );
    }
}
