//! Turning a request body into an input type, with errors in the project's own words that
//! name the field (`"tools must be a list of tool names or a comma-separated string, not a
//! number"`), never the deserializer's (`"invalid length 0, expected struct ProfileInput"`).

use std::borrow::Cow;

use axum::http::{HeaderMap, StatusCode, header};
use serde::de::DeserializeOwned;
use serde_json::Value;
use serde_path_to_error::Segment;

use super::api_error::ApiError;

/// Whether the request says its body is JSON (`application/json` or `application/*+json`).
pub(super) fn is_json(headers: &HeaderMap) -> bool {
    let Some(value) = headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
    else {
        return false;
    };
    let essence = value.split(';').next().unwrap_or("").trim();
    essence.eq_ignore_ascii_case("application/json")
        || essence.split_once('/').is_some_and(|(kind, sub)| {
            kind.eq_ignore_ascii_case("application") && sub.ends_with("+json")
        })
}

/// Parses `bytes` as a JSON object and reads `T` from it.
pub(super) fn json_object<T: DeserializeOwned>(bytes: &[u8]) -> Result<T, ApiError> {
    let value: Value = serde_json::from_slice(bytes).map_err(|e| {
        ApiError::new(
            StatusCode::BAD_REQUEST,
            format!(
                "the request body is not valid JSON (line {}, column {})",
                e.line(),
                e.column()
            ),
        )
    })?;
    if !value.is_object() {
        return Err(ApiError::new(
            StatusCode::BAD_REQUEST,
            format!(
                "the request body must be a JSON object, not {}",
                kind_of(&value)
            ),
        ));
    }
    serde_path_to_error::deserialize(&value).map_err(|e| {
        let segments: Vec<&Segment> = e.path().iter().collect();
        let problem = Problem {
            path: path_text(&segments),
            value: value_at(&value, &segments),
            message: e.inner().to_string(),
        };
        let (field, message) = problem.describe();
        let error = ApiError::new(StatusCode::BAD_REQUEST, message);
        match field {
            Some(field) => error.with_field(field),
            None => error,
        }
    })
}

/// One deserialization failure: where it happened, the value found there, and what serde
/// said about it.
struct Problem<'a> {
    /// `tools[1]`, `a.b`; empty for the body itself.
    path: String,
    value: Option<&'a Value>,
    message: String,
}

impl Problem<'_> {
    /// The top-level field to blame and the message in the API's words.
    fn describe(&self) -> (Option<String>, String) {
        let top = self.path.split(['.', '[']).next().unwrap_or("");
        let blamed = |name: &str| (!name.is_empty()).then(|| name.to_owned());
        if let Some(missing) = self
            .message
            .strip_prefix("missing field `")
            .and_then(|rest| rest.split_once('`'))
            .map(|(name, _)| name)
        {
            let name = self.child(missing);
            let field = if top.is_empty() { missing } else { top };
            return (blamed(field), format!("{name} is required"));
        }
        let subject = if self.path.is_empty() {
            "the request body"
        } else {
            &self.path
        };
        let message = &self.message;
        let expected = message.split_once(", expected ").map(|(_, e)| e);
        let message = if message.starts_with("invalid type: ") {
            let found = self.value.map_or("something else", kind_of);
            let expected = expected_text(expected.unwrap_or("something else"));
            format!("{subject} must be {expected}, not {found}")
        } else if let Some(rest) = message.strip_prefix("unknown variant ") {
            // `maybe`, expected `approve` or `deny` / expected one of `a`, `b`, `c`
            let found = rest.split('`').nth(1).unwrap_or_default();
            let accepted = expected.map_or_else(|| "something else".into(), |e| e.replace('`', ""));
            format!("{subject} must be {accepted}, not {:?}", clip(found))
        } else if let (true, Some(expected)) = (
            message.starts_with("invalid value: ") || message.starts_with("invalid length "),
            expected,
        ) {
            format!("{subject} must be {}", expected_text(expected))
        } else {
            // Messages of the project's own deserializers (`Error::custom`) are already ours.
            format!("{subject} is not valid: {message}")
        };
        (blamed(top), message)
    }

    fn child(&self, name: &str) -> String {
        if self.path.is_empty() {
            name.to_owned()
        } else {
            format!("{}.{name}", self.path)
        }
    }
}

/// The most of a value found that an error repeats: a request may send megabytes.
const SHOWN_CHARS: usize = 64;

fn clip(text: &str) -> Cow<'_, str> {
    service_contract::registry::clip(text, SHOWN_CHARS)
}

/// What serde expected, as a person would say it.
fn expected_text(expected: &str) -> Cow<'_, str> {
    match expected {
        "a sequence" => "a list".into(),
        "a boolean" => "true or false".into(),
        "u8" | "u16" | "u32" | "u64" | "usize" => "a whole number of at least 0".into(),
        "i8" | "i16" | "i32" | "i64" | "isize" => "a whole number".into(),
        "f32" | "f64" => "a number".into(),
        "a map" => "an object".into(),
        other if other.starts_with("struct ") => "an object".into(),
        other => other.into(),
    }
}

/// `a string`, `a number`, ... for the value found.
fn kind_of(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "true or false",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "a list",
        Value::Object(_) => "an object",
    }
}

fn path_text(segments: &[&Segment]) -> String {
    let mut text = String::new();
    for segment in segments {
        match segment {
            Segment::Seq { index } => text.push_str(&format!("[{index}]")),
            Segment::Map { key } | Segment::Enum { variant: key } => {
                if !text.is_empty() {
                    text.push('.');
                }
                text.push_str(key);
            }
            Segment::Unknown => {}
        }
    }
    text
}

fn value_at<'v>(value: &'v Value, segments: &[&Segment]) -> Option<&'v Value> {
    segments
        .iter()
        .try_fold(value, |current, segment| match segment {
            Segment::Seq { index } => current.get(index),
            Segment::Map { key } => current.get(key),
            Segment::Enum { .. } | Segment::Unknown => Some(current),
        })
}

#[cfg(test)]
mod tests {
    use serde::Deserialize;

    use super::*;

    #[derive(Debug, Deserialize)]
    #[allow(dead_code)]
    struct Input {
        name: Option<String>,
        key: String,
        tags: Option<Vec<String>>,
        limit: Option<u32>,
        flag: Option<bool>,
    }

    fn error_of(body: &str) -> (Option<String>, String) {
        let error = json_object::<Input>(body.as_bytes()).unwrap_err();
        (error.field().map(str::to_owned), error.message().to_owned())
    }

    #[test]
    fn wrong_types_name_the_field_and_both_kinds() {
        assert_eq!(
            error_of(r#"{"key": "k", "name": 5}"#),
            (
                Some("name".into()),
                "name must be a string, not a number".into()
            )
        );
        assert_eq!(
            error_of(r#"{"key": "k", "tags": ["a", 1]}"#),
            (
                Some("tags".into()),
                "tags[1] must be a string, not a number".into()
            )
        );
        assert_eq!(
            error_of(r#"{"key": "k", "tags": "a"}"#).1,
            "tags must be a list, not a string"
        );
        assert_eq!(
            error_of(r#"{"key": "k", "limit": -1}"#).1,
            "limit must be a whole number of at least 0"
        );
        assert_eq!(
            error_of(r#"{"key": "k", "flag": "yes"}"#).1,
            "flag must be true or false, not a string"
        );
    }

    #[test]
    fn a_missing_field_is_required() {
        assert_eq!(
            error_of(r#"{"name": "n"}"#),
            (Some("key".into()), "key is required".into())
        );
    }

    #[test]
    fn the_body_must_be_a_json_object() {
        assert_eq!(
            error_of("[]"),
            (
                None,
                "the request body must be a JSON object, not a list".into()
            )
        );
        assert_eq!(
            error_of("{not json").1,
            "the request body is not valid JSON (line 1, column 2)"
        );
    }

    #[test]
    fn json_content_types() {
        let with = |value: &str| {
            let mut headers = HeaderMap::new();
            headers.insert(header::CONTENT_TYPE, value.parse().unwrap());
            is_json(&headers)
        };
        assert!(with("application/json"));
        assert!(with("Application/JSON; charset=utf-8"));
        assert!(with("application/merge-patch+json"));
        assert!(!with("text/plain"));
        assert!(!with("application/x-www-form-urlencoded"));
        assert!(!is_json(&HeaderMap::new()));
    }
}
