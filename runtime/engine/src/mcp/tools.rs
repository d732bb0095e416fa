//! MCP tools as registry tools: their names, what of their descriptions and schemas is kept,
//! and what a call's result becomes for the model.

use rmcp::model::{CallToolResult, ContentBlock, ResourceContents};
use serde_json::Value;

/// Tools registered per server; more are skipped (and named on its status).
pub(crate) const MAX_TOOLS: usize = 64;
/// A tool's description is cut to this many characters.
pub(crate) const MAX_DESCRIPTION_CHARS: usize = 2_048;
/// A tool whose input schema is larger is skipped.
pub(super) const MAX_SCHEMA_BYTES: usize = 16 << 10;
/// The registry's limit on a tool's name.
const MAX_NAME: usize = 64;

/// What every tool of `server` is named with.
pub(super) fn prefix(server: &str) -> String {
    format!("mcp__{server}__")
}

/// `mcp__<server>__<tool>`, with characters a model API would refuse as `_`; `None` when that
/// is longer than a tool name may be.
pub(crate) fn registry_name(server: &str, tool: &str) -> Option<String> {
    prefixed(&prefix(server), tool)
}

/// `<prefix><tool>` with `tool` made [`plain`]; `None` when that is longer than a tool name may
/// be.
pub(crate) fn prefixed(prefix: &str, tool: &str) -> Option<String> {
    let tool = plain(tool);
    let name = format!("{prefix}{tool}");
    (!tool.is_empty() && name.len() <= MAX_NAME).then_some(name)
}

/// `text` with every character but ASCII letters, digits, `_` and `-` as `_`: what every
/// model API takes in a tool name.
pub(crate) fn plain(text: &str) -> String {
    text.chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '_' || c == '-' {
                c
            } else {
                '_'
            }
        })
        .collect()
}

/// A tool's description as the model sees it.
pub(super) fn description(tool: &rmcp::model::Tool) -> String {
    let text = tool
        .description
        .as_deref()
        .or(tool.title.as_deref())
        .unwrap_or_default();
    text.chars().take(MAX_DESCRIPTION_CHARS).collect()
}

/// A tool's input schema, or why it is not used.
pub(super) fn schema(tool: &rmcp::model::Tool) -> Result<Value, String> {
    let schema = Value::Object(tool.input_schema.as_ref().clone());
    let size = schema.to_string().len();
    if size > MAX_SCHEMA_BYTES {
        return Err(format!(
            "its input schema has {size} bytes, more than {MAX_SCHEMA_BYTES}"
        ));
    }
    Ok(schema)
}

/// A call's result for the model: its text, one block a line (other content described in
/// brackets), or the structured result when there is no text; a tool-level error is `Err`.
pub(super) fn answer(result: CallToolResult) -> Result<String, String> {
    let mut parts: Vec<String> = result.content.iter().map(describe).collect();
    if parts.is_empty()
        && let Some(structured) = &result.structured_content
    {
        parts.push(structured.to_string());
    }
    let text = parts.join("\n");
    if result.is_error == Some(true) {
        Err(if text.is_empty() {
            "the tool reported an error".to_owned()
        } else {
            text
        })
    } else {
        Ok(text)
    }
}

fn describe(block: &ContentBlock) -> String {
    match block {
        ContentBlock::Text(text) => text.text.clone(),
        ContentBlock::Image(image) => format!("[image, {}]", image.mime_type),
        ContentBlock::Audio(audio) => format!("[audio, {}]", audio.mime_type),
        ContentBlock::Resource(embedded) => match &embedded.resource {
            ResourceContents::TextResourceContents { text, .. } => text.clone(),
            ResourceContents::BlobResourceContents { uri, .. } => format!("[resource {uri}]"),
            _ => "[a resource of a kind this runtime does not read]".to_owned(),
        },
        ContentBlock::ResourceLink(link) => format!("[link {}]", link.uri),
        _ => "[content of a kind this runtime does not read]".to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use rmcp::model::{CallToolResult, ContentBlock};
    use serde_json::json;

    use super::*;

    #[test]
    fn names_keep_to_what_model_apis_take() {
        assert_eq!(
            registry_name("files", "read_file").as_deref(),
            Some("mcp__files__read_file")
        );
        assert_eq!(
            registry_name("files", "fs.read/all").as_deref(),
            Some("mcp__files__fs_read_all")
        );
        assert_eq!(registry_name("files", ""), None);
        assert_eq!(registry_name("files", &"x".repeat(60)), None);
    }

    #[test]
    fn results_become_text_and_errors_stay_errors() {
        let mut result =
            CallToolResult::success(vec![ContentBlock::text("one"), ContentBlock::text("two")]);
        assert_eq!(answer(result.clone()), Ok("one\ntwo".to_owned()));
        result.content.clear();
        result.structured_content = Some(json!({"sum": 3}));
        assert_eq!(answer(result), Ok("{\"sum\":3}".to_owned()));
        let failed = CallToolResult::error(vec![ContentBlock::text("no such file")]);
        assert_eq!(answer(failed), Err("no such file".to_owned()));
        assert_eq!(
            answer(CallToolResult::error(vec![])),
            Err("the tool reported an error".to_owned())
        );
    }
}
