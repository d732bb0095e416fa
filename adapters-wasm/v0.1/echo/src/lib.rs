//! `echo` as it was built for `service:adapter@0.1.0`: a well-behaved adapter with one route
//! per host import. Built once and checked in as `tests/fixtures/echo-0.1.0.wasm`, so every
//! later host is tested against a component built for the first contract (see README.md).

wit_bindgen::generate!({
    world: "adapter-host",
    path: "../../../wit/v0.1.0",
});

use exports::service::adapter::handler::{self, Description, HttpRequest, HttpResponse};
use exports::service::adapter::{lifecycle, tool_provider};
use service::adapter::agent::{self, RunRequest};
use service::adapter::outbound_http::{self, Request};
use service::adapter::types::{Capabilities, Route, SecretRequest, ToolSpec};
use service::adapter::{jobs, kv, registry, secrets, tools};
use std::time::Duration;

const VERSION: &str = "0.1";

/// The routes `describe` reports (paths without a query); `handle_http` serves exactly these.
const ROUTES: &[(&str, &str)] = &[
    ("GET", "/hello"),
    ("POST", "/echo"),
    ("GET", "/slow"),
    ("GET", "/fetch"),
    ("GET", "/secret"),
    ("GET", "/claim"),
    ("POST", "/kv"),
    ("GET", "/kv"),
    ("POST", "/job"),
    ("POST", "/agent"),
    ("POST", "/tool"),
    ("POST", "/verify"),
];

struct Component;

/// The first value of `key` in a raw query string (`a=1&b=x%2Fy`), percent-decoded.
///
/// Only `%XX` escapes are decoded; `+` is kept as is, so URLs and keys containing `+` survive.
fn query_param(query: &str, key: &str) -> Option<String> {
    query
        .split('&')
        .map(|pair| pair.split_once('=').unwrap_or((pair, "")))
        .find(|(k, _)| percent_decode(k) == key)
        .map(|(_, v)| percent_decode(v))
}

/// Decodes `%XX` escapes; a malformed escape is kept literally. Invalid UTF-8 is replaced.
fn percent_decode(s: &str) -> String {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let escaped = (bytes[i] == b'%')
            .then(|| bytes.get(i + 1..i + 3))
            .flatten()
            .and_then(|hex| u8::from_str_radix(std::str::from_utf8(hex).ok()?, 16).ok());
        match escaped {
            Some(b) => {
                out.push(b);
                i += 3;
            }
            None => {
                out.push(bytes[i]);
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

fn respond(status: u16, body: impl Into<Vec<u8>>) -> HttpResponse {
    HttpResponse {
        status,
        headers: vec![("content-type".into(), "text/plain; charset=utf-8".into())],
        body: body.into(),
    }
}

/// Runs `f` with the named query parameter, or answers 400 when it is missing.
fn with_param(
    req: &HttpRequest,
    name: &str,
    f: impl FnOnce(String) -> HttpResponse,
) -> HttpResponse {
    match query_param(&req.query, name) {
        Some(value) => f(value),
        None => respond(400, format!("missing query parameter {name}")),
    }
}

fn fetch(url: String) -> HttpResponse {
    let request = Request {
        method: "GET".into(),
        url,
        // The host substitutes the secret after its checks; the token never enters the guest.
        headers: vec![(
            "authorization".into(),
            "Bearer {{secret:ECHO_TOKEN}}".into(),
        )],
        body: Vec::new(),
        timeout_ms: None,
    };
    match outbound_http::send(&request) {
        Ok(resp) => {
            let mut body = format!("{}\n", resp.status).into_bytes();
            body.extend_from_slice(&resp.body);
            respond(200, body)
        }
        Err(e) => respond(502, e),
    }
}

fn run_agent(body: Vec<u8>) -> HttpResponse {
    let Ok(prompt) = String::from_utf8(body) else {
        return respond(400, "body is not utf-8");
    };
    let request = RunRequest {
        prompt,
        profile: None,
        profile_required: false,
    };
    match agent::run(&request) {
        Ok(reply) => respond(200, format!("{}\n{}", reply.trace_id, reply.text)),
        Err(e) => respond(502, format!("{:?}: {}", e.kind, e.message)),
    }
}

/// The host checks the signature, so the signing secret never enters the guest.
fn verify(body: &[u8], signature_hex: &str) -> HttpResponse {
    match secrets::verify_hmac_sha256("ECHO_TOKEN", body, signature_hex) {
        Ok(valid) => respond(200, valid.to_string()),
        Err(e) => respond(503, e),
    }
}

impl handler::Guest for Component {
    fn describe() -> Description {
        Description {
            name: "echo".into(),
            version: VERSION.into(),
            routes: ROUTES
                .iter()
                .map(|(method, path)| Route {
                    method: (*method).into(),
                    path: (*path).into(),
                })
                .collect(),
            capabilities: Capabilities {
                secrets: vec![SecretRequest {
                    name: "ECHO_TOKEN".into(),
                    required: false,
                }],
                outbound_hosts: vec!["*".into()],
                agent: true,
                tools: vec!["*".into()],
                kv: true,
                jobs: true,
            },
            metadata: vec![("auth".into(), "none".into())],
        }
    }

    fn handle_http(req: HttpRequest) -> HttpResponse {
        match (req.method.as_str(), req.path.as_str()) {
            ("GET", "/hello") => {
                registry::touch();
                respond(200, format!("hello from echo v{VERSION}"))
            }
            ("POST", "/echo") => {
                let mut resp = respond(200, req.body);
                resp.headers.push(("x-echo-version".into(), VERSION.into()));
                resp
            }
            ("GET", "/slow") => with_param(&req, "ms", |ms| match ms.parse() {
                // WASI clocks back `thread::sleep`, so this exercises the host's deadline.
                Ok(ms) => {
                    std::thread::sleep(Duration::from_millis(ms));
                    respond(200, format!("slow done v{VERSION}"))
                }
                Err(_) => respond(400, "ms must be a number"),
            }),
            ("GET", "/fetch") => with_param(&req, "url", fetch),
            ("GET", "/secret") => respond(200, secrets::get("ECHO_TOKEN").unwrap_or("none".into())),
            ("GET", "/claim") => with_param(&req, "key", |key| {
                respond(200, kv::claim(&key, 60_000).to_string())
            }),
            ("POST", "/kv") => with_param(&req, "key", |key| {
                kv::set(&key, &req.body, None);
                respond(200, "stored")
            }),
            ("GET", "/kv") => with_param(&req, "key", |key| match kv::get(&key) {
                Some(value) => respond(200, value),
                None => respond(404, "not found"),
            }),
            ("POST", "/job") => match jobs::enqueue(&req.body) {
                Ok(task_id) => respond(202, task_id),
                Err(e) => respond(500, e),
            },
            ("POST", "/agent") => run_agent(req.body),
            ("POST", "/tool") => with_param(&req, "name", |name| {
                match tools::invoke(&name, &String::from_utf8_lossy(&req.body)) {
                    Ok(result) => respond(200, result),
                    Err(e) => respond(502, e),
                }
            }),
            ("POST", "/verify") => with_param(&req, "sig", |sig| verify(&req.body, &sig)),
            _ => respond(404, "no route"),
        }
    }

    fn run_job(payload: Vec<u8>) -> Result<(), String> {
        let text = String::from_utf8_lossy(&payload);
        if text == "fail" {
            return Err("job failed on purpose".into());
        }
        if let Some(ms) = text.strip_prefix("slow:") {
            let ms = ms.parse().map_err(|_| format!("bad delay {ms:?}"))?;
            std::thread::sleep(Duration::from_millis(ms));
            return Ok(());
        }
        // Leaves a mark the test can read back through `GET /kv?key=job-done:<payload>`.
        kv::set(&format!("job-done:{text}"), &payload, None);
        Ok(())
    }
}

/// Appends a hook's name to the `lifecycle` key, so tests can see which hooks ran and in what
/// order; while `fail-hooks` is `yes` the hook fails instead.
fn lifecycle_event(hook: &str) -> Result<(), String> {
    if kv::get("fail-hooks").as_deref() == Some(b"yes") {
        return Err(format!("{hook} refused on purpose"));
    }
    let mut log = kv::get("lifecycle").unwrap_or_default();
    if !log.is_empty() {
        log.push(b',');
    }
    log.extend_from_slice(hook.as_bytes());
    kv::set("lifecycle", &log, None);
    Ok(())
}

impl lifecycle::Guest for Component {
    fn start() -> Result<(), String> {
        lifecycle_event("start")?;
        registry::mark_running();
        Ok(())
    }

    fn stop() -> Result<(), String> {
        lifecycle_event("stop")
    }
}

impl tool_provider::Guest for Component {
    fn list_tools() -> Vec<ToolSpec> {
        vec![ToolSpec {
            name: "echo_tool".into(),
            description: "Echoes its input".into(),
            parameters_json:
                r#"{"type":"object","properties":{"text":{"type":"string"}},"required":["text"]}"#
                    .into(),
        }]
    }

    fn call_tool(name: String, args_json: String) -> Result<String, String> {
        match name.as_str() {
            "echo_tool" => Ok(format!("echo: {args_json}")),
            _ => Err(format!("unknown tool {name}")),
        }
    }
}

export!(Component);
