//! `POST /commands`: a slash command, always answered within the platform's 3 s. Inline with
//! the agent's reply when the agent has been fast lately (see `pace`); otherwise at once with
//! an ephemeral acknowledgement, and the reply is posted later to the command's `response_url`
//! by a job (so it survives restarts and is retried like an event's reply).

use guest_util::{Response, form_field};
use serde_json::json;

use crate::job::{CommandJob, Work};
use crate::service::adapter::jobs;
use crate::service::adapter::log::{self, Level};
use crate::split::{MESSAGE_CHARS, split};
use crate::{HttpRequest, pace, platform, reply};

const WORKING: &str = "Working on it: the answer will be posted here.";

/// The platform's certificate check: `ssl_check=1`, answered with an empty 200 and nothing
/// run. Answered before the signature check, as the platform's own SDK does, since it asks
/// for nothing.
pub fn is_ssl_check(request: &HttpRequest) -> bool {
    request.path == "/commands"
        && std::str::from_utf8(&request.body)
            .is_ok_and(|form| form_field(form, "ssl_check").as_deref() == Some("1"))
}

fn ephemeral(text: &str) -> Response {
    Response::json(200, &json!({ "response_type": "ephemeral", "text": text }))
}

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
        return ephemeral(&format!("Usage: {command} <your question>"));
    }
    let Some(response_url) = form_field(form, "response_url") else {
        return Response::error(400, "a slash command without `response_url`");
    };
    if !platform::is_hooks_url(&response_url) {
        return Response::error(
            400,
            "`response_url` is not on the platform's hooks origin (SERVICE_TEAMCHAT_HOOKS_BASE)",
        );
    }
    let job = CommandJob {
        response_url,
        prompt: prompt.to_owned(),
        answer: None,
    };
    if pace::inline_is_safe() {
        inline(job)
    } else {
        defer(job)
    }
}

/// Runs the agent now; an answer too long for one message is posted by a job, in order.
fn inline(job: CommandJob) -> Response {
    match pace::run_inline(&reply::request(&job.prompt, Vec::new())) {
        Ok(reply) if split(&reply.text, MESSAGE_CHARS).len() == 1 => Response::json(
            200,
            &json!({ "response_type": "in_channel", "text": reply.text }),
        ),
        Ok(reply) => defer(CommandJob {
            answer: Some(reply.text),
            ..job
        }),
        Err(e) => ephemeral(&format!("Sorry, the agent could not answer: {}", e.message)),
    }
}

fn defer(job: CommandJob) -> Response {
    match jobs::enqueue(&Work::Command(job).to_bytes()) {
        Ok(_) => ephemeral(WORKING),
        Err(e) => {
            // The platform does not retry commands: the user is told.
            log::log(
                Level::Warn,
                &format!("cannot queue a command's answer: {e}"),
            );
            ephemeral(&format!("Sorry, the question could not be queued: {e}"))
        }
    }
}
