//! `GET /api/openapi.json`: the API as an OpenAPI 3.1 document. Each operation comes from its
//! handler's `#[utoipa::path]` and the types the handler reads and answers; who may call it
//! comes from where it is routed (`routes`): its permission becomes the operation's security and
//! its 401 and 403 answers, so the document and the router cannot disagree on it.

use axum::Extension;
use axum::body::Bytes;
use axum::http::header;
use axum::response::IntoResponse;
use utoipa::OpenApi;
use utoipa::openapi::path::{Operation, PathItem};
use utoipa::openapi::response::ResponseBuilder;
use utoipa::openapi::security::{
    ApiKey, ApiKeyValue, HttpAuthScheme, HttpBuilder, SecurityRequirement, SecurityScheme,
};
use utoipa::openapi::{Content, Ref};

use super::api_error::ErrorBody;
use super::identity::CSRF_HEADER;
use super::routes::Declared;
use super::{
    adapters, agents, audit, chat, health, mcp_servers, me, openapi, remote_agents, schedules,
    session, single_sign_on, store, tasks, tokens, tools, traces, users,
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
    ),
    components(schemas(ErrorBody))
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
        let Some(item) = doc.paths.paths.get_mut(&route.path) else {
            continue;
        };
        if let Some(operation) = operation_mut(item, route.method) {
            secure(operation, route.permission, sign_in_required);
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

fn operation_mut<'a>(item: &'a mut PathItem, method: &str) -> Option<&'a mut Operation> {
    match method {
        "GET" => item.get.as_mut(),
        "POST" => item.post.as_mut(),
        "PATCH" => item.patch.as_mut(),
        "DELETE" => item.delete.as_mut(),
        "PUT" => item.put.as_mut(),
        _ => None,
    }
}

/// Says who may call `operation`: anyone for an open route; else a token or a session whose
/// role holds `permission`, with the 401 and 403 answers.
fn secure(operation: &mut Operation, permission: Permission, sign_in_required: bool) {
    let Some(role) = permission.least_role() else {
        operation.security = Some(vec![SecurityRequirement::default()]);
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

/// Adds the answers every route that reads a JSON body may give before its handler runs.
fn refusals_of_a_body(operation: &mut Operation) {
    for (status, said) in [
        ("400", "the body is not JSON of the documented shape"),
        ("413", "the body is larger than the API's limit"),
        ("415", "the body is not sent as `application/json`"),
    ] {
        answer(operation, status, said);
    }
}

fn answer(operation: &mut Operation, status: &str, said: &str) {
    operation
        .responses
        .responses
        .entry(status.into())
        .or_insert_with(|| {
            ResponseBuilder::new()
                .description(said)
                .content(
                    "application/json",
                    Content::new(Some(Ref::from_schema_name("ErrorBody"))),
                )
                .build()
                .into()
        });
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
