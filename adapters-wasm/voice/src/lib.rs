//! `voice`: reservation calls. `request_reservation_call` places a call through a
//! Twilio-compatible REST API (only while `SERVICE_VOICE_CALLS_ALLOWED=true`); the provider
//! then drives the conversation over `POST /calls/<n>/answer|speech|status` with TwiML, an
//! agent answering each thing the venue says until it confirms or declines. Every webhook's
//! `X-Twilio-Signature` is checked (by the host, with the auth token) first. A confirmed
//! booking goes into the calendar from a job.

wit_bindgen::generate!({
    world: "adapter-with-tools",
    path: "../../wit",
});

mod booking;
mod calls;
mod conversation;
mod settings;
mod signature;
mod tools;
mod twiml;

use exports::service::adapter::handler::{
    self, Description, HttpRequest, HttpResponse, Job, JobFailure,
};
use exports::service::adapter::tool_provider;
use guest_util::Response;
use service::adapter::log::{self, Level};
use service::adapter::types::{Route, ToolSpec};

struct Voice;

impl From<Response> for HttpResponse {
    fn from(r: Response) -> Self {
        Self {
            status: r.status,
            headers: r.headers,
            body: r.body,
        }
    }
}

impl handler::Guest for Voice {
    fn describe() -> Description {
        Description {
            name: "voice".into(),
            version: env!("CARGO_PKG_VERSION").into(),
            routes: vec![Route {
                method: "POST".into(),
                path: "/calls/*".into(),
            }],
            required_secrets: settings::REQUIRED.iter().map(|s| (*s).to_owned()).collect(),
            metadata: vec![
                (
                    "auth".into(),
                    "X-Twilio-Signature: base64 HMAC-SHA1 of the public URL and the sorted form parameters, keyed by SERVICE_VOICE_TWILIO_AUTH_TOKEN".into(),
                ),
                ("gate".into(), "calls only while SERVICE_VOICE_CALLS_ALLOWED=true".into()),
            ],
        }
    }

    fn handle_http(request: HttpRequest) -> HttpResponse {
        match signature::verify(&request) {
            Ok(params) => conversation::handle(&request.path, &params).into(),
            Err(rejected) => rejected.into(),
        }
    }

    fn run_job(job: Job) -> Result<(), JobFailure> {
        booking::run(&job.payload).map_err(|message| JobFailure {
            message,
            retry_after_ms: None,
        })
    }
}

impl tool_provider::Guest for Voice {
    fn list_tools() -> Vec<ToolSpec> {
        let missing = settings::missing();
        if !missing.is_empty() {
            log::log(
                Level::Warn,
                &format!("no voice tools offered: {} not set", missing.join(", ")),
            );
            return Vec::new();
        }
        tools::specs()
            .into_iter()
            .map(|spec| ToolSpec {
                name: spec.name.into(),
                description: spec.description.into(),
                parameters_json: spec.parameters.to_string(),
            })
            .collect()
    }

    fn call_tool(name: String, args_json: String) -> Result<String, String> {
        tools::call(&name, &args_json)
    }
}

export!(Voice);
