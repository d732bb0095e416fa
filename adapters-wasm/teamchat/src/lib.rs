//! `teamchat`: the team-chat platform's Events API (`POST /events`) and slash commands
//! (`POST /commands`). Every request is signature-checked first; events are acknowledged at
//! once and answered from a job, so the platform's 3 s deadline never waits for a model.

wit_bindgen::generate!({
    world: "adapter",
    path: "../../wit",
});

mod commands;
mod events;
mod reply;
mod signature;

use exports::service::adapter::handler::{self, Description, HttpRequest, HttpResponse};
use service::adapter::types::{Capabilities, Route, SecretRequest};

const SIGNING_SECRET: &str = "SERVICE_TEAMCHAT_SIGNING_SECRET";
const BOT_TOKEN: &str = "SERVICE_TEAMCHAT_BOT_TOKEN";
const AGENT_PROFILE: &str = "SERVICE_TEAMCHAT_AGENT_PROFILE";
const API_BASE: &str = "SERVICE_TEAMCHAT_API_BASE";

struct Teamchat;

fn respond(status: u16, content_type: &str, body: impl Into<Vec<u8>>) -> HttpResponse {
    HttpResponse {
        status,
        headers: vec![("content-type".into(), content_type.into())],
        body: body.into(),
    }
}

/// A JSON answer (`{"error": ...}` for failures, like the rest of the API).
fn json(status: u16, value: &serde_json::Value) -> HttpResponse {
    respond(status, "application/json", value.to_string())
}

fn error(status: u16, message: &str) -> HttpResponse {
    json(status, &serde_json::json!({ "error": message }))
}

fn secret(name: &str, required: bool) -> SecretRequest {
    SecretRequest {
        name: name.into(),
        required,
    }
}

impl handler::Guest for Teamchat {
    fn describe() -> Description {
        let route = |path: &str| Route {
            method: "POST".into(),
            path: path.into(),
        };
        Description {
            name: "teamchat".into(),
            version: env!("CARGO_PKG_VERSION").into(),
            routes: vec![route("/events"), route("/commands")],
            capabilities: Capabilities {
                secrets: vec![
                    secret(SIGNING_SECRET, true),
                    secret(BOT_TOKEN, true),
                    secret(AGENT_PROFILE, false),
                    secret(API_BASE, false),
                ],
                // The Web API base is configurable; the operator's grant names its origin.
                outbound_hosts: vec!["*".into()],
                agent: true,
                tools: Vec::new(),
                kv: true,
                jobs: true,
            },
            metadata: vec![
                (
                    "auth".into(),
                    "hmac-sha256 over v0:<X-Slack-Request-Timestamp>:<body>, X-Slack-Signature: v0=<hex>, at most 300 s old".into(),
                ),
                ("events".into(), "app_mention, message.im".into()),
            ],
        }
    }

    fn handle_http(request: HttpRequest) -> HttpResponse {
        if request.method != "POST" || !matches!(request.path.as_str(), "/events" | "/commands") {
            return error(404, "teamchat serves POST /events and POST /commands");
        }
        if let Err(rejected) = signature::verify(&request) {
            return rejected;
        }
        match request.path.as_str() {
            "/events" => events::handle(&request.body),
            _ => commands::handle(&request.body),
        }
    }

    fn run_job(payload: Vec<u8>) -> Result<(), String> {
        reply::run(&payload)
    }
}

export!(Teamchat);
