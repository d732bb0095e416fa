//! `POST /commands`: a slash command, answered inline with the agent's reply.

use guest_util::form_field;
use serde_json::json;

use crate::reply::run_agent;
use crate::{HttpResponse, error, json};

pub fn handle(body: &[u8]) -> HttpResponse {
    let Ok(form) = std::str::from_utf8(body) else {
        return error(400, "the body is not UTF-8");
    };
    let Some(command) = form_field(form, "command") else {
        return error(400, "not a slash command: no `command` field");
    };
    let text = form_field(form, "text").unwrap_or_default();
    let prompt = text.trim();
    if prompt.is_empty() {
        return json(
            200,
            &json!({
                "response_type": "ephemeral",
                "text": format!("Usage: {command} <your question>"),
            }),
        );
    }
    match run_agent(prompt) {
        Ok(reply) => json(
            200,
            &json!({ "response_type": "in_channel", "text": reply.text }),
        ),
        Err(e) => json(
            200,
            &json!({
                "response_type": "ephemeral",
                "text": format!("Sorry, the agent could not answer: {}", e.message),
            }),
        ),
    }
}
