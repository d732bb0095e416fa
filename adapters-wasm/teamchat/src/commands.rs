//! `POST /commands`: a slash command, answered inline with the agent's reply.

use guest_util::{Response, form_field};
use serde_json::json;

use crate::reply::run_agent;

pub fn handle(body: &[u8]) -> Response {
    let Ok(form) = std::str::from_utf8(body) else {
        return Response::error(400, "the body is not UTF-8");
    };
    let Some(command) = form_field(form, "command") else {
        return Response::error(400, "not a slash command: no `command` field");
    };
    let text = form_field(form, "text").unwrap_or_default();
    let prompt = text.trim();
    if prompt.is_empty() {
        return Response::json(
            200,
            &json!({
                "response_type": "ephemeral",
                "text": format!("Usage: {command} <your question>"),
            }),
        );
    }
    match run_agent(prompt) {
        Ok(reply) => Response::json(
            200,
            &json!({ "response_type": "in_channel", "text": reply.text }),
        ),
        Err(e) => Response::json(
            200,
            &json!({
                "response_type": "ephemeral",
                "text": format!("Sorry, the agent could not answer: {}", e.message),
            }),
        ),
    }
}
