//! `teamchat`: the team-chat platform's Events API (`POST /events`), slash commands
//! (`POST /commands`) and button clicks (`POST /interactions`: approvals of tool calls).
//! Every request but the certificate check is signature-checked first;
//! events are acknowledged at once and answered from a job, commands inline only when the
//! agent is fast, so the platform's 3 s deadline never waits for a model. Jobs deliver every
//! acknowledged answer once: see `reply`.

wit_bindgen::generate!({
    world: "adapter",
    path: "../../wit",
});

mod approval;
mod commands;
mod context;
mod events;
mod interactions;
mod job;
mod pace;
mod platform;
mod reply;
mod signature;
mod split;

use exports::service::adapter::handler::{
    self, Description, HttpRequest, HttpResponse, Job, JobFailure,
};
use guest_util::Response;
use service::adapter::types::Route;

const SIGNING_SECRET: &str = "SERVICE_TEAMCHAT_SIGNING_SECRET";
const BOT_TOKEN: &str = "SERVICE_TEAMCHAT_BOT_TOKEN";
const AGENT_PROFILE: &str = "SERVICE_TEAMCHAT_AGENT_PROFILE";
const API_BASE: &str = "SERVICE_TEAMCHAT_API_BASE";
const HOOKS_BASE: &str = "SERVICE_TEAMCHAT_HOOKS_BASE";
const CONTEXT_MESSAGES: &str = "SERVICE_TEAMCHAT_CONTEXT_MESSAGES";
const APPROVERS: &str = "SERVICE_TEAMCHAT_APPROVERS";

struct Teamchat;

impl From<Response> for HttpResponse {
    fn from(r: Response) -> Self {
        Self {
            status: r.status,
            headers: r.headers,
            body: r.body,
        }
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
            routes: vec![
                route("/events"),
                route("/commands"),
                route("/interactions"),
            ],
            required_secrets: vec![SIGNING_SECRET.into(), BOT_TOKEN.into()],
            metadata: vec![
                (
                    "auth".into(),
                    "hmac-sha256 over v0:<X-Slack-Request-Timestamp>:<body>, X-Slack-Signature: v0=<hex>, at most 300 s old".into(),
                ),
                ("events".into(), "app_mention, message.im".into()),
                (
                    "commands".into(),
                    "inline when the agent is fast, else acknowledged and answered through response_url".into(),
                ),
                (
                    "approvals".into(),
                    "Approve/Deny buttons in the thread; the asker or SERVICE_TEAMCHAT_APPROVERS decide".into(),
                ),
            ],
        }
    }

    fn handle_http(request: HttpRequest) -> HttpResponse {
        if commands::is_ssl_check(&request) {
            return Response::text(200, "").into();
        }
        if let Err(rejected) = signature::verify(&request) {
            return rejected.into();
        }
        match request.path.as_str() {
            "/events" => events::handle(&request.body),
            "/interactions" => interactions::handle(&request.body),
            _ => commands::handle(&request.body),
        }
        .into()
    }

    fn run_job(job: Job) -> Result<(), JobFailure> {
        reply::run(job)
    }
}

export!(Teamchat);
