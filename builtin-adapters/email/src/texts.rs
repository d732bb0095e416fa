//! The words the adapter writes: the agent's prompt, the task's title, and what a sender is
//! told when no answer could be made.

use service_contract::RunFailure;

use crate::incoming::Incoming;

/// Task titles are kept short for the dashboard's list.
const MAX_TITLE_CHARS: usize = 100;

/// Sent for an answer with no text, so the sender is not left with an empty mail.
pub const EMPTY_REPLY: &str = "(empty reply)";

/// What the agent is asked: who wrote, about what, and the text.
pub fn prompt(incoming: &Incoming) -> String {
    let from = incoming.from.as_deref().unwrap_or_default();
    format!(
        "From: {from}\nSubject: {}\n\n{}",
        incoming.subject, incoming.body
    )
}

pub fn task_title(incoming: &Incoming) -> String {
    let from = incoming.from.as_deref().unwrap_or_default();
    let subject = if incoming.subject.is_empty() {
        "(no subject)"
    } else {
        &incoming.subject
    };
    format!("Email from {from}: {subject}")
        .chars()
        .take(MAX_TITLE_CHARS)
        .collect()
}

/// The reply's text: the answer, or [`EMPTY_REPLY`] when it is blank.
pub fn reply_text(answer: String) -> String {
    if answer.trim().is_empty() {
        EMPTY_REPLY.to_owned()
    } else {
        answer
    }
}

/// The reply when the run failed. A failure's own message may carry provider details, so it
/// stays in the log and the trace; the sender gets the trace id to quote.
pub fn failure_notice(failure: &RunFailure) -> String {
    let apology = "Sorry, no answer could be made to your message.";
    match &failure.trace_id {
        Some(trace_id) => format!("{apology} (reference: trace {trace_id})"),
        None => apology.to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use service_contract::RunFailureKind;

    use super::*;

    fn incoming(subject: &str) -> Incoming {
        Incoming {
            from: Some("alice@example.org".to_owned()),
            reply_to: None,
            subject: subject.to_owned(),
            message_id: None,
            references: Vec::new(),
            in_reply_to: Vec::new(),
            body: "What is on today?".to_owned(),
            automated: None,
        }
    }

    #[test]
    fn the_prompt_names_the_sender_and_subject() {
        assert_eq!(
            prompt(&incoming("Plans")),
            "From: alice@example.org\nSubject: Plans\n\nWhat is on today?"
        );
    }

    #[test]
    fn titles_are_short() {
        assert_eq!(
            task_title(&incoming("")),
            "Email from alice@example.org: (no subject)"
        );
        assert_eq!(task_title(&incoming(&"x".repeat(300))).chars().count(), 100);
    }

    #[test]
    fn blank_answers_and_failures_still_get_a_reply() {
        assert_eq!(reply_text(" \n".to_owned()), "(empty reply)");
        assert_eq!(reply_text("Hi".to_owned()), "Hi");
        let failure = RunFailure {
            kind: RunFailureKind::Failed,
            message: "provider said: key sk-123 is invalid".to_owned(),
            trace_id: Some("tr-7".to_owned()),
            waiting: None,
        };
        assert_eq!(
            failure_notice(&failure),
            "Sorry, no answer could be made to your message. (reference: trace tr-7)"
        );
    }
}
