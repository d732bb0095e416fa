//! `webhook`: `POST /run` with `{"prompt": ..., "agent": ...}` runs an agent and answers
//! `{"trace_id", "text"}`. Requests are signed: `X-Signature: sha256=<hex>`, the HMAC-SHA256
//! of the raw body keyed with `SERVICE_WEBHOOK_SECRET` (checked by the host in constant time).

wit_bindgen::generate!({
    world: "adapter",
    path: "../../wit",
});

use exports::service::adapter::handler::{
    self, Description, HttpRequest, HttpResponse, Job, JobFailure,
};
use guest_util::{Response, header, signature};
use serde_json::{Value, json};
use service::adapter::agent::{self, FailureKind, RunRequest};
use service::adapter::secrets::{self, HmacAlgorithm};
use service::adapter::types::Route;

const SECRET: &str = "SERVICE_WEBHOOK_SECRET";

struct Webhook;

impl From<Response> for HttpResponse {
    fn from(r: Response) -> Self {
        Self {
            status: r.status,
            headers: r.headers,
            body: r.body,
        }
    }
}

/// `Ok` for a correctly signed body; otherwise the answer to send.
fn verify(request: &HttpRequest) -> Result<(), Response> {
    if !secrets::is_set(SECRET) {
        return Err(Response::error(503, &format!("{SECRET} is not set")));
    }
    let signature = signature(header(&request.headers, "x-signature"), "sha256=")
        .ok_or_else(|| Response::error(401, "missing or malformed X-Signature (sha256=<hex>)"))?;
    match secrets::verify_hmac(SECRET, HmacAlgorithm::Sha256, &request.body, &signature) {
        Ok(true) => Ok(()),
        Ok(false) => Err(Response::error(401, "invalid signature")),
        Err(e) => Err(Response::error(503, &format!("{e:?}"))),
    }
}

fn run(body: &[u8]) -> Response {
    let Ok(input) = serde_json::from_slice::<Value>(body) else {
        return Response::error(400, "the body is not JSON");
    };
    let prompt = input["prompt"].as_str().unwrap_or_default().trim();
    if prompt.is_empty() {
        return Response::error(400, "prompt is required");
    }
    let profile = match &input["agent"] {
        Value::Null => None,
        Value::String(name) => Some(name.clone()),
        _ => return Response::error(400, "agent must be a string"),
    };
    let request = RunRequest {
        prompt: prompt.to_owned(),
        profile,
        profile_required: true,
        history: Vec::new(),
    };
    match agent::run(&request) {
        Ok(reply) => Response::json(
            200,
            &json!({ "trace_id": reply.trace_id, "text": reply.text }),
        ),
        Err(e) => {
            let status = match e.kind {
                FailureKind::Invalid => 400,
                FailureKind::UnknownAgent => 404,
                FailureKind::Limited => 429,
                FailureKind::NotConfigured | FailureKind::Denied => 503,
                FailureKind::Cancelled | FailureKind::Failed => 502,
            };
            Response::json(
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
            required_secrets: vec![SECRET.into()],
            metadata: vec![(
                "auth".into(),
                "hmac-sha256 of the raw body with SERVICE_WEBHOOK_SECRET, X-Signature: sha256=<hex>".into(),
            )],
        }
    }

    fn handle_http(request: HttpRequest) -> HttpResponse {
        match verify(&request) {
            Ok(()) => run(&request.body).into(),
            Err(rejected) => rejected.into(),
        }
    }

    fn run_job(_: Job) -> Result<(), JobFailure> {
        Err(JobFailure {
            message: "the webhook adapter queues no jobs".into(),
            retry_after_ms: None,
        })
    }
}

export!(Webhook);
