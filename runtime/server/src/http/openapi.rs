//! `GET /api/openapi.json`: the API as an OpenAPI 3.1 document. Each operation comes from its
//! handler's `#[utoipa::path]` and the types the handler reads and answers; who may call it
//! comes from where it is routed (`routes`): its permission becomes the operation's security and
//! its 401 and 403 answers, so the document and the router cannot disagree on it.

use std::collections::BTreeMap;

use axum::Extension;
use axum::body::Bytes;
use axum::http::header;
use axum::response::IntoResponse;
use utoipa::OpenApi;
use utoipa::openapi::path::{
    HttpMethod, Operation, OperationBuilder, ParameterBuilder, ParameterIn, PathItem,
};
use utoipa::openapi::request_body::RequestBodyBuilder;
use utoipa::openapi::response::{Response, ResponseBuilder};
use utoipa::openapi::schema::{ObjectBuilder, Type};
use utoipa::openapi::security::{
    ApiKey, ApiKeyValue, HttpAuthScheme, HttpBuilder, SecurityRequirement, SecurityScheme,
};
use utoipa::openapi::{self as spec, Content, Ref, RefOr, Required};

use super::api_error::ErrorBody;
use super::guards;
use super::identity::CSRF_HEADER;
use super::routes::Declared;
use super::{
    a2a, adapters, agents, approvals, audit, chat, conversations, dashboard, health, integrations,
    mcp_servers, me, metrics, openapi, recordings, remote_agents, runs, schedules, session,
    shadows, single_sign_on, store, tasks, tokens, tools, traces, users,
};
use crate::access::Permission;
use crate::access::sessions::COOKIE;

#[derive(OpenApi)]
#[openapi(
    info(
        title = "service-runtime",
        description = "A local agent runtime: agent profiles, the store of bundles, runs, \
            conversations, approvals, tasks, traces, tools, schedules and adapters. Every error \
            answers `{\"error\": \"...\"}` (with `field` when one input field is to blame)."
    ),
    paths(
        openapi::show,
        health::show,
        agents::list,
        agents::create,
        agents::show,
        agents::update,
        agents::remove,
        agents::references,
        agents::export,
        chat::complete,
        chat::stream,
        runs::create,
        runs::list,
        runs::show,
        runs::cancel,
        runs::stream,
        runs::webhook,
        conversations::list,
        conversations::show,
        conversations::remove,
        approvals::list,
        approvals::decide,
        store::list,
        store::show,
        store::install,
        store::import,
        traces::list,
        traces::show,
        me::show,
        session::create,
        session::remove,
        session::with_link,
        single_sign_on::start,
        single_sign_on::callback,
        users::list,
        users::create,
        users::update,
        users::remove,
        users::link,
        tokens::list,
        tokens::create,
        tokens::revoke,
        audit::list,
        schedules::list,
        schedules::create,
        schedules::show,
        schedules::update,
        schedules::remove,
        schedules::run,
        tasks::list,
        tasks::remove,
        tools::list,
        mcp_servers::list,
        remote_agents::list,
        adapters::list,
        adapters::enable,
        adapters::disable,
        recordings::list,
        recordings::show,
        shadows::show,
        integrations::list,
        integrations::write_key,
        integrations::verify,
        a2a::card,
        a2a::rpc,
        metrics::show,
        dashboard::index,
        dashboard::asset,
    ),
    components(schemas(ErrorBody)),
    tags(
        (name = "agents", description = "Agent profiles"),
        (name = "store", description = "The store of agent bundles"),
        (name = "chat", description = "Chat: a run answered at once or streamed"),
        (name = "runs", description = "Runs that outlive their client"),
        (name = "conversations", description = "Conversations"),
        (name = "approvals", description = "Tool calls a person approves"),
        (name = "traces", description = "Traces of agent runs"),
        (name = "tasks", description = "Tasks"),
        (name = "tools", description = "Tools, MCP servers and remote agents"),
        (name = "schedules", description = "Schedules"),
        (name = "adapters", description = "Adapters and their platform routes"),
        (name = "integrations", description = "Integrations: settings and live probes"),
        (name = "access", description = "Access: who is calling, people, tokens, the audit log"),
        (name = "mcp", description = "MCP: the agents as tools"),
        (name = "a2a", description = "A2A: the agents for other agents"),
        (name = "meta", description = "Health, metrics and this document"),
        (name = "dashboard", description = "The dashboard"),
    )
)]
struct Annotated;

/// The document, serialized once when the router is built.
#[derive(Clone)]
pub(super) struct Document(Bytes);

/// This server's document: every annotated operation, with the security of its route.
/// `sign_in_required`: whether a caller without a credential is refused (else, bound to
/// loopback, they are the machine's owner and need nothing).
pub(super) fn document(declared: &[Declared], sign_in_required: bool) -> Document {
    let mut doc = Annotated::openapi();
    doc.info.version = env!("CARGO_PKG_VERSION").into();
    platform_routes(&mut doc);
    mcp_transport(&mut doc);
    let components = doc.components.get_or_insert_with(Default::default);
    components.add_security_scheme(
        "token",
        SecurityScheme::Http(
            HttpBuilder::new()
                .scheme(HttpAuthScheme::Bearer)
                .description(Some(
                    "An API token (`service-runtime tokens create`, or POST /api/tokens)",
                ))
                .build(),
        ),
    );
    components.add_security_scheme(
        "session",
        SecurityScheme::ApiKey(ApiKey::Cookie(ApiKeyValue::with_description(
            COOKIE.to_owned(),
            format!(
                "A person's session (POST /api/session); writes also need the {CSRF_HEADER} header"
            ),
        ))),
    );
    for route in declared {
        // `{*rest}` (the rest of the path, slashes and all) is a plain parameter in OpenAPI.
        let Some(item) = doc.paths.paths.get_mut(&route.path.replace("{*", "{")) else {
            continue;
        };
        // Platforms call adapters' routes: the host reads no credential there.
        let credentials_read = !guards::is_component_route(&route.path);
        for operation in operations_mut(item, route.method) {
            secure(
                operation,
                route.permission,
                sign_in_required,
                credentials_read,
            );
            if operation.request_body.is_some() {
                refusals_of_a_body(operation);
            }
        }
    }
    Document(
        doc.to_json()
            .expect("the OpenAPI document serializes")
            .into(),
    )
}

/// The operations of `item` a route of `method` serves: all of them for `ANY`.
fn operations_mut<'a>(item: &'a mut PathItem, method: &str) -> Vec<&'a mut Operation> {
    let PathItem {
        get,
        post,
        patch,
        delete,
        put,
        ..
    } = item;
    [
        ("GET", get),
        ("POST", post),
        ("PATCH", patch),
        ("DELETE", delete),
        ("PUT", put),
    ]
    .into_iter()
    .filter(|(served, _)| method == "ANY" || method == *served)
    .filter_map(|(_, operation)| operation.as_mut())
    .collect()
}

/// The methods an adapter's platform route takes.
const PLATFORM_METHODS: [(HttpMethod, &str); 5] = [
    (HttpMethod::Get, "get"),
    (HttpMethod::Post, "post"),
    (HttpMethod::Put, "put"),
    (HttpMethod::Patch, "patch"),
    (HttpMethod::Delete, "delete"),
];

/// Adapters' platform routes: what a platform (or a browser, for a `wasi:http` component)
/// sends an adapter. The adapter answers, as its platform's contract says: the API describes
/// only what the host adds.
fn platform_routes(doc: &mut spec::OpenApi) {
    for (path, rest) in [
        ("/api/adapters/{name}/", false),
        ("/api/adapters/{name}/{rest}", true),
    ] {
        for (method, verb) in PLATFORM_METHODS {
            let suffix = if rest { "" } else { "_root" };
            let mut operation = OperationBuilder::new()
                .operation_id(Some(format!("adapter_route_{verb}{suffix}")))
                .tag("adapters")
                .summary(Some("An adapter's platform route"))
                .description(Some(
                    "Passed to the adapter `name` as it came: its method, the path after the \
                     adapter's name, the query, the headers and the raw body (platforms sign \
                     it). The adapter's answer is served with `content-security-policy: \
                     sandbox` and `nosniff`, without cookies or CORS headers of its own. The \
                     adapter checks its platform's signature; the host asks for no credential.",
                ))
                .parameter(path_parameter("name", "The adapter's name"))
                .response(
                    "default",
                    ResponseBuilder::new()
                        .description("the adapter's answer: its status, headers and body")
                        .build(),
                );
            if rest {
                operation = operation.parameter(path_parameter(
                    "rest",
                    "The rest of the path, slashes included",
                ));
            }
            let mut operation = operation.build();
            for (status, said) in [
                ("404", "no such adapter"),
                ("413", "the body is larger than the API's limit"),
                ("502", "the adapter's answer broke the contract"),
                ("503", "the adapter is loading, off, busy or out of time"),
            ] {
                answer(&mut operation, status, said);
            }
            doc.paths.add_path_operation(path, vec![method], operation);
        }
    }
}

/// `/mcp`: the agents as tools over MCP's Streamable HTTP transport (stateless: each POST is
/// served on its own). The protocol is MCP's; the document names the transport's answers.
fn mcp_transport(doc: &mut spec::OpenApi) {
    let mut operation = OperationBuilder::new()
        .operation_id(Some("mcp"))
        .tag("mcp")
        .summary(Some("MCP (Streamable HTTP)"))
        .description(Some(
            "One JSON-RPC 2.0 message of the Model Context Protocol: `initialize`, \
             `tools/list`, `tools/call` (each agent is a tool `ask_<agent>`), and the \
             protocol's notifications. The request must accept both `application/json` and \
             `text/event-stream`. With `SERVICE_MCP_TOKEN` set, a client may send that token \
             instead, and every client must send a token. GET and DELETE answer 405: no \
             session is kept.",
        ))
        .request_body(Some(
            RequestBodyBuilder::new()
                .description(Some("A JSON-RPC 2.0 message of MCP"))
                .content("application/json", Content::new(None::<Ref>))
                .required(Some(Required::True))
                .build(),
        ))
        .response(
            "200",
            ResponseBuilder::new()
                .description("the JSON-RPC response, as a server-sent event")
                .content("text/event-stream", Content::new(None::<Ref>))
                .build(),
        )
        .response(
            "202",
            ResponseBuilder::new()
                .description("a notification or a response, taken")
                .build(),
        )
        .response(
            "400",
            ResponseBuilder::new()
                .description("a JSON-RPC error: a header or protocol version the transport refuses")
                .content("application/json", Content::new(None::<Ref>))
                .build(),
        )
        .response(
            "404",
            ResponseBuilder::new()
                .description("a JSON-RPC error: a method the protocol version does not know")
                .content("application/json", Content::new(None::<Ref>))
                .build(),
        )
        .build();
    for (status, said) in [
        (
            "406",
            "the request does not accept both JSON and server-sent events",
        ),
        (
            "415",
            "the body is not a JSON-RPC message, or not sent as `application/json`",
        ),
        ("429", "past the caller's run budget"),
    ] {
        answer(&mut operation, status, said);
    }
    doc.paths
        .add_path_operation("/mcp", vec![HttpMethod::Post], operation);
}

fn path_parameter(name: &str, said: &str) -> utoipa::openapi::path::Parameter {
    ParameterBuilder::new()
        .name(name)
        .parameter_in(ParameterIn::Path)
        .required(Required::True)
        .description(Some(said))
        .schema(Some(ObjectBuilder::new().schema_type(Type::String)))
        .build()
}

/// Says who may call `operation`: anyone for an open route; else a token or a session whose
/// role holds `permission`, with the 401 and 403 answers.
fn secure(
    operation: &mut Operation,
    permission: Permission,
    sign_in_required: bool,
    credentials_read: bool,
) {
    let Some(role) = permission.least_role() else {
        operation.security = Some(vec![SecurityRequirement::default()]);
        // A credential is checked wherever it is read: a bad one is never taken for none.
        if credentials_read {
            answer(operation, "401", "a credential was sent that names no one");
        }
        return;
    };
    let mut ways = vec![
        SecurityRequirement::new("token", Vec::<String>::new()),
        SecurityRequirement::new("session", Vec::<String>::new()),
    ];
    if !sign_in_required {
        ways.push(SecurityRequirement::default());
    }
    operation.security = Some(ways);
    let permission = permission.as_str();
    let note = format!(
        "Needs the permission `{permission}` (the role `{role}` or above{}).",
        if sign_in_required {
            ""
        } else {
            "; on this server, bound to loopback, a request without a credential is the owner's"
        }
    );
    operation.description = Some(match operation.description.take() {
        Some(said) => format!("{said}\n\n{note}"),
        None => note,
    });
    for (status, said) in [
        ("401", "no credential, or one that names no one"),
        ("403", "the caller's role lacks the permission"),
    ] {
        answer(operation, status, said);
    }
}

/// Operations that take their body as it comes (their protocol answers what is wrong with
/// it): only its size is refused before the handler.
const RAW_BODIES: [&str; 2] = ["a2a_call", "mcp"];

/// Adds the answers every route that reads a JSON body may give before its handler runs.
fn refusals_of_a_body(operation: &mut Operation) {
    answer(operation, "413", "the body is larger than the API's limit");
    if RAW_BODIES.contains(&operation.operation_id.as_deref().unwrap_or_default()) {
        return;
    }
    for (status, said) in [
        ("400", "the body is not JSON of the documented shape"),
        ("415", "the body is not sent as `application/json`"),
    ] {
        answer(operation, status, said);
    }
}

/// Adds an error answer of `status`; one the operation states already says this too.
fn answer(operation: &mut Operation, status: &str, said: &str) {
    let answers = &mut operation.responses.responses;
    match answers.get_mut(status) {
        Some(RefOr::T(stated)) if !stated.description.contains(said) => {
            stated.description = format!("{}; or {said}", stated.description);
        }
        Some(_) => {}
        None => {
            answers.insert(status.into(), error_answer(said));
        }
    }
}

fn error_answer(said: &str) -> RefOr<Response> {
    ResponseBuilder::new()
        .description(said)
        .content(
            "application/json",
            Content::new(Some(Ref::from_schema_name("ErrorBody"))),
        )
        .build()
        .into()
}

/// `(status, what it means)` as error answers, for the refusals several operations share.
pub(super) fn error_answers(answers: &[(&str, &str)]) -> BTreeMap<String, RefOr<Response>> {
    answers
        .iter()
        .map(|(status, said)| ((*status).to_owned(), error_answer(said)))
        .collect()
}

/// The OpenAPI 3.1 document of this API.
#[utoipa::path(
    get,
    operation_id = "openapi",
    path = "/api/openapi.json",
    tag = "meta",
    responses((status = 200, description = "This document", content_type = "application/json"))
)]
pub(super) async fn show(Extension(document): Extension<Document>) -> impl IntoResponse {
    ([(header::CONTENT_TYPE, "application/json")], document.0)
}
