//! `webhook`: `POST /run` with `{"prompt": ..., "agent": ...}` runs an agent and answers
//! `{"trace_id", "text"}`. Requests are signed: `X-Signature: sha256=<hex>`, the HMAC-SHA256
//! of the raw body keyed with `SERVICE_WEBHOOK_SECRET` (checked by the host in constant time).

wit_bindgen::generate!({
    world: "adapter",
    path: "../../wit",
});

use exports::service::adapter::handler::{self, Description, HttpRequest, HttpResponse};
use guest_util::header;
use serde_json::{Value, json};
use service::adapter::agent::{self, FailureKind, RunRequest};
use service::adapter::secrets;
use service::adapter::types::{Capabilities, Route, SecretRequest};

const SECRET: &str = "SERVICE_WEBHOOK_SECRET";

struct Webhook;

fn json(status: u16, value: &Value) -> HttpResponse {
    HttpResponse {
        status,
        headers: vec![("content-type".into(), "application/json".into())],
        body: value.to_string().into_bytes(),
    }
}

fn error(status: u16, message: &str) -> HttpResponse {
    json(status, &json!({ "error": message }))
}

/// `Ok` for a correctly signed body; otherwise the answer to send.
fn verify(request: &HttpRequest) -> Result<(), HttpResponse> {
    if !secrets::is_set(SECRET) {
        return Err(error(503, &format!("{SECRET} is not set")));
    }
    let signature = header(&request.headers, "x-signature")
        .and_then(|s| s.strip_prefix("sha256="))
        .ok_or_else(|| error(401, "missing or malformed X-Signature (sha256=<hex>)"))?;
    match secrets::verify_hmac_sha256(SECRET, &request.body, signature) {
        Ok(true) => Ok(()),
        Ok(false) => Err(error(401, "invalid signature")),
        Err(e) => Err(error(503, &e)),
    }
}

fn run(body: &[u8]) -> HttpResponse {
    let Ok(input) = serde_json::from_slice::<Value>(body) else {
        return error(400, "the body is not JSON");
    };
    let prompt = input["prompt"].as_str().unwrap_or_default().trim();
    if prompt.is_empty() {
        return error(400, "prompt is required");
    }
    let profile = match &input["agent"] {
        Value::Null => None,
        Value::String(name) => Some(name.clone()),
        _ => return error(400, "agent must be a string"),
    };
    let request = RunRequest {
        prompt: prompt.to_owned(),
        profile,
        profile_required: true,
    };
    match agent::run(&request) {
        Ok(reply) => json(
            200,
            &json!({ "trace_id": reply.trace_id, "text": reply.text }),
        ),
        Err(e) => {
            let status = match e.kind {
                FailureKind::Invalid => 400,
                FailureKind::UnknownAgent => 404,
                FailureKind::NotConfigured | FailureKind::Denied => 503,
                FailureKind::Cancelled | FailureKind::Failed => 502,
            };
            json(
                status,
                &json!({ "error": e.message, "trace_id": e.trace_id }),
            )
        }
    }
}

impl handler::Guest for Webhook {
    fn describe() -> Description {
        Description {
            name: "webhook".into(),
            version: env!("CARGO_PKG_VERSION").into(),
            routes: vec![Route {
                method: "POST".into(),
                path: "/run".into(),
            }],
            capabilities: Capabilities {
                secrets: vec![SecretRequest {
                    name: SECRET.into(),
                    required: true,
                }],
                outbound_hosts: Vec::new(),
                agent: true,
                tools: Vec::new(),
                kv: false,
                jobs: false,
            },
            metadata: vec![(
                "auth".into(),
                "hmac-sha256 of the raw body with SERVICE_WEBHOOK_SECRET, X-Signature: sha256=<hex>".into(),
            )],
        }
    }

    fn handle_http(request: HttpRequest) -> HttpResponse {
        if (request.method.as_str(), request.path.as_str()) != ("POST", "/run") {
            return error(404, "webhook serves POST /run");
        }
        match verify(&request) {
            Ok(()) => run(&request.body),
            Err(rejected) => rejected,
        }
    }

    fn run_job(_: Vec<u8>) -> Result<(), String> {
        Err("the webhook adapter queues no jobs".into())
    }
}

export!(Webhook);
