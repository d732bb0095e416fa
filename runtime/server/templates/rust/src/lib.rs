//! {{name}}: a service-runtime adapter. Under `/api/adapters/{{name}}/` it serves `GET /hello`
//! and `POST /ask`, which runs an agent with the request body as its prompt and answers the
//! agent's reply. Its grant (grant.toml) allows agent runs.

wit_bindgen::generate!({
    world: "adapter",
    path: "wit",
});

use exports::service::adapter::handler::{
    self, Description, HttpRequest, HttpResponse, Job, JobFailure,
};
use service::adapter::agent::{self, FailureKind, RunRequest};
use service::adapter::registry;
use service::adapter::types::Route;

const NAME: &str = "{{name}}";
const VERSION: &str = env!("CARGO_PKG_VERSION");

struct Adapter;

impl handler::Guest for Adapter {
    fn describe() -> Description {
        Description {
            name: NAME.into(),
            version: VERSION.into(),
            routes: vec![route("GET", "/hello"), route("POST", "/ask")],
            required_secrets: vec![],
            metadata: vec![("language".into(), "rust".into())],
        }
    }

    fn handle_http(request: HttpRequest) -> HttpResponse {
        // Shows as `last_activity_at` on the adapter's registry entry.
        registry::touch();
        match (request.method.as_str(), request.path.as_str()) {
            ("GET", "/hello") => text(200, &format!("hello from {NAME} {VERSION}")),
            ("POST", "/ask") => ask(&request.body),
            // The host sends only the routes `describe` lists.
            _ => error(404, "no such route"),
        }
    }

    fn run_job(_: Job) -> Result<(), JobFailure> {
        // It never enqueues jobs, so the host has no reason to call this.
        Err(JobFailure {
            message: format!("{NAME} has no jobs"),
            retry_after_ms: None,
        })
    }
}

/// Runs the `default` agent with the body as the prompt.
fn ask(body: &[u8]) -> HttpResponse {
    let prompt = String::from_utf8_lossy(body);
    if prompt.trim().is_empty() {
        return error(400, "the body is the prompt, and it is empty");
    }
    let request = RunRequest {
        prompt: prompt.into_owned(),
        profile: None,
        profile_required: false,
        history: Vec::new(),
    };
    match agent::run(&request) {
        Ok(reply) => text(200, &reply.text),
        Err(e) => {
            let status = match e.kind {
                FailureKind::Invalid => 400,
                FailureKind::UnknownAgent => 404,
                FailureKind::Limited => 429,
                FailureKind::NotConfigured | FailureKind::Denied => 503,
                FailureKind::Cancelled | FailureKind::Failed => 502,
            };
            error(status, &e.message)
        }
    }
}

fn route(method: &str, path: &str) -> Route {
    Route {
        method: method.into(),
        path: path.into(),
    }
}

fn respond(status: u16, content_type: &str, body: String) -> HttpResponse {
    HttpResponse {
        status,
        headers: vec![("content-type".into(), content_type.into())],
        body: body.into_bytes(),
    }
}

fn text(status: u16, body: &str) -> HttpResponse {
    respond(status, "text/plain; charset=utf-8", body.to_owned())
}

/// `{"error": message}`, the shape of every error of the API.
fn error(status: u16, message: &str) -> HttpResponse {
    let mut quoted = String::from("\"");
    for c in message.chars() {
        match c {
            '"' => quoted.push_str("\\\""),
            '\\' => quoted.push_str("\\\\"),
            c if c < ' ' => quoted.push_str(&format!("\\u{:04x}", u32::from(c))),
            c => quoted.push(c),
        }
    }
    quoted.push('"');
    respond(status, "application/json", format!("{{\"error\":{quoted}}}"))
}

export!(Adapter);
