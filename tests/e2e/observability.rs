//! Traces over OTLP and Prometheus metrics through the real binary: a local receiver takes the
//! exporter's requests (protobuf and JSON) and the test decodes them with the OTLP schema, so
//! names, attributes and parentage are checked as a collector would see them.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use axum::Router;
use axum::body::Bytes;
use axum::http::HeaderMap;
use axum::routing::{get, post};
use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;
use opentelemetry_proto::tonic::common::v1::any_value::Value as Any;
use opentelemetry_proto::tonic::common::v1::{AnyValue, KeyValue};
use prost::Message;
use reqwest::{Method, StatusCode};
use serde_json::{Value, json};

use crate::fakes::llm::{self, Reply};
use crate::guests::guest;
use crate::support::{Server, eventually, openai_env, spawn_fake, wait};
use crate::wasm::{ECHO_GRANT, drop_in, loaded};

/// A span as the collector received it.
#[derive(Debug, Clone)]
struct Span {
    trace_id: String,
    span_id: String,
    parent: String,
    name: String,
    kind: i32,
    attributes: HashMap<String, Value>,
    error: bool,
}

impl Span {
    fn attr(&self, key: &str) -> &Value {
        self.attributes.get(key).unwrap_or(&Value::Null)
    }
}

/// Everything the exporter sent: content types and the spans, decoded.
#[derive(Clone, Default)]
struct Received {
    content_types: Arc<Mutex<Vec<String>>>,
    spans: Arc<Mutex<Vec<Span>>>,
    service_names: Arc<Mutex<Vec<String>>>,
}

fn value(any: &Option<AnyValue>) -> Value {
    match any.as_ref().and_then(|v| v.value.as_ref()) {
        Some(Any::StringValue(s)) => json!(s),
        Some(Any::IntValue(i)) => json!(i),
        Some(Any::BoolValue(b)) => json!(b),
        Some(Any::DoubleValue(d)) => json!(d),
        Some(Any::ArrayValue(array)) => array
            .values
            .iter()
            .map(|v| value(&Some(v.clone())))
            .collect(),
        _ => Value::Null,
    }
}

fn attributes(list: &[KeyValue]) -> HashMap<String, Value> {
    list.iter()
        .map(|kv| (kv.key.clone(), value(&kv.value)))
        .collect()
}

impl Received {
    fn take(&self, headers: &HeaderMap, body: &[u8]) {
        let content_type = headers["content-type"].to_str().unwrap().to_owned();
        let request: ExportTraceServiceRequest = if content_type.contains("json") {
            serde_json::from_slice(body).expect("OTLP/JSON")
        } else {
            ExportTraceServiceRequest::decode(body).expect("OTLP/protobuf")
        };
        self.content_types.lock().unwrap().push(content_type);
        for resource in request.resource_spans {
            let resource_attributes =
                attributes(&resource.resource.map(|r| r.attributes).unwrap_or_default());
            if let Some(name) = resource_attributes["service.name"].as_str() {
                self.service_names.lock().unwrap().push(name.to_owned());
            }
            for scope in resource.scope_spans {
                for span in scope.spans {
                    self.spans.lock().unwrap().push(Span {
                        trace_id: hex::encode(&span.trace_id),
                        span_id: hex::encode(&span.span_id),
                        parent: hex::encode(&span.parent_span_id),
                        name: span.name,
                        kind: span.kind,
                        attributes: attributes(&span.attributes),
                        error: span.status.is_some_and(|s| s.code == 2),
                    });
                }
            }
        }
    }

    fn spans(&self) -> Vec<Span> {
        self.spans.lock().unwrap().clone()
    }

    /// The span named `name`, once it has arrived.
    async fn span(&self, name: &str) -> Span {
        let found = wait::until(
            std::time::Duration::from_secs(20),
            wait::EVERY,
            async || self.spans().into_iter().find(|s| s.name == name),
        )
        .await;
        found.unwrap_or_else(|| {
            let names: Vec<String> = self.spans().into_iter().map(|s| s.name).collect();
            panic!("no span {name:?} within 20 s; received {names:?}")
        })
    }
}

/// A collector on a free port: `/v1/traces` takes what the exporter sends.
async fn collector() -> (String, Received) {
    let received = Received::default();
    let kept = received.clone();
    let router = Router::new().route(
        "/v1/traces",
        post(move |headers: HeaderMap, body: Bytes| {
            let kept = kept.clone();
            async move {
                kept.take(&headers, &body);
                ""
            }
        }),
    );
    (spawn_fake(router).await, received)
}

/// Settings that export to `endpoint` quickly, for tests.
fn otel_env(endpoint: &str, protocol: &str) -> Vec<(&'static str, String)> {
    vec![
        ("OTEL_EXPORTER_OTLP_ENDPOINT", endpoint.to_owned()),
        ("OTEL_EXPORTER_OTLP_PROTOCOL", protocol.to_owned()),
        ("OTEL_BSP_SCHEDULE_DELAY", "50".to_owned()),
        ("OTEL_SERVICE_NAME", "runtime-under-test".to_owned()),
    ]
}

const TRACE: &str = "4bf92f3577b34da6a3ce929d0e0e4736";
const PARENT: &str = "00f067aa0ba902b7";

async fn chat_with_traceparent(server: &Server) -> Value {
    let response = reqwest::Client::new()
        .post(server.url("/api/chat"))
        .header("traceparent", format!("00-{TRACE}-{PARENT}-01"))
        .json(&json!({"prompt": "find my notes"}))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), StatusCode::OK);
    response.json().await.unwrap()
}

#[tokio::test]
async fn agent_runs_are_exported_as_genai_spans_in_protobuf_and_json() {
    for (protocol, content_type, capture) in [
        ("http/protobuf", "application/x-protobuf", false),
        ("http/json", "application/json", true),
    ] {
        let (endpoint, received) = collector().await;
        let fake = llm::openai(vec![
            Reply::Tools(vec![("t1", "search_notes", json!({"query": "plans"}))]),
            Reply::Text("nothing yet"),
        ])
        .await;
        let mut env = openai_env(&fake.url);
        env.extend(otel_env(&endpoint, protocol));
        if capture {
            env.push((
                "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT",
                "true".into(),
            ));
        }
        let server = Server::start_with_owned(&env);
        let answer = chat_with_traceparent(&server).await;

        let request = received.span("POST /api/chat").await;
        let run = received.span("invoke_agent default").await;
        let tool = received.span("execute_tool search_notes").await;
        let calls: Vec<Span> = eventually(20, async || {
            let calls: Vec<Span> = received
                .spans()
                .into_iter()
                .filter(|s| s.name == "chat gpt-4o-mini")
                .collect();
            (calls.len() == 2).then_some(calls)
        })
        .await;
        assert!(
            received
                .content_types
                .lock()
                .unwrap()
                .iter()
                .all(|t| t == content_type)
        );
        assert!(
            received
                .service_names
                .lock()
                .unwrap()
                .iter()
                .all(|n| n == "runtime-under-test")
        );

        // One trace, continued from the caller's traceparent.
        for span in [&request, &run, &tool, &calls[0], &calls[1]] {
            assert_eq!(span.trace_id, TRACE, "{span:?}");
        }
        assert_eq!(
            (request.parent.as_str(), request.kind),
            (PARENT, 2),
            "server"
        );
        assert_eq!(request.attr("http.route"), "/api/chat");
        assert_eq!(request.attr("http.response.status_code"), 200);
        assert_eq!(run.parent, request.span_id);
        for child in [&tool, &calls[0], &calls[1]] {
            assert_eq!(child.parent, run.span_id, "{child:?}");
        }

        // The GenAI conventions.
        assert_eq!(run.attr("gen_ai.operation.name"), "invoke_agent");
        assert_eq!(run.attr("gen_ai.agent.name"), "default");
        assert_eq!(run.attr("gen_ai.provider.name"), "openai");
        assert_eq!(run.attr("service_runtime.trace_id"), &answer["trace_id"]);
        assert_eq!(run.attr("gen_ai.usage.input_tokens"), 22);
        let first = &calls[0];
        assert_eq!(first.kind, 3, "client");
        assert_eq!(first.attr("gen_ai.operation.name"), "chat");
        assert_eq!(first.attr("gen_ai.request.model"), "gpt-4o-mini");
        assert_eq!(first.attr("gen_ai.response.model"), "gpt-4o-mini");
        assert_eq!(first.attr("gen_ai.usage.input_tokens"), 11);
        assert_eq!(first.attr("gen_ai.usage.output_tokens"), 5);
        let reasons: Vec<&Value> = calls
            .iter()
            .map(|c| c.attr("gen_ai.response.finish_reasons"))
            .collect();
        assert!(reasons.contains(&&json!(["tool_calls"])) && reasons.contains(&&json!(["stop"])));
        assert_eq!(tool.attr("gen_ai.operation.name"), "execute_tool");
        assert_eq!(tool.attr("gen_ai.tool.call.id"), "t1");
        assert!(!tool.error);

        // What was said, only when asked for.
        let said = calls.iter().any(|c| {
            c.attr("gen_ai.input.messages")
                .as_str()
                .is_some_and(|m| m.contains("find my notes"))
        });
        assert_eq!(said, capture, "{calls:?}");
        assert_eq!(tool.attr("gen_ai.tool.call.arguments").is_string(), capture);

        // The model calls carried the trace on to the provider, each as its chat span's child.
        for recorded in fake.requests() {
            let traceparent = recorded.headers["traceparent"].to_str().unwrap().to_owned();
            let [_, trace, parent, _] = traceparent.split('-').collect::<Vec<_>>()[..] else {
                panic!("{traceparent}");
            };
            assert_eq!(trace, TRACE);
            assert!(calls.iter().any(|c| c.span_id == parent), "{traceparent}");
        }
    }
}

#[tokio::test]
async fn a_job_continues_the_trace_of_the_request_that_queued_it() {
    let (endpoint, received) = collector().await;
    let target = spawn_fake(Router::new().route(
        "/seen",
        get(|headers: HeaderMap| async move {
            headers
                .get("traceparent")
                .map_or("none".to_owned(), |v| v.to_str().unwrap().to_owned())
        }),
    ))
    .await;
    let mut env = otel_env(&endpoint, "http/protobuf");
    // The echo component's request carries it.
    env.push(("ECHO_TOKEN", "t0k".into()));
    let server = Server::start_with_owned(&env);
    drop_in(
        &server,
        "echo",
        &guest("echo"),
        &ECHO_GRANT.replace("http://127.0.0.1:9", &target),
    );
    loaded(&server, "echo").await;
    let client = reqwest::Client::new();
    let traced = |method: Method, path: &str| {
        client
            .request(method, server.url(path))
            .header("traceparent", format!("00-{TRACE}-{PARENT}-01"))
    };
    let queued = traced(Method::POST, "/api/adapters/echo/job")
        .body("payload-1")
        .send()
        .await
        .unwrap();
    assert_eq!(queued.status(), StatusCode::ACCEPTED);
    let job = received.span("job echo").await;
    let request = received.span("POST /api/adapters/{name}/{*rest}").await;
    let handled = received
        .spans()
        .into_iter()
        .find(|s| s.name == "handle-http echo")
        .unwrap();
    assert_eq!(request.attr("service_runtime.adapter"), "echo");
    assert_eq!(handled.parent, request.span_id);
    assert_eq!(job.trace_id, TRACE, "the job is in the request's trace");
    assert_eq!(job.parent, handled.span_id, "queued by the handler's call");
    assert_eq!(job.kind, 5, "consumer");
    let ran = received.span("run-job echo").await;
    assert_eq!(ran.parent, job.span_id);

    // A component's request carries the trace on, from its own client span.
    let fetched = traced(
        Method::GET,
        &format!("/api/adapters/echo/fetch?url={target}/seen"),
    )
    .send()
    .await
    .unwrap()
    .text()
    .await
    .unwrap();
    assert!(fetched.starts_with("200"), "{fetched}");
    let outbound = received.span("GET").await;
    assert_eq!(outbound.kind, 3);
    assert_eq!(outbound.attr("http.response.status_code"), 200);
    assert!(
        fetched.contains(&format!("00-{TRACE}-{}-01", outbound.span_id)),
        "{fetched}"
    );
}

/// `name{labels} value` lines of a Prometheus text exposition.
pub(crate) fn samples(text: &str) -> HashMap<String, f64> {
    text.lines()
        .filter(|line| !line.starts_with('#') && !line.trim().is_empty())
        .map(|line| {
            let (name, value) = line.rsplit_once(' ').unwrap();
            (name.to_owned(), value.parse().unwrap())
        })
        .collect()
}

pub(crate) async fn scrape(server: &Server, token: Option<&str>) -> (StatusCode, String, String) {
    let mut request = reqwest::Client::new().get(server.url("/metrics"));
    if let Some(token) = token {
        request = request.bearer_auth(token);
    }
    let response = request.send().await.unwrap();
    let content_type = response
        .headers()
        .get("content-type")
        .map(|v| v.to_str().unwrap().to_owned())
        .unwrap_or_default();
    (
        response.status(),
        content_type,
        response.text().await.unwrap(),
    )
}

#[tokio::test]
async fn metrics_count_runs_calls_requests_and_limits() {
    let fake = llm::openai(vec![
        Reply::Tools(vec![("t1", "search_notes", json!({"query": "plans"}))]),
        Reply::Text("nothing yet"),
    ])
    .await;
    let mut env = openai_env(&fake.url);
    env.push(("SERVICE_METRICS_TOKEN", "scrape-me".into()));
    let server = Server::start_with_owned(&env);
    drop_in(
        &server,
        "echo",
        &guest("echo"),
        &format!("{ECHO_GRANT}[limits]\njobs_pending = 1\n"),
    );
    loaded(&server, "echo").await;
    let (status, _) = server.post("/api/chat", json!({"prompt": "go"})).await;
    assert_eq!(status, StatusCode::OK);
    let (status, _) = server
        .send_text(Method::GET, "/api/adapters/echo/hello", "")
        .await;
    assert_eq!(status, StatusCode::OK);
    // One slow job fills the queue; the next is refused over the quota.
    server
        .send_text(Method::POST, "/api/adapters/echo/job", "slow:30000")
        .await;
    server
        .send_text(Method::POST, "/api/adapters/echo/job", "payload")
        .await;

    let (status, _, _) = scrape(&server, None).await;
    assert_eq!(status, StatusCode::UNAUTHORIZED, "the token is required");
    let (status, content_type, text) = scrape(&server, Some("scrape-me")).await;
    assert_eq!(status, StatusCode::OK);
    assert!(
        content_type.starts_with("text/plain; version=0.0.4"),
        "{content_type}"
    );
    let found = samples(&text);
    let sample = |name: &str| {
        *found
            .get(name)
            .unwrap_or_else(|| panic!("no {name} in\n{text}"))
    };
    assert_eq!(
        sample("service_runtime_agent_runs_total{agent=\"default\",outcome=\"ok\"}"),
        1.0
    );
    assert_eq!(
        sample(
            "service_runtime_model_calls_total{provider=\"openai\",model=\"gpt-4o-mini\",outcome=\"ok\"}"
        ),
        2.0
    );
    assert_eq!(
        sample(
            "service_runtime_model_tokens_total{provider=\"openai\",model=\"gpt-4o-mini\",kind=\"output\"}"
        ),
        10.0
    );
    assert_eq!(
        sample("service_runtime_tool_calls_total{tool=\"search_notes\",outcome=\"ok\"}"),
        1.0
    );
    assert_eq!(
        sample("service_runtime_tool_call_duration_seconds_count{tool=\"search_notes\"}"),
        1.0
    );
    assert_eq!(
        sample("service_runtime_adapter_requests_total{adapter=\"echo\",status=\"200\"}"),
        1.0
    );
    assert!(
        sample("service_runtime_adapter_request_duration_seconds_count{adapter=\"echo\"}") >= 3.0
    );
    assert_eq!(
        sample("service_runtime_adapter_limit_hits_total{adapter=\"echo\",kind=\"QuotaExceeded\"}"),
        1.0
    );
    let running = eventually(10, async || {
        let (_, _, text) = scrape(&server, Some("scrape-me")).await;
        samples(&text)
            .get("service_runtime_jobs{adapter=\"echo\",state=\"running\"}")
            .copied()
    })
    .await;
    assert_eq!(running, 1.0);
    assert!(found.contains_key("service_runtime_otel_spans_dropped_total"));
}

#[tokio::test]
async fn a_dead_or_stalled_collector_costs_the_runs_nothing() {
    // One collector refuses connections; the other takes them and never answers.
    let stalled = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let stalled_url = format!("http://{}", stalled.local_addr().unwrap());
    for endpoint in ["http://127.0.0.1:1".to_owned(), stalled_url] {
        let mut env = otel_env(&endpoint, "http/protobuf");
        env.push(("OTEL_BSP_MAX_QUEUE_SIZE", "4".into()));
        env.push(("OTEL_EXPORTER_OTLP_TIMEOUT", "500".into()));
        let server = Server::start_with_owned(&env);
        for n in 0..12 {
            let (status, answer) = server
                .post("/api/chat", json!({"prompt": format!("run {n}")}))
                .await;
            assert_eq!(status, StatusCode::OK, "{answer}");
        }
        let (_, _, text) = scrape(&server, None).await;
        let found = samples(&text);
        let lost = found["service_runtime_otel_spans_dropped_total"]
            + found["service_runtime_otel_spans_failed_total"];
        assert!(lost > 0.0, "{text}");
        assert_eq!(found["service_runtime_otel_spans_exported_total"], 0.0);
        assert!(found["service_runtime_otel_spans_queued"] <= 4.0);
    }
}

/// Known adapters' series start at 0 (Prometheus' advice: avoid missing metrics), so an alert
/// on pending jobs sees 0, not "no data", on a server that has queued nothing yet.
#[tokio::test]
async fn known_adapters_series_start_at_zero() {
    let server = Server::start();
    let (status, _, text) = scrape(&server, None).await;
    assert_eq!(status, StatusCode::OK);
    let found = samples(&text);
    for adapter in ["teamchat", "webhook", "email", "scheduler"] {
        for state in ["pending", "running"] {
            let series = format!("service_runtime_jobs{{adapter=\"{adapter}\",state=\"{state}\"}}");
            assert_eq!(found.get(&series), Some(&0.0), "{series}:\n{text}");
        }
    }
    for series in [
        "service_runtime_adapter_instances_in_use{adapter=\"teamchat\"}",
        "service_runtime_adapter_limit_hits_total{adapter=\"teamchat\",kind=\"QuotaExceeded\"}",
    ] {
        assert_eq!(found.get(series), Some(&0.0), "{series}:\n{text}");
    }
}
