//! What a profile accepts, as the API's OpenAPI document states it: the rules `profiles` and
//! `AgentAccess::check` enforce, written as JSON Schema. Each schema forbids only what the
//! server refuses (a fuzzer sends what a schema forbids and expects it refused); rules a schema
//! cannot state (a tool name the registry must know, a name not yet taken) stay in words.

use utoipa::openapi::schema::{
    AdditionalProperties, AllOfBuilder, AnyOfBuilder, ArrayBuilder, Object, ObjectBuilder,
    OneOfBuilder, Schema, Type,
};
use utoipa::openapi::{Ref, RefOr};

use super::profiles::{MAX_NAME, MAX_PROMPT, MAX_TOOL_NAME};
use crate::access::AgentAccess;

/// The characters `char::is_whitespace` (and so `str::trim`) takes for space.
const SPACE: &str = r"\t-\r \x85\xa0\u1680\u2000-\u200a\u2028\u2029\u202f\u205f\u3000";
/// Control characters (`char::is_control`).
const CONTROL: &str = r"\x00-\x1f\x7f-\x9f";

fn text() -> ObjectBuilder {
    ObjectBuilder::new().schema_type(Type::String)
}

/// A profile's name: 1 to 64 characters, no control characters, no space at either end.
pub(super) fn name() -> Object {
    let edge = format!("[^{SPACE}{CONTROL}]");
    text()
        .max_length(Some(MAX_NAME))
        .pattern(Some(format!("^{edge}(?:[^{CONTROL}]*{edge})?$")))
        .description(Some(
            "Exact and case-sensitive; 1 to 64 characters, no control characters and no space \
             at either end",
        ))
        .build()
}

/// Text with something besides space in it (what `trim` leaves non-empty).
pub fn not_blank() -> Object {
    text().pattern(Some(format!("[^{SPACE}]"))).build()
}

/// A system prompt: something besides space, at most 32,768 characters.
pub(super) fn prompt() -> Object {
    text()
        .max_length(Some(MAX_PROMPT))
        .pattern(Some(format!("[^{SPACE}]")))
        .build()
}

/// `#rgb` or `#rrggbb`; blank (or `null`) for none.
pub(super) fn color() -> Object {
    text()
        .schema_type(utoipa::openapi::schema::SchemaType::from_iter([
            Type::String,
            Type::Null,
        ]))
        .pattern(Some(format!(
            "^[{SPACE}]*(?:#(?:[0-9a-fA-F]{{3}}|[0-9a-fA-F]{{6}}))?[{SPACE}]*$"
        )))
        .build()
}

/// One tool name as a list holds it (space around it is trimmed, an empty one dropped):
/// letters, digits, `_`, `-`, `.`, or a name ending in `__*` for every tool so named.
fn tool_name() -> String {
    let stem = MAX_TOOL_NAME - "__*".len();
    format!(
        "[{SPACE}]*(?:[A-Za-z0-9_.-]{{1,{MAX_TOOL_NAME}}}|[A-Za-z0-9_.-]{{1,{stem}}}__\\*)?[{SPACE}]*"
    )
}

/// A tool list: a list of names, or one string of names separated by commas (as forms send
/// it), or `null` for every tool not gated. Each must be a tool the server knows (`GET
/// /api/tools`) or a bundle recommends.
pub(super) fn tools() -> RefOr<Schema> {
    let item = tool_name();
    OneOfBuilder::new()
        .item(ObjectBuilder::new().schema_type(Type::Null))
        .item(ArrayBuilder::new().items(text().pattern(Some(format!("^{item}$")))))
        .item(
            text()
                .pattern(Some(format!("^{item}(?:,{item})*$")))
                .description(Some("tool names separated by commas")),
        )
        .into()
}

/// A list of tool names (each as in [`tools`]), or `null` for every tool not gated.
pub(super) fn tool_list() -> RefOr<Schema> {
    OneOfBuilder::new()
        .item(ObjectBuilder::new().schema_type(Type::Null))
        .item(ArrayBuilder::new().items(text().pattern(Some(format!("^{}$", tool_name())))))
        .into()
}

impl utoipa::PartialSchema for AgentAccess {
    fn schema() -> RefOr<Schema> {
        let edge = format!("[^{SPACE}]");
        let group = text()
            .max_length(Some(AgentAccess::MAX_GROUP_CHARS))
            .pattern(Some(format!("^{edge}(?:[\\s\\S]*{edge})?$")));
        let fields = ObjectBuilder::new()
            .property(
                "roles",
                ArrayBuilder::new().items(Ref::from_schema_name("Role")),
            )
            .property(
                "groups",
                ArrayBuilder::new()
                    .items(group)
                    .max_items(Some(AgentAccess::MAX_GROUPS)),
            )
            .additional_properties(Some(AdditionalProperties::FreeForm(false)));
        let at_least_one = |field: &str| {
            ObjectBuilder::new()
                .property(field, ArrayBuilder::new().min_items(Some(1)))
                .required(field)
        };
        AllOfBuilder::new()
            .item(fields)
            .item(
                AnyOfBuilder::new()
                    .item(at_least_one("roles"))
                    .item(at_least_one("groups")),
            )
            .description(Some(
                "Who may use the agent besides admins: holders of one of `roles`, or people in \
                 one of the identity provider's `groups` (at least one of either)",
            ))
            .into()
    }
}

impl utoipa::ToSchema for AgentAccess {
    fn schemas(schemas: &mut Vec<(String, RefOr<Schema>)>) {
        schemas.push((
            "Role".into(),
            <crate::access::Role as utoipa::PartialSchema>::schema(),
        ));
    }
}
