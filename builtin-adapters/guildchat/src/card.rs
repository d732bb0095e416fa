//! The status card (spec 2.8): an embed with the fields status, agent and result, into which a
//! task thread's `Processing...` placeholder is edited. Its footer carries the trace id, so
//! feedback on the card can be linked to the run even after a restart.

use service_contract::TaskState;

use crate::activity::state_label;
use crate::notice::or_empty_notice;

/// The placeholder posted before the agent runs.
pub const PLACEHOLDER: &str = "Processing...";

pub const STATUS: &str = "Status";
pub const AGENT: &str = "Agent";
pub const RESULT: &str = "Result";

/// Embed limits of the platform.
const TITLE_CHARS: usize = 256;
const FIELD_VALUE_CHARS: usize = 1024;

const TRACE_PREFIX: &str = "trace ";

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StatusCard {
    pub title: String,
    /// (name, value) in display order: status, agent, result.
    pub fields: [(&'static str, String); 3],
    pub footer: Option<String>,
    pub colour: u32,
    /// The result field holds only the start of the reply; the whole is posted below the card.
    pub truncated: bool,
}

impl StatusCard {
    /// `provider` is the active provider's name; empty shows as `unknown`.
    pub fn new(
        title: &str,
        state: TaskState,
        provider: &str,
        result: &str,
        trace_id: Option<&str>,
    ) -> Self {
        let agent = match provider.trim() {
            "" => "unknown".to_owned(),
            name => name.to_owned(),
        };
        let (shown, truncated) = truncate(or_empty_notice(result.trim()), FIELD_VALUE_CHARS);
        Self {
            title: truncate(title, TITLE_CHARS).0,
            fields: [
                (STATUS, state_label(state).to_owned()),
                (AGENT, agent),
                (RESULT, shown),
            ],
            footer: trace_id.map(|id| format!("{TRACE_PREFIX}{id}")),
            colour: match state {
                TaskState::Completed => 0x2E_CC_71,
                TaskState::Error => 0xE7_4C_3C,
                _ => 0x95_A5_A6,
            },
            truncated,
        }
    }
}

/// Whether an embed with these field names is a status card.
pub fn is_status_card<'a>(field_names: impl IntoIterator<Item = &'a str>) -> bool {
    let names: Vec<&str> = field_names.into_iter().collect();
    names == [STATUS, AGENT, RESULT]
}

/// The trace id a card's footer names.
pub fn trace_id_in_footer(footer: &str) -> Option<&str> {
    footer
        .strip_prefix(TRACE_PREFIX)
        .map(str::trim)
        .filter(|id| !id.is_empty())
}

/// At most `limit` characters, ending in an ellipsis when cut.
fn truncate(text: &str, limit: usize) -> (String, bool) {
    if text.chars().count() <= limit {
        return (text.to_owned(), false);
    }
    let mut cut: String = text.chars().take(limit - 1).collect();
    cut.push('…');
    (cut, true)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_completed_card_has_the_three_fields_and_the_trace() {
        let card = StatusCard::new(
            "Deploy now",
            TaskState::Completed,
            "ollama",
            "Done.",
            Some("tr-1"),
        );
        assert_eq!(
            card.fields,
            [
                (STATUS, "completed".to_owned()),
                (AGENT, "ollama".to_owned()),
                (RESULT, "Done.".to_owned())
            ]
        );
        assert_eq!(card.title, "Deploy now");
        assert_eq!(card.footer.as_deref(), Some("trace tr-1"));
        assert!(!card.truncated);
        assert!(is_status_card(card.fields.iter().map(|(name, _)| *name)));
        assert_eq!(
            trace_id_in_footer(card.footer.as_deref().unwrap()),
            Some("tr-1")
        );
    }

    #[test]
    fn no_provider_shows_unknown_and_an_error_is_the_result() {
        let card = StatusCard::new("t", TaskState::Error, " ", "no provider configured", None);
        assert_eq!(card.fields[0].1, "error");
        assert_eq!(card.fields[1].1, "unknown");
        assert_eq!(card.fields[2].1, "no provider configured");
        assert_eq!(card.footer, None);
        assert_eq!(
            StatusCard::new("t", TaskState::Completed, "p", "\n", None).fields[2].1,
            "(empty reply)"
        );
    }

    #[test]
    fn long_results_are_cut_to_the_embed_limit() {
        let reply = "é".repeat(3000);
        let card = StatusCard::new(&"t".repeat(300), TaskState::Completed, "p", &reply, None);
        assert!(card.truncated);
        assert_eq!(card.fields[2].1.chars().count(), 1024);
        assert!(card.fields[2].1.ends_with('…'));
        assert_eq!(card.title.chars().count(), 256);
    }

    #[test]
    fn other_embeds_are_not_cards() {
        assert!(!is_status_card(["Status", "Agent"]));
        assert!(!is_status_card(["Result", "Agent", "Status"]));
        assert_eq!(trace_id_in_footer("made by a bot"), None);
        assert_eq!(trace_id_in_footer("trace "), None);
    }
}
