//! What people in a channel are told when a run fails. A failure's own message may carry
//! provider details, so it stays in the log and the trace; the notice says what kind of
//! failure it was and names the trace so an operator can find it.

use service_contract::{RunFailure, RunFailureKind};

/// Shown for an answer with no text, so the asker is not left waiting for a reply that never
/// comes.
pub const EMPTY_REPLY: &str = "(empty reply)";

/// The answer as posted: its text, or [`EMPTY_REPLY`] when it is blank.
pub fn or_empty_notice(text: &str) -> &str {
    if text.trim().is_empty() {
        EMPTY_REPLY
    } else {
        text
    }
}

pub fn failure_notice(failure: &RunFailure) -> String {
    let what = match failure.kind {
        RunFailureKind::NotConfigured => "No language model provider is configured on the server.",
        RunFailureKind::Invalid => "There was nothing to ask.",
        RunFailureKind::Cancelled => "The run was cancelled.",
        RunFailureKind::UnknownAgent | RunFailureKind::Failed | RunFailureKind::Paused => {
            "Sorry, I could not answer that."
        }
    };
    match &failure.trace_id {
        Some(trace_id) => format!("{what} (trace {trace_id})"),
        None => what.to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn failure(kind: RunFailureKind, trace_id: Option<&str>) -> RunFailure {
        RunFailure {
            kind,
            message: "provider said: key sk-123 is invalid".to_owned(),
            trace_id: trace_id.map(str::to_owned),
            waiting: None,
        }
    }

    #[test]
    fn a_blank_answer_is_shown_as_empty() {
        assert_eq!(or_empty_notice(" \n\t"), "(empty reply)");
        assert_eq!(or_empty_notice("    code\n"), "    code\n");
    }

    #[test]
    fn a_notice_names_the_kind_and_trace_but_not_the_details() {
        assert_eq!(
            failure_notice(&failure(RunFailureKind::Failed, Some("tr-7"))),
            "Sorry, I could not answer that. (trace tr-7)"
        );
        assert_eq!(
            failure_notice(&failure(RunFailureKind::NotConfigured, None)),
            "No language model provider is configured on the server."
        );
    }
}
