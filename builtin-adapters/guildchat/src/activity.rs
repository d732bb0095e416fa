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
/// happened in which thread. The title comes from a prompt, so it is shown as typed: its
/// markdown and mentions are escaped.
pub fn activity_line(
    title: &str,
    state: TaskState,
    task_id: Option<&str>,
    thread_id: u64,
) -> String {
    let task = task_id.map_or_else(String::new, |id| format!(" (task `{id}`)"));
    format!(
        "`{}` **{}**{task} in <#{thread_id}>",
        state_label(state),
        escape_markup(title)
    )
}

/// `text` with a backslash before every character that formats (`*`, `_`, `~`, `` ` ``, `|`,
/// links) or starts a mention (`<@id>`, `<@&role>`, `<#channel>`, `@everyone`).
fn escape_markup(text: &str) -> String {
    let mut escaped = String::with_capacity(text.len());
    for c in text.chars() {
        if matches!(
            c,
            '\\' | '*' | '_' | '~' | '`' | '|' | '<' | '>' | '[' | ']' | '(' | ')' | '@' | '#'
        ) {
            escaped.push('\\');
        }
        escaped.push(c);
    }
    escaped
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

    #[test]
    fn a_title_cannot_format_or_mention() {
        assert_eq!(
            activity_line("ping <@7> and <@&8> **now**", TaskState::Pending, None, 5),
            r"`pending` **ping \<\@7\> and \<\@&8\> \*\*now\*\*** in <#5>"
        );
        assert_eq!(
            escape_markup(r"@everyone a_b `c` [l](u) ~~s~~ ||x|| \"),
            r"\@everyone a\_b \`c\` \[l\]\(u\) \~\~s\~\~ \|\|x\|\| \\"
        );
    }
}
