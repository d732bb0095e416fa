//! Tool calls a person approves in the thread. A run that waits is asked about with Approve and
//! Deny buttons (Block Kit `actions`: `action_id` `approve` or `deny`, `value` the approval id);
//! the person who asked and the user ids in `SERVICE_TEAMCHAT_APPROVERS` may decide.

use serde_json::{Value, json};

use crate::APPROVERS;
use crate::service::adapter::agent::Waiting;
use crate::service::adapter::log::{self, Level};
use crate::service::adapter::{kv, secrets};

/// The call's arguments shown in the question, at most.
const INPUT_CHARS: usize = 500;
/// How long the asker of an approval is remembered: longer than the host's default 24 h
/// before an undecided approval expires.
const ASKER_TTL_MS: u64 = 30 * 24 * 60 * 60 * 1000;

/// The question posted in the thread.
pub fn question(waiting: &Waiting) -> String {
    let mut input: String = waiting.input_json.chars().take(INPUT_CHARS).collect();
    if input.len() < waiting.input_json.len() {
        input.push('…');
    }
    format!(
        "Approval needed: the agent wants to run `{}` with `{input}`.",
        waiting.tool
    )
}

/// The question with its buttons.
pub fn blocks(text: &str, approval_id: &str) -> Value {
    let button = |action: &str, label: &str, style: &str| {
        json!({
            "type": "button",
            "action_id": action,
            "text": { "type": "plain_text", "text": label },
            "style": style,
            "value": approval_id,
        })
    };
    json!([
        { "type": "section", "text": { "type": "mrkdwn", "text": text } },
        {
            "type": "actions",
            "block_id": "approval",
            "elements": [
                button("approve", "Approve", "primary"),
                button("deny", "Deny", "danger"),
            ],
        },
    ])
}

/// The question once decided: its text and who decided, without buttons.
pub fn decided_blocks(text: &str) -> Value {
    json!([{ "type": "section", "text": { "type": "mrkdwn", "text": text } }])
}

fn asker_key(approval_id: &str) -> String {
    format!("asker:{approval_id}")
}

/// Remembers who asked the question the approval came from.
pub fn remember_asker(approval_id: &str, user: Option<&str>) {
    let Some(user) = user else { return };
    if let Err(e) = kv::set(&asker_key(approval_id), user.as_bytes(), Some(ASKER_TTL_MS)) {
        log::log(
            Level::Warn,
            &format!("cannot remember who asked; only approvers may decide: {e}"),
        );
    }
}

/// Whether `user` may decide the approval; `None` when nobody asked it here (an unknown one).
pub fn may_decide(approval_id: &str, user: &str) -> Option<bool> {
    if approvers().iter().any(|a| a == user) {
        return Some(true);
    }
    let asker = kv::get(&asker_key(approval_id)).ok().flatten()?;
    Some(asker == user.as_bytes())
}

/// `SERVICE_TEAMCHAT_APPROVERS`: user ids, separated by commas or spaces.
fn approvers() -> Vec<String> {
    secrets::get(APPROVERS)
        .unwrap_or_default()
        .split([',', ' '])
        .filter(|id| !id.is_empty())
        .map(str::to_owned)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_question_cuts_long_arguments_and_carries_the_id_on_both_buttons() {
        let waiting = Waiting {
            approval_id: "a1".into(),
            tool: "create_note".into(),
            input_json: "x".repeat(INPUT_CHARS + 10),
            trace_id: "t1".into(),
        };
        let text = question(&waiting);
        assert!(
            text.contains("`create_note`") && text.ends_with("…`."),
            "{text}"
        );
        let blocks = blocks(&text, "a1");
        let buttons = blocks[1]["elements"].as_array().unwrap();
        let ids: Vec<&str> = buttons
            .iter()
            .map(|b| b["action_id"].as_str().unwrap())
            .collect();
        assert_eq!(ids, ["approve", "deny"]);
        assert!(buttons.iter().all(|b| b["value"] == "a1"));
    }
}
