//! `service-runtime mcp import FILE`: the `mcpServers` JSON that desktop and editor clients keep
//! (`{"mcpServers": {NAME: {command, args, env} | {url, headers}}}`, or `servers` as VS Code
//! writes it) as `[mcp.servers.NAME]` entries of `config.toml`. A value that looks like a
//! credential never reaches `config.toml`: it becomes a `{{secret:VAR}}` placeholder, and the
//! value is for `.env` under VAR.

use std::collections::BTreeMap;

use anyhow::{Context, bail};
use serde::Deserialize;
use serde_json::Value;

use crate::placeholders;

/// What an import adds.
#[derive(Debug, PartialEq, Eq)]
pub struct Imported {
    /// The new `[mcp.servers.NAME]` tables, as TOML text to append to `config.toml`.
    pub toml: String,
    /// The servers, in the order written.
    pub servers: Vec<String>,
    /// `(VAR, value)` for `.env`: the credentials the placeholders name.
    pub secrets: Vec<(String, String)>,
}

/// One server as clients write it.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ClientEntry {
    command: Option<String>,
    #[serde(default)]
    args: Vec<String>,
    #[serde(default)]
    env: BTreeMap<String, String>,
    url: Option<String>,
    #[serde(default)]
    headers: BTreeMap<String, String>,
    /// `stdio`, `http` or `streamable-http`; implied by `command` or `url` here.
    #[serde(rename = "type")]
    transport: Option<String>,
}

/// Words in a variable or header name that mark its value as a credential (as `config.toml`'s
/// own check reads them).
pub(crate) const CREDENTIAL_WORDS: [&str; 5] =
    ["authorization", "token", "key", "secret", "password"];

pub(crate) fn is_credential(name: &str) -> bool {
    let lower = name.to_ascii_lowercase();
    CREDENTIAL_WORDS.iter().any(|word| lower.contains(word))
}

/// Reads a client's JSON and makes the entries to add.
pub fn convert(json: &str) -> anyhow::Result<Imported> {
    let document: Value = serde_json::from_str(json).context("the file is not JSON")?;
    let servers = document
        .get("mcpServers")
        .or_else(|| document.get("servers"))
        .and_then(Value::as_object)
        .context("the file has no \"mcpServers\" (or \"servers\") object")?;
    if servers.is_empty() {
        bail!("the file names no MCP server");
    }
    let mut imported = Imported {
        toml: String::new(),
        servers: Vec::new(),
        secrets: Vec::new(),
    };
    for (name, entry) in servers {
        let entry: ClientEntry =
            serde_json::from_value(entry.clone()).with_context(|| format!("server {name:?}"))?;
        let table = entry
            .table(name, &mut imported.secrets)
            .with_context(|| format!("server {name:?}"))?;
        let mut wrapped = toml::Table::new();
        let mut servers = toml::Table::new();
        let mut mcp = toml::Table::new();
        servers.insert(name.clone(), toml::Value::Table(table));
        mcp.insert("servers".into(), toml::Value::Table(servers));
        wrapped.insert("mcp".into(), toml::Value::Table(mcp));
        imported.toml.push('\n');
        imported.toml.push_str(&toml::to_string(&wrapped)?);
        imported.servers.push(name.clone());
    }
    Ok(imported)
}

impl ClientEntry {
    fn table(
        self,
        server: &str,
        secrets: &mut Vec<(String, String)>,
    ) -> anyhow::Result<toml::Table> {
        if let Some(kind) = &self.transport
            && !["stdio", "http", "streamable-http"].contains(&kind.as_str())
        {
            bail!("type {kind:?} is not served here: stdio (a command) or Streamable HTTP (a url)");
        }
        let mut table = toml::Table::new();
        let mut secret = |name: &str, value: String| -> String {
            if !is_credential(name) || placeholders::has_placeholder(&value) {
                return value;
            }
            let variable = variable_for(server, name);
            secrets.push((variable.clone(), value));
            format!("{{{{secret:{variable}}}}}")
        };
        let strings = |map: BTreeMap<String, String>,
                       secret: &mut dyn FnMut(&str, String) -> String| {
            map.into_iter()
                .map(|(name, value)| {
                    let value = secret(&name, value);
                    (name, toml::Value::String(value))
                })
                .collect::<toml::Table>()
        };
        if let Some(command) = self.command {
            table.insert("command".into(), command.into());
            if !self.args.is_empty() {
                table.insert("args".into(), self.args.into());
            }
            if !self.env.is_empty() {
                table.insert("env".into(), strings(self.env, &mut secret).into());
            }
        }
        if let Some(url) = self.url {
            table.insert("url".into(), url.into());
            if !self.headers.is_empty() {
                table.insert("headers".into(), strings(self.headers, &mut secret).into());
            }
        }
        Ok(table)
    }
}

/// The variable a credential goes to: an environment variable's own name, else
/// `MCP_<SERVER>_<NAME>` in capitals.
fn variable_for(server: &str, name: &str) -> String {
    let is_variable = !name.is_empty()
        && name
            .bytes()
            .all(|b| b.is_ascii_uppercase() || b.is_ascii_digit() || b == b'_');
    if is_variable {
        return name.to_owned();
    }
    let upper = |text: &str| -> String {
        text.chars()
            .map(|c| match c {
                'a'..='z' | 'A'..='Z' | '0'..='9' => c.to_ascii_uppercase(),
                _ => '_',
            })
            .collect()
    };
    format!("MCP_{}_{}", upper(server), upper(name))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::FileConfig;

    #[test]
    fn client_entries_become_config_entries_with_credentials_as_placeholders() {
        let imported = convert(
            r#"{"mcpServers": {
                "files": {"command": "npx", "args": ["-y", "files-server", "/srv"],
                          "env": {"GITHUB_TOKEN": "ghp_value", "LOG_LEVEL": "warn"}},
                "issues": {"type": "http", "url": "https://mcp.example.com/mcp",
                           "headers": {"Authorization": "Bearer sk-value"}}
            }}"#,
        )
        .unwrap();
        assert_eq!(imported.servers, ["files", "issues"]);
        assert_eq!(
            imported.secrets,
            [
                ("GITHUB_TOKEN".to_owned(), "ghp_value".to_owned()),
                (
                    "MCP_ISSUES_AUTHORIZATION".to_owned(),
                    "Bearer sk-value".to_owned()
                ),
            ]
        );
        assert!(!imported.toml.contains("ghp_value") && !imported.toml.contains("sk-value"));
        // What it writes is a config the server reads.
        let config = FileConfig::parse(&imported.toml).unwrap();
        let servers = config.mcp.servers().unwrap();
        assert_eq!(servers.len(), 2);
        assert!(
            imported
                .toml
                .contains("{{secret:MCP_ISSUES_AUTHORIZATION}}"),
            "{}",
            imported.toml
        );
    }

    #[test]
    fn refuses_what_it_cannot_serve() {
        let error = |json: &str| format!("{:#}", convert(json).unwrap_err());
        assert!(error("[]").contains("no \"mcpServers\""));
        assert!(error(r#"{"mcpServers": {}}"#).contains("names no MCP server"));
        assert!(
            error(r#"{"mcpServers": {"a": {"type": "sse", "url": "http://h"}}}"#)
                .contains("\"sse\" is not served here")
        );
        assert!(
            error(r#"{"mcpServers": {"a": {"command": "x", "cwd": "/"}}}"#)
                .contains("unknown field `cwd`")
        );
        assert!(error("{not json").contains("not JSON"));
    }
}
