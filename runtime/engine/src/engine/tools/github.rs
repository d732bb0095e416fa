//! `github_read`: reads a file or lists a directory of a public repository through the GitHub
//! REST API (`GITHUB_TOKEN` optional, for rate limits and private repositories).

use std::sync::Arc;
use std::time::Duration;

use base64::Engine as _;
use serde::Deserialize;
use serde_json::{Value, json};

use service_contract::tools::{RegistryError, Tool, ToolRegistry, args};

use crate::net::{self, GuardedClient};
use crate::settings_store::SettingsStore;

const DEFAULT_BASE: &str = "https://api.github.com";
const MAX_RESPONSE: usize = 2 * 1024 * 1024;
const MAX_FILE_CHARS: usize = 100_000;

#[derive(Deserialize)]
struct Read {
    repo: String,
    #[serde(default)]
    path: String,
    #[serde(rename = "ref")]
    reference: Option<String>,
}

/// `owner/name` with the characters GitHub allows; paths must not climb out with `..`.
fn check(read: &Read) -> Result<(), String> {
    let valid_part = |p: &str| {
        !p.is_empty()
            && p.chars()
                .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'))
    };
    match read.repo.split_once('/') {
        Some((owner, name)) if valid_part(owner) && valid_part(name) => {}
        _ => {
            return Err(format!(
                "repo must look like owner/name, got {:?}",
                read.repo
            ));
        }
    }
    if read
        .path
        .split('/')
        .any(|segment| segment == ".." || segment == ".")
    {
        return Err("path must not contain . or .. segments".into());
    }
    Ok(())
}

fn summarise(value: &Value) -> Result<Value, String> {
    if let Some(entries) = value.as_array() {
        let entries: Vec<Value> = entries
            .iter()
            .map(|e| json!({"name": e["name"], "type": e["type"], "path": e["path"], "size": e["size"]}))
            .collect();
        return Ok(json!({"type": "dir", "entries": entries}));
    }
    match (
        value["type"].as_str(),
        value["encoding"].as_str(),
        value["content"].as_str(),
    ) {
        (Some("file"), Some("base64"), Some(content)) => {
            let cleaned: String = content.chars().filter(|c| !c.is_whitespace()).collect();
            let bytes = base64::engine::general_purpose::STANDARD
                .decode(cleaned)
                .map_err(|e| format!("cannot decode the file: {e}"))?;
            let text =
                String::from_utf8(bytes).map_err(|_| "the file is not UTF-8 text".to_owned())?;
            let truncated = text.chars().count() > MAX_FILE_CHARS;
            let text: String = text.chars().take(MAX_FILE_CHARS).collect();
            Ok(
                json!({"type": "file", "path": value["path"], "size": value["size"], "content": text, "truncated": truncated}),
            )
        }
        (Some(kind), ..) => Err(format!("cannot read a {kind} entry")),
        _ => Err("unexpected answer from the GitHub API".into()),
    }
}

async fn read(read: Read, env: &SettingsStore) -> Result<String, String> {
    check(&read)?;
    let configured = env.get("SERVICE_GITHUB_API_BASE");
    let base = configured
        .clone()
        .unwrap_or_else(|| DEFAULT_BASE.to_owned());
    let client = GuardedClient::new(
        configured.as_deref().and_then(net::host_of),
        Duration::from_secs(20),
    )
    .map_err(|e| e.to_string())?;
    let mut url = format!(
        "{}/repos/{}/contents/{}",
        base.trim_end_matches('/'),
        read.repo,
        read.path.trim_matches('/')
    );
    if let Some(reference) = &read.reference {
        url.push_str("?ref=");
        url.push_str(&reference.replace(
            |c: char| !c.is_ascii_alphanumeric() && !"-_./".contains(c),
            "",
        ));
    }
    let mut request = client
        .get(&url)?
        .header("accept", "application/vnd.github+json");
    if let Some(token) = env.get("GITHUB_TOKEN") {
        request = request.bearer_auth(token);
    }
    let response = request.send().await.map_err(net::describe)?;
    let status = response.status();
    if !status.is_success() {
        return Err(format!(
            "GitHub answered HTTP {status} for {}/{}",
            read.repo, read.path
        ));
    }
    let body = net::body_capped(response, MAX_RESPONSE).await?;
    let value: Value =
        serde_json::from_slice(&body).map_err(|e| format!("GitHub sent invalid JSON: {e}"))?;
    Ok(summarise(&value)?.to_string())
}

pub(super) fn register(
    registry: &ToolRegistry,
    env: Arc<SettingsStore>,
) -> Result<(), RegistryError> {
    registry.register(
        Tool::new(
            "github_read",
            "Reads a file, or lists a directory, of a GitHub repository.",
            json!({
                "type": "object",
                "properties": {
                    "repo": {"type": "string", "description": "owner/name"},
                    "path": {"type": "string", "description": "File or directory path; empty for the root"},
                    "ref": {"type": "string", "description": "Branch, tag or commit (default branch when omitted)"}
                },
                "required": ["repo"],
                "additionalProperties": false
            }),
            move |input, _| {
                let env = Arc::clone(&env);
                async move { read(args(input)?, &env).await }
            },
        ),
        false,
    )
}
